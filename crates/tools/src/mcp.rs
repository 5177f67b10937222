//! The MCP client adapter: the MCP servers the operator declares, each kept connected by a
//! supervisor of its own, their tools served as `mcp:<server>/<tool>`.
//!
//! A server is a command (stdio: the daemon starts it, with the arguments and environment the
//! config gives, and speaks MCP on its stdin and stdout; only the operator's config can name one) or
//! a Streamable HTTP URL (reached through the outbound guard's client, so the operator's
//! `outbound.*` rules apply to it as to every URL). Either protocol era is spoken, whichever the
//! server does (rmcp's `Auto` lifecycle). When a server stops or cannot be reached, it is started
//! again after a backoff (core's supervisor: 0.2 s doubling to 30 s); its state, restarts and last error are in
//! [`Servers::servers`] (`GET /v1/tools`).
//!
//! A call waits up to the server's `connect_timeout_ms` for it to be ready (once: the wait its
//! annotations began, asked just before it is made, is the one the call finishes), then up to its
//! `call_timeout_ms` for the answer. A command that exits is reported with its exit status and the
//! last lines it wrote on stderr (bounded, as errors quote input). The answer keeps the tool's
//! content blocks and structured content; a tool that reports an error (`isError`) is `TOOL_FAILED`; no connection is
//! `TOOL_UNAVAILABLE` (retryable: the call was not made); no answer in time is `TOOL_TIMEOUT`; a
//! server that stops mid-call is `TOOL_IN_DOUBT`. The last two are retryable only for a read-only or
//! idempotent tool, as its annotations say. An HTTP server has no process to watch: a call that finds
//! its connection broken tells the supervisor, which connects again (a new session). A broken response
//! stream is resumed three times (0.2, 0.4, 0.8 s) before its call is in doubt; a request refused at
//! connect was never made and is `TOOL_UNAVAILABLE`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use clutch_core::adapter::{Adapter, Answer, BoxFuture};
use clutch_core::supervise::{self, Exit, Restart};
use clutch_core::view::{ServerState, Tool, ToolAnnotations, ToolServer};
use clutch_core::{payload, tool};
use clutch_proto::{ErrorCode, Message, MessageType};
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::time::Instant;

/// The adapter's name: the prefix of its tools (`mcp:files/read_file`).
pub const ADAPTER: &str = "mcp";

/// One MCP server as the operator declares it (`[[mcp_servers]]` in `clutch.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Its name in tool names, `mcp:<name>/<tool>`: letters, digits, `.`, `_` and `-`.
    pub name: String,
    /// The command that starts it, speaking MCP on its stdin and stdout (found on `PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The command's arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for the command besides the daemon's own environment (never shown).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its Streamable HTTP endpoint (`http://host:port/mcp`), instead of a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with each request to `url`, such as `Authorization` (never shown).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long connecting may take, and a call may wait for a connection.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// How long one call may take.
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
}

fn default_connect_timeout_ms() -> u64 {
    10_000
}

fn default_call_timeout_ms() -> u64 {
    60_000
}

impl ServerConfig {
    /// What is wrong with it, naming the field.
    pub fn check(&self) -> Result<(), Error> {
        clutch_proto::id::check_name(&self.name).map_err(|why| Error::Name { name: self.name.clone(), why })?;
        let server = || self.name.clone();
        match (&self.command, &self.url) {
            (Some(c), None) if !c.trim().is_empty() => {}
            (None, Some(url)) => {
                if !url.starts_with("http://") {
                    return Err(Error::NotHttp { server: server() });
                }
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err(Error::ArgsWithUrl { server: server() });
                }
            }
            _ => return Err(Error::NoTransport { server: server() }),
        }
        if self.command.is_some() && !self.headers.is_empty() {
            return Err(Error::HeadersWithCommand { server: server() });
        }
        if self.connect_timeout_ms == 0 || self.call_timeout_ms == 0 {
            return Err(Error::NoTimeout { server: server() });
        }
        Ok(())
    }

    fn transport(&self) -> &'static str {
        if self.url.is_some() { "http" } else { "stdio" }
    }
}

/// What is wrong with a server's config, or why connecting to it failed (as its status and the
/// errors of the calls it refused say).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("name {name:?}: {why}")]
    Name { name: String, why: String },
    #[error("{server}: url: only http:// URLs are supported")]
    NotHttp { server: String },
    #[error("{server}: args and env go with a command, not a url")]
    ArgsWithUrl { server: String },
    #[error("{server}: give either a command (stdio) or a url (Streamable HTTP)")]
    NoTransport { server: String },
    #[error("{server}: headers go with a url, not a command")]
    HeadersWithCommand { server: String },
    #[error("{server}: timeouts must be at least 1 ms")]
    NoTimeout { server: String },
    #[error("servers over HTTP need the outbound guard's client")]
    NoClient,
    /// The outbound guard refuses the URL, or cannot use it.
    #[error("{0}")]
    Outbound(clutch_outbound::Error),
    #[error("header name {0:?}")]
    HeaderName(String),
    #[error("the value of header {0} is not valid")]
    HeaderValue(reqwest::header::HeaderName),
    #[error("cannot start `{command}`: {error}")]
    Spawn { command: String, error: std::io::Error },
    #[error("the command's stderr is not available")]
    NoStderr,
    #[error("the command's stdin and stdout are not available")]
    NoStdio,
    /// The MCP handshake failed: rmcp's words and their causes and, for a command, why it stopped
    /// (bounded, as they quote what the server said).
    #[error("{0}")]
    Handshake(String),
}

/// The MCP client adapter: every declared server, each kept connected until [`Servers::stop`].
#[derive(Clone)]
pub struct Servers {
    servers: Arc<HashMap<String, Arc<Server>>>,
    http: Option<clutch_outbound::Client>,
    stop: watch::Sender<bool>,
}

/// One server: its config and what its supervisor knows of it.
struct Server {
    config: ServerConfig,
    status: RwLock<Status>,
    /// Bumped whenever the connection changes (calls waiting for one watch it).
    changed: watch::Sender<u64>,
    /// Told by a call that found the connection broken (an HTTP server that went away keeps no
    /// process to exit): the supervisor connects again, with a new session.
    lost: tokio::sync::Notify,
    /// Until when each call (by its message's id) waits for a connection: the dispatcher asks for a
    /// call's annotations and then makes it, and both wait for the server, so the second finishes
    /// the first one's wait rather than starting another.
    waits: Mutex<HashMap<String, Instant>>,
}

struct Status {
    state: ServerState,
    error: Option<String>,
    restarts: u32,
    tools: Vec<rmcp::model::Tool>,
    service: Option<Arc<RunningService<RoleClient, ClientConfig>>>,
}

impl Servers {
    /// Starts a supervisor for each server (call within a tokio runtime). Servers given by URL are
    /// reached through the outbound guard with `guard`'s rules.
    pub fn start(configs: Vec<ServerConfig>, guard: Arc<clutch_core::guard::Policy>) -> Servers {
        // Streams of long calls stay open: each call's own timeout bounds it.
        let options = clutch_outbound::Options { timeout: Duration::from_secs(24 * 3600), ..Default::default() };
        let http = match clutch_outbound::Client::new(guard, &options) {
            Ok(client) => Some(client),
            Err(e) => {
                tracing::error!(error = %e, "no HTTP client for MCP servers over HTTP");
                None
            }
        };
        let (stop, _) = watch::channel(false);
        let servers: HashMap<String, Arc<Server>> = configs
            .into_iter()
            .map(|config| {
                let status =
                    Status { state: ServerState::Starting, error: None, restarts: 0, tools: Vec::new(), service: None };
                let (changed, _) = watch::channel(0);
                let server = Server {
                    config,
                    status: RwLock::new(status),
                    changed,
                    lost: tokio::sync::Notify::new(),
                    waits: Mutex::default(),
                };
                (server.config.name.clone(), Arc::new(server))
            })
            .collect();
        let this = Servers { servers: Arc::new(servers), http, stop };
        for server in this.servers.values() {
            tokio::spawn(keep_connected(server.clone(), this.http.clone(), this.stop.subscribe()));
        }
        this
    }

    /// Stops every server (their supervisors close the connections and end the commands).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until every server is ready or `timeout` passes; says whether all are.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let all = async {
            for server in self.servers.values() {
                server.wait_ready().await;
            }
        };
        tokio::time::timeout(timeout, all).await.is_ok()
    }

    fn server_of(&self, message: &Message) -> Option<(&Arc<Server>, String)> {
        let call = payload::read::<payload::ToolCall>(&message.payload)?;
        let (server, tool) = tool::split(ADAPTER, &call.tool)?;
        Some((self.servers.get(server)?, tool.to_owned()))
    }
}

impl Adapter for Servers {
    fn name(&self) -> &str {
        ADAPTER
    }

    fn can_handle(&self, message: &Message) -> bool {
        message.kind == MessageType::ToolCall && self.server_of(message).is_some()
    }

    fn outbound<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let Some((server, tool)) = self.server_of(message) else {
                return error(ErrorCode::ToolUnavailable, "no such MCP server is declared".into(), false);
            };
            let args = payload::read::<payload::ToolCall>(&message.payload).map(|c| c.args).unwrap_or_default();
            let answer = server.call(&message.id, &tool, args).await;
            server.waits.lock().unwrap_or_else(|e| e.into_inner()).remove(&message.id);
            answer
        })
    }

    fn servers(&self) -> Vec<ToolServer> {
        self.servers.values().map(|s| s.view()).collect()
    }

    fn annotations<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Option<ToolAnnotations>> {
        Box::pin(async move {
            let (server, tool) = self.server_of(message)?;
            // Its tools are known once it is connected (a start takes up calls before that).
            let _ = tokio::time::timeout_at(server.wait_until(&message.id), server.wait_ready()).await;
            server.annotations(&tool)
        })
    }
}

impl Server {
    fn status(&self) -> std::sync::RwLockReadGuard<'_, Status> {
        self.status.read().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, change: impl FnOnce(&mut Status)) {
        change(&mut self.status.write().unwrap_or_else(|e| e.into_inner()));
        self.changed.send_modify(|n| *n += 1);
    }

    fn view(&self) -> ToolServer {
        let status = self.status();
        let name = &self.config.name;
        ToolServer {
            name: format!("{ADAPTER}:{name}"),
            adapter: ADAPTER.to_owned(),
            transport: self.config.transport().to_owned(),
            state: status.state,
            error: status.error.clone(),
            restarts: status.restarts,
            tools: status
                .tools
                .iter()
                .map(|t| Tool {
                    name: format!("{ADAPTER}:{name}/{}", t.name),
                    title: t.title.clone(),
                    description: t.description.as_deref().map(str::to_owned),
                    input_schema: Value::Object((*t.input_schema).clone()),
                    annotations: annotations(t),
                })
                .collect(),
        }
    }

    fn annotations(&self, tool: &str) -> Option<ToolAnnotations> {
        self.status().tools.iter().find(|t| t.name == tool).map(annotations)
    }

    /// Until when call `call` waits for a connection: `connect_timeout_ms` from its first wait. A
    /// call that comes back later than that after its wait ended (it waited for an approval
    /// meanwhile) waits anew; waits long over are forgotten.
    fn wait_until(&self, call: &str) -> Instant {
        let now = Instant::now();
        let connect = Duration::from_millis(self.config.connect_timeout_ms);
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        waits.retain(|_, until| *until + connect > now);
        *waits.entry(call.to_owned()).or_insert(now + connect)
    }

    async fn wait_ready(&self) {
        let mut changed = self.changed.subscribe();
        while self.status().service.is_none() {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    async fn call(&self, call: &str, tool: &str, args: serde_json::Map<String, Value>) -> Answer {
        if tokio::time::timeout_at(self.wait_until(call), self.wait_ready()).await.is_err() {
            let why = self.status().error.clone().unwrap_or_else(|| "it is starting".into());
            return error(
                ErrorCode::ToolUnavailable,
                bounded(format!("MCP server {} is not connected ({why}); the call was not made", self.config.name)),
                true,
            );
        }
        let (service, known) = {
            let status = self.status();
            (status.service.clone(), status.tools.iter().find(|t| t.name == tool).map(annotations))
        };
        let Some(service) = service else {
            return error(ErrorCode::ToolUnavailable, format!("MCP server {} just stopped", self.config.name), true);
        };
        let Some(annotations) = known else {
            let names: Vec<String> = self.status().tools.iter().map(|t| t.name.to_string()).collect();
            return error(
                ErrorCode::NotFound,
                format!("MCP server {} has no tool `{tool}` (its tools: {})", self.config.name, names.join(", ")),
                false,
            );
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(args);
        let limit = Duration::from_millis(self.config.call_timeout_ms);
        match tokio::time::timeout(limit, service.call_tool(params)).await {
            Err(_) => error(
                ErrorCode::ToolTimeout,
                format!("{tool} on MCP server {} did not answer within {} ms", self.config.name, limit.as_millis()),
                annotations.retry_safe(),
            ),
            Ok(Ok(result)) if result.is_error == Some(true) => {
                let text: Vec<String> = result
                    .content
                    .iter()
                    .filter_map(|c| serde_json::to_value(c).ok())
                    .filter_map(|c| c.get("text").and_then(Value::as_str).map(str::to_owned))
                    .collect();
                let text = if text.is_empty() { "the tool reported an error".to_owned() } else { text.join("\n") };
                error(ErrorCode::ToolFailed, clutch_proto::error::clip(&text, 4000).into_owned(), false)
            }
            Ok(Ok(result)) => Answer::Result {
                content: result.content.iter().filter_map(|c| serde_json::to_value(c).ok()).collect(),
                structured_content: result.structured_content,
            },
            // The server refused the call (bad arguments, an unknown tool): it did not run.
            Ok(Err(ServiceError::McpError(e))) => {
                error(ErrorCode::ToolFailed, clutch_proto::error::clip(&e.message, 4000).into_owned(), false)
            }
            // The connection broke: the supervisor connects again. A request that never reached the
            // server (it refused the connection) was not made; any other may have run.
            Ok(Err(e)) => {
                self.lost.notify_waiters();
                if never_sent(&e) {
                    error(
                        ErrorCode::ToolUnavailable,
                        format!("MCP server {} is not reachable ({e}); the call was not made", self.config.name),
                        true,
                    )
                } else {
                    error(
                        ErrorCode::ToolInDoubt,
                        format!(
                            "MCP server {} stopped answering during the call ({e}): it may have run",
                            self.config.name
                        ),
                        annotations.retry_safe(),
                    )
                }
            }
        }
    }
}

/// How often a broken response stream of an HTTP server is resumed before its call is given up (as
/// in doubt): three times, 0.2 s, 0.4 s and 0.8 s apart. rmcp's default retries without end, so a
/// call to a server that went away would wait for its whole timeout.
#[derive(Debug)]
struct Resume;

impl rmcp::transport::common::client_side_sse::SseRetryPolicy for Resume {
    fn retry(&self, attempt: usize) -> Option<Duration> {
        (attempt < 3).then(|| Duration::from_millis(200 << attempt))
    }
}

/// Whether a call failed before its request reached the server: an HTTP connection that could not be
/// made (once connected, a request may have been read, so anything else is in doubt).
fn never_sent(e: &ServiceError) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    // rmcp names neither the transport's error nor the client's as a source: each step is taken here.
    let ServiceError::TransportSend(sent) = e else { return false };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(sent.error.as_ref());
    while let Some(err) = source {
        let client = match err.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(e)) => Some(e),
            _ => err.downcast_ref::<reqwest::Error>(),
        };
        if client.is_some_and(reqwest::Error::is_connect) {
            return true;
        }
        source = err.source();
    }
    false
}

fn error(code: ErrorCode, message: String, retryable: bool) -> Answer {
    Answer::Error { code, message, retryable }
}

/// MCP's hints, absent ones at MCP's defaults (not read-only, destructive, not idempotent, open).
fn annotations(tool: &rmcp::model::Tool) -> ToolAnnotations {
    let a = tool.annotations.as_ref();
    ToolAnnotations {
        read_only: a.and_then(|a| a.read_only_hint).unwrap_or(false),
        destructive: a.and_then(|a| a.destructive_hint).unwrap_or(true),
        idempotent: a.and_then(|a| a.idempotent_hint).unwrap_or(false),
        open_world: a.and_then(|a| a.open_world_hint).unwrap_or(true),
    }
}

/// Keeps one server connected until `stop` is set: core's supervisor runs [`attempt`] again after
/// each end, 0.2 s doubling to 30 s later (the server `Restarting` meanwhile), and drops the one
/// under way when the daemon stops, which ends the command (`kill_on_drop`).
async fn keep_connected(server: Arc<Server>, http: Option<clutch_outbound::Client>, mut stop: watch::Receiver<bool>) {
    let service = format!("{ADAPTER}:{}", server.config.name);
    let restart = Restart { first: Duration::from_millis(200), max: Duration::from_secs(30) };
    let stopping = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    supervise::run(&service, restart, stopping, || async {
        let why = attempt(&server, http.as_ref()).await;
        server.set(|s| {
            s.error = Some(why.clone());
            s.state = ServerState::Restarting;
            s.restarts += 1;
        });
        Exit::Failed(why)
    })
    .await;
    server.set(|s| {
        s.state = ServerState::Stopped;
        s.service = None;
    });
}

/// One start of a server: connects, lists its tools, serves calls until the connection ends (the
/// server `Ready` meanwhile); why it ended.
async fn attempt(server: &Server, http: Option<&clutch_outbound::Client>) -> String {
    let connect = Duration::from_millis(server.config.connect_timeout_ms);
    // What this start's command writes on stderr, kept past a connection given up on.
    let said = Tail::default();
    let (service, mut process) = match tokio::time::timeout(connect, connect_to(&server.config, http, &said)).await {
        Ok(Ok(connected)) => connected,
        Ok(Err(e)) => return e.to_string(),
        Err(_) => return bounded(format!("connecting took longer than {} ms{}", connect.as_millis(), said.said())),
    };
    let service = Arc::new(service);
    let why = match tokio::time::timeout(connect, service.peer().list_all_tools()).await {
        Ok(Ok(tools)) => {
            tracing::info!(server = %server.config.name, tools = tools.len(), "MCP server ready");
            server.set(|s| {
                s.state = ServerState::Ready;
                s.error = None;
                s.tools = tools;
                s.service = Some(service.clone());
            });
            let why = ended(server, &service, process.as_mut()).await;
            server.set(|s| s.service = None);
            why
        }
        Ok(Err(e)) => format!("listing its tools failed: {e}"),
        Err(_) => "listing its tools timed out".into(),
    };
    if let Some(process) = process.as_mut() {
        let _ = process.child.kill().await;
    }
    why
}

/// Waits for the connection to end (the command exits, the transport closes, a call finds it
/// broken); says why.
async fn ended(
    server: &Server,
    service: &RunningService<RoleClient, ClientConfig>,
    process: Option<&mut Process>,
) -> String {
    let exited = async {
        match process {
            Some(process) => {
                let _ = process.child.wait().await;
                process.stopped(EXIT_WAIT).await
            }
            None => std::future::pending().await,
        }
    };
    let closed = async {
        while !service.is_closed() {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        "its connection closed".to_owned()
    };
    tokio::select! {
        why = exited => why,
        why = closed => why,
        () = server.lost.notified() => "a call found its connection broken".to_owned(),
    }
}

/// How many of the last lines a command wrote on stderr an error quotes.
const TAIL_LINES: usize = 5;
/// How long a command whose connection ended is given to exit, and its stderr to reach its end,
/// before it is killed (and said to have stopped without them).
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// The last lines a server's command wrote on its stderr, for the errors that say why it stopped:
/// at most [`TAIL_LINES`], each cut to what an error quotes of any input
/// (`proto::error::QUOTE_MAX`). Only what the command itself printed: never its arguments or
/// environment.
#[derive(Clone, Default)]
struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    fn push(&self, line: &str) {
        let line = line.trim_end();
        if line.is_empty() {
            return;
        }
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(clutch_proto::error::quote(line).into_owned());
    }

    /// `; its stderr ended with: `a` `b``, or nothing when it wrote nothing.
    fn said(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.is_empty() {
            return String::new();
        }
        let quoted: Vec<String> = lines.iter().map(|l| format!("`{}`", l.replace('`', "'"))).collect();
        format!("; its stderr ended with: {}", quoted.join(" "))
    }
}

/// `e` and what caused it (`... error sending request ...: tcp connect error: Connection refused`):
/// rmcp's errors name the transport's error, and its HTTP client's the request's, only in their
/// words, not as their source, so each step is taken here.
fn causes(e: &ClientInitializeError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut out = e.to_string();
    let mut source: Option<&(dyn std::error::Error + 'static)> = match e {
        ClientInitializeError::TransportError { error, .. } => Some(error),
        _ => std::error::Error::source(e),
    };
    while let Some(cause) = source {
        let said = cause.to_string();
        if !out.contains(&said) {
            out = format!("{out}: {said}");
        }
        source = match cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(client)) => Some(client),
            _ => cause.source(),
        };
    }
    out
}

/// An error about a server, bounded as every error is (it quotes what the server said).
fn bounded(why: String) -> String {
    clutch_proto::error::bound_text(&why, clutch_proto::error::MESSAGE_MAX).into_owned()
}

/// A server's command as it runs: the process, and the task reading its stderr (each line to the
/// daemon's log, at debug, and the last ones to `tail`), which ends with it.
struct Process {
    child: Child,
    reader: tokio::task::JoinHandle<()>,
    tail: Tail,
}

impl Process {
    /// Why the command stopped: its exit status and the last lines of its stderr. It is given `grace`
    /// to exit by itself (its connection ended: it is on its way out), then killed.
    async fn stopped(&mut self, grace: Duration) -> String {
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => format!("its command exited ({status})"),
            Ok(Err(e)) => format!("its command could not be waited for: {e}"),
            Err(_) => {
                let _ = self.child.kill().await;
                "its command was killed".to_owned()
            }
        };
        // The reader ends at the stderr's end: the last lines are in the tail then.
        let _ = tokio::time::timeout(EXIT_WAIT, &mut self.reader).await;
        bounded(format!("{status}{}", self.tail.said()))
    }
}

type Connected = (RunningService<RoleClient, ClientConfig>, Option<Process>);

async fn connect_to(
    config: &ServerConfig,
    http: Option<&clutch_outbound::Client>,
    tail: &Tail,
) -> Result<Connected, Error> {
    let mut info = ClientConfig::default();
    info.client_info = Implementation::new("clutch", env!("CARGO_PKG_VERSION"));
    let lifecycle =
        ClientLifecycleMode::Auto { preferred_versions: vec![ProtocolVersion::V_2026_07_28], legacy_version: None };
    if let Some(url) = &config.url {
        let http = http.ok_or(Error::NoClient)?;
        let client = http.for_url(url).map_err(Error::Outbound)?;
        let mut transport = StreamableHttpClientTransportConfig::with_uri(url.clone());
        transport.retry_config = Arc::new(Resume);
        for (name, value) in &config.headers {
            let name =
                reqwest::header::HeaderName::try_from(name.as_str()).map_err(|_| Error::HeaderName(name.clone()))?;
            let value =
                reqwest::header::HeaderValue::try_from(value.as_str()).map_err(|_| Error::HeaderValue(name.clone()))?;
            transport.custom_headers.insert(name, value);
        }
        let transport = StreamableHttpClientTransport::with_client(client, transport);
        let service =
            info.serve_with_lifecycle(transport, lifecycle).await.map_err(|e| Error::Handshake(bounded(causes(&e))))?;
        return Ok((service, None));
    }
    let command = config.command.as_deref().unwrap_or_default();
    let mut child = Command::new(command)
        .args(&config.args)
        .envs(&config.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| Error::Spawn { command: command.to_owned(), error })?;
    // What it writes on stderr goes to the daemon's log, at debug; its last lines are kept.
    let Some(stderr) = child.stderr.take() else {
        return Err(Error::NoStderr);
    };
    let reader = {
        let (name, tail) = (config.name.clone(), tail.clone());
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %name, "{}", clutch_proto::error::clip(&line, 1000));
                tail.push(&line);
            }
        })
    };
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(Error::NoStdio);
    };
    let mut process = Process { child, reader, tail: tail.clone() };
    match info.serve_with_lifecycle((stdout, stdin), lifecycle).await {
        Ok(service) => Ok((service, Some(process))),
        Err(e) => {
            // Its stdout closed, or its stdin: the command is exiting (a server that cannot start
            // says why on stderr). Anything else (it spoke no MCP): it is killed at once.
            let exiting =
                matches!(e, ClientInitializeError::ConnectionClosed(_) | ClientInitializeError::TransportError { .. });
            let why = process.stopped(if exiting { EXIT_WAIT } else { Duration::ZERO }).await;
            Err(Error::Handshake(bounded(format!("it did not complete the MCP handshake ({}); {why}", causes(&e)))))
        }
    }
}
