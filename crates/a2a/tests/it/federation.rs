//! Two hubs: hub A knows an agent that lives on hub B (a card naming B's A2A endpoint); a task A's
//! router gives it crosses to B, where B's router gives it to one of B's agents, and the outcome
//! comes back as that agent's own events in A's log. A cancel on A crosses too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clutch_core::inbox::{Reply, Status};
use clutch_core::view::TaskState;
use serde_json::json;

use crate::server::{asker_works, kim_works, register};
use crate::{Daemon, start, start_with};

/// Hub A, whose guard lets it reach hub B on loopback, with `agent:hub-b` standing for B.
async fn hub_a(b: &Daemon) -> Daemon {
    let engine = loopback();
    let a = start_with(engine).await;
    let card = json!({
        "v": "clutch/0.1", "agent_id": "agent:hub-b",
        "capabilities": [{"id": "skill:answer", "version": "1.0.0"}, {"id": "skill:slow", "version": "1.0.0"}, {"id": "skill:ask", "version": "1.0.0"}],
        "endpoints": {"a2a": {"url": format!("{}/a2a", b.url)}},
    });
    a.engine.register(&clutch_proto::validate::agent_card(&card).unwrap()).await.unwrap();
    a
}

/// Engine options whose guard lets a hub reach another on loopback.
fn loopback() -> clutch_core::engine::Options {
    clutch_core::engine::Options { outbound: Arc::new(clutch_core::guard::Policy::loopback()), ..Default::default() }
}

/// The task B gave `agent`, once it has one.
async fn reached(b: &Daemon, agent: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let inbox = b.engine.inbox(agent, Duration::from_secs(1)).await.unwrap();
        if let Some(item) = inbox.tasks.first() {
            return item.task.task_id.clone();
        }
        assert!(Instant::now() < deadline, "the task did not reach B");
    }
}

/// Waits for hub-b's question about `task` on A (a progress with `input_required`, B's agent's), then
/// ada answers `text` to hub-b in the task.
async fn answer_question(a: &Daemon, task: &str, text: &str) {
    let filter = clutch_store::Filter { task_id: Some(task.to_owned()), ..Default::default() };
    let mut events = a.log.subscribe(filter, Some(0)).await.unwrap();
    let question = loop {
        let m = tokio::time::timeout(Duration::from_secs(20), events.next()).await.unwrap().unwrap().message().unwrap();
        if m.kind == clutch_proto::MessageType::TaskProgress && m.payload.contains_key("input_required") {
            break m;
        }
    };
    assert_eq!(
        (question.from.agent_id.as_str(), question.payload["input_required"]["prompt"].as_str()),
        ("agent:hub-b", Some("Which number?"))
    );
    let view = a.engine.task(task).unwrap();
    let answer = clutch_proto::validate::message(
        &json!({"thread_id": view.thread_id, "run_id": view.run_id, "task_id": task, "from": {"agent_id": "user:ada"},
                "to": [{"agent_id": "agent:hub-b"}], "type": "chat.message", "payload": {"text": text}}),
        &clutch_proto::validate::Defaults { now: std::time::SystemTime::now() },
    )
    .unwrap();
    a.engine.submit(vec![answer]).await.unwrap().pop().unwrap().unwrap();
}

/// Asks A for work requiring `skill`, as `user:ada`: the task's id.
async fn ask(a: &Daemon, goal: &str, skill: &str) -> String {
    let m = clutch_proto::validate::message(
        &json!({
            "thread_id": clutch_proto::id::generate(clutch_proto::id::Kind::Thread),
            "run_id": clutch_proto::id::generate(clutch_proto::id::Kind::Run),
            "task_id": clutch_proto::id::generate(clutch_proto::id::Kind::Task),
            "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
            "type": "task.request", "requires": [skill], "payload": {"goal": goal},
            "trace": {"trace_id": format!("trace-{goal}")},
        }),
        &clutch_proto::validate::Defaults { now: std::time::SystemTime::now() },
    )
    .unwrap();
    let id = m.task_id.clone();
    a.engine.submit(vec![m]).await.unwrap().pop().unwrap().unwrap();
    id
}

async fn until(d: &Daemon, task: &str, done: impl Fn(TaskState) -> bool) -> clutch_core::view::Task {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = d.engine.task(task).unwrap();
        if done(t.state) {
            return t;
        }
        assert!(Instant::now() < deadline, "task {task} is still {:?}", t.state);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_crosses_to_another_hub_and_its_outcome_comes_back() {
    let b = start().await;
    register(&b.engine, "kim", "skill:answer").await;
    register(&b.engine, "slow", "skill:slow").await;
    let kim = kim_works(b.engine.clone());
    let a = hub_a(&b).await;

    // A routes it to hub-b; B routes it to kim; kim's answer is hub-b's result on A.
    let task = ask(&a, "6 × 7?", "skill:answer").await;
    let done = until(&a, &task, |s| s.is_final()).await;
    assert_eq!((done.state, done.agent.as_deref()), (TaskState::Completed, Some("agent:hub-b")));
    let end = a.engine.task_end(&task).await.unwrap().unwrap();
    assert_eq!(end.payload["text"], "42: 6 × 7?");
    let remote = end.payload["a2a"]["task_id"].as_str().unwrap().to_owned();
    // On B: a task of its own, from A's message, worked by kim.
    let there = b.engine.task(&remote).unwrap();
    assert_eq!((there.state, there.agent.as_deref()), (TaskState::Completed, Some("agent:kim")));
    assert_eq!(there.requires, ["skill:answer"]);
    // One trace on both hubs: A's request's, on hub-b's news in A's log and on B's request.
    let trace = |log: &clutch_core::Handle, task: &str, kind: clutch_proto::MessageType| {
        let (log, task) = (log.clone(), task.to_owned());
        async move {
            let filter = clutch_store::Filter { task_id: Some(task), kind: Some(kind), ..Default::default() };
            let events = log.read(&filter, 0, 10).await.unwrap();
            events[0].message().unwrap().trace.map(|t| t.trace_id)
        }
    };
    let expected = Some("trace-6 × 7?".to_owned());
    assert_eq!(trace(&a.log, &task, clutch_proto::MessageType::TaskResult).await, expected);
    assert_eq!(trace(&a.log, &task, clutch_proto::MessageType::TaskAccept).await, expected);
    assert_eq!(trace(&b.log, &remote, clutch_proto::MessageType::TaskRequest).await, expected);

    // A cancel on A crosses: B's task is cancelled too.
    let task = ask(&a, "take your time", "skill:slow").await;
    let remote = reached(&b, "agent:slow").await;
    let here = until(&a, &task, |s| s == TaskState::Accepted).await;
    assert_eq!(here.agent.as_deref(), Some("agent:hub-b"), "hub-b accepted it once B had it");
    a.engine.task_cancel("user:ada", &task, "enough").await.unwrap();
    until(&b, &remote, |s| s == TaskState::Cancelled).await;
    // A hub with the default guard does not reach loopback or private addresses: refused, named.
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:hub-a", "capabilities": [{"id": "skill:x", "version": "1.0.0"}],
                      "endpoints": {"a2a": {"url": format!("{}/a2a", a.url)}}});
    let refused = b.engine.register(&clutch_proto::validate::agent_card(&card).unwrap()).await.unwrap_err();
    assert_eq!(refused.code().as_str(), "TARGET_NOT_ALLOWED", "{refused}");
    kim.abort();
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_restarts_mid_task_follows_it_again() {
    let b = start().await;
    register(&b.engine, "slow", "skill:slow").await;
    let a = hub_a(&b).await;
    let task = ask(&a, "over a restart", "skill:slow").await;
    let remote = reached(&b, "agent:slow").await;
    until(&a, &task, |s| s == TaskState::Accepted).await;
    let a = a.restart().await;
    // B finishes while A is back: A's follower, resumed from its log, brings the outcome home once.
    let done = Reply {
        status: Status::Completed,
        text: Some("done at last".into()),
        result: None,
        error: None,
        retryable: false,
    };
    b.engine.task_reply("agent:slow", &remote, done).await.unwrap();
    let here = until(&a, &task, |s| s.is_final()).await;
    assert_eq!(here.state, TaskState::Completed);
    assert_eq!(a.engine.task_end(&task).await.unwrap().unwrap().payload["text"], "done at last");
    // Sent once: B holds no second task from a resend.
    assert!(b.engine.inbox("agent:slow", Duration::ZERO).await.unwrap().tasks.is_empty(), "sent once");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_from_an_agent_on_another_hub_is_answered_from_here() {
    let b = start().await;
    register(&b.engine, "asker", "skill:ask").await;
    let asker = asker_works(b.engine.clone(), b.log.clone());
    let a = hub_a(&b).await;
    let task = ask(&a, "pick for me", "skill:ask").await;
    // B's agent asks; on A, hub-b's progress carries the question; ada answers hub-b in the task.
    answer_question(&a, &task, "7").await;
    let done = until(&a, &task, |s| s.is_final()).await;
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(a.engine.task_end(&task).await.unwrap().unwrap().payload["text"], "you said 7");
    asker.abort();
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_hub_stays_online_while_it_answers_and_goes_offline_once_gone() {
    use clutch_core::registry::Status;
    let b = start().await;
    let engine = clutch_core::engine::Options {
        heartbeat_interval: Duration::from_millis(100),
        stale_after: Duration::from_millis(300),
        offline_after: Duration::from_millis(600),
        ..loopback()
    };
    let a = start_with(engine).await;
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:hub-b", "capabilities": [{"id": "skill:answer", "version": "1.0.0"}],
                      "endpoints": {"a2a": {"url": format!("{}/a2a", b.url)}}});
    a.engine.register(&clutch_proto::validate::agent_card(&card).unwrap()).await.unwrap();
    // Well past the offline delay, B answering keeps hub-b online: A heartbeats it for B.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_millis(1500) {
        assert_eq!(a.engine.agent("agent:hub-b").unwrap().status, Status::Online, "after {:?}", watched.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // B gone: hub-b goes stale, then offline, as any silent agent does.
    b.stop().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.engine.agent("agent:hub-b").unwrap().status != Status::Offline {
        assert!(Instant::now() < deadline, "hub-b is still {:?}", a.engine.agent("agent:hub-b").unwrap().status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_by_url_goes_through_the_hub() {
    let b = start().await;
    register(&b.engine, "kim", "skill:answer").await;
    let kim = kim_works(b.engine.clone());
    let a = hub_a(&b).await;
    let http = reqwest::Client::new();
    let send = |from: &Daemon, body: serde_json::Value| {
        let request = http.post(format!("{}/v1/a2a/send", from.url)).json(&body);
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.json::<serde_json::Value>().await.unwrap())
        }
    };
    let to_b = format!("{}/a2a", b.url);
    let (status, sent) = send(&a, json!({"url": to_b, "text": "6 × 7?", "skill": "skill:answer"})).await;
    assert_eq!(
        (status, sent["state"].as_str(), sent["text"].as_str()),
        (200, Some("completed"), Some("42: 6 × 7?")),
        "{sent}"
    );
    // The endpoint is a remote agent of A now, the task in A's log is to it, and a second send reuses it.
    let agent = sent["agent_id"].as_str().unwrap().to_owned();
    assert!(agent.starts_with("agent:a2a-"), "{agent}");
    assert_eq!(a.engine.task(sent["task_id"].as_str().unwrap()).unwrap().agent.as_deref(), Some(agent.as_str()));
    let (_, again) = send(&a, json!({"url": to_b, "text": "and 6 × 8?", "skill": "skill:answer"})).await;
    assert_eq!((again["agent_id"].as_str(), again["text"].as_str()), (Some(agent.as_str()), Some("42: and 6 × 8?")));
    // Not waiting: accepted at once.
    let (status, quick) = send(&a, json!({"url": to_b, "text": "x", "skill": "skill:answer", "wait": false})).await;
    assert_eq!((status, quick["state"].as_str()), (202, Some("requested")), "{quick}");
    // B's default guard refuses loopback; a body without text is refused; both say the field.
    let (status, refused) = send(&b, json!({"url": format!("{}/a2a", a.url), "text": "x"})).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str(), refused["error"]["field"].as_str()),
        (400, Some("TARGET_NOT_ALLOWED"), Some("url")),
        "{refused}"
    );
    let (status, refused) = send(&a, json!({"url": to_b, "text": " "})).await;
    assert_eq!((status, refused["error"]["field"].as_str()), (400, Some("text")));
    kim.abort();
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_pinned_to_0_3_is_spoken_to_in_0_3() {
    let b = start().await;
    register(&b.engine, "kim", "skill:answer").await;
    register(&b.engine, "asker", "skill:ask").await;
    let kim = kim_works(b.engine.clone());
    let asker = asker_works(b.engine.clone(), b.log.clone());
    let engine = loopback();
    let a = start_with(engine).await;
    // The operator pins the version (an older remote): B's 0.3 methods and shapes carry it all.
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:hub-b",
                      "capabilities": [{"id": "skill:answer", "version": "1.0.0"}, {"id": "skill:ask", "version": "1.0.0"}],
                      "endpoints": {"a2a": {"url": format!("{}/a2a", b.url)}}, "meta": {"a2a_version": "0.3"}});
    a.engine.register(&clutch_proto::validate::agent_card(&card).unwrap()).await.unwrap();
    let task = ask(&a, "6 × 7?", "skill:answer").await;
    let done = until(&a, &task, |s| s.is_final()).await;
    assert_eq!(done.state, TaskState::Completed);
    let end = a.engine.task_end(&task).await.unwrap().unwrap();
    assert_eq!(end.payload["text"], "42: 6 × 7?");
    // B received it as 0.3: its request says so.
    let remote = end.payload["a2a"]["task_id"].as_str().unwrap().to_owned();
    let filter = clutch_store::Filter {
        task_id: Some(remote),
        kind: Some(clutch_proto::MessageType::TaskRequest),
        ..Default::default()
    };
    let first = b.log.read(&filter, 0, 1).await.unwrap()[0].message().unwrap();
    assert_eq!(first.payload["a2a"]["version"], "0.3", "{:?}", first.payload);

    // A question and its answer cross in 0.3 too.
    let task = ask(&a, "pick for me", "skill:ask").await;
    answer_question(&a, &task, "9").await;
    until(&a, &task, |s| s.is_final()).await;
    assert_eq!(a.engine.task_end(&task).await.unwrap().unwrap().payload["text"], "you said 9");
    kim.abort();
    asker.abort();
    a.stop().await;
    b.stop().await;
}
