//! The HTTP face of the daemon: the JSON API (messages, agents, tasks, workflows), the live stream
//! over WebSocket and SSE, artifacts, schemas, health and metrics, and the web UI, on one axum
//! `Router`.

mod agents;
mod artifacts;
mod error;
mod events;
mod extract;
mod messages;
pub mod push;
mod schemas;
mod stream;
mod ui;
mod workflows;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use clutch_core::access::{Caller, Tokens};
use clutch_core::{Engine, Handle};
use clutch_proto::ErrorCode;
use tracing::Instrument;

use crate::error::ApiError;

/// Settings of the HTTP face.
#[derive(Clone)]
pub struct Options {
    /// Largest request body accepted, except artifact uploads (bounded by the artifact limit).
    pub body_limit_bytes: usize,
    /// How often an idle stream gets a keep-alive (SSE comment, WebSocket ping).
    pub stream_keepalive: Duration,
    /// API tokens. With them, every `/v1` route and `/metrics` needs `Authorization: Bearer TOKEN`
    /// (or `?access_token=`, for browsers' WebSockets); without, the API is open (loopback only).
    pub tokens: Option<Arc<dyn Tokens>>,
}

impl Default for Options {
    fn default() -> Self {
        Options { body_limit_bytes: 8 << 20, stream_keepalive: Duration::from_secs(15), tokens: None }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("body_limit_bytes", &self.body_limit_bytes)
            .field("stream_keepalive", &self.stream_keepalive)
            .field("tokens", &self.tokens.as_ref().map(|_| "configured"))
            .finish()
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) log: Handle,
    pub(crate) engine: Engine,
    pub(crate) options: Options,
}

/// The daemon's HTTP API. Serve it with `axum::serve(listener, router(..))`.
pub fn router(log: Handle, engine: Engine, options: Options) -> Router {
    router_with(log, engine, options, Router::new())
}

/// The same with the routes of other faces (the MCP endpoints) merged in, under the same bearer-token
/// layer, body limit and request metrics. Their paths must not clash with the API's.
pub fn router_with(log: Handle, engine: Engine, options: Options, faces: Router) -> Router {
    let artifact_limit = usize::try_from(log.artifact_max_bytes()).unwrap_or(usize::MAX).saturating_add(1);
    let body_limit = options.body_limit_bytes;
    let state = AppState { log, engine, options };
    let api: Router = Router::new()
        .route("/v1/messages", post(messages::post))
        .route("/v1/messages/{id}", get(messages::get))
        .route("/v1/events", get(events::list))
        .route("/v1/runs/{run_id}/events", get(events::replay))
        .route("/v1/stream", get(stream::stream))
        .route("/v1/artifacts", put(artifacts::put).layer(DefaultBodyLimit::max(artifact_limit)))
        .route("/v1/artifacts/{reference}", get(artifacts::get))
        .route("/v1/schemas", get(schemas::list).post(schemas::register))
        .route("/v1/schemas/{name}", get(schemas::show))
        .route("/v1/agents", get(agents::list).post(agents::register))
        .route("/v1/agents/{id}", get(agents::show).delete(agents::remove))
        .route("/v1/agents/{id}/heartbeat", post(agents::heartbeat))
        .route("/v1/tasks/{id}", get(agents::task))
        .route("/v1/runs/{run_id}/tasks", get(agents::run_tasks))
        .route("/v1/workflows", get(workflows::list).post(workflows::create))
        .route("/v1/workflows/{id}", get(workflows::show))
        .route("/v1/workflows/{id}/plan", put(workflows::set_plan))
        .route("/v1/workflows/{id}/progress", get(workflows::progress))
        .route("/v1/workflows/{id}/next", get(workflows::next))
        .route("/v1/workflows/{id}/workspaces", post(workflows::create_workspace))
        .route("/v1/workspaces/{id}", patch(workflows::update_workspace))
        .route("/v1/tasks/{id}/claim", post(workflows::claim))
        .route("/v1/tasks/{id}/release", post(workflows::release))
        .route("/v1/tasks/{id}/plan", post(workflows::set_task_plan))
        .route("/v1/tasks/{id}/status", post(workflows::update_status))
        .route("/v1/tasks/{id}/checkpoints", get(workflows::checkpoints).post(workflows::add_checkpoint))
        .route("/v1/tasks/{id}/context", post(workflows::context))
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .merge(ui::routes())
        .with_state(state.clone());
    api.merge(faces)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(axum::middleware::from_fn_with_state(state, observe))
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

/// Puts the request's [`Caller`] in its extensions, or answers 401 when tokens are configured and the
/// request carries none that is known. Guards `/v1`, `/metrics` and the MCP endpoints (`/mcp...`);
/// `/healthz` stays open for probes.
async fn authenticate(
    State(state): State<AppState>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(tokens) = &state.options.tokens else {
        request.extensions_mut().insert(Caller(None));
        return next.run(request).await;
    };
    let path = request.uri().path();
    let protected = path.starts_with("/v1/") || path == "/metrics" || path == "/mcp" || path.starts_with("/mcp/");
    if !protected {
        request.extensions_mut().insert(Caller(None));
        return next.run(request).await;
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").map(str::trim).map(str::to_owned));
    let from_query = || {
        let query = request.uri().query()?;
        form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "access_token").map(|(_, v)| v.into_owned())
    };
    let token = bearer.or_else(from_query);
    let Some(token) = token else {
        return ApiError::new(ErrorCode::Unauthorized, "this daemon requires an API token")
            .hint("send `Authorization: Bearer TOKEN` (tokens are configured in org.yaml)")
            .into_response();
    };
    match tokens.authenticate(&token) {
        Some(grant) => {
            tracing::debug!(token = %grant.name, role = grant.role.as_str(), "authenticated");
            request.extensions_mut().insert(Caller(Some(grant)));
            next.run(request).await
        }
        None => {
            tracing::warn!(path = %request.uri().path(), "request with an unknown API token refused");
            ApiError::new(ErrorCode::Unauthorized, "the API token is not known to this daemon")
                .hint("check the token against org.yaml's `tokens`")
                .into_response()
        }
    }
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
        .hint("the API lives under /v1 (messages, events, runs, stream, agents, tasks, workflows, workspaces, artifacts, schemas)")
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{method} is not allowed on {}", uri.path()))
}
