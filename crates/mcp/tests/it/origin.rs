//! Browser-borne requests: a foreign `Origin` is refused with 403 and a JSON-RPC error, loopback and
//! configured origins pass, requests without one pass; and `Host` names a loopback address unless the
//! daemon says otherwise (DNS rebinding).

use serde_json::{Value, json};

use crate::{start, start_with};

/// An `initialize` POSTed with `headers`: the status and the body.
async fn initialize(url: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let mut request = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test]
async fn foreign_origins_are_refused_with_a_json_rpc_error() {
    let daemon = start().await;
    let (status, body) = initialize(&daemon.url, &[("origin", "https://evil.example")]).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32003);
    assert_eq!(body["error"]["data"]["code"], "FORBIDDEN");
    assert!(body["error"]["message"].as_str().unwrap().contains("https://evil.example"), "{body}");

    for (status_expected, origin) in [
        (403, "null"),
        (403, "http://10.0.0.1:7700"),
        (200, "http://localhost:5173"),
        (200, "http://127.0.0.1:7700"),
        (200, "http://[::1]:7700"),
    ] {
        let (status, body) = initialize(&daemon.url, &[("origin", origin)]).await;
        assert_eq!(status, status_expected, "{origin}: {body}");
    }
    let (status, body) = initialize(&daemon.url, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "clutch");
    // The worker endpoint is guarded the same way.
    let response = reqwest::Client::new()
        .post(format!("{}/mcp/worker", daemon.url))
        .header("origin", "https://evil.example")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    daemon.stop().await;
}

#[tokio::test]
async fn configured_origins_pass() {
    let options = clutch_mcp::Options { allowed_origins: vec!["https://app.example.com".into()], ..Default::default() };
    let daemon = start_with(options).await;
    assert_eq!(initialize(&daemon.url, &[("origin", "https://app.example.com")]).await.0, 200);
    assert_eq!(initialize(&daemon.url, &[("origin", "https://app.example.com:8443")]).await.0, 403);
    assert_eq!(initialize(&daemon.url, &[("origin", "http://app.example.com")]).await.0, 403);
    daemon.stop().await;
    let bad = clutch_mcp::Options { allowed_origins: vec!["app.example.com".into()], ..Default::default() };
    let store_dir = tempfile::tempdir().unwrap();
    let store = clutch_store_sqlite::Store::open(store_dir.path()).unwrap();
    let running = clutch_core::start(std::sync::Arc::new(store), Default::default(), Default::default()).await.unwrap();
    let Err(e) = clutch_mcp::router(running.engine.clone(), &bad) else { panic!("a malformed origin is refused") };
    assert!(e.contains("app.example.com"), "{e}");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn hosts_other_than_loopback_are_refused_unless_the_daemon_listens_beyond_it() {
    let daemon = start().await;
    let (status, _) = initialize(&daemon.url, &[("host", "evil.example")]).await;
    assert_eq!(status, 403, "DNS rebinding: a foreign Host is refused");
    daemon.stop().await;
    let daemon = start_with(clutch_mcp::Options { any_host: true, ..Default::default() }).await;
    let (status, body) = initialize(&daemon.url, &[("host", "clutch.internal:7700")]).await;
    assert_eq!(status, 200, "{body}");
    daemon.stop().await;
}
