//! Who may do what: API token roles (admin, agent, observer) and the rules every face applies to a
//! caller. An agent token acts only as its own agent id; an observer only reads.

use clutch_proto::{ErrorCode, Message};

use crate::Refusal;

/// A token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything, sending as any agent or user (never as the daemon).
    Admin,
    /// Sends, registers and heartbeats only as its own `agent_id` (an `agent:` or `user:` id).
    Agent,
    /// Reads only.
    Observer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Agent => "agent",
            Role::Observer => "observer",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "admin" => Ok(Role::Admin),
            "agent" => Ok(Role::Agent),
            "observer" => Ok(Role::Observer),
            other => Err(format!("unknown role `{other}`; roles are admin, agent, observer")),
        }
    }
}

/// What an authenticated token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token's name, for logs.
    pub name: String,
    pub role: Role,
    /// For the agent role: the one identity it acts as.
    pub agent_id: Option<String>,
}

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

    /// May the caller send `message`?
    pub fn may_send(&self, message: &Message) -> Result<(), Refusal> {
        self.may_act_as(&message.from.agent_id, "from.agent_id")
    }
}

/// Looks tokens up (org.yaml's `tokens`).
pub trait Tokens: Send + Sync {
    fn authenticate(&self, token: &str) -> Option<Grant>;
}
