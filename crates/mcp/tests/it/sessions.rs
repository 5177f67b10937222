//! The position and session tools with rmcp's client: a coordinator lists the positions and invokes
//! a mirror whose roles two agents play; a member reads its session, talks to the other over the
//! bus, is refused a message type outside the protocol, and reads the history. A client that takes
//! MCP tasks gets one for an invocation, polls it while two agents take their turns from their
//! inboxes, and reads the outcome; it cancels another.

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, GetTaskParams, TaskPayload,
    TaskStatus,
};
use serde_json::{Value, json};

use crate::{Client, ERAS, connect, connect_with, object, ok, refused, start_faces};

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

        // The agents it names must be registered.
        for name in ["ida", "ken"] {
            ok(&member, "agent_register", json!({"name": name, "runtime": "custom"})).await;
        }
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

/// Invokes a mirror played by ida and ken as an MCP task; answers the task's id.
async fn invoke_as_task(client: &Client) -> String {
    let mut params = CallToolRequestParams::new("position_invoke");
    params.arguments = Some(object(json!({
        "position": "mirror", "input": "6 × 7?", "agents": {"Reflector": "agent:ida", "Verifier": "agent:ken"},
    })));
    match client.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert!(created.task.poll_interval_ms.is_some());
            created.task.task_id
        }
        other => panic!("not a task: {other:?}"),
    }
}

/// Plays `agent`'s two mirror turns in `session` from its inbox.
async fn play_turns(member: &Client, agent: &str, session: &str) {
    let mut done: Vec<String> = Vec::new();
    while done.len() < 2 {
        let inbox = ok(member, "task_inbox", json!({"agent_id": agent, "wait_seconds": 20})).await;
        for item in inbox["tasks"].as_array().unwrap() {
            let task = item["task"]["task_id"].as_str().unwrap().to_owned();
            if done.contains(&task) || item["session_id"] != session {
                continue;
            }
            let goal = item["request"]["goal"].as_str().unwrap();
            // A verdict is read from structure: ida gives it as a structured result, ken as the word.
            let reply = match (goal.contains("Compare"), agent) {
                (true, "agent:ida") => {
                    json!({"text": "agreed", "result": {"structured": {"verdict": "CONSENSUS", "points": ["42"]}}})
                }
                (true, _) => json!({"text": "CONSENSUS"}),
                (false, _) => json!({"text": format!("{agent}: 42")}),
            };
            let mut args = json!({"task_id": task, "agent_id": agent, "status": "completed"});
            args.as_object_mut().unwrap().extend(reply.as_object().unwrap().clone());
            let replied = ok(member, "task_reply", args).await;
            assert_eq!(replied["state"], "completed");
            done.push(task);
        }
    }
}

/// Polls MCP task `id` until it leaves `working`; answers its last state.
async fn until_done(client: &Client, id: &str) -> rmcp::model::GetTaskResult {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = client.get_task(GetTaskParams::new(id)).await.unwrap();
        if got.task.status() != TaskStatus::Working {
            return got;
        }
        assert!(got.task.task.status_message.is_some(), "a working task says what it is doing");
        assert!(Instant::now() < deadline, "task {id} still working: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_is_an_mcp_task_for_clients_that_take_them() {
    let daemon = start_faces(clutch_mcp::Options::default(), true).await;
    let member = connect(&format!("{}/mcp/worker", daemon.url), crate::Era::Modern).await;
    for name in ["ida", "ken"] {
        ok(&member, "agent_register", json!({"name": name, "runtime": "custom"})).await;
    }
    let tasks = || ClientCapabilities::builder().enable_tasks().build();
    // A 2025-11-25 client's capabilities live in its session, and the endpoint keeps none: it
    // gets the answer at once, as a client without tasks does.
    let legacy = connect_with(&format!("{}/mcp", daemon.url), crate::Era::Initialize, tasks()).await;
    let invoked = ok(
        &legacy,
        "position_invoke",
        json!({"position": "mirror", "input": "x", "agents": {"Reflector": "agent:ida", "Verifier": "agent:ken"}}),
    )
    .await;
    let e = legacy.get_task(GetTaskParams::new(invoked["task_id"].as_str().unwrap())).await.unwrap_err();
    assert!(e.to_string().contains("tasks"), "{e}");
    legacy.cancel().await.unwrap();
    {
        let client = connect_with(&format!("{}/mcp", daemon.url), crate::Era::Modern, tasks()).await;
        let info = client.peer_info().unwrap();
        assert!(info.capabilities.supports_tasks(), "the server declares the tasks extension");
        let deadline = Instant::now() + Duration::from_secs(20);
        while ok(&client, "positions_list", json!({})).await["positions"].as_array().is_none_or(|p| p.len() < 6) {
            assert!(Instant::now() < deadline, "the positions runner did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Invoked, polled while the members take their turns, then the outcome.
        let id = invoke_as_task(&client).await;
        assert!(id.starts_with("task_"), "the MCP task is the session's task: {id}");
        let working = client.get_task(GetTaskParams::new(id.clone())).await.unwrap();
        assert_eq!(working.task.status(), TaskStatus::Working);
        let session = daemon.engine.task(&id).unwrap().run_id;
        tokio::join!(play_turns(&member, "agent:ida", &session), play_turns(&member, "agent:ken", &session));
        let done = until_done(&client, &id).await;
        let TaskPayload::Completed { result } = &done.task.payload else { panic!("not completed: {done:?}") };
        assert_eq!(result["isError"], json!(false), "{result:?}");
        let answer: &Value = &result["structuredContent"];
        assert_eq!((answer["task_id"].as_str(), answer["state"].as_str()), (Some(id.as_str()), Some("completed")));
        assert_eq!(answer["position"], "mirror");
        assert_eq!(answer["outcome"]["type"], "task.result", "{answer}");
        assert!(answer["outcome"]["payload"]["text"].as_str().unwrap().contains("42"), "{answer}");
        assert_eq!(answer["outcome"]["payload"]["verdict"], "CONSENSUS", "{answer}");

        // Another, cancelled: the session stops, the task says so.
        let id = invoke_as_task(&client).await;
        client.cancel_task(CancelTaskParams::new(id.clone())).await.unwrap();
        let done = until_done(&client, &id).await;
        assert_eq!(done.task.status(), TaskStatus::Cancelled, "{done:?}");
        assert_eq!(daemon.engine.task(&id).unwrap().state, clutch_core::view::TaskState::Cancelled);
        // Its turns end with it.
        let session = daemon.engine.task(&id).unwrap().run_id;
        for agent in ["agent:ida", "agent:ken"] {
            let deadline = Instant::now() + Duration::from_secs(20);
            let inbox = || async { ok(&member, "task_inbox", json!({"agent_id": agent})).await };
            while inbox().await["tasks"].as_array().unwrap().iter().any(|t| t["session_id"] == session.as_str()) {
                assert!(Instant::now() < deadline, "{agent} still has turns of a cancelled session");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }

        // An unknown task is a protocol error, naming it.
        let e = client.get_task(GetTaskParams::new("task_nope")).await.unwrap_err();
        assert!(e.to_string().contains("task_nope"), "{e}");
        client.cancel().await.unwrap();
    }
    member.cancel().await.unwrap();
    daemon.stop().await;
}
