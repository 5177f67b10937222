//! The one table of stable error codes. Every face (HTTP, WebSocket, MCP, A2A, CLI) reports failures
//! with these codes, each mapped here, once, to an HTTP status, a JSON-RPC code and retryability; and
//! the error body they serialize, bounded: however large the input, an error quotes a short prefix of
//! it and lists a bounded number of problems, so no answer is larger than a small constant.
//!
//! The bounds are the constants here: at most `QUOTE_MAX` characters of any input are quoted ([`quote`]),
//! messages, paths and problems are cut to `MESSAGE_MAX`, `PATH_MAX` and `PROBLEM_MAX` ([`bound_text`]),
//! and the first `PROBLEMS_MAX` problems are kept while all are counted; a body is bounded when it is
//! built and again when it is written. A refusal's next step is named by intent ([`Next`]: register,
//! heartbeat, claim the task, show it, the next tasks, the workflows), never as a route or a tool: each
//! face words it as its own.

use std::borrow::Cow;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

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
    PositionNotFound = "POSITION_NOT_FOUND", 404, -32004, false, "No position (team of agents from a SKILL.md) by this name is served.";
    SessionNotFound = "SESSION_NOT_FOUND", 404, -32004, false, "No position session with this id exists.";
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
    HostNotAllowed = "HOST_NOT_ALLOWED", 403, -32030, false, "The request's `Host` is not a name the daemon answers to (loopback, `http.allowed_hosts`, the public URL's): what a page reaching it by a rebound DNS name sends.";
    OriginNotAllowed = "ORIGIN_NOT_ALLOWED", 403, -32031, false, "The request comes from a web page (`Origin`) that is neither the daemon's own nor in `http.allowed_origins`; `null` included.";
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", 413, -32016, false, "The body or artifact is larger than the configured limit.";
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", 415, -32602, false, "The request's Content-Type is not accepted by this route.";
    MethodNotAllowed = "METHOD_NOT_ALLOWED", 405, -32601, false, "The route exists but not with this HTTP method.";
    SlowConsumer = "SLOW_CONSUMER", 409, -32017, true, "A stream subscriber fell too far behind and was cut off; resume with `after`.";
    DeliveryFailed = "DELIVERY_FAILED", 502, -32018, false, "A message could not be delivered to its agent within the retry policy.";
    Unavailable = "UNAVAILABLE", 503, -32019, true, "The daemon is starting, shutting down or its store is unreachable.";
    ToolUnavailable = "TOOL_UNAVAILABLE", 503, -32024, true, "The tool's server is not connected (starting, restarting or gone); the call was not made.";
    ToolTimeout = "TOOL_TIMEOUT", 504, -32025, false, "The tool did not answer within its timeout; it may have acted (retryable only when the tool is read-only or idempotent).";
    ToolFailed = "TOOL_FAILED", 502, -32026, false, "The tool ran and reported an error; the message carries its words.";
    ToolDenied = "TOOL_DENIED", 403, -32028, false, "The call waited for approval and a person denied it, or no one decided in time (then retryable); it was not made.";
    ToolInDoubt = "TOOL_IN_DOUBT", 502, -32027, false, "The call was started but its outcome is unknown (the daemon or the tool's server stopped mid-call); it is not run again unless the tool is read-only or idempotent.";
    LoopDetected = "LOOP_DETECTED", 409, -32029, false, "The message repeats what its sender already said in this session (same type and content) and was not delivered; say something new.";
    MaxTurns = "MAX_TURNS", 422, -32032, false, "A built-in agent's model did not finish the task within the agent's `max_turns` calls.";
    TaskTimeout = "TASK_TIMEOUT", 504, -32033, true, "A built-in agent's task took longer than the agent's `task_timeout_ms`; it may succeed if tried again.";
    LlmUnavailable = "LLM_UNAVAILABLE", 503, -32034, true, "The model's provider could not be reached or was overloaded (network, rate limit, 5xx) after the retries; the call may succeed later.";
    LlmFailed = "LLM_FAILED", 502, -32035, false, "The model's provider refused the call (request, credentials, model) or answered something unreadable; the message carries its words.";
    ReplayDiverged = "REPLAY_DIVERGED", 409, -32036, false, "Replaying a run, the agent loop made a model call the recorded run never made.";
    NoAgentForRole = "NO_AGENT_FOR_ROLE", 409, -32037, false, "A position's role has no agent to play it (none registered, spawned or matching).";
    SpawnFailed = "SPAWN_FAILED", 502, -32038, false, "An agent a position session needs could not be started (its card is invalid or the spawn failed).";
    AgentFailed = "AGENT_FAILED", 502, -32039, false, "An agent of a position session failed its turn (a warning: the session goes on without it).";
    AllAgentsFailed = "ALL_AGENTS_FAILED", 502, -32040, false, "Every agent of a position session failed its turn.";
    RelayBroken = "RELAY_BROKEN", 502, -32041, false, "An agent of a relay position failed its leg, so the relay cannot go on.";
    LeadFailed = "LEAD_FAILED", 502, -32042, false, "The lead of a pyramid position failed to decompose the work or to synthesise the results.";
    SessionTimeout = "SESSION_TIMEOUT", 504, -32043, false, "A position session took longer than `positions.session_timeout_ms`.";
    SessionWriteFailed = "SESSION_WRITE_FAILED", 503, -32044, false, "A position session could not write to the event log.";
    SessionReadFailed = "SESSION_READ_FAILED", 503, -32045, false, "A position session could not read the event log.";
    NoAgentAvailable = "NO_AGENT_AVAILABLE", 503, -32046, false, "The task waited its `queue_timeout` for an agent that can take it (busy, stale, offline or out of budget) and none came free.";
    NoEligibleAgent = "NO_ELIGIBLE_AGENT", 422, -32047, false, "No registered agent meets the task's `requires` (the routing decision says why each was excluded).";
    AgentUnavailable = "AGENT_UNAVAILABLE", 503, -32048, true, "The agent working the task went offline (no heartbeat for `offline_after`); the task is routed again.";
    TaskFailed = "TASK_FAILED", 502, -32049, false, "The agent ended the task as failed, saying why in its own words.";
    A2aRefused = "A2A_REFUSED", 502, -32050, false, "A remote A2A agent refused the task.";
    A2aUnreachable = "A2A_UNREACHABLE", 503, -32051, true, "A remote A2A agent could not be reached within the retry policy.";
    A2aRejected = "A2A_REJECTED", 502, -32052, false, "A remote A2A agent rejected the task (`TASK_STATE_REJECTED`).";
    A2aCanceled = "A2A_CANCELED", 409, -32053, false, "A remote A2A agent canceled the task (`TASK_STATE_CANCELED`).";
    A2aFailed = "A2A_FAILED", 502, -32054, false, "A remote A2A agent ended the task as failed (`TASK_STATE_FAILED`).";
    UnexpectedResponse = "UNEXPECTED_RESPONSE", 502, -32055, false, "A client got an answer that is not the daemon's error body (a proxy's page, a bare status); the message carries what it said.";
    Internal = "INTERNAL", 500, -32603, true, "An unexpected failure; details are in the daemon's log.";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much of one input an error quotes (a field name, a value, a method): the protocol's longest
/// tokens (a name, a payload type, a trace id) are 128 characters, so input that could be valid is
/// quoted whole and only what is too long to be valid anyway is cut.
pub const QUOTE_MAX: usize = 128;
/// Longest error message or hint: a sentence quoting a few inputs (the longest the protocol writes,
/// an unknown `type` with the list of known ones, is under 400 characters).
pub const MESSAGE_MAX: usize = 1024;
/// Longest problem message: one rule and the input it quotes.
pub const PROBLEM_MAX: usize = 512;
/// Longest `field` or problem path: a few field names (each quoted to [`QUOTE_MAX`]) and indices.
pub const PATH_MAX: usize = 256;
/// Most problems an error lists; its message says how many there were. Enough to fix a document in
/// one round trip in practice, and what a client shows a person.
pub const PROBLEMS_MAX: usize = 20;

/// `text` cut to at most `max` characters (at a character boundary), ending in `…` when cut.
/// Cutting what was cut changes nothing.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let end = text.char_indices().nth(max.saturating_sub(1)).map_or(0, |(i, _)| i);
            Cow::Owned(format!("{}…", &text[..end]))
        }
    }
}

/// A piece of input as an error quotes it: at most [`QUOTE_MAX`] characters.
pub fn quote(input: &str) -> Cow<'_, str> {
    clip(input, QUOTE_MAX)
}

/// A message bounded as errors are: each quoted span in it (between a pair of backticks or of
/// double quotes, as this crate and serde quote input) cut to [`QUOTE_MAX`] characters, then the
/// whole to `max`. Messages made elsewhere (serde's, a schema validator's) are bounded alike. Input
/// holding a quote character shifts the pairing, so some prose may be cut as if quoted: the whole
/// stays within `max` either way.
pub fn bound_text(text: &str, max: usize) -> Cow<'_, str> {
    let quotes = clip_quotes(text);
    match clip(&quotes, max) {
        Cow::Borrowed(_) => quotes,
        Cow::Owned(cut) => Cow::Owned(cut),
    }
}

fn clip_quotes(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0; // bytes of `text` already in `out`
    let mut rest = 0; // where to look for the next opening quote
    while let Some(open) = text[rest..].find(['`', '"']).map(|i| rest + i) {
        let delimiter = text.as_bytes()[open] as char;
        let start = open + 1;
        let Some(close) = text[start..].find(delimiter).map(|i| start + i) else { break };
        if let Cow::Owned(cut) = quote(&text[start..close]) {
            out.push_str(&text[copied..start]);
            out.push_str(&cut);
            copied = close;
        }
        rest = close + 1;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// One thing wrong with the input, at a path such as `to[0].agent_id` (`$` is the whole document).
/// Written bounded like [`ErrorBody`]: at most [`PATH_MAX`] characters of
/// path and [`PROBLEM_MAX`] of message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl Problem {
    /// A problem, its path and message bounded.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { path: bounded(path.into(), PATH_MAX), message: bounded(message.into(), PROBLEM_MAX) }
    }
}

impl Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Problem", 2)?;
        s.serialize_field("path", &bound_text(&self.path, PATH_MAX))?;
        s.serialize_field("message", &bound_text(&self.message, PROBLEM_MAX))?;
        s.end()
    }
}

/// The problems found in one document: the first [`PROBLEMS_MAX`] of them, and how many there were
/// in all (so that input with a million mistakes costs no more than one with twenty); never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems {
    list: Vec<Problem>,
    total: usize,
}

impl Problems {
    /// The problems kept (the first [`PROBLEMS_MAX`]).
    pub fn into_vec(self) -> Vec<Problem> {
        self.list
    }

    pub fn as_slice(&self) -> &[Problem] {
        &self.list
    }

    /// How many problems were found, kept or not.
    pub fn total(&self) -> usize {
        self.total
    }

    pub(crate) fn one(path: &str, message: String) -> Problems {
        Problems { list: vec![Problem::new(path, message)], total: 1 }
    }

    /// The problems kept and how many were found in all.
    pub(crate) fn kept(list: Vec<Problem>, total: usize) -> Problems {
        Problems { list, total }
    }
}

impl std::fmt::Display for Problems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.list.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", p.path, p.message)?;
        }
        if self.total > self.list.len() {
            write!(f, "; and {} more", self.total - self.list.len())?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// The error body every face returns: `{code, message, field?, retryable, hint?, problems?}`.
///
/// Bounded: the builders cut what they are given, and serializing cuts again whatever was set
/// directly, so `message` and `hint` hold at most [`MESSAGE_MAX`] characters, `field` at most
/// [`PATH_MAX`], and at most [`PROBLEMS_MAX`] problems are written. Reading one accepts any size.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub field: Option<String>,
    pub retryable: bool,
    #[serde(default)]
    pub hint: Option<String>,
    /// The problems, when validation found several (the first [`PROBLEMS_MAX`] of them).
    #[serde(default)]
    pub problems: Vec<Problem>,
    /// What to do next, by intent: each face words it (a route, a tool) when there is no `hint`.
    #[serde(default)]
    pub next: Option<Box<Next>>,
}

/// A next step named by what it does, not by the face that offers it: the HTTP face says "POST
/// /v1/tasks/{id}/claim", the MCP face "call task_claim". On the wire as `{"step": "claim_task",
/// "task_id": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Next {
    /// Register the agent (again) before anything else.
    RegisterAgent,
    /// Send a heartbeat: the agent is stale or offline.
    Heartbeat,
    /// Claim the task (again) before writing to it.
    ClaimTask { task_id: String },
    /// Look at the task's state and history.
    ShowTask { task_id: String },
    /// List the tasks of a workflow that can be claimed now.
    NextTasks { workflow_id: String },
    /// Look at the workflows, or one of them (its tasks and workspaces).
    ShowWorkflows {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workflow_id: Option<String>,
    },
}

impl Next {
    /// The step with its ids cut to [`QUOTE_MAX`] (they may come from the request).
    fn bounded(self) -> Next {
        let q = |id: String| bounded(id, QUOTE_MAX);
        match self {
            Next::ClaimTask { task_id } => Next::ClaimTask { task_id: q(task_id) },
            Next::ShowTask { task_id } => Next::ShowTask { task_id: q(task_id) },
            Next::NextTasks { workflow_id } => Next::NextTasks { workflow_id: q(workflow_id) },
            Next::ShowWorkflows { workflow_id } => Next::ShowWorkflows { workflow_id: workflow_id.map(q) },
            other => other,
        }
    }
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: bounded(message.into(), MESSAGE_MAX),
            field: None,
            retryable: code.retryable(),
            hint: None,
            problems: Vec::new(),
            next: None,
        }
    }

    /// What to do next, for each face to word (see [`Next`]).
    pub fn next(mut self, next: Next) -> Self {
        self.next = Some(Box::new(next.bounded()));
        self
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(bounded(field.into(), PATH_MAX));
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(bounded(hint.into(), MESSAGE_MAX));
        self
    }

    /// A `VALIDATION_FAILED` (or `UNKNOWN_TYPE`) body listing the problems (at most [`PROBLEMS_MAX`]);
    /// `field` is the first one's, and the message counts them all.
    pub fn from_problems(problems: Problems) -> Self {
        let total = problems.total();
        let mut list = problems.into_vec();
        list.truncate(PROBLEMS_MAX);
        let code = if total == 1 && list[0].path == "type" && list[0].message.starts_with("unknown message type") {
            ErrorCode::UnknownType
        } else {
            ErrorCode::ValidationFailed
        };
        let message = match list.as_slice() {
            [one] if total == 1 => format!("{}: {}", one.path, one.message),
            many => format!("{total} problems, first: {}: {}", many[0].path, many[0].message),
        };
        ErrorBody { field: list.first().map(|p| p.path.clone()), problems: list, ..ErrorBody::new(code, message) }
    }
}

/// `text` bounded by [`bound_text`], reusing its allocation when nothing is cut.
pub(crate) fn bounded(text: String, max: usize) -> String {
    match bound_text(&text, max) {
        Cow::Borrowed(_) => text,
        Cow::Owned(cut) => cut,
    }
}

impl Serialize for ErrorBody {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let problems = &self.problems[..self.problems.len().min(PROBLEMS_MAX)];
        let fields =
            3 + usize::from(self.field.is_some()) + usize::from(self.hint.is_some()) + usize::from(self.next.is_some());
        let mut s = serializer.serialize_struct("ErrorBody", fields + usize::from(!problems.is_empty()))?;
        s.serialize_field("code", &self.code)?;
        s.serialize_field("message", &bound_text(&self.message, MESSAGE_MAX))?;
        if let Some(field) = &self.field {
            s.serialize_field("field", &bound_text(field, PATH_MAX))?;
        }
        s.serialize_field("retryable", &self.retryable)?;
        if let Some(hint) = &self.hint {
            s.serialize_field("hint", &bound_text(hint, MESSAGE_MAX))?;
        }
        if !problems.is_empty() {
            s.serialize_field("problems", problems)?;
        }
        if let Some(next) = &self.next {
            s.serialize_field("next", next)?;
        }
        s.end()
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
            // Upper snake case; a digit inside a name (`A2A_FAILED`) is part of the name.
            assert!(s.starts_with(|c: char| c.is_ascii_uppercase()), "{s}");
            assert!(s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'), "{s}");
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            let back: ErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, *code);
            assert!((400..600).contains(&code.http_status()));
        }
    }

    #[test]
    fn clip_cuts_at_a_character_boundary_once() {
        assert_eq!(clip("short", 8), "short");
        assert_eq!(clip("exactly8", 8), "exactly8");
        assert_eq!(clip("nine char", 8), "nine ch…");
        assert_eq!(clip("ééééé", 3), "éé…");
        assert_eq!(clip("a☃☃☃", 3), "a☃…");
        let once = clip(&"x".repeat(1000), 100).into_owned();
        assert_eq!(once.chars().count(), 100);
        assert!(matches!(clip(&once, 100), Cow::Borrowed(_)));
        assert_eq!(quote(&"q".repeat(5000)).chars().count(), QUOTE_MAX);
    }

    #[test]
    fn bound_text_cuts_each_quoted_span_and_then_the_whole() {
        let long = "k".repeat(500);
        let text = format!("unknown field `{long}`, expected one of `a`, `b`; got string \"{long}\"");
        let bounded = bound_text(&text, MESSAGE_MAX);
        let spans: Vec<&str> = bounded.split(['`', '"']).collect();
        assert_eq!(spans[0], "unknown field ");
        assert_eq!(spans[1].chars().count(), QUOTE_MAX);
        assert!(spans[1].ends_with('…'));
        assert_eq!(&spans[2..8], [", expected one of ", "a", ", ", "b", "; got string ", spans[1]]);
        assert!(matches!(bound_text("a `short` one and an `unclosed", 100), Cow::Borrowed(_)));
        assert_eq!(bound_text(&"m".repeat(5000), MESSAGE_MAX).chars().count(), MESSAGE_MAX);
        let again = bound_text(&bounded, MESSAGE_MAX);
        assert_eq!(again, bounded);
    }

    #[test]
    fn bodies_are_bounded_when_built_and_when_written() {
        let huge = "h".repeat(1 << 16);
        let body = ErrorBody::new(ErrorCode::NotFound, format!("no `{huge}`")).field(huge.clone()).hint(huge.clone());
        assert_eq!(body.message.chars().count(), "no ``".len() + QUOTE_MAX);
        assert_eq!(body.field.as_deref().map(|f| f.chars().count()), Some(PATH_MAX));
        assert_eq!(body.hint.as_deref().map(|h| h.chars().count()), Some(MESSAGE_MAX));

        // Set directly, past the builders: written bounded all the same.
        let mut body = ErrorBody::new(ErrorCode::ValidationFailed, "x");
        body.message = huge.clone();
        body.field = Some(huge.clone());
        body.problems = vec![Problem { path: huge.clone(), message: huge.clone() }; 100];
        let text = serde_json::to_string(&body).unwrap();
        let limit = MESSAGE_MAX + PATH_MAX + PROBLEMS_MAX * (PATH_MAX + PROBLEM_MAX + 64) + 256;
        assert!(text.len() < limit, "{} bytes", text.len());
        let back: ErrorBody = serde_json::from_str(&text).unwrap();
        assert_eq!(back.problems.len(), PROBLEMS_MAX);
    }
}
