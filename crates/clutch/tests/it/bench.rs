//! `clutch bench workflow` end to end, briefly: agents over each transport complete tasks, and the
//! bench's own check (every task completed exactly once, by its claimer, with its checkpoint) passes.
//! `clutch bench a2a` likewise, without the Python SDK's anchor: every A2A message answered with its
//! task completed. `clutch bench fanout` and `clutch bench clients` briefly: every message to every
//! subscriber in order; the SDK and lean clients measured side by side.

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

#[test]
fn bench_a2a_answers_every_message_with_a_completed_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.args(["bench", "a2a", "--no-sdk", "--calls", "20", "--clients", "4", "--duration", "1", "--dir"])
        .arg(dir.path());
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines = |label: &str| out.stdout.lines().filter(|l| l.trim_start().starts_with(label)).count();
    // A round trip and a throughput line each for the daemon and the axum ceiling; no SDK.
    assert_eq!((lines("clutch "), lines("axum "), lines("a2a-sdk ")), (3, 2, 0), "{out:?}");
    assert!(out.stdout.contains("the a2a-sdk not measured (--no-sdk)"), "{out:?}");
    // Each measurement of the daemon counted answered calls ("(N in S s)"); a machine loaded by the
    // other tests may slow them below one a second, but the bench exits non-zero on any answer
    // that is not a completed task.
    let counted: Vec<u64> = out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("clutch ") && l.contains("calls/s"))
        .filter_map(|l| {
            l.split('(').find_map(|part| part.split_once(" in ").and_then(|(n, _)| n.replace(',', "").parse().ok()))
        })
        .collect();
    assert!(counted.len() == 2 && counted.iter().all(|n| *n > 0), "{counted:?} {out:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{out:?}");
}

#[test]
fn bench_fanout_delivers_every_message_to_every_subscriber_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.args(["bench", "fanout", "--subscribers", "3", "--rate", "50", "--duration", "2", "--dir"])
        .arg(dir.path())
        .args(["--transports", "ws,sse"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    for transport in ["ws ", "sse "] {
        let line = out.stdout.lines().find(|l| l.trim_start().starts_with(transport)).unwrap_or_default();
        // 100 messages to each of 3 subscribers, none lost, repeated or out of order.
        assert!(line.contains("300/300 delivered, 0 lost, 0 out of order"), "{transport}: {out:?}");
        assert!(line.contains("µs/delivery"), "{out:?}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{out:?}");
}

#[test]
fn bench_clients_measures_the_sdk_beside_the_lean_client() {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/python");
    assert!(python.exists(), "{} is missing: run ./scripts/py-setup (the test command does)", python.display());
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.args(["bench", "clients", "--clients", "2", "--agents", "2", "--tasks", "6", "--duration", "1", "--python"])
        .arg(&python)
        .arg("--dir")
        .arg(dir.path());
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines = |label: &str| out.stdout.lines().filter(|l| l.trim_start().starts_with(label)).count();
    // Calls and workflow tasks each: lean, sdk http, lean paced (at the SDK's pace), sdk stdio;
    // "lean " counts the paced lines too.
    assert_eq!(
        (lines("lean "), lines("sdk http "), lines("sdk stdio "), lines("lean paced ")),
        (4, 2, 2, 2),
        "{out:?}"
    );
    // The bridges' CPU in the phase, and from their start to their exit.
    for unit in ["ms/call", "ms/task"] {
        let bridge = out.stdout.lines().filter(|l| l.contains("bridge ") && l.contains(unit)).count();
        assert_eq!(bridge, 1, "the bridge's CPU ({unit}): {out:?}");
    }
    assert!(out.stdout.contains("from start to exit"), "{out:?}");
    assert!(out.stdout.contains("per workflow task at the same pace"), "{out:?}");
    assert!(!out.stdout.contains(" 0 calls/s"), "{out:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{out:?}");
}

#[test]
fn bench_soak_reports_each_step_and_reads_ended_work_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.args(["bench", "soak", "--tasks", "3000", "--every", "1000", "--writers", "2", "--batch", "50"])
        .args(["--retention-ms", "0", "--dir"])
        .arg(dir.path());
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    // A line per 1,000 tasks (the last one at 3,000), each with the daemon's RSS.
    let steps =
        out.stdout.lines().filter(|l| l.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit())).count();
    assert!(steps >= 3, "{out:?}");
    assert!(out.stdout.lines().any(|l| l.trim_start().starts_with("3,000 ")), "{out:?}");
    assert!(out.stdout.contains("read back from the log; a late message about it refused"), "{out:?}");
    assert!(out.stdout.contains("after SIGKILL: ready in"), "{out:?}");
    assert!(out.stdout.contains("restart after SIGTERM: ready in"), "{out:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{out:?}");
}
