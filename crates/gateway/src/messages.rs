//! `POST /v1/messages` (one message or a batch) and `GET /v1/messages/{id}`. The route's access is
//! checked before the body is read (`access`); who a message is sent as, before it is validated; its
//! signature on the JSON as sent (`Engine::verify_signature`), before the daemon fills anything.

use std::time::SystemTime;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use clutch_core::Refusal;
use clutch_core::access::Caller;
use clutch_core::engine::Ack;
use clutch_proto::ErrorCode;
use clutch_proto::Message;
use clutch_proto::error::ErrorBody;
use clutch_proto::validate::{self, Defaults};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiError, error_body};
use crate::extract::JsonValue;

/// Most messages in one batch request.
const MAX_BATCH: usize = 10_000;

pub(crate) async fn post(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let defaults = Defaults { now: SystemTime::now() };
    match body {
        Value::Array(items) => {
            if items.len() > MAX_BATCH {
                return Err(ApiError::new(
                    ErrorCode::ValidationFailed,
                    format!("a batch holds at most {MAX_BATCH} messages, got {}", items.len()),
                )
                .hint("split the batch"));
            }
            // Validate all, append the valid ones together, answer in the order given.
            let mut results: Vec<Option<Value>> = vec![None; items.len()];
            let mut valid = Vec::with_capacity(items.len());
            let mut positions = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                // An agent token sending as another agent is refused before the item is validated.
                if let Err(r) = caller.may_act_as_in(item, "from.agent_id") {
                    results[i] = Some(json!({ "error": error_body(&r.into()) }));
                    continue;
                }
                match validate::message(item, &defaults) {
                    Ok(m) => match admit(&state, &caller, item, &m).await {
                        Ok(()) => {
                            valid.push(m);
                            positions.push(i);
                        }
                        Err(r) => results[i] = Some(json!({ "error": error_body(&r.into()) })),
                    },
                    Err(problems) => results[i] = Some(json!({ "error": ErrorBody::from_problems(problems) })),
                }
            }
            let outcomes = state.engine.submit(valid).await?;
            for (i, outcome) in positions.into_iter().zip(outcomes) {
                results[i] = Some(match outcome {
                    Ok(a) => ack(&a),
                    Err(e) => json!({ "error": error_body(&e) }),
                });
            }
            Ok(axum::Json(json!({ "results": results })).into_response())
        }
        value => {
            caller.may_act_as_in(&value, "from.agent_id").map_err(clutch_core::Error::from)?;
            let message = validate::message(&value, &defaults).map_err(ErrorBody::from_problems)?;
            admit(&state, &caller, &value, &message).await.map_err(clutch_core::Error::from)?;
            let outcome = state.engine.submit(vec![message]).await?.pop().expect("one answer per message")?;
            let status = match &outcome {
                Ack::Stored(o) if !o.duplicate => StatusCode::CREATED,
                _ => StatusCode::OK,
            };
            Ok((status, axum::Json(ack(&outcome))).into_response())
        }
    }
}

/// What a message must pass before the engine sees it: the caller may send as its sender, and its
/// signature (checked on the JSON as sent) holds where the policy asks for one. A signature refusal
/// is recorded for operators.
async fn admit(state: &AppState, caller: &Caller, raw: &Value, message: &Message) -> Result<(), Refusal> {
    caller.may_send(message)?;
    if let Err(refusal) = state.engine.verify_signature(raw, message) {
        state.engine.report_refusal(message, &refusal).await;
        return Err(refusal);
    }
    Ok(())
}

/// The answer for one message: `{id, seq, duplicate}` once stored (a heartbeat's, which is not).
pub(crate) fn ack(a: &Ack) -> Value {
    match a {
        Ack::Stored(o) => json!({ "id": o.id, "seq": o.seq, "duplicate": o.duplicate }),
        Ack::Heartbeat(h) => json!({
            "agent_id": h.agent_id, "status": h.status.as_str(), "next_heartbeat_sec": h.next_heartbeat_sec, "stored": false,
        }),
    }
}

pub(crate) async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    match state.log.get(&id).await? {
        Some(event) => Ok(([(header::CONTENT_TYPE, "application/json")], event.to_wire()).into_response()),
        None => Err(ApiError::new(ErrorCode::MessageNotFound, format!("no message with id `{id}`")).field("id")),
    }
}
