//! The stdio bridge behind `clutch mcp`: a Streamable HTTP client of the daemon's MCP endpoint that
//! forwards bytes, not objects. Each JSON-RPC line read from stdin is POSTed as it is, on a pool of
//! keep-alive HTTP/1.1 connections, with the headers an HTTP client sends (`MCP-Protocol-Version`:
//! the request's own `_meta` version, else the one its `initialize` settled; SEP-2243's `Mcp-Method`
//! and `Mcp-Name`; the token); the answer, a JSON body or the events of an SSE stream, is written back
//! line by line as it came. So a stdio client sees exactly what an HTTP client sees, in either
//! protocol era, tasks included, and the bridge parses no more of a message than its method, name and
//! version. Requests are forwarded concurrently (a long `task_inbox` wait does not hold up the
//! others); the daemon's endpoint keeps no session, so it sends nothing unasked. stdout carries
//! protocol messages only; anything else goes to the log (stderr).

use std::borrow::Cow;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, Request, Response, Uri};
use clutch_core::Refusal;
use clutch_proto::ErrorCode;
use futures_util::stream::FuturesUnordered;
use futures_util::{Stream, StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use sse_stream::SseStream;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::Profile;
use crate::error::{Error, Result};

/// Where the daemon is and how to reach it.
#[derive(Debug, Clone)]
pub struct Options {
    /// The daemon's base URL, `http://host:port`.
    pub url: String,
    /// Its API token, sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// Which endpoint's tools to offer.
    pub profile: Profile,
}

/// How SEP-2243 marks a header value carried in Base64.
const BASE64_PREFIX: &str = "=?base64?";

/// Connects to the daemon, then serves stdio until the client closes it. Fails at once, before
/// reading stdin, when no daemon answers.
pub async fn run(options: Options) -> Result<()> {
    let base = options.url.trim_end_matches('/').to_owned();
    if !base.starts_with("http://") {
        return Err(Error::Config(format!("invalid daemon URL {:?}: only http://host:port is supported", options.url)));
    }
    let authority = base.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
    let path = options.profile.path();
    let daemon = Daemon::new(&authority, options.token.as_deref())
        .ok_or_else(|| Error::Config(format!("invalid daemon URL {:?}", options.url)))?;
    // A plain health check first tells "nothing there" apart from a daemon that answers.
    if let Err(Unanswered::Connect(_)) = daemon.send(daemon.request(Method::GET, "/healthz", Bytes::new())).await {
        return Err(Error::NoDaemon { url: base });
    }
    let bridge =
        Bridge { daemon, endpoint: path, base, settled: Mutex::new(None), out: tokio::sync::Mutex::new(stdout()) };
    tracing::info!(url = %bridge.base, profile = %options.profile, "serving MCP on stdio");
    let mut lines = BufReader::new(stdin()).lines();
    // The lines in flight, forwarded concurrently on this one thread: no task to spawn for each.
    let mut forwarding = FuturesUnordered::new();
    let mut open = true;
    while open || !forwarding.is_empty() {
        tokio::select! {
            line = lines.next_line(), if open => match line {
                Ok(Some(line)) if line.trim().is_empty() => {}
                Ok(Some(line)) => forwarding.push(bridge.forward(line)),
                // stdin closed: the answers still due are written before leaving.
                Ok(None) => open = false,
                Err(e) => return Err(Error::Stdio(e.to_string())),
            },
            Some(()) = forwarding.next(), if !forwarding.is_empty() => {}
        }
    }
    tracing::debug!("stdio closed");
    Ok(())
}

struct Bridge {
    daemon: Daemon,
    base: String,
    /// The profile's path, `/mcp` or `/mcp/worker`.
    endpoint: &'static str,
    /// The protocol version `initialize` settled (the initialize era), for the requests after it.
    settled: Mutex<Option<String>>,
    out: tokio::sync::Mutex<Output>,
}

type Input = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Output = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// stdin. A pipe (how MCP clients start a server) is read without blocking, on the runtime's own
/// thread; anything else (a file, a terminal) through tokio's stdin, whose every read is a hop to a
/// thread of its blocking pool and back (most of the bridge's CPU per call when it was always used).
fn stdin() -> Input {
    let pipe = std::io::stdin().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    }
}

/// stdout, as [`stdin`] reads stdin.
fn stdout() -> Output {
    let pipe = std::io::stdout().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// The daemon's HTTP/1.1 endpoint: keep-alive connections, one per request in flight, each kept
/// for the next request once its answer is read. hyper's connection API rather than a general
/// client: no URL to parse, no pool to look up, the fixed headers built once.
struct Daemon {
    /// `host:port`.
    authority: String,
    /// Host, content type, accept and the token: every request's.
    headers: HeaderMap,
    idle: Mutex<Vec<http1::SendRequest<Full<Bytes>>>>,
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
enum Unanswered {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

impl Daemon {
    fn new(authority: &str, token: Option<&str>) -> Option<Daemon> {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(authority).ok()?);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        if let Some(token) = token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        Some(Daemon { authority: authority.to_owned(), headers, idle: Mutex::new(Vec::new()) })
    }

    fn request(&self, method: Method, path: &'static str, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = Uri::from_static(path);
        *request.headers_mut() = self.headers.clone();
        request
    }

    /// Sends on an idle connection, or a new one; the answer's head, and the connection to give
    /// back with [`Daemon::keep`] once its body is read.
    async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, http1::SendRequest<Full<Bytes>>), Unanswered> {
        let idle = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            std::iter::from_fn(|| idle.pop()).find(|c| c.is_ready())
        };
        let mut connection = match idle {
            Some(connection) => connection,
            None => self.connect().await?,
        };
        let response = connection.send_request(request).await?;
        Ok((response, connection))
    }

    fn keep(&self, connection: http1::SendRequest<Full<Bytes>>) {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(connection);
    }

    async fn connect(&self) -> Result<http1::SendRequest<Full<Bytes>>, Unanswered> {
        let connect = tokio::net::TcpStream::connect(&self.authority);
        let stream = match tokio::time::timeout(Duration::from_secs(5), connect).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(Unanswered::Connect(e.to_string())),
            Err(_) => return Err(Unanswered::Connect("timed out".into())),
        };
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a connection to the daemon closed");
            }
        });
        Ok(sender)
    }
}

/// What the bridge reads of a message: enough to set its headers. The rest of the line (the
/// arguments, the other `_meta` keys) is skipped over, not built.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    params: Option<HeadParams>,
}

#[derive(Deserialize)]
struct HeadParams {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    uri: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<HeadMeta>,
}

/// Of `_meta`, the one key the bridge needs (a value that is not a string is the daemon's to refuse).
#[derive(Deserialize)]
struct HeadMeta {
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<Value>,
}

impl Bridge {
    /// Posts one line and writes back what the daemon answers.
    async fn forward(&self, line: String) {
        let (id, method, headers) = headers(&line, || self.settled.lock().unwrap_or_else(|e| e.into_inner()).clone());
        let mut request = self.daemon.request(Method::POST, self.endpoint, Bytes::from(line));
        request.headers_mut().extend(headers);
        let (response, connection) = match self.daemon.send(request).await {
            Ok(sent) => sent,
            Err(e) => return self.unreachable(id, method.as_deref(), &e.to_string()).await,
        };
        let status = response.status();
        let is_stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let body = response.into_body();
        if is_stream {
            let mut events = std::pin::pin!(events(body));
            while let Some(event) = events.next().await {
                match event {
                    Ok(data) => self.answered(method.as_deref(), &data).await,
                    Err(sse_stream::Error::Body(_)) => {
                        return self.unreachable(id, method.as_deref(), "the answer's stream was cut").await;
                    }
                    Err(e) => {
                        let why = format!("the answer's stream could not be read ({e})");
                        return self.unreachable(id, method.as_deref(), &why).await;
                    }
                }
            }
            self.daemon.keep(connection);
            return;
        }
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return self.unreachable(id, method.as_deref(), &e.to_string()).await,
        };
        self.daemon.keep(connection);
        let text = String::from_utf8_lossy(&body);
        let text = text.trim();
        if text.starts_with('{') || text.starts_with('[') {
            self.answered(method.as_deref(), text).await;
        } else if let Some(id) = id.filter(|_| !status.is_success()) {
            // Not a JSON-RPC answer (a proxy's error page, say): the client still gets one.
            let message = format!("the Clutch daemon at {} answered HTTP {}", self.base, status.as_u16());
            self.write(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}).to_string())
                .await;
        }
    }

    /// Writes one answer; an `initialize` result settles the version of the requests after it.
    async fn answered(&self, method: Option<&str>, text: &str) {
        if method == Some("initialize")
            && let Ok(answer) = serde_json::from_str::<Value>(text)
            && let Some(version) = answer["result"]["protocolVersion"].as_str()
        {
            *self.settled.lock().unwrap_or_else(|e| e.into_inner()) = Some(version.to_owned());
        }
        // An answer on one line: JSON never needs a raw line break, but a pretty body would have some.
        if text.contains('\n') {
            match serde_json::from_str::<Value>(text) {
                Ok(value) => self.write(&value.to_string()).await,
                Err(_) => self.write(&text.replace(['\r', '\n'], " ")).await,
            }
        } else {
            self.write(text).await;
        }
    }

    /// The daemon did not answer request `id`: a tool call gets a result a model can act on, any other
    /// request a JSON-RPC error; a notification, nothing.
    async fn unreachable(&self, id: Option<Value>, method: Option<&str>, why: &str) {
        tracing::warn!(url = %self.base, error = %why, "the daemon did not answer a forwarded message");
        let Some(id) = id else { return };
        let message = format!("the Clutch daemon at {} did not answer: {why}", self.base);
        let answer = if method == Some("tools/call") {
            let refusal = Refusal::new(ErrorCode::Unavailable, message)
                .hint("wait a moment and call again; if it keeps failing, (re)start the daemon with `clutch serve`");
            json!({"jsonrpc": "2.0", "id": id, "result": crate::error::tool_result(&refusal)})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
        };
        self.write(&answer.to_string()).await;
    }

    async fn write(&self, line: &str) {
        let mut out = self.out.lock().await;
        let mut framed = Vec::with_capacity(line.len() + 1);
        framed.extend_from_slice(line.as_bytes());
        framed.push(b'\n');
        let written = async {
            out.write_all(&framed).await?;
            out.flush().await
        };
        if let Err(e) = written.await {
            tracing::warn!(error = %e, "cannot write to stdout");
        }
    }
}

/// What `line` says of itself: its id, its method and the headers an HTTP client would send
/// with it (none when it is not a JSON-RPC request or notification: the daemon answers it).
/// `settled`: the version `initialize` settled, for a request that names none of its own.
fn headers(line: &str, settled: impl FnOnce() -> Option<String>) -> (Option<Value>, Option<String>, HeaderMap) {
    let mut headers = HeaderMap::new();
    let Ok(head) = serde_json::from_str::<Head>(line) else { return (None, None, headers) };
    let Some(method) = head.method else { return (head.id, None, headers) };
    let params = head.params.as_ref();
    let version = match params.and_then(|p| p.meta.as_ref()).and_then(|m| m.version.as_ref()?.as_str()) {
        Some(version) => Some(version.to_owned()),
        None => settled(),
    };
    let mut put = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    if let Some(version) = version.filter(|_| method != "initialize") {
        put("mcp-protocol-version", &version);
    }
    put("mcp-method", &header_value(&method));
    let name = match &*method {
        "tools/call" | "prompts/get" => params.and_then(|p| p.name.as_ref()),
        "resources/read" => params.and_then(|p| p.uri.as_ref()),
        _ => None,
    };
    if let Some(name) = name.and_then(Value::as_str) {
        put("mcp-name", &header_value(name));
    }
    (head.id, Some(method.into_owned()), headers)
}

/// The `data` of each event of an SSE answer, as each completes; an event with no data (a
/// keep-alive comment, a bare `id`) is no answer and is skipped. An event the stream ends in the
/// middle of is not one.
fn events<B>(body: B) -> impl Stream<Item = Result<String, sse_stream::Error>>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    SseStream::new(body).try_filter_map(|event| {
        let data = event.data.filter(|data| data.contains(|c| c != '\n'));
        std::future::ready(Ok(data))
    })
}

/// A header value as SEP-2243 carries it: as it is when it is printable ASCII with no space at
/// either end, else in Base64.
fn header_value(value: &str) -> String {
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let encode = value.bytes().any(|b| !(0x20..=0x7e).contains(&b))
        || edge(value.as_bytes().first())
        || edge(value.as_bytes().last())
        || (value.starts_with(BASE64_PREFIX) && value.ends_with("?="));
    if encode {
        use base64::Engine;
        format!("{BASE64_PREFIX}{}?=", base64::engine::general_purpose::STANDARD.encode(value))
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body whose frames are `chunks`, then those `rest` sends (an error: the stream breaks off).
    fn body(
        chunks: &[&'static [u8]],
        rest: tokio::sync::mpsc::UnboundedReceiver<Result<&'static [u8], std::io::Error>>,
    ) -> impl hyper::body::Body<Data = Bytes, Error = std::io::Error> {
        let first: Vec<Result<&'static [u8], std::io::Error>> = chunks.iter().map(|c| Ok(*c)).collect();
        let rest = futures_util::stream::unfold(rest, |mut rest| async move { Some((rest.recv().await?, rest)) });
        let frames = futures_util::stream::iter(first)
            .chain(rest)
            .map(|chunk| chunk.map(|c| hyper::body::Frame::data(Bytes::from_static(c))));
        http_body_util::StreamBody::new(frames)
    }

    #[tokio::test]
    async fn events_are_taken_whole_as_they_complete() {
        let (more, rest) = tokio::sync::mpsc::unbounded_channel();
        let mut events = std::pin::pin!(events(body(&[b"event: message\ndata: {\"a\":1}\n\ndata: {\"b\""], rest)));
        assert_eq!(events.next().await.unwrap().unwrap(), "{\"a\":1}");
        more.send(Ok(b":2}\r\n\r\n: keep-alive\n\n")).unwrap();
        drop(more);
        assert_eq!(events.next().await.unwrap().unwrap(), "{\"b\":2}");
        assert!(events.next().await.is_none(), "nothing is left");
    }

    #[tokio::test]
    async fn a_stream_that_breaks_off_says_so_after_the_events_it_completed() {
        let (more, rest) = tokio::sync::mpsc::unbounded_channel();
        more.send(Err(std::io::Error::other("reset"))).unwrap();
        let mut events = std::pin::pin!(events(body(&[b"data: {\"a\":1}\n\ndata: {\"b\""], rest)));
        assert_eq!(events.next().await.unwrap().unwrap(), "{\"a\":1}");
        assert!(matches!(events.next().await, Some(Err(sse_stream::Error::Body(_)))));
    }

    #[test]
    fn a_line_gives_its_headers_from_its_method_name_and_version() {
        let header = |h: &HeaderMap, name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agent_list","arguments":{"x":[1,{"y":"\u00e9"}]},
            "_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},
            "io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let (id, method, h) = headers(call, || Some("2025-11-25".into()));
        assert_eq!((id, method.as_deref()), (Some(json!(7)), Some("tools/call")));
        assert_eq!(header(&h, "mcp-protocol-version").as_deref(), Some("2026-07-28"));
        assert_eq!(header(&h, "mcp-method").as_deref(), Some("tools/call"));
        assert_eq!(header(&h, "mcp-name").as_deref(), Some("agent_list"));
        // No version of its own, or one that is not a string: the settled one.
        let (_, _, h) = headers(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, || Some("2025-11-25".into()));
        assert_eq!(header(&h, "mcp-protocol-version").as_deref(), Some("2025-11-25"));
        let odd = r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":3}}}"#;
        let (_, _, h) = headers(odd, || Some("2025-11-25".into()));
        assert_eq!(header(&h, "mcp-protocol-version").as_deref(), Some("2025-11-25"));
        // `initialize` names no version in a header; a line that is not JSON-RPC gets no header.
        let (_, _, h) = headers(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#, || Some("x".into()));
        assert_eq!(
            (header(&h, "mcp-protocol-version"), header(&h, "mcp-method").as_deref()),
            (None, Some("initialize"))
        );
        let (id, method, h) = headers("not json", || None);
        assert_eq!((id, method, h.len()), (None, None, 0));
    }

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_value("agent_list"), "agent_list");
        assert_eq!(header_value("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(header_value("two words"), "two words");
        assert_eq!(header_value(" edge"), "=?base64?IGVkZ2U=?=");
    }
}
