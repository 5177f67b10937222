//! Who may do what: API token roles (admin, agent, approver, observer) and the rules every face
//! applies to a caller. An agent token acts only as its own agent id; an approver reads and decides
//! tool calls waiting for approval; an observer only reads. Each route or tool
//! states the [`Access`] it needs, and a face checks it, and which agent a request acts as, before
//! it reads the request any further.

use clutch_proto::{ErrorCode, Message};
use serde_json::Value;

use crate::Refusal;

/// What a route or a tool needs from its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, with or without a token: health probes, the web UI's static files.
    Open,
    /// Any known token: reads.
    Read,
    /// A token that may change things: an admin, or an agent (acting only as itself).
    Write,
    /// A person who may approve or deny tool calls: an admin or an approver.
    Approve,
    /// The operator's own work (a retention pass): an admin.
    Admin,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Open => "open",
            Access::Read => "read",
            Access::Write => "write",
            Access::Approve => "approve",
            Access::Admin => "admin",
        }
    }
}

/// What a token lets its bearer do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Everything.
    Admin,
    /// Act as one agent.
    Agent,
    /// Read, and approve or deny tool calls waiting for approval.
    Approver,
    /// Read only.
    Observer,
}

impl Role {
    pub const ALL: &'static [Role] = &[Role::Admin, Role::Agent, Role::Approver, Role::Observer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Agent => "agent",
            Role::Approver => "approver",
            Role::Observer => "observer",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a valid token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub name: String,
    pub role: Role,
    pub agent_id: Option<String>,
}

/// The caller of a request: `None` when the daemon runs without tokens (loopback only).
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Grant>);

impl Caller {
    /// May the caller use what needs `access`? Decided by its role alone, so a face asks before it
    /// reads a request's body. That a token is needed at all (for anything but [`Access::Open`]) is
    /// the face's authentication, which comes first.
    pub fn may(&self, access: Access) -> Result<(), Refusal> {
        match access {
            Access::Open | Access::Read => Ok(()),
            Access::Write => self.may_write(),
            Access::Approve => self.may_approve(),
            Access::Admin => self.may_administer(),
        }
    }

    /// May the caller approve or deny tool calls? An admin or an approver (anyone, without tokens).
    pub fn may_approve(&self) -> Result<(), Refusal> {
        match &self.0 {
            Some(g) if !matches!(g.role, Role::Admin | Role::Approver) => Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("token `{}` is an {}: only admins and approvers decide tool calls", g.name, g.role),
            )),
            _ => Ok(()),
        }
    }

    /// Who decides, as a decision records it: `user:<token name>`, or `user:local` on a daemon
    /// without tokens.
    pub fn person(&self) -> String {
        match &self.0 {
            Some(g) => format!("user:{}", g.name),
            None => "user:local".to_owned(),
        }
    }

    /// Before a request's body is validated: may the caller act as the agent the raw `body` names
    /// at `field` (a dotted path, such as `from.agent_id`)? An agent token naming another agent is
    /// refused (`FORBIDDEN`, with `field`) whatever else the body holds. When the field is absent or
    /// not a string, nothing is decided here: validation and the handler's own checks follow.
    pub fn may_act_as_in(&self, body: &Value, field: &str) -> Result<(), Refusal> {
        let named = field.split('.').try_fold(body, |value, key| value.get(key)).and_then(Value::as_str);
        match named {
            Some(agent) => self.may_act_as(agent, field),
            None => Ok(()),
        }
    }

    /// May the caller run the operator's own work (a retention pass)? An admin (anyone, without
    /// tokens).
    pub fn may_administer(&self) -> Result<(), Refusal> {
        match &self.0 {
            Some(g) if g.role != Role::Admin => Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("token `{}` is an {}: only admins run the operator's passes", g.name, g.role),
            )),
            _ => Ok(()),
        }
    }

    /// May the caller change anything at all?
    pub fn may_write(&self) -> Result<(), Refusal> {
        match &self.0 {
            Some(g) if matches!(g.role, Role::Observer | Role::Approver) => Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("token `{}` is an {}: it may only read (and an approver decide tool calls)", g.name, g.role),
            )),
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
