//! `clutch bench`: load drivers that measure the daemon end to end on this machine, each beside an
//! anchor measured in the same run on the same disk (a plain insert or select loop with the same
//! durability), so a figure means something on any hardware. A crate of its own so that the daemon
//! ships without it: the binary links it only with its `bench` feature (on by default). The
//! in-process daemons are built by `clutch-app`, as `clutch serve` builds its own; the `startup` and
//! `mcp` drivers also run the executable they are part of (`clutch serve`, `clutch mcp`), and the
//! `a2a` driver the official Python SDK's server (`a2a_sdk_server.py`, built in); `fanout`, `clients`
//! and `soak` run `clutch serve` as a child process (`process`), so that its CPU and memory are read
//! apart from the driver's. A driver speaking HTTP keeps one HTTP/1 connection per simulated client
//! (`http1`). Drivers are commands, like the binary's, so this crate uses `anyhow` as the binary does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clutch_app::{App, face};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_store::Backend;
use serde_json::{Value, json};

mod a2a;
mod clients;
mod fanout;
mod http1;
mod lists;
mod llm;
mod mcp;
mod positions;
mod process;
mod soak;
mod tasks;
mod tools;
mod workflow;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Durable appends through the HTTP API from N concurrent writers, beside a plain insert loop.
    #[command(after_help = "EXAMPLES:
  clutch bench append --writers 16 --duration 10
  clutch bench append --writers 1 --duration 5
  clutch bench append --db postgres://postgres@127.0.0.1:5432/test --writers 16")]
    Append(AppendArgs),
    /// Replay of one run through the HTTP API out of a large store, beside a plain select loop.
    #[command(after_help = "EXAMPLES:
  clutch bench replay                          # 100,000-event run in a 1,000,000-event store
  clutch bench replay --events 200000 --run-events 20000")]
    Replay(ReplayArgs),
    /// Start-to-ready time and idle memory of `clutch serve` on an existing store.
    #[command(after_help = "EXAMPLES:
  clutch bench startup --data-dir .clutch-bench/replay")]
    Startup(StartupArgs),
    /// Routed task throughput through the core: request → routing → delivery → accept → result.
    #[command(after_help = "EXAMPLES:
  clutch bench tasks --agents 16 --duration 10
  clutch bench tasks --agents 16 --concurrency 64 --window 1024")]
    Tasks(tasks::TasksArgs),
    /// MCP `tools/call` round trips over stdio (`clutch mcp`) and Streamable HTTP, and throughput of
    /// concurrent HTTP clients, each beside a plain anchor (an axum JSON endpoint; `cat` on a pipe).
    #[command(after_help = "EXAMPLES:
  clutch bench mcp
  clutch bench mcp --clients 64 --duration 10 --calls 20000")]
    Mcp(mcp::McpArgs),
    /// A2A `SendMessage` (1.0, blocking) to a trivial agent in this process: round trips and the
    /// throughput of concurrent clients, beside the official Python SDK's server doing the same and a
    /// plain axum JSON-RPC endpoint answering the same bytes.
    #[command(after_help = "EXAMPLES:
  clutch bench a2a                                     # needs ./scripts/py-setup for the a2a-sdk anchor
  clutch bench a2a --clients 64 --duration 10 --calls 5000
  clutch bench a2a --no-sdk")]
    A2a(a2a::A2aArgs),
    /// Durable workflow cycles from N agents (claim → checkpoint → complete) over MCP, the HTTP API or
    /// the engine in process, beside a plain durable insert loop; every task is checked at the end.
    #[command(after_help = "EXAMPLES:
  clutch bench workflow                                # 64 agents over MCP, 10 s
  clutch bench workflow --transport http --duration 5
  clutch bench workflow --transport core --agents 16
  clutch bench workflow --claims next                  # find tasks with workflow_next_tasks")]
    Workflow(workflow::WorkflowArgs),
    /// A tool call through Clutch (stored, noted, made on an MCP server over stdio, answered to the
    /// caller's inbox) beside the same call from rmcp's client straight to the server: round trips
    /// and the throughput of concurrent callers.
    #[command(after_help = "EXAMPLES:
  clutch bench tools                                   # node_modules/.bin/mcp-server-everything stdio
  clutch bench tools --callers 32 --duration 10
  clutch bench tools --server npx -y @modelcontextprotocol/server-everything stdio")]
    Tools(tools::ToolsArgs),
    /// The live stream to many subscribers: N WebSocket and SSE subscribers to `/v1/stream` of a
    /// `clutch serve` process and one paced writer, beside Redis pub/sub driven by the same client
    /// code; latency from send to each receive, completeness and order, CPU per delivery.
    #[command(after_help = "EXAMPLES:
  clutch bench fanout                                  # 100 subscribers, 200 msgs/s, 10 s each
  clutch bench fanout --subscribers 1 --duration 5
  clutch bench fanout --transports ws,redis --rate 1000")]
    Fanout(fanout::FanoutArgs),
    /// MCP clients nobody here wrote, beside our lean client, against one `clutch serve`: the
    /// official Python SDK over HTTP and through the stdio bridge; the daemon's CPU per call and per
    /// workflow task for each, the SDK's own and the bridge's.
    #[command(after_help = "EXAMPLES:
  clutch bench clients                                 # needs ./scripts/py-setup (the MCP SDK)
  clutch bench clients --clients 16 --agents 8 --tasks 200 --duration 5
  clutch bench clients --no-stdio")]
    Clients(clients::ClientsArgs),
    /// A daemon that runs for months, compressed: N tasks (request, accept, result) through a
    /// `clutch serve` process over HTTP; its memory, append latency and the engine's longest lock
    /// hold at each step, then its restart time.
    #[command(after_help = "EXAMPLES:
  clutch bench soak                                    # 1,000,000 tasks, a line per 100,000
  clutch bench soak --tasks 200000 --every 20000 --writers 8")]
    Soak(soak::SoakArgs),
    /// Built-in LLM agents against a fake provider in this process: the runtime's own time per turn,
    /// tasks/s with N agents while the provider takes 200 ms per answer, and memory per idle agent.
    #[command(after_help = "EXAMPLES:
  clutch bench llm                                     # 200 agents, 200 ms answers, 10 s
  clutch bench llm --agents 50 --latency-ms 500 --duration 5")]
    Llm(llm::LlmArgs),
    /// Positions against a fake provider in this process: N concurrent mirror sessions (each two
    /// rounds of two model calls), sessions/s against the ideal, and the orchestration overhead per
    /// session and per event.
    #[command(after_help = "EXAMPLES:
  clutch bench positions                               # 50 sessions, 200 ms answers, 10 s
  clutch bench positions --sessions 10 --latency-ms 500")]
    Positions(positions::PositionsArgs),
    /// The lists and search on a big store: the writer with and without them (the same events), then
    /// the first page of each list, a deep page and searches through the HTTP API (p50, p99).
    #[command(after_help = "EXAMPLES:
  clutch bench lists                                   # 1,000,000 events in 10,000 runs, SQLite
  clutch bench lists --events 100000 --runs 1000 --queries 50
  clutch bench lists --db postgres://postgres@127.0.0.1:5432/test")]
    Lists(lists::ListsArgs),
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// Concurrent writers, each waiting for its acknowledgement before sending again.
    #[arg(long, default_value_t = 16)]
    pub writers: usize,
    /// Seconds to measure (after one second of warm-up).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Messages per request (1 = single-message posts).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Bytes of payload text per message.
    #[arg(long, default_value_t = 300)]
    pub payload_bytes: usize,
    /// Store: unset for SQLite in a fresh directory under --dir; a `postgres://` URL for PostgreSQL
    /// (a fresh schema, dropped afterwards).
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Where SQLite files go (the disk being measured).
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
    /// The `redis-server` of the second anchor: as many clients as writers, each `XADD`ing the same
    /// messages (a batch pipelined) with `appendfsync always`, in --dir. Skipped when there is none.
    #[arg(long, default_value = "redis-server", value_name = "PATH")]
    pub redis_server: String,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Events in the store.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Events of the replayed run, spread evenly through the store.
    #[arg(long, default_value_t = 100_000)]
    pub run_events: u64,
    /// Replays to measure; the best and the median are reported.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// The store's directory; it is filled once and reused by later runs.
    #[arg(long, default_value = ".clutch-bench/replay", value_name = "DIR")]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct StartupArgs {
    /// An existing data directory (e.g. the replay bench's); created if missing.
    #[arg(long, default_value = ".clutch-bench/replay", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Starts to measure.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Append(args) => append(args).await,
        Command::Replay(args) => replay(args).await,
        Command::Startup(args) => startup(args).await,
        Command::Tasks(args) => tasks::run(args).await,
        Command::Mcp(args) => mcp::run(args).await,
        Command::A2a(args) => a2a::run(args).await,
        Command::Workflow(args) => workflow::run(args).await,
        Command::Tools(args) => tools::run(args).await,
        Command::Fanout(args) => fanout::run(args).await,
        Command::Clients(args) => clients::run(args).await,
        Command::Soak(args) => soak::run(args).await,
        Command::Llm(args) => llm::run(args).await,
        Command::Positions(args) => positions::run(args).await,
        Command::Lists(args) => lists::run(args).await,
    }
}

/// A daemon inside this process, as `clutch serve` builds it (the real store, core, HTTP API, MCP
/// endpoints and A2A face, with the A2A options `clutch serve` has when nothing is configured:
/// callers without a credential are allowed while no key and no token is set; no push delivery) on
/// 127.0.0.1:0.
struct Daemon {
    url: String,
    log: clutch_core::Handle,
    engine: clutch_core::Engine,
    app: App,
}

impl Daemon {
    async fn start(backend: Arc<dyn Backend>) -> anyhow::Result<Daemon> {
        let mut app = App::builder(backend)
            .gateway(clutch_gateway::Options::default())
            .face(face::Mcp(clutch_mcp::Options::default()))
            .face(face::A2a::default())
            .build()
            .await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        app.listen(listener);
        Ok(Daemon { url, log: app.log.clone(), engine: app.engine.clone(), app })
    }

    async fn stop(self) {
        if let Err(e) = self.app.stop().await {
            tracing::error!(error = %e, "bench daemon failed while stopping");
        }
    }
}

fn message(run: &str, payload_bytes: usize) -> Value {
    json!({
        "thread_id": id::generate(Kind::Thread), "run_id": run, "task_id": id::generate(Kind::Task),
        "from": {"agent_id": "agent:bench"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": "task.progress", "payload": {"text": "x".repeat(payload_bytes), "pct": 50},
    })
}

/// Latencies in microseconds, summarised.
struct Summary {
    count: usize,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// CPU time this process spent per counted operation, when measured: a cost the other load on
    /// the machine does not change.
    cpu_us: Option<f64>,
}

/// CPU time this process has used so far (user and system, all threads), from `/proc/self/stat`.
/// The process's CPU time from `from` to `until` (a timer of its own): what a load run between those
/// instants cost, warm-up left out.
fn cpu_between(from: std::time::Instant, until: std::time::Instant) -> tokio::task::JoinHandle<Option<Duration>> {
    tokio::spawn(async move {
        tokio::time::sleep_until(from.into()).await;
        let start = process_cpu();
        tokio::time::sleep_until(until.into()).await;
        Some(process_cpu()?.saturating_sub(start?))
    })
}

fn process_cpu() -> Option<Duration> {
    process_cpu_of("/proc/self/stat")
}

/// CPU time a process has used so far, from its `/proc/PID/stat`.
fn process_cpu_of(stat: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(stat).ok()?;
    // Fields after the parenthesised name, which may hold spaces: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}

impl Summary {
    fn new(mut micros: Vec<u32>, count: usize, seconds: f64) -> Summary {
        micros.sort_unstable();
        let at = |q: f64| {
            if micros.is_empty() { 0.0 } else { micros[((micros.len() - 1) as f64 * q) as usize] as f64 / 1000.0 }
        };
        Summary { count, seconds, p50_ms: at(0.50), p99_ms: at(0.99), cpu_us: None }
    }

    /// With the CPU time `used` over the measured operations.
    fn with_cpu(mut self, used: Option<Duration>) -> Summary {
        self.cpu_us = used.map(|d| d.as_secs_f64() * 1e6 / self.count.max(1) as f64);
        self
    }

    fn rate(&self) -> f64 {
        self.count as f64 / self.seconds
    }

    fn line(&self, label: &str, unit: &str) -> String {
        let cpu =
            self.cpu_us.map(|us| format!("   cpu {us:>5.0} µs/{}", unit.trim_end_matches('s'))).unwrap_or_default();
        format!(
            "  {label:<8} {:>10} {unit}/s   p50 {:>6.2} ms   p99 {:>6.2} ms{cpu}   ({} in {:.1} s)",
            thousands(self.rate() as u64),
            self.p50_ms,
            self.p99_ms,
            thousands(self.count as u64),
            self.seconds
        )
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

async fn append(args: AppendArgs) -> anyhow::Result<()> {
    if args.writers == 0 || args.batch == 0 {
        bail!("--writers and --batch must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let anchor_seconds = args.duration.clamp(1, 5);
    let (backend, anchor, what, cleanup): (Arc<dyn Backend>, Summary, String, Cleanup) = match &args.db {
        None => {
            let dir = args.dir.join(format!("append-{stamp}"));
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            eprintln!("bench: anchor: plain SQLite single-row durable insert loop for {anchor_seconds} s …");
            let anchor_path = dir.join("anchor.db");
            let payload = args.payload_bytes;
            let anchor = tokio::task::spawn_blocking(move || {
                sqlite_anchor(&anchor_path, Duration::from_secs(anchor_seconds), payload)
            })
            .await??;
            let store = clutch_store_sqlite::Store::open(&dir.join("store"))?;
            let what = format!("SQLite (WAL, fdatasync before every acknowledgement) in {}", dir.display());
            (Arc::new(store), anchor, what, Cleanup::Dir(dir))
        }
        Some(url) => {
            let schema = format!("bench_{stamp}");
            eprintln!("bench: anchor: plain PostgreSQL single-row insert loop for {anchor_seconds} s …");
            let anchor = pg_anchor(url, &schema, Duration::from_secs(anchor_seconds), args.payload_bytes).await?;
            let options = clutch_store_postgres::Options {
                schema: Some(schema.clone()),
                pool_size: 8,
                writer: true,
                lists: true,
            };
            let store = clutch_store_postgres::Store::open(url, options).await?;
            let what = "PostgreSQL (synchronous_commit=on)".to_string();
            (Arc::new(store), anchor, what, Cleanup::Schema(url.clone(), schema))
        }
    };

    let redis =
        redis_anchor(&args, &args.dir.join(format!("append-redis-{stamp}")), Duration::from_secs(anchor_seconds)).await;
    let daemon = Daemon::start(backend).await?;
    eprintln!(
        "bench: {} writers posting batches of {} for 1 s warm-up + {} s …",
        args.writers, args.batch, args.duration
    );
    let target = http1::Target::new(&daemon.url)?;
    let endpoint = target.post("/v1/messages", &[])?;
    let run = id::generate(Kind::Run);
    let started = Instant::now();
    let warm_until = started + Duration::from_secs(1);
    let until = warm_until + Duration::from_secs(args.duration);
    let writers: Vec<_> = (0..args.writers)
        .map(|_| {
            let (target, endpoint, run) = (target.clone(), endpoint.clone(), run.clone());
            let (batch, payload) = (args.batch, args.payload_bytes);
            tokio::spawn(async move {
                let mut connection = target.connect().await?;
                let mut latencies = Vec::new();
                let mut acked = 0usize;
                loop {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    let body = if batch == 1 {
                        message(&run, payload)
                    } else {
                        Value::Array((0..batch).map(|_| message(&run, payload)).collect())
                    };
                    connection.ok(&endpoint, serde_json::to_vec(&body)?.into()).await.context("append refused")?;
                    if now >= warm_until {
                        latencies.push(now.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        acked += batch;
                    }
                }
                Ok::<_, anyhow::Error>((latencies, acked))
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut acked = 0;
    for w in writers {
        let (l, a) = w.await??;
        latencies.extend(l);
        acked += a;
    }
    let measured = (Instant::now() - warm_until).as_secs_f64().min(args.duration as f64 + 1.0);
    let clutch = Summary::new(latencies, acked, measured);
    let batches = daemon.log.metrics().batches.load(std::sync::atomic::Ordering::Relaxed);
    let appended = daemon.log.metrics().appended.load(std::sync::atomic::Ordering::Relaxed);
    let metrics = daemon.log.metrics();
    let commits = commits(metrics);
    // A batch committed and flushed in one step is a flush of its own.
    let per_sync = appended as f64 / (metrics.sync.count() + metrics.commit_and_sync.count()).max(1) as f64;
    daemon.stop().await;
    cleanup.run().await;

    println!("append through the HTTP API: {} writers, {} message(s) per request, {what}", args.writers, args.batch);
    println!("{}", clutch.line("clutch", "msgs"));
    println!("{}", anchor.line("anchor", "rows"));
    match &redis {
        Ok(redis) => println!("{}", redis.line("redis", "msgs")),
        Err(why) => println!("  redis    not measured: {why:#}"),
    }
    println!(
        "  ratio    {:.2}× the anchor (plain single-row durable insert loop, 1 writer, same disk); \
         {:.1} messages per group commit, {per_sync:.1} per flush; {commits}",
        clutch.rate() / anchor.rate(),
        appended as f64 / batches.max(1) as f64
    );
    if let Ok(redis) = &redis {
        println!(
            "  ratio    {:.2}× Redis (XADD, appendfsync always, {} clients, same messages, same disk)",
            clutch.rate() / redis.rate(),
            args.writers
        );
    }
    Ok(())
}

/// The second anchor: `redis-server` with `appendfsync always` in `dir` (removed afterwards), as
/// many clients as writers, each `XADD`ing the messages a writer posts (a batch pipelined) and
/// waiting for the replies, for `duration` after a second of warm-up.
async fn redis_anchor(args: &AppendArgs, dir: &Path, duration: Duration) -> anyhow::Result<Summary> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    eprintln!(
        "bench: anchor: Redis XADD with appendfsync always, {} clients for {} s …",
        args.writers,
        duration.as_secs()
    );
    let server = process::Server::redis_durable(&args.redis_server, dir)
        .await
        .with_context(|| format!("no `{}` to run (--redis-server)", args.redis_server))?;
    let run = id::generate(Kind::Run);
    let warm_until = Instant::now() + Duration::from_secs(1);
    let until = warm_until + duration;
    let clients: Vec<_> = (0..args.writers)
        .map(|_| {
            let (addr, run, batch, payload) = (server.addr.clone(), run.clone(), args.batch, args.payload_bytes);
            tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(&addr).await?;
                stream.set_nodelay(true)?;
                let (read, mut write) = stream.into_split();
                let mut read = BufReader::new(read);
                let (mut latencies, mut acked, mut line) = (Vec::new(), 0usize, String::new());
                loop {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    let mut commands = Vec::new();
                    for _ in 0..batch {
                        let body = serde_json::to_string(&message(&run, payload))?;
                        commands.extend_from_slice(
                            format!(
                                "*5\r\n$4\r\nXADD\r\n$6\r\nclutch\r\n$1\r\n*\r\n$1\r\nm\r\n${}\r\n{body}\r\n",
                                body.len()
                            )
                            .as_bytes(),
                        );
                    }
                    write.write_all(&commands).await?;
                    for _ in 0..batch {
                        // A bulk string: `$<len>`, then the entry id.
                        line.clear();
                        read.read_line(&mut line).await?;
                        if !line.starts_with('$') {
                            bail!("XADD answered {line:?}");
                        }
                        line.clear();
                        read.read_line(&mut line).await?;
                    }
                    if now >= warm_until {
                        latencies.push(now.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        acked += batch;
                    }
                }
                Ok::<_, anyhow::Error>((latencies, acked))
            })
        })
        .collect();
    let (mut latencies, mut acked, mut failure) = (Vec::new(), 0, None);
    for client in clients {
        match client.await? {
            Ok((l, a)) => {
                latencies.extend(l);
                acked += a;
            }
            Err(e) => failure = Some(e),
        }
    }
    server.stop().await;
    let _ = std::fs::remove_dir_all(dir);
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Summary::new(latencies, acked, duration.as_secs_f64()))
}

/// The writer's commits, flushes and time per event: vetting, committing, flushing and applying, and
/// what that makes the events per second of one commit (with its flush).
fn commits(metrics: &clutch_core::metrics::Metrics) -> String {
    let (commit, sync, both) = (&metrics.commit, &metrics.sync, &metrics.commit_and_sync);
    let appended = metrics.appended.load(std::sync::atomic::Ordering::Relaxed).max(1) as f64;
    let per_event = |h: &clutch_core::metrics::Histogram| h.sum() * 1e6 / appended;
    let (vet, apply) = (per_event(&metrics.vet), per_event(&metrics.apply));
    let store = per_event(commit) + per_event(sync) + per_event(both);
    let mut line = format!(
        "{} commits ({:.2} ms mean), {} flushes ({:.2} ms mean)",
        commit.count(),
        commit.mean_ms(),
        sync.count(),
        sync.mean_ms()
    );
    if both.count() > 0 {
        line += &format!(", {} committed and flushed in one call ({:.2} ms mean)", both.count(), both.mean_ms());
    }
    line += &format!(
        "; the writer per event: vet {vet:.2} µs, commit {:.2} µs, flush {:.2} µs, apply {apply:.2} µs: {:.0} events/s of one commit with its flush",
        per_event(commit),
        per_event(sync) + per_event(both),
        1e6 / store.max(1e-9)
    );
    line
}

enum Cleanup {
    Dir(PathBuf),
    Schema(String, String),
}

impl Cleanup {
    async fn run(self) {
        match self {
            Cleanup::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Schema(url, schema) => {
                if let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                    tokio::spawn(conn);
                    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
                }
            }
        }
    }
}

/// Plain SQLite, same table and indexes, WAL + synchronous=FULL, one INSERT and COMMIT per row.
fn sqlite_anchor(path: &Path, duration: Duration, payload: usize) -> anyhow::Result<Summary> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(clutch_store_sqlite::EVENTS_SCHEMA)?;
    let run = id::generate(Kind::Run);
    let body = message(&run, payload).to_string();
    let mut stmt = conn.prepare(
        "INSERT INTO events (id, run_id, thread_id, task_id, from_agent, type, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let (mut latencies, mut count) = (Vec::new(), 0);
    let started = Instant::now();
    while started.elapsed() < duration {
        let t = Instant::now();
        conn.execute_batch("BEGIN")?;
        stmt.execute(rusqlite::params![
            id::generate(Kind::Message),
            run,
            id::generate(Kind::Thread),
            id::generate(Kind::Task),
            "agent:bench",
            "task.progress",
            body
        ])?;
        conn.execute_batch("COMMIT")?;
        latencies.push(t.elapsed().as_micros() as u32);
        count += 1;
    }
    Ok(Summary::new(latencies, count, started.elapsed().as_secs_f64()))
}

/// Plain PostgreSQL, same table, one autocommitted INSERT per row with synchronous_commit=on.
async fn pg_anchor(url: &str, schema: &str, duration: Duration, payload: usize) -> anyhow::Result<Summary> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .with_context(|| "cannot connect to PostgreSQL for the anchor".to_string())?;
    tokio::spawn(conn);
    let anchor_schema = format!("{schema}_anchor");
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {anchor_schema}; SET search_path TO {anchor_schema}; SET synchronous_commit = on;
             CREATE TABLE events (seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL,
               thread_id TEXT NOT NULL, task_id TEXT NOT NULL, from_agent TEXT NOT NULL, type TEXT NOT NULL,
               idempotency_key TEXT, body TEXT NOT NULL);
             CREATE INDEX ON events (run_id, seq); CREATE INDEX ON events (thread_id, seq);
             CREATE INDEX ON events (task_id, seq); CREATE INDEX ON events (from_agent, seq);
             CREATE INDEX ON events (type, seq);"
        ))
        .await?;
    let run = id::generate(Kind::Run);
    let body = message(&run, payload).to_string();
    let stmt = client
        .prepare(
            "INSERT INTO events (id, run_id, thread_id, task_id, from_agent, type, body) VALUES ($1,$2,$3,$4,$5,$6,$7)",
        )
        .await?;
    let (mut latencies, mut count) = (Vec::new(), 0);
    let started = Instant::now();
    while started.elapsed() < duration {
        let t = Instant::now();
        let (m, th, tk) = (id::generate(Kind::Message), id::generate(Kind::Thread), id::generate(Kind::Task));
        client.execute(&stmt, &[&m, &run, &th, &tk, &"agent:bench", &"task.progress", &body]).await?;
        latencies.push(t.elapsed().as_micros() as u32);
        count += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    client.batch_execute(&format!("DROP SCHEMA {anchor_schema} CASCADE")).await?;
    Ok(Summary::new(latencies, count, elapsed))
}

/// What a filled replay store holds, recorded beside it so later runs reuse it.
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct ReplayFixture {
    events: u64,
    run_events: u64,
    run_id: String,
}

async fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    if args.run_events == 0 || args.run_events > args.events {
        bail!("--run-events must be between 1 and --events");
    }
    let fixture_path = args.data_dir.join("bench-replay.json");
    let existing: Option<ReplayFixture> =
        std::fs::read(&fixture_path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let fixture = match existing {
        Some(f) if f.events == args.events && f.run_events == args.run_events => f,
        _ => {
            let _ = std::fs::remove_dir_all(&args.data_dir);
            fill_replay_store(&args).await?
        }
    };
    std::fs::write(&fixture_path, serde_json::to_vec(&fixture)?)?;

    let store = clutch_store_sqlite::Store::open(&args.data_dir)?;
    let db_path = store.path().to_path_buf();
    let daemon = Daemon::start(Arc::new(store)).await?;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/runs/{}/events", daemon.url, fixture.run_id);
    let mut rounds = Vec::new();
    for _ in 0..args.rounds.max(1) {
        rounds.push(replay_once(&http, &url, fixture.run_events).await?);
    }
    daemon.stop().await;

    let anchor = {
        let (path, run, n) = (db_path.clone(), fixture.run_id.clone(), fixture.run_events);
        tokio::task::spawn_blocking(move || select_anchor(&path, &run, n)).await??
    };
    rounds.sort_by(|a, b| a.1.total_cmp(&b.1));
    let best = rounds[0];
    let median = rounds[rounds.len() / 2];
    let rate = |r: (f64, f64)| fixture.run_events as f64 / r.1;
    println!(
        "replay of one run ({} events) out of {} through GET /v1/runs/{{id}}/events (NDJSON), {} rounds",
        thousands(fixture.run_events),
        thousands(fixture.events),
        rounds.len()
    );
    println!(
        "  clutch   best {:>10} events/s, median {:>10} events/s   first event in {:.2} ms (best) / {:.2} ms (median)",
        thousands(rate(best) as u64),
        thousands(rate(median) as u64),
        rounds.iter().map(|r| r.0).fold(f64::MAX, f64::min) * 1000.0,
        {
            let mut firsts: Vec<f64> = rounds.iter().map(|r| r.0).collect();
            firsts.sort_by(f64::total_cmp);
            firsts[firsts.len() / 2] * 1000.0
        }
    );
    println!(
        "  anchor   {:>10} rows/s   plain SQLite select loop (pages of 2000 by run_id, seq) on the same file",
        thousands(anchor as u64)
    );
    println!("  ratio    {:.2}× the anchor", rate(median) / anchor);
    Ok(())
}

/// One replay: (seconds to the first complete event line, seconds to the last).
async fn replay_once(http: &reqwest::Client, url: &str, expected: u64) -> anyhow::Result<(f64, f64)> {
    use futures_util::StreamExt;
    let started = Instant::now();
    let response = http.get(url).send().await?;
    if !response.status().is_success() {
        bail!("replay failed: {}", response.status());
    }
    let mut body = response.bytes_stream();
    let (mut lines, mut first) = (0u64, None);
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        let n = chunk.iter().filter(|b| **b == b'\n').count() as u64;
        if n > 0 && first.is_none() {
            first = Some(started.elapsed().as_secs_f64());
        }
        lines += n;
    }
    if lines != expected {
        bail!("replay returned {lines} events, expected {expected}");
    }
    Ok((first.unwrap_or(0.0), started.elapsed().as_secs_f64()))
}

fn select_anchor(path: &Path, run: &str, expected: u64) -> anyhow::Result<f64> {
    let conn = rusqlite::Connection::open(path)?;
    // `indexed` is the condition of the store's partial index by run: SQLite uses it only when stated.
    let mut stmt = conn
        .prepare("SELECT seq, body FROM events WHERE indexed AND run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT 2000")?;
    let started = Instant::now();
    let (mut after, mut count, mut bytes) = (0i64, 0u64, 0usize);
    loop {
        let mut rows = stmt.query(rusqlite::params![run, after])?;
        let mut page = 0;
        while let Some(row) = rows.next()? {
            after = row.get(0)?;
            let body: String = row.get(1)?;
            bytes += body.len();
            page += 1;
        }
        count += page;
        if page < 2000 {
            break;
        }
    }
    if count != expected || bytes == 0 {
        bail!("anchor read {count} rows, expected {expected}");
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

async fn fill_replay_store(args: &ReplayArgs) -> anyhow::Result<ReplayFixture> {
    let store = clutch_store_sqlite::Store::open(&args.data_dir)?;
    let run_id = id::generate(Kind::Run);
    let every = args.events / args.run_events;
    let defaults = Defaults { now: SystemTime::now() };
    eprintln!("bench: filling {} with {} events (once; later runs reuse it) …", args.data_dir.display(), args.events);
    let started = Instant::now();
    let (mut written, mut in_run) = (0u64, 0u64);
    while written < args.events {
        let n = (args.events - written).min(5000);
        let batch = (0..n)
            .map(|i| {
                let ours = (written + i) % every == 0 && in_run < args.run_events;
                if ours {
                    in_run += 1;
                }
                let run = if ours { run_id.clone() } else { id::generate(Kind::Run) };
                validate::message(&message(&run, 300), &defaults).map_err(|p| anyhow::anyhow!("{p}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for outcome in store.append_messages(&batch).await? {
            outcome?;
        }
        written += n;
        if written % 100_000 == 0 {
            eprintln!(
                "bench:   {} / {} ({:.0} s)",
                thousands(written),
                thousands(args.events),
                started.elapsed().as_secs_f64()
            );
        }
    }
    store.close().await;
    if in_run != args.run_events {
        bail!("filled {in_run} run events, wanted {}", args.run_events);
    }
    Ok(ReplayFixture { events: args.events, run_events: args.run_events, run_id })
}

async fn startup(args: StartupArgs) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let exe = std::env::current_exe().context("cannot find the clutch executable")?;
    let mut times = Vec::new();
    let mut rss = Vec::new();
    // The first start creates the store if needed and warms the page cache; it is not counted.
    for round in 0..=args.rounds {
        let started = Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&args.data_dir)
            .env("CLUTCH_LOG", "warn")
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if line.starts_with("clutch: listening on ") {
                    return Ok::<_, std::io::Error>(true);
                }
            }
            Ok(false)
        })
        .await;
        if !matches!(ready, Ok(Ok(true))) {
            bail!("the daemon did not become ready");
        }
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pid = child.id().context("daemon has no pid")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
        if round > 0 {
            times.push(elapsed);
            rss.push(kb / 1024.0);
        }
    }
    times.sort_by(f64::total_cmp);
    rss.sort_by(f64::total_cmp);
    println!("startup of `clutch serve` on {} ({} rounds)", args.data_dir.display(), times.len());
    println!(
        "  start to ready   median {:.1} ms, worst {:.1} ms (process spawn to the listening line)",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    println!(
        "  idle RSS         median {:.1} MB, worst {:.1} MB (2 s after ready)",
        rss[rss.len() / 2],
        rss[rss.len() - 1]
    );
    Ok(())
}
