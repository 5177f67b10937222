//! The A2A methods, run alike for both bindings (JSON-RPC and HTTP+JSON): each version's names (1.0
//! PascalCase or 0.3 slash names, each only in its version), and the mapping onto Clutch: an A2A
//! message is a `task.request` to the orchestrator (`requires` the skill its metadata names), its
//! task is the Clutch task of the same id, its context the task's thread.

use std::time::{Instant, SystemTime};

use clutch_core::Engine;
use clutch_core::tasks::{ORCHESTRATOR, ends_task};
use clutch_proto::id::{self, Kind};
use clutch_proto::message::Recipient;
use clutch_proto::{Message as Envelope, MessageType};
use clutch_store::Filter;
use serde_json::{Map, Value, json};

use crate::auth::Who;
use crate::hub::Hub;
use crate::task::PAYLOAD_KEY;
use crate::wire::{self, Role, RpcError, State as A2aState, Version};

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

impl Hub {
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
}

/// The request's message, a client's.
fn message_of(params: &Map<String, Value>) -> Result<wire::Message, RpcError> {
    let message = params.get("message").ok_or_else(|| RpcError::invalid_params("message: required"))?;
    let message = wire::read_message(message).map_err(|e| RpcError::invalid_params(e.to_string()))?;
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
