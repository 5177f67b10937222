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
