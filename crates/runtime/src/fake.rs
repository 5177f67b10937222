//! A fake LLM provider for tests (feature `fake`): one HTTP server speaking both wire formats,
//! Anthropic's `POST /v1/messages` and OpenAI's `POST /v1/chat/completions`, whole or streamed as
//! the request asks, with each answer chosen by the test's script from the request. It counts
//! requests, keeps their bodies, can refuse a wrong key, and can hold itself to a rate (answering
//! 429 past it, and counting how often that happened). Its output is checked against the official
//! `anthropic` and `openai` Python SDKs by the runtime's tests.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// What the fake answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Text, then `end_turn` / `stop`.
    Text(String),
    /// Optional text, then one call of `name` with `input` (`tool_use` / `tool_calls`).
    Tool { text: String, name: String, input: Value },
    /// An error answer: `status` with the format's error body, and `retry-after` when given.
    Status { status: u16, retry_after: Option<u32> },
    /// HTTP 200, the stream begun, then an error event (Anthropic: `overloaded_error`; OpenAI: an
    /// `error` chunk). Whole answers get a 529 instead.
    ErrorMidStream,
    /// The stream begun, then nothing more (the connection held open).
    Stall,
    /// The stream begun, then an event whose data is not JSON.
    Malformed,
    /// `Reply` after a delay before the first byte.
    Slow(Duration, Box<Reply>),
    /// `Reply` streamed with a pause between two events (a slow generation).
    Drip(Duration, Box<Reply>),
}

/// What a test scripts: the answer to each request, from its body and the requests' count so far
/// (1 for the first).
pub type Script = Arc<dyn Fn(&Value, usize) -> Reply + Send + Sync>;

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
    /// When its answer was ready to send (its whole body, streamed or not, is in memory then).
    pub answered: Option<Instant>,
}

struct Inner {
    script: Script,
    key: Option<String>,
    per_second: Option<usize>,
    received: Mutex<Vec<Received>>,
    window: Mutex<VecDeque<Instant>>,
    over_limit: Mutex<usize>,
}

/// A running fake provider.
#[derive(Clone)]
pub struct Fake {
    inner: Arc<Inner>,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

/// How to start one.
pub struct Options {
    pub script: Script,
    /// The key requests must carry (`x-api-key` or `Authorization: Bearer`), if any.
    pub key: Option<String>,
    /// At most this many requests in any second; more get 429 with `retry-after: 1`.
    pub per_second: Option<usize>,
}

impl Options {
    pub fn script(script: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static) -> Options {
        Options { script: Arc::new(script), key: None, per_second: None }
    }
}

impl Fake {
    /// Starts it on a free port of 127.0.0.1, for as long as the runtime runs.
    pub async fn start(options: Options) -> std::io::Result<Fake> {
        let inner = Arc::new(Inner {
            script: options.script,
            key: options.key,
            per_second: options.per_second,
            received: Mutex::new(Vec::new()),
            window: Mutex::new(VecDeque::new()),
            over_limit: Mutex::new(0),
        });
        let app = axum::Router::new()
            .route("/v1/messages", post(answer))
            .route("/v1/chat/completions", post(answer))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        // As real providers' servers do: small SSE frames go out at once.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Fake { inner, url })
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many requests came.
    pub fn count(&self) -> usize {
        self.inner.received.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// How many requests came past the rate it holds itself to.
    pub fn over_limit(&self) -> usize {
        *self.inner.over_limit.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Anthropic,
    Openai,
}

async fn answer(State(inner): State<Arc<Inner>>, uri: axum::http::Uri, headers: HeaderMap, body: Bytes) -> Response {
    let format = if uri.path().ends_with("/messages") { Format::Anthropic } else { Format::Openai };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(format, 400, None, "invalid_request_error", "the body is not JSON");
    };
    if let Some(key) = &inner.key {
        let given = headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned).or_else(|| {
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned)
        });
        if given.as_deref() != Some(key) {
            return error(format, 401, None, "authentication_error", "invalid x-api-key");
        }
    }
    if format == Format::Anthropic && headers.get("anthropic-version").is_none() {
        return error(format, 400, None, "invalid_request_error", "anthropic-version header is required");
    }
    let now = Instant::now();
    if let Some(limit) = inner.per_second {
        let mut window = inner.window.lock().unwrap_or_else(|e| e.into_inner());
        while window.front().is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1)) {
            window.pop_front();
        }
        if window.len() >= limit {
            *inner.over_limit.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            return error(format, 429, Some(1), "rate_limit_error", "rate limited: too many requests per second");
        }
        window.push_back(now);
    }
    let count = {
        let mut received = inner.received.lock().unwrap_or_else(|e| e.into_inner());
        received.push(Received { path: uri.path().to_owned(), body: body.clone(), at: now, answered: None });
        received.len()
    };
    let reply = (inner.script)(&body, count);
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("fake-model").to_owned();
    let input_tokens = (body.to_string().len() as u64).div_ceil(4);
    let response = respond(format, stream, &model, input_tokens, count, reply).await;
    inner.received.lock().unwrap_or_else(|e| e.into_inner())[count - 1].answered = Some(Instant::now());
    response
}

async fn respond(format: Format, stream: bool, model: &str, input_tokens: u64, n: usize, mut reply: Reply) -> Response {
    while let Reply::Slow(delay, next) = reply {
        tokio::time::sleep(delay).await;
        reply = *next;
    }
    let mut drip = None;
    if let Reply::Drip(pause, next) = reply {
        drip = Some(pause);
        reply = *next;
    }
    let (kind, message) = match &reply {
        Reply::Status { status, .. } => match status {
            429 => ("rate_limit_error", "rate limited"),
            529 => ("overloaded_error", "Overloaded"),
            401 => ("authentication_error", "invalid x-api-key"),
            400 => ("invalid_request_error", "bad request"),
            _ => ("api_error", "Internal server error"),
        },
        _ => ("", ""),
    };
    if let Reply::Status { status, retry_after } = reply {
        return error(format, status, retry_after, kind, message);
    }
    if !stream {
        return match reply {
            Reply::Text(text) => whole(format, model, n, input_tokens, &text, None),
            Reply::Tool { text, name, input } => whole(format, model, n, input_tokens, &text, Some((&name, &input))),
            Reply::ErrorMidStream => error(format, 529, None, "overloaded_error", "Overloaded"),
            Reply::Malformed => (StatusCode::OK, [("content-type", "application/json")], "{\"id\": ").into_response(),
            Reply::Stall => stalled(Vec::new()),
            Reply::Status { .. } | Reply::Slow(..) | Reply::Drip(..) => unreachable!("answered above"),
        };
    }
    let frames = match format {
        Format::Anthropic => anthropic_frames(model, n, input_tokens, &reply),
        Format::Openai => openai_frames(model, n, &reply, input_tokens),
    };
    match (reply, drip) {
        (Reply::Stall, _) => stalled(frames),
        (_, Some(pause)) => dripped(frames, pause),
        _ => sse(frames),
    }
}

fn output_tokens(text: &str, tool: Option<(&str, &Value)>) -> u64 {
    (text.len() as u64).div_ceil(4) + tool.map_or(0, |(n, i)| (n.len() + i.to_string().len()) as u64 / 4 + 1) + 1
}

fn whole(
    format: Format,
    model: &str,
    n: usize,
    input_tokens: u64,
    text: &str,
    tool: Option<(&str, &Value)>,
) -> Response {
    let out = output_tokens(text, tool);
    let body = match format {
        Format::Anthropic => {
            let mut content = Vec::new();
            if !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            if let Some((name, input)) = tool {
                content.push(json!({"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": input}));
            }
            json!({
                "id": format!("msg_{n:04}"), "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" },
                "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            })
        }
        Format::Openai => {
            let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }, "refusal": null});
            if let Some((name, input)) = tool {
                message["tool_calls"] = json!([{"id": format!("call_{n:04}"), "type": "function",
                    "function": {"name": name, "arguments": input.to_string()}}]);
            }
            json!({
                "id": format!("chatcmpl-{n:04}"), "object": "chat.completion", "created": 1_764_000_000, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": null,
                    "finish_reason": if tool.is_some() { "tool_calls" } else { "stop" }}],
                "usage": {"prompt_tokens": input_tokens, "completion_tokens": out, "total_tokens": input_tokens + out},
            })
        }
    };
    (StatusCode::OK, [("content-type", "application/json")], body.to_string()).into_response()
}

fn error(format: Format, status: u16, retry_after: Option<u32>, kind: &str, message: &str) -> Response {
    let body = match format {
        Format::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Format::Openai => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": status.to_string()}})
        }
    };
    let mut response = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response();
    if let Some(after) = retry_after {
        response.headers_mut().insert("retry-after", after.into());
    }
    response
}

/// Splits `text` into pieces of at most `size` bytes, on character boundaries.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if current.len() + c.len_utf8() > size {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn anthropic_frames(model: &str, n: usize, input_tokens: u64, reply: &Reply) -> Vec<String> {
    let mut frames = vec![
        event(
            "message_start",
            &json!({"type": "message_start", "message": {
            "id": format!("msg_{n:04}"), "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ),
        event("ping", &json!({"type": "ping"})),
    ];
    let (text, tool) = match reply {
        Reply::Text(t) => (t.as_str(), None),
        Reply::Tool { text, name, input } => (text.as_str(), Some((name.as_str(), input))),
        Reply::ErrorMidStream => {
            frames.push(event(
                "error",
                &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ));
            return frames;
        }
        Reply::Malformed => {
            frames.push(
                "event: content_block_start\ndata: {\"type\": \"content_block_start\", \"index\": 0,\n\n".to_owned(),
            );
            return frames;
        }
        _ => return frames,
    };
    let mut index = 0;
    if !text.is_empty() {
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in pieces(text, 7) {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        frames.push(event("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    if let Some((name, input)) = tool {
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": {}}}),
        ));
        // The first piece empty, the rest cut every 5 bytes: mid-token, mid-escape.
        let json_text = input.to_string();
        let mut parts = vec![String::new()];
        parts.extend(pieces(&json_text, 5));
        for part in parts {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        frames.push(event("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
    }
    frames.push(event(
        "message_delta",
        &json!({"type": "message_delta",
        "delta": {"stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" }, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens(text, tool)}}),
    ));
    frames.push(event("message_stop", &json!({"type": "message_stop"})));
    frames
}

fn chunk(n: usize, model: &str, choices: Value, usage: Value) -> String {
    let c = json!({"id": format!("chatcmpl-{n:04}"), "object": "chat.completion.chunk", "created": 1_764_000_000,
        "model": model, "choices": choices, "usage": usage});
    format!("data: {c}\n\n")
}

fn openai_frames(model: &str, n: usize, reply: &Reply, input_tokens: u64) -> Vec<String> {
    let delta = |d: Value, finish: Value| json!([{"index": 0, "delta": d, "logprobs": null, "finish_reason": finish}]);
    let mut frames =
        vec![chunk(n, model, delta(json!({"role": "assistant", "content": ""}), Value::Null), Value::Null)];
    let (text, tool) = match reply {
        Reply::Text(t) => (t.as_str(), None),
        Reply::Tool { text, name, input } => (text.as_str(), Some((name.as_str(), input))),
        Reply::ErrorMidStream => {
            frames.push(format!("data: {}\n\n", json!({"error": {"message": "The server is overloaded", "type": "server_error", "param": null, "code": "overloaded"}})));
            return frames;
        }
        Reply::Malformed => {
            frames.push("data: {\"id\": \"chatcmpl\", \"choices\": [\n\n".to_owned());
            return frames;
        }
        _ => return frames,
    };
    for piece in pieces(text, 7) {
        frames.push(chunk(n, model, delta(json!({"content": piece}), Value::Null), Value::Null));
    }
    if let Some((name, input)) = tool {
        frames.push(chunk(
            n,
            model,
            delta(
                json!({"tool_calls": [{"index": 0, "id": format!("call_{n:04}"), "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ),
            Value::Null,
        ));
        for part in pieces(&input.to_string(), 5) {
            frames.push(chunk(
                n,
                model,
                delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}), Value::Null),
                Value::Null,
            ));
        }
    }
    let finish = if tool.is_some() { "tool_calls" } else { "stop" };
    frames.push(chunk(n, model, delta(json!({}), json!(finish)), Value::Null));
    let out = output_tokens(text, tool);
    frames.push(chunk(
        n,
        model,
        json!([]),
        json!({"prompt_tokens": input_tokens, "completion_tokens": out, "total_tokens": input_tokens + out}),
    ));
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

fn sse(frames: Vec<String>) -> Response {
    let stream = futures_util::stream::iter(frames.into_iter().map(|f| Ok::<_, Infallible>(Bytes::from(f))));
    sse_response(Body::from_stream(stream))
}

/// The frames, `pause` apart.
fn dripped(frames: Vec<String>, pause: Duration) -> Response {
    let stream = futures_util::stream::unfold(frames.into_iter(), move |mut frames| async move {
        let frame = frames.next()?;
        tokio::time::sleep(pause).await;
        Some((Ok::<_, Infallible>(Bytes::from(frame)), frames))
    });
    sse_response(Body::from_stream(stream))
}

/// The frames, then a connection held open with nothing more.
fn stalled(frames: Vec<String>) -> Response {
    let head = futures_util::stream::iter(frames.into_iter().map(|f| Ok::<_, Infallible>(Bytes::from(f))));
    let never = futures_util::stream::pending::<Result<Bytes, Infallible>>();
    sse_response(Body::from_stream(futures_util::StreamExt::chain(head, never)))
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
