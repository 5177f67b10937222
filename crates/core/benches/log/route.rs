//! One routing decision among 1,000 registered agents: hard filters, semver requirements, weighted
//! preferences and tie-breakers over every candidate (the target: under 50 µs).

use std::hint::black_box;

use clutch_core::registry::Status;
use clutch_core::router::{self, Ask, Candidate, Need, Profile};
use criterion::Criterion;
use serde_json::json;

pub fn route(c: &mut Criterion) {
    let skills = ["research", "code", "review", "translate", "design"];
    let tags = ["market", "fintech", "rust", "python", "legal", "health"];
    let profiles: Vec<Profile> = (0..1000)
        .map(|i| {
            let card = json!({
                "agent_id": format!("agent:a{i}"),
                "capabilities": [
                    {"id": format!("skill:{}", skills[i % 5]), "version": format!("1.{}.0", i % 4),
                     "tags": [tags[i % 6], tags[(i / 6) % 6]], "tools": ["mcp:browser", "mcp:files"]},
                    {"id": format!("skill:{}", skills[(i + 2) % 5]), "version": "2.0"},
                ],
                "limits": {"max_concurrency": 4},
            });
            Profile::new(&clutch_proto::validate::agent_card(&card).expect("valid card"))
        })
        .collect();
    let candidates: Vec<Candidate<'_>> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| Candidate {
            profile: p,
            status: if i % 10 == 0 { Status::Stale } else { Status::Online },
            in_flight: (i % 5) as u32,
            success_rate: Some((i % 7) as f64 / 7.0),
            budget_exhausted: i % 50 == 0,
            allowlist: None,
            last_selected: (i * 7919 % 1000) as u64,
        })
        .collect();
    let prefers: Vec<String> = ["tag:fintech", "tag:rust", "skill:review"].iter().map(|s| s.to_string()).collect();
    let ask = Ask {
        requires: vec![Need::parse("skill:research@^1.1").expect("valid")],
        prefers: router::preferences(&prefers, Some("market")).expect("valid"),
        sandbox: None,
        tools: vec!["mcp:browser".into()],
    };
    let decision = router::route(&ask, &candidates);
    assert!(decision.selected.is_some(), "{}", decision.reason);
    c.bench_function("route/1000_agents", |b| b.iter(|| black_box(router::route(black_box(&ask), &candidates))));
}
