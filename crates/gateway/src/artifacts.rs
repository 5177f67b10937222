//! `PUT /v1/artifacts` and `GET /v1/artifacts/{ref}`: content-addressed blobs (SHA-256).

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use clutch_proto::ErrorCode;
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::RawBody;

pub(crate) async fn put(State(state): State<AppState>, body: Result<RawBody, ApiError>) -> Result<Response, ApiError> {
    let limit = state.log.artifact_max_bytes();
    let RawBody(bytes) = body.map_err(|e| {
        if e.0.code == ErrorCode::PayloadTooLarge {
            ApiError::new(ErrorCode::PayloadTooLarge, format!("the artifact is larger than the limit of {limit} bytes"))
                .hint("raise [limits] artifact_bytes in clutch.toml")
        } else {
            e
        }
    })?;
    let artifact = state.log.put_artifact(bytes).await?;
    let status = if artifact.existed { StatusCode::OK } else { StatusCode::CREATED };
    let body = json!({ "ref": artifact.reference, "size": artifact.size, "existed": artifact.existed });
    Ok((status, axum::Json(body)).into_response())
}

pub(crate) async fn get(State(state): State<AppState>, Path(reference): Path<String>) -> Result<Response, ApiError> {
    let sha = reference.strip_prefix(clutch_proto::id::ARTIFACT_PREFIX).unwrap_or(&reference);
    if let Err(why) = clutch_proto::id::check_artifact_ref(&format!("{}{sha}", clutch_proto::id::ARTIFACT_PREFIX)) {
        return Err(ApiError::new(ErrorCode::ValidationFailed, format!("bad artifact reference: {why}")).field("ref"));
    }
    match state.log.get_artifact(sha).await? {
        Some(bytes) => Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()),
        None => Err(ApiError::new(ErrorCode::ArtifactNotFound, format!("no artifact {reference}")).field("ref")),
    }
}
