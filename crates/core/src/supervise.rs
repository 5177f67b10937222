//! One restart loop for every background service of the daemon (the positions runner, the LLM
//! agents, the A2A conformance agent, the MCP tool servers): an attempt runs until it ends; after a
//! failure it starts again after a backoff; and stopping always wins — once the stop signal has
//! come, no attempt starts again, and the one under way is dropped (an attempt that owns a process
//! or a connection releases it on drop).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How one attempt of a service ended.
#[derive(Debug)]
pub enum Exit<E> {
    /// Its work is over: nothing starts again.
    Done,
    /// The daemon is stopping under it (its inbox ended as the log closes): not a failure, and
    /// nothing starts again.
    Stopping,
    /// It failed: it starts again after a backoff.
    Failed(E),
}

impl<E> Exit<E> {
    /// How an attempt that ended with `result` ended, when the daemon `closing` its log may be why:
    /// an error then is its inbox ending under it ([`Exit::Stopping`]), not a failure.
    pub fn after(result: Result<(), E>, closing: bool) -> Exit<E> {
        match result {
            Ok(()) => Exit::Done,
            Err(_) if closing => Exit::Stopping,
            Err(e) => Exit::Failed(e),
        }
    }
}

/// When a failed service starts again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    /// The delay after the first failure, doubled after each further one (with ±20% jitter).
    pub first: Duration,
    /// The longest delay. An attempt that lasted at least this long was healthy: the next failure
    /// counts as the first again.
    pub max: Duration,
}

impl Default for Restart {
    fn default() -> Restart {
        Restart { first: Duration::from_millis(200), max: Duration::from_secs(10) }
    }
}

impl Restart {
    /// The delay before the start that follows `failures` failures in a row.
    pub fn delay(&self, failures: u32, seed: u64) -> Duration {
        crate::backoff(self.first, self.max, failures, seed)
    }
}

/// Runs `attempt` again and again until one ends in [`Exit::Done`] or [`Exit::Stopping`], or until
/// `stop` resolves, whichever comes first; a failure is logged (under the caller's span, with
/// `service`) and followed by the [`Restart`] delay. `stop` is polled first at every step, so a stop
/// that has come is never lost to an attempt that ended at the same moment.
pub async fn run<E, F, Fut>(service: &str, restart: Restart, stop: impl Future<Output = ()>, mut attempt: F)
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Exit<E>>,
{
    tokio::pin!(stop);
    let seed = service.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let mut failures = 0;
    loop {
        let started = Instant::now();
        let exit = tokio::select! {
            biased;
            () = &mut stop => return,
            exit = attempt() => exit,
        };
        let error = match exit {
            Exit::Done | Exit::Stopping => return,
            Exit::Failed(error) => error,
        };
        failures = if started.elapsed() >= restart.max { 1 } else { failures + 1 };
        let delay = restart.delay(failures, seed);
        tracing::warn!(service, error = %error, failures, delay_ms = delay.as_millis() as u64, "stopped; starting again");
        tokio::select! {
            biased;
            () = &mut stop => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_failed_attempt_starts_again_after_the_backoff_and_done_ends_it() {
        let starts = Arc::new(AtomicU32::new(0));
        let n = starts.clone();
        let begun = Instant::now();
        run("test", Restart::default(), std::future::pending(), || {
            let n = n.clone();
            async move {
                match n.fetch_add(1, Ordering::SeqCst) {
                    0..=2 => Exit::Failed("broken"),
                    _ => Exit::Done,
                }
            }
        })
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 4);
        // 200 ms, 400 ms and 800 ms, each within ±20%.
        let waited = begun.elapsed();
        assert!(waited >= Duration::from_millis(1120) && waited <= Duration::from_millis(1680), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_ends_it_without_a_restart() {
        let starts = Arc::new(AtomicU32::new(0));
        let n = starts.clone();
        run("test", Restart::default(), std::future::pending(), || {
            let n = n.clone();
            async move {
                n.fetch_add(1, Ordering::SeqCst);
                Exit::<&str>::Stopping
            }
        })
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn stop_wins_over_an_attempt_and_over_a_backoff() {
        // An attempt that never ends is dropped when stop comes.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let dropped = Arc::new(AtomicU32::new(0));
        struct Guard(Arc<AtomicU32>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        let service = tokio::spawn(run(
            "test",
            Restart::default(),
            async {
                let _ = rx.await;
            },
            move || {
                let guard = Guard(d.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<Exit<&str>>().await
                }
            },
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        tx.send(()).unwrap();
        service.await.unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);

        // A stop that has come while the attempt fails: no start follows, however long the backoff.
        let starts = Arc::new(AtomicU32::new(0));
        let n = starts.clone();
        run("test", Restart { first: Duration::from_secs(60), max: Duration::from_secs(60) }, async {}, || {
            let n = n.clone();
            async move {
                n.fetch_add(1, Ordering::SeqCst);
                Exit::Failed("broken")
            }
        })
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 0, "stop is polled before the first start");
    }

    #[tokio::test(start_paused = true)]
    async fn a_healthy_attempt_resets_the_backoff() {
        let starts = Arc::new(AtomicU32::new(0));
        let n = starts.clone();
        let restart = Restart { first: Duration::from_millis(100), max: Duration::from_secs(1) };
        let begun = Instant::now();
        run("test", restart, std::future::pending(), || {
            let n = n.clone();
            async move {
                match n.fetch_add(1, Ordering::SeqCst) {
                    // Fails at once, then runs 2 s (healthy) and fails, then is done.
                    0 => Exit::Failed("broken"),
                    1 => {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        Exit::Failed("broken")
                    }
                    _ => Exit::Done,
                }
            }
        })
        .await;
        // 100 ms + 2 s + 100 ms (not 200 ms: the healthy run reset the count), each delay ±20%.
        let waited = begun.elapsed();
        assert!(waited >= Duration::from_millis(2160) && waited <= Duration::from_millis(2240), "{waited:?}");
    }

    #[test]
    fn an_error_while_the_log_closes_is_stopping_not_a_failure() {
        assert!(matches!(Exit::<&str>::after(Ok(()), false), Exit::Done));
        assert!(matches!(Exit::after(Err("inbox ended"), true), Exit::Stopping));
        assert!(matches!(Exit::after(Err("broken"), false), Exit::Failed("broken")));
    }
}
