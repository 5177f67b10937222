//! The workflow lifecycle as tools of the loop (an agent's `tools` entry `clutch:workflow`): an LLM
//! agent finds, claims, works and completes the tasks of durable workflows as agents do over MCP,
//! through the same engine methods, always acting as itself.

use clutch_core::Engine;
use clutch_core::workflow::api;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::provider::ToolSpec;

/// The `tools` entry that offers them.
pub const ENTRY: &str = "clutch:workflow";

/// Each tool: its name, what it does, and whether its input names the agent (filled in, never the
/// model's to choose).
const TOOLS: [(&str, &str, bool); 5] = [
    ("workflow_next_tasks", "The tasks of a workflow that are ready to be claimed, best first.", false),
    ("task_claim", "Claim a ready workflow task: it is yours until you complete it, fail it or release it.", true),
    (
        "task_load_context",
        "What you need to work a task: its plan, the outcomes of the tasks it depends on, checkpoints.",
        false,
    ),
    (
        "checkpoint_add",
        "Record progress on a task you hold (what you did, found or decided), so it can be resumed.",
        true,
    ),
    (
        "task_update_status",
        "Move a task you hold on: in_progress, blocked, completed (with its outcome) or failed (with the error).",
        true,
    ),
];

/// Whether `name` is one of these tools.
pub(crate) fn is_builtin(name: &str) -> bool {
    TOOLS.iter().any(|(n, ..)| *n == name)
}

/// Their specs for the model: the engine's input types' schemas, without `agent_id`.
pub(crate) fn specs() -> Vec<ToolSpec> {
    TOOLS
        .iter()
        .map(|(name, description, _)| {
            let schema = match *name {
                "workflow_next_tasks" => schemars::schema_for!(api::NextTasks),
                "task_claim" => schemars::schema_for!(api::Claim),
                "task_load_context" => schemars::schema_for!(api::LoadContext),
                "checkpoint_add" => schemars::schema_for!(api::AddCheckpoint),
                _ => schemars::schema_for!(api::UpdateStatus),
            };
            let mut schema = schema.to_value();
            if let Some(map) = schema.as_object_mut() {
                map.remove("$schema");
                map.remove("title");
                if let Some(Value::Object(props)) = map.get_mut("properties") {
                    props.remove("agent_id");
                }
                if let Some(Value::Array(required)) = map.get_mut("required") {
                    required.retain(|r| r != "agent_id");
                }
            }
            ToolSpec { name: (*name).to_owned(), description: (*description).to_owned(), input_schema: schema }
        })
        .collect()
}

fn input<T: DeserializeOwned>(name: &str, args: Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args)).map_err(|e| format!("VALIDATION_FAILED: the input of {name}: {e}"))
}

fn answer<T: serde::Serialize>(result: clutch_core::Result<T>) -> Result<Value, String> {
    match result {
        Ok(v) => serde_json::to_value(v).map_err(|e| e.to_string()),
        Err(e) => {
            let body = e.body();
            Err(format!("{}: {}", body.code.as_str(), body.message))
        }
    }
}

/// Runs the tool `name` for `agent_id`; the answer as JSON, or the refusal as `CODE: message`.
pub(crate) async fn call(
    engine: &Engine,
    agent_id: &str,
    name: &str,
    mut args: Map<String, Value>,
) -> Result<Value, String> {
    if TOOLS.iter().any(|(n, _, acts)| *n == name && *acts) {
        args.insert("agent_id".into(), Value::String(agent_id.to_owned()));
    }
    match name {
        "workflow_next_tasks" => answer(engine.workflow_next_tasks(&input(name, args)?)),
        "task_claim" => answer(engine.task_claim(input(name, args)?).await),
        "task_load_context" => answer(engine.task_load_context(input(name, args)?).await),
        "checkpoint_add" => answer(engine.checkpoint_add(input(name, args)?).await),
        "task_update_status" => answer(engine.task_update_status(input(name, args)?).await),
        other => Err(format!("NOT_FOUND: no built-in tool {other}")),
    }
}
