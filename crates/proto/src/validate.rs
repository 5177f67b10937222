//! Validation of client input: every problem is collected with its path (`to[0].agent_id`), so a
//! client fixes all of them in one round trip. Only input with no problem becomes a typed value.

use std::time::SystemTime;

use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::card::AgentCard;
use crate::error::{PROBLEMS_MAX, quote};
use crate::id::{self, Kind, Party};
use crate::message::{Message, MessageType};

pub use crate::error::{Problem, Problems};
pub use crate::message::format_ts;

/// What the daemon fills in when a client leaves `id`, `ts` or `v` out.
pub struct Defaults {
    pub now: SystemTime,
}

/// Validates a client's envelope and builds the [`Message`], filling `id`, `ts` and `v` when absent.
/// Anything present must be valid; unknown fields are refused (extensions belong in `meta`).
pub fn message(value: &Value, defaults: &Defaults) -> Result<Message, Problems> {
    let mut c = Checker::default();
    let Some(obj) = value.as_object() else {
        c.add("$", "a message must be a JSON object");
        return Err(c.finish().unwrap_err());
    };
    const FIELDS: &[&str] = &[
        "v",
        "id",
        "ts",
        "thread_id",
        "run_id",
        "task_id",
        "parent_task_id",
        "trace",
        "from",
        "to",
        "type",
        "domain",
        "payload_type",
        "schema_ref",
        "payload",
        "requires",
        "prefers",
        "security",
        "attachments",
        "idempotency_key",
        "attempt",
        "meta",
    ];
    c.unknown_fields("", obj, FIELDS);

    if let Some(v) = c.opt_str(obj, "", "v")
        && v != crate::VERSION
    {
        c.add("v", format!("unsupported protocol version `{}`, expected `{}`", quote(v), crate::VERSION));
    }
    if let Some(s) = c.opt_str(obj, "", "id") {
        c.id("id", Kind::Message, s);
    }
    if let Some(s) = c.opt_str(obj, "", "ts")
        && (OffsetDateTime::parse(s, &Rfc3339).is_err()
            || s.as_bytes().get(10) != Some(&b'T')
            || s.contains(['t', 'z']))
    {
        c.add("ts", "must be an RFC 3339 timestamp with a time zone, e.g. 2026-02-01T13:20:11.123Z");
    }
    for (field, kind) in [("thread_id", Kind::Thread), ("run_id", Kind::Run), ("task_id", Kind::Task)] {
        if let Some(s) = c.req_str(obj, "", field) {
            c.id(field, kind, s);
        }
    }
    match obj.get("parent_task_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => c.id("parent_task_id", Kind::Task, s),
        Some(_) => c.add("parent_task_id", "must be a string or null"),
    }
    if let Some(trace) = c.opt_obj(obj, "", "trace") {
        c.unknown_fields("trace", trace, &["trace_id", "span_id", "parent_span_id"]);
        if let Some(s) = c.req_str(trace, "trace", "trace_id") {
            c.short_text("trace.trace_id", s, 128);
        }
        for f in ["span_id", "parent_span_id"] {
            if let Some(s) = c.opt_str(trace, "trace", f) {
                c.short_text(&format!("trace.{f}"), s, 128);
            }
        }
    }
    match obj.get("from") {
        None => c.add("from", "required"),
        Some(Value::Object(from)) => {
            c.unknown_fields("from", from, &["agent_id", "role"]);
            if let Some(s) = c.req_str(from, "from", "agent_id") {
                c.party("from.agent_id", Party::Sender, s);
            }
            if let Some(s) = c.opt_str(from, "from", "role") {
                c.short_text("from.role", s, 64);
            }
        }
        Some(_) => c.add("from", "must be an object {agent_id, role?}"),
    }
    match obj.get("to") {
        None => c.add("to", "required (an empty array addresses everyone observing the thread)"),
        Some(Value::Array(to)) => {
            for (i, r) in to.iter().enumerate() {
                let path = format!("to[{i}]");
                match r.as_object() {
                    Some(r) => {
                        c.unknown_fields(&path, r, &["agent_id"]);
                        if let Some(s) = c.req_str(r, &path, "agent_id") {
                            c.party(&format!("{path}.agent_id"), Party::Recipient, s);
                        }
                    }
                    None => c.add(&path, "must be an object {agent_id}"),
                }
            }
        }
        Some(_) => c.add("to", "must be an array of {agent_id}"),
    }
    let kind = match c.req_str(obj, "", "type") {
        Some(s) => match s.parse::<MessageType>() {
            Ok(t) => Some(t),
            Err(e) => {
                let all: Vec<&str> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
                c.add("type", format!("{e}; expected one of {}", all.join(", ")));
                None
            }
        },
        None => None,
    };
    if let Some(s) = c.opt_str(obj, "", "domain")
        && !(is_token(s, 64, |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
            && s.as_bytes()[0].is_ascii_alphanumeric())
    {
        c.add("domain", "must be 1-64 characters of a-z 0-9 _ . -, starting with a letter or digit (e.g. `research`)");
    }
    if let Some(s) = c.opt_str(obj, "", "payload_type")
        && let Err(e) = id::check_payload_type(s)
    {
        c.add("payload_type", e);
    }
    if let Some(s) = c.opt_str(obj, "", "schema_ref")
        && (!s.starts_with("schema://") || s.len() <= "schema://".len() || s.len() > 256)
    {
        c.add("schema_ref", "must start with `schema://`, e.g. schema://clutch/research/summary@1");
    }
    match obj.get("payload") {
        None => c.add("payload", "required (an object; use {} when there is nothing to say)"),
        Some(Value::Object(p)) => {
            if let Some(kind) = kind {
                c.payload_rules(kind, p);
            }
        }
        Some(_) => c.add("payload", "must be a JSON object"),
    }
    for (field, extra) in [("requires", &[][..]), ("prefers", id::PREFERENCE_PREFIXES)] {
        if let Some(items) = c.opt_array(obj, "", field) {
            for (i, item) in items.iter().enumerate() {
                let path = format!("{field}[{i}]");
                match item.as_str() {
                    Some(s) => {
                        if let Err(e) = id::check_capability(s, extra) {
                            c.add(&path, e);
                        }
                    }
                    None => c.add(&path, "must be a string such as `skill:research`"),
                }
            }
        }
    }
    if let Some(sec) = c.opt_obj(obj, "", "security") {
        c.security(sec);
    }
    if let Some(items) = c.opt_array(obj, "", "attachments") {
        for (i, item) in items.iter().enumerate() {
            c.attachment(&format!("attachments[{i}]"), item);
        }
    }
    if let Some(s) = c.opt_str(obj, "", "idempotency_key") {
        c.short_text("idempotency_key", s, 256);
    }
    match obj.get("attempt") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u32::MAX as u64).contains(&n) => {}
            _ => c.add("attempt", "must be a whole number from 1"),
        },
    }
    c.opt_obj(obj, "", "meta");

    c.finish()?;
    let mut full = obj.clone();
    drop_nulls(&mut full, &["payload", "meta"]);
    full.entry("v").or_insert_with(|| Value::from(crate::VERSION));
    full.entry("id").or_insert_with(|| Value::from(id::generate_at(Kind::Message, defaults.now)));
    full.entry("ts").or_insert_with(|| Value::from(format_ts(defaults.now)));
    serde_json::from_value(Value::Object(full)).map_err(|e| {
        // Unreachable when the checks above are complete; reported rather than panicking.
        Problems::one("$", e.to_string())
    })
}

/// Validates a client's AgentCard, filling `v` when absent.
pub fn agent_card(value: &Value) -> Result<AgentCard, Problems> {
    let mut c = Checker::default();
    let Some(obj) = value.as_object() else {
        c.add("$", "an agent card must be a JSON object");
        return Err(c.finish().unwrap_err());
    };
    c.unknown_fields(
        "",
        obj,
        &["v", "agent_id", "display", "endpoints", "capabilities", "limits", "budget", "security", "meta"],
    );
    if let Some(v) = c.opt_str(obj, "", "v")
        && v != crate::VERSION
    {
        c.add("v", format!("unsupported protocol version `{}`, expected `{}`", quote(v), crate::VERSION));
    }
    if let Some(s) = c.req_str(obj, "", "agent_id") {
        if !s.starts_with("agent:") {
            c.add("agent_id", "must start with `agent:`");
        } else if let Err(e) = id::check_name(&s["agent:".len()..]) {
            c.add("agent_id", e);
        }
    }
    if let Some(d) = c.opt_obj(obj, "", "display") {
        c.unknown_fields("display", d, &["name", "desc"]);
        if let Some(s) = c.req_str(d, "display", "name") {
            c.short_text("display.name", s, 128);
        }
        c.opt_str(d, "display", "desc");
    }
    if let Some(eps) = c.opt_obj(obj, "", "endpoints") {
        for (name, ep) in eps {
            let path = format!("endpoints.{}", quote(name));
            match ep.as_object() {
                Some(ep) => {
                    c.unknown_fields(&path, ep, &["url"]);
                    if let Some(u) = c.req_str(ep, &path, "url")
                        && !(u.starts_with("http://") || u.starts_with("https://"))
                    {
                        c.add(&format!("{path}.url"), "must be an http:// or https:// URL");
                    }
                }
                None => c.add(&path, "must be an object {url}"),
            }
        }
    }
    match obj.get("capabilities") {
        None => {}
        Some(Value::Array(caps)) => {
            for (i, cap) in caps.iter().enumerate() {
                c.capability(&format!("capabilities[{i}]"), cap);
            }
        }
        Some(_) => c.add("capabilities", "must be an array of capability objects"),
    }
    if let Some(l) = c.opt_obj(obj, "", "limits") {
        c.unknown_fields("limits", l, &["max_concurrency", "max_runtime_sec"]);
        for f in ["max_concurrency", "max_runtime_sec"] {
            if let Some(v) = l.get(f)
                && !matches!(v.as_u64(), Some(n) if n >= 1 && n <= u32::MAX as u64)
            {
                c.add(&format!("limits.{f}"), "must be a whole number from 1");
            }
        }
    }
    if let Some(b) = c.opt_obj(obj, "", "budget") {
        c.unknown_fields("budget", b, &["tokens", "cost_usd"]);
        if let Some(v) = b.get("tokens")
            && v.as_u64().is_none()
        {
            c.add("budget.tokens", "must be a whole number");
        }
        if let Some(v) = b.get("cost_usd")
            && !matches!(v.as_f64(), Some(x) if x >= 0.0)
        {
            c.add("budget.cost_usd", "must be a number from 0");
        }
    }
    if let Some(s) = c.opt_obj(obj, "", "security") {
        c.unknown_fields("security", s, &["sandbox", "network"]);
        c.opt_bool(s, "security", "sandbox");
        if let Some(n) = c.opt_str(s, "security", "network")
            && !["none", "egress-restricted", "open"].contains(&n)
        {
            c.add("security.network", "must be one of none, egress-restricted, open");
        }
    }
    c.opt_obj(obj, "", "meta");
    c.finish()?;
    let mut full = obj.clone();
    drop_nulls(&mut full, &["meta"]);
    full.entry("v").or_insert_with(|| Value::from(crate::VERSION));
    serde_json::from_value(Value::Object(full)).map_err(|e| Problems::one("$", e.to_string()))
}

/// An optional field given as `null` is absent: removes null members from `obj` and from the objects
/// nested in it (directly or in arrays), except inside the free-form members named in `keep`.
fn drop_nulls(obj: &mut Map<String, Value>, keep: &[&str]) {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.retain(|_, v| !v.is_null());
                o.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    obj.retain(|_, v| !v.is_null());
    for (key, value) in obj.iter_mut() {
        if !keep.contains(&key.as_str()) {
            walk(value);
        }
    }
}

fn is_token(s: &str, max: usize, ok: impl Fn(u8) -> bool) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(ok)
}

#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
    total: usize,
}

fn join(parent: &str, field: &str) -> String {
    if parent.is_empty() { field.to_string() } else { format!("{parent}.{field}") }
}

impl Checker {
    /// Records a problem; past [`PROBLEMS_MAX`] only counts it.
    fn add(&mut self, path: &str, message: impl Into<String>) {
        self.total += 1;
        if self.problems.len() < PROBLEMS_MAX {
            self.problems.push(Problem::new(path, message));
        }
    }

    fn finish(self) -> Result<(), Problems> {
        if self.problems.is_empty() { Ok(()) } else { Err(Problems::kept(self.problems, self.total)) }
    }

    /// Every member of `obj` not in `known` is a problem at its own path (the name quoted).
    fn unknown_fields(&mut self, parent: &str, obj: &Map<String, Value>, known: &[&str]) {
        for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
            let hint = if parent.is_empty() { " (put extensions in `meta`)" } else { "" };
            self.add(&join(parent, &quote(key)), format!("unknown field{hint}"));
        }
    }

    fn req_str<'a>(&mut self, obj: &'a Map<String, Value>, parent: &str, field: &str) -> Option<&'a str> {
        match obj.get(field) {
            None | Some(Value::Null) => {
                self.add(&join(parent, field), "required");
                None
            }
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.add(&join(parent, field), "must be a string");
                None
            }
        }
    }

    fn opt_str<'a>(&mut self, obj: &'a Map<String, Value>, parent: &str, field: &str) -> Option<&'a str> {
        match obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.add(&join(parent, field), "must be a string");
                None
            }
        }
    }

    fn opt_bool(&mut self, obj: &Map<String, Value>, parent: &str, field: &str) {
        if let Some(v) = obj.get(field)
            && !v.is_boolean()
            && !v.is_null()
        {
            self.add(&join(parent, field), "must be true or false");
        }
    }

    fn opt_obj<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        parent: &str,
        field: &str,
    ) -> Option<&'a Map<String, Value>> {
        match obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => Some(o),
            Some(_) => {
                self.add(&join(parent, field), "must be a JSON object");
                None
            }
        }
    }

    fn opt_array<'a>(&mut self, obj: &'a Map<String, Value>, parent: &str, field: &str) -> Option<&'a Vec<Value>> {
        match obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(a),
            Some(_) => {
                self.add(&join(parent, field), "must be an array");
                None
            }
        }
    }

    fn opt_str_array(&mut self, obj: &Map<String, Value>, parent: &str, field: &str) {
        if let Some(items) = self.opt_array(obj, parent, field) {
            for (i, item) in items.iter().enumerate() {
                if !item.is_string() {
                    self.add(&format!("{}[{i}]", join(parent, field)), "must be a string");
                }
            }
        }
    }

    fn id(&mut self, path: &str, kind: Kind, s: &str) {
        if let Err(e) = id::check(kind, s) {
            self.add(path, e);
        }
    }

    fn party(&mut self, path: &str, party: Party, s: &str) {
        if let Err(e) = id::check_party(party, s) {
            self.add(path, e);
        }
    }

    fn short_text(&mut self, path: &str, s: &str, max: usize) {
        if s.is_empty() || s.chars().count() > max || s.chars().any(char::is_control) {
            self.add(path, format!("must be 1 to {max} characters without control characters"));
        }
    }

    /// Rules on the payload that the envelope itself relies on (§5.4): errors carry code, message and
    /// retryable. Payload schemas by `payload_type` belong to the schema registry, not here.
    fn payload_rules(&mut self, kind: MessageType, p: &Map<String, Value>) {
        if matches!(kind, MessageType::TaskError | MessageType::ToolError) {
            self.req_str(p, "payload", "code");
            self.req_str(p, "payload", "message");
            match p.get("retryable") {
                Some(Value::Bool(_)) => {}
                None => self.add("payload.retryable", "required (true or false)"),
                Some(_) => self.add("payload.retryable", "must be true or false"),
            }
        }
    }

    fn security(&mut self, sec: &Map<String, Value>) {
        self.unknown_fields("security", sec, &["auth", "policy"]);
        if let Some(auth) = self.opt_obj(sec, "security", "auth") {
            self.unknown_fields("security.auth", auth, &["scheme", "kid", "sig"]);
            if let Some(s) = self.req_str(auth, "security.auth", "scheme")
                && s != "ed25519"
            {
                self.add("security.auth.scheme", "the only supported scheme is `ed25519`");
            }
            if let Some(s) = self.req_str(auth, "security.auth", "kid") {
                self.short_text("security.auth.kid", s, 128);
            }
            if let Some(s) = self.req_str(auth, "security.auth", "sig") {
                self.short_text("security.auth.sig", s, 512);
            }
        }
        if let Some(policy) = self.opt_obj(sec, "security", "policy") {
            self.unknown_fields("security.policy", policy, &["sandbox", "tool_allowlist"]);
            self.opt_bool(policy, "security.policy", "sandbox");
            self.opt_str_array(policy, "security.policy", "tool_allowlist");
        }
    }

    fn attachment(&mut self, path: &str, item: &Value) {
        let Some(a) = item.as_object() else {
            self.add(path, "must be an object {kind, ref}");
            return;
        };
        self.unknown_fields(path, a, &["kind", "ref", "name", "media_type", "size"]);
        let kind = self.req_str(a, path, "kind");
        let reference = self.req_str(a, path, "ref");
        match (kind, reference) {
            (Some("artifact_ref"), Some(r)) => {
                if let Err(e) = id::check_artifact_ref(r) {
                    self.add(&format!("{path}.ref"), e);
                }
            }
            (Some("url"), Some(r)) => {
                if !(r.starts_with("http://") || r.starts_with("https://")) {
                    self.add(&format!("{path}.ref"), "must be an http:// or https:// URL");
                }
            }
            (Some("artifact_ref" | "url"), None) => {}
            (Some(other), _) => self.add(
                &format!("{path}.kind"),
                format!("unknown attachment kind `{}`; expected artifact_ref or url", quote(other)),
            ),
            (None, _) => {}
        }
        self.opt_str(a, path, "name");
        self.opt_str(a, path, "media_type");
        if let Some(v) = a.get("size")
            && v.as_u64().is_none()
        {
            self.add(&format!("{path}.size"), "must be a whole number of bytes");
        }
    }

    fn capability(&mut self, path: &str, cap: &Value) {
        let Some(cap) = cap.as_object() else {
            self.add(path, "must be an object {id, version?, tags?, tools?, ...}");
            return;
        };
        self.unknown_fields(path, cap, &["id", "version", "tags", "tools", "trust_level", "cost_hint", "servers"]);
        if let Some(s) = self.req_str(cap, path, "id") {
            if s.contains('@') {
                self.add(&format!("{path}.id"), "put the version in `version`, not after `@`");
            } else if let Err(e) = id::check_capability(s, &[]) {
                self.add(&format!("{path}.id"), e);
            }
        }
        self.opt_str(cap, path, "version");
        self.opt_str_array(cap, path, "tags");
        self.opt_str_array(cap, path, "tools");
        self.opt_str_array(cap, path, "servers");
        if let Some(s) = self.opt_str(cap, path, "trust_level")
            && !["sandbox", "prod"].contains(&s)
        {
            self.add(&format!("{path}.trust_level"), "must be sandbox or prod");
        }
        if let Some(s) = self.opt_str(cap, path, "cost_hint")
            && !["low", "medium", "high"].contains(&s)
        {
            self.add(&format!("{path}.cost_hint"), "must be low, medium or high");
        }
    }
}
