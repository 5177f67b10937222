//! What the engine shows of its state, as [`crate::view`]'s types: agents, a task with its history,
//! a run's task tree (a workflow's too), schemas.

use super::*;
use crate::view;

impl Engine {
    /// Every registered agent (removed ones left out), by id.
    pub fn agents(&self) -> Vec<view::Agent> {
        let state = self.state();
        state
            .agents
            .values()
            .filter(|a| a.status != Status::Removed)
            .map(|a| agent_view(&self.inner.options, a))
            .collect()
    }

    /// Each registered agent (removed ones aside) through `f`, under the engine's lock: for a face
    /// that needs a few fields of every agent without building whole views. Keep `f` cheap.
    pub fn with_agents<T>(&self, f: impl FnMut(&crate::registry::Agent) -> T) -> Vec<T> {
        self.state().agents.values().filter(|a| a.status != Status::Removed).map(f).collect()
    }

    pub fn agent(&self, agent_id: &str) -> Option<view::Agent> {
        self.state()
            .agents
            .get(agent_id)
            .filter(|a| a.status != Status::Removed)
            .map(|a| agent_view(&self.inner.options, a))
    }

    /// A task with its history (a workflow's root or planned task with its workflow's record).
    pub fn task(&self, task_id: &str) -> Option<view::Task> {
        let state = self.state();
        let Some(task) = state.tasks.get(task_id) else {
            return Engine::workflow_task_view(&state.workflows, task_id);
        };
        let mut view = task_view(task);
        view.history = Some(state.histories.get(task_id).into_iter().flatten().map(step_view).collect());
        Some(view)
    }

    /// The routed tasks whose first request `select` takes, each with when it last changed
    /// (milliseconds since the epoch), most recently changed first. Scans every task in memory.
    pub fn tasks_requested(&self, select: impl Fn(&Message) -> bool) -> Vec<(i64, view::Task)> {
        let state = self.state();
        let mut found: Vec<(i64, view::Task)> =
            state.tasks.values().filter(|t| select(&t.request)).map(|t| (t.since_ms, task_view(t))).collect();
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.task_id.cmp(&a.1.task_id)));
        found
    }

    /// The message that ended task `task_id` (read from the log), or `None` while it has not ended
    /// (or is unknown): what a face shows as the task's outcome. A task that ended and left memory
    /// is read from the log too.
    pub async fn task_end(&self, task_id: &str) -> Result<Option<view::Ended>> {
        {
            let state = self.state();
            let ended = match state.tasks.get(task_id) {
                Some(task) => task.phase.is_terminal(),
                None => !state.workflows.knows(task_id),
            };
            if !ended {
                return Ok(None);
            }
        }
        let filter = Filter { task_id: Some(task_id.to_owned()), ..Filter::default() };
        let mut last = None;
        self.each_event(&filter, |seq, m| {
            if tasks::ends_task(m.kind) {
                last = Some(view::Ended {
                    seq,
                    id: m.id.clone(),
                    kind: m.kind,
                    from: m.from.agent_id.clone(),
                    ts: m.ts.clone(),
                    payload: Value::Object(m.payload.clone()),
                });
            }
        })
        .await?;
        Ok(last)
    }

    /// A run's usage so far (what its tasks' progress and results reported); `None` for a run no
    /// routed task belongs to.
    pub fn run_usage(&self, run_id: &str) -> Option<view::Usage> {
        self.state().runs.get(run_id).map(|run| view::Usage::from(&run.usage))
    }

    /// A run's tasks as a tree by `parent_task_id`, or `None` when the run has no task.
    pub fn run_tasks(&self, run_id: &str) -> Option<view::RunTasks> {
        let state = self.state();
        let Some(run) = state.runs.get(run_id) else {
            return workflow_tree(&state.workflows, run_id);
        };
        Some(run_tree(
            run_id,
            &run.tasks,
            |id| state.tasks.get(id),
            view::Usage::from(&run.usage),
            run.budget_exhausted,
        ))
    }
}

/// A run's tasks (`ids`, in the order they appeared, found by `task`) as a tree by
/// `parent_task_id`, with their counts by state.
pub(super) fn run_tree<'a>(
    run_id: &str,
    ids: &'a [String],
    task: impl Fn(&str) -> Option<&'a Task>,
    usage: view::Usage,
    budget_exhausted: bool,
) -> view::RunTasks {
    let mut children: HashMap<&str, Vec<&Task>> = HashMap::new();
    let mut roots = Vec::new();
    for id in ids {
        let Some(t) = task(id) else { continue };
        match t.parent_task_id.as_deref().filter(|p| task(p).is_some_and(|p| p.run_id == run_id)) {
            Some(parent) => children.entry(parent).or_default().push(t),
            None => roots.push(t),
        }
    }
    fn node(task: &Task, children: &HashMap<&str, Vec<&Task>>, depth: usize) -> view::Task {
        let mut v = task_view(task);
        let kids: Vec<view::Task> = if depth > 64 {
            Vec::new()
        } else {
            children.get(task.id.as_str()).into_iter().flatten().map(|t| node(t, children, depth + 1)).collect()
        };
        v.children = Some(kids);
        v
    }
    let mut counts: BTreeMap<view::TaskState, u64> = BTreeMap::new();
    for t in ids.iter().filter_map(|id| task(id)) {
        *counts.entry(t.phase.into()).or_default() += 1;
    }
    view::RunTasks {
        run_id: run_id.to_owned(),
        tasks: roots.iter().map(|t| node(t, &children, 0)).collect(),
        counts,
        usage: Some(usage),
        budget_exhausted: Some(budget_exhausted),
        workflow_id: None,
    }
}

pub(super) fn schema_view(s: &schemas::Schema) -> view::Schema {
    view::Schema {
        payload_type: s.payload_type().to_owned(),
        schema_ref: s.schema_ref().to_owned(),
        builtin: s.is_builtin(),
    }
}

pub(super) fn agent_view(options: &Options, a: &Agent) -> view::Agent {
    let budget = effective_budget(options, a);
    view::Agent {
        agent_id: a.card.agent_id.clone(),
        status: a.status,
        card: a.card.clone(),
        load: view::Load { in_flight: a.in_flight.len(), max_concurrency: a.profile.max_concurrency },
        tasks: a.in_flight.iter().cloned().collect(),
        success_rate: a.success_rate(),
        usage: view::Usage::from(&a.usage),
        budget: (!budget.is_unlimited()).then_some(budget),
        budget_exhausted: a.budget_exhausted,
        last_seen: clutch_proto::validate::format_ts(
            SystemTime::UNIX_EPOCH + Duration::from_millis(a.last_seen_ms.max(0) as u64),
        ),
    }
}

pub(super) fn task_view(t: &Task) -> view::Task {
    view::Task {
        task_id: t.id.clone(),
        run_id: t.run_id.clone(),
        thread_id: t.thread_id.clone(),
        parent_task_id: t.parent_task_id.clone(),
        kind: view::TaskKind::Routed,
        name: None,
        state: t.phase.into(),
        agent: t.agent.clone(),
        requester: Some(t.requester.clone()),
        attempt: t.attempt,
        routings: t.routings,
        progress: t.progress,
        requires: t.request.requires.clone(),
        error: t
            .last_error
            .as_ref()
            .map(|(code, message)| view::TaskError { code: code.clone(), message: message.clone() }),
        usage: t.usage.as_ref().map(view::Usage::from),
        history: None,
        children: None,
        workflow: None,
        workflow_task: None,
    }
}

pub(super) fn step_view(s: &Step) -> view::Step {
    view::Step {
        seq: s.seq,
        id: s.id.clone(),
        kind: s.kind,
        from: s.from.clone(),
        ts: s.ts.clone(),
        state: s.phase.into(),
    }
}

/// A workflow's run as a tree: its root task, then its planned tasks in plan order.
pub(super) fn workflow_tree(workflows: &Workflows, run_id: &str) -> Option<view::RunTasks> {
    let w = workflows.workflow(run_id)?;
    let mut root = Engine::workflow_task_view(workflows, &w.root_task_id)?;
    root.children = Some(
        workflows.plan_order(w).into_iter().filter_map(|t| Engine::workflow_task_view(workflows, &t.id)).collect(),
    );
    let progress = workflows.progress(w);
    Some(view::RunTasks {
        run_id: run_id.to_owned(),
        tasks: vec![root],
        counts: progress.counts.iter().map(|(s, n)| (view::TaskState::from(*s), *n as u64)).collect(),
        usage: None,
        budget_exhausted: None,
        workflow_id: Some(w.id.clone()),
    })
}
