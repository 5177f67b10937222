//! A token bucket that keeps a flood of bad input from flooding the event log or the daemon's own
//! log: a burst, then a steady rate; what comes beyond is counted, and the next one let through says
//! how many were left out.
//!
//! [`Throttles`] keeps one bucket per sender (bounded in number, idle ones forgotten), so one sender's
//! flood leaves the others their share.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

pub struct Throttle {
    burst: f64,
    per_second: f64,
    state: Mutex<Bucket>,
}

/// Tokens left, when they were counted, and how many were refused since the last one let through.
#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
    held: u64,
}

impl Bucket {
    fn full(burst: f64) -> Bucket {
        Bucket { tokens: burst, at: Instant::now(), held: 0 }
    }

    fn take(&mut self, burst: f64, per_second: f64, now: Instant) -> Option<u64> {
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * per_second).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Some(std::mem::take(&mut self.held))
        } else {
            self.held += 1;
            None
        }
    }

    /// Whether it would be full by `now` with nothing held back: forgetting it changes nothing.
    fn idle(&self, burst: f64, per_second: f64, now: Instant) -> bool {
        self.held == 0 && self.tokens + now.duration_since(self.at).as_secs_f64() * per_second >= burst
    }
}

impl Throttle {
    pub fn new(burst: u32, per_second: f64) -> Throttle {
        Throttle { burst: f64::from(burst), per_second, state: Mutex::new(Bucket::full(f64::from(burst))) }
    }

    /// `Some(n)` when one more may go through (`n` were held back since the last one), else `None`.
    pub fn take(&self) -> Option<u64> {
        let mut bucket = self.state.lock().unwrap_or_else(|e| e.into_inner());
        bucket.take(self.burst, self.per_second, Instant::now())
    }
}

/// A [`Throttle`] per key (a sender), so that one key's flood does not use up the others' share. It
/// keeps at most `keys` buckets: idle ones are forgotten first; with every bucket busy, a new key is
/// held back (the busiest senders keep being counted).
pub struct Throttles {
    burst: f64,
    per_second: f64,
    keys: usize,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Throttles {
    pub fn new(burst: u32, per_second: f64, keys: usize) -> Throttles {
        Throttles { burst: f64::from(burst), per_second, keys, buckets: Mutex::new(HashMap::new()) }
    }

    /// As [`Throttle::take`], for `key`'s own bucket.
    pub fn take(&self, key: &str) -> Option<u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some(bucket) = buckets.get_mut(key) {
            return bucket.take(self.burst, self.per_second, now);
        }
        if buckets.len() >= self.keys {
            buckets.retain(|_, b| !b.idle(self.burst, self.per_second, now));
            if buckets.len() >= self.keys {
                return None;
            }
        }
        let mut bucket = Bucket::full(self.burst);
        let taken = bucket.take(self.burst, self.per_second, now);
        buckets.insert(key.to_owned(), bucket);
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_held_back_and_counted() {
        let t = Throttle::new(3, 0.0);
        assert_eq!((t.take(), t.take(), t.take()), (Some(0), Some(0), Some(0)));
        assert_eq!((t.take(), t.take()), (None, None));
        let refilled = Throttle::new(1, 1e9);
        assert_eq!(refilled.take(), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert_eq!(refilled.take(), Some(0), "refilled at its rate");
    }

    #[test]
    fn each_key_has_its_own_bucket_and_idle_ones_are_forgotten() {
        let t = Throttles::new(2, 0.0, 2);
        assert_eq!((t.take("a"), t.take("a"), t.take("a")), (Some(0), Some(0), None));
        assert_eq!(t.take("b"), Some(0), "a's flood leaves b its share");
        // Two busy keys: a third is held back rather than forgetting a busy one.
        assert_eq!(t.take("c"), None);
        let forgetful = Throttles::new(1, 1e9, 1);
        assert_eq!(forgetful.take("a"), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert_eq!(forgetful.take("b"), Some(0), "a was idle again, so b took its place");
    }
}
