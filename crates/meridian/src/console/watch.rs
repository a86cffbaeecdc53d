//! The directory's nodes watched: each `--metrics-url` read every five
//! seconds, an hour of samples kept per node, and from the differences
//! between samples the rates, latency percentiles and resources the
//! directory page draws.
//!
//! The metrics endpoint is plain HTTP on a port operators keep private
//! (`metrics_listen`); the client here is the few lines it needs: one
//! GET, `Connection: close`, a bounded answer, a time-out.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How often each node is read.
pub(crate) const PERIOD: Duration = Duration::from_secs(5);
/// Samples kept per node: an hour.
const KEPT: usize = 720;
/// The largest metrics page read.
const MAX_PAGE_BYTES: u64 = 8 << 20;
/// A node must answer within this.
const TIMEOUT: Duration = Duration::from_secs(3);

/// What one reading of a node's metrics held, summed over labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sample {
    pub(crate) unix: f64,
    pub(crate) operations: f64,
    /// Operations answered with a result other than success, compare
    /// true or false, or a referral.
    pub(crate) errors: f64,
    /// Operation latency buckets: (upper bound in seconds, cumulative count).
    pub(crate) latency: Vec<(f64, f64)>,
    pub(crate) connections: f64,
    pub(crate) writes_refused: f64,
    pub(crate) disk_bytes: f64,
    pub(crate) resident_bytes: f64,
    pub(crate) cpu_seconds: f64,
}

/// One node's samples.
#[derive(Default)]
struct Node {
    samples: VecDeque<Sample>,
    last_error: Option<String>,
}

/// Every watched node: its metrics URL, and what was read there.
pub(crate) struct Watch {
    urls: Vec<String>,
    nodes: Vec<Mutex<Node>>,
}

/// A point of a node's charts: rates over the interval before it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Point {
    pub(crate) unix: f64,
    pub(crate) ops_per_sec: f64,
    pub(crate) errors_per_sec: f64,
    /// Upper bounds of the latency buckets the median and 99th
    /// percentile fell in, milliseconds (None: no operations).
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    pub(crate) connections: f64,
    pub(crate) writes_refused: f64,
    pub(crate) disk_bytes: f64,
    pub(crate) resident_bytes: f64,
    /// CPU used, in cores.
    pub(crate) cpu: f64,
}

/// A node's series and its last error, for the API.
#[derive(Debug, Serialize)]
pub(crate) struct Series {
    pub(crate) url: String,
    pub(crate) last_error: Option<String>,
    pub(crate) points: Vec<Point>,
}

impl Watch {
    pub(crate) fn new(urls: Vec<String>) -> anyhow::Result<Watch> {
        for url in &urls {
            split_http_url(url)?;
        }
        Ok(Watch {
            nodes: urls.iter().map(|_| Mutex::default()).collect(),
            urls,
        })
    }

    pub(crate) fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Each node's points over the last `seconds`.
    pub(crate) fn series(&self, seconds: f64) -> Vec<Series> {
        let now = now_unix();
        self.urls
            .iter()
            .zip(&self.nodes)
            .map(|(url, node)| {
                let node = node.lock().unwrap_or_else(PoisonError::into_inner);
                let samples: Vec<&Sample> = node
                    .samples
                    .iter()
                    .filter(|s| s.unix >= now - seconds - PERIOD.as_secs_f64())
                    .collect();
                Series {
                    url: url.clone(),
                    last_error: node.last_error.clone(),
                    points: samples
                        .windows(2)
                        .filter_map(|w| Some(point(w.first()?, w.get(1)?)))
                        .collect(),
                }
            })
            .collect()
    }

    fn record(&self, index: usize, reading: anyhow::Result<Sample>) {
        let Some(node) = self.nodes.get(index) else {
            return;
        };
        let mut node = node.lock().unwrap_or_else(PoisonError::into_inner);
        match reading {
            Ok(sample) => {
                if node.samples.len() >= KEPT {
                    node.samples.pop_front();
                }
                node.samples.push_back(sample);
                node.last_error = None;
            }
            Err(e) => node.last_error = Some(format!("{e:#}")),
        }
    }
}

/// Reads every node each [`PERIOD`], for as long as the console runs.
pub(crate) async fn sample_forever(watch: Arc<Watch>) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        for (i, url) in watch.urls().iter().enumerate() {
            let reading = async {
                let (status, page) = get(url, "/metrics").await?;
                if status != 200 {
                    bail!("{url}/metrics answered {status}");
                }
                Ok(parse(&page, now_unix()))
            }
            .await;
            watch.record(i, reading);
        }
    }
}

#[allow(clippy::disallowed_methods)] // when a sample was read, for charts
fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The rates between two samples. A counter that went down (the node
/// restarted) counts from zero.
fn point(before: &Sample, after: &Sample) -> Point {
    let seconds = (after.unix - before.unix).max(1e-3);
    let delta = |a: f64, b: f64| if b >= a { b - a } else { b };
    let buckets: Vec<(f64, f64)> = after
        .latency
        .iter()
        .map(|(le, n)| {
            let old = before
                .latency
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, n)| *n);
            (*le, delta(old, *n))
        })
        .collect();
    Point {
        unix: after.unix,
        ops_per_sec: delta(before.operations, after.operations) / seconds,
        errors_per_sec: delta(before.errors, after.errors) / seconds,
        p50_ms: quantile(&buckets, 0.5).map(|s| s * 1000.0),
        p99_ms: quantile(&buckets, 0.99).map(|s| s * 1000.0),
        connections: after.connections,
        writes_refused: after.writes_refused,
        disk_bytes: after.disk_bytes,
        resident_bytes: after.resident_bytes,
        cpu: delta(before.cpu_seconds, after.cpu_seconds) / seconds,
    }
}

/// The upper bound of the bucket quantile `q` falls in, from cumulative
/// buckets sorted by bound (the `+Inf` bucket last).
fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let finite_max = buckets
        .iter()
        .filter(|(le, _)| le.is_finite())
        .map(|(le, _)| *le)
        .fold(0.0, f64::max);
    buckets
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map(|(le, _)| if le.is_finite() { *le } else { finite_max })
}

/// The sums the charts need from a Prometheus text page.
pub(crate) fn parse(page: &str, unix: f64) -> Sample {
    let mut sample = Sample {
        unix,
        ..Sample::default()
    };
    let mut latency: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for line in page.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let label = |key: &str| {
            let marker = format!("{key}=\"");
            let start = labels.find(&marker)? + marker.len();
            let rest = labels.get(start..)?;
            rest.get(..rest.find('"')?)
        };
        match name {
            "meridian_operations_total" => {
                sample.operations += value;
                if !matches!(
                    label("result"),
                    Some("0" | "5" | "6" | "10" | "14" | "none")
                ) {
                    sample.errors += value;
                }
            }
            "meridian_operation_duration_seconds_bucket" => {
                let le = match label("le") {
                    Some("+Inf") => f64::INFINITY,
                    Some(le) => le.parse().unwrap_or(f64::INFINITY),
                    None => continue,
                };
                // Ordered by bound: an f64's bits order as the f64 for
                // the non-negative bounds buckets have.
                latency.entry(le.to_bits()).or_insert((le, 0.0)).1 += value;
            }
            "meridian_connections_open" => sample.connections += value,
            "meridian_writes_refused" => sample.writes_refused += value,
            "meridian_database_file_bytes" | "meridian_journal_bytes" => {
                sample.disk_bytes += value;
            }
            "process_resident_memory_bytes" => sample.resident_bytes += value,
            "process_cpu_seconds_total" => sample.cpu_seconds += value,
            _ => {}
        }
    }
    sample.latency = latency.into_values().collect();
    sample
}

/// `http://HOST:PORT` (a path after it is ignored) as (host:port, host).
fn split_http_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url:?}: a metrics URL is http://HOST:PORT"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        bail!("{url:?}: no host");
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let address = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Ok((address, host.to_owned()))
}

/// One GET of `path` at `url`: the status code and the body.
pub(crate) async fn get(url: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let (address, host) = split_http_url(url)?;
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        (&mut stream)
            .take(MAX_PAGE_BYTES)
            .read_to_end(&mut answer)
            .await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("{url}: no answer within {TIMEOUT:?}"))??;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("{url}{path}: not an HTTP answer"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{url}{path}: no status"))?;
    Ok((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP x\n\
        meridian_operations_total{op=\"search\",result=\"0\"} 90\n\
        meridian_operations_total{op=\"bind\",result=\"49\"} 10\n\
        meridian_operations_total{op=\"compare\",result=\"6\"} 5\n\
        meridian_operation_duration_seconds_bucket{op=\"search\",le=\"0.001\"} 80\n\
        meridian_operation_duration_seconds_bucket{op=\"search\",le=\"0.01\"} 99\n\
        meridian_operation_duration_seconds_bucket{op=\"search\",le=\"+Inf\"} 100\n\
        meridian_operation_duration_seconds_bucket{op=\"bind\",le=\"0.001\"} 5\n\
        meridian_operation_duration_seconds_bucket{op=\"bind\",le=\"0.01\"} 5\n\
        meridian_operation_duration_seconds_bucket{op=\"bind\",le=\"+Inf\"} 5\n\
        meridian_connections_open 7\n\
        meridian_database_file_bytes{suffix=\"dc=x\"} 1000\n\
        meridian_journal_bytes{suffix=\"dc=x\"} 24\n\
        process_cpu_seconds_total 2.5\n";

    #[test]
    fn a_page_is_summed_over_its_labels() {
        let s = parse(PAGE, 10.0);
        assert_eq!(s.operations, 105.0);
        assert_eq!(
            s.errors, 10.0,
            "invalidCredentials counts, compareTrue does not"
        );
        assert_eq!(
            s.latency,
            [(0.001, 85.0), (0.01, 104.0), (f64::INFINITY, 105.0)]
        );
        assert_eq!(
            (s.connections, s.disk_bytes, s.cpu_seconds),
            (7.0, 1024.0, 2.5)
        );
    }

    #[test]
    fn rates_come_from_differences_and_survive_a_restart() {
        let before = parse(PAGE, 10.0);
        let mut after = before.clone();
        after.unix = 15.0;
        after.operations += 50.0;
        after.cpu_seconds += 1.0;
        after.latency = vec![(0.001, 85.0), (0.01, 134.0), (f64::INFINITY, 155.0)];
        let p = point(&before, &after);
        assert_eq!(p.ops_per_sec, 10.0);
        assert_eq!(p.cpu, 0.2);
        assert_eq!(p.p50_ms, Some(10.0));
        assert_eq!(
            p.p99_ms,
            Some(10.0),
            "+Inf reads as the largest finite bound"
        );
        let restarted = Sample {
            unix: 20.0,
            operations: 5.0,
            ..Sample::default()
        };
        assert_eq!(point(&after, &restarted).ops_per_sec, 1.0);
        assert_eq!(point(&after, &restarted).p50_ms, None);
    }

    #[test]
    fn metrics_urls_are_plain_http() {
        assert_eq!(
            split_http_url("http://127.0.0.1:9100/metrics").unwrap(),
            ("127.0.0.1:9100".into(), "127.0.0.1".into())
        );
        assert!(split_http_url("https://x").is_err());
        assert!(split_http_url("http://").is_err());
    }
}
