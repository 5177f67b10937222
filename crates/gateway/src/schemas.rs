//! Schemas: the protocol's own (`envelope`, `agent-card`), the daemon's views and payloads
//! (`clutch_core::published`), and the payload schema registry
//! (`GET /v1/schemas`, `POST /v1/schemas`, `GET /v1/schemas/{payload_type or schema_ref}`).

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use clutch_proto::ErrorCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::JsonValue;

pub(crate) async fn list(State(state): State<AppState>) -> Response {
    let protocol: Vec<Value> = clutch_proto::schema::NAMES
        .iter()
        .copied()
        .chain(clutch_core::published::names())
        .map(|n| json!({"name": n}))
        .collect();
    axum::Json(json!({"protocol": protocol, "payloads": state.engine.schemas()})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Registration {
    payload_type: String,
    schema_ref: Option<String>,
    schema: Value,
}

/// `POST /v1/schemas` `{payload_type, schema_ref?, schema}`.
pub(crate) async fn register(State(state): State<AppState>, JsonValue(body): JsonValue) -> Result<Response, ApiError> {
    let r: Registration = serde_json::from_value(body).map_err(|e| {
        ApiError::new(ErrorCode::ValidationFailed, format!("not a schema registration: {e}"))
            .hint("send {\"payload_type\": \"my.thing.v1\", \"schema\": {...}} (schema_ref optional)")
    })?;
    let stored = state.engine.register_schema(&r.payload_type, r.schema_ref.as_deref(), r.schema).await?;
    Ok((StatusCode::CREATED, axum::Json(stored)).into_response())
}

/// `GET /v1/schemas/{name}`: `envelope`, `agent-card`, or a payload type or schema ref.
pub(crate) async fn show(State(state): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    let bare = name.strip_suffix(".json").unwrap_or(&name);
    if let Some(schema) = clutch_proto::schema::get(bare).or_else(|| clutch_core::published::get(bare)) {
        return Ok(([(header::CONTENT_TYPE, "application/schema+json")], schema.to_string()).into_response());
    }
    let document = state.engine.schema(&name).ok_or_else(|| {
        ApiError::new(ErrorCode::SchemaNotFound, format!("no schema named `{name}`"))
            .hint("GET /v1/schemas lists the protocol's schemas and every payload type")
    })?;
    Ok(([(header::CONTENT_TYPE, "application/schema+json")], document.to_string()).into_response())
}
