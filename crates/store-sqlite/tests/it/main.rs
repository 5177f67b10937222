//! The SQLite backend's integration tests: the shared conformance suite and SQLite specifics.

use std::sync::Arc;

use clutch_store::Backend;
use clutch_store::conformance::Harness;
use clutch_store_sqlite::Store;

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
    store.close().await;
}

/// `m` with a fresh id.
fn fresh(m: &clutch_proto::Message) -> clutch_proto::Message {
    let mut m = m.clone();
    m.id = clutch_proto::id::generate(clutch_proto::id::Kind::Message);
    m
}
