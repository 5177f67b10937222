//! `tools/list`: what each profile offers, in a stable order, with schemas and annotations a model
//! and a client can rely on.

use serde_json::{Value, json};

use crate::{ERAS, connect, start};

/// The worker's lifecycle tools, and the coordinator's extra ones.
const WORKER: &[&str] = &[
    "agent_heartbeat",
    "agent_register",
    "agent_unregister",
    "checkpoint_add",
    "checkpoint_list",
    "sessions_history",
    "sessions_list",
    "sessions_send",
    "task_claim",
    "task_get",
    "task_inbox",
    "task_load_context",
    "task_release",
    "task_reply",
    "task_set_plan",
    "task_update_status",
    "workflow_get",
    "workflow_list",
    "workflow_next_tasks",
    "workflow_progress",
    "workspace_create",
    "workspace_update",
];
const COORDINATOR_ONLY: &[&str] = &[
    "agent_list",
    "search",
    "position_invoke",
    "positions_list",
    "run_list",
    "task_list",
    "thread_list",
    "tool_approvals_pending",
    "tool_call_approve",
    "tool_call_deny",
    "workflow_create",
    "workflow_set_plan",
];

async fn listed(url: &str, era: crate::Era) -> Value {
    let client = connect(url, era).await;
    let tools = client.list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
    serde_json::to_value(tools).unwrap()
}

fn names(tools: &Value) -> Vec<&str> {
    tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn each_profile_lists_its_tools_sorted_and_the_same_every_time() {
    let daemon = start().await;
    let other = start().await;
    let mut coordinator = [WORKER, COORDINATOR_ONLY].concat();
    coordinator.sort_unstable();
    for era in ERAS {
        for (path, expected) in [("/mcp", &coordinator[..]), ("/mcp/worker", WORKER)] {
            let first = listed(&format!("{}{path}", daemon.url), era).await;
            assert_eq!(names(&first), expected, "{path} in {era:?}");
            let again = listed(&format!("{}{path}", daemon.url), era).await;
            let elsewhere = listed(&format!("{}{path}", other.url), era).await;
            assert_eq!(first, again, "{path}: the list changed between two calls");
            assert_eq!(first, elsewhere, "{path}: two daemons list differently");
        }
    }
    daemon.stop().await;
    other.stop().await;
}

#[tokio::test]
async fn every_tool_has_strict_described_schemas_and_truthful_annotations() {
    let daemon = start().await;
    let tools = listed(&format!("{}/mcp", daemon.url), crate::Era::Modern).await;
    for tool in tools.as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        assert!(tool["description"].as_str().is_some_and(|d| d.len() > 40), "{name}: a description a model can act on");
        assert!(tool["title"].is_string(), "{name}: a title");
        let input = &tool["inputSchema"];
        assert_eq!(input["type"], "object", "{name}");
        assert_eq!(
            input["additionalProperties"], false,
            "{name}: unknown arguments are refused, and the schema says so"
        );
        for (property, schema) in input["properties"].as_object().into_iter().flatten() {
            assert!(schema["description"].is_string(), "{name}.{property} has no description");
        }
        let output = &tool["outputSchema"];
        assert_eq!(output["type"], "object", "{name}: an outputSchema");
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            assert!(tool["annotations"][hint].is_boolean(), "{name}: {hint} is stated");
        }
    }
    let hints = |name: &str| {
        let tool = tools.as_array().unwrap().iter().find(|t| t["name"] == name).unwrap();
        let a = &tool["annotations"];
        (a["readOnlyHint"].clone(), a["destructiveHint"].clone(), a["idempotentHint"].clone())
    };
    // (read-only, destructive, idempotent)
    assert_eq!(hints("agent_list"), (json!(true), json!(false), json!(true)));
    assert_eq!(hints("agent_register"), (json!(false), json!(false), json!(true)));
    assert_eq!(hints("agent_heartbeat"), (json!(false), json!(false), json!(true)));
    assert_eq!(hints("agent_unregister"), (json!(false), json!(true), json!(false)));
    for read in ["workflow_get", "workflow_list", "workflow_progress", "workflow_next_tasks", "task_get"] {
        assert_eq!(hints(read), (json!(true), json!(false), json!(true)), "{read}");
    }
    for read in ["task_load_context", "checkpoint_list", "task_inbox", "run_list", "task_list", "thread_list", "search"]
    {
        assert_eq!(hints(read), (json!(true), json!(false), json!(true)), "{read}");
    }
    assert_eq!(hints("task_claim"), (json!(false), json!(false), json!(false)));
    assert_eq!(hints("workspace_update"), (json!(false), json!(true), json!(false)));
    let register = tools.as_array().unwrap().iter().find(|t| t["name"] == "agent_register").unwrap();
    assert_eq!(register["inputSchema"]["required"], json!(["name", "runtime"]));
    daemon.stop().await;
}

/// The server declares what it serves and nothing else: tools, MCP's tasks extension (for long
/// work), and logging (for clients that set a level); prompts, resources and completions are
/// unknown methods, in both eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_what_is_served_is_declared() {
    let daemon = start().await;
    for era in ERAS {
        let client = connect(&format!("{}/mcp", daemon.url), era).await;
        let info = client.peer_info().expect("server info").clone();
        let capabilities = serde_json::to_value(&info.capabilities).unwrap();
        let mut declared: Vec<&str> = capabilities.as_object().unwrap().keys().map(String::as_str).collect();
        declared.sort_unstable();
        assert_eq!(declared, ["extensions", "logging", "tools"], "{era:?}: {capabilities}");
        assert_eq!(capabilities["extensions"], json!({"io.modelcontextprotocol/tasks": {}}));
        for error in [
            client.list_prompts(None).await.unwrap_err(),
            client.list_resources(None).await.unwrap_err(),
            client.list_resource_templates(None).await.unwrap_err(),
        ] {
            let rmcp::ServiceError::McpError(e) = error else { panic!("{era:?}: {error}") };
            assert_eq!(e.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND, "{era:?}: {e:?}");
        }
        client.cancel().await.unwrap();
    }
    daemon.stop().await;
}
