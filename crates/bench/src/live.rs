//! A run watched while it goes (the console): one [`Tick`] a second with
//! the throughput, the latency of that second, errors by result code and
//! the client's CPU, and a way to stop the run early.
//!
//! The run's monitor task writes the ticks; any number of watchers read
//! them without slowing the sessions: a tick is computed once a second
//! from counters and histograms the sessions keep anyway.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::run::Percentiles;
use crate::stats::{OpStats, code_name};

/// The most ticks a run keeps: a day of seconds. A longer run's first
/// seconds are dropped from the live view (the report keeps them all).
const MAX_TICKS: usize = 86_400;

/// One second of a running job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tick {
    /// Seconds since the run's sessions were all connected.
    pub seconds: f64,
    /// False during the warm-up.
    pub measuring: bool,
    /// Operations completed so far (warm-up included).
    pub completed: u64,
    /// Completed per second over the last interval.
    pub rate: f64,
    /// Answers that were not a success, so far.
    pub errors: u64,
    /// Measured answers by result code name, so far.
    pub codes: BTreeMap<String, u64>,
    /// Latency of the operations measured in the last interval.
    pub latency_us: Percentiles,
    /// The client process's CPU over the last interval, in cores.
    pub client_cpu: f64,
}

/// Shared between a run and those watching it.
#[derive(Debug, Default)]
pub struct Live {
    stop: AtomicBool,
    ticks: Mutex<Ticks>,
}

/// The ticks kept, and how many were dropped before them: a watcher
/// counts ticks from the run's first, so dropping old ones moves no one.
#[derive(Debug, Default)]
struct Ticks {
    kept: VecDeque<Tick>,
    dropped: usize,
}

impl Live {
    /// Asks the run to stop: sending stops, outstanding answers drain,
    /// and the result covers the time measured until then.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether [`Live::stop`] was called.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The ticks from the run's `from`-th on (counted from its first,
    /// those dropped included), and the count to ask from next time.
    pub fn ticks_from(&self, from: usize) -> (Vec<Tick>, usize) {
        let ticks = self.ticks.lock().unwrap_or_else(PoisonError::into_inner);
        let skip = from.saturating_sub(ticks.dropped);
        let new: Vec<Tick> = ticks.kept.iter().skip(skip).cloned().collect();
        (new, ticks.dropped + ticks.kept.len())
    }

    pub(crate) fn push(&self, tick: Tick) {
        let mut ticks = self.ticks.lock().unwrap_or_else(PoisonError::into_inner);
        if ticks.kept.len() >= MAX_TICKS {
            ticks.kept.pop_front();
            ticks.dropped += 1;
        }
        ticks.kept.push_back(tick);
    }
}

/// Latency percentiles of what `now` holds beyond `before` (the same
/// operations' histograms a second apart), and result codes so far.
pub(crate) fn interval(
    before: &[OpStats],
    now: &[OpStats],
) -> (Percentiles, BTreeMap<String, u64>) {
    let mut codes = BTreeMap::new();
    let mut merged: Option<Histogram<u64>> = None;
    for (i, op) in now.iter().enumerate() {
        for (code, n) in &op.codes {
            *codes.entry(code_name(*code)).or_insert(0) += n;
        }
        let mut delta = op.latency.clone();
        if let Some(old) = before.get(i) {
            // A histogram only grows, so subtracting its earlier self
            // cannot underflow.
            let _ = delta.subtract(&old.latency);
        }
        match &mut merged {
            Some(m) => {
                let _ = m.add(&delta);
            }
            None => merged = Some(delta),
        }
    }
    let latency = merged.map_or_else(Percentiles::default, |m| Percentiles::of(&m));
    (latency, codes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Sample, Stats};

    #[test]
    fn an_interval_holds_only_its_own_latencies() {
        let stats = Stats::new(1);
        let sample = |latency_ns| Sample {
            op: 0,
            code: 0,
            second: 0,
            latency_ns,
            entries: 0,
        };
        stats.absorb(&mut vec![sample(1_000_000); 100]);
        let before = stats.snapshot();
        stats.absorb(&mut vec![sample(5_000_000); 10]);
        let (latency, codes) = interval(&before, &stats.snapshot());
        assert!((latency.p50 - 5000.0).abs() < 100.0, "{latency:?}");
        assert_eq!(codes.get("success"), Some(&110));
        let (idle, _) = interval(&stats.snapshot(), &stats.snapshot());
        assert_eq!(idle.p50, 0.0);
    }

    fn tick(seconds: u32) -> Tick {
        Tick {
            seconds: f64::from(seconds),
            measuring: true,
            completed: 0,
            rate: 0.0,
            errors: 0,
            codes: BTreeMap::new(),
            latency_us: Percentiles::default(),
            client_cpu: 0.0,
        }
    }

    #[test]
    fn watchers_see_each_tick_once_and_can_stop_the_run() {
        let live = Live::default();
        assert!(!live.stopping());
        for s in 0..3 {
            live.push(tick(s));
        }
        let (new, next) = live.ticks_from(1);
        assert_eq!((new.len(), next), (2, 3));
        assert_eq!(live.ticks_from(next), (Vec::new(), 3));
        live.stop();
        assert!(live.stopping());
    }

    #[test]
    fn dropping_the_oldest_ticks_moves_no_watcher() {
        let live = Live::default();
        for s in 0..u32::try_from(MAX_TICKS).unwrap() + 2 {
            live.push(tick(s));
        }
        let (new, next) = live.ticks_from(MAX_TICKS);
        assert_eq!(next, MAX_TICKS + 2);
        let seconds: Vec<f64> = new.iter().map(|t| t.seconds).collect();
        assert_eq!(seconds, [MAX_TICKS as f64, MAX_TICKS as f64 + 1.0]);
        // A watcher from the start gets what is left: the oldest kept.
        assert_eq!(live.ticks_from(0).0.first().map(|t| t.seconds), Some(2.0));
    }
}
