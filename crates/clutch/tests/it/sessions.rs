//! Positions through the real binary: `clutch serve` with the fake provider declared, so the
//! positions runner spawns a built-in LLM agent for each role; each shipped position invoked over
//! HTTP and followed in the log (its session's phases, the messages between its members, its
//! outcome), the error cases of the seed (a failing agent, all failing, a cancel, a consensus
//! timeout), mixed teams (a role played by an agent of our own over HTTP; one by an outside agent
//! over MCP and one by a person on the CLI), and `kill -9` or SIGTERM mid-session with a resume that repeats
//! no call.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clutch_runtime::fake::{Fake, Options, Reply};
use serde_json::{Value, json};

use crate::mcp::{call, http as mcp_client};
use crate::support::{DEADLINE, Daemon, Output, all_events, clutch, post};

const KEY_VAR: &str = "CLUTCH_TEST_LLM_KEY";

fn serve(dir: &Path, fake: &Fake, extra: &str) -> Daemon {
    let config = format!(
        "[[providers]]\nname = \"fake\"\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
         model = \"fake-model-1\"\nmax_tokens = 200\nretry_base_ms = 20\nmax_retries = 1\n\n\
         [positions]\n{extra}\n",
        fake.url
    );
    std::fs::write(dir.join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir).env(KEY_VAR, "sk-test").args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    Daemon::spawn(cmd)
}

/// The role the request's agent plays (from its system prompt: "You are ROLE, ...").
fn role(body: &Value) -> String {
    let system = match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    };
    system.strip_prefix("You are ").and_then(|s| s.split(',').next()).unwrap_or_default().to_owned()
}

/// The text of the request's last user message.
fn asked(body: &Value) -> String {
    let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

/// A daemon over the fake, in a directory of its own, once its positions runner is up.
async fn up(fake: &Fake, extra: &str) -> (tempfile::TempDir, Daemon, reqwest::Client, String) {
    let dir = tempfile::tempdir().unwrap();
    let daemon = serve(dir.path(), fake, extra);
    let (http, url) = (reqwest::Client::new(), daemon.url.clone());
    until_positions(&http, &url).await;
    (dir, daemon, http, url)
}

async fn until_positions(http: &reqwest::Client, url: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let list: Value = http.get(format!("{url}/v1/positions")).send().await.unwrap().json().await.unwrap();
        if list["positions"].as_array().is_some_and(|p| p.len() == 6) {
            return;
        }
        assert!(Instant::now() < deadline, "the positions runner did not register: {list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn invoke(http: &reqwest::Client, url: &str, name: &str, body: Value) -> Value {
    let response = http.post(format!("{url}/v1/positions/{name}/invoke")).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{answer}");
    answer
}

/// The session's task once it ended.
async fn ended(http: &reqwest::Client, url: &str, task: &str) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let view: Value = http.get(format!("{url}/v1/tasks/{task}")).send().await.unwrap().json().await.unwrap();
        if ["completed", "failed", "cancelled", "timed_out"].contains(&view["state"].as_str().unwrap_or("")) {
            return view;
        }
        assert!(Instant::now() < deadline, "session task {task} is still {}", view["state"]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Session {
    events: Vec<Value>,
}

impl Session {
    async fn read(http: &reqwest::Client, url: &str, session: &str) -> Session {
        let events = all_events(http, url).await.into_iter().filter(|e| e["run_id"] == session).collect();
        Session { events }
    }

    /// The phases its records went through, each change once (a step change keeps the phase).
    fn phases(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.records() {
            let phase = e["payload"]["phase"].as_str().unwrap().to_owned();
            if out.last() != Some(&phase) {
                out.push(phase);
            }
        }
        out
    }

    fn steps(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.records() {
            if let Some(step) = e["payload"]["step"].as_str()
                && out.last().map(String::as_str) != Some(step)
            {
                out.push(step.to_owned());
            }
        }
        out
    }

    fn records(&self) -> impl Iterator<Item = &Value> {
        self.events.iter().filter(|e| e["payload_type"] == "clutch.session.v1")
    }

    /// (sender's role-less id, type) of each message between members, in order.
    fn said(&self) -> Vec<(String, String)> {
        self.events
            .iter()
            .filter(|e| e["payload_type"] == "clutch.session.message.v1")
            .map(|e| {
                (e["from"]["agent_id"].as_str().unwrap().to_owned(), e["payload"]["type"].as_str().unwrap().to_owned())
            })
            .collect()
    }

    fn types(&self) -> Vec<String> {
        self.said().into_iter().map(|(_, t)| t).collect()
    }

    /// The turns' tasks: (role, state at the end).
    fn turns(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["type"] == "task.request" && e["from"]["agent_id"] == "agent:positions")
            .map(|e| e["payload"]["role"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// `clutch runs replay SESSION --reexecute` drives the session again offline: the runner writes
/// what it wrote then.
fn runner_reexecuted(url: &str, session: &str) {
    let mut cmd = clutch();
    cmd.args(["runs", "replay", session, "--reexecute", "--url", url]);
    let out = crate::support::run(cmd, "");
    let line = out.stdout.lines().find(|l| l.contains("agent:positions session")).unwrap_or_else(|| panic!("{out:?}"));
    assert!(line.contains(": identical ("), "{session}: {out:?}");
}

/// `who` works a mirror `turn` by hand: accepts it and answers `analysis`, or a CONSENSUS to a
/// comparison (as `structured`, beside a text in prose that is not read).
async fn play(http: &reqwest::Client, url: &str, turn: &Value, who: &str, analysis: &str) {
    let result = if turn["payload"]["goal"].as_str().unwrap().contains("Compare") {
        json!({"text": "No DISCREPANCY: we agree", "structured": {"verdict": "CONSENSUS", "points": ["42"]}})
    } else {
        json!({"text": analysis})
    };
    for (kind, payload) in [("task.accept", json!({})), ("task.result", result)] {
        let m = json!({
            "run_id": turn["run_id"], "thread_id": turn["thread_id"], "task_id": turn["task_id"],
            "parent_task_id": turn["parent_task_id"], "from": {"agent_id": who}, "to": [{"agent_id": "agent:positions"}],
            "type": kind, "payload": payload,
        });
        let (status, body) = post(http, url, &m).await;
        assert_eq!(status, 201, "{body}");
    }
}

const RUN: [&str; 4] = ["INITIALIZING", "SPAWNING_AGENTS", "RUNNING", "COMPLETING"];

fn completed_phases() -> Vec<String> {
    RUN.iter().map(|s| s.to_string()).chain(["COMPLETED".to_owned()]).collect()
}

/// A structured answer, as a model gives it: a call of the `answer` tool.
fn structured(input: Value) -> Reply {
    Reply::Tool { text: String::new(), name: "answer".into(), input }
}

/// A comparison's verdict, given through the `answer` tool.
fn verdict(verdict: &str) -> Reply {
    structured(json!({"verdict": verdict, "points": ["the result: 42"]}))
}

/// A fake that plays each shipped position's roles.
fn players(verifier_agrees: bool) -> Options {
    Options::script(move |body, _| {
        let (role, asked) = (role(body), asked(body));
        let text = if asked.contains("Compare your analysis") {
            return verdict(if role == "Verifier" && !verifier_agrees { "DISCREPANCY" } else { "CONSENSUS" });
        } else if asked.contains("Split this into") {
            "- gather the facts\n- weigh them\n- build the answer".to_owned()
        } else if asked.contains("Vote for the best proposal") {
            return structured(json!({"vote": 2}));
        } else if asked.contains("Propose an answer") {
            format!("{role} proposes plan {role}")
        } else {
            format!("{role} did: {}", asked.lines().last().unwrap_or_default())
        };
        Reply::Text(text)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_position_runs_end_to_end_as_a_recorded_session() {
    let fake = Fake::start(players(true)).await.unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "").await;

    // Unknown positions and roles are refused at once, naming what exists.
    let response = http.post(format!("{url}/v1/positions/tango/invoke")).json(&json!({})).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["hint"].as_str().unwrap().contains("mirror"), "{body}");
    let response = http
        .post(format!("{url}/v1/positions/mirror/invoke"))
        .json(&json!({"agents": {"Juggler": "agent:x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["field"], "agents.Juggler");

    // Every position at once: sessions run side by side.
    let inputs = [
        ("contemplator", json!("Why is the sky blue?")),
        ("mirror", json!("What is 6 × 7?")),
        ("relay", json!("A note to the team")),
        ("pyramid", json!("Plan the launch")),
        ("swarm", json!(["apples", "pears", "plums", "figs", "kiwis", "limes"])),
        ("circle", json!("Where do we meet?")),
    ];
    let mut invoked = Vec::new();
    for (name, input) in &inputs {
        invoked.push((name, invoke(&http, &url, name, json!({"input": input, "agent_id": "user:ada"})).await));
    }
    for (name, inv) in &invoked {
        let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
        assert_eq!(task["state"], "completed", "{name}: {task:#}");
    }
    let results: Vec<Value> = {
        let events = all_events(&http, &url).await;
        invoked
            .iter()
            .map(|(_, inv)| {
                events.iter().find(|e| e["task_id"] == inv["task_id"] && e["type"] == "task.result").unwrap()["payload"]
                    .clone()
            })
            .collect()
    };

    // contemplator: one turn, the answer is its text.
    let s = Session::read(&http, &url, invoked[0].1["session_id"].as_str().unwrap()).await;
    assert_eq!(s.phases(), completed_phases());
    assert_eq!(s.turns(), ["Contemplator"]);
    assert!(results[0]["text"].as_str().unwrap().starts_with("Contemplator did:"), "{}", results[0]);

    // mirror: two analyses, exchanged, compared, agreed.
    let s = Session::read(&http, &url, invoked[1].1["session_id"].as_str().unwrap()).await;
    assert_eq!(s.phases(), completed_phases());
    assert_eq!(s.steps(), ["ANALYSIS", "EXCHANGE", "COMPARISON", "SYNTHESIS"]);
    assert_eq!(s.types(), ["RESULTS", "RESULTS", "CONSENSUS", "CONSENSUS"]);
    assert_eq!(results[1]["verdict"], "CONSENSUS");
    assert_eq!(results[1]["comparison"], json!({"Reflector": "CONSENSUS", "Verifier": "CONSENSUS"}));
    // Its members' turns re-executed offline from the log: each sends what it sent.
    let calls = fake.count();
    let mut cmd = clutch();
    cmd.args(["runs", "replay", invoked[1].1["session_id"].as_str().unwrap(), "--reexecute", "--url", &url]);
    let out = crate::support::run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    // Four member turns, and the runner's own decisions: every record, turn, message and the result.
    assert_eq!(out.stdout.matches(": identical (").count(), 5, "{out:?}");
    assert!(out.stdout.contains("agent:positions session"), "{out:?}");
    assert_eq!(fake.count(), calls, "re-executing calls no provider");

    // relay: each leg's output is the next one's input, handed off.
    let s = Session::read(&http, &url, invoked[2].1["session_id"].as_str().unwrap()).await;
    assert_eq!(s.turns(), ["Drafter", "Editor", "Finisher"]);
    assert_eq!(s.types(), ["HANDOFF", "HANDOFF"]);
    assert!(results[2]["text"].as_str().unwrap().starts_with("Finisher did:"), "{}", results[2]);
    assert!(results[2]["legs"]["Editor"].as_str().unwrap().contains("Drafter did:"), "{}", results[2]);

    // pyramid: the lead's three subtasks go to its three workers, then the lead synthesises.
    let s = Session::read(&http, &url, invoked[3].1["session_id"].as_str().unwrap()).await;
    assert_eq!(s.turns(), ["Lead", "Researcher", "Analyst", "Builder", "Lead"]);
    assert_eq!(s.types(), ["SUBTASK", "SUBTASK", "SUBTASK", "RESULTS", "RESULTS", "RESULTS"]);
    let subtasks: Vec<&str> =
        results[3]["subtasks"].as_array().unwrap().iter().map(|s| s["subtask"].as_str().unwrap()).collect();
    assert_eq!(subtasks, ["gather the facts", "weigh them", "build the answer"]);
    // Each turn is a Clutch task under the session's task.
    let events = all_events(&http, &url).await;
    let root = invoked[3].1["task_id"].as_str().unwrap();
    let children = events
        .iter()
        .filter(|e| {
            e["type"] == "task.request" && e["parent_task_id"] == root && e["from"]["agent_id"] == "agent:positions"
        })
        .count();
    assert_eq!(children, 5);

    // swarm: six items across three scouts, two each, aggregated.
    let s = Session::read(&http, &url, invoked[4].1["session_id"].as_str().unwrap()).await;
    assert_eq!(s.turns(), ["Scout", "Scout", "Scout", "Aggregator"]);
    let parts: Vec<&str> =
        results[4]["parts"].as_array().unwrap().iter().map(|p| p["part"].as_str().unwrap()).collect();
    assert_eq!(parts, ["apples\npears", "plums\nfigs", "kiwis\nlimes"]);
    assert_eq!(s.types(), ["RESULTS", "RESULTS", "RESULTS"]);

    // circle: three proposals, everyone votes for the second (its proposer's own vote does not
    // count): a quorum in round 1.
    let s = Session::read(&http, &url, invoked[5].1["session_id"].as_str().unwrap()).await;
    assert_eq!(results[5]["verdict"], "CONSENSUS");
    assert_eq!(results[5]["round"], 1);
    assert_eq!(results[5]["text"], "Visionary proposes plan Visionary");
    assert_eq!(s.types(), ["PROPOSAL", "PROPOSAL", "PROPOSAL", "VOTE", "VOTE", "VOTE", "CONSENSUS"]);
    let round = s.records().find_map(|r| r["payload"]["detail"]["tally"].as_array().cloned()).unwrap();
    assert_eq!(round, [json!(0), json!(2), json!(0)]);

    // Each session re-executed offline: the runner's decisions are the same.
    for (_, inv) in &invoked {
        runner_reexecuted(&url, inv["session_id"].as_str().unwrap());
    }
    // Against a mirror.md changed since (one message type fewer), the records differ, and say where.
    let changed = tempfile::tempdir().unwrap();
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../runtime/positions/mirror.md")).unwrap();
    let edited: String =
        shipped.lines().filter(|l| !l.starts_with("- ACKNOWLEDGE:")).map(|l| format!("{l}\n")).collect();
    std::fs::write(changed.path().join("mirror.md"), edited).unwrap();
    let mut cmd = clutch();
    cmd.args(["runs", "replay", invoked[1].1["session_id"].as_str().unwrap(), "--reexecute", "--url", &url]);
    cmd.arg("--positions").arg(changed.path());
    let out = crate::support::run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stdout.contains("agent:positions session") && out.stdout.contains("DIFFERS: `record:2` differs: payload"),
        "{out:?}"
    );

    // The sessions, listed: each completed with its team; spawned agents are gone.
    let list: Value = http.get(format!("{url}/v1/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 6);
    assert!(list["sessions"].as_array().unwrap().iter().all(|s| s["status"] == "COMPLETED"), "{list:#}");
    let agents: Value = http.get(format!("{url}/v1/agents")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = agents["agents"].as_array().unwrap().iter().map(|a| a["agent_id"].as_str().unwrap()).collect();
    assert!(ids.is_empty(), "spawned agents are removed when their session ends: {ids:?}");
    let history: Value = http
        .get(format!("{url}/v1/sessions/{}/messages?limit=2", invoked[1].1["session_id"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        history["messages"].as_array().unwrap().iter().map(|m| m["type"].clone()).collect::<Vec<_>>(),
        ["CONSENSUS", "CONSENSUS"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_disagrees_escalates_and_its_members_talk_with_the_session_tools() {
    // The Reflector tells the others it is ready with the built-in sessions_send tool mid-turn.
    let base = players(false).script;
    let fake = Fake::start(Options::script(move |body, n| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        if role(body) == "Reflector" && asked(body).contains("Analyse") && !last.to_string().contains("tool_result") {
            let system = body["system"].to_string();
            let session = system
                .split("Session ID: ")
                .nth(1)
                .and_then(|s| s.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next())
                .unwrap_or_default()
                .to_owned();
            let input =
                json!({"session_id": session, "to": ["all"], "type": "READY_TO_SHARE", "content": "analysis done"});
            return Reply::Tool { text: String::new(), name: "sessions_send".into(), input };
        }
        base(body, n)
    }))
    .await
    .unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "").await;
    let inv = invoke(&http, &url, "mirror", json!({"input": "What is 6 × 7?"})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed");
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    assert_eq!(s.types(), ["READY_TO_SHARE", "RESULTS", "RESULTS", "CONSENSUS", "DISCREPANCY", "ESCALATE"]);
    let ready = s.events.iter().find(|e| e["payload"]["type"] == "READY_TO_SHARE").unwrap();
    assert!(ready["from"]["agent_id"].as_str().unwrap().contains("reflector"), "{ready}");
    assert!(ready["to"][0]["agent_id"].as_str().unwrap().contains("verifier"), "`all` is the others: {ready}");
    let result = s.events.iter().find(|e| e["type"] == "task.result" && e["task_id"] == inv["task_id"]).unwrap();
    assert_eq!(
        (result["payload"]["verdict"].clone(), result["payload"]["escalated"].clone()),
        (json!("DISCREPANCY"), json!(true))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_timeouts_and_cancel_end_sessions_as_the_seed_says() {
    // The Verifier's provider calls fail; comparisons never come back when `stall` is set.
    let stall = Arc::new(AtomicBool::new(false));
    let stalling = stall.clone();
    let fake = Fake::start(Options::script(move |body, _| {
        let (role, asked) = (role(body), asked(body));
        if asked.contains("everyone fails") {
            return Reply::Status { status: 400, retry_after: None };
        }
        if role == "Verifier" && asked.contains("Analyse") && !stalling.load(Ordering::Relaxed) {
            return Reply::Status { status: 400, retry_after: None };
        }
        if asked.contains("Compare your analysis") && stalling.load(Ordering::Relaxed) {
            return Reply::Stall;
        }
        if asked.contains("Think this through") {
            return Reply::Slow(Duration::from_secs(30), Box::new(Reply::Text("late".into())));
        }
        if role == "Drafter" {
            return Reply::Status { status: 400, retry_after: None };
        }
        Reply::Text(format!("{role} says 42"))
    }))
    .await
    .unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "consensus_timeout = \"1500ms\"").await;

    // One agent fails: announced to the other; the lone analysis is escalated as unverified.
    let inv = invoke(&http, &url, "mirror", json!({"input": "6 × 7"})).await;
    assert_eq!(ended(&http, &url, inv["task_id"].as_str().unwrap()).await["state"], "completed");
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    let warning =
        s.events.iter().find(|e| e["payload_type"] == "clutch.session.warning.v1").expect("a failure announced");
    assert_eq!(warning["payload"]["code"], "AGENT_FAILED");
    assert!(warning["payload"]["agent_id"].as_str().unwrap().contains("verifier"), "{warning}");
    assert_eq!(warning["to"].as_array().unwrap().len(), 1, "told to the others");
    let failed: Vec<&Value> =
        s.records().filter(|r| !r["payload"]["failed"].as_array().is_none_or(Vec::is_empty)).collect();
    assert!(!failed.is_empty());
    assert_eq!(s.types(), ["ESCALATE"]);

    // Every agent fails: the session ends in ERROR, the task fails ALL_AGENTS_FAILED.
    let inv = invoke(&http, &url, "mirror", json!({"input": "everyone fails"})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!((task["state"].clone(), task["error"]["code"].clone()), (json!("failed"), json!("ALL_AGENTS_FAILED")));
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    assert_eq!(s.phases().last().unwrap(), "ERROR");
    assert_eq!(s.records().last().unwrap()["payload"]["failed"].as_array().unwrap().len(), 2);

    // A chain whose first leg fails: the session ends in ERROR, the task fails with a reason.
    let inv = invoke(&http, &url, "relay", json!({"input": "x"})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!((task["state"].clone(), task["error"]["code"].clone()), (json!("failed"), json!("RELAY_BROKEN")));
    assert_eq!(Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await.phases().last().unwrap(), "ERROR");

    // Comparisons that never come: synthesis is forced after the consensus timeout.
    stall.store(true, Ordering::Relaxed);
    let inv = invoke(&http, &url, "mirror", json!({"input": "6 × 7"})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed");
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    let forced = s
        .records()
        .find_map(|r| r["payload"]["note"].as_str().filter(|n| n.contains("consensus timeout")).map(str::to_owned));
    assert!(forced.is_some(), "{:#?}", s.records().collect::<Vec<_>>());
    let cancelled_turns =
        s.events.iter().filter(|e| e["type"] == "task.cancel" && e["from"]["agent_id"] == "agent:positions").count();
    assert_eq!(cancelled_turns, 2, "the turns no longer waited for are cancelled");

    // A user's cancel stops a session gracefully: its last record keeps what it had.
    let inv = invoke(&http, &url, "contemplator", json!({"input": "slowly", "agent_id": "user:ada"})).await;
    let session = inv["session_id"].as_str().unwrap();
    let deadline = Instant::now() + DEADLINE;
    while Session::read(&http, &url, session).await.turns().is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancel = json!({
        "run_id": session, "thread_id": inv["thread_id"], "task_id": inv["task_id"],
        "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.cancel", "payload": {"reason": "enough"},
    });
    let (status, body) = post(&http, &url, &cancel).await;
    assert_eq!(status, 201, "{body}");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let s = Session::read(&http, &url, session).await;
        if s.phases().last().map(String::as_str) == Some("ERROR") {
            let last = s.records().last().unwrap();
            assert_eq!(last["payload"]["detail"]["cancelled"], true, "{last}");
            assert!(last["payload"]["note"].as_str().unwrap().contains("cancelled by user:ada"), "{last}");
            break;
        }
        assert!(Instant::now() < deadline, "the session did not stop: {:?}", s.phases());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let list: Value = http.get(format!("{url}/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["status"], "ERROR");

    // Each of them re-executed offline, the forced synthesis and the cancel included: the runner
    // moves on where the recording shows it did.
    let sessions: Value = http.get(format!("{url}/v1/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 5);
    for s in sessions["sessions"].as_array().unwrap() {
        runner_reexecuted(&url, s["id"].as_str().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_team_and_the_bus_rules_over_http() {
    let fake = Fake::start(players(true)).await.unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "agent_messages_per_minute = 5").await;
    // kim, an agent of our own over HTTP, plays the Verifier, cast by the router for the capability
    // the invocation names; the Reflector is spawned.
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:kim", "capabilities": [{"id": "skill:verify", "version": "1.0.0"}]});
    let response = http.post(format!("{url}/v1/agents")).json(&card).send().await.unwrap();
    assert!(response.status().is_success());
    let inv = invoke(&http, &url, "mirror", json!({"input": "6 × 7", "agents": {"verifier": "skill:verify"}})).await;
    let session = inv["session_id"].as_str().unwrap().to_owned();

    // kim's turns come to its inbox; it answers each, and talks on the bus meanwhile.
    let mut answered = 0;
    let deadline = Instant::now() + DEADLINE;
    let mut said = false;
    while answered < 2 {
        assert!(Instant::now() < deadline, "kim got {answered} turns");
        let events = all_events(&http, &url).await;
        // Its inbox: the turns are sent to it by name (a redelivery would repeat a task id).
        let mut turns: Vec<Value> = Vec::new();
        for e in events.iter().filter(|e| e["type"] == "task.request" && e["to"][0]["agent_id"] == "agent:kim") {
            if !turns.iter().any(|t| t["task_id"] == e["task_id"]) {
                turns.push(e.clone());
            }
        }
        for turn in turns.iter().skip(answered) {
            if !said {
                // The bus rules, over HTTP: a type outside the protocol, an unknown recipient, a stranger.
                let bad = [
                    (
                        json!({"agent_id": "agent:kim", "to": "all", "type": "GOSSIP", "content": 1}),
                        400,
                        "payload.type",
                    ),
                    (
                        json!({"agent_id": "agent:kim", "to": ["agent:zed"], "type": "RESULTS", "content": 1}),
                        400,
                        "to[0].agent_id",
                    ),
                    (
                        json!({"agent_id": "agent:lee", "to": "all", "type": "RESULTS", "content": 1}),
                        403,
                        "from.agent_id",
                    ),
                ];
                for (body, status, field) in bad {
                    let r =
                        http.post(format!("{url}/v1/sessions/{session}/messages")).json(&body).send().await.unwrap();
                    assert_eq!(r.status().as_u16(), status);
                    assert_eq!(r.json::<Value>().await.unwrap()["error"]["field"], field);
                }
                let ok = json!({"agent_id": "agent:kim", "to": "all", "type": "ACKNOWLEDGE", "content": "on it"});
                let r = http.post(format!("{url}/v1/sessions/{session}/messages")).json(&ok).send().await.unwrap();
                assert_eq!(r.status(), 201);
                let loop_ = http.post(format!("{url}/v1/sessions/{session}/messages")).json(&ok).send().await.unwrap();
                assert_eq!(loop_.status(), 409);
                assert_eq!(loop_.json::<Value>().await.unwrap()["error"]["code"], "LOOP_DETECTED");
                said = true;
            }
            play(&http, &url, turn, "agent:kim", "kim found 42").await;
            answered += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed");
    let s = Session::read(&http, &url, &session).await;
    assert_eq!(s.turns(), ["Reflector", "Verifier", "Reflector", "Verifier"]);
    assert!(s.said().contains(&("agent:kim".to_owned(), "ACKNOWLEDGE".to_owned())));
    assert_eq!(
        s.events.iter().filter(|e| e["payload_type"] == "clutch.session.warning.v1").count(),
        1,
        "one loop warning"
    );
    let view: Value = http.get(format!("{url}/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    let roles: Vec<(String, String)> = view["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap().to_owned(), a["role"].as_str().unwrap().to_owned()))
        .collect();
    assert!(roles.contains(&("agent:kim".into(), "Verifier".into())), "{view:#}");
    let cast = s.records().find_map(|r| r["payload"]["detail"]["cast"].as_array().cloned()).expect("the cast recorded");
    assert_eq!((cast[0]["role"].clone(), cast[0]["requires"].clone()), (json!("Verifier"), json!("skill:verify")));
    assert_eq!(cast[0]["agent"], "agent:kim");
    assert!(cast[0]["reason"].as_str().unwrap().contains("skill:verify"), "{cast:?}");
    runner_reexecuted(&url, &session);

    // A capability nobody has: the session fails, saying who was left out and why.
    let inv = invoke(&http, &url, "mirror", json!({"input": "x", "agents": {"verifier": "skill:juggling"}})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!((task["state"].clone(), task["error"]["code"].clone()), (json!("failed"), json!("NO_AGENT_FOR_ROLE")));
    let why = task["error"]["message"].as_str().unwrap();
    assert!(why.contains("Verifier") && why.contains("agent:kim: lacks required capability skill:juggling"), "{why}");
    // Neither an id nor a capability: refused at once, naming the role.
    let r = http
        .post(format!("{url}/v1/positions/mirror/invoke"))
        .json(&json!({"input": "x", "agents": {"verifier": "kim"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["field"], "agents.verifier");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_after_kill_9_without_a_repeated_call() {
    resumes_after_a_stop(false).await;
}

/// A clean stop mid-call is no failure either: the LLM members' turns and the session go on
/// after the restart exactly as after `kill -9`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_after_sigterm_mid_call_as_after_kill_9() {
    resumes_after_a_stop(true).await;
}

async fn resumes_after_a_stop(sigterm: bool) {
    // Comparisons are slow: the daemon is stopped while they are under way.
    let fake = Fake::start(Options::script(|body, _| {
        let (role, asked) = (role(body), asked(body));
        if asked.contains("Compare your analysis") {
            return Reply::Slow(Duration::from_millis(1500), Box::new(verdict("CONSENSUS")));
        }
        Reply::Text(format!("{role} found 42"))
    }))
    .await
    .unwrap();
    let (dir, daemon, http, url) = up(&fake, "").await;
    let inv = invoke(&http, &url, "mirror", json!({"input": "6 × 7"})).await;
    let session = inv["session_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let s = Session::read(&http, &url, &session).await;
        if s.steps().last().map(String::as_str) == Some("COMPARISON") && fake.received().len() >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", s.steps());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if sigterm {
        let (status, stderr) = daemon.terminate();
        assert!(status.success(), "{stderr}");
        assert!(!stderr.contains("starting again"), "a stop is no failure: {stderr}");
    } else {
        daemon.kill();
    }
    let analyses = fake.received().iter().filter(|r| asked(&r.body).contains("Analyse")).count();
    assert_eq!(analyses, 2);

    let daemon = serve(dir.path(), &fake, "");
    let (http, url) = (reqwest::Client::new(), daemon.url.clone());
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed", "{task:#}");
    let s = Session::read(&http, &url, &session).await;
    assert_eq!(s.turns(), ["Reflector", "Verifier", "Reflector", "Verifier"], "no turn given twice");
    assert_eq!(s.types(), ["RESULTS", "RESULTS", "CONSENSUS", "CONSENSUS"]);
    let analyses = fake.received().iter().filter(|r| asked(&r.body).contains("Analyse")).count();
    assert_eq!(analyses, 2, "the recorded analyses were not bought again");
    let phases = s.phases();
    assert_eq!(phases, completed_phases(), "one pass through the phases");
    // Driven again offline across the restart: the same decisions.
    runner_reexecuted(&url, &session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_shows_and_follows_a_session() {
    let fake = Fake::start(players(true)).await.unwrap();
    let (_dir, _daemon, _http, url) = up(&fake, "").await;
    let cli = |args: &[&str]| {
        let mut cmd = clutch();
        cmd.args(args).args(["--url", &url]);
        crate::support::run(cmd, "")
    };
    let out = cli(&["positions", "list"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let rows: Vec<Vec<&str>> = out.stdout.lines().map(|l| l.split_whitespace().take(2).collect()).collect();
    assert_eq!(rows[0], ["NAME", "PATTERN"]);
    assert_eq!(
        rows[1..].iter().map(|r| (r[0], r[1])).collect::<Vec<_>>(),
        [
            ("circle", "circle"),
            ("contemplator", "solo"),
            ("mirror", "mirror"),
            ("pyramid", "pyramid"),
            ("relay", "relay"),
            ("swarm", "swarm")
        ]
    );
    let out = cli(&["positions", "show", "mirror"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    for part in ["ROLES", "Reflector", "Verifier", "WORKFLOW", "1. DISCOVERY", "MESSAGES", "CONSENSUS"] {
        assert!(out.stdout.contains(part), "{part}: {out:?}");
    }
    let out = cli(&["positions", "show", "tango"]);
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stderr.contains("no position `tango`"), "{out:?}");

    // --follow streams the session to its end.
    let out = cli(&[
        "positions",
        "invoke",
        "contemplator",
        "--input",
        "Why is the sky blue?",
        "--follow",
        "--from",
        "user:ada",
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("session run_"), "{out:?}");
    let words: Vec<&str> = lines[1..].iter().filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(
        words,
        ["INITIALIZING", "SPAWNING_AGENTS", "RUNNING", "RUNNING", "turn", "COMPLETING", "COMPLETED", "done"],
        "{out:?}"
    );
    assert!(lines.last().unwrap().contains("Contemplator did:"), "{out:?}");
    let out = cli(&["positions", "invoke", "mirror", "--input", "x", "--agents", "juggler=agent:x"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("has no role `juggler`"), "{out:?}");
}

/// The answer to a mirror turn: `analysis`, or to a comparison CONSENSUS, as a person types it
/// (the word alone) or as JSON text.
fn answer(goal: &str, analysis: &str, typed: bool) -> String {
    match (goal.contains("Compare"), typed) {
        (false, _) => analysis.to_owned(),
        (true, true) => "Consensus.".to_owned(),
        (true, false) => json!({"verdict": "CONSENSUS", "points": ["both 42"]}).to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_team_an_agent_over_mcp_and_a_person_on_the_cli() {
    let fake = Fake::start(players(true)).await.unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "").await;
    // mika, an outside agent, joins over MCP and plays the Reflector; ada, a person, the Verifier.
    let mika = mcp_client(&format!("{url}/mcp/worker"), None, true).await.unwrap();
    let (error, registered) = call(&mika, "agent_register", json!({"name": "mika", "runtime": "custom"})).await;
    assert!(!error, "{registered}");
    let (error, empty) = call(&mika, "task_inbox", json!({"agent_id": "agent:mika"})).await;
    assert!(!error && empty["tasks"] == json!([]), "{empty}");
    let inv = invoke(
        &http,
        &url,
        "mirror",
        json!({"input": "6 × 7", "agents": {"Reflector": "agent:mika", "Verifier": "user:ada"}}),
    )
    .await;
    let session = inv["session_id"].as_str().unwrap().to_owned();

    let mika_plays = {
        let session = session.clone();
        tokio::spawn(async move {
            let mut done: Vec<String> = Vec::new();
            while done.len() < 2 {
                // Waits for its next turn rather than polling.
                let (error, inbox) =
                    call(&mika, "task_inbox", json!({"agent_id": "agent:mika", "wait_seconds": 20})).await;
                assert!(!error, "{inbox}");
                for item in inbox["tasks"].as_array().unwrap() {
                    let task = item["task"]["task_id"].as_str().unwrap().to_owned();
                    if done.contains(&task) {
                        continue;
                    }
                    assert_eq!(item["session_id"], session.as_str(), "{item}");
                    let goal = item["request"]["goal"].as_str().unwrap();
                    if done.is_empty() {
                        let said = json!({"sessionId": session, "to": "all", "type": "RESULTS", "content": "mika: 42", "agent_id": "agent:mika"});
                        let (error, sent) = call(&mika, "sessions_send", said).await;
                        assert!(!error, "{sent}");
                    }
                    let reply = json!({"task_id": task, "agent_id": "agent:mika", "status": "completed", "text": answer(goal, "mika: 42", false)});
                    let (error, replied) = call(&mika, "task_reply", reply).await;
                    assert!(!error && replied["state"] == "completed", "{replied}");
                    // A task that has ended takes no reply.
                    let again = json!({"task_id": task, "agent_id": "agent:mika", "status": "failed", "error": "late"});
                    let (error, refused) = call(&mika, "task_reply", again).await;
                    assert!(error && refused["code"] == "INVALID_TRANSITION", "{refused}");
                    done.push(task);
                }
            }
        })
    };

    let cli = move |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let mut cmd = clutch();
            cmd.args(&args);
            crate::support::run(cmd, "")
        })
    };
    let mut answered: Vec<String> = Vec::new();
    while answered.len() < 2 {
        let out: Output = cli(vec![
            "tasks".into(),
            "inbox".into(),
            "user:ada".into(),
            "--wait".into(),
            "20".into(),
            "--json".into(),
            "--url".into(),
            url.clone(),
        ])
        .await
        .unwrap();
        assert_eq!(out.code, Some(0), "{out:?}");
        let inbox: Value = serde_json::from_str(&out.stdout).unwrap();
        assert!(!inbox["tasks"].as_array().unwrap().is_empty(), "the wait ended with no turn: {inbox}");
        for item in inbox["tasks"].as_array().unwrap() {
            let task = item["task"]["task_id"].as_str().unwrap().to_owned();
            if answered.contains(&task) {
                continue;
            }
            // A person's turn waits for them: no accept deadline moves it on.
            assert_eq!(item["task"]["state"], "routed", "{item}");
            let text = answer(item["request"]["goal"].as_str().unwrap(), "ada: 42", true);
            let args = ["tasks", "reply", &task, "--as", "user:ada", "--text", &text, "--url", &url];
            let out = cli(args.iter().map(|a| a.to_string()).collect()).await.unwrap();
            assert_eq!(out.code, Some(0), "{out:?}");
            assert_eq!(out.stdout.trim(), format!("{task}  completed"), "{out:?}");
            answered.push(task);
        }
    }
    // The table a person reads, once nothing waits.
    let out = cli(vec!["tasks".into(), "inbox".into(), "user:ada".into(), "--url".into(), url.clone()]).await.unwrap();
    assert_eq!((out.code, out.stdout.trim()), (Some(0), "nothing waits for user:ada"), "{out:?}");
    tokio::time::timeout(DEADLINE, mika_plays).await.expect("mika played its turns").unwrap();

    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed", "{task:#}");
    let s = Session::read(&http, &url, &session).await;
    assert_eq!(s.phases(), completed_phases());
    let said = s.said();
    for (who, kind) in [("agent:mika", "RESULTS"), ("agent:mika", "CONSENSUS"), ("user:ada", "CONSENSUS")] {
        assert!(said.contains(&(who.to_owned(), kind.to_owned())), "{who} {kind}: {said:?}");
    }
    // Nobody was spawned: the fake was never asked.
    assert_eq!(fake.count(), 0);
    runner_reexecuted(&url, &session);
}

/// Issue 44: a comparison answered in prose ("There is no CONSENSUS here; I see a DISCREPANCY on the
/// lock too.") is asked for again (by the agent, with the `answer` tool required; then by the runner,
/// in a new turn) and, still prose, counts as a DISCREPANCY: never as agreement. A member that gives
/// its verdict in structure when asked again is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verdict_in_prose_is_asked_for_again_and_never_read_as_consensus() {
    let fake = Fake::start(Options::script(|body, _| {
        let (role, asked) = (role(body), asked(body));
        if !asked.contains("Compare your analysis") && !body.to_string().contains("Compare your analysis") {
            return Reply::Text(format!("{role} did: {}", asked.lines().last().unwrap_or_default()));
        }
        if role == "Verifier" {
            return verdict("CONSENSUS");
        }
        // The Reflector answers in prose; on the "learns" input it gives the structure once asked again.
        let again = asked.contains("could not be read");
        if again && body.to_string().contains("learns") {
            return verdict("CONSENSUS");
        }
        Reply::Text(if again {
            "No CONSENSUS is possible: DISCREPANCY, the lock differs.".into()
        } else {
            "There is no CONSENSUS here; I see a DISCREPANCY on the lock too.".into()
        })
    }))
    .await
    .unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "").await;

    let inv = invoke(&http, &url, "mirror", json!({"input": "stubborn"})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed", "{task:#}");
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    let result = s.events.iter().find(|e| e["type"] == "task.result" && e["task_id"] == inv["task_id"]).unwrap();
    assert_eq!(result["payload"]["verdict"], "DISCREPANCY", "{result}");
    assert_eq!(result["payload"]["comparison"], json!({"Reflector": "DISCREPANCY", "Verifier": "CONSENSUS"}));
    assert_eq!(s.phases(), completed_phases());
    // Analyses, comparisons, and the Reflector's comparison asked for once more.
    assert_eq!(s.turns(), ["Reflector", "Verifier", "Reflector", "Verifier", "Reflector"]);
    let unreadable = s.records().find_map(|r| r["payload"]["detail"]["unreadable"]["Reflector"].as_str()).unwrap();
    assert!(unreadable.contains("not JSON") || unreadable.contains("prose"), "{unreadable}");
    assert_eq!(s.types(), ["RESULTS", "RESULTS", "DISCREPANCY", "CONSENSUS", "ESCALATE"]);
    // Within each turn, the agent asked its model once more, requiring the `answer` tool.
    let forced: Vec<Value> = fake
        .received()
        .iter()
        .filter(|r| r.body["tool_choice"].is_object() && r.body.to_string().contains("stubborn"))
        .map(|r| r.body["tool_choice"].clone())
        .collect();
    assert_eq!(forced, [json!({"type": "tool", "name": "answer"}), json!({"type": "tool", "name": "answer"})]);
    let turn_results: Vec<&Value> = s
        .events
        .iter()
        .filter(|e| e["type"] == "task.result" && e["payload"]["structured_error"].is_string())
        .collect();
    assert_eq!(turn_results.len(), 2, "both Reflector comparisons ended unreadable");

    // Asked again, the Reflector answers in structure: a consensus.
    let inv = invoke(&http, &url, "mirror", json!({"input": "learns"})).await;
    ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    let result = s.events.iter().find(|e| e["type"] == "task.result" && e["task_id"] == inv["task_id"]).unwrap();
    assert_eq!(result["payload"]["verdict"], "CONSENSUS", "{result}");
    let structured = s.events.iter().find(|e| e["payload"]["structured"]["verdict"] == "CONSENSUS").unwrap();
    assert_eq!(structured["payload"]["structured"]["points"], json!(["the result: 42"]));
    runner_reexecuted(&url, inv["session_id"].as_str().unwrap());
}

/// Issue 44: a member whose round-2 vote repeats its round-1 vote is no loop: both votes are on
/// the bus, no warning is written, and the tallies in the history explain the winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vote_repeated_in_the_next_round_is_delivered_and_counted() {
    let votes = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<String, usize>::new()));
    let fake = Fake::start(Options::script(move |body, _| {
        let (role, asked) = (role(body), asked(body));
        if asked.contains("Vote for the best proposal") {
            let mut votes = votes.lock().unwrap();
            let n = votes.entry(role.clone()).or_default();
            *n += 1;
            // Proposals in role order: Pragmatist 1, Visionary 2, Skeptic 3. Round 1 splits the
            // vote; in round 2 the Pragmatist votes as before, and the Skeptic joins it.
            let vote = match (role.as_str(), *n) {
                ("Pragmatist", _) => 2,
                ("Visionary", 1) => 3,
                ("Visionary", _) => 1,
                ("Skeptic", 1) => 1,
                _ => 2,
            };
            return structured(json!({"vote": vote}));
        }
        Reply::Text(format!("{role} proposes plan {role}"))
    }))
    .await
    .unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "").await;
    let inv = invoke(&http, &url, "circle", json!({"input": "Where do we meet?"})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed", "{task:#}");
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    let result = s.events.iter().find(|e| e["type"] == "task.result" && e["task_id"] == inv["task_id"]).unwrap();
    assert_eq!(
        (result["payload"]["verdict"].clone(), result["payload"]["round"].clone()),
        (json!("CONSENSUS"), json!(2))
    );
    assert_eq!(result["payload"]["text"], "Visionary proposes plan Visionary");
    let tallies: Vec<Value> = s.records().filter_map(|r| r["payload"]["detail"].get("tally").cloned()).collect();
    assert_eq!(tallies, [json!([1, 1, 1]), json!([1, 2, 0])]);
    let pragmatist_votes: Vec<Value> = s
        .events
        .iter()
        .filter(|e| {
            e["payload"]["type"] == "VOTE" && e["from"]["agent_id"].as_str().is_some_and(|a| a.contains("pragmatist"))
        })
        .map(|e| e["payload"]["content"].clone())
        .collect();
    assert_eq!(pragmatist_votes, [json!({"proposal": 2}), json!({"proposal": 2})], "both rounds' votes are on the bus");
    assert_eq!(s.types().iter().filter(|t| *t == "VOTE").count(), 6);
    assert!(
        !s.events.iter().any(|e| e["payload_type"] == "clutch.session.warning.v1"),
        "no loop warning: {:?}",
        s.events.iter().filter(|e| e["payload_type"] == "clutch.session.warning.v1").collect::<Vec<_>>()
    );
    runner_reexecuted(&url, inv["session_id"].as_str().unwrap());
}

/// The open turns in `who`'s inbox, once there are `n` of them.
async fn turns_of(http: &reqwest::Client, url: &str, who: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let inbox: Value = http.get(format!("{url}/v1/inbox/{who}")).send().await.unwrap().json().await.unwrap();
        let tasks = inbox["tasks"].as_array().cloned().unwrap_or_default();
        if tasks.len() >= n {
            return tasks;
        }
        assert!(Instant::now() < deadline, "{who} has no turn: {inbox}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 44: a clean stop is not a failure. A mirror with one role played by a person, stopped with
/// SIGTERM while the person's turn is open, twice: nothing of the session is written at the stops, it
/// goes on after each restart, and ends COMPLETED once the person answers; the spawned agent is
/// removed at its end, and one left over from a session that ended is removed at the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_goes_on_after_sigterm_with_a_persons_turn_open() {
    let fake = Fake::start(players(true)).await.unwrap();
    let (dir, daemon, http, url) = up(&fake, "").await;
    let inv = invoke(&http, &url, "mirror", json!({"input": "6 × 7", "agents": {"Verifier": "user:ada"}})).await;
    let session = inv["session_id"].as_str().unwrap().to_owned();
    let turn = turns_of(&http, &url, "user:ada", 1).await[0]["task"]["task_id"].as_str().unwrap().to_owned();
    // A card left over by a session that ended before its members were removed.
    let leftover = json!({"v": "clutch/0.1", "agent_id": "agent:mirror-reflector-gone",
        "capabilities": [{"id": "skill:role-reflector"}],
        "meta": {"llm": {"provider": "fake", "system": "You are gone."}, "session_id": "run_01JD0000000000000000000000"}});
    let r = http.post(format!("{url}/v1/agents")).json(&leftover).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());

    let mut daemon = daemon;
    for stop in 1..=2 {
        let (status, stderr) = daemon.terminate();
        assert!(status.success(), "stop {stop}: {stderr}");
        assert!(!stderr.contains("starting again"), "a stop is no failure (stop {stop}): {stderr}");
        daemon = serve(dir.path(), &fake, "");
        until_positions(&http, &daemon.url).await;
        let open = turns_of(&http, &daemon.url, "user:ada", 1).await;
        assert_eq!(open[0]["task"]["task_id"], turn.as_str(), "the same turn waits after restart {stop}");
    }
    let url = daemon.url.clone();
    let s = Session::read(&http, &url, &session).await;
    assert!(!s.phases().iter().any(|p| p == "ERROR"), "{:?}", s.phases());
    let agents: Value = http.get(format!("{url}/v1/agents")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = agents["agents"].as_array().unwrap().iter().map(|a| a["agent_id"].as_str().unwrap()).collect();
    assert!(!ids.contains(&"agent:mirror-reflector-gone"), "a leftover is removed at the start: {ids:?}");
    assert!(ids.iter().any(|a| a.starts_with("agent:mirror-reflector-")), "the session's member stays: {ids:?}");

    // Ada answers her analysis, then her comparison (the word alone).
    for (n, text) in [(1, "ada found 42"), (2, "CONSENSUS")] {
        let open = turns_of(&http, &url, "user:ada", 1).await;
        let task = open[0]["task"]["task_id"].as_str().unwrap();
        let r = http
            .post(format!("{url}/v1/tasks/{task}/reply"))
            .json(&json!({"agent_id": "user:ada", "status": "completed", "text": text}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "reply {n}: {}", r.text().await.unwrap());
        let deadline = Instant::now() + DEADLINE;
        while turns_of(&http, &url, "user:ada", 0).await.iter().any(|t| t["task"]["task_id"] == task) {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed", "{task:#}");
    let s = Session::read(&http, &url, &session).await;
    assert_eq!(s.phases(), completed_phases());
    assert_eq!(s.types(), ["RESULTS", "RESULTS", "CONSENSUS", "CONSENSUS"]);
    let agents: Value = http.get(format!("{url}/v1/agents")).send().await.unwrap().json().await.unwrap();
    assert!(agents["agents"].as_array().unwrap().is_empty(), "the spawned member is removed: {agents}");
    runner_reexecuted(&url, &session);
}

/// Issue 44: a vote that cannot be read (prose, asked for again, prose again) is an abstention:
/// recorded with why, never counted, and never put on the bus as a vote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_vote_is_an_abstention() {
    let fake = Fake::start(Options::script(|body, _| {
        let (role, asked) = (role(body), asked(body));
        if body.to_string().contains("Vote for the best proposal") {
            return match role.as_str() {
                "Skeptic" => Reply::Text("I would rather vote for the second one, I think.".into()),
                "Pragmatist" => structured(json!({"vote": 2})),
                _ => structured(json!({"vote": 1})),
            };
        }
        Reply::Text(format!("{role} proposes plan {role}: {}", asked.len()))
    }))
    .await
    .unwrap();
    let (_dir, _daemon, http, url) = up(&fake, "").await;
    let inv = invoke(&http, &url, "circle", json!({"input": "Where?", "rounds": 1})).await;
    let task = ended(&http, &url, inv["task_id"].as_str().unwrap()).await;
    assert_eq!(task["state"], "completed", "{task:#}");
    let s = Session::read(&http, &url, inv["session_id"].as_str().unwrap()).await;
    let detail = s.records().find_map(|r| r["payload"]["detail"].get("tally").map(|_| r["payload"]["detail"].clone()));
    let detail = detail.expect("the round recorded");
    assert_eq!(detail["tally"], json!([1, 1, 0]), "{detail}");
    assert_eq!(detail["votes"], json!({"Pragmatist": 2, "Visionary": 1}), "{detail}");
    assert!(detail["abstained"]["Skeptic"].is_string(), "{detail}");
    let result = s.events.iter().find(|e| e["type"] == "task.result" && e["task_id"] == inv["task_id"]).unwrap();
    assert_eq!(result["payload"]["verdict"], "NO_QUORUM", "{result}");
    assert_eq!(s.types().iter().filter(|t| *t == "VOTE").count(), 2, "{:?}", s.types());
    // Proposals, votes, and the Skeptic's vote asked for once more.
    assert_eq!(s.turns().iter().filter(|r| *r == "Skeptic").count(), 3, "{:?}", s.turns());
}
