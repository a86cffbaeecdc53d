//! One run of a scenario: sessions started on a runtime of `threads`
//! workers, a progress line, and the figures gathered at the end.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::keys::Keys;
use crate::live::{self, Live, Tick};
use crate::ops::Operation;
use crate::procstat;
use crate::rng::Rng;
use crate::scenario::{Mode, Scenario};
use crate::session::{self, Clock, Shared};
use crate::stats::{OpStats, Stats, code_name};
use crate::tls::Tls;

/// How a run reports while it goes.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// No progress line.
    pub quiet: bool,
    /// Ticks for a watcher, and its way to stop the run.
    pub live: Option<Arc<Live>>,
}

/// The figures of one run (the JSON report holds a list of these).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// A label (the server's name in `bench compare`).
    pub label: String,
    /// Server URL.
    pub target: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    /// Sessions (connections).
    pub sessions: u32,
    /// Outstanding requests per session.
    pub depth: u32,
    /// Client threads.
    pub threads: usize,
    /// `closed`, `rate`, `rates` or `profile`.
    pub mode: String,
    /// Offered rate (open loop), operations per second.
    pub offered_rate: f64,
    /// Connection-per-operation mode.
    pub connection_per_operation: bool,
    /// Measured seconds.
    pub elapsed_secs: f64,
    /// All operations together.
    pub total: Summary,
    /// Per operation.
    pub operations: Vec<Summary>,
    /// Sessions that ended with an error.
    pub sessions_failed: u32,
    /// The first such error.
    pub first_error: Option<String>,
    /// Server CPU and memory (when `server_pid` is set).
    pub server: Option<ServerUsage>,
}

/// One operation's (or the total's) figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Operation name.
    pub name: String,
    /// Completed.
    pub count: u64,
    /// Completed per second.
    pub rate: f64,
    /// Answers that were not a success.
    pub errors: u64,
    /// Result codes by name.
    pub codes: std::collections::BTreeMap<String, u64>,
    /// Entries received.
    pub entries: u64,
    /// Latency percentiles, microseconds.
    pub latency_us: Percentiles,
    /// Completions in each second of the measured time.
    pub per_second: Vec<u64>,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct Percentiles {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th.
    pub p90: f64,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
}

impl Percentiles {
    /// The percentiles of a histogram of nanoseconds (all zero when it
    /// is empty).
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Percentiles {
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }

    /// p50, p90, p99, p99.9 and max in milliseconds: the columns of the
    /// text and HTML tables.
    pub fn table_millis(&self) -> [f64; 5] {
        [self.p50, self.p90, self.p99, self.p999, self.max].map(|us| us / 1000.0)
    }
}

/// What the server process used during the measured time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerUsage {
    /// Process ID.
    pub pid: u32,
    /// CPU seconds used while measuring.
    pub cpu_seconds: f64,
    /// CPU seconds per completed operation.
    pub cpu_seconds_per_operation: f64,
    /// Resident memory sampled each second, bytes: the server's own
    /// (anonymous) memory and the database pages it maps together.
    pub rss_bytes: Vec<u64>,
    /// The anonymous part of each sample: what grows when the server
    /// leaks, where the total also grows as the mapped database does.
    #[serde(default)]
    pub anon_bytes: Vec<u64>,
}

/// Runs `scenario` once.
pub fn run(scenario: &Scenario, label: &str, options: Options) -> anyhow::Result<RunResult> {
    let ops = scenario.compile().map_err(anyhow::Error::msg)?;
    let threads = match scenario.load.threads {
        0 => procstat::cpus(),
        n => n,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("starting the client runtime")?;
    runtime.block_on(run_async(scenario, ops, label, threads, options))
}

fn cumulative(weights: &[f64]) -> Vec<f64> {
    weights
        .iter()
        .scan(0.0, |sum, w| {
            *sum += w;
            Some(*sum)
        })
        .collect()
}

async fn run_async(
    scenario: &Scenario,
    ops: Vec<Operation>,
    label: &str,
    threads: usize,
    options: Options,
) -> anyhow::Result<RunResult> {
    let load = &scenario.load;
    let (address, tls, bind) = reach_target(scenario).await?;
    let mix = scenario.mix();
    let sessions = scenario.sessions();
    let seed = match scenario.keys.seed {
        0 => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        s => s,
    };
    let mut rng = Rng::new(seed);
    let keys = Keys::new(&scenario.keys, &mut rng);
    let (ready_tx, ready_rx) = mpsc::channel(1024);
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(load.warmup_secs);
    let clock = Clock {
        start,
        measure_from,
        stop_at: (load.duration_secs > 0.0)
            .then(|| measure_from + Duration::from_secs_f64(load.duration_secs)),
        drain: Duration::from_secs_f64(load.drain_secs),
    };
    let shared = Arc::new(Shared {
        cumulative: cumulative(&mix.weights),
        seqs: ops.iter().map(|_| AtomicU64::new(0)).collect(),
        stats: Stats::new(ops.len()),
        ops,
        keys,
        address,
        tls,
        bind,
        depth: load.depth as usize,
        queue_length: load.queue_length,
        connection_per_operation: load.connection_per_operation,
        session_rate: mix.rate / f64::from(sessions),
        foreground_sessions: sessions,
        background: mix.background.clone(),
        max_pdu: load.max_response_bytes,
        timeout: (load.timeout_secs > 0.0).then(|| Duration::from_secs_f64(load.timeout_secs)),
        seed: rng.next_u64(),
        run_id: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        clock: OnceLock::new(),
        ready: ready_tx,
        started: watch::channel(false).0,
        budget: (load.count > 0).then(|| AtomicU64::new(load.count)),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        last_completion_ns: AtomicU64::new(0),
    });
    let all_sessions = sessions + mix.background.len() as u32;
    let ran = run_sessions(
        &shared,
        all_sessions,
        clock,
        ready_rx,
        load.server_pid,
        options,
    )
    .await;
    if ran.sessions_failed == all_sessions {
        bail!(
            "every session failed; the first: {}",
            ran.first_error.unwrap_or_default()
        );
    }
    Ok(result_of(scenario, label, threads, &shared, ran, start))
}

/// The server, its TLS and the bind every session makes, checked with one
/// connection first, so an unreachable server or a refused bind is one
/// clear error rather than a failure per session.
async fn reach_target(
    scenario: &Scenario,
) -> anyhow::Result<(std::net::SocketAddr, Option<Tls>, Option<(String, String)>)> {
    let target = &scenario.target;
    let endpoint = crate::wire::resolve(&target.url)?;
    let tls = if endpoint.tls {
        Some(Tls::new(
            &endpoint.host,
            target.tls_ca_file.as_deref().map(std::path::Path::new),
            target.tls_insecure,
            target.tls_server_name.as_deref(),
        )?)
    } else {
        None
    };
    let bind = target
        .bind_dn
        .clone()
        .map(|dn| (dn, target.password.clone().unwrap_or_default()));
    session::connect_bound(
        endpoint.address,
        tls.as_ref(),
        bind.as_ref(),
        scenario.load.max_response_bytes,
    )
    .await?;
    Ok((endpoint.address, tls, bind))
}

/// What the sessions came to, and the server's resources meanwhile.
struct Ran {
    clock: Clock,
    sessions_failed: u32,
    first_error: Option<String>,
    rss_samples: Vec<u64>,
    anon_samples: Vec<u64>,
    /// Measured seconds when a watcher stopped the run early.
    stopped_after: Option<f64>,
    /// The server's CPU seconds when measuring began (or when the run
    /// did), and at the end.
    cpu: (Option<f64>, Option<f64>),
}

/// Starts every session, starts the clock once all are connected (or
/// failed to), watches the server while they run, and waits for them.
async fn run_sessions(
    shared: &Arc<Shared>,
    all_sessions: u32,
    clock: Clock,
    mut ready: mpsc::Receiver<()>,
    server_pid: Option<u32>,
    options: Options,
) -> Ran {
    let cpu_at_start = server_pid.and_then(procstat::cpu_seconds);
    let handles: Vec<_> = (0..all_sessions)
        .map(|i| tokio::spawn(session::run(Arc::clone(shared), i)))
        .collect();
    for _ in 0..all_sessions {
        if ready.recv().await.is_none() {
            break;
        }
    }
    let clock = *shared.clock.get_or_init(|| clock.restarted(Instant::now()));
    // send_replace: stores the value even while no session has subscribed yet.
    shared.started.send_replace(true);
    let monitor = tokio::spawn(monitor(Arc::clone(shared), server_pid, options));
    let mut sessions_failed = 0;
    let mut first_error = None;
    for handle in handles {
        let outcome = match handle.await {
            Ok(outcome) => outcome,
            Err(e) => Err(anyhow::anyhow!("session task failed: {e}")),
        };
        if let Err(e) = outcome {
            sessions_failed += 1;
            first_error.get_or_insert_with(|| format!("{e:#}"));
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    let seen = monitor.await.unwrap_or_default();
    let cpu_at_end = server_pid.and_then(procstat::cpu_seconds);
    Ran {
        clock,
        sessions_failed,
        first_error,
        rss_samples: seen.rss,
        anon_samples: seen.anon,
        stopped_after: seen.stopped_after,
        cpu: (seen.cpu_at_measure.or(cpu_at_start), cpu_at_end),
    }
}

/// The run's result from its statistics.
fn result_of(
    scenario: &Scenario,
    label: &str,
    threads: usize,
    shared: &Shared,
    ran: Ran,
    start: Instant,
) -> RunResult {
    let load = &scenario.load;
    let mix = scenario.mix();
    let ops_stats = shared.stats.snapshot();
    let elapsed_secs = if load.count > 0 || ran.clock.stop_at.is_none() {
        (shared.last_completion_ns.load(Ordering::Relaxed) as f64 / 1e9).max(1e-9)
    } else if let Some(stopped) = ran.stopped_after {
        // Stopped by a watcher: the seconds measured until then.
        stopped.clamp(1e-9, load.duration_secs)
    } else {
        load.duration_secs
    };
    let mut total = ops_stats
        .first()
        .cloned()
        .unwrap_or_else(|| Stats::new(1).snapshot().remove(0));
    for other in ops_stats.iter().skip(1) {
        total.merge(other);
    }
    let operations: Vec<Summary> = shared
        .ops
        .iter()
        .zip(&ops_stats)
        .map(|(op, stats)| summarise(&op.name, stats, elapsed_secs, |c| op.succeeded(c)))
        .collect();
    let errors = operations.iter().map(|o| o.errors).sum();
    let mut total = summarise("total", &total, elapsed_secs, |_| true);
    total.errors = errors;
    let server = load.server_pid.map(|pid| {
        let cpu_seconds = match ran.cpu {
            (Some(a), Some(b)) => b - a,
            _ => 0.0,
        };
        ServerUsage {
            pid,
            cpu_seconds,
            cpu_seconds_per_operation: cpu_seconds / total.count.max(1) as f64,
            rss_bytes: ran.rss_samples,
            anon_bytes: ran.anon_samples,
        }
    });
    RunResult {
        scenario: scenario.name.clone(),
        label: label.to_owned(),
        target: scenario.target.url.clone(),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_sub(start.elapsed().as_secs()),
        sessions: scenario.sessions(),
        depth: load.depth,
        threads,
        mode: match mix.mode {
            Mode::Closed => "closed",
            Mode::Rate => "rate",
            Mode::Rates => "rates",
            Mode::Profile => "profile",
        }
        .into(),
        offered_rate: mix.rate,
        connection_per_operation: load.connection_per_operation,
        elapsed_secs,
        total,
        operations,
        sessions_failed: ran.sessions_failed,
        first_error: ran.first_error,
        server,
    }
}

fn summarise(
    name: &str,
    stats: &OpStats,
    elapsed_secs: f64,
    succeeded: impl Fn(u32) -> bool,
) -> Summary {
    let count = stats.count();
    let errors = stats
        .codes
        .iter()
        .filter(|(code, _)| !u32::try_from(**code).is_ok_and(&succeeded))
        .map(|(_, n)| n)
        .sum();
    let latency_us = Percentiles::of(&stats.latency);
    Summary {
        name: name.to_owned(),
        count,
        rate: count as f64 / elapsed_secs,
        errors,
        codes: stats
            .codes
            .iter()
            .map(|(c, n)| (code_name(*c), *n))
            .collect(),
        entries: stats.entries,
        latency_us,
        // The measured seconds only: answers that arrive while the run
        // drains would draw a last, partial second as a collapse.
        per_second: stats
            .timeline
            .iter()
            .copied()
            .take(elapsed_secs.ceil() as usize)
            .collect(),
    }
}

/// What the monitor saw of the server, and when a watcher stopped the run.
#[derive(Default)]
struct Monitored {
    rss: Vec<u64>,
    anon: Vec<u64>,
    cpu_at_measure: Option<f64>,
    /// Seconds measured when a watcher stopped the run early.
    stopped_after: Option<f64>,
}

/// Prints the progress line each second, samples the server's memory,
/// and gives a watcher its tick (and stops the run when it asks).
async fn monitor(shared: Arc<Shared>, pid: Option<u32>, options: Options) -> Monitored {
    let terminal = std::io::stderr().is_terminal();
    let mut seen = Monitored::default();
    let client_cpu = || procstat::cpu_seconds(std::process::id()).unwrap_or(0.0);
    let mut last = (Instant::now(), 0u64);
    // What a watcher's ticks are differences from: none without one.
    let mut watched = options
        .live
        .as_ref()
        .map(|_| (shared.stats.snapshot(), client_cpu()));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let clock = shared.clock();
        if seen.cpu_at_measure.is_none() && now >= clock.measure_from {
            seen.cpu_at_measure = pid.and_then(procstat::cpu_seconds);
        }
        if let Some(pid) = pid
            && let Some((all, anon)) = procstat::resident_bytes(pid)
        {
            seen.rss.push(all);
            seen.anon.push(anon);
        }
        let done = shared.completed.load(Ordering::Relaxed);
        let interval = now.duration_since(last.0).as_secs_f64().max(1e-9);
        let rate = (done - last.1) as f64 / interval;
        let errors = shared.failed.load(Ordering::Relaxed);
        if let (Some(live), Some((last_stats, last_cpu))) = (&options.live, &mut watched) {
            let stats = shared.stats.snapshot();
            let (latency_us, codes) = live::interval(last_stats, &stats);
            *last_stats = stats;
            let cpu = client_cpu();
            live.push(Tick {
                seconds: now.duration_since(clock.start).as_secs_f64(),
                measuring: now >= clock.measure_from,
                completed: done,
                rate,
                errors,
                codes,
                latency_us,
                client_cpu: (cpu - *last_cpu) / interval,
            });
            *last_cpu = cpu;
            if live.stopping() && !shared.stop.swap(true, Ordering::Relaxed) {
                seen.stopped_after = Some(
                    now.saturating_duration_since(clock.measure_from)
                        .as_secs_f64(),
                );
            }
        }
        if !options.quiet {
            let phase = if now < clock.measure_from {
                " (warm-up)"
            } else {
                ""
            };
            let line = format!(
                "{:7.1}s  {:>12} ops  {:>10.0}/s  {errors} errors{phase}",
                now.duration_since(clock.start).as_secs_f64(),
                done,
                rate,
            );
            let mut err = std::io::stderr().lock();
            let _ = if terminal {
                write!(err, "\r{line}\x1b[K")
            } else {
                writeln!(err, "{line}")
            };
        }
        last = (now, done);
        if shared.stop.load(Ordering::Relaxed) {
            if terminal && !options.quiet {
                let _ = writeln!(std::io::stderr());
            }
            return seen;
        }
    }
}
