//! A2A tasks read back from Clutch: the A2A task a Clutch task stands for (from its events: its
//! state, the messages exchanged, its artifacts and the message that ended it), and what changed in
//! one since a client was last told, as the events a stream or a push notification tells.

use std::time::SystemTime;

use clutch_core::tasks::{ORCHESTRATOR, ends_task};
use clutch_core::view::TaskState;
use clutch_proto::{Message as Envelope, MessageType};
use clutch_store::Filter;
use serde_json::{Map, Value, json};

use crate::hub::Hub;
use crate::wire::{self, Artifact, Part, Role, RpcError, State as A2aState, Version};

/// Where the A2A message a task came from is kept in its request's payload.
pub(crate) const PAYLOAD_KEY: &str = "a2a";

impl Hub {
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
    pub(crate) async fn task_from(
        &self,
        id: &str,
        events: &[Envelope],
        history: Option<usize>,
    ) -> Result<wire::Task, RpcError> {
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
