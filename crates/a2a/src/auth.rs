//! Who calls the A2A endpoint (seed 003's trust tiers). An API key (`X-API-Key`, or as a bearer
//! token) names a partner and the skills it may ask for; a daemon API token (org.yaml) is a caller as
//! on the other faces; a caller with neither is refused, sent to a screening skill, or allowed, as the
//! operator says (allowed by default only while no key and no token is configured). Each caller's
//! tasks are its own: it reads, cancels and answers only those it started, unless an admin.

use clutch_core::Engine;
use clutch_core::access::{Caller, Role};
use subtle::ConstantTimeEq;

use crate::Options;

/// A partner's API key.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    /// Names the partner: its tasks are sent as `user:a2a.<name>`.
    pub name: String,
    /// The key itself (read from the environment by the binary; never shown).
    pub secret: String,
    /// The skills it may ask for; empty: any.
    pub skills: Vec<String>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("name", &self.name).field("secret", &"***").field("skills", &self.skills).finish()
    }
}

/// What happens to a caller with no key and no token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Unauthenticated {
    /// Allowed while no key and no API token is configured, else refused.
    #[default]
    Auto,
    Refuse,
    /// Allowed, but every message it sends goes to agents with this skill (a screening agent),
    /// whatever it asks for.
    Screen(String),
    Allow,
}

/// A caller, once identified.
#[derive(Debug, Clone)]
pub(crate) struct Who {
    /// The sender of its messages, and the requester of its tasks.
    pub(crate) from: String,
    /// The skills it may ask for; `None`: any.
    pub(crate) skills: Option<Vec<String>>,
    /// Its messages go to this skill, whatever they ask for.
    pub(crate) screen: Option<String>,
    /// It may see every task (an admin token, or an open hub).
    pub(crate) sees_all: bool,
}

/// Why a caller is turned away: 401 (no or a wrong credential) or 403.
pub(crate) struct Refused {
    pub(crate) status: u16,
    pub(crate) message: String,
}

/// Whether the hub asks for credentials at all (the card then declares its schemes).
pub(crate) fn guarded(engine: &Engine, options: &Options) -> bool {
    !options.keys.is_empty()
        || engine.options().policy.tokens_required()
        || matches!(options.unauthenticated, Unauthenticated::Refuse | Unauthenticated::Screen(_))
}

/// Identifies the caller of a request with these `X-API-Key` and bearer credentials.
pub(crate) fn identify(
    engine: &Engine,
    options: &Options,
    api_key: Option<&str>,
    bearer: Option<&str>,
) -> Result<Who, Refused> {
    let partner = |k: &Key| Who {
        from: format!("user:a2a.{}", k.name),
        skills: (!k.skills.is_empty()).then(|| k.skills.clone()),
        screen: None,
        sees_all: false,
    };
    let key_of = |given: &str| options.keys.iter().find(|k| bool::from(k.secret.as_bytes().ct_eq(given.as_bytes())));
    if let Some(given) = api_key {
        return key_of(given).map(partner).ok_or(Refused { status: 401, message: "unknown API key".into() });
    }
    if let Some(token) = bearer {
        if let Some(k) = key_of(token) {
            return Ok(partner(k));
        }
        let Some(grant) = engine.options().policy.authenticate(token) else {
            return Err(Refused { status: 401, message: "unknown bearer token".into() });
        };
        let caller = Caller(Some(grant.clone()));
        caller.may_write().map_err(|r| Refused { status: 403, message: r.message })?;
        let from = match (&grant.role, &grant.agent_id) {
            (Role::Agent, Some(agent)) => agent.clone(),
            _ => format!("user:a2a.{}", grant.name),
        };
        return Ok(Who { from, skills: None, screen: None, sees_all: grant.role == Role::Admin });
    }
    let anonymous = |screen: Option<String>, sees_all: bool| Who {
        from: if sees_all { "user:a2a".to_owned() } else { "user:a2a.anonymous".to_owned() },
        skills: None,
        screen,
        sees_all,
    };
    match &options.unauthenticated {
        Unauthenticated::Allow => Ok(anonymous(None, true)),
        Unauthenticated::Auto if !guarded(engine, options) => Ok(anonymous(None, true)),
        Unauthenticated::Screen(skill) => Ok(anonymous(Some(skill.clone()), false)),
        Unauthenticated::Auto | Unauthenticated::Refuse => Err(Refused {
            status: 401,
            message: "this hub needs a credential: an API key in X-API-Key, or a bearer token".into(),
        }),
    }
}
