//! Positions' sessions on the writer's path: who may record a session, what its members may say to
//! whom, the loop, rate and cap rules, the listing and history, the end, and a restart.

use std::time::SystemTime;

use clutch_core::engine::Options;
use clutch_core::session::{Phase, RECORD_PAYLOAD, WARNING_PAYLOAD};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use serde_json::{Value, json};

use crate::engine::{Hub, hub, until_footprint};

struct Ids {
    run: String,
    thread: String,
    root: String,
}

fn message(ids: &Ids, from: &str, kind: &str, to: &[&str], payload: Value) -> Message {
    let to: Vec<Value> = to.iter().map(|a| json!({"agent_id": a})).collect();
    let value = json!({
        "thread_id": ids.thread, "run_id": ids.run, "task_id": ids.root,
        "from": {"agent_id": from}, "to": to, "type": kind, "payload": payload,
    });
    validate::message(&value, &Defaults { now: SystemTime::now() }).unwrap()
}

fn record(ids: &Ids, phase: &str, extra: Value) -> Message {
    let mut payload = json!({"session_id": ids.run, "position": "mirror", "pattern": "mirror", "phase": phase});
    for (k, v) in extra.as_object().unwrap() {
        payload[k] = v.clone();
    }
    let mut m = message(ids, "agent:runner", "task.progress", &["user:ada"], payload);
    m.payload_type = Some(RECORD_PAYLOAD.into());
    m
}

/// Registers `agents`, then asks `agent:runner` for a session's task, which it accepts.
async fn begin(h: &Hub, agents: &[&str]) -> Ids {
    for name in agents {
        h.register(name, json!({"capabilities": [{"id": "skill:talk", "version": "1.0.0"}]})).await;
    }
    let ids = Ids { run: id::generate(Kind::Run), thread: id::generate(Kind::Thread), root: id::generate(Kind::Task) };
    let engine = &h.core().engine;
    for m in [
        message(&ids, "user:ada", "task.request", &["agent:runner"], json!({"goal": "mirror this"})),
        message(&ids, "agent:runner", "task.accept", &["user:ada"], json!({})),
    ] {
        engine.submit(vec![m]).await.unwrap().pop().unwrap().unwrap();
    }
    ids
}

fn code<T: std::fmt::Debug>(r: Result<T, clutch_core::Error>) -> (String, Option<String>) {
    match r {
        Ok(v) => panic!("accepted: {v:?}"),
        Err(clutch_core::Error::Refused(r)) => (r.code.as_str().to_owned(), r.field),
        Err(e) => panic!("not a refusal: {e}"),
    }
}

#[tokio::test]
async fn the_bus_rules_hold_on_the_writers_path_and_a_restart_keeps_them() {
    let mut h = hub(Options::default()).await;
    let ids = begin(&h, &["runner", "a", "b", "c"]).await;
    let engine = h.core().engine.clone();
    let log = h.core().log.clone();
    let submit = |m: Message| {
        let engine = engine.clone();
        async move { engine.submit(vec![m]).await.unwrap().pop().unwrap() }
    };

    // Only the runner records, and only from the daemon's side (a client may not use clutch.*).
    assert_eq!(code(submit(record(&ids, "INITIALIZING", json!({}))).await).0, "FORBIDDEN");
    let mut forged = record(&ids, "INITIALIZING", json!({}));
    forged.from.agent_id = "agent:a".into();
    assert_eq!(code(log.append_one(forged).await), ("FORBIDDEN".into(), Some("from.agent_id".into())));
    log.append_one(record(&ids, "INITIALIZING", json!({}))).await.unwrap();
    let team = json!({
        "members": [{"agent_id": "agent:a", "role": "Reflector"}, {"agent_id": "agent:b", "role": "Verifier"}],
        "protocol": ["RESULTS", "CONSENSUS"],
        "limits": {"max_messages": 6, "per_agent_per_minute": 5},
        "step": "ANALYSIS",
    });
    log.append_one(record(&ids, "RUNNING", team)).await.unwrap();
    // Phases only move forward.
    assert_eq!(code(log.append_one(record(&ids, "SPAWNING_AGENTS", json!({}))).await).0, "INVALID_TRANSITION");

    let send = |from: &'static str, to: &'static [&'static str], kind: &'static str, content: Value| {
        let engine = engine.clone();
        let run = ids.run.clone();
        async move {
            let to: Vec<String> = to.iter().map(|s| s.to_string()).collect();
            engine.session_send(from, &run, &to, kind, content).await
        }
    };
    let sent = send("agent:a", &["all"], "RESULTS", json!({"found": 1})).await.unwrap();
    assert_eq!(sent.to, ["agent:b"], "`all` is every other member");
    // Bad messages: each refused with its code and field; nothing stored.
    assert_eq!(
        code(send("agent:a", &["all"], "CHATTER", json!(1)).await),
        ("VALIDATION_FAILED".into(), Some("payload.type".into()))
    );
    assert_eq!(
        code(send("agent:a", &["agent:zed"], "RESULTS", json!(1)).await),
        ("VALIDATION_FAILED".into(), Some("to[0].agent_id".into()))
    );
    assert_eq!(
        code(send("agent:c", &["agent:a"], "RESULTS", json!(1)).await),
        ("FORBIDDEN".into(), Some("from.agent_id".into()))
    );
    let nowhere = engine.session_send("agent:a", "run_nope", &["all".into()], "RESULTS", json!(1)).await;
    assert_eq!(code(nowhere), ("SESSION_NOT_FOUND".into(), Some("session_id".into())));

    // A loop: the same content again is refused, and each refusal is announced to the members.
    assert_eq!(code(send("agent:a", &["agent:b"], "RESULTS", json!({"found": 1})).await).0, "LOOP_DETECTED");
    assert_eq!(code(send("agent:a", &["agent:b"], "RESULTS", json!({"found": 1})).await).0, "LOOP_DETECTED");
    let filter = Filter { run_id: Some(ids.run.clone()), kind: Some(MessageType::ChatSystem), ..Filter::default() };
    let warnings = log.read(&filter, 0, 100).await.unwrap();
    assert_eq!(warnings.len(), 2, "a warning per repeat refused");
    let warning = warnings[0].message().unwrap();
    assert_eq!(warning.payload_type.as_deref(), Some(WARNING_PAYLOAD));
    assert_eq!(warning.payload["agent_id"], "agent:a");

    // Rate: 5 a minute each, a's message and the two warnings about it counted.
    send("agent:a", &["agent:b"], "CONSENSUS", json!("agreed")).await.unwrap();
    send("agent:a", &["agent:b"], "CONSENSUS", json!("really")).await.unwrap();
    assert_eq!(code(send("agent:a", &["agent:b"], "CONSENSUS", json!("truly")).await).0, "RATE_LIMITED");
    // At its rate, a repeat is refused for the rate, and no more warnings are written.
    assert_eq!(code(send("agent:a", &["agent:b"], "RESULTS", json!({"found": 1})).await).0, "RATE_LIMITED");
    assert_eq!(log.read(&filter, 0, 100).await.unwrap().len(), 2, "a looping member cannot flood the log");
    // Cap: 6 messages in all (3 so far).
    for i in 0..3 {
        send("agent:b", &["agent:a"], "RESULTS", json!({"n": i})).await.unwrap();
    }
    assert_eq!(code(send("agent:b", &["agent:a"], "RESULTS", json!({"n": 9})).await).0, "BUDGET_EXCEEDED");

    let list = engine.sessions_list(Some(&ids.run));
    let s = &list.sessions[0];
    assert_eq!(
        (s.status, s.step.as_deref(), s.message_count, s.root_task_id.as_str()),
        (Phase::Running, Some("ANALYSIS"), 6, ids.root.as_str())
    );
    assert_eq!(
        s.agents.iter().map(|a| (a.id.as_str(), a.role.as_str(), a.status.as_str())).collect::<Vec<_>>(),
        [("agent:a", "Reflector", "active"), ("agent:b", "Verifier", "active")]
    );
    let history = engine.session_history(&ids.run, None, None).await.unwrap();
    assert_eq!(history.messages.len(), 6);
    assert_eq!(
        engine
            .session_history(&ids.run, Some(2), None)
            .await
            .unwrap()
            .messages
            .iter()
            .map(|m| m.content["n"].clone())
            .collect::<Vec<_>>(),
        [json!(1), json!(2)]
    );
    let by_a = engine.session_history(&ids.run, None, Some("agent:a")).await.unwrap().messages;
    assert_eq!(by_a.len(), 6, "a is the sender or a recipient of each");
    assert!(by_a.iter().all(|m| m.kind == "RESULTS" || m.kind == "CONSENSUS"));
    assert_eq!(code(engine.session_history("run_nope", None, None).await).0, "SESSION_NOT_FOUND");

    // A restart rebuilds the session from the log: its counts and rules hold.
    h.restart(Options::default()).await;
    let engine = h.core().engine.clone();
    assert_eq!(engine.sessions_list(Some(&ids.run)).sessions[0].message_count, 6);
    let again = engine.session_send("agent:b", &ids.run, &["agent:a".into()], "RESULTS", json!({"n": 10})).await;
    assert_eq!(code(again).0, "BUDGET_EXCEEDED");

    // The root task ends: the session is closed to messages.
    let log = h.core().log.clone();
    log.append_one(record(&ids, "COMPLETED", json!({"note": "done"}))).await.unwrap();
    let submit = |m: Message| {
        let engine = engine.clone();
        async move { engine.submit(vec![m]).await.unwrap().pop().unwrap() }
    };
    submit(message(&ids, "agent:runner", "task.result", &["user:ada"], json!({"text": "agreed"}))).await.unwrap();
    let closed = engine.session_send("agent:a", &ids.run, &["agent:b".into()], "RESULTS", json!("late")).await;
    assert_eq!(code(closed).0, "INVALID_TRANSITION");
    h.stop().await;
}

/// Loop detection knows the pattern's stretches: a repeat in a new step, or the same step of a new
/// round, is no loop; and the runner's own copies of what turns produced (`meta.session_key`) are
/// never refused by the loop, rate or cap rules.
#[tokio::test]
async fn a_repeat_in_a_new_step_or_round_is_no_loop_and_the_runners_copies_always_pass() {
    let h = hub(Options::default()).await;
    let ids = begin(&h, &["runner", "a", "b"]).await;
    let engine = h.core().engine.clone();
    let log = h.core().log.clone();
    log.append_one(record(&ids, "INITIALIZING", json!({}))).await.unwrap();
    let team = |step: &str, round: u32| {
        json!({
            "members": [{"agent_id": "agent:a", "role": "Reflector"}, {"agent_id": "agent:b", "role": "Verifier"}],
            "protocol": ["VOTE"], "limits": {"max_messages": 4, "per_agent_per_minute": 4},
            "step": step, "round": round,
        })
    };
    log.append_one(record(&ids, "RUNNING", team("VOTE", 1))).await.unwrap();
    let to = ["agent:b".to_owned()];
    let vote = || engine.session_send("agent:a", &ids.run, &to, "VOTE", json!({"proposal": 2}));
    vote().await.unwrap();
    assert_eq!(code(vote().await).0, "LOOP_DETECTED", "the same step of the same round");
    log.append_one(record(&ids, "RUNNING", team("VOTE", 2))).await.unwrap();
    vote().await.unwrap();
    log.append_one(record(&ids, "RUNNING", team("TALLY", 2))).await.unwrap();
    vote().await.unwrap();
    // a is at its rate (three messages and a warning), the session near its cap: the runner's copy
    // of what a's turn produced, the same vote again, is stored all the same.
    assert_eq!(code(vote().await).0, "RATE_LIMITED");
    let mut copy =
        message(&ids, "agent:a", "chat.message", &["agent:b"], json!({"type": "VOTE", "content": {"proposal": 2}}));
    copy.payload_type = Some(clutch_core::session::MESSAGE_PAYLOAD.into());
    copy.meta.insert(clutch_core::session::SESSION_KEY.into(), json!("say:vote2:agent:a"));
    log.append_one(copy.clone()).await.unwrap();
    copy.id = id::generate(Kind::Message);
    copy.meta.insert(clutch_core::session::SESSION_KEY.into(), json!("say:vote3:agent:a"));
    log.append_one(copy).await.unwrap();
    let s = engine.sessions_list(Some(&ids.run)).sessions[0].message_count;
    assert_eq!(s, 5, "past the cap of 4: the runner's copies are history");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_session_leaves_memory_and_is_still_read_from_the_log() {
    let clock = clutch_core::clock::Clock::manual(SystemTime::now());
    let retention = std::time::Duration::from_millis(300);
    let options = Options { clock: clock.clone(), ended_retention: retention, ..Options::default() };
    let mut h = hub(options.clone()).await;
    let ids = begin(&h, &["runner", "a", "b"]).await;
    let engine = h.core().engine.clone();
    let log = h.core().log.clone();
    log.append_one(record(&ids, "INITIALIZING", json!({}))).await.unwrap();
    let team = json!({
        "members": [{"agent_id": "agent:a", "role": "Reflector"}, {"agent_id": "agent:b", "role": "Verifier"}],
        "protocol": ["RESULTS"],
    });
    log.append_one(record(&ids, "RUNNING", team)).await.unwrap();
    engine.session_send("agent:a", &ids.run, &["all".into()], "RESULTS", json!({"found": 1})).await.unwrap();
    log.append_one(record(&ids, "COMPLETED", json!({}))).await.unwrap();
    let result = message(&ids, "agent:runner", "task.result", &["user:ada"], json!({"text": "done"}));
    engine.submit(vec![result]).await.unwrap().pop().unwrap().unwrap();

    let listed = engine.sessions_list(Some(&ids.run)).sessions;
    assert_eq!(listed.len(), 1);
    let found = engine.find_session(&ids.run).await.unwrap().unwrap();
    assert_eq!(found, listed[0]);
    let history = engine.session_history(&ids.run, None, None).await.unwrap();
    assert_eq!(history.messages.len(), 1);

    clock.advance(retention * 4);
    until_footprint(&h, "the ended session leaving memory", |f| f.sessions == 0).await;
    assert!(engine.sessions_list(Some(&ids.run)).sessions.is_empty());
    assert_eq!(engine.find_session(&ids.run).await.unwrap(), Some(found.clone()), "read from the log as it was");
    assert_eq!(engine.session_history(&ids.run, None, None).await.unwrap(), history);
    // Nothing more may be said in it.
    let late = engine.session_send("agent:b", &ids.run, &["all".into()], "RESULTS", json!({"late": 1})).await;
    assert!(late.is_err(), "{late:?}");
    h.restart(options).await;
    let engine = h.core().engine.clone();
    assert_eq!(engine.footprint().sessions, 0, "the snapshot does not bring it back");
    assert_eq!(engine.find_session(&ids.run).await.unwrap(), Some(found));
    h.stop().await;
}
