//! Bounded answers: a body that is not JSON gets the transport's JSON-RPC parse error (400), not a
//! 415; and however large the input an error is about (a 5 MB method, tool or argument name,
//! thousands of mistakes), the answer stays small, with the fast path and without it.

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::start;

/// The error bound the issue asks for: a 5 MB name yields an error under 4 KB.
const SMALL: usize = 4096;

/// The two routers: with the fast path and without it.
fn routers(engine: &clutch_core::Engine, body_limit_bytes: usize) -> [(bool, axum::Router); 2] {
    [true, false].map(|fast_path| {
        let options = clutch_mcp::Options { body_limit_bytes, fast_path };
        (fast_path, clutch_mcp::router(engine.clone(), &options))
    })
}

pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub size: usize,
    pub body: Value,
}

/// POSTs `body` to `/mcp` as a client would (JSON, both media types accepted), `headers` set too.
pub async fn post(router: &axum::Router, body: Body, headers: &[(&str, &str)]) -> Answer {
    let mut request = Request::builder().method("POST").uri("/mcp").body(body).unwrap();
    let defaults = [
        ("host", "127.0.0.1:7700"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    for (name, value) in defaults.iter().chain(headers) {
        let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Answer { status, content_type, size: bytes.len(), body }
}

/// The headers of a 2026-07-28 request for `method` (and tool `name`).
fn modern<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
    headers.extend(name.map(|n| ("mcp-name", n)));
    headers
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn body(value: &Value) -> Body {
    Body::from(serde_json::to_vec(value).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_json_rpc_gets_a_json_rpc_error_with_400() {
    let daemon = start().await;
    for (fast, router) in routers(&daemon.engine, 8 << 20) {
        for (text, code) in [
            (&b"{not json"[..], -32700),
            (b"", -32700),
            (b"{\"jsonrpc\": \"2.0\", \"id\": 1, ", -32700),
            (b"{}", -32600),
            (b"[1, 2]", -32600),
            (b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": 5}", -32600),
        ] {
            let shown = String::from_utf8_lossy(text);
            let a = post(&router, Body::from(text.to_vec()), &[]).await;
            assert_eq!((a.status, a.content_type.as_str()), (400, "application/json"), "{fast} {shown}: {}", a.body);
            assert_eq!(a.body["jsonrpc"], "2.0");
            assert_eq!(a.body["error"]["code"], code, "{fast} {shown}: {}", a.body);
            assert!(a.body.get("id").is_none(), "{}", a.body);
            // Sent in chunks, without a length: the same.
            let chunks = text.chunks(3).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>();
            let b = post(&router, Body::from_stream(futures_util::stream::iter(chunks)), &[]).await;
            assert_eq!((b.status, &b.body), (400, &a.body), "{fast} {shown} in chunks");
        }
        // What rmcp refuses before reading the body stays its own answer.
        let a = post(&router, Body::from("{"), &[("content-type", "text/plain")]).await;
        assert_eq!(a.status, 415, "{fast}");
        let a = post(&router, Body::from("{"), &[("accept", "application/json")]).await;
        assert_eq!(a.status, 406, "{fast}");
    }
    // Past the body limit, whether or not the length is declared: rmcp's 413.
    for (fast, router) in routers(&daemon.engine, 64) {
        let text = format!("{{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"{}\"}}", "x".repeat(100));
        let a = post(&router, Body::from(text.clone()), &[]).await;
        assert_eq!(a.status, 413, "{fast}: {}", a.body);
        let chunks = text.as_bytes().chunks(10).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>();
        let a = post(&router, Body::from_stream(futures_util::stream::iter(chunks)), &[]).await;
        assert_eq!(a.status, 413, "{fast} in chunks: {}", a.body);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_megabyte_names_yield_errors_under_4_kb() {
    let daemon = start().await;
    let huge = "m".repeat(5 << 20);
    let quoted = format!("{}…", "m".repeat(clutch_proto::error::QUOTE_MAX - 1));
    for (fast, router) in routers(&daemon.engine, 8 << 20) {
        // An unknown method: rmcp's answer is the method itself, quoted short.
        let a = post(&router, body(&json!({"jsonrpc": "2.0", "id": 1, "method": huge})), &[]).await;
        assert_eq!((a.status, &a.body["error"]["code"]), (200, &json!(-32601)), "{fast}");
        assert_eq!(a.body["error"]["message"], quoted.as_str());
        assert!(a.size < SMALL, "{fast} method: {} bytes", a.size);
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": huge, "params": {"_meta": meta()}});
        let a = post(&router, body(&request), &modern("x", None)).await;
        assert!(a.status == 400 && a.size < SMALL, "{fast} method (2026-07-28): {} bytes, {}", a.size, a.status);

        // An unknown tool, in both eras.
        let call = |name: &str, arguments: Value| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments, "_meta": meta()}})
        };
        let a = post(&router, body(&call(&huge, json!({}))), &modern("tools/call", Some("x"))).await;
        assert!(a.status == 400 && a.size < SMALL, "{fast} tool (2026-07-28): {} bytes, {}", a.size, a.status);
        let mut legacy = call(&huge, json!({}));
        legacy["params"].as_object_mut().unwrap().remove("_meta");
        let a = post(&router, body(&legacy), &[]).await;
        assert_eq!(a.body["error"]["code"], -32602, "{fast}");
        assert!(a.body["error"]["message"].as_str().unwrap().contains(&format!("unknown tool `{quoted}`")));
        assert!(a.size < SMALL, "{fast} tool: {} bytes", a.size);

        // An unknown argument: a tool result with isError, bounded. The fast path serves it.
        let a = post(
            &router,
            body(&call("agent_list", json!({ huge.as_str(): 1 }))),
            &modern("tools/call", Some("agent_list")),
        )
        .await;
        assert_eq!(a.body["result"]["isError"], true, "{fast}");
        assert_eq!(a.body["result"]["structuredContent"]["code"], "VALIDATION_FAILED");
        assert!(a.size < SMALL, "{fast} argument: {} bytes", a.size);

        // A value rmcp quotes in parentheses: the message bounded as a whole.
        let mut version = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
        version["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(huge);
        let a = post(&router, body(&version), &modern("tools/list", None)).await;
        assert!(a.status == 400 && a.size < SMALL, "{fast} version: {} bytes, {}", a.size, a.status);

        // A header rmcp quotes in a plain-text refusal.
        let header = "v".repeat(64 << 10);
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let a = post(&router, body(&list), &[("mcp-protocol-version", &header)]).await;
        assert!(a.status == 400 && a.size < SMALL, "{fast} header: {} bytes, {}", a.size, a.status);
        assert!(a.body.as_str().unwrap().starts_with("Bad Request: Unsupported MCP-Protocol-Version: vvv"));
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_problems_are_listed_up_to_the_bound() {
    let daemon = start().await;
    let capabilities: Vec<String> = (0..10_000).map(|i| format!("bad id {i}")).collect();
    for (fast, router) in routers(&daemon.engine, 8 << 20) {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "agent_register",
            "arguments": {"name": "many", "runtime": "x", "capabilities": capabilities},
            "_meta": meta(),
        }});
        let a = post(&router, body(&request), &modern("tools/call", Some("agent_register"))).await;
        let error = &a.body["result"]["structuredContent"];
        assert_eq!(error["code"], "VALIDATION_FAILED", "{fast}: {}", a.body);
        assert_eq!(error["problems"].as_array().unwrap().len(), clutch_proto::error::PROBLEMS_MAX);
        assert!(a.size < 2 * SMALL, "{fast}: {} bytes", a.size);
    }
    daemon.stop().await;
}
