//! `clutch agents`: list, show, register and remove agents through the daemon's registry
//! (`/v1/agents`), as tables for people or as the daemon's JSON for programs.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use clutch_core::registry::Status;
use clutch_core::view;
use clutch_proto::AgentCard;
use clutch_proto::card::Capability;
use serde_json::Value;

use crate::args::ClientArgs;
use crate::client::{Client, path_segment, typed};
use crate::table::{Cell, Table, paint};
use crate::{input, render};

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List the registered agents: status, load, success rate, usage against budget, capabilities.
    #[command(after_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// Show one agent: its card and its live state.
    #[command(after_help = SHOW_EXAMPLES)]
    Show(AgentArgs),
    /// Register an agent from its AgentCard (JSON), or replace the card of a registered one.
    #[command(after_help = REGISTER_EXAMPLES)]
    Register(RegisterArgs),
    /// Create a built-in LLM agent: the daemon runs it with one of its `[[providers]]`, and the
    /// router gives it tasks by its capabilities.
    #[command(after_help = CREATE_EXAMPLES)]
    Create(CreateArgs),
    /// Remove an agent: it gets no new tasks, and its unfinished ones are routed again.
    #[command(after_help = REMOVE_EXAMPLES)]
    Remove(AgentArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Print the daemon's answer as JSON (`{"agents": [...]}`).
    #[arg(long)]
    pub json: bool,
}

/// One agent: `agents show` and `agents remove`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The agent: `agent:NAME`, or just `NAME`.
    #[arg(value_name = "AGENT")]
    pub agent: String,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RegisterArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The AgentCard, a JSON file; `-` reads stdin.
    #[arg(value_name = "CARD")]
    pub card: PathBuf,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Its name: it registers as `agent:NAME`.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The provider it calls (a `[[providers]]` name in the daemon's clutch.toml).
    #[arg(long)]
    pub provider: String,
    /// Its role, the system prompt every task starts from.
    #[arg(long, required_unless_present = "system_file", conflicts_with = "system_file")]
    pub system: Option<String>,
    /// Its role, read from a file (e.g. a SKILL.md section).
    #[arg(long, value_name = "FILE")]
    pub system_file: Option<PathBuf>,
    /// What the router may give it, e.g. `skill:summarise` (repeat for several).
    #[arg(long = "capability", required = true, value_name = "ID")]
    pub capabilities: Vec<String>,
    /// A tool offered to it: `mcp:SERVER/TOOL`, or `mcp:SERVER` for all of a server's (repeat).
    #[arg(long = "tool", value_name = "TOOL")]
    pub tools: Vec<String>,
    /// The model, when not the provider's default.
    #[arg(long)]
    pub model: Option<String>,
    /// Model calls per task at most.
    #[arg(long, default_value_t = 20)]
    pub max_turns: u32,
    /// Tasks worked on at once.
    #[arg(long, default_value_t = 4)]
    pub max_concurrency: u32,
    /// Tokens a task may use (a hard budget: the call that would cross it is not made).
    #[arg(long, value_name = "TOKENS")]
    pub task_tokens: Option<u64>,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: AgentsCommand) -> anyhow::Result<()> {
    match command {
        AgentsCommand::List(args) => {
            let client = Client::connect(&args.client)?;
            let answer: Value = client.json(client.get("/v1/agents")).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let view::Agents { agents } = typed(answer)?;
            if agents.is_empty() {
                eprintln!("clutch: no agent is registered; register one with `clutch agents register CARD.json`");
                return Ok(());
            }
            render::print(&list(&agents, render::stdout_color()))
        }
        AgentsCommand::Show(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/agents/{}", path_segment(&agent_id(&args.agent)));
            let agent: Value = client.json(client.get(&path)).await?;
            if args.json {
                return render::print(&format!("{agent}\n"));
            }
            render::print(&show(&typed(agent)?, render::stdout_color()))
        }
        AgentsCommand::Register(args) => {
            let client = Client::connect(&args.client)?;
            let (card, name) = input::json(&args.card)?;
            if !card.is_object() {
                bail!("{name} must hold an AgentCard, a JSON object");
            }
            let answer: Value = client.json(client.post("/v1/agents").json(&card)).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let view::Registered { agent_id: id, seq, heartbeat_interval_sec: every, .. } = typed(answer)?;
            render::print(&format!(
                "{id} registered at seq {seq}; heartbeat every {every} s (POST /v1/agents/{id}/heartbeat)\n"
            ))
        }
        AgentsCommand::Create(args) => {
            let client = Client::connect(&args.client)?;
            let system = match (&args.system, &args.system_file) {
                (Some(text), _) => text.clone(),
                (None, Some(file)) => {
                    std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?
                }
                (None, None) => bail!("give the agent's role with --system or --system-file"),
            };
            let config = clutch_runtime::agent::Config {
                name: args.name.trim_start_matches("agent:").to_owned(),
                provider: args.provider,
                model: args.model,
                description: None,
                system,
                capabilities: args.capabilities,
                tools: args.tools,
                max_turns: args.max_turns,
                max_concurrency: args.max_concurrency,
                task_timeout_ms: 1_800_000,
                max_tokens: None,
                temperature: None,
                budget: None,
                task_budget: args
                    .task_tokens
                    .map(|t| clutch_runtime::agent::Budget { tokens: Some(t), cost_usd: None }),
            };
            config.check().map_err(|why| anyhow::anyhow!("{why}"))?;
            let answer: Value = client.json(client.post("/v1/agents").json(&config.card())).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let view::Registered { agent_id: id, seq, .. } = typed(answer)?;
            render::print(&format!("{id} created at seq {seq}: the daemon runs it with provider {}\n", config.provider))
        }
        AgentsCommand::Remove(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/agents/{}", path_segment(&agent_id(&args.agent)));
            let answer: Value = client.json(client.delete(&path)).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let view::Removed { agent_id: id, seq, .. } = typed(answer)?;
            render::print(&format!("{id} removed at seq {seq}\n"))
        }
    }
}

/// `ken` → `agent:ken`; anything with a prefix is taken as it is.
fn agent_id(name: &str) -> String {
    if name.contains(':') { name.to_owned() } else { format!("agent:{name}") }
}

/// The agents as a table, one row each.
fn list(agents: &[view::Agent], color: bool) -> String {
    // RUNS ON (provider/model) only when some agent is a built-in LLM agent.
    let llm = agents.iter().any(|a| runs_on(&a.card).is_some());
    let mut headers = vec!["AGENT", "STATUS"];
    if llm {
        headers.push("RUNS ON");
    }
    headers.extend(["LOAD", "SUCCESS", "USAGE/BUDGET", "CAPABILITIES"]);
    let mut table = Table::new(&headers);
    for agent in agents {
        let mut row: Vec<Cell> =
            vec![agent.agent_id.as_str().into(), Cell::colored(agent.status.as_str(), status_color(agent.status))];
        if llm {
            row.push(runs_on(&agent.card).unwrap_or_else(|| "-".into()).into());
        }
        row.extend([
            load(&agent.load).into(),
            success(agent.success_rate).into(),
            Cell::colored(usage(agent), agent.budget_exhausted.then_some("31")),
            capabilities(&agent.card).join(", ").into(),
        ]);
        table.row(row);
    }
    table.render(color)
}

/// One agent, readable: its card's display name, then one line per fact.
fn show(agent: &view::Agent, color: bool) -> String {
    let card = &agent.card;
    let mut out = paint(&agent.agent_id, Some("1"), color);
    if let Some(display) = &card.display {
        out.push_str(&format!(" ({})", display.name));
        if let Some(desc) = &display.desc {
            out.push_str(&format!(": {desc}"));
        }
    }
    out.push('\n');

    let mut table = Table::new(&[]);
    let status = agent.status.as_str();
    table.row(vec![
        "status".into(),
        Cell::colored(format!("{status}, last seen {}", agent.last_seen), status_color(agent.status)),
    ]);
    let in_flight = if agent.tasks.is_empty() { String::new() } else { format!(": {}", agent.tasks.join(", ")) };
    table.row(vec!["load".into(), format!("{}{in_flight}", load(&agent.load)).into()]);
    table.row(vec!["success rate".into(), success(agent.success_rate).into()]);
    if let Some(runs_on) = runs_on(card) {
        table.row(vec!["runs on".into(), format!("{runs_on} (a built-in LLM agent)").into()]);
    }
    let exhausted = agent.budget_exhausted;
    let spent = if exhausted { " (budget exhausted: left out of routing)" } else { "" };
    table
        .row(vec!["usage/budget".into(), Cell::colored(format!("{}{spent}", usage(agent)), exhausted.then_some("31"))]);
    let mut limits = Vec::new();
    if let Some(l) = &card.limits {
        for (key, n) in [("max_concurrency", l.max_concurrency), ("max_runtime_sec", l.max_runtime_sec)] {
            if let Some(n) = n {
                limits.push(format!("{key} {n}"));
            }
        }
    }
    table.row(vec!["limits".into(), if limits.is_empty() { "none".into() } else { limits.join(", ").into() }]);
    if card.capabilities.is_empty() {
        table.row(vec!["capabilities".into(), "none".into()]);
    }
    for (i, capability) in card.capabilities.iter().enumerate() {
        let key = if i == 0 { "capabilities" } else { "" };
        table.row(vec![key.into(), capability_details(capability).into()]);
    }
    for (i, (protocol, endpoint)) in card.endpoints.iter().enumerate() {
        let key = if i == 0 { "endpoints" } else { "" };
        table.row(vec![key.into(), format!("{protocol} {}", endpoint.url).into()]);
    }
    if let Some(Value::Object(security)) = card.security.as_ref().map(|s| serde_json::to_value(s).unwrap_or_default()) {
        let facts: Vec<String> = security.iter().map(|(k, v)| format!("{k} {}", scalar(v))).collect();
        table.row(vec!["security".into(), facts.join(", ").into()]);
    }
    if !card.meta.is_empty() {
        table.row(vec!["meta".into(), Value::Object(card.meta.clone()).to_string().into()]);
    }
    out.push_str(&table.render(color));
    out
}

/// `provider/model` of a built-in LLM agent (its card's LLM section); the model is the
/// provider's default when the card names none.
fn runs_on(card: &AgentCard) -> Option<String> {
    let section = card.meta.get("llm")?;
    let provider = section.get("provider")?.as_str()?;
    Some(match section.get("model").and_then(Value::as_str) {
        Some(model) => format!("{provider}/{model}"),
        None => format!("{provider} (its default model)"),
    })
}

/// A JSON scalar without quotes around strings.
fn scalar(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

fn status_color(status: Status) -> Option<&'static str> {
    match status {
        Status::Online => Some("32"),
        Status::Stale => Some("33"),
        Status::Offline => Some("31"),
        Status::Removed => None,
    }
}

/// `in_flight/max_concurrency`, `∞` when the card sets no limit.
fn load(load: &view::Load) -> String {
    let max = load.max_concurrency.map_or_else(|| "∞".to_owned(), |m| m.to_string());
    format!("{}/{max}", load.in_flight)
}

/// The recent success rate as a percentage; `-` before any task ended.
fn success(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", r * 100.0))
}

/// Usage against budget: tokens always, cost and requests when used or limited.
fn usage(agent: &view::Agent) -> String {
    let (usage, budget) = (&agent.usage, agent.budget.unwrap_or_default());
    let tokens = usage.tokens;
    let mut parts = vec![match budget.tokens {
        Some(limit) => format!("{tokens}/{limit} tokens"),
        None => format!("{tokens} tokens"),
    }];
    let cost = usage.cost_usd;
    match budget.cost_usd {
        Some(limit) => parts.push(format!("${cost:.2}/${limit:.2}")),
        None if cost > 0.0 => parts.push(format!("${cost:.2}")),
        None => {}
    }
    let requests = usage.requests;
    match budget.requests {
        Some(limit) => parts.push(format!("{requests}/{limit} requests")),
        None if requests > 0 => parts.push(format!("{requests} requests")),
        None => {}
    }
    parts.join(", ")
}

/// Each capability of a card as `id@version`.
fn capabilities(card: &AgentCard) -> Vec<String> {
    card.capabilities
        .iter()
        .map(|c| match &c.version {
            Some(version) => format!("{}@{version}", c.id),
            None => c.id.clone(),
        })
        .collect()
}

/// One capability with everything its card entry says.
fn capability_details(capability: &Capability) -> String {
    let mut line = capability.id.clone();
    if let Some(version) = &capability.version {
        line.push_str(&format!(" {version}"));
    }
    for (key, items) in [("tags", &capability.tags), ("tools", &capability.tools), ("servers", &capability.servers)] {
        if !items.is_empty() {
            line.push_str(&format!("; {key}: {}", items.join(", ")));
        }
    }
    let named = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_owned));
    let trust = named(capability.trust_level.map(|t| serde_json::to_value(t).unwrap_or_default()));
    let cost = named(capability.cost_hint.map(|c| serde_json::to_value(c).unwrap_or_default()));
    for (key, value) in [("trust_level", trust), ("cost_hint", cost)] {
        if let Some(value) = value {
            line.push_str(&format!("; {key}: {value}"));
        }
    }
    line
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch agents list                             status, load, success rate, usage, capabilities
  clutch agents show agent:ken                   the card and the live state
  clutch agents register ken.json                register (or update) from an AgentCard
  clutch agents remove agent:ken";

const LIST_EXAMPLES: &str = "EXAMPLES:
  clutch agents list
  clutch agents list --json | jq '.agents[] | select(.status == \"online\") | .agent_id'

  LOAD is tasks in flight / the card's max_concurrency (∞: no limit); SUCCESS is the share of
  recent tasks that ended with a result (-: none ended yet).";

const SHOW_EXAMPLES: &str = "EXAMPLES:
  clutch agents show agent:ken
  clutch agents show ken --json

  Exits 3 when no such agent is registered.";

const CREATE_EXAMPLES: &str = "EXAMPLES:
  clutch agents create summariser --provider claude --capability skill:summarise \\
      --system 'You summarise text in three sentences.'
  clutch agents create researcher --provider local --model llama3 --capability skill:research \\
      --system-file roles/researcher.md --tool mcp:browser --task-tokens 50000

  The daemon must declare the provider ([[providers]] in its clutch.toml, its key in the variable
  api_key_env names). The agent is a card with a LLM section (meta.llm): it survives
  restarts, and `clutch agents remove` stops it.";

const REGISTER_EXAMPLES: &str = "EXAMPLES:
  clutch agents register ken.json
  echo '{\"v\": \"clutch/0.1\", \"agent_id\": \"agent:ken\",
         \"capabilities\": [{\"id\": \"skill:research\", \"version\": \"1.2.0\"}],
         \"limits\": {\"max_concurrency\": 2}}' | clutch agents register -

  Prints the agent id, the seq of its registration and the heartbeat interval the agent must keep
  (POST /v1/agents/AGENT/heartbeat). Registering a registered agent replaces its card. Exits 1 when
  the daemon refuses the card, naming each bad field on stderr.";

const REMOVE_EXAMPLES: &str = "EXAMPLES:
  clutch agents remove agent:ken

  Exits 3 when no such agent is registered.";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ken() -> view::Agent {
        typed(json!({
            "agent_id": "agent:ken", "status": "online",
            "card": {
                "v": "clutch/0.1", "agent_id": "agent:ken", "display": {"name": "Ken", "desc": "researches"},
                "capabilities": [{"id": "skill:research", "version": "1.2.0", "tags": ["web"]}, {"id": "tool:grep"}],
                "limits": {"max_concurrency": 4}, "security": {"sandbox": true}
            },
            "load": {"in_flight": 1, "max_concurrency": 4}, "tasks": ["task_1"],
            "success_rate": 0.5, "usage": {"tokens": 30, "cost_usd": 0.25, "requests": 0, "wall_time_sec": 0},
            "budget": {"tokens": 1000, "cost_usd": null, "requests": null}, "budget_exhausted": false,
            "last_seen": "2026-04-01T12:00:00.000Z"
        }))
        .unwrap()
    }

    #[test]
    fn the_list_is_a_table() {
        let tom = typed(json!({
            "agent_id": "agent:tom", "status": "stale",
            "card": {"v": "clutch/0.1", "agent_id": "agent:tom", "capabilities": [{"id": "skill:code"}],
                     "meta": {"llm": {"provider": "claude", "model": "sonnet", "system": "You code."}}},
            "load": {"in_flight": 0, "max_concurrency": null}, "tasks": [], "success_rate": null,
            "usage": {"tokens": 0, "cost_usd": 0.0, "requests": 0, "wall_time_sec": 0}, "budget": null,
            "budget_exhausted": false, "last_seen": "2026-04-01T12:00:00.000Z"
        }))
        .unwrap();
        assert_eq!(
            list(&[ken(), tom], false),
            "\
AGENT      STATUS  RUNS ON        LOAD  SUCCESS  USAGE/BUDGET           CAPABILITIES
agent:ken  online  -              1/4   50%      30/1000 tokens, $0.25  skill:research@1.2.0, tool:grep
agent:tom  stale   claude/sonnet  0/∞   -        0 tokens               skill:code
"
        );
    }

    #[test]
    fn show_is_one_fact_per_line() {
        assert_eq!(
            show(&ken(), false),
            "\
agent:ken (Ken): researches
status        online, last seen 2026-04-01T12:00:00.000Z
load          1/4: task_1
success rate  50%
usage/budget  30/1000 tokens, $0.25
limits        max_concurrency 4
capabilities  skill:research 1.2.0; tags: web
              tool:grep
security      sandbox true
"
        );
    }

    #[test]
    fn bare_names_are_agents() {
        assert_eq!(agent_id("ken"), "agent:ken");
        assert_eq!(agent_id("agent:ken"), "agent:ken");
    }
}
