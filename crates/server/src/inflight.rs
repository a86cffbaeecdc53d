//! Operations still running after their request was handled: streamed
//! searches and writes waiting for their commit. Abandon (RFC 4511
//! section 4.11) and Cancel (RFC 3909) find them here by message ID.
//!
//! A search checks for a stop request before each step: abandoned, it
//! ends without a response; canceled, it ends with `canceled`. A write
//! submitted to the store cannot be taken back: Cancel answers `tooLate`
//! and Abandon leaves it to finish.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tokio::sync::Notify;

const RUNNING: u8 = 0;
const ABANDONED: u8 = 1;
const CANCELED: u8 = 2;

/// What kind of operation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A search streaming its results.
    Search,
    /// A write waiting for its commit.
    Write,
}

/// How a client asked an operation to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Abandon: no response at all.
    Abandon,
    /// Cancel: a `canceled` response, then the Cancel's own.
    Cancel,
}

/// One running operation, shared by the session and the task running it.
#[derive(Debug)]
pub(crate) struct InFlight {
    kind: Kind,
    stop: AtomicU8,
    done: AtomicBool,
    /// Wakes a Cancel waiting for the operation's end (one allocation per
    /// operation in all: every write makes one).
    finished: Notify,
    /// Woken when a stop is asked: an operation that waits on something
    /// else (a persistent search waits for changes) hears of it at once.
    stopping: Notify,
}

impl InFlight {
    pub(crate) fn new(kind: Kind) -> Arc<InFlight> {
        Arc::new(InFlight {
            kind,
            stop: AtomicU8::new(RUNNING),
            done: AtomicBool::new(false),
            finished: Notify::new(),
            stopping: Notify::new(),
        })
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Asks the operation to stop; false if a stop was asked already or it
    /// has finished.
    pub(crate) fn request_stop(&self, how: Stop) -> bool {
        let code = match how {
            Stop::Abandon => ABANDONED,
            Stop::Cancel => CANCELED,
        };
        let asked = !self.is_finished()
            && self
                .stop
                .compare_exchange(RUNNING, code, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if asked {
            self.stopping.notify_waiters();
        }
        asked
    }

    /// Resolves once a stop is asked (at once if it was already).
    pub(crate) async fn stop_asked(&self) -> Stop {
        loop {
            let notified = self.stopping.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(stop) = self.stop_requested() {
                return stop;
            }
            notified.await;
        }
    }

    /// The stop asked for, if any (checked by the running task).
    pub(crate) fn stop_requested(&self) -> Option<Stop> {
        match self.stop.load(Ordering::Acquire) {
            ABANDONED => Some(Stop::Abandon),
            CANCELED => Some(Stop::Cancel),
            _ => None,
        }
    }

    /// Marks the operation finished (its response, if any, is queued).
    pub(crate) fn finish(&self) {
        self.done.store(true, Ordering::Release);
        self.finished.notify_waiters();
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Resolves once the operation has finished.
    pub(crate) async fn finished(&self) {
        let notified = self.finished.notified();
        tokio::pin!(notified);
        // Registered before the check, so a finish in between still wakes us.
        notified.as_mut().enable();
        if !self.is_finished() {
            notified.await;
        }
    }
}

/// A connection's running operations by message ID. Finished ones are
/// dropped whenever the map has doubled since the last sweep, so it holds
/// at most about twice the connection's outstanding operations and each
/// new operation costs amortised constant time.
#[derive(Debug)]
pub(crate) struct Running {
    ops: HashMap<i32, Arc<InFlight>>,
    sweep_at: usize,
}

impl Default for Running {
    fn default() -> Self {
        Running {
            ops: HashMap::new(),
            sweep_at: 64,
        }
    }
}

impl Running {
    /// Tracks a new operation and returns its handle.
    pub(crate) fn start(&mut self, id: i32, kind: Kind) -> Arc<InFlight> {
        if self.ops.len() >= self.sweep_at {
            self.ops.retain(|_, op| !op.is_finished());
            self.sweep_at = (self.ops.len() * 2).max(64);
        }
        let op = InFlight::new(kind);
        self.ops.insert(id, Arc::clone(&op));
        op
    }

    /// The operation `id`, if it is still running.
    pub(crate) fn get(&self, id: i32) -> Option<&Arc<InFlight>> {
        self.ops.get(&id).filter(|op| !op.is_finished())
    }

    /// Abandons every search still running (the connection ends: RFC
    /// 4511 section 4.3, an unbind abandons what is outstanding), so
    /// that persistent ones end instead of holding the close.
    pub(crate) fn abandon_searches(&self) {
        for op in self.ops.values() {
            if op.kind() == Kind::Search {
                op.request_stop(Stop::Abandon);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_asked_once_and_not_after_finishing() {
        let mut running = Running::default();
        let op = running.start(5, Kind::Search);
        assert!(running.get(5).is_some());
        assert!(op.request_stop(Stop::Cancel));
        assert!(!op.request_stop(Stop::Abandon));
        assert_eq!(op.stop_requested(), Some(Stop::Cancel));
        op.finish();
        assert!(running.get(5).is_none());
        let other = running.start(6, Kind::Write);
        other.finish();
        assert!(!other.request_stop(Stop::Cancel));
    }

    #[test]
    fn finished_operations_do_not_pile_up() {
        let mut running = Running::default();
        for id in 0..10_000 {
            running.start(id, Kind::Write).finish();
        }
        let live = running.start(10_000, Kind::Search);
        assert!(running.ops.len() <= 128, "{}", running.ops.len());
        assert!(running.get(10_000).is_some());
        live.finish();
    }

    #[tokio::test]
    async fn finished_resolves_for_late_waiters_too() {
        let op = InFlight::new(Kind::Search);
        op.finish();
        op.finished().await;
    }

    #[tokio::test]
    async fn finished_wakes_a_waiter_that_came_first() {
        let op = InFlight::new(Kind::Search);
        let waiter = tokio::spawn({
            let op = Arc::clone(&op);
            async move { op.finished().await }
        });
        tokio::task::yield_now().await;
        op.finish();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the waiter was not woken")
            .unwrap();
    }
}
