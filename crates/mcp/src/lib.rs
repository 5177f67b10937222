//! The MCP face of the daemon: Clutch's agent lifecycle as MCP tools, served over Streamable HTTP at
//! `/mcp` (every tool) and `/mcp/worker` (an agent's own lifecycle tools) in both protocol eras (the
//! `initialize` handshake up to 2025-11-25, and 2026-07-28's self-contained requests), and the stdio
//! bridge behind `clutch mcp`, which forwards to them so that each tool exists once, in the daemon.
//! The common request, one 2026-07-28 `tools/call`, takes a fast path that answers exactly as rmcp
//! would (`fast`).

mod agents;
mod approvals;
mod error;
mod fast;
mod inbox;
mod lists;
mod origin;
pub mod proxy;
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
pub use origin::check as check_origin;
pub use server::Server;
pub use tools::Profile;

/// Settings of the MCP endpoints.
#[derive(Debug, Clone)]
pub struct Options {
    /// Browser origins allowed besides loopback ones, like `https://app.example.com` (a request
    /// without `Origin` always passes).
    pub allowed_origins: Vec<String>,
    /// Accept any `Host` header. Off, only loopback hosts are served (a guard against DNS
    /// rebinding); the daemon turns it on when it listens beyond loopback, where tokens are required.
    pub any_host: bool,
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
        Options { allowed_origins: Vec::new(), any_host: false, body_limit_bytes: 8 << 20, fast_path: true }
    }
}

/// The MCP endpoints, one per [`Profile`] at [`Profile::path`], to merge into the daemon's router
/// (under its bearer-token layer). Fails when an allowed origin is malformed.
pub fn router(engine: Engine, options: &Options) -> std::result::Result<Router, String> {
    let allowed = origin::Allowed::new(&options.allowed_origins)?;
    let registry = Arc::new(tools::Registry::new());
    let mut config = StreamableHttpServerConfig::default()
        // Stateless: every request stands alone, in both eras (a legacy client's `initialize` is
        // answered, and its later requests need no session), and answers come as plain JSON.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(options.body_limit_bytes);
    if options.any_host {
        config = config.disable_allowed_hosts();
    }
    let mut router = Router::new();
    for profile in Profile::ALL {
        let server = Server::with_registry(engine.clone(), registry.clone(), profile);
        let factory = server.clone();
        let service = StreamableHttpService::new(
            move || Ok(factory.clone()),
            Arc::new(NeverSessionManager::default()),
            config.clone(),
        );
        let endpoint =
            fast::Endpoint::new(server, service, options.any_host, options.body_limit_bytes, options.fast_path);
        router = router.route(profile.path(), axum::routing::any(fast::serve).with_state(Arc::new(endpoint)));
    }
    Ok(router.layer(axum::middleware::from_fn_with_state(allowed, origin::validate)))
}
