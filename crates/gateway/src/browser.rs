//! The browser policy: one rule for every request the daemon serves (the API, the live stream's
//! WebSocket and SSE, the web UI, and the routes of the faces the gateway hosts: MCP, A2A, hooks),
//! so that a web page the user visits cannot read or drive the daemon through the user's browser.
//! Checked before routing, before any token or body is looked at:
//!
//! - **`Host`** must be a name the daemon answers to: a loopback name or address (`localhost`,
//!   `*.localhost`, 127.0.0.0/8, `[::1]`), a name or address in `http.allowed_hosts`, the host of
//!   `a2a.public_url`, or, when the daemon listens beyond loopback, any address (an address cannot
//!   be rebound; names there still need listing). Any port. Otherwise `HOST_NOT_ALLOWED`: a page
//!   whose DNS name an attacker pointed at the daemon (DNS rebinding) is same-origin with itself, so
//!   only its `Host`, the attacker's name, gives it away.
//! - **`Origin`**, when there is one (browsers send it on every WebSocket handshake, every
//!   cross-origin request and every POST), must be the request's own (the page was served by the
//!   host and port the request is addressed to), the public URL's, or in `http.allowed_origins`.
//!   Otherwise `ORIGIN_NOT_ALLOWED`, `null` included (a sandboxed frame, a `file://` page, a
//!   redirect: anyone's). Browsers apply no CORS to WebSockets: this is what keeps a foreign page
//!   off the stream. Requests without `Origin` (the CLI, SDKs, agents, webhook senders) pass.
//!
//! Names and `*.suffix` entries are read and matched as the outbound guard reads its allow list
//! (`clutch_core::guard::host_pattern`, `matches_name`). Both refusals are 403, logged at a bounded
//! rate. [`crate::router_with`] puts the policy around the whole router, just inside the request's
//! span, so a face's routes need no `Host` or `Origin` check of their own.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clutch_core::guard;
use clutch_core::throttle::Throttle;
use clutch_proto::ErrorCode;
use clutch_proto::error::quote;

use crate::error::ApiError;

/// What the policy allows besides the daemon's own names and origin, as the operator writes it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Names (`hub.example.com`, `*.corp.example`) and addresses (`10.0.0.5`, `::1`) the daemon
    /// answers to besides loopback ones (`http.allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// Web origins allowed to call it besides its own, like `https://dashboard.example.com`
    /// (`http.allowed_origins`).
    pub allowed_origins: Vec<String>,
    /// The daemon's address as others reach it (`a2a.public_url`): its host is one of the daemon's
    /// names, its origin one of its own.
    pub public_url: Option<String>,
    /// The daemon listens beyond loopback: every address is its own (which of the machine's
    /// addresses clients use is not known, and an address cannot be rebound).
    pub any_address: bool,
}

/// An entry of [`Options`] that is not what its key holds, named with the key
/// (`http.allowed_hosts`, `http.allowed_origins`, `a2a.public_url`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {entry}")]
pub struct Error {
    pub key: &'static str,
    pub entry: Malformed,
}

/// Why an entry is not a host, an origin or a URL, the entry as written (quoted short when shown);
/// without its key, which the caller knows ([`check_origin`] serves two).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error(
        "`{}` is neither a host name (hub.example.com, *.corp.example) nor an address (10.0.0.5, ::1); write it \
         without scheme, port or path",
        quote(.0)
    )]
    Host(String),
    #[error("`{}` is not an origin: write scheme://host[:port], like https://app.example.com", quote(.0))]
    Origin(String),
    #[error("`{}` is not an http:// or https:// URL, like https://hub.example.com", quote(.0))]
    Url(String),
}

/// The policy, built once from [`Options`] and shared by every request; cheap to clone. The default
/// answers to loopback names and addresses and allows its own origin only.
#[derive(Debug, Clone, Default)]
pub struct Policy(Arc<Rules>);

#[derive(Debug, Default)]
struct Rules {
    /// Host names, normalized: exact, or `*.suffix` for every name under it.
    names: Vec<String>,
    addresses: Vec<IpAddr>,
    any_address: bool,
    origins: Vec<Origin>,
}

impl Policy {
    /// The policy `options` describe; an entry that is not a host name, an address or an origin is
    /// refused, named with the key it belongs to.
    pub fn new(options: &Options) -> Result<Policy, Error> {
        let mut rules = Rules { any_address: options.any_address, ..Rules::default() };
        for entry in &options.allowed_hosts {
            match host_entry(entry).map_err(|entry| Error { key: "http.allowed_hosts", entry })? {
                Host::Ip(ip) => rules.addresses.push(ip),
                Host::Name(name) => rules.names.push(name),
            }
        }
        for entry in &options.allowed_origins {
            rules.origins.push(origin_entry(entry).map_err(|entry| Error { key: "http.allowed_origins", entry })?);
        }
        if let Some(url) = &options.public_url {
            let origin = public_origin(url).map_err(|entry| Error { key: "a2a.public_url", entry })?;
            match &origin.host {
                Host::Ip(ip) => rules.addresses.push(*ip),
                Host::Name(name) => rules.names.push(name.clone()),
            }
            rules.origins.push(origin);
        }
        Ok(Policy(Arc::new(rules)))
    }

    /// Whether a request with these headers (and request target) may be served.
    fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refused> {
        let mut values = headers.get_all(header::HOST).iter();
        let host_header = values.next();
        if values.next().is_some() {
            return Err(Refused::Host("(several Host headers)".into()));
        }
        let host = match host_header {
            Some(value) => {
                let shown = || String::from_utf8_lossy(value.as_bytes()).into_owned();
                let host = value.to_str().ok().and_then(Authority::parse).ok_or_else(|| Refused::Host(shown()))?;
                if !self.answers_to(&host.host) {
                    return Err(Refused::Host(shown()));
                }
                Some(host)
            }
            None => None,
        };
        // An absolute request target (HTTP/1.1) or `:authority` (HTTP/2) names the host too.
        let host = match uri.authority() {
            Some(authority) => {
                let target = Authority::parse(authority.as_str())
                    .filter(|a| self.answers_to(&a.host))
                    .ok_or_else(|| Refused::Host(authority.as_str().to_owned()))?;
                Some(host.unwrap_or(target))
            }
            None => host,
        };
        let mut values = headers.get_all(header::ORIGIN).iter();
        let Some(value) = values.next() else { return Ok(()) };
        let shown = String::from_utf8_lossy(value.as_bytes()).into_owned();
        if values.next().is_some() {
            return Err(Refused::Origin { origin: "(several Origin headers)".into(), host: None });
        }
        if shown.trim() == "null" {
            return Err(Refused::NullOrigin);
        }
        let origin = value.to_str().ok().and_then(Origin::parse);
        match origin {
            Some(origin) if host.as_ref().is_some_and(|h| origin.is_at(h)) || self.0.origins.contains(&origin) => {
                Ok(())
            }
            _ => Err(Refused::Origin {
                origin: shown,
                host: host_header.map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()),
            }),
        }
    }

    /// `host` is one of the daemon's names or addresses.
    fn answers_to(&self, host: &Host) -> bool {
        match host {
            Host::Ip(ip) => ip.is_loopback() || self.0.any_address || self.0.addresses.contains(ip),
            Host::Name(name) => {
                name == "localhost" || name.ends_with(".localhost") || guard::matches_name(&self.0.names, name)
            }
        }
    }
}

/// Puts every route of `router` (and its fallbacks) behind `policy`.
pub fn guard(router: Router, policy: Policy) -> Router {
    router.layer(axum::middleware::from_fn_with_state(policy, enforce))
}

/// Checks an entry of the allowed hosts: a host name (`hub.example.com`, `*.corp.example`) or an
/// address; the error says why not (without naming the key).
pub fn check_host(entry: &str) -> Result<(), Malformed> {
    host_entry(entry).map(|_| ())
}

/// Checks an entry of the allowed origins: `scheme://host[:port]`.
pub fn check_origin(entry: &str) -> Result<(), Malformed> {
    origin_entry(entry).map(|_| ())
}

/// Checks the daemon's public URL: an http:// or https:// URL.
pub fn check_public_url(url: &str) -> Result<(), Malformed> {
    public_origin(url).map(|_| ())
}

/// The middleware: a refused request is answered before it is routed any further.
async fn enforce(State(policy): State<Policy>, request: Request, next: Next) -> Response {
    match policy.check(request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => {
            log(&refused, request.uri().path());
            refused.into_error().into_response()
        }
    }
}

/// Refusals the log may still take as warnings: a page can send many.
static LOGGED: LazyLock<Throttle> = LazyLock::new(|| Throttle::new(20, 1.0));

fn log(refused: &Refused, path: &str) {
    let (what, value) = match refused {
        Refused::Host(host) => ("Host", host.as_str()),
        Refused::Origin { origin, .. } => ("Origin", origin.as_str()),
        Refused::NullOrigin => ("Origin", "null"),
    };
    let (value, path) = (quote(value), quote(path));
    match LOGGED.take() {
        Some(held) => tracing::warn!(header = what, %value, %path, not_logged_before = held, "browser request refused"),
        None => tracing::debug!(header = what, %value, %path, "browser request refused"),
    }
}

/// Why a request was refused.
#[derive(Debug)]
enum Refused {
    /// The `Host` (or request target) named, as sent.
    Host(String),
    /// A foreign origin, and the `Host` it was sent to.
    Origin {
        origin: String,
        host: Option<String>,
    },
    NullOrigin,
}

impl Refused {
    fn into_error(self) -> ApiError {
        match self {
            Refused::Host(host) => ApiError::new(
                ErrorCode::HostNotAllowed,
                format!(
                    "this daemon does not answer to the name `{host}`: a web page reaching it under a name of its own \
                     (DNS rebinding) must not read it"
                ),
            )
            .field("Host")
            .hint(
                "clients on this machine use localhost or 127.0.0.1; to serve another name, add it to \
                 `http.allowed_hosts` (CLUTCH_HTTP_ALLOWED_HOSTS)",
            ),
            Refused::Origin { origin, host } => {
                let own = host.map_or_else(|| "it has no Host".to_owned(), |h| format!("the request went to `{h}`"));
                ApiError::new(
                    ErrorCode::OriginNotAllowed,
                    format!("requests from the web page at `{origin}` are not allowed: it is not this daemon's own ({own})"),
                )
                .field("Origin")
                .hint(
                    "browsers may call the daemon from the pages it serves itself or from origins in \
                     `http.allowed_origins` (CLUTCH_HTTP_ALLOWED_ORIGINS); clients that are not browsers send no Origin",
                )
            }
            Refused::NullOrigin => ApiError::new(
                ErrorCode::OriginNotAllowed,
                "requests with `Origin: null` (a sandboxed frame, a file:// page, a redirect) are not allowed: \
                 any site can send it",
            )
            .field("Origin")
            .hint("open the page from the daemon itself or from an origin in `http.allowed_origins`"),
        }
    }
}

/// A host as compared: an address, or a name in lower case without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

impl Host {
    /// `text` as a host: an IPv4 address, an IPv6 address in brackets, or a host name as the
    /// outbound guard reads allow-list names ([`guard::host_pattern`]).
    fn parse(text: &str) -> Option<Host> {
        if let Some(v6) = text.strip_prefix('[') {
            return v6.strip_suffix(']')?.parse::<Ipv6Addr>().ok().map(|ip| Host::Ip(IpAddr::V6(ip).to_canonical()));
        }
        if let Ok(ip) = text.parse::<Ipv4Addr>() {
            return Some(Host::Ip(IpAddr::V4(ip)));
        }
        guard::host_pattern(text).filter(|name| !name.starts_with("*.")).map(Host::Name)
    }
}

/// A host (an IPv6 address with or without brackets), or `*.name`.
fn host_entry(entry: &str) -> Result<Host, Malformed> {
    let trimmed = entry.trim();
    let host = if let Ok(ip) = trimmed.parse::<Ipv6Addr>() {
        Some(Host::Ip(IpAddr::V6(ip).to_canonical()))
    } else {
        match trimmed.strip_prefix("*.") {
            // `*.` before a name, not an address.
            Some(suffix) if matches!(Host::parse(suffix), Some(Host::Name(_))) => {
                guard::host_pattern(trimmed).map(Host::Name)
            }
            Some(_) => None,
            None => Host::parse(trimmed),
        }
    };
    host.ok_or_else(|| Malformed::Host(entry.to_owned()))
}

/// An origin as an entry may write it (a trailing `/` allowed).
fn origin_entry(entry: &str) -> Result<Origin, Malformed> {
    let trimmed = entry.trim();
    Origin::parse(trimmed.strip_suffix('/').unwrap_or(trimmed)).ok_or_else(|| Malformed::Origin(entry.to_owned()))
}

/// A `Host` header's value (or a request target's authority): `host[:port]`.
#[derive(Debug)]
struct Authority {
    host: Host,
    port: Option<u16>,
}

impl Authority {
    fn parse(text: &str) -> Option<Authority> {
        let (host, port) = match text.rfind(':') {
            // The colon of a port, not one inside an IPv6 address.
            Some(at) if !text[at..].contains(']') => (&text[..at], Some(&text[at + 1..])),
            _ => (text, None),
        };
        let port = match port {
            Some("") | None => None,
            Some(digits) => Some(digits.parse::<u16>().ok()?),
        };
        Some(Authority { host: Host::parse(host)?, port })
    }
}

/// A web origin: `scheme://host:port`, the port made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    https: bool,
    host: Host,
    port: u16,
}

impl Origin {
    /// An `Origin` header's value (or an entry of the allowed origins): `http(s)://host[:port]`.
    fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.trim().split_once("://")?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        if rest.contains(['/', '?', '#', '@']) {
            return None;
        }
        let authority = Authority::parse(rest)?;
        let port = authority.port.unwrap_or(if https { 443 } else { 80 });
        Some(Origin { https, host: authority.host, port })
    }

    /// A page of this origin was served by the host and port `to` names: the request is its own.
    fn is_at(&self, to: &Authority) -> bool {
        self.host == to.host && self.port == to.port.unwrap_or(if self.https { 443 } else { 80 })
    }
}

/// The origin of an http(s) URL.
fn public_origin(url: &str) -> Result<Origin, Malformed> {
    let trimmed = url.trim();
    trimmed
        .split_once("://")
        .and_then(|(scheme, rest)| {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            Origin::parse(&format!("{scheme}://{}", &rest[..end]))
        })
        .ok_or_else(|| Malformed::Url(url.to_owned()))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn policy(hosts: &[&str], origins: &[&str], public_url: Option<&str>, any_address: bool) -> Policy {
        let options = Options {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            public_url: public_url.map(str::to_owned),
            any_address,
        };
        Policy::new(&options).unwrap()
    }

    /// The code of the refusal of a request with `host` and `origin` (absent when `None`), or `OK`.
    fn check(policy: &Policy, host: Option<&str>, origin: Option<&str>) -> &'static str {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        match policy.check(&Uri::from_static("/v1/stream"), &headers) {
            Ok(()) => "OK",
            Err(refused) => refused.into_error().0.code.as_str(),
        }
    }

    #[test]
    fn loopback_hosts_pass_at_any_port_and_other_names_do_not() {
        let p = Policy::default();
        for host in [
            "127.0.0.1:7700",
            "127.8.9.10",
            "localhost",
            "LOCALHOST:1",
            "localhost.:7700",
            "app.localhost:7700",
            "[::1]:7700",
            "[0:0:0:0:0:0:0:1]",
            "[::ffff:127.0.0.1]:7700",
        ] {
            assert_eq!(check(&p, Some(host), None), "OK", "{host}");
        }
        for host in [
            "evil.example:7700",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io:7700",
            "10.0.0.5:7700",
            "[fe80::1]:7700",
            "",
            "a b",
            "localhost:x",
            "[::1",
            "user@localhost",
        ] {
            assert_eq!(check(&p, Some(host), None), "HOST_NOT_ALLOWED", "{host}");
        }
        assert_eq!(check(&p, None, None), "OK", "no Host: not a browser");
    }

    #[test]
    fn configured_and_public_hosts_pass_and_beyond_loopback_every_address() {
        let p = policy(
            &["hub.example.com", "*.corp.example", "10.0.0.5", "fd00::7"],
            &[],
            Some("https://a2a.example/x"),
            false,
        );
        for host in [
            "hub.example.com",
            "HUB.example.com:8443",
            "a.corp.example",
            "a.b.corp.example:1",
            "10.0.0.5:7700",
            "[fd00::7]",
            "a2a.example",
        ] {
            assert_eq!(check(&p, Some(host), None), "OK", "{host}");
        }
        for host in ["corp.example", "xcorp.example", "example.com", "10.0.0.6", "evil.example"] {
            assert_eq!(check(&p, Some(host), None), "HOST_NOT_ALLOWED", "{host}");
        }
        let beyond = policy(&[], &[], None, true);
        for host in ["10.0.0.5:7700", "192.168.1.2", "[2001:db8::1]:7700", "localhost"] {
            assert_eq!(check(&beyond, Some(host), None), "OK", "{host}");
        }
        assert_eq!(check(&beyond, Some("clutch.internal:7700"), None), "HOST_NOT_ALLOWED", "names still need listing");
    }

    #[test]
    fn only_the_requests_own_origin_and_configured_ones_pass() {
        let p = policy(
            &["hub.example.com"],
            &["https://dash.example.com", "http://tools.internal:8080/"],
            Some("https://public.example"),
            false,
        );
        let pass = [
            ("127.0.0.1:7700", "http://127.0.0.1:7700"),
            ("localhost:7700", "http://LOCALHOST:7700"),
            ("[::1]:7700", "http://[::1]:7700"),
            ("hub.example.com", "https://hub.example.com"),
            ("hub.example.com", "http://hub.example.com:80"),
            ("hub.example.com:8443", "https://hub.example.com:8443"),
            ("127.0.0.1:7700", "https://dash.example.com"),
            ("127.0.0.1:7700", "https://dash.example.com:443"),
            ("127.0.0.1:7700", "http://tools.internal:8080"),
            ("127.0.0.1:7700", "https://public.example"),
        ];
        for (host, origin) in pass {
            assert_eq!(check(&p, Some(host), Some(origin)), "OK", "{host} from {origin}");
        }
        let refused = [
            ("127.0.0.1:7700", "https://evil.example"),
            ("127.0.0.1:7700", "null"),
            ("127.0.0.1:7700", "http://localhost:7700"),
            ("127.0.0.1:7700", "http://127.0.0.1:5173"),
            ("127.0.0.1:7700", "http://127.0.0.1"),
            ("hub.example.com", "https://hub.example.com:8443"),
            ("127.0.0.1:7700", "http://dash.example.com"),
            ("127.0.0.1:7700", "https://dash.example.com:8443"),
            ("127.0.0.1:7700", "file://"),
            ("127.0.0.1:7700", "chrome-extension://abc"),
            ("127.0.0.1:7700", "http://127.0.0.1:7700/path"),
            ("127.0.0.1:7700", "garbage"),
        ];
        for (host, origin) in refused {
            assert_eq!(check(&p, Some(host), Some(origin)), "ORIGIN_NOT_ALLOWED", "{host} from {origin}");
        }
        assert_eq!(check(&p, None, Some("http://127.0.0.1:7700")), "ORIGIN_NOT_ALLOWED", "no Host to be the origin of");
        assert_eq!(check(&p, None, Some("https://dash.example.com")), "OK");
        // The Host is checked first: a rebound name is refused as such, whatever its Origin.
        assert_eq!(check(&p, Some("evil.example:7700"), Some("http://evil.example:7700")), "HOST_NOT_ALLOWED");
    }

    #[test]
    fn repeated_headers_and_foreign_request_targets_are_refused() {
        let p = Policy::default();
        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("127.0.0.1"));
        headers.append(header::HOST, HeaderValue::from_static("127.0.0.1"));
        assert!(matches!(p.check(&Uri::from_static("/"), &headers), Err(Refused::Host(_))));
        let mut headers = HeaderMap::new();
        headers.append(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1"));
        headers.append(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1"));
        assert!(matches!(p.check(&Uri::from_static("/"), &headers), Err(Refused::Origin { .. })));
        let headers = HeaderMap::new();
        assert!(matches!(
            p.check(&Uri::from_static("http://evil.example:7700/v1/agents"), &headers),
            Err(Refused::Host(_))
        ));
        assert!(p.check(&Uri::from_static("http://127.0.0.1:7700/v1/agents"), &headers).is_ok());
    }

    #[test]
    fn malformed_entries_are_refused_naming_their_key() {
        for (hosts, origins, public_url, key) in [
            (vec!["hub.example.com:7700"], vec![], None, "http.allowed_hosts"),
            (vec!["https://hub.example.com"], vec![], None, "http.allowed_hosts"),
            (vec!["*"], vec![], None, "http.allowed_hosts"),
            (vec!["*.10.0.0.1"], vec![], None, "http.allowed_hosts"),
            (vec![], vec!["app.example.com"], None, "http.allowed_origins"),
            (vec![], vec!["https://app.example.com/path"], None, "http.allowed_origins"),
            (vec![], vec!["null"], None, "http.allowed_origins"),
            (vec![], vec![], Some("hub.example.com"), "a2a.public_url"),
            (vec![], vec![], Some("ftp://hub.example.com"), "a2a.public_url"),
        ] {
            let options = Options {
                allowed_hosts: hosts.iter().map(|s: &&str| s.to_string()).collect(),
                allowed_origins: origins.iter().map(|s: &&str| s.to_string()).collect(),
                public_url: public_url.map(str::to_owned),
                any_address: false,
            };
            let e = Policy::new(&options).unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
        let e = Policy::new(&Options { allowed_hosts: vec!["https://hub.example.com".into()], ..Options::default() });
        assert_eq!(
            e.unwrap_err().to_string(),
            "`http.allowed_hosts`: `https://hub.example.com` is neither a host name (hub.example.com, *.corp.example) \
             nor an address (10.0.0.5, ::1); write it without scheme, port or path"
        );
        assert_eq!(
            check_origin("app.example.com").unwrap_err().to_string(),
            "`app.example.com` is not an origin: write scheme://host[:port], like https://app.example.com"
        );
        assert_eq!(check_public_url("ftp://x").unwrap_err(), Malformed::Url("ftp://x".into()));
        let long = "x".repeat(10_000);
        let e = Policy::new(&Options { allowed_hosts: vec![long], ..Options::default() }).unwrap_err().to_string();
        assert!(e.len() < 400, "quotes a short prefix: {} bytes", e.len());
    }
}
