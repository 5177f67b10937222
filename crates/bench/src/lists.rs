//! `clutch bench lists`: the lists and search on a big store. The same events (runs of a task with
//! its accept, progress, chat and end, many runs interleaved as a busy hub writes them) are appended
//! to two fresh stores, one keeping the lists and the search index and one not, the writer's
//! throughput measured on each; then the first page of each list, a deep page, and searches are
//! asked through the HTTP API of a daemon on the store that keeps them, each many times (p50, p99).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_store::{Backend, Entry};
use serde_json::{Value, json};

use crate::{Daemon, Summary, thousands};

#[derive(Debug, Args)]
pub struct ListsArgs {
    /// Events in each store.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Runs they belong to (each one task: request, accept, progress and chat, then its end).
    #[arg(long, default_value_t = 10_000)]
    pub runs: u64,
    /// Runs written at once, their events interleaved.
    #[arg(long, default_value_t = 100)]
    pub active: u64,
    /// Messages per append (one transaction).
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Times each query is asked.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Store: unset for SQLite in fresh directories under --dir; a `postgres://` URL for PostgreSQL
    /// (fresh schemas, dropped afterwards).
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Where SQLite files go (the disk being measured).
    #[arg(long, default_value = ".clutch-bench/lists", value_name = "DIR")]
    pub dir: PathBuf,
}

/// A small deterministic generator (xorshift64*), so both stores get the same events.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A word, common ones far more often (about Zipf's law).
    fn word(&mut self, vocabulary: &[String]) -> String {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        let i = ((vocabulary.len() as f64).powf(u) as usize).saturating_sub(1).min(vocabulary.len() - 1);
        vocabulary[i].clone()
    }

    fn sentence(&mut self, vocabulary: &[String], words: usize) -> String {
        (0..words).map(|_| self.word(vocabulary)).collect::<Vec<_>>().join(" ")
    }
}

/// 5,000 pronounceable words: `vocabulary[0]` is the most common.
fn vocabulary() -> Vec<String> {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "an", "el", "ox", "ur", "is", "ba", "de", "fo",
        "gu", "hy",
    ];
    (0..5000usize)
        .map(|i| {
            let (a, b, c) = (i % 20, (i / 20) % 20, (i / 400) % 20);
            format!("{}{}{}", SYLLABLES[a], SYLLABLES[b], SYLLABLES[c])
        })
        .collect()
}

/// The events, generated a batch at a time, the same for every call with the same arguments.
struct Events {
    rng: Rng,
    vocabulary: Vec<String>,
    per_run: u64,
    runs_left: u64,
    /// Runs in progress: (run, thread, task, agent, events written).
    active: Vec<(String, String, String, String, u64)>,
    defaults: Defaults,
}

impl Events {
    fn new(args: &ListsArgs) -> Events {
        Events {
            rng: Rng(0x9E37_79B9_7F4A_7C15),
            vocabulary: vocabulary(),
            per_run: (args.events / args.runs.max(1)).max(3),
            runs_left: args.runs,
            active: Vec::new(),
            defaults: Defaults { now: SystemTime::now() },
        }
    }

    fn batch(&mut self, n: usize, active: u64) -> anyhow::Result<Vec<Entry>> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            while (self.active.len() as u64) < active && self.runs_left > 0 {
                self.runs_left -= 1;
                let agent = format!("agent:worker-{}", self.rng.next() % 32);
                self.active.push((
                    id::generate(Kind::Run),
                    id::generate(Kind::Thread),
                    id::generate(Kind::Task),
                    agent,
                    0,
                ));
            }
            if self.active.is_empty() {
                break;
            }
            let i = (self.rng.next() % self.active.len() as u64) as usize;
            let (run, thread, task, agent, written) = self.active[i].clone();
            let base = |from: &str, to: &str, kind: &str, payload: Value| {
                json!({"run_id": run, "thread_id": thread, "task_id": task, "from": {"agent_id": from},
                       "to": [{"agent_id": to}], "type": kind, "payload": payload})
            };
            let value = if written == 0 {
                let mut m = base(
                    "user:operator",
                    "agent:orchestrator",
                    "task.request",
                    json!({"goal": self.rng.sentence(&self.vocabulary, 6)}),
                );
                m["requires"] = json!([format!("skill:s{}", self.rng.next() % 8)]);
                m
            } else if written == 1 {
                base(&agent, "user:operator", "task.accept", json!({}))
            } else if written + 1 == self.per_run {
                if self.rng.next().is_multiple_of(10) {
                    let message = self.rng.sentence(&self.vocabulary, 8);
                    base(
                        &agent,
                        "user:operator",
                        "task.error",
                        json!({"code": "TOOL_FAILED", "message": message, "retryable": false}),
                    )
                } else {
                    base(
                        &agent,
                        "user:operator",
                        "task.result",
                        json!({"text": self.rng.sentence(&self.vocabulary, 12)}),
                    )
                }
            } else if written % 2 == 0 {
                base(&agent, "user:operator", "chat.message", json!({"text": self.rng.sentence(&self.vocabulary, 10)}))
            } else {
                base(&agent, "user:operator", "task.progress", json!({"text": self.rng.sentence(&self.vocabulary, 10)}))
            };
            let message = validate::message(&value, &self.defaults).map_err(|p| anyhow::anyhow!("{p}"))?;
            out.push(Entry::new(message));
            self.active[i].4 += 1;
            if self.active[i].4 == self.per_run {
                self.active.swap_remove(i);
            }
        }
        Ok(out)
    }
}

/// A fresh store (lists on or off) and what to remove afterwards.
async fn open(args: &ListsArgs, lists: bool) -> anyhow::Result<(Arc<dyn Backend>, Option<(String, String)>)> {
    let name = if lists { "on" } else { "off" };
    match &args.db {
        None => {
            let dir = args.dir.join(name);
            let _ = std::fs::remove_dir_all(&dir);
            let options = clutch_store_sqlite::Options { lists, ..clutch_store_sqlite::Options::default() };
            Ok((Arc::new(clutch_store_sqlite::Store::open_with(&dir, options)?), None))
        }
        Some(url) => {
            let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
            let schema = format!("bench_lists_{name}_{stamp}");
            let options =
                clutch_store_postgres::Options { schema: Some(schema.clone()), pool_size: 8, writer: true, lists };
            Ok((Arc::new(clutch_store_postgres::Store::open(url, options).await?), Some((url.clone(), schema))))
        }
    }
}

async fn drop_schema(cleanup: Option<(String, String)>) {
    if let Some((url, schema)) = cleanup
        && let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
    {
        tokio::spawn(conn);
        let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    }
}

/// What the writer did: events/s (time in `append_batch` only, generation aside), and each append's
/// time in microseconds.
struct Filled {
    rate: f64,
    appends: Vec<u32>,
}

impl Filled {
    /// The appends' p50, p99 and longest, in milliseconds.
    fn latency(&self) -> (f64, f64, f64) {
        let s = Summary::new(self.appends.clone(), self.appends.len(), 1.0);
        (s.p50_ms, s.p99_ms, self.appends.iter().copied().max().unwrap_or(0) as f64 / 1000.0)
    }
}

/// Appends every event.
async fn fill(store: &dyn Backend, args: &ListsArgs, label: &str) -> anyhow::Result<Filled> {
    let mut events = Events::new(args);
    let (mut written, mut writing) = (0u64, Duration::ZERO);
    let mut appends = Vec::with_capacity((args.events as usize).div_ceil(args.batch.max(1)));
    let started = Instant::now();
    while written < args.events {
        let batch = events.batch(args.batch.min((args.events - written) as usize), args.active)?;
        if batch.is_empty() {
            break;
        }
        let t = Instant::now();
        for outcome in store.append_batch(&batch).await? {
            outcome?;
        }
        let took = t.elapsed();
        writing += took;
        appends.push(took.as_micros().min(u32::MAX as u128) as u32);
        let before = written;
        written += batch.len() as u64;
        if written / 200_000 != before / 200_000 {
            eprintln!(
                "bench:   {label}: {} / {} ({:.0} s)",
                thousands(written),
                thousands(args.events),
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(Filled { rate: written as f64 / writing.as_secs_f64(), appends })
}

pub async fn run(args: ListsArgs) -> anyhow::Result<()> {
    let what = if args.db.is_some() { "PostgreSQL" } else { "SQLite" };
    eprintln!(
        "bench: {} events in {} runs, twice: without the lists, then with them ({what}) …",
        thousands(args.events),
        thousands(args.runs)
    );
    let (off, cleanup_off) = open(&args, false).await?;
    let filled_off = fill(&*off, &args, "lists off").await?;
    off.close().await;
    drop_schema(cleanup_off).await;
    let (on, cleanup_on) = open(&args, true).await?;
    let filled_on = fill(&*on, &args, "lists on").await?;
    let lag = on.index_lag();
    let head = on.head().await?;
    let t = Instant::now();
    let probe = clutch_store::lists::Query { limit: 1, ..Default::default() };
    while on.list_runs(&probe).await?.as_of < head {}
    let caught_up = t.elapsed();

    let daemon = Daemon::start(on.clone()).await?;
    // The engine reacts to what it replayed (tasks whose agents never registered, timers): the
    // queries start once the log has been still for a second and the lists cover all of it, so that
    // they measure pages of a settled log (a cursor taken while the lists trail pays, on each later
    // page, for placing every row that moved since).
    let mut still = on.head().await?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = on.head().await?;
        if now == still && on.list_runs(&probe).await?.as_of >= now {
            break;
        }
        still = now;
    }
    let added = still - head;
    let http = reqwest::Client::new();
    let vocabulary = vocabulary();
    // A page well into the list: the 20th, or the last one of a smaller store.
    let mut deep = format!("{}/v1/runs?limit=50", daemon.url);
    for _ in 0..20 {
        let page: Value = http.get(&deep).send().await?.json().await?;
        let Some(next) = page["next"].as_str() else { break };
        deep = format!("{}/v1/runs?limit=50&cursor={next}", daemon.url);
    }
    let queries: Vec<(&str, String)> = vec![
        ("runs", "/v1/runs?limit=50".into()),
        ("runs failed", "/v1/runs?limit=50&state=failed".into()),
        ("runs deep", deep.trim_start_matches(&daemon.url).to_owned()),
        ("threads", "/v1/threads?limit=50".into()),
        ("tasks", "/v1/tasks?limit=50".into()),
        ("tasks agent", "/v1/tasks?limit=50&agent=agent:worker-7&state=completed".into()),
        ("tasks cap", "/v1/tasks?limit=50&capability=skill:s3".into()),
        ("search rare", format!("/v1/search?limit=20&q={}", vocabulary[3000])),
        ("search mid", format!("/v1/search?limit=20&q={}", vocabulary[60])),
        ("search 2 words", format!("/v1/search?limit=20&q={}+{}", vocabulary[40], vocabulary[200])),
        ("search common", format!("/v1/search?limit=20&q={}", vocabulary[2])),
    ];
    println!(
        "lists and search on {} events ({} written by the daemon as it started) in {} runs ({what}), each query {} times through the HTTP API",
        thousands(still),
        thousands(added),
        thousands(args.runs),
        args.queries
    );
    for (label, path) in &queries {
        let url = format!("{}{path}", daemon.url);
        let mut micros = Vec::with_capacity(args.queries);
        let started = Instant::now();
        let mut items = 0;
        http.get(&url).send().await?.error_for_status()?;
        for _ in 0..args.queries {
            let t = Instant::now();
            let r = http.get(&url).send().await?;
            if !r.status().is_success() {
                anyhow::bail!("{path}: {} {}", r.status(), r.text().await?);
            }
            let page: Value = r.json().await?;
            micros.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
            items = page["items"].as_array().map_or(0, Vec::len);
        }
        let s = Summary::new(micros, args.queries, started.elapsed().as_secs_f64());
        println!("  {label:<15} p50 {:>6.2} ms   p99 {:>6.2} ms   ({items} items a page)", s.p50_ms, s.p99_ms);
    }
    println!("writer (append_batch of {} events, one at a time), the same events:", args.batch);
    let ratio = format!("   ({:.2}× off)", filled_on.rate / filled_off.rate);
    for (label, filled, ratio) in [("lists off", &filled_off, ""), ("lists on", &filled_on, ratio.as_str())] {
        let (p50, p99, max) = filled.latency();
        println!(
            "  {label:<10} {:>10} events/s   an append p50 {p50:>6.2} ms   p99 {p99:>6.2} ms   max {max:>7.2} ms{ratio}",
            thousands(filled.rate as u64)
        );
    }
    match lag {
        Some(lag) => println!(
            "  the index was {} events behind when the last append returned; caught up {:.2} s later",
            thousands(lag),
            caught_up.as_secs_f64()
        ),
        None => println!("  lists derived {:.2} s after the last append returned", caught_up.as_secs_f64()),
    }
    daemon.stop().await;
    drop_schema(cleanup_on).await;
    Ok(())
}
