//! Browser-borne requests reach the MCP endpoints only as the daemon's one browser policy
//! (`clutch_gateway::browser`, in front of every route) allows: a foreign `Origin` (another page on
//! this machine and `null` included) and a `Host` that is not the daemon's are refused with 403 and
//! the policy's codes, the daemon's own origin and requests without one pass. The face has no check
//! of its own (configured hosts and origins: the gateway's tests and the binary's).

use serde_json::{Value, json};

use crate::start;

/// An `initialize` POSTed to `path` with `headers`: the status and the body.
async fn initialize(url: &str, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let mut request = reqwest::Client::new()
        .post(format!("{url}{path}"))
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
async fn foreign_origins_and_hosts_are_refused_by_the_daemons_browser_policy() {
    let daemon = start().await;
    let own = daemon.url.trim_start_matches("http://").to_owned();
    let port = own.rsplit(':').next().unwrap().to_owned();
    for path in ["/mcp", "/mcp/worker"] {
        for origin in ["https://evil.example", "null", "http://localhost:5173", "http://10.0.0.1:7700"] {
            let (status, body) = initialize(&daemon.url, path, &[("origin", origin)]).await;
            assert_eq!(status, 403, "{path} from {origin}: {body}");
            assert_eq!(body["error"]["code"], "ORIGIN_NOT_ALLOWED", "{path} from {origin}: {body}");
        }
        // DNS rebinding: the attacker's name as Host (its page is same-origin with itself).
        let rebound = format!("evil.example:{port}");
        let origin = format!("http://{rebound}");
        let (status, body) = initialize(&daemon.url, path, &[("host", &rebound), ("origin", &origin)]).await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("HOST_NOT_ALLOWED")), "{path}: {body}");

        let own_origin = format!("http://{own}");
        for headers in [vec![], vec![("origin", own_origin.as_str())], vec![("host", "localhost")]] {
            let (status, body) = initialize(&daemon.url, path, &headers).await;
            assert_eq!(status, 200, "{path} {headers:?}: {body}");
            assert_eq!(body["result"]["serverInfo"]["name"], "clutch");
        }
    }
    daemon.stop().await;
}
