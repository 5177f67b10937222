//! The lists and search over real HTTP: a routed task's run, thread and task as the lists show
//! them, filters, pages that follow their cursor while events arrive, search with its snippet, and
//! each bad field refused with its name and nothing else changed.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::{Daemon, msg, run_id, start};

impl Daemon {
    async fn page(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }
}

fn ids(page: &Value, key: &str) -> Vec<String> {
    page["items"].as_array().unwrap().iter().map(|i| i[key].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_task_shows_in_every_list_and_in_search() {
    let d = start().await;
    let card = json!({"agent_id": "agent:coder", "capabilities": [{"id": "skill:rust", "version": "1.0.0"}]});
    let (status, body) =
        d.http.post(format!("{}/v1/agents", d.url)).json(&card).send().await.map(|r| (r.status().as_u16(), r)).unwrap();
    assert_eq!(status, 201, "{:?}", body.text().await);
    let run = run_id();
    let mut request = msg(&run, "task.request");
    request["from"] = json!({"agent_id": "user:ann"});
    request["requires"] = json!(["skill:rust"]);
    request["payload"] = json!({"goal": "Refactor the zeppelin parser"});
    let task = request["task_id"].as_str().unwrap().to_owned();
    let thread = request["thread_id"].as_str().unwrap().to_owned();
    let (status, body) = d.post(&request).await;
    assert_eq!(status, 201, "{body}");
    // The router gives it to agent:coder; the agent accepts and answers.
    let mut routed = false;
    for _ in 0..100 {
        let page = d.page(&format!("/v1/tasks?run={run}")).await;
        if page["items"][0]["state"] == "routed" {
            routed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(routed, "the task was routed");
    for (kind, payload) in [("task.accept", json!({})), ("task.result", json!({"text": "parser refactored"}))] {
        let mut m = msg(&run, kind);
        m["task_id"] = json!(task);
        m["thread_id"] = json!(thread);
        m["from"] = json!({"agent_id": "agent:coder"});
        m["to"] = json!([{"agent_id": "user:ann"}]);
        m["payload"] = payload;
        let (status, body) = d.post(&m).await;
        assert_eq!(status, 201, "{body}");
    }

    let runs = d.page("/v1/runs").await;
    let r = &runs["items"][0];
    assert_eq!((r["run_id"].as_str(), r["title"].as_str()), (Some(run.as_str()), Some("Refactor the zeppelin parser")));
    assert_eq!((r["state"].as_str(), r["kind"].as_str()), (Some("completed"), Some("task")));
    assert_eq!(r["tasks"], json!({"completed": 1}));
    assert_eq!(r["agents"], json!(["agent:coder"]));
    assert!(runs["as_of"].as_u64().unwrap() >= 4);
    assert_eq!(ids(&d.page("/v1/runs?state=completed&agent=agent:coder").await, "run_id"), std::slice::from_ref(&run));
    assert!(d.page("/v1/runs?state=failed").await["items"].as_array().unwrap().is_empty());

    let tasks = d.page("/v1/tasks?capability=skill:rust&state=completed").await;
    assert_eq!(ids(&tasks, "task_id"), std::slice::from_ref(&task));
    assert_eq!(tasks["items"][0]["agent"], "agent:coder");
    assert_eq!(ids(&d.page("/v1/tasks?agent=agent:coder&since=1h").await, "task_id"), std::slice::from_ref(&task));
    assert!(d.page("/v1/tasks?until=1h").await["items"].as_array().unwrap().is_empty());

    let threads = d.page(&format!("/v1/threads?run={run}")).await;
    assert_eq!(ids(&threads, "thread_id"), std::slice::from_ref(&thread));
    assert_eq!(threads["items"][0]["participants"], json!(["user:ann", "agent:coder"]));

    let hits = d.page("/v1/search?q=zeppelin").await;
    let hit = &hits["items"][0];
    assert_eq!(
        (hit["run_id"].as_str(), hit["task_id"].as_str(), hit["type"].as_str()),
        (Some(run.as_str()), Some(task.as_str()), Some("task.request"))
    );
    assert!(hit["snippet"].as_str().unwrap().contains("[zeppelin]"), "{hit}");
    assert_eq!(d.page("/v1/search?q=refactored&agent=agent:coder").await["items"][0]["type"], "task.result");

    // Derived again from the log, the lists say the same.
    let r = d.http.post(format!("{}/v1/reindex", d.url)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let rebuilt: Value = r.json().await.unwrap();
    assert!(rebuilt["events"].as_u64().unwrap() >= 4, "{rebuilt}");
    let again = d.page("/v1/runs").await;
    assert_eq!(again["items"][0], runs["items"][0]);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_their_cursor_while_events_arrive() {
    let d = start().await;
    let mut runs = Vec::new();
    for i in 0..12 {
        let run = run_id();
        let mut m = msg(&run, "chat.message");
        m["payload"] = json!({"text": format!("note {i}")});
        assert_eq!(d.post(&m).await.0, 201);
        runs.push(run);
    }
    let mut seen = Vec::new();
    let mut path = "/v1/runs?limit=5".to_owned();
    loop {
        let page = d.page(&path).await;
        seen.extend(ids(&page, "run_id"));
        // Something new between pages: it must not enter this listing.
        assert_eq!(d.post(&msg(&run_id(), "chat.message")).await.0, 201);
        match page["next"].as_str() {
            Some(next) => path = format!("/v1/runs?limit=5&cursor={next}"),
            None => break,
        }
    }
    runs.reverse();
    assert_eq!(seen, runs);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 12);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_field_is_refused_by_name() {
    let d = start().await;
    for (path, field) in [
        ("/v1/runs?limit=0", "limit"),
        ("/v1/runs?limit=1000", "limit"),
        ("/v1/runs?cursor=nonsense", "cursor"),
        ("/v1/runs?capability=skill:x", "capability"),
        ("/v1/runs?state=running", "state"),
        ("/v1/tasks?state=napping", "state"),
        ("/v1/runs?kind=party", "kind"),
        ("/v1/tasks?since=last-tuesday", "since"),
        ("/v1/threads?state=active", "state"),
        ("/v1/search?q=", "q"),
        ("/v1/search", "q"),
        ("/v1/tasks?q=word", "q"),
    ] {
        let (status, body) = d.get(path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["code"], "VALIDATION_FAILED", "{path}: {body}");
        assert_eq!(body["error"]["field"], field, "{path}: {body}");
    }
    let (status, body) = d.get("/v1/runs?colour=blue").await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("VALIDATION_FAILED")), "{body}");
    assert_eq!(d.get("/v1/events").await.1["events"].as_array().map(Vec::len), Some(0), "nothing was written");
    d.shutdown().await;
}
