//! `clutch bench soak`: months of a daemon's life, compressed. N tasks go through a `clutch serve`
//! process over HTTP, each as users and agents would send it (a `task.request` addressed to an agent,
//! its `task.accept`, its `task.result`), in batched `POST /v1/messages` from several writers, a run
//! per batch. At each step it prints the daemon's resident memory, the p99 and longest append, what
//! the engine holds in memory, the longest hold of its lock by its own work and the writer's longest
//! wait for it (from `/metrics`). At the end it stops
//! the daemon (SIGKILL, then SIGTERM), starts it again on the same store each time, and reports its
//! start-to-ready time; after the first it reads the first task back (long gone from memory) and
//! checks that a late message about it is refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::Args;
use clutch_proto::id::{self, Kind};
use serde_json::{Value, json};

use crate::process::Server;
use crate::thousands;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Tasks to put through the daemon.
    #[arg(long, default_value_t = 1_000_000)]
    pub tasks: u64,
    /// A line of figures every this many tasks.
    #[arg(long, default_value_t = 100_000)]
    pub every: u64,
    /// Writers sending at once.
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// Tasks per request (and per run).
    #[arg(long, default_value_t = 100)]
    pub batch: u64,
    /// How long an ended task stays in the daemon's memory (its `ended_retention_ms`), in
    /// milliseconds: short, so that a soak of minutes shows what months would.
    #[arg(long, default_value_t = 1000)]
    pub retention_ms: u64,
    /// Where the daemon's data goes (the disk being measured); removed at the end.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: std::path::PathBuf,
}

/// What one step of the soak saw.
#[derive(Default)]
struct Window {
    micros: Vec<u32>,
}

/// What the run shares between writers.
struct Shared {
    url: String,
    http: reqwest::Client,
    args: SoakArgs,
    /// The next batch to take.
    next: AtomicU64,
    /// Tasks completed.
    done: AtomicU64,
    window: Mutex<Window>,
    /// The first task's id and run: read back at the end.
    first: Mutex<Option<(String, String)>>,
}

pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("soak-{stamp}"));
    let env = [("CLUTCH_ENGINE_ENDED_RETENTION", format!("{}ms", args.retention_ms))];
    let daemon = Server::clutch_with(&dir, &env).await?;
    let url = format!("http://{}", daemon.addr);
    let http = reqwest::Client::new();
    let card = json!({"agent_id": "agent:soak", "capabilities": [{"id": "skill:soak"}]});
    let registered = http.post(format!("{url}/v1/agents")).json(&card).send().await?;
    if !registered.status().is_success() {
        bail!("the agent was not registered: {}", registered.text().await?);
    }
    println!(
        "soak: {} tasks (request, accept, result) over HTTP, {} writers, {} tasks a request, ended tasks leave memory after {} ms",
        thousands(args.tasks),
        args.writers,
        args.batch,
        args.retention_ms
    );
    println!(
        "  {:>9}  {:>8}  {:>9}  {:>9}  {:>10}  {:>10}  {:>9}  {:>9}",
        "tasks", "RSS MB", "p99 ms", "max ms", "in memory", "tombstones", "lock ms", "wait ms"
    );
    let shared = Arc::new(Shared {
        url: url.clone(),
        http,
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        window: Mutex::new(Window::default()),
        first: Mutex::new(None),
        args,
    });
    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..shared.args.writers {
        let shared = shared.clone();
        writers.spawn(async move { writer(&shared).await });
    }
    let mut reported = 0;
    let mut failure = None;
    loop {
        let finished = writers.is_empty();
        let done = shared.done.load(Ordering::Relaxed);
        if done >= reported + shared.args.every || (finished && done > reported) {
            reported = done - done % shared.args.every.max(1);
            if finished {
                reported = done;
            }
            let row = sample(&shared, &daemon, done).await?;
            println!("{}", row.line());
            rows.push(row);
        }
        if finished {
            break;
        }
        tokio::select! {
            joined = writers.join_next() => {
                let outcome = match joined {
                    Some(Ok(outcome)) => outcome,
                    Some(Err(e)) => Err(e.into()),
                    None => Ok(()),
                };
                if let Err(e) = outcome {
                    failure.get_or_insert(e);
                    // The other writers take no more.
                    shared.next.store(u64::MAX / 2, Ordering::Relaxed);
                }
            }
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    if let Some(e) = failure {
        daemon.stop().await;
        return Err(e);
    }
    let seconds = started.elapsed().as_secs_f64();
    let done = shared.done.load(Ordering::Relaxed);
    println!(
        "  {} tasks in {seconds:.0} s ({} tasks/s, {} events/s)",
        thousands(done),
        thousands((done as f64 / seconds) as u64),
        thousands((3.0 * done as f64 / seconds) as u64)
    );

    // The plug pulled (the start replays what came after the last periodic snapshot), then a clean
    // stop (the engine saves its snapshot on the way out): each followed by a start on the same store.
    daemon.kill().await;
    let starting = Instant::now();
    let daemon = Server::clutch_with(&dir, &env).await?;
    let after_kill = starting.elapsed();
    let url = format!("http://{}", daemon.addr);
    let checked = read_back(&shared, &url).await;
    daemon.stop().await;
    let starting = Instant::now();
    let daemon = Server::clutch_with(&dir, &env).await?;
    let restart = starting.elapsed();
    let rss = daemon.rss().unwrap_or(0);
    daemon.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    let checked = checked?;
    println!("  after SIGKILL: ready in {:.0} ms; {checked}", after_kill.as_secs_f64() * 1e3);
    println!("  restart after SIGTERM: ready in {:.0} ms, RSS {:.1} MB", restart.as_secs_f64() * 1e3, mb(rss));
    verdict(&rows, restart.max(after_kill));
    Ok(())
}

/// One writer: takes batches until every task is taken; for each, the requests, the accepts and the
/// results, one request each.
async fn writer(shared: &Shared) -> anyhow::Result<()> {
    let batch = shared.args.batch.max(1);
    loop {
        let from = shared.next.fetch_add(batch, Ordering::Relaxed);
        if from >= shared.args.tasks {
            return Ok(());
        }
        let n = batch.min(shared.args.tasks - from);
        let run = id::generate(Kind::Run);
        let thread = id::generate(Kind::Thread);
        let tasks: Vec<String> = (0..n).map(|_| id::generate(Kind::Task)).collect();
        if from == 0 {
            *shared.first.lock().unwrap() = Some((tasks[0].clone(), run.clone()));
        }
        let message = |task: &str, from: &str, kind: &str, payload: Value| {
            let mut m = json!({
                "thread_id": thread, "run_id": run, "task_id": task,
                "from": {"agent_id": from}, "to": [], "type": kind, "payload": payload,
            });
            if kind == "task.request" {
                m["to"] = json!([{"agent_id": "agent:soak"}]);
            }
            m
        };
        for (from, kind, payload) in [
            ("user:soak", "task.request", json!({"goal": "soak"})),
            ("agent:soak", "task.accept", json!({})),
            ("agent:soak", "task.result", json!({"answer": 42, "usage": {"tokens": 10}})),
        ] {
            let body: Vec<Value> = tasks.iter().map(|t| message(t, from, kind, payload.clone())).collect();
            let sent = Instant::now();
            let answer = shared.http.post(format!("{}/v1/messages", shared.url)).json(&body).send().await?;
            let status = answer.status();
            let answer: Value = answer.json().await.context("the answer is not JSON")?;
            let took = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            shared.window.lock().unwrap().micros.push(took);
            let refused = answer["results"].as_array().into_iter().flatten().find(|r| r.get("error").is_some());
            if !status.is_success() || refused.is_some() {
                bail!("{kind} refused ({status}): {}", refused.unwrap_or(&answer));
            }
        }
        shared.done.fetch_add(n, Ordering::Relaxed);
    }
}

/// One line of figures.
struct Row {
    tasks: u64,
    rss: u64,
    p99_ms: f64,
    max_ms: f64,
    in_memory: u64,
    tombstones: u64,
    hold_ms: f64,
    wait_ms: f64,
}

impl Row {
    fn line(&self) -> String {
        format!(
            "  {:>9}  {:>8.1}  {:>9.2}  {:>9.2}  {:>10}  {:>10}  {:>9.2}  {:>9.2}",
            thousands(self.tasks),
            mb(self.rss),
            self.p99_ms,
            self.max_ms,
            thousands(self.in_memory),
            thousands(self.tombstones),
            self.hold_ms,
            self.wait_ms
        )
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// The figures now: the daemon's RSS, the appends since the last line, and the engine's gauges.
async fn sample(shared: &Shared, daemon: &Server, tasks: u64) -> anyhow::Result<Row> {
    let mut micros = std::mem::take(&mut shared.window.lock().unwrap().micros);
    micros.sort_unstable();
    let at = |q: f64| micros.get(((micros.len().max(1) - 1) as f64 * q) as usize).map_or(0.0, |m| *m as f64 / 1e3);
    let metrics = shared.http.get(format!("{}/metrics", shared.url)).send().await?.text().await?;
    let gauge = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(Row {
        tasks,
        rss: daemon.rss().unwrap_or(0),
        p99_ms: at(0.99),
        max_ms: at(1.0),
        in_memory: gauge("clutch_engine_tasks") as u64,
        tombstones: gauge("clutch_engine_tombstones") as u64,
        hold_ms: gauge("clutch_engine_longest_hold_seconds") * 1e3,
        wait_ms: gauge("clutch_engine_longest_writer_wait_seconds") * 1e3,
    })
}

/// After the restart: the first task, long gone from memory, read back from the log with its run,
/// and a late message about it refused.
async fn read_back(shared: &Shared, url: &str) -> anyhow::Result<String> {
    let Some((task, run)) = shared.first.lock().unwrap().clone() else { bail!("no task was sent") };
    let shown: Value = shared.http.get(format!("{url}/v1/tasks/{task}")).send().await?.json().await?;
    if shown["state"] != "completed" || shown["history"].as_array().map_or(0, Vec::len) != 3 {
        bail!("the first task does not read back as completed with its 3 events: {shown}");
    }
    let tree: Value = shared.http.get(format!("{url}/v1/runs/{run}/tasks")).send().await?.json().await?;
    let batch = shared.args.batch.min(shared.args.tasks);
    if tree["counts"]["completed"].as_u64() != Some(batch) {
        bail!("the first run does not read back with its {batch} completed tasks: {}", tree["counts"]);
    }
    let late = json!({
        "thread_id": id::generate(Kind::Thread), "run_id": run, "task_id": task,
        "from": {"agent_id": "agent:soak"}, "to": [], "type": "task.progress", "payload": {},
    });
    let answer = shared.http.post(format!("{url}/v1/messages")).json(&late).send().await?;
    let status = answer.status();
    let body: Value = answer.json().await?;
    if body["error"]["code"] != "INVALID_TRANSITION" {
        bail!("a late message about an ended task was not refused ({status}): {body}");
    }
    Ok("the first task and its run read back from the log; a late message about it refused".into())
}

/// The figures against the targets: memory after all within 1.25× of memory at the first line, no
/// writer wait over 10 ms, p99 flat within 1.5×, restart under 200 ms.
fn verdict(rows: &[Row], restart: Duration) {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else { return };
    let p99s = rows.iter().map(|r| r.p99_ms);
    let (low, high) = p99s.fold((f64::MAX, 0.0f64), |(l, h), p| (l.min(p), h.max(p)));
    let hold = rows.iter().map(|r| r.hold_ms).fold(0.0, f64::max);
    let mark = |ok: bool| if ok { "ok" } else { "MISSED" };
    let growth = last.rss as f64 / first.rss.max(1) as f64;
    println!("  RSS at the end / at {}: {growth:.2}× (≤ 1.25×: {})", thousands(first.tasks), mark(growth <= 1.25));
    println!("  p99 highest / lowest: {:.2}× (≤ 1.5×: {})", high / low.max(1e-9), mark(high <= 1.5 * low));
    let wait = rows.iter().map(|r| r.wait_ms).fold(0.0, f64::max);
    println!("  longest writer wait for the engine: {wait:.2} ms (≤ 10 ms: {})", mark(wait <= 10.0));
    println!("  longest engine lock hold by its own work: {hold:.2} ms");
    println!(
        "  slower restart: {:.0} ms (< 200 ms: {})",
        restart.as_secs_f64() * 1e3,
        mark(restart < Duration::from_millis(200))
    );
}
