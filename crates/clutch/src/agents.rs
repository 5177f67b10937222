//! `clutch agents`: list, show, register and remove agents through the daemon's registry
//! (`/v1/agents`), as tables for people or as the daemon's JSON for programs.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::cli::ClientArgs;
use crate::client::{Client, path_segment};
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

pub async fn run(command: AgentsCommand) -> anyhow::Result<()> {
    match command {
        AgentsCommand::List(args) => {
            let client = Client::connect(&args.client)?;
            let answer = client.json(client.get("/v1/agents")).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let agents = answer.get("agents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if agents.is_empty() {
                eprintln!("clutch: no agent is registered; register one with `clutch agents register CARD.json`");
                return Ok(());
            }
            render::print(&list(agents, render::stdout_color()))
        }
        AgentsCommand::Show(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/agents/{}", path_segment(&agent_id(&args.agent)));
            let agent = client.json(client.get(&path)).await?;
            if args.json {
                return render::print(&format!("{agent}\n"));
            }
            render::print(&show(&agent, render::stdout_color()))
        }
        AgentsCommand::Register(args) => {
            let client = Client::connect(&args.client)?;
            let (card, name) = input::json(&args.card)?;
            if !card.is_object() {
                bail!("{name} must hold an AgentCard, a JSON object");
            }
            let answer = client.json(client.post("/v1/agents").json(&card)).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let id = answer["agent_id"].as_str().unwrap_or("?");
            let seq = answer["seq"].as_u64().map_or_else(|| "?".to_owned(), |s| s.to_string());
            let every = answer["heartbeat_interval_sec"].as_u64().map_or_else(|| "?".to_owned(), |s| s.to_string());
            render::print(&format!(
                "{id} registered at seq {seq}; heartbeat every {every} s (POST /v1/agents/{id}/heartbeat)\n"
            ))
        }
        AgentsCommand::Remove(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/agents/{}", path_segment(&agent_id(&args.agent)));
            let answer = client.json(client.delete(&path)).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let id = answer["agent_id"].as_str().unwrap_or("?");
            let seq = answer["seq"].as_u64().map_or_else(|| "?".to_owned(), |s| s.to_string());
            render::print(&format!("{id} removed at seq {seq}\n"))
        }
    }
}

/// `ken` → `agent:ken`; anything with a prefix is taken as it is.
fn agent_id(name: &str) -> String {
    if name.contains(':') { name.to_owned() } else { format!("agent:{name}") }
}

/// The agents as a table, one row each.
fn list(agents: &[Value], color: bool) -> String {
    let mut table = Table::new(&["AGENT", "STATUS", "LOAD", "SUCCESS", "USAGE/BUDGET", "CAPABILITIES"]);
    for agent in agents {
        let status = text(&agent["status"]);
        table.row(vec![
            text(&agent["agent_id"]).into(),
            Cell::colored(status, status_color(status)),
            load(&agent["load"]).into(),
            success(&agent["success_rate"]).into(),
            Cell::colored(usage(agent), agent["budget_exhausted"].as_bool().unwrap_or(false).then_some("31")),
            capabilities(&agent["card"]).join(", ").into(),
        ]);
    }
    table.render(color)
}

/// One agent, readable: its card's display name, then one line per fact.
fn show(agent: &Value, color: bool) -> String {
    let card = &agent["card"];
    let mut out = paint(text(&agent["agent_id"]), Some("1"), color);
    if let Some(name) = card.pointer("/display/name").and_then(Value::as_str) {
        out.push_str(&format!(" ({name})"));
    }
    if let Some(desc) = card.pointer("/display/desc").and_then(Value::as_str) {
        out.push_str(&format!(": {desc}"));
    }
    out.push('\n');

    let mut table = Table::new(&[]);
    let status = text(&agent["status"]);
    let last_seen = agent["last_seen"].as_str().map(|t| format!(", last seen {t}")).unwrap_or_default();
    table.row(vec!["status".into(), Cell::colored(format!("{status}{last_seen}"), status_color(status))]);
    let tasks: Vec<&str> = agent["tasks"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let in_flight = if tasks.is_empty() { String::new() } else { format!(": {}", tasks.join(", ")) };
    table.row(vec!["load".into(), format!("{}{in_flight}", load(&agent["load"])).into()]);
    table.row(vec!["success rate".into(), success(&agent["success_rate"]).into()]);
    let exhausted = agent["budget_exhausted"].as_bool().unwrap_or(false);
    let spent = if exhausted { " (budget exhausted: left out of routing)" } else { "" };
    table
        .row(vec!["usage/budget".into(), Cell::colored(format!("{}{spent}", usage(agent)), exhausted.then_some("31"))]);
    let mut limits = Vec::new();
    for key in ["max_concurrency", "max_runtime_sec"] {
        if let Some(n) = card.pointer(&format!("/limits/{key}")).and_then(Value::as_u64) {
            limits.push(format!("{key} {n}"));
        }
    }
    table.row(vec!["limits".into(), if limits.is_empty() { "none".into() } else { limits.join(", ").into() }]);
    let capabilities = card["capabilities"].as_array().map(Vec::as_slice).unwrap_or_default();
    if capabilities.is_empty() {
        table.row(vec!["capabilities".into(), "none".into()]);
    }
    for (i, capability) in capabilities.iter().enumerate() {
        let key = if i == 0 { "capabilities" } else { "" };
        table.row(vec![key.into(), capability_details(capability).into()]);
    }
    if let Some(endpoints) = card["endpoints"].as_object() {
        for (i, (protocol, endpoint)) in endpoints.iter().enumerate() {
            let key = if i == 0 { "endpoints" } else { "" };
            table.row(vec![key.into(), format!("{protocol} {}", text(&endpoint["url"])).into()]);
        }
    }
    if let Some(security) = card["security"].as_object() {
        let facts: Vec<String> = security.iter().map(|(k, v)| format!("{k} {}", scalar(v))).collect();
        table.row(vec!["security".into(), facts.join(", ").into()]);
    }
    if let Some(meta) = card.get("meta").filter(|m| m.as_object().is_some_and(|m| !m.is_empty())) {
        table.row(vec!["meta".into(), meta.to_string().into()]);
    }
    out.push_str(&table.render(color));
    out
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("-")
}

/// A JSON scalar without quotes around strings.
fn scalar(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

fn status_color(status: &str) -> Option<&'static str> {
    match status {
        "online" => Some("32"),
        "stale" => Some("33"),
        "offline" => Some("31"),
        _ => None,
    }
}

/// `in_flight/max_concurrency`, `∞` when the card sets no limit.
fn load(load: &Value) -> String {
    let in_flight = load["in_flight"].as_u64().unwrap_or(0);
    let max = load["max_concurrency"].as_u64().map_or_else(|| "∞".to_owned(), |m| m.to_string());
    format!("{in_flight}/{max}")
}

/// The recent success rate as a percentage; `-` before any task ended.
fn success(rate: &Value) -> String {
    rate.as_f64().map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", r * 100.0))
}

/// Usage against budget: tokens always, cost and requests when used or limited.
fn usage(agent: &Value) -> String {
    let (usage, budget) = (&agent["usage"], &agent["budget"]);
    let tokens = usage["tokens"].as_u64().unwrap_or(0);
    let mut parts = vec![match budget["tokens"].as_u64() {
        Some(limit) => format!("{tokens}/{limit} tokens"),
        None => format!("{tokens} tokens"),
    }];
    let cost = usage["cost_usd"].as_f64().unwrap_or(0.0);
    match budget["cost_usd"].as_f64() {
        Some(limit) => parts.push(format!("${cost:.2}/${limit:.2}")),
        None if cost > 0.0 => parts.push(format!("${cost:.2}")),
        None => {}
    }
    let requests = usage["requests"].as_u64().unwrap_or(0);
    match budget["requests"].as_u64() {
        Some(limit) => parts.push(format!("{requests}/{limit} requests")),
        None if requests > 0 => parts.push(format!("{requests} requests")),
        None => {}
    }
    parts.join(", ")
}

/// Each capability of a card as `id@version`.
fn capabilities(card: &Value) -> Vec<String> {
    let capabilities = card["capabilities"].as_array().map(Vec::as_slice).unwrap_or_default();
    capabilities
        .iter()
        .map(|c| match c["version"].as_str() {
            Some(version) => format!("{}@{version}", text(&c["id"])),
            None => text(&c["id"]).to_owned(),
        })
        .collect()
}

/// One capability with everything its card entry says.
fn capability_details(capability: &Value) -> String {
    let mut line = text(&capability["id"]).to_owned();
    if let Some(version) = capability["version"].as_str() {
        line.push_str(&format!(" {version}"));
    }
    for key in ["tags", "tools", "servers"] {
        let items: Vec<&str> = capability[key].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if !items.is_empty() {
            line.push_str(&format!("; {key}: {}", items.join(", ")));
        }
    }
    for key in ["trust_level", "cost_hint"] {
        if let Some(value) = capability[key].as_str() {
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

  Exits 2 when no such agent is registered.";

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

  Exits 2 when no such agent is registered.";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ken() -> Value {
        json!({
            "agent_id": "agent:ken", "status": "online",
            "card": {
                "v": "clutch/0.1", "agent_id": "agent:ken", "display": {"name": "Ken", "desc": "researches"},
                "capabilities": [{"id": "skill:research", "version": "1.2.0", "tags": ["web"]}, {"id": "tool:grep"}],
                "limits": {"max_concurrency": 4}, "security": {"sandbox": true}
            },
            "load": {"in_flight": 1, "max_concurrency": 4}, "tasks": ["task_1"],
            "success_rate": 0.5, "usage": {"tokens": 30, "cost_usd": 0.25, "requests": 0},
            "budget": {"tokens": 1000, "cost_usd": null, "requests": null}, "budget_exhausted": false,
            "last_seen": "2026-04-01T12:00:00.000Z"
        })
    }

    #[test]
    fn the_list_is_a_table() {
        let tom = json!({
            "agent_id": "agent:tom", "status": "stale", "card": {"capabilities": [{"id": "skill:code"}]},
            "load": {"in_flight": 0, "max_concurrency": null}, "success_rate": null,
            "usage": {"tokens": 0, "cost_usd": 0.0, "requests": 0}, "budget": null, "budget_exhausted": false
        });
        assert_eq!(
            list(&[ken(), tom], false),
            "\
AGENT      STATUS  LOAD  SUCCESS  USAGE/BUDGET           CAPABILITIES
agent:ken  online  1/4   50%      30/1000 tokens, $0.25  skill:research@1.2.0, tool:grep
agent:tom  stale   0/∞   -        0 tokens               skill:code
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
