//! The hub's Agent Card: one A2A agent whose skills are the capabilities of the agents registered
//! now (seed 003, decision point 1), so it changes as agents come and go. Written in the version
//! asked for, each with its own fields only: the 1.0 card (`supportedInterfaces`, naming the 0.3
//! endpoint beside the 1.0 ones; `securitySchemes` as 1.0's wrappers, `securityRequirements`), and
//! the 0.3 card (top-level `url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`,
//! `supportsAuthenticatedExtendedCard`; OpenAPI-style `securitySchemes`, `security`).

use std::collections::{BTreeMap, BTreeSet};

use clutch_core::Engine;
use clutch_core::registry::Status;
use serde_json::{Value, json};

use crate::wire::Version;

/// Where the HTTP+JSON binding (`rest`) is served, below the hub's address.
pub(crate) const REST_PATH: &str = "/a2a/rest";

/// The card in `version`, for a hub reached at `base` (`http://host:port`, no trailing slash);
/// `guarded` when it asks callers for credentials (the card then declares the schemes it takes:
/// either will do, and an extended card is offered). The `extended` card, for a caller with a
/// credential, also names the agents behind each skill, which the public one keeps to itself.
pub fn card(engine: &Engine, base: &str, guarded: bool, extended: bool, version: Version) -> Value {
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
    let name = "Clutch";
    let description = "A Clutch hub: a control plane for a team of agents. Each message becomes a task the hub routes to the best agent for the skill it names; the task's state, messages and result come back as A2A.";
    let modes = json!(["text/plain", "application/json"]);
    let mut card = match version {
        Version::V10 => json!({
            "name": name,
            "description": description,
            "version": env!("CARGO_PKG_VERSION"),
            "provider": {"organization": "Clutch", "url": base},
            "supportedInterfaces": [
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": format!("{base}{}", REST_PATH), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            ],
            "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": guarded},
            "defaultInputModes": modes,
            "defaultOutputModes": modes,
            "skills": skills,
        }),
        // 0.3 has no HTTP+JSON binding of this hub's (its REST binding is 1.0's).
        Version::V03 => json!({
            "protocolVersion": "0.3",
            "name": name,
            "description": description,
            "url": url,
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
            "version": env!("CARGO_PKG_VERSION"),
            "provider": {"organization": "Clutch", "url": base},
            "capabilities": {"streaming": true, "pushNotifications": true},
            "defaultInputModes": modes,
            "defaultOutputModes": modes,
            "skills": skills,
            "supportsAuthenticatedExtendedCard": guarded,
        }),
    };
    if guarded {
        let (api_key, bearer) =
            ("A partner's key, scoped to skills.", "A partner's key, or one of the hub's API tokens.");
        match version {
            Version::V10 => {
                card["securitySchemes"] = json!({
                    "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key", "description": api_key}},
                    "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": bearer}},
                });
                card["securityRequirements"] =
                    json!([{"schemes": {"apiKey": {"list": []}}}, {"schemes": {"bearer": {"list": []}}}]);
            }
            Version::V03 => {
                card["securitySchemes"] = json!({
                    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": api_key},
                    "bearer": {"type": "http", "scheme": "bearer", "description": bearer},
                });
                // Either will do.
                card["security"] = json!([{"apiKey": []}, {"bearer": []}]);
            }
        }
    }
    card
}
