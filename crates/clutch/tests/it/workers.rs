//! End to end with external agent programs: the example worker (`tests/workers/worker.py`, Python
//! with the standard library only) registers, heartbeats, reads its inbox over SSE and works the
//! tasks the real daemon routes to it. Checked through the API: routing decisions, deliveries and
//! their attempts, the run's task tree, the agents' load, success and usage; what happens to a task
//! whose worker never accepts it and is killed; and a cancel reaching the worker.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use clutch_core::registry::Status;
use clutch_core::view::{self, TaskState};
use clutch_proto::id::{Kind, generate};
use serde_json::{Value, json};

use crate::support::{DEADLINE, Daemon, Spawned, lines, post, python3, run_id, stream_until};

/// Every test here must finish well within this.
const WAIT: Duration = Duration::from_secs(20);

/// A running worker program, killed when dropped (even when the test fails).
struct Worker {
    process: Spawned,
    output: mpsc::Receiver<String>,
    /// Everything it printed so far.
    log: Vec<String>,
}

impl Worker {
    /// Starts `worker.py --name NAME --skill SKILL ARGS` and waits until it reads its inbox.
    fn start(url: &str, name: &str, skill: &str, args: &[&str]) -> Worker {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/workers/worker.py");
        let mut child = Command::new(python3())
            .arg(script)
            .args(["--url", url, "--name", name, "--skill", skill])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3 worker.py");
        let output = lines(child.stdout.take().unwrap());
        let mut worker = Worker { process: Spawned(child), output, log: Vec::new() };
        worker.wait_for("reading its inbox");
        worker
    }

    /// Waits for a line containing `needle`.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => {
                    panic!("the worker printed no {needle:?} within {DEADLINE:?}; it printed:\n{}", self.log.join("\n"))
                }
            }
        }
    }

    /// SIGKILL: no goodbye, no more heartbeats.
    fn kill(&mut self) {
        self.process.0.kill().expect("SIGKILL the worker");
        self.process.0.wait().expect("reap the worker");
    }
}

/// A `task.request` from `user:ada` for the router, needing `skill`.
fn request(run: &str, thread: &str, task: &str, parent: Option<&str>, skill: &str) -> Value {
    json!({
        "run_id": run, "thread_id": thread, "task_id": task, "parent_task_id": parent,
        "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": "task.request", "requires": [skill], "payload": {"goal": format!("a job for {skill}")},
    })
}

/// A read of the daemon, as the view it answers with.
async fn get<T: serde::de::DeserializeOwned>(http: &reqwest::Client, url: &str) -> T {
    let response = http.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(response.status().is_success(), "GET {url}: {}", response.status());
    response.json().await.expect("the view's JSON")
}

/// Each agent's id, status, tasks in flight and success rate.
fn facts(agents: &view::Agents) -> Vec<(&str, Status, usize, Option<f64>)> {
    agents.agents.iter().map(|a| (a.agent_id.as_str(), a.status, a.load.in_flight, a.success_rate)).collect()
}

fn of<'a>(events: &'a [Value], task: &str, kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["task_id"] == task && e["type"] == kind).collect()
}

/// The daemon's deliveries of a task: `task.request`s from the orchestrator, as (recipient, attempt).
fn deliveries(events: &[Value], task: &str) -> Vec<(String, u64)> {
    of(events, task, "task.request")
        .into_iter()
        .filter(|e| e["from"]["agent_id"] == "agent:orchestrator")
        .map(|e| (e["to"][0]["agent_id"].as_str().unwrap().to_owned(), e["attempt"].as_u64().unwrap()))
        .collect()
}

/// A worker `agent:sil` (`skill:research`) that never accepts, and the id of a task it has been
/// delivered (attempt 1) and has not accepted.
async fn silent_worker_with_a_task(http: &reqwest::Client, daemon: &Daemon) -> (Worker, String) {
    let mut silent = Worker::start(&daemon.url, "sil", "skill:research", &["--never-accept"]);
    let task = generate(Kind::Task);
    let body = request(&run_id(), &generate(Kind::Thread), &task, None, "skill:research");
    let (status, ack) = post(http, &daemon.url, &body).await;
    assert_eq!(status, 201, "{ack}");
    silent.wait_for(&format!("task {task} attempt 1: received, not accepting"));
    (silent, task)
}

fn seq(event: &Value) -> u64 {
    event["seq"].as_u64().unwrap()
}

#[tokio::test]
async fn two_workers_take_the_tasks_routed_to_their_skills() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &[("CLUTCH_ENGINE_HEARTBEAT_INTERVAL", "1000ms")]);
    let http = reqwest::Client::new();
    let _ken = Worker::start(&daemon.url, "ken", "skill:research", &["--max-concurrency", "2"]);
    let _tom = Worker::start(&daemon.url, "tom", "skill:code", &["--max-concurrency", "2"]);

    let (run, thread) = (run_id(), generate(Kind::Thread));
    let (parent, research, code) = (generate(Kind::Task), generate(Kind::Task), generate(Kind::Task));
    for body in [
        request(&run, &thread, &parent, None, "skill:research"),
        request(&run, &thread, &research, Some(&parent), "skill:research"),
        request(&run, &thread, &code, Some(&parent), "skill:code"),
    ] {
        let (status, ack) = post(&http, &daemon.url, &body).await;
        assert_eq!(status, 201, "{ack}");
    }
    let events = stream_until(&daemon.url, &[("run_id", &run)], WAIT, |events| {
        events.iter().filter(|e| e["type"] == "task.result").count() == 3
    })
    .await;

    for (task, worker, other) in
        [(&parent, "agent:ken", "agent:tom"), (&research, "agent:ken", "agent:tom"), (&code, "agent:tom", "agent:ken")]
    {
        let decisions = of(&events, task, "routing.decision");
        assert_eq!(decisions.len(), 1, "one routing decision for {task}: {decisions:?}");
        let decision = decisions[0];
        let payload = &decision["payload"];
        assert_eq!(payload["selected"], worker, "{decision}");
        assert!(payload["scores"][worker].is_number(), "the winner's score: {decision}");
        assert!(payload["scores"].get(other).is_none(), "the other worker is not scored: {decision}");
        let why = payload["excluded"][other].as_str().unwrap_or_default();
        assert!(why.contains("lacks required capability"), "{other} excluded for its skills: {decision}");
        assert!(!payload["reason"].as_str().unwrap_or_default().is_empty(), "a reason in words: {decision}");

        assert_eq!(deliveries(&events, task), [(worker.to_owned(), 1)], "delivered once, to {worker}");
        let delivery =
            of(&events, task, "task.request").into_iter().find(|e| e["to"][0]["agent_id"] == worker).unwrap();
        let mut previous = seq(decision);
        assert!(seq(delivery) > previous, "decided, then delivered");
        previous = seq(delivery);
        for kind in ["task.accept", "task.progress", "task.result"] {
            let sent = of(&events, task, kind);
            assert_eq!(sent.len(), 1, "one {kind} for {task}: {sent:?}");
            assert_eq!(sent[0]["from"]["agent_id"], worker, "{}", sent[0]);
            assert_eq!(sent[0]["attempt"], 1, "{}", sent[0]);
            assert!(seq(sent[0]) > previous, "{kind} in order: {}", sent[0]);
            previous = seq(sent[0]);
        }
        assert_eq!(of(&events, task, "task.progress")[0]["payload"]["percent"], 50);
    }

    let tree: view::RunTasks = get(&http, &format!("{}/v1/runs/{run}/tasks", daemon.url)).await;
    assert_eq!(tree.tasks.len(), 1, "{tree:?}");
    assert_eq!((tree.tasks[0].task_id.as_str(), tree.tasks[0].state), (parent.as_str(), TaskState::Completed));
    let mut children: Vec<(&str, TaskState, Option<&str>)> =
        tree.tasks[0].children.iter().flatten().map(|c| (c.task_id.as_str(), c.state, c.agent.as_deref())).collect();
    children.sort();
    let mut expected = vec![
        (research.as_str(), TaskState::Completed, Some("agent:ken")),
        (code.as_str(), TaskState::Completed, Some("agent:tom")),
    ];
    expected.sort();
    assert_eq!(children, expected, "{tree:?}");
    assert_eq!(tree.counts, BTreeMap::from([(TaskState::Completed, 3)]), "{tree:?}");
    assert_eq!(tree.usage.map(|u| u.tokens), Some(45), "3 tasks × (10 in progress + 5 in the result)");

    let agents: view::Agents = get(&http, &format!("{}/v1/agents", daemon.url)).await;
    assert_eq!(
        facts(&agents),
        [("agent:ken", Status::Online, 0, Some(1.0)), ("agent:tom", Status::Online, 0, Some(1.0))]
    );
    let tokens: Vec<u64> = agents.agents.iter().map(|a| a.usage.tokens).collect();
    assert_eq!(tokens, [30, 15]);
}

#[tokio::test]
async fn a_task_its_killed_worker_never_accepted_is_redelivered_then_fails() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("CLUTCH_ENGINE_HEARTBEAT_INTERVAL", "1000ms"),
        ("CLUTCH_ENGINE_ACCEPT_TIMEOUT", "300ms"),
        ("CLUTCH_ENGINE_MAX_DELIVERIES", "3"),
    ];
    let daemon = Daemon::start_with(dir.path(), &env);
    let http = reqwest::Client::new();
    let (mut silent, task) = silent_worker_with_a_task(&http, &daemon).await;
    silent.kill();

    let failed = |e: &Value| e["type"] == "task.error" && e["from"]["agent_id"] == "agent:orchestrator";
    let events = stream_until(&daemon.url, &[("task_id", &task)], WAIT, |events| events.iter().any(failed)).await;
    assert_eq!(
        deliveries(&events, &task),
        [("agent:sil".to_owned(), 1), ("agent:sil".to_owned(), 2), ("agent:sil".to_owned(), 3)],
        "delivered again after each accept timeout"
    );
    let error = events.iter().find(|e| failed(e)).unwrap();
    assert_eq!(error["payload"]["code"], "DELIVERY_FAILED", "{error}");
    assert_eq!(error["payload"]["retryable"], false, "{error}");
    assert!(of(&events, &task, "task.accept").is_empty());

    let state: view::Task = get(&http, &format!("{}/v1/tasks/{task}", daemon.url)).await;
    assert_eq!((state.state, state.attempt), (TaskState::Failed, 3), "{state:?}");
    assert_eq!(state.error.map(|e| e.code).as_deref(), Some("DELIVERY_FAILED"));
    let agent: view::Agent = get(&http, &format!("{}/v1/agents/agent:sil", daemon.url)).await;
    assert_eq!((agent.load.in_flight, agent.success_rate), (0, Some(0.0)), "{agent:?}");
}

#[tokio::test]
async fn a_task_moves_from_a_worker_gone_offline_to_a_live_one() {
    let dir = tempfile::tempdir().unwrap();
    // Heartbeats every second; silent for 2.5 s is stale, for 4 s offline. The accept timeout is
    // longer, so the task is not redelivered to the dead worker meanwhile.
    let env = [
        ("CLUTCH_ENGINE_HEARTBEAT_INTERVAL", "1000ms"),
        ("CLUTCH_ENGINE_STALE_AFTER", "2500ms"),
        ("CLUTCH_ENGINE_OFFLINE_AFTER", "4000ms"),
        ("CLUTCH_ENGINE_ACCEPT_TIMEOUT", "60000ms"),
        ("CLUTCH_ENGINE_RETRY_BACKOFF", "100ms"),
    ];
    let daemon = Daemon::start_with(dir.path(), &env);
    let http = reqwest::Client::new();
    let (mut silent, task) = silent_worker_with_a_task(&http, &daemon).await;
    // Only now does a live worker with the skill join; then the silent one dies.
    let mut ken = Worker::start(&daemon.url, "ken", "skill:research", &[]);
    silent.kill();

    let events = stream_until(&daemon.url, &[("task_id", &task)], WAIT, |events| {
        events.iter().any(|e| e["type"] == "task.result")
    })
    .await;
    ken.wait_for(&format!("task {task} attempt 2: completed"));

    assert_eq!(deliveries(&events, &task), [("agent:sil".to_owned(), 1), ("agent:ken".to_owned(), 2)]);
    let decisions = of(&events, &task, "routing.decision");
    let selected: Vec<&Value> = decisions.iter().map(|d| &d["payload"]["selected"]).collect();
    assert_eq!(selected, [&json!("agent:sil"), &json!("agent:ken")], "{decisions:?}");
    assert_eq!(decisions[1]["payload"]["excluded"]["agent:sil"], "agent is offline", "{}", decisions[1]);
    let errors = of(&events, &task, "task.error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (&errors[0]["payload"]["code"], &errors[0]["payload"]["retryable"]),
        (&json!("AGENT_UNAVAILABLE"), &json!(true)),
        "{}",
        errors[0]
    );
    assert!(seq(errors[0]) < seq(decisions[1]), "failed over only after the worker went offline");
    for kind in ["task.accept", "task.progress", "task.result"] {
        let sent = of(&events, &task, kind);
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!((&sent[0]["from"]["agent_id"], &sent[0]["attempt"]), (&json!("agent:ken"), &json!(2)));
    }

    let state: view::Task = get(&http, &format!("{}/v1/tasks/{task}", daemon.url)).await;
    assert_eq!(
        (state.state, state.agent.as_deref(), state.attempt, state.routings),
        (TaskState::Completed, Some("agent:ken"), 2, 2),
        "{state:?}"
    );
    let agents: view::Agents = get(&http, &format!("{}/v1/agents", daemon.url)).await;
    assert_eq!(
        facts(&agents),
        [("agent:ken", Status::Online, 0, Some(1.0)), ("agent:sil", Status::Offline, 0, Some(0.0))]
    );
}

#[tokio::test]
async fn a_cancel_stops_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &[("CLUTCH_ENGINE_HEARTBEAT_INTERVAL", "1000ms")]);
    let http = reqwest::Client::new();
    // Each task would take a minute: long enough that only the cancel can end it.
    let mut ken = Worker::start(&daemon.url, "ken", "skill:research", &["--work-seconds", "60"]);

    let (run, thread, task) = (run_id(), generate(Kind::Thread), generate(Kind::Task));
    let (status, ack) = post(&http, &daemon.url, &request(&run, &thread, &task, None, "skill:research")).await;
    assert_eq!(status, 201, "{ack}");
    ken.wait_for(&format!("task {task} attempt 1: accepted"));
    let mut cancel = request(&run, &thread, &task, None, "skill:research");
    cancel["type"] = json!("task.cancel");
    cancel["payload"] = json!({"reason": "no longer needed"});
    cancel.as_object_mut().unwrap().remove("requires");
    let (status, ack) = post(&http, &daemon.url, &cancel).await;
    assert_eq!(status, 201, "{ack}");
    ken.wait_for(&format!("task {task} attempt 1: stopped (cancelled)"));

    let state: view::Task = get(&http, &format!("{}/v1/tasks/{task}", daemon.url)).await;
    assert_eq!(state.state, TaskState::Cancelled, "{state:?}");
    let events = stream_until(&daemon.url, &[("task_id", &task)], WAIT, |events| {
        events.iter().any(|e| e["type"] == "task.cancel" && e["to"][0]["agent_id"] == "agent:ken")
    })
    .await;
    let sent: Vec<&Value> = events.iter().filter(|e| e["from"]["agent_id"] == "agent:ken").collect();
    assert_eq!(sent.len(), 1, "only the accept, no progress or result: {sent:?}");
    assert_eq!(sent[0]["type"], "task.accept");
}
