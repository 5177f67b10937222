//! The routed tasks an agent is given, over MCP: `task_inbox` (what waits for you, waiting for work
//! if you like) and `task_reply` (accept, complete or fail one). So an agent with no endpoint of its
//! own (Claude Code...) can work tasks sent to it by name, such as its turns in a position's session.
//! Each is one call of an `Engine` method; `task_reply` acts as the agent the caller's token allows.

use std::time::Duration;

use clutch_core::Refusal;
use clutch_core::inbox::{Reply, Status};
use clutch_core::view;
use clutch_proto::ErrorCode;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::from_core;
use crate::tools::{Context, Hints, Lane, Tool, tool};

/// The routed-task tools, in no particular order (the registry sorts).
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "task_inbox",
            "Your inbox",
            "The tasks sent to you that you have not finished, oldest first: each with its goal and input \
             (`request`) and, for a turn in a position's session, the session's id. With `wait_seconds` \
             (at most 60), an empty inbox answers only when a task arrives or the wait is over: call it \
             again to wait for more. Answer each task with task_reply. Changes nothing.",
            Lane::Lifecycle,
            Hints { read_only: true, destructive: false, idempotent: true },
            inbox,
        ),
        tool(
            "task_reply",
            "Reply to a task",
            "Reply to a task from your inbox: `accepted` (you are on it: do this first for long work, \
             or the task may be given to another agent), `completed` with `text` (and/or structured \
             `result`), or `failed` with `error` (`retryable` if another try could succeed). Answers \
             the task's state after the reply; a task that has ended takes no reply \
             (INVALID_TRANSITION).",
            Lane::Lifecycle,
            Hints { read_only: false, destructive: false, idempotent: false },
            reply,
        )
        .acting_as("agent_id"),
    ]
}

/// `task_inbox`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InboxArgs {
    /// You (`agent:NAME`; default: the agent of your token).
    #[serde(default)]
    agent_id: Option<String>,
    /// Wait up to this long for a task when there is none (0 to 60; default 0).
    #[serde(default)]
    wait_seconds: Option<u32>,
}

/// `task_reply`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplyArgs {
    /// The task (`task_...`) from your inbox.
    task_id: String,
    /// You (`agent:NAME`; default: the agent of your token).
    #[serde(default)]
    agent_id: Option<String>,
    /// `accepted`, `completed` (with `text` or `result`) or `failed` (with `error`).
    status: Status,
    /// Your answer, for `completed`.
    #[serde(default)]
    text: Option<String>,
    /// Structured result fields, for `completed`.
    #[serde(default)]
    result: Option<serde_json::Map<String, serde_json::Value>>,
    /// Why you could not do it, for `failed`.
    #[serde(default)]
    error: Option<String>,
    /// For `failed`: whether another try could succeed.
    #[serde(default)]
    retryable: bool,
}

/// The agent named (a bare name is an agent's: `kim` is `agent:kim`), or the caller's token's.
fn who(ctx: &Context, named: Option<String>) -> Result<String, Refusal> {
    match named {
        Some(agent) if agent.contains(':') => Ok(agent),
        Some(name) => Ok(format!("agent:{name}")),
        None => ctx.caller.acting_agent(None)?.ok_or_else(|| {
            Refusal::new(ErrorCode::ValidationFailed, "name yourself: `agent_id` (agent:NAME)").field("agent_id")
        }),
    }
}

async fn inbox(ctx: Context, input: InboxArgs) -> Result<view::Inbox, Refusal> {
    let agent = who(&ctx, input.agent_id)?;
    let wait = Duration::from_secs(input.wait_seconds.unwrap_or(0).into());
    ctx.engine.inbox(&agent, wait).await.map_err(from_core)
}

async fn reply(ctx: Context, input: ReplyArgs) -> Result<view::Task, Refusal> {
    let agent = who(&ctx, input.agent_id)?;
    let reply = Reply {
        status: input.status,
        text: input.text,
        result: input.result,
        error: input.error,
        retryable: input.retryable,
    };
    ctx.engine.task_reply(&agent, &input.task_id, reply).await.map_err(from_core)
}
