//! `clutch bench clients`: what MCP clients nobody here wrote cost the daemon, beside our lean
//! client, in one run against one `clutch serve` process (default config, SQLite): the official
//! Python SDK (`mcp.Client`, default options; `mcp_sdk_client.py`, built in) over Streamable HTTP
//! and through the stdio bridge (`clutch mcp`), and this crate's HTTP/1 client posting 2026-07-28
//! requests. Two loads each: `tools/call agent_heartbeat` from N clients for a while, and M agents
//! working a planned workflow (next → claim → begin → checkpoint → complete per task). The
//! daemon's CPU is read from `/proc` around each measured phase; the SDK driver reports its own CPU
//! and its bridges' (from `/proc`, in the phase and, after its sessions close, from start to exit).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use axum::body::Bytes;
use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::process::Server;
use super::{http1, thousands};

#[derive(Debug, Args)]
pub struct ClientsArgs {
    /// Concurrent clients calling `agent_heartbeat`, each with its own connection (or bridge).
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Seconds each kind of client calls `agent_heartbeat`.
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Agents working the workflow, each with its own connection (or bridge).
    #[arg(long, default_value_t = 8)]
    pub agents: usize,
    /// Tasks of the workflow each kind of client works through.
    #[arg(long, default_value_t = 500)]
    pub tasks: usize,
    /// The Python with the MCP SDK (`./scripts/py-setup` installs it).
    #[arg(long, default_value = ".tools/venv/bin/python", value_name = "PATH")]
    pub python: PathBuf,
    /// Leave out the SDK through the stdio bridge.
    #[arg(long)]
    pub no_stdio: bool,
    /// Where the daemon's SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
}

/// The SDK driver, run as `python -c`.
const SDK_CLIENT: &str = include_str!("../mcp_sdk_client.py");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lean,
    /// The lean client held to the SDK's pace: the same load, so the same idle wake-ups per call.
    LeanPaced,
    SdkHttp,
    SdkStdio,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Lean => "lean",
            Kind::LeanPaced => "lean paced",
            Kind::SdkHttp => "sdk http",
            Kind::SdkStdio => "sdk stdio",
        }
    }
}

/// One phase's figures.
struct Measured {
    ops: u64,
    seconds: f64,
    daemon_cpu: Duration,
    /// The client process's own CPU (the SDK driver's).
    client_cpu: Option<Duration>,
    /// The bridges' CPU in the measured phase.
    bridge_cpu: Option<Duration>,
    /// The bridges' CPU from their start to their exit: start-up, the handshake and registration
    /// included.
    bridge_life_cpu: Option<Duration>,
}

impl Measured {
    fn line(&self, kind: Kind, unit: &str) -> String {
        let per = |d: Duration| d.as_secs_f64() * 1e3 / self.ops.max(1) as f64;
        let mut line = format!(
            "  {:<10} {:>8} {unit}s/s   daemon {:>6.3} ms/{unit}",
            kind.label(),
            thousands((self.ops as f64 / self.seconds.max(1e-9)) as u64),
            per(self.daemon_cpu)
        );
        if let Some(cpu) = self.client_cpu {
            line += &format!("   client {:>6.3} ms/{unit}", per(cpu));
        }
        if let Some(cpu) = self.bridge_cpu {
            line += &format!("   bridge {:>6.3} ms/{unit}", per(cpu));
        }
        if let Some(cpu) = self.bridge_life_cpu {
            line += &format!(" ({:.3} from start to exit)", per(cpu));
        }
        line + &format!("   ({} {unit}s in {:.1} s)", thousands(self.ops), self.seconds)
    }
}

pub async fn run(args: ClientsArgs) -> anyhow::Result<()> {
    if args.clients == 0 || args.agents == 0 || args.tasks == 0 {
        bail!("--clients, --agents and --tasks must be at least 1");
    }
    if !args.python.exists() {
        bail!(
            "{} does not exist: ./scripts/py-setup installs the MCP SDK into .tools/venv (or give --python)",
            args.python.display()
        );
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("clients-{stamp}"));
    let daemon = Server::clutch(&dir).await?;
    let result = measure(&args, &daemon).await;
    daemon.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    let (calls, tasks) = result?;

    println!(
        "MCP clients against one `clutch serve` (default config, SQLite), one run; cpu per operation: \
         the daemon's (from /proc), the SDK client's own, the stdio bridges'"
    );
    println!("tools/call agent_heartbeat, {} clients, {} s each:", args.clients, args.duration);
    for (kind, phase) in &calls {
        println!("{}", phase.line(*kind, "call"));
    }
    println!(
        "workflow tasks (next → claim → begin → checkpoint → complete), {} agents, {} tasks each:",
        args.agents, args.tasks
    );
    for (kind, phase) in &tasks {
        println!("{}", phase.line(*kind, "task"));
    }
    let daemon_per = |phases: &[(Kind, Measured)], kind: Kind| {
        phases.iter().find(|(k, _)| *k == kind).map(|(_, p)| p.daemon_cpu.as_secs_f64() / p.ops.max(1) as f64)
    };
    if let (Some(sdk), Some(lean), Some(paced)) =
        (daemon_per(&calls, Kind::SdkHttp), daemon_per(&calls, Kind::Lean), daemon_per(&calls, Kind::LeanPaced))
    {
        print!(
            "  ratio    daemon cpu, sdk over http / lean: {:.2}× per call at the same pace ({:.2}× lean flat out)",
            sdk / paced,
            sdk / lean
        );
        if let (Some(sdk), Some(lean), Some(paced)) =
            (daemon_per(&tasks, Kind::SdkHttp), daemon_per(&tasks, Kind::Lean), daemon_per(&tasks, Kind::LeanPaced))
        {
            print!(", {:.2}× per workflow task at the same pace ({:.2}× lean flat out)", sdk / paced, sdk / lean);
        }
        println!();
    }
    Ok(())
}

type Phases = Vec<(Kind, Measured)>;

async fn measure(args: &ClientsArgs, daemon: &Server) -> anyhow::Result<(Phases, Phases)> {
    let base = format!("http://{}", daemon.addr);
    let mut kinds = vec![Kind::Lean, Kind::SdkHttp];
    if !args.no_stdio {
        kinds.push(Kind::SdkStdio);
    }
    let mut calls: Phases = Vec::new();
    let mut call_kinds = kinds.clone();
    call_kinds.insert(2, Kind::LeanPaced);
    for &kind in &call_kinds {
        eprintln!(
            "bench: {}: {} clients calling agent_heartbeat for {} s …",
            kind.label(),
            args.clients,
            args.duration
        );
        let phase = match kind {
            Kind::Lean => lean_calls(&base, daemon, args.clients, args.duration, None).await?,
            Kind::LeanPaced => lean_calls(&base, daemon, args.clients, args.duration, Some(sdk_pace(&calls)?)).await?,
            _ => {
                let duration = args.duration.to_string();
                sdk(args, daemon, kind, &["calls", "--clients", &args.clients.to_string(), "--duration", &duration])
                    .await?
            }
        };
        calls.push((kind, phase));
    }
    let mut tasks: Phases = Vec::new();
    for &kind in &call_kinds {
        eprintln!("bench: {}: {} agents working {} tasks …", kind.label(), args.agents, args.tasks);
        let workflow = plan(&base, args.tasks).await?;
        let phase = match kind {
            Kind::Lean => lean_workflow(&base, daemon, args.agents, &workflow, None).await?,
            Kind::LeanPaced => lean_workflow(&base, daemon, args.agents, &workflow, Some(sdk_pace(&tasks)?)).await?,
            _ => {
                let agents = args.agents.to_string();
                sdk(args, daemon, kind, &["workflow", "--clients", &agents, "--workflow", &workflow]).await?
            }
        };
        if phase.ops != args.tasks as u64 {
            bail!("{}: {} of the workflow's {} tasks were completed", kind.label(), phase.ops, args.tasks);
        }
        tasks.push((kind, phase));
    }
    Ok((calls, tasks))
}

/// The pace the SDK over HTTP reached in `phases`, operations per second, for the lean client to follow.
fn sdk_pace(phases: &Phases) -> anyhow::Result<f64> {
    let sdk = phases.iter().find(|(k, _)| *k == Kind::SdkHttp).map(|(_, p)| p);
    sdk.map(|p| p.ops as f64 / p.seconds.max(1e-9)).context("no SDK pace to follow")
}

/// Runs the SDK driver and reads its phases; the daemon's CPU between its `start` and `end`.
async fn sdk(args: &ClientsArgs, daemon: &Server, kind: Kind, mode: &[&str]) -> anyhow::Result<Measured> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let prefix = format!("sdk{}", RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let base = format!("http://{}", daemon.addr);
    let mut command = tokio::process::Command::new(&args.python);
    command.args(["-c", SDK_CLIENT]).args(mode).args(["--url", &base, "--prefix", &prefix]);
    let exe = std::env::current_exe()?;
    if kind == Kind::SdkStdio {
        command.arg("--stdio").arg(&exe);
    }
    let mut child = command
        .env_remove("CLUTCH_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", args.python.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let (mut started, mut daemon_from) = (None, None);
    let mut phase = None;
    while let Some(line) = lines.next_line().await? {
        let said: Value = serde_json::from_str(&line).with_context(|| format!("the SDK driver said {line:?}"))?;
        match said["phase"].as_str() {
            Some("start") => {
                started = Some(Instant::now());
                daemon_from = daemon.cpu();
            }
            Some("end") => {
                let seconds = started.context("an end before a start")?.elapsed().as_secs_f64();
                let daemon_cpu = daemon.cpu_since(daemon_from);
                phase = Some(Measured {
                    ops: said["ops"].as_u64().context("no ops")?,
                    seconds,
                    daemon_cpu: daemon_cpu.unwrap_or_default(),
                    client_cpu: said["cpu"].as_f64().map(Duration::from_secs_f64),
                    bridge_cpu: said["bridges_cpu"]
                        .as_f64()
                        .filter(|_| kind == Kind::SdkStdio)
                        .map(Duration::from_secs_f64),
                    bridge_life_cpu: None,
                });
            }
            Some("closed") => {
                if let Some(phase) = &mut phase
                    && kind == Kind::SdkStdio
                {
                    phase.bridge_life_cpu = said["children_cpu"].as_f64().map(Duration::from_secs_f64);
                }
            }
            _ => {}
        }
    }
    let status = child.wait().await?;
    if !status.success() {
        bail!("the SDK driver ({}) exited with {status}", kind.label());
    }
    phase.context("the SDK driver ended without figures")
}

/// A lean client: one HTTP/1 connection POSTing 2026-07-28 `tools/call`s to `/mcp`, each tool's
/// endpoint (its headers) built once.
struct Lean {
    conn: http1::Connection,
    target: http1::Target,
    endpoints: HashMap<String, http1::Endpoint>,
    id: u64,
}

impl Lean {
    async fn connect(base: &str) -> anyhow::Result<Lean> {
        let target = http1::Target::new(base)?;
        Ok(Lean { conn: target.connect().await?, target, endpoints: HashMap::new(), id: 0 })
    }

    /// The structured answer, or `Err` with the refusal's text.
    async fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<Result<Value, String>> {
        if !self.endpoints.contains_key(tool) {
            let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", tool)];
            self.endpoints.insert(tool.to_owned(), self.target.post("/mcp", &headers)?);
        }
        self.id += 1;
        let body = Bytes::from(super::mcp::request(self.id, tool, arguments));
        let answer = self.conn.ok(&self.endpoints[tool], body).await?;
        let mut answer: Value = serde_json::from_slice(&answer)?;
        let result = answer["result"].take();
        if result["isError"] != false {
            return Ok(Err(result.to_string()));
        }
        Ok(Ok(result["structuredContent"].clone()))
    }

    async fn ok(&mut self, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        self.call(tool, arguments).await?.map_err(|e| anyhow::anyhow!("{tool} failed: {e}"))
    }
}

/// `clients` lean clients calling `agent_heartbeat` for `seconds`, flat out or together at `rate`
/// calls per second.
async fn lean_calls(
    base: &str,
    daemon: &Server,
    clients: usize,
    seconds: u64,
    rate: Option<f64>,
) -> anyhow::Result<Measured> {
    let mut leans = Vec::new();
    for i in 0..clients {
        let mut lean = Lean::connect(base).await?;
        lean.ok("agent_register", json!({"name": format!("lean-{i}"), "runtime": "bench"})).await?;
        leans.push(lean);
    }
    let period = rate.map(|r| Duration::from_secs_f64(clients as f64 / r.max(1e-3)));
    let (started, from) = (Instant::now(), daemon.cpu());
    let until = started + Duration::from_secs(seconds);
    let loops: Vec<_> = leans
        .into_iter()
        .enumerate()
        .map(|(i, mut lean)| {
            tokio::spawn(async move {
                let mut n = 0u64;
                let mut pace = period.map(|p| spread(p, i, clients));
                let mut lean = Paced { lean: &mut lean, pace: pace.as_mut() };
                while Instant::now() < until {
                    lean.ok("agent_heartbeat", json!({"agent_id": format!("agent:lean-{i}")})).await?;
                    n += 1;
                }
                Ok::<_, anyhow::Error>(n)
            })
        })
        .collect();
    finish(loops, daemon, started, from).await
}

/// The pace of client `i` of `n`, one tick per `period`: the clients start spread over one period,
/// as independent agents would.
fn spread(period: Duration, i: usize, n: usize) -> tokio::time::Interval {
    tokio::time::interval_at(tokio::time::Instant::now() + period.mul_f64(i as f64 / n as f64), period)
}

/// A lean client whose every call waits for its turn, when it has a pace.
struct Paced<'a> {
    lean: &'a mut Lean,
    pace: Option<&'a mut tokio::time::Interval>,
}

impl Paced<'_> {
    async fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<Result<Value, String>> {
        if let Some(pace) = &mut self.pace {
            pace.tick().await;
        }
        self.lean.call(tool, arguments).await
    }

    async fn ok(&mut self, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        self.call(tool, arguments).await?.map_err(|e| anyhow::anyhow!("{tool} failed: {e}"))
    }
}

/// The phase the lean clients' `loops` (each answering its operations) made since `started`, when
/// the daemon had used `from` of CPU.
async fn finish(
    loops: Vec<tokio::task::JoinHandle<anyhow::Result<u64>>>,
    daemon: &Server,
    started: Instant,
    from: Option<Duration>,
) -> anyhow::Result<Measured> {
    let mut ops = 0;
    for l in loops {
        ops += l.await??;
    }
    let daemon_cpu = daemon.cpu_since(from).unwrap_or_default();
    Ok(Measured {
        ops,
        seconds: started.elapsed().as_secs_f64(),
        daemon_cpu,
        client_cpu: None,
        bridge_cpu: None,
        bridge_life_cpu: None,
    })
}

/// A workflow of `tasks` independent tasks, planned through the coordinator's tools; its id.
async fn plan(base: &str, tasks: usize) -> anyhow::Result<String> {
    let mut lean = Lean::connect(base).await?;
    let workflow = lean.ok("workflow_create", json!({"name": "bench clients"})).await?;
    let id = workflow["id"].as_str().context("workflow_create answered no id")?.to_owned();
    let plan: Vec<Value> =
        (0..tasks).map(|i| json!({"name": format!("t{i}"), "description": format!("step {i}")})).collect();
    lean.ok("workflow_set_plan", json!({"workflow_id": id, "tasks": plan})).await?;
    Ok(id)
}

/// Calls of a workflow task: next, claim, begin, checkpoint, complete.
const CALLS_PER_TASK: f64 = 5.0;

/// `agents` lean agents working `workflow`, flat out or together at `rate` tasks per second (each
/// agent's calls evenly spaced, as an agent whose own work between calls sets its pace).
async fn lean_workflow(
    base: &str,
    daemon: &Server,
    agents: usize,
    workflow: &str,
    rate: Option<f64>,
) -> anyhow::Result<Measured> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut leans = Vec::new();
    for i in 0..agents {
        let mut lean = Lean::connect(base).await?;
        lean.ok("agent_register", json!({"name": format!("lean-w{run}-{i}"), "runtime": "bench"})).await?;
        leans.push((format!("agent:lean-w{run}-{i}"), lean));
    }
    let period = rate.map(|r| Duration::from_secs_f64(agents as f64 / (r.max(1e-3) * CALLS_PER_TASK)));
    let (started, from) = (Instant::now(), daemon.cpu());
    let loops: Vec<_> = leans
        .into_iter()
        .enumerate()
        .map(|(index, (agent, mut lean))| {
            let workflow = workflow.to_owned();
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut pace = period.map(|p| {
                    let mut pace = spread(p, index, agents);
                    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    pace
                });
                let mut lean = Paced { lean: &mut lean, pace: pace.as_mut() };
                loop {
                    let next = lean.ok("workflow_next_tasks", json!({"workflow_id": workflow})).await?;
                    let tasks = next["tasks"].as_array().context("next_tasks without tasks")?;
                    if tasks.is_empty() {
                        return Ok::<_, anyhow::Error>(done);
                    }
                    let task = tasks[(index * 7) % tasks.len()]["id"].as_str().context("a task without id")?.to_owned();
                    // A lost race answers `success: false`: a retry, not a task.
                    let claim = lean.call("task_claim", json!({"task_id": task, "agent_id": agent})).await?;
                    if !claim.is_ok_and(|c| c["success"] == true) {
                        continue;
                    }
                    let status = |s: &str| json!({"id": task, "agent_id": agent, "status": s});
                    lean.ok("task_update_status", status("in_progress")).await?;
                    let summary = "half way: inputs read";
                    let checkpoint =
                        json!({"task_id": task, "agent_id": agent, "type": "progress", "summary": summary});
                    lean.ok("checkpoint_add", checkpoint).await?;
                    let mut completed = status("completed");
                    completed["outcome"] = json!("done: output written");
                    lean.ok("task_update_status", completed).await?;
                    done += 1;
                }
            })
        })
        .collect();
    finish(loops, daemon, started, from).await
}
