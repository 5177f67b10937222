//! The workflow tools of the seed's agent lifecycle: plan a workflow, find and claim its tasks, record
//! plans and checkpoints, load context, finish, and isolate work in git worktrees. Each is one handler
//! calling one engine method with `core::workflow::api` types; writes act as the agent the caller's
//! token allows.

use clutch_core::Refusal;
use clutch_core::workflow::api;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::from_core;
use crate::tools::{Context, Hints, Lane, Tool, tool};

const READ: Hints = Hints { read_only: true, destructive: false, idempotent: true };
const WRITE: Hints = Hints { read_only: false, destructive: false, idempotent: false };

/// The workflow tools, in no particular order (the registry sorts).
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "workflow_create",
            "Create a workflow",
            "Create a workflow for a multi-step piece of work (name, and where it comes from). Then give it \
             tasks with `workflow_set_plan`. Answers the workflow's id (`run_...`).",
            Lane::Coordination,
            WRITE,
            create,
        )
        .acting_as("agent_id"),
        tool(
            "workflow_set_plan",
            "Set a workflow's plan",
            "Give a workflow its tasks: each with a name, a description, and `depends_on` naming earlier \
             tasks by name or index. Refused as a whole if the dependencies form a cycle or name an unknown \
             task. A plan may be replaced until a task has been claimed. Answers each task's id.",
            Lane::Coordination,
            WRITE,
            set_plan,
        )
        .acting_as("agent_id"),
        tool(
            "workflow_get",
            "Get a workflow",
            "A workflow's name, status, plan and tasks. Changes nothing.",
            Lane::Lifecycle,
            READ,
            get,
        ),
        tool(
            "workflow_list",
            "List workflows",
            "List workflows, newest first, optionally only those in some statuses (`planning`, \
             `in_progress`, `blocked`, `completed`, `failed`). After a context reset, list `in_progress` \
             workflows to find your work. Changes nothing.",
            Lane::Lifecycle,
            READ,
            list,
        ),
        tool(
            "workflow_progress",
            "Workflow progress",
            "Counts of a workflow's tasks per status, percent done, the tasks being worked on and the \
             blocked ones with why. Changes nothing.",
            Lane::Lifecycle,
            READ,
            progress,
        ),
        tool(
            "workflow_next_tasks",
            "Next available tasks",
            "The workflow's tasks that can start now: pending, not claimed, every dependency completed, \
             in plan order, 10 a page (`limit` up to 500); when more follow, pass `next_cursor` back as \
             `cursor`. Claim one with `task_claim`. Changes nothing.",
            Lane::Lifecycle,
            READ,
            next_tasks,
        ),
        tool(
            "task_claim",
            "Claim a task",
            "Claim a task for yourself, atomically. Answers `{success: true, lease}` or, when another \
             agent was first, `{success: false, already_claimed_by}`: then try the next task. Keep the \
             lease by calling `agent_heartbeat`; if you go offline the task returns to pending.",
            Lane::Lifecycle,
            WRITE,
            claim,
        )
        .acting_as("agent_id"),
        tool(
            "task_release",
            "Release a task",
            "Give a task you hold back: it returns to pending for another agent.",
            Lane::Lifecycle,
            WRITE,
            release,
        )
        .acting_as("agent_id"),
        tool(
            "task_get",
            "Get a task",
            "A task's status, holder, plan, outcome and checkpoints. Changes nothing.",
            Lane::Lifecycle,
            READ,
            task_get,
        ),
        tool(
            "task_set_plan",
            "Record a task's plan",
            "Record how you mean to do the task you hold (text or structured steps).",
            Lane::Lifecycle,
            WRITE,
            task_set_plan,
        )
        .acting_as("agent_id"),
        tool(
            "task_update_status",
            "Update a task's status",
            "Move a task you hold: `in_progress`, `blocked` (with `reason`), `completed` (with `outcome`, \
             required) or `failed` (with `error`, required), or `pending` to give it back. A move the \
             task's status does not allow is refused, naming the allowed ones.",
            Lane::Lifecycle,
            WRITE,
            update_status,
        )
        .acting_as("agent_id"),
        tool(
            "task_load_context",
            "Load a task's context",
            "Everything needed to work on a task, within `max_tokens` (default 8000): the workflow's plan, \
             the task with its plan and recent checkpoints (`all_checkpoints` after a context reset), and \
             the outcomes of its dependencies and of prior tasks. Says what was trimmed. Changes nothing.",
            Lane::Lifecycle,
            READ,
            load_context,
        ),
        tool(
            "checkpoint_add",
            "Add a checkpoint",
            "Record progress on a task you hold (`plan`, `progress`, `decision`, `error`, `recovery`, \
             `complete`) with a summary, optional detail and the files changed, so that you or another \
             agent can resume after a crash or a context reset.",
            Lane::Lifecycle,
            WRITE,
            checkpoint_add,
        )
        .acting_as("agent_id"),
        tool(
            "checkpoint_list",
            "List checkpoints",
            "A task's checkpoints, oldest first. Changes nothing.",
            Lane::Lifecycle,
            READ,
            checkpoint_list,
        ),
        tool(
            "workspace_create",
            "Create a workspace",
            "Make a git worktree on a new branch (from `base_branch`) in the repository at `repo_path`, \
             linked to tasks, so agents working in parallel do not step on each other. Git errors (not a \
             repository, branch exists) are reported and nothing is recorded.",
            Lane::Lifecycle,
            WRITE,
            workspace_create,
        )
        .acting_as("agent_id"),
        tool(
            "workspace_update",
            "Update a workspace",
            "Record a workspace's fate (`merged` with `merge_commit`, or `abandoned`) and, with \
             `cleanup_worktree`, remove its worktree (refused while it has uncommitted changes).",
            Lane::Lifecycle,
            Hints { read_only: false, destructive: true, idempotent: false },
            workspace_update,
        )
        .acting_as("agent_id"),
    ]
}

/// A workflow, by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkflowId {
    /// The workflow id (`run_...`) from `workflow_create` or `workflow_list`.
    workflow_id: String,
}

/// A task, by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskId {
    /// The task id (`task_...`).
    task_id: String,
}

/// `workflow_list`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Workflows {
    workflows: Vec<api::WorkflowSummary>,
}

/// `checkpoint_list`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Checkpoints {
    checkpoints: Vec<api::Checkpoint>,
}

/// The agent a write acts as: the one named, if the caller may act as it, or the caller's own.
fn acting(ctx: &Context, named: Option<String>) -> Result<Option<String>, Refusal> {
    ctx.caller.acting_agent(named.as_deref())
}

async fn create(ctx: Context, mut input: api::CreateWorkflow) -> Result<api::WorkflowSummary, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.workflow_create(input).await.map_err(from_core)
}

async fn set_plan(ctx: Context, mut input: api::SetPlan) -> Result<api::PlanSet, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.workflow_set_plan(input).await.map_err(from_core)
}

async fn get(ctx: Context, input: WorkflowId) -> Result<api::WorkflowDetail, Refusal> {
    ctx.engine.find_workflow(&input.workflow_id).await.map_err(from_core)
}

async fn list(ctx: Context, input: api::ListWorkflows) -> Result<Workflows, Refusal> {
    Ok(Workflows { workflows: ctx.engine.workflow_list(&input) })
}

async fn progress(ctx: Context, input: WorkflowId) -> Result<api::Progress, Refusal> {
    ctx.engine.find_workflow_progress(&input.workflow_id).await.map_err(from_core)
}

async fn next_tasks(ctx: Context, input: api::NextTasks) -> Result<api::NextTasksAnswer, Refusal> {
    ctx.engine.find_next_tasks(&input).await.map_err(from_core)
}

async fn claim(ctx: Context, mut input: api::Claim) -> Result<api::ClaimAnswer, Refusal> {
    if let Some(agent) = acting(&ctx, Some(std::mem::take(&mut input.agent_id)))? {
        input.agent_id = agent;
    }
    let mut answer = ctx.engine.task_claim(input).await.map_err(from_core)?;
    if let Some(lease) = &mut answer.lease {
        lease.renew = "agent_heartbeat".into();
    }
    Ok(answer)
}

async fn release(ctx: Context, mut input: api::Release) -> Result<api::TaskSummary, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.task_release(input).await.map_err(from_core)
}

async fn task_get(ctx: Context, input: TaskId) -> Result<api::TaskDetail, Refusal> {
    ctx.engine.find_task_detail(&input.task_id).await.map_err(from_core)
}

async fn task_set_plan(ctx: Context, mut input: api::SetTaskPlan) -> Result<api::TaskDetail, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.task_set_plan(input).await.map_err(from_core)
}

async fn update_status(ctx: Context, mut input: api::UpdateStatus) -> Result<api::TaskSummary, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.task_update_status(input).await.map_err(from_core)
}

async fn load_context(ctx: Context, input: api::LoadContext) -> Result<api::ContextAnswer, Refusal> {
    ctx.engine.task_load_context(input).await.map_err(from_core)
}

async fn checkpoint_add(ctx: Context, mut input: api::AddCheckpoint) -> Result<api::Checkpoint, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.checkpoint_add(input).await.map_err(from_core)
}

async fn checkpoint_list(ctx: Context, input: TaskId) -> Result<Checkpoints, Refusal> {
    Ok(Checkpoints { checkpoints: ctx.engine.find_checkpoints(&input.task_id).await.map_err(from_core)? })
}

async fn workspace_create(ctx: Context, mut input: api::CreateWorkspace) -> Result<api::Workspace, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.workspace_create(input).await.map_err(from_core)
}

async fn workspace_update(ctx: Context, mut input: api::UpdateWorkspace) -> Result<api::Workspace, Refusal> {
    input.agent_id = acting(&ctx, input.agent_id.take())?;
    ctx.engine.workspace_update(input).await.map_err(from_core)
}
