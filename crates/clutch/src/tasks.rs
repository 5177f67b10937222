//! `clutch tasks show` and `clutch runs tasks`: a task's state and history as a timeline, and a
//! run's tasks as a tree by `parent_task_id`, read from `/v1/tasks/{id}` and `/v1/runs/{id}/tasks`;
//! `clutch tasks inbox|reply`: a person (or an agent by hand) works the tasks sent to it. (`clutch
//! tasks list` is in `lists`; the tree is drawn by `task_tree`.)

use clap::{Args, Subcommand};
use clutch_core::view::{self, TaskKind};
use serde_json::{Value, json};

use crate::args::ClientArgs;
use crate::client::{Client, path_segment, typed};
use crate::render;
use crate::table::{Cell, Table, paint};
use crate::task_tree::{progress, state_color, text, tree, usage_text};

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List tasks by last activity, newest first: state, agent, title; filter by state, agent,
    /// capability, run, workflow, parent or thread.
    #[command(after_help = crate::lists::TASKS_LIST_EXAMPLES)]
    List(crate::lists::TasksListArgs),
    /// Show a task: state, agent, attempts, error, and its history as a timeline.
    #[command(after_help = SHOW_EXAMPLES)]
    Show(ShowArgs),
    /// The tasks sent to an agent or a person that it has not finished (its turns in a position's
    /// session, say), oldest first; --wait waits for one.
    #[command(after_help = INBOX_EXAMPLES)]
    Inbox(InboxArgs),
    /// Reply to a task from an inbox: accept it, answer it (completed) or fail it.
    #[command(after_help = REPLY_EXAMPLES)]
    Reply(ReplyArgs),
}

const INBOX_EXAMPLES: &str = "Examples:
  clutch tasks inbox user:ada
  clutch tasks inbox agent:kim --wait 30 --json";

const REPLY_EXAMPLES: &str = "Examples:
  clutch tasks reply task_01J... --as user:ada --text \"42, and here is why...\"
  clutch tasks reply task_01J... --as user:ada --accept
  clutch tasks reply task_01J... --as user:ada --fail \"I cannot read that file\" --retryable";

#[derive(Debug, Args)]
pub struct InboxArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Whose inbox: `user:NAME` or an agent id.
    #[arg(value_name = "ID")]
    pub who: String,
    /// Wait up to this many seconds (at most 60) for a task when there is none.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("reply").required(true).args(["text", "accept", "fail"])))]
pub struct ReplyArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The task.
    #[arg(value_name = "TASK_ID")]
    pub task: String,
    /// Who replies: the task's holder (`user:NAME` or an agent id; default: the token's agent).
    #[arg(long = "as", value_name = "ID")]
    pub who: Option<String>,
    /// Complete it with this answer (`-` reads it from stdin, `@PATH` from a file).
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// Only accept it: you are on it.
    #[arg(long)]
    pub accept: bool,
    /// Fail it, saying why.
    #[arg(long, value_name = "WHY")]
    pub fail: Option<String>,
    /// With --fail: another try could succeed.
    #[arg(long, requires = "fail")]
    pub retryable: bool,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
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
        TasksCommand::List(args) => crate::lists::tasks(args).await,
        TasksCommand::Show(args) => {
            let client = Client::connect(&args.client)?;
            let task: Value = client.json(client.get(&format!("/v1/tasks/{}", path_segment(&args.task)))).await?;
            if args.json {
                return render::print(&format!("{task}\n"));
            }
            render::print(&show(&typed(task)?, render::stdout_color()))
        }
        TasksCommand::Inbox(args) => {
            let client = Client::connect(&args.client)?;
            let path = format!("/v1/inbox/{}?wait_seconds={}", path_segment(&args.who), args.wait);
            let inbox: Value = client.json(client.get(&path)).await?;
            if args.json {
                return render::print(&format!("{inbox}\n"));
            }
            render::print(&inbox_table(&typed(inbox)?, render::stdout_color()))
        }
        TasksCommand::Reply(args) => {
            let client = Client::connect(&args.client)?;
            let mut body = match (&args.text, &args.fail) {
                (Some(text), _) => json!({"status": "completed", "text": crate::input::text_arg(text)?}),
                (None, Some(why)) => json!({"status": "failed", "error": why, "retryable": args.retryable}),
                (None, None) => json!({"status": "accepted"}),
            };
            if let Some(who) = &args.who {
                body["agent_id"] = json!(who);
            }
            let path = format!("/v1/tasks/{}/reply", path_segment(&args.task));
            let task: Value = client.json(client.post(&path).json(&body)).await?;
            if args.json {
                return render::print(&format!("{task}\n"));
            }
            let task: view::Task = typed(task)?;
            render::print(&format!("{}  {}\n", task.task_id, task.state.as_str()))
        }
    }
}

/// An inbox as a table: `TASK  STATE  FROM  SESSION  GOAL`, oldest first.
fn inbox_table(inbox: &view::Inbox, color: bool) -> String {
    if inbox.tasks.is_empty() {
        return format!("nothing waits for {}\n", inbox.agent_id);
    }
    let mut table = Table::new(&["TASK", "STATE", "FROM", "SESSION", "GOAL"]);
    for item in &inbox.tasks {
        let goal = item.request.get("goal").and_then(Value::as_str).unwrap_or("");
        let goal: String = goal.lines().next().unwrap_or("").chars().take(80).collect();
        table.row(vec![
            item.task.task_id.as_str().into(),
            Cell::colored(item.task.state.as_str(), state_color(item.task.state)),
            text(item.task.requester.as_deref()).into(),
            text(item.session_id.as_deref()).into(),
            goal.into(),
        ]);
    }
    table.render(color)
}

pub async fn run_tree(args: RunTasksArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let answer: Value = client.json(client.get(&format!("/v1/runs/{}/tasks", path_segment(&args.run)))).await?;
    if args.json {
        return render::print(&format!("{answer}\n"));
    }
    render::print(&tree(&typed(answer)?, render::stdout_color()))
}

/// A task: its facts, then its history as a table.
fn show(task: &view::Task, color: bool) -> String {
    let state = task.state.as_str();
    let mut out =
        format!("{}  {}", paint(&task.task_id, Some("1"), color), paint(state, state_color(task.state), color));
    if let Some(name) = &task.name {
        out.push_str(&format!("  {name}"));
    }
    out.push('\n');
    let mut facts = Table::new(&[]);
    for (label, value) in
        [("run", Some(&task.run_id)), ("thread", Some(&task.thread_id)), ("parent", task.parent_task_id.as_ref())]
    {
        if let Some(value) = value {
            facts.row(vec![label.into(), value.as_str().into()]);
        }
    }
    facts.row(vec!["agent".into(), text(task.agent.as_deref()).into()]);
    facts.row(vec!["requester".into(), text(task.requester.as_deref()).into()]);
    if task.kind == TaskKind::Routed {
        facts.row(vec!["attempt".into(), format!("{} (routed {}×)", task.attempt, task.routings).into()]);
        facts.row(vec!["progress".into(), progress(task.progress).into()]);
    }
    if !task.requires.is_empty() {
        facts.row(vec!["requires".into(), task.requires.join(", ").into()]);
    }
    if let Some(usage) = &task.usage {
        facts.row(vec!["usage".into(), usage_text(usage).into()]);
    }
    if let Some(error) = &task.error {
        facts.row(vec!["error".into(), Cell::colored(format!("{}: {}", error.code, error.message), Some("31"))]);
    }
    out.push_str(&facts.render(color));

    let history = task.history.as_deref().unwrap_or_default();
    if !history.is_empty() {
        out.push('\n');
        let mut timeline = Table::new(&["SEQ", "TIME", "TYPE", "FROM", "STATE"]);
        for step in history {
            let kind = step.kind.as_str();
            timeline.row(vec![
                step.seq.to_string().into(),
                render::clock(&step.ts).into(),
                Cell::colored(kind, Some(render::kind_color(kind))),
                step.from.as_str().into(),
                Cell::colored(step.state.as_str(), state_color(step.state)),
            ]);
        }
        out.push_str(&timeline.render(color));
    }
    out
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch tasks list --state failed               failed tasks, last active first
  clutch tasks show task_01J...                  state, agent, attempts, error and history
  clutch runs tasks run_01J...                   every task of a run, as a tree";

const SHOW_EXAMPLES: &str = "EXAMPLES:
  clutch tasks show task_01J...
  clutch tasks show task_01J... --json | jq .history

  The history lists every event about the task (seq, time, type, sender) with the task's state
  after it. Exits 3 when no such task exists (tasks begin with a task.request).";

pub const RUN_TASKS_EXAMPLES: &str = "EXAMPLES:
  clutch runs tasks run_01J...
  clutch runs tasks run_01J... --json | jq .counts

  Each line is `task_id  state  agent  progress`, children under their parent_task_id; the last
  line counts the tasks per state and adds the run's usage. Exits 3 when the run has no task.";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_task_with_its_timeline() {
        let task = json!({
            "task_id": "task_a", "run_id": "run_1", "thread_id": "thr_1", "parent_task_id": null,
            "state": "failed", "agent": "agent:ken", "requester": "user:ada", "attempt": 3, "routings": 1,
            "progress": null, "requires": ["skill:research"],
            "error": {"code": "DELIVERY_FAILED", "message": "agent:ken did not accept the task"},
            "history": [
                {"seq": 4, "id": "msg_1", "ts": "2026-04-01T12:00:00.100Z", "type": "task.request", "from": "user:ada", "state": "requested"},
                {"seq": 12, "id": "msg_2", "ts": "2026-04-01T12:00:03.250Z", "type": "task.error", "from": "agent:orchestrator", "state": "failed"}
            ]
        });
        assert_eq!(
            show(&typed(task).unwrap(), false),
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
