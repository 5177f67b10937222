//! Who may do what: API token roles (admin, agent, observer) and the rules every face applies to a
//! caller. An agent token acts only as its own agent id; an observer only reads.

use clutch_proto::{ErrorCode, Message};

use crate::Refusal;

pub use crate::config::{TokenGrant as Grant, TokenRole as Role};

/// The caller of a request: `None` when the daemon runs without tokens (loopback only).
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Grant>);

impl Caller {
    /// May the caller change anything at all?
    pub fn may_write(&self) -> Result<(), Refusal> {
        match &self.0 {
            Some(g) if g.role == Role::Observer => {
                Err(Refusal::new(ErrorCode::Forbidden, format!("token `{}` is an observer: it may only read", g.name)))
            }
            _ => Ok(()),
        }
    }

    /// May the caller act as `agent_id` (send as it, register it, heartbeat for it)?
    pub fn may_act_as(&self, agent_id: &str, field: &str) -> Result<(), Refusal> {
        self.may_write()?;
        match &self.0 {
            Some(g) if g.role == Role::Agent && g.agent_id.as_deref() != Some(agent_id) => Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("token `{}` acts as {}, not {agent_id}", g.name, g.agent_id.as_deref().unwrap_or("no agent")),
            )
            .field(field)),
            _ => Ok(()),
        }
    }

    /// The agent a write acts as: the one named (which the caller must be allowed to act as) or, for
    /// an agent token, its own; `None` when an admin (or an open daemon) names none.
    pub fn acting_agent(&self, named: Option<&str>) -> Result<Option<String>, Refusal> {
        self.may_write()?;
        match named {
            Some(agent) => {
                self.may_act_as(agent, "agent_id")?;
                Ok(Some(agent.to_owned()))
            }
            None => Ok(self.0.as_ref().filter(|g| g.role == Role::Agent).and_then(|g| g.agent_id.clone())),
        }
    }

    /// May the caller send `message`?
    pub fn may_send(&self, message: &Message) -> Result<(), Refusal> {
        self.may_act_as(&message.from.agent_id, "from.agent_id")
    }
}

/// Looks tokens up (org.yaml's `tokens`).
pub trait Tokens: Send + Sync {
    fn authenticate(&self, token: &str) -> Option<Grant>;
}

impl Tokens for crate::config::Config {
    fn authenticate(&self, token: &str) -> Option<Grant> {
        crate::config::Config::authenticate(self, token)
    }
}
