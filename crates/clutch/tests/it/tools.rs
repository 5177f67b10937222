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
    // A path outside the server's own roots: the server refuses it, answered TOOL_FAILED.
    let task = generate(Kind::Task);
    let outside = call(&run_id, &task, "mcp:files/read_text_file", json!({"path": dir.path().join("clutch.toml")}));
    assert_eq!(post(&http, &daemon.url, &outside).await.0, 201);
    let events = until(&http, &daemon.url, &run_id, |events| {
        events.iter().any(|e| e["type"] == "tool.error" && e["task_id"] == task.as_str())
    })
    .await;
    let refused = events.iter().find(|e| e["type"] == "tool.error" && e["task_id"] == task.as_str()).unwrap();
    assert_eq!(refused["payload"]["code"], "TOOL_FAILED", "{refused}");
    let (status, _) = daemon.terminate();
    assert!(status.success());
}

/// A client whose every request carries `token`.
fn client_with(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    reqwest::Client::builder().default_headers(headers).build().unwrap()
}

/// The operator's allowlist holds for an agent whether or not it registered a card (issue 44: an
/// unregistered agent escaped it): with `agent:unreg: {tool_allowlist: [list_directory]}`, its
/// agent token may list but not read, before it registers, with a card naming no tools, and with a
/// card naming only read_text_file, which narrows it to nothing. An allowed call runs; a refused one
/// is answered 403 and with a `tool.error` FORBIDDEN, and reaches no tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_allowlist_holds_registered_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("shared");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("note.txt"), "secret").unwrap();
    let policy = dir.path().join("policy");
    std::fs::create_dir(&policy).unwrap();
    std::fs::write(
        policy.join("org.yaml"),
        "tokens:\n  - {name: ops, role: admin, token: ops-token-0123456789}\n  \
         - {name: unreg, role: agent, agent_id: agent:unreg, token: unreg-token-0123456789}\n\
         agents:\n  agent:unreg: {tool_allowlist: [mcp:files/list_directory]}\n",
    )
    .unwrap();
    let config = format!(
        "config_dir = \"policy\"\n\n[[mcp_servers]]\nname = \"files\"\ncommand = \"{}\"\nargs = [\"{}\"]\n",
        filesystem_server().display(),
        root.display()
    );
    std::fs::write(dir.path().join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    let daemon = Daemon::spawn(cmd);
    let ops = client_with("ops-token-0123456789");
    let agent = client_with("unreg-token-0123456789");
    ready(&ops, &daemon.url).await;
    let run_id = run_id();
    let path = |p: &Path| json!({"path": p.display().to_string()});
    let check = async |stage: &str, list_allowed: bool| {
        for (tool, args, allowed) in [
            ("mcp:files/list_directory", path(&root), list_allowed),
            ("mcp:files/read_text_file", path(&root.join("note.txt")), false),
        ] {
            let task = generate(Kind::Task);
            let mut message = call(&run_id, &task, tool, args);
            message["from"] = json!({"agent_id": "agent:unreg"});
            let (status, ack) = post(&agent, &daemon.url, &message).await;
            let case = format!("{stage}: {tool}");
            let events = if allowed {
                assert_eq!(status, 201, "{case}: {ack}");
                until(&ops, &daemon.url, &run_id, |events| {
                    events.iter().any(|e| e["type"] == "tool.result" && e["task_id"] == task.as_str())
                })
                .await
            } else {
                assert_eq!((status, ack["error"]["code"].as_str()), (403, Some("FORBIDDEN")), "{case}: {ack}");
                until(&ops, &daemon.url, &run_id, |events| {
                    events.iter().any(|e| e["type"] == "tool.error" && e["task_id"] == task.as_str())
                })
                .await
            };
            let of_task: Vec<&Value> = events.iter().filter(|e| e["task_id"] == task.as_str()).collect();
            let calls = of_task.iter().filter(|e| e["type"] == "tool.call").count();
            let started = of_task.iter().filter(|e| e["payload_type"] == "clutch.tool.started.v1").count();
            if allowed {
                assert_eq!((calls, started), (1, 1), "{case}: {of_task:?}");
            } else {
                assert_eq!((calls, started), (0, 0), "{case}: a refused call reaches no tool: {of_task:?}");
                let answer = of_task.iter().find(|e| e["type"] == "tool.error").unwrap();
                assert_eq!(answer["payload"]["code"], "FORBIDDEN", "{case}: {answer}");
                assert_eq!(answer["to"], json!([{"agent_id": "agent:unreg"}]), "{case}");
            }
        }
    };
    check("unregistered", true).await;
    let register = async |card: Value| {
        let r = agent.post(format!("{}/v1/agents", daemon.url)).json(&card).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    };
    register(json!({"v": "clutch/0.1", "agent_id": "agent:unreg", "capabilities": [{"id": "skill:notes"}]})).await;
    check("a card naming no tools", true).await;
    register(json!({"v": "clutch/0.1", "agent_id": "agent:unreg",
        "capabilities": [{"id": "skill:notes", "tools": ["mcp:files/read_text_file"]}]}))
    .await;
    check("a card naming only read_text_file", false).await;
    let (status, _) = daemon.terminate();
    assert!(status.success());
}

/// What a webhook receiver got: `(clutch-seq, clutch-signature, body as sent)` per accepted request.
type Received = std::sync::Arc<std::sync::Mutex<Vec<(u64, String, String)>>>;

/// A webhook receiver on `addr` that answers 500 to the first `fail` requests, then 200 (recording
/// what it took).
async fn receiver(addr: &str, fail: usize) -> (std::net::SocketAddr, Received) {
    use axum::http::{HeaderMap, StatusCode};
    let socket = tokio::net::TcpListener::bind(addr).await.unwrap();
    let got: Received = std::sync::Arc::default();
    let record = got.clone();
    let failures = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let (record, failures) = (record.clone(), failures.clone());
        async move {
            if failures.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < fail {
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
            let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            let seq = text("clutch-seq").parse().unwrap_or(0);
            record.lock().unwrap().push((seq, text("clutch-signature"), body));
            StatusCode::OK
        }
    });
    let bound = socket.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(socket, app).await });
    (bound, got)
}

/// Webhooks both ways, through the real binary: a signed body posted to a hook becomes a message by
/// the hook's mapping (an unsigned or forged one is refused before it is read, a mapping that does
/// not fit is refused naming the pointer); the messages an outbound webhook selects reach its URL in
/// order, signed, through 500s; and a webhook aimed at a network the guard refuses is never reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_in_and_out() {
    let dir = tempfile::tempdir().unwrap();
    let (allowed, got) = receiver("127.0.0.2:0", 2).await;
    let (refused, refused_got) = receiver("127.0.0.1:0", 0).await;
    let secret = "a hook secret of some length";
    let config = format!(
        "[outbound]\nallow = [\"127.0.0.2\"]\n\n\
         [[hooks]]\nname = \"github\"\nsecret = \"{secret}\"\n\
         [hooks.message]\ntype = \"task.request\"\nfrom = \"user:github\"\nrequires = [\"skill:triage\"]\n\
         idempotency_key = \"{{header:x-github-delivery}}\"\n\
         [hooks.message.payload]\ngoal = \"Triage: {{/issue/title}}\"\nnumber = \"{{/issue/number}}\"\nlabels = \"{{/issue/labels}}\"\n\n\
         [[webhooks]]\nname = \"audit\"\nurl = \"http://127.0.0.2:{}/in\"\ntypes = [\"task.request\"]\nsecret = \"{secret}\"\n\n\
         [[webhooks]]\nname = \"inside\"\nurl = \"http://127.0.0.1:{}/in\"\n",
        allowed.port(),
        refused.port()
    );
    std::fs::write(dir.path().join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    let daemon = Daemon::spawn(cmd);
    let http = reqwest::Client::new();
    let hook = format!("{}/v1/hooks/github", daemon.url);
    let send = |body: String, signature: Option<String>, delivery: &str| {
        let mut r = http.post(&hook).header("content-type", "application/json").header("x-github-delivery", delivery);
        if let Some(s) = signature {
            r = r.header("x-hub-signature-256", s);
        }
        r.body(body).send()
    };
    let sign = |body: &str| clutch_outbound::push::signature(secret.as_bytes(), body.as_bytes());

    let body = json!({"issue": {"title": "It crashes", "number": 7, "labels": ["bug"]}}).to_string();
    let r = send(body.clone(), Some(sign(&body)), "d-1").await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 202, "{text}");
    let r: Value = serde_json::from_str(&text).unwrap();
    let ack = r;
    let seq = ack["seq"].as_u64().unwrap();
    let stored: Value = http
        .get(format!("{}/v1/messages/{}", daemon.url, ack["id"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (stored["type"].as_str(), stored["from"]["agent_id"].as_str()),
        (Some("task.request"), Some("user:github"))
    );
    assert_eq!(stored["payload"], json!({"goal": "Triage: It crashes", "number": 7, "labels": ["bug"]}));
    assert_eq!(stored["requires"], json!(["skill:triage"]));
    // The same delivery again is a duplicate (its idempotency key comes from a header).
    let again: Value = send(body.clone(), Some(sign(&body)), "d-1").await.unwrap().json().await.unwrap();
    assert_eq!((again["seq"].as_u64(), again["duplicate"].as_bool()), (Some(seq), Some(true)));

    // Unsigned, forged, or signed with another key: refused before the body is read.
    for signature in [None, Some(sign("{}")), Some("sha256=00".to_owned())] {
        let r = send("{not json".to_owned(), signature.clone(), "d-2").await.unwrap();
        assert_eq!(r.status(), 401, "{signature:?}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "UNAUTHORIZED");
    }
    // Signed, but the mapping does not fit the body: refused with the pointer.
    let body = json!({"issue": {"number": 8}}).to_string();
    let r = send(body.clone(), Some(sign(&body)), "d-3").await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        (e["error"]["code"].as_str(), e["error"]["field"].as_str()),
        (Some("VALIDATION_FAILED"), Some("/issue/title")),
        "{e}"
    );
    // Unknown hooks are 404.
    assert_eq!(http.post(format!("{}/v1/hooks/nope", daemon.url)).body("{}").send().await.unwrap().status(), 404);

    // Out: two more requests, then the allowed webhook gets all three, in order, signed, after two 500s.
    for (i, title) in ["Second", "Third"].iter().enumerate() {
        let body = json!({"issue": {"title": title, "number": i, "labels": []}}).to_string();
        assert_eq!(send(body.clone(), Some(sign(&body)), &format!("d-{}", i + 10)).await.unwrap().status(), 202);
    }
    let deadline = Instant::now() + DEADLINE;
    while got.lock().unwrap().len() < 3 {
        assert!(Instant::now() < deadline, "the webhook got {:?}", got.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let received = got.lock().unwrap().clone();
    let events: Vec<Value> = received.iter().map(|(_, _, body)| serde_json::from_str(body).unwrap()).collect();
    let goals: Vec<&str> = events.iter().map(|e| e["payload"]["goal"].as_str().unwrap()).collect();
    assert_eq!(goals, ["Triage: It crashes", "Triage: Second", "Triage: Third"], "in order, once each");
    let seqs: Vec<u64> = received.iter().map(|(s, _, _)| *s).collect();
    assert!(seqs.is_sorted() && seqs[0] == seq, "{seqs:?}");
    for (_, signature, body) in &received {
        assert!(
            clutch_outbound::push::verify(secret.as_bytes(), body.as_bytes(), signature),
            "{signature} over {body}"
        );
    }
    assert!(refused_got.lock().unwrap().is_empty(), "a webhook to a refused network is never reached");
    let (_, log) = daemon.terminate();
    assert!(log.contains("refused by the outbound guard"), "{log}");
    assert!(!log.contains(secret), "the secret never reaches the log");
}
