//! The hub as an A2A agent: its card (skills from the agents registered, in the version asked for
//! with that version's fields only, cacheable and revalidated by its ETag), messages sent in 1.0
//! and 0.3 becoming tasks the router gives to the agent with the skill named, blocking (by default,
//! in both) and not, read back and cancelled; and the errors the spec names.

use std::time::Duration;

use clutch_core::Engine;
use clutch_core::inbox::{Reply, Status};
use serde_json::{Value, json};

use crate::start;

pub(crate) async fn register(engine: &Engine, name: &str, skill: &str) {
    let card = json!({
        "v": "clutch/0.1", "agent_id": format!("agent:{name}"),
        "capabilities": [{"id": skill, "version": "1.0.0", "tags": ["answers"]}],
    });
    engine.register(&clutch_proto::validate::agent_card(&card).unwrap()).await.unwrap();
}

/// `agent:kim` answers every task given to it: accepts, then completes with "42: GOAL".
pub(crate) fn kim_works(engine: Engine) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Ok(inbox) = engine.inbox("agent:kim", Duration::from_secs(5)).await else { return };
            for item in inbox.tasks {
                let goal = item.request["goal"].as_str().unwrap_or_default().to_owned();
                let reply = Reply {
                    status: Status::Completed,
                    text: Some(format!("42: {goal}")),
                    result: None,
                    error: None,
                    retryable: false,
                };
                let _ = engine.task_reply("agent:kim", &item.task.task_id, reply).await;
            }
        }
    })
}

pub(crate) fn message(text: &str, skill: Option<&str>) -> Value {
    let mut m = json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(s) = skill {
        m["metadata"] = json!({"skill": s});
    }
    m
}

/// A card's members, sorted.
fn members(card: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = card.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

/// The card at `path` with `headers`: its status, `ETag` and body.
async fn get_card(d: &crate::Daemon, path: &str, headers: &[(&str, &str)]) -> (u16, String, Value) {
    let mut request = reqwest::Client::new().get(format!("{}{path}", d.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let tag = response.headers().get("etag").map(|t| t.to_str().unwrap().to_owned()).unwrap_or_default();
    if status == 200 {
        assert_eq!(response.headers()["cache-control"], "public, max-age=60", "cacheable, for a minute");
        assert_eq!(response.headers()["vary"], "A2A-Version");
        assert!(!tag.is_empty(), "an ETag");
    }
    (status, tag, if status == 200 { response.json().await.unwrap() } else { Value::Null })
}

const V10_MEMBERS: [&str; 9] = [
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "description",
    "name",
    "provider",
    "skills",
    "supportedInterfaces",
    "version",
];
const V03_MEMBERS: [&str; 13] = [
    "additionalInterfaces",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "description",
    "name",
    "preferredTransport",
    "protocolVersion",
    "provider",
    "skills",
    "supportsAuthenticatedExtendedCard",
    "url",
    "version",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_is_written_in_the_version_asked_for_with_its_own_fields() {
    let d = start().await;
    register(&d.engine, "kim", "skill:answer").await;
    let url = format!("{}/a2a", d.url);

    // 1.0: asked for, or not asked (the default at the 1.0 path), or a version the hub does not
    // speak (the card says which it does): 1.0's members only, its interfaces naming 0.3's too.
    let (_, tag_10, card) = get_card(&d, "/.well-known/agent-card.json", &[]).await;
    assert_eq!(members(&card), V10_MEMBERS, "{card}");
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": format!("{url}/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ])
    );
    assert_eq!(card["capabilities"], json!({"streaming": true, "pushNotifications": true, "extendedAgentCard": false}));
    let skills: Vec<&str> = card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(skills, ["skill:answer"]);
    assert_eq!(card["skills"][0]["tags"], json!(["answers"]));
    for (path, headers) in [
        ("/.well-known/agent-card.json", [("A2A-Version", "1.0")]),
        ("/.well-known/agent.json", [("A2A-Version", "1.0")]),
        ("/.well-known/agent-card.json", [("A2A-Version", "2.0")]),
    ] {
        let (_, tag, same) = get_card(&d, path, &headers).await;
        assert_eq!((&same, &tag), (&card, &tag_10), "{path} {headers:?}");
    }

    // 0.3: asked for (a header or a query parameter), or at 0.3's path: 0.3's members only.
    let (_, tag_03, v03) = get_card(&d, "/.well-known/agent.json", &[]).await;
    assert_eq!(members(&v03), V03_MEMBERS, "{v03}");
    assert_eq!((v03["url"].as_str(), v03["preferredTransport"].as_str()), (Some(url.as_str()), Some("JSONRPC")));
    assert_eq!(v03["protocolVersion"], "0.3");
    assert_eq!(v03["additionalInterfaces"], json!([{"url": url, "transport": "JSONRPC"}]));
    assert_eq!(v03["capabilities"], json!({"streaming": true, "pushNotifications": true}));
    assert_eq!(
        (v03["skills"].clone(), v03["supportsAuthenticatedExtendedCard"].clone()),
        (card["skills"].clone(), json!(false))
    );
    assert_ne!(tag_03, tag_10, "two cards, two tags");
    for (path, headers) in [
        ("/.well-known/agent-card.json", vec![("A2A-Version", "0.3")]),
        ("/.well-known/agent-card.json?A2A-Version=0.3", vec![]),
        ("/.well-known/agent.json", vec![("A2A-Version", " ")]),
    ] {
        let (_, tag, same) = get_card(&d, path, &headers).await;
        assert_eq!((&same, &tag), (&v03, &tag_03), "{path} {headers:?}");
    }

    // Revalidation: a tag the client holds, weak or among others, or any (`*`), is 304 with the
    // same cache headers; the other version's tag is not; an agent more changes the card.
    let path = "/.well-known/agent-card.json";
    let weak = format!("W/{tag_10}");
    let listed = format!("\"other\", {tag_10}");
    for held in [tag_10.as_str(), weak.as_str(), listed.as_str(), "*"] {
        let response =
            reqwest::Client::new().get(format!("{}{path}", d.url)).header("if-none-match", held).send().await.unwrap();
        assert_eq!(response.status(), 304, "{held}");
        assert_eq!(response.headers()["etag"], tag_10.as_str());
        assert_eq!(response.headers()["cache-control"], "public, max-age=60");
    }
    assert_eq!(get_card(&d, path, &[("if-none-match", &tag_03)]).await.0, 200);
    assert_eq!(get_card(&d, "/.well-known/agent.json", &[("if-none-match", &tag_03)]).await.0, 304);
    register(&d.engine, "lee", "skill:review").await;
    let (status, tag, card) = get_card(&d, path, &[("if-none-match", &tag_10)]).await;
    assert_eq!(status, 200);
    assert_ne!(tag, tag_10);
    assert_eq!(card["skills"].as_array().unwrap().len(), 2);
    d.stop().await;

    // A hub for 0.3 clients that name no version: the 0.3 card at the 1.0 path too, unless asked.
    let d = crate::start_a2a(clutch_a2a::Options {
        unversioned_card: clutch_a2a::wire::Version::V03,
        ..crate::a2a_options()
    })
    .await;
    assert_eq!(members(&get_card(&d, path, &[]).await.2), V03_MEMBERS);
    assert_eq!(members(&get_card(&d, path, &[("A2A-Version", "1.0")]).await.2), V10_MEMBERS);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_a_routed_task_in_1_0_and_in_0_3() {
    let d = start().await;
    register(&d.engine, "kim", "skill:answer").await;
    let worker = kim_works(d.engine.clone());

    // 1.0, blocking by default: the answer holds the ended task with its artifact.
    let sent = d.rpc(Some("1.0"), "SendMessage", json!({"message": message("6 × 7?", Some("skill:answer"))})).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "42: 6 × 7?"}]));
    assert_eq!(task["history"][0]["role"], "ROLE_USER");
    assert_eq!(task["history"][0]["parts"], json!([{"text": "6 × 7?"}]));
    assert!(task.get("kind").is_none(), "1.0 objects carry no kind");
    let id = task["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("task_"), "the A2A task is the Clutch task: {id}");
    // In the log: a task.request the router gave to kim for the skill.
    let view = d.engine.task(&id).unwrap();
    assert_eq!((view.agent.as_deref(), view.requires.clone()), (Some("agent:kim"), vec!["skill:answer".to_owned()]));
    assert_eq!(task["contextId"], view.thread_id.as_str(), "a new context is the task's thread");
    let got = d.rpc(Some("1.0"), "GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    let got = d.rpc(Some("1.0"), "GetTask", json!({"id": id, "historyLength": 0})).await;
    assert!(got["result"].get("history").is_none(), "{got}");

    // 0.3 (no header), with no configuration: blocking too, as the reference SDK's server is (its
    // clients wait for the answer): a bare task with kinds, ended, with its artifact.
    let m03 = |id: &str, text: &str| {
        json!({"kind": "message", "messageId": id, "role": "user", "contextId": "ctx-from-client",
               "parts": [{"kind": "text", "text": text}], "metadata": {"skill": "skill:answer"}})
    };
    let sent = d.rpc(None, "message/send", json!({"message": m03("m-2", "and 6 × 9?")})).await;
    let task = &sent["result"];
    assert_eq!((task["kind"].as_str(), task["status"]["state"].as_str()), (Some("task"), Some("completed")), "{sent}");
    assert_eq!(task["artifacts"][0]["parts"], json!([{"kind": "text", "text": "42: and 6 × 9?"}]));
    assert_eq!(task["contextId"], "ctx-from-client", "the client's context is kept");

    // 0.3, `blocking: false`: answered at once, then read when done.
    let params = json!({"message": m03("m-3", "and 6 × 8?"), "configuration": {"blocking": false}});
    let sent = d.rpc(None, "message/send", params).await;
    let task = &sent["result"];
    assert_eq!(task["kind"], "task", "{sent}");
    assert!(["submitted", "working", "completed"].contains(&task["status"]["state"].as_str().unwrap()), "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let done = loop {
        let got = d.rpc(None, "tasks/get", json!({"id": id})).await;
        if got["result"]["status"]["state"] == "completed" {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(done["result"]["artifacts"][0]["parts"], json!([{"kind": "text", "text": "42: and 6 × 8?"}]));
    assert_eq!(done["result"]["history"][0]["role"], "user");

    // ListTasks (1.0): newest first, by context and state, a page at a time.
    let list = |params: Value| d.rpc(Some("1.0"), "ListTasks", params);
    let all = list(json!({})).await["result"].clone();
    assert_eq!(all["totalSize"], 3, "{all}");
    assert_eq!(all["tasks"][0]["id"], id.as_str(), "the newest first");
    assert!(all["tasks"][0].get("artifacts").is_none(), "artifacts only when asked for");
    let one = list(json!({"contextId": "ctx-from-client", "includeArtifacts": true})).await["result"].clone();
    assert_eq!(
        (one["totalSize"].as_u64(), one["tasks"][0]["artifacts"][0]["parts"][0]["text"].as_str()),
        (Some(2), Some("42: and 6 × 8?"))
    );
    let first = list(json!({"pageSize": 2})).await["result"].clone();
    let token = first["nextPageToken"].as_str().unwrap().to_owned();
    assert!(!token.is_empty());
    let second = list(json!({"pageSize": 2, "pageToken": token})).await["result"].clone();
    assert_eq!(second["tasks"].as_array().unwrap().len(), 1);
    assert!(first["tasks"].as_array().unwrap().iter().all(|t| t["id"] != second["tasks"][0]["id"]));
    assert_eq!(second["nextPageToken"], "");
    assert_eq!(list(json!({"status": "TASK_STATE_WORKING"})).await["result"]["totalSize"], 0);
    assert_eq!(list(json!({"status": 3})).await["result"]["totalSize"], 3, "COMPLETED by number");
    assert_eq!(list(json!({"pageSize": 0})).await["error"]["code"], -32602);
    assert_eq!(list(json!({"pageToken": "nonsense"})).await["error"]["code"], -32602);
    assert_eq!(d.rpc(None, "tasks/list", json!({})).await["error"]["code"], -32601, "0.3 has no ListTasks");
    worker.abort();
    d.stop().await;
}

/// A 1.0 `SendMessage` of `text` for `skill` that answers at once (`returnImmediately`).
pub(crate) async fn send_at_once(d: &crate::Daemon, text: &str, skill: &str) -> Value {
    let params = json!({"message": message(text, Some(skill)), "configuration": {"returnImmediately": true}});
    d.rpc(Some("1.0"), "SendMessage", params).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_task_is_cancelled_and_errors_are_the_specs() {
    let d = start().await;
    register(&d.engine, "slow", "skill:slow").await;
    let sent = send_at_once(&d, "take your time", "skill:slow").await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(sent["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED", "{sent}");
    let cancelled = d.rpc(Some("1.0"), "CancelTask", json!({"id": id})).await;
    assert_eq!(cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{cancelled}");
    let again = d.rpc(Some("1.0"), "CancelTask", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");

    let code = |v: &Value| (v["error"]["code"].as_i64(), v["error"]["data"][0]["reason"].as_str().map(str::to_owned));
    let missing = d.rpc(Some("1.0"), "GetTask", json!({"id": "task_nope"})).await;
    assert_eq!(code(&missing), (Some(-32001), Some("TASK_NOT_FOUND".into())));
    assert_eq!(missing["error"]["data"][0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    let missing = d.rpc(None, "tasks/get", json!({"id": "task_nope"})).await;
    assert_eq!(
        (missing["error"]["code"].as_i64(), missing["error"].get("data")),
        (Some(-32001), None),
        "0.3: no ErrorInfo"
    );
    // historyLength: a whole number, 0 or more, wherever it is given; else invalid params naming it.
    let invalid = |v: &Value, field: &str| {
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().starts_with(&format!("{field}: ")), "names {field}: {v}");
    };
    invalid(&d.rpc(None, "tasks/get", json!({"id": id, "historyLength": -1})).await, "historyLength");
    invalid(&d.rpc(None, "tasks/get", json!({"id": id, "historyLength": 1.5})).await, "historyLength");
    let bad = d.rpc(Some("1.0"), "GetTask", json!({"id": id, "historyLength": -5})).await;
    invalid(&bad, "historyLength");
    assert_eq!(bad["error"]["data"][0]["reason"], "INVALID_PARAMS");
    invalid(&d.rpc(Some("1.0"), "ListTasks", json!({"historyLength": "-2"})).await, "historyLength");
    let tasks = || async { d.rpc(Some("1.0"), "ListTasks", json!({})).await["result"]["totalSize"].clone() };
    let before = tasks().await;
    let m03 =
        json!({"kind": "message", "messageId": "m-neg", "role": "user", "parts": [{"kind": "text", "text": "x"}]});
    let params = json!({"message": m03, "configuration": {"historyLength": -1}});
    invalid(&d.rpc(None, "message/send", params.clone()).await, "configuration.historyLength");
    let streamed = reqwest::Client::new()
        .post(format!("{}/a2a", d.url))
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(streamed.contains("-32602") && streamed.contains("configuration.historyLength: "), "{streamed}");
    assert_eq!(tasks().await, before, "a refused message is not stored");
    let shown = d.rpc(Some("1.0"), "GetTask", json!({"id": id, "historyLength": "0"})).await;
    assert!(shown["result"].get("history").is_none(), "ProtoJSON's string form: {shown}");

    // Versions: unknown, and a method of the other version.
    assert_eq!(d.rpc(Some("2.0"), "SendMessage", json!({})).await["error"]["code"], -32009);
    assert_eq!(d.rpc(None, "SendMessage", json!({})).await["error"]["code"], -32009);
    assert_eq!(d.rpc(Some("1.0"), "message/send", json!({})).await["error"]["code"], -32009);
    let unknown = d.rpc(Some("1.0"), "Juggle", json!({})).await;
    assert_eq!((unknown["error"]["code"].as_i64(), unknown["error"].get("data")), (Some(-32601), None));
    let bad =
        d.rpc(Some("1.0"), "SendMessage", json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}})).await;
    assert_eq!(bad["error"]["code"], -32602);
    assert!(bad["error"]["message"].as_str().unwrap().contains("messageId"), "{bad}");
    assert_eq!(d.rpc(Some("1.0"), "GetExtendedAgentCard", json!({})).await["error"]["code"], -32007);
    let no_task = d.rpc(Some("1.0"), "CreateTaskPushNotificationConfig", json!({})).await;
    assert_eq!(no_task["error"]["code"], -32602, "{no_task}");
    // A Clutch task no A2A message started is no A2A task.
    let inbox_task = {
        let t = clutch_proto::validate::message(
            &json!({"thread_id": clutch_proto::id::generate(clutch_proto::id::Kind::Thread), "run_id": clutch_proto::id::generate(clutch_proto::id::Kind::Run),
                    "task_id": clutch_proto::id::generate(clutch_proto::id::Kind::Task), "from": {"agent_id": "user:ada"},
                    "to": [{"agent_id": "agent:slow"}], "type": "task.request", "payload": {"goal": "x"}}),
            &clutch_proto::validate::Defaults { now: std::time::SystemTime::now() },
        )
        .unwrap();
        let id = t.task_id.clone();
        d.engine.submit(vec![t]).await.unwrap().pop().unwrap().unwrap();
        id
    };
    assert_eq!(d.rpc(Some("1.0"), "GetTask", json!({"id": inbox_task})).await["error"]["code"], -32001);

    // Not JSON, and not JSON-RPC; and the a2a media type answered in kind.
    let http = reqwest::Client::new();
    let r: Value = http
        .post(format!("{}/a2a", d.url))
        .body("{")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32700);
    let r: Value = http
        .post(format!("{}/a2a", d.url))
        .json(&json!({"method": "GetTask"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32600);
    let r = http
        .post(format!("{}/a2a/", d.url))
        .header("content-type", "application/a2a+json")
        .header("A2A-Version", "1.0")
        .body(json!({"jsonrpc": "2.0", "id": "x", "method": "GetTask", "params": {"id": id}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/a2a+json");
    let body: Value = r.json().await.unwrap();
    assert_eq!((body["id"].clone(), body["result"]["id"].clone()), (json!("x"), json!(id)));
    d.stop().await;
}

/// The `result`s of an SSE answer, in order (the stream ends when the task has).
async fn sse(url: &str, version: Option<&str>, method: &str, params: Value) -> Vec<Value> {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/a2a"))
        .header("accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}));
    if let Some(v) = version {
        request = request.header("A2A-Version", v);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = tokio::time::timeout(Duration::from_secs(20), response.text()).await.expect("the stream ends").unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| {
            let v: Value = serde_json::from_str(d).unwrap();
            assert_eq!(v["id"], 9, "{v}");
            v["result"].clone()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_message_and_a_subscription_tell_the_task_as_it_goes() {
    let d = start().await;
    register(&d.engine, "kim", "skill:answer").await;
    register(&d.engine, "slow", "skill:slow").await;
    let worker = kim_works(d.engine.clone());

    // 1.0: the task first, then updates, the artifact before the final status; no kind, no final.
    let events =
        sse(&d.url, Some("1.0"), "SendStreamingMessage", json!({"message": message("6 × 7?", Some("skill:answer"))}))
            .await;
    assert!(events[0]["task"]["id"].as_str().unwrap().starts_with("task_"), "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{events:?}");
    let artifact = events.iter().find(|e| e.get("artifactUpdate").is_some()).expect("an artifact update");
    assert_eq!(artifact["artifactUpdate"]["artifact"]["parts"], json!([{"text": "42: 6 × 7?"}]));
    assert!(events.iter().all(|e| e.get("kind").is_none() && e.pointer("/statusUpdate/final").is_none()), "{events:?}");

    // 0.3: kinds, and `final` on the last status update.
    let m03 = json!({"kind": "message", "messageId": "m-3", "role": "user", "parts": [{"kind": "text", "text": "hi"}], "metadata": {"skill": "skill:answer"}});
    let events = sse(&d.url, None, "message/stream", json!({"message": m03})).await;
    assert_eq!(events[0]["kind"], "task");
    let last = events.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["final"].as_bool(), last["status"]["state"].as_str()),
        (Some("status-update"), Some(true), Some("completed"))
    );
    assert!(events.iter().any(|e| e["kind"] == "artifact-update"), "{events:?}");

    // A subscription to a task under way: its progress, then its end.
    let sent = send_at_once(&d, "slowly", "skill:slow").await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    // Its first event (the task) says the subscription is in place.
    let mut watching = reqwest::Client::new()
        .post(format!("{}/a2a", d.url))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(20), watching.chunk()).await.unwrap().unwrap().unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let reply = |status, text: Option<&str>| Reply {
        status,
        text: text.map(str::to_owned),
        result: None,
        error: None,
        retryable: false,
    };
    d.engine.task_reply("agent:slow", &id, reply(Status::Accepted, None)).await.unwrap();
    let view = d.engine.task(&id).unwrap();
    let progress = clutch_proto::validate::message(
        &json!({"thread_id": view.thread_id, "run_id": view.run_id, "task_id": id, "from": {"agent_id": "agent:slow"},
                "to": [{"agent_id": "user:a2a"}], "type": "task.progress", "payload": {"percent": 50, "message": "half way"}}),
        &clutch_proto::validate::Defaults { now: std::time::SystemTime::now() },
    )
    .unwrap();
    d.engine.submit(vec![progress]).await.unwrap().pop().unwrap().unwrap();
    d.engine.task_reply("agent:slow", &id, reply(Status::Completed, Some("done slowly"))).await.unwrap();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), watching.chunk()).await.unwrap().unwrap() {
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["result"].clone())
        .collect();
    assert_eq!(events[0]["task"]["id"], id.as_str(), "{events:?}");
    let said: Vec<&str> =
        events.iter().filter_map(|e| e.pointer("/statusUpdate/status/message/parts/0/text")?.as_str()).collect();
    assert_eq!(said, ["half way"], "{events:?}");
    assert_eq!(events.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    // An ended task takes no subscription.
    assert_eq!(d.rpc(Some("1.0"), "SubscribeToTask", json!({"id": id})).await["error"]["code"], -32004);
    worker.abort();
    d.stop().await;
}

/// `agent:asker` asks for a number on each task given to it, waits for the answer in the task, then
/// completes with "you said N".
pub(crate) fn asker_works(engine: Engine, log: clutch_core::Handle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut asked: Vec<String> = Vec::new();
        loop {
            let Ok(inbox) = engine.inbox("agent:asker", Duration::from_secs(5)).await else { return };
            // The inbox answers at once while a task it asked about waits for its answer: a pause
            // keeps this loop from holding a worker thread.
            if inbox.tasks.iter().all(|item| asked.contains(&item.task.task_id)) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for item in inbox.tasks {
                let task = item.task.task_id.clone();
                if asked.contains(&task) {
                    continue;
                }
                asked.push(task.clone());
                let (engine, log) = (engine.clone(), log.clone());
                tokio::spawn(async move {
                    let filter = clutch_store::Filter {
                        task_id: Some(task.clone()),
                        kind: Some(clutch_proto::MessageType::ChatMessage),
                        ..Default::default()
                    };
                    let mut answers = log.subscribe(filter, Some(0)).await.unwrap();
                    let view = engine.task(&task).unwrap();
                    let ask = clutch_proto::validate::message(
                        &json!({"thread_id": view.thread_id, "run_id": view.run_id, "task_id": task, "from": {"agent_id": "agent:asker"},
                                "to": [{"agent_id": view.requester}], "type": "task.progress",
                                "payload": {"message": "Which number?", "input_required": {"prompt": "Which number?"}}}),
                        &clutch_proto::validate::Defaults { now: std::time::SystemTime::now() },
                    )
                    .unwrap();
                    engine.submit(vec![ask]).await.unwrap().pop().unwrap().unwrap();
                    let answer = answers.next().await.unwrap().message().unwrap();
                    let said = answer.payload["text"].as_str().unwrap_or_default().to_owned();
                    let reply = Reply {
                        status: Status::Completed,
                        text: Some(format!("you said {said}")),
                        result: None,
                        error: None,
                        retryable: false,
                    };
                    engine.task_reply("agent:asker", &task, reply).await.unwrap();
                });
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_for_input_and_the_client_answers_in_the_same_task() {
    let d = start().await;
    register(&d.engine, "asker", "skill:ask").await;
    let asker = asker_works(d.engine.clone(), d.log.clone());
    // Blocking stops where the agent asks: the question is the status's message.
    let sent = d.rpc(Some("1.0"), "SendMessage", json!({"message": message("pick for me", Some("skill:ask"))})).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{sent}");
    assert_eq!(task["status"]["message"]["parts"], json!([{"text": "Which number?"}]));
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    let id = task["id"].as_str().unwrap().to_owned();
    // 0.3 names it so too.
    assert_eq!(d.rpc(None, "tasks/get", json!({"id": id})).await["result"]["status"]["state"], "input-required");
    // The answer, in the same task: it goes on to the end.
    let answer = json!({"messageId": "m-9", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "7"}]});
    let sent = d.rpc(Some("1.0"), "SendMessage", json!({"message": answer})).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "you said 7"}]));
    let said: Vec<(&str, &str)> = task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["parts"][0]["text"].as_str().unwrap()))
        .collect();
    assert_eq!(said, [("ROLE_USER", "pick for me"), ("ROLE_AGENT", "Which number?"), ("ROLE_USER", "7")]);
    // An ended task takes no more messages; an unknown one is not found.
    let late = json!({"messageId": "m-10", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "8"}]});
    assert_eq!(d.rpc(Some("1.0"), "SendMessage", json!({"message": late})).await["error"]["code"], -32004);
    let lost = json!({"messageId": "m-11", "role": "ROLE_USER", "taskId": "task_nope", "parts": [{"text": "8"}]});
    assert_eq!(d.rpc(Some("1.0"), "SendMessage", json!({"message": lost})).await["error"]["code"], -32001);
    asker.abort();
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_json_binding_serves_the_same_operations() {
    let d = start().await;
    register(&d.engine, "kim", "skill:answer").await;
    let worker = kim_works(d.engine.clone());
    let http = reqwest::Client::new();
    let rest = format!("{}/a2a/rest", d.url);
    let call = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = http.request(method, format!("{rest}{path}")).header("A2A-Version", "1.0");
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let response = r.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    // Send (blocking): the bare SendMessageResponse.
    let (status, sent) =
        call(reqwest::Method::POST, "/message:send", Some(json!({"message": message("6 × 7?", Some("skill:answer"))})))
            .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    let (status, got) = call(reqwest::Method::GET, &format!("/tasks/{id}?historyLength=0"), None).await;
    assert_eq!((status, got["id"].as_str()), (200, Some(id.as_str())));
    assert!(got.get("history").is_none(), "{got}");
    let (status, e) = call(reqwest::Method::GET, &format!("/tasks/{id}?historyLength=-5"), None).await;
    assert_eq!((status, e["error"]["details"][0]["reason"].as_str()), (400, Some("INVALID_PARAMS")), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().starts_with("historyLength: "), "names the field: {e}");
    let (_, list) = call(reqwest::Method::GET, "/tasks?pageSize=1&includeArtifacts=true", None).await;
    assert_eq!(list["tasks"][0]["artifacts"][0]["parts"], json!([{"text": "42: 6 × 7?"}]), "{list}");
    // Errors: an HTTP status and a google.rpc.Status with the ErrorInfo.
    let (status, e) = call(reqwest::Method::POST, &format!("/tasks/{id}:cancel"), Some(json!({}))).await;
    assert_eq!((status, e["error"]["status"].as_str()), (409, Some("FAILED_PRECONDITION")), "{e}");
    assert_eq!(e["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE");
    let (status, e) = call(reqwest::Method::GET, "/tasks/task_nope", None).await;
    assert_eq!((status, e["error"]["details"][0]["reason"].as_str()), (404, Some("TASK_NOT_FOUND")));
    let (status, _) = call(reqwest::Method::GET, "/nowhere", None).await;
    assert_eq!(status, 404);
    let r = http.get(format!("{rest}/tasks/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 400, "no A2A-Version is 0.3, which this binding is not");
    // A stream: bare StreamResponses, the task first, the end last.
    let response = http
        .post(format!("{rest}/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("and 6 × 8?", Some("skill:answer"))}))
        .send()
        .await
        .unwrap();
    let text = tokio::time::timeout(Duration::from_secs(20), response.text()).await.unwrap().unwrap();
    let events: Vec<Value> =
        text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(events[0]["task"]["id"].is_string() && events[0].get("jsonrpc").is_none(), "{events:?}");
    assert_eq!(events.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{events:?}");
    worker.abort();
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_left_memory_is_still_got_from_the_log_and_not_cancelable() {
    // No ended task stays in memory: each leaves as soon as it ends.
    let d = crate::start_with(clutch_core::engine::Options { ended_max: 0, ..Default::default() }).await;
    register(&d.engine, "kim", "skill:answer").await;
    let worker = kim_works(d.engine.clone());
    let sent = d.rpc(Some("1.0"), "SendMessage", json!({"message": message("6 × 7?", Some("skill:answer"))})).await;
    let task = sent["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    let id = task["id"].as_str().unwrap().to_owned();
    tokio::time::timeout(Duration::from_secs(10), async {
        while d.engine.task(&id).is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the ended task never left memory");
    let got = d.rpc(Some("1.0"), "GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{got}");
    assert_eq!(got["result"]["artifacts"], task["artifacts"], "{got}");
    assert_eq!(got["result"]["history"][0]["parts"], json!([{"text": "6 × 7?"}]), "{got}");
    let cancel = d.rpc(Some("1.0"), "CancelTask", json!({"id": id})).await;
    assert_eq!(cancel["error"]["code"], -32002, "{cancel}");
    worker.abort();
    d.stop().await;
}
