//! The agent registry over HTTP: register, list, show, remove, heartbeat; task state:
//! `GET /v1/tasks/{id}`, `GET /v1/runs/{id}/tasks`.

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
use crate::extract::JsonValue;

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
    let task = state.engine.task(&id).ok_or_else(|| {
        ApiError::new(ErrorCode::TaskNotFound, format!("no task `{id}`: tasks begin with a task.request"))
            .field("task_id")
    })?;
    Ok(axum::Json(task).into_response())
}

pub(crate) async fn run_tasks(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let tree = state
        .engine
        .run_tasks(&id)
        .ok_or_else(|| ApiError::new(ErrorCode::RunNotFound, format!("run `{id}` has no task")).field("run_id"))?;
    Ok(axum::Json(tree).into_response())
}

fn unknown(id: &str) -> ApiError {
    ApiError::new(ErrorCode::AgentNotFound, format!("no agent `{id}` is registered"))
        .field("agent_id")
        .hint("GET /v1/agents lists the registered agents")
}
