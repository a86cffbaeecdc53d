//! What the bench reads about a local server process from `/proc`: CPU
//! time consumed and resident memory.

/// Clock ticks per second of `/proc/PID/stat` times (`USER_HZ`, 100 on
/// every Linux architecture the kernel exposes to user space).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ticks_in_stat(&stat)
}

/// utime + stime of a `stat` file's text, in seconds.
fn ticks_in_stat(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces: fields after it are
    // counted from the last ')'.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `after` starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
}

/// Resident memory of process `pid` in bytes, read from one
/// `/proc/PID/status`: in all (its own memory and the file pages it maps,
/// a server's database, together) and the anonymous part alone (its heap
/// and stacks, `RssAnon`).
pub fn resident_bytes(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |field: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((kib("VmRSS:")? * 1024, kib("RssAnon:").unwrap_or(0) * 1024))
}

/// This machine's CPU count.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// CPU seconds the calling thread has used so far.
pub fn this_thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    ticks_in_stat(&stat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_process() {
        let pid = std::process::id();
        // Burn a little CPU so the figure is not trivially zero forever.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_seconds(pid).is_some());
        let (all, anon) = resident_bytes(pid).unwrap();
        assert!(all > 1024 * 1024);
        assert!(anon > 0 && anon <= all);
        assert!(cpu_seconds(u32::MAX).is_none());
        assert!(this_thread_cpu_seconds().is_some());
    }
}
