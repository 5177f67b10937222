//! AgentCard validation: the protocol's example card, and the problem reported for each mistake.

use clutch_proto::card::{CostHint, Network, TrustLevel};
use clutch_proto::validate;
use serde_json::{Value, json};

use crate::{check_card, seed_card, with, without};

#[test]
fn seed_example_is_valid_and_round_trips() {
    let input = seed_card();
    let card = validate::agent_card(&input).unwrap();
    assert_eq!(card.agent_id, "agent:ken");
    assert_eq!(card.capabilities.len(), 2);
    assert_eq!(card.capabilities[0].trust_level, Some(TrustLevel::Sandbox));
    assert_eq!(card.capabilities[0].cost_hint, Some(CostHint::Medium));
    assert_eq!(card.limits.as_ref().and_then(|l| l.max_concurrency), Some(2));
    assert_eq!(card.security.as_ref().and_then(|s| s.network), Some(Network::EgressRestricted));
    assert_eq!(serde_json::to_value(&card).unwrap(), input);
}

#[test]
fn smallest_card_gets_its_version() {
    let card = validate::agent_card(&json!({ "agent_id": "agent:ken" })).unwrap();
    assert_eq!(card.v, clutch_proto::VERSION);
    assert!(card.capabilities.is_empty() && card.endpoints.is_empty() && card.meta.is_empty());
    check_card(json!({ "agent_id": "agent:ken", "v": "clutch/0.2" }), &[("v", "unsupported protocol version")]);
}

#[test]
fn the_card_must_be_an_object() {
    for body in [json!(null), json!([seed_card()]), json!("agent:ken"), json!(3)] {
        check_card(body, &[("$", "an agent card must be a JSON object")]);
    }
}

#[test]
fn bad_agent_ids() {
    check_card(json!({}), &[("agent_id", "required")]);
    check_card(without(seed_card(), &["agent_id"]), &[("agent_id", "required")]);
    let cases: &[(Value, &str)] = &[
        (json!(null), "required"),
        (json!(7), "must be a string"),
        (json!("ken"), "must start with `agent:`"),
        (json!("user:ken"), "must start with `agent:`"),
        (json!("group:ken"), "must start with `agent:`"),
        (json!("agent:"), "1 to 128 characters"),
        (json!("agent:-ken"), "start with a letter or digit"),
        (json!("agent:ken smith"), "` ` is not allowed"),
        (json!(format!("agent:{}", "k".repeat(129))), "1 to 128 characters"),
    ];
    for (bad, message) in cases {
        check_card(with(seed_card(), json!({ "agent_id": bad })), &[("agent_id", message)]);
    }
}

fn with_capability(cap: Value) -> Value {
    with(seed_card(), json!({ "capabilities": [{ "id": "skill:ok" }, cap] }))
}

#[test]
fn bad_capabilities() {
    for ok in ["skill:research", "tool:mcp", "mcp:files", "skill:a.b-c_d"] {
        check_card(with_capability(json!({ "id": ok })), &[]);
    }
    let cases: &[(&str, &str)] = &[
        ("skill:research@1.0", "put the version in `version`, not after `@`"),
        ("domain:fintech", "must start with one of skill:, tool:, mcp:"),
        ("tag:fast", "must start with one of skill:, tool:, mcp:"),
        ("research", "must start with one of skill:, tool:, mcp:"),
        ("skill:", "1 to 128 characters"),
        ("skill:re search", "` ` is not allowed"),
    ];
    for (bad, message) in cases {
        check_card(with_capability(json!({ "id": bad })), &[("capabilities[1].id", message)]);
    }
    check_card(with_capability(json!({})), &[("capabilities[1].id", "required")]);
    check_card(with_capability(json!("skill:x")), &[("capabilities[1]", "must be an object")]);
    check_card(
        with(seed_card(), json!({ "capabilities": { "id": "skill:x" } })),
        &[("capabilities", "must be an array of capability objects")],
    );
    check_card(with_capability(json!({ "id": "skill:x", "price": 3 })), &[("capabilities[1].price", "unknown field")]);
    check_card(
        with_capability(json!({ "id": "skill:x", "version": 1, "tags": "a", "tools": [1], "servers": [true] })),
        &[
            ("capabilities[1].version", "must be a string"),
            ("capabilities[1].tags", "must be an array"),
            ("capabilities[1].tools[0]", "must be a string"),
            ("capabilities[1].servers[0]", "must be a string"),
        ],
    );
}

#[test]
fn trust_level_and_cost_hint_are_closed_sets() {
    for t in ["sandbox", "prod"] {
        check_card(with_capability(json!({ "id": "skill:x", "trust_level": t })), &[]);
    }
    for c in ["low", "medium", "high"] {
        check_card(with_capability(json!({ "id": "skill:x", "cost_hint": c })), &[]);
    }
    for bad in ["dev", "Prod", "production", ""] {
        check_card(
            with_capability(json!({ "id": "skill:x", "trust_level": bad })),
            &[("capabilities[1].trust_level", "must be sandbox or prod")],
        );
    }
    for bad in ["free", "HIGH", ""] {
        check_card(
            with_capability(json!({ "id": "skill:x", "cost_hint": bad })),
            &[("capabilities[1].cost_hint", "must be low, medium or high")],
        );
    }
    check_card(
        with_capability(json!({ "id": "skill:x", "trust_level": 1, "cost_hint": [] })),
        &[("capabilities[1].trust_level", "must be a string"), ("capabilities[1].cost_hint", "must be a string")],
    );
}

#[test]
fn limits_are_whole_numbers_from_one() {
    let limits = |l: Value| with(seed_card(), json!({ "limits": l }));
    check_card(limits(json!({})), &[]);
    check_card(limits(json!({ "max_concurrency": 1, "max_runtime_sec": u32::MAX })), &[]);
    for bad in [json!(0), json!(-1), json!(1.5), json!("2"), json!(u32::MAX as u64 + 1)] {
        check_card(limits(json!({ "max_concurrency": bad })), &[("limits.max_concurrency", "whole number from 1")]);
        check_card(limits(json!({ "max_runtime_sec": bad })), &[("limits.max_runtime_sec", "whole number from 1")]);
    }
    check_card(limits(json!({ "burst": 3 })), &[("limits.burst", "unknown field")]);
    check_card(limits(json!(2)), &[("limits", "must be a JSON object")]);
}

#[test]
fn budget_display_endpoints_and_security() {
    let card = |patch: Value| with(seed_card(), patch);
    check_card(card(json!({ "budget": { "tokens": 100000, "cost_usd": 2.5 } })), &[]);
    check_card(card(json!({ "budget": { "cost_usd": 0 } })), &[]);
    check_card(
        card(json!({ "budget": { "tokens": -1, "cost_usd": -0.01 } })),
        &[("budget.tokens", "must be a whole number"), ("budget.cost_usd", "must be a number from 0")],
    );
    check_card(
        card(json!({ "budget": { "tokens": 1.5, "usd": 1 } })),
        &[("budget.tokens", "whole number"), ("budget.usd", "unknown field")],
    );

    check_card(card(json!({ "display": { "desc": "no name" } })), &[("display.name", "required")]);
    check_card(
        card(json!({ "display": { "name": "", "desc": 1 } })),
        &[("display.name", "1 to 128"), ("display.desc", "must be a string")],
    );
    check_card(card(json!({ "display": { "name": "Ken", "avatar": "x" } })), &[("display.avatar", "unknown field")]);

    check_card(
        card(json!({ "endpoints": { "a2a": { "url": "ken:8080/a2a" } } })),
        &[("endpoints.a2a.url", "must be an http:// or https:// URL")],
    );
    check_card(card(json!({ "endpoints": { "a2a": "http://ken" } })), &[("endpoints.a2a", "must be an object {url}")]);
    check_card(card(json!({ "endpoints": { "a2a": {} } })), &[("endpoints.a2a.url", "required")]);
    check_card(
        card(json!({ "endpoints": { "a2a": { "url": "https://ken", "tls": true } } })),
        &[("endpoints.a2a.tls", "unknown field")],
    );
    check_card(card(json!({ "endpoints": [] })), &[("endpoints", "must be a JSON object")]);

    for n in ["none", "egress-restricted", "open"] {
        check_card(card(json!({ "security": { "network": n } })), &[]);
    }
    check_card(
        card(json!({ "security": { "sandbox": "yes", "network": "egress_restricted" } })),
        &[
            ("security.sandbox", "must be true or false"),
            ("security.network", "must be one of none, egress-restricted, open"),
        ],
    );
    check_card(card(json!({ "security": { "firewall": true } })), &[("security.firewall", "unknown field")]);
}

#[test]
fn unknown_card_fields() {
    check_card(with(seed_card(), json!({ "owner": "ada" })), &[("owner", "unknown field (put extensions in `meta`)")]);
    check_card(with(seed_card(), json!({ "meta": { "owner": "ada" } })), &[]);
    check_card(with(seed_card(), json!({ "meta": "ada" })), &[("meta", "must be a JSON object")]);
}
