//! `clutch mcp`: the daemon's MCP tools on stdio, through the bridge in `clutch_mcp::proxy`.

use crate::cli::McpArgs;

pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    let profile = args.profile.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let options = clutch_mcp::proxy::Options { url: args.client.url, token: args.client.token, profile };
    clutch_mcp::proxy::run(options).await?;
    Ok(())
}
