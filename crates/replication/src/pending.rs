//! Clients' proposals waiting for their batch to be applied on this node.
//!
//! The proposer files each batch it sends under its sequence number; the
//! state machine, applying a batch from this node and this session,
//! answers each proposal with its command's result, here, where the
//! client is connected: so the client's next read on this node sees its
//! write (session consistency).
//!
//! With `cluster.ack = "all"` the answers are held at that point: the
//! proposer releases them once every voter holds the batch's log entry
//! ([`Pending::release`]), or gives up on them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use meridian_store::replicated::Reply;
use meridian_store::{Command, Effect, StoreError};
use tokio::sync::oneshot;

use crate::types::Batch;

/// A batch sent and not yet answered.
struct Waiting {
    /// Its clients' replies, in the order of its commands.
    replies: Vec<Reply>,
    /// Its commands, until the state machine takes them to apply: a
    /// node applies its own batches without decoding them back from
    /// the log entry (the journal's encoding gives back the very
    /// commands it was given: `every_command_survives_the_round_trip`).
    commands: Option<Vec<Command>>,
    /// CRC-32C of the batch's encoded commands: what tells this batch
    /// from one of an earlier life of this node under the same session
    /// and number ([`Pending::claim`]).
    checksum: u32,
    /// Told the batch's log index once it is applied here.
    applied: Option<oneshot::Sender<u64>>,
    /// Held results (acknowledgement by every voter), once applied.
    results: Option<Vec<Result<Effect, StoreError>>>,
}

/// The batches of this node's session that wait for their application.
pub(crate) struct Pending {
    /// This node's session (`types::Batch`).
    pub(crate) session: u64,
    /// Answers wait for [`Pending::release`] (`cluster.ack = "all"`).
    hold: bool,
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl Pending {
    pub(crate) fn new(session: u64, hold: bool) -> Pending {
        Pending {
            session,
            hold,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Files `batch`, made of `commands` for `replies`' clients; the
    /// receiver resolves with the batch's log index once it is applied
    /// here.
    pub(crate) fn file(
        &self,
        batch: &Batch,
        commands: Vec<Command>,
        replies: Vec<Reply>,
    ) -> oneshot::Receiver<u64> {
        let (applied, receiver) = oneshot::channel();
        self.lock().insert(
            batch.seq,
            Waiting {
                replies,
                commands: Some(commands),
                checksum: crc32c::crc32c(&batch.commands),
                applied: Some(applied),
                results: None,
            },
        );
        receiver
    }

    /// Whether `batch`, from this node, is one this life filed and still
    /// waits for: its session, a sequence number filed, and the very
    /// bytes filed under it. `Some` with its commands when they are still
    /// here (else they are decoded from the log entry); `None` when the
    /// batch is not this life's, and nobody here waits for its results.
    ///
    /// Sessions are unique per life of a node ([`crate::Storage::open`]),
    /// so an earlier life's batch under this session and number would
    /// take a clock set back across a wiped disk; its bytes still tell
    /// it apart, and it is applied as another node's batch would be
    /// rather than in place of the commands a client here waits for.
    pub(crate) fn claim(&self, batch: &Batch) -> Option<Option<Vec<Command>>> {
        if batch.session != self.session {
            return None;
        }
        let mut waiting = self.lock();
        let filed = waiting.get_mut(&batch.seq)?;
        if filed.checksum != crc32c::crc32c(&batch.commands) {
            tracing::error!(
                %batch,
                "a batch of an earlier life of this node under this life's session: applied, but answered to nobody"
            );
            return None;
        }
        Some(filed.commands.take())
    }

    /// Batch `seq` of `session` was applied at log `index` with these
    /// results, one per command in order, each with its spent command.
    /// Batches of another session (this node's previous life) have
    /// nobody waiting.
    pub(crate) fn applied(
        &self,
        session: u64,
        seq: u64,
        index: u64,
        results: impl Iterator<Item = (Result<Effect, StoreError>, Command)>,
    ) {
        if session != self.session {
            return;
        }
        let mut waiting = self.lock();
        let Some(batch) = waiting.get_mut(&seq) else {
            return;
        };
        if let Some(applied) = batch.applied.take() {
            let _ = applied.send(index);
        }
        if self.hold {
            batch.results = Some(results.map(|(result, _)| result).collect());
            return;
        }
        if let Some(batch) = waiting.remove(&seq) {
            drop(waiting);
            answer(
                seq,
                batch.replies,
                results.map(|(result, spent)| (result, Some(spent))),
            );
        }
    }

    /// Answers batch `seq` with the results held for it.
    pub(crate) fn release(&self, seq: u64) {
        let Some(batch) = self.lock().remove(&seq) else {
            return;
        };
        let results = batch.results.unwrap_or_default();
        answer(
            seq,
            batch.replies,
            results.into_iter().map(|result| (result, None)),
        );
    }

    /// Gives up on batch `seq`: its clients get `error`. Returns false if
    /// it was answered meanwhile.
    pub(crate) fn give_up(&self, seq: u64, error: &StoreError) -> bool {
        let Some(waiting) = self.lock().remove(&seq) else {
            return false;
        };
        for reply in waiting.replies {
            reply.answer(Err(error.clone()), None);
        }
        true
    }

    /// Batch `seq` can no longer be applied (a later batch of this
    /// session was, and the state machine skips an earlier one as sent
    /// twice): its clients get `error`, unless it was applied after all.
    /// Returns whether they did.
    pub(crate) fn skipped(&self, seq: u64, error: &StoreError) -> bool {
        let mut waiting = self.lock();
        if waiting
            .get(&seq)
            .is_none_or(|batch| batch.applied.is_none())
        {
            return false;
        }
        let Some(batch) = waiting.remove(&seq) else {
            return false;
        };
        drop(waiting);
        for reply in batch.replies {
            reply.answer(Err(error.clone()), None);
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Each client gets its command's result.
fn answer(
    seq: u64,
    replies: Vec<Reply>,
    mut results: impl Iterator<Item = (Result<Effect, StoreError>, Option<Command>)>,
) {
    for reply in replies {
        let (result, spent) = results.next().unwrap_or_else(|| {
            tracing::error!(seq, "a replicated batch had fewer results than commands");
            let error = "a replicated batch had fewer results than commands";
            (Err(StoreError::Internal(error.into())), None)
        });
        reply.answer(result, spent);
    }
}
