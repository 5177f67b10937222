//! One rate limiter per provider, shared by every agent that calls it: requests paced evenly
//! (`requests_per_minute`: one every 60/rpm seconds, in the order they asked), tokens from a bucket
//! of a minute's worth (`tokens_per_minute`: each call takes its estimate, settled by its usage), and
//! a pause when the provider says so (`retry-after` on a 429, or a rate-limit header reporting
//! nothing left until its reset: `provider` reads them, knowing each wire format's headers, and
//! pauses the limiter).
//!
//! Requests are spaced a little under the declared rate (`MARGIN`): they reach the provider with some
//! jitter, and one that arrives a little early must still be within its limit.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How much longer than the declared rate's interval requests are spaced.
const MARGIN: f64 = 1.05;

pub(crate) struct Limiter {
    /// Between two requests' starts.
    interval: Option<Duration>,
    tokens_per_minute: Option<u32>,
    state: Mutex<State>,
}

struct State {
    /// The earliest start of the next request.
    next: Instant,
    /// Tokens left in the bucket (negative: owed), as of `refilled`.
    tokens: f64,
    refilled: Instant,
    paused_until: Option<Instant>,
    /// When the last request really started (it may have been woken later than its turn).
    last_start: Option<Instant>,
}

impl Limiter {
    pub(crate) fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>) -> Limiter {
        let now = Instant::now();
        Limiter {
            // 5% under the declared rate: requests reach the provider with some jitter, and one that
            // arrives a little early must still be within its limit.
            interval: requests_per_minute
                .filter(|r| *r > 0)
                .map(|r| Duration::from_secs_f64(60.0 / f64::from(r) * MARGIN)),
            tokens_per_minute: tokens_per_minute.filter(|t| *t > 0),
            state: Mutex::new(State {
                next: now,
                tokens: f64::from(tokens_per_minute.unwrap_or(0)),
                refilled: now,
                paused_until: None,
                last_start: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for this request's turn, taking `estimate` tokens.
    pub(crate) async fn acquire(&self, estimate: u64) {
        loop {
            let start = {
                let mut s = self.lock();
                let now = Instant::now();
                let mut start = now.max(s.paused_until.unwrap_or(now));
                if let Some(interval) = self.interval {
                    start = start.max(s.next);
                    s.next = start + interval;
                }
                if let Some(tpm) = self.tokens_per_minute {
                    let rate = f64::from(tpm) / 60.0;
                    let elapsed = now.saturating_duration_since(s.refilled).as_secs_f64();
                    s.tokens = (s.tokens + elapsed * rate).min(f64::from(tpm));
                    s.refilled = now;
                    // A call larger than the whole bucket waits for a full bucket, not forever.
                    s.tokens -= (estimate as f64).min(f64::from(tpm));
                    if s.tokens < 0.0 {
                        start = start.max(now + Duration::from_secs_f64(-s.tokens / rate));
                    }
                }
                start
            };
            tokio::time::sleep_until(start).await;
            // A pause that came while this request waited for its turn holds it too.
            let paused = self.lock().paused_until.is_some_and(|until| until > Instant::now());
            if !paused {
                self.keep_distance().await;
                return;
            }
        }
    }

    /// Holds a request until an interval after the last one really started. Turns are handed out
    /// ahead, an interval apart; a request woken late (a busy machine) would otherwise come closer
    /// than that to the next, whose turn was already set, and a provider counting requests over a
    /// sliding second would see one too many.
    async fn keep_distance(&self) {
        let Some(interval) = self.interval else { return };
        loop {
            let earliest = {
                let mut s = self.lock();
                let now = Instant::now();
                match s.last_start {
                    Some(last) if last + interval > now => last + interval,
                    _ => {
                        s.last_start = Some(now);
                        return;
                    }
                }
            };
            tokio::time::sleep_until(earliest).await;
        }
    }

    /// Settles a call's tokens: its estimate was taken, `used` is what it cost.
    pub(crate) fn settle(&self, estimate: u64, used: u64) {
        if let Some(tpm) = self.tokens_per_minute {
            let mut s = self.lock();
            s.tokens = (s.tokens + estimate as f64 - used as f64).min(f64::from(tpm));
        }
    }

    /// Holds every request for `how_long`.
    pub(crate) fn pause(&self, how_long: Duration) {
        let until = Instant::now() + how_long.min(Duration::from_secs(600));
        let mut s = self.lock();
        s.paused_until = Some(s.paused_until.map_or(until, |p| p.max(until)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_are_paced_evenly_and_pauses_hold_them() {
        let limiter = Limiter::new(Some(600), None);
        let began = tokio::time::Instant::now();
        for _ in 0..5 {
            limiter.acquire(1).await;
        }
        // One every 105 ms (100 ms and the margin): the fifth starts at 420 ms.
        assert_eq!(began.elapsed(), Duration::from_millis(420));
        limiter.pause(Duration::from_secs(2));
        limiter.acquire(1).await;
        assert!(began.elapsed() >= Duration::from_millis(2420), "{:?}", began.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_woken_late_keeps_the_next_an_interval_away() {
        let limiter = std::sync::Arc::new(Limiter::new(Some(600), None));
        let began = tokio::time::Instant::now();
        limiter.acquire(1).await;
        let late: Vec<_> = (0..2)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    limiter.acquire(1).await;
                    began.elapsed()
                })
            })
            .collect();
        // Both take their turns (105 and 210 ms), and neither is woken before 300 ms.
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_millis(300)).await;
        let mut starts = Vec::new();
        for task in late {
            starts.push(task.await.unwrap());
        }
        starts.sort();
        assert_eq!(starts[0], Duration::from_millis(300));
        assert_eq!(starts[1], Duration::from_millis(405), "an interval after the late one's real start");
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_come_from_a_bucket_of_a_minutes_worth() {
        let limiter = Limiter::new(None, Some(6000));
        let began = tokio::time::Instant::now();
        limiter.acquire(6000).await;
        assert_eq!(began.elapsed(), Duration::ZERO);
        // The bucket is empty: 100 tokens a second refill it.
        limiter.acquire(500).await;
        assert!(began.elapsed() >= Duration::from_secs(5), "{:?}", began.elapsed());
        // A call that used less than its estimate gives the rest back.
        limiter.settle(500, 0);
        let before = began.elapsed();
        limiter.acquire(500).await;
        assert_eq!(began.elapsed(), before);
    }
}
