//! Tool calls waiting for a person's approval, for a coordinator: `tool_approvals_pending` lists
//! them, `tool_call_approve` and `tool_call_deny` decide one (an admin's or an approver's token;
//! the decision records who). Each is one call of an `Engine` method, answered with core's types.

use clutch_core::Refusal;
use clutch_core::payload::{ApprovalDecided, Decision};
use clutch_core::view::Approvals;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::tools::{Context, Hints, Lane, Tool, tool};

/// The approval tools, in no particular order (the registry sorts).
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "tool_approvals_pending",
            "List tool calls waiting for approval",
            "The tool calls that wait for a person's decision before they are made, oldest first: the \
             call's id, the tool, who called it, its arguments, why it waits (`destructive` or \
             `policy`) and when it expires undecided.",
            Lane::Coordination,
            Hints { read_only: true, destructive: false, idempotent: true },
            pending,
        ),
        tool(
            "tool_call_approve",
            "Approve a tool call",
            "Approve a tool call waiting for approval (its `call_id` from tool_approvals_pending): it is \
             made, and its answer goes to its caller. A call gets one decision; a second is refused and \
             names the one that stands.",
            Lane::Coordination,
            Hints { read_only: false, destructive: false, idempotent: false },
            approve,
        )
        .for_approvers(),
        tool(
            "tool_call_deny",
            "Deny a tool call",
            "Deny a tool call waiting for approval (its `call_id` from tool_approvals_pending): it is not \
             made, and its caller gets a tool.error TOOL_DENIED with your note. A call gets one decision.",
            Lane::Coordination,
            Hints { read_only: false, destructive: false, idempotent: false },
            deny,
        )
        .for_approvers(),
    ]
}

/// `tool_approvals_pending`'s arguments: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Pending {}

/// A decision's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decide {
    /// The `tool.call` message's id.
    call_id: String,
    /// Why, for the record (at most 1,000 characters).
    #[serde(default)]
    note: Option<String>,
}

async fn pending(ctx: Context, _input: Pending) -> Result<Approvals, Refusal> {
    Ok(ctx.engine.approvals())
}

async fn approve(ctx: Context, input: Decide) -> Result<ApprovalDecided, Refusal> {
    decide(ctx, input, Decision::Approved).await
}

async fn deny(ctx: Context, input: Decide) -> Result<ApprovalDecided, Refusal> {
    decide(ctx, input, Decision::Denied).await
}

async fn decide(ctx: Context, input: Decide, decision: Decision) -> Result<ApprovalDecided, Refusal> {
    ctx.engine
        .decide_approval(&input.call_id, decision, &ctx.caller.person(), input.note)
        .await
        .map_err(crate::error::from_core)
}
