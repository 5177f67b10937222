//! The payload schema registry (§3): a JSON Schema (2020-12) per `payload_type`, also found by its
//! `schema_ref`; the five built-in payload types; and the check of a message against what a workflow
//! step expects. Validation is workflow-scoped: nothing here runs on every message by itself.
//!
//! Problems are reported like envelope validation's, with paths into the message
//! (`payload.findings[0].text`) and a message saying why.
//!
//! The built-in schemas live in `crates/core/schemas/*.json`, embedded; no `$ref` is ever fetched.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use clutch_proto::{Message, MessageType, Problem, id};
use jsonschema::ReferencingError;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

/// The JSON Schema dialect of every registered schema: `$schema` is absent or this.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The built-in payload types of §3.3, each with its schema (`crates/core/schemas/`).
const BUILTINS: &[(&str, &str)] = &[
    ("research.summary.v1", include_str!("../schemas/research.summary.v1.json")),
    ("research.sources.v1", include_str!("../schemas/research.sources.v1.json")),
    ("code.output.v1", include_str!("../schemas/code.output.v1.json")),
    ("code.review.v1", include_str!("../schemas/code.review.v1.json")),
    ("review.feedback.v1", include_str!("../schemas/review.feedback.v1.json")),
];

/// Payload schemas by `payload_type` and by `schema_ref`. Cheap to clone (compiled validators are
/// shared).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_type: BTreeMap<String, Schema>,
    /// `schema_ref` → `payload_type`.
    by_ref: BTreeMap<String, String>,
}

/// One registered schema.
#[derive(Clone)]
pub struct Schema {
    payload_type: String,
    schema_ref: String,
    document: Value,
    builtin: bool,
    validator: Arc<jsonschema::Validator>,
}

/// What a workflow step expects of the message that completes it (§3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expects {
    /// The message type the expectation applies to, e.g. `task.result`.
    pub kind: MessageType,
    /// The payload type the message must declare, and whose schema its payload must satisfy.
    pub payload_type: Option<String>,
    /// Top-level payload members that must be present (and not `null`), beyond the schema's own.
    pub required: Vec<String>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry holding the built-in payload types.
    pub fn with_builtins() -> Registry {
        let mut registry = Registry::new();
        for (payload_type, text) in BUILTINS {
            let document: Value = serde_json::from_str(text).expect("built-in schemas are valid JSON");
            let schema = compile(payload_type, None, document).expect("built-in schemas compile");
            registry.insert(Schema { builtin: true, ..schema });
        }
        registry
    }

    /// Registers `schema` for `payload_type`.
    ///
    /// `payload_type` follows the envelope's rule (`research.summary.v1`: dotted lower-case words ending
    /// in `.v<N>`). `schema_ref` defaults to the schema's `$id`, else to one derived from the payload
    /// type (`my.thing.v2` → `schema://clutch/my/thing@2`); it must start with `schema://`. The schema's
    /// `$id`, when present, must equal it (it is set when absent), and `$schema`, when present, must be
    /// 2020-12. `$ref`s resolve only within the schema: nothing is fetched over HTTP or from files.
    ///
    /// Registering the same schema again is a no-op. Refused, with every problem found: a malformed
    /// payload type or schema ref, a schema that does not compile, a different schema for a payload
    /// type already registered (built-ins can never be replaced; register a new version instead), a
    /// schema ref already used by another payload type.
    pub fn register(
        &mut self,
        payload_type: &str,
        schema_ref: Option<&str>,
        schema: Value,
    ) -> Result<(), Vec<Problem>> {
        let new = compile(payload_type, schema_ref, schema)?;
        if let Some(old) = self.by_type.get(payload_type) {
            if old.schema_ref == new.schema_ref && old.document == new.document {
                return Ok(());
            }
            let message = if old.builtin {
                format!("`{payload_type}` is built in and cannot be replaced; register a new version instead")
            } else {
                format!(
                    "`{payload_type}` is already registered with a different schema; register a new version \
                     instead"
                )
            };
            return Err(vec![problem("payload_type", message)]);
        }
        if let Some(other) = self.by_ref.get(&new.schema_ref) {
            return Err(vec![problem("schema_ref", format!("`{}` already names `{other}`", new.schema_ref))]);
        }
        self.insert(new);
        Ok(())
    }

    /// The schema registered for `payload_type`.
    pub fn get(&self, payload_type: &str) -> Option<&Schema> {
        self.by_type.get(payload_type)
    }

    /// The schema registered under `schema_ref`.
    pub fn by_ref(&self, schema_ref: &str) -> Option<&Schema> {
        self.by_ref.get(schema_ref).and_then(|t| self.by_type.get(t))
    }

    /// Every schema, by payload type.
    pub fn list(&self) -> impl Iterator<Item = &Schema> {
        self.by_type.values()
    }

    /// Validates `payload` against the schema of a payload type or schema ref. Every problem has a path
    /// starting `payload`; an unknown name is one problem at `payload_type`.
    pub fn validate(&self, payload_type_or_ref: &str, payload: &Value) -> Vec<Problem> {
        match self.get(payload_type_or_ref).or_else(|| self.by_ref(payload_type_or_ref)) {
            Some(schema) => schema.validate(payload),
            None => vec![problem("payload_type", format!("no schema is registered for `{payload_type_or_ref}`"))],
        }
    }

    fn insert(&mut self, schema: Schema) {
        self.by_ref.insert(schema.schema_ref.clone(), schema.payload_type.clone());
        self.by_type.insert(schema.payload_type.clone(), schema);
    }
}

impl Schema {
    pub fn payload_type(&self) -> &str {
        &self.payload_type
    }

    pub fn schema_ref(&self) -> &str {
        &self.schema_ref
    }

    /// The JSON Schema document, its `$id` set to the schema ref.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Whether the schema is one of the built-in payload types.
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// Every way `payload` breaks the schema, with paths starting `payload`, in path order.
    pub fn validate(&self, payload: &Value) -> Vec<Problem> {
        let mut problems = Vec::new();
        for error in self.validator.iter_errors(payload) {
            describe(&error, "payload", payload, &mut problems);
        }
        tidy(problems)
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema")
            .field("payload_type", &self.payload_type)
            .field("schema_ref", &self.schema_ref)
            .field("builtin", &self.builtin)
            .finish_non_exhaustive()
    }
}

impl Expects {
    /// Whether `msg` is the kind of message this expectation is about. Messages of other types belong
    /// to other phases of the step (a `task.accept`, a `task.error`) and are not checked.
    pub fn applies_to(&self, msg: &Message) -> bool {
        msg.kind == self.kind
    }
}

/// Every way `value` breaks `schema` (a JSON Schema, 2020-12, self-contained), with paths starting
/// at `root`; a schema that does not compile is one problem at `root`. For schemas that travel with
/// a request (a turn's `output_schema`), compiled at each use.
pub fn check(schema: &Value, value: &Value, root: &str) -> Vec<Problem> {
    let validator = match jsonschema::draft202012::options().should_validate_formats(true).build(schema) {
        Ok(v) => v,
        Err(e) => return vec![problem(root, format!("the schema does not compile: {e}"))],
    };
    let mut problems = Vec::new();
    for error in validator.iter_errors(value) {
        describe(&error, root, value, &mut problems);
    }
    tidy(problems)
}

/// Checks `msg` against what a workflow step expects: the payload type it must declare, the payload
/// members the step requires, and the payload type's schema. A message whose `type` is not
/// `expects.kind` is not checked at all (see [`Expects::applies_to`]) and has no problems.
///
/// When the message declares another payload type, its payload is not held to the expected schema
/// (that would only repeat the one real problem); when it declares none, it is.
pub fn check_expects(registry: &Registry, expects: &Expects, msg: &Message) -> Vec<Problem> {
    if !expects.applies_to(msg) {
        return Vec::new();
    }
    let mut problems = Vec::new();
    let mut schema = None;
    if let Some(want) = &expects.payload_type {
        match registry.get(want) {
            Some(s) => schema = Some(s),
            None => problems.push(problem("payload_type", format!("no schema is registered for `{want}`"))),
        }
        match msg.payload_type.as_deref() {
            None => problems.push(problem("payload_type", format!("required: this step expects `{want}`"))),
            Some(got) if got != want => {
                problems.push(problem("payload_type", format!("must be `{want}` (this step expects it), not `{got}`")));
                schema = None;
            }
            Some(_) => {}
        }
        if let (Some(s), Some(got)) = (schema, msg.schema_ref.as_deref())
            && got != s.schema_ref
        {
            problems.push(problem("schema_ref", format!("must be `{}` for `{want}`, not `{got}`", s.schema_ref)));
        }
    }
    for field in &expects.required {
        if msg.payload.get(field).is_none_or(Value::is_null) {
            problems.push(problem(&member("payload", field), "required by this workflow step"));
        }
    }
    if let Some(schema) = schema {
        problems.extend(schema.validate(&Value::Object(msg.payload.clone())));
    }
    // One problem per path: a member both the step and the schema require is missing once.
    let mut seen = std::collections::HashSet::new();
    problems.retain(|p| seen.insert(p.path.clone()));
    problems
}

/// Checks and compiles a schema for `payload_type`, collecting every problem.
fn compile(payload_type: &str, schema_ref: Option<&str>, mut document: Value) -> Result<Schema, Vec<Problem>> {
    let mut problems = Vec::new();
    if let Err(e) = id::check_payload_type(payload_type) {
        problems.push(problem("payload_type", e));
    }
    let Some(obj) = document.as_object_mut() else {
        problems.push(problem("schema", "must be a JSON Schema object"));
        return Err(problems);
    };
    let declared_id = obj.get("$id").cloned();
    let schema_ref = match (schema_ref, &declared_id) {
        (Some(r), _) => r.to_owned(),
        (None, Some(Value::String(id))) if id.starts_with("schema://") => id.clone(),
        (None, _) => derived_ref(payload_type),
    };
    if !schema_ref.starts_with("schema://") || schema_ref.len() <= "schema://".len() || schema_ref.len() > 256 {
        problems.push(problem("schema_ref", "must start with `schema://`, e.g. schema://clutch/research/summary@1"));
    }
    match obj.get("$schema") {
        None => {}
        Some(Value::String(s)) if s == DIALECT || s == "https://json-schema.org/draft/2020-12/schema#" => {}
        Some(_) => problems.push(problem("schema.$schema", format!("must be absent or `{DIALECT}` (2020-12)"))),
    }
    match declared_id {
        None => {
            obj.insert("$id".into(), Value::String(schema_ref.clone()));
        }
        Some(Value::String(id)) if id == schema_ref => {}
        Some(_) => {
            problems.push(problem("schema.$id", format!("must be absent or equal the schema ref `{schema_ref}`")))
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let validator = jsonschema::draft202012::options().should_validate_formats(true).build(&document).map_err(|e| {
        let mut problems = Vec::new();
        describe(&e, "schema", &document, &mut problems);
        if problems.is_empty() {
            problems.push(problem("schema", e.to_string()));
        }
        problems
    })?;
    Ok(Schema {
        payload_type: payload_type.to_owned(),
        schema_ref,
        document,
        builtin: false,
        validator: Arc::new(validator),
    })
}

/// `my.thing.v2` → `schema://clutch/my/thing@2`.
fn derived_ref(payload_type: &str) -> String {
    match payload_type.rsplit_once(".v") {
        Some((words, version)) => format!("schema://clutch/{}@{version}", words.replace('.', "/")),
        None => format!("schema://clutch/{payload_type}"),
    }
}

fn problem(path: &str, message: impl Into<String>) -> Problem {
    Problem { path: path.to_owned(), message: message.into() }
}

/// Sorts problems by path (stable, so one path's problems keep their order) and drops repeats.
fn tidy(mut problems: Vec<Problem>) -> Vec<Problem> {
    problems.sort_by(|a, b| a.path.cmp(&b.path));
    problems.dedup();
    problems
}

/// Appends `.name` to a path, or `["name"]` when the name is not a plain word.
fn member(path: &str, name: &str) -> String {
    let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-$".contains(&b));
    if plain { format!("{path}.{name}") } else { format!("{path}[{}]", Value::from(name)) }
}

/// The path of an error's instance location under `root`, e.g. `payload.findings[0]`. Array indices
/// are told from member names by walking the instance itself.
fn location(root: &str, pointer: &str, instance: &Value) -> String {
    let mut path = root.to_owned();
    let mut at = Some(instance);
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Some(Value::Array(items)) if segment.parse::<usize>().is_ok() => {
                let i: usize = segment.parse().expect("checked");
                let _ = write!(path, "[{i}]");
                at = items.get(i);
            }
            _ => {
                path = member(&path, &segment);
                at = at.and_then(|v| v.get(&segment));
            }
        }
    }
    path
}

/// Turns one validation error into problems: the path of the value at fault and why, in words that do
/// not repeat the (possibly large) value itself.
fn describe(error: &jsonschema::ValidationError<'_>, root: &str, instance: &Value, out: &mut Vec<Problem>) {
    let path = location(root, error.instance_path().as_str(), instance);
    let plural = |n: u64, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    let message = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map(str::to_owned).unwrap_or_else(|| property.to_string());
            out.push(problem(&member(&path, &name), "required"));
            return;
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            for name in unexpected {
                out.push(problem(&member(&path, name), "unknown field"));
            }
            return;
        }
        ValidationErrorKind::Type { kind } => {
            let names: Vec<&str> = match kind {
                TypeKind::Single(t) => vec![t.as_str()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.as_str()).collect(),
            };
            let names: Vec<String> = names.into_iter().map(type_name).collect();
            format!("must be {}", or_list(&names))
        }
        ValidationErrorKind::Enum { options } => match options.as_array() {
            Some(items) if items.iter().all(Value::is_string) => {
                let names: Vec<String> = items.iter().filter_map(|v| v.as_str()).map(|s| format!("`{s}`")).collect();
                format!("must be {}", or_list(&names))
            }
            _ => format!("must be one of {options}"),
        },
        ValidationErrorKind::Constant { expected_value } => format!("must be {expected_value}"),
        ValidationErrorKind::MinItems { limit: 1 } => "must not be empty".into(),
        ValidationErrorKind::MinItems { limit } => format!("must have at least {}", plural(*limit, "item")),
        ValidationErrorKind::MaxItems { limit: 0 } => "must be empty".into(),
        ValidationErrorKind::MaxItems { limit } => format!("must have at most {}", plural(*limit, "item")),
        ValidationErrorKind::AdditionalItems { limit } => {
            format!("must have at most {}", plural(*limit as u64, "item"))
        }
        ValidationErrorKind::MinLength { limit: 1 } => "must not be empty".into(),
        ValidationErrorKind::MinLength { limit } => format!("must have at least {}", plural(*limit, "character")),
        ValidationErrorKind::MaxLength { limit } => format!("must have at most {}", plural(*limit, "character")),
        ValidationErrorKind::MinProperties { limit } => format!("must have at least {}", plural(*limit, "member")),
        ValidationErrorKind::MaxProperties { limit } => format!("must have at most {}", plural(*limit, "member")),
        ValidationErrorKind::Minimum { limit } => format!("must be at least {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("must be greater than {limit}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("must be less than {limit}"),
        ValidationErrorKind::MultipleOf { multiple_of, .. } => format!("must be a multiple of {multiple_of}"),
        ValidationErrorKind::Pattern { pattern } => format!("must match the pattern `{pattern}`"),
        ValidationErrorKind::Format { format } => format!("must be a valid `{format}`"),
        ValidationErrorKind::UniqueItems => "must not contain the same item twice".into(),
        ValidationErrorKind::Contains => "must contain at least one matching item".into(),
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } if root == "schema" => {
            "is not a valid value for this JSON Schema (2020-12) keyword".into()
        }
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
            "matches none of the allowed shapes".into()
        }
        ValidationErrorKind::Referencing(e) => match e {
            ReferencingError::Unretrievable { uri, .. } => format!(
                "`$ref` to `{uri}` does not resolve: references are followed only within the schema itself, \
                 nothing is fetched"
            ),
            ReferencingError::PointerToNowhere { pointer } => {
                format!("`$ref` to `#{pointer}` does not resolve: there is nothing at `{pointer}` in the schema")
            }
            other => format!("a `$ref` does not resolve: {other}"),
        },
        ValidationErrorKind::OneOfMultipleValid { .. } => "matches more than one of the allowed shapes".into(),
        ValidationErrorKind::Not { .. } => "matches a shape that is not allowed".into(),
        ValidationErrorKind::FalseSchema => "is not allowed".into(),
        ValidationErrorKind::UnevaluatedItems { .. } => "has items that are not allowed".into(),
        _ => error.masked().to_string(),
    };
    out.push(problem(&path, message));
}

fn type_name(t: &str) -> String {
    match t {
        "integer" => "a whole number".into(),
        "null" => "null".into(),
        "boolean" => "true or false".into(),
        "array" | "object" => format!("an {t}"),
        other => format!("a {other}"),
    }
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
