//! Push over HTTP: the transport behind `clutch_core::push` for agents whose card names
//! `endpoints.clutch.url` and for the operator's webhooks: each message POSTed as JSON with its
//! `clutch-seq` (and, for a target with a secret, `clutch-signature: sha256=<hex>`, the HMAC-SHA256
//! of the body), through the guarded client, so an endpoint aimed at a network the operator did not
//! allow is never reached, however its URL or a redirect spells it. [`signature`], [`verify`]
//! (compared in constant time) and [`mac`] serve inbound hooks too: to check the bodies posted to them,
//! and to derive message ids from idempotency keys.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use clutch_core::push::{Delivery, Target, Transport};
use clutch_store::Event;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::{Client, Error, Options};

/// How long one POST may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// POSTs each message to its target's URL.
pub struct Http {
    client: Client,
}

impl Http {
    /// A transport whose requests follow `policy` (the outbound guard's rules).
    pub fn new(policy: Arc<clutch_core::guard::Policy>, timeout: Duration) -> Result<Http, Error> {
        Ok(Http { client: Client::new(policy, &Options { timeout, ..Options::default() })? })
    }

    async fn post(&self, target: &Target, event: &Event) -> Delivery {
        let request = match self.client.post(&target.url) {
            Ok(request) => request,
            Err(e) => return unsent(e),
        };
        let body = event.to_wire();
        let mut request =
            request.header("content-type", "application/json").header("clutch-seq", event.seq.to_string());
        if let Some(secret) = &target.secret {
            request = request.header("clutch-signature", signature(secret.as_bytes(), body.as_bytes()));
        }
        answered(request.body(body).send().await)
    }
}

/// What became of a push whose request could not be made (the guard refused its URL, say).
pub fn unsent(e: Error) -> Delivery {
    match e {
        Error::Refused(r) => Delivery::Blocked(r.to_string()),
        other => Delivery::Failed(other.to_string()),
    }
}

/// What became of a push, from its answer: taken (2xx), refused for good (a 4xx but 408 and 429),
/// blocked by the guard (a redirect or a name resolving where it may not go), or worth retrying.
pub fn answered(sent: Result<reqwest::Response, reqwest::Error>) -> Delivery {
    match sent {
        Ok(r) if r.status().is_success() => Delivery::Taken,
        Ok(r) if r.status().is_client_error() && !matches!(r.status().as_u16(), 408 | 429) => {
            Delivery::Refused(format!("HTTP {}", r.status().as_u16()))
        }
        Ok(r) => Delivery::Failed(format!("HTTP {}", r.status().as_u16())),
        Err(e) => match crate::refused(&e) {
            Some(r) => Delivery::Blocked(r.to_string()),
            None => Delivery::Failed(e.without_url().to_string()),
        },
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

/// `sha256=<hex>`: the HMAC-SHA256 of `body` under `key`, as webhooks sign (and check) bodies.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex::encode(mac(key, body)))
}

/// The HMAC-SHA256 of `body` under `key`.
pub fn mac(key: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// Whether `claimed` (`sha256=<hex>` or the bare hex) is the HMAC-SHA256 of `body` under `key`,
/// compared in constant time.
pub fn verify(key: &[u8], body: &[u8], claimed: &str) -> bool {
    let hex_part = claimed.trim().strip_prefix("sha256=").unwrap_or(claimed.trim());
    let Ok(bytes) = hex::decode(hex_part) else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    mac.verify_slice(&bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_forgeries_do_not() {
        // RFC 4231's second case: key "Jefe", "what do ya want for nothing?".
        let sig = signature(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(sig, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert!(verify(b"Jefe", b"what do ya want for nothing?", &sig));
        assert!(verify(b"Jefe", b"what do ya want for nothing?", sig.strip_prefix("sha256=").unwrap()));
        assert!(!verify(b"Jefe", b"what do ya want for nothing!", &sig));
        assert!(!verify(b"jefe", b"what do ya want for nothing?", &sig));
        assert!(!verify(b"Jefe", b"what do ya want for nothing?", "sha256=zz"));
        assert!(!verify(b"Jefe", b"what do ya want for nothing?", ""));
    }
}
