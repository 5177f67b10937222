//! The hub's Agent Card: one A2A agent whose skills are the capabilities of the agents registered
//! now (seed 003, decision point 1), so it changes as agents come and go. One card both versions
//! read: the 1.0 fields (`supportedInterfaces`, `capabilities`, `skills`...) plus 0.3's top-level
//! `url`, `preferredTransport`, `protocolVersion` and `additionalInterfaces`.

use std::collections::{BTreeMap, BTreeSet};

use clutch_core::Engine;
use clutch_core::registry::Status;
use serde_json::{Value, json};

/// The card, for a hub reached at `base` (`http://host:port`, no trailing slash); `guarded` when it
/// asks callers for credentials (the card then declares the schemes it takes: either will do, and
/// an extended card is offered). The `extended` card, for a caller with a credential, also names
/// the agents behind each skill, which the public one keeps to itself.
pub fn card(engine: &Engine, base: &str, guarded: bool, extended: bool) -> Value {
    // capability id → (agents offering it, their tags)
    let mut skills: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    let offered = engine.with_agents(|a| {
        let online = a.status == Status::Online;
        let caps: Vec<(String, Vec<String>)> =
            a.card.capabilities.iter().map(|c| (c.id.clone(), c.tags.clone())).collect();
        (a.card.agent_id.clone(), online, caps)
    });
    for (agent, online, caps) in offered {
        if !online {
            continue;
        }
        for (id, tags) in caps {
            let entry = skills.entry(id).or_default();
            entry.0.insert(agent.clone());
            entry.1.extend(tags);
        }
    }
    let skills: Vec<Value> = skills
        .into_iter()
        .map(|(id, (agents, tags))| {
            let (kind, name) = id.split_once(':').unwrap_or(("skill", id.as_str()));
            let mut tags: Vec<String> = tags.into_iter().collect();
            if tags.is_empty() {
                tags.push(kind.to_owned());
            }
            let who = agents.into_iter().collect::<Vec<_>>().join(", ");
            let description = if extended {
                format!("Work routed to an agent with {id} (now: {who}). Name it in the message's metadata as `skill`.")
            } else {
                format!("Work routed to an agent with {id}. Name it in the message's metadata as `skill`.")
            };
            json!({"id": id, "name": name, "description": description, "tags": tags})
        })
        .collect();
    let url = format!("{base}/a2a");
    let mut card = json!({
        "name": "Clutch",
        "description": "A Clutch hub: a control plane for a team of agents. Each message becomes a task the hub routes to the best agent for the skill it names; the task's state, messages and result come back as A2A.",
        "version": env!("CARGO_PKG_VERSION"),
        "provider": {"organization": "Clutch", "url": base},
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": format!("{base}{}", crate::rest::PATH), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ],
        "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": guarded},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
        // 0.3 readers: the same endpoint at the top level.
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
        "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
        "supportsAuthenticatedExtendedCard": guarded,
    });
    if guarded {
        card["securitySchemes"] = json!({
            "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key", "description": "A partner's key, scoped to skills."}},
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A partner's key, or one of the hub's API tokens."}},
        });
        card["securityRequirements"] =
            json!([{"schemes": {"apiKey": {"list": []}}}, {"schemes": {"bearer": {"list": []}}}]);
        // 0.3 readers: which schemes, by name (either will do).
        card["security"] = json!([{"apiKey": []}, {"bearer": []}]);
    }
    card
}
