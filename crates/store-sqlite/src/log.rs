//! The event log's SQL: the batch append with its dedup rules, and the indexed reads.
//!
//! A batch is one `BEGIN IMMEDIATE` transaction: the next `seq` is the head plus one under the write
//! lock (the head counts the highest `seq` retention ever removed, `log_floor`, so `seq` never goes
//! back), and each row is inserted optimistically (`ON CONFLICT DO NOTHING`), the original looked up
//! only when a uniqueness constraint refuses it. A read goes through the index file up to its
//! `indexed_upto` and scans the log's rows after it, in one read transaction.

use std::sync::Arc;

use clutch_proto::Message;
use clutch_store::{Entry, Error, Event, Filter, Outcome};
use rusqlite::{Connection, OptionalExtension, params};

/// A message with the columns it is indexed by, prepared outside the writer's critical section.
pub(crate) struct Row {
    id: String,
    run_id: String,
    thread_id: String,
    task_id: String,
    from_agent: String,
    kind: &'static str,
    idempotency_key: Option<String>,
    body: Arc<str>,
    to: Vec<String>,
}

impl Row {
    pub(crate) fn all(batch: &[Entry]) -> Vec<Row> {
        batch
            .iter()
            .map(|Entry { message: m, json }| Row {
                id: m.id.clone(),
                run_id: m.run_id.clone(),
                thread_id: m.thread_id.clone(),
                task_id: m.task_id.clone(),
                from_agent: m.from.agent_id.clone(),
                kind: m.kind.as_str(),
                idempotency_key: m.idempotency_key.clone(),
                body: json.clone(),
                to: m.to.iter().map(|r| r.agent_id.clone()).collect(),
            })
            .collect()
    }
}

/// Whether two stored bodies are the same message but for `ts` (a retry, not a conflict). Only
/// computed when an id repeats, so appends of new ids never pay for it.
fn same_message(a: &str, b: &str) -> bool {
    let dedup = |s: &str| serde_json::from_str::<Message>(s).map(|m| m.dedup_body()).ok();
    a == b || matches!((dedup(a), dedup(b)), (Some(x), Some(y)) if x == y)
}

/// Appends the rows in one `BEGIN IMMEDIATE` transaction. Each row is inserted optimistically; only
/// when a uniqueness constraint (the id, or the run's idempotency key, including rows inserted earlier
/// in this batch) stops it is the original looked up. The secondary indexes are not the writer's
/// business (see [`crate::index`]); `progress` learns the new head.
pub(crate) fn append(
    conn: &mut Connection,
    rows: &[Row],
    progress: &crate::index::Progress,
) -> rusqlite::Result<Vec<Result<Outcome, Error>>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut next: u64 = tx.prepare_cached(HEAD)?.query_row([], |r| r.get::<_, i64>(0))? as u64;
    let mut out = Vec::with_capacity(rows.len());
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO events (seq, id, run_id, thread_id, task_id, from_agent, type, idempotency_key, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
        )?;
        let mut recipient =
            tx.prepare_cached("INSERT INTO recipients (agent_id, seq) VALUES (?1, ?2) ON CONFLICT DO NOTHING")?;
        let mut find_id = tx.prepare_cached("SELECT seq, run_id, body FROM events WHERE id = ?1")?;
        let mut find_key =
            tx.prepare_cached("SELECT seq, id FROM events WHERE run_id = ?1 AND idempotency_key = ?2")?;
        for row in rows {
            let inserted = insert.execute(params![
                (next + 1) as i64,
                row.id,
                row.run_id,
                row.thread_id,
                row.task_id,
                row.from_agent,
                row.kind,
                row.idempotency_key,
                &*row.body,
            ])?;
            if inserted == 1 {
                next += 1;
                for agent in &row.to {
                    recipient.execute(params![agent, next as i64])?;
                }
                out.push(Ok(Outcome { id: row.id.clone(), seq: next, duplicate: false }));
                continue;
            }
            let by_id = find_id
                .query_row([&row.id], |r| {
                    Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
                })
                .optional()?;
            if let Some((seq, run_id, body)) = by_id {
                out.push(if run_id == row.run_id && same_message(&body, &row.body) {
                    Ok(Outcome { id: row.id.clone(), seq, duplicate: true })
                } else {
                    Err(Error::IdConflict { id: row.id.clone(), seq })
                });
                continue;
            }
            let by_key = find_key
                .query_row(params![row.run_id, row.idempotency_key], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
                .optional()?;
            match by_key {
                Some((seq, id)) => out.push(Ok(Outcome { id, seq, duplicate: true })),
                // Only the two constraints above can refuse a row; anything else is a fault.
                None => return Err(rusqlite::Error::StatementChangedRows(0)),
            }
        }
    }
    tx.commit()?;
    progress.committed(next);
    Ok(out)
}

pub(crate) fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Event>> {
    c.prepare_cached("SELECT seq, body FROM events WHERE id = ?1")?.query_row([id], event).optional()
}

/// The highest `seq` assigned: the newest event's, or, when retention removed the newest events, the
/// highest it removed (`log_floor`), so that `seq` never goes back.
const HEAD: &str = "SELECT max(coalesce((SELECT max(seq) FROM events), 0), (SELECT seq FROM log_floor))";

pub(crate) fn head(c: &Connection) -> rusqlite::Result<u64> {
    c.prepare_cached(HEAD)?.query_row([], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

/// The oldest `limit` events of `run_id` up to `upto` (see `Backend::remove_run`), read through the
/// indexes; a body that does not parse still goes, with the keys its row has.
pub(crate) fn oldest_of_run(
    c: &Connection,
    run_id: &str,
    upto: u64,
    limit: usize,
) -> rusqlite::Result<Vec<crate::index::Removed>> {
    #[derive(serde::Deserialize)]
    struct To {
        #[serde(default)]
        to: Vec<Recipient>,
    }
    #[derive(serde::Deserialize)]
    struct Recipient {
        agent_id: String,
    }
    let filter = Filter { run_id: Some(run_id.to_string()), ..Filter::default() };
    let mut events = read(c, &filter, 0, limit)?;
    events.retain(|e| e.seq <= upto);
    let mut keys =
        c.prepare_cached("SELECT task_id, thread_id, run_id, from_agent, type FROM events WHERE seq = ?1")?;
    events
        .iter()
        .map(|e| {
            let keys =
                keys.query_row([e.seq as i64], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]))?;
            // A body that does not parse has no recipients this could name; its rows, if any, are
            // unreachable once the event is gone (an inbox read joins the events).
            let to = serde_json::from_str::<To>(&e.json).map(|t| t.to).unwrap_or_default();
            Ok(crate::index::Removed { seq: e.seq, keys, to: to.into_iter().map(|r| r.agent_id).collect() })
        })
        .collect()
}

/// Removes `events` and their recipients' rows in one transaction, first raising `log_floor` to the
/// head so that `seq` never goes back.
pub(crate) fn remove(conn: &mut Connection, events: &[crate::index::Removed]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.prepare_cached(&format!("UPDATE log_floor SET seq = ({HEAD})"))?.execute([])?;
    {
        let mut event = tx.prepare_cached("DELETE FROM events WHERE seq = ?1")?;
        let mut recipient = tx.prepare_cached("DELETE FROM recipients WHERE agent_id = ?1 AND seq = ?2")?;
        for e in events {
            let seq = e.seq as i64;
            event.execute([seq])?;
            for agent in &e.to {
                recipient.execute(params![agent, seq])?;
            }
        }
    }
    tx.commit()
}

pub(crate) fn read(c: &Connection, f: &Filter, after: u64, limit: usize) -> rusqlite::Result<Vec<Event>> {
    let kind = f.kind.map(|k| k.as_str());
    // In the indexes' order of preference: an indexed read goes through the first one's index.
    let conditions: Vec<(&str, &str)> = [
        ("task_id", f.task_id.as_deref()),
        ("thread_id", f.thread_id.as_deref()),
        ("run_id", f.run_id.as_deref()),
        ("from_agent", f.agent_id.as_deref()),
        ("type", kind),
    ]
    .into_iter()
    .filter_map(|(column, value)| value.map(|v| (column, v)))
    .collect();
    let to = f.to.as_deref();
    // An inbox read walks the recipient index; a read without conditions walks the table. Neither
    // depends on the secondary indexes, so one query answers it.
    if to.is_some() || conditions.is_empty() {
        return query(c, Part::Scan, to, &conditions, after, limit);
    }
    // Otherwise: the indexed rows through an index, then the unindexed tail by scanning it, both in
    // one read transaction. Each file's snapshot holds a prefix of the log (the index never reaches
    // past the durable log), so together they hold every matching row up to the older snapshot's end.
    let tx = c.unchecked_transaction()?;
    let upto = tx.prepare_cached("SELECT seq FROM idx.indexed_upto")?.query_row([], |r| r.get::<_, i64>(0))? as u64;
    let mut events =
        if after < upto { query(&tx, Part::Indexed, None, &conditions, after, limit)? } else { Vec::new() };
    if events.len() < limit {
        events.extend(query(&tx, Part::Scan, None, &conditions, after.max(upto), limit - events.len())?);
    }
    tx.commit()?;
    Ok(events)
}

/// Which rows a read's query covers.
#[derive(Clone, Copy)]
enum Part {
    /// Rows the secondary indexes cover (in the read's transaction, those up to `indexed_upto`): read
    /// through the index of the first condition.
    Indexed,
    /// Rows found without the secondary indexes: all of them, or the unindexed tail when `after` is
    /// past the indexed rows.
    Scan,
}

/// One query of a read: the events of `part` after `after` meeting `conditions` (and addressed to
/// `to`), in `seq` order, at most `limit`.
fn query(
    c: &Connection,
    part: Part,
    to: Option<&str>,
    conditions: &[(&str, &str)],
    after: u64,
    limit: usize,
) -> rusqlite::Result<Vec<Event>> {
    let after = after.min(i64::MAX as u64) as i64;
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
    let mut rest = conditions;
    if let (Part::Indexed, Some(((_, lead), others))) = (part, conditions.split_first()) {
        args.push(lead);
        rest = others;
    }
    if let Some(to) = &to {
        args.push(to);
    }
    args.push(&after);
    args.extend(rest.iter().map(|(_, v)| v as &dyn rusqlite::ToSql));
    args.push(&limit);
    let mut stmt = c.prepare_cached(&sql(part, to.is_some(), conditions))?;
    let rows = stmt.query_map(args.as_slice(), event)?;
    rows.collect()
}

/// The SQL of [`query`]; its parameters, in order: the indexed condition's value (an indexed part),
/// the recipient (`to`), `after`, each other condition's value, the limit.
fn sql(part: Part, to: bool, conditions: &[(&str, &str)]) -> String {
    let lead = match part {
        Part::Indexed => conditions
            .first()
            .and_then(|(column, _)| crate::index::INDEXES.iter().find(|(_, c)| c == column).map(|(table, _)| *table)),
        Part::Scan => None,
    };
    let (mut sql, rest, order) = match (lead, to) {
        (Some(table), _) => (
            format!(
                "SELECT e.seq, e.body FROM idx.{table} i JOIN events e ON e.seq = i.seq WHERE i.key = ? AND i.seq > ?"
            ),
            &conditions[1..],
            " ORDER BY i.seq LIMIT ?",
        ),
        (None, true) => (
            "SELECT e.seq, e.body FROM recipients r JOIN events e ON e.seq = r.seq WHERE r.agent_id = ? AND r.seq > ?"
                .to_string(),
            conditions,
            " ORDER BY r.seq LIMIT ?",
        ),
        (None, false) => {
            ("SELECT seq, body FROM events e WHERE seq > ?".to_string(), conditions, " ORDER BY seq LIMIT ?")
        }
    };
    for (column, _) in rest {
        sql.push_str(" AND e.");
        sql.push_str(column);
        sql.push_str(" = ?");
    }
    sql.push_str(order);
    sql
}

fn event(r: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    let body = r
        .get_ref(1)?
        .as_str()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(Event { seq: r.get::<_, i64>(0)? as u64, json: Arc::from(body) })
}

#[cfg(test)]
mod tests {
    use super::{Part, sql};

    /// The plan SQLite picks for a read's query on a fresh store.
    fn plan(part: Part, to: bool, conditions: &[(&str, &str)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let c = crate::reader(store.path(), &dir.path().join(crate::INDEX_FILE)).unwrap();
        let explain = format!("EXPLAIN QUERY PLAN {}", sql(part, to, conditions));
        let mut stmt = c.prepare(&explain).unwrap();
        let details = stmt
            .query_map(rusqlite::params_from_iter(std::iter::repeat_n("1", stmt.parameter_count())), |r| {
                r.get::<_, String>(3)
            });
        details.unwrap().map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }

    #[test]
    fn each_indexed_read_uses_its_index_and_each_scan_the_seq_range() {
        for (table, column) in crate::index::INDEXES {
            let indexed = plan(Part::Indexed, false, &[(column, "x"), ("type", "y")]);
            assert!(indexed.contains("SEARCH i USING PRIMARY KEY (key=? AND seq>?)"), "{column}: {indexed}");
            assert!(indexed.contains("SEARCH e USING INTEGER PRIMARY KEY (rowid=?)"), "{column}: {indexed}");
            assert!(!indexed.contains("TEMP B-TREE"), "{table}: an indexed read must not sort: {indexed}");
            let scan = plan(Part::Scan, false, &[(column, "x")]);
            assert!(scan.contains("USING INTEGER PRIMARY KEY (rowid>?)"), "{column}: {scan}");
            assert!(!scan.contains("TEMP B-TREE"), "{column}: a scan must not sort: {scan}");
        }
        let inbox = plan(Part::Scan, true, &[]);
        assert!(inbox.contains("USING PRIMARY KEY (agent_id=? AND seq>?)"), "{inbox}");
    }
}
