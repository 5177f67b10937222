//! Appends: one writer waiting for each durable acknowledgement, and sixteen writers sharing commits
//! (group commit), against plain SQLite inserting the same rows with one commit per message, or per 16.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clutch_core::Handle;
use clutch_proto::Message;
use clutch_proto::id::{self, Kind};
use criterion::Criterion;
use tokio::runtime::Runtime;

use crate::compare::{Contender, Plan, compare};
use crate::{Anchor, Daemon, Row, Traffic, runtime, scratch};

const WRITERS: usize = 16;

/// One caller appending one message at a time through [`Handle::append_one`], each durable before the
/// next, vs `INSERT` + `COMMIT` per message on a plain connection.
pub fn one_writer(c: &mut Criterion) {
    let rt = runtime();
    let dir = scratch();
    let daemon = Daemon::start(&rt, &dir.path().join("clutch"));
    let mut clutch = {
        let (rt, handle, mut traffic) = (&rt, daemon.handle.clone(), Traffic::new(&id::generate(Kind::Run)));
        move |n| append_serially(rt, &handle, traffic.take(n))
    };
    let mut sqlite = anchor(&dir.path().join("anchor.db"), 1);
    let plan = Plan { elements: 1, rounds: 12, iters: 250, slow: false };
    compare(c, "append_one_writer", &plan, &mut [("clutch", &mut clutch), ("sqlite_insert_loop", &mut sqlite)]);
    daemon.shutdown(&rt);
}

/// Sixteen tasks in the daemon's process, each appending one message at a time: the writer commits
/// whatever has queued up in one transaction. Anchors: the one-commit-per-message loop again, and the
/// ceiling of group commit at this concurrency, 16 `INSERT`s per `COMMIT`.
pub fn sixteen_writers(c: &mut Criterion) {
    let rt = runtime();
    let dir = scratch();
    let daemon = Daemon::start(&rt, &dir.path().join("clutch"));
    let mut clutch = {
        let (rt, handle, mut traffic) = (&rt, daemon.handle.clone(), Traffic::new(&id::generate(Kind::Run)));
        move |n| append_concurrently(rt, &handle, traffic.take(n))
    };
    let mut loop_1 = anchor(&dir.path().join("anchor-1.db"), 1);
    let mut per_16 = anchor(&dir.path().join("anchor-16.db"), WRITERS);
    let metrics = daemon.handle.metrics();
    let (appended, batches) = (metrics.appended.load(Ordering::Relaxed), metrics.batches.load(Ordering::Relaxed));
    let plan = Plan { elements: 1, rounds: 10, iters: 400, slow: false };
    let contenders: &mut [Contender<'_>] =
        &mut [("clutch", &mut clutch), ("sqlite_insert_loop", &mut loop_1), ("sqlite_commit_per_16", &mut per_16)];
    if compare(c, "append_16_writers_in_process", &plan, contenders) {
        let appended = metrics.appended.load(Ordering::Relaxed) - appended;
        let batches = metrics.batches.load(Ordering::Relaxed) - batches;
        eprintln!(
            "append_16_writers_in_process: clutch committed {appended} messages in {batches} transactions, {:.1} per commit",
            appended as f64 / batches.max(1) as f64
        );
    }
    daemon.shutdown(&rt);
}

/// The anchor routine: `n` fresh rows into a plain SQLite database at `path`, `per_commit` per
/// transaction. Serialising the rows happens before the clock starts.
fn anchor(path: &Path, per_commit: usize) -> impl FnMut(u64) -> Duration + use<> {
    let mut anchor = Anchor::open(path);
    let mut traffic = Traffic::new(&id::generate(Kind::Run));
    move |n| {
        let rows: Vec<Row> = traffic.take(n).iter().map(Row::of).collect();
        let started = Instant::now();
        for chunk in rows.chunks(per_commit) {
            anchor.commit(chunk);
        }
        started.elapsed()
    }
}

/// Appends `messages` from one task on a worker (as a request handler would), each acknowledged
/// (durable) before the next is sent.
fn append_serially(rt: &Runtime, handle: &Handle, messages: Vec<Message>) -> Duration {
    let handle = handle.clone();
    rt.block_on(rt.spawn(async move {
        let started = Instant::now();
        one_by_one(&handle, messages).await;
        started.elapsed()
    }))
    .expect("writer task")
}

/// Appends `messages` from [`WRITERS`] tasks, each sending its share one at a time.
fn append_concurrently(rt: &Runtime, handle: &Handle, messages: Vec<Message>) -> Duration {
    let mut shares: Vec<Vec<Message>> = vec![Vec::new(); WRITERS];
    for (i, m) in messages.into_iter().enumerate() {
        shares[i % WRITERS].push(m);
    }
    let handle = handle.clone();
    rt.block_on(rt.spawn(async move {
        let started = Instant::now();
        let writers: Vec<_> = shares
            .into_iter()
            .map(|share| {
                let handle = handle.clone();
                tokio::spawn(async move { one_by_one(&handle, share).await })
            })
            .collect();
        for w in writers {
            w.await.expect("writer task");
        }
        started.elapsed()
    }))
    .expect("writers")
}

async fn one_by_one(handle: &Handle, messages: Vec<Message>) {
    for m in messages {
        let outcome = handle.append_one(m).await.expect("append");
        assert!(!outcome.duplicate);
    }
}
