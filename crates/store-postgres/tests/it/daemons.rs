//! Several daemons sharing one database: their appends interleave into one gap-free log, their lists
//! are derived once, their migrations run once, and stores on other schemas stay apart.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use clutch_proto::MessageType;
use clutch_proto::id::{self, Kind};
use clutch_store::conformance::message;
use clutch_store::lists::{Cursor, Query};
use clutch_store::{Backend, Filter, Outcome};
use clutch_store_postgres::{Error, Options, Store};

use crate::harness;

fn fresh() -> clutch_proto::Message {
    let (run, thread, task) = (id::generate(Kind::Run), id::generate(Kind::Thread), id::generate(Kind::Task));
    message(&run, &thread, &task, "agent:a", MessageType::ChatMessage)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_append_one_gap_free_log() {
    let Some(h) = harness().await else { return };
    let daemons: [Arc<Store>; 2] = [Arc::new(h.store().await), Arc::new(h.store().await)];
    let shared = fresh();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (store, shared) = (Arc::clone(&daemons[w % 2]), shared.clone());
            tokio::spawn(async move {
                let mut stored = Vec::new();
                for round in 0..15 {
                    let mut batch: Vec<_> = (0..1 + (w * 7 + round) % 9).map(|_| fresh()).collect();
                    if round == w {
                        batch.insert(batch.len() / 2, shared.clone());
                    }
                    for (m, outcome) in batch.iter().zip(store.append_messages(&batch).await.expect("batch commits")) {
                        stored.push((m.id.clone(), outcome.expect("no conflict")));
                    }
                }
                stored
            })
        })
        .collect();
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    for writer in writers {
        outcomes.extend(writer.await.expect("writer finished"));
    }

    let shared_outcomes: Vec<&Outcome> = outcomes.iter().filter(|(id, _)| *id == shared.id).map(|(_, o)| o).collect();
    assert_eq!(shared_outcomes.len(), 8);
    assert_eq!(shared_outcomes.iter().filter(|o| !o.duplicate).count(), 1, "one daemon stored it");
    assert_eq!(shared_outcomes.iter().map(|o| o.seq).collect::<HashSet<_>>().len(), 1, "all told one seq");

    let new: HashMap<u64, String> =
        outcomes.iter().filter(|(_, o)| !o.duplicate).map(|(id, o)| (o.seq, id.clone())).collect();
    let total = outcomes.iter().filter(|(_, o)| !o.duplicate).count();
    assert_eq!(new.len(), total, "no seq handed out twice");
    let mut seqs: Vec<u64> = new.keys().copied().collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=total as u64).collect::<Vec<_>>(), "gap-free from 1");

    for store in &daemons {
        assert_eq!(store.head().await.unwrap(), total as u64);
        let log = store.read(&Filter::default(), 0, usize::MAX).await.unwrap();
        assert_eq!(log.len(), total);
        for event in log {
            assert_eq!(
                event.message().unwrap().id,
                new[&event.seq],
                "seq {} holds what its writer was told",
                event.seq
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_derive_one_set_of_lists() {
    let Some(h) = harness().await else { return };
    let daemons: [Arc<Store>; 2] = [Arc::new(h.store().await), Arc::new(h.store().await)];
    let runs: Vec<(String, String, String)> =
        (0..4).map(|_| (id::generate(Kind::Run), id::generate(Kind::Thread), id::generate(Kind::Task))).collect();
    // Both daemons append to the same runs and list them meanwhile: their followers and their reads
    // derive the lists at once, and must take turns so that each event counts once.
    let writers: Vec<_> = (0..6)
        .map(|w| {
            let (store, runs) = (Arc::clone(&daemons[w % 2]), runs.clone());
            tokio::spawn(async move {
                let mut appended = vec![0u64; runs.len()];
                for round in 0..12 {
                    let at = (w + round) % runs.len();
                    let (run, thread, task) = &runs[at];
                    let batch: Vec<_> = (0..1 + (w + round) % 4)
                        .map(|_| message(run, thread, task, "agent:a", MessageType::ChatMessage))
                        .collect();
                    for outcome in store.append_messages(&batch).await.expect("batch commits") {
                        outcome.expect("stored");
                    }
                    appended[at] += batch.len() as u64;
                    if round % 3 == 0 {
                        store.list_runs(&Query { limit: 10, ..Query::default() }).await.expect("listed");
                    }
                }
                appended
            })
        })
        .collect();
    let mut appended = vec![0u64; runs.len()];
    for writer in writers {
        for (total, n) in appended.iter_mut().zip(writer.await.expect("writer finished")) {
            *total += n;
        }
    }
    let total: u64 = appended.iter().sum();
    for store in &daemons {
        let listed = store.list_runs(&Query { limit: 10, ..Query::default() }).await.unwrap();
        assert_eq!(listed.as_of, total);
        assert_eq!(listed.items.len(), runs.len());
        for run in &listed.items {
            let at = runs.iter().position(|(id, _, _)| *id == run.run_id).expect("one of the runs");
            assert_eq!(run.events, appended[at], "each event counted once");
        }
        let threads = store.list_threads(&Query { limit: 10, ..Query::default() }).await.unwrap();
        assert_eq!(threads.items.iter().map(|t| t.messages).sum::<u64>(), total);
        let mut hits = 0;
        let mut cursor = None;
        loop {
            let page = store.search("hello", &Query { limit: 200, cursor, ..Query::default() }).await.unwrap();
            hits += page.items.len() as u64;
            match page.next {
                Some(next) => cursor = Cursor::decode(&next),
                None => break,
            }
        }
        assert_eq!(hits, total, "each event searched once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_starting_together_migrate_once() {
    let Some(h) = harness().await else { return };
    let h = Arc::new(h);
    let opening: Vec<_> = (0..4)
        .map(|_| {
            let h = Arc::clone(&h);
            tokio::spawn(async move { h.store().await })
        })
        .collect();
    for store in opening {
        assert_eq!(store.await.expect("opened").head().await.unwrap(), 0);
    }
    let rows = h.client().await.query("SELECT version FROM clutch_migrations ORDER BY version", &[]).await.unwrap();
    let versions: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, (1..=10).collect::<Vec<i64>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_from_a_newer_clutch_is_refused() {
    let Some(h) = harness().await else { return };
    h.store().await.close().await;
    h.client().await.execute("INSERT INTO clutch_migrations (version) VALUES (999)", &[]).await.unwrap();
    let options = Options { schema: Some(h.schema().to_owned()), pool_size: 1, writer: false, lists: true };
    match Store::open(h.url(), options).await {
        Err(e @ Error::TooNew { found: 999, .. }) => assert!(e.to_string().contains("upgrade Clutch"), "{e}"),
        other => panic!("expected TooNew, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_keep_their_logs_apart() {
    let (Some(first), Some(second)) = (harness().await, harness().await) else { return };
    let (a, b) = (first.store().await, second.store().await);
    for o in a.append_messages(&[fresh(), fresh()]).await.unwrap() {
        o.unwrap();
    }
    assert_eq!(b.append_messages(&[fresh()]).await.unwrap()[0].as_ref().unwrap().seq, 1);
    assert_eq!((a.head().await.unwrap(), b.head().await.unwrap()), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_on_one_schema_is_refused_until_the_first_closes() {
    let Some(h) = harness().await else { return };
    let options = |writer| Options { schema: Some(h.schema().to_owned()), pool_size: 1, writer, lists: true };
    let first = Store::open(h.url(), options(true)).await.unwrap();
    match Store::open(h.url(), options(true)).await {
        Err(e @ Error::Busy { .. }) => {
            let said = e.to_string();
            assert!(
                said.contains("another Clutch daemon is already serving") && said.contains("backend pid"),
                "{said}"
            );
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // The writer lock is a space apart from the appends' own lock: the writer appends as before, and
    // a store that does not claim it opens beside it.
    first.append_messages(&[fresh()]).await.unwrap();
    let beside = Store::open(h.url(), options(false)).await.unwrap();
    assert_eq!(beside.head().await.unwrap(), 1);
    beside.close().await;
    first.close().await;
    // Its session ends as the store closes; then the next writer gets the lock.
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match Store::open(h.url(), options(true)).await {
                Ok(store) => return store,
                Err(Error::Busy { .. }) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .expect("the lock was never released");
    next.close().await;
}
