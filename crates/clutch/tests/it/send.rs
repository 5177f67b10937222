//! `clutch send`: from flags, from stdin JSON (one message or an array), and refusals that name the
//! bad field and exit 1.

use serde_json::{Value, json};

use crate::support::{Daemon, clutch, message, run, run_id};

fn send(daemon: &Daemon, args: &[&str], stdin: &str) -> crate::support::Output {
    let mut cmd = clutch();
    cmd.arg("send").args(["--url", &daemon.url]).args(args);
    run(cmd, stdin)
}

#[tokio::test]
async fn from_flags() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let run_id = run_id();
    let out = send(
        &daemon,
        &[
            "--type",
            "task.request",
            "--from",
            "user:ada",
            "--to",
            "agent:ken",
            "--to",
            "group:reviewers",
            "--run",
            &run_id,
            "--payload",
            r#"{"goal": "summarise"}"#,
            "--requires",
            "skill:research@^1.2",
            "--idempotency-key",
            "job-1",
        ],
        "",
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let ack: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON answer on stdout");
    assert_eq!(ack["seq"], 1, "{ack}");
    assert_eq!(ack["duplicate"], false, "{ack}");

    let id = ack["id"].as_str().unwrap();
    let event: Value = reqwest::get(format!("{}/v1/messages/{id}", daemon.url)).await.unwrap().json().await.unwrap();
    assert_eq!(event["type"], "task.request");
    assert_eq!(event["run_id"], run_id.as_str());
    assert_eq!(event["from"]["agent_id"], "user:ada");
    assert_eq!(event["to"], json!([{"agent_id": "agent:ken"}, {"agent_id": "group:reviewers"}]));
    assert_eq!(event["payload"], json!({"goal": "summarise"}));
    assert_eq!(event["requires"], json!(["skill:research@^1.2"]));
    assert!(event["thread_id"].as_str().unwrap().starts_with("thr_"), "generated thread: {event}");

    // The same command again is a duplicate, which is no failure.
    let again = send(
        &daemon,
        &["--type", "task.request", "--from", "user:ada", "--run", &run_id, "--idempotency-key", "job-1"],
        "",
    );
    assert_eq!(again.code, Some(0), "{again:?}");
    let ack: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    assert_eq!((ack["duplicate"].clone(), ack["seq"].clone()), (json!(true), json!(1)), "{ack}");

    // --text is the short form of a text payload, and chat.message the default type.
    let out = send(&daemon, &["--from", "user:ada", "--text", "hello"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[tokio::test]
async fn from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let run_id = run_id();

    let out = send(&daemon, &["-"], &message(&run_id, "one").to_string());
    assert_eq!(out.code, Some(0), "{out:?}");
    let ack: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(ack["seq"], 1, "{ack}");

    let batch = json!([message(&run_id, "two"), message(&run_id, "three")]);
    let out = send(&daemon, &["--file", "-"], &batch.to_string());
    assert_eq!(out.code, Some(0), "{out:?}");
    let answer: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let seqs: Vec<&Value> = answer["results"].as_array().unwrap().iter().map(|r| &r["seq"]).collect();
    assert_eq!(seqs, [&json!(2), &json!(3)], "{answer}");

    let path = dir.path().join("message.json");
    std::fs::write(&path, message(&run_id, "four").to_string()).unwrap();
    let out = send(&daemon, &[path.to_str().unwrap()], "");
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[tokio::test]
async fn refusals_name_the_field_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());

    let out = send(&daemon, &["--from", "user:ada", "--to", "ken", "--text", "hi"], "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("VALIDATION_FAILED") && out.stderr.contains("to[0].agent_id"), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");

    let mut bad = message(&run_id(), "x");
    bad["from"] = json!({"agent_id": "nobody"});
    let out = send(&daemon, &["-"], &bad.to_string());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("from.agent_id"), "{out:?}");

    // In a batch the good message is stored, the bad one named, and the exit code says so.
    let batch = json!([message(&run_id(), "fine"), bad]);
    let out = send(&daemon, &["-"], &batch.to_string());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("message [1]") && out.stderr.contains("from.agent_id"), "{out:?}");

    let out = send(&daemon, &["-"], "{not json");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("stdin is not valid JSON"), "{out:?}");
}

/// An idempotency key is scoped to its run, and a send without `--run` is a new run each time: the
/// key could never repeat, so it needs `--run` (a usage error, exit code 2, nothing sent).
#[test]
fn an_idempotency_key_needs_a_run() {
    let mut cmd = clutch();
    cmd.args(["send", "--url", "http://127.0.0.1:9", "--from", "user:ada", "--text", "x", "--idempotency-key", "k"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--run <RUN_ID>"), "{out:?}");
}
