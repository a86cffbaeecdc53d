//! `[cluster]`: replication's keys, their defaults and their checks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// `cluster.ack`: when a write is answered.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Ack {
    /// Once a majority of voters holds it durably.
    Majority,
    /// Once every voter does.
    All,
}

/// `cluster.conflicts`: what happens when writes prepared at two nodes
/// change one entry.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Conflicts {
    /// Both apply, in log order: the later one's values stand.
    LastWriterWins,
    /// The first committed stands; a modify, delete or rename prepared
    /// before it was committed is refused (assertionFailed, 122) on every
    /// node alike.
    FirstWins,
}

/// `cluster.followers`: what a follower does with a write.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FollowerWrites {
    /// Forward it to the leader, and answer once it is applied here.
    Forward,
    /// Refer the client to the leader (result 10).
    Referral,
}

/// `cluster.reads`: what a search or compare sees.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Reads {
    /// This node's state.
    Session,
    /// Every write acknowledged anywhere before the read began.
    Linearizable,
    /// This node's state, refused once not known current for
    /// `max_staleness_ms`.
    Local,
}

/// `[cluster]`: a Raft-replicated directory (docs/replication.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// This node's ID: one of `cluster.nodes`.
    pub node_id: u64,
    /// `[[cluster.nodes]]`: every voting node, the same list on each.
    pub nodes: Vec<ClusterNodeConfig>,
    /// `[[cluster.learners]]`: read-only replicas that take the log
    /// without voting (seed 001's read replicas); the same list on each
    /// node. Writes sent to a learner are forwarded (or referred).
    pub learners: Vec<ClusterNodeConfig>,
    /// `IP:PORT` this node listens on for peers, when it is not its
    /// `peer` address in `nodes` (behind a proxy or a NAT); empty: that.
    pub peer_listen: String,
    /// The secret every node proves to the others when it connects
    /// (keep the file 0600); required with `nodes`.
    pub secret: String,
    /// This node's certificate chain for peer links (PEM); with
    /// `tls_key_file` and `tls_ca_file`, every peer link is TLS with both
    /// ends verified against `tls_ca_file`.
    pub tls_certificate_file: Option<PathBuf>,
    /// Its private key (PEM).
    pub tls_key_file: Option<PathBuf>,
    /// The CA certificates that sign every node's certificate (PEM).
    pub tls_ca_file: Option<PathBuf>,
    /// When a write is answered: once a `"majority"` of voters holds it
    /// durably, or once `"all"` do.
    pub ack: Ack,
    /// The voter that should lead (its `id`; 0: none): the leader hands
    /// it the lead once it has held the whole log for three seconds, so
    /// writes made at its site cost one round trip less.
    pub preferred_leader: u64,
    /// `[cluster.preferred_leaders]`: the voter that should lead each
    /// other partition, by its naming context's suffix (one of
    /// `directory.additional_suffixes`). In a cluster every naming
    /// context is a partition with its own Raft group, so each can be
    /// led (written) at its own site; `preferred_leader` is the first's.
    pub preferred_leaders: BTreeMap<String, u64>,
    /// Writes at two nodes to one entry: `"last-writer-wins"` (both
    /// apply, the later last) or `"first-wins"` (the later is refused).
    pub conflicts: Conflicts,
    /// What a follower does with a write: `"forward"` it to the leader
    /// and answer once it is applied here, or `"referral"` (result 10
    /// with the leader's `ldap` URL).
    pub followers: FollowerWrites,
    /// How long a write waits for a leader (or for the cluster to
    /// confirm it after a failover) before it gets `unavailable` (52).
    pub write_timeout_ms: u64,
    /// How many batches of this node's writes may be on their way to the
    /// leader's log at once, kept in order. One batch per write latency
    /// held a site across an ocean to `storage.max_batch` writes per
    /// round trip.
    pub batches_in_flight: usize,
    /// What a search or compare sees: `"session"` (this node's state; a
    /// connection reads its own writes, as they are answered once
    /// applied here), `"linearizable"` (every write acknowledged anywhere
    /// before the read began: the node asks the leader for its commit
    /// index, confirmed by a majority, and waits until it has applied
    /// it), or `"local"` (this node's state, refused with busy (51) once
    /// it has not been known current for `max_staleness_ms`).
    pub reads: Reads,
    /// With `reads = "local"`: how old this node's state may be.
    pub max_staleness_ms: u64,
    /// The leader's heartbeat interval. A heartbeat not answered within
    /// it counts as failed, so across a WAN it must exceed the longest
    /// round trip between two nodes (by half: `cluster local --topology`
    /// sets 1.5 times it).
    pub heartbeat_ms: u64,
    /// The least time a follower waits without a heartbeat before it
    /// stands for election (the most is one and a half times this, which
    /// is also the leader lease: no vote is granted before it ends).
    pub election_timeout_ms: u64,
    /// Log entries applied since the last snapshot that make a new one;
    /// the log before a snapshot is then purged.
    pub snapshot_every_entries: u64,
    /// Bytes of log not yet purged that make a new snapshot (whichever
    /// of this and `snapshot_every_entries` comes first); each snapshot
    /// waits for between three and five quarters of it, drawn per node
    /// and per snapshot, so that the nodes do not all copy at once.
    pub snapshot_log_bytes: u64,
    /// The largest message one node sends another.
    pub max_message_bytes: usize,
}

/// One `[[cluster.nodes]]` entry.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterNodeConfig {
    /// Its ID, unique in the cluster, 1..=4095 (its entryCSN server ID).
    pub id: u64,
    /// `IP:PORT` it listens on for peers.
    pub peer: String,
    /// Its LDAP URL, for referrals and status (e.g. `ldap://host:389`).
    pub ldap: String,
}

impl ClusterConfig {
    /// Replication is on.
    pub fn enabled(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// This node's entry of `nodes` or `learners`.
    pub fn this_node(&self) -> Option<&ClusterNodeConfig> {
        self.all_nodes().find(|node| node.id == self.node_id)
    }

    /// Voters, then learners.
    pub fn all_nodes(&self) -> impl Iterator<Item = &ClusterNodeConfig> {
        self.nodes.iter().chain(&self.learners)
    }

    /// This node is a learner.
    pub fn is_learner(&self) -> bool {
        self.learners.iter().any(|node| node.id == self.node_id)
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: String| Err(ConfigError::Invalid { key, reason });
        if !self.enabled() {
            return Ok(());
        }
        for node in self.all_nodes() {
            if node.id == 0 || node.id > 4095 {
                return invalid(
                    "cluster.nodes",
                    format!(
                        "node ID {}: IDs are 1..=4095 (entryCSN's server ID)",
                        node.id
                    ),
                );
            }
            if self.all_nodes().filter(|other| other.id == node.id).count() > 1 {
                return invalid(
                    "cluster.nodes",
                    format!("node ID {} appears twice", node.id),
                );
            }
            if let Err(e) = node.peer.parse::<SocketAddr>() {
                return invalid(
                    "cluster.nodes",
                    format!(
                        "node {}: peer {:?} is not an IP:PORT address ({e})",
                        node.id, node.peer
                    ),
                );
            }
        }
        if !self.peer_listen.is_empty()
            && let Err(e) = self.peer_listen.parse::<SocketAddr>()
        {
            return invalid(
                "cluster.peer_listen",
                format!("{:?} is not an IP:PORT address ({e})", self.peer_listen),
            );
        }
        if self.this_node().is_none() {
            return invalid(
                "cluster.node_id",
                format!(
                    "{} is not one of cluster.nodes or cluster.learners",
                    self.node_id
                ),
            );
        }
        if self.preferred_leader != 0 && !self.nodes.iter().any(|n| n.id == self.preferred_leader) {
            return invalid(
                "cluster.preferred_leader",
                format!(
                    "{} is not the id of one of cluster.nodes (only a voter leads; 0: none)",
                    self.preferred_leader
                ),
            );
        }
        for (suffix, id) in &self.preferred_leaders {
            if !self.nodes.iter().any(|n| n.id == *id) {
                return invalid(
                    "cluster.preferred_leaders",
                    format!(
                        "{suffix:?} = {id}: {id} is not the id of one of cluster.nodes (only a voter leads)"
                    ),
                );
            }
        }
        let tls = [
            &self.tls_certificate_file,
            &self.tls_key_file,
            &self.tls_ca_file,
        ];
        if tls.iter().any(|f| f.is_some()) && !tls.iter().all(|f| f.is_some()) {
            return invalid(
                "cluster.tls_certificate_file",
                "peer TLS needs all three of cluster.tls_certificate_file, tls_key_file and tls_ca_file".into(),
            );
        }
        if self.secret.len() < 16 {
            return invalid(
                "cluster.secret",
                "give at least 16 characters: nodes prove it to each other".into(),
            );
        }
        if self.heartbeat_ms == 0 || self.election_timeout_ms < 3 * self.heartbeat_ms {
            return invalid(
                "cluster.election_timeout_ms",
                format!(
                    "{} must be at least three heartbeats (cluster.heartbeat_ms = {})",
                    self.election_timeout_ms, self.heartbeat_ms
                ),
            );
        }
        if self.reads == Reads::Local && self.max_staleness_ms < self.heartbeat_ms {
            return invalid(
                "cluster.max_staleness_ms",
                format!(
                    "{} is less than a heartbeat (cluster.heartbeat_ms = {}): no follower could serve a read",
                    self.max_staleness_ms, self.heartbeat_ms
                ),
            );
        }
        if self.write_timeout_ms == 0 {
            return invalid("cluster.write_timeout_ms", "give at least 1".into());
        }
        if !(1..=256).contains(&self.batches_in_flight) {
            return invalid(
                "cluster.batches_in_flight",
                format!("{} is not between 1 and 256", self.batches_in_flight),
            );
        }
        if self.max_message_bytes < 1 << 20 {
            return invalid("cluster.max_message_bytes", "give at least 1048576".into());
        }
        Ok(())
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            node_id: 0,
            nodes: Vec::new(),
            learners: Vec::new(),
            peer_listen: String::new(),
            tls_certificate_file: None,
            tls_key_file: None,
            tls_ca_file: None,
            secret: String::new(),
            ack: Ack::Majority,
            conflicts: Conflicts::LastWriterWins,
            preferred_leader: 0,
            preferred_leaders: BTreeMap::new(),
            followers: FollowerWrites::Forward,
            write_timeout_ms: 10_000,
            // Enough to fill an ocean's round trip at a site's full rate
            // (measured: docs/reports/seed000-geo.md), and each one
            // bounded by storage.max_batch.
            batches_in_flight: 8,
            reads: Reads::Session,
            max_staleness_ms: 5_000,
            // A leader lost is noticed within about a third of a second,
            // and a heartbeat every 50 ms costs nothing on a LAN.
            heartbeat_ms: 50,
            election_timeout_ms: 300,
            // A snapshot copies the whole database: made by the volume
            // written (the log's bytes), the entry count only a backstop.
            snapshot_every_entries: 1_000_000,
            snapshot_log_bytes: 256 << 20,
            max_message_bytes: 256 << 20,
        }
    }
}
