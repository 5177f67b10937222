//! The positions runner (`agent:positions`): it announces the catalog, takes each invocation (a
//! `task.request` to it) and starts one session's driver per invocation, live, in the log; it takes
//! up the sessions under way after a restart, and is itself restarted by the core supervisor when
//! it fails.
//!
//! The runner is not a registered agent, so a fresh daemon's log stays empty: it announces the catalog to
//! the engine. At its start it removes the agents spawned for sessions that are over
//! (`remove_leftovers`).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use clutch_core::session::RUNNER;
use clutch_core::supervise::{self, Exit, Restart};
use clutch_core::{Engine, Handle};
use clutch_proto::message::Recipient;
use clutch_proto::{ErrorCode, Message, MessageType};
use clutch_store::Filter;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::course;
use super::error::Error;
use super::invoke::Invoke;
use super::live::Live;
use super::options::Options;
use super::session::{Session, Settings};
use crate::skill::Skill;

/// The positions runner.
pub struct Runner {
    options: Arc<Options>,
}

/// The sessions under way: their drivers, and how to cancel each (by its invocation's task).
#[derive(Default)]
struct Drivers {
    set: JoinSet<String>,
    running: HashMap<String, watch::Sender<bool>>,
}

impl Runner {
    pub fn new(options: Options) -> Runner {
        Runner { options: Arc::new(options) }
    }

    /// Registers, takes up the sessions under way, then starts one driver per invocation; started
    /// again after a failure until `stop`.
    pub async fn run(self, log: Handle, engine: Engine, stop: impl Future<Output = ()>) {
        let this = &self;
        let (log, engine) = (&log, &engine);
        // An inbox that ended because the daemon is stopping is no failure: nothing to restart.
        let attempt = || async move { Exit::after(this.serve(log, engine).await, log.is_closing()) };
        supervise::run("positions", Restart::default(), stop, attempt)
            .instrument(tracing::info_span!("positions", agent_id = RUNNER))
            .await
    }

    async fn serve(&self, log: &Handle, engine: &Engine) -> Result<(), Error> {
        // Not a registered agent (a fresh daemon's log stays empty): the catalog is announced to the
        // engine, and invocations are tasks given to RUNNER by name.
        engine.set_positions(self.options.catalog.list().map(summary).collect());
        remove_leftovers(engine).await;
        let from = engine.seq();
        let mut inbox = log
            .subscribe(Filter { to: Some(RUNNER.into()), ..Filter::default() }, Some(from))
            .await
            .map_err(Error::Inbox)?;
        let mut drivers = Drivers::default();
        for task_id in engine.open_tasks_of(RUNNER) {
            let filter =
                Filter { task_id: Some(task_id.clone()), kind: Some(MessageType::TaskRequest), ..Filter::default() };
            if let Some(request) = log.read(&filter, 0, 1).await.ok().and_then(|e| e.into_iter().next())
                && let Ok(request) = request.message()
            {
                self.start(&mut drivers, log, engine, request);
            }
        }
        loop {
            tokio::select! {
                next = inbox.next() => {
                    let event = next.map_err(Error::InboxEnded)?;
                    let Ok(message) = event.message() else { continue };
                    match message.kind {
                        MessageType::TaskRequest if !drivers.running.contains_key(&message.task_id) => {
                            self.start(&mut drivers, log, engine, message);
                        }
                        MessageType::TaskCancel => {
                            if let Some(cancel) = drivers.running.get(&message.task_id) {
                                let _ = cancel.send(true);
                            }
                        }
                        _ => {}
                    }
                }
                Some(done) = drivers.set.join_next(), if !drivers.set.is_empty() => {
                    match done {
                        Ok(task_id) => { drivers.running.remove(&task_id); }
                        Err(e) if !e.is_cancelled() => tracing::error!(error = %e, "a session's driver failed"),
                        Err(_) => {}
                    }
                }
            }
        }
    }

    fn start(&self, drivers: &mut Drivers, log: &Handle, engine: &Engine, request: Message) {
        let (cancel, cancelled) = watch::channel(false);
        drivers.running.insert(request.task_id.clone(), cancel);
        let (log, engine, options) = (log.clone(), engine.clone(), self.options.clone());
        let span = tracing::info_span!("session", session_id = %request.run_id, task_id = %request.task_id);
        drivers.set.spawn(
            async move {
                let task_id = request.task_id.clone();
                drive(log, engine, options, request, cancelled).await;
                task_id
            }
            .instrument(span),
        );
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

/// Drives the session `request` invokes, live: what was written of it before (a restart) read
/// back, then its run followed.
async fn drive(log: Handle, engine: Engine, options: Arc<Options>, request: Message, cancelled: watch::Receiver<bool>) {
    let task = request.task_id.clone();
    let invoke: Result<Invoke, Error> =
        serde_json::from_value(Value::Object(request.payload.clone())).map_err(Error::Invocation);
    let skill = invoke.as_ref().ok().and_then(|i| options.catalog.get(&i.position).cloned());
    let (invoke, skill) = match (invoke, skill) {
        (Ok(i), Some(s)) => (i, s),
        (Ok(i), None) => {
            let known: Vec<&str> = options.catalog.list().map(|s| s.name.as_str()).collect();
            let why =
                format!("no position `{}` (known: {})", clutch_proto::error::quote(&i.position), known.join(", "));
            return refuse(&log, &request, ErrorCode::PositionNotFound, &why).await;
        }
        (Err(why), _) => return refuse(&log, &request, ErrorCode::ValidationFailed, &why.to_string()).await,
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
    let world = Live::new(log, engine, sub);
    let mut s = Session::new(world, Settings::from(&*options), skill, invoke, &request, cancelled);
    for m in &before {
        s.absorb(m);
    }
    course::run(&mut s).await;
}

/// Answers an invocation the runner cannot run with a `task.error`.
async fn refuse(log: &Handle, request: &Message, code: ErrorCode, why: &str) {
    let mut m = Message::new(
        MessageType::TaskError,
        RUNNER,
        (&request.run_id, &request.thread_id, &request.task_id),
        json!({"code": code.as_str(), "message": why, "retryable": false}).as_object().cloned().unwrap_or_default(),
    );
    m.to = vec![Recipient { agent_id: request.from.agent_id.clone() }];
    m.idempotency_key = Some(format!("positions:{}:refused", request.task_id));
    if let Err(e) = log.append_one(m).await {
        tracing::warn!(task_id = %request.task_id, error = %e, "cannot refuse an invocation");
    }
}
