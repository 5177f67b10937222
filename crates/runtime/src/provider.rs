//! LLM providers: the operator's declared endpoints (`[[providers]]`), one request/response model
//! both wire formats map onto, and `Provider::complete`, which paces each call through the
//! provider's rate limiter, retries what may be retried and streams text as it comes.
//!
//! Written as our own serde over `reqwest`, with `sse-stream` parsing streams: byte-level control of what
//! is sent and recorded, no SDK's opinions about retries. A call is held to `timeout_ms` and
//! `idle_timeout_ms` (to the first byte, and between chunks) and retried with core's backoff on 429, 529,
//! 5xx, network failures, stalls and malformed streams. Keys are read from the variable `api_key_env`
//! names, once, at start (a missing one is an error naming it), and are never shown (`Debug` masks them;
//! errors hold none).

mod anthropic;
mod openai;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limit::Limiter;

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The Anthropic Messages API (`POST {base_url}/v1/messages`).
    Anthropic,
    /// Any OpenAI-compatible Chat Completions endpoint (`POST {base_url}/chat/completions`):
    /// OpenAI, vLLM, llama.cpp's server, Ollama.
    Openai,
}

/// One provider as the operator declares it in `clutch.toml` (`[[providers]]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What agents name it by.
    pub name: String,
    pub kind: Kind,
    /// Anthropic: without `/v1` (default `https://api.anthropic.com`); OpenAI-compatible: with it
    /// (default `https://api.openai.com/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (never the key itself). None: no key is sent
    /// (a local server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model agents use unless they name one.
    pub model: String,
    /// Output tokens per call at most, unless an agent says otherwise.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Sampling temperature, unless an agent says otherwise; absent: the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Stream answers (SSE) or take them whole.
    #[serde(default = "yes")]
    pub stream: bool,
    /// The longest one call may take, retries aside.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The longest wait for the answer's first byte, and between two chunks of a stream.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Attempts after the first, for 429, 529, 5xx, network failures and broken streams.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// The first retry's delay (doubling, ±20% jitter, at most 30 s) unless the provider says
    /// when (`retry-after`).
    #[serde(default = "default_retry_base_ms")]
    pub retry_base_ms: u64,
    /// Requests per minute for all agents of this daemon together (paced evenly, 5% under it). None: unpaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Input plus output tokens per minute, estimated before each call and settled after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u32>,
    /// US dollars per million tokens, by model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Price>,
}

/// Dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

fn default_max_tokens() -> u32 {
    4096
}
fn yes() -> bool {
    true
}
fn default_timeout_ms() -> u64 {
    300_000
}
fn default_idle_timeout_ms() -> u64 {
    60_000
}
fn default_retries() -> u32 {
    4
}
fn default_retry_base_ms() -> u64 {
    500
}

/// Why a provider's declaration is refused; each names the provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("name {0:?}: letters, digits, `-`, `_` and `.` only")]
    Name(String),
    #[error("{0}: `model` is empty")]
    NoModel(String),
    #[error("{0}: `base_url` must be an http:// or https:// URL")]
    BaseUrl(String),
    #[error("{0}: `api_key_env` must name an environment variable")]
    KeyVariable(String),
    #[error("{0}: `max_tokens`, `timeout_ms` and `idle_timeout_ms` must be above 0")]
    Zero(String),
    #[error("{0}: a rate of 0 per minute allows nothing; leave it out for no limit")]
    ZeroRate(String),
}

impl Config {
    /// What is wrong with this declaration, if anything.
    pub fn check(&self) -> Result<(), Invalid> {
        let name = || self.name.clone();
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(Invalid::Name(name()));
        }
        if self.model.is_empty() {
            return Err(Invalid::NoModel(name()));
        }
        if let Some(url) = &self.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(Invalid::BaseUrl(name()));
        }
        if let Some(var) = &self.api_key_env
            && (var.is_empty() || var.contains('='))
        {
            return Err(Invalid::KeyVariable(name()));
        }
        if self.max_tokens == 0 || self.timeout_ms == 0 || self.idle_timeout_ms == 0 {
            return Err(Invalid::Zero(name()));
        }
        if self.requests_per_minute == Some(0) || self.tokens_per_minute == Some(0) {
            return Err(Invalid::ZeroRate(name()));
        }
        Ok(())
    }

    fn base_url(&self) -> String {
        let url = self.base_url.clone().unwrap_or_else(|| match self.kind {
            Kind::Anthropic => "https://api.anthropic.com".into(),
            Kind::Openai => "https://api.openai.com/v1".into(),
        });
        url.trim_end_matches('/').to_owned()
    }

    /// The cost of `usage` on `model` (0 when the price table does not name it).
    pub fn cost(&self, model: &str, usage: &Usage) -> f64 {
        let Some(p) = self.prices.get(model) else { return 0.0 };
        (usage.input_tokens as f64 * p.input
            + usage.output_tokens as f64 * p.output
            + usage.cache_read_tokens as f64 * p.cache_read
            + usage.cache_write_tokens as f64 * p.cache_write)
            / 1e6
    }
}

/// A request in the providers' common model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub model: String,
    pub system: String,
    pub messages: Vec<Turn>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The tool the model must call in its answer (Anthropic's `tool_choice` `tool`, OpenAI's
    /// `function`); `None`: the model chooses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub role: Role,
    pub content: Vec<Part>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// A piece of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input (an object).
    pub input_schema: Value,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: String,
    pub model: String,
    pub content: Vec<Part>,
    pub stop: Finish,
    pub usage: Usage,
}

impl Response {
    /// The answer's text, its parts joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// It finished its answer.
    EndTurn,
    /// It wants tools called.
    ToolUse,
    /// `max_tokens` cut it.
    MaxTokens,
    StopSequence,
    /// A reason this client does not know (kept as the provider said it).
    Other(String),
}

/// Tokens of one call, as the provider counted them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// A call that failed, classified so that the caller knows whether to try again.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{provider}: {kind:?}: {message}")]
pub struct Error {
    pub provider: String,
    pub kind: ErrorKind,
    /// Bounded, and never holds the key.
    pub message: String,
    pub status: Option<u16>,
    /// When the provider said to come back.
    pub retry_after: Option<Duration>,
    /// Attempts made.
    pub attempts: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// 429.
    RateLimited,
    /// 529, or an `overloaded_error` mid-stream.
    Overloaded,
    /// Another 5xx, or an `api_error` mid-stream.
    Server,
    /// No connection, or it broke.
    Network,
    /// No first byte, or the stream stalled, in time.
    Timeout,
    /// An answer that does not parse as the wire format says.
    Malformed,
    /// 400, 404, 413, 422: the request is wrong; trying again gives the same.
    Invalid,
    /// 401, 403.
    Auth,
    /// The key's variable is not set.
    MissingKey,
}

impl ErrorKind {
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Self::RateLimited | Self::Overloaded | Self::Server | Self::Network | Self::Timeout | Self::Malformed
        )
    }
}

/// The largest error message kept from a provider's answer.
const MESSAGE_MAX: usize = 300;

pub(crate) fn bounded(text: &str) -> String {
    if text.len() <= MESSAGE_MAX {
        return text.to_owned();
    }
    let mut end = MESSAGE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A failure of one attempt, before it is named by provider and attempts.
pub(crate) struct Failure {
    pub kind: ErrorKind,
    pub message: String,
    pub status: Option<u16>,
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Failure {
        Failure { kind, message: bounded(&message.into()), status: None, retry_after: None }
    }
}

/// Text as it streams: called with each piece.
pub type OnText<'a> = &'a mut (dyn FnMut(&str) + Send);

/// A declared provider, ready to be called: its key read, its HTTP client and its rate limiter.
pub struct Provider {
    pub config: Config,
    http: reqwest::Client,
    key: Option<Key>,
    pub(crate) limiter: Limiter,
}

/// An API key: shown as `***` by `Debug`, so that it cannot reach a log by accident.
#[derive(Clone)]
struct Key(String);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("name", &self.config.name).field("kind", &self.config.kind).finish()
    }
}

impl Provider {
    /// The provider `config` declares, its key read from the environment now: a key variable that is
    /// not set is an error naming it.
    pub fn new(config: Config) -> Result<Provider, Error> {
        Self::with_env(config, |name| std::env::var(name).ok())
    }

    /// As `new`, reading variables with `env` (tests).
    pub fn with_env(config: Config, env: impl Fn(&str) -> Option<String>) -> Result<Provider, Error> {
        let key = match &config.api_key_env {
            None => None,
            Some(var) => match env(var).filter(|k| !k.is_empty()) {
                Some(k) => Some(Key(k)),
                None => {
                    return Err(Error {
                        provider: config.name.clone(),
                        kind: ErrorKind::MissingKey,
                        message: format!(
                            "the environment variable {var} is not set: export it with the provider's API key \
                             (or remove `api_key_env` for a server that needs none)"
                        ),
                        status: None,
                        retry_after: None,
                        attempts: 0,
                    });
                }
            },
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.idle_timeout_ms.min(30_000)))
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .map_err(|e| Error {
                provider: config.name.clone(),
                kind: ErrorKind::Network,
                message: bounded(&e.to_string()),
                status: None,
                retry_after: None,
                attempts: 0,
            })?;
        let limiter = Limiter::new(config.requests_per_minute, config.tokens_per_minute);
        Ok(Provider { config, http, key, limiter })
    }

    /// One completion: paced by the limiter, retried with backoff (honouring `retry-after`) while
    /// the failure is retryable and attempts remain, within `timeout_ms` per attempt. `on_text`
    /// sees streamed text as it arrives (a retried attempt starts over: `on_text("")` marks it).
    pub async fn complete(&self, request: &Request, on_text: OnText<'_>) -> Result<Response, Error> {
        let estimate = estimate_tokens(request);
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.limiter.acquire(estimate).await;
            let began = Instant::now();
            let timeout = Duration::from_millis(self.config.timeout_ms);
            let outcome = match tokio::time::timeout(timeout, self.attempt(request, on_text)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Failure::new(
                    ErrorKind::Timeout,
                    format!("no complete answer in {} ms", self.config.timeout_ms),
                )),
            };
            match outcome {
                Ok(response) => {
                    self.limiter.settle(estimate, response.usage.total());
                    tracing::debug!(provider = %self.config.name, model = %response.model, ms = began.elapsed().as_millis() as u64, "llm call answered");
                    return Ok(response);
                }
                Err(f) => {
                    if let Some(after) = f.retry_after {
                        self.limiter.pause(after);
                    }
                    if !f.kind.retryable() || attempt > self.config.max_retries {
                        return Err(Error {
                            provider: self.config.name.clone(),
                            kind: f.kind,
                            message: f.message,
                            status: f.status,
                            retry_after: f.retry_after,
                            attempts: attempt,
                        });
                    }
                    let delay = f.retry_after.unwrap_or_else(|| {
                        clutch_core::backoff(
                            Duration::from_millis(self.config.retry_base_ms),
                            Duration::from_secs(30),
                            attempt,
                            began.elapsed().as_nanos() as u64,
                        )
                    });
                    tracing::warn!(provider = %self.config.name, kind = ?f.kind, status = ?f.status, attempt, delay_ms = delay.as_millis() as u64, message = %f.message, "llm call failed; retrying");
                    on_text("");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    async fn attempt(&self, request: &Request, on_text: OnText<'_>) -> Result<Response, Failure> {
        let stream = self.config.stream;
        let (url, body) = match self.config.kind {
            Kind::Anthropic => (format!("{}/v1/messages", self.config.base_url()), anthropic::body(request, stream)),
            Kind::Openai => (format!("{}/chat/completions", self.config.base_url()), openai::body(request, stream)),
        };
        let mut builder = self.http.post(url).json(&body);
        match (self.config.kind, &self.key) {
            (Kind::Anthropic, key) => {
                builder = builder.header("anthropic-version", "2023-06-01");
                if let Some(Key(k)) = key {
                    builder = builder.header("x-api-key", k);
                }
            }
            (Kind::Openai, Some(Key(k))) => builder = builder.bearer_auth(k),
            (Kind::Openai, None) => {}
        }
        if stream {
            builder = builder.header("accept", "text/event-stream");
        }
        let idle = Duration::from_millis(self.config.idle_timeout_ms);
        let response = match tokio::time::timeout(idle, builder.send()).await {
            Err(_) => return Err(Failure::new(ErrorKind::Timeout, format!("no answer in {} ms", idle.as_millis()))),
            Ok(Err(e)) => return Err(Failure::new(ErrorKind::Network, network_message(&e))),
            Ok(Ok(r)) => r,
        };
        observe(&self.limiter, self.config.kind, response.headers());
        let status = response.status().as_u16();
        if status >= 400 {
            let retry_after = retry_after(response.headers());
            let text = tokio::time::timeout(idle, response.text()).await.ok().and_then(Result::ok).unwrap_or_default();
            let mut f = Failure::new(kind_of_status(status), error_message(&text, status));
            f.status = Some(status);
            f.retry_after = retry_after;
            return Err(f);
        }
        if !stream {
            let bytes = match tokio::time::timeout(idle, response.bytes()).await {
                Err(_) => {
                    return Err(Failure::new(
                        ErrorKind::Timeout,
                        format!("the answer stalled for {} ms", idle.as_millis()),
                    ));
                }
                Ok(Err(e)) => return Err(Failure::new(ErrorKind::Network, network_message(&e))),
                Ok(Ok(b)) => b,
            };
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| Failure::new(ErrorKind::Malformed, format!("the answer is not JSON: {e}")))?;
            let response = match self.config.kind {
                Kind::Anthropic => anthropic::parse(value),
                Kind::Openai => openai::parse(value),
            }?;
            if let Some(text) = Some(response.text()).filter(|t| !t.is_empty()) {
                on_text(&text);
            }
            return Ok(response);
        }
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        let mut anthropic = anthropic::Stream::default();
        let mut openai = openai::Stream::default();
        loop {
            let next = match tokio::time::timeout(idle, events.next()).await {
                Err(_) => {
                    return Err(Failure::new(
                        ErrorKind::Timeout,
                        format!("the stream stalled for {} ms", idle.as_millis()),
                    ));
                }
                Ok(next) => next,
            };
            let event = match next {
                None => break,
                Some(Err(e)) => return Err(Failure::new(ErrorKind::Network, format!("the stream broke: {e}"))),
                Some(Ok(event)) => event,
            };
            let done = match self.config.kind {
                Kind::Anthropic => anthropic.event(event, on_text)?,
                Kind::Openai => openai.event(event, on_text)?,
            };
            if done {
                break;
            }
        }
        match self.config.kind {
            Kind::Anthropic => anthropic.finish(),
            Kind::Openai => openai.finish(),
        }
    }
}

/// A rough count of the request's input tokens (four bytes a token) plus its `max_tokens`: what
/// a call may cost at most, for budgets and the tokens-per-minute limit before it is made.
pub fn estimate_tokens(request: &Request) -> u64 {
    let bytes = request.system.len()
        + serde_json::to_string(&request.messages).map_or(0, |s| s.len())
        + serde_json::to_string(&request.tools).map_or(0, |s| s.len());
    (bytes as u64).div_ceil(4) + u64::from(request.max_tokens)
}

fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        429 => ErrorKind::RateLimited,
        529 => ErrorKind::Overloaded,
        401 | 403 => ErrorKind::Auth,
        408 => ErrorKind::Timeout,
        500..=599 => ErrorKind::Server,
        _ => ErrorKind::Invalid,
    }
}

/// The message of an error body in either format, or its status.
fn error_message(text: &str, status: u16) -> String {
    let value: Option<Value> = serde_json::from_str(text).ok();
    let message = value.as_ref().and_then(|v| v.pointer("/error/message")).and_then(Value::as_str);
    match message {
        Some(m) => format!("HTTP {status}: {m}"),
        None => format!("HTTP {status}"),
    }
}

/// `retry-after-ms`, or `retry-after` in seconds (an HTTP date is not honoured: backoff instead).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Reads a response's rate-limit headers: nothing left (requests or tokens) pauses `limiter`
/// until the reset they name.
fn observe(limiter: &Limiter, kind: Kind, headers: &reqwest::header::HeaderMap) {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let pairs: [(&str, &str); 2] = match kind {
        Kind::Anthropic => [
            ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
            ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
        ],
        Kind::Openai => [
            ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
            ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
        ],
    };
    for (remaining, reset) in pairs {
        if get(remaining).and_then(|v| v.trim().parse::<u64>().ok()) != Some(0) {
            continue;
        }
        let wait = get(reset).and_then(|v| match kind {
            Kind::Anthropic => until_time(v),
            Kind::Openai => go_duration(v),
        });
        if let Some(wait) = wait {
            tracing::info!(
                header = remaining,
                wait_ms = wait.as_millis() as u64,
                "the provider reports its limit reached; pausing"
            );
            limiter.pause(wait);
        }
    }
}

/// The time from now until an RFC 3339 instant (none when it is past or unreadable).
fn until_time(text: &str) -> Option<Duration> {
    let at = time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339).ok()?;
    let left = at - time::OffsetDateTime::now_utc();
    left.is_positive().then(|| Duration::from_secs_f64(left.as_seconds_f64()))
}

/// A duration as OpenAI writes it: `1s`, `6m0s`, `20ms`, `1h2m3.5s`.
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let factor = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * factor;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
}

/// A network failure, without the URL's query (none carries a key, but keep errors short).
fn network_message(e: &reqwest::Error) -> String {
    let what = if e.is_connect() {
        "cannot connect"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "the answer broke off"
    } else {
        "the request failed"
    };
    let url =
        e.url().map(|u| format!(" ({}://{}{})", u.scheme(), u.host_str().unwrap_or(""), u.path())).unwrap_or_default();
    format!("{what}{url}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_as_openai_writes_them() {
        assert_eq!(go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(go_duration("1h2m3.5s"), Some(Duration::from_secs_f64(3723.5)));
        assert_eq!(go_duration("soon"), None);
        assert_eq!(go_duration(""), None);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limit_headers_reporting_nothing_left_pause_until_their_reset() {
        let limiter = Limiter::new(None, None);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-ratelimit-remaining-requests", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-requests", "1.5s".parse().unwrap());
        headers.insert("x-ratelimit-remaining-tokens", "900".parse().unwrap());
        headers.insert("x-ratelimit-reset-tokens", "20s".parse().unwrap());
        let began = tokio::time::Instant::now();
        observe(&limiter, Kind::Openai, &headers);
        limiter.acquire(1).await;
        assert_eq!(began.elapsed(), Duration::from_millis(1500), "the tokens left were not 0: no 20 s wait");

        let limiter = Limiter::new(None, None);
        let reset = time::OffsetDateTime::now_utc() + time::Duration::seconds(3);
        let reset = reset.format(&time::format_description::well_known::Rfc3339).unwrap();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("anthropic-ratelimit-tokens-remaining", "0".parse().unwrap());
        headers.insert("anthropic-ratelimit-tokens-reset", reset.parse().unwrap());
        let began = tokio::time::Instant::now();
        observe(&limiter, Kind::Anthropic, &headers);
        limiter.acquire(1).await;
        let waited = began.elapsed();
        assert!(waited > Duration::from_millis(2500) && waited <= Duration::from_secs(3), "{waited:?}");
    }
}
