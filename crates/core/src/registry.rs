//! The agent registry: each agent's card, availability, load, recent success and usage against its
//! budget. Built from `agent.*` and task events in the log; heartbeats only move `last_seen`.

use std::collections::{BTreeSet, VecDeque};

use clutch_proto::AgentCard;

pub use crate::availability::Status;
use crate::config::Budget;
use crate::router::Profile;

/// Recent outcomes kept per agent for its success rate.
const OUTCOMES: usize = 20;

/// Resources an agent or run has used, as reported in `usage` of `task.progress` / `task.result`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub tokens: u64,
    pub cost_usd: f64,
    pub requests: u64,
    /// Milliseconds of work: tasks' accepted-to-ended time for an agent; first to last event for a run.
    pub wall_ms: u64,
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
            wall_ms: 0,
        })
    }

    pub fn add(&mut self, other: Usage) {
        self.tokens += other.tokens;
        self.cost_usd += other.cost_usd;
        self.requests += other.requests;
        self.wall_ms += other.wall_ms;
    }
}

impl Budget {
    /// The first measure `usage` has reached: (name, used, limit).
    pub fn crossed(&self, usage: &Usage) -> Option<(&'static str, f64, f64)> {
        let measures = [
            ("tokens", usage.tokens as f64, self.tokens.map(|l| l as f64)),
            ("cost_usd", usage.cost_usd, self.cost_usd),
            ("requests", usage.requests as f64, self.requests.map(|l| l as f64)),
            ("wall_time_sec", (usage.wall_ms / 1000) as f64, self.wall_time_sec.map(|l| l as f64)),
        ];
        measures.into_iter().find_map(|(name, used, limit)| limit.filter(|l| used >= *l).map(|l| (name, used, l)))
    }
}

/// One registered agent.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Agent {
    pub card: AgentCard,
    /// Derived from the card; not saved in snapshots (rebuilt on load).
    #[serde(skip)]
    pub profile: Profile,
    pub status: Status,
    /// Milliseconds since the epoch of the last sign of life (a heartbeat, a message, registration).
    pub last_seen_ms: i64,
    /// Tasks routed to it and not ended.
    pub in_flight: BTreeSet<String>,
    /// Recent outcomes, newest last: true for a result, false for an error or timeout.
    pub outcomes: VecDeque<bool>,
    pub usage: Usage,
    pub budget: Budget,
    /// Set once the budget is crossed (a `clutch.budget.v1` notice was or will be sent).
    pub budget_exhausted: bool,
    pub budget_notice_sent: bool,
    /// Routing counter value when last selected (round robin).
    pub last_selected: u64,
    /// The `seq` of the event that registered (or last updated) its card.
    pub card_seq: u64,
}

impl Agent {
    pub fn new(card: AgentCard, now_ms: i64, budget: Budget) -> Agent {
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

    /// Budget from the card (org.yaml's, when set, takes precedence measure by measure).
    pub fn card_budget(card: &AgentCard) -> Budget {
        let b = card.budget.as_ref();
        Budget { tokens: b.and_then(|b| b.tokens), cost_usd: b.and_then(|b| b.cost_usd), ..Budget::default() }
    }
}
