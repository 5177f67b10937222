//! The HTTP client every client command shares: finds the daemon, and turns a refused connection or
//! an error body into a message that says what to do.

use std::fmt;
use std::time::Duration;

use reqwest::{RequestBuilder, Response, StatusCode};
use serde::Deserialize;

/// A client of one daemon.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

/// Why a request failed.
#[derive(Debug)]
pub enum Error {
    /// Nothing answers at the URL.
    NoDaemon { url: String },
    /// The daemon answered with an error.
    Api(ApiError),
    /// The connection broke, or the answer was not what the API promises.
    Http(reqwest::Error),
}

/// An error the daemon returned: `{"error": {"code", "message", ...}}` and its status.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: u16,
    pub code: String,
    pub message: String,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub hint: Option<String>,
    #[serde(default)]
    pub problems: Vec<Problem>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ApiError,
}

impl Client {
    /// A client of the daemon `args` name, with its token if one is given.
    pub fn connect(args: &crate::args::ClientArgs) -> anyhow::Result<Client> {
        Client::with_token(&args.url, args.token.as_deref())
    }

    /// A client of the daemon at `url` (`http://host:port`, no path).
    pub fn with_token(url: &str, token: Option<&str>) -> anyhow::Result<Client> {
        let base = url.trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base).map_err(|e| anyhow::anyhow!("invalid daemon URL {url:?}: {e}"))?;
        if parsed.scheme() != "http" {
            anyhow::bail!("invalid daemon URL {url:?}: only http:// is supported");
        }
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = token {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| anyhow::anyhow!("the API token contains characters a header cannot carry"))?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("clutch/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Client { http, base })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn get(&self, path: &str) -> RequestBuilder {
        self.http.get(format!("{}{path}", self.base))
    }

    pub fn post(&self, path: &str) -> RequestBuilder {
        self.http.post(format!("{}{path}", self.base))
    }

    pub fn put(&self, path: &str) -> RequestBuilder {
        self.http.put(format!("{}{path}", self.base))
    }

    pub fn delete(&self, path: &str) -> RequestBuilder {
        self.http.delete(format!("{}{path}", self.base))
    }

    /// Sends `request` and reads the JSON answer.
    pub async fn json(&self, request: RequestBuilder) -> Result<serde_json::Value, Error> {
        self.send(request).await?.json().await.map_err(Error::Http)
    }

    /// Sends `request` and reads the JSON answer as a command with `--json` does: with `json`, prints
    /// it as it came and answers `None` (nothing is left to do); otherwise answers it, to render.
    pub async fn answer(&self, request: RequestBuilder, json: bool) -> anyhow::Result<Option<serde_json::Value>> {
        let answer = self.json(request).await?;
        if json {
            crate::render::print(&format!("{answer}\n"))?;
            return Ok(None);
        }
        Ok(Some(answer))
    }

    /// Sends `request`; a non-2xx answer becomes [`Error::Api`].
    pub async fn send(&self, request: RequestBuilder) -> Result<Response, Error> {
        let response = request.send().await.map_err(|e| self.classify(e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(Error::Api(ApiError::from_response(response).await))
    }

    fn classify(&self, e: reqwest::Error) -> Error {
        if e.is_connect() { Error::NoDaemon { url: self.base.clone() } } else { Error::Http(e) }
    }
}

impl Error {
    /// Whether the daemon said the thing asked about (agent, task, run...) does not exist: a
    /// `*_NOT_FOUND` code. A plain `NOT_FOUND` (no such route: an older daemon) does not count.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api(e) if e.status == 404 && e.code.ends_with("_NOT_FOUND"))
    }
}

impl ApiError {
    async fn from_response(response: Response) -> ApiError {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        match serde_json::from_str::<ErrorBody>(&text) {
            Ok(body) => ApiError { status: status.as_u16(), ..body.error },
            Err(_) => ApiError::unexpected(status, &text),
        }
    }

    /// An entry of a batch answer's `results` that is `{"error": {...}}`.
    pub fn from_result(value: &serde_json::Value) -> Option<ApiError> {
        let error = value.get("error")?;
        serde_json::from_value(error.clone()).ok()
    }

    fn unexpected(status: StatusCode, text: &str) -> ApiError {
        let mut message: String = text.chars().take(200).collect();
        if message.trim().is_empty() {
            message = status.canonical_reason().unwrap_or("no reason given").to_owned();
        }
        ApiError {
            status: status.as_u16(),
            code: clutch_proto::ErrorCode::UnexpectedResponse.as_str().into(),
            message,
            field: None,
            hint: None,
            problems: Vec::new(),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if self.status != 0 {
            write!(f, " (HTTP {})", self.status)?;
        }
        if let Some(field) = &self.field
            && self.problems.is_empty()
        {
            write!(f, "\n  field: {field}")?;
        }
        for p in &self.problems {
            write!(f, "\n  {}: {}", p.path, p.message)?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDaemon { url } => {
                write!(f, "no Clutch daemon at {url}: start one with `clutch serve` (or pass --url / set CLUTCH_URL)")
            }
            Error::Api(e) => e.fmt(f),
            Error::Http(_) => f.write_str("talking to the daemon failed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Http(e) => Some(e),
            _ => None,
        }
    }
}

impl std::error::Error for ApiError {}

/// `s` percent-encoded for use as one path segment.
/// The daemon's answer read as the type this build knows (a view or a payload of `clutch_core`).
pub fn typed<T: serde::de::DeserializeOwned>(answer: serde_json::Value) -> anyhow::Result<T> {
    use anyhow::Context as _;
    serde_json::from_value(answer).context("the daemon's answer is not the shape this clutch knows (another version?)")
}

pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
