//! The command line: clap types for every command (noun → verb), with their help and examples.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use clutch_proto::MessageType;

/// The daemon's address when neither `--url` nor `CLUTCH_URL` is given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7700";

#[derive(Debug, Parser)]
#[command(
    name = "clutch",
    version,
    about = "Clutch: a control plane for AI agents. Runs the daemon and talks to it.",
    after_help = "EXAMPLES:
  clutch serve                            the daemon on 127.0.0.1:7700, data in ./.clutch
  clutch send --from user:ada --to agent:ken --text 'hello'
  clutch tail --run run_01J...            follow a run's events as they happen
  clutch runs replay run_01J... --json    a run's events as NDJSON
  clutch agents list                      the registered agents, their load and usage
  clutch mcp                              the daemon's MCP tools on stdio (for Claude Code)
  clutch runs list --state failed         runs by last activity, newest first
  clutch runs tasks run_01J...            a run's tasks as a tree
  clutch search deploy failed             events whose text holds both words
  clutch config dump                      the effective daemon config
  clutch config check ./policy            check org.yaml and workflows.yaml
  clutch positions check ./positions      check position files (SKILL.md)
  clutch keys generate --agent agent:ken  a signing key pair for an agent
  clutch workflows list                   workflows: status, tasks done, last update
  clutch completions bash                 a completion script for your shell",
    propagate_version = true
)]
pub struct Cli {
    /// Log filter for diagnostics on stderr, e.g. `debug` or `info,clutch_core=debug` (default: the
    /// `log` config key for `serve`, `warn` for the other commands; `CLUTCH_LOG`, then `RUST_LOG`
    /// apply when this flag is absent).
    #[arg(long, global = true, value_name = "FILTER")]
    pub log: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the Clutch daemon: the event log and its HTTP API.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Append messages to the event log, built from flags or read as JSON.
    #[command(after_help = SEND_EXAMPLES)]
    Send(SendArgs),
    /// Follow events live as they are appended; reconnects by itself.
    #[command(after_help = TAIL_EXAMPLES)]
    Tail(TailArgs),
    /// Work with runs: list, show, replay, their tasks, prune.
    #[command(after_help = RUNS_EXAMPLES)]
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Work with threads: list them, show one's events.
    #[command(after_help = crate::lists::THREADS_EXAMPLES)]
    Threads {
        #[command(subcommand)]
        command: crate::lists::ThreadsCommand,
    },
    /// Find events by the words in their text: most relevant first, each with a snippet.
    #[command(after_help = crate::lists::SEARCH_EXAMPLES)]
    Search(crate::lists::SearchArgs),
    /// Derive the lists and the search index again from the whole log (admins; the daemon does it by
    /// itself when its SQLite index file is missing or outdated).
    #[command(after_help = crate::lists::REINDEX_EXAMPLES)]
    Reindex(crate::lists::ReindexArgs),
    /// Work with agents: list, show, register, remove.
    #[command(after_help = crate::agents::EXAMPLES)]
    Agents {
        #[command(subcommand)]
        command: crate::agents::AgentsCommand,
    },
    /// Work with tasks.
    #[command(after_help = crate::tasks::EXAMPLES)]
    Tasks {
        #[command(subcommand)]
        command: crate::tasks::TasksCommand,
    },
    /// Work with workflows: create, list, show, plan and follow them.
    #[command(after_help = crate::workflows::EXAMPLES)]
    Workflows {
        #[command(subcommand)]
        command: crate::workflows::WorkflowsCommand,
    },
    /// Work with the tools agents may call (the MCP servers of `[[mcp_servers]]` in clutch.toml).
    Tools {
        #[command(subcommand)]
        command: crate::tools::ToolsCommand,
    },
    /// Serve the daemon's MCP tools on stdin/stdout, for MCP clients that start a command (Claude
    /// Code, ...). Forwards each call to the running daemon's /mcp endpoint; logs go to stderr.
    #[command(after_help = MCP_EXAMPLES)]
    Mcp(McpArgs),
    /// Measure the daemon on this machine, each figure beside a plain-SQL anchor on the same disk.
    #[cfg(feature = "bench")]
    Bench {
        #[command(subcommand)]
        command: clutch_bench::Command,
    },
    /// Print a shell completion script for clutch (bash, zsh, fish, elvish or powershell).
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        /// The shell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Inspect the daemon's configuration.
    #[command(after_help = CONFIG_EXAMPLES)]
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Work with positions: teams of agents following a collaboration pattern, written as SKILL.md
    /// files.
    #[command(after_help = crate::positions::EXAMPLES)]
    Positions {
        #[command(subcommand)]
        command: crate::positions::PositionsCommand,
    },
    /// Talk to A2A agents (another Clutch hub, or any agent speaking A2A 1.0 or 0.3).
    #[command(after_help = crate::a2a::EXAMPLES)]
    A2a {
        #[command(subcommand)]
        command: crate::a2a::A2aCommand,
    },
    /// Make signing keys for agents.
    #[command(after_help = KEYS_EXAMPLES)]
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs by last activity, newest first: state, kind, tasks per state, title.
    #[command(after_help = crate::lists::RUNS_LIST_EXAMPLES)]
    List(crate::lists::RunsListArgs),
    /// Show a run: its first and last event, participants, task tree and threads.
    #[command(after_help = crate::lists::RUN_SHOW_EXAMPLES)]
    Show(crate::lists::RunShowArgs),
    /// Print every event of a run, in order.
    #[command(after_help = RUNS_EXAMPLES)]
    Replay(ReplayArgs),
    /// Print a run's tasks as a tree by parent task, with counts per state.
    #[command(after_help = crate::tasks::RUN_TASKS_EXAMPLES)]
    Tasks(crate::tasks::RunTasksArgs),
    /// Archive and remove the runs the retention policy says are old enough (`[retention]` in
    /// clutch.toml, `retention:` in org.yaml), now rather than at the daemon's next pass; with
    /// --dry-run, only say which would go.
    #[command(after_help = crate::prune::EXAMPLES)]
    Prune(crate::prune::PruneArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective daemon config as TOML: defaults, then `clutch.toml`, then `CLUTCH_*`
    /// variables, then flags. Passwords in `db` are shown as `***`.
    #[command(after_help = CONFIG_EXAMPLES)]
    Dump(ConfigArgs),
    /// Check the policy files (`org.yaml`, `workflows.yaml`) in DIR as `serve` would load them: a
    /// summary line per file, or every error as FILE:LINE:COLUMN: FIELD: WHY (exit code 1).
    #[command(after_help = CONFIG_EXAMPLES)]
    Check(CheckArgs),
    /// Print every key `clutch.toml` takes, with its type, default, `CLUTCH_*` variable and what it
    /// does, as Markdown (the same as docs/config/reference.md).
    Reference,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The directory to check [default: the effective `config_dir`].
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Generate an ed25519 key pair for signing messages: the secret key (base64url) on stdout, the
    /// `org.yaml` entry with the public key on stderr.
    #[command(after_help = KEYS_EXAMPLES)]
    Generate(KeysGenerateArgs),
}

#[derive(Debug, Args)]
pub struct KeysGenerateArgs {
    /// The agent the key is for, `agent:NAME` (used in the `org.yaml` entry).
    #[arg(long, value_name = "AGENT", value_parser = agent_id)]
    pub agent: Option<String>,
    /// The key id the agent will name in `security.auth.kid` [default: `key-` and the start of the
    /// public key].
    #[arg(long, value_name = "KID", value_parser = kid)]
    pub kid: Option<String>,
    /// Print one JSON object `{agent_id, kid, public_key, secret_key}` on stdout instead.
    #[arg(long)]
    pub json: bool,
}

/// The flags that override the config file and the environment; `serve` and `config dump` share them.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfigArgs {
    /// The config file [default: ./clutch.toml when it exists].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (`listen`, `CLUTCH_LISTEN`) [default: 127.0.0.1:7700]. Port 0 picks a free port.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Directory for the SQLite database and artifacts (`data_dir`, `CLUTCH_DATA_DIR`) [default: ./.clutch].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The store (`db`, `CLUTCH_DB`): unset for SQLite in the data directory; `postgres://…` or
    /// `postgresql://…` for PostgreSQL; `sqlite://DIR` or a plain directory path for SQLite there.
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Directory of the policy files `org.yaml` and `workflows.yaml`, both optional (`config_dir`,
    /// `CLUTCH_CONFIG_DIR`) [default: none: no tokens, signatures or workflows].
    #[arg(long, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,
    /// Run the A2A conformance agent, which works every task given to it as the official A2A TCK
    /// expects (`a2a.conformance`, `CLUTCH_A2A_CONFORMANCE`): for a hub kept for the kit only.
    #[arg(long)]
    pub a2a_conformance: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
}

const COMPLETIONS_EXAMPLES: &str = "EXAMPLES:
  clutch completions bash > ~/.local/share/bash-completion/completions/clutch
  clutch completions zsh > \"${fpath[1]}/_clutch\"
  clutch completions fish > ~/.config/fish/completions/clutch.fish";

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

#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    /// Read the message (a JSON object) or messages (an array) from FILE; `-` reads stdin.
    #[arg(value_name = "FILE", conflicts_with_all = ["file", "build"])]
    pub input: Option<PathBuf>,
    /// Same as the FILE argument.
    #[arg(short, long, value_name = "FILE", conflicts_with = "build")]
    pub file: Option<PathBuf>,

    #[command(flatten)]
    pub build: BuildArgs,
}

/// A message described by flags.
#[derive(Debug, Args)]
#[group(id = "build", multiple = true)]
pub struct BuildArgs {
    /// The message type [default: chat.message].
    #[arg(long = "type", value_name = "TYPE", value_parser = message_types())]
    pub kind: Option<String>,
    /// The sender: `agent:NAME` or `user:NAME`. Required unless the message comes from a file.
    #[arg(long, value_name = "SENDER", required_unless_present_any = ["input", "file"])]
    pub from: Option<String>,
    /// A recipient: `agent:NAME`, `user:NAME` or `group:NAME`; repeat for several.
    #[arg(long, value_name = "RECIPIENT")]
    pub to: Vec<String>,
    /// The run [default: a new run id].
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// The thread [default: a new thread id].
    #[arg(long, value_name = "THREAD_ID")]
    pub thread: Option<String>,
    /// The task [default: a new task id].
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
    /// The payload, a JSON object [default: {}].
    #[arg(long, value_name = "JSON", value_parser = json_object, conflicts_with = "text")]
    pub payload: Option<serde_json::Map<String, serde_json::Value>>,
    /// Shorthand for `--payload '{"text": TEXT}'`.
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// A required capability such as `skill:research@^1.2`; repeat for several.
    #[arg(long, value_name = "CAPABILITY")]
    pub requires: Vec<String>,
    /// A preferred capability, `domain:` or `tag:`; repeat for several.
    #[arg(long, value_name = "PREFERENCE")]
    pub prefers: Vec<String>,
    /// Key that makes a repeated send of the same command a no-op within its run.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

/// Which events to select; every flag given must match.
#[derive(Debug, Clone, Default, Args)]
pub struct FilterArgs {
    /// Only events of this run.
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// Only events of this thread.
    #[arg(long, value_name = "THREAD_ID")]
    pub thread: Option<String>,
    /// Only events about this task.
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
    /// Only events sent by this agent or user (`agent:NAME`).
    #[arg(long, value_name = "SENDER")]
    pub agent: Option<String>,
    /// Only events of this type.
    #[arg(long = "type", value_name = "TYPE", value_parser = message_types())]
    pub kind: Option<String>,
    /// Only events addressed to this agent (its inbox).
    #[arg(long, value_name = "AGENT")]
    pub to: Option<String>,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Start after this seq (0 = from the beginning) instead of with new events only.
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Print each event as one JSON line (NDJSON).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The run to replay.
    #[arg(value_name = "RUN_ID", required_unless_present = "file")]
    pub run: Option<String>,
    /// Replay a run archived by retention (`<run>.ndjson.gz`, or any NDJSON of events) instead of
    /// asking the daemon: no daemon is needed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["run", "reexecute"])]
    pub file: Option<std::path::PathBuf>,
    /// Start after this seq.
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Print each event as one JSON line (NDJSON).
    #[arg(long)]
    pub json: bool,
    /// Instead of printing the run, work its LLM agents' tasks again offline, their model calls and
    /// tool calls answered from the log, and check that they send what they sent then (ids, times
    /// and streamed text aside); drive its positions' sessions again the same way and check that
    /// the runner writes what it wrote then. Exits 1 when anything differs.
    #[arg(long, conflicts_with_all = ["after", "json"])]
    pub reexecute: bool,
    /// With --reexecute: a directory of position files beside the shipped ones (the daemon's
    /// `<config_dir>/positions`), for sessions of positions of your own.
    #[arg(long, value_name = "DIR", requires = "reexecute")]
    pub positions: Option<std::path::PathBuf>,
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

fn message_types() -> PossibleValuesParser {
    PossibleValuesParser::new(MessageType::ALL.iter().map(|t| t.as_str()))
}

fn agent_id(s: &str) -> Result<String, String> {
    match s.strip_prefix("agent:") {
        Some(name) => clutch_proto::id::check_name(name).map(|()| s.to_owned()),
        None => Err("must look like `agent:NAME`".into()),
    }
}

fn kid(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().count() > 128 || s.chars().any(char::is_control) {
        return Err("must be 1 to 128 characters without control characters".into());
    }
    Ok(s.to_owned())
}

fn json_object(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(s) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err("the payload must be a JSON object, like '{\"text\": \"hi\"}'".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

const SERVE_EXAMPLES: &str = "EXAMPLES:
  clutch serve                                   127.0.0.1:7700, SQLite in ./.clutch
  clutch serve --listen 127.0.0.1:0              any free port (printed on stderr)
  clutch serve --data-dir /var/lib/clutch
  clutch serve --db postgres://clutch@localhost/clutch
  clutch serve --config-dir ./policy             policy from org.yaml, workflows.yaml
  CLUTCH_LOG=debug clutch serve --config /etc/clutch/clutch.toml

CONFIG:
  Layers, later wins: defaults, then clutch.toml (./clutch.toml or --config), then
  CLUTCH_* variables, then flags. A key's variable is its path in upper case with `_`
  for `.`: CLUTCH_LISTEN, CLUTCH_DATA_DIR, CLUTCH_DB, CLUTCH_LOG (else RUST_LOG),
  CLUTCH_LIMITS_BODY_BYTES, ... `clutch config dump` prints the result. Relative paths
  are relative to the working directory.

  With config_dir (--config-dir, CLUTCH_CONFIG_DIR) set, the policy files org.yaml and
  workflows.yaml are read from it, and any error in them stops the daemon before it starts
  (`clutch config check DIR` lists them).

  The daemon binds a non-loopback address only when API tokens are configured (org.yaml's
  `tokens`): an open API is never exposed beyond this machine.
  SIGINT or SIGTERM stops it gracefully: streams end, requests in flight finish (10 s at most),
  queued appends are committed.";

const SEND_EXAMPLES: &str = "EXAMPLES:
  clutch send --from user:ada --to agent:ken --text 'hello'
  clutch send --type task.request --from user:ada --requires skill:research \\
      --payload '{\"goal\": \"summarise the report\"}' --run run_01J... --idempotency-key job-42
  clutch send message.json
  echo '[{...}, {...}]' | clutch send -

  Prints the daemon's answer on stdout: `{\"id\",\"seq\",\"duplicate\"}`, or
  `{\"results\": [...]}` for an array. Exits 1 when the daemon refuses a message, naming
  each bad field on stderr.";

const TAIL_EXAMPLES: &str = "EXAMPLES:
  clutch tail                                    new events, one line each
  clutch tail --run run_01J... --type task.result
  clutch tail --after 0 --json | jq .type        every event from the start, as NDJSON

  Reconnects after the daemon restarts or cuts a slow reader off, resuming after the last event
  printed. Ctrl-C stops.";

const RUNS_EXAMPLES: &str = "EXAMPLES:
  clutch runs list                               runs by last activity, newest first
  clutch runs list --state failed --since 1d
  clutch runs show run_01J...                    a run's facts, task tree and threads
  clutch runs replay run_01J...                  one line per event
  clutch runs replay run_01J... --json > run.ndjson
  clutch runs replay run_01J... --after 120
  clutch runs replay run_01J... --reexecute      its LLM agents' tasks worked again from the log
  clutch runs tasks run_01J...                   the run's task tree
  clutch runs replay --file .clutch/archive/2026-10-01/run_01J....ndjson.gz   an archived run
  clutch runs prune --dry-run                    which ended runs retention would archive and remove";

const MCP_EXAMPLES: &str = "EXAMPLES:
  claude mcp add clutch -- clutch mcp                   add Clutch to Claude Code (stdio)
  claude mcp add clutch-worker -- clutch mcp --profile worker
  claude mcp add --transport http clutch http://127.0.0.1:7700/mcp
  clutch mcp --url http://127.0.0.1:7800 --token \"$TOKEN\"

  Needs a running daemon (`clutch serve`); when none answers at --url it says so on stderr and
  exits 1. stdout carries MCP messages only. docs/mcp.md has the CLAUDE.md section to go with it.";

const CONFIG_EXAMPLES: &str = "EXAMPLES:
  clutch config dump
  CLUTCH_LISTEN=127.0.0.1:7800 clutch config dump --data-dir /tmp/clutch
  clutch config check ./policy                   org.yaml and workflows.yaml in ./policy
  CLUTCH_CONFIG_DIR=./policy clutch config check

  The policy formats, with full examples, are in README.md (docs/config/ holds the examples).";

const KEYS_EXAMPLES: &str = "EXAMPLES:
  clutch keys generate --agent agent:ken --kid ken-2026 > ken.key
  clutch keys generate --json

  The secret key goes to stdout (keep it with the agent); the lines to paste under
  `agents:` in org.yaml, with the public key, go to stderr.";
