//! Push delivery to an agent's `endpoints.clutch.url`: in seq order, retried through 5xx answers
//! until the endpoint recovers, its position saved in the store; and only where the outbound guard
//! allows.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use clutch_core::guard::Policy;

use crate::start_full;

/// An agent endpoint that fails the first `fail` requests with 500, then records what it gets.
async fn endpoint(fail: usize) -> (String, Arc<Mutex<(usize, Vec<Value>)>>) {
    let seen: Arc<Mutex<(usize, Vec<Value>)>> = Arc::default();
    let state = seen.clone();
    let app = axum::Router::new().route(
        "/clutch",
        axum::routing::post(move |body: axum::Json<Value>| {
            let state = state.clone();
            async move {
                let mut s = state.lock().unwrap();
                s.0 += 1;
                if s.0 <= fail {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                s.1.push(body.0);
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/clutch", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_reach_a_push_agent_through_failures_in_order() {
    let engine = clutch_core::engine::Options { outbound: Arc::new(Policy::loopback()), ..Default::default() };
    let d = start_full(clutch_core::log::Options::default(), engine, clutch_gateway::Options::default()).await;
    let (url, seen) = endpoint(3).await;
    let options = clutch_core::push::Options {
        backoff: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        save_every: Duration::ZERO,
        rescan: Duration::from_millis(20),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let pusher = tokio::spawn(clutch_gateway::push::run(d.log.clone(), d.engine.clone(), options, async move {
        let _ = stopped.await;
    }));
    let card =
        json!({"agent_id": "agent:pushy", "capabilities": [{"id": "skill:x"}], "endpoints": {"clutch": {"url": url}}});
    let r = d.http.post(format!("{}/v1/agents", d.url)).json(&card).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let run = clutch_proto::id::generate(clutch_proto::id::Kind::Run);
    let mut sent = Vec::new();
    for i in 0..3 {
        let mut m = crate::msg(&run, "chat.message");
        m["to"] = json!([{"agent_id": "agent:pushy"}]);
        m["payload"] = json!({"n": i});
        let (status, ack) = d.post(&m).await;
        assert_eq!(status, 201);
        sent.push(ack["seq"].as_u64().unwrap());
    }
    // Not addressed to it: never pushed.
    d.post(&crate::msg(&run, "chat.message")).await;
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let seqs: Vec<u64> = seen.lock().unwrap().1.iter().map(|v| v["seq"].as_u64().unwrap()).collect();
            // The worker counts a push once it has read the endpoint's answer, a moment after the
            // endpoint recorded it.
            let counted = d.log.metrics().pushes.load(std::sync::atomic::Ordering::Relaxed);
            if seqs.len() >= 3 && counted >= 3 {
                return seqs;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("pushed within the guard time");
    assert_eq!(got, sent, "each message once, in seq order, after the endpoint recovered");
    assert_eq!(seen.lock().unwrap().0, 6, "three failed attempts, then three deliveries");
    assert_eq!(seen.lock().unwrap().1[0]["payload"], json!({"n": 0}));
    let metrics = d.log.metrics();
    assert_eq!(metrics.pushes.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(metrics.push_failures.load(std::sync::atomic::Ordering::Relaxed), 3);
    let _ = stop.send(());
    pusher.await.unwrap();
    assert_eq!(d.log.cursor("push:agent:pushy").await.unwrap(), Some(sent[2]), "the position is saved");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_keeps_pushes_off_networks_the_operator_did_not_allow() {
    let (url, seen) = endpoint(0).await;
    // Registered while loopback was allowed, then the daemon restarts without it: the card is in the
    // log, and push must still not reach the endpoint.
    let allowing = clutch_core::engine::Options { outbound: Arc::new(Policy::loopback()), ..Default::default() };
    let d = start_full(clutch_core::log::Options::default(), allowing, clutch_gateway::Options::default()).await;
    let card =
        json!({"agent_id": "agent:pushy", "capabilities": [{"id": "skill:x"}], "endpoints": {"clutch": {"url": url}}});
    let r = d.http.post(format!("{}/v1/agents", d.url)).json(&card).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let d = d.restart(clutch_core::engine::Options::default()).await;
    let options = clutch_core::push::Options {
        backoff: Duration::from_millis(5),
        backoff_max: Duration::from_millis(10),
        rescan: Duration::from_millis(5),
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let pusher = tokio::spawn(clutch_gateway::push::run(d.log.clone(), d.engine.clone(), options, async move {
        let _ = stopped.await;
    }));
    let run = clutch_proto::id::generate(clutch_proto::id::Kind::Run);
    let mut m = crate::msg(&run, "chat.message");
    m["to"] = json!([{"agent_id": "agent:pushy"}]);
    assert_eq!(d.post(&m).await.0, 201);
    // The worker tries (and is refused) again and again; wait for several refusals.
    tokio::time::timeout(Duration::from_secs(20), async {
        while d.log.metrics().push_failures.load(std::sync::atomic::Ordering::Relaxed) < 5 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("push attempts refused within the guard time");
    assert_eq!(seen.lock().unwrap().0, 0, "the endpoint saw no request");
    assert_eq!(d.log.metrics().pushes.load(std::sync::atomic::Ordering::Relaxed), 0);
    // Registering it again is refused at once, naming the rule and the key that allows it.
    let r = d.http.post(format!("{}/v1/agents", d.url)).json(&card).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "TARGET_NOT_ALLOWED", "{body}");
    assert_eq!(body["error"]["field"], "endpoints.clutch.url", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("loopback") && message.contains("outbound.allow_loopback"), "{message}");
    let _ = stop.send(());
    pusher.await.unwrap();
    d.shutdown().await;
}
