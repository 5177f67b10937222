//! The stdio bridge behind `clutch mcp`: an MCP server on stdin/stdout whose `tools/list` and
//! `tools/call` are forwarded to the daemon's Streamable HTTP endpoint, so every tool is implemented
//! once, in the daemon, and a stdio client sees exactly what an HTTP client sees. stdout carries
//! protocol messages only; anything else goes to the log (stderr).

use std::time::Duration;

use clutch_core::Refusal;
use clutch_proto::ErrorCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerConfig,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceError, ServiceExt};

use crate::Profile;
use crate::error::{Error, Result};

/// Where the daemon is and how to reach it.
#[derive(Debug, Clone)]
pub struct Options {
    /// The daemon's base URL, `http://host:port`.
    pub url: String,
    /// Its API token, sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// Which endpoint's tools to offer.
    pub profile: Profile,
}

/// Connects to the daemon, then serves stdio until the client closes it. Fails at once, before
/// reading stdin, when no daemon answers.
pub async fn run(options: Options) -> Result<()> {
    let upstream = connect(&options).await?;
    let bridge = Bridge { info: info(&upstream), upstream: upstream.peer().clone(), url: options.url.clone() };
    tracing::info!(url = %options.url, profile = %options.profile, "serving MCP on stdio");
    let served = bridge.serve(rmcp::transport::stdio()).await.map_err(|e| Error::Stdio(e.to_string()))?;
    let reason = served.waiting().await.map_err(|e| Error::Stdio(e.to_string()))?;
    tracing::debug!(?reason, "stdio closed");
    let _ = upstream.cancel().await;
    Ok(())
}

/// An MCP client of the daemon's endpoint for `options.profile`, speaking 2026-07-28 (one
/// self-contained POST per call: no session to lose when the daemon restarts).
pub async fn connect(options: &Options) -> Result<RunningService<RoleClient, ClientConfig>> {
    let base = options.url.trim_end_matches('/');
    if !base.starts_with("http://") {
        return Err(Error::Config(format!("invalid daemon URL {:?}: only http://host:port is supported", options.url)));
    }
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| Error::Config(format!("cannot make an HTTP client: {e}")))?;
    // A plain health check first tells "nothing there" apart from "something refused MCP".
    let health = http.get(format!("{base}/healthz")).timeout(Duration::from_secs(10)).send().await;
    if let Err(e) = health
        && (e.is_connect() || e.is_timeout())
    {
        return Err(Error::NoDaemon { url: base.to_owned() });
    }
    let endpoint = format!("{base}{}", options.profile.path());
    let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.clone());
    if let Some(token) = &options.token {
        config = config.auth_header(token.clone());
    }
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let mut client = ClientConfig::default();
    client.client_info = Implementation::new("clutch-mcp-bridge", env!("CARGO_PKG_VERSION"));
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    client
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| Error::Upstream { url: endpoint, detail: e.to_string() })
}

/// What the bridge says about itself: the daemon's own description.
fn info(upstream: &RunningService<RoleClient, ClientConfig>) -> ServerConfig {
    // No tasks: the bridge forwards tools only, so its clients get every answer at once.
    let mut info = ServerConfig::new(crate::server::capabilities(false));
    info.server_info = Implementation::new("clutch", env!("CARGO_PKG_VERSION"));
    if let Some(peer) = upstream.peer_info() {
        info.instructions = peer.instructions.clone();
    }
    info
}

#[derive(Clone)]
struct Bridge {
    upstream: Peer<RoleClient>,
    info: ServerConfig,
    url: String,
}

impl Bridge {
    /// A transport failure as something a model can act on (a protocol error stays one).
    fn unreachable(&self, e: ServiceError) -> std::result::Result<CallToolResult, ErrorData> {
        match e {
            ServiceError::McpError(e) => Err(e),
            other => {
                tracing::warn!(url = %self.url, error = %other, "the daemon did not answer a forwarded call");
                let refusal = Refusal::new(
                    ErrorCode::Unavailable,
                    format!("the Clutch daemon at {} did not answer: {other}", self.url),
                )
                .hint("wait a moment and call again; if it keeps failing, (re)start the daemon with `clutch serve`");
                Ok(crate::error::tool_result(&refusal))
            }
        }
    }
}

impl ServerHandler for Bridge {
    crate::server::undeclared!();

    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    /// Accepted, so that 2025-11-25 clients may set it; Clutch sends no log messages over MCP.
    #[allow(deprecated)] // logging is deprecated at 2026-07-28
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        // The client's own request metadata describes its link to us, not ours to the daemon.
        let request = request.map(|mut r| {
            r.meta = None;
            r
        });
        self.upstream.list_tools(request).await.map_err(|e| match e {
            ServiceError::McpError(e) => e,
            other => {
                ErrorData::internal_error(format!("the Clutch daemon at {} did not answer: {other}", self.url), None)
            }
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let mut forwarded = CallToolRequestParams::new(request.name);
        forwarded.arguments = request.arguments;
        match self.upstream.call_tool_once(forwarded).await {
            Ok(response) => Ok(response),
            Err(e) => self.unreachable(e).map(Into::into),
        }
    }
}
