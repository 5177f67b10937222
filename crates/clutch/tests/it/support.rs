//! Test helpers: run the real `clutch` binary (as a daemon or a one-shot command) with a clean
//! environment, every wait bounded by a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

/// How long a daemon may take to start, or a command to finish.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A `clutch` command with no `CLUTCH_*` or `RUST_LOG` from the test's own environment.
pub fn clutch() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clutch"));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|n| n.starts_with("CLUTCH_") || n == "RUST_LOG") {
            cmd.env_remove(name);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd
}

/// What a finished command printed.
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit code {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs `cmd` to completion with `stdin`, killing it if it outlives [`DEADLINE`].
pub fn run(mut cmd: Command, stdin: &str) -> Output {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait(&mut child, DEADLINE).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("command did not finish within {DEADLINE:?}: {cmd:?}");
    });
    writer.join().unwrap();
    Output { code: status.code(), stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// Reads all of `pipe` on a thread.
pub fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// A child's output lines, read on a thread so that waiting for one can have a deadline.
pub fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for `child` to exit, polling until `timeout`.
pub fn wait(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A spawned `clutch` process that is killed when dropped, even by a failing test.
pub struct Spawned(pub Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `clutch serve`, killed when dropped.
pub struct Daemon {
    child: Option<Child>,
    pub url: String,
    stderr: Arc<Mutex<String>>,
}

impl Daemon {
    /// `clutch serve --listen 127.0.0.1:0 --data-dir <data_dir>`.
    pub fn start(data_dir: &Path) -> Daemon {
        Daemon::start_with(data_dir, &[])
    }

    /// The same with `env` set, e.g. `CLUTCH_ENGINE_ACCEPT_TIMEOUT` for short engine timers.
    pub fn start_with(data_dir: &Path, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = clutch();
        cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(data_dir);
        cmd.envs(env.iter().copied());
        Daemon::spawn(cmd)
    }

    /// Spawns `cmd` (a `serve` command) and waits for its `clutch: listening on URL` line.
    pub fn spawn(mut cmd: Command) -> Daemon {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let buffer = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("clutch: listening on ") {
                    let _ = tx.send(url.trim().to_owned());
                }
                let mut buffer = buffer.lock().unwrap();
                buffer.push_str(&line);
                buffer.push('\n');
            }
        });
        match rx.recv_timeout(DEADLINE) {
            Ok(url) => Daemon { child: Some(child), url, stderr },
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the daemon did not start ({status:?}); stderr:\n{}", stderr.lock().unwrap());
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Everything the daemon printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM (through the `kill` program) and waits for the exit.
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let status = Command::new("kill").arg("-TERM").arg(self.pid().to_string()).status().expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let mut child = self.child.take().unwrap();
        let status = wait(&mut child, DEADLINE).unwrap_or_else(|| {
            let _ = child.kill();
            panic!("the daemon did not stop within {DEADLINE:?} of SIGTERM; stderr:\n{}", self.stderr());
        });
        // The reader thread sees EOF once the process is gone; give it a moment to store the tail.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.stderr().contains("stopped") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        (status, self.stderr())
    }

    /// SIGKILL: no chance to flush or close anything.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A valid message from `user:test` in `run`, as a client sends it (no id, ts or v).
pub fn message(run: &str, text: &str) -> Value {
    json!({
        "run_id": run,
        "thread_id": clutch_proto::id::generate(clutch_proto::id::Kind::Thread),
        "task_id": clutch_proto::id::generate(clutch_proto::id::Kind::Task),
        "from": {"agent_id": "user:test"},
        "to": [{"agent_id": "agent:ken"}],
        "type": "chat.message",
        "payload": {"text": text},
    })
}

/// A fresh run id.
pub fn run_id() -> String {
    clutch_proto::id::generate(clutch_proto::id::Kind::Run)
}

/// Posts one message and returns the daemon's answer.
pub async fn post(http: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let response = http.post(format!("{url}/v1/messages")).json(body).send().await.expect("POST /v1/messages");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON answer"))
}

/// Every event in the log, paging through `/v1/events`.
pub async fn all_events(http: &reqwest::Client, url: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after = 0u64;
    loop {
        let page: Value = http
            .get(format!("{url}/v1/events?after={after}&limit=500"))
            .send()
            .await
            .expect("GET /v1/events")
            .error_for_status()
            .expect("events answer 200")
            .json()
            .await
            .expect("events JSON");
        let batch = page["events"].as_array().expect("events array").clone();
        if batch.is_empty() {
            return events;
        }
        after = page["next_after"].as_u64().unwrap_or_else(|| batch.last().unwrap()["seq"].as_u64().unwrap());
        events.extend(batch);
    }
}

/// Follows `/v1/stream?<query>` from the first event (SSE) until `done` holds for the events read so
/// far, and returns them; fails the test when that takes longer than `timeout`.
pub async fn stream_until(
    url: &str,
    query: &[(&str, &str)],
    timeout: Duration,
    mut done: impl FnMut(&[Value]) -> bool,
) -> Vec<Value> {
    let response = reqwest::Client::new()
        .get(format!("{url}/v1/stream"))
        .query(query)
        .query(&[("after", 0)])
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /v1/stream")
        .error_for_status()
        .expect("the stream answers 200");
    let mut events = Vec::new();
    let read = read_sse(response, &mut events, &mut done);
    if tokio::time::timeout(timeout, read).await.is_err() {
        let seen: Vec<String> = events.iter().map(Value::to_string).collect();
        panic!("not done within {timeout:?}; {} events read:\n{}", events.len(), seen.join("\n"));
    }
    events
}

async fn read_sse(response: reqwest::Response, events: &mut Vec<Value>, done: &mut impl FnMut(&[Value]) -> bool) {
    let mut body = response.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    while !done(events) {
        let chunk = body.next().await.expect("the stream ended without a final frame").expect("a stream chunk");
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = pending.drain(..end + 2).collect();
            let block = String::from_utf8(block).expect("UTF-8 events");
            let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
            if block.lines().any(|l| l == "event: end") {
                panic!("the stream ended: {}", data.join(""));
            }
            if !data.is_empty() {
                events.push(serde_json::from_str(&data.join("\n")).expect("an event is JSON"));
            }
        }
    }
}

/// The test venv's Python (`.tools/venv`, made by `scripts/py-setup`), which has the Python client
/// (`clients/python`, installed editable) the example worker `tests/workers/worker.py` is written on.
/// The worker tests fail, rather than skip, when it is missing.
pub fn python3() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/python");
    if !python.is_file() {
        panic!(
            "{} is missing: the worker tests run the example worker tests/workers/worker.py, written on the \
             Python client in clients/python; run ./scripts/py-setup (the test command does) to make the venv",
            python.display()
        );
    }
    python
}

/// The PostgreSQL server to test against; `None` (after a note) when not configured outside CI.
pub fn pg_url() -> Option<String> {
    match std::env::var("CLUTCH_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!("CLUTCH_TEST_PG_URL must be set in CI"),
        _ => {
            eprintln!("skipping a PostgreSQL test: set CLUTCH_TEST_PG_URL=postgres://user@host:port/database");
            None
        }
    }
}

/// A database of the test's own, dropped when the test ends (also when it fails).
pub struct FreshDatabase {
    admin_url: String,
    name: String,
    pub url: String,
}

impl FreshDatabase {
    pub async fn create(admin_url: &str) -> FreshDatabase {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let name = format!("clutch_test_{}_{nanos}", std::process::id());
        let client = connect(admin_url).await;
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("CREATE DATABASE");
        let url = with_database(admin_url, &name);
        FreshDatabase { admin_url: admin_url.to_owned(), name, url }
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        // Drop runs inside the test's runtime, which cannot block on another; use a thread of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let client = connect(&url).await;
                client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop the test database {}: {dropped:?}", self.name);
        }
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect to PostgreSQL");
    tokio::spawn(connection);
    client
}

/// `url` naming database `name` instead of its own.
fn with_database(url: &str, name: &str) -> String {
    let mut parsed = reqwest::Url::parse(url).expect("CLUTCH_TEST_PG_URL must be a postgres:// URL");
    parsed.set_path(&format!("/{name}"));
    parsed.to_string()
}
