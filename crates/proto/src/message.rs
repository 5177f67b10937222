//! The `Message` envelope (Clutch Protocol v0, §1.1–1.2), the closed set of message types (§2) and
//! the form of its `ts` ([`format_ts`], also `validate::format_ts`).

use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

/// One envelope. Every message between agents, humans and tools is one of these, and every one is an
/// event in the log. Build it from client JSON with [`crate::validate::message`], which checks every
/// field and reports all problems at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ClutchMessage", description = "The Clutch Protocol v0 envelope (clutch/0.1).")]
pub struct Message {
    /// Protocol version, always `clutch/0.1`. Filled by the daemon when a client omits it.
    #[schemars(regex(pattern = r"^clutch/0\.1$"))]
    pub v: String,
    /// Unique message id (`msg_` + ULID); the deduplication key. Filled by the daemon when omitted.
    #[schemars(regex(pattern = r"^msg_[0-7][0-9A-HJKMNP-TV-Z]{25}$"))]
    pub id: String,
    /// RFC 3339 timestamp. Filled by the daemon when omitted.
    #[schemars(extend("format" = "date-time"))]
    pub ts: String,
    /// Conversational context (UI grouping), `thr_` + ULID.
    #[schemars(regex(pattern = r"^thr_[0-7][0-9A-HJKMNP-TV-Z]{25}$"))]
    pub thread_id: String,
    /// Top-level execution context, `run_` + ULID.
    #[schemars(regex(pattern = r"^run_[0-7][0-9A-HJKMNP-TV-Z]{25}$"))]
    pub run_id: String,
    /// The unit of work this message is about, `task_` + ULID.
    #[schemars(regex(pattern = r"^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$"))]
    pub task_id: String,
    /// The parent task, making task trees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$"))]
    pub parent_task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    pub from: Sender,
    /// Recipients; empty means everyone observing the thread.
    pub to: Vec<Recipient>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// Problem space, e.g. `research`, `code_review`, `ops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9_.-]{0,63}$"))]
    pub domain: Option<String>,
    /// Structured contract id, e.g. `research.summary.v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9_]+(\.[a-z0-9_]+)*\.v[0-9]+$"))]
    pub payload_type: Option<String>,
    /// Canonical schema reference, e.g. `schema://clutch/research/summary@1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^schema://"))]
    pub schema_ref: Option<String>,
    /// Type-specific content (a JSON object).
    pub payload: Map<String, Value>,
    /// Required capabilities (AND), e.g. `skill:research@^1.2`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Preferred capabilities, tags, tools or domains (weighted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Client-provided deduplication key for commands, scoped to the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Delivery attempt, 1-based.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub attempt: u32,
    /// Framework-specific metadata.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
}

fn one() -> u32 {
    1
}

/// Distributed tracing ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
}

/// The sender: an agent (`agent:<name>`) or a human (`user:<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sender {
    #[schemars(regex(pattern = r"^(agent|user):[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"))]
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// A recipient: an agent, a human or a group (`group:<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recipient {
    #[schemars(regex(pattern = r"^(agent|user|group):[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"))]
    pub agent_id: String,
}

/// Authentication and policy carried by a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Security {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
}

/// A message signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// Signature scheme; `ed25519` is the one defined.
    pub scheme: String,
    /// Key id, as registered by the agent.
    pub kid: String,
    /// The signature, base64.
    pub sig: String,
}

/// Constraints on how the message may be handled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_allowlist: Option<Vec<String>>,
}

/// A reference to content stored outside the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    pub kind: AttachmentKind,
    /// `artifact:sha256:<hex>` for `artifact_ref`, an http(s) URL for `url`.
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    ArtifactRef,
    Url,
}

macro_rules! message_types {
    ($( $variant:ident = $name:literal, $doc:literal; )*) => {
        /// The closed set of message types (§2). Anything else is rejected.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum MessageType {
            $( #[doc = $doc] #[serde(rename = $name)] $variant, )*
        }

        impl MessageType {
            pub const ALL: &'static [MessageType] = &[$(MessageType::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self { $(MessageType::$variant => $name,)* }
            }
        }

        impl std::str::FromStr for MessageType {
            type Err = UnknownType;
            fn from_str(s: &str) -> Result<Self, UnknownType> {
                match s {
                    $($name => Ok(MessageType::$variant),)*
                    other => Err(UnknownType(other.to_owned())),
                }
            }
        }
    };
}

message_types! {
    TaskRequest = "task.request", "Request to perform work.";
    TaskAccept = "task.accept", "Agent accepts the task.";
    TaskProgress = "task.progress", "Intermediate status update.";
    TaskResult = "task.result", "Task completed successfully.";
    TaskError = "task.error", "Task failed.";
    TaskCancel = "task.cancel", "Task cancelled.";
    TaskTimeout = "task.timeout", "Task timed out.";
    ChatMessage = "chat.message", "Agent or human message.";
    ChatSystem = "chat.system", "System notification.";
    ToolCall = "tool.call", "Invoke a tool.";
    ToolResult = "tool.result", "Tool succeeded.";
    ToolError = "tool.error", "Tool failed.";
    AgentRegister = "agent.register", "Agent comes online.";
    AgentHeartbeat = "agent.heartbeat", "Agent health check.";
    AgentUpdate = "agent.update", "Capability change.";
    RoutingDecision = "routing.decision", "Explains why an agent was selected.";
    RoutingFailure = "routing.failure", "No agent matched requirements.";
}

/// A `type` that is none of the protocol's message types, as given (quoted short when shown).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown message type `{}`", crate::error::quote(.0))]
pub struct UnknownType(pub String);

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Message {
    /// A message made by the daemon itself: a fresh id, the current time, the protocol version, and
    /// only what is given; the rest (recipients, parent, payload type, meta...) is set on the value.
    /// Client messages come from [`crate::validate::message`] instead.
    pub fn new(
        kind: MessageType,
        from: &str,
        (run_id, thread_id, task_id): (&str, &str, &str),
        payload: Map<String, Value>,
    ) -> Message {
        Message {
            v: crate::VERSION.to_owned(),
            id: crate::id::generate(crate::id::Kind::Message),
            ts: format_ts(std::time::SystemTime::now()),
            thread_id: thread_id.to_owned(),
            run_id: run_id.to_owned(),
            task_id: task_id.to_owned(),
            parent_task_id: None,
            trace: None,
            from: Sender { agent_id: from.to_owned(), role: None },
            to: Vec::new(),
            kind,
            domain: None,
            payload_type: None,
            schema_ref: None,
            payload,
            requires: Vec::new(),
            prefers: Vec::new(),
            security: None,
            attachments: Vec::new(),
            idempotency_key: None,
            attempt: 1,
            meta: Map::new(),
        }
    }

    /// The canonical JSON form stored in the log: fields in declaration order, object keys of
    /// `payload` and `meta` sorted, absent optionals omitted.
    pub fn to_canonical_json(&self) -> String {
        serde_json::to_string(self).expect("a Message always serializes")
    }

    /// The form two messages are compared in to tell a duplicate from an id conflict: the canonical
    /// JSON without `ts`, which a client retrying a message without its own timestamp cannot repeat.
    pub fn dedup_body(&self) -> String {
        let mut copy = self.clone();
        copy.ts.clear();
        copy.to_canonical_json()
    }
}

/// Formats a time as the protocol writes it: RFC 3339, UTC, milliseconds (`2026-02-01T13:20:11.123Z`).
/// Every stored message gets one, so its digits are written directly rather than through `format!`
/// (a seventh of validating a message).
pub fn format_ts(t: SystemTime) -> String {
    let dt = OffsetDateTime::from(t);
    let Some(year) = u32::try_from(dt.year()).ok().filter(|y| *y <= 9999) else {
        // Outside years 0 to 9999: not a time any clock gives, written the long way.
        return format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            dt.month() as u8,
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.millisecond()
        );
    };
    let fields = [
        (year, 4, b'-'),
        (u32::from(dt.month() as u8), 2, b'-'),
        (u32::from(dt.day()), 2, b'T'),
        (u32::from(dt.hour()), 2, b':'),
        (u32::from(dt.minute()), 2, b':'),
        (u32::from(dt.second()), 2, b'.'),
        (u32::from(dt.millisecond()), 3, b'Z'),
    ];
    let mut out = Vec::with_capacity(24);
    for (n, width, then) in fields {
        out.extend((0..width).rev().map(|i| b'0' + (n / 10u32.pow(i) % 10) as u8));
        out.push(then);
    }
    String::from_utf8(out).expect("ASCII digits")
}
