//! The messages the engine writes itself (status changes, deliveries, routing failures, task
//! errors, timeouts, budget notices), each built in one place.

use super::*;
use crate::payload::{self, BudgetScope};

pub(super) fn not_found(agent_id: &str) -> Error {
    unknown_agent(agent_id).into()
}

pub(super) fn unknown_agent(agent_id: &str) -> Refusal {
    Refusal::new(ErrorCode::AgentNotFound, format!("no agent `{agent_id}` is registered"))
        .field("agent_id")
        .next(Next::RegisterAgent)
}

/// A message from the daemon in the system run (agent lifecycle).
pub(super) fn system_message(kind: MessageType, to: Vec<String>, payload: Map<String, Value>) -> Message {
    let mut m = Message::new(kind, ORCHESTRATOR, (SYSTEM_RUN, SYSTEM_THREAD, SYSTEM_TASK), payload);
    m.to = to.into_iter().map(|agent_id| Recipient { agent_id }).collect();
    m
}

/// A message from the daemon about the same run, thread and task as `about`.
pub(super) fn derived(about: &Message, kind: MessageType, to: Vec<String>, payload: Map<String, Value>) -> Message {
    let mut m = system_message(kind, to, payload);
    m.thread_id = about.thread_id.clone();
    m.run_id = about.run_id.clone();
    m.task_id = about.task_id.clone();
    m.parent_task_id = about.parent_task_id.clone();
    m.trace = about.trace.clone();
    m
}

pub(super) fn status_message(agent_id: &str, status: Status, previous: Status) -> Message {
    let payload = payload::object(&payload::AgentStatus { agent_id: agent_id.to_owned(), status, previous });
    let mut m = system_message(MessageType::AgentUpdate, Vec::new(), payload);
    m.payload_type = Some(AGENT_STATUS_PAYLOAD.to_owned());
    m
}

/// The task's request, delivered to `agent` as delivery `attempt`.
pub(super) fn delivery(task: &Task, agent: String, attempt: u32) -> Message {
    let original = &task.request;
    let mut m = derived(original, MessageType::TaskRequest, vec![agent], original.payload.clone());
    m.domain = original.domain.clone();
    m.payload_type = original.payload_type.clone();
    m.schema_ref = original.schema_ref.clone();
    m.requires = original.requires.clone();
    m.prefers = original.prefers.clone();
    m.attachments = original.attachments.clone();
    m.security =
        original.security.as_ref().map(|s| clutch_proto::message::Security { auth: None, policy: s.policy.clone() });
    m.attempt = attempt;
    m.meta = original.meta.clone();
    m.meta.insert("clutch_request_id".into(), Value::from(original.id.clone()));
    m.idempotency_key = Some(format!("clutch:deliver:{}:{attempt}", task.id));
    m
}

/// No agent for the task: queued (it waits for one) or not (it fails).
pub(super) fn routing_failure(task: &Task, reason: &str, excluded: BTreeMap<String, String>, queued: bool) -> Message {
    let payload = payload::object(&payload::RoutingFailure { reason: reason.to_owned(), excluded, queued });
    let mut event = derived(&task.request, MessageType::RoutingFailure, Vec::new(), payload);
    let key = if queued { "queue" } else { "unroutable" };
    event.idempotency_key = Some(format!("clutch:{key}:{}:{}", task.id, task.routings + 1));
    event
}

/// A task of a run over budget fails (`budgets.on_exceed: fail_run`).
pub(super) fn budget_failure(task: &Task) -> Message {
    task_error(task, ErrorCode::BudgetExceeded.as_str(), "the run's budget is spent", false, "budget")
}

pub(super) fn task_error(task: &Task, code: &str, text: &str, retryable: bool, key: &str) -> Message {
    let payload = payload::object(&payload::TaskError {
        code: code.to_owned(),
        message: text.to_owned(),
        retryable,
        details: None,
        error: None,
    });
    let to = task.agent.iter().cloned().chain(std::iter::once(task.requester.clone())).collect();
    let mut m = derived(&task.request, MessageType::TaskError, to, payload);
    m.attempt = task.attempt;
    m.idempotency_key = Some(format!("clutch:{key}:{}:{}:{}", task.id, task.routings, task.attempt));
    m
}

/// The notice that `task` will be routed again after `after` (its `routings`th routing failed
/// with a retryable error; the policy gives it `of` in all).
pub(super) fn retry_notice(task: &Task, of: u32, after: std::time::Duration) -> Message {
    let (code, text) = task.last_error.clone().unwrap_or_default();
    let routing = task.routings + 1;
    let after_ms = after.as_millis() as u64;
    let payload = payload::object(&payload::TaskRetry {
        routing,
        routings: of,
        after_ms,
        message: format!("task {} failed ({code}: {text}); routing {routing} of {of} in {after_ms} ms", task.id),
        code,
    });
    let mut m = derived(&task.request, MessageType::ChatSystem, vec![task.requester.clone()], payload);
    m.payload_type = Some(TASK_RETRY_PAYLOAD.to_owned());
    m.idempotency_key = Some(format!("clutch:retry:{}:{}", task.id, task.routings));
    m
}

pub(super) fn timeout(task: &Task) -> Message {
    let payload =
        payload::object(&payload::Timeout { message: "the task ran past its agent's max_runtime_sec".to_owned() });
    let to = task.agent.iter().cloned().chain(std::iter::once(task.requester.clone())).collect();
    let mut m = derived(&task.request, MessageType::TaskTimeout, to, payload);
    m.attempt = task.attempt;
    m.idempotency_key = Some(format!("clutch:timeout:{}:{}", task.id, task.attempt));
    m
}

pub(super) fn forward_cancel(task: &Task, history: Option<&Vec<Step>>) -> Message {
    let last_cancel =
        history.and_then(|h| h.iter().rev().find(|s| s.kind == MessageType::TaskCancel)).map(|s| s.id.clone());
    let payload =
        payload::object(&payload::Cancel { message: "the task was cancelled".to_owned(), cancel_id: last_cancel });
    let mut m = derived(&task.request, MessageType::TaskCancel, task.agent.iter().cloned().collect(), payload);
    m.idempotency_key = Some(format!("clutch:cancel:{}", task.id));
    m
}

pub(super) fn budget_notice(
    scope: BudgetScope,
    id: &str,
    dimension: &str,
    used: f64,
    limit: f64,
    action: &str,
    thread: Option<String>,
) -> Message {
    let word = match scope {
        BudgetScope::Agent => "agent",
        BudgetScope::Run => "run",
    };
    let payload = payload::object(&payload::BudgetNotice {
        scope,
        id: id.to_owned(),
        dimension: dimension.to_owned(),
        used,
        limit,
        action: action.to_owned(),
        message: format!("{word} {id} reached its {dimension} budget ({used} of {limit}): {action}"),
    });
    let mut m = system_message(MessageType::ChatSystem, Vec::new(), payload);
    if scope == BudgetScope::Run {
        m.run_id = id.to_owned();
        if let Some(t) = thread {
            m.thread_id = t;
        }
    }
    m.payload_type = Some(BUDGET_PAYLOAD.to_owned());
    m.idempotency_key = Some(format!("clutch:budget:{word}:{id}"));
    m
}
