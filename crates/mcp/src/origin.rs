//! `Origin` validation on the MCP endpoints (rmcp does none unless asked): a web page must not drive
//! a local daemon's tools through the user's browser. Requests without `Origin` (every non-browser
//! client) and from loopback origins pass, so do the configured ones; anything else is answered 403
//! with a JSON-RPC error.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clutch_core::Refusal;
use clutch_proto::ErrorCode;

/// The origins allowed besides loopback ones, normalized.
#[derive(Debug, Clone, Default)]
pub(crate) struct Allowed(Arc<Vec<Origin>>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Allowed {
    /// From entries like `https://app.example.com` or `http://tools.internal:8080`.
    pub(crate) fn new(entries: &[String]) -> Result<Allowed, String> {
        let origins = entries
            .iter()
            .map(|e| {
                parse(e).ok_or_else(|| {
                    format!("`{e}` is not an origin: write scheme://host[:port], like https://app.example.com")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Allowed(Arc::new(origins)))
    }

    fn allows(&self, origin: &Origin) -> bool {
        is_loopback(&origin.host) || self.0.contains(origin)
    }
}

/// Checks an entry of the allowed origins list.
pub fn check(entry: &str) -> Result<(), String> {
    Allowed::new(&[entry.to_owned()]).map(|_| ())
}

fn parse(value: &str) -> Option<Origin> {
    let (scheme, rest) = value.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        (format!("[{}]", host.to_ascii_lowercase()), port)
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host.to_ascii_lowercase(), port.parse().ok()?),
            None => (rest.to_ascii_lowercase(), default_port),
        }
    };
    if host.is_empty() {
        return None;
    }
    Some(Origin { scheme, host, port })
}

fn is_loopback(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") || host == "[::1]" {
        return true;
    }
    host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// The middleware.
pub(crate) async fn validate(State(allowed): State<Allowed>, request: Request, next: Next) -> Response {
    let Some(value) = request.headers().get(header::ORIGIN) else {
        return next.run(request).await;
    };
    let shown = String::from_utf8_lossy(value.as_bytes()).into_owned();
    match value.to_str().ok().and_then(parse) {
        Some(origin) if allowed.allows(&origin) => next.run(request).await,
        _ => {
            tracing::warn!(origin = %shown, "MCP request from a foreign Origin refused");
            refuse(&shown)
        }
    }
}

fn refuse(origin: &str) -> Response {
    let body = Refusal::new(ErrorCode::Forbidden, format!("requests from origin `{origin}` are not allowed"))
        .hint("MCP clients send no Origin; browsers may call only from loopback or the daemon's mcp.allowed_origins");
    let rpc = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": ErrorCode::Forbidden.jsonrpc_code(),
            "message": body.message,
            "data": body,
        },
    });
    (StatusCode::FORBIDDEN, axum::Json(rpc)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_configured_origins_pass() {
        let allowed = Allowed::new(&["https://app.example.com".into(), "http://tools.internal:8080".into()]).unwrap();
        let pass = [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://127.8.9.10:443",
            "http://[::1]:7700",
            "https://app.example.com",
            "https://APP.example.com:443",
            "http://tools.internal:8080",
        ];
        for origin in pass {
            assert!(allowed.allows(&parse(origin).unwrap()), "{origin}");
        }
        for origin in ["https://evil.example", "http://app.example.com", "http://tools.internal", "http://10.0.0.1"] {
            assert!(!allowed.allows(&parse(origin).unwrap()), "{origin}");
        }
        for bad in ["null", "file://x", "https://", "https://a/b", "ftp://x", "http://x:y"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(Allowed::new(&["example.com".into()]).is_err());
    }
}
