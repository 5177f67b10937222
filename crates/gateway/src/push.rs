//! Push over HTTP: the transport behind `clutch_core::push` for agents whose card names
//! `endpoints.clutch.url`: each message POSTed there as JSON with its `clutch-seq`, through the
//! outbound guard (`clutch-outbound`), so an endpoint aimed at a network the operator did not allow
//! is never reached, however its URL or a redirect spells it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use clutch_core::push::{Delivery, Target, Transport};
use clutch_core::{Engine, Handle};
use clutch_store::Event;

/// How long one POST may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// POSTs to agents' `endpoints.clutch.url`.
pub struct Http {
    client: clutch_outbound::Client,
}

impl Http {
    /// A transport whose requests go through `engine`'s outbound guard.
    pub fn new(engine: &Engine, timeout: Duration) -> Result<Http, clutch_outbound::Error> {
        let options = clutch_outbound::Options { timeout, ..clutch_outbound::Options::default() };
        Ok(Http { client: clutch_outbound::Client::new(engine.options().outbound.clone(), &options)? })
    }

    async fn post(&self, target: &Target, event: &Event) -> Delivery {
        let request = match self.client.post(&target.url) {
            Ok(request) => request,
            Err(clutch_outbound::Error::Refused(r)) => return Delivery::Blocked(r.to_string()),
            Err(other) => return Delivery::Failed(other.to_string()),
        };
        let sent = request
            .header("content-type", "application/json")
            .header("clutch-seq", event.seq.to_string())
            .body(event.to_wire())
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => Delivery::Taken,
            Ok(r) if r.status().is_client_error() && !matches!(r.status().as_u16(), 408 | 429) => {
                Delivery::Refused(format!("HTTP {}", r.status().as_u16()))
            }
            Ok(r) => Delivery::Failed(format!("HTTP {}", r.status().as_u16())),
            Err(e) => match clutch_outbound::refused(&e) {
                Some(r) => Delivery::Blocked(r.to_string()),
                None => Delivery::Failed(e.without_url().to_string()),
            },
        }
    }
}

impl Transport for Http {
    fn protocol(&self) -> &'static str {
        "clutch"
    }

    fn deliver<'a>(
        &'a self,
        target: &'a Target,
        event: &'a Event,
    ) -> Pin<Box<dyn Future<Output = Delivery> + Send + 'a>> {
        Box::pin(self.post(target, event))
    }
}

/// Runs HTTP push delivery until `shutdown` resolves (see `clutch_core::push::run`).
pub async fn run(log: Handle, engine: Engine, options: clutch_core::push::Options, shutdown: impl Future<Output = ()>) {
    match Http::new(&engine, TIMEOUT) {
        Ok(http) => clutch_core::push::run(log, engine, Arc::new(http), options, shutdown).await,
        Err(e) => tracing::error!(error = %e, "push delivery cannot start its HTTP client"),
    }
}
