//! The tools agents may call over HTTP: `GET /v1/tools` (the servers and their tools), and the
//! calls waiting for a person's approval: `GET /v1/approvals`, `POST /v1/tool-calls/{id}/approve`
//! and `/deny` (an admin's or an approver's token; the decision records who).

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
    if decide.note.as_ref().is_some_and(|n| n.chars().count() > 1000) {
        return Err(ApiError::new(ErrorCode::ValidationFailed, "note: at most 1,000 characters").field("note"));
    }
    let decided = state.engine.decide_approval(&id, decision, &caller.person(), decide.note).await?;
    Ok(axum::Json(decided).into_response())
}
