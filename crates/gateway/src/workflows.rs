//! Workflows over HTTP: `/v1/workflows…`, `/v1/tasks/{id}/…` (claim, release, plan, status,
//! checkpoints, context) and `/v1/workspaces/{id}`. A thin layer: path ids go into the body, the
//! caller's token decides which agent a write may act as (an agent token naming another agent is
//! refused before the body is parsed), and `core::workflow::api` types are what goes in and out.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clutch_core::access::Caller;
use clutch_core::workflow::api;
use clutch_proto::ErrorCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonValue, Query, RawBody};

/// The body as `T`, with `id` put at `key` (from the path; a different one in the body is refused)
/// and, for writes, `agent_id` resolved against the caller's token: an agent token naming another
/// agent is refused before anything else in the body is looked at.
fn input<T: DeserializeOwned>(mut body: Value, key: &str, id: &str, caller: Option<&Caller>) -> Result<T, ApiError> {
    if let Some(caller) = caller {
        caller.may_act_as_in(&body, "agent_id").map_err(clutch_core::Error::from)?;
    }
    if body.is_null() {
        body = json!({});
    }
    let Value::Object(map) = &mut body else {
        return Err(ApiError::new(ErrorCode::InvalidJson, "the body must be a JSON object"));
    };
    match map.get(key) {
        Some(Value::String(given)) if given != id => {
            return Err(ApiError::new(
                ErrorCode::ValidationFailed,
                format!("`{key}` in the body is not the path's `{id}`"),
            )
            .field(key));
        }
        _ => {
            map.insert(key.to_owned(), json!(id));
        }
    }
    if let Some(caller) = caller {
        let named = map.get("agent_id").and_then(Value::as_str);
        if let Some(agent) = caller.acting_agent(named).map_err(clutch_core::Error::from)? {
            map.insert("agent_id".into(), json!(agent));
        }
    }
    parse(body)
}

/// A body that may be empty (then `null`).
fn optional_json(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::new(ErrorCode::InvalidJson, format!("the body is not valid JSON: {e}")))
}

fn parse<T: DeserializeOwned>(body: Value) -> Result<T, ApiError> {
    serde_json::from_value(body)
        .map_err(|e| ApiError::new(ErrorCode::ValidationFailed, format!("the body does not fit this route: {e}")))
}

pub(crate) fn ok<T: serde::Serialize>(value: T) -> Response {
    axum::Json(value).into_response()
}

fn created<T: serde::Serialize>(value: T) -> Response {
    (StatusCode::CREATED, axum::Json(value)).into_response()
}

/// `POST /v1/workflows` `{name, source?, description?, agent_id?}`.
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    caller.may_act_as_in(&body, "agent_id").map_err(clutch_core::Error::from)?;
    let mut body = body;
    let Value::Object(map) = &mut body else {
        return Err(ApiError::new(ErrorCode::InvalidJson, "the body must be a JSON object"));
    };
    if let Some(agent) =
        caller.acting_agent(map.get("agent_id").and_then(Value::as_str)).map_err(clutch_core::Error::from)?
    {
        map.insert("agent_id".into(), json!(agent));
    }
    let req: api::CreateWorkflow = parse(body)?;
    Ok(created(state.engine.workflow_create(req).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Comma-separated statuses.
    status: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/workflows?status=in_progress,planning&limit=N`.
pub(crate) async fn list(State(state): State<AppState>, Query(q): Query<ListQuery>) -> Result<Response, ApiError> {
    let mut status = Vec::new();
    for s in q.status.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        status.push(serde_json::from_value(json!(s)).map_err(|_| {
            ApiError::new(ErrorCode::ValidationFailed, format!("unknown workflow status `{s}`"))
                .field("status")
                .hint("planning, in_progress, blocked, completed, failed")
        })?);
    }
    let workflows = state.engine.workflow_list(&api::ListWorkflows { status, limit: q.limit });
    Ok(ok(json!({ "workflows": workflows })))
}

pub(crate) async fn show(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(ok(state.engine.find_workflow(&id).await?))
}

/// `PUT /v1/workflows/{id}/plan` `{summary?, tasks: [{name, description?, depends_on?, parallel_group?}]}`.
pub(crate) async fn set_plan(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::SetPlan = input(body, "workflow_id", &id, Some(&caller))?;
    Ok(ok(state.engine.workflow_set_plan(req).await?))
}

pub(crate) async fn progress(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(ok(state.engine.find_workflow_progress(&id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NextQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// `GET /v1/workflows/{id}/next?limit=N&cursor=C` (a page: 50 by default; `next_cursor` when more follow).
pub(crate) async fn next(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<NextQuery>,
) -> Result<Response, ApiError> {
    Ok(ok(state.engine.find_next_tasks(&api::NextTasks { workflow_id: id, limit: q.limit, cursor: q.cursor }).await?))
}

/// `POST /v1/workflows/{id}/workspaces` `{branch, repo_path, base_branch?, create_worktree?, path?, task_ids?}`.
pub(crate) async fn create_workspace(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::CreateWorkspace = input(body, "workflow_id", &id, Some(&caller))?;
    Ok(created(state.engine.workspace_create(req).await?))
}

/// `PATCH /v1/workspaces/{id}` `{status?, merge_commit?, cleanup_worktree?}`.
pub(crate) async fn update_workspace(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::UpdateWorkspace = input(body, "id", &id, Some(&caller))?;
    Ok(ok(state.engine.workspace_update(req).await?))
}

/// `POST /v1/tasks/{id}/claim` `{agent_id}`: `{success: true, lease}` or `{success: false, already_claimed_by}`.
pub(crate) async fn claim(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::Claim = input(body, "task_id", &id, Some(&caller))?;
    let mut answer = state.engine.task_claim(req).await?;
    if let Some(lease) = &mut answer.lease {
        lease.renew = format!("POST /v1/agents/{}/heartbeat", lease.agent_id);
    }
    Ok(ok(answer))
}

pub(crate) async fn release(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body = optional_json(&body)?;
    let req: api::Release = input(body, "task_id", &id, Some(&caller))?;
    Ok(ok(state.engine.task_release(req).await?))
}

/// `POST /v1/tasks/{id}/plan` `{plan}`.
pub(crate) async fn set_task_plan(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::SetTaskPlan = input(body, "task_id", &id, Some(&caller))?;
    Ok(ok(state.engine.task_set_plan(req).await?))
}

/// `POST /v1/tasks/{id}/status` `{status, outcome?, outcome_detail?, error?, reason?}`.
pub(crate) async fn update_status(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::UpdateStatus = input(body, "id", &id, Some(&caller))?;
    Ok(ok(state.engine.task_update_status(req).await?))
}

/// `POST /v1/tasks/{id}/checkpoints` `{type, summary, detail?, files_changed?}`.
pub(crate) async fn add_checkpoint(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonValue(body): JsonValue,
) -> Result<Response, ApiError> {
    let req: api::AddCheckpoint = input(body, "task_id", &id, Some(&caller))?;
    Ok(created(state.engine.checkpoint_add(req).await?))
}

pub(crate) async fn checkpoints(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(ok(json!({ "task_id": id, "checkpoints": state.engine.find_checkpoints(&id).await? })))
}

/// `POST /v1/tasks/{id}/context` `{include?, max_tokens?}`: reads only.
pub(crate) async fn context(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body = optional_json(&body)?;
    let req: api::LoadContext = input(body, "task_id", &id, None)?;
    Ok(ok(state.engine.task_load_context(req).await?))
}
