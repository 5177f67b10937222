//! `GET /v1/stream`: the live event stream, over WebSocket (on upgrade) or Server-Sent Events. Both
//! replay from `after` then go live, and end with a final frame giving the cursor to resume from.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use clutch_core::{End, Subscription};
use clutch_proto::ErrorCode;
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;
use crate::events::FilterParams;
use crate::extract::Query;

/// A WebSocket client that does not take a frame for this long is disconnected.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn stream(
    State(state): State<AppState>,
    Query(params): Query<FilterParams>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let filter = params.filter()?;
    if params.limit.is_some() {
        return Err(
            ApiError::new(ErrorCode::ValidationFailed, "a stream has no limit; it runs until closed").field("limit")
        );
    }
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::trim);
    let after = match (params.after, last_event_id) {
        (Some(a), _) => Some(a),
        (None, Some(id)) => Some(id.parse::<u64>().map_err(|_| {
            ApiError::new(ErrorCode::ValidationFailed, "Last-Event-ID must be an event seq").field("Last-Event-ID")
        })?),
        (None, None) => None,
    };
    let subscription = state.log.subscribe(filter, after).await?;
    let keepalive = state.options.stream_keepalive;
    Ok(match upgrade {
        Ok(upgrade) => upgrade.on_upgrade(move |socket| websocket(socket, subscription, keepalive)).into_response(),
        Err(_) => sse(subscription, keepalive).into_response(),
    })
}

/// The final frame: why the stream ends and where to resume.
fn end_frame(end: &End) -> String {
    let value = match end {
        End::Lagged { last_seq } => json!({
            "frame": "lagged", "last_seq": last_seq, "code": ErrorCode::SlowConsumer,
            "message": "this subscriber fell too far behind the live stream and is disconnected",
            "hint": format!("reconnect with after={last_seq}"),
        }),
        End::Shutdown { last_seq } => json!({
            "frame": "shutdown", "last_seq": last_seq, "code": ErrorCode::Unavailable,
            "message": "the daemon is shutting down",
            "hint": format!("reconnect with after={last_seq} once it is back"),
        }),
        End::Failed { last_seq, message } => {
            tracing::error!(error = %message, "stream failed");
            json!({
                "frame": "error", "last_seq": last_seq, "code": ErrorCode::Unavailable,
                "message": "the event store failed while streaming",
                "hint": format!("reconnect with after={last_seq}"),
            })
        }
    };
    value.to_string()
}

fn sse(subscription: Subscription, keepalive: Duration) -> impl IntoResponse {
    // The state is `None` once the final frame is sent.
    let events = futures_util::stream::unfold(Some(subscription), |state| async move {
        let mut sub = state?;
        Some(match sub.next().await {
            Ok(e) => (Ok::<_, Infallible>(SseEvent::default().id(e.seq.to_string()).data(e.to_wire())), Some(sub)),
            Err(end) => (Ok(SseEvent::default().event("end").data(end_frame(&end))), None),
        })
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(keepalive).text("keepalive"))
}

async fn websocket(mut socket: WebSocket, mut sub: Subscription, keepalive: Duration) {
    let mut ping = tokio::time::interval(keepalive);
    ping.tick().await;
    loop {
        tokio::select! {
            next = sub.next() => match next {
                Ok(event) => {
                    let frame = WsMessage::Text(event.to_wire().into());
                    if !matches!(tokio::time::timeout(SEND_TIMEOUT, socket.send(frame)).await, Ok(Ok(()))) {
                        return;
                    }
                }
                Err(end) => {
                    let code = if matches!(end, End::Lagged { .. }) { 1013 } else { 1001 };
                    let _ = tokio::time::timeout(SEND_TIMEOUT, async {
                        socket.send(WsMessage::Text(end_frame(&end).into())).await?;
                        socket.send(WsMessage::Close(Some(CloseFrame { code, reason: "stream ended".into() }))).await
                    })
                    .await;
                    return;
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(WsMessage::Close(_))) => return,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if socket.send(WsMessage::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
        }
    }
}
