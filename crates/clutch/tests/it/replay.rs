//! `clutch runs replay`: a run's events, in order, as lines or NDJSON.

use serde_json::Value;

use crate::support::{Daemon, clutch, message, post, run, run_id};

#[tokio::test]
async fn prints_a_runs_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let http = reqwest::Client::new();
    let (mine, other) = (run_id(), run_id());
    for i in 0..5 {
        post(&http, &daemon.url, &message(&mine, &format!("step {i}"))).await;
        post(&http, &daemon.url, &message(&other, "noise")).await;
    }

    let mut cmd = clutch();
    cmd.args(["runs", "replay", &mine, "--json", "--url", &daemon.url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let events: Vec<Value> = out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let texts: Vec<&str> = events.iter().map(|e| e["payload"]["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["step 0", "step 1", "step 2", "step 3", "step 4"]);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 3, 5, 7, 9]);

    let mut cmd = clutch();
    cmd.args(["runs", "replay", &mine, "--after", "5", "--url", &daemon.url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(lines[0].trim_start().starts_with("7 ") && lines[0].ends_with("step 3"), "{out:?}");

    let mut cmd = clutch();
    cmd.args(["runs", "replay", &run_id(), "--url", &daemon.url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(3), "an unknown run: {out:?}");
    assert!(out.stderr.contains("RUN_NOT_FOUND"), "{out:?}");
}
