//! Time as a parameter: operations read the clock only here, so tests of
//! timestamps (and later TTLs) never sleep and the store's commands stay
//! deterministic (the time is chosen before a command is built). Clippy
//! refuses a clock read anywhere else (`disallowed-methods` in
//! `clippy.toml`) unless an `allow` says it is only a network timeout
//! or a measurement.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, by the wall clock: what timestamps, CSNs and expiry times
    /// are made of.
    fn now(&self) -> SystemTime;

    /// Now, by a clock that never goes back: what a search's time limit
    /// and steps are measured with. Never written anywhere.
    fn monotonic(&self) -> Instant;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

// The one place the directory reads the system's clocks.
#[allow(clippy::disallowed_methods)]
impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn monotonic(&self) -> Instant {
        Instant::now()
    }
}

/// A clock whose wall time always answers the same instant (tests). Its
/// monotonic time is the system's: time limits still run out.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }

    fn monotonic(&self) -> Instant {
        SystemClock.monotonic()
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
