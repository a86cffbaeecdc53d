//! The process's own figures for `/metrics`, under the names every
//! Prometheus client library gives them (`process_*`), read from
//! `/proc/self` at each scrape.

use meridian_metrics::Exposition;

/// Appends the `process_*` families: CPU time, resident and virtual
/// memory, open and allowed descriptors, start time. A figure `/proc`
/// does not give (another OS) is left out.
pub(crate) fn expose(page: &mut Exposition, started: std::time::SystemTime) {
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the command's closing parenthesis, which may hold
        // spaces: utime and stime are the 14th and 15th of the line.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| fields.get(n).and_then(|f| f.parse::<u64>().ok());
        if let (Some(user), Some(system)) = (field(11), field(12)) {
            page.gauge(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds",
                &[],
                (user + system) as f64 / USER_HZ,
            );
        }
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        };
        if let Some(size) = kib("VmSize:") {
            page.gauge(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                &[],
                (size * 1024) as f64,
            );
        }
        if let Some(rss) = kib("VmRSS:") {
            page.gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                &[],
                (rss * 1024) as f64,
            );
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        page.gauge(
            "process_open_fds",
            "Number of open file descriptors",
            &[],
            fds.count() as f64,
        );
    }
    if let Some(max) = max_fds() {
        page.gauge(
            "process_max_fds",
            "Maximum number of open file descriptors",
            &[],
            max as f64,
        );
    }
    if let Ok(since) = started.duration_since(std::time::UNIX_EPOCH) {
        page.gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            &[],
            since.as_secs_f64(),
        );
    }
}

/// Clock ticks a second in `/proc/self/stat`'s CPU times: Linux's
/// USER_HZ, 100 on every architecture (proc(5), `sysconf(_SC_CLK_TCK)`).
const USER_HZ: f64 = 100.0;

/// The soft limit on open descriptors (`Max open files` in /proc).
fn max_fds() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
