//! Recorded sessions re-executed offline (`clutch runs replay RUN --reexecute`): each session's
//! driver runs again on its recording, reading the recorded events in their order, and every
//! message it would write is compared with the one the runner wrote then under the same key.
//!
//! When the next recorded event is a runner write the driver has not made yet, the runner had stopped
//! waiting there. Spawning and removing agents happen only live.

use std::collections::{HashMap, VecDeque};

use clutch_core::session::{Limits, MESSAGE_PAYLOAD, RECORD_PAYLOAD, RUNNER, SESSION_KEY};
use clutch_proto::{AgentCard, Message, MessageType};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::course;
use super::error::Error;
use super::invoke::Invoke;
use super::options::Options;
use super::session::{Session, Settings};
use super::world::{Seen, World, Written};

/// What re-executing one recorded session showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub session_id: String,
    pub task_id: String,
    pub position: String,
    /// The runner's messages compared.
    pub compared: usize,
    /// Each difference between what the driver writes now and what the runner wrote then.
    pub differences: Vec<String>,
}

/// Re-executes the driver of every session in `events` (one run's, in order) offline: it reads the
/// recorded events in their order, and each message it would write is compared with the one the
/// runner wrote then under the same key (ids aside). Where the recording shows the runner moving on
/// before an answer came (a consensus timeout, a cancel), the driver does too. The bus limits are
/// read from the recorded records; positions come from `options.catalog`.
pub async fn reexecute(options: &Options, events: &[Message]) -> Vec<Replayed> {
    let roots = events.iter().filter(|m| {
        m.kind == MessageType::TaskRequest && m.to.iter().any(|r| r.agent_id == RUNNER) && m.from.agent_id != RUNNER
    });
    let mut out = Vec::new();
    for request in roots {
        out.push(session(options, events, request).await);
    }
    out
}

/// Re-executes the session `request` opened.
async fn session(options: &Options, events: &[Message], request: &Message) -> Replayed {
    let mut replayed = Replayed {
        session_id: request.run_id.clone(),
        task_id: request.task_id.clone(),
        position: request.payload.get("position").and_then(Value::as_str).unwrap_or_default().to_owned(),
        compared: 0,
        differences: Vec::new(),
    };
    let invoke: Option<Invoke> = serde_json::from_value(Value::Object(request.payload.clone())).ok();
    let Some((invoke, skill)) = invoke.and_then(|i| options.catalog.get(&i.position).cloned().map(|s| (i, s))) else {
        replayed.differences.push(format!("position `{}` is not in the catalog", replayed.position));
        return replayed;
    };
    let ours: Vec<Message> = events.iter().filter(|m| m.run_id == request.run_id).cloned().collect();
    let settings = settings(options, &ours);
    let recording = Recording::of(ours, request);
    // Never cancelled from outside: a cancel comes as the recorded event it was.
    let (_keep, cancelled) = watch::channel(false);
    let mut s = Session::new(recording, settings, skill, invoke, request, cancelled);
    course::run(&mut s).await;
    let r = s.world;
    replayed.compared = r.written.len();
    replayed.differences = r.differences;
    let mut unwritten: Vec<&String> =
        r.recorded.keys().filter(|k| !r.written.contains(k) && k.as_str() != "accept").collect();
    unwritten.sort();
    for key in unwritten {
        replayed.differences.push(format!("the runner wrote `{key}` then; re-executed, it does not"));
    }
    replayed
}

/// The settings the daemon ran the session with, as its records say: spawned agents are not
/// spawned again (their turns' outcomes are recorded), so any provider name does.
fn settings(options: &Options, ours: &[Message]) -> Settings {
    let mut settings = Settings::from(options);
    settings.provider.get_or_insert_with(|| "recorded".to_owned());
    if let Some(limits) = ours
        .iter()
        .filter(|m| m.payload_type.as_deref() == Some(RECORD_PAYLOAD))
        .find_map(|m| m.payload.get("limits").and_then(|l| serde_json::from_value::<Limits>(l.clone()).ok()))
    {
        settings.limits = limits;
    }
    settings
}

/// A recorded session as its re-executed driver sees it: the run's events still to read, in order,
/// and what the driver writes compared with what the runner wrote then.
struct Recording {
    /// The run's events not read yet.
    queue: VecDeque<Message>,
    /// What the runner wrote then, by key.
    recorded: HashMap<String, Message>,
    /// Keys the driver has written now, in order.
    written: Vec<String>,
    differences: Vec<String>,
}

impl Recording {
    /// The recording of the session `request` opened, from `ours` (its run's events, in order).
    fn of(ours: Vec<Message>, request: &Message) -> Recording {
        let mut recorded = HashMap::new();
        for m in ours.iter().filter(|m| m.from.agent_id == RUNNER || m.payload_type.as_deref() == Some(MESSAGE_PAYLOAD))
        {
            if let Some(key) = m.meta.get(SESSION_KEY).and_then(Value::as_str) {
                recorded.entry(key.to_owned()).or_insert_with(|| m.clone());
            }
        }
        // The events from the invocation on; the driver writes what follows it.
        let start = ours.iter().position(|m| m.task_id == request.task_id && m.kind == MessageType::TaskRequest);
        let queue = ours.into_iter().skip(start.map_or(0, |i| i + 1)).collect();
        Recording { queue, recorded, written: Vec::new(), differences: Vec::new() }
    }

    /// Compares `m`, written now under `key`, with what the runner wrote then (ids and times
    /// aside); answers the task id the recording gave it. A session message or a cancel the
    /// recording lacks may have been refused then (a bus limit, a turn already over): not counted.
    fn compare(&mut self, key: &str, m: &Message) -> String {
        let Some(then) = self.recorded.get(key) else {
            if !(key.starts_with("say:") || key.starts_with("cancel:")) {
                self.differences
                    .push(format!("writes `{key}` ({}), which the runner did not write then", m.kind.as_str()));
            }
            return m.task_id.clone();
        };
        let shape = |m: &Message| {
            let to: Vec<&str> = m.to.iter().map(|r| r.agent_id.as_str()).collect();
            (m.kind, m.from.agent_id.clone(), to.join(","), m.payload_type.clone(), Value::Object(m.payload.clone()))
        };
        let (now, was) = (shape(m), shape(then));
        if now != was {
            let part = if now.0 != was.0 {
                format!("type {} then, {} now", was.0.as_str(), now.0.as_str())
            } else if now.1 != was.1 || now.2 != was.2 {
                format!("{} → {} then, {} → {} now", was.1, was.2, now.1, now.2)
            } else {
                format!("payload {} then, {} now", was.4, now.4)
            };
            self.differences.push(format!("`{key}` differs: {part}"));
        }
        then.task_id.clone()
    }
}

impl World for Recording {
    /// The recording's next event, unless it is one the runner wrote that the driver has not
    /// written yet (then the runner had stopped waiting), or the recording is over.
    async fn next(&mut self, _until: Option<Instant>) -> Result<Option<Message>, Error> {
        let moved_on = self.queue.front().is_none_or(|m| {
            m.from.agent_id == RUNNER
                && m.meta.get(SESSION_KEY).and_then(Value::as_str).is_some_and(|k| !self.written.iter().any(|w| w == k))
        });
        if moved_on {
            return Ok(None);
        }
        Ok(self.queue.pop_front())
    }

    async fn write(&mut self, key: &str, m: Message, _seen: &Seen) -> Result<Written, Error> {
        let task = self.compare(key, &m);
        self.written.push(key.to_owned());
        Ok(Written::Now(task))
    }

    fn closing(&self) -> bool {
        false
    }

    /// The agent the recording's records say the router picked.
    fn pick(&self, role: &str, capability: &str, taken: &[String]) -> Result<(String, Value), Error> {
        self.recorded
            .values()
            .filter(|m| m.payload_type.as_deref() == Some(RECORD_PAYLOAD))
            .filter_map(|m| m.payload.get("detail").and_then(|d| d.get("cast")).and_then(Value::as_array))
            .flatten()
            .find(|c| {
                c["role"] == role
                    && c["requires"] == capability
                    && c["agent"].as_str().is_some_and(|a| !taken.iter().any(|t| t == a))
            })
            .map(|c| (c["agent"].as_str().unwrap_or_default().to_owned(), c.clone()))
            .ok_or_else(|| Error::NotCast(capability.to_owned()))
    }

    /// Spawned agents are not spawned again: their turns' outcomes are recorded.
    async fn spawn(&self, _card: &AgentCard) -> Result<(), Error> {
        Ok(())
    }

    async fn remove(&self, _agent_id: &str) {}
}
