//! Push over HTTP for agents whose card names `endpoints.clutch.url`: core's push delivery with the
//! outbound crate's HTTP transport (`clutch_outbound::push::Http`), through the outbound guard.

use std::future::Future;
use std::sync::Arc;

use clutch_core::{Engine, Handle};
use clutch_outbound::push::{Http, TIMEOUT};

/// Runs HTTP push delivery until `shutdown` resolves (see `clutch_core::push::run`).
pub async fn run(log: Handle, engine: Engine, options: clutch_core::push::Options, shutdown: impl Future<Output = ()>) {
    match Http::new(engine.options().outbound.clone(), TIMEOUT) {
        Ok(http) => clutch_core::push::run(log, engine, Arc::new(http), options, shutdown).await,
        Err(e) => tracing::error!(error = %e, "push delivery cannot start its HTTP client"),
    }
}
