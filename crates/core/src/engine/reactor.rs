//! The reactor: a task that turns new tasks and due timers into the engine's own events (routing
//! decisions, deliveries, redeliveries, timeouts, agent status changes, budget notices), and the
//! state's timer book-keeping behind it.
//!
//! It passes after every commit, so it walks every agent and run for a crossed budget only while one may
//! be crossed (`budget_pending`); it saves the engine's snapshots (see `snapshot`), and releases the
//! workflow tasks of an agent that went offline or was removed back to pending with a recovery checkpoint
//! (`Workflows::lease_expiry`).

use super::*;
use crate::payload::{self, BudgetScope};

impl Engine {
    /// Runs the reactor until `shutdown` resolves: routes new tasks, fires due timers, and turns
    /// missed heartbeats into status changes.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let (actions, next, evicted) = {
                let mut state = self.state();
                let pass = std::time::Instant::now();
                let (actions, next) = state.collect(&self.inner.options, self.inner.options.clock.now_ms());
                self.held(pass.elapsed());
                self.inner.evicted_ms.store(state.evicted_ms, Ordering::Relaxed);
                (actions, next, std::mem::take(&mut state.evicted))
            };
            drop(evicted);
            let busy = !actions.is_empty();
            // One append for all of them: one commit, however many tasks arrived at once (one
            // append each made routing wait a commit per task queued before it).
            if let Some(action) = Action::merged(actions) {
                self.act(action).await;
            }
            if busy {
                continue;
            }
            self.maybe_save_snapshot().await;
            let wait = Duration::from_millis((next - self.inner.options.clock.now_ms()).clamp(1, 1000) as u64);
            tokio::select! {
                () = &mut shutdown => break,
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
                () = self.inner.options.clock.moved() => {}
            }
        }
    }

    /// Carries out one reactor action: appends what it says, all of it in one batch.
    pub(super) async fn act(&self, Action { label, messages, retry }: Action) {
        let count = messages.len();
        match self.inner.log.append(messages).await {
            Ok(outcomes) => {
                for outcome in outcomes {
                    if let Err(e) = outcome {
                        // Refused because the task moved on meanwhile (an accept raced a deadline): fine.
                        tracing::debug!(action = label, error = %e, "engine event not stored");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(action = label, messages = count, error = %e, "engine could not append; will retry");
                let mut state = self.state();
                let at = self.inner.options.clock.now_ms() + 1000;
                for task in retry {
                    state.set_due(&task, Some(at));
                }
            }
        }
    }
}

impl State {
    /// Sets a task's timer from its phase.
    pub(super) fn schedule(&mut self, options: &Options, task_id: &str) {
        let Some(task) = self.tasks.get(task_id) else { return };
        let since = task.since_ms;
        let due = match task.phase {
            _ if task.cancel_to_forward => Some(since),
            Phase::Requested => Some(since),
            Phase::Retrying => Some(since + retry_delay(options, task).as_millis() as i64),
            Phase::Queued => Some(since + options.queue_timeout.as_millis() as i64),
            Phase::Routed if task.agent.as_deref().is_some_and(tasks::is_person) => None,
            Phase::Routed => Some(since + options.accept_timeout.as_millis() as i64),
            Phase::Accepted | Phase::Running => {
                let limit = task
                    .agent
                    .as_ref()
                    .and_then(|a| self.agents.get(a))
                    .and_then(|a| a.card.limits.as_ref())
                    .and_then(|l| l.max_runtime_sec)
                    .map(|s| Duration::from_secs(u64::from(s)))
                    .or(options.default_max_runtime);
                limit.map(|l| task.accepted_ms.unwrap_or(since) + l.as_millis() as i64)
            }
            _ => None,
        };
        self.set_due(task_id, due);
    }

    pub(super) fn set_due(&mut self, task_id: &str, due: Option<i64>) {
        let Some(task) = self.tasks.get_mut(task_id) else { return };
        if let Some(old) = task.due_ms.take() {
            self.due.remove(&(old, task_id.to_owned()));
        }
        if let Some(at) = due {
            task.due_ms = Some(at);
            self.due.insert((at, task_id.to_owned()));
        }
    }

    /// What the reactor should do now, and when to look again.
    pub(super) fn collect(&mut self, options: &Options, now: i64) -> (Vec<Action>, i64) {
        let evicted = self.evict(options, now);
        let mut actions = Vec::new();
        let mut to_route: Vec<String> = Vec::new();
        let mut messages = Vec::new();
        let mut fired = Vec::new();
        while let Some((at, id)) = self.due.first().cloned() {
            if at > now || fired.len() >= 512 {
                break;
            }
            self.due.pop_first();
            if let Some(t) = self.tasks.get_mut(&id) {
                t.due_ms = None;
            }
            fired.push(id);
        }
        for id in &fired {
            let Some(task) = self.tasks.get(id) else { continue };
            match task.phase {
                _ if task.cancel_to_forward => messages.push(forward_cancel(task, self.histories.get(id))),
                Phase::Requested | Phase::Retrying => to_route.push(id.clone()),
                Phase::Queued => {
                    let wait = options.queue_timeout.as_secs();
                    messages.push(task_error(
                        task,
                        ErrorCode::NoAgentAvailable.as_str(),
                        &format!("no eligible agent became available within {wait}s"),
                        false,
                        "queue",
                    ));
                }
                Phase::Routed => {
                    let deliveries = task.attempt.saturating_sub(task.routing_first_attempt) + 1;
                    if deliveries < options.max_deliveries {
                        messages.push(delivery(task, task.agent.clone().unwrap_or_default(), task.attempt + 1));
                    } else {
                        let agent = task.agent.clone().unwrap_or_default();
                        messages.push(task_error(
                            task,
                            ErrorCode::DeliveryFailed.as_str(),
                            &format!("{agent} did not accept the task after {deliveries} deliveries"),
                            false,
                            "delivery",
                        ));
                    }
                }
                Phase::Accepted | Phase::Running => messages.push(timeout(task)),
                _ => {}
            }
        }
        if !self.freed.is_empty() {
            let freed = std::mem::take(&mut self.freed);
            let woken = self.wakeable(options, &freed);
            self.woken += woken.len() as u64;
            to_route.extend(woken);
        }
        if !messages.is_empty() {
            actions.push(Action { label: "timers", messages, retry: fired.clone() });
        }
        if !self.retries_to_note.is_empty() {
            let ids = std::mem::take(&mut self.retries_to_note);
            let messages: Vec<Message> = ids
                .iter()
                .filter_map(|id| self.tasks.get(id))
                .filter(|t| t.phase == Phase::Retrying)
                .map(|t| retry_notice(t, options.max_routings, retry_delay(options, t)))
                .collect();
            if !messages.is_empty() {
                actions.push(Action { label: "retries", messages, retry: Vec::new() });
            }
        }
        if !to_route.is_empty() {
            let messages = self.route(options, &to_route);
            if !messages.is_empty() {
                actions.push(Action { label: "routing", messages, retry: to_route });
            }
        }
        if now >= self.next_agent_check_ms {
            self.next_agent_check_ms = now + (options.stale_after.as_millis() as i64 / 4).clamp(10, 1000);
            let messages = self.check_agents(options, now);
            if !messages.is_empty() {
                actions.push(Action { label: "agents", messages, retry: Vec::new() });
            }
        }
        let agents = &self.agents;
        let expired = self.workflows.expired(|a| agents.get(a).map(|x| x.status));
        if !expired.is_empty() {
            let messages = expired.iter().flat_map(|(_, task)| self.workflows.lease_expiry(task)).collect();
            actions.push(Action { label: "leases", messages, retry: Vec::new() });
        }
        let budget = self.budget_notices(options);
        if !budget.is_empty() {
            actions.push(Action { label: "budgets", messages: budget, retry: Vec::new() });
        }
        let mut next = self.due.first().map_or(now + 1000, |(at, _)| *at).min(self.next_agent_check_ms);
        if let Some(at) = self.next_eviction(options) {
            // More than a pass's worth due: the next pass comes at once.
            next = next.min(if evicted > 0 { now } else { at });
        }
        (actions, next)
    }

    /// The queued tasks one of the `freed` agents could take now (the router would pick it if it
    /// were the only agent): those are worth routing again; the rest still wait for theirs.
    pub(super) fn wakeable(&self, options: &Options, freed: &BTreeSet<String>) -> Vec<String> {
        if self.queued.is_empty() {
            return Vec::new();
        }
        let candidates: Vec<Candidate<'_>> =
            self.candidates(options, &[]).into_iter().filter(|c| freed.contains(&c.profile.agent_id)).collect();
        if candidates.is_empty() {
            return Vec::new();
        }
        self.queued
            .iter()
            .filter_map(|(_, id)| {
                let task = self.tasks.get(id)?;
                router::route(&ask(options, task), &candidates).selected.map(|_| id.clone())
            })
            .collect()
    }

    /// Every agent (removed ones aside, and those `skip` names) as the router sees it now.
    pub(super) fn candidates<'a>(&'a self, options: &'a Options, skip: &[String]) -> Vec<Candidate<'a>> {
        self.agents
            .values()
            .filter(|a| a.status != Status::Removed && !skip.contains(&a.card.agent_id))
            .map(|a| Candidate {
                profile: &a.profile,
                status: a.status,
                in_flight: a.in_flight.len() as u32,
                success_rate: a.success_rate(),
                budget_exhausted: a.budget_exhausted && options.policy.org.budgets.on_exceed == OnExceed::Exclude,
                allowlist: options.policy.tool_allowlist(&a.card.agent_id),
                last_selected: a.last_selected,
            })
            .collect()
    }

    /// Routes `ids` in one pass, counting each choice against the chosen agent's load for the next.
    pub(super) fn route(&mut self, options: &Options, ids: &[String]) -> Vec<Message> {
        let mut candidates = self.candidates(options, &[]);
        let mut clock = self.routing_clock;
        let mut out = Vec::new();
        for id in ids {
            let Some(task) = self.tasks.get(id) else { continue };
            if !task.phase.awaits_routing() {
                continue;
            }
            let run_over = self.runs.get(&task.run_id).is_some_and(|r| r.budget_exhausted)
                && options.policy.org.budgets.on_exceed == OnExceed::FailRun;
            if run_over {
                out.push(budget_failure(task));
                continue;
            }
            let ask = ask(options, task);
            let decision = router::route(&ask, &candidates);
            let names = |i: usize| candidates[i].profile.agent_id.clone();
            let excluded: BTreeMap<String, String> =
                decision.excluded.iter().map(|(i, e)| (names(*i), e.describe(&ask))).collect();
            match decision.selected {
                Some(chosen) => {
                    let agent = names(chosen);
                    let payload = payload::object(&payload::RoutingDecision {
                        selected: agent.clone(),
                        candidates: decision.scored.iter().map(|(i, _)| names(*i)).collect(),
                        scores: decision.scored.iter().map(|(i, s)| (names(*i), *s)).collect(),
                        reason: decision.reason.clone(),
                        excluded,
                        attempt: task.routings + 1,
                    });
                    let mut event = derived(&task.request, MessageType::RoutingDecision, Vec::new(), payload);
                    event.idempotency_key = Some(format!("clutch:route:{}:{}", task.id, task.routings + 1));
                    out.push(event);
                    out.push(delivery(task, agent, task.attempt + 1));
                    clock += 1;
                    candidates[chosen].in_flight += 1;
                    candidates[chosen].last_selected = clock;
                }
                None if decision.can_wait() => {
                    if task.phase != Phase::Queued {
                        out.push(routing_failure(task, &decision.reason, excluded, true));
                    }
                }
                None => {
                    out.push(routing_failure(task, &decision.reason, excluded, false));
                    out.push(task_error(task, ErrorCode::NoEligibleAgent.as_str(), &decision.reason, false, "routing"));
                }
            }
        }
        out
    }

    /// Heartbeat expiry: online → stale → offline; an offline or removed agent's tasks fail as
    /// retryable so they are routed again.
    pub(super) fn check_agents(&self, options: &Options, now: i64) -> Vec<Message> {
        let mut out = Vec::new();
        for agent in self.agents.values() {
            let silent = now - agent.last_seen_ms;
            let id = &agent.card.agent_id;
            match agent.status {
                Status::Online if silent > options.stale_after.as_millis() as i64 => {
                    out.push(status_message(id, Status::Stale, Status::Online));
                }
                Status::Stale if silent > options.offline_after.as_millis() as i64 => {
                    out.push(status_message(id, Status::Offline, Status::Stale));
                }
                Status::Offline | Status::Removed => {
                    for task_id in &agent.in_flight {
                        if let Some(task) = self.tasks.get(task_id) {
                            let why = format!("{id} went {}", agent.status.as_str());
                            out.push(task_error(task, ErrorCode::AgentUnavailable.as_str(), &why, true, "agent-gone"));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Notices of budgets crossed and not yet noticed. Every agent and run is looked at only while
    /// one may be (`budget_pending`): the reactor passes after every commit.
    pub(super) fn budget_notices(&mut self, options: &Options) -> Vec<Message> {
        if !self.budget_pending {
            return Vec::new();
        }
        let mut out = Vec::new();
        for agent in self.agents.values().filter(|a| a.budget_exhausted && !a.budget_notice_sent) {
            let limits = effective_budget(options, agent);
            let Some((dimension, used, limit)) = limits.crossed(&agent.usage) else { continue };
            let action = match options.policy.org.budgets.on_exceed {
                OnExceed::Exclude => "excluded from routing",
                OnExceed::FailRun => "noted",
            };
            out.push(budget_notice(BudgetScope::Agent, &agent.card.agent_id, dimension, used, limit, action, None));
        }
        for (run_id, run) in self.runs.iter().filter(|(_, r)| r.budget_exhausted && !r.budget_notice_sent) {
            let Some((dimension, used, limit)) = run_budget(options).crossed(&run.usage) else { continue };
            let action = match options.policy.org.budgets.on_exceed {
                OnExceed::Exclude => "noted",
                OnExceed::FailRun => "run failed",
            };
            let thread = run.tasks.first().and_then(|t| self.tasks.get(t)).map(|t| t.thread_id.clone());
            out.push(budget_notice(BudgetScope::Run, run_id, dimension, used, limit, action, thread));
            if options.policy.org.budgets.on_exceed == OnExceed::FailRun {
                for task in run.tasks.iter().filter_map(|t| self.tasks.get(t)).filter(|t| !t.phase.is_terminal()) {
                    out.push(budget_failure(task));
                }
            }
        }
        // Once the notices are applied (or if a crossing had nothing to say), the next look finds
        // nothing and stops the looking.
        self.budget_pending = !out.is_empty();
        out
    }
}

/// Events the reactor appends in one batch; on a failed append the `retry` tasks' timers fire again
/// a second later.
pub(super) struct Action {
    label: &'static str,
    pub(super) messages: Vec<Message>,
    retry: Vec<String>,
}

impl Action {
    /// The actions as one: their messages in order, in one batch (each is vetted and applied
    /// in turn, as in separate batches); `None` when there are none.
    fn merged(mut actions: Vec<Action>) -> Option<Action> {
        if actions.len() <= 1 {
            return actions.pop();
        }
        let mut all = Action { label: "reactor actions", messages: Vec::new(), retry: Vec::new() };
        for action in actions {
            all.messages.extend(action.messages);
            all.retry.extend(action.retry);
        }
        Some(all)
    }
}

/// What a task asks of its agent: its request's `requires` (or, when it has none, its workflow step's),
/// preferences and security policy.
pub(super) fn ask(options: &Options, task: &Task) -> Ask {
    let request = &task.request;
    let policy = request.security.as_ref().and_then(|s| s.policy.as_ref());
    let step_requires = || {
        let (workflow, step) = task.step.as_ref()?;
        options.policy.step(workflow, step).map(|s| s.requires.as_slice())
    };
    let requires = match request.requires.as_slice() {
        [] => step_requires().unwrap_or_default(),
        own => own,
    };
    Ask {
        requires: requires.iter().filter_map(|r| Need::parse(r).ok()).collect(),
        prefers: router::preferences(&request.prefers, request.domain.as_deref()).unwrap_or_default(),
        sandbox: policy.and_then(|p| p.sandbox),
        tools: policy.and_then(|p| p.tool_allowlist.clone()).unwrap_or_default(),
    }
}

/// The card's budget, with the operator's (org.yaml) taking precedence measure by measure.
pub(super) fn effective_budget(options: &Options, agent: &Agent) -> Budget {
    match options.policy.budget(&agent.card.agent_id) {
        Some(policy) => agent.budget.overridden_by(policy),
        None => agent.budget,
    }
}

pub(super) fn run_budget(options: &Options) -> Budget {
    options.policy.org.budgets.run.unwrap_or_default()
}

/// The wait before routing `task` again; its jitter is derived from the task id, so a restart
/// computes the same deadline.
pub(super) fn retry_delay(options: &Options, task: &Task) -> Duration {
    let seed = task.id.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    crate::backoff(options.retry_backoff, options.retry_backoff_max, task.routings, seed)
}
