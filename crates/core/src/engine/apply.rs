//! Applying committed events to the engine's state: task transitions, agents' cards and status,
//! usage against budgets, and schemas registered at run time.

use super::*;
use crate::payload::{self, BudgetScope};

impl State {
    /// Registers the schema a stored `clutch.schema.v1` payload carries, and keeps the payload for
    /// snapshots when it registers (on apply, and again when a snapshot is loaded).
    pub(super) fn register_stored_schema(&mut self, payload: Map<String, Value>) {
        let text = |k: &str| payload.get(k).and_then(Value::as_str);
        let (Some(pt), Some(schema)) = (text("payload_type"), payload.get("schema")) else { return };
        match self.schemas.register(pt, text("schema_ref"), schema.clone()) {
            Ok(_) => self.registered_schemas.push(payload),
            Err(problems) => tracing::warn!(payload_type = pt, ?problems, "a stored schema no longer registers"),
        }
    }

    /// Applies a committed event.
    pub(super) fn apply(&mut self, options: &Options, seq: u64, message: &Message) {
        self.seq = self.seq.max(seq);
        // The event's own time (so a rebuild finds the same deadlines), never later than now.
        let now = options.clock.now_ms();
        let at = crate::clock::ts_ms(&message.ts).map_or(now, |t| t.min(now));
        if let Some(agent) = self.agents.get_mut(&message.from.agent_id) {
            agent.last_seen_ms = agent.last_seen_ms.max(at);
        }
        match message.kind {
            MessageType::AgentRegister | MessageType::AgentUpdate => self.apply_agent(options, seq, message, at),
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(SCHEMA_PAYLOAD) => {
                self.register_stored_schema(message.payload.clone());
            }
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(APPROVAL_REQUESTED_PAYLOAD) => {
                if let Some(r) = payload::read::<payload::ApprovalRequested>(&message.payload) {
                    let pending = crate::view::Approval {
                        call_id: r.call_id.clone(),
                        tool: r.tool,
                        caller: r.caller,
                        args: r.args,
                        run_id: message.run_id.clone(),
                        thread_id: message.thread_id.clone(),
                        task_id: message.task_id.clone(),
                        reason: r.reason,
                        requested_at: message.ts.clone(),
                        expires_at: r.expires_at,
                    };
                    self.approvals.insert(r.call_id, pending);
                }
            }
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(APPROVAL_DECIDED_PAYLOAD) => {
                if let Some(d) = payload::read::<payload::ApprovalDecided>(&message.payload) {
                    self.approvals.remove(&d.call_id);
                }
            }
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(BUDGET_PAYLOAD) => {
                match payload::read::<payload::BudgetNotice>(&message.payload) {
                    Some(n) if n.scope == BudgetScope::Agent => {
                        if let Some(a) = self.agents.get_mut(&n.id) {
                            a.budget_notice_sent = true;
                        }
                    }
                    Some(n) => self.runs.entry(n.id).or_default().budget_notice_sent = true,
                    None => {}
                }
            }
            _ => {}
        }
        if Sessions::concerns(message) {
            let was = self.sessions.ended(&message.run_id);
            self.sessions.apply(message, at);
            self.session_ended(&message.run_id, was, at);
        }
        if self.workflows.concerns(None, message) {
            if let Some(ended) = self.workflows.apply(seq, message) {
                self.ended_workflows.insert((at, ended));
            }
            return;
        }
        if !tasks::moves_task(message.kind) {
            return;
        }
        let daemon = message.from.agent_id == ORCHESTRATOR;
        let Some(task) = self.tasks.get(&message.task_id) else {
            if message.kind == MessageType::TaskRequest {
                self.insert_task(options, message, seq, at);
            }
            return;
        };
        let retries = Retries { max_routings: options.max_routings };
        let Ok(effect) = tasks::next(task, message, daemon, retries) else {
            // Stored before a rule existed, or by an older version: history, not state.
            return;
        };
        let mut task = self.tasks.remove(&message.task_id).expect("task present");
        let before = (task.phase, task.agent.clone(), task.accepted_ms);
        if task.phase == Phase::Queued && effect != Effect::Stay {
            self.queued.remove(&(task.since_ms, task.id.clone()));
        }
        transition(&mut task, message, effect, at);
        if task.phase == Phase::Routed && message.kind == MessageType::TaskRequest {
            self.routing_clock += 1;
        }
        self.record(seq, message, task.phase);
        self.account(options, &mut task, message, &before, at);
        if task.phase.is_terminal() && !before.0.is_terminal() {
            let was = self.sessions.ended(&task.run_id);
            self.sessions.task_ended(&task.run_id, &task.id);
            self.session_ended(&task.run_id, was, at);
            self.ended(&task);
        }
        if task.phase == Phase::Queued {
            self.queued.insert((task.since_ms, task.id.clone()));
        }
        let id = task.id.clone();
        self.tasks.insert(id.clone(), task);
        self.schedule(options, &id);
    }

    pub(super) fn record(&mut self, seq: u64, message: &Message, phase: Phase) {
        self.histories.entry(message.task_id.clone()).or_default().push(Step {
            seq,
            id: message.id.clone(),
            kind: message.kind,
            from: message.from.agent_id.clone(),
            ts: message.ts.clone(),
            phase,
        });
    }

    pub(super) fn insert_task(&mut self, options: &Options, message: &Message, seq: u64, at: i64) {
        let task = new_task(message, at);
        self.record(seq, message, task.phase);
        if let Some(agent) = task.agent.as_ref().and_then(|a| self.agents.get_mut(a)) {
            agent.in_flight.insert(task.id.clone());
            self.routing_clock += 1;
            agent.last_selected = self.routing_clock;
        }
        self.runs.entry(task.run_id.clone()).or_default().tasks.push(task.id.clone());
        let id = task.id.clone();
        self.tasks.insert(id.clone(), task);
        self.schedule(options, &id);
    }

    /// Slots, outcomes and usage after a task moved from `before`.
    pub(super) fn account(
        &mut self,
        options: &Options,
        task: &mut Task,
        message: &Message,
        before: &(Phase, Option<String>, Option<i64>),
        at: i64,
    ) {
        evict::task_usage(task, message, before, at);
        let (old_phase, old_agent, old_accepted) = before;
        if old_phase.is_in_flight()
            && let Some(a) = old_agent.as_ref().and_then(|a| self.agents.get_mut(a))
            && (!task.phase.is_in_flight() || task.agent.as_ref() != Some(&a.card.agent_id))
        {
            a.in_flight.remove(&task.id);
            if let Some(accepted) = old_accepted {
                a.usage.wall_ms += (at - accepted).max(0) as u64;
            }
            self.freed.insert(a.card.agent_id.clone());
            match task.phase {
                Phase::Completed => a.record_outcome(true),
                Phase::Failed | Phase::Retrying | Phase::TimedOut => a.record_outcome(false),
                _ => {}
            }
        }
        if task.phase == Phase::Retrying && *old_phase != Phase::Retrying {
            self.retries_to_note.insert(task.id.clone());
        }
        if task.phase.is_in_flight()
            && let Some(a) = task.agent.as_ref().and_then(|a| self.agents.get_mut(a))
            && a.in_flight.insert(task.id.clone())
        {
            a.last_selected = self.routing_clock;
        }
        if task.phase == Phase::Cancelled
            && old_phase.is_in_flight()
            && message.from.agent_id != ORCHESTRATOR
            && let Some(agent) = old_agent
            && !message.to.iter().any(|r| &r.agent_id == agent)
        {
            task.cancel_to_forward = true;
        }
        if message.kind == MessageType::TaskCancel && message.from.agent_id == ORCHESTRATOR {
            task.cancel_to_forward = false;
        }
        let usage = match message.kind {
            MessageType::TaskProgress | MessageType::TaskResult => Usage::from_payload(&message.payload),
            _ => None,
        };
        let run = self.runs.entry(task.run_id.clone()).or_default();
        let first = *run.first_ms.get_or_insert(at);
        run.usage.wall_ms = run.usage.wall_ms.max((at - first).max(0) as u64);
        if let Some(usage) = usage {
            run.usage.add(usage);
        }
        if !run.budget_exhausted && run_budget(options).crossed(&run.usage).is_some() {
            run.budget_exhausted = true;
            self.budget_pending = true;
        }
        let mut touched = vec![&message.from.agent_id];
        if let Some(old) = old_agent.as_ref().filter(|a| **a != message.from.agent_id) {
            touched.push(old);
        }
        for id in touched {
            let Some(a) = self.agents.get_mut(id) else { continue };
            if let Some(usage) = usage.filter(|_| *id == message.from.agent_id) {
                a.usage.add(usage);
            }
            if !a.budget_exhausted && effective_budget(options, a).crossed(&a.usage).is_some() {
                a.budget_exhausted = true;
                self.budget_pending = true;
            }
        }
    }

    pub(super) fn apply_agent(&mut self, options: &Options, seq: u64, message: &Message, at: i64) {
        if message.payload_type.as_deref() == Some(AGENT_STATUS_PAYLOAD) {
            let Some(payload::AgentStatus { agent_id, status, .. }) = payload::read(&message.payload) else { return };
            if let Some(agent) = self.agents.get_mut(&agent_id) {
                agent.status = status;
                if status == Status::Online {
                    agent.last_seen_ms = agent.last_seen_ms.max(at);
                    self.freed.insert(agent_id.clone());
                }
            }
            return;
        }
        let Ok(card) = serde_json::from_value::<AgentCard>(Value::Object(message.payload.clone())) else { return };
        let card = options.policy.declared(card);
        let id = card.agent_id.clone();
        self.freed.insert(id.clone());
        let budget = Agent::card_budget(&card);
        match self.agents.get_mut(&id) {
            Some(agent) => {
                agent.card_seq = seq;
                agent.profile = router::Profile::new(&card);
                agent.card = card;
                agent.budget = budget;
                agent.status = Status::Online;
                agent.last_seen_ms = agent.last_seen_ms.max(at);
                let limits = effective_budget(options, agent);
                agent.budget_exhausted = limits.crossed(&agent.usage).is_some();
                self.budget_pending |= agent.budget_exhausted;
            }
            None => {
                let mut agent = Agent::new(card, at, budget);
                agent.card_seq = seq;
                self.agents.insert(id, agent);
            }
        }
    }
}

/// Moves a (copy of a) task as `message` says. Pure bookkeeping; slots and usage are [`State::account`]'s.
pub(super) fn transition(task: &mut Task, message: &Message, effect: Effect, at: i64) {
    let Effect::To(phase) = effect else { return };
    if message.kind == MessageType::TaskRequest {
        if task.phase.awaits_routing() {
            task.routings += 1;
            task.routing_first_attempt = message.attempt.max(1);
        }
        task.agent = tasks::recipient(message).map(str::to_owned);
        task.attempt = message.attempt.max(1);
    }
    if phase == Phase::Accepted {
        task.accepted_ms = Some(at);
    }
    if matches!(phase, Phase::Retrying | Phase::Failed | Phase::Routed) && message.kind != MessageType::TaskRequest {
        task.accepted_ms = None;
    }
    if message.kind == MessageType::TaskProgress {
        task.progress = message.payload.get("percent").and_then(Value::as_f64).map(|p| p.clamp(0.0, 100.0));
    }
    if phase == Phase::Completed {
        task.progress = Some(100.0);
    }
    if message.kind == MessageType::TaskError {
        let s = |k: &str| message.payload.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        task.last_error = Some((s("code"), s("message")));
    }
    if phase != task.phase || message.kind == MessageType::TaskRequest {
        task.since_ms = at;
    }
    task.phase = phase;
}

pub(super) fn new_task(message: &Message, at: i64) -> Task {
    let direct = tasks::recipient(message).map(str::to_owned);
    let by_router = direct.is_none();
    Task {
        id: message.task_id.clone(),
        run_id: message.run_id.clone(),
        thread_id: message.thread_id.clone(),
        parent_task_id: message.parent_task_id.clone(),
        requester: message.from.agent_id.clone(),
        phase: if by_router { Phase::Requested } else { Phase::Routed },
        routings: u32::from(!by_router),
        // A routed task's deliveries count from 1; a directly addressed one was delivered by its request.
        attempt: if by_router { 0 } else { message.attempt.max(1) },
        routing_first_attempt: if by_router { 0 } else { message.attempt.max(1) },
        agent: direct,
        request: Arc::new(message.clone()),
        routed_by_orchestrator: by_router,
        since_ms: at,
        accepted_ms: None,
        due_ms: None,
        progress: None,
        last_error: None,
        cancel_to_forward: false,
        usage: None,
        step: step_of(message),
    }
}

/// `meta.workflow` and `meta.step` of a request, when it names both.
pub(super) fn step_of(message: &Message) -> Option<(String, String)> {
    let text = |k: &str| message.meta.get(k).and_then(Value::as_str).map(str::to_owned);
    Some((text("workflow")?, text("step")?))
}
