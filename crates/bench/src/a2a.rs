//! `clutch bench a2a`: the A2A face under load. A blocking `SendMessage` (A2A 1.0, JSON-RPC) to a
//! trivial agent in this process that completes each task at once: round trips from one client, then
//! the throughput of concurrent clients, each on its own keep-alive connection. Beside it, in the
//! same run and with the same requests, two anchors: the official Python SDK's server (`a2a-sdk`,
//! started from `a2a_sdk_server.py`, tasks in memory) with an agent that does the same, and a plain
//! axum endpoint that parses the same body and answers the daemon's answer bytes (the ceiling). To
//! the daemon each message is a durable routed task: its `task.request`, the routing decision and
//! delivery, the agent's accept and result, each stored and flushed before the answer. Every answer
//! must be a completed task; any other is counted, and fails the bench.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use axum::body::Bytes;
use axum::http::StatusCode;
use clap::Args;
use clutch_core::inbox::{Reply, Status};
use clutch_core::tasks::ORCHESTRATOR;
use clutch_core::{Engine, Subscription};
use clutch_proto::MessageType;
use clutch_store::Filter;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::mcp::{Listening, sequential};
use super::{Daemon, Summary, http1, thousands};

#[derive(Debug, Args)]
pub struct A2aArgs {
    /// Sequential calls per round-trip measurement (one client).
    #[arg(long, default_value_t = 2000)]
    pub calls: usize,
    /// Concurrent clients in the throughput runs, each on its own keep-alive connection.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Seconds of each throughput run (after one second of warm-up).
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Where the SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
    /// The Python that has `a2a-sdk` (./scripts/py-setup installs it there).
    #[arg(long, default_value = ".tools/venv/bin/python", value_name = "PATH")]
    pub python: PathBuf,
    /// Leave the a2a-sdk anchor out.
    #[arg(long)]
    pub no_sdk: bool,
}

/// The trivial agent, and the skill each message names.
const AGENT: &str = "agent:bench-pong";
const SKILL: &str = "skill:pong";
/// What the agent answers; the SDK's agent answers the same.
const PONG: &str = "pong";
/// The SDK anchor's server, run as `python -c`.
const SDK_SERVER: &str = include_str!("../a2a_sdk_server.py");

pub async fn run(args: A2aArgs) -> anyhow::Result<()> {
    if args.calls == 0 || args.clients == 0 {
        bail!("--calls and --clients must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("a2a-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let store = clutch_store_sqlite::Store::open(&dir.join("store")).context("cannot open the SQLite store")?;
    let daemon = Daemon::start(Arc::new(store)).await?;
    let card = json!({"agent_id": AGENT, "capabilities": [{"id": SKILL, "version": "1.0.0"}]});
    let card = clutch_proto::validate::agent_card(&card).map_err(|p| anyhow::anyhow!("{p}"))?;
    daemon.engine.register(&card).await?;
    let filter = Filter { to: Some(AGENT.to_owned()), kind: Some(MessageType::TaskRequest), ..Filter::default() };
    let inbox = daemon.log.subscribe(filter, Some(daemon.log.head().await?)).await?;
    let refused = Arc::new(AtomicU64::new(0));
    let agent = tokio::spawn(agent(inbox, daemon.engine.clone(), refused.clone()));

    let clutch = Server::new("clutch", &daemon.url, "/a2a")?;
    let answer = clutch.first().await.context("the daemon's answer")?;
    // The ceiling: the same request (headers included) parsed, the daemon's answer given back.
    let anchor = Listening::anchor(answer.clone()).await?;
    let axum = Server::new("axum", &anchor.base, "/anchor")?;
    let sdk = match args.no_sdk {
        true => Err("--no-sdk".to_owned()),
        false => Sdk::start(&args.python, &dir.join("a2a-sdk.log")).await,
    };
    let (sdk, sdk_server, left_out) = match sdk {
        Ok(sdk) => {
            let server = Server::new("a2a-sdk", &sdk.base, "/a2a")?;
            server.first().await.context("the a2a-sdk server's answer")?;
            (Some(sdk), Some(server), None)
        }
        Err(why) => {
            eprintln!("bench: the a2a-sdk anchor is left out: {why}");
            (None, None, Some(why))
        }
    };
    let servers: Vec<&Server> = [Some(&clutch), sdk_server.as_ref(), Some(&axum)].into_iter().flatten().collect();
    eprintln!(
        "bench: SendMessage (request {} bytes, the daemon's answer {} bytes); round trips, {} calls each …",
        request("setup", 0, 0).len(),
        answer.len(),
        args.calls
    );
    let appended = |daemon: &Daemon| daemon.log.metrics().appended.load(Ordering::Relaxed);
    let mut round_trips = Vec::new();
    let mut per_message = 0.0;
    for server in &servers {
        let before = appended(&daemon);
        round_trips.push(server.sequential(args.calls).await?);
        if server.label == clutch.label {
            per_message = (appended(&daemon) - before) as f64 / (args.calls + args.calls.min(200)) as f64;
        }
    }
    eprintln!("bench: {} concurrent clients, 1 s warm-up + {} s each …", args.clients, args.duration);
    let duration = Duration::from_secs(args.duration);
    let mut loads = Vec::new();
    for server in &servers {
        loads.push(server.concurrent(args.clients, duration).await?);
    }
    let metrics = daemon.log.metrics();
    let per_commit =
        metrics.appended.load(Ordering::Relaxed) as f64 / metrics.batches.load(Ordering::Relaxed).max(1) as f64;
    let commits = format!("{per_commit:.1} events per group commit; {}", super::commits(metrics));

    agent.abort();
    anchor.stop().await;
    let sdk_version = match sdk {
        Some(sdk) => sdk.stop().await,
        None => String::new(),
    };
    daemon.stop().await;
    let _ = std::fs::remove_dir_all(&dir);

    let measured: Vec<Measured> = servers
        .iter()
        .zip(round_trips.into_iter().zip(loads))
        .map(|(server, ((once, mut bad), (load, bad_load)))| {
            bad.merge(bad_load);
            let note = match server.label {
                "clutch" => format!("(a durable routed task: {per_message:.1} events stored per message)"),
                "a2a-sdk" => {
                    format!("(a2a-sdk {sdk_version}'s own server in uvicorn, one Python process, tasks in memory)")
                }
                _ => "(plain axum JSON endpoint, same request and answer bytes)".to_owned(),
            };
            Measured { label: server.label, note, once, load, bad }
        })
        .collect();
    report(&args, &measured, left_out.as_deref(), &commits);
    let refused = refused.load(Ordering::Relaxed);
    let mut bad = Bad::default();
    for m in measured {
        if m.bad.count > 0 {
            eprintln!("bench: {}: {} answers were not completed tasks", m.label, m.bad.count);
        }
        bad.merge(m.bad);
    }
    if bad.count > 0 || refused > 0 {
        bail!(
            "{} answers were not completed tasks and the agent's reply was refused {refused} times; the first \
             wrong answer: {}",
            bad.count,
            bad.first.unwrap_or_default()
        );
    }
    Ok(())
}

/// One server's figures: round trips one at a time, then throughput; and its wrong answers.
struct Measured {
    label: &'static str,
    /// What it is, beside its round trips.
    note: String,
    once: Summary,
    load: Summary,
    bad: Bad,
}

/// The figures on stdout, each server's throughput against the daemon's targets (5× the SDK's, half
/// the ceiling's); `left_out` says why the SDK is missing, `commits` how the daemon's log committed.
fn report(args: &A2aArgs, measured: &[Measured], left_out: Option<&str>, commits: &str) {
    println!("A2A SendMessage (1.0, JSON-RPC, blocking) to a trivial agent that completes each task at once,");
    println!("beside its anchors in the same run:");
    println!("round trip, one client, {} sequential calls:", thousands(args.calls as u64));
    for m in measured {
        println!("{}   {}", m.once.line(m.label, "calls"), m.note);
    }
    println!(
        "throughput, {} concurrent clients, {} s (cpu: this process's: load driver, daemon and axum; \
         not the a2a-sdk's own process):",
        args.clients, args.duration
    );
    for m in measured {
        println!("{}", m.load.line(m.label, "calls"));
    }
    let rate = |label: &str| measured.iter().find(|m| m.label == label).map(|m| m.load.rate());
    let ours = rate("clutch").unwrap_or_default();
    let against_sdk = match rate("a2a-sdk") {
        Some(theirs) => format!("{:.2}× the a2a-sdk's throughput (target ≥ 5×)", ours / theirs),
        None => format!("the a2a-sdk not measured ({})", left_out.unwrap_or("?")),
    };
    println!(
        "  ratio    {against_sdk}; {:.2}× the axum ceiling's (target ≥ 0.5×)",
        ours / rate("axum").unwrap_or(f64::INFINITY)
    );
    println!("  clutch   {commits}");
}

/// The trivial agent: each task the router gives it (a `task.request` from the orchestrator) is
/// completed at once, "pong", by a task of its own, so replies to concurrent tasks share commits. It
/// heartbeats as agents are told to, so the router keeps it online through the whole run.
async fn agent(mut inbox: Subscription, engine: Engine, refused: Arc<AtomicU64>) {
    let mut beat = tokio::time::interval(engine.options().heartbeat_interval);
    loop {
        let event = tokio::select! {
            _ = beat.tick() => {
                if let Err(e) = engine.heartbeat(AGENT).await {
                    tracing::warn!(error = %e, "the bench agent's heartbeat failed");
                }
                continue;
            }
            event = inbox.next() => event,
        };
        let Ok(event) = event else { break };
        let Ok(request) = event.message() else { continue };
        if request.from.agent_id != ORCHESTRATOR {
            continue;
        }
        let (engine, refused) = (engine.clone(), refused.clone());
        tokio::spawn(async move {
            let reply = Reply {
                status: Status::Completed,
                text: Some(PONG.into()),
                result: None,
                error: None,
                retryable: false,
            };
            if let Err(e) = engine.task_reply(AGENT, &request.task_id, reply).await {
                refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(task_id = %request.task_id, error = %e, "the bench agent's reply was refused");
            }
        });
    }
}

/// A blocking `SendMessage` with a message id of its own (`phase`, `client`, `n`): the same bytes
/// but for the ids, to every server. 1.0 blocks unless `returnImmediately`; the skill is Clutch's
/// routing (the SDK's agent reads no metadata).
fn request(phase: &str, client: usize, n: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{n},"method":"SendMessage","params":{{"message":{{"messageId":"{phase}-{client}-{n}","role":"ROLE_USER","parts":[{{"text":"ping"}}],"metadata":{{"skill":"{SKILL}"}}}},"configuration":{{"returnImmediately":false}}}}}}"#
    ))
}

/// Whether an answer is a completed task: a search, so that checking costs the driver (which
/// shares the cores) little and the same for every server; the first answer of each is read in
/// full ([`Server::first`]).
fn completed(status: StatusCode, answer: &[u8]) -> bool {
    let state = b"\"TASK_STATE_COMPLETED\"";
    status == StatusCode::OK && answer.windows(state.len()).any(|w| w == state)
}

/// Answers that were not completed tasks.
#[derive(Default)]
struct Bad {
    count: u64,
    /// The first of them, shortened.
    first: Option<String>,
}

impl Bad {
    fn check(&mut self, status: StatusCode, answer: &[u8]) {
        if !completed(status, answer) {
            self.count += 1;
            self.first.get_or_insert_with(|| {
                let text = String::from_utf8_lossy(answer);
                format!("{status}: {}", text.chars().take(400).collect::<String>())
            });
        }
    }

    fn merge(&mut self, other: Bad) {
        self.count += other.count;
        if self.first.is_none() {
            self.first = other.first;
        }
    }
}

/// One of the servers measured: its A2A JSON-RPC endpoint.
struct Server {
    label: &'static str,
    target: http1::Target,
    endpoint: http1::Endpoint,
}

impl Server {
    fn new(label: &'static str, base: &str, path: &str) -> anyhow::Result<Server> {
        let target = http1::Target::new(base)?;
        let endpoint = target.post(path, &[("a2a-version", "1.0")])?;
        Ok(Server { label, target, endpoint })
    }

    /// One message, its answer read in full: the completed task, with the agent's "pong".
    async fn first(&self) -> anyhow::Result<Bytes> {
        let mut conn = self.target.connect().await?;
        let answer = conn.ok(&self.endpoint, request("first", 0, 0)).await?;
        let body: Value = serde_json::from_slice(&answer).context("the answer is not JSON")?;
        let task = &body["result"]["task"];
        let text = &task["artifacts"][0]["parts"][0]["text"];
        if task["status"]["state"] != "TASK_STATE_COMPLETED" || text != PONG {
            bail!("{} answered no task completed with {PONG:?}: {body}", self.label);
        }
        Ok(answer)
    }

    /// `calls` round trips one after the other (after a few to warm up).
    async fn sequential(&self, calls: usize) -> anyhow::Result<(Summary, Bad)> {
        let mut conn = self.target.connect().await?;
        let (mut n, mut bad) = (0, Bad::default());
        let summary = sequential(calls, async || {
            n += 1;
            let (status, answer) = conn.send(&self.endpoint, request("seq", 0, n)).await?;
            bad.check(status, &answer);
            anyhow::Ok(())
        })
        .await?;
        Ok((summary, bad))
    }

    /// `clients` tasks, each on its own connection, sending as fast as answers come, for one second
    /// of warm-up and then `duration`.
    async fn concurrent(&self, clients: usize, duration: Duration) -> anyhow::Result<(Summary, Bad)> {
        let mut connections = Vec::with_capacity(clients);
        for _ in 0..clients {
            connections.push(self.target.connect().await?);
        }
        let started = Instant::now();
        let warm_until = started + Duration::from_secs(1);
        let until = warm_until + duration;
        let cpu = super::cpu_between(warm_until, until);
        let tasks: Vec<_> = connections
            .into_iter()
            .enumerate()
            .map(|(client, mut conn)| {
                let endpoint = self.endpoint.clone();
                tokio::spawn(async move {
                    let (mut micros, mut bad, mut n) = (Vec::new(), Bad::default(), 0);
                    loop {
                        let at = Instant::now();
                        if at >= until {
                            break;
                        }
                        n += 1;
                        let (status, answer) = conn.send(&endpoint, request("load", client, n)).await?;
                        bad.check(status, &answer);
                        if at >= warm_until {
                            micros.push(at.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        }
                    }
                    anyhow::Ok((micros, bad))
                })
            })
            .collect();
        let (mut micros, mut bad) = (Vec::new(), Bad::default());
        for task in tasks {
            let (m, b) = task.await??;
            micros.extend(m);
            bad.merge(b);
        }
        let count = micros.len();
        let used = cpu.await?;
        Ok((Summary::new(micros, count, (Instant::now() - warm_until).as_secs_f64()).with_cpu(used), bad))
    }
}

/// The a2a-sdk anchor's server, a child process.
struct Sdk {
    child: tokio::process::Child,
    /// `http://127.0.0.1:port`.
    base: String,
    version: String,
}

impl Sdk {
    /// Started with `python`, its stderr to `log`; or why not, in words that say how to fix it.
    async fn start(python: &Path, log: &Path) -> Result<Sdk, String> {
        let setup = "./scripts/py-setup installs a2a-sdk into .tools/venv (or give --python)";
        if !python.exists() {
            return Err(format!("{} does not exist: {setup}", python.display()));
        }
        let stderr = std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let mut child = tokio::process::Command::new(python)
            .args(["-c", SDK_SERVER, "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
        let started = match &line {
            Ok(Ok(Some(line))) => line.strip_prefix("listening on ").and_then(|rest| {
                let (base, version) = rest.split_once(" a2a-sdk ")?;
                Some((base.to_owned(), version.to_owned()))
            }),
            _ => None,
        };
        let Some((base, version)) = started else {
            let _ = child.kill().await;
            let said = std::fs::read_to_string(log).unwrap_or_default();
            let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(nothing on stderr)");
            return Err(format!("its server did not start ({last}): {setup}"));
        };
        Ok(Sdk { child, base, version })
    }

    /// Stopped; answers its version.
    async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        self.version
    }
}
