//! `clutch workflows`: create, list, show, plan and follow workflows through the daemon's
//! `/v1/workflows` routes, as tables for people or as the daemon's JSON for programs.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clutch_core::workflow::api::{self, TaskStatus, WorkflowStatus};
use serde_json::{Value, json};

use crate::args::ClientArgs;
use crate::client::{Client, path_segment, typed};
use crate::render;
use crate::table::{Cell, Table, paint};

#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// Create a workflow: a root task agents plan and then work through, task by task.
    #[command(after_help = CREATE_EXAMPLES)]
    Create(CreateArgs),
    /// List workflows, newest first: status, progress, name. Open workflows, and ended ones while
    /// the daemon keeps them in memory (`ended_retention_ms`); `show` reads any, however old.
    #[command(after_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// Show a workflow: its plan's tasks in order, with status, holder and dependencies.
    #[command(after_help = SHOW_EXAMPLES)]
    Show(WorkflowArgs),
    /// A workflow's progress: counts by status, what runs now, what is ready, what waits and why.
    #[command(after_help = PROGRESS_EXAMPLES)]
    Progress(WorkflowArgs),
    /// Set a workflow's plan from a YAML or JSON file: its tasks, their order and dependencies.
    #[command(after_help = PLAN_EXAMPLES)]
    Plan(PlanArgs),
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch workflows create \"Ship the login page\" --description \"OAuth, then the form\"
  clutch workflows plan run_01J... plan.yaml
  clutch workflows progress run_01J...
  clutch workflows list --status in_progress,blocked";

const CREATE_EXAMPLES: &str = "EXAMPLES:
  clutch workflows create \"Ship the login page\"
  clutch workflows create release-1.4 --description \"Changelog, tag, publish\" --as agent:lead --json";

const LIST_EXAMPLES: &str = "EXAMPLES:
  clutch workflows list
  clutch workflows list --status in_progress,blocked --limit 20
  clutch workflows list --json";

const SHOW_EXAMPLES: &str = "EXAMPLES:
  clutch workflows show run_01J...
  clutch workflows show run_01J... --json";

const PROGRESS_EXAMPLES: &str = "EXAMPLES:
  clutch workflows progress run_01J...
  clutch workflows progress run_01J... --json";

const PLAN_EXAMPLES: &str =
    "The file (YAML or JSON) holds the plan's tasks, as a list or under `tasks` beside an optional
`summary`; a task has a `name`, and may have a `description`, `depends_on` (names of earlier
tasks, or their indices in the list, from 0, as `show` numbers them) and a `parallel_group`:

  summary: Login page
  tasks:
    - name: oauth
      description: Wire the OAuth provider
    - name: form
      depends_on: [oauth]

EXAMPLES:
  clutch workflows plan run_01J... plan.yaml
  cat plan.json | clutch workflows plan run_01J... - --json";

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Its name.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What it is for.
    #[arg(long)]
    pub description: Option<String>,
    /// Where it came from (an issue URL, a ticket id).
    #[arg(long)]
    pub source: Option<String>,
    /// Who creates it (an agent id; default: the token's agent, or the operator).
    #[arg(long = "as", value_name = "AGENT")]
    pub agent: Option<String>,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only these statuses, comma-separated: planning, in_progress, blocked, completed, failed.
    #[arg(long, value_name = "STATUS,...")]
    pub status: Option<String>,
    /// At most this many.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print the daemon's answer as JSON (`{"workflows": [...]}`).
    #[arg(long)]
    pub json: bool,
}

/// One workflow: `show` and `progress`.
#[derive(Debug, Args)]
pub struct WorkflowArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The workflow's id (a run id, `run_...`, as `create` and `list` show it).
    #[arg(value_name = "WORKFLOW_ID")]
    pub workflow: String,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The workflow's id (a run id, `run_...`, as `create` and `list` show it).
    #[arg(value_name = "WORKFLOW_ID")]
    pub workflow: String,
    /// The plan: a YAML or JSON file; `-` reads stdin.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The plan's summary (over the file's `summary`).
    #[arg(long)]
    pub summary: Option<String>,
    /// Who sets it (an agent id; default: the token's agent, or the operator).
    #[arg(long = "as", value_name = "AGENT")]
    pub agent: Option<String>,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: WorkflowsCommand) -> anyhow::Result<()> {
    match command {
        WorkflowsCommand::Create(args) => {
            let client = Client::connect(&args.client)?;
            let mut body = json!({"name": args.name});
            for (key, value) in [("description", args.description), ("source", args.source), ("agent_id", args.agent)] {
                if let Some(value) = value {
                    body[key] = json!(value);
                }
            }
            let Some(answer) = client.answer(client.post("/v1/workflows").json(&body), args.json).await? else {
                return Ok(());
            };
            let workflow: api::WorkflowSummary = typed(answer)?;
            render::print(&format!(
                "{} created: {} (root task {}); plan it with `clutch workflows plan {} FILE`\n",
                workflow.id, workflow.name, workflow.root_task_id, workflow.id
            ))
        }
        WorkflowsCommand::List(args) => {
            let client = Client::connect(&args.client)?;
            let mut query = Vec::new();
            if let Some(status) = &args.status {
                query.push(("status", status.clone()));
            }
            if let Some(limit) = args.limit {
                query.push(("limit", limit.to_string()));
            }
            let Some(answer) = client.answer(client.get("/v1/workflows").query(&query), args.json).await? else {
                return Ok(());
            };
            let workflows: Vec<api::WorkflowSummary> = typed(answer["workflows"].clone())?;
            if workflows.is_empty() {
                eprintln!("clutch: no workflow; create one with `clutch workflows create NAME`");
                return Ok(());
            }
            render::print(&list(&workflows, render::stdout_color()))
        }
        WorkflowsCommand::Show(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/workflows/{}", path_segment(&args.workflow));
            let Some(answer) = client.answer(client.get(&path), args.json).await? else { return Ok(()) };
            render::print(&show(&typed(answer)?, render::stdout_color()))
        }
        WorkflowsCommand::Progress(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/workflows/{}/progress", path_segment(&args.workflow));
            let Some(answer) = client.answer(client.get(&path), args.json).await? else { return Ok(()) };
            render::print(&progress(&typed(answer)?, render::stdout_color()))
        }
        WorkflowsCommand::Plan(args) => {
            let client = Client::connect(&args.client)?;
            let mut body = plan_file(&args.file)?;
            if let Some(summary) = args.summary {
                body["summary"] = json!(summary);
            }
            if let Some(agent) = args.agent {
                body["agent_id"] = json!(agent);
            }
            let path = format!("/v1/workflows/{}/plan", path_segment(&args.workflow));
            let Some(answer) = client.answer(client.put(&path).json(&body), args.json).await? else { return Ok(()) };
            let set: api::PlanSet = typed(answer)?;
            let mut out = format!("{}: a plan of {} task(s)", set.workflow_id, set.tasks.len());
            if !set.replaced.is_empty() {
                out.push_str(&format!(", replacing {} not started", set.replaced.len()));
            }
            out.push_str(&format!("; follow it with `clutch workflows progress {}`\n", set.workflow_id));
            render::print(&out)
        }
    }
}

/// The plan file as the body of `PUT /v1/workflows/{id}/plan`: a list of tasks, or an object with
/// `tasks` (and `summary`); YAML or JSON (JSON is YAML too).
fn plan_file(path: &Path) -> anyhow::Result<Value> {
    let (text, name) = if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).context("cannot read stdin")?;
        (text, "stdin".to_owned())
    } else {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        (text, path.display().to_string())
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(_) => serde_saphyr::from_str(&text).with_context(|| format!("{name} is neither JSON nor YAML"))?,
    };
    match value {
        Value::Array(tasks) => Ok(json!({ "tasks": tasks })),
        Value::Object(map) if map.contains_key("tasks") => Ok(Value::Object(map)),
        _ => bail!(
            "{name} must hold the plan's tasks: a list, or an object with `tasks` (see `clutch workflows plan --help`)"
        ),
    }
}

fn workflow_color(status: WorkflowStatus) -> Option<&'static str> {
    match status {
        WorkflowStatus::Completed => Some("32"),
        WorkflowStatus::Failed => Some("31"),
        WorkflowStatus::Blocked => Some("33"),
        WorkflowStatus::InProgress => Some("36"),
        WorkflowStatus::Planning => None,
    }
}

fn task_color(status: TaskStatus) -> Option<&'static str> {
    match status {
        TaskStatus::Completed => Some("32"),
        TaskStatus::Failed => Some("31"),
        TaskStatus::Blocked => Some("33"),
        TaskStatus::Claimed | TaskStatus::InProgress => Some("36"),
        TaskStatus::Pending => None,
    }
}

/// The workflows as a table, one row each.
fn list(workflows: &[api::WorkflowSummary], color: bool) -> String {
    let mut table = Table::new(&["WORKFLOW", "STATUS", "DONE", "UPDATED", "NAME"]);
    for w in workflows {
        table.row(vec![
            w.id.as_str().into(),
            Cell::colored(w.status.as_str(), workflow_color(w.status)),
            format!("{}/{}", w.completed_tasks, w.total_tasks).into(),
            w.updated_at.as_str().into(),
            w.name.as_str().into(),
        ]);
    }
    table.render(color)
}

/// The tasks of a plan as a table: order, name, status, holder, dependencies.
fn tasks(tasks: &[api::TaskSummary], color: bool) -> String {
    let names: std::collections::HashMap<&str, &str> = tasks.iter().map(|t| (t.id.as_str(), t.name.as_str())).collect();
    let mut table = Table::new(&["#", "TASK", "STATUS", "AGENT", "AFTER"]);
    for t in tasks {
        let after: Vec<&str> = t.depends_on.iter().map(|d| names.get(d.as_str()).copied().unwrap_or(d)).collect();
        table.row(vec![
            t.order.to_string().into(),
            t.name.as_str().into(),
            Cell::colored(t.status.as_str(), task_color(t.status)),
            t.agent_id.as_deref().unwrap_or("-").into(),
            if after.is_empty() { "-".into() } else { after.join(", ").into() },
        ]);
    }
    table.render(color)
}

/// One workflow: a header line, its facts, then its plan's tasks.
fn show(detail: &api::WorkflowDetail, color: bool) -> String {
    let w = &detail.summary;
    let mut out = format!("{} {}\n", paint(&w.id, Some("1"), color), w.name);
    let mut facts = Table::new(&[]);
    facts.row(vec!["status".into(), Cell::colored(w.status.as_str(), workflow_color(w.status))]);
    facts.row(vec!["tasks".into(), format!("{} of {} completed", w.completed_tasks, w.total_tasks).into()]);
    if let Some(description) = &w.description {
        facts.row(vec!["description".into(), description.as_str().into()]);
    }
    if let Some(summary) = &detail.plan_summary {
        facts.row(vec!["plan".into(), summary.as_str().into()]);
    }
    if let Some(source) = &w.source {
        facts.row(vec!["source".into(), source.as_str().into()]);
    }
    facts.row(vec!["created".into(), format!("{} by {}", w.created_at, w.created_by).into()]);
    facts.row(vec!["updated".into(), w.updated_at.as_str().into()]);
    facts.row(vec!["root task".into(), w.root_task_id.as_str().into()]);
    out.push_str(&facts.render(color));
    if detail.tasks.is_empty() {
        out.push_str(&format!("no plan yet: set one with `clutch workflows plan {} FILE`\n", w.id));
    } else {
        out.push('\n');
        out.push_str(&tasks(&detail.tasks, color));
    }
    out
}

/// A workflow's progress: the counts, then what runs, what is ready and what waits.
fn progress(p: &api::Progress, color: bool) -> String {
    let counts: Vec<String> = TaskStatus::ALL
        .iter()
        .filter_map(|s| p.counts.get(s).filter(|n| **n > 0).map(|n| format!("{n} {}", s.as_str())))
        .collect();
    let mut out = format!(
        "{} {}: {:.0}% of {} task(s){}\n",
        paint(&p.workflow_id, Some("1"), color),
        paint(p.status.as_str(), workflow_color(p.status), color),
        p.percent,
        p.total,
        if counts.is_empty() { String::new() } else { format!(" ({})", counts.join(", ")) }
    );
    for (title, list) in [("running", &p.current), ("ready", &p.available)] {
        if !list.is_empty() {
            out.push_str(&format!("\n{title}:\n"));
            out.push_str(&tasks(list, color));
        }
    }
    if !p.blocked.is_empty() {
        out.push_str("\nwaiting:\n");
        let mut table = Table::new(&["TASK", "STATUS", "WHY"]);
        for b in &p.blocked {
            table.row(vec![
                b.name.as_str().into(),
                Cell::colored(b.status.as_str(), task_color(b.status)),
                b.why.as_str().into(),
            ]);
        }
        out.push_str(&table.render(color));
    }
    out
}
