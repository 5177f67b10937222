//! The command line's tree: the clap parser, its nouns and verbs (noun → verb) and their help. Each
//! command's own arguments and examples are in its module, the arguments every command shares in
//! `args`; only the daemon's own flags (`serve`, `config`) are defined here.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    #[command(after_help = crate::send::EXAMPLES)]
    Send(crate::send::SendArgs),
    /// Follow events live as they are appended; reconnects by itself.
    #[command(after_help = crate::tail::EXAMPLES)]
    Tail(crate::tail::TailArgs),
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
    #[command(after_help = crate::mcp::EXAMPLES)]
    Mcp(crate::mcp::McpArgs),
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
    #[command(after_help = crate::keys::EXAMPLES)]
    Keys {
        #[command(subcommand)]
        command: crate::keys::KeysCommand,
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
    Replay(crate::replay::ReplayArgs),
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

const CONFIG_EXAMPLES: &str = "EXAMPLES:
  clutch config dump
  CLUTCH_LISTEN=127.0.0.1:7800 clutch config dump --data-dir /tmp/clutch
  clutch config check ./policy                   org.yaml and workflows.yaml in ./policy
  CLUTCH_CONFIG_DIR=./policy clutch config check

  The policy formats, with full examples, are in README.md (docs/config/ holds the examples).";
