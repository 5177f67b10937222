//! The tools agents may call over HTTP: `GET /v1/tools` (the servers and their tools), and the
//! calls waiting for a person's approval: `GET /v1/approvals`, `POST /v1/tool-calls/{id}/approve`
//! and `/deny` (an admin's or an approver's token; the decision records who). And inbound webhooks:
//! `POST /v1/hooks/{name}`, open to callers without a token, whose bodies the `hook` adapter takes
//! only signed with the hook's secret.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use clutch_core::access::Caller;
use clutch_core::payload::Decision;
use clutch_proto::ErrorCode;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;

/// `GET /v1/tools`: the servers of tools the daemon's adapters serve, their state and tools.
pub(crate) async fn list(State(state): State<AppState>) -> Response {
    axum::Json(state.engine.adapters().tools()).into_response()
}

/// `GET /v1/approvals`: the tool calls waiting for a decision, oldest first.
pub(crate) async fn approvals(State(state): State<AppState>) -> Response {
    axum::Json(state.engine.approvals()).into_response()
}

/// The optional body of a decision.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Decide {
    /// Why, for the record (at most 1,000 characters).
    note: Option<String>,
}

pub(crate) async fn approve(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    decide(state, caller, id, body, Decision::Approved).await
}

pub(crate) async fn deny(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    decide(state, caller, id, body, Decision::Denied).await
}

async fn decide(
    state: AppState,
    caller: Caller,
    id: String,
    body: Bytes,
    decision: Decision,
) -> Result<Response, ApiError> {
    let decide: Decide = if body.iter().all(u8::is_ascii_whitespace) {
        Decide::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(ErrorCode::InvalidJson, format!("not a decision: {e}"))
                .hint("send {\"note\": \"why\"} or nothing")
        })?
    };
    let decided = state.engine.decide_approval(&id, decision, &caller.person(), decide.note).await?;
    Ok(axum::Json(decided).into_response())
}

/// `POST /v1/hooks/{name}`: the body becomes a message by the hook's mapping (the `hook` adapter
/// checks its signature first) and is appended as a client's would be; answered `202` with the
/// message's `{id, seq, duplicate}`.
pub(crate) async fn hook(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(adapter) = state.engine.adapters().named("hook") else {
        return Err(ApiError::new(ErrorCode::NotFound, "no hook is configured")
            .field("name")
            .hint("declare [[hooks]] in clutch.toml"));
    };
    let headers = headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let inbound = clutch_core::adapter::Inbound { name, headers, body };
    let messages = adapter.inbound(&inbound).await?;
    let mut results = Vec::new();
    for answer in state.engine.submit(messages).await? {
        results.push(crate::messages::ack(&answer?));
    }
    let body = match <[serde_json::Value; 1]>::try_from(results) {
        Ok([one]) => one,
        Err(many) => serde_json::json!({ "results": many }),
    };
    Ok((axum::http::StatusCode::ACCEPTED, axum::Json(body)).into_response())
}
