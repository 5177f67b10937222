//! `org.yaml`: roles, agents (their tools, budgets, keys and signature duty), API tokens, the
//! signature policy, run budgets and which tool calls wait for approval. Raw YAML types with
//! locations, checked into the public types.

use std::collections::{BTreeMap, BTreeSet};

use clutch_proto::card::{Capability, Limits};
use clutch_proto::id;
use clutch_proto::sign::PublicKey;
use serde::Deserialize;
use serde_json::{Value, json};
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};

use super::yaml::{Entries, Report};
use crate::access;

/// Everything `org.yaml` says. Empty when the file is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Org {
    /// Templates agents refer to by name.
    pub roles: BTreeMap<String, Role>,
    /// Configured agents by id (`agent:NAME`).
    pub agents: BTreeMap<String, Agent>,
    /// API tokens; when there is any, every `/v1` request needs one.
    pub tokens: Vec<Token>,
    /// Which agents must sign their messages, beyond those with `require_signature: true`.
    pub signatures: SignaturePolicy,
    pub budgets: Budgets,
    pub approvals: Approvals,
    /// How long each workflow's runs are kept once ended (`retention.workflows`: the workflow's name
    /// → `after_days`), instead of `clutch.toml`'s `[retention] after_days` (see [`crate::retention`]).
    pub retention: BTreeMap<String, std::time::Duration>,
}

/// Which tool calls wait for a person's approval before they are made (`approvals:`): every tool
/// whose annotations say it is destructive and not read-only, and the tools (or whole servers)
/// listed in `tools`, except those in `exempt`.
#[derive(Debug, Clone, PartialEq)]
pub struct Approvals {
    pub tools: Vec<String>,
    pub exempt: Vec<String>,
    /// How long a call waits for a decision before it expires (denied, retryable).
    pub timeout: std::time::Duration,
}

impl Default for Approvals {
    fn default() -> Self {
        Approvals { tools: Vec::new(), exempt: Vec::new(), timeout: std::time::Duration::from_secs(15 * 60) }
    }
}

impl Approvals {
    /// Why a call of `tool` needs approval, if it does: `policy` (listed), `destructive` (its
    /// annotations), or `None`.
    pub fn needed(&self, tool: &str, annotations: Option<crate::tool::ToolAnnotations>) -> Option<&'static str> {
        if self.exempt.iter().any(|e| crate::tool::covers(e, tool)) {
            None
        } else if self.tools.iter().any(|t| crate::tool::covers(t, tool)) {
            Some("policy")
        } else if annotations.is_some_and(|a| a.destructive && !a.read_only) {
            Some("destructive")
        } else {
            None
        }
    }
}

/// A role: defaults for the agents that name it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Role {
    /// The tools (`mcp:NAME`, `tool:NAME`) agents of this role may use; `None` sets no list.
    pub tool_allowlist: Option<Vec<String>>,
    pub budget: Budget,
}

/// Spending limits; `null` is no limit on that measure.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(rename = "BudgetLimits")]
pub struct Budget {
    /// LLM tokens.
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// Requests (LLM or tool calls).
    pub requests: Option<u64>,
    pub wall_time_sec: Option<u64>,
}

impl Budget {
    /// `self` with every measure `over` sets replaced by `over`'s.
    pub fn overridden_by(self, over: Budget) -> Budget {
        Budget {
            tokens: over.tokens.or(self.tokens),
            cost_usd: over.cost_usd.or(self.cost_usd),
            requests: over.requests.or(self.requests),
            wall_time_sec: over.wall_time_sec.or(self.wall_time_sec),
        }
    }

    /// Whether no measure is limited.
    pub fn is_unlimited(&self) -> bool {
        *self == Budget::default()
    }
}

/// One configured agent. Its effective tool allowlist and budget merge in its role's: see
/// [`super::Policy::tool_allowlist`] and [`super::Policy::budget`].
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    /// `agent:NAME`.
    pub id: String,
    pub role: Option<String>,
    pub display: Option<String>,
    /// Capabilities declared ahead of the agent's card (same shape as the card's).
    pub capabilities: Vec<Capability>,
    pub limits: Option<Limits>,
    /// Replaces the role's list when set.
    pub tool_allowlist: Option<Vec<String>>,
    /// Overrides the role's budget measure by measure.
    pub budget: Budget,
    /// The keys the agent signs messages with.
    pub keys: Vec<Key>,
    pub require_signature: bool,
}

/// An agent's signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub kid: String,
    pub public_key: PublicKey,
}

/// An API token. Only the SHA-256 digest of the secret is kept.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub name: String,
    pub role: access::Role,
    /// For `agent` tokens: the agent the bearer acts as.
    pub agent_id: Option<String>,
    pub(super) sha256: [u8; 32],
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("agent_id", &self.agent_id)
            .finish_non_exhaustive()
    }
}

/// `signatures.require`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SignaturePolicy {
    /// Only agents with `require_signature: true` must sign.
    #[default]
    None,
    /// Every agent must sign every message.
    All,
}

/// `budgets`: limits per run and what happens when an agent's budget is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budgets {
    pub run: Option<Budget>,
    pub on_exceed: OnExceed,
}

/// What happens when a budget is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnExceed {
    /// The agent leaves routing until its budget allows again.
    #[default]
    Exclude,
    /// The run fails.
    FailRun,
}

// ---- the YAML as written ----

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOrg {
    #[serde(default)]
    roles: Option<Entries<Option<RawRole>>>,
    #[serde(default)]
    agents: Option<Entries<Option<RawAgent>>>,
    #[serde(default)]
    tokens: Option<Vec<RawToken>>,
    #[serde(default)]
    signatures: Option<RawSignatures>,
    #[serde(default)]
    budgets: Option<RawBudgets>,
    #[serde(default)]
    approvals: Option<RawApprovals>,
    #[serde(default)]
    retention: Option<RawRetention>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    workflows: Option<Entries<RawWorkflowRetention>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflowRetention {
    after_days: Spanned<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApprovals {
    tools: Option<Vec<Spanned<String>>>,
    exempt: Option<Vec<Spanned<String>>>,
    timeout_sec: Option<Spanned<u64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRole {
    tool_allowlist: Option<Vec<Spanned<String>>>,
    budget: Option<RawBudget>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    tokens: Option<u64>,
    cost_usd: Option<Spanned<f64>>,
    requests: Option<u64>,
    wall_time_sec: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    role: Option<Spanned<String>>,
    display: Option<Spanned<String>>,
    capabilities: Option<Vec<Spanned<Value>>>,
    limits: Option<Spanned<Value>>,
    tool_allowlist: Option<Vec<Spanned<String>>>,
    budget: Option<RawBudget>,
    keys: Option<Vec<RawKey>>,
    require_signature: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    kid: Spanned<String>,
    public_key: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    name: Spanned<String>,
    role: Spanned<String>,
    agent_id: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    sha256: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSignatures {
    require: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudgets {
    run: Option<RawBudget>,
    on_exceed: Option<Spanned<String>>,
}

// ---- checks ----

/// Checks everything the types do not, recording every error, and builds the [`Org`] from what is
/// valid.
pub(super) fn check(raw: RawOrg, report: &mut Report<'_>) -> Org {
    let mut org = Org::default();

    if let Some(s) = raw.signatures
        && let Some(require) = s.require
    {
        match require.value.as_str() {
            "none" => org.signatures = SignaturePolicy::None,
            "all" => org.signatures = SignaturePolicy::All,
            other => {
                report.at(&require.referenced, "signatures.require", format!("must be none or all, not `{other}`"))
            }
        }
    }
    if let Some(b) = raw.budgets {
        if let Some(run) = b.run {
            org.budgets.run = Some(budget(run, "budgets.run", report));
        }
        if let Some(on) = b.on_exceed {
            match on.value.as_str() {
                "exclude" => org.budgets.on_exceed = OnExceed::Exclude,
                "fail_run" => org.budgets.on_exceed = OnExceed::FailRun,
                other => report.at(
                    &on.referenced,
                    "budgets.on_exceed",
                    format!("must be exclude or fail_run, not `{other}`"),
                ),
            }
        }
    }

    if let Some(a) = raw.approvals {
        org.approvals.tools = a.tools.map(|t| tool_names(t, "approvals.tools", report)).unwrap_or_default();
        org.approvals.exempt = a.exempt.map(|t| tool_names(t, "approvals.exempt", report)).unwrap_or_default();
        if let Some(t) = a.timeout_sec {
            if t.value == 0 || t.value > 7 * 24 * 3600 {
                report.at(&t.referenced, "approvals.timeout_sec", "must be 1 second to 7 days (604800)");
            }
            org.approvals.timeout = std::time::Duration::from_secs(t.value);
        }
    }

    for (name, keep) in raw.retention.and_then(|r| r.workflows).unwrap_or_default().0 {
        let path = format!("retention.workflows.{}.after_days", name.value);
        let days = keep.after_days.value;
        if days == 0 || days > 36_500 {
            report.at(&keep.after_days.referenced, &path, "must be 1 to 36500 days");
            continue;
        }
        org.retention.insert(name.value, std::time::Duration::from_secs(days * 86_400));
    }

    for (name, role) in raw.roles.unwrap_or_default().0 {
        let path = format!("roles.{}", name.value);
        if let Err(e) = id::check_name(&name.value) {
            report.at(&name.referenced, &path, format!("not a valid role name: {e}"));
        }
        let role = role.unwrap_or_default();
        let checked = Role {
            tool_allowlist: role.tool_allowlist.map(|tools| tool_allowlist(tools, &path, report)),
            budget: role.budget.map(|b| budget(b, &format!("{path}.budget"), report)).unwrap_or_default(),
        };
        org.roles.insert(name.value, checked);
    }

    for (agent_id, agent) in raw.agents.unwrap_or_default().0 {
        let checked = self::agent(&agent_id, agent.unwrap_or_default(), &org, report);
        org.agents.insert(agent_id.value, checked);
    }

    let mut names = BTreeMap::new();
    let mut digests: BTreeMap<[u8; 32], String> = BTreeMap::new();
    for (i, raw) in raw.tokens.unwrap_or_default().into_iter().enumerate() {
        let path = format!("tokens[{i}]");
        if let Some(token) = token(raw, &path, &mut names, report) {
            match digests.get(&token.sha256) {
                Some(other) => {
                    let at = names[&token.name];
                    report.at(&at, &path, format!("has the same secret as token `{other}`; each token needs its own"))
                }
                None => {
                    digests.insert(token.sha256, token.name.clone());
                }
            }
            org.tokens.push(token);
        }
    }
    org
}

fn agent(id_key: &Spanned<String>, raw: RawAgent, org: &Org, report: &mut Report<'_>) -> Agent {
    let agent_id = &id_key.value;
    let path = format!("agents.{agent_id}");
    let valid_id = match agent_id.strip_prefix("agent:") {
        Some(name) => id::check_name(name).map_err(|e| format!("not a valid agent id: {e}")),
        None => Err("an agent id must look like `agent:NAME`".to_owned()),
    };
    if let Err(e) = &valid_id {
        report.at(&id_key.referenced, &path, e);
    }

    let role = raw.role.map(|role| {
        if !org.roles.contains_key(&role.value) {
            let known: Vec<&str> = org.roles.keys().map(String::as_str).collect();
            let hint = if known.is_empty() {
                "no roles are defined".to_owned()
            } else {
                format!("roles: {}", known.join(", "))
            };
            report.at(&role.referenced, format!("{path}.role"), format!("unknown role `{}` ({hint})", role.value));
        }
        role.value
    });
    let display = raw.display.map(|d| {
        if d.value.is_empty() || d.value.chars().count() > 128 || d.value.chars().any(char::is_control) {
            report.at(
                &d.referenced,
                format!("{path}.display"),
                "must be 1 to 128 characters without control characters",
            );
        }
        d.value
    });

    // Capabilities and limits have the AgentCard's shape: the card's own validation checks them.
    let (capabilities, limits) = card_parts(
        if valid_id.is_ok() { agent_id } else { "agent:placeholder" },
        raw.capabilities.unwrap_or_default(),
        raw.limits,
        &path,
        report,
    );

    let mut keys = Vec::new();
    let mut kids = BTreeSet::new();
    for (i, key) in raw.keys.unwrap_or_default().into_iter().enumerate() {
        let key_path = format!("{path}.keys[{i}]");
        let kid = &key.kid.value;
        if kid.is_empty() || kid.chars().count() > 128 || kid.chars().any(char::is_control) {
            report.at(
                &key.kid.referenced,
                format!("{key_path}.kid"),
                "must be 1 to 128 characters without control characters",
            );
        } else if !kids.insert(kid.clone()) {
            report.at(
                &key.kid.referenced,
                format!("{key_path}.kid"),
                format!("`{kid}` is used by another key of this agent"),
            );
        }
        match key.public_key.value.parse::<PublicKey>() {
            Ok(public_key) => keys.push(Key { kid: kid.clone(), public_key }),
            Err(e) => report.at(&key.public_key.referenced, format!("{key_path}.public_key"), e),
        }
    }

    let require_signature = raw.require_signature.as_ref().is_some_and(|r| r.value);
    if let Some(r) = &raw.require_signature
        && r.value
        && kids.is_empty()
    {
        report.at(&r.referenced, format!("{path}.require_signature"), "the agent has no `keys` to sign with");
    } else if org.signatures == SignaturePolicy::All && kids.is_empty() {
        report.at(
            &id_key.referenced,
            &path,
            "has no `keys`, but `signatures.require` is `all`: the agent could not send",
        );
    }

    Agent {
        id: agent_id.clone(),
        role,
        display,
        capabilities,
        limits,
        tool_allowlist: raw.tool_allowlist.map(|tools| tool_allowlist(tools, &path, report)),
        budget: raw.budget.map(|b| budget(b, &format!("{path}.budget"), report)).unwrap_or_default(),
        keys,
        require_signature,
    }
}

/// Checks capabilities and limits as AgentCard parts, mapping the card's problems back to the YAML.
fn card_parts(
    agent_id: &str,
    capabilities: Vec<Spanned<Value>>,
    limits: Option<Spanned<Value>>,
    path: &str,
    report: &mut Report<'_>,
) -> (Vec<Capability>, Option<Limits>) {
    let mut card = json!({ "agent_id": agent_id });
    card["capabilities"] = Value::Array(capabilities.iter().map(|c| c.value.clone()).collect());
    if let Some(l) = &limits {
        card["limits"] = l.value.clone();
    }
    match clutch_proto::validate::agent_card(&card) {
        Ok(card) => (card.capabilities, card.limits),
        Err(problems) => {
            for p in problems.into_vec() {
                let at = match p.path.strip_prefix("capabilities[") {
                    Some(rest) => {
                        let i: usize = rest.split(']').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                        capabilities.get(i).map(|c| c.referenced)
                    }
                    None if p.path.starts_with("limits") => limits.as_ref().map(|l| l.referenced),
                    None => None,
                };
                if let Some(at) = at {
                    report.at(&at, format!("{path}.{}", p.path), p.message);
                }
            }
            (Vec::new(), None)
        }
    }
}

fn tool_allowlist(tools: Vec<Spanned<String>>, path: &str, report: &mut Report<'_>) -> Vec<String> {
    tool_names(tools, &format!("{path}.tool_allowlist"), report)
}

/// Tool names as allowlists and approvals name them: `mcp:browser` (a whole server),
/// `mcp:files/read_file` (one of its tools) or `tool:search`.
fn tool_names(tools: Vec<Spanned<String>>, path: &str, report: &mut Report<'_>) -> Vec<String> {
    tools
        .into_iter()
        .enumerate()
        .map(|(i, tool)| {
            let ok = match ["tool:", "mcp:"].iter().find_map(|p| tool.value.strip_prefix(p)) {
                None => Err("must be a tool id such as `mcp:browser`, `mcp:files/read_file` or `tool:search`".into()),
                Some(name) if name.matches('/').count() > 1 => Err("at most one `/`: server/tool".to_owned()),
                Some(name) => {
                    name.split('/').try_for_each(id::check_name).map_err(|e| format!("not a valid tool id: {e}"))
                }
            };
            if let Err(e) = ok {
                report.at(&tool.referenced, format!("{path}[{i}]"), e);
            }
            tool.value
        })
        .collect()
}

fn budget(raw: RawBudget, path: &str, report: &mut Report<'_>) -> Budget {
    let cost_usd = raw.cost_usd.map(|c| {
        if !(c.value.is_finite() && c.value >= 0.0) {
            report.at(&c.referenced, format!("{path}.cost_usd"), "must be a number from 0");
        }
        c.value
    });
    Budget { tokens: raw.tokens, cost_usd, requests: raw.requests, wall_time_sec: raw.wall_time_sec }
}

fn token(
    raw: RawToken,
    path: &str,
    names: &mut BTreeMap<String, serde_saphyr::Location>,
    report: &mut Report<'_>,
) -> Option<Token> {
    let name = &raw.name;
    let mut ok = true;
    if name.value.is_empty() || name.value.chars().count() > 64 || name.value.chars().any(char::is_control) {
        report.at(&name.referenced, format!("{path}.name"), "must be 1 to 64 characters without control characters");
        ok = false;
    } else if names.contains_key(&name.value) {
        report.at(&name.referenced, format!("{path}.name"), format!("`{}` names another token too", name.value));
        ok = false;
    } else {
        names.insert(name.value.clone(), name.referenced);
    }

    let role = match raw.role.value.as_str() {
        "admin" => Some(access::Role::Admin),
        "agent" => Some(access::Role::Agent),
        "approver" => Some(access::Role::Approver),
        "observer" => Some(access::Role::Observer),
        other => {
            report.at(
                &raw.role.referenced,
                format!("{path}.role"),
                format!("must be admin, agent, approver or observer, not `{other}`"),
            );
            None
        }
    };
    match (&raw.agent_id, role) {
        (None, Some(access::Role::Agent)) => {
            report.at(
                &raw.role.referenced,
                format!("{path}.agent_id"),
                "required: an agent token names the agent it acts as",
            );
            ok = false;
        }
        (Some(a), Some(access::Role::Agent)) => {
            if let Err(e) =
                a.value.strip_prefix("agent:").map(id::check_name).unwrap_or(Err("must look like `agent:NAME`".into()))
            {
                report.at(&a.referenced, format!("{path}.agent_id"), e);
                ok = false;
            }
        }
        (Some(a), Some(other)) => {
            report.at(
                &a.referenced,
                format!("{path}.agent_id"),
                format!("only agent tokens name an agent; this one is `{other}`"),
            );
            ok = false;
        }
        (_, None) => ok = false,
        (None, Some(_)) => {}
    }

    let sha256 = match (&raw.token, &raw.sha256) {
        (Some(_), Some(s)) => {
            report.at(&s.referenced, format!("{path}.sha256"), "give either `token` or `sha256`, not both");
            None
        }
        (None, None) => {
            report.at(&name.referenced, path, "needs its secret: `token` (the secret itself) or `sha256` (its digest)");
            None
        }
        (Some(t), None) => {
            if t.value.is_empty() {
                report.at(&t.referenced, format!("{path}.token"), "must not be empty");
                None
            } else {
                Some(Sha256::digest(t.value.as_bytes()).into())
            }
        }
        (None, Some(s)) => {
            let mut digest = [0u8; 32];
            match hex::decode_to_slice(s.value.trim(), &mut digest) {
                Ok(()) => Some(digest),
                Err(_) => {
                    report.at(
                        &s.referenced,
                        format!("{path}.sha256"),
                        "must be 64 hex digits (the SHA-256 of the token)",
                    );
                    None
                }
            }
        }
    };
    match (ok, role, sha256) {
        (true, Some(role), Some(sha256)) => {
            Some(Token { name: name.value.clone(), role, agent_id: raw.agent_id.map(|a| a.value), sha256 })
        }
        _ => None,
    }
}
