//! How the runner works, the `[positions]` section of the config file: the positions it runs, the
//! agents it spawns, and its sessions' limits and timeouts.

use std::sync::Arc;
use std::time::Duration;

use clutch_core::options::{Invalid, positive};
use clutch_core::session::Limits;

use super::session::Settings;
use crate::skill::Catalog;

/// Positions: teams of agents run from SKILL.md files (the six shipped, and the operator's own in
/// `<config_dir>/positions/`, as `NAME.md` or `NAME/SKILL.md`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// The positions served (the daemon's: the shipped ones and `<config_dir>/positions/`).
    #[serde(skip)]
    pub catalog: Arc<Catalog>,
    /// The provider of the LLM agents spawned for roles nobody was named for. Absent: the first
    /// declared provider; with none, every role must be named at invocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Their model (absent: the provider's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Messages one session may carry (`SESSION_MAX_MESSAGES`).
    pub max_messages: u32,
    /// Messages one member may send in a session within a minute.
    pub agent_messages_per_minute: u32,
    /// How long a mirror's comparisons and a circle's votes are waited for before synthesis is
    /// forced with the answers at hand.
    #[serde(with = "clutch_core::options::duration")]
    #[schemars(with = "clutch_core::options::Text")]
    pub consensus_timeout: Duration,
    /// How long a session may take in all before it ends in `TIMEOUT` (at least 1s).
    #[serde(with = "clutch_core::options::duration")]
    #[schemars(with = "clutch_core::options::Text")]
    pub session_timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        let limits = Limits::default();
        Options {
            catalog: Arc::new(Catalog::load(None).unwrap_or_else(|_| unreachable!("the shipped positions parse"))),
            provider: None,
            model: None,
            max_messages: limits.max_messages,
            agent_messages_per_minute: limits.per_agent_per_minute,
            consensus_timeout: Duration::from_secs(300),
            session_timeout: Duration::from_secs(3600),
        }
    }
}

impl Options {
    /// The default runner over `catalog`: what a re-execution needs, whose sessions take their
    /// limits from what they recorded.
    pub fn with_catalog(catalog: Catalog) -> Options {
        Options { catalog: Arc::new(catalog), ..Options::default() }
    }

    /// The bus limits of every session.
    pub fn limits(&self) -> Limits {
        Limits { max_messages: self.max_messages, per_agent_per_minute: self.agent_messages_per_minute }
    }

    /// The rules types alone do not say; the first one broken.
    pub fn check(&self) -> Result<(), Invalid> {
        positive("max_messages", u64::from(self.max_messages))?;
        positive("agent_messages_per_minute", u64::from(self.agent_messages_per_minute))?;
        if self.session_timeout < Duration::from_secs(1) {
            return Err(Invalid::new("session_timeout", "must be at least 1s"));
        }
        Ok(())
    }
}

impl From<&Options> for Settings {
    fn from(options: &Options) -> Settings {
        Settings {
            provider: options.provider.clone(),
            model: options.model.clone(),
            limits: options.limits(),
            consensus_timeout: options.consensus_timeout,
            session_timeout: options.session_timeout,
        }
    }
}
