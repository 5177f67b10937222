//! Push delivery: messages addressed to an agent whose card names `endpoints.clutch.url` are POSTed
//! there one by one in `seq` order, retried with exponential backoff and jitter until the endpoint
//! takes them. Each agent's position is saved in the store, so a restart resumes where delivery
//! stood (at-least-once: a few messages may come twice; agents deduplicate by `id`). Every POST
//! goes through the outbound guard (`clutch-outbound`): an endpoint aimed at a network the operator
//! did not allow is never reached, however its URL or a redirect spells it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use clutch_core::{End, Engine, Handle};
use clutch_store::{Event, Filter};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Timings of push delivery.
#[derive(Debug, Clone)]
pub struct Options {
    /// One POST may take this long.
    pub timeout: Duration,
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
            timeout: Duration::from_secs(10),
            backoff: Duration::from_millis(200),
            backoff_max: Duration::from_secs(30),
            save_every: Duration::from_secs(1),
            rescan: Duration::from_millis(500),
        }
    }
}

/// Runs push delivery until `shutdown` resolves: one worker per agent with a push endpoint.
pub async fn run(log: Handle, engine: Engine, options: Options, shutdown: impl std::future::Future<Output = ()>) {
    let client = clutch_outbound::Options { timeout: options.timeout, ..clutch_outbound::Options::default() };
    let http = match clutch_outbound::Client::new(engine.options().outbound.clone(), &client) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "push delivery cannot start its HTTP client");
            return;
        }
    };
    let (stop, stopped) = watch::channel(false);
    let mut workers: HashMap<(String, String), JoinHandle<()>> = HashMap::new();
    tokio::pin!(shutdown);
    loop {
        let targets = engine.push_targets();
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
            tracing::info!(agent_id = %agent, url = %shown(&url), "push delivery started");
            let worker = Worker {
                log: log.clone(),
                http: http.clone(),
                agent,
                url,
                options: options.clone(),
                refused: Default::default(),
            };
            workers.insert(key, tokio::spawn(worker.run(card_seq, stopped.clone())));
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

struct Worker {
    log: Handle,
    http: clutch_outbound::Client,
    agent: String,
    url: String,
    options: Options,
    /// The guard refused the target and that was logged.
    refused: std::sync::atomic::AtomicBool,
}

impl Worker {
    async fn run(self, card_seq: u64, mut stopped: watch::Receiver<bool>) {
        let name = format!("push:{}", self.agent);
        let mut pushed = match self.log.cursor(&name).await {
            Ok(saved) => saved.unwrap_or(card_seq),
            Err(e) => {
                tracing::error!(agent_id = %self.agent, error = %e, "cannot read the push position; not pushing");
                return;
            }
        };
        let mut saved = pushed;
        let mut saved_at = Instant::now();
        'subscribe: loop {
            let filter = Filter { to: Some(self.agent.clone()), ..Filter::default() };
            let mut inbox = match self.log.subscribe(filter, Some(pushed)).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(agent_id = %self.agent, error = %e, "push subscription failed; retrying");
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
                        if !self.deliver(&event, &mut stopped).await {
                            break 'subscribe;
                        }
                        pushed = event.seq;
                        if saved_at.elapsed() >= self.options.save_every {
                            self.save(&name, pushed, &mut saved).await;
                            saved_at = Instant::now();
                        }
                    }
                    Err(End::Lagged { last_seq } | End::Failed { last_seq, .. }) => {
                        pushed = last_seq;
                        continue 'subscribe;
                    }
                    Err(End::Shutdown { .. }) => break 'subscribe,
                }
            }
        }
        self.save(&name, pushed, &mut saved).await;
    }

    async fn save(&self, name: &str, pushed: u64, saved: &mut u64) {
        if pushed == *saved {
            return;
        }
        match self.log.set_cursor(name, pushed).await {
            Ok(()) => *saved = pushed,
            Err(e) => tracing::warn!(agent_id = %self.agent, error = %e, "cannot save the push position"),
        }
    }

    /// Posts one event until the endpoint takes it (2xx) or refuses it for good (a 4xx other than
    /// 408 and 429, logged and skipped). False when stopped first.
    async fn deliver(&self, event: &Event, stopped: &mut watch::Receiver<bool>) -> bool {
        let metrics = self.log.metrics();
        let mut failures: u32 = 0;
        loop {
            let why = match self.post(event).await {
                Ok(r) if r.status().is_success() => {
                    metrics.pushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return true;
                }
                Ok(r) if r.status().is_client_error() && !matches!(r.status().as_u16(), 408 | 429) => {
                    tracing::warn!(agent_id = %self.agent, seq = event.seq, status = r.status().as_u16(), "push endpoint refused the message; skipped");
                    return true;
                }
                Ok(r) => format!("HTTP {}", r.status().as_u16()),
                Err(Failure::Refused(why)) => {
                    // The operator's guard, not the endpoint: say so once, then retry quietly (a
                    // restart with another `outbound` config, or a new card, ends it).
                    if !self.refused.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        tracing::warn!(agent_id = %self.agent, url = %shown(&self.url), error = %why, "push target refused by the outbound guard; nothing is sent");
                    }
                    why
                }
                Err(Failure::Sent(why)) => why,
            };
            metrics.push_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            failures += 1;
            let delay = clutch_core::backoff(self.options.backoff, self.options.backoff_max, failures, event.seq);
            tracing::debug!(agent_id = %self.agent, seq = event.seq, failures, error = %why, delay_ms = delay.as_millis() as u64, "push failed; retrying");
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = stopped.changed() => return false,
            }
        }
    }

    /// One POST of `event` through the guarded client.
    async fn post(&self, event: &Event) -> Result<reqwest::Response, Failure> {
        let request = self.http.post(&self.url).map_err(|e| match e {
            clutch_outbound::Error::Refused(r) => Failure::Refused(r.to_string()),
            other => Failure::Sent(other.to_string()),
        })?;
        let sent = request
            .header("content-type", "application/json")
            .header("clutch-seq", event.seq.to_string())
            .body(event.to_wire())
            .send()
            .await;
        sent.map_err(|e| match clutch_outbound::refused(&e) {
            Some(r) => Failure::Refused(r.to_string()),
            None => Failure::Sent(e.without_url().to_string()),
        })
    }
}

/// Why a POST got no answer.
enum Failure {
    /// The outbound guard refused the target (or a redirect's).
    Refused(String),
    /// The network or the endpoint failed.
    Sent(String),
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
