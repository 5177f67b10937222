//! A2A 1.0's HTTP+JSON binding at `/a2a/rest`: the same operations as the JSON-RPC endpoint, each a
//! route (`POST /message:send`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`...), answered with the
//! bare result and an HTTP status, errors as `google.rpc.Status` (`{error: {code, status, message,
//! details: [ErrorInfo]}}`), streams as SSE of bare `StreamResponse`s. Each route is turned into the
//! JSON-RPC method and params it stands for, and run by the same code.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::card::REST_PATH;
use crate::hub::{Hub, identify_request};
use crate::methods::Reply;
use crate::stream::stream;
use crate::wire::{RpcError, Version};

/// Any request under [`REST_PATH`].
pub(crate) async fn serve(State(hub): State<Hub>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let asked = parts.headers.get("a2a-version").and_then(|v| v.to_str().ok()).map(str::to_owned);
    match Version::parse(asked.as_deref()) {
        Some(Version::V10) => {}
        // The binding is 1.0's (0.3's REST paths differ); none means 0.3.
        _ => {
            let asked = asked.unwrap_or_default();
            let mut e = RpcError::version_not_supported(&asked);
            e.message.push_str(" (this HTTP+JSON binding is 1.0's: send A2A-Version: 1.0)");
            return error(e);
        }
    }
    let who = match identify_request(&hub, &parts.headers) {
        Ok(who) => who,
        Err(e) => return error(e),
    };
    let bytes: Bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => return error(RpcError::parse(e.to_string())),
    };
    let body: Map<String, Value> = if bytes.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return error(RpcError::invalid_request("the body is a JSON object")),
            Err(e) => return error(RpcError::parse(format!("not JSON: {e}"))),
        }
    };
    let path = parts.uri.path().strip_prefix(REST_PATH).unwrap_or_default().to_owned();
    // Query parameters: numbers and booleans as such (`pageSize=10`, `includeArtifacts=true`).
    let query: Map<String, Value> = form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
        .map(|(k, v)| {
            let value = v.parse::<u64>().map(Value::from).or_else(|_| v.parse::<bool>().map(Value::from));
            (k.into_owned(), value.unwrap_or_else(|_| Value::String(v.into_owned())))
        })
        .collect();
    let Some((method, params)) = route(&parts.method, &path, body, query) else {
        let mut e = RpcError::method_not_found(&format!("{} {path}", parts.method));
        e.message = format!("no route {} {REST_PATH}{path} in the HTTP+JSON binding", parts.method);
        return error(e);
    };
    let base = hub.base(&parts.headers);
    match hub.call(Version::V10, method, &Value::Object(params), &who, &base).await {
        Ok(Reply::Json(result)) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], result.to_string()).into_response()
        }
        Ok(Reply::Stream { task, after, first }) => {
            stream(hub, task, after, first, Version::V10, None).await.unwrap_or_else(error)
        }
        Err(e) => error(e),
    }
}

/// The JSON-RPC method and params a route stands for.
fn route(
    method: &Method,
    path: &str,
    body: Map<String, Value>,
    query: Map<String, Value>,
) -> Option<(&'static str, Map<String, Value>)> {
    let with_id = |id: &str, mut params: Map<String, Value>| {
        params.insert("id".into(), Value::from(id));
        params
    };
    // `/tasks/{id}/pushNotificationConfigs[/{configId}]`
    let webhooks = path.strip_prefix("/tasks/").and_then(|rest| rest.split_once("/pushNotificationConfigs"));
    if let Some((task, config)) = webhooks.filter(|(task, _)| !task.is_empty() && !task.contains('/')) {
        let mut params = if method == Method::POST { body } else { query };
        params.insert("taskId".into(), Value::from(task));
        let config = config.strip_prefix('/').filter(|c| !c.is_empty() && !c.contains('/'));
        if let Some(config) = config {
            params.insert("id".into(), Value::from(config));
        }
        return match (method.as_str(), config) {
            ("POST", None) => Some(("CreateTaskPushNotificationConfig", params)),
            ("GET", None) => Some(("ListTaskPushNotificationConfigs", params)),
            ("GET", Some(_)) => Some(("GetTaskPushNotificationConfig", params)),
            ("DELETE", Some(_)) => Some(("DeleteTaskPushNotificationConfig", params)),
            _ => None,
        };
    }
    match (method.as_str(), path) {
        ("POST", "/message:send") => Some(("SendMessage", body)),
        ("POST", "/message:stream") => Some(("SendStreamingMessage", body)),
        ("GET", "/tasks") => Some(("ListTasks", query)),
        ("GET", "/extendedAgentCard") => Some(("GetExtendedAgentCard", Map::new())),
        ("GET", p) => {
            let id = p.strip_prefix("/tasks/").filter(|id| !id.is_empty() && !id.contains(['/', ':']))?;
            Some(("GetTask", with_id(id, query)))
        }
        ("POST", p) => {
            let rest = p.strip_prefix("/tasks/")?;
            if let Some(id) = rest.strip_suffix(":cancel") {
                return Some(("CancelTask", with_id(id, body)));
            }
            if let Some(id) = rest.strip_suffix(":subscribe") {
                return Some(("SubscribeToTask", with_id(id, body)));
            }
            None
        }
        _ => None,
    }
}

/// An error as the binding says it: its HTTP status and a `google.rpc.Status`.
fn error(e: RpcError) -> Response {
    let (status, name) = http_status(&e);
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": name,
        "message": e.message,
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason, "domain": "a2a-protocol.org", "metadata": {}}],
    }});
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    }
    response
}

/// The HTTP status (and its `google.rpc.Code` name) of an error.
fn http_status(e: &RpcError) -> (StatusCode, &'static str) {
    match e.reason {
        "TASK_NOT_FOUND" | "METHOD_NOT_FOUND" => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        "TASK_NOT_CANCELABLE" => (StatusCode::CONFLICT, "FAILED_PRECONDITION"),
        "UNAUTHENTICATED" => (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
        "PERMISSION_DENIED" => (StatusCode::FORBIDDEN, "PERMISSION_DENIED"),
        "UNSUPPORTED_OPERATION" | "PUSH_NOTIFICATION_NOT_SUPPORTED" | "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => {
            (StatusCode::BAD_REQUEST, "UNIMPLEMENTED")
        }
        "INTERNAL_ERROR" => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
        _ => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
    }
}
