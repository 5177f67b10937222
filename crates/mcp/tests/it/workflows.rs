//! The seed's agent lifecycle with the workflow tools, through rmcp's client in both eras: a
//! coordinator plans, workers claim, load context, checkpoint and complete; claims race; moves the
//! status machine does not allow are refused with the protocol's codes.

use serde_json::{Value, json};

use crate::{ERAS, connect, ok, refused, start};

fn ids(tasks: &Value) -> Vec<String> {
    tasks.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn the_seven_steps_and_a_plan_in_both_eras() {
    let daemon = start().await;
    for era in ERAS {
        let coordinator = connect(&format!("{}/mcp", daemon.url), era).await;
        let worker = connect(&format!("{}/mcp/worker", daemon.url), era).await;
        let (a, b) = (format!("a-{era:?}").to_lowercase(), format!("b-{era:?}").to_lowercase());
        let a_id = ok(&worker, "agent_register", json!({"name": a, "runtime": "claude_code"})).await["id"].clone();
        let b_id = ok(&worker, "agent_register", json!({"name": b, "runtime": "codex"})).await["id"].clone();

        let wf = ok(&coordinator, "workflow_create", json!({"name": "OAuth", "source": "issue 12"})).await;
        let wf_id = wf["id"].as_str().unwrap().to_owned();
        let cycle = refused(
            &coordinator,
            "workflow_set_plan",
            json!({"workflow_id": wf_id, "tasks": [{"name": "x", "depends_on": ["y"]}, {"name": "y", "depends_on": ["x"]}]}),
        )
        .await;
        assert_eq!(cycle["code"], "VALIDATION_FAILED", "{cycle}");
        let plan = ok(
            &coordinator,
            "workflow_set_plan",
            json!({"workflow_id": wf_id, "tasks": [
                {"name": "setup", "description": "passport config"},
                {"name": "google", "description": "the Google strategy", "depends_on": ["setup"]},
            ]}),
        )
        .await;
        let [setup, google]: [String; 2] = ids(&plan["tasks"]).try_into().unwrap();

        // Step 2: find and claim; the second claimer learns who was first.
        let next = ok(&worker, "workflow_next_tasks", json!({"workflow_id": wf_id})).await;
        assert_eq!(ids(&next["tasks"]), std::slice::from_ref(&setup), "only what has no unfinished dependency");
        let claim = ok(&worker, "task_claim", json!({"task_id": setup, "agent_id": a_id})).await;
        assert_eq!(claim["success"], true);
        assert_eq!(claim["lease"]["agent_id"], a_id);
        let lost = ok(&worker, "task_claim", json!({"task_id": setup, "agent_id": b_id})).await;
        assert_eq!(lost, json!({"success": false, "already_claimed_by": a_id}));

        // Steps 3-6: context, plan, progress, checkpoints, heartbeat, completion.
        let context = ok(&worker, "task_load_context", json!({"task_id": setup, "max_tokens": 2000})).await;
        assert!(context.to_string().contains("passport config"), "{context}");
        ok(&worker, "task_set_plan", json!({"task_id": setup, "plan": "install, configure", "agent_id": a_id})).await;
        ok(&worker, "task_update_status", json!({"id": setup, "status": "in_progress", "agent_id": a_id})).await;
        let not_holder = refused(
            &worker,
            "checkpoint_add",
            json!({"task_id": setup, "type": "progress", "summary": "meddling", "agent_id": b_id}),
        )
        .await;
        assert_eq!(not_holder["code"], "LEASE_LOST", "{not_holder}");
        ok(
            &worker,
            "checkpoint_add",
            json!({"task_id": setup, "type": "decision", "summary": "JWT over cookies",
                   "detail": {"reason": "stateless"}, "files_changed": ["src/auth.ts"], "agent_id": a_id}),
        )
        .await;
        ok(&worker, "agent_heartbeat", json!({"agent_id": a_id, "current_task_id": setup, "status": "busy"})).await;
        let no_outcome =
            refused(&worker, "task_update_status", json!({"id": setup, "status": "completed", "agent_id": a_id})).await;
        assert_eq!(no_outcome["code"], "VALIDATION_FAILED");
        ok(
            &worker,
            "task_update_status",
            json!({"id": setup, "status": "completed", "outcome": "passport set up", "agent_id": a_id}),
        )
        .await;
        let again =
            refused(&worker, "task_update_status", json!({"id": setup, "status": "in_progress", "agent_id": a_id}))
                .await;
        assert_eq!(again["code"], "INVALID_TRANSITION", "{again}");

        // The recovery view: list, progress, every checkpoint.
        let listed = ok(&worker, "workflow_list", json!({"status": ["in_progress"]})).await;
        assert!(listed["workflows"].as_array().unwrap().iter().any(|w| w["id"] == wf_id.as_str()));
        let progress = ok(&worker, "workflow_progress", json!({"workflow_id": wf_id})).await;
        assert_eq!(progress["percent"], 50.0);
        assert_eq!(ids(&progress["available"]), std::slice::from_ref(&google));
        let checkpoints = ok(&worker, "checkpoint_list", json!({"task_id": setup})).await;
        assert_eq!(checkpoints["checkpoints"][0]["summary"], "JWT over cookies");
        let task = ok(&worker, "task_get", json!({"task_id": setup})).await;
        assert_eq!(
            (task["outcome"].as_str(), task["plan"].as_str()),
            (Some("passport set up"), Some("install, configure"))
        );
        let dependent = ok(&worker, "task_load_context", json!({"task_id": google})).await;
        assert!(dependent.to_string().contains("passport set up"), "a dependency's outcome: {dependent}");

        // Step 7.
        ok(&worker, "agent_unregister", json!({"id": a_id})).await;
        ok(&worker, "agent_unregister", json!({"id": b_id})).await;
        coordinator.cancel().await.unwrap();
        worker.cancel().await.unwrap();
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_racing_over_mcp_claim_each_task_once_and_finish_them_all() {
    const AGENTS: usize = 32;
    const TASKS: usize = 1000;
    let daemon = start().await;
    let url = format!("{}/mcp", daemon.url);
    let coordinator = connect(&url, crate::Era::Modern).await;
    let wf = ok(&coordinator, "workflow_create", json!({"name": "race"})).await["id"].as_str().unwrap().to_owned();
    let tasks: Vec<Value> = (0..TASKS).map(|i| json!({"name": format!("t{i}")})).collect();
    ok(&coordinator, "workflow_set_plan", json!({"workflow_id": wf, "tasks": tasks})).await;
    let mut racers = Vec::new();
    for i in 0..AGENTS {
        let (url, wf) = (url.clone(), wf.clone());
        racers.push(tokio::spawn(async move {
            let client = connect(&url, crate::Era::Modern).await;
            let me = ok(&client, "agent_register", json!({"name": format!("r{i}"), "runtime": "custom"})).await["id"]
                .as_str()
                .unwrap()
                .to_owned();
            let mut done = Vec::new();
            loop {
                let next = ok(&client, "workflow_next_tasks", json!({"workflow_id": wf, "limit": 64})).await;
                let available = ids(&next["tasks"]);
                if available.is_empty() {
                    break;
                }
                // Start at a different place than the others, as agents that read the same list do.
                let start = (i * 7) % available.len();
                for task in available[start..].iter().chain(&available[..start]) {
                    let claim = ok(&client, "task_claim", json!({"task_id": task, "agent_id": me})).await;
                    if claim["success"] == true {
                        ok(
                            &client,
                            "task_update_status",
                            json!({"id": task, "status": "completed", "outcome": "done", "agent_id": me}),
                        )
                        .await;
                        done.push(task.clone());
                        break;
                    }
                }
            }
            client.cancel().await.unwrap();
            done
        }));
    }
    let mut completed = Vec::new();
    for racer in racers {
        completed.extend(racer.await.unwrap());
    }
    let count = completed.len();
    completed.sort();
    completed.dedup();
    assert_eq!((count, completed.len()), (TASKS, TASKS), "every task completed once, by one agent");
    let progress = ok(&coordinator, "workflow_progress", json!({"workflow_id": wf})).await;
    assert_eq!((progress["status"].as_str(), progress["percent"].as_f64()), (Some("completed"), Some(100.0)));
    coordinator.cancel().await.unwrap();
    daemon.stop().await;
}
