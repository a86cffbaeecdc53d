//! What a read may see (`cluster.reads`).
//!
//! - `session`: this node's state. A write is answered once applied on
//!   the node that took it, so a connection reads its own writes; nothing
//!   to wait for.
//! - `linearizable`: every write acknowledged anywhere before the read
//!   began. The leader's commit index is confirmed by a majority
//!   (openraft's read index: the leader proves it still leads with a
//!   round of heartbeats), then the read waits until this node has
//!   applied that far. A follower asks the leader for the index over the
//!   peer link. Reads that arrive while a round is out wait for the next
//!   one and share it: one round per batch of reads, not per read (a read
//!   may not share a round that began before it did).
//! - `local`: this node's state if it is known current within
//!   `cluster.max_staleness_ms`, else busy. A follower is current as of
//!   the moment it received an AppendEntries (heartbeats included) whose
//!   commit index it has applied; a leader as of the last moment a
//!   majority acknowledged it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use openraft::ReadPolicy;
use openraft::async_runtime::watch::WatchReceiver as _;
use tokio::sync::{mpsc, oneshot};

use crate::admin::Addresses;
use crate::network::PeerClient;
use crate::types::{NodeId, Raft};
use crate::wire::{Link, Request, Response};

/// `cluster.reads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// A connection reads its own writes (this node's state).
    Session,
    /// Every write acknowledged before the read began.
    Linearizable,
    /// This node's state, at most this old.
    Local {
        /// `cluster.max_staleness_ms`.
        max_staleness: Duration,
    },
}

/// Why a read is not served now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadRefused {
    /// `local`: this node's state is older than allowed (LDAP busy).
    #[error("{0}")]
    Stale(String),
    /// `linearizable`: no leader confirmed the read in time (LDAP
    /// unavailable).
    #[error("{0}")]
    Unavailable(String),
}

/// How many recent AppendEntries a follower remembers for `local` reads.
const CONTACTS_KEPT: usize = 256;

/// A follower's recent contacts with its leader: when each AppendEntries
/// arrived and the commit index it carried.
#[derive(Debug, Default)]
pub(crate) struct Contacts(Mutex<VecDeque<(tokio::time::Instant, u64)>>);

impl Contacts {
    /// Records an AppendEntries accepted now, carrying `leader_commit`.
    pub(crate) fn record(&self, leader_commit: u64) {
        let mut contacts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if contacts.len() == CONTACTS_KEPT {
            contacts.pop_front();
        }
        contacts.push_back((tokio::time::Instant::now(), leader_commit));
    }

    /// The latest moment this node, having applied `applied`, is known
    /// to have held everything its leader had committed.
    fn current_as_of(&self, applied: u64) -> Option<tokio::time::Instant> {
        let contacts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        contacts
            .iter()
            .rev()
            .find(|(_, commit)| *commit <= applied)
            .map(|(at, _)| *at)
    }
}

/// How old this node's state is known to be at most; `None` if it was
/// never known current.
pub(crate) fn staleness(raft: &Raft, contacts: &Contacts) -> Option<Duration> {
    // Read in place: called for every read under `local`.
    let (leading, acked, applied) = {
        let receiver = raft.metrics();
        let metrics = receiver.borrow_watched();
        (
            metrics.state == openraft::ServerState::Leader,
            metrics.last_quorum_acked,
            metrics.last_applied.as_ref().map_or(0, |id| id.index),
        )
    };
    if leading {
        return acked.map(|at| openraft::Instant::elapsed(&*at));
    }
    contacts.current_as_of(applied).map(|at| at.elapsed())
}

/// The `local` check.
pub(crate) fn check_local(
    raft: &Raft,
    contacts: &Contacts,
    max_staleness: Duration,
) -> Result<(), ReadRefused> {
    match staleness(raft, contacts) {
        Some(age) if age <= max_staleness => Ok(()),
        Some(age) => Err(ReadRefused::Stale(format!(
            "this node's copy is {} ms old, more than cluster.max_staleness_ms ({} ms): it has lost touch with the leader; read at another node",
            age.as_millis(),
            max_staleness.as_millis()
        ))),
        None => Err(ReadRefused::Stale(
            "this node has not yet been in touch with a leader; read at another node".into(),
        )),
    }
}

/// On the leader: the index a linearizable read must see, confirmed by
/// a majority now.
pub(crate) async fn leader_read_index(raft: &Raft) -> Result<u64, String> {
    let linearizer = raft
        .get_read_linearizer(ReadPolicy::ReadIndex)
        .await
        .map_err(|e| e.to_string())?;
    Ok(linearizer.read_log_id().log_id().index)
}

/// Waiting reads, answered a round at a time.
pub(crate) type ReadWaiters = mpsc::UnboundedSender<oneshot::Sender<Result<u64, ReadRefused>>>;

/// The rounds of linearizable reads: each takes every read waiting when
/// it begins, gets one read index (here as leader, or from the leader),
/// and answers them all with it.
pub(crate) async fn read_rounds(
    raft: Raft,
    me: NodeId,
    addresses: Addresses,
    link: Link,
    timeout: Duration,
    mut waiting: mpsc::UnboundedReceiver<oneshot::Sender<Result<u64, ReadRefused>>>,
) {
    let mut leader_link: Option<(NodeId, PeerClient)> = None;
    while let Some(first) = waiting.recv().await {
        let mut round = vec![first];
        while let Ok(more) = waiting.try_recv() {
            round.push(more);
        }
        let index = tokio::time::timeout(
            timeout,
            read_index(&raft, me, &addresses, &link, &mut leader_link),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no leader confirmed the read within {} ms (cluster.write_timeout_ms)",
                timeout.as_millis()
            ))
        })
        .map_err(ReadRefused::Unavailable);
        for reader in round {
            let _ = reader.send(index.clone());
        }
    }
}

/// One read index: this node's own as leader, else the leader's. Tries
/// again (a new leader, an election) until the caller's timeout.
async fn read_index(
    raft: &Raft,
    me: NodeId,
    addresses: &Addresses,
    link: &Link,
    leader_link: &mut Option<(NodeId, PeerClient)>,
) -> Result<u64, String> {
    loop {
        let leader = raft.metrics().borrow_watched().current_leader;
        let attempt = match leader {
            None => Err("no leader is known".to_owned()),
            Some(leader) if leader == me => leader_read_index(raft).await,
            Some(leader) => {
                if leader_link.as_ref().is_none_or(|(to, _)| *to != leader) {
                    let Some(addr) = addresses.peer_of(raft, leader) else {
                        return Err(format!(
                            "the leader, node {leader}, has no address known here"
                        ));
                    };
                    *leader_link = Some((leader, PeerClient::new(leader, addr, link.clone())));
                }
                match leader_link.as_mut() {
                    // A leader that stopped answering (paused, cut off)
                    // is given up on as soon as another is elected, as
                    // a write is: the read then took up to the call's
                    // 5 s where a write took the election's 0.8.
                    Some((_, client)) => tokio::select! {
                        answer = client.call(&Request::ReadIndex, Duration::from_secs(5)) => match answer {
                            Ok(Response::ReadIndex(answer)) => answer,
                            Ok(_) => Err(format!("node {leader} gave an unexpected answer")),
                            Err(e) => Err(format!("asking node {leader}: {e}")),
                        },
                        () = leader_other_than(raft, leader) => {
                            // The call was cut short: its connection may
                            // hold a late answer, so it is not reused.
                            *leader_link = None;
                            Err(format!("node {leader} no longer leads"))
                        }
                    },
                    None => Err("no link to the leader".to_owned()),
                }
            }
        };
        match attempt {
            Ok(index) => return Ok(index),
            Err(e) => {
                tracing::debug!("a read index: {e}; trying again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Resolves once a node other than `known` leads.
async fn leader_other_than(raft: &Raft, known: NodeId) {
    let mut metrics = raft.metrics();
    loop {
        let now = metrics.borrow_watched().current_leader;
        if now.is_some_and(|leader| leader != known) {
            return;
        }
        if metrics.changed().await.is_err() {
            // The raft engine stopped: nothing will change.
            std::future::pending::<()>().await;
        }
    }
}

/// Waits until this node has applied `index`, at most `timeout`.
pub(crate) async fn applied(raft: &Raft, index: u64, timeout: Duration) -> Result<(), ReadRefused> {
    raft.wait(Some(timeout))
        .applied_index_at_least(Some(index), "a linearizable read")
        .await
        .map(|_| ())
        .map_err(|e| {
            ReadRefused::Unavailable(format!(
                "this node did not apply the log up to {index} in time: {e}"
            ))
        })
}
