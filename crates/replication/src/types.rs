//! The types openraft is instantiated with, and what a log entry holds.

use std::fmt;

use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// Meridian's Raft: node IDs are `u64` (the config's `cluster.node_id`),
    /// a node is known by its peer address, an entry's data is a [`Batch`].
    pub Meridian:
        D = Batch,
        R = (),
        NodeId = u64,
        Node = openraft::BasicNode,
);

/// A node's ID.
pub type NodeId = u64;
/// A log entry's ID.
pub type LogId = openraft::alias::LogIdOf<Meridian>;
/// A log entry.
pub type Entry = openraft::alias::EntryOf<Meridian>;
/// A vote.
pub type Vote = openraft::alias::VoteOf<Meridian>;
/// The membership as applied.
pub type StoredMembership = openraft::alias::StoredMembershipOf<Meridian>;
/// The Raft handle.
pub type Raft = openraft::Raft<Meridian, crate::state_machine::StateMachine>;

/// One log entry's data: the commands one node's proposer gathered, in
/// the journal's record encoding, with where they came from.
///
/// `origin`, `session` and `seq` make a batch unique: a batch forwarded
/// twice (its first leader died before answering) is applied once, as
/// every node skips a batch whose `(session, seq)` is not above the last
/// one applied from that origin. A node takes a new, higher session at
/// each start (at least the clock's microseconds, so also after it lost
/// its disk), so a copy from its previous life never applies after it,
/// and its new batches are never mistaken for its old ones.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The node whose clients sent these commands, and which answers them.
    pub origin: NodeId,
    /// The origin's session: higher at each of its starts.
    pub session: u64,
    /// The batch's number in its session, from 1, without gaps.
    pub seq: u64,
    /// The commands (`meridian_store::replicated::encode_commands`).
    #[serde(with = "crate::raw_bytes")]
    pub commands: Vec<u8>,
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "batch {}/{}/{} ({} bytes)",
            self.origin,
            self.session,
            self.seq,
            self.commands.len()
        )
    }
}
