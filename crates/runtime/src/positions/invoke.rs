//! What the runner is asked to do and what it asks its members: an invocation's payload, and the
//! payload type of a turn's request.

use serde::{Deserialize, Serialize};

/// What a turn's request carries (the daemon's own payload type).
pub const TURN_PAYLOAD: &str = "clutch.position.turn.v1";

/// An invocation: the payload of a `task.request` to [`RUNNER`](super::RUNNER) (as
/// `Engine::position_invoke` writes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invoke {
    /// The position's name (`mirror`).
    pub position: String,
    /// The text a `task.request` usually carries (for people reading the log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(flatten)]
    pub invocation: clutch_core::session::Invocation,
}
