//! One truth on every surface: a workflow and a routed task tree walked through every state they can
//! take, and at each step every surface that names a task's state says the same — the task's view
//! (`GET /v1/tasks/{id}`), its row in the list (`GET /v1/tasks?run=`), the CLI (`clutch tasks show`
//! and `clutch tasks list`, as JSON), the workflow's own view (`GET /v1/workflows/{id}`) and MCP
//! (`task_get`, `workflow_get`) for workflows, the run's row in `GET /v1/runs` for the run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{self, Client};
use crate::support::{Daemon, clutch, run};

struct Surfaces {
    url: String,
    http: reqwest::Client,
    mcp: Client,
}

impl Surfaces {
    async fn get(&self, path: &str) -> Value {
        let r = self.http.get(format!("{}{path}", self.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let r = self.http.request(method, format!("{}{path}", self.url)).json(&body).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    fn cli(&self, args: &[&str]) -> Value {
        let mut cmd = clutch();
        cmd.args(args).args(["--url", &self.url, "--json"]);
        let out = run(cmd, "");
        assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out:?}"))
    }

    /// What each surface says task `task` of run `run` is.
    async fn states(&self, run: &str, task: &str, workflow: bool) -> BTreeMap<&'static str, String> {
        let text = |v: &Value| v.as_str().unwrap_or("<none>").to_owned();
        let mut said = BTreeMap::new();
        said.insert("GET /v1/tasks/{id}", text(&self.get(&format!("/v1/tasks/{task}")).await["state"]));
        let rows = self.get(&format!("/v1/tasks?run={run}&limit=200")).await;
        let row = rows["items"].as_array().unwrap().iter().find(|t| t["task_id"] == task).cloned();
        said.insert("GET /v1/tasks?run=", row.map_or_else(|| "<not listed>".into(), |r| text(&r["state"])));
        said.insert("clutch tasks show", text(&self.cli(&["tasks", "show", task])["state"]));
        let listed = self.cli(&["tasks", "list", "--run", run]);
        let items = listed.get("items").unwrap_or(&listed);
        let row = items.as_array().unwrap().iter().find(|t| t["task_id"] == task).cloned();
        said.insert("clutch tasks list", row.map_or_else(|| "<not listed>".into(), |r| text(&r["state"])));
        if workflow {
            let w = self.get(&format!("/v1/workflows/{run}")).await;
            let (_, via_mcp) = mcp::call(&self.mcp, "workflow_get", json!({"workflow_id": run})).await;
            if w["root_task_id"] == task {
                said.insert("GET /v1/workflows/{id}", text(&w["status"]));
                said.insert("MCP workflow_get", text(&via_mcp["status"]));
            } else {
                let planned = w["tasks"].as_array().unwrap().iter().find(|t| t["id"] == task).cloned();
                said.insert(
                    "GET /v1/workflows/{id}",
                    planned.map_or_else(|| "<absent>".into(), |t| text(&t["status"])),
                );
                let (_, detail) = mcp::call(&self.mcp, "task_get", json!({"task_id": task})).await;
                said.insert("MCP task_get", text(&detail["status"]));
            }
        }
        said
    }

    /// Asserts every surface says `expected` for the task (the lists follow the log a moment behind
    /// a write's answer at most, so a disagreement is retried briefly before it fails).
    async fn agree(&self, step: &str, run: &str, task: &str, workflow: bool, expected: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let said = self.states(run, task, workflow).await;
            if said.values().all(|s| s == expected) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{step}: every surface should say {expected}: {said:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn run_state(&self, run: &str) -> String {
        let runs = self.get("/v1/runs?limit=200").await;
        let row = runs["items"].as_array().unwrap().iter().find(|r| r["run_id"] == run).cloned().expect("run listed");
        row["state"].as_str().unwrap().to_owned()
    }
}

async fn surfaces(daemon: &Daemon) -> Surfaces {
    let mcp = mcp::http(&format!("{}/mcp", daemon.url), None, false).await.expect("MCP over HTTP");
    Surfaces { url: daemon.url.clone(), http: reqwest::Client::new(), mcp }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_says_the_same_on_every_surface_at_every_step() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let s = surfaces(&daemon).await;
    for name in ["ken", "ada"] {
        let card =
            json!({"v": "clutch/0.1", "agent_id": format!("agent:{name}"), "capabilities": [{"id": "skill:code"}]});
        s.send(Method::POST, "/v1/agents", card).await;
    }

    let w = s.send(Method::POST, "/v1/workflows", json!({"name": "oauth", "source": "issue 7"})).await;
    let (id, root) = (w["id"].as_str().unwrap().to_owned(), w["root_task_id"].as_str().unwrap().to_owned());
    s.agree("created", &id, &root, true, "planning").await;

    let plan = json!({"tasks": [{"name": "setup"}, {"name": "google", "depends_on": ["setup"]},
                                {"name": "github", "depends_on": [0]}]});
    let planned = s.send(Method::PUT, &format!("/v1/workflows/{id}/plan"), plan).await;
    let ids: Vec<String> =
        planned["tasks"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect();
    let [setup, google, github] = [&ids[0], &ids[1], &ids[2]];
    s.agree("planned: the root", &id, &root, true, "in_progress").await;
    s.agree("planned", &id, setup, true, "pending").await;
    assert_eq!(s.run_state(&id).await, "active");

    let ken = json!({"agent_id": "agent:ken"});
    s.send(Method::POST, &format!("/v1/tasks/{setup}/claim"), ken.clone()).await;
    s.agree("claimed", &id, setup, true, "claimed").await;
    let status = |status: &str| json!({"agent_id": "agent:ken", "status": status, "reason": "waiting for keys"});
    s.send(Method::POST, &format!("/v1/tasks/{setup}/status"), status("in_progress")).await;
    s.agree("in progress", &id, setup, true, "in_progress").await;
    let checkpoint = json!({"agent_id": "agent:ken", "type": "progress", "summary": "deps installed"});
    s.send(Method::POST, &format!("/v1/tasks/{setup}/checkpoints"), checkpoint).await;
    s.agree("a checkpoint changes no state", &id, setup, true, "in_progress").await;
    s.send(Method::POST, &format!("/v1/tasks/{setup}/status"), status("blocked")).await;
    s.agree("blocked", &id, setup, true, "blocked").await;
    // Nothing held or ready but a blocked task: the workflow is blocked.
    s.agree("blocked: the root", &id, &root, true, "blocked").await;
    s.send(Method::POST, &format!("/v1/tasks/{setup}/release"), ken.clone()).await;
    s.agree("released", &id, setup, true, "pending").await;
    s.agree("released: the root", &id, &root, true, "in_progress").await;
    s.send(Method::POST, &format!("/v1/tasks/{setup}/claim"), json!({"agent_id": "agent:ada"})).await;
    let done = json!({"agent_id": "agent:ada", "status": "completed", "outcome": "done"});
    s.send(Method::POST, &format!("/v1/tasks/{setup}/status"), done).await;
    s.agree("completed", &id, setup, true, "completed").await;

    s.send(Method::POST, &format!("/v1/tasks/{google}/claim"), ken.clone()).await;
    let failed = json!({"agent_id": "agent:ken", "status": "failed", "error": "no client id"});
    s.send(Method::POST, &format!("/v1/tasks/{google}/status"), failed).await;
    s.agree("failed", &id, google, true, "failed").await;
    s.agree("one failed, one pending: the root", &id, &root, true, "in_progress").await;
    s.send(Method::POST, &format!("/v1/tasks/{github}/claim"), ken.clone()).await;
    let done = json!({"agent_id": "agent:ken", "status": "completed", "outcome": "done"});
    s.send(Method::POST, &format!("/v1/tasks/{github}/status"), done).await;
    s.agree("completed", &id, github, true, "completed").await;
    // A task failed and nothing else can run.
    s.agree("ended: the root", &id, &root, true, "failed").await;
    assert_eq!(s.run_state(&id).await, "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_task_tree_says_the_same_on_every_surface_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    // A retry waits long enough to be seen.
    let daemon = Daemon::start_with(dir.path(), &[("CLUTCH_ENGINE_RETRY_BACKOFF", "2s")]);
    let s = surfaces(&daemon).await;
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:kim", "capabilities": [{"id": "skill:answer"}]});
    s.send(reqwest::Method::POST, "/v1/agents", card).await;

    let (run_id, thread, task) =
        (crate::support::run_id(), "thr_01JD0000000000000000000001", "task_01JD0000000000000000000001");
    let msg = |from: &str, to: &str, kind: &str, payload: Value| {
        json!({"run_id": run_id, "thread_id": thread, "task_id": task, "from": {"agent_id": from},
               "to": [{"agent_id": to}], "type": kind, "payload": payload})
    };
    let post = |m: Value| s.send(reqwest::Method::POST, "/v1/messages", m);
    let mut request = msg("user:ada", "agent:orchestrator", "task.request", json!({"goal": "answer"}));
    request["requires"] = json!(["skill:answer"]);
    post(request).await;
    s.agree("routed", &run_id, task, false, "routed").await;
    post(msg("agent:kim", "user:ada", "task.accept", json!({}))).await;
    s.agree("accepted", &run_id, task, false, "accepted").await;
    post(msg("agent:kim", "user:ada", "task.progress", json!({"pct": 40}))).await;
    s.agree("running", &run_id, task, false, "running").await;

    // A child task, sent to kim by name.
    let child = "task_01JD0000000000000000000002";
    let mut sub = msg("agent:kim", "agent:kim", "task.request", json!({"goal": "look it up"}));
    sub["task_id"] = json!(child);
    sub["parent_task_id"] = json!(task);
    post(sub).await;
    s.agree("a child: requested to kim", &run_id, child, false, "routed").await;
    let rows = s.get("/v1/tasks?agent=agent:kim").await;
    assert!(rows["items"].as_array().unwrap().iter().any(|t| t["task_id"] == child), "sent to kim by name: {rows}");
    let mut result = msg("agent:kim", "agent:kim", "task.result", json!({"text": "found"}));
    result["task_id"] = json!(child);
    post(result).await;
    s.agree("a child: completed", &run_id, child, false, "completed").await;

    let error = json!({"code": "TOOL_UNAVAILABLE", "message": "try later", "retryable": true});
    post(msg("agent:kim", "user:ada", "task.error", error)).await;
    s.agree("a retryable error", &run_id, task, false, "retrying").await;
    assert_eq!(s.run_state(&run_id).await, "active");
    // Routed again after the backoff, to the only agent that can.
    s.agree("routed again", &run_id, task, false, "routed").await;
    post(msg("agent:kim", "user:ada", "task.accept", json!({}))).await;
    post(msg("agent:kim", "user:ada", "task.result", json!({"text": "42"}))).await;
    s.agree("completed", &run_id, task, false, "completed").await;
    assert_eq!(s.run_state(&run_id).await, "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_says_the_same_on_every_surface_at_every_step() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let s = surfaces(&daemon).await;
    // A mirror played by two people: their turns wait in their inboxes until they answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let invoked = loop {
        let r = s
            .http
            .post(format!("{}/v1/positions/mirror/invoke", s.url))
            .json(&json!({"input": "6 × 7", "agents": {"Reflector": "user:bob", "Verifier": "user:ada"}}))
            .send()
            .await
            .unwrap();
        if r.status() == 201 {
            break r.json::<Value>().await.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the positions runner did not come up: {}",
            r.text().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (session, root) = (invoked["session_id"].as_str().unwrap(), invoked["task_id"].as_str().unwrap());
    let turns = |who: &'static str| {
        let s = &s;
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let inbox = s.get(&format!("/v1/inbox/{who}")).await;
                let open: Vec<String> = inbox["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["task"]["task_id"].as_str().unwrap().to_owned())
                    .collect();
                if !open.is_empty() {
                    return open;
                }
                assert!(std::time::Instant::now() < deadline, "{who} has no turn");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    for (round, answer) in [(1, "42"), (2, "CONSENSUS")] {
        let bob = turns("user:bob").await;
        let ada = turns("user:ada").await;
        let said = s.states(session, root, false).await;
        let first = said.values().next().unwrap().clone();
        assert!(said.values().all(|v| *v == first), "round {round}: the session's task: {said:#?}");
        assert!(["accepted", "running"].contains(&first.as_str()), "round {round}: a session at work: {said:#?}");
        assert_eq!(s.get(&format!("/v1/sessions/{session}")).await["status"], "RUNNING");
        assert_eq!(s.run_state(session).await, "active");
        for (who, turn) in [("user:bob", &bob[0]), ("user:ada", &ada[0])] {
            s.agree(&format!("round {round}: {who}'s turn"), session, turn, false, "routed").await;
            let reply = json!({"agent_id": who, "status": "completed", "text": answer});
            s.send(Method::POST, &format!("/v1/tasks/{turn}/reply"), reply).await;
            s.agree(&format!("round {round}: {who} answered"), session, turn, false, "completed").await;
        }
    }
    s.agree("the session ended", session, root, false, "completed").await;
    assert_eq!(s.get(&format!("/v1/sessions/{session}")).await["status"], "COMPLETED");
    assert_eq!(s.run_state(session).await, "completed");
}
