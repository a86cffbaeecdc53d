//! Where clients' commands go: the writer thread's queue, or in a
//! cluster the replication layer's ([`crate::replicated::Proposals`]),
//! which takes client jobs only, so no other writer work can be
//! misrouted there.

use tokio::sync::mpsc;

use crate::{Job, StoreError, Work};

/// The queue a store's clients submit to.
#[derive(Clone)]
pub(crate) enum Submissions {
    /// A single server: the writer applies them.
    Writer(mpsc::Sender<Work>),
    /// A replicated store: the log orders them first.
    Proposals(mpsc::Sender<Job>),
}

/// A [`Submissions`] that does not keep the store open.
pub(crate) enum WeakSubmissions {
    Writer(mpsc::WeakSender<Work>),
    Proposals(mpsc::WeakSender<Job>),
}

impl Submissions {
    /// Queues `job`, waiting while the queue is full.
    pub(crate) async fn send(&self, job: Job) -> Result<(), StoreError> {
        let sent = match self {
            Submissions::Writer(queue) => queue.send(Work::Client(job)).await.is_ok(),
            Submissions::Proposals(queue) => queue.send(job).await.is_ok(),
        };
        sent.then_some(()).ok_or(StoreError::Closed)
    }

    /// [`Submissions::send`] for threads outside an async runtime.
    pub(crate) fn blocking_send(&self, job: Job) -> Result<(), StoreError> {
        let sent = match self {
            Submissions::Writer(queue) => queue.blocking_send(Work::Client(job)).is_ok(),
            Submissions::Proposals(queue) => queue.blocking_send(job).is_ok(),
        };
        sent.then_some(()).ok_or(StoreError::Closed)
    }

    pub(crate) fn downgrade(&self) -> WeakSubmissions {
        match self {
            Submissions::Writer(queue) => WeakSubmissions::Writer(queue.downgrade()),
            Submissions::Proposals(queue) => WeakSubmissions::Proposals(queue.downgrade()),
        }
    }
}

impl WeakSubmissions {
    /// The queue, while the store is open.
    pub(crate) fn upgrade(&self) -> Option<Submissions> {
        match self {
            WeakSubmissions::Writer(queue) => queue.upgrade().map(Submissions::Writer),
            WeakSubmissions::Proposals(queue) => queue.upgrade().map(Submissions::Proposals),
        }
    }
}
