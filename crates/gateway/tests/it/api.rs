//! The request/response routes: messages, events, replay, artifacts, schemas, health, errors.

use serde_json::{Value, json};

use crate::{msg, run_id, start, start_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_then_get_then_duplicate_then_conflict() {
    let d = start().await;
    let mut m = msg(&run_id(), "chat.message");
    m["id"] = json!(clutch_proto::id::generate(clutch_proto::id::Kind::Message));
    let (status, ack) = d.post(&m).await;
    assert_eq!(status, 201);
    assert_eq!(ack, json!({"id": m["id"], "seq": 1, "duplicate": false}));

    let (status, event) = d.get(&format!("/v1/messages/{}", m["id"].as_str().unwrap())).await;
    assert_eq!(status, 200);
    assert_eq!(event["seq"], 1);
    assert_eq!(event["v"], "clutch/0.1");
    assert_eq!(event["payload"], m["payload"]);
    assert!(event["ts"].as_str().unwrap().ends_with('Z'));

    let (status, ack) = d.post(&m).await;
    assert_eq!((status, ack["duplicate"].clone(), ack["seq"].clone()), (200, json!(true), json!(1)));

    m["payload"]["text"] = json!("changed");
    let (status, err) = d.post(&m).await;
    assert_eq!(status, 409);
    assert_eq!(err["error"]["code"], "ID_CONFLICT");
    assert_eq!(err["error"]["field"], "id");
    assert_eq!(err["error"]["retryable"], false);
    assert_eq!(d.log.head().await.unwrap(), 1);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_message_lists_every_problem_and_stores_nothing() {
    let d = start().await;
    let bad = json!({"run_id": "run_nope", "type": "task.explode", "from": {"agent_id": "ken"}, "payload": []});
    let (status, err) = d.post(&bad).await;
    assert_eq!(status, 400);
    let e = &err["error"];
    assert_eq!(e["code"], "VALIDATION_FAILED");
    let paths: Vec<&str> = e["problems"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    for want in ["run_id", "thread_id", "task_id", "from.agent_id", "to", "type", "payload"] {
        assert!(paths.contains(&want), "{want} missing from {paths:?}");
    }
    assert_eq!(e["field"], Value::from(paths[0]));
    assert_eq!(d.log.head().await.unwrap(), 0);

    let (status, err) = d
        .post(&{
            let mut m = msg(&run_id(), "task.explode");
            m["type"] = json!("task.explode");
            m
        })
        .await;
    assert_eq!((status, err["error"]["code"].as_str()), (400, Some("UNKNOWN_TYPE")));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_answers_each_message_and_keeps_the_good_ones() {
    let d = start().await;
    let run = run_id();
    let mut dup_key = msg(&run, "chat.message");
    dup_key["idempotency_key"] = json!("k1");
    let batch = json!([msg(&run, "chat.message"), {"type": "nope"}, dup_key, dup_key, msg(&run, "task.result")]);
    let (status, body) = d.post(&batch).await;
    assert_eq!(status, 200);
    let r = body["results"].as_array().unwrap();
    assert_eq!(r.len(), 5);
    assert_eq!((r[0]["seq"].as_u64(), r[0]["duplicate"].as_bool()), (Some(1), Some(false)));
    assert_eq!(r[1]["error"]["code"], "VALIDATION_FAILED");
    assert_eq!(r[2]["seq"], 2);
    assert_eq!((r[3]["seq"].as_u64(), r[3]["duplicate"].as_bool()), (Some(2), Some(true)));
    assert_eq!(r[3]["id"], r[2]["id"], "a repeated idempotency key answers the original id");
    assert_eq!(r[4]["seq"], 3);
    assert_eq!(d.log.head().await.unwrap(), 3);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_clear_4xx() {
    let d = start_with(
        clutch_core::log::Options::default(),
        clutch_gateway::Options { body_limit_bytes: 4096, ..Default::default() },
    )
    .await;
    let url = format!("{}/v1/messages", d.url);
    let r = d.http.post(&url).header("content-type", "application/json").body("{\"run_id\": ").send().await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "INVALID_JSON");
    assert!(e["error"]["message"].as_str().unwrap().contains("line 1"), "{e}");

    let r = d.http.post(&url).header("content-type", "text/plain").body("{}").send().await.unwrap();
    assert_eq!(r.status(), 415);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "UNSUPPORTED_MEDIA_TYPE");

    let mut big = crate::msg(&run_id(), "chat.message");
    big["payload"]["text"] = json!("x".repeat(10_000));
    let r = d.http.post(&url).json(&big).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "PAYLOAD_TOO_LARGE");
    let (status, e) = d.post(&json!("just a string")).await;
    assert_eq!((status, e["error"]["code"].as_str()), (400, Some("VALIDATION_FAILED")));

    let (status, e) = d.get("/v2/nothing").await;
    assert_eq!((status, e["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
    let r = d.http.delete(&url).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "METHOD_NOT_ALLOWED");
    assert_eq!(d.log.head().await.unwrap(), 0);

    // Small bodies are read before the route runs, and bodies behind `Expect: 100-continue` are
    // not: the answers are the same.
    for expect in [None, Some("100-continue")] {
        let mut r = d.http.post(&url).json(&crate::msg(&run_id(), "chat.message"));
        if let Some(e) = expect {
            r = r.header("expect", e);
        }
        let r = r.send().await.unwrap();
        assert!(r.status().is_success(), "{expect:?}: {}", r.status());
        assert!(r.json::<Value>().await.unwrap()["seq"].as_u64().is_some_and(|s| s > 0));
    }
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_filter_and_page() {
    let d = start().await;
    let (a, b) = (run_id(), run_id());
    let mut batch = Vec::new();
    for i in 0..30 {
        batch.push(msg(if i % 2 == 0 { &a } else { &b }, if i % 3 == 0 { "task.result" } else { "chat.message" }));
    }
    d.post(&Value::Array(batch)).await;
    let (status, page) = d.get(&format!("/v1/events?run_id={a}&limit=10")).await;
    assert_eq!(status, 200);
    let seqs: Vec<u64> = page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..10).map(|i| 1 + 2 * i).collect::<Vec<_>>());
    assert_eq!(page["next_after"], 19);
    let (_, page) = d.get(&format!("/v1/events?run_id={a}&limit=10&after=19")).await;
    assert_eq!(page["events"].as_array().unwrap().len(), 5);
    assert_eq!(page["next_after"], 29);
    let (_, page) = d.get(&format!("/v1/events?run_id={a}&after=29")).await;
    assert_eq!((page["events"].as_array().unwrap().len(), page["next_after"].as_u64()), (0, Some(29)));

    let (_, page) = d.get(&format!("/v1/events?run_id={a}&type=task.result")).await;
    let seqs: Vec<u64> = page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 7, 13, 19, 25]);
    let (_, page) = d.get("/v1/events?agent_id=agent:ken&limit=1000").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 30);

    for (query, field) in [("type=task.nope", "type"), ("limit=0", "limit"), ("limit=5000", "limit")] {
        let (status, e) = d.get(&format!("/v1/events?{query}")).await;
        assert_eq!((status, e["error"]["field"].as_str()), (400, Some(field)), "{query}");
    }
    let (status, e) = d.get("/v1/events?runid=x").await;
    assert_eq!(status, 400);
    assert!(e["error"]["message"].as_str().unwrap().contains("runid"), "{e}");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_streams_a_whole_run_as_ndjson_in_order() {
    let d = start().await;
    let (run, other) = (run_id(), run_id());
    for chunk in 0..5 {
        let batch: Vec<Value> =
            (0..1000).map(|i| msg(if (i + chunk) % 2 == 0 { &run } else { &other }, "task.progress")).collect();
        d.post(&Value::Array(batch)).await;
    }
    let r = d.http.get(format!("{}/v1/runs/{run}/events", d.url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let text = r.text().await.unwrap();
    let seqs: Vec<u64> = text
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            assert_eq!(e["run_id"], Value::from(run.as_str()));
            e["seq"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(seqs.len(), 2500);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));

    let r = d.http.get(format!("{}/v1/runs/{run}/events?after={}", d.url, seqs[2399])).send().await.unwrap();
    assert_eq!(r.text().await.unwrap().lines().count(), 100);

    let (status, e) = d.get(&format!("/v1/runs/{}/events", run_id())).await;
    assert_eq!((status, e["error"]["code"].as_str()), (404, Some("RUN_NOT_FOUND")));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_upload_download_and_limit() {
    let d = start_with(
        clutch_core::log::Options { artifact_max_bytes: 1 << 20, ..Default::default() },
        clutch_gateway::Options::default(),
    )
    .await;
    let data = vec![42u8; 300_000];
    let r = d.http.put(format!("{}/v1/artifacts", d.url)).body(data.clone()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let a: Value = r.json().await.unwrap();
    let reference = a["ref"].as_str().unwrap().to_string();
    assert!(reference.starts_with("artifact:sha256:"));
    assert_eq!((a["size"].as_u64(), a["existed"].as_bool()), (Some(300_000), Some(false)));
    let r = d.http.put(format!("{}/v1/artifacts", d.url)).body(data.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);

    let r = d.http.get(format!("{}/v1/artifacts/{reference}", d.url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), data.as_slice());

    let r = d.http.put(format!("{}/v1/artifacts", d.url)).body(vec![0u8; (1 << 20) + 1]).send().await.unwrap();
    assert_eq!(r.status(), 413);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "PAYLOAD_TOO_LARGE");
    assert!(e["error"]["message"].as_str().unwrap().contains("1048576"), "{e}");

    let (status, e) = d.get(&format!("/v1/artifacts/artifact:sha256:{}", "0".repeat(64))).await;
    assert_eq!((status, e["error"]["code"].as_str()), (404, Some("ARTIFACT_NOT_FOUND")));
    let (status, e) = d.get("/v1/artifacts/report_456").await;
    assert_eq!((status, e["error"]["field"].as_str()), (400, Some("ref")));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_health_and_metrics() {
    let d = start().await;
    let (status, schema) = d.get("/v1/schemas/envelope").await;
    assert_eq!(status, 200);
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(schema, clutch_proto::schema::get("envelope").unwrap());
    let (status, _) = d.get("/v1/schemas/agent-card").await;
    assert_eq!(status, 200);
    let (status, e) = d.get("/v1/schemas/nope").await;
    assert_eq!((status, e["error"]["code"].as_str()), (404, Some("SCHEMA_NOT_FOUND")));
    assert!(e["error"]["hint"].as_str().unwrap().contains("GET /v1/schemas"));
    // The payload registry: built-ins, then one registered over HTTP.
    let (status, list) = d.get("/v1/schemas").await;
    assert_eq!(status, 200);
    let published: Vec<&str> =
        list["protocol"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(published[..2], ["envelope", "agent-card"]);
    assert_eq!(published[2..], clutch_core::published::names().collect::<Vec<_>>()[..]);
    // The daemon's views and payloads are served like the protocol's own.
    let (status, view) = d.get("/v1/schemas/task-view").await;
    assert_eq!((status, view), (200, clutch_core::published::get("task-view").unwrap()));
    let (status, _) = d.get("/v1/schemas/clutch.agent.status.v1.json").await;
    assert_eq!(status, 200);
    assert!(list["payloads"].as_array().unwrap().iter().any(|s| s["payload_type"] == "research.summary.v1"));
    let (status, summary) = d.get("/v1/schemas/research.summary.v1").await;
    assert_eq!(status, 200);
    assert_eq!(summary["$id"], "schema://clutch/research/summary@1");
    let body = json!({"payload_type": "market.brief.v1", "schema": {"type": "object", "required": ["headline"]}});
    let r = d.http.post(format!("{}/v1/schemas", d.url)).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let stored: Value = r.json().await.unwrap();
    assert_eq!(
        stored,
        json!({"payload_type": "market.brief.v1", "schema_ref": "schema://clutch/market/brief@1", "builtin": false})
    );
    let (status, doc) = d.get("/v1/schemas/schema:%2F%2Fclutch%2Fmarket%2Fbrief@1").await;
    assert_eq!((status, &doc["required"]), (200, &json!(["headline"])));
    let bad = json!({"payload_type": "Market", "schema": {}});
    let r = d.http.post(format!("{}/v1/schemas", d.url)).json(&bad).send().await.unwrap();
    assert_eq!(r.status(), 400);

    d.post(&msg(&run_id(), "chat.message")).await;
    let (status, h) = d.get("/healthz").await;
    assert_eq!((status, h["status"].as_str(), h["head_seq"].as_u64()), (200, Some("ok"), Some(2)));
    let text = d.http.get(format!("{}/metrics", d.url)).send().await.unwrap().text().await.unwrap();
    for name in [
        "clutch_appends_total 2",
        "clutch_append_batches_total 2",
        "clutch_stream_subscribers 0",
        "clutch_stream_lagged_drops_total 0",
        "clutch_engine_vet_seconds_count 2",
        "clutch_engine_apply_seconds_count 2",
        "clutch_engine_longest_writer_wait_seconds ",
        "clutch_store_index_lag_events ",
    ] {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }
    // Each batch's commit is timed once: apart from its flush (SQLite), or with it in one call.
    let count = |name: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(
        count("clutch_store_commit_seconds_count") + count("clutch_store_commit_and_sync_seconds_count"),
        2,
        "{text}"
    );
    d.shutdown().await;
}

mod auth {
    use std::collections::HashMap;
    use std::sync::Arc;

    use clutch_core::access::{Grant, Role, Tokens};
    use futures_util::StreamExt;
    use serde_json::json;

    use crate::{msg, run_id, start_full};

    struct Table(HashMap<&'static str, Grant>);

    impl Tokens for Table {
        fn authenticate(&self, token: &str) -> Option<Grant> {
            self.0.get(token).cloned()
        }
    }

    fn grant(name: &str, role: Role, agent: Option<&str>) -> Grant {
        Grant { name: name.into(), role, agent_id: agent.map(str::to_owned) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tokens_gate_every_route_by_role() {
        let table = Table(HashMap::from([
            ("ops-secret", grant("ops", Role::Admin, None)),
            ("ken-secret", grant("ken", Role::Agent, Some("agent:ken"))),
            ("dash-secret", grant("dash", Role::Observer, None)),
        ]));
        let options = clutch_gateway::Options { tokens: Some(Arc::new(table)), ..Default::default() };
        let d =
            start_full(clutch_core::log::Options::default(), clutch_core::engine::Options::default(), options).await;
        let url = |p: &str| format!("{}{p}", d.url);
        let post = |token: Option<&'static str>, path: &'static str, body: serde_json::Value| {
            let mut r = d.http.post(url(path)).json(&body);
            if let Some(t) = token {
                r = r.bearer_auth(t);
            }
            async move {
                let r = r.send().await.unwrap();
                (r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap())
            }
        };
        // Probes stay open; everything else needs a known token.
        assert_eq!(d.http.get(url("/healthz")).send().await.unwrap().status(), 200);
        let (status, body) = post(None, "/v1/messages", msg(&run_id(), "chat.message")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")));
        let (status, _) = post(Some("nope"), "/v1/messages", msg(&run_id(), "chat.message")).await;
        assert_eq!(status, 401);
        assert_eq!(d.http.get(url("/v1/events")).send().await.unwrap().status(), 401);
        assert_eq!(d.http.get(url("/metrics")).send().await.unwrap().status(), 401);
        // The agent token sends as its own agent only.
        let (status, _) = post(Some("ken-secret"), "/v1/messages", msg(&run_id(), "chat.message")).await;
        assert_eq!(status, 201);
        let mut other = msg(&run_id(), "chat.message");
        other["from"]["agent_id"] = json!("agent:eve");
        let (status, body) = post(Some("ken-secret"), "/v1/messages", other.clone()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str(), body["error"]["field"].as_str()),
            (403, Some("FORBIDDEN"), Some("from.agent_id"))
        );
        // In a batch, the refusal is per message.
        let (status, body) =
            post(Some("ken-secret"), "/v1/messages", json!([msg(&run_id(), "chat.message"), other.clone()])).await;
        assert_eq!(status, 200);
        assert!(body["results"][0]["seq"].is_u64());
        assert_eq!(body["results"][1]["error"]["code"], "FORBIDDEN");
        // ... and registers, heartbeats and removes only itself.
        let (status, _) =
            post(Some("ken-secret"), "/v1/agents", json!({"agent_id": "agent:eve", "capabilities": []})).await;
        assert_eq!(status, 403);
        let (status, _) =
            post(Some("ken-secret"), "/v1/agents", json!({"agent_id": "agent:ken", "capabilities": []})).await;
        assert_eq!(status, 201);
        let (status, _) = post(Some("ken-secret"), "/v1/agents/agent:ken/heartbeat", json!({})).await;
        assert_eq!(status, 200);
        let r = d.http.delete(url("/v1/agents/agent:ken")).bearer_auth("dash-secret").send().await.unwrap();
        assert_eq!(r.status(), 403);
        // The observer reads but writes nothing; the admin may send as anyone.
        let (status, _) = post(Some("dash-secret"), "/v1/messages", msg(&run_id(), "chat.message")).await;
        assert_eq!(status, 403);
        let r = d.http.get(url("/v1/agents")).bearer_auth("dash-secret").send().await.unwrap();
        assert_eq!(r.status(), 200);
        let (status, _) = post(Some("ops-secret"), "/v1/messages", other).await;
        assert_eq!(status, 201);
        // A browser's WebSocket passes the token in the query string.
        let ws = format!("ws://{}/v1/stream?after=0&access_token=dash-secret", d.addr);
        let (mut socket, _) = tokio_tungstenite::connect_async(ws).await.unwrap();
        let first = socket.next().await.unwrap().unwrap();
        let event: serde_json::Value = serde_json::from_str(first.to_text().unwrap()).unwrap();
        assert_eq!(event["seq"], 1);
        let denied = tokio_tungstenite::connect_async(format!("ws://{}/v1/stream?access_token=bad", d.addr)).await;
        assert!(denied.is_err(), "an unknown token gets no stream");
        d.shutdown().await;
    }
}

mod authorization {
    //! Every route of the access table, walked with no token, an unknown one, an observer's, an
    //! agent's acting as another agent and an admin's: who may call a route is decided before its
    //! body is read, so a caller without the right learns nothing from validation.

    use std::collections::HashMap;
    use std::sync::Arc;

    use clutch_core::access::{Access, Grant, Role, Tokens};
    use clutch_gateway::access::ACCESS;
    use serde_json::{Value, json};

    use crate::{Daemon, msg, run_id, start_full};

    struct Table(HashMap<&'static str, Grant>);

    impl Tokens for Table {
        fn authenticate(&self, token: &str) -> Option<Grant> {
            self.0.get(token).cloned()
        }
    }

    async fn daemon() -> Daemon {
        let grant = |name: &str, role, agent: Option<&str>| Grant {
            name: name.into(),
            role,
            agent_id: agent.map(str::to_owned),
        };
        let table = Table(HashMap::from([
            ("ops", grant("ops", Role::Admin, None)),
            ("ken", grant("ken", Role::Agent, Some("agent:ken"))),
            ("dash", grant("dash", Role::Observer, None)),
            ("lee", grant("lee", Role::Approver, None)),
        ]));
        let options = clutch_gateway::Options { tokens: Some(Arc::new(table)), ..Default::default() };
        start_full(clutch_core::log::Options::default(), clutch_core::engine::Options::default(), options).await
    }

    /// A route pattern with its parameters filled; path ids name another agent (`agent:eve`).
    fn fill(pattern: &str) -> String {
        pattern
            .replace("{id}", "agent:eve")
            .replace("{run_id}", "run_01J00000000000000000000000")
            .replace("{reference}", "sha256:00")
            .replace("{name}", "nope")
            .replace("{*path}", "js/main.js")
    }

    /// Status, error code and field of `method path` with `token` and a raw `body`. Answers that are
    /// not JSON (a stream, a page) are not read.
    async fn send(d: &Daemon, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let head = method == reqwest::Method::HEAD;
        let mut r = d.http.request(method, format!("{}{path}", d.url));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b.to_owned());
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let json = r.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        if head || !json {
            return (status, "-".into());
        }
        let body: Value = r.json().await.unwrap();
        let error = &body["error"];
        (status, format!("{} {}", error["code"].as_str().unwrap_or("-"), error["field"].as_str().unwrap_or("-")))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_route_decides_who_may_call_it_before_reading_the_body() {
        let d = daemon().await;
        // Valid JSON naming another agent everywhere an agent can be named, and wrong in every other way.
        let as_eve = json!({
            "agent_id": "agent:eve", "from": {"agent_id": "agent:eve"}, "bogus": 1,
            "id": "wrong", "task_id": "wrong", "workflow_id": "wrong", "type": 7,
        })
        .to_string();
        // The write routes that act as no agent: an agent token may use them like an admin.
        let agentless = [("PUT", "/v1/artifacts"), ("POST", "/v1/schemas")];
        let mut seen = Vec::new();
        for &(method, pattern, access) in ACCESS {
            let path = fill(pattern);
            let route = format!("{method} {pattern}");
            let anonymous = send(&d, method, &path, None, Some("{not json")).await;
            let unknown = send(&d, method, &path, Some("nope"), Some("{not json")).await;
            let observer = send(&d, method, &path, Some("dash"), Some("{not json")).await;
            let agent = send(&d, method, &path, Some("ken"), Some(&as_eve)).await;
            let approver = send(&d, method, &path, Some("lee"), Some("{not json")).await;
            let admin = send(&d, method, &path, Some("ops"), Some(&as_eve)).await;
            match access {
                Access::Open => {
                    assert_ne!(anonymous.0, 401, "{route} is open: {anonymous:?}");
                    assert_ne!(unknown.0, 401, "{route} is open: {unknown:?}");
                }
                Access::Read | Access::Write | Access::Approve | Access::Admin => {
                    assert_eq!(anonymous, (401, "UNAUTHORIZED -".into()), "{route} without a token");
                    assert_eq!(unknown, (401, "UNAUTHORIZED -".into()), "{route} with an unknown token");
                }
            }
            match access {
                Access::Write | Access::Approve | Access::Admin => {
                    assert_eq!(observer, (403, "FORBIDDEN -".into()), "{route} for an observer")
                }
                _ => assert!(![401, 403].contains(&observer.0), "{route} reads for an observer: {observer:?}"),
            }
            // An approver reads and decides tool calls, and changes nothing else.
            match access {
                Access::Write | Access::Admin => {
                    assert_eq!(approver, (403, "FORBIDDEN -".into()), "{route} for an approver")
                }
                _ => assert!(![401, 403].contains(&approver.0), "{route} for an approver: {approver:?}"),
            }

            if matches!(access, Access::Approve | Access::Admin) {
                assert_eq!(agent, (403, "FORBIDDEN -".into()), "{route} for an agent");
            } else if access == Access::Write && !agentless.contains(&(method, pattern)) {
                let field = if pattern == "/v1/messages" { "from.agent_id" } else { "agent_id" };
                assert_eq!(agent, (403, format!("FORBIDDEN {field}")), "{route} for an agent acting as another");
            } else {
                assert!(![401, 403].contains(&agent.0), "{route} for an agent: {agent:?}");
            }
            // The admin may do anything: every route of the table is served (not the fallbacks).
            assert!(![401, 403, 405].contains(&admin.0) && admin.1 != "NOT_FOUND -", "{route}: {admin:?}");
            seen.push(route);
        }
        assert_eq!(seen.len(), ACCESS.len());

        // HEAD is a GET; another method on a route, or no route at all, tells nothing without a token.
        assert_eq!(send(&d, "HEAD", "/v1/agents", None, None).await.0, 401);
        assert_eq!(send(&d, "HEAD", "/v1/agents", Some("dash"), None).await.0, 200);
        assert_eq!(send(&d, "DELETE", "/v1/messages", None, None).await, (401, "UNAUTHORIZED -".into()));
        assert_eq!(send(&d, "DELETE", "/v1/messages", Some("dash"), None).await, (405, "METHOD_NOT_ALLOWED -".into()));
        assert_eq!(send(&d, "GET", "/v1/nothing", None, None).await, (401, "UNAUTHORIZED -".into()));
        assert_eq!(send(&d, "GET", "/v1/nothing", Some("dash"), None).await, (404, "NOT_FOUND -".into()));
        d.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_a_batch_each_message_sent_as_another_agent_is_refused_before_validation() {
        let d = daemon().await;
        let r = d
            .http
            .post(format!("{}/v1/messages", d.url))
            .bearer_auth("ken")
            .json(&json!([
                {"from": {"agent_id": "agent:eve"}, "type": "no.such.type"},
                msg(&run_id(), "chat.message"),
                {"from": {"agent_id": "agent:ken"}, "type": "no.such.type"},
            ]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        let results = body["results"].as_array().unwrap();
        assert_eq!(
            (results[0]["error"]["code"].as_str(), results[0]["error"]["field"].as_str()),
            (Some("FORBIDDEN"), Some("from.agent_id"))
        );
        assert!(results[1]["seq"].is_u64(), "{body}");
        assert_eq!(results[2]["error"]["code"], "VALIDATION_FAILED", "its own messages are validated as before");
        d.shutdown().await;
    }
}

mod signatures {
    use std::sync::Arc;

    use clutch_proto::id::{self, Kind};
    use serde_json::json;

    use crate::{msg, run_id, start_full};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_bad_signatures_does_not_flood_the_log() {
        let key = clutch_proto::sign::generate();
        let dir = tempfile::tempdir().unwrap();
        let org = format!(
            "agents:\n  agent:ken:\n    keys: [{{kid: k1, public_key: {k}}}]\n    require_signature: true\n  \
             agent:ann:\n    keys: [{{kid: k1, public_key: {k}}}]\n    require_signature: true\n",
            k = key.public_key()
        );
        std::fs::write(dir.path().join("org.yaml"), org).unwrap();
        let policy = Arc::new(clutch_core::config::Policy::load(dir.path()).unwrap());
        let engine = clutch_core::engine::Options { policy, ..Default::default() };
        let d = start_full(clutch_core::log::Options::default(), engine, clutch_gateway::Options::default()).await;
        let batch: Vec<_> = (0..500).map(|_| msg(&run_id(), "chat.message")).collect();
        let (status, answers) = d.post(&json!(batch)).await;
        assert_eq!(status, 200);
        let refused = answers["results"].as_array().unwrap().iter().filter(|r| r["error"]["code"] == "UNAUTHORIZED");
        assert_eq!(refused.count(), 500, "every message is refused");
        let recorded = d.log.head().await.unwrap();
        assert!((1..=6).contains(&recorded), "a sender's burst is recorded, the rest only counted: {recorded} events");
        let metrics = d.log.metrics();
        assert_eq!(metrics.refusals.load(std::sync::atomic::Ordering::Relaxed), 500);
        assert_eq!(metrics.refusals_unrecorded.load(std::sync::atomic::Ordering::Relaxed), 500 - recorded);
        // Another sender's refusal is still recorded: ken's flood used up only ken's share.
        let mut other = msg(&run_id(), "chat.message");
        other["from"]["agent_id"] = json!("agent:ann");
        assert_eq!(d.post(&other).await.0, 401);
        assert_eq!(d.log.head().await.unwrap(), recorded + 1);
        let last = d.log.read(&clutch_store::Filter::default(), recorded, 1).await.unwrap();
        let last: serde_json::Value = serde_json::from_str(&last[0].to_wire()).unwrap();
        assert_eq!(last["payload"]["claimed_from"], "agent:ann", "{last}");
        d.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn signed_messages_are_verified_and_refusals_are_visible() {
        let key = clutch_proto::sign::generate();
        let other = clutch_proto::sign::generate();
        let dir = tempfile::tempdir().unwrap();
        let org = format!(
            "agents:\n  agent:ken:\n    keys: [{{kid: k1, public_key: {}}}]\n    require_signature: true\n",
            key.public_key()
        );
        std::fs::write(dir.path().join("org.yaml"), org).unwrap();
        let policy = Arc::new(clutch_core::config::Policy::load(dir.path()).unwrap());
        let engine = clutch_core::engine::Options { policy, ..Default::default() };
        let d = start_full(clutch_core::log::Options::default(), engine, clutch_gateway::Options::default()).await;
        let signed = |key: &clutch_proto::sign::SigningKey| {
            let mut m = msg(&run_id(), "chat.message");
            m["id"] = json!(id::generate(Kind::Message));
            m["ts"] = json!("2026-11-22T05:00:00.000Z");
            clutch_proto::sign::sign(&mut m, "k1", key).unwrap();
            m
        };
        // Unsigned, from an agent that must sign.
        let (status, body) = d.post(&msg(&run_id(), "chat.message")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")));
        assert_eq!(body["error"]["field"], "security.auth");
        // Signed with the wrong key; then tampered after signing.
        let (status, _) = d.post(&signed(&other)).await;
        assert_eq!(status, 401);
        let mut tampered = signed(&key);
        tampered["payload"]["text"] = json!("changed");
        let (status, _) = d.post(&tampered).await;
        assert_eq!(status, 401);
        let head = d.log.head().await.unwrap();
        let refusals = d.get("/v1/events?type=chat.system").await.1;
        let kinds: Vec<&str> =
            refusals["events"].as_array().unwrap().iter().map(|e| e["payload_type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["clutch.refusal.v1"; 3], "each refusal is visible, nothing else was stored");
        assert_eq!(head, 3);
        // Well signed: stored; replayed: a duplicate, stored once.
        let good = signed(&key);
        let (status, ack) = d.post(&good).await;
        assert_eq!(status, 201, "{ack}");
        let (status, again) = d.post(&good).await;
        assert_eq!((status, &again["duplicate"]), (200, &json!(true)));
        assert_eq!(d.log.head().await.unwrap(), 4);
        // Another agent, not required to sign, may send unsigned.
        let mut m = msg(&run_id(), "chat.message");
        m["from"]["agent_id"] = json!("agent:eve");
        assert_eq!(d.post(&m).await.0, 201);
        d.shutdown().await;
    }
}

#[tokio::test]
async fn ended_work_that_left_memory_is_read_from_the_log() {
    // No ended task stays in memory: each leaves as soon as it ends.
    let engine = clutch_core::engine::Options { ended_max: 0, ..Default::default() };
    let d = crate::start_full(Default::default(), engine, Default::default()).await;
    let card = json!({"agent_id": "agent:w", "capabilities": [{"id": "skill:x"}]});
    assert_eq!(d.http.post(format!("{}/v1/agents", d.url)).json(&card).send().await.unwrap().status(), 201);
    let run = run_id();
    let mut request = msg(&run, "task.request");
    request["to"] = json!([{"agent_id": "agent:w"}]);
    let task = request["task_id"].as_str().unwrap().to_owned();
    let said = |kind: &str| {
        let mut m = request.clone();
        m["type"] = json!(kind);
        m["from"] = json!({"agent_id": "agent:w"});
        m["to"] = json!([]);
        m
    };
    for m in [request.clone(), said("task.accept"), said("task.result")] {
        assert_eq!(d.post(&m).await.0, 201);
    }
    let gone = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let metrics = d.http.get(format!("{}/metrics", d.url)).send().await.unwrap().text().await.unwrap();
            if metrics.contains("\nclutch_engine_tombstones 1\n") {
                return metrics;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the ended task never left memory");
    assert!(gone.contains("\nclutch_engine_tasks 0\n"), "{gone}");
    let (status, shown) = d.get(&format!("/v1/tasks/{task}")).await;
    assert_eq!((status, shown["state"].as_str()), (200, Some("completed")), "{shown}");
    assert_eq!(shown["history"].as_array().unwrap().len(), 3, "{shown}");
    let (status, tree) = d.get(&format!("/v1/runs/{run}/tasks")).await;
    assert_eq!((status, &tree["counts"]), (200, &json!({"completed": 1})), "{tree}");
    let (status, late) = d.post(&said("task.progress")).await;
    assert_eq!((status, late["error"]["code"].as_str()), (409, Some("INVALID_TRANSITION")), "{late}");
    d.shutdown().await;
}
