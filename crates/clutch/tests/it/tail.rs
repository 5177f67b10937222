//! `clutch tail`: follows the live stream and prints events appended after it started.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{DEADLINE, Daemon, Spawned, clutch, lines, message, post, run_id};

/// `clutch ARGS` with its stdout and stderr piped, killed when dropped.
fn tail(args: &[&str]) -> Spawned {
    Spawned(clutch().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap())
}

#[tokio::test]
async fn json_tail_receives_events_appended_after_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let http = reqwest::Client::new();
    let run = run_id();
    // Before the tail starts: not to be printed.
    let (status, _) = post(&http, &daemon.url, &message(&run, "old")).await;
    assert_eq!(status, 201);

    let mut child = tail(&["tail", "--json", "--run", &run, "--url", &daemon.url]);
    let stdout = lines(child.0.stdout.take().unwrap());
    let stderr = lines(child.0.stderr.take().unwrap());
    let following = stderr.recv_timeout(DEADLINE).expect("tail says it is following");
    assert!(following.contains("following"), "{following}");

    // Another run's event must be filtered out.
    post(&http, &daemon.url, &message(&run_id(), "elsewhere")).await;
    for text in ["a", "b", "c"] {
        let (status, ack) = post(&http, &daemon.url, &message(&run, text)).await;
        assert_eq!(status, 201, "{ack}");
    }
    let deadline = Instant::now() + DEADLINE;
    let mut got = Vec::new();
    while got.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = stdout.recv_timeout(left).unwrap_or_else(|_| panic!("3 events within {DEADLINE:?}; got {got:?}"));
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("NDJSON line {line:?}: {e}"));
        got.push(event);
    }
    let texts: Vec<&str> = got.iter().map(|e| e["payload"]["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["a", "b", "c"]);
    let seqs: Vec<u64> = got.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert!(stdout.recv_timeout(Duration::from_millis(200)).is_err(), "nothing else is printed");
}

#[tokio::test]
async fn human_tail_from_the_start_and_resumes_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let http = reqwest::Client::new();
    let run = run_id();
    post(&http, &daemon.url, &message(&run, "first")).await;

    let mut child = tail(&["tail", "--after", "0", "--url", &daemon.url]);
    let stdout = lines(child.0.stdout.take().unwrap());
    let stderr = lines(child.0.stderr.take().unwrap());
    let line = stdout.recv_timeout(DEADLINE).expect("the first event");
    assert!(
        line.contains("chat.message") && line.contains("user:test → agent:ken") && line.ends_with("first"),
        "{line}"
    );
    assert!(line.trim_start().starts_with("1 "), "{line}");

    // The daemon restarts on the same port: the tail says so, reconnects and goes on after seq 1.
    let addr = daemon.url.trim_start_matches("http://").to_owned();
    let (status, daemon_log) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "the daemon's stderr:\n{daemon_log}");
    let mut cmd = clutch();
    cmd.args(["serve", "--listen", &addr, "--data-dir"]).arg(dir.path());
    let daemon = Daemon::spawn(cmd);
    // A new client: the old one's pooled connection died with the first daemon.
    let http = reqwest::Client::new();
    post(&http, &daemon.url, &message(&run, "second")).await;
    let line = stdout.recv_timeout(DEADLINE).expect("the event after the restart");
    assert!(line.trim_start().starts_with("2 ") && line.ends_with("second"), "{line}");
    let notes: Vec<String> = stderr.try_iter().collect();
    assert!(notes.iter().any(|n| n.contains("shutting down")), "{notes:?}");
}

#[tokio::test]
async fn a_closed_stdout_ends_the_tail_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let http = reqwest::Client::new();
    let run = run_id();
    post(&http, &daemon.url, &message(&run, "first")).await;

    // Like `clutch tail | head -1`: the reader takes one line and goes away.
    let mut child = tail(&["tail", "--after", "0", "--json", "--url", &daemon.url]);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, first) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        drop(reader);
        let _ = tx.send(line);
    });
    let stderr = crate::support::drain(child.0.stderr.take().unwrap());
    let line = first.recv_timeout(DEADLINE).expect("the first event");
    assert!(line.contains("first"), "{line}");

    post(&http, &daemon.url, &message(&run, "second")).await;
    let status = crate::support::wait(&mut child.0, DEADLINE).expect("tail exits once its reader is gone");
    let stderr = stderr.join().unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(!stderr.contains("pipe") && !stderr.contains("panicked"), "quietly: {stderr}");
}
