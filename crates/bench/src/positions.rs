//! `clutch bench positions`: mirror sessions against the fake provider (in this process, answering
//! over real HTTP and SSE after `--latency-ms`). N clients each invoke a mirror and wait for its
//! outcome before invoking the next; a mirror is two rounds of two parallel model calls (the
//! analyses, then the comparisons), so its ideal time is 2 × the latency. Reports sessions/s against
//! that ideal, a session's time p50/p99, and the orchestration overhead: a session's time beyond the
//! ideal, per session and per event it writes (records, turns, their answers, messages).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::Args;
use clutch_app::{App, face};
use clutch_core::session::Invocation;
use clutch_proto::MessageType;
use clutch_runtime::fake::{Fake, Options, Reply};
use clutch_runtime::positions;
use clutch_store::Filter;
use tokio::sync::oneshot;

use super::{Summary, llm};

#[derive(Debug, Args)]
pub struct PositionsArgs {
    /// Concurrent sessions (each client invokes its next mirror when the last one ended).
    #[arg(long, default_value_t = 50)]
    pub sessions: usize,
    /// The provider's time per answer, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub latency_ms: u64,
    /// Seconds to measure (after a warm-up of one session per client).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Where the SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
}

/// One mirror session, start to outcome: its time and its run's id.
async fn session(app: &App, waiting: &llm::Waiting, n: usize) -> anyhow::Result<(Duration, String)> {
    let invocation =
        Invocation { input: serde_json::json!(format!("Is {n} × 7 = {}?", n * 7)), ..Invocation::default() };
    let began = Instant::now();
    let (tx, rx) = oneshot::channel();
    // The task id is known once invoked; the runner answers many writes later, so nothing is missed.
    let invoked = app.engine.position_invoke("user:bench", "mirror", invocation).await?;
    waiting.lock().unwrap_or_else(|e| e.into_inner()).insert(invoked.task_id.clone(), tx);
    let outcome = tokio::time::timeout(Duration::from_secs(120), rx).await.context("no outcome in 120 s")??;
    if outcome.kind != MessageType::TaskResult {
        bail!("a session failed: {}", serde_json::Value::Object(outcome.payload));
    }
    Ok((began.elapsed(), invoked.session_id))
}

pub async fn run(args: PositionsArgs) -> anyhow::Result<()> {
    if args.sessions == 0 {
        bail!("--sessions must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("positions-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let latency = Duration::from_millis(args.latency_ms);
    let fake = Fake::start(Options::script(move |body, _| {
        let reply = if body.to_string().contains("Compare your analysis") {
            let input = serde_json::json!({"verdict": "CONSENSUS", "points": ["the same"]});
            Reply::Tool { text: String::new(), name: "answer".into(), input }
        } else {
            Reply::Text("42".into())
        };
        Reply::Slow(latency, Box::new(reply))
    }))
    .await?;
    let store = clutch_store_sqlite::Store::open(&dir).context("cannot open the SQLite store")?;
    let runtime = clutch_runtime::Runtime::new(vec![llm::provider(&fake)], Vec::new())?;
    let options = positions::Options { provider: Some("fake".into()), ..positions::Options::default() };
    let app =
        App::builder(Arc::new(store)).face(face::Runtime::new(runtime)).face(face::Positions(options)).build().await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.engine.positions().is_empty() {
        if Instant::now() > deadline {
            bail!("the positions runner did not start");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waiting = llm::outcomes(&app).await?;
    let app = Arc::new(app);

    // Warm-up: one session per client, all at once.
    let mut warm = tokio::task::JoinSet::new();
    for n in 0..args.sessions {
        let (app, waiting) = (app.clone(), waiting.clone());
        warm.spawn(async move { session(&app, &waiting, n).await });
    }
    while let Some(done) = warm.join_next().await {
        done??;
    }

    let until = Instant::now() + Duration::from_secs(args.duration);
    let began = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..args.sessions {
        let (app, waiting) = (app.clone(), waiting.clone());
        clients.spawn(async move {
            let mut done = Vec::new();
            let mut n = c * 100_000;
            while Instant::now() < until {
                done.push(session(&app, &waiting, n).await?);
                n += 1;
            }
            anyhow::Ok(done)
        });
    }
    let mut times = Vec::new();
    let mut runs = Vec::new();
    while let Some(done) = clients.join_next().await {
        for (time, run) in done?? {
            times.push(time.as_micros() as u32);
            runs.push(run);
        }
    }
    let elapsed = began.elapsed().as_secs_f64();
    let count = times.len();
    let mean_ms = times.iter().map(|t| f64::from(*t)).sum::<f64>() / count.max(1) as f64 / 1000.0;
    let summary = Summary::new(times, count, elapsed);

    // Events each session wrote, from a sample of its runs.
    let mut events = 0usize;
    let sample: Vec<&String> = runs.iter().step_by((runs.len() / 50).max(1)).collect();
    for run in &sample {
        let filter = Filter { run_id: Some((*run).clone()), ..Filter::default() };
        events += app.log.read(&filter, 0, 10_000).await?.len();
    }
    let per_session = events as f64 / sample.len().max(1) as f64;
    let ideal_ms = 2.0 * args.latency_ms as f64;
    let overhead_ms = (mean_ms - ideal_ms).max(0.0);
    let ideal_rate = args.sessions as f64 / (ideal_ms / 1000.0);
    println!(
        "{} concurrent mirror sessions, provider answering after {} ms (ideal {:.0} ms a session, {:.1} sessions/s):",
        args.sessions, args.latency_ms, ideal_ms, ideal_rate
    );
    println!("{}", summary.line("  session ", "sessions"));
    println!(
        "  {:.1} sessions/s = {:.1}% of ideal; orchestration overhead {:.0} ms a session beyond 2 × {} ms, {:.0} events a session: {:.2} ms an event",
        count as f64 / elapsed,
        100.0 * count as f64 / elapsed / ideal_rate,
        overhead_ms,
        args.latency_ms,
        per_session,
        overhead_ms / per_session.max(1.0)
    );
    match Arc::try_unwrap(app) {
        Ok(app) => app.stop().await?,
        Err(_) => bail!("the daemon is still in use"),
    }
    Ok(())
}
