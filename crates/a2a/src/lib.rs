//! The A2A face of the daemon: the hub is one A2A agent. Its Agent Card (`/.well-known/agent-card.json`,
//! and `/.well-known/agent.json` for older clients) lists the registered agents' capabilities as
//! skills; its JSON-RPC endpoint (`POST /a2a`) takes A2A 1.0 (`SendMessage`, `SendStreamingMessage`,
//! `GetTask`, `CancelTask`, `SubscribeToTask`) and their 0.3 names by the `A2A-Version` header. Every A2A
//! message becomes a `task.request` the router gives to an agent with the skill it names, so each
//! exchange is Clutch events in the log; A2A tasks are read back from the engine and the log.

mod card;
mod server;
pub mod wire;

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
}

impl Default for Options {
    fn default() -> Options {
        Options { public_url: None, blocking_wait: Duration::from_secs(120) }
    }
}

/// The face's routes: the card at both well-known paths, and the JSON-RPC endpoint.
pub fn router(log: Handle, engine: Engine, options: &Options) -> Router {
    server::router(log, engine, options.clone())
}
