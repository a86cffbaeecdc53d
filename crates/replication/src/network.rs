//! The connecting side of peer links: openraft's network client, one per
//! target node, each with one connection it reopens after a failure.

use std::future::Future;
use std::io;
use std::time::Duration;

use futures_util::Stream;
use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::StreamAppendResult;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetworkV2};
use tokio::io::AsyncReadExt;

use crate::snapshot::SnapshotFile;
use crate::types::{Meridian, NodeId, Vote};
use crate::wire::{Link, PeerStream, Request, Response};

/// Bytes of one snapshot chunk.
const SNAPSHOT_CHUNK: usize = 1 << 20;
/// The least time a peer has to answer an append or a vote.
const MIN_RPC_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a new connection's handshake may take, whatever the deadline
/// of the call that opened it (as long as the acceptor gives it,
/// `peer_server.rs`).
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a peer may take to install a snapshot it received.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Makes a [`PeerClient`] per target.
pub(crate) struct Network {
    pub(crate) link: Link,
    /// Where each node is reached from here.
    pub(crate) addresses: crate::admin::Addresses,
}

impl RaftNetworkFactory<Meridian> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        // A node known neither to the config nor by a recorded address
        // gets an address that fails to connect, saying so.
        let addr = self
            .addresses
            .peer(target, Some(node))
            .unwrap_or_else(|| format!("(no address known for node {target})"));
        PeerClient::new(target, addr, self.link.clone())
    }
}

/// One peer: its address and the connection to it, if open.
pub(crate) struct PeerClient {
    target: NodeId,
    addr: String,
    link: Link,
    stream: Option<PeerStream>,
    /// A handshake under way, kept across calls: a handshake takes a
    /// round trip and a half, and a call's deadline (openraft's
    /// heartbeat, for one) may be shorter than that plus the call's own
    /// round trip over a long path. Were the handshake dropped with the
    /// call, every call would start a new one and none would finish.
    connecting: Option<tokio::task::JoinHandle<io::Result<PeerStream>>>,
}

impl Drop for PeerClient {
    fn drop(&mut self) {
        if let Some(connecting) = self.connecting.take() {
            connecting.abort();
        }
    }
}

/// Why a call failed: before anything was sent, or after.
pub(crate) enum CallError {
    Unreachable(io::Error),
    Failed(io::Error),
    Remote(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(e) => write!(f, "unreachable: {e}"),
            CallError::Failed(e) => write!(f, "{e}"),
            CallError::Remote(message) => write!(f, "the peer answered: {message}"),
        }
    }
}

impl From<CallError> for RPCError<Meridian> {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Failed(e) => RPCError::Network(NetworkError::new(&e)),
            CallError::Remote(message) => RPCError::Network(NetworkError::from_string(message)),
        }
    }
}

impl From<CallError> for StreamingError<Meridian> {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Unreachable(e) => StreamingError::Unreachable(Unreachable::new(&e)),
            CallError::Failed(e) => StreamingError::Network(NetworkError::new(&e)),
            CallError::Remote(message) => {
                StreamingError::Network(NetworkError::from_string(message))
            }
        }
    }
}

impl PeerClient {
    pub(crate) fn new(target: NodeId, addr: String, link: Link) -> PeerClient {
        PeerClient {
            target,
            addr,
            link,
            stream: None,
            connecting: None,
        }
    }

    /// Sends `request` and waits for its response, within `timeout`. The
    /// connection is dropped after any failure (the next call reconnects).
    ///
    /// A new connection's handshake has a deadline of its own, `timeout`
    /// again, and the request's starts once it is made: over a path whose
    /// round trip is near a third of `timeout`, the handshake (a round trip
    /// and a half) and the request together would never fit in one
    /// deadline, and every call would end in a new handshake.
    pub(crate) async fn call(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let mut stream = self.take_connection(timeout).await?;
        let result =
            tokio::time::timeout(timeout, exchange(&self.link, &mut stream, request)).await;
        let result = result.unwrap_or_else(|_| {
            Err(CallError::Failed(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("node {} did not answer within {timeout:?}", self.target),
            )))
        });
        // Kept only after a whole exchange: after a failure its bytes may
        // be out of step.
        if result.is_ok() {
            self.stream = Some(stream);
        }
        match result? {
            Response::Failed(message) => Err(CallError::Remote(message)),
            response => Ok(response),
        }
    }

    /// The node this client reaches.
    pub(crate) fn target(&self) -> NodeId {
        self.target
    }

    /// The connection, taken for a use of its own (`submitter.rs`): the
    /// open one, or a new one within `timeout`.
    pub(crate) async fn open(&mut self, timeout: Duration) -> Result<PeerStream, CallError> {
        self.take_connection(timeout).await
    }

    /// The open connection, or a new one within `timeout` (its handshake
    /// goes on past it, for the next call).
    async fn take_connection(&mut self, timeout: Duration) -> Result<PeerStream, CallError> {
        if let Some(stream) = self.stream.take() {
            return Ok(stream);
        }
        tokio::time::timeout(timeout, self.connect())
            .await
            .unwrap_or_else(|_| {
                Err(CallError::Unreachable(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no connection to node {} within {timeout:?} (the handshake goes on)",
                        self.target
                    ),
                )))
            })
    }

    /// A new connection, from the handshake under way or a new one.
    async fn connect(&mut self) -> Result<PeerStream, CallError> {
        let connecting = self.connecting.get_or_insert_with(|| {
            let (link, addr, target) = (self.link.clone(), self.addr.clone(), self.target);
            tokio::spawn(async move { link.connect(&addr, target, HANDSHAKE_TIMEOUT).await })
        });
        // Cancelled here (a deadline), the handshake goes on and the next
        // call takes it up.
        let connected = connecting.await;
        self.connecting = None;
        connected
            .map_err(|e| CallError::Unreachable(io::Error::other(e)))?
            .map_err(CallError::Unreachable)
    }
}

/// One request and its response on `stream`.
async fn exchange(
    link: &Link,
    stream: &mut PeerStream,
    request: &Request,
) -> Result<Response, CallError> {
    link.send(stream, request)
        .await
        .map_err(CallError::Failed)?;
    match link.receive(stream).await {
        Ok(Some(response)) => Ok(response),
        Ok(None) => Err(CallError::Failed(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection",
        ))),
        Err(e) => Err(CallError::Failed(e)),
    }
}

/// The time a peer has to answer: openraft's deadline, at least
/// [`MIN_RPC_TIMEOUT`]. openraft derives its deadline from the heartbeat
/// (50 ms by default), which a loaded machine misses for an append of a
/// large batch: the connection was then dropped and the batch sent again,
/// over and over, while the peer was only slow.
fn rpc_timeout(option: &RPCOption) -> Duration {
    option.hard_ttl().max(MIN_RPC_TIMEOUT)
}

fn unexpected(what: &str) -> CallError {
    CallError::Remote(format!("an answer that is not a {what} response"))
}

impl RaftNetworkV2<Meridian> for PeerClient {
    type SnapshotData = SnapshotFile;

    /// Appends pipelined on this client's connection (`pipeline.rs`).
    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<
        's,
        Result<
            BoxStream<'s, Result<StreamAppendResult<Meridian>, RPCError<Meridian>>>,
            RPCError<Meridian>,
        >,
    >
    where
        S: Stream<Item = AppendEntriesRequest<Meridian>> + Send + Unpin + 'static,
    {
        Box::pin(async move {
            let timeout = rpc_timeout(&option);
            let stream = self.take_connection(timeout).await?;
            let pipeline = crate::pipeline::Pipeline::start(
                stream,
                input,
                self.link.clone(),
                self.target,
                timeout,
                &mut self.stream,
            );
            let answers: BoxStream<'s, _> = Box::pin(pipeline.answers());
            Ok(answers)
        })
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Meridian>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<Meridian>, RPCError<Meridian>> {
        match self
            .call(&Request::Append(rpc), rpc_timeout(&option))
            .await?
        {
            Response::Append(response) => Ok(response),
            _ => Err(unexpected("append").into()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<Meridian>,
        option: RPCOption,
    ) -> Result<VoteResponse<Meridian>, RPCError<Meridian>> {
        match self.call(&Request::Vote(rpc), rpc_timeout(&option)).await? {
            Response::Vote(response) => Ok(response),
            _ => Err(unexpected("vote").into()),
        }
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<Meridian>,
        option: RPCOption,
    ) -> Result<VoteResponse<Meridian>, RPCError<Meridian>> {
        match self
            .call(&Request::PreVote(rpc), rpc_timeout(&option))
            .await?
        {
            Response::Vote(response) => Ok(response),
            _ => Err(unexpected("pre-vote").into()),
        }
    }

    async fn transfer_leader(
        &mut self,
        rpc: openraft::raft::TransferLeaderRequest<Meridian>,
        option: RPCOption,
    ) -> Result<openraft::raft::TransferLeaderResponse<Meridian>, RPCError<Meridian>> {
        match self
            .call(&Request::TransferLeader(rpc), rpc_timeout(&option))
            .await?
        {
            Response::TransferLeader(response) => Ok(response),
            _ => Err(unexpected("transfer leader").into()),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::alias::SnapshotOf<Meridian, SnapshotFile>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<Meridian>, StreamingError<Meridian>> {
        let send = self.send_snapshot(vote, snapshot, option);
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            result = send => result,
        }
    }
}

impl PeerClient {
    /// Streams the snapshot file in CRC-checked chunks; the last one
    /// carries the meta and installs it on the peer.
    async fn send_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::alias::SnapshotOf<Meridian, SnapshotFile>,
        option: RPCOption,
    ) -> Result<SnapshotResponse<Meridian>, StreamingError<Meridian>> {
        let mut file = tokio::fs::File::open(&snapshot.snapshot.path)
            .await
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
        let mut transfer = [0u8; 8];
        getrandom::fill(&mut transfer)
            .map_err(|e| StreamingError::Network(NetworkError::from_string(e)))?;
        let transfer = u64::from_le_bytes(transfer);
        let mut offset = 0u64;
        let mut chunk = vec![0u8; SNAPSHOT_CHUNK];
        let ttl = option.hard_ttl().max(Duration::from_secs(10));
        loop {
            let mut filled = 0;
            while filled < chunk.len() {
                let read = file
                    .read(chunk.get_mut(filled..).unwrap_or_default())
                    .await
                    .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
                if read == 0 {
                    break;
                }
                filled += read;
            }
            let data = chunk.get(..filled).unwrap_or_default().to_vec();
            let last = filled < chunk.len();
            let request = Request::SnapshotChunk {
                transfer,
                offset,
                crc: crc32c::crc32c(&data),
                data,
                done: last.then(|| (vote, snapshot.meta.clone())),
            };
            offset += filled as u64;
            // The last chunk waits for the install: a large database.
            let ttl = if last { INSTALL_TIMEOUT } else { ttl };
            match self.call(&request, ttl).await? {
                Response::Snapshot(Some(response)) if last => return Ok(response),
                Response::Snapshot(None) if !last => {}
                _ => return Err(unexpected("snapshot").into()),
            }
        }
    }
}
