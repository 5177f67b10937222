//! Errors as every HTTP route answers them: `{"error":{code, message, field?, retryable, hint?}}` with
//! the status the code maps to. Internal details are logged where the error is made, never sent. A
//! next step the core names by intent ([`Next`]) is worded here as this face's routes.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clutch_proto::ErrorCode;
use clutch_proto::error::{ErrorBody, Next};

#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) ErrorBody);

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError(ErrorBody::new(code, message))
    }

    pub(crate) fn field(self, field: impl Into<String>) -> Self {
        ApiError(self.0.field(field))
    }

    pub(crate) fn hint(self, hint: impl Into<String>) -> Self {
        ApiError(self.0.hint(hint))
    }
}

impl From<clutch_core::Error> for ApiError {
    fn from(e: clutch_core::Error) -> Self {
        error_body(&e).into()
    }
}

impl From<ErrorBody> for ApiError {
    fn from(body: ErrorBody) -> Self {
        ApiError(body)
    }
}

/// The body for a core error (see [`clutch_core::Error::body`]), its next step worded.
pub(crate) fn error_body(e: &clutch_core::Error) -> ErrorBody {
    worded(e.body())
}

/// `body` with a hint saying its next step as this face's route, unless it has a hint already.
pub(crate) fn worded(mut body: ErrorBody) -> ErrorBody {
    if body.hint.is_none()
        && let Some(next) = &body.next
    {
        body.hint = Some(match &**next {
            Next::RegisterAgent => "register it first: POST /v1/agents with its AgentCard".into(),
            Next::Heartbeat => "send a heartbeat first: POST /v1/agents/{id}/heartbeat".into(),
            Next::ClaimTask { task_id } => {
                format!("claim the task (POST /v1/tasks/{task_id}/claim) before writing to it")
            }
            Next::ShowTask { task_id } => format!("GET /v1/tasks/{task_id} shows its state and history"),
            Next::NextTasks { workflow_id } => {
                format!("GET /v1/workflows/{workflow_id}/next lists the tasks that can be claimed now")
            }
            Next::ShowWorkflows { workflow_id: Some(id) } => {
                format!("GET /v1/workflows/{id} shows its tasks and workspaces")
            }
            Next::ShowWorkflows { workflow_id: None } => {
                "GET /v1/workflows lists the workflows; GET /v1/workflows/{id} shows one".into()
            }
        });
    }
    body
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(serde_json::json!({ "error": worded(self.0) }))).into_response()
    }
}
