//! Appends to one follower, pipelined: requests go out as openraft makes
//! them, without waiting for the answer to the one before, and the
//! answers are read back in order on the same connection (the follower's
//! peer server handles a connection's requests one after another).
//!
//! openraft's default `stream_append` sends one append and waits for its
//! answer before the next, so a follower receives at most one append per
//! round trip: across an ocean (120 ms) three sites writing at full speed
//! were held to about 8,000 modifies/s in all with the servers' CPUs
//! mostly idle. Pipelined, the log flows as fast as it is written and
//! the round trip is paid once per write, not once per append.
//!
//! Bounded: at most [`IN_FLIGHT`] appends wait for their answers; the
//! sender then waits too. Each answer must come within the call's
//! deadline of the moment its turn to be read came.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use openraft::entry::RaftEntry;
use openraft::errors::{NetworkError, RPCError};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, StreamAppendResult};
use openraft::type_config::alias::LogIdOf;
use tokio::io::{ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::types::Meridian;
use crate::wire::{Link, PeerStream, Request, Response};

/// Most appends sent and not yet answered, per follower.
pub(crate) const IN_FLIGHT: usize = 32;

/// The range of log IDs an append covers: after `prev`, up to `last`.
type Range = (Option<LogIdOf<Meridian>>, Option<LogIdOf<Meridian>>);

/// One follower's pipeline: the sending task and the answers' side.
pub(crate) struct Pipeline<'s> {
    reader: Option<ReadHalf<PeerStream>>,
    sent: mpsc::Receiver<Range>,
    /// Hands back its half of the connection when the input ended, none
    /// when a write failed (the connection is then not kept).
    sender: Option<JoinHandle<Option<WriteHalf<PeerStream>>>>,
    link: Link,
    target: crate::types::NodeId,
    timeout: Duration,
    /// Where the connection goes back once the pipeline ends cleanly (a
    /// heartbeat is a pipeline of one append: it must not cost a new
    /// connection each time).
    slot: &'s mut Option<PeerStream>,
    ended: bool,
}

impl Drop for Pipeline<'_> {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            sender.abort();
        }
    }
}

impl<'s> Pipeline<'s> {
    /// Starts sending `input`'s appends on `stream`.
    pub(crate) fn start<S>(
        stream: PeerStream,
        input: S,
        link: Link,
        target: crate::types::NodeId,
        timeout: Duration,
        slot: &'s mut Option<PeerStream>,
    ) -> Pipeline<'s>
    where
        S: Stream<Item = AppendEntriesRequest<Meridian>> + Send + Unpin + 'static,
    {
        let (reader, mut writer) = tokio::io::split(stream);
        let (sent_tx, sent) = mpsc::channel::<Range>(IN_FLIGHT);
        let sending = link.clone();
        let sender = tokio::spawn(async move {
            let mut input = input;
            while let Some(request) = input.next().await {
                let last = request
                    .entries
                    .last()
                    .map(|e| e.log_id())
                    .or(request.prev_log_id);
                let range = (request.prev_log_id, last);
                // A place in the line first: at most IN_FLIGHT unanswered.
                if sent_tx.send(range).await.is_err() {
                    break;
                }
                if let Err(e) = sending.send(&mut writer, &Request::Append(request)).await {
                    tracing::debug!(target_node = target, "a pipelined append: {e}");
                    return None;
                }
            }
            Some(writer)
        });
        Pipeline {
            reader: Some(reader),
            sent,
            sender: Some(sender),
            link,
            target,
            timeout,
            slot,
            ended: false,
        }
    }

    /// The answers, in order, as openraft's stream of results.
    pub(crate) fn answers(
        self,
    ) -> impl Stream<Item = Result<StreamAppendResult<Meridian>, RPCError<Meridian>>> + Send + 's
    {
        futures_util::stream::unfold(self, |mut pipeline| async move {
            let answer = pipeline.next().await?;
            Some((answer, pipeline))
        })
    }

    async fn next(&mut self) -> Option<Result<StreamAppendResult<Meridian>, RPCError<Meridian>>> {
        if self.ended {
            return None;
        }
        let Some((prev, last)) = self.sent.recv().await else {
            // Every append was answered and the input ended: the
            // connection is whole again, and kept for the next stream.
            self.ended = true;
            self.give_back().await;
            return None;
        };
        let reader = self.reader.as_mut()?;
        let answer =
            tokio::time::timeout(self.timeout, self.link.receive::<Response>(reader)).await;
        let target = self.target;
        let response = match answer {
            Ok(Ok(Some(Response::Append(response)))) => Ok(response),
            Ok(Ok(Some(Response::Failed(message)))) => Err(format!("answered: {message}")),
            Ok(Ok(Some(_))) => Err("gave an answer that is not an append's".to_owned()),
            Ok(Ok(None)) => Err("closed the connection".to_owned()),
            Ok(Err(e)) => Err(format!("could not be read: {e}")),
            Err(_) => Err(format!(
                "did not answer an append within {:?}",
                self.timeout
            )),
        };
        let response = match response {
            Ok(response) => response,
            Err(why) => {
                self.ended = true;
                let message = format!("node {target} {why}");
                return Some(Err(RPCError::Network(NetworkError::from_string(message))));
            }
        };
        // A conflict, a higher vote or a partial success ends the
        // pipeline: openraft starts again from what the answer says, and
        // the answers still on their way belong to appends it dropped.
        let partial = match &response {
            AppendEntriesResponse::PartialSuccess(upto) => Some(*upto),
            _ => None,
        };
        let result = response.into_stream_result(prev, last);
        if result.is_err() || partial.is_some_and(|upto| upto != last) {
            self.ended = true;
        }
        Some(Ok(result))
    }

    /// Puts the connection back in the client's slot, once the sender
    /// has handed back its half.
    async fn give_back(&mut self) {
        let (Some(sender), Some(reader)) = (self.sender.take(), self.reader.take()) else {
            return;
        };
        if let Ok(Some(writer)) = sender.await {
            *self.slot = Some(reader.unsplit(writer));
        }
    }
}
