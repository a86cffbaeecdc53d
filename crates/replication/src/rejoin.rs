//! A voter that starts with nothing: new, or back after losing its disk.
//!
//! A node that lost its disk and is started again under its old
//! configuration is still a voter in the cluster's membership, but it
//! forgot every entry it acknowledged. Two things then go wrong (issue
//! 44, R2):
//!
//! - The leader knows how far the node's log reached and finds it gone
//!   back; openraft will not move a follower's progress backwards on its
//!   own, so the stream to the node stalls and it serves an empty
//!   directory until the leader changes.
//! - Its vote is unsafe: with an empty log it would vote for any
//!   candidate, also one that lacks entries this node's earlier life
//!   helped commit, and such a leader would lose acknowledged writes
//!   (Raft's "a server that lost its disk must not vote" rule).
//!
//! So a voter whose log, vote and applied state are all empty at start
//! asks its peers where the cluster is ([`Request::StartedEmpty`]); each
//! answers with its commit index. (The leader streams the node from
//! where its log now ends by itself: openraft's `allow_log_reversion` is
//! on for every follower, `lib.rs`.) Until the
//! node has applied that index it grants no vote or pre-vote, and until
//! some peer has answered at all it grants none either: a new cluster's
//! peers answer at once with nothing committed, so its first election
//! is not held up. A cluster whose every other voter is out of reach
//! waits for them, which is what safety asks of it.
//!
//! [`Request::StartedEmpty`]: crate::wire::Request::StartedEmpty

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver as _;

use crate::admin::Addresses;
use crate::network::PeerClient;
use crate::types::{NodeId, Raft};
use crate::wire::{Link, Request, Response};

/// How often the peers are asked while none has answered.
const ASK_EVERY: Duration = Duration::from_millis(300);
/// How long one peer has to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Not yet known: no peer has answered.
const UNKNOWN: u64 = u64::MAX;

/// Whether this node may vote, for the peer service to ask.
#[derive(Debug, Default)]
pub(crate) struct VoteGuard {
    /// The log index this node must have applied before it votes:
    /// [`UNKNOWN`] until a peer has answered, 0 when it may vote.
    until: AtomicU64,
}

impl VoteGuard {
    /// A guard that never refuses (a node that started with a log).
    pub(crate) fn open() -> Arc<VoteGuard> {
        Arc::new(VoteGuard::default())
    }

    /// A guard that refuses until a peer has said where the cluster is.
    fn closed() -> Arc<VoteGuard> {
        Arc::new(VoteGuard {
            until: AtomicU64::new(UNKNOWN),
        })
    }

    /// Why this node may not vote now, if it may not.
    pub(crate) fn refusal(&self, raft: &Raft, me: NodeId) -> Option<String> {
        let until = self.until.load(Ordering::Acquire);
        if until == 0 {
            return None;
        }
        if until == UNKNOWN {
            return Some(format!(
                "node {me} started with an empty log and no peer has yet said where the cluster is: it does not vote before one has"
            ));
        }
        let applied = raft
            .metrics()
            .borrow_watched()
            .last_applied
            .as_ref()
            .map_or(0, |id| id.index);
        if applied >= until {
            // Caught up: open for good.
            self.until.store(0, Ordering::Release);
            return None;
        }
        Some(format!(
            "node {me} started with an empty log and has applied up to index {applied} of the {until} the cluster had committed: it does not vote before it has them all"
        ))
    }
}

/// The guard for a node starting now: closed, and its peers asked on a
/// task of its own, when it is a voter that starts with nothing;
/// open otherwise.
pub(crate) fn guard_votes(
    raft: &Raft,
    me: NodeId,
    started_empty: bool,
    peers: Vec<NodeId>,
    addresses: Addresses,
    link: Link,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Arc<VoteGuard> {
    if !started_empty || peers.is_empty() {
        return VoteGuard::open();
    }
    let guard = VoteGuard::closed();
    tasks.push(tokio::spawn(ask_peers(
        raft.clone(),
        me,
        peers,
        addresses,
        link,
        Arc::clone(&guard),
    )));
    guard
}

/// Asks every peer where the cluster is, until the leader has answered
/// (its stream to this node restarts from the beginning) or this node
/// has caught up, raising the guard's index to the highest commit
/// index heard.
async fn ask_peers(
    raft: Raft,
    me: NodeId,
    peers: Vec<NodeId>,
    addresses: Addresses,
    link: Link,
    guard: Arc<VoteGuard>,
) {
    let mut clients: Vec<PeerClient> = peers
        .iter()
        .filter_map(|peer| {
            let addr = addresses.peer_of(&raft, *peer)?;
            Some(PeerClient::new(*peer, addr, link.clone()))
        })
        .collect();
    let mut leader_answered = false;
    loop {
        let mut highest: Option<u64> = None;
        for client in &mut clients {
            match client.call(&Request::StartedEmpty(me), ANSWER_WITHIN).await {
                Ok(Response::StartedEmpty { committed, leads }) => {
                    highest = Some(highest.unwrap_or(0).max(committed));
                    leader_answered |= leads;
                }
                Ok(_) => tracing::debug!("a peer did not understand StartedEmpty"),
                Err(e) => tracing::debug!("asking a peer where the cluster is: {e}"),
            }
        }
        if let Some(committed) = highest {
            let before = guard.until.load(Ordering::Acquire);
            let until = if before == UNKNOWN {
                committed
            } else {
                before.max(committed)
            };
            if before != 0 {
                guard.until.store(until, Ordering::Release);
            }
            if until > 0 && before == UNKNOWN {
                tracing::warn!(
                    node = me,
                    committed = until,
                    "this node started with an empty log in a cluster that has committed entries (a new node, or one that lost its disk): it catches up from the others and votes once it has applied index {until}"
                );
            }
            let caught_up = guard.refusal(&raft, me).is_none();
            if until == 0 || (leader_answered && caught_up) {
                return;
            }
        }
        tokio::time::sleep(if leader_answered {
            ANSWER_WITHIN
        } else {
            ASK_EVERY
        })
        .await;
    }
}

/// A peer's answer to a node that started with nothing: this node's
/// commit index and whether it leads.
pub(crate) fn answer(raft: &Raft) -> Response {
    let metrics = raft.metrics().borrow_watched().clone();
    Response::StartedEmpty {
        committed: metrics.local_committed.as_ref().map_or(0, |id| id.index),
        leads: metrics.current_leader == Some(metrics.id),
    }
}
