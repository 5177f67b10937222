//! `clutch tasks show` and `clutch runs tasks` on tasks the daemon really routed: an agent registers,
//! a parent and a child task are requested of `agent:orchestrator`, and the agent (played over HTTP)
//! accepts and reports on them.

use std::collections::BTreeMap;
use std::time::Duration;

use clutch_core::view::{self, TaskState};
use clutch_proto::id::{Kind, generate};
use serde_json::{Value, json};

use crate::support::{Daemon, Output, clutch, post, run, run_id, stream_until};

fn cli(daemon: &Daemon, args: &[&str]) -> Output {
    let mut cmd = clutch();
    cmd.args(args).args(["--url", &daemon.url]);
    run(cmd, "")
}

/// A `task.request` from `user:ada` for the router.
fn request(run: &str, thread: &str, task: &str, parent: Option<&str>) -> Value {
    json!({
        "run_id": run, "thread_id": thread, "task_id": task, "parent_task_id": parent,
        "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": "task.request", "requires": ["skill:research@^1"], "payload": {"goal": "look it up"},
    })
}

/// What `agent:ken` says about a task it was delivered.
fn answer(delivery: &Value, kind: &str, payload: Value) -> Value {
    json!({
        "run_id": delivery["run_id"], "thread_id": delivery["thread_id"], "task_id": delivery["task_id"],
        "from": {"agent_id": "agent:ken"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": kind, "payload": payload, "attempt": delivery["attempt"],
    })
}

#[tokio::test]
async fn a_routed_task_and_its_run_tree() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let http = reqwest::Client::new();
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:ken",
        "capabilities": [{"id": "skill:research", "version": "1.2.0"}], "limits": {"max_concurrency": 4}});
    let response = http.post(format!("{}/v1/agents", daemon.url)).json(&card).send().await.unwrap();
    assert_eq!(response.status(), 201);

    let (run_id, thread) = (run_id(), generate(Kind::Thread));
    let (parent, child) = (generate(Kind::Task), generate(Kind::Task));
    for body in [request(&run_id, &thread, &parent, None), request(&run_id, &thread, &child, Some(&parent))] {
        let (status, ack) = post(&http, &daemon.url, &body).await;
        assert_eq!(status, 201, "{ack}");
    }
    let delivered = |e: &Value| e["type"] == "task.request" && e["from"]["agent_id"] == "agent:orchestrator";
    let events = stream_until(&daemon.url, &[("to", "agent:ken")], Duration::from_secs(15), |events| {
        events.iter().filter(|e| delivered(e)).count() == 2
    })
    .await;
    let delivery = |task: &str| events.iter().find(|e| delivered(e) && e["task_id"] == task).unwrap().clone();
    let (to_parent, to_child) = (delivery(&parent), delivery(&child));

    // The parent is done; the child is half-way.
    let steps = [
        answer(&to_parent, "task.accept", json!({})),
        answer(&to_parent, "task.progress", json!({"percent": 50, "usage": {"tokens": 10}})),
        answer(&to_parent, "task.result", json!({"text": "found it", "usage": {"tokens": 5}})),
        answer(&to_child, "task.accept", json!({})),
        answer(&to_child, "task.progress", json!({"percent": 40, "usage": {"tokens": 7}})),
    ];
    for step in &steps {
        let (status, ack) = post(&http, &daemon.url, step).await;
        assert_eq!(status, 201, "{step}: {ack}");
    }

    let out = cli(&daemon, &["tasks", "show", &parent]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let (facts, timeline) = out.stdout.split_once("\n\n").expect("facts, a blank line, the timeline");
    assert_eq!(
        facts.lines().collect::<Vec<_>>(),
        [
            format!("{parent}  completed"),
            format!("run        {run_id}"),
            format!("thread     {thread}"),
            "agent      agent:ken".into(),
            "requester  user:ada".into(),
            "attempt    1 (routed 1×)".into(),
            "progress   100%".into(),
            "requires   skill:research@^1".into(),
            "usage      15 tokens".into(),
        ],
        "{out:?}"
    );
    let rows: Vec<Vec<&str>> = timeline.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["SEQ", "TIME", "TYPE", "FROM", "STATE"], "{out:?}");
    let steps: Vec<[&str; 3]> = rows[1..].iter().map(|r| [r[2], r[3], r[4]]).collect();
    assert_eq!(
        steps,
        [
            ["task.request", "user:ada", "requested"],
            ["routing.decision", "agent:orchestrator", "requested"],
            ["task.request", "agent:orchestrator", "routed"],
            ["task.accept", "agent:ken", "accepted"],
            ["task.progress", "agent:ken", "running"],
            ["task.result", "agent:ken", "completed"],
        ],
        "{out:?}"
    );
    let seqs: Vec<u64> = rows[1..].iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(seqs.is_sorted(), "{out:?}");

    let out = cli(&daemon, &["tasks", "show", &child, "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let task: view::Task = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        (task.state, task.parent_task_id.as_deref(), task.progress),
        (TaskState::Running, Some(parent.as_str()), Some(40.0))
    );
    assert_eq!(task.usage.map(|u| (u.tokens, u.cost_usd, u.requests)), Some((7, 0.0, 0)), "{out:?}");

    let out = cli(&daemon, &["runs", "tasks", &run_id]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout,
        format!(
            "{parent}      completed  agent:ken  100%\n└── {child}  running    agent:ken  40%\n\n\
             2 tasks: 1 running, 1 completed; usage 22 tokens\n"
        ),
        "{out:?}"
    );
    let out = cli(&daemon, &["runs", "tasks", &run_id, "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let tree: view::RunTasks = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(tree.counts, BTreeMap::from([(TaskState::Completed, 1), (TaskState::Running, 1)]));
    assert_eq!(tree.tasks[0].children.as_ref().unwrap()[0].task_id, child);
    let tokens = |t: &view::Task| t.usage.map(|u| u.tokens);
    assert_eq!((tokens(&tree.tasks[0]), tokens(&tree.tasks[0].children.as_ref().unwrap()[0])), (Some(15), Some(7)));
}

#[test]
fn unknown_tasks_and_runs_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let task = generate(Kind::Task);
    let out = cli(&daemon, &["tasks", "show", &task]);
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stderr.contains(&format!("TASK_NOT_FOUND: no task `{task}`")), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");

    let run = run_id();
    let out = cli(&daemon, &["runs", "tasks", &run]);
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stderr.contains(&format!("RUN_NOT_FOUND: run `{run}` has no task")), "{out:?}");
}
