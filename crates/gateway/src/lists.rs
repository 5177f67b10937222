//! The lists and search over HTTP: `GET /v1/runs`, `/v1/threads`, `/v1/tasks` and `/v1/search`,
//! each a page of a `core::view` type; the query string is `core::lists::ListInput`, whose fields
//! are the filters (`?state=failed&agent=agent:coder&limit=20&cursor=…`; `?q=` for a search).
//! `POST /v1/reindex` (admins) derives them again from the whole log.

use axum::extract::State;
use axum::response::Response;
use clutch_core::lists::ListInput;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;
use crate::workflows::ok;

pub(crate) async fn runs(State(state): State<AppState>, Query(q): Query<ListInput>) -> Result<Response, ApiError> {
    Ok(ok(state.engine.list_runs(&q).await?))
}

pub(crate) async fn threads(State(state): State<AppState>, Query(q): Query<ListInput>) -> Result<Response, ApiError> {
    Ok(ok(state.engine.list_threads(&q).await?))
}

pub(crate) async fn tasks(State(state): State<AppState>, Query(q): Query<ListInput>) -> Result<Response, ApiError> {
    Ok(ok(state.engine.list_tasks(&q).await?))
}

pub(crate) async fn search(State(state): State<AppState>, Query(q): Query<ListInput>) -> Result<Response, ApiError> {
    Ok(ok(state.engine.search(&q).await?))
}

/// `POST /v1/reindex`: `{events, seconds}` once the lists and the search index are derived again.
pub(crate) async fn reindex(State(state): State<AppState>) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let events = state.engine.rebuild_lists().await?;
    tracing::info!(events, seconds = started.elapsed().as_secs_f64(), "lists and search index rebuilt");
    Ok(ok(serde_json::json!({ "events": events, "seconds": started.elapsed().as_secs_f64() })))
}
