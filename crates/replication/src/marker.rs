//! The replication marker: what the store records with each replicated
//! transaction (the last applied log ID, the membership, and the last
//! batch applied from each origin node), so that the database and the
//! marker always agree and openraft replays the log from exactly there.
//! The state machine writes it, snapshots carry it, and a node reads it
//! at start to choose its batch session.

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

use crate::types::{LogId, NodeId, StoredMembership};

/// What the store records with each replicated transaction.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Marker {
    pub(crate) applied: Option<LogId>,
    pub(crate) membership: StoredMembership,
    /// Per origin node: the `(session, seq)` of its last batch applied.
    pub(crate) origins: BTreeMap<NodeId, (u64, u64)>,
}

impl Marker {
    pub(crate) fn decode(bytes: Option<&[u8]>) -> io::Result<Marker> {
        match bytes {
            None => Ok(Marker::default()),
            Some(bytes) => postcard::from_bytes(bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the database's replication marker does not decode: {e}"),
                )
            }),
        }
    }

    pub(crate) fn encode(&self) -> io::Result<Vec<u8>> {
        postcard::to_stdvec(self).map_err(io::Error::other)
    }

    /// The session a node starting now takes: above any of its batches
    /// applied so far.
    pub(crate) fn next_session(&self, node: NodeId) -> u64 {
        self.origins
            .get(&node)
            .map_or(1, |(session, _)| session.saturating_add(1))
    }
}
