//! `clutch tasks show` and `clutch runs tasks`: a task's state and history as a timeline, and a
//! run's tasks as a tree by `parent_task_id`, read from `/v1/tasks/{id}` and `/v1/runs/{id}/tasks`.

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::cli::ClientArgs;
use crate::client::{Client, path_segment};
use crate::render;
use crate::table::{Cell, Table, paint};

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Show a task: state, agent, attempts, error, and its history as a timeline.
    #[command(after_help = SHOW_EXAMPLES)]
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The task.
    #[arg(value_name = "TASK_ID")]
    pub task: String,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `clutch runs tasks RUN`.
#[derive(Debug, Args)]
pub struct RunTasksArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The run.
    #[arg(value_name = "RUN_ID")]
    pub run: String,
    /// Print the daemon's answer as JSON (the tree, counts per state and the run's usage).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: TasksCommand) -> anyhow::Result<()> {
    match command {
        TasksCommand::Show(args) => {
            let client = Client::connect(&args.client)?;
            let task = client.json(client.get(&format!("/v1/tasks/{}", path_segment(&args.task)))).await?;
            if args.json {
                return render::print(&format!("{task}\n"));
            }
            render::print(&show(&task, render::stdout_color()))
        }
    }
}

pub async fn run_tree(args: RunTasksArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let answer = client.json(client.get(&format!("/v1/runs/{}/tasks", path_segment(&args.run)))).await?;
    if args.json {
        return render::print(&format!("{answer}\n"));
    }
    render::print(&tree(&answer, render::stdout_color()))
}

/// States in the order a task lives through them.
const STATES: &[&str] = &[
    "requested",
    "queued",
    "routed",
    "accepted",
    "running",
    "retrying",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
];

/// A task: its facts, then its history as a table.
fn show(task: &Value, color: bool) -> String {
    let state = text(&task["state"]);
    let mut out =
        format!("{}  {}\n", paint(text(&task["task_id"]), Some("1"), color), paint(state, state_color(state), color));
    let mut facts = Table::new(&[]);
    for (label, key) in [("run", "run_id"), ("thread", "thread_id"), ("parent", "parent_task_id")] {
        if let Some(value) = task[key].as_str() {
            facts.row(vec![label.into(), value.into()]);
        }
    }
    facts.row(vec!["agent".into(), text(&task["agent"]).into()]);
    facts.row(vec!["requester".into(), text(&task["requester"]).into()]);
    let attempt = task["attempt"].as_u64().unwrap_or(0);
    let routings = task["routings"].as_u64().unwrap_or(0);
    facts.row(vec!["attempt".into(), format!("{attempt} (routed {routings}×)").into()]);
    facts.row(vec!["progress".into(), progress(&task["progress"]).into()]);
    let requires: Vec<&str> = task["requires"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !requires.is_empty() {
        facts.row(vec!["requires".into(), requires.join(", ").into()]);
    }
    if let Some(error) = task["error"].as_object() {
        let code = error.get("code").and_then(Value::as_str).unwrap_or("?");
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
        facts.row(vec!["error".into(), Cell::colored(format!("{code}: {message}"), Some("31"))]);
    }
    out.push_str(&facts.render(color));

    let history = task["history"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !history.is_empty() {
        out.push('\n');
        let mut timeline = Table::new(&["SEQ", "TIME", "TYPE", "FROM", "STATE"]);
        for step in history {
            let kind = text(&step["type"]);
            let state = text(&step["state"]);
            timeline.row(vec![
                step["seq"].as_u64().map_or_else(|| "?".to_owned(), |s| s.to_string()).into(),
                step["ts"].as_str().map_or("", render::clock).into(),
                Cell::colored(kind, Some(render::kind_color(kind))),
                text(&step["from"]).into(),
                Cell::colored(state, state_color(state)),
            ]);
        }
        out.push_str(&timeline.render(color));
    }
    out
}

/// A run's tasks drawn as a tree (`task_id  state  agent  progress`), then counts per state.
fn tree(answer: &Value, color: bool) -> String {
    let mut table = Table::new(&[]);
    for root in answer["tasks"].as_array().into_iter().flatten() {
        node(&mut table, root, "", "");
    }
    let mut out = table.render(color);

    let counts = answer["counts"].as_object();
    let count = |state: &str| counts.and_then(|c| c.get(state)).and_then(Value::as_u64).unwrap_or(0);
    let mut parts: Vec<String> = STATES
        .iter()
        .copied()
        .filter(|s| count(s) > 0)
        .map(|s| format!("{} {}", count(s), paint(s, state_color(s), color)))
        .collect();
    let others = counts.into_iter().flatten().filter(|(s, _)| !STATES.contains(&s.as_str()));
    parts.extend(others.map(|(s, n)| format!("{} {s}", n.as_u64().unwrap_or(0))));
    let total: u64 = counts.into_iter().flatten().filter_map(|(_, n)| n.as_u64()).sum();
    let plural = if total == 1 { "" } else { "s" };
    out.push_str(&format!("\n{total} task{plural}: {}", parts.join(", ")));
    if let Some(tokens) = answer.pointer("/usage/tokens").and_then(Value::as_u64) {
        out.push_str(&format!("; usage {tokens} tokens"));
    }
    if let Some(cost) = answer.pointer("/usage/cost_usd").and_then(Value::as_f64).filter(|c| *c > 0.0) {
        out.push_str(&format!(", ${cost:.2}"));
    }
    if answer["budget_exhausted"].as_bool() == Some(true) {
        out.push_str(&paint("; the run's budget is spent", Some("31"), color));
    }
    out.push('\n');
    out
}

/// Adds `task` as a row (after `lead`, its branch) and its children below it, like `tree` draws them.
fn node(table: &mut Table, task: &Value, lead: &str, children_lead: &str) {
    let state = text(&task["state"]);
    table.row(vec![
        format!("{lead}{}", text(&task["task_id"])).into(),
        Cell::colored(state, state_color(state)),
        text(&task["agent"]).into(),
        progress(&task["progress"]).into(),
    ]);
    let children = task["children"].as_array().map(Vec::as_slice).unwrap_or_default();
    for (i, child) in children.iter().enumerate() {
        let (branch, rest) = if i + 1 == children.len() { ("└── ", "    ") } else { ("├── ", "│   ") };
        node(table, child, &format!("{children_lead}{branch}"), &format!("{children_lead}{rest}"));
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("-")
}

/// The last reported progress in percent; `-` when none was.
fn progress(value: &Value) -> String {
    value.as_f64().map_or_else(|| "-".to_owned(), |p| format!("{p:.0}%"))
}

fn state_color(state: &str) -> Option<&'static str> {
    match state {
        "completed" => Some("32"),
        "failed" | "timed_out" => Some("31"),
        "cancelled" => Some("35"),
        "accepted" | "running" => Some("33"),
        "requested" | "queued" | "routed" | "retrying" => Some("36"),
        _ => None,
    }
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch tasks show task_01J...                  state, agent, attempts, error and history
  clutch runs tasks run_01J...                   every task of a run, as a tree";

const SHOW_EXAMPLES: &str = "EXAMPLES:
  clutch tasks show task_01J...
  clutch tasks show task_01J... --json | jq .history

  The history lists every event about the task (seq, time, type, sender) with the task's state
  after it. Exits 2 when no such task exists (tasks begin with a task.request).";

pub const RUN_TASKS_EXAMPLES: &str = "EXAMPLES:
  clutch runs tasks run_01J...
  clutch runs tasks run_01J... --json | jq .counts

  Each line is `task_id  state  agent  progress`, children under their parent_task_id; the last
  line counts the tasks per state and adds the run's usage. Exits 2 when the run has no task.";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_run_is_a_tree() {
        let leaf = |id: &str, state: &str, agent: Value, progress: Value| json!({"task_id": id, "state": state, "agent": agent, "progress": progress, "children": []});
        let mut parent = leaf("task_a", "running", json!("agent:ken"), json!(50.0));
        let mut middle = leaf("task_b", "completed", json!("agent:ken"), json!(100.0));
        middle["children"] = json!([leaf("task_d", "failed", json!("agent:tom"), json!(null))]);
        parent["children"] = json!([middle, leaf("task_c", "requested", json!(null), json!(null))]);
        let answer = json!({
            "run_id": "run_1", "tasks": [parent],
            "counts": {"completed": 1, "failed": 1, "requested": 1, "running": 1},
            "usage": {"tokens": 45, "cost_usd": 0.0, "requests": 0}, "budget_exhausted": false
        });
        assert_eq!(
            tree(&answer, false),
            "\
task_a          running    agent:ken  50%
├── task_b      completed  agent:ken  100%
│   └── task_d  failed     agent:tom  -
└── task_c      requested  -          -

4 tasks: 1 requested, 1 running, 1 completed, 1 failed; usage 45 tokens
"
        );
    }

    #[test]
    fn a_task_with_its_timeline() {
        let task = json!({
            "task_id": "task_a", "run_id": "run_1", "thread_id": "thr_1", "parent_task_id": null,
            "state": "failed", "agent": "agent:ken", "requester": "user:ada", "attempt": 3, "routings": 1,
            "progress": null, "requires": ["skill:research"],
            "error": {"code": "DELIVERY_FAILED", "message": "agent:ken did not accept the task"},
            "history": [
                {"seq": 4, "ts": "2026-04-01T12:00:00.100Z", "type": "task.request", "from": "user:ada", "state": "requested"},
                {"seq": 12, "ts": "2026-04-01T12:00:03.250Z", "type": "task.error", "from": "agent:orchestrator", "state": "failed"}
            ]
        });
        assert_eq!(
            show(&task, false),
            "\
task_a  failed
run        run_1
thread     thr_1
agent      agent:ken
requester  user:ada
attempt    3 (routed 1×)
progress   -
requires   skill:research
error      DELIVERY_FAILED: agent:ken did not accept the task

SEQ  TIME          TYPE          FROM                STATE
4    12:00:00.100  task.request  user:ada            requested
12   12:00:03.250  task.error    agent:orchestrator  failed
"
        );
    }
}
