//! The proposer: this node's clients' writes into the log, in order.
//!
//! It takes every proposal waiting (up to `storage.max_batch`) into one
//! batch, the next of this node's session, and has it appended to the
//! log: by this node's Raft when it leads, else forwarded to the leader.
//! Then it waits until the batch is applied *here*, where the state
//! machine answers its clients (`pending.rs`), before it sends the next:
//! one batch of this node in flight, so batches apply in the order their
//! clients sent them, and everything that arrives meanwhile goes into the
//! next batch (group commit across the cluster).
//!
//! A batch whose leader fails is sent again, to the next leader, until
//! it is applied here or `cluster.write_timeout_ms` passes; a batch sent
//! twice is applied once (its session and sequence number). After the
//! timeout its clients learn that the write may or may not have been
//! applied; if it was never sent, that it was not.

use std::sync::Arc;
use std::time::Duration;

use meridian_model::Schema;
use meridian_store::StoreError;
use meridian_store::replicated::{Proposal, Proposals, encode_commands};
use openraft::async_runtime::watch::WatchReceiver as _;
use openraft::impls::ProgressResponder;

use crate::network::{CallError, PeerClient};
use crate::pending::Pending;
use crate::types::{Batch, NodeId, Raft};
use crate::wire::{Forwarded, Link, Request, Response};

/// How long one attempt waits for the batch to be applied here before it
/// looks again at who leads.
const ATTEMPT: Duration = Duration::from_secs(2);
/// How long the leader may take to commit a forwarded batch before the
/// follower looks again at who leads.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause before trying again when there is no leader.
const NO_LEADER_PAUSE: Duration = Duration::from_millis(20);

pub(crate) struct Proposer {
    pub(crate) me: NodeId,
    pub(crate) raft: Raft,
    pub(crate) pending: Arc<Pending>,
    pub(crate) schema: Arc<Schema>,
    pub(crate) max_batch: usize,
    /// `cluster.ack = "all"`: answers wait until every voter holds the
    /// batch's entry.
    pub(crate) ack_all: bool,
    pub(crate) write_timeout: Duration,
    pub(crate) link: Link,
    /// Where the leader is reached, for forwarding (and its LDAP URL).
    pub(crate) addresses: crate::admin::Addresses,
    /// `cluster.followers = "referral"`: a follower refers writes to the
    /// leader's LDAP URL instead of forwarding them.
    pub(crate) refer_writes: bool,
}

impl Proposer {
    pub(crate) async fn run(self, mut proposals: Proposals) {
        let mut seq = 0u64;
        // One connection to the leader for forwarded batches.
        let mut forwarder: Option<(NodeId, PeerClient)> = None;
        while let Some(first) = proposals.next().await {
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match proposals.try_next() {
                    Some(more) => batch.push(more),
                    None => break,
                }
            }
            if let Some(batch) = self.refer(batch) {
                seq += 1;
                self.deliver(seq, batch, &mut forwarder).await;
            }
        }
        tracing::debug!("proposer stopped: the store closed");
    }

    /// With referrals on and another node leading: answers every
    /// proposal with the leader's URL. `Some` with the batch otherwise.
    fn refer(&self, batch: Vec<Proposal>) -> Option<Vec<Proposal>> {
        if !self.refer_writes {
            return Some(batch);
        }
        let leader = self.raft.metrics().borrow_watched().current_leader;
        let url = leader
            .filter(|leader| *leader != self.me)
            .and_then(|leader| self.addresses.ldap_of(&self.raft, leader));
        match url {
            Some(url) => {
                for proposal in batch {
                    proposal.answer(Err(StoreError::Referral(url.clone())));
                }
                None
            }
            None => Some(batch),
        }
    }

    async fn deliver(
        &self,
        seq: u64,
        proposals: Vec<Proposal>,
        forwarder: &mut Option<(NodeId, PeerClient)>,
    ) {
        // Each client waits `cluster.write_timeout_ms` in all, counted
        // from its submission: a write queued behind a batch that waited
        // its whole time used to wait as long again (20 s for 10).
        let oldest = proposals.iter().map(Proposal::submitted).min();
        let (commands, replies): (Vec<_>, Vec<_>) =
            proposals.into_iter().map(Proposal::into_parts).unzip();
        let batch = Batch {
            origin: self.me,
            session: self.pending.session,
            seq,
            commands: encode_commands(commands.iter(), &self.schema),
        };
        let mut applied = self.pending.file(&batch, commands, replies);
        let deadline = oldest
            .map_or_else(tokio::time::Instant::now, tokio::time::Instant::from_std)
            + self.write_timeout;
        let mut sent = false;
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break;
            }
            let leader = self.raft.metrics().borrow_watched().current_leader;
            // One attempt, cut short when the batch is applied here (a
            // copy sent before may commit meanwhile) or time runs out.
            let attempt = async {
                match leader {
                    None => Attempt::NoLeader,
                    Some(leader) if leader == self.me => self.append(&batch).await,
                    Some(leader) => self.forward(leader, &batch, forwarder).await,
                }
            };
            let attempt = tokio::select! {
                index = &mut applied => return self.acknowledge(seq, index.ok(), deadline, forwarder).await,
                attempt = tokio::time::timeout_at(deadline.min(now + ATTEMPT), attempt) => {
                    attempt.unwrap_or(Attempt::Unknown)
                }
            };
            sent |= attempt.sent();
            let wait = match attempt {
                Attempt::NoLeader | Attempt::Refused => NO_LEADER_PAUSE,
                Attempt::Appended | Attempt::Unknown => ATTEMPT,
            };
            let until = deadline.min(tokio::time::Instant::now() + wait);
            // A new leader means a new attempt at once: the batch went
            // to the one that failed, or nowhere.
            let leader_changes = self.leader_other_than(leader);
            tokio::select! {
                index = &mut applied => return self.acknowledge(seq, index.ok(), deadline, forwarder).await,
                () = leader_changes => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
        let timeout = self.write_timeout;
        let error = if sent {
            StoreError::Unavailable(format!(
                "the cluster did not confirm this write within {} ms (cluster.write_timeout_ms): it reached a leader, or may have, and may or may not have been applied; read the entry to know",
                timeout.as_millis()
            ))
        } else {
            StoreError::Unavailable(format!(
                "no leader within {} ms (cluster.write_timeout_ms): the write was not applied",
                timeout.as_millis()
            ))
        };
        if self.pending.give_up(seq, &error) {
            tracing::warn!(seq, "a batch of writes timed out: {error}");
        }
    }

    /// The batch is applied here at log `index`: with `cluster.ack =
    /// "all"`, its clients are answered once every voter holds it (the
    /// leader says so), else they learn it is applied but not everywhere.
    async fn acknowledge(
        &self,
        seq: u64,
        index: Option<u64>,
        deadline: tokio::time::Instant,
        forwarder: &mut Option<(NodeId, PeerClient)>,
    ) {
        if !self.ack_all {
            return;
        }
        let Some(index) = index else {
            return;
        };
        while tokio::time::Instant::now() < deadline {
            let leader = self.raft.metrics().borrow_watched().current_leader;
            let everywhere = match leader {
                None => false,
                Some(leader) if leader == self.me => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    crate::ack::every_voter_holds(&self.raft, self.me, index, left.min(ATTEMPT))
                        .await
                }
                Some(leader) => match self.client_for(leader, forwarder) {
                    Some(client) => matches!(
                        client
                            .call(&Request::EveryVoterHolds(index), FORWARD_TIMEOUT)
                            .await,
                        Ok(Response::EveryVoterHolds(true))
                    ),
                    None => false,
                },
            };
            if everywhere {
                self.pending.release(seq);
                return;
            }
            tokio::time::sleep(NO_LEADER_PAUSE).await;
        }
        let error = StoreError::Unavailable(format!(
            "this write is applied (a majority holds it), but not every voter confirmed it within {} ms (cluster.ack = \"all\", cluster.write_timeout_ms)",
            self.write_timeout.as_millis()
        ));
        if self.pending.give_up(seq, &error) {
            tracing::warn!(seq, "{error}");
        }
    }

    /// The link to `leader` for this proposer's own requests.
    fn client_for<'f>(
        &self,
        leader: NodeId,
        forwarder: &'f mut Option<(NodeId, PeerClient)>,
    ) -> Option<&'f mut PeerClient> {
        if forwarder.as_ref().is_none_or(|(to, _)| *to != leader) {
            let addr = self.addresses.peer_of(&self.raft, leader)?;
            *forwarder = Some((leader, PeerClient::new(leader, addr, self.link.clone())));
        }
        forwarder.as_mut().map(|(_, client)| client)
    }

    /// Resolves once some node other than `known` leads.
    async fn leader_other_than(&self, known: Option<NodeId>) {
        let mut metrics = self.raft.metrics();
        loop {
            let now = metrics.borrow_watched().current_leader;
            if now.is_some() && now != known {
                return;
            }
            if metrics.changed().await.is_err() {
                // The raft engine stopped: nothing will change.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Appends the batch through this node's Raft, as the leader.
    async fn append(&self, batch: &Batch) -> Attempt {
        let (responder, result) = ProgressResponder::complete_only();
        if let Err(e) = self
            .raft
            .client_write_ff(batch.clone(), Some(responder))
            .await
        {
            tracing::error!("the raft node stopped: {e}");
            return Attempt::Refused;
        }
        // The outcome is awaited on a task of its own: when the batch is
        // applied here first, this attempt is dropped, and openraft would
        // warn of an answer nobody took.
        let (answer, outcome) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = answer.send(result.await);
        });
        match outcome.await {
            Ok(Ok(Ok(_))) => Attempt::Appended,
            // Not the leader after all (yet, or any more): never appended.
            Ok(Ok(Err(openraft::errors::ClientWriteError::ForwardToLeader(_)))) => Attempt::Refused,
            // Appended, then discarded by a new leader: it may yet commit.
            Ok(Ok(Err(e))) => {
                tracing::debug!("a batch was not committed: {e}");
                Attempt::Unknown
            }
            Ok(Err(_)) | Err(_) => Attempt::Unknown,
        }
    }

    /// Sends the batch to the leader, over this proposer's own link.
    async fn forward(
        &self,
        leader: NodeId,
        batch: &Batch,
        forwarder: &mut Option<(NodeId, PeerClient)>,
    ) -> Attempt {
        let Some(client) = self.client_for(leader, forwarder) else {
            return Attempt::NoLeader;
        };
        match client
            .call(&Request::Forward(batch.clone()), FORWARD_TIMEOUT)
            .await
        {
            Ok(Response::Forwarded(Forwarded::Applied)) => Attempt::Appended,
            Ok(Response::Forwarded(Forwarded::NotLeader(_))) => Attempt::Refused,
            Ok(_) => Attempt::Unknown,
            // The connection could not be made: nothing was sent, so the
            // next attempt need not wait to learn whether it committed.
            Err(CallError::Unreachable(e)) => {
                tracing::debug!(leader, "the leader could not be reached: {e}");
                Attempt::Refused
            }
            Err(e) => {
                tracing::debug!(leader, "forwarding a batch failed: {e}");
                // Sent, perhaps: the leader may have it.
                Attempt::Unknown
            }
        }
    }
}

/// What one attempt to have a batch appended did.
enum Attempt {
    /// Nobody leads (that this node knows of).
    NoLeader,
    /// Refused before it was appended anywhere, or never delivered.
    Refused,
    /// Appended and committed (applied on the leader).
    Appended,
    /// May have been appended.
    Unknown,
}

impl Attempt {
    fn sent(&self) -> bool {
        matches!(self, Attempt::Appended | Attempt::Unknown)
    }
}
