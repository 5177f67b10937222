//! The MCP face's integration tests: its endpoints served on 127.0.0.1:0 over a real SQLite store
//! and the real engine, driven by rmcp's own client over Streamable HTTP in both protocol eras and
//! by plain HTTP where headers matter (Origin, Host); who may call each tool (`access`) with the
//! caller the daemon's bearer-token layer would have put in the request. That layer and the stdio
//! bridge are tested with the real binary (crates/clutch/tests/it/mcp.rs); the official Python SDK
//! and conformance suite run in scripts/test-mcp.

mod access;
mod bounded;
mod docs;
mod errors;
mod fast;
mod fuzz;
mod lifecycle;
mod lists;
mod origin;
mod sessions;
mod tools;
mod workflows;

use std::sync::Arc;

use clutch_app::{App, face};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use serde_json::{Map, Value};

/// A daemon with only the MCP endpoints (`clutch-app` with the MCP face and no gateway) on
/// 127.0.0.1:0, over a SQLite store.
pub struct Daemon {
    pub url: String,
    pub engine: clutch_core::Engine,
    app: App,
    _dir: tempfile::TempDir,
}

pub async fn start() -> Daemon {
    start_with(clutch_mcp::Options::default()).await
}

pub async fn start_with(options: clutch_mcp::Options) -> Daemon {
    start_faces(options, false).await
}

/// The same, with the positions runner when `positions` is set.
pub async fn start_faces(options: clutch_mcp::Options, positions: bool) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let engine = clutch_core::engine::Options {
        heartbeat_interval: std::time::Duration::from_millis(2500),
        ..clutch_core::engine::Options::default()
    };
    let mut builder = App::builder(Arc::new(store)).engine(engine).face(face::Mcp(options));
    if positions {
        // The shipped positions; no provider, so every role is named at invocation.
        builder = builder.face(face::Positions::default());
    }
    let mut app = builder.build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    app.listen(listener);
    Daemon { url: format!("http://{addr}"), engine: app.engine.clone(), app, _dir: dir }
}

impl Daemon {
    pub async fn stop(self) {
        self.app.stop().await.unwrap();
    }
}

/// The two protocol eras a client may speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// The `initialize` handshake (2025-11-25).
    Initialize,
    /// 2026-07-28: `server/discover`, then self-contained requests.
    Modern,
}

pub const ERAS: [Era; 2] = [Era::Initialize, Era::Modern];

pub type Client = RunningService<RoleClient, ClientConfig>;

/// rmcp's client on `url` (an endpoint such as `http://…/mcp`) in `era`.
pub async fn connect(url: &str, era: Era) -> Client {
    connect_with(url, era, ClientCapabilities::default()).await
}

/// The same, declaring `capabilities` (MCP's tasks extension, say).
pub async fn connect_with(url: &str, era: Era, capabilities: ClientCapabilities) -> Client {
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url));
    let mut config = ClientConfig::default();
    config.capabilities = capabilities;
    config.client_info = Implementation::new("clutch-mcp-tests", "0");
    let lifecycle = match era {
        Era::Initialize => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
    };
    let client = config.serve_with_lifecycle(transport, lifecycle).await.expect("connect");
    let version = client.peer_info().expect("server info").protocol_version.clone();
    match era {
        Era::Initialize => assert_eq!(version, ProtocolVersion::V_2025_11_25),
        Era::Modern => assert_eq!(version, ProtocolVersion::V_2026_07_28),
    }
    client
}

/// Calls `tool` with `arguments` (a JSON object).
pub async fn call(client: &Client, tool: &'static str, arguments: Value) -> Result<CallToolResult, ServiceError> {
    let mut params = CallToolRequestParams::new(tool);
    params.arguments = Some(object(arguments));
    client.call_tool(params).await
}

/// The structured answer of a successful call, checked against its text twin.
pub async fn ok(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await.expect("the call reaches the tool");
    assert_eq!(result.is_error, Some(false), "{tool} failed: {result:?}");
    structured(&result)
}

/// The error body of a failed call (`isError: true`).
pub async fn refused(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await.expect("the call reaches the tool");
    assert_eq!(result.is_error, Some(true), "{tool} succeeded: {result:?}");
    structured(&result)
}

pub fn structured(result: &CallToolResult) -> Value {
    let value = result.structured_content.clone().expect("structuredContent");
    let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("a text block");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value, "the text content mirrors structuredContent");
    value
}

pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}
