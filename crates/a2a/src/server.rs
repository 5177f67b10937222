//! The face's routes: the card at both well-known paths (cacheable, in the version asked for), the
//! JSON-RPC endpoint (each request's version, its `A2A-Version`, none meaning 0.3; JSON-RPC errors
//! travel in HTTP 200, as the spec's clients expect), the HTTP+JSON binding (`rest`) and the hub's
//! own send (`send`).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use clutch_core::{Engine, Handle};
use serde_json::{Value, json};

use crate::Options;
use crate::hub::{Hub, identify_request};
use crate::methods::Reply;
use crate::stream::stream;
use crate::wire::{RpcError, Version};

pub(crate) fn router(log: Handle, engine: Engine, options: Options) -> Router {
    let hub = Hub { log, engine, options: Arc::new(options) };
    Router::new()
        .route("/.well-known/agent-card.json", get(agent_card))
        .route("/.well-known/agent.json", get(legacy_agent_card))
        .route("/a2a", post(rpc))
        .route("/a2a/", post(rpc))
        .route(&format!("{}/{{*path}}", crate::card::REST_PATH), any(crate::rest::serve))
        .with_state(hub)
}

pub(crate) fn api_router(log: Handle, engine: Engine, options: Options) -> Router {
    let hub = Hub { log, engine, options: Arc::new(options) };
    Router::new().route("/v1/a2a/send", post(crate::send::send)).with_state(hub)
}

/// How long a client may keep the card before it asks again (revalidating with its `ETag`, which
/// costs a 304): the card changes as agents come and go, so a minute.
const CARD_MAX_AGE_SECS: u64 = 60;

/// `/.well-known/agent-card.json`: the card in the version asked for, else the one
/// `Options::unversioned_card` names (1.0 unless the operator says 0.3).
async fn agent_card(State(hub): State<Hub>, uri: Uri, headers: HeaderMap) -> Response {
    let unversioned = hub.options.unversioned_card;
    card_response(&hub, &uri, &headers, unversioned)
}

/// `/.well-known/agent.json`, the path of A2A before 0.3 (0.3 SDKs still name it): the 0.3 card,
/// unless the request asks for another version.
async fn legacy_agent_card(State(hub): State<Hub>, uri: Uri, headers: HeaderMap) -> Response {
    card_response(&hub, &uri, &headers, Version::V03)
}

/// The card in the version the request names (`A2A-Version`, as a header or a query parameter),
/// `unversioned` when it names none; a version the hub does not speak gets the 1.0 card, whose
/// interfaces say which versions it does. Cacheable: `Cache-Control` with a `max-age`, an `ETag`
/// (a hash of the card), 304 for an `If-None-Match` naming it, `Vary: A2A-Version`.
fn card_response(hub: &Hub, uri: &Uri, headers: &HeaderMap, unversioned: Version) -> Response {
    let version = match asked_version(headers, uri).as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        None => unversioned,
        Some(asked) => Version::parse(Some(asked)).unwrap_or(Version::V10),
    };
    let guarded = crate::auth::guarded(&hub.engine, &hub.options);
    let body = crate::card::card(&hub.engine, &hub.base(headers), guarded, false, version).to_string();
    let tag = {
        use sha2::Digest;
        format!("\"{}\"", &hex::encode(sha2::Sha256::digest(body.as_bytes()))[..16])
    };
    let cache = [
        (header::ETAG, tag.clone()),
        (header::CACHE_CONTROL, format!("public, max-age={CARD_MAX_AGE_SECS}")),
        (header::VARY, "A2A-Version".to_owned()),
    ];
    let asked = headers.get_all(header::IF_NONE_MATCH).iter().filter_map(|v| v.to_str().ok());
    if asked.flat_map(|v| v.split(',')).map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == tag) {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (cache, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The version a request names: its `A2A-Version` header, else its `A2A-Version` query parameter.
fn asked_version(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    headers.get("a2a-version").and_then(|v| v.to_str().ok()).map(str::to_owned).or_else(|| {
        let query = uri.query()?;
        query.split('&').find_map(|kv| kv.strip_prefix("A2A-Version=").map(str::to_owned))
    })
}

/// `POST /a2a`: one JSON-RPC request.
async fn rpc(State(hub): State<Hub>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let who = identify_request(&hub, &parts.headers);
    let asked = asked_version(&parts.headers, &parts.uri);
    let a2a_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/a2a+json"));
    let bytes: Bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => return answer(Value::Null, Err(RpcError::parse(e.to_string())), Version::V03, a2a_json),
    };
    let version = Version::parse(asked.as_deref());
    let request: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return answer(
                Value::Null,
                Err(RpcError::parse(format!("not JSON: {e}"))),
                version.unwrap_or(Version::V03),
                a2a_json,
            );
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    // JSON-RPC 2.0: an id is a string, a number or null; any other makes the request invalid.
    if !matches!(id, Value::String(_) | Value::Number(_) | Value::Null) {
        let why = "id: a string, a number or null";
        return answer(Value::Null, Err(RpcError::invalid_request(why)), version.unwrap_or(Version::V03), a2a_json);
    }
    let method = request.get("method").and_then(Value::as_str);
    let (Some(method), true) = (method, request.get("jsonrpc") == Some(&json!("2.0"))) else {
        let why = "a JSON-RPC 2.0 request: {jsonrpc: \"2.0\", method, params, id}";
        return answer(id, Err(RpcError::invalid_request(why)), version.unwrap_or(Version::V03), a2a_json);
    };
    let Some(version) = version else {
        let asked = asked.unwrap_or_default();
        return answer(id, Err(RpcError::version_not_supported(&asked)), Version::V10, a2a_json);
    };
    let who = match who {
        Ok(who) => who,
        Err(refused) => {
            let status =
                if refused.reason == "UNAUTHENTICATED" { StatusCode::UNAUTHORIZED } else { StatusCode::FORBIDDEN };
            let mut response = answer(id, Err(refused), version, a2a_json);
            *response.status_mut() = status;
            if status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            return response;
        }
    };
    let params = request.get("params").cloned().unwrap_or(json!({}));
    let base = hub.base(&parts.headers);
    match hub.call(version, method, &params, &who, &base).await {
        Ok(Reply::Json(result)) => answer(id, Ok(result), version, a2a_json),
        Ok(Reply::Stream { task, after, first }) => {
            match stream(hub, task, after, first, version, Some(id.clone())).await {
                Ok(response) => response,
                Err(e) => answer(id, Err(e), version, false),
            }
        }
        // 0.3 answers a streaming method in SSE, its error too (an event holding the error response).
        Err(e) if version == Version::V03 && e.reason != "PERMISSION_DENIED" && streams(method) => {
            let event =
                SseEvent::default().data(json!({"jsonrpc": "2.0", "id": id, "error": e.json(version)}).to_string());
            Sse::new(futures_util::stream::iter([Ok::<_, Infallible>(event)])).into_response()
        }
        Err(e) => {
            let forbidden = e.reason == "PERMISSION_DENIED";
            let mut response = answer(id, Err(e), version, a2a_json);
            if forbidden {
                *response.status_mut() = StatusCode::FORBIDDEN;
            }
            response
        }
    }
}

fn answer(id: Value, result: Result<Value, RpcError>, version: Version, a2a_json: bool) -> Response {
    let body = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            if e.code == -32603 {
                tracing::warn!(error = %e.message, "an A2A request failed");
            }
            json!({"jsonrpc": "2.0", "id": id, "error": e.json(version)})
        }
    };
    let content_type = if a2a_json { "application/a2a+json" } else { "application/json" };
    ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], body.to_string()).into_response()
}

/// Whether `method` is one answered in SSE (0.3's names; 1.0's answer an error as plain JSON-RPC).
fn streams(method: &str) -> bool {
    matches!(method, "message/stream" | "tasks/resubscribe")
}
