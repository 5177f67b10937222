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

/// The body for a core error (see [`clutch_core::Error::body`]).
pub(crate) fn error_body(e: &clutch_core::Error) -> ErrorBody {
    e.body()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(serde_json::json!({ "error": self.0 }))).into_response()
    }
}
