//! What the engine shows of its state: agents, a task with its history, a run's task tree, schemas.

use super::*;

impl Engine {
    /// Every registered agent (removed ones left out), by id.
    pub fn agents(&self) -> Vec<Value> {
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

    pub fn agent(&self, agent_id: &str) -> Option<Value> {
        self.state()
            .agents
            .get(agent_id)
            .filter(|a| a.status != Status::Removed)
            .map(|a| agent_view(&self.inner.options, a))
    }

    pub fn task(&self, task_id: &str) -> Option<Value> {
        let state = self.state();
        let Some(task) = state.tasks.get(task_id) else {
            return Engine::workflow_task_view(&state.workflows, task_id);
        };
        let mut view = task_view(task);
        view["history"] = state
            .histories
            .get(task_id)
            .into_iter()
            .flatten()
            .map(|s| {
                json!({"seq": s.seq, "id": s.id, "type": s.kind.as_str(), "from": s.from, "ts": s.ts, "state": s.phase.as_str()})
            })
            .collect();
        Some(view)
    }

    /// A run's tasks as a tree by `parent_task_id`, or `None` when the run has no task.
    pub fn run_tasks(&self, run_id: &str) -> Option<Value> {
        let state = self.state();
        let Some(run) = state.runs.get(run_id) else {
            let w = state.workflows.workflow(run_id)?;
            let mut root = Engine::workflow_task_view(&state.workflows, &w.root_task_id)?;
            root["children"] = state
                .workflows
                .plan_order(w)
                .into_iter()
                .filter_map(|t| Engine::workflow_task_view(&state.workflows, &t.id))
                .collect();
            let progress = state.workflows.progress(w);
            return Some(json!({"run_id": run_id, "tasks": [root], "counts": progress.counts, "workflow_id": w.id}));
        };
        let mut children: HashMap<&str, Vec<&Task>> = HashMap::new();
        let mut roots = Vec::new();
        for id in &run.tasks {
            let Some(task) = state.tasks.get(id) else { continue };
            match task.parent_task_id.as_deref().filter(|p| state.tasks.get(*p).is_some_and(|p| p.run_id == run_id)) {
                Some(parent) => children.entry(parent).or_default().push(task),
                None => roots.push(task),
            }
        }
        fn node(task: &Task, children: &HashMap<&str, Vec<&Task>>, depth: usize) -> Value {
            let mut v = task_view(task);
            let kids: Vec<Value> = if depth > 64 {
                Vec::new()
            } else {
                children.get(task.id.as_str()).into_iter().flatten().map(|t| node(t, children, depth + 1)).collect()
            };
            v["children"] = Value::Array(kids);
            v
        }
        let tree: Vec<Value> = roots.iter().map(|t| node(t, &children, 0)).collect();
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for id in &run.tasks {
            if let Some(t) = state.tasks.get(id) {
                *counts.entry(t.phase.as_str()).or_default() += 1;
            }
        }
        Some(json!({
            "run_id": run_id,
            "tasks": tree,
            "counts": counts,
            "usage": usage_json(&run.usage),
            "budget_exhausted": run.budget_exhausted,
        }))
    }
}

pub(super) fn schema_view(s: &schemas::Schema) -> Value {
    json!({"payload_type": s.payload_type(), "schema_ref": s.schema_ref(), "builtin": s.is_builtin()})
}

pub(super) fn usage_json(u: &Usage) -> Value {
    json!({"tokens": u.tokens, "cost_usd": u.cost_usd, "requests": u.requests, "wall_time_sec": u.wall_ms / 1000})
}

pub(super) fn agent_view(options: &Options, a: &Agent) -> Value {
    let b = effective_budget(options, a);
    let budget = (!b.is_unlimited()).then(
        || json!({"tokens": b.tokens, "cost_usd": b.cost_usd, "requests": b.requests, "wall_time_sec": b.wall_time_sec}),
    );
    json!({
        "agent_id": a.card.agent_id,
        "status": a.status.as_str(),
        "card": a.card,
        "load": {"in_flight": a.in_flight.len(), "max_concurrency": a.profile.max_concurrency},
        "tasks": a.in_flight,
        "success_rate": a.success_rate(),
        "usage": usage_json(&a.usage),
        "budget": budget,
        "budget_exhausted": a.budget_exhausted,
        "last_seen": clutch_proto::validate::format_ts(SystemTime::UNIX_EPOCH + Duration::from_millis(a.last_seen_ms.max(0) as u64)),
    })
}

pub(super) fn task_view(t: &Task) -> Value {
    json!({
        "task_id": t.id,
        "run_id": t.run_id,
        "thread_id": t.thread_id,
        "parent_task_id": t.parent_task_id,
        "state": t.phase.as_str(),
        "agent": t.agent,
        "requester": t.requester,
        "attempt": t.attempt,
        "routings": t.routings,
        "progress": t.progress,
        "requires": t.request.requires,
        "error": t.last_error.as_ref().map(|(code, message)| json!({"code": code, "message": message})),
    })
}
