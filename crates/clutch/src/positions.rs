//! `clutch positions check DIR`: the position files (SKILL.md) of a directory read as the runtime
//! reads them, offline: a line per good file on stdout, `FILE:LINE: expected ...` per bad one on
//! stderr.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use clutch_runtime::skill;

use serde_json::{Value, json};

use crate::args::{ClientArgs, Usage};
use crate::client::{Client, path_segment};
use crate::render;
use crate::table::{Table, paint};

#[derive(Debug, Subcommand)]
pub enum PositionsCommand {
    /// List the positions the daemon runs: name, pattern, roles.
    List(ListArgs),
    /// Show a position: its roles, workflow and message types.
    Show(ShowArgs),
    /// Invoke a position on an input: a session of its team, recorded in the log. With --follow,
    /// stream it until it ends.
    #[command(after_help = INVOKE_EXAMPLES)]
    Invoke(InvokeArgs),
    /// Check the position files in DIR (`DIR/NAME.md` and `DIR/NAME/SKILL.md`) without a daemon: a
    /// line per good file on stdout, one per bad file as FILE:LINE: expected ... on stderr (exit
    /// code 1). A DIR that does not exist or holds no position file is a usage error (exit code 2).
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The directory of position files.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// `check`, which needs no daemon (and no runtime).
pub fn run(command: PositionsCommand) -> anyhow::Result<()> {
    match command {
        PositionsCommand::Check(args) => check(&args.dir),
        _ => unreachable!("the daemon's commands run in `run_client`"),
    }
}

/// The commands that talk to the daemon.
pub async fn run_client(command: PositionsCommand) -> anyhow::Result<()> {
    match command {
        PositionsCommand::List(args) => list(args).await,
        PositionsCommand::Show(args) => show(args).await,
        PositionsCommand::Invoke(args) => invoke(args).await,
        PositionsCommand::Check(_) => unreachable!("checked offline in `run`"),
    }
}

fn check(dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        let why = if dir.exists() { "is not a directory" } else { "does not exist" };
        return Err(Usage(format!("{} {why}", dir.display())).into());
    }
    let (skills, errors) = skill::check_dir(dir);
    if skills.is_empty() && errors.is_empty() {
        return Err(Usage(format!("no position files in {} (NAME.md or NAME/SKILL.md)", dir.display())).into());
    }
    let mut out = String::new();
    for s in &skills {
        out.push_str(&format!(
            "ok  {}  ({}, {}, {})  {}\n",
            s.name,
            s.pattern,
            count(s.agents.len(), "role"),
            count(s.workflow.len(), "phase"),
            s.source
        ));
    }
    render::print(&out)?;
    if errors.is_empty() {
        return Ok(());
    }
    for error in &errors {
        eprintln!("{error}");
    }
    let files = skills.len() + errors.len();
    let verb = if errors.len() == 1 { "has" } else { "have" };
    anyhow::bail!("{} of {} in {} {verb} errors", errors.len(), count(files, "position file"), dir.display())
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch positions list                          the positions the daemon runs
  clutch positions show mirror                   roles, workflow, message types
  clutch positions invoke mirror --input 'Is this safe?' --follow
  clutch positions check ./positions             every position file in ./positions";

const INVOKE_EXAMPLES: &str = "EXAMPLES:
  clutch positions invoke contemplator --input 'Why is the sky blue?' --follow
  clutch positions invoke mirror --input @report.md --agents verifier=agent:kim
  clutch positions invoke swarm --input '[\"a\", \"b\", \"c\"]' --json-input --workers 3
  clutch positions invoke circle --input - --rounds 5 < question.txt

  Prints the session's id and the task that stands for it at once; its outcome is that task's
  (clutch tasks show TASK). Roles nobody is named for are played by LLM agents the daemon spawns
  (it needs a [[providers]] entry). With --follow: phases, turns and messages as they happen, then
  the outcome; exit code 1 when the session fails.";

const CHECK_EXAMPLES: &str = "EXAMPLES:
  clutch positions check ./positions
  clutch positions check crates/runtime/positions    the six shipped positions

  A position is a team of agents following a collaboration pattern (solo, mirror, relay,
  pyramid, swarm, circle), written as a SKILL.md file: front matter (name, pattern,
  description, rounds, quorum, workers), then # Title, ## Overview, ## Agents (### Role with
  - **Personality**: and - **Responsibilities**:), ## Workflow (1. **PHASE**: ...) and
  ## Communication Protocol (- TYPE: ...). The format is described in
  crates/runtime/src/skill.rs.";

/// `clutch positions list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `clutch positions show NAME`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The position.
    #[arg(value_name = "NAME")]
    pub name: String,
    #[arg(long)]
    pub json: bool,
}

/// `clutch positions invoke NAME --input ...`.
#[derive(Debug, Args)]
pub struct InvokeArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The position.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What the team works on: text, `@FILE` for a file's text, or `-` for standard input.
    #[arg(long, value_name = "TEXT")]
    pub input: String,
    /// Read the input as JSON (a swarm splits an array by items).
    #[arg(long)]
    pub json_input: bool,
    /// Who plays a role: `ROLE=agent:ID`, `ROLE=user:NAME` (a person, answering with `clutch tasks
    /// reply`) or `ROLE=skill:NAME` (the agent the router picks for it); repeat per role, several for
    /// a role separated by commas. Roles nobody is named for are played by LLM agents spawned for
    /// the session.
    #[arg(long = "agents", value_name = "ROLE=AGENT", value_parser = role_agent)]
    pub agents: Vec<(String, String)>,
    /// A circle's rounds.
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// A swarm's workers.
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Who invokes (`user:NAME` or an agent id; default: the token's agent, else `user:api`).
    #[arg(long, value_name = "ID")]
    pub from: Option<String>,
    /// Stream the session in the terminal until it ends: phases, turns and messages; exits 1 when the
    /// session fails.
    #[arg(long)]
    pub follow: bool,
    /// Print the daemon's answer (and, with --follow, each event) as JSON lines.
    #[arg(long)]
    pub json: bool,
}

fn role_agent(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((role, agent)) if !role.trim().is_empty() && !agent.trim().is_empty() => {
            Ok((role.trim().to_owned(), agent.trim().to_owned()))
        }
        _ => Err(format!("`{s}` is not ROLE=AGENT (for example verifier=agent:kim)")),
    }
}

async fn list(args: ListArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let answer: Value = client.json(client.get("/v1/positions")).await?;
    if args.json {
        return render::print(&format!("{answer}\n"));
    }
    let positions = answer["positions"].as_array().cloned().unwrap_or_default();
    if positions.is_empty() {
        return render::print("no positions: the daemon's positions runner has not registered yet\n");
    }
    let mut table = Table::new(&["NAME", "PATTERN", "ROLES", "DESCRIPTION"]);
    for p in &positions {
        let roles: Vec<&str> = p["roles"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
        table.row(vec![
            text(&p["name"]).into(),
            text(&p["pattern"]).into(),
            roles.join(", ").into(),
            p["description"].as_str().unwrap_or_else(|| text(&p["title"])).into(),
        ]);
    }
    render::print(&table.render(render::stdout_color()))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

async fn show(args: ShowArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let p: Value = client.json(client.get(&format!("/v1/positions/{}", path_segment(&args.name)))).await?;
    if args.json {
        return render::print(&format!("{p}\n"));
    }
    let color = render::stdout_color();
    let mut out =
        format!("{}  {}  ({})\n", paint(text(&p["name"]), Some("1"), color), text(&p["title"]), text(&p["pattern"]));
    if let Some(overview) = p["overview"].as_str() {
        out.push_str(&format!("\n{overview}\n"));
    }
    out.push_str("\nROLES\n");
    for r in p["roles"].as_array().into_iter().flatten() {
        out.push_str(&format!("  {}  {}\n", paint(text(&r["name"]), Some("1"), color), text(&r["personality"])));
        for duty in r["responsibilities"].as_array().into_iter().flatten() {
            out.push_str(&format!("    - {}\n", text(duty)));
        }
    }
    out.push_str("\nWORKFLOW\n");
    for (i, phase) in p["workflow"].as_array().into_iter().flatten().enumerate() {
        out.push_str(&format!("  {}. {}  {}\n", i + 1, text(&phase["phase"]), text(&phase["description"])));
    }
    out.push_str("\nMESSAGES\n");
    for kind in p["protocol"].as_array().into_iter().flatten() {
        out.push_str(&format!("  {}  {}\n", text(&kind["type"]), text(&kind["description"])));
    }
    render::print(&out)
}

async fn invoke(args: InvokeArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let raw = crate::input::text_arg(&args.input)?;
    let input: Value = if args.json_input {
        serde_json::from_str(&raw)
            .map_err(|e| Usage(format!("--input is not JSON ({e}); drop --json-input to send it as text")))?
    } else {
        Value::String(raw)
    };
    let mut agents = serde_json::Map::new();
    for (role, agent) in &args.agents {
        agents.insert(role.clone(), Value::String(agent.clone()));
    }
    let mut body = json!({"input": input, "agents": agents});
    for (key, value) in [("rounds", args.rounds), ("workers", args.workers)] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    if let Some(from) = &args.from {
        body["agent_id"] = json!(from);
    }
    let invoked: Value = client
        .json(client.post(&format!("/v1/positions/{}/invoke", path_segment(&args.name))).json(&body))
        .await
        .map_err(where_agents_are)?;
    if args.json {
        render::print(&format!("{invoked}\n"))?;
    } else {
        render::print(&format!("session {}  task {}\n", text(&invoked["session_id"]), text(&invoked["task_id"])))?;
    }
    if !args.follow {
        if !args.json {
            render::print(&format!(
                "follow it: clutch tail --run {}    its outcome: clutch tasks show {}\n",
                text(&invoked["session_id"]),
                text(&invoked["task_id"])
            ))?;
        }
        return Ok(());
    }
    follow(&client, text(&invoked["session_id"]), text(&invoked["task_id"]), args.json).await
}

/// A member named in `--agents` that is not registered: the daemon's hint, and where the CLI shows
/// who is.
fn where_agents_are(e: crate::client::Error) -> crate::client::Error {
    match e {
        crate::client::Error::Api(mut api)
            if api.code == "AGENT_NOT_FOUND" && api.field.as_deref().is_some_and(|f| f.starts_with("agents.")) =>
        {
            let more = "`clutch agents list` shows the registered agents, `clutch agents register CARD` adds one";
            api.hint = Some(match api.hint.take() {
                Some(hint) => format!("{hint}; {more}"),
                None => more.to_owned(),
            });
            crate::client::Error::Api(api)
        }
        other => other,
    }
}

/// Prints the session's events as they come (polling its run), until its task ends.
async fn follow(client: &Client, session: &str, task: &str, json: bool) -> anyhow::Result<()> {
    let color = render::stdout_color();
    let mut after = 0u64;
    loop {
        let page: Value = client
            .json(client.get("/v1/events").query(&[
                ("run_id", session),
                ("after", &after.to_string()),
                ("limit", "1000"),
            ]))
            .await?;
        let events = page["events"].as_array().cloned().unwrap_or_default();
        after = page["next_after"].as_u64().unwrap_or(after);
        for e in &events {
            if json {
                render::print(&format!("{e}\n"))?;
            } else if let Some(line) = line(e, task, color) {
                render::print(&line)?;
            }
            if e["task_id"] == task
                && ["task.result", "task.error", "task.timeout", "task.cancel"].contains(&text(&e["type"]))
            {
                return match text(&e["type"]) {
                    "task.result" => Ok(()),
                    kind => anyhow::bail!(
                        "the session ended with {kind}: {}",
                        e["payload"]["message"].as_str().or(e["payload"]["reason"].as_str()).unwrap_or("-")
                    ),
                };
            }
        }
        if events.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}

/// One line for an event of a session worth seeing: a phase or step, a turn, a message, a warning,
/// the outcome.
fn line(e: &Value, task: &str, color: bool) -> Option<String> {
    let at = render::clock(text(&e["ts"]));
    let p = &e["payload"];
    let from = text(&e["from"]["agent_id"]);
    let to: Vec<&str> = e["to"].as_array().into_iter().flatten().filter_map(|r| r["agent_id"].as_str()).collect();
    let short = |v: &Value| {
        let s = v.as_str().map_or_else(|| v.to_string(), str::to_owned).replace('\n', " ");
        if s.chars().count() > 100 { format!("{}…", s.chars().take(100).collect::<String>()) } else { s }
    };
    match (text(&e["type"]), e["payload_type"].as_str()) {
        (_, Some("clutch.session.v1")) => {
            let mut s = format!("{at}  {}", paint(text(&p["phase"]), Some("36"), color));
            if let Some(step) = p["step"].as_str() {
                s.push_str(&format!("  {step}"));
            }
            if let Some(note) = p["note"].as_str() {
                s.push_str(&format!("  — {note}"));
            }
            Some(s + "\n")
        }
        (_, Some("clutch.session.message.v1")) => Some(format!(
            "{at}  {}  {from} → {}: {}\n",
            paint(text(&p["type"]), Some("33"), color),
            to.join(", "),
            short(&p["content"])
        )),
        (_, Some("clutch.session.warning.v1")) => {
            Some(format!("{at}  {}  {}\n", paint(text(&p["code"]), Some("31"), color), text(&p["message"])))
        }
        ("task.request", Some("clutch.position.turn.v1")) => {
            Some(format!("{at}  turn     {} ({})\n", text(&p["role"]), to.join(", ")))
        }
        ("task.result", _) if e["task_id"] == task => {
            let verdict = p["verdict"].as_str().map(|v| format!("{v}: ")).unwrap_or_default();
            Some(format!("{at}  {}  {verdict}{}\n", paint("done", Some("32"), color), text(&p["text"])))
        }
        ("task.error", _) if e["task_id"] == task => Some(format!(
            "{at}  {}  {}: {}\n",
            paint("failed", Some("31"), color),
            text(&p["code"]),
            text(&p["message"])
        )),
        _ => None,
    }
}
