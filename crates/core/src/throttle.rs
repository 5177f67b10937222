//! A token bucket that keeps a flood of bad input from flooding the event log or the daemon's own
//! log: a burst, then a steady rate; what comes beyond is counted, and the next one let through says
//! how many were left out.

use std::sync::Mutex;
use std::time::Instant;

pub struct Throttle {
    burst: f64,
    per_second: f64,
    /// Tokens left, when they were counted, and how many were refused since the last one let through.
    state: Mutex<(f64, Instant, u64)>,
}

impl Throttle {
    pub fn new(burst: u32, per_second: f64) -> Throttle {
        Throttle { burst: f64::from(burst), per_second, state: Mutex::new((f64::from(burst), Instant::now(), 0)) }
    }

    /// `Some(n)` when one more may go through (`n` were held back since the last one), else `None`.
    pub fn take(&self) -> Option<u64> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, at, held) = &mut *guard;
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.per_second).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Some(std::mem::take(held))
        } else {
            *held += 1;
            None
        }
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
}
