//! Remote A2A agents as Clutch agents: an agent whose card names `endpoints.a2a.url` gets its inbox
//! through core's push delivery with this transport. A task given to it is sent there as an A2A
//! message (`SendMessage`, returning at once), its remote task id kept in the agent's `task.accept`;
//! a follower then reads the remote task until it ends and writes what it says back as the agent's
//! own `task.progress`, `task.result` or `task.error`; a cancel crosses as `CancelTask`. Another
//! Clutch hub is such an agent, so two hubs federate. Every request goes through the outbound guard.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clutch_core::push::{Delivery, Target, Transport};
use clutch_core::{Engine, Handle};
use clutch_proto::message::Recipient;
use clutch_proto::{Message, MessageType};
use clutch_store::{Event, Filter};
use serde_json::{Map, Value, json};

use crate::wire::Version;

/// The card's endpoint this transport serves.
pub const PROTOCOL: &str = "a2a";
/// Where the remote task's id is kept in the agent's `task.accept`.
const REMOTE: &str = "a2a";

/// Why a call to a remote A2A agent has no result.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The outbound guard refuses the URL, or cannot use it.
    #[error("{0}")]
    Request(clutch_outbound::Error),
    #[error("{0}")]
    Send(reqwest::Error),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("not JSON-RPC: {0}")]
    NotJson(reqwest::Error),
    /// The remote agent answered with a JSON-RPC error.
    #[error("A2A error {code}: {message}")]
    Refused { code: Value, message: String },
    #[error("neither a result nor an error")]
    Empty,
}

impl Error {
    /// Whether the call is worth making again: the remote agent did not refuse it (its HTTP status
    /// says it was busy or failing, if any).
    fn retryable(&self) -> bool {
        match self {
            Error::Request(_) | Error::Send(_) | Error::NotJson(_) => true,
            Error::Status(status) => (500..600).contains(status) || matches!(status, 408 | 429),
            Error::Refused { .. } | Error::Empty => false,
        }
    }
}

/// Delivers to remote A2A agents and follows the tasks it gives them.
pub struct Remote {
    client: clutch_outbound::Client,
    log: Handle,
    engine: Engine,
    /// How often a remote task is read while it works.
    poll: Duration,
    /// The followers running, by Clutch task id.
    following: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// The version each endpoint speaks: the agent card's `meta.a2a_version` when the operator pins
    /// it, else what the remote's card offers (1.0 JSON-RPC when it can, else 0.3), else 1.0.
    versions: Mutex<HashMap<String, Version>>,
}

impl Remote {
    pub fn new(log: Handle, engine: Engine, poll: Duration) -> Result<Arc<Remote>, clutch_outbound::Error> {
        let guard = engine.options().outbound.clone();
        let options = clutch_outbound::Options { timeout: Duration::from_secs(30), ..Default::default() };
        let client = clutch_outbound::Client::new(guard, &options)?;
        Ok(Arc::new(Remote {
            client,
            log,
            engine,
            poll,
            following: Mutex::new(HashMap::new()),
            versions: Mutex::new(HashMap::new()),
        }))
    }

    /// Follows again the tasks remote agents were working when the daemon stopped.
    pub async fn resume(self: &Arc<Self>) {
        for (agent, url, _) in self.engine.push_targets(PROTOCOL) {
            self.learn(&agent, &url).await;
            for task in self.engine.open_tasks_of(&agent) {
                if let Some(remote) = self.remote_id(&task, &agent).await {
                    self.follow(task, agent.clone(), url.clone(), remote);
                }
            }
        }
    }

    /// Heartbeats each remote agent while its A2A agent answers (its card, at its endpoint's origin,
    /// reads), so that a live remote stays online for the router and a gone one goes stale, then
    /// offline, its tasks routed again, as any silent agent's; until `stop` is set.
    pub async fn keep_alive(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let every = (self.engine.options().heartbeat_interval / 2).max(Duration::from_millis(50));
        loop {
            for (agent, url, _) in self.engine.push_targets(PROTOCOL) {
                if self.learn(&agent, &url).await {
                    let _ = self.engine.heartbeat(&agent).await;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Whether the A2A agent at endpoint `url` answers (its card reads at its origin's well-known
    /// path), learning on the way which version to speak to it (see `versions`).
    async fn learn(&self, agent: &str, url: &str) -> bool {
        let pinned = self
            .engine
            .agent(agent)
            .and_then(|a| a.card.meta.get("a2a_version").and_then(Value::as_str).and_then(|v| Version::parse(Some(v))));
        let Ok(parsed) = reqwest::Url::parse(url) else { return false };
        let at = format!("{}/.well-known/agent-card.json", parsed.origin().ascii_serialization());
        let Ok(request) = self.client.request(reqwest::Method::GET, &at) else { return false };
        // As a 1.0 client (an agent that speaks only 0.3 ignores it and answers its 0.3 card).
        let card: Option<Value> = match request.header("A2A-Version", "1.0").send().await {
            Ok(r) if r.status().is_success() => r.json().await.ok(),
            _ => None,
        };
        let offered = card.as_ref().map(|c| {
            let speaks_10 = c["supportedInterfaces"].as_array().into_iter().flatten().any(|i| {
                i["protocolBinding"] == "JSONRPC" && i["protocolVersion"].as_str().is_some_and(|v| v.starts_with("1."))
            });
            if speaks_10 { Version::V10 } else { Version::V03 }
        });
        if let Some(version) = pinned.or(offered) {
            self.versions.lock().unwrap_or_else(|e| e.into_inner()).insert(url.to_owned(), version);
        }
        card.is_some()
    }

    fn version(&self, url: &str) -> Version {
        self.versions.lock().unwrap_or_else(|e| e.into_inner()).get(url).copied().unwrap_or(Version::V10)
    }

    /// Stops the followers (they resume from the log after a restart).
    pub fn stop(&self) {
        for (_, follower) in self.following.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            follower.abort();
        }
    }

    /// The trace the first request of `task` carries, if any.
    async fn trace_of(&self, task: &str) -> Option<String> {
        let filter =
            Filter { task_id: Some(task.to_owned()), kind: Some(MessageType::TaskRequest), ..Filter::default() };
        let first = self.log.read(&filter, 0, 1).await.ok()?;
        first.first()?.message().ok()?.trace.map(|t| t.trace_id)
    }

    /// The remote task id `agent`'s accept of `task` recorded, if any.
    async fn remote_id(&self, task: &str, agent: &str) -> Option<String> {
        let filter = Filter {
            task_id: Some(task.to_owned()),
            agent_id: Some(agent.to_owned()),
            kind: Some(MessageType::TaskAccept),
            ..Filter::default()
        };
        let events = self.log.read(&filter, 0, 100).await.ok()?;
        events.iter().rev().filter_map(|e| e.message().ok()).find_map(|m| {
            m.payload.get(REMOTE).and_then(|a| a.get("task_id")).and_then(Value::as_str).map(str::to_owned)
        })
    }

    fn follow(self: &Arc<Self>, task: String, agent: String, url: String, remote: String) {
        let mut following = self.following.lock().unwrap_or_else(|e| e.into_inner());
        following.retain(|_, f| !f.is_finished());
        if following.contains_key(&task) {
            return;
        }
        let me = self.clone();
        let key = task.clone();
        following.insert(key, tokio::spawn(async move { me.follower(task, agent, url, remote).await }));
    }

    /// One JSON-RPC call to `url`, written as 1.0 (`method`, params, result) and spoken in the
    /// version the endpoint speaks: its result, or why not.
    async fn call(&self, url: &str, method: &str, params: Value) -> Result<Value, Error> {
        let version = self.version(url);
        let (method, params) = match version {
            Version::V10 => (method, params),
            Version::V03 => to_v03(method, params),
        };
        let request = self.client.post(url).map_err(Error::Request)?;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = request
            .header("A2A-Version", version.as_str())
            .json(&body)
            .send()
            .await
            .map_err(|e| Error::Send(e.without_url()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(Error::Status(status.as_u16()));
        }
        let answer: Value = response.json().await.map_err(Error::NotJson)?;
        match (answer.get("result"), answer.get("error")) {
            (Some(result), None) if version == Version::V03 => Ok(from_v03(method, result.clone())),
            (Some(result), None) => Ok(result.clone()),
            (_, Some(e)) => {
                Err(Error::Refused { code: e["code"].clone(), message: e["message"].as_str().unwrap_or("").to_owned() })
            }
            _ => Err(Error::Empty),
        }
    }

    /// Writes `kind` about `task` as `agent`, to the task's requester, under the task's trace (the
    /// one its request carries, else the task's id: the remote hub records the same).
    async fn write(&self, agent: &str, task: &str, kind: MessageType, payload: Value) -> bool {
        let Some(view) = self.engine.task(task) else { return false };
        let payload = match payload {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let mut m = Message::new(kind, agent, (&view.run_id, &view.thread_id, task), payload);
        let trace = self.trace_of(task).await.unwrap_or_else(|| task.to_owned());
        m.trace = Some(clutch_proto::message::Trace { trace_id: trace, span_id: None, parent_span_id: None });
        m.parent_task_id = view.parent_task_id.clone();
        m.to = view.requester.iter().map(|r| Recipient { agent_id: r.clone() }).collect();
        match self.log.append_one(m).await {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(task_id = %task, agent_id = %agent, error = %e, "a remote agent's news was not taken");
                false
            }
        }
    }

    async fn deliver_request(self: Arc<Self>, target: &Target, request: &Message) -> Delivery {
        let agent = &target.name;
        if self.engine.task(&request.task_id).is_none_or(|t| t.state.is_final() || t.agent.as_deref() != Some(agent)) {
            return Delivery::Taken;
        }
        // Which version to speak, if not known yet (the remote's card, or the operator's pin).
        if !self.versions.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&target.url) {
            self.learn(agent, &target.url).await;
        }
        // Sent before (a redelivery after a restart): follow it rather than send it twice.
        if let Some(remote) = self.remote_id(&request.task_id, agent).await {
            self.follow(request.task_id.clone(), agent.clone(), target.url.clone(), remote);
            return Delivery::Taken;
        }
        let goal = request.payload.get("goal").and_then(Value::as_str).map(str::to_owned);
        let mut parts =
            vec![json!({"text": goal.unwrap_or_else(|| Value::Object(request.payload.clone()).to_string())})];
        // More than what to do (and the skill, said in the metadata): the payload whole, as data.
        if request.payload.keys().any(|k| k != "goal" && k != "skill") {
            parts.push(json!({"data": Value::Object(request.payload.clone())}));
        }
        // One trace on both hubs: the request's, or the task's id.
        let trace = request.trace.as_ref().map_or(request.task_id.as_str(), |t| t.trace_id.as_str());
        let mut metadata = json!({"clutch": {"task_id": request.task_id, "run_id": request.run_id,
                                             "from": request.from.agent_id, "trace_id": trace}});
        // The skill asked for: the request's own (a send by URL), else the one it was routed by.
        let skill =
            request.payload.get("skill").and_then(Value::as_str).or(request.requires.first().map(String::as_str));
        if let Some(skill) = skill {
            metadata["skill"] = json!(skill);
        }
        let message = json!({
            "messageId": request.id, "role": "ROLE_USER", "parts": parts,
            "contextId": request.thread_id, "metadata": metadata,
        });
        let params = json!({"message": message, "configuration": {"returnImmediately": true}});
        match self.call(&target.url, "SendMessage", params).await {
            Ok(result) => {
                let remote = result.pointer("/task/id").and_then(Value::as_str).map(str::to_owned);
                let Some(remote) = remote else {
                    let text = result.pointer("/message/parts/0/text").and_then(Value::as_str).unwrap_or_default();
                    // A message, not a task: the answer itself.
                    let accepted = self.write(agent, &request.task_id, MessageType::TaskAccept, json!({})).await;
                    if accepted {
                        self.write(agent, &request.task_id, MessageType::TaskResult, json!({"text": text})).await;
                    }
                    return Delivery::Taken;
                };
                let payload = json!({REMOTE: {"task_id": remote, "url": target.url}});
                self.write(agent, &request.task_id, MessageType::TaskAccept, payload).await;
                self.follow(request.task_id.clone(), agent.clone(), target.url.clone(), remote);
                Delivery::Taken
            }
            Err(e) if e.retryable() => match self.client.post(&target.url) {
                Err(clutch_outbound::Error::Refused(r)) => Delivery::Blocked(r.to_string()),
                _ => Delivery::Failed(e.to_string()),
            },
            Err(e) => {
                // The remote agent refused it: the task fails, saying so.
                let payload = json!({"code": clutch_proto::ErrorCode::A2aRefused.as_str(), "message": e.to_string(), "retryable": false});
                self.write(agent, &request.task_id, MessageType::TaskError, payload).await;
                Delivery::Taken
            }
        }
    }

    /// The text of the last message the remote agent wrote in task `remote`'s history, if any.
    async fn last_agent_message(&self, url: &str, remote: &str) -> Option<String> {
        let got = self.call(url, "GetTask", json!({"id": remote, "historyLength": 20})).await.ok()?;
        let last = got["history"]
            .as_array()?
            .iter()
            .rev()
            .find(|m| matches!(m["role"].as_str(), Some("ROLE_AGENT" | "agent")))?;
        let text: Vec<&str> = last["parts"].as_array()?.iter().filter_map(|p| p["text"].as_str()).collect();
        (!text.is_empty()).then(|| text.join("\n"))
    }

    /// Reads remote task `remote` until it ends, writing what it says as `agent`'s news of `task`.
    async fn follower(self: Arc<Self>, task: String, agent: String, url: String, remote: String) {
        let mut said: Option<String> = None;
        let mut failures = 0u32;
        loop {
            if self.engine.task(&task).is_none_or(|t| t.state.is_final()) {
                // Ended here (a cancel, a timeout): the remote task is cancelled too.
                let _ = self.call(&url, "CancelTask", json!({"id": remote})).await;
                return;
            }
            let got = match self.call(&url, "GetTask", json!({"id": remote, "historyLength": 0})).await {
                Ok(task) => task,
                Err(e) => {
                    failures += 1;
                    if !e.retryable() || failures > 20 {
                        let payload = json!({"code": clutch_proto::ErrorCode::A2aUnreachable.as_str(), "message": e.to_string(), "retryable": true});
                        self.write(&agent, &task, MessageType::TaskError, payload).await;
                        return;
                    }
                    tokio::time::sleep(clutch_core::backoff(self.poll, Duration::from_secs(10), failures, 7)).await;
                    continue;
                }
            };
            failures = 0;
            let state = got.pointer("/status/state").and_then(Value::as_str).unwrap_or_default();
            let message: Option<String> = got
                .pointer("/status/message/parts")
                .and_then(Value::as_array)
                .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"))
                .filter(|t| !t.is_empty());
            match state {
                "TASK_STATE_COMPLETED" => {
                    let texts: Vec<&str> = got["artifacts"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|a| a["parts"].as_array().into_iter().flatten())
                        .filter_map(|p| p["text"].as_str())
                        .collect();
                    let text = match (texts.is_empty(), message) {
                        (false, _) => texts.join("\n"),
                        (true, Some(message)) => message,
                        // No artifact, no status message: some servers (Agent Framework's executor unless
                        // it streams) leave the answer only in the task's history.
                        (true, None) => self.last_agent_message(&url, &remote).await.unwrap_or_default(),
                    };
                    let payload = json!({"text": text, REMOTE: {"task_id": remote, "artifacts": got["artifacts"]}});
                    self.write(&agent, &task, MessageType::TaskResult, payload).await;
                    return;
                }
                "TASK_STATE_FAILED" | "TASK_STATE_REJECTED" | "TASK_STATE_CANCELED" => {
                    let code = match state {
                        "TASK_STATE_REJECTED" => clutch_proto::ErrorCode::A2aRejected.as_str(),
                        "TASK_STATE_CANCELED" => clutch_proto::ErrorCode::A2aCanceled.as_str(),
                        _ => clutch_proto::ErrorCode::A2aFailed.as_str(),
                    };
                    let why = message.unwrap_or_else(|| format!("the remote task ended {state}"));
                    let payload = json!({"code": code, "message": why, "retryable": false});
                    self.write(&agent, &task, MessageType::TaskError, payload).await;
                    return;
                }
                "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => {
                    // The remote agent asks: the question, for whoever asked here to answer (a chat
                    // message to this agent in the task, which crosses back as the task's message).
                    let key = if state == "TASK_STATE_INPUT_REQUIRED" { "input_required" } else { "auth_required" };
                    let asked = format!("{key}:{}", message.clone().unwrap_or_default());
                    if said.as_deref() != Some(asked.as_str()) {
                        let prompt = message.clone().unwrap_or_else(|| "the remote agent needs more".into());
                        let payload = json!({"message": prompt, key: {"prompt": prompt}, REMOTE: {"state": state}});
                        self.write(&agent, &task, MessageType::TaskProgress, payload).await;
                        said = Some(asked);
                    }
                }
                _ => {
                    // Working: its news as progress.
                    if message.is_some() && message != said {
                        let payload = json!({"message": message, REMOTE: {"state": state}});
                        self.write(&agent, &task, MessageType::TaskProgress, payload).await;
                        said = message;
                    }
                }
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// A message to the agent in a task it works remotely (an answer to its question): sent to the
    /// remote task.
    async fn deliver_chat(&self, target: &Target, chat: &Message) -> Delivery {
        if chat.from.agent_id == target.name {
            return Delivery::Taken;
        }
        let Some(remote) = self.remote_id(&chat.task_id, &target.name).await else { return Delivery::Taken };
        let text = chat
            .payload
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| Value::Object(chat.payload.clone()).to_string());
        let message = json!({
            "messageId": chat.id, "role": "ROLE_USER", "taskId": remote, "parts": [{"text": text}],
            "metadata": {"clutch": {"from": chat.from.agent_id}},
        });
        let params = json!({"message": message, "configuration": {"returnImmediately": true}});
        match self.call(&target.url, "SendMessage", params).await {
            Err(e) if e.retryable() => Delivery::Failed(e.to_string()),
            Ok(_) | Err(_) => Delivery::Taken,
        }
    }

    async fn deliver_cancel(&self, target: &Target, cancel: &Message) -> Delivery {
        if let Some(remote) = self.remote_id(&cancel.task_id, &target.name).await {
            // Best effort: the follower also cancels once it sees the task has ended here.
            let _ = self.call(&target.url, "CancelTask", json!({"id": remote})).await;
        }
        Delivery::Taken
    }
}

/// The transport of one `Arc<Remote>` (core's push delivery takes an `Arc<dyn Transport>`).
pub struct Transported(pub Arc<Remote>);

impl Transport for Transported {
    fn protocol(&self) -> &'static str {
        PROTOCOL
    }

    fn deliver<'a>(
        &'a self,
        target: &'a Target,
        event: &'a Event,
    ) -> Pin<Box<dyn Future<Output = Delivery> + Send + 'a>> {
        Box::pin(async move {
            let Ok(message) = event.message() else { return Delivery::Taken };
            match message.kind {
                MessageType::TaskRequest => self.0.clone().deliver_request(target, &message).await,
                MessageType::TaskCancel => self.0.deliver_cancel(target, &message).await,
                MessageType::ChatMessage => self.0.deliver_chat(target, &message).await,
                _ => Delivery::Taken,
            }
        })
    }
}

/// A 1.0 call as 0.3 says it: the method's 0.3 name, messages with `kind`s and lower-case roles,
/// `blocking` for `returnImmediately`.
fn to_v03(method: &str, mut params: Value) -> (&'static str, Value) {
    let method = match method {
        "SendMessage" => "message/send",
        "GetTask" => "tasks/get",
        _ => "tasks/cancel",
    };
    if let Some(m) = params.get_mut("message").and_then(Value::as_object_mut) {
        m.insert("kind".into(), json!("message"));
        m.insert("role".into(), json!("user"));
        for part in m.get_mut("parts").and_then(Value::as_array_mut).into_iter().flatten() {
            let kind = if part.get("text").is_some() { "text" } else { "data" };
            part["kind"] = json!(kind);
        }
    }
    if let Some(c) = params.get_mut("configuration").and_then(Value::as_object_mut) {
        let immediately = c.remove("returnImmediately").and_then(|v| v.as_bool()).unwrap_or(false);
        c.insert("blocking".into(), json!(!immediately));
    }
    (method, params)
}

/// A 0.3 result as 1.0 has it: `message/send`'s bare task (or message) wrapped, states by their 1.0
/// names.
fn from_v03(method: &str, mut result: Value) -> Value {
    fn state(task: &mut Value) {
        if let Some(s) = task.pointer_mut("/status/state")
            && let Some(name) = s.as_str()
        {
            *s = json!(format!("TASK_STATE_{}", name.to_uppercase().replace('-', "_")));
        }
    }
    if method == "message/send" {
        return if result["kind"] == "message" {
            json!({"message": result})
        } else {
            state(&mut result);
            json!({"task": result})
        };
    }
    state(&mut result);
    result
}
