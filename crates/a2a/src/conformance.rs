//! The conformance agent (`Options::conformance`, off by default): `agent:a2a-conformance`, a Clutch
//! agent that works the tasks given to it as the official A2A TCK (a2aproject/a2a-tck) expects of a
//! system under test, so the kit can be run against the real daemon (`scripts/test-a2a-tck`). The
//! kit says what it wants in the prefix of each message's `messageId` (its `scenarios/*.feature`:
//! `tck-complete-task`, `tck-input-required`, `tck-artifact-file`, `tck-stream-001`...); the agent
//! acts through the engine's own operations, as any agent working its inbox does: it accepts, tells
//! its progress or asks for input (`task.progress`, with `input_required`), and ends with a
//! `task.result` (its A2A artifacts, or a message, in the result's `a2a`) or a `task.error`. The
//! client's answers to its questions reach it as `chat.message`s in the task, read the same way.
//! It works every task it is given, whatever it asks: for a hub kept for the kit only.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use clutch_core::inbox::{Reply, Status};
use clutch_core::supervise::{self, Exit, Restart};
use clutch_core::view::TaskState;
use clutch_core::{Engine, Handle};
use clutch_proto::message::Recipient;
use clutch_proto::validate::Problems;
use clutch_proto::{Message as Envelope, MessageType};
use clutch_store::Filter;
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

/// The agent.
pub const AGENT: &str = "agent:a2a-conformance";
/// Its one capability (the hub card's one skill while it is the only agent).
pub const SKILL: &str = "skill:a2a-conformance";

/// How long a long-running task (`test-resubscribe-message-id`) works: twice the kits' default
/// streaming timeout (2 s), as both kits ask of a system under test.
const LONG_RUNNING: Duration = Duration::from_secs(4);
/// How long an ordinary 0.3 task works before it completes (the kit's reference agent takes 1.2 s):
/// a send that does not block, or a stream, sees it working, and the 0.3 kit reads and cancels such
/// tasks meanwhile.
const WORKING_0_3: Duration = Duration::from_secs(1);
/// The pause after telling a step of a streamed scenario (working, then the artifact, then done), so
/// that each is an event of its own for the client's stream.
const STEP: Duration = Duration::from_millis(100);
/// How many task ids it remembers having started (then it forgets them all).
const STARTED_MAX: usize = 10_000;

/// Runs the agent until `stop` resolves: registers it, works the tasks it holds from before a
/// restart that it had not taken up yet, then follows its inbox; started again after a failure
/// (core's supervisor: 0.2 s doubling to 10 s).
pub async fn run(log: Handle, engine: Engine, stop: impl Future<Output = ()>) {
    tracing::warn!(agent_id = AGENT, "the A2A conformance agent is on: it answers every task given to it, for the TCK");
    let agent = &Agent { log, engine, turns: Arc::default() };
    // Its inbox ending because the daemon is stopping is no failure: nothing to restart.
    let attempt = move || async move { Exit::after(Err(agent.serve().await), agent.log.is_closing()) };
    supervise::run(AGENT, Restart::default(), stop, attempt).await;
}

/// Why the agent stopped, or a turn of a task ended early.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("its card is invalid: {0}")]
    Card(Problems),
    #[error("cannot register: {0}")]
    Register(clutch_core::Error),
    #[error("cannot read its inbox: {0}")]
    Inbox(clutch_core::Error),
    #[error("its inbox ended: {0:?}")]
    InboxEnded(clutch_core::End),
    #[error("no task {0}")]
    NoTask(String),
    /// The engine refused what it said of a task.
    #[error("{0}")]
    Refused(clutch_core::Error),
    #[error("{0}")]
    Encode(serde_json::Error),
    #[error("{0}")]
    Invalid(Problems),
    #[error("the progress went unanswered")]
    Unanswered,
}

/// What the agent does with a message: maybe work a while (accepted, telling each step), then end
/// the turn.
#[derive(Debug, Clone, PartialEq)]
struct Script {
    /// Accept first and pause, so that a stream tells "working" on its own.
    works: bool,
    /// How long it then works.
    wait: Duration,
    end: End,
}

#[derive(Debug, Clone, PartialEq)]
enum End {
    /// Completed, with this text (the task's one artifact).
    Text(String),
    /// Completed, with these A2A artifacts (1.0 shape).
    Artifacts(Value),
    /// Answered with this message instead of a task.
    Message(&'static str),
    /// Asks the client for more (input required); the task waits.
    Ask,
    /// Failed, saying why.
    Fail(&'static str),
}

/// The kits' scenarios, by `messageId` prefix (the first that matches: longer ones first); a message
/// of neither kit's scenarios completes, at once in 1.0 and after a while in 0.3 (`version`).
fn script(message_id: &str, version: &str) -> Script {
    let file = json!([{"artifactId": "file", "name": "output.txt", "parts": [{"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"}]}]);
    let text = |t: &str| End::Text(t.to_owned());
    let (works, wait, end) = match message_id {
        m if m.starts_with("tck-stream-artifact-chunked") => (
            true,
            Duration::ZERO,
            End::Artifacts(json!([{"artifactId": "chunked", "parts": [{"text": "chunk-1 "}, {"text": "chunk-2"}]}])),
        ),
        m if m.starts_with("tck-stream-artifact-file") => (true, Duration::ZERO, End::Artifacts(file)),
        m if m.starts_with("tck-stream-artifact-text") => (true, Duration::ZERO, text("Streamed text content")),
        m if m.starts_with("tck-stream-ordering-001") => (true, Duration::ZERO, text("Ordered output")),
        m if m.starts_with("tck-stream-001") => (true, Duration::ZERO, text("Stream hello from TCK")),
        m if m.starts_with("tck-stream-002") => (false, Duration::ZERO, text("Stream completed")),
        m if m.starts_with("tck-stream-003") => (true, Duration::ZERO, text("Stream task lifecycle")),
        m if m.starts_with("test-resubscribe-message-id") => (true, LONG_RUNNING, text("Done after a while")),
        m if m.starts_with("tck-artifact-file-url") => (
            false,
            Duration::ZERO,
            End::Artifacts(
                json!([{"artifactId": "file-url", "name": "output.txt", "parts": [{"url": "https://example.com/output.txt", "mediaType": "text/plain", "filename": "output.txt"}]}]),
            ),
        ),
        m if m.starts_with("tck-artifact-file") => (false, Duration::ZERO, End::Artifacts(file)),
        m if m.starts_with("tck-artifact-text") => (false, Duration::ZERO, text("Generated text content")),
        m if m.starts_with("tck-artifact-data") => (
            false,
            Duration::ZERO,
            End::Artifacts(json!([{"artifactId": "data", "parts": [{"data": {"key": "value", "count": 42}}]}])),
        ),
        m if m.starts_with("tck-message-response") => (false, Duration::ZERO, End::Message("Direct message response")),
        m if m.starts_with("tck-input-required") => (false, Duration::ZERO, End::Ask),
        m if m.starts_with("tck-reject-task") => (false, Duration::ZERO, End::Fail("rejected")),
        m if m.starts_with("tck-complete-task") => (false, Duration::ZERO, text("Hello from TCK")),
        m if version == "0.3" => (true, WORKING_0_3, End::Text(format!("Done: {m}"))),
        m => (false, Duration::ZERO, End::Text(format!("Unhandled messageId prefix: {m}"))),
    };
    Script { works, wait, end }
}

/// The `messageId` of the A2A message a request or a client's answer carries (the hub keeps it in
/// the payload's `a2a.message`); a message that came otherwise is known by its own id.
fn message_id(m: &Envelope) -> String {
    let a2a = m.payload.get("a2a").and_then(|a| a.get("message")).and_then(|m| m.get("messageId"));
    a2a.and_then(Value::as_str).unwrap_or(&m.id).to_owned()
}

/// The version of A2A a request came in, as the hub noted it (its payload's `a2a.version`): 1.0
/// unless it says 0.3.
fn version(noted: Option<&Value>) -> &'static str {
    if noted.and_then(Value::as_str) == Some("0.3") { "0.3" } else { "1.0" }
}

#[derive(Clone)]
struct Agent {
    log: Handle,
    engine: Engine,
    turns: Arc<Mutex<Turns>>,
}

/// Each task's latest turn: a turn ends the task only while no later one has begun (a client may
/// say more while the agent works).
#[derive(Default)]
struct Turns {
    /// The number of the next turn, of any task.
    next: u64,
    latest: HashMap<String, u64>,
}

impl Agent {
    /// Registers, takes up the tasks routed to it and not taken up yet, then works what its inbox
    /// brings until it fails; the reason.
    async fn serve(&self) -> Error {
        let card = json!({
            "v": clutch_proto::VERSION, "agent_id": AGENT, "display": {"name": "A2A conformance agent"},
            "capabilities": [{"id": SKILL, "version": "1.0.0", "tags": ["a2a-tck"]}],
        });
        let card = match clutch_proto::validate::agent_card(&card) {
            Ok(c) => c,
            Err(p) => return Error::Card(p),
        };
        let registered = match self.engine.register(&card).await {
            Ok(r) => r,
            Err(e) => return Error::Register(e),
        };
        let filter = Filter { to: Some(AGENT.to_owned()), ..Filter::default() };
        let mut inbox = match self.log.subscribe(filter, Some(registered.seq)).await {
            Ok(s) => s,
            Err(e) => return Error::Inbox(e),
        };
        tracing::info!(agent_id = AGENT, seq = registered.seq, "the conformance agent is registered");
        let mut work = JoinSet::new();
        // The tasks it has started, with the version each came in.
        let mut started: HashMap<String, &'static str> = HashMap::new();
        match self.engine.inbox(AGENT, Duration::ZERO).await {
            Ok(held) => {
                for item in held.tasks.into_iter().filter(|t| t.task.state == TaskState::Routed) {
                    let id = item.request.pointer("/a2a/message/messageId").and_then(Value::as_str);
                    let version = version(item.request.pointer("/a2a/version"));
                    started.insert(item.task.task_id.clone(), version);
                    self.start(&mut work, item.task.task_id, script(id.unwrap_or_default(), version));
                }
            }
            Err(e) => return Error::Inbox(e),
        }
        let mut beat = tokio::time::interval(self.engine.options().heartbeat_interval.max(Duration::from_secs(1)));
        loop {
            tokio::select! {
                next = inbox.next() => {
                    let event = match next {
                        Ok(e) => e,
                        Err(e) => return Error::InboxEnded(e),
                    };
                    let Ok(m) = event.message() else { continue };
                    match m.kind {
                        // A task routed to it, once (a delivery may be repeated).
                        MessageType::TaskRequest => {
                            if started.len() >= STARTED_MAX {
                                started.clear();
                            }
                            if !started.contains_key(&m.task_id) {
                                let version = version(m.payload.get("a2a").and_then(|a| a.get("version")));
                                started.insert(m.task_id.clone(), version);
                                self.start(&mut work, m.task_id.clone(), script(&message_id(&m), version));
                            }
                        }
                        // The client's answer to its question, or more to go on, in the task.
                        MessageType::ChatMessage if m.payload.contains_key("a2a") => {
                            let version = started.get(&m.task_id).copied().unwrap_or("1.0");
                            self.start(&mut work, m.task_id.clone(), script(&message_id(&m), version));
                        }
                        _ => {}
                    }
                }
                _ = beat.tick() => {
                    if let Err(e) = self.engine.heartbeat(AGENT).await {
                        tracing::warn!(agent_id = AGENT, error = %e, "heartbeat refused");
                    }
                }
                Some(done) = work.join_next(), if !work.is_empty() => {
                    if let Err(e) = done && !e.is_cancelled() {
                        tracing::error!(agent_id = AGENT, error = %e, "a conformance task failed");
                    }
                }
            }
        }
    }

    fn start(&self, work: &mut JoinSet<()>, task: String, script: Script) {
        let worker = self.clone();
        let turn = {
            let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
            turns.next += 1;
            let turn = turns.next;
            turns.latest.insert(task.clone(), turn);
            turn
        };
        work.spawn(async move {
            if let Err(e) = worker.work(&task, turn, script).await {
                // A task cancelled meanwhile refuses what comes after: nothing to do.
                tracing::debug!(agent_id = AGENT, task_id = %task, error = %e, "a conformance task's turn ended early");
            }
        });
    }

    /// Turn `turn` of `task`: what `script` says, unless a later turn has begun by its end.
    async fn work(&self, task: &str, turn: u64, script: Script) -> Result<(), Error> {
        if script.works && self.engine.task(task).is_some_and(|t| t.state == TaskState::Routed) {
            self.reply(task, Status::Accepted, None, None).await?;
            tokio::time::sleep(STEP).await;
        }
        tokio::time::sleep(script.wait).await;
        {
            let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
            if turns.latest.get(task) != Some(&turn) {
                return Ok(());
            }
            turns.latest.remove(task);
        }
        match script.end {
            End::Text(text) => self.reply(task, Status::Completed, Some(text), None).await,
            End::Artifacts(artifacts) => {
                let result = json!({"a2a": {"artifacts": artifacts}});
                self.reply(task, Status::Completed, Some("artifacts".into()), result.as_object().cloned()).await
            }
            End::Message(text) => {
                let message = json!({"messageId": clutch_proto::id::generate(clutch_proto::id::Kind::Message), "role": "ROLE_AGENT", "parts": [{"text": text}]});
                let result = json!({"a2a": {"message": message}});
                self.reply(task, Status::Completed, Some(text.into()), result.as_object().cloned()).await
            }
            End::Ask => {
                if self.engine.task(task).is_some_and(|t| t.state == TaskState::Routed) {
                    self.reply(task, Status::Accepted, None, None).await?;
                }
                let prompt = "The TCK asks for input: send a message naming this task.";
                let payload = json!({"message": prompt, "input_required": {"prompt": prompt}});
                self.progress(task, payload.as_object().cloned().unwrap_or_default()).await
            }
            End::Fail(why) => {
                let reply = Reply { error: Some(why.into()), ..reply(Status::Failed, None, None) };
                self.engine.task_reply(AGENT, task, reply).await.map(drop).map_err(Error::Refused)
            }
        }
    }

    async fn reply(
        &self,
        task: &str,
        status: Status,
        text: Option<String>,
        result: Option<Map<String, Value>>,
    ) -> Result<(), Error> {
        self.engine.task_reply(AGENT, task, reply(status, text, result)).await.map(drop).map_err(Error::Refused)
    }

    /// A `task.progress` of `task` to whoever asked for it.
    async fn progress(&self, task: &str, payload: Map<String, Value>) -> Result<(), Error> {
        let view = self.engine.task(task).ok_or_else(|| Error::NoTask(task.to_owned()))?;
        let mut m = Envelope::new(MessageType::TaskProgress, AGENT, (&view.run_id, &view.thread_id, task), payload);
        m.parent_task_id = view.parent_task_id.clone();
        m.to = view.requester.iter().map(|r| Recipient { agent_id: r.clone() }).collect();
        let raw = serde_json::to_value(&m).map_err(Error::Encode)?;
        let m = clutch_proto::validate::message(&raw, &clutch_proto::validate::Defaults { now: SystemTime::now() })
            .map_err(Error::Invalid)?;
        match self.engine.submit(vec![m]).await.map_err(Error::Refused)?.pop() {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(Error::Refused(e)),
            None => Err(Error::Unanswered),
        }
    }
}

fn reply(status: Status, text: Option<String>, result: Option<Map<String, Value>>) -> Reply {
    Reply { status, text, result, error: None, retryable: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kits_prefixes_pick_their_scenarios_longest_first() {
        let end = |id: &str| script(&format!("{id}-0a1b"), "1.0").end;
        assert_eq!(end("tck-complete-task"), End::Text("Hello from TCK".into()));
        assert_eq!(end("tck-input-required"), End::Ask);
        assert_eq!(end("tck-reject-task"), End::Fail("rejected"));
        assert_eq!(end("tck-message-response"), End::Message("Direct message response"));
        let first_part = |id: &str| match end(id) {
            End::Artifacts(a) => a[0]["parts"][0].clone(),
            other => panic!("{id}: {other:?}"),
        };
        assert_eq!(first_part("tck-artifact-file-url")["url"], "https://example.com/output.txt");
        assert_eq!(first_part("tck-artifact-file")["filename"], "output.txt");
        assert_eq!(first_part("tck-stream-artifact-file")["mediaType"], "text/plain");
        assert_eq!(first_part("tck-artifact-data")["data"], json!({"key": "value", "count": 42}));
        assert!(script("tck-stream-001-x", "1.0").works && !script("tck-stream-002-x", "1.0").works);
        assert_eq!(script("test-resubscribe-message-id-1", "0.3").wait, LONG_RUNNING);
        assert_eq!(end("m-1"), End::Text("Unhandled messageId prefix: m-1-0a1b".into()));
        // 0.3's ordinary tasks work a while; its kit has no prefixes but the long-running one.
        assert_eq!((script("m-1", "0.3").works, script("m-1", "0.3").wait), (true, WORKING_0_3));
    }
}
