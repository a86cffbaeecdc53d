//! Building indexes added to the config while the store serves.
//!
//! An index the database does not hold yet is kept by every write from
//! the open on, but the planner does not use it (`index::Indexes::has`).
//! [`Store::build_indexes_online`] fills in the keys of the entries
//! written before the open: a thread of its own cuts the IDs below the
//! next one into ranges of [`STEP`] and submits a
//! [`Command::BuildIndexes`] for each, [`IN_FLIGHT`] at a time, so the
//! writer takes them in turn with the clients' commands. A client
//! pipelining thousands of writes would otherwise stand ahead of a
//! build that waits for each step: measured, a build of 200,000 entries
//! did not end in 40 s of such load. Once every range has succeeded, a
//! last step records the indexes as built, and from its commit the
//! planner uses them. Every step is an ordinary command: journaled, and
//! replayed after a crash like any other. A build cut short by a close
//! or an error leaves them not built; the next open starts again.

use std::collections::VecDeque;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::submissions::WeakSubmissions;
use crate::{Command, Job, Store, StoreError, Submitted, apply};

/// Entry IDs per step: a step holds the writer for about a
/// millisecond.
pub(crate) const STEP: u64 = 512;

/// Steps submitted and not yet answered: at most this many share a
/// batch with the clients' commands.
const IN_FLIGHT: usize = 8;

impl Store {
    /// Starts building, in the background, the configured indexes that
    /// the database does not hold yet; `None` if there are none (or the
    /// thread could not start, which the log says). The thread ends
    /// quietly if the store closes first, and returns the first error
    /// of a step otherwise.
    pub fn build_indexes_online(&self) -> Option<std::thread::JoinHandle<Result<(), StoreError>>> {
        let types = self.inner.indexes.unbuilt_oids();
        if types.is_empty() {
            return None;
        }
        let names = self
            .inner
            .indexes
            .unbuilt_names(&self.inner.schema)
            .join(", ");
        // Entries from this ID on are added after the open, with every
        // configured key.
        let end = match apply::add::next_entry_id(&self.inner) {
            Ok(end) => end,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the online index build");
                return None;
            }
        };
        // Not a clone of the store: the build must not keep it open.
        let sender = self.sender.downgrade();
        let spawned = std::thread::Builder::new()
            .name("meridian-index-build".into())
            .spawn(move || {
                tracing::info!(indexes = %names, "building indexes online");
                // Only for the log line: the build's steps are commands
                // like any, stamped with no time.
                #[allow(clippy::disallowed_methods)]
                let started = Instant::now();
                let built = build(&sender, &types, end);
                #[allow(clippy::disallowed_methods)]
                let seconds = started.elapsed().as_secs_f64();
                match &built {
                    Ok(true) => tracing::info!(
                        indexes = %names,
                        seconds,
                        "indexes built online: searches use them from now on"
                    ),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(
                        indexes = %names,
                        error = %e,
                        "online index build stopped: searches go on without these indexes; run `meridian reindex`"
                    ),
                }
                built.map(drop)
            });
        match spawned {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the online index build");
                None
            }
        }
    }
}

/// Submits the steps below `end`, then the last one: `Ok(false)` if the
/// store closed first.
fn build(sender: &WeakSubmissions, types: &[String], end: u64) -> Result<bool, StoreError> {
    let submit = |from: u64, to: u64, complete: bool| -> Option<Submitted> {
        let live = sender.upgrade()?;
        let (reply, answer) = oneshot::channel();
        let command = Command::BuildIndexes {
            from,
            to,
            types: types.to_vec(),
            complete,
        };
        live.blocking_send(Job::new(command, reply)).ok()?;
        Some(Submitted(answer))
    };
    let mut in_flight = VecDeque::with_capacity(IN_FLIGHT);
    let mut from = 0;
    loop {
        while from < end && in_flight.len() < IN_FLIGHT {
            let to = from.saturating_add(STEP).min(end);
            let Some(step) = submit(from, to, false) else {
                return Ok(false);
            };
            in_flight.push_back(step);
            from = to;
        }
        let Some(step) = in_flight.pop_front() else {
            break;
        };
        match step.wait_blocking() {
            Ok(_) => {}
            Err(StoreError::Closed) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    let Some(last) = submit(end, end, true) else {
        return Ok(false);
    };
    match last.wait_blocking() {
        Ok(_) => Ok(true),
        Err(StoreError::Closed) => Ok(false),
        Err(e) => Err(e),
    }
}
