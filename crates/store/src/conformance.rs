//! The conformance suite every backend runs: written once here, instantiated by each backend's tests
//! with [`conformance_tests!`](crate::conformance_tests) and a [`Harness`] that opens fresh storage.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use serde_json::json;

use crate::{Backend, Error, Filter, Snapshot};

/// Opens a backend on storage private to one test; `open` called again reopens the same storage.
#[async_trait::async_trait]
pub trait Harness: Send + Sync {
    async fn open(&self) -> Arc<dyn Backend>;
}

/// Expands to one `#[tokio::test]` per conformance case; `$make` is an async expression yielding a
/// fresh `impl Harness` for each test.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@cases $make;
            empty_log_has_head_zero, seq_is_gap_free_and_increasing, get_by_id, filters_select_by_each_index,
            filters_combine_with_and, paging_with_after_and_limit, duplicate_id_answers_original_seq,
            duplicate_ignores_ts, id_conflict_is_refused, same_id_in_another_run_conflicts,
            idempotency_key_dedups_within_run, duplicates_within_one_batch, concurrent_appends_of_one_id,
            conflict_does_not_spoil_the_batch, artifacts_round_trip, large_run_pages_in_order,
            reopen_keeps_everything, closed_store_refuses, inbox_reads_by_recipient,
            cursors_are_saved_and_replaced, snapshots_are_saved_and_replaced, records_are_kept_apart, written_batches_chain_and_sync,
            blocking_writes_answer_as_the_async_ones, removing_a_run_keeps_the_rest,
            lists_follow_runs_threads_and_tasks, list_pages_neither_skip_nor_repeat_while_events_arrive,
            search_finds_text_ranked_and_filtered, lists_survive_reopen_rebuild_and_retention);
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let harness = $make.await;
                $crate::conformance::$case(&harness).await;
            }
        )*
    };
}

/// A valid message of `kind` (one whose payload needs no fields, so not `task.error`/`tool.error`) in `run`/`thread`/`task` from `from`, with a fresh id.
pub fn message(run: &str, thread: &str, task: &str, from: &str, kind: MessageType) -> Message {
    let value = json!({
        "thread_id": thread, "run_id": run, "task_id": task,
        "from": {"agent_id": from}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": kind.as_str(), "payload": {"text": "hello", "n": 1},
    });
    validate::message(&value, &Defaults { now: SystemTime::now() }).expect("test message is valid")
}

fn ids() -> (String, String, String) {
    (id::generate(Kind::Run), id::generate(Kind::Thread), id::generate(Kind::Task))
}

fn simple() -> Message {
    let (r, t, k) = ids();
    message(&r, &t, &k, "agent:ken", MessageType::ChatMessage)
}

async fn append_one(store: &dyn Backend, m: &Message) -> crate::Result<crate::Outcome> {
    let mut out = store.append_messages(std::slice::from_ref(m)).await.expect("batch commits");
    assert_eq!(out.len(), 1);
    out.pop().unwrap()
}

pub async fn empty_log_has_head_zero(h: &impl Harness) {
    let s = h.open().await;
    assert_eq!(s.head().await.unwrap(), 0);
    assert!(s.read(&Filter::default(), 0, 10).await.unwrap().is_empty());
    assert!(s.get("msg_01HX0000000000000000000000").await.unwrap().is_none());
}

pub async fn seq_is_gap_free_and_increasing(h: &impl Harness) {
    let s = h.open().await;
    let mut expected = 1;
    for batch_len in [1, 5, 1, 32, 3] {
        let batch: Vec<Message> = (0..batch_len).map(|_| simple()).collect();
        let out = s.append_messages(&batch).await.unwrap();
        for (m, o) in batch.iter().zip(out) {
            let o = o.unwrap();
            assert_eq!((o.seq, o.duplicate, o.id.as_str()), (expected, false, m.id.as_str()));
            expected += 1;
        }
    }
    assert_eq!(s.head().await.unwrap(), expected - 1);
    let all = s.read(&Filter::default(), 0, 1000).await.unwrap();
    let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..expected).collect::<Vec<_>>());
}

pub async fn get_by_id(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    let o = append_one(&*s, &m).await.unwrap();
    let e = s.get(&m.id).await.unwrap().expect("stored");
    assert_eq!(e.seq, o.seq);
    assert_eq!(e.message().unwrap(), m);
    assert_eq!(&*e.json, m.to_canonical_json());
}

pub async fn filters_select_by_each_index(h: &impl Harness) {
    let s = h.open().await;
    let (r1, t1, k1) = ids();
    let (r2, t2, k2) = ids();
    let batch = vec![
        message(&r1, &t1, &k1, "agent:a", MessageType::TaskRequest),
        message(&r2, &t2, &k2, "agent:b", MessageType::ChatMessage),
        message(&r1, &t2, &k2, "agent:b", MessageType::TaskResult),
        message(&r2, &t1, &k1, "agent:a", MessageType::ChatMessage),
    ];
    for o in s.append_messages(&batch).await.unwrap() {
        o.unwrap();
    }
    let seqs = |f: Filter| {
        let s = s.clone();
        async move { s.read(&f, 0, 100).await.unwrap().iter().map(|e| e.seq).collect::<Vec<_>>() }
    };
    assert_eq!(seqs(Filter { run_id: Some(r1.clone()), ..Filter::default() }).await, [1, 3]);
    assert_eq!(seqs(Filter { thread_id: Some(t1.clone()), ..Filter::default() }).await, [1, 4]);
    assert_eq!(seqs(Filter { task_id: Some(k2.clone()), ..Filter::default() }).await, [2, 3]);
    assert_eq!(seqs(Filter { agent_id: Some("agent:a".into()), ..Filter::default() }).await, [1, 4]);
    assert_eq!(seqs(Filter { kind: Some(MessageType::ChatMessage), ..Filter::default() }).await, [2, 4]);
    assert_eq!(seqs(Filter { run_id: Some(id::generate(Kind::Run)), ..Filter::default() }).await, [0u64; 0]);
    for e in s.read(&Filter::default(), 0, 100).await.unwrap() {
        let m = e.message().unwrap();
        let f = Filter { run_id: Some(m.run_id.clone()), kind: Some(m.kind), ..Filter::default() };
        assert!(f.matches(&m));
    }
}

pub async fn filters_combine_with_and(h: &impl Harness) {
    let s = h.open().await;
    let (r, t, k) = ids();
    let batch = vec![
        message(&r, &t, &k, "agent:a", MessageType::TaskRequest),
        message(&r, &t, &k, "agent:b", MessageType::TaskRequest),
        message(&r, &t, &k, "agent:a", MessageType::TaskResult),
    ];
    for o in s.append_messages(&batch).await.unwrap() {
        o.unwrap();
    }
    let f = Filter {
        run_id: Some(r),
        thread_id: Some(t),
        agent_id: Some("agent:a".into()),
        kind: Some(MessageType::TaskResult),
        task_id: Some(k),
        to: Some("agent:orchestrator".into()),
    };
    let got: Vec<u64> = s.read(&f, 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(got, [3]);
}

pub async fn paging_with_after_and_limit(h: &impl Harness) {
    let s = h.open().await;
    let (r, t, k) = ids();
    let batch: Vec<Message> = (0..25).map(|_| message(&r, &t, &k, "agent:a", MessageType::TaskProgress)).collect();
    s.append_messages(&batch).await.unwrap();
    let f = Filter { run_id: Some(r), ..Filter::default() };
    let mut after = 0;
    let mut pages = Vec::new();
    loop {
        let page = s.read(&f, after, 10).await.unwrap();
        if page.is_empty() {
            break;
        }
        pages.push(page.len());
        after = page.last().unwrap().seq;
    }
    assert_eq!(pages, [10, 10, 5]);
    assert_eq!(after, 25);
    let tail = s.read(&f, 20, 100).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [21, 22, 23, 24, 25]);
}

pub async fn duplicate_id_answers_original_seq(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    let first = append_one(&*s, &simple()).await.unwrap();
    let original = append_one(&*s, &m).await.unwrap();
    assert_eq!((first.seq, original.seq), (1, 2));
    let again = append_one(&*s, &m).await.unwrap();
    assert_eq!(again, crate::Outcome { id: m.id.clone(), seq: 2, duplicate: true });
    assert_eq!(s.head().await.unwrap(), 2, "a duplicate stores nothing");
}

pub async fn duplicate_ignores_ts(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    append_one(&*s, &m).await.unwrap();
    let mut retry = m.clone();
    retry.ts = validate::format_ts(SystemTime::now() + Duration::from_secs(5));
    let o = append_one(&*s, &retry).await.unwrap();
    assert!(o.duplicate);
    assert_eq!(s.get(&m.id).await.unwrap().unwrap().message().unwrap().ts, m.ts, "the original is kept");
}

pub async fn id_conflict_is_refused(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    append_one(&*s, &m).await.unwrap();
    let mut changed = m.clone();
    changed.payload.insert("text".into(), json!("something else"));
    match append_one(&*s, &changed).await {
        Err(Error::IdConflict { id, seq }) => assert_eq!((id.as_str(), seq), (m.id.as_str(), 1)),
        other => panic!("expected IdConflict, got {other:?}"),
    }
    assert_eq!(s.head().await.unwrap(), 1);
    assert_eq!(s.get(&m.id).await.unwrap().unwrap().message().unwrap(), m, "never overwritten");
}

pub async fn same_id_in_another_run_conflicts(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    append_one(&*s, &m).await.unwrap();
    let mut other = m.clone();
    other.run_id = id::generate(Kind::Run);
    assert!(matches!(append_one(&*s, &other).await, Err(Error::IdConflict { .. })));
}

pub async fn idempotency_key_dedups_within_run(h: &impl Harness) {
    let s = h.open().await;
    let mut a = simple();
    a.idempotency_key = Some("idem-1".into());
    let first = append_one(&*s, &a).await.unwrap();
    let mut b = simple();
    b.run_id = a.run_id.clone();
    b.idempotency_key = Some("idem-1".into());
    let again = append_one(&*s, &b).await.unwrap();
    assert_eq!(again, crate::Outcome { id: a.id.clone(), seq: first.seq, duplicate: true });
    assert!(s.get(&b.id).await.unwrap().is_none(), "the repeat is not stored");
    let mut c = simple();
    c.idempotency_key = Some("idem-1".into());
    let other_run = append_one(&*s, &c).await.unwrap();
    assert!(!other_run.duplicate, "keys are scoped to their run");
}

/// A batch of five: a message with an idempotency key, the same message again, another message of its
/// run with the same key, a message with its id but another body, and a fresh one. Returns the batch,
/// the first and the fresh one.
fn batch_of_duplicates() -> (Vec<Message>, Message, Message) {
    let mut a = simple();
    a.idempotency_key = Some("k".into());
    let mut same_key = simple();
    same_key.run_id = a.run_id.clone();
    same_key.idempotency_key = Some("k".into());
    let mut conflicting = a.clone();
    conflicting.payload.insert("n".into(), json!(2));
    let fresh = simple();
    (vec![a.clone(), a.clone(), same_key, conflicting, fresh.clone()], a, fresh)
}

/// The answers to [`batch_of_duplicates`] appended to an empty log.
fn assert_duplicates_answered(out: &[crate::Result<crate::Outcome>], a: &Message, fresh: &Message) {
    assert_eq!(out[0].as_ref().unwrap(), &crate::Outcome { id: a.id.clone(), seq: 1, duplicate: false });
    assert_eq!(out[1].as_ref().unwrap(), &crate::Outcome { id: a.id.clone(), seq: 1, duplicate: true });
    assert_eq!(out[2].as_ref().unwrap(), &crate::Outcome { id: a.id.clone(), seq: 1, duplicate: true });
    assert!(matches!(out[3], Err(Error::IdConflict { seq: 1, .. })));
    assert_eq!(out[4].as_ref().unwrap(), &crate::Outcome { id: fresh.id.clone(), seq: 2, duplicate: false });
}

pub async fn duplicates_within_one_batch(h: &impl Harness) {
    let s = h.open().await;
    let (batch, a, fresh) = batch_of_duplicates();
    let out = s.append_messages(&batch).await.unwrap();
    assert_duplicates_answered(&out, &a, &fresh);
    assert_eq!(s.head().await.unwrap(), 2);
}

pub async fn concurrent_appends_of_one_id(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (s, m) = (s.clone(), m.clone());
            tokio::spawn(async move {
                let other = simple();
                let batch = if i % 2 == 0 { vec![m, other] } else { vec![other, m] };
                let out = s.append_messages(&batch).await.unwrap();
                let pos = if i % 2 == 0 { 0 } else { 1 };
                out.into_iter().nth(pos).unwrap().unwrap()
            })
        })
        .collect();
    let outcomes: Vec<_> = futures_util::future::join_all(tasks).await.into_iter().map(|r| r.unwrap()).collect();
    let seqs: HashSet<u64> = outcomes.iter().map(|o| o.seq).collect();
    assert_eq!(seqs.len(), 1, "every caller is told the same seq: {outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| !o.duplicate).count(), 1, "exactly one stored it");
    let all = s.read(&Filter::default(), 0, 1000).await.unwrap();
    assert_eq!(all.len(), 17);
    assert_eq!(all.iter().filter(|e| e.message().unwrap().id == m.id).count(), 1);
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=17).collect::<Vec<_>>());
}

pub async fn conflict_does_not_spoil_the_batch(h: &impl Harness) {
    let s = h.open().await;
    let m = simple();
    append_one(&*s, &m).await.unwrap();
    let mut bad = m.clone();
    bad.payload.insert("n".into(), json!(99));
    let (x, y) = (simple(), simple());
    let out = s.append_messages(&[x.clone(), bad, y.clone()]).await.unwrap();
    assert_eq!(out[0].as_ref().unwrap().seq, 2);
    assert!(out[1].is_err());
    assert_eq!(out[2].as_ref().unwrap().seq, 3);
    assert!(s.get(&x.id).await.unwrap().is_some() && s.get(&y.id).await.unwrap().is_some());
}

pub async fn artifacts_round_trip(h: &impl Harness) {
    let s = h.open().await;
    let data = Bytes::from(vec![7u8; 100_000]);
    let a = s.put_artifact(data.clone()).await.unwrap();
    assert_eq!(a.reference, format!("artifact:sha256:{}", crate::sha256_hex(&data)));
    assert_eq!((a.size, a.existed), (100_000, false));
    let again = s.put_artifact(data.clone()).await.unwrap();
    assert!(again.existed);
    assert_eq!(s.get_artifact(&crate::sha256_hex(&data)).await.unwrap().unwrap(), data);
    assert!(s.get_artifact(&crate::sha256_hex(b"absent")).await.unwrap().is_none());
    let empty = s.put_artifact(Bytes::new()).await.unwrap();
    assert_eq!(s.get_artifact(&crate::sha256_hex(b"")).await.unwrap().unwrap().len(), 0);
    assert_eq!(empty.size, 0);
}

pub async fn large_run_pages_in_order(h: &impl Harness) {
    let s = h.open().await;
    let (r, t, k) = ids();
    let mut ours = 0;
    for round in 0..20 {
        let batch: Vec<Message> = (0..500)
            .map(|i| {
                if (i + round) % 3 == 0 {
                    ours += 1;
                    message(&r, &t, &k, "agent:a", MessageType::TaskProgress)
                } else {
                    simple()
                }
            })
            .collect();
        s.append_messages(&batch).await.unwrap();
    }
    let f = Filter { run_id: Some(r), ..Filter::default() };
    let (mut after, mut count) = (0, 0);
    loop {
        let page = s.read(&f, after, 1000).await.unwrap();
        let Some(last) = page.last() else { break };
        assert!(page.windows(2).all(|w| w[0].seq < w[1].seq));
        assert!(page[0].seq > after);
        count += page.len();
        after = last.seq;
    }
    assert_eq!(count, ours);
    assert_eq!(s.head().await.unwrap(), 10_000);
}

pub async fn reopen_keeps_everything(h: &impl Harness) {
    let m = simple();
    let art = Bytes::from_static(b"kept across restarts");
    {
        let s = h.open().await;
        append_one(&*s, &simple()).await.unwrap();
        append_one(&*s, &m).await.unwrap();
        s.put_artifact(art.clone()).await.unwrap();
        s.close().await;
    }
    let s = h.open().await;
    assert_eq!(s.head().await.unwrap(), 2);
    assert_eq!(s.get(&m.id).await.unwrap().unwrap().seq, 2);
    assert!(append_one(&*s, &m).await.unwrap().duplicate, "dedup survives a restart");
    assert_eq!(append_one(&*s, &simple()).await.unwrap().seq, 3);
    assert_eq!(s.get_artifact(&crate::sha256_hex(&art)).await.unwrap().unwrap(), art);
}

/// `write_batch` commits without waiting for durability: the next batch builds on it (seqs continue,
/// dedup sees it), readers see it, and after `sync` it survives a reopen like any append.
pub async fn written_batches_chain_and_sync(h: &impl Harness) {
    let first = simple();
    let second = simple();
    {
        let s = h.open().await;
        let a = s.write_batch(&[crate::Entry::new(first.clone())]).await.unwrap();
        assert_eq!(a[0].as_ref().unwrap().seq, 1);
        let b = s.write_batch(&[crate::Entry::new(first.clone()), crate::Entry::new(second.clone())]).await.unwrap();
        let b: Vec<_> = b.into_iter().map(|o| o.unwrap()).collect();
        assert!(b[0].duplicate && b[0].seq == 1, "an unsynced batch already deduplicates the next one");
        assert_eq!((b[1].seq, b[1].duplicate), (2, false));
        assert_eq!(s.head().await.unwrap(), 2);
        s.sync().await.unwrap();
        s.sync().await.unwrap();
        s.close().await;
    }
    let s = h.open().await;
    assert_eq!(s.get(&second.id).await.unwrap().unwrap().seq, 2);
}

/// A backend's blocking write path, when it has one, answers exactly as the async one: dedup within
/// and across batches, conflicts, chained unsynced batches, durability once synced, refusal once
/// closed. (A backend without one passes trivially.)
pub async fn blocking_writes_answer_as_the_async_ones(h: &impl Harness) {
    let s = h.open().await;
    let Some(blocking) = s.blocking_writes() else { return };
    let (batch, a, fresh) = batch_of_duplicates();
    let later = simple();
    let entries = |ms: &[Message]| ms.iter().cloned().map(crate::Entry::new).collect::<Vec<_>>();
    let (first, second, third) = (entries(&batch), entries(&[fresh.clone(), later.clone()]), entries(&[simple()]));
    let on_thread = blocking.clone();
    let (out, chained) = tokio::task::spawn_blocking(move || {
        let out = on_thread.write_batch(&first).unwrap();
        on_thread.sync().unwrap();
        (out, on_thread.write_batch(&second).unwrap())
    })
    .await
    .unwrap();
    assert_duplicates_answered(&out, &a, &fresh);
    assert_eq!(chained[0].as_ref().unwrap(), &crate::Outcome { id: fresh.id.clone(), seq: 2, duplicate: true });
    assert_eq!(chained[1].as_ref().unwrap(), &crate::Outcome { id: later.id.clone(), seq: 3, duplicate: false });
    assert_eq!(s.head().await.unwrap(), 3);
    s.sync().await.unwrap();
    s.close().await;
    let refused = tokio::task::spawn_blocking(move || (blocking.write_batch(&third), blocking.sync())).await.unwrap();
    assert!(matches!(refused.0, Err(Error::Closed)), "{:?}", refused.0);
    assert!(matches!(refused.1, Err(Error::Closed)), "{:?}", refused.1);
    let s = h.open().await;
    assert_eq!(s.get(&later.id).await.unwrap().unwrap().seq, 3);
    assert_eq!(s.head().await.unwrap(), 3);
}

pub async fn closed_store_refuses(h: &impl Harness) {
    let s = h.open().await;
    s.close().await;
    assert!(matches!(s.append_messages(&[simple()]).await, Err(Error::Closed)));
    assert!(matches!(s.head().await, Err(Error::Closed)));
}

pub async fn inbox_reads_by_recipient(h: &impl Harness) {
    let s = h.open().await;
    let (r, t, k) = ids();
    let to = |m: &mut Message, agents: &[&str]| {
        m.to = agents.iter().map(|a| crate::conformance::recipient(a)).collect();
    };
    let mut batch: Vec<Message> = (0..6).map(|_| message(&r, &t, &k, "agent:x", MessageType::ChatMessage)).collect();
    to(&mut batch[0], &["agent:a"]);
    to(&mut batch[1], &["agent:b"]);
    to(&mut batch[2], &["agent:a", "agent:b"]);
    to(&mut batch[3], &[]);
    to(&mut batch[4], &["agent:a", "agent:a"]);
    batch[5].kind = MessageType::TaskRequest;
    to(&mut batch[5], &["agent:a"]);
    for o in s.append_messages(&batch).await.unwrap() {
        o.unwrap();
    }
    // A duplicate adds no second recipient row.
    assert!(append_one(&*s, &batch[0]).await.unwrap().duplicate);
    let seqs = |f: Filter, after: u64, limit: usize| {
        let s = s.clone();
        async move { s.read(&f, after, limit).await.unwrap().iter().map(|e| e.seq).collect::<Vec<_>>() }
    };
    let inbox = |a: &str| Filter { to: Some(a.into()), ..Filter::default() };
    assert_eq!(seqs(inbox("agent:a"), 0, 100).await, [1, 3, 5, 6]);
    assert_eq!(seqs(inbox("agent:b"), 0, 100).await, [2, 3]);
    assert_eq!(seqs(inbox("agent:a"), 3, 1).await, [5]);
    assert_eq!(seqs(Filter { kind: Some(MessageType::TaskRequest), ..inbox("agent:a") }, 0, 100).await, [6]);
    assert_eq!(seqs(inbox("agent:nobody"), 0, 100).await, [0u64; 0]);
    for e in s.read(&inbox("agent:a"), 0, 100).await.unwrap() {
        assert!(inbox("agent:a").matches(&e.message().unwrap()));
    }
}

fn recipient(agent: &str) -> clutch_proto::message::Recipient {
    clutch_proto::message::Recipient { agent_id: agent.to_owned() }
}

pub async fn cursors_are_saved_and_replaced(h: &impl Harness) {
    let s = h.open().await;
    assert_eq!(s.cursor("push:agent:a").await.unwrap(), None);
    s.set_cursor("push:agent:a", 7).await.unwrap();
    s.set_cursor("push:agent:b", 3).await.unwrap();
    s.set_cursor("push:agent:a", 9).await.unwrap();
    assert_eq!(s.cursor("push:agent:a").await.unwrap(), Some(9));
    assert_eq!(s.cursor("push:agent:b").await.unwrap(), Some(3));
    s.close().await;
    let s = h.open().await;
    assert_eq!(s.cursor("push:agent:a").await.unwrap(), Some(9), "a cursor survives a reopen");
}

pub async fn snapshots_are_saved_and_replaced(h: &impl Harness) {
    let s = h.open().await;
    assert_eq!(s.snapshot("engine").await.unwrap(), None);
    let first = Snapshot { seq: 5, body: Bytes::from_static(b"{\"a\":1}") };
    let big = Snapshot { seq: 12, body: Bytes::from(vec![7u8; 3 << 20]) };
    s.set_snapshot("engine", &first).await.unwrap();
    s.set_snapshot("other", &first).await.unwrap();
    assert_eq!(s.snapshot("engine").await.unwrap(), Some(first.clone()));
    s.set_snapshot("engine", &big).await.unwrap();
    s.close().await;
    let s = h.open().await;
    assert_eq!(s.snapshot("engine").await.unwrap(), Some(big), "the newest snapshot survives a reopen");
    assert_eq!(s.snapshot("other").await.unwrap(), Some(first));
}

pub async fn records_are_kept_apart(h: &impl Harness) {
    let s = h.open().await;
    assert_eq!(s.record("a2a.push", "t1/c1").await.unwrap(), None);
    assert!(s.records("a2a.push").await.unwrap().is_empty());
    s.put_record("a2a.push", "t1/c1", Bytes::from_static(b"one")).await.unwrap();
    s.put_record("a2a.push", "t1/c2", Bytes::from_static(b"two")).await.unwrap();
    s.put_record("other", "t1/c1", Bytes::from_static(b"elsewhere")).await.unwrap();
    s.put_record("a2a.push", "t1/c1", Bytes::from_static(b"one again")).await.unwrap();
    assert_eq!(s.record("a2a.push", "t1/c1").await.unwrap(), Some(Bytes::from_static(b"one again")));
    assert!(s.delete_record("a2a.push", "t1/c2").await.unwrap());
    assert!(!s.delete_record("a2a.push", "t1/c2").await.unwrap(), "deleting twice deletes once");
    s.close().await;
    let s = h.open().await;
    let kept = s.records("a2a.push").await.unwrap();
    assert_eq!(kept, vec![("t1/c1".to_owned(), Bytes::from_static(b"one again"))], "records survive a reopen");
    assert_eq!(s.records("other").await.unwrap().len(), 1, "spaces are apart");
    assert_eq!(s.head().await.unwrap(), 0, "records are not in the log");
}

/// Retention's removal: a run's events go oldest first, in chunks, with their inbox rows; other runs,
/// the dedup of what remains and the head stay, and `seq` never goes back, even when the newest
/// events were removed and the store reopened.
pub async fn removing_a_run_keeps_the_rest(h: &impl Harness) {
    let s = h.open().await;
    let (old, t, k) = ids();
    let (kept, t2, k2) = ids();
    let mut batch = Vec::new();
    for i in 0..5 {
        let mut m = message(&old, &t, &k, "agent:x", MessageType::ChatMessage);
        m.to = vec![recipient("agent:a")];
        batch.push(m);
        let mut m = message(&kept, &t2, &k2, "agent:x", MessageType::ChatMessage);
        m.to = vec![recipient("agent:a")];
        m.idempotency_key = Some(format!("kept-{i}"));
        batch.push(m);
    }
    // The log's newest event belongs to the removed run.
    batch.push(message(&old, &t, &k, "agent:x", MessageType::ChatMessage));
    for o in s.append_messages(&batch).await.unwrap() {
        o.unwrap();
    }
    assert_eq!(s.head().await.unwrap(), 11);
    let run = |r: &str| Filter { run_id: Some(r.to_owned()), ..Filter::default() };
    let inbox = Filter { to: Some("agent:a".into()), ..Filter::default() };
    assert_eq!(s.remove_run(&old, u64::MAX, 2).await.unwrap(), 2, "the oldest two first");
    let left: Vec<u64> = s.read(&run(&old), 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(left, [5, 7, 9, 11]);
    assert_eq!(s.remove_run(&old, 9, 100).await.unwrap(), 3, "only up to the bound");
    let left: Vec<u64> = s.read(&run(&old), 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(left, [11]);
    assert_eq!(s.remove_run(&old, 9, 100).await.unwrap(), 0, "nothing is left up to the bound");
    assert_eq!(s.remove_run(&old, u64::MAX, 100).await.unwrap(), 1);
    assert_eq!(s.remove_run(&old, u64::MAX, 100).await.unwrap(), 0, "nothing is left to remove");
    assert!(s.read(&run(&old), 0, 100).await.unwrap().is_empty());
    assert!(s.get(&batch[0].id).await.unwrap().is_none());
    let inbox_seqs: Vec<u64> = s.read(&inbox, 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(inbox_seqs, [2, 4, 6, 8, 10], "the removed run's inbox rows went with it");
    let all: Vec<u64> = s.read(&Filter::default(), 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(all, [2, 4, 6, 8, 10]);
    assert_eq!(s.head().await.unwrap(), 11, "the head does not move back");
    // What remains still dedups, by id and by idempotency key.
    assert_eq!(append_one(&*s, &batch[1]).await.unwrap().seq, 2);
    let mut again = message(&kept, &t2, &k2, "agent:y", MessageType::ChatMessage);
    again.idempotency_key = Some("kept-4".into());
    assert_eq!(
        append_one(&*s, &again).await.unwrap(),
        crate::Outcome { id: batch[9].id.clone(), seq: 10, duplicate: true }
    );
    let next = append_one(&*s, &simple()).await.unwrap();
    assert_eq!(next.seq, 12, "the next append continues after the highest seq ever assigned");
    s.close().await;
    let s = h.open().await;
    assert_eq!(s.head().await.unwrap(), 12);
    let (a, b) = (simple(), simple());
    s.remove_run(&a.run_id, u64::MAX, 10).await.unwrap();
    for m in [&a, &b] {
        append_one(&*s, m).await.unwrap();
    }
    s.remove_run(&b.run_id, u64::MAX, 10).await.unwrap();
    s.close().await;
    let s = h.open().await;
    assert_eq!(s.head().await.unwrap(), 14, "removing the newest event keeps its seq taken across a reopen");
    assert_eq!(append_one(&*s, &simple()).await.unwrap().seq, 15);
}

// ---- Lists and search ([`crate::lists`]) ----

use crate::lists::{Cursor, Query, RunKind, RunState};

/// A message of `kind` with `payload`, from `from` to `to`.
pub fn message_with(
    (run, thread, task): (&str, &str, &str),
    from: &str,
    to: &str,
    kind: MessageType,
    payload: serde_json::Value,
) -> Message {
    let value = json!({
        "thread_id": thread, "run_id": run, "task_id": task,
        "from": {"agent_id": from}, "to": [{"agent_id": to}],
        "type": kind.as_str(), "payload": payload,
    });
    validate::message(&value, &Defaults { now: SystemTime::now() }).expect("test message is valid")
}

async fn append_all(s: &dyn Backend, batch: &[Message]) {
    for o in s.append_messages(batch).await.unwrap() {
        o.unwrap();
    }
}

fn first(limit: usize) -> Query {
    Query { limit, ..Query::default() }
}

/// A task's life, a failed task, a chat and a workflow: rows, states, titles, counts and filters.
pub async fn lists_follow_runs_threads_and_tasks(h: &impl Harness) {
    use MessageType as T;
    let s = h.open().await;
    let (r1, th1, k1) = ids();
    let sub = id::generate(Kind::Task);
    let at = (r1.as_str(), th1.as_str(), k1.as_str());
    let mut request = message_with(
        at,
        "user:ann",
        "agent:orchestrator",
        T::TaskRequest,
        json!({"goal": "Summarize   the quarterly report"}),
    );
    request.requires = vec!["skill:summarize".into()];
    let mut child = message_with(
        (&r1, &th1, &sub),
        "agent:writer",
        "agent:orchestrator",
        T::TaskRequest,
        json!({"goal": "find the numbers"}),
    );
    child.parent_task_id = Some(k1.clone());
    child.requires = vec!["skill:numbers".into()];
    append_all(
        &*s,
        &[
            request,
            message_with(
                at,
                "agent:orchestrator",
                "agent:writer",
                T::RoutingDecision,
                json!({"selected": "agent:writer"}),
            ),
            message_with(at, "agent:writer", "user:ann", T::TaskAccept, json!({})),
            message_with(at, "agent:writer", "user:ann", T::TaskProgress, json!({"text": "halfway"})),
            child,
        ],
    )
    .await;
    let (r2, th2, k2) = ids();
    let at2 = (r2.as_str(), th2.as_str(), k2.as_str());
    append_all(
        &*s,
        &[
            message_with(at2, "user:bob", "agent:coder", T::TaskRequest, json!({"goal": "fix the build"})),
            message_with(at2, "agent:coder", "user:bob", T::TaskAccept, json!({})),
            message_with(
                at2,
                "agent:coder",
                "user:bob",
                T::TaskError,
                json!({"code": "TOOL_FAILED", "message": "linker exploded", "retryable": false}),
            ),
        ],
    )
    .await;
    let (r3, th3, k3) = ids();
    append_all(
        &*s,
        &[message_with((&r3, &th3, &k3), "user:cy", "agent:helper", T::ChatMessage, json!({"text": "hello there"}))],
    )
    .await;
    append_all(&*s, &[message_with(at, "agent:writer", "user:ann", T::TaskResult, json!({"text": "done"}))]).await;

    let runs = s.list_runs(&first(10)).await.unwrap();
    assert_eq!(runs.as_of, 10);
    assert_eq!(runs.next, None);
    let order: Vec<&str> = runs.items.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(order, [r1.as_str(), r3.as_str(), r2.as_str()], "by last activity, newest first");
    let run1 = &runs.items[0];
    assert_eq!(run1.title, "Summarize the quarterly report");
    assert_eq!((run1.kind, run1.state), (RunKind::Task, RunState::Completed));
    assert_eq!(run1.root_task_id.as_deref(), Some(k1.as_str()));
    assert_eq!((run1.first_seq, run1.last_seq, run1.events), (1, 10, 6));
    assert_eq!(run1.tasks.get("completed"), Some(&1));
    assert_eq!(run1.tasks.get("requested"), Some(&1));
    assert_eq!(run1.agents, ["agent:writer"]);
    assert_eq!(
        (runs.items[2].state, runs.items[1].state, runs.items[1].kind),
        (RunState::Failed, RunState::Active, RunKind::Chat)
    );
    assert_eq!(runs.items[1].title, "hello there");

    let failed = s.list_runs(&Query { state: Some("failed".into()), ..first(10) }).await.unwrap();
    assert_eq!(failed.items.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [r2.as_str()]);
    let by_agent = s.list_runs(&Query { agent: Some("agent:helper".into()), ..first(10) }).await.unwrap();
    assert_eq!(by_agent.items.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [r3.as_str()]);
    let chats = s.list_runs(&Query { kind: Some("chat".into()), ..first(10) }).await.unwrap();
    assert_eq!(chats.items.len(), 1);

    let tasks = s.list_tasks(&first(10)).await.unwrap();
    let states: Vec<(&str, &str)> = tasks.items.iter().map(|t| (t.task_id.as_str(), t.state.as_str())).collect();
    assert_eq!(states, [(k1.as_str(), "completed"), (k2.as_str(), "failed"), (sub.as_str(), "requested")]);
    let t1 = &tasks.items[0];
    assert_eq!((t1.agent.as_deref(), t1.requester.as_str()), (Some("agent:writer"), "user:ann"));
    assert_eq!((t1.requires.as_slice(), t1.events), (&["skill:summarize".to_owned()][..], 5));
    let err = tasks.items[1].error.as_ref().expect("the error is kept");
    assert_eq!((err.code.as_str(), err.message.as_str()), ("TOOL_FAILED", "linker exploded"));
    let one = |q: Query| {
        let s = s.clone();
        async move { s.list_tasks(&q).await.unwrap().items.into_iter().map(|t| t.task_id).collect::<Vec<_>>() }
    };
    assert_eq!(one(Query { state: Some("failed".into()), ..first(10) }).await, std::slice::from_ref(&k2));
    assert_eq!(one(Query { agent: Some("agent:coder".into()), ..first(10) }).await, std::slice::from_ref(&k2));
    assert_eq!(one(Query { capability: Some("skill:numbers".into()), ..first(10) }).await, std::slice::from_ref(&sub));
    assert_eq!(one(Query { parent_task_id: Some(k1.clone()), ..first(10) }).await, std::slice::from_ref(&sub));
    assert_eq!(one(Query { run_id: Some(r1.clone()), ..first(10) }).await, [k1.clone(), sub.clone()]);
    assert_eq!(one(Query { thread_id: Some(th2.clone()), ..first(10) }).await, std::slice::from_ref(&k2));
    let t1_ms = crate::lists::ts_ms(&t1.last_ts);
    assert_eq!(one(Query { since_ms: Some(t1_ms + 60_000), ..first(10) }).await, Vec::<String>::new());
    assert_eq!(one(Query { until_ms: Some(t1_ms + 60_000), ..first(10) }).await.len(), 3);
    assert_eq!(one(Query { until_ms: Some(0), ..first(10) }).await, Vec::<String>::new());

    let threads = s.list_threads(&first(10)).await.unwrap();
    let t = &threads.items[0];
    assert_eq!((t.thread_id.as_str(), t.run_id.as_str(), t.messages), (th1.as_str(), r1.as_str(), 6));
    assert_eq!(t.title, "Summarize the quarterly report");
    assert_eq!(t.participants, ["user:ann", "agent:writer"]);
    let of_run = s.list_threads(&Query { run_id: Some(r2.clone()), ..first(10) }).await.unwrap();
    assert_eq!(of_run.items.iter().map(|t| t.thread_id.as_str()).collect::<Vec<_>>(), [th2.as_str()]);
    let by_run = s.list_threads(&Query { agent: Some("user:cy".into()), ..first(10) }).await.unwrap();
    assert_eq!(by_run.items.iter().map(|t| t.thread_id.as_str()).collect::<Vec<_>>(), [th3.as_str()]);

    // A workflow: active while planned tasks are open, completed when they all are.
    let (w, wt, root) = ids();
    let (p1, p2) = (id::generate(Kind::Task), id::generate(Kind::Task));
    let mut planned = Vec::new();
    for (p, name) in [(&p1, "design"), (&p2, "build")] {
        let mut m = message_with((&w, &wt, p), "user:ann", "agent:orchestrator", T::TaskRequest, json!({"name": name}));
        m.payload_type = Some("clutch.workflow.task.v1".into());
        m.parent_task_id = Some(root.clone());
        planned.push(m);
    }
    let mut wf = message_with(
        (&w, &wt, &root),
        "agent:orchestrator",
        "agent:orchestrator",
        T::TaskRequest,
        json!({"name": "ship"}),
    );
    wf.payload_type = Some("clutch.workflow.v1".into());
    append_all(&*s, &[wf]).await;
    append_all(&*s, &planned).await;
    append_all(&*s, &[message_with((&w, &wt, &p1), "agent:a", "agent:orchestrator", T::TaskAccept, json!({}))]).await;
    let wfs = s
        .list_tasks(&Query { workflow_id: Some(w.clone()), state: Some("claimed".into()), ..first(10) })
        .await
        .unwrap();
    assert_eq!(wfs.items.iter().map(|t| t.task_id.as_str()).collect::<Vec<_>>(), [p1.as_str()]);
    let run = |s: Arc<dyn Backend>| async move {
        s.list_runs(&Query { kind: Some("workflow".into()), ..first(10) }).await.unwrap().items
    };
    let wr = run(s.clone()).await;
    assert_eq!((wr.len(), wr[0].title.as_str(), wr[0].state), (1, "workflow ship", RunState::Active));
    // The root stands for the workflow: not counted among its tasks, its state the workflow's.
    let counts: Vec<(&str, u64)> = wr[0].tasks.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(counts, [("claimed", 1), ("pending", 1)]);
    let listed = |s: Arc<dyn Backend>, run: String, task: String| async move {
        let q = Query { run_id: Some(run), ..first(10) };
        s.list_tasks(&q).await.unwrap().items.into_iter().find(|t| t.task_id == task).expect("listed")
    };
    assert_eq!(listed(s.clone(), w.clone(), root.clone()).await.state, "in_progress");
    let mut blocked = message_with(
        (&w, &wt, &p1),
        "agent:a",
        "agent:orchestrator",
        T::TaskProgress,
        json!({"status": "blocked", "reason": "waiting for keys"}),
    );
    blocked.payload_type = Some("clutch.workflow.status.v1".into());
    append_all(&*s, &[blocked]).await;
    for p in [&p1, &p2] {
        if p == &p2 {
            append_all(&*s, &[message_with((&w, &wt, p), "agent:a", "agent:orchestrator", T::TaskAccept, json!({}))])
                .await;
        }
        append_all(
            &*s,
            &[message_with((&w, &wt, p), "agent:a", "agent:orchestrator", T::TaskResult, json!({"outcome": "done"}))],
        )
        .await;
    }
    let done = run(s.clone()).await;
    assert_eq!((done[0].state, done[0].tasks.get("completed")), (RunState::Completed, Some(&2)));
    assert_eq!(listed(s.clone(), w.clone(), root.clone()).await.state, "completed");

    // A retryable error is `failed` until the daemon's notice that it will be routed again.
    let (r4, th4, k4) = ids();
    let at4 = (r4.as_str(), th4.as_str(), k4.as_str());
    let error = json!({"code": "TOOL_UNAVAILABLE", "message": "try later", "retryable": true});
    append_all(
        &*s,
        &[
            message_with(at4, "user:dee", "agent:orchestrator", T::TaskRequest, json!({"goal": "fetch"})),
            message_with(at4, "agent:orchestrator", "agent:x", T::RoutingDecision, json!({"selected": "agent:x"})),
            message_with(at4, "agent:x", "user:dee", T::TaskAccept, json!({})),
            message_with(at4, "agent:x", "user:dee", T::TaskError, error),
        ],
    )
    .await;
    assert_eq!(listed(s.clone(), r4.clone(), k4.clone()).await.state, "failed");
    let mut notice =
        message_with(at4, "agent:orchestrator", "user:dee", T::ChatSystem, json!({"message": "routing 2 of 3"}));
    notice.payload_type = Some(crate::lists::TASK_RETRY_PAYLOAD.into());
    append_all(&*s, &[notice]).await;
    assert_eq!(listed(s.clone(), r4.clone(), k4.clone()).await.state, "retrying");
    let mut again = message_with(at4, "agent:orchestrator", "agent:y", T::TaskRequest, json!({"goal": "fetch"}));
    again.attempt = 2;
    append_all(&*s, &[again]).await;
    let t4 = listed(s.clone(), r4.clone(), k4.clone()).await;
    assert_eq!((t4.state.as_str(), t4.agent.as_deref()), ("routed", Some("agent:y")));
}

/// Pages read while other runs move and new ones start: each run that existed at the first page is
/// listed exactly once, none born after it.
pub async fn list_pages_neither_skip_nor_repeat_while_events_arrive(h: &impl Harness) {
    let s = h.open().await;
    let mut runs = Vec::new();
    for i in 0..30 {
        let (r, t, k) = ids();
        append_all(
            &*s,
            &[message_with(
                (&r, &t, &k),
                "user:a",
                "agent:b",
                MessageType::ChatMessage,
                json!({"text": format!("run {i}")}),
            )],
        )
        .await;
        runs.push((r, t, k));
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = s.list_runs(&Query { limit: 7, cursor, ..Query::default() }).await.unwrap();
        assert!(page.items.len() <= 7);
        assert_eq!(page.as_of, 30, "every page is read as of the first");
        seen.extend(page.items.iter().map(|r| r.run_id.clone()));
        pages += 1;
        // Between pages: a run already listed, one not yet listed, and a new run all move.
        let listed = &runs[29 - (pages % 30)];
        let unlisted = &runs[pages];
        let (n, nt, nk) = ids();
        append_all(
            &*s,
            &[
                message_with(
                    (&listed.0, &listed.1, &listed.2),
                    "user:a",
                    "agent:b",
                    MessageType::ChatMessage,
                    json!({"text": "again"}),
                ),
                message_with(
                    (&unlisted.0, &unlisted.1, &unlisted.2),
                    "user:a",
                    "agent:b",
                    MessageType::ChatMessage,
                    json!({"text": "again"}),
                ),
                message_with((&n, &nt, &nk), "user:a", "agent:b", MessageType::ChatMessage, json!({"text": "new"})),
            ],
        )
        .await;
        match page.next {
            Some(next) => cursor = Some(Cursor::decode(&next).expect("a cursor the store made")),
            None => break,
        }
    }
    assert_eq!(pages, 5);
    let want: Vec<String> = runs.iter().rev().map(|r| r.0.clone()).collect();
    assert_eq!(seen, want, "every run once, in the order of the first page's log position");
    // Tasks and threads page the same way.
    let threads = s.list_threads(&first(200)).await.unwrap();
    assert_eq!(threads.items.len(), 35);
    let mut seen = HashSet::new();
    let mut cursor = None;
    loop {
        let page = s.list_threads(&Query { limit: 4, cursor, ..Query::default() }).await.unwrap();
        for t in &page.items {
            assert!(seen.insert(t.thread_id.clone()), "{} repeated", t.thread_id);
        }
        let (n, nt, nk) = ids();
        append_all(
            &*s,
            &[message_with((&n, &nt, &nk), "user:a", "agent:b", MessageType::ChatMessage, json!({"text": "more"}))],
        )
        .await;
        match page.next {
            Some(next) => cursor = Cursor::decode(&next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 35);
}

/// Search: every word must match, best first then newest, filters, snippets, pages.
pub async fn search_finds_text_ranked_and_filtered(h: &impl Harness) {
    use MessageType as T;
    let s = h.open().await;
    let (r1, t1, k1) = ids();
    let (r2, t2, k2) = ids();
    append_all(
        &*s,
        &[
            message_with(
                (&r1, &t1, &k1),
                "user:ann",
                "agent:orchestrator",
                T::TaskRequest,
                json!({"goal": "Migrate the billing database to PostgreSQL"}),
            ),
            message_with(
                (&r1, &t1, &k1),
                "agent:db",
                "user:ann",
                T::ChatMessage,
                json!({"text": "billing billing billing: the billing tables are large"}),
            ),
            message_with(
                (&r2, &t2, &k2),
                "user:bob",
                "agent:orchestrator",
                T::TaskRequest,
                json!({"goal": "Write release notes"}),
            ),
            message_with(
                (&r2, &t2, &k2),
                "agent:x",
                "user:bob",
                T::ChatMessage,
                json!({"text": "nothing to see", "n": 2}),
            ),
        ],
    )
    .await;
    let accept = message_with((&r2, &t2, &k2), "agent:x", "user:bob", T::TaskAccept, json!({}));
    append_all(&*s, &[accept]).await;
    append_all(
        &*s,
        &[message_with(
            (&r2, &t2, &k2),
            "agent:x",
            "user:bob",
            T::TaskError,
            json!({"code": "TOOL_FAILED", "message": "the billing export timed out", "retryable": false}),
        )],
    )
    .await;

    let hits = s.search("billing", &first(10)).await.unwrap();
    let seqs: Vec<u64> = hits.items.iter().map(|h| h.seq).collect();
    assert_eq!(seqs.len(), 3, "{seqs:?}");
    assert_eq!(seqs[0], 2, "the message saying it four times ranks first");
    let hit = &hits.items[0];
    assert_eq!(
        (hit.run_id.as_str(), hit.thread_id.as_str(), hit.task_id.as_str()),
        (r1.as_str(), t1.as_str(), k1.as_str())
    );
    assert_eq!((hit.kind.as_str(), hit.from.as_str()), ("chat.message", "agent:db"));
    assert!(hit.snippet.contains("[billing]"), "{}", hit.snippet);
    assert!(!hit.id.is_empty() && !hit.ts.is_empty());
    let both = s.search("BILLING postgresql", &first(10)).await.unwrap();
    assert_eq!(both.items.iter().map(|h| h.seq).collect::<Vec<_>>(), [1], "every word must match, in any case");
    let error = s.search("export", &first(10)).await.unwrap();
    assert_eq!(error.items.iter().map(|h| h.seq).collect::<Vec<_>>(), [6], "errors' messages are searched");
    let in_run = s.search("billing", &Query { run_id: Some(r2.clone()), ..first(10) }).await.unwrap();
    assert_eq!(in_run.items.iter().map(|h| h.seq).collect::<Vec<_>>(), [6]);
    let by = s.search("billing", &Query { agent: Some("user:ann".into()), ..first(10) }).await.unwrap();
    assert_eq!(by.items.iter().map(|h| h.seq).collect::<Vec<_>>(), [1]);
    assert!(s.search("nonexistentword", &first(10)).await.unwrap().items.is_empty());
    assert!(s.search("\"billing OR", &first(10)).await.is_ok(), "search syntax in the text is only text");

    // Pages: later events never enter a listing begun before them.
    let p1 = s.search("billing", &first(2)).await.unwrap();
    assert_eq!(p1.items.len(), 2);
    let (r3, t3, k3) = ids();
    append_all(
        &*s,
        &[message_with(
            (&r3, &t3, &k3),
            "user:c",
            "agent:d",
            T::ChatMessage,
            json!({"text": "billing billing billing billing billing"}),
        )],
    )
    .await;
    let p2 =
        s.search("billing", &Query { cursor: Cursor::decode(p1.next.as_deref().unwrap()), ..first(2) }).await.unwrap();
    let mut all: Vec<u64> = p1.items.iter().chain(&p2.items).map(|h| h.seq).collect();
    assert_eq!(p2.next, None);
    all.sort();
    assert_eq!(all, [1, 2, 6], "each match once");
    assert_eq!(s.search("billing", &first(10)).await.unwrap().items.len(), 4);
}

/// Lists and search after a reopen, a rebuild from the log, and retention removing a run.
pub async fn lists_survive_reopen_rebuild_and_retention(h: &impl Harness) {
    use MessageType as T;
    let s = h.open().await;
    let mut runs = Vec::new();
    for i in 0..5 {
        let (r, t, k) = ids();
        append_all(
            &*s,
            &[
                message_with(
                    (&r, &t, &k),
                    "user:a",
                    "agent:orchestrator",
                    T::TaskRequest,
                    json!({"goal": format!("errand number{i}")}),
                ),
                message_with((&r, &t, &k), "agent:w", "user:a", T::TaskAccept, json!({})),
            ],
        )
        .await;
        runs.push(r);
    }
    let before = s.list_runs(&first(10)).await.unwrap();
    let tasks_before = s.list_tasks(&first(10)).await.unwrap();
    s.close().await;
    let s = h.open().await;
    assert_eq!(s.list_runs(&first(10)).await.unwrap(), before, "the same after a reopen");
    assert_eq!(s.rebuild_lists().await.unwrap(), 10);
    assert_eq!(s.list_runs(&first(10)).await.unwrap(), before, "the same after a rebuild");
    assert_eq!(s.list_tasks(&first(10)).await.unwrap(), tasks_before);
    assert_eq!(s.search("number3", &first(10)).await.unwrap().items.len(), 1);
    assert_eq!(s.remove_run(&runs[3], u64::MAX, 100).await.unwrap(), 2);
    let left = s.list_runs(&first(10)).await.unwrap();
    assert_eq!(left.items.len(), 4);
    assert!(left.items.iter().all(|r| r.run_id != runs[3]), "a removed run leaves its list");
    assert_eq!(s.list_tasks(&first(10)).await.unwrap().items.len(), 4);
    assert_eq!(s.list_threads(&first(10)).await.unwrap().items.len(), 4);
    assert!(s.search("number3", &first(10)).await.unwrap().items.is_empty(), "and the search index");
    assert_eq!(s.search("errand", &first(10)).await.unwrap().items.len(), 4);
}
