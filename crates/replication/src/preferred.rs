//! Leadership kept at a preferred node (`cluster.preferred_leader`).
//!
//! A write costs a round trip from the leader to a majority, and one more
//! from any other node to the leader (`docs/design/wan.md`): across
//! continents the leader belongs where most writes are made. Elections
//! put it wherever the first timer fires; this task, on the leader,
//! hands leadership to the preferred voter once that voter has held the
//! whole log for [`HEALTHY_CHECKS`] checks in a row, so a node that has
//! just come back, and may go again, is not handed it at once.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver as _;

use crate::types::{NodeId, Raft};

/// How often the leader looks.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Consecutive checks the preferred voter must be caught up before the
/// lead is handed to it.
const HEALTHY_CHECKS: u32 = 3;
/// Entries the preferred voter may be behind and still count as caught
/// up (a write in flight).
const SLACK: u64 = 64;

pub(crate) async fn keep_preferred_leader(raft: Raft, me: NodeId, preferred: NodeId) {
    if preferred == me {
        // Only another node hands the lead to this one.
        return;
    }
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut healthy = 0u32;
    loop {
        tick.tick().await;
        let caught_up = {
            let receiver = raft.metrics();
            let metrics = receiver.borrow_watched();
            let voter = metrics
                .membership_config
                .membership()
                .voter_ids()
                .any(|id| id == preferred);
            let matched = metrics
                .replication
                .as_ref()
                .and_then(|r| r.get(&preferred))
                .and_then(|m| m.as_ref())
                .map_or(0, |m| m.index);
            let last = metrics.last_log_index.unwrap_or(0);
            (metrics.current_leader == Some(me) && voter)
                .then(|| last.saturating_sub(matched) <= SLACK)
        };
        healthy = match caught_up {
            Some(true) => healthy + 1,
            _ => 0,
        };
        if healthy >= HEALTHY_CHECKS {
            healthy = 0;
            tracing::info!(
                to = preferred,
                "handing leadership to cluster.preferred_leader"
            );
            if let Err(e) = raft.trigger().transfer_leader(preferred).await {
                tracing::debug!("handing leadership to node {preferred}: {e}");
            }
        }
    }
}
