//! Benchmarks of the core's hot paths: the event log (appends, replay), each beside an anchor: plain rusqlite doing
//! the same storage work on the same disk in the same run, so that the ratio between them means something;
//! and one routing decision among 1,000 agents.
//!
//! Run with `cargo bench -p clutch-core`; a name filter works as usual (`cargo bench -p clutch-core -- replay`).
//! Databases live under `CARGO_TARGET_TMPDIR` (inside `target/`), on the disk the daemon would use.

mod append;
mod compare;
mod replay;
mod route;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clutch_core::log::Options;
use clutch_core::{Handle, Service};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use criterion::{Criterion, criterion_group, criterion_main};
use rusqlite::{Connection, params};
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = append::one_writer, append::sixteen_writers, replay::replay, route::route
}
criterion_main!(benches);

/// A runtime shaped like the daemon's on this machine: a multi-threaded scheduler with two workers.
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

/// Where the benchmarks keep their databases: inside the target directory, on the same disk as a real
/// data directory would be (never a tmpfs).
fn bench_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).expect("create CARGO_TARGET_TMPDIR");
    dir
}

/// A fresh, empty directory under [`bench_dir`], removed when dropped.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("bench-").tempdir_in(bench_dir()).expect("scratch directory")
}

/// The log service running on a SQLite store, as the daemon wires it.
struct Daemon {
    handle: Handle,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Daemon {
    fn start(rt: &Runtime, data_dir: &Path) -> Daemon {
        let store = clutch_store_sqlite::Store::open(data_dir).expect("open the SQLite store");
        let (service, handle) = Service::new(Arc::new(store), Options::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = {
            let _entered = rt.enter();
            service.spawn(async move {
                let _ = stopped.await;
            })
        };
        Daemon { handle, stop, task }
    }

    fn shutdown(self, rt: &Runtime) {
        self.handle.close_streams();
        let _ = self.stop.send(());
        rt.block_on(self.task).expect("log service");
    }
}

/// Realistic traffic: progress reports of ~400 bytes of canonical JSON, spread over a few threads and
/// tasks, each message with a fresh id.
struct Traffic {
    template: Message,
    threads: Vec<String>,
    tasks: Vec<String>,
    sent: usize,
}

impl Traffic {
    fn new(run_id: &str) -> Traffic {
        let value = json!({
            "thread_id": id::generate(Kind::Thread),
            "run_id": run_id,
            "task_id": id::generate(Kind::Task),
            "from": {"agent_id": "agent:researcher", "role": "worker"},
            "to": [{"agent_id": "agent:planner"}],
            "type": MessageType::TaskProgress.as_str(),
            "domain": "research",
            "payload": {
                "status": "running",
                "progress": 0.42,
                "step": "reading sources",
                "note": "Compared the three candidate papers on group commit; the second reports 8-12x fewer fsyncs.",
                "tokens": {"input": 1834, "output": 412},
            },
        });
        let template = validate::message(&value, &Defaults { now: SystemTime::now() }).expect("a valid message");
        Traffic {
            template,
            threads: (0..4).map(|_| id::generate(Kind::Thread)).collect(),
            tasks: (0..64).map(|_| id::generate(Kind::Task)).collect(),
            sent: 0,
        }
    }

    /// The next message, in `run_id`.
    fn next_in(&mut self, run_id: &str) -> Message {
        let mut m = self.template.clone();
        m.id = id::generate(Kind::Message);
        m.run_id.clear();
        m.run_id.push_str(run_id);
        m.thread_id.clone_from(&self.threads[self.sent % self.threads.len()]);
        m.task_id.clone_from(&self.tasks[self.sent % self.tasks.len()]);
        self.sent += 1;
        m
    }

    fn next(&mut self) -> Message {
        let run_id = self.template.run_id.clone();
        self.next_in(&run_id)
    }

    fn take(&mut self, n: u64) -> Vec<Message> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// The anchor's writer: a plain rusqlite connection configured as the SQLite backend configures its own
/// (WAL, `synchronous=FULL`), on a table with the same columns and indexes.
struct Anchor {
    conn: Connection,
}

/// One row as the anchor inserts it: the columns Clutch stores, with the body already serialised.
struct Row {
    id: String,
    run_id: String,
    thread_id: String,
    task_id: String,
    from_agent: String,
    kind: &'static str,
    body: String,
}

impl Row {
    fn of(m: &Message) -> Row {
        Row {
            id: m.id.clone(),
            run_id: m.run_id.clone(),
            thread_id: m.thread_id.clone(),
            task_id: m.task_id.clone(),
            from_agent: m.from.agent_id.clone(),
            kind: m.kind.as_str(),
            body: m.to_canonical_json(),
        }
    }
}

impl Anchor {
    fn open(path: &Path) -> Anchor {
        let conn = Connection::open(path).expect("open the anchor database");
        conn.pragma_update(None, "journal_mode", "WAL").expect("WAL");
        conn.pragma_update(None, "synchronous", "FULL").expect("synchronous=FULL");
        conn.execute_batch(clutch_store_sqlite::EVENTS_SCHEMA).expect("anchor schema");
        Anchor { conn }
    }

    /// Inserts `rows` in one transaction and commits it (one WAL fsync).
    fn commit(&mut self, rows: &[Row]) {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).expect("begin");
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO events (id, run_id, thread_id, task_id, from_agent, type, idempotency_key, body) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7)",
                )
                .expect("prepare insert");
            for r in rows {
                insert
                    .execute(params![r.id, r.run_id, r.thread_id, r.task_id, r.from_agent, r.kind, r.body])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
}
