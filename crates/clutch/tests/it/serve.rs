//! `clutch serve`: zero-config start, health, refusal to expose itself, and a clean stop on SIGTERM
//! that ends live streams and keeps every event for the next start.

use std::time::Duration;

use futures_util::StreamExt;

use crate::support::{Daemon, FreshDatabase, clutch, message, pg_url, post, run, run_id};

#[tokio::test]
async fn starts_without_config_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]);
    let daemon = Daemon::spawn(cmd);
    assert!(dir.path().join(".clutch").is_dir(), "serve creates ./.clutch");

    let http = reqwest::Client::new();
    let health: serde_json::Value =
        http.get(format!("{}/healthz", daemon.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");

    let (status, ack) = post(&http, &daemon.url, &message(&run_id(), "before the restart")).await;
    assert_eq!(status, 201, "{ack}");
    let id = ack["id"].as_str().unwrap().to_owned();

    // A live stream is open when the signal comes: it must end, not hold the shutdown up.
    let mut stream = http
        .get(format!("{}/v1/stream", daemon.url))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
        .bytes_stream();

    let (status, stderr) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("stopped"), "stderr:\n{stderr}");
    let mut seen = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(chunk)) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream did not end after SIGTERM; got {seen:?}");
    assert!(seen.contains("event: end") && seen.contains("shutdown"), "no shutdown frame: {seen:?}");

    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]);
    let daemon = Daemon::spawn(cmd);
    let event: serde_json::Value =
        http.get(format!("{}/v1/messages/{id}", daemon.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(event["payload"]["text"], "before the restart", "{event}");
    assert_eq!(event["seq"], 1, "{event}");
}

#[test]
fn refuses_to_expose_an_unauthenticated_api() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "0.0.0.0:0"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("would expose the API without authentication"), "{out:?}");
    assert!(out.stderr.contains("configure API tokens in org.yaml"), "{out:?}");
    assert!(!dir.path().join(".clutch").exists(), "nothing opened before the refusal");
}

#[test]
fn a_bad_store_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0", "--db"]).arg(&file);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("cannot open the SQLite store"), "{out:?}");
}

#[tokio::test]
async fn a_second_daemon_on_one_postgres_database_refuses_to_start_and_says_why() {
    let Some(url) = pg_url() else { return };
    let database = FreshDatabase::create(&url).await;
    let db = database.url.clone();
    let serve = move || {
        let mut cmd = clutch();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--db"]).arg(&db);
        cmd
    };
    let first = Daemon::spawn(serve());
    let second = serve.clone();
    let out = tokio::task::spawn_blocking(move || run(second(), "")).await.unwrap();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("another Clutch daemon is already serving schema `public`"), "{out:?}");
    assert!(out.stderr.contains("not supported yet"), "{out:?}");
    // The first one serves on, and once it stops the database is free again.
    let http = reqwest::Client::new();
    let (status, _) = post(&http, &first.url, &message(&run_id(), "still here")).await;
    assert_eq!(status, 201);
    let (status, stderr) = first.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let again = Daemon::spawn(serve());
    let (status, stderr) = again.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
}
