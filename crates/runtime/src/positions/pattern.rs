//! The closed set of patterns, and the one place that dispatches to their modules: each
//! pattern's rules (which the SKILL.md parser checks a position against) and its driver.

use serde_json::Value;

use super::error::Halt;
use super::session::Session;
use super::world::World;
use super::{circle, mirror, pyramid, relay, solo, swarm};
use crate::skill::{Pattern, Rules};

impl Pattern {
    /// What the pattern requires of a position: its module's rules.
    pub(crate) fn rules(self) -> &'static Rules {
        match self {
            Pattern::Solo => &solo::RULES,
            Pattern::Mirror => &mirror::RULES,
            Pattern::Relay => &relay::RULES,
            Pattern::Pyramid => &pyramid::RULES,
            Pattern::Swarm => &swarm::RULES,
            Pattern::Circle => &circle::RULES,
        }
    }
}

/// Drives the session's pattern, its members cast: the session's result, or why it stopped.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    match s.skill.pattern {
        Pattern::Solo => solo::drive(s).await,
        Pattern::Mirror => mirror::drive(s).await,
        Pattern::Relay => relay::drive(s).await,
        Pattern::Pyramid => pyramid::drive(s).await,
        Pattern::Swarm => swarm::drive(s).await,
        Pattern::Circle => circle::drive(s).await,
    }
}
