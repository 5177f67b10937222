//! Runtime agents are Clutch agents: each registers its AgentCard, heartbeats, reads its inbox like
//! any agent, and works the tasks the router gives it (`work`), at most `max_concurrency` at once.
//! A `task.cancel` stops a task's loop and the call it is making. On start, the tasks it had
//! accepted and not ended are taken up again from the log.
//!
//! An agent's card carries the rest of its config (`meta.llm`), so the card alone says how it works
//! (`Config::from_card`). A card registered later with `meta.llm` (`POST /v1/agents`, `clutch agents
//! create`, MCP `agent_register` with `llm`) is an agent too: the runtime reads the registry on each
//! `agent.register` event and every `WATCH_EVERY` (`Engine::with_agents`), starts such agents and stops
//! removed ones. Its card check ([`Runtime::card_check`], added to the engine's `adapter::Registry` by
//! its face) refuses a section it could not run (`VALIDATION_FAILED` at `payload.meta.llm`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clutch_core::supervise::{self, Exit, Restart};
use clutch_core::{Engine, Handle};
use clutch_proto::card::AgentCard;
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::{AbortHandle, JoinSet};
use tracing::Instrument;

use crate::provider::{self, Provider};
use crate::work;

// An agent's declaration is the leaf `spec`, which the loop (`work`) reads too; its public home is
// here, where the agents that run it are.
pub use crate::spec::{Budget, Config, Invalid, Section};

/// Why the runtime cannot start, or why an agent stopped (and starts again).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("llm_agents: provider {0}")]
    InvalidProvider(#[from] provider::Invalid),
    #[error("llm_agents: {0}")]
    InvalidAgent(#[from] Invalid),
    #[error("llm_agents: two agents are named {0:?}")]
    Twice(String),
    #[error("llm_agents: {agent}: provider {provider:?} is not declared: add a [[providers]] entry with that name")]
    Undeclared { agent: String, provider: String },
    #[error("providers: {0}")]
    Provider(#[from] provider::Error),
    #[error("cannot register: {0}")]
    Register(clutch_core::Error),
    #[error("cannot go online: {0}")]
    Online(clutch_core::Error),
    #[error("cannot read its inbox: {0}")]
    Inbox(clutch_core::Error),
    #[error("its inbox ended: {0:?}")]
    InboxEnded(clutch_core::End),
}

/// The providers and agents the operator declared, checked and ready to run; agents registered
/// later with a LLM section in their card (`POST /v1/agents`) are run too.
pub struct Runtime {
    /// Every declared provider: ready, or why not (its key's variable is not set).
    providers: HashMap<String, Result<Arc<Provider>, provider::Error>>,
    agents: Vec<Config>,
}

/// How often the registry is read for agents to start (registered with a LLM section) or to
/// stop (removed).
const WATCH_EVERY: Duration = Duration::from_secs(1);

impl Runtime {
    /// Reads each provider's key now: a variable that is not set is an error naming it when a
    /// declared agent uses the provider (otherwise a card naming it is refused, with the same words).
    /// Every agent must name a declared provider.
    pub fn new(providers: Vec<provider::Config>, agents: Vec<Config>) -> Result<Runtime, Error> {
        Self::with_env(providers, agents, |name| std::env::var(name).ok())
    }

    /// As `new`, reading variables with `env` (tests).
    pub fn with_env(
        providers: Vec<provider::Config>,
        agents: Vec<Config>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Runtime, Error> {
        let mut by_name = HashMap::new();
        for config in providers {
            config.check()?;
            let name = config.name.clone();
            by_name.insert(name, Provider::with_env(config, &env).map(Arc::new));
        }
        let mut names = HashSet::new();
        for agent in &agents {
            agent.check()?;
            if !names.insert(agent.name.clone()) {
                return Err(Error::Twice(agent.name.clone()));
            }
            match by_name.get(&agent.provider) {
                None => {
                    return Err(Error::Undeclared { agent: agent.name.clone(), provider: agent.provider.clone() });
                }
                Some(Err(e)) => return Err(Error::Provider(e.clone())),
                Some(Ok(_)) => {}
            }
        }
        Ok(Runtime { providers: by_name, agents })
    }

    /// The check every card passes before it is registered: a LLM section must read, describe
    /// a valid agent and name a provider that is ready.
    pub fn card_check(&self) -> clutch_core::adapter::CardCheck {
        let providers: HashMap<String, Option<String>> = self
            .providers
            .iter()
            .map(|(name, p)| (name.clone(), p.as_ref().err().map(|e| e.message.clone())))
            .collect();
        Arc::new(move |card: &AgentCard| {
            let refuse = |field: &str, why: String| {
                Err(clutch_core::Refusal::new(clutch_proto::ErrorCode::ValidationFailed, why)
                    .field(format!("payload.meta.llm{field}")))
            };
            let Some(config) = Config::from_card(card) else { return Ok(()) };
            let config = match config {
                Ok(c) => c,
                Err(why) => return refuse("", why.to_string()),
            };
            if let Err(why) = config.check() {
                return refuse("", format!("meta.llm: {why}"));
            }
            match providers.get(&config.provider) {
                None => {
                    let mut known: Vec<&str> = providers.keys().map(String::as_str).collect();
                    known.sort_unstable();
                    let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
                    refuse(
                        ".provider",
                        format!(
                            "meta.llm.provider: no provider {:?} is declared (the daemon's: {known})",
                            config.provider
                        ),
                    )
                }
                Some(Some(missing)) => {
                    refuse(".provider", format!("meta.llm.provider: {}: {missing}", config.provider))
                }
                Some(None) => Ok(()),
            }
        })
    }

    /// Runs every agent until `stop` resolves: the declared ones, and those the registry shows with a
    /// LLM section; an agent removed from the registry is stopped.
    pub async fn run(self, log: Handle, engine: Engine, stop: impl std::future::Future<Output = ()>) {
        let mut agents = JoinSet::new();
        let mut running: HashMap<String, (AbortHandle, Arc<Agent>)> = HashMap::new();
        for config in self.agents {
            let Some(Ok(provider)) = self.providers.get(&config.provider) else { continue };
            let card = config.card();
            let agent = Agent::new(config, Some(card), provider.clone(), log.clone(), engine.clone());
            let handle = agents.spawn(agent.clone().run());
            running.insert(agent.id.clone(), (handle, agent));
        }
        tokio::pin!(stop);
        // A card registered (an agent created through the API, a position's role) is looked at at
        // once; the tick catches removals and anything missed.
        let mut cards =
            log.subscribe(Filter { kind: Some(MessageType::AgentRegister), ..Filter::default() }, None).await.ok();
        loop {
            tokio::select! {
                () = &mut stop => break,
                () = tokio::time::sleep(WATCH_EVERY) => {}
                next = async { cards.as_mut()?.next().await.ok() }, if cards.is_some() => {
                    if next.is_none() {
                        cards = None;
                    }
                }
                Some(_) = agents.join_next(), if !agents.is_empty() => continue,
            }
            // A few fields of each agent under the engine's lock, a card cloned only to start one.
            let present: HashMap<String, Option<AgentCard>> = engine
                .with_agents(|a| {
                    let id = a.card.agent_id.clone();
                    let start = a.card.meta.contains_key("llm") && !running.contains_key(&id);
                    (id, start.then(|| a.card.clone()))
                })
                .into_iter()
                .collect();
            running.retain(|id, (handle, agent)| {
                // One that ended by itself (its card was removed before it started) is forgotten.
                if handle.is_finished() {
                    return false;
                }
                let removed = !present.contains_key(id) && agent.registered.load(std::sync::atomic::Ordering::Relaxed);
                if removed {
                    tracing::info!(agent_id = %id, "llm agent removed from the registry: stopped");
                    handle.abort();
                }
                !removed
            });
            for card in present.into_values().flatten() {
                let Some(Ok(config)) = Config::from_card(&card) else { continue };
                let Some(Ok(provider)) = self.providers.get(&config.provider) else { continue };
                tracing::info!(agent_id = %card.agent_id, provider = %config.provider, "starting an llm agent registered with an LLM section");
                // Registered already: it goes online, and is never registered again by itself (a
                // card removed meanwhile, a session's member at the session's end, stays removed).
                let agent = Agent::new(config, None, provider.clone(), log.clone(), engine.clone());
                let handle = agents.spawn(agent.clone().run());
                running.insert(agent.id.clone(), (handle, agent));
            }
        }
        agents.shutdown().await;
    }
}

/// Deliveries remembered to ignore repeats (beyond the tasks under way).
const SEEN_MAX: usize = 10_000;

/// The answers to tool calls, handed from the inbox to the task waiting for each.
#[derive(Default)]
pub(crate) struct Answers {
    waiting: HashMap<String, oneshot::Sender<Message>>,
    /// Answers that came before their task waited for them (a fast tool), by call id.
    early: HashMap<String, Message>,
}

impl Answers {
    /// The answer to `call_id`: now if it came, or a way to wait for it.
    pub(crate) fn take_or_wait(&mut self, call_id: &str) -> Result<Message, oneshot::Receiver<Message>> {
        if let Some(m) = self.early.remove(call_id) {
            return Ok(m);
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(call_id.to_owned(), tx);
        Err(rx)
    }

    fn answered(&mut self, call_id: &str, message: Message) {
        match self.waiting.remove(call_id) {
            Some(tx) => {
                let _ = tx.send(message);
            }
            None => {
                // Answers no task waits for (calls of a task since cancelled) must not pile up.
                if self.early.len() >= 1024 {
                    self.early.clear();
                }
                self.early.insert(call_id.to_owned(), message);
            }
        }
    }
}

/// One agent at work.
pub(crate) struct Agent {
    pub config: Config,
    /// The card it registers (a declared agent's, from its config); `None` for an agent started
    /// from the registry, whose card is there already.
    card: Option<AgentCard>,
    pub id: String,
    /// Set once it registered (a removal seen before is an earlier one).
    registered: std::sync::atomic::AtomicBool,
    pub provider: Arc<Provider>,
    pub log: Handle,
    pub engine: Engine,
    answers: Mutex<Answers>,
    slots: Arc<Semaphore>,
    /// The tasks under way, to stop on cancel.
    running: Mutex<HashMap<String, AbortHandle>>,
}

impl Agent {
    fn new(
        config: Config,
        card: Option<AgentCard>,
        provider: Arc<Provider>,
        log: Handle,
        engine: Engine,
    ) -> Arc<Agent> {
        Arc::new(Agent {
            id: config.agent_id(),
            card,
            registered: std::sync::atomic::AtomicBool::new(false),
            slots: Arc::new(Semaphore::new(config.max_concurrency as usize)),
            config,
            provider,
            log,
            engine,
            answers: Mutex::new(Answers::default()),
            running: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn answers(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves until its work is over, started again after a failure. It has no stop of its own: the
    /// runtime aborts it (removed from the registry, or the daemon stopping).
    async fn run(self: Arc<Agent>) {
        let span = tracing::info_span!("llm_agent", agent_id = %self.id);
        supervise::run("llm agent", Restart::default(), std::future::pending(), || {
            let agent = self.clone();
            // An inbox that ended because the daemon is stopping: its tasks stop where they are
            // and are taken up after the restart, as after a crash.
            async move { Exit::after(agent.clone().serve().await, agent.log.is_closing()) }
        })
        .instrument(span)
        .await;
    }

    /// Registers, takes up its unfinished tasks, then follows its inbox.
    async fn serve(self: Arc<Agent>) -> Result<(), Error> {
        let from = match &self.card {
            Some(card) => {
                let registered = self.engine.register(card).await.map_err(Error::Register)?;
                tracing::info!(agent_id = %self.id, provider = %self.provider.config.name, seq = registered.seq, "llm agent registered");
                registered.seq
            }
            None => {
                let from = self.engine.seq();
                if let Err(e) = self.engine.heartbeat(&self.id).await {
                    if e.code() == clutch_proto::ErrorCode::AgentNotFound {
                        tracing::info!(agent_id = %self.id, "llm agent removed from the registry before it started");
                        return Ok(());
                    }
                    return Err(Error::Online(e));
                }
                tracing::info!(agent_id = %self.id, provider = %self.provider.config.name, "llm agent online");
                from
            }
        };
        self.registered.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut inbox = self
            .log
            .subscribe(Filter { to: Some(self.id.clone()), ..Filter::default() }, Some(from))
            .await
            .map_err(Error::Inbox)?;
        let mut tasks = JoinSet::new();
        let heartbeat = tokio::spawn(heartbeats(self.engine.clone(), self.id.clone()));
        let _stop_heartbeats = AbortOnDrop(heartbeat.abort_handle());
        // Tasks it holds from before (the daemon stopped mid-task): taken up where the log says.
        for request in self.unfinished().await {
            self.start(&mut tasks, request, true);
        }
        let mut seen: HashSet<(String, u32)> = HashSet::new();
        loop {
            tokio::select! {
                next = inbox.next() => {
                    let event = next.map_err(Error::InboxEnded)?;
                    let Ok(message) = event.message() else { continue };
                    self.on_message(&mut tasks, &mut seen, message);
                }
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Err(e) = done && !e.is_cancelled() {
                        tracing::error!(agent_id = %self.id, error = %e, "a task's loop failed");
                    }
                }
            }
        }
    }

    fn on_message(self: &Arc<Agent>, tasks: &mut JoinSet<()>, seen: &mut HashSet<(String, u32)>, message: Message) {
        match message.kind {
            // Its inbox holds only what names it: routed to it by the daemon, or sent to it by name
            // (a position's turn).
            MessageType::TaskRequest => {
                // A delivery repeated (its accept was slow) or of a task under way is not worked twice.
                if self.running.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&message.task_id) {
                    return;
                }
                if seen.len() >= SEEN_MAX {
                    seen.clear();
                }
                if seen.insert((message.task_id.clone(), message.attempt)) {
                    self.start(tasks, message, false);
                }
            }
            MessageType::TaskCancel => {
                if let Some(handle) = self.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&message.task_id) {
                    handle.abort();
                    tracing::info!(agent_id = %self.id, task_id = %message.task_id, "task cancelled: its loop stopped");
                }
            }
            MessageType::ToolResult | MessageType::ToolError => {
                if let Some(call_id) = message.payload.get("call_id").and_then(|c| c.as_str()).map(str::to_owned) {
                    self.answers().answered(&call_id, message);
                }
            }
            _ => {}
        }
    }

    fn start(self: &Arc<Agent>, tasks: &mut JoinSet<()>, request: Message, resume: bool) {
        let task_id = request.task_id.clone();
        let (agent, slots, id) = (self.clone(), self.slots.clone(), task_id.clone());
        let handle = tasks.spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else { return };
            work::run(agent.as_ref(), request, resume).await;
            agent.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        });
        self.running.lock().unwrap_or_else(|e| e.into_inner()).insert(task_id, handle);
    }

    /// The requests of the tasks the engine shows routed to this agent and not ended.
    async fn unfinished(&self) -> Vec<Message> {
        let tasks = self.engine.agent(&self.id).map(|a| a.tasks).unwrap_or_default();
        let mut requests = Vec::new();
        for task_id in tasks {
            let filter = Filter {
                task_id: Some(task_id.clone()),
                kind: Some(MessageType::TaskRequest),
                to: Some(self.id.clone()),
                ..Filter::default()
            };
            match self.log.read(&filter, 0, 1000).await {
                Ok(events) => {
                    if let Some(request) = events.iter().rev().filter_map(|e| e.message().ok()).next() {
                        tracing::info!(agent_id = %self.id, task_id = %task_id, "taking up a task it held before the restart");
                        requests.push(request);
                    }
                }
                Err(e) => {
                    tracing::warn!(agent_id = %self.id, task_id = %task_id, error = %e, "cannot read a task it held")
                }
            }
        }
        requests
    }
}

struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Signs of life on the interval the daemon asks for.
async fn heartbeats(engine: Engine, agent_id: String) {
    let mut every = engine.options().heartbeat_interval.max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        match engine.heartbeat(&agent_id).await {
            Ok(h) => every = Duration::from_secs(h.next_heartbeat_sec.max(1)),
            Err(e) => tracing::warn!(agent_id = %agent_id, error = %e, "heartbeat refused"),
        }
    }
}
