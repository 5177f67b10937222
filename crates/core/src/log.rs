//! The event log service: the one writer that owns the append path. Callers send messages to it; it
//! takes whatever has queued up into one batch and has the store commit it in one transaction (group
//! commit) and flush it, and only then publishes the new events, in `seq` order, and answers each
//! caller; what arrives meanwhile makes the next batch. When the writer falls behind, a flusher beside
//! it makes committed batches durable (one `sync` covers every batch committed before it) while the
//! writer commits the next one. When the writer is idle and nothing waits, a caller over a backend
//! with blocking writes commits its own request on its own thread instead ([`Writer::write_inline`]).
//!
//! The writer commits a batch and, as a rule, flushes it in the same step (`append_batch`) and answers
//! its callers itself. When it falls behind (a full batch, `Options::batch_max`, and more waiting), it
//! commits without a flush (`write_batch`), lets the gate apply the batch, hands it to the flusher and
//! takes the next batch while the disk flushes. Up to `FLUSHES` flushes overlap (one started after a
//! batch was committed makes it durable, whichever ends first); while every one is busy, the writer waits
//! (at most `LINGER`) for about as many requests as the last flush answered, so that callers answered
//! together share a flush again. The flusher runs `sync` over every batch handed to it so far, then moves
//! the **visible head**, publishes the events and answers the callers, in order.
//!
//! Reads through [`Handle`] (`get`, `read`, `head`, catch-up) show nothing past the visible head, so no
//! client sees an event before it is durable and applied. A subscription from the visible head (the
//! default) reads nothing from the store: it listens on the bus before it reads the head, so every later
//! event reaches it live.
//!
//! Over a backend with [`BlockingWrites`] (SQLite) the writer runs on a thread of its own
//! ([`Service::spawn`]) and commits there, rather than handing each batch to the blocking pool and
//! waiting to be woken. Whoever holds the writer's state (`Writer`, behind one async mutex) commits: when
//! nothing waits in the queue, the flusher has nothing, the gate admits every entry and at most
//! `INLINE_FAN_OUT_MAX` subscribers (direct ones not counted) take every event, [`Handle::append`] takes
//! the state (`try_lock`, never waiting) and commits, flushes and answers its own request on the caller's
//! thread. That code has no await, so a caller that goes away cannot leave a batch committed and
//! unapplied; a lone append then wakes no other thread on its way in or out.
//!
//! A failed flush stops the log: durability is unknown, so nothing written since is acknowledged, and
//! every later append is refused until a restart. So does a write cut short by a panic, on the writer's
//! thread or a caller's (`Link::writing` is still set when the next write comes): what it stored may be
//! neither applied nor published. The engine's state alone runs ahead of the durable log, by the batches
//! awaiting their flush (the gate applies a batch once it is committed); a crash loses that memory too,
//! and the next start rebuilds it from the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use clutch_proto::Message;
use clutch_store::{Artifact, Backend, BlockingWrites, Entry, Event, Filter, Outcome, Snapshot, lists};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::stream::{Bus, Live, Subscription, visible_only};
use crate::{Error, Refusal, Result};

/// Tuning of the log service, the `[log_service]` section of the config file; the defaults suit a
/// laptop and a server alike.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// Messages committed in one transaction at most (group commit).
    pub batch_max: usize,
    /// Appends waiting for the writer at most; past it, callers wait (backpressure).
    pub queue: usize,
    /// Events a live subscriber may fall behind before it is cut off (`SLOW_CONSUMER`; it resumes
    /// with `after=`).
    pub subscriber_buffer: usize,
    /// Largest artifact accepted, in bytes (the config file's `limits.artifact_bytes`).
    #[serde(skip)]
    pub artifact_max_bytes: u64,
}

impl Options {
    /// The rules types alone do not say; the first one broken.
    pub fn check(&self) -> std::result::Result<(), crate::options::Invalid> {
        use crate::options::positive;
        positive("batch_max", self.batch_max as u64)?;
        positive("queue", self.queue as u64)?;
        positive("subscriber_buffer", self.subscriber_buffer as u64)
    }
}

impl Default for Options {
    fn default() -> Self {
        Options { batch_max: 1024, queue: 4096, subscriber_buffer: 4096, artifact_max_bytes: 64 << 20 }
    }
}

type Reply = oneshot::Sender<Vec<Result<Outcome>>>;

/// A check the writer runs on every message before it is stored, and is told of every event once it
/// is committed. The orchestration engine is one: it refuses illegal task transitions and keeps its
/// state exactly in step with the log, because both happen on the writer's serial path.
pub trait Gate: Send + Sync {
    /// One answer per entry, in order: `Some` refuses that entry (it is answered with the refusal and
    /// not stored). Earlier admitted entries of the batch count as if already stored.
    fn admit(&self, batch: &[Entry]) -> Vec<Option<Refusal>>;
    /// The events just committed, in `seq` order, before anyone else sees them.
    fn committed(&self, events: &[Arc<Live>]);
}

struct Request {
    entries: Vec<Entry>,
    reply: Reply,
}

/// The writer. Create with [`Service::new`], then start with [`Service::spawn`].
pub struct Service {
    requests: mpsc::Receiver<Request>,
    closing: Arc<watch::Sender<bool>>,
    writer: Arc<tokio::sync::Mutex<Writer>>,
    /// The backend has a blocking write path: the writer then runs on a thread of its own.
    blocking: bool,
}

/// The writer's state: whoever holds it commits. That is the writer's thread, or, when nothing waits
/// for it, a caller of [`Handle::append`] on its own thread (see [`Writer::write_inline`]).
struct Writer {
    backend: Arc<dyn Backend>,
    /// The backend's blocking write path, when it has one.
    blocking: Option<Arc<dyn BlockingWrites>>,
    bus: Arc<Bus>,
    metrics: Arc<Metrics>,
    batch_max: usize,
    gate: Option<Arc<dyn Gate>>,
    visible: Arc<AtomicU64>,
    /// The way to the flusher, while the writer runs.
    link: Option<Link>,
}

/// The longest a batch waits for the requests it expects while the disk is busy. Callers answered by
/// one flush come back at nearly the same moment; without this, the first to return would be
/// committed alone.
const LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// Most subscribers to every event for which a caller commits its own append ([`Writer::write_inline`]).
/// Direct subscribers ([`crate::direct`]) do not count: a publish hands them to the fan-out thread at once.
/// Each publish wakes them all: woken from the writer's thread, they spread over the runtime's workers
/// through its shared queue; woken from a caller's worker, they all queue there first, and the other
/// workers must steal them. Past this many that costs more than the hand-offs saved (`clutch bench
/// fanout`: 15% more CPU per delivery at 100 subscribers, 14% less at 16).
const INLINE_FAN_OUT_MAX: usize = 32;

/// Batches committed and waiting for the flusher, at most; past that the writer waits too.
const UNFLUSHED_MAX: usize = 64;

/// A batch committed to the store, waiting for a flush to make it durable before its events are
/// published and its callers answered.
struct Written {
    /// The highest `seq` it stored (0 when it stored nothing new).
    head: u64,
    events: Vec<Arc<Live>>,
    answers: Vec<(Reply, Vec<Result<Outcome>>)>,
}

/// What the writer knows of the flusher, to choose when to commit.
#[derive(Debug, Clone, Copy, Default)]
struct Flushing {
    /// Every flush slot is taken.
    busy: bool,
    /// Requests the last flush answered: while the disk is busy, the writer waits (at most [`LINGER`])
    /// for about as many before committing, so that callers answered together share a flush again.
    cohort: usize,
    /// The store failed to flush: durability is unknown, so nothing more is written or acknowledged.
    failed: bool,
    /// Batches handed to the flusher that it has released (or refused), in order.
    released: u64,
}

/// The answer to every append once a flush has failed.
fn not_durable() -> Error {
    Error::Store(clutch_store::Error::Backend(
        "the event log could not be flushed to disk; it takes no appends until the daemon restarts".into(),
    ))
}

/// A cheap, cloneable handle to the event log: appends go to the writer, reads straight to the store.
#[derive(Clone)]
pub struct Handle {
    backend: Arc<dyn Backend>,
    requests: mpsc::Sender<Request>,
    bus: Arc<Bus>,
    closing: Arc<watch::Sender<bool>>,
    metrics: Arc<Metrics>,
    artifact_max_bytes: u64,
    writer: Arc<tokio::sync::Mutex<Writer>>,
    /// The backend has blocking writes, so a caller may commit its own append ([`Writer::write_inline`]).
    inline: bool,
    /// The highest `seq` that is durable, applied by the gate and published: reads show nothing past
    /// it (the store may already hold later, not yet flushed, events). `u64::MAX` until the writer runs.
    visible: Arc<AtomicU64>,
}

impl Service {
    pub fn new(backend: Arc<dyn Backend>, options: Options) -> (Service, Handle) {
        let (tx, rx) = mpsc::channel(options.queue.max(1));
        let bus = Arc::new(Bus::new(options.subscriber_buffer));
        let closing = Arc::new(watch::Sender::new(false));
        let metrics = Arc::new(Metrics::new());
        let visible = Arc::new(AtomicU64::new(u64::MAX));
        let blocking = backend.blocking_writes();
        let writer = Arc::new(tokio::sync::Mutex::new(Writer {
            blocking: blocking.clone(),
            backend: backend.clone(),
            bus: bus.clone(),
            metrics: metrics.clone(),
            batch_max: options.batch_max.max(1),
            gate: None,
            visible: visible.clone(),
            link: None,
        }));
        let handle = Handle {
            backend,
            requests: tx,
            bus,
            closing: closing.clone(),
            metrics,
            artifact_max_bytes: options.artifact_max_bytes,
            visible,
            writer: writer.clone(),
            inline: blocking.is_some(),
        };
        let service = Service { requests: rx, closing, writer, blocking: blocking.is_some() };
        (service, handle)
    }

    /// Puts `gate` on the append path: it vets every message and follows every commit.
    pub fn set_gate(&mut self, gate: Arc<dyn Gate>) {
        self.writer.try_lock().expect("the writer is not running yet").gate = Some(gate);
    }

    /// Starts the writer; it runs until `shutdown` resolves, then ends live subscriptions, refuses new
    /// appends, commits those already queued, waits for their flush, and closes the store. Over a
    /// backend with blocking writes it gets a thread of its own (from the blocking pool, for as long
    /// as it runs), where it commits without a hand-off to another thread and back for each batch;
    /// otherwise it is a task like any other.
    pub fn spawn(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> JoinHandle<()> {
        if self.blocking {
            let runtime = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || runtime.block_on(self.run(shutdown)))
        } else {
            tokio::spawn(self.run(shutdown))
        }
    }

    async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let mut writer = self.writer.lock().await;
        match writer.backend.head().await {
            Ok(head) => writer.visible.store(head, Ordering::Release),
            Err(e) => tracing::error!(error = %e, "cannot read the log's head; reads show nothing until it is written"),
        }
        if writer.visible.load(Ordering::Acquire) == u64::MAX {
            writer.visible.store(0, Ordering::Release);
        }
        let (flushing, watching) = watch::channel(Flushing::default());
        let (to_flush, unflushed) = mpsc::channel(UNFLUSHED_MAX);
        let flusher = Flusher {
            backend: writer.backend.clone(),
            bus: writer.bus.clone(),
            metrics: writer.metrics.clone(),
            visible: writer.visible.clone(),
            state: flushing,
        };
        let flusher = tokio::spawn(flusher.run(unflushed));
        writer.link = Some(Link { to_flush, state: watching, handed: 0, failed: false, writing: false });
        let backend = writer.backend.clone();
        drop(writer);
        tokio::pin!(shutdown);
        loop {
            let first = tokio::select! {
                r = self.requests.recv() => r,
                () = &mut shutdown => None,
            };
            let Some(first) = first else { break };
            self.writer.lock().await.write(first, &mut self.requests).await;
        }
        self.closing.send_replace(true);
        self.requests.close();
        let mut writer = self.writer.lock().await;
        while let Some(request) = self.requests.recv().await {
            writer.write(request, &mut self.requests).await;
        }
        // The flusher ends once it has flushed what it was handed.
        writer.link = None;
        drop(writer);
        if let Err(e) = flusher.await {
            tracing::error!(error = %e, "the log's flusher failed");
        }
        backend.close().await;
        tracing::info!("event log closed");
    }
}

impl Writer {
    /// Commits `first` and whatever else is queued as one transaction, up to `batch_max` messages.
    /// Unless the writer is falling behind (its batch is full and more requests wait) or the flusher
    /// still has batches, it flushes the batch in the same step and answers it itself: no hand-off,
    /// and what arrives meanwhile makes the next batch. Falling behind, it hands the batch to the
    /// flusher and commits the next one while the disk flushes; while every flush slot is taken, it
    /// first waits (at most [`LINGER`]) for about as many requests as the last flush answered.
    async fn write(&mut self, first: Request, queue: &mut mpsc::Receiver<Request>) {
        let Some(link) = self.link.as_mut() else {
            // Only while the writer runs; answer rather than hang.
            let _ = first.reply.send(first.entries.iter().map(|_| Err(Error::ShuttingDown)).collect());
            return;
        };
        let mut count = first.entries.len();
        let mut requests = vec![first];
        let deadline = tokio::time::Instant::now() + LINGER;
        let mut lingering = true;
        while count < self.batch_max {
            if let Ok(r) = queue.try_recv() {
                count += r.entries.len();
                requests.push(r);
                continue;
            }
            let flushing = *link.state.borrow_and_update();
            if !lingering || !flushing.busy || requests.len() >= flushing.cohort {
                break;
            }
            tokio::select! {
                r = queue.recv() => match r {
                    Some(r) => {
                        count += r.entries.len();
                        requests.push(r);
                    }
                    None => break,
                },
                changed = link.state.changed() => if changed.is_err() { break },
                () = tokio::time::sleep_until(deadline) => lingering = false,
            }
        }
        interrupted(link, &self.metrics);
        if link.failed || link.state.borrow().failed {
            for request in requests {
                let _ = request.reply.send(request.entries.iter().map(|_| Err(not_durable())).collect());
            }
            return;
        }
        let lens: Vec<usize> = requests.iter().map(|r| r.entries.len()).collect();
        let batch: Vec<Entry> = requests.iter_mut().flat_map(|r| std::mem::take(&mut r.entries)).collect();
        // Refused entries leave the batch, their positions remembered; the rest is stored as it is.
        let mut stored = batch;
        let mut refused = Vec::new();
        let refusals = vet(self.gate.as_deref(), &self.metrics, &stored);
        if refusals.iter().any(Option::is_some) {
            let mut kept = Vec::with_capacity(stored.len());
            for (i, (entry, refusal)) in stored.into_iter().zip(refusals).enumerate() {
                match refusal {
                    Some(r) => refused.push((i, entry, r)),
                    None => kept.push(entry),
                }
            }
            stored = kept;
        }
        let behind = count >= self.batch_max && !queue.is_empty();
        let inline = !behind && link.handed == link.state.borrow().released;
        link.writing = true;
        let started = Instant::now();
        let result = match (&self.blocking, inline) {
            _ if stored.is_empty() => Ok(Vec::new()),
            (Some(blocking), inline) => commit(&self.metrics, blocking.as_ref(), &stored, inline),
            (None, true) => {
                let appended = self.backend.append_batch(&stored).await;
                self.metrics.commit_and_sync.observe_duration(started.elapsed());
                appended
            }
            (None, false) => {
                let written = self.backend.write_batch(&stored).await;
                self.metrics.commit.observe_duration(started.elapsed());
                written
            }
        };
        let stored_outcomes = answers(&self.metrics, link, result, stored.len());
        // Refused entries and their answers go back to their places, in request order.
        let (mut batch, mut outcomes) = (stored, stored_outcomes);
        for (i, entry, refusal) in refused {
            outcomes.insert(i, refused_answer(self.backend.as_ref(), &self.metrics, &entry, refusal).await);
            batch.insert(i, entry);
        }
        let events = apply(self.gate.as_deref(), &self.metrics, batch, &outcomes);
        let head = events.last().map_or(0, |e| e.event.seq);
        let mut outcomes = outcomes.into_iter();
        let answers =
            requests.into_iter().zip(lens).map(|(r, n)| (r.reply, outcomes.by_ref().take(n).collect())).collect();
        let written = Written { head, events, answers };
        if inline {
            // Durable already, or never to be (then its answers are errors and its events none).
            release(&self.visible, &self.bus, written);
            link.writing = false;
            return;
        }
        link.handed += 1;
        link.writing = false;
        if let Err(mpsc::error::SendError(written)) = link.to_flush.send(written).await {
            // The flusher is gone (it only ends after the writer): answer rather than hang.
            for (reply, outcomes) in written.answers {
                let _ = reply.send(outcomes.into_iter().map(|_| Err(Error::ShuttingDown)).collect());
            }
        }
    }

    /// Commits `request` alone, flushes it and answers it, all on the caller's thread, without the
    /// hand-offs to the writer's thread and back (each a thread woken; on a virtual machine, a lone
    /// append's largest cost). Only over a backend with blocking writes, only while the flusher has
    /// nothing, and only when the gate admits every entry: a refusal's answer looks the store up,
    /// which the writer's thread does. Gives the request back when it cannot.
    ///
    /// It has no await, so a caller that goes away cannot leave a batch committed and unapplied.
    fn write_inline(&mut self, request: Request) -> std::result::Result<(), Request> {
        let Some(blocking) = self.blocking.as_deref() else { return Err(request) };
        let Some(link) = self.link.as_mut().filter(|l| l.clear()) else { return Err(request) };
        if vet(self.gate.as_deref(), &self.metrics, &request.entries).iter().any(Option::is_some) {
            return Err(request);
        }
        let Request { entries, reply } = request;
        self.metrics.inline_batches.fetch_add(1, Ordering::Relaxed);
        link.writing = true;
        let result = commit(&self.metrics, blocking, &entries, true);
        let outcomes = answers(&self.metrics, link, result, entries.len());
        let events = apply(self.gate.as_deref(), &self.metrics, entries, &outcomes);
        let head = events.last().map_or(0, |e| e.event.seq);
        release(&self.visible, &self.bus, Written { head, events, answers: vec![(reply, outcomes)] });
        link.writing = false;
        Ok(())
    }
}

/// The gate's verdict on each entry (none without a gate).
fn vet(gate: Option<&dyn Gate>, metrics: &Metrics, batch: &[Entry]) -> Vec<Option<Refusal>> {
    let Some(gate) = gate else { return vec![None; batch.len()] };
    let vetting = Instant::now();
    let refusals = gate.admit(batch);
    metrics.vet.observe_duration(vetting.elapsed());
    refusals
}

/// The new events of a committed batch, counted and applied by the gate: it applies them now,
/// before the next batch is vetted; everyone else sees them only once they are durable.
fn apply(
    gate: Option<&dyn Gate>,
    metrics: &Metrics,
    batch: Vec<Entry>,
    outcomes: &[Result<Outcome>],
) -> Vec<Arc<Live>> {
    let mut events = Vec::new();
    for (Entry { message, json }, outcome) in batch.into_iter().zip(outcomes) {
        match outcome {
            Ok(o) if !o.duplicate => {
                metrics.appended.fetch_add(1, Ordering::Relaxed);
                events.push(Arc::new(Live::new(Event { seq: o.seq, json }, message)));
            }
            Ok(_) => {
                metrics.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::Store(clutch_store::Error::IdConflict { .. })) => {
                metrics.conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    }
    if let Some(gate) = gate
        && !events.is_empty()
    {
        let applying = Instant::now();
        gate.committed(&events);
        metrics.apply.observe_duration(applying.elapsed());
    }
    events
}

/// Commits `stored` on this thread through the backend's blocking writes and, when `flush`, flushes
/// it: two steps, timed apart.
fn commit(
    metrics: &Metrics,
    blocking: &dyn BlockingWrites,
    stored: &[Entry],
    flush: bool,
) -> clutch_store::Result<Vec<clutch_store::Result<Outcome>>> {
    let started = Instant::now();
    let written = blocking.write_batch(stored);
    metrics.commit.observe_duration(started.elapsed());
    if flush && written.is_ok() {
        let flushing = Instant::now();
        let synced = blocking.sync();
        metrics.sync.observe_duration(flushing.elapsed());
        synced.and(written)
    } else {
        written
    }
}

/// One answer per stored entry from what the store said of the batch. A failed flush leaves the
/// log's durability unknown: the link remembers it, and nothing more is written or acknowledged.
fn answers(
    metrics: &Metrics,
    link: &mut Link,
    result: clutch_store::Result<Vec<clutch_store::Result<Outcome>>>,
    stored: usize,
) -> Vec<Result<Outcome>> {
    metrics.batches.fetch_add(1, Ordering::Relaxed);
    metrics.batch_size.observe(stored as f64);
    match result {
        Ok(outcomes) => outcomes.into_iter().map(|o| o.map_err(Error::Store)).collect(),
        Err(e @ clutch_store::Error::NotDurable(_)) => {
            tracing::error!(error = %e, "the event log could not be flushed to disk; no more appends are taken or acknowledged until the daemon restarts");
            metrics.batch_failures.fetch_add(1, Ordering::Relaxed);
            link.failed = true;
            (0..stored).map(|_| Err(not_durable())).collect()
        }
        Err(e) => {
            tracing::error!(error = %e, messages = stored, "append batch failed; nothing stored");
            metrics.batch_failures.fetch_add(1, Ordering::Relaxed);
            let text = e.to_string();
            let closed = matches!(e, clutch_store::Error::Closed);
            (0..stored)
                .map(|_| {
                    Err(if closed {
                        Error::ShuttingDown
                    } else {
                        Error::Store(clutch_store::Error::Backend(text.clone()))
                    })
                })
                .collect()
        }
    }
}

/// The writer's side of the flusher: where committed batches go, and the flusher's state.
struct Link {
    to_flush: mpsc::Sender<Written>,
    state: watch::Receiver<Flushing>,
    /// Batches handed to the flusher so far.
    handed: u64,
    /// A batch the writer committed and flushed itself could not be flushed.
    failed: bool,
    /// A batch is being written: from its commit until it is released or handed to the flusher. Still
    /// set when the next batch comes, that write was cut short (a panic, on the writer's thread or a
    /// caller's): what it stored may be neither applied nor published.
    writing: bool,
}

impl Link {
    /// Nothing waits for the flusher, and no flush failed and no write was cut short: a batch may be
    /// committed, flushed and released at once.
    fn clear(&self) -> bool {
        let flushing = *self.state.borrow();
        !self.failed && !self.writing && !flushing.failed && self.handed == flushing.released
    }
}

/// After a write cut short, the log stops as after a failed flush: its state may no longer match the
/// store, so nothing more is written or acknowledged until the daemon restarts.
fn interrupted(link: &mut Link, metrics: &Metrics) {
    if link.writing {
        link.writing = false;
        link.failed = true;
        metrics.batch_failures.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            "a write to the event log was cut short (a panic on its way); no more appends are taken or acknowledged until the daemon restarts"
        );
    }
}

/// A durable batch: visible, published, answered. Returns how many callers it answered.
fn release(visible: &AtomicU64, bus: &Bus, Written { head, events, answers }: Written) -> usize {
    // Visible first: a caller who reads right after its answer finds its events.
    if head > 0 {
        visible.store(head, Ordering::Release);
    }
    bus.publish(events);
    let answered = answers.len();
    for (reply, outcomes) in answers {
        // A caller that gave up (its connection dropped) still had its messages stored.
        let _ = reply.send(outcomes);
    }
    answered
}

/// Makes committed batches durable, then publishes their events and answers their callers, in order.
/// A `sync` makes durable every batch committed before it started, so a batch committed while a flush
/// is under way does not wait for it: another flush starts at once (up to [`FLUSHES`] at a time), and
/// whichever ends releases every batch it covers. Disks answer overlapping flushes much sooner than
/// flushes queued one behind the other.
struct Flusher {
    backend: Arc<dyn Backend>,
    bus: Arc<Bus>,
    metrics: Arc<Metrics>,
    visible: Arc<AtomicU64>,
    state: watch::Sender<Flushing>,
}

/// Flushes under way at once, at most; with all of them busy, the writer gathers a bigger batch.
const FLUSHES: usize = 2;

/// What a flush reports: the number of the last batch it covers, how it went, and how long it took.
type Flushed = (u64, clutch_store::Result<()>, std::time::Duration);

impl Flusher {
    async fn run(self, mut unflushed: mpsc::Receiver<Written>) {
        // Batches are numbered from 1 in the order they arrive.
        let mut pending = std::collections::VecDeque::new();
        let (mut received, mut covered, mut released) = (0u64, 0u64, 0u64);
        let mut flushes: tokio::task::JoinSet<Flushed> = tokio::task::JoinSet::new();
        let (mut open, mut failed) = (true, false);
        loop {
            if !failed && received > covered && flushes.len() < FLUSHES {
                covered = received;
                let backend = self.backend.clone();
                flushes.spawn(async move {
                    let started = Instant::now();
                    let result = backend.sync().await;
                    (covered, result, started.elapsed())
                });
                self.state.send_modify(|s| s.busy = flushes.len() >= FLUSHES);
                continue;
            }
            if !open && flushes.is_empty() && (failed || covered == received) {
                break;
            }
            tokio::select! {
                written = unflushed.recv(), if open => match written {
                    Some(written) if failed => Self::refuse(written),
                    Some(written) => {
                        received += 1;
                        pending.push_back(written);
                    }
                    None => open = false,
                },
                Some(flushed) = flushes.join_next(), if !flushes.is_empty() => {
                    let (mark, result, took) = flushed.unwrap_or_else(|e| {
                        (0, Err(clutch_store::Error::Backend(format!("the flush task failed: {e}"))), Default::default())
                    });
                    self.metrics.sync.observe_duration(took);
                    let mut answered = 0;
                    match result {
                        Ok(()) if !failed => {
                            while released < mark {
                                let Some(written) = pending.pop_front() else { break };
                                released += 1;
                                answered += release(&self.visible, &self.bus, written);
                            }
                        }
                        Ok(()) => {}
                        Err(e) => {
                            if !failed {
                                tracing::error!(error = %e, "the event log could not be flushed to disk; no more appends are taken or acknowledged until the daemon restarts");
                                self.metrics.batch_failures.fetch_add(1, Ordering::Relaxed);
                            }
                            failed = true;
                            released += pending.len() as u64;
                            pending.drain(..).for_each(Self::refuse);
                        }
                    }
                    self.state.send_modify(|s| {
                        s.busy = flushes.len() >= FLUSHES;
                        if answered > 0 {
                            s.cohort = answered;
                        }
                        s.failed = failed;
                        s.released = released;
                    });
                }
            }
        }
    }

    /// A batch whose durability is unknown: every caller gets an error, nobody sees its events.
    fn refuse(written: Written) {
        for (reply, outcomes) in written.answers {
            let _ = reply.send(outcomes.into_iter().map(|_| Err(not_durable())).collect());
        }
    }
}

/// The answer to a refused entry: a retry of a message already stored is still a duplicate (the state
/// moved on because of that very message); anything else gets the refusal.
async fn refused_answer(backend: &dyn Backend, metrics: &Metrics, entry: &Entry, refusal: Refusal) -> Result<Outcome> {
    metrics.refusals.fetch_add(1, Ordering::Relaxed);
    if let Ok(Some(stored)) = backend.get(&entry.message.id).await {
        let same = serde_json::from_str::<Message>(&stored.json)
            .is_ok_and(|original| original.dedup_body() == entry.message.dedup_body());
        if same {
            metrics.duplicates.fetch_add(1, Ordering::Relaxed);
            return Ok(Outcome { id: entry.message.id.clone(), seq: stored.seq, duplicate: true });
        }
        metrics.conflicts.fetch_add(1, Ordering::Relaxed);
        return Err(Error::Store(clutch_store::Error::IdConflict { id: entry.message.id.clone(), seq: stored.seq }));
    }
    Err(Error::Refused(refusal))
}

impl Handle {
    /// Appends `messages` (already validated) and waits until they are durable. One answer per message,
    /// in order; a bad message does not spoil the others.
    pub async fn append(&self, messages: Vec<Message>) -> Result<Vec<Result<Outcome>>> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        // Serialized here, on the caller's task, not on the writer's serial path.
        let entries = messages.into_iter().map(Entry::new).collect();
        let (reply, answer) = oneshot::channel();
        let request = Request { entries, reply };
        if let Err(request) = self.try_inline(request) {
            self.requests.send(request).await.map_err(|_| Error::ShuttingDown)?;
        }
        answer.await.map_err(|_| Error::ShuttingDown)
    }

    /// Commits `request` on this thread when the writer is idle and nothing waits for it
    /// ([`Writer::write_inline`]); under load, requests queue and the writer's thread batches them.
    fn try_inline(&self, request: Request) -> std::result::Result<(), Request> {
        if !self.inline
            || self.queued() > 0
            || *self.closing.borrow()
            || self.bus.broad_subscribers() > INLINE_FAN_OUT_MAX
        {
            return Err(request);
        }
        let Ok(mut writer) = self.writer.try_lock() else { return Err(request) };
        // Checked again while the writer is held: once closing, every request goes through the queue.
        if *self.closing.borrow() {
            return Err(request);
        }
        writer.write_inline(request)
    }

    /// Appends one message.
    pub async fn append_one(&self, message: Message) -> Result<Outcome> {
        self.append(vec![message]).await?.pop().unwrap_or(Err(Error::ShuttingDown))
    }

    /// The message stored under `id`, once it is visible (durable and published).
    pub async fn get(&self, id: &str) -> Result<Option<Event>> {
        let visible = self.visible();
        Ok(self.backend.get(id).await.map_err(failed("get a message"))?.filter(|e| e.seq <= visible))
    }

    /// Up to `limit` visible events matching `filter` after `after`, in `seq` order.
    pub async fn read(&self, filter: &Filter, after: u64, limit: usize) -> Result<Vec<Event>> {
        let visible = self.visible();
        let mut events = self.backend.read(filter, after, limit).await.map_err(failed("read events"))?;
        visible_only(&mut events, visible);
        Ok(events)
    }

    /// A page of runs from the store's lists (see `clutch_store::lists`). The lists are the store's
    /// rows as of its `as_of`, which may be a few events past the visible head.
    pub async fn list_runs(&self, query: &lists::Query) -> Result<lists::Page<lists::RunSummary>> {
        self.backend.list_runs(query).await.map_err(failed("list runs"))
    }

    /// A page of threads, as [`Handle::list_runs`].
    pub async fn list_threads(&self, query: &lists::Query) -> Result<lists::Page<lists::ThreadSummary>> {
        self.backend.list_threads(query).await.map_err(failed("list threads"))
    }

    /// A page of tasks, as [`Handle::list_runs`].
    pub async fn list_tasks(&self, query: &lists::Query) -> Result<lists::Page<lists::TaskListing>> {
        self.backend.list_tasks(query).await.map_err(failed("list tasks"))
    }

    /// A page of search results, visible events only.
    pub async fn search(&self, text: &str, query: &lists::Query) -> Result<lists::Page<lists::SearchHit>> {
        let visible = self.visible();
        let mut page = self.backend.search(text, query).await.map_err(failed("search the log"))?;
        page.items.retain(|hit| hit.seq <= visible);
        Ok(page)
    }

    /// Derives the lists and the search index again from the whole log; how many events they cover.
    pub async fn rebuild_lists(&self) -> Result<u64> {
        self.backend.rebuild_lists().await.map_err(failed("rebuild the lists"))
    }

    /// The highest visible `seq`.
    pub async fn head(&self) -> Result<u64> {
        let visible = self.visible();
        Ok(self.backend.head().await.map_err(failed("read the head"))?.min(visible))
    }

    /// Durable events not yet in the store's secondary indexes, where it indexes behind the log
    /// (see [`clutch_store::Backend::index_lag`]).
    pub fn index_lag(&self) -> Option<u64> {
        self.backend.index_lag()
    }

    /// Whether the writer runs and is idle: nothing queued, no batch in hand, nothing being flushed.
    /// An append now is committed on the caller's thread (over a backend with blocking writes).
    pub fn idle(&self) -> bool {
        self.queued() == 0 && self.writer.try_lock().is_ok_and(|w| w.link.as_ref().is_some_and(Link::clear))
    }

    /// Append requests waiting for the writer (sent, not yet taken into a batch).
    pub fn queued(&self) -> usize {
        self.requests.max_capacity() - self.requests.capacity()
    }

    fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Subscribes to events matching `filter`: first those stored after `after` (or, with `None`, none
    /// of the past), then live ones, with no gap and no repeat.
    pub async fn subscribe(&self, filter: Filter, after: Option<u64>) -> Result<Subscription> {
        let receiver = self.bus.subscribe(&filter);
        // The visible head, once the writer has set it: every visible event is durable, so the
        // store's head is never below it, and `head()` would cost a query per subscription.
        let after = match (after, self.visible()) {
            (Some(a), _) => a,
            (None, visible) if visible != u64::MAX => visible,
            (None, _) => self.head().await?,
        };
        Ok(Subscription::new(
            self.bus.clone(),
            self.backend.clone(),
            self.visible.clone(),
            receiver,
            self.closing.subscribe(),
            self.metrics.clone(),
            filter,
            after,
        ))
    }

    /// A consumer's saved position (push delivery), if any.
    pub async fn cursor(&self, name: &str) -> Result<Option<u64>> {
        self.backend.cursor(name).await.map_err(failed("read a cursor"))
    }

    /// Saves a consumer's position durably.
    pub async fn set_cursor(&self, name: &str, seq: u64) -> Result<()> {
        self.backend.set_cursor(name, seq).await.map_err(failed("save a cursor"))
    }

    /// The record kept under `key` in `space` beside the log (see [`clutch_store::Backend::record`]).
    pub async fn record(&self, space: &str, key: &str) -> Result<Option<bytes::Bytes>> {
        self.backend.record(space, key).await.map_err(failed("read a record"))
    }

    /// Every record of `space`, by key.
    pub async fn records(&self, space: &str) -> Result<Vec<(String, bytes::Bytes)>> {
        self.backend.records(space).await.map_err(failed("read records"))
    }

    /// Saves a record durably beside the log, replacing the one under the same key.
    pub async fn put_record(&self, space: &str, key: &str, body: bytes::Bytes) -> Result<()> {
        self.backend.put_record(space, key, body).await.map_err(failed("save a record"))
    }

    /// Removes a record durably; whether there was one.
    pub async fn delete_record(&self, space: &str, key: &str) -> Result<bool> {
        self.backend.delete_record(space, key).await.map_err(failed("remove a record"))
    }

    /// Removes the oldest `limit` events of `run_id` up to `upto`, for retention (see
    /// [`clutch_store::Backend::remove_run`]); how many went.
    pub async fn remove_run(&self, run_id: &str, upto: u64, limit: usize) -> Result<usize> {
        self.backend.remove_run(run_id, upto, limit).await.map_err(failed("remove a run's events"))
    }

    /// The snapshot saved under `name`, if any.
    pub async fn snapshot(&self, name: &str) -> Result<Option<Snapshot>> {
        self.backend.snapshot(name).await.map_err(failed("read a snapshot"))
    }

    /// Saves a snapshot durably, replacing the one of the same name.
    pub async fn set_snapshot(&self, name: &str, snapshot: &Snapshot) -> Result<()> {
        self.backend.set_snapshot(name, snapshot).await.map_err(failed("save a snapshot"))
    }

    pub async fn put_artifact(&self, bytes: Bytes) -> Result<Artifact> {
        let size = bytes.len() as u64;
        if size > self.artifact_max_bytes {
            return Err(Error::ArtifactTooLarge { size, limit: self.artifact_max_bytes });
        }
        self.backend.put_artifact(bytes).await.map_err(failed("store an artifact"))
    }

    pub async fn get_artifact(&self, sha256: &str) -> Result<Option<Bytes>> {
        self.backend.get_artifact(sha256).await.map_err(failed("read an artifact"))
    }

    pub fn artifact_max_bytes(&self) -> u64 {
        self.artifact_max_bytes
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Begins shutting down: every live subscription ends with [`End::Shutdown`](crate::End) so that
    /// connections close; appends are still taken until the service's `shutdown` resolves.
    pub fn close_streams(&self) {
        self.closing.send_replace(true);
    }

    /// True once the daemon has begun shutting down.
    pub fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }
}

/// A store failure as the core's error, logged here, where it happened (a caller answers it without
/// its details, and logs nothing more).
fn failed(doing: &'static str) -> impl FnOnce(clutch_store::Error) -> Error {
    move |e| {
        tracing::error!(error = %e, doing, "store failure");
        Error::Store(e)
    }
}
