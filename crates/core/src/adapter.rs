//! Adapters: the one way external protocols enter and leave Clutch (seed 000 §7). An [`Adapter`] has
//! a name, says which messages it carries out ([`Adapter::can_handle`]), turns raw input of its
//! protocol into messages ([`Adapter::inbound`]) and carries a message out ([`Adapter::outbound`]).
//! The daemon keeps its adapters in one [`Registry`], and [`run`] hands them the `tool.call`s of the
//! log: an MCP client's tools today (crate `tools`); webhooks, A2A remotes and framework bridges are
//! adapters too.
//!
//! A call is carried out exactly as the log records it. The `tool.call` is the intent, durable
//! before anything happens; [`run`] stores a `clutch.tool.started.v1` note (durable) just before it
//! makes the call, and the answer (`tool.result` or `tool.error`, to the caller) after. After a
//! crash, a call with a note and no answer may have run: it is answered `TOOL_IN_DOUBT` and never
//! made again, unless its adapter says it is safe to repeat (a read-only or idempotent tool), when
//! it is made once more. A call without a note was never made, and is made. Each note and answer
//! carries an idempotency key, so the log holds one of each whatever the retries.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use clutch_proto::message::Recipient;
use clutch_proto::{ErrorCode, Message, MessageType};
use clutch_store::Filter;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::engine::TOOL_STARTED_PAYLOAD;
use crate::tasks::ORCHESTRATOR;
use crate::{End, Handle, Refusal, payload, view};

/// A boxed future, as adapters return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What carrying a call out came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The tool answered: its content blocks and, if it gave one, its structured answer.
    Result { content: Vec<Value>, structured_content: Option<Value> },
    /// It did not: a stable code (`TOOL_UNAVAILABLE`, `TOOL_TIMEOUT`, `TOOL_FAILED`, ...), words,
    /// and whether the same call may succeed if made again.
    Error { code: ErrorCode, message: String, retryable: bool },
}

/// One external protocol, in and out.
pub trait Adapter: Send + Sync + 'static {
    /// `mcp`, `hook`...: the prefix of what it serves (`mcp:files/read_file`).
    fn name(&self) -> &str;

    /// Whether it carries `message` out (a `tool.call` naming one of its tools).
    fn can_handle(&self, message: &Message) -> bool;

    /// Raw input of its protocol as messages for the log. Adapters that take none refuse.
    fn inbound<'a>(&'a self, _raw: &'a Value) -> BoxFuture<'a, Result<Vec<Message>, Refusal>> {
        let why = format!("the {} adapter takes no input of its own", self.name());
        Box::pin(async move { Err(Refusal::new(ErrorCode::NotFound, why)) })
    }

    /// Carries `message` out (a call of one of its tools). It bounds its own time (its timeouts).
    fn outbound<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Answer>;

    /// What it serves now, for listings.
    fn servers(&self) -> Vec<view::ToolServer> {
        Vec::new()
    }

    /// Whether `message` may be made again when its outcome is unknown (the tool changes nothing,
    /// or making it twice is as making it once). It may wait to know (a server still connecting).
    fn retry_safe<'a>(&'a self, _message: &'a Message) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
}

/// The daemon's adapters. Cheap to clone; clones share the list.
#[derive(Clone, Default)]
pub struct Registry {
    adapters: Arc<RwLock<Vec<Arc<dyn Adapter>>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.list().iter().map(|a| a.name().to_owned()).collect();
        f.debug_struct("Registry").field("adapters", &names).finish()
    }
}

impl Registry {
    pub fn add(&self, adapter: Arc<dyn Adapter>) {
        self.adapters.write().unwrap_or_else(|e| e.into_inner()).push(adapter);
    }

    pub fn list(&self) -> Vec<Arc<dyn Adapter>> {
        self.adapters.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The adapter that carries `message` out, if one does.
    pub fn find(&self, message: &Message) -> Option<Arc<dyn Adapter>> {
        self.list().into_iter().find(|a| a.can_handle(message))
    }

    /// Every server of tools, by name.
    pub fn tools(&self) -> view::Tools {
        let mut servers: Vec<view::ToolServer> = self.list().iter().flat_map(|a| a.servers()).collect();
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        view::Tools { servers }
    }
}

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

/// Carries out the `tool.call`s of the log that an adapter of `registry` can handle, until
/// `shutdown` resolves (see the module's docs). Starts where it stood (the saved cursor), or, the
/// first time, after `first`: the log's head when the daemon was built (`Engine::seq`), so
/// calls stored before there were adapters are left alone and none made since is missed.
pub async fn run(log: Handle, registry: Registry, options: Options, first: u64, shutdown: impl Future<Output = ()>) {
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
    let mut d = Dispatcher {
        log: log.clone(),
        registry,
        permits: Arc::new(Semaphore::new(options.concurrency.max(1))),
        running: JoinSet::new(),
        in_flight: BTreeSet::new(),
        seen: start,
        saved: start,
    };
    let mut after = match d.recover(start).await {
        Ok(after) => after,
        Err(e) => return tracing::error!(error = %e, "cannot read the tool calls to recover; none are carried out"),
    };
    tokio::pin!(shutdown);
    let mut save = tokio::time::interval(options.save_every);
    'subscribe: loop {
        let filter = Filter { kind: Some(MessageType::ToolCall), ..Filter::default() };
        let mut calls = match log.subscribe(filter, Some(after)).await {
            Ok(s) => s,
            Err(e) => {
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
                        d.seen = d.seen.max(event.seq);
                        match event.message() {
                            Ok(call) => d.start(event.seq, call, 1),
                            Err(e) => tracing::warn!(seq = event.seq, error = %e, "a stored tool call does not read"),
                        }
                    }
                    Err(End::Lagged { last_seq } | End::Failed { last_seq, .. }) => {
                        after = last_seq;
                        continue 'subscribe;
                    }
                    Err(End::Shutdown { .. }) => break 'subscribe,
                },
            }
        }
    }
    // Calls under way may finish; those that do not are in doubt at the next start.
    let _ = tokio::time::timeout(options.drain, async {
        while let Some(done) = d.running.join_next().await {
            d.finished(done);
        }
    })
    .await;
    d.running.abort_all();
    d.save().await;
}

struct Dispatcher {
    log: Handle,
    registry: Registry,
    permits: Arc<Semaphore>,
    running: JoinSet<u64>,
    /// The seqs of calls not yet answered.
    in_flight: BTreeSet<u64>,
    /// The last call seen.
    seen: u64,
    saved: u64,
}

impl Dispatcher {
    /// Reads the calls after `start` and what became of them: the ones never started are made, the
    /// ones started and not answered are made again or answered in doubt. Returns the seq read up to.
    async fn recover(&mut self, start: u64) -> crate::Result<u64> {
        let mut calls: Vec<(u64, Message)> = Vec::new();
        let mut started: HashMap<String, u32> = HashMap::new();
        let mut answered: HashSet<String> = HashSet::new();
        let mut after = start;
        loop {
            let events = self.log.read(&Filter::default(), after, 1000).await?;
            let Some(last) = events.last() else { break };
            after = last.seq;
            for event in events {
                let Ok(m) = event.message() else { continue };
                match (m.kind, m.idempotency_key.as_deref()) {
                    (MessageType::ToolCall, _) => calls.push((event.seq, m)),
                    (MessageType::ChatSystem, Some(key)) if m.payload_type.as_deref() == Some(TOOL_STARTED_PAYLOAD) => {
                        if let Some(s) = payload::read::<payload::ToolStarted>(&m.payload)
                            && key.starts_with("clutch:tool-start:")
                        {
                            let attempt = started.entry(s.call_id).or_default();
                            *attempt = (*attempt).max(s.attempt);
                        }
                    }
                    (MessageType::ToolResult | MessageType::ToolError, Some(key)) => {
                        if let Some(id) = key.strip_prefix("clutch:tool-answer:") {
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
            match started.get(&call.id) {
                None => self.start(seq, call, 1),
                Some(&attempt) => self.in_doubt(seq, call, attempt),
            }
        }
        Ok(after)
    }

    /// A call started before a stop, with no answer: made again if that is safe, else answered.
    fn in_doubt(&mut self, seq: u64, call: Message, attempt: u32) {
        let adapter = self.registry.find(&call);
        self.in_flight.insert(seq);
        let log = self.log.clone();
        let permits = self.permits.clone();
        self.running.spawn(async move {
            if let Some(adapter) = adapter
                && adapter.retry_safe(&call).await
            {
                tracing::info!(call_id = %call.id, attempt = attempt + 1, "a read-only or idempotent call in doubt is made again");
                return make(log, permits, adapter, call, seq, attempt + 1).await;
            }
            let tool = tool_of(&call);
            tracing::warn!(call_id = %call.id, tool = %tool, "a tool call was under way when the daemon stopped: in doubt");
            let answer = Answer::Error {
                code: ErrorCode::ToolInDoubt,
                message: format!(
                    "{tool} was called but the daemon stopped before it answered: it may have run; it is not \
                     called again (it is neither read-only nor idempotent)"
                ),
                retryable: false,
            };
            append_answer(&log, &call, answer, 0).await;
            seq
        });
    }

    /// Makes a call its adapter handles (in the background, within the concurrency limit).
    fn start(&mut self, seq: u64, call: Message, attempt: u32) {
        let Some(adapter) = self.registry.find(&call) else { return };
        self.in_flight.insert(seq);
        self.running.spawn(make(self.log.clone(), self.permits.clone(), adapter, call, seq, attempt));
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
        match self.log.set_cursor(CURSOR, at).await {
            Ok(()) => self.saved = at,
            Err(e) => tracing::warn!(error = %e, "cannot save the adapters' position"),
        }
    }
}

/// Notes the call as started (durably), makes it and stores the answer; returns its seq, or 0 when
/// it could not be noted (then it was not made, stays under way, and the next start makes it).
async fn make(
    log: Handle,
    permits: Arc<Semaphore>,
    adapter: Arc<dyn Adapter>,
    call: Message,
    seq: u64,
    attempt: u32,
) -> u64 {
    let Ok(_permit) = permits.acquire_owned().await else { return 0 };
    if let Err(e) = log.append_one(started_note(&call, adapter.name(), attempt)).await {
        tracing::warn!(call_id = %call.id, error = %e, "cannot note a tool call as started; not made now");
        return 0;
    }
    let began = Instant::now();
    let answer = adapter.outbound(&call).await;
    append_answer(&log, &call, answer, began.elapsed().as_millis() as u64).await;
    seq
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

/// Stores the answer to `call` (to its caller); one per call, whatever the retries.
async fn append_answer(log: &Handle, call: &Message, answer: Answer, duration_ms: u64) {
    let tool = tool_of(call);
    let mut m = match answer {
        Answer::Result { content, structured_content } => {
            let result =
                payload::ToolResult { tool, call_id: call.id.clone(), content, structured_content, duration_ms };
            about(call, MessageType::ToolResult, payload::object(&result))
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
    if let Err(e) = log.append_one(m).await {
        tracing::warn!(call_id = %call.id, error = %e, "cannot store a tool call's answer");
    }
}
