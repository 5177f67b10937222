//! `clutch runs replay`: prints every event of one run, in `seq` order, streamed from the daemon as
//! NDJSON so that a long run never sits in memory; with `--reexecute`, works the run's LLM tasks
//! again offline against their recordings (`clutch_runtime::replay`), drives its positions'
//! sessions again (`clutch_runtime::positions::reexecute`), and reports any difference.
//!
//! With `--file`, it reads a run archived by retention (`<run>.ndjson.gz`, or any NDJSON of events)
//! instead of asking the daemon, so no daemon is needed.

use std::io::{BufWriter, Write};

use anyhow::Context;
use clap::Args;
use futures_util::StreamExt;
use serde_json::Value;

use crate::args::ClientArgs;
use crate::client::{self, Client};
use crate::render;

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

pub async fn run(args: ReplayArgs) -> anyhow::Result<()> {
    if let Some(file) = &args.file {
        return from_file(file, args.after, args.json);
    }
    let run = args.run.as_deref().context("name the run to replay, or --file")?;
    let client = Client::connect(&args.client)?;
    if args.reexecute {
        return reexecute(&client, run, args.positions.as_deref()).await;
    }
    let mut request = client.get(&format!("/v1/runs/{}/events", client::path_segment(run)));
    if let Some(after) = args.after {
        request = request.query(&[("after", after)]);
    }
    let response = client.send(request).await?;
    let color = render::stdout_color();
    let mut out = BufWriter::new(std::io::stdout());
    let mut body = response.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(client::Error::Http).context("the run's event stream broke off")?;
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            print_line(&mut out, &line[..end], args.json, color)?;
        }
        out.flush()?;
    }
    print_line(&mut out, &pending, args.json, color)?;
    out.flush()?;
    Ok(())
}

/// Prints a run archived by retention (or any NDJSON of events) as the daemon's replay would.
fn from_file(file: &std::path::Path, after: Option<u64>, json: bool) -> anyhow::Result<()> {
    let color = render::stdout_color();
    let mut out = BufWriter::new(std::io::stdout());
    let mut failure = None;
    let read = clutch_core::retention::read_archive(file, |line| {
        let seq = serde_json::from_str::<Value>(line).ok().and_then(|e| e["seq"].as_u64());
        if after.is_some_and(|a| seq.is_some_and(|s| s <= a)) {
            return Ok(());
        }
        print_line(&mut out, line.as_bytes(), json, color).map_err(|e| {
            failure = Some(e);
            std::io::Error::other("stopped")
        })
    });
    if let Some(e) = failure {
        return Err(e.context(format!("{} holds a line that is not an event", file.display())));
    }
    read.with_context(|| format!("cannot read {}", file.display()))?;
    out.flush()?;
    Ok(())
}

fn print_line(out: &mut impl Write, line: &[u8], json: bool, color: bool) -> anyhow::Result<()> {
    let line = std::str::from_utf8(line).context("the daemon sent an event that is not UTF-8")?.trim();
    if line.is_empty() {
        return Ok(());
    }
    if json {
        writeln!(out, "{line}")?;
    } else {
        let event: Value = serde_json::from_str(line).with_context(|| format!("not an event (JSON): {line}"))?;
        writeln!(out, "{}", render::event_line(&event, color))?;
    }
    Ok(())
}

/// The card `agent` last registered itself with, from the log (for an agent removed since).
async fn registered_card(client: &Client, agent: &str) -> anyhow::Result<Option<clutch_proto::card::AgentCard>> {
    let mut card = None;
    for kind in ["agent.register", "agent.update"] {
        let mut after = 0u64;
        loop {
            let after_text = after.to_string();
            let query = [("agent_id", agent), ("type", kind), ("after", after_text.as_str()), ("limit", "1000")];
            let page = client.json(client.get("/v1/events").query(&query)).await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            for e in &events {
                if let Ok(c) = serde_json::from_value::<clutch_proto::card::AgentCard>(e["payload"].clone())
                    && c.agent_id == agent
                {
                    let seq = e["seq"].as_u64().unwrap_or(0);
                    if card.as_ref().is_none_or(|(s, _)| *s < seq) {
                        card = Some((seq, c));
                    }
                }
            }
            match page["next_after"].as_u64() {
                Some(next) if !events.is_empty() && next > after => after = next,
                _ => break,
            }
        }
    }
    Ok(card.map(|(_, c)| c))
}

/// Re-executes the run's LLM tasks with their agents' cards; exits 1 when one differs.
async fn reexecute(client: &Client, run: &str, positions: Option<&std::path::Path>) -> anyhow::Result<()> {
    let response = client.send(client.get(&format!("/v1/runs/{}/events", client::path_segment(run)))).await?;
    let body = response.text().await.map_err(client::Error::Http).context("the run's event stream broke off")?;
    let mut events = Vec::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        // An event is its message with its `seq`.
        let mut event: serde_json::Map<String, Value> =
            serde_json::from_str(line).with_context(|| format!("not an event (JSON): {line}"))?;
        event.remove("seq");
        let message: clutch_proto::Message = serde_json::from_value(Value::Object(event))
            .with_context(|| format!("the daemon sent an event that is no message: {line}"))?;
        events.push(message);
    }
    let mut cards = std::collections::HashMap::new();
    let agents: std::collections::BTreeSet<String> = events
        .iter()
        .filter(|m| m.payload_type.as_deref() == Some(clutch_runtime::work::LLM_CALL_PAYLOAD))
        .map(|m| m.from.agent_id.clone())
        .collect();
    for agent in agents {
        match client.json(client.get(&format!("/v1/agents/{}", client::path_segment(&agent)))).await {
            Ok(answer) => {
                let view: clutch_core::view::Agent = client::typed(answer)?;
                cards.insert(agent, view.card);
            }
            Err(e) if e.is_not_found() => match registered_card(client, &agent).await? {
                // Removed since (a position's agents are, when their session ends): its card as registered.
                Some(card) => {
                    cards.insert(agent, card);
                }
                None => eprintln!("clutch: {agent} is no longer registered: re-executed from its records alone"),
            },
            Err(e) => return Err(e.into()),
        }
    }
    let outcomes = clutch_runtime::replay::reexecute(&events, &cards).await;
    let catalog = clutch_runtime::skill::Catalog::load(positions).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
        anyhow::anyhow!("bad position files (check them with `clutch positions check DIR`):\n{}", lines.join("\n"))
    })?;
    let options = clutch_runtime::positions::Options::with_catalog(catalog);
    let sessions = clutch_runtime::positions::reexecute(&options, &events).await;
    if outcomes.is_empty() && sessions.is_empty() {
        println!("no task of {run} was worked by a built-in LLM agent or a position's runner: nothing to re-execute");
        return Ok(());
    }
    let mut differ = 0;
    for o in &outcomes {
        match &o.difference {
            None => println!("{} {} attempt {}: identical ({} messages)", o.task_id, o.agent_id, o.attempt, o.compared),
            Some(why) => {
                differ += 1;
                println!("{} {} attempt {}: DIFFERS: {why}", o.task_id, o.agent_id, o.attempt);
            }
        }
    }
    for s in &sessions {
        let runner = clutch_runtime::positions::RUNNER;
        if s.differences.is_empty() {
            println!(
                "{} {runner} session {} ({}): identical ({} messages)",
                s.task_id, s.session_id, s.position, s.compared
            );
        } else {
            differ += 1;
            println!(
                "{} {runner} session {} ({}): DIFFERS: {}",
                s.task_id,
                s.session_id,
                s.position,
                s.differences.join("; ")
            );
        }
    }
    if differ > 0 {
        anyhow::bail!("{differ} of {} re-executed tasks differ from the recording", outcomes.len() + sessions.len());
    }
    Ok(())
}
