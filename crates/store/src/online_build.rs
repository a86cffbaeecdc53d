//! Building indexes added to the config while the store serves.
//!
//! An index the database does not hold yet is kept by every write from
//! the open on, but the planner does not use it (`index::Indexes::has`).
//! [`Store::build_indexes_online`] fills in the keys of the entries
//! written before: a thread of its own submits [`Command::BuildIndexes`]
//! steps of [`STEP`] entries, in ID order, one after another, so the
//! writer takes the clients' batches between them; the step that reaches
//! the end records the indexes as built, and from its commit the
//! planner uses them. Every step is an ordinary command: journaled, and
//! replayed after a crash like any other. A build cut short by a close
//! leaves them not built; the next open starts again.

use std::time::Instant;

use tokio::sync::oneshot;

use crate::{Command, Job, Outcome, Store, StoreError, Submitted};

/// Entries per step: a step holds the writer for about a millisecond,
/// which the clients' writes waiting behind it feel in their latency.
pub(crate) const STEP: u32 = 512;

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
        // Not a clone of the store: the build must not keep it open.
        let sender = self.sender.downgrade();
        let spawned = std::thread::Builder::new()
            .name("meridian-index-build".into())
            .spawn(move || {
                tracing::info!(indexes = %names, "building indexes online");
                let started = Instant::now();
                let mut from = 0;
                loop {
                    let Some(live) = sender.upgrade() else {
                        return Ok(());
                    };
                    let (reply, answer) = oneshot::channel();
                    let command = Command::BuildIndexes {
                        from,
                        limit: STEP,
                        types: types.clone(),
                    };
                    if live.blocking_send(Job { command, reply }).is_err() {
                        return Ok(());
                    }
                    drop(live);
                    match Submitted(answer).wait_blocking() {
                        Ok(Outcome::IndexesBuilt { next: Some(next) }) => from = next,
                        Ok(Outcome::IndexesBuilt { next: None }) => {
                            tracing::info!(
                                indexes = %names,
                                seconds = started.elapsed().as_secs_f64(),
                                "indexes built online: searches use them from now on"
                            );
                            return Ok(());
                        }
                        Err(StoreError::Closed) => return Ok(()),
                        Ok(other) => {
                            return Err(StoreError::Engine(format!(
                                "an index build step answered {other:?}"
                            )));
                        }
                        Err(e) => {
                            tracing::warn!(
                                indexes = %names,
                                error = %e,
                                "online index build stopped: searches go on without these indexes; run `meridian reindex`"
                            );
                            return Err(e);
                        }
                    }
                }
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
