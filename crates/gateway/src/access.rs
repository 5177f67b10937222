//! Who may call which route, decided before any handler reads the request: [`ACCESS`], the one
//! table of route → access, the layer that enforces it after routing (401 without a known token,
//! 403 for a role without the right, whatever the body), and the bearer-token lookup it shares with
//! the routes of other faces and with the fallbacks.
//!
//! A route the table does not name is refused to everyone (fail closed), and a unit test holds the
//! table against the routes as registered. The routes other faces merge in with
//! [`crate::router_with`] get the bearer-token check; their *open* routes (the A2A face's, which
//! checks its own callers) do not. After the check, `read_ahead` reads a small body on a task of its
//! own, so that hyper's wake of the connection finds it idle and no idle worker is woken per request.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::handler::Handler;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use clutch_core::access::{Access, Caller, Tokens};
use clutch_proto::ErrorCode;

use crate::AppState;
use crate::error::ApiError;

/// Every route of the gateway, by method and path pattern as registered, with the access it needs.
/// A registered route missing here is refused to everyone (fail closed); a unit test holds the
/// table against the routes `router()` registers. `HEAD` is answered as `GET`.
pub const ACCESS: &[(&str, &str, Access)] = &[
    ("POST", "/v1/messages", Access::Write),
    ("GET", "/v1/messages/{id}", Access::Read),
    ("GET", "/v1/events", Access::Read),
    ("GET", "/v1/runs/{run_id}/events", Access::Read),
    ("GET", "/v1/runs", Access::Read),
    ("GET", "/v1/threads", Access::Read),
    ("GET", "/v1/tasks", Access::Read),
    ("GET", "/v1/search", Access::Read),
    ("POST", "/v1/reindex", Access::Admin),
    ("GET", "/v1/stream", Access::Read),
    ("PUT", "/v1/artifacts", Access::Write),
    ("GET", "/v1/artifacts/{reference}", Access::Read),
    ("GET", "/v1/schemas", Access::Read),
    ("POST", "/v1/schemas", Access::Write),
    ("GET", "/v1/schemas/{name}", Access::Read),
    ("GET", "/v1/tools", Access::Read),
    ("GET", "/v1/approvals", Access::Read),
    ("POST", "/v1/tool-calls/{id}/approve", Access::Approve),
    ("POST", "/v1/tool-calls/{id}/deny", Access::Approve),
    // Senders of webhooks hold no token: a hook takes a body only signed with its own secret.
    ("POST", "/v1/hooks/{name}", Access::Open),
    ("GET", "/v1/agents", Access::Read),
    ("POST", "/v1/agents", Access::Write),
    ("GET", "/v1/agents/{id}", Access::Read),
    ("DELETE", "/v1/agents/{id}", Access::Write),
    ("POST", "/v1/agents/{id}/heartbeat", Access::Write),
    ("GET", "/v1/tasks/{id}", Access::Read),
    ("GET", "/v1/runs/{run_id}/tasks", Access::Read),
    ("GET", "/v1/retention", Access::Read),
    ("POST", "/v1/retention/prune", Access::Admin),
    ("GET", "/v1/inbox/{agent_id}", Access::Read),
    ("POST", "/v1/tasks/{id}/reply", Access::Write),
    ("GET", "/v1/positions", Access::Read),
    ("GET", "/v1/positions/{name}", Access::Read),
    ("POST", "/v1/positions/{name}/invoke", Access::Write),
    ("GET", "/v1/sessions", Access::Read),
    ("GET", "/v1/sessions/{id}", Access::Read),
    ("GET", "/v1/sessions/{id}/messages", Access::Read),
    ("POST", "/v1/sessions/{id}/messages", Access::Write),
    ("GET", "/v1/workflows", Access::Read),
    ("POST", "/v1/workflows", Access::Write),
    ("GET", "/v1/workflows/{id}", Access::Read),
    ("PUT", "/v1/workflows/{id}/plan", Access::Write),
    ("GET", "/v1/workflows/{id}/progress", Access::Read),
    ("GET", "/v1/workflows/{id}/next", Access::Read),
    ("POST", "/v1/workflows/{id}/workspaces", Access::Write),
    ("PATCH", "/v1/workspaces/{id}", Access::Write),
    ("POST", "/v1/tasks/{id}/claim", Access::Write),
    ("POST", "/v1/tasks/{id}/release", Access::Write),
    ("POST", "/v1/tasks/{id}/plan", Access::Write),
    ("POST", "/v1/tasks/{id}/status", Access::Write),
    ("GET", "/v1/tasks/{id}/checkpoints", Access::Read),
    ("POST", "/v1/tasks/{id}/checkpoints", Access::Write),
    // A POST that only reads: the context is computed, nothing is written.
    ("POST", "/v1/tasks/{id}/context", Access::Read),
    ("GET", "/healthz", Access::Open),
    ("GET", "/metrics", Access::Read),
    ("GET", "/", Access::Open),
    ("GET", "/ui/{*path}", Access::Open),
];

/// The access `method` on the route `path` (a pattern, as matched) needs; `None` when the table has
/// no rule for it.
pub(crate) fn rule(method: &Method, path: &str) -> Option<Access> {
    let method = if method == Method::HEAD { "GET" } else { method.as_str() };
    ACCESS.iter().find(|(m, p, _)| *m == method && *p == path).map(|(_, _, access)| *access)
}

/// The gateway's routes as they are registered, one method at a time, remembering each
/// `(method, path)` so that the table can be checked against them.
pub(crate) struct Routes {
    router: Router<AppState>,
    registered: Vec<(&'static str, &'static str)>,
}

impl Routes {
    pub(crate) fn new() -> Routes {
        Routes { router: Router::new(), registered: Vec::new() }
    }

    /// `method` (`GET`, `POST`, ...) on `path` runs `handler`.
    pub(crate) fn add<H, T>(self, method: &'static str, path: &'static str, handler: H) -> Routes
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add_limited(method, path, handler, None)
    }

    /// The same with a body limit of its own instead of the router's.
    pub(crate) fn add_limited<H, T>(
        mut self,
        method: &'static str,
        path: &'static str,
        handler: H,
        body_limit: Option<usize>,
    ) -> Routes
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter = Method::from_bytes(method.as_bytes())
            .ok()
            .and_then(|m| MethodFilter::try_from(m).ok())
            .unwrap_or_else(|| panic!("`{method}` is not a method a route can answer"));
        let endpoint = on(filter, handler);
        let endpoint = match body_limit {
            Some(limit) => endpoint.layer(DefaultBodyLimit::max(limit)),
            None => endpoint,
        };
        self.router = self.router.route(path, endpoint);
        self.registered.push((method, path));
        self
    }

    /// The router, each route behind [`authorize`].
    pub(crate) fn into_router(self, state: AppState) -> Router {
        self.router
            .route_layer(axum::middleware::from_fn(crate::read_ahead))
            .route_layer(axum::middleware::from_fn_with_state(state.clone(), authorize))
            .with_state(state)
    }

    #[cfg(test)]
    pub(crate) fn registered(&self) -> &[(&'static str, &'static str)] {
        &self.registered
    }
}

/// Runs after routing, before the handler extracts anything: an open route passes; otherwise the
/// request needs a known token (401) and a role with the route's access (403, whatever the body),
/// and a route the table does not name is refused. Puts the [`Caller`] in the request's extensions.
async fn authorize(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let path = request.extensions().get::<MatchedPath>().cloned();
    let access = path.as_ref().and_then(|p| rule(request.method(), p.as_str()));
    if access == Some(Access::Open) {
        return next.run(request).await;
    }
    let caller = match identify(state.options.tokens.as_deref(), &request) {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let Some(access) = access else {
        let method = request.method().clone();
        let path = path.map_or_else(|| request.uri().path().to_owned(), |p| p.as_str().to_owned());
        tracing::error!(%method, %path, "a route has no access rule, so it is refused: add it to the table");
        return ApiError::new(
            ErrorCode::Forbidden,
            format!("{method} {path} has no access rule, so nobody may call it"),
        )
        .into_response();
    };
    if let Err(refusal) = caller.may(access) {
        tracing::debug!(method = %request.method(), access = access.as_str(), "request refused by role");
        return ApiError::from(refusal).into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// For the routes of other faces (the MCP endpoints): a known token is needed when tokens are
/// configured; what the caller may do there, the face decides. Puts the [`Caller`] in the
/// request's extensions.
pub(crate) async fn authenticate(
    State(tokens): State<Option<Arc<dyn Tokens>>>,
    mut request: Request,
    next: Next,
) -> Response {
    match identify(tokens.as_deref(), &request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// Warnings about unknown tokens the log may still take.
static UNKNOWN_TOKENS: std::sync::LazyLock<clutch_core::throttle::Throttle> =
    std::sync::LazyLock::new(|| clutch_core::throttle::Throttle::new(20, 1.0));

/// The caller a request's token names (`Authorization: Bearer TOKEN`, or `?access_token=` for
/// browsers' WebSockets): anyone when no tokens are configured, else 401 for a missing or unknown one.
pub(crate) fn identify(tokens: Option<&dyn Tokens>, request: &Request) -> Result<Caller, ApiError> {
    let Some(tokens) = tokens else {
        return Ok(Caller(None));
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").map(str::trim).map(str::to_owned));
    let from_query = || {
        let query = request.uri().query()?;
        form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "access_token").map(|(_, v)| v.into_owned())
    };
    let Some(token) = bearer.or_else(from_query) else {
        return Err(ApiError::new(ErrorCode::Unauthorized, "this daemon requires an API token")
            .hint("send `Authorization: Bearer TOKEN` (tokens are configured in org.yaml)"));
    };
    match tokens.authenticate(&token) {
        Some(grant) => {
            tracing::debug!(token = %grant.name, role = grant.role.as_str(), "authenticated");
            Ok(Caller(Some(grant)))
        }
        None => {
            // A flood of bad tokens must not flood the log: a burst, then a few a second, counted.
            match UNKNOWN_TOKENS.take() {
                Some(held) => {
                    tracing::warn!(path = %request.uri().path(), not_logged_before = held, "request with an unknown API token refused")
                }
                None => tracing::debug!(path = %request.uri().path(), "request with an unknown API token refused"),
            }
            Err(ApiError::new(ErrorCode::Unauthorized, "the API token is not known to this daemon")
                .hint("check the token against org.yaml's `tokens`"))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::ACCESS;

    #[test]
    fn the_table_names_exactly_the_registered_routes() {
        let routes = crate::routes(1);
        let registered: BTreeSet<_> = routes.registered().iter().copied().collect();
        assert_eq!(registered.len(), routes.registered().len(), "a route is registered twice");
        let table: BTreeSet<_> = ACCESS.iter().map(|(m, p, _)| (*m, *p)).collect();
        assert_eq!(table.len(), ACCESS.len(), "the table names a route twice");
        let unruled: Vec<_> = registered.difference(&table).collect();
        assert!(unruled.is_empty(), "registered routes without an access rule: {unruled:?}");
        let unrouted: Vec<_> = table.difference(&registered).collect();
        assert!(unrouted.is_empty(), "access rules for routes never registered: {unrouted:?}");
    }
}
