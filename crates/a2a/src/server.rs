//! The card's routes and the JSON-RPC binding: each request's version (its `A2A-Version`, none
//! meaning 0.3), its method (1.0 PascalCase or 0.3 slash names, each only in its version), and the
//! mapping onto Clutch: an A2A message is a `task.request` to the orchestrator (`requires` the skill
//! its metadata names), its task is the Clutch task of the same id, its context the task's thread.
//! JSON-RPC errors travel in HTTP 200, as the spec's clients expect.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use clutch_core::tasks::{ORCHESTRATOR, ends_task};
use clutch_core::view::TaskState;
use clutch_core::{Engine, Handle, Subscription};
use clutch_proto::id::{self, Kind};
use clutch_proto::message::Recipient;
use clutch_proto::{Message as Envelope, MessageType};
use clutch_store::Filter;
use serde_json::{Map, Value, json};

use crate::Options;
use crate::auth::Who;
use crate::wire::{self, Artifact, Part, Role, RpcError, State as A2aState, Version};

/// Where the A2A message a task came from is kept in its request's payload.
const PAYLOAD_KEY: &str = "a2a";

#[derive(Clone)]
pub(crate) struct Face {
    pub(crate) log: Handle,
    pub(crate) engine: Engine,
    pub(crate) options: Arc<Options>,
}

impl Face {
    /// The hub's address as this request reached it (the configured one, else its `Host`).
    pub(crate) fn base(&self, headers: &HeaderMap) -> String {
        let base = self.options.public_url.clone().unwrap_or_else(|| {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
            format!("http://{host}")
        });
        base.trim_end_matches('/').to_owned()
    }
}

pub(crate) fn router(log: Handle, engine: Engine, options: Options) -> Router {
    let face = Face { log, engine, options: Arc::new(options) };
    Router::new()
        .route("/.well-known/agent-card.json", get(agent_card))
        .route("/.well-known/agent.json", get(legacy_agent_card))
        .route("/a2a", post(rpc))
        .route("/a2a/", post(rpc))
        .route(&format!("{}/{{*path}}", crate::rest::PATH), any(crate::rest::serve))
        .with_state(face)
}

pub(crate) fn api_router(log: Handle, engine: Engine, options: Options) -> Router {
    let face = Face { log, engine, options: Arc::new(options) };
    Router::new().route("/v1/a2a/send", post(crate::send::send)).with_state(face)
}

/// How long a client may keep the card before it asks again (revalidating with its `ETag`, which
/// costs a 304): the card changes as agents come and go, so a minute.
const CARD_MAX_AGE_SECS: u64 = 60;

/// `/.well-known/agent-card.json`: the card in the version asked for, else the one
/// `Options::unversioned_card` names (1.0 unless the operator says 0.3).
async fn agent_card(State(face): State<Face>, uri: Uri, headers: HeaderMap) -> Response {
    let unversioned = face.options.unversioned_card;
    card_response(&face, &uri, &headers, unversioned)
}

/// `/.well-known/agent.json`, the path of A2A before 0.3 (0.3 SDKs still name it): the 0.3 card,
/// unless the request asks for another version.
async fn legacy_agent_card(State(face): State<Face>, uri: Uri, headers: HeaderMap) -> Response {
    card_response(&face, &uri, &headers, Version::V03)
}

/// The card in the version the request names (`A2A-Version`, as a header or a query parameter),
/// `unversioned` when it names none; a version the hub does not speak gets the 1.0 card, whose
/// interfaces say which versions it does. Cacheable: `Cache-Control` with a `max-age`, an `ETag`
/// (a hash of the card), 304 for an `If-None-Match` naming it, `Vary: A2A-Version`.
fn card_response(face: &Face, uri: &Uri, headers: &HeaderMap, unversioned: Version) -> Response {
    let version = match asked_version(headers, uri).as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        None => unversioned,
        Some(asked) => Version::parse(Some(asked)).unwrap_or(Version::V10),
    };
    let guarded = crate::auth::guarded(&face.engine, &face.options);
    let body = crate::card::card(&face.engine, &face.base(headers), guarded, false, version).to_string();
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

/// Who calls, from a request's `X-API-Key` and bearer credentials; a refusal says why
/// (`UNAUTHENTICATED`: 401, `PERMISSION_DENIED`: 403).
pub(crate) fn identify_request(face: &Face, headers: &HeaderMap) -> Result<Who, RpcError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let api_key = header("x-api-key").filter(|k| !k.is_empty());
    let bearer = header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
    crate::auth::identify(&face.engine, &face.options, api_key, bearer).map_err(|refused| {
        let reason = if refused.status == 401 { "UNAUTHENTICATED" } else { "PERMISSION_DENIED" };
        RpcError::new(-32600, reason, refused.message)
    })
}

/// `POST /a2a`: one JSON-RPC request.
async fn rpc(State(face): State<Face>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let who = identify_request(&face, &parts.headers);
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
    let base = face.base(&parts.headers);
    match face.call(version, method, &params, &who, &base).await {
        Ok(Reply::Json(result)) => answer(id, Ok(result), version, a2a_json),
        Ok(Reply::Stream { task, after, first }) => stream(face, task, after, first, version, Some(id)).await,
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

/// What a method answers: one JSON-RPC result, or a stream of them (SSE) about a task.
pub(crate) enum Reply {
    Json(Value),
    /// The task's events after `after`, the task itself first when `first`.
    Stream {
        task: String,
        after: u64,
        first: bool,
    },
}

/// The SSE answer of a streaming method: each event the task, a status update or an artifact update,
/// in a JSON-RPC response of request `id` (the HTTP+JSON binding, with no `id`: bare); closed once
/// the task has ended.
pub(crate) async fn stream(
    face: Face,
    task: String,
    after: u64,
    first: bool,
    version: Version,
    id: Option<Value>,
) -> Response {
    let filter = Filter { task_id: Some(task.clone()), ..Filter::default() };
    let sub = match face.log.subscribe(filter, Some(after)).await {
        Ok(s) => s,
        Err(e) => {
            let e = RpcError::internal(e.to_string());
            return match id {
                Some(id) => answer(id, Err(e), version, false),
                None => crate::rest::error(e),
            };
        }
    };
    let streamer = Streamer { face, task, version, id, sub, first, last: None, pending: VecDeque::new(), done: false };
    let events = futures_util::stream::unfold(streamer, Streamer::next);
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}

struct Streamer {
    face: Face,
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
            let task = match self.face.task(&self.task, None).await {
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

/// What changed in `task` since `last` (the state and the number of artifacts already told), as
/// stream events: what the agent said of its progress in `said` (the event that brought the change),
/// told as a working status with that message, as of that event (the task may have moved on since);
/// each new artifact; and the status, if it changed.
pub(crate) fn changes(task: &wire::Task, said: Option<&Envelope>, last: (A2aState, usize), v: Version) -> Vec<Value> {
    let (state, told) = last;
    let mut out = Vec::new();
    let progress = said.filter(|m| m.kind == MessageType::TaskProgress).and_then(|m| {
        let text = m.payload.get("message").and_then(Value::as_str)?;
        let asks = m.payload.contains_key("input_required") || m.payload.contains_key("auth_required");
        (!asks).then(|| (m.id.clone(), text.to_owned()))
    });
    let mut told_working = false;
    if let Some((message_id, text)) = progress {
        let mut then = task.clone();
        then.state = A2aState::Working;
        then.artifacts.clear();
        then.status_message = Some(wire::Message {
            message_id,
            role: Role::Agent,
            parts: vec![Part::Text(text)],
            context_id: Some(task.context_id.clone()),
            task_id: Some(task.id.clone()),
            metadata: None,
        });
        out.push(wire::status_update_json(&then, v));
        told_working = true;
    }
    for artifact in task.artifacts.iter().skip(told) {
        out.push(wire::artifact_update_json(task, artifact, v));
    }
    if task.state != state && !(told_working && task.state == A2aState::Working) {
        out.push(wire::status_update_json(task, v));
    }
    out
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

/// The operations, by version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    Stream,
    Get,
    List,
    Cancel,
    Subscribe,
    PushSet,
    PushGet,
    PushList,
    PushDelete,
    ExtendedCard,
}

fn op(version: Version, method: &str) -> Result<Op, RpcError> {
    let v10 = match method {
        "SendMessage" => Some(Op::Send),
        "SendStreamingMessage" => Some(Op::Stream),
        "GetTask" => Some(Op::Get),
        "ListTasks" => Some(Op::List),
        "CancelTask" => Some(Op::Cancel),
        "SubscribeToTask" => Some(Op::Subscribe),
        "CreateTaskPushNotificationConfig" => Some(Op::PushSet),
        "GetTaskPushNotificationConfig" => Some(Op::PushGet),
        "ListTaskPushNotificationConfigs" => Some(Op::PushList),
        "DeleteTaskPushNotificationConfig" => Some(Op::PushDelete),
        "GetExtendedAgentCard" => Some(Op::ExtendedCard),
        _ => None,
    };
    let v03 = match method {
        "message/send" => Some(Op::Send),
        "message/stream" => Some(Op::Stream),
        "tasks/get" => Some(Op::Get),
        "tasks/cancel" => Some(Op::Cancel),
        "tasks/resubscribe" => Some(Op::Subscribe),
        "tasks/pushNotificationConfig/set" => Some(Op::PushSet),
        "tasks/pushNotificationConfig/get" => Some(Op::PushGet),
        "tasks/pushNotificationConfig/list" => Some(Op::PushList),
        "tasks/pushNotificationConfig/delete" => Some(Op::PushDelete),
        "agent/getAuthenticatedExtendedCard" => Some(Op::ExtendedCard),
        _ => None,
    };
    match (version, v10, v03) {
        (Version::V10, Some(op), _) | (Version::V03, _, Some(op)) => Ok(op),
        // A method of the other version: the version the request says is the wrong one for it.
        (Version::V10, None, Some(_)) => Err(RpcError::version_not_supported("1.0 (this is a 0.3 method)")),
        (Version::V03, Some(_), None) => {
            Err(RpcError::version_not_supported("0.3 (this is a 1.0 method; send A2A-Version: 1.0)"))
        }
        _ => Err(RpcError::method_not_found(method)),
    }
}

impl Face {
    pub(crate) async fn call(
        &self,
        version: Version,
        method: &str,
        params: &Value,
        who: &Who,
        base: &str,
    ) -> Result<Reply, RpcError> {
        let params = params.as_object().ok_or_else(|| RpcError::invalid_params("params: must be an object"))?;
        match op(version, method)? {
            Op::Send => self.send(version, params, who).await.map(Reply::Json),
            Op::Get => {
                let id = task_id(params)?;
                visible(&self.engine, who, &id).await?;
                let history = history_length(params)?;
                Ok(Reply::Json(wire::task_json(&self.task(&id, history).await?, version)))
            }
            Op::Cancel => self.cancel(version, params, who).await.map(Reply::Json),
            Op::Stream => {
                // A stream tells no history, but a bad length is refused as a send refuses it.
                history_length(params)?;
                let message = message_of(params)?;
                let task = message.task_id.clone().unwrap_or_else(|| id::generate(Kind::Task));
                let after = self.engine.seq();
                self.store(version, params, message, who, &task).await?;
                Ok(Reply::Stream { task, after, first: true })
            }
            Op::Subscribe => {
                let id = task_id(params)?;
                visible(&self.engine, who, &id).await?;
                if self.task(&id, Some(0)).await?.state.is_terminal() {
                    return Err(RpcError::unsupported(format!("task {id} has ended: read it with GetTask")));
                }
                Ok(Reply::Stream { task: id, after: self.engine.seq(), first: true })
            }
            Op::List => self.list(version, params, who).await.map(Reply::Json),
            Op::PushSet | Op::PushGet | Op::PushList | Op::PushDelete => {
                self.push_config(op(version, method)?, version, params, who).await.map(Reply::Json)
            }
            Op::ExtendedCard => {
                // Offered when the hub asks for credentials, to a caller that gave one.
                if !crate::auth::guarded(&self.engine, &self.options) {
                    return Err(RpcError::extended_card_not_configured());
                }
                if who.screen.is_some() {
                    return Err(RpcError::new(
                        -32600,
                        "PERMISSION_DENIED",
                        "the extended card is for callers with a credential",
                    ));
                }
                Ok(Reply::Json(crate::card::card(&self.engine, base, true, true, version)))
            }
        }
    }

    /// The four push notification config operations, both versions' shapes: 1.0 names the task
    /// `taskId` and the config `id`; 0.3 names the task `id` (or `taskId` in `set`) and the config
    /// `pushNotificationConfigId`.
    async fn push_config(
        &self,
        op: Op,
        version: Version,
        params: &Map<String, Value>,
        who: &Who,
    ) -> Result<Value, RpcError> {
        let text = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| params.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned))
        };
        let task = match (version, op) {
            (Version::V10, _) | (Version::V03, Op::PushSet) => text(&["taskId", "task_id"]),
            (Version::V03, _) => text(&["id"]),
        }
        .ok_or_else(|| RpcError::invalid_params("taskId: required, the task's id"))?;
        // Who may see the task may set its webhooks; to anyone else it does not exist, and an
        // unknown task's webhooks are not found, even to delete.
        visible(&self.engine, who, &task).await?;
        let shown = self.task(&task, Some(0)).await?;
        let config_id = || match version {
            Version::V10 => text(&["id"]),
            Version::V03 => text(&["pushNotificationConfigId", "push_notification_config_id"]),
        };
        match op {
            Op::PushSet => {
                let config =
                    crate::push::read(self, &task, params, version, (shown.state, shown.artifacts.len())).await?;
                crate::push::save(self, &config).await?;
                Ok(config.json(version))
            }
            Op::PushGet => {
                let found = match config_id() {
                    Some(id) => crate::push::get(self, &task, &id).await?,
                    // 0.3 may leave it out: the task's only (first) config.
                    None if version == Version::V03 => crate::push::list(self, &task).await?.into_iter().next(),
                    None => return Err(RpcError::invalid_params("id: required, the config's id")),
                };
                let config = found.ok_or_else(|| RpcError::task_not_found(&format!("{task} (push config)")))?;
                Ok(config.json(version))
            }
            Op::PushList => {
                let configs: Vec<Value> =
                    crate::push::list(self, &task).await?.iter().map(|c| c.json(version)).collect();
                Ok(match version {
                    Version::V10 => json!({"configs": configs}),
                    Version::V03 => Value::Array(configs),
                })
            }
            _ => {
                let id = config_id().ok_or_else(|| RpcError::invalid_params("id: required, the config's id"))?;
                crate::push::delete(self, &task, &id).await?;
                Ok(match version {
                    Version::V10 => json!({}),
                    Version::V03 => Value::Null,
                })
            }
        }
    }

    /// `SendMessage` / `message/send`: a new task for the message, routed by the skill it names;
    /// answered at once or, when the client blocks, once the task has ended (or the wait is over).
    async fn send(&self, version: Version, params: &Map<String, Value>, who: &Who) -> Result<Value, RpcError> {
        let configuration = params.get("configuration").and_then(Value::as_object);
        let setting = |camel: &str, snake: &str| {
            configuration.and_then(|c| c.get(camel).or_else(|| c.get(snake))).and_then(Value::as_bool)
        };
        let blocking = match version {
            // 1.0: returnImmediately (default false) means "do not wait".
            Version::V10 => !setting("returnImmediately", "return_immediately").unwrap_or(false),
            // 0.3: blocking, unless it is false (the reference SDK's server blocks by default, and
            // its clients wait for the answer).
            Version::V03 => setting("blocking", "blocking").unwrap_or(true),
        };
        let history = history_length(params)?;
        // Listening before it is stored: the end cannot slip by unseen.
        let message = message_of(params)?;
        // A new task's every event comes through the subscription, so it is shown from them, without
        // reading the log; a task the message continues began before it.
        let new_task = message.task_id.is_none();
        let task = message.task_id.clone().unwrap_or_else(|| id::generate(Kind::Task));
        let mut events = if blocking {
            let filter = Filter { task_id: Some(task.clone()), ..Filter::default() };
            Some(self.log.subscribe(filter, None).await.map_err(|e| RpcError::internal(e.to_string()))?)
        } else {
            None
        };
        self.store(version, params, message, who, &task).await?;
        let mut ended = None;
        // The task's events as the subscription brought them, while it brought every one.
        let mut seen: Option<Vec<Envelope>> = new_task.then(Vec::new);
        if let Some(events) = &mut events {
            // Until it ends, or stops for the client (input or authentication needed). Every change
            // comes as an event on the task (subscribed before it was stored), so the task is
            // looked at again only after one that can end or stop it: not its request, routing or
            // accept.
            let deadline = Instant::now() + self.options.blocking_wait;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, events.next()).await {
                    Ok(Ok(event)) => {
                        let message = event.message().ok();
                        let moves = !message.as_ref().is_some_and(|m| {
                            matches!(
                                m.kind,
                                MessageType::TaskRequest | MessageType::TaskAccept | MessageType::RoutingDecision
                            )
                        });
                        match (&mut seen, message) {
                            (Some(seen), Some(m)) => seen.push(m),
                            (s, _) => *s = None,
                        }
                        if moves {
                            let now = match &seen {
                                Some(seen) => self.task_from(&task, seen, history).await?,
                                None => self.task(&task, history).await?,
                            };
                            if now.state.ends_stream() {
                                ended = Some(now);
                                break;
                            }
                        }
                    }
                    Ok(Err(_)) | Err(_) => {
                        seen = None;
                        break;
                    }
                }
            }
        }
        let shown = match ended {
            Some(shown) => shown,
            None => self.task(&task, history).await?,
        };
        // An agent that answered with a message, not a task: the client is answered so.
        if blocking
            && shown.state == A2aState::Completed
            && let Some(reply) = self.message_reply(&task, seen.as_deref(), &shown.context_id).await
        {
            let reply = wire::message_json(&reply, version);
            return Ok(match version {
                Version::V10 => json!({"message": reply}),
                Version::V03 => reply,
            });
        }
        let shown = wire::task_json(&shown, version);
        Ok(match version {
            Version::V10 => json!({"task": shown}),
            Version::V03 => shown,
        })
    }

    /// The message the agent of `task` answered with instead of a task: its result's
    /// `a2a.message` (an A2A message), said in context `context`. Its end is read from the log,
    /// unless `seen` holds the task's events.
    async fn message_reply(&self, task: &str, seen: Option<&[Envelope]>, context: &str) -> Option<wire::Message> {
        let (kind, payload) = match seen {
            Some(seen) => {
                seen.iter().rev().find(|m| ends_task(m.kind)).map(|m| (m.kind, Value::Object(m.payload.clone())))?
            }
            None => self.engine.task_end(task).await.ok()?.map(|end| (end.kind, end.payload))?,
        };
        if kind != MessageType::TaskResult {
            return None;
        }
        let mut reply = wire::read_message(payload.get(PAYLOAD_KEY)?.get("message")?).ok()?;
        reply.role = Role::Agent;
        reply.context_id = Some(context.to_owned());
        reply.task_id = None;
        Some(reply)
    }

    /// Stores the message: a new task `task` (a `task.request` to the orchestrator), or, when it
    /// names its task, a `chat.message` to the agent working it (an answer to its question).
    async fn store(
        &self,
        version: Version,
        params: &Map<String, Value>,
        mut message: wire::Message,
        who: &Who,
        task: &str,
    ) -> Result<(), RpcError> {
        if message.task_id.is_some() {
            return self.answer(message, who, task).await;
        }
        let skill = [message.metadata.as_ref(), params.get("metadata").and_then(Value::as_object)]
            .into_iter()
            .flatten()
            .find_map(|m| m.get("skill").and_then(Value::as_str).map(str::to_owned));
        let from = who.from.clone();
        // A screened caller's message goes to the screening skill; a partner's only to its skills.
        let asked = skill.clone();
        let skill = match (&who.screen, &who.skills) {
            (Some(screen), _) => Some(screen.clone()),
            (None, Some(allowed)) => match &skill {
                Some(s) if allowed.contains(s) => skill,
                _ => {
                    return Err(RpcError::new(
                        -32600,
                        "PERMISSION_DENIED",
                        format!(
                            "this key may ask for {}: name one as the message's metadata.skill",
                            allowed.join(", ")
                        ),
                    ));
                }
            },
            (None, None) => skill,
        };

        // Ids: the task's is Clutch's; a context that is a Clutch thread continues it, any other
        // is kept beside a new thread.
        let thread = match &message.context_id {
            Some(c) if id::check(Kind::Thread, c).is_ok() => c.clone(),
            _ => id::generate(Kind::Thread),
        };
        let context = message.context_id.clone().unwrap_or_else(|| thread.clone());
        message.context_id = Some(context.clone());
        message.task_id = Some(task.to_owned());
        let mut payload = Map::new();
        payload.insert("goal".into(), json!(wire::text_of(&message.parts)));
        payload.insert(
            PAYLOAD_KEY.into(),
            json!({"message": wire::message_json(&message, Version::V10), "context_id": context, "version": version.as_str(), "asked_skill": asked}),
        );
        let run = id::generate(Kind::Run);
        let mut request = Envelope::new(MessageType::TaskRequest, &from, (&run, &thread, task), payload);
        request.to = vec![Recipient { agent_id: ORCHESTRATOR.into() }];
        request.requires = skill.into_iter().collect();
        // A hub sending for one of its tasks says its trace: one trace on both.
        let trace = [message.metadata.as_ref(), params.get("metadata").and_then(Value::as_object)]
            .into_iter()
            .flatten()
            .find_map(|m| m.get("clutch").and_then(|c| c.get("trace_id")).and_then(Value::as_str));
        if let Some(trace) = trace.filter(|t| !t.is_empty() && t.len() <= 128) {
            request.trace =
                Some(clutch_proto::message::Trace { trace_id: trace.to_owned(), span_id: None, parent_span_id: None });
        }
        let raw = serde_json::to_value(&request).map_err(|e| RpcError::internal(e.to_string()))?;
        let request =
            clutch_proto::validate::message(&raw, &clutch_proto::validate::Defaults { now: SystemTime::now() })
                .map_err(|p| RpcError::invalid_params(p.to_string()))?;

        // A webhook the client names with its message: checked before the task is stored, saved
        // once it is (from the log position before it, so no change escapes it).
        let configuration = params.get("configuration").and_then(Value::as_object);
        let webhook = [
            "taskPushNotificationConfig",
            "task_push_notification_config",
            "pushNotificationConfig",
            "push_notification_config",
        ]
        .iter()
        .find_map(|k| configuration.and_then(|c| c.get(*k)).and_then(Value::as_object));
        let webhook = match webhook {
            Some(config) => Some(crate::push::read(self, task, config, version, (A2aState::Submitted, 0)).await?),
            None => None,
        };
        match self.engine.submit(vec![request]).await.map_err(|e| RpcError::internal(e.to_string()))?.pop() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(RpcError::invalid_params(e.to_string())),
            None => return Err(RpcError::internal("the message went unanswered")),
        }
        match webhook {
            Some(config) => crate::push::save(self, &config).await,
            None => Ok(()),
        }
    }

    /// The client's message to the agent working `task`: what it asked for, or more to go on.
    async fn answer(&self, mut message: wire::Message, who: &Who, task: &str) -> Result<(), RpcError> {
        visible(&self.engine, who, task).await?;
        let shown = self.task(task, Some(0)).await?;
        if shown.state.is_terminal() {
            return Err(RpcError::unsupported(format!("task {task} has ended: send a new message without its taskId")));
        }
        let view = self.engine.task(task).ok_or_else(|| RpcError::task_not_found(task))?;
        let from = who.from.clone();
        message.context_id = Some(shown.context_id.clone());
        let mut payload = Map::new();
        payload.insert("text".into(), json!(wire::text_of(&message.parts)));
        payload.insert(PAYLOAD_KEY.into(), json!({"message": wire::message_json(&message, Version::V10)}));
        let mut m = Envelope::new(MessageType::ChatMessage, &from, (&view.run_id, &view.thread_id, task), payload);
        m.parent_task_id = view.parent_task_id.clone();
        m.to = view.agent.iter().map(|a| Recipient { agent_id: a.clone() }).collect();
        let raw = serde_json::to_value(&m).map_err(|e| RpcError::internal(e.to_string()))?;
        let m = clutch_proto::validate::message(&raw, &clutch_proto::validate::Defaults { now: SystemTime::now() })
            .map_err(|p| RpcError::invalid_params(p.to_string()))?;
        match self.engine.submit(vec![m]).await.map_err(|e| RpcError::internal(e.to_string()))?.pop() {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(RpcError::invalid_params(e.to_string())),
            None => Err(RpcError::internal("the message went unanswered")),
        }
    }

    /// `ListTasks`: the tasks A2A messages started, most recently changed first, by context and
    /// state, a page at a time (`pageToken` is where the last page ended, stable as tasks come).
    async fn list(&self, version: Version, params: &Map<String, Value>, who: &Who) -> Result<Value, RpcError> {
        let text = |camel: &str, snake: &str| params.get(camel).or_else(|| params.get(snake)).and_then(Value::as_str);
        let number = |camel: &str, snake: &str| params.get(camel).or_else(|| params.get(snake)).and_then(Value::as_u64);
        let context = text("contextId", "context_id").filter(|c| !c.is_empty()).map(str::to_owned);
        let state = match params.get("status") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "TASK_STATE_UNSPECIFIED" || s.is_empty() => None,
            Some(Value::Number(n)) if n.as_u64() == Some(0) => None,
            Some(v) => Some(
                wire::read_state(v)
                    .ok_or_else(|| RpcError::invalid_params(format!("status: `{v}` is not a task state")))?,
            ),
        };
        let size = number("pageSize", "page_size").unwrap_or(50);
        if !(1..=100).contains(&size) {
            return Err(RpcError::invalid_params("pageSize: from 1 to 100"));
        }
        let after: Option<(i64, String)> = match text("pageToken", "page_token").filter(|t| !t.is_empty()) {
            Some(token) => Some(
                token
                    .split_once('.')
                    .and_then(|(ms, id)| Some((ms.parse().ok()?, id.to_owned())))
                    .ok_or_else(|| RpcError::invalid_params("pageToken: not one this hub gave"))?,
            ),
            None => None,
        };
        let history = history_length(params)?;
        let artifacts = params
            .get("includeArtifacts")
            .or_else(|| params.get("include_artifacts"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let started = self.engine.tasks_requested(|request| {
            let Some(origin) = request.payload.get(PAYLOAD_KEY) else { return false };
            if !who.sees_all && request.from.agent_id != who.from {
                return false;
            }
            context.as_deref().is_none_or(|c| origin.get("context_id").and_then(Value::as_str) == Some(c))
        });
        let mut shown = Vec::new();
        let mut total = 0;
        let mut next = String::new();
        for (ms, view) in started {
            let task = self.task(&view.task_id, history).await?;
            if state.is_some_and(|s| s != task.state) {
                continue;
            }
            total += 1;
            let past = after.as_ref().is_none_or(|(t, id)| (ms, &view.task_id) < (*t, id));
            if !past {
                continue;
            }
            if shown.len() == size as usize {
                if next.is_empty() {
                    let (last_ms, last_id): &(i64, String) = shown.last().map(|(k, _)| k).expect("a full page");
                    next = format!("{last_ms}.{last_id}");
                }
                continue;
            }
            let mut task = task;
            if !artifacts {
                task.artifacts.clear();
            }
            shown.push(((ms, view.task_id.clone()), wire::task_json(&task, version)));
        }
        let tasks: Vec<Value> = shown.into_iter().map(|(_, t)| t).collect();
        Ok(json!({"tasks": tasks, "nextPageToken": next, "pageSize": size, "totalSize": total}))
    }

    /// `CancelTask` / `tasks/cancel`: the caller's cancel of a task it asked for.
    async fn cancel(&self, version: Version, params: &Map<String, Value>, who: &Who) -> Result<Value, RpcError> {
        let id = task_id(params)?;
        visible(&self.engine, who, &id).await?;
        let shown = self.task(&id, None).await?;
        if shown.state.is_terminal() {
            return Err(RpcError::not_cancelable(format!("task {id} has ended")));
        }
        let from = if who.sees_all {
            requester_of(&self.engine, &id).await.unwrap_or_else(|| who.from.clone())
        } else {
            who.from.clone()
        };
        self.engine.task_cancel(&from, &id, "cancelled by its A2A client").await.map_err(|e| {
            if e.code() == clutch_proto::ErrorCode::InvalidTransition {
                RpcError::not_cancelable(e.to_string())
            } else {
                RpcError::invalid_params(e.to_string())
            }
        })?;
        Ok(wire::task_json(&self.task(&id, None).await?, version))
    }

    /// The A2A task of Clutch task `id`: only a task an A2A message started is one. Read from its
    /// events: its state (waiting for input while the agent's last progress asks for it and no reply
    /// came since), the A2A messages exchanged (its history), and the message that ended it.
    pub(crate) async fn task(&self, id: &str, history: Option<usize>) -> Result<wire::Task, RpcError> {
        let filter = Filter { task_id: Some(id.to_owned()), ..Filter::default() };
        let mut events = Vec::new();
        let mut after = 0;
        loop {
            let page = self.log.read(&filter, after, 1000).await.map_err(|e| RpcError::internal(e.to_string()))?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            let full = page.len() == 1000;
            events.extend(page.iter().filter_map(|e| e.message().ok()));
            if !full {
                break;
            }
        }
        self.task_from(id, &events, history).await
    }

    /// The A2A task of Clutch task `id` from `events`, all of its events the log shows, in order.
    async fn task_from(&self, id: &str, events: &[Envelope], history: Option<usize>) -> Result<wire::Task, RpcError> {
        let view = self
            .engine
            .find_task(id)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?
            .ok_or_else(|| RpcError::task_not_found(id))?;
        let request = events
            .iter()
            .find(|m| m.kind == MessageType::TaskRequest && m.from.agent_id != ORCHESTRATOR)
            .ok_or_else(|| RpcError::task_not_found(id))?;
        let origin =
            request.payload.get(PAYLOAD_KEY).and_then(Value::as_object).ok_or_else(|| RpcError::task_not_found(id))?;
        let context = origin.get("context_id").and_then(Value::as_str).unwrap_or(&view.thread_id).to_owned();
        let agent_says = |message_id: &str, text: String| wire::Message {
            message_id: message_id.to_owned(),
            role: Role::Agent,
            parts: vec![Part::Text(text)],
            context_id: Some(context.clone()),
            task_id: Some(id.to_owned()),
            metadata: None,
        };
        let mut exchanged: Vec<wire::Message> =
            origin.get("message").and_then(|m| wire::read_message(m).ok()).into_iter().collect();
        let mut waiting: Option<(A2aState, wire::Message)> = None;
        let mut end: Option<&Envelope> = None;
        for m in events {
            match m.kind {
                MessageType::ChatMessage => {
                    if let Some(reply) = m
                        .payload
                        .get(PAYLOAD_KEY)
                        .and_then(|a| a.get("message"))
                        .and_then(|m| wire::read_message(m).ok())
                    {
                        exchanged.push(reply);
                        waiting = None;
                    }
                }
                MessageType::TaskProgress if Some(&m.from.agent_id) == view.agent.as_ref() => {
                    let asks = [("input_required", A2aState::InputRequired), ("auth_required", A2aState::AuthRequired)]
                        .into_iter()
                        .find_map(|(key, state)| m.payload.get(key).map(|ask| (state, ask)));
                    waiting = asks.map(|(state, ask)| {
                        let text = ask
                            .get("prompt")
                            .or_else(|| m.payload.get("message"))
                            .and_then(Value::as_str)
                            .unwrap_or("the agent needs more from you")
                            .to_owned();
                        let said = agent_says(&m.id, text);
                        exchanged.push(said.clone());
                        (state, said)
                    });
                }
                kind if ends_task(kind) => end = Some(m),
                _ => {}
            }
        }
        let mut state = match view.state {
            TaskState::Requested | TaskState::Queued | TaskState::Routed | TaskState::Planning | TaskState::Pending => {
                A2aState::Submitted
            }
            TaskState::Accepted
            | TaskState::Running
            | TaskState::Retrying
            | TaskState::Claimed
            | TaskState::InProgress
            | TaskState::Blocked => A2aState::Working,
            TaskState::Completed => A2aState::Completed,
            TaskState::Failed | TaskState::TimedOut => A2aState::Failed,
            TaskState::Cancelled => A2aState::Canceled,
        };
        // The engine applies an event when it is committed, the log shows it once it is durable: an
        // end not visible yet is not told yet (its event comes next, to subscribers too).
        if state.is_terminal() && end.is_none() {
            state = A2aState::Working;
        }
        let timestamp =
            events.last().map(|m| m.ts.clone()).unwrap_or_else(|| clutch_proto::validate::format_ts(SystemTime::now()));
        let (mut artifacts, mut status_message) = (Vec::new(), None);
        if !state.is_terminal() {
            if let Some((asked, said)) = waiting {
                state = asked;
                status_message = Some(said);
            }
        } else if let Some(end) = end.filter(|_| state.is_terminal()) {
            match end.kind {
                MessageType::TaskResult => {
                    // The A2A artifacts the agent gave (a remote agent's, as it sent them), else
                    // the result itself: its text, or its fields as data.
                    let given = end.payload.get(PAYLOAD_KEY).and_then(|a| a.get("artifacts")).and_then(Value::as_array);
                    artifacts = given
                        .into_iter()
                        .flatten()
                        .enumerate()
                        .filter_map(|(i, a)| wire::read_artifact(a, &format!("{id}-result-{i}")).ok())
                        .collect();
                    if artifacts.is_empty() {
                        let part = match end.payload.get("text").and_then(Value::as_str) {
                            Some(text) => Part::Text(text.to_owned()),
                            None => Part::Data(Value::Object(end.payload.clone())),
                        };
                        artifacts.push(Artifact {
                            artifact_id: format!("{id}-result"),
                            name: Some("result".into()),
                            parts: vec![part],
                        });
                    }
                }
                _ => {
                    let p = &end.payload;
                    let why =
                        p.get("message").or_else(|| p.get("reason")).and_then(Value::as_str).unwrap_or("it ended");
                    let text = match p.get("code").and_then(Value::as_str) {
                        Some(code) => format!("{code}: {why}"),
                        None => why.to_owned(),
                    };
                    status_message = Some(agent_says(&format!("{id}-status"), text));
                }
            }
        }
        let keep = history.unwrap_or(usize::MAX).min(exchanged.len());
        let shown_history = exchanged.split_off(exchanged.len() - keep);
        // Named as A2A's JSON names its fields (camelCase).
        let mut metadata = Map::new();
        metadata.insert(
            "clutch".into(),
            json!({"state": view.state.as_str(), "agent": view.agent, "runId": view.run_id, "threadId": view.thread_id}),
        );
        Ok(wire::Task {
            id: id.to_owned(),
            context_id: context,
            state,
            timestamp,
            status_message,
            artifacts,
            history: shown_history,
            metadata,
        })
    }
}

/// The request's message, a client's.
fn message_of(params: &Map<String, Value>) -> Result<wire::Message, RpcError> {
    let message = params.get("message").ok_or_else(|| RpcError::invalid_params("message: required"))?;
    let message = wire::read_message(message).map_err(RpcError::invalid_params)?;
    if message.role != Role::User {
        return Err(RpcError::invalid_params("message.role: a client's message is ROLE_USER"));
    }
    Ok(message)
}

/// Who asked for task `id`.
async fn requester_of(engine: &Engine, id: &str) -> Option<String> {
    engine.find_task(id).await.ok().flatten().and_then(|t| t.requester)
}

/// Task `id` as `who` may see it: its own (or any, for an admin); else it is not found.
async fn visible(engine: &Engine, who: &Who, id: &str) -> Result<(), RpcError> {
    if who.sees_all || requester_of(engine, id).await.as_deref() == Some(who.from.as_str()) {
        Ok(())
    } else {
        Err(RpcError::task_not_found(id))
    }
}

fn task_id(params: &Map<String, Value>) -> Result<String, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| RpcError::invalid_params("id: required, the task's id"))
}

/// The `historyLength` asked for (of the params, or of their `configuration`, as a send names it):
/// none, or how many of the newest messages to show. Anything but a whole number, 0 or more (ProtoJSON
/// may write it as a string), is refused, naming the field: a negative one is no length.
fn history_length(params: &Map<String, Value>) -> Result<Option<usize>, RpcError> {
    let keys = ["historyLength", "history_length"];
    let configuration = params.get("configuration").and_then(Value::as_object);
    let found = keys
        .iter()
        .find_map(|k| params.get(*k).map(|v| ((*k).to_owned(), v)))
        .or_else(|| keys.iter().find_map(|k| configuration?.get(*k).map(|v| (format!("configuration.{k}"), v))));
    let Some((field, value)) = found else { return Ok(None) };
    let n = match value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.map(|n| Some(n as usize)).ok_or_else(|| {
        let got = clutch_proto::error::quote(&value.to_string()).into_owned();
        RpcError::invalid_params(format!("{field}: a whole number, 0 or more, of messages to show (got `{got}`)"))
    })
}
