//! Positions and their sessions over MCP, so an outside agent (Claude Code...) can invoke a team or
//! take a role in one: `positions_list` and `position_invoke` for a coordinator; `sessions_send`,
//! `sessions_list` and `sessions_history` (the seed's shapes) for every member. Each is one call of
//! an `Engine` method with core's types; writes act as the agent the caller's token allows.

use std::collections::BTreeMap;

use clutch_core::Refusal;
use clutch_core::session::Invocation;
use clutch_core::view;
use clutch_proto::ErrorCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::from_core;
use crate::tools::{Context, Hints, Lane, Tool, tool};

const READ: Hints = Hints { read_only: true, destructive: false, idempotent: true };
const WRITE: Hints = Hints { read_only: false, destructive: false, idempotent: false };

/// The position and session tools, in no particular order (the registry sorts).
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "positions_list",
            "List positions",
            "The positions this daemon runs: teams of agents following a collaboration pattern (solo, \
             mirror, relay, pyramid, swarm, circle), each with its roles, workflow phases and message \
             types. Invoke one with position_invoke. Changes nothing.",
            Lane::Coordination,
            READ,
            positions_list,
        ),
        tool(
            "position_invoke",
            "Invoke a position",
            "Start a session of a position on an input: answers at once with the session's id (its run), \
             the task that stands for it and its thread; the outcome is that task's result (task_get, or \
             the task's events). Roles nobody is named for in `agents` are played by LLM agents spawned \
             for the session; name an agent id per role to play one yourself or give it to another. \
             A client that declares MCP's tasks extension gets an MCP task instead, whose id is the \
             session's task: tasks/get answers its progress and, at the end, this answer with the \
             session's state and outcome; tasks/cancel stops the session.",
            Lane::Coordination,
            WRITE,
            position_invoke,
        )
        .acting_as("agent_id")
        .runs_as_task(),
        tool(
            "sessions_send",
            "Send a message in a session",
            "Send a message to other agents of a collaboration session you are a member of: `to` is an \
             agent id, a list of them, or `all` (every other member); `type` is one of the position's \
             message types (sessions_list shows them). Refused: a type outside the protocol, an unknown \
             recipient, repeating your own last messages (LOOP_DETECTED), too many messages.",
            Lane::Lifecycle,
            WRITE,
            sessions_send,
        )
        .acting_as("agent_id"),
        tool(
            "sessions_list",
            "List sessions",
            "Collaboration sessions, newest first (or the one named): the position, its status \
             (INITIALIZING, SPAWNING_AGENTS, RUNNING, COMPLETING, COMPLETED, ERROR, TIMEOUT), the \
             agents with their roles, the message types allowed and how many messages were sent. \
             Changes nothing.",
            Lane::Lifecycle,
            READ,
            sessions_list,
        ),
        tool(
            "sessions_history",
            "Get a session's messages",
            "The messages of a session between its members, oldest first: the last `limit` (default \
             50, at most 1000), only those from or to `agentId` when given. Changes nothing.",
            Lane::Lifecycle,
            READ,
            sessions_history,
        ),
    ]
}

/// `positions_list`'s arguments: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// `positions_list`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Positions {
    /// Each position: name, title, pattern, description, roles, workflow, protocol.
    positions: Vec<Value>,
}

/// `position_invoke`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Invoke {
    /// The position's name (`mirror`).
    position: String,
    /// What the team works on: text, or any JSON (a swarm splits an array by items).
    #[serde(default)]
    input: Value,
    /// Who plays each role: role name → an agent id, a person (`user:NAME`), or a capability
    /// (`skill:NAME`) the router picks an agent for (several separated by commas).
    #[serde(default)]
    agents: BTreeMap<String, String>,
    /// A circle's rounds (default: the position's).
    #[serde(default)]
    rounds: Option<u32>,
    /// A swarm's workers (default: the position's).
    #[serde(default)]
    workers: Option<u32>,
    /// Who invokes (default: the agent of your token; else `user:mcp`).
    #[serde(default)]
    agent_id: Option<String>,
}

/// `sessions_send`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Send {
    /// The session's id (`run_...`).
    session_id: String,
    /// An agent id, `all`, or a list of agent ids.
    to: Recipients,
    /// One of the position's message types (`RESULTS`).
    #[serde(rename = "type")]
    kind: String,
    /// What you say: text or any JSON.
    #[serde(default)]
    content: Value,
    /// You, a member of the session (default: the agent of your token).
    #[serde(default, rename = "agent_id", alias = "agentId")]
    agent_id: Option<String>,
}

/// One recipient or several.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Recipients {
    One(String),
    Many(Vec<String>),
}

/// `sessions_list`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct List {
    /// Only this session.
    #[serde(default)]
    session_id: Option<String>,
}

/// `sessions_history`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct History {
    /// The session's id (`run_...`).
    session_id: String,
    /// How many of the last messages (default 50, at most 1000).
    #[serde(default)]
    limit: Option<usize>,
    /// Only messages from or to this agent.
    #[serde(default)]
    agent_id: Option<String>,
}

async fn positions_list(ctx: Context, _input: NoArgs) -> Result<Positions, Refusal> {
    Ok(Positions { positions: ctx.engine.positions() })
}

async fn position_invoke(ctx: Context, input: Invoke) -> Result<view::Invoked, Refusal> {
    let from = ctx.caller.acting_agent(input.agent_id.as_deref())?.unwrap_or_else(|| "user:mcp".to_owned());
    let invocation = Invocation {
        input: input.input,
        agents: input.agents,
        rounds: input.rounds,
        workers: input.workers,
        ..Invocation::default()
    };
    ctx.engine.position_invoke(&from, &input.position, invocation).await.map_err(from_core)
}

async fn sessions_send(ctx: Context, input: Send) -> Result<view::SessionSent, Refusal> {
    let Some(from) = ctx.caller.acting_agent(input.agent_id.as_deref())? else {
        return Err(Refusal::new(ErrorCode::ValidationFailed, "name yourself: `agent_id`, a member of the session")
            .field("agent_id"));
    };
    let to = match input.to {
        Recipients::One(one) => vec![one],
        Recipients::Many(many) => many,
    };
    ctx.engine.session_send(&from, &input.session_id, &to, &input.kind, input.content).await.map_err(from_core)
}

async fn sessions_list(ctx: Context, input: List) -> Result<view::Sessions, Refusal> {
    Ok(ctx.engine.sessions_list(input.session_id.as_deref()))
}

async fn sessions_history(ctx: Context, input: History) -> Result<view::SessionHistory, Refusal> {
    ctx.engine.session_history(&input.session_id, input.limit, input.agent_id.as_deref()).await.map_err(from_core)
}
