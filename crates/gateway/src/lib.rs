//! The HTTP face of the daemon: the JSON API (messages, agents, tasks, workflows), the live stream
//! over WebSocket and SSE, artifacts, schemas, health and metrics, and the web UI, on one axum
//! `Router`.

pub mod access;
mod agents;
mod artifacts;
pub mod browser;
pub mod conn;
mod error;
mod events;
mod extract;
mod lists;
mod messages;
pub mod push;
mod retention;
mod schemas;
pub mod sessions;
mod stream;
mod tools;
mod ui;
mod workflows;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use clutch_core::access::Tokens;
use clutch_core::{Engine, Handle};
use clutch_proto::ErrorCode;
use tracing::Instrument;

use crate::access::Routes;
use crate::error::ApiError;

/// Settings of the HTTP face.
#[derive(Clone)]
pub struct Options {
    /// Largest request body accepted, except artifact uploads (bounded by the artifact limit).
    pub body_limit_bytes: usize,
    /// How often an idle stream gets a keep-alive (SSE comment, WebSocket ping).
    pub stream_keepalive: Duration,
    /// API tokens. With them, every route but the open ones (`/healthz`, the web UI) needs
    /// `Authorization: Bearer TOKEN` (or `?access_token=`, for browsers' WebSockets) and a role
    /// with the route's access (`access::ACCESS`); without, the API is open (loopback only).
    pub tokens: Option<Arc<dyn Tokens>>,
    /// Which `Host`s and browser `Origin`s every route (the other faces' too) serves, checked before
    /// anything else: see [`browser`]. The default: loopback names, and the request's own origin.
    pub browser: browser::Policy,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            body_limit_bytes: 8 << 20,
            stream_keepalive: Duration::from_secs(15),
            tokens: None,
            browser: browser::Policy::default(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("body_limit_bytes", &self.body_limit_bytes)
            .field("stream_keepalive", &self.stream_keepalive)
            .field("tokens", &self.tokens.as_ref().map(|_| "configured"))
            .field("browser", &self.browser)
            .finish()
    }
}

/// What every route's handler and middleware is given: shared, so that handing it to each of a
/// request's layers costs one reference count, not one per handle it holds.
#[derive(Clone)]
pub(crate) struct AppState(Arc<Shared>);

pub(crate) struct Shared {
    pub(crate) log: Handle,
    pub(crate) engine: Engine,
    pub(crate) options: Options,
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The daemon's HTTP API. Serve it with `axum::serve(listener, router(..))`.
pub fn router(log: Handle, engine: Engine, options: Options) -> Router {
    router_with(log, engine, options, Router::new(), Router::new())
}

/// The same with the routes of other faces (the MCP endpoints) merged in, under the same browser
/// policy, body limit and request metrics. Their routes (`faces`) need a known token when tokens are
/// configured; what a caller may do there, each face decides. The routes in `open` (the A2A card and
/// endpoint, which check their own credentials) are served without the token check, but behind the
/// browser policy like every other route. Their paths must not clash with the API's.
pub fn router_with(log: Handle, engine: Engine, options: Options, faces: Router, open: Router) -> Router {
    let artifact_limit = usize::try_from(log.artifact_max_bytes()).unwrap_or(usize::MAX).saturating_add(1);
    let body_limit = options.body_limit_bytes;
    let tokens = options.tokens.clone();
    let browser = options.browser.clone();
    let state = AppState(Arc::new(Shared { log, engine, options }));
    let faces = if faces.has_routes() {
        faces
            .route_layer(axum::middleware::from_fn(read_ahead))
            .route_layer(axum::middleware::from_fn_with_state(tokens.clone(), access::authenticate))
    } else {
        faces
    };
    let (missing, not_allowed) = (tokens.clone(), tokens);
    let router = routes(artifact_limit)
        .into_router(state.clone())
        .merge(faces)
        .merge(open)
        .fallback(move |request: Request| not_found(missing.clone(), request))
        .method_not_allowed_fallback(move |request: Request| method_not_allowed(not_allowed.clone(), request))
        .layer(DefaultBodyLimit::max(body_limit));
    // Outside every route's own layers and the fallbacks: checked before routing goes further, before
    // any token or body is looked at.
    browser::guard(router, browser).layer(axum::middleware::from_fn_with_state(state, observe))
}

/// Request bodies at most this long, and with their length given, are read before the route runs
/// (see [`read_ahead`]).
const READ_AHEAD_MAX: u64 = 64 * 1024;

/// Reads a small request body on a task of its own before the route runs. Taking a body from hyper
/// wakes the connection's task, so that it may pass on more; taken by the route on that very task,
/// while it runs, the wake makes tokio treat the task as one that yields, and a yielding task wakes
/// an idle worker to share the work: a futex wake, a worker's wake-up and a spurious poll of the
/// connection for every request (about a seventh of a small MCP call's CPU). From a task of its
/// own, the wake finds the connection's task idle and only queues it, on the same worker. A body
/// with no length, a longer one, or one behind `Expect: 100-continue` is left to the route. Runs
/// after the access check, so that no body is read for a caller who may not call the route.
pub(crate) async fn read_ahead(request: Request, next: axum::middleware::Next) -> Response {
    let length = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if !length.is_some_and(|n| (1..=READ_AHEAD_MAX).contains(&n)) || request.headers().contains_key(header::EXPECT) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    match tokio::spawn(axum::body::to_bytes(body, READ_AHEAD_MAX as usize)).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        // The connection broke before the body's end: what a route answers when it cannot read it.
        _ => (axum::http::StatusCode::BAD_REQUEST, "Failed to read request body").into_response(),
    }
}

/// Every route of the API, each with the access [`access::ACCESS`] gives it.
fn routes(artifact_limit: usize) -> Routes {
    let routes = Routes::new()
        .add("POST", "/v1/messages", messages::post)
        .add("GET", "/v1/messages/{id}", messages::get)
        .add("GET", "/v1/events", events::list)
        .add("GET", "/v1/runs/{run_id}/events", events::replay)
        .add("GET", "/v1/runs", lists::runs)
        .add("GET", "/v1/threads", lists::threads)
        .add("GET", "/v1/tasks", lists::tasks)
        .add("GET", "/v1/search", lists::search)
        .add("POST", "/v1/reindex", lists::reindex)
        .add("GET", "/v1/stream", stream::stream)
        .add_limited("PUT", "/v1/artifacts", artifacts::put, Some(artifact_limit))
        .add("GET", "/v1/artifacts/{reference}", artifacts::get)
        .add("GET", "/v1/schemas", schemas::list)
        .add("POST", "/v1/schemas", schemas::register)
        .add("GET", "/v1/schemas/{name}", schemas::show)
        .add("GET", "/v1/tools", tools::list)
        .add("GET", "/v1/approvals", tools::approvals)
        .add("POST", "/v1/tool-calls/{id}/approve", tools::approve)
        .add("POST", "/v1/tool-calls/{id}/deny", tools::deny)
        .add("POST", "/v1/hooks/{name}", tools::hook)
        .add("GET", "/v1/agents", agents::list)
        .add("POST", "/v1/agents", agents::register)
        .add("GET", "/v1/agents/{id}", agents::show)
        .add("DELETE", "/v1/agents/{id}", agents::remove)
        .add("POST", "/v1/agents/{id}/heartbeat", agents::heartbeat)
        .add("GET", "/v1/tasks/{id}", agents::task)
        .add("GET", "/v1/runs/{run_id}/tasks", agents::run_tasks)
        .add("GET", "/v1/retention", retention::plan)
        .add("POST", "/v1/retention/prune", retention::prune)
        .add("GET", "/v1/inbox/{agent_id}", agents::inbox)
        .add("POST", "/v1/tasks/{id}/reply", agents::reply)
        .add("GET", "/v1/workflows", workflows::list)
        .add("POST", "/v1/workflows", workflows::create)
        .add("GET", "/v1/workflows/{id}", workflows::show)
        .add("PUT", "/v1/workflows/{id}/plan", workflows::set_plan)
        .add("GET", "/v1/workflows/{id}/progress", workflows::progress)
        .add("GET", "/v1/workflows/{id}/next", workflows::next)
        .add("POST", "/v1/workflows/{id}/workspaces", workflows::create_workspace)
        .add("PATCH", "/v1/workspaces/{id}", workflows::update_workspace)
        .add("POST", "/v1/tasks/{id}/claim", workflows::claim)
        .add("POST", "/v1/tasks/{id}/release", workflows::release)
        .add("POST", "/v1/tasks/{id}/plan", workflows::set_task_plan)
        .add("POST", "/v1/tasks/{id}/status", workflows::update_status)
        .add("GET", "/v1/tasks/{id}/checkpoints", workflows::checkpoints)
        .add("POST", "/v1/tasks/{id}/checkpoints", workflows::add_checkpoint)
        .add("POST", "/v1/tasks/{id}/context", workflows::context)
        .add("GET", "/v1/positions", sessions::list)
        .add("GET", "/v1/positions/{name}", sessions::show)
        .add("POST", "/v1/positions/{name}/invoke", sessions::invoke)
        .add("GET", "/v1/sessions", sessions::sessions)
        .add("GET", "/v1/sessions/{id}", sessions::session)
        .add("GET", "/v1/sessions/{id}/messages", sessions::history)
        .add("POST", "/v1/sessions/{id}/messages", sessions::send)
        .add("GET", "/healthz", health)
        .add("GET", "/metrics", metrics);
    ui::routes(routes)
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
    let mut text = state.log.metrics().render();
    text.push_str(&state.engine.footprint().render());
    if let Some(lag) = state.log.index_lag() {
        use std::fmt::Write;
        let name = "clutch_store_index_lag_events";
        let help = "Durable events not yet in the indexes by run, thread, task, sender and type (reads scan them).";
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {lag}");
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// No route: a caller without a known token learns not even that (401), any other gets 404.
async fn not_found(tokens: Option<Arc<dyn Tokens>>, request: Request) -> ApiError {
    if let Err(e) = access::identify(tokens.as_deref(), &request) {
        return e;
    }
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", request.uri().path()))
        .hint("the API lives under /v1 (messages, events, runs, stream, agents, tasks, workflows, workspaces, artifacts, schemas)")
}

/// A route, not this method: 401 without a known token, as for every route; 405 otherwise.
async fn method_not_allowed(tokens: Option<Arc<dyn Tokens>>, request: Request) -> ApiError {
    if let Err(e) = access::identify(tokens.as_deref(), &request) {
        return e;
    }
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{} is not allowed on {}", request.method(), request.uri().path()),
    )
}
