//! Positions and their sessions over HTTP: `/v1/positions…` (the catalog the positions runner
//! announces on its card, and invocations: a `task.request` to it) and `/v1/sessions…` (the
//! sessions, their messages, and sending one as a member). The caller's token decides which agent a
//! write may act as, before the body is looked at.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clutch_core::access::Caller;
use clutch_proto::ErrorCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonValue, Query};

/// `GET /v1/positions`.
pub(crate) async fn list(State(state): State<AppState>) -> Response {
    axum::Json(json!({ "positions": state.engine.positions() })).into_response()
}

/// `GET /v1/positions/{name}`.
pub(crate) async fn show(State(state): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(axum::Json(state.engine.position(&name)?).into_response())
}

/// An invocation as HTTP takes it: core's, with who invokes.
#[derive(Deserialize)]
struct Invoke {
    /// Who invokes (default: the token's agent, else `user:api`).
    agent_id: Option<String>,
    #[serde(flatten)]
    invocation: clutch_core::session::Invocation,
}

/// `POST /v1/positions/{name}/invoke` `{input, agents?: {role: agent}, rounds?, workers?, agent_id?}`:
/// 201 `{session_id, task_id, thread_id, position}` at once; the session's outcome is its task's.
pub(crate) async fn invoke(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: Invoke = crate::extract::acting_body(&caller, body)?;
    let from = caller
        .acting_agent(req.agent_id.as_deref())
        .map_err(clutch_core::Error::from)?
        .unwrap_or_else(|| "user:api".to_owned());
    let invoked = state.engine.position_invoke(&from, &name, req.invocation).await?;
    Ok((StatusCode::CREATED, axum::Json(invoked)).into_response())
}

/// `GET /v1/sessions`.
pub(crate) async fn sessions(State(state): State<AppState>) -> Response {
    axum::Json(state.engine.sessions_list(None)).into_response()
}

/// `GET /v1/sessions/{id}`.
pub(crate) async fn session(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let found = state.engine.find_session(&id).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::SessionNotFound, format!("no session `{}`", clutch_proto::error::quote(&id)))
            .field("session_id")
    })?;
    Ok(axum::Json(found).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HistoryQuery {
    limit: Option<usize>,
    agent_id: Option<String>,
}

/// `GET /v1/sessions/{id}/messages?limit=N&agent_id=A`.
pub(crate) async fn history(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(state.engine.session_history(&id, q.limit, q.agent_id.as_deref()).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Send {
    agent_id: Option<String>,
    /// An agent id, `all`, or a list of agent ids.
    to: Value,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    content: Value,
}

/// The recipients `to` names: one id or `all`, or a list of them.
fn recipients(to: &Value) -> Result<Vec<String>, ApiError> {
    let bad =
        || ApiError::new(ErrorCode::ValidationFailed, "`to` is an agent id, `all`, or a list of agent ids").field("to");
    match to {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(list) => list.iter().map(|v| v.as_str().map(str::to_owned).ok_or_else(bad)).collect(),
        _ => Err(bad()),
    }
}

/// `POST /v1/sessions/{id}/messages` `{agent_id?, to, type, content}`: 201 `{id, seq, to}`.
pub(crate) async fn send(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: Send = crate::extract::acting_body(&caller, body)?;
    let Some(from) = caller.acting_agent(req.agent_id.as_deref()).map_err(clutch_core::Error::from)? else {
        return Err(ApiError::new(ErrorCode::ValidationFailed, "name the sender: `agent_id`").field("agent_id"));
    };
    let to = recipients(&req.to)?;
    let sent = state.engine.session_send(&from, &id, &to, &req.kind, req.content).await?;
    Ok((StatusCode::CREATED, axum::Json(sent)).into_response())
}
