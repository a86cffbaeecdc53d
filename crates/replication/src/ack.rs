//! `cluster.ack = "all"`: a write is answered once every voter holds its
//! log entry, not only a majority. Only the leader knows how far each
//! follower's log goes (its replication progress); a follower asks it.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver as _;

use crate::types::{NodeId, Raft};

/// On the leader: waits until every voter's log holds `index`, at most
/// `timeout`. False if this node stops leading, or time runs out.
pub(crate) async fn every_voter_holds(
    raft: &Raft,
    me: NodeId,
    index: u64,
    timeout: Duration,
) -> bool {
    let mut metrics = raft.metrics();
    let check = async {
        loop {
            {
                let now = metrics.borrow_watched();
                if now.current_leader != Some(me) {
                    return false;
                }
                let replication = now.replication.as_ref();
                let all = now.membership_config.membership().voter_ids().all(|voter| {
                    voter == me
                        || replication
                            .and_then(|r| r.get(&voter))
                            .and_then(|matched| matched.as_ref())
                            .is_some_and(|matched| matched.index >= index)
                });
                if all {
                    return true;
                }
            }
            if metrics.changed().await.is_err() {
                return false;
            }
        }
    };
    tokio::time::timeout(timeout, check).await.unwrap_or(false)
}
