//! Adapters: the one way external protocols enter and leave Clutch (seed 000 §7). An [`Adapter`] has
//! a name, says which messages it carries out ([`Adapter::can_handle`]), turns raw input of its
//! protocol into messages ([`Adapter::inbound`]) and carries a message out ([`Adapter::outbound`]).
//! The daemon keeps its adapters in one [`Registry`], and the dispatcher ([`crate::dispatch::run`])
//! hands them the `tool.call`s of the log: an MCP client's tools today (crate `tools`); webhooks, A2A
//! remotes and framework bridges are adapters too. The engine holds the registry, so nothing here
//! names the engine.
//!
//! The [`Registry`] also holds the card checks the gate runs on every registration ([`CardCheck`], from
//! faces that run the agents cards describe). New adapters implement the trait in their own crate and are
//! added to the registry by their `Face` in `app`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use clutch_proto::{ErrorCode, Message};
use serde_json::Value;

use crate::{Refusal, view};

/// A boxed future, as adapters return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What carrying a call out came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The tool answered: its content blocks and, if it gave one, its structured answer.
    Result { content: Vec<Value>, structured_content: Option<Value> },
    /// It did not: a stable code (`TOOL_UNAVAILABLE`, `TOOL_TIMEOUT`, `TOOL_FAILED`, ...), words,
    /// and whether the same call may succeed if made again.
    Error { code: ErrorCode, message: String, retryable: bool },
}

/// Raw input for an adapter, as a face received it.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// What the input is addressed to (a hook's name).
    pub name: String,
    /// The request's headers, names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
}

impl Inbound {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One external protocol, in and out.
pub trait Adapter: Send + Sync + 'static {
    /// `mcp`, `hook`...: the prefix of what it serves (`mcp:files/read_file`).
    fn name(&self) -> &str;

    /// Whether it carries `message` out (a `tool.call` naming one of its tools).
    fn can_handle(&self, message: &Message) -> bool;

    /// Raw input of its protocol as messages for the log (a webhook's body). Adapters that take none
    /// refuse.
    fn inbound<'a>(&'a self, _input: &'a Inbound) -> BoxFuture<'a, Result<Vec<Message>, Refusal>> {
        let why = format!("the {} adapter takes no input of its own", self.name());
        Box::pin(async move { Err(Refusal::new(ErrorCode::NotFound, why)) })
    }

    /// Carries `message` out (a call of one of its tools). It bounds its own time (its timeouts).
    fn outbound<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Answer>;

    /// What it serves now, for listings.
    fn servers(&self) -> Vec<view::ToolServer> {
        Vec::new()
    }

    /// What the tool `message` calls does, as its server describes it (`None`: unknown). It may
    /// wait to know (a server still connecting). Decides whether a call needs approval and whether
    /// one whose outcome is unknown may be made again.
    fn annotations<'a>(&'a self, _message: &'a Message) -> BoxFuture<'a, Option<view::ToolAnnotations>> {
        Box::pin(async { None })
    }
}

/// The daemon's adapters. Cheap to clone; clones share the list.
#[derive(Clone, Default)]
pub struct Registry {
    adapters: Arc<RwLock<Vec<Arc<dyn Adapter>>>>,
    cards: Arc<RwLock<Vec<CardCheck>>>,
}

/// A check of every card before it is registered, from a face that runs agents its cards describe
/// (the runtime refuses a `meta.runtime` it could not run). The refusal's field is under `payload.`.
pub type CardCheck = Arc<dyn Fn(&clutch_proto::AgentCard) -> Result<(), Refusal> + Send + Sync>;

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.list().iter().map(|a| a.name().to_owned()).collect();
        f.debug_struct("Registry").field("adapters", &names).finish()
    }
}

impl Registry {
    pub fn add(&self, adapter: Arc<dyn Adapter>) {
        self.adapters.write().unwrap_or_else(|e| e.into_inner()).push(adapter);
    }

    /// Adds a check every card must pass to be registered.
    pub fn add_card_check(&self, check: CardCheck) {
        self.cards.write().unwrap_or_else(|e| e.into_inner()).push(check);
    }

    /// Runs the card checks: the first refusal.
    pub fn check_card(&self, card: &clutch_proto::AgentCard) -> Result<(), Refusal> {
        self.cards.read().unwrap_or_else(|e| e.into_inner()).iter().try_for_each(|check| check(card))
    }

    pub fn list(&self) -> Vec<Arc<dyn Adapter>> {
        self.adapters.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The adapter named `name`, if there is one.
    pub fn named(&self, name: &str) -> Option<Arc<dyn Adapter>> {
        self.first(|a| a.name() == name)
    }

    /// The adapter that carries `message` out, if one does.
    pub fn find(&self, message: &Message) -> Option<Arc<dyn Adapter>> {
        self.first(|a| a.can_handle(message))
    }

    fn first(&self, pick: impl Fn(&dyn Adapter) -> bool) -> Option<Arc<dyn Adapter>> {
        self.adapters.read().unwrap_or_else(|e| e.into_inner()).iter().find(|a| pick(a.as_ref())).cloned()
    }

    /// Every server of tools, by name.
    pub fn tools(&self) -> view::Tools {
        let mut servers: Vec<view::ToolServer> = self.list().iter().flat_map(|a| a.servers()).collect();
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        view::Tools { servers }
    }
}
