//! `clutch bench tasks`: routed task throughput through the real core on a real store: requesters
//! send `task.request`s to the orchestrator, the engine routes each (a `routing.decision` and a
//! delivery), N agents read their inboxes and answer `task.accept` + `task.result`. Reports completed
//! tasks per second and request-to-result latency.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use clap::Args;
use clutch_app::App;
use clutch_core::Engine;
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Agents taking tasks.
    #[arg(long, default_value_t = 16)]
    pub agents: usize,
    /// Tasks each agent works on at once (its card's max_concurrency).
    #[arg(long, default_value_t = 32)]
    pub concurrency: u32,
    /// Requests outstanding at once across all requesters.
    #[arg(long, default_value_t = 512)]
    pub window: usize,
    /// Seconds to measure (after one second of warm-up).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Where the SQLite files go (the disk being measured).
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
    /// Go through the HTTP API as real clients would: requests and answers are POSTs, agents read
    /// their inboxes as SSE streams (otherwise: straight into the core, in process).
    #[arg(long)]
    pub http: bool,
    /// Most messages per request: the requester sends the requests it has room for together, and an
    /// agent answers the deliveries that arrived together in one request (1: one task per request).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
}

pub async fn run(args: TasksArgs) -> anyhow::Result<()> {
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("tasks-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let store = clutch_store_sqlite::Store::open(&dir).context("cannot open the SQLite store")?;
    let store = Arc::new(store);
    let mut builder = App::builder(store.clone()).engine(engine_options());
    if args.http {
        builder = builder.gateway(clutch_gateway::Options::default());
    }
    let app = builder.build().await?;
    let engine = app.engine.clone();
    let (server, transport) = if args.http {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        // Never stopped gracefully: the measurement ends by dropping it.
        let serve = app.serve(listener, std::future::pending());
        let server = tokio::spawn(async move {
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "bench server failed");
            }
        });
        (Some(server), Transport::Http { url, http: reqwest::Client::new(), over: Arc::default() })
    } else {
        (None, Transport::Core(engine.clone()))
    };
    for i in 0..args.agents {
        let card = json!({
            "agent_id": format!("agent:w{i}"),
            "capabilities": [{"id": "skill:work", "version": "1.0.0"}],
            "limits": {"max_concurrency": args.concurrency},
        });
        engine.register(&validate::agent_card(&card).map_err(|p| anyhow::anyhow!("{p}"))?).await?;
    }
    let head = app.log.head().await?;
    let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let done = Arc::new(AtomicU64::new(0));
    let window = Arc::new(Semaphore::new(args.window));
    let mut workers = Vec::new();
    for i in 0..args.agents {
        let me = format!("agent:w{i}");
        workers.push(tokio::spawn(agent(transport.clone(), app.log.clone(), me, head, args.batch.max(1))));
    }
    // Completion watcher: every task.result ends one request.
    let watcher = {
        let (log, started, latencies, done, window) =
            (app.log.clone(), started.clone(), latencies.clone(), done.clone(), window.clone());
        tokio::spawn(async move {
            let filter = Filter { kind: Some(MessageType::TaskResult), ..Filter::default() };
            let Ok(mut sub) = log.subscribe(filter, Some(head)).await else { return };
            while let Ok(event) = sub.next().await {
                let Ok(m) = serde_json::from_str::<Message>(&event.json) else { continue };
                if let Some(at) = started.lock().unwrap_or_else(|e| e.into_inner()).remove(&m.task_id) {
                    latencies.lock().unwrap_or_else(|e| e.into_inner()).push(at.elapsed());
                }
                done.fetch_add(1, Ordering::Relaxed);
                window.add_permits(1);
            }
        })
    };
    eprintln!(
        "bench tasks: {} agents × {} slots, window {}, up to {} per request, {} s (after 1 s warm-up), {}…",
        args.agents,
        args.concurrency,
        args.window,
        args.batch.max(1),
        args.duration,
        if args.http { "through the HTTP API (SSE inboxes)" } else { "in process" }
    );
    let requester = {
        let (transport, started, window, batch) =
            (transport.clone(), started.clone(), window.clone(), args.batch.max(1));
        tokio::spawn(async move {
            let run = id::generate(Kind::Run);
            loop {
                // One slot is awaited; more that are free now join the same request.
                let Ok(permit) = window.acquire().await else { return };
                permit.forget();
                let mut n = 1;
                while n < batch && window.try_acquire().map(|p| p.forget()).is_ok() {
                    n += 1;
                }
                let requests: Vec<Value> = (0..n)
                    .map(|_| {
                        let task = id::generate(Kind::Task);
                        let request = json!({
                            "thread_id": id::generate(Kind::Thread), "run_id": run, "task_id": task,
                            "from": {"agent_id": "user:bench"}, "to": [{"agent_id": "agent:orchestrator"}],
                            "type": "task.request", "requires": ["skill:work@^1"], "payload": {"goal": "work"},
                        });
                        started.lock().unwrap_or_else(|e| e.into_inner()).insert(task, Instant::now());
                        request
                    })
                    .collect();
                let transport = transport.clone();
                tokio::spawn(async move { transport.send(requests).await });
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (from, t0, cpu_from) = (done.load(Ordering::Relaxed), Instant::now(), super::process_cpu());
    latencies.lock().unwrap_or_else(|e| e.into_inner()).clear();
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    let (to, elapsed, cpu_to) = (done.load(Ordering::Relaxed), t0.elapsed(), super::process_cpu());
    requester.abort();
    let mut lat = std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner()));
    lat.sort();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied();
    let rate = (to - from) as f64 / elapsed.as_secs_f64();
    let metrics = app.log.metrics();
    let batches = metrics.batches.load(Ordering::Relaxed).max(1);
    let appended = metrics.appended.load(Ordering::Relaxed);
    println!(
        "tasks completed: {} in {:.1} s = {rate:.0} tasks/s (request → routed → accepted → result)",
        to - from,
        elapsed.as_secs_f64()
    );
    if let (Some(p50), Some(p99)) = (pct(0.5), pct(0.99)) {
        println!("latency request → result: p50 {:.1} ms, p99 {:.1} ms", ms(p50), ms(p99));
    }
    // CPU per task swings less than throughput on a shared machine: the figure to compare builds by.
    if let (Some(cpu_from), Some(cpu_to)) = (cpu_from, cpu_to) {
        let cpu = cpu_to.saturating_sub(cpu_from).as_secs_f64();
        println!(
            "cpu: {:.0} µs per task (this process: load driver, agents and core together; {:.2} cores busy)",
            cpu * 1e6 / (to - from).max(1) as f64,
            cpu / elapsed.as_secs_f64()
        );
    }
    println!(
        "events appended: {appended} ({:.1} per task), {:.1} per commit; {}",
        appended as f64 / to.max(1) as f64,
        appended as f64 / batches as f64,
        super::commits(metrics),
    );
    let head = engine.seq();
    println!(
        "indexes by run, thread, task, sender and type: {} events behind the log at the end",
        head.saturating_sub(store.indexed_upto())
    );
    watcher.abort();
    for w in workers {
        w.abort();
    }
    if let Transport::Http { over, .. } = &transport {
        over.store(true, Ordering::Relaxed);
    }
    if let Some(server) = server {
        server.abort();
    }
    app.stop().await?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn engine_options() -> clutch_core::engine::Options {
    clutch_core::engine::Options { accept_timeout: Duration::from_secs(60), ..Default::default() }
}

/// How the driver and its agents reach the daemon.
#[derive(Clone)]
enum Transport {
    Core(Engine),
    /// `over`: the measurement has ended and the server is going away; sends still under way fail
    /// quietly.
    Http {
        url: String,
        http: reqwest::Client,
        over: Arc<AtomicBool>,
    },
}

impl Transport {
    /// Sends messages (client JSON); failures are logged, as a real client would retry them.
    async fn send(&self, messages: Vec<Value>) {
        match self {
            Transport::Core(engine) => {
                let defaults = Defaults { now: SystemTime::now() };
                let valid: Vec<Message> =
                    messages.iter().filter_map(|m| validate::message(m, &defaults).ok()).collect();
                if let Err(e) = engine.submit(valid).await {
                    tracing::warn!(error = %e, "messages not submitted");
                }
            }
            Transport::Http { url, http, over } => {
                let body = if messages.len() == 1 { messages[0].clone() } else { Value::Array(messages) };
                match http.post(format!("{url}/v1/messages")).json(&body).send().await {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => tracing::warn!(status = r.status().as_u16(), "messages refused"),
                    Err(_) if over.load(Ordering::Relaxed) => {}
                    Err(e) => tracing::warn!(error = %e, "messages not sent"),
                }
            }
        }
    }
}

/// One agent: reads its inbox (a subscription in process, an SSE stream over HTTP) and answers each
/// delivered task with an accept and a result, in one request with those of up to `batch` deliveries
/// that arrived together.
async fn agent(transport: Transport, log: clutch_core::Handle, me: String, head: u64, batch: usize) {
    let (tx, mut deliveries) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let reader = match &transport {
        Transport::Core(_) => {
            let filter = Filter { to: Some(me.clone()), kind: Some(MessageType::TaskRequest), ..Filter::default() };
            let Ok(mut inbox) = log.subscribe(filter, Some(head)).await else { return };
            tokio::spawn(async move {
                while let Ok(event) = inbox.next().await {
                    if let Ok(v) = serde_json::from_str::<Value>(&event.json) {
                        let _ = tx.send(v);
                    }
                }
            })
        }
        Transport::Http { url, http, .. } => {
            let request = http
                .get(format!("{url}/v1/stream"))
                .query(&[("to", me.as_str()), ("type", "task.request"), ("after", &head.to_string())])
                .header("accept", "text/event-stream");
            tokio::spawn(async move {
                let Ok(mut response) = request.send().await else { return };
                // The daemon writes each event's JSON on one `data:` line; nothing else here is JSON.
                let mut line = Vec::new();
                while let Ok(Some(chunk)) = response.chunk().await {
                    for &b in chunk.iter() {
                        if b != b'\n' {
                            line.push(b);
                            continue;
                        }
                        if let Some(data) = line.strip_prefix(b"data:")
                            && let Ok(v) = serde_json::from_slice::<Value>(data)
                        {
                            let _ = tx.send(v);
                        }
                        line.clear();
                    }
                }
            })
        }
    };
    while let Some(first) = deliveries.recv().await {
        let mut arrived = vec![first];
        while arrived.len() < batch
            && let Ok(m) = deliveries.try_recv()
        {
            arrived.push(m);
        }
        let mut replies = Vec::with_capacity(arrived.len() * 2);
        for m in arrived.iter().filter(|m| m["from"]["agent_id"] == clutch_core::tasks::ORCHESTRATOR) {
            let reply = |kind: &str, payload: Value| {
                json!({
                    "thread_id": m["thread_id"], "run_id": m["run_id"], "task_id": m["task_id"],
                    "from": {"agent_id": me}, "to": [{"agent_id": "agent:orchestrator"}],
                    "type": kind, "payload": payload,
                })
            };
            replies.push(reply("task.accept", json!({})));
            replies.push(reply("task.result", json!({"ok": true})));
        }
        if replies.is_empty() {
            continue;
        }
        let transport = transport.clone();
        tokio::spawn(async move { transport.send(replies).await });
    }
    reader.abort();
}
