//! The log: `tracing` lines, filtered by `log.level` (reloadable), written
//! to standard error or a file rotated by size (`log.file`), and never in
//! the way of an operation. A line is formatted where it is logged (the
//! access log's by `meridian_server::access_log`, the others by
//! `tracing`'s formatter) and appended to a bounded queue
//! (`log.queue_lines`) that a writer thread empties; when the queue is
//! full the line is dropped and counted, and the writer says how many
//! were dropped once it catches up. An operation therefore never waits
//! for a slow terminal, pipe or disk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

/// What changes the log filter while the server runs (`None`: RUST_LOG
/// set it, and it wins over the file).
pub(crate) type LogFilter = Option<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
>;

/// `log.level` as a filter.
pub(crate) fn filter(level: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    // openraft narrates every vote and heartbeat at info: its warnings
    // and errors are what an operator needs, unless the level names it.
    let mut text = if level.contains("openraft") {
        level.to_owned()
    } else {
        format!("{level},openraft=warn")
    };
    // The access log is switched by `log.access`, not by the level: a
    // level of "warn" used to silence it too.
    if !level.contains(meridian_server::access_log::TARGET) {
        text.push_str(",meridian::access=info");
    }
    tracing_subscriber::EnvFilter::try_new(text)
        .with_context(|| format!("log.level: {level:?} is not a valid filter"))
}

/// Installs the log for `serve`.
pub(crate) fn init(config: &meridian_config::LogConfig) -> anyhow::Result<LogFilter> {
    use tracing_subscriber::prelude::*;
    let from_env = std::env::var("RUST_LOG").ok().filter(|e| !e.is_empty());
    let level_filter = match &from_env {
        Some(env) => tracing_subscriber::EnvFilter::try_new(env)
            .with_context(|| format!("RUST_LOG: {env:?} is not a valid filter"))?,
        None => filter(&config.level)?,
    };
    let (sink, ansi): (Box<dyn Write + Send>, bool) = if config.file.is_empty() {
        (
            Box::new(std::io::stderr()),
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        )
    } else {
        let file = Rotating::open(
            PathBuf::from(&config.file),
            config.file_max_bytes,
            config.file_keep,
        )?;
        (Box::new(file), false)
    };
    let writer = NonBlocking::start(sink, config.queue_lines);
    meridian_server::access_log::install(Box::new(writer.clone()), ansi);
    let (level_filter, handle) = tracing_subscriber::reload::Layer::new(level_filter);
    tracing_subscriber::registry()
        .with(level_filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(ansi),
        )
        .init();
    Ok(from_env.is_none().then_some(handle))
}

/// The lines waiting for the writer thread, shared by every thread that
/// logs: each line is appended under a lock held for its copy, and the
/// writer swaps the whole buffer out every few milliseconds.
struct Queue {
    pending: std::sync::Mutex<Pending>,
    /// `log.queue_lines`: past it a new line is dropped.
    max_lines: usize,
    /// [`BYTES_PER_LINE`] times `max_lines`: past it a new line is dropped.
    max_bytes: usize,
    /// Lines dropped since the writer last said how many.
    dropped: AtomicU64,
    /// Set by [`finish`]: the writer writes what is queued and stops.
    finishing: std::sync::atomic::AtomicBool,
}

/// Whole lines, in the order they were logged.
struct Pending {
    bytes: Vec<u8>,
    lines: usize,
}

/// The room a line may take in the queue, on average: twice a long
/// access line, so `log.queue_lines` bounds the queue's memory too
/// (32 MiB by default).
const BYTES_PER_LINE: usize = 512;

/// What a line of the queue is handed to: a `tracing` line, or an access
/// line (`meridian_server::access_log`); one of these per line written.
#[derive(Clone)]
struct NonBlocking {
    queue: Arc<Queue>,
}

/// The writer thread of the installed log and its queue, for [`finish`].
static WRITER: std::sync::Mutex<Option<(std::thread::JoinHandle<()>, Arc<Queue>)>> =
    std::sync::Mutex::new(None);

/// Writes out what the log still holds (before the process exits).
pub(crate) fn finish() {
    let writer = WRITER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some((writer, queue)) = writer {
        queue.finishing.store(true, Ordering::Release);
        let _ = writer.join();
    }
}

impl NonBlocking {
    fn start(sink: Box<dyn Write + Send>, max_lines: usize) -> NonBlocking {
        let queue = Arc::new(Queue::new(max_lines));
        let written = Arc::clone(&queue);
        // If the thread cannot start, lines are dropped (counted) rather
        // than the server not starting for want of a log.
        let writer = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_lines(sink, &written));
        if let Ok(writer) = writer {
            *WRITER
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((writer, Arc::clone(&queue)));
        }
        NonBlocking { queue }
    }
}

impl Queue {
    fn new(max_lines: usize) -> Queue {
        Queue {
            pending: std::sync::Mutex::new(Pending {
                bytes: Vec::new(),
                lines: 0,
            }),
            max_lines,
            max_bytes: max_lines.saturating_mul(BYTES_PER_LINE),
            dropped: AtomicU64::new(0),
            finishing: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Queues one whole line, or drops and counts it when the queue is
    /// full: never waits for the writer.
    fn push(&self, line: &[u8]) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pending.lines >= self.max_lines || pending.bytes.len() + line.len() > self.max_bytes {
            drop(pending);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        pending.bytes.extend_from_slice(line);
        pending.lines += 1;
    }

    /// Exchanges the waiting lines for `spare` (empty): both buffers keep
    /// their room, so a steady load allocates nothing.
    fn take(&self, spare: &mut Vec<u8>) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::swap(&mut pending.bytes, spare);
        pending.lines = 0;
    }
}

/// How often the writer thread takes what the queue holds. It never
/// sleeps on the queue: a thread asleep there must be woken by each line
/// (a futex wake-up per operation: a fifth of the server's time under a
/// pipelined load, perf), where one that looks every few milliseconds is
/// woken by no one.
const WRITE_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Lines are written in pieces of about this many bytes, each ending at
/// a line's end: a few system calls per wake-up of the writer, not one
/// per line, and a log file rotated close to its size.
const WRITE_BYTES: usize = 64 * 1024;

/// A buffer the writer took that was larger than this (a burst) is let
/// go rather than kept for the next.
const KEEP_BYTES: usize = 4 << 20;

/// The writer thread: every few milliseconds, the lines waiting, then a
/// flush and a note of the lines dropped since the last one; until
/// [`finish`] and nothing more to write.
fn write_lines(mut sink: Box<dyn Write + Send>, queue: &Queue) {
    let mut taken = Vec::new();
    loop {
        queue.take(&mut taken);
        let wrote = !taken.is_empty();
        for piece in line_pieces(&taken, WRITE_BYTES) {
            let _ = sink.write_all(piece);
        }
        taken.clear();
        if taken.capacity() > KEEP_BYTES {
            taken = Vec::new();
        }
        let lost = queue.dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let _ = writeln!(
                sink,
                "meridian: {lost} log lines dropped: the log was written slower than it was produced (log.queue_lines)"
            );
        }
        if wrote || lost > 0 {
            let _ = sink.flush();
        }
        if queue.finishing.load(Ordering::Acquire) && !wrote {
            return;
        }
        std::thread::sleep(WRITE_EVERY);
    }
}

/// `bytes` (whole lines) in pieces of at most `size` bytes that end at a
/// line's end; a line longer than `size` is a piece of its own.
fn line_pieces(bytes: &[u8], size: usize) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = if rest.len() <= size {
            rest.len()
        } else {
            let last_end_within = rest
                .get(..size)
                .and_then(|head| head.iter().rposition(|&b| b == b'\n'));
            let first_end = || rest.iter().position(|&b| b == b'\n');
            last_end_within
                .or_else(first_end)
                .map_or(rest.len(), |end| end + 1)
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

impl Write for NonBlocking {
    /// `tracing`'s formatter writes each line whole, in one call.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.queue.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl meridian_server::access_log::LineSink for NonBlocking {
    fn line(&self, line: &[u8]) {
        self.queue.push(line);
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for NonBlocking {
    type Writer = NonBlocking;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Set by SIGHUP ([`reopen`]): the log file is opened again by its name
/// before the next write.
static REOPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Has the log file opened again by its name before the next write, as
/// logrotate's `postrotate` SIGHUP asks.
pub(crate) fn reopen() {
    REOPEN.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// A log file renamed to `NAME.1` (the older ones shifted up to
/// `NAME.keep`, the oldest removed) when it would pass `max_bytes`.
/// Moved or removed by someone else (logrotate), it is opened again by
/// its name at the next write: the moved file stops growing, and this
/// rotation's numbering starts over from the new file.
struct Rotating {
    path: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    keep: u32,
}

impl Rotating {
    fn open(path: PathBuf, max_bytes: u64, keep: u32) -> anyhow::Result<Rotating> {
        let file = open_append(&path)?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Rotating {
            path,
            file,
            written,
            max_bytes: max_bytes.max(4096),
            keep,
        })
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let name = |n: u32| {
            let mut p = self.path.clone().into_os_string();
            p.push(format!(".{n}"));
            PathBuf::from(p)
        };
        if self.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            let _ = std::fs::remove_file(name(self.keep));
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(name(n), name(n + 1));
            }
            std::fs::rename(&self.path, name(1))?;
        }
        self.file = open_append(&self.path).map_err(std::io::Error::other)?;
        self.written = 0;
        Ok(())
    }
}

fn open_append(path: &PathBuf) -> anyhow::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .create(true)
        .append(true)
        // The log names DNs and client addresses: the server's alone.
        .mode(0o600)
        .open(path)
        .with_context(|| format!("log.file: opening {}", path.display()))
}

impl Rotating {
    /// Whether the name no longer leads to the file written (moved,
    /// removed, or replaced), or a SIGHUP asked for a reopen.
    fn must_reopen(&self) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        if REOPEN.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        match (std::fs::metadata(&self.path), self.file.metadata()) {
            (Ok(named), Ok(open)) => named.ino() != open.ino() || named.dev() != open.dev(),
            (Err(_), _) => true,
            (Ok(_), Err(_)) => false,
        }
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        self.file = open_append(&self.path).map_err(std::io::Error::other)?;
        self.written = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(())
    }
}

impl Write for Rotating {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // One stat per write of the writer thread, which gathers every
        // line waiting (a write every few milliseconds under load).
        if self.must_reopen() {
            // A failed reopen keeps writing to the file held.
            let _ = self.reopen();
        }
        if self.written > 0 && self.written + buf.len() as u64 > self.max_bytes {
            // A failed rotation keeps writing to the same file.
            let _ = self.rotate();
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44, medium 9: after logrotate moved the file (and sent
    /// SIGHUP), the server kept writing the moved file, and its own next
    /// rotation deleted older files while the moved one grew unbounded.
    #[test]
    fn a_file_moved_away_is_written_anew_by_its_name() {
        let dir = std::env::temp_dir().join(format!("meridian-logmove-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        let mut log = Rotating::open(path.clone(), 1 << 20, 2).unwrap();
        log.write_all(b"before\n").unwrap();
        let moved = dir.join("server.log-20261128");
        std::fs::rename(&path, &moved).unwrap();
        log.write_all(b"after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&moved).unwrap(), "before\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
        // A SIGHUP's reopen with the file in place changes nothing seen.
        reopen();
        log.write_all(b"again\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\nagain\n");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Issue 44, medium 9: `log.level = "warn"` silenced the access log,
    /// which `log.access` switches.
    #[test]
    fn the_access_log_is_not_silenced_by_the_level() {
        use tracing_subscriber::prelude::*;
        for (level, access) in [
            ("warn", true),
            ("error", true),
            ("warn,meridian::access=off", false),
        ] {
            let subscriber = tracing_subscriber::registry().with(filter(level).unwrap());
            tracing::subscriber::with_default(subscriber, || {
                assert_eq!(
                    tracing::enabled!(target: "meridian::access", tracing::Level::INFO),
                    access,
                    "{level}"
                );
                assert!(!tracing::enabled!(target: "meridian::serve", tracing::Level::INFO));
            });
        }
    }

    #[test]
    fn a_file_is_rotated_by_size_and_old_ones_removed() {
        let dir = std::env::temp_dir().join(format!("meridian-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        let mut log = Rotating::open(path.clone(), 4096, 2).unwrap();
        let line = [b'x'; 1000];
        for _ in 0..20 {
            log.write_all(&line).unwrap();
        }
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(size(&path) <= 4096);
        assert_eq!(size(&dir.join("server.log.1")), 4000);
        assert_eq!(size(&dir.join("server.log.2")), 4000);
        assert!(!dir.join("server.log.3").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A sink that records each write it is given.
    #[derive(Clone, Default)]
    struct Recorded(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

    impl Write for Recorded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn waiting_lines_go_out_in_few_writes_and_in_order() {
        let queue = Queue::new(10_000);
        let mut expected = Vec::new();
        for n in 0..5000 {
            let line = format!("conn={n} op=\"MOD\" result=0\n").into_bytes();
            expected.extend_from_slice(&line);
            queue.push(&line);
        }
        queue.finishing.store(true, Ordering::Release);
        let sink = Recorded::default();
        write_lines(Box::new(sink.clone()), &queue);
        let writes = sink.0.lock().unwrap();
        // About 150 KiB of lines: three writes of up to 64 KiB, not 5000.
        assert!(writes.len() <= 3, "{} writes", writes.len());
        assert_eq!(writes.concat(), expected);
        // Every write ends at the end of a line.
        assert!(writes.iter().all(|w| w.ends_with(b"\n")));
    }

    #[test]
    fn pieces_end_at_line_ends() {
        let text = b"aaaa\nbbbbbbbbbb\ncc\nd\n";
        let pieces: Vec<&[u8]> = line_pieces(text, 8).collect();
        assert_eq!(
            pieces,
            [&b"aaaa\n"[..], b"bbbbbbbbbb\n", b"cc\nd\n"],
            "a line longer than the piece goes whole"
        );
        assert_eq!(line_pieces(b"", 8).count(), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        // A sink that never returns: every line beyond the queue's room
        // is dropped, and writing never blocks.
        struct Stuck;
        impl Write for Stuck {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                std::thread::park();
                Ok(0)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut writer = NonBlocking::start(Box::new(Stuck), 16);
        let line = [b'x'; 100];
        for _ in 0..1000 {
            writer.write_all(&line).unwrap();
        }
        // Held: the queue's 16, and what the writer took before its write
        // stuck (at most a queue's worth).
        let dropped = writer.queue.dropped.load(Ordering::Relaxed);
        assert!(dropped >= 1000 - 2 * 16, "{dropped} dropped");
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_too() {
        let queue = Queue::new(16);
        // Two lines of more than half the room of 16 do not fit together.
        let long = vec![b'x'; 16 * BYTES_PER_LINE / 2 + 1];
        queue.push(&long);
        queue.push(&long);
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 1);
        let mut taken = Vec::new();
        queue.take(&mut taken);
        assert_eq!(taken, long);
        // Nor does one larger than the whole room, even in an empty queue.
        queue.push(&vec![b'y'; 16 * BYTES_PER_LINE + 1]);
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 2);
        // Sixteen short lines do; the seventeenth does not.
        for _ in 0..17 {
            queue.push(b"z\n");
        }
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 3);
    }
}
