//! Errors as every HTTP route answers them: `{"error":{code, message, field?, retryable, hint?}}` with
//! the status the code maps to. Internal details are logged where the error is made, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clutch_proto::ErrorCode;
use clutch_proto::error::ErrorBody;

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

/// The body for a core error; store failures are logged here and answered without their details.
pub(crate) fn error_body(e: &clutch_core::Error) -> ErrorBody {
    use clutch_core::Error as E;
    match e {
        E::Store(clutch_store::Error::IdConflict { id, seq }) => {
            ErrorBody::new(ErrorCode::IdConflict, e.to_string()).field("id").hint(format!(
                "message {id} is stored at seq {seq}; a retry must repeat the original exactly, new content needs a new id"
            ))
        }
        E::ArtifactTooLarge { .. } => ErrorBody::new(ErrorCode::PayloadTooLarge, e.to_string()),
        E::ShuttingDown => ErrorBody::new(ErrorCode::Unavailable, "the daemon is shutting down; retry shortly"),
        E::Refused(r) => r.clone(),
        E::Task(detail) => {
            tracing::error!(error = %detail, "core task failure");
            ErrorBody::new(ErrorCode::Internal, "an internal task failed (details in the daemon log)")
        }
        E::Store(inner) => {
            tracing::error!(error = %inner, "store failure");
            ErrorBody::new(inner.kind(), "the event store failed; the request was not applied (details in the daemon log)")
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(serde_json::json!({ "error": self.0 }))).into_response()
    }
}
