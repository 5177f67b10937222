//! The router (seed §4): picks the agent for a task by hard filters, `requires[]` (AND, with semver
//! constraints), weighted `prefers[]`, then tie-breakers, and says why in words. Pure and allocation-light:
//! one decision among 1,000 agents is a single pass.

use std::cmp::Ordering;

use clutch_proto::card::{AgentCard, TrustLevel};
use semver::{Version, VersionReq};

use crate::availability::Status;

/// A name with its hash, so that most comparisons are one integer compare.
#[derive(Debug, Clone)]
struct Name {
    hash: u64,
    text: String,
}

impl Name {
    fn new(text: &str) -> Name {
        Name { hash: hash(text), text: text.to_owned() }
    }

    fn is(&self, hash: u64, text: &str) -> bool {
        self.hash == hash && self.text == text
    }
}

/// FNV-1a: short names, no need for a keyed hash (nothing is stored in a table an attacker fills).
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// What the router knows of an agent's card, prepared once when the card is registered.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub agent_id: String,
    /// Capability ids with their parsed version.
    capabilities: Vec<(Name, Option<Version>)>,
    /// The names after the prefix of capability ids (`research` of `skill:research`), for `domain:`.
    capability_names: Vec<u64>,
    /// Capability tags.
    tags: Vec<Name>,
    /// Tools and MCP servers the agent has (capability `tools`, `servers`, and `tool:`/`mcp:` ids).
    tools: Vec<Name>,
    /// Whether the agent runs sandboxed (the seed's default unless a card says otherwise).
    pub sandboxed: bool,
    pub max_concurrency: Option<u32>,
}

impl Profile {
    pub fn new(card: &AgentCard) -> Profile {
        let mut capabilities = Vec::new();
        let mut tags: Vec<String> = Vec::new();
        let mut tools: Vec<String> = Vec::new();
        let mut trusted = false;
        for c in &card.capabilities {
            capabilities.push((Name::new(&c.id), c.version.as_deref().and_then(lenient_version)));
            tags.extend(c.tags.iter().cloned());
            tools.extend(c.tools.iter().cloned());
            tools.extend(c.servers.iter().cloned());
            if c.id.starts_with("tool:") || c.id.starts_with("mcp:") {
                tools.push(c.id.clone());
            }
            trusted |= c.trust_level == Some(TrustLevel::Prod);
        }
        for v in [&mut tags, &mut tools] {
            v.sort();
            v.dedup();
        }
        let capability_names =
            card.capabilities.iter().filter_map(|c| c.id.split_once(':')).map(|(_, name)| hash(name)).collect();
        let sandbox_flag = card.security.as_ref().and_then(|s| s.sandbox);
        Profile {
            agent_id: card.agent_id.clone(),
            capabilities,
            capability_names,
            tags: tags.iter().map(|t| Name::new(t)).collect(),
            tools: tools.iter().map(|t| Name::new(t)).collect(),
            sandboxed: sandbox_flag.unwrap_or(!trusted),
            max_concurrency: card.limits.as_ref().and_then(|l| l.max_concurrency),
        }
    }

    /// Whether the card names any tool at all (a card that names none places no limit of its own).
    pub fn names_tools(&self) -> bool {
        !self.tools.is_empty()
    }

    pub fn has_tool(&self, tool: &str) -> bool {
        self.has_tool_hashed(hash(tool), tool)
    }

    fn has_tool_hashed(&self, h: u64, tool: &str) -> bool {
        self.tools.iter().any(|t| t.is(h, tool))
    }

    fn has_tag(&self, h: u64, tag: &str) -> bool {
        self.tags.iter().any(|t| t.is(h, tag))
    }

    /// Whether a capability (optionally version-constrained) is present: by capability id, or for
    /// `tool:`/`mcp:` ids also among the agent's tools.
    fn satisfies(&self, need: &Need) -> Satisfies {
        let mut found = false;
        for (id, version) in &self.capabilities {
            if !id.is(need.id.hash, &need.id.text) {
                continue;
            }
            found = true;
            match (&need.version, version) {
                (None, _) => return Satisfies::Yes,
                (Some(req), Some(v)) if req.matches(v) => return Satisfies::Yes,
                _ => {}
            }
        }
        if !found && need.version.is_none() && need.tool_like && self.has_tool_hashed(need.id.hash, &need.id.text) {
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
    id: Name,
    version: Option<VersionReq>,
    /// A `tool:`/`mcp:` id, which an agent's tools also satisfy.
    tool_like: bool,
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
        let tool_like = id.starts_with("tool:") || id.starts_with("mcp:");
        Ok(Need { text: text.to_owned(), id: Name::new(id), version, tool_like })
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
    Tag(Name),
    /// `domain:X`: a capability tagged `X`, or a capability named `X` (`skill:X`).
    Domain(Name),
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
                PreferenceKind::Tag(Name::new(tag))
            } else if let Some(d) = text.strip_prefix("domain:") {
                PreferenceKind::Domain(Name::new(d))
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
            PreferenceKind::Tag(tag) => p.has_tag(tag.hash, &tag.text),
            PreferenceKind::Domain(d) => p.has_tag(d.hash, &d.text) || p.capability_names.contains(&d.hash),
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
    let mut ranked = Vec::with_capacity(candidates.len());
    let mut excluded = Vec::with_capacity(candidates.len());
    let total_weight: f64 = ask.prefers.iter().map(|p| p.weight).sum();
    let tools: Vec<u64> = ask.tools.iter().map(|t| hash(t)).collect();
    for (i, c) in candidates.iter().enumerate() {
        match exclusion(ask, &tools, c) {
            Some(e) => excluded.push((i, e)),
            None => {
                let matched: f64 = ask.prefers.iter().filter(|p| p.matches(c.profile)).map(|p| p.weight).sum();
                let score = if total_weight > 0.0 { matched / total_weight } else { 0.0 };
                ranked.push(Rank::new(i, (score * 1000.0).round() / 1000.0, c));
            }
        }
    }
    // Keys computed once per candidate; the agent id is compared only on a full tie.
    ranked.sort_unstable_by(|a, b| {
        a.cmp_keys(b).then_with(|| candidates[a.index].profile.agent_id.cmp(&candidates[b.index].profile.agent_id))
    });
    let scored: Vec<(usize, f64)> = ranked.iter().map(|r| (r.index, r.score)).collect();
    let selected = scored.first().map(|(i, _)| *i);
    let reason = explain(ask, candidates, &scored, &excluded);
    Decision { selected, scored, excluded, reason }
}

/// Why the candidate is excluded, if it is. Lasting reasons (security, tools, requirements) are
/// checked first, so an agent that could never take the task is not reported as merely busy.
fn exclusion(ask: &Ask, tools: &[u64], c: &Candidate<'_>) -> Option<Exclusion> {
    if let Some(needs_sandbox) = ask.sandbox
        && c.profile.sandboxed != needs_sandbox
    {
        return Some(Exclusion::Sandbox { needs_sandbox });
    }
    for (i, (tool, h)) in ask.tools.iter().zip(tools).enumerate() {
        let allowed = c.allowlist.is_none_or(|list| list.iter().any(|t| t == tool));
        if !allowed || !c.profile.has_tool_hashed(*h, tool) {
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

/// An eligible candidate's sort keys. Best first: score, then least loaded, best recent success,
/// least recently selected (then, on a full tie, the agent id).
struct Rank {
    index: usize,
    score: f64,
    load: f64,
    success: f64,
    last_selected: u64,
}

impl Rank {
    fn new(index: usize, score: f64, c: &Candidate<'_>) -> Rank {
        Rank { index, score, load: load(c), success: c.success_rate.unwrap_or(1.0), last_selected: c.last_selected }
    }

    fn cmp_keys(&self, other: &Rank) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.load.total_cmp(&other.load))
            .then_with(|| other.success.total_cmp(&self.success))
            .then_with(|| self.last_selected.cmp(&other.last_selected))
    }
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
