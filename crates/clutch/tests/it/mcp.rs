//! `clutch mcp` (the stdio bridge) and `/mcp` on the real daemon: rmcp's client drives the bridge
//! over the child's stdin/stdout in both eras and sees exactly the daemon's tools; API tokens apply
//! to `/mcp` and to the agents a token may act as; with no daemon, the bridge says how to start one.

use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use serde_json::{Value, json};

use crate::support::{Daemon, clutch, run};

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

fn lifecycle(modern: bool) -> ClientLifecycleMode {
    if modern {
        ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
    } else {
        ClientLifecycleMode::Initialize
    }
}

/// `clutch mcp ARGS` as a child, with rmcp's client on its stdio; its stderr is collected.
async fn bridge(args: &[&str], modern: bool) -> (Client, tokio::process::Child) {
    let mut cmd = tokio::process::Command::from(clutch());
    cmd.arg("mcp").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn clutch mcp");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client =
        ClientConfig::default().serve_with_lifecycle((stdout, stdin), lifecycle(modern)).await.expect("connect");
    (client, child)
}

pub(crate) async fn http(url: &str, token: Option<&str>, modern: bool) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    ClientConfig::default().serve_with_lifecycle(transport, lifecycle(modern)).await.map_err(|e| e.to_string())
}

pub(crate) async fn call(client: &Client, tool: &'static str, arguments: Value) -> (bool, Value) {
    let mut params = CallToolRequestParams::new(tool);
    params.arguments = arguments.as_object().cloned();
    let result = client.call_tool(params).await.expect("the call reaches the tool");
    (result.is_error == Some(true), result.structured_content.expect("structuredContent"))
}

async fn tool_names(client: &Client) -> Vec<String> {
    client.list_all_tools().await.unwrap().into_iter().map(|t| t.name.into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_bridge_serves_the_daemons_tools_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let direct = http(&format!("{}/mcp", daemon.url), None, true).await.unwrap();
    let direct_tools = serde_json::to_value(direct.list_all_tools().await.unwrap()).unwrap();
    for modern in [false, true] {
        let (client, mut child) = bridge(&["--url", &daemon.url], modern).await;
        let version = client.peer_info().unwrap().protocol_version.clone();
        assert_eq!(version.as_str(), if modern { "2026-07-28" } else { "2025-11-25" });
        let tools = serde_json::to_value(client.list_all_tools().await.unwrap()).unwrap();
        assert_eq!(tools, direct_tools, "the bridge lists exactly the daemon's tools");

        let name = if modern { "stdio-modern" } else { "stdio-legacy" };
        let (failed, answer) = call(&client, "agent_register", json!({"name": name, "runtime": "claude_code"})).await;
        assert!(!failed, "{answer}");
        assert_eq!(answer, json!({"id": format!("agent:{name}"), "name": name, "status": "online"}));
        let (failed, beat) = call(&client, "agent_heartbeat", json!({"agent_id": format!("agent:{name}")})).await;
        assert!(!failed && beat["success"] == true && beat["next_heartbeat_ms"] == 10_000, "{beat}");
        // The daemon registered it: an HTTP client sees it.
        let mut params = CallToolRequestParams::new("agent_list");
        params.arguments = Some(Default::default());
        let listed = direct.call_tool(params).await.unwrap().structured_content.unwrap();
        assert!(listed["agents"].as_array().unwrap().iter().any(|a| a["id"] == format!("agent:{name}")), "{listed}");
        let (failed, body) = call(&client, "agent_heartbeat", json!({"agent_id": "agent:ghost", "extra": 1})).await;
        assert!(failed && body["code"] == "VALIDATION_FAILED" && body["field"] == "extra", "{body}");
        let (failed, _) = call(&client, "agent_unregister", json!({"id": format!("agent:{name}")})).await;
        assert!(!failed);
        // An unknown tool stays a protocol error through the bridge.
        let params = CallToolRequestParams::new("no_such_tool");
        assert!(matches!(client.call_tool(params).await, Err(ServiceError::McpError(e)) if e.code.0 == -32602));

        client.cancel().await.unwrap();
        let status = tokio::time::timeout(crate::support::DEADLINE, child.wait()).await.expect("exits").unwrap();
        assert!(status.success(), "the bridge exits cleanly when stdin closes: {status:?}");
    }
    // --profile worker: the lifecycle tools only.
    let (client, _child) = bridge(&["--url", &daemon.url, "--profile", "worker"], true).await;
    let names = tool_names(&client).await;
    for lifecycle in ["agent_register", "agent_heartbeat", "task_claim", "checkpoint_add", "agent_unregister"] {
        assert!(names.iter().any(|n| n == lifecycle), "{lifecycle} missing from {names:?}");
    }
    for coordination in ["agent_list", "workflow_create", "workflow_set_plan"] {
        assert!(!names.iter().any(|n| n == coordination), "{coordination} offered to a worker: {names:?}");
    }
    client.cancel().await.unwrap();
    direct.cancel().await.unwrap();
    drop(daemon);
}

#[test]
fn without_a_daemon_the_bridge_says_how_to_start_one() {
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cmd = clutch();
    cmd.args(["mcp", "--url", &format!("http://127.0.0.1:{port}")]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "stdout carries MCP messages only: {out:?}");
    assert!(out.stderr.contains("no Clutch daemon") && out.stderr.contains("clutch serve"), "{out:?}");
    let mut cmd = clutch();
    cmd.args(["mcp", "--profile", "boss"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(2), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_mcp_and_the_agents_a_token_may_act_as() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policy")).unwrap();
    std::fs::write(
        dir.path().join("policy/org.yaml"),
        "tokens:\n  - {name: ken, role: agent, agent_id: agent:ken, token: ken-secret}\n  \
         - {name: dash, role: observer, token: dash-secret}\n",
    )
    .unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        "data",
        "--config-dir",
        "policy",
    ]);
    let daemon = Daemon::spawn(cmd);
    let endpoint = format!("{}/mcp", daemon.url);

    let response = reqwest::Client::new()
        .post(&endpoint)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401, "no token, no MCP");
    let refused = http(&endpoint, None, true).await;
    assert!(refused.is_err(), "rmcp's client cannot connect without a token");

    let ken = http(&endpoint, Some("ken-secret"), true).await.unwrap();
    let (failed, body) = call(&ken, "agent_register", json!({"name": "ken", "runtime": "claude_code"})).await;
    assert!(!failed, "{body}");
    let (failed, body) = call(&ken, "agent_register", json!({"name": "tom", "runtime": "claude_code"})).await;
    assert!(failed, "{body}");
    assert_eq!((body["code"].as_str(), body["recoverable"].as_bool()), (Some("FORBIDDEN"), Some(false)), "{body}");
    assert_eq!(body["field"], "name");

    // The bridge carries its token (CLUTCH_TOKEN or --token).
    let (dash, _child) = bridge(&["--url", &daemon.url, "--token", "dash-secret"], false).await;
    let (failed, listed) = call(&dash, "agent_list", json!({})).await;
    assert!(!failed && listed["agents"].as_array().unwrap().len() == 1, "{listed}");
    let (failed, body) = call(&dash, "agent_heartbeat", json!({"agent_id": "agent:ken"})).await;
    assert!(failed && body["code"] == "FORBIDDEN", "an observer only reads: {body}");
    dash.cancel().await.unwrap();
    ken.cancel().await.unwrap();
    drop(daemon);
}
