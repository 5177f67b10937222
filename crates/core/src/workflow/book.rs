//! The workflows as the log says ([`Workflows`]): each workflow, its planned tasks and their claims,
//! checkpoints and workspaces, and what the engine asks of them (vet an event, apply one, list and
//! show). Vetting and applying both go through the decision function in `decide`.
//!
//! Each workflow's pending tasks by plan position are derived, and rebuilt after a snapshot loads
//! ([`Workflows::reindex`]), so that `next` walks those rather than the whole plan on every ask.

pub(super) mod decide;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use clutch_proto::{Message, MessageType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use self::decide::decide;
use super::api::{CheckpointType, TaskStatus, WorkflowStatus};
use super::*;
use crate::registry;
use crate::tasks::ORCHESTRATOR;
use crate::{Refusal, payload};

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
    /// Tasks of plans replaced since, still kept (their ids stay taken): so that the whole
    /// workflow can leave memory without a walk of every planned task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
}

impl Workflow {
    /// Records `item` joining or leaving the task list. A planned task costs the same whatever the
    /// plan's size: nothing here (or in vetting it) walks the list, except a cancelled task's
    /// removal.
    fn list(&mut self, item: &PlannedTask, listing: Listing) {
        match listing {
            Listing::Same => {}
            Listing::Added => {
                self.tasks.push(item.id.clone());
                self.names.insert(item.name.clone(), item.id.clone());
            }
            Listing::Removed => {
                self.tasks.retain(|t| *t != item.id);
                self.replaced.push(item.id.clone());
                if self.names.get(&item.name) == Some(&item.id) {
                    self.names.remove(&item.name);
                }
            }
        }
    }
}

/// How a task's event changes its workflow's task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    Same,
    Added,
    Removed,
}

/// A planned task as the log says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedTask {
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
pub struct Workflows {
    workflows: BTreeMap<String, Workflow>,
    tasks: HashMap<String, PlannedTask>,
    /// Root task id → workflow id.
    roots: HashMap<String, String>,
    /// Agent → the tasks it holds.
    holds: BTreeMap<String, BTreeSet<String>>,
    checkpoints: HashMap<String, Vec<api::Checkpoint>>,
    workspaces: BTreeMap<String, api::Workspace>,
    /// Workflow → its pending tasks by plan position (`order`, id): what [`Workflows::next`] walks,
    /// rather than every planned task on each agent's ask. Derived, so not saved:
    /// [`Workflows::reindex`] rebuilds it after a load.
    #[serde(skip)]
    pending: HashMap<String, BTreeSet<(u32, String)>>,
}

/// Whether `t` is one of its workflow's pending tasks (a replaced plan's are not).
fn waits(t: &PlannedTask) -> bool {
    t.status == TaskStatus::Pending && !t.cancelled
}

/// Adds `t` to its workflow's pending tasks.
fn pend(pending: &mut HashMap<String, BTreeSet<(u32, String)>>, t: &PlannedTask) {
    pending.entry(t.workflow_id.clone()).or_default().insert((t.order, t.id.clone()));
}

/// Workflow state as earlier messages of a batch being vetted leave it.
#[derive(Debug, Default)]
pub struct Stage {
    workflows: HashMap<String, Workflow>,
    tasks: HashMap<String, PlannedTask>,
    roots: HashMap<String, String>,
    /// Plan events admitted in this batch.
    pub(super) plans: HashSet<String>,
}

/// What one event does. Made and consumed at once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Change {
    Workflow(Workflow),
    /// A task's new version, and how its workflow's task list changes.
    Task(PlannedTask, Listing),
    Checkpoint(api::Checkpoint),
    Workspace(api::Workspace),
    Nothing,
}

/// How an agent is, when the caller knows (vetting), else nothing is checked (applying).
pub(super) type Live<'a> = Option<&'a dyn Fn(&str) -> Option<registry::Status>>;

/// The workflows seen through a stage.
pub(super) struct View<'a> {
    pub(super) workflows: &'a Workflows,
    pub(super) stage: Option<&'a Stage>,
}

impl View<'_> {
    pub(super) fn task(&self, id: &str) -> Option<&PlannedTask> {
        self.stage.and_then(|s| s.tasks.get(id)).or_else(|| self.workflows.tasks.get(id))
    }
    pub(super) fn workflow(&self, id: &str) -> Option<&Workflow> {
        self.stage.and_then(|s| s.workflows.get(id)).or_else(|| self.workflows.workflows.get(id))
    }
    pub(super) fn root(&self, task_id: &str) -> Option<&str> {
        self.stage.and_then(|s| s.roots.get(task_id)).or_else(|| self.workflows.roots.get(task_id)).map(String::as_str)
    }
}

pub(super) fn is_lifecycle(kind: MessageType) -> bool {
    crate::tasks::moves_task(kind)
}

impl Workflows {
    /// How many workflows are kept.
    pub fn len(&self) -> usize {
        self.workflows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workflows.is_empty()
    }

    /// Whether workflow `id` is still open: it has no plan yet, or a planned task that has not
    /// ended (completed, or failed; a replaced task does not count).
    pub fn open(&self, id: &str) -> bool {
        self.workflows.get(id).is_some_and(|w| {
            // From the plan's end: tasks end roughly in plan order, so an open one is usually found
            // at once there (from the start, every task's end walked every ended task before it).
            w.tasks.is_empty()
                || w.tasks
                    .iter()
                    .rev()
                    .filter_map(|t| self.tasks.get(t))
                    .any(|t| !t.cancelled && !matches!(t.status, api::TaskStatus::Completed | api::TaskStatus::Failed))
        })
    }

    /// Forgets workflow `id` and everything kept for it (it ended and left memory, or its log was
    /// removed by retention).
    pub fn forget(&mut self, id: &str) {
        let Some(workflow) = self.workflows.remove(id) else { return };
        self.pending.remove(id);
        self.roots.remove(&workflow.root_task_id);
        for task in workflow.tasks.into_iter().chain(workflow.replaced) {
            if let Some(t) = self.tasks.remove(&task)
                && let Some(holder) = t.holder
                && let Some(held) = self.holds.get_mut(&holder)
            {
                held.remove(&task);
                if held.is_empty() {
                    self.holds.remove(&holder);
                }
            }
            self.checkpoints.remove(&task);
        }
        if !self.workspaces.is_empty() {
            self.workspaces.retain(|_, w| w.workflow_id != id);
        }
    }

    /// Whether the workflow code decides about `message` (a workflow request, or a lifecycle event
    /// of a workflow's task), rather than the routed-task state machine.
    pub fn concerns(&self, stage: Option<&Stage>, message: &Message) -> bool {
        if !is_lifecycle(message.kind) {
            return false;
        }
        let view = View { workflows: self, stage };
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
        live: &dyn Fn(&str) -> Option<registry::Status>,
        message: &Message,
    ) -> Result<(), Refusal> {
        let change = decide(&View { workflows: self, stage: Some(stage) }, Some(live), message, 0)?;
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

    /// Applies a committed event (vetted by [`Workflows::check`]; one that no longer passes is history, not
    /// state). Answers the workflow's id when this event ended it: it ended the last of its planned
    /// tasks still open.
    pub fn apply(&mut self, seq: u64, message: &Message) -> Option<String> {
        let change = match decide(&View { workflows: self, stage: None }, None, message, seq) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(seq, task_id = %message.task_id, reason = %e.message, "workflow event changes nothing");
                return None;
            }
        };
        let mut ended = None;
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
                let ends = item.status.is_final() && item.ended_seq.is_none();
                if ends {
                    item.ended_seq = Some(seq);
                }
                if let Some(w) = self.workflows.get_mut(&item.workflow_id) {
                    w.updated_at = item.updated_at.clone();
                }
                let workflow = item.workflow_id.clone();
                if let Some(was) = self.tasks.get(&item.id).filter(|t| waits(t))
                    && let Some(set) = self.pending.get_mut(&workflow)
                {
                    set.remove(&(was.order, item.id.clone()));
                }
                if waits(&item) {
                    pend(&mut self.pending, &item);
                }
                self.tasks.insert(item.id.clone(), item);
                // Only a task's end can end its workflow: only then are its tasks walked.
                if ends && self.workflows.contains_key(&workflow) && !self.open(&workflow) {
                    ended = Some(workflow);
                }
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
        ended
    }

    /// The live planned tasks of workflow `id` with their status.
    pub fn task_ids(&self, id: &str) -> Vec<(String, api::TaskStatus)> {
        let Some(w) = self.workflows.get(id) else { return Vec::new() };
        w.tasks.iter().filter_map(|t| self.tasks.get(t)).map(|t| (t.id.clone(), t.status)).collect()
    }

    /// Tasks whose holder is no longer alive (offline, removed or unknown): (holder, task).
    pub fn expired(&self, live: impl Fn(&str) -> Option<registry::Status>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (agent, tasks) in &self.holds {
            if matches!(live(agent), None | Some(registry::Status::Offline | registry::Status::Removed)) {
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
        let status = payload::object(&payload::StatusChange {
            status: TaskStatus::Pending,
            reason: Some(LEASE_EXPIRED.to_owned()),
            note: None,
            previous_agent: Some(holder.clone()),
        });
        let mut release =
            event(workflow, &item.id, ORCHESTRATOR, MessageType::TaskProgress, TASK_STATUS_PAYLOAD, status);
        release.idempotency_key = Some(format!("clutch:lease:{}:{}", item.id, item.claim_seq));
        let summary = match last {
            Some(c) => format!(
                "{holder} went offline and lost its claim; the last checkpoint ({}) says: {}",
                serde_json::to_value(c.note.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                c.note.summary
            ),
            None => format!("{holder} went offline and lost its claim before recording any checkpoint"),
        };
        let detail = payload::Recovery {
            previous_agent: holder,
            previous_status: item.status,
            last_checkpoint: last.map(|c| c.id.clone()),
        };
        let note = payload::object(&payload::Checkpoint {
            kind: CheckpointType::Recovery,
            summary,
            detail: Some(Value::Object(payload::object(&detail))),
            files_changed: Vec::new(),
        });
        let mut recovery = event(workflow, &item.id, ORCHESTRATOR, MessageType::TaskProgress, CHECKPOINT_PAYLOAD, note);
        recovery.idempotency_key = Some(format!("clutch:recovery:{}:{}", item.id, item.claim_seq));
        vec![release, recovery]
    }

    pub fn workflow(&self, id: &str) -> Option<&Workflow> {
        self.workflows.get(id)
    }

    pub fn task(&self, id: &str) -> Option<&PlannedTask> {
        self.tasks.get(id)
    }

    pub fn workspace(&self, id: &str) -> Option<&api::Workspace> {
        self.workspaces.get(id)
    }

    /// The workflow a root task stands for.
    pub fn workflow_of_root(&self, task_id: &str) -> Option<&Workflow> {
        self.roots.get(task_id).and_then(|w| self.workflows.get(w))
    }

    fn items<'a>(&'a self, w: &'a Workflow) -> impl Iterator<Item = &'a PlannedTask> + 'a {
        w.tasks.iter().filter_map(|id| self.tasks.get(id))
    }

    /// Whether every dependency of `item` is completed.
    fn ready(&self, item: &PlannedTask) -> bool {
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
        let items: Vec<&PlannedTask> = self.items(w).collect();
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
    pub fn plan_order<'a>(&'a self, w: &'a Workflow) -> Vec<&'a PlannedTask> {
        let mut items: Vec<&PlannedTask> = self.items(w).collect();
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
    /// At most `limit` of them after plan position `after`, and whether more follow.
    pub fn next(&self, w: &Workflow, after: Option<u32>, limit: usize) -> (Vec<api::TaskSummary>, bool) {
        let Some(pending) = self.pending.get(&w.id) else { return (Vec::new(), false) };
        let from = match after {
            None => 0,
            Some(a) => match a.checked_add(1) {
                Some(from) => from,
                None => return (Vec::new(), false),
            },
        };
        let mut ready =
            pending.range((from, String::new())..).filter_map(|(_, id)| self.tasks.get(id)).filter(|t| self.ready(t));
        let page: Vec<api::TaskSummary> = ready.by_ref().take(limit).map(task_summary).collect();
        let more = ready.next().is_some();
        (page, more)
    }

    /// Rebuilds what is derived from the rest (the pending tasks by plan position), after a load.
    pub fn reindex(&mut self) {
        self.pending.clear();
        for t in self.tasks.values().filter(|t| waits(t)) {
            pend(&mut self.pending, t);
        }
    }

    pub fn progress(&self, w: &Workflow) -> api::Progress {
        let items = self.plan_order(w);
        let mut counts: BTreeMap<TaskStatus, usize> = TaskStatus::ALL.iter().map(|s| (*s, 0)).collect();
        for t in &items {
            *counts.entry(t.status).or_default() += 1;
        }
        let completed = counts.get(&TaskStatus::Completed).copied().unwrap_or(0);
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

    pub fn task_detail(&self, item: &PlannedTask) -> api::TaskDetail {
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
    pub fn material(&self, item: &PlannedTask) -> Option<context::Material> {
        let w = self.workflows.get(&item.workflow_id)?;
        let outcome = |t: &PlannedTask| api::TaskOutcome {
            id: t.id.clone(),
            name: t.name.clone(),
            status: t.status,
            outcome: t.outcome.clone(),
            outcome_detail: t.outcome_detail.clone(),
            error: t.error.clone(),
        };
        let dependencies = item.depends_on.iter().filter_map(|d| self.tasks.get(d)).map(outcome).collect();
        let mut ended: Vec<&PlannedTask> = self
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

pub fn task_summary(t: &PlannedTask) -> api::TaskSummary {
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
    let mut m = Message::new(kind, from, (&w.id, &w.thread_id, task_id), payload);
    m.parent_task_id = (task_id != w.root_task_id).then(|| w.root_task_id.clone());
    m.payload_type = (!payload_type.is_empty()).then(|| payload_type.to_owned());
    m
}
