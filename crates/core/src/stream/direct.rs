//! Live subscribers the fan-out writes to itself. A face that owns its subscriber's socket (the
//! WebSocket stream, and the SSE stream on the socket hyper lends it) hands it over as a [`Socket`]:
//! once the subscriber has caught up, one fan-out thread writes each event's frame straight to every
//! such socket, without waiting (as Redis's `PUBLISH` does), instead of waking one task per
//! subscriber to write it. The subscriber's own task writes only what the fan-out could not: the
//! catch-up from the store, the rest of a frame a full socket cut short and what queued behind it,
//! its control frames, and the final frame.
//!
//! Exactly one side writes at a time. The fan-out writes only while the subscriber is *direct*: its
//! queue empty and its task not writing. Anything else is queued, in order, and the task writes it;
//! once the queue is empty again the task hands the socket back. A subscriber that falls more than the
//! bus's buffer behind is cut off, as a [`crate::Subscription`] is.
//!
//! The fan-out is one thread (`clutch-fanout`), started with the first direct subscriber.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use clutch_store::{Backend, Event, Filter};
use tokio::sync::{Notify, watch};

use super::{Bus, End, Live, PAGE, Subscription, Wire, stored_page};
use crate::metrics::Metrics;

/// A subscriber's connection, as the fan-out writes to it.
pub trait Socket: Send + Sync + 'static {
    /// Writes `wire`'s frame, or what of it the socket takes now, without waiting: `Ok(None)` when
    /// all of it went, `Ok(Some(rest))` with the bytes still to write (the whole frame when the socket
    /// took none). Called on the fan-out's thread, never while the subscriber's task writes.
    fn try_send(&self, wire: &Wire) -> std::io::Result<Option<Bytes>>;
}

/// What a direct subscriber's task writes itself, in this order.
#[derive(Debug)]
pub enum Out {
    /// An event, framed by the task: from the store while catching up, or queued while the task wrote.
    Event(Wire),
    /// Bytes to write as they are: the rest of a frame the fan-out began, or a frame the task queued
    /// with [`Feed::queue`].
    Raw(Bytes),
}

enum Queued {
    Event(Arc<Live>),
    Raw(Bytes),
}

struct State {
    /// The fan-out may write to the socket: nothing is queued and the task is not writing.
    direct: bool,
    queue: VecDeque<Queued>,
    /// The [`Queued::Event`]s in `queue`: what the buffer bounds.
    events: usize,
    /// The `seq` of the last event whose frame was begun, or the starting cursor.
    last: u64,
    /// Events were dropped while the subscriber caught up: it reads them from the store again.
    missed: bool,
    /// A live event has gone out since the last catch-up: an overflow before that is the catch-up's
    /// slowness, not the subscriber's.
    live_ok: bool,
    /// Why the subscription ends, once decided: nothing is written for it after that but the queued
    /// [`Queued::Raw`] bytes and the task's final frame.
    end: Option<End>,
}

impl State {
    /// Ends the subscription, for the reason `why` gives with the cursor: the queued events are
    /// dropped, the bytes that complete a frame are kept.
    fn end(&mut self, why: impl FnOnce(u64) -> End) {
        self.direct = false;
        self.drop_events();
        let last_seq = self.last;
        self.end.get_or_insert_with(|| why(last_seq));
    }

    /// Drops the queued events, keeping the bytes that complete a frame.
    fn drop_events(&mut self) {
        self.queue.retain(|item| matches!(item, Queued::Raw(_)));
        self.events = 0;
    }
}

/// A direct subscriber as the bus and the fan-out see it.
pub(crate) struct Outlet {
    filter: Filter,
    socket: Arc<dyn Socket>,
    state: Mutex<State>,
    /// Wakes the task: something was queued, or the subscription ended.
    wake: Notify,
    /// Most events queued before the subscriber counts as too slow.
    buffer: usize,
    metrics: Arc<Metrics>,
}

impl Outlet {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Delivers a published event, on the fan-out's thread: written at once while direct, else queued.
    pub(crate) fn offer(&self, live: &Arc<Live>) {
        if !self.filter.matches(&live.message) {
            return;
        }
        let seq = live.event.seq;
        let mut state = self.lock();
        if state.end.is_some() || seq <= state.last {
            return;
        }
        if state.direct {
            match self.socket.try_send(&Wire { seq, bytes: live.wire() }) {
                Ok(None) => state.last = seq,
                Ok(Some(rest)) => {
                    state.last = seq;
                    state.direct = false;
                    state.queue.push_back(Queued::Raw(rest));
                    self.wake.notify_one();
                }
                Err(_) => {
                    state.end(|last_seq| End::Closed { last_seq });
                    self.wake.notify_one();
                }
            }
            return;
        }
        if state.events >= self.buffer {
            if state.live_ok {
                self.metrics.lagged_drops.fetch_add(1, Ordering::Relaxed);
                state.end(|last_seq| End::Lagged { last_seq });
            } else {
                state.missed = true;
                state.drop_events();
            }
        } else {
            state.queue.push_back(Queued::Event(live.clone()));
            state.events += 1;
        }
        self.wake.notify_one();
    }
}

/// The direct subscribers and the thread that writes to them.
#[derive(Default)]
pub(crate) struct Outlets {
    /// Copied on change: the thread takes the current list for each batch, so a subscriber coming or
    /// going never waits for a batch to be written.
    list: Arc<Mutex<Arc<Vec<Arc<Outlet>>>>>,
    /// The way to the fan-out thread, started with the first direct subscriber.
    thread: Option<std::sync::mpsc::Sender<Vec<Arc<Live>>>>,
}

impl Outlets {
    /// Whether any direct subscriber is connected: only then is a batch handed to the thread.
    pub(crate) fn any(&self) -> bool {
        self.thread.is_some() && !current(&self.list).is_empty()
    }

    /// Hands `events` to the fan-out thread.
    pub(crate) fn publish(&self, events: Vec<Arc<Live>>) {
        if let Some(thread) = &self.thread {
            // The thread lives as long as this sender.
            let _ = thread.send(events);
        }
    }

    pub(crate) fn add(&mut self, outlet: Arc<Outlet>) {
        if self.thread.is_none() {
            let (sender, batches) = std::sync::mpsc::channel::<Vec<Arc<Live>>>();
            let list = self.list.clone();
            let started = std::thread::Builder::new().name("clutch-fanout".into()).spawn(move || {
                for batch in batches {
                    let outlets = current(&list);
                    for live in &batch {
                        for outlet in outlets.iter() {
                            outlet.offer(live);
                        }
                    }
                }
            });
            match started {
                Ok(_) => self.thread = Some(sender),
                // Without the thread nothing is ever direct: the subscriber's task writes every event.
                Err(e) => tracing::error!(error = %e, "could not start the live stream's fan-out thread"),
            }
        }
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let mut changed = Vec::clone(&list);
        changed.push(outlet);
        *list = Arc::new(changed);
    }

    pub(crate) fn remove(&self, outlet: &Arc<Outlet>) {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let changed = list.iter().filter(|o| !Arc::ptr_eq(o, outlet)).cloned().collect();
        *list = Arc::new(changed);
    }
}

fn current(list: &Mutex<Arc<Vec<Arc<Outlet>>>>) -> Arc<Vec<Arc<Outlet>>> {
    list.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// A live, filtered view of the event log whose live part the fan-out writes to a [`Socket`] itself.
/// Made from a [`crate::Subscription`] with [`crate::Subscription::direct`]; the subscriber's task
/// writes what [`Feed::next`] gives it, and stops when it gives an [`End`].
pub struct Feed {
    outlet: Arc<Outlet>,
    bus: Arc<Bus>,
    backend: Arc<dyn Backend>,
    visible: Arc<AtomicU64>,
    closing: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    catching_up: bool,
    /// A page read from the store while catching up.
    page: VecDeque<Event>,
}

impl Feed {
    /// `sub` from its cursor, its live part written to `socket` by the fan-out.
    pub(crate) fn new(sub: &Subscription, socket: Arc<dyn Socket>) -> Feed {
        let after = sub.last;
        let state = State {
            direct: false,
            queue: VecDeque::new(),
            events: 0,
            last: after,
            missed: false,
            live_ok: false,
            end: None,
        };
        let outlet = Arc::new(Outlet {
            filter: sub.filter.clone(),
            socket,
            state: Mutex::new(state),
            wake: Notify::new(),
            buffer: sub.bus.buffer(),
            metrics: sub.metrics.clone(),
        });
        // Registered before the visible head is read: every event past that head reaches the outlet.
        sub.bus.add_outlet(outlet.clone());
        let catching_up = sub.visible.load(Ordering::Acquire) > after;
        sub.metrics.subscribers.fetch_add(1, Ordering::Relaxed);
        Feed {
            outlet,
            bus: sub.bus.clone(),
            backend: sub.backend.clone(),
            visible: sub.visible.clone(),
            closing: sub.closing.clone(),
            metrics: sub.metrics.clone(),
            catching_up,
            page: VecDeque::new(),
        }
    }

    /// The `seq` of the last event whose frame was begun, or the starting cursor.
    pub fn cursor(&self) -> u64 {
        self.outlet.lock().last
    }

    /// Queues `frame` (a control frame of the task's own) behind what is queued, taking the socket
    /// back from the fan-out: [`Feed::next`] gives it back to be written in its turn.
    pub fn queue(&self, frame: Bytes) {
        let mut state = self.outlet.lock();
        state.direct = false;
        state.queue.push_back(Queued::Raw(frame));
    }

    /// Ends the subscription from the task's side (its client left or closed): the fan-out writes
    /// nothing more, and [`Feed::next`] gives what completes the frames begun, then [`End::Closed`].
    pub fn stop(&self) {
        let mut state = self.outlet.lock();
        state.end(|last_seq| End::Closed { last_seq });
    }

    /// What the task writes next, waiting while the fan-out writes; or why the subscription ended,
    /// once the task has written every byte that completes a frame (so the task may write its final
    /// frame, and the fan-out writes nothing more).
    pub async fn next(&mut self) -> Result<Out, End> {
        loop {
            if let Some(event) = self.page.pop_front() {
                let mut state = self.outlet.lock();
                if state.end.is_some() || event.seq <= state.last {
                    continue;
                }
                state.last = event.seq;
                drop(state);
                return Ok(Out::Event(Wire { seq: event.seq, bytes: Bytes::from(event.to_wire()) }));
            }
            if *self.closing.borrow() {
                let mut state = self.outlet.lock();
                state.end(|last_seq| End::Shutdown { last_seq });
            }
            if self.catching_up && self.outlet.lock().end.is_none() {
                self.catch_up().await?;
                continue;
            }
            {
                let mut state = self.outlet.lock();
                while let Some(item) = state.queue.pop_front() {
                    match item {
                        Queued::Raw(bytes) => return Ok(Out::Raw(bytes)),
                        Queued::Event(live) => {
                            state.events -= 1;
                            if live.event.seq <= state.last {
                                continue;
                            }
                            state.last = live.event.seq;
                            state.live_ok = true;
                            return Ok(Out::Event(Wire { seq: live.event.seq, bytes: live.wire() }));
                        }
                    }
                }
                if let Some(end) = &state.end {
                    return Err(end.clone());
                }
                if state.missed {
                    state.missed = false;
                    self.catching_up = true;
                    continue;
                }
                // Nothing left to write: the socket is the fan-out's again.
                state.direct = true;
                state.live_ok = true;
            }
            tokio::select! {
                biased;
                // Closing, or the log is gone.
                _ = self.closing.changed() => {
                    let mut state = self.outlet.lock();
                    state.end(|last_seq| End::Shutdown { last_seq });
                }
                _ = self.outlet.wake.notified() => {}
            }
        }
    }

    /// Reads the next page after the cursor from the store; the catch-up ends with a short page
    /// unless live events were dropped meanwhile.
    async fn catch_up(&mut self) -> Result<(), End> {
        let page = match stored_page(self.backend.as_ref(), &self.outlet.filter, self.cursor(), &self.visible).await {
            Ok(page) => page,
            Err(end) => {
                self.outlet.lock().end(|_| end.clone());
                return Err(end);
            }
        };
        if page.len() < PAGE {
            let mut state = self.outlet.lock();
            if state.missed {
                state.missed = false;
            } else {
                self.catching_up = false;
                state.live_ok = false;
            }
        }
        self.page.extend(page);
        Ok(())
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        // The fan-out may still hold the outlet in the list it is writing from: it writes nothing more.
        self.stop();
        self.bus.remove_outlet(&self.outlet);
        self.metrics.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}
