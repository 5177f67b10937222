//! The lists of runs, threads and tasks and the search index ([`clutch_store::lists`]) in tables of
//! the schema, derived from the log behind the appends, which never wait for them: a task of the
//! store's own follows the log (woken by its appends, at most every 250 ms, and every 250 ms for
//! other stores' appends), and every list or search first derives what it has not reached yet, so
//! that it reflects every event appended before it was asked for. Each chunk of events is derived
//! in one transaction under an advisory lock of its own, so stores sharing a schema take turns and
//! the lists always cover exactly the events up to `lists_upto`.
//!
//! A derivation commits without waiting for its flush (`begin_derivation`): the lists are derived
//! data and `lists_upto` commits with them, so a crash loses whole derivations only, derived again at
//! the next start. Retention's `remove_run` takes the lists' lock before the appends', so no
//! derivation in flight writes a removed run's rows back. The follower refreshes the tables'
//! statistics itself every [`ANALYZE_EVERY`] events it derives. The search index is `search_docs`,
//! with a generated `tsvector` under a GIN index; the arrays the filters read (a run's agents, a
//! thread's participants, a task's requirements) are generated `jsonb` columns.

use std::sync::Arc;
use std::time::Duration;

use clutch_proto::Message;
use clutch_store::lists::{self, Cursor, Page, Query, Rows, RunSummary, SearchHit, TaskListing, ThreadSummary};
use clutch_store::{Error, Result};
use deadpool_postgres::{Client, Pool, Transaction};
use tokio::sync::{Mutex, Notify};
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;

use crate::{LISTS_LOCK_CLASS, column, db, pooled, seq_of};

/// The most events one derivation transaction reads.
const CHUNK: i64 = 4096;
/// How often the follower looks for events its own store did not tell it of (another store's).
const POLL: Duration = Duration::from_millis(250);
/// The least time from one of the follower's derivations to the next: under a steady stream of
/// appends each takes what gathered meanwhile (a few thousand events), rather than one append's
/// events, since a derivation rewrites every row its events touch (a busy hub's appends touch the
/// same runs again and again). A list or search derives what is left itself before it reads.
const PACE: Duration = Duration::from_millis(250);
/// How long the follower waits after a failure before it tries again.
const RETRY: Duration = Duration::from_secs(5);

/// The store's side of the lists: the follower task, and the turn it shares with reads.
#[derive(Debug)]
pub(crate) struct Lists {
    shared: Arc<Shared>,
    follower: tokio::task::AbortHandle,
}

#[derive(Debug)]
struct Shared {
    pool: Pool,
    /// The schema's half of the lists' advisory-lock key.
    lock_key: i32,
    /// One derivation at a time in this store (taken before a pooled connection).
    turn: Mutex<()>,
    /// Poked after each append, so the follower derives it promptly.
    wake: Notify,
}

impl Lists {
    /// Starts following the log on the current runtime (unless `follow` is off: then only reads derive).
    pub(crate) fn start(pool: Pool, lock_key: i32, follow: bool) -> Lists {
        let shared = Arc::new(Shared { pool, lock_key, turn: Mutex::new(()), wake: Notify::new() });
        let follower = if follow {
            tokio::spawn(self::follow(Arc::clone(&shared))).abort_handle()
        } else {
            tokio::spawn(async {}).abort_handle()
        };
        Lists { shared, follower }
    }

    /// Tells the follower that events were appended.
    pub(crate) fn wake(&self) {
        self.shared.wake.notify_one();
    }

    /// Stops the follower (a derivation cut off rolls back).
    pub(crate) fn stop(&self) {
        self.follower.abort();
    }

    pub(crate) async fn runs(&self, query: &Query) -> Result<Page<RunSummary>> {
        self.page(query).await
    }

    pub(crate) async fn threads(&self, query: &Query) -> Result<Page<ThreadSummary>> {
        self.page(query).await
    }

    pub(crate) async fn tasks(&self, query: &Query) -> Result<Page<TaskListing>> {
        self.page(query).await
    }

    /// A page of events whose text holds every word of `text`, by rank then newest, pinned to `as_of`.
    pub(crate) async fn search(&self, text: &str, query: &Query) -> Result<Page<SearchHit>> {
        let (client, upto) = self.shared.catch_up().await?;
        let as_of = query.cursor.map_or(upto, |c| c.as_of);
        let words = lists::words(text);
        if words.is_empty() {
            return Ok(Page { items: Vec::new(), next: None, as_of });
        }
        // Words are letters and digits only, so joined with `&` they are a tsquery of nothing else.
        let tsquery = words.join(" & ");
        let (start, within) = lists::search_window(query.cursor.map_or(0, |c| c.after));
        let (as_of_param, start_param, window) = (int(as_of), int(start), int(lists::SEARCH_WINDOW));
        let mut statement = Statement::new(vec![&tsquery, &as_of_param, &start_param, &window]);
        statement.and(query.run_id.as_ref(), |p| format!("d.run_id = {p}"));
        statement.and(query.workflow_id.as_ref(), |p| format!("d.run_id = {p}"));
        statement.and(query.thread_id.as_ref(), |p| format!("d.thread_id = {p}"));
        statement.and(query.task_id.as_ref(), |p| format!("d.task_id = {p}"));
        statement.and(query.agent.as_ref(), |p| format!("d.from_agent = {p}"));
        statement.and(query.since_ms.as_ref(), |p| format!("d.ts_ms >= {p}"));
        statement.and(query.until_ms.as_ref(), |p| format!("d.ts_ms < {p}"));
        let text = sql::window(&statement.conditions);
        let stmt = client.prepare_cached(&text).await.map_err(db)?;
        let rows = client.query(&stmt, &statement.params).await.map_err(db)?;
        let matches = rows
            .iter()
            .map(|row| Ok((seq_of(row, 0)?, f64::from(row.try_get::<_, f32>(1).map_err(db)?))))
            .collect::<Result<Vec<_>>>()?;
        let (seqs, next) = lists::rank_window(matches, start, within, query.page());
        let seqs: Vec<i64> = seqs.into_iter().map(int).collect();
        let stmt = client.prepare_cached(sql::HITS).await.map_err(db)?;
        let rows = client.query(&stmt, &[&tsquery, &seqs]).await.map_err(db)?;
        let mut items = rows
            .iter()
            .map(|row| {
                Ok(SearchHit {
                    seq: seq_of(row, 0)?,
                    id: column(row, 1)?,
                    kind: column(row, 2)?,
                    from: column(row, 3)?,
                    ts: column(row, 4)?,
                    run_id: column(row, 5)?,
                    thread_id: column(row, 6)?,
                    task_id: column(row, 7)?,
                    snippet: column(row, 8)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // In the ranked order (a match whose event retention removed meanwhile is left out).
        items.sort_by_key(|hit| seqs.iter().position(|s| *s == int(hit.seq)));
        let next = next.map(|after| Cursor { as_of, after }.encode());
        Ok(Page { items, next, as_of })
    }

    /// Empties the lists and the search index and derives them again from the whole log, in one
    /// transaction (readers wait for it rather than see them half made); how many events they cover.
    pub(crate) async fn rebuild(&self) -> Result<u64> {
        let _turn = self.shared.turn.lock().await;
        let mut client = pooled(&self.shared.pool).await?;
        let tx = client.build_transaction().isolation_level(IsolationLevel::ReadCommitted).start().await.map_err(db)?;
        begin_derivation(&tx, self.shared.lock_key).await?;
        tx.batch_execute(sql::EMPTY).await.map_err(db)?;
        let mut upto = 0;
        loop {
            let (reached, read) = derive(&tx).await?;
            upto = reached.max(upto);
            if read < CHUNK as usize {
                break;
            }
        }
        let count = tx.prepare_cached(sql::COUNT).await.map_err(db)?;
        let covered: i64 = column(&tx.query_one(&count, &[&int(upto)]).await.map_err(db)?, 0)?;
        tx.commit().await.map_err(db)?;
        if let Err(error) = analyze(&client).await {
            tracing::warn!(error = %error, "refreshing the lists' statistics after the rebuild failed");
        }
        tracing::info!(events = covered, upto, "rebuilt the lists and the search index");
        Ok(u64::try_from(covered).unwrap_or(0))
    }

    /// A page of `T`s by last activity, newest first, pinned to the first page's log position.
    async fn page<T: Listed>(&self, query: &Query) -> Result<Page<T>> {
        let (client, upto) = self.shared.catch_up().await?;
        let as_of = query.cursor.map_or(upto, |c| c.as_of);
        let before = query.cursor.map_or(as_of.saturating_add(1), |c| c.after);
        let page = query.page();
        let (as_of_param, before_param, take) = (int(as_of), int(before), int(page as u64 + 1));
        let mut statement = Statement::new(vec![&as_of_param, &before_param, &take]);
        T::filters(query, &mut statement);
        statement.and(query.since_ms.as_ref(), |p| format!("last_ms >= {p}"));
        statement.and(query.until_ms.as_ref(), |p| format!("last_ms < {p}"));
        let text = sql::page(T::TABLE, T::KEY, &statement.conditions);
        let stmt = client.prepare_cached(&text).await.map_err(db)?;
        let rows = client.query(&stmt, &statement.params).await.map_err(db)?;
        let (mut fresh, mut moved) = (Vec::new(), Vec::new());
        for row in &rows {
            let at = seq_of(row, 1)?;
            let body: &str = column(row, 2)?;
            let item = T::parse(body).map_err(|e| Error::Corrupt(format!("{} row: {e}", T::TABLE)))?;
            match column::<bool>(row, 0)? {
                true => moved.push((at, item)),
                false => fresh.push((at, item)),
            }
        }
        Ok(lists::merge_page(fresh, moved, as_of, before, page))
    }
}

impl Drop for Lists {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

impl Shared {
    /// Derives the events appended so far (at least every one committed before the call); a
    /// connection to read the lists on, and how far they reach. When they are behind, waits for its
    /// turn with no connection held, so the follower and reads never hold one each while waiting
    /// for the other; when they are not, takes no turn, so reads do not queue behind each other.
    async fn catch_up(&self) -> Result<(Client, u64)> {
        {
            let client = pooled(&self.pool).await?;
            let (upto, head) = lag(&client).await?;
            if upto >= head {
                return Ok((client, upto));
            }
        }
        let _turn = self.turn.lock().await;
        let mut client = pooled(&self.pool).await?;
        let (mut upto, head) = lag(&client).await?;
        while upto < head {
            let tx =
                client.build_transaction().isolation_level(IsolationLevel::ReadCommitted).start().await.map_err(db)?;
            begin_derivation(&tx, self.lock_key).await?;
            let (reached, read) = derive(&tx).await?;
            tx.commit().await.map_err(db)?;
            upto = reached;
            // A short chunk read every event committed when it began.
            if read < CHUNK as usize {
                break;
            }
        }
        Ok((client, upto))
    }
}

/// How far the lists reach, and the newest event's `seq`.
async fn lag(client: &Client) -> Result<(u64, u64)> {
    let stmt = client.prepare_cached(sql::LAG).await.map_err(db)?;
    let row = client.query_one(&stmt, &[]).await.map_err(db)?;
    Ok((seq_of(&row, 0)?, seq_of(&row, 1)?))
}

/// Events derived after which the follower refreshes the lists' statistics itself, rather than wait
/// for autovacuum: searches and pages planned on the statistics of a much smaller table (after a
/// bulk import, a rebuild, or a burst) chose plans ten times slower than the right ones.
const ANALYZE_EVERY: u64 = 100_000;

/// Refreshes the planner's statistics of the lists' tables.
async fn analyze(client: &Client) -> Result<()> {
    client.batch_execute(sql::ANALYZE).await.map_err(db)
}

/// The follower: derives new events as appends announce them (at most every [`PACE`]), or every
/// [`POLL`].
async fn follow(shared: Arc<Shared>) {
    // From 0: a store opened on a big log refreshes them once, in the background.
    let mut analyzed_at = 0;
    loop {
        let started = tokio::time::Instant::now();
        match shared.catch_up().await {
            Ok((client, upto)) => {
                if upto >= analyzed_at + ANALYZE_EVERY {
                    // Tried again after as many events more, whatever the outcome.
                    analyzed_at = upto;
                    if let Err(error) = analyze(&client).await {
                        tracing::warn!(error = %error, "refreshing the lists' statistics failed");
                    }
                }
                drop(client);
                tokio::select! {
                    () = shared.wake.notified() => {}
                    () = tokio::time::sleep(POLL) => {}
                }
                tokio::time::sleep_until(started + PACE).await;
            }
            Err(Error::Closed) => return,
            Err(error) => {
                tracing::warn!(error = %error, "deriving the lists from the log failed; trying again shortly");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Starts a derivation in `tx`: takes the lists' lock, and lets its commit return before it reaches
/// the disk. The lists are derived data, and `lists_upto` commits with them, so a crash can only
/// lose the last derivations whole (derived again at the next start), never half of one; while a
/// derivation's flush per append (the follower is woken by each) doubled the flushes the log's
/// writer competes with.
async fn begin_derivation(tx: &Transaction<'_>, lock_key: i32) -> Result<()> {
    let stmt = tx.prepare_cached(sql::LOCK).await.map_err(db)?;
    tx.execute(&stmt, &[&LISTS_LOCK_CLASS, &lock_key]).await.map_err(db)?;
    tx.batch_execute("SET LOCAL synchronous_commit = off").await.map_err(db)?;
    Ok(())
}

/// Derives the next chunk of events past `lists_upto` within `tx`, which holds the lists' lock:
/// how far the lists then reach, and how many events it read.
async fn derive(tx: &Transaction<'_>) -> Result<(u64, usize)> {
    let upto = tx.prepare_cached(sql::UPTO).await.map_err(db)?;
    let upto = seq_of(&tx.query_one(&upto, &[]).await.map_err(db)?, 0)?;
    let read = tx.prepare_cached(sql::EVENTS).await.map_err(db)?;
    let stored = tx.query(&read, &[&int(upto), &CHUNK]).await.map_err(db)?;
    let Some(last) = stored.last() else { return Ok((upto, 0)) };
    let last = seq_of(last, 0)?;
    let mut events: Vec<(u64, Message)> = Vec::with_capacity(stored.len());
    for row in &stored {
        let seq = seq_of(row, 0)?;
        match serde_json::from_str::<Message>(column(row, 1)?) {
            Ok(message) => events.push((seq, message)),
            // As the SQLite backend does: one unreadable event must not hold every list back.
            Err(error) => tracing::warn!(seq, error = %error, "an event the lists cannot read is left out of them"),
        }
    }
    let (runs, threads, tasks) = lists::touched(&events);
    let runs: Vec<RunSummary> = load(tx, &runs).await?;
    let tasks = lists::with_roots(tasks, &runs);
    let (threads, tasks) = tokio::try_join!(load(tx, &threads), load(tx, &tasks))?;
    let mut rows = Rows::new(runs, threads, tasks);
    for (seq, message) in &events {
        rows.apply(*seq, message);
    }
    write(tx, &rows, last).await?;
    Ok((last, stored.len()))
}

/// The stored rows of `T` with one of `keys`.
async fn load<T: Listed>(tx: &Transaction<'_>, keys: &[String]) -> Result<Vec<T>> {
    let stmt = tx
        .prepare_cached(&format!("SELECT body FROM {} WHERE {} = ANY($1::text[])", T::TABLE, T::KEY))
        .await
        .map_err(db)?;
    let rows = tx.query(&stmt, &[&keys]).await.map_err(db)?;
    rows.iter()
        .map(|row| T::parse(column(row, 0)?).map_err(|e| Error::Corrupt(format!("{} row: {e}", T::TABLE))))
        .collect()
}

/// Writes the rows a chunk changed, its search documents and how far it reached, each table with
/// one statement, all in one round trip.
async fn write(tx: &Transaction<'_>, rows: &Rows, last: u64) -> Result<()> {
    let (runs, threads, tasks) = rows.changed();
    tokio::try_join!(
        write_runs(tx, &runs),
        write_threads(tx, &threads),
        write_tasks(tx, &tasks),
        write_docs(tx, &rows.docs),
        async {
            let stmt = tx.prepare_cached(sql::SET_UPTO).await.map_err(db)?;
            tx.execute(&stmt, &[&int(last)]).await.map_err(db)
        },
    )?;
    Ok(())
}

async fn write_runs(tx: &Transaction<'_>, runs: &[&RunSummary]) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let id: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    let first: Vec<i64> = runs.iter().map(|r| int(r.first_seq)).collect();
    let last: Vec<i64> = runs.iter().map(|r| int(r.last_seq)).collect();
    let ms: Vec<i64> = runs.iter().map(|r| lists::ts_ms(&r.last_ts)).collect();
    let state: Vec<&str> = runs.iter().map(|r| r.state.as_str()).collect();
    let kind: Vec<&str> = runs.iter().map(|r| r.kind.as_str()).collect();
    let body = bodies(runs)?;
    let stmt = tx.prepare_cached(sql::UPSERT_RUNS).await.map_err(db)?;
    tx.execute(&stmt, &[&id, &first, &last, &ms, &state, &kind, &body]).await.map_err(db)?;
    Ok(())
}

async fn write_threads(tx: &Transaction<'_>, threads: &[&ThreadSummary]) -> Result<()> {
    if threads.is_empty() {
        return Ok(());
    }
    let id: Vec<&str> = threads.iter().map(|t| t.thread_id.as_str()).collect();
    let run: Vec<&str> = threads.iter().map(|t| t.run_id.as_str()).collect();
    let first: Vec<i64> = threads.iter().map(|t| int(t.first_seq)).collect();
    let last: Vec<i64> = threads.iter().map(|t| int(t.last_seq)).collect();
    let ms: Vec<i64> = threads.iter().map(|t| lists::ts_ms(&t.last_ts)).collect();
    let body = bodies(threads)?;
    let stmt = tx.prepare_cached(sql::UPSERT_THREADS).await.map_err(db)?;
    tx.execute(&stmt, &[&id, &run, &first, &last, &ms, &body]).await.map_err(db)?;
    Ok(())
}

async fn write_tasks(tx: &Transaction<'_>, tasks: &[&TaskListing]) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    let id: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
    let run: Vec<&str> = tasks.iter().map(|t| t.run_id.as_str()).collect();
    let thread: Vec<&str> = tasks.iter().map(|t| t.thread_id.as_str()).collect();
    let parent: Vec<Option<&str>> = tasks.iter().map(|t| t.parent_task_id.as_deref()).collect();
    let workflow: Vec<Option<&str>> = tasks.iter().map(|t| t.workflow_id.as_deref()).collect();
    let agent: Vec<Option<&str>> = tasks.iter().map(|t| t.agent.as_deref()).collect();
    let state: Vec<&str> = tasks.iter().map(|t| t.state.as_str()).collect();
    let first: Vec<i64> = tasks.iter().map(|t| int(t.first_seq)).collect();
    let last: Vec<i64> = tasks.iter().map(|t| int(t.last_seq)).collect();
    let ms: Vec<i64> = tasks.iter().map(|t| lists::ts_ms(&t.last_ts)).collect();
    let body = bodies(tasks)?;
    let stmt = tx.prepare_cached(sql::UPSERT_TASKS).await.map_err(db)?;
    let params: [&(dyn ToSql + Sync); 11] =
        [&id, &run, &thread, &parent, &workflow, &agent, &state, &first, &last, &ms, &body];
    tx.execute(&stmt, &params).await.map_err(db)?;
    Ok(())
}

async fn write_docs(tx: &Transaction<'_>, docs: &[lists::Doc]) -> Result<()> {
    if docs.is_empty() {
        return Ok(());
    }
    let seq: Vec<i64> = docs.iter().map(|d| int(d.seq)).collect();
    let run: Vec<&str> = docs.iter().map(|d| d.run_id.as_str()).collect();
    let thread: Vec<&str> = docs.iter().map(|d| d.thread_id.as_str()).collect();
    let task: Vec<&str> = docs.iter().map(|d| d.task_id.as_str()).collect();
    let from: Vec<&str> = docs.iter().map(|d| d.from.as_str()).collect();
    let ms: Vec<i64> = docs.iter().map(|d| d.ts_ms).collect();
    let body: Vec<&str> = docs.iter().map(|d| d.body.as_str()).collect();
    let stmt = tx.prepare_cached(sql::INSERT_DOCS).await.map_err(db)?;
    tx.execute(&stmt, &[&seq, &run, &thread, &task, &from, &ms, &body]).await.map_err(db)?;
    Ok(())
}

/// Rows as the `body` column keeps them.
fn bodies<T: Listed>(rows: &[&T]) -> Result<Vec<String>> {
    rows.iter().map(|row| row.to_json().map_err(|e| Error::Backend(format!("{} row: {e}", T::TABLE)))).collect()
}

/// A list's row type: where it is stored and which filters it takes.
trait Listed: Sized + Send + serde::Serialize + serde::de::DeserializeOwned {
    /// Its table.
    const TABLE: &'static str;
    /// Its key, a column of both its table and `events`, which places a row that moved.
    const KEY: &'static str;
    fn parse(body: &str) -> serde_json::Result<Self> {
        serde_json::from_str(body)
    }
    fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
    /// Adds the conditions of `query`'s filters this list takes, but for the times (every list's).
    fn filters<'a>(query: &'a Query, statement: &mut Statement<'a>);
}

impl Listed for RunSummary {
    const TABLE: &'static str = "runs";
    const KEY: &'static str = "run_id";

    fn filters<'a>(query: &'a Query, statement: &mut Statement<'a>) {
        statement.and(query.state.as_ref(), |p| format!("state = {p}"));
        statement.and(query.kind.as_ref(), |p| format!("kind = {p}"));
        statement.and(query.agent.as_ref(), |p| format!("agents ? {p}"));
    }
}

impl Listed for ThreadSummary {
    const TABLE: &'static str = "threads";
    const KEY: &'static str = "thread_id";

    fn filters<'a>(query: &'a Query, statement: &mut Statement<'a>) {
        statement.and(query.run_id.as_ref(), |p| format!("run_id = {p}"));
        statement.and(query.agent.as_ref(), |p| format!("participants ? {p}"));
    }
}

impl Listed for TaskListing {
    const TABLE: &'static str = "tasks";
    const KEY: &'static str = "task_id";

    fn filters<'a>(query: &'a Query, statement: &mut Statement<'a>) {
        statement.and(query.state.as_ref(), |p| format!("state = {p}"));
        statement.and(query.agent.as_ref(), |p| format!("agent = {p}"));
        statement.and(query.capability.as_ref(), |p| format!("requires ? {p}"));
        statement.and(query.run_id.as_ref(), |p| format!("run_id = {p}"));
        statement.and(query.workflow_id.as_ref(), |p| format!("workflow_id = {p}"));
        statement.and(query.parent_task_id.as_ref(), |p| format!("parent_id = {p}"));
        statement.and(query.thread_id.as_ref(), |p| format!("thread_id = {p}"));
    }
}

/// A statement's parameters and the conditions of its filters, built side by side so that each
/// `$n` names the value bound for it. Only the filters that are set appear, so each shape gets a
/// plan that can use its column's index; values are always bound, never spliced.
struct Statement<'a> {
    params: Vec<&'a (dyn ToSql + Sync)>,
    /// ` AND …` for each filter set.
    conditions: String,
}

impl<'a> Statement<'a> {
    fn new(params: Vec<&'a (dyn ToSql + Sync)>) -> Statement<'a> {
        Statement { params, conditions: String::new() }
    }

    /// Adds `condition($n)` with `value` bound to `$n`, when there is a value.
    fn and<T: ToSql + Sync>(&mut self, value: Option<&'a T>, condition: impl FnOnce(&str) -> String) {
        if let Some(value) = value {
            self.params.push(value);
            let placeholder = format!("${}", self.params.len());
            self.conditions.push_str(" AND ");
            self.conditions.push_str(&condition(&placeholder));
        }
    }
}

/// A `seq` or a count as PostgreSQL's `BIGINT`.
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

mod sql {
    pub(super) const LOCK: &str = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)";
    /// How far the lists reach, and the newest event's `seq`.
    pub(super) const LAG: &str = "SELECT (SELECT seq FROM lists_upto), coalesce((SELECT max(seq) FROM events), 0)";
    pub(super) const UPTO: &str = "SELECT seq FROM lists_upto";
    pub(super) const SET_UPTO: &str = "UPDATE lists_upto SET seq = $1";
    pub(super) const EVENTS: &str = "SELECT seq, body FROM events WHERE seq > $1 ORDER BY seq LIMIT $2";
    pub(super) const ANALYZE: &str = "ANALYZE runs, threads, tasks, search_docs";
    pub(super) const EMPTY: &str = "TRUNCATE runs, threads, tasks, search_docs; UPDATE lists_upto SET seq = 0";
    pub(super) const COUNT: &str = "SELECT count(*) FROM events WHERE seq <= $1";
    pub(super) const UPSERT_RUNS: &str = "INSERT INTO runs (run_id, first_seq, last_seq, last_ms, state, kind, body) \
        SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::text[], $6::text[], $7::text[]) \
        ON CONFLICT (run_id) DO UPDATE SET first_seq = excluded.first_seq, last_seq = excluded.last_seq, \
        last_ms = excluded.last_ms, state = excluded.state, kind = excluded.kind, body = excluded.body";
    pub(super) const UPSERT_THREADS: &str = "INSERT INTO threads (thread_id, run_id, first_seq, last_seq, last_ms, body) \
        SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::text[]) \
        ON CONFLICT (thread_id) DO UPDATE SET run_id = excluded.run_id, first_seq = excluded.first_seq, \
        last_seq = excluded.last_seq, last_ms = excluded.last_ms, body = excluded.body";
    pub(super) const UPSERT_TASKS: &str = "INSERT INTO tasks (task_id, run_id, thread_id, parent_id, workflow_id, \
        agent, state, first_seq, last_seq, last_ms, body) \
        SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], \
        $8::int8[], $9::int8[], $10::int8[], $11::text[]) \
        ON CONFLICT (task_id) DO UPDATE SET run_id = excluded.run_id, thread_id = excluded.thread_id, \
        parent_id = excluded.parent_id, workflow_id = excluded.workflow_id, agent = excluded.agent, \
        state = excluded.state, first_seq = excluded.first_seq, last_seq = excluded.last_seq, \
        last_ms = excluded.last_ms, body = excluded.body";
    pub(super) const INSERT_DOCS: &str = "INSERT INTO search_docs (seq, run_id, thread_id, task_id, from_agent, ts_ms, body) \
        SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::text[]) \
        ON CONFLICT (seq) DO NOTHING";

    /// A page of `table`: `$1` the listing's `as_of`, `$2` the cursor's `before`, `$3` a page and one.
    /// Each row comes with whether it moved since `as_of` and its key: its last `seq` (fresh), or
    /// its key's last event at or before `as_of` (moved). One statement, so both halves read one
    /// snapshot and a row moving meanwhile is in exactly one of them.
    pub(super) fn page(table: &str, key: &str, conditions: &str) -> String {
        format!(
            "SELECT false, last_seq, body FROM (SELECT last_seq, body FROM {table} \
             WHERE last_seq <= $1 AND last_seq < $2{conditions} ORDER BY last_seq DESC LIMIT $3) fresh \
             UNION ALL \
             SELECT true, placed, body FROM (SELECT placed, body FROM (SELECT \
             (SELECT max(e.seq) FROM events e WHERE e.{key} = l.{key} AND e.seq <= $1) AS placed, l.body \
             FROM {table} l WHERE l.last_seq > $1 AND l.first_seq <= $1{conditions}) m \
             WHERE placed < $2 ORDER BY placed DESC LIMIT $3) moved"
        )
    }

    /// The window of matches for the tsquery `$1` with `seq <= $2`, newest first, `$3` skipped, `$4`
    /// at most, each with its rank. `seq <= $2` holds for nearly every document, so it is a filter
    /// (`+ 0`), never an index condition: as one, the planner ANDed the word's bitmap with a bitmap of
    /// the whole table (110 ms of a 160 ms search for a rare word).
    pub(super) fn window(conditions: &str) -> String {
        format!(
            "SELECT d.seq, ts_rank(d.tsv, to_tsquery('simple', $1)) FROM search_docs d \
             WHERE d.tsv @@ to_tsquery('simple', $1) AND d.seq + 0 <= $2{conditions} \
             ORDER BY d.seq DESC OFFSET $3 LIMIT $4"
        )
    }

    /// The hits `$2` (seqs) of the tsquery `$1`, with the event's fields and the snippet.
    pub(super) const HITS: &str = "SELECT d.seq, e.id, e.\"type\", e.from_agent, coalesce(e.body::jsonb ->> 'ts', ''), \
        d.run_id, d.thread_id, d.task_id, \
        ts_headline('simple', d.body, to_tsquery('simple', $1), \
        'StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=2, FragmentDelimiter=\" … \"') \
        FROM search_docs d JOIN events e ON e.seq = d.seq WHERE d.seq = ANY($2)";
}
