//! The HTTP face of the daemon: the JSON API, the live stream over WebSocket and SSE, artifacts,
//! schemas, health and metrics, and the web UI, on one axum `Router`.

mod artifacts;
mod error;
mod events;
mod extract;
mod messages;
mod stream;
mod ui;

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use clutch_core::Handle;
use clutch_proto::ErrorCode;
use tracing::Instrument;

use crate::error::ApiError;

/// Settings of the HTTP face.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest request body accepted, except artifact uploads (bounded by the artifact limit).
    pub body_limit_bytes: usize,
    /// How often an idle stream gets a keep-alive (SSE comment, WebSocket ping).
    pub stream_keepalive: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { body_limit_bytes: 8 << 20, stream_keepalive: Duration::from_secs(15) }
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) log: Handle,
    pub(crate) options: Options,
}

/// The daemon's HTTP API. Serve it with `axum::serve(listener, router(..))`.
pub fn router(log: Handle, options: Options) -> Router {
    let artifact_limit = usize::try_from(log.artifact_max_bytes()).unwrap_or(usize::MAX).saturating_add(1);
    let body_limit = options.body_limit_bytes;
    let state = AppState { log, options };
    Router::new()
        .route("/v1/messages", post(messages::post))
        .route("/v1/messages/{id}", get(messages::get))
        .route("/v1/events", get(events::list))
        .route("/v1/runs/{run_id}/events", get(events::replay))
        .route("/v1/stream", get(stream::stream))
        .route("/v1/artifacts", put(artifacts::put).layer(DefaultBodyLimit::max(artifact_limit)))
        .route("/v1/artifacts/{reference}", get(artifacts::get))
        .route("/v1/schemas/{name}", get(schema))
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .merge(ui::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// One span and one counted request per HTTP request.
async fn observe(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    state.log.metrics().http_requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let span = tracing::debug_span!("http", method = %request.method(), path = %request.uri().path());
    next.run(request).instrument(span).await
}

async fn schema(Path(name): Path<String>) -> Result<Response, ApiError> {
    let name = name.strip_suffix(".json").unwrap_or(&name);
    let schema = clutch_proto::schema::get(name).ok_or_else(|| {
        ApiError::new(ErrorCode::SchemaNotFound, format!("no schema named `{name}`"))
            .hint(format!("published schemas: {}", clutch_proto::schema::NAMES.join(", ")))
    })?;
    Ok(([(header::CONTENT_TYPE, "application/schema+json")], schema.to_string()).into_response())
}

async fn health(State(state): State<AppState>) -> Result<Response, ApiError> {
    let head = state.log.head().await?;
    let body = serde_json::json!({
        "status": if state.log.is_closing() { "stopping" } else { "ok" },
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": clutch_proto::VERSION,
        "head_seq": head,
    });
    Ok(axum::Json(body).into_response())
}

async fn metrics(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.log.metrics().render()).into_response()
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
        .hint("the API lives under /v1 (messages, events, runs, stream, artifacts, schemas)")
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{method} is not allowed on {}", uri.path()))
}
