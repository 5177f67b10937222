//! The payloads the daemon writes itself, one serde + schemars type each: agent status changes,
//! budget notices, refusal records, registered schemas, routing decisions and failures, the task
//! errors, timeouts and cancels it sends, and the workflow events (see [`crate::workflow`]), with the
//! words those name (a planned task's [`TaskStatus`], a [`CheckpointType`]), which the workflows
//! re-export as theirs. The engine builds its messages from these and clients read them back as
//! these; their JSON Schemas are published (see [`crate::published`]). Optional members are left out
//! when absent.

use std::collections::BTreeMap;

use clutch_proto::MessageType;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::availability::Status;

/// A payload as a message carries it: a JSON object.
pub fn object<T: Serialize>(payload: &T) -> Map<String, Value> {
    // Every type here is a struct of plain data: it serializes, and as an object.
    match serde_json::to_value(payload) {
        Ok(Value::Object(map)) => map,
        _ => {
            debug_assert!(false, "a payload serializes as a JSON object");
            Map::new()
        }
    }
}

/// A message's payload read as `T`, or `None` when it is not one.
pub fn read<T: DeserializeOwned>(payload: &Map<String, Value>) -> Option<T> {
    T::deserialize(payload).ok()
}

/// `agent.update` `clutch.agent.status.v1`: an agent's availability changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentStatus {
    pub agent_id: String,
    pub status: Status,
    pub previous: Status,
}

/// Whose budget a notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    Agent,
    Run,
}

/// `chat.system` `clutch.budget.v1`: an agent's or a run's budget is spent (sent once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BudgetNotice {
    pub scope: BudgetScope,
    /// The agent or run.
    pub id: String,
    /// The measure crossed: `tokens`, `cost_usd`, `requests` or `wall_time_sec`.
    pub dimension: String,
    pub used: f64,
    pub limit: f64,
    /// What follows: the agent leaves routing, or the run fails.
    pub action: String,
    /// All of the above, for people.
    pub message: String,
}

/// `chat.system` `clutch.task.retry.v1` on a task: it failed with a retryable error and will be
/// routed again after a backoff (sent once per retry; the task's state is `retrying` until then).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskRetry {
    /// The routing to come: 2 for the first retry.
    pub routing: u32,
    /// Routings the retry policy gives a task in all.
    pub routings: u32,
    /// Milliseconds until it is routed again.
    pub after_ms: u64,
    /// The error that failed the last routing.
    pub code: String,
    /// All of the above, for people.
    pub message: String,
}

/// `chat.system` `clutch.refusal.v1` in the system run: a message was refused (not stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Refusal {
    /// The stable error code the sender got.
    pub code: String,
    pub message: String,
    /// The sender the message claimed (unverified: it was refused).
    pub claimed_from: String,
    pub message_id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub run_id: String,
    /// How many refusals before this one were counted but not recorded (a flood).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecorded_before: Option<u64>,
}

/// `chat.system` `clutch.schema.v1`: a payload schema registered at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchemaRegistration {
    pub payload_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_ref: Option<String>,
    /// The JSON Schema (2020-12).
    pub schema: Value,
}

/// `routing.decision`: the agent the router picked for a task, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RoutingDecision {
    pub selected: String,
    /// The eligible agents, best first.
    pub candidates: Vec<String>,
    /// Each eligible agent's score, 0 to 1.
    pub scores: BTreeMap<String, f64>,
    pub reason: String,
    /// The agents left out, each with why.
    pub excluded: BTreeMap<String, String>,
    /// Which routing of the task this is (1-based).
    pub attempt: u32,
}

/// `routing.failure`: no agent can take the task now; it waits (`queued`) or fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RoutingFailure {
    pub reason: String,
    /// Every agent, each with why it was left out.
    pub excluded: BTreeMap<String, String>,
    /// The task waits for an agent (true) or has failed (false).
    pub queued: bool,
}

/// `task.error` and `tool.error` as the daemon sends them (and as agents should).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskError {
    pub code: String,
    pub message: String,
    /// Whether the same request may succeed later.
    pub retryable: bool,
    /// More about it (a refused tool call: the tool and the call's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// A workflow task's failure as its holder worded it (the same as `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `details` of the daemon's `tool.error`: the call it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CallRef {
    pub tool: String,
    /// The `tool.call`'s message id.
    pub call_id: String,
}

/// `tool.call`: a call of a tool, named as its adapter serves it (`mcp:<server>/<tool>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    pub tool: String,
    /// The tool's arguments, an object (`arguments` is read too).
    #[serde(default, alias = "arguments", skip_serializing_if = "Map::is_empty")]
    pub args: Map<String, Value>,
}

/// `tool.result` from the daemon: what the tool answered, to the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    pub tool: String,
    /// The `tool.call`'s message id.
    pub call_id: String,
    /// The tool's content blocks as it gave them (MCP: text, image, audio, resource links and
    /// resources); a block over 32 KiB is stored as an artifact (attached to the message too) and
    /// shown as `{"type": "artifact", "ref": "artifact:sha256:…", "media_type", "size", "replaces"}`.
    pub content: Vec<Value>,
    /// The tool's structured answer, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// From the start of the call to its answer.
    pub duration_ms: u64,
}

/// A content block of a tool's answer stored as an artifact (it was over 32 KiB).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactBlock {
    /// Always `artifact`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `artifact:sha256:<hex>`: the artifact store serves it.
    #[serde(rename = "ref")]
    pub reference: String,
    pub media_type: String,
    pub size: u64,
    /// The type of the block it replaces (`text`, `image`, ...).
    pub replaces: String,
}

/// `chat.system` `clutch.tool.started.v1`, on the call's run, thread and task: the daemon is making
/// the call. It is stored (durably) before the call is made, so after a crash a call with this and
/// no answer is known to be in doubt, and one without it is known not to have been made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolStarted {
    pub tool: String,
    pub call_id: String,
    /// The adapter making it.
    pub adapter: String,
    /// 1 for the first try; more when a read-only or idempotent call in doubt is made again.
    pub attempt: u32,
}

/// `chat.system` `clutch.approval.requested.v1` on the call's run, thread and task, to the caller: the
/// call waits for a person's decision before it is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRequested {
    pub tool: String,
    pub call_id: String,
    /// Who made the call.
    pub caller: String,
    /// The arguments it would be made with.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Why it needs approval: `policy` (org.yaml's `approvals.tools`) or `destructive` (its
    /// annotations say it may destroy and is not read-only).
    pub reason: String,
    /// When it expires undecided (RFC 3339): then it is not made.
    pub expires_at: String,
}

/// What a person decided about a call waiting for approval (or that no one did in time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approved,
    Denied,
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Denied => "denied",
            Decision::Expired => "expired",
        }
    }
}

/// `chat.system` `clutch.approval.decided.v1` on the call's run, thread and task: the one decision
/// about a call that waited for approval (a second is a duplicate of the first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalDecided {
    pub tool: String,
    pub call_id: String,
    pub decision: Decision,
    /// Who decided: `user:<token name>` (`user:local` without tokens), or the daemon when it expired.
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `task.timeout`: the task ran past its agent's `max_runtime_sec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Timeout {
    pub message: String,
}

/// `task.cancel` from the daemon: a cancel forwarded to the task's agent, or a planned task
/// withdrawn with its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Cancel {
    pub message: String,
    /// The requester's cancel this one forwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_id: Option<String>,
}

/// Where a planned task is. Moves: pending → claimed (claim); claimed → in_progress | completed |
/// failed | blocked | pending (release, lease lost); in_progress → completed | failed | blocked |
/// pending; blocked → in_progress | pending | failed; completed and failed are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Claimed,
    InProgress,
    Completed,
    Failed,
    Blocked,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 6] = [
        TaskStatus::Pending,
        TaskStatus::Claimed,
        TaskStatus::InProgress,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Blocked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Claimed => "claimed",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Blocked => "blocked",
        }
    }

    /// Held by an agent (its lease): claimed, in progress or blocked.
    pub fn is_held(self) -> bool {
        matches!(self, TaskStatus::Claimed | TaskStatus::InProgress | TaskStatus::Blocked)
    }

    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed)
    }
}

/// The kinds of checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointType {
    Plan,
    Progress,
    Decision,
    Error,
    Recovery,
    Complete,
}

/// `task.request` `clutch.workflow.v1`: a workflow's root task (a new run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Workflow {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `task.progress` `clutch.workflow.plan.v1` on the root: a plan, followed in its batch by one
/// `clutch.workflow.task.v1` request per task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    pub tasks: Vec<PlanEntry>,
}

/// One task of a plan, with the id it is stored under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanEntry {
    pub id: String,
    pub name: String,
    pub depends_on: Vec<String>,
    pub parallel_group: Option<String>,
}

/// `task.request` `clutch.workflow.task.v1`: a planned task (a child of the root), as the daemon
/// writes it for a plan or an agent sends it to add one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedTask {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Task ids, each stored before this one.
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group: Option<String>,
    /// Its place in the plan as given (absent: after the tasks already planned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<u32>,
}

/// `task.progress` `clutch.workflow.status.v1`: a planned task moved (in_progress, blocked, or
/// back to pending when released or its holder's lease expired).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatusChange {
    pub status: TaskStatus,
    /// Why: the holder's words, `released` or `lease_expired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The holder's note on a release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The agent whose lease expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_agent: Option<String>,
}

/// `task.result` of a planned task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Outcome {
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_detail: Option<Value>,
}

/// `task.progress` `clutch.checkpoint.v1`: what the holder (or, on recovery, the daemon) records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Checkpoint {
    #[serde(rename = "type")]
    pub kind: CheckpointType,
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
}

/// `detail` of the daemon's `recovery` checkpoint, written when a holder's lease expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Recovery {
    pub previous_agent: String,
    pub previous_status: TaskStatus,
    /// The holder's last checkpoint, if it recorded one.
    pub last_checkpoint: Option<String>,
}

/// `task.progress` `clutch.workflow.task_plan.v1`: how the holder means to do the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskPlan {
    pub plan: Value,
}
