//! Membership changes and leadership transfer on a running cluster
//! (`meridian cluster add-learner | promote | remove | transfer-leader`),
//! and the status report (`meridian cluster status`).
//!
//! A change is made by the leader: a node that is not the leader sends
//! the command to it over the peer link (authenticated by the cluster
//! secret, TLS when configured) and relays its answer. Who may ask a
//! node is the server's business: it takes these commands from the LDAP
//! administrator only.
//!
//! Nodes of the config are known by ID in the membership (each node
//! reaches them at its own configured address); a node added while the
//! cluster runs carries its addresses in the membership
//! ([`Addresses::runtime_node`]), so every node can reach it without a
//! config change.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use openraft::BasicNode;
use openraft::ChangeMembers;
use openraft::async_runtime::watch::WatchReceiver as _;
use serde::{Deserialize, Serialize};

use crate::Member;
use crate::types::{NodeId, Raft};

/// A command to the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminCommand {
    /// What this node knows of the cluster.
    Status,
    /// Adds a non-voting replica, reached at `peer`, serving `ldap`; it
    /// catches up from a snapshot and the log.
    AddLearner {
        /// Its `cluster.node_id`.
        id: NodeId,
        /// Its peer address, `IP:PORT`.
        peer: String,
        /// Its LDAP URL (for referrals and status).
        ldap: String,
    },
    /// Makes a learner a voter.
    Promote {
        /// The learner.
        id: NodeId,
    },
    /// Removes a voter or a learner from the cluster.
    Remove {
        /// The node.
        id: NodeId,
    },
    /// Hands leadership to a voter.
    TransferLeader {
        /// The voter to lead.
        id: NodeId,
    },
}

/// Why a command was not carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AdminError {
    /// The command makes no sense for this cluster (an unknown node, a
    /// voter to promote): LDAP unwillingToPerform.
    #[error("{0}")]
    Refused(String),
    /// It could not be done now (no leader, the leader unreachable, time
    /// ran out): LDAP unavailable; try again.
    #[error("{0}")]
    Unavailable(String),
}

/// Where each node is reached: the config's members, then the addresses
/// carried in the membership for nodes added at run time.
#[derive(Debug, Clone)]
pub(crate) struct Addresses {
    configured: Vec<Member>,
}

impl Addresses {
    pub(crate) fn new(configured: Vec<Member>) -> Addresses {
        Addresses { configured }
    }

    /// The membership's record of a node added at run time.
    pub(crate) fn runtime_node(peer: &str, ldap: &str) -> BasicNode {
        BasicNode {
            addr: format!("peer={peer} ldap={ldap}"),
        }
    }

    /// The membership's record of a node of the config: its ID only, the
    /// same on every node (each reaches it at its own configured address).
    pub(crate) fn configured_node(id: NodeId) -> BasicNode {
        BasicNode {
            addr: format!("node {id}"),
        }
    }

    /// A runtime node's `(peer, ldap)` from its membership record.
    fn parse_runtime(node: &BasicNode) -> Option<(&str, &str)> {
        let (peer, ldap) = node.addr.split_once(' ')?;
        Some((peer.strip_prefix("peer=")?, ldap.strip_prefix("ldap=")?))
    }

    /// `id`'s `(peer address, LDAP URL)`: the config's, else those its
    /// membership record carries.
    fn lookup(&self, id: NodeId, node: Option<&BasicNode>) -> Option<(String, String)> {
        match self.configured.iter().find(|m| m.id == id) {
            Some(m) => Some((m.peer.clone(), m.ldap.clone())),
            None => node
                .and_then(Self::parse_runtime)
                .map(|(peer, ldap)| (peer.to_owned(), ldap.to_owned())),
        }
    }

    /// Where `id` listens for peers, as this node reaches it.
    pub(crate) fn peer(&self, id: NodeId, node: Option<&BasicNode>) -> Option<String> {
        self.lookup(id, node).map(|(peer, _)| peer)
    }

    /// `id`'s LDAP URL.
    pub(crate) fn ldap(&self, id: NodeId, node: Option<&BasicNode>) -> Option<String> {
        self.lookup(id, node).map(|(_, ldap)| ldap)
    }

    /// `id`'s membership record in `raft`.
    fn record(raft: &Raft, id: NodeId) -> Option<BasicNode> {
        // Read in place: called per batch when followers refer writes.
        let receiver = raft.metrics();
        let metrics = receiver.borrow_watched();
        metrics
            .membership_config
            .membership()
            .get_node(&id)
            .cloned()
    }

    /// [`Self::peer`] with the membership record looked up in `raft`.
    pub(crate) fn peer_of(&self, raft: &Raft, id: NodeId) -> Option<String> {
        self.peer(id, Self::record(raft, id).as_ref())
    }

    /// [`Self::ldap`] with the membership record looked up in `raft`.
    pub(crate) fn ldap_of(&self, raft: &Raft, id: NodeId) -> Option<String> {
        self.ldap(id, Self::record(raft, id).as_ref())
    }
}

/// The voters and learners of the membership in effect.
fn membership(raft: &Raft) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    let metrics = raft.metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let learners = membership.learner_ids().collect();
    (voters, learners)
}

/// Carries out `command` on the leader (this node); `patience` bounds
/// the wait for a change to commit or a transfer to complete.
pub(crate) async fn execute(
    raft: &Raft,
    addresses: &Addresses,
    link: &crate::wire::Link,
    command: AdminCommand,
    patience: Duration,
) -> Result<String, AdminError> {
    let (voters, learners) = membership(raft);
    let describe = |e: &dyn std::fmt::Display| AdminError::Unavailable(e.to_string());
    match command {
        AdminCommand::Status => {
            let load = |counter: &std::sync::atomic::AtomicU64| {
                counter.load(std::sync::atomic::Ordering::Relaxed)
            };
            let sent = (load(&link.sent), load(&link.sent_uncompressed));
            Ok(status_text(raft, addresses, sent))
        }
        AdminCommand::AddLearner { id, peer, ldap } => {
            if voters.contains(&id) || learners.contains(&id) {
                let role = if voters.contains(&id) {
                    "voter"
                } else {
                    "learner"
                };
                return Err(AdminError::Refused(format!(
                    "node {id} is already a {role} of the cluster"
                )));
            }
            check_new_node(id, &peer, &ldap)?;
            let node = Addresses::runtime_node(&peer, &ldap);
            within(patience, raft.add_learner(id, node, false))
                .await?
                .map_err(|e| describe(&e))?;
            Ok(format!(
                "node {id} added as a learner (peer {peer}, {ldap}); it catches up from a snapshot and the log; promote it once `meridian cluster status` shows its lag near 0"
            ))
        }
        AdminCommand::Promote { id } => {
            if voters.contains(&id) {
                return Err(AdminError::Refused(format!("node {id} is already a voter")));
            }
            if !learners.contains(&id) {
                return Err(AdminError::Refused(format!(
                    "node {id} is not a learner of the cluster: add it with add-learner first"
                )));
            }
            caught_up(raft, id, patience).await?;
            let change = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
            within(patience, raft.change_membership(change, false))
                .await?
                .map_err(|e| describe(&e))?;
            Ok(format!("node {id} is a voter"))
        }
        AdminCommand::Remove { id } => {
            let change = if voters.contains(&id) {
                if voters.len() == 1 {
                    return Err(AdminError::Refused(format!(
                        "node {id} is the only voter: a cluster needs one"
                    )));
                }
                ChangeMembers::RemoveVoters(BTreeSet::from([id]))
            } else if learners.contains(&id) {
                ChangeMembers::RemoveNodes(BTreeSet::from([id]))
            } else {
                return Err(AdminError::Refused(format!(
                    "node {id} is not a member of the cluster"
                )));
            };
            // Where it is reached, read before the membership forgets it.
            let reach = addresses.peer_of(raft, id);
            within(patience, raft.change_membership(change, false))
                .await?
                .map_err(|e| describe(&e))?;
            if let Some(addr) = reach.filter(|_| id != *raft.node_id()) {
                crate::removal::tell(id, addr, link).await;
            }
            Ok(format!(
                "node {id} removed; stop it, and take it out of cluster.nodes and cluster.learners in every node's config (a leader adds the learners its config names)"
            ))
        }
        AdminCommand::TransferLeader { id } => {
            if !voters.contains(&id) {
                return Err(AdminError::Refused(format!(
                    "node {id} is not a voter: only a voter can lead"
                )));
            }
            let me = *raft.node_id();
            if id == me {
                return Ok(format!("node {id} leads already"));
            }
            raft.trigger()
                .transfer_leader(id)
                .await
                .map_err(|e| describe(&e))?;
            let mut metrics = raft.metrics();
            let handed = async {
                loop {
                    if metrics.borrow_watched().current_leader == Some(id) {
                        return true;
                    }
                    if metrics.changed().await.is_err() {
                        return false;
                    }
                }
            };
            match tokio::time::timeout(patience, handed).await {
                Ok(true) => Ok(format!("node {id} leads")),
                // The metrics end with this node's Raft (a storage
                // failure stops it): nothing more will be seen here.
                Ok(false) => Err(AdminError::Unavailable(format!(
                    "node {me} stopped taking part in the cluster before node {id} took over (its log says why); see `meridian cluster status` at another node"
                ))),
                Err(_) => Err(AdminError::Unavailable(format!(
                    "node {id} did not take over within {patience:?}; see `meridian cluster status`"
                ))),
            }
        }
    }
}

/// The node IDs a cluster may use (`cluster.node_id`).
const NODE_IDS: std::ops::RangeInclusive<NodeId> = 1..=4095;

/// Entries a learner may still lack when it is promoted: a voter that
/// lags far behind adds nothing to the cluster's safety, and one more
/// failure would stop its writes while it catches up.
const PROMOTE_MAX_LAG: u64 = 1024;

/// Refuses an ID out of range, a peer address that is not `HOST:PORT`
/// and an LDAP URL that is not `ldap://` or `ldaps://`: a node added
/// with one of those could never be reached.
fn check_new_node(id: NodeId, peer: &str, ldap: &str) -> Result<(), AdminError> {
    if !NODE_IDS.contains(&id) {
        return Err(AdminError::Refused(format!(
            "node ID {id} is out of range: node IDs are {}..={}",
            NODE_IDS.start(),
            NODE_IDS.end()
        )));
    }
    let port_ok = peer
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !port_ok {
        return Err(AdminError::Refused(format!(
            "the peer address {peer:?} is not HOST:PORT (e.g. 10.0.0.5:4389)"
        )));
    }
    let scheme_ok = ["ldap://", "ldaps://"].iter().any(|scheme| {
        ldap.strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty())
    });
    if !scheme_ok {
        return Err(AdminError::Refused(format!(
            "the LDAP URL {ldap:?} is not ldap://HOST:PORT or ldaps://HOST:PORT"
        )));
    }
    Ok(())
}

/// Waits, up to `patience`, until learner `id` holds the log to within
/// [`PROMOTE_MAX_LAG`] entries of this leader's; unavailable if it does
/// not (it may be unreachable, or still taking a snapshot).
async fn caught_up(raft: &Raft, id: NodeId, patience: Duration) -> Result<(), AdminError> {
    let lag = |raft: &Raft| {
        let metrics = raft.metrics().borrow_watched().clone();
        let last = metrics.last_log_index.unwrap_or(0);
        let matched = metrics
            .replication
            .as_ref()
            .and_then(|progress| progress.get(&id).cloned())
            .flatten()
            .map(|log_id| log_id.index);
        (matched, last)
    };
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let (matched, last) = lag(raft);
        if matched.is_some_and(|matched| last.saturating_sub(matched) <= PROMOTE_MAX_LAG) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let held = matched.map_or_else(|| "nothing yet".to_owned(), |m| format!("up to {m}"));
            return Err(AdminError::Unavailable(format!(
                "node {id} has not caught up: it holds the log {held} of {last} (promoted, it would count toward the majority without being able to help make one); check that it runs and is reachable, and promote it once `meridian cluster status` shows its lag near 0"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `future`, or unavailable once `patience` runs out (the change may yet
/// complete: the leader goes on with it).
async fn within<T>(
    patience: Duration,
    future: impl std::future::Future<Output = T>,
) -> Result<T, AdminError> {
    tokio::time::timeout(patience, future).await.map_err(|_| {
        AdminError::Unavailable(format!(
            "not done within {patience:?}; it may yet complete: see `meridian cluster status`"
        ))
    })
}

/// What this node knows of the cluster, one `key: value` per line.
/// `peer_bytes_sent`: every message this node sent its peers, in bytes as
/// framed (LZ4 where it helps) and before compression.
pub(crate) fn status_text(
    raft: &Raft,
    addresses: &Addresses,
    peer_bytes_sent: (u64, u64),
) -> String {
    let metrics = raft.metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let me = metrics.id;
    let mut text = String::new();
    let _ = writeln!(text, "node: {me}");
    let _ = writeln!(text, "role: {}", role_name(metrics.state));
    match metrics.current_leader {
        Some(leader) => {
            let url = addresses.ldap(leader, membership.get_node(&leader));
            let _ = writeln!(text, "leader: {leader} {}", url.unwrap_or_default());
        }
        None => {
            let _ = writeln!(text, "leader: none known");
        }
    }
    let _ = writeln!(text, "term: {}", metrics.current_term);
    let index = |id: Option<&crate::types::LogId>| id.map_or(0, |id| id.index);
    let _ = writeln!(text, "applied: {}", index(metrics.last_applied.as_ref()));
    let _ = writeln!(text, "last log: {}", metrics.last_log_index.unwrap_or(0));
    let _ = writeln!(text, "snapshot: {}", index(metrics.snapshot.as_ref()));
    let ids = |ids: &mut dyn Iterator<Item = NodeId>| {
        ids.map(|id| id.to_string()).collect::<Vec<_>>().join(" ")
    };
    let _ = writeln!(text, "voters: {}", ids(&mut membership.voter_ids()));
    let _ = writeln!(text, "learners: {}", ids(&mut membership.learner_ids()));
    let (framed, uncompressed) = peer_bytes_sent;
    let _ = writeln!(
        text,
        "peer bytes sent: {framed} ({uncompressed} before compression)"
    );
    let last = metrics.last_log_index.unwrap_or(0);
    let nodes: BTreeMap<NodeId, BasicNode> = membership
        .nodes()
        .map(|(id, node)| (*id, node.clone()))
        .collect();
    if let Some(replication) = &metrics.replication {
        for (id, matched) in replication {
            if *id == me {
                continue;
            }
            let matched = index(matched.as_ref());
            let peer = addresses.peer(*id, nodes.get(id)).unwrap_or_default();
            let _ = writeln!(
                text,
                "replica: {id} {peer} matched={matched} lag={}",
                last.saturating_sub(matched)
            );
        }
    }
    text
}

/// openraft's server state, as Meridian names it.
pub(crate) fn role_name(state: openraft::ServerState) -> &'static str {
    match state {
        openraft::ServerState::Leader => "leader",
        openraft::ServerState::Follower => "follower",
        openraft::ServerState::Candidate => "candidate",
        openraft::ServerState::Learner => "learner",
        openraft::ServerState::Shutdown => "shutdown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_node_is_reached_at_its_recorded_addresses_a_configured_one_at_the_config() {
        let addresses = Addresses::new(vec![Member {
            id: 1,
            peer: "10.0.0.1:7000".into(),
            ldap: "ldap://10.0.0.1".into(),
        }]);
        let runtime = Addresses::runtime_node("10.0.0.4:7000", "ldap://10.0.0.4:389");
        assert_eq!(
            addresses.peer(4, Some(&runtime)).as_deref(),
            Some("10.0.0.4:7000")
        );
        assert_eq!(
            addresses.ldap(4, Some(&runtime)).as_deref(),
            Some("ldap://10.0.0.4:389")
        );
        // The config wins over the membership's record.
        assert_eq!(
            addresses.peer(1, Some(&runtime)).as_deref(),
            Some("10.0.0.1:7000")
        );
        // A configured node's record carries no address.
        let configured = Addresses::configured_node(2);
        assert_eq!(addresses.peer(2, Some(&configured)), None);
        assert_eq!(addresses.peer(2, None), None);
    }
}
