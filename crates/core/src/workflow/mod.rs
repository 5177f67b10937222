//! Durable workflows for agents that pull their work: a workflow is a run whose root task stands for
//! it, its planned tasks are child tasks, and every change is an event in the log. [`Book`] holds
//! them as the log says (workflows, planned tasks and their claims, checkpoints, workspaces); the
//! engine's gate asks it to vet each workflow event ([`Book::check`]) and to apply each committed one
//! ([`Book::apply`]), both through the one decision function, so the state is exactly the log's.
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

pub mod api;
pub mod context;
pub mod dag;
pub mod git;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use clutch_proto::message::{Recipient, Sender};
use clutch_proto::{ErrorCode, Message, MessageType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use self::api::{CheckpointType, TaskStatus, WorkflowStatus};
use crate::Refusal;
use crate::router::Status as Liveness;
use crate::tasks::ORCHESTRATOR;

pub const WORKFLOW_PAYLOAD: &str = "clutch.workflow.v1";
pub const PLAN_PAYLOAD: &str = "clutch.workflow.plan.v1";
pub const TASK_PAYLOAD: &str = "clutch.workflow.task.v1";
pub const STATUS_PAYLOAD: &str = "clutch.workflow.status.v1";
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

/// The moves a planned task may make from `from` (one table; everything else is refused).
pub fn allowed(from: TaskStatus) -> &'static [TaskStatus] {
    use TaskStatus as S;
    match from {
        S::Pending => &[S::Claimed],
        S::Claimed => &[S::InProgress, S::Completed, S::Failed, S::Blocked, S::Pending],
        S::InProgress => &[S::Completed, S::Failed, S::Blocked, S::Pending],
        S::Blocked => &[S::InProgress, S::Pending, S::Failed],
        S::Completed | S::Failed => &[],
    }
}

/// Checks one move against [`allowed`]; the refusal lists the allowed moves.
pub fn check_move(task_id: &str, from: TaskStatus, to: TaskStatus) -> Result<(), Refusal> {
    let ok = allowed(from);
    if ok.contains(&to) {
        return Ok(());
    }
    let list = if ok.is_empty() {
        "none (it has ended)".to_owned()
    } else {
        ok.iter()
            .map(|s| if *s == TaskStatus::Claimed { "claimed (task_claim)" } else { s.as_str() })
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(Refusal::new(
        ErrorCode::InvalidTransition,
        format!("task {task_id} is {}; it cannot become {}. Allowed moves: {list}", from.as_str(), to.as_str()),
    )
    .field("status")
    .hint(format!("from {}: {list}", from.as_str())))
}

/// A workflow as the log says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    pub id: String,
    pub root_task_id: String,
    pub thread_id: String,
    pub name: String,
    pub source: Option<String>,
    pub description: Option<String>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub plan_summary: Option<String>,
    /// The live planned tasks, in the order they were stored (a topological order).
    pub tasks: Vec<String>,
    /// The live planned tasks by name (names are unique within a workflow).
    pub names: HashMap<String, String>,
    /// Some task was claimed: the plan can no longer be replaced.
    pub claimed: bool,
}

impl Workflow {
    /// Records `item` joining or leaving the task list. A planned task costs the same whatever the
    /// plan's size: nothing here (or in vetting it) walks the list, except a cancelled task's
    /// removal.
    fn list(&mut self, item: &Item, listing: Listing) {
        match listing {
            Listing::Same => {}
            Listing::Added => {
                self.tasks.push(item.id.clone());
                self.names.insert(item.name.clone(), item.id.clone());
            }
            Listing::Removed => {
                self.tasks.retain(|t| *t != item.id);
                if self.names.get(&item.name) == Some(&item.id) {
                    self.names.remove(&item.name);
                }
            }
        }
    }
}

/// How a task's event changes its workflow's task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Same,
    Added,
    Removed,
}

/// A planned task as the log says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub id: String,
    pub workflow_id: String,
    pub name: String,
    pub description: String,
    pub depends_on: Vec<String>,
    pub parallel_group: Option<String>,
    pub order: u32,
    pub status: TaskStatus,
    /// Replaced with its plan.
    pub cancelled: bool,
    /// The agent holding the lease (claimed, in progress, blocked).
    pub holder: Option<String>,
    /// Who last held it (and, once ended, who ended it).
    pub last_agent: Option<String>,
    /// Agents that released it or lost their lease: their writes are `LEASE_LOST`.
    pub former: Vec<String>,
    pub claimed_at: Option<String>,
    pub claim_seq: u64,
    pub reason: Option<String>,
    pub plan: Option<Value>,
    pub outcome: Option<String>,
    pub outcome_detail: Option<Value>,
    pub error: Option<String>,
    pub updated_at: String,
    /// The seq that ended it (completed or failed), for "most recent" orderings.
    pub ended_seq: Option<u64>,
}

/// Every workflow, as the log says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Book {
    workflows: BTreeMap<String, Workflow>,
    tasks: HashMap<String, Item>,
    /// Root task id → workflow id.
    roots: HashMap<String, String>,
    /// Agent → the tasks it holds.
    holds: BTreeMap<String, BTreeSet<String>>,
    checkpoints: HashMap<String, Vec<api::Checkpoint>>,
    workspaces: BTreeMap<String, api::Workspace>,
}

/// Workflow state as earlier messages of a batch being vetted leave it.
#[derive(Debug, Default)]
pub struct Stage {
    workflows: HashMap<String, Workflow>,
    tasks: HashMap<String, Item>,
    roots: HashMap<String, String>,
    /// Plan events admitted in this batch.
    plans: HashSet<String>,
}

/// What one event does. Made and consumed at once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Change {
    Workflow(Workflow),
    /// A task's new version, and how its workflow's task list changes.
    Task(Item, Listing),
    Checkpoint(api::Checkpoint),
    Workspace(api::Workspace),
    Nothing,
}

/// How an agent is, when the caller knows (vetting), else nothing is checked (applying).
type Live<'a> = Option<&'a dyn Fn(&str) -> Option<Liveness>>;

/// The book seen through a stage.
struct View<'a> {
    book: &'a Book,
    stage: Option<&'a Stage>,
}

impl View<'_> {
    fn task(&self, id: &str) -> Option<&Item> {
        self.stage.and_then(|s| s.tasks.get(id)).or_else(|| self.book.tasks.get(id))
    }
    fn workflow(&self, id: &str) -> Option<&Workflow> {
        self.stage.and_then(|s| s.workflows.get(id)).or_else(|| self.book.workflows.get(id))
    }
    fn root(&self, task_id: &str) -> Option<&str> {
        self.stage.and_then(|s| s.roots.get(task_id)).or_else(|| self.book.roots.get(task_id)).map(String::as_str)
    }
}

fn is_lifecycle(kind: MessageType) -> bool {
    matches!(
        kind,
        MessageType::TaskRequest
            | MessageType::TaskAccept
            | MessageType::TaskProgress
            | MessageType::TaskResult
            | MessageType::TaskError
            | MessageType::TaskCancel
            | MessageType::TaskTimeout
            | MessageType::RoutingDecision
            | MessageType::RoutingFailure
    )
}

impl Book {
    /// Whether the workflow code decides about `message` (a workflow request, or a lifecycle event
    /// of a workflow's task), rather than the routed-task state machine.
    pub fn concerns(&self, stage: Option<&Stage>, message: &Message) -> bool {
        if !is_lifecycle(message.kind) {
            return false;
        }
        let view = View { book: self, stage };
        (message.kind == MessageType::TaskRequest
            && message.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.workflow")))
            || view.task(&message.task_id).is_some()
            || view.root(&message.task_id).is_some()
    }

    /// Whether the task id belongs to a workflow (its root or a planned task).
    pub fn knows(&self, task_id: &str) -> bool {
        self.tasks.contains_key(task_id) || self.roots.contains_key(task_id)
    }

    /// Vets `message` against the state as `stage` leaves it, then stages its effect. `live` says how
    /// an agent is (for claims and lease expiry).
    pub fn check(
        &self,
        stage: &mut Stage,
        live: &dyn Fn(&str) -> Option<Liveness>,
        message: &Message,
    ) -> Result<(), Refusal> {
        let change = decide(&View { book: self, stage: Some(stage) }, Some(live), message, 0)?;
        if message.payload_type.as_deref() == Some(PLAN_PAYLOAD) {
            stage.plans.insert(message.id.clone());
        }
        match change {
            Change::Workflow(w) => {
                stage.roots.insert(w.root_task_id.clone(), w.id.clone());
                stage.workflows.insert(w.id.clone(), w);
            }
            Change::Task(item, listing) => {
                if listing != Listing::Same {
                    // The batch's own copy of the workflow, made once per batch.
                    let w = match stage.workflows.entry(item.workflow_id.clone()) {
                        Entry::Occupied(e) => Some(e.into_mut()),
                        Entry::Vacant(e) => self.workflows.get(&item.workflow_id).map(|w| e.insert(w.clone())),
                    };
                    if let Some(w) = w {
                        w.list(&item, listing);
                    }
                }
                stage.tasks.insert(item.id.clone(), item);
            }
            Change::Checkpoint(_) | Change::Workspace(_) | Change::Nothing => {}
        }
        Ok(())
    }

    /// Applies a committed event (vetted by [`Book::check`]; one that no longer passes is history, not
    /// state).
    pub fn apply(&mut self, seq: u64, message: &Message) {
        let change = match decide(&View { book: self, stage: None }, None, message, seq) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(seq, task_id = %message.task_id, reason = %e.message, "workflow event changes nothing");
                return;
            }
        };
        match change {
            Change::Workflow(w) => {
                self.roots.insert(w.root_task_id.clone(), w.id.clone());
                self.workflows.insert(w.id.clone(), w);
            }
            Change::Task(mut item, listing) => {
                if let Some(w) = self.workflows.get_mut(&item.workflow_id) {
                    w.list(&item, listing);
                }
                let old = self.tasks.get(&item.id).and_then(|o| o.holder.clone());
                if old != item.holder {
                    if let Some(a) = old
                        && let Some(set) = self.holds.get_mut(&a)
                    {
                        set.remove(&item.id);
                        if set.is_empty() {
                            self.holds.remove(&a);
                        }
                    }
                    if let Some(a) = &item.holder {
                        self.holds.entry(a.clone()).or_default().insert(item.id.clone());
                        item.claim_seq = seq;
                        if let Some(w) = self.workflows.get_mut(&item.workflow_id) {
                            w.claimed = true;
                        }
                    }
                }
                if item.status.is_final() && item.ended_seq.is_none() {
                    item.ended_seq = Some(seq);
                }
                if let Some(w) = self.workflows.get_mut(&item.workflow_id) {
                    w.updated_at = item.updated_at.clone();
                }
                self.tasks.insert(item.id.clone(), item);
            }
            Change::Checkpoint(mut c) => {
                c.seq = seq;
                if let Some(item) = self.tasks.get_mut(&c.task_id) {
                    item.updated_at = c.ts.clone();
                }
                self.checkpoints.entry(c.task_id.clone()).or_default().push(c);
            }
            Change::Workspace(w) => {
                if let Some(wf) = self.workflows.get_mut(&w.workflow_id) {
                    wf.updated_at = w.updated_at.clone();
                }
                self.workspaces.insert(w.id.clone(), w);
            }
            Change::Nothing => {}
        }
    }

    /// Tasks whose holder is no longer alive (offline, removed or unknown): (holder, task).
    pub fn expired(&self, live: impl Fn(&str) -> Option<Liveness>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (agent, tasks) in &self.holds {
            if matches!(live(agent), None | Some(Liveness::Offline | Liveness::Removed)) {
                out.extend(tasks.iter().map(|t| (agent.clone(), t.clone())));
            }
        }
        out
    }

    /// The daemon's release of a task whose holder's lease expired, and its recovery checkpoint.
    pub fn lease_expiry(&self, task_id: &str) -> Vec<Message> {
        let Some(item) = self.tasks.get(task_id) else { return Vec::new() };
        let Some(workflow) = self.workflows.get(&item.workflow_id) else { return Vec::new() };
        let holder = item.holder.clone().unwrap_or_default();
        let last = self.checkpoints.get(task_id).and_then(|c| c.last());
        let mut status = Map::new();
        status.insert("status".into(), json!("pending"));
        status.insert("reason".into(), json!(LEASE_EXPIRED));
        status.insert("previous_agent".into(), json!(holder));
        let mut release = event(workflow, &item.id, ORCHESTRATOR, MessageType::TaskProgress, STATUS_PAYLOAD, status);
        release.idempotency_key = Some(format!("clutch:lease:{}:{}", item.id, item.claim_seq));
        let summary = match last {
            Some(c) => format!(
                "{holder} went offline and lost its claim; the last checkpoint ({}) says: {}",
                serde_json::to_value(c.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                c.summary
            ),
            None => format!("{holder} went offline and lost its claim before recording any checkpoint"),
        };
        let mut note = Map::new();
        note.insert("type".into(), json!("recovery"));
        note.insert("summary".into(), json!(summary));
        note.insert(
            "detail".into(),
            json!({"previous_agent": holder, "previous_status": item.status, "last_checkpoint": last.map(|c| &c.id)}),
        );
        let mut recovery = event(workflow, &item.id, ORCHESTRATOR, MessageType::TaskProgress, CHECKPOINT_PAYLOAD, note);
        recovery.idempotency_key = Some(format!("clutch:recovery:{}:{}", item.id, item.claim_seq));
        vec![release, recovery]
    }

    pub fn workflow(&self, id: &str) -> Option<&Workflow> {
        self.workflows.get(id)
    }

    pub fn task(&self, id: &str) -> Option<&Item> {
        self.tasks.get(id)
    }

    pub fn workspace(&self, id: &str) -> Option<&api::Workspace> {
        self.workspaces.get(id)
    }

    /// The workflow a root task stands for.
    pub fn workflow_of_root(&self, task_id: &str) -> Option<&Workflow> {
        self.roots.get(task_id).and_then(|w| self.workflows.get(w))
    }

    fn items<'a>(&'a self, w: &'a Workflow) -> impl Iterator<Item = &'a Item> + 'a {
        w.tasks.iter().filter_map(|id| self.tasks.get(id))
    }

    /// Whether every dependency of `item` is completed.
    fn ready(&self, item: &Item) -> bool {
        item.depends_on.iter().all(|d| self.tasks.get(d).is_some_and(|t| t.status == TaskStatus::Completed))
    }

    /// Tasks that depend, directly or not, on a failed task: they can never run.
    fn doomed<'a>(&'a self, w: &'a Workflow) -> HashSet<&'a str> {
        let mut doomed: HashSet<&str> = HashSet::new();
        // The stored order is topological: dependencies come first.
        for item in self.items(w) {
            if item.status == TaskStatus::Failed || item.depends_on.iter().any(|d| doomed.contains(d.as_str())) {
                doomed.insert(item.id.as_str());
            }
        }
        doomed
    }

    /// The workflow's status, derived from its tasks (see [`WorkflowStatus`]).
    pub fn status(&self, w: &Workflow) -> WorkflowStatus {
        if w.tasks.is_empty() {
            return WorkflowStatus::Planning;
        }
        let items: Vec<&Item> = self.items(w).collect();
        if items.iter().all(|t| t.status == TaskStatus::Completed) {
            return WorkflowStatus::Completed;
        }
        let doomed = self.doomed(w);
        let active = items.iter().any(|t| matches!(t.status, TaskStatus::Claimed | TaskStatus::InProgress));
        let available = items.iter().any(|t| t.status == TaskStatus::Pending && self.ready(t));
        let can_run = items
            .iter()
            .any(|t| t.status.is_held() || (t.status == TaskStatus::Pending && !doomed.contains(t.id.as_str())));
        if items.iter().any(|t| t.status == TaskStatus::Failed) && !can_run {
            return WorkflowStatus::Failed;
        }
        if !active && !available && items.iter().any(|t| t.status == TaskStatus::Blocked) {
            return WorkflowStatus::Blocked;
        }
        WorkflowStatus::InProgress
    }

    pub fn summary(&self, w: &Workflow) -> api::WorkflowSummary {
        api::WorkflowSummary {
            id: w.id.clone(),
            name: w.name.clone(),
            source: w.source.clone(),
            description: w.description.clone(),
            status: self.status(w),
            root_task_id: w.root_task_id.clone(),
            thread_id: w.thread_id.clone(),
            created_by: w.created_by.clone(),
            created_at: w.created_at.clone(),
            updated_at: w.updated_at.clone(),
            total_tasks: w.tasks.len(),
            completed_tasks: self.items(w).filter(|t| t.status == TaskStatus::Completed).count(),
        }
    }

    /// Workflows, newest first, filtered by status.
    pub fn list(&self, statuses: &[WorkflowStatus], limit: usize) -> Vec<api::WorkflowSummary> {
        self.workflows
            .values()
            .rev()
            .map(|w| self.summary(w))
            .filter(|s| statuses.is_empty() || statuses.contains(&s.status))
            .take(limit)
            .collect()
    }

    /// The workflow's tasks in plan order.
    pub fn plan_order<'a>(&'a self, w: &'a Workflow) -> Vec<&'a Item> {
        let mut items: Vec<&Item> = self.items(w).collect();
        items.sort_by_key(|t| t.order);
        items
    }

    pub fn detail(&self, w: &Workflow) -> api::WorkflowDetail {
        api::WorkflowDetail {
            summary: self.summary(w),
            plan_summary: w.plan_summary.clone(),
            tasks: self.plan_order(w).into_iter().map(task_summary).collect(),
            workspaces: self.workspaces.values().filter(|s| s.workflow_id == w.id).cloned().collect(),
        }
    }

    /// Pending tasks whose dependencies are completed, in plan order.
    pub fn next(&self, w: &Workflow, limit: usize) -> Vec<api::TaskSummary> {
        self.plan_order(w)
            .into_iter()
            .filter(|t| t.status == TaskStatus::Pending && self.ready(t))
            .take(limit)
            .map(task_summary)
            .collect()
    }

    pub fn progress(&self, w: &Workflow) -> api::Progress {
        let items = self.plan_order(w);
        let mut counts: BTreeMap<String, usize> = TaskStatus::ALL.iter().map(|s| (s.as_str().to_owned(), 0)).collect();
        for t in &items {
            *counts.entry(t.status.as_str().to_owned()).or_default() += 1;
        }
        let completed = counts.get("completed").copied().unwrap_or(0);
        let total = items.len();
        let percent = if total == 0 { 0.0 } else { (completed as f64 * 1000.0 / total as f64).round() / 10.0 };
        let doomed = self.doomed(w);
        let name = |id: &str| self.tasks.get(id).map_or_else(|| id.to_owned(), |t| t.name.clone());
        let mut blocked = Vec::new();
        for t in &items {
            match t.status {
                TaskStatus::Blocked => blocked.push(api::BlockedTask {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    status: t.status,
                    why: t.reason.clone().unwrap_or_else(|| "reported blocked by its agent".into()),
                    waiting_on: Vec::new(),
                }),
                TaskStatus::Pending if !self.ready(t) => {
                    let waiting: Vec<String> = t
                        .depends_on
                        .iter()
                        .filter(|d| self.tasks.get(*d).is_none_or(|x| x.status != TaskStatus::Completed))
                        .cloned()
                        .collect();
                    let failed: Vec<String> =
                        waiting.iter().filter(|d| doomed.contains(d.as_str())).map(|d| name(d)).collect();
                    let why = if failed.is_empty() {
                        format!("waits for {}", waiting.iter().map(|d| name(d)).collect::<Vec<_>>().join(", "))
                    } else {
                        format!("cannot run: it depends on failed work ({})", failed.join(", "))
                    };
                    blocked.push(api::BlockedTask {
                        id: t.id.clone(),
                        name: t.name.clone(),
                        status: t.status,
                        why,
                        waiting_on: waiting,
                    });
                }
                _ => {}
            }
        }
        api::Progress {
            workflow_id: w.id.clone(),
            status: self.status(w),
            total,
            counts,
            percent,
            current: items
                .iter()
                .filter(|t| matches!(t.status, TaskStatus::Claimed | TaskStatus::InProgress))
                .map(|t| task_summary(t))
                .collect(),
            available: items
                .iter()
                .filter(|t| t.status == TaskStatus::Pending && self.ready(t))
                .map(|t| task_summary(t))
                .collect(),
            blocked,
        }
    }

    pub fn checkpoints(&self, task_id: &str) -> &[api::Checkpoint] {
        self.checkpoints.get(task_id).map_or(&[], Vec::as_slice)
    }

    pub fn task_detail(&self, item: &Item) -> api::TaskDetail {
        let parent = self.workflows.get(&item.workflow_id).map(|w| w.root_task_id.clone()).unwrap_or_default();
        api::TaskDetail {
            summary: task_summary(item),
            parent_task_id: parent,
            plan: item.plan.clone(),
            outcome_detail: item.outcome_detail.clone(),
            claimed_at: item.claimed_at.clone(),
            updated_at: item.updated_at.clone(),
            checkpoints: self.checkpoints(&item.id).to_vec(),
        }
    }

    /// Everything [`context::build`] may use for `item`.
    pub fn material(&self, item: &Item) -> Option<context::Material> {
        let w = self.workflows.get(&item.workflow_id)?;
        let outcome = |t: &Item| api::TaskOutcome {
            id: t.id.clone(),
            name: t.name.clone(),
            status: t.status,
            outcome: t.outcome.clone(),
            outcome_detail: t.outcome_detail.clone(),
            error: t.error.clone(),
        };
        let dependencies = item.depends_on.iter().filter_map(|d| self.tasks.get(d)).map(outcome).collect();
        let mut ended: Vec<&Item> = self
            .items(w)
            .filter(|t| t.id != item.id && t.status.is_final() && !item.depends_on.contains(&t.id))
            .collect();
        ended.sort_by_key(|t| std::cmp::Reverse(t.ended_seq));
        let checkpoints = self.checkpoints(&item.id).to_vec();
        Some(context::Material {
            workflow: api::ContextWorkflow {
                id: w.id.clone(),
                name: w.name.clone(),
                source: w.source.clone(),
                description: w.description.clone(),
                status: self.status(w),
                plan_summary: w.plan_summary.clone(),
                plan: self
                    .plan_order(w)
                    .into_iter()
                    .map(|t| api::PlanEntry {
                        id: t.id.clone(),
                        name: t.name.clone(),
                        status: t.status,
                        depends_on: t.depends_on.clone(),
                    })
                    .collect(),
            },
            task: api::ContextTask {
                id: item.id.clone(),
                name: item.name.clone(),
                description: item.description.clone(),
                status: item.status,
                agent_id: item.holder.clone(),
                depends_on: item.depends_on.clone(),
                plan: item.plan.clone(),
                checkpoint_count: checkpoints.len(),
                checkpoints,
            },
            dependencies,
            prior: ended.into_iter().map(outcome).collect(),
        })
    }
}

pub fn task_summary(t: &Item) -> api::TaskSummary {
    api::TaskSummary {
        id: t.id.clone(),
        workflow_id: t.workflow_id.clone(),
        name: t.name.clone(),
        description: t.description.clone(),
        status: t.status,
        depends_on: t.depends_on.clone(),
        parallel_group: t.parallel_group.clone(),
        order: t.order,
        agent_id: t.holder.clone().or_else(|| t.last_agent.clone()),
        reason: t.reason.clone(),
        outcome: t.outcome.clone(),
        error: t.error.clone(),
    }
}

/// A workflow event: a message on the workflow's run and thread about `task_id`.
pub fn event(
    w: &Workflow,
    task_id: &str,
    from: &str,
    kind: MessageType,
    payload_type: &str,
    payload: Map<String, Value>,
) -> Message {
    Message {
        v: clutch_proto::VERSION.to_owned(),
        id: clutch_proto::id::generate(clutch_proto::id::Kind::Message),
        ts: clutch_proto::validate::format_ts(std::time::SystemTime::now()),
        thread_id: w.thread_id.clone(),
        run_id: w.id.clone(),
        task_id: task_id.to_owned(),
        parent_task_id: (task_id != w.root_task_id).then(|| w.root_task_id.clone()),
        trace: None,
        from: Sender { agent_id: from.to_owned(), role: None },
        to: Vec::<Recipient>::new(),
        kind,
        domain: None,
        payload_type: (!payload_type.is_empty()).then(|| payload_type.to_owned()),
        schema_ref: None,
        payload,
        requires: Vec::new(),
        prefers: Vec::new(),
        security: None,
        attachments: Vec::new(),
        idempotency_key: None,
        attempt: 1,
        meta: Map::new(),
    }
}

// ---- the one decision function ----

fn invalid(why: String) -> Refusal {
    Refusal::new(ErrorCode::InvalidTransition, why).field("task_id")
}

fn validation(field: &str, why: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::ValidationFailed, why).field(field)
}

fn text<'a>(payload: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    payload.get(key).and_then(Value::as_str)
}

/// Non-empty text of at most `max` characters at `payload.key`.
fn required_text(payload: &Map<String, Value>, key: &str, max: usize) -> Result<String, Refusal> {
    match text(payload, key).map(str::trim) {
        Some(t) if !t.is_empty() && t.chars().count() <= max => Ok(t.to_owned()),
        Some(t) if !t.is_empty() => {
            Err(validation(&format!("payload.{key}"), format!("{key}: at most {max} characters")))
        }
        _ => Err(validation(&format!("payload.{key}"), format!("{key}: required (non-empty text)"))),
    }
}

/// What `message` does, against the state `view` shows. `live` is given when vetting (claims need a
/// live agent; lease expiry a dead holder); `seq` when applying.
fn decide(view: &View<'_>, live: Live<'_>, m: &Message, seq: u64) -> Result<Change, Refusal> {
    let pt = m.payload_type.as_deref().unwrap_or("");
    if let Some(stage) = view.stage
        && let Some(plan) = m.meta.get(PLAN_META).and_then(Value::as_str)
        && !stage.plans.contains(plan)
    {
        return Err(invalid(format!("{} belongs to plan {plan}, which was not stored", m.id)));
    }
    if m.kind == MessageType::TaskRequest {
        if view.task(&m.task_id).is_some() || view.root(&m.task_id).is_some() {
            return Err(invalid(format!("task {} already exists; a new request needs a new task_id", m.task_id)));
        }
        return match pt {
            WORKFLOW_PAYLOAD => new_workflow(view, m),
            TASK_PAYLOAD => new_task(view, m),
            _ => Err(validation("payload_type", format!("`{pt}` is not a workflow request type"))),
        };
    }
    if let Some(wf) = view.root(&m.task_id) {
        let w = view.workflow(wf).expect("a root has its workflow").clone();
        return on_root(view, w, m);
    }
    let Some(item) = view.task(&m.task_id) else { return Ok(Change::Nothing) };
    let item = item.clone();
    on_task(view, item, live, m, seq)
}

fn new_workflow(view: &View<'_>, m: &Message) -> Result<Change, Refusal> {
    if view.workflow(&m.run_id).is_some() {
        return Err(validation("run_id", format!("run {} already holds a workflow", m.run_id)));
    }
    let name = required_text(&m.payload, "name", 200)?;
    Ok(Change::Workflow(Workflow {
        id: m.run_id.clone(),
        root_task_id: m.task_id.clone(),
        thread_id: m.thread_id.clone(),
        name,
        source: text(&m.payload, "source").map(str::to_owned),
        description: text(&m.payload, "description").map(str::to_owned),
        created_by: m.from.agent_id.clone(),
        created_at: m.ts.clone(),
        updated_at: m.ts.clone(),
        plan_summary: None,
        tasks: Vec::new(),
        names: HashMap::new(),
        claimed: false,
    }))
}

fn new_task(view: &View<'_>, m: &Message) -> Result<Change, Refusal> {
    let Some(w) = m.parent_task_id.as_deref().and_then(|p| view.root(p)).and_then(|id| view.workflow(id)) else {
        return Err(validation("parent_task_id", "a planned task's parent is its workflow's root task"));
    };
    if w.id != m.run_id {
        return Err(validation("run_id", "a planned task belongs to its workflow's run"));
    }
    let name = required_text(&m.payload, "name", dag::NAME_MAX)?;
    if w.names.contains_key(&name) {
        return Err(validation("payload.name", format!("workflow {} already has a task named `{name}`", w.id)));
    }
    let mut depends_on = Vec::new();
    for (i, d) in m.payload.get("depends_on").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let Some(d) = d.as_str() else {
            return Err(validation(&format!("payload.depends_on[{i}]"), "a dependency is a task id"));
        };
        if !view.task(d).is_some_and(|t| t.workflow_id == w.id && !t.cancelled) {
            return Err(validation(
                &format!("payload.depends_on[{i}]"),
                format!("{d} is not a task of workflow {} stored before this one", w.id),
            ));
        }
        depends_on.push(d.to_owned());
    }
    let order = m.payload.get("order").and_then(Value::as_u64).map_or(w.tasks.len() as u32, |o| o as u32);
    let item = Item {
        id: m.task_id.clone(),
        workflow_id: w.id.clone(),
        name,
        description: text(&m.payload, "description").unwrap_or_default().to_owned(),
        depends_on,
        parallel_group: text(&m.payload, "parallel_group").map(str::to_owned),
        order,
        status: TaskStatus::Pending,
        cancelled: false,
        holder: None,
        last_agent: None,
        former: Vec::new(),
        claimed_at: None,
        claim_seq: 0,
        reason: None,
        plan: None,
        outcome: None,
        outcome_detail: None,
        error: None,
        updated_at: m.ts.clone(),
        ended_seq: None,
    };
    Ok(Change::Task(item, Listing::Added))
}

fn on_root(view: &View<'_>, mut w: Workflow, m: &Message) -> Result<Change, Refusal> {
    let pt = m.payload_type.as_deref().unwrap_or("");
    match (m.kind, pt) {
        (MessageType::TaskProgress, PLAN_PAYLOAD) => {
            if let Some(t) = w
                .tasks
                .iter()
                .filter_map(|t| view.task(t))
                .find(|t| t.holder.is_some() || t.status != TaskStatus::Pending)
            {
                return Err(invalid(format!(
                    "the plan of workflow {} cannot be replaced: task `{}` was already claimed",
                    w.id, t.name
                )));
            }
            if w.claimed {
                return Err(invalid(format!("the plan of workflow {} cannot be replaced: work has begun", w.id)));
            }
            w.plan_summary = text(&m.payload, "summary").map(str::to_owned);
            w.updated_at = m.ts.clone();
            Ok(Change::Workflow(w))
        }
        (MessageType::TaskProgress, WORKSPACE_PAYLOAD) => {
            let ws: api::Workspace = serde_json::from_value(Value::Object(m.payload.clone()))
                .map_err(|e| validation("payload", format!("not a workspace: {e}")))?;
            if ws.workflow_id != w.id {
                return Err(validation("payload.workflow_id", "a workspace is recorded on its own workflow"));
            }
            clutch_proto::id::check(clutch_proto::id::Kind::Workspace, &ws.id)
                .map_err(|e| validation("payload.id", e))?;
            if let Some(t) = ws.task_ids.iter().find(|t| view.task(t).is_none_or(|i| i.workflow_id != w.id)) {
                return Err(validation("payload.task_ids", format!("{t} is not a task of workflow {}", w.id)));
            }
            Ok(Change::Workspace(ws))
        }
        (MessageType::TaskProgress | MessageType::TaskCancel, _) if !pt.starts_with("clutch.") => {
            if m.kind == MessageType::TaskCancel {
                return Err(invalid(format!("workflow {} cannot be cancelled (yet)", w.id)));
            }
            Ok(Change::Nothing)
        }
        _ => Err(invalid(format!(
            "task {} is the root of workflow {}: claim and update its planned tasks instead",
            m.task_id, w.id
        ))),
    }
}

/// Who may write to `item`: its holder (or the daemon). Otherwise `LEASE_LOST` when someone else
/// holds it or the writer held it before; `move_` writes to an unheld task fall to the move table.
fn writer(item: &Item, from: &str, move_: bool) -> Result<(), Refusal> {
    if item.status.is_final() {
        return Err(invalid(format!(
            "task {} has ended ({}); nothing more can be written to it",
            item.id,
            item.status.as_str()
        )));
    }
    if from == ORCHESTRATOR || item.holder.as_deref() == Some(from) {
        return Ok(());
    }
    let lost = |why: String| {
        Err(Refusal::new(ErrorCode::LeaseLost, why)
            .field("agent_id")
            .hint("claim the task (task_claim) before writing to it; keep the lease alive with agent_heartbeat"))
    };
    match &item.holder {
        Some(other) => lost(format!("task {} is held by {other}, not {from}", item.id)),
        None if item.former.iter().any(|a| a == from) => {
            lost(format!("{from} no longer holds task {} (its claim was released or expired)", item.id))
        }
        None if move_ => Ok(()),
        None => lost(format!("task {} is not claimed by {from}", item.id)),
    }
}

fn on_task(view: &View<'_>, mut item: Item, live: Live<'_>, m: &Message, seq: u64) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    let daemon = from == ORCHESTRATOR;
    let pt = m.payload_type.as_deref().unwrap_or("");
    if item.cancelled {
        return Err(invalid(format!("task {} was cancelled when its workflow's plan was replaced", item.id)));
    }
    item.updated_at = m.ts.clone();
    match m.kind {
        MessageType::TaskCancel => {
            let creator = view.workflow(&item.workflow_id).map(|w| w.created_by.as_str());
            if !(daemon || from.starts_with("user:") || creator == Some(from)) {
                return Err(Refusal::new(
                    ErrorCode::Forbidden,
                    format!("only the workflow's creator, a user or the daemon may cancel task {}", item.id),
                )
                .field("from.agent_id"));
            }
            if item.status != TaskStatus::Pending {
                return Err(invalid(format!(
                    "task {} is {}; only pending tasks are cancelled",
                    item.id,
                    item.status.as_str()
                )));
            }
            item.cancelled = true;
            Ok(Change::Task(item, Listing::Removed))
        }
        MessageType::TaskAccept => claim(view, item, live, m, seq),
        MessageType::TaskProgress => match pt {
            STATUS_PAYLOAD => {
                let status = text(&m.payload, "status");
                let to = match status {
                    Some("in_progress") => TaskStatus::InProgress,
                    Some("blocked") => TaskStatus::Blocked,
                    Some("pending") => TaskStatus::Pending,
                    Some("completed" | "failed") => {
                        return Err(validation(
                            "payload.status",
                            "completed and failed are reported with task.result and task.error",
                        ));
                    }
                    _ => return Err(validation("payload.status", "status: in_progress, blocked or pending")),
                };
                let reason = text(&m.payload, "reason").map(str::to_owned);
                if daemon && reason.as_deref() == Some(LEASE_EXPIRED) {
                    let Some(holder) = item.holder.clone() else {
                        return Err(invalid(format!("task {} is not held; no lease can expire", item.id)));
                    };
                    if let Some(live) = live
                        && matches!(live(&holder), Some(Liveness::Online | Liveness::Stale))
                    {
                        return Err(invalid(format!("{holder} is alive and keeps its claim on task {}", item.id)));
                    }
                } else {
                    writer(&item, from, true)?;
                }
                check_move(&item.id, item.status, to)?;
                if to == TaskStatus::Pending {
                    if let Some(h) = item.holder.take()
                        && !item.former.contains(&h)
                    {
                        item.former.push(h);
                    }
                    item.claimed_at = None;
                }
                item.status = to;
                item.reason = reason;
                Ok(Change::Task(item, Listing::Same))
            }
            CHECKPOINT_PAYLOAD => {
                writer(&item, from, false)?;
                if daemon && item.holder.is_some() {
                    return Err(invalid(format!("task {} is held: the daemon records no checkpoint on it", item.id)));
                }
                let kind: CheckpointType =
                    serde_json::from_value(m.payload.get("type").cloned().unwrap_or(Value::Null)).map_err(|_| {
                        validation("payload.type", "type: plan, progress, decision, error, recovery or complete")
                    })?;
                let summary = required_text(&m.payload, "summary", 4000)?;
                let mut files = Vec::new();
                for (i, f) in m.payload.get("files_changed").and_then(Value::as_array).into_iter().flatten().enumerate()
                {
                    let Some(f) = f.as_str() else {
                        return Err(validation(&format!("payload.files_changed[{i}]"), "a file is a path (text)"));
                    };
                    files.push(f.to_owned());
                }
                Ok(Change::Checkpoint(api::Checkpoint {
                    id: m.id.clone(),
                    seq,
                    ts: m.ts.clone(),
                    task_id: item.id.clone(),
                    kind,
                    summary,
                    detail: m.payload.get("detail").filter(|d| !d.is_null()).cloned(),
                    files_changed: files,
                    agent_id: from.to_owned(),
                }))
            }
            TASK_PLAN_PAYLOAD => {
                writer(&item, from, false)?;
                let plan = m.payload.get("plan").filter(|p| !p.is_null()).cloned();
                if plan.is_none() {
                    return Err(validation("payload.plan", "plan: required"));
                }
                item.plan = plan;
                Ok(Change::Task(item, Listing::Same))
            }
            p if p.starts_with("clutch.") => {
                Err(validation("payload_type", format!("`{p}` is not a workflow task event")))
            }
            _ => {
                writer(&item, from, false)?;
                Ok(Change::Nothing)
            }
        },
        MessageType::TaskResult => {
            writer(&item, from, true)?;
            check_move(&item.id, item.status, TaskStatus::Completed)?;
            item.outcome = Some(required_text(&m.payload, "outcome", 100_000).map_err(|e| e.field("outcome"))?);
            item.outcome_detail = m.payload.get("outcome_detail").filter(|d| !d.is_null()).cloned();
            end(&mut item, TaskStatus::Completed, from);
            Ok(Change::Task(item, Listing::Same))
        }
        MessageType::TaskError => {
            writer(&item, from, true)?;
            check_move(&item.id, item.status, TaskStatus::Failed)?;
            let error = text(&m.payload, "error").or_else(|| text(&m.payload, "message")).map(str::trim).unwrap_or("");
            if error.is_empty() {
                return Err(validation("error", "error: required (non-empty text) for failed"));
            }
            item.error = Some(error.to_owned());
            end(&mut item, TaskStatus::Failed, from);
            Ok(Change::Task(item, Listing::Same))
        }
        _ => Err(invalid(format!("task {} belongs to a workflow: it is claimed, not routed", item.id))),
    }
}

fn end(item: &mut Item, status: TaskStatus, from: &str) {
    item.status = status;
    item.last_agent = item.holder.take().or_else(|| Some(from.to_owned()));
    item.reason = None;
}

fn claim(view: &View<'_>, mut item: Item, live: Live<'_>, m: &Message, seq: u64) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    // A task another agent took and finished meanwhile lost the race like one it still holds: the
    // claimer learns who, as data, and moves on to the next task.
    let taken_by = if item.status.is_final() { item.last_agent.as_ref() } else { item.holder.as_ref() };
    if item.status.is_final() && taken_by.is_none() {
        return Err(invalid(format!("task {} has ended ({}); it cannot be claimed", item.id, item.status.as_str())));
    }
    if let Some(holder) = taken_by {
        let mut r = Refusal::new(ErrorCode::AlreadyClaimed, format!("task {} is already claimed by {holder}", item.id))
            .field("task_id");
        r.problems = vec![clutch_proto::Problem { path: "already_claimed_by".into(), message: holder.clone() }];
        return Err(r);
    }
    if let Some(live) = live {
        match live(from) {
            None | Some(Liveness::Removed) => {
                return Err(Refusal::new(ErrorCode::AgentNotFound, format!("no agent `{from}` is registered"))
                    .field("agent_id")
                    .hint("register it first (agent_register, or POST /v1/agents)"));
            }
            Some(Liveness::Offline) => {
                return Err(Refusal::new(ErrorCode::Forbidden, format!("{from} is offline and cannot take a lease"))
                    .field("agent_id")
                    .hint("send a heartbeat first"));
            }
            Some(_) => {}
        }
    }
    let unfinished: Vec<String> = item
        .depends_on
        .iter()
        .filter_map(|d| view.task(d))
        .filter(|d| d.status != TaskStatus::Completed)
        .map(|d| format!("`{}` ({})", d.name, d.status.as_str()))
        .collect();
    if !unfinished.is_empty() {
        return Err(invalid(format!(
            "task {} cannot be claimed yet: it depends on unfinished tasks {}",
            item.id,
            unfinished.join(", ")
        ))
        .hint("workflow_next_tasks lists the tasks that can be claimed now"));
    }
    check_move(&item.id, item.status, TaskStatus::Claimed)?;
    item.status = TaskStatus::Claimed;
    item.holder = Some(from.to_owned());
    item.last_agent = Some(from.to_owned());
    item.former.retain(|a| a != from);
    item.claimed_at = Some(m.ts.clone());
    item.claim_seq = seq;
    item.reason = None;
    Ok(Change::Task(item, Listing::Same))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_move_table_allows_exactly_the_documented_moves() {
        use TaskStatus as S;
        let legal: &[(S, S)] = &[
            (S::Pending, S::Claimed),
            (S::Claimed, S::InProgress),
            (S::Claimed, S::Completed),
            (S::Claimed, S::Failed),
            (S::Claimed, S::Blocked),
            (S::Claimed, S::Pending),
            (S::InProgress, S::Completed),
            (S::InProgress, S::Failed),
            (S::InProgress, S::Blocked),
            (S::InProgress, S::Pending),
            (S::Blocked, S::InProgress),
            (S::Blocked, S::Pending),
            (S::Blocked, S::Failed),
        ];
        for from in S::ALL {
            for to in S::ALL {
                let r = check_move("task_x", from, to);
                if legal.contains(&(from, to)) {
                    assert!(r.is_ok(), "{from:?} → {to:?} should be allowed");
                } else {
                    let e = r.expect_err("illegal");
                    assert_eq!(e.code, ErrorCode::InvalidTransition);
                    assert!(e.message.contains("Allowed moves:"), "{}", e.message);
                    for ok in allowed(from) {
                        assert!(e.message.contains(ok.as_str()), "{} lists {}", e.message, ok.as_str());
                    }
                }
            }
        }
    }
}
