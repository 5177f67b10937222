//! `run_list`, `task_list`, `thread_list` and `search` through rmcp's client: the coordinator's
//! read-only tools over the log's lists, answering pages of core's list views; a filter a list does
//! not take, or a bad value, is a tool error naming the argument.

use std::time::SystemTime;

use clutch_proto::id::{Kind, generate};
use clutch_proto::validate::{Defaults, message};
use serde_json::{Value, json};

use crate::{ERAS, Era, connect, ok, refused, start};

fn items(page: &Value) -> &Vec<Value> {
    page["items"].as_array().unwrap_or_else(|| panic!("a page: {page}"))
}

fn field<'a>(page: &'a Value, name: &str) -> Vec<&'a str> {
    items(page).iter().map(|i| i[name].as_str().unwrap()).collect()
}

/// Submits a client's message (a JSON object without id, ts or v) as the HTTP API would.
async fn submit(engine: &clutch_core::Engine, value: Value) {
    let m = message(&value, &Defaults { now: SystemTime::now() }).expect("a valid message");
    let acks = engine.submit(vec![m]).await.expect("submitted");
    assert!(acks.iter().all(Result::is_ok), "{value}: {acks:?}");
}

#[tokio::test]
async fn only_the_coordinator_lists_and_searches() {
    let daemon = start().await;
    for era in ERAS {
        let worker = connect(&format!("{}/mcp/worker", daemon.url), era).await;
        let listed: Vec<String> = worker.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
        for tool in ["run_list", "task_list", "thread_list", "search"] {
            assert!(!listed.iter().any(|n| n == tool), "{era:?}: the worker profile lists {tool}");
        }
        let called = crate::call(&worker, "run_list", json!({})).await;
        assert!(called.is_err() || called.unwrap().is_error == Some(true), "{era:?}: the worker cannot call run_list");
        worker.cancel().await.unwrap();

        let coordinator = connect(&format!("{}/mcp", daemon.url), era).await;
        let tools = coordinator.list_all_tools().await.unwrap();
        for name in ["run_list", "task_list", "thread_list", "search"] {
            let tool = tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{era:?}: {name} is listed"));
            let annotations = tool.annotations.as_ref().expect("annotations");
            assert_eq!(annotations.read_only_hint, Some(true), "{name}");
            let input = Value::Object((*tool.input_schema).clone());
            for filter in ["state", "agent", "run", "since", "limit", "cursor"] {
                assert!(input["properties"][filter]["description"].is_string(), "{name}.{filter}: {input}");
            }
            let output = Value::Object((*tool.output_schema.clone().expect("an output schema")).clone());
            assert_eq!(output["required"], json!(["items", "as_of"]), "{name}: {output}");
            assert!(
                output["properties"]["items"]["items"]["properties"].is_object(),
                "{name}: items inlined: {output}"
            );
            assert!(output.get("$defs").is_none(), "{name}: a flat schema: {output}");
        }
        coordinator.cancel().await.unwrap();
    }
    daemon.stop().await;
}

#[tokio::test]
async fn runs_tasks_threads_and_hits() {
    let daemon = start().await;
    let client = connect(&format!("{}/mcp", daemon.url), Era::Modern).await;

    // A chat, a routed task (no agent takes it), and a workflow with two planned tasks, one claimed.
    let chat_run = generate(Kind::Run);
    submit(
        &daemon.engine,
        json!({"run_id": chat_run, "thread_id": generate(Kind::Thread), "task_id": generate(Kind::Task),
               "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:ken"}],
               "type": "chat.message", "payload": {"text": "the deploy of the west region failed at noon"}}),
    )
    .await;
    let task_run = generate(Kind::Run);
    submit(
        &daemon.engine,
        json!({"run_id": task_run, "thread_id": generate(Kind::Thread), "task_id": generate(Kind::Task),
               "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
               "type": "task.request", "requires": ["skill:research"],
               "payload": {"goal": "summarise the quarterly report"}}),
    )
    .await;
    let me = ok(&client, "agent_register", json!({"name": "ada", "runtime": "claude_code"})).await["id"].clone();
    let workflow =
        ok(&client, "workflow_create", json!({"name": "Ship the login page", "agent_id": me})).await["id"].clone();
    let plan = ok(
        &client,
        "workflow_set_plan",
        json!({"workflow_id": workflow, "tasks": [{"name": "oauth"}, {"name": "form", "depends_on": ["oauth"]}]}),
    )
    .await;
    let oauth = plan["tasks"][0]["id"].clone();
    let claim = ok(&client, "task_claim", json!({"task_id": oauth, "agent_id": me})).await;
    assert_eq!(claim["success"], true, "{claim}");

    // Runs, last active first.
    let runs = ok(&client, "run_list", json!({})).await;
    assert!(runs["as_of"].as_u64().is_some_and(|s| s > 0), "{runs}");
    let ids = field(&runs, "run_id");
    assert_eq!(ids[0], workflow.as_str().unwrap(), "{runs}");
    for run in [&task_run, &chat_run] {
        assert!(ids.contains(&run.as_str()), "{run} is listed: {runs}");
    }
    let task = items(&runs).iter().find(|r| r["run_id"] == task_run.as_str()).unwrap();
    assert_eq!((&task["kind"], &task["title"]), (&json!("task"), &json!("summarise the quarterly report")));
    let workflows = ok(&client, "run_list", json!({"kind": "workflow"})).await;
    assert_eq!(field(&workflows, "run_id"), [workflow.as_str().unwrap()], "{workflows}");
    assert_eq!(items(&workflows)[0]["tasks"]["claimed"], 1, "{workflows}");

    // A page at a time.
    let first = ok(&client, "run_list", json!({"limit": 1})).await;
    assert_eq!(items(&first).len(), 1, "{first}");
    let next = first["next"].as_str().expect("a next page");
    let second = ok(&client, "run_list", json!({"limit": 1, "cursor": next})).await;
    assert_eq!(items(&second).len(), 1, "{second}");
    assert_ne!(items(&first)[0]["run_id"], items(&second)[0]["run_id"]);
    assert_eq!(second["as_of"], first["as_of"], "the pages of one listing are read at one position");

    // Tasks by state.
    let claimed = ok(&client, "task_list", json!({"state": "claimed"})).await;
    assert_eq!(field(&claimed, "task_id"), [oauth.as_str().unwrap()], "{claimed}");
    assert_eq!(items(&claimed)[0]["agent"], me, "{claimed}");
    let pending = ok(&client, "task_list", json!({"state": "pending", "workflow": workflow})).await;
    assert_eq!(field(&pending, "title"), ["form"], "{pending}");
    let none = ok(&client, "task_list", json!({"state": "completed"})).await;
    assert_eq!(none["items"], json!([]), "{none}");

    // Threads of a run.
    let threads = ok(&client, "thread_list", json!({"run": chat_run})).await;
    assert_eq!(items(&threads).len(), 1, "{threads}");
    assert_eq!(items(&threads)[0]["participants"], json!(["user:ada"]), "{threads}");

    // Search: every word, with a snippet.
    let hits = ok(&client, "search", json!({"q": "West deploy"})).await;
    assert_eq!(items(&hits).len(), 1, "{hits}");
    let hit = &items(&hits)[0];
    assert_eq!(
        (&hit["run_id"], &hit["type"], &hit["from"]),
        (&json!(chat_run), &json!("chat.message"), &json!("user:ada"))
    );
    assert!(hit["snippet"].as_str().unwrap().contains("[deploy] of the [west] region"), "{hit}");
    let elsewhere = ok(&client, "search", json!({"q": "deploy", "run": task_run})).await;
    assert_eq!(elsewhere["items"], json!([]), "{elsewhere}");

    client.cancel().await.unwrap();
    daemon.stop().await;
}

#[tokio::test]
async fn a_bad_filter_is_a_tool_error_naming_it() {
    let daemon = start().await;
    let client = connect(&format!("{}/mcp", daemon.url), Era::Modern).await;
    for (tool, arguments, field) in [
        ("run_list", json!({"state": "sleeping"}), "state"),
        ("run_list", json!({"capability": "skill:code"}), "capability"),
        ("run_list", json!({"kind": "party"}), "kind"),
        ("task_list", json!({"state": "sleeping"}), "state"),
        ("task_list", json!({"since": "yesterday"}), "since"),
        ("task_list", json!({"limit": 0}), "limit"),
        ("thread_list", json!({"cursor": "nonsense"}), "cursor"),
        ("thread_list", json!({"state": "active"}), "state"),
        ("thread_list", json!({"colour": "red"}), "colour"),
        ("search", json!({}), "q"),
        ("search", json!({"q": "x", "kind": "chat"}), "kind"),
    ] {
        let body = refused(&client, tool, arguments.clone()).await;
        assert_eq!(body["code"], "VALIDATION_FAILED", "{tool} {arguments}: {body}");
        assert_eq!(body["field"], field, "{tool} {arguments}: {body}");
        assert_eq!(body["recoverable"], true, "{tool} {arguments}: {body}");
    }
    let body = refused(&client, "task_list", json!({"state": "sleeping"})).await;
    assert!(body["suggestion"].as_str().unwrap().contains("in_progress"), "the states are listed: {body}");
    client.cancel().await.unwrap();
    daemon.stop().await;
}
