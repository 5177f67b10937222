//! How tasks look on a terminal, shared by `runs tasks`, `runs show` and `tasks show|inbox`: a run's
//! tasks drawn as a tree by parent task, and a task's state colour, progress and usage. It names no
//! command, so that every command that shows tasks can use it.

use clutch_core::view::{self, TaskState};

use crate::table::{Cell, Table, paint};

/// A run's tasks drawn as a tree (`task_id  state  agent  progress`), then counts per state.
pub fn tree(answer: &view::RunTasks, color: bool) -> String {
    let mut table = Table::new(&[]);
    for root in &answer.tasks {
        node(&mut table, root, "", "");
    }
    let mut out = table.render(color);

    let parts: Vec<String> = answer
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| format!("{n} {}", paint(s.as_str(), state_color(*s), color)))
        .collect();
    let total: u64 = answer.counts.values().sum();
    let plural = if total == 1 { "" } else { "s" };
    out.push_str(&format!("\n{total} task{plural}: {}", parts.join(", ")));
    if let Some(usage) = &answer.usage {
        out.push_str(&format!("; usage {}", usage_text(usage)));
    }
    if answer.budget_exhausted == Some(true) {
        out.push_str(&paint("; the run's budget is spent", Some("31"), color));
    }
    out.push('\n');
    out
}

/// Adds `task` as a row (after `lead`, its branch) and its children below it, like `tree` draws them.
fn node(table: &mut Table, task: &view::Task, lead: &str, children_lead: &str) {
    let id = match &task.name {
        Some(name) => format!("{lead}{} {name}", task.task_id),
        None => format!("{lead}{}", task.task_id),
    };
    table.row(vec![
        id.into(),
        Cell::colored(task.state.as_str(), state_color(task.state)),
        text(task.agent.as_deref()).into(),
        progress(task.progress).into(),
    ]);
    let children = task.children.as_deref().unwrap_or_default();
    for (i, child) in children.iter().enumerate() {
        let (branch, rest) = if i + 1 == children.len() { ("└── ", "    ") } else { ("├── ", "│   ") };
        node(table, child, &format!("{children_lead}{branch}"), &format!("{children_lead}{rest}"));
    }
}

/// `1,234 tokens, $0.0123, 3 requests, 12 s`: what is non-zero of it (tokens always).
pub fn usage_text(usage: &view::Usage) -> String {
    let mut parts = vec![format!("{} tokens", usage.tokens)];
    if usage.cost_usd > 0.0 {
        parts.push(format!("${:.4}", usage.cost_usd));
    }
    if usage.requests > 0 {
        parts.push(format!("{} requests", usage.requests));
    }
    if usage.wall_time_sec > 0 {
        parts.push(format!("{} s", usage.wall_time_sec));
    }
    parts.join(", ")
}

/// The text of a field that may be missing: `-` for none.
pub fn text(value: Option<&str>) -> &str {
    value.unwrap_or("-")
}

/// The last reported progress in percent; `-` when none was.
pub fn progress(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |p| format!("{p:.0}%"))
}

/// The ANSI colour of a task state: green done, red failed, magenta cancelled, yellow being
/// worked, cyan waiting for an agent; none for a plan or a blocked task.
pub fn state_color(state: TaskState) -> Option<&'static str> {
    match state {
        TaskState::Completed => Some("32"),
        TaskState::Failed | TaskState::TimedOut => Some("31"),
        TaskState::Cancelled => Some("35"),
        TaskState::Accepted | TaskState::Running | TaskState::Claimed | TaskState::InProgress => Some("33"),
        TaskState::Requested | TaskState::Queued | TaskState::Routed | TaskState::Retrying | TaskState::Pending => {
            Some("36")
        }
        TaskState::Planning | TaskState::Blocked => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn a_run_is_a_tree() {
        let leaf = |id: &str, state: &str, agent: Value, progress: Value| {
            json!({"task_id": id, "run_id": "run_1", "thread_id": "thr_1", "parent_task_id": null, "state": state,
                   "agent": agent, "requester": "user:ada", "progress": progress, "error": null, "children": []})
        };
        let mut parent = leaf("task_a", "running", json!("agent:ken"), json!(50.0));
        let mut middle = leaf("task_b", "completed", json!("agent:ken"), json!(100.0));
        middle["children"] = json!([leaf("task_d", "failed", json!("agent:tom"), json!(null))]);
        parent["children"] = json!([middle, leaf("task_c", "requested", json!(null), json!(null))]);
        let answer = json!({
            "run_id": "run_1", "tasks": [parent],
            "counts": {"completed": 1, "failed": 1, "requested": 1, "running": 1},
            "usage": {"tokens": 45, "cost_usd": 0.0, "requests": 0, "wall_time_sec": 0}, "budget_exhausted": false
        });
        assert_eq!(
            tree(&serde_json::from_value(answer).unwrap(), false),
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
    fn a_workflow_is_a_tree_of_named_tasks() {
        let answer = json!({
            "run_id": "run_w", "workflow_id": "run_w",
            "counts": {"pending": 1, "claimed": 0, "in_progress": 1, "completed": 0, "failed": 0, "blocked": 0},
            "tasks": [{
                "task_id": "task_r", "run_id": "run_w", "thread_id": "thr_w", "parent_task_id": null,
                "kind": "workflow", "name": "oauth", "state": "in_progress", "agent": null, "requester": "user:ada",
                "progress": null, "error": null,
                "children": [{
                    "task_id": "task_s", "run_id": "run_w", "thread_id": "thr_w", "parent_task_id": "task_r",
                    "kind": "workflow_task", "name": "setup", "state": "in_progress", "agent": "agent:ken",
                    "requester": "user:ada", "progress": null, "error": null
                }, {
                    "task_id": "task_g", "run_id": "run_w", "thread_id": "thr_w", "parent_task_id": "task_r",
                    "kind": "workflow_task", "name": "google", "state": "pending", "agent": null,
                    "requester": "user:ada", "progress": null, "error": null
                }]
            }]
        });
        assert_eq!(
            tree(&serde_json::from_value(answer).unwrap(), false),
            "\
task_r oauth       in_progress  -          -
├── task_s setup   in_progress  agent:ken  -
└── task_g google  pending      -          -

2 tasks: 1 pending, 1 in_progress
"
        );
    }
}
