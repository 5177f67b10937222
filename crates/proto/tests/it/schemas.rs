//! The JSON Schemas: the copies checked in under `docs/schemas/` match the code, and the envelope
//! schema says what the protocol says.

use std::path::PathBuf;

use clutch_proto::schema;
use serde_json::{Value, json};

fn checked_in(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas").join(format!("{name}.schema.json"))
}

/// Compares each checked-in schema with the generated one. `UPDATE_SCHEMAS=1 cargo test -p
/// clutch-proto --test it schemas` rewrites them instead.
#[test]
fn schemas_in_docs_match_the_code() {
    let update = std::env::var("UPDATE_SCHEMAS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for name in schema::NAMES {
        let path = checked_in(name);
        let want = schema::render(name).unwrap();
        let have = std::fs::read_to_string(&path).ok();
        if have.as_deref() == Some(want.as_str()) {
            continue;
        }
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, want).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            eprintln!("updated {}", path.display());
        } else {
            let why = if have.is_some() { "differs from the code" } else { "is missing" };
            stale.push(format!("  docs/schemas/{name}.schema.json {why}"));
        }
    }
    assert!(
        stale.is_empty(),
        "the checked-in JSON Schemas are out of date:\n{}\nIf the change to the protocol types is intended, regenerate them with\n  \
         UPDATE_SCHEMAS=1 cargo test -p clutch-proto --test it schemas_in_docs_match_the_code\nand commit the result.",
        stale.join("\n")
    );
}

#[test]
fn every_published_name_renders_and_nothing_else_does() {
    for name in schema::NAMES {
        let text = schema::render(name).unwrap();
        assert!(text.ends_with("}\n"), "{name}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), schema::get(name).unwrap());
        assert_eq!(schema::get(name).unwrap()["$id"], format!("https://clutch.dev/schemas/{name}.json"));
    }
    assert_eq!(schema::get("nope"), None);
    assert_eq!(schema::render("envelope.schema.json"), None);
}

#[test]
fn envelope_schema_is_draft_2020_12_with_the_required_fields() {
    let s = schema::get("envelope").unwrap();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["title"], "ClutchMessage");
    assert_eq!(s["type"], "object");
    assert_eq!(s["additionalProperties"], json!(false), "unknown fields must be refused");

    let mut required: Vec<&str> = s["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    required.sort_unstable();
    let mut want = vec!["v", "id", "ts", "thread_id", "run_id", "task_id", "from", "to", "type", "payload"];
    want.sort_unstable();
    assert_eq!(required, want);

    // Every field the validator knows is described, and no other.
    let mut props: Vec<&str> = s["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    props.sort_unstable();
    let mut fields = vec![
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
    fields.sort_unstable();
    assert_eq!(props, fields);
}

#[test]
fn agent_card_schema_is_draft_2020_12() {
    let s = schema::get("agent-card").unwrap();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["title"], "AgentCard");
    assert_eq!(s["additionalProperties"], json!(false));
    let required: Vec<&str> = s["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(required.len(), 2, "{required:?}");
    assert!(required.contains(&"v") && required.contains(&"agent_id"), "{required:?}");
}
