//! Clients' proposals waiting for their batch to be applied on this node.
//!
//! The proposer files each batch it sends under its sequence number; the
//! state machine, applying a batch from this node and this session,
//! answers each proposal with its command's result, here, where the
//! client is connected: so the client's next read on this node sees its
//! write (session consistency).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use meridian_store::replicated::Proposal;
use meridian_store::{Effect, StoreError};
use tokio::sync::oneshot;

/// A batch sent and not yet applied here.
struct Waiting {
    proposals: Vec<Proposal>,
    applied: oneshot::Sender<()>,
}

/// The batches of this node's session that wait for their application.
pub(crate) struct Pending {
    /// This node's session (`types::Batch`).
    pub(crate) session: u64,
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl Pending {
    pub(crate) fn new(session: u64) -> Pending {
        Pending {
            session,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Files batch `seq`; the receiver resolves once it is applied here.
    pub(crate) fn file(&self, seq: u64, proposals: Vec<Proposal>) -> oneshot::Receiver<()> {
        let (applied, receiver) = oneshot::channel();
        self.lock().insert(seq, Waiting { proposals, applied });
        receiver
    }

    /// Batch `seq` of `session` was applied with these results, one per
    /// proposal in order. Batches of another session (this node's
    /// previous life) have nobody waiting.
    pub(crate) fn applied(
        &self,
        session: u64,
        seq: u64,
        results: impl Iterator<Item = Result<Effect, StoreError>>,
    ) {
        if session != self.session {
            return;
        }
        let Some(waiting) = self.lock().remove(&seq) else {
            return;
        };
        let mut results = results;
        for proposal in waiting.proposals {
            let result = results.next().unwrap_or_else(|| {
                tracing::error!(seq, "a replicated batch had fewer results than commands");
                Err(StoreError::Internal(
                    "a replicated batch had fewer results than commands".into(),
                ))
            });
            proposal.answer(result);
        }
        let _ = waiting.applied.send(());
    }

    /// Gives up on batch `seq`: its clients get `error`. Returns false if
    /// it was applied meanwhile (and answered).
    pub(crate) fn give_up(&self, seq: u64, error: &StoreError) -> bool {
        let Some(waiting) = self.lock().remove(&seq) else {
            return false;
        };
        for proposal in waiting.proposals {
            proposal.answer(Err(error.clone()));
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
