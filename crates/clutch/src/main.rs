//! The `clutch` binary: parses the command line, loads config, starts logging and runs one command.
//! Exit codes: 0 success, 1 failure (including a refused message), 2 a usage error (as clap and most
//! tools have it), 3 a thing asked about (agent, task, run, thread) that does not exist.
//!
//! The allocator is mimalloc (`GLOBAL`): glibc's arenas lock when a message built on one thread is freed
//! on another.

mod a2a;
mod agents;
mod args;
mod cli;
mod client;
mod config;
mod input;
mod keys;
mod lists;
mod mcp;
mod policy;
mod positions;
mod prune;
mod reference;
mod render;
mod replay;
mod send;
mod serve;
mod sse;
mod table;
mod tail;
mod task_tree;
mod tasks;
mod tools;
mod workflows;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::cli::{Cli, Command, ConfigCommand, RunsCommand};
use crate::keys::KeysCommand;

/// mimalloc rather than glibc's malloc: messages are built on one thread and dropped on another
/// (handlers, the log writer, subscribers), and glibc then locks the arena they came from; under
/// load its worker threads spent much of their time waiting for those locks. Without transparent
/// huge pages (`no_thp`): with them its arenas grew the idle daemon by about 10 MB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `clutch tail | head`: the reader left, which is no failure of ours.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("clutch: {e:#}");
            if is_not_found(&e) {
                ExitCode::from(3)
            } else if is_usage(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // The stdio bridge relays one agent's messages: one thread does it with no hand-offs between
    // threads, which cost more CPU than the relaying itself.
    let runtime = match cli.command {
        Command::Mcp(_) => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        _ => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
    }
    .context("cannot start tokio")?;
    let env = |name: &str| std::env::var(name).ok();
    match cli.command {
        Command::Serve(args) => {
            let cwd = std::env::current_dir().context("cannot read the working directory")?;
            let loaded = config::load(&args.config, cli.log.as_deref(), &env, &cwd)?;
            // The policy is checked before anything is opened or bound: an error in it stops the start.
            let policy = match &loaded.config.config_dir {
                Some(dir) => policy::load(dir)?,
                None => clutch_core::config::Policy::default(),
            };
            init_tracing(&loaded.config.log)?;
            runtime.block_on(serve::run(loaded, policy))
        }
        Command::Config { command: ConfigCommand::Dump(args) } => {
            let cwd = std::env::current_dir().context("cannot read the working directory")?;
            let loaded = config::load(&args, cli.log.as_deref(), &env, &cwd)?;
            for note in &loaded.deprecated {
                eprintln!("clutch: warning: {note}");
            }
            use std::io::Write;
            let mut stdout = std::io::stdout();
            stdout.write_all(loaded.config.to_toml()?.as_bytes())?;
            stdout.flush()?;
            Ok(())
        }
        Command::Config { command: ConfigCommand::Reference } => {
            use std::io::Write;
            let mut stdout = std::io::stdout();
            stdout.write_all(reference::render().as_bytes())?;
            stdout.flush()?;
            Ok(())
        }
        Command::Config { command: ConfigCommand::Check(args) } => {
            let cwd = std::env::current_dir().context("cannot read the working directory")?;
            let dir = match args.dir {
                Some(dir) => dir,
                None => config::load(&args.config, cli.log.as_deref(), &env, &cwd)?.config.config_dir.context(
                    "nothing to check: give DIR, or set config_dir (--config-dir, CLUTCH_CONFIG_DIR or clutch.toml)",
                )?,
            };
            policy::check(&dir)
        }
        Command::Keys { command: KeysCommand::Generate(args) } => keys::generate(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "clutch", &mut std::io::stdout());
            Ok(())
        }
        Command::Positions { command: command @ positions::PositionsCommand::Check(_) } => positions::run(command),
        command => {
            let filter = cli.log.or_else(|| env("CLUTCH_LOG")).or_else(|| env("RUST_LOG")).unwrap_or("warn".into());
            init_tracing(&filter)?;
            runtime.block_on(async move {
                match command {
                    Command::Send(args) => send::run(args).await,
                    Command::Tail(args) => tail::run(args).await,
                    Command::Runs { command: RunsCommand::List(args) } => lists::runs(args).await,
                    Command::Runs { command: RunsCommand::Show(args) } => lists::run_show(args).await,
                    Command::Runs { command: RunsCommand::Replay(args) } => replay::run(args).await,
                    Command::Runs { command: RunsCommand::Tasks(args) } => tasks::run_tree(args).await,
                    Command::Runs { command: RunsCommand::Prune(args) } => prune::run(args).await,
                    Command::Agents { command } => agents::run(command).await,
                    Command::Tasks { command } => tasks::run(command).await,
                    Command::Threads { command } => lists::threads(command).await,
                    Command::Search(args) => lists::search(args).await,
                    Command::Reindex(args) => lists::reindex(args).await,
                    Command::Workflows { command } => workflows::run(command).await,
                    Command::Tools { command } => tools::run(command).await,
                    #[cfg(feature = "bench")]
                    Command::Bench { command } => clutch_bench::run(command).await,
                    Command::Mcp(args) => mcp::run(args).await,
                    Command::Positions { command } => positions::run_client(command).await,
                    Command::A2a { command } => a2a::run(command).await,
                    Command::Serve(_) | Command::Config { .. } | Command::Keys { .. } | Command::Completions { .. } => {
                        unreachable!("handled above")
                    }
                }
            })
        }
    }
}

/// Logs go to stderr: stdout carries data.
fn init_tracing(filter: &str) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| anyhow::anyhow!("invalid log filter {filter:?}: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(render::stderr_color())
        .init();
    Ok(())
}

/// Whether the agent, task, run or thread asked about does not exist (the daemon said so, or
/// nothing in the log belongs to it).
fn is_not_found(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<client::Error>().is_some_and(client::Error::is_not_found)
            || c.downcast_ref::<args::NotFound>().is_some()
    })
}

/// Whether the command line asked for something that cannot be (exit code 2).
fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<args::Usage>().is_some())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}
