//! The router (seed §4): picks the agent for a task by hard filters, `requires[]` (AND, with semver
//! constraints), weighted `prefers[]`, then tie-breakers, and says why in words. Pure and allocation-light:
//! one decision among 1,000 agents is a single pass.

use std::cmp::Ordering;

use clutch_proto::card::{AgentCard, TrustLevel};
use semver::{Version, VersionReq};

/// What the router knows of an agent's card, prepared once when the card is registered.
#[derive(Debug, Clone)]
pub struct Profile {
    pub agent_id: String,
    /// Capability ids with their parsed version, sorted by id.
    capabilities: Vec<(String, Option<Version>)>,
    /// Capability tags, sorted.
    tags: Vec<String>,
    /// Tools and MCP servers the agent has (capability `tools`, `servers`, and `tool:`/`mcp:` ids), sorted.
    tools: Vec<String>,
    /// Whether the agent runs sandboxed (the seed's default unless a card says otherwise).
    pub sandboxed: bool,
    pub max_concurrency: Option<u32>,
}

impl Profile {
    pub fn new(card: &AgentCard) -> Profile {
        let mut capabilities = Vec::new();
        let mut tags = Vec::new();
        let mut tools = Vec::new();
        let mut trusted = false;
        for c in &card.capabilities {
            capabilities.push((c.id.clone(), c.version.as_deref().and_then(lenient_version)));
            tags.extend(c.tags.iter().cloned());
            tools.extend(c.tools.iter().cloned());
            tools.extend(c.servers.iter().cloned());
            if c.id.starts_with("tool:") || c.id.starts_with("mcp:") {
                tools.push(c.id.clone());
            }
            trusted |= c.trust_level == Some(TrustLevel::Prod);
        }
        capabilities.sort();
        for v in [&mut tags, &mut tools] {
            v.sort();
            v.dedup();
        }
        let sandbox_flag = card.security.as_ref().and_then(|s| s.sandbox);
        Profile {
            agent_id: card.agent_id.clone(),
            capabilities,
            tags,
            tools,
            sandboxed: sandbox_flag.unwrap_or(!trusted),
            max_concurrency: card.limits.as_ref().and_then(|l| l.max_concurrency),
        }
    }

    pub fn has_tool(&self, tool: &str) -> bool {
        self.tools.binary_search_by(|t| t.as_str().cmp(tool)).is_ok()
    }

    fn has_tag(&self, tag: &str) -> bool {
        self.tags.binary_search_by(|t| t.as_str().cmp(tag)).is_ok()
    }

    /// Whether a capability (optionally version-constrained) is present: by capability id, or for
    /// `tool:`/`mcp:` ids also among the agent's tools.
    fn satisfies(&self, need: &Need) -> Satisfies {
        let start = self.capabilities.partition_point(|(id, _)| id.as_str() < need.id.as_str());
        let mut found = false;
        for (id, version) in &self.capabilities[start..] {
            if *id != need.id {
                break;
            }
            found = true;
            match (&need.version, version) {
                (None, _) => return Satisfies::Yes,
                (Some(req), Some(v)) if req.matches(v) => return Satisfies::Yes,
                _ => {}
            }
        }
        if !found
            && need.version.is_none()
            && (need.id.starts_with("tool:") || need.id.starts_with("mcp:"))
            && self.has_tool(&need.id)
        {
            return Satisfies::Yes;
        }
        if found { Satisfies::WrongVersion } else { Satisfies::No }
    }
}

enum Satisfies {
    Yes,
    No,
    WrongVersion,
}

/// Parses `1`, `1.2` or `1.2.3` (and anything semver accepts) as a version.
fn lenient_version(s: &str) -> Option<Version> {
    let s = s.trim().trim_start_matches('v');
    Version::parse(s)
        .or_else(|_| Version::parse(&format!("{s}.0")))
        .or_else(|_| Version::parse(&format!("{s}.0.0")))
        .ok()
}

/// A parsed `requires[]` entry: `skill:research` or `skill:research@^1.2`.
#[derive(Debug, Clone)]
pub struct Need {
    pub text: String,
    id: String,
    version: Option<VersionReq>,
}

impl Need {
    pub fn parse(text: &str) -> Result<Need, String> {
        let (id, version) = match text.split_once('@') {
            Some((id, c)) => {
                let req = VersionReq::parse(c).map_err(|e| format!("`{c}` is not a semver requirement: {e}"))?;
                (id, Some(req))
            }
            None => (text, None),
        };
        Ok(Need { text: text.to_owned(), id: id.to_owned(), version })
    }
}

/// A parsed `prefers[]` entry with its weight.
#[derive(Debug, Clone)]
pub struct Preference {
    pub text: String,
    kind: PreferenceKind,
    pub weight: f64,
}

#[derive(Debug, Clone)]
enum PreferenceKind {
    Capability(Need),
    Tag(String),
    /// `domain:X`: a capability tagged `X`, or a capability named `X` (`skill:X`).
    Domain(String),
}

/// Parses `prefers[]` (and the message's `domain`, an implicit last preference). Earlier entries weigh
/// more: of `n` entries the first weighs `n`, the last `1`.
pub fn preferences(prefers: &[String], domain: Option<&str>) -> Result<Vec<Preference>, (usize, String)> {
    let mut texts: Vec<&str> = prefers.iter().map(String::as_str).collect();
    let implicit = domain.map(|d| format!("domain:{d}"));
    if let Some(d) = &implicit
        && !texts.contains(&d.as_str())
    {
        texts.push(d);
    }
    let n = texts.len();
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let kind = if let Some(tag) = text.strip_prefix("tag:") {
                PreferenceKind::Tag(tag.to_owned())
            } else if let Some(d) = text.strip_prefix("domain:") {
                PreferenceKind::Domain(d.to_owned())
            } else {
                PreferenceKind::Capability(Need::parse(text).map_err(|e| (i, e))?)
            };
            Ok(Preference { text: (*text).to_owned(), kind, weight: (n - i) as f64 })
        })
        .collect()
}

impl Preference {
    fn matches(&self, p: &Profile) -> bool {
        match &self.kind {
            PreferenceKind::Capability(need) => matches!(p.satisfies(need), Satisfies::Yes),
            PreferenceKind::Tag(tag) => p.has_tag(tag),
            PreferenceKind::Domain(d) => {
                p.has_tag(d)
                    || p.capabilities.iter().any(|(id, _)| id.split_once(':').is_some_and(|(_, name)| name == d))
            }
        }
    }
}

/// What the task asks of its agent.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub requires: Vec<Need>,
    pub prefers: Vec<Preference>,
    /// `security.policy.sandbox`: `Some(true)` needs a sandboxed agent, `Some(false)` a trusted one.
    pub sandbox: Option<bool>,
    /// `security.policy.tool_allowlist`: every tool listed must be available to the agent.
    pub tools: Vec<String>,
}

/// Availability of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Online,
    Stale,
    Offline,
    Removed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Online => "online",
            Status::Stale => "stale",
            Status::Offline => "offline",
            Status::Removed => "removed",
        }
    }
}

/// One agent as the router sees it at decision time.
pub struct Candidate<'a> {
    pub profile: &'a Profile,
    pub status: Status,
    pub in_flight: u32,
    /// Share of recent tasks that ended in a result; `None` without history.
    pub success_rate: Option<f64>,
    pub budget_exhausted: bool,
    /// Tools the operator allows this agent (org.yaml); `None` = no restriction beyond its card.
    pub allowlist: Option<&'a [String]>,
    /// When this agent was last selected (a routing counter; 0 = never): the round-robin tie-breaker.
    pub last_selected: u64,
}

/// Why a candidate was excluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Exclusion {
    NotOnline(Status),
    Sandbox {
        needs_sandbox: bool,
    },
    /// The tool at this index of [`Ask::tools`].
    ToolUnavailable(usize),
    AtCapacity {
        in_flight: u32,
        max: u32,
    },
    BudgetExhausted,
    /// The requirement at this index of [`Ask::requires`].
    Missing(usize),
    WrongVersion(usize),
}

impl Exclusion {
    /// Transient exclusions may pass later (the agent comes back, frees a slot, gets budget); the task
    /// then waits rather than fails.
    pub fn is_transient(&self) -> bool {
        matches!(self, Exclusion::NotOnline(_) | Exclusion::AtCapacity { .. } | Exclusion::BudgetExhausted)
    }

    pub fn describe(&self, ask: &Ask) -> String {
        let need = |i: &usize| ask.requires.get(*i).map_or("?", |n| n.text.as_str());
        match self {
            Exclusion::NotOnline(s) => format!("agent is {}", s.as_str()),
            Exclusion::Sandbox { needs_sandbox: true } => "task needs a sandboxed agent".into(),
            Exclusion::Sandbox { needs_sandbox: false } => "task needs a trusted (non-sandboxed) agent".into(),
            Exclusion::ToolUnavailable(i) => {
                let tool = ask.tools.get(*i).map_or("?", String::as_str);
                format!("tool {tool} in the task's allowlist is not available to it")
            }
            Exclusion::AtCapacity { in_flight, max } => format!("at its concurrency limit ({in_flight}/{max})"),
            Exclusion::BudgetExhausted => "its budget is exhausted".into(),
            Exclusion::Missing(i) => format!("lacks required capability {}", need(i)),
            Exclusion::WrongVersion(i) => format!("has no version matching {}", need(i)),
        }
    }
}

/// A routing decision: the chosen candidate (by index into the candidates given), every eligible
/// candidate's score, every excluded candidate's reason, and the reason for the choice in words.
#[derive(Debug, Clone)]
pub struct Decision {
    pub selected: Option<usize>,
    /// Eligible candidates, best first: (index, score in [0, 1]).
    pub scored: Vec<(usize, f64)>,
    pub excluded: Vec<(usize, Exclusion)>,
    pub reason: String,
}

impl Decision {
    /// True when no candidate is eligible but some are excluded only for transient reasons.
    pub fn can_wait(&self) -> bool {
        self.selected.is_none() && self.excluded.iter().any(|(_, e)| e.is_transient())
    }
}

/// Decides. Deterministic: the same candidates and ask always give the same decision.
pub fn route(ask: &Ask, candidates: &[Candidate<'_>]) -> Decision {
    let mut scored = Vec::new();
    let mut excluded = Vec::new();
    let total_weight: f64 = ask.prefers.iter().map(|p| p.weight).sum();
    for (i, c) in candidates.iter().enumerate() {
        match exclusion(ask, c) {
            Some(e) => excluded.push((i, e)),
            None => {
                let matched: f64 = ask.prefers.iter().filter(|p| p.matches(c.profile)).map(|p| p.weight).sum();
                let score = if total_weight > 0.0 { matched / total_weight } else { 0.0 };
                scored.push((i, (score * 1000.0).round() / 1000.0));
            }
        }
    }
    scored.sort_by(|a, b| rank(candidates, *a, *b));
    let selected = scored.first().map(|(i, _)| *i);
    let reason = explain(ask, candidates, &scored, &excluded);
    Decision { selected, scored, excluded, reason }
}

/// Why the candidate is excluded, if it is. Lasting reasons (security, tools, requirements) are
/// checked first, so an agent that could never take the task is not reported as merely busy.
fn exclusion(ask: &Ask, c: &Candidate<'_>) -> Option<Exclusion> {
    if let Some(needs_sandbox) = ask.sandbox
        && c.profile.sandboxed != needs_sandbox
    {
        return Some(Exclusion::Sandbox { needs_sandbox });
    }
    for (i, tool) in ask.tools.iter().enumerate() {
        let allowed = c.allowlist.is_none_or(|list| list.iter().any(|t| t == tool));
        if !allowed || !c.profile.has_tool(tool) {
            return Some(Exclusion::ToolUnavailable(i));
        }
    }
    for (i, need) in ask.requires.iter().enumerate() {
        match c.profile.satisfies(need) {
            Satisfies::Yes => {}
            Satisfies::No => return Some(Exclusion::Missing(i)),
            Satisfies::WrongVersion => return Some(Exclusion::WrongVersion(i)),
        }
    }
    if c.status != Status::Online {
        return Some(Exclusion::NotOnline(c.status));
    }
    if let Some(max) = c.profile.max_concurrency
        && c.in_flight >= max
    {
        return Some(Exclusion::AtCapacity { in_flight: c.in_flight, max });
    }
    if c.budget_exhausted {
        return Some(Exclusion::BudgetExhausted);
    }
    None
}

/// Load as a share of capacity; agents without a limit count against a nominal capacity.
fn load(c: &Candidate<'_>) -> f64 {
    const NOMINAL: f64 = 16.0;
    f64::from(c.in_flight) / c.profile.max_concurrency.map_or(NOMINAL, |m| f64::from(m.max(1)))
}

/// Best first: score, then least loaded, best recent success, least recently selected, agent id.
fn rank(candidates: &[Candidate<'_>], (a, sa): (usize, f64), (b, sb): (usize, f64)) -> Ordering {
    let (ca, cb) = (&candidates[a], &candidates[b]);
    sb.total_cmp(&sa)
        .then_with(|| load(ca).total_cmp(&load(cb)))
        .then_with(|| cb.success_rate.unwrap_or(1.0).total_cmp(&ca.success_rate.unwrap_or(1.0)))
        .then_with(|| ca.last_selected.cmp(&cb.last_selected))
        .then_with(|| ca.profile.agent_id.cmp(&cb.profile.agent_id))
}

fn explain(
    ask: &Ask,
    candidates: &[Candidate<'_>],
    scored: &[(usize, f64)],
    excluded: &[(usize, Exclusion)],
) -> String {
    let Some(&(best, score)) = scored.first() else {
        if candidates.is_empty() {
            return "no agent is registered".into();
        }
        let transient = excluded.iter().filter(|(_, e)| e.is_transient()).count();
        return format!(
            "no eligible agent among {} registered ({} excluded for now: offline, busy or out of budget)",
            candidates.len(),
            transient
        );
    };
    let mut parts = Vec::new();
    if ask.requires.is_empty() {
        parts.push("no requirements".to_owned());
    } else {
        let needs: Vec<&str> = ask.requires.iter().map(|n| n.text.as_str()).collect();
        parts.push(format!("matched requires[{}]", needs.join(", ")));
    }
    if !ask.prefers.is_empty() {
        let hits: Vec<&str> =
            ask.prefers.iter().filter(|p| p.matches(candidates[best].profile)).map(|p| p.text.as_str()).collect();
        parts.push(format!(
            "preference score {score:.2} ({})",
            if hits.is_empty() { "none matched".into() } else { hits.join(", ") }
        ));
    }
    if let Some(&(second, second_score)) = scored.get(1) {
        if second_score < score {
            parts.push("highest score".into());
        } else {
            let (a, b) = (&candidates[best], &candidates[second]);
            let why = if load(a) != load(b) {
                format!("least loaded ({} in flight vs {})", a.in_flight, b.in_flight)
            } else if a.success_rate.unwrap_or(1.0) != b.success_rate.unwrap_or(1.0) {
                format!(
                    "best recent success rate ({:.2} vs {:.2})",
                    a.success_rate.unwrap_or(1.0),
                    b.success_rate.unwrap_or(1.0)
                )
            } else if a.last_selected != b.last_selected {
                "round robin (least recently selected)".into()
            } else {
                "tie broken by agent id".into()
            };
            parts.push(why);
        }
    } else {
        parts.push("only eligible agent".into());
    }
    if !excluded.is_empty() {
        parts.push(format!("{} excluded", excluded.len()));
    }
    parts.join("; ")
}
