//! `clutch mcp`: the daemon's MCP tools on stdio, through the bridge in `clutch_mcp::proxy`.

use clap::Args;

use crate::args::ClientArgs;

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Which tools to offer: `worker` (an agent's own lifecycle: register, heartbeat, tasks,
    /// checkpoints, unregister) or `coordinator` (every tool). The daemon serves them at /mcp/worker
    /// and /mcp.
    #[arg(long, default_value = "coordinator", value_name = "PROFILE", value_parser = ["worker", "coordinator"])]
    pub profile: String,
}

pub const EXAMPLES: &str = "EXAMPLES:
  claude mcp add clutch -- clutch mcp                   add Clutch to Claude Code (stdio)
  claude mcp add clutch-worker -- clutch mcp --profile worker
  claude mcp add --transport http clutch http://127.0.0.1:7700/mcp
  clutch mcp --url http://127.0.0.1:7800 --token \"$TOKEN\"

  Needs a running daemon (`clutch serve`); when none answers at --url it says so on stderr and
  exits 1. stdout carries MCP messages only. docs/mcp.md has the CLAUDE.md section to go with it.";

pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    let profile = args.profile.parse()?;
    let options = clutch_mcp::proxy::Options { url: args.client.url, token: args.client.token, profile };
    clutch_mcp::proxy::run(options).await?;
    Ok(())
}
