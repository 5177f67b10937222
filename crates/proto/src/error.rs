//! The one table of stable error codes. Every face (HTTP, WebSocket, MCP, A2A, CLI) reports failures
//! with these codes, each mapped here, once, to an HTTP status, a JSON-RPC code and retryability.

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($( $variant:ident = $name:literal, $http:literal, $rpc:literal, $retry:literal, $doc:literal; )*) => {
        /// A stable, machine-readable error code. The string form never changes once released.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $( #[doc = $doc] #[serde(rename = $name)] $variant, )*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The stable string form, e.g. `VALIDATION_FAILED`.
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// The HTTP status this code is answered with.
            pub fn http_status(self) -> u16 {
                match self { $(ErrorCode::$variant => $http,)* }
            }

            /// The JSON-RPC error code used when this error is a protocol-level error (MCP, A2A).
            pub fn jsonrpc_code(self) -> i32 {
                match self { $(ErrorCode::$variant => $rpc,)* }
            }

            /// Whether the same request may succeed if simply retried later.
            pub fn retryable(self) -> bool {
                match self { $(ErrorCode::$variant => $retry,)* }
            }

            /// One line describing when the code is used.
            pub fn description(self) -> &'static str {
                match self { $(ErrorCode::$variant => $doc,)* }
            }
        }
    };
}

codes! {
    InvalidJson = "INVALID_JSON", 400, -32700, false, "The body is not well-formed JSON or not the expected shape.";
    ValidationFailed = "VALIDATION_FAILED", 400, -32602, false, "The input is well-formed but breaks a rule; every problem is listed with its path.";
    UnknownType = "UNKNOWN_TYPE", 400, -32602, false, "The message `type` is not one of the protocol's message types.";
    IdConflict = "ID_CONFLICT", 409, -32010, false, "A message with this id is already stored with a different body.";
    Duplicate = "DUPLICATE", 409, -32011, false, "The request repeats one already applied (used where a duplicate cannot be answered as success).";
    NotFound = "NOT_FOUND", 404, -32004, false, "The route or resource does not exist.";
    MessageNotFound = "MESSAGE_NOT_FOUND", 404, -32004, false, "No message with this id is stored.";
    RunNotFound = "RUN_NOT_FOUND", 404, -32004, false, "No event belongs to this run.";
    TaskNotFound = "TASK_NOT_FOUND", 404, -32004, false, "No task with this id exists.";
    AgentNotFound = "AGENT_NOT_FOUND", 404, -32004, false, "No agent with this id is registered.";
    ArtifactNotFound = "ARTIFACT_NOT_FOUND", 404, -32004, false, "No artifact with this content hash is stored.";
    SchemaNotFound = "SCHEMA_NOT_FOUND", 404, -32004, false, "No schema is published under this name.";
    InvalidTransition = "INVALID_TRANSITION", 409, -32012, false, "The requested state change is not allowed from the current state.";
    LeaseLost = "LEASE_LOST", 409, -32013, false, "The caller no longer holds the lease it is acting under.";
    AlreadyClaimed = "ALREADY_CLAIMED", 409, -32020, false, "Another agent holds the task's claim; `problems` names it at `already_claimed_by`.";
    GitFailed = "GIT_FAILED", 409, -32021, false, "A git command refused (the branch exists, the worktree has changes...); the message carries git's words.";
    TargetNotAllowed = "TARGET_NOT_ALLOWED", 400, -32022, false, "A URL aims at a network the outbound guard refuses (loopback, private, link-local...); the message names the rule and the config key that allows it.";
    PathNotAllowed = "PATH_NOT_ALLOWED", 400, -32023, false, "A path leads outside the directories the operator declared (after `..` and symlinks are resolved); the message names them.";
    BudgetExceeded = "BUDGET_EXCEEDED", 429, -32014, false, "The agent's or run's budget is spent.";
    RateLimited = "RATE_LIMITED", 429, -32015, true, "Too many requests; retry after the indicated delay.";
    Unauthorized = "UNAUTHORIZED", 401, -32001, false, "Credentials or a signature are missing or wrong.";
    Forbidden = "FORBIDDEN", 403, -32003, false, "The caller is known but may not do this.";
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", 413, -32016, false, "The body or artifact is larger than the configured limit.";
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", 415, -32602, false, "The request's Content-Type is not accepted by this route.";
    MethodNotAllowed = "METHOD_NOT_ALLOWED", 405, -32601, false, "The route exists but not with this HTTP method.";
    SlowConsumer = "SLOW_CONSUMER", 409, -32017, true, "A stream subscriber fell too far behind and was cut off; resume with `after`.";
    DeliveryFailed = "DELIVERY_FAILED", 502, -32018, false, "A message could not be delivered to its agent within the retry policy.";
    Unavailable = "UNAVAILABLE", 503, -32019, true, "The daemon is starting, shutting down or its store is unreachable.";
    Internal = "INTERNAL", 500, -32603, true, "An unexpected failure; details are in the daemon's log.";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error body every face returns: `{code, message, field?, retryable, hint?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Every problem, when validation found several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<crate::Problem>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            field: None,
            retryable: code.retryable(),
            hint: None,
            problems: Vec::new(),
        }
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// A `VALIDATION_FAILED` (or `UNKNOWN_TYPE`) body listing every problem; `field` is the first one's.
    pub fn from_problems(problems: crate::Problems) -> Self {
        let list = problems.into_vec();
        let code = if list.len() == 1 && list[0].path == "type" && list[0].message.starts_with("unknown message type") {
            ErrorCode::UnknownType
        } else {
            ErrorCode::ValidationFailed
        };
        let message = match list.as_slice() {
            [one] => format!("{}: {}", one.path, one.message),
            many => format!("{} problems, first: {}: {}", many.len(), many[0].path, many[0].message),
        };
        ErrorBody { field: list.first().map(|p| p.path.clone()), problems: list, ..ErrorBody::new(code, message) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_upper_snake_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(s.chars().all(|c| c.is_ascii_uppercase() || c == '_'), "{s}");
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            let back: ErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, *code);
            assert!((400..600).contains(&code.http_status()));
        }
    }
}
