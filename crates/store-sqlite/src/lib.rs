//! The embedded SQLite backend: one database file in the data directory (WAL mode) and artifacts as
//! content-addressed files beside it. The default store: zero set-up.
//!
//! Durability is as with `synchronous=FULL`, but the flush is a step of its own: a batch is committed
//! into the WAL without a flush (`synchronous=NORMAL`), and [`Backend::sync`] flushes the WAL file
//! (`fdatasync`), covering every batch committed before it; [`Backend::append_batch`] does both. The
//! log's writer, which acknowledges a batch only once a sync has covered it, makes these writes on a
//! thread of its own through [`BlockingWrites`].
//!
//! The indexes by run, thread, task, sender and type live in a database file of their own, kept by a
//! thread of their own from the durable log (see [`index`]); a read finds the rows not yet indexed by
//! scanning that short tail, so reads are exact whatever the lag. The id and idempotency-key indexes,
//! which dedup relies on, and the recipients table take every row in its append's transaction.
//!
//! One writer connection makes every write, each batch in one `BEGIN IMMEDIATE` transaction (see
//! `log`); `append_batch`, `set_cursor` and `set_snapshot` flush before they return, and `open`
//! flushes whatever the WAL holds (a commit a crash left unflushed) before it serves anything. Reads
//! take one of a few read connections (`READERS`), each with the index file attached as `idx`, and
//! never wait on the writer. A connection that meets a lock waits in short steps (`busy`), not in
//! SQLite's millisecond sleeps. The WAL is checkpointed on a thread of its own (`Checkpointer`), so
//! no commit pays for one: passive rounds, ending with a short `RESTART` once the WAL has grown past
//! `RESTART_FRAMES`, so that under steady load it is rewritten from its start instead of growing
//! (every flush of a growing file pays for a file-system journal commit too). Migrations are tracked
//! by `PRAGMA user_version`.

mod artifacts;
mod index;
mod lists;
mod log;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use clutch_store::lists::{Page, Query, RunSummary, SearchHit, TaskListing, ThreadSummary};
use clutch_store::{Artifact, Backend, BlockingWrites, Entry, Event, Filter, Outcome, Snapshot};
use rusqlite::Connection;
use rusqlite::OptionalExtension;

/// The database file's name inside the data directory.
pub const DB_FILE: &str = "clutch.db";

pub use index::INDEX_FILE;

/// Failures opening the store (later failures are `clutch_store::Error`s).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the data directory {path}: {source}")]
    DataDir { path: PathBuf, source: std::io::Error },
    #[error("cannot open the SQLite database {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("cannot migrate the SQLite database {path}: {source}")]
    Migrate { path: PathBuf, source: rusqlite::Error },
    #[error("the database {path} has schema version {found}, newer than this build knows ({known}); upgrade clutch")]
    TooNew { path: PathBuf, found: i64, known: i64 },
    #[error("cannot flush the write-ahead log of {path} to disk: {source}")]
    Sync { path: PathBuf, source: std::io::Error },
}

/// How many read connections to keep; reads never wait on the writer (WAL).
const READERS: usize = 4;

/// Tuning of the SQLite store; the defaults suit every use.
#[derive(Debug, Clone)]
pub struct Options {
    /// Durable events not yet indexed (by run, thread, task, sender and type) that wake the indexer.
    /// Reads cover the lagging rows by scanning them, so results are the same at any value.
    pub index_chunk: u64,
    /// How often the indexer also takes whatever is left, fewer events than a chunk.
    pub index_every: std::time::Duration,
    /// Whether the indexer keeps the lists and the search index (on; off only to measure what they
    /// cost, `clutch bench lists`: the lists then stay empty).
    pub lists: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { index_chunk: 512, index_every: std::time::Duration::from_millis(250), lists: true }
    }
}

/// The SQLite event log and artifact store.
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    writer: Mutex<Option<Connection>>,
    readers: Mutex<Vec<Connection>>,
    /// One per read connection: a read waits for a free one rather than opening a connection of its
    /// own (opening, configuring and preparing statements on it cost more than the read).
    read_slots: Arc<tokio::sync::Semaphore>,
    db_path: PathBuf,
    artifacts: artifacts::Dir,
    checkpointer: Mutex<Option<Checkpointer>>,
    /// The WAL file, opened at the first sync: flushing it makes every commit before the flush durable.
    wal: Mutex<Option<std::fs::File>>,
    closed: AtomicBool,
    /// How far the log is committed and durable, for the indexer.
    progress: Arc<index::Progress>,
    /// The index database (see [`index`]), written by the indexer and by retention.
    index: Arc<Mutex<Connection>>,
    index_path: PathBuf,
    indexer: Mutex<Option<index::Indexer>>,
}

/// How often the WAL is folded back into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// WAL frames (pages) past which a checkpoint also restarts the WAL.
const RESTART_FRAMES: i64 = 2048;

/// A thread that checkpoints the WAL in the background, so that no append pays for copying pages into
/// the database file. Each round copies what it can without blocking anyone (`PASSIVE`). Under steady
/// load that never catches up with the writer, so the WAL would only grow, and every flush of a
/// growing file costs the file system a journal commit besides the data (about 3× the flush). So
/// once the WAL holds [`RESTART_FRAMES`], the round ends with `RESTART`: it holds the writer back while
/// it copies the little the passive pass left and waits for readers to leave the WAL, and the next
/// commit writes the WAL from its start again, over blocks the file already has.
struct Checkpointer {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Checkpointer {
    fn start(db_path: &Path) -> rusqlite::Result<Checkpointer> {
        let mut conn = Connection::open(db_path)?;
        configure(&mut conn)?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("clutch-checkpoint".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY) {
                    if let Err(e) = checkpoint(&conn) {
                        tracing::warn!(error = %e, "WAL checkpoint failed; retrying later");
                    }
                }
            })
            .expect("spawning the checkpoint thread");
        Ok(Checkpointer { stop, thread })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// One checkpoint round (see [`Checkpointer`]).
fn checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    let frames: i64 = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))?;
    if frames >= RESTART_FRAMES {
        conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))?;
    }
    Ok(())
}

/// Waits out another connection's lock in short steps, for up to about ten seconds: the writer holds
/// its lock for one commit, a restarting checkpoint for a few milliseconds, so a caller should not
/// sleep the milliseconds SQLite's own busy timeout would.
fn busy(retries: i32) -> bool {
    std::thread::sleep(std::time::Duration::from_micros(100));
    retries < 100_000
}

impl Store {
    /// Opens (creating if needed) the store in `data_dir`, applying migrations.
    pub fn open(data_dir: &Path) -> Result<Store, Error> {
        Store::open_with(data_dir, Options::default())
    }

    /// [`Store::open`] with `options`.
    pub fn open_with(data_dir: &Path, options: Options) -> Result<Store, Error> {
        std::fs::create_dir_all(data_dir).map_err(|source| Error::DataDir { path: data_dir.into(), source })?;
        let db_path = data_dir.join(DB_FILE);
        let open_err = |source| Error::Open { path: db_path.clone(), source };
        let mut writer = Connection::open(&db_path).map_err(open_err)?;
        configure(&mut writer).map_err(open_err)?;
        // Checkpoints run on their own thread (below), never inside an append's commit.
        writer.pragma_update(None, "wal_autocheckpoint", 0).map_err(open_err)?;
        migrate(&writer, &db_path)?;
        let checkpointer = Checkpointer::start(&db_path).map_err(open_err)?;
        // The log's head is durable once the sync below returns (or the store does not open).
        let head = log::head(&writer).map_err(open_err)?;
        let index_path = data_dir.join(INDEX_FILE);
        let index = index::open(&index_path, &db_path, head)
            .map_err(|source| Error::Open { path: index_path.clone(), source })?;
        let readers = (0..READERS)
            .map(|_| reader(&db_path, &index_path))
            .collect::<Result<Vec<_>, rusqlite::Error>>()
            .map_err(open_err)?;
        let artifacts = artifacts::Dir::open(&data_dir.join("artifacts"))
            .map_err(|source| Error::DataDir { path: data_dir.join("artifacts"), source })?;
        let indexed = index::upto(&index).map_err(|source| Error::Open { path: index_path.clone(), source })?;
        let listed = lists::upto(&index).map_err(|source| Error::Open { path: index_path.clone(), source })?;
        let progress = Arc::new(index::Progress::new(head, indexed, listed, options.index_chunk, options.lists));
        let index = Arc::new(Mutex::new(index));
        let inner = Inner {
            writer: Mutex::new(Some(writer)),
            readers: Mutex::new(readers),
            read_slots: Arc::new(tokio::sync::Semaphore::new(READERS)),
            db_path,
            artifacts,
            checkpointer: Mutex::new(Some(checkpointer)),
            wal: Mutex::new(None),
            closed: AtomicBool::new(false),
            indexer: Mutex::new(Some(index::Indexer::start(index.clone(), progress.clone(), options.index_every))),
            progress,
            index,
            index_path,
        };
        // Whatever the WAL holds (a commit a crash left unflushed) is made durable before it is served.
        inner.sync_wal().map_err(|source| Error::Sync { path: inner.db_path.clone(), source })?;
        Ok(Store { inner: Arc::new(inner) })
    }

    /// How far the secondary indexes reach (the highest `seq` they cover).
    pub fn indexed_upto(&self) -> u64 {
        self.inner.progress.indexed()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.db_path
    }
}

/// A read connection: the log, with the index database attached as `idx`.
fn reader(db_path: &Path, index_path: &Path) -> rusqlite::Result<Connection> {
    let mut c = Connection::open(db_path)?;
    configure(&mut c)?;
    c.execute("ATTACH DATABASE ?1 AS idx", [index_path.to_string_lossy()])?;
    c.pragma_update(None, "query_only", true)?;
    Ok(c)
}

fn configure(c: &mut Connection) -> rusqlite::Result<()> {
    c.pragma_update(None, "journal_mode", "WAL")?;
    // NORMAL: a commit writes the WAL without flushing it; `Inner::sync_wal` flushes it before anything
    // is acknowledged, so an acknowledged append survives power loss as under FULL. (Checkpoints flush
    // the WAL before copying it and the database file after, under NORMAL as under FULL.)
    c.pragma_update(None, "synchronous", "NORMAL")?;
    // Statement journals (the undo of one statement inside a transaction) stay in memory: marking a
    // chunk of rows indexed journals more than the 64 KiB SQLite otherwise keeps before spilling to
    // a temporary file, a write system call per page on the writer's path. No read here sorts or
    // builds temporary tables large enough for memory to matter.
    c.pragma_update(None, "temp_store", "MEMORY")?;
    c.busy_handler(Some(busy))?;
    c.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// The events table and its indexes as the first migration creates them, every index kept on every
/// insert (a later migration makes the secondary ones lag in chunks): the plain layout benchmark
/// anchors build, so that the store is measured against the straightforward way to store the log.
pub const EVENTS_SCHEMA: &str = include_str!("../migrations/0001_events.sql");

const MIGRATIONS: &[&str] = &[
    EVENTS_SCHEMA,
    include_str!("../migrations/0002_recipients.sql"),
    include_str!("../migrations/0003_cursors.sql"),
    include_str!("../migrations/0004_snapshots.sql"),
    include_str!("../migrations/0005_deferred_indexes.sql"),
    include_str!("../migrations/0006_records.sql"),
    include_str!("../migrations/0007_log_floor.sql"),
    include_str!("../migrations/0008_index_file.sql"),
];

fn migrate(c: &Connection, path: &Path) -> Result<(), Error> {
    let err = |source| Error::Migrate { path: path.into(), source };
    let version: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(err)?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(Error::TooNew { path: path.into(), found: version, known });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = c.unchecked_transaction().map_err(err)?;
        tx.execute_batch(sql).map_err(err)?;
        tx.pragma_update(None, "user_version", i as i64 + 1).map_err(err)?;
        tx.commit().map_err(err)?;
        tracing::info!(version = i + 1, path = %path.display(), "applied migration");
    }
    Ok(())
}

fn backend_err(e: impl std::fmt::Display) -> clutch_store::Error {
    clutch_store::Error::Backend(e.to_string())
}

impl Inner {
    fn check_open(&self) -> clutch_store::Result<()> {
        if self.closed.load(Ordering::Acquire) { Err(clutch_store::Error::Closed) } else { Ok(()) }
    }

    /// Flushes the WAL file to disk (`fdatasync`): every transaction committed before this call is
    /// durable when it returns. The file is opened at the first call, and its directory flushed then
    /// too, so that the WAL's own name is durable as well; with no WAL yet, nothing was written.
    fn sync_wal(&self) -> std::io::Result<()> {
        let flushing = self.progress.flushing();
        self.flush_wal()?;
        self.progress.durable(flushing);
        Ok(())
    }

    fn flush_wal(&self) -> std::io::Result<()> {
        let mut wal = self.wal.lock().expect("wal lock");
        if wal.is_none() {
            let mut path = self.db_path.clone().into_os_string();
            path.push("-wal");
            let file = match std::fs::File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            if let Some(dir) = self.db_path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            *wal = Some(file);
        }
        wal.as_ref().map_or(Ok(()), std::fs::File::sync_data)
    }

    /// Runs `f` on the writer connection, on this thread; with `sync`, flushes the WAL after it.
    fn write<T>(&self, sync: bool, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> clutch_store::Result<T> {
        self.check_open()?;
        let out = {
            let mut guard = self.writer.lock().expect("writer lock");
            let conn = guard.as_mut().ok_or(clutch_store::Error::Closed)?;
            f(conn).map_err(backend_err)?
        };
        if sync {
            self.sync_wal().map_err(|e| clutch_store::Error::NotDurable(e.to_string()))?;
        }
        Ok(out)
    }

    /// [`Inner::write`] on the blocking pool.
    async fn with_writer<T: Send + 'static>(
        self: &Arc<Self>,
        sync: bool,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> clutch_store::Result<T> {
        let inner = self.clone();
        tokio::task::spawn_blocking(move || inner.write(sync, f)).await.map_err(backend_err)?
    }

    /// Runs `f` on a read connection (on the blocking pool).
    async fn with_reader<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> clutch_store::Result<T> {
        self.check_open()?;
        let slot = self.read_slots.clone().acquire_owned().await.map_err(backend_err)?;
        let inner = self.clone();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let conn = inner.readers.lock().expect("reader pool lock").pop();
            let conn = match conn {
                Some(c) => c,
                None => reader(&inner.db_path, &inner.index_path).map_err(backend_err)?,
            };
            let out = f(&conn).map_err(backend_err);
            let mut pool = inner.readers.lock().expect("reader pool lock");
            if pool.len() < READERS {
                pool.push(conn);
            }
            out
        })
        .await
        .map_err(backend_err)?
    }
}

/// How long a list waits for the indexer to cover what is durable before it answers as of less.
const LISTS_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

impl Inner {
    /// Runs a read of the lists once the index covers what is durable now (or [`LISTS_PATIENCE`]
    /// has passed: the page then says how far it reaches, `as_of`).
    async fn lists<T: Send + 'static>(
        self: &Arc<Self>,
        query: Query,
        f: impl FnOnce(&Connection, Query) -> rusqlite::Result<T> + Send + 'static,
    ) -> clutch_store::Result<T> {
        if query.cursor.is_none() {
            let progress = self.progress.clone();
            tokio::task::spawn_blocking(move || progress.catch_up(LISTS_PATIENCE)).await.map_err(backend_err)?;
        }
        self.with_reader(move |c| f(c, query)).await
    }
}

impl BlockingWrites for Inner {
    fn sync(&self) -> clutch_store::Result<()> {
        self.check_open()?;
        self.sync_wal().map_err(|e| clutch_store::Error::NotDurable(e.to_string()))
    }

    fn write_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        let rows = log::Row::all(batch);
        self.write(false, |conn| log::append(conn, &rows, &self.progress))
    }
}

#[async_trait]
impl Backend for Store {
    async fn append_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        let (rows, progress) = (log::Row::all(batch), self.inner.progress.clone());
        self.inner.with_writer(true, move |conn| log::append(conn, &rows, &progress)).await
    }

    async fn write_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        let (rows, progress) = (log::Row::all(batch), self.inner.progress.clone());
        self.inner.with_writer(false, move |conn| log::append(conn, &rows, &progress)).await
    }

    fn blocking_writes(&self) -> Option<Arc<dyn BlockingWrites>> {
        Some(self.inner.clone())
    }

    fn index_lag(&self) -> Option<u64> {
        Some(self.inner.progress.lag())
    }

    async fn sync(&self) -> clutch_store::Result<()> {
        self.inner.check_open()?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            inner.sync_wal().map_err(|e| clutch_store::Error::NotDurable(e.to_string()))
        })
        .await
        .map_err(backend_err)?
    }

    async fn get(&self, id: &str) -> clutch_store::Result<Option<Event>> {
        let id = id.to_string();
        self.inner.with_reader(move |c| log::get(c, &id)).await
    }

    async fn read(&self, filter: &Filter, after: u64, limit: usize) -> clutch_store::Result<Vec<Event>> {
        let filter = filter.clone();
        self.inner.with_reader(move |c| log::read(c, &filter, after, limit)).await
    }

    async fn head(&self) -> clutch_store::Result<u64> {
        self.inner.with_reader(log::head).await
    }

    async fn put_artifact(&self, bytes: Bytes) -> clutch_store::Result<Artifact> {
        self.inner.check_open()?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.artifacts.put(&bytes)).await.map_err(backend_err)?
    }

    async fn get_artifact(&self, sha256: &str) -> clutch_store::Result<Option<Bytes>> {
        self.inner.check_open()?;
        let inner = self.inner.clone();
        let sha = sha256.to_string();
        tokio::task::spawn_blocking(move || inner.artifacts.get(&sha)).await.map_err(backend_err)?
    }

    async fn cursor(&self, name: &str) -> clutch_store::Result<Option<u64>> {
        let name = name.to_string();
        self.inner
            .with_reader(move |c| {
                c.prepare_cached("SELECT seq FROM cursors WHERE name = ?1")?
                    .query_row([&name], |r| r.get::<_, i64>(0))
                    .optional()
                    .map(|s| s.map(|s| s as u64))
            })
            .await
    }

    async fn set_cursor(&self, name: &str, seq: u64) -> clutch_store::Result<()> {
        let name = name.to_string();
        self.inner
            .with_writer(true, move |conn| {
                conn.prepare_cached(
                    "INSERT INTO cursors (name, seq) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET seq = excluded.seq",
                )?
                .execute(rusqlite::params![name, seq.min(i64::MAX as u64) as i64])
                .map(|_| ())
            })
            .await
    }

    async fn snapshot(&self, name: &str) -> clutch_store::Result<Option<Snapshot>> {
        let name = name.to_string();
        self.inner
            .with_reader(move |c| {
                c.prepare_cached("SELECT seq, body FROM snapshots WHERE name = ?1")?
                    .query_row([&name], |r| {
                        Ok(Snapshot { seq: r.get::<_, i64>(0)? as u64, body: Bytes::from(r.get::<_, Vec<u8>>(1)?) })
                    })
                    .optional()
            })
            .await
    }

    async fn set_snapshot(&self, name: &str, snapshot: &Snapshot) -> clutch_store::Result<()> {
        let (name, snapshot) = (name.to_string(), snapshot.clone());
        self.inner
            .with_writer(true, move |conn| {
                conn.prepare_cached(
                    "INSERT INTO snapshots (name, seq, body) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, body = excluded.body",
                )?
                .execute(rusqlite::params![name, snapshot.seq.min(i64::MAX as u64) as i64, &snapshot.body[..]])
                .map(|_| ())
            })
            .await
    }

    async fn record(&self, space: &str, key: &str) -> clutch_store::Result<Option<Bytes>> {
        let (space, key) = (space.to_string(), key.to_string());
        self.inner
            .with_reader(move |c| {
                c.prepare_cached("SELECT body FROM records WHERE space = ?1 AND key = ?2")?
                    .query_row([&space, &key], |r| Ok(Bytes::from(r.get::<_, Vec<u8>>(0)?)))
                    .optional()
            })
            .await
    }

    async fn records(&self, space: &str) -> clutch_store::Result<Vec<(String, Bytes)>> {
        let space = space.to_string();
        self.inner
            .with_reader(move |c| {
                c.prepare_cached("SELECT key, body FROM records WHERE space = ?1 ORDER BY key")?
                    .query_map([&space], |r| Ok((r.get::<_, String>(0)?, Bytes::from(r.get::<_, Vec<u8>>(1)?))))?
                    .collect()
            })
            .await
    }

    async fn put_record(&self, space: &str, key: &str, body: Bytes) -> clutch_store::Result<()> {
        let (space, key) = (space.to_string(), key.to_string());
        self.inner
            .with_writer(true, move |conn| {
                conn.prepare_cached(
                    "INSERT INTO records (space, key, body) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (space, key) DO UPDATE SET body = excluded.body",
                )?
                .execute(rusqlite::params![space, key, &body[..]])
                .map(|_| ())
            })
            .await
    }

    async fn delete_record(&self, space: &str, key: &str) -> clutch_store::Result<bool> {
        let (space, key) = (space.to_string(), key.to_string());
        self.inner
            .with_writer(true, move |conn| {
                conn.prepare_cached("DELETE FROM records WHERE space = ?1 AND key = ?2")?
                    .execute([&space, &key])
                    .map(|n| n > 0)
            })
            .await
    }

    async fn remove_run(&self, run_id: &str, upto: u64, limit: usize) -> clutch_store::Result<usize> {
        // Found through the indexes (a read), removed by the writer; nothing else removes events, and
        // the retention pass that calls this runs one at a time.
        let run_id = run_id.to_string();
        let removed = self.inner.with_reader(move |c| log::oldest_of_run(c, &run_id, upto, limit)).await?;
        if removed.is_empty() {
            return Ok(0);
        }
        let removed = self.inner.with_writer(true, move |conn| log::remove(conn, &removed).map(|()| removed)).await?;
        // The index entries go after the events: a crash in between leaves entries that name no
        // event, which reads skip (they join the log) and the next removal of the run does not see.
        let (inner, count) = (self.inner.clone(), removed.len());
        let forgotten = tokio::task::spawn_blocking(move || {
            index::forget(&inner.index.lock().expect("index connection lock"), &removed)
        })
        .await
        .map_err(backend_err)?;
        if let Err(e) = forgotten {
            tracing::warn!(error = %e, "removing retired events' index entries failed; reads skip them");
        }
        Ok(count)
    }

    async fn list_runs(&self, query: &Query) -> clutch_store::Result<Page<RunSummary>> {
        self.inner.lists(query.clone(), |c, q| lists::runs(c, &q)).await
    }

    async fn list_threads(&self, query: &Query) -> clutch_store::Result<Page<ThreadSummary>> {
        self.inner.lists(query.clone(), |c, q| lists::threads(c, &q)).await
    }

    async fn list_tasks(&self, query: &Query) -> clutch_store::Result<Page<TaskListing>> {
        self.inner.lists(query.clone(), |c, q| lists::tasks(c, &q)).await
    }

    async fn search(&self, text: &str, query: &Query) -> clutch_store::Result<Page<SearchHit>> {
        let text = text.to_owned();
        self.inner.lists(query.clone(), move |c, q| lists::search(c, &text, &q)).await
    }

    async fn rebuild_lists(&self) -> clutch_store::Result<u64> {
        self.inner.check_open()?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            inner.progress.catch_up(std::time::Duration::from_secs(5));
            index::rebuild_lists(&mut inner.index.lock().expect("index connection lock"))
        })
        .await
        .map_err(backend_err)?
        .map_err(backend_err)
    }

    async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.inner.clone();
        let _ = tokio::task::spawn_blocking(move || {
            inner.readers.lock().expect("reader pool lock").clear();
            if let Some(checkpointer) = inner.checkpointer.lock().expect("checkpointer lock").take() {
                checkpointer.stop();
            }
            if let Some(indexer) = inner.indexer.lock().expect("indexer lock").take() {
                indexer.stop(&inner.progress);
            }
            if let Some(conn) = inner.writer.lock().expect("writer lock").take() {
                // Fold the WAL into the database so the next start reads one file.
                if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
                    tracing::warn!(error = %e, "WAL checkpoint on close failed");
                }
                if let Err((_, e)) = conn.close() {
                    tracing::warn!(error = %e, "closing the SQLite writer failed");
                }
            }
        })
        .await;
    }
}
