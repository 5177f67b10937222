//! The storage contract: the append-only event log and the content-addressed artifact store, as one
//! [`Backend`] trait that `store-sqlite` and `store-postgres` implement and one conformance suite
//! (feature `conformance`) that both run.
//!
//! A [`Backend`] appends batches of [`Entry`]s (a message and its canonical JSON, made once on the
//! caller's task, off the writer's serial path) in one durable transaction each, deciding dedup
//! inside that transaction; a backend that can commit without flushing also offers
//! [`Backend::write_batch`] and [`Backend::sync`], and one whose writes occupy a thread anyway offers
//! them as blocking calls ([`BlockingWrites`]). Beside the log it keeps indexed reads ([`Filter`]),
//! artifacts, named cursors (a consumer's position), named snapshots (opaque bytes saved with the
//! `seq` they cover) and records: durable state by space and key, kept beside the log and never in it,
//! for what a face must keep but must not replay or show (a webhook's credentials). Retention removes
//! a run's oldest events a chunk per durable transaction ([`Backend::remove_run`]); the head counts
//! the highest `seq` ever removed (`log_floor`), so `seq` never goes back. And the lists ([`lists`]):
//! pages of runs, threads and tasks by last activity, and full-text search.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use clutch_proto::{ErrorCode, Message, MessageType};

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod lists;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A stored message: its place in the log and its canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Global, strictly increasing position in the log, from 1; gap-free as appended (gaps appear
    /// only where retention removed a run's events, [`Backend::remove_run`]).
    pub seq: u64,
    /// The message's canonical JSON ([`Message::to_canonical_json`]).
    pub json: Arc<str>,
}

impl Event {
    /// The event as clients receive it: the message's JSON object with `seq` as its first field.
    pub fn to_wire(&self) -> String {
        let body = self.json.strip_prefix('{').unwrap_or(&self.json);
        let mut out = String::with_capacity(self.json.len() + 24);
        out.push_str("{\"seq\":");
        out.push_str(&self.seq.to_string());
        if body != "}" {
            out.push(',');
        }
        out.push_str(body);
        out
    }

    /// Parses the stored message.
    pub fn message(&self) -> Result<Message> {
        serde_json::from_str(&self.json).map_err(|e| Error::Corrupt(format!("event {}: {e}", self.seq)))
    }
}

/// A message ready to append, with its canonical JSON made once, off the writer's serial path.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub message: Message,
    /// [`Message::to_canonical_json`], the body that is stored and published.
    pub json: Arc<str>,
}

impl Entry {
    pub fn new(message: Message) -> Entry {
        let json = Arc::from(message.to_canonical_json());
        Entry { message, json }
    }
}

/// The answer to one appended message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The stored message's id: the appended one's, or for a repeated `idempotency_key`, the original's.
    pub id: String,
    pub seq: u64,
    /// True when nothing was stored because the message repeats one already in the log.
    pub duplicate: bool,
}

/// Which events a read selects; every field set must match (AND).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub run_id: Option<String>,
    pub thread_id: Option<String>,
    pub task_id: Option<String>,
    /// The sender, `from.agent_id`.
    pub agent_id: Option<String>,
    pub kind: Option<MessageType>,
    /// A recipient, `to[].agent_id`: an agent's inbox.
    pub to: Option<String>,
}

impl Filter {
    /// Whether `message` is selected by this filter (for live events, which do not come from a query).
    pub fn matches(&self, message: &Message) -> bool {
        self.run_id.as_ref().is_none_or(|v| *v == message.run_id)
            && self.thread_id.as_ref().is_none_or(|v| *v == message.thread_id)
            && self.task_id.as_ref().is_none_or(|v| *v == message.task_id)
            && self.agent_id.as_ref().is_none_or(|v| *v == message.from.agent_id)
            && self.kind.is_none_or(|k| k == message.kind)
            && self.to.as_ref().is_none_or(|v| message.to.iter().any(|r| r.agent_id == *v))
    }
}

/// A stored artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// `artifact:sha256:<hex>`.
    pub reference: String,
    pub size: u64,
    /// True when the same content was already stored.
    pub existed: bool,
}

/// The SHA-256 of `bytes` as 64 lower-case hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The id is stored already with another body (or in another run).
    #[error("message {id} is already stored (seq {seq}) with a different body")]
    IdConflict { id: String, seq: u64 },
    /// The backend failed; nothing in the failed call was stored.
    #[error("storage backend failed: {0}")]
    Backend(String),
    /// Stored data could not be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// The batch was committed but could not be made durable: whether it survives a crash is unknown,
    /// so nothing written since the last successful sync may be acknowledged.
    #[error("the batch was committed but not made durable: {0}")]
    NotDurable(String),
}

impl Error {
    pub fn kind(&self) -> ErrorCode {
        match self {
            Error::IdConflict { .. } => ErrorCode::IdConflict,
            Error::Backend(_) | Error::Closed | Error::NotDurable(_) => ErrorCode::Unavailable,
            Error::Corrupt(_) => ErrorCode::Internal,
        }
    }
}

/// State derived from the log up to `seq`, saved so that a restart replays only what came after.
/// The bytes are the saver's own format; the store only keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub seq: u64,
    pub body: Bytes,
}

/// An event log and artifact store. Implementations are internally synchronised; the daemon calls
/// `append_batch` from one writer only, but reads come from anywhere at any time.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Appends `batch` in one transaction and returns only once it is durable ([`Error::NotDurable`]
    /// when it was committed but the flush failed). Answers per message in order: a new `seq`; or, for a message whose `id` (with the same run and body) or whose
    /// `(run_id, idempotency_key)` is already stored, including earlier in the same batch, the
    /// original's `seq` with `duplicate: true`; or [`Error::IdConflict`]. An `Err` for the whole call
    /// means the batch was not acknowledged: with a networked database a commit cut off in flight may
    /// still have landed, which is why retrying the same messages is always safe (they deduplicate).
    async fn append_batch(&self, batch: &[Entry]) -> Result<Vec<Result<Outcome>>>;

    /// [`Backend::append_batch`] without waiting for durability: the batch is committed (readers see
    /// it, later batches build on it) and becomes durable, together with every batch written before
    /// it, when a later [`Backend::sync`] returns. A backend whose commits are durable already (the
    /// default) answers both the same way. The writer uses this pair to commit the next batch while
    /// the disk flushes the last ones, and acknowledges nothing before the flush.
    async fn write_batch(&self, batch: &[Entry]) -> Result<Vec<Result<Outcome>>> {
        self.append_batch(batch).await
    }

    /// Makes every batch written so far durable. An error means durability is unknown: the caller
    /// must acknowledge nothing written since the last successful sync, and write nothing more.
    async fn sync(&self) -> Result<()> {
        Ok(())
    }

    /// Durable events not yet in the secondary indexes (by run, thread, task, sender, type), for a
    /// backend that indexes behind the log (SQLite); `None` for one that indexes as it appends.
    /// Reads are exact at any lag; a growing one means the indexer does not keep up.
    fn index_lag(&self) -> Option<u64> {
        None
    }

    /// The write path as blocking calls, for a backend whose writes occupy a thread anyway (SQLite).
    /// The log's writer then runs on a thread of its own and makes them there, instead of handing each
    /// batch to another thread and waiting to be woken when it is done; and a caller that finds the
    /// writer idle makes them on its own thread.
    fn blocking_writes(&self) -> Option<Arc<dyn BlockingWrites>> {
        None
    }

    /// [`Backend::append_batch`] for messages not yet serialized.
    async fn append_messages(&self, batch: &[Message]) -> Result<Vec<Result<Outcome>>> {
        let entries: Vec<Entry> = batch.iter().cloned().map(Entry::new).collect();
        self.append_batch(&entries).await
    }

    /// The message stored under `id`.
    async fn get(&self, id: &str) -> Result<Option<Event>>;

    /// Up to `limit` events matching `filter` with `seq > after`, in `seq` order.
    async fn read(&self, filter: &Filter, after: u64, limit: usize) -> Result<Vec<Event>>;

    /// The highest `seq` stored, 0 for an empty log.
    async fn head(&self) -> Result<u64>;

    /// Stores `bytes` under their SHA-256, durably, unless already there.
    async fn put_artifact(&self, bytes: Bytes) -> Result<Artifact>;

    /// The artifact with this SHA-256 (64 lower-case hex digits).
    async fn get_artifact(&self, sha256: &str) -> Result<Option<Bytes>>;

    /// A consumer's saved position in the log (push delivery), or `None` if it never saved one.
    async fn cursor(&self, name: &str) -> Result<Option<u64>>;

    /// Saves a consumer's position durably; a later save replaces it.
    async fn set_cursor(&self, name: &str, seq: u64) -> Result<()>;

    /// The snapshot saved under `name` (state derived from the log up to and including `seq`), or `None`.
    async fn snapshot(&self, name: &str) -> Result<Option<Snapshot>>;

    /// Saves a snapshot durably, replacing the one saved under the same name.
    async fn set_snapshot(&self, name: &str, snapshot: &Snapshot) -> Result<()>;

    /// The record kept under `key` in `space`, if any. Records are durable state kept beside the log,
    /// never in it: what a face must keep but must not replay or show (a webhook's credentials).
    async fn record(&self, space: &str, key: &str) -> Result<Option<Bytes>>;

    /// Every record of `space`, by key.
    async fn records(&self, space: &str) -> Result<Vec<(String, Bytes)>>;

    /// Saves a record durably, replacing the one under the same key.
    async fn put_record(&self, space: &str, key: &str, body: Bytes) -> Result<()>;

    /// Removes a record durably; whether there was one.
    async fn delete_record(&self, space: &str, key: &str) -> Result<bool>;

    /// Flushes and releases resources; later calls answer [`Error::Closed`].
    /// Removes the oldest `limit` events of `run_id` up to `upto` (`seq <= upto`; later ones stay),
    /// with their recipients' rows, in one durable transaction, for retention; answers how many went
    /// (0: none is left). The head never moves
    /// back: the highest `seq` ever assigned is kept, so the next append continues after it and
    /// cursors past removed events stay valid. Other runs' events, and the dedup of every event
    /// that remains, are untouched.
    async fn remove_run(&self, run_id: &str, upto: u64, limit: usize) -> Result<usize>;

    /// A page of runs by last activity, newest first ([`lists`]): the filters
    /// `Query::unsupported(List::Runs)` lets through, pinned to the first page's log position.
    async fn list_runs(&self, query: &lists::Query) -> Result<lists::Page<lists::RunSummary>>;

    /// A page of threads, as [`Backend::list_runs`].
    async fn list_threads(&self, query: &lists::Query) -> Result<lists::Page<lists::ThreadSummary>>;

    /// A page of tasks, as [`Backend::list_runs`].
    async fn list_tasks(&self, query: &lists::Query) -> Result<lists::Page<lists::TaskListing>>;

    /// Events whose text holds every word of `text` (at least one): the newest
    /// [`lists::SEARCH_WINDOW`] matches by relevance, then the next ones.
    async fn search(&self, text: &str, query: &lists::Query) -> Result<lists::Page<lists::SearchHit>>;

    /// Drops the lists and the search index and derives them again from the whole log, before it
    /// returns (`clutch reindex`); how many events they cover.
    async fn rebuild_lists(&self) -> Result<u64>;

    async fn close(&self);
}

/// [`Backend::write_batch`] and [`Backend::sync`] as blocking calls (see [`Backend::blocking_writes`]):
/// the same answers, on the caller's thread, which they block. An append is the one then the other.
pub trait BlockingWrites: Send + Sync {
    fn write_batch(&self, batch: &[Entry]) -> Result<Vec<Result<Outcome>>>;
    fn sync(&self) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_puts_seq_first() {
        let e = Event { seq: 42, json: Arc::from(r#"{"v":"clutch/0.1","id":"x"}"#) };
        assert_eq!(e.to_wire(), r#"{"seq":42,"v":"clutch/0.1","id":"x"}"#);
        let empty = Event { seq: 1, json: Arc::from("{}") };
        assert_eq!(empty.to_wire(), r#"{"seq":1}"#);
    }

    #[test]
    fn sha256_of_empty() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
