//! The daemon's own tools for the loop. `clutch:workflow` (an agent's `tools` entry): the workflow
//! lifecycle, so an LLM agent finds, claims, works and completes the tasks of durable workflows as
//! agents do over MCP. `clutch:sessions`: the seed's session tools, so an agent playing a role in a
//! position talks to the others (`sessions_send`) and reads the session (`sessions_list`,
//! `sessions_history`). Each goes through the same engine method as over MCP, always acting as the
//! agent itself.

use clutch_core::workflow::api;
use clutch_core::{Engine, Refusal};
use clutch_proto::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::provider::ToolSpec;

/// The `tools` entry that offers the workflow tools.
pub const ENTRY: &str = "clutch:workflow";
/// The `tools` entry that offers the session tools.
pub const SESSIONS: &str = "clutch:sessions";
/// Every entry of built-in tools.
pub const ENTRIES: [&str; 2] = [ENTRY, SESSIONS];

/// Why a built-in tool refused a call, as the model reads it: `CODE: message`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The input does not read as the tool's.
    #[error("{}: the input of {name}: {source}", ErrorCode::ValidationFailed)]
    Input { name: String, source: serde_json::Error },
    /// The engine refused it.
    #[error("{}: {}", .0.code, .0.message)]
    Refused(Box<Refusal>),
    /// The engine's answer does not serialize.
    #[error("{0}")]
    Answer(serde_json::Error),
    #[error("{}: no built-in tool {}", ErrorCode::NotFound, .0)]
    Unknown(String),
}

/// `sessions_send`'s input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Send {
    /// The session's id (`run_...`), as your system prompt gives it.
    session_id: String,
    /// Agent ids of the session, or `["all"]` for every other member.
    to: Vec<String>,
    /// One of the position's message types.
    #[serde(rename = "type")]
    kind: String,
    /// What you say.
    #[serde(default)]
    content: Value,
}

/// `sessions_list`'s input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct List {
    /// Only this session.
    #[serde(default)]
    session_id: Option<String>,
}

/// `sessions_history`'s input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct History {
    session_id: String,
    /// How many of the last messages (default 50).
    #[serde(default)]
    limit: Option<usize>,
    /// Only messages from or to this agent.
    #[serde(default)]
    agent_id: Option<String>,
}

/// Each tool: its name, what it does, whether its input names the agent (filled in, never the
/// model's to choose), and the entry that offers it.
const TOOLS: [(&str, &str, bool, &str); 8] = [
    ("workflow_next_tasks", "The tasks of a workflow that are ready to be claimed, best first.", false, ENTRY),
    (
        "task_claim",
        "Claim a ready workflow task: it is yours until you complete it, fail it or release it.",
        true,
        ENTRY,
    ),
    (
        "task_load_context",
        "What you need to work a task: its plan, the outcomes of the tasks it depends on, checkpoints.",
        false,
        ENTRY,
    ),
    (
        "checkpoint_add",
        "Record progress on a task you hold (what you did, found or decided), so it can be resumed.",
        true,
        ENTRY,
    ),
    (
        "task_update_status",
        "Move a task you hold on: in_progress, blocked, completed (with its outcome) or failed (with the error).",
        true,
        ENTRY,
    ),
    (
        "sessions_send",
        "Send a message to other members of your session: to agent ids or [\"all\"], with one of the position's message types.",
        false,
        SESSIONS,
    ),
    (
        "sessions_list",
        "Your session: its position, status, members and their roles, the message types allowed.",
        false,
        SESSIONS,
    ),
    ("sessions_history", "The messages of your session so far, oldest first.", false, SESSIONS),
];

/// The entry that offers the tool `name`, if it is a built-in one.
pub(crate) fn entry_of(name: &str) -> Option<&'static str> {
    TOOLS.iter().find(|(n, ..)| *n == name).map(|(.., entry)| *entry)
}

/// The specs for the model of the tools `entries` offer: the engine's input types' schemas,
/// without the agent the tool acts as.
pub(crate) fn specs(entries: &[String]) -> Vec<ToolSpec> {
    TOOLS
        .iter()
        .filter(|(.., entry)| entries.iter().any(|e| e == entry))
        .map(|(name, description, acts, entry)| {
            let schema = match *name {
                "workflow_next_tasks" => schemars::schema_for!(api::NextTasks),
                "task_claim" => schemars::schema_for!(api::Claim),
                "task_load_context" => schemars::schema_for!(api::LoadContext),
                "checkpoint_add" => schemars::schema_for!(api::AddCheckpoint),
                "task_update_status" => schemars::schema_for!(api::UpdateStatus),
                "sessions_send" => schemars::schema_for!(Send),
                "sessions_list" => schemars::schema_for!(List),
                _ => schemars::schema_for!(History),
            };
            // The workflow tools' `agent_id` is always the agent's own; a session's history may filter by one.
            let acts = *acts || *entry == ENTRY;
            let mut schema = schema.to_value();
            if let Some(map) = schema.as_object_mut() {
                map.remove("$schema");
                map.remove("title");
                if acts {
                    if let Some(Value::Object(props)) = map.get_mut("properties") {
                        props.remove("agent_id");
                    }
                    if let Some(Value::Array(required)) = map.get_mut("required") {
                        required.retain(|r| r != "agent_id");
                    }
                }
            }
            ToolSpec { name: (*name).to_owned(), description: (*description).to_owned(), input_schema: schema }
        })
        .collect()
}

fn input<T: DeserializeOwned>(name: &str, args: Map<String, Value>) -> Result<T, Error> {
    serde_json::from_value(Value::Object(args)).map_err(|source| Error::Input { name: name.to_owned(), source })
}

fn answer<T: serde::Serialize>(result: clutch_core::Result<T>) -> Result<Value, Error> {
    match result {
        Ok(v) => serde_json::to_value(v).map_err(Error::Answer),
        Err(e) => Err(Error::Refused(Box::new(e.body()))),
    }
}

/// Runs the tool `name` for `agent_id`; the answer as JSON, or the refusal as `CODE: message`.
pub(crate) async fn call(
    engine: &Engine,
    agent_id: &str,
    name: &str,
    mut args: Map<String, Value>,
) -> Result<Value, Error> {
    if TOOLS.iter().any(|(n, _, acts, _)| *n == name && *acts) {
        args.insert("agent_id".into(), Value::String(agent_id.to_owned()));
    }
    match name {
        "workflow_next_tasks" => answer(engine.workflow_next_tasks(&input(name, args)?)),
        "task_claim" => answer(engine.task_claim(input(name, args)?).await),
        "task_load_context" => answer(engine.task_load_context(input(name, args)?).await),
        "checkpoint_add" => answer(engine.checkpoint_add(input(name, args)?).await),
        "task_update_status" => answer(engine.task_update_status(input(name, args)?).await),
        "sessions_send" => {
            let send: Send = input(name, args)?;
            answer(engine.session_send(agent_id, &send.session_id, &send.to, &send.kind, send.content).await)
        }
        "sessions_list" => {
            let list: List = input(name, args)?;
            answer(Ok(engine.sessions_list(list.session_id.as_deref())))
        }
        "sessions_history" => {
            let h: History = input(name, args)?;
            answer(engine.session_history(&h.session_id, h.limit, h.agent_id.as_deref()).await)
        }
        other => Err(Error::Unknown(other.to_owned())),
    }
}
