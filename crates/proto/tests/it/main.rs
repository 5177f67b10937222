//! The protocol crate's one integration-test binary: envelope and AgentCard validation driven by
//! tables of inputs and expected problems, error bodies, property tests and the checked-in schemas.

mod card;
mod error_body;
mod fuzz;
mod message;
mod props;
mod schemas;
mod sign;

use std::time::{Duration, SystemTime};

use clutch_proto::Problems;
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use serde_json::{Value, json};

/// The fixed "now" every test validates at: 2023-11-14T22:13:20.123Z.
pub fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)
}

pub fn defaults() -> Defaults {
    Defaults { now: now() }
}

/// A fresh, valid id of `kind`.
pub fn new_id(kind: Kind) -> String {
    id::generate(kind)
}

/// An `artifact:sha256:` reference with a well-formed digest.
pub fn artifact_ref() -> String {
    format!("{}{}", id::ARTIFACT_PREFIX, "0123456789abcdef".repeat(4))
}

/// The smallest valid envelope: only the fields a client must send.
pub fn minimal() -> Value {
    json!({
        "thread_id": new_id(Kind::Thread),
        "run_id": new_id(Kind::Run),
        "task_id": new_id(Kind::Task),
        "from": { "agent_id": "agent:ken" },
        "to": [],
        "type": "task.request",
        "payload": {},
    })
}

/// The example envelope of the protocol's §1.1, with real ids and a content-addressed attachment.
pub fn seed_envelope() -> Value {
    json!({
        "v": "clutch/0.1",
        "id": new_id(Kind::Message),
        "ts": "2026-02-01T13:20:11.123Z",

        "thread_id": new_id(Kind::Thread),
        "run_id": new_id(Kind::Run),
        "task_id": new_id(Kind::Task),
        "parent_task_id": null,

        "trace": { "trace_id": "tr_...", "span_id": "sp_..." },

        "from": { "agent_id": "agent:ken", "role": "worker" },
        "to": [{ "agent_id": "agent:orchestrator" }],

        "type": "task.result",
        "domain": "research",
        "payload_type": "research.summary.v1",
        "schema_ref": "schema://clutch/research/summary@1",

        "payload": {
            "title": "Market analysis complete",
            "findings": ["..."],
            "citations": ["https://..."]
        },

        "requires": ["skill:research"],
        "prefers": ["tool:browser", "domain:fintech"],

        "security": {
            "auth": { "scheme": "ed25519", "kid": "key_01", "sig": "..." },
            "policy": { "sandbox": true, "tool_allowlist": ["mcp:browser", "mcp:files"] }
        },

        "attachments": [
            { "kind": "artifact_ref", "ref": artifact_ref() }
        ],

        "idempotency_key": "idem_01HX...",
        "attempt": 1,

        "meta": {
            "framework": "langgraph",
            "ui_channel": "chat:research"
        }
    })
}

/// The example AgentCard of the protocol's §1.4.
pub fn seed_card() -> Value {
    json!({
        "v": "clutch/0.1",
        "agent_id": "agent:ken",
        "display": { "name": "Ken", "desc": "Research specialist" },

        "endpoints": {
            "a2a": { "url": "http://ken:8080/a2a" },
            "clutch": { "url": "http://ken:8080/clutch" }
        },

        "capabilities": [
            {
                "id": "skill:research",
                "version": "1.0",
                "tags": ["market", "competitive", "fintech"],
                "tools": ["mcp:browser", "mcp:files"],
                "trust_level": "sandbox",
                "cost_hint": "medium"
            },
            {
                "id": "tool:mcp",
                "servers": ["mcp:browser", "mcp:files"]
            }
        ],

        "limits": {
            "max_concurrency": 2,
            "max_runtime_sec": 600
        },

        "security": {
            "sandbox": true,
            "network": "egress-restricted"
        }
    })
}

/// `base` with the top-level fields of `patch` set (a `null` in `patch` is kept as a `null` value).
pub fn with(mut base: Value, patch: Value) -> Value {
    let (Value::Object(b), Value::Object(p)) = (&mut base, patch) else { panic!("with() takes two objects") };
    b.extend(p);
    base
}

/// `base` without the top-level `fields`.
pub fn without(mut base: Value, fields: &[&str]) -> Value {
    let b = base.as_object_mut().expect("without() takes an object");
    for f in fields {
        b.remove(*f);
    }
    base
}

/// Validates `input` as an envelope. `expected` lists every problem as `(path, part of its message)`,
/// in any order; an empty list means the input must be valid.
#[track_caller]
pub fn check(input: Value, expected: &[(&str, &str)]) {
    let got = validate::message(&input, &defaults()).map(drop);
    expect_problems(&input, got, expected);
}

/// [`check`] for AgentCards.
#[track_caller]
pub fn check_card(input: Value, expected: &[(&str, &str)]) {
    let got = validate::agent_card(&input).map(drop);
    expect_problems(&input, got, expected);
}

#[track_caller]
fn expect_problems(input: &Value, got: Result<(), Problems>, expected: &[(&str, &str)]) {
    let problems = match got {
        Ok(()) if expected.is_empty() => return,
        Ok(()) => panic!("expected problems {expected:?}, but the input is valid:\n{input:#}"),
        Err(p) if expected.is_empty() => panic!("expected a valid input, got problems: {p}\ninput:\n{input:#}"),
        Err(p) => p.into_vec(),
    };
    let mut left = problems.clone();
    let mut missing = Vec::new();
    for (path, part) in expected {
        match left.iter().position(|p| p.path == *path && p.message.contains(part)) {
            Some(i) => {
                left.remove(i);
            }
            None => missing.push((path, part)),
        }
    }
    if !missing.is_empty() || !left.is_empty() {
        let got: Vec<String> = problems.iter().map(|p| format!("  {}: {}", p.path, p.message)).collect();
        panic!(
            "problems differ\n  expected but not reported: {missing:?}\n  reported but not expected: {:?}\nall reported:\n{}\ninput:\n{input:#}",
            left.iter().map(|p| (&p.path, &p.message)).collect::<Vec<_>>(),
            got.join("\n"),
        );
    }
}
