//! The engine: the agent registry, the router, task state and every timer (accept deadlines,
//! redelivery, retry backoff, runtime limits, heartbeat expiry, queue timeouts), kept in step with
//! the log. It vets each message on the writer's path ([`Gate`]), applies each committed event, and
//! a reactor task turns due timers and new tasks into events of its own (routing decisions, routed
//! requests, redeliveries, timeouts). Its state is rebuilt from the log on start, so nothing it was
//! waiting for is lost with a restart.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use clutch_proto::message::{Recipient, Sender};
use clutch_proto::{AgentCard, ErrorCode, Message, MessageType, id};
use clutch_store::{Entry, Filter, Outcome, Snapshot};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use crate::clock::Clock;
pub use crate::config::OnExceed;
use crate::config::{Budget, Config};
use crate::guard;
use crate::roots::Roots;
use crate::schemas::{self, Registry};
use crate::throttle::Throttle;

/// `payload_type` of a schema registered at run time (`chat.system` in the system run).
pub const SCHEMA_PAYLOAD: &str = "clutch.schema.v1";
/// `payload_type` of a refusal operators should see (a bad or missing signature).
pub const REFUSAL_PAYLOAD: &str = "clutch.refusal.v1";
use crate::log::{Gate, Handle};
use crate::registry::{Agent, Usage};
use crate::router::{self, Ask, Candidate, Need, Status};
use crate::stream::Live;
use crate::tasks::{self, Effect, ORCHESTRATOR, Phase, Policy, Step, Task};
use crate::workflow::{self, Book};
use crate::{Error, Refusal, Result};

mod workflows;

/// The run, thread and task that agent lifecycle events belong to.
pub const SYSTEM_RUN: &str = "run_00000000000000000000000000";
pub const SYSTEM_THREAD: &str = "thr_00000000000000000000000000";
pub const SYSTEM_TASK: &str = "task_00000000000000000000000000";
/// `payload_type` of agent status transitions (`agent.update`).
pub const STATUS_PAYLOAD: &str = "clutch.agent.status.v1";
/// `payload_type` of budget notices (`chat.system`).
pub const BUDGET_PAYLOAD: &str = "clutch.budget.v1";

/// Timers and policies. Defaults suit agents on the same network; tests shorten them.
#[derive(Debug, Clone)]
pub struct Options {
    /// The heartbeat interval agents are told to keep.
    pub heartbeat_interval: Duration,
    /// Without a sign of life for this long an agent becomes `stale` (no new tasks)...
    pub stale_after: Duration,
    /// ...and then `offline`: its unfinished tasks fail as retryable and are routed again.
    pub offline_after: Duration,
    /// A delivered `task.request` not accepted within this is delivered again.
    pub accept_timeout: Duration,
    /// Deliveries per routing before the task fails with `DELIVERY_FAILED`.
    pub max_deliveries: u32,
    /// Routings per task in all: the first and one per retryable error.
    pub max_routings: u32,
    /// Backoff before routing again after a retryable error: doubles per retry, with jitter.
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    /// How long a task may wait for a busy, offline or out-of-budget agent before it fails.
    pub queue_timeout: Duration,
    /// Runtime limit for agents whose card sets no `limits.max_runtime_sec`.
    pub default_max_runtime: Option<Duration>,
    /// The operator's policy (org.yaml, workflows.yaml): tool allowlists, budgets, signing keys,
    /// workflow steps and payload schemas.
    pub policy: Arc<Config>,
    /// Save a snapshot of the state after this many events (0: only on a clean stop)...
    pub snapshot_every: u64,
    /// ...and not sooner than this after the start or the last one: saving stalls the writer in
    /// proportion to the state, so under a steady load it happens at most once per interval. A
    /// start replays at most about `snapshot_every` events or an interval's worth.
    pub snapshot_interval: Duration,
    /// Where "now" comes from: the system clock, or a manual one in tests.
    pub clock: Clock,
    /// Which networks agents' endpoints may aim at (see [`crate::guard`]): public addresses only,
    /// unless the operator allows more.
    pub outbound: Arc<guard::Policy>,
    /// The directories workspaces (and the repositories they come from) may be in (see
    /// [`crate::roots`]); none: workspaces are refused.
    pub workspace_roots: Roots,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            heartbeat_interval: Duration::from_secs(10),
            stale_after: Duration::from_secs(30),
            offline_after: Duration::from_secs(90),
            accept_timeout: Duration::from_secs(30),
            max_deliveries: 3,
            max_routings: 3,
            retry_backoff: Duration::from_secs(1),
            retry_backoff_max: Duration::from_secs(60),
            queue_timeout: Duration::from_secs(300),
            default_max_runtime: None,
            policy: Arc::new(Config::default()),
            snapshot_every: 100_000,
            snapshot_interval: Duration::from_secs(60),
            clock: Clock::system(),
            outbound: Arc::new(guard::Policy::default()),
            workspace_roots: Roots::default(),
        }
    }
}

/// The answer to one submitted message.
#[derive(Debug, Clone, PartialEq)]
pub enum Ack {
    Stored(Outcome),
    /// A heartbeat: recorded in memory, not in the log.
    Heartbeat(Heartbeat),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Heartbeat {
    pub agent_id: String,
    pub status: &'static str,
    pub next_heartbeat_sec: u64,
}

/// The engine. Cheap to clone; every clone is the same engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    options: Options,
    log: Handle,
    wake: Notify,
    /// Identifies the options snapshots are valid for (see [`fingerprint`]).
    fingerprint: String,
    /// The `seq` of the last snapshot saved or loaded.
    saved_seq: AtomicU64,
    /// When the last snapshot was saved while running.
    saved_at: Mutex<std::time::Instant>,
    /// The `seq` of the snapshot loaded on start (0: none).
    snapshot_seq: u64,
    /// How many refusals may still be recorded in the log: a burst of 20, then 2 a second.
    refusal_budget: Throttle,
}

/// Name of the engine's snapshot in the store.
const SNAPSHOT: &str = "engine";
/// Bump whenever what [`State`] holds or how events are applied to it changes: snapshots of another
/// format are ignored and the state is rebuilt from the whole log.
const SNAPSHOT_FORMAT: u32 = 3;

/// A snapshot as stored (JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved<S> {
    format: u32,
    fingerprint: String,
    state: S,
}

/// What a snapshot's state depends on besides the log: the snapshot format and the options (timers
/// and policy shape deadlines, budgets and workflow steps as events are applied).
fn fingerprint(options: &Options) -> String {
    let relevant = Options {
        snapshot_every: 0,
        snapshot_interval: Duration::ZERO,
        clock: Clock::system(),
        outbound: Arc::default(),
        workspace_roots: Roots::default(),
        ..options.clone()
    };
    clutch_store::sha256_hex(format!("{SNAPSHOT_FORMAT}\n{relevant:?}").as_bytes())
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct State {
    /// The `seq` of the last event applied.
    seq: u64,
    /// Payload schemas: the built-ins, workflows.yaml's, and those registered since (rebuilt from
    /// policy and `registered_schemas` when a snapshot is loaded).
    #[serde(skip)]
    schemas: Registry,
    /// Payloads of the schema registrations applied, in order.
    registered_schemas: Vec<Map<String, Value>>,
    agents: BTreeMap<String, Agent>,
    tasks: HashMap<String, Task>,
    /// Each task's events, in order.
    histories: HashMap<String, Vec<Step>>,
    /// Task ids per run, in the order they appeared.
    runs: HashMap<String, Run>,
    /// (due ms, task id) of every task timer.
    due: BTreeSet<(i64, String)>,
    /// (queued since ms, task id) of tasks waiting for an agent.
    queued: BTreeSet<(i64, String)>,
    /// Something changed that may let a queued task be routed (a slot freed, an agent came back).
    capacity_changed: bool,
    /// Counts routed deliveries: the round-robin clock.
    routing_clock: u64,
    next_agent_check_ms: i64,
    /// Workflows: pull work, claimed by agents (see [`crate::workflow`]).
    book: Book,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Run {
    tasks: Vec<String>,
    /// When its first task event happened (its wall time counts from here).
    first_ms: Option<i64>,
    usage: Usage,
    budget_exhausted: bool,
    budget_notice_sent: bool,
}

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
            ms = started.elapsed().as_millis() as u64,
            "engine state rebuilt"
        );
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
        };
        Ok(Engine { inner: Arc::new(inner) })
    }

    /// The `seq` of the snapshot the state was loaded from on start (0: rebuilt from the whole log).
    pub fn loaded_snapshot_seq(&self) -> u64 {
        self.inner.snapshot_seq
    }

    /// Saves the state as a snapshot in the store, so the next start replays only the events after it.
    /// The state is serialized under its lock (the writer waits meanwhile); the store write is not.
    pub async fn save_snapshot(&self) -> Result<u64> {
        let serializing = std::time::Instant::now();
        let (seq, body) = {
            let state = self.state();
            let saved = Saved { format: SNAPSHOT_FORMAT, fingerprint: self.inner.fingerprint.clone(), state: &*state };
            let body = serde_json::to_vec(&saved).map_err(|e| Error::Task(format!("engine snapshot: {e}")))?;
            (state.seq, body)
        };
        let locked_ms = serializing.elapsed().as_millis() as u64;
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
    async fn maybe_save_snapshot(&self) {
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

    /// The check the log writer runs on every message (see [`crate::Service::set_gate`]).
    pub fn gate(&self) -> Arc<dyn Gate> {
        Arc::new(self.clone())
    }

    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Runs the reactor until `shutdown` resolves: routes new tasks, fires due timers, and turns
    /// missed heartbeats into status changes.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let (actions, next) = self.state().collect(&self.inner.options, self.inner.options.clock.now_ms());
            let busy = !actions.is_empty();
            for action in actions {
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

    /// Appends messages from a client (HTTP, MCP...). The daemon's own sender and reserved kinds are
    /// refused; heartbeats are recorded without being stored; a `tool.call` refused by policy is
    /// answered with a `tool.error` in the log.
    pub async fn submit(&self, messages: Vec<Message>) -> Result<Vec<Result<Ack>>> {
        let mut answers: Vec<Option<Result<Ack>>> = (0..messages.len()).map(|_| None).collect();
        let mut to_store = Vec::new();
        let mut positions = Vec::new();
        for (i, message) in messages.into_iter().enumerate() {
            if let Err(refusal) = reserved(&message) {
                answers[i] = Some(Err(refusal.into()));
            } else if message.kind == MessageType::AgentHeartbeat {
                answers[i] = Some(self.heartbeat(&message.from.agent_id).await.map(Ack::Heartbeat));
            } else if let Some(Err(refusal)) = self.check_message_endpoints(&message).await {
                answers[i] = Some(Err(refusal.into()));
            } else {
                positions.push(i);
                to_store.push(message);
            }
        }
        let tool_calls: Vec<Option<Message>> =
            to_store.iter().map(|m| (m.kind == MessageType::ToolCall).then(|| m.clone())).collect();
        let outcomes = self.inner.log.append(to_store).await?;
        for ((i, outcome), call) in positions.into_iter().zip(outcomes).zip(tool_calls) {
            if let (Err(Error::Refused(r)), Some(call)) = (&outcome, call)
                && r.code == ErrorCode::Forbidden
            {
                self.answer_forbidden_call(&call, r).await;
            }
            answers[i] = Some(outcome.map(Ack::Stored));
        }
        Ok(answers.into_iter().map(|a| a.expect("every message is answered")).collect())
    }

    /// For a card sent as a message (`agent.register`, `agent.update`): its endpoints checked as
    /// [`Engine::register`] checks them. `None` for other messages and for payloads that are no
    /// card (the gate refuses those).
    async fn check_message_endpoints(&self, message: &Message) -> Option<std::result::Result<(), Refusal>> {
        if !matches!(message.kind, MessageType::AgentRegister | MessageType::AgentUpdate)
            || !message.payload.contains_key("endpoints")
        {
            return None;
        }
        let card = clutch_proto::validate::agent_card(&Value::Object(message.payload.clone())).ok()?;
        Some(self.check_endpoints(&card, "payload.").await)
    }

    /// Registers (or replaces) an agent's card: an `agent.register` event from the agent.
    pub async fn register(&self, card: &AgentCard) -> Result<Outcome> {
        self.check_endpoints(card, "").await?;
        let exists = self.state().agents.get(&card.agent_id).is_some_and(|a| a.status != Status::Removed);
        let kind = if exists { MessageType::AgentUpdate } else { MessageType::AgentRegister };
        let payload = match serde_json::to_value(card) {
            Ok(Value::Object(map)) => map,
            _ => return Err(Refusal::new(ErrorCode::ValidationFailed, "the card is not a JSON object").into()),
        };
        let mut message = system_message(kind, Vec::new(), payload);
        message.from.agent_id = card.agent_id.clone();
        self.inner.log.append_one(message).await
    }

    /// Checks every endpoint of `card` against the outbound guard, its names resolved now (the gate
    /// checks what it can without a lookup; connections are checked again). `prefix` leads each
    /// endpoint's path in a refusal (`payload.` for a message's card).
    async fn check_endpoints(&self, card: &AgentCard, prefix: &str) -> Result<(), Refusal> {
        for (name, endpoint) in &card.endpoints {
            let field = format!("{prefix}endpoints.{name}.url");
            match self.inner.options.outbound.check_target(&endpoint.url).await {
                Ok(Ok(())) => {}
                Ok(Err(refused)) => return Err(refused.refusal(&field)),
                Err(why) => {
                    return Err(Refusal::new(ErrorCode::ValidationFailed, format!("{field}: {why}")).field(field));
                }
            }
        }
        Ok(())
    }

    /// Unregisters an agent: its status becomes `removed`; its unfinished tasks are routed again.
    pub async fn unregister(&self, agent_id: &str) -> Result<Outcome> {
        let previous = self.agent_status(agent_id)?;
        if previous == Status::Removed {
            return Err(not_found(agent_id));
        }
        self.inner.log.append_one(status_message(agent_id, Status::Removed, previous)).await
    }

    /// Records a sign of life. An agent that had gone stale or offline is online again (an event).
    pub async fn heartbeat(&self, agent_id: &str) -> Result<Heartbeat> {
        let previous = self.agent_status(agent_id)?;
        if previous == Status::Removed {
            return Err(not_found(agent_id));
        }
        if let Some(agent) = self.state().agents.get_mut(agent_id) {
            agent.last_seen_ms = self.inner.options.clock.now_ms();
        }
        if previous != Status::Online {
            self.inner.log.append_one(status_message(agent_id, Status::Online, previous)).await?;
        }
        Ok(Heartbeat {
            agent_id: agent_id.to_owned(),
            status: Status::Online.as_str(),
            next_heartbeat_sec: self.inner.options.heartbeat_interval.as_secs().max(1),
        })
    }

    /// Agents that take their messages by push: (agent id, `endpoints.clutch.url`, the seq of the
    /// card that named it).
    pub fn push_targets(&self) -> Vec<(String, String, u64)> {
        let state = self.state();
        state
            .agents
            .values()
            .filter(|a| a.status != Status::Removed)
            .filter_map(|a| {
                a.card.endpoints.get("clutch").map(|e| (a.card.agent_id.clone(), e.url.clone(), a.card_seq))
            })
            .collect()
    }

    /// Registers a payload schema (an event, so it survives restarts). Registering the same schema
    /// again changes nothing; anything the registry refuses is `VALIDATION_FAILED` with every problem.
    pub async fn register_schema(&self, payload_type: &str, schema_ref: Option<&str>, schema: Value) -> Result<Value> {
        let existed = {
            let state = self.state();
            let existed = state.schemas.get(payload_type).is_some();
            let mut trial = state.schemas.clone();
            drop(state);
            trial
                .register(payload_type, schema_ref, schema.clone())
                .map_err(|problems| invalid_payload("the schema cannot be registered".into(), problems))?;
            existed
        };
        if !existed {
            let mut payload = Map::new();
            payload.insert("payload_type".into(), json!(payload_type));
            if let Some(r) = schema_ref {
                payload.insert("schema_ref".into(), json!(r));
            }
            payload.insert("schema".into(), schema);
            let mut m = system_message(MessageType::ChatSystem, Vec::new(), payload);
            m.payload_type = Some(SCHEMA_PAYLOAD.to_owned());
            self.inner.log.append_one(m).await?;
        }
        let state = self.state();
        let stored = state.schemas.get(payload_type).map(schema_view).unwrap_or(Value::Null);
        Ok(stored)
    }

    /// Every payload schema: built in, from workflows.yaml, registered.
    pub fn schemas(&self) -> Vec<Value> {
        self.state().schemas.list().map(schema_view).collect()
    }

    /// One schema document by payload type or schema ref.
    pub fn schema(&self, name: &str) -> Option<Value> {
        let state = self.state();
        state.schemas.get(name).or_else(|| state.schemas.by_ref(name)).map(|s| s.document().clone())
    }

    /// Checks a message's signature as the client sent it (`raw`, before the daemon filled anything):
    /// a signed message must verify against a key org.yaml gives its sender; an unsigned one is
    /// refused when the policy requires its sender to sign. Refusals are `UNAUTHORIZED`.
    pub fn verify_signature(&self, raw: &Value, message: &Message) -> std::result::Result<(), Refusal> {
        let policy = &self.inner.options.policy;
        let from = &message.from.agent_id;
        let signed = message.security.as_ref().is_some_and(|s| s.auth.is_some());
        if !signed {
            if policy.requires_signature(from) {
                return Err(Refusal::new(ErrorCode::Unauthorized, format!("{from} must sign its messages"))
                    .field("security.auth")
                    .hint("sign the envelope with the agent's ed25519 key (see README, Message signatures)"));
            }
            return Ok(());
        }
        let refuse = |e: clutch_proto::sign::Error| {
            let mut r = Refusal::new(ErrorCode::Unauthorized, format!("signature refused: {e}"));
            r.field = Some(e.field().unwrap_or("security.auth").to_owned());
            r
        };
        let kid = clutch_proto::sign::kid(raw).map_err(refuse)?;
        let Some(key) = policy.key(from, kid) else {
            return Err(Refusal::new(ErrorCode::Unauthorized, format!("{from} has no key `{kid}` in org.yaml"))
                .field("security.auth.kid"));
        };
        clutch_proto::sign::verify(raw, key).map_err(refuse)
    }

    /// Makes a refusal visible to operators: a `chat.system` event (`clutch.refusal.v1`) in the
    /// system run, a warning in the log and the refusals counter. A flood of refusals cannot flood
    /// the log: past a budget they are only counted, and the next one recorded says how many
    /// were left out (`unrecorded_before`).
    pub async fn report_refusal(&self, message: &Message, refusal: &Refusal) {
        let metrics = self.inner.log.metrics();
        metrics.refusals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(unrecorded) = self.inner.refusal_budget.take() else {
            metrics.refusals_unrecorded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(id = %message.id, from = %message.from.agent_id, "message refused (not recorded: over budget)");
            return;
        };
        tracing::warn!(
            id = %message.id, from = %message.from.agent_id, code = refusal.code.as_str(),
            reason = %refusal.message, unrecorded_before = unrecorded, "message refused"
        );
        let mut payload = Map::new();
        if unrecorded > 0 {
            payload.insert("unrecorded_before".into(), json!(unrecorded));
        }
        payload.insert("code".into(), json!(refusal.code.as_str()));
        payload.insert("message".into(), json!(refusal.message));
        payload.insert("claimed_from".into(), json!(message.from.agent_id));
        payload.insert("message_id".into(), json!(message.id));
        payload.insert("type".into(), json!(message.kind.as_str()));
        payload.insert("run_id".into(), json!(message.run_id));
        let mut m = system_message(MessageType::ChatSystem, Vec::new(), payload);
        m.payload_type = Some(REFUSAL_PAYLOAD.to_owned());
        if let Err(e) = self.inner.log.append_one(m).await {
            tracing::warn!(error = %e, "could not record a refusal");
        }
    }

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
            return Engine::workflow_task_view(&state.book, task_id);
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
            let w = state.book.workflow(run_id)?;
            let mut root = Engine::workflow_task_view(&state.book, &w.root_task_id)?;
            root["children"] = state
                .book
                .plan_order(w)
                .into_iter()
                .filter_map(|t| Engine::workflow_task_view(&state.book, &t.id))
                .collect();
            let progress = state.book.progress(w);
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

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn agent_status(&self, agent_id: &str) -> Result<Status> {
        self.state().agents.get(agent_id).map(|a| a.status).ok_or_else(|| not_found(agent_id))
    }

    async fn answer_forbidden_call(&self, call: &Message, refusal: &Refusal) {
        // The caller has its answer already; the log's copy is for observers, within the budget.
        if self.inner.refusal_budget.take().is_none() {
            self.inner.log.metrics().refusals_unrecorded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let tool = tool_name(call).unwrap_or_default();
        let mut payload = Map::new();
        payload.insert("code".into(), json!(ErrorCode::Forbidden.as_str()));
        payload.insert("message".into(), json!(refusal.message));
        payload.insert("retryable".into(), json!(false));
        payload.insert("details".into(), json!({"tool": tool, "call_id": call.id}));
        let mut answer = derived(call, MessageType::ToolError, vec![call.from.agent_id.clone()], payload);
        answer.idempotency_key = Some(format!("clutch:forbidden:{}", call.id));
        if let Err(e) = self.inner.log.append_one(answer).await {
            tracing::warn!(error = %e, call_id = %call.id, "could not answer a refused tool call");
        }
    }

    /// Carries out one reactor action: appends what it says, all of it in one batch.
    async fn act(&self, Action { label, messages, retry }: Action) {
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

impl Gate for Engine {
    fn admit(&self, batch: &[Entry]) -> Vec<Option<Refusal>> {
        let options = &self.inner.options;
        let state = self.state();
        // Tasks as earlier messages of this batch leave them.
        let mut staged: HashMap<&str, Task> = HashMap::new();
        let mut flows = workflow::Stage::default();
        batch
            .iter()
            .map(|entry| {
                let message = &entry.message;
                match state.check(options, &mut staged, &mut flows, message) {
                    Ok(()) => None,
                    Err(refusal) => {
                        tracing::info!(
                            id = %message.id, task_id = %message.task_id, kind = message.kind.as_str(),
                            code = refusal.code.as_str(), reason = %refusal.message, "message refused"
                        );
                        Some(refusal)
                    }
                }
            })
            .collect()
    }

    fn committed(&self, events: &[Arc<Live>]) {
        let options = &self.inner.options;
        let mut state = self.state();
        for live in events {
            state.apply(options, live.event.seq, &live.message);
        }
        drop(state);
        self.inner.wake.notify_one();
    }
}

/// Events the reactor appends in one batch; on a failed append the `retry` tasks' timers fire again
/// a second later.
struct Action {
    label: &'static str,
    messages: Vec<Message>,
    retry: Vec<String>,
}

/// The few fields of a stored event that say whether the engine's state cares about it.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    task_id: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    payload_type: Option<std::borrow::Cow<'a, str>>,
}

impl State {
    /// The state a snapshot holds, if it was saved in this format, under the same options, and is not
    /// ahead of the log (a store restored from an older backup).
    fn load(saved: &Snapshot, fingerprint: &str, head: u64, options: &Options) -> Option<State> {
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
        Some(state)
    }

    /// Registers the schema a stored `clutch.schema.v1` payload carries, and keeps the payload for
    /// snapshots when it registers (on apply, and again when a snapshot is loaded).
    fn register_stored_schema(&mut self, payload: Map<String, Value>) {
        let text = |k: &str| payload.get(k).and_then(Value::as_str);
        let (Some(pt), Some(schema)) = (text("payload_type"), payload.get("schema")) else { return };
        match self.schemas.register(pt, text("schema_ref"), schema.clone()) {
            Ok(_) => self.registered_schemas.push(payload),
            Err(problems) => tracing::warn!(payload_type = pt, ?problems, "a stored schema no longer registers"),
        }
    }

    /// Whether an event with this head changes the state (see [`State::apply`]).
    fn concerns(&self, head: &Head<'_>) -> bool {
        match head.kind {
            "task.request" => true,
            k if k.starts_with("agent.") || k.starts_with("routing.") => true,
            k if k.starts_with("task.") => {
                self.tasks.contains_key(head.task_id.as_ref()) || self.book.knows(head.task_id.as_ref())
            }
            "chat.system" => head.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.")),
            _ => false,
        }
    }

    /// Whether `message` may be stored now. `staged` holds tasks as earlier messages of the same batch
    /// leave them.
    fn check<'a>(
        &self,
        options: &Options,
        staged: &mut HashMap<&'a str, Task>,
        flows: &mut workflow::Stage,
        message: &'a Message,
    ) -> Result<(), Refusal> {
        let daemon = message.from.agent_id == ORCHESTRATOR;
        if self.book.concerns(Some(flows), message) {
            if message.kind == MessageType::TaskRequest && self.tasks.contains_key(&message.task_id) {
                return Err(Refusal::new(
                    ErrorCode::InvalidTransition,
                    format!("task {} already exists; a new request needs a new task_id", message.task_id),
                )
                .field("task_id"));
            }
            let agents = &self.agents;
            return self.book.check(flows, &|a| agents.get(a).map(|x| x.status), message);
        }
        match message.kind {
            MessageType::AgentRegister | MessageType::AgentUpdate => return self.check_agent(options, message, daemon),
            MessageType::RoutingDecision | MessageType::RoutingFailure if !daemon => {
                return Err(Refusal::new(ErrorCode::Forbidden, "routing events are the daemon's own").field("type"));
            }
            MessageType::ToolCall => return self.check_tool_call(options, message),
            MessageType::TaskRequest => {
                if !self.tasks.contains_key(&message.task_id) {
                    check_workflow(options, message)?;
                }
                for (i, text) in message.requires.iter().enumerate() {
                    Need::parse(text)
                        .map_err(|e| Refusal::new(ErrorCode::ValidationFailed, e).field(format!("requires[{i}]")))?;
                }
                router::preferences(&message.prefers, None)
                    .map_err(|(i, e)| Refusal::new(ErrorCode::ValidationFailed, e).field(format!("prefers[{i}]")))?;
            }
            _ => {}
        }
        if let Some(schema_ref) = &message.schema_ref
            && self.schemas.by_ref(schema_ref).is_some()
        {
            let problems = self.schemas.validate(schema_ref, &Value::Object(message.payload.clone()));
            if !problems.is_empty() {
                return Err(invalid_payload(format!("the payload does not match {schema_ref}"), problems));
            }
        }
        if let Some(task) = self.tasks.get(&message.task_id)
            && let Some((workflow, step)) = &task.step
            && let Some(expects) = options.policy.step(workflow, step).and_then(|s| s.expects.as_ref())
            && expects.applies_to(message)
        {
            let problems = schemas::check_expects(&self.schemas, expects, message);
            if !problems.is_empty() {
                let why = format!("step `{step}` of workflow `{workflow}` expects otherwise");
                return Err(invalid_payload(why, problems));
            }
        }
        let policy = Policy { max_routings: options.max_routings };
        let key = message.task_id.as_str();
        if let Some(task) = self.tasks.get(key)
            && message.kind == MessageType::TaskRequest
            && !daemon
            && message.idempotency_key.is_some()
            && task.request.idempotency_key == message.idempotency_key
            && task.run_id == message.run_id
        {
            // A retry of the request under its idempotency key: the store answers it as a duplicate.
            return Ok(());
        }
        let task = match staged.get(key).or_else(|| self.tasks.get(key)) {
            Some(task) => {
                let effect = tasks::next(task, message, daemon, policy)?;
                if effect == Effect::Stay {
                    return Ok(());
                }
                let mut task = task.clone();
                transition(&mut task, message, effect, 0);
                task
            }
            None if message.kind == MessageType::TaskRequest => new_task(message, 0),
            None => return Ok(()),
        };
        staged.insert(key, task);
        Ok(())
    }

    fn check_agent(&self, options: &Options, message: &Message, daemon: bool) -> Result<(), Refusal> {
        if message.payload_type.as_deref() == Some(STATUS_PAYLOAD) {
            if !daemon {
                return Err(Refusal::new(ErrorCode::Forbidden, "agent status changes are the daemon's own")
                    .field("payload_type"));
            }
            return Ok(());
        }
        let card = clutch_proto::validate::agent_card(&Value::Object(message.payload.clone())).map_err(|problems| {
            let first = problems.as_slice().first().map(|p| format!("payload.{}", p.path)).unwrap_or_default();
            Refusal::new(ErrorCode::ValidationFailed, format!("the payload is not a valid AgentCard: {problems}"))
                .field(first)
        })?;
        if !daemon && card.agent_id != message.from.agent_id && !message.from.agent_id.starts_with("user:") {
            return Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("{} may not register or update {}", message.from.agent_id, card.agent_id),
            )
            .field("payload.agent_id"));
        }
        if message.kind == MessageType::AgentUpdate && !self.agents.contains_key(&card.agent_id) {
            return Err(unknown_agent(&card.agent_id));
        }
        // What the outbound guard can tell without a lookup (names were checked before the append).
        for (name, endpoint) in &card.endpoints {
            let field = format!("payload.endpoints.{name}.url");
            match options.outbound.check_url(&endpoint.url) {
                Ok(Ok(_)) => {}
                Ok(Err(refused)) => return Err(refused.refusal(&field)),
                Err(why) => {
                    return Err(Refusal::new(ErrorCode::ValidationFailed, format!("{field}: {why}")).field(field));
                }
            }
        }
        Ok(())
    }

    /// A tool call must name a tool inside the intersection of the caller's tools (card, org.yaml),
    /// its own `tool_allowlist` and the one of the task it belongs to.
    fn check_tool_call(&self, options: &Options, message: &Message) -> Result<(), Refusal> {
        let caller = &message.from.agent_id;
        let own = message.security.as_ref().and_then(|s| s.policy.as_ref()).and_then(|p| p.tool_allowlist.as_ref());
        let task = self.tasks.get(&message.task_id);
        let inherited = task
            .and_then(|t| t.request.security.as_ref())
            .and_then(|s| s.policy.as_ref())
            .and_then(|p| p.tool_allowlist.as_ref());
        let agent = self.agents.get(caller);
        if own.is_none() && inherited.is_none() && agent.is_none() {
            return Ok(());
        }
        let Some(tool) = tool_name(message) else {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "a tool.call names its tool in payload.tool")
                .field("payload.tool"));
        };
        let refuse = |why: String| Err(Refusal::new(ErrorCode::Forbidden, why).field("payload.tool"));
        if let Some(list) = own
            && !list.iter().any(|t| t == tool)
        {
            return refuse(format!("{tool} is not in this message's tool_allowlist"));
        }
        if let Some(list) = inherited
            && !list.iter().any(|t| t == tool)
        {
            return refuse(format!("{tool} is not in the tool_allowlist of task {}", message.task_id));
        }
        if let Some(agent) = agent {
            if !agent.profile.has_tool(tool) {
                return refuse(format!("{tool} is not among the tools on {caller}'s card"));
            }
            if let Some(list) = options.policy.tool_allowlist(caller)
                && !list.iter().any(|t| t == tool)
            {
                return refuse(format!("{tool} is not in the operator's tool allowlist for {caller}"));
            }
        }
        Ok(())
    }

    /// Applies a committed event.
    fn apply(&mut self, options: &Options, seq: u64, message: &Message) {
        self.seq = self.seq.max(seq);
        // The event's own time (so a rebuild finds the same deadlines), never later than now.
        let now = options.clock.now_ms();
        let at = ts_ms(&message.ts).map_or(now, |t| t.min(now));
        if let Some(agent) = self.agents.get_mut(&message.from.agent_id) {
            agent.last_seen_ms = agent.last_seen_ms.max(at);
        }
        match message.kind {
            MessageType::AgentRegister | MessageType::AgentUpdate => self.apply_agent(options, seq, message, at),
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(SCHEMA_PAYLOAD) => {
                self.register_stored_schema(message.payload.clone());
            }
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(BUDGET_PAYLOAD) => {
                let scope = message.payload.get("scope").and_then(Value::as_str);
                let id = message.payload.get("id").and_then(Value::as_str).unwrap_or_default();
                match scope {
                    Some("agent") => {
                        if let Some(a) = self.agents.get_mut(id) {
                            a.budget_notice_sent = true;
                        }
                    }
                    Some("run") => self.runs.entry(id.to_owned()).or_default().budget_notice_sent = true,
                    _ => {}
                }
            }
            _ => {}
        }
        if self.book.concerns(None, message) {
            self.book.apply(seq, message);
            return;
        }
        let is_task_kind = matches!(
            message.kind,
            MessageType::TaskRequest
                | MessageType::TaskAccept
                | MessageType::TaskProgress
                | MessageType::TaskResult
                | MessageType::TaskError
                | MessageType::TaskCancel
                | MessageType::TaskTimeout
                | MessageType::RoutingFailure
                | MessageType::RoutingDecision
        );
        if !is_task_kind {
            return;
        }
        let daemon = message.from.agent_id == ORCHESTRATOR;
        let Some(task) = self.tasks.get(&message.task_id) else {
            if message.kind == MessageType::TaskRequest {
                self.insert_task(options, message, seq, at);
            }
            return;
        };
        let policy = Policy { max_routings: options.max_routings };
        let Ok(effect) = tasks::next(task, message, daemon, policy) else {
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
        if task.phase == Phase::Queued {
            self.queued.insert((task.since_ms, task.id.clone()));
        }
        let id = task.id.clone();
        self.tasks.insert(id.clone(), task);
        self.schedule(options, &id);
    }

    fn record(&mut self, seq: u64, message: &Message, phase: Phase) {
        self.histories.entry(message.task_id.clone()).or_default().push(Step {
            seq,
            id: message.id.clone(),
            kind: message.kind,
            from: message.from.agent_id.clone(),
            ts: message.ts.clone(),
            phase,
        });
    }

    fn insert_task(&mut self, options: &Options, message: &Message, seq: u64, at: i64) {
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
    fn account(
        &mut self,
        options: &Options,
        task: &mut Task,
        message: &Message,
        before: &(Phase, Option<String>, Option<i64>),
        at: i64,
    ) {
        let (old_phase, old_agent, old_accepted) = before;
        if old_phase.is_in_flight()
            && let Some(a) = old_agent.as_ref().and_then(|a| self.agents.get_mut(a))
            && (!task.phase.is_in_flight() || task.agent.as_ref() != Some(&a.card.agent_id))
        {
            a.in_flight.remove(&task.id);
            if let Some(accepted) = old_accepted {
                a.usage.wall_ms += (at - accepted).max(0) as u64;
            }
            self.capacity_changed = true;
            match task.phase {
                Phase::Completed => a.record_outcome(true),
                Phase::Failed | Phase::Retrying | Phase::TimedOut => a.record_outcome(false),
                _ => {}
            }
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
            }
        }
    }

    fn apply_agent(&mut self, options: &Options, seq: u64, message: &Message, at: i64) {
        if message.payload_type.as_deref() == Some(STATUS_PAYLOAD) {
            let id = message.payload.get("agent_id").and_then(Value::as_str).unwrap_or_default();
            let status = match message.payload.get("status").and_then(Value::as_str) {
                Some("online") => Status::Online,
                Some("stale") => Status::Stale,
                Some("offline") => Status::Offline,
                Some("removed") => Status::Removed,
                _ => return,
            };
            if let Some(agent) = self.agents.get_mut(id) {
                agent.status = status;
                if status == Status::Online {
                    agent.last_seen_ms = agent.last_seen_ms.max(at);
                    self.capacity_changed = true;
                }
            }
            return;
        }
        let Ok(card) = serde_json::from_value::<AgentCard>(Value::Object(message.payload.clone())) else { return };
        let id = card.agent_id.clone();
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
            }
            None => {
                let mut agent = Agent::new(card, at, budget);
                agent.card_seq = seq;
                self.agents.insert(id, agent);
            }
        }
        self.capacity_changed = true;
    }

    /// Sets a task's timer from its phase.
    fn schedule(&mut self, options: &Options, task_id: &str) {
        let Some(task) = self.tasks.get(task_id) else { return };
        let since = task.since_ms;
        let due = match task.phase {
            _ if task.cancel_to_forward => Some(since),
            Phase::Requested => Some(since),
            Phase::Retrying => Some(since + retry_delay(options, task).as_millis() as i64),
            Phase::Queued => Some(since + options.queue_timeout.as_millis() as i64),
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

    fn set_due(&mut self, task_id: &str, due: Option<i64>) {
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
    fn collect(&mut self, options: &Options, now: i64) -> (Vec<Action>, i64) {
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
                        "NO_AGENT_AVAILABLE",
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
        if self.capacity_changed {
            self.capacity_changed = false;
            to_route.extend(self.queued.iter().map(|(_, id)| id.clone()));
        }
        if !messages.is_empty() {
            actions.push(Action { label: "timers", messages, retry: fired.clone() });
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
        let expired = self.book.expired(|a| agents.get(a).map(|x| x.status));
        if !expired.is_empty() {
            let messages = expired.iter().flat_map(|(_, task)| self.book.lease_expiry(task)).collect();
            actions.push(Action { label: "leases", messages, retry: Vec::new() });
        }
        let budget = self.budget_notices(options);
        if !budget.is_empty() {
            actions.push(Action { label: "budgets", messages: budget, retry: Vec::new() });
        }
        let next = self.due.first().map_or(now + 1000, |(at, _)| *at).min(self.next_agent_check_ms);
        (actions, next)
    }

    /// Routes `ids` in one pass, counting each choice against the chosen agent's load for the next.
    fn route(&mut self, options: &Options, ids: &[String]) -> Vec<Message> {
        let mut candidates: Vec<Candidate<'_>> = self
            .agents
            .values()
            .filter(|a| a.status != Status::Removed)
            .map(|a| Candidate {
                profile: &a.profile,
                status: a.status,
                in_flight: a.in_flight.len() as u32,
                success_rate: a.success_rate(),
                budget_exhausted: a.budget_exhausted && options.policy.org.budgets.on_exceed == OnExceed::Exclude,
                allowlist: options.policy.tool_allowlist(&a.card.agent_id),
                last_selected: a.last_selected,
            })
            .collect();
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
            let excluded: Map<String, Value> =
                decision.excluded.iter().map(|(i, e)| (names(*i), Value::from(e.describe(&ask)))).collect();
            match decision.selected {
                Some(chosen) => {
                    let agent = names(chosen);
                    let scores: Map<String, Value> =
                        decision.scored.iter().map(|(i, s)| (names(*i), json!(s))).collect();
                    let mut payload = Map::new();
                    payload.insert("selected".into(), json!(agent));
                    payload.insert(
                        "candidates".into(),
                        json!(decision.scored.iter().map(|(i, _)| names(*i)).collect::<Vec<_>>()),
                    );
                    payload.insert("scores".into(), Value::Object(scores));
                    payload.insert("reason".into(), json!(decision.reason));
                    payload.insert("excluded".into(), Value::Object(excluded));
                    payload.insert("attempt".into(), json!(task.routings + 1));
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
                    out.push(task_error(task, "NO_ELIGIBLE_AGENT", &decision.reason, false, "routing"));
                }
            }
        }
        out
    }

    /// Heartbeat expiry: online → stale → offline; an offline or removed agent's tasks fail as
    /// retryable so they are routed again.
    fn check_agents(&self, options: &Options, now: i64) -> Vec<Message> {
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
                            out.push(task_error(task, "AGENT_UNAVAILABLE", &why, true, "agent-gone"));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn budget_notices(&self, options: &Options) -> Vec<Message> {
        let mut out = Vec::new();
        for agent in self.agents.values().filter(|a| a.budget_exhausted && !a.budget_notice_sent) {
            let limits = effective_budget(options, agent);
            let Some((dimension, used, limit)) = limits.crossed(&agent.usage) else { continue };
            let action = match options.policy.org.budgets.on_exceed {
                OnExceed::Exclude => "excluded from routing",
                OnExceed::FailRun => "noted",
            };
            out.push(budget_notice("agent", &agent.card.agent_id, dimension, used, limit, action, None));
        }
        for (run_id, run) in self.runs.iter().filter(|(_, r)| r.budget_exhausted && !r.budget_notice_sent) {
            let Some((dimension, used, limit)) = run_budget(options).crossed(&run.usage) else { continue };
            let action = match options.policy.org.budgets.on_exceed {
                OnExceed::Exclude => "noted",
                OnExceed::FailRun => "run failed",
            };
            let thread = run.tasks.first().and_then(|t| self.tasks.get(t)).map(|t| t.thread_id.clone());
            out.push(budget_notice("run", run_id, dimension, used, limit, action, thread));
            if options.policy.org.budgets.on_exceed == OnExceed::FailRun {
                for task in run.tasks.iter().filter_map(|t| self.tasks.get(t)).filter(|t| !t.phase.is_terminal()) {
                    out.push(budget_failure(task));
                }
            }
        }
        out
    }
}

/// Moves a (copy of a) task as `message` says. Pure bookkeeping; slots and usage are [`State::account`]'s.
fn transition(task: &mut Task, message: &Message, effect: Effect, at: i64) {
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

fn new_task(message: &Message, at: i64) -> Task {
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
        step: step_of(message),
    }
}

/// `meta.workflow` and `meta.step` of a request, when it names both.
fn step_of(message: &Message) -> Option<(String, String)> {
    let text = |k: &str| message.meta.get(k).and_then(Value::as_str).map(str::to_owned);
    Some((text("workflow")?, text("step")?))
}

/// Refuses what no client may send: the daemon's own sender and its reserved payload types.
fn reserved(message: &Message) -> Result<(), Refusal> {
    if message.from.agent_id == ORCHESTRATOR {
        return Err(Refusal::new(ErrorCode::Forbidden, format!("{ORCHESTRATOR} is the daemon's own sender"))
            .field("from.agent_id"));
    }
    if message.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.")) {
        return Err(Refusal::new(ErrorCode::Forbidden, "payload types starting with `clutch.` are the daemon's own")
            .field("payload_type"));
    }
    if matches!(message.kind, MessageType::RoutingDecision | MessageType::RoutingFailure | MessageType::TaskTimeout) {
        return Err(Refusal::new(
            ErrorCode::Forbidden,
            format!("{} events are the daemon's own", message.kind.as_str()),
        )
        .field("type"));
    }
    Ok(())
}

/// A request naming a workflow step must name one that exists.
fn check_workflow(options: &Options, message: &Message) -> Result<(), Refusal> {
    let workflow = message.meta.get("workflow").and_then(Value::as_str);
    let step = message.meta.get("step").and_then(Value::as_str);
    match (workflow, step) {
        (None, None) => Ok(()),
        (Some(w), _) if options.policy.workflow(w).is_none() => {
            Err(Refusal::new(ErrorCode::ValidationFailed, format!("no workflow `{w}` is configured"))
                .field("meta.workflow")
                .hint("workflows come from workflows.yaml in the config directory"))
        }
        (Some(w), Some(s)) if options.policy.step(w, s).is_none() => {
            Err(Refusal::new(ErrorCode::ValidationFailed, format!("workflow `{w}` has no step `{s}`"))
                .field("meta.step"))
        }
        (None, Some(_)) => {
            Err(Refusal::new(ErrorCode::ValidationFailed, "meta.step needs meta.workflow").field("meta.workflow"))
        }
        _ => Ok(()),
    }
}

fn invalid_payload(why: String, problems: Vec<clutch_proto::validate::Problem>) -> Refusal {
    let detail: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
    let mut r = Refusal::new(ErrorCode::ValidationFailed, format!("{why}: {}", detail.join("; ")));
    r.field = problems.first().map(|p| p.path.clone());
    r.problems = problems;
    r
}

/// What a task asks of its agent: its request's `requires` (or, when it has none, its workflow step's),
/// preferences and security policy.
fn ask(options: &Options, task: &Task) -> Ask {
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
fn effective_budget(options: &Options, agent: &Agent) -> Budget {
    match options.policy.budget(&agent.card.agent_id) {
        Some(policy) => agent.budget.overridden_by(policy),
        None => agent.budget,
    }
}

fn run_budget(options: &Options) -> Budget {
    options.policy.org.budgets.run.unwrap_or_default()
}

/// The wait before routing `task` again; its jitter is derived from the task id, so a restart
/// computes the same deadline.
fn retry_delay(options: &Options, task: &Task) -> Duration {
    let seed = task.id.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    crate::backoff(options.retry_backoff, options.retry_backoff_max, task.routings, seed)
}

fn tool_name(message: &Message) -> Option<&str> {
    message.payload.get("tool").or_else(|| message.payload.get("name")).and_then(Value::as_str)
}

fn not_found(agent_id: &str) -> Error {
    unknown_agent(agent_id).into()
}

fn unknown_agent(agent_id: &str) -> Refusal {
    Refusal::new(ErrorCode::AgentNotFound, format!("no agent `{agent_id}` is registered"))
        .field("agent_id")
        .hint("register it first: POST /v1/agents with its AgentCard")
}

/// A message from the daemon in the system run (agent lifecycle).
fn system_message(kind: MessageType, to: Vec<String>, payload: Map<String, Value>) -> Message {
    Message {
        v: clutch_proto::VERSION.to_owned(),
        id: id::generate(id::Kind::Message),
        ts: clutch_proto::validate::format_ts(SystemTime::now()),
        thread_id: SYSTEM_THREAD.to_owned(),
        run_id: SYSTEM_RUN.to_owned(),
        task_id: SYSTEM_TASK.to_owned(),
        parent_task_id: None,
        trace: None,
        from: Sender { agent_id: ORCHESTRATOR.to_owned(), role: None },
        to: to.into_iter().map(|agent_id| Recipient { agent_id }).collect(),
        kind,
        domain: None,
        payload_type: None,
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

/// A message from the daemon about the same run, thread and task as `about`.
fn derived(about: &Message, kind: MessageType, to: Vec<String>, payload: Map<String, Value>) -> Message {
    let mut m = system_message(kind, to, payload);
    m.thread_id = about.thread_id.clone();
    m.run_id = about.run_id.clone();
    m.task_id = about.task_id.clone();
    m.parent_task_id = about.parent_task_id.clone();
    m.trace = about.trace.clone();
    m
}

fn status_message(agent_id: &str, status: Status, previous: Status) -> Message {
    let mut payload = Map::new();
    payload.insert("agent_id".into(), json!(agent_id));
    payload.insert("status".into(), json!(status.as_str()));
    payload.insert("previous".into(), json!(previous.as_str()));
    let mut m = system_message(MessageType::AgentUpdate, Vec::new(), payload);
    m.payload_type = Some(STATUS_PAYLOAD.to_owned());
    m
}

/// The task's request, delivered to `agent` as delivery `attempt`.
fn delivery(task: &Task, agent: String, attempt: u32) -> Message {
    let original = &task.request;
    let mut m = derived(original, MessageType::TaskRequest, vec![agent], original.payload.clone());
    m.domain = original.domain.clone();
    m.payload_type = original.payload_type.clone();
    m.schema_ref = original.schema_ref.clone();
    m.requires = original.requires.clone();
    m.prefers = original.prefers.clone();
    m.attachments = original.attachments.clone();
    m.security =
        original.security.as_ref().map(|s| clutch_proto::message::Security { auth: None, policy: s.policy.clone() });
    m.attempt = attempt;
    m.meta = original.meta.clone();
    m.meta.insert("clutch_request_id".into(), json!(original.id));
    m.idempotency_key = Some(format!("clutch:deliver:{}:{attempt}", task.id));
    m
}

/// No agent for the task: queued (it waits for one) or not (it fails).
fn routing_failure(task: &Task, reason: &str, excluded: Map<String, Value>, queued: bool) -> Message {
    let mut payload = Map::new();
    payload.insert("reason".into(), json!(reason));
    payload.insert("excluded".into(), Value::Object(excluded));
    payload.insert("queued".into(), json!(queued));
    let mut event = derived(&task.request, MessageType::RoutingFailure, Vec::new(), payload);
    let key = if queued { "queue" } else { "unroutable" };
    event.idempotency_key = Some(format!("clutch:{key}:{}:{}", task.id, task.routings + 1));
    event
}

/// A task of a run over budget fails (`budgets.on_exceed: fail_run`).
fn budget_failure(task: &Task) -> Message {
    task_error(task, ErrorCode::BudgetExceeded.as_str(), "the run's budget is spent", false, "budget")
}

fn task_error(task: &Task, code: &str, text: &str, retryable: bool, key: &str) -> Message {
    let mut payload = Map::new();
    payload.insert("code".into(), json!(code));
    payload.insert("message".into(), json!(text));
    payload.insert("retryable".into(), json!(retryable));
    let to = task.agent.iter().cloned().chain(std::iter::once(task.requester.clone())).collect();
    let mut m = derived(&task.request, MessageType::TaskError, to, payload);
    m.attempt = task.attempt;
    m.idempotency_key = Some(format!("clutch:{key}:{}:{}:{}", task.id, task.routings, task.attempt));
    m
}

fn timeout(task: &Task) -> Message {
    let mut payload = Map::new();
    payload.insert("message".into(), json!("the task ran past its agent's max_runtime_sec"));
    let to = task.agent.iter().cloned().chain(std::iter::once(task.requester.clone())).collect();
    let mut m = derived(&task.request, MessageType::TaskTimeout, to, payload);
    m.attempt = task.attempt;
    m.idempotency_key = Some(format!("clutch:timeout:{}:{}", task.id, task.attempt));
    m
}

fn forward_cancel(task: &Task, history: Option<&Vec<Step>>) -> Message {
    let last_cancel =
        history.and_then(|h| h.iter().rev().find(|s| s.kind == MessageType::TaskCancel)).map(|s| s.id.clone());
    let mut payload = Map::new();
    payload.insert("message".into(), json!("the task was cancelled"));
    payload.insert("cancel_id".into(), json!(last_cancel));
    let mut m = derived(&task.request, MessageType::TaskCancel, task.agent.iter().cloned().collect(), payload);
    m.idempotency_key = Some(format!("clutch:cancel:{}", task.id));
    m
}

fn budget_notice(
    scope: &str,
    id: &str,
    dimension: &str,
    used: f64,
    limit: f64,
    action: &str,
    thread: Option<String>,
) -> Message {
    let mut payload = Map::new();
    payload.insert("scope".into(), json!(scope));
    payload.insert("id".into(), json!(id));
    payload.insert("dimension".into(), json!(dimension));
    payload.insert("used".into(), json!(used));
    payload.insert("limit".into(), json!(limit));
    payload.insert("action".into(), json!(action));
    payload.insert(
        "message".into(),
        json!(format!("{scope} {id} reached its {dimension} budget ({used} of {limit}): {action}")),
    );
    let mut m = system_message(MessageType::ChatSystem, Vec::new(), payload);
    if scope == "run" {
        m.run_id = id.to_owned();
        if let Some(t) = thread {
            m.thread_id = t;
        }
    }
    m.payload_type = Some(BUDGET_PAYLOAD.to_owned());
    m.idempotency_key = Some(format!("clutch:budget:{scope}:{id}"));
    m
}

fn schema_view(s: &schemas::Schema) -> Value {
    json!({"payload_type": s.payload_type(), "schema_ref": s.schema_ref(), "builtin": s.is_builtin()})
}

fn usage_json(u: &Usage) -> Value {
    json!({"tokens": u.tokens, "cost_usd": u.cost_usd, "requests": u.requests, "wall_time_sec": u.wall_ms / 1000})
}

fn agent_view(options: &Options, a: &Agent) -> Value {
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

fn task_view(t: &Task) -> Value {
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

fn ts_ms(ts: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}
