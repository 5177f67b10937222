//! Push delivery: the inbox of each agent whose card names an endpoint for a protocol ([`run`]), or
//! the messages an operator's webhook selects ([`run_to`]), sent there one message at a time in
//! `seq` order, retried with exponential backoff and jitter until the endpoint takes it, and each
//! target's position saved in the store, so a restart resumes where delivery stood (at-least-once: a
//! few messages may come twice; receivers deduplicate by `id`). How a message leaves is a
//! [`Transport`]'s business: HTTP POSTs (`outbound::push`), A2A messages to remote agents and A2A
//! clients' webhooks (`a2a`). Targets that come and go by other rules than agents' cards (an A2A
//! client's webhook for one task) get a worker each from [`spawn`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clutch_store::{Event, Filter};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{End, Engine, Handle};

/// Timings of push delivery.
#[derive(Debug, Clone)]
pub struct Options {
    /// First retry delay; doubles per failure up to `backoff_max`, with ±20% jitter.
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// How often a worker saves its position while delivering.
    pub save_every: Duration,
    /// How often the set of push agents is looked at again.
    pub rescan: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backoff: Duration::from_millis(200),
            backoff_max: Duration::from_secs(30),
            save_every: Duration::from_secs(1),
            rescan: Duration::from_millis(500),
        }
    }
}

/// Where messages go, and which.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    /// Who or what receives: the agent (`agent:ken`), or the webhook (`webhook:audit`); names the
    /// saved position (`push:<name>`) and the logs.
    pub name: String,
    /// The endpoint's URL: as the agent's card names it, or the operator's config.
    pub url: String,
    /// The messages it gets: an agent's inbox, or what a webhook selects.
    pub filter: Filter,
    /// Of those, only these types (empty: every type).
    pub types: Vec<clutch_proto::MessageType>,
    /// A key the transport signs each body with (HMAC-SHA256), if any. Never shown.
    pub secret: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("url", &shown(&self.url))
            .field("filter", &self.filter)
            .field("types", &self.types)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Target {
    /// An agent's inbox, to the endpoint its card names.
    pub fn agent(agent_id: &str, url: &str) -> Target {
        Target {
            name: agent_id.to_owned(),
            url: url.to_owned(),
            filter: Filter { to: Some(agent_id.to_owned()), ..Filter::default() },
            types: Vec::new(),
            secret: None,
        }
    }
}

/// What became of one attempt to deliver a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The endpoint took it.
    Taken,
    /// The endpoint took it, and the target wants nothing after it (its task has ended): the
    /// worker saves its position and stops.
    Done,
    /// The endpoint refused it for good (a 4xx): it is skipped, with why.
    Refused(String),
    /// It may go through later (the network, a 5xx, a 408 or 429): retried after a backoff.
    Failed(String),
    /// The operator's outbound guard refuses the target: retried quietly (a new card, or a restart
    /// with other settings, may change it), said once.
    Blocked(String),
}

/// How messages leave for one protocol's endpoints.
pub trait Transport: Send + Sync + 'static {
    /// The card's endpoint this transport serves (`clutch`, `a2a`).
    fn protocol(&self) -> &'static str;

    /// One attempt to deliver `event` to `target`.
    fn deliver<'a>(
        &'a self,
        target: &'a Target,
        event: &'a Event,
    ) -> Pin<Box<dyn Future<Output = Delivery> + Send + 'a>>;
}

/// Runs push delivery for `transport`'s protocol until `shutdown` resolves: one worker per agent
/// whose card names an endpoint for it.
pub async fn run(
    log: Handle,
    engine: Engine,
    transport: Arc<dyn Transport>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopped) = watch::channel(false);
    let mut workers: HashMap<(String, String), JoinHandle<bool>> = HashMap::new();
    tokio::pin!(shutdown);
    loop {
        let targets = engine.push_targets(transport.protocol());
        workers.retain(|key, worker| {
            let keep = targets.iter().any(|(a, u, _)| (a, u) == (&key.0, &key.1)) && !worker.is_finished();
            if !keep {
                worker.abort();
            }
            keep
        });
        for (agent, url, card_seq) in targets {
            let key = (agent.clone(), url.clone());
            if workers.contains_key(&key) {
                continue;
            }
            tracing::info!(agent_id = %agent, url = %shown(&url), protocol = transport.protocol(), "push delivery started");
            let target = Target::agent(&agent, &url);
            workers
                .insert(key, spawn(log.clone(), transport.clone(), target, card_seq, options.clone(), stopped.clone()));
        }
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(options.rescan) => {}
        }
    }
    let _ = stop.send(true);
    for (_, worker) in workers {
        let _ = worker.await;
    }
}

/// Runs push delivery to fixed `targets` (an operator's webhooks) until `shutdown` resolves: one
/// worker each. A target with no saved position starts after `first` (the log's head when the
/// daemon was built: what came before is not sent).
pub async fn run_to(
    log: Handle,
    transport: Arc<dyn Transport>,
    targets: Vec<Target>,
    first: u64,
    options: Options,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopped) = watch::channel(false);
    let mut workers = Vec::new();
    for target in targets {
        tracing::info!(target = %target.name, url = %shown(&target.url), "push delivery started");
        workers.push(spawn(log.clone(), transport.clone(), target, first, options.clone(), stopped.clone()));
    }
    shutdown.await;
    let _ = stop.send(true);
    for worker in workers {
        let _ = worker.await;
    }
}

/// Starts one worker delivering to `target` from its saved position (or, none saved, after `from`)
/// until `stopped` turns true or the transport answers [`Delivery::Done`]; its handle answers true
/// in the second case (the target wants nothing more).
pub fn spawn(
    log: Handle,
    transport: Arc<dyn Transport>,
    target: Target,
    from: u64,
    options: Options,
    stopped: watch::Receiver<bool>,
) -> JoinHandle<bool> {
    let worker = Worker { log, transport, target, options, blocked_said: false };
    tokio::spawn(worker.run(from, stopped))
}

/// The name a target's position is saved under.
pub fn cursor_name(target: &str) -> String {
    format!("push:{target}")
}

/// How delivering one event ended.
enum Sent {
    Next,
    Done,
    Stopped,
}

struct Worker {
    log: Handle,
    transport: Arc<dyn Transport>,
    target: Target,
    options: Options,
    /// The guard's refusal was logged.
    blocked_said: bool,
}

impl Worker {
    /// Delivers from the saved position, or (none saved) after `from`; true when the target wants
    /// nothing more.
    async fn run(mut self, from: u64, mut stopped: watch::Receiver<bool>) -> bool {
        let agent = self.target.name.clone();
        let name = cursor_name(&agent);
        let mut pushed = match self.log.cursor(&name).await {
            Ok(saved) => saved.unwrap_or(from),
            Err(e) => {
                tracing::error!(target = %agent, error = %e, "cannot read the push position; not pushing");
                return false;
            }
        };
        let mut saved = pushed;
        let mut saved_at = Instant::now();
        let mut done = false;
        'subscribe: loop {
            let mut inbox = match self.log.subscribe(self.target.filter.clone(), Some(pushed)).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(target = %agent, error = %e, "push subscription failed; retrying");
                    tokio::time::sleep(self.options.backoff_max.min(Duration::from_secs(1))).await;
                    continue;
                }
            };
            loop {
                let next = tokio::select! {
                    next = inbox.next() => next,
                    _ = stopped.changed() => break 'subscribe,
                };
                match next {
                    Ok(event) => {
                        if self.wanted(&event) {
                            match self.deliver(&event, &mut stopped).await {
                                Sent::Next => {}
                                Sent::Stopped => break 'subscribe,
                                Sent::Done => {
                                    pushed = event.seq;
                                    done = true;
                                    break 'subscribe;
                                }
                            }
                        }
                        pushed = event.seq;
                        if saved_at.elapsed() >= self.options.save_every {
                            self.save(&name, pushed, &mut saved).await;
                            saved_at = Instant::now();
                        }
                    }
                    Err(End::Lagged { last_seq } | End::Failed { last_seq, .. } | End::Closed { last_seq }) => {
                        pushed = last_seq;
                        continue 'subscribe;
                    }
                    Err(End::Shutdown { .. }) => break 'subscribe,
                }
            }
        }
        self.save(&name, pushed, &mut saved).await;
        done
    }

    async fn save(&self, name: &str, pushed: u64, saved: &mut u64) {
        if pushed == *saved {
            return;
        }
        match self.log.set_cursor(name, pushed).await {
            Ok(()) => *saved = pushed,
            Err(e) => tracing::warn!(target = %self.target.name, error = %e, "cannot save the push position"),
        }
    }

    /// Whether the target takes `event`'s type (its filter chose the rest).
    fn wanted(&self, event: &Event) -> bool {
        self.target.types.is_empty() || event.message().is_ok_and(|m| self.target.types.contains(&m.kind))
    }

    /// Sends one event until the endpoint takes it or refuses it for good (logged and skipped).
    async fn deliver(&mut self, event: &Event, stopped: &mut watch::Receiver<bool>) -> Sent {
        let metrics = self.log.metrics();
        let agent = self.target.name.clone();
        let mut failures: u32 = 0;
        loop {
            let why = match self.transport.deliver(&self.target, event).await {
                Delivery::Taken => {
                    metrics.pushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Sent::Next;
                }
                Delivery::Done => {
                    metrics.pushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Sent::Done;
                }
                Delivery::Refused(why) => {
                    tracing::warn!(target = %agent, seq = event.seq, reason = %why, "push endpoint refused the message; skipped");
                    return Sent::Next;
                }
                Delivery::Failed(why) => why,
                Delivery::Blocked(why) => {
                    if !self.blocked_said {
                        self.blocked_said = true;
                        tracing::warn!(target = %agent, url = %shown(&self.target.url), error = %why, "push target refused by the outbound guard; nothing is sent");
                    }
                    why
                }
            };
            metrics.push_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            failures += 1;
            let delay = crate::backoff(self.options.backoff, self.options.backoff_max, failures, event.seq);
            tracing::debug!(target = %agent, seq = event.seq, failures, error = %why, delay_ms = delay.as_millis() as u64, "push failed; retrying");
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = stopped.changed() => return Sent::Stopped,
            }
        }
    }
}

/// A URL as logs show it: without a password in its user part.
fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => "(not a URL)".to_owned(),
    }
}
