//! The agent lifecycle through rmcp's client in both eras: register, heartbeat, list, unregister,
//! each changing (or reading) the engine's registry as the HTTP API would.

use clutch_core::registry::Status;
use rmcp::ServiceError;
use serde_json::json;

use crate::{ERAS, call, connect, ok, start};

#[tokio::test]
async fn register_heartbeat_unregister_in_both_eras() {
    let daemon = start().await;
    for era in ERAS {
        let client = connect(&format!("{}/mcp", daemon.url), era).await;
        let name = format!("ken-{era:?}").to_lowercase();
        let id = format!("agent:{name}");

        let answer = ok(
            &client,
            "agent_register",
            json!({"name": name, "runtime": "claude_code", "capabilities": ["typescript", "skill:research@1.2.0"],
                   "workspace_path": "/src/app", "metadata": {"model": "opus"}}),
        )
        .await;
        assert_eq!(answer, json!({"id": id, "name": name, "status": "online"}));
        let agent = daemon.engine.agent(&id).expect("registered in the engine");
        assert_eq!(agent.status, Status::Online);
        let card = &agent.card;
        assert_eq!(card.display.as_ref().map(|d| d.name.as_str()), Some(name.as_str()));
        assert_eq!(
            serde_json::to_value(&card.capabilities).unwrap(),
            json!([{"id": "skill:typescript"}, {"id": "skill:research", "version": "1.2.0"}])
        );
        assert_eq!(card.meta["runtime"], "claude_code");
        assert_eq!(card.meta["role"], "worker", "the seed's default role");
        assert_eq!(card.meta["workspace_path"], "/src/app");
        assert_eq!(card.meta["metadata"], json!({"model": "opus"}));

        let beat =
            ok(&client, "agent_heartbeat", json!({"agent_id": id, "current_task_id": "task_1", "status": "busy"}))
                .await;
        assert_eq!(beat, json!({"success": true, "next_heartbeat_ms": 2500, "status": "online"}));
        // A bare name is taken as `agent:<name>`.
        ok(&client, "agent_heartbeat", json!({"agent_id": name})).await;

        let listed = ok(&client, "agent_list", json!({})).await;
        let mine =
            listed["agents"].as_array().unwrap().iter().find(|a| a["id"] == id.as_str()).expect("listed").clone();
        assert_eq!(
            mine,
            json!({"id": id, "status": "online", "runtime": "claude_code", "role": "worker",
                   "capabilities": ["skill:typescript", "skill:research@1.2.0"], "in_flight": 0, "max_concurrency": 1})
        );

        assert_eq!(ok(&client, "agent_unregister", json!({"id": id})).await, json!({"success": true}));
        assert!(daemon.engine.agent(&id).is_none(), "unregistered");
        let listed = ok(&client, "agent_list", json!({})).await;
        assert!(listed["agents"].as_array().unwrap().iter().all(|a| a["id"] != id.as_str()));

        // Registering again brings the agent back.
        ok(&client, "agent_register", json!({"name": name, "runtime": "codex", "role": "reviewer"})).await;
        let agent = daemon.engine.agent(&id).unwrap();
        assert_eq!(
            (agent.card.meta["runtime"].as_str(), agent.card.meta["role"].as_str()),
            (Some("codex"), Some("reviewer"))
        );
        client.cancel().await.unwrap();
    }
    daemon.stop().await;
}

#[tokio::test]
async fn the_worker_profile_offers_only_lifecycle_tools() {
    let daemon = start().await;
    for era in ERAS {
        let client = connect(&format!("{}/mcp/worker", daemon.url), era).await;
        ok(&client, "agent_register", json!({"name": "tom", "runtime": "claude_code"})).await;
        match call(&client, "agent_list", json!({})).await {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(e.code.0, -32602, "{e:?}");
                assert!(e.message.contains("unknown tool `agent_list`") && e.message.contains("/mcp/worker"), "{e:?}");
            }
            other => panic!("agent_list on /mcp/worker: {other:?}"),
        }
        client.cancel().await.unwrap();
    }
    daemon.stop().await;
}
