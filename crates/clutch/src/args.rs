//! What the commands share and nothing else: where the daemon is (`--url`, `--token`), the message
//! types a `--type` flag takes, and the two errors that set the exit code (2 usage, 3 not found).
//! It names no other module of the binary, so that every command can use it.

use clap::Args;
use clap::builder::PossibleValuesParser;
use clutch_proto::MessageType;

/// The daemon's address when neither `--url` nor `CLUTCH_URL` is given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7700";

/// Where the daemon is.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The daemon's base URL.
    #[arg(long, env = "CLUTCH_URL", default_value = DEFAULT_URL, value_name = "URL")]
    pub url: String,
    /// An API token, when the daemon has tokens configured (sent as `Authorization: Bearer`).
    #[arg(long, env = "CLUTCH_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
}

/// A usage error found after the command line was parsed (a directory that is not there): exit code
/// 2, as clap's own.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A thing asked about (a run, a thread) that nothing in the log belongs to, found out by the
/// client rather than said by the daemon: exit code 3, as a `*_NOT_FOUND` answer.
#[derive(Debug)]
pub struct NotFound(pub String);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

/// The values a `--type` flag takes: every message type this build knows.
pub fn message_types() -> PossibleValuesParser {
    PossibleValuesParser::new(MessageType::ALL.iter().map(|t| t.as_str()))
}
