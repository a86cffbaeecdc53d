//! The peer protocol: frames of postcard-encoded messages over TCP.
//!
//! A frame is a length (u32, big-endian) and that many bytes, at most
//! `cluster.max_message_bytes`: a flag byte, then the message, raw (0) or
//! LZ4-compressed (1: its size, u32 little-endian, then the LZ4 block).
//! Messages of [`COMPRESS_FROM`] bytes or more are compressed when that
//! makes them smaller: a batch's commands repeat the suffix of every DN,
//! attribute names, the CSN's date and the modifier's DN. A connection
//! begins with the acceptor's protocol version and challenge (32 random
//! bytes), and the connector's version, the Raft group it means (one per
//! partition, `hub.rs`), and proof of the cluster secret (SHA-256 of the
//! challenge, the node and group it means to reach, and the secret), so
//! only nodes that know the secret are served, a connection that reached
//! the wrong node (a stale address, a port reused) or a group the node
//! does not run is refused rather than served as if it were the right
//! one, and a node of another protocol version (a cluster in the middle
//! of an upgrade) is refused by name before any message is misread; then
//! the two compare their configurations, and requests and responses
//! alternate.

use std::io;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tls::PeerTls;

use crate::types::{Batch, Meridian, NodeId, Vote};

/// A request from one node to another.
#[derive(Serialize, Deserialize)]
pub(crate) enum Request {
    Append(openraft::raft::AppendEntriesRequest<Meridian>),
    Vote(openraft::raft::VoteRequest<Meridian>),
    /// The leader hands over: the target starts an election at once.
    TransferLeader(openraft::raft::TransferLeaderRequest<Meridian>),
    /// One chunk of a snapshot; the last carries the leader's vote and
    /// the snapshot's meta, and installs it.
    SnapshotChunk {
        /// Which transfer (a new one restarts the file).
        transfer: u64,
        offset: u64,
        #[serde(with = "crate::raw_bytes")]
        data: Vec<u8>,
        /// CRC-32C of `data`.
        crc: u32,
        done: Option<(Vote, openraft::alias::SnapshotMetaOf<Meridian>)>,
    },
    /// A follower's batch for the leader to append to its log. Answered
    /// once appended, not once committed, so that a follower's batches
    /// follow each other on one connection without waiting a commit
    /// apiece (`submitter.rs`); the follower learns of the commit when
    /// it applies the batch itself.
    Submit(Batch),
    /// Whether every voter holds the log up to this index (asked of the
    /// leader under `cluster.ack = "all"`; it waits a while for it).
    EveryVoterHolds(u64),
    /// The leader's read index, for a linearizable read at a follower.
    ReadIndex,
    /// A membership change or leadership transfer, for the leader.
    Admin(crate::admin::AdminCommand),
    /// A candidate asks whether it would be elected, before it raises
    /// its term (openraft's Pre-Vote): a node that cannot reach a
    /// majority no longer drives the term up while it is away.
    PreVote(openraft::raft::VoteRequest<Meridian>),
    /// This voter started with an empty log (`rejoin.rs`): where is the
    /// cluster?
    StartedEmpty(NodeId),
    /// From the leader: the receiver was taken out of the cluster
    /// (`removal.rs`).
    Removed,
}

/// The answer to a [`Request`].
#[derive(Serialize, Deserialize)]
pub(crate) enum Response {
    Append(openraft::raft::AppendEntriesResponse<Meridian>),
    Vote(openraft::raft::VoteResponse<Meridian>),
    TransferLeader(openraft::raft::TransferLeaderResponse<Meridian>),
    /// A chunk was taken; with the response once installed.
    Snapshot(Option<openraft::raft::SnapshotResponse<Meridian>>),
    Submitted(Submitted),
    EveryVoterHolds(bool),
    Admin(Result<String, crate::admin::AdminError>),
    ReadIndex(Result<u64, String>),
    /// The request failed on the peer; the text says why.
    Failed(String),
    /// To [`Request::StartedEmpty`]: the peer's commit index, and
    /// whether it leads (and so restarted its stream to the asker).
    StartedEmpty {
        committed: u64,
        leads: bool,
    },
    /// To [`Request::Removed`].
    Noted,
}

/// What a leader did with a submitted batch.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Submitted {
    /// Handed to its log, after every batch submitted before it.
    Accepted,
    /// Not the leader; the one it knows of, if any.
    NotLeader(Option<NodeId>),
}

/// A peer connection: plain TCP, or TLS over it (`cluster.tls_*`).
pub(crate) trait PeerIo: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> PeerIo for T {}
pub(crate) type PeerStream = Box<dyn PeerIo>;

/// What each node's applying depends on in its configuration, as
/// `(config key, digest of its value)`: two nodes whose digests differ
/// would apply the same log to different databases.
pub type ConfigDigest = Vec<(String, [u8; 32])>;

/// The secret nodes prove to each other, and the frame bound.
#[derive(Clone)]
pub(crate) struct Link {
    /// This node's [`ConfigDigest`], exchanged after the secret.
    pub(crate) digest: std::sync::Arc<ConfigDigest>,
    /// TLS on every link, when configured.
    pub(crate) tls: Option<PeerTls>,
    secret: Vec<u8>,
    pub(crate) max_message: usize,
    /// This node: what an accepted connection must be meant for.
    me: NodeId,
    /// The Raft group (partition) this link's connections are for: the
    /// naming context's position in the configuration, 0 for the first.
    pub(crate) group: u16,
    /// Bytes of messages sent to peers (requests and responses), as
    /// framed: LZ4-compressed where that made them smaller.
    pub(crate) sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The same messages' bytes before compression.
    pub(crate) sent_uncompressed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The peer protocol version this node speaks ([`PROTOCOL_VERSION`];
    /// another only in tests).
    protocol: u16,
}

/// The peer protocol's version. Both ends of a connection must speak the
/// same: raise it with any change to the messages or their encoding, so
/// that nodes of two releases refuse each other by name during a rolling
/// upgrade instead of misreading each other's messages.
/// (3: `Submit` took the place of `Forward`, answered once appended.
/// 4: the handshake names the Raft group. 5: a log entry may hold a
/// store `Transaction` command, which a node of 4 could not decode.)
pub(crate) const PROTOCOL_VERSION: u16 = 5;

const CHALLENGE: usize = 32;
/// The acceptor's verdict on the connector's proof.
const REFUSED: u8 = 0;
const ACCEPTED: u8 = 1;
const OTHER_VERSION: u8 = 2;
/// The proof was good, but the acceptor runs no such group (a partition
/// configured at one node and not the other is caught by the digest; this
/// is a group not started yet, or stopped).
const NO_SUCH_GROUP: u8 = 3;

/// Messages this long or longer are compressed (appends of batches);
/// shorter ones (votes, heartbeats, answers) are not worth it.
const COMPRESS_FROM: usize = 256;
const RAW: u8 = 0;
const LZ4: u8 = 1;

/// A big-endian `u16` from the first two bytes: a handshake's protocol
/// version and its group.
fn be_u16(bytes: &[u8]) -> u16 {
    let mut version = [0u8; 2];
    for (to, from) in version.iter_mut().zip(bytes) {
        *to = *from;
    }
    u16::from_be_bytes(version)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl Link {
    pub(crate) fn new(
        secret: &str,
        max_message: usize,
        me: NodeId,
        tls: Option<PeerTls>,
        digest: ConfigDigest,
    ) -> Link {
        Link {
            digest: std::sync::Arc::new(digest),
            tls,
            secret: secret.as_bytes().to_vec(),
            max_message,
            me,
            group: 0,
            sent: std::sync::Arc::default(),
            sent_uncompressed: std::sync::Arc::default(),
            protocol: PROTOCOL_VERSION,
        }
    }

    /// The same link for the connections of Raft group `group`; the byte
    /// counts stay the node's.
    pub(crate) fn for_group(&self, group: u16) -> Link {
        Link {
            group,
            ..self.clone()
        }
    }

    fn version_refusal(&self, whose: &str, theirs: u16) -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{whose} speaks peer protocol version {theirs} and this node {}: every node of a cluster must run a Meridian release of one protocol version",
                self.protocol
            ),
        )
    }

    fn proof(&self, challenge: &[u8], target: NodeId, group: u16) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(b"meridian peer v4\0");
        hash.update(challenge);
        hash.update(target.to_be_bytes());
        hash.update(group.to_be_bytes());
        hash.update(&self.secret);
        hash.finalize().into()
    }

    /// The connector's side of the handshake, to node `target`: TLS
    /// first when configured (the peer's certificate verified, ours
    /// presented), then the proof of the secret.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        target: NodeId,
        timeout: Duration,
    ) -> io::Result<PeerStream> {
        let within = |what: &'static str| move |_| io::Error::new(io::ErrorKind::TimedOut, what);
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(within("connecting timed out"))??;
        tcp.set_nodelay(true)?;
        let mut stream: PeerStream = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let name = crate::tls::server_name(addr)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let tls = tokio::time::timeout(timeout, tls.connector.connect(name, tcp))
                    .await
                    .map_err(within("the TLS handshake timed out"))?
                    .map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!("TLS with the peer at {addr}: {e}"),
                        )
                    })?;
                Box::new(tls)
            }
        };
        let mut opening = [0u8; 2 + CHALLENGE];
        tokio::time::timeout(timeout, stream.read_exact(&mut opening))
            .await
            .map_err(within("the peer sent no challenge"))??;
        let (version, challenge) = opening.split_at(2);
        let theirs = be_u16(version);
        // Our version and the proof either way: a peer of another
        // version learns ours and says so in its own log.
        stream.write_all(&self.protocol.to_be_bytes()).await?;
        stream.write_all(&self.group.to_be_bytes()).await?;
        stream
            .write_all(&self.proof(challenge, target, self.group))
            .await?;
        if theirs != self.protocol {
            stream.flush().await?;
            return Err(self.version_refusal(&format!("the peer at {addr}"), theirs));
        }
        // The digest goes with the proof, not after the verdict: the
        // handshake costs a round trip less, which over a path of 200 ms
        // is what lets a call fit in a heartbeat. An acceptor that refuses
        // the proof closes the connection without reading it.
        self.send(&mut stream, &*self.digest).await?;
        stream.flush().await?;
        let mut verdict = [0u8; 1];
        tokio::time::timeout(timeout, stream.read_exact(&mut verdict))
            .await
            .map_err(within("the peer did not answer"))??;
        if verdict == [OTHER_VERSION] {
            return Err(self.version_refusal(&format!("the peer at {addr}"), 0));
        }
        if verdict == [NO_SUCH_GROUP] {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "node {target} at {addr} runs no partition {} now (starting, or stopping)",
                    self.group
                ),
            ));
        }
        if verdict != [ACCEPTED] {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the peer at {addr} refused us: not node {target}, or another cluster secret"
                ),
            ));
        }
        let differing: Vec<String> = tokio::time::timeout(timeout, self.receive(&mut stream))
            .await
            .map_err(within("the peer did not compare configurations"))??
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection",
                )
            })?;
        if !differing.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "node {target} at {addr} has another configuration of {}: every node must have the same",
                    differing.join(", ")
                ),
            ));
        }
        Ok(stream)
    }

    /// The acceptor's side: TLS first when configured (a peer without a
    /// certificate our CA signed is refused by the handshake), then the
    /// challenge. `Ok(None)` when the connector does not know the secret
    /// or means another node (the connection is then closed); else the
    /// stream and the group it is for, which `serves` accepted.
    pub(crate) async fn accept(
        &self,
        tcp: TcpStream,
        timeout: Duration,
        serves: impl Fn(u16) -> bool,
    ) -> io::Result<Option<(PeerStream, u16)>> {
        tcp.set_nodelay(true)?;
        let mut stream: PeerStream = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let tls = tokio::time::timeout(timeout, tls.acceptor.accept(tcp))
                    .await
                    .map_err(|_| {
                        io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake timed out")
                    })?
                    .map_err(|e| {
                        io::Error::new(io::ErrorKind::PermissionDenied, format!("TLS: {e}"))
                    })?;
                Box::new(tls)
            }
        };
        let mut challenge = [0u8; CHALLENGE];
        getrandom::fill(&mut challenge).map_err(|e| io::Error::other(e.to_string()))?;
        stream.write_all(&self.protocol.to_be_bytes()).await?;
        stream.write_all(&challenge).await?;
        stream.flush().await?;
        // An older connector sends no group: its version is read first,
        // and it is refused before the rest is waited for.
        let mut version = [0u8; 2];
        tokio::time::timeout(timeout, stream.read_exact(&mut version))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no proof of the secret"))??;
        let theirs = be_u16(&version);
        if theirs != self.protocol {
            // Written before the refusal is returned: the connector may
            // not have read our version yet.
            let _ = stream.write_all(&[OTHER_VERSION]).await;
            let _ = stream.flush().await;
            return Err(self.version_refusal("a peer", theirs));
        }
        let mut answer = [0u8; 2 + 32];
        tokio::time::timeout(timeout, stream.read_exact(&mut answer))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no proof of the secret"))??;
        let (group, proof) = answer.split_at(2);
        let group = be_u16(group);
        let good = bool::from(self.proof(&challenge, self.me, group).ct_eq(proof));
        let verdict = match (good, serves(group)) {
            (false, _) => REFUSED,
            (true, false) => NO_SUCH_GROUP,
            (true, true) => ACCEPTED,
        };
        stream.write_all(&[verdict]).await?;
        stream.flush().await?;
        if verdict == REFUSED {
            return Ok(None);
        }
        if verdict == NO_SUCH_GROUP {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("a peer asked for partition {group}, which this node does not run now"),
            ));
        }
        let theirs: ConfigDigest = tokio::time::timeout(timeout, self.receive(&mut stream))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no configuration digest"))??
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection",
                )
            })?;
        let differing = differing_keys(&self.digest, &theirs);
        self.send(&mut stream, &differing).await?;
        if !differing.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "a peer has another configuration of {}: every node must have the same",
                    differing.join(", ")
                ),
            ));
        }
        Ok(Some((stream, group)))
    }

    pub(crate) async fn send<T: Serialize>(
        &self,
        stream: &mut (impl AsyncWrite + Unpin + ?Sized),
        message: &T,
    ) -> io::Result<()> {
        let bytes = postcard::to_stdvec(message).map_err(|e| invalid(e.to_string()))?;
        if bytes.len() > self.max_message {
            return Err(invalid(format!(
                "a peer message of {} bytes is over cluster.max_message_bytes ({})",
                bytes.len(),
                self.max_message
            )));
        }
        let compressed = (bytes.len() >= COMPRESS_FROM)
            .then(|| lz4_flex::block::compress(&bytes))
            .filter(|packed| packed.len() + 4 < bytes.len());
        let body_len = match &compressed {
            Some(packed) => 1 + 4 + packed.len(),
            None => 1 + bytes.len(),
        };
        let len = u32::try_from(body_len).map_err(|_| invalid("message over 4 GiB".into()))?;
        let mut frame = Vec::with_capacity(body_len + 4);
        frame.extend_from_slice(&len.to_be_bytes());
        match &compressed {
            Some(packed) => {
                frame.push(LZ4);
                let size =
                    u32::try_from(bytes.len()).map_err(|_| invalid("message over 4 GiB".into()))?;
                frame.extend_from_slice(&size.to_le_bytes());
                frame.extend_from_slice(packed);
            }
            None => {
                frame.push(RAW);
                frame.extend_from_slice(&bytes);
            }
        }
        stream.write_all(&frame).await?;
        stream.flush().await?;
        self.sent
            .fetch_add(frame.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.sent_uncompressed.fetch_add(
            (bytes.len() + 5) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    /// The next message; `Ok(None)` at a clean end of stream.
    pub(crate) async fn receive<T: DeserializeOwned>(
        &self,
        stream: &mut (impl AsyncRead + Unpin + ?Sized),
    ) -> io::Result<Option<T>> {
        let mut len = [0u8; 4];
        match stream.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > self.max_message {
            return Err(invalid(format!(
                "a peer announced a message of {len} bytes, over cluster.max_message_bytes ({})",
                self.max_message
            )));
        }
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await?;
        let bytes = unpack(&body, self.max_message)?;
        postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| invalid(format!("a peer message does not decode: {e}")))
    }
}

/// The keys whose digests differ (or that one side lacks).
fn differing_keys(ours: &ConfigDigest, theirs: &ConfigDigest) -> Vec<String> {
    let mut keys: Vec<String> = ours
        .iter()
        .filter(|(key, digest)| !theirs.iter().any(|(k, d)| k == key && d == digest))
        .map(|(key, _)| key.clone())
        .chain(
            theirs
                .iter()
                .filter(|(key, _)| !ours.iter().any(|(k, _)| k == key))
                .map(|(key, _)| key.clone()),
        )
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A frame's message, decompressed if it was compressed; never more
/// than `max` bytes, whatever the frame says.
fn unpack(body: &[u8], max: usize) -> io::Result<std::borrow::Cow<'_, [u8]>> {
    match body.split_first() {
        Some((&RAW, rest)) => Ok(std::borrow::Cow::Borrowed(rest)),
        Some((&LZ4, rest)) => {
            let (size, packed) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| invalid("a compressed peer message without its size".into()))?;
            let size = u32::from_le_bytes(*size) as usize;
            if size > max {
                return Err(invalid(format!(
                    "a compressed peer message of {size} bytes, over cluster.max_message_bytes ({max})"
                )));
            }
            let mut out = vec![0u8; size];
            let written = lz4_flex::block::decompress_into(packed, &mut out).map_err(|e| {
                invalid(format!(
                    "a compressed peer message does not decompress: {e}"
                ))
            })?;
            if written != size {
                return Err(invalid(
                    "a compressed peer message of the wrong size".into(),
                ));
            }
            Ok(std::borrow::Cow::Owned(out))
        }
        _ => Err(invalid("a peer message with an unknown encoding".into())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn frames_unpack_raw_and_compressed_and_refuse_what_is_not() {
        let raw = [RAW, 1, 2, 3];
        assert_eq!(&*unpack(&raw, 100).unwrap(), &[1, 2, 3]);
        let message =
            b"uid=user1,ou=People,dc=example,dc=com uid=user2,ou=People,dc=example,dc=com"
                .repeat(4);
        let mut body = vec![LZ4];
        body.extend_from_slice(&(message.len() as u32).to_le_bytes());
        body.extend_from_slice(&lz4_flex::block::compress(&message));
        assert!(body.len() < message.len());
        assert_eq!(&*unpack(&body, 1 << 20).unwrap(), &message[..]);
        // A size over the bound is refused before anything is allocated.
        assert!(unpack(&body, 16).is_err());
        // A size that lies, a damaged block, an unknown flag: errors.
        let mut lying = body.clone();
        lying[1] = lying[1].wrapping_add(1);
        assert!(unpack(&lying, 1 << 20).is_err());
        let cut = &body[..body.len() - 3];
        assert!(unpack(cut, 1 << 20).is_err());
        assert!(unpack(&[7, 0], 100).is_err());
        assert!(unpack(&[], 100).is_err());
    }
}

#[cfg(test)]
mod digest_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_config_digest_round_trips() {
        let digest: ConfigDigest = vec![("storage.indexes".into(), [7u8; 32])];
        let bytes = postcard::to_stdvec(&digest).unwrap();
        let back: ConfigDigest = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, digest);
    }
}

#[cfg(test)]
mod handshake_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn link(me: NodeId, digest: ConfigDigest) -> Link {
        Link::new("a-secret-of-sixteen", 1 << 20, me, None, digest)
    }

    #[tokio::test]
    async fn nodes_with_one_configuration_connect_and_others_are_refused_by_key() {
        let same: ConfigDigest = vec![("storage.indexes".into(), [1; 32])];
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let acceptor = link(2, same.clone());
        let accepted = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let first = acceptor
                .accept(tcp, Duration::from_secs(5), |_| true)
                .await
                .map(|s| s.is_some());
            let (tcp, _) = listener.accept().await.unwrap();
            let second = acceptor
                .accept(tcp, Duration::from_secs(5), |_| true)
                .await
                .map(|s| s.is_some());
            (first.unwrap(), second.map_err(|e| e.to_string()))
        });
        let mut stream = link(1, same)
            .connect(&addr, 2, Duration::from_secs(5))
            .await
            .unwrap();
        let other: ConfigDigest = vec![("storage.indexes".into(), [2; 32])];
        let refused = link(3, other)
            .connect(&addr, 2, Duration::from_secs(5))
            .await;
        let (first, second) = accepted.await.unwrap();
        assert!(first);
        assert!(second.unwrap_err().contains("storage.indexes"));
        assert!(
            refused
                .err()
                .unwrap()
                .to_string()
                .contains("storage.indexes")
        );
        // The first connection carries messages.
        link(1, Vec::new())
            .send(&mut stream, &vec!["x".to_owned()])
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_connection_reaches_the_group_it_names_and_one_not_run_is_refused_by_name() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let acceptor = link(2, Vec::new());
        let accepted = tokio::spawn(async move {
            let mut groups = Vec::new();
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await.unwrap();
                groups.push(
                    acceptor
                        .accept(tcp, Duration::from_secs(5), |group| group == 1)
                        .await
                        .map(|s| s.map(|(_, group)| group))
                        .map_err(|e| e.to_string()),
                );
            }
            groups
        });
        let connector = link(1, Vec::new());
        connector
            .for_group(1)
            .connect(&addr, 2, Duration::from_secs(5))
            .await
            .unwrap();
        let refused = connector
            .for_group(2)
            .connect(&addr, 2, Duration::from_secs(5))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(refused.contains("runs no partition 2"), "{refused}");
        let groups = accepted.await.unwrap();
        assert_eq!(groups[0], Ok(Some(1)));
        let logged = groups[1].clone().unwrap_err();
        assert!(logged.contains("partition 2"), "{logged}");
    }

    #[tokio::test]
    async fn a_node_of_another_protocol_version_is_refused_by_name_on_both_sides() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let acceptor = link(2, Vec::new());
        let accepted = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            acceptor
                .accept(tcp, Duration::from_secs(5), |_| true)
                .await
                .map(|s| s.is_some())
                .map_err(|e| e.to_string())
        });
        let mut older = link(1, Vec::new());
        older.protocol = PROTOCOL_VERSION - 1;
        let refused = older
            .connect(&addr, 2, Duration::from_secs(5))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            refused.contains(&format!("peer protocol version {PROTOCOL_VERSION}")),
            "{refused}"
        );
        let logged = accepted.await.unwrap().unwrap_err();
        assert!(
            logged.contains(&format!("peer protocol version {}", PROTOCOL_VERSION - 1)),
            "{logged}"
        );
    }
}
