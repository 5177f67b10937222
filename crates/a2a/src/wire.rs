//! A2A on the wire, both versions: what a request carries, read leniently (1.0 ProtoJSON with
//! camelCase or snake_case names, 0.3 objects with `kind`, unknown fields ignored), and what the hub
//! answers, written exactly as the version asked for wants it (1.0: `TASK_STATE_*` and `ROLE_*` names,
//! parts as `text`/`data`/`url`/`raw`; 0.3: `kind` on every object, lower-case states and roles).

use serde_json::{Map, Value, json};

/// The protocol version a request speaks (`A2A-Version`; none means 0.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V03,
    V10,
}

impl Version {
    /// The version `header` names (Major.Minor counts; missing or empty is 0.3), or `None` for one
    /// the hub does not speak.
    pub fn parse(header: Option<&str>) -> Option<Version> {
        let text = header.map(str::trim).unwrap_or_default();
        if text.is_empty() {
            return Some(Version::V03);
        }
        let mut parts = text.split('.');
        let (major, minor) = (parts.next()?.trim(), parts.next().unwrap_or("0").trim());
        match (major, minor) {
            ("1", "0") => Some(Version::V10),
            ("0", "3") => Some(Version::V03),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V03 => "0.3",
            Version::V10 => "1.0",
        }
    }
}

/// A task's state, as A2A names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
}

impl State {
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled | State::Rejected)
    }

    /// Ended, or stopped until the client answers: where a stream of the task closes.
    pub fn ends_stream(self) -> bool {
        self.is_terminal() || matches!(self, State::InputRequired | State::AuthRequired)
    }

    pub(crate) fn name(self, v: Version) -> &'static str {
        match (v, self) {
            (Version::V10, State::Submitted) => "TASK_STATE_SUBMITTED",
            (Version::V10, State::Working) => "TASK_STATE_WORKING",
            (Version::V10, State::InputRequired) => "TASK_STATE_INPUT_REQUIRED",
            (Version::V10, State::AuthRequired) => "TASK_STATE_AUTH_REQUIRED",
            (Version::V10, State::Completed) => "TASK_STATE_COMPLETED",
            (Version::V10, State::Failed) => "TASK_STATE_FAILED",
            (Version::V10, State::Canceled) => "TASK_STATE_CANCELED",
            (Version::V10, State::Rejected) => "TASK_STATE_REJECTED",
            (Version::V03, State::Submitted) => "submitted",
            (Version::V03, State::Working) => "working",
            (Version::V03, State::InputRequired) => "input-required",
            (Version::V03, State::AuthRequired) => "auth-required",
            (Version::V03, State::Completed) => "completed",
            (Version::V03, State::Failed) => "failed",
            (Version::V03, State::Canceled) => "canceled",
            (Version::V03, State::Rejected) => "rejected",
        }
    }
}

/// A state as a request names it: the 1.0 name or number, or the 0.3 name.
pub fn read_state(value: &Value) -> Option<State> {
    let all = [
        State::Submitted,
        State::Working,
        State::Completed,
        State::Failed,
        State::Canceled,
        State::InputRequired,
        State::Rejected,
        State::AuthRequired,
    ];
    match value {
        Value::String(s) => all.into_iter().find(|st| st.name(Version::V10) == s || st.name(Version::V03) == s),
        // The proto's numbers: SUBMITTED = 1 ... AUTH_REQUIRED = 8, in the order above.
        Value::Number(n) => n.as_u64().and_then(|n| n.checked_sub(1)).and_then(|i| all.get(i as usize).copied()),
        _ => None,
    }
}

/// Who says a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

/// One part of a message or an artifact.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Data(Value),
    /// A file by reference.
    Url {
        url: String,
        media_type: Option<String>,
        filename: Option<String>,
    },
    /// A file inline, base64.
    Raw {
        bytes: String,
        media_type: Option<String>,
        filename: Option<String>,
    },
}

/// A message, as the hub keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

/// An artifact: what a task produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub artifact_id: String,
    pub name: Option<String>,
    pub parts: Vec<Part>,
}

/// A task, as the hub shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub state: State,
    pub timestamp: String,
    /// What the agent said with the state (why it failed, say).
    pub status_message: Option<Message>,
    pub artifacts: Vec<Artifact>,
    pub history: Vec<Message>,
    pub metadata: Map<String, Value>,
}

/// A field by its camelCase name or its snake_case alias (ProtoJSON accepts both).
fn field<'a>(o: &'a Map<String, Value>, camel: &str) -> Option<&'a Value> {
    o.get(camel).or_else(|| {
        let snake: String = camel
            .chars()
            .flat_map(|c| if c.is_ascii_uppercase() { vec!['_', c.to_ascii_lowercase()] } else { vec![c] })
            .collect();
        o.get(&snake)
    })
}

fn text_field(o: &Map<String, Value>, camel: &str) -> Option<String> {
    field(o, camel).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// Why a message, an artifact or a part cannot be read: the field at fault, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct Invalid {
    /// Where, as its path in the request (`message.parts[0]`).
    pub field: String,
    pub why: String,
}

impl Invalid {
    fn new(field: impl Into<String>, why: impl Into<String>) -> Invalid {
        Invalid { field: field.into(), why: why.into() }
    }
}

/// Reads a message, either version's shape; the reason when it is none.
pub fn read_message(value: &Value) -> Result<Message, Invalid> {
    let o = value.as_object().ok_or_else(|| Invalid::new("message", "must be an object"))?;
    let role = match field(o, "role") {
        Some(Value::String(r)) => match r.as_str() {
            "ROLE_USER" | "user" => Role::User,
            "ROLE_AGENT" | "agent" => Role::Agent,
            other => {
                return Err(Invalid::new("message.role", format!("`{other}` is not a role (ROLE_USER, ROLE_AGENT)")));
            }
        },
        Some(Value::Number(n)) if n.as_u64() == Some(1) => Role::User,
        Some(Value::Number(n)) if n.as_u64() == Some(2) => Role::Agent,
        _ => return Err(Invalid::new("message.role", "required (ROLE_USER)")),
    };
    let parts =
        field(o, "parts").and_then(Value::as_array).ok_or_else(|| Invalid::new("message.parts", "required, a list"))?;
    let parts = parts
        .iter()
        .enumerate()
        .map(|(i, p)| read_part(p, || format!("message.parts[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    if parts.is_empty() {
        return Err(Invalid::new("message.parts", "at least one part"));
    }
    Ok(Message {
        message_id: text_field(o, "messageId").ok_or_else(|| Invalid::new("message.messageId", "required"))?,
        role,
        parts,
        context_id: text_field(o, "contextId"),
        task_id: text_field(o, "taskId"),
        metadata: field(o, "metadata").and_then(Value::as_object).cloned(),
    })
}

/// Reads an artifact, either version's shape (an agent's, or a remote agent's as it sent it); an
/// artifact with no id is given `fallback_id`.
pub fn read_artifact(value: &Value, fallback_id: &str) -> Result<Artifact, Invalid> {
    let o = value.as_object().ok_or_else(|| Invalid::new("artifact", "must be an object"))?;
    let parts = field(o, "parts")
        .and_then(Value::as_array)
        .ok_or_else(|| Invalid::new("artifact.parts", "required, a list"))?;
    let parts = parts
        .iter()
        .enumerate()
        .map(|(i, p)| read_part(p, || format!("artifact.parts[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    if parts.is_empty() {
        return Err(Invalid::new("artifact.parts", "at least one part"));
    }
    Ok(Artifact {
        artifact_id: text_field(o, "artifactId").unwrap_or_else(|| fallback_id.to_owned()),
        name: text_field(o, "name"),
        parts,
    })
}

/// Reads a part, either version's shape; `at` names it in an error.
fn read_part(value: &Value, at: impl FnOnce() -> String) -> Result<Part, Invalid> {
    let Some(o) = value.as_object() else { return Err(Invalid::new(at(), "must be an object")) };
    let media_type = text_field(o, "mediaType");
    let filename = text_field(o, "filename");
    if let Some(text) = field(o, "text").and_then(Value::as_str) {
        return Ok(Part::Text(text.to_owned()));
    }
    if let Some(data) = field(o, "data") {
        return Ok(Part::Data(data.clone()));
    }
    if let Some(url) = text_field(o, "url") {
        return Ok(Part::Url { url, media_type, filename });
    }
    if let Some(bytes) = text_field(o, "raw") {
        return Ok(Part::Raw { bytes, media_type, filename });
    }
    // 0.3: {kind: "file", file: {uri | bytes, mimeType, name}}.
    if let Some(file) = field(o, "file").and_then(Value::as_object) {
        let (media_type, filename) = (text_field(file, "mimeType"), text_field(file, "name"));
        if let Some(url) = text_field(file, "uri") {
            return Ok(Part::Url { url, media_type, filename });
        }
        if let Some(bytes) = text_field(file, "bytes") {
            return Ok(Part::Raw { bytes, media_type, filename });
        }
    }
    Err(Invalid::new(at(), "a part is one of text, data, url or raw"))
}

/// What the parts say as text: the text parts, then the data parts as JSON, one per line.
pub fn text_of(parts: &[Part]) -> String {
    let mut lines = Vec::new();
    for p in parts {
        match p {
            Part::Text(t) => lines.push(t.clone()),
            Part::Data(d) => lines.push(d.to_string()),
            Part::Url { url, .. } => lines.push(url.clone()),
            Part::Raw { filename, .. } => {
                lines.push(format!("(a file{})", filename.as_deref().map(|f| format!(" {f}")).unwrap_or_default()))
            }
        }
    }
    lines.join("\n")
}

pub fn part_json(p: &Part, v: Version) -> Value {
    let mut out = Map::new();
    let (kind, media_type, filename) = match p {
        Part::Text(t) => {
            out.insert("text".into(), json!(t));
            ("text", None, None)
        }
        Part::Data(d) => {
            out.insert("data".into(), d.clone());
            ("data", None, None)
        }
        Part::Url { url, media_type, filename } => {
            if v == Version::V03 {
                return file_v03("uri", url, media_type, filename);
            }
            out.insert("url".into(), json!(url));
            ("file", media_type.as_ref(), filename.as_ref())
        }
        Part::Raw { bytes, media_type, filename } => {
            if v == Version::V03 {
                return file_v03("bytes", bytes, media_type, filename);
            }
            out.insert("raw".into(), json!(bytes));
            ("file", media_type.as_ref(), filename.as_ref())
        }
    };
    if v == Version::V03 {
        out.insert("kind".into(), json!(kind));
    } else {
        if let Some(m) = media_type {
            out.insert("mediaType".into(), json!(m));
        }
        if let Some(f) = filename {
            out.insert("filename".into(), json!(f));
        }
    }
    Value::Object(out)
}

/// A 0.3 file part: `{kind: "file", file: {<key>: value, mimeType?, name?}}`.
fn file_v03(key: &str, value: &str, media_type: &Option<String>, filename: &Option<String>) -> Value {
    let mut file = json!({ key: value });
    if let Some(m) = media_type {
        file["mimeType"] = json!(m);
    }
    if let Some(f) = filename {
        file["name"] = json!(f);
    }
    json!({"kind": "file", "file": file})
}

pub fn message_json(m: &Message, v: Version) -> Value {
    let role = match (v, m.role) {
        (Version::V10, Role::User) => "ROLE_USER",
        (Version::V10, Role::Agent) => "ROLE_AGENT",
        (Version::V03, Role::User) => "user",
        (Version::V03, Role::Agent) => "agent",
    };
    let mut out = json!({
        "messageId": m.message_id,
        "role": role,
        "parts": m.parts.iter().map(|p| part_json(p, v)).collect::<Vec<_>>(),
    });
    if let Some(c) = &m.context_id {
        out["contextId"] = json!(c);
    }
    if let Some(t) = &m.task_id {
        out["taskId"] = json!(t);
    }
    if let Some(meta) = &m.metadata {
        out["metadata"] = Value::Object(meta.clone());
    }
    if v == Version::V03 {
        out["kind"] = json!("message");
    }
    out
}

fn status_json(t: &Task, v: Version) -> Value {
    let mut status = json!({"state": t.state.name(v), "timestamp": t.timestamp});
    if let Some(m) = &t.status_message {
        status["message"] = message_json(m, v);
    }
    status
}

fn artifact_json(a: &Artifact, v: Version) -> Value {
    let mut o =
        json!({"artifactId": a.artifact_id, "parts": a.parts.iter().map(|p| part_json(p, v)).collect::<Vec<_>>()});
    if let Some(n) = &a.name {
        o["name"] = json!(n);
    }
    o
}

/// A stream event: the task's status now (0.3 marks the last one `final`).
pub fn status_update_json(t: &Task, v: Version) -> Value {
    let update = json!({"taskId": t.id, "contextId": t.context_id, "status": status_json(t, v)});
    match v {
        Version::V10 => json!({"statusUpdate": update}),
        Version::V03 => {
            let mut u = update;
            u["kind"] = json!("status-update");
            u["final"] = json!(t.state.ends_stream());
            u
        }
    }
}

/// A stream event: an artifact of the task, whole (`lastChunk`).
pub fn artifact_update_json(t: &Task, a: &Artifact, v: Version) -> Value {
    let update = json!({"taskId": t.id, "contextId": t.context_id, "artifact": artifact_json(a, v), "lastChunk": true});
    match v {
        Version::V10 => json!({"artifactUpdate": update}),
        Version::V03 => {
            let mut u = update;
            u["kind"] = json!("artifact-update");
            u
        }
    }
}

/// A stream's first event: the task (1.0 wraps it).
pub fn task_event_json(t: &Task, v: Version) -> Value {
    match v {
        Version::V10 => json!({"task": task_json(t, v)}),
        Version::V03 => task_json(t, v),
    }
}

pub fn task_json(t: &Task, v: Version) -> Value {
    let mut out = json!({"id": t.id, "contextId": t.context_id, "status": status_json(t, v)});
    if !t.artifacts.is_empty() {
        out["artifacts"] = t.artifacts.iter().map(|a| artifact_json(a, v)).collect();
    }
    if !t.history.is_empty() {
        out["history"] = t.history.iter().map(|m| message_json(m, v)).collect();
    }
    if !t.metadata.is_empty() {
        out["metadata"] = Value::Object(t.metadata.clone());
    }
    if v == Version::V03 {
        out["kind"] = json!("task");
    }
    out
}

/// A JSON-RPC error the spec names.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    /// `google.rpc.ErrorInfo`'s reason (1.0).
    pub reason: &'static str,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, reason: &'static str, message: impl Into<String>) -> RpcError {
        RpcError { code, reason, message: message.into() }
    }
    pub fn parse(why: impl Into<String>) -> RpcError {
        RpcError::new(-32700, "PARSE_ERROR", why)
    }
    pub fn invalid_request(why: impl Into<String>) -> RpcError {
        RpcError::new(-32600, "INVALID_REQUEST", why)
    }
    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(-32601, "METHOD_NOT_FOUND", format!("no method `{}`", clutch_proto::error::quote(method)))
    }
    pub fn invalid_params(why: impl Into<String>) -> RpcError {
        RpcError::new(-32602, "INVALID_PARAMS", why)
    }
    pub fn internal(why: impl Into<String>) -> RpcError {
        RpcError::new(-32603, "INTERNAL_ERROR", why)
    }
    pub fn task_not_found(id: &str) -> RpcError {
        RpcError::new(-32001, "TASK_NOT_FOUND", format!("task not found: `{}`", clutch_proto::error::quote(id)))
    }
    pub fn not_cancelable(why: impl Into<String>) -> RpcError {
        RpcError::new(-32002, "TASK_NOT_CANCELABLE", why)
    }
    pub fn unsupported(why: impl Into<String>) -> RpcError {
        RpcError::new(-32004, "UNSUPPORTED_OPERATION", why)
    }
    pub fn extended_card_not_configured() -> RpcError {
        RpcError::new(-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "this hub has no extended agent card")
    }
    pub fn version_not_supported(asked: &str) -> RpcError {
        RpcError::new(
            -32009,
            "VERSION_NOT_SUPPORTED",
            format!("A2A version `{}` is not supported: use 1.0 or 0.3", clutch_proto::error::quote(asked)),
        )
    }

    /// The `error` member: in 1.0 with `google.rpc.ErrorInfo` details; method-not-found carries no data.
    pub fn json(&self, v: Version) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if v == Version::V10 && self.code != -32601 {
            e["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }]);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_major_minor_and_none_is_0_3() {
        assert_eq!(Version::parse(None), Some(Version::V03));
        assert_eq!(Version::parse(Some(" ")), Some(Version::V03));
        assert_eq!(Version::parse(Some("1.0")), Some(Version::V10));
        assert_eq!(Version::parse(Some("1.0.2")), Some(Version::V10));
        assert_eq!(Version::parse(Some("0.3")), Some(Version::V03));
        assert_eq!(Version::parse(Some("2.0")), None);
        assert_eq!(Version::parse(Some("x")), None);
    }

    #[test]
    fn messages_read_in_either_shape_and_write_in_the_one_asked_for() {
        let v10 = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": {"a": 1}}], "context_id": "c1"});
        let v03 = json!({"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"a": 1}}], "contextId": "c1"});
        let (a, b) = (read_message(&v10).unwrap(), read_message(&v03).unwrap());
        assert_eq!(a, b);
        assert_eq!(text_of(&a.parts), "hi\n{\"a\":1}");
        assert_eq!(message_json(&a, Version::V10)["parts"], json!([{"text": "hi"}, {"data": {"a": 1}}]));
        assert_eq!(message_json(&a, Version::V03)["parts"][0], json!({"kind": "text", "text": "hi"}));
        assert_eq!(message_json(&a, Version::V03)["role"], "user");
        for (bad, why) in [
            (json!({"role": "ROLE_USER", "parts": [{"text": "x"}]}), "messageId"),
            (json!({"messageId": "m", "role": "ROLE_BOSS", "parts": [{"text": "x"}]}), "role"),
            (json!({"messageId": "m", "role": "ROLE_USER", "parts": []}), "parts"),
            (json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"nothing": 1}]}), "parts[0]"),
        ] {
            let e = read_message(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn errors_carry_error_info_in_1_0_only() {
        let e = RpcError::task_not_found("t1");
        assert_eq!(e.json(Version::V10)["data"][0]["reason"], "TASK_NOT_FOUND");
        assert!(e.json(Version::V03).get("data").is_none());
        assert!(RpcError::method_not_found("x").json(Version::V10).get("data").is_none());
    }

    #[test]
    fn artifacts_read_in_either_shape_and_keep_their_files() {
        let v10 =
            json!({"artifactId": "a1", "parts": [{"raw": "dGNr", "mediaType": "text/plain", "filename": "out.txt"}]});
        let v03 = json!({"artifactId": "a1", "parts": [{"kind": "file", "file": {"bytes": "dGNr", "mimeType": "text/plain", "name": "out.txt"}}]});
        let (a, b) = (read_artifact(&v10, "x").unwrap(), read_artifact(&v03, "x").unwrap());
        assert_eq!(a, b);
        assert_eq!(artifact_json(&a, Version::V10), v10);
        assert_eq!(artifact_json(&a, Version::V03), v03);
        let unnamed = read_artifact(&json!({"parts": [{"data": {"k": 1}}]}), "t-result").unwrap();
        assert_eq!((unnamed.artifact_id.as_str(), &unnamed.parts), ("t-result", &vec![Part::Data(json!({"k": 1}))]));
        assert!(read_artifact(&json!({"parts": []}), "x").unwrap_err().to_string().contains("at least one"));
    }
}
