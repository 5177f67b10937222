//! The agent lifecycle tools: `agent_register`, `agent_heartbeat`, `agent_unregister` (the first,
//! fifth and last steps of an agent session) and the read-only `agent_list`. Each is one handler
//! calling one engine method, with the seed's parameter names and answers.

use clutch_core::Refusal;
use clutch_proto::ErrorCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::tools::{Context, Hints, Lane, Tool, tool};

/// The agent tools, in no particular order (the registry sorts).
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "agent_register",
            "Register this agent",
            "Register yourself as an agent before doing anything else, and again after a restart. Answers \
             your agent id (`agent:<name>`), which the other tools take as `agent_id`. Registering a name \
             that is already registered replaces that agent's card.",
            Lane::Lifecycle,
            Hints { read_only: false, destructive: false, idempotent: true },
            register,
        )
        .acting_as("name"),
        tool(
            "agent_heartbeat",
            "Send a heartbeat",
            "Tell Clutch you are alive. Call it again within `next_heartbeat_ms` milliseconds of the last \
             call (about every 10-30 s during long work): an agent that goes quiet becomes stale, then \
             offline, and its unfinished tasks are given to others.",
            Lane::Lifecycle,
            Hints { read_only: false, destructive: false, idempotent: true },
            heartbeat,
        )
        .acting_as("agent_id"),
        tool(
            "agent_unregister",
            "Unregister this agent",
            "Unregister an agent when its session ends. It gets no more tasks, and its unfinished tasks \
             are given to other agents. Register again to come back.",
            Lane::Lifecycle,
            Hints { read_only: false, destructive: true, idempotent: false },
            unregister,
        )
        .acting_as("id"),
        tool(
            "agent_list",
            "List agents",
            "List the registered agents with their status (online, stale, offline), runtime, role, \
             capabilities and load. Changes nothing.",
            Lane::Coordination,
            Hints { read_only: true, destructive: false, idempotent: true },
            list,
        ),
    ]
}

/// `agent_register`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Register {
    /// Your agent name: 1-128 letters, digits, `.`, `_` or `-`, starting with a letter or digit
    /// (e.g. `worker-1`). Your agent id will be `agent:<name>`.
    name: String,
    /// What runs you, e.g. `claude_code`, `codex`, `custom`.
    runtime: String,
    /// Your role in the team, e.g. `worker` (the default), `coordinator`, `reviewer`.
    #[serde(default)]
    role: Option<String>,
    /// What you are good at, e.g. `["typescript", "testing"]`. A plain word is a skill
    /// (`skill:<word>`); `skill:`, `tool:` and `mcp:` ids are kept as given; `name@1.2.0` adds a
    /// version.
    #[serde(default)]
    capabilities: Vec<String>,
    /// The directory (or git worktree) you work in.
    #[serde(default)]
    workspace_path: Option<String>,
    /// Anything else worth knowing about you, as a JSON object.
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Makes this a built-in LLM agent that the daemon runs (for a coordinator creating one):
    /// `{"provider": "<a provider the daemon declares>", "system": "<its role>", "model"?, "tools"?:
    /// ["mcp:<server>/<tool>"], "max_turns"?, "task_timeout_ms"?, "max_tokens"?, "temperature"?,
    /// "task_budget"?: {"tokens"?, "cost_usd"?}}`. Checked when registered.
    #[serde(default)]
    llm: Option<Map<String, Value>>,
}

/// `agent_register`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Registered {
    /// Your agent id, `agent:<name>`: pass it as `agent_id` to the other tools.
    id: String,
    name: String,
    /// `online` once registered.
    status: String,
}

async fn register(ctx: Context, input: Register) -> Result<Registered, Refusal> {
    clutch_proto::id::check_name(&input.name)
        .map_err(|why| Refusal::new(ErrorCode::ValidationFailed, format!("name: {why}")).field("name"))?;
    if input.runtime.trim().is_empty() {
        return Err(Refusal::new(ErrorCode::ValidationFailed, "runtime: must not be empty").field("runtime"));
    }
    let agent_id = format!("agent:{}", input.name);
    let mut capabilities = Vec::with_capacity(input.capabilities.len());
    for raw in &input.capabilities {
        let (id, version) = match raw.split_once('@') {
            Some((id, version)) => (id, Some(version)),
            None => (raw.as_str(), None),
        };
        let id = if ["skill:", "tool:", "mcp:"].iter().any(|p| id.starts_with(p)) {
            id.to_owned()
        } else {
            format!("skill:{id}")
        };
        let mut capability = json!({ "id": id });
        if let Some(version) = version {
            capability["version"] = json!(version);
        }
        capabilities.push(capability);
    }
    let mut meta = Map::new();
    meta.insert("runtime".into(), json!(input.runtime));
    meta.insert("role".into(), json!(input.role.as_deref().unwrap_or("worker")));
    if let Some(path) = &input.workspace_path {
        meta.insert("workspace_path".into(), json!(path));
    }
    if let Some(metadata) = input.metadata {
        meta.insert("metadata".into(), Value::Object(metadata));
    }
    if let Some(llm) = input.llm {
        meta.insert("llm".into(), Value::Object(llm));
    }
    meta.insert("registered_via".into(), json!("mcp"));
    let card = json!({
        "v": clutch_proto::VERSION,
        "agent_id": agent_id,
        "display": { "name": input.name },
        "capabilities": capabilities,
        "meta": meta,
    });
    // The card is checked exactly as `POST /v1/agents` checks one; problems are named by argument.
    let card = clutch_proto::validate::agent_card(&card).map_err(|problems| {
        let total = problems.total();
        let mut body = Refusal::from_problems(problems);
        for problem in &mut body.problems {
            problem.path = argument_path(&problem.path);
        }
        body.field = body.problems.first().map(|p| p.path.clone());
        body.message = match body.problems.as_slice() {
            [one] => format!("{}: {}", one.path, one.message),
            many => format!("{total} problems, first: {}: {}", many[0].path, many[0].message),
        };
        body
    })?;
    ctx.caller.may_act_as(&card.agent_id, "name")?;
    ctx.engine.register(&card).await.map_err(crate::error::from_core)?;
    let status =
        ctx.engine.agent(&card.agent_id).map(|a| a.status.as_str().to_owned()).unwrap_or_else(|| "online".into());
    Ok(Registered { id: card.agent_id, name: input.name, status })
}

/// A card path (`capabilities[1].id`) as the tool argument it came from (`capabilities[1]`).
fn argument_path(card_path: &str) -> String {
    if let Some(rest) = card_path.strip_prefix("capabilities[") {
        let index = rest.split(']').next().unwrap_or_default();
        return format!("capabilities[{index}]");
    }
    match card_path {
        "agent_id" | "display.name" => "name".into(),
        other => other.strip_prefix("meta.").unwrap_or(other).to_owned(),
    }
}

/// `agent_heartbeat`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Heartbeat {
    /// Your agent id from `agent_register`, `agent:<name>`.
    agent_id: String,
    /// The task you are working on, if any (informational for now).
    #[serde(default)]
    #[allow(dead_code)] // accepted so that callers following the protocol are not refused
    current_task_id: Option<String>,
    /// `busy` while working on a task, `idle` otherwise (informational for now).
    #[serde(default)]
    #[allow(dead_code)]
    status: Option<WorkStatus>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WorkStatus {
    Idle,
    Busy,
}

/// `agent_heartbeat`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Beat {
    success: bool,
    /// Call `agent_heartbeat` again within this many milliseconds.
    next_heartbeat_ms: u64,
    /// Your status as Clutch sees it: `online`.
    status: String,
}

async fn heartbeat(ctx: Context, input: Heartbeat) -> Result<Beat, Refusal> {
    let agent_id = agent_id(&input.agent_id, "agent_id")?;
    ctx.caller.may_act_as(&agent_id, "agent_id")?;
    let beat = ctx.engine.heartbeat(&agent_id).await.map_err(crate::error::from_core)?;
    let interval = ctx.engine.options().heartbeat_interval.as_millis();
    Ok(Beat {
        success: true,
        next_heartbeat_ms: u64::try_from(interval).unwrap_or(u64::MAX).max(1),
        status: beat.status.as_str().to_owned(),
    })
}

/// `agent_unregister`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Unregister {
    /// The agent id to unregister (yours, from `agent_register`), `agent:<name>`.
    id: String,
}

/// `agent_unregister`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Unregistered {
    success: bool,
}

async fn unregister(ctx: Context, input: Unregister) -> Result<Unregistered, Refusal> {
    let agent_id = agent_id(&input.id, "id")?;
    ctx.caller.may_act_as(&agent_id, "id")?;
    ctx.engine.unregister(&agent_id).await.map_err(|e| {
        let mut body = crate::error::from_core(e);
        if body.code == ErrorCode::AgentNotFound {
            body.field = Some("id".into());
        }
        body
    })?;
    Ok(Unregistered { success: true })
}

/// `agent_list`'s arguments: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct List {}

/// `agent_list`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Agents {
    agents: Vec<AgentSummary>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentSummary {
    /// `agent:<name>`.
    id: String,
    /// `online`, `stale` or `offline`.
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<String>,
    /// Capability ids, `skill:typescript` or `skill:research@1.2.0`.
    capabilities: Vec<String>,
    /// Tasks in progress.
    in_flight: u64,
    /// How many tasks it takes at once.
    max_concurrency: u64,
}

async fn list(ctx: Context, _input: List) -> Result<Agents, Refusal> {
    Ok(Agents { agents: ctx.engine.with_agents(summary) })
}

fn summary(agent: &clutch_core::registry::Agent) -> AgentSummary {
    let card = &agent.card;
    let text = |key: &str| card.meta.get(key).and_then(Value::as_str).map(str::to_owned);
    let capabilities = card
        .capabilities
        .iter()
        .map(|c| match &c.version {
            Some(version) => format!("{}@{version}", c.id),
            None => c.id.clone(),
        })
        .collect();
    AgentSummary {
        id: card.agent_id.clone(),
        status: agent.status.as_str().to_owned(),
        runtime: text("runtime"),
        role: text("role"),
        capabilities,
        in_flight: agent.in_flight.len() as u64,
        max_concurrency: agent.profile.max_concurrency.map_or(1, u64::from),
    }
}

/// An agent id as given, or `agent:<name>` for a bare name.
fn agent_id(raw: &str, field: &str) -> Result<String, Refusal> {
    let name = raw.strip_prefix("agent:").unwrap_or(raw);
    clutch_proto::id::check_name(name).map_err(|why| {
        Refusal::new(ErrorCode::ValidationFailed, format!("{field}: {why}"))
            .field(field)
            .hint("agent ids look like `agent:worker-1`; agent_register answers yours")
    })?;
    Ok(format!("agent:{name}"))
}
