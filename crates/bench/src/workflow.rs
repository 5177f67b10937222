//! `clutch bench workflow`: durable workflow cycles under load. N agents each loop claim →
//! checkpoint → complete on the planned tasks of workflows, over MCP (each agent its own HTTP/1
//! connection POSTing 2026-07-28 `tools/call`s to `/mcp/worker`), the HTTP API or the engine in
//! process, against a daemon in this process on a fresh SQLite store; beside a plain durable insert
//! loop on the same disk, measured in the same run. At the end every task is checked through the
//! engine: completed exactly once, by the agent that claimed it, with its one checkpoint.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use axum::body::Bytes;
use clap::{Args, ValueEnum};
use clutch_core::Engine;
use clutch_core::workflow::api::{self, CheckpointType, TaskStatus};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::{Daemon, Summary, http1, thousands};

#[derive(Debug, Args)]
pub struct WorkflowArgs {
    /// Agents working, each in its own loop (and over MCP or HTTP, on its own connection).
    #[arg(long, default_value_t = 64)]
    pub agents: usize,
    /// Seconds to measure (after one second of warm-up).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// How agents reach the daemon: `mcp` (tools/call on /mcp/worker), `http` (the /v1 API) or
    /// `core` (the engine's methods, in process).
    #[arg(long, value_enum, default_value_t = Transport::Mcp)]
    pub transport: Transport,
    /// How an agent finds a task: `sharded` (the driver deals each plan's task ids out to the agents
    /// in turn, so no two agents ever want the same task) or `next` (each asks workflow_next_tasks
    /// and claims one of the answer, as the seed's protocol does; a lost race is a retry).
    #[arg(long, value_enum, default_value_t = Claims::Sharded)]
    pub claims: Claims,
    /// Tasks per workflow plan; a new workflow is planned whenever the agents are about to run out.
    #[arg(long, default_value_t = 128)]
    pub plan_size: usize,
    /// Where the SQLite files go (the disk being measured).
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    Mcp,
    Http,
    Core,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Claims {
    Sharded,
    Next,
}

pub async fn run(args: WorkflowArgs) -> anyhow::Result<()> {
    if args.agents == 0 || args.plan_size == 0 || args.duration == 0 {
        bail!("--agents, --plan-size and --duration must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("workflow-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let anchor_seconds = args.duration.clamp(1, 5);
    eprintln!("bench: anchor: plain SQLite single-row durable insert loop for {anchor_seconds} s …");
    let anchor_path = dir.join("anchor.db");
    let anchor = tokio::task::spawn_blocking(move || {
        super::sqlite_anchor(&anchor_path, Duration::from_secs(anchor_seconds), 300)
    })
    .await??;
    let store = clutch_store_sqlite::Store::open(&dir.join("store")).context("cannot open the SQLite store")?;
    let daemon = Daemon::start(Arc::new(store)).await?;
    let outcome = measure(&args, &daemon).await;
    daemon.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    let (report, check) = outcome?;

    let how = match args.transport {
        Transport::Mcp => "over MCP (tools/call on /mcp/worker, 2026-07-28, one HTTP/1 connection each)",
        Transport::Http => "over the HTTP API (/v1/tasks/..., one HTTP/1 connection each)",
        Transport::Core => "through the engine's methods, in process",
    };
    let claims = match args.claims {
        Claims::Sharded => "task ids dealt out to the agents",
        Claims::Next => "tasks found with workflow_next_tasks",
    };
    println!(
        "workflow cycles (claim → checkpoint → complete): {} agents {how}, {claims}, plans of {} tasks, \
         SQLite (WAL, fdatasync before every acknowledgement) in {}",
        args.agents,
        thousands(args.plan_size as u64),
        dir.display()
    );
    println!(
        "{}   {} calls/s, {} lost claims",
        report.cycles.line("clutch", "tasks"),
        thousands((report.calls as f64 / report.cycles.seconds) as u64),
        thousands(report.lost)
    );
    println!("{}   (plain single-row durable insert loop, 1 writer, same disk)", anchor.line("anchor", "rows"));
    println!(
        "  ratio    {:.2}× the anchor; {:.1} events per task, {:.1} per commit, {:.1} per flush, {:.2} ms per flush",
        report.cycles.rate() / anchor.rate(),
        report.events as f64 / report.cycles.count.max(1) as f64,
        report.events as f64 / report.commits.max(1) as f64,
        report.events as f64 / report.flushes.max(1) as f64,
        report.flush_seconds / report.flushes.max(1) as f64 * 1000.0
    );
    println!("  check    {check}");
    Ok(())
}

/// What the measured window saw.
struct Report {
    cycles: Summary,
    calls: u64,
    lost: u64,
    events: u64,
    commits: u64,
    flushes: u64,
    flush_seconds: f64,
}

/// The log's counters at one moment.
struct Counters {
    events: u64,
    commits: u64,
    flushes: u64,
    flush_seconds: f64,
}

/// What one agent did over the whole run.
#[derive(Default)]
struct Tally {
    /// Every task it completed (warm-up and wind-down included), for the final check.
    completed: Vec<String>,
    /// Cycle latencies in microseconds, measured window only.
    micros: Vec<u32>,
    calls: u64,
    lost: u64,
}

/// Runs the agents for the warm-up and the measured window, then checks every task.
async fn measure(args: &WorkflowArgs, daemon: &Daemon) -> anyhow::Result<(Report, String)> {
    let engine = daemon.engine.clone();
    let names: Vec<String> = (0..args.agents).map(|i| format!("agent:bench-{i}")).collect();
    for name in &names {
        let card = json!({"agent_id": name, "capabilities": [], "meta": {"runtime": "bench"}});
        let card = clutch_proto::validate::agent_card(&card).map_err(|p| anyhow::anyhow!("{p}"))?;
        engine.register(&card).await?;
    }
    let target = http1::Target::new(&daemon.url)?;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let warm_until = started + Duration::from_secs(1);
    let until = warm_until + Duration::from_secs(args.duration);

    // The supply of tasks, and each agent's way to it.
    let (supply, feeds) = Supply::start(engine.clone(), args, stop.clone());
    let mut agents = Vec::with_capacity(args.agents);
    for ((i, name), feed) in names.iter().enumerate().zip(feeds) {
        let client = Client::connect(args.transport, &engine, &target).await?;
        let agent = Agent { name: name.clone(), index: i, client, feed, stop: stop.clone(), warm_until, until };
        agents.push(tokio::spawn(agent.run()));
    }

    let metrics = daemon.log.metrics();
    let counters = || Counters {
        events: metrics.appended.load(Ordering::Relaxed),
        commits: metrics.batches.load(Ordering::Relaxed),
        // A batch committed and flushed in one step counts as a flush (its time includes the commit).
        flushes: metrics.sync.count() + metrics.commit_and_sync.count(),
        flush_seconds: metrics.sync.sum() + metrics.commit_and_sync.sum(),
    };
    tokio::time::sleep_until(warm_until.into()).await;
    let (from, cpu_from) = (counters(), super::process_cpu());
    tokio::time::sleep_until(until.into()).await;
    let (to, cpu_to) = (counters(), super::process_cpu());
    stop.store(true, Ordering::Relaxed);

    let mut tallies = Vec::with_capacity(agents.len());
    for agent in agents {
        tallies.push(agent.await??);
    }
    let workflows = supply.stop().await?;
    let (calls, lost) = tallies.iter().fold((0, 0), |(c, l), t| (c + t.calls, l + t.lost));
    let micros: Vec<u32> = tallies.iter().flat_map(|t| t.micros.iter().copied()).collect();
    let count = micros.len();
    let report = Report {
        cycles: Summary::new(micros, count, (until - warm_until).as_secs_f64())
            .with_cpu(cpu_to.zip(cpu_from).map(|(to, from)| to.saturating_sub(from))),
        calls,
        lost,
        events: to.events - from.events,
        commits: to.commits - from.commits,
        flushes: to.flushes - from.flushes,
        flush_seconds: to.flush_seconds - from.flush_seconds,
    };
    let check = check(&engine, &names, &tallies, &workflows)?;
    Ok((report, check))
}

/// Every task the agents say they completed is completed in the engine, by that agent, with one
/// checkpoint, and no other task is: none twice, none lost, none left held.
fn check(engine: &Engine, names: &[String], tallies: &[Tally], workflows: &[String]) -> anyhow::Result<String> {
    let mut reported: HashMap<&str, &str> = HashMap::new();
    for (name, tally) in names.iter().zip(tallies) {
        for task in &tally.completed {
            if let Some(other) = reported.insert(task, name) {
                bail!("check failed: task {task} was completed by both {other} and {name}");
            }
        }
    }
    let (mut completed, mut pending, mut held) = (0u64, 0u64, 0u64);
    for workflow in workflows {
        for task in engine.workflow_get(workflow)?.tasks {
            match task.status {
                TaskStatus::Completed => {
                    completed += 1;
                    let Some(agent) = reported.get(task.id.as_str()) else {
                        bail!("check failed: task {} is completed but no agent completed it", task.id);
                    };
                    if task.agent_id.as_deref() != Some(*agent) {
                        bail!(
                            "check failed: task {} was completed by {agent}, the engine says {:?}",
                            task.id,
                            task.agent_id
                        );
                    }
                    let checkpoints = engine.checkpoints(&task.id)?;
                    if checkpoints.len() != 1 || checkpoints[0].agent_id != *agent {
                        bail!("check failed: task {} has checkpoints {checkpoints:?}", task.id);
                    }
                }
                TaskStatus::Pending => pending += 1,
                other => {
                    held += 1;
                    tracing::error!(task = %task.id, status = other.as_str(), "a task was left held");
                }
            }
        }
    }
    if completed != reported.len() as u64 || held > 0 {
        bail!(
            "check failed: agents completed {} tasks, the engine has {completed} completed and {held} held",
            reported.len()
        );
    }
    Ok(format!(
        "{} tasks completed, each exactly once, by the agent that claimed it, with its checkpoint \
         (engine: {} completed, 0 held, {} still pending, in {} workflows)",
        thousands(completed),
        thousands(completed),
        thousands(pending),
        workflows.len()
    ))
}

/// Where an agent gets its next task.
enum Feed {
    /// Its share of every plan, dealt by the supply.
    Dealt(mpsc::Receiver<String>),
    /// The open workflows; it asks `workflow_next_tasks` and tells the supply when one has run dry.
    Next { open: watch::Receiver<VecDeque<String>>, dry: mpsc::UnboundedSender<String> },
}

/// Plans workflows as fast as the agents need them.
struct Supply {
    task: tokio::task::JoinHandle<anyhow::Result<Vec<String>>>,
}

impl Supply {
    fn start(engine: Engine, args: &WorkflowArgs, stop: Arc<AtomicBool>) -> (Supply, Vec<Feed>) {
        let plan_size = args.plan_size;
        match args.claims {
            Claims::Sharded => {
                // Each agent's queue holds about two plans' worth of its share.
                let depth = (2 * plan_size).div_ceil(args.agents).max(2);
                let (senders, feeds): (Vec<_>, Vec<_>) = (0..args.agents)
                    .map(|_| {
                        let (tx, rx) = mpsc::channel(depth);
                        (tx, Feed::Dealt(rx))
                    })
                    .unzip();
                let task = tokio::spawn(async move {
                    let mut workflows = Vec::new();
                    let mut next = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        let (workflow, tasks) = plan(&engine, workflows.len(), plan_size).await?;
                        workflows.push(workflow);
                        for task in tasks {
                            // A full queue waits: the agents are not running out yet.
                            if senders[next % senders.len()].send(task).await.is_err() {
                                return Ok(workflows);
                            }
                            next += 1;
                        }
                    }
                    Ok(workflows)
                });
                (Supply { task }, feeds)
            }
            Claims::Next => {
                let (open_tx, open_rx) = watch::channel(VecDeque::new());
                let (dry_tx, mut dry_rx) = mpsc::unbounded_channel::<String>();
                let feeds =
                    (0..args.agents).map(|_| Feed::Next { open: open_rx.clone(), dry: dry_tx.clone() }).collect();
                let task = tokio::spawn(async move {
                    let mut workflows = Vec::new();
                    // Two workflows open at a time: one being emptied, one ready.
                    loop {
                        while open_tx.borrow().len() < 2 && !stop.load(Ordering::Relaxed) {
                            let (workflow, _) = plan(&engine, workflows.len(), plan_size).await?;
                            workflows.push(workflow.clone());
                            open_tx.send_modify(|open| open.push_back(workflow));
                        }
                        let dry = tokio::select! {
                            dry = dry_rx.recv() => dry,
                            () = tokio::time::sleep(Duration::from_millis(100)) => None,
                        };
                        if let Some(dry) = dry {
                            open_tx.send_if_modified(|open| {
                                let before = open.len();
                                open.retain(|w| *w != dry);
                                open.len() != before
                            });
                        }
                        if stop.load(Ordering::Relaxed) {
                            return Ok(workflows);
                        }
                    }
                });
                (Supply { task }, feeds)
            }
        }
    }

    /// Stops planning; answers every workflow planned.
    async fn stop(self) -> anyhow::Result<Vec<String>> {
        self.task.await?
    }
}

/// A new workflow with `size` independent tasks: its id and its task ids.
async fn plan(engine: &Engine, n: usize, size: usize) -> anyhow::Result<(String, Vec<String>)> {
    let workflow =
        engine.workflow_create(api::CreateWorkflow { name: format!("bench {n}"), ..Default::default() }).await?;
    let tasks = (0..size)
        .map(|i| api::PlanTask { name: format!("t{i}"), description: format!("step {i}"), ..Default::default() })
        .collect();
    let plan = engine
        .workflow_set_plan(api::SetPlan { workflow_id: workflow.id.clone(), tasks, ..Default::default() })
        .await?;
    Ok((workflow.id, plan.tasks.into_iter().map(|t| t.id).collect()))
}

/// One agent's loop.
struct Agent {
    name: String,
    index: usize,
    client: Client,
    feed: Feed,
    stop: Arc<AtomicBool>,
    warm_until: Instant,
    until: Instant,
}

impl Agent {
    async fn run(mut self) -> anyhow::Result<Tally> {
        let mut tally = Tally::default();
        while !self.stop.load(Ordering::Relaxed) {
            let Some(task) = self.find(&mut tally).await? else { break };
            let at = Instant::now();
            let measured = at >= self.warm_until && at < self.until;
            if !self.client.claim(&self.name, &task).await? {
                // Another agent was first: a retry, not a task.
                if measured {
                    tally.calls += 1;
                    tally.lost += 1;
                }
                continue;
            }
            self.client.checkpoint(&self.name, &task).await?;
            self.client.complete(&self.name, &task).await?;
            let done = Instant::now();
            if measured && done <= self.until {
                tally.calls += 3;
                tally.micros.push(done.duration_since(at).as_micros().min(u32::MAX as u128) as u32);
            }
            tally.completed.push(task);
        }
        Ok(tally)
    }

    /// The next task to claim; `None` once stopped.
    async fn find(&mut self, tally: &mut Tally) -> anyhow::Result<Option<String>> {
        match &mut self.feed {
            Feed::Dealt(queue) => Ok(queue.recv().await),
            Feed::Next { open, dry } => loop {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(None);
                }
                let workflow = open.borrow().front().cloned();
                let Some(workflow) = workflow else {
                    // Nothing open yet: wait for the supply (bounded, so a stop is seen).
                    let _ = tokio::time::timeout(Duration::from_millis(100), open.changed()).await;
                    continue;
                };
                let at = Instant::now();
                let tasks = self.client.next(&workflow, 64).await?;
                if at >= self.warm_until && at < self.until {
                    tally.calls += 1;
                }
                if tasks.is_empty() {
                    let _ = dry.send(workflow);
                    let _ = tokio::time::timeout(Duration::from_millis(100), open.changed()).await;
                    continue;
                }
                // Agents start at different places in the same answer, to collide less.
                return Ok(Some(tasks[(self.index * 7) % tasks.len()].clone()));
            },
        }
    }
}

/// An agent's connection to the daemon.
enum Client {
    Core(Engine),
    Http { conn: http1::Connection, target: http1::Target },
    Mcp { conn: http1::Connection, tools: Box<McpTools>, id: u64 },
}

/// The prebuilt `tools/call` endpoints, one per tool (`Mcp-Name` differs).
struct McpTools {
    claim: http1::Endpoint,
    checkpoint: http1::Endpoint,
    status: http1::Endpoint,
    next: http1::Endpoint,
}

impl Client {
    async fn connect(transport: Transport, engine: &Engine, target: &http1::Target) -> anyhow::Result<Client> {
        Ok(match transport {
            Transport::Core => Client::Core(engine.clone()),
            Transport::Http => Client::Http { conn: target.connect().await?, target: target.clone() },
            Transport::Mcp => {
                let tool = |name: &str| {
                    target.post(
                        clutch_mcp::Profile::Worker.path(),
                        &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", name)],
                    )
                };
                let tools = Box::new(McpTools {
                    claim: tool("task_claim")?,
                    checkpoint: tool("checkpoint_add")?,
                    status: tool("task_update_status")?,
                    next: tool("workflow_next_tasks")?,
                });
                Client::Mcp { conn: target.connect().await?, tools, id: 0 }
            }
        })
    }

    /// `task_claim`: whether this agent got the task.
    async fn claim(&mut self, agent: &str, task: &str) -> anyhow::Result<bool> {
        let answer = match self {
            Client::Core(engine) => {
                let claim = api::Claim { task_id: task.to_owned(), agent_id: agent.to_owned() };
                return Ok(engine.task_claim(claim).await?.success);
            }
            Client::Http { conn, target } => {
                let endpoint = target.post(&format!("/v1/tasks/{task}/claim"), &[])?;
                http_json(conn, &endpoint, json!({"agent_id": agent})).await?
            }
            Client::Mcp { conn, tools, id } => {
                let arguments = json!({"task_id": task, "agent_id": agent});
                mcp_call(conn, &tools.claim, id, "task_claim", arguments).await?
            }
        };
        Ok(answer["success"] == true)
    }

    /// `checkpoint_add`, type progress.
    async fn checkpoint(&mut self, agent: &str, task: &str) -> anyhow::Result<()> {
        let summary = "half way: inputs read, output drafted";
        match self {
            Client::Core(engine) => {
                let checkpoint = api::AddCheckpoint {
                    task_id: task.to_owned(),
                    kind: CheckpointType::Progress,
                    summary: summary.to_owned(),
                    detail: None,
                    files_changed: Vec::new(),
                    agent_id: Some(agent.to_owned()),
                };
                engine.checkpoint_add(checkpoint).await?;
            }
            Client::Http { conn, target } => {
                let endpoint = target.post(&format!("/v1/tasks/{task}/checkpoints"), &[])?;
                http_json(conn, &endpoint, json!({"agent_id": agent, "type": "progress", "summary": summary})).await?;
            }
            Client::Mcp { conn, tools, id } => {
                let arguments = json!({"task_id": task, "agent_id": agent, "type": "progress", "summary": summary});
                mcp_call(conn, &tools.checkpoint, id, "checkpoint_add", arguments).await?;
            }
        }
        Ok(())
    }

    /// `task_update_status` to completed, with an outcome.
    async fn complete(&mut self, agent: &str, task: &str) -> anyhow::Result<()> {
        let outcome = "done: output written";
        match self {
            Client::Core(engine) => {
                let update = api::UpdateStatus {
                    id: task.to_owned(),
                    status: TaskStatus::Completed,
                    outcome: Some(outcome.to_owned()),
                    outcome_detail: None,
                    error: None,
                    reason: None,
                    agent_id: Some(agent.to_owned()),
                };
                engine.task_update_status(update).await?;
            }
            Client::Http { conn, target } => {
                let endpoint = target.post(&format!("/v1/tasks/{task}/status"), &[])?;
                let body = json!({"agent_id": agent, "status": "completed", "outcome": outcome});
                http_json(conn, &endpoint, body).await?;
            }
            Client::Mcp { conn, tools, id } => {
                let arguments = json!({"id": task, "agent_id": agent, "status": "completed", "outcome": outcome});
                mcp_call(conn, &tools.status, id, "task_update_status", arguments).await?;
            }
        }
        Ok(())
    }

    /// `workflow_next_tasks`: the ids of up to `limit` tasks that can start now.
    async fn next(&mut self, workflow: &str, limit: usize) -> anyhow::Result<Vec<String>> {
        let answer = match self {
            Client::Core(engine) => {
                let next = api::NextTasks { workflow_id: workflow.to_owned(), limit: Some(limit), cursor: None };
                return Ok(engine.workflow_next_tasks(&next)?.tasks.into_iter().map(|t| t.id).collect());
            }
            Client::Http { conn, target } => {
                let endpoint = target.get(&format!("/v1/workflows/{workflow}/next?limit={limit}"))?;
                let (status, body) = conn.send(&endpoint, Bytes::new()).await?;
                if !status.is_success() {
                    bail!("GET next answered {status}: {}", String::from_utf8_lossy(&body));
                }
                serde_json::from_slice::<Value>(&body)?
            }
            Client::Mcp { conn, tools, id } => {
                let arguments = json!({"workflow_id": workflow, "limit": limit});
                mcp_call(conn, &tools.next, id, "workflow_next_tasks", arguments).await?
            }
        };
        let tasks = answer["tasks"].as_array().context("a next_tasks answer without tasks")?;
        Ok(tasks.iter().filter_map(|t| t["id"].as_str().map(str::to_owned)).collect())
    }
}

/// POSTs a JSON body to the HTTP API and reads the JSON answer; anything but a success stops the bench.
async fn http_json(conn: &mut http1::Connection, endpoint: &http1::Endpoint, body: Value) -> anyhow::Result<Value> {
    let answer = conn.ok(endpoint, Bytes::from(body.to_string())).await?;
    Ok(serde_json::from_slice(&answer)?)
}

/// One `tools/call`; the structured answer, or an error (a refusal included) that stops the bench.
async fn mcp_call(
    conn: &mut http1::Connection,
    endpoint: &http1::Endpoint,
    id: &mut u64,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<Value> {
    *id += 1;
    let answer = conn.ok(endpoint, Bytes::from(super::mcp::request(*id, tool, arguments))).await?;
    let answer: Value = serde_json::from_slice(&answer)?;
    let result = &answer["result"];
    if result["isError"] != false {
        bail!("{tool} failed: {answer}");
    }
    Ok(result["structuredContent"].clone())
}
