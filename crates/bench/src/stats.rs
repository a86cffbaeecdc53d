//! What a run measures: per operation a latency histogram (HDR), result
//! codes, entries received, and completions per second.
//!
//! Sessions record into a small local buffer and fold it into the shared
//! [`Stats`] under a lock when it fills: memory stays constant whatever
//! the session count (a histogram per session would cost megabytes at
//! seed 003's 5,000 connections) and the lock is taken once per few
//! hundred operations.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use hdrhistogram::Histogram;

/// Result codes the client itself produces.
pub mod client_code {
    /// Connecting failed (connection-per-operation mode).
    pub const CONNECT_FAILED: i64 = -1;
    /// No answer before the drain time ran out.
    pub const UNANSWERED: i64 = -2;
    /// The connection was closed with the request outstanding.
    pub const CONNECTION_LOST: i64 = -3;
    /// No answer within `load.timeout_secs` (the request was abandoned).
    pub const TIMEOUT: i64 = -4;
}

/// A code's name for reports.
pub fn code_name(code: i64) -> String {
    match code {
        client_code::CONNECT_FAILED => "connectFailed".into(),
        client_code::UNANSWERED => "unanswered".into(),
        client_code::CONNECTION_LOST => "connectionLost".into(),
        client_code::TIMEOUT => "timeout".into(),
        _ => u32::try_from(code)
            .ok()
            .and_then(|c| meridian_proto::ResultCode(c).name())
            .map_or_else(|| format!("code{code}"), str::to_owned),
    }
}

/// Highest latency the histograms hold (one hour, in nanoseconds).
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// One operation type's figures.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Latencies in nanoseconds (1 % precision).
    pub latency: Histogram<u64>,
    /// Result codes and how often each came back.
    pub codes: BTreeMap<i64, u64>,
    /// Entries and references received.
    pub entries: u64,
    /// Completions per second of the measured time.
    pub timeline: Vec<u64>,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats {
            // 2 significant figures: 1 % error, 36 KB a histogram.
            latency: latency_histogram(),
            codes: BTreeMap::new(),
            entries: 0,
            timeline: Vec::new(),
        }
    }

    /// Operations completed.
    pub fn count(&self) -> u64 {
        self.codes.values().sum()
    }

    /// Adds `other`'s figures.
    pub fn merge(&mut self, other: &OpStats) {
        // Both have the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        for (code, n) in &other.codes {
            *self.codes.entry(*code).or_default() += n;
        }
        self.entries += other.entries;
        if self.timeline.len() < other.timeline.len() {
            self.timeline.resize(other.timeline.len(), 0);
        }
        for (a, b) in self.timeline.iter_mut().zip(&other.timeline) {
            *a += b;
        }
    }
}

#[allow(clippy::expect_used)] // constant bounds that new_with_bounds accepts
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("1 ns .. 1 h at 2 figures is valid")
}

/// One completed operation, as a session buffers it.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Index of the operation.
    pub op: u16,
    /// Result code (or a [`client_code`]).
    pub code: i64,
    /// Second of the measured time it completed in.
    pub second: u32,
    /// Latency in nanoseconds.
    pub latency_ns: u64,
    /// Entries received.
    pub entries: u32,
}

/// The run's shared figures.
#[derive(Debug)]
pub struct Stats {
    ops: Mutex<Vec<OpStats>>,
}

impl Stats {
    /// Empty figures for `ops` operation types.
    pub fn new(ops: usize) -> Stats {
        Stats {
            ops: Mutex::new((0..ops).map(|_| OpStats::new()).collect()),
        }
    }

    /// Folds `samples` in and empties the buffer.
    pub fn absorb(&self, samples: &mut Vec<Sample>) {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        for s in samples.drain(..) {
            let Some(op) = ops.get_mut(usize::from(s.op)) else {
                continue;
            };
            op.latency.saturating_record(s.latency_ns.max(1));
            *op.codes.entry(s.code).or_default() += 1;
            op.entries += u64::from(s.entries);
            let second = s.second as usize;
            if second < 1 << 20 {
                if op.timeline.len() <= second {
                    op.timeline.resize(second + 1, 0);
                }
                if let Some(slot) = op.timeline.get_mut(second) {
                    *slot += 1;
                }
            }
        }
    }

    /// The figures so far.
    pub fn snapshot(&self) -> Vec<OpStats> {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_fold_into_histograms_codes_and_timeline() {
        let stats = Stats::new(2);
        let mut samples: Vec<Sample> = (0..1000)
            .map(|i| Sample {
                op: (i % 2) as u16,
                code: if i % 10 == 0 { 32 } else { 0 },
                second: (i / 400) as u32,
                latency_ns: 1000 + i as u64,
                entries: 1,
            })
            .collect();
        stats.absorb(&mut samples);
        assert!(samples.is_empty());
        let ops = stats.snapshot();
        assert_eq!(ops[0].count(), 500);
        assert_eq!(ops[0].codes[&32], 100);
        assert_eq!(ops[1].timeline, [200, 200, 100]);
        assert_eq!(ops[0].entries, 500);
        let p50 = ops[0].latency.value_at_quantile(0.5);
        assert!((1480..=1520).contains(&p50), "{p50}");
    }

    #[test]
    fn merging_adds_everything() {
        let stats = Stats::new(1);
        let sample = |second, latency_ns| Sample {
            op: 0,
            code: 0,
            second,
            latency_ns,
            entries: 2,
        };
        stats.absorb(&mut vec![sample(0, 10), sample(3, 1_000_000)]);
        let mut total = stats.snapshot().remove(0);
        let other = total.clone();
        total.merge(&other);
        assert_eq!(total.count(), 4);
        assert_eq!(total.entries, 8);
        assert_eq!(total.timeline, [2, 0, 0, 2]);
        assert_eq!(total.latency.len(), 4);
        assert!(total.latency.max() >= 990_000);
    }

    #[test]
    fn codes_have_names() {
        assert_eq!(code_name(0), "success");
        assert_eq!(code_name(32), "noSuchObject");
        assert_eq!(code_name(client_code::UNANSWERED), "unanswered");
        assert_eq!(code_name(4242), "code4242");
    }
}
