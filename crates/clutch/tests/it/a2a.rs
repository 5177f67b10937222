//! `clutch a2a card|send` against the real daemon's A2A face: the card described, a message sent to
//! the skill of an agent that works its inbox over HTTP, answered blocking and followed as a stream;
//! a task that fails said with exit 1.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Daemon, clutch, run};

/// `agent:kim` (skill:answer) answers every task in its inbox with "42: GOAL", over HTTP.
async fn kim(url: String) {
    let http = reqwest::Client::new();
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:kim", "capabilities": [{"id": "skill:answer", "version": "1.0.0"}]});
    assert!(http.post(format!("{url}/v1/agents")).json(&card).send().await.unwrap().status().is_success());
    loop {
        let Ok(r) = http.get(format!("{url}/v1/inbox/agent:kim?wait_seconds=5")).send().await else { return };
        let Ok(inbox) = r.json::<Value>().await else { return };
        for item in inbox["tasks"].as_array().into_iter().flatten() {
            let task = item["task"]["task_id"].as_str().unwrap();
            let text = format!("42: {}", item["request"]["goal"].as_str().unwrap_or_default());
            let reply = json!({"agent_id": "agent:kim", "status": "completed", "text": text});
            let _ = http.post(format!("{url}/v1/tasks/{task}/reply")).json(&reply).send().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reads_a_card_sends_a_message_and_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let url = daemon.url.clone();
    let worker = tokio::spawn(kim(url.clone()));
    // Until kim is registered (its skill on the card).
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while http.get(format!("{url}/v1/agents/agent:kim")).send().await.unwrap().status() != 200 {
        assert!(std::time::Instant::now() < deadline, "kim did not register");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cli = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let mut cmd = clutch();
            cmd.args(&args);
            run(cmd, "")
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let out = cli(args(&["a2a", "card", &url])).await.unwrap();
    assert_eq!(out.code, Some(0), "{out:?}");
    for part in ["Clutch", "JSONRPC 1.0", "JSONRPC 0.3", "streaming: yes", "skill:answer"] {
        assert!(out.stdout.contains(part), "{part}: {out:?}");
    }

    let out = cli(args(&["a2a", "send", &url, "--skill", "skill:answer", "6 × 7?"])).await.unwrap();
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("task_") && lines[0].ends_with("  completed"), "{out:?}");
    assert_eq!(lines[1], "42: 6 × 7?");

    let out = cli(args(&["a2a", "send", &url, "--skill", "skill:answer", "--follow", "and 6 × 8?"])).await.unwrap();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("42: and 6 × 8?"), "{out:?}");
    assert_eq!(out.stdout.lines().last(), Some("completed"), "the stream ends with the final status: {out:?}");

    // A message no agent can take fails its task, said; an unreachable agent is an error.
    let out = cli(args(&["a2a", "send", &url, "--skill", "skill:juggling", "x"])).await.unwrap();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.lines().next().unwrap().ends_with("  failed"), "{out:?}");
    assert!(out.stderr.contains("the task ended failed"), "{out:?}");
    let out = cli(args(&["a2a", "card", "http://127.0.0.1:9"])).await.unwrap();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("cannot reach"), "{out:?}");
    worker.abort();
}
