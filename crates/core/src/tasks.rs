//! Task state, derived from the log: requested → routed → accepted → running → completed, failed,
//! cancelled or timed out, with queueing and retry in between. [`next`] is the one place that says
//! which message may move a task where; the writer refuses anything else with `INVALID_TRANSITION`.

use std::sync::Arc;

use clutch_proto::error::Next;
use clutch_proto::{ErrorCode, Message, MessageType};

use crate::Refusal;

/// The sender the daemon uses for everything it says itself (routing, redelivery, timeouts).
pub const ORCHESTRATOR: &str = "agent:orchestrator";

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for the router.
    Requested,
    /// No agent could take it yet (offline, busy or out of budget); it waits for one.
    Queued,
    /// Delivered to its agent, not yet accepted.
    Routed,
    Accepted,
    /// The agent reported progress.
    Running,
    /// Failed with a retryable error; waiting out the backoff before it is routed again.
    Retrying,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Requested => "requested",
            Phase::Queued => "queued",
            Phase::Routed => "routed",
            Phase::Accepted => "accepted",
            Phase::Running => "running",
            Phase::Retrying => "retrying",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
            Phase::Cancelled => "cancelled",
            Phase::TimedOut => "timed_out",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Completed | Phase::Failed | Phase::Cancelled | Phase::TimedOut)
    }

    /// Whether the task occupies a slot of its agent.
    pub fn is_in_flight(self) -> bool {
        matches!(self, Phase::Routed | Phase::Accepted | Phase::Running)
    }

    /// Whether the task waits for the router.
    pub fn awaits_routing(self) -> bool {
        matches!(self, Phase::Requested | Phase::Queued | Phase::Retrying)
    }
}

/// One event in a task's history.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Step {
    pub seq: u64,
    pub id: String,
    pub kind: MessageType,
    pub from: String,
    pub ts: String,
    pub phase: Phase,
}

/// A task as the daemon knows it. It begins with a `task.request`; messages about a task id that
/// never had one pass through untracked.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Task {
    pub id: String,
    pub run_id: String,
    pub thread_id: String,
    pub parent_task_id: Option<String>,
    /// Who asked (the first request's sender): it may cancel.
    pub requester: String,
    pub phase: Phase,
    /// The agent it is routed to (or was, once ended).
    pub agent: Option<String>,
    /// Delivery attempt of the current assignment (1-based).
    pub attempt: u32,
    /// How many times it has been routed (the retry policy counts these).
    pub routings: u32,
    /// The first request, copied for each delivery.
    #[serde(with = "shared_message")]
    pub request: Arc<Message>,
    /// Whether the router picks the agent (no concrete recipient in the first request).
    pub routed_by_orchestrator: bool,
    /// Milliseconds since the epoch of the last phase change: timers count from here.
    pub since_ms: i64,
    /// When the current agent accepted it (runtime limits count from here).
    pub accepted_ms: Option<i64>,
    /// The `attempt` the current routing's first delivery had: redeliveries are counted from it.
    pub routing_first_attempt: u32,
    /// When its timer fires next, if it has one (the engine's due index holds the same).
    pub due_ms: Option<i64>,
    pub progress: Option<f64>,
    pub last_error: Option<(String, String)>,
    /// A cancel the assigned agent has not been sent yet.
    pub cancel_to_forward: bool,
    /// The workflow step it belongs to (`meta.workflow`, `meta.step` of its request).
    pub step: Option<(String, String)>,
    /// What its progress and results reported, and its agents' accepted-to-ended time; `None` until
    /// the first of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::registry::Usage>,
}

/// What a message does to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The task moves to `phase` (with `agent` assigned when it is routed).
    To(Phase),
    /// Allowed, no change (a forwarded cancel, repeated progress).
    Stay,
}

/// Whether `kind` moves a task through its life (what an ended task refuses).
pub fn is_lifecycle(kind: MessageType) -> bool {
    matches!(
        kind,
        MessageType::TaskRequest
            | MessageType::TaskAccept
            | MessageType::TaskProgress
            | MessageType::TaskResult
            | MessageType::TaskError
            | MessageType::TaskCancel
            | MessageType::TaskTimeout
    )
}

/// Whether an event of `kind` ends its task: its result, error, cancellation or timeout.
pub fn ends_task(kind: MessageType) -> bool {
    matches!(
        kind,
        MessageType::TaskResult | MessageType::TaskError | MessageType::TaskCancel | MessageType::TaskTimeout
    )
}

/// Whether `kind` may change a task's state: its lifecycle, and the router's events about it.
pub fn moves_task(kind: MessageType) -> bool {
    is_lifecycle(kind) || matches!(kind, MessageType::RoutingDecision | MessageType::RoutingFailure)
}

/// Options of the state machine that come from the retry policy.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Routings a task gets in all (the first and each retry after a retryable error).
    pub max_routings: u32,
}

/// Decides what `message` (from a client, or from the daemon when `daemon` is true) does to `task`.
pub fn next(task: &Task, message: &Message, daemon: bool, retries: Retries) -> Result<Effect, Refusal> {
    use MessageType as T;
    use Phase as P;
    let from = message.from.agent_id.as_str();
    let assignee = task.agent.as_deref();
    let phase = task.phase;
    let refuse = |why: String| Err(invalid(task, message.kind, why));
    let lifecycle = is_lifecycle(message.kind);
    // Conversation and tool traffic about a task may go on after it ends; its lifecycle may not.
    if phase.is_terminal() && lifecycle && !(daemon && message.kind == T::TaskCancel) {
        return refuse(format!("task {} has ended ({})", task.id, phase.as_str()));
    }
    let by_assignee = assignee == Some(from) && phase.is_in_flight();
    match message.kind {
        T::TaskRequest if daemon => {
            let to = recipient(message);
            let redelivery = phase == P::Routed && to == assignee && message.attempt > task.attempt;
            if phase.awaits_routing() || redelivery {
                Ok(Effect::To(P::Routed))
            } else {
                refuse(format!("task {} is {}; it cannot be delivered again now", task.id, phase.as_str()))
            }
        }
        T::TaskRequest => {
            refuse(format!("task {} already exists ({}); a new request needs a new task_id", task.id, phase.as_str()))
        }
        T::TaskAccept | T::TaskProgress | T::TaskResult if !by_assignee => {
            let why = match assignee {
                Some(a) if phase.is_in_flight() => format!("task {} is assigned to {a}, not {from}", task.id),
                _ => format!("task {} is {} and assigned to no agent", task.id, phase.as_str()),
            };
            refuse(why)
        }
        T::TaskAccept if phase == P::Routed => Ok(Effect::To(P::Accepted)),
        T::TaskAccept => refuse(format!("task {} was already accepted", task.id)),
        T::TaskProgress => Ok(Effect::To(P::Running)),
        T::TaskResult => Ok(Effect::To(P::Completed)),
        T::TaskError if by_assignee || daemon => {
            let retryable = message.payload.get("retryable").and_then(|v| v.as_bool()).unwrap_or(false);
            if retryable && task.routings < retries.max_routings && task.routed_by_orchestrator {
                Ok(Effect::To(P::Retrying))
            } else {
                Ok(Effect::To(P::Failed))
            }
        }
        T::TaskError => refuse(format!("only the assigned agent may report an error for task {}", task.id)),
        T::TaskCancel if daemon && phase == P::Cancelled => Ok(Effect::Stay),
        T::TaskCancel if daemon || from == task.requester || from.starts_with("user:") => Ok(Effect::To(P::Cancelled)),
        T::TaskCancel => {
            refuse(format!("only the requester ({}) or a user may cancel task {}", task.requester, task.id))
        }
        T::TaskTimeout if daemon => Ok(Effect::To(P::TimedOut)),
        T::TaskTimeout => refuse("only the daemon reports timeouts".into()),
        T::RoutingFailure if daemon && phase.awaits_routing() => {
            let queued = message.payload.get("queued").and_then(|v| v.as_bool()).unwrap_or(false);
            Ok(if queued { Effect::To(P::Queued) } else { Effect::Stay })
        }
        _ => Ok(Effect::Stay),
    }
}

/// The concrete agent (or person, `user:NAME`) a `task.request` names, if any (the orchestrator is
/// not one).
pub fn recipient(message: &Message) -> Option<&str> {
    message
        .to
        .iter()
        .map(|r| r.agent_id.as_str())
        .find(|a| (a.starts_with("agent:") && *a != ORCHESTRATOR) || a.starts_with("user:"))
}

/// Whether `assignee` is a person: no accept deadline runs for a task given to one (people answer
/// when they read it; cancel it to stop waiting).
pub fn is_person(assignee: &str) -> bool {
    assignee.starts_with("user:")
}

/// The refusal of a lifecycle message about a task that has ended in `state` (a phase's name).
pub fn ended(task_id: &str, kind: MessageType, state: &str) -> Refusal {
    Refusal::new(ErrorCode::InvalidTransition, format!("{} refused: task {task_id} has ended ({state})", kind.as_str()))
        .field("task_id")
        .next(Next::ShowTask { task_id: task_id.to_owned() })
}

fn invalid(task: &Task, kind: MessageType, why: String) -> Refusal {
    Refusal::new(ErrorCode::InvalidTransition, format!("{} refused: {why}", kind.as_str()))
        .field("task_id")
        .next(Next::ShowTask { task_id: task.id.clone() })
}

/// Serde for a shared message (serde's own `Arc` support is a feature the workspace does not turn on).
mod shared_message {
    use std::sync::Arc;

    use clutch_proto::Message;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(message: &Arc<Message>, s: S) -> Result<S::Ok, S::Error> {
        message.as_ref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Message>, D::Error> {
        Message::deserialize(d).map(Arc::new)
    }
}
