//! The PostgreSQL backend of [`clutch_store::Backend`]: the event log and the artifact store in one
//! schema of a PostgreSQL database, which several daemons may share, with the lists and the search
//! index derived from the log beside them (`lists`).
//!
//! Each batch is appended under the schema's advisory transaction lock (`pg_advisory_xact_lock`, keyed
//! by the schema: `lock_key`), so several stores sharing one schema still produce gap-free `seq`s; the
//! batch's dedup lookups take one round trip and its rows go in with `UNNEST` inserts (see `append`
//! for what each message becomes). Every pooled session commits with `synchronous_commit=on` and plans
//! each statement per execution (a generic plan cached while the log was small kept scanning it), with
//! JIT off. A store opened as the writer ([`Options::writer`], what `clutch serve` does) also holds a
//! session advisory lock on a connection of its own for as long as it is open (`claim_writer`, a key
//! apart from the appends' lock), so a second daemon on the same schema refuses to start
//! ([`Error::Busy`]) and names the session holding it: the engine's state in memory assumes its daemon
//! is the only writer. Artifacts are rows of a table; migrations are the `migrate` module's.

mod append;
mod lists;
mod migrate;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use clutch_store::lists::{Page, Query, RunSummary, SearchHit, TaskListing, ThreadSummary};
use clutch_store::{Artifact, Backend, Entry, Event, Filter, Outcome, Snapshot};
use deadpool_postgres::{
    Hook, HookError, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime, Transaction,
};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row};

/// How to open a [`Store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The PostgreSQL schema holding Clutch's tables, created if missing; `None` means `public`.
    pub schema: Option<String>,
    /// The most connections the store keeps open at once; at least 1.
    pub pool_size: usize,
    /// Hold the schema's writer lock while the store is open (a session advisory lock on a
    /// connection of its own): another store opened with it on the same schema fails with
    /// [`Error::Busy`]. What `clutch serve` does, until several daemons on one database are supported.
    pub writer: bool,
    /// Whether a task of the store derives the lists and the search index as events arrive (on;
    /// off only to measure what they cost, `clutch bench lists`: a list then derives what it needs
    /// before it reads).
    pub lists: bool,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a [`Store`] could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid PostgreSQL URL: {0}; expected something like postgres://user:password@host:5432/database")]
    Url(String),
    #[error("invalid PostgreSQL store options: {0}")]
    Options(String),
    #[error("cannot connect to PostgreSQL at {target}: {reason}; is the server running and the URL right?")]
    Connect { target: String, reason: String },
    #[error("cannot prepare schema `{schema}` in PostgreSQL at {target}: {reason}")]
    Migrate { target: String, schema: String, reason: String },
    #[error(
        "schema `{schema}` is at migration {found}, newer than this build of Clutch knows ({known}); \
         upgrade Clutch or use another schema"
    )]
    TooNew { schema: String, found: i64, known: i64 },
    #[error(
        "another Clutch daemon is already serving schema `{schema}` of the PostgreSQL database at {target} \
         ({holder}); several daemons on one database are not supported yet: stop that one first, or give \
         this one a database of its own"
    )]
    Busy { target: String, schema: String, holder: String },
}

/// The event log and artifact store in one PostgreSQL schema.
#[derive(Debug)]
pub struct Store {
    pool: Pool,
    closed: AtomicBool,
    /// Identifies this store's schema in the advisory locks (see [`lock_key`]).
    lock_key: i32,
    /// The session holding the writer lock, when the store was opened with [`Options::writer`]:
    /// closing it (on [`Backend::close`] or drop) releases the lock.
    writer: std::sync::Mutex<Option<tokio_postgres::Client>>,
    /// The lists and the search index, derived from the log behind the appends.
    lists: lists::Lists,
}

impl Store {
    /// Connects to the database at `url`, creates the schema if missing, applies pending migrations and
    /// returns a store whose pooled connections all use that schema.
    pub async fn open(url: &str, options: Options) -> Result<Store> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| Error::Url(describe(&e)))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if options.pool_size == 0 {
            return Err(Error::Options("pool_size must be at least 1".into()));
        }
        let schema = options.schema.unwrap_or_else(|| "public".to_owned());
        check_schema_name(&schema)?;
        let target = describe_target(&config);
        let lock_key = lock_key(&schema);

        migrate::run(&config, &schema, lock_key).await.map_err(|e| match e {
            migrate::Error::Connect(e) => Error::Connect { target: target.clone(), reason: describe(&e) },
            migrate::Error::Db(e) => {
                Error::Migrate { target: target.clone(), schema: schema.clone(), reason: describe(&e) }
            }
            migrate::Error::TooNew { found, known } => Error::TooNew { schema: schema.clone(), found, known },
        })?;

        let writer = match options.writer {
            true => Some(claim_writer(&config, &target, &schema, lock_key).await?),
            false => None,
        };
        let pool = build_pool(config, &schema, options.pool_size)
            .map_err(|reason| Error::Options(format!("cannot build the connection pool: {reason}")))?;
        // Fail now, not on the first request, if pooled connections cannot be set up.
        drop(pool.get().await.map_err(|e| Error::Connect { target: target.clone(), reason: describe_pool(&e) })?);
        tracing::info!(server = %target, schema = %schema, pool_size = options.pool_size, "opened PostgreSQL store");
        let lists = lists::Lists::start(pool.clone(), lock_key, options.lists);
        Ok(Store { pool, closed: AtomicBool::new(false), lock_key, writer: std::sync::Mutex::new(writer), lists })
    }

    async fn client(&self) -> clutch_store::Result<deadpool_postgres::Client> {
        self.check_open()?;
        pooled(&self.pool).await
    }

    fn check_open(&self) -> clutch_store::Result<()> {
        match self.closed.load(Ordering::Acquire) {
            true => Err(clutch_store::Error::Closed),
            false => Ok(()),
        }
    }
}

/// A connection from `pool`; [`clutch_store::Error::Closed`] once the store is closed.
async fn pooled(pool: &Pool) -> clutch_store::Result<deadpool_postgres::Client> {
    pool.get().await.map_err(|e| match e {
        PoolError::Closed => clutch_store::Error::Closed,
        e => clutch_store::Error::Backend(format!("no PostgreSQL connection: {}", describe_pool(&e))),
    })
}

#[async_trait]
impl Backend for Store {
    async fn append_batch(&self, batch: &[Entry]) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
        let mut client = self.client().await?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        // Read committed: every statement after the lock sees what the previous holder committed.
        let tx = client.build_transaction().isolation_level(IsolationLevel::ReadCommitted).start().await.map_err(db)?;
        let lock = tx.prepare_cached(sql::LOCK_APPEND).await.map_err(db)?;
        tx.execute(&lock, &[&APPEND_LOCK_CLASS, &self.lock_key]).await.map_err(db)?;
        let head_stmt = tx.prepare_cached(sql::HEAD).await.map_err(db)?;
        let head = seq_of(&tx.query_one(&head_stmt, &[]).await.map_err(db)?, 0)?;

        // The two look-ups are independent, so they share one round trip (tokio-postgres pipelines them).
        let (ids, keys) = tokio::try_join!(stored_ids(&tx, batch), stored_keys(&tx, batch))?;
        let plan = append::plan(batch, head, ids, keys)?;
        insert(&tx, &plan.rows).await?;
        tx.commit().await.map_err(db)?;
        if !plan.rows.seq.is_empty() {
            self.lists.wake();
        }
        Ok(plan.outcomes)
    }

    async fn get(&self, id: &str) -> clutch_store::Result<Option<Event>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::GET).await.map_err(db)?;
        client.query_opt(&stmt, &[&id]).await.map_err(db)?.map(|row| event(&row)).transpose()
    }

    async fn read(&self, filter: &Filter, after: u64, limit: usize) -> clutch_store::Result<Vec<Event>> {
        let client = self.client().await?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conditions = [
            ("run_id", filter.run_id.as_deref()),
            ("thread_id", filter.thread_id.as_deref()),
            ("task_id", filter.task_id.as_deref()),
            ("from_agent", filter.agent_id.as_deref()),
            ("\"type\"", filter.kind.map(|k| k.as_str())),
        ];
        // Only the filters that are set appear in the statement, so each of the 32 shapes gets a plan
        // that uses its column's `(column, seq)` index; values are always bound, never spliced.
        let mut query = String::from("SELECT e.seq, e.body FROM events e");
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&after];
        let order = match &filter.to {
            // An inbox read walks the recipient index in seq order and joins the events.
            Some(to) => {
                params.push(to);
                query.push_str(" JOIN recipients r ON r.seq = e.seq WHERE r.seq > $1 AND r.agent_id = $2");
                "r.seq"
            }
            None => {
                query.push_str(" WHERE e.seq > $1");
                "e.seq"
            }
        };
        for (column, value) in &conditions {
            if let Some(value) = value {
                params.push(value);
                query.push_str(&format!(" AND e.{column} = ${}", params.len()));
            }
        }
        params.push(&limit);
        query.push_str(&format!(" ORDER BY {order} LIMIT ${}", params.len()));
        let stmt = client.prepare_cached(&query).await.map_err(db)?;
        client.query(&stmt, &params).await.map_err(db)?.iter().map(event).collect()
    }

    async fn head(&self) -> clutch_store::Result<u64> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::HEAD).await.map_err(db)?;
        seq_of(&client.query_one(&stmt, &[]).await.map_err(db)?, 0)
    }

    async fn cursor(&self, name: &str) -> clutch_store::Result<Option<u64>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::CURSOR).await.map_err(db)?;
        client.query_opt(&stmt, &[&name]).await.map_err(db)?.map(|row| seq_of(&row, 0)).transpose()
    }

    async fn set_cursor(&self, name: &str, seq: u64) -> clutch_store::Result<()> {
        let client = self.client().await?;
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let stmt = client.prepare_cached(sql::SET_CURSOR).await.map_err(db)?;
        client.execute(&stmt, &[&name, &seq]).await.map_err(db)?;
        Ok(())
    }

    async fn snapshot(&self, name: &str) -> clutch_store::Result<Option<Snapshot>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::SNAPSHOT).await.map_err(db)?;
        let Some(row) = client.query_opt(&stmt, &[&name]).await.map_err(db)? else { return Ok(None) };
        Ok(Some(Snapshot { seq: seq_of(&row, 0)?, body: Bytes::from(row.try_get::<_, Vec<u8>>(1).map_err(db)?) }))
    }

    async fn set_snapshot(&self, name: &str, snapshot: &Snapshot) -> clutch_store::Result<()> {
        let client = self.client().await?;
        let seq = i64::try_from(snapshot.seq).unwrap_or(i64::MAX);
        let stmt = client.prepare_cached(sql::SET_SNAPSHOT).await.map_err(db)?;
        client.execute(&stmt, &[&name, &seq, &&snapshot.body[..]]).await.map_err(db)?;
        Ok(())
    }

    async fn record(&self, space: &str, key: &str) -> clutch_store::Result<Option<Bytes>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::RECORD).await.map_err(db)?;
        let Some(row) = client.query_opt(&stmt, &[&space, &key]).await.map_err(db)? else { return Ok(None) };
        Ok(Some(Bytes::from(row.try_get::<_, Vec<u8>>(0).map_err(db)?)))
    }

    async fn records(&self, space: &str) -> clutch_store::Result<Vec<(String, Bytes)>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::RECORDS).await.map_err(db)?;
        let rows = client.query(&stmt, &[&space]).await.map_err(db)?;
        rows.iter()
            .map(|row| Ok((row.try_get(0).map_err(db)?, Bytes::from(row.try_get::<_, Vec<u8>>(1).map_err(db)?))))
            .collect()
    }

    async fn put_record(&self, space: &str, key: &str, body: Bytes) -> clutch_store::Result<()> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::PUT_RECORD).await.map_err(db)?;
        client.execute(&stmt, &[&space, &key, &&body[..]]).await.map_err(db)?;
        Ok(())
    }

    async fn delete_record(&self, space: &str, key: &str) -> clutch_store::Result<bool> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::DELETE_RECORD).await.map_err(db)?;
        Ok(client.execute(&stmt, &[&space, &key]).await.map_err(db)? > 0)
    }

    async fn put_artifact(&self, bytes: Bytes) -> clutch_store::Result<Artifact> {
        let client = self.client().await?;
        let sha256 = clutch_store::sha256_hex(&bytes);
        let size = i64::try_from(bytes.len())
            .map_err(|_| clutch_store::Error::Backend(format!("artifact of {} bytes is too large", bytes.len())))?;
        let stmt = client.prepare_cached(sql::PUT_ARTIFACT).await.map_err(db)?;
        let inserted = client.execute(&stmt, &[&sha256, &size, &&bytes[..]]).await.map_err(db)?;
        Ok(Artifact {
            reference: format!("artifact:sha256:{sha256}"),
            size: bytes.len() as u64,
            existed: inserted == 0,
        })
    }

    async fn get_artifact(&self, sha256: &str) -> clutch_store::Result<Option<Bytes>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql::GET_ARTIFACT).await.map_err(db)?;
        let row = client.query_opt(&stmt, &[&sha256]).await.map_err(db)?;
        row.map(|row| column::<Vec<u8>>(&row, 0).map(Bytes::from)).transpose()
    }

    async fn remove_run(&self, run_id: &str, upto: u64, limit: usize) -> clutch_store::Result<usize> {
        let mut client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let upto = i64::try_from(upto).unwrap_or(i64::MAX);
        let tx = client.build_transaction().isolation_level(IsolationLevel::ReadCommitted).start().await.map_err(db)?;
        // Under the lists' lock, so that no derivation still working on these events writes their
        // rows back after them (taken first: waiting for a derivation holds up no append).
        let lock = tx.prepare_cached(sql::LOCK_APPEND).await.map_err(db)?;
        tx.execute(&lock, &[&LISTS_LOCK_CLASS, &self.lock_key]).await.map_err(db)?;
        // Under the appends' lock, so that no append computes the head between the floor and the delete.
        tx.execute(&lock, &[&APPEND_LOCK_CLASS, &self.lock_key]).await.map_err(db)?;
        let seqs = tx.prepare_cached(sql::RUN_OLDEST).await.map_err(db)?;
        let seqs: Vec<i64> =
            tx.query(&seqs, &[&run_id, &upto, &limit]).await.map_err(db)?.iter().map(|r| r.get(0)).collect();
        if seqs.is_empty() {
            return Ok(0);
        }
        for statement in [sql::RAISE_FLOOR, sql::REMOVE_RECIPIENTS, sql::REMOVE_EVENTS, sql::REMOVE_DOCS] {
            let stmt = tx.prepare_cached(statement).await.map_err(db)?;
            if statement == sql::RAISE_FLOOR {
                tx.execute(&stmt, &[]).await.map_err(db)?;
            } else {
                tx.execute(&stmt, &[&seqs]).await.map_err(db)?;
            }
        }
        // A run with no event left leaves the lists.
        for statement in [sql::REMOVE_RUN_ROW, sql::REMOVE_RUN_THREADS, sql::REMOVE_RUN_TASKS] {
            let stmt = tx.prepare_cached(statement).await.map_err(db)?;
            tx.execute(&stmt, &[&run_id]).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(seqs.len())
    }

    async fn list_runs(&self, query: &Query) -> clutch_store::Result<Page<RunSummary>> {
        self.check_open()?;
        self.lists.runs(query).await
    }

    async fn list_threads(&self, query: &Query) -> clutch_store::Result<Page<ThreadSummary>> {
        self.check_open()?;
        self.lists.threads(query).await
    }

    async fn list_tasks(&self, query: &Query) -> clutch_store::Result<Page<TaskListing>> {
        self.check_open()?;
        self.lists.tasks(query).await
    }

    async fn search(&self, text: &str, query: &Query) -> clutch_store::Result<Page<SearchHit>> {
        self.check_open()?;
        self.lists.search(text, query).await
    }

    async fn rebuild_lists(&self) -> clutch_store::Result<u64> {
        self.check_open()?;
        self.lists.rebuild().await
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.lists.stop();
        self.pool.close();
        drop(self.writer.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

/// The stored messages with one of the batch's ids, in one query.
async fn stored_ids(tx: &Transaction<'_>, batch: &[Entry]) -> clutch_store::Result<Vec<append::StoredId>> {
    let ids: Vec<&str> = batch.iter().map(|e| e.message.id.as_str()).collect();
    let stmt = tx.prepare_cached(sql::BY_IDS).await.map_err(db)?;
    let rows = tx.query(&stmt, &[&ids]).await.map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(append::StoredId {
                id: column(row, 0)?,
                seq: seq_of(row, 1)?,
                run_id: column(row, 2)?,
                body: column(row, 3)?,
            })
        })
        .collect()
}

/// The stored messages with one of the batch's `(run_id, idempotency_key)` pairs, in one query.
async fn stored_keys(tx: &Transaction<'_>, batch: &[Entry]) -> clutch_store::Result<Vec<append::StoredKey>> {
    let (runs, keys): (Vec<&str>, Vec<&str>) = batch
        .iter()
        .map(|e| &e.message)
        .filter_map(|m| Some((m.run_id.as_str(), m.idempotency_key.as_deref()?)))
        .unzip();
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = tx.prepare_cached(sql::BY_KEYS).await.map_err(db)?;
    let rows = tx.query(&stmt, &[&runs, &keys]).await.map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(append::StoredKey {
                run_id: column(row, 0)?,
                key: column(row, 1)?,
                id: column(row, 2)?,
                seq: seq_of(row, 3)?,
            })
        })
        .collect()
}

/// Inserts the planned rows with one statement, whatever their number.
async fn insert(tx: &Transaction<'_>, rows: &append::Rows<'_>) -> clutch_store::Result<()> {
    if rows.seq.is_empty() {
        return Ok(());
    }
    let stmt = tx.prepare_cached(sql::INSERT).await.map_err(db)?;
    let params: [&(dyn ToSql + Sync); 9] = [
        &rows.seq,
        &rows.id,
        &rows.run_id,
        &rows.thread_id,
        &rows.task_id,
        &rows.from_agent,
        &rows.kind,
        &rows.idempotency_key,
        &rows.body,
    ];
    tx.execute(&stmt, &params).await.map_err(db)?;
    if !rows.to_agent.is_empty() {
        let stmt = tx.prepare_cached(sql::INSERT_RECIPIENTS).await.map_err(db)?;
        tx.execute(&stmt, &[&rows.to_agent, &rows.to_seq]).await.map_err(db)?;
    }
    Ok(())
}

/// The statements of the hot paths, prepared once per pooled connection.
mod sql {
    pub(crate) const LOCK_APPEND: &str = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)";
    /// The newest event's `seq`, or the highest retention removed (`log_floor`): `seq` never goes back.
    pub(crate) const HEAD: &str =
        "SELECT GREATEST(coalesce((SELECT max(seq) FROM events), 0), (SELECT seq FROM log_floor))";
    pub(crate) const RUN_OLDEST: &str = "SELECT seq FROM events WHERE run_id = $1 AND seq <= $2 ORDER BY seq LIMIT $3";
    pub(crate) const RAISE_FLOOR: &str = "UPDATE log_floor SET seq = \
        GREATEST(seq, coalesce((SELECT max(seq) FROM events), 0))";
    pub(crate) const REMOVE_RECIPIENTS: &str = "DELETE FROM recipients r USING events e, \
        jsonb_array_elements(CASE WHEN jsonb_typeof(e.body::jsonb->'to') = 'array' THEN e.body::jsonb->'to' \
        ELSE '[]'::jsonb END) t \
        WHERE e.seq = ANY($1::int8[]) AND r.seq = e.seq AND r.agent_id = t->>'agent_id'";
    pub(crate) const REMOVE_EVENTS: &str = "DELETE FROM events WHERE seq = ANY($1::int8[])";
    pub(crate) const REMOVE_DOCS: &str = "DELETE FROM search_docs WHERE seq = ANY($1::int8[])";
    pub(crate) const REMOVE_RUN_ROW: &str =
        "DELETE FROM runs WHERE run_id = $1 AND NOT EXISTS (SELECT 1 FROM events WHERE run_id = $1)";
    pub(crate) const REMOVE_RUN_THREADS: &str =
        "DELETE FROM threads WHERE run_id = $1 AND NOT EXISTS (SELECT 1 FROM events WHERE run_id = $1)";
    pub(crate) const REMOVE_RUN_TASKS: &str =
        "DELETE FROM tasks WHERE run_id = $1 AND NOT EXISTS (SELECT 1 FROM events WHERE run_id = $1)";
    pub(crate) const BY_IDS: &str = "SELECT id, seq, run_id, body FROM events WHERE id = ANY($1::text[])";
    pub(crate) const BY_KEYS: &str = "SELECT e.run_id, e.idempotency_key, e.id, e.seq \
        FROM UNNEST($1::text[], $2::text[]) AS k(run_id, key) \
        JOIN events e ON e.run_id = k.run_id AND e.idempotency_key = k.key \
        WHERE e.idempotency_key IS NOT NULL";
    pub(crate) const INSERT: &str = "INSERT INTO events \
        (seq, id, run_id, thread_id, task_id, from_agent, \"type\", idempotency_key, body) \
        SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
        $7::text[], $8::text[], $9::text[])";
    pub(crate) const INSERT_RECIPIENTS: &str =
        "INSERT INTO recipients (agent_id, seq) SELECT * FROM UNNEST($1::text[], $2::int8[])";
    pub(crate) const GET: &str = "SELECT seq, body FROM events WHERE id = $1";
    pub(crate) const CURSOR: &str = "SELECT seq FROM cursors WHERE name = $1";
    pub(crate) const SET_CURSOR: &str =
        "INSERT INTO cursors (name, seq) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET seq = excluded.seq";
    pub(crate) const SNAPSHOT: &str = "SELECT seq, body FROM snapshots WHERE name = $1";
    pub(crate) const SET_SNAPSHOT: &str = "INSERT INTO snapshots (name, seq, body) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, body = excluded.body";
    pub(crate) const RECORD: &str = "SELECT body FROM records WHERE space = $1 AND key = $2";
    pub(crate) const RECORDS: &str = "SELECT key, body FROM records WHERE space = $1 ORDER BY key";
    pub(crate) const PUT_RECORD: &str = "INSERT INTO records (space, key, body) VALUES ($1, $2, $3) \
         ON CONFLICT (space, key) DO UPDATE SET body = excluded.body";
    pub(crate) const DELETE_RECORD: &str = "DELETE FROM records WHERE space = $1 AND key = $2";
    pub(crate) const PUT_ARTIFACT: &str =
        "INSERT INTO artifacts (sha256, size, bytes) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING";
    pub(crate) const GET_ARTIFACT: &str = "SELECT bytes FROM artifacts WHERE sha256 = $1";
}

/// First half of the advisory-lock key serialising appends to one schema (the second is [`lock_key`]).
const APPEND_LOCK_CLASS: i32 = 0x436c_7501;
/// First half of the advisory-lock key serialising migrations of one schema.
const MIGRATION_LOCK_CLASS: i32 = 0x436c_7502;
/// First half of the advisory-lock key serialising the derivation of one schema's lists.
const LISTS_LOCK_CLASS: i32 = 0x436c_7503;
/// Used when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request waits for a free pooled connection before failing.
const POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The schema's half of the advisory-lock keys: FNV-1a of its name, so stores on different schemas of one
/// database do not wait for each other while daemons sharing a schema do.
/// How long opening a writer waits for the writer lock before it says another daemon holds it.
const WRITER_WAIT: Duration = Duration::from_secs(3);

/// Takes the schema's writer lock on a session of its own, held for as long as the returned client
/// lives. Its key is the two-part `(lock_key, 1)`, a space apart from the one-part key of appends
/// and migrations, so it never waits on them nor they on it.
async fn claim_writer(
    config: &tokio_postgres::Config,
    target: &str,
    schema: &str,
    lock_key: i32,
) -> Result<tokio_postgres::Client> {
    let connect = |e: tokio_postgres::Error| Error::Connect { target: target.to_owned(), reason: describe(&e) };
    let (client, connection) = config.connect(NoTls).await.map_err(connect)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "the PostgreSQL session holding the writer lock ended");
        }
    });
    // A daemon that was just killed holds it until the server sees its session end: a moment.
    let deadline = std::time::Instant::now() + WRITER_WAIT;
    loop {
        let row = client.query_one("SELECT pg_try_advisory_lock($1, 1)", &[&lock_key]).await.map_err(connect)?;
        if row.get::<_, bool>(0) {
            return Ok(client);
        }
        if std::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let holder = client
        .query_opt(
            "SELECT a.pid, host(a.client_addr), to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ') \
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.classid::int4 = $1 AND l.objid = 1 AND l.objsubid = 2",
            &[&lock_key],
        )
        .await
        .ok()
        .flatten()
        .map_or_else(
            || "its session could not be identified".to_owned(),
            |row| {
                let pid: i32 = row.get(0);
                let from: Option<String> = row.get(1);
                let since: Option<String> = row.get(2);
                format!(
                    "PostgreSQL backend pid {pid}, from {}, connected since {}",
                    from.as_deref().unwrap_or("a local socket"),
                    since.as_deref().unwrap_or("an unknown time")
                )
            },
        );
    Err(Error::Busy { target: target.to_owned(), schema: schema.to_owned(), holder })
}

fn lock_key(schema: &str) -> i32 {
    let hash = schema.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    i32::from_ne_bytes(hash.to_ne_bytes())
}

/// PostgreSQL identifiers are at most 63 bytes; a longer name would be silently truncated.
fn check_schema_name(schema: &str) -> Result<()> {
    if schema.is_empty() || schema.len() > 63 || schema.contains('\0') {
        return Err(Error::Options(format!(
            "schema name {schema:?} must be 1 to 63 bytes long and contain no NUL character"
        )));
    }
    Ok(())
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn build_pool(config: tokio_postgres::Config, schema: &str, size: usize) -> Result<Pool, String> {
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    // Every pooled session reads and writes this schema only, and commits durably. Plans are made for
    // each execution: a generic plan cached while the log was small (a new database has no statistics
    // yet) kept scanning the whole table for `id = ANY($1)` long after it had grown. No statement here
    // runs long enough for JIT compilation to pay: a list page whose plan the planner overestimated
    // (a correlated subquery per row it expects) spent 22 ms compiling to run for 0.2.
    let session: Arc<str> = format!(
        "SET search_path TO {}; SET synchronous_commit = on; SET plan_cache_mode = force_custom_plan; SET jit = off",
        quote_ident(schema)
    )
    .into();
    let setup = Hook::async_fn(move |client, _| {
        let session = Arc::clone(&session);
        Box::pin(async move { client.batch_execute(&session).await.map_err(HookError::Backend) })
    });
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(CONNECT_TIMEOUT))
        .wait_timeout(Some(POOL_WAIT_TIMEOUT))
        .post_create(setup)
        .build()
        .map_err(|e| e.to_string())
}

/// Where `config` points, for messages: hosts, ports and database, never the password.
fn describe_target(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let host = match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            let ports = config.get_ports();
            match ports.get(i).or(ports.first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let hosts = if hosts.is_empty() { "(no host)".to_owned() } else { hosts.join(",") };
    format!("{hosts}/{}", config.get_dbname().unwrap_or("(default database)"))
}

/// An error with its chain of causes on one line (`tokio_postgres::Error` alone says just "db error").
fn describe(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out.replace('\n', "; ")
}

fn describe_pool(error: &PoolError) -> String {
    match error {
        PoolError::Backend(e) => describe(e),
        PoolError::PostCreateHook(HookError::Backend(e)) => format!("setting up the session failed: {}", describe(e)),
        e => describe(e),
    }
}

fn db(error: tokio_postgres::Error) -> clutch_store::Error {
    clutch_store::Error::Backend(describe(&error))
}

fn column<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, index: usize) -> clutch_store::Result<T> {
    row.try_get(index).map_err(|e| clutch_store::Error::Corrupt(describe(&e)))
}

fn seq_of(row: &Row, index: usize) -> clutch_store::Result<u64> {
    let seq: i64 = column(row, index)?;
    u64::try_from(seq).map_err(|_| clutch_store::Error::Corrupt(format!("negative seq {seq}")))
}

fn event(row: &Row) -> clutch_store::Result<Event> {
    let body: String = column(row, 1)?;
    Ok(Event { seq: seq_of(row, 0)?, json: Arc::from(body) })
}
