//! The A2A face of the daemon: the hub is one A2A agent. Its Agent Card (`/.well-known/agent-card.json`,
//! in the version the request names, 1.0 by default; `/.well-known/agent.json`, 0.3's) lists the
//! registered agents' capabilities as skills; its JSON-RPC endpoint (`POST /a2a`) takes A2A 1.0
//! (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`) and their 0.3
//! names by the `A2A-Version` header. Every A2A message becomes a `task.request` the router gives to
//! an agent with the skill it names, so each exchange is Clutch events in the log; A2A tasks are
//! read back from the engine and the log.
//!
//! The hub is an A2A client too (`remote`): an agent whose card names `endpoints.a2a.url` is a
//! remote A2A agent (another Clutch hub, say); the tasks the router gives it are sent there and
//! followed, their news written back as the agent's own events.

pub mod auth;
mod card;
pub mod conformance;
mod hub;
mod methods;
mod push;
pub mod remote;
mod rest;
mod send;
mod server;
mod stream;
mod task;
pub mod wire;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use clutch_core::{Engine, Handle};

/// How the face works.
#[derive(Debug, Clone)]
pub struct Options {
    /// The hub's address as clients reach it (`https://hub.example.com`), for the card; by default
    /// each request's `Host`, over http.
    pub public_url: Option<String>,
    /// How long a blocking `SendMessage` waits for its task to end before answering it as it is.
    pub blocking_wait: Duration,
    /// How often a task given to a remote A2A agent is read while it works there.
    pub remote_poll: Duration,
    /// Delivery to remote A2A agents: retries and backoff (core's push delivery).
    pub push: clutch_core::push::Options,
    /// Partners' API keys, each scoped to skills.
    pub keys: Vec<auth::Key>,
    /// What happens to callers with no key and no token.
    pub unauthenticated: auth::Unauthenticated,
    /// Run the conformance agent (`conformance`), which works every task given to it as the A2A
    /// TCK expects: for a hub kept for the kit, never beside real agents. Off by default.
    pub conformance: bool,
    /// The card a request that names no A2A version gets at `/.well-known/agent-card.json`: the 1.0
    /// card (the default), or the 0.3 card for a hub whose clients are 0.3 SDKs, which read that path
    /// and send no version. Either way `A2A-Version` gets the card of its version, and
    /// `/.well-known/agent.json` the 0.3 card.
    pub unversioned_card: wire::Version,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            public_url: None,
            blocking_wait: Duration::from_secs(120),
            remote_poll: Duration::from_millis(500),
            push: clutch_core::push::Options::default(),
            keys: Vec::new(),
            unauthenticated: auth::Unauthenticated::default(),
            conformance: false,
            unversioned_card: wire::Version::V10,
        }
    }
}

/// The face's public routes: the card at both well-known paths, and the JSON-RPC and HTTP+JSON
/// endpoints, which check A2A's own credentials.
pub fn router(log: Handle, engine: Engine, options: &Options) -> Router {
    server::router(log, engine, options.clone())
}

/// The face's routes of the hub's own API, behind its token check: `POST /v1/a2a/send`, a message
/// to any A2A agent by its endpoint's URL, through the hub.
pub fn api_router(log: Handle, engine: Engine, options: &Options) -> Router {
    server::api_router(log, engine, options.clone())
}

/// The face's background work until `stop` resolves: delivery to remote A2A agents
/// ([`run_remotes`]), A2A clients' push notifications (the webhooks they named for their tasks), and,
/// with `options.conformance`, the conformance agent.
pub async fn run(log: Handle, engine: Engine, options: Options, stop: impl Future<Output = ()>) {
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let until = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let hub = hub::Hub { log: log.clone(), engine: engine.clone(), options: Arc::new(options.clone()) };
    let conformance =
        options.conformance.then(|| conformance::run(log.clone(), engine.clone(), until(stopped.clone())));
    let conformance = async move {
        if let Some(agent) = conformance {
            agent.await;
        }
    };
    tokio::join!(
        run_remotes(log, engine, options, until(stopped.clone())),
        push::run(hub, until(stopped)),
        conformance,
        async {
            stop.await;
            let _ = stopping.send(true);
        }
    );
}

/// Delivers the inboxes of remote A2A agents (cards naming `endpoints.a2a.url`) until `stop`
/// resolves, first following again the tasks they were working when the daemon stopped.
pub async fn run_remotes(log: Handle, engine: Engine, options: Options, stop: impl Future<Output = ()>) {
    let remote = match remote::Remote::new(log.clone(), engine.clone(), options.remote_poll) {
        Ok(r) => r,
        Err(e) => return tracing::error!(error = %e, "delivery to remote A2A agents cannot start its HTTP client"),
    };
    remote.resume().await;
    let (stopped, stopping) = tokio::sync::watch::channel(false);
    let alive = tokio::spawn(remote.clone().keep_alive(stopping));
    let transport = Arc::new(remote::Transported(remote.clone()));
    clutch_core::push::run(log, engine, transport, options.push, stop).await;
    let _ = stopped.send(true);
    let _ = alive.await;
    remote.stop();
}
