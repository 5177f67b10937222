//! `GET /v1/stream`: the live event stream, over WebSocket (on upgrade) or Server-Sent Events. Both
//! replay from `after` then go live, and end with a final frame giving the cursor to resume from.
//! A live event's wire form is made once and shared by every subscriber's frame
//! ([`clutch_core::Live::wire`]); a subscriber's task only frames and writes it.

use std::convert::Infallible;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message as WsMessage, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use clutch_core::{End, Subscription};
use clutch_proto::ErrorCode;
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;
use crate::events::FilterParams;
use crate::extract::Query;

/// A WebSocket client that does not take a frame for this long is disconnected.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The WebSocket read buffer of a stream subscriber.
const CLIENT_READ_BUFFER: usize = 1024;

/// The largest message a stream subscriber may send (it needs none: the stream ignores them).
const CLIENT_MESSAGE_MAX: usize = 64 * 1024;

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
        Ok(upgrade) => upgrade
            // A subscriber sends only control frames (pongs, a close), and every poll for them
            // zeroes the unread part of this buffer first (128 KiB by default: most of a delivery's
            // CPU): a small one, and a bound on what a client may send.
            .read_buffer_size(CLIENT_READ_BUFFER)
            .max_message_size(CLIENT_MESSAGE_MAX)
            .max_frame_size(CLIENT_MESSAGE_MAX)
            .on_upgrade(move |socket| websocket(socket, subscription, keepalive))
            .into_response(),
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

/// Server-Sent Events: `id: SEQ` and `data: EVENT` per event, a comment when idle for `keepalive`,
/// and an `end` event last. Written as body frames of its own (the event's shared bytes copied once
/// into its frame) rather than through a generic SSE encoder that would scan and copy each line.
fn sse(subscription: Subscription, keepalive: Duration) -> Response {
    // A keep-alive every `keepalive` whether or not events flow: one timer for the stream's life
    // rather than one set and cancelled per event. The state is `None` once the final frame is sent.
    let mut ping = tokio::time::interval(keepalive);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.reset();
    let frames = futures_util::stream::unfold(Some((subscription, ping)), |state| async move {
        let (mut sub, mut ping) = state?;
        let (frame, open) = tokio::select! {
            next = sub.next_wire() => match next {
                Ok(wire) => (sse_frame(None, &wire.seq.to_string(), &wire.bytes), true),
                Err(end) => (sse_frame(Some("end"), "", end_frame(&end).as_bytes()), false),
            },
            _ = ping.tick() => (Bytes::from_static(b": keepalive\n\n"), true),
        };
        Some((Ok::<_, Infallible>(frame), open.then_some((sub, ping))))
    });
    let mut response = Body::from_stream(frames).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// One SSE event. `data` is JSON on one line (the log's canonical form has no raw newline).
fn sse_frame(event: Option<&str>, id: &str, data: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(data.len() + 32);
    if let Some(event) = event {
        frame.put_slice(b"event: ");
        frame.put_slice(event.as_bytes());
        frame.put_u8(b'\n');
    }
    if !id.is_empty() {
        frame.put_slice(b"id: ");
        frame.put_slice(id.as_bytes());
        frame.put_u8(b'\n');
    }
    frame.put_slice(b"data: ");
    frame.put_slice(data);
    frame.put_slice(b"\n\n");
    frame.freeze()
}

async fn websocket(mut socket: WebSocket, mut sub: Subscription, keepalive: Duration) {
    let mut ping = tokio::time::interval(keepalive);
    ping.tick().await;
    loop {
        tokio::select! {
            next = sub.next_wire() => match next {
                Ok(wire) => {
                    let Ok(text) = Utf8Bytes::try_from(wire.bytes) else { return };
                    if !send(&mut socket, WsMessage::Text(text)).await {
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

/// Sends a frame, within [`SEND_TIMEOUT`] when the socket cannot take it at once: a timer only for
/// the rare send that waits, not for each frame.
async fn send(socket: &mut WebSocket, frame: WsMessage) -> bool {
    let mut sending = std::pin::pin!(socket.send(frame));
    match std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await {
        Poll::Ready(sent) => sent.is_ok(),
        Poll::Pending => matches!(tokio::time::timeout(SEND_TIMEOUT, sending).await, Ok(Ok(()))),
    }
}
