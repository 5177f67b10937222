//! The fast path answers exactly as rmcp does: each request goes to a router with the fast path and
//! to one without it (the same engine behind both), and the two answers must be the same status,
//! headers and bytes; the fast router must have served the common `tools/call`s itself and left
//! everything else to rmcp.

use axum::body::Body;
use axum::http::{Method, Request};
use clutch_core::access::{Caller, Grant, Role};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::start;

/// A request, and whether the fast path should serve it.
struct Case {
    name: &'static str,
    method: Method,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    caller: Option<Caller>,
    fast: bool,
}

/// A 2026-07-28 `tools/call` as a client sends it: per-request `_meta`, the standard headers.
fn call(name: &'static str, tool: &str, arguments: Value) -> Case {
    call_with(name, "/mcp", tool, body(json!(7), tool, arguments))
}

fn call_with(name: &'static str, path: &'static str, tool: &str, body: Value) -> Case {
    let body = body.to_string().into_bytes();
    Case {
        name,
        method: Method::POST,
        path,
        headers: vec![
            ("host", "127.0.0.1:7700".into()),
            ("content-type", "application/json".into()),
            ("accept", "application/json, text/event-stream".into()),
            ("content-length", body.len().to_string()),
            ("mcp-protocol-version", "2026-07-28".into()),
            ("mcp-method", "tools/call".into()),
            ("mcp-name", tool.into()),
        ],
        body,
        caller: None,
        fast: true,
    }
}

fn body(id: Value, tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta("2026-07-28")},
    })
}

fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

impl Case {
    fn header(mut self, name: &'static str, value: &str) -> Case {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.into()));
        self
    }

    fn also(mut self, name: &'static str, value: &str) -> Case {
        self.headers.push((name, value.into()));
        self
    }

    fn without(mut self, name: &'static str) -> Case {
        self.headers.retain(|(n, _)| *n != name);
        self
    }

    fn body(mut self, body: &[u8]) -> Case {
        self.body = body.to_vec();
        self.header("content-length", &body.len().to_string())
    }

    fn named(mut self, name: &'static str) -> Case {
        self.name = name;
        self
    }

    fn by(mut self, caller: Caller) -> Case {
        self.caller = Some(caller);
        self
    }

    fn method(mut self, method: Method) -> Case {
        self.method = method;
        self
    }

    /// rmcp serves it (the fast path leaves it alone).
    fn rmcp(mut self, name: &'static str) -> Case {
        self.name = name;
        self.fast = false;
        self
    }

    fn request(&self) -> Request<Body> {
        let mut request = Request::builder().method(self.method.clone()).uri(self.path);
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        let mut request = request.body(Body::from(self.body.clone())).unwrap();
        if let Some(caller) = &self.caller {
            request.extensions_mut().insert(caller.clone());
        }
        request
    }
}

/// Status, headers and body of `router`'s answer, and whether the fast path gave it.
async fn answer(router: &axum::Router, case: &Case) -> (String, bool) {
    let response = router.clone().oneshot(case.request()).await.unwrap();
    let fast = response.extensions().get::<clutch_mcp::FastPath>().is_some();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut shown = format!("{}\n", parts.status);
    let mut headers: Vec<String> = parts
        .headers
        .iter()
        // On the wire hyper writes the length of a body of known size either way; axum adds it
        // earlier to a handler's answer than to a service's.
        .filter(|(n, v)| !(*n == "content-length" && v.to_str().ok() == Some(bytes.len().to_string().as_str())))
        .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
        .collect();
    headers.sort();
    for h in headers {
        shown.push_str(&h);
        shown.push('\n');
    }
    shown.push_str(&String::from_utf8_lossy(&bytes));
    (shown, fast)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_answers_exactly_as_rmcp() {
    let daemon = start().await;
    let options = |fast_path| clutch_mcp::Options { body_limit_bytes: 4096, fast_path };
    let fast = clutch_mcp::router(daemon.engine.clone(), &options(true));
    let rmcp = clutch_mcp::router(daemon.engine.clone(), &options(false));
    let workflow = daemon
        .engine
        .workflow_create(clutch_core::workflow::api::CreateWorkflow { name: "diff".into(), ..Default::default() })
        .await
        .unwrap();
    let observer = Caller(Some(Grant { name: "dash".into(), role: Role::Observer, agent_id: None }));
    let list = || call("agent_list", "agent_list", json!({}));
    let base64_name = "=?base64?YWdlbnRfbGlzdA==?="; // agent_list
    let mut legacy = body(json!(1), "agent_list", json!({}));
    legacy["params"].as_object_mut().unwrap().remove("_meta");
    let mut old_meta = body(json!(1), "agent_list", json!({}));
    old_meta["params"]["_meta"] = meta("2025-11-25");
    let mut no_capabilities = body(json!(1), "agent_list", json!({}));
    no_capabilities["params"]["_meta"].as_object_mut().unwrap().remove("io.modelcontextprotocol/clientCapabilities");
    let mut notification = body(json!(1), "agent_list", json!({}));
    notification.as_object_mut().unwrap().remove("id");
    let mut with_state = body(json!(1), "agent_list", json!({}));
    with_state["params"]["requestState"] = json!("opaque");

    let with_key = |key: &str, value: Value| {
        let mut body = body(json!(1), "agent_list", json!({}));
        body[key] = value;
        list().body(body.to_string().as_bytes())
    };
    let (extra_key, result_key, old_jsonrpc, null_id, float_id) = (
        with_key("extra", json!(1)),
        with_key("result", json!({})),
        with_key("jsonrpc", json!("1.0")),
        with_key("id", Value::Null),
        with_key("id", json!(1.5)),
    );
    let with_param = |key: &str, value: Value| {
        let mut body = body(json!(1), "agent_list", json!({}));
        body["params"][key] = value;
        list().body(body.to_string().as_bytes())
    };
    let (extra_param, null_meta, null_arguments, no_arguments) = (
        with_param("extra", json!({"a": 1})),
        with_param("_meta", Value::Null),
        with_param("arguments", Value::Null),
        {
            let mut body = body(json!(1), "agent_list", json!({}));
            body["params"].as_object_mut().unwrap().remove("arguments");
            list().body(body.to_string().as_bytes())
        },
    );
    let big_numbers = call(
        "big numbers",
        "agent_heartbeat",
        json!({"agent_id": "agent:diff-a", "n": 18446744073709551617u128 as f64, "m": -1, "f": 1e300}),
    );
    let cases = vec![
        big_numbers,
        call("escapes", "agent_register", json!({"name": "diff-a", "runtime": "a\"b\\c\u{1F600}\n"})),
        extra_param.named("an unknown key in params"),
        null_arguments.named("arguments null"),
        no_arguments.named("no arguments"),
        extra_key.rmcp("an unknown top-level key"),
        result_key.rmcp("a result key"),
        old_jsonrpc.rmcp("jsonrpc 1.0"),
        null_id.rmcp("a null id"),
        float_id.rmcp("a fractional id"),
        null_meta.rmcp("_meta null"),
        // Served by the fast path: successes, refusals as isError results, protocol errors.
        call("register", "agent_register", json!({"name": "diff-a", "runtime": "claude_code"})),
        call("register again", "agent_register", json!({"name": "diff-a", "runtime": "claude_code"})),
        call("heartbeat", "agent_heartbeat", json!({"agent_id": "agent:diff-a", "status": "busy"})),
        list(),
        call("workflow_get", "workflow_get", json!({"workflow_id": workflow.id})),
        call("refusal: unknown agent", "agent_heartbeat", json!({"agent_id": "agent:ghost"})),
        call("refusal: unknown task", "task_get", json!({"task_id": "task_01J0000000000000000000000"})),
        call("bad arguments: name", "agent_register", json!({"name": "no spaces", "runtime": "x"})),
        call("bad arguments: missing", "agent_register", json!({"name": "diff-b"})),
        call("bad arguments: type", "agent_heartbeat", json!({"agent_id": 7})),
        call("unknown argument", "agent_heartbeat", json!({"agent_id": "agent:diff-a", "mood": "happy"})),
        call("unknown tool", "no_such_tool", json!({})),
        call_with(
            "coordinator tool on the worker endpoint",
            "/mcp/worker",
            "agent_list",
            body(json!(7), "agent_list", json!({})),
        ),
        call_with(
            "worker endpoint",
            "/mcp/worker",
            "agent_heartbeat",
            body(json!(7), "agent_heartbeat", json!({"agent_id": "agent:diff-a"})),
        ),
        call_with("string id", "/mcp", "agent_list", body(json!("abc"), "agent_list", json!({}))),
        call("observer token", "agent_register", json!({"name": "diff-c", "runtime": "x"})).by(observer.clone()),
        call("Accept reordered, a charset", "agent_list", json!({}))
            .header("accept", "text/event-stream, application/json")
            .header("content-type", "application/json; charset=utf-8"),
        // Left to rmcp: anything but the common case.
        list().header("mcp-name", "agent_register").rmcp("Mcp-Name differs from the body"),
        list().header("mcp-method", "tools/list").rmcp("Mcp-Method differs from the body"),
        list().without("mcp-name").rmcp("no Mcp-Name"),
        list().also("mcp-name", "agent_list").rmcp("two Mcp-Name headers"),
        list().header("mcp-name", base64_name).rmcp("Mcp-Name in Base64"),
        list().header("mcp-param-region", "eu").rmcp("an Mcp-Param header"),
        list()
            .header("mcp-protocol-version", "2025-11-25")
            .rmcp("MCP-Protocol-Version 2025-11-25 beside 2026-07-28 metadata"),
        list().without("mcp-protocol-version").rmcp("no MCP-Protocol-Version"),
        list()
            .body(legacy.to_string().as_bytes())
            .without("mcp-protocol-version")
            .without("mcp-method")
            .without("mcp-name")
            .rmcp("the initialize era (no _meta, no MCP headers)"),
        list().body(old_meta.to_string().as_bytes()).rmcp("_meta of 2025-11-25"),
        list().body(no_capabilities.to_string().as_bytes()).rmcp("_meta without clientCapabilities"),
        list().body(notification.to_string().as_bytes()).rmcp("a notification"),
        list().body(with_state.to_string().as_bytes()).rmcp("requestState"),
        list().body(format!("[{}]", body(json!(1), "agent_list", json!({}))).as_bytes()).rmcp("a batch"),
        list()
            .body(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_list","arguments":[1]}}"#)
            .rmcp("arguments not an object"),
        list().body(b"{not json").rmcp("not JSON"),
        list()
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta("2026-07-28")}})
                    .to_string()
                    .as_bytes(),
            )
            .header("mcp-method", "tools/list")
            .without("mcp-name")
            .rmcp("tools/list"),
        list().header("accept", "application/json").rmcp("Accept without text/event-stream"),
        list().header("accept", "application/json;q=0, text/event-stream").rmcp("Accept with q=0"),
        list().header("content-type", "text/plain").rmcp("Content-Type text/plain"),
        // The daemon's browser policy, in front of every route, has judged the Host already.
        list().header("host", "clutch.internal:7700").named("any Host"),
        list().without("content-length").rmcp("no Content-Length"),
        call("", "agent_heartbeat", json!({"agent_id": "x".repeat(5000)})).rmcp("too large"),
        list().method(Method::GET).rmcp("GET"),
        list().method(Method::DELETE).rmcp("DELETE"),
    ];
    let mut served = 0;
    for case in &cases {
        let (expected, by_rmcp_fast) = answer(&rmcp, case).await;
        let (got, by_fast) = answer(&fast, case).await;
        assert!(!by_rmcp_fast, "{}: the router without the fast path used it", case.name);
        assert_eq!(
            by_fast,
            case.fast,
            "{}: fast path {}expected; answer:\n{got}",
            case.name,
            if case.fast { "" } else { "not " }
        );
        assert_eq!(got, expected, "{}: the answers differ", case.name);
        served += usize::from(by_fast);
    }
    assert_eq!(served, cases.iter().filter(|c| c.fast).count());
    // The cases mean what they say: a success, a refusal, a protocol error.
    let (shown, _) = answer(&fast, &list()).await;
    assert!(
        shown.starts_with("200 OK") && shown.contains(r#""isError":false"#) && shown.contains("agent:diff-a"),
        "{shown}"
    );
    let (shown, _) = answer(&fast, &call("", "agent_heartbeat", json!({"agent_id": "agent:ghost"}))).await;
    assert!(shown.contains(r#""isError":true"#) && shown.contains("AGENT_NOT_FOUND"), "{shown}");
    let (shown, _) = answer(&fast, &call("", "no_such_tool", json!({}))).await;
    assert!(shown.contains(r#""error":{"code":-32602"#), "{shown}");
    daemon.stop().await;
}
