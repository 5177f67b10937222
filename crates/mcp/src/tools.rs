//! What a tool is: a name, a description a model can act on, input and output types whose JSON
//! Schemas are generated from the Rust types, truthful annotations, and one async handler that calls
//! one engine method. Who may call a tool is decided first: its access follows its read-only
//! annotation, and the argument naming the agent it acts as is checked against an agent token, both
//! on the raw arguments. Arguments are then parsed strictly (unknown ones are refused). The tools
//! themselves are defined by topic (`agents`, `workflows`...) and gathered in `registry`.

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;

use clutch_core::Engine;
use clutch_core::Refusal;
use clutch_core::access::{Access, Caller};
use clutch_proto::ErrorCode;
use clutch_proto::error::{MESSAGE_MAX, bound_text, quote};
use rmcp::handler::server::tool::{schema_for_input, schema_for_output};
use rmcp::model::{JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Which tools an endpoint offers. Small profiles keep an agent's context small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// The tools of an agent's own lifecycle: register, heartbeat, claim and do tasks, unregister.
    /// Served at `/mcp/worker`.
    Worker,
    /// Every tool, including those that plan and inspect the work of others. Served at `/mcp`.
    Coordinator,
}

impl Profile {
    pub const ALL: [Profile; 2] = [Profile::Worker, Profile::Coordinator];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Worker => "worker",
            Profile::Coordinator => "coordinator",
        }
    }

    /// The daemon path that serves this profile.
    pub fn path(self) -> &'static str {
        match self {
            Profile::Worker => "/mcp/worker",
            Profile::Coordinator => "/mcp",
        }
    }
}

impl FromStr for Profile {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> Result<Profile, crate::error::Error> {
        match s {
            "worker" => Ok(Profile::Worker),
            "coordinator" => Ok(Profile::Coordinator),
            other => Err(crate::error::Error::Profile(other.to_owned())),
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which profiles offer a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Every profile: the tools of an agent's own lifecycle.
    Lifecycle,
    /// The coordinator profile only.
    Coordination,
}

/// The annotations, stated for every tool (MCP's defaults assume the worst: destructive, not idempotent).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hints {
    pub(crate) read_only: bool,
    pub(crate) destructive: bool,
    pub(crate) idempotent: bool,
}

/// What a handler gets besides its arguments.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) engine: Engine,
    /// Who calls, from the daemon's bearer-token layer; checked by every tool that changes anything.
    pub(crate) caller: Caller,
}

type Answer = Pin<Box<dyn Future<Output = Result<Value, Refusal>> + Send>>;
type Handler = Box<dyn Fn(Context, JsonObject) -> Answer + Send + Sync>;

/// One tool: its definition as `tools/list` shows it, who may call it, and its handler.
pub(crate) struct Tool {
    pub(crate) definition: rmcp::model::Tool,
    /// Whether its input schema names SEP-2243 `Mcp-Param-*` headers (`x-mcp-header`), which rmcp
    /// checks against the arguments; the fast path leaves such calls to rmcp.
    pub(crate) param_headers: bool,
    pub(crate) lane: Lane,
    /// What the caller's role must allow: `Read` for the tools annotated read-only, `Write` for the
    /// rest, `Approve` for the tools that decide tool calls.
    access: Access,
    /// The argument naming the agent the tool acts as, if any.
    acting_as: Option<&'static str>,
    /// Whether its answer names a Clutch task (`task_id`) that stands for long work: for a client
    /// that declares MCP's tasks extension, the call answers with an MCP task of that id instead.
    pub(crate) as_task: bool,
    handler: Handler,
}

impl Tool {
    /// Only admins and approvers may call it (it decides tool calls waiting for approval).
    pub(crate) fn for_approvers(mut self) -> Tool {
        self.access = Access::Approve;
        self
    }

    /// Its answer's `task_id` stands for long work: answered as an MCP task to clients that take them.
    pub(crate) fn runs_as_task(mut self) -> Tool {
        self.as_task = true;
        self
    }

    /// Names the argument that holds the agent the tool acts as: an agent id, or a bare name
    /// (`worker-1` for `agent:worker-1`).
    pub(crate) fn acting_as(mut self, argument: &'static str) -> Tool {
        self.acting_as = Some(argument);
        self
    }

    /// May `caller` make this call? Its role must allow the tool's access and, for an agent token,
    /// the agent the raw `arguments` name must be its own: decided before the arguments are parsed,
    /// so a caller without the right learns nothing from their validation. An argument that is
    /// absent or not a string is left to validation and the handler.
    pub(crate) fn admit(&self, caller: &Caller, arguments: &JsonObject) -> Result<(), Refusal> {
        caller.may(self.access)?;
        let Some(argument) = self.acting_as else {
            return Ok(());
        };
        match arguments.get(argument).and_then(Value::as_str) {
            Some(raw) => {
                let name = raw.strip_prefix("agent:").unwrap_or(raw);
                caller.may_act_as(&format!("agent:{name}"), argument)
            }
            None => Ok(()),
        }
    }

    /// Parses `arguments` into the tool's input type and runs it: the structured answer, or why not.
    pub(crate) fn call(&self, ctx: Context, arguments: JsonObject) -> Answer {
        (self.handler)(ctx, arguments)
    }
}

/// Builds a tool from its input type `I`, output type `O` and handler.
pub(crate) fn tool<I, O, F, Fut>(
    name: &'static str,
    title: &'static str,
    description: &'static str,
    lane: Lane,
    hints: Hints,
    run: F,
) -> Tool
where
    I: DeserializeOwned + JsonSchema + 'static,
    O: Serialize + JsonSchema + 'static,
    F: Fn(Context, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, Refusal>> + Send + 'static,
{
    let input_schema =
        schema_for_input::<I>().unwrap_or_else(|e| panic!("the input of tool `{name}` is not an object: {e}"));
    let input_schema = objects_only(&input_schema);
    let param_headers = Value::Object((*input_schema).clone()).to_string().contains("\"x-mcp-header\"");
    let annotations = ToolAnnotations::with_title(title)
        .read_only(hints.read_only)
        .destructive(hints.destructive)
        .idempotent(hints.idempotent)
        .open_world(false);
    let definition = rmcp::model::Tool::new(name, description, input_schema)
        .with_title(title)
        .with_raw_output_schema(Arc::new(flat(&objects_only(&schema_for_output::<O>()))))
        .with_annotations(annotations);
    let handler: Handler = Box::new(move |ctx, arguments| match parse::<I>(arguments) {
        Ok(input) => {
            let answer = run(ctx, input);
            Box::pin(async move {
                let output = answer.await?;
                serde_json::to_value(output).map_err(|e| {
                    tracing::error!(tool = name, error = %e, "a tool answer could not be serialized");
                    Refusal::new(ErrorCode::Internal, "the answer could not be encoded (details in the daemon log)")
                })
            })
        }
        Err(refusal) => Box::pin(std::future::ready(Err(refusal))),
    });
    let access = if hints.read_only { Access::Read } else { Access::Write };
    Tool { definition, param_headers, lane, access, acting_as: None, as_task: false, handler }
}

/// The schema with every `true` property schema (schemars' "any JSON value") written as `{}`: the
/// MCP 2025-11-25 wire schema wants each property's schema to be an object.
fn objects_only(schema: &JsonObject) -> Arc<JsonObject> {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(properties)) = map.get_mut("properties") {
                    for property in properties.values_mut() {
                        if *property == Value::Bool(true) {
                            *property = Value::Object(JsonObject::new());
                        }
                    }
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = Value::Object(schema.clone());
    walk(&mut value);
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("an object stays an object"),
    }
}

/// An output schema that clients validate cheaply, meaning the same: each `$ref` into `$defs` is
/// inlined (a validator such as the Python SDK's resolves a reference at every use, which was most
/// of its time per answer), `anyOf: [X, {"type": "null"}]` (an optional object or enum) becomes X
/// with `null` among its types, and `$defs` goes once nothing refers to it. A recursive definition
/// keeps its references (and `$defs`).
pub(crate) fn flat(schema: &JsonObject) -> JsonObject {
    let defs = match schema.get("$defs") {
        Some(Value::Object(defs)) => defs.clone(),
        _ => JsonObject::new(),
    };
    let mut value = Value::Object(schema.clone());
    if let Value::Object(map) = &mut value {
        map.remove("$defs");
    }
    let mut kept = false;
    inline(&mut value, &defs, &mut Vec::new(), &mut kept);
    fold_nullable(&mut value);
    let Value::Object(mut map) = value else { unreachable!("an object stays an object") };
    if kept {
        let mut defs = Value::Object(defs);
        fold_nullable(&mut defs);
        map.insert("$defs".into(), defs);
    }
    map
}

/// Replaces `{"$ref": "#/$defs/NAME", ...}` with NAME's schema (the reference's own keywords, such
/// as a description, win), except inside NAME itself.
fn inline(value: &mut Value, defs: &JsonObject, within: &mut Vec<String>, kept: &mut bool) {
    match value {
        Value::Object(map) => {
            let target = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/"));
            if let Some(name) = target.map(str::to_owned) {
                match defs.get(&name) {
                    Some(Value::Object(def)) if !within.contains(&name) => {
                        let mut merged = def.clone();
                        map.remove("$ref");
                        merged.extend(std::mem::take(map));
                        *map = merged;
                        within.push(name);
                        map.values_mut().for_each(|v| inline(v, defs, within, kept));
                        within.pop();
                    }
                    _ => *kept = true,
                }
                return;
            }
            map.values_mut().for_each(|v| inline(v, defs, within, kept));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| inline(v, defs, within, kept)),
        _ => {}
    }
}

/// Folds `anyOf`/`oneOf` of one typed schema and `{"type": "null"}` into that schema, nullable.
fn fold_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(fold_nullable);
            for keyword in ["anyOf", "oneOf"] {
                let Some(Value::Array(branches)) = map.get(keyword) else { continue };
                let is_null = |v: &Value| {
                    v.as_object().is_some_and(|o| o.len() == 1 && o.get("type").is_some_and(|t| t == "null"))
                };
                let [a, b] = branches.as_slice() else { continue };
                let other = match (is_null(a), is_null(b)) {
                    (false, true) => a,
                    (true, false) => b,
                    _ => continue,
                };
                let Some(other) = other.as_object() else { continue };
                let Some(kind) = other.get("type").and_then(Value::as_str) else { continue };
                if other.contains_key("const") || other.keys().any(|k| k == "anyOf" || k == "oneOf") {
                    continue;
                }
                let mut folded = other.clone();
                folded.insert("type".into(), Value::Array(vec![Value::from(kind), Value::from("null")]));
                if let Some(Value::Array(values)) = folded.get_mut("enum") {
                    values.push(Value::Null);
                }
                map.remove(keyword);
                // The outer schema's own keywords (a description) win.
                folded.extend(std::mem::take(map));
                *map = folded;
                break;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(fold_nullable),
        _ => {}
    }
}

/// Arguments as the input type, or a `VALIDATION_FAILED` naming the argument at fault (an unknown
/// one included: arguments a tool does not take are refused, not ignored).
fn parse<I: DeserializeOwned>(arguments: JsonObject) -> Result<I, Refusal> {
    serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|e| {
        // The path and serde's words may quote an argument's name or value at any length: a prefix.
        let path = e.path().to_string();
        let path = quote(&path);
        let inner = bound_text(&e.into_inner().to_string(), MESSAGE_MAX).into_owned();
        let field = if path == "." {
            // serde reports an unknown or missing field at the level that holds it: name it.
            inner.split('`').nth(1).map(|name| quote(name).into_owned())
        } else {
            Some(path.clone().into_owned())
        };
        let message = if path == "." { inner } else { format!("{path}: {inner}") };
        let mut refusal = Refusal::new(ErrorCode::ValidationFailed, format!("invalid arguments: {message}"))
            .hint("the tool's inputSchema (tools/list) lists the arguments it takes");
        refusal.field = field;
        refusal
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn flat(schema: Value) -> Value {
        Value::Object(super::flat(schema.as_object().unwrap()))
    }

    #[test]
    fn references_are_inlined_and_optional_objects_folded() {
        let schema = json!({
            "$defs": {
                "Lease": {"type": "object", "properties": {"agent_id": {"type": "string"}}, "required": ["agent_id"]},
                "Status": {"type": "string", "enum": ["pending", "done"]},
            },
            "type": "object",
            "properties": {
                "lease": {"anyOf": [{"$ref": "#/$defs/Lease"}, {"type": "null"}], "description": "the lease"},
                "status": {"$ref": "#/$defs/Status", "description": "where it is"},
                "all": {"type": "array", "items": {"$ref": "#/$defs/Status"}},
            },
        });
        assert_eq!(
            flat(schema),
            json!({
                "type": "object",
                "properties": {
                    "lease": {
                        "type": ["object", "null"], "properties": {"agent_id": {"type": "string"}},
                        "required": ["agent_id"], "description": "the lease",
                    },
                    "status": {"type": "string", "enum": ["pending", "done"], "description": "where it is"},
                    "all": {"type": "array", "items": {"type": "string", "enum": ["pending", "done"]}},
                },
            })
        );
    }

    #[test]
    fn a_recursive_definition_keeps_its_references() {
        let schema = json!({
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
        });
        let flat = flat(schema);
        assert_eq!(flat["properties"]["root"]["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
        assert!(flat["$defs"]["Node"].is_object());
    }

    #[test]
    fn other_unions_are_left_alone() {
        let union = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        let schema = json!({"type": "object", "properties": {"either": union.clone()}});
        assert_eq!(flat(schema)["properties"]["either"], union);
    }
}
