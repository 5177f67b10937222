//! Reading the log: `GET /v1/events` (filtered, paged by `after`) and `GET /v1/runs/{run_id}/events`,
//! the replay of a whole run as NDJSON, streamed page by page so no run is ever held in memory.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use clutch_core::Handle;
use clutch_proto::{ErrorCode, MessageType};
use clutch_store::Filter;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Replay's first page is small so the first event leaves quickly; later pages are large.
const REPLAY_FIRST_PAGE: usize = 64;
const REPLAY_PAGE: usize = 2000;

/// The filters every read route accepts.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilterParams {
    run_id: Option<String>,
    thread_id: Option<String>,
    task_id: Option<String>,
    agent_id: Option<String>,
    /// A recipient: the agent's inbox.
    to: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    pub(crate) after: Option<u64>,
    /// Page size for `/v1/events`; refused on the stream.
    pub(crate) limit: Option<usize>,
    /// The API token, for clients that cannot send headers (browsers' WebSocket); read by the auth layer.
    #[allow(dead_code)]
    access_token: Option<String>,
}

impl FilterParams {
    pub(crate) fn filter(&self) -> Result<Filter, ApiError> {
        let kind = match &self.kind {
            None => None,
            Some(t) => Some(t.parse::<MessageType>().map_err(|e| {
                ApiError::new(ErrorCode::ValidationFailed, e.to_string()).field("type").hint("e.g. type=task.result")
            })?),
        };
        Ok(Filter {
            run_id: self.run_id.clone(),
            thread_id: self.thread_id.clone(),
            task_id: self.task_id.clone(),
            agent_id: self.agent_id.clone(),
            kind,
            to: self.to.clone(),
        })
    }
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<FilterParams>,
) -> Result<Response, ApiError> {
    let filter = params.filter()?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(
            ApiError::new(ErrorCode::ValidationFailed, format!("limit must be 1 to {MAX_LIMIT}")).field("limit")
        );
    }
    let after = params.after.unwrap_or(0);
    let events = state.log.read(&filter, after, limit).await?;
    let next_after = events.last().map_or(after, |e| e.seq);
    // Assemble the JSON by hand: the stored events are already JSON.
    let mut body = String::with_capacity(events.iter().map(|e| e.json.len() + 16).sum::<usize>() + 32);
    body.push_str("{\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&e.to_wire());
    }
    body.push_str("],\"next_after\":");
    body.push_str(&next_after.to_string());
    body.push('}');
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayParams {
    after: Option<u64>,
    #[allow(dead_code)]
    access_token: Option<String>,
}

pub(crate) async fn replay(
    State(state): State<AppState>,
    Path(run_id): Path<String>,
    Query(params): Query<ReplayParams>,
) -> Result<Response, ApiError> {
    let filter = Filter { run_id: Some(run_id.clone()), ..Filter::default() };
    let after = params.after.unwrap_or(0);
    let first = state.log.read(&filter, after, REPLAY_FIRST_PAGE).await?;
    if first.is_empty() && state.log.read(&filter, 0, 1).await?.is_empty() {
        return Err(
            ApiError::new(ErrorCode::RunNotFound, format!("no events belong to run `{run_id}`")).field("run_id")
        );
    }
    let done = first.len() < REPLAY_FIRST_PAGE;
    let pages = Pages { log: state.log.clone(), filter, after, pending: Some(first), done };
    let body = Body::from_stream(futures_util::stream::unfold(pages, Pages::next));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// The pages of a replay, each sent as one chunk of NDJSON lines.
struct Pages {
    log: Handle,
    filter: Filter,
    after: u64,
    pending: Option<Vec<clutch_store::Event>>,
    /// No page after the pending one.
    done: bool,
}

impl Pages {
    async fn next(mut self) -> Option<(Result<Bytes, std::io::Error>, Pages)> {
        let page = match self.pending.take() {
            Some(page) => page,
            None if self.done => return None,
            None => match self.log.read(&self.filter, self.after, REPLAY_PAGE).await {
                Ok(page) => {
                    self.done = page.len() < REPLAY_PAGE;
                    page
                }
                Err(e) => {
                    tracing::error!(error = %e, "replay read failed");
                    self.done = true;
                    return Some((Err(std::io::Error::other("the event store failed during replay")), self));
                }
            },
        };
        let last = page.last()?.seq;
        self.after = last;
        let mut chunk = String::with_capacity(page.iter().map(|e| e.json.len() + 16).sum());
        for e in &page {
            chunk.push_str(&e.to_wire());
            chunk.push('\n');
        }
        Some((Ok(Bytes::from(chunk)), self))
    }
}
