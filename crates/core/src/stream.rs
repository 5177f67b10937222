//! The live bus and catch-up subscriptions to it: a subscriber first reads what the store holds
//! after its cursor, then switches to live events without a gap or a repeat, and is cut off (never
//! buffered without bound) when it cannot keep up. An agent's inbox (a subscription filtered on one
//! recipient) listens on a channel of that recipient's own, so publishing an event costs one send
//! per recipient, however many agents are connected, rather than one filter check per subscriber.
//! The subscribers the fan-out writes to itself are the bus's own part, [`direct`] (public as
//! `clutch_core::direct`).
//!
//! A live event's wire form is made once, by the first subscriber that sends it, and shared by the rest
//! ([`Live::wire`], [`Subscription::next_wire`]), so a fan-out serialises each event once however many
//! listen. A subscriber may fall at most the bus's buffer behind (`Options::subscriber_buffer` of the
//! log; an inbox at most `INBOX_BUFFER_MAX`); past that its subscription ends with its last `seq`
//! (`End::Lagged`), which the faces answer as `SLOW_CONSUMER` with the cursor to resume from (`after=`).

pub mod direct;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use clutch_proto::Message;
use clutch_store::{Backend, Event, Filter};
use tokio::sync::{broadcast, watch};

use self::direct::{Feed, Outlet, Outlets, Socket};
use crate::metrics::Metrics;

/// Events read from the store per catch-up query.
pub(crate) const PAGE: usize = 1000;

/// A committed event as the writer publishes it, with its parsed message for filtering.
pub struct Live {
    pub event: Event,
    pub message: Message,
    /// The event's wire form ([`Event::to_wire`]), made by the first subscriber that sends it and
    /// shared by every other: a fan-out serialises each event once, however many are listening.
    wire: OnceLock<Bytes>,
}

impl Live {
    pub(crate) fn new(event: Event, message: Message) -> Live {
        Live { event, message, wire: OnceLock::new() }
    }

    /// The event as clients receive it, made once.
    pub fn wire(&self) -> Bytes {
        self.wire.get_or_init(|| Bytes::from(self.event.to_wire())).clone()
    }
}

/// An event as a subscription delivers it to a client: its `seq` and its wire form
/// ([`Event::to_wire`]), shared with every other subscriber when it came live.
#[derive(Debug, Clone)]
pub struct Wire {
    pub seq: u64,
    pub bytes: Bytes,
}

/// Most live events an inbox buffers before its subscriber counts as too slow: an inbox sees only
/// its agent's traffic, and its channel's slots are allocated up front, for each connected agent.
const INBOX_BUFFER_MAX: usize = 1024;

/// Where the writer publishes committed events: one channel for subscriptions in general, and one per
/// recipient with an inbox subscriber, made when the first subscribes and dropped once none is left.
pub(crate) struct Bus {
    all: broadcast::Sender<Arc<Live>>,
    routes: Mutex<Routes>,
    buffer: usize,
    inbox_buffer: usize,
}

/// The bus's subscribers other than those to every event, behind one lock: a subscriber added while
/// the writer publishes is either seen by that publish or sees its events as visible.
#[derive(Default)]
struct Routes {
    inboxes: HashMap<String, broadcast::Sender<Arc<Live>>>,
    outlets: Outlets,
}

impl Bus {
    pub(crate) fn new(buffer: usize) -> Bus {
        let buffer = buffer.max(16);
        Bus {
            all: broadcast::channel(buffer).0,
            routes: Mutex::new(Routes::default()),
            buffer,
            inbox_buffer: buffer.min(INBOX_BUFFER_MAX),
        }
    }

    /// Most live events a subscriber may fall behind before it is cut off.
    pub(crate) fn buffer(&self) -> usize {
        self.buffer
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().expect("bus lock")
    }

    /// Adds a subscriber the fan-out writes to itself ([`crate::direct`]).
    pub(crate) fn add_outlet(&self, outlet: Arc<Outlet>) {
        self.routes().outlets.add(outlet);
    }

    pub(crate) fn remove_outlet(&self, outlet: &Arc<Outlet>) {
        self.routes().outlets.remove(outlet);
    }

    /// A receiver of the events `filter` may select: its recipient's, or all.
    pub(crate) fn subscribe(&self, filter: &Filter) -> broadcast::Receiver<Arc<Live>> {
        let Some(agent) = &filter.to else { return self.all.subscribe() };
        let inboxes = &mut self.routes().inboxes;
        inboxes.retain(|_, sender| sender.receiver_count() > 0);
        inboxes.entry(agent.clone()).or_insert_with(|| broadcast::channel(self.inbox_buffer).0).subscribe()
    }

    /// Subscribers to every event (not one recipient's): those each publish wakes.
    pub(crate) fn broad_subscribers(&self) -> usize {
        self.all.receiver_count()
    }

    /// Publishes `events`, in order, to the general channel, to each recipient's inbox and to the
    /// fan-out thread of the direct subscribers.
    pub(crate) fn publish(&self, events: Vec<Arc<Live>>) {
        let routes = self.routes();
        if routes.outlets.any() {
            routes.outlets.publish(events.clone());
        }
        let inboxes = &routes.inboxes;
        for live in events {
            for recipient in &live.message.to {
                if let Some(inbox) = inboxes.get(&recipient.agent_id) {
                    // No receivers is fine: the inbox's subscriber just left.
                    let _ = inbox.send(live.clone());
                }
            }
            if self.all.receiver_count() > 0 {
                let _ = self.all.send(live);
            }
        }
    }
}

/// Why a subscription ended. Each carries the `seq` of the last event delivered (or the starting
/// cursor): resuming with `after` set to it continues without a gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The subscriber fell more than the buffer behind the live stream.
    Lagged { last_seq: u64 },
    /// The daemon is shutting down.
    Shutdown { last_seq: u64 },
    /// The store failed while catching up.
    Failed { last_seq: u64, message: String },
    /// The subscriber's connection failed (a direct subscriber's, seen by the fan-out).
    Closed { last_seq: u64 },
}

/// A live, filtered view of the event log. See [`crate::Handle::subscribe`].
pub struct Subscription {
    pub(crate) bus: Arc<Bus>,
    pub(crate) backend: Arc<dyn Backend>,
    /// The log's visible head: catch-up reads stop there; later events come live.
    pub(crate) visible: Arc<AtomicU64>,
    receiver: broadcast::Receiver<Arc<Live>>,
    pub(crate) closing: watch::Receiver<bool>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) filter: Filter,
    pub(crate) last: u64,
    buffer: VecDeque<Event>,
    catching_up: bool,
    /// Whether a live event has been received since the last catch-up ended: a lag before that is
    /// the catch-up's own slowness, not the subscriber's.
    live_ok: bool,
}

impl Subscription {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        bus: Arc<Bus>,
        backend: Arc<dyn Backend>,
        visible: Arc<AtomicU64>,
        receiver: broadcast::Receiver<Arc<Live>>,
        closing: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
        filter: Filter,
        after: u64,
    ) -> Subscription {
        metrics.subscribers.fetch_add(1, Ordering::Relaxed);
        // Nothing to catch up on from the visible head: the receiver, subscribed before the head
        // was read, gets every later event.
        let catching_up = visible.load(Ordering::Acquire) > after;
        Subscription {
            bus,
            backend,
            visible,
            receiver,
            closing,
            metrics,
            filter,
            last: after,
            buffer: VecDeque::new(),
            catching_up,
            live_ok: false,
        }
    }

    /// The `seq` of the last event delivered, or the starting cursor.
    pub fn cursor(&self) -> u64 {
        self.last
    }

    /// The same subscription, from its cursor, with its live part written by the fan-out to `socket`
    /// itself ([`crate::direct`]).
    pub fn direct(self, socket: Arc<dyn Socket>) -> Feed {
        Feed::new(&self, socket)
    }

    /// The next event, or why the subscription ended (after which it yields nothing useful).
    pub async fn next(&mut self) -> Result<Event, End> {
        Ok(match self.next_item().await? {
            Item::Stored(event) => event,
            Item::Live(live) => live.event.clone(),
        })
    }

    /// The next event in its wire form, or why the subscription ended: what the live stream's faces
    /// send, made once per event for all of them.
    pub async fn next_wire(&mut self) -> Result<Wire, End> {
        Ok(match self.next_item().await? {
            Item::Stored(event) => Wire { seq: event.seq, bytes: Bytes::from(event.to_wire()) },
            Item::Live(live) => Wire { seq: live.event.seq, bytes: live.wire() },
        })
    }

    async fn next_item(&mut self) -> Result<Item, End> {
        loop {
            if let Some(event) = self.buffer.pop_front() {
                self.last = event.seq;
                return Ok(Item::Stored(event));
            }
            if *self.closing.borrow() {
                return Err(End::Shutdown { last_seq: self.last });
            }
            if self.catching_up {
                let page = stored_page(self.backend.as_ref(), &self.filter, self.last, &self.visible).await?;
                if page.len() < PAGE {
                    self.catching_up = false;
                    self.live_ok = false;
                }
                self.buffer.extend(page);
                continue;
            }
            tokio::select! {
                biased;
                _ = self.closing.changed() => return Err(End::Shutdown { last_seq: self.last }),
                received = self.receiver.recv() => match received {
                    Ok(live) => {
                        self.live_ok = true;
                        if live.event.seq > self.last && self.filter.matches(&live.message) {
                            self.last = live.event.seq;
                            return Ok(Item::Live(live));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) if !self.live_ok => self.catching_up = true,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.metrics.lagged_drops.fetch_add(1, Ordering::Relaxed);
                        return Err(End::Lagged { last_seq: self.last });
                    }
                    Err(broadcast::error::RecvError::Closed) => return Err(End::Shutdown { last_seq: self.last }),
                },
            }
        }
    }
}

/// The next page (at most [`PAGE`] events; a shorter one is the last) of what the store holds for
/// `filter` after `after`, up to the visible head as it was before the read: what comes later comes
/// live.
pub(crate) async fn stored_page(
    backend: &dyn Backend,
    filter: &Filter,
    after: u64,
    visible: &AtomicU64,
) -> Result<Vec<Event>, End> {
    let head = visible.load(Ordering::Acquire);
    let mut page =
        backend.read(filter, after, PAGE).await.map_err(|e| End::Failed { last_seq: after, message: e.to_string() })?;
    visible_only(&mut page, head);
    Ok(page)
}

/// Drops the events past `visible` (a read's rows are in `seq` order).
pub(crate) fn visible_only(events: &mut Vec<Event>, visible: u64) {
    let keep = events.partition_point(|e| e.seq <= visible);
    events.truncate(keep);
}

/// An event from the store (catching up) or from the live bus.
enum Item {
    Stored(Event),
    Live(Arc<Live>),
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.metrics.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}
