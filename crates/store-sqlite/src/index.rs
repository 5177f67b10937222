//! The log's secondary indexes (by run, thread, task, sender and type), kept in a database file of
//! their own ([`INDEX_FILE`]) by a thread of their own, so that an append commits the event's row, its
//! id and idempotency key and its recipients, and nothing more: indexing a row costs about as much as
//! storing it, and here it happens beside the writer, on another core, instead of on its serial path.
//!
//! The index file holds derived data only. It covers the events up to `indexed_upto`, never past the
//! log's durable head (so that a power loss cannot leave it naming events the log lost), and a read
//! finds the events past that by scanning the log's short tail, so reads are exact whatever the lag.
//! A missing or damaged index file, one of an older format ([`FORMAT`], `PRAGMA user_version`), or one
//! ahead of its log (a log restored from a backup), is rebuilt from the log in the background; how far
//! the index lags is in `/metrics` (`clutch_store_index_lag_events`).
//!
//! The indexer (the thread `clutch-index`) wakes when `Options::index_chunk` durable events have
//! gathered, or every `Options::index_every`, and indexes them in deferred transactions that write the
//! index file only and read the log through `ATTACH`, so it never takes the log's write lock. It runs
//! at a lower priority than the threads that answer clients ([`INDEX_NICE`]): under full load the
//! index takes what CPU is left and catches up when the load eases.
//!
//! Retention finds a run's oldest events through the index on a reader, the writer removes them, and
//! their index entries go after ([`forget`], with the run's search documents and, once no event of
//! the run is left, its list rows); a crash in between leaves entries that name no event, which reads
//! skip.

use std::ops::Not;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use rusqlite::{Connection, params};

/// The index database's file name inside the data directory.
pub const INDEX_FILE: &str = "clutch.index.db";

/// The index file's format (`PRAGMA user_version`): a file of another is rebuilt. 2: the lists and
/// the search index ([`crate::lists`]); 3: how far they reach, apart from the indexes; 4: the lists'
/// rows as `clutch_store::lists` derives them since a workflow's root shows its workflow's state.
const FORMAT: i64 = 4;

/// Each index: its table and the events column it keys, in the order a read with several conditions
/// prefers them (the most selective first).
pub(crate) const INDEXES: [(&str, &str); 5] = [
    ("by_task", "task_id"),
    ("by_thread", "thread_id"),
    ("by_run", "run_id"),
    ("by_from", "from_agent"),
    ("by_type", "type"),
];

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS by_task (key TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS by_thread (key TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS by_run (key TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS by_from (key TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS by_type (key TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS indexed_upto (one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL);
INSERT OR IGNORE INTO indexed_upto (one, seq) VALUES (1, 0);
";

/// The index connection's page cache, in KiB (SQLite's negative `cache_size`).
const INDEX_CACHE_KIB: i64 = -32 * 1024;

/// Most events indexed in one transaction.
const CHUNK_MAX: u64 = 4096;

/// What the log's writer tells the indexer: how far the log is committed and durable.
pub(crate) struct Progress {
    /// The highest `seq` committed (not necessarily durable yet).
    committed: AtomicU64,
    /// The highest `seq` known durable: the indexer goes no further.
    durable: AtomicU64,
    /// `durable` when the indexer was last woken.
    woken_at: AtomicU64,
    /// How far the index reached after the indexer's last round.
    indexed: AtomicU64,
    /// Durable events not yet indexed that wake the indexer before its next round.
    chunk: u64,
    wake: Mutex<Option<mpsc::Sender<()>>>,
    /// Notified after each round of the indexer, for reads that wait for it.
    rounds: (Mutex<()>, Condvar),
    /// Whether the indexer derives the lists and the search index too (`Options::lists`).
    lists: bool,
    /// How far the lists reach after the indexer's last round (never past `indexed`).
    listed: AtomicU64,
    /// How far reads waiting for the lists want them (derived now rather than when a chunk has
    /// gathered, until they reach it).
    lists_wanted: AtomicU64,
}

impl Progress {
    /// The log's durable `head`, and how far the index reaches (`indexed`).
    pub(crate) fn new(head: u64, indexed: u64, listed: u64, chunk: u64, lists: bool) -> Progress {
        Progress {
            committed: AtomicU64::new(head),
            durable: AtomicU64::new(head),
            woken_at: AtomicU64::new(head),
            indexed: AtomicU64::new(indexed),
            chunk: chunk.max(1),
            wake: Mutex::new(None),
            rounds: (Mutex::new(()), Condvar::new()),
            lists,
            listed: AtomicU64::new(listed),
            lists_wanted: AtomicU64::new(0),
        }
    }

    /// Notes a commit whose last event is `head`.
    pub(crate) fn committed(&self, head: u64) {
        self.committed.fetch_max(head, Ordering::AcqRel);
    }

    /// What a flush starting now will make durable.
    pub(crate) fn flushing(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// How far the index reached after the indexer's last round.
    pub(crate) fn indexed(&self) -> u64 {
        self.indexed.load(Ordering::Acquire)
    }

    /// Durable events the index does not cover yet.
    pub(crate) fn lag(&self) -> u64 {
        self.durable.load(Ordering::Acquire).saturating_sub(self.indexed.load(Ordering::Acquire))
    }

    /// How far the lists reach after the indexer's last round.
    fn listed(&self) -> u64 {
        self.listed.load(Ordering::Acquire)
    }

    /// Waits (at most `patience`) until the lists cover every event durable now; how far they reach.
    /// Reads of the lists wait so that they show what was acknowledged before they were asked for.
    pub(crate) fn catch_up(&self, patience: Duration) -> u64 {
        let target = self.durable.load(Ordering::Acquire);
        if self.listed() >= target {
            return self.listed();
        }
        self.lists_wanted.fetch_max(target, Ordering::AcqRel);
        if let Some(wake) = self.wake.lock().expect("indexer wake lock").as_ref() {
            let _ = wake.send(());
        }
        let deadline = std::time::Instant::now() + patience;
        let mut guard = self.rounds.0.lock().expect("index rounds lock");
        while self.listed() < target {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            guard =
                self.rounds.1.wait_timeout(guard, left.min(Duration::from_millis(20))).expect("index rounds lock").0;
        }
        self.listed()
    }

    fn reached(&self, seq: u64, listed: u64) {
        self.indexed.store(seq, Ordering::Release);
        self.listed.store(listed, Ordering::Release);
        let _guard = self.rounds.0.lock().expect("index rounds lock");
        self.rounds.1.notify_all();
    }

    /// Notes that everything up to `head` is durable; wakes the indexer once a chunk has gathered.
    pub(crate) fn durable(&self, head: u64) {
        let before = self.durable.fetch_max(head, Ordering::AcqRel);
        if head > before && head >= self.woken_at.load(Ordering::Acquire).saturating_add(self.chunk) {
            self.woken_at.store(head, Ordering::Release);
            if let Some(wake) = self.wake.lock().expect("indexer wake lock").as_ref() {
                let _ = wake.send(());
            }
        }
    }
}

/// Opens the index database at `path` beside the log at `log_path` (attached as `log`, read only by
/// the indexer), creating or repairing it as needed.
pub(crate) fn open(path: &Path, log_path: &Path, durable: u64) -> rusqlite::Result<Connection> {
    if outdated(path) {
        tracing::info!(path = %path.display(), "the index file has an older format; rebuilding it from the log");
        remove(path);
    }
    let conn = match prepare(path, log_path, durable) {
        Ok(conn) => conn,
        Err(e) => {
            // Derived data: a file that cannot be used is rebuilt rather than refusing to start.
            tracing::warn!(error = %e, path = %path.display(), "the index file cannot be used; rebuilding it from the log");
            remove(path);
            prepare(path, log_path, durable)?
        }
    };
    Ok(conn)
}

/// Whether the file at `path` exists in another format than this build's.
fn outdated(path: &Path) -> bool {
    if !path.exists() {
        return false;
    }
    Connection::open(path)
        .and_then(|c| c.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)))
        .is_ok_and(|v| v == FORMAT)
        .not()
}

fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

fn prepare(path: &Path, log_path: &Path, durable: u64) -> rusqlite::Result<Connection> {
    let mut conn = Connection::open(path)?;
    crate::configure(&mut conn)?;
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch(crate::lists::SCHEMA)?;
    conn.pragma_update(None, "user_version", FORMAT)?;
    // Each chunk inserts keys spread over the indexes' B-trees: a page cache that holds their hot
    // pages (32 MiB at most, used as they grow) saves reading them back from the OS for every insert.
    conn.pragma_update(None, "cache_size", INDEX_CACHE_KIB)?;
    conn.execute("ATTACH DATABASE ?1 AS log", [log_path.to_string_lossy()])?;
    let upto = upto(&conn)?;
    if upto > durable {
        tracing::warn!(
            indexed = upto,
            log = durable,
            "the index is ahead of its log (restored from a backup?); rebuilding it"
        );
        let tx = conn.transaction()?;
        for table in INDEXES.iter().map(|(table, _)| *table).chain(crate::lists::TABLES) {
            tx.execute(&format!("DELETE FROM main.{table}"), [])?;
        }
        tx.execute("UPDATE main.indexed_upto SET seq = 0", [])?;
        crate::lists::set_upto(&tx, 0)?;
        tx.commit()?;
    }
    Ok(conn)
}

/// How far the index at `conn`'s `main` reaches.
pub(crate) fn upto(conn: &Connection) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT seq FROM main.indexed_upto")?.query_row([], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

/// Indexes the durable events past `indexed_upto`, at most [`CHUNK_MAX`] of them, in one transaction;
/// how far the index reaches after it. The transaction is deferred: it writes the index file only and
/// reads the log, so it never holds the log's write lock.
fn index_some(conn: &mut Connection, durable: u64) -> rusqlite::Result<u64> {
    let tx = conn.transaction()?;
    let from = upto(&tx)?;
    if durable <= from {
        return Ok(from);
    }
    let to = durable.min(from + CHUNK_MAX);
    for (table, column) in INDEXES {
        tx.prepare_cached(&format!(
            "INSERT OR IGNORE INTO main.{table} (key, seq) SELECT {column}, seq FROM log.events WHERE seq > ?1 AND seq <= ?2"
        ))?
        .execute(params![from as i64, to as i64])?;
    }
    tx.prepare_cached("UPDATE main.indexed_upto SET seq = ?1")?.execute([to as i64])?;
    tx.commit()?;
    Ok(to)
}

/// Derives the lists of the indexed events past `lists_upto` (up to `to`), a chunk of at most
/// [`CHUNK_MAX`] per transaction; how far they reach.
fn derive_lists(conn: &mut Connection, to: u64) -> rusqlite::Result<u64> {
    loop {
        // Only this connection moves `lists_upto`, so it is read before the transaction, and the
        // events outside it (see `lists::events`).
        let from = crate::lists::upto(conn)?;
        if from >= to {
            return Ok(from);
        }
        let end = to.min(from + CHUNK_MAX);
        let events = crate::lists::events(conn, from, end)?;
        let tx = conn.transaction()?;
        crate::lists::derive(&tx, &events)?;
        crate::lists::set_upto(&tx, end)?;
        tx.commit()?;
    }
}

/// Events past the lists that make the indexer derive them without waiting for its round (each
/// derivation rewrites the rows its events touch, so fewer, larger ones write less).
const LISTS_CHUNK: u64 = 4096;

/// Empties the lists and derives them again from the log up to `indexed_upto`; how many events they
/// cover.
pub(crate) fn rebuild_lists(conn: &mut Connection) -> rusqlite::Result<u64> {
    let tx = conn.transaction()?;
    for table in crate::lists::TABLES {
        tx.execute(&format!("DELETE FROM main.{table}"), [])?;
    }
    crate::lists::set_upto(&tx, 0)?;
    tx.commit()?;
    let upto = derive_lists(conn, upto(conn)?)?;
    conn.query_row("SELECT count(*) FROM log.events WHERE seq <= ?1", [upto as i64], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
}

/// An event retention removes: its `seq`, its key in each index (in [`INDEXES`]' order) and its
/// recipients.
pub(crate) struct Removed {
    pub(crate) seq: u64,
    pub(crate) keys: [String; 5],
    pub(crate) to: Vec<String>,
}

/// Removes the index entries of events retention removed.
pub(crate) fn forget(conn: &Connection, removed: &[Removed]) -> rusqlite::Result<()> {
    let tx = conn.unchecked_transaction()?;
    let mut runs: Vec<&str> = removed.iter().map(|e| e.keys[2].as_str()).collect();
    runs.sort_unstable();
    runs.dedup();
    let seqs: Vec<u64> = removed.iter().map(|e| e.seq).collect();
    crate::lists::forget(&tx, &runs, &seqs)?;
    for (i, (table, _)) in INDEXES.iter().enumerate() {
        let mut delete = tx.prepare_cached(&format!("DELETE FROM main.{table} WHERE key = ?1 AND seq = ?2"))?;
        for event in removed {
            delete.execute(params![event.keys[i], event.seq as i64])?;
        }
    }
    tx.commit()
}

/// How much lower the index thread's priority is than the daemon's other threads (nice, Linux):
/// under full load the writer and the threads answering clients take the CPU first, and the index
/// (derived data, which reads wait for only when they ask) takes what is left, catching up as soon as
/// the load eases.
const INDEX_NICE: i32 = 10;

#[cfg(target_os = "linux")]
fn lower_priority() {
    // `None` is the calling thread: on Linux the nice value is per thread.
    let now = rustix::process::getpriority_process(None).unwrap_or(0);
    if let Err(e) = rustix::process::setpriority_process(None, now.saturating_add(INDEX_NICE).min(19)) {
        tracing::debug!(error = %e, "cannot lower the index thread's priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// The thread that keeps the index: it wakes when a chunk of durable events has gathered, or every
/// `every` for the rest, and indexes everything durable.
pub(crate) struct Indexer {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Indexer {
    pub(crate) fn start(conn: Arc<Mutex<Connection>>, progress: Arc<Progress>, every: Duration) -> Indexer {
        let (wake, woken) = mpsc::channel::<()>();
        *progress.wake.lock().expect("indexer wake lock") = Some(wake);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("clutch-index".into())
            .spawn(move || {
                lower_priority();
                let mut failing = false;
                let mut listed_at = std::time::Instant::now();
                loop {
                    match stopped.try_recv() {
                        Err(mpsc::TryRecvError::Empty) => {}
                        _ => return,
                    }
                    let durable = progress.durable.load(Ordering::Acquire);
                    let reached = {
                        let mut conn = conn.lock().expect("index connection lock");
                        index_some(&mut conn, durable).and_then(|reached| {
                            // The lists follow the indexes, a larger chunk at a time, or at once when
                            // a read waits for them.
                            let pending = reached.saturating_sub(progress.listed());
                            let due = pending >= LISTS_CHUNK
                                || listed_at.elapsed() >= every
                                || progress.lists_wanted.load(Ordering::Acquire) > progress.listed();
                            let listed = if progress.lists && pending > 0 && due {
                                listed_at = std::time::Instant::now();
                                derive_lists(&mut conn, reached)?
                            } else {
                                progress.listed()
                            };
                            Ok((reached, listed))
                        })
                    };
                    match reached {
                        Ok((reached, listed)) => {
                            progress.reached(reached, listed);
                            failing = false;
                            if reached < durable {
                                continue;
                            }
                        }
                        Err(e) => {
                            if !failing {
                                tracing::warn!(error = %e, "indexing the log failed; reads scan the unindexed events until it succeeds");
                            }
                            failing = true;
                        }
                    }
                    match woken.recv_timeout(every) {
                        Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .expect("spawning the index thread");
        Indexer { stop, thread }
    }

    pub(crate) fn stop(self, progress: &Progress) {
        let _ = self.stop.send(());
        // Wakes it if it waits.
        progress.wake.lock().expect("indexer wake lock").take();
        let _ = self.thread.join();
    }
}
