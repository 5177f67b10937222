//! Who may call each tool, decided before its arguments are parsed: every tool the coordinator
//! lists is called with bad arguments by an observer (write tools are refused, read tools answer)
//! and by an agent token naming another agent (every write tool is refused), through the fast path
//! and through rmcp alike, with the caller the daemon's bearer-token layer would have put in the
//! request.

use axum::body::Body;
use axum::http::Request;
use clutch_core::access::{Caller, Grant, Role};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::{Era, connect, start};

fn caller(role: Role) -> Caller {
    Caller(Some(Grant {
        name: role.as_str().into(),
        role,
        agent_id: (role == Role::Agent).then(|| "agent:ken".into()),
    }))
}

/// The `code field` of `tool`'s answer to `caller` on `router` (`ok` for a success).
async fn answer(router: &axum::Router, caller: &Caller, tool: &str, arguments: &Value) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    let mut request = Request::post("/mcp")
        .header("host", "127.0.0.1:7700")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Body::from(body))
        .unwrap();
    request.extensions_mut().insert(caller.clone());
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200, "{tool}");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let reply: Value = serde_json::from_slice(&bytes).unwrap();
    let result = &reply["result"];
    assert!(result.is_object(), "{tool}: {reply}");
    if result["isError"] != json!(true) {
        return "ok".into();
    }
    let error = &result["structuredContent"];
    format!("{} {}", error["code"].as_str().unwrap_or("-"), error["field"].as_str().unwrap_or("-"))
}

/// The argument naming the agent a write tool acts as.
fn acting_argument(tool: &str) -> &'static str {
    match tool {
        "agent_register" => "name",
        "agent_unregister" => "id",
        _ => "agent_id",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_decides_who_may_call_it_before_parsing_its_arguments() {
    let daemon = start().await;
    let client = connect(&format!("{}/mcp", daemon.url), Era::Modern).await;
    let tools = client.list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
    assert_eq!(tools.len(), 34, "every tool is walked");
    let routers = [true, false].map(|fast_path| {
        let options = clutch_mcp::Options { fast_path, ..Default::default() };
        clutch_mcp::router(daemon.engine.clone(), &options)
    });
    let (observer, agent, admin) = (caller(Role::Observer), caller(Role::Agent), caller(Role::Admin));
    let approver = caller(Role::Approver);
    let mut writes = 0;
    for tool in &tools {
        let name = tool.name.as_ref();
        // The tools that decide tool calls: admins and approvers only, whatever the arguments.
        if ["tool_call_approve", "tool_call_deny"].contains(&name) {
            for router in &routers {
                assert_eq!(answer(router, &observer, name, &json!({"bogus": 1})).await, "FORBIDDEN -", "{name}");
                assert_eq!(answer(router, &agent, name, &json!({"bogus": 1})).await, "FORBIDDEN -", "{name}");
                let by_approver = answer(router, &approver, name, &json!({"call_id": "msg_x"})).await;
                assert_eq!(by_approver, "NOT_FOUND call_id", "{name}: an approver may call it");
                let by_admin = answer(router, &admin, name, &json!({"bogus": 1})).await;
                assert_eq!(by_admin, "VALIDATION_FAILED bogus", "{name}: an admin may call it");
            }
            continue;
        }
        if !tool.annotations.as_ref().and_then(|a| a.read_only_hint).unwrap_or(false) {
            // An approver changes nothing but decisions.
            let by_approver = answer(&routers[0], &approver, name, &json!({"bogus": 1})).await;
            assert_eq!(by_approver, "FORBIDDEN -", "{name} writes: an approver may not call it");
        }
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        let argument = acting_argument(name);
        // Bad arguments: an unknown one, the required ones missing; and naming another agent,
        // as an id or as a bare name.
        let bad = json!({"bogus": 1});
        let as_eve = json!({argument: "agent:eve", "bogus": 1});
        let as_bare_eve = json!({argument: "eve", "bogus": 1});
        for router in &routers {
            let by_observer = answer(router, &observer, name, &bad).await;
            let by_agent = answer(router, &agent, name, &as_eve).await;
            let by_agent_bare = answer(router, &agent, name, &as_bare_eve).await;
            let by_admin = answer(router, &admin, name, &as_eve).await;
            assert!(!by_admin.starts_with("FORBIDDEN"), "{name}: an admin may call anything: {by_admin}");
            if read_only {
                assert!(!by_observer.starts_with("FORBIDDEN"), "{name} reads, an observer may call it: {by_observer}");
                assert!(!by_agent.starts_with("FORBIDDEN"), "{name} reads, any agent may call it: {by_agent}");
            } else {
                assert_eq!(by_observer, "FORBIDDEN -", "{name} writes: an observer may not call it");
                let properties = tool.input_schema.get("properties").and_then(Value::as_object);
                assert!(properties.is_some_and(|p| p.contains_key(argument)), "{name} takes `{argument}`");
                assert_eq!(by_agent, format!("FORBIDDEN {argument}"), "{name} as another agent");
                assert_eq!(by_agent_bare, format!("FORBIDDEN {argument}"), "{name} as another agent's bare name");
            }
        }
        writes += usize::from(!read_only);
    }
    assert_eq!(writes, 15, "the write tools");

    // The agent's own id passes the check, bare or not: the arguments are then validated as before.
    for own in ["agent:ken", "ken"] {
        let answered = answer(&routers[0], &agent, "agent_heartbeat", &json!({"agent_id": own, "bogus": 1})).await;
        assert_eq!(answered, "VALIDATION_FAILED bogus", "{own}");
    }
    let answered = answer(&routers[0], &agent, "agent_register", &json!({"name": "ken", "runtime": "x"})).await;
    assert_eq!(answered, "ok");
    daemon.stop().await;
}
