//! The dispatcher: it hands the `tool.call`s of the log to the adapters that carry them out
//! ([`run`]). It drives the engine, which holds the adapters ([`crate::adapter::Registry`]), so it
//! lives apart from the adapters' own module, above the engine.
//!
//! A call is carried out exactly as the log records it. The `tool.call` is the intent, durable
//! before anything happens; [`run`] stores a `clutch.tool.started.v1` note (durable) just before it
//! makes the call, and the answer (`tool.result` or `tool.error`, to the caller) after. After a
//! crash, a call with a note and no answer may have run: it is answered `TOOL_IN_DOUBT` and never
//! made again, unless its adapter says it is safe to repeat (a read-only or idempotent tool), when
//! it is made once more. A call without a note was never made, and is made. A call safe to repeat
//! needs no note first (a crash makes it again either way): its note goes with its answer, or is
//! stored while it runs when it runs long. Each note and answer carries an idempotency key, so the
//! log holds one of each whatever the retries.
//!
//! It follows the log from its saved position (the first call not yet answered). A call that org.yaml's
//! `approvals` or its tool's annotations (destructive, not read-only) say needs a person waits first: the
//! dispatcher writes `clutch.approval.requested.v1`, the engine keeps the calls waiting
//! (`engine::approvals`: listed by `Engine::approvals`, decided by `Engine::decide_approval`, one
//! decision per call through an idempotency key), and the decision (approved, denied, or expired by the
//! dispatcher) decides whether it is made; waits survive restarts.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clutch_proto::message::{Attachment, AttachmentKind, Recipient};
use clutch_proto::{ErrorCode, Message, MessageType};
use clutch_store::Filter;
use serde_json::Value;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;

use crate::adapter::{Adapter, Answer};
use crate::engine::{APPROVAL_DECIDED_PAYLOAD, APPROVAL_REQUESTED_PAYLOAD, TOOL_STARTED_PAYLOAD};
use crate::payload::Decision;
use crate::tasks::ORCHESTRATOR;
use crate::{End, Engine, Handle, payload};

/// How calls are carried out.
#[derive(Debug, Clone)]
pub struct Options {
    /// Calls made at once; more wait their turn, in log order.
    pub concurrency: usize,
    /// How often the position is saved while calls go on.
    pub save_every: Duration,
    /// At shutdown, how long calls under way may take to finish (the rest are in doubt next start).
    pub drain: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { concurrency: 64, save_every: Duration::from_secs(1), drain: Duration::from_secs(5) }
    }
}

/// The store cursor: every call at or before it is answered.
const CURSOR: &str = "adapters";

/// Carries out the `tool.call`s of the log that one of the engine's adapters can handle, until
/// `shutdown` resolves (see the module's docs), asking a person first when the operator's policy
/// or the tool's annotations say so (org.yaml's `approvals`). Starts where it stood (the saved
/// cursor), or, the first time, after `first`: the log's head when the daemon was built
/// (`Engine::seq`), so calls stored before there were adapters are left alone and none made since
/// is missed.
pub async fn run(log: Handle, engine: Engine, options: Options, first: u64, shutdown: impl Future<Output = ()>) {
    let start = match log.cursor(CURSOR).await {
        Ok(Some(seq)) => seq,
        // Saved at once: a crash before the first save must not leave the next start without it.
        Ok(None) => match log.set_cursor(CURSOR, first).await {
            Ok(()) => first,
            Err(e) => {
                return tracing::error!(error = %e, "cannot save the adapters' position; no tool calls are carried out");
            }
        },
        Err(e) => {
            return tracing::error!(error = %e, "cannot read the adapters' position; no tool calls are carried out");
        }
    };
    let (stopping, stopped) = watch::channel(false);
    let ctx = Ctx {
        log: log.clone(),
        engine: engine.clone(),
        permits: Arc::new(Semaphore::new(options.concurrency.max(1))),
        waiters: Arc::default(),
        stopping: stopped,
    };
    let mut d = Dispatcher { ctx, running: JoinSet::new(), in_flight: BTreeSet::new(), seen: start, saved: start };
    let read_up_to = match d.recover(start).await {
        Ok(after) => after,
        Err(e) => return tracing::error!(error = %e, "cannot read the tool calls to recover; none are carried out"),
    };
    let (mut calls_after, mut notes_after) = (read_up_to, read_up_to);
    tokio::pin!(shutdown);
    let mut save = tokio::time::interval(options.save_every);
    'subscribe: loop {
        let calls = log.subscribe(Filter { kind: Some(MessageType::ToolCall), ..Filter::default() }, Some(calls_after));
        let notes =
            log.subscribe(Filter { kind: Some(MessageType::ChatSystem), ..Filter::default() }, Some(notes_after));
        let (mut calls, mut notes) = match (calls.await, notes.await) {
            (Ok(c), Ok(n)) => (c, n),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "tool call subscription failed; retrying");
                tokio::select! {
                    () = &mut shutdown => break 'subscribe,
                    () = tokio::time::sleep(Duration::from_millis(500)) => continue 'subscribe,
                }
            }
        };
        loop {
            tokio::select! {
                () = &mut shutdown => break 'subscribe,
                Some(done) = d.running.join_next(), if !d.running.is_empty() => d.finished(done),
                _ = save.tick() => d.save().await,
                next = calls.next() => match next {
                    Ok(event) => {
                        calls_after = event.seq;
                        d.seen = d.seen.max(event.seq);
                        match event.message() {
                            Ok(call) => d.start(event.seq, call, Start::New),
                            Err(e) => tracing::warn!(seq = event.seq, error = %e, "a stored tool call does not read"),
                        }
                    }
                    Err(End::Lagged { last_seq } | End::Failed { last_seq, .. } | End::Closed { last_seq }) => {
                        calls_after = last_seq;
                        continue 'subscribe;
                    }
                    Err(End::Shutdown { .. }) => break 'subscribe,
                },
                next = notes.next() => match next {
                    Ok(event) => {
                        notes_after = event.seq;
                        if let Ok(m) = event.message()
                            && m.payload_type.as_deref() == Some(APPROVAL_DECIDED_PAYLOAD)
                            && let Some(decided) = payload::read::<payload::ApprovalDecided>(&m.payload)
                        {
                            d.ctx.decided(decided);
                        }
                    }
                    Err(End::Lagged { last_seq } | End::Failed { last_seq, .. } | End::Closed { last_seq }) => {
                        notes_after = last_seq;
                        continue 'subscribe;
                    }
                    Err(End::Shutdown { .. }) => break 'subscribe,
                },
            }
        }
    }
    // Calls waiting for a decision wait again after the next start; calls under way may finish,
    // and those that do not are in doubt then.
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(options.drain, async {
        while let Some(done) = d.running.join_next().await {
            d.finished(done);
        }
    })
    .await;
    d.running.abort_all();
    d.save().await;
}

/// What the dispatcher's calls share.
#[derive(Clone)]
struct Ctx {
    log: Handle,
    engine: Engine,
    permits: Arc<Semaphore>,
    /// Calls waiting for a decision, by call id.
    waiters: Arc<Mutex<HashMap<String, oneshot::Sender<payload::ApprovalDecided>>>>,
    /// True once the daemon stops: waits end (the next start takes them up again).
    stopping: watch::Receiver<bool>,
}

/// Where a call stands when the dispatcher takes it up.
enum Start {
    /// Not yet looked at: asked about if it needs approval, then made.
    New,
    /// Approval was asked for and no decision came yet: wait (until it expires).
    Waiting { expires_ms: i64 },
    /// A decision came and nothing followed it yet.
    Decided(payload::ApprovalDecided),
    /// Started (`attempt`) and not answered when the daemon stopped.
    InDoubt { attempt: u32 },
}

struct Dispatcher {
    ctx: Ctx,
    running: JoinSet<u64>,
    /// The seqs of calls not yet answered.
    in_flight: BTreeSet<u64>,
    /// The last call seen.
    seen: u64,
    saved: u64,
}

impl Dispatcher {
    /// Reads the calls after `start` and what became of them, and takes up each unanswered one
    /// where it stands. Returns the seq read up to.
    async fn recover(&mut self, start: u64) -> crate::Result<u64> {
        let mut calls: Vec<(u64, Message)> = Vec::new();
        let mut started: HashMap<String, u32> = HashMap::new();
        let mut requested: HashMap<String, i64> = HashMap::new();
        let mut decided: HashMap<String, payload::ApprovalDecided> = HashMap::new();
        let mut answered: HashSet<String> = HashSet::new();
        let mut after = start;
        loop {
            let events = self.ctx.log.read(&Filter::default(), after, 1000).await?;
            let Some(last) = events.last() else { break };
            after = last.seq;
            for event in events {
                let Ok(m) = event.message() else { continue };
                match (m.kind, m.payload_type.as_deref()) {
                    (MessageType::ToolCall, _) => calls.push((event.seq, m)),
                    (MessageType::ChatSystem, Some(TOOL_STARTED_PAYLOAD)) => {
                        if let Some(s) = payload::read::<payload::ToolStarted>(&m.payload) {
                            let attempt = started.entry(s.call_id).or_default();
                            *attempt = (*attempt).max(s.attempt);
                        }
                    }
                    (MessageType::ChatSystem, Some(APPROVAL_REQUESTED_PAYLOAD)) => {
                        if let Some(r) = payload::read::<payload::ApprovalRequested>(&m.payload) {
                            requested.insert(r.call_id, crate::clock::ts_ms(&r.expires_at).unwrap_or(0));
                        }
                    }
                    (MessageType::ChatSystem, Some(APPROVAL_DECIDED_PAYLOAD)) => {
                        if let Some(d) = payload::read::<payload::ApprovalDecided>(&m.payload) {
                            decided.insert(d.call_id.clone(), d);
                        }
                    }
                    (MessageType::ToolResult | MessageType::ToolError, _) => {
                        if let Some(id) =
                            m.idempotency_key.as_deref().and_then(|k| k.strip_prefix("clutch:tool-answer:"))
                        {
                            answered.insert(id.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        }
        self.seen = after;
        for (seq, call) in calls {
            if answered.contains(&call.id) {
                continue;
            }
            let start = if let Some(&attempt) = started.get(&call.id) {
                Start::InDoubt { attempt }
            } else if let Some(d) = decided.remove(&call.id) {
                Start::Decided(d)
            } else if let Some(&expires_ms) = requested.get(&call.id) {
                Start::Waiting { expires_ms }
            } else {
                Start::New
            };
            self.start(seq, call, start);
        }
        Ok(after)
    }

    /// Takes up a call an adapter handles, in the background.
    fn start(&mut self, seq: u64, call: Message, start: Start) {
        let adapter = self.ctx.engine.adapters().find(&call);
        let Some(adapter) = adapter else {
            // Not ours (an agent may answer it); but one this daemon started and lost track of is
            // answered in doubt.
            if let Start::InDoubt { .. } = start {
                self.in_flight.insert(seq);
                let log = self.ctx.log.clone();
                self.running.spawn(async move {
                    append_answer(&log, &call, in_doubt(&tool_of(&call)), 0).await;
                    seq
                });
            }
            return;
        };
        self.in_flight.insert(seq);
        self.running.spawn(self.ctx.clone().take_up(adapter, call, seq, start));
    }

    fn finished(&mut self, done: Result<u64, tokio::task::JoinError>) {
        match done {
            Ok(0) => {}
            Ok(seq) => {
                self.in_flight.remove(&seq);
            }
            Err(e) => tracing::error!(error = %e, "a tool call's task failed"),
        }
    }

    /// Saves the position: before the first call still under way, or the last one seen.
    async fn save(&mut self) {
        let at = self.in_flight.first().map_or(self.seen, |first| first - 1);
        if at <= self.saved {
            return;
        }
        match self.ctx.log.set_cursor(CURSOR, at).await {
            Ok(()) => self.saved = at,
            Err(e) => tracing::warn!(error = %e, "cannot save the adapters' position"),
        }
    }
}

impl Ctx {
    /// A decision about a call: handed to the call waiting for it, if one is.
    fn decided(&self, decided: payload::ApprovalDecided) {
        if let Some(waiter) = self.waiters.lock().unwrap_or_else(|e| e.into_inner()).remove(&decided.call_id) {
            let _ = waiter.send(decided);
        }
    }

    /// Carries a call from where it stands to its answer; returns its seq once it is answered, 0
    /// when it is left for the next start (it could not be noted, or the daemon is stopping).
    async fn take_up(self, adapter: Arc<dyn Adapter>, call: Message, seq: u64, start: Start) -> u64 {
        let tool = tool_of(&call);
        let decision = match start {
            Start::InDoubt { attempt } => {
                if adapter.annotations(&call).await.is_some_and(|a| a.retry_safe()) {
                    tracing::info!(call_id = %call.id, attempt = attempt + 1, "a read-only or idempotent call in doubt is made again");
                    return self.make(adapter, call, seq, attempt + 1).await;
                }
                tracing::warn!(call_id = %call.id, tool = %tool, "a tool call was under way when the daemon stopped: in doubt");
                append_answer(&self.log, &call, in_doubt(&tool), 0).await;
                return seq;
            }
            Start::Decided(d) => d,
            Start::Waiting { expires_ms } => match self.wait(&call, expires_ms).await {
                Some(d) => d,
                None => return 0,
            },
            Start::New => {
                let annotations = adapter.annotations(&call).await;
                let Some(reason) = self.engine.options().policy.org.approvals.needed(&tool, annotations) else {
                    if annotations.is_some_and(|a| a.retry_safe()) {
                        return self.make_repeatable(adapter, call, seq).await;
                    }
                    return self.make(adapter, call, seq, 1).await;
                };
                let timeout = self.engine.options().policy.org.approvals.timeout;
                let expires_ms = self.engine.options().clock.now_ms() + timeout.as_millis() as i64;
                // Waiting before asking, so that no decision can come before the wait.
                let waiting = self.waiter(&call.id);
                if let Err(e) = self.log.append_one(approval_request(&call, reason, expires_ms)).await {
                    tracing::warn!(call_id = %call.id, error = %e, "cannot ask for a tool call's approval; not now");
                    return 0;
                }
                tracing::info!(call_id = %call.id, tool = %tool, reason, "tool call waits for approval");
                match self.wait_on(&call, waiting, expires_ms).await {
                    Some(d) => d,
                    None => return 0,
                }
            }
        };
        match decision.decision {
            Decision::Approved => self.make(adapter, call, seq, 1).await,
            Decision::Denied | Decision::Expired => {
                let (why, retryable) = match decision.decision {
                    Decision::Denied => (format!("{tool} was denied by {}", decision.by), false),
                    _ => (format!("{tool} waited for approval and no one decided in time"), true),
                };
                let note = decision.note.map(|n| format!(": {n}")).unwrap_or_default();
                let answer = Answer::Error { code: ErrorCode::ToolDenied, message: format!("{why}{note}"), retryable };
                append_answer(&self.log, &call, answer, 0).await;
                seq
            }
        }
    }

    fn waiter(&self, call_id: &str) -> oneshot::Receiver<payload::ApprovalDecided> {
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().unwrap_or_else(|e| e.into_inner()).insert(call_id.to_owned(), tx);
        rx
    }

    /// Waits for the decision about `call` (a person's, or expiry at `expires_ms`).
    async fn wait(&self, call: &Message, expires_ms: i64) -> Option<payload::ApprovalDecided> {
        let waiting = self.waiter(&call.id);
        // A decision stored between the recovery's read and the wait is in the engine's state.
        if !self.engine.approvals().pending.iter().any(|a| a.call_id == call.id) {
            self.waiters.lock().unwrap_or_else(|e| e.into_inner()).remove(&call.id);
            return self.engine.stored_decision(&call.id).await;
        }
        self.wait_on(call, waiting, expires_ms).await
    }

    async fn wait_on(
        &self,
        call: &Message,
        mut waiting: oneshot::Receiver<payload::ApprovalDecided>,
        expires_ms: i64,
    ) -> Option<payload::ApprovalDecided> {
        let left = (expires_ms - self.engine.options().clock.now_ms()).max(0) as u64;
        let mut stopping = self.stopping.clone();
        tokio::select! {
            decided = &mut waiting => return decided.ok(),
            () = tokio::time::sleep(Duration::from_millis(left)) => {}
            _ = stopping.wait_for(|s| *s) => return None,
        }
        match self.engine.decide_approval(&call.id, Decision::Expired, ORCHESTRATOR, None).await {
            Ok(d) => Some(d),
            // A person decided just before: that decision stands and is on its way.
            Err(_) => tokio::time::timeout(Duration::from_secs(5), waiting).await.ok().and_then(Result::ok),
        }
    }

    /// Makes a call of a read-only or idempotent tool without noting its start first: if the daemon
    /// stops before the answer, the next start makes it again, which such a tool allows, so the note
    /// only tells observers. A call answered within [`NOTE_AFTER`] is stored with its note in one
    /// commit (one flush on the call's path instead of two back to back); a slower one's note is
    /// stored as soon as that time is up, so observers see it under way.
    async fn make_repeatable(self, adapter: Arc<dyn Adapter>, call: Message, seq: u64) -> u64 {
        let Ok(_permit) = self.permits.clone().acquire_owned().await else { return 0 };
        let began = Instant::now();
        let note = started_note(&call, adapter.name(), 1);
        let outbound = adapter.outbound(&call);
        tokio::pin!(outbound);
        let (answer, note) = tokio::select! {
            answer = &mut outbound => (answer, Some(note)),
            () = tokio::time::sleep(NOTE_AFTER) => {
                let (noted, answer) = tokio::join!(self.log.append_one(note), outbound);
                if let Err(e) = noted {
                    tracing::warn!(call_id = %call.id, error = %e, "cannot note a tool call as started");
                }
                (answer, None)
            }
        };
        let answer = answer_message(&self.log, &call, answer, began.elapsed().as_millis() as u64).await;
        store_answer(&self.log, &call, note.into_iter().chain([answer]).collect()).await;
        seq
    }

    /// Notes the call as started (durably), makes it and stores the answer; returns its seq, or 0
    /// when it could not be noted (then it was not made, stays under way, and the next start makes
    /// it). A note that is already stored means the call was started elsewhere: it is not made.
    async fn make(self, adapter: Arc<dyn Adapter>, call: Message, seq: u64, attempt: u32) -> u64 {
        let Ok(_permit) = self.permits.clone().acquire_owned().await else { return 0 };
        match self.log.append_one(started_note(&call, adapter.name(), attempt)).await {
            Ok(outcome) if outcome.duplicate => {
                tracing::warn!(call_id = %call.id, attempt, "a tool call was already started; not made twice");
                return seq;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(call_id = %call.id, error = %e, "cannot note a tool call as started; not made now");
                return 0;
            }
        }
        let began = Instant::now();
        let answer = adapter.outbound(&call).await;
        append_answer(&self.log, &call, answer, began.elapsed().as_millis() as u64).await;
        seq
    }
}

fn in_doubt(tool: &str) -> Answer {
    Answer::Error {
        code: ErrorCode::ToolInDoubt,
        message: format!(
            "{tool} was called but the daemon stopped before it answered: it may have run; it is not called \
             again (it is neither read-only nor idempotent)"
        ),
        retryable: false,
    }
}

fn approval_request(call: &Message, reason: &str, expires_ms: i64) -> Message {
    let call_payload = payload::read::<payload::ToolCall>(&call.payload);
    let expires = std::time::SystemTime::UNIX_EPOCH + Duration::from_millis(expires_ms.max(0) as u64);
    let request = payload::ApprovalRequested {
        tool: tool_of(call),
        call_id: call.id.clone(),
        caller: call.from.agent_id.clone(),
        args: call_payload.map(|c| c.args).unwrap_or_default(),
        reason: reason.to_owned(),
        expires_at: clutch_proto::validate::format_ts(expires),
    };
    let mut m = about(call, MessageType::ChatSystem, payload::object(&request));
    m.to = vec![Recipient { agent_id: call.from.agent_id.clone() }];
    m.payload_type = Some(APPROVAL_REQUESTED_PAYLOAD.to_owned());
    m.idempotency_key = Some(format!("clutch:approval-request:{}", call.id));
    m
}

/// The tool a call names (`?` when it names none).
fn tool_of(call: &Message) -> String {
    payload::read::<payload::ToolCall>(&call.payload).map_or_else(|| "?".to_owned(), |c| c.tool)
}

/// A message from the daemon about `call`, to no one in particular.
fn about(call: &Message, kind: MessageType, payload: serde_json::Map<String, Value>) -> Message {
    let mut m = Message::new(kind, ORCHESTRATOR, (&call.run_id, &call.thread_id, &call.task_id), payload);
    m.parent_task_id = call.parent_task_id.clone();
    m.trace = call.trace.clone();
    m
}

fn started_note(call: &Message, adapter: &str, attempt: u32) -> Message {
    let note =
        payload::ToolStarted { tool: tool_of(call), call_id: call.id.clone(), adapter: adapter.to_owned(), attempt };
    let mut m = about(call, MessageType::ChatSystem, payload::object(&note));
    m.payload_type = Some(TOOL_STARTED_PAYLOAD.to_owned());
    m.idempotency_key = Some(format!("clutch:tool-start:{}:{attempt}", call.id));
    m
}

/// How long a read-only or idempotent call runs before its start is noted on its own; a quicker
/// call's note is stored with its answer.
const NOTE_AFTER: Duration = Duration::from_millis(20);

/// A content block larger than this (as JSON) is stored as an artifact and replaced by a reference.
pub const INLINE_MAX: usize = 32 * 1024;

/// `content` with every block over [`INLINE_MAX`] stored as an artifact: the block becomes
/// `{"type": "artifact", "ref", "media_type", "size", "replaces"}` (`replaces`: the block's own
/// type), and the artifact is attached to the answer too. Text is stored as text, images and audio
/// as their decoded bytes, anything else as its JSON. A block the store refuses stays inline.
async fn offload(log: &Handle, tool: &str, content: Vec<Value>) -> (Vec<Value>, Vec<Attachment>) {
    use base64::Engine as _;
    let mut attachments = Vec::new();
    let mut out = Vec::with_capacity(content.len());
    for (i, block) in content.into_iter().enumerate() {
        let json = block.to_string();
        if json.len() <= INLINE_MAX {
            out.push(block);
            continue;
        }
        let kind = block["type"].as_str().unwrap_or("").to_owned();
        let decoded = block["data"].as_str().and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
        let (bytes, media_type) = match (kind.as_str(), block["text"].as_str(), decoded) {
            ("text", Some(text), _) => (text.as_bytes().to_vec(), "text/plain; charset=utf-8".to_owned()),
            ("image" | "audio", _, Some(bytes)) => {
                (bytes, block["mimeType"].as_str().unwrap_or("application/octet-stream").to_owned())
            }
            _ => (json.into_bytes(), "application/json".to_owned()),
        };
        match log.put_artifact(bytes::Bytes::from(bytes)).await {
            Ok(a) => {
                let block = payload::ArtifactBlock {
                    kind: "artifact".into(),
                    reference: a.reference.clone(),
                    media_type: media_type.clone(),
                    size: a.size,
                    replaces: kind,
                };
                out.push(Value::Object(payload::object(&block)));
                attachments.push(Attachment {
                    kind: AttachmentKind::ArtifactRef,
                    reference: a.reference,
                    name: Some(format!("{tool} content[{i}]")),
                    media_type: Some(media_type),
                    size: Some(a.size),
                });
            }
            Err(e) => {
                tracing::warn!(tool, error = %e, "a large tool answer block could not be stored as an artifact; kept inline");
                out.push(block);
            }
        }
    }
    (out, attachments)
}

/// Stores the answer to `call` (to its caller); one per call, whatever the retries.
async fn append_answer(log: &Handle, call: &Message, answer: Answer, duration_ms: u64) {
    let answer = answer_message(log, call, answer, duration_ms).await;
    store_answer(log, call, vec![answer]).await;
}

/// Appends `messages` (the answer to `call`, after its note when they go together), in one commit.
async fn store_answer(log: &Handle, call: &Message, messages: Vec<Message>) {
    let stored = match log.append(messages).await {
        Ok(outcomes) => outcomes.into_iter().find_map(Result::err),
        Err(e) => Some(e),
    };
    if let Some(e) = stored {
        tracing::warn!(call_id = %call.id, error = %e, "cannot store a tool call's answer");
    }
}

/// The answer to `call` as a message to its caller: one per call (its idempotency key), whatever the
/// retries; large content blocks stored as artifacts first.
async fn answer_message(log: &Handle, call: &Message, answer: Answer, duration_ms: u64) -> Message {
    let tool = tool_of(call);
    let mut m = match answer {
        Answer::Result { content, structured_content } => {
            let (content, attachments) = offload(log, &tool, content).await;
            let result =
                payload::ToolResult { tool, call_id: call.id.clone(), content, structured_content, duration_ms };
            let mut m = about(call, MessageType::ToolResult, payload::object(&result));
            m.attachments = attachments;
            m
        }
        Answer::Error { code, message, retryable } => {
            let details = payload::CallRef { tool, call_id: call.id.clone() };
            let error = payload::TaskError {
                code: code.as_str().to_owned(),
                message,
                retryable,
                details: Some(Value::Object(payload::object(&details))),
                error: None,
            };
            about(call, MessageType::ToolError, payload::object(&error))
        }
    };
    m.to = vec![Recipient { agent_id: call.from.agent_id.clone() }];
    m.idempotency_key = Some(format!("clutch:tool-answer:{}", call.id));
    m
}
