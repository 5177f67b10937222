//! What every route of the A2A face shares: the hub (the event log, the engine and the face's
//! options), the address a request reached it at, and who calls.

use std::sync::Arc;

use axum::http::{HeaderMap, header};
use clutch_core::{Engine, Handle};

use crate::Options;
use crate::auth::Who;
use crate::wire::RpcError;

/// The hub as one A2A agent: what every handler of the face works with.
#[derive(Clone)]
pub(crate) struct Hub {
    pub(crate) log: Handle,
    pub(crate) engine: Engine,
    pub(crate) options: Arc<Options>,
}

impl Hub {
    /// The hub's address as this request reached it (the configured one, else its `Host`).
    pub(crate) fn base(&self, headers: &HeaderMap) -> String {
        let base = self.options.public_url.clone().unwrap_or_else(|| {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
            format!("http://{host}")
        });
        base.trim_end_matches('/').to_owned()
    }
}

/// Who calls, from a request's `X-API-Key` and bearer credentials; a refusal says why
/// (`UNAUTHENTICATED`: 401, `PERMISSION_DENIED`: 403).
pub(crate) fn identify_request(hub: &Hub, headers: &HeaderMap) -> Result<Who, RpcError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let api_key = header("x-api-key").filter(|k| !k.is_empty());
    let bearer = header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
    crate::auth::identify(&hub.engine, &hub.options, api_key, bearer).map_err(|refused| {
        let reason = if refused.status == 401 { "UNAUTHENTICATED" } else { "PERMISSION_DENIED" };
        RpcError::new(-32600, reason, refused.message)
    })
}
