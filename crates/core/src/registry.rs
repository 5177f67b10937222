//! The agent registry: each agent's card, availability, load, recent success and usage against its
//! budget. Built from `agent.*` and task events in the log; heartbeats only move `last_seen`.

use std::collections::{BTreeSet, VecDeque};

use clutch_proto::AgentCard;

use crate::router::{Profile, Status};

/// Recent outcomes kept per agent for its success rate.
const OUTCOMES: usize = 20;

/// Resources an agent or run has used, as reported in `usage` of `task.progress` / `task.result`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub tokens: u64,
    pub cost_usd: f64,
    pub requests: u64,
}

impl Usage {
    /// Reads `{"tokens"|"input_tokens"+"output_tokens", "cost_usd", "requests"}` from a payload's `usage`.
    pub fn from_payload(payload: &serde_json::Map<String, serde_json::Value>) -> Option<Usage> {
        let usage = payload.get("usage")?.as_object()?;
        let num = |k: &str| usage.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let tokens = usage.get("tokens").and_then(|v| v.as_u64()).unwrap_or(num("input_tokens") + num("output_tokens"));
        Some(Usage {
            tokens,
            cost_usd: usage
                .get("cost_usd")
                .and_then(|v| v.as_f64())
                .filter(|c| c.is_finite() && *c >= 0.0)
                .unwrap_or(0.0),
            requests: num("requests"),
        })
    }

    pub fn add(&mut self, other: Usage) {
        self.tokens += other.tokens;
        self.cost_usd += other.cost_usd;
        self.requests += other.requests;
    }
}

/// Limits on [`Usage`]; absent dimensions are unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub requests: Option<u64>,
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none() && self.cost_usd.is_none() && self.requests.is_none()
    }

    /// The first dimension `usage` has reached: (name, used, limit).
    pub fn crossed(&self, usage: &Usage) -> Option<(&'static str, f64, f64)> {
        if let Some(l) = self.tokens
            && usage.tokens >= l
        {
            return Some(("tokens", usage.tokens as f64, l as f64));
        }
        if let Some(l) = self.cost_usd
            && usage.cost_usd >= l
        {
            return Some(("cost_usd", usage.cost_usd, l));
        }
        if let Some(l) = self.requests
            && usage.requests >= l
        {
            return Some(("requests", usage.requests as f64, l as f64));
        }
        None
    }
}

/// One registered agent.
#[derive(Debug, Clone)]
pub struct Agent {
    pub card: AgentCard,
    pub profile: Profile,
    pub status: Status,
    /// Milliseconds since the epoch of the last sign of life (a heartbeat, a message, registration).
    pub last_seen_ms: i64,
    /// Tasks routed to it and not ended.
    pub in_flight: BTreeSet<String>,
    /// Recent outcomes, newest last: true for a result, false for an error or timeout.
    pub outcomes: VecDeque<bool>,
    pub usage: Usage,
    pub budget: Limits,
    /// Set once the budget is crossed (a `clutch.budget.v1` notice was or will be sent).
    pub budget_exhausted: bool,
    pub budget_notice_sent: bool,
    /// Routing counter value when last selected (round robin).
    pub last_selected: u64,
    /// The `seq` of the event that registered (or last updated) its card.
    pub card_seq: u64,
}

impl Agent {
    pub fn new(card: AgentCard, now_ms: i64, budget: Limits) -> Agent {
        Agent {
            profile: Profile::new(&card),
            card,
            status: Status::Online,
            last_seen_ms: now_ms,
            in_flight: BTreeSet::new(),
            outcomes: VecDeque::new(),
            usage: Usage::default(),
            budget,
            budget_exhausted: false,
            budget_notice_sent: false,
            last_selected: 0,
            card_seq: 0,
        }
    }

    pub fn success_rate(&self) -> Option<f64> {
        if self.outcomes.is_empty() {
            return None;
        }
        Some(self.outcomes.iter().filter(|o| **o).count() as f64 / self.outcomes.len() as f64)
    }

    pub fn record_outcome(&mut self, success: bool) {
        if self.outcomes.len() == OUTCOMES {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(success);
    }

    /// Budget from the card, with the operator's limits (org.yaml) taking precedence where set.
    pub fn card_budget(card: &AgentCard) -> Limits {
        let b = card.budget.as_ref();
        Limits { tokens: b.and_then(|b| b.tokens), cost_usd: b.and_then(|b| b.cost_usd), requests: None }
    }
}
