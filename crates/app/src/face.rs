//! Faces as the app sees them: what each adds to the daemon (routes, work in the background) over
//! the running core. A new face is its own crate and a `Face` here; the daemon names it with one
//! `.face(...)` line.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use clutch_core::Running;
use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

/// One way into the daemon over the core.
pub trait Face: Send {
    /// Names the face in errors and logs.
    fn name(&self) -> &'static str;

    /// Routes to merge into the daemon's router; their paths must not clash with another face's.
    fn routes(&self, _core: &Running) -> Result<Router, Error> {
        Ok(Router::new())
    }

    /// Routes served without the daemon's token check: the face checks its callers itself (the A2A
    /// card is public; its endpoint takes A2A's own credentials).
    fn open_routes(&self, _core: &Running) -> Result<Router, Error> {
        Ok(Router::new())
    }

    /// Work that runs until `stop` resolves, which happens once HTTP has drained and before the core
    /// stops.
    fn background(&self, _core: &Running, _stop: Stop) -> Option<BoxFuture<'static, ()>> {
        None
    }
}

/// Why a face could not make its routes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The face's reason, in words.
    #[error("{0}")]
    Refused(String),
}

/// Resolves when the daemon stops its faces' background work (or drops the way to ask).
pub struct Stop(oneshot::Receiver<()>);

impl Stop {
    pub(crate) fn new(stopped: oneshot::Receiver<()>) -> Stop {
        Stop(stopped)
    }
}

impl Future for Stop {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// The MCP endpoints (`/mcp`, `/mcp/worker`).
pub struct Mcp(pub clutch_mcp::Options);

impl Face for Mcp {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn routes(&self, core: &Running) -> Result<Router, Error> {
        Ok(clutch_mcp::router(core.engine.clone(), &self.0))
    }
}

/// The A2A face (`/.well-known/agent-card.json`, `/a2a`): the hub as one A2A agent whose skills are
/// its agents' capabilities; each A2A message a task the router gives to one of them.
#[derive(Default)]
pub struct A2a(pub clutch_a2a::Options);

impl Face for A2a {
    fn name(&self) -> &'static str {
        "a2a"
    }

    /// `POST /v1/a2a/send`, part of the hub's own API.
    fn routes(&self, core: &Running) -> Result<Router, Error> {
        Ok(clutch_a2a::api_router(core.log.clone(), core.engine.clone(), &self.0))
    }

    /// The card is public and the endpoint checks A2A credentials (API keys, bearer tokens) itself.
    fn open_routes(&self, core: &Running) -> Result<Router, Error> {
        Ok(clutch_a2a::router(core.log.clone(), core.engine.clone(), &self.0))
    }

    /// Remote A2A agents (the tasks given to them sent there and followed) and A2A clients' push
    /// notifications.
    fn background(&self, core: &Running, stop: Stop) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(clutch_a2a::run(core.log.clone(), core.engine.clone(), self.0.clone(), stop)))
    }
}

/// Push delivery over HTTP (`clutch_core::push` with the gateway's transport): the inboxes of agents
/// with an `endpoints.clutch.url` POSTed there, each worker's position saved when it stops.
pub struct Push(pub clutch_core::push::Options);

impl Face for Push {
    fn name(&self) -> &'static str {
        "push"
    }

    fn background(&self, core: &Running, stop: Stop) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(clutch_gateway::push::run(core.log.clone(), core.engine.clone(), self.0.clone(), stop)))
    }
}

/// Built-in LLM agents (`clutch_runtime`): each declared agent registers its card, heartbeats and
/// works the tasks the router gives it, calling its provider; its tool calls go through the log.
pub struct Runtime(std::sync::Mutex<Option<clutch_runtime::Runtime>>);

impl Runtime {
    pub fn new(runtime: clutch_runtime::Runtime) -> Runtime {
        Runtime(std::sync::Mutex::new(Some(runtime)))
    }
}

impl Face for Runtime {
    fn name(&self) -> &'static str {
        "runtime"
    }

    fn background(&self, core: &Running, stop: Stop) -> Option<BoxFuture<'static, ()>> {
        let runtime = self.0.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        // Before any client can register: a card whose LLM section it could not run is refused.
        core.engine.adapters().add_card_check(runtime.card_check());
        Some(Box::pin(runtime.run(core.log.clone(), core.engine.clone(), stop)))
    }
}

/// Positions (`clutch_runtime::positions`): the runner, `agent:positions`, which takes each
/// invocation, casts the position's roles (spawning built-in LLM agents for the roles nobody was
/// named for) and drives its pattern in a session recorded in the log.
#[derive(Default)]
pub struct Positions(pub clutch_runtime::positions::Options);

impl Face for Positions {
    fn name(&self) -> &'static str {
        "positions"
    }

    fn background(&self, core: &Running, stop: Stop) -> Option<BoxFuture<'static, ()>> {
        let runner = clutch_runtime::positions::Runner::new(self.0.clone());
        Some(Box::pin(runner.run(core.log.clone(), core.engine.clone(), stop)))
    }
}

/// Tools that really run and webhooks (`clutch_tools`): the MCP servers the operator declares,
/// their tools served as `mcp:<server>/<tool>`, and core's dispatcher carrying out the `tool.call`s
/// that name them (each start and answer recorded in the log); the inbound hooks (`hook` adapter,
/// reached by `POST /v1/hooks/{name}`); and the outbound webhooks, pushed by core's delivery. The
/// servers stop after the dispatcher, which lets calls under way finish for a moment first.
#[derive(Default)]
pub struct Tools {
    pub servers: Vec<clutch_tools::ServerConfig>,
    pub hooks: Vec<clutch_tools::HookConfig>,
    pub webhooks: Vec<clutch_tools::WebhookConfig>,
    pub dispatch: clutch_core::dispatch::Options,
}

impl Face for Tools {
    fn name(&self) -> &'static str {
        "tools"
    }

    fn background(&self, core: &Running, stop: Stop) -> Option<BoxFuture<'static, ()>> {
        // Servers over HTTP are reached as any URL from outside is: through the outbound guard.
        let guard = core.engine.options().outbound.clone();
        let servers = clutch_tools::Servers::start(self.servers.clone(), guard.clone());
        core.engine.adapters().add(std::sync::Arc::new(servers.clone()));
        if !self.hooks.is_empty() {
            core.engine.adapters().add(std::sync::Arc::new(clutch_tools::Hooks::new(self.hooks.clone())));
        }
        let webhooks = self.webhooks.clone();
        let (log, engine) = (core.log.clone(), core.engine.clone());
        let dispatch = self.dispatch.clone();
        // Before any client can append: calls (and webhook messages) from here on are this daemon's.
        let first = core.engine.seq();
        Some(Box::pin(async move {
            let (stop_push, push_stopped) = oneshot::channel::<()>();
            let stopped = async move {
                let _ = push_stopped.await;
            };
            let push = tokio::spawn(clutch_tools::hooks::send(log.clone(), guard, webhooks, first, stopped));
            clutch_core::dispatch::run(log, engine, dispatch, first, stop).await;
            let _ = stop_push.send(());
            let _ = push.await;
            servers.stop();
        }))
    }
}
