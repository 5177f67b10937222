//! The one HTTP client for requests whose target someone else's data chose: push to agents'
//! endpoints, webhooks, HTTP MCP servers, A2A remotes and A2A push configs. Every connection
//! goes through the outbound guard (`clutch_core::guard`): an address in the URL is checked before
//! the request is sent; a name is resolved by the guard, which checks every address and hands only
//! those to the connector (no second lookup, so DNS rebinding gains nothing); each redirect is
//! checked the same way before it is followed; no proxy from the environment is used, since a proxy
//! would resolve names where the guard cannot see. TLS is rustls (aws-lc-rs) with the platform's
//! roots, as for every `reqwest` client in the workspace. [`refused`] tells a guard refusal from a
//! network failure. `push`: the HTTP transport of core's push delivery (agents' endpoints, webhooks),
//! and the HMAC-SHA256 signatures webhooks carry.

pub mod push;

use std::sync::Arc;
use std::time::Duration;

use clutch_core::guard::{self, Policy, Refused, Unusable};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Settings of a client.
#[derive(Debug, Clone)]
pub struct Options {
    /// One request may take this long, redirects included.
    pub timeout: Duration,
    /// Resolving and connecting may take this long.
    pub connect_timeout: Duration,
    /// Redirects followed per request (each checked); 0 follows none.
    pub redirects: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { timeout: Duration::from_secs(10), connect_timeout: Duration::from_secs(5), redirects: 5 }
    }
}

/// Why a request was not sent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The guard refuses the target.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The URL cannot be used at all.
    #[error(transparent)]
    Unusable(#[from] Unusable),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

/// A guarded HTTP client. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    policy: Arc<Policy>,
}

impl Client {
    pub fn new(policy: Arc<Policy>, options: &Options) -> Result<Client, Error> {
        let redirects = options.redirects;
        let check = policy.clone();
        let redirect = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > redirects {
                return attempt.error(TooManyRedirects(redirects));
            }
            match check.check_parsed(attempt.url()) {
                Ok(Ok(_)) => attempt.follow(),
                Ok(Err(refused)) => attempt.error(refused),
                Err(unusable) => attempt.error(unusable),
            }
        });
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.connect_timeout)
            .no_proxy()
            .redirect(redirect)
            .dns_resolver(Arc::new(Resolver(policy.clone())))
            .build()
            .map_err(|e| Error::Build(e.to_string()))?;
        Ok(Client { http, policy })
    }

    /// A request to `url`, once the guard allowed what it can tell without a lookup (an address,
    /// `localhost`); names are checked as they are resolved.
    pub fn request(&self, method: reqwest::Method, url: &str) -> Result<reqwest::RequestBuilder, Error> {
        let parsed = url::Url::parse(url).map_err(|e| Unusable::Syntax(e.to_string()))?;
        match self.policy.check_parsed(&parsed)? {
            Ok(Some(_)) => Ok(self.http.request(method, parsed)),
            Ok(None) => Err(Unusable::NoHost.into()),
            Err(refused) => Err(refused.into()),
        }
    }

    pub fn post(&self, url: &str) -> Result<reqwest::RequestBuilder, Error> {
        self.request(reqwest::Method::POST, url)
    }

    /// The guarded HTTP client for a library that builds its own requests to `url` (an MCP client),
    /// once the guard allowed what it can tell without a lookup. Names are checked as they are
    /// resolved and redirects as they come, as for every request of this client; use it for `url`
    /// only, as an address written in another URL is not looked up and so not checked.
    pub fn for_url(&self, url: &str) -> Result<reqwest::Client, Error> {
        let _checked = self.request(reqwest::Method::GET, url)?;
        Ok(self.http.clone())
    }
}

/// The guard's refusal behind a failed request (at connect time or on a redirect), if that is why
/// it failed.
pub fn refused(error: &reqwest::Error) -> Option<&Refused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = e.source();
    }
    None
}

#[derive(Debug, thiserror::Error)]
#[error("more than {0} redirects")]
struct TooManyRedirects(usize);

/// Names resolved by the guard: every address checked, only those returned.
struct Resolver(Arc<Policy>);

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: the connector puts the URL's port in.
            match policy.resolve(&host, 0).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                Err(guard::Error::Refused(refused)) => Err(Box::new(refused) as _),
                Err(other) => Err(Box::new(other) as _),
            }
        })
    }
}
