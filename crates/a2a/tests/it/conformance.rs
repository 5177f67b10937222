//! The conformance agent the A2A TCK is run against (`Options::conformance`): the kit's scenarios,
//! named by `messageId` prefix, answered through the face as the kit expects (artifacts with files
//! and data, a message instead of a task, a question and its answer, a failure); and what the kit
//! checks of the face around them: a 1.0 stream stays open through a question (0.3's closes there,
//! `final`), 0.3 answers a streaming method's error in SSE, a request whose id is an object is invalid.

use std::time::Duration;

use clutch_a2a::conformance::AGENT;
use clutch_proto::MessageType;
use clutch_store::Filter;
use serde_json::{Value, json};

use crate::{Daemon, a2a_options, start_a2a};

/// A hub with the conformance agent, once the agent is registered.
async fn start() -> Daemon {
    let d = start_a2a(clutch_a2a::Options { conformance: true, ..a2a_options() }).await;
    let filter = Filter { kind: Some(MessageType::AgentRegister), ..Filter::default() };
    let mut registered = d.log.subscribe(filter, Some(0)).await.unwrap();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), registered.next()).await.unwrap().unwrap();
        if event.message().unwrap().payload["agent_id"] == AGENT {
            return d;
        }
    }
}

fn message(id: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": "TCK"}]})
}

/// A blocking 1.0 `SendMessage` of `message`: its result.
async fn send(d: &Daemon, message: Value) -> Value {
    let sent = d.rpc(Some("1.0"), "SendMessage", json!({"message": message})).await;
    assert!(sent.get("error").is_none(), "{sent}");
    sent["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_answers_the_kits_scenarios_as_it_expects() {
    let d = start().await;
    let card: Value =
        reqwest::get(format!("{}/.well-known/agent-card.json", d.url)).await.unwrap().json().await.unwrap();
    assert_eq!(card["skills"][0]["id"], "skill:a2a-conformance", "{card}");

    let done = send(&d, message("tck-complete-task-1")).await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["task"]["artifacts"][0]["parts"], json!([{"text": "Hello from TCK"}]));

    // Artifacts as the agent gave them: a file inline, a file by URL, data; each in 0.3's shape too.
    let file = send(&d, message("tck-artifact-file-2")).await;
    assert_eq!(
        file["task"]["artifacts"],
        json!([{"artifactId": "file", "name": "output.txt", "parts": [{"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"}]}]),
        "{file}"
    );
    let id = file["task"]["id"].as_str().unwrap();
    let v03 = d.rpc(None, "tasks/get", json!({"id": id})).await;
    assert_eq!(
        v03["result"]["artifacts"][0]["parts"],
        json!([{"kind": "file", "file": {"bytes": "dGNr", "mimeType": "text/plain", "name": "output.txt"}}]),
        "{v03}"
    );
    let url = send(&d, message("tck-artifact-file-url-3")).await;
    assert_eq!(url["task"]["artifacts"][0]["parts"][0]["url"], "https://example.com/output.txt", "{url}");
    let data = send(&d, message("tck-artifact-data-4")).await;
    assert_eq!(data["task"]["artifacts"][0]["parts"], json!([{"data": {"key": "value", "count": 42}}]), "{data}");

    // A message instead of a task: the agent's, in the client's context.
    let said = send(&d, message("tck-message-response-5")).await;
    assert!(said.get("task").is_none(), "{said}");
    assert_eq!(
        (said["message"]["role"].as_str(), said["message"]["parts"].clone()),
        (Some("ROLE_AGENT"), json!([{"text": "Direct message response"}])),
        "{said}"
    );
    assert!(said["message"]["contextId"].as_str().is_some_and(|c| !c.is_empty()), "{said}");

    let rejected = send(&d, message("tck-reject-task-6")).await;
    assert_eq!(rejected["task"]["status"]["state"], "TASK_STATE_FAILED", "{rejected}");

    // A question, asked again, then answered: the task goes on to its end, the exchange its history.
    let asked = send(&d, message("tck-input-required-7")).await;
    assert_eq!(asked["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");
    let id = asked["task"]["id"].as_str().unwrap();
    let again = send(
        &d,
        json!({"messageId": "tck-input-required-8", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "more"}]}),
    )
    .await;
    assert_eq!(again["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{again}");
    let done = send(
        &d,
        json!({"messageId": "tck-complete-task-9", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "done"}]}),
    )
    .await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let roles: Vec<&str> =
        done["task"]["history"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["ROLE_USER", "ROLE_AGENT", "ROLE_USER", "ROLE_AGENT", "ROLE_USER"], "{done}");
    d.stop().await;
}

/// An SSE answer read as it comes: each event's `result` (or `error`).
struct Events {
    response: reqwest::Response,
    text: String,
}

impl Events {
    async fn open(d: &Daemon, version: Option<&str>, method: &str, params: Value) -> Events {
        let mut request = reqwest::Client::new()
            .post(format!("{}/a2a", d.url))
            .header("accept", "text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}));
        if let Some(v) = version {
            request = request.header("A2A-Version", v);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events { response, text: String::new() }
    }

    /// The next event, or `None` once the stream has ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else { continue };
                let body: Value = serde_json::from_str(data).unwrap();
                return Some(body.get("result").or_else(|| body.get("error")).cloned().unwrap());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk()).await.unwrap().unwrap()?;
            self.text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_0_stream_goes_on_after_a_question_and_a_0_3_stream_ends_there() {
    let d = start().await;
    let params = json!({"message": message("tck-input-required-s1")});
    let mut events = Events::open(&d, Some("1.0"), "SendStreamingMessage", params).await;
    let id = events.next().await.unwrap()["task"]["id"].as_str().unwrap().to_owned();
    loop {
        let event = events.next().await.expect("the stream stays open while the agent asks");
        if event.pointer("/statusUpdate/status/state") == Some(&json!("TASK_STATE_INPUT_REQUIRED")) {
            break;
        }
    }
    let answer =
        json!({"messageId": "tck-complete-task-s2", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "ok"}]});
    send(&d, answer).await;
    let mut last = None;
    while let Some(event) = events.next().await {
        last = Some(event);
    }
    assert_eq!(last.unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");

    // 0.3 marks the question final, and the stream ends with it.
    let m03 = json!({"kind": "message", "messageId": "tck-input-required-s3", "role": "user", "parts": [{"kind": "text", "text": "TCK"}]});
    let mut events = Events::open(&d, None, "message/stream", json!({"message": m03})).await;
    let mut last = None;
    while let Some(event) = events.next().await {
        last = Some(event);
    }
    let last = last.unwrap();
    assert_eq!((last["status"]["state"].as_str(), last["final"].as_bool()), (Some("input-required"), Some(true)));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_errors_the_kits_check_around_streams_and_ids() {
    let d = start().await;
    // 0.3: a streaming method answers its error in SSE too; 1.0 answers it as plain JSON-RPC.
    let mut events = Events::open(&d, None, "tasks/resubscribe", json!({"id": "task_01NOSUCHTASK0000000000000"})).await;
    let error = events.next().await.unwrap();
    assert_eq!(error["code"], -32001, "{error}");
    assert!(error["message"].as_str().unwrap().contains("not found"), "{error}");
    assert!(events.next().await.is_none());
    let plain = d.rpc(Some("1.0"), "SubscribeToTask", json!({"id": "task_01NOSUCHTASK0000000000000"})).await;
    assert_eq!(plain["error"]["code"], -32001, "{plain}");

    // An id that is neither a string, a number nor null makes the request invalid.
    let body = json!({"jsonrpc": "2.0", "id": {"bad": "type"}, "method": "message/send", "params": {}});
    let answer: Value =
        reqwest::Client::new().post(format!("{}/a2a", d.url)).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!((answer["error"]["code"].as_i64(), answer["id"].clone()), (Some(-32600), Value::Null), "{answer}");
    d.stop().await;
}
