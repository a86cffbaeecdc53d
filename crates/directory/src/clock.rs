//! Time as a parameter: operations read the clock only here, so tests of
//! timestamps (and later TTLs) never sleep and the store's commands stay
//! deterministic (the time is chosen before a command is built).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that always answers the same instant (tests).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

/// `YYYYMMDDHHMMSSZ` (Generalized Time, UTC, whole seconds) and the
/// microseconds, for timestamps and CSNs.
pub fn generalized_time(t: SystemTime) -> (String, u32) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    // Writes come many per second (a bulk load stamps a million entries
    // in a few): each thread formats a second once.
    let text = LAST_SECOND.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != secs || last.1.is_empty() {
            last.1 = meridian_model::time::Instant { secs, nanos: 0 }.canonical();
            last.0 = secs;
        }
        last.1.clone()
    });
    (text, since.subsec_micros())
}

thread_local! {
    /// The last second [`generalized_time`] formatted on this thread.
    static LAST_SECOND: std::cell::RefCell<(i64, String)> =
        const { std::cell::RefCell::new((0, String::new())) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_310_853) + Duration::from_micros(42);
        assert_eq!(generalized_time(t), ("20261122012733Z".to_string(), 42));
    }
}
