//! What the engine shows of its state, one serde + schemars type per shape: the agents, a task with
//! its history, a run's tasks as a tree, a workflow's tasks in the same tree. Every face serves these
//! as they are and every client (the CLI, the MCP face, the UI, the tests) reads them back as these
//! types; their JSON Schemas are published (see [`crate::published`]). `TaskState` is the one list
//! of the names a task's state may have, whichever machine it follows.

use std::collections::BTreeMap;

use clutch_proto::{AgentCard, MessageType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::availability::Status;
use crate::config::Budget;
use crate::tasks::Phase;
use crate::workflow::api::{TaskDetail, TaskStatus, WorkflowDetail, WorkflowStatus};

pub use crate::tool::ToolAnnotations;

/// The agents: every registered one, by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Agents {
    pub agents: Vec<Agent>,
}

/// An agent as the registry knows it: its card and its live state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Agent {
    pub agent_id: String,
    pub status: Status,
    pub card: AgentCard,
    pub load: Load,
    /// The tasks routed to it and not ended.
    pub tasks: Vec<String>,
    /// The share of its recent tasks that ended with a result, 0 to 1; `null` before any ended.
    pub success_rate: Option<f64>,
    pub usage: Usage,
    /// Its budget (the card's, overridden measure by measure by the policy's); `null` when unlimited.
    pub budget: Option<Budget>,
    /// The budget is spent: it gets no new tasks (or its runs fail, as the policy says).
    pub budget_exhausted: bool,
    /// Its last sign of life (RFC 3339).
    pub last_seen: String,
}

/// An agent registered (or its card replaced).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Registered {
    pub agent_id: String,
    /// The registration's place in the log.
    pub seq: u64,
    /// How often the agent must show a sign of life to stay online.
    pub heartbeat_interval_sec: u64,
    /// The agent as the registry now shows it.
    pub agent: Option<Agent>,
}

/// An agent removed: it gets no new tasks, and its unfinished ones are routed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Removed {
    pub agent_id: String,
    pub status: Status,
    pub seq: u64,
}

/// What a retention pass of the log did, or would do (`dry_run`): the ended runs old enough to go,
/// archived and/or removed (see [`crate::retention`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Retention {
    /// Whether the operator set a policy (`[retention]` in `clutch.toml`, `retention:` in org.yaml);
    /// without one nothing ever goes.
    pub enabled: bool,
    /// Nothing was archived or removed: this says what would have been.
    pub dry_run: bool,
    /// The runs handled (at most the first 1,000 are listed; `runs_total` counts them all).
    pub runs: Vec<RetainedRun>,
    pub runs_total: u64,
    /// Their events, in all.
    pub events_total: u64,
    /// Runs old enough to go but with work in flight (an open workflow or session, a task not
    /// ended): left alone, and looked at again by the next pass.
    pub in_flight: Vec<String>,
    /// Events read to find the runs.
    pub scanned: u64,
    /// The pass stopped at its reading limit with more of the log old enough: the next continues.
    pub more: bool,
}

/// One run a retention pass handled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RetainedRun {
    pub run_id: String,
    /// The workflow's name, when the run is a workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The `ts` of its newest event.
    pub last_activity: String,
    pub events: u64,
    /// The compressed NDJSON file it was (or would be) archived to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// Whether its events were (or would be) removed from the log.
    pub removed: bool,
}

/// What the engine holds in memory: in-flight work, ended work still within its retention, and the
/// tombstones of what left. A daemon's footprint follows these, not its age.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Footprint {
    /// Routed tasks in memory, ended or not.
    pub tasks: u64,
    /// Of those, the ended ones waiting out their retention.
    pub ended_in_memory: u64,
    /// Tasks that ended and left memory, remembered by id and final state.
    pub tombstones: u64,
    pub runs: u64,
    /// Workflows in memory: open ones, and those ended within their retention.
    pub workflows: u64,
    /// Positions' sessions in memory: the same.
    pub sessions: u64,
    pub agents: u64,
    /// The longest the engine's own work (a reactor pass, a snapshot) held its lock since the start,
    /// in microseconds: the longest an append could have waited for it.
    pub longest_hold_us: u64,
    /// The longest the log's writer waited for the engine's lock since the start, in microseconds.
    pub longest_writer_wait_us: u64,
}

impl Footprint {
    /// As Prometheus gauges.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (name, help, value) in [
            ("clutch_engine_tasks", "Routed tasks in memory, ended or not.", self.tasks as f64),
            (
                "clutch_engine_ended_tasks",
                "Ended tasks in memory, waiting out their retention.",
                self.ended_in_memory as f64,
            ),
            ("clutch_engine_tombstones", "Ended tasks that left memory, remembered by id.", self.tombstones as f64),
            ("clutch_engine_runs", "Runs in memory.", self.runs as f64),
            (
                "clutch_engine_workflows",
                "Workflows in memory, open or ended within their retention.",
                self.workflows as f64,
            ),
            (
                "clutch_engine_sessions",
                "Positions' sessions in memory, open or ended within their retention.",
                self.sessions as f64,
            ),
            ("clutch_engine_agents", "Agents registered.", self.agents as f64),
            (
                "clutch_engine_longest_hold_seconds",
                "Longest hold of the engine's lock by its own work since the start.",
                self.longest_hold_us as f64 / 1e6,
            ),
            (
                "clutch_engine_longest_writer_wait_seconds",
                "Longest wait of the log's writer for the engine's lock since the start.",
                self.longest_writer_wait_us as f64 / 1e6,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        out
    }
}

/// A heartbeat taken: the agent is online until it has been silent too long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Heartbeat {
    pub agent_id: String,
    pub status: Status,
    /// When to beat next, at the latest.
    pub next_heartbeat_sec: u64,
}

/// Tasks in flight against the card's limit (`null`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Load {
    pub in_flight: usize,
    pub max_concurrency: Option<u32>,
}

/// What an agent, a run or a task has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// LLM tokens (input and output).
    pub tokens: u64,
    pub cost_usd: f64,
    /// Requests (LLM or tool calls).
    pub requests: u64,
    /// Seconds of work: an agent's (or a task's) tasks from acceptance to end; a run's first to last
    /// event.
    pub wall_time_sec: u64,
}

impl From<&crate::registry::Usage> for Usage {
    fn from(u: &crate::registry::Usage) -> Usage {
        Usage { tokens: u.tokens, cost_usd: u.cost_usd, requests: u.requests, wall_time_sec: u.wall_ms / 1000 }
    }
}

/// Every name a task's state may have. A routed task (one the router gives to an agent) moves
/// requested → queued | routed → accepted → running → completed | failed | cancelled | timed_out,
/// with retrying between routings; a planned workflow task moves pending → claimed → in_progress →
/// completed | failed (blocked on the way, cancelled when its plan is replaced); a workflow's root
/// task has its workflow's status (planning, in_progress, blocked, completed, failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Requested,
    Queued,
    Routed,
    Accepted,
    Running,
    Retrying,
    Planning,
    Pending,
    Claimed,
    InProgress,
    Blocked,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl TaskState {
    pub const ALL: [TaskState; 15] = [
        TaskState::Requested,
        TaskState::Queued,
        TaskState::Routed,
        TaskState::Accepted,
        TaskState::Running,
        TaskState::Retrying,
        TaskState::Planning,
        TaskState::Pending,
        TaskState::Claimed,
        TaskState::InProgress,
        TaskState::Blocked,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Cancelled,
        TaskState::TimedOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Requested => "requested",
            TaskState::Queued => "queued",
            TaskState::Routed => "routed",
            TaskState::Accepted => "accepted",
            TaskState::Running => "running",
            TaskState::Retrying => "retrying",
            TaskState::Planning => "planning",
            TaskState::Pending => "pending",
            TaskState::Claimed => "claimed",
            TaskState::InProgress => "in_progress",
            TaskState::Blocked => "blocked",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
            TaskState::TimedOut => "timed_out",
        }
    }

    /// Nothing more happens to the task.
    pub fn is_final(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Failed | TaskState::Cancelled | TaskState::TimedOut)
    }
}

impl From<Phase> for TaskState {
    fn from(p: Phase) -> TaskState {
        match p {
            Phase::Requested => TaskState::Requested,
            Phase::Queued => TaskState::Queued,
            Phase::Routed => TaskState::Routed,
            Phase::Accepted => TaskState::Accepted,
            Phase::Running => TaskState::Running,
            Phase::Retrying => TaskState::Retrying,
            Phase::Completed => TaskState::Completed,
            Phase::Failed => TaskState::Failed,
            Phase::Cancelled => TaskState::Cancelled,
            Phase::TimedOut => TaskState::TimedOut,
        }
    }
}

impl From<TaskStatus> for TaskState {
    fn from(s: TaskStatus) -> TaskState {
        match s {
            TaskStatus::Pending => TaskState::Pending,
            TaskStatus::Claimed => TaskState::Claimed,
            TaskStatus::InProgress => TaskState::InProgress,
            TaskStatus::Completed => TaskState::Completed,
            TaskStatus::Failed => TaskState::Failed,
            TaskStatus::Blocked => TaskState::Blocked,
        }
    }
}

impl From<WorkflowStatus> for TaskState {
    fn from(s: WorkflowStatus) -> TaskState {
        match s {
            WorkflowStatus::Planning => TaskState::Planning,
            WorkflowStatus::InProgress => TaskState::InProgress,
            WorkflowStatus::Blocked => TaskState::Blocked,
            WorkflowStatus::Completed => TaskState::Completed,
            WorkflowStatus::Failed => TaskState::Failed,
        }
    }
}

/// Which machine a task follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// Given to an agent by the router (or sent to one by name).
    #[default]
    Routed,
    /// A workflow's root task: it stands for the whole workflow.
    Workflow,
    /// A planned task of a workflow, claimed by the agents that pull their work.
    WorkflowTask,
}

impl TaskKind {
    fn is_routed(&self) -> bool {
        *self == TaskKind::Routed
    }
}

/// A task: on its own with its history, or as a node of a run's tree with its children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    pub task_id: String,
    pub run_id: String,
    pub thread_id: String,
    pub parent_task_id: Option<String>,
    /// Absent for a routed task.
    #[serde(default, skip_serializing_if = "TaskKind::is_routed")]
    pub kind: TaskKind,
    /// What the task is called: a workflow's or a planned task's name; absent for a routed task,
    /// which is named by its request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub state: TaskState,
    /// The agent it is routed to or held by (or was, once ended).
    pub agent: Option<String>,
    /// Who asked (the first request's sender) or, for a workflow, who created it.
    pub requester: Option<String>,
    /// Delivery attempt of the current assignment (1-based; 0 for workflow tasks).
    #[serde(default)]
    pub attempt: u32,
    /// How many times the router has given it to an agent.
    #[serde(default)]
    pub routings: u32,
    /// The last reported progress, 0 to 100.
    pub progress: Option<f64>,
    /// The capabilities the request requires.
    #[serde(default)]
    pub requires: Vec<String>,
    /// The last error reported about it.
    pub error: Option<TaskError>,
    /// What it has used: tokens, cost and requests its progress and results reported, and seconds
    /// from acceptance to end of each assignment (absent until something is reported or it ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Every event about the task, oldest first (in a task's own view only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Step>>,
    /// Its child tasks by `parent_task_id` (in a run's tree only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<Task>>,
    /// The workflow a root task stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowDetail>,
    /// Everything recorded about a planned task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_task: Option<TaskDetail>,
}

/// An error as a task records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskError {
    pub code: String,
    pub message: String,
}

/// One event of a task's history, with the task's state after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    pub seq: u64,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub from: String,
    pub ts: String,
    pub state: TaskState,
}

/// A run's tasks as a tree by `parent_task_id`, with counts per state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunTasks {
    pub run_id: String,
    /// The tasks whose parent is not a task of the run, each with its children.
    pub tasks: Vec<Task>,
    /// Tasks per state (a workflow's: every planned-task state, zero included).
    pub counts: BTreeMap<TaskState, u64>,
    /// The run's usage (absent for a workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The run's budget is spent (absent for a workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_exhausted: Option<bool>,
    /// Set when the run is a workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
}

/// The tools the daemon's adapters serve, server by server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tools {
    pub servers: Vec<ToolServer>,
}

/// One server of tools (an MCP server the operator declared), its state and its tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolServer {
    /// `mcp:files`: what an allowlist names to allow all its tools.
    pub name: String,
    /// The adapter that serves it (`mcp`).
    pub adapter: String,
    /// How it is reached: `stdio` (a command the operator declared) or `http`.
    pub transport: String,
    pub state: ServerState,
    /// Why it is not ready, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Times it was started again after it stopped or failed.
    pub restarts: u32,
    pub tools: Vec<Tool>,
}

/// The tool calls waiting for a person's approval, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Approvals {
    pub pending: Vec<Approval>,
}

/// A tool call waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    /// The `tool.call`'s message id: what approving or denying names.
    pub call_id: String,
    pub tool: String,
    pub caller: String,
    /// The arguments the call would be made with.
    pub args: serde_json::Map<String, serde_json::Value>,
    pub run_id: String,
    pub thread_id: String,
    pub task_id: String,
    /// `policy` or `destructive` (see the `clutch.approval.requested.v1` payload).
    pub reason: String,
    /// When approval was asked for, and when the call expires undecided (RFC 3339).
    pub requested_at: String,
    pub expires_at: String,
}

/// Where a server of tools is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Being connected (the first time).
    Starting,
    /// Connected; its tools are listed.
    Ready,
    /// It stopped or failed; it is started again after a backoff.
    Restarting,
    /// Shut down with the daemon.
    Stopped,
}

impl ServerState {
    /// Its name, as JSON has it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Restarting => "restarting",
            ServerState::Stopped => "stopped",
        }
    }
}

/// A tool a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    /// `mcp:files/read_file`: what a `tool.call` names.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
    /// What the server says the tool does (MCP's hints; absent hints take MCP's defaults).
    pub annotations: ToolAnnotations,
}

/// A payload schema the registry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Schema {
    pub payload_type: String,
    /// Its `$id`: the ref a message's `schema_ref` names it by.
    pub schema_ref: String,
    /// Shipped with the daemon (not registered at run time).
    pub builtin: bool,
}

/// Positions' sessions, newest first (`sessions_list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Sessions {
    pub sessions: Vec<Session>,
}

/// A position's session: its team, its phase and how much has been said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Session {
    /// Its id: its run's id.
    pub id: String,
    pub position: String,
    pub pattern: String,
    pub status: crate::session::Phase,
    /// The position's workflow phase under way (`ANALYSIS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The task that stands for it: its outcome is the session's, cancelling it stops the session.
    pub root_task_id: String,
    pub thread_id: String,
    pub agents: Vec<SessionAgent>,
    /// The message types its position's protocol allows.
    pub protocol: Vec<String>,
    pub started_at: String,
    pub message_count: u32,
}

/// A member of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionAgent {
    pub id: String,
    pub role: String,
    /// `active`, or `failed` once its runner announced it failed.
    pub status: String,
}

/// Messages of a session, oldest first (`sessions_history`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionHistory {
    pub session_id: String,
    pub messages: Vec<SessionMessage>,
}

/// A message between a session's members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionMessage {
    pub id: String,
    pub seq: u64,
    pub ts: String,
    pub from: String,
    pub to: Vec<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub content: Value,
}

/// A session message stored (`sessions_send`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSent {
    pub id: String,
    pub seq: u64,
    /// Its recipients (`all` spelled out).
    pub to: Vec<String>,
}

/// A position invoked: its session (the run), the task that stands for it, its thread; once the
/// session has ended (an MCP task's result), that task's state and the message that ended it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Invoked {
    pub session_id: String,
    pub task_id: String,
    pub thread_id: String,
    pub position: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Ended>,
}

/// The routed tasks given to an agent or a person that have not ended, oldest first (`task_inbox`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Inbox {
    pub agent_id: String,
    pub tasks: Vec<InboxTask>,
}

/// A task waiting in an inbox: the task, and what was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InboxTask {
    pub task: Task,
    /// The request's payload: its goal, input and whatever else the requester sent.
    pub request: Value,
    /// The position session it is a turn of, if any (the session's id is its run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The message that ended a task: its `task.result`, `task.error`, `task.timeout` or `task.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ended {
    pub seq: u64,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub from: String,
    pub ts: String,
    pub payload: Value,
}

/// A page of runs, newest activity first.
pub type Runs = clutch_store::lists::Page<clutch_store::lists::RunSummary>;
/// A page of threads, newest activity first.
pub type Threads = clutch_store::lists::Page<clutch_store::lists::ThreadSummary>;
/// A page of tasks, newest activity first.
pub type Tasks = clutch_store::lists::Page<clutch_store::lists::TaskListing>;
/// A page of search results, most relevant first.
pub type Search = clutch_store::lists::Page<clutch_store::lists::SearchHit>;
