//! Rebuilding the engine on start, and snapshots: the state saved as JSON every `snapshot_every`
//! events (rate-limited, since saving holds the engine's lock), loaded when saved under the same
//! options and format, plus the events after it.
//!
//! A snapshot is saved by the reactor (every `snapshot_every` events, at most once per
//! `snapshot_interval`) and on a clean stop (`running`); a snapshot saved under other options or another
//! `SNAPSHOT_FORMAT` is ignored and the state rebuilt from the whole log, so a start replays at most
//! about `snapshot_every` events or an interval's worth, however long the log. A snapshot saves the work
//! in flight only: an ended task that may leave memory is saved as already gone (the saved `evicted_ms`
//! covers its id, so its reads and late messages go to the log). Saving copies that part of the state
//! under the engine's lock (a task's request is shared, not copied) and serializes and writes the copy
//! without it, so the writer waits for a copy of the work in flight, never for serialization.

use super::*;

impl Engine {
    /// Rebuilds the engine's state: from its last snapshot, when one was saved under the same options,
    /// plus the events after it; else from the whole log. Then returns the engine, ready to be put on
    /// the writer's path ([`Engine::gate`]) and run ([`Engine::run`]).
    pub async fn recover(log: Handle, options: Options) -> Result<Engine> {
        let started_ms = options.clock.now_ms();
        let started = std::time::Instant::now();
        let fingerprint = fingerprint(&options);
        let head = log.head().await?;
        let mut state = match log.snapshot(SNAPSHOT).await {
            Ok(Some(saved)) => State::load(&saved, &fingerprint, head, &options),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "the engine snapshot cannot be read; rebuilding from the whole log");
                None
            }
        }
        .unwrap_or_else(|| State { schemas: options.policy.schemas().clone(), ..State::default() });
        let from_snapshot = state.seq;
        let mut after = state.seq;
        loop {
            let page = log.read(&Filter::default(), after, 10_000).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for event in &page {
                // Most events (chat, tools, reports about untracked tasks) change no state: a glance
                // at their type and task decides, without building the whole message.
                if let Ok(head) = serde_json::from_str::<Head<'_>>(&event.json)
                    && !state.concerns(&head)
                {
                    continue;
                }
                let message: Message = match serde_json::from_str(&event.json) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(seq = event.seq, error = %e, "unreadable event skipped while rebuilding state");
                        continue;
                    }
                };
                state.apply(&options, event.seq, &message);
            }
            // Ended work leaves as the replay goes, so a long log never sits in memory whole.
            while state.evict(&options, started_ms) > 0 {
                state.evicted.clear();
            }
        }
        state.seq = after;
        for agent in state.agents.values_mut() {
            agent.last_seen_ms = agent.last_seen_ms.max(started_ms);
        }
        tracing::info!(
            snapshot_seq = from_snapshot,
            events_replayed = after - from_snapshot,
            agents = state.agents.len(),
            tasks = state.tasks.len(),
            ended_in_memory = state.ended.len(),
            ms = started.elapsed().as_millis() as u64,
            "engine state rebuilt"
        );
        let evicted_ms = state.evicted_ms;
        let inner = Inner {
            state: Mutex::new(state),
            options,
            log,
            wake: Notify::new(),
            fingerprint,
            saved_seq: AtomicU64::new(from_snapshot),
            saved_at: Mutex::new(std::time::Instant::now()),
            snapshot_seq: from_snapshot,
            refusal_budget: Throttle::new(20, 2.0),
            refusal_budget_per_sender: crate::throttle::Throttles::new(5, 0.1, 4096),
            positions: std::sync::RwLock::new(Vec::new()),
            longest_hold_us: AtomicU64::new(0),
            longest_writer_wait_us: AtomicU64::new(0),
            evicted_ms: AtomicU64::new(evicted_ms),
            retention: tokio::sync::Mutex::new(()),
        };
        Ok(Engine { inner: Arc::new(inner) })
    }

    /// The `seq` of the snapshot the state was loaded from on start (0: rebuilt from the whole log).
    pub fn loaded_snapshot_seq(&self) -> u64 {
        self.inner.snapshot_seq
    }

    /// Saves the state as a snapshot in the store, so the next start replays only the events after it.
    /// The state is copied under its lock (the writer waits meanwhile: the state holds in-flight work
    /// and at most `ended_max` ended tasks, and a task's request is shared, not copied); the copy is
    /// serialized and written without it.
    pub async fn save_snapshot(&self) -> Result<u64> {
        let (copy, locked) = {
            let state = self.state();
            let copying = std::time::Instant::now();
            (state.copy(&self.inner.options), copying.elapsed())
        };
        self.held(locked);
        let locked_ms = locked.as_millis() as u64;
        let seq = copy.seq;
        let saved = Saved { format: SNAPSHOT_FORMAT, fingerprint: self.inner.fingerprint.clone(), state: &copy };
        let body = serde_json::to_vec(&saved).map_err(|e| Error::task(format!("engine snapshot: {e}")))?;
        drop(copy);
        let started = std::time::Instant::now();
        let bytes = body.len();
        self.inner.log.set_snapshot(SNAPSHOT, &Snapshot { seq, body: body.into() }).await?;
        self.inner.saved_seq.store(seq, Ordering::Release);
        *self.inner.saved_at.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        let write_ms = started.elapsed().as_millis() as u64;
        tracing::info!(seq, bytes, locked_ms, write_ms, "engine snapshot saved");
        Ok(seq)
    }

    /// Saves a snapshot when `snapshot_every` events were applied since the last one.
    pub(super) async fn maybe_save_snapshot(&self) {
        let every = self.inner.options.snapshot_every;
        if every == 0 {
            return;
        }
        let seq = self.state().seq;
        if seq.saturating_sub(self.inner.saved_seq.load(Ordering::Acquire)) < every {
            return;
        }
        // Saving costs time in proportion to the state (the writer waits while it is serialized):
        // under a steady load, at most one snapshot per interval.
        let last = *self.inner.saved_at.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < self.inner.options.snapshot_interval {
            return;
        }
        if let Err(e) = self.save_snapshot().await {
            tracing::warn!(error = %e, "engine snapshot not saved; the next start replays more of the log");
            // Not again before another `every` events.
            self.inner.saved_seq.store(seq, Ordering::Release);
        }
    }
}

impl State {
    /// What a snapshot saves of the state: the work in flight. What it rebuilds on load is left out,
    /// and so are the ended tasks that may leave memory: saved as already gone (their reads and late
    /// messages go to the log), they keep the snapshot the size of the work in flight.
    fn copy(&self, options: &Options) -> State {
        // Only what stays is copied: the lock is held for the work in flight, not for what ended.
        let mut tasks = HashMap::new();
        let mut histories = HashMap::new();
        for (id, task) in self.tasks.iter().filter(|(_, t)| !evict::may_leave(t)) {
            tasks.insert(id.clone(), task.clone());
            if let Some(history) = self.histories.get(id) {
                histories.insert(id.clone(), history.clone());
            }
        }
        let ended = self.ended.iter().filter(|(_, id)| tasks.contains_key(id)).cloned().collect();
        let keep_runs = !run_budget(options).is_unlimited();
        let mut runs = HashMap::new();
        for (id, run) in &self.runs {
            let kept: Vec<String> = run.tasks.iter().filter(|t| tasks.contains_key(*t)).cloned().collect();
            if kept.is_empty() && !keep_runs {
                continue;
            }
            let evicted = run.evicted + (run.tasks.len() - kept.len()) as u64;
            runs.insert(id.clone(), Run { tasks: kept, evicted, ..*run });
        }
        // Every task saved as gone ended, so the newest ended one bounds their ids.
        let evicted_ms = self.evicted_ms.max(self.ended_id_ms);
        State {
            seq: self.seq,
            schemas: Registry::default(),
            registered_schemas: self.registered_schemas.clone(),
            agents: self.agents.clone(),
            tasks,
            histories,
            ended,
            ended_workflows: self.ended_workflows.clone(),
            ended_sessions: self.ended_sessions.clone(),
            tombstones: evict::Tombstones::default(),
            evicted_ms,
            ended_id_ms: 0,
            evicted: Vec::new(),
            runs,
            due: self.due.clone(),
            queued: self.queued.clone(),
            freed: self.freed.clone(),
            retries_to_note: self.retries_to_note.clone(),
            woken: 0,
            budget_pending: false,
            routing_clock: self.routing_clock,
            next_agent_check_ms: self.next_agent_check_ms,
            workflows: self.workflows.clone(),
            approvals: self.approvals.clone(),
            sessions: self.sessions.clone(),
        }
    }

    /// The state a snapshot holds, if it was saved in this format, under the same options, and is not
    /// ahead of the log (a store restored from an older backup).
    pub(super) fn load(saved: &Snapshot, fingerprint: &str, head: u64, options: &Options) -> Option<State> {
        let reject = |why: &str| {
            tracing::info!(snapshot_seq = saved.seq, why, "engine snapshot not used; rebuilding from the whole log");
            None
        };
        if saved.seq > head {
            return reject("it is ahead of the log");
        }
        let decoded: Saved<State> = match serde_json::from_slice(&saved.body) {
            Ok(d) => d,
            Err(e) => return reject(&format!("it does not decode: {e}")),
        };
        if decoded.format != SNAPSHOT_FORMAT || decoded.fingerprint != fingerprint {
            return reject("it was saved by another version or under other options");
        }
        let mut state = decoded.state;
        if state.seq != saved.seq {
            return reject("its seq disagrees with its state");
        }
        state.schemas = options.policy.schemas().clone();
        for payload in std::mem::take(&mut state.registered_schemas) {
            state.register_stored_schema(payload);
        }
        for agent in state.agents.values_mut() {
            agent.profile = router::Profile::new(&agent.card);
        }
        state.workflows.reindex();
        state.budget_pending = true;
        Some(state)
    }

    /// Whether an event with this head changes the state (see [`State::apply`]).
    pub(super) fn concerns(&self, head: &Head<'_>) -> bool {
        match head.kind {
            "task.request" => true,
            k if k.starts_with("agent.") || k.starts_with("routing.") => true,
            k if k.starts_with("task.") => {
                self.tasks.contains_key(head.task_id.as_ref()) || self.workflows.knows(head.task_id.as_ref())
            }
            "chat.system" => head.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.")),
            _ => false,
        }
    }
}

/// Name of the engine's snapshot in the store.
pub(super) const SNAPSHOT: &str = "engine";

/// Bump whenever what [`State`] holds or how events are applied to it changes: snapshots of another
/// format are ignored and the state is rebuilt from the whole log.
pub(super) const SNAPSHOT_FORMAT: u32 = 8;

/// A snapshot as stored (JSON).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Saved<S> {
    format: u32,
    fingerprint: String,
    state: S,
}

/// What a snapshot's state depends on besides the log: the snapshot format and the options (timers
/// and policy shape deadlines, budgets and workflow steps as events are applied).
pub(super) fn fingerprint(options: &Options) -> String {
    let relevant = Options {
        snapshot_every: 0,
        snapshot_interval: Duration::ZERO,
        // Which ended tasks are still in memory changes no answer: any retention fits any snapshot.
        ended_retention: Duration::ZERO,
        ended_max: 0,
        tombstones: 0,
        clock: Clock::system(),
        outbound: Arc::default(),
        workspace_roots: Roots::default(),
        adapters: crate::adapter::Registry::default(),
        // Retention removes only ended runs' events, which no snapshot holds.
        retention: crate::retention_policy::Options::default(),
        ..options.clone()
    };
    clutch_store::sha256_hex(format!("{SNAPSHOT_FORMAT}\n{relevant:?}").as_bytes())
}

/// The few fields of a stored event that say whether the engine's state cares about it.
#[derive(serde::Deserialize)]
pub(super) struct Head<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    task_id: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    payload_type: Option<std::borrow::Cow<'a, str>>,
}
