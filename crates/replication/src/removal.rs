//! A node taken out of the cluster knows it.
//!
//! Once the leader commits a membership without a node, it no longer
//! replicates to it, and the node may never see that membership: it
//! went on calling itself a follower of its last leader and serving
//! reads from a copy nothing updates any more (issue 44, R4). The leader
//! now tells it ([`Request::Removed`]) after the change; the node also
//! counts itself removed when the membership it knows leaves it out.
//! Either way its status says `removed` and it refuses reads, until a
//! newer membership reaches it (it was added again).
//!
//! [`Request::Removed`]: crate::wire::Request::Removed

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver as _;

use crate::network::PeerClient;
use crate::types::{LogId, NodeId, Raft, StoredMembership};
use crate::wire::{Link, Request};

/// How long the leader tries to tell a removed node.
const TELL_WITHIN: Duration = Duration::from_secs(2);

/// What this node was told of its removal.
#[derive(Debug, Default)]
pub(crate) struct Removal {
    /// The membership log ID this node knew when told it was removed.
    told_at: Mutex<Option<Option<LogId>>>,
}

impl Removal {
    /// The leader says this node was removed.
    pub(crate) fn told(&self, raft: &Raft) {
        let at = *raft.metrics().borrow_watched().membership_config.log_id();
        *self.lock() = Some(at);
    }

    /// Whether node `me` is out of the cluster now.
    pub(crate) fn removed(&self, raft: &Raft, me: NodeId) -> bool {
        let receiver = raft.metrics();
        let metrics = receiver.borrow_watched();
        if left_out(&metrics.membership_config, me) {
            return true;
        }
        // Told, and no membership newer than the one known then.
        self.lock()
            .is_some_and(|at| at == *metrics.membership_config.log_id())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Option<LogId>>> {
        self.told_at.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `membership` names other nodes and not `me` (a node not yet
/// added, with no membership at all, is not removed).
fn left_out(membership: &StoredMembership, me: NodeId) -> bool {
    let membership = membership.membership();
    let named = membership.nodes().next().is_some();
    named && !membership.nodes().any(|(id, _)| *id == me)
}

/// On the leader, after node `id`'s removal committed: tells it, at
/// `addr`, best effort (it may be down; it then learns nothing, and
/// an operator stops it as the removal's answer says).
pub(crate) async fn tell(id: NodeId, addr: String, link: &Link) {
    let mut client = PeerClient::new(id, addr, link.clone());
    if let Err(e) = client.call(&Request::Removed, TELL_WITHIN).await {
        tracing::debug!(node = id, "telling a removed node: {e}");
    }
}
