//! The SQLite backend's integration tests: the shared conformance suite and SQLite specifics.

use std::sync::Arc;

use clutch_store::conformance::Harness;
use clutch_store::{Backend, Filter};
use clutch_store_sqlite::{Options, Store};

struct TempStore {
    dir: tempfile::TempDir,
}

#[async_trait::async_trait]
impl Harness for TempStore {
    async fn open(&self) -> Arc<dyn Backend> {
        Arc::new(Store::open(self.dir.path()).expect("open store"))
    }
}

async fn harness() -> TempStore {
    TempStore { dir: tempfile::tempdir().expect("temp dir") }
}

mod conformance {
    use super::harness;
    clutch_store::conformance_tests!(harness());
}

/// A store whose indexer wakes every three durable rows and never on its timer, so that the shared
/// suite's reads cross from indexed rows to the unindexed tail, wherever the indexer has got to.
struct ChunkedStore {
    dir: tempfile::TempDir,
}

#[async_trait::async_trait]
impl Harness for ChunkedStore {
    async fn open(&self) -> Arc<dyn Backend> {
        let options =
            Options { index_chunk: 3, index_every: std::time::Duration::from_secs(3600), ..Options::default() };
        Arc::new(Store::open_with(self.dir.path(), options).expect("open store"))
    }
}

async fn chunked() -> ChunkedStore {
    ChunkedStore { dir: tempfile::tempdir().expect("temp dir") }
}

mod conformance_with_small_index_chunks {
    use super::chunked;
    clutch_store::conformance_tests!(chunked());
}

/// Forty messages over two runs, three threads, five tasks, four senders and three types, appended in
/// batches of one to six.
fn varied() -> Vec<clutch_proto::Message> {
    use clutch_proto::MessageType::{ChatMessage, TaskProgress, TaskRequest};
    let ids = |kind, n| (0..n).map(|_| clutch_proto::id::generate(kind)).collect::<Vec<_>>();
    let runs = ids(clutch_proto::id::Kind::Run, 2);
    let threads = ids(clutch_proto::id::Kind::Thread, 3);
    let tasks = ids(clutch_proto::id::Kind::Task, 5);
    let senders = ["agent:a", "agent:b", "agent:c", "agent:d"];
    (0..40)
        .map(|i| {
            let kind = [ChatMessage, TaskProgress, TaskRequest][i % 3];
            let (run, thread, task) = (&runs[i % 2], &threads[i % 3], &tasks[(i * 7) % 5]);
            clutch_store::conformance::message(run, thread, task, senders[(i / 3) % 4], kind)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_the_same_however_far_the_indexes_lag() {
    let messages = varied();
    let mut stores = Vec::new();
    for chunk in [1, 4, 7, 512] {
        let dir = tempfile::tempdir().unwrap();
        // Only the first store indexes on its timer too: the others lag by up to a chunk.
        let every = std::time::Duration::from_millis(if chunk == 1 { 10 } else { 3_600_000 });
        let store =
            Store::open_with(dir.path(), Options { index_chunk: chunk, index_every: every, ..Options::default() })
                .unwrap();
        let (mut start, mut size) = (0, 1);
        while start < messages.len() {
            let end = (start + size).min(messages.len());
            store.append_messages(&messages[start..end]).await.unwrap();
            (start, size) = (end, size % 6 + 1);
        }
        stores.push((chunk, store, dir));
    }
    // The reference reads through its indexes alone.
    indexed_within(&stores[0].1, 40, std::time::Duration::from_secs(10)).await;
    let lag = |store: &Store| Backend::index_lag(store);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while lag(&stores[0].1) != Some(0) {
        assert!(std::time::Instant::now() < deadline, "lag {:?} with everything indexed", lag(&stores[0].1));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // The lagging ones say how far behind they are: never more than what is stored.
    for (chunk, store, _) in &stores[1..] {
        assert!(lag(store).is_some_and(|n| n <= 40), "chunk {chunk}: {:?}", lag(store));
    }
    let m = &messages[0];
    let filters = [
        Filter { run_id: Some(m.run_id.clone()), ..Filter::default() },
        Filter { thread_id: Some(m.thread_id.clone()), ..Filter::default() },
        Filter { task_id: Some(m.task_id.clone()), ..Filter::default() },
        Filter { agent_id: Some("agent:b".into()), ..Filter::default() },
        Filter { kind: Some(clutch_proto::MessageType::TaskProgress), ..Filter::default() },
        Filter { run_id: Some(m.run_id.clone()), kind: Some(m.kind), ..Filter::default() },
        Filter { to: Some("agent:orchestrator".into()), ..Filter::default() },
        Filter::default(),
    ];
    for filter in &filters {
        for after in [0, 1, 5, 12, 27, 36, 39, 40] {
            for limit in [1, 2, 5, 100] {
                let (_, indexed, _) = &stores[0];
                let expected: Vec<u64> =
                    indexed.read(filter, after, limit).await.unwrap().iter().map(|e| e.seq).collect();
                for (chunk, store, _) in &stores[1..] {
                    let got: Vec<u64> = store.read(filter, after, limit).await.unwrap().iter().map(|e| e.seq).collect();
                    assert_eq!(got, expected, "chunk {chunk}, {filter:?}, after {after}, limit {limit}");
                }
            }
        }
    }
    // The reference is right, not merely consistent: every read by run against the messages themselves.
    let (_, indexed, _) = &stores[0];
    let by_run: Vec<u64> = (1..=40u64).filter(|seq| messages[*seq as usize - 1].run_id == m.run_id).collect();
    let read: Vec<u64> = indexed.read(&filters[0], 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(read, by_run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_the_index_file_is_migrated_and_read_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let messages = varied();
    {
        // A store as the fourth schema version left it, holding the first thirty messages.
        let c = rusqlite::Connection::open(dir.path().join(clutch_store_sqlite::DB_FILE)).unwrap();
        for sql in [
            include_str!("../../migrations/0001_events.sql"),
            include_str!("../../migrations/0002_recipients.sql"),
            include_str!("../../migrations/0003_cursors.sql"),
            include_str!("../../migrations/0004_snapshots.sql"),
        ] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 4).unwrap();
        for (i, m) in messages[..30].iter().enumerate() {
            c.execute(
                "INSERT INTO events (seq, id, run_id, thread_id, task_id, from_agent, type, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                rusqlite::params![
                    i as i64 + 1,
                    m.id,
                    m.run_id,
                    m.thread_id,
                    m.task_id,
                    m.from.agent_id,
                    m.kind.as_str(),
                    serde_json::to_string(m).unwrap()
                ],
            )
            .unwrap();
        }
    }
    let store = Store::open(dir.path()).unwrap();
    let c = rusqlite::Connection::open(store.path()).unwrap();
    let version: i64 = c.query_row("SELECT user_version FROM pragma_user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 8);
    // The rows already stored are indexed in the background, into the index file.
    indexed_within(&store, 30, std::time::Duration::from_secs(10)).await;
    store.append_messages(&messages[30..]).await.unwrap();
    let m = &messages[0];
    let filter = Filter { agent_id: Some(m.from.agent_id.clone()), ..Filter::default() };
    let read: Vec<u64> = store.read(&filter, 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    let expected: Vec<u64> =
        (1..=40u64).filter(|seq| messages[*seq as usize - 1].from.agent_id == m.from.agent_id).collect();
    assert_eq!(read, expected, "old rows through the index, new ones from the tail");
}

/// Waits until `store`'s indexes cover `seq`.
async fn indexed_within(store: &Store, seq: u64, within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    while store.indexed_upto() < seq {
        assert!(
            std::time::Instant::now() < deadline,
            "indexed up to {} of {seq} after {within:?}",
            store.indexed_upto()
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The seqs `store` reads for each of the filters by run, thread, task, sender and type of `m`.
async fn reads_of(store: &Store, m: &clutch_proto::Message) -> Vec<Vec<u64>> {
    let filters = [
        Filter { run_id: Some(m.run_id.clone()), ..Filter::default() },
        Filter { thread_id: Some(m.thread_id.clone()), ..Filter::default() },
        Filter { task_id: Some(m.task_id.clone()), ..Filter::default() },
        Filter { agent_id: Some(m.from.agent_id.clone()), ..Filter::default() },
        Filter { kind: Some(m.kind), ..Filter::default() },
    ];
    let mut reads = Vec::new();
    for filter in &filters {
        reads.push(store.read(filter, 0, 100).await.unwrap().iter().map(|e| e.seq).collect());
    }
    reads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_or_damaged_index_file_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let messages = varied();
    let index = dir.path().join(clutch_store_sqlite::INDEX_FILE);
    let expected = {
        let store = Store::open(dir.path()).unwrap();
        store.append_messages(&messages).await.unwrap();
        indexed_within(&store, 40, std::time::Duration::from_secs(10)).await;
        let reads = reads_of(&store, &messages[0]).await;
        store.close().await;
        reads
    };
    assert!(expected.iter().all(|r| !r.is_empty()));
    for damage in ["removed", "garbage", "ahead of its log"] {
        match damage {
            "removed" => std::fs::remove_file(&index).unwrap(),
            "garbage" => std::fs::write(&index, b"this is not a database").unwrap(),
            _ => {
                let c = rusqlite::Connection::open(&index).unwrap();
                c.execute("UPDATE indexed_upto SET seq = 1000", []).unwrap();
                c.execute("INSERT INTO by_run (key, seq) VALUES ('run_stale', 999)", []).unwrap();
            }
        }
        let store = Store::open(dir.path()).unwrap();
        indexed_within(&store, 40, std::time::Duration::from_secs(10)).await;
        assert_eq!(store.indexed_upto(), 40, "{damage}: the index never passes the log");
        assert_eq!(reads_of(&store, &messages[0]).await, expected, "{damage}");
        store.close().await;
    }
}

#[test]
fn store_is_created_in_a_new_directory() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/data");
    let store = Store::open(&nested).unwrap();
    assert!(store.path().exists());
    assert!(nested.join("artifacts").is_dir());
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let c = rusqlite::Connection::open(dir.path().join(clutch_store_sqlite::DB_FILE)).unwrap();
    c.pragma_update(None, "user_version", 99).unwrap();
    drop(c);
    let err = Store::open(dir.path()).err().expect("refused");
    assert!(err.to_string().contains("newer than this build"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_checkpointed_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let db_size = || std::fs::metadata(store.path()).unwrap().len();
    let before = db_size();
    let run = clutch_proto::id::generate(clutch_proto::id::Kind::Run);
    let thread = clutch_proto::id::generate(clutch_proto::id::Kind::Thread);
    let task = clutch_proto::id::generate(clutch_proto::id::Kind::Task);
    let batch: Vec<_> = (0..500)
        .map(|_| {
            clutch_store::conformance::message(&run, &thread, &task, "agent:a", clutch_proto::MessageType::ChatMessage)
        })
        .collect();
    store.append_messages(&batch).await.unwrap();
    // Appends only write the WAL; the database file grows when the checkpoint thread copies pages in.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db_size() <= before {
        assert!(std::time::Instant::now() < deadline, "no checkpoint within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    store.close().await;
}

/// The WAL header's checkpoint sequence number, which grows by one each time the WAL is restarted.
fn wal_restarts(dir: &std::path::Path) -> u32 {
    let header = std::fs::read(dir.join(format!("{}-wal", clutch_store_sqlite::DB_FILE))).unwrap_or_default();
    header.get(12..16).map_or(0, |b| u32::from_be_bytes(b.try_into().unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_steady_appends_the_wal_is_restarted_not_grown() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = clutch_proto::id::generate(clutch_proto::id::Kind::Run);
    let thread = clutch_proto::id::generate(clutch_proto::id::Kind::Thread);
    let batch = || -> Vec<clutch_store::Entry> {
        (0..50)
            .map(|_| {
                let task = clutch_proto::id::generate(clutch_proto::id::Kind::Task);
                let m = clutch_store::conformance::message(
                    &run,
                    &thread,
                    &task,
                    "agent:a",
                    clutch_proto::MessageType::ChatMessage,
                );
                clutch_store::Entry::new(m)
            })
            .collect()
    };
    let store = Arc::new(store);
    store.write_batch(&batch()).await.unwrap();
    let first = wal_restarts(dir.path());
    // Commits follow each other without a pause (four writers keep the writer's lock busy), as under
    // load: a passive checkpoint alone never catches up with them, so only a restart keeps the WAL
    // from growing.
    let restarted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (store, restarted, batch) = (store.clone(), restarted.clone(), batch());
            tokio::spawn(async move {
                while !restarted.load(std::sync::atomic::Ordering::Relaxed) {
                    let again: Vec<_> = batch.iter().map(|e| clutch_store::Entry::new(fresh(&e.message))).collect();
                    store.write_batch(&again).await.unwrap();
                }
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while wal_restarts(dir.path()) == first {
        assert!(std::time::Instant::now() < deadline, "the WAL was never restarted under load");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    restarted.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    store.sync().await.unwrap();
    let wal = std::fs::metadata(dir.path().join(format!("{}-wal", clutch_store_sqlite::DB_FILE))).unwrap().len();
    assert!(wal < 64 << 20, "the WAL stays bounded: {wal} bytes");
    // The index file's WAL too, its indexer checkpointing as it commits.
    let index_wal = dir.path().join(format!("{}-wal", clutch_store_sqlite::INDEX_FILE));
    let index_wal = std::fs::metadata(index_wal).map_or(0, |m| m.len());
    assert!(index_wal < 64 << 20, "the index's WAL stays bounded: {index_wal} bytes");
    store.close().await;
}

/// `m` with a fresh id.
fn fresh(m: &clutch_proto::Message) -> clutch_proto::Message {
    let mut m = m.clone();
    m.id = clutch_proto::id::generate(clutch_proto::id::Kind::Message);
    m
}
