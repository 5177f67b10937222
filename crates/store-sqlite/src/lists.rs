//! Lists of runs, threads and tasks, and full-text search (FTS5), in the index file: the indexer
//! derives their rows with the shared fold ([`clutch_store::lists::Rows`]) from the indexed events,
//! a larger chunk at a time than the indexes (each derivation rewrites the rows its events touch),
//! or at once when a read waits for them; `lists_upto` says how far they reach. Reads see them
//! through the readers' `idx` attachment.
//!
//! The tables are `runs`, `threads` and `tasks` (a row per item: its JSON, and the columns the
//! filters and the order by last activity use) and `docs`, the FTS5 search index (rowid = `seq`).
//! A list or a search first waits, a short while at most (`LISTS_PATIENCE`, in the crate root), for
//! the indexer to cover what is durable, waking it, then reads as of `lists_upto`. A derivation reads
//! its events from the log in a statement of its own and lets the log go before it folds and writes
//! ([`events`]): a checkpoint that restarts the log's WAL waits for the log's readers, and holds the
//! log's writer back while it waits.

use clutch_proto::Message;
use clutch_store::lists::{
    self, Cursor, Page, Query, Rows, RunSummary, SearchHit, TaskListing, ThreadSummary, merge_page,
};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};
use serde::de::DeserializeOwned;

/// The lists' tables in the index file.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    last_ms INTEGER NOT NULL, state TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_last ON runs (last_seq);
CREATE INDEX IF NOT EXISTS runs_state ON runs (state, last_seq);
CREATE TABLE IF NOT EXISTS threads (thread_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL, last_ms INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS threads_last ON threads (last_seq);
CREATE INDEX IF NOT EXISTS threads_run ON threads (run_id, last_seq);
CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, thread_id TEXT NOT NULL,
    parent_id TEXT, workflow_id TEXT, agent TEXT, state TEXT NOT NULL, first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL, last_ms INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tasks_last ON tasks (last_seq);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state, last_seq);
CREATE INDEX IF NOT EXISTS tasks_agent ON tasks (agent, last_seq);
CREATE INDEX IF NOT EXISTS tasks_run ON tasks (run_id, last_seq);
CREATE INDEX IF NOT EXISTS tasks_thread ON tasks (thread_id, last_seq);
CREATE INDEX IF NOT EXISTS tasks_parent ON tasks (parent_id, last_seq) WHERE parent_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_workflow ON tasks (workflow_id, last_seq) WHERE workflow_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS lists_upto (one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL);
INSERT OR IGNORE INTO lists_upto (one, seq) VALUES (1, 0);
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body, run_id UNINDEXED, thread_id UNINDEXED,
    task_id UNINDEXED, from_agent UNINDEXED, ts_ms UNINDEXED);
";

/// The lists' tables, emptied by a rebuild.
pub(crate) const TABLES: [&str; 4] = ["runs", "threads", "tasks", "docs"];

fn corrupt(e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(e.to_string().into())
}

/// How far the lists at `conn`'s `main` reach.
pub(crate) fn upto(conn: &Connection) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT seq FROM main.lists_upto")?.query_row([], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

pub(crate) fn set_upto(conn: &Connection, seq: u64) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE main.lists_upto SET seq = ?1")?.execute([seq as i64]).map(|_| ())
}

/// The events in `(from, to]` of the attached log, parsed. Read in a statement of its own, outside
/// any transaction: the log's snapshot is held for this read only, never while the rows are folded
/// and written, because a checkpoint that restarts the log's WAL waits for every reader to leave it,
/// and holds the log's writer back while it waits.
pub(crate) fn events(conn: &Connection, from: u64, to: u64) -> rusqlite::Result<Vec<(u64, Message)>> {
    let mut events = Vec::new();
    let mut read = conn.prepare_cached("SELECT seq, body FROM log.events WHERE seq > ?1 AND seq <= ?2 ORDER BY seq")?;
    let mut rows = read.query(params![from as i64, to as i64])?;
    while let Some(row) = rows.next()? {
        let seq = row.get::<_, i64>(0)? as u64;
        match serde_json::from_str::<Message>(row.get_ref(1)?.as_str()?) {
            Ok(m) => events.push((seq, m)),
            Err(e) => tracing::warn!(seq, error = %e, "an event the lists cannot read is left out of them"),
        }
    }
    Ok(events)
}

/// Derives the rows of `events` (in `seq` order, past what the lists cover) into `main`'s lists.
pub(crate) fn derive(tx: &Connection, events: &[(u64, Message)]) -> rusqlite::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let (run_ids, thread_ids, task_ids) = lists::touched(events);
    let runs = load(tx, "SELECT body FROM main.runs WHERE run_id = ?1", &run_ids)?;
    let task_ids = lists::with_roots(task_ids, &runs);
    let mut rows = Rows::new(
        runs,
        load(tx, "SELECT body FROM main.threads WHERE thread_id = ?1", &thread_ids)?,
        load(tx, "SELECT body FROM main.tasks WHERE task_id = ?1", &task_ids)?,
    );
    for (seq, m) in events {
        rows.apply(*seq, m);
    }
    let (runs, threads, tasks) = rows.changed();
    let mut put = tx.prepare_cached(
        "INSERT OR REPLACE INTO main.runs (run_id, first_seq, last_seq, last_ms, state, kind, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for r in runs {
        put.execute(params![
            r.run_id,
            r.first_seq as i64,
            r.last_seq as i64,
            lists::ts_ms(&r.last_ts),
            r.state.as_str(),
            r.kind.as_str(),
            json(r)?
        ])?;
    }
    let mut put = tx.prepare_cached(
        "INSERT OR REPLACE INTO main.threads (thread_id, run_id, first_seq, last_seq, last_ms, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for t in threads {
        put.execute(params![
            t.thread_id,
            t.run_id,
            t.first_seq as i64,
            t.last_seq as i64,
            lists::ts_ms(&t.last_ts),
            json(t)?
        ])?;
    }
    let mut put = tx.prepare_cached(
        "INSERT OR REPLACE INTO main.tasks (task_id, run_id, thread_id, parent_id, workflow_id, agent, state, first_seq, last_seq, last_ms, body) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for t in tasks {
        put.execute(params![
            t.task_id,
            t.run_id,
            t.thread_id,
            t.parent_task_id,
            t.workflow_id,
            t.agent,
            t.state,
            t.first_seq as i64,
            t.last_seq as i64,
            lists::ts_ms(&t.last_ts),
            json(t)?
        ])?;
    }
    let mut put = tx.prepare_cached(
        "INSERT OR REPLACE INTO main.docs (rowid, body, run_id, thread_id, task_id, from_agent, ts_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for d in &rows.docs {
        put.execute(params![d.seq as i64, d.body, d.run_id, d.thread_id, d.task_id, d.from, d.ts_ms])?;
    }
    Ok(())
}

fn json(row: &impl serde::Serialize) -> rusqlite::Result<String> {
    serde_json::to_string(row).map_err(corrupt)
}

fn load<T: DeserializeOwned>(tx: &Connection, sql: &str, ids: &[String]) -> rusqlite::Result<Vec<T>> {
    let mut get = tx.prepare_cached(sql)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(body) = get.query_row([id], |r| r.get::<_, String>(0)).optional()? {
            out.push(serde_json::from_str(&body).map_err(corrupt)?);
        }
    }
    Ok(out)
}

/// Removes the lists' rows of `runs` that have no event left, and the search documents of `seqs`.
pub(crate) fn forget(tx: &Connection, runs: &[&str], seqs: &[u64]) -> rusqlite::Result<()> {
    let mut doc = tx.prepare_cached("DELETE FROM main.docs WHERE rowid = ?1")?;
    for seq in seqs {
        doc.execute([*seq as i64])?;
    }
    let mut left = tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM log.events WHERE run_id = ?1)")?;
    for run in runs {
        if !left.query_row([run], |r| r.get::<_, bool>(0))? {
            for table in ["runs", "threads", "tasks"] {
                tx.prepare_cached(&format!("DELETE FROM main.{table} WHERE run_id = ?1"))?.execute([run])?;
            }
        }
    }
    Ok(())
}

/// A list's table, its key column and the index that places a row at a past log position.
struct Table {
    name: &'static str,
    key: &'static str,
    by: &'static str,
}

const RUNS: Table = Table { name: "runs", key: "run_id", by: "by_run" };
const THREADS: Table = Table { name: "threads", key: "thread_id", by: "by_thread" };
const TASKS: Table = Table { name: "tasks", key: "task_id", by: "by_task" };

/// Conditions and their values.
#[derive(Default)]
struct Where {
    sql: String,
    values: Vec<Value>,
}

impl Where {
    fn and(&mut self, sql: &str, value: impl Into<Value>) {
        self.sql.push_str(" AND ");
        self.sql.push_str(sql);
        self.values.push(value.into());
    }

    fn eq(&mut self, column: &str, value: &Option<String>) {
        if let Some(v) = value {
            self.and(&format!("{column} = ?"), v.clone());
        }
    }

    fn contains(&mut self, array: &str, value: &Option<String>) {
        if let Some(v) = value {
            self.and(&format!("EXISTS (SELECT 1 FROM json_each(body, '$.{array}') WHERE value = ?)"), v.clone());
        }
    }

    fn time(&mut self, column: &str, q: &Query) {
        if let Some(ms) = q.since_ms {
            self.and(&format!("{column} >= ?"), ms);
        }
        if let Some(ms) = q.until_ms {
            self.and(&format!("{column} < ?"), ms);
        }
    }
}

pub(crate) fn runs(c: &Connection, q: &Query) -> rusqlite::Result<Page<RunSummary>> {
    let mut w = Where::default();
    w.eq("state", &q.state);
    w.eq("kind", &q.kind);
    w.contains("agents", &q.agent);
    w.time("last_ms", q);
    page(c, &RUNS, w, q)
}

pub(crate) fn threads(c: &Connection, q: &Query) -> rusqlite::Result<Page<ThreadSummary>> {
    let mut w = Where::default();
    w.contains("participants", &q.agent);
    w.eq("run_id", &q.run_id);
    w.time("last_ms", q);
    page(c, &THREADS, w, q)
}

pub(crate) fn tasks(c: &Connection, q: &Query) -> rusqlite::Result<Page<TaskListing>> {
    let mut w = Where::default();
    w.eq("state", &q.state);
    w.eq("agent", &q.agent);
    w.contains("requires", &q.capability);
    w.eq("run_id", &q.run_id);
    w.eq("workflow_id", &q.workflow_id);
    w.eq("parent_id", &q.parent_task_id);
    w.eq("thread_id", &q.thread_id);
    w.time("last_ms", q);
    page(c, &TASKS, w, q)
}

/// How far the lists reach, as a reader sees them.
fn reach(c: &Connection) -> rusqlite::Result<u64> {
    c.prepare_cached("SELECT seq FROM idx.lists_upto")?.query_row([], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

fn page<T: DeserializeOwned>(c: &Connection, table: &Table, w: Where, q: &Query) -> rusqlite::Result<Page<T>> {
    let tx = c.unchecked_transaction()?;
    let as_of = match q.cursor {
        Some(cursor) => cursor.as_of,
        None => reach(&tx)?,
    };
    let before = q.cursor.map_or(as_of.saturating_add(1), |c| c.after);
    let limit = q.page();
    let (name, key, by) = (table.name, table.key, table.by);
    let body = |r: &rusqlite::Row, i| serde_json::from_str::<T>(r.get_ref(i)?.as_str()?).map_err(corrupt);
    let mut values = vec![Value::Integer(as_of as i64), Value::Integer(before.min(i64::MAX as u64) as i64)];
    values.extend(w.values.iter().cloned());
    values.push(Value::Integer(limit as i64 + 1));
    let sql = format!(
        "SELECT last_seq, body FROM idx.{name} WHERE last_seq <= ? AND last_seq < ?{} ORDER BY last_seq DESC LIMIT ?",
        w.sql
    );
    let fresh = tx
        .prepare_cached(&sql)?
        .query_map(rusqlite::params_from_iter(values), |r| Ok((r.get::<_, i64>(0)? as u64, body(r, 1)?)))?
        .collect::<rusqlite::Result<Vec<(u64, T)>>>()?;
    // The rows that moved since `as_of`, each placed by its key's last event at or before it: only
    // the page's worth placed nearest below the cursor can be on the page, so only theirs are read.
    let mut values = vec![Value::Integer(as_of as i64), Value::Integer(as_of as i64), Value::Integer(as_of as i64)];
    values.extend(w.values);
    values.push(Value::Integer(before.min(i64::MAX as u64) as i64));
    values.push(Value::Integer(limit as i64 + 1));
    let sql = format!(
        "SELECT placed, body FROM (SELECT (SELECT max(b.seq) FROM idx.{by} b WHERE b.key = l.{key} AND b.seq <= ?) AS placed, \
         l.body FROM idx.{name} l WHERE l.last_seq > ? AND l.first_seq <= ?{}) WHERE placed < ? ORDER BY placed DESC LIMIT ?",
        w.sql
    );
    let moved = tx
        .prepare_cached(&sql)?
        .query_map(rusqlite::params_from_iter(values), |r| Ok((r.get::<_, i64>(0)? as u64, body(r, 1)?)))?
        .collect::<rusqlite::Result<Vec<(u64, T)>>>()?;
    Ok(merge_page(fresh, moved, as_of, before, limit))
}

pub(crate) fn search(c: &Connection, text: &str, q: &Query) -> rusqlite::Result<Page<SearchHit>> {
    let tx = c.unchecked_transaction()?;
    let as_of = match q.cursor {
        Some(cursor) => cursor.as_of,
        None => reach(&tx)?,
    };
    let words = lists::words(text);
    if words.is_empty() {
        return Ok(Page { items: Vec::new(), next: None, as_of });
    }
    let matching = words.iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(" ");
    let mut w = Where::default();
    w.eq("d.run_id", &q.run_id);
    w.eq("d.run_id", &q.workflow_id);
    w.eq("d.thread_id", &q.thread_id);
    w.eq("d.task_id", &q.task_id);
    w.eq("d.from_agent", &q.agent);
    w.time("d.ts_ms", q);
    let (start, within) = lists::search_window(q.cursor.map_or(0, |c| c.after));
    let mut values = vec![Value::Text(matching.clone()), Value::Integer(as_of as i64)];
    values.extend(w.values);
    values.push(Value::Integer(lists::SEARCH_WINDOW as i64));
    values.push(Value::Integer(start.min(i64::MAX as u64) as i64));
    // The window's matches in recency order (FTS5 walks its index by rowid), each with its BM25
    // score (lower is better, so negated).
    let sql = format!(
        "SELECT d.rowid, bm25(docs) FROM idx.docs d WHERE docs MATCH ? AND d.rowid <= ?{} \
         ORDER BY d.rowid DESC LIMIT ? OFFSET ?",
        w.sql
    );
    let matches = tx
        .prepare_cached(&sql)?
        .query_map(rusqlite::params_from_iter(values), |r| Ok((r.get::<_, i64>(0)? as u64, -r.get::<_, f64>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let (seqs, next) = lists::rank_window(matches, start, within, q.page());
    let mut hit = tx.prepare_cached(
        "SELECT e.id, e.type, e.from_agent, json_extract(e.body, '$.ts'), d.run_id, d.thread_id, d.task_id, \
                snippet(docs, 0, '[', ']', '…', 24) \
         FROM idx.docs d JOIN events e ON e.seq = d.rowid WHERE docs MATCH ?1 AND d.rowid = ?2",
    )?;
    let mut items = Vec::with_capacity(seqs.len());
    for seq in seqs {
        let found = hit
            .query_row(params![matching, seq as i64], |r| {
                Ok(SearchHit {
                    seq,
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    from: r.get(2)?,
                    ts: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                    run_id: r.get(4)?,
                    thread_id: r.get(5)?,
                    task_id: r.get(6)?,
                    snippet: r.get(7)?,
                })
            })
            .optional()?;
        // A match whose event retention removed meanwhile is left out.
        items.extend(found);
    }
    let next = next.map(|after| Cursor { as_of, after }.encode());
    Ok(Page { items, next, as_of })
}
