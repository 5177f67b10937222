//! Sessions: the runs in which a team of agents (a position) talks. A session's runner opens it and
//! moves it through its phases with `clutch.session.v1` records (`task.progress` on the session's
//! root task); its members talk with `clutch.session.message.v1` messages (`chat.message` in the
//! session's run). The bus rules are checked here, on the writer's path: a message type outside the
//! position's protocol, a sender or recipient outside the team, a closed session, a sender over its
//! rate, a session at its message cap and a repeated message (a loop) are refused.
//!
//! A loop is a sender repeating itself within one stretch of the pattern: the same step of the same
//! round (a vote in round 2 equal to round 1's is no loop). The runner's own copies of what a turn
//! produced (`meta.session_key` set; only daemon code writes session messages, since clients may not
//! send `clutch.*` payload types) are the session's history and are never refused by these rules.
//!
//! Counts are kept as committed events leave them: messages of one batch do not see each other, so a
//! batch may overshoot a cap by its own size (messages come one by one through `session_send`).
//!
//! The phases are `INITIALIZING → SPAWNING_AGENTS → RUNNING → COMPLETING → COMPLETED | ERROR | TIMEOUT`;
//! only the root task's assignee writes records, phases only move forward, and after a cancel the last
//! record is a `chat.system`. [`Sessions`] (plain serde data in the engine's state) holds each session's
//! team, protocol, limits and bus counts. A loop is looked for among a sender's last `LOOP_WINDOW`
//! messages; each refusal is told to the team in a warning (`clutch.session.warning.v1`) counted against
//! the sender's rate. Core knows no SKILL.md: only what the runner announced at its start
//! (`Engine::set_positions`, in memory) and the records.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use clutch_proto::{ErrorCode, Message, MessageType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Refusal;

/// A session's record: what its runner reports as it moves (`task.progress` on the root task).
pub const RECORD_PAYLOAD: &str = "clutch.session.v1";
/// A message between a session's members (`chat.message` in the session's run).
pub const MESSAGE_PAYLOAD: &str = "clutch.session.message.v1";
/// A warning to a session's members (`chat.system`): a loop was broken.
pub const WARNING_PAYLOAD: &str = "clutch.session.warning.v1";
/// The positions runner's agent id: invocations are task requests to it by name (the runner is
/// part of the daemon, not a registered agent; it announces its positions with
/// `Engine::set_positions`).
pub const RUNNER: &str = "agent:positions";
/// What `to` may name instead of agent ids: every other member.
pub const ALL: &str = "all";

/// Messages looked back at for a loop: a sender repeating one of its last messages in this window
/// (same type, same content, same step and round) is refused.
const LOOP_WINDOW: usize = 16;

/// The meta key the positions runner writes each of its messages under (where it is in the pattern).
pub const SESSION_KEY: &str = "session_key";

/// A session's state machine: `INITIALIZING → SPAWNING_AGENTS → RUNNING → COMPLETING → COMPLETED`,
/// or `ERROR` / `TIMEOUT` from any phase before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schemars(rename = "SessionPhase")]
pub enum Phase {
    Initializing,
    SpawningAgents,
    Running,
    Completing,
    Completed,
    Error,
    Timeout,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initializing => "INITIALIZING",
            Phase::SpawningAgents => "SPAWNING_AGENTS",
            Phase::Running => "RUNNING",
            Phase::Completing => "COMPLETING",
            Phase::Completed => "COMPLETED",
            Phase::Error => "ERROR",
            Phase::Timeout => "TIMEOUT",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, Phase::Completed | Phase::Error | Phase::Timeout)
    }

    /// Whether a session may move from `self` to `next` (staying is allowed: a record may add detail).
    pub fn may_move_to(self, next: Phase) -> bool {
        !self.is_final() && (next >= self || matches!(next, Phase::Error | Phase::Timeout))
    }
}

/// A `clutch.session.v1` record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "SessionRecord")]
pub struct Record {
    /// The session's id: its run's id.
    pub session_id: String,
    /// The position it runs (`mirror`).
    pub position: String,
    /// The position's collaboration pattern (`mirror`).
    pub pattern: String,
    pub phase: Phase,
    /// The position's workflow phase now under way (`ANALYSIS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The round under way, for patterns that go in rounds (a circle's votes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// The team, once spawned (every record after that repeats it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Member>,
    /// The message types the position's protocol allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocol: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Members that failed (announced to the others).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// What happened, in words (why it ended, what was forced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Pattern-specific detail: a comparison, the votes of a round, the partial results kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

/// One agent of a session's team and the role it plays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "SessionMember")]
pub struct Member {
    pub agent_id: String,
    pub role: String,
}

/// The bus limits of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "SessionLimits")]
pub struct Limits {
    /// Messages the whole session may carry (`SESSION_MAX_MESSAGES`).
    pub max_messages: u32,
    /// Messages one member may send in any 60 seconds.
    pub per_agent_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_messages: 1000, per_agent_per_minute: 30 }
    }
}

/// A `clutch.session.message.v1` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "SessionSaid")]
pub struct Said {
    /// A message type of the position's protocol (`RESULTS`).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub content: Value,
}

/// A `clutch.session.warning.v1` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "SessionWarning")]
pub struct Warning {
    pub code: String,
    /// The member it is about.
    pub agent_id: String,
    pub message: String,
}

/// An invocation of a position, as every face takes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Invocation {
    /// What the team works on: text, or any JSON (a swarm partitions an array by items).
    #[serde(default)]
    pub input: Value,
    /// Who plays each role: role name → an agent id, a person (`user:NAME`), or a capability
    /// (`skill:NAME`) the router casts an agent for (several separated by commas).
    /// Roles nobody is named for are played by LLM agents spawned for the session.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, String>,
    /// A circle's rounds, overriding the position's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// A swarm's workers, overriding the position's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// The run (the session's id) and thread to use; new ones by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

/// Every session, by id.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Sessions {
    by_id: HashMap<String, Session>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    pub root_task_id: String,
    pub thread_id: String,
    /// Who runs it: the root task's assignee, the only one who may write its records.
    pub runner: String,
    pub position: String,
    pub pattern: String,
    pub phase: Phase,
    pub step: Option<String>,
    pub round: Option<u32>,
    /// Member agent id → role.
    pub members: BTreeMap<String, String>,
    pub failed: BTreeSet<String>,
    pub protocol: Vec<String>,
    pub limits: Limits,
    pub messages: u32,
    pub started_at: String,
    /// The root task ended: nothing more may be said.
    pub closed: bool,
    /// Per sender, the times (ms) of its messages, and of the loop warnings about it, within the
    /// last minute.
    recent_by: HashMap<String, VecDeque<i64>>,
    /// The last messages: who sent what, in which stretch of the pattern.
    recent: VecDeque<Recent>,
}

/// One recent message, as loop detection compares them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recent {
    from: String,
    kind: String,
    content: u64,
    step: Option<String>,
    round: Option<u32>,
}

impl Sessions {
    pub fn get(&self, id: &str) -> Option<&Session> {
        self.by_id.get(id)
    }

    /// Whether session `id` is known and has not ended.
    pub fn in_flight(&self, id: &str) -> bool {
        self.by_id.get(id).is_some_and(|s| !matches!(s.phase, Phase::Completed | Phase::Error | Phase::Timeout))
    }

    /// Whether session `id` is known and over: its phase is final, or its task ended.
    pub fn ended(&self, id: &str) -> bool {
        self.by_id
            .get(id)
            .is_some_and(|s| s.closed || matches!(s.phase, Phase::Completed | Phase::Error | Phase::Timeout))
    }

    /// Forgets session `id` (it ended and left memory, or its log was removed by retention).
    pub fn forget(&mut self, id: &str) {
        self.by_id.remove(id);
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.by_id.values()
    }

    /// Whether `message` is a session's record or message (the only kinds this module checks).
    pub fn concerns(message: &Message) -> bool {
        matches!(message.payload_type.as_deref(), Some(RECORD_PAYLOAD | MESSAGE_PAYLOAD | WARNING_PAYLOAD))
    }

    /// Whether `message` may be stored. `assignee` is the agent the message's task is assigned to.
    pub fn check(&self, message: &Message, assignee: Option<&str>, now_ms: i64) -> Result<(), Refusal> {
        match message.payload_type.as_deref() {
            Some(RECORD_PAYLOAD) => self.check_record(message, assignee),
            Some(MESSAGE_PAYLOAD) => self.check_message(message, now_ms),
            Some(WARNING_PAYLOAD) => {
                let session = self.open(&message.run_id)?;
                read::<Warning>(message).map(|_| ()).and_then(|_| {
                    (message.from.agent_id == session.runner || message.from.agent_id == crate::tasks::ORCHESTRATOR)
                        .then_some(())
                        .ok_or_else(|| {
                            Refusal::new(ErrorCode::Forbidden, "session warnings are the daemon's own")
                                .field("from.agent_id")
                        })
                })
            }
            _ => Ok(()),
        }
    }

    fn check_record(&self, message: &Message, assignee: Option<&str>) -> Result<(), Refusal> {
        let record: Record = read(message)?;
        // After its task ended (cancelled), a session's last record is a `chat.system` from its runner.
        if message.kind == MessageType::ChatSystem
            && let Some(session) = self.by_id.get(&message.run_id)
            && session.runner == message.from.agent_id
            && record.phase.is_final()
            && !session.phase.is_final()
        {
            return Ok(());
        }
        if message.kind != MessageType::TaskProgress {
            return Err(Refusal::new(
                ErrorCode::ValidationFailed,
                "a session record is a task.progress (a chat.system only for the final record after its task ended)",
            )
            .field("type"));
        }
        if record.session_id != message.run_id {
            return Err(
                Refusal::new(ErrorCode::ValidationFailed, "a session's id is its run's id").field("payload.session_id")
            );
        }
        if assignee != Some(message.from.agent_id.as_str()) {
            return Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("only the agent running task {} may record its session", message.task_id),
            )
            .field("from.agent_id"));
        }
        if let Some(session) = self.by_id.get(&record.session_id) {
            if session.root_task_id != message.task_id {
                return Err(Refusal::new(
                    ErrorCode::InvalidTransition,
                    format!("session {} is recorded on task {}", session.id, session.root_task_id),
                )
                .field("task_id"));
            }
            if !session.phase.may_move_to(record.phase) {
                return Err(Refusal::new(
                    ErrorCode::InvalidTransition,
                    format!(
                        "session {} is {}; it cannot move to {}",
                        session.id,
                        session.phase.as_str(),
                        record.phase.as_str()
                    ),
                )
                .field("payload.phase"));
            }
        }
        Ok(())
    }

    fn check_message(&self, message: &Message, now_ms: i64) -> Result<(), Refusal> {
        if message.kind != MessageType::ChatMessage {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "a session message is a chat.message").field("type"));
        }
        let session = self.open(&message.run_id)?;
        let from = message.from.agent_id.as_str();
        if !session.members.contains_key(from) && from != session.runner {
            return Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("{from} is not a member of session {}", session.id),
            )
            .field("from.agent_id"));
        }
        let said: Said = read(message)?;
        if !session.protocol.contains(&said.kind) {
            return Err(Refusal::new(
                ErrorCode::ValidationFailed,
                format!(
                    "`{}` is not a message type of position {} ({})",
                    clutch_proto::error::quote(&said.kind),
                    session.position,
                    session.protocol.join(", ")
                ),
            )
            .field("payload.type"));
        }
        if message.to.is_empty() {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "a session message names its recipients").field("to"));
        }
        for (i, r) in message.to.iter().enumerate() {
            if !session.members.contains_key(&r.agent_id) && r.agent_id != session.runner {
                return Err(Refusal::new(
                    ErrorCode::ValidationFailed,
                    format!(
                        "{} is not in session {} (its members: {})",
                        clutch_proto::error::quote(&r.agent_id),
                        session.id,
                        session.members.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )
                .field(format!("to[{i}].agent_id")));
            }
        }
        if message.meta.contains_key(SESSION_KEY) {
            return Ok(());
        }
        if session.messages >= session.limits.max_messages {
            return Err(Refusal::new(
                ErrorCode::BudgetExceeded,
                format!("session {} has carried its {} messages (its cap)", session.id, session.limits.max_messages),
            )
            .hint("the cap is positions.max_messages in clutch.toml"));
        }
        if session.at_rate(from, now_ms) {
            let recent = session.recent_count(from, now_ms);
            return Err(Refusal::new(
                ErrorCode::RateLimited,
                format!(
                    "{from} has sent {recent} messages in session {} within a minute (its limit is {})",
                    session.id, session.limits.per_agent_per_minute
                ),
            )
            .hint("wait before sending more; the limit is positions.agent_messages_per_minute (a repeat refused as a loop counts too)"));
        }
        let this = session.as_recent(from, &said);
        if session.recent.contains(&this) {
            return Err(Refusal::new(
                ErrorCode::LoopDetected,
                format!(
                    "{from} already sent this {} in session {}{}; the repeat was not delivered",
                    said.kind,
                    session.id,
                    session.step.as_deref().map(|s| format!(" during {s}")).unwrap_or_default(),
                ),
            )
            .field("payload.content"));
        }
        Ok(())
    }

    fn open(&self, id: &str) -> Result<&Session, Refusal> {
        let session = self.by_id.get(id).ok_or_else(|| {
            Refusal::new(ErrorCode::SessionNotFound, format!("no session `{}`", clutch_proto::error::quote(id)))
                .field("run_id")
        })?;
        if session.closed || session.phase.is_final() {
            return Err(Refusal::new(
                ErrorCode::InvalidTransition,
                format!("session {id} has ended ({})", session.phase.as_str()),
            )
            .field("run_id"));
        }
        Ok(session)
    }

    /// Applies a committed record, message or warning; and closes a session whose root task ended
    /// (`ended` is the task that just ended, if one did).
    pub fn apply(&mut self, message: &Message, at_ms: i64) {
        match message.payload_type.as_deref() {
            Some(RECORD_PAYLOAD) => {
                let Ok(record) = read::<Record>(message) else { return };
                let session = self.by_id.entry(record.session_id.clone()).or_insert_with(|| Session {
                    id: record.session_id.clone(),
                    root_task_id: message.task_id.clone(),
                    thread_id: message.thread_id.clone(),
                    runner: message.from.agent_id.clone(),
                    position: record.position.clone(),
                    pattern: record.pattern.clone(),
                    phase: record.phase,
                    step: None,
                    round: None,
                    members: BTreeMap::new(),
                    failed: BTreeSet::new(),
                    protocol: Vec::new(),
                    limits: Limits::default(),
                    messages: 0,
                    started_at: message.ts.clone(),
                    closed: false,
                    recent_by: HashMap::new(),
                    recent: VecDeque::new(),
                });
                session.phase = record.phase;
                session.step = record.step.or(session.step.take());
                session.round = record.round.or(session.round);
                if !record.members.is_empty() {
                    session.members = record.members.into_iter().map(|m| (m.agent_id, m.role)).collect();
                }
                if !record.protocol.is_empty() {
                    session.protocol = record.protocol;
                }
                if let Some(limits) = record.limits {
                    session.limits = limits;
                }
                session.failed.extend(record.failed);
            }
            Some(MESSAGE_PAYLOAD) => {
                let Some(session) = self.by_id.get_mut(&message.run_id) else { return };
                let Ok(said) = read::<Said>(message) else { return };
                session.messages += 1;
                // The runner's copies are history: they neither use a member's rate nor start a loop.
                if message.meta.contains_key(SESSION_KEY) {
                    return;
                }
                session.count(&message.from.agent_id, at_ms);
                let this = session.as_recent(&message.from.agent_id, &said);
                session.recent.push_back(this);
                if session.recent.len() > LOOP_WINDOW {
                    session.recent.pop_front();
                }
            }
            Some(WARNING_PAYLOAD) => {
                // A warning uses its member's rate: a member repeating itself cannot flood the log.
                if let (Some(session), Ok(w)) = (self.by_id.get_mut(&message.run_id), read::<Warning>(message)) {
                    session.count(&w.agent_id, at_ms);
                }
            }
            _ => {}
        }
    }

    /// Closes the session task `task_id` (of run `run_id`) roots, now that the task has ended.
    pub fn task_ended(&mut self, run_id: &str, task_id: &str) {
        if let Some(session) = self.by_id.get_mut(run_id)
            && session.root_task_id == task_id
        {
            session.closed = true;
        }
    }
}

impl Session {
    /// How many messages (and loop warnings) `from` has in its last minute.
    pub fn recent_count(&self, from: &str, now_ms: i64) -> usize {
        self.recent_by.get(from).map_or(0, |times| times.iter().filter(|t| **t > now_ms - 60_000).count())
    }

    /// Whether `from` is at its rate (`per_agent_per_minute`): its next message is refused.
    pub fn at_rate(&self, from: &str, now_ms: i64) -> bool {
        self.recent_count(from, now_ms) >= self.limits.per_agent_per_minute as usize
    }

    fn count(&mut self, from: &str, at_ms: i64) {
        let times = self.recent_by.entry(from.to_owned()).or_default();
        times.push_back(at_ms);
        while times.front().is_some_and(|t| *t <= at_ms - 60_000) {
            times.pop_front();
        }
    }

    /// `said` from `from`, as loop detection remembers it: in the session's current step and round.
    fn as_recent(&self, from: &str, said: &Said) -> Recent {
        Recent {
            from: from.to_owned(),
            kind: said.kind.clone(),
            content: content_hash(said),
            step: self.step.clone(),
            round: self.round,
        }
    }
}

fn read<T: serde::de::DeserializeOwned>(message: &Message) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(Value::Object(message.payload.clone())).map_err(|e| {
        let path = e.path().to_string();
        Refusal::new(ErrorCode::ValidationFailed, format!("payload.{path}: {}", e.inner()))
            .field(format!("payload.{path}"))
    })
}

/// The first 8 bytes of the SHA-256 of the content: stable across builds (snapshots keep it).
fn content_hash(said: &Said) -> u64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(said.content.to_string().as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}
