//! The position and session tools with rmcp's client: a coordinator lists the positions and invokes
//! a mirror whose roles two agents play; a member reads its session, talks to the other over the
//! bus, is refused a message type outside the protocol, and reads the history.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{ERAS, connect, ok, refused, start_faces};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_invokes_a_position_and_a_member_talks_on_its_bus() {
    let daemon = start_faces(clutch_mcp::Options::default(), true).await;
    for era in ERAS {
        let coordinator = connect(&format!("{}/mcp", daemon.url), era).await;
        let member = connect(&format!("{}/mcp/worker", daemon.url), era).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let positions = loop {
            let listed = ok(&coordinator, "positions_list", json!({})).await;
            if listed["positions"].as_array().is_some_and(|p| p.len() == 6) || Instant::now() > deadline {
                break listed;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let names: Vec<&str> =
            positions["positions"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["circle", "contemplator", "mirror", "pyramid", "relay", "swarm"]);

        // Unknown position and role: refused with the field at fault, nothing started.
        let e = refused(&coordinator, "position_invoke", json!({"position": "tango", "input": "x"})).await;
        assert_eq!((e["code"].as_str(), e["field"].as_str()), (Some("POSITION_NOT_FOUND"), Some("position")), "{e}");
        let e =
            refused(&coordinator, "position_invoke", json!({"position": "mirror", "agents": {"Juggler": "agent:x"}}))
                .await;
        assert_eq!(e["field"], "agents.Juggler", "{e}");

        let invoked = ok(
            &coordinator,
            "position_invoke",
            json!({"position": "mirror", "input": "6 × 7?", "agents": {"Reflector": "agent:ida", "Verifier": "agent:ken"}}),
        )
        .await;
        let session = invoked["session_id"].as_str().unwrap().to_owned();
        // The runner casts the team: the member sees its session running, with both roles.
        let deadline = Instant::now() + Duration::from_secs(20);
        let listed = loop {
            let listed = ok(&member, "sessions_list", json!({"sessionId": session})).await;
            if listed["sessions"][0]["status"] == "RUNNING" || Instant::now() > deadline {
                break listed;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let s = &listed["sessions"][0];
        assert_eq!(s["status"], "RUNNING", "{listed}");
        assert_eq!(
            s["agents"],
            json!([{"id": "agent:ida", "role": "Reflector", "status": "active"}, {"id": "agent:ken", "role": "Verifier", "status": "active"}])
        );
        assert!(s["protocol"].as_array().unwrap().contains(&json!("READY_TO_SHARE")), "{s}");

        let sent = ok(
            &member,
            "sessions_send",
            json!({"sessionId": session, "agent_id": "agent:ida", "to": "all", "type": "READY_TO_SHARE", "content": "done"}),
        )
        .await;
        assert_eq!(sent["to"], json!(["agent:ken"]));
        let e = refused(
            &member,
            "sessions_send",
            json!({"sessionId": session, "agent_id": "agent:ida", "to": ["agent:ken"], "type": "GOSSIP"}),
        )
        .await;
        assert_eq!((e["code"].as_str(), e["field"].as_str()), (Some("VALIDATION_FAILED"), Some("payload.type")), "{e}");
        let history = ok(&member, "sessions_history", json!({"sessionId": session, "agentId": "agent:ken"})).await;
        let said: Vec<(&str, &str)> = history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["from"].as_str().unwrap(), m["type"].as_str().unwrap()))
            .collect();
        assert_eq!(said, [("agent:ida", "READY_TO_SHARE")]);
        let e = refused(&member, "sessions_history", json!({"sessionId": "run_nope"})).await;
        assert_eq!(e["code"], "SESSION_NOT_FOUND", "{e}");
        coordinator.cancel().await.unwrap();
        member.cancel().await.unwrap();
    }
    daemon.stop().await;
}
