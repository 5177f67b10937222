//! How an agent or a person works the routed tasks given to it without a push endpoint: it reads its
//! inbox (waiting for work if it likes) and replies to a task (accepted, completed with a result, or
//! failed). Every face (HTTP, MCP, the CLI, the UI) takes [`Reply`] as it is; the engine turns it into
//! the protocol's `task.accept`, `task.result` and `task.error`, checked by the same gate as any other.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The longest an inbox read waits for work.
pub const WAIT_MAX: Duration = Duration::from_secs(60);

/// What a reply says of the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Taken up: its sender stops waiting for an accept (the work itself may take long).
    Accepted,
    /// Done, with `text` and/or `result`.
    Completed,
    /// Not done, with `error`.
    Failed,
}

/// A reply to a routed task from the agent (or person) it was given to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub status: Status,
    /// The answer, for `completed` (the result's `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Structured result fields, for `completed` (merged with `text` into the result's payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Map<String, Value>>,
    /// Why it could not be done, for `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `failed`: whether trying again (maybe with another agent) could succeed.
    #[serde(default)]
    pub retryable: bool,
}
