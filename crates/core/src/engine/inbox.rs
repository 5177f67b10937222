//! The inbox operations every face serves: the routed tasks an agent or a person holds, waited for
//! if asked, and a reply to one, written as the protocol's own `task.accept`, `task.result` or
//! `task.error` from the holder to whoever asked; and the requester's side, a cancel.

use std::time::Instant;

use super::workflows::sender;
use super::*;
use crate::inbox::{Reply, Status as ReplyStatus, WAIT_MAX};
use crate::{payload, view};

impl Engine {
    /// The routed tasks given to `agent_id` (an agent or a person, registered or not) that have not
    /// ended, oldest first. With `wait` (at most [`WAIT_MAX`]), an empty inbox is answered only once
    /// a task arrives or the wait is over.
    pub async fn inbox(&self, agent_id: &str, wait: Duration) -> Result<view::Inbox> {
        sender(Some(agent_id), false)?;
        let wait = wait.min(WAIT_MAX);
        if wait.is_zero() {
            return Ok(self.inbox_now(agent_id));
        }
        // Subscribed before looking: a request committed in between still wakes the wait.
        let filter =
            Filter { to: Some(agent_id.to_owned()), kind: Some(MessageType::TaskRequest), ..Filter::default() };
        let mut arrivals = self.inner.log.subscribe(filter, None).await?;
        let deadline = Instant::now() + wait;
        loop {
            let inbox = self.inbox_now(agent_id);
            let left = deadline.saturating_duration_since(Instant::now());
            if !inbox.tasks.is_empty() || left.is_zero() {
                return Ok(inbox);
            }
            match tokio::time::timeout(left, arrivals.next()).await {
                Ok(Ok(_)) => {}
                // Over, or the subscription ended (shutdown, lag): answer what there is.
                Err(_) | Ok(Err(_)) => return Ok(self.inbox_now(agent_id)),
            }
        }
    }

    fn inbox_now(&self, agent_id: &str) -> view::Inbox {
        let state = self.state();
        let mut open: Vec<&Task> = state
            .tasks
            .values()
            .filter(|t| {
                t.agent.as_deref() == Some(agent_id)
                    && matches!(t.phase, Phase::Routed | Phase::Accepted | Phase::Running)
            })
            .collect();
        open.sort_by(|a, b| a.since_ms.cmp(&b.since_ms).then_with(|| a.id.cmp(&b.id)));
        let tasks = open
            .into_iter()
            .map(|t| view::InboxTask {
                task: task_view(t),
                request: Value::Object(t.request.payload.clone()),
                session_id: state.sessions.get(&t.run_id).map(|s| s.id.clone()),
            })
            .collect();
        view::Inbox { agent_id: agent_id.to_owned(), tasks }
    }

    /// `agent_id` replies to routed task `task_id`, which it must hold: `accepted` takes it up,
    /// `completed` (accepting it first if need be) answers its requester with a `task.result`,
    /// `failed` with a `task.error`. Answers the task as it is after the reply.
    pub async fn task_reply(&self, agent_id: &str, task_id: &str, reply: Reply) -> Result<view::Task> {
        sender(Some(agent_id), false)?;
        if let Some(refusal) = self.ended_elsewhere(task_id, MessageType::TaskResult).await? {
            return Err(refusal.into());
        }
        let refuse = |field: &str, why: String| -> Error {
            Refusal::new(ErrorCode::ValidationFailed, why).field(field.to_owned()).into()
        };
        let answer = match reply.status {
            ReplyStatus::Accepted => None,
            ReplyStatus::Completed => {
                let mut result = reply.result.clone().unwrap_or_default();
                match reply.text.as_deref().map(str::trim) {
                    Some(text) if !text.is_empty() => {
                        result.insert("text".into(), Value::from(text));
                    }
                    _ if result.is_empty() => {
                        return Err(refuse("text", "text: required for completed (or give `result`)".into()));
                    }
                    _ => {}
                }
                Some((MessageType::TaskResult, result))
            }
            ReplyStatus::Failed => {
                let error = reply.error.as_deref().map(str::trim).filter(|e| !e.is_empty());
                let error = error.ok_or_else(|| refuse("error", "error: required for failed".into()))?;
                let p = payload::TaskError {
                    code: ErrorCode::TaskFailed.as_str().into(),
                    message: error.to_owned(),
                    retryable: reply.retryable,
                    details: None,
                    error: None,
                };
                Some((MessageType::TaskError, payload::object(&p)))
            }
        };
        let messages = {
            let state = self.state();
            let Some(task) = state.tasks.get(task_id) else {
                let mut refusal = Refusal::new(
                    ErrorCode::TaskNotFound,
                    format!("no routed task `{}`", clutch_proto::error::quote(task_id)),
                )
                .field("task_id");
                if state.workflows.task(task_id).is_some() {
                    refusal = refusal
                        .hint("it is a workflow's task: claim it, then move its status")
                        .next(Next::ClaimTask { task_id: task_id.to_owned() });
                }
                return Err(refusal.into());
            };
            if task.agent.as_deref() != Some(agent_id) {
                let holder = task.agent.as_deref().unwrap_or("nobody yet");
                return Err(Refusal::new(
                    ErrorCode::Forbidden,
                    format!("task {task_id} is given to {holder}, not to {agent_id}"),
                )
                .field("agent_id")
                .into());
            }
            if !matches!(task.phase, Phase::Routed | Phase::Accepted | Phase::Running) {
                return Err(Refusal::new(
                    ErrorCode::InvalidTransition,
                    format!("task {task_id} is {}: it takes no reply", task.phase.as_str()),
                )
                .field("status")
                .into());
            }
            let message = |kind: MessageType, payload: Map<String, Value>| {
                let mut m = Message::new(
                    kind,
                    agent_id,
                    (task.run_id.as_str(), task.thread_id.as_str(), task.id.as_str()),
                    payload,
                );
                m.parent_task_id = task.parent_task_id.clone();
                m.to = vec![Recipient { agent_id: task.requester.clone() }];
                m
            };
            let mut messages = Vec::new();
            if task.phase == Phase::Routed {
                messages.push(message(MessageType::TaskAccept, Map::new()));
            }
            if let Some((kind, payload)) = answer {
                messages.push(message(kind, payload));
            }
            messages
        };
        for outcome in self.inner.log.append(messages).await? {
            outcome?;
        }
        self.state().tasks.get(task_id).map(task_view).ok_or_else(|| Error::Task("a replied task is gone".into()))
    }

    /// `from`, who asked for task `task_id`, cancels it (`reason` says why): a `task.cancel`, which
    /// the gate refuses from anyone but the requester and for a task that has ended.
    pub async fn task_cancel(&self, from: &str, task_id: &str, reason: &str) -> Result<view::Task> {
        sender(Some(from), false)?;
        if let Some(refusal) = self.ended_elsewhere(task_id, MessageType::TaskCancel).await? {
            return Err(refusal.into());
        }
        let message = {
            let state = self.state();
            let task = state.tasks.get(task_id).ok_or_else(|| {
                Refusal::new(
                    ErrorCode::TaskNotFound,
                    format!("no routed task `{}`", clutch_proto::error::quote(task_id)),
                )
                .field("task_id")
            })?;
            let mut payload = Map::new();
            payload.insert("reason".into(), Value::from(reason));
            let mut m = Message::new(
                MessageType::TaskCancel,
                from,
                (task.run_id.as_str(), task.thread_id.as_str(), task.id.as_str()),
                payload,
            );
            m.parent_task_id = task.parent_task_id.clone();
            m.to = vec![Recipient { agent_id: ORCHESTRATOR.into() }];
            m
        };
        self.inner.log.append_one(message).await?;
        self.state().tasks.get(task_id).map(task_view).ok_or_else(|| Error::Task("a cancelled task is gone".into()))
    }
}
