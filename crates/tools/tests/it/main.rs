//! The MCP client adapter against real MCP servers nobody here wrote: the reference
//! `@modelcontextprotocol/server-everything` (npm, installed into ./node_modules by the test
//! command; over stdio and Streamable HTTP) and `mcp-server-git` (PyPI, installed into .tools/venv),
//! and servers that are not there (an address nobody listens at, a command that exits at start),
//! in a daemon built as `clutch serve` builds it (the HTTP face aside: calls go in as `tool.call`
//! messages through the engine, as every face submits them, and come back as `tool.result` /
//! `tool.error` in the log).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clutch_app::{App, face};
use clutch_core::view::{self, ServerState};
use clutch_core::{Engine, Handle};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_store::Filter;
use clutch_tools::ServerConfig;
use serde_json::{Value, json};

/// How long anything here may take before a test says what it was waiting for.
const WAIT: Duration = Duration::from_secs(30);

/// The reference server's command, as the test command installs it.
fn everything() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: the test command installs it (./scripts/ui-setup runs npm ci); run ./scripts/test, or npm ci",
        bin.display()
    );
    bin
}

/// The reference server over stdio, started through `sh` so that it writes its pid to `pid_file`.
fn server(name: &str, pid_file: &std::path::Path, call_timeout_ms: u64) -> ServerConfig {
    ServerConfig {
        name: name.to_owned(),
        command: Some("sh".into()),
        args: vec!["-c".into(), format!("echo $$ > '{}'; exec '{}' stdio", pid_file.display(), everything().display())],
        env: Default::default(),
        url: None,
        headers: Default::default(),
        connect_timeout_ms: 20_000,
        call_timeout_ms,
    }
}

struct Daemon {
    log: Handle,
    engine: Engine,
    app: App,
    _dir: tempfile::TempDir,
}

async fn start(servers: Vec<ServerConfig>) -> Daemon {
    start_in(tempfile::tempdir().unwrap(), Some(servers)).await
}

/// A daemon over the store in `dir`: with the tools face and `servers`, or (`None`) without it.
async fn start_in(dir: tempfile::TempDir, servers: Option<Vec<ServerConfig>>) -> Daemon {
    start_with(dir, servers, clutch_core::engine::Options::default()).await
}

async fn start_with(
    dir: tempfile::TempDir,
    servers: Option<Vec<ServerConfig>>,
    engine: clutch_core::engine::Options,
) -> Daemon {
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let mut builder = App::builder(Arc::new(store)).engine(engine);
    if let Some(servers) = servers {
        builder = builder.face(face::Tools { servers, ..Default::default() });
    }
    let app = builder.build().await.unwrap();
    Daemon { log: app.log.clone(), engine: app.engine.clone(), app, _dir: dir }
}

impl Daemon {
    async fn tools(&self) -> view::Tools {
        self.engine.adapters().tools()
    }

    /// Waits until every server is ready; returns the listing.
    async fn ready(&self) -> view::Tools {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let tools = self.tools().await;
            if tools.servers.iter().all(|s| s.state == ServerState::Ready) {
                return tools;
            }
            assert!(tokio::time::Instant::now() < deadline, "servers not ready: {tools:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Posts a `tool.call` from `from` on a task of its own; returns the call's (id, task id).
    async fn call(&self, from: &str, tool: &str, args: Value) -> Result<(String, String), Value> {
        let task = id::generate(Kind::Task);
        let call = json!({
            "run_id": id::generate(Kind::Run), "thread_id": id::generate(Kind::Thread), "task_id": task,
            "from": {"agent_id": from}, "to": [], "type": "tool.call", "payload": {"tool": tool, "args": args},
        });
        let call = validate::message(&call, &Defaults { now: SystemTime::now() }).unwrap();
        let id = call.id.clone();
        match self.engine.submit(vec![call]).await.unwrap().pop().unwrap() {
            Ok(_) => Ok((id, task)),
            Err(e) => Err(serde_json::to_value(e.body()).unwrap()),
        }
    }

    /// The events of `task`, once one of them is the call's answer.
    async fn answer(&self, task: &str) -> (Value, Vec<Value>) {
        let answered = |e: &Value| e["type"] == "tool.result" || e["type"] == "tool.error";
        let events = events_until(self, task, |events| events.iter().any(answered)).await;
        (events.iter().find(|e| answered(e)).cloned().expect("answered"), events)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_on_a_real_mcp_server_and_answer_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let d = start(vec![server("everything", &dir.path().join("pid"), 60_000)]).await;
    let tools = d.ready().await;
    let server = &tools.servers[0];
    assert_eq!((server.name.as_str(), server.transport.as_str(), server.restarts), ("mcp:everything", "stdio", 0));
    let echo = server.tools.iter().find(|t| t.name == "mcp:everything/echo").expect("echo is listed");
    assert!(echo.annotations.read_only && echo.annotations.idempotent, "{echo:?}");
    assert_eq!(echo.input_schema["required"], json!(["message"]));

    // Success: the content blocks as the tool gave them, to the caller, after a start note.
    let (call, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "hello"})).await.unwrap();
    let (answer, events) = d.answer(&task).await;
    assert_eq!(answer["type"], "tool.result", "{answer}");
    assert_eq!(answer["from"]["agent_id"], "agent:orchestrator");
    assert_eq!(answer["to"], json!([{"agent_id": "agent:ken"}]));
    assert_eq!(answer["payload"]["call_id"], call.as_str());
    assert_eq!(answer["payload"]["tool"], "mcp:everything/echo");
    assert_eq!(answer["payload"]["content"], json!([{"type": "text", "text": "Echo: hello"}]));
    let kinds: Vec<(&str, Option<&str>)> =
        events.iter().map(|e| (e["type"].as_str().unwrap(), e["payload_type"].as_str())).collect();
    assert_eq!(
        kinds,
        [("tool.call", None), ("chat.system", Some("clutch.tool.started.v1")), ("tool.result", None)],
        "the call, its start note, its answer"
    );
    assert_eq!(
        events[1]["payload"],
        json!({"tool": "mcp:everything/echo", "call_id": call, "adapter": "mcp", "attempt": 1})
    );
    // A quick call of a read-only tool: its note is stored with its answer, in one append.
    let seq = |e: &Value| e["seq"].as_u64().expect("events carry their seq");
    assert_eq!(seq(&events[2]), seq(&events[1]) + 1, "{events:?}");

    // Structured content is kept.
    let (_, task) =
        d.call("agent:ken", "mcp:everything/get-structured-content", json!({"location": "New York"})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["type"], "tool.result", "{answer}");
    assert!(answer["payload"]["structured_content"].is_object(), "{answer}");

    // The tool refuses its arguments: TOOL_FAILED, not retryable, the tool's words.
    let (_, task) = d.call("agent:ken", "mcp:everything/get-sum", json!({"a": "one", "b": 2})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["type"], "tool.error", "{answer}");
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_FAILED"), Some(false)),
        "{answer}"
    );
    assert_eq!(answer["payload"]["details"]["tool"], "mcp:everything/get-sum");

    // A tool the server does not have.
    let (_, task) = d.call("agent:ken", "mcp:everything/nope", json!({})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["code"], "NOT_FOUND", "{answer}");
    assert!(answer["payload"]["message"].as_str().unwrap().contains("echo"), "names the tools it has: {answer}");

    // Calls of tools no adapter serves are left alone (an agent may answer them).
    let (_, task) = d.call("agent:ken", "mcp:elsewhere/x", json!({})).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let events = d.log.read(&Filter { task_id: Some(task), ..Filter::default() }, 0, 10).await.unwrap();
    assert_eq!(events.len(), 1, "only the call");
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_crashes_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let d = start(vec![server("everything", &pid_file, 1_000)]).await;
    d.ready().await;

    // No answer within the call's timeout: TOOL_TIMEOUT, retryable as the tool is read-only.
    let args = json!({"duration": 5, "steps": 5});
    let (_, task) = d.call("agent:ken", "mcp:everything/trigger-long-running-operation", args).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_TIMEOUT"), Some(true)),
        "{answer}"
    );

    // The server killed mid-call: the call is in doubt, and the server comes back.
    let d = restart_with(d, vec![server("everything", &pid_file, 60_000)]).await;
    d.ready().await;
    let args = json!({"duration": 10, "steps": 10});
    let (_, task) = d.call("agent:ken", "mcp:everything/trigger-long-running-operation", args).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
    assert!(killed.success());
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["code"], "TOOL_IN_DOUBT", "{answer}");
    assert_eq!(answer["payload"]["retryable"], true, "a read-only tool may be called again: {answer}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let tools = d.tools().await;
        if tools.servers[0].state == ServerState::Ready && tools.servers[0].restarts >= 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not restarted: {tools:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "back"})).await.unwrap();
    assert_eq!(d.answer(&task).await.0["type"], "tool.result");
    d.app.stop().await.unwrap();
}

async fn restart_with(d: Daemon, servers: Vec<ServerConfig>) -> Daemon {
    d.app.stop().await.unwrap();
    start_in(d._dir, Some(servers)).await
}

/// Stopping the daemon ends a server's command: its supervisor drops the start under way, and the
/// command with it (killed, not left running without a client), even one that would outlive its
/// stdin (here a shell that sleeps once the server it ran has ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_daemon_ends_a_servers_command() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut config = server("everything", &pid_file, 60_000);
    config.args =
        vec!["-c".into(), format!("echo $$ > '{}'; '{}' stdio; sleep 600", pid_file.display(), everything().display())];
    let d = start(vec![config]).await;
    d.ready().await;
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_owned();
    // Running: listed by the kernel, and not a zombie (its state follows its name in parentheses).
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    };
    assert!(running(), "the command {pid} runs while the daemon does");
    d.app.stop().await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while running() {
        assert!(tokio::time::Instant::now() < deadline, "the command {pid} still runs after the daemon stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowlists_cover_whole_servers_and_single_tools() {
    let dir = tempfile::tempdir().unwrap();
    let d = start(vec![server("everything", &dir.path().join("pid"), 60_000)]).await;
    d.ready().await;
    for (name, tools) in [("ida", json!(["mcp:everything"])), ("ken", json!(["mcp:everything/echo"]))] {
        let card = json!({"agent_id": format!("agent:{name}"), "capabilities": [{"id": "skill:x", "tools": tools}]});
        d.engine.register(&validate::agent_card(&card).unwrap()).await.unwrap();
    }
    let (_, task) = d.call("agent:ida", "mcp:everything/get-sum", json!({"a": 1, "b": 2})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["type"], "tool.result", "the whole server is on ida's card: {answer}");
    assert_eq!(answer["payload"]["content"][0]["text"], "The sum of 1 and 2 is 3.");
    let (_, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "ok"})).await.unwrap();
    assert_eq!(d.answer(&task).await.0["type"], "tool.result");
    // Not on ken's card: refused before it is stored, answered in the log, never made.
    let refused = d.call("agent:ken", "mcp:everything/get-sum", json!({"a": 1, "b": 2})).await.unwrap_err();
    assert_eq!(refused["code"], "FORBIDDEN", "{refused}");
    d.app.stop().await.unwrap();
}

/// A restart finds calls as a crash left them: one never started is made; one started and not
/// answered is made again if its tool is read-only or idempotent, and is otherwise answered
/// TOOL_IN_DOUBT without being made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_a_crash_left_are_made_once_or_answered_in_doubt() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let d = start(vec![server("everything", &pid_file, 60_000)]).await;
    d.ready().await;
    let (first, _) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "warm"})).await.unwrap();
    assert!(!first.is_empty());
    // The daemon stops; then, as if it had crashed with calls under way, the log is given calls
    // with and without start notes and no answers.
    let store = d._dir;
    d.app.stop().await.unwrap();
    let (never, retried, doubted) = {
        // Without the tools face: nothing makes these calls or moves past them.
        let d = start_in(store, None).await;
        let mut out = Vec::new();
        for (tool, args, noted) in [
            ("mcp:everything/echo", json!({"message": "never started"}), false),
            ("mcp:everything/echo", json!({"message": "again"}), true),
            ("mcp:everything/toggle-simulated-logging", json!({}), true),
        ] {
            let (call, task) = d.call("agent:ken", tool, args).await.unwrap();
            if noted {
                let mut note = clutch_proto::Message::new(
                    clutch_proto::MessageType::ChatSystem,
                    "agent:orchestrator",
                    ("run_00000000000000000000000001", "thr_00000000000000000000000001", &task),
                    json!({"tool": tool, "call_id": call, "adapter": "mcp", "attempt": 1}).as_object().unwrap().clone(),
                );
                note.payload_type = Some("clutch.tool.started.v1".into());
                note.idempotency_key = Some(format!("clutch:tool-start:{call}:1"));
                d.log.append_one(note).await.unwrap();
            }
            out.push(task);
        }
        let dir = d._dir;
        d.app.stop().await.unwrap();
        let d = start_in(dir, Some(vec![server("everything", &pid_file, 60_000)])).await;
        let answers = (d.answer(&out[0]).await, d.answer(&out[1]).await, d.answer(&out[2]).await);
        d.app.stop().await.unwrap();
        answers
    };
    assert_eq!(never.0["payload"]["content"][0]["text"], "Echo: never started", "{:?}", never.0);
    let notes = |events: &[Value]| events.iter().filter(|e| e["payload_type"] == "clutch.tool.started.v1").count();
    assert_eq!(notes(&never.1), 1);
    assert_eq!(retried.0["type"], "tool.result", "echo is read-only: made again ({:?})", retried.0);
    assert_eq!(notes(&retried.1), 2, "its second start is noted");
    assert_eq!(doubted.0["payload"]["code"], "TOOL_IN_DOUBT", "{:?}", doubted.0);
    assert_eq!(doubted.0["payload"]["retryable"], false);
    assert_eq!(notes(&doubted.1), 1, "not made again");
}

/// The reference server serving Streamable HTTP on `port`.
fn everything_over_http(port: u16) -> tokio::process::Child {
    tokio::process::Command::new(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The reference server over Streamable HTTP on this machine: reached only once the operator allows
/// loopback targets (the outbound guard refuses them by default, as every URL from config is checked);
/// then its tools answer as over stdio (a result, a tool error, a timeout), and a call under way when
/// it is killed is in doubt, with calls going through again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_over_http_go_through_the_outbound_guard() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut web = everything_over_http(port);
    let config = ServerConfig {
        name: "web".into(),
        command: None,
        args: Vec::new(),
        env: Default::default(),
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        headers: [("X-Test".to_owned(), "yes".to_owned())].into(),
        connect_timeout_ms: 1_000,
        call_timeout_ms: 60_000,
    };

    // Default rules: loopback is refused, so the server is never reached and calls are not made.
    let d = start(vec![config.clone()]).await;
    let (_, task) = d.call("agent:ken", "mcp:web/echo", json!({"message": "hi"})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_UNAVAILABLE"), Some(true)),
        "{answer}"
    );
    let server = &d.tools().await.servers[0];
    assert_ne!(server.state, ServerState::Ready);
    assert!(server.error.as_deref().unwrap_or_default().contains("outbound"), "names the guard's rule: {server:?}");
    d.app.stop().await.unwrap();

    // The operator allows loopback: the same server is reached, its tools listed and called.
    let policy = clutch_core::guard::Policy::new(&[], true, &Default::default()).unwrap();
    let engine = clutch_core::engine::Options { outbound: Arc::new(policy), ..Default::default() };
    // The same server a second time, with a short call timeout.
    let short = ServerConfig { name: "web-short".into(), call_timeout_ms: 1_000, ..config.clone() };
    let d = start_with(tempfile::tempdir().unwrap(), Some(vec![config, short]), engine).await;
    let tools = d.ready().await;
    assert_eq!(tools.servers[0].transport, "http");
    let (_, task) = d.call("agent:ken", "mcp:web/echo", json!({"message": "over http"})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["content"], json!([{"type": "text", "text": "Echo: over http"}]), "{answer}");
    let (_, task) = d.call("agent:ken", "mcp:web/get-sum", json!({"a": 2, "b": 3})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["content"][0]["text"], "The sum of 2 and 3 is 5.", "{answer}");
    let (_, task) = d.call("agent:ken", "mcp:web/get-sum", json!({"a": "two", "b": 3})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["code"], "TOOL_FAILED", "{answer}");
    let long = json!({"duration": 5, "steps": 5});
    let (_, task) = d.call("agent:ken", "mcp:web-short/trigger-long-running-operation", long).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["code"], "TOOL_TIMEOUT", "{answer}");

    // The server killed mid-call: the call is in doubt; once the server is back, calls go through.
    let long = json!({"duration": 10, "steps": 10});
    let (_, task) = d.call("agent:ken", "mcp:web/trigger-long-running-operation", long).await.unwrap();
    events_until(&d, &task, |events| events.iter().any(|e| e["payload_type"] == "clutch.tool.started.v1")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    web.kill().await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_IN_DOUBT"), Some(true)),
        "a read-only tool may be called again: {answer}"
    );
    let mut web = everything_over_http(port);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, task) = d.call("agent:ken", "mcp:web/echo", json!({"message": "back"})).await.unwrap();
        let (answer, _) = d.answer(&task).await;
        if answer["type"] == "tool.result" {
            break;
        }
        assert_eq!(answer["payload"]["code"], "TOOL_UNAVAILABLE", "{answer}");
        assert!(tokio::time::Instant::now() < deadline, "not back: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    d.app.stop().await.unwrap();
    web.kill().await.unwrap();
}

/// A daemon whose policy (org.yaml) is `org`.
async fn start_with_org(dir: tempfile::TempDir, servers: Vec<ServerConfig>, org: &str) -> Daemon {
    let policy_dir = dir.path().join("policy");
    std::fs::create_dir_all(&policy_dir).unwrap();
    std::fs::write(policy_dir.join("org.yaml"), org).unwrap();
    let policy = clutch_core::config::Policy::load(&policy_dir).unwrap();
    let engine = clutch_core::engine::Options { policy: Arc::new(policy), ..Default::default() };
    start_with(dir, Some(servers), engine).await
}

/// The events of `task` once `done` holds for them.
async fn events_until(d: &Daemon, task: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let filter = Filter { task_id: Some(task.to_owned()), ..Filter::default() };
        let events: Vec<Value> = d
            .log
            .read(&filter, 0, 100)
            .await
            .unwrap()
            .iter()
            .map(|e| serde_json::from_str(&e.to_wire()).unwrap())
            .collect();
        if done(&events) {
            return events;
        }
        assert!(tokio::time::Instant::now() < deadline, "not yet for {task}: {events:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["payload_type"].as_str() {
            Some(pt) => pt.trim_start_matches("clutch.").to_owned(),
            None => e["type"].as_str().unwrap().to_owned(),
        })
        .collect()
}

/// Calls that wait for a person: approved ones are made, denied and expired ones are not, and each
/// call gets one decision; a call waiting when the daemon stops waits again after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_wait_for_approval_and_run_only_when_approved() {
    use clutch_core::payload::Decision;
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("pid");
    let org = "approvals:\n  tools: [mcp:everything/echo]\n  timeout_sec: 2\n";
    let store = tempfile::tempdir().unwrap();
    let d = start_with_org(store, vec![server("everything", &pid, 60_000)], org).await;
    d.ready().await;
    let waiting = |d: &Daemon, call: &str| d.engine.approvals().pending.iter().any(|a| a.call_id == call);
    let requested = |events: &[Value]| events.iter().any(|e| e["payload_type"] == "clutch.approval.requested.v1");

    // Approved: made after the decision.
    let (call, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "may I"})).await.unwrap();
    let events = events_until(&d, &task, requested).await;
    assert_eq!(events[1]["payload"]["reason"], "policy");
    assert_eq!(events[1]["payload"]["args"], json!({"message": "may I"}));
    assert_eq!(events[1]["to"], json!([{"agent_id": "agent:ken"}]));
    assert!(waiting(&d, &call));
    // A note over 1,000 characters is refused, and decides nothing.
    let long =
        d.engine.decide_approval(&call, Decision::Approved, "user:ada", Some("x".repeat(1001))).await.unwrap_err();
    assert_eq!(long.code(), clutch_proto::ErrorCode::ValidationFailed, "{long:?}");
    assert!(waiting(&d, &call));
    let decided = d.engine.decide_approval(&call, Decision::Approved, "user:ada", Some("fine".into())).await.unwrap();
    assert_eq!((decided.decision, decided.by.as_str()), (Decision::Approved, "user:ada"));
    let (answer, events) = d.answer(&task).await;
    assert_eq!(answer["payload"]["content"][0]["text"], "Echo: may I", "{answer}");
    assert_eq!(
        kinds(&events),
        ["tool.call", "approval.requested.v1", "approval.decided.v1", "tool.started.v1", "tool.result"]
    );
    assert!(!waiting(&d, &call));
    // One decision per call.
    let again = d.engine.decide_approval(&call, Decision::Denied, "user:bob", None).await.unwrap_err();
    assert_eq!(again.code(), clutch_proto::ErrorCode::InvalidTransition, "{again:?}");
    assert!(again.to_string().contains("approved by user:ada"), "names the decision that stands: {again}");

    // Denied: not made; the caller is told who denied it and why.
    let (call, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "no"})).await.unwrap();
    events_until(&d, &task, requested).await;
    d.engine.decide_approval(&call, Decision::Denied, "user:ada", Some("not today".into())).await.unwrap();
    let (answer, events) = d.answer(&task).await;
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_DENIED"), Some(false))
    );
    let message = answer["payload"]["message"].as_str().unwrap();
    assert!(message.contains("user:ada") && message.contains("not today"), "{message}");
    assert!(!kinds(&events).contains(&"tool.started.v1".to_owned()), "never made: {events:?}");

    // Expired: nobody decided within approvals.timeout_sec.
    let (call, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "anyone?"})).await.unwrap();
    let (answer, events) = d.answer(&task).await;
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_DENIED"), Some(true))
    );
    let decided = events.iter().find(|e| e["payload_type"] == "clutch.approval.decided.v1").unwrap();
    assert_eq!(
        (decided["payload"]["decision"].as_str(), decided["payload"]["by"].as_str()),
        (Some("expired"), Some("agent:orchestrator"))
    );
    assert!(!waiting(&d, &call));

    // Tools the policy does not name, and not destructive, are made at once.
    let (_, task) = d.call("agent:ken", "mcp:everything/get-sum", json!({"a": 1, "b": 1})).await.unwrap();
    assert_eq!(d.answer(&task).await.0["type"], "tool.result");

    // A call waiting when the daemon stops waits again after the restart, and is made once approved.
    let (call, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "later"})).await.unwrap();
    events_until(&d, &task, requested).await;
    let store = d._dir;
    d.app.stop().await.unwrap();
    let org = "approvals:\n  tools: [mcp:everything/echo]\n  timeout_sec: 60\n";
    let d = start_with_org(store, vec![server("everything", &pid, 60_000)], org).await;
    assert!(waiting(&d, &call), "still waiting after the restart");
    d.engine.decide_approval(&call, Decision::Approved, "user:ada", None).await.unwrap();
    let (answer, events) = d.answer(&task).await;
    assert_eq!(answer["payload"]["content"][0]["text"], "Echo: later", "{answer}");
    assert_eq!(kinds(&events).iter().filter(|k| *k == "approval.requested.v1").count(), 1, "asked once");
    d.app.stop().await.unwrap();
}

/// A large content block is stored as an artifact: the answer names it (and attaches it), and the
/// artifact holds the block's text as the tool gave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_answers_are_stored_as_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let d = start(vec![server("everything", &dir.path().join("pid"), 60_000)]).await;
    d.ready().await;
    let big = "x".repeat(100_000);
    let (_, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": big})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    let block = &answer["payload"]["content"][0];
    assert_eq!((block["type"].as_str(), block["replaces"].as_str()), (Some("artifact"), Some("text")), "{block}");
    assert_eq!(block["media_type"], "text/plain; charset=utf-8");
    let reference = block["ref"].as_str().unwrap();
    assert_eq!(answer["attachments"][0]["ref"], reference);
    let sha = reference.strip_prefix("artifact:sha256:").unwrap();
    let stored = d.log.get_artifact(sha).await.unwrap().expect("stored");
    assert_eq!(stored.len() as u64, block["size"].as_u64().unwrap());
    assert_eq!(std::str::from_utf8(&stored).unwrap(), format!("Echo: {big}"));
    // A small answer stays inline.
    let (_, task) = d.call("agent:ken", "mcp:everything/echo", json!({"message": "small"})).await.unwrap();
    assert_eq!(d.answer(&task).await.0["payload"]["content"][0]["type"], "text");
    d.app.stop().await.unwrap();
}

/// The reference git server (PyPI `mcp-server-git`, installed into .tools/venv by the test command),
/// confined to `repo`.
fn git_server(repo: &std::path::Path) -> ServerConfig {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/mcp-server-git");
    assert!(
        bin.exists(),
        "{} is missing: the test command installs it (./scripts/py-setup); run ./scripts/test",
        bin.display()
    );
    ServerConfig {
        name: "git".into(),
        command: Some(bin.display().to_string()),
        args: vec!["--repository".into(), repo.display().to_string()],
        env: Default::default(),
        url: None,
        headers: Default::default(),
        connect_timeout_ms: 30_000,
        call_timeout_ms: 30_000,
    }
}

/// `git` in `repo`, its output trimmed.
fn git(repo: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").arg("-C").arg(repo).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A second server nobody here wrote, in another language, on a temporary repository: its calls
/// change the repository as `git` itself sees it, its errors and its confinement come back as
/// `TOOL_FAILED`, and its one destructive tool (by its annotations, with no policy naming it) waits
/// for a person: denied, the index is untouched; approved, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_server_changes_a_repository_and_waits_for_approval_to_destroy() {
    use clutch_core::payload::Decision;
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    let path = repo.display().to_string();
    let d = start(vec![git_server(&repo)]).await;
    let tools = d.ready().await;
    let listed = |name: &str| tools.servers[0].tools.iter().find(|t| t.name == name).cloned().expect(name);
    assert!(listed("mcp:git/git_status").annotations.read_only);
    let reset = listed("mcp:git/git_reset").annotations;
    assert!(reset.destructive && !reset.read_only, "{reset:?}");

    // Add and commit: the repository has the commit.
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    let (_, task) =
        d.call("agent:ken", "mcp:git/git_add", json!({"repo_path": path, "files": ["a.txt"]})).await.unwrap();
    assert_eq!(d.answer(&task).await.0["type"], "tool.result");
    let (_, task) =
        d.call("agent:ken", "mcp:git/git_commit", json!({"repo_path": path, "message": "First"})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["type"], "tool.result", "{answer}");
    assert_eq!(
        (git(&repo, &["rev-list", "--count", "HEAD"]), git(&repo, &["log", "-1", "--format=%s"])),
        ("1".into(), "First".into())
    );
    let (_, task) = d.call("agent:ken", "mcp:git/git_log", json!({"repo_path": path})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert!(answer["payload"]["content"][0]["text"].as_str().unwrap().contains("First"), "{answer}");

    // The tool's own errors, and its confinement to the repository: TOOL_FAILED, not retryable.
    let outside = work.path().display().to_string();
    for args in [
        json!({"repo_path": path, "branch_name": "no-such-branch"}),
        json!({"repo_path": outside, "branch_name": "main"}),
    ] {
        let (_, task) = d.call("agent:ken", "mcp:git/git_checkout", args.clone()).await.unwrap();
        let (answer, _) = d.answer(&task).await;
        assert_eq!(
            (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
            (Some("TOOL_FAILED"), Some(false)),
            "{args}: {answer}"
        );
    }

    // git_reset is destructive by its annotations: it waits. Denied, the staged file stays staged.
    std::fs::write(repo.join("b.txt"), "two\n").unwrap();
    git(&repo, &["add", "b.txt"]);
    let requested = |events: &[Value]| events.iter().any(|e| e["payload_type"] == "clutch.approval.requested.v1");
    let (call, task) = d.call("agent:ken", "mcp:git/git_reset", json!({"repo_path": path})).await.unwrap();
    let events = events_until(&d, &task, requested).await;
    assert_eq!(events[1]["payload"]["reason"], "destructive", "{events:?}");
    d.engine.decide_approval(&call, Decision::Denied, "user:ada", Some("keep it".into())).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    assert_eq!(answer["payload"]["code"], "TOOL_DENIED", "{answer}");
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]), "b.txt", "never made");
    // Approved, it runs.
    let (call, task) = d.call("agent:ken", "mcp:git/git_reset", json!({"repo_path": path})).await.unwrap();
    events_until(&d, &task, requested).await;
    d.engine.decide_approval(&call, Decision::Approved, "user:ada", None).await.unwrap();
    let (answer, events) = d.answer(&task).await;
    assert_eq!(answer["type"], "tool.result", "{answer}");
    assert_eq!(
        kinds(&events),
        ["tool.call", "approval.requested.v1", "approval.decided.v1", "tool.started.v1", "tool.result"]
    );
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]), "", "unstaged");
    d.app.stop().await.unwrap();
}

/// A stdio server that is `script` run by `sh`, connected within `connect_timeout_ms`.
fn shell(name: &str, script: &str, connect_timeout_ms: u64) -> ServerConfig {
    ServerConfig {
        name: name.to_owned(),
        command: Some("sh".into()),
        args: vec!["-c".into(), script.to_owned()],
        env: [("SERVER_TOKEN".to_owned(), "s3cr3t-never-printed".to_owned())].into(),
        url: None,
        headers: Default::default(),
        connect_timeout_ms,
        call_timeout_ms: 60_000,
    }
}

/// Calls `tool` and waits for its answer: the answer and how long it took from the call's submit.
async fn timed_call(d: &Daemon, tool: &str) -> (Value, Duration) {
    let began = std::time::Instant::now();
    let (_, task) = d.call("agent:ken", tool, json!({"message": "hi"})).await.unwrap();
    let (answer, _) = d.answer(&task).await;
    (answer, began.elapsed())
}

/// A server that is down (nothing listens at its address) refuses a call after one wait for a
/// connection, not one for the call's annotations and another for the call itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_server_that_is_down_waits_for_it_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let connect = Duration::from_millis(1_500);
    let config = ServerConfig {
        name: "down".into(),
        command: None,
        args: Vec::new(),
        env: Default::default(),
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        headers: Default::default(),
        connect_timeout_ms: connect.as_millis() as u64,
        call_timeout_ms: 60_000,
    };
    let policy = clutch_core::guard::Policy::new(&[], true, &Default::default()).unwrap();
    let engine = clutch_core::engine::Options { outbound: Arc::new(policy), ..Default::default() };
    let d = start_with(tempfile::tempdir().unwrap(), Some(vec![config]), engine).await;
    let (answer, took) = timed_call(&d, "mcp:down/echo").await;
    assert_eq!(
        (answer["payload"]["code"].as_str(), answer["payload"]["retryable"].as_bool()),
        (Some("TOOL_UNAVAILABLE"), Some(true)),
        "{answer}"
    );
    let message = answer["payload"]["message"].as_str().unwrap();
    assert!(message.contains("not connected") && message.contains("Connection refused"), "says why: {message}");
    assert!(took >= connect, "the call waited for the server to come: {took:?}");
    assert!(took < 2 * connect, "one wait of {connect:?}, not two: {took:?}");
    d.app.stop().await.unwrap();
}

/// A server whose command exits at start is reported with its exit status and the last lines it
/// wrote on stderr, in the listing and in the refused call's error; what it wrote is bounded, and
/// nothing of its environment is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_at_start_says_its_status_and_its_last_words() {
    let connect = Duration::from_millis(1_000);
    let gone = shell("gone", "echo 'cannot open the index' >&2; echo boom >&2; exit 3", 1_000);
    // 200 lines of 1,000 characters each, then the one that says why.
    let chatty = shell(
        "chatty",
        "i=0; while [ $i -lt 200 ]; do printf 'line %d %01000d\\n' $i 0 >&2; i=$((i+1)); done; \
         echo 'last words' >&2; exit 4",
        1_000,
    );
    let d = start(vec![gone, chatty]).await;

    let (answer, took) = timed_call(&d, "mcp:gone/echo").await;
    assert_eq!(answer["payload"]["code"], "TOOL_UNAVAILABLE", "{answer}");
    let message = answer["payload"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "the exit status: {message}");
    assert!(message.contains("`cannot open the index` `boom`"), "its stderr's last lines, in order: {message}");
    assert!(!message.contains("s3cr3t"), "nothing of its environment: {message}");
    assert!(took < 2 * connect, "one wait for a connection: {took:?}");
    let listed = d.tools().await.servers.into_iter().find(|s| s.name == "mcp:gone").unwrap();
    let error = listed.error.unwrap_or_default();
    assert!(error.contains("exit status: 3") && error.contains("boom"), "the listing says why too: {error}");

    let (answer, _) = timed_call(&d, "mcp:chatty/echo").await;
    let message = answer["payload"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 4") && message.contains("`last words`"), "{message}");
    assert!(!message.contains("line 0 "), "only the last lines: {message}");
    let max = clutch_proto::error::MESSAGE_MAX;
    assert!(message.chars().count() <= max, "bounded to {max}: {} characters", message.chars().count());
    d.app.stop().await.unwrap();
}
