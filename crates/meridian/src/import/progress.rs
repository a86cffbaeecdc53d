//! Progress of a load: a line redrawn in place on a terminal, a plain
//! line every few seconds otherwise (logs, CI).

// Progress is reported by elapsed time; nothing here is stored.
#![allow(clippy::disallowed_methods)]

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub(crate) struct Progress {
    started: Instant,
    last: Instant,
    terminal: bool,
}

impl Progress {
    pub(crate) fn start() -> Progress {
        let now = Instant::now();
        Progress {
            started: now,
            last: now,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn line(&self, added: u64) -> String {
        let elapsed = self.started.elapsed().as_secs_f64();
        let rate = if elapsed > 0.0 {
            added as f64 / elapsed
        } else {
            0.0
        };
        format!("{added} entries, {rate:.0}/s, {elapsed:.1} s")
    }

    /// Reports now and then.
    pub(crate) fn tick(&mut self, added: u64) {
        let every = if self.terminal {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(5)
        };
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let line = self.line(added);
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r\x1b[K{line}")
        } else {
            writeln!(err, "import: {line}")
        };
        let _ = err.flush();
    }

    /// The summary, on stdout (scripts read it) and after the progress line.
    pub(crate) fn finish(&self, added: u64, refused: usize) {
        if self.terminal {
            eprint!("\r\x1b[K");
        }
        println!("imported {}; {refused} refused", self.line(added));
    }
}
