//! The writer's flush, on the real SQLite store with its `sync` held back or failed on purpose:
//! nothing is answered, published or readable before a flush has made it durable; the writer
//! commits and flushes in one step, and one falling behind (`batch_max: 1` with a queue) commits the
//! next batch while a flush is under way;
//! a failed flush stops the log without acknowledging anything. The first and the last hold also
//! over the store's blocking writes, where a lone append is committed and flushed on the caller's
//! own thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clutch_core::Service;
use clutch_core::log::Options;
use clutch_proto::id::{self, Kind};
use clutch_proto::{ErrorCode, MessageType};
use clutch_store::lists::{Page, Query, RunSummary, SearchHit, TaskListing, ThreadSummary};
use clutch_store::{Artifact, Backend, Entry, Event, Filter, Outcome, Snapshot};
use tokio::sync::{Semaphore, oneshot};

use super::message;

/// The real SQLite store, whose `sync` (also the one inside `append_batch`) waits for a permit, or
/// fails when told to; the sync numbered `held` (from 0) waits for `held_permit` instead. Syncs are
/// numbered in the order they start, which for overlapping flushes is not always the order the
/// flusher asked for them: the write numbered `wait_write` (from 0) waits until `wait_syncs` syncs
/// have started, to fix that order.
struct Held {
    inner: clutch_store_sqlite::Store,
    /// Offer the store's blocking writes, held the same way (see [`HeldBlocking`]).
    blocking: Option<std::sync::Weak<Held>>,
    permits: Semaphore,
    syncs: AtomicUsize,
    fail: AtomicBool,
    held: AtomicUsize,
    held_permit: Semaphore,
    writes: AtomicUsize,
    wait_write: AtomicUsize,
    wait_syncs: AtomicUsize,
}

#[async_trait::async_trait]
impl Backend for Held {
    async fn append_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        let outcomes = self.write_batch(batch).await?;
        self.sync().await.map_err(|e| clutch_store::Error::NotDurable(e.to_string()))?;
        Ok(outcomes)
    }
    async fn write_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        if self.writes.fetch_add(1, Ordering::SeqCst) == self.wait_write.load(Ordering::SeqCst) {
            while self.syncs.load(Ordering::SeqCst) < self.wait_syncs.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        self.inner.write_batch(batch).await
    }
    async fn sync(&self) -> clutch_store::Result<()> {
        let nth = self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(clutch_store::Error::Backend("the disk is gone".into()));
        }
        let gate = if nth == self.held.load(Ordering::SeqCst) { &self.held_permit } else { &self.permits };
        gate.acquire().await.expect("permits stay open").forget();
        self.inner.sync().await
    }
    async fn get(&self, id: &str) -> clutch_store::Result<Option<Event>> {
        self.inner.get(id).await
    }
    async fn read(&self, filter: &Filter, after: u64, limit: usize) -> clutch_store::Result<Vec<Event>> {
        self.inner.read(filter, after, limit).await
    }
    async fn head(&self) -> clutch_store::Result<u64> {
        self.inner.head().await
    }
    async fn list_runs(&self, query: &Query) -> clutch_store::Result<Page<RunSummary>> {
        self.inner.list_runs(query).await
    }
    async fn list_threads(&self, query: &Query) -> clutch_store::Result<Page<ThreadSummary>> {
        self.inner.list_threads(query).await
    }
    async fn list_tasks(&self, query: &Query) -> clutch_store::Result<Page<TaskListing>> {
        self.inner.list_tasks(query).await
    }
    async fn search(&self, text: &str, query: &Query) -> clutch_store::Result<Page<SearchHit>> {
        self.inner.search(text, query).await
    }
    async fn rebuild_lists(&self) -> clutch_store::Result<u64> {
        self.inner.rebuild_lists().await
    }
    async fn put_artifact(&self, bytes: Bytes) -> clutch_store::Result<Artifact> {
        self.inner.put_artifact(bytes).await
    }
    async fn get_artifact(&self, sha256: &str) -> clutch_store::Result<Option<Bytes>> {
        self.inner.get_artifact(sha256).await
    }
    async fn cursor(&self, name: &str) -> clutch_store::Result<Option<u64>> {
        self.inner.cursor(name).await
    }
    async fn set_cursor(&self, name: &str, seq: u64) -> clutch_store::Result<()> {
        self.inner.set_cursor(name, seq).await
    }
    async fn snapshot(&self, name: &str) -> clutch_store::Result<Option<Snapshot>> {
        self.inner.snapshot(name).await
    }
    async fn set_snapshot(&self, name: &str, snapshot: &Snapshot) -> clutch_store::Result<()> {
        self.inner.set_snapshot(name, snapshot).await
    }
    async fn record(&self, space: &str, key: &str) -> clutch_store::Result<Option<Bytes>> {
        self.inner.record(space, key).await
    }
    async fn records(&self, space: &str) -> clutch_store::Result<Vec<(String, Bytes)>> {
        self.inner.records(space).await
    }
    async fn put_record(&self, space: &str, key: &str, body: Bytes) -> clutch_store::Result<()> {
        self.inner.put_record(space, key, body).await
    }
    async fn delete_record(&self, space: &str, key: &str) -> clutch_store::Result<bool> {
        self.inner.delete_record(space, key).await
    }
    async fn remove_run(&self, run_id: &str, upto: u64, limit: usize) -> clutch_store::Result<usize> {
        self.inner.remove_run(run_id, upto, limit).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
    fn blocking_writes(&self) -> Option<Arc<dyn clutch_store::BlockingWrites>> {
        let held = self.blocking.as_ref()?.upgrade()?;
        let inner = self.inner.blocking_writes()?;
        Some(Arc::new(HeldBlocking { held, inner }))
    }
}

/// The store's blocking writes with the same holds as [`Held`]'s: its `sync` waits (on the calling
/// thread) for a permit, or fails when told to.
struct HeldBlocking {
    held: Arc<Held>,
    inner: Arc<dyn clutch_store::BlockingWrites>,
}

impl clutch_store::BlockingWrites for HeldBlocking {
    fn write_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        self.held.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write_batch(batch)
    }
    fn sync(&self) -> clutch_store::Result<()> {
        self.held.syncs.fetch_add(1, Ordering::SeqCst);
        if self.held.fail.load(Ordering::SeqCst) {
            return Err(clutch_store::Error::NotDurable("the disk is gone".into()));
        }
        while self.held.permits.try_acquire().map(|p| p.forget()).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.inner.sync()
    }
}

struct Fixture {
    held: Arc<Held>,
    handle: clutch_core::Handle,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn start_with(options: Options) -> Fixture {
    start_over(options, false)
}

/// Over the store's blocking writes too when `blocking` (as `clutch serve` runs SQLite).
fn start_over(options: Options, blocking: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let inner = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let held = Arc::new_cyclic(|me| Held {
        inner,
        blocking: blocking.then(|| me.clone()),
        permits: Semaphore::new(0),
        syncs: AtomicUsize::new(0),
        fail: AtomicBool::new(false),
        held: AtomicUsize::new(usize::MAX),
        held_permit: Semaphore::new(0),
        writes: AtomicUsize::new(0),
        wait_write: AtomicUsize::new(usize::MAX),
        wait_syncs: AtomicUsize::new(0),
    });
    let (service, handle) = Service::new(held.clone(), options);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = service.spawn(async move {
        let _ = stopped.await;
    });
    Fixture { held, handle, stop, task, _dir: dir }
}

impl Fixture {
    /// Waits until the writer runs and is idle: an append before then queues.
    async fn until_running(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.handle.idle() {
            assert!(tokio::time::Instant::now() < deadline, "the writer never started");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Waits until the store holds `head` events (committed, flushed or not) and `syncs` flushes began.
    async fn until_stored(&self, head: u64, syncs: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.held.inner.head().await.unwrap() < head || self.held.syncs.load(Ordering::SeqCst) < syncs {
            assert!(tokio::time::Instant::now() < deadline, "the writer never committed {head} events");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits until `n` append requests wait in the writer's queue.
    async fn until_queued(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.handle.queued() < n {
            assert!(tokio::time::Instant::now() < deadline, "{n} requests never queued");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn stop(self) {
        self.held.permits.add_permits(1000);
        self.held.held_permit.add_permits(1);
        self.handle.close_streams();
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// Absence can only be shown over some time: this long.
const QUIET: Duration = Duration::from_millis(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_answered_published_or_read_before_its_flush() {
    nothing_before_the_flush(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_answered_published_or_read_before_its_flush_on_the_callers_thread() {
    nothing_before_the_flush(true).await;
}

async fn nothing_before_the_flush(blocking: bool) {
    let f = start_over(Options::default(), blocking);
    f.until_running().await;
    let run = id::generate(Kind::Run);
    let m = message(&run, MessageType::ChatMessage);
    let mut live = f.handle.subscribe(Filter::default(), None).await.unwrap();
    let mut catch_up = f.handle.subscribe(Filter::default(), Some(0)).await.unwrap();
    let append = tokio::spawn({
        let (h, m) = (f.handle.clone(), m.clone());
        async move { h.append_one(m).await }
    });
    f.until_stored(1, 1).await;

    assert!(f.handle.get(&m.id).await.unwrap().is_none(), "a read by id waits for the flush");
    assert!(f.handle.read(&Filter::default(), 0, 10).await.unwrap().is_empty(), "a query waits for the flush");
    assert_eq!(f.handle.head().await.unwrap(), 0);
    assert!(tokio::time::timeout(QUIET, live.next()).await.is_err(), "nothing is published before the flush");
    assert!(tokio::time::timeout(QUIET, catch_up.next()).await.is_err(), "catch-up stops at the visible head");
    assert!(!append.is_finished(), "nothing is acknowledged before the flush");

    f.held.permits.add_permits(1);
    let outcome = append.await.unwrap().unwrap();
    assert_eq!((outcome.seq, outcome.duplicate), (1, false));
    assert_eq!(f.handle.get(&m.id).await.unwrap().unwrap().seq, 1, "the caller reads its own write");
    assert_eq!(live.next().await.unwrap().seq, 1);
    assert_eq!(catch_up.next().await.unwrap().seq, 1);
    let inline = f.handle.metrics().inline_batches.load(Ordering::Relaxed);
    assert_eq!(inline, u64::from(blocking), "committed on the caller's thread only over blocking writes");
    f.stop().await;
}

type Append = tokio::task::JoinHandle<clutch_core::Result<Outcome>>;

/// Appends `m` in the background.
fn append(f: &Fixture, m: clutch_proto::Message) -> Append {
    let h = f.handle.clone();
    tokio::spawn(async move { h.append_one(m).await })
}

/// Three chat messages of one run appended one after the other (`batch_max: 1`): the first is stored
/// (the log is idle: committed and flushed in one step), the other two queued behind it.
async fn three_in_a_row(f: &Fixture) -> (Append, Append, Append) {
    let run = id::generate(Kind::Run);
    let a = append(f, message(&run, MessageType::ChatMessage));
    f.until_stored(1, 1).await;
    let b = append(f, message(&run, MessageType::ChatMessage));
    f.until_queued(1).await;
    let c = append(f, message(&run, MessageType::ChatMessage));
    f.until_queued(2).await;
    (a, b, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_batch_is_committed_while_a_flush_is_under_way() {
    // One message per batch, so that a queue forms behind the first.
    let f = start_with(Options { batch_max: 1, ..Options::default() });
    let (a, b, c) = three_in_a_row(&f).await;
    f.held.permits.add_permits(1);
    assert_eq!(a.await.unwrap().unwrap().seq, 1);
    // Now busy: b is committed and its flush starts; c is committed while b's flush is under way,
    // and gets a flush of its own.
    f.until_stored(3, 3).await;
    assert!(!b.is_finished() && !c.is_finished(), "nothing is answered before its flush");
    f.held.permits.add_permits(2);
    assert_eq!(b.await.unwrap().unwrap().seq, 2);
    assert_eq!(c.await.unwrap().unwrap().seq, 3);
    assert_eq!(f.handle.head().await.unwrap(), 3);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_flush_releases_the_batches_before_it_while_an_earlier_one_is_still_under_way() {
    let f = start_with(Options { batch_max: 1, ..Options::default() });
    f.held.held.store(1, Ordering::SeqCst); // b's flush, the second sync, is held
    // c is committed only once b's flush has started, so that b's is the second sync to start.
    f.held.wait_syncs.store(2, Ordering::SeqCst);
    f.held.wait_write.store(2, Ordering::SeqCst);
    let (a, b, c) = three_in_a_row(&f).await;
    f.held.permits.add_permits(2); // a's flush and c's, not b's
    assert_eq!(a.await.unwrap().unwrap().seq, 1);
    assert_eq!(b.await.unwrap().unwrap().seq, 2, "released by c's flush, which covers it");
    assert_eq!(c.await.unwrap().unwrap().seq, 3);
    assert_eq!(f.handle.head().await.unwrap(), 3);
    // b's own flush ends late; nothing is answered twice and the log goes on.
    f.held.held_permit.add_permits(1);
    f.held.permits.add_permits(10);
    assert_eq!(f.handle.append_one(message(&id::generate(Kind::Run), MessageType::ChatMessage)).await.unwrap().seq, 4);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_acknowledges_nothing_and_stops_the_log() {
    a_failed_flush(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_on_the_callers_thread_acknowledges_nothing_and_stops_the_log() {
    a_failed_flush(true).await;
}

async fn a_failed_flush(blocking: bool) {
    let f = start_over(Options::default(), blocking);
    f.until_running().await;
    f.held.fail.store(true, Ordering::SeqCst);
    let run = id::generate(Kind::Run);
    let mut live = f.handle.subscribe(Filter::default(), None).await.unwrap();

    let refused = f.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap_err();
    assert_eq!(refused.code(), ErrorCode::Unavailable);
    assert_eq!(f.held.inner.head().await.unwrap(), 1, "the batch was committed, but its durability is unknown");
    assert!(f.handle.read(&Filter::default(), 0, 10).await.unwrap().is_empty(), "and it is never shown");
    assert!(tokio::time::timeout(QUIET, live.next()).await.is_err(), "nor published");

    // Even once the disk seems well again, the log takes nothing more: its state may be ahead of it.
    f.held.fail.store(false, Ordering::SeqCst);
    f.held.permits.add_permits(10);
    let again = f.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap_err();
    assert_eq!(again.code(), ErrorCode::Unavailable);
    assert_eq!(f.held.inner.head().await.unwrap(), 1, "nothing more was written");
    let inline = f.handle.metrics().inline_batches.load(Ordering::Relaxed);
    assert_eq!(inline, u64::from(blocking), "the first on the caller's thread; the second queued and was refused");
    f.stop().await;
}
