//! A2A push notifications: a client's webhooks for its task, set with its message or on their own,
//! in 1.0, 0.3 and over the HTTP+JSON binding; each change POSTed to a real HTTP receiver with the
//! client's credentials (retried when it fails), which never reach the log or an answer; the
//! outbound guard, the errors, and configs that survive a restart.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use clutch_store::Filter;
use serde_json::{Value, json};

use crate::server::{kim_works, message, register, send_at_once};
use crate::{Daemon, a2a_options, start_a2a};

/// What a webhook received: the path, the headers that matter, and the body.
#[derive(Debug, Clone)]
struct Got {
    path: String,
    authorization: Option<String>,
    token: Option<String>,
    content_type: Option<String>,
    body: Value,
}

/// A webhook receiver on 127.0.0.1 that refuses its first `fail` POSTs with a 503.
struct Webhook {
    url: String,
    got: Arc<Mutex<Vec<Got>>>,
    refused: Arc<Mutex<usize>>,
}

async fn webhook(fail: usize) -> Webhook {
    let got: Arc<Mutex<Vec<Got>>> = Arc::default();
    let refused = Arc::new(Mutex::new(0usize));
    let (kept, failures) = (got.clone(), refused.clone());
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
        let (kept, failures) = (kept.clone(), failures.clone());
        async move {
            {
                let mut failed = failures.lock().unwrap();
                if *failed < fail {
                    *failed += 1;
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
            }
            let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
            kept.lock().unwrap().push(Got {
                path: uri.path().to_owned(),
                authorization: header("authorization"),
                token: header("x-a2a-notification-token"),
                content_type: header("content-type"),
                body: serde_json::from_str(&body).unwrap_or(Value::Null),
            });
            StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Webhook { url, got, refused }
}

impl Webhook {
    /// What reached `path`, once `done` holds of it (within 20 s).
    async fn until(&self, path: &str, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got: Vec<Got> = self.got.lock().unwrap().iter().filter(|g| g.path == path).cloned().collect();
            if done(&got) {
                return got;
            }
            assert!(Instant::now() < deadline, "the webhook at {path} did not get what was expected: {got:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A daemon whose outbound guard lets it reach loopback (the test's webhook).
async fn start_loopback() -> Daemon {
    let engine = clutch_core::engine::Options {
        outbound: Arc::new(clutch_core::guard::Policy::loopback()),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    crate::open(dir, engine, a2a_options()).await
}

/// Every event in the log, as stored.
async fn whole_log(d: &Daemon) -> String {
    let events = d.log.read(&Filter::default(), 0, 100_000).await.unwrap();
    events.iter().map(|e| e.json.to_string()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_is_told_of_its_task_at_its_webhooks_with_its_credentials() {
    let d = start_loopback().await;
    register(&d.engine, "kim", "skill:answer").await;
    let hook = webhook(1).await;
    // 1.0: the webhook named with the message; kim is not working yet.
    let sent = d
        .rpc(
            Some("1.0"),
            "SendMessage",
            json!({"message": message("6 × 7?", Some("skill:answer")), "configuration": {
                "returnImmediately": true,
                "taskPushNotificationConfig": {"url": format!("{}/v10", hook.url), "token": "tok-10",
                    "authentication": {"scheme": "Bearer", "credentials": "s3cret-cred-10"}}}}),
        )
        .await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    // 0.3: a second webhook on the same task, set on its own.
    let set = d
        .rpc(
            None,
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"id": "c03", "url": format!("{}/v03", hook.url),
                "authentication": {"schemes": ["Basic"], "credentials": "s3cret-cred-03"}}}),
        )
        .await;
    assert_eq!(set["result"]["pushNotificationConfig"]["id"], "c03", "{set}");
    assert_eq!(set["result"]["pushNotificationConfig"]["authentication"], json!({"schemes": ["Basic"]}), "{set}");
    let listed = d.rpc(Some("1.0"), "ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(listed["result"]["configs"].as_array().map(Vec::len), Some(2), "{listed}");

    let kim = kim_works(d.engine.clone());
    let ended = |got: &[Got]| {
        got.last().is_some_and(|g| {
            g.body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
                || g.body["status"]["state"] == "completed"
        })
    };
    let v10 = hook.until("/v10", ended).await;
    let v03 = hook.until("/v03", ended).await;
    assert!(*hook.refused.lock().unwrap() >= 1, "the first POST was refused, and retried");
    for g in &v10 {
        assert_eq!(g.authorization.as_deref(), Some("Bearer s3cret-cred-10"));
        assert_eq!(g.token.as_deref(), Some("tok-10"));
        assert_eq!(g.content_type.as_deref(), Some("application/a2a+json"));
        let update = g.body.get("statusUpdate").or_else(|| g.body.get("artifactUpdate")).expect("a StreamResponse");
        assert_eq!(update["taskId"], json!(id));
        assert!(g.body.get("kind").is_none(), "1.0 has no kind: {}", g.body);
    }
    let told_artifact = v10.iter().any(|g| g.body["artifactUpdate"]["artifact"]["parts"][0]["text"] == "42: 6 × 7?");
    assert!(told_artifact, "the answer is told as an artifact: {v10:#?}");
    for g in &v03 {
        assert_eq!(g.authorization.as_deref(), Some("Basic s3cret-cred-03"));
        assert_eq!(
            (g.body["kind"].as_str(), g.body["id"].as_str()),
            (Some("task"), Some(id.as_str())),
            "0.3: the task"
        );
    }
    kim.abort();

    // The credentials are nowhere in the log, nor in any answer.
    let log = whole_log(&d).await;
    assert!(!log.contains("s3cret-cred"), "a webhook's credentials never enter the log");
    let got = d.rpc(Some("1.0"), "GetTaskPushNotificationConfig", json!({"taskId": id, "id": "c03"})).await;
    assert_eq!(got["result"]["url"], json!(format!("{}/v03", hook.url)), "{got}");
    assert!(!got.to_string().contains("s3cret"), "answers withhold credentials: {got}");
    let first = listed["result"]["configs"][0]["id"].as_str().unwrap().to_owned();
    let first = if first == "c03" { listed["result"]["configs"][1]["id"].as_str().unwrap().to_owned() } else { first };
    let got = d.rpc(Some("1.0"), "GetTaskPushNotificationConfig", json!({"taskId": id, "id": first})).await;
    assert_eq!(
        (got["result"]["token"].as_str(), got["result"]["authentication"].clone()),
        (Some("tok-10"), json!({"scheme": "Bearer"})),
        "{got}"
    );

    // Delete is idempotent; a deleted config is not found; the ended task's other config is kept.
    for _ in 0..2 {
        let deleted = d.rpc(Some("1.0"), "DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": first})).await;
        assert_eq!(deleted["result"], json!({}), "{deleted}");
    }
    let gone = d.rpc(Some("1.0"), "GetTaskPushNotificationConfig", json!({"taskId": id, "id": first})).await;
    assert_eq!(gone["error"]["code"], -32001, "{gone}");
    let left = d.rpc(None, "tasks/pushNotificationConfig/list", json!({"id": id})).await;
    assert_eq!(left["result"].as_array().map(Vec::len), Some(1), "{left}");
    let deleted =
        d.rpc(None, "tasks/pushNotificationConfig/delete", json!({"id": id, "pushNotificationConfigId": "c03"})).await;
    assert_eq!(deleted["result"], Value::Null, "{deleted}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_guarded_checked_and_kept_across_a_restart() {
    let d = start_a2a(a2a_options()).await;
    register(&d.engine, "slow", "skill:slow").await;
    let sent = send_at_once(&d, "take your time", "skill:slow").await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let create = |config: Value| {
        let mut params = config;
        params["taskId"] = json!(id);
        d.rpc(Some("1.0"), "CreateTaskPushNotificationConfig", params)
    };
    let error =
        |v: &Value| (v["error"]["code"].as_i64().unwrap_or(0), v["error"]["message"].as_str().unwrap_or("").to_owned());

    // The outbound guard refuses a loopback webhook by default, when it is set.
    let (code, why) = error(&create(json!({"url": "http://127.0.0.1:9/hook"})).await);
    assert_eq!(code, -32602);
    assert!(why.starts_with("url:") && why.contains("outbound guard"), "{why}");
    let (code, why) = error(&create(json!({})).await);
    assert_eq!((code, why.starts_with("url:")), (-32602, true), "{why}");
    let (code, why) = error(&create(json!({"url": "ftp://93.184.215.14/hook"})).await);
    assert_eq!((code, why.starts_with("url:")), (-32602, true), "{why}");
    let (code, why) =
        error(&create(json!({"url": "https://93.184.215.14/hook", "authentication": {"credentials": "x"}})).await);
    assert_eq!((code, why.starts_with("authentication.scheme")), (-32602, true), "{why}");
    // A task the caller cannot see is not found, before its config is looked at.
    let unknown = d.rpc(Some("1.0"), "CreateTaskPushNotificationConfig", json!({"taskId": "task_nope"})).await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
    let unknown = d
        .rpc(None, "tasks/pushNotificationConfig/delete", json!({"id": "task_nope", "pushNotificationConfigId": "c"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32001, "deleting a config of no task: {unknown}");
    // Nothing was kept of the refused ones.
    let listed = d.rpc(Some("1.0"), "ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(listed["result"]["configs"], json!([]), "{listed}");

    // The HTTP+JSON binding: create, read, list, delete.
    let http = reqwest::Client::new();
    let rest = format!("{}/a2a/rest/tasks/{id}/pushNotificationConfigs", d.url);
    let made: Value = http
        .post(&rest)
        .header("A2A-Version", "1.0")
        .json(&json!({"id": "rest-1", "url": "https://93.184.215.14/hook", "authentication": {"scheme": "Bearer", "credentials": "c"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((made["id"].as_str(), made["taskId"].as_str()), (Some("rest-1"), Some(id.as_str())), "{made}");
    let one: Value =
        http.get(format!("{rest}/rest-1")).header("A2A-Version", "1.0").send().await.unwrap().json().await.unwrap();
    assert_eq!(one["url"], "https://93.184.215.14/hook", "{one}");
    let all: Value = http.get(&rest).header("A2A-Version", "1.0").send().await.unwrap().json().await.unwrap();
    assert_eq!(all["configs"].as_array().map(Vec::len), Some(1), "{all}");

    // At most ten per task.
    for n in 0..9 {
        let made = create(json!({"id": format!("c{n}"), "url": "https://93.184.215.14/hook"})).await;
        assert!(made.get("result").is_some(), "{made}");
    }
    let (code, why) = error(&create(json!({"id": "c10", "url": "https://93.184.215.14/hook"})).await);
    assert_eq!(code, -32602, "{why}");

    // Kept across a restart.
    let d = d.restart().await;
    let all = d.rpc(Some("1.0"), "ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(all["result"]["configs"].as_array().map(Vec::len), Some(10), "{all}");
    let status = http
        .delete(format!("{}/a2a/rest/tasks/{id}/pushNotificationConfigs/rest-1", d.url))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    let all = d.rpc(Some("1.0"), "ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(all["result"]["configs"].as_array().map(Vec::len), Some(9), "{all}");
    d.stop().await;
}
