//! A follower's batches to the leader, over one connection, pipelined:
//! each is written as the proposer hands it over, without waiting for
//! the answer to the one before, and the answers are read back in order
//! (the leader's peer server serves a connection's requests one after
//! another, and appends each batch to its log as it reads it). So the
//! batches reach the log in the order the proposer sent them, and a site
//! an ocean away from its leader has its writes on their way every
//! moment instead of one batch per round trip.
//!
//! The connection ends at the first failure: a write or read error, an
//! answer not in time, or a leader that says it no longer leads. The
//! proposer then sends what it has in flight again, in order, to
//! whoever leads (a batch appended twice is applied once).
//!
//! Bounded: at most [`IN_FLIGHT`] batches wait for their answers; the
//! proposer then waits to hand over the next.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::network::{CallError, PeerClient};
use crate::types::{Batch, NodeId};
use crate::wire::{Link, Request, Response, Submitted};

/// Most batches written and not yet answered.
pub(crate) const IN_FLIGHT: usize = 64;

/// How long the leader has to answer one submission (an append to its
/// log, not a commit) once its turn to be read came.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection's sending and reading, to one leader.
pub(crate) struct Submitter {
    batches: mpsc::Sender<Batch>,
    task: JoinHandle<()>,
}

impl Drop for Submitter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Submitter {
    /// Connects to `leader` at `addr` (on its own task: the proposer does
    /// not wait for the handshake) and submits what it is given.
    pub(crate) fn start(leader: NodeId, addr: String, link: Link) -> Submitter {
        let (batches, waiting) = mpsc::channel(IN_FLIGHT);
        let task = tokio::spawn(run(
            PeerClient::new(leader, addr, link.clone()),
            link,
            waiting,
        ));
        Submitter { batches, task }
    }

    /// Hands `batch` over; false when the connection has ended (nothing
    /// more will be sent on it).
    pub(crate) async fn submit(&self, batch: Batch) -> bool {
        self.batches.send(batch).await.is_ok()
    }

    /// Whether the connection still works.
    pub(crate) fn working(&self) -> bool {
        !self.task.is_finished()
    }

    /// Resolves once the connection has ended.
    pub(crate) async fn ended(&mut self) {
        let _ = (&mut self.task).await;
    }
}

async fn run(mut client: PeerClient, link: Link, mut batches: mpsc::Receiver<Batch>) {
    let leader = client.target();
    let stream = match client.open(crate::network::HANDSHAKE_TIMEOUT).await {
        Ok(stream) => stream,
        Err(CallError::Unreachable(e) | CallError::Failed(e)) => {
            tracing::debug!(leader, "no connection to submit batches: {e}");
            return;
        }
        Err(CallError::Remote(e)) => {
            tracing::debug!(leader, "no connection to submit batches: {e}");
            return;
        }
    };
    let (mut reader, mut writer) = tokio::io::split(stream);
    // A place in this line for every batch written and not yet answered.
    let (unanswered, mut answers_due) = mpsc::channel::<()>(IN_FLIGHT);
    let sending = async {
        while let Some(batch) = batches.recv().await {
            if unanswered.send(()).await.is_err() {
                return;
            }
            if let Err(e) = link.send(&mut writer, &Request::Submit(batch)).await {
                tracing::debug!(leader, "submitting a batch: {e}");
                return;
            }
        }
    };
    let reading = async {
        while answers_due.recv().await.is_some() {
            let answer =
                tokio::time::timeout(ANSWER_TIMEOUT, link.receive::<Response>(&mut reader)).await;
            let why = match answer {
                Ok(Ok(Some(Response::Submitted(Submitted::Accepted)))) => continue,
                Ok(Ok(Some(Response::Submitted(Submitted::NotLeader(now))))) => {
                    format!("it no longer leads (leader: {now:?})")
                }
                Ok(Ok(Some(Response::Failed(message)))) => format!("it answered: {message}"),
                Ok(Ok(Some(_))) => "an answer that is not a submission's".to_owned(),
                Ok(Ok(None)) => "it closed the connection".to_owned(),
                Ok(Err(e)) => format!("its answer could not be read: {e}"),
                Err(_) => format!("no answer within {ANSWER_TIMEOUT:?}"),
            };
            tracing::debug!(leader, "submitting batches: {why}");
            return;
        }
    };
    // Either side's end is the connection's.
    tokio::select! {
        () = sending => {}
        () = reading => {}
    }
}
