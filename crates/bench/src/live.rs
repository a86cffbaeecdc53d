//! A run watched while it goes (the console): one [`Tick`] a second with
//! the throughput, the latency of that second, errors by result code and
//! the client's CPU, and a way to stop the run early.
//!
//! The run's monitor task writes the ticks; any number of watchers read
//! them without slowing the sessions: a tick is computed once a second
//! from counters and histograms the sessions keep anyway.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

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
#[derive(Debug)]
pub struct Live {
    stop: AtomicBool,
    ticks: Mutex<Vec<Tick>>,
    /// How many ticks there are (a watcher waits on its change).
    published: watch::Sender<usize>,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            stop: AtomicBool::new(false),
            ticks: Mutex::new(Vec::new()),
            published: watch::channel(0).0,
        }
    }
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

    /// Ticks from the `from`-th on.
    pub fn ticks_from(&self, from: usize) -> Vec<Tick> {
        let ticks = self.ticks.lock().unwrap_or_else(PoisonError::into_inner);
        ticks.get(from..).map(<[Tick]>::to_vec).unwrap_or_default()
    }

    /// A receiver that changes each time a tick is added.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.published.subscribe()
    }

    pub(crate) fn push(&self, tick: Tick) {
        let mut ticks = self.ticks.lock().unwrap_or_else(PoisonError::into_inner);
        if ticks.len() >= MAX_TICKS {
            ticks.remove(0);
        }
        ticks.push(tick);
        let n = ticks.len();
        drop(ticks);
        self.published.send_replace(n);
    }
}

/// Latency percentiles of what `now` holds beyond `before` (the same
/// operations' histograms a second apart), and result codes so far.
pub(crate) fn interval(
    before: &[OpStats],
    now: &[OpStats],
) -> (Percentiles, BTreeMap<String, u64>) {
    let mut codes = BTreeMap::new();
    let mut merged: Option<OpStats> = None;
    for (i, op) in now.iter().enumerate() {
        for (code, n) in &op.codes {
            *codes.entry(code_name(*code)).or_insert(0) += n;
        }
        let mut delta = op.clone();
        if let Some(old) = before.get(i) {
            // A histogram only grows, so subtracting its earlier self
            // cannot underflow.
            let _ = delta.latency.subtract(&old.latency);
        }
        match &mut merged {
            Some(m) => {
                let _ = m.latency.add(&delta.latency);
            }
            None => merged = Some(delta),
        }
    }
    let latency = merged.map_or_else(Percentiles::default, |m| Percentiles::of(&m.latency));
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

    #[test]
    fn watchers_see_each_tick_and_can_stop_the_run() {
        let live = Live::default();
        let mut seen = live.subscribe();
        assert!(!live.stopping());
        for s in 0..3 {
            live.push(Tick {
                seconds: f64::from(s),
                measuring: true,
                completed: 0,
                rate: 0.0,
                errors: 0,
                codes: BTreeMap::new(),
                latency_us: Percentiles::default(),
                client_cpu: 0.0,
            });
        }
        assert!(seen.has_changed().unwrap());
        assert_eq!(*seen.borrow_and_update(), 3);
        assert_eq!(live.ticks_from(1).len(), 2);
        assert!(live.ticks_from(9).is_empty());
        live.stop();
        assert!(live.stopping());
    }
}
