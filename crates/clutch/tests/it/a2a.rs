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

/// A free port on 127.0.0.1 (bound, then let go), for a daemon that must come back at the same URL.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn serve_at(dir: &std::path::Path, port: u16) -> Daemon {
    let mut cmd = clutch();
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"]).arg(dir);
    Daemon::spawn(cmd)
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> Option<Value>) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = done().await {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hubs_survive_a_kill_9_of_the_remote_hub_mid_task() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let port = free_port();
    let b = serve_at(dir_b.path(), port);
    let a = Daemon::start_with(dir_a.path(), &[("CLUTCH_OUTBOUND_ALLOW_LOOPBACK", "true")]);
    let http = reqwest::Client::new();
    let slow = json!({"v": "clutch/0.1", "agent_id": "agent:slow", "capabilities": [{"id": "skill:slow", "version": "1.0.0"}]});
    assert!(http.post(format!("{}/v1/agents", b.url)).json(&slow).send().await.unwrap().status().is_success());
    let hub_b = json!({"v": "clutch/0.1", "agent_id": "agent:hub-b", "capabilities": [{"id": "skill:slow", "version": "1.0.0"}],
                       "endpoints": {"a2a": {"url": format!("{}/a2a", b.url)}}});
    let r = http.post(format!("{}/v1/agents", a.url)).json(&hub_b).send().await.unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);

    // ada asks A; A gives it to hub-b; B gives it to slow, who is slow.
    let task = clutch_proto::id::generate(clutch_proto::id::Kind::Task);
    let request = json!({
        "thread_id": clutch_proto::id::generate(clutch_proto::id::Kind::Thread), "run_id": clutch_proto::id::generate(clutch_proto::id::Kind::Run),
        "task_id": task, "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": "task.request", "requires": ["skill:slow"], "payload": {"goal": "outlive a crash"},
    });
    assert_eq!(http.post(format!("{}/v1/messages", a.url)).json(&request).send().await.unwrap().status(), 201);
    let url_b = b.url.clone();
    let remote = until("the task did not reach B", async || {
        let inbox: Value =
            http.get(format!("{url_b}/v1/inbox/agent:slow?wait_seconds=1")).send().await.ok()?.json().await.ok()?;
        inbox["tasks"][0]["task"]["task_id"].as_str().map(|t| json!(t))
    })
    .await;
    let url_a = a.url.clone();
    until("hub-b did not accept it on A", async || {
        let t: Value = http.get(format!("{url_a}/v1/tasks/{task}")).send().await.ok()?.json().await.ok()?;
        (t["state"] == "accepted").then_some(t)
    })
    .await;

    // B dies mid-task and comes back at the same address; slow finishes there.
    b.kill();
    let b = serve_at(dir_b.path(), port);
    let reply = json!({"agent_id": "agent:slow", "status": "completed", "text": "survived"});
    let r =
        http.post(format!("{}/v1/tasks/{}/reply", b.url, remote.as_str().unwrap())).json(&reply).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);

    // A's follower, retrying through the outage, brings the result home.
    until("A's task did not complete", async || {
        let t: Value = http.get(format!("{url_a}/v1/tasks/{task}")).send().await.ok()?.json().await.ok()?;
        (t["state"] == "completed").then_some(t)
    })
    .await;
    let events: Value =
        http.get(format!("{}/v1/events?task_id={task}", a.url)).send().await.unwrap().json().await.unwrap();
    let result = events["events"].as_array().unwrap().iter().find(|e| e["type"] == "task.result").unwrap().clone();
    assert_eq!(
        (result["from"]["agent_id"].as_str(), result["payload"]["text"].as_str()),
        (Some("agent:hub-b"), Some("survived"))
    );
    drop(b);
}
