//! `clutch tools list`: the tools the daemon's adapters serve (`/v1/tools`), server by server, with
//! each server's state; `clutch tools pending|approve|deny`: the calls waiting for a person's
//! approval (`/v1/approvals`, `/v1/tool-calls/{id}/approve|deny`). Tables for people, or the
//! daemon's JSON for programs.

use clap::{Args, Subcommand};
use clutch_core::view::{self, ServerState};
use serde_json::Value;

use crate::args::ClientArgs;
use crate::client::{Client, typed};
use crate::render;
use crate::table::{Cell, Table};

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the tools agents may call: each server's state, then its tools and what they do.
    #[command(after_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// List the tool calls waiting for approval: the tool, who called it, with what, until when.
    #[command(after_help = PENDING_EXAMPLES)]
    Pending(ListArgs),
    /// Approve a tool call waiting for approval: it is made.
    #[command(after_help = DECIDE_EXAMPLES)]
    Approve(DecideArgs),
    /// Deny a tool call waiting for approval: its caller gets a tool.error TOOL_DENIED.
    #[command(after_help = DECIDE_EXAMPLES)]
    Deny(DecideArgs),
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The call: the `tool.call` message's id (`clutch tools pending` lists them).
    #[arg(value_name = "CALL_ID")]
    pub call: String,
    /// Why, for the record.
    #[arg(long)]
    pub note: Option<String>,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Print the daemon's answer as JSON (`{"servers": [...]}`).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: ToolsCommand) -> anyhow::Result<()> {
    match command {
        ToolsCommand::List(args) => {
            let client = Client::connect(&args.client)?;
            let answer: Value = client.json(client.get("/v1/tools")).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let tools: view::Tools = typed(answer)?;
            if tools.servers.is_empty() {
                eprintln!(
                    "clutch: no tool server is declared; add [[mcp_servers]] to clutch.toml (see `clutch serve --help`)"
                );
                return Ok(());
            }
            render::print(&list(&tools, render::stdout_color()))
        }
        ToolsCommand::Pending(args) => {
            let client = Client::connect(&args.client)?;
            let answer: Value = client.json(client.get("/v1/approvals")).await?;
            if args.json {
                return render::print(&format!("{answer}\n"));
            }
            let approvals: view::Approvals = typed(answer)?;
            if approvals.pending.is_empty() {
                eprintln!("clutch: no tool call is waiting for approval");
                return Ok(());
            }
            render::print(&pending(&approvals, render::stdout_color()))
        }
        ToolsCommand::Approve(args) => decide(args, "approve").await,
        ToolsCommand::Deny(args) => decide(args, "deny").await,
    }
}

async fn decide(args: DecideArgs, verb: &str) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let path = format!("/v1/tool-calls/{}/{verb}", crate::client::path_segment(&args.call));
    let body = serde_json::json!({"note": args.note});
    let answer: Value = client.json(client.post(&path).json(&body)).await?;
    if args.json {
        return render::print(&format!("{answer}\n"));
    }
    let decided: clutch_core::payload::ApprovalDecided = typed(answer)?;
    render::print(&format!("{} {} ({}) by {}\n", decided.call_id, decided.decision.as_str(), decided.tool, decided.by))
}

/// One row per call waiting for approval.
fn pending(approvals: &view::Approvals, color: bool) -> String {
    let mut table = Table::new(&["CALL", "TOOL", "CALLER", "WHY", "EXPIRES", "ARGS"]);
    for a in &approvals.pending {
        let args = serde_json::Value::Object(a.args.clone()).to_string();
        table.row(vec![
            a.call_id.as_str().into(),
            a.tool.as_str().into(),
            a.caller.as_str().into(),
            Cell::colored(a.reason.as_str(), Some("33")),
            render::clock(&a.expires_at).into(),
            clutch_proto::error::clip(&args, 60).into_owned().into(),
        ]);
    }
    table.render(color)
}

/// One row per server, then one per tool under it.
fn list(tools: &view::Tools, color: bool) -> String {
    let mut table = Table::new(&["TOOL", "STATE", "DOES"]);
    for server in &tools.servers {
        let state = server.state.as_str();
        let color_of = match server.state {
            ServerState::Ready => Some("32"),
            ServerState::Restarting => Some("31"),
            _ => Some("33"),
        };
        let mut about = format!("{} server, {} tools", server.transport, server.tools.len());
        if server.restarts > 0 {
            about.push_str(&format!(", restarted {}×", server.restarts));
        }
        if let Some(error) = &server.error {
            about.push_str(&format!("; {error}"));
        }
        table.row(vec![server.name.as_str().into(), Cell::colored(state, color_of), about.into()]);
        for tool in &server.tools {
            let a = tool.annotations;
            let kind = if a.read_only {
                "read-only"
            } else if a.destructive {
                "destructive"
            } else {
                "writes"
            };
            let mut does = kind.to_owned();
            if a.idempotent && !a.read_only {
                does.push_str(", idempotent");
            }
            if let Some(d) = tool.description.as_deref().and_then(|d| d.lines().next()) {
                does.push_str(&format!(": {}", clutch_proto::error::clip(d, 80)));
            }
            table.row(vec![format!("  {}", tool.name).into(), "".into(), does.into()]);
        }
    }
    table.render(color)
}

const PENDING_EXAMPLES: &str = "EXAMPLES:
  clutch tools pending
  clutch tools pending --json | jq '.pending[].call_id'

  WHY is `destructive` (the tool's annotations say it may destroy and is not read-only) or `policy`
  (org.yaml's approvals.tools names it). A call not decided by EXPIRES is not made (TOOL_DENIED,
  retryable).";

const DECIDE_EXAMPLES: &str = "EXAMPLES:
  clutch tools approve msg_01J... --note 'checked the path'
  clutch tools deny msg_01J... --note 'not on production'

  Needs an admin's or an approver's token (org.yaml's tokens, role approver). A call gets one
  decision: deciding again is refused and names the decision that stands; a call that is not
  waiting is refused too (exit 1).";

const LIST_EXAMPLES: &str = "EXAMPLES:
  clutch tools list
  clutch tools list --json | jq '.servers[] | {name, state}'

  A tool is called with a tool.call message naming it (payload {\"tool\": \"mcp:files/read_file\",
  \"args\": {...}}); the daemon answers the caller with a tool.result or a tool.error. An allowlist
  entry naming a server (mcp:files) allows all its tools.";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn servers_then_their_tools() {
        let tools: view::Tools = serde_json::from_value(json!({"servers": [{
            "name": "mcp:files", "adapter": "mcp", "transport": "stdio", "state": "ready", "restarts": 1,
            "tools": [
                {"name": "mcp:files/read_file", "description": "Read a file\nin detail", "input_schema": {},
                 "annotations": {"read_only": true, "destructive": false, "idempotent": true, "open_world": false}},
                {"name": "mcp:files/write_file", "input_schema": {},
                 "annotations": {"read_only": false, "destructive": true, "idempotent": true, "open_world": false}}
            ]
        }]}))
        .unwrap();
        assert_eq!(
            list(&tools, false),
            "\
TOOL                    STATE  DOES
mcp:files               ready  stdio server, 2 tools, restarted 1×
  mcp:files/read_file          read-only: Read a file
  mcp:files/write_file         destructive, idempotent
"
        );
    }
}
