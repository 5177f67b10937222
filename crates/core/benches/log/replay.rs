//! Replay of one run out of a large log, as `GET /v1/runs/{id}/replay` does it (pages read through the
//! [`Handle`], each event formatted with [`Event::to_wire`](clutch_store::Event::to_wire) into an NDJSON
//! chunk), against a plain rusqlite `SELECT` loop over the same database file.

use std::fmt::Write;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clutch_core::Handle;
use clutch_proto::Message;
use clutch_proto::id::{self, Kind};
use clutch_store::{Backend, Filter};
use criterion::Criterion;
use rusqlite::{Connection, OpenFlags, params};
use tokio::runtime::Runtime;

use crate::compare::{Plan, compare};
use crate::{Daemon, Traffic, bench_dir, runtime};

/// Events in the log.
const EVENTS: usize = 1_000_000;
/// Of which this many, every tenth, belong to the replayed run.
const RUN_EVENTS: usize = 100_000;
/// Messages per transaction while filling.
const FILL_BATCH: usize = 5_000;
/// Events per page of a replay (the gateway's `REPLAY_PAGE`).
const PAGE: usize = 2_000;
/// Events in the first page of a replay (the gateway's `REPLAY_FIRST_PAGE`).
const FIRST_PAGE: usize = 64;

/// The query the SQLite backend builds for a `run_id` filter (for its plan only).
const CLUTCH_SQL: &str =
    "SELECT seq, body FROM events e WHERE seq > ? AND e.indexed AND e.run_id = ? ORDER BY seq LIMIT ?";

/// The anchor's query: the plainest form, the page size written into it. It states `indexed`, the
/// condition of the store's partial index by run, which SQLite uses only for queries that state it.
fn anchor_sql(limit: usize) -> String {
    format!("SELECT seq, body FROM events WHERE indexed AND run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT {limit}")
}

/// Reading a whole run of 100,000 events (elements/s), and the time to the first page of 64 events.
pub fn replay(c: &mut Criterion) {
    let rt = runtime();
    let fixture = Fixture::get(&rt);
    let daemon = Daemon::start(&rt, &fixture.dir);
    let anchor = Connection::open_with_flags(
        fixture.dir.join(clutch_store_sqlite::DB_FILE),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the replay database");
    for (name, sql) in [("clutch", CLUTCH_SQL.to_string()), ("anchor", anchor_sql(PAGE))] {
        eprintln!("replay: {name} query plan: {}", query_plan(&anchor, &sql));
    }
    let filter = Filter { run_id: Some(fixture.run_id.clone()), ..Filter::default() };
    let (handle, run_id) = (&daemon.handle, fixture.run_id.as_str());

    let mut clutch = |iters| {
        let (handle, filter) = (handle.clone(), filter.clone());
        rt.block_on(rt.spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                assert_eq!(replay_clutch(&handle, &filter).await, RUN_EVENTS);
            }
            started.elapsed()
        }))
        .expect("replay task")
    };
    let mut sqlite = |iters| {
        let started = Instant::now();
        for _ in 0..iters {
            assert_eq!(replay_sqlite(&anchor, run_id), RUN_EVENTS);
        }
        started.elapsed()
    };
    let plan = Plan { elements: RUN_EVENTS as u64, rounds: 8, iters: 1, slow: true };
    compare(c, "replay", &plan, &mut [("clutch", &mut clutch), ("sqlite_select_loop", &mut sqlite)]);

    let mut clutch = |iters| {
        let (handle, filter) = (handle.clone(), filter.clone());
        rt.block_on(rt.spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                black_box(first_page_clutch(&handle, &filter).await);
            }
            started.elapsed()
        }))
        .expect("first page task")
    };
    let mut sqlite = |iters| {
        let started = Instant::now();
        for _ in 0..iters {
            black_box(first_page_sqlite(&anchor, run_id));
        }
        started.elapsed()
    };
    let plan = Plan { elements: FIRST_PAGE as u64, rounds: 10, iters: 1000, slow: false };
    compare(c, "replay_first_page", &plan, &mut [("clutch", &mut clutch), ("sqlite_select", &mut sqlite)]);
    daemon.shutdown(&rt);
}

/// Reads the whole run page by page as the gateway's replay does; returns the number of events.
async fn replay_clutch(handle: &Handle, filter: &Filter) -> usize {
    let (mut after, mut total) = (0, 0);
    loop {
        let page = handle.read(filter, after, PAGE).await.expect("read a page");
        let mut chunk = String::with_capacity(page.iter().map(|e| e.json.len() + 16).sum());
        for e in &page {
            chunk.push_str(&e.to_wire());
            chunk.push('\n');
        }
        black_box(chunk);
        total += page.len();
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.seq,
            _ => return total,
        }
    }
}

async fn first_page_clutch(handle: &Handle, filter: &Filter) -> String {
    let page = handle.read(filter, 0, FIRST_PAGE).await.expect("read the first page");
    assert_eq!(page.len(), FIRST_PAGE);
    let mut chunk = String::with_capacity(page.iter().map(|e| e.json.len() + 16).sum());
    for e in &page {
        chunk.push_str(&e.to_wire());
        chunk.push('\n');
    }
    chunk
}

/// The anchor: the same pages straight from rusqlite, written into the same NDJSON chunks.
fn replay_sqlite(conn: &Connection, run_id: &str) -> usize {
    let (mut after, mut total) = (0, 0);
    loop {
        let mut chunk = String::new();
        let n = sqlite_page(conn, run_id, &mut after, PAGE, &mut chunk);
        black_box(chunk);
        total += n;
        if n < PAGE {
            return total;
        }
    }
}

fn first_page_sqlite(conn: &Connection, run_id: &str) -> String {
    let mut chunk = String::new();
    assert_eq!(sqlite_page(conn, run_id, &mut 0, FIRST_PAGE, &mut chunk), FIRST_PAGE);
    chunk
}

/// Appends up to `limit` events of `run_id` after `after` to `chunk` in wire form, one per line, and
/// moves `after` to the last one. Returns how many there were.
fn sqlite_page(conn: &Connection, run_id: &str, after: &mut i64, limit: usize, chunk: &mut String) -> usize {
    let mut stmt = conn.prepare_cached(&anchor_sql(limit)).expect("prepare");
    let mut rows = stmt.query(params![run_id, *after]).expect("query");
    let mut n = 0;
    while let Some(row) = rows.next().expect("row") {
        let seq: i64 = row.get(0).expect("seq");
        let body = row.get_ref(1).and_then(|v| Ok(v.as_str()?)).expect("body");
        let rest = body.strip_prefix('{').unwrap_or(body);
        write!(chunk, "{{\"seq\":{seq}").expect("write to a String");
        if rest != "}" {
            chunk.push(',');
        }
        chunk.push_str(rest);
        chunk.push('\n');
        *after = seq;
        n += 1;
    }
    n
}

fn query_plan(conn: &Connection, sql: &str) -> String {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("explain");
    let zeros = rusqlite::params_from_iter(std::iter::repeat_n(0, stmt.parameter_count()));
    let details = stmt.query_map(zeros, |r| r.get::<_, String>(3)).expect("explain");
    details.collect::<Result<Vec<_>, _>>().expect("explain").join("; ")
}

/// The replay database: filled once, then kept under the target directory for later runs.
struct Fixture {
    dir: PathBuf,
    run_id: String,
}

impl Fixture {
    fn get(rt: &Runtime) -> Fixture {
        let dir = bench_dir().join("bench-replay-1m");
        let marker = dir.join("filled");
        if let Some(run_id) = std::fs::read_to_string(&marker).ok().and_then(|text| parse_marker(&text)) {
            eprintln!("replay: reusing {} ({EVENTS} events, {RUN_EVENTS} in {run_id})", dir.display());
            return Fixture { dir, run_id };
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("remove an incomplete replay database");
        }
        let run_id = fill(rt, &dir);
        std::fs::write(&marker, format!("events={EVENTS}\nrun_events={RUN_EVENTS}\nrun_id={run_id}\n"))
            .expect("write the marker");
        Fixture { dir, run_id }
    }
}

/// The replayed run's id, if the marker describes the log these benchmarks expect.
fn parse_marker(text: &str) -> Option<String> {
    let mut fields = text.lines().filter_map(|l| l.split_once('='));
    let events = fields.next()?;
    let run_events = fields.next()?;
    let run_id = fields.next()?;
    let expected = (("events", EVENTS.to_string()), ("run_events", RUN_EVENTS.to_string()));
    let found = ((events.0, events.1.to_string()), (run_events.0, run_events.1.to_string()));
    (found == expected && run_id.0 == "run_id").then(|| run_id.1.to_string())
}

/// Fills a new store in `dir` through the backend's batch append: every tenth event in one run, the
/// others spread over 99 more. Returns the replayed run's id.
fn fill(rt: &Runtime, dir: &Path) -> String {
    eprintln!("replay: filling {} with {EVENTS} events (once; later runs reuse it)", dir.display());
    let started = Instant::now();
    let store = clutch_store_sqlite::Store::open(dir).expect("open the replay store");
    let run_id = id::generate(Kind::Run);
    let others: Vec<String> = (0..99).map(|_| id::generate(Kind::Run)).collect();
    let mut traffic = Traffic::new(&run_id);
    let store = Arc::new(store);
    rt.block_on(async {
        for start in (0..EVENTS).step_by(FILL_BATCH) {
            let batch: Vec<Message> = (start..start + FILL_BATCH)
                .map(|i| if i % 10 == 0 { traffic.next_in(&run_id) } else { traffic.next_in(&others[i % 99]) })
                .collect();
            for outcome in store.append_messages(&batch).await.expect("append a batch") {
                assert!(!outcome.expect("append").duplicate);
            }
            let done = start + FILL_BATCH;
            if done.is_multiple_of(100_000) {
                eprintln!("replay: {done} events after {:.1} s", started.elapsed().as_secs_f64());
            }
        }
        store.close().await;
    });
    run_id
}
