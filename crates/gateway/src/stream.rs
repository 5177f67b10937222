//! `GET /v1/stream`: the live event stream, over WebSocket (on upgrade) or Server-Sent Events. Both
//! replay from `after` then go live, and end with a final frame giving the cursor to resume from.
//! A live event's wire form is made once and shared by every subscriber's frame
//! ([`clutch_core::Live::wire`]). The daemon's fan-out thread writes each live event to the
//! subscriber's socket itself ([`clutch_core::direct`]): a WebSocket's once hyper hands the upgraded
//! connection over; an SSE response's, as chunks of its body, once hyper has written the head and
//! lends the socket ([`crate::conn::Lender`]). Served otherwise (HTTP/2, or a router served on
//! another listener), or asked for with HEAD, the SSE subscriber's task frames each event as a body
//! frame for hyper.
//!
//! The WebSocket handshake (RFC 6455) is answered here, by hand, so that the upgraded TCP socket is
//! the stream's own; the subscriber's task reads the client's frames with tungstenite's frame codec,
//! refusing one that is unmasked or longer than [`CLIENT_MESSAGE_MAX`].

use std::convert::Infallible;
use std::io::{self, IoSlice};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use clutch_core::{End, Feed, Out, Socket, Subscription, Wire};
use clutch_proto::ErrorCode;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};

use crate::AppState;
use crate::conn::{Conn, Lender, Tcp};
use crate::error::ApiError;
use crate::events::FilterParams;
use crate::extract::Query;

/// A WebSocket client that does not take a frame for this long is disconnected.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// What a WebSocket subscriber's task reads from its client at a time.
const CLIENT_READ_BUFFER: usize = 1024;

/// The largest message a stream subscriber may send (it needs none: the stream ignores them).
const CLIENT_MESSAGE_MAX: usize = 64 * 1024;

pub(crate) async fn stream(
    State(state): State<AppState>,
    Query(params): Query<FilterParams>,
    headers: HeaderMap,
    mut request: Request,
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
    let accept = websocket_accept(&request);
    if let (Some(accept), Some(on_upgrade)) = (accept, request.extensions_mut().remove::<OnUpgrade>()) {
        return Ok(upgrade(on_upgrade, accept, subscription, keepalive));
    }
    let lender = request.extensions().get::<ConnectInfo<Lender>>();
    Ok(match lender {
        // Not for HEAD (axum routes it here too): hyper writes, and polls, no body for it.
        Some(ConnectInfo(lender)) if request.version() == Version::HTTP_11 && request.method() == Method::GET => {
            sse_lent(lender.clone(), subscription, keepalive)
        }
        _ => sse(subscription, keepalive),
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
        End::Closed { last_seq } => json!({
            "frame": "closed", "last_seq": last_seq, "code": ErrorCode::Unavailable,
            "message": "the connection failed", "hint": format!("reconnect with after={last_seq}"),
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
                Err(end) => (sse_end(&end), false),
            },
            _ = ping.tick() => (Bytes::from_static(SSE_KEEPALIVE), true),
        };
        Some((Ok::<_, Infallible>(frame), open.then_some((sub, ping))))
    });
    event_stream(Body::from_stream(frames))
}

/// The response that carries an SSE `body`.
fn event_stream(body: Body) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The comment an idle SSE stream sends every keep-alive period.
const SSE_KEEPALIVE: &[u8] = b": keepalive\n\n";

/// The SSE stream's last event: why it ends and where to resume.
fn sse_end(end: &End) -> Bytes {
    sse_frame(Some("end"), "", end_frame(end).as_bytes())
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

/// SSE on the connection's own socket: hyper writes the head, then lends the socket, and the fan-out
/// writes each live event to it as a chunk of the (chunked) body; the body's task writes the rest
/// ([`sse_feed`]). The body yields nothing: it ends when the stream does, so that hyper writes the last
/// chunk, or fails, so that hyper closes the connection, when the socket broke.
fn sse_lent(lender: Lender, subscription: Subscription, keepalive: Duration) -> Response {
    let feed = futures_util::stream::once(async move {
        match lender.borrow().await {
            Some(tcp) => sse_feed(tcp, subscription, keepalive).await,
            None => Ok(()),
        }
    });
    let body = futures_util::StreamExt::filter_map(feed, |fed| std::future::ready(fed.err().map(Err::<Bytes, _>)));
    let mut response = event_stream(Body::from_stream(body));
    // The chunks written on the borrowed socket need the body chunked, whatever hyper would choose.
    response.headers_mut().insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
    response
}

/// An SSE subscriber on its borrowed socket: the fan-out writes its live events; this writes the
/// catch-up, what the fan-out left, the keep-alives and the `end` event. `Err` when the connection
/// failed or a chunk may be left cut short.
async fn sse_feed(tcp: Tcp, sub: Subscription, keepalive: Duration) -> io::Result<()> {
    let mut feed = sub.direct(Arc::new(SseChunks(tcp.clone())));
    let mut ping = tokio::time::interval(keepalive);
    ping.tick().await;
    loop {
        tokio::select! {
            biased;
            out = feed.next() => {
                let bytes = match out {
                    Ok(Out::Event(wire)) => sse_chunk(&wire),
                    Ok(Out::Raw(bytes)) => bytes,
                    Err(End::Closed { .. }) => return Err(io::ErrorKind::BrokenPipe.into()),
                    Err(end) => {
                        let last = chunk(&sse_end(&end));
                        return if write(&tcp, &last).await { Ok(()) } else { Err(io::ErrorKind::BrokenPipe.into()) };
                    }
                };
                if !write(&tcp, &bytes).await {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
            }
            _ = ping.tick() => feed.queue(chunk(SSE_KEEPALIVE)),
        }
    }
}

/// An SSE subscriber's socket, as the fan-out writes its live events to it: each event one chunk of
/// the response body.
struct SseChunks(Tcp);

impl Socket for SseChunks {
    fn try_send(&self, wire: &Wire) -> io::Result<Option<Bytes>> {
        let mut head = [0u8; SSE_HEAD_MAX];
        let head = sse_chunk_head(wire, &mut head);
        let parts = [IoSlice::new(head), IoSlice::new(&wire.bytes), IoSlice::new(SSE_CHUNK_TAIL)];
        send_now(&self.0, &parts, || sse_chunk(wire))
    }
}

/// What ends an event's chunk: the blank line that ends the event, then the chunk's CRLF.
const SSE_CHUNK_TAIL: &[u8] = b"\n\n\r\n";

/// The longest head of an event's chunk: the chunk's size in hex and CRLF, `id: SEQ` and `data: `.
const SSE_HEAD_MAX: usize = 16 + 2 + 4 + 20 + 1 + 6;

/// The head of `wire`'s chunk, written into `buf`: the chunk's size, then the event up to its data.
fn sse_chunk_head<'a>(wire: &Wire, buf: &'a mut [u8; SSE_HEAD_MAX]) -> &'a [u8] {
    use std::io::Write;
    let digits = wire.seq.checked_ilog10().map_or(1, |n| n as usize + 1);
    let size = "id: ".len() + digits + "\ndata: ".len() + wire.bytes.len() + "\n\n".len();
    let mut cursor = io::Cursor::new(&mut buf[..]);
    write!(cursor, "{size:x}\r\nid: {}\ndata: ", wire.seq).expect("a chunk's head fits in SSE_HEAD_MAX bytes");
    let end = cursor.position() as usize;
    &buf[..end]
}

/// `wire`'s whole chunk, for the subscriber's task to write.
fn sse_chunk(wire: &Wire) -> Bytes {
    chunk(&sse_frame(None, &wire.seq.to_string(), &wire.bytes))
}

/// `data` as one chunk of a chunked body.
fn chunk(data: &[u8]) -> Bytes {
    let mut bytes = BytesMut::with_capacity(data.len() + 20);
    bytes.put_slice(format!("{:x}\r\n", data.len()).as_bytes());
    bytes.put_slice(data);
    bytes.put_slice(b"\r\n");
    bytes.freeze()
}

/// Writes `parts` (one frame) to `tcp` without waiting: `None` when all went, else the rest of the
/// frame, cut from `whole`.
fn send_now(tcp: &TcpStream, parts: &[IoSlice<'_>], whole: impl FnOnce() -> Bytes) -> io::Result<Option<Bytes>> {
    let total: usize = parts.iter().map(|part| part.len()).sum();
    let sent = match tcp.try_write_vectored(parts) {
        Ok(sent) => sent,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(e) => return Err(e),
    };
    if sent == total {
        return Ok(None);
    }
    Ok(Some(whole().slice(sent..)))
}

/// Whether `request` asks for a WebSocket (RFC 6455 §4.2.1), and the `Sec-WebSocket-Accept` that
/// answers it. Anything else gets the SSE stream.
fn websocket_accept(request: &Request) -> Option<HeaderValue> {
    if request.method() != Method::GET || request.version() != Version::HTTP_11 {
        return None;
    }
    let headers = request.headers();
    let lists = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    if !lists(header::CONNECTION, "upgrade") || !lists(header::UPGRADE, "websocket") {
        return None;
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).is_none_or(|v| v != "13") {
        return None;
    }
    let key = headers.get(header::SEC_WEBSOCKET_KEY)?;
    HeaderValue::from_str(&derive_accept_key(key.as_bytes())).ok()
}

/// Switches the connection to a WebSocket and serves `subscription` on it once hyper hands it over.
fn upgrade(on_upgrade: OnUpgrade, accept: HeaderValue, subscription: Subscription, keepalive: Duration) -> Response {
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => return tracing::debug!(error = %e, "a stream subscriber left during the upgrade"),
        };
        // The daemon serves HTTP/1.1 on its own connections (`crate::conn`); a router served on a
        // plain TCP listener has TCP sockets.
        use hyper_util::server::conn::auto::upgrade::downcast;
        let (tcp, read) = match downcast::<TokioIo<Conn>>(upgraded) {
            Ok(parts) => (parts.io.into_inner().into_tcp(), parts.read_buf),
            Err(upgraded) => match downcast::<TokioIo<TcpStream>>(upgraded) {
                Ok(parts) => (Tcp::new(parts.io.into_inner()), parts.read_buf),
                Err(_) => return tracing::error!("a live stream upgraded on a connection that is not TCP; closed"),
            },
        };
        websocket(tcp, read, subscription, keepalive).await
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    response
}

/// A WebSocket subscriber's socket, as the fan-out writes its live events to it: each event one text
/// frame.
struct WsFrames(Tcp);

impl Socket for WsFrames {
    fn try_send(&self, wire: &Wire) -> io::Result<Option<Bytes>> {
        let mut head = [0u8; MAX_HEAD];
        let head = text_head(wire.bytes.len(), &mut head);
        send_now(&self.0, &[IoSlice::new(head), IoSlice::new(&wire.bytes)], || text_frame(&wire.bytes))
    }
}

/// The longest head of a frame the server sends (unmasked, 64-bit length).
const MAX_HEAD: usize = 10;

/// The head of a final text frame of `len` bytes, written into `buf`.
fn text_head(len: usize, buf: &mut [u8; MAX_HEAD]) -> &[u8] {
    let header = FrameHeader { opcode: OpCode::Data(Data::Text), ..FrameHeader::default() };
    let mut cursor = io::Cursor::new(&mut buf[..]);
    header.format(len as u64, &mut cursor).expect("a frame head fits in MAX_HEAD bytes");
    let end = cursor.position() as usize;
    &buf[..end]
}

/// A whole frame, for the subscriber's task to write.
fn frame(frame: Frame) -> Bytes {
    let mut bytes = Vec::with_capacity(frame.len());
    frame.format(&mut bytes).expect("formatting into memory cannot fail");
    Bytes::from(bytes)
}

fn text_frame(text: &[u8]) -> Bytes {
    let mut head = [0u8; MAX_HEAD];
    let head = text_head(text.len(), &mut head);
    let mut bytes = BytesMut::with_capacity(head.len() + text.len());
    bytes.put_slice(head);
    bytes.put_slice(text);
    bytes.freeze()
}

fn close_frame(code: u16, reason: &'static str) -> Bytes {
    frame(Frame::close(Some(CloseFrame { code: CloseCode::from(code), reason: reason.into() })))
}

/// A WebSocket subscriber: the fan-out writes its live events; its task writes the catch-up, what the
/// fan-out left, its pings and pongs, and the final frames. It reads the client's frames, which are
/// only control frames (a subscriber has nothing to say), within [`CLIENT_MESSAGE_MAX`].
async fn websocket(socket: Tcp, read: Bytes, sub: Subscription, keepalive: Duration) {
    let mut feed = sub.direct(Arc::new(WsFrames(socket.clone())));
    let mut incoming = BytesMut::from(read);
    let mut ping = tokio::time::interval(keepalive);
    ping.tick().await;
    loop {
        // The client's frames read so far, the first ones with the upgrade.
        loop {
            match client_frame(&mut incoming) {
                Ok(None) => break,
                Ok(Some((OpCode::Control(Control::Ping), payload))) => feed.queue(frame(Frame::pong(payload))),
                Ok(Some((OpCode::Control(Control::Close), payload))) => {
                    // Echo the client's code, as RFC 6455 §5.5.1 asks.
                    let reply = if payload.len() >= 2 { payload.slice(..2) } else { Bytes::new() };
                    let reply = frame(Frame::from_payload(FrameHeader::default(), reply));
                    return finish(&mut feed, &socket, Some(reply)).await;
                }
                Ok(Some(_)) => {}
                Err(code) => return finish(&mut feed, &socket, Some(close_frame(code, "bad frame"))).await,
            }
        }
        // What is queued is written before more is read: a client sending pings faster than it reads
        // their pongs meets its own full socket, not a growing queue here.
        tokio::select! {
            biased;
            out = feed.next() => match out {
                Ok(Out::Event(wire)) => {
                    if !write(&socket, &text_frame(&wire.bytes)).await {
                        return;
                    }
                }
                Ok(Out::Raw(bytes)) => {
                    if !write(&socket, &bytes).await {
                        return;
                    }
                }
                Err(End::Closed { .. }) => return,
                Err(end) => {
                    let code = if matches!(end, End::Lagged { .. }) { 1013 } else { 1001 };
                    let _ = write(&socket, &text_frame(end_frame(&end).as_bytes())).await
                        && write(&socket, &close_frame(code, "stream ended")).await;
                    return;
                }
            },
            ready = socket.readable() => {
                if ready.is_err() {
                    return;
                }
                incoming.reserve(CLIENT_READ_BUFFER);
                match socket.try_read_buf(&mut incoming) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
            _ = ping.tick() => feed.queue(frame(Frame::ping(Bytes::new()))),
        }
    }
}

/// Ends the stream from the task's side: the fan-out stops, what completes its frames is written, then
/// `last` (a close frame).
async fn finish(feed: &mut Feed, stream: &TcpStream, last: Option<Bytes>) {
    feed.stop();
    while let Ok(out) = feed.next().await {
        let bytes = match out {
            Out::Raw(bytes) => bytes,
            Out::Event(wire) => text_frame(&wire.bytes),
        };
        if !write(stream, &bytes).await {
            return;
        }
    }
    if let Some(last) = last {
        let _ = write(stream, &last).await;
    }
}

/// The next whole frame from the client, unmasked: its opcode and payload. `Err` with a close code
/// for a frame the stream refuses: unmasked (1002) or longer than [`CLIENT_MESSAGE_MAX`] (1009).
fn client_frame(buf: &mut BytesMut) -> Result<Option<(OpCode, Bytes)>, u16> {
    let mut cursor = io::Cursor::new(&buf[..]);
    let (header, len) = match FrameHeader::parse(&mut cursor) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Ok(None),
        Err(_) => return Err(1002),
    };
    if len > CLIENT_MESSAGE_MAX as u64 {
        return Err(1009);
    }
    let start = cursor.position() as usize;
    let end = start + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    let Some(mask) = header.mask else { return Err(1002) };
    let mut payload = buf.split_to(end).split_off(start);
    for (i, byte) in payload.iter_mut().enumerate() {
        *byte ^= mask[i % 4];
    }
    Ok(Some((header.opcode, payload.freeze())))
}

/// Writes all of `bytes`, within [`SEND_TIMEOUT`] when the socket cannot take them at once: a timer
/// only for the rare write that waits.
async fn write(stream: &TcpStream, mut bytes: &[u8]) -> bool {
    loop {
        match stream.try_write(bytes) {
            Ok(n) if n == bytes.len() => return true,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return false,
        }
    }
    let rest = async {
        loop {
            stream.writable().await?;
            match stream.try_write(bytes) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    };
    matches!(tokio::time::timeout(SEND_TIMEOUT, rest).await, Ok(Ok(())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_chunk_written_in_parts_is_the_chunk_the_task_writes() {
        // The fan-out's head, wire bytes and tail must make exactly the task's chunk: across the
        // seqs where the id gains a digit, the sizes where the hex size does, and the largest seq.
        for seq in [0, 1, 9, 10, 99, 100, 999_999, u64::MAX] {
            for len in [0, 1, 5, 230, 4_096, 70_000] {
                let wire = Wire { seq, bytes: Bytes::from(vec![b'x'; len]) };
                let mut head = [0u8; SSE_HEAD_MAX];
                let parts = [sse_chunk_head(&wire, &mut head), &wire.bytes, SSE_CHUNK_TAIL].concat();
                assert_eq!(parts, sse_chunk(&wire), "seq {seq}, {len} bytes");
            }
        }
    }

    #[test]
    fn a_websocket_frame_written_in_parts_is_tungstenites_text_frame() {
        // Across the lengths where the head grows (7-bit, 16-bit, 64-bit).
        for len in [0, 125, 126, 65_535, 65_536] {
            let text = vec![b'x'; len];
            let mut head = [0u8; MAX_HEAD];
            let parts = [text_head(len, &mut head), &text].concat();
            let expected = frame(Frame::message(text.clone(), OpCode::Data(Data::Text), true));
            assert_eq!(parts, expected, "{len} bytes");
        }
    }
}
