//! `/v1/retention`: what the operator's retention policy would remove now (a dry run), and a pass
//! run on demand (`/prune`, admins only) instead of waiting for the next in the background.

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// `GET /v1/retention`: the runs a pass would archive and remove now; nothing changes.
pub(crate) async fn plan(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(axum::Json(clutch_core::retention::pass(&state.engine, true).await?).into_response())
}

/// `POST /v1/retention/prune` (admins): runs a pass now and answers what it did.
pub(crate) async fn prune(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(axum::Json(clutch_core::retention::pass(&state.engine, false).await?).into_response())
}
