//! The published shapes: the checked-in schemas under `docs/schemas/` match the code, each has its
//! `$id`, and what the daemon writes conforms to them (every engine and workflow test's log is
//! checked when its hub stops, see [`check_log`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clutch_core::engine::SYSTEM_RUN;
use clutch_core::published;
use clutch_core::tasks::ORCHESTRATOR;
use clutch_core::view::{self, TaskState};
use clutch_store::Filter;
use serde_json::{Value, json};

fn checked_in(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas").join(format!("{name}.schema.json"))
}

/// Compares each checked-in schema with the generated one. `UPDATE_SCHEMAS=1 cargo test -p
/// clutch-core --test it published` rewrites them instead.
#[test]
fn schemas_in_docs_match_the_code() {
    let update = std::env::var("UPDATE_SCHEMAS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for name in published::names() {
        let path = checked_in(name);
        let want = published::render(name).unwrap();
        let have = std::fs::read_to_string(&path).ok();
        if have.as_deref() == Some(want.as_str()) {
            continue;
        }
        if update {
            std::fs::write(&path, want).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            eprintln!("updated {}", path.display());
        } else {
            let why = if have.is_some() { "differs from the code" } else { "is missing" };
            stale.push(format!("  docs/schemas/{name}.schema.json {why}"));
        }
    }
    assert!(
        stale.is_empty(),
        "the checked-in JSON Schemas are out of date:\n{}\nIf the change to the views or payloads is intended, regenerate \
         them with\n  UPDATE_SCHEMAS=1 cargo test -p clutch-core --test it published\nthen the Python client's models \
         made from them with\n  UPDATE_SCHEMAS=1 .tools/venv/bin/python -m pytest clients/python/tests/core/test_models.py\nand \
         commit the result.",
        stale.join("\n")
    );
}

#[test]
fn every_name_is_published_once_with_its_id() {
    let names: Vec<&str> = published::names().collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a name published twice: {names:?}");
    for name in names {
        let schema = published::get(name).unwrap();
        assert_eq!(schema["$id"], format!("https://clutch.dev/schemas/{name}.json"));
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert!(clutch_proto::schema::get(name).is_none(), "{name} is also one of proto's schemas");
    }
    assert_eq!(published::get("nope"), None);
}

#[test]
fn task_states_serialize_as_their_names() {
    for state in TaskState::ALL {
        assert_eq!(serde_json::to_value(state).unwrap(), json!(state.as_str()));
    }
    let counts: BTreeMap<TaskState, u64> = serde_json::from_value(json!({"in_progress": 2, "timed_out": 1})).unwrap();
    assert_eq!(counts, BTreeMap::from([(TaskState::InProgress, 2), (TaskState::TimedOut, 1)]));
    assert!(TaskState::TimedOut.is_final() && !TaskState::Blocked.is_final());
}

/// The published shape a stored event's payload must have, if the daemon wrote it.
fn shape_of(event: &Value) -> Option<String> {
    if let Some(pt) = event["payload_type"].as_str()
        && published::get(pt).is_some()
    {
        return Some(pt.to_owned());
    }
    let from_daemon = event["from"]["agent_id"] == ORCHESTRATOR;
    let kind = event["type"].as_str()?;
    (from_daemon && published::get(kind).is_some() && event["run_id"] != SYSTEM_RUN).then(|| kind.to_owned())
}

/// Every payload of a published shape in `log` (the daemon's own, and workflow events agents sent)
/// conforms to its schema; returns how many were checked, by shape.
pub(crate) async fn check_log(log: &clutch_core::Handle) -> BTreeMap<String, usize> {
    let mut validators = BTreeMap::new();
    let mut checked = BTreeMap::new();
    let mut after = 0;
    loop {
        let events = log.read(&Filter::default(), after, 1000).await.unwrap();
        let Some(last) = events.last() else { break };
        after = last.seq;
        for event in &events {
            let event: Value = serde_json::from_str(&event.to_wire()).unwrap();
            let Some(shape) = shape_of(&event) else { continue };
            let validator = validators.entry(shape.clone()).or_insert_with(|| {
                jsonschema::validator_for(&published::get(&shape).unwrap()).expect("a published schema compiles")
            });
            let problems: Vec<String> = validator.iter_errors(&event["payload"]).map(|e| e.to_string()).collect();
            assert!(problems.is_empty(), "{shape} payload does not conform: {problems:?}\n{event}");
            *checked.entry(shape).or_default() += 1;
        }
    }
    checked
}

#[test]
fn the_views_read_back_as_they_were_built() {
    let task: view::Task = serde_json::from_value(json!({
        "task_id": "task_1", "run_id": "run_1", "thread_id": "thr_1", "parent_task_id": null,
        "state": "routed", "agent": "agent:ken", "requester": "user:ada", "attempt": 1, "routings": 1,
        "progress": null, "requires": ["skill:x"], "error": null, "history": []
    }))
    .unwrap();
    assert_eq!(
        (task.kind, task.state, task.history.as_deref().map(<[_]>::len)),
        (view::TaskKind::Routed, TaskState::Routed, Some(0))
    );
    let back = serde_json::to_value(&task).unwrap();
    assert!(back.get("kind").is_none() && back.get("children").is_none(), "{back}");
}
