//! Core's integration tests, on the real SQLite store: group commit, ordering of live events,
//! catch-up subscriptions, slow subscribers, shutdown; and, in modules, the writer's flush, the payload schema registry,
//! the policy configuration, who may do what (`access`), the engine and its workflows, and the
//! published views and payloads (checked against what the engine writes).

mod access;
mod config;
mod direct;
mod flush;
mod fuzz;
mod machine;
mod published;
mod schemas;
mod sessions;

mod engine;
mod router;
mod workflow;

use std::sync::Arc;
use std::time::SystemTime;

use clutch_core::log::Options;
use clutch_core::{End, Handle, Service};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use serde_json::json;
use tokio::sync::oneshot;

struct Daemon {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn start(options: Options) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let (service, handle) = Service::new(Arc::new(store), options);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = service.spawn(async move {
        let _ = stopped.await;
    });
    Daemon { handle, stop: Some(stop), task, _dir: dir }
}

impl Daemon {
    async fn shutdown(mut self) {
        self.handle.close_streams();
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap();
    }
}

fn message(run: &str, kind: MessageType) -> Message {
    let value = json!({
        "thread_id": id::generate(Kind::Thread), "run_id": run, "task_id": id::generate(Kind::Task),
        "from": {"agent_id": "agent:ken"}, "to": [], "type": kind.as_str(), "payload": {},
    });
    validate::message(&value, &Defaults { now: SystemTime::now() }).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_are_group_committed_and_all_acknowledged() {
    let d = start(Options::default());
    let run = id::generate(Kind::Run);
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (h, run) = (d.handle.clone(), run.clone());
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for _ in 0..20 {
                    seqs.push(h.append_one(message(&run, MessageType::ChatMessage)).await.unwrap().seq);
                }
                seqs
            })
        })
        .collect();
    let mut all: Vec<u64> = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    assert_eq!(all, (1..=640).collect::<Vec<_>>());
    let m = d.handle.metrics();
    let batches = m.batches.load(std::sync::atomic::Ordering::Relaxed);
    assert!(batches < 640, "concurrent appends share transactions ({batches} batches for 640 messages)");
    assert!(m.render().contains("clutch_appends_total 640"));
    d.shutdown().await;
}

/// A lone append on an idle log is committed on the caller's own thread, unless its publish would
/// wake more subscribers to every event than that is worth (32): then the writer's thread commits and
/// publishes it. Either way every subscriber gets every event, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_append_is_committed_on_the_callers_thread_unless_many_subscribers_wait() {
    let d = start(Options::default());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !d.handle.idle() {
        assert!(std::time::Instant::now() < deadline, "the writer never started");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let inline = || d.handle.metrics().inline_batches.load(std::sync::atomic::Ordering::Relaxed);
    let run = id::generate(Kind::Run);
    let mut subscribers = Vec::new();
    for _ in 0..32 {
        subscribers.push(d.handle.subscribe(Filter::default(), None).await.unwrap());
    }
    assert_eq!(d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap().seq, 1);
    assert_eq!(inline(), 1, "32 subscribers: committed on the caller's thread");
    subscribers.push(d.handle.subscribe(Filter::default(), None).await.unwrap());
    assert!(d.handle.idle());
    assert_eq!(d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap().seq, 2);
    assert_eq!(inline(), 1, "33 subscribers: committed and published by the writer's thread");
    assert_eq!(d.handle.metrics().batches.load(std::sync::atomic::Ordering::Relaxed), 2);
    for (i, subscriber) in subscribers.iter_mut().enumerate() {
        if i < 32 {
            assert_eq!(subscriber.next().await.unwrap().seq, 1);
        }
        assert_eq!(subscriber.next().await.unwrap().seq, 2);
    }
    d.shutdown().await;
}

/// A gate that panics when it applies a `task.cancel`: a bug on the writer's path.
struct Panicky;

impl clutch_core::log::Gate for Panicky {
    fn admit(&self, batch: &[clutch_store::Entry]) -> Vec<Option<clutch_core::Refusal>> {
        vec![None; batch.len()]
    }
    fn committed(&self, events: &[Arc<clutch_core::Live>]) {
        assert!(events.iter().all(|e| e.message.kind != MessageType::TaskCancel), "the gate's bug");
    }
}

/// A write cut short by a panic (here in the gate, on the caller's own thread) stops the log as a
/// failed flush does: what it stored was never applied, so nothing more is taken or acknowledged,
/// and its event is never shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_short_by_a_panic_stops_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let (mut service, handle) = Service::new(Arc::new(store), Options::default());
    service.set_gate(Arc::new(Panicky));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = service.spawn(async move {
        let _ = stopped.await;
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !handle.idle() {
        assert!(std::time::Instant::now() < deadline, "the writer never started");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let run = id::generate(Kind::Run);
    assert_eq!(handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap().seq, 1);
    let cut = tokio::spawn({
        let (handle, m) = (handle.clone(), message(&run, MessageType::TaskCancel));
        async move { handle.append_one(m).await }
    });
    assert!(cut.await.unwrap_err().is_panic(), "the caller's task met the gate's panic");
    assert!(!handle.idle(), "the log is not idle: it is stopped");
    let after = handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap_err();
    assert_eq!(after.code(), clutch_proto::ErrorCode::Unavailable);
    let shown: Vec<u64> = handle.read(&Filter::default(), 0, 10).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(shown, vec![1], "the cut write's event is never shown");
    handle.close_streams();
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_each_message() {
    let d = start(Options::default());
    let run = id::generate(Kind::Run);
    let a = message(&run, MessageType::TaskRequest);
    let mut conflicting = a.clone();
    conflicting.payload.insert("x".into(), json!(1));
    let out = d.handle.append(vec![a.clone(), conflicting, a.clone()]).await.unwrap();
    assert_eq!(out[0].as_ref().unwrap().seq, 1);
    assert_eq!(out[1].as_ref().unwrap_err().code(), clutch_proto::ErrorCode::IdConflict);
    assert!(out[2].as_ref().unwrap().duplicate);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_catches_up_then_goes_live_without_gap_or_repeat() {
    let d = start(Options::default());
    let run = id::generate(Kind::Run);
    for _ in 0..2500 {
        d.handle.append_one(message(&run, MessageType::TaskProgress)).await.unwrap();
    }
    // Appends continue while the subscriber catches up.
    let writer = {
        let (h, run) = (d.handle.clone(), run.clone());
        tokio::spawn(async move {
            for _ in 0..1500 {
                h.append_one(message(&run, MessageType::TaskProgress)).await.unwrap();
            }
        })
    };
    let mut sub =
        d.handle.subscribe(Filter { run_id: Some(run.clone()), ..Filter::default() }, Some(100)).await.unwrap();
    let mut expected = 101;
    while expected <= 4000 {
        let e = sub.next().await.unwrap();
        assert_eq!(e.seq, expected);
        expected += 1;
    }
    writer.await.unwrap();
    assert_eq!(sub.cursor(), 4000);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_subscription_filters_and_starts_now() {
    let d = start(Options::default());
    let (run, other) = (id::generate(Kind::Run), id::generate(Kind::Run));
    d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap();
    let mut sub = d
        .handle
        .subscribe(Filter { run_id: Some(run.clone()), kind: Some(MessageType::TaskResult), ..Filter::default() }, None)
        .await
        .unwrap();
    d.handle.append_one(message(&other, MessageType::TaskResult)).await.unwrap();
    d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap();
    let wanted = d.handle.append_one(message(&run, MessageType::TaskResult)).await.unwrap();
    let e = sub.next().await.unwrap();
    assert_eq!(e.seq, wanted.seq);
    assert_eq!(e.message().unwrap().run_id, run);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_subscriber_is_cut_off_with_its_cursor() {
    let d = start(Options { subscriber_buffer: 16, ..Options::default() });
    let run = id::generate(Kind::Run);
    let mut sub = d.handle.subscribe(Filter::default(), None).await.unwrap();
    for seq in 1..=2 {
        d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap();
        assert_eq!(sub.next().await.unwrap().seq, seq);
    }
    // The subscriber, now live, reads nothing while 100 events are published: more than its buffer.
    let batch: Vec<Message> = (0..100).map(|_| message(&run, MessageType::ChatMessage)).collect();
    d.handle.append(batch).await.unwrap();
    assert_eq!(sub.next().await.unwrap_err(), End::Lagged { last_seq: 2 });
    assert_eq!(d.handle.metrics().lagged_drops.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Resuming from the cursor gets everything.
    let mut again = d.handle.subscribe(Filter::default(), Some(2)).await.unwrap();
    for seq in 3..=102 {
        assert_eq!(again.next().await.unwrap().seq, seq);
    }
    d.shutdown().await;
}

fn addressed(run: &str, to: &[&str]) -> Message {
    let mut m = message(run, MessageType::ChatMessage);
    m.to = to.iter().map(|a| clutch_proto::message::Recipient { agent_id: (*a).to_owned() }).collect();
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inboxes_get_their_recipients_events_live_and_after_catch_up() {
    let d = start(Options { subscriber_buffer: 16, ..Options::default() });
    let run = id::generate(Kind::Run);
    let inbox = |agent: &str| Filter { to: Some(agent.to_owned()), ..Filter::default() };
    d.handle.append_one(addressed(&run, &["agent:a"])).await.unwrap(); // seq 1
    let mut a = d.handle.subscribe(inbox("agent:a"), Some(0)).await.unwrap();
    let mut b = d.handle.subscribe(inbox("agent:b"), None).await.unwrap();
    let mut all = d.handle.subscribe(Filter::default(), None).await.unwrap();
    for to in [&["agent:b"][..], &["agent:a", "agent:b"], &[], &["agent:c"], &["agent:a"]] {
        d.handle.append_one(addressed(&run, to)).await.unwrap(); // seqs 2..=6
    }
    async fn seqs(n: usize, sub: &mut clutch_core::Subscription) -> Vec<u64> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(sub.next().await.unwrap().seq);
        }
        out
    }
    assert_eq!(seqs(3, &mut a).await, vec![1, 3, 6], "a's inbox: caught up, then live");
    assert_eq!(seqs(2, &mut b).await, vec![2, 3]);
    assert_eq!(seqs(5, &mut all).await, vec![2, 3, 4, 5, 6], "the general channel sees every event");

    // An inbox, live, that reads nothing while more than its buffer arrives is cut off with its cursor.
    d.handle.append_one(addressed(&run, &["agent:b"])).await.unwrap(); // seq 7
    assert_eq!(b.next().await.unwrap().seq, 7);
    let batch: Vec<Message> = (0..40).map(|_| addressed(&run, &["agent:b"])).collect();
    d.handle.append(batch).await.unwrap();
    assert_eq!(b.next().await.unwrap_err(), End::Lagged { last_seq: 7 });
    let mut again = d.handle.subscribe(inbox("agent:b"), Some(7)).await.unwrap();
    assert_eq!(again.next().await.unwrap().seq, 8, "resuming from the cursor skips nothing");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_subscriptions_and_refuses_appends() {
    let d = start(Options::default());
    let run = id::generate(Kind::Run);
    d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap();
    let mut sub = d.handle.subscribe(Filter::default(), Some(0)).await.unwrap();
    assert_eq!(sub.next().await.unwrap().seq, 1);
    let handle = d.handle.clone();
    let waiting = tokio::spawn(async move { sub.next().await });
    d.shutdown().await;
    assert_eq!(waiting.await.unwrap().unwrap_err(), End::Shutdown { last_seq: 1 });
    let err = handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap_err();
    assert_eq!(err.code(), clutch_proto::ErrorCode::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_limit_is_enforced() {
    let d = start(Options { artifact_max_bytes: 10, ..Options::default() });
    let ok = d.handle.put_artifact(bytes::Bytes::from_static(b"0123456789")).await.unwrap();
    assert_eq!(ok.size, 10);
    let err = d.handle.put_artifact(bytes::Bytes::from_static(b"0123456789A")).await.unwrap_err();
    assert_eq!(err.code(), clutch_proto::ErrorCode::PayloadTooLarge);
    assert!(err.to_string().contains("limit of 10 bytes"), "{err}");
    d.shutdown().await;
}
