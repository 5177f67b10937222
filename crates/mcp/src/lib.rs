//! The MCP face of the daemon: Clutch's agent lifecycle as MCP tools, served over Streamable HTTP at
//! `/mcp` (every tool) and `/mcp/worker` (an agent's own lifecycle tools) in both protocol eras (the
//! `initialize` handshake up to 2025-11-25, and 2026-07-28's self-contained requests), and the stdio
//! bridge behind `clutch mcp`, which forwards to them so that each tool exists once, in the daemon.
//! The common request, one 2026-07-28 `tools/call`, takes a fast path that answers exactly as rmcp
//! would (`fast`). Which `Host`s and browser `Origin`s may reach the endpoints is not decided here:
//! the daemon's browser policy (`clutch_gateway::browser`) checks every request to every route.

mod agents;
mod approvals;
mod error;
mod fast;
mod inbox;
mod lists;
pub mod proxy;
mod registry;
mod server;
mod sessions;
mod tasks;
mod tools;
mod workflows;

use std::sync::Arc;

use axum::Router;
use clutch_core::Engine;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

pub use error::{Error, Result, body as error_body, recoverable};
pub use fast::FastPath;
pub use server::Server;
pub use tools::Profile;

/// Settings of the MCP endpoints.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest request body accepted.
    pub body_limit_bytes: usize,
    /// Answer the common request (one 2026-07-28 `tools/call` with its standard headers) without
    /// rmcp's per-request service loop, exactly as rmcp would; off, rmcp serves every request (its
    /// answers bounded either way: see `fast`). On in the daemon; off only to compare the two
    /// (tests, `clutch bench mcp`).
    pub fast_path: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { body_limit_bytes: 8 << 20, fast_path: true }
    }
}

/// The MCP endpoints, one per [`Profile`] at [`Profile::path`], to merge into the daemon's router
/// (under its browser policy and bearer-token layer).
pub fn router(engine: Engine, options: &Options) -> Router {
    let registry = Arc::new(registry::Registry::new());
    let config = StreamableHttpServerConfig::default()
        // Stateless: every request stands alone, in both eras (a legacy client's `initialize` is
        // answered, and its later requests need no session), and answers come as plain JSON.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(options.body_limit_bytes)
        // The daemon's browser policy has checked the `Host` of every request, against the names the
        // operator configured; rmcp's own list (loopback names only) would be a second, narrower one.
        .disable_allowed_hosts();
    let mut router = Router::new();
    for profile in Profile::ALL {
        let server = Server::with_registry(engine.clone(), registry.clone(), profile);
        let factory = server.clone();
        let service = StreamableHttpService::new(
            move || Ok(factory.clone()),
            Arc::new(NeverSessionManager::default()),
            config.clone(),
        );
        let endpoint = fast::Endpoint::new(server, service, options.body_limit_bytes, options.fast_path);
        router = router.route(profile.path(), axum::routing::any(fast::serve).with_state(Arc::new(endpoint)));
    }
    router
}
