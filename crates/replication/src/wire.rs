//! The peer protocol: frames of postcard-encoded messages over TCP.
//!
//! A frame is a length (u32, big-endian) and that many bytes, at most
//! `cluster.max_message_bytes`. A connection begins with the acceptor's
//! challenge (32 random bytes) and the connector's proof of the cluster
//! secret (SHA-256 of the challenge, the node it means to reach, and the
//! secret), so only nodes that know the secret are served, and a
//! connection that reached the wrong node (a stale address, a port
//! reused) is refused rather than served as if it were the right one;
//! then requests and responses alternate.

use std::io;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::types::{Batch, Meridian, NodeId, Vote};

/// A request from one node to another.
#[derive(Serialize, Deserialize)]
pub(crate) enum Request {
    Append(openraft::raft::AppendEntriesRequest<Meridian>),
    Vote(openraft::raft::VoteRequest<Meridian>),
    /// One chunk of a snapshot; the last carries the leader's vote and
    /// the snapshot's meta, and installs it.
    SnapshotChunk {
        /// Which transfer (a new one restarts the file).
        transfer: u64,
        offset: u64,
        data: Vec<u8>,
        /// CRC-32C of `data`.
        crc: u32,
        done: Option<(Vote, openraft::alias::SnapshotMetaOf<Meridian>)>,
    },
    /// A follower's batch for the leader to append.
    Forward(Batch),
}

/// The answer to a [`Request`].
#[derive(Serialize, Deserialize)]
pub(crate) enum Response {
    Append(openraft::raft::AppendEntriesResponse<Meridian>),
    Vote(openraft::raft::VoteResponse<Meridian>),
    /// A chunk was taken; with the response once installed.
    Snapshot(Option<openraft::raft::SnapshotResponse<Meridian>>),
    Forwarded(Forwarded),
    /// The request failed on the peer; the text says why.
    Failed(String),
}

/// What a leader did with a forwarded batch.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Forwarded {
    /// Committed and applied on the leader.
    Applied,
    /// Not the leader; the one it knows of, if any.
    NotLeader(Option<NodeId>),
}

/// The secret nodes prove to each other, and the frame bound.
#[derive(Clone)]
pub(crate) struct Link {
    secret: Vec<u8>,
    pub(crate) max_message: usize,
    /// This node: what an accepted connection must be meant for.
    me: NodeId,
    /// Bytes of messages sent to peers (requests and responses).
    pub(crate) sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

const CHALLENGE: usize = 32;

impl Link {
    pub(crate) fn new(secret: &str, max_message: usize, me: NodeId) -> Link {
        Link {
            secret: secret.as_bytes().to_vec(),
            max_message,
            me,
            sent: std::sync::Arc::default(),
        }
    }

    fn proof(&self, challenge: &[u8], target: NodeId) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(b"meridian peer v1\0");
        hash.update(challenge);
        hash.update(target.to_be_bytes());
        hash.update(&self.secret);
        hash.finalize().into()
    }

    /// The connector's side of the handshake, to node `target`.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        target: NodeId,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        let mut stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??;
        stream.set_nodelay(true)?;
        let mut challenge = [0u8; CHALLENGE];
        tokio::time::timeout(timeout, stream.read_exact(&mut challenge))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the peer sent no challenge"))??;
        stream.write_all(&self.proof(&challenge, target)).await?;
        let mut verdict = [0u8; 1];
        tokio::time::timeout(timeout, stream.read_exact(&mut verdict))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the peer did not answer"))??;
        if verdict != [1] {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the peer at {addr} refused us: not node {target}, or another cluster secret"
                ),
            ));
        }
        Ok(stream)
    }

    /// The acceptor's side: `Ok(false)` when the connector does not know
    /// the secret or means another node (the connection is then closed).
    pub(crate) async fn accept(
        &self,
        stream: &mut TcpStream,
        timeout: Duration,
    ) -> io::Result<bool> {
        let mut challenge = [0u8; CHALLENGE];
        getrandom::fill(&mut challenge).map_err(|e| io::Error::other(e.to_string()))?;
        stream.write_all(&challenge).await?;
        let mut proof = [0u8; 32];
        tokio::time::timeout(timeout, stream.read_exact(&mut proof))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no proof of the secret"))??;
        let good = bool::from(self.proof(&challenge, self.me).ct_eq(&proof));
        stream.write_all(&[u8::from(good)]).await?;
        Ok(good)
    }

    pub(crate) async fn send<T: Serialize>(
        &self,
        stream: &mut TcpStream,
        message: &T,
    ) -> io::Result<()> {
        let bytes = postcard::to_stdvec(message)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        if bytes.len() > self.max_message {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a peer message of {} bytes is over cluster.max_message_bytes ({})",
                    bytes.len(),
                    self.max_message
                ),
            ));
        }
        let len = u32::try_from(bytes.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "message over 4 GiB"))?;
        let mut frame = Vec::with_capacity(bytes.len() + 4);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&bytes);
        stream.write_all(&frame).await?;
        self.sent
            .fetch_add(frame.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The next message; `Ok(None)` at a clean end of stream.
    pub(crate) async fn receive<T: DeserializeOwned>(
        &self,
        stream: &mut TcpStream,
    ) -> io::Result<Option<T>> {
        let mut len = [0u8; 4];
        match stream.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > self.max_message {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a peer announced a message of {len} bytes, over cluster.max_message_bytes ({})",
                    self.max_message
                ),
            ));
        }
        let mut bytes = vec![0u8; len];
        stream.read_exact(&mut bytes).await?;
        postcard::from_bytes(&bytes).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a peer message does not decode: {e}"),
            )
        })
    }
}
