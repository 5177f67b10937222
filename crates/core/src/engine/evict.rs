//! Ended work leaving memory. A routed task that ended (completed, failed, cancelled, timed out)
//! stays in the engine's state for `ended_retention`, then leaves it with its history; a run leaves
//! with its last task (unless the operator set a run budget, which must keep counting). What stays is
//! a tombstone: the task's 128-bit id and final phase, enough for the gate to refuse a late lifecycle
//! message as `INVALID_TRANSITION` (a retry of a stored message is still answered as a duplicate:
//! the log's dedup sees it first). Tombstones are bounded (`tombstones`, the oldest dropped first);
//! past them, a lifecycle message about a task id no newer than the newest one evicted is checked
//! against the log before it is appended ([`Engine::recall`]), which puts the tombstone back.
//!
//! Reads of ended work that left memory replay its events from the log, through the log's indexes by
//! task and run ([`Engine::find_task`], [`Engine::find_run_tasks`]), with the same rules that built
//! the state: a replayed task is what the state held before it left.
//!
//! At most `ended_max` ended tasks stay, however young. The newest evicted id's creation time (ids carry
//! it) is kept in an atomic, so a message about a newer id costs no lock. A workflow whose planned tasks
//! have all ended leaves the same way (its end noticed when its last open task ends, its planned tasks
//! becoming tombstones), and its reads rebuild it from its run's events with the same `Workflows::apply`;
//! a session that ended leaves too, its reads (`find_session`, `session_history`) replaying its run's
//! records with `Sessions::apply`. Lists (`workflow_list`, `sessions_list`) show what memory holds: the
//! open ones and those within retention. A whole-log rebuild evicts as it goes.

use std::collections::{HashSet, VecDeque};

use clutch_proto::id::{self, Kind};

use super::*;
use crate::view;

/// Ended tasks evicted per pass, so that one pass holds the engine's lock briefly.
const EVICT_CHUNK: usize = 256;

/// Events read per page when replaying from the log.
const PAGE: usize = 1000;

/// The tasks that left memory, by id value, with their final phase: at most `max`, the oldest
/// dropped first. About 40 bytes each.
#[derive(Default)]
pub(super) struct Tombstones {
    phases: HashMap<u128, Phase>,
    order: VecDeque<u128>,
}

impl Tombstones {
    fn insert(&mut self, id: u128, phase: Phase, max: usize) {
        if max == 0 {
            return;
        }
        if self.phases.insert(id, phase).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > max {
            if let Some(oldest) = self.order.pop_front() {
                self.phases.remove(&oldest);
            }
        }
    }

    pub(super) fn get(&self, task_id: &str) -> Option<Phase> {
        if self.phases.is_empty() {
            return None;
        }
        self.phases.get(&id::value(Kind::Task, task_id)?).copied()
    }

    pub(super) fn len(&self) -> usize {
        self.phases.len()
    }
}

impl State {
    /// Notes that `task` has just ended: it leaves memory `ended_retention` after `since_ms`.
    pub(super) fn ended(&mut self, task: &Task) {
        self.ended.insert((task.since_ms, task.id.clone()));
        if let Some(value) = id::value(Kind::Task, &task.id) {
            self.ended_id_ms = self.ended_id_ms.max((value >> 80) as u64);
        }
    }

    /// Evicts the ended tasks whose retention has passed as of `now`, at most [`EVICT_CHUNK`] of
    /// them; returns how many left.
    pub(super) fn evict(&mut self, options: &Options, now: i64) -> usize {
        let cutoff = now.saturating_sub(options.ended_retention.as_millis() as i64);
        let mut gone: HashMap<String, HashSet<String>> = HashMap::new();
        let mut count = 0;
        while count < EVICT_CHUNK
            && self.ended.first().is_some_and(|(at, _)| *at <= cutoff || self.ended.len() > options.ended_max)
        {
            let Some((_, id)) = self.ended.pop_first() else { break };
            let Some(task) = self.tasks.get(&id).filter(|t| t.phase.is_terminal()) else { continue };
            if !may_leave(task) {
                // Something is still to be said about it: look again after another retention.
                self.ended.insert((now, id));
                continue;
            }
            let Some(task) = self.tasks.remove(&id) else { continue };
            let history = self.histories.remove(&id);
            if let Some(value) = id::value(Kind::Task, &id) {
                self.tombstones.insert(value, task.phase, options.tombstones);
                self.evicted_ms = self.evicted_ms.max((value >> 80) as u64);
            }
            gone.entry(task.run_id.clone()).or_default().insert(id);
            // Freed by the caller once the lock is released: freeing is most of an eviction's cost.
            self.evicted.push((task, history));
            count += 1;
        }
        forget_in_runs(options, &mut self.runs, gone);
        count + self.evict_workflows(options, cutoff) + self.evict_sessions(options, cutoff)
    }

    /// Notes that session `id` ended with this event (it had not before: `was`), so that it leaves
    /// memory after `ended_retention`.
    pub(super) fn session_ended(&mut self, id: &str, was: bool, at: i64) {
        if !was && self.sessions.ended(id) {
            self.ended_sessions.insert((at, id.to_owned()));
        }
    }

    /// Evicts the ended sessions whose retention has passed (or past `ended_max` of them), at most
    /// [`EVICT_CHUNK`]; their reads come from the log.
    fn evict_sessions(&mut self, options: &Options, cutoff: i64) -> usize {
        let mut count = 0;
        while count < EVICT_CHUNK
            && let Some(id) = next_due(&mut self.ended_sessions, cutoff, options.ended_max)
        {
            if self.sessions.ended(&id) {
                self.sessions.forget(&id);
                count += 1;
            }
        }
        count
    }

    /// Evicts the ended workflows whose retention has passed (or past `ended_max` of them), at most
    /// [`EVICT_CHUNK`]: each leaves with its planned tasks, which become tombstones.
    fn evict_workflows(&mut self, options: &Options, cutoff: i64) -> usize {
        let mut count = 0;
        while count < EVICT_CHUNK
            && let Some(id) = next_due(&mut self.ended_workflows, cutoff, options.ended_max)
        {
            if self.workflows.open(&id) {
                continue;
            }
            for (task, status) in self.workflows.task_ids(&id) {
                let phase = if status == workflow::api::TaskStatus::Failed { Phase::Failed } else { Phase::Completed };
                if let Some(value) = id::value(Kind::Task, &task) {
                    self.tombstones.insert(value, phase, options.tombstones);
                    self.evicted_ms = self.evicted_ms.max((value >> 80) as u64);
                }
            }
            self.workflows.forget(&id);
            count += 1;
        }
        count
    }

    /// When the next ended task, workflow or session is due to leave.
    pub(super) fn next_eviction(&self, options: &Options) -> Option<i64> {
        if self.ended.len() > options.ended_max || self.ended_workflows.len() > options.ended_max {
            return Some(0);
        }
        let retention = options.ended_retention.as_millis() as i64;
        if self.ended_sessions.len() > options.ended_max {
            return Some(0);
        }
        let task = self.ended.first().map(|(at, _)| at + retention);
        let workflow = self.ended_workflows.first().map(|(at, _)| at + retention);
        let session = self.ended_sessions.first().map(|(at, _)| at + retention);
        task.into_iter().chain(workflow).chain(session).min()
    }

    /// The refusal of a lifecycle message about a task that ended and left memory.
    pub(super) fn tombstone(&self, message: &Message) -> Option<Refusal> {
        if !tasks::is_lifecycle(message.kind) || self.tasks.contains_key(&message.task_id) {
            return None;
        }
        let phase = self.tombstones.get(&message.task_id)?;
        Some(tasks::ended(&message.task_id, message.kind, phase.as_str()))
    }

    /// Whether nothing in memory knows `task_id`: not a task, a workflow's, or a tombstone.
    fn forgot(&self, task_id: &str) -> bool {
        !self.tasks.contains_key(task_id) && !self.workflows.knows(task_id) && self.tombstones.get(task_id).is_none()
    }
}

/// Takes the next of `ended` (by when each ended) that is due to leave: it ended at `cutoff` or
/// before, or `ended` holds more than `max`.
fn next_due(ended: &mut BTreeSet<(i64, String)>, cutoff: i64, max: usize) -> Option<String> {
    let due = ended.first().is_some_and(|(at, _)| *at <= cutoff || ended.len() > max);
    if due { ended.pop_first().map(|(_, id)| id) } else { None }
}

/// Whether an ended task may leave memory: nothing is still to be said about it (no timer, no
/// cancel to forward).
pub(super) fn may_leave(task: &Task) -> bool {
    task.phase.is_terminal() && task.due_ms.is_none() && !task.cancel_to_forward
}

/// Takes the tasks that left (`gone`, by run) out of their runs' lists; a run leaves with its last
/// task, unless a run budget counts what its tasks used (then it must stay to keep counting).
pub(super) fn forget_in_runs(
    options: &Options,
    runs: &mut HashMap<String, Run>,
    gone: HashMap<String, HashSet<String>>,
) {
    let keep_runs = !run_budget(options).is_unlimited();
    for (run_id, ids) in gone {
        let Some(run) = runs.get_mut(&run_id) else { continue };
        run.tasks.retain(|t| !ids.contains(t));
        run.evicted += ids.len() as u64;
        if run.tasks.is_empty() && !keep_runs {
            runs.remove(&run_id);
        }
    }
}

/// Tasks rebuilt from their events, by the rules that build the engine's state (without agents'
/// slots, which ended tasks no longer hold).
#[derive(Default)]
pub(super) struct Replay {
    /// Each task with its history, in the order their requests appeared.
    tasks: HashMap<String, (Task, Vec<Step>)>,
    order: Vec<String>,
    /// The first and last task event's time (a run's wall time).
    span: Option<(i64, i64)>,
}

impl Replay {
    fn feed(&mut self, options: &Options, seq: u64, message: &Message) {
        let kind = message.kind;
        if !tasks::moves_task(kind) {
            return;
        }
        // A workflow's own requests (its tasks live in memory, read from there).
        if message.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.workflow")) {
            return;
        }
        // As [`State::apply`] has it: the event's own time, never later than now.
        let now = options.clock.now_ms();
        let at = crate::clock::ts_ms(&message.ts).map_or(now, |t| t.min(now));
        let daemon = message.from.agent_id == ORCHESTRATOR;
        let step = |phase| Step {
            seq,
            id: message.id.clone(),
            kind,
            from: message.from.agent_id.clone(),
            ts: message.ts.clone(),
            phase,
        };
        match self.tasks.get_mut(&message.task_id) {
            None if kind == MessageType::TaskRequest => {
                let task = new_task(message, at);
                let first = step(task.phase);
                self.order.push(task.id.clone());
                self.tasks.insert(task.id.clone(), (task, vec![first]));
            }
            None => return,
            Some((task, history)) => {
                let retries = Retries { max_routings: options.max_routings };
                let Ok(effect) = tasks::next(task, message, daemon, retries) else { return };
                let before = (task.phase, task.agent.clone(), task.accepted_ms);
                transition(task, message, effect, at);
                task_usage(task, message, &before, at);
                history.push(step(task.phase));
            }
        }
        let (first, last) = self.span.get_or_insert((at, at));
        *first = (*first).min(at);
        *last = (*last).max(at);
    }
}

/// What a task's own usage gains from `message`, which moved it from `before`: its agent's
/// accepted-to-ended time when it leaves the agent, and what its progress and result report.
pub(super) fn task_usage(task: &mut Task, message: &Message, before: &(Phase, Option<String>, Option<i64>), at: i64) {
    let (old_phase, old_agent, old_accepted) = before;
    if old_phase.is_in_flight()
        && (!task.phase.is_in_flight() || task.agent != *old_agent)
        && let Some(accepted) = old_accepted
    {
        task.usage.get_or_insert_default().wall_ms += (at - accepted).max(0) as u64;
    }
    if matches!(message.kind, MessageType::TaskProgress | MessageType::TaskResult)
        && let Some(usage) = Usage::from_payload(&message.payload)
    {
        task.usage.get_or_insert_default().add(usage);
    }
}

impl Engine {
    /// Every event `filter` selects, oldest first, through `f`, a page at a time (up to the visible
    /// head).
    pub(super) async fn each_event(&self, filter: &Filter, mut f: impl FnMut(u64, &Message)) -> Result<()> {
        let mut after = 0;
        loop {
            let page = self.inner.log.read(filter, after, PAGE).await?;
            let Some(last) = page.last() else { return Ok(()) };
            after = last.seq;
            for event in &page {
                match event.message() {
                    Ok(message) => f(event.seq, &message),
                    Err(e) => tracing::warn!(seq = event.seq, error = %e, "unreadable event skipped"),
                }
            }
            if page.len() < PAGE {
                return Ok(());
            }
        }
    }

    /// Replays the tasks of the events `filter` selects.
    async fn replay(&self, filter: Filter) -> Result<Replay> {
        let options = &self.inner.options;
        let mut replay = Replay::default();
        self.each_event(&filter, |seq, message| replay.feed(options, seq, message)).await?;
        Ok(replay)
    }

    /// A task with its history, as [`Engine::task`] shows it, whether it is in memory or ended and
    /// left it (then read from the log).
    pub async fn find_task(&self, task_id: &str) -> Result<Option<view::Task>> {
        if let Some(task) = self.task(task_id) {
            return Ok(Some(task));
        }
        let filter = Filter { task_id: Some(task_id.to_owned()), ..Filter::default() };
        let mut replay = self.replay(filter).await?;
        // In memory by now (applied, not yet visible when the log was read): memory says.
        if let Some(task) = self.task(task_id) {
            return Ok(Some(task));
        }
        if let Some((task, history)) = replay.tasks.remove(task_id) {
            let mut view = task_view(&task);
            view.history = Some(history.iter().map(step_view).collect());
            return Ok(Some(view));
        }
        // A workflow's task, of a workflow that ended and left memory.
        Ok(self.workflow_of_task(task_id).await?.and_then(|book| Engine::workflow_task_view(&book, task_id)))
    }

    /// A run's tasks as a tree, as [`Engine::run_tasks`] shows them, whether or not some of them
    /// ended and left memory (then read from the log, with the tasks still in memory as memory has
    /// them).
    pub async fn find_run_tasks(&self, run_id: &str) -> Result<Option<view::RunTasks>> {
        let in_memory = {
            let state = self.state();
            match state.runs.get(run_id) {
                Some(run) => run.evicted == 0,
                None => state.workflows.workflow(run_id).is_some(),
            }
        };
        if in_memory {
            return Ok(self.run_tasks(run_id));
        }
        let filter = Filter { run_id: Some(run_id.to_owned()), ..Filter::default() };
        let Replay { mut tasks, mut order, span } = self.replay(filter).await?;
        if order.is_empty() && !self.state().runs.contains_key(run_id) {
            // No routed task: a workflow's run that ended and left memory, if any.
            let book = self.workflow_from_log(run_id).await?;
            return Ok(views::workflow_tree(&book, run_id));
        }
        let state = self.state();
        let run = state.runs.get(run_id);
        for id in run.map(|r| r.tasks.as_slice()).unwrap_or_default() {
            let Some(live) = state.tasks.get(id) else { continue };
            match tasks.get_mut(id) {
                Some(replayed) => replayed.0 = live.clone(),
                None => {
                    order.push(id.clone());
                    tasks.insert(id.clone(), (live.clone(), Vec::new()));
                }
            }
        }
        if order.is_empty() {
            return Ok(None);
        }
        let (usage, budget_exhausted) = match run {
            Some(run) => (run.usage, run.budget_exhausted),
            None => {
                let mut usage = Usage::default();
                for (task, _) in tasks.values() {
                    if let Some(u) = task.usage {
                        usage.add(Usage { wall_ms: 0, ..u });
                    }
                }
                usage.wall_ms = span.map_or(0, |(first, last)| (last - first).max(0) as u64);
                (usage, false)
            }
        };
        let usage = view::Usage::from(&usage);
        Ok(Some(run_tree(run_id, &order, |id| tasks.get(id).map(|(t, _)| t), usage, budget_exhausted)))
    }

    /// The refusal of `kind` about `task_id` when that routed task ended and left memory (read from
    /// the log); `None` when it is in memory, a workflow's, or unknown.
    pub(super) async fn ended_elsewhere(&self, task_id: &str, kind: MessageType) -> Result<Option<Refusal>> {
        {
            let state = self.state();
            if state.tasks.contains_key(task_id) || state.workflows.knows(task_id) {
                return Ok(None);
            }
        }
        let Some(task) = self.find_task(task_id).await? else { return Ok(None) };
        Ok(task.state.is_final().then(|| tasks::ended(task_id, kind, task.state.as_str())))
    }

    /// Before a client's message is appended: when it may concern a task that left memory without a
    /// tombstone, the log says whether that task ended; if so its tombstone is put back, for the
    /// gate to refuse the message.
    pub(super) async fn recall(&self, message: &Message) -> Result<()> {
        // Only a lifecycle message about a task no newer than the newest one evicted may concern one
        // that left memory; that much is known without the lock.
        let newest = self.inner.evicted_ms.load(Ordering::Relaxed);
        let old = id::value(Kind::Task, &message.task_id).is_some_and(|v| (v >> 80) as u64 <= newest);
        if newest == 0 || !old || !tasks::is_lifecycle(message.kind) || !self.state().forgot(&message.task_id) {
            return Ok(());
        }
        let filter = Filter { task_id: Some(message.task_id.clone()), ..Filter::default() };
        let mut replay = self.replay(filter).await?;
        if let Some((task, _)) = replay.tasks.remove(&message.task_id).filter(|(t, _)| t.phase.is_terminal())
            && let Some(value) = id::value(Kind::Task, &task.id)
        {
            let mut state = self.state();
            if !state.tasks.contains_key(&task.id) {
                state.tombstones.insert(value, task.phase, self.inner.options.tombstones.max(1));
            }
        }
        Ok(())
    }

    /// What the engine holds in memory now: for operators watching a long-lived daemon, and for tests.
    pub fn footprint(&self) -> view::Footprint {
        let state = self.state();
        view::Footprint {
            tasks: state.tasks.len() as u64,
            ended_in_memory: state.ended.len() as u64,
            tombstones: state.tombstones.len() as u64,
            runs: state.runs.len() as u64,
            workflows: state.workflows.len() as u64,
            sessions: state.sessions.len() as u64,
            agents: state.agents.len() as u64,
            longest_hold_us: self.inner.longest_hold_us.load(Ordering::Relaxed),
            longest_writer_wait_us: self.inner.longest_writer_wait_us.load(Ordering::Relaxed),
        }
    }
}

/// What retention of the log ([`crate::retention`]) asks of the engine.
impl Engine {
    /// Held by a retention pass, so that two never run at once.
    pub(crate) fn retention_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.inner.retention
    }

    /// The log the engine vets and applies.
    pub(crate) fn log(&self) -> &Handle {
        &self.inner.log
    }

    /// The engine's "now" (the system clock, or a manual one in tests), in ms since the epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.options.clock.now_ms()
    }

    /// Whether run `run_id` has work in flight: a routed task in memory that has not ended, an open
    /// workflow (no plan yet, or a planned task not ended) or an open session.
    pub(crate) fn run_busy(&self, run_id: &str) -> bool {
        let state = self.state();
        let task_open = |t: &String| state.tasks.get(t).is_some_and(|t| !t.phase.is_terminal());
        state.runs.get(run_id).is_some_and(|r| r.tasks.iter().any(task_open))
            || state.workflows.open(run_id)
            || state.sessions.in_flight(run_id)
    }

    /// Forgets what memory still holds of run `run_id` once retention removed its events: its
    /// workflow and session, and the run itself when none of its tasks is left in memory (ended
    /// tasks still there leave as usual).
    pub(crate) fn forget_run(&self, run_id: &str) {
        let mut state = self.state();
        let state = &mut *state;
        if state.runs.get(run_id).is_some_and(|r| r.tasks.iter().all(|t| !state.tasks.contains_key(t))) {
            state.runs.remove(run_id);
        }
        state.workflows.forget(run_id);
        state.sessions.forget(run_id);
    }
}
