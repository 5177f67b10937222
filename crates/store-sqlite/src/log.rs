//! The event log's SQL: the batch append with its dedup rules, and the indexed reads.

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

/// Appends the rows in one `BEGIN IMMEDIATE` transaction, committed with a WAL fsync. Each row is
/// inserted optimistically; only when a uniqueness constraint (the id, or the run's idempotency key,
/// including rows inserted earlier in this batch) stops it is the original looked up.
pub(crate) fn append(conn: &mut Connection, rows: &[Row]) -> rusqlite::Result<Vec<Result<Outcome, Error>>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut next: u64 =
        tx.prepare_cached("SELECT coalesce(max(seq), 0) FROM events")?.query_row([], |r| r.get::<_, i64>(0))? as u64;
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
    Ok(out)
}

pub(crate) fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Event>> {
    c.prepare_cached("SELECT seq, body FROM events WHERE id = ?1")?.query_row([id], event).optional()
}

pub(crate) fn head(c: &Connection) -> rusqlite::Result<u64> {
    c.prepare_cached("SELECT coalesce(max(seq), 0) FROM events")?
        .query_row([], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
}

pub(crate) fn read(c: &Connection, f: &Filter, after: u64, limit: usize) -> rusqlite::Result<Vec<Event>> {
    let kind = f.kind.map(|k| k.as_str());
    let conditions: Vec<(&str, &str)> = [
        ("run_id", f.run_id.as_deref()),
        ("thread_id", f.thread_id.as_deref()),
        ("task_id", f.task_id.as_deref()),
        ("from_agent", f.agent_id.as_deref()),
        ("type", kind),
    ]
    .into_iter()
    .filter_map(|(column, value)| value.map(|v| (column, v)))
    .collect();
    // An inbox read walks the recipient index in seq order and joins the events.
    let mut sql = match f.to {
        Some(_) => String::from(
            "SELECT e.seq, e.body FROM recipients r JOIN events e ON e.seq = r.seq WHERE r.agent_id = ? AND r.seq > ?",
        ),
        None => String::from("SELECT seq, body FROM events e WHERE seq > ?"),
    };
    for (column, _) in &conditions {
        sql.push_str(" AND e.");
        sql.push_str(column);
        sql.push_str(" = ?");
    }
    sql.push_str(if f.to.is_some() { " ORDER BY r.seq LIMIT ?" } else { " ORDER BY seq LIMIT ?" });
    let after = after.min(i64::MAX as u64) as i64;
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
    if let Some(to) = &f.to {
        args.push(to);
    }
    args.push(&after);
    args.extend(conditions.iter().map(|(_, v)| v as &dyn rusqlite::ToSql));
    args.push(&limit);
    let mut stmt = c.prepare_cached(&sql)?;
    let rows = stmt.query_map(args.as_slice(), event)?;
    rows.collect()
}

fn event(r: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    let body = r
        .get_ref(1)?
        .as_str()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(Event { seq: r.get::<_, i64>(0)? as u64, json: Arc::from(body) })
}
