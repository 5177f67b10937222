//! The workflow API over real HTTP: the agent lifecycle of the contract (claim, plan, status,
//! checkpoints, context), refusals as data or errors with their codes, racing claims, lease expiry and
//! recovery by another agent, a daemon restart followed by the recovery flow, tokens, and git
//! workspaces.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clutch_core::access::{Grant, Role, Tokens};
use clutch_core::clock::Clock;
use clutch_store::Filter;
use serde_json::{Value, json};

use crate::{Daemon, start, start_full};

impl Daemon {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(None, method, path, body).await
    }

    async fn call_as(&self, token: Option<&str>, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self.http.request(method, format!("{}{path}", self.url));
        if let Some(b) = body {
            r = r.json(&b);
        }
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap())
    }

    async fn register(&self, name: &str) {
        let card = json!({"agent_id": format!("agent:{name}"), "capabilities": []});
        let (status, body) = self.call("POST", "/v1/agents", Some(card)).await;
        assert_eq!(status, 201, "{body}");
    }

    /// A workflow with the plan `tasks` (`[{name, depends_on?}]`): (workflow id, name → task id).
    async fn workflow(&self, tasks: Value) -> (String, HashMap<String, String>) {
        let (status, w) = self.call("POST", "/v1/workflows", Some(json!({"name": "oauth", "source": "issue 7"}))).await;
        assert_eq!(status, 201, "{w}");
        let id = w["id"].as_str().unwrap().to_owned();
        let (status, plan) =
            self.call("PUT", &format!("/v1/workflows/{id}/plan"), Some(json!({"summary": "s", "tasks": tasks}))).await;
        assert_eq!(status, 200, "{plan}");
        let ids = plan["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["name"].as_str().unwrap().to_owned(), t["id"].as_str().unwrap().to_owned()))
            .collect();
        (id, ids)
    }
}

/// The first event on `sub` for which `pred` holds (bounded by a guard timeout).
async fn until(sub: &mut clutch_core::Subscription, pred: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let v: Value = serde_json::from_str(&sub.next().await.unwrap().to_wire()).unwrap();
            if pred(&v) {
                return v;
            }
        }
    })
    .await
    .expect("the awaited event within the guard time")
}

fn error(body: &Value) -> (&str, &str) {
    (body["error"]["code"].as_str().unwrap_or("-"), body["error"]["field"].as_str().unwrap_or("-"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_goes_through_the_lifecycle_over_http() {
    let d = start().await;
    d.register("a").await;
    d.register("b").await;
    let (status, w) = d.call("POST", "/v1/workflows", Some(json!({"name": "oauth"}))).await;
    assert_eq!((status, w["status"].as_str()), (201, Some("planning")));
    let wid = w["id"].as_str().unwrap();
    assert!(wid.starts_with("run_"));

    // A cycle is refused naming it; unknown fields are refused.
    let cyclic = json!({"tasks": [{"name": "x", "depends_on": ["y"]}, {"name": "y", "depends_on": [0]}]});
    let (status, body) = d.call("PUT", &format!("/v1/workflows/{wid}/plan"), Some(cyclic)).await;
    assert_eq!((status, error(&body).0), (400, "VALIDATION_FAILED"));
    assert!(body["error"]["message"].as_str().unwrap().contains("x → y → x"), "{body}");
    let (status, _) = d.call("PUT", &format!("/v1/workflows/{wid}/plan"), Some(json!({"tasks": [], "nope": 1}))).await;
    assert_eq!(status, 400);

    let plan = json!({"summary": "google then github", "tasks": [
        {"name": "setup", "description": "passport"},
        {"name": "google", "depends_on": ["setup"], "parallel_group": "providers"},
        {"name": "github", "depends_on": [0], "parallel_group": "providers"},
    ]});
    let (status, plan) = d.call("PUT", &format!("/v1/workflows/{wid}/plan"), Some(plan)).await;
    assert_eq!(status, 200, "{plan}");
    let id = |n: usize| plan["tasks"][n]["id"].as_str().unwrap().to_owned();
    let (_, next) = d.call("GET", &format!("/v1/workflows/{wid}/next"), None).await;
    assert_eq!(next["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(next["tasks"][0]["id"], id(0));

    // Claim: a lease for the first, data for the second.
    let (status, claim) =
        d.call("POST", &format!("/v1/tasks/{}/claim", id(0)), Some(json!({"agent_id": "agent:a"}))).await;
    assert_eq!((status, &claim["success"]), (200, &json!(true)), "{claim}");
    assert_eq!(
        (claim["lease"]["agent_id"].as_str(), claim["lease"]["renew"].as_str()),
        (Some("agent:a"), Some("POST /v1/agents/agent:a/heartbeat"))
    );
    assert!(claim["lease"]["expires_at"].as_str().unwrap().ends_with('Z'));
    let (status, lost) =
        d.call("POST", &format!("/v1/tasks/{}/claim", id(0)), Some(json!({"agent_id": "agent:b"}))).await;
    assert_eq!(status, 200);
    assert_eq!(lost, json!({"success": false, "already_claimed_by": "agent:a"}));
    let (status, body) =
        d.call("POST", &format!("/v1/tasks/{}/claim", id(1)), Some(json!({"agent_id": "agent:nobody"}))).await;
    assert_eq!((status, error(&body)), (404, ("AGENT_NOT_FOUND", "agent_id")), "{body}");
    // Core names the next step by intent; this face words it as its route.
    assert_eq!(body["error"]["next"], json!({"step": "register_agent"}), "{body}");
    assert!(body["error"]["hint"].as_str().unwrap().contains("POST /v1/agents"), "{body}");
    let (status, body) =
        d.call("POST", "/v1/tasks/task_01J00000000000000000000000/claim", Some(json!({"agent_id": "agent:a"}))).await;
    assert_eq!((status, error(&body).0), (404, "TASK_NOT_FOUND"));

    // Plan, status, checkpoints: the holder's; another agent's write is LEASE_LOST.
    let t = id(0);
    let as_a = |v: Value| {
        let mut v = v;
        v["agent_id"] = json!("agent:a");
        Some(v)
    };
    let (status, _) = d.call("POST", &format!("/v1/tasks/{t}/plan"), as_a(json!({"plan": "configure passport"}))).await;
    assert_eq!(status, 200);
    let (status, s) = d.call("POST", &format!("/v1/tasks/{t}/status"), as_a(json!({"status": "in_progress"}))).await;
    assert_eq!((status, s["status"].as_str()), (200, Some("in_progress")));
    let cp = json!({"type": "progress", "summary": "installed deps", "files_changed": ["package.json"]});
    let (status, c) = d.call("POST", &format!("/v1/tasks/{t}/checkpoints"), as_a(cp.clone())).await;
    assert_eq!((status, c["type"].as_str(), c["agent_id"].as_str()), (201, Some("progress"), Some("agent:a")), "{c}");
    let decision = json!({"type": "decision", "summary": "JWT", "detail": {"reason": "stateless"}});
    d.call("POST", &format!("/v1/tasks/{t}/checkpoints"), as_a(decision)).await;
    let mut theirs = cp.clone();
    theirs["agent_id"] = json!("agent:b");
    let (status, body) = d.call("POST", &format!("/v1/tasks/{t}/checkpoints"), Some(theirs)).await;
    assert_eq!((status, error(&body).0), (409, "LEASE_LOST"));
    let (_, list) = d.call("GET", &format!("/v1/tasks/{t}/checkpoints"), None).await;
    assert_eq!(list["checkpoints"].as_array().unwrap().len(), 2);
    let (status, ctx) = d
        .call(
            "POST",
            &format!("/v1/tasks/{t}/context"),
            Some(json!({"include": {"recent_checkpoints": 1}, "max_tokens": 8000})),
        )
        .await;
    assert_eq!(status, 200, "{ctx}");
    assert!(ctx["tokens"].as_u64().unwrap() <= 8000);
    assert_eq!(ctx["context"]["current_task"]["checkpoints"].as_array().unwrap().len(), 1);
    assert_eq!(ctx["context"]["current_task"]["checkpoints"][0]["summary"], "JWT");
    assert_eq!(ctx["context"]["workflow"]["plan_summary"], "google then github");

    // completed needs an outcome; a move the table lacks is INVALID_TRANSITION naming the allowed ones.
    let (status, body) = d.call("POST", &format!("/v1/tasks/{t}/status"), as_a(json!({"status": "completed"}))).await;
    assert_eq!((status, error(&body)), (400, ("VALIDATION_FAILED", "outcome")));
    let (status, body) =
        d.call("POST", &format!("/v1/tasks/{}/status", id(1)), as_a(json!({"status": "in_progress"}))).await;
    assert_eq!((status, error(&body).0), (409, "INVALID_TRANSITION"));
    assert!(body["error"]["message"].as_str().unwrap().contains("Allowed moves: claimed"), "{body}");
    let done = json!({"status": "completed", "outcome": "OAuth set up", "outcome_detail": {"files": ["src/auth.ts"]}});
    let (status, s) = d.call("POST", &format!("/v1/tasks/{t}/status"), as_a(done)).await;
    assert_eq!((status, s["status"].as_str()), (200, Some("completed")), "{s}");

    // Both providers are available now; progress and the task views say so.
    let (_, next) = d.call("GET", &format!("/v1/workflows/{wid}/next?limit=5"), None).await;
    assert_eq!(next["tasks"].as_array().unwrap().len(), 2);
    let (_, p) = d.call("GET", &format!("/v1/workflows/{wid}/progress"), None).await;
    assert_eq!(
        (p["status"].as_str(), p["counts"]["completed"].as_u64(), p["total"].as_u64()),
        (Some("in_progress"), Some(1), Some(3))
    );
    assert!((p["percent"].as_f64().unwrap() - 33.3).abs() < 0.01, "{p}");
    let (status, view) = d.call("GET", &format!("/v1/tasks/{t}"), None).await;
    assert_eq!(
        (status, view["state"].as_str(), view["kind"].as_str()),
        (200, Some("completed"), Some("workflow_task"))
    );
    assert_eq!(view["workflow_task"]["outcome_detail"]["files"][0], "src/auth.ts");
    let (_, got) = d.call("GET", &format!("/v1/workflows/{wid}"), None).await;
    assert_eq!(got["tasks"].as_array().unwrap().len(), 3);
    let (_, listed) = d.call("GET", "/v1/workflows?status=in_progress,planning", None).await;
    assert_eq!(listed["workflows"][0]["id"], wid);
    let (status, _) = d.call("GET", "/v1/workflows?status=sideways", None).await;
    assert_eq!(status, 400);
    // Reserved payload types cannot be posted as messages: the workflow API is the way in.
    let mut m = crate::msg(wid, "task.progress");
    m["task_id"] = json!(id(1));
    m["payload_type"] = json!("clutch.checkpoint.v1");
    let (status, body) = d.post(&m).await;
    assert_eq!((status, error(&body).0), (403, "FORBIDDEN"));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_http_claims_have_one_winner() {
    let d = start().await;
    let names: Vec<String> = (0..16).map(|i| format!("r{i}")).collect();
    for n in &names {
        d.register(n).await;
    }
    let (_, ids) = d.workflow(json!([{"name": "only"}])).await;
    let url = format!("{}/v1/tasks/{}/claim", d.url, ids["only"]);
    let claims: Vec<_> = names
        .iter()
        .map(|n| {
            let (http, url, agent) = (d.http.clone(), url.clone(), format!("agent:{n}"));
            tokio::spawn(async move {
                let r = http.post(url).json(&json!({"agent_id": agent})).send().await.unwrap();
                assert_eq!(r.status(), 200);
                r.json::<Value>().await.unwrap()
            })
        })
        .collect();
    let mut answers = Vec::new();
    for c in claims {
        answers.push(c.await.unwrap());
    }
    let winners: Vec<&Value> = answers.iter().filter(|a| a["success"] == true).collect();
    assert_eq!(winners.len(), 1);
    let winner = winners[0]["lease"]["agent_id"].as_str().unwrap();
    assert!(answers.iter().filter(|a| a["success"] == false).all(|a| a["already_claimed_by"] == winner));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_agents_task_goes_to_another_which_recovers_it_from_checkpoints() {
    let clock = Clock::manual(SystemTime::now());
    let engine = clutch_core::engine::Options {
        stale_after: Duration::from_secs(1),
        offline_after: Duration::from_secs(2),
        clock: clock.clone(),
        ..Default::default()
    };
    let d = start_full(clutch_core::log::Options::default(), engine, clutch_gateway::Options::default()).await;
    d.register("a").await;
    d.register("b").await;
    let (_, ids) = d.workflow(json!([{"name": "migrate"}])).await;
    let t = &ids["migrate"];
    let (_, claim) = d.call("POST", &format!("/v1/tasks/{t}/claim"), Some(json!({"agent_id": "agent:a"}))).await;
    assert_eq!(claim["success"], true);
    let cp = json!({"agent_id": "agent:a", "type": "progress", "summary": "half the rows copied"});
    d.call("POST", &format!("/v1/tasks/{t}/checkpoints"), Some(cp)).await;

    // a is killed (it stops beating); b keeps beating. a goes stale, then offline, and loses the task.
    let task_events = Filter { task_id: Some(t.clone()), ..Filter::default() };
    let mut events = d.log.subscribe(task_events, None).await.unwrap();
    let agent_events = Filter { task_id: Some(clutch_core::engine::SYSTEM_TASK.into()), ..Filter::default() };
    let mut agents = d.log.subscribe(agent_events, None).await.unwrap();
    for status in ["stale", "offline"] {
        clock.advance(Duration::from_millis(1500));
        let (code, _) = d.call("POST", "/v1/agents/agent:b/heartbeat", Some(json!({}))).await;
        assert_eq!(code, 200);
        until(&mut agents, |v| v["payload"]["agent_id"] == "agent:a" && v["payload"]["status"] == status).await;
    }
    until(&mut events, |v| v["payload"]["type"] == "recovery").await;

    let (status, body) = d
        .call("POST", &format!("/v1/tasks/{t}/status"), Some(json!({"agent_id": "agent:a", "status": "in_progress"})))
        .await;
    assert_eq!((status, error(&body).0), (409, "LEASE_LOST"));
    let (_, claim) = d.call("POST", &format!("/v1/tasks/{t}/claim"), Some(json!({"agent_id": "agent:b"}))).await;
    assert_eq!(claim["success"], true, "{claim}");
    let (_, ctx) =
        d.call("POST", &format!("/v1/tasks/{t}/context"), Some(json!({"include": {"all_checkpoints": true}}))).await;
    let summaries: Vec<&str> = ctx["context"]["current_task"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries.len(), 2);
    assert_eq!(summaries[0], "half the rows copied");
    assert!(summaries[1].contains("agent:a went offline"), "{summaries:?}");
    let done = json!({"agent_id": "agent:b", "status": "completed", "outcome": "all rows copied"});
    let (status, _) = d.call("POST", &format!("/v1/tasks/{t}/status"), Some(done)).await;
    assert_eq!(status, 200);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_daemon_restart_the_recovery_flow_resumes_the_work() {
    let d = start().await;
    d.register("a").await;
    let (wid, ids) = d.workflow(json!([{"name": "setup"}, {"name": "google", "depends_on": ["setup"]}])).await;
    for (name, outcome) in [("setup", Some("done")), ("google", None)] {
        let t = &ids[name];
        d.call("POST", &format!("/v1/tasks/{t}/claim"), Some(json!({"agent_id": "agent:a"}))).await;
        if let Some(o) = outcome {
            let body = json!({"agent_id": "agent:a", "status": "completed", "outcome": o});
            assert_eq!(d.call("POST", &format!("/v1/tasks/{t}/status"), Some(body)).await.0, 200);
        }
    }
    for i in 0..6 {
        let cp = json!({"agent_id": "agent:a", "type": "progress", "summary": format!("step {i}")});
        assert_eq!(d.call("POST", &format!("/v1/tasks/{}/checkpoints", ids["google"]), Some(cp)).await.0, 201);
    }
    let d = d.restart(clutch_core::engine::Options::default()).await;

    // workflow_list → workflow_progress → task_load_context with all_checkpoints.
    let (_, listed) = d.call("GET", "/v1/workflows?status=in_progress", None).await;
    assert_eq!(listed["workflows"][0]["id"], wid.as_str());
    let (_, progress) = d.call("GET", &format!("/v1/workflows/{wid}/progress"), None).await;
    let current = &progress["current"][0];
    assert_eq!((current["name"].as_str(), current["agent_id"].as_str()), (Some("google"), Some("agent:a")));
    let t = current["id"].as_str().unwrap();
    let include = json!({"include": {"workflow_plan": true, "prior_task_outcomes": true, "all_checkpoints": true}});
    let (_, ctx) = d.call("POST", &format!("/v1/tasks/{t}/context"), Some(include)).await;
    assert_eq!(ctx["context"]["current_task"]["checkpoints"].as_array().unwrap().len(), 6);
    assert_eq!(ctx["context"]["dependency_outcomes"][0]["outcome"], "done");
    let body = json!({"agent_id": "agent:a", "status": "completed", "outcome": "resumed and finished"});
    assert_eq!(d.call("POST", &format!("/v1/tasks/{t}/status"), Some(body)).await.0, 200);
    let (_, p) = d.call("GET", &format!("/v1/workflows/{wid}/progress"), None).await;
    assert_eq!(p["status"], "completed");
    d.shutdown().await;
}

struct Table(HashMap<&'static str, Grant>);

impl Tokens for Table {
    fn authenticate(&self, token: &str) -> Option<Grant> {
        self.0.get(token).cloned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_decide_which_agent_a_write_acts_as() {
    let grant =
        |name: &str, role, agent: Option<&str>| Grant { name: name.into(), role, agent_id: agent.map(str::to_owned) };
    let table = Table(HashMap::from([
        ("ops", grant("ops", Role::Admin, None)),
        ("ken", grant("ken", Role::Agent, Some("agent:ken"))),
        ("dash", grant("dash", Role::Observer, None)),
    ]));
    let options = clutch_gateway::Options { tokens: Some(Arc::new(table)), ..Default::default() };
    let d = start_full(clutch_core::log::Options::default(), clutch_core::engine::Options::default(), options).await;
    for name in ["ken", "eve"] {
        let card = json!({"agent_id": format!("agent:{name}"), "capabilities": []});
        assert_eq!(d.call_as(Some("ops"), "POST", "/v1/agents", Some(card)).await.0, 201);
    }
    let (status, w) = d.call_as(Some("ops"), "POST", "/v1/workflows", Some(json!({"name": "w"}))).await;
    assert_eq!(status, 201);
    let wid = w["id"].as_str().unwrap();
    let (status, plan) = d
        .call_as(Some("ops"), "PUT", &format!("/v1/workflows/{wid}/plan"), Some(json!({"tasks": [{"name": "t"}]})))
        .await;
    assert_eq!(status, 200, "{plan}");
    let t = plan["tasks"][0]["id"].as_str().unwrap();
    // An observer writes nothing; an agent token acts as its own agent only, by default as itself.
    let (status, _) =
        d.call_as(Some("dash"), "POST", &format!("/v1/tasks/{t}/claim"), Some(json!({"agent_id": "agent:ken"}))).await;
    assert_eq!(status, 403);
    let (status, body) =
        d.call_as(Some("ken"), "POST", &format!("/v1/tasks/{t}/claim"), Some(json!({"agent_id": "agent:eve"}))).await;
    assert_eq!((status, error(&body)), (403, ("FORBIDDEN", "agent_id")));
    let (status, claim) = d.call_as(Some("ken"), "POST", &format!("/v1/tasks/{t}/claim"), Some(json!({}))).await;
    assert_eq!((status, claim["lease"]["agent_id"].as_str()), (200, Some("agent:ken")), "{claim}");
    // An admin naming no agent writes as the holder.
    let cp = json!({"type": "progress", "summary": "by the admin, as the holder"});
    let (status, c) = d.call_as(Some("ops"), "POST", &format!("/v1/tasks/{t}/checkpoints"), Some(cp)).await;
    assert_eq!((status, c["agent_id"].as_str()), (201, Some("agent:ken")));
    let (status, _) = d.call_as(Some("dash"), "GET", &format!("/v1/workflows/{wid}/progress"), None).await;
    assert_eq!(status, 200);
    d.shutdown().await;
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_make_and_remove_git_worktrees() {
    let dir = tempfile::tempdir().unwrap();
    let roots = clutch_core::roots::Roots::new(&[dir.path().to_owned()]).unwrap();
    let engine = clutch_core::engine::Options { workspace_roots: roots, ..Default::default() };
    let d = start_full(clutch_core::log::Options::default(), engine, clutch_gateway::Options::default()).await;
    let (wid, ids) = d.workflow(json!([{"name": "google"}])).await;
    let repo = dir.path().join("app");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "a"]);
    let body = json!({
        "branch": "feature/google", "base_branch": "main", "create_worktree": true,
        "repo_path": repo, "task_ids": [ids["google"]],
    });
    let (status, ws) = d.call("POST", &format!("/v1/workflows/{wid}/workspaces"), Some(body.clone())).await;
    assert_eq!(status, 201, "{ws}");
    let path = ws["path"].as_str().unwrap().to_owned();
    assert!(Path::new(&path).join("a.txt").is_file());
    let (status, again) = d.call("POST", &format!("/v1/workflows/{wid}/workspaces"), Some(body.clone())).await;
    assert_eq!((status, error(&again)), (409, ("GIT_FAILED", "branch")));
    let mut outside = body.clone();
    outside["branch"] = json!("elsewhere");
    outside["repo_path"] = json!("/");
    let (status, bad) = d.call("POST", &format!("/v1/workflows/{wid}/workspaces"), Some(outside)).await;
    assert_eq!((status, error(&bad)), (400, ("PATH_NOT_ALLOWED", "repo_path")), "{bad}");
    let mut not_repo = body.clone();
    not_repo["repo_path"] = json!(dir.path());
    not_repo["branch"] = json!("other");
    let (status, bad) = d.call("POST", &format!("/v1/workflows/{wid}/workspaces"), Some(not_repo)).await;
    assert_eq!((status, error(&bad)), (400, ("VALIDATION_FAILED", "repo_path")));
    let id = ws["id"].as_str().unwrap();
    let update = json!({"status": "abandoned", "cleanup_worktree": true});
    let (status, done) = d.call("PATCH", &format!("/v1/workspaces/{id}"), Some(update)).await;
    assert_eq!(
        (status, done["status"].as_str(), done["worktree"].as_bool()),
        (200, Some("abandoned"), Some(false)),
        "{done}"
    );
    assert!(!Path::new(&path).exists());
    let (_, w) = d.call("GET", &format!("/v1/workflows/{wid}"), None).await;
    assert_eq!(w["workspaces"][0]["status"], "abandoned");
    d.shutdown().await;
}
