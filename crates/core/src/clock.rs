//! The engine's sense of "now": the system clock in production, or a manual clock a test moves
//! forward by hand, so that heartbeat expiry and lease loss can be tested without waiting.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

/// Where the engine reads the time. Cheap to clone; clones of a manual clock share its time.
#[derive(Clone, Default)]
pub struct Clock {
    manual: Option<Arc<Manual>>,
}

struct Manual {
    ms: AtomicI64,
    moved: Notify,
}

impl Clock {
    /// The system clock (the default).
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that stands at `start` until [`Clock::advance`] moves it.
    pub fn manual(start: SystemTime) -> Clock {
        let ms = start.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        Clock { manual: Some(Arc::new(Manual { ms: AtomicI64::new(ms), moved: Notify::new() })) }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(m) => m.ms.load(Ordering::SeqCst),
            None => SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
        }
    }

    /// Moves a manual clock forward and wakes whoever waits on it; the system clock ignores this.
    pub fn advance(&self, by: Duration) {
        if let Some(m) = &self.manual {
            m.ms.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
            m.moved.notify_waiters();
        }
    }

    /// Resolves when a manual clock is moved; never for the system clock.
    pub(crate) async fn moved(&self) {
        match &self.manual {
            Some(m) => m.moved.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.manual {
            Some(_) => write!(f, "Clock::manual({} ms)", self.now_ms()),
            None => f.write_str("Clock::system"),
        }
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 time (a message's `ts`).
pub fn ts_ms(ts: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}
