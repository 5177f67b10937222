//! A scripted world for the patterns' tests: each turn is answered as the script says (or not at
//! all), the answers come back in the order the turns were given, and every write is kept as one
//! line (`turn:analysis:agent:a → agent:a`, `say:results:a agent:a → agent:b: RESULTS`,
//! `record:2 RUNNING COMPARISON`) for a test to compare with what the pattern should write.

use std::collections::{HashMap, VecDeque};

use clutch_core::session::{MESSAGE_PAYLOAD, Member, RECORD_PAYLOAD, RUNNER};
use clutch_proto::{AgentCard, Message, MessageType};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::error::Error;
use super::invoke::Invoke;
use super::session::{Session, Settings};
use super::world::{Seen, World, Written};

/// How a turn is answered.
#[derive(Debug, Clone)]
pub(super) enum Reply {
    /// A `task.result` with this text.
    Text(&'static str),
    /// A `task.result` with this structured answer (an LLM agent's `answer` tool).
    Answer(Value),
    /// A `task.error` with this code.
    Fail(&'static str),
}

/// The world of a test: the script, and what the pattern wrote.
#[derive(Default)]
pub(super) struct Script {
    /// Replies by turn key (`analysis:agent:a`); a turn without one is never answered.
    replies: HashMap<String, Reply>,
    /// Answers not read yet.
    queue: VecDeque<Message>,
    /// Every write, as a line.
    pub writes: Vec<String>,
    turns: usize,
}

impl Script {
    /// Turn `key` (its key without `turn:`) answered with `reply`.
    pub fn reply(mut self, key: &str, reply: Reply) -> Script {
        self.replies.insert(key.to_owned(), reply);
        self
    }

    /// The answer to turn `request`, given task id `task`.
    fn answer(request: &Message, task: &str, reply: &Reply) -> Message {
        let (kind, payload) = match reply {
            Reply::Text(text) => (MessageType::TaskResult, json!({"text": text})),
            Reply::Answer(value) => (MessageType::TaskResult, json!({"text": value.to_string(), "structured": value})),
            Reply::Fail(code) => (MessageType::TaskError, json!({"code": code, "message": "it broke"})),
        };
        let from = request.to.first().map_or("agent:nobody", |r| r.agent_id.as_str());
        let payload = payload.as_object().cloned().unwrap_or_default();
        Message::new(kind, from, (&request.run_id, &request.thread_id, task), payload)
    }
}

impl World for Script {
    async fn next(&mut self, _until: Option<Instant>) -> Result<Option<Message>, Error> {
        // Nothing more will come: whatever the session waits for is over, or it times out.
        Ok(self.queue.pop_front())
    }

    async fn write(&mut self, key: &str, m: Message, _seen: &Seen) -> Result<Written, Error> {
        self.writes.push(line(key, &m));
        if m.kind != MessageType::TaskRequest {
            return Ok(Written::Now(m.task_id));
        }
        self.turns += 1;
        let task = format!("t{}", self.turns);
        if let Some(reply) = key.strip_prefix("turn:").and_then(|k| self.replies.get(k)) {
            self.queue.push_back(Script::answer(&m, &task, reply));
        }
        Ok(Written::Now(task))
    }

    fn closing(&self) -> bool {
        false
    }

    fn pick(&self, _role: &str, capability: &str, _taken: &[String]) -> Result<(String, Value), Error> {
        Err(Error::NotCast(capability.to_owned()))
    }

    async fn spawn(&self, _card: &AgentCard) -> Result<(), Error> {
        Ok(())
    }

    async fn remove(&self, _agent_id: &str) {}
}

/// A write as a line: its key, then who to whom and what, as far as a pattern decides it.
fn line(key: &str, m: &Message) -> String {
    let to: Vec<&str> = m.to.iter().map(|r| r.agent_id.as_str()).collect();
    let to = to.join(",");
    let field = |k: &str| m.payload.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    match m.payload_type.as_deref() {
        Some(RECORD_PAYLOAD) => {
            let mut line = format!("{key} {}", field("phase"));
            if let Some(step) = m.payload.get("step").and_then(Value::as_str) {
                line.push_str(&format!(" {step}"));
            }
            if let Some(round) = m.payload.get("round") {
                line.push_str(&format!(" round {round}"));
            }
            line
        }
        Some(MESSAGE_PAYLOAD) => format!("{key} {} → {to}: {}", m.from.agent_id, field("type")),
        _ => format!("{key} → {to}"),
    }
}

/// A session of the shipped position `position` on `script`, cast already: `members` are (role,
/// agent id) pairs, in role order. The sender keeps it from being cancelled.
pub(super) fn session(
    position: &str,
    members: &[(&str, &str)],
    input: Value,
    script: Script,
) -> (Session<Script>, watch::Sender<bool>) {
    session_with(
        position,
        members,
        Invoke { position: position.to_owned(), goal: None, invocation: invocation(input) },
        script,
    )
}

/// As [`session`], for an invocation of its own.
pub(super) fn session_with(
    position: &str,
    members: &[(&str, &str)],
    invoke: Invoke,
    script: Script,
) -> (Session<Script>, watch::Sender<bool>) {
    let skill = crate::skill::shipped().into_iter().find(|s| s.name == position).expect("a shipped position");
    let settings = Settings {
        provider: None,
        model: None,
        limits: Default::default(),
        consensus_timeout: std::time::Duration::from_secs(300),
        session_timeout: std::time::Duration::from_secs(3600),
    };
    let mut request =
        Message::new(MessageType::TaskRequest, "user:ada", ("run_1", "thr_1", "tsk_root"), Default::default());
    request.to = vec![clutch_proto::message::Recipient { agent_id: RUNNER.into() }];
    let (keep, cancelled) = watch::channel(false);
    let mut session = Session::new(script, settings, skill, invoke, &request, cancelled);
    session.members =
        members.iter().map(|(role, agent)| Member { agent_id: (*agent).into(), role: (*role).into() }).collect();
    (session, keep)
}

/// An invocation of `input`, nobody named.
pub(super) fn invocation(input: Value) -> clutch_core::session::Invocation {
    clutch_core::session::Invocation { input, ..Default::default() }
}
