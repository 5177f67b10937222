//! Positions at work: the runner (`agent:positions`) takes each invocation (a `task.request` to it
//! whose payload names a position), opens a session in the invocation's run, gives each role of
//! the position an agent (one named in the invocation, or a built-in LLM agent it spawns from the
//! SKILL.md), and drives the position's pattern with tasks (one per turn, children of the
//! invocation's task) and session messages, recording each phase in the log (`clutch.session.v1`).
//!
//! A session's driver is straight-line code over the log: every message it writes carries a key
//! (`meta.session_key`) derived from where it is in the pattern, and before it writes anything it
//! reads the session's run back, so after a restart it finds the turns it already gave and their
//! outcomes and writes nothing twice (LLM agents resume their own turns the same way).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use clutch_core::session::{self, Limits, Member, Phase, RECORD_PAYLOAD, SESSION_KEY};
use clutch_core::{Engine, Handle, Subscription};
use clutch_proto::id::{self, Kind};
use clutch_proto::message::Recipient;
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::skill::{Catalog, Pattern, SessionFacts, Skill};

/// The runner's agent id: invocations are task requests to it.
pub use clutch_core::session::RUNNER;
/// What a turn's request carries (the daemon's own payload type).
pub const TURN_PAYLOAD: &str = "clutch.position.turn.v1";

/// An invocation: the payload of a `task.request` to [`RUNNER`] (as `Engine::position_invoke`
/// writes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invoke {
    /// The position's name (`mirror`).
    pub position: String,
    /// The text a `task.request` usually carries (for people reading the log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(flatten)]
    pub invocation: clutch_core::session::Invocation,
}

/// How the runner works.
#[derive(Debug, Clone)]
pub struct Options {
    pub catalog: Arc<Catalog>,
    /// The provider (and model) of the LLM agents it spawns for roles nobody was named for;
    /// `None`: such an invocation fails, naming the roles.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The bus limits of every session.
    pub limits: Limits,
    /// How long the comparisons of a mirror and the votes of a circle are waited for before
    /// synthesis is forced with the answers in hand.
    pub consensus_timeout: Duration,
    /// How long a whole session may take before it ends in `TIMEOUT`.
    pub session_timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            catalog: Arc::new(Catalog::load(None).unwrap_or_else(|_| unreachable!("the shipped positions parse"))),
            provider: None,
            model: None,
            limits: Limits::default(),
            consensus_timeout: Duration::from_secs(300),
            session_timeout: Duration::from_secs(3600),
        }
    }
}

/// The positions runner.
pub struct Runner {
    options: Arc<Options>,
}

impl Runner {
    pub fn new(options: Options) -> Runner {
        Runner { options: Arc::new(options) }
    }

    /// Registers, takes up the sessions under way, then starts one driver per invocation.
    pub async fn run(self, log: Handle, engine: Engine, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut failures = 0;
        loop {
            let result = tokio::select! {
                // Stopping wins over an inbox that ended because the daemon is stopping.
                biased;
                () = &mut stop => return,
                result = self.serve(&log, &engine) => result,
            };
            // Its inbox ended because the daemon is stopping: no failure, nothing to restart.
            if log.is_closing() {
                return stop.await;
            }
            failures += 1;
            let delay = clutch_core::backoff(Duration::from_millis(200), Duration::from_secs(10), failures, 7);
            tracing::warn!(error = ?result.err(), delay_ms = delay.as_millis() as u64, "positions runner stopped; starting again");
            tokio::select! {
                biased;
                () = &mut stop => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn serve(&self, log: &Handle, engine: &Engine) -> Result<(), String> {
        // Not a registered agent (a fresh daemon's log stays empty): the catalog is announced to the
        // engine, and invocations are tasks given to RUNNER by name.
        engine.set_positions(self.options.catalog.list().map(summary).collect());
        remove_leftovers(engine).await;
        let from = engine.seq();
        let mut inbox = log
            .subscribe(Filter { to: Some(RUNNER.into()), ..Filter::default() }, Some(from))
            .await
            .map_err(|e| format!("cannot read its inbox: {e}"))?;
        let mut drivers = JoinSet::new();
        let mut running: HashMap<String, watch::Sender<bool>> = HashMap::new();
        for task_id in engine.open_tasks_of(RUNNER) {
            let filter =
                Filter { task_id: Some(task_id.clone()), kind: Some(MessageType::TaskRequest), ..Filter::default() };
            if let Some(request) = log.read(&filter, 0, 1).await.ok().and_then(|e| e.into_iter().next())
                && let Ok(request) = request.message()
            {
                self.start(&mut drivers, &mut running, log, engine, request);
            }
        }
        loop {
            tokio::select! {
                next = inbox.next() => {
                    let event = next.map_err(|e| format!("its inbox ended: {e:?}"))?;
                    let Ok(message) = event.message() else { continue };
                    match message.kind {
                        MessageType::TaskRequest if !running.contains_key(&message.task_id) => {
                            self.start(&mut drivers, &mut running, log, engine, message);
                        }
                        MessageType::TaskCancel => {
                            if let Some(cancel) = running.get(&message.task_id) {
                                let _ = cancel.send(true);
                            }
                        }
                        _ => {}
                    }
                }
                Some(done) = drivers.join_next(), if !drivers.is_empty() => {
                    match done {
                        Ok(task_id) => { running.remove(&task_id); }
                        Err(e) if !e.is_cancelled() => tracing::error!(error = %e, "a session's driver failed"),
                        Err(_) => {}
                    }
                }
            }
        }
    }

    fn start(
        &self,
        drivers: &mut JoinSet<String>,
        running: &mut HashMap<String, watch::Sender<bool>>,
        log: &Handle,
        engine: &Engine,
        request: Message,
    ) {
        let (cancel, cancelled) = watch::channel(false);
        running.insert(request.task_id.clone(), cancel);
        let (log, engine, options) = (log.clone(), engine.clone(), self.options.clone());
        drivers.spawn(async move {
            let task_id = request.task_id.clone();
            drive(log, engine, options, request, cancelled).await;
            task_id
        });
    }
}

/// Removes the LLM agents spawned for sessions that are over (their removal at the session's end
/// was cut short: the daemon stopped, the registry refused): a spawned agent's card names its
/// session, and a session is under way while its task is open.
async fn remove_leftovers(engine: &Engine) {
    let open: HashSet<String> =
        engine.open_tasks_of(RUNNER).iter().filter_map(|t| engine.task(t)).map(|t| t.run_id).collect();
    let leftovers: Vec<String> = engine
        .with_agents(|a| {
            let session = a.card.meta.get("session_id").and_then(Value::as_str);
            let spawned = a.card.meta.contains_key("llm") && session.is_some_and(|s| !open.contains(s));
            spawned.then(|| a.card.agent_id.clone())
        })
        .into_iter()
        .flatten()
        .collect();
    for agent in leftovers {
        match engine.unregister(&agent).await {
            Ok(_) => tracing::info!(agent_id = %agent, "removed an agent spawned for a session that is over"),
            Err(e) => {
                tracing::warn!(agent_id = %agent, error = %e, "cannot remove an agent spawned for a session that is over")
            }
        }
    }
}

/// What the runner announces of a position (`GET /v1/positions`).
pub fn summary(s: &Skill) -> Value {
    json!({
        "name": s.name, "title": s.title, "pattern": s.pattern.as_str(), "description": s.description,
        "overview": s.overview,
        "roles": s.agents.iter().map(|r| json!({"name": r.name, "personality": r.personality, "responsibilities": r.responsibilities})).collect::<Vec<_>>(),
        "workflow": s.workflow.iter().map(|p| json!({"phase": p.name, "description": p.description})).collect::<Vec<_>>(),
        "protocol": s.protocol.iter().map(|k| json!({"type": k.name, "description": k.description})).collect::<Vec<_>>(),
        "source": s.source,
    })
}

/// How a turn ended.
#[derive(Debug, Clone)]
enum Outcome {
    Done { text: String, payload: Map<String, Value> },
    Failed { code: String, message: String },
}

impl Outcome {
    fn of(message: &Message) -> Option<Outcome> {
        let p = &message.payload;
        let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
        match message.kind {
            MessageType::TaskResult => Some(Outcome::Done {
                text: ["text", "summary", "answer", "result"]
                    .iter()
                    .find_map(|k| text(k))
                    .unwrap_or_else(|| Value::Object(p.clone()).to_string()),
                payload: p.clone(),
            }),
            MessageType::TaskError | MessageType::TaskTimeout | MessageType::TaskCancel => Some(Outcome::Failed {
                code: text("code").unwrap_or_else(|| message.kind.as_str().to_uppercase().replace('.', "_")),
                message: text("message").or_else(|| text("reason")).unwrap_or_default(),
            }),
            _ => None,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Outcome::Done { text, .. } => Some(text),
            Outcome::Failed { .. } => None,
        }
    }

    /// The answer as the value `schema` describes, validated: the turn's `structured` result (an
    /// LLM agent's `answer` tool), else its text when it is that JSON, else what `bare` reads in a
    /// text that is nothing but one answer (a person typing `CONSENSUS`, `VOTE 2`). Prose around a
    /// word is never read.
    fn read(&self, schema: &Value, bare: fn(&str) -> Option<Value>) -> Read {
        let Outcome::Done { text, payload } = self else { return Read::Missing { timed_out: false } };
        let given = payload
            .get("structured")
            .cloned()
            .or_else(|| crate::work::json_in(text).filter(Value::is_object))
            .or_else(|| bare(text));
        let Some(value) = given else {
            let why = payload.get("structured_error").and_then(Value::as_str).map_or_else(
                || "it is prose, not the JSON asked for".to_owned(),
                |e| format!("it did not fit the schema ({e})"),
            );
            return Read::Unreadable(why);
        };
        match crate::work::fits(schema, &value) {
            Ok(()) => Read::Given(value),
            Err(why) => Read::Unreadable(format!("it did not fit the schema ({why})")),
        }
    }
}

/// A structured answer, as read.
#[derive(Debug, Clone)]
enum Read {
    Given(Value),
    /// An answer came that does not parse or fit, and why.
    Unreadable(String),
    /// No answer: the turn failed, or (`timed_out`) was not waited for any longer.
    Missing {
        timed_out: bool,
    },
}

/// What a mirror's comparison answers (its turns' `output_schema`).
fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "verdict": {
                "enum": ["CONSENSUS", "DISCREPANCY"],
                "description": "CONSENSUS only if the analyses agree on every material point",
            },
            "points": {
                "type": "array", "items": {"type": "string"},
                "description": "the material points compared, each saying whether the analyses agree on it",
            },
        },
        "required": ["verdict", "points"],
        "additionalProperties": false,
    })
}

/// A text that is only a verdict word (`CONSENSUS`, `discrepancy.`).
fn bare_verdict(text: &str) -> Option<Value> {
    let word = text.trim().trim_end_matches(['.', '!']).to_ascii_uppercase();
    ["CONSENSUS", "DISCREPANCY"].contains(&word.as_str()).then(|| json!({"verdict": word, "points": []}))
}

/// What a circle's vote answers: one of `n` proposals by its number.
fn vote_schema(n: usize) -> Value {
    json!({
        "type": "object",
        "properties": {"vote": {"type": "integer", "minimum": 1, "maximum": n, "description": "the proposal's number"}},
        "required": ["vote"],
        "additionalProperties": false,
    })
}

/// A text that is only a vote: `2`, `#2`, `VOTE 2`.
fn bare_vote(text: &str) -> Option<Value> {
    let text = text.trim().trim_end_matches('.');
    let rest = match text.get(..4) {
        Some(head) if head.eq_ignore_ascii_case("vote") => &text[4..],
        _ => text,
    };
    let n: u64 = rest.trim().trim_start_matches('#').parse().ok()?;
    Some(json!({"vote": n}))
}

/// Why a session stopped early.
enum Stop {
    Cancelled(String),
    TimedOut,
    Failed(String, String),
    /// The daemon is stopping: the session is left as it is, to go on after the restart exactly as
    /// after a crash (nothing is written, no turn cancelled, no member removed).
    Shutdown,
}

/// Where a session's driver writes and what it reads: the daemon's log, live; or, to re-execute a
/// recorded session, the recording (see [`reexecute`]).
enum World {
    Live { log: Handle, engine: Engine, sub: Box<Subscription> },
    Replay(Replay),
}

/// A recorded session as its re-executed driver sees it: the run's events still to read, in order,
/// and what the driver writes compared with what the runner wrote then.
struct Replay {
    /// The run's events not read yet.
    queue: std::collections::VecDeque<Message>,
    /// What the runner wrote then, by key.
    recorded: HashMap<String, Message>,
    /// Keys the driver has written now, in order.
    written: Vec<String>,
    differences: Vec<String>,
}

/// One session's world: the log it writes to and reads back, and what it has read.
struct Ctx {
    world: World,
    options: Arc<Options>,
    skill: Skill,
    invoke: Invoke,
    session: String,
    thread: String,
    root: String,
    requester: String,
    /// Members in role order: (agent id, role).
    members: Vec<Member>,
    /// Agents it spawned (removed at the end).
    spawned: Vec<String>,
    keys: HashSet<String>,
    turns: HashMap<String, String>,
    /// The member each turn's task was given to.
    turn_agents: HashMap<String, String>,
    outcomes: HashMap<String, Outcome>,
    /// Records written by this run of the driver: the `n`th is keyed `record:n`.
    records: u32,
    /// The session's task was cancelled or timed out (seen in its run).
    root_ended: bool,
    cancelled: watch::Receiver<bool>,
    deadline: tokio::time::Instant,
    step: Option<String>,
    /// The round under way (a circle's).
    round: Option<u32>,
    failed: Vec<String>,
    /// What each role produced, for partial results.
    produced: BTreeMap<String, Value>,
}

async fn drive(log: Handle, engine: Engine, options: Arc<Options>, request: Message, cancelled: watch::Receiver<bool>) {
    let task = request.task_id.clone();
    let invoke: Result<Invoke, String> =
        serde_json::from_value(Value::Object(request.payload.clone())).map_err(|e| format!("the invocation: {e}"));
    let skill = invoke.as_ref().ok().and_then(|i| options.catalog.get(&i.position).cloned());
    let (invoke, skill) = match (invoke, skill) {
        (Ok(i), Some(s)) => (i, s),
        (Ok(i), None) => {
            let known: Vec<&str> = options.catalog.list().map(|s| s.name.as_str()).collect();
            let why =
                format!("no position `{}` (known: {})", clutch_proto::error::quote(&i.position), known.join(", "));
            return refuse(&log, &request, "POSITION_NOT_FOUND", &why).await;
        }
        (Err(why), _) => return refuse(&log, &request, "VALIDATION_FAILED", &why).await,
    };
    // What was written before (a restart), then everything after, live.
    let filter = Filter { run_id: Some(request.run_id.clone()), ..Filter::default() };
    let mut before = Vec::new();
    let mut after = 0;
    loop {
        match log.read(&filter, after, 1000).await {
            Ok(page) if page.is_empty() => break,
            Ok(page) => {
                after = page.last().map_or(after, |e| e.seq);
                before.extend(page.iter().filter_map(|e| e.message().ok()));
            }
            Err(e) => return tracing::warn!(task_id = %task, error = %e, "cannot read a session's run"),
        }
    }
    let sub = match log.subscribe(filter, Some(after)).await {
        Ok(s) => s,
        Err(e) => return tracing::warn!(task_id = %task, error = %e, "cannot follow a session's run"),
    };
    let mut ctx =
        Ctx::new(World::Live { log, engine, sub: Box::new(sub) }, options, skill, invoke, &request, cancelled);
    for m in &before {
        ctx.absorb(m);
    }
    let outcome = ctx.run().await;
    ctx.finish(outcome).await;
}

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
    let mut out = Vec::new();
    let roots = events.iter().filter(|m| {
        m.kind == MessageType::TaskRequest && m.to.iter().any(|r| r.agent_id == RUNNER) && m.from.agent_id != RUNNER
    });
    for request in roots {
        let mut replayed = Replayed {
            session_id: request.run_id.clone(),
            task_id: request.task_id.clone(),
            position: request.payload.get("position").and_then(Value::as_str).unwrap_or_default().to_owned(),
            compared: 0,
            differences: Vec::new(),
        };
        let invoke: Option<Invoke> = serde_json::from_value(Value::Object(request.payload.clone())).ok();
        let Some((invoke, skill)) = invoke.and_then(|i| options.catalog.get(&i.position).cloned().map(|s| (i, s)))
        else {
            replayed.differences.push(format!("position `{}` is not in the catalog", replayed.position));
            out.push(replayed);
            continue;
        };
        let ours: Vec<Message> = events.iter().filter(|m| m.run_id == request.run_id).cloned().collect();
        let mut recorded = HashMap::new();
        for m in ours
            .iter()
            .filter(|m| m.from.agent_id == RUNNER || m.payload_type.as_deref() == Some(session::MESSAGE_PAYLOAD))
        {
            if let Some(key) = m.meta.get(SESSION_KEY).and_then(Value::as_str) {
                recorded.entry(key.to_owned()).or_insert_with(|| m.clone());
            }
        }
        // The limits the daemon ran it with, as its records say; spawned agents are not spawned
        // again (their turns' outcomes are recorded), so any provider name does.
        let mut options = options.clone();
        options.provider.get_or_insert_with(|| "recorded".to_owned());
        if let Some(limits) = ours
            .iter()
            .filter(|m| m.payload_type.as_deref() == Some(RECORD_PAYLOAD))
            .find_map(|m| m.payload.get("limits").and_then(|l| serde_json::from_value::<Limits>(l.clone()).ok()))
        {
            options.limits = limits;
        }
        // The events from the invocation on; the driver writes what follows it.
        let start = ours.iter().position(|m| m.task_id == request.task_id && m.kind == MessageType::TaskRequest);
        let queue = ours.into_iter().skip(start.map_or(0, |i| i + 1)).collect();
        let world = World::Replay(Replay { queue, recorded, written: Vec::new(), differences: Vec::new() });
        // Never cancelled from outside: a cancel comes as the recorded event it was.
        let (_keep, cancelled) = watch::channel(false);
        let mut ctx = Ctx::new(world, Arc::new(options), skill, invoke, request, cancelled);
        let outcome = ctx.run().await;
        ctx.finish(outcome).await;
        if let World::Replay(r) = ctx.world {
            replayed.compared = r.written.len();
            replayed.differences = r.differences;
            let mut unwritten: Vec<&String> =
                r.recorded.keys().filter(|k| !r.written.contains(k) && k.as_str() != "accept").collect();
            unwritten.sort();
            for key in unwritten {
                replayed.differences.push(format!("the runner wrote `{key}` then; re-executed, it does not"));
            }
        }
        out.push(replayed);
    }
    out
}

/// Answers an invocation the runner cannot run with a `task.error`.
async fn refuse(log: &Handle, request: &Message, code: &str, why: &str) {
    let mut m = Message::new(
        MessageType::TaskError,
        RUNNER,
        (&request.run_id, &request.thread_id, &request.task_id),
        json!({"code": code, "message": why, "retryable": false}).as_object().cloned().unwrap_or_default(),
    );
    m.to = vec![Recipient { agent_id: request.from.agent_id.clone() }];
    m.idempotency_key = Some(format!("positions:{}:refused", request.task_id));
    if let Err(e) = log.append_one(m).await {
        tracing::warn!(task_id = %request.task_id, error = %e, "cannot refuse an invocation");
    }
}

impl Ctx {
    fn new(
        world: World,
        options: Arc<Options>,
        skill: Skill,
        invoke: Invoke,
        request: &Message,
        cancelled: watch::Receiver<bool>,
    ) -> Ctx {
        Ctx {
            world,
            deadline: tokio::time::Instant::now() + options.session_timeout,
            options,
            skill,
            invoke,
            session: request.run_id.clone(),
            thread: request.thread_id.clone(),
            root: request.task_id.clone(),
            requester: request.from.agent_id.clone(),
            members: Vec::new(),
            spawned: Vec::new(),
            keys: HashSet::new(),
            turns: HashMap::new(),
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

    /// The next event of the session's run, absorbed; its seq (0 in a replay). `None` when `until`
    /// came first: in a replay, when the recording's next event is one the runner wrote that the
    /// driver has not yet (then it stopped waiting), or when the recording ends.
    async fn next_event(&mut self, until: Option<tokio::time::Instant>) -> Result<Option<u64>, String> {
        let sub = match &mut self.world {
            World::Live { sub, .. } => sub,
            World::Replay(r) => {
                let moved_on = r.queue.front().is_none_or(|m| {
                    m.from.agent_id == RUNNER
                        && m.meta
                            .get(SESSION_KEY)
                            .and_then(Value::as_str)
                            .is_some_and(|k| !r.written.iter().any(|w| w == k))
                });
                if moved_on {
                    return Ok(None);
                }
                let m = r.queue.pop_front().expect("checked above");
                self.absorb(&m);
                return Ok(Some(0));
            }
        };
        let next = async {
            match until {
                Some(t) => tokio::time::timeout_at(t, sub.next()).await.ok(),
                None => Some(sub.next().await),
            }
        };
        let Some(event) = next.await else { return Ok(None) };
        let event = event.map_err(|e| format!("the session's stream ended: {e:?}"))?;
        if let Ok(m) = event.message() {
            self.absorb(&m);
        }
        Ok(Some(event.seq))
    }

    fn absorb(&mut self, m: &Message) {
        if let Some(key) = m.meta.get(SESSION_KEY).and_then(Value::as_str)
            && m.from.agent_id == RUNNER
        {
            self.keys.insert(key.to_owned());
            if m.kind == MessageType::TaskRequest {
                self.turns.insert(key.to_owned(), m.task_id.clone());
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
    /// replay, compares it with what the runner wrote then under `key` instead.
    async fn write(&mut self, key: String, mut m: Message) -> Result<String, Stop> {
        if let World::Replay(r) = &mut self.world {
            let task = r.compare(&key, &m);
            r.written.push(key.clone());
            self.keys.insert(key.clone());
            if m.kind == MessageType::TaskRequest {
                if let Some(to) = m.to.first() {
                    self.turn_agents.insert(task.clone(), to.agent_id.clone());
                }
                self.turns.insert(key, task.clone());
            }
            return Ok(task);
        }
        if let Some(task) = self.turns.get(&key) {
            return Ok(task.clone());
        }
        if self.keys.contains(&key) {
            return Ok(m.task_id);
        }
        m.meta.insert(SESSION_KEY.into(), Value::from(key.clone()));
        m.idempotency_key = Some(format!("positions:{}:{key}", self.session));
        let task = m.task_id.clone();
        let kind = m.kind;
        let to = m.to.first().map(|r| r.agent_id.clone());
        let World::Live { log, .. } = &self.world else { unreachable!("a replay compared it above") };
        match log.append_one(m).await {
            Ok(_) => {
                self.keys.insert(key.clone());
                if kind == MessageType::TaskRequest {
                    if let Some(to) = to {
                        self.turn_agents.insert(task.clone(), to);
                    }
                    self.turns.insert(key, task.clone());
                }
                Ok(task)
            }
            Err(e) if e.code() == clutch_proto::ErrorCode::InvalidTransition && self.is_cancelled() => {
                Err(Stop::Cancelled(self.requester.clone()))
            }
            Err(_) if self.shutting_down() => Err(Stop::Shutdown),
            Err(e) => Err(Stop::Failed("SESSION_WRITE_FAILED".into(), format!("could not write to the log: {e}"))),
        }
    }

    /// The daemon has begun stopping (its streams end, its log soon refuses appends).
    fn shutting_down(&self) -> bool {
        matches!(&self.world, World::Live { log, .. } if log.is_closing())
    }

    fn is_cancelled(&self) -> bool {
        self.root_ended || *self.cancelled.borrow()
    }

    fn message(
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

    /// Records the session's phase (and step).
    async fn record(&mut self, phase: Phase, note: Option<String>, detail: Option<Value>) -> Result<(), Stop> {
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
            limits: (!self.members.is_empty()).then_some(self.options.limits),
            failed: self.failed.clone(),
            note,
            detail,
        };
        let kind =
            if phase.is_final() && self.is_cancelled() { MessageType::ChatSystem } else { MessageType::TaskProgress };
        let payload = clutch_core::payload::object(&record);
        let mut m = self.message(kind, RUNNER, &self.root.clone(), vec![self.requester.clone()], payload);
        m.payload_type = Some(RECORD_PAYLOAD.into());
        self.write(format!("record:{n}"), m).await.map(|_| ())
    }

    async fn step(&mut self, step: &str) -> Result<(), Stop> {
        self.step = Some(step.to_owned());
        self.record(Phase::Running, None, None).await
    }

    /// A session message from member `from` (the runner writes what a turn produced on its behalf).
    async fn say(&mut self, key: &str, from: &str, to: Vec<String>, kind: &str, content: Value) -> Result<(), Stop> {
        if to.is_empty() || !self.skill.protocol.iter().any(|k| k.name == kind) {
            return Ok(());
        }
        let said = session::Said { kind: kind.to_owned(), content };
        let mut m =
            self.message(MessageType::ChatMessage, from, &self.root.clone(), to, clutch_core::payload::object(&said));
        m.payload_type = Some(session::MESSAGE_PAYLOAD.into());
        match self.write(format!("say:{key}"), m).await {
            // A bus rule (a cap, a rate) refusing the runner's copy does not stop the session.
            Err(Stop::Failed(..)) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Gives member `agent` (playing `role`) a turn: a task, child of the session's.
    async fn turn(&mut self, key: &str, agent: &str, role: &str, goal: String, extra: Value) -> Result<String, Stop> {
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

    /// Waits for the outcomes of `tasks`, until `until` (then the missing ones are `None`).
    async fn wait(
        &mut self,
        tasks: &[String],
        until: Option<tokio::time::Instant>,
    ) -> Result<Vec<Option<Outcome>>, Stop> {
        loop {
            if tasks.iter().all(|t| self.outcomes.contains_key(t)) {
                break;
            }
            if self.is_cancelled() {
                return Err(Stop::Cancelled(self.requester.clone()));
            }
            let until = until.map_or(self.deadline, |u| u.min(self.deadline));
            let mut cancelled = self.cancelled.clone();
            tokio::select! {
                next = self.next_event(Some(until)) => match next {
                    Ok(Some(_)) => {}
                    Ok(None) if until == self.deadline => return Err(Stop::TimedOut),
                    Ok(None) => break,
                    Err(_) if self.shutting_down() => return Err(Stop::Shutdown),
                    Err(e) => return Err(Stop::Failed("SESSION_READ_FAILED".into(), e)),
                },
                _ = cancelled.changed() => return Err(Stop::Cancelled(self.requester.clone())),
            }
        }
        Ok(tasks.iter().map(|t| self.outcomes.get(t).cloned()).collect())
    }

    /// Announces that `agent` failed its turn to the others.
    async fn announce_failure(&mut self, agent: &str, outcome: &Outcome) -> Result<(), Stop> {
        if self.failed.iter().any(|a| a == agent) {
            return Ok(());
        }
        self.failed.push(agent.to_owned());
        let why = match outcome {
            Outcome::Failed { code, message } => format!("{code}: {message}"),
            Outcome::Done { .. } => String::new(),
        };
        let note = format!("{agent} failed its turn ({why}); the others go on without it");
        let others: Vec<String> = self.members.iter().map(|m| m.agent_id.clone()).filter(|a| a != agent).collect();
        let warning =
            session::Warning { code: "AGENT_FAILED".into(), agent_id: agent.to_owned(), message: note.clone() };
        let mut m = self.message(
            MessageType::ChatSystem,
            RUNNER,
            &self.root.clone(),
            others,
            clutch_core::payload::object(&warning),
        );
        m.payload_type = Some(session::WARNING_PAYLOAD.into());
        let _ = self.write(format!("failed:{agent}"), m).await;
        self.record(Phase::Running, Some(note), None).await
    }

    /// Cancels turns still open (a forced synthesis, a stop).
    async fn cancel_open(&mut self, tasks: &[String]) {
        for task in tasks.iter().filter(|t| !self.outcomes.contains_key(*t)).cloned().collect::<Vec<_>>() {
            let agent = self.member_of_turn(&task);
            let payload = json!({"reason": "the session no longer waits for this turn"});
            let m = self.message(
                MessageType::TaskCancel,
                RUNNER,
                &task,
                agent.into_iter().collect(),
                payload.as_object().cloned().unwrap_or_default(),
            );
            let _ = self.write(format!("cancel:{task}"), m).await;
        }
    }

    fn member_of_turn(&self, task: &str) -> Option<String> {
        self.turn_agents.get(task).cloned()
    }

    async fn run(&mut self) -> Result<Value, Stop> {
        let accept =
            self.message(MessageType::TaskAccept, RUNNER, &self.root.clone(), vec![self.requester.clone()], Map::new());
        self.write("accept".into(), accept).await?;
        self.record(Phase::Initializing, None, None).await?;
        self.record(Phase::SpawningAgents, None, None).await?;
        let (members, cast) = self.cast().await?;
        self.members = members;
        self.record(Phase::Running, None, (!cast.is_empty()).then(|| json!({"cast": cast}))).await?;
        match self.skill.pattern {
            Pattern::Solo => self.solo().await,
            Pattern::Mirror => self.mirror().await,
            Pattern::Relay => self.relay().await,
            Pattern::Pyramid => self.pyramid().await,
            Pattern::Swarm => self.swarm().await,
            Pattern::Circle => self.circle().await,
        }
    }

    /// Who plays each role: the agents (or people) the invocation names, the agents the router
    /// picks for the capabilities it names (with why, for the record), and LLM agents spawned for the
    /// rest.
    async fn cast(&mut self) -> Result<(Vec<Member>, Vec<Value>), Stop> {
        let named: HashMap<String, String> =
            self.invoke.invocation.agents.iter().map(|(r, a)| (r.to_lowercase(), a.clone())).collect();
        for role in named.keys() {
            if !self.skill.agents.iter().any(|r| r.name.to_lowercase() == *role) {
                let roles: Vec<&str> = self.skill.agents.iter().map(|r| r.name.as_str()).collect();
                return Err(Stop::Failed(
                    "VALIDATION_FAILED".into(),
                    format!("position {} has no role `{role}` (its roles: {})", self.skill.name, roles.join(", ")),
                ));
            }
        }
        let mut members = Vec::new();
        let mut missing = Vec::new();
        let mut cast = Vec::new();
        // Named agents are not picked again for a capability.
        let mut taken: Vec<String> = named
            .values()
            .flat_map(|a| a.split(',').map(str::trim).map(str::to_owned))
            .filter(|a| a.starts_with("agent:") || a.starts_with("user:"))
            .collect();
        for (i, role) in self.skill.agents.iter().enumerate() {
            let count = if self.skill.pattern == Pattern::Swarm && i == 0 {
                self.invoke.invocation.workers.unwrap_or(self.skill.params.workers_or_default()).clamp(1, 32) as usize
            } else {
                1
            };
            match named.get(&role.name.to_lowercase()) {
                Some(agents) => {
                    for agent in agents.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                        let agent_id = if agent.starts_with("agent:") || agent.starts_with("user:") {
                            agent.to_owned()
                        } else {
                            let (picked, why) = self.cast_by(&role.name, agent, &taken)?;
                            cast.push(why);
                            taken.push(picked.clone());
                            picked
                        };
                        members.push(Member { agent_id, role: role.name.clone() });
                    }
                }
                None => {
                    for n in 0..count {
                        missing.push((role.name.clone(), if count > 1 { Some(n + 1) } else { None }));
                    }
                }
            }
        }
        if !missing.is_empty() {
            let Some(provider) = self.options.provider.clone() else {
                let roles: Vec<String> = missing.iter().map(|(r, _)| r.clone()).collect();
                return Err(Stop::Failed(
                    "NO_AGENT_FOR_ROLE".into(),
                    format!(
                        "nobody plays {} and no provider is declared to spawn an LLM agent: name agents (--agents ROLE=agent:ID) or declare a provider",
                        roles.join(", ")
                    ),
                ));
            };
            let suffix = self.session.rsplit('_').next().unwrap_or_default().to_lowercase();
            let suffix = &suffix[suffix.len().saturating_sub(8)..];
            let planned: Vec<Member> = missing
                .iter()
                .map(|(role, n)| {
                    let slug: String =
                        role.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
                    let id = match n {
                        Some(n) => format!("agent:{}-{slug}{n}-{suffix}", self.skill.name),
                        None => format!("agent:{}-{slug}-{suffix}", self.skill.name),
                    };
                    Member { agent_id: id, role: role.clone() }
                })
                .collect();
            let everyone: Vec<Member> = members.iter().cloned().chain(planned.iter().cloned()).collect();
            for member in &planned {
                let facts = SessionFacts {
                    session_id: self.session.clone(),
                    agent_id: member.agent_id.clone(),
                    others: everyone
                        .iter()
                        .filter(|m| m.agent_id != member.agent_id)
                        .map(|m| (m.role.clone(), m.agent_id.clone()))
                        .collect(),
                };
                let system = self.skill.system_prompt(&member.role, &facts).unwrap_or_default();
                let mut llm = json!({"provider": provider, "system": system, "max_turns": 8, "tools": [crate::builtin::SESSIONS]});
                if let Some(model) = &self.options.model {
                    llm["model"] = json!(model);
                }
                let card = json!({
                    "v": "clutch/0.1", "agent_id": member.agent_id,
                    "display": {"name": format!("{} ({})", member.role, self.skill.name)},
                    "capabilities": [{"id": format!("skill:role-{}", member.role.to_lowercase().replace(' ', "-")), "version": "1.0.0", "tags": ["llm", "position"]}],
                    "limits": {"max_concurrency": 4},
                    "meta": {"llm": llm, "session_id": self.session},
                });
                let card = clutch_proto::validate::agent_card(&card)
                    .map_err(|p| Stop::Failed("SPAWN_FAILED".into(), format!("an agent's card: {p}")))?;
                if let World::Live { engine, .. } = &self.world
                    && engine.agent(&member.agent_id).is_none()
                    && let Err(e) = engine.register(&card).await
                {
                    if self.shutting_down() {
                        return Err(Stop::Shutdown);
                    }
                    return Err(Stop::Failed("SPAWN_FAILED".into(), format!("cannot spawn {}: {e}", member.agent_id)));
                }
                self.spawned.push(member.agent_id.clone());
            }
            members = everyone;
            // Keep role order: the pattern reads roles in the SKILL.md's order.
            let order: Vec<String> = self.skill.agents.iter().map(|r| r.name.clone()).collect();
            members.sort_by_key(|m| order.iter().position(|r| *r == m.role));
        }
        Ok((members, cast))
    }

    /// The agent that plays `role` for capability `capability`: the router's pick now (live), or
    /// the one the recording's records say it picked (a replay). Answers it, and the cast's record.
    fn cast_by(&self, role: &str, capability: &str, taken: &[String]) -> Result<(String, Value), Stop> {
        let nobody = |why: String| Stop::Failed("NO_AGENT_FOR_ROLE".into(), format!("nobody can play {role}: {why}"));
        match &self.world {
            World::Live { engine, .. } => {
                let d = engine.pick(&[capability.to_owned()], taken).map_err(|e| nobody(e.to_string()))?;
                let why = json!({"role": role, "requires": capability, "agent": d.selected, "reason": d.reason, "candidates": d.candidates});
                Ok((d.selected, why))
            }
            World::Replay(r) => r
                .recorded
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
                .ok_or_else(|| nobody(format!("the recording casts nobody for {capability}"))),
        }
    }

    fn role_members(&self, index: usize) -> Vec<Member> {
        let Some(role) = self.skill.agents.get(index) else { return Vec::new() };
        self.members.iter().filter(|m| m.role == role.name).cloned().collect()
    }

    fn input_text(&self) -> String {
        match &self.invoke.invocation.input {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        }
    }

    /// Turns of several members at once; the failed ones announced. Answers (member, outcome) of
    /// those that finished.
    async fn round(
        &mut self,
        key: &str,
        turns: Vec<(Member, String, Value)>,
        until: Option<tokio::time::Instant>,
    ) -> Result<Vec<(Member, Option<Outcome>)>, Stop> {
        let mut tasks = Vec::new();
        for (member, goal, extra) in &turns {
            let k = format!("{key}:{}", member.agent_id);
            tasks.push(self.turn(&k, &member.agent_id, &member.role, goal.clone(), extra.clone()).await?);
        }
        let outcomes = self.wait(&tasks, until).await?;
        if outcomes.iter().any(Option::is_none) {
            self.cancel_open(&tasks).await;
        }
        let mut answers = Vec::new();
        for ((member, _, _), outcome) in turns.into_iter().zip(outcomes) {
            if let Some(o @ Outcome::Failed { .. }) = &outcome {
                self.announce_failure(&member.agent_id, o).await?;
            }
            answers.push((member, outcome));
        }
        Ok(answers)
    }

    /// A [`Ctx::round`] of turns that ask for a structured answer (`schema` as their extra's
    /// `output_schema`), read: each unreadable answer is asked for once more (a turn keyed
    /// `{key}-again`, by `until` too), and stays unreadable if the second is no better, or does not
    /// come.
    async fn structured(
        &mut self,
        key: &str,
        asked: Vec<(Member, String, Value)>,
        (schema, bare): (&Value, fn(&str) -> Option<Value>),
        until: Option<tokio::time::Instant>,
    ) -> Result<Vec<(Member, Read)>, Stop> {
        let answers = self.round(key, asked.clone(), until).await?;
        let mut reads: Vec<(Member, Read)> = answers
            .into_iter()
            .map(|(m, o)| {
                let read = o.as_ref().map_or(Read::Missing { timed_out: true }, |o| o.read(schema, bare));
                (m, read)
            })
            .collect();
        let again: Vec<(Member, String, Value)> = reads
            .iter()
            .filter_map(|(m, read)| {
                let Read::Unreadable(why) = read else { return None };
                let (_, goal, extra) = asked.iter().find(|(x, _, _)| x.agent_id == m.agent_id)?;
                let goal = format!(
                    "{goal}\n\nYour last answer could not be read: {why}. Answer with the JSON only, \
                     matching this schema:\n{}",
                    schema
                );
                Some((m.clone(), goal, extra.clone()))
            })
            .collect();
        if again.is_empty() {
            return Ok(reads);
        }
        for (m, o) in self.round(&format!("{key}-again"), again, until).await? {
            let Some(o) = o else { continue };
            if let (Some(slot), read @ Read::Given(_)) =
                (reads.iter_mut().find(|(x, _)| x.agent_id == m.agent_id), o.read(schema, bare))
            {
                slot.1 = read;
            }
        }
        Ok(reads)
    }

    fn all_failed(&self, answers: &[(Member, Option<Outcome>)]) -> bool {
        !answers.is_empty() && answers.iter().all(|(_, o)| !matches!(o, Some(Outcome::Done { .. })))
    }

    async fn solo(&mut self) -> Result<Value, Stop> {
        let Some(member) = self.role_members(0).into_iter().next() else { return Err(no_members()) };
        self.step(&self.first_phase()).await?;
        let goal = format!("Think this through and answer:\n\n{}", self.input_text());
        let answers = self.round("solo", vec![(member.clone(), goal, Value::Null)], None).await?;
        let text = answers[0].1.as_ref().and_then(|o| o.text().map(str::to_owned));
        let Some(text) = text else { return Err(all_failed()) };
        self.produced.insert(member.role.clone(), json!(text));
        self.say(
            "results",
            &member.agent_id,
            vec![self.requester_if_member()].into_iter().flatten().collect(),
            "RESULTS",
            json!(text),
        )
        .await?;
        Ok(json!({"text": text}))
    }

    fn requester_if_member(&self) -> Option<String> {
        self.members.iter().find(|m| m.agent_id == self.requester).map(|m| m.agent_id.clone())
    }

    fn first_phase(&self) -> String {
        self.skill.workflow.first().map(|p| p.name.clone()).unwrap_or_else(|| "WORK".into())
    }

    /// The position's workflow phase named `name`, or its `i`th, or `name` itself.
    fn phase_named(&self, name: &str, i: usize) -> String {
        self.skill
            .workflow
            .iter()
            .find(|p| p.name == name)
            .or_else(|| self.skill.workflow.get(i))
            .map(|p| p.name.clone())
            .unwrap_or_else(|| name.to_owned())
    }

    async fn mirror(&mut self) -> Result<Value, Stop> {
        let members: Vec<Member> = (0..2).flat_map(|i| self.role_members(i)).collect();
        if members.len() < 2 {
            return Err(no_members());
        }
        self.step(&self.phase_named("ANALYSIS", 1)).await?;
        let input = self.input_text();
        let turns = members
            .iter()
            .map(|m| (m.clone(), format!("Analyse this independently, as {}; your partner does the same without seeing your work:\n\n{input}", m.role), Value::Null))
            .collect();
        let analyses = self.round("analysis", turns, None).await?;
        if self.all_failed(&analyses) {
            return Err(all_failed());
        }
        for (m, o) in &analyses {
            if let Some(text) = o.as_ref().and_then(|o| o.text()) {
                self.produced.insert(m.role.clone(), json!(text));
            }
        }
        let done: Vec<(Member, String)> = analyses
            .iter()
            .filter_map(|(m, o)| o.as_ref().and_then(|o| o.text()).map(|t| (m.clone(), t.to_owned())))
            .collect();
        if done.len() < 2 {
            let (m, text) = done[0].clone();
            self.say(
                "escalate",
                &m.agent_id,
                vec![RUNNER.into()],
                "ESCALATE",
                json!("my partner failed: this analysis is unverified"),
            )
            .await?;
            return Ok(
                json!({"verdict": "ESCALATE", "escalated": true, "text": text, "note": "only one analysis: unverified"}),
            );
        }
        self.step(&self.phase_named("EXCHANGE", 2)).await?;
        let (a, b) = (done[0].clone(), done[1].clone());
        self.say("results:a", &a.0.agent_id, vec![b.0.agent_id.clone()], "RESULTS", json!(a.1)).await?;
        self.say("results:b", &b.0.agent_id, vec![a.0.agent_id.clone()], "RESULTS", json!(b.1)).await?;
        self.step(&self.phase_named("COMPARISON", 3)).await?;
        let schema = verdict_schema();
        let ask = |mine: &str, theirs: &str| {
            format!(
                "Compare your analysis with your partner's. Give your verdict as JSON: {{\"verdict\": \"CONSENSUS\" or \"DISCREPANCY\", \"points\": [...]}}, CONSENSUS only if they agree on every material point; `points` lists the material points, each saying whether you agree.\n\nYour analysis:\n{mine}\n\nYour partner's analysis:\n{theirs}"
            )
        };
        let extra = json!({"output_schema": schema});
        let turns = vec![(a.0.clone(), ask(&a.1, &b.1), extra.clone()), (b.0.clone(), ask(&b.1, &a.1), extra)];
        let until = tokio::time::Instant::now() + self.options.consensus_timeout;
        let reads = self.structured("comparison", turns, (&schema, bare_verdict), Some(until)).await?;
        let mut verdicts = BTreeMap::new();
        let mut unreadable = BTreeMap::new();
        let mut forced = false;
        for (m, read) in reads {
            // An answer that cannot be read counts as a discrepancy: never as agreement.
            let (verdict, content) = match read {
                Read::Given(v) => (v["verdict"].as_str().unwrap_or("DISCREPANCY").to_owned(), v),
                Read::Unreadable(why) => {
                    let content = json!({"verdict": "DISCREPANCY", "points": [], "unreadable": why});
                    unreadable.insert(m.role.clone(), why);
                    ("DISCREPANCY".to_owned(), content)
                }
                Read::Missing { timed_out } => {
                    forced |= timed_out;
                    continue;
                }
            };
            let to: Vec<String> =
                members.iter().filter(|x| x.agent_id != m.agent_id).map(|x| x.agent_id.clone()).collect();
            self.say(&format!("verdict:{}", m.agent_id), &m.agent_id, to, &verdict, content).await?;
            verdicts.insert(m.role.clone(), verdict);
        }
        self.step(&self.phase_named("SYNTHESIS", 4)).await?;
        // Both must say CONSENSUS: a comparison that never came is no agreement either.
        let consensus = verdicts.len() == 2 && verdicts.values().all(|v| v == "CONSENSUS");
        let note = forced.then(|| "consensus timeout: synthesis forced with the comparisons at hand".to_owned());
        let mut detail = json!({"comparison": verdicts});
        if !unreadable.is_empty() {
            detail["unreadable"] = json!(unreadable);
        }
        self.record(Phase::Running, note.clone(), Some(detail)).await?;
        if consensus {
            return Ok(
                json!({"verdict": "CONSENSUS", "text": a.1, "analyses": {a.0.role.clone(): a.1, b.0.role.clone(): b.1}, "comparison": verdicts, "forced": forced}),
            );
        }
        let all: Vec<String> = members.iter().map(|m| m.agent_id.clone()).filter(|x| *x != b.0.agent_id).collect();
        self.say("escalate", &b.0.agent_id, all, "ESCALATE", json!("the analyses disagree: a person should decide"))
            .await?;
        Ok(json!({
            "verdict": "DISCREPANCY", "escalated": true,
            "text": format!("The analyses disagree.\n\n{}:\n{}\n\n{}:\n{}", a.0.role, a.1, b.0.role, b.1),
            "analyses": {a.0.role.clone(): a.1, b.0.role.clone(): b.1}, "comparison": verdicts, "forced": forced,
        }))
    }

    async fn relay(&mut self) -> Result<Value, Stop> {
        let chain: Vec<Member> =
            (0..self.skill.agents.len()).filter_map(|i| self.role_members(i).into_iter().next()).collect();
        let mut carried = self.input_text();
        for (i, member) in chain.iter().enumerate() {
            self.step(&self.phase_named("", i)).await?;
            let goal = if i == 0 {
                format!(
                    "You start the relay as {}. Work on this, then your output goes to {}:\n\n{carried}",
                    member.role,
                    chain.get(1).map_or("the requester", |m| m.role.as_str())
                )
            } else {
                format!(
                    "You are {} in a relay. {} handed you this; continue from it:\n\n{carried}",
                    member.role,
                    chain[i - 1].role
                )
            };
            let answers = self.round(&format!("leg{i}"), vec![(member.clone(), goal, Value::Null)], None).await?;
            let Some(text) = answers[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
                return Err(Stop::Failed(
                    "RELAY_BROKEN".into(),
                    format!("{} failed: the relay cannot go on", member.role),
                ));
            };
            self.produced.insert(member.role.clone(), json!(text));
            if let Some(next) = chain.get(i + 1) {
                self.say(&format!("handoff{i}"), &member.agent_id, vec![next.agent_id.clone()], "HANDOFF", json!(text))
                    .await?;
            }
            carried = text;
        }
        Ok(json!({"text": carried, "legs": self.produced}))
    }

    async fn pyramid(&mut self) -> Result<Value, Stop> {
        let Some(lead) = self.role_members(0).into_iter().next() else { return Err(no_members()) };
        let workers: Vec<Member> = (1..self.skill.agents.len()).flat_map(|i| self.role_members(i)).collect();
        if workers.is_empty() {
            return Err(no_members());
        }
        self.step(&self.phase_named("DECOMPOSITION", 0)).await?;
        let goal = format!(
            "You lead a team of {} workers. Split this into at most {} independent subtasks, one per line, each line starting with \"- \":\n\n{}",
            workers.len(),
            workers.len() * 2,
            self.input_text()
        );
        let plan = self.round("plan", vec![(lead.clone(), goal, Value::Null)], None).await?;
        let Some(plan) = plan[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
            return Err(Stop::Failed("LEAD_FAILED".into(), format!("{} failed to decompose the work", lead.role)));
        };
        let mut subtasks: Vec<String> = plan
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                l.strip_prefix("- ").or_else(|| l.strip_prefix("* ")).or_else(|| {
                    let digits = l.find(|c: char| !c.is_ascii_digit())?;
                    (digits > 0).then(|| l[digits..].strip_prefix(". ")).flatten()
                })
            })
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .take(workers.len() * 2)
            .collect();
        if subtasks.is_empty() {
            subtasks.push(self.input_text());
        }
        self.step(&self.phase_named("EXECUTION", 1)).await?;
        let mut turns = Vec::new();
        for (i, sub) in subtasks.iter().enumerate() {
            let w = workers[i % workers.len()].clone();
            self.say(&format!("subtask{i}"), &lead.agent_id, vec![w.agent_id.clone()], "SUBTASK", json!(sub)).await?;
            turns.push((w, format!("Your lead gave you this subtask:\n\n{sub}"), json!({"subtask": i})));
        }
        // A worker with two subtasks gets two turns: keys by subtask, not by agent.
        let mut results = Vec::new();
        let mut tasks = Vec::new();
        for (i, (w, goal, extra)) in turns.iter().enumerate() {
            tasks.push(self.turn(&format!("sub{i}"), &w.agent_id, &w.role, goal.clone(), extra.clone()).await?);
        }
        let outcomes = self.wait(&tasks, None).await?;
        for (i, ((w, _, _), o)) in turns.iter().zip(outcomes).enumerate() {
            match o.as_ref().and_then(|o| o.text().map(str::to_owned)) {
                Some(text) => {
                    self.say(&format!("result{i}"), &w.agent_id, vec![lead.agent_id.clone()], "RESULTS", json!(text))
                        .await?;
                    results.push((subtasks[i].clone(), text));
                }
                None => {
                    if let Some(o) = &o {
                        self.announce_failure(&w.agent_id, o).await?;
                    }
                }
            }
        }
        if results.is_empty() {
            return Err(all_failed());
        }
        self.produced.insert(
            "subtasks".into(),
            json!(results.iter().map(|(s, r)| json!({"subtask": s, "result": r})).collect::<Vec<_>>()),
        );
        self.step(&self.phase_named("SYNTHESIS", 2)).await?;
        let mut goal = String::from("Your workers report. Synthesise one answer from their results:\n");
        for (s, r) in &results {
            goal.push_str(&format!("\n## {s}\n{r}\n"));
        }
        let answer = self.round("synthesis", vec![(lead.clone(), goal, Value::Null)], None).await?;
        let Some(text) = answer[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
            return Err(Stop::Failed("LEAD_FAILED".into(), format!("{} failed to synthesise", lead.role)));
        };
        Ok(json!({"text": text, "subtasks": self.produced.get("subtasks").cloned().unwrap_or_default()}))
    }

    async fn swarm(&mut self) -> Result<Value, Stop> {
        let scouts = self.role_members(0);
        if scouts.is_empty() {
            return Err(no_members());
        }
        let aggregator = self.role_members(1).into_iter().next();
        let parts = partition(&self.invoke.invocation.input, scouts.len());
        self.step(&self.phase_named("SCATTER", 0)).await?;
        let turns: Vec<(Member, String, Value)> = parts
            .iter()
            .zip(&scouts)
            .map(|(part, s)| {
                (
                    s.clone(),
                    format!("You are one of {} {}s; work on your share of the input:\n\n{part}", scouts.len(), s.role),
                    Value::Null,
                )
            })
            .collect();
        let answers = self.round("scatter", turns, None).await?;
        if self.all_failed(&answers) {
            return Err(all_failed());
        }
        let mut results = Vec::new();
        for (i, (m, o)) in answers.iter().enumerate() {
            if let Some(text) = o.as_ref().and_then(|o| o.text()) {
                if let Some(agg) = &aggregator {
                    self.say(&format!("result{i}"), &m.agent_id, vec![agg.agent_id.clone()], "RESULTS", json!(text))
                        .await?;
                }
                results.push(json!({"agent": m.agent_id, "part": parts[i], "result": text}));
            }
        }
        self.produced.insert("parts".into(), json!(results));
        let Some(agg) = aggregator else {
            let text = results.iter().filter_map(|r| r["result"].as_str()).collect::<Vec<_>>().join("\n\n");
            return Ok(json!({"text": text, "parts": results}));
        };
        self.step(&self.phase_named("AGGREGATION", 2)).await?;
        let mut goal = String::from("Aggregate the swarm's results into one answer:\n");
        for r in &results {
            goal.push_str(&format!(
                "\n## {}\n{}\n",
                r["part"].as_str().unwrap_or_default(),
                r["result"].as_str().unwrap_or_default()
            ));
        }
        let answer = self.round("aggregate", vec![(agg.clone(), goal, Value::Null)], None).await?;
        let Some(text) = answer[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
            let text = results.iter().filter_map(|r| r["result"].as_str()).collect::<Vec<_>>().join("\n\n");
            return Ok(json!({"text": text, "parts": results, "note": "the aggregator failed: results concatenated"}));
        };
        Ok(json!({"text": text, "parts": results}))
    }

    async fn circle(&mut self) -> Result<Value, Stop> {
        let members: Vec<Member> = (0..self.skill.agents.len()).flat_map(|i| self.role_members(i)).collect();
        if members.len() < 2 {
            return Err(no_members());
        }
        let rounds = self.invoke.invocation.rounds.unwrap_or(self.skill.params.rounds_or_default()).clamp(1, 20);
        let input = self.input_text();
        let mut last: Vec<(String, String)> = Vec::new();
        let mut history = Vec::new();
        for round in 1..=rounds {
            self.round = Some(round);
            self.step(&self.phase_named("PROPOSAL", 0)).await?;
            let earlier = if last.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = last.iter().map(|(who, p)| format!("- {who}: {p}")).collect();
                format!("\n\nLast round's proposals (none won a quorum):\n{}", list.join("\n"))
            };
            let turns = members
                .iter()
                .map(|m| {
                    (
                        m.clone(),
                        format!("Round {round} of {rounds}. Propose an answer to:\n\n{input}{earlier}"),
                        json!({"round": round}),
                    )
                })
                .collect();
            let proposed = self.round(&format!("propose{round}"), turns, None).await?;
            if self.all_failed(&proposed) {
                return Err(all_failed());
            }
            let proposals: Vec<(Member, String)> = proposed
                .iter()
                .filter_map(|(m, o)| o.as_ref().and_then(|o| o.text()).map(|t| (m.clone(), t.to_owned())))
                .collect();
            for (m, p) in &proposals {
                let to: Vec<String> =
                    members.iter().filter(|x| x.agent_id != m.agent_id).map(|x| x.agent_id.clone()).collect();
                self.say(&format!("proposal{round}:{}", m.agent_id), &m.agent_id, to, "PROPOSAL", json!(p)).await?;
            }
            self.step(&self.phase_named("VOTE", 1)).await?;
            let ballot: Vec<String> =
                proposals.iter().enumerate().map(|(i, (m, p))| format!("{}. ({}) {p}", i + 1, m.role)).collect();
            let voters: Vec<Member> = proposals.iter().map(|(m, _)| m.clone()).collect();
            let schema = vote_schema(proposals.len());
            let turns: Vec<(Member, String, Value)> = voters
                .iter()
                .map(|m| {
                    (
                        m.clone(),
                        format!(
                            "Vote for the best proposal other than your own. Answer with JSON: {{\"vote\": n}}, n its number.\n\n{}",
                            ballot.join("\n")
                        ),
                        json!({"round": round, "output_schema": schema}),
                    )
                })
                .collect();
            let until = tokio::time::Instant::now() + self.options.consensus_timeout;
            let votes = self.structured(&format!("vote{round}"), turns, (&schema, bare_vote), Some(until)).await?;
            let mut tally = vec![0u32; proposals.len()];
            let mut cast = BTreeMap::new();
            let mut abstained = BTreeMap::new();
            for (m, read) in &votes {
                let n = match read {
                    Read::Given(v) => v["vote"].as_u64().unwrap_or(0) as usize,
                    // An unreadable vote is an abstention: recorded, never counted.
                    Read::Unreadable(why) => {
                        abstained.insert(m.role.clone(), why.clone());
                        continue;
                    }
                    Read::Missing { .. } => continue,
                };
                let Some((proposer, _)) = n.checked_sub(1).and_then(|i| proposals.get(i)) else { continue };
                // A vote for one's own proposal is recorded, not counted.
                if proposer.agent_id != m.agent_id {
                    tally[n - 1] += 1;
                }
                cast.insert(m.role.clone(), n);
                let to: Vec<String> =
                    members.iter().filter(|x| x.agent_id != m.agent_id).map(|x| x.agent_id.clone()).collect();
                self.say(&format!("vote{round}:{}", m.agent_id), &m.agent_id, to, "VOTE", json!({"proposal": n}))
                    .await?;
            }
            let winner = self.skill.params.winner(&tally, voters.len() as u32);
            let mut detail = json!({"round": round, "proposals": ballot, "votes": cast, "tally": tally, "winner": winner.map(|w| w + 1)});
            if !abstained.is_empty() {
                detail["abstained"] = json!(abstained);
            }
            history.push(detail.clone());
            self.record(Phase::Running, None, Some(detail)).await?;
            if let Some(w) = winner {
                let (m, text) = proposals[w].clone();
                let to: Vec<String> = members.iter().map(|x| x.agent_id.clone()).filter(|x| *x != m.agent_id).collect();
                self.say(&format!("consensus{round}"), &m.agent_id, to, "CONSENSUS", json!(text)).await?;
                return Ok(json!({"verdict": "CONSENSUS", "text": text, "round": round, "rounds": history}));
            }
            last = proposals.iter().map(|(m, p)| (m.role.clone(), p.clone())).collect();
        }
        let text = last.first().map(|(_, p)| p.clone()).unwrap_or_default();
        Ok(json!({"verdict": "NO_QUORUM", "escalated": true, "text": text, "rounds": history}))
    }

    /// Ends the session: its final record and its task's outcome; spawned agents removed.
    async fn finish(&mut self, outcome: Result<Value, Stop>) {
        if matches!(outcome, Err(Stop::Shutdown)) || self.shutting_down() {
            tracing::info!(session_id = %self.session, "the daemon is stopping: the session goes on after the restart");
            return;
        }
        let partial = json!(self.produced);
        match outcome {
            Ok(mut result) => {
                let _ = self.record(Phase::Completing, None, None).await;
                let _ = self.record(Phase::Completed, None, None).await;
                if let Some(r) = result.as_object_mut() {
                    r.insert("session_id".into(), json!(self.session));
                    r.insert("position".into(), json!(self.skill.name));
                    r.insert("pattern".into(), json!(self.skill.pattern.as_str()));
                }
                let payload = result.as_object().cloned().unwrap_or_default();
                let m = self.message(
                    MessageType::TaskResult,
                    RUNNER,
                    &self.root.clone(),
                    vec![self.requester.clone()],
                    payload,
                );
                let _ = self.write("result".into(), m).await;
            }
            Err(Stop::Cancelled(by)) => {
                let note = format!("cancelled by {by}; partial results kept");
                let _ =
                    self.record(Phase::Error, Some(note), Some(json!({"cancelled": true, "partial": partial}))).await;
            }
            Err(stop) => {
                let (phase, code, why) = match stop {
                    Stop::TimedOut => (
                        Phase::Timeout,
                        "SESSION_TIMEOUT".to_owned(),
                        format!("the session took longer than {:?}", self.options.session_timeout),
                    ),
                    Stop::Failed(code, why) => (Phase::Error, code, why),
                    Stop::Cancelled(_) | Stop::Shutdown => unreachable!(),
                };
                let _ = self.record(phase, Some(why.clone()), Some(json!({"partial": partial}))).await;
                let payload =
                    json!({"code": code, "message": why, "retryable": false, "details": {"partial": partial}});
                let m = self.message(
                    MessageType::TaskError,
                    RUNNER,
                    &self.root.clone(),
                    vec![self.requester.clone()],
                    payload.as_object().cloned().unwrap_or_default(),
                );
                let _ = self.write("error".into(), m).await;
            }
        }
        let open: Vec<String> = self.turns.values().cloned().collect();
        self.cancel_open(&open).await;
        let spawned = std::mem::take(&mut self.spawned);
        if let World::Live { engine, .. } = &self.world {
            for agent in spawned {
                if let Err(e) = engine.unregister(&agent).await {
                    tracing::debug!(agent_id = %agent, error = %e, "a spawned agent was already gone");
                }
            }
        }
    }
}

fn no_members() -> Stop {
    Stop::Failed("NO_AGENT_FOR_ROLE".into(), "the position's roles have no agents".into())
}

fn all_failed() -> Stop {
    Stop::Failed("ALL_AGENTS_FAILED".into(), "every agent of the session failed its turn".into())
}

/// The input cut into at most `n` parts: an array by items, text by lines (contiguous groups).
fn partition(input: &Value, n: usize) -> Vec<String> {
    let items: Vec<String> = match input {
        Value::Array(items) => items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect(),
        Value::String(s) => s.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect(),
        Value::Null => Vec::new(),
        other => vec![other.to_string()],
    };
    if items.is_empty() {
        return vec![String::new()];
    }
    let n = n.min(items.len()).max(1);
    let per = items.len().div_ceil(n);
    items.chunks(per).map(|c| c.join("\n")).collect()
}

impl Replay {
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
