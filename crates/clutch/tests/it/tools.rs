//! Tool calls through the real binary: `clutch serve` with an MCP server declared in clutch.toml
//! (`@modelcontextprotocol/server-filesystem`, npm, installed by the test command), `clutch tools
//! list`, a destructive call approved with `clutch tools pending|approve`, and the crash test for
//! side effects: the daemon is killed with SIGKILL after it noted a call as started and before the
//! call's answer; after a restart the call is answered in doubt and its side effect happened at most
//! once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clutch_core::view::{self, ServerState};
use clutch_proto::id::{Kind, generate};
use serde_json::{Value, json};

use crate::support::{DEADLINE, Daemon, all_events, clutch, post, run, run_id};

fn filesystem_server() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../node_modules/.bin/mcp-server-filesystem");
    assert!(bin.exists(), "{} is missing: the test command installs it (npm ci in ./scripts/ui-setup)", bin.display());
    bin
}

/// `clutch serve` in `dir` with the filesystem server over `root` (its pid written to `pid`).
fn serve(dir: &Path, root: &Path, pid: &Path) -> Daemon {
    let config = format!(
        "[[mcp_servers]]\nname = \"files\"\ncommand = \"sh\"\nargs = [\"-c\", \"echo $$ > '{}'; exec '{}' '{}'\"]\n",
        pid.display(),
        filesystem_server().display(),
        root.display()
    );
    std::fs::write(dir.join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir).args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    Daemon::spawn(cmd)
}

async fn ready(http: &reqwest::Client, url: &str) -> view::Tools {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let tools: view::Tools = http.get(format!("{url}/v1/tools")).send().await.unwrap().json().await.unwrap();
        if !tools.servers.is_empty() && tools.servers.iter().all(|s| s.state == ServerState::Ready) {
            return tools;
        }
        assert!(Instant::now() < deadline, "the tool server is not ready: {tools:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn call(run: &str, task: &str, tool: &str, args: Value) -> Value {
    json!({
        "run_id": run, "thread_id": generate(Kind::Thread), "task_id": task,
        "from": {"agent_id": "agent:ken"}, "to": [], "type": "tool.call", "payload": {"tool": tool, "args": args},
    })
}

/// The events of `run` once `done` holds for them.
async fn until(http: &reqwest::Client, url: &str, run: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let events: Vec<Value> = all_events(http, url).await.into_iter().filter(|e| e["run_id"] == run).collect();
        if done(&events) {
            return events;
        }
        assert!(Instant::now() < deadline, "not yet: {events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn signal(signal: &str, pid: &str) {
    let _ = std::process::Command::new("kill").args([signal, pid.trim()]).status();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_way_at_sigkill_is_in_doubt_after_the_restart_and_ran_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("shared");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let file = root.join("count.txt");
    std::fs::write(&file, "a").unwrap();
    let pid = dir.path().join("server.pid");
    let http = reqwest::Client::new();

    let daemon = serve(dir.path(), &root, &pid);
    let tools = ready(&http, &daemon.url).await;
    let edit = tools.servers[0].tools.iter().find(|t| t.name == "mcp:files/edit_file").expect("edit_file is listed");
    assert!(!edit.annotations.read_only && !edit.annotations.idempotent, "{edit:?}");
    let listed = run(
        {
            let mut cmd = clutch();
            cmd.args(["tools", "list", "--url", &daemon.url]);
            cmd
        },
        "",
    );
    assert!(listed.stdout.contains("mcp:files/edit_file") && listed.stdout.contains("ready"), "{listed:?}");

    // The server is frozen, so the call, once noted as started, cannot be answered: the daemon is
    // killed between its start and its answer.
    let server = std::fs::read_to_string(&pid).unwrap();
    signal("-STOP", &server);
    let run_id = run_id();
    let task = generate(Kind::Task);
    let edit_args = json!({"path": file.display().to_string(), "edits": [{"oldText": "a", "newText": "ab"}]});
    let (status, ack) = post(&http, &daemon.url, &call(&run_id, &task, "mcp:files/edit_file", edit_args)).await;
    assert_eq!(status, 201, "{ack}");
    // edit_file may destroy and is not read-only: it waits for a person's approval.
    let call_id = ack["id"].as_str().unwrap().to_owned();
    until(&http, &daemon.url, &run_id, |events| {
        events.iter().any(|e| e["payload_type"] == "clutch.approval.requested.v1")
    })
    .await;
    let cli = |args: &[&str]| {
        let mut cmd = clutch();
        cmd.args(args).args(["--url", &daemon.url]);
        run(cmd, "")
    };
    let pending = cli(&["tools", "pending"]);
    assert!(pending.stdout.contains(&call_id) && pending.stdout.contains("destructive"), "{pending:?}");
    let approved = cli(&["tools", "approve", &call_id, "--note", "checked"]);
    assert_eq!(approved.code, Some(0), "{approved:?}");
    assert_eq!(approved.stdout, format!("{call_id} approved (mcp:files/edit_file) by user:local\n"));
    let again = cli(&["tools", "deny", &call_id]);
    assert_eq!(again.code, Some(1), "one decision per call: {again:?}");
    until(&http, &daemon.url, &run_id, |events| events.iter().any(|e| e["payload_type"] == "clutch.tool.started.v1"))
        .await;
    daemon.kill();
    // The orphaned server wakes and makes the edit it was sent (once), then finds no one to answer.
    signal("-CONT", &server);
    let deadline = Instant::now() + DEADLINE;
    while std::fs::read_to_string(&file).unwrap() != "ab" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal("-KILL", &server);

    let daemon = serve(dir.path(), &root, &pid);
    let events = until(&http, &daemon.url, &run_id, |events| events.iter().any(|e| e["type"] == "tool.error")).await;
    let answer = events.iter().find(|e| e["type"] == "tool.error").unwrap();
    assert_eq!(answer["payload"]["code"], "TOOL_IN_DOUBT", "{answer}");
    assert_eq!(answer["payload"]["retryable"], false, "edit_file is neither read-only nor idempotent");
    assert_eq!(answer["to"], json!([{"agent_id": "agent:ken"}]));
    let starts = events.iter().filter(|e| e["payload_type"] == "clutch.tool.started.v1").count();
    assert_eq!(starts, 1, "not made again: {events:?}");
    // Once the restarted server is up, the file shows the edit made exactly once.
    ready(&http, &daemon.url).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "ab");

    // The restarted daemon makes new calls.
    let task = generate(Kind::Task);
    let read = call(&run_id, &task, "mcp:files/read_text_file", json!({"path": file.display().to_string()}));
    assert_eq!(post(&http, &daemon.url, &read).await.0, 201);
    let events = until(&http, &daemon.url, &run_id, |events| {
        events.iter().any(|e| e["type"] == "tool.result" && e["task_id"] == task.as_str())
    })
    .await;
    let result = events.iter().find(|e| e["type"] == "tool.result").unwrap();
    assert_eq!(result["payload"]["content"][0]["text"], "ab", "{result}");
    let (status, _) = daemon.terminate();
    assert!(status.success());
}
