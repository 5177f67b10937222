//! Request extractors whose rejections are our JSON errors rather than axum's plain text: JSON
//! bodies (with line and column of a syntax error), raw bodies with size limits, and query strings.

use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use bytes::Bytes;
use clutch_proto::ErrorCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A request body of any JSON value, under the body limit.
pub(crate) struct JsonValue(pub(crate) serde_json::Value);

impl<S: Send + Sync> FromRequest<S> for JsonValue {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or("");
            if !(ct.starts_with("application/json") || ct.contains("+json")) {
                return Err(ApiError::new(
                    ErrorCode::UnsupportedMediaType,
                    format!("expected Content-Type: application/json, got `{}`", clutch_proto::error::quote(ct)),
                ));
            }
        }
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        serde_json::from_slice(&bytes).map(JsonValue).map_err(|e| {
            ApiError::new(ErrorCode::InvalidJson, format!("the body is not valid JSON: {e}"))
                .hint("send one message object or an array of them")
        })
    }
}

/// A raw request body under the route's size limit.
pub(crate) struct RawBody(pub(crate) Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(req, state).await.map(RawBody).map_err(|e: BytesRejection| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, "the request body is larger than the configured limit")
                    .hint("raise [limits] in clutch.toml, or split the batch")
            } else {
                ApiError::new(ErrorCode::InvalidJson, format!("cannot read the request body: {e}"))
            }
        })
    }
}

/// A query string deserialized into `T` (which should deny unknown fields).
pub(crate) struct Query<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state).await.map(|q| Query(q.0)).map_err(
            |e: QueryRejection| {
                ApiError::new(ErrorCode::ValidationFailed, format!("bad query string: {}", e.body_text()))
            },
        )
    }
}

/// A write's body as `T`, once `caller` may act as the agent it names at `agent_id` (decided
/// before the body is read as `T`, so a caller without the right learns nothing from its
/// validation). A missing body is `{}`.
pub(crate) fn acting_body<T: DeserializeOwned>(
    caller: &clutch_core::access::Caller,
    body: serde_json::Value,
) -> Result<T, ApiError> {
    caller.may_act_as_in(&body, "agent_id").map_err(clutch_core::Error::from)?;
    let body = if body.is_null() { serde_json::json!({}) } else { body };
    serde_json::from_value(body)
        .map_err(|e| ApiError::new(ErrorCode::ValidationFailed, format!("the body does not fit this route: {e}")))
}
