//! The router, table-driven: each hard filter, requirement (with semver), preference and tie-breaker,
//! and properties: a selected agent passes every filter and requirement; decisions are deterministic.

use clutch_core::registry::Status;
use clutch_core::router::{self, Ask, Candidate, Exclusion, Need, Profile};
use proptest::prelude::*;
use serde_json::{Value, json};

fn card(v: Value) -> clutch_proto::AgentCard {
    clutch_proto::validate::agent_card(&v).unwrap()
}

fn profile(name: &str, caps: Value, extra: Value) -> Profile {
    let mut v = json!({"agent_id": format!("agent:{name}"), "capabilities": caps});
    if let (Some(obj), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        obj.extend(extra.clone());
    }
    Profile::new(&card(v))
}

fn cand(p: &Profile) -> Candidate<'_> {
    Candidate {
        profile: p,
        status: Status::Online,
        in_flight: 0,
        success_rate: None,
        budget_exhausted: false,
        allowlist: None,
        last_selected: 0,
    }
}

fn ask(requires: &[&str], prefers: &[&str]) -> Ask {
    Ask {
        requires: requires.iter().map(|r| Need::parse(r).unwrap()).collect(),
        prefers: router::preferences(&prefers.iter().map(|s| s.to_string()).collect::<Vec<_>>(), None).unwrap(),
        ..Ask::default()
    }
}

fn chosen(decision: &router::Decision, candidates: &[Candidate<'_>]) -> Option<String> {
    decision.selected.map(|i| candidates[i].profile.agent_id.clone())
}

#[test]
fn requires_is_an_and_over_capabilities_with_semver() {
    let a = profile(
        "a",
        json!([{"id": "skill:research", "version": "1.3"}, {"id": "skill:code", "version": "2.0.1"}]),
        json!({}),
    );
    let b = profile("b", json!([{"id": "skill:research", "version": "1.1.0"}]), json!({}));
    let c = profile("c", json!([{"id": "skill:code"}]), json!({}));
    let cs = [cand(&a), cand(&b), cand(&c)];
    let table: &[(&[&str], Option<&str>)] = &[
        (&["skill:research"], Some("agent:a")),
        (&["skill:research@^1.2"], Some("agent:a")),
        (&["skill:research@~1.1"], Some("agent:b")),
        (&["skill:research", "skill:code"], Some("agent:a")),
        (&["skill:code@>=2"], Some("agent:a")),
        (&["skill:research@^2"], None),
        (&["skill:translate"], None),
    ];
    for (requires, expected) in table {
        let d = router::route(&ask(requires, &[]), &cs);
        assert_eq!(chosen(&d, &cs).as_deref(), *expected, "requires {requires:?}: {}", d.reason);
    }
    let d = router::route(&ask(&["skill:research@^1.2"], &[]), &cs);
    assert!(d.excluded.contains(&(1, Exclusion::WrongVersion(0))));
    assert!(d.excluded.contains(&(2, Exclusion::Missing(0))));
    let x = ask(&["skill:research@^1.2"], &[]);
    assert_eq!(Exclusion::WrongVersion(0).describe(&x), "has no version matching skill:research@^1.2");
    assert!(!d.can_wait(), "a missing capability never comes back by waiting");
}

#[test]
fn tools_in_requires_match_the_agents_tools() {
    let a = profile("a", json!([{"id": "skill:research", "tools": ["mcp:browser"]}]), json!({}));
    let cs = [cand(&a)];
    assert!(router::route(&ask(&["mcp:browser"], &[]), &cs).selected.is_some());
    assert!(router::route(&ask(&["mcp:files"], &[]), &cs).selected.is_none());
}

#[test]
fn each_hard_filter_excludes_with_its_reason() {
    let plain =
        profile("p", json!([{"id": "skill:x", "tools": ["mcp:browser"]}]), json!({"limits": {"max_concurrency": 2}}));
    let trusted = profile("t", json!([{"id": "skill:x", "trust_level": "prod"}]), json!({}));
    // Offline, stale.
    for status in [Status::Offline, Status::Stale, Status::Removed] {
        let c = Candidate { status, ..cand(&plain) };
        let d = router::route(&ask(&["skill:x"], &[]), &[c]);
        assert_eq!(d.excluded, vec![(0, Exclusion::NotOnline(status))]);
        assert!(d.can_wait());
    }
    // Sandbox policy: the default card is sandboxed; a prod capability makes a trusted agent.
    assert!(plain.sandboxed && !trusted.sandboxed);
    let mut needs_trusted = ask(&[], &[]);
    needs_trusted.sandbox = Some(false);
    let cs = [cand(&plain), cand(&trusted)];
    let d = router::route(&needs_trusted, &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:t"));
    assert_eq!(d.excluded, vec![(0, Exclusion::Sandbox { needs_sandbox: false })]);
    // Tool allowlist of the message: every tool must be available (card) and allowed (operator).
    let mut tools = ask(&[], &[]);
    tools.tools = vec!["mcp:browser".into()];
    let d = router::route(&tools, &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:p"));
    assert_eq!(d.excluded, vec![(1, Exclusion::ToolUnavailable(0))]);
    assert_eq!(d.excluded[0].1.describe(&tools), "tool mcp:browser in the task's allowlist is not available to it");
    let denied = ["mcp:files".to_string()];
    let c = Candidate { allowlist: Some(&denied), ..cand(&plain) };
    assert!(router::route(&tools, &[c]).selected.is_none());
    // Concurrency.
    let c = Candidate { in_flight: 2, ..cand(&plain) };
    let d = router::route(&ask(&[], &[]), &[c]);
    assert_eq!(d.excluded, vec![(0, Exclusion::AtCapacity { in_flight: 2, max: 2 })]);
    assert!(d.can_wait());
    // Budget.
    let c = Candidate { budget_exhausted: true, ..cand(&plain) };
    let d = router::route(&ask(&[], &[]), &[c]);
    assert_eq!(d.excluded, vec![(0, Exclusion::BudgetExhausted)]);
}

#[test]
fn preferences_are_weighted_by_position_and_include_domain() {
    let a = profile("a", json!([{"id": "skill:research", "tags": ["fintech"]}]), json!({}));
    let b = profile("b", json!([{"id": "skill:research", "tags": ["market"]}, {"id": "tool:sql"}]), json!({}));
    let cs = [cand(&a), cand(&b)];
    // First preference weighs 2, second 1.
    let d = router::route(&ask(&["skill:research"], &["tag:fintech", "tag:market"]), &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:a"));
    assert_eq!(d.scored, vec![(0, 0.667), (1, 0.333)]);
    let d = router::route(&ask(&[], &["tag:market", "tag:fintech"]), &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:b"));
    let d = router::route(&ask(&[], &["tool:sql"]), &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:b"));
    assert!(d.reason.contains("highest score"), "{}", d.reason);
    // The message's domain is an implicit last preference.
    let prefers = router::preferences(&[], Some("fintech")).unwrap();
    let d = router::route(&Ask { prefers, ..Ask::default() }, &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:a"));
}

#[test]
fn tie_breakers_in_order_least_loaded_success_round_robin() {
    let a = profile("a", json!([{"id": "skill:x"}]), json!({"limits": {"max_concurrency": 4}}));
    let b = profile("b", json!([{"id": "skill:x"}]), json!({"limits": {"max_concurrency": 4}}));
    let x = ask(&["skill:x"], &[]);
    // Least loaded wins over a better success rate.
    let cs = [
        Candidate { in_flight: 1, success_rate: Some(1.0), ..cand(&a) },
        Candidate { success_rate: Some(0.5), ..cand(&b) },
    ];
    let d = router::route(&x, &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:b"));
    assert!(d.reason.contains("least loaded"), "{}", d.reason);
    // Equal load: best recent success rate.
    let cs = [Candidate { success_rate: Some(0.9), ..cand(&a) }, Candidate { success_rate: Some(0.5), ..cand(&b) }];
    let d = router::route(&x, &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:a"));
    assert!(d.reason.contains("success rate"), "{}", d.reason);
    // Equal load and success: the least recently selected (round robin).
    let cs = [Candidate { last_selected: 7, ..cand(&a) }, Candidate { last_selected: 3, ..cand(&b) }];
    let d = router::route(&x, &cs);
    assert_eq!(chosen(&d, &cs).as_deref(), Some("agent:b"));
    assert!(d.reason.contains("round robin"), "{}", d.reason);
}

#[test]
fn no_agents_and_bad_requirements_are_explained() {
    let d = router::route(&ask(&["skill:x"], &[]), &[]);
    assert_eq!(d.selected, None);
    assert_eq!(d.reason, "no agent is registered");
    assert!(Need::parse("skill:x@^1.2.x.y").is_err());
}

fn arb_agent() -> impl Strategy<Value = (Vec<(u8, u8)>, u8, u32, u8, bool, bool)> {
    (
        prop::collection::vec((0u8..5, 0u8..4), 0..4), // (capability index, major version)
        0u8..4,                                        // tag index
        0u32..4,                                       // in flight
        0u8..4,                                        // status
        any::<bool>(),                                 // budget exhausted
        any::<bool>(),                                 // sandboxed
    )
}

proptest! {
    #[test]
    fn a_selected_agent_passes_every_filter_and_decisions_are_deterministic(
        agents in prop::collection::vec(arb_agent(), 0..12),
        need in (0u8..5, prop::option::of(0u8..4)),
        prefer in prop::collection::vec(0u8..4, 0..3),
        sandbox in prop::option::of(any::<bool>()),
    ) {
        let profiles: Vec<Profile> = agents.iter().enumerate().map(|(i, (caps, tag, _, _, _, sandboxed))| {
            let caps: Vec<Value> = caps.iter().map(|(c, v)| json!({"id": format!("skill:s{c}"), "version": format!("{v}.0"), "tags": [format!("t{tag}")]})).collect();
            profile(&format!("g{i}"), Value::Array(caps), json!({"limits": {"max_concurrency": 2}, "security": {"sandbox": sandboxed}}))
        }).collect();
        let statuses = [Status::Online, Status::Online, Status::Stale, Status::Offline];
        let candidates: Vec<Candidate<'_>> = profiles.iter().zip(&agents).map(|(p, (_, _, in_flight, status, budget, _))| Candidate {
            in_flight: *in_flight, status: statuses[*status as usize], budget_exhausted: *budget, ..cand(p)
        }).collect();
        let requirement = match need.1 { Some(v) => format!("skill:s{}@^{v}", need.0), None => format!("skill:s{}", need.0) };
        let prefers: Vec<String> = prefer.iter().map(|t| format!("tag:t{t}")).collect();
        let mut a = ask(&[requirement.as_str()], &prefers.iter().map(String::as_str).collect::<Vec<_>>());
        a.sandbox = sandbox;
        let d = router::route(&a, &candidates);
        if let Some(i) = d.selected {
            let c = &candidates[i];
            prop_assert_eq!(c.status, Status::Online);
            prop_assert!(c.in_flight < 2);
            prop_assert!(!c.budget_exhausted);
            if let Some(s) = sandbox { prop_assert_eq!(c.profile.sandboxed, s); }
            // It really has the capability in a matching version.
            let (cap, version) = &agents[i].0.iter().find(|(cp, v)| *cp == need.0 && need.1.is_none_or(|n| n == *v)).copied().unwrap_or((99, 99));
            prop_assert!(*cap != 99, "selected agent lacks {} (has {:?}) v{}", requirement, agents[i].0, version);
        }
        prop_assert_eq!(d.scored.len() + d.excluded.len(), candidates.len());
        let again = router::route(&a, &candidates);
        prop_assert_eq!(again.selected, d.selected);
        prop_assert_eq!(again.scored, d.scored);
        prop_assert_eq!(again.reason, d.reason);
    }
}
