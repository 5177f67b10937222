//! Tools that really run. The MCP client adapter ([`mcp::Servers`]) connects to the MCP servers the
//! operator declares (a command on stdio, or a URL over Streamable HTTP through the outbound guard),
//! keeps each connected (restarted with backoff when it stops), lists their tools as
//! `mcp:<server>/<tool>`, and carries out the `tool.call`s that name them for core's adapter
//! dispatcher (`clutch_core::adapter`), which records each call's start and answer in the log. The
//! webhook adapter ([`hooks`]) turns signed bodies posted to a hook into messages, and sends the
//! messages an operator's webhook selects to its URL.

pub mod hooks;
pub mod mcp;

pub use hooks::{HookConfig, Hooks, WebhookConfig};
pub use mcp::{ServerConfig, Servers};
