//! Decides, in memory and in batch order, what each appended message becomes: a new row with the next
//! `seq`, a duplicate of a message stored before or earlier in the batch, or an id conflict.

use std::collections::HashMap;

use clutch_proto::Message;
use clutch_store::{Entry, Error, Outcome, Result};

/// A stored message whose id is one of the batch's.
pub(crate) struct StoredId {
    pub id: String,
    pub seq: u64,
    pub run_id: String,
    pub body: String,
}

/// A stored message whose `(run_id, idempotency_key)` is one of the batch's.
pub(crate) struct StoredKey {
    pub run_id: String,
    pub key: String,
    pub id: String,
    pub seq: u64,
}

/// The rows to insert, column by column, ready to bind to `UNNEST`.
#[derive(Default)]
pub(crate) struct Rows<'a> {
    pub seq: Vec<i64>,
    pub id: Vec<&'a str>,
    pub run_id: Vec<&'a str>,
    pub thread_id: Vec<&'a str>,
    pub task_id: Vec<&'a str>,
    pub from_agent: Vec<&'a str>,
    pub kind: Vec<&'static str>,
    pub idempotency_key: Vec<Option<&'a str>>,
    pub body: Vec<&'a str>,
    /// `(to[].agent_id, seq)` pairs for the inbox index.
    pub to_agent: Vec<&'a str>,
    pub to_seq: Vec<i64>,
}

pub(crate) struct Plan<'a> {
    pub outcomes: Vec<Result<Outcome>>,
    pub rows: Rows<'a>,
}

/// The message an id already belongs to.
enum Original<'a> {
    Stored { seq: u64, run_id: String, body: String },
    Batch { seq: u64, message: &'a Message },
}

/// Plans `batch` after the log's `head`, knowing which of its ids and idempotency keys are stored.
pub(crate) fn plan(batch: &[Entry], head: u64, ids: Vec<StoredId>, keys: Vec<StoredKey>) -> Result<Plan<'_>> {
    let mut by_id: HashMap<String, Original<'_>> =
        ids.into_iter().map(|s| (s.id, Original::Stored { seq: s.seq, run_id: s.run_id, body: s.body })).collect();
    let mut by_key: HashMap<(String, String), (String, u64)> =
        keys.into_iter().map(|s| ((s.run_id, s.key), (s.id, s.seq))).collect();
    let mut rows = Rows::default();
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut next = head;

    for entry in batch {
        let message = &entry.message;
        if let Some(original) = by_id.get(&message.id) {
            outcomes.push(repeat_of_id(message, original));
            continue;
        }
        if let Some(key) = &message.idempotency_key
            && let Some((id, seq)) = by_key.get(&(message.run_id.clone(), key.clone()))
        {
            outcomes.push(Ok(Outcome { id: id.clone(), seq: *seq, duplicate: true }));
            continue;
        }
        next += 1;
        let seq = i64::try_from(next).map_err(|_| Error::Backend(format!("seq {next} is out of range")))?;
        rows.seq.push(seq);
        rows.id.push(&message.id);
        rows.run_id.push(&message.run_id);
        rows.thread_id.push(&message.thread_id);
        rows.task_id.push(&message.task_id);
        rows.from_agent.push(&message.from.agent_id);
        rows.kind.push(message.kind.as_str());
        rows.idempotency_key.push(message.idempotency_key.as_deref());
        rows.body.push(&entry.json);
        for r in &message.to {
            if !rows.to_agent.iter().zip(&rows.to_seq).any(|(a, s)| *s == seq && *a == r.agent_id) {
                rows.to_agent.push(&r.agent_id);
                rows.to_seq.push(seq);
            }
        }
        by_id.insert(message.id.clone(), Original::Batch { seq: next, message });
        if let Some(key) = &message.idempotency_key {
            by_key.insert((message.run_id.clone(), key.clone()), (message.id.clone(), next));
        }
        outcomes.push(Ok(Outcome { id: message.id.clone(), seq: next, duplicate: false }));
    }
    Ok(Plan { outcomes, rows })
}

/// A message whose id is taken: a duplicate when the run and the body (but for `ts`) are the same.
fn repeat_of_id(message: &Message, original: &Original<'_>) -> Result<Outcome> {
    let (seq, same) = match original {
        Original::Stored { seq, run_id, body } => {
            let stored: Message =
                serde_json::from_str(body).map_err(|e| Error::Corrupt(format!("event {seq} ({}): {e}", message.id)))?;
            (*seq, *run_id == message.run_id && stored.dedup_body() == message.dedup_body())
        }
        Original::Batch { seq, message: earlier } => {
            (*seq, earlier.run_id == message.run_id && earlier.dedup_body() == message.dedup_body())
        }
    };
    if same {
        Ok(Outcome { id: message.id.clone(), seq, duplicate: true })
    } else {
        Err(Error::IdConflict { id: message.id.clone(), seq })
    }
}
