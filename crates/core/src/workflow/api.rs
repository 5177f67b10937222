//! The workflow operations' inputs and answers, shared by every face: the HTTP API serves them as
//! JSON and the MCP face generates its tools' input and output schemas from the same types (fields
//! named as in the agent lifecycle contract: `task_id`, `agent_id`, `workflow_id`, `include`, ...).
//! Inputs refuse unknown fields.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::payload::{CheckpointType, TaskStatus};

/// A workflow's status, derived from its tasks: `planning` (no plan yet), `in_progress`,
/// `blocked` (nothing is held or can be claimed, and some task is blocked), `completed` (every task
/// completed) or `failed` (a task failed and no other task can still run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowStatus {
    Planning,
    InProgress,
    Blocked,
    Completed,
    Failed,
}

impl WorkflowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Planning => "planning",
            WorkflowStatus::InProgress => "in_progress",
            WorkflowStatus::Blocked => "blocked",
            WorkflowStatus::Completed => "completed",
            WorkflowStatus::Failed => "failed",
        }
    }
}

/// A workspace's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceStatus {
    Active,
    Merged,
    Abandoned,
}

// ---- inputs ----

/// `workflow_create`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkflow {
    /// A short name, 1 to 200 characters.
    pub name: String,
    /// Where the work comes from (an issue URL, a spec path...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What the work is, in a few sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The creating agent (`agent:<name>`); without it the daemon records itself as the creator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// `workflow_list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListWorkflows {
    /// Only workflows in one of these statuses (all when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<WorkflowStatus>,
    /// At most this many, newest first (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `workflow_set_plan`: the tasks, their dependencies (by name or index in `tasks`) and optional
/// parallel groups. Refused as a whole when the dependencies form a cycle or name an unknown task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPlan {
    /// The workflow id (`run_...`).
    pub workflow_id: String,
    /// One line saying what this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The tasks, in any order; dependencies name earlier or later tasks by name or index.
    pub tasks: Vec<PlanTask>,
    /// The agent acting (`agent:<name>`, from `agent_register`); with an agent token, your own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanTask {
    /// Unique within the plan, 1 to 128 characters.
    pub name: String,
    /// What the work is, in a few sentences.
    #[serde(default)]
    pub description: String,
    /// Tasks that must be completed first: their names, or their indices in `tasks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<TaskRef>,
    /// Tasks of one group may run side by side (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group: Option<String>,
}

/// A planned task named by its name or its index in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TaskRef {
    Index(usize),
    Name(String),
}

/// `workflow_next_tasks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NextTasks {
    /// The workflow id (`run_...`).
    pub workflow_id: String,
    /// At most this many (default 10, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where the previous page ended: its `next_cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `task_claim`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// The task id (`task_...`).
    pub task_id: String,
    /// The agent acting (`agent:<name>`, from `agent_register`); with an agent token, your own.
    pub agent_id: String,
}

/// `task_release`: back to pending, for another agent to take.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The task id (`task_...`).
    pub task_id: String,
    /// The holder; without it, whoever holds the task (admin callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Why, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `task_set_plan`: how the holder means to do the task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetTaskPlan {
    /// The task id (`task_...`).
    pub task_id: String,
    /// Text, or any structured plan (steps, files...).
    pub plan: Value,
    /// The agent acting (`agent:<name>`, from `agent_register`); with an agent token, your own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// `task_update_status`. `outcome` is required for `completed`, `error` for `failed`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateStatus {
    /// The task id.
    #[serde(alias = "task_id")]
    pub id: String,
    /// The status to move to.
    pub status: TaskStatus,
    /// What was achieved (required for `completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Structured detail of the outcome (files created, packages added...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_detail: Option<Value>,
    /// What went wrong (required for `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why (for `blocked`, `in_progress`, `pending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The holder; without it, whoever holds the task (admin callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// `checkpoint_add`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddCheckpoint {
    /// The task id (`task_...`).
    pub task_id: String,
    /// The checkpoint type: plan, progress, decision, error, recovery or complete.
    #[serde(rename = "type")]
    pub kind: CheckpointType,
    /// One line saying what this is.
    pub summary: String,
    /// Structured detail (a reason, alternatives, numbers...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    /// Paths of the files this step changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
    /// The holder; without it, whoever holds the task (admin callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// `task_load_context`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadContext {
    /// The task id (`task_...`).
    pub task_id: String,
    /// What to gather; each part has its own default.
    #[serde(default)]
    pub include: Include,
    /// The budget, counted with the cl100k_base tokenizer over the answer's `context` (default
    /// 8000, at least 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
}

/// What `task_load_context` gathers; each field has its own default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Include {
    /// The workflow's summary and task list (default true).
    pub workflow_plan: bool,
    /// Outcomes of the workflow's other completed tasks (default true).
    pub prior_task_outcomes: bool,
    /// Outcomes of the task's direct dependencies (default true).
    pub dependency_outcomes: bool,
    /// How many of the newest checkpoints (default 5).
    pub recent_checkpoints: usize,
    /// Every checkpoint, for recovery (default false).
    pub all_checkpoints: bool,
}

impl Default for Include {
    fn default() -> Self {
        Include {
            workflow_plan: true,
            prior_task_outcomes: true,
            dependency_outcomes: true,
            recent_checkpoints: 5,
            all_checkpoints: false,
        }
    }
}

/// `workspace_create`: a git worktree on a new branch for some of a workflow's tasks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkspace {
    /// The workflow id (`run_...`).
    pub workflow_id: String,
    /// The new branch.
    pub branch: String,
    /// What it starts from (default: the repository's current `HEAD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// Make the worktree (default true); false records the workspace only.
    #[serde(default = "yes")]
    pub create_worktree: bool,
    /// The repository (any directory inside it).
    pub repo_path: String,
    /// Where the worktree goes (default `<repo>/../<repo name>.worktrees/<branch, / as ->`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The tasks worked on in this workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_ids: Vec<String>,
    /// The agent acting (`agent:<name>`, from `agent_register`); with an agent token, your own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

fn yes() -> bool {
    true
}

/// `workspace_update`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWorkspace {
    /// The workspace id (`ws_...`).
    pub id: String,
    /// The status to move to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkspaceStatus>,
    /// The commit that merged the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    /// Remove the worktree (refused while it has uncommitted changes).
    #[serde(default)]
    pub cleanup_worktree: bool,
    /// The agent acting (`agent:<name>`, from `agent_register`); with an agent token, your own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

// ---- answers ----

/// A workflow in lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowSummary {
    /// The workflow id: its run id.
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub status: WorkflowStatus,
    /// The task that stands for the whole workflow (its planned tasks are its children).
    pub root_task_id: String,
    pub thread_id: String,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub total_tasks: usize,
    pub completed_tasks: usize,
}

/// `workflow_get`: the workflow, its plan, tasks and workspaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowDetail {
    #[serde(flatten)]
    pub summary: WorkflowSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_summary: Option<String>,
    pub tasks: Vec<TaskSummary>,
    pub workspaces: Vec<Workspace>,
}

/// A planned task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskSummary {
    pub id: String,
    pub workflow_id: String,
    pub name: String,
    pub description: String,
    pub status: TaskStatus,
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group: Option<String>,
    pub order: u32,
    /// The holder (claimed, in progress, blocked) or, once ended, who ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A planned task with everything recorded about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDetail {
    #[serde(flatten)]
    pub summary: TaskSummary,
    pub parent_task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_detail: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<String>,
    pub updated_at: String,
    pub checkpoints: Vec<Checkpoint>,
}

/// The plan as stored: each task with its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanSet {
    pub workflow_id: String,
    pub tasks: Vec<TaskSummary>,
    /// Tasks of the plan this one replaced (cancelled).
    pub replaced: Vec<String>,
}

/// `workflow_next_tasks`: pending tasks whose dependencies are completed, in plan order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NextTasksAnswer {
    pub workflow_id: String,
    pub tasks: Vec<TaskSummary>,
    /// More ready tasks follow: pass this as `cursor` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `task_claim`: `{success: true, lease}` or `{success: false, already_claimed_by}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimAnswer {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_claimed_by: Option<String>,
}

/// A claim holds while its agent is alive: heartbeats and the agent's own messages renew it; once the
/// agent goes offline the task returns to pending.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Lease {
    pub agent_id: String,
    /// When the claim lapses without a further sign of life (RFC 3339).
    pub expires_at: String,
    /// How to renew it, in the words of the face that answered (the MCP tool, the HTTP route).
    pub renew: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Checkpoint {
    /// The id of the event that recorded it.
    pub id: String,
    pub seq: u64,
    pub ts: String,
    pub task_id: String,
    /// What the event's payload records (`type`, `summary`, `detail`, `files_changed`).
    #[serde(flatten)]
    pub note: crate::payload::Checkpoint,
    pub agent_id: String,
}

/// `workflow_progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Progress {
    pub workflow_id: String,
    pub status: WorkflowStatus,
    pub total: usize,
    /// Tasks per status (every status present, zero included).
    pub counts: BTreeMap<TaskStatus, usize>,
    /// Completed tasks as a share of all, 0 to 100.
    pub percent: f64,
    /// Tasks held by an agent (claimed or in progress).
    pub current: Vec<TaskSummary>,
    /// Tasks that can be claimed now.
    pub available: Vec<TaskSummary>,
    /// Tasks that cannot go on, and why.
    pub blocked: Vec<BlockedTask>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockedTask {
    pub id: String,
    pub name: String,
    pub status: TaskStatus,
    pub why: String,
    /// Unfinished dependencies it waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_on: Vec<String>,
}

/// A git workspace of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workspace {
    pub id: String,
    pub workflow_id: String,
    pub branch: String,
    pub base_branch: String,
    pub repo_path: String,
    /// The worktree's directory (absent when no worktree was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub task_ids: Vec<String>,
    pub status: WorkspaceStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    /// Whether the worktree directory exists (false once cleaned up).
    pub worktree: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// `task_load_context`: what an agent needs to (re)start a task, within `max_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextAnswer {
    pub context: Context,
    /// Tokens of `context` as compact JSON, counted with `tokenizer`.
    pub tokens: usize,
    pub max_tokens: usize,
    pub tokenizer: String,
    /// What was left out or shortened to stay within the budget, in the order it was dropped.
    pub trimmed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<ContextWorkflow>,
    pub current_task: ContextTask,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependency_outcomes: Vec<TaskOutcome>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prior_tasks: Vec<TaskOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextWorkflow {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub status: WorkflowStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_summary: Option<String>,
    /// The plan's tasks (left out first when the budget is tight).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanEntry {
    pub id: String,
    pub name: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextTask {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    /// Oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// Checkpoints recorded in all (some may be left out).
    pub checkpoint_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskOutcome {
    pub id: String,
    pub name: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_detail: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
