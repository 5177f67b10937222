//! `clutch bench workflow` end to end, briefly: agents over each transport complete tasks, and the
//! bench's own check (every task completed exactly once, by its claimer, with its checkpoint) passes.

use crate::support::{clutch, run};

fn workflow(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.args(["bench", "workflow", "--duration", "1", "--agents", "4", "--plan-size", "16", "--dir"])
        .arg(dir.path())
        .args(args);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let check = out.stdout.lines().find(|l| l.trim_start().starts_with("check")).unwrap_or_default();
    assert!(check.contains("each exactly once") && check.contains(" 0 held"), "{out:?}");
    let clutch = out.stdout.lines().find(|l| l.trim_start().starts_with("clutch")).unwrap_or_default();
    assert!(clutch.contains("tasks/s") && !clutch.contains(" 0 tasks/s"), "{out:?}");
    // The store of the run is removed; the directory is left empty.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{out:?}");
}

#[test]
fn bench_workflow_over_mcp_completes_every_task_once() {
    workflow(&["--transport", "mcp"]);
}

#[test]
fn bench_workflow_over_http_with_next_tasks_completes_every_task_once() {
    workflow(&["--transport", "http", "--claims", "next"]);
}

#[test]
fn bench_workflow_in_process_completes_every_task_once() {
    workflow(&["--transport", "core"]);
}
