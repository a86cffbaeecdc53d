//! The log: `tracing` lines, filtered by `log.level` (reloadable), written
//! to standard error or a file rotated by size (`log.file`), and never in
//! the way of an operation. A line is formatted where it is logged and
//! handed to a writer thread through a bounded queue
//! (`log.queue_lines`); when the queue is full the line is dropped and
//! counted, and the writer says how many were dropped once it catches up.
//! An operation therefore never waits for a slow terminal, pipe or disk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

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
    let text = if level.contains("openraft") {
        level.to_owned()
    } else {
        format!("{level},openraft=warn")
    };
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

/// The queue to the writer thread; cloned for each line written.
#[derive(Clone)]
struct NonBlocking {
    queue: SyncSender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
}

/// Set by [`finish`]: the writer writes what is queued and stops.
static FINISHING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The writer thread of the installed log, joined by [`finish`].
static WRITER: std::sync::Mutex<Option<std::thread::JoinHandle<()>>> = std::sync::Mutex::new(None);

/// Writes out what the log still holds (before the process exits).
pub(crate) fn finish() {
    FINISHING.store(true, Ordering::Release);
    let writer = WRITER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
}

impl NonBlocking {
    fn start(sink: Box<dyn Write + Send>, capacity: usize) -> NonBlocking {
        let (queue, lines) = sync_channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&dropped);
        // If the thread cannot start, lines are dropped (counted) rather
        // than the server not starting for want of a log.
        let writer = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_lines(sink, &lines, &counted));
        if let Ok(writer) = writer {
            *WRITER
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(writer);
        }
        NonBlocking { queue, dropped }
    }
}

/// How often the writer thread takes what the queue holds. It never
/// blocks on the queue: a thread blocked there must be woken by each line
/// sent (a futex wake-up per operation: a fifth of the server's time
/// under a pipelined load, perf), where one that looks every few
/// milliseconds is woken by no one.
const WRITE_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Lines are gathered into writes of about this many bytes: a system
/// call per wake-up of the writer, not per line (one per operation with
/// the access log on: 4 % of a replicated leader's time, perf).
const WRITE_BYTES: usize = 64 * 1024;

/// The writer thread: every few milliseconds, the lines waiting, in as
/// few writes as fit, then a flush and a note of the lines dropped since
/// the last one; until the queue's senders are gone.
fn write_lines(mut sink: Box<dyn Write + Send>, lines: &Receiver<Vec<u8>>, dropped: &AtomicU64) {
    let mut gathered = Vec::with_capacity(WRITE_BYTES);
    let write_out = |sink: &mut Box<dyn Write + Send>, gathered: &mut Vec<u8>| {
        let _ = sink.write_all(gathered);
        if gathered.capacity() > 4 * WRITE_BYTES {
            // An unusually long line passed: do not keep its buffer.
            *gathered = Vec::with_capacity(WRITE_BYTES);
        } else {
            gathered.clear();
        }
    };
    loop {
        let mut wrote = false;
        let mut senders_gone = false;
        loop {
            match lines.try_recv() {
                Ok(line) => {
                    gathered.extend_from_slice(&line);
                    wrote = true;
                    if gathered.len() >= WRITE_BYTES {
                        write_out(&mut sink, &mut gathered);
                    }
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    senders_gone = true;
                    break;
                }
            }
        }
        if !gathered.is_empty() {
            write_out(&mut sink, &mut gathered);
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let _ = writeln!(
                sink,
                "meridian: {lost} log lines dropped: the log was written slower than it was produced (log.queue_lines)"
            );
        }
        if wrote || lost > 0 || senders_gone {
            let _ = sink.flush();
        }
        if senders_gone || (FINISHING.load(Ordering::Acquire) && !wrote) {
            return;
        }
        std::thread::sleep(WRITE_EVERY);
    }
}

impl Write for NonBlocking {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.queue.try_send(buf.to_vec()) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for NonBlocking {
    type Writer = NonBlocking;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// A log file renamed to `NAME.1` (the older ones shifted up to
/// `NAME.keep`, the oldest removed) when it would pass `max_bytes`.
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

impl Write for Rotating {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
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
        let (queue, lines) = sync_channel(10_000);
        let mut expected = Vec::new();
        for n in 0..5000 {
            let line = format!("conn={n} op=\"MOD\" result=0\n").into_bytes();
            expected.extend_from_slice(&line);
            queue.send(line).unwrap();
        }
        drop(queue);
        let sink = Recorded::default();
        write_lines(Box::new(sink.clone()), &lines, &AtomicU64::new(0));
        let writes = sink.0.lock().unwrap();
        // About 150 KiB of lines: three writes of up to 64 KiB, not 5000.
        assert!(writes.len() <= 3, "{} writes", writes.len());
        assert_eq!(writes.concat(), expected);
        // Every write ends at the end of a line.
        assert!(writes.iter().all(|w| w.ends_with(b"\n")));
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
        let line = [b'x'; 1024];
        for _ in 0..1000 {
            writer.write_all(&line).unwrap();
        }
        // Held: the queue's 16, and what the writer gathered before its
        // write stuck (one write's worth, and the line that filled it).
        let held = 16 + WRITE_BYTES / line.len() + 1;
        assert!(writer.dropped.load(Ordering::Relaxed) >= (1000 - held) as u64);
    }
}
