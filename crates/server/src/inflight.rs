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
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::watch;

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
    done: watch::Sender<bool>,
}

impl InFlight {
    pub(crate) fn new(kind: Kind) -> Arc<InFlight> {
        Arc::new(InFlight {
            kind,
            stop: AtomicU8::new(RUNNING),
            done: watch::Sender::new(false),
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
        !self.is_finished()
            && self
                .stop
                .compare_exchange(RUNNING, code, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
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
        self.done.send_replace(true);
    }

    pub(crate) fn is_finished(&self) -> bool {
        *self.done.borrow()
    }

    /// Resolves once the operation has finished.
    pub(crate) async fn finished(&self) {
        let mut done = self.done.subscribe();
        // An error means the sender is gone, which cannot outlive `self`.
        let _ = done.wait_for(|d| *d).await;
    }
}

/// A connection's running operations by message ID. Finished ones are
/// dropped as new ones arrive, so it never holds more than the
/// connection's outstanding operations.
#[derive(Debug, Default)]
pub(crate) struct Running(HashMap<i32, Arc<InFlight>>);

impl Running {
    /// Tracks a new operation and returns its handle.
    pub(crate) fn start(&mut self, id: i32, kind: Kind) -> Arc<InFlight> {
        self.0.retain(|_, op| !op.is_finished());
        let op = InFlight::new(kind);
        self.0.insert(id, Arc::clone(&op));
        op
    }

    /// The operation `id`, if it is still running.
    pub(crate) fn get(&self, id: i32) -> Option<&Arc<InFlight>> {
        self.0.get(&id).filter(|op| !op.is_finished())
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

    #[tokio::test]
    async fn finished_resolves_for_late_waiters_too() {
        let op = InFlight::new(Kind::Search);
        op.finish();
        op.finished().await;
    }
}
