//! JSON Schemas (draft 2020-12) generated from the protocol types. The daemon serves them at
//! `/v1/schemas/{name}`; `docs/schemas/` holds checked-in copies that a test keeps from drifting.

use serde_json::Value;

/// The published schemas, by name.
pub const NAMES: &[&str] = &["envelope", "agent-card"];

/// The schema published under `name`, or `None`.
pub fn get(name: &str) -> Option<Value> {
    let schema = match name {
        "envelope" => schemars::schema_for!(crate::Message),
        "agent-card" => schemars::schema_for!(crate::AgentCard),
        _ => return None,
    };
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("$id".into(), Value::from(format!("https://clutch.dev/schemas/{name}.json")));
    }
    Some(value)
}

/// The checked-in text of a schema: pretty JSON with a trailing newline.
pub fn render(name: &str) -> Option<String> {
    get(name).map(|v| serde_json::to_string_pretty(&v).expect("a schema serializes") + "\n")
}
