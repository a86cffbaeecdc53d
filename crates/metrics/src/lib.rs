//! Counters, gauges and fixed-bucket histograms that cost one or two
//! relaxed atomic additions to record, and their Prometheus text
//! exposition (version 0.0.4).
//!
//! Why not a registry crate: the ones the SPEC names either take a lock
//! per observation (`prometheus-client`'s histogram) or keep every sample
//! until the next scrape (`metrics-exporter-prometheus`'s buckets), which
//! is unbounded memory when nobody scrapes. Here every metric is a fixed
//! set of atomics, created once and named at exposition time.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A count that only rises.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero.
    pub const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// A gauge at zero.
    pub const fn new() -> Self {
        Gauge(AtomicI64::new(0))
    }

    /// Adds `n` (negative to lower it).
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds of the latency buckets, in seconds: 50 µs to 10 s.
pub const SECONDS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 10.0,
];

/// Upper bounds of the size buckets (commands per commit and the like).
pub const SIZES: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0,
];

/// Most buckets a histogram has (the longer of [`SECONDS`] and [`SIZES`]).
const MAX_BUCKETS: usize = 16;

/// A histogram with fixed bucket bounds: each observation adds to one
/// bucket, the sum and the count. Buckets are kept non-cumulative and
/// summed when exposed.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    buckets: [AtomicU64; MAX_BUCKETS],
    /// Sum of the observations, in millionths of their unit.
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// A histogram over `bounds` (ascending; at most 16).
    pub const fn new(bounds: &'static [f64]) -> Self {
        assert!(bounds.len() <= MAX_BUCKETS);
        Histogram {
            bounds,
            buckets: [const { AtomicU64::new(0) }; MAX_BUCKETS],
            sum_micros: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation of `value` (seconds, or a size).
    pub fn observe(&self, value: f64) {
        let at = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        if let Some(bucket) = self.buckets.get(at) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        // Saturating conversion: a negative or huge value cannot wrap.
        let micros = (value * 1e6).clamp(0.0, u64::MAX as f64) as u64;
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a duration.
    pub fn observe_duration(&self, duration: std::time::Duration) {
        self.observe(duration.as_secs_f64());
    }

    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Writes metrics in the Prometheus text format. Each family's `# HELP`
/// and `# TYPE` lines come once, before its first sample.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
    last_family: String,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    fn family(&mut self, name: &str, kind: &str, help: &str) {
        if self.last_family != name {
            let _ = writeln!(self.text, "# HELP {name} {help}");
            let _ = writeln!(self.text, "# TYPE {name} {kind}");
            self.last_family = name.to_owned();
        }
    }

    /// A counter sample.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        self.family(name, "counter", help);
        let _ = writeln!(self.text, "{name}{} {value}", Labels(labels, None));
    }

    /// A gauge sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        self.family(name, "gauge", help);
        let _ = writeln!(self.text, "{name}{} {value}", Labels(labels, None));
    }

    /// A histogram: its cumulative buckets, sum and count.
    pub fn histogram(&mut self, name: &str, help: &str, labels: &[(&str, &str)], h: &Histogram) {
        self.family(name, "histogram", help);
        let mut cumulative = 0u64;
        for (bound, bucket) in h.bounds.iter().zip(&h.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = format!("{bound}");
            let _ = writeln!(
                self.text,
                "{name}_bucket{} {cumulative}",
                Labels(labels, Some(&le))
            );
        }
        let count = h.count.load(Ordering::Relaxed);
        let _ = writeln!(
            self.text,
            "{name}_bucket{} {count}",
            Labels(labels, Some("+Inf"))
        );
        let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(self.text, "{name}_sum{} {sum}", Labels(labels, None));
        let _ = writeln!(self.text, "{name}_count{} {count}", Labels(labels, None));
    }

    /// The page.
    pub fn finish(self) -> String {
        self.text
    }
}

/// `{a="x",b="y"}` (with `le` last when given), values escaped.
struct Labels<'a>(&'a [(&'a str, &'a str)], Option<&'a str>);

impl std::fmt::Display for Labels<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let le = self.1.map(|v| ("le", v));
        let all: Vec<(&str, &str)> = self.0.iter().copied().chain(le).collect();
        if all.is_empty() {
            return Ok(());
        }
        f.write_str("{")?;
        for (i, (name, value)) in all.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}=\"")?;
            for c in value.chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    '"' => f.write_str("\\\"")?,
                    '\n' => f.write_str("\\n")?,
                    c => f.write_char(c)?,
                }
            }
            f.write_str("\"")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_exposed_cumulatively_with_sum_and_count() {
        let h = Histogram::new(SECONDS);
        for v in [0.000_01, 0.000_3, 0.003, 20.0] {
            h.observe(v);
        }
        let mut page = Exposition::new();
        page.histogram("x_seconds", "help", &[("op", "SRCH")], &h);
        let text = page.finish();
        assert!(text.contains("# TYPE x_seconds histogram"), "{text}");
        assert!(
            text.contains("x_seconds_bucket{op=\"SRCH\",le=\"0.00005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{op=\"SRCH\",le=\"0.0005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{op=\"SRCH\",le=\"0.005\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{op=\"SRCH\",le=\"10\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{op=\"SRCH\",le=\"+Inf\"} 4"),
            "{text}"
        );
        assert!(text.contains("x_seconds_count{op=\"SRCH\"} 4"), "{text}");
        assert!(
            text.contains("x_seconds_sum{op=\"SRCH\"} 20.00331"),
            "{text}"
        );
    }

    #[test]
    fn families_are_announced_once_and_label_values_escaped() {
        let mut page = Exposition::new();
        page.counter("ops_total", "operations", &[("op", "a\"b")], 1);
        page.counter("ops_total", "operations", &[("op", "c\\d")], 2);
        page.gauge("open", "open connections", &[], 3.0);
        let text = page.finish();
        assert_eq!(
            text.matches("# TYPE ops_total counter").count(),
            1,
            "{text}"
        );
        assert!(text.contains("ops_total{op=\"a\\\"b\"} 1"), "{text}");
        assert!(text.contains("ops_total{op=\"c\\\\d\"} 2"), "{text}");
        assert!(text.contains("open 3\n"), "{text}");
    }
}
