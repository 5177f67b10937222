//! The engine: the agent registry, the router, task state and every timer (accept deadlines,
//! redelivery, retry backoff, runtime limits, heartbeat expiry, queue timeouts), kept in step with
//! the log. It vets each message on the writer's path ([`Gate`]), applies each committed event, and
//! a reactor task turns due timers and new tasks into events of its own (routing decisions, routed
//! requests, redeliveries, timeouts). Its state is rebuilt from the log on start, so nothing it was
//! waiting for is lost with a restart.
//!
//! One module per concern: `snapshot` (rebuilding and saving the state), `client` (what clients
//! call), `vet` (the gate's check before a message is stored), `apply` (each committed event), the
//! `reactor` (timers and routing), `messages` (the engine's own messages), `views` (what it shows),
//! `workflows` (the workflow operations), `approvals` (tool calls waiting for a person), `sessions`
//! (positions' sessions) and `inbox` (routed tasks worked without a push endpoint). This file holds
//! what they share: the options, the engine handle and its state.
//!
//! Besides those: `evict` (ended work leaving memory), `lists` (the lists and search, read from the
//! store) and `machine` (the same state and rules driven by hand at a manual clock, feature `testing`).
//!
//! **The state holds work in flight, not history** (see `evict`): ended tasks, workflows and sessions
//! leave memory after `ended_retention` (or past `ended_max`), and their reads replay the log; so memory
//! follows the work in flight, not the daemon's age. The engine reads the operator's policy
//! (`config::Policy`: allowlists, budgets, keys, workflow steps) and holds the payload schema registry in
//! its state (schemas registered at run time are events too). The longest hold of its lock by its own
//! work is a gauge in `/metrics` (`clutch_engine_longest_hold_seconds`), beside its footprint
//! (`clutch_engine_tasks`, `_ended_tasks`, `_tombstones`, `_runs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use clutch_proto::error::Next;
use clutch_proto::message::Recipient;
use clutch_proto::{AgentCard, ErrorCode, Message, MessageType};
use clutch_store::{Entry, Filter, Outcome, Snapshot};
use serde_json::{Map, Value};
use tokio::sync::Notify;

use self::apply::*;
use self::messages::*;
use self::reactor::*;
use self::vet::*;
use self::views::*;
use crate::clock::Clock;
pub use crate::config::OnExceed;
use crate::config::{Budget, Policy};
use crate::guard;
use crate::log::{Gate, Handle};
use crate::registry::{Agent, Status, Usage};
use crate::roots::Roots;
use crate::router::{self, Ask, Candidate, Need};
use crate::schemas::{self, Registry};
use crate::session::Sessions;
use crate::stream::Live;
use crate::tasks::{self, Effect, ORCHESTRATOR, Phase, Retries, Step, Task};
use crate::throttle::Throttle;
use crate::workflow::{self, Workflows};
use crate::{Error, Refusal, Result};

mod apply;
mod approvals;
mod client;
mod evict;
mod inbox;
mod lists;
#[cfg(feature = "testing")]
mod machine;
mod messages;
mod reactor;
mod sessions;
mod snapshot;
mod vet;
mod views;
mod workflows;

#[cfg(feature = "testing")]
pub use self::machine::Machine;

/// `payload_type` of a schema registered at run time (`chat.system` in the system run).
pub const SCHEMA_PAYLOAD: &str = "clutch.schema.v1";
/// `payload_type` of a refusal operators should see (a bad or missing signature).
pub const REFUSAL_PAYLOAD: &str = "clutch.refusal.v1";
/// The run, thread and task that agent lifecycle events belong to.
pub const SYSTEM_RUN: &str = "run_00000000000000000000000000";
pub const SYSTEM_THREAD: &str = "thr_00000000000000000000000000";
pub const SYSTEM_TASK: &str = "task_00000000000000000000000000";
/// `payload_type` of agent status transitions (`agent.update`).
pub const AGENT_STATUS_PAYLOAD: &str = "clutch.agent.status.v1";
/// `payload_type` of budget notices (`chat.system`).
pub const BUDGET_PAYLOAD: &str = "clutch.budget.v1";
/// `payload_type` of the notice that a failed task will be routed again (`chat.system` on the task).
pub const TASK_RETRY_PAYLOAD: &str = clutch_store::lists::TASK_RETRY_PAYLOAD;
/// `payload_type` of the daemon's note that it is making a tool call (`chat.system`, the call's run).
pub const TOOL_STARTED_PAYLOAD: &str = "clutch.tool.started.v1";
/// `payload_type` of a tool call waiting for approval (`chat.system`, the call's run).
pub const APPROVAL_REQUESTED_PAYLOAD: &str = "clutch.approval.requested.v1";
/// `payload_type` of the decision about a call that waited for approval.
pub const APPROVAL_DECIDED_PAYLOAD: &str = "clutch.approval.decided.v1";

/// Delivery timers, retries and what the engine keeps in memory: the `[engine]` section of the
/// config file. Defaults suit agents on the same network; tests shorten them. The fields the file
/// does not set are what the daemon wires in: its policy, clock, guards, adapters and retention.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// The heartbeat interval agents are told to keep.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub heartbeat_interval: Duration,
    /// Silence after which an agent is `stale` (gets no new tasks).
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub stale_after: Duration,
    /// Silence after which an agent is `offline`: its unfinished tasks fail as retryable and are
    /// routed again. At least `stale_after`.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub offline_after: Duration,
    /// A delivered `task.request` not accepted within this is delivered again.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub accept_timeout: Duration,
    /// Deliveries of one routing before the task fails with `DELIVERY_FAILED` (at least 1).
    pub max_deliveries: u32,
    /// Routings of a task in all: the first and one per retryable error (at least 1).
    pub max_routings: u32,
    /// First backoff before routing again after a retryable error; doubles per retry up to
    /// `retry_backoff_max`, with jitter.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub retry_backoff: Duration,
    /// The longest backoff between retries (at least `retry_backoff`).
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub retry_backoff_max: Duration,
    /// How long a task may wait for a busy, offline or out-of-budget agent before it fails.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub queue_timeout: Duration,
    /// Runtime limit for agents whose card sets no `limits.max_runtime_sec` (absent: none).
    #[serde(with = "crate::options::optional", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::options::Text>")]
    pub default_max_runtime: Option<Duration>,
    /// How long an ended task stays in memory; then it leaves, and reads of it come from the log...
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub ended_retention: Duration,
    /// ...and how many ended tasks may stay at most: past this the oldest leave sooner, so a burst
    /// of work never sits in memory for a whole retention.
    pub ended_max: usize,
    /// Tombstones kept of tasks that left memory, so late messages about them are refused without a
    /// lookup (about 40 bytes each; past them the log is asked).
    pub tombstones: usize,
    /// Save a snapshot of the engine's state every this many events (0: only on a clean stop): a
    /// start loads it and replays only the events after it...
    pub snapshot_every: u64,
    /// ...but not sooner than this after the start or the last snapshot. A snapshot holds the work
    /// in flight (ended tasks are saved as gone), and appends wait only while it is copied. A start
    /// after a crash replays at most about `snapshot_every` events or an interval's worth.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub snapshot_interval: Duration,
    /// The operator's policy (org.yaml, workflows.yaml): tool allowlists, budgets, signing keys,
    /// workflow steps and payload schemas.
    #[serde(skip)]
    pub policy: Arc<Policy>,
    /// Where "now" comes from: the system clock, or a manual one in tests.
    #[serde(skip)]
    pub clock: Clock,
    /// Which networks agents' endpoints may aim at (see [`crate::guard`]): public addresses only,
    /// unless the operator allows more.
    #[serde(skip)]
    pub outbound: Arc<guard::Policy>,
    /// The directories workspaces (and the repositories they come from) may be in (see
    /// [`crate::roots`]); none: workspaces are refused.
    #[serde(skip)]
    pub workspace_roots: Roots,
    /// The adapters that carry tool calls out (see [`crate::adapter`]); the faces list their tools.
    #[serde(skip)]
    pub adapters: crate::adapter::Registry,
    /// Retention of the log: which ended runs are archived and removed (see [`crate::retention`]).
    /// Its own section of the config file, `[retention]`.
    #[serde(skip)]
    pub retention: crate::retention_policy::Options,
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
            policy: Arc::new(Policy::default()),
            ended_retention: Duration::from_secs(300),
            ended_max: 10_000,
            tombstones: 100_000,
            snapshot_every: 10_000,
            snapshot_interval: Duration::from_millis(500),
            clock: Clock::system(),
            outbound: Arc::new(guard::Policy::default()),
            workspace_roots: Roots::default(),
            adapters: crate::adapter::Registry::default(),
            retention: crate::retention_policy::Options::default(),
        }
    }
}

impl Options {
    /// The rules types alone do not say; the first one broken.
    pub fn check(&self) -> std::result::Result<(), crate::options::Invalid> {
        use crate::options::{Invalid, nonzero, positive};
        nonzero("heartbeat_interval", self.heartbeat_interval)?;
        nonzero("stale_after", self.stale_after)?;
        nonzero("accept_timeout", self.accept_timeout)?;
        positive("max_deliveries", u64::from(self.max_deliveries))?;
        positive("max_routings", u64::from(self.max_routings))?;
        if self.offline_after < self.stale_after {
            return Err(Invalid::new(
                "offline_after",
                "must be at least `stale_after`: an agent is stale before it is offline",
            ));
        }
        if self.retry_backoff_max < self.retry_backoff {
            return Err(Invalid::new("retry_backoff_max", "must be at least `retry_backoff`"));
        }
        if let Some(limit) = self.default_max_runtime {
            nonzero("default_max_runtime", limit)?;
        }
        Ok(())
    }
}

/// The answer to one submitted message.
#[derive(Debug, Clone, PartialEq)]
pub enum Ack {
    Stored(Outcome),
    /// A heartbeat: recorded in memory, not in the log.
    Heartbeat(crate::view::Heartbeat),
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
    /// Identifies the options snapshots are valid for (see `snapshot::fingerprint`).
    fingerprint: String,
    /// The `seq` of the last snapshot saved or loaded.
    saved_seq: AtomicU64,
    /// When the last snapshot was saved while running.
    saved_at: Mutex<std::time::Instant>,
    /// The `seq` of the snapshot loaded on start (0: none).
    snapshot_seq: u64,
    /// How many refusals may still be recorded in the log: a burst of 20, then 2 a second...
    refusal_budget: Throttle,
    /// ...and for each sender they claim to be from, a burst of 5, then one every 10 seconds, so
    /// one sender's flood leaves the others their share.
    refusal_budget_per_sender: crate::throttle::Throttles,
    /// The positions the runner serves, as it announced them (see [`Engine::set_positions`]).
    positions: std::sync::RwLock<Vec<Value>>,
    /// The longest the engine's lock was held by its own work (a reactor pass, a snapshot), in
    /// microseconds: the longest the writer could have waited for it.
    longest_hold_us: AtomicU64,
    /// The longest the log's writer waited for the engine's lock (to vet or to apply a batch), in
    /// microseconds: whatever held it (the engine's own work, a read, the scheduler).
    longest_writer_wait_us: AtomicU64,
    /// The state's `evicted_ms`, readable without the lock: a client's message about a task newer
    /// than this cannot concern one that left memory, so submitting it takes no lock for that.
    evicted_ms: AtomicU64,
    /// Held by a retention pass, so that two never run at once.
    pub(crate) retention: tokio::sync::Mutex<()>,
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
    /// (ended ms, task id) of the ended tasks still in memory: they leave `ended_retention` later.
    #[serde(default)]
    ended: BTreeSet<(i64, String)>,
    /// (ended ms, workflow id) of the ended workflows still in memory: they leave as ended tasks do.
    #[serde(default)]
    ended_workflows: BTreeSet<(i64, String)>,
    /// (ended ms, session id) of the ended positions' sessions still in memory: the same.
    #[serde(default)]
    ended_sessions: BTreeSet<(i64, String)>,
    /// The tasks that left memory (see `evict`); not saved: past a restart the log is asked.
    #[serde(skip)]
    tombstones: evict::Tombstones,
    /// What the last eviction took out of memory, to be freed outside the lock.
    #[serde(skip)]
    evicted: Vec<(Task, Option<Vec<Step>>)>,
    /// The creation time (ms, from its id) of the newest task that left memory: a lifecycle message
    /// about an unknown task no newer than this may concern one.
    #[serde(default)]
    evicted_ms: u64,
    /// The creation time (ms, from its id) of the newest task that ended since the start.
    #[serde(skip)]
    ended_id_ms: u64,
    /// Task ids per run, in the order they appeared.
    runs: HashMap<String, Run>,
    /// (due ms, task id) of every task timer.
    due: BTreeSet<(i64, String)>,
    /// (queued since ms, task id) of tasks waiting for an agent.
    queued: BTreeSet<(i64, String)>,
    /// Agents that may take more now (a slot freed, back online, a new card): the queued tasks one
    /// of them could take are routed again, and no others.
    #[serde(default)]
    freed: BTreeSet<String>,
    /// Tasks that went `retrying` with no notice of it sent yet.
    #[serde(default)]
    retries_to_note: BTreeSet<String>,
    /// Queued tasks woken to be routed again, in all (for tests).
    #[serde(skip)]
    woken: u64,
    /// Some agent or run may have crossed its budget with no notice sent yet: the reactor looks at
    /// every agent and run only then (set where a budget is found crossed, and when a snapshot
    /// loads; cleared by a look that finds nothing to say).
    #[serde(skip)]
    budget_pending: bool,
    /// Counts routed deliveries: the round-robin clock.
    routing_clock: u64,
    next_agent_check_ms: i64,
    /// Workflows: pull work, claimed by agents (see [`crate::workflow`]).
    workflows: Workflows,
    /// Tool calls waiting for a person's approval, by call id.
    #[serde(default)]
    approvals: BTreeMap<String, crate::view::Approval>,
    /// Positions' sessions: their teams, protocols and bus counts (see [`crate::session`]).
    #[serde(default)]
    sessions: Sessions,
}

#[derive(Default, Clone, serde::Serialize, serde::Deserialize)]
struct Run {
    tasks: Vec<String>,
    /// When its first task event happened (its wall time counts from here).
    first_ms: Option<i64>,
    usage: Usage,
    budget_exhausted: bool,
    budget_notice_sent: bool,
    /// How many of its tasks ended and left memory.
    #[serde(default)]
    evicted: u64,
}

impl Engine {
    /// The check the log writer runs on every message (see [`crate::Service::set_gate`]).
    pub fn gate(&self) -> Arc<dyn Gate> {
        Arc::new(self.clone())
    }

    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The `seq` of the last event applied to the engine's state: the log's head once the daemon is
    /// built and before any client can append (what a component starting with it takes as "from
    /// here on").
    pub fn seq(&self) -> u64 {
        self.state().seq
    }

    /// The adapters that carry tool calls out, and the tools they serve.
    pub fn adapters(&self) -> &crate::adapter::Registry {
        &self.inner.options.adapters
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, for the log's writer: how long it waited for it is noted.
    fn writer_state(&self) -> MutexGuard<'_, State> {
        let waiting = std::time::Instant::now();
        let state = self.state();
        self.inner.longest_writer_wait_us.fetch_max(waiting.elapsed().as_micros() as u64, Ordering::Relaxed);
        state
    }

    /// Notes that the engine's own work held its lock for `held`.
    fn held(&self, held: Duration) {
        self.inner.longest_hold_us.fetch_max(held.as_micros() as u64, Ordering::Relaxed);
    }

    fn agent_status(&self, agent_id: &str) -> Result<Status> {
        self.state().agents.get(agent_id).map(|a| a.status).ok_or_else(|| not_found(agent_id))
    }
}

impl Gate for Engine {
    fn admit(&self, batch: &[Entry]) -> Vec<Option<Refusal>> {
        let options = &self.inner.options;
        let state = self.writer_state();
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
                        // The client has its answer and the refusals counter counts it: a flood of
                        // refused messages must not flood the log at the default level.
                        tracing::debug!(
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
        let mut state = self.writer_state();
        for live in events {
            state.apply(options, live.event.seq, &live.message);
        }
        drop(state);
        self.inner.wake.notify_one();
    }
}
