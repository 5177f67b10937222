//! The fast path of the MCP endpoints: the one request agents send most, a 2026-07-28 `tools/call`
//! POSTed on its own, answered without rmcp's per-request machinery (a service loop spawned per
//! request, channels, the message re-serialized to check its headers), by the same tool handler with
//! the same caller. Everything else, and anything it is not sure of, goes to rmcp's
//! `StreamableHttpService` unchanged.
//!
//! Both ways, answers are bounded (`forward`): a POST whose body rmcp cannot read as JSON-RPC gets
//! the transport's JSON-RPC error, 400 with a parse error (-32700) or an invalid request (-32600),
//! where rmcp answers 415; and an error of rmcp's that quotes large input (an unknown method is
//! echoed whole, a header value in plain text) is cut to the protocol's bounds
//! (`clutch_proto::error`).
//!
//! **Invariant:** a request the fast path answers gets exactly what rmcp would answer (status,
//! content type, JSON body); `tests/it/fast.rs` checks it request by request against a router
//! without the fast path.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use clutch_core::access::Caller;
use clutch_proto::error::{MESSAGE_MAX, bound_text, quote};
use futures_util::StreamExt;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, CallToolResponse, ClientCapabilities, ContentBlock, ErrorCode,
    ErrorData, JsonRpcError, JsonRpcResponse, JsonRpcVersion2_0, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use serde::Deserialize;

use crate::Server;

/// The only protocol revision the fast path serves.
const VERSION: &str = "2026-07-28";
/// How SEP-2243 marks a header value carried in Base64 (which rmcp decodes before comparing).
const BASE64_PREFIX: &str = "=?base64?";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// An answer of rmcp's this small is passed on as it is: nothing it quotes can be long.
const SMALL: u64 = 1024;

/// One profile's endpoint: the fast path, and rmcp's service for everything else.
pub(crate) struct Endpoint {
    server: Server,
    rmcp: StreamableHttpService<Server, NeverSessionManager>,
    /// rmcp's `max_request_body_bytes`.
    body_limit: usize,
    /// The fast path is on, and the server accepts 2026-07-28 requests (rmcp refuses versions a
    /// server does not list).
    enabled: bool,
}

impl Endpoint {
    pub(crate) fn new(
        server: Server,
        rmcp: StreamableHttpService<Server, NeverSessionManager>,
        body_limit: usize,
        fast_path: bool,
    ) -> Endpoint {
        let enabled = fast_path && server.supported_protocol_versions().contains(&ProtocolVersion::V_2026_07_28);
        Endpoint { server, rmcp, body_limit, enabled }
    }
}

/// Marks, in a response's extensions (never on the wire), an answer the fast path gave: for tests
/// and for layers that count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastPath;

/// The handler of a profile's path: the fast path, or rmcp with its answers bounded.
pub(crate) async fn serve(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    match endpoint.try_serve(request).await {
        Ok(mut response) => {
            response.extensions_mut().insert(FastPath);
            response
        }
        Err(request) => endpoint.forward(request).await,
    }
}

impl Endpoint {
    /// Answers a common `tools/call`, or gives the request back for rmcp (rebuilt with the same
    /// bytes when its body was read).
    async fn try_serve(&self, request: Request) -> Result<Response, Request> {
        if !self.enabled || !self.common_headers(request.method(), request.headers()) {
            return Err(request);
        }
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, self.body_limit).await {
            Ok(bytes) => bytes,
            // Only a broken connection gets here (the length was checked): rmcp's answer to it.
            Err(e) => return Ok(plain(StatusCode::INTERNAL_SERVER_ERROR, format!("Failed to read request body: {e}"))),
        };
        let Some((id, meta, params)) = self.common_call(&parts.headers, &bytes) else {
            return Err(Request::from_parts(parts, Body::from(bytes)));
        };
        // What rmcp's service loop and handler do with a request, in the same order.
        let caller = parts.extensions.get::<Caller>().cloned().unwrap_or_default();
        let tasks = meta.client_capabilities().is_some_and(|c| c.supports_tasks());
        let answer = match self.server.call(params, caller, tasks).await {
            Ok(CallToolResponse::Task(_)) if !meta.client_capabilities().is_some_and(|c| c.supports_tasks()) => {
                Err(ErrorData::missing_required_client_capability(ClientCapabilities::builder().enable_tasks().build()))
            }
            Ok(response) => {
                let mut result = ServerResult::from(response);
                result.fill_missing_cache_hints();
                Ok(result)
            }
            Err(e) => Err(e),
        };
        let message = match answer {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(mut error) => {
                if error.code == ErrorCode::RESOURCE_NOT_FOUND {
                    error.code = ErrorCode::INVALID_PARAMS;
                }
                ServerJsonRpcMessage::error(error, Some(id))
            }
        };
        Ok(json(message))
    }

    /// rmcp's answer to `request`, bounded. A POST with a JSON `Content-Type` is read first (up to
    /// the limit; past it, or broken, rmcp gets it as it came and answers it), so that when rmcp
    /// cannot read the body as a JSON-RPC message, the answer can say whether it was JSON at all.
    async fn forward(&self, request: Request) -> Response {
        if request.method() != Method::POST || !json_content_type(request.headers()) {
            return bounded(self.rmcp.handle(request).await.map(Body::new)).await;
        }
        let (parts, body) = request.into_parts();
        let (body, read) = match read_within(body, self.body_limit).await {
            Ok(bytes) => (Body::from(bytes.clone()), Some(bytes)),
            Err(body) => (body, None),
        };
        let response = self.rmcp.handle(Request::from_parts(parts, body)).await.map(Body::new);
        match read {
            // The Content-Type was JSON: rmcp's 415 means the body is not a JSON-RPC message.
            Some(bytes) if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE => unreadable(&bytes),
            _ => bounded(response).await,
        }
    }

    /// A POST rmcp would read: acceptable `Accept` and `Content-Type`, a declared
    /// length within the limit, and the SEP-2243 headers of a 2026-07-28 `tools/call`, none of them
    /// repeated, no `Mcp-Param-*`.
    fn common_headers(&self, method: &Method, headers: &HeaderMap) -> bool {
        *method == Method::POST
            && accepts_json_and_sse(headers)
            && only(headers, &header::CONTENT_TYPE).is_some_and(|v| {
                !v.contains('"') && v.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case(JSON))
            })
            && !headers.contains_key(header::TRANSFER_ENCODING)
            && only(headers, &header::CONTENT_LENGTH)
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|n| n <= self.body_limit)
            && only(headers, &MCP_PROTOCOL_VERSION) == Some(VERSION)
            && only(headers, &MCP_METHOD) == Some("tools/call")
            && only(headers, &MCP_NAME).is_some_and(|v| !v.starts_with(BASE64_PREFIX))
            && !headers.keys().any(|name| name.as_str().starts_with("mcp-param-"))
    }

    /// The body as one `tools/call` request of the 2026-07-28 era whose name is the `Mcp-Name`
    /// header's, to a tool without `Mcp-Param-*` headers (or to no tool: that is answered alike).
    fn common_call(
        &self,
        headers: &HeaderMap,
        bytes: &Bytes,
    ) -> Option<(RequestId, RequestMetaObject, CallToolRequestParams)> {
        let Call { id, mut params, .. } = serde_json::from_slice(bytes).ok()?;
        let meta = params.meta.take()?;
        let modern = meta.protocol_version().is_some_and(|v| v == ProtocolVersion::V_2026_07_28)
            && meta.missing_required_keys(&ProtocolVersion::V_2026_07_28).is_empty();
        let plain = params.input_responses.is_none() && params.request_state.is_none();
        let named = only(headers, &MCP_NAME) == Some(params.name.as_ref());
        let checked_headers = self.server.tool(&params.name).is_some_and(|t| t.param_headers);
        (modern && plain && named && !checked_headers).then_some((id, meta, params))
    }
}

/// A JSON-RPC `tools/call` request and nothing else, read with rmcp's own types. rmcp reads a
/// message by trying each kind of message and each method in turn on a buffered copy; this reads the
/// one shape the fast path serves, straight, and refuses anything more (a `result` or `error` key, an
/// unknown one) so that rmcp decides those. The request's `_meta` lands in `params.meta`, where rmcp
/// moves it to the request's extensions.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Call {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(rename = "method")]
    _method: CallToolRequestMethod,
    params: CallToolRequestParams,
}

/// The single value of header `name` as text; `None` when it is absent, repeated or not text.
fn only<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// `Content-Type` is JSON as rmcp reads it (its first value, parameters aside).
fn json_content_type(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case(JSON)
    })
}

/// The whole body when it ends within `limit` bytes; otherwise (too long, or broken) a body that
/// yields again what was read, then the rest, so that rmcp refuses it as it would have.
async fn read_within(body: Body, limit: usize) -> Result<Bytes, Body> {
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) if read.len() + chunk.len() <= limit => read.extend_from_slice(&chunk),
            other => {
                let head = futures_util::stream::iter([Ok(Bytes::from(read)), other]);
                return Err(Body::from_stream(head.chain(stream)));
            }
        }
    }
    Ok(Bytes::from(read))
}

/// The answer to a body that is not a JSON-RPC message, as MCP's transport gives it: 400 with a
/// JSON-RPC error without an id (none could be read), a parse error when the body is not JSON at
/// all, else an invalid request.
fn unreadable(bytes: &[u8]) -> Response {
    let error = match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Err(e) => ErrorData::parse_error(format!("Parse error: the body is not valid JSON: {e}"), None),
        Ok(_) => ErrorData::invalid_request(
            "Invalid Request: the body is JSON but not a JSON-RPC request, notification or response MCP knows",
            None,
        ),
    };
    let mut response = json(ServerJsonRpcMessage::error(error, None));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

/// rmcp's answer, cut to the protocol's bounds where it quotes large input: a JSON-RPC error's
/// message (rmcp's own sentences are short; an unknown method comes back as the whole message) and
/// data, or a plain-text refusal (which may quote a header). Any other answer, a stream, and one of
/// at most [`SMALL`] bytes, are passed on as they are.
async fn bounded(response: Response) -> Response {
    use axum::body::HttpBody as _;
    if response.body().size_hint().exact().is_none_or(|n| n <= SMALL) {
        return response;
    }
    let json = response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes() == JSON.as_bytes());
    let (mut parts, body) = response.into_parts();
    // rmcp's answers of a known size are whole in memory: reading cannot fail.
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    match if json { bound_rpc_error(&bytes) } else { bound_plain(&bytes) } {
        Some(cut) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(cut))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// A JSON-RPC error with its message and data cut to the protocol's bounds; `None` when the answer
/// is not an error or nothing in it needs cutting.
fn bound_rpc_error(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut message = serde_json::from_slice::<JsonRpcError>(bytes).ok()?;
    let error = &mut message.error;
    let text = if error.code == ErrorCode::METHOD_NOT_FOUND {
        quote(&error.message)
    } else {
        bound_text(&error.message, MESSAGE_MAX)
    };
    let text = match text {
        Cow::Owned(cut) => Some(cut),
        Cow::Borrowed(_) => None,
    };
    let large_data = error.data.as_ref().is_some_and(|d| d.to_string().len() > MESSAGE_MAX);
    if text.is_none() && !large_data {
        return None;
    }
    if let Some(text) = text {
        error.message = text.into();
    }
    if large_data {
        error.data = None;
    }
    serde_json::to_vec(&ServerJsonRpcMessage::Error(message)).ok()
}

/// A plain-text refusal cut like an error message; `None` when it is short enough.
fn bound_plain(bytes: &[u8]) -> Option<Vec<u8>> {
    match bound_text(&String::from_utf8_lossy(bytes), MESSAGE_MAX) {
        Cow::Owned(cut) => Some(cut.into_bytes()),
        Cow::Borrowed(_) => None,
    }
}

/// `Accept` lists both media types rmcp requires, with no parameters (a `q=0` would exclude one).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { return false };
        for entry in value.split(',') {
            let entry = entry.trim();
            if entry.contains([';', '"']) {
                return false;
            }
            json |= entry.eq_ignore_ascii_case(JSON);
            sse |= entry.eq_ignore_ascii_case(EVENT_STREAM);
        }
    }
    json && sse
}

/// rmcp's JSON answer to a request that used the 2026-07-28 lifecycle with well-formed metadata.
/// A structured tool result's `structuredContent` is copied from its text block, which the server
/// wrote from the same value (`server::structured`; rmcp's `structured_error` for a refusal), rather
/// than serialized a second time (4% of the instructions of a workflow task's five calls).
fn json(mut message: ServerJsonRpcMessage) -> Response {
    let status = status(&message);
    let held = hold_structured(&mut message);
    let body = serde_json::to_vec(&message).map_err(|e| e.to_string()).and_then(|body| match &held {
        Some(text) => with_structured(&body, text).ok_or_else(|| "its structured value had no place".to_owned()),
        None => Ok(body),
    });
    let body = match body {
        Ok(body) => body,
        Err(e) => {
            tracing::error!(error = %e, "a tools/call answer could not be serialized");
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error".into());
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// Where a structured tool result's value goes while the answer is serialized: `null`, replaced by
/// [`with_structured`]. Only a result whose one text block is that value serialized qualifies.
const HELD: &[u8] = b"\"structuredContent\":null";

/// Swaps a structured tool result's value for `null` when its text block holds the value
/// serialized, and gives a copy of that text (a copy costs far less than serializing the value).
fn hold_structured(message: &mut ServerJsonRpcMessage) -> Option<String> {
    let ServerJsonRpcMessage::Response(JsonRpcResponse { result: ServerResult::CallToolResult(result), .. }) = message
    else {
        return None;
    };
    let ([ContentBlock::Text(text)], Some(value)) = (result.content.as_slice(), &mut result.structured_content) else {
        return None;
    };
    debug_assert_eq!(text.text, value.to_string(), "a structured result whose text is not its value");
    *value = serde_json::Value::Null;
    Some(text.text.clone())
}

/// `body` with the held value written back from `text`. The member is found from the end: only
/// `isError` and `_meta` follow it, and no string in the answer holds an unescaped quote.
fn with_structured(body: &[u8], text: &str) -> Option<Vec<u8>> {
    let at = body.windows(HELD.len()).rposition(|w| w == HELD)?;
    let value_at = at + HELD.len() - "null".len();
    let mut out = Vec::with_capacity(body.len() + text.len());
    out.extend_from_slice(&body[..value_at]);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&body[at + HELD.len()..]);
    Some(out)
}

/// The HTTP status rmcp gives a JSON-RPC answer on the 2026-07-28 path.
fn status(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else { return StatusCode::OK };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn plain(status: StatusCode, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn only_plain_accept_lists_with_both_types_pass() {
        assert!(accepts_json_and_sse(&headers(&[("accept", "application/json, text/event-stream")])));
        assert!(accepts_json_and_sse(&headers(&[("accept", "text/event-stream"), ("accept", "Application/JSON")])));
        assert!(!accepts_json_and_sse(&headers(&[("accept", "application/json")])));
        assert!(!accepts_json_and_sse(&headers(&[("accept", "application/json;q=0, text/event-stream")])));
        assert!(!accepts_json_and_sse(&headers(&[])));
    }
}
