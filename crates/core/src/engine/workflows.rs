//! The workflow operations as engine methods: each vets what it can under the engine's lock for a
//! clear answer, builds the workflow events (see [`crate::workflow`]) and appends them through the
//! writer, whose gate has the last word; reads answer from the state. Git runs outside the lock.

use std::path::Path;
use std::time::{Duration, SystemTime};

use clutch_proto::error::Next;
use clutch_proto::id::{self, Kind, Party};
use clutch_proto::{ErrorCode, Message, MessageType};
use serde_json::{Map, Value};

use super::Engine;
use crate::tasks::ORCHESTRATOR;
use crate::workflow::api::{self, TaskStatus};
use crate::workflow::{self, PlannedTask, Workflow, Workflows, context, dag, git};
use crate::{Error, Refusal, Result, payload, view};

/// `workflow_next_tasks`' page when the caller names none, and the largest it may ask for.
pub const NEXT_PAGE: usize = 10;
pub const NEXT_PAGE_MAX: usize = 500;

impl Engine {
    /// `workflow_create`: a new run whose root task stands for the workflow.
    pub async fn workflow_create(&self, req: api::CreateWorkflow) -> Result<api::WorkflowSummary> {
        let from = sender(req.agent_id.as_deref(), true)?;
        let name = req.name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "name: 1 to 200 characters").field("name").into());
        }
        let shell = Workflow {
            id: id::generate(Kind::Run),
            root_task_id: id::generate(Kind::Task),
            thread_id: id::generate(Kind::Thread),
            name: name.to_owned(),
            source: None,
            description: None,
            created_by: from.clone(),
            created_at: String::new(),
            updated_at: String::new(),
            plan_summary: None,
            tasks: Vec::new(),
            names: Default::default(),
            claimed: false,
            replaced: Vec::new(),
        };
        let payload = payload::object(&payload::Workflow {
            name: name.to_owned(),
            source: req.source.clone(),
            description: req.description.clone(),
        });
        let root = shell.root_task_id.clone();
        let message =
            workflow::event(&shell, &root, &from, MessageType::TaskRequest, workflow::WORKFLOW_PAYLOAD, payload);
        self.inner.log.append_one(message).await?;
        let state = self.state();
        let w = state.workflows.workflow(&shell.id).ok_or_else(|| lost_write("the workflow"))?;
        Ok(state.workflows.summary(w))
    }

    /// `workflow_list`: newest first, filtered by status: the workflows in memory, that is the open
    /// ones and those that ended within `ended_retention` (an older one is read by its id).
    pub fn workflow_list(&self, req: &api::ListWorkflows) -> Vec<api::WorkflowSummary> {
        self.state().workflows.list(&req.status, req.limit.unwrap_or(100))
    }

    /// `workflow_get`, of a workflow in memory (see [`Engine::find_workflow`] for any).
    pub fn workflow_get(&self, workflow_id: &str) -> Result<api::WorkflowDetail> {
        detail(&self.state().workflows, workflow_id)
    }

    /// `workflow_get` of any workflow: one that ended and left memory is read from its run's events.
    pub async fn find_workflow(&self, workflow_id: &str) -> Result<api::WorkflowDetail> {
        self.on_workflow(workflow_id, |book| detail(book, workflow_id)).await
    }

    /// `workflow_progress`, of a workflow in memory.
    pub fn workflow_progress(&self, workflow_id: &str) -> Result<api::Progress> {
        progress(&self.state().workflows, workflow_id)
    }

    /// `workflow_progress` of any workflow (from the log once it left memory).
    pub async fn find_workflow_progress(&self, workflow_id: &str) -> Result<api::Progress> {
        self.on_workflow(workflow_id, |book| progress(book, workflow_id)).await
    }

    /// `workflow_next_tasks` of any workflow (one that left memory has ended: none is next).
    pub async fn find_next_tasks(&self, req: &api::NextTasks) -> Result<api::NextTasksAnswer> {
        self.on_workflow(&req.workflow_id, |book| next_tasks(book, req)).await
    }

    /// A planned task's checkpoints of any workflow (from the log once it left memory).
    pub async fn find_checkpoints(&self, task_id: &str) -> Result<Vec<api::Checkpoint>> {
        self.on_planned(task_id, |book, item| Ok(book.checkpoints(&item.id).to_vec())).await
    }

    /// [`Engine::task_detail`] of any workflow (from the log once it left memory).
    pub async fn find_task_detail(&self, task_id: &str) -> Result<api::TaskDetail> {
        self.on_planned(task_id, |book, item| Ok(book.task_detail(item))).await
    }

    /// `answer`, unless it is `TASK_NOT_FOUND` for a planned task whose workflow ended and left
    /// memory: then the refusal says the task has ended, as it would have before.
    async fn or_ended<T>(&self, task_id: &str, answer: Result<T>) -> Result<T> {
        let Err(e) = &answer else { return answer };
        if e.code() != ErrorCode::TaskNotFound {
            return answer;
        }
        let tombstone = self.state().tombstones.get(task_id);
        let ended = match tombstone {
            Some(phase) => Some(phase.as_str().to_owned()),
            None => self
                .on_planned(task_id, |_, item| Ok(item.status))
                .await
                .ok()
                .filter(|s| s.is_final())
                .map(|s| s.as_str().to_owned()),
        };
        match ended {
            Some(status) => Err(Refusal::new(
                ErrorCode::InvalidTransition,
                format!("task {task_id} has ended ({status}); nothing more can be written to it"),
            )
            .field("task_id")
            .into()),
            None => answer,
        }
    }

    /// Runs `f` on the workflows holding `workflow_id`: memory's, or, when it ended and left
    /// memory, a book rebuilt from its run's events by the same rules.
    async fn on_workflow<T>(&self, workflow_id: &str, f: impl Fn(&Workflows) -> Result<T>) -> Result<T> {
        {
            let state = self.state();
            if state.workflows.workflow(workflow_id).is_some() {
                return f(&state.workflows);
            }
        }
        f(&self.workflow_from_log(workflow_id).await?)
    }

    /// Runs `f` on planned task `task_id` and the workflows holding it (memory's, or its
    /// workflow's rebuilt from the log when it left memory).
    async fn on_planned<T>(&self, task_id: &str, f: impl Fn(&Workflows, &PlannedTask) -> Result<T>) -> Result<T> {
        {
            let state = self.state();
            if state.workflows.knows(task_id) {
                let (_, item) = planned(&state.workflows, task_id)?;
                return f(&state.workflows, item);
            }
        }
        let book = self.workflow_of_task(task_id).await?.unwrap_or_default();
        let (_, item) = planned(&book, task_id)?;
        f(&book, item)
    }

    /// The workflow task `task_id` (planned, or a root) belongs to, rebuilt from the log; `None`
    /// when its first event is no workflow's request.
    pub(super) async fn workflow_of_task(&self, task_id: &str) -> Result<Option<Workflows>> {
        let filter = clutch_store::Filter { task_id: Some(task_id.to_owned()), ..Default::default() };
        let first = self.log().read(&filter, 0, 1).await?;
        let Some(m) = first.first().and_then(|e| e.message().ok()) else { return Ok(None) };
        if m.kind != MessageType::TaskRequest
            || !m.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.workflow"))
        {
            return Ok(None);
        }
        Ok(Some(self.workflow_from_log(&m.run_id).await?))
    }

    /// The workflow of run `run_id` as its events build it, in a book of its own.
    pub(super) async fn workflow_from_log(&self, run_id: &str) -> Result<Workflows> {
        let mut book = Workflows::default();
        let filter = clutch_store::Filter { run_id: Some(run_id.to_owned()), ..Default::default() };
        self.each_event(&filter, |seq, m| {
            if book.concerns(None, m) {
                book.apply(seq, m);
            }
        })
        .await?;
        Ok(book)
    }

    /// `workflow_next_tasks`: pending tasks whose dependencies are completed, in plan order.
    /// A page of at most `limit` (default [`NEXT_PAGE`], at most [`NEXT_PAGE_MAX`]) after `cursor`,
    /// with the cursor of the next page when more follow. A cursor is the plan position the page
    /// ended at, so paging on returns each task that stays ready once.
    pub fn workflow_next_tasks(&self, req: &api::NextTasks) -> Result<api::NextTasksAnswer> {
        next_tasks(&self.state().workflows, req)
    }

    /// `workflow_set_plan`: validates the plan as a DAG, then stores it in one batch (replacing a plan
    /// none of whose tasks was claimed).
    pub async fn workflow_set_plan(&self, req: api::SetPlan) -> Result<api::PlanSet> {
        let from = sender(req.agent_id.as_deref(), true)?;
        let (deps, order) = dag::check(&req.tasks)?;
        for (i, t) in req.tasks.iter().enumerate() {
            if t.parallel_group.as_ref().is_some_and(|g| g.is_empty() || g.chars().count() > 128) {
                return Err(Refusal::new(ErrorCode::ValidationFailed, "parallel_group: 1 to 128 characters")
                    .field(format!("tasks[{i}].parallel_group"))
                    .into());
            }
        }
        let (w, replaced) = {
            let state = self.state();
            let w = state.workflows.workflow(&req.workflow_id).ok_or_else(|| no_workflow(&req.workflow_id))?;
            if let Some(t) =
                w.tasks.iter().filter_map(|t| state.workflows.task(t)).find(|t| t.status != TaskStatus::Pending)
            {
                return Err(Refusal::new(
                    ErrorCode::InvalidTransition,
                    format!(
                        "the plan of workflow {} cannot be replaced: task `{}` is {}",
                        w.id,
                        t.name,
                        t.status.as_str()
                    ),
                )
                .field("workflow_id")
                .into());
            }
            (w.clone(), w.tasks.clone())
        };
        let ids: Vec<String> = req.tasks.iter().map(|_| id::generate(Kind::Task)).collect();
        let depends_on = |i: usize| deps[i].iter().map(|d| ids[*d].clone()).collect::<Vec<_>>();
        let entries = req
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| payload::PlanEntry {
                id: ids[i].clone(),
                name: t.name.trim().to_owned(),
                depends_on: depends_on(i),
                parallel_group: t.parallel_group.clone(),
            })
            .collect();
        let payload = payload::object(&payload::Plan { summary: req.summary.clone(), tasks: entries });
        let plan =
            workflow::event(&w, &w.root_task_id, &from, MessageType::TaskProgress, workflow::PLAN_PAYLOAD, payload);
        let plan_id = plan.id.clone();
        let mut messages = vec![plan];
        for old in &replaced {
            let payload =
                payload::object(&payload::Cancel { message: "replaced by a new plan".into(), cancel_id: None });
            let mut cancel = workflow::event(&w, old, ORCHESTRATOR, MessageType::TaskCancel, "", payload);
            cancel.meta.insert(workflow::PLAN_META.into(), Value::from(plan_id.clone()));
            messages.push(cancel);
        }
        for &i in &order {
            let t = &req.tasks[i];
            let payload = payload::object(&payload::PlannedTask {
                name: t.name.trim().to_owned(),
                description: t.description.clone(),
                depends_on: depends_on(i),
                parallel_group: t.parallel_group.clone(),
                order: Some(i as u32),
            });
            let mut request =
                workflow::event(&w, &ids[i], &from, MessageType::TaskRequest, workflow::TASK_PAYLOAD, payload);
            request.meta.insert(workflow::PLAN_META.into(), Value::from(plan_id.clone()));
            messages.push(request);
        }
        for outcome in self.inner.log.append(messages).await? {
            outcome?;
        }
        let state = self.state();
        let tasks = ids
            .iter()
            .map(|id| state.workflows.task(id).map(workflow::task_summary).ok_or_else(|| lost_write("a planned task")))
            .collect::<Result<Vec<_>>>()?;
        Ok(api::PlanSet { workflow_id: w.id.clone(), tasks, replaced })
    }

    /// `task_claim`: `{success: true, lease}`, or `{success: false, already_claimed_by}` when another
    /// agent holds the task (data, not an error).
    pub async fn task_claim(&self, req: api::Claim) -> Result<api::ClaimAnswer> {
        let task_id = req.task_id.clone();
        let answer = self.task_claim_now(req).await;
        self.or_ended(&task_id, answer).await
    }

    async fn task_claim_now(&self, req: api::Claim) -> Result<api::ClaimAnswer> {
        let agent = sender(Some(&req.agent_id), false)?;
        let message = {
            let state = self.state();
            let (w, item) = planned(&state.workflows, &req.task_id)?;
            match &item.holder {
                Some(h) if *h == agent => return Ok(self.granted(&state, &agent)),
                Some(h) => return Ok(refused_claim(h)),
                None if item.status.is_final() && item.last_agent.is_some() => {
                    return Ok(refused_claim(item.last_agent.as_deref().unwrap_or_default()));
                }
                None => {}
            }
            if state.agents.get(&agent).is_none_or(|a| a.status == crate::registry::Status::Removed) {
                return Err(super::not_found(&agent));
            }
            workflow::event(w, &item.id, &agent, MessageType::TaskAccept, "", Map::new())
        };
        match self.inner.log.append_one(message).await {
            Ok(_) => Ok(self.granted(&self.state(), &agent)),
            Err(Error::Refused(r)) if r.code == ErrorCode::AlreadyClaimed => {
                let holder = r.problems.iter().find(|p| p.path == "already_claimed_by").map(|p| p.message.clone());
                Ok(refused_claim(&holder.unwrap_or_default()))
            }
            Err(e) => Err(e),
        }
    }

    /// `task_release`: the holder gives the task back (pending, for another agent).
    pub async fn task_release(&self, req: api::Release) -> Result<api::TaskSummary> {
        let task_id = req.task_id.clone();
        let answer = self.task_release_now(req).await;
        self.or_ended(&task_id, answer).await
    }

    async fn task_release_now(&self, req: api::Release) -> Result<api::TaskSummary> {
        let payload = payload::object(&payload::StatusChange {
            status: TaskStatus::Pending,
            reason: Some(workflow::RELEASED.to_owned()),
            note: req.reason.clone(),
            previous_agent: None,
        });
        let message = self.task_write(&req.task_id, req.agent_id.as_deref(), |w, item, from| {
            if item.holder.is_none() {
                return Err(release_unheld(item));
            }
            Ok(workflow::event(w, &item.id, from, MessageType::TaskProgress, workflow::TASK_STATUS_PAYLOAD, payload))
        })?;
        self.inner.log.append_one(message).await?;
        self.summary_of(&req.task_id)
    }

    /// `task_update_status`: in_progress, blocked, pending (a release), completed (with `outcome`) or
    /// failed (with `error`); anything the move table does not allow is `INVALID_TRANSITION`.
    pub async fn task_update_status(&self, req: api::UpdateStatus) -> Result<api::TaskSummary> {
        let task_id = req.id.clone();
        let answer = self.task_update_status_now(req).await;
        self.or_ended(&task_id, answer).await
    }

    async fn task_update_status_now(&self, req: api::UpdateStatus) -> Result<api::TaskSummary> {
        let refuse = |field: &str, why: &str| -> Error {
            Refusal::new(ErrorCode::ValidationFailed, why.to_owned()).field(field.to_owned()).into()
        };
        let (kind, payload_type, payload) = match req.status {
            TaskStatus::Claimed => {
                return Err(Refusal::new(ErrorCode::ValidationFailed, "a task is claimed with a claim, not a status")
                    .field("status")
                    .next(Next::ClaimTask { task_id: req.id.clone() })
                    .into());
            }
            TaskStatus::Completed => {
                let outcome = req.outcome.as_deref().map(str::trim).filter(|o| !o.is_empty());
                let outcome = outcome.ok_or_else(|| refuse("outcome", "outcome: required for completed"))?;
                let p = payload::Outcome { outcome: outcome.to_owned(), outcome_detail: req.outcome_detail.clone() };
                (MessageType::TaskResult, "", payload::object(&p))
            }
            TaskStatus::Failed => {
                let error = req.error.as_deref().map(str::trim).filter(|o| !o.is_empty());
                let error = error.ok_or_else(|| refuse("error", "error: required for failed"))?;
                let p = payload::TaskError {
                    code: ErrorCode::TaskFailed.as_str().into(),
                    message: error.to_owned(),
                    retryable: false,
                    details: None,
                    error: Some(error.to_owned()),
                };
                (MessageType::TaskError, "", payload::object(&p))
            }
            status => {
                let reason = match (status, &req.reason) {
                    (_, Some(r)) => Some(r.clone()),
                    (TaskStatus::Pending, None) => Some(workflow::RELEASED.to_owned()),
                    _ => None,
                };
                let p = payload::StatusChange { status, reason, note: None, previous_agent: None };
                (MessageType::TaskProgress, workflow::TASK_STATUS_PAYLOAD, payload::object(&p))
            }
        };
        let to = req.status;
        let message = self.task_write(&req.id, req.agent_id.as_deref(), |w, item, from| {
            if item.holder.is_none() {
                // Nobody holds it: the move table explains (a pending task can only be claimed).
                workflow::check_move(&item.id, item.status, to)?;
            }
            Ok(workflow::event(w, &item.id, from, kind, payload_type, payload))
        })?;
        self.inner.log.append_one(message).await?;
        self.summary_of(&req.id)
    }

    /// `task_set_plan`: how the holder means to do the task.
    pub async fn task_set_plan(&self, req: api::SetTaskPlan) -> Result<api::TaskDetail> {
        let task_id = req.task_id.clone();
        let answer = self.task_set_plan_now(req).await;
        self.or_ended(&task_id, answer).await
    }

    async fn task_set_plan_now(&self, req: api::SetTaskPlan) -> Result<api::TaskDetail> {
        if req.plan.is_null() {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "plan: required").field("plan").into());
        }
        let payload = payload::object(&payload::TaskPlan { plan: req.plan });
        let message = self.task_write(&req.task_id, req.agent_id.as_deref(), |w, item, from| {
            Ok(workflow::event(w, &item.id, from, MessageType::TaskProgress, workflow::TASK_PLAN_PAYLOAD, payload))
        })?;
        self.inner.log.append_one(message).await?;
        self.task_detail(&req.task_id)
    }

    /// `checkpoint_add`.
    pub async fn checkpoint_add(&self, req: api::AddCheckpoint) -> Result<api::Checkpoint> {
        let task_id = req.task_id.clone();
        let answer = self.checkpoint_add_now(req).await;
        self.or_ended(&task_id, answer).await
    }

    async fn checkpoint_add_now(&self, req: api::AddCheckpoint) -> Result<api::Checkpoint> {
        if req.summary.trim().is_empty() {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "summary: required").field("summary").into());
        }
        let payload = payload::object(&payload::Checkpoint {
            kind: req.kind,
            summary: req.summary.trim().to_owned(),
            detail: req.detail.filter(|d| !d.is_null()),
            files_changed: req.files_changed,
        });
        let message = self.task_write(&req.task_id, req.agent_id.as_deref(), |w, item, from| {
            Ok(workflow::event(w, &item.id, from, MessageType::TaskProgress, workflow::CHECKPOINT_PAYLOAD, payload))
        })?;
        let id = message.id.clone();
        self.inner.log.append_one(message).await?;
        let state = self.state();
        state
            .workflows
            .checkpoints(&req.task_id)
            .iter()
            .rev()
            .find(|c| c.id == id)
            .cloned()
            .ok_or_else(|| lost_write("the checkpoint"))
    }

    /// A task's checkpoints, oldest first.
    pub fn checkpoints(&self, task_id: &str) -> Result<Vec<api::Checkpoint>> {
        let state = self.state();
        planned(&state.workflows, task_id)?;
        Ok(state.workflows.checkpoints(task_id).to_vec())
    }

    /// A planned task with its plan, outcome and checkpoints.
    pub fn task_detail(&self, task_id: &str) -> Result<api::TaskDetail> {
        let state = self.state();
        let (_, item) = planned(&state.workflows, task_id)?;
        Ok(state.workflows.task_detail(item))
    }

    /// `task_load_context`: the task, its plan and checkpoints, its dependencies' and the workflow's
    /// outcomes, within `max_tokens` (see [`crate::workflow::context`] for the priority order).
    pub async fn task_load_context(&self, req: api::LoadContext) -> Result<api::ContextAnswer> {
        // A task of a workflow that ended and left memory is read from the log.
        let material = self
            .on_planned(&req.task_id, |book, item| book.material(item).ok_or_else(|| lost_write("the task's workflow")))
            .await?;
        // Counting tokens is CPU work: off the async threads, and never under the engine's lock.
        let include = req.include;
        let max = req.max_tokens;
        tokio::task::spawn_blocking(move || context::build(material, &include, max))
            .await
            .map_err(Error::task)?
            .map_err(Error::from)
    }

    /// `workspace_create`: a git worktree on a new branch (unless `create_worktree` is false), linked
    /// to tasks of the workflow. A git failure stores nothing.
    pub async fn workspace_create(&self, req: api::CreateWorkspace) -> Result<api::Workspace> {
        let from = sender(req.agent_id.as_deref(), true)?;
        let branch = req.branch.trim().to_owned();
        if branch.is_empty() {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "branch: required").field("branch").into());
        }
        let w = {
            let state = self.state();
            let w = state.workflows.workflow(&req.workflow_id).ok_or_else(|| no_workflow(&req.workflow_id))?;
            if let Some(t) = req.task_ids.iter().find(|t| !w.tasks.contains(t)) {
                return Err(Refusal::new(
                    ErrorCode::ValidationFailed,
                    format!("{t} is not a task of workflow {}", w.id),
                )
                .field("task_ids")
                .into());
            }
            w.clone()
        };
        // Every path inside the operator's roots: the one named, the repository it is in, and the
        // worktree's; each checked again just before git runs and after it made the worktree.
        let roots = &self.inner.options.workspace_roots;
        let repo = roots.check(Path::new(&req.repo_path), "repo_path")?;
        let top = git::toplevel(&repo).await?;
        let top = roots.check(&top, "repo_path").map_err(|_| {
            roots.outside(Path::new(&req.repo_path), "repo_path").hint(format!(
                "the repository's top level, {}, is outside them; declare it with `{}`",
                top.display(),
                crate::roots::KEY
            ))
        })?;
        let base = match req.base_branch.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
            Some(b) => b.to_owned(),
            None => git::head(&top).await?,
        };
        let mut path = None;
        if req.create_worktree {
            git::check_branch(&top, &branch, &base).await?;
            let at = match &req.path {
                Some(p) => roots.check(Path::new(p), "path")?,
                None => roots.check(&git::default_path(&top, &branch), "path").map_err(|r| {
                    r.hint("the default place, beside the repository, is outside the roots: give `path` inside them")
                })?,
            };
            if roots.check(&top, "repo_path")? != top || roots.check(&at, "path")? != at {
                return Err(Refusal::new(ErrorCode::PathNotAllowed, "path: changed while the workspace was made")
                    .field("path")
                    .into());
            }
            git::add(&top, &branch, &at, &base).await?;
            if at.canonicalize().ok().and_then(|made| roots.check(&made, "path").ok()).is_none() {
                git::undo(&top, &branch, &at).await;
                return Err(roots.outside(&at, "path").into());
            }
            path = Some(at);
        }
        let now = clutch_proto::validate::format_ts(SystemTime::now());
        let ws = api::Workspace {
            id: id::generate(Kind::Workspace),
            workflow_id: w.id.clone(),
            branch: branch.clone(),
            base_branch: base,
            repo_path: top.to_string_lossy().into_owned(),
            path: path.as_ref().map(|p| p.to_string_lossy().into_owned()),
            task_ids: req.task_ids.clone(),
            status: api::WorkspaceStatus::Active,
            merge_commit: None,
            worktree: path.is_some(),
            created_at: now.clone(),
            updated_at: now,
        };
        if let Err(e) = self.record_workspace(&w, &from, &ws).await {
            if let Some(p) = &path {
                git::undo(&top, &branch, p).await;
            }
            return Err(e);
        }
        Ok(ws)
    }

    /// `workspace_update`: status (merged, abandoned), `merge_commit`, and removal of the worktree
    /// (refused while it has uncommitted changes; then nothing is stored).
    pub async fn workspace_update(&self, req: api::UpdateWorkspace) -> Result<api::Workspace> {
        let from = sender(req.agent_id.as_deref(), true)?;
        let (w, mut ws) = {
            let state = self.state();
            let ws = state.workflows.workspace(&req.id).cloned().ok_or_else(|| {
                Error::from(
                    Refusal::new(ErrorCode::NotFound, format!("no workspace `{}`", req.id))
                        .field("id")
                        .next(Next::ShowWorkflows { workflow_id: None }),
                )
            })?;
            let w = state
                .workflows
                .workflow(&ws.workflow_id)
                .cloned()
                .ok_or_else(|| lost_write("the workspace's workflow"))?;
            (w, ws)
        };
        if let Some(c) = &req.merge_commit
            && (c.is_empty() || c.len() > 64 || !c.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "merge_commit: a commit hash (hex)")
                .field("merge_commit")
                .into());
        }
        if req.cleanup_worktree
            && ws.worktree
            && let Some(path) = &ws.path
        {
            // The recorded paths are inside the roots of the day they were made; git runs only if
            // they still are (the operator may have narrowed them, or a symlink been swapped in).
            let roots = &self.inner.options.workspace_roots;
            let top = roots.check(Path::new(&ws.repo_path), "repo_path")?;
            let path = roots.check(Path::new(path), "cleanup_worktree")?;
            git::remove(&top, &path).await?;
            ws.worktree = false;
        }
        if let Some(s) = req.status {
            ws.status = s;
        }
        if let Some(c) = req.merge_commit {
            ws.merge_commit = Some(c);
        }
        ws.updated_at = clutch_proto::validate::format_ts(SystemTime::now());
        self.record_workspace(&w, &from, &ws).await?;
        Ok(ws)
    }

    async fn record_workspace(&self, w: &Workflow, from: &str, ws: &api::Workspace) -> Result<()> {
        let payload = payload::object(ws);
        let message =
            workflow::event(w, &w.root_task_id, from, MessageType::TaskProgress, workflow::WORKSPACE_PAYLOAD, payload);
        self.inner.log.append_one(message).await.map(|_| ())
    }

    /// Builds a write to a planned task as `agent` (or, when none is named, its holder).
    fn task_write(
        &self,
        task_id: &str,
        agent: Option<&str>,
        build: impl FnOnce(&Workflow, &PlannedTask, &str) -> std::result::Result<Message, Refusal>,
    ) -> Result<Message> {
        let named = agent.map(|a| sender(Some(a), false)).transpose()?;
        let state = self.state();
        let (w, item) = planned(&state.workflows, task_id)?;
        if item.status.is_final() {
            return Err(Refusal::new(
                ErrorCode::InvalidTransition,
                format!("task {} has ended ({}); nothing more can be written to it", item.id, item.status.as_str()),
            )
            .field("task_id")
            .into());
        }
        if let Some(n) = &named
            && item.holder.is_none()
            && item.former.contains(n)
        {
            return Err(Refusal::new(
                ErrorCode::LeaseLost,
                format!("{n} no longer holds task {} (its claim was released or expired)", item.id),
            )
            .field("agent_id")
            .next(Next::ClaimTask { task_id: item.id.clone() })
            .into());
        }
        let from = match named.or_else(|| item.holder.clone()) {
            Some(f) => f,
            None => {
                // Nobody to act as: let the builder explain (e.g. the move table), else LEASE_LOST.
                build(w, item, ORCHESTRATOR)?;
                return Err(Refusal::new(ErrorCode::LeaseLost, format!("task {} is not claimed by anyone", item.id))
                    .field("agent_id")
                    .next(Next::ClaimTask { task_id: item.id.clone() })
                    .into());
            }
        };
        Ok(build(w, item, &from)?)
    }

    fn summary_of(&self, task_id: &str) -> Result<api::TaskSummary> {
        let state = self.state();
        let (_, item) = planned(&state.workflows, task_id)?;
        Ok(workflow::task_summary(item))
    }

    /// The answer to a granted claim: the lease lasts until the agent has been silent for
    /// `offline_after`.
    fn granted(&self, state: &super::State, agent: &str) -> api::ClaimAnswer {
        let last_seen = state.agents.get(agent).map_or(0, |a| a.last_seen_ms);
        let expires =
            last_seen.max(self.inner.options.clock.now_ms()) + self.inner.options.offline_after.as_millis() as i64;
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(expires.max(0) as u64);
        api::ClaimAnswer {
            success: true,
            lease: Some(api::Lease {
                agent_id: agent.to_owned(),
                expires_at: clutch_proto::validate::format_ts(at),
                // Each face says how, in its own words.
                renew: String::new(),
            }),
            already_claimed_by: None,
        }
    }

    /// A workflow task as the task view shows it (root or planned), if it is one.
    pub(super) fn workflow_task_view(workflows: &Workflows, task_id: &str) -> Option<view::Task> {
        let blank = |run_id: &str, thread_id: &str, kind: view::TaskKind, state: view::TaskState| view::Task {
            task_id: task_id.to_owned(),
            run_id: run_id.to_owned(),
            thread_id: thread_id.to_owned(),
            parent_task_id: None,
            kind,
            name: None,
            state,
            agent: None,
            requester: None,
            attempt: 0,
            routings: 0,
            progress: None,
            requires: Vec::new(),
            error: None,
            usage: None,
            history: None,
            children: None,
            workflow: None,
            workflow_task: None,
        };
        if let Some(w) = workflows.workflow_of_root(task_id) {
            let detail = workflows.detail(w);
            let mut v = blank(&w.id, &w.thread_id, view::TaskKind::Workflow, detail.summary.status.into());
            v.name = Some(w.name.clone());
            v.requester = Some(w.created_by.clone());
            v.workflow = Some(detail);
            return Some(v);
        }
        let item = workflows.task(task_id)?;
        let w = workflows.workflow(&item.workflow_id)?;
        let detail = workflows.task_detail(item);
        let state = if item.cancelled { view::TaskState::Cancelled } else { item.status.into() };
        let mut v = blank(&w.id, &w.thread_id, view::TaskKind::WorkflowTask, state);
        v.parent_task_id = Some(detail.parent_task_id.clone());
        v.name = Some(item.name.clone());
        v.agent = item.holder.clone().or_else(|| item.last_agent.clone());
        v.requester = Some(w.created_by.clone());
        v.error = detail
            .summary
            .error
            .clone()
            .map(|message| view::TaskError { code: ErrorCode::TaskFailed.as_str().into(), message });
        v.workflow_task = Some(detail);
        Some(v)
    }
}

/// Who a workflow write comes from: a named sender (never the daemon's own), or, when `anonymous`
/// writes are allowed and none is named, the daemon.
pub(super) fn sender(agent: Option<&str>, anonymous: bool) -> Result<String> {
    match agent {
        Some(a) => {
            id::check_party(Party::Sender, a)
                .map_err(|e| Refusal::new(ErrorCode::ValidationFailed, format!("agent_id: {e}")).field("agent_id"))?;
            if a == ORCHESTRATOR {
                return Err(Refusal::new(ErrorCode::Forbidden, format!("{ORCHESTRATOR} is the daemon's own sender"))
                    .field("agent_id")
                    .into());
            }
            Ok(a.to_owned())
        }
        None if anonymous => Ok(ORCHESTRATOR.to_owned()),
        None => Err(Refusal::new(ErrorCode::ValidationFailed, "agent_id: required").field("agent_id").into()),
    }
}

/// A planned task and its workflow; `TASK_NOT_FOUND` otherwise.
fn planned<'a>(workflows: &'a Workflows, task_id: &str) -> Result<(&'a Workflow, &'a PlannedTask)> {
    if workflows.workflow_of_root(task_id).is_some() {
        return Err(Refusal::new(
            ErrorCode::InvalidTransition,
            format!("task {task_id} is a workflow's root: claim and update its planned tasks instead"),
        )
        .field("task_id")
        .into());
    }
    let not_found = || {
        Error::from(
            Refusal::new(ErrorCode::TaskNotFound, format!("no workflow task `{task_id}`"))
                .field("task_id")
                .next(Next::ShowWorkflows { workflow_id: None }),
        )
    };
    let item = workflows.task(task_id).filter(|t| !t.cancelled).ok_or_else(not_found)?;
    let w = workflows.workflow(&item.workflow_id).ok_or_else(not_found)?;
    Ok((w, item))
}

fn no_workflow(id: &str) -> Error {
    Refusal::new(ErrorCode::RunNotFound, format!("no workflow `{id}`"))
        .field("workflow_id")
        .next(Next::ShowWorkflows { workflow_id: None })
        .into()
}

fn refused_claim(holder: &str) -> api::ClaimAnswer {
    api::ClaimAnswer { success: false, lease: None, already_claimed_by: Some(holder.to_owned()) }
}

fn release_unheld(item: &PlannedTask) -> Refusal {
    match item.status {
        TaskStatus::Pending => Refusal::new(
            ErrorCode::InvalidTransition,
            format!("task {} is pending: there is nothing to release", item.id),
        )
        .field("task_id"),
        s => Refusal::new(ErrorCode::InvalidTransition, format!("task {} is {}", item.id, s.as_str())).field("task_id"),
    }
}

/// A write was acknowledged but its effect is not in the state: it was refused as a duplicate of
/// something else, or the state moved on at once.
fn lost_write(what: &str) -> Error {
    Error::Refused(Refusal::new(ErrorCode::Internal, format!("{what} was stored but is not in the engine's state")))
}

/// A page of workflow `req.workflow_id`'s next tasks (see [`Engine::workflow_next_tasks`]).
fn next_tasks(workflows: &Workflows, req: &api::NextTasks) -> Result<api::NextTasksAnswer> {
    let limit = match req.limit {
        None => NEXT_PAGE,
        Some(n @ 1..=NEXT_PAGE_MAX) => n,
        Some(_) => {
            return Err(Refusal::new(ErrorCode::ValidationFailed, format!("limit: 1 to {NEXT_PAGE_MAX}"))
                .field("limit")
                .into());
        }
    };
    let after = match &req.cursor {
        None => None,
        Some(c) => Some(c.strip_prefix("after:").and_then(|n| n.parse::<u32>().ok()).ok_or_else(|| {
            Refusal::new(
                ErrorCode::ValidationFailed,
                "cursor: not one this tool gave (pass `next_cursor` back as it came)",
            )
            .field("cursor")
        })?),
    };
    let w = workflows.workflow(&req.workflow_id).ok_or_else(|| no_workflow(&req.workflow_id))?;
    let (tasks, more) = workflows.next(w, after, limit);
    let next_cursor = more.then(|| tasks.last().map(|t| format!("after:{}", t.order))).flatten();
    Ok(api::NextTasksAnswer { workflow_id: w.id.clone(), tasks, next_cursor })
}

fn detail(workflows: &Workflows, workflow_id: &str) -> Result<api::WorkflowDetail> {
    let w = workflows.workflow(workflow_id).ok_or_else(|| no_workflow(workflow_id))?;
    Ok(workflows.detail(w))
}

fn progress(workflows: &Workflows, workflow_id: &str) -> Result<api::Progress> {
    let w = workflows.workflow(workflow_id).ok_or_else(|| no_workflow(workflow_id))?;
    Ok(workflows.progress(w))
}
