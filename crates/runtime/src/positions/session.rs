//! One session as its driver sees it, over its world: what it has read of its run (the runner's
//! keys, the turns given, their outcomes), and the writes every pattern is made of (records, turns,
//! session messages), each under a key derived from where it is in the pattern, so that after a
//! restart the driver reads its run back and writes nothing twice.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use clutch_core::session::{self, Limits, Member, Phase, RECORD_PAYLOAD, RUNNER, SESSION_KEY};
use clutch_proto::id::{self, Kind};
use clutch_proto::message::Recipient;
use clutch_proto::{ErrorCode, Message, MessageType};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::error::{Error, Halt};
use super::invoke::{Invoke, TURN_PAYLOAD};
use super::outcome::Outcome;
use super::world::{Seen, World, Written};
use crate::skill::Skill;

/// What the runner's options say about every session (its catalog aside).
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// The provider (and model) of the LLM agents spawned for roles nobody was named for.
    pub provider: Option<String>,
    pub model: Option<String>,
    pub limits: Limits,
    /// How long comparisons and votes are waited for before synthesis is forced.
    pub consensus_timeout: Duration,
    /// How long the whole session may take.
    pub session_timeout: Duration,
}

/// One session: its world, its position and invocation, and what it has read and written.
pub(super) struct Session<W> {
    pub world: W,
    pub settings: Settings,
    pub skill: Skill,
    pub invoke: Invoke,
    /// The session's id: its run's.
    pub session: String,
    thread: String,
    /// The invocation's task.
    pub root: String,
    pub requester: String,
    /// Members in role order: (agent id, role).
    pub members: Vec<Member>,
    /// Agents it spawned (removed at the end).
    pub spawned: Vec<String>,
    seen: Seen,
    /// The member each turn's task was given to.
    turn_agents: HashMap<String, String>,
    pub outcomes: HashMap<String, Outcome>,
    /// Records written by this run of the driver: the `n`th is keyed `record:n`.
    records: u32,
    /// The session's task was cancelled or timed out (seen in its run).
    root_ended: bool,
    pub cancelled: watch::Receiver<bool>,
    pub deadline: Instant,
    step: Option<String>,
    /// The round under way (a circle's).
    pub round: Option<u32>,
    pub failed: Vec<String>,
    /// What each role produced, for partial results.
    pub produced: BTreeMap<String, Value>,
}

impl<W: World> Session<W> {
    /// The session `request` (an invocation of `skill`) opens.
    pub fn new(
        world: W,
        settings: Settings,
        skill: Skill,
        invoke: Invoke,
        request: &Message,
        cancelled: watch::Receiver<bool>,
    ) -> Session<W> {
        Session {
            world,
            deadline: Instant::now() + settings.session_timeout,
            settings,
            skill,
            invoke,
            session: request.run_id.clone(),
            thread: request.thread_id.clone(),
            root: request.task_id.clone(),
            requester: request.from.agent_id.clone(),
            members: Vec::new(),
            spawned: Vec::new(),
            seen: Seen::default(),
            turn_agents: HashMap::new(),
            outcomes: HashMap::new(),
            records: 0,
            root_ended: false,
            cancelled,
            step: None,
            round: None,
            failed: Vec::new(),
            produced: BTreeMap::new(),
        }
    }

    /// The next event of the session's run, absorbed; `false` when `until` came first (see
    /// [`World::next`]).
    pub async fn next_event(&mut self, until: Option<Instant>) -> Result<bool, Error> {
        let Some(m) = self.world.next(until).await? else { return Ok(false) };
        self.absorb(&m);
        Ok(true)
    }

    /// Takes in an event of the session's run: a key the runner wrote, a turn's outcome, the end of
    /// the session's own task.
    pub fn absorb(&mut self, m: &Message) {
        if let Some(key) = m.meta.get(SESSION_KEY).and_then(Value::as_str)
            && m.from.agent_id == RUNNER
        {
            self.seen.keys.insert(key.to_owned());
            if m.kind == MessageType::TaskRequest {
                self.seen.turns.insert(key.to_owned(), m.task_id.clone());
                if let Some(to) = m.to.first() {
                    self.turn_agents.insert(m.task_id.clone(), to.agent_id.clone());
                }
            }
        }
        if m.task_id != self.root
            && let Some(outcome) = Outcome::of(m)
        {
            self.outcomes.entry(m.task_id.clone()).or_insert(outcome);
        }
        if m.task_id == self.root && matches!(m.kind, MessageType::TaskCancel | MessageType::TaskTimeout) {
            self.root_ended = true;
        }
    }

    /// Writes `m` under `key` unless it was written before (a restart). Answers its task id. In a
    /// replay, the world compares it with what the runner wrote then under `key` instead.
    pub async fn write(&mut self, key: String, m: Message) -> Result<String, Halt> {
        let kind = m.kind;
        let to = m.to.first().map(|r| r.agent_id.clone());
        match self.world.write(&key, m, &self.seen).await {
            Ok(Written::Before(task)) => Ok(task),
            Ok(Written::Now(task)) => {
                self.seen.keys.insert(key.clone());
                if kind == MessageType::TaskRequest {
                    if let Some(to) = to {
                        self.turn_agents.insert(task.clone(), to);
                    }
                    self.seen.turns.insert(key, task.clone());
                }
                Ok(task)
            }
            Err(Error::Write(e)) if e.code() == ErrorCode::InvalidTransition && self.is_cancelled() => {
                Err(Halt::Cancelled(self.requester.clone()))
            }
            Err(_) if self.closing() => Err(Halt::Shutdown),
            Err(e) => Err(Halt::Failed(ErrorCode::SessionWriteFailed, e.to_string())),
        }
    }

    /// The daemon has begun stopping (its streams end, its log soon refuses appends).
    pub fn closing(&self) -> bool {
        self.world.closing()
    }

    pub fn is_cancelled(&self) -> bool {
        self.root_ended || *self.cancelled.borrow()
    }

    /// The turns given so far: their task ids.
    pub fn turns(&self) -> Vec<String> {
        self.seen.turns.values().cloned().collect()
    }

    pub fn message(
        &self,
        kind: MessageType,
        from: &str,
        task: &str,
        to: Vec<String>,
        payload: Map<String, Value>,
    ) -> Message {
        let mut m = Message::new(kind, from, (&self.session, &self.thread, task), payload);
        m.to = to.into_iter().map(|agent_id| Recipient { agent_id }).collect();
        m
    }

    /// A message from the runner on the session's own task, to its requester.
    pub fn to_requester(&self, kind: MessageType, payload: Map<String, Value>) -> Message {
        self.message(kind, RUNNER, &self.root, vec![self.requester.clone()], payload)
    }

    /// Records the session's phase (and step).
    pub async fn record(&mut self, phase: Phase, note: Option<String>, detail: Option<Value>) -> Result<(), Halt> {
        let n = self.records;
        self.records += 1;
        let record = session::Record {
            session_id: self.session.clone(),
            position: self.skill.name.clone(),
            pattern: self.skill.pattern.as_str().to_owned(),
            phase,
            step: self.step.clone(),
            round: self.round,
            members: self.members.clone(),
            protocol: if self.members.is_empty() {
                Vec::new()
            } else {
                self.skill.protocol.iter().map(|k| k.name.clone()).collect()
            },
            limits: (!self.members.is_empty()).then_some(self.settings.limits),
            failed: self.failed.clone(),
            note,
            detail,
        };
        let kind =
            if phase.is_final() && self.is_cancelled() { MessageType::ChatSystem } else { MessageType::TaskProgress };
        let mut m = self.to_requester(kind, clutch_core::payload::object(&record));
        m.payload_type = Some(RECORD_PAYLOAD.into());
        self.write(format!("record:{n}"), m).await.map(|_| ())
    }

    /// Moves to the workflow's phase `step`, recorded.
    pub async fn step(&mut self, step: &str) -> Result<(), Halt> {
        self.step = Some(step.to_owned());
        self.record(Phase::Running, None, None).await
    }

    /// A session message from member `from` (the runner writes what a turn produced on its behalf).
    pub async fn say(
        &mut self,
        key: &str,
        from: &str,
        to: Vec<String>,
        kind: &str,
        content: Value,
    ) -> Result<(), Halt> {
        if to.is_empty() || !self.skill.protocol.iter().any(|k| k.name == kind) {
            return Ok(());
        }
        let said = session::Said { kind: kind.to_owned(), content };
        let mut m =
            self.message(MessageType::ChatMessage, from, &self.root.clone(), to, clutch_core::payload::object(&said));
        m.payload_type = Some(session::MESSAGE_PAYLOAD.into());
        match self.write(format!("say:{key}"), m).await {
            // A bus rule (a cap, a rate) refusing the runner's copy does not stop the session.
            Err(Halt::Failed(..)) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Gives member `agent` (playing `role`) a turn: a task, child of the session's.
    pub async fn turn(
        &mut self,
        key: &str,
        agent: &str,
        role: &str,
        goal: String,
        extra: Value,
    ) -> Result<String, Halt> {
        let mut payload = json!({
            "goal": goal, "session_id": self.session, "position": self.skill.name, "role": role,
            "step": self.step, "input": self.invoke.invocation.input,
        });
        if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let task = id::generate(Kind::Task);
        let mut m = self.message(
            MessageType::TaskRequest,
            RUNNER,
            &task,
            vec![agent.to_owned()],
            payload.as_object().cloned().unwrap_or_default(),
        );
        m.parent_task_id = Some(self.root.clone());
        m.payload_type = Some(TURN_PAYLOAD.into());
        self.write(format!("turn:{key}"), m).await
    }

    /// The member turn `task` was given to.
    pub fn member_of_turn(&self, task: &str) -> Option<String> {
        self.turn_agents.get(task).cloned()
    }

    /// The members playing the position's role number `index`.
    pub fn role_members(&self, index: usize) -> Vec<Member> {
        let Some(role) = self.skill.agents.get(index) else { return Vec::new() };
        self.members.iter().filter(|m| m.role == role.name).cloned().collect()
    }

    /// The invocation's input as text (JSON pretty-printed).
    pub fn input_text(&self) -> String {
        match &self.invoke.invocation.input {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        }
    }

    /// The requester, when it is a member too.
    pub fn requester_if_member(&self) -> Option<String> {
        self.members.iter().find(|m| m.agent_id == self.requester).map(|m| m.agent_id.clone())
    }

    pub fn first_phase(&self) -> String {
        self.skill.workflow.first().map(|p| p.name.clone()).unwrap_or_else(|| "WORK".into())
    }

    /// The position's workflow phase named `name`, or its `i`th, or `name` itself.
    pub fn phase_named(&self, name: &str, i: usize) -> String {
        self.skill
            .workflow
            .iter()
            .find(|p| p.name == name)
            .or_else(|| self.skill.workflow.get(i))
            .map(|p| p.name.clone())
            .unwrap_or_else(|| name.to_owned())
    }
}
