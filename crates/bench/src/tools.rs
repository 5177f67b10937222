//! `clutch bench tools`: a tool call through Clutch (a `tool.call` submitted to the engine, noted,
//! made on an MCP server over stdio by the tools adapter, answered in the log and received from the
//! caller's inbox) beside the same call made by rmcp's client straight to the same server, in the
//! same run: round trips one at a time (the overhead at p50), then calls/s from concurrent callers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::Args;
use clutch_app::{App, face};
use clutch_core::view::ServerState;
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_store::Filter;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use super::Summary;

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// The MCP server (stdio): its command and arguments.
    #[arg(long, num_args = 1.., default_values = ["node_modules/.bin/mcp-server-everything", "stdio"])]
    pub server: Vec<String>,
    /// The tool called (with `{"message": ...}`): the reference server's echo.
    #[arg(long, default_value = "echo")]
    pub tool: String,
    /// Sequential calls per round-trip measurement.
    #[arg(long, default_value_t = 2000)]
    pub calls: usize,
    /// Concurrent callers in the throughput runs.
    #[arg(long, default_value_t = 32)]
    pub callers: usize,
    /// Seconds of each throughput run (after one second of warm-up).
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Where the SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
}

pub async fn run(args: ToolsArgs) -> anyhow::Result<()> {
    let Some((command, server_args)) = args.server.split_first() else { bail!("--server needs a command") };
    // A bare name is looked up on PATH when it is started; a path must exist.
    if command.contains('/') && !std::path::Path::new(command).exists() {
        bail!("{command} does not exist: install the reference server with `npm ci` (or give --server)");
    }
    if args.calls == 0 || args.callers == 0 {
        bail!("--calls and --callers must be at least 1");
    }

    // The anchor: rmcp's client straight to its own copy of the server.
    let mut child = tokio::process::Command::new(command)
        .args(server_args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {command}"))?;
    let transport = (child.stdout.take().context("stdout")?, child.stdin.take().context("stdin")?);
    let direct = Arc::new(().serve(transport).await.context("the MCP handshake with the server failed")?);
    let call = |direct: Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>, tool: String, n: usize| async move {
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = json!({"message": format!("hello {n}")}).as_object().cloned();
        direct.call_tool(params).await.map(|_| ())
    };
    for n in 0..100 {
        call(direct.clone(), args.tool.clone(), n).await?;
    }
    let mut micros = Vec::with_capacity(args.calls);
    let started = Instant::now();
    for n in 0..args.calls {
        let t = Instant::now();
        call(direct.clone(), args.tool.clone(), n).await?;
        micros.push(t.elapsed().as_micros() as u32);
    }
    let anchor = Summary::new(micros, args.calls, started.elapsed().as_secs_f64());

    // Clutch: the same server declared to an in-process daemon.
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("tools-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let store = clutch_store_sqlite::Store::open(&dir).context("cannot open the SQLite store")?;
    let server = clutch_tools::ServerConfig {
        name: "bench".into(),
        command: Some(command.clone()),
        args: server_args.to_vec(),
        env: Default::default(),
        url: None,
        headers: Default::default(),
        connect_timeout_ms: 20_000,
        call_timeout_ms: 60_000,
    };
    let app =
        App::builder(Arc::new(store)).face(face::Tools { servers: vec![server], ..Default::default() }).build().await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !app.engine.adapters().tools().servers.iter().all(|s| s.state == ServerState::Ready) {
        if Instant::now() > deadline {
            bail!("the server did not become ready: {:?}", app.engine.adapters().tools());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tool = format!("mcp:bench/{}", args.tool);
    let caller = Caller::new(&app, "bench-0", &tool).await?;
    for n in 0..100 {
        caller.call(n).await?;
    }
    let mut micros = Vec::with_capacity(args.calls);
    let started = Instant::now();
    for n in 0..args.calls {
        let t = Instant::now();
        caller.call(n).await?;
        micros.push(t.elapsed().as_micros() as u32);
    }
    let clutch = Summary::new(micros, args.calls, started.elapsed().as_secs_f64());
    println!("round trips, one caller, {} calls of {}:", args.calls, args.tool);
    println!("{}", clutch.line("  clutch  ", "calls"));
    println!("{}", anchor.line("  direct  ", "calls"));
    println!(
        "  overhead at p50: {:.3} ms (tool.call stored, noted, made, answered, received from the inbox)",
        clutch.p50_ms - anchor.p50_ms
    );

    // Throughput: concurrent callers, each waiting for its answer before calling again.
    let mut callers = Vec::new();
    for i in 0..args.callers {
        callers.push(Arc::new(Caller::new(&app, &format!("bench-{}", i + 1), &tool).await?));
    }
    let measure = Duration::from_secs(args.duration);
    let callers = Arc::new(callers);
    let clutch = throughput(args.callers, measure, move |i, n| {
        let caller = callers[i].clone();
        async move { caller.call(n).await }
    })
    .await?;
    let (anchor_direct, anchor_tool) = (direct.clone(), args.tool.clone());
    let direct_run =
        throughput(args.callers, measure, move |_, n| call(anchor_direct.clone(), anchor_tool.clone(), n)).await?;
    println!("throughput, {} concurrent callers, {} s:", args.callers, args.duration);
    println!("{}", clutch.line("  clutch  ", "calls"));
    println!("{}", direct_run.line("  direct  ", "calls"));
    app.stop().await?;
    let _ = child.kill().await;
    Ok(())
}

/// One caller of the daemon: submits `tool.call`s as `agent:<name>` and takes each answer from its
/// inbox (a live subscription, as an agent's SSE or push would).
struct Caller {
    engine: clutch_core::Engine,
    inbox: tokio::sync::Mutex<clutch_core::Subscription>,
    name: String,
    tool: String,
}

impl Caller {
    async fn new(app: &App, name: &str, tool: &str) -> anyhow::Result<Caller> {
        let agent = format!("agent:{name}");
        let inbox = app.log.subscribe(Filter { to: Some(agent.clone()), ..Filter::default() }, None).await?;
        Ok(Caller {
            engine: app.engine.clone(),
            inbox: tokio::sync::Mutex::new(inbox),
            name: agent,
            tool: tool.to_owned(),
        })
    }

    async fn call(&self, n: usize) -> anyhow::Result<()> {
        let message = json!({
            "run_id": id::generate(Kind::Run), "thread_id": id::generate(Kind::Thread), "task_id": id::generate(Kind::Task),
            "from": {"agent_id": self.name}, "to": [], "type": "tool.call",
            "payload": {"tool": self.tool, "args": {"message": format!("hello {n}")}},
        });
        let message =
            validate::message(&message, &Defaults { now: SystemTime::now() }).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let id = message.id.clone();
        let mut inbox = self.inbox.lock().await;
        match self.engine.submit(vec![message]).await?.pop() {
            Some(Ok(_)) => {}
            other => bail!("the call was refused: {other:?}"),
        }
        loop {
            let event = inbox.next().await.map_err(|e| anyhow::anyhow!("the inbox ended: {e:?}"))?;
            let answer = event.message()?;
            if answer.payload.get("call_id").and_then(|c| c.as_str()) == Some(id.as_str()) {
                if answer.kind != clutch_proto::MessageType::ToolResult {
                    bail!("the call failed: {}", serde_json::Value::Object(answer.payload));
                }
                return Ok(());
            }
        }
    }
}

/// `callers` loops of `call(i, n)` for `measure` after a second of warm-up: calls/s and latencies.
async fn throughput<F, Fut, E>(callers: usize, measure: Duration, call: F) -> anyhow::Result<Summary>
where
    F: Fn(usize, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), E>> + Send,
    E: std::fmt::Display,
{
    let start = Instant::now() + Duration::from_secs(1);
    let end = start + measure;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..callers {
        let call = call.clone();
        tasks.spawn(async move {
            let mut micros = Vec::new();
            let mut n = 0;
            while Instant::now() < end {
                let t = Instant::now();
                call(i, n).await.map_err(|e| anyhow::anyhow!("{e}"))?;
                if t >= start {
                    micros.push(t.elapsed().as_micros() as u32);
                }
                n += 1;
            }
            anyhow::Ok(micros)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    let count = all.len();
    Ok(Summary::new(all, count, measure.as_secs_f64()))
}
