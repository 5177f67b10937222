//! The crash test: under concurrent load the daemon is killed with SIGKILL; after a restart on the
//! same data every acknowledged message is there exactly once and the log's seqs are 1..N without a
//! gap. Runs on SQLite always and on PostgreSQL when `CLUTCH_TEST_PG_URL` is set (CI must set it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{DEADLINE, Daemon, FreshDatabase, all_events, clutch, message, pg_url, run_id};

const CLIENTS: usize = 8;
/// Kill after this many acknowledged messages, or after [`LOAD_TIME`], whichever comes first.
const KILL_AFTER_ACKS: usize = 3000;
const LOAD_TIME: Duration = Duration::from_millis(1500);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_appends_survive_sigkill_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    crash_and_check(&["--data-dir".to_owned(), data.display().to_string()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_appends_survive_sigkill_postgres() {
    let Some(url) = pg_url() else { return };
    let database = FreshDatabase::create(&url).await;
    crash_and_check(&["--db".to_owned(), database.url.clone()]).await;
}

/// Who acknowledged what: `(id, seq)` per acknowledged message.
type Acks = Arc<Mutex<Vec<(String, u64)>>>;

async fn crash_and_check(serve_args: &[String]) {
    let start = || {
        let mut cmd = clutch();
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).args(serve_args);
        Daemon::spawn(cmd)
    };
    let daemon = start();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let acks: Acks = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| tokio::spawn(load(http.clone(), daemon.url.clone(), n, acks.clone(), stop.clone())))
        .collect();

    // Poll (with a deadline) until the load is well under way, then pull the plug.
    let deadline = Instant::now() + DEADLINE;
    let mut first_ack = None;
    loop {
        let n = acks.lock().unwrap().len();
        if n > 0 && first_ack.is_none() {
            first_ack = Some(Instant::now());
        }
        if n >= KILL_AFTER_ACKS || first_ack.is_some_and(|t| t.elapsed() >= LOAD_TIME) {
            break;
        }
        assert!(Instant::now() < deadline, "no load within {DEADLINE:?}; daemon stderr:\n{}", daemon.stderr());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    daemon.kill();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        tokio::time::timeout(DEADLINE, client).await.expect("clients stop once the daemon is gone").unwrap();
    }
    let acks = acks.lock().unwrap().clone();
    eprintln!("crash test: {} acknowledged appends before SIGKILL", acks.len());

    let daemon = start();
    for (id, seq) in &acks {
        let response = http.get(format!("{}/v1/messages/{id}", daemon.url)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "acknowledged message {id} (seq {seq}) is lost");
        let event: Value = response.json().await.unwrap();
        assert_eq!(event["seq"].as_u64(), Some(*seq), "message {id} moved: {event}");
    }
    let events = all_events(&http, &daemon.url).await;
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert!(seqs == expected, "seqs are not 1..{} without gaps: {seqs:?}", events.len());
    let mut count: HashMap<&str, usize> = HashMap::new();
    for event in &events {
        *count.entry(event["id"].as_str().unwrap()).or_default() += 1;
    }
    assert!(count.values().all(|&n| n == 1), "an id is stored twice");
    for (id, _) in &acks {
        assert_eq!(count.get(id.as_str()), Some(&1), "acknowledged {id} is not in the log exactly once");
    }

    // The restarted log goes on where it stopped.
    let (status, ack) = crate::support::post(&http, &daemon.url, &message(&run_id(), "after")).await;
    assert_eq!(status, 201, "{ack}");
    assert_eq!(ack["seq"].as_u64(), Some(events.len() as u64 + 1), "{ack}");
    let (status, stderr) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
}

/// One client: single messages, and every fourth request a batch of 5, until the daemon is gone.
async fn load(http: reqwest::Client, url: String, client: usize, acks: Acks, stop: Arc<AtomicBool>) {
    let run = run_id();
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let body = if i % 4 == 3 {
            json!((0..5).map(|k| message(&run, &format!("client {client} request {i} item {k}"))).collect::<Vec<_>>())
        } else {
            message(&run, &format!("client {client} request {i}"))
        };
        let Ok(response) = http.post(format!("{url}/v1/messages")).json(&body).send().await else { return };
        if !response.status().is_success() {
            continue;
        }
        let Ok(answer) = response.json::<Value>().await else { return };
        let results = match answer.get("results").and_then(Value::as_array) {
            Some(results) => results.clone(),
            None => vec![answer],
        };
        let mut acks = acks.lock().unwrap();
        for result in results {
            if let (Some(id), Some(seq)) = (result["id"].as_str(), result["seq"].as_u64()) {
                acks.push((id.to_owned(), seq));
            }
        }
    }
}
