//! `clutch bench llm`: built-in LLM agents against the fake provider (in this process, answering
//! over real HTTP and SSE). The runtime's own time per turn (from a model's answer leaving the
//! provider to the next request reaching it, or to the task's result being stored: recording the
//! call, running `emit`, building the next request), p50/p99; then tasks/s with N agents working
//! one task each at a time while the provider takes 200 ms per answer (the ideal is N / 0.2 s); and
//! the memory of an idle agent. What `positions` shares with it (the fake as a provider, tasks'
//! outcomes handed to their waiters) is here too.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::Args;
use clutch_app::{App, face};
use clutch_core::Engine;
use clutch_proto::id::{self, Kind as IdKind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use clutch_runtime::fake::{Fake, Options, Reply};
use clutch_runtime::{agent, provider};
use clutch_store::Filter;
use serde_json::json;
use tokio::sync::oneshot;

use super::Summary;

#[derive(Debug, Args)]
pub struct LlmArgs {
    /// Agents in the throughput run (each works one task at a time).
    #[arg(long, default_value_t = 200)]
    pub agents: usize,
    /// The provider's time per answer in the throughput run, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub latency_ms: u64,
    /// Seconds of the throughput run (after two seconds of warm-up).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Tasks (of two turns each) for the per-turn overhead.
    #[arg(long, default_value_t = 500)]
    pub tasks: usize,
    /// Where the SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
}

/// The fake as a provider, streaming, retried twice, unpaced.
pub(super) fn provider(fake: &Fake) -> provider::Config {
    provider::Config {
        name: "fake".into(),
        kind: provider::Kind::Anthropic,
        base_url: Some(fake.url.clone()),
        api_key_env: None,
        model: "fake-model-1".into(),
        max_tokens: 256,
        temperature: None,
        stream: true,
        timeout_ms: 60_000,
        idle_timeout_ms: 60_000,
        max_retries: 2,
        retry_base_ms: 100,
        requests_per_minute: None,
        tokens_per_minute: None,
        prices: Default::default(),
    }
}

fn agents(n: usize) -> Vec<agent::Config> {
    (0..n)
        .map(|i| agent::Config {
            name: format!("bench-{i}"),
            provider: "fake".into(),
            model: None,
            description: None,
            system: "You answer briefly.".into(),
            capabilities: vec!["skill:bench".into()],
            tools: Vec::new(),
            max_turns: 4,
            max_concurrency: 1,
            task_timeout_ms: 600_000,
            max_tokens: None,
            temperature: None,
            budget: None,
            task_budget: None,
        })
        .collect()
}

async fn daemon(dir: &std::path::Path, fake: &Fake, n: usize) -> anyhow::Result<App> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let store = clutch_store_sqlite::Store::open(dir).context("cannot open the SQLite store")?;
    let runtime = clutch_runtime::Runtime::new(vec![provider(fake)], agents(n))?;
    let app = App::builder(Arc::new(store)).face(face::Runtime::new(runtime)).build().await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.engine.agents().len() < n {
        if Instant::now() > deadline {
            bail!("only {} of {n} agents registered", app.engine.agents().len());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(app)
}

/// Tasks' outcomes (`task.result` or `task.error`), handed to whoever waits for each, by task id.
pub(super) type Waiting = Arc<Mutex<HashMap<String, oneshot::Sender<Message>>>>;

pub(super) async fn outcomes(app: &App) -> anyhow::Result<Waiting> {
    let mut results =
        app.log.subscribe(Filter { kind: Some(MessageType::TaskResult), ..Filter::default() }, None).await?;
    let mut errors =
        app.log.subscribe(Filter { kind: Some(MessageType::TaskError), ..Filter::default() }, None).await?;
    let waiting: Waiting = Arc::default();
    let w = waiting.clone();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                e = results.next() => e,
                e = errors.next() => e,
            };
            let Ok(event) = event else { return };
            let Ok(m) = event.message() else { continue };
            if let Some(tx) = w.lock().unwrap_or_else(|e| e.into_inner()).remove(&m.task_id) {
                let _ = tx.send(m);
            }
        }
    });
    Ok(waiting)
}

/// Tasks submitted, and their results handed to whoever waits.
struct Asker {
    engine: Engine,
    waiting: Waiting,
}

impl Asker {
    async fn new(app: &App) -> anyhow::Result<Asker> {
        Ok(Asker { engine: app.engine.clone(), waiting: outcomes(app).await? })
    }

    /// A task for `skill:bench`, and its answer.
    async fn ask(&self, text: &str) -> anyhow::Result<Message> {
        let task = id::generate(IdKind::Task);
        let m = json!({
            "run_id": id::generate(IdKind::Run), "thread_id": id::generate(IdKind::Thread), "task_id": task,
            "from": {"agent_id": "agent:bench-client"}, "to": [{"agent_id": "agent:orchestrator"}],
            "type": "task.request", "requires": ["skill:bench"], "payload": {"text": text},
        });
        let m = validate::message(&m, &Defaults { now: SystemTime::now() }).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).insert(task, tx);
        match self.engine.submit(vec![m]).await?.pop() {
            Some(Ok(_)) => {}
            other => bail!("the task was refused: {other:?}"),
        }
        let answer = tokio::time::timeout(Duration::from_secs(120), rx).await.context("no answer in 120 s")??;
        if answer.kind != MessageType::TaskResult {
            bail!("the task failed: {}", serde_json::Value::Object(answer.payload));
        }
        Ok(answer)
    }
}

/// The mean time between the steps of a task, from its events' timestamps: asked → routed →
/// accepted → the model's answer recorded → answered.
async fn stages(app: &App) -> anyhow::Result<String> {
    let mut steps: HashMap<String, [Option<i64>; 5]> = HashMap::new();
    let mut after = 0;
    loop {
        let events = app.log.read(&Filter::default(), after, 5000).await?;
        let Some(last) = events.last() else { break };
        after = last.seq;
        for event in events {
            let Ok(m) = event.message() else { continue };
            let Some(ms) = clutch_core::clock::ts_ms(&m.ts) else { continue };
            let slot = match (m.kind, m.payload_type.as_deref()) {
                (MessageType::TaskRequest, _) if m.from.agent_id == "agent:bench-client" => 0,
                (MessageType::RoutingDecision, _) => 1,
                (MessageType::TaskAccept, _) => 2,
                (MessageType::TaskProgress, Some(clutch_runtime::work::LLM_CALL_PAYLOAD)) => 3,
                (MessageType::TaskResult, _) => 4,
                _ => continue,
            };
            steps.entry(m.task_id.clone()).or_default()[slot].get_or_insert(ms);
        }
    }
    let names = ["routed", "accepted", "recorded", "answered"];
    let mut sums = [0i64; 4];
    let mut n = 0;
    for s in steps.values() {
        let Some(all) = s.iter().copied().collect::<Option<Vec<i64>>>() else { continue };
        n += 1;
        for i in 0..4 {
            sums[i] += all[i + 1] - all[i];
        }
    }
    let n = n.max(1) as f64;
    Ok(names
        .iter()
        .zip(sums)
        .map(|(name, sum)| format!("{name} +{:.1}", sum as f64 / n))
        .collect::<Vec<_>>()
        .join(", "))
}

fn rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches(" kB").trim().parse().ok()
}

pub async fn run(args: LlmArgs) -> anyhow::Result<()> {
    if args.agents == 0 || args.tasks == 0 {
        bail!("--agents and --tasks must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let root = args.dir.join(format!("llm-{stamp}"));

    // 1. The runtime's own time per turn: each task is two turns (emit, then an answer) against a
    //    provider that answers at once.
    let fake = Fake::start(Options::script(|body, _| {
        if body.to_string().contains("tool_result") {
            Reply::Text("done".into())
        } else {
            Reply::Tool { text: String::new(), name: "emit".into(), input: json!({"message": "working"}) }
        }
    }))
    .await?;
    let app = daemon(&root.join("turns"), &fake, 1).await?;
    let asker = Asker::new(&app).await?;
    for i in 0..20 {
        asker.ask(&format!("warm-up {i}")).await?;
    }
    let skip = fake.count();
    let mut micros = Vec::with_capacity(args.tasks * 2);
    let began = Instant::now();
    for i in 0..args.tasks {
        let answer = asker.ask(&format!("task {i}")).await?;
        let received = fake.received();
        let (first, second) = (&received[received.len() - 2], &received[received.len() - 1]);
        let result_at = Instant::now();
        // Turn 1: its answer left → turn 2's request arrived. Turn 2: its answer left → the result
        // reached this client (the store's commit included).
        if let (Some(a1), Some(a2)) = (first.answered, second.answered) {
            micros.push(second.at.saturating_duration_since(a1).as_micros() as u32);
            micros.push(result_at.saturating_duration_since(a2).as_micros() as u32);
        }
        drop(answer);
    }
    let turns = Summary::new(micros, args.tasks * 2, began.elapsed().as_secs_f64());
    app.stop().await?;
    println!("the runtime's own time per turn, {} tasks of 2 turns ({} model calls):", args.tasks, fake.count() - skip);
    println!("{}", turns.line("  turn    ", "turns"));

    // 2. Memory of idle agents: a daemon with none, then one with N.
    let idle = Fake::start(Options::script(|_, _| Reply::Text("done".into()))).await?;
    let app = daemon(&root.join("none"), &idle, 0).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kb();
    app.stop().await?;

    // 3. Throughput: N agents, a provider taking `latency_ms` per answer, N clients each waiting for
    //    its task's answer before asking again.
    let latency = Duration::from_millis(args.latency_ms);
    let slow =
        Fake::start(Options::script(move |_, _| Reply::Slow(latency, Box::new(Reply::Text("done".into()))))).await?;
    let app = daemon(&root.join("throughput"), &slow, args.agents).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_kb();
    let asker = Arc::new(Asker::new(&app).await?);
    let measure = Duration::from_secs(args.duration);
    let started = Instant::now();
    let warm = Duration::from_secs(2);
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..args.agents {
        let asker = asker.clone();
        clients.spawn(async move {
            let mut micros = Vec::new();
            let mut n = 0;
            while started.elapsed() < warm + measure {
                let t = Instant::now();
                asker.ask(&format!("client {c} task {n}")).await?;
                n += 1;
                if t.duration_since(started) >= warm && t.elapsed() + t.duration_since(started) <= warm + measure {
                    micros.push(t.elapsed().as_micros() as u32);
                }
            }
            anyhow::Ok(micros)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = clients.join_next().await {
        all.extend(done??);
    }
    let count = all.len();
    let throughput = Summary::new(all, count, measure.as_secs_f64());
    let stages = stages(&app).await?;
    app.stop().await?;
    let ideal = args.agents as f64 / latency.as_secs_f64();
    println!(
        "throughput, {} agents, the provider answering after {} ms, {} s:",
        args.agents, args.latency_ms, args.duration
    );
    println!("{}", throughput.line("  tasks   ", "tasks"));
    println!(
        "  ideal    {ideal:>10.0} tasks/s ({} / {:.1} s): {:.1}% of it",
        args.agents,
        latency.as_secs_f64(),
        throughput.rate() / ideal * 100.0
    );
    println!("  where a task's time goes (mean ms, from the events' timestamps): {stages}");
    if let (Some(before), Some(after)) = (before, after) {
        println!(
            "memory: {} MB with no agents, {} MB with {} idle agents: {:.1} KB per idle agent",
            before / 1024,
            after / 1024,
            args.agents,
            after.saturating_sub(before) as f64 / args.agents as f64
        );
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
