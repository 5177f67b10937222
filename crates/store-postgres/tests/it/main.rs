//! The PostgreSQL backend's integration tests in one binary: the shared conformance suite, plus what
//! only this backend has (daemons sharing a database, connection errors).

mod daemons;
mod open;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use clutch_store::Backend;
use clutch_store::conformance::Harness;
use clutch_store_postgres::{Options, Store};
use tokio_postgres::NoTls;

/// Names the database the tests create their schemas in.
const URL_VAR: &str = "CLUTCH_TEST_PG_URL";

/// The test database's URL; `None` (after a notice) when it is not configured outside CI.
pub fn test_url() -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!("{URL_VAR} must be set in CI"),
        _ => {
            eprintln!("skipping a PostgreSQL test: set {URL_VAR}=postgres://user@host:port/database to run it");
            None
        }
    }
}

/// A fresh schema of its own for one test, dropped when the test passes (kept for a look when it fails).
pub struct PgHarness {
    url: String,
    schema: String,
}

/// A harness on a new schema, or `None` when PostgreSQL tests are not configured.
pub async fn harness() -> Option<PgHarness> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let url = test_url()?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let schema = format!("t_{}_{}_{nanos}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let harness = PgHarness { url, schema };
    harness.client().await.batch_execute(&format!("CREATE SCHEMA {}", harness.schema)).await.expect("create schema");
    Some(harness)
}

impl PgHarness {
    pub async fn store(&self) -> Store {
        let options = Options { schema: Some(self.schema.clone()), pool_size: 4, writer: false, lists: true };
        Store::open(&self.url, options).await.expect("open the PostgreSQL store")
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A plain connection with the test's schema first on its search path, to look behind the store.
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls).await.expect("connect to PostgreSQL");
        tokio::spawn(connection);
        client.batch_execute(&format!("SET search_path TO {}", self.schema)).await.expect("set search_path");
        client
    }
}

#[async_trait::async_trait]
impl Harness for PgHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        Arc::new(self.store().await)
    }
}

impl Drop for PgHarness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept schema {} of the failed test", self.schema);
            return;
        }
        // Best effort, on a thread of its own: the test's runtime is winding down around us.
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let cleanup = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            runtime.block_on(async {
                let Ok((client, connection)) = tokio_postgres::connect(&url, NoTls).await else { return };
                let driver = tokio::spawn(connection);
                let sql = format!("SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {schema} CASCADE");
                if let Err(error) = client.batch_execute(&sql).await {
                    eprintln!("could not drop schema {schema}: {error}");
                }
                drop(client);
                let _ = driver.await;
            });
        });
        let _ = cleanup.join();
    }
}

/// `conformance_tests!` awaits its argument inside each test, so the `return` here ends the test early
/// when PostgreSQL tests are not configured.
macro_rules! pg_harness {
    () => {
        match $crate::harness().await {
            Some(harness) => std::future::ready(harness),
            None => return,
        }
    };
}

clutch_store::conformance_tests!(pg_harness!());
