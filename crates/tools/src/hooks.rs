//! Webhooks, both ways. In: [`Hooks`], the `hook` adapter: `POST /v1/hooks/<name>` (a face's route)
//! hands it a body, which it takes only with a valid HMAC-SHA256 signature under the hook's secret
//! (checked before the body is read as JSON) and turns into a message by the hook's mapping. Out:
//! [`WebhookConfig`]s become core push targets (`clutch_core::push::run_to` with
//! `clutch_outbound::push::Http`): the messages a webhook selects are POSTed to its URL in `seq`
//! order, signed with its secret if it has one, retried through failures, and never to an address
//! the outbound guard refuses.
//!
//! A mapping is a message as `POST /v1/messages` takes it (parties may be written as their ids:
//! `from = "user:github"`, `to = ["agent:ken"]`), in which a string `{/json/pointer}`
//! stands for the body's value at that pointer (the value itself, of any type, when it is the whole
//! string; its text inside a longer string) and `{header:Name}` for a request header. Ids it does
//! not give are made; one it gives must be valid. A pointer or header that is missing is refused
//! with the pointer (or header) named, as is a message that does not validate.

use std::collections::BTreeMap;
use std::time::SystemTime;

use clutch_core::Refusal;
use clutch_core::adapter::{Adapter, Answer, BoxFuture, Inbound};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{ErrorCode, Message, MessageType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The adapter's name.
pub const ADAPTER: &str = "hook";

/// An inbound hook (`[[hooks]]` in `clutch.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// Its name in `POST /v1/hooks/<name>`: letters, digits, `.`, `_` and `-`.
    pub name: String,
    /// The key senders sign bodies with (HMAC-SHA256). Never shown.
    pub secret: String,
    /// The header that carries the signature: `sha256=<hex>` or the bare hex.
    #[serde(default = "default_signature_header")]
    pub signature_header: String,
    /// The message each body becomes (see the module's docs).
    pub message: Map<String, Value>,
}

fn default_signature_header() -> String {
    "x-hub-signature-256".into()
}

/// An outbound webhook (`[[webhooks]]` in `clutch.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Its name (its saved position is `push:webhook:<name>`).
    pub name: String,
    /// Where the messages are POSTed, as JSON with `clutch-seq` (and `clutch-signature`).
    pub url: String,
    /// The message types sent (`task.result`, ...); empty: every type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// Only messages of this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Only messages from this sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Only messages to this recipient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A key each body is signed with (HMAC-SHA256, `clutch-signature: sha256=<hex>`). Never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// What is wrong with a hook's or a webhook's config, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("name {name:?}: {why}")]
    Name { name: String, why: String },
    #[error("{hook}: secret: at least 16 characters")]
    ShortSecret { hook: String },
    #[error("{hook}: signature_header: a header name")]
    SignatureHeader { hook: String },
    #[error("{webhook}: url: an http:// or https:// URL")]
    Url { webhook: String },
    #[error("{webhook}: types: `{kind}` is not a message type")]
    Type { webhook: String, kind: String },
}

impl HookConfig {
    /// What is wrong with it, naming the field.
    pub fn check(&self) -> Result<(), Error> {
        id::check_name(&self.name).map_err(|why| Error::Name { name: self.name.clone(), why })?;
        if self.secret.len() < 16 {
            return Err(Error::ShortSecret { hook: self.name.clone() });
        }
        if self.signature_header.is_empty() || !self.signature_header.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        {
            return Err(Error::SignatureHeader { hook: self.name.clone() });
        }
        Ok(())
    }
}

impl WebhookConfig {
    /// What is wrong with it, naming the field.
    pub fn check(&self) -> Result<(), Error> {
        id::check_name(&self.name).map_err(|why| Error::Name { name: self.name.clone(), why })?;
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(Error::Url { webhook: self.name.clone() });
        }
        for t in &self.types {
            t.parse::<MessageType>().map_err(|_| Error::Type { webhook: self.name.clone(), kind: t.clone() })?;
        }
        Ok(())
    }

    /// The push target it stands for.
    pub fn target(&self) -> clutch_core::push::Target {
        clutch_core::push::Target {
            name: format!("webhook:{}", self.name),
            url: self.url.clone(),
            filter: clutch_store::Filter {
                run_id: self.run_id.clone(),
                agent_id: self.from.clone(),
                to: self.to.clone(),
                ..clutch_store::Filter::default()
            },
            types: self.types.iter().filter_map(|t| t.parse().ok()).collect(),
            secret: self.secret.clone(),
        }
    }
}

/// The `hook` adapter: the inbound hooks, by name.
pub struct Hooks {
    hooks: BTreeMap<String, HookConfig>,
}

impl Hooks {
    pub fn new(hooks: Vec<HookConfig>) -> Hooks {
        Hooks { hooks: hooks.into_iter().map(|h| (h.name.clone(), h)).collect() }
    }

    /// The message `input` becomes, or why not.
    fn message(&self, input: &Inbound) -> Result<Message, Refusal> {
        let hook = self.hooks.get(&input.name).ok_or_else(|| {
            Refusal::new(ErrorCode::NotFound, format!("no hook `{}`", clutch_proto::error::quote(&input.name)))
                .field("name")
        })?;
        // Who sent it comes first: nothing of the body is read before its signature holds.
        let signed = input
            .header(&hook.signature_header)
            .is_some_and(|claimed| clutch_outbound::push::verify(hook.secret.as_bytes(), &input.body, claimed));
        if !signed {
            return Err(Refusal::new(
                ErrorCode::Unauthorized,
                format!("the body is not signed with hook `{}`'s secret ({} header)", hook.name, hook.signature_header),
            ));
        }
        let body: Value = serde_json::from_slice(&input.body).map_err(|e| {
            Refusal::new(
                ErrorCode::InvalidJson,
                format!("the body is not JSON: {}", clutch_proto::error::clip(&e.to_string(), 200)),
            )
        })?;
        let mut mapped = Value::Object(hook.message.clone());
        fill(&mut mapped, &body, input)?;
        let obj = mapped.as_object_mut().expect("a mapping is an object");
        // Ids the mapping leaves out are new, unless the message has an idempotency key: then they derive
        // from it, so a delivery the sender repeats lands in the same run and dedups.
        let key = obj.get("idempotency_key").and_then(Value::as_str).map(str::to_owned);
        for (field, kind) in [("run_id", Kind::Run), ("thread_id", Kind::Thread), ("task_id", Kind::Task)] {
            obj.entry(field).or_insert_with(|| {
                Value::from(match &key {
                    Some(key) => id::derive(kind, seed(&hook.name, field, key)),
                    None => id::generate(kind),
                })
            });
        }
        obj.entry("to").or_insert_with(|| Value::Array(Vec::new()));
        // Parties may be written as their ids: `from = "user:github"`, `to = ["agent:ken"]`.
        if let Some(Value::String(id)) = obj.get("from") {
            let party = serde_json::json!({ "agent_id": id });
            obj.insert("from".into(), party);
        }
        if let Some(Value::Array(to)) = obj.get_mut("to") {
            for r in to.iter_mut() {
                if let Value::String(id) = r {
                    *r = serde_json::json!({ "agent_id": id });
                }
            }
        }
        validate::message(&mapped, &Defaults { now: SystemTime::now() }).map_err(|problems| {
            let mut r = Refusal::from_problems(problems);
            r.message = format!("the mapped message is not valid: {}", r.message);
            r
        })
    }
}

impl Adapter for Hooks {
    fn name(&self) -> &str {
        ADAPTER
    }

    fn can_handle(&self, _message: &Message) -> bool {
        false
    }

    fn inbound<'a>(&'a self, input: &'a Inbound) -> BoxFuture<'a, Result<Vec<Message>, Refusal>> {
        Box::pin(async move { self.message(input).map(|m| vec![m]) })
    }

    fn outbound<'a>(&'a self, _message: &'a Message) -> BoxFuture<'a, Answer> {
        Box::pin(async {
            Answer::Error { code: ErrorCode::ToolUnavailable, message: "hooks make no calls".into(), retryable: false }
        })
    }
}

/// 128 bits that only `hook`, `field` and `key` decide.
fn seed(hook: &str, field: &str, key: &str) -> u128 {
    let mac = clutch_outbound::push::mac(format!("{hook}/{field}").as_bytes(), key.as_bytes());
    u128::from_be_bytes(mac[..16].try_into().expect("a MAC has 32 bytes"))
}

/// Replaces the placeholders of `template` with what `body` and `input`'s headers hold.
fn fill(template: &mut Value, body: &Value, input: &Inbound) -> Result<(), Refusal> {
    match template {
        Value::String(s) => {
            if let Some(whole) = placeholder(s) {
                *template = lookup(whole, body, input)?;
                return Ok(());
            }
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(start) = rest.find('{') {
                let Some(end) = rest[start..].find('}') else { break };
                let inner = &rest[start + 1..start + end];
                out.push_str(&rest[..start]);
                if inner.starts_with('/') || inner.starts_with("header:") {
                    match lookup(inner, body, input)? {
                        Value::String(v) => out.push_str(&v),
                        other => out.push_str(&other.to_string()),
                    }
                } else {
                    out.push_str(&rest[start..=start + end]);
                }
                rest = &rest[start + end + 1..];
            }
            out.push_str(rest);
            *s = out;
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|v| fill(v, body, input)),
        Value::Object(map) => map.values_mut().try_for_each(|v| fill(v, body, input)),
        _ => Ok(()),
    }
}

/// `{/a/b}` or `{header:X}` as the whole of `s`: what is between the braces.
fn placeholder(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    (!inner.contains('{') && (inner.starts_with('/') || inner.starts_with("header:"))).then_some(inner)
}

fn lookup(inner: &str, body: &Value, input: &Inbound) -> Result<Value, Refusal> {
    if let Some(name) = inner.strip_prefix("header:") {
        return input.header(name).map(Value::from).ok_or_else(|| {
            Refusal::new(
                ErrorCode::ValidationFailed,
                format!("the request has no `{}` header", clutch_proto::error::quote(name)),
            )
            .field(format!("header:{}", clutch_proto::error::quote(name)))
        });
    }
    body.pointer(inner).cloned().ok_or_else(|| {
        Refusal::new(ErrorCode::ValidationFailed, format!("{}: not in the body", clutch_proto::error::quote(inner)))
            .field(clutch_proto::error::quote(inner).into_owned())
    })
}

/// Sends the messages `webhooks` select to their URLs until `shutdown` resolves: core's push
/// delivery over HTTP, through the outbound guard's rules (`guard`). A webhook with no saved position
/// starts after `first` (the log's head when the daemon was built).
pub async fn send(
    log: clutch_core::Handle,
    guard: std::sync::Arc<clutch_core::guard::Policy>,
    webhooks: Vec<WebhookConfig>,
    first: u64,
    shutdown: impl std::future::Future<Output = ()>,
) {
    if webhooks.is_empty() {
        return;
    }
    let targets = webhooks.iter().map(WebhookConfig::target).collect();
    match clutch_outbound::push::Http::new(guard, clutch_outbound::push::TIMEOUT) {
        Ok(http) => {
            let options = clutch_core::push::Options::default();
            clutch_core::push::run_to(log, std::sync::Arc::new(http), targets, first, options, shutdown).await;
        }
        Err(e) => tracing::error!(error = %e, "webhooks cannot start their HTTP client"),
    }
}
