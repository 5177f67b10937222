//! The SSE answer of the streaming methods (`SendStreamingMessage`, `SubscribeToTask` and their 0.3
//! names): the task first, then each status and artifact update, until the task ends.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use clutch_core::Subscription;
use clutch_core::tasks::ends_task;
use clutch_store::Filter;
use serde_json::{Value, json};

use crate::hub::Hub;
use crate::task::changes;
use crate::wire::{self, RpcError, State as A2aState, Version};

/// The SSE answer of a streaming method: each event the task, a status update or an artifact update,
/// in a JSON-RPC response of request `id` (the HTTP+JSON binding, with no `id`: bare); closed once
/// the task has ended. An error when the task's events cannot be followed: the binding answers it as
/// it answers errors.
pub(crate) async fn stream(
    hub: Hub,
    task: String,
    after: u64,
    first: bool,
    version: Version,
    id: Option<Value>,
) -> Result<Response, RpcError> {
    let filter = Filter { task_id: Some(task.clone()), ..Filter::default() };
    let sub = hub.log.subscribe(filter, Some(after)).await.map_err(|e| RpcError::internal(e.to_string()))?;
    let streamer = Streamer { hub, task, version, id, sub, first, last: None, pending: VecDeque::new(), done: false };
    let events = futures_util::stream::unfold(streamer, Streamer::next);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

struct Streamer {
    hub: Hub,
    task: String,
    version: Version,
    /// The JSON-RPC request's id; `None` for the HTTP+JSON binding (bare results).
    id: Option<Value>,
    sub: Subscription,
    first: bool,
    /// The state and the number of artifacts already told.
    last: Option<(A2aState, usize)>,
    pending: VecDeque<Value>,
    done: bool,
}

impl Streamer {
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Streamer)> {
        loop {
            if let Some(result) = self.pending.pop_front() {
                let body = match &self.id {
                    Some(id) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    None => result,
                };
                return Some((Ok(SseEvent::default().data(body.to_string())), self));
            }
            if self.done {
                return None;
            }
            let said = if self.first {
                self.first = false;
                None
            } else {
                match self.sub.next().await {
                    Ok(event) => event.message().ok(),
                    Err(_) => {
                        self.done = true;
                        continue;
                    }
                }
            };
            let task = match self.hub.task(&self.task, None).await {
                Ok(t) => t,
                Err(e) => {
                    let body = match &self.id {
                        Some(id) => json!({"jsonrpc": "2.0", "id": id, "error": e.json(self.version)}),
                        None => {
                            json!({"error": {"message": e.message, "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason, "domain": "a2a-protocol.org"}]}})
                        }
                    };
                    self.done = true;
                    return Some((Ok(SseEvent::default().data(body.to_string())), self));
                }
            };
            let ending = said.as_ref().is_some_and(|m| ends_task(m.kind));
            match self.last {
                // A stream begins with the task.
                None => self.pending.push_back(wire::task_event_json(&task, self.version)),
                // An event from before the task ended, read once it had (the stream fell behind):
                // only what it said, so that the end comes last, with the event that brought it.
                Some(last) if task.state.is_terminal() && !ending => {
                    let mut then = task.clone();
                    then.state = last.0;
                    then.artifacts.truncate(last.1);
                    self.pending.extend(changes(&then, said.as_ref(), last, self.version));
                    continue;
                }
                Some(last) => self.pending.extend(changes(&task, said.as_ref(), last, self.version)),
            }
            self.last = Some((task.state, task.artifacts.len()));
            // 1.0 streams until the task ends (it may go on after the client answers a question);
            // 0.3 marks a question `final` too, and closes there.
            self.done = match self.version {
                Version::V10 => task.state.is_terminal(),
                Version::V03 => task.state.ends_stream(),
            };
        }
    }
}
