//! Durable workflows for agents that pull their work: a workflow is a run whose root task stands for
//! it, its planned tasks are child tasks, and every change is an event in the log. [`Workflows`] holds
//! them as the log says (workflows, planned tasks and their claims, checkpoints, workspaces); the
//! engine's gate asks it to vet each workflow event ([`Workflows::check`]) and to apply each committed one
//! ([`Workflows::apply`]), both through the one decision function, so the state is exactly the log's.
//!
//! Events (all on the workflow's run and thread):
//! - `task.request` `clutch.workflow.v1` `{name, source?, description?}`: the root task (a new run);
//! - `task.progress` `clutch.workflow.plan.v1` on the root `{summary?, tasks}`: a plan, followed in
//!   the same batch by `task.cancel` of the plan it replaces and one `task.request`
//!   `clutch.workflow.task.v1` `{name, description, depends_on: [task ids], parallel_group?, order}`
//!   per task, in a topological order (a dependency must already exist, so the log cannot hold a cycle);
//! - `task.accept` from an agent: a claim (its lease holds while the agent is alive);
//! - `task.progress` `clutch.workflow.status.v1` `{status: in_progress|blocked|pending, reason?}`;
//!   `task.result` `{outcome, outcome_detail?}`; `task.error` `{code, message, retryable, error}`;
//! - `task.progress` `clutch.checkpoint.v1` `{type, summary, detail?, files_changed?}` and
//!   `clutch.workflow.task_plan.v1` `{plan}`;
//! - `task.progress` `clutch.workspace.v1` on the root: a workspace as it now is.
//!
//! **Invariants:** only the holder writes to a held task (others get `LEASE_LOST`); a task is held by
//! at most one agent; the status moves only as [`allowed`] says; plain data only (snapshots).
//!
//! A lease lasts while its agent is alive: the reactor returns the tasks of an offline or removed agent
//! to pending with a recovery checkpoint. A plan is stored in one batch, its task requests only if its
//! plan event is, so the log never holds half a plan. The engine's "now" comes from
//! `engine::Options::clock` (see [`crate::clock`]).

pub mod api;
mod book;
pub mod context;
pub mod dag;
pub mod git;

pub use self::book::decide::{allowed, check_move};
pub use self::book::{PlannedTask, Stage, Workflow, Workflows, event, task_summary};

pub const WORKFLOW_PAYLOAD: &str = "clutch.workflow.v1";
pub const PLAN_PAYLOAD: &str = "clutch.workflow.plan.v1";
pub const TASK_PAYLOAD: &str = "clutch.workflow.task.v1";
pub const TASK_STATUS_PAYLOAD: &str = "clutch.workflow.status.v1";
pub const TASK_PLAN_PAYLOAD: &str = "clutch.workflow.task_plan.v1";
pub const CHECKPOINT_PAYLOAD: &str = "clutch.checkpoint.v1";
pub const WORKSPACE_PAYLOAD: &str = "clutch.workspace.v1";
/// `reason` of the daemon's release of a task whose holder went offline.
pub const LEASE_EXPIRED: &str = "lease_expired";
/// `reason` of a holder's own release.
pub const RELEASED: &str = "released";
/// `meta` member naming the plan event a batch's cancels and task requests belong to: they are
/// stored only if that plan is.
pub const PLAN_META: &str = "clutch_plan";
