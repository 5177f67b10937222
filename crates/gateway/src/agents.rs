//! The agent registry over HTTP: register, list, show, remove, heartbeat; task state:
//! `GET /v1/tasks/{id}`, `GET /v1/runs/{id}/tasks`; the routed tasks an agent or a person works by
//! hand: `GET /v1/inbox/{agent_id}`, `POST /v1/tasks/{id}/reply`.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clutch_core::access::Caller;
use clutch_core::registry::Status;
use clutch_core::view;
use clutch_proto::ErrorCode;
use clutch_proto::error::ErrorBody;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonValue, Query};

pub(crate) async fn list(State(state): State<AppState>) -> Response {
    axum::Json(view::Agents { agents: state.engine.agents() }).into_response()
}

/// `POST /v1/agents` with an AgentCard: registers the agent (or replaces its card).
pub(crate) async fn register(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    caller.may_act_as_in(&body, "agent_id").map_err(clutch_core::Error::from)?;
    let card = clutch_proto::validate::agent_card(&body).map_err(ErrorBody::from_problems)?;
    caller.may_act_as(&card.agent_id, "agent_id").map_err(clutch_core::Error::from)?;
    let outcome = state.engine.register(&card).await?;
    let body = view::Registered {
        agent: state.engine.agent(&card.agent_id),
        agent_id: card.agent_id,
        seq: outcome.seq,
        heartbeat_interval_sec: state.engine.options().heartbeat_interval.as_secs().max(1),
    };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

pub(crate) async fn show(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let agent = state.engine.agent(&id).ok_or_else(|| unknown(&id))?;
    Ok(axum::Json(agent).into_response())
}

pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.may_act_as(&id, "agent_id").map_err(clutch_core::Error::from)?;
    let outcome = state.engine.unregister(&id).await?;
    Ok(axum::Json(view::Removed { agent_id: id, status: Status::Removed, seq: outcome.seq }).into_response())
}

pub(crate) async fn heartbeat(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.may_act_as(&id, "agent_id").map_err(clutch_core::Error::from)?;
    Ok(axum::Json(state.engine.heartbeat(&id).await?).into_response())
}

pub(crate) async fn task(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let task = state.engine.find_task(&id).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::TaskNotFound, format!("no task `{id}`: tasks begin with a task.request"))
            .field("task_id")
    })?;
    Ok(axum::Json(task).into_response())
}

pub(crate) async fn run_tasks(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let tree = state
        .engine
        .find_run_tasks(&id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::RunNotFound, format!("run `{id}` has no task")).field("run_id"))?;
    Ok(axum::Json(tree).into_response())
}

fn unknown(id: &str) -> ApiError {
    ApiError::new(ErrorCode::AgentNotFound, format!("no agent `{id}` is registered"))
        .field("agent_id")
        .hint("GET /v1/agents lists the registered agents")
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InboxQuery {
    /// Wait up to this long for a task when there is none (at most 60).
    wait_seconds: Option<u64>,
}

/// `GET /v1/inbox/{agent_id}?wait_seconds=N`: the routed tasks given to an agent or a person that
/// have not ended, oldest first; with `wait_seconds`, an empty inbox answers when one arrives.
pub(crate) async fn inbox(
    State(state): State<AppState>,
    Path(agent): Path<String>,
    Query(q): Query<InboxQuery>,
) -> Result<Response, ApiError> {
    let wait = std::time::Duration::from_secs(q.wait_seconds.unwrap_or(0));
    Ok(axum::Json(state.engine.inbox(&agent, wait).await?).into_response())
}

/// A reply as HTTP takes it: core's, with who replies.
#[derive(serde::Deserialize)]
struct Reply {
    /// Who replies (default: the token's agent).
    agent_id: Option<String>,
    #[serde(flatten)]
    reply: clutch_core::inbox::Reply,
}

/// `POST /v1/tasks/{id}/reply` `{agent_id?, status, text?, result?, error?, retryable?}`: the holder
/// of a routed task accepts, completes or fails it; answers the task's view.
pub(crate) async fn reply(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: Reply = crate::extract::acting_body(&caller, body)?;
    let Some(from) = caller.acting_agent(req.agent_id.as_deref()).map_err(clutch_core::Error::from)? else {
        return Err(ApiError::new(ErrorCode::ValidationFailed, "name who replies: `agent_id`").field("agent_id"));
    };
    Ok(axum::Json(state.engine.task_reply(&from, &id, req.reply).await?).into_response())
}
