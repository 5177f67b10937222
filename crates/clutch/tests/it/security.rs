//! Safe by default, through the real binary: the outbound guard keeps requests off networks the
//! operator did not allow (every spelling of an address, a name pinned inward, a redirect, a card
//! registered before), and lets them through once allowed; workspace paths stay inside the declared
//! roots over HTTP and MCP; secrets planted in every place a secret can be configured show up on no
//! surface (config dump and check, logs, answers, events, the data directory); a 5 MB input gets an
//! answer of a few hundred bytes; a web page cannot reach the daemon through the user's browser (a
//! foreign `Origin` on the stream's WebSocket, a rebound `Host`), while the daemon's own page, the
//! configured names and origins, and clients without `Origin` can. (Authorization before
//! validation: `policy.rs`.)

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::support::{Daemon, FreshDatabase, clutch, pg_url, post, run, run_id};

/// What a listener got: one line per request, `METHOD path body`.
type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTP listener on `addr` that records every request and answers 200, or 307 to `redirect`.
async fn listener(addr: &str, redirect: Option<String>) -> Option<(SocketAddr, Seen)> {
    let socket = tokio::net::TcpListener::bind(addr).await.ok()?;
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |method: axum::http::Method, uri: Uri, body: String| {
        let record = record.clone();
        let redirect = redirect.clone();
        async move {
            record.lock().unwrap().push(format!("{method} {} {body}", uri.path()));
            match redirect {
                Some(to) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response(),
                None => StatusCode::OK.into_response(),
            }
        }
    });
    let bound = socket.local_addr().ok()?;
    tokio::spawn(async move { axum::serve(socket, app).await });
    Some((bound, seen))
}

fn card(name: &str, url: &str) -> Value {
    json!({
        "agent_id": format!("agent:{name}"),
        "capabilities": [{"id": format!("skill:{name}")}],
        "endpoints": {"clutch": {"url": url}},
    })
}

async fn register(http: &reqwest::Client, daemon: &str, card: &Value) -> (u16, Value) {
    let r = http.post(format!("{daemon}/v1/agents")).json(card).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Waits until `done` holds, failing the test after `timeout` with `what`.
async fn until(timeout: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done().await {
        assert!(Instant::now() < deadline, "not within {timeout:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn metric(http: &reqwest::Client, daemon: &str, name: &str) -> u64 {
    let text = http.get(format!("{daemon}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

fn serve_with_config(dir: &Path, config: &str) -> Daemon {
    std::fs::write(dir.join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir).args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    Daemon::spawn(cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_requests_reach_only_what_the_operator_allows() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    // The daemon's own network: nothing may reach these two.
    let (inside, inside_seen) = listener("127.0.0.1:0", None).await.unwrap();
    let inside6 = listener("[::1]:0", None).await;
    // Allowed by the operator: an agent that takes pushes, and one that redirects them inward.
    let (good, good_seen) = listener("127.0.0.2:0", None).await.unwrap();
    let (bouncer, bouncer_seen) =
        listener("127.0.0.2:0", Some(format!("http://127.0.0.1:{}/bounced", inside.port()))).await.unwrap();
    let config = "[outbound]\nallow = [\"127.0.0.2\"]\n[outbound.resolve]\n\"public.example\" = [\"127.0.0.1\"]\n";
    let daemon = serve_with_config(dir.path(), config);
    let url = daemon.url.clone();

    let port = inside.port();
    let mut forms = vec![
        format!("http://127.0.0.1:{port}/push"),
        format!("http://localhost:{port}/push"),
        format!("http://127.1:{port}/push"),
        format!("http://2130706433:{port}/push"),
        format!("http://0x7f000001:{port}/push"),
        format!("http://public.example:{port}/push"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/push".to_owned(),
    ];
    if let Some((addr, _)) = &inside6 {
        forms.push(format!("http://[::1]:{}/push", addr.port()));
    } else {
        forms.push(format!("http://[::1]:{port}/push"));
    }
    for (i, form) in forms.iter().enumerate() {
        let (status, body) = register(&http, &url, &card(&format!("f{i}"), form)).await;
        assert_eq!(status, 400, "{form}: {body}");
        assert_eq!(body["error"]["code"], "TARGET_NOT_ALLOWED", "{form}: {body}");
        assert_eq!(body["error"]["field"], "endpoints.clutch.url", "{form}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("outbound."), "names the key: {body}");
    }
    // The same card as a message is refused alike.
    let as_message = json!({
        "run_id": run_id(), "thread_id": clutch_proto::id::generate(clutch_proto::id::Kind::Thread),
        "task_id": clutch_proto::id::generate(clutch_proto::id::Kind::Task),
        "from": {"agent_id": "agent:sneaky"}, "to": [], "type": "agent.register",
        "payload": card("sneaky", &format!("http://2130706433:{port}/")),
    });
    let (status, body) = post(&http, &url, &as_message).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("TARGET_NOT_ALLOWED")), "{body}");
    assert_eq!(body["error"]["field"], "payload.endpoints.clutch.url");

    assert_eq!(register(&http, &url, &card("good", &format!("http://127.0.0.2:{}/push", good.port()))).await.0, 201);
    let bouncing = format!("http://127.0.0.2:{}/push", bouncer.port());
    assert_eq!(register(&http, &url, &card("bouncer", &bouncing)).await.0, 201);
    for to in ["agent:good", "agent:bouncer"] {
        let mut m = crate::support::message(&run_id(), "for you");
        m["to"] = json!([{"agent_id": to}]);
        assert_eq!(post(&http, &url, &m).await.0, 201);
    }
    until(Duration::from_secs(30), "the allowed agent got its push and the redirect was refused", async || {
        !good_seen.lock().unwrap().is_empty()
            && !bouncer_seen.lock().unwrap().is_empty()
            && metric(&http, &url, "clutch_push_failures_total").await >= 2
    })
    .await;
    assert!(good_seen.lock().unwrap()[0].contains("for you"));
    assert!(inside_seen.lock().unwrap().is_empty(), "inside got {:?}", inside_seen.lock().unwrap());
    if let Some((_, seen)) = &inside6 {
        assert!(seen.lock().unwrap().is_empty());
    }
    let (_, log) = daemon.terminate();
    assert!(log.contains("refused by the outbound guard"), "{log}");

    // Once the operator allows loopback, the same target is reached: a routed task is pushed there.
    let config = "[outbound]\nallow_loopback = true\nallow = [\"127.0.0.2\"]\n";
    let daemon = serve_with_config(dir.path(), config);
    let url = daemon.url.clone();
    assert_eq!(register(&http, &url, &card("local", &format!("http://localhost:{port}/push"))).await.0, 201);
    let task = json!({
        "run_id": run_id(), "thread_id": clutch_proto::id::generate(clutch_proto::id::Kind::Thread),
        "task_id": clutch_proto::id::generate(clutch_proto::id::Kind::Task),
        "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.request",
        "requires": ["skill:local"], "payload": {"goal": "reach me"},
    });
    assert_eq!(post(&http, &url, &task).await.0, 201);
    until(Duration::from_secs(30), "the routed task reached the allowed loopback endpoint", async || {
        inside_seen.lock().unwrap().iter().any(|r| r.starts_with("POST /push") && r.contains("reach me"))
    })
    .await;
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "hi\n").unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_stay_inside_the_declared_roots() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let outside = dir.path().join("outside");
    repository(&data.join("app"));
    repository(&outside.join("other"));
    std::os::unix::fs::symlink(&outside, data.join("out")).unwrap();
    let mut cmd = clutch();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data);
    let daemon = Daemon::spawn(cmd);
    let http = reqwest::Client::new();
    let r = http.post(format!("{}/v1/workflows", daemon.url)).json(&json!({"name": "roots"})).send().await.unwrap();
    let wid = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let create = |body: Value| {
        let http = http.clone();
        let url = format!("{}/v1/workflows/{wid}/workspaces", daemon.url);
        async move {
            let r = http.post(url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let app = data.join("app");
    let cases = [
        json!({"branch": "a", "repo_path": app, "path": outside.join("wt-absolute")}),
        json!({"branch": "b", "repo_path": app, "path": data.join("app/../../outside/wt-dotdot")}),
        json!({"branch": "c", "repo_path": app, "path": data.join("out/wt-symlink")}),
        json!({"branch": "d", "repo_path": outside.join("other")}),
        json!({"branch": "e", "repo_path": data.join("out/other")}),
    ];
    for case in cases {
        let (status, body) = create(case.clone()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("PATH_NOT_ALLOWED")), "{case}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&data.canonicalize().unwrap().display().to_string()), "names the roots: {message}");
    }
    let made: Vec<_> = std::fs::read_dir(&outside).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(made, vec![std::ffi::OsString::from("other")], "nothing made outside");
    assert_eq!(git(&outside.join("other"), &["branch", "--format=%(refname:short)"]), "main", "no branch made there");

    // Over MCP, the same refusal.
    let client = crate::mcp::http(&format!("{}/mcp", daemon.url), None, true).await.unwrap();
    let arguments = json!({"workflow_id": wid, "branch": "f", "repo_path": app, "path": outside.join("wt-mcp")});
    let (failed, body) = crate::mcp::call(&client, "workspace_create", arguments).await;
    assert!(failed && body["code"] == "PATH_NOT_ALLOWED", "{body}");
    client.cancel().await.unwrap();

    // Inside the roots it works.
    let (status, ws) = create(json!({"branch": "g", "repo_path": app})).await;
    assert_eq!(status, 201, "{ws}");
    assert!(Path::new(ws["path"].as_str().unwrap()).starts_with(data.canonicalize().unwrap()), "{ws}");
}

/// Every planted secret, each distinct, so a leak names its source.
const ADMIN_TOKEN: &str = "tok-PLANTED-admin-41c7";
const AGENT_TOKEN: &str = "tok-PLANTED-agent-93be";
const USER_PART: &str = "pw-PLANTED-userpart-6d2a";
const PARAMETER: &str = "pw-PLANTED-param-b81f";
const SSL_PARAMETER: &str = "pw-PLANTED-sslparam-0c55";
const HOOK_SECRET: &str = "hook-PLANTED-secret-5e19";
const WEBHOOK_SECRET: &str = "webhook-PLANTED-secret-a3d0";
const PLANTED: [&str; 7] = [ADMIN_TOKEN, AGENT_TOKEN, USER_PART, PARAMETER, SSL_PARAMETER, HOOK_SECRET, WEBHOOK_SECRET];

fn assert_clean(surface: &str, text: &str) {
    for secret in PLANTED {
        assert!(!text.contains(secret), "{surface} shows the planted secret {secret}:\n{text}");
    }
}

/// `url` with a password in its user part and as a parameter, and (when `ssl`) as `sslpassword`.
fn planted_url(url: &str, ssl: bool) -> String {
    let mut parsed = reqwest::Url::parse(url).unwrap();
    parsed.set_password(Some(&format!("{USER_PART}@x"))).unwrap();
    parsed.query_pairs_mut().append_pair("password", PARAMETER);
    if ssl {
        parsed.query_pairs_mut().append_pair("sslpassword", SSL_PARAMETER);
    }
    parsed.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_show_on_no_surface() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy");
    std::fs::create_dir(&policy).unwrap();
    std::fs::write(
        policy.join("org.yaml"),
        format!(
            "tokens:\n  - {{name: ops, role: admin, token: {ADMIN_TOKEN}}}\n  \
             - {{name: ken, role: agent, agent_id: agent:ken, token: {AGENT_TOKEN}}}\n"
        ),
    )
    .unwrap();
    let pg = pg_url();
    let database = match &pg {
        Some(url) => Some(FreshDatabase::create(url).await),
        None => None,
    };
    let base = database.as_ref().map_or("postgres://u@127.0.0.1:1/none".to_owned(), |d| d.url.clone());
    let db = planted_url(&base, false);
    let db_ssl = planted_url(&base, true);

    // config dump, from the file, the environment and the flag; config check.
    std::fs::write(
        dir.path().join("clutch.toml"),
        format!(
            "db = {db_ssl:?}\nconfig_dir = \"policy\"\n\n\
             [[hooks]]\nname = \"in\"\nsecret = \"{HOOK_SECRET}\"\nmessage = {{ type = \"chat.message\" }}\n\n\
             [[webhooks]]\nname = \"out\"\nurl = \"http://127.0.0.1:9/\"\nsecret = \"{WEBHOOK_SECRET}\"\n"
        ),
    )
    .unwrap();
    let mut dump = clutch();
    dump.current_dir(dir.path()).args(["config", "dump"]);
    let out = run(dump, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("db = "), "{out:?}");
    assert_clean("config dump (clutch.toml)", &format!("{}{}", out.stdout, out.stderr));
    let mut dump = clutch();
    dump.current_dir(dir.path()).env("CLUTCH_DB", &db).args(["config", "dump"]);
    let out = run(dump, "");
    assert_clean("config dump (CLUTCH_DB)", &format!("{}{}", out.stdout, out.stderr));
    let mut dump = clutch();
    dump.current_dir(dir.path()).args(["config", "dump", "--db", &db]);
    let out = run(dump, "");
    assert_clean("config dump (--db)", &format!("{}{}", out.stdout, out.stderr));
    let mut check = clutch();
    check.current_dir(dir.path()).args(["config", "check"]);
    let out = run(check, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_clean("config check", &format!("{}{}", out.stdout, out.stderr));

    // A start that fails on the database URL (the driver knows no `sslpassword`) says why without it.
    let mut serve = clutch();
    serve.current_dir(dir.path()).args(["--log", "debug", "serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    let out = run(serve, "");
    assert_ne!(out.code, Some(0), "{out:?}");
    assert_clean("a failed start", &format!("{}{}", out.stdout, out.stderr));

    // A running daemon at debug level, on PostgreSQL when there is one (trust auth takes any password).
    let mut serve = clutch();
    serve.current_dir(dir.path()).args(["--log", "debug", "serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    if database.is_some() {
        serve.args(["--db", &db]);
    } else {
        serve.args(["--db", ""]);
    }
    let daemon = Daemon::spawn(serve);
    let url = daemon.url.clone();
    let http = reqwest::Client::new();
    let mut answers = String::new();
    let ask = |request: reqwest::RequestBuilder| async move {
        let r = request.send().await.unwrap();
        format!("{} {}\n", r.status(), r.text().await.unwrap())
    };
    let mut m = crate::support::message(&run_id(), "hello");
    m["from"] = json!({"agent_id": "agent:ken"});
    answers += &ask(http.post(format!("{url}/v1/messages")).bearer_auth(AGENT_TOKEN).json(&m)).await;
    m["from"] = json!({"agent_id": "agent:tom"});
    answers += &ask(http.post(format!("{url}/v1/messages")).bearer_auth(AGENT_TOKEN).json(&m)).await;
    answers += &ask(http.get(format!("{url}/v1/events?access_token={ADMIN_TOKEN}"))).await;
    answers += &ask(http.get(format!("{url}/v1/agents")).bearer_auth(format!("{ADMIN_TOKEN}x"))).await;
    answers += &ask(http.get(format!("{url}/v1/stream?access_token={ADMIN_TOKEN}&limit=1"))).await;
    answers += &ask(http.get(format!("{url}/metrics")).bearer_auth(ADMIN_TOKEN)).await;
    answers += &ask(http
        .post(format!("{url}/mcp"))
        .bearer_auth(ADMIN_TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})))
    .await;
    assert!(answers.contains("201 Created") && answers.contains("403 Forbidden"), "{answers}");
    assert_clean("HTTP answers", &answers);
    let events = all_events_as(&http, &url, ADMIN_TOKEN).await;
    assert!(!events.is_empty());
    assert_clean("the event log", &events);
    let (_, log) = daemon.terminate();
    assert!(log.contains("DEBUG"), "the daemon logged at debug level:\n{log}");
    assert_clean("the daemon's log", &log);
    for file in walk(&dir.path().join("data")) {
        let bytes = std::fs::read(&file).unwrap();
        assert_clean(&format!("{}", file.display()), &String::from_utf8_lossy(&bytes));
    }
    drop(database);
}

/// Every event, as text, read with a token.
async fn all_events_as(http: &reqwest::Client, url: &str, token: &str) -> String {
    let mut text = String::new();
    let mut after = 0u64;
    loop {
        let r = http.get(format!("{url}/v1/events?after={after}&limit=500")).bearer_auth(token).send().await.unwrap();
        let page: Value = r.json().await.unwrap();
        let batch = page["events"].as_array().unwrap().clone();
        let Some(last) = batch.last() else { return text };
        after = last["seq"].as_u64().unwrap();
        for event in batch {
            text.push_str(&event.to_string());
            text.push('\n');
        }
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return files };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_input_gets_a_small_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path());
    let daemon = Daemon::spawn(cmd);
    let http = reqwest::Client::new();
    let huge = "f".repeat(5 << 20);
    let mut m = crate::support::message(&run_id(), "hi");
    m[huge.as_str()] = json!(1);
    let r = http.post(format!("{}/v1/messages", daemon.url)).json(&m).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let body = r.bytes().await.unwrap();
    assert!(body.len() < 4096, "a 5 MB field name answered with {} bytes", body.len());
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["code"], "VALIDATION_FAILED");

    let mcp = format!("{}/mcp", daemon.url);
    let accept = "application/json, text/event-stream";
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": huge, "params": {}});
    let r = http.post(&mcp).header("accept", accept).json(&call).send().await.unwrap();
    let body = r.bytes().await.unwrap();
    assert!(body.len() < 4096, "a 5 MB method name answered with {} bytes", body.len());
    let r = http
        .post(&mcp)
        .header("accept", accept)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "malformed JSON is the transport's parse error, not a 415");
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
}

/// Writes `request` (a whole HTTP/1.1 request, as a browser or an attacker would send it) on a
/// connection of its own and reads the answer's head and, when it says its length, its body; the
/// connection stays open (an upgraded one carries the stream).
async fn exchange(addr: &str, request: &str) -> (String, Value, tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The head a byte at a time: what follows it on an upgraded connection (the stream's first
    // frames) stays on the socket for the caller.
    let head_end = loop {
        if got.ends_with(b"\r\n\r\n") {
            break got.len();
        }
        let n = tokio::time::timeout(Duration::from_secs(20), socket.read(&mut buf[..1])).await.unwrap().unwrap();
        assert!(n > 0, "closed before the head's end: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().ok())?
    });
    let mut body = got[head_end..].to_vec();
    if let Some(length) = length {
        while body.len() < length {
            let n = tokio::time::timeout(Duration::from_secs(20), socket.read(&mut buf)).await.unwrap().unwrap();
            assert!(n > 0, "closed before the body's end");
            body.extend_from_slice(&buf[..n]);
        }
    }
    (head, serde_json::from_slice(&body).unwrap_or(Value::Null), socket)
}

/// A WebSocket handshake for the whole log, from a page at `origin`, to `host`.
fn upgrade(host: &str, origin: &str) -> String {
    format!(
        "GET /v1/stream?after=0 HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n"
    )
}

/// The first text frame an upgraded stream sends, as JSON (frames from the server are unmasked);
/// control frames before it (a keep-alive ping) are passed over.
async fn first_frame(socket: &mut tokio::net::TcpStream) -> Value {
    use tokio::io::AsyncReadExt;
    let read = async {
        loop {
            let mut header = [0u8; 2];
            socket.read_exact(&mut header).await.unwrap();
            let length = match header[1] & 0x7f {
                126 => socket.read_u16().await.unwrap() as usize,
                127 => socket.read_u64().await.unwrap() as usize,
                n => n as usize,
            };
            let mut payload = vec![0u8; length];
            socket.read_exact(&mut payload).await.unwrap();
            if header[0] & 0x08 != 0 {
                continue;
            }
            assert_eq!(header[0], 0x81, "a final text frame");
            return serde_json::from_slice::<Value>(&payload).unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read).await.expect("a frame in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_cannot_read_a_local_hub() {
    let dir = tempfile::tempdir().unwrap();
    // The deprecated key still works, for every route now, and the daemon says what to write instead.
    std::fs::write(dir.path().join("clutch.toml"), "[mcp]\nallowed_origins = [\"https://old.example\"]\n").unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"])
        .env("CLUTCH_HTTP_ALLOWED_HOSTS", "hub.example.com")
        .env("CLUTCH_HTTP_ALLOWED_ORIGINS", "https://dash.example.com");
    let daemon = Daemon::spawn(cmd);
    let addr = daemon.url.trim_start_matches("http://").to_owned();
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let http = reqwest::Client::new();
    let (status, _) = post(&http, &daemon.url, &crate::support::message(&run_id(), "hi")).await;
    assert_eq!(status, 201);

    // What any site can make the user's browser send: a WebSocket for the whole log.
    for origin in ["https://evil.example", "null"] {
        let (head, body, _) = exchange(&addr, &upgrade(&addr, origin)).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{origin}: {head}");
        assert_eq!(body["error"]["code"], "ORIGIN_NOT_ALLOWED", "{origin}: {body}");
    }
    // DNS rebinding: the page's own name, pointed at 127.0.0.1, as Host (and as Origin).
    let get = |host: &str| format!("GET /v1/agents HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let (head, body, _) = exchange(&addr, &get("evil.example:7700")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(body["error"]["code"], "HOST_NOT_ALLOWED", "{body}");
    assert!(body["error"]["hint"].as_str().unwrap().contains("http.allowed_hosts"), "{body}");
    let (head, body, _) =
        exchange(&addr, &upgrade(&format!("evil.example:{port}"), &format!("http://evil.example:{port}"))).await;
    assert!(head.starts_with("HTTP/1.1 403") && body["error"]["code"] == "HOST_NOT_ALLOWED", "{head}{body}");
    // MCP is behind the same policy.
    let mcp = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nOrigin: https://evil.example\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\n\r\n{{}}"
    );
    let (head, body, _) = exchange(&addr, &mcp).await;
    assert!(head.starts_with("HTTP/1.1 403") && body["error"]["code"] == "ORIGIN_NOT_ALLOWED", "{head}{body}");

    // The web UI's own page, a configured origin, the deprecated key's origin, a configured name.
    for (host, origin) in [
        (addr.clone(), format!("http://{addr}")),
        (format!("localhost:{port}"), format!("http://localhost:{port}")),
        (addr.clone(), "https://dash.example.com".to_owned()),
        (addr.clone(), "https://old.example".to_owned()),
        (format!("hub.example.com:{port}"), format!("http://hub.example.com:{port}")),
    ] {
        let (head, _, mut socket) = exchange(&addr, &upgrade(&host, &origin)).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{host} from {origin}: {head}");
        assert_eq!(first_frame(&mut socket).await["seq"], 1, "{host} from {origin}");
        let (head, body, _) = exchange(&addr, &get(&host)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{host}: {head}{body}");
    }
    assert!(
        daemon.stderr().contains("`mcp.allowed_origins` (CLUTCH_MCP_ALLOWED_ORIGINS) is deprecated"),
        "{}",
        daemon.stderr()
    );
    let refusals = daemon.stderr().matches("browser request refused").count();
    assert!((1..=20).contains(&refusals), "refusals logged, at a bounded rate: {}", daemon.stderr());

    // `config dump` says so too, on stderr, and shows where the origins went.
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["config", "dump"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("deprecated") && out.stdout.contains("\"https://old.example\""), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_loopback_every_address_is_served_and_names_need_listing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policy")).unwrap();
    std::fs::write(dir.path().join("policy/org.yaml"), "tokens:\n  - {name: ops, role: admin, token: ops-secret}\n")
        .unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0", "--config-dir", "policy", "--data-dir", "data"])
        .env("CLUTCH_HTTP_ALLOWED_HOSTS", "clutch.internal");
    let daemon = Daemon::spawn(cmd);
    let addr = daemon.url.trim_start_matches("http://").replace("0.0.0.0", "127.0.0.1");
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let get =
        |host: &str| format!("GET /v1/agents HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer ops-secret\r\n\r\n");
    for host in
        [format!("10.1.2.3:{port}"), format!("[2001:db8::7]:{port}"), format!("clutch.internal:{port}"), addr.clone()]
    {
        let (head, body, _) = exchange(&addr, &get(&host)).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{host}: {head}{body}");
    }
    let (head, body, _) = exchange(&addr, &get(&format!("evil.example:{port}"))).await;
    assert!(head.starts_with("HTTP/1.1 403") && body["error"]["code"] == "HOST_NOT_ALLOWED", "{head}{body}");
    // Same origin by address works with no configuration; a foreign page is refused even with a token.
    let (head, _, _) = exchange(&addr, &upgrade(&format!("10.1.2.3:{port}"), &format!("http://10.1.2.3:{port}"))).await;
    assert!(head.starts_with("HTTP/1.1 401"), "past the browser policy, the token check: {head}");
    let (head, body, _) = exchange(&addr, &upgrade(&format!("10.1.2.3:{port}"), "https://evil.example")).await;
    assert!(head.starts_with("HTTP/1.1 403") && body["error"]["code"] == "ORIGIN_NOT_ALLOWED", "{head}{body}");
    assert!(daemon.stderr().contains("listening beyond loopback"), "{}", daemon.stderr());
}
