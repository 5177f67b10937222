//! The outbound guard's rule: which network addresses the daemon may reach when a URL came from
//! someone else's data (an agent's endpoints, push today; webhooks, MCP servers, A2A remotes next).
//! By default only public addresses: loopback, private, link-local (cloud metadata included),
//! unique-local, multicast, unspecified, broadcast, shared and reserved ranges are refused, in every
//! spelling (`127.1`, `2130706433`, `0x7f000001` and `[::ffff:127.0.0.1]` are all 127.0.0.1, because
//! URLs are read as browsers and `reqwest` read them), and so are addresses embedded in IPv6 forms
//! (IPv4-mapped, IPv4-compatible, NAT64, 6to4). Operators allow targets by CIDR or host name
//! (`outbound.allow`), loopback for local development (`outbound.allow_loopback`), and may pin names
//! to addresses (`outbound.resolve`), which are checked like any others.
//!
//! A name is checked where it is resolved ([`Policy::resolve`]): every address it resolves to must
//! pass, and the caller connects to those addresses only (no second lookup for DNS rebinding to
//! exploit). The HTTP client that applies this on every request and redirect is `clutch-outbound`.
//!
//! The engine checks agents' endpoints with this rule when a card is registered (names resolved then too)
//! and again in the gate (without a lookup).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use clutch_proto::ErrorCode;
use ipnet::IpNet;

use crate::Refusal;

/// How long a name may take to resolve.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// The config keys an operator changes to allow a refused target (named in refusals).
pub const ALLOW_KEY: &str = "outbound.allow";
pub const ALLOW_LOOPBACK_KEY: &str = "outbound.allow_loopback";

/// What the operator allows beyond public addresses. The default allows nothing more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Networks allowed whatever their kind.
    nets: Vec<IpNet>,
    /// Host names allowed whatever they resolve to: `agents.internal`, or `*.corp.example` for every
    /// name under it.
    hosts: Vec<String>,
    /// Loopback addresses and `localhost` names allowed (local development).
    loopback: bool,
    /// Names pinned to addresses (checked like resolved ones).
    pinned: BTreeMap<String, Vec<IpAddr>>,
}

/// Why a target is refused: the address (or name) and the rule it falls under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The host as the URL named it.
    pub host: String,
    /// The address refused, when the host was one or resolved to one.
    pub address: Option<IpAddr>,
    pub rule: Rule,
}

/// The kinds of address the guard refuses unless allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Loopback,
    Private,
    LinkLocal,
    UniqueLocal,
    Multicast,
    Unspecified,
    Broadcast,
    /// Carrier-grade NAT space, 100.64.0.0/10.
    Shared,
    /// Documentation, benchmarking, tunnels and other ranges that name no public host.
    Reserved,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Loopback => "loopback",
            Rule::Private => "private",
            Rule::LinkLocal => "link-local",
            Rule::UniqueLocal => "unique-local",
            Rule::Multicast => "multicast",
            Rule::Unspecified => "unspecified",
            Rule::Broadcast => "broadcast",
            Rule::Shared => "shared",
            Rule::Reserved => "reserved",
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.address {
            Some(ip) if ip.to_string() != self.host => format!("`{}` resolves to {ip}", self.host),
            Some(ip) => format!("{ip} is"),
            None => format!("`{}` is", self.host),
        };
        let allow = if self.rule == Rule::Loopback {
            format!("set `{ALLOW_LOOPBACK_KEY} = true` (local development) or add it to `{ALLOW_KEY}`")
        } else {
            format!("add its network or host name to `{ALLOW_KEY}`")
        };
        write!(f, "{what} a {} address, which the outbound guard refuses; to allow it, {allow}", self.rule.as_str())
    }
}

impl std::error::Error for Refused {}

impl Refused {
    /// The refusal a face answers: `TARGET_NOT_ALLOWED` at `field`.
    pub fn refusal(&self, field: &str) -> Refusal {
        Refusal::new(ErrorCode::TargetNotAllowed, self.to_string())
            .field(field)
            .hint("the daemon's operator decides which networks it may reach (see docs/security.md)")
    }
}

/// A URL the guard cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("not a URL: {0}")]
    Syntax(String),
    #[error("only http and https URLs are allowed, not `{0}`")]
    Scheme(String),
    #[error("the URL names no host")]
    NoHost,
}

/// Where a URL points, once its host has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Address(IpAddr),
    /// A name, lower-cased, without a trailing dot.
    Name(String),
}

/// Why a name gives no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("cannot resolve `{host}`: {why}")]
    Lookup { host: String, why: String },
}

impl Policy {
    /// The policy from the operator's settings: `allow` entries are networks (`10.0.0.0/8`), single
    /// addresses or host names (`agents.internal`, `*.corp.example`); `pinned` maps names to the
    /// addresses they stand for. Errors name the entry.
    pub fn new(
        allow: &[String],
        loopback: bool,
        pinned: &BTreeMap<String, Vec<String>>,
    ) -> std::result::Result<Policy, String> {
        let mut policy = Policy { loopback, ..Policy::default() };
        for entry in allow {
            let entry = entry.trim();
            if let Ok(net) = entry.parse::<IpNet>() {
                policy.nets.push(net.trunc());
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                policy.nets.push(IpNet::from(ip));
            } else if let Some(name) = host_pattern(entry) {
                policy.hosts.push(name);
            } else {
                return Err(format!(
                    "`{entry}` is neither a network (10.0.0.0/8), an address nor a host name (agents.internal, *.corp.example)"
                ));
            }
        }
        for (name, addresses) in pinned {
            let Some(key) = host_pattern(name).filter(|n| !n.starts_with("*.")) else {
                return Err(format!("`{name}` is not a host name"));
            };
            let mut list = Vec::new();
            for a in addresses {
                list.push(a.trim().parse::<IpAddr>().map_err(|_| format!("`{name}`: `{a}` is not an IP address"))?);
            }
            if list.is_empty() {
                return Err(format!("`{name}` is pinned to no address"));
            }
            policy.pinned.insert(key, list);
        }
        Ok(policy)
    }

    /// A policy that allows loopback targets besides public ones (tests, local development).
    pub fn loopback() -> Policy {
        Policy { loopback: true, ..Policy::default() }
    }

    /// Checks `ip`, reached through `host`.
    pub fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), Refused> {
        let ip = ip.to_canonical();
        if self.nets.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        match classify(ip) {
            None => Ok(()),
            Some(Rule::Loopback) if self.loopback => Ok(()),
            Some(rule) => Err(Refused { host: host.to_owned(), address: Some(ip), rule }),
        }
    }

    /// Reads `url` and checks what can be checked without a lookup: an address, and `localhost`
    /// names. Other names (pinned ones too) are checked when they are resolved.
    pub fn check_url(&self, url: &str) -> Result<Result<Host, Refused>, Unusable> {
        let parsed = url::Url::parse(url).map_err(|e| Unusable::Syntax(e.to_string()))?;
        match self.check_parsed(&parsed)? {
            Ok(Some(host)) => Ok(Ok(host)),
            Ok(None) => Err(Unusable::NoHost),
            Err(refused) => Ok(Err(refused)),
        }
    }

    /// [`Policy::check_url`] on a URL already parsed (`reqwest` hands its redirects over as such).
    pub fn check_parsed(&self, url: &url::Url) -> Result<Result<Option<Host>, Refused>, Unusable> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Unusable::Scheme(url.scheme().to_owned()));
        }
        let host = match url.host() {
            None => return Ok(Ok(None)),
            Some(url::Host::Ipv4(ip)) => Host::Address(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Host::Address(IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) => Host::Name(normalize(name)),
        };
        Ok(self.check_host(&host).map(|()| Some(host)))
    }

    /// Checks a host without a lookup (see [`Policy::check_url`]).
    pub fn check_host(&self, host: &Host) -> Result<(), Refused> {
        match host {
            Host::Address(ip) => self.check_ip(&ip.to_string(), *ip),
            Host::Name(name) if self.allows_name(name) => Ok(()),
            Host::Name(name) => {
                if (name == "localhost" || name.ends_with(".localhost")) && !self.loopback {
                    return Err(Refused { host: name.clone(), address: None, rule: Rule::Loopback });
                }
                Ok(())
            }
        }
    }

    /// The addresses to connect to for `host:port`: looked up (or pinned), each one checked; a name
    /// the operator allows is not checked. Refused when any address is refused.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Error> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.check_ip(bare, ip)?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let name = normalize(host);
        self.check_host(&Host::Name(name.clone()))?;
        let found = match self.pinned.get(&name) {
            Some(pinned) => pinned.iter().map(|ip| SocketAddr::new(*ip, port)).collect(),
            None => lookup(&name, port).await?,
        };
        if !self.allows_name(&name) {
            for addr in &found {
                self.check_ip(&name, addr.ip())?;
            }
        }
        Ok(found)
    }

    /// Checks `url` as completely as a registration can: syntax and literal addresses, then the
    /// addresses its name resolves to now. A name that does not resolve passes (it is checked again
    /// at every connection).
    pub async fn check_target(&self, url: &str) -> Result<Result<(), Refused>, Unusable> {
        let parsed = url::Url::parse(url).map_err(|e| Unusable::Syntax(e.to_string()))?;
        let host = match self.check_parsed(&parsed)? {
            Ok(Some(host)) => host,
            Ok(None) => return Err(Unusable::NoHost),
            Err(refused) => return Ok(Err(refused)),
        };
        let Host::Name(name) = host else { return Ok(Ok(())) };
        match self.resolve(&name, parsed.port_or_known_default().unwrap_or(80)).await {
            Err(Error::Refused(refused)) => Ok(Err(refused)),
            Ok(_) | Err(Error::Lookup { .. }) => Ok(Ok(())),
        }
    }

    fn allows_name(&self, name: &str) -> bool {
        matches_name(&self.hosts, name)
    }
}

/// Whether `name` (normalized) is one of `patterns` ([`host_pattern`]s): the same name, or a name
/// under a `*.suffix`.
pub fn matches_name(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|pattern| match pattern.strip_prefix("*.") {
        Some(suffix) => {
            name.len() > suffix.len() && name.ends_with(suffix) && name[..name.len() - suffix.len()].ends_with('.')
        }
        None => pattern == name,
    })
}

/// A host name as compared: lower case, no trailing dot.
fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The addresses `name` resolves to, within [`LOOKUP_TIMEOUT`].
async fn lookup(name: &str, port: u16) -> Result<Vec<SocketAddr>, Error> {
    let failed = |why: String| Error::Lookup { host: name.to_owned(), why };
    let found: Vec<SocketAddr> = match tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((name, port))).await
    {
        Ok(Ok(found)) => found.collect(),
        Ok(Err(e)) => return Err(failed(e.to_string())),
        Err(_) => return Err(failed(format!("no answer within {} s", LOOKUP_TIMEOUT.as_secs()))),
    };
    if found.is_empty() {
        return Err(failed("no address".into()));
    }
    Ok(found)
}

/// `name` or `*.name` as an allow-list entry, normalized (lower case, no trailing dot), when it is a
/// plausible host name.
pub fn host_pattern(entry: &str) -> Option<String> {
    let (wild, name) = match entry.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, entry),
    };
    let name = normalize(name);
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
        });
    ok.then(|| if wild { format!("*.{name}") } else { name })
}

/// The rule an address falls under, or `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<Rule> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Rule> {
    let [a, b, c, _] = ip.octets();
    Some(if ip.is_unspecified() || a == 0 {
        Rule::Unspecified
    } else if ip.is_loopback() {
        Rule::Loopback
    } else if ip.is_private() {
        Rule::Private
    } else if ip.is_link_local() {
        Rule::LinkLocal
    } else if ip.is_multicast() {
        Rule::Multicast
    } else if ip.is_broadcast() {
        Rule::Broadcast
    } else if a == 100 && (64..128).contains(&b) {
        Rule::Shared
    } else if a >= 240                                              // reserved, 240.0.0.0/4
        || (a == 192 && b == 0 && c == 0)                           // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)                           // documentation
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || (a == 198 && (b == 18 || b == 19))                       // benchmarking
        || (a == 192 && b == 88 && c == 99)
    // 6to4 relay anycast
    {
        Rule::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Rule> {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| classify_v4(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
    if ip.is_unspecified() {
        return Some(Rule::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Rule::Loopback);
    }
    if s[0] & 0xff00 == 0xff00 {
        return Some(Rule::Multicast);
    }
    if s[0] & 0xffc0 == 0xfe80 {
        return Some(Rule::LinkLocal);
    }
    if s[0] & 0xfe00 == 0xfc00 {
        return Some(Rule::UniqueLocal);
    }
    if s[0] & 0xffc0 == 0xfec0 {
        // Site-local, deprecated: private in all but name.
        return Some(Rule::Private);
    }
    // IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and 6to4 (2002::/16) carry
    // an IPv4 address the packet ends up at.
    if s[..6] == [0; 6] {
        return embedded(s[6], s[7]).or(Some(Rule::Reserved));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) {
        return embedded(s[6], s[7]);
    }
    if s[0] == 0x2002 {
        return embedded(s[1], s[2]);
    }
    // Teredo (2001::/32), ORCHID and documentation (2001:db8::/32), discard-only (100::/64).
    if (s[0] == 0x2001 && (s[1] == 0 || s[1] == 0x0db8 || (0x10..0x30).contains(&s[1])))
        || (s[0] == 0x100 && s[1..4] == [0, 0, 0])
    {
        return Some(Rule::Reserved);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(policy: &Policy, url: &str) -> Option<(String, Rule)> {
        match policy.check_url(url).unwrap() {
            Ok(_) => None,
            Err(r) => Some((r.address.map_or_else(|| r.host.clone(), |a| a.to_string()), r.rule)),
        }
    }

    #[test]
    fn every_spelling_of_loopback_is_loopback() {
        let p = Policy::default();
        for url in [
            "http://127.0.0.1:9/x",
            "http://127.1:9/x",
            "http://2130706433:9/x",
            "http://0x7f000001:9/x",
            "http://0177.0.0.1/x",
            "http://127.0.0.1./x",
            "http://[::1]:9/x",
            "http://[::ffff:127.0.0.1]/x",
            "http://[::ffff:7f00:1]/x",
            "http://[64:ff9b::127.0.0.1]/x",
            "http://[2002:7f00:1::]/x",
            "http://localhost:9/x",
            "http://LOCALHOST./x",
            "http://api.localhost/x",
        ] {
            assert_eq!(refused(&p, url).map(|r| r.1), Some(Rule::Loopback), "{url}");
        }
    }

    #[test]
    fn other_non_public_ranges_are_refused_by_rule() {
        let p = Policy::default();
        for (url, rule) in [
            ("http://10.1.2.3/", Rule::Private),
            ("http://172.16.0.1/", Rule::Private),
            ("http://192.168.1.1/", Rule::Private),
            ("http://169.254.169.254/latest/meta-data", Rule::LinkLocal),
            ("http://[fe80::1]/", Rule::LinkLocal),
            ("http://[fd00::1]/", Rule::UniqueLocal),
            ("http://[fec0::1]/", Rule::Private),
            ("http://224.0.0.1/", Rule::Multicast),
            ("http://[ff02::1]/", Rule::Multicast),
            ("http://0.0.0.0/", Rule::Unspecified),
            ("http://[::]/", Rule::Unspecified),
            ("http://255.255.255.255/", Rule::Broadcast),
            ("http://100.64.0.1/", Rule::Shared),
            ("http://192.0.2.1/", Rule::Reserved),
            ("http://[2001:db8::1]/", Rule::Reserved),
            ("http://[::ffff:169.254.169.254]/", Rule::LinkLocal),
            ("http://[::ffff:10.0.0.1]/", Rule::Private),
        ] {
            assert_eq!(refused(&p, url).map(|r| r.1), Some(rule), "{url}");
        }
        for url in ["http://93.184.215.14/", "https://[2606:4700::1111]/", "https://agents.example.com/x"] {
            assert_eq!(refused(&p, url), None, "{url}");
        }
    }

    #[test]
    fn operators_allow_networks_hosts_and_loopback() {
        let pinned = BTreeMap::from([("db.internal".to_owned(), vec!["10.9.0.1".to_owned()])]);
        let allow = ["10.1.0.0/16".to_owned(), "*.corp.example".to_owned(), "192.168.7.7".to_owned()];
        let p = Policy::new(&allow, false, &pinned).unwrap();
        assert_eq!(refused(&p, "http://10.1.200.3/"), None);
        assert_eq!(refused(&p, "http://[::ffff:10.1.0.9]/"), None, "a mapped address is the address");
        assert_eq!(refused(&p, "http://192.168.7.7/"), None);
        assert_eq!(refused(&p, "http://192.168.7.8/").map(|r| r.1), Some(Rule::Private));
        assert_eq!(refused(&p, "http://localhost/").map(|r| r.1), Some(Rule::Loopback));
        assert_eq!(refused(&p, "http://db.internal/"), None, "a name is checked when it is resolved");
        assert!(p.allows_name("a.corp.example") && p.allows_name("x.y.corp.example"));
        assert!(!p.allows_name("corp.example") && !p.allows_name("evilcorp.example"));
        let open = Policy::new(&[], true, &BTreeMap::new()).unwrap();
        assert_eq!(refused(&open, "http://127.0.0.1/"), None);
        assert_eq!(refused(&open, "http://localhost/"), None);
        assert_eq!(refused(&open, "http://10.0.0.1/").map(|r| r.1), Some(Rule::Private));
        assert!(Policy::new(&["not a host".into()], false, &BTreeMap::new()).is_err());
        assert!(Policy::new(&[], false, &BTreeMap::from([("x".into(), vec!["nope".into()])])).is_err());
    }

    #[test]
    fn unusable_urls_are_named() {
        let p = Policy::default();
        assert!(matches!(p.check_url("ftp://example.com/"), Err(Unusable::Scheme(_))));
        assert!(matches!(p.check_url("not a url"), Err(Unusable::Syntax(_))));
    }

    #[tokio::test]
    async fn resolution_checks_every_address_and_pins_win() {
        let p = Policy::new(&[], false, &BTreeMap::from([("db.internal".to_owned(), vec!["10.9.0.1".to_owned()])]));
        let e = p.unwrap().resolve("db.internal", 80).await.unwrap_err();
        assert!(matches!(e, Error::Refused(Refused { address: Some(_), rule: Rule::Private, .. })), "{e}");
        let pinned = BTreeMap::from([("public.example".to_owned(), vec!["127.0.0.1".to_owned()])]);
        let p = Policy::new(&[], false, &pinned).unwrap();
        let e = p.resolve("public.example", 80).await.unwrap_err();
        assert!(matches!(e, Error::Refused(Refused { rule: Rule::Loopback, .. })), "{e}");
        assert!(matches!(p.resolve("localhost", 80).await, Err(Error::Refused(_))));
        assert!(matches!(p.resolve("127.0.0.1", 80).await, Err(Error::Refused(_))));
        let text = p.check_target("http://public.example/x").await.unwrap().unwrap_err().to_string();
        assert!(text.contains("public.example") && text.contains("outbound.allow_loopback"), "{text}");
        let allowed = Policy::new(&["public.example".into()], false, &pinned).unwrap();
        assert_eq!(allowed.resolve("public.example", 81).await.unwrap(), vec!["127.0.0.1:81".parse().unwrap()]);
    }
}
