//! The JSON Schemas (draft 2020-12) of core's published shapes, beside proto's envelope and card:
//! the read views ([`crate::view`]) by name, the daemon's payloads ([`crate::payload`]) by their
//! payload type (or, for a message type the daemon fills in its own way, by that type; the two
//! parts of payloads, by what they are). The faces serve them beside proto's; `docs/schemas/`
//! holds checked-in copies that a test keeps from drifting, and the web UI's types are generated
//! from them.
//!
//! Every payload of a published shape in the engine's test logs conforms to its schema: each engine and
//! workflow test's log is checked when its hub stops (`tests/it/published.rs`).

use schemars::{JsonSchema, Schema, schema_for};
use serde_json::Value;

use crate::engine::{
    AGENT_STATUS_PAYLOAD, APPROVAL_DECIDED_PAYLOAD, APPROVAL_REQUESTED_PAYLOAD, BUDGET_PAYLOAD, REFUSAL_PAYLOAD,
    SCHEMA_PAYLOAD, TASK_RETRY_PAYLOAD, TOOL_STARTED_PAYLOAD,
};
use crate::workflow::{
    CHECKPOINT_PAYLOAD, PLAN_PAYLOAD, TASK_PAYLOAD, TASK_PLAN_PAYLOAD, TASK_STATUS_PAYLOAD, WORKFLOW_PAYLOAD,
    WORKSPACE_PAYLOAD,
};
use crate::{payload, session, view};

/// A published shape: its name and its schema.
type Shape = (&'static str, fn() -> Schema);

/// Every published shape.
const SHAPES: &[Shape] = &[
    ("agent-view", schema_for::<view::Agent>),
    ("agents-view", schema_for::<view::Agents>),
    ("task-view", schema_for::<view::Task>),
    ("run-tasks-view", schema_for::<view::RunTasks>),
    ("schema-view", schema_for::<view::Schema>),
    ("registered-view", schema_for::<view::Registered>),
    ("removed-view", schema_for::<view::Removed>),
    ("heartbeat-view", schema_for::<view::Heartbeat>),
    ("tools-view", schema_for::<view::Tools>),
    ("approvals-view", schema_for::<view::Approvals>),
    ("sessions-view", schema_for::<view::Sessions>),
    ("session-history-view", schema_for::<view::SessionHistory>),
    ("session-sent-view", schema_for::<view::SessionSent>),
    ("invoked-view", schema_for::<view::Invoked>),
    ("inbox-view", schema_for::<view::Inbox>),
    ("ended-view", schema_for::<view::Ended>),
    ("retention-view", schema_for::<view::Retention>),
    ("runs-view", schema_for::<view::Runs>),
    ("threads-view", schema_for::<view::Threads>),
    ("tasks-view", schema_for::<view::Tasks>),
    ("search-view", schema_for::<view::Search>),
    (AGENT_STATUS_PAYLOAD, schema_for::<payload::AgentStatus>),
    (BUDGET_PAYLOAD, schema_for::<payload::BudgetNotice>),
    (TASK_RETRY_PAYLOAD, schema_for::<payload::TaskRetry>),
    (REFUSAL_PAYLOAD, schema_for::<payload::Refusal>),
    (SCHEMA_PAYLOAD, schema_for::<payload::SchemaRegistration>),
    ("routing.decision", schema_for::<payload::RoutingDecision>),
    ("routing.failure", schema_for::<payload::RoutingFailure>),
    ("task.error", schema_for::<payload::TaskError>),
    ("task.timeout", schema_for::<payload::Timeout>),
    ("task.cancel", schema_for::<payload::Cancel>),
    ("tool.call", schema_for::<payload::ToolCall>),
    ("tool.result", schema_for::<payload::ToolResult>),
    ("tool.error", schema_for::<payload::TaskError>),
    (TOOL_STARTED_PAYLOAD, schema_for::<payload::ToolStarted>),
    (APPROVAL_REQUESTED_PAYLOAD, schema_for::<payload::ApprovalRequested>),
    (APPROVAL_DECIDED_PAYLOAD, schema_for::<payload::ApprovalDecided>),
    (WORKFLOW_PAYLOAD, schema_for::<payload::Workflow>),
    (PLAN_PAYLOAD, schema_for::<payload::Plan>),
    (TASK_PAYLOAD, schema_for::<payload::PlannedTask>),
    (TASK_STATUS_PAYLOAD, schema_for::<payload::StatusChange>),
    ("workflow-task-result", schema_for::<payload::Outcome>),
    (CHECKPOINT_PAYLOAD, schema_for::<payload::Checkpoint>),
    ("recovery-detail", schema_for::<payload::Recovery>),
    (TASK_PLAN_PAYLOAD, schema_for::<payload::TaskPlan>),
    (WORKSPACE_PAYLOAD, schema_for::<crate::workflow::api::Workspace>),
    (session::RECORD_PAYLOAD, schema_for::<session::Record>),
    (session::MESSAGE_PAYLOAD, schema_for::<session::Said>),
    (session::WARNING_PAYLOAD, schema_for::<session::Warning>),
];

fn schema_for<T: JsonSchema>() -> Schema {
    schema_for!(T)
}

/// The names of every published shape.
pub fn names() -> impl Iterator<Item = &'static str> {
    SHAPES.iter().map(|(name, _)| *name)
}

/// The schema published under `name`, with its `$id`, or `None`.
pub fn get(name: &str) -> Option<Value> {
    let (_, schema) = SHAPES.iter().find(|(n, _)| *n == name)?;
    let mut value = schema().to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("$id".into(), Value::from(format!("https://clutch.dev/schemas/{name}.json")));
    }
    Some(value)
}

/// The checked-in text of a schema: pretty JSON with a trailing newline.
pub fn render(name: &str) -> Option<String> {
    get(name).and_then(|v| serde_json::to_string_pretty(&v).ok()).map(|t| t + "\n")
}
