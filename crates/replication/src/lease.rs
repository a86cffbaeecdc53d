//! Whether this node, leading, may append a batch now.
//!
//! openraft refuses a write while its leader has heard from no quorum
//! within the leader lease (`election_timeout_max`), and so does a
//! leader just elected, before its first heartbeat is answered. A batch
//! handed to it without a responder is then dropped without a word,
//! and the next one, once a heartbeat renews the lease, is appended: a
//! node's later batch reaches the log ahead of an earlier one, which
//! can then never apply (the seed 000 runs met it after a leader kill;
//! the clients were told "not applied"). Checked first, a batch is not
//! handed over in that window: it goes again after a pause, in order
//! with those behind it.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver as _;

use crate::types::Raft;

/// The lease openraft keeps, and how much of it must be left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    length: Duration,
    /// The metrics read may be this old (a heartbeat), and the batch
    /// still has to reach the core.
    margin: Duration,
}

impl Lease {
    /// The lease of a node whose heartbeat is `heartbeat` and whose
    /// longest election timeout is `election_max`.
    pub(crate) fn new(heartbeat: Duration, election_max: Duration) -> Lease {
        Lease {
            length: election_max,
            margin: heartbeat,
        }
    }

    /// Whether a quorum acknowledged this leader recently enough that
    /// openraft takes a write now.
    pub(crate) fn holds(&self, raft: &Raft) -> bool {
        let receiver = raft.metrics();
        let metrics = receiver.borrow_watched();
        if metrics.membership_config.membership().voter_ids().count() <= 1 {
            return true;
        }
        metrics
            .last_quorum_acked
            .as_ref()
            .is_some_and(|at| openraft::Instant::elapsed(&**at) + self.margin < self.length)
    }
}
