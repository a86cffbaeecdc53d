//! What the network does to the bytes going one way between two places:
//! the state a control command changes and every pump of that way reads.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// The conditions of one direction of travel.
#[derive(Debug, Clone, PartialEq)]
pub struct Conditions {
    /// One-way delay (half the round-trip time of a symmetric path).
    pub delay: Duration,
    /// Each chunk's delay varies by up to this much either way (never
    /// below zero, never reordering bytes: TCP delivers in order).
    pub jitter: Duration,
    /// The bottleneck's rate in bytes per second; `None`: unlimited.
    pub bandwidth: Option<u64>,
    /// Nothing passes: bytes wait (as a real partition makes TCP
    /// retransmit) until the cut heals, and no new connection is made.
    pub cut: bool,
    /// Nothing is delivered before this instant (a packet-level stall:
    /// the bytes are held, then arrive together).
    pub stalled_until: Option<Instant>,
}

impl Conditions {
    /// A path with this one-way delay and nothing else.
    pub fn with_delay(delay: Duration) -> Conditions {
        Conditions {
            delay,
            jitter: Duration::ZERO,
            bandwidth: None,
            cut: false,
            stalled_until: None,
        }
    }
}

/// One direction between two places: its conditions, shared by every
/// connection's pump that carries bytes that way, and changed while they
/// run.
#[derive(Debug, Clone)]
pub struct Way {
    sender: watch::Sender<Conditions>,
}

impl Way {
    /// A way with these conditions.
    pub fn new(conditions: Conditions) -> Way {
        Way {
            sender: watch::Sender::new(conditions),
        }
    }

    /// What the pumps read.
    pub(crate) fn watch(&self) -> watch::Receiver<Conditions> {
        self.sender.subscribe()
    }

    /// The conditions now.
    pub fn conditions(&self) -> Conditions {
        self.sender.borrow().clone()
    }

    /// Changes the conditions; every pump sees it at its next chunk, and
    /// one waiting for a cut to heal wakes.
    pub fn change(&self, change: impl FnOnce(&mut Conditions)) {
        self.sender.send_modify(change);
    }

    /// Cuts the way (`true`) or heals it (`false`).
    pub fn set_cut(&self, cut: bool) {
        self.change(|c| c.cut = cut);
    }

    /// Holds every byte for `duration` from now.
    pub fn stall(&self, duration: Duration) {
        let until = Instant::now() + duration;
        self.change(|c| c.stalled_until = Some(c.stalled_until.map_or(until, |u| u.max(until))));
    }
}

/// A small, fast pseudo-random source for jitter (SplitMix64): jitter
/// needs spread, not secrecy, and a seed from the OS keeps two links
/// from moving in step.
#[derive(Debug)]
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn seeded() -> Jitter {
        let mut seed = [0u8; 8];
        // Without the OS's randomness the links still jitter, in step.
        let _ = getrandom::fill(&mut seed);
        Jitter(u64::from_le_bytes(seed))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `delay` moved by a uniform draw in `[-jitter, +jitter]`, not
    /// below zero.
    pub(crate) fn apply(&mut self, delay: Duration, jitter: Duration) -> Duration {
        let span = u64::try_from(jitter.as_micros()).unwrap_or(u64::MAX);
        if span == 0 {
            return delay;
        }
        let draw = self.next() % (2 * span + 1);
        let base = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros((base + draw).saturating_sub(span))
    }
}

/// How long `bytes` take through a bottleneck of `rate` bytes per second.
pub(crate) fn transmission(bytes: usize, rate: Option<u64>) -> Duration {
    match rate {
        Some(rate) if rate > 0 => {
            let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
            Duration::from_nanos(bytes.saturating_mul(1_000_000_000) / rate)
        }
        _ => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_span_and_above_zero() {
        let mut jitter = Jitter(7);
        let delay = Duration::from_millis(10);
        let span = Duration::from_millis(3);
        let mut low = false;
        let mut high = false;
        for _ in 0..10_000 {
            let d = jitter.apply(delay, span);
            assert!(d >= delay - span && d <= delay + span, "{d:?}");
            low |= d < delay - Duration::from_millis(2);
            high |= d > delay + Duration::from_millis(2);
        }
        assert!(low && high, "the draws cover the span");
        assert!(jitter.apply(Duration::from_millis(1), span) <= Duration::from_millis(4));
        assert_eq!(Jitter(1).apply(delay, Duration::ZERO), delay);
    }

    #[test]
    fn transmission_time_follows_the_rate() {
        assert_eq!(
            transmission(1_000_000, Some(1_000_000)),
            Duration::from_secs(1)
        );
        assert_eq!(transmission(500, Some(1_000)), Duration::from_millis(500));
        assert_eq!(transmission(500, None), Duration::ZERO);
        assert_eq!(transmission(500, Some(0)), Duration::ZERO);
    }
}
