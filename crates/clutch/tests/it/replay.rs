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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_archives_an_old_run_that_replays_from_its_file_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    retention_round_trip(&[], dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_archives_an_old_run_that_replays_from_its_file_postgres() {
    let Some(url) = crate::support::pg_url() else { return };
    let database = crate::support::FreshDatabase::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    retention_round_trip(&["--db", &database.url], dir.path()).await;
}

/// A run last active long ago is listed by `runs prune --dry-run`, archived and removed by `runs
/// prune`, and its archive replays as the run did; a recent run stays, and `seq` goes on.
async fn retention_round_trip(db: &[&str], data: &std::path::Path) {
    let mut cmd = clutch();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(data).args(db);
    cmd.envs([("CLUTCH_RETENTION_AFTER", "30d"), ("CLUTCH_RETENTION_CHUNK", "2")]);
    let daemon = Daemon::spawn(cmd);
    let http = reqwest::Client::new();
    let (old, recent) = (run_id(), run_id());
    // As the log is written, in time order: the old run's messages (stamped years ago by their
    // client), then the recent run's.
    for i in 0..5 {
        let mut m = message(&old, &format!("old {i}"));
        m["ts"] = Value::from(format!("2020-01-0{}T10:00:00Z", i + 1));
        assert_eq!(post(&http, &daemon.url, &m).await.0, 201);
    }
    for _ in 0..5 {
        post(&http, &daemon.url, &message(&recent, "recent")).await;
    }
    let cli = |args: &[&str]| {
        let mut cmd = clutch();
        cmd.args(args).args(["--url", &daemon.url]);
        let out = run(cmd, "");
        assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
        out.stdout
    };
    let before = cli(&["runs", "replay", &old, "--json"]);
    assert_eq!(before.lines().count(), 5);

    let plan: Value = serde_json::from_str(&cli(&["runs", "prune", "--dry-run", "--json"])).unwrap();
    assert_eq!(plan["dry_run"], true);
    let listed: Vec<&str> = plan["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(listed, [old.as_str()], "{plan}");
    assert_eq!(plan["runs"][0]["events"], 5);
    assert_eq!(plan["runs"][0]["last_activity"], "2020-01-05T10:00:00Z");
    let table = cli(&["runs", "prune", "--dry-run"]);
    assert!(table.contains(&old) && table.contains("would remove 1 runs (5 events)"), "{table}");
    assert_eq!(cli(&["runs", "replay", &old, "--json"]), before, "a dry run changes nothing");

    let done: Value = serde_json::from_str(&cli(&["runs", "prune", "--json"])).unwrap();
    assert_eq!((done["dry_run"].as_bool(), done["runs_total"].as_u64()), (Some(false), Some(1)), "{done}");
    let archive = done["runs"][0]["archive"].as_str().unwrap().to_owned();
    assert!(archive.ends_with(&format!("2020-01-05/{old}.ndjson.gz")), "{archive}");

    let mut cmd = clutch();
    cmd.args(["runs", "replay", &old, "--url", &daemon.url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(3), "the run left the log: {out:?}");
    let mut cmd = clutch();
    cmd.args(["runs", "replay", "--json", "--file", &archive]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, before, "the archive replays as the run did");
    let mut cmd = clutch();
    cmd.args(["runs", "replay", "--after", "3", "--file", &archive]);
    let out = run(cmd, "");
    assert_eq!(out.stdout.lines().count(), 2, "{out:?}");
    assert!(out.stdout.lines().last().unwrap().ends_with("old 4"), "{out:?}");

    assert_eq!(cli(&["runs", "replay", &recent, "--json"]).lines().count(), 5, "a recent run stays");
    let (status, ack) = post(&http, &daemon.url, &message(&recent, "later")).await;
    assert_eq!(status, 201, "{ack}");
    assert_eq!(ack["seq"], 11, "seq goes on after the highest ever assigned: {ack}");
    let again: Value = serde_json::from_str(&cli(&["runs", "prune", "--json"])).unwrap();
    assert_eq!(again["runs_total"], 0, "{again}");
}
