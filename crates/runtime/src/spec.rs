//! What an LLM agent is: the operator's declaration (`[[llm_agents]]`), the section its card carries
//! (`meta.llm`) and the budgets it is held to. A leaf of the runtime's modules: the agent that runs
//! (`agent`) and the loop it works tasks with (`work`) both read it, and it names neither.

use clutch_proto::card::{AgentCard, Budget as CardBudget, Capability, Display, Limits};
use serde::{Deserialize, Serialize};

use crate::builtin;

/// One LLM agent as the operator declares it (`[[llm_agents]]` in `clutch.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// It registers as `agent:<name>`.
    pub name: String,
    /// The `[[providers]]` entry it calls.
    pub provider: String,
    /// The model, when not the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Shown in the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its role: the system prompt every task starts from.
    pub system: String,
    /// What the router may give it: `skill:summarise`, or `skill:summarise@1.2.0`.
    pub capabilities: Vec<String>,
    /// The tools offered to the model: `mcp:<server>/<tool>`, or `mcp:<server>` for all of a server's
    /// (org.yaml's allowlists still decide what may be called), and `clutch:workflow` for the
    /// workflow lifecycle (next tasks, claim, context, checkpoint, status). `emit` (progress) is always
    /// offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Model calls per task at most.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Tasks worked on at once.
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
    /// The longest a task may take, every call and tool included (the seed's "stuck" limit is the
    /// provider's per-call `timeout_ms`).
    #[serde(default = "default_task_timeout_ms")]
    pub task_timeout_ms: u64,
    /// Output tokens per call at most, when not the provider's `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature, when not the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// What the agent may spend in all (its card's budget, which the engine accounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// What one task may spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_budget: Option<Budget>,
}

/// What an LLM agent's card carries beside its capabilities, limits and budget (`meta.llm`):
/// the rest of its `Config`, so that the card alone says how it works (and a run can be
/// re-executed from the log and the cards).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub system: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    #[serde(default = "default_task_timeout_ms")]
    pub task_timeout_ms: u64,
    /// Output tokens per call at most, when not the provider's `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature, when not the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_budget: Option<Budget>,
}

/// A hard budget: a call whose estimate would cross it is not made.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

fn default_max_turns() -> u32 {
    20
}
fn default_max_concurrency() -> u32 {
    4
}
fn default_task_timeout_ms() -> u64 {
    1_800_000
}

/// Why an agent's declaration, or its card's LLM section, is refused.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// Its card does not serialize.
    #[error("{0}")]
    Unwritable(serde_json::Error),
    /// The card it would register breaks the protocol's rules.
    #[error("{name}: its card would be refused: {}", .problems.join("; "))]
    Card { name: String, problems: Vec<String> },
    #[error("{0}: `system` (its role) is empty")]
    NoSystem(String),
    #[error("{0}: `capabilities` is empty, so the router could never give it a task")]
    NoCapabilities(String),
    #[error("{0}: `max_turns`, `max_concurrency` and `task_timeout_ms` must be above 0")]
    Zero(String),
    #[error(
        "{name}: tool {tool:?}: write `mcp:<server>/<tool>`, `mcp:<server>`, `{}` (the workflow tools) or `{}` (the session tools)",
        builtin::ENTRY,
        builtin::SESSIONS
    )]
    Tool { name: String, tool: String },
    /// A card's `meta.llm` does not read as a section.
    #[error("meta.llm: {0}")]
    Section(serde_json::Error),
}

impl Config {
    pub fn agent_id(&self) -> String {
        format!("agent:{}", self.name)
    }

    /// What is wrong with this declaration, if anything (the provider is checked by `Runtime::new`).
    pub fn check(&self) -> Result<(), Invalid> {
        let card = self.card();
        let json = serde_json::to_value(&card).map_err(Invalid::Unwritable)?;
        if let Err(e) = clutch_proto::validate::agent_card(&json) {
            let problems = e.into_vec().iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
            return Err(Invalid::Card { name: self.name.clone(), problems });
        }
        if self.system.trim().is_empty() {
            return Err(Invalid::NoSystem(self.name.clone()));
        }
        if self.capabilities.is_empty() {
            return Err(Invalid::NoCapabilities(self.name.clone()));
        }
        if self.max_turns == 0 || self.max_concurrency == 0 || self.task_timeout_ms == 0 {
            return Err(Invalid::Zero(self.name.clone()));
        }
        for tool in &self.tools {
            if !builtin::ENTRIES.contains(&tool.as_str()) && (!tool.starts_with("mcp:") || tool.len() <= 4) {
                return Err(Invalid::Tool { name: self.name.clone(), tool: tool.clone() });
            }
        }
        Ok(())
    }

    /// The agent a card describes, when it carries a LLM section (`meta.llm`); `None`
    /// for other agents, an error for a section that does not read.
    pub fn from_card(card: &AgentCard) -> Option<Result<Config, Invalid>> {
        let section = card.meta.get("llm")?;
        let section: Section = match serde_json::from_value(section.clone()) {
            Ok(s) => s,
            Err(e) => return Some(Err(Invalid::Section(e))),
        };
        let name = card.agent_id.strip_prefix("agent:").unwrap_or(&card.agent_id).to_owned();
        let capabilities = card
            .capabilities
            .iter()
            .map(|c| match &c.version {
                Some(v) => format!("{}@{v}", c.id),
                None => c.id.clone(),
            })
            .collect();
        Some(Ok(Config {
            name,
            provider: section.provider,
            model: section.model,
            description: card.display.as_ref().and_then(|d| d.desc.clone()),
            system: section.system,
            capabilities,
            tools: section.tools,
            max_turns: section.max_turns,
            max_concurrency: card
                .limits
                .as_ref()
                .and_then(|l| l.max_concurrency)
                .unwrap_or_else(default_max_concurrency),
            task_timeout_ms: section.task_timeout_ms,
            max_tokens: section.max_tokens,
            temperature: section.temperature,
            budget: card.budget.as_ref().map(|b| Budget { tokens: b.tokens, cost_usd: b.cost_usd }),
            task_budget: section.task_budget,
        }))
    }

    /// The card it registers.
    pub fn card(&self) -> AgentCard {
        let capabilities = self
            .capabilities
            .iter()
            .map(|c| {
                let (id, version) = match c.split_once('@') {
                    Some((id, v)) => (id.to_owned(), Some(v.to_owned())),
                    None => (c.clone(), None),
                };
                Capability {
                    id,
                    version,
                    tags: vec!["llm".into()],
                    // The engine lets an agent call only the tools its card names.
                    tools: self.tools.clone(),
                    trust_level: None,
                    cost_hint: None,
                    servers: Vec::new(),
                }
            })
            .collect();
        let section = Section {
            provider: self.provider.clone(),
            model: self.model.clone(),
            system: self.system.clone(),
            tools: self.tools.clone(),
            max_turns: self.max_turns,
            task_timeout_ms: self.task_timeout_ms,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            task_budget: self.task_budget,
        };
        let mut meta = serde_json::Map::new();
        meta.insert("llm".into(), serde_json::to_value(section).unwrap_or_default());
        AgentCard {
            v: "clutch/0.1".into(),
            agent_id: self.agent_id(),
            display: Some(Display { name: self.name.clone(), desc: self.description.clone() }),
            endpoints: Default::default(),
            capabilities,
            limits: Some(Limits {
                max_concurrency: Some(self.max_concurrency),
                max_runtime_sec: Some(self.task_timeout_ms.div_ceil(1000).min(u64::from(u32::MAX)) as u32),
            }),
            budget: self.budget.map(|b| CardBudget { tokens: b.tokens, cost_usd: b.cost_usd }),
            security: None,
            meta,
        }
    }
}
