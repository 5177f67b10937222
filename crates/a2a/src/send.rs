//! `POST /v1/a2a/send`: a message to any A2A agent, by its endpoint's URL, through the hub, so the
//! exchange is in the log. The endpoint becomes a remote agent of the hub (`agent:a2a-<hash of the
//! URL>`, registered once, its URL checked by the outbound guard), and the message a task sent to it
//! by name, which the remote delivery sends and follows like any other.

use std::time::{Duration, Instant, SystemTime};

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clutch_core::access::Caller;
use clutch_proto::id::{self, Kind};
use clutch_proto::message::Recipient;
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::Digest;

use crate::hub::Hub;

/// The capability a remote agent made for a send carries (nobody else asks for it).
const SENT_SKILL: &str = "skill:a2a-remote";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Send {
    /// The A2A agent's JSON-RPC endpoint (its card's 1.0 interface URL).
    url: String,
    text: String,
    /// The skill to ask for (the message's `metadata.skill`).
    #[serde(default)]
    skill: Option<String>,
    /// Who sends (default: the token's agent, else `user:api`).
    #[serde(default)]
    agent_id: Option<String>,
    /// Wait for the task to end (up to two minutes; default true).
    #[serde(default = "yes")]
    wait: bool,
}

fn yes() -> bool {
    true
}

fn refuse(status: StatusCode, code: &str, field: Option<&str>, message: String) -> Response {
    let mut error = json!({"code": code, "message": message, "retryable": false});
    if let Some(f) = field {
        error["field"] = json!(f);
    }
    (status, axum::Json(json!({"error": error}))).into_response()
}

/// `POST /v1/a2a/send` `{url, text, skill?, agent_id?, wait?}`: 200 `{task_id, run_id, thread_id,
/// agent_id, state, text?}` once the task ended (or 202 at once with `wait: false`).
pub(crate) async fn send(
    State(hub): State<Hub>,
    caller: Option<Extension<Caller>>,
    body: axum::Json<Value>,
) -> Response {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    if let Err(r) = caller.may_act_as_in(&body.0, "agent_id") {
        return refuse(StatusCode::FORBIDDEN, r.code.as_str(), r.field.as_deref(), r.message);
    }
    let req: Send = match serde_json::from_value(body.0) {
        Ok(r) => r,
        Err(e) => {
            return refuse(StatusCode::BAD_REQUEST, "VALIDATION_FAILED", None, format!("the body does not fit: {e}"));
        }
    };
    if req.text.trim().is_empty() {
        return refuse(StatusCode::BAD_REQUEST, "VALIDATION_FAILED", Some("text"), "text: required".into());
    }
    let from = match caller.acting_agent(req.agent_id.as_deref()) {
        Ok(named) => named.unwrap_or_else(|| "user:api".to_owned()),
        Err(r) => return refuse(StatusCode::FORBIDDEN, r.code.as_str(), r.field.as_deref(), r.message),
    };
    // The endpoint as a remote agent of the hub, registered once (the guard checks its URL).
    let hash = hex::encode(sha2::Sha256::digest(req.url.as_bytes()));
    let agent = format!("agent:a2a-{}", &hash[..12]);
    if hub
        .engine
        .agent(&agent)
        .is_none_or(|a| a.card.endpoints.get(crate::remote::PROTOCOL).map(|e| e.url.as_str()) != Some(req.url.as_str()))
    {
        let card = json!({
            "v": clutch_proto::VERSION, "agent_id": agent, "display": {"name": req.url},
            "capabilities": [{"id": SENT_SKILL, "version": "1.0.0"}],
            "endpoints": {crate::remote::PROTOCOL: {"url": req.url}},
        });
        let card = match clutch_proto::validate::agent_card(&card) {
            Ok(c) => c,
            Err(p) => return refuse(StatusCode::BAD_REQUEST, "VALIDATION_FAILED", Some("url"), p.to_string()),
        };
        if let Err(e) = hub.engine.register(&card).await {
            let status = StatusCode::from_u16(e.code().http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            return refuse(status, e.code().as_str(), Some("url"), e.to_string());
        }
    }
    let (run, thread, task) = (id::generate(Kind::Run), id::generate(Kind::Thread), id::generate(Kind::Task));
    let mut payload = Map::new();
    payload.insert("goal".into(), json!(req.text));
    if let Some(skill) = &req.skill {
        payload.insert("skill".into(), json!(skill));
    }
    let mut m = Message::new(MessageType::TaskRequest, &from, (&run, &thread, &task), payload);
    m.to = vec![Recipient { agent_id: agent.clone() }];
    let raw = serde_json::to_value(&m).unwrap_or_default();
    let m = match clutch_proto::validate::message(&raw, &clutch_proto::validate::Defaults { now: SystemTime::now() }) {
        Ok(m) => m,
        Err(p) => return refuse(StatusCode::BAD_REQUEST, "VALIDATION_FAILED", None, p.to_string()),
    };
    let mut events = if req.wait {
        match hub.log.subscribe(Filter { task_id: Some(task.clone()), ..Filter::default() }, None).await {
            Ok(s) => Some(s),
            Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", None, e.to_string()),
        }
    } else {
        None
    };
    match hub.engine.submit(vec![m]).await.map(|mut a| a.pop()) {
        Ok(Some(Ok(_))) => {}
        Ok(Some(Err(e))) | Err(e) => {
            let status = StatusCode::from_u16(e.code().http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            return refuse(status, e.code().as_str(), None, e.to_string());
        }
        Ok(None) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", None, "unanswered".into()),
    }
    let answer = |state: &str, text: Option<String>| json!({"task_id": task, "run_id": run, "thread_id": thread, "agent_id": agent, "state": state, "text": text});
    let Some(events) = &mut events else {
        return (StatusCode::ACCEPTED, axum::Json(answer("requested", None))).into_response();
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // The end as the log shows it (the engine may know it a moment before).
        if let Ok(Some(end)) = hub.engine.task_end(&task).await {
            let state = hub.engine.task(&task).map(|t| t.state.as_str().to_owned()).unwrap_or_default();
            let text = end
                .payload
                .get("text")
                .or_else(|| end.payload.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            return (StatusCode::OK, axum::Json(answer(&state, text))).into_response();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.next()).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => {
                let state = hub.engine.task(&task).map(|t| t.state.as_str().to_owned()).unwrap_or_default();
                return (StatusCode::ACCEPTED, axum::Json(answer(&state, None))).into_response();
            }
        }
    }
}
