//! `clutch bench mcp`: the MCP face under load, each figure beside an anchor measured in the same
//! run: `tools/call agent_list` (a read-only tool) round trips over Streamable HTTP (2026-07-28,
//! one self-contained POST per call) beside a plain axum endpoint that parses the same request body
//! and answers the same bytes; over stdio through `clutch mcp` (which forwards to the daemon) beside
//! `cat` echoing the same line; and the throughput of concurrent HTTP clients beside the same anchor.
//! In process, the same daemon is measured a second time without the MCP fast path (rmcp serves
//! every call), so the fast path's gain is measured in the same run too.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use axum::body::Bytes;
use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{Daemon, Summary, http1, thousands};

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Sequential calls per round-trip measurement (one client).
    #[arg(long, default_value_t = 5000)]
    pub calls: usize,
    /// Concurrent HTTP clients in the throughput runs, each on its own connection.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Seconds of each throughput run (after one second of warm-up).
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Agents registered first: what `agent_list` answers.
    #[arg(long, default_value_t = 4)]
    pub agents: usize,
    /// Where the SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
    /// Measure a daemon already running there (e.g. under a profiler) instead of one in this process.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
}

const TOOL: &str = "agent_list";

pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    if args.calls == 0 || args.clients == 0 {
        bail!("--calls and --clients must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("mcp-{stamp}"));
    let daemon = match &args.url {
        Some(_) => None,
        None => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let store = clutch_store_sqlite::Store::open(&dir).context("cannot open the SQLite store")?;
            Some(Daemon::start(Arc::new(store)).await?)
        }
    };
    let base = match (&args.url, &daemon) {
        (Some(url), _) => url.trim_end_matches('/').to_owned(),
        (None, Some(daemon)) => daemon.url.clone(),
        (None, None) => unreachable!("a daemon is started when no URL is given"),
    };
    let target = http1::Target::new(&base)?;
    let path = "/mcp";
    let mcp_call = |tool: &str| {
        target.post(path, &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", tool)])
    };
    let mut setup = target.connect().await?;
    let register = mcp_call("agent_register")?;
    for i in 0..args.agents {
        let body = request(1, "agent_register", json!({"name": format!("bench-{i}"), "runtime": "bench"}));
        let answer = setup.ok(&register, body.into()).await?;
        let ok = b"\"isError\":false";
        if !answer.windows(ok.len()).any(|w| w == ok) {
            bail!("agent_register failed: {}", String::from_utf8_lossy(&answer));
        }
    }
    let mcp = mcp_call(TOOL)?;
    let call = Bytes::from(request(7, TOOL, json!({})));
    let answer = setup.ok(&mcp, call.clone()).await?;
    drop(setup);
    // The anchor gets the same request (headers included) and answers the same bytes.
    let anchor = Listening::anchor(answer.clone()).await?;
    let anchor_target = http1::Target::new(&anchor.base)?;
    // In process, the same daemon's router again with MCP endpoints that have no fast path: rmcp
    // serves every call.
    let rmcp_only = match &daemon {
        Some(daemon) => {
            let options = clutch_mcp::Options { fast_path: false, ..Default::default() };
            let mcp = clutch_mcp::router(daemon.engine.clone(), &options);
            let gateway = clutch_gateway::Options::default();
            let router = clutch_gateway::router_with(
                daemon.log.clone(),
                daemon.engine.clone(),
                gateway,
                mcp,
                axum::Router::new(),
            );
            Some(Listening::start(router).await?)
        }
        None => None,
    };
    let rmcp_target = rmcp_only.as_ref().map(|l| http1::Target::new(&l.base)).transpose()?;
    let rmcp_call = rmcp_target
        .as_ref()
        .map(|t| {
            t.post(path, &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", TOOL)])
        })
        .transpose()?;
    let anchor_call = anchor_target
        .post("/anchor", &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", TOOL)])?;
    eprintln!(
        "bench: tools/call {TOOL} ({} agents; request {} bytes, answer {} bytes)",
        args.agents,
        call.len(),
        answer.len()
    );

    eprintln!("bench: round trips over HTTP, {} calls each …", args.calls);
    let mut conn = anchor_target.connect().await?;
    let anchor_http = sequential(args.calls, async || conn.ok(&anchor_call, call.clone()).await).await?;
    let mut conn = target.connect().await?;
    let mcp_http = sequential(args.calls, async || conn.ok(&mcp, call.clone()).await).await?;
    let rmcp_http = match (&rmcp_target, &rmcp_call) {
        (Some(target), Some(endpoint)) => {
            let mut conn = target.connect().await?;
            Some(sequential(args.calls, async || conn.ok(endpoint, call.clone()).await).await?)
        }
        _ => None,
    };
    drop(conn);

    eprintln!("bench: round trips over stdio, {} calls each …", args.calls);
    let line = String::from_utf8(call.to_vec())?;
    let mut cat = Pipe::spawn(tokio::process::Command::new("cat")).context("cannot run `cat` for the anchor")?;
    let anchor_stdio = sequential(args.calls, async || cat.round_trip(&line).await).await?;
    cat.close().await;
    let mut exe = tokio::process::Command::new(std::env::current_exe()?);
    exe.args(["mcp", "--url", &base]).env_remove("CLUTCH_TOKEN");
    let mut bridge = Pipe::spawn(exe).context("cannot run `clutch mcp`")?;
    bridge.initialize().await?;
    let mcp_stdio = sequential(args.calls, async || bridge.round_trip(&line).await).await?;
    bridge.close().await;

    eprintln!("bench: {} concurrent HTTP clients, 1 s warm-up + {} s each …", args.clients, args.duration);
    let duration = Duration::from_secs(args.duration);
    let anchor_load = concurrent(&anchor_target, &anchor_call, &call, args.clients, duration).await?;
    let mcp_load = concurrent(&target, &mcp, &call, args.clients, duration).await?;
    let rmcp_load = match (&rmcp_target, &rmcp_call) {
        (Some(target), Some(endpoint)) => Some(concurrent(target, endpoint, &call, args.clients, duration).await?),
        _ => None,
    };

    anchor.stop().await;
    if let Some(rmcp_only) = rmcp_only {
        rmcp_only.stop().await;
    }
    if let Some(daemon) = daemon {
        daemon.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    println!(
        "MCP tools/call {TOOL} (read-only, {} agents listed), each beside its anchor in the same run:",
        args.agents
    );
    println!("round trip, one client, {} sequential calls:", thousands(args.calls as u64));
    println!("{}", mcp_http.line("http", "calls"));
    if let Some(rmcp) = &rmcp_http {
        println!("{}   (the same endpoint without the fast path)", rmcp.line("rmcp", "calls"));
    }
    println!("{}   (plain axum JSON endpoint, same request and answer bytes)", anchor_http.line("anchor", "calls"));
    println!("{}", mcp_stdio.line("stdio", "calls"));
    println!("{}   (`cat` echoing the same line)", anchor_stdio.line("anchor", "calls"));
    println!(
        "throughput, {} concurrent HTTP clients, {} s (cpu: this process's, {}):",
        args.clients,
        args.duration,
        if args.url.is_some() { "the load driver only" } else { "load driver and servers together" }
    );
    println!("{}", mcp_load.line("http", "calls"));
    if let Some(rmcp) = &rmcp_load {
        println!("{}", rmcp.line("rmcp", "calls"));
    }
    println!("{}", anchor_load.line("anchor", "calls"));
    print!("  ratio    {:.2}× the anchor's throughput", mcp_load.rate() / anchor_load.rate());
    match &rmcp_load {
        Some(rmcp) => println!(" (without the fast path: {:.2}×)", rmcp.rate() / anchor_load.rate()),
        None => println!(),
    }
    Ok(())
}

/// A 2026-07-28 `tools/call`: self-contained, with the per-request metadata that era requires.
pub(super) fn request(id: u64, tool: &str, arguments: Value) -> String {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "clutch-bench", "version": env!("CARGO_PKG_VERSION")},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string()
}

/// `calls` calls one after the other, each timed.
pub(super) async fn sequential<T>(
    calls: usize,
    mut call: impl AsyncFnMut() -> anyhow::Result<T>,
) -> anyhow::Result<Summary> {
    // A few to warm connections and caches up.
    for _ in 0..calls.min(200) {
        call().await?;
    }
    let mut micros = Vec::with_capacity(calls);
    let started = Instant::now();
    for _ in 0..calls {
        let at = Instant::now();
        call().await?;
        micros.push(at.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    Ok(Summary::new(micros, calls, started.elapsed().as_secs_f64()))
}

/// `clients` tasks, each on its own connection, calling as fast as answers come, for one second of
/// warm-up and then `duration`.
async fn concurrent(
    target: &http1::Target,
    endpoint: &http1::Endpoint,
    body: &Bytes,
    clients: usize,
    duration: Duration,
) -> anyhow::Result<Summary> {
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        connections.push(target.connect().await?);
    }
    let started = Instant::now();
    let warm_until = started + Duration::from_secs(1);
    let until = warm_until + duration;
    let cpu = super::cpu_between(warm_until, until);
    let tasks: Vec<_> = connections
        .into_iter()
        .map(|mut conn| {
            let (endpoint, body) = (endpoint.clone(), body.clone());
            tokio::spawn(async move {
                let mut micros = Vec::new();
                loop {
                    let at = Instant::now();
                    if at >= until {
                        break;
                    }
                    conn.ok(&endpoint, body.clone()).await?;
                    if at >= warm_until {
                        micros.push(at.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    }
                }
                Ok::<_, anyhow::Error>(micros)
            })
        })
        .collect();
    let mut micros = Vec::new();
    for task in tasks {
        micros.extend(task.await??);
    }
    let count = micros.len();
    let used = cpu.await?;
    Ok(Summary::new(micros, count, (Instant::now() - warm_until).as_secs_f64()).with_cpu(used))
}

/// A router served on 127.0.0.1:0 inside this process.
pub(super) struct Listening {
    /// `http://127.0.0.1:port`.
    pub(super) base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl Listening {
    async fn start(router: axum::Router) -> anyhow::Result<Listening> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(shutdown).await {
                tracing::error!(error = %e, "bench server failed");
            }
        });
        Ok(Listening { base, stop, server })
    }

    /// The anchor: a plain axum endpoint at `/anchor` that parses the request as JSON and answers
    /// fixed bytes.
    pub(super) async fn anchor(answer: Bytes) -> anyhow::Result<Listening> {
        let router = axum::Router::new().route(
            "/anchor",
            axum::routing::post(move |axum::Json(request): axum::Json<Value>| {
                let answer = answer.clone();
                async move {
                    std::hint::black_box(request);
                    ([(axum::http::header::CONTENT_TYPE, "application/json")], answer)
                }
            }),
        );
        Listening::start(router).await
    }

    pub(super) async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.server.await;
    }
}

/// A child process spoken to in lines over its stdin and stdout.
struct Pipe {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Pipe {
    fn spawn(mut command: tokio::process::Command) -> anyhow::Result<Pipe> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
        let mut child = command.spawn()?;
        let stdin = child.stdin.take().context("no stdin")?;
        let lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        Ok(Pipe { child, stdin, lines })
    }

    /// The `initialize` handshake (2025-11-25), as Claude Code does it.
    async fn initialize(&mut self) -> anyhow::Result<()> {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "clutch-bench", "version": env!("CARGO_PKG_VERSION")}}});
        let answer = self.round_trip(&initialize.to_string()).await?;
        if !answer.contains("\"result\"") {
            bail!("clutch mcp refused initialize: {answer}");
        }
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await
    }

    async fn send(&mut self, line: &str) -> anyhow::Result<()> {
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.write_all(b"\n").await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Sends one line and reads the next line that answers it.
    async fn round_trip(&mut self, line: &str) -> anyhow::Result<String> {
        self.send(line).await?;
        loop {
            let Some(answer) = self.lines.next_line().await? else { bail!("the child closed its stdout") };
            // Skip notifications: an answer has an id.
            if answer.contains("\"id\"") {
                if answer.contains("\"error\"") || answer.contains("\"isError\":true") {
                    bail!("call failed: {answer}");
                }
                return Ok(answer);
            }
        }
    }

    async fn close(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}
