//! The proposer: this node's clients' writes into the log, in order.
//!
//! It takes every proposal waiting (up to `storage.max_batch`) into one
//! batch, the next of this node's session, and sends it to the log: to
//! this node's Raft when it leads, else to the leader over one pipelined
//! connection (`submitter.rs`). Up to `cluster.batches_in_flight`
//! batches are on their way at once, always sent in their order and to
//! one leader, which appends them in the order they came: so they apply
//! in the order their clients sent them. The state machine answers the
//! clients when it applies the batch here (`pending.rs`).
//!
//! One batch in flight per node held a site to `storage.max_batch`
//! writes per write latency: across an ocean, 3,000 to 8,000 modifies/s
//! a site with the servers' CPUs mostly idle
//! (`docs/reports/seed000-geo.md`).
//!
//! Past `cluster.batches_in_flight`, a batch is not held back a whole
//! round trip for a slot: once its oldest write has waited [`LINGER`]
//! it goes anyway, up to [`OVERFLOW`] times as many batches in flight.
//! Under a moderate load the cap held a write up to a round trip more
//! (p99 1.6 round trips at the leader's site); under full load batches
//! stay large, as the linger lets writes gather (a cap of 64 in all
//! cost a seventh of the throughput: smaller batches, more of them).
//!
//! A new leader, a connection to the leader that ended, or the oldest
//! batch not applied [`ATTEMPT`] after it was sent: every batch still in
//! flight is sent again, in order, to whoever leads. A batch appended
//! twice is applied once: the state machine skips a batch whose number
//! is not above the last it applied from its origin. By the same rule,
//! once a batch is applied no earlier one still in flight ever will be,
//! and its clients learn at once that it was not.
//!
//! Each batch's clients wait `cluster.write_timeout_ms` in all, counted
//! from the oldest one's submission; then they learn that the write may
//! or may not have been applied if it was ever sent to a leader, and
//! that it was not if it never was.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use meridian_model::Schema;
use meridian_store::StoreError;
use meridian_store::replicated::{Proposal, Proposals, encode_commands};
use openraft::async_runtime::watch::WatchReceiver as _;
use tokio::time::Instant;

use crate::network::PeerClient;
use crate::pending::Pending;
use crate::submitter::Submitter;
use crate::types::{Batch, NodeId, Raft};
use crate::wire::{Link, Request, Response};

/// How long the oldest batch in flight may go unapplied after it was
/// sent before everything in flight is sent again.
const ATTEMPT: Duration = Duration::from_secs(2);
/// How long the leader may take to say whether every voter holds an
/// index (`cluster.ack = "all"`).
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between two such questions.
const ACK_PAUSE: Duration = Duration::from_millis(20);
/// How soon batches are sent again after their route failed (nobody led,
/// or the connection to the leader ended), if no new leader is heard of
/// first: soon, but not in a loop against a node that refuses.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// How long a batch waits for one of the `cluster.batches_in_flight`
/// slots before it goes beyond them.
const LINGER: Duration = Duration::from_millis(10);
/// Most batches in flight, as a multiple of `cluster.batches_in_flight`,
/// counting those sent past it after their linger.
const OVERFLOW: usize = 8;

pub(crate) struct Proposer {
    pub(crate) me: NodeId,
    pub(crate) raft: Raft,
    pub(crate) pending: Arc<Pending>,
    pub(crate) schema: Arc<Schema>,
    pub(crate) max_batch: usize,
    /// Most batches on their way at once (`cluster.batches_in_flight`).
    pub(crate) batches_in_flight: usize,
    /// Whether, leading, this node may append now (`lease.rs`).
    pub(crate) lease: crate::lease::Lease,
    /// `cluster.ack = "all"`: answers wait until every voter holds the
    /// batch's entry.
    pub(crate) ack_all: bool,
    pub(crate) write_timeout: Duration,
    pub(crate) link: Link,
    /// Where the leader is reached (and its LDAP URL).
    pub(crate) addresses: crate::admin::Addresses,
    /// `cluster.followers = "referral"`: a follower refers writes to the
    /// leader's LDAP URL instead of sending them on.
    pub(crate) refer_writes: bool,
}

/// A batch's number and, once it is applied here, its log index (`None`:
/// given up, or the node stops).
type Applying = std::pin::Pin<Box<dyn std::future::Future<Output = (u64, Option<u64>)> + Send>>;

/// A batch on its way.
struct InFlight {
    batch: Batch,
    /// When its clients stop waiting.
    deadline: Instant,
    /// Whether it was ever handed to a leader.
    sent: bool,
    /// When it is to be sent (again), unless it is applied first.
    resend_at: Instant,
}

/// Where batches go now.
enum Route {
    /// This node leads: its own Raft.
    Here,
    /// The leader's connection.
    Leader(Submitter),
}

/// The batches on their way, by number, and where they go.
struct Flight {
    batches: BTreeMap<u64, InFlight>,
    route: Option<Route>,
    /// The leader the route was made for.
    leader: Option<NodeId>,
}

impl Proposer {
    pub(crate) async fn run(self, mut proposals: Proposals) {
        let mut seq = 0u64;
        let mut flight = Flight {
            batches: BTreeMap::new(),
            route: None,
            leader: None,
        };
        // Each batch's log index once it is applied here (`None`: given
        // up, or the node stops).
        let mut applied: FuturesUnordered<Applying> = FuturesUnordered::new();
        // For `cluster.ack = "all"`: the leader's answer to "does every
        // voter hold this?".
        let mut caller: Option<(NodeId, PeerClient)> = None;
        // Who leads, from the server metrics: they change with the role
        // and the leader, not with every append and apply, which would
        // wake this loop thousands of times a second under load.
        let mut metrics = self.raft.server_metrics();
        let mut raft_runs = true;
        // A batch gathered while every slot was taken: sent once one
        // frees, or once its oldest write waited `LINGER`.
        let mut held: Option<Vec<Proposal>> = None;
        let most = self.batches_in_flight.saturating_mul(OVERFLOW);
        loop {
            let room = flight.batches.len() < self.batches_in_flight;
            let overflow = flight.batches.len() < most;
            if room && let Some(batch) = held.take() {
                let batch = self.fill(batch, &mut proposals);
                if let Some(filed) = self.propose(batch, &mut seq, &mut flight) {
                    applied.push(filed);
                    self.send_new(seq, &mut flight).await;
                }
                continue;
            }
            let wake = self.next_wake(&flight);
            let linger = held
                .as_ref()
                .and_then(|batch| batch.iter().map(Proposal::submitted).min())
                .map_or_else(Instant::now, |oldest| Instant::from_std(oldest) + LINGER);
            tokio::select! {
                Some((done, index)) = applied.next(), if !applied.is_empty() => {
                    self.applied(done, index, &mut flight, &mut caller).await;
                }
                changed = metrics.changed(), if raft_runs => {
                    raft_runs = changed.is_ok();
                    let leader = metrics.borrow_watched().current_leader;
                    if leader != flight.leader {
                        self.send_all(&mut flight).await;
                    }
                }
                () = route_ended(&mut flight.route) => {
                    // Sent again after a pause, to whoever leads then.
                    flight.failed();
                }
                () = tokio::time::sleep_until(wake), if !flight.batches.is_empty() => {
                    self.expire(&mut flight);
                    if self.stalled(&flight) {
                        flight.route = None;
                        self.send_all(&mut flight).await;
                    }
                }
                () = tokio::time::sleep_until(linger), if held.is_some() && overflow => {
                    let batch = self.fill(held.take().unwrap_or_default(), &mut proposals);
                    if let Some(filed) = self.propose(batch, &mut seq, &mut flight) {
                        applied.push(filed);
                        self.send_new(seq, &mut flight).await;
                    }
                }
                first = proposals.next(), if held.is_none() && overflow => {
                    let Some(first) = first else {
                        break;
                    };
                    let batch = self.fill(vec![first], &mut proposals);
                    if !room {
                        held = Some(batch);
                        continue;
                    }
                    if let Some(filed) = self.propose(batch, &mut seq, &mut flight) {
                        applied.push(filed);
                        self.send_new(seq, &mut flight).await;
                    }
                }
            }
        }
        tracing::debug!("proposer stopped: the store closed");
    }

    /// `batch` with every proposal waiting added, up to `storage.max_batch`.
    fn fill(&self, mut batch: Vec<Proposal>, proposals: &mut Proposals) -> Vec<Proposal> {
        while batch.len() < self.max_batch {
            match proposals.try_next() {
                Some(more) => batch.push(more),
                None => break,
            }
        }
        batch
    }

    /// Files `batch` as the next number (referred instead, with
    /// referrals on and another node leading): what resolves once it is
    /// applied here, to wait for beside the others.
    fn propose(
        &self,
        batch: Vec<Proposal>,
        seq: &mut u64,
        flight: &mut Flight,
    ) -> Option<Applying> {
        let batch = self.refer(batch)?;
        *seq += 1;
        let number = *seq;
        let receiver = self.file(number, batch, flight);
        Some(Box::pin(async move { (number, receiver.await.ok()) }))
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

    /// Files the batch of `proposals` as number `seq`, and puts it in
    /// flight (not sent yet); the receiver resolves with its log index
    /// once it is applied here.
    fn file(
        &self,
        seq: u64,
        proposals: Vec<Proposal>,
        flight: &mut Flight,
    ) -> tokio::sync::oneshot::Receiver<u64> {
        let oldest = proposals.iter().map(Proposal::submitted).min();
        let (commands, replies): (Vec<_>, Vec<_>) =
            proposals.into_iter().map(Proposal::into_parts).unzip();
        let batch = Batch {
            origin: self.me,
            session: self.pending.session,
            seq,
            commands: encode_commands(commands.iter(), &self.schema),
        };
        let receiver = self.pending.file(&batch, commands, replies);
        let deadline = oldest.map_or_else(Instant::now, Instant::from_std) + self.write_timeout;
        flight.batches.insert(
            seq,
            InFlight {
                batch,
                deadline,
                sent: false,
                resend_at: Instant::now(),
            },
        );
        receiver
    }

    /// Sends batch `seq`, just filed: alone on the route in use, or with
    /// everything in flight when the route is new (what went on the old
    /// one may be lost, and must go first); after a failed route's
    /// pause only.
    async fn send_new(&self, seq: u64, flight: &mut Flight) {
        let leader = self.raft.metrics().borrow_watched().current_leader;
        if leader != flight.leader || !route_works(flight.route.as_ref()) {
            if !self.stalled(flight) && flight.batches.len() > 1 {
                // The older batches wait out a failed route's pause:
                // this one goes with them.
                return;
            }
            self.send_all(flight).await;
            return;
        }
        if let Some(in_flight) = flight.batches.get_mut(&seq) {
            if send(
                &self.raft,
                self.lease,
                flight.route.as_ref(),
                &in_flight.batch,
            )
            .await
            {
                in_flight.sent = true;
                in_flight.resend_at = Instant::now() + ATTEMPT;
            } else {
                flight.failed();
            }
        }
    }

    /// Sends every batch in flight, in order, to whoever leads now, on a
    /// new route.
    async fn send_all(&self, flight: &mut Flight) {
        let leader = self.raft.metrics().borrow_watched().current_leader;
        flight.leader = leader;
        flight.route = match leader {
            None => None,
            Some(leader) if leader == self.me => Some(Route::Here),
            Some(leader) => self
                .addresses
                .peer_of(&self.raft, leader)
                .map(|addr| Route::Leader(Submitter::start(leader, addr, self.link.clone()))),
        };
        if flight.route.is_none() {
            flight.failed();
            return;
        }
        for in_flight in flight.batches.values_mut() {
            if !send(
                &self.raft,
                self.lease,
                flight.route.as_ref(),
                &in_flight.batch,
            )
            .await
            {
                flight.failed();
                return;
            }
            in_flight.sent = true;
            in_flight.resend_at = Instant::now() + ATTEMPT;
        }
    }

    /// When something in flight next needs a look: a deadline, or the
    /// oldest batch's time to be applied.
    fn next_wake(&self, flight: &Flight) -> Instant {
        let deadline = flight.batches.values().map(|b| b.deadline).min();
        let retry = flight
            .batches
            .values()
            .next()
            .map(|oldest| oldest.resend_at);
        match (deadline, retry) {
            (Some(d), Some(r)) => d.min(r),
            (Some(d), None) => d,
            _ => Instant::now() + ATTEMPT,
        }
    }

    /// Whether the batches in flight are due to be sent again: the
    /// oldest went unapplied for an attempt's time since it was sent, or
    /// its route failed a pause ago.
    fn stalled(&self, flight: &Flight) -> bool {
        flight
            .batches
            .values()
            .next()
            .is_some_and(|oldest| oldest.resend_at <= Instant::now())
    }

    /// Gives up on every batch whose time is up.
    fn expire(&self, flight: &mut Flight) {
        let now = Instant::now();
        let expired: Vec<u64> = flight
            .batches
            .iter()
            .filter(|(_, b)| b.deadline <= now)
            .map(|(seq, _)| *seq)
            .collect();
        if !expired.is_empty() && matches!(flight.route, Some(Route::Leader(_))) {
            // A batch its clients gave up on must not reach the log
            // later from the connection's queue (a handshake held by a
            // partition completes when it heals): the connection goes,
            // with whatever it had not yet written.
            flight.route = None;
        }
        for seq in expired {
            let Some(batch) = flight.batches.remove(&seq) else {
                continue;
            };
            let timeout = self.write_timeout.as_millis();
            let error = if batch.sent {
                StoreError::Unavailable(format!(
                    "the cluster did not confirm this write within {timeout} ms (cluster.write_timeout_ms): it reached a leader, or may have, and may or may not have been applied; read the entry to know"
                ))
            } else {
                StoreError::Unavailable(format!(
                    "no leader within {timeout} ms (cluster.write_timeout_ms): the write was not applied"
                ))
            };
            if self.pending.give_up(seq, &error) {
                tracing::warn!(seq, "a batch of writes timed out: {error}");
            }
        }
    }

    /// Batch `seq` is applied here at `index` (or was given up: `None`).
    /// Every batch before it still in flight never will be.
    async fn applied(
        &self,
        seq: u64,
        index: Option<u64>,
        flight: &mut Flight,
        caller: &mut Option<(NodeId, PeerClient)>,
    ) {
        let Some(batch) = flight.batches.remove(&seq) else {
            return;
        };
        let Some(index) = index else {
            return;
        };
        let earlier: Vec<u64> = flight.batches.range(..seq).map(|(s, _)| *s).collect();
        for skipped in earlier {
            flight.batches.remove(&skipped);
            let error = StoreError::Unavailable(
                "the write was not applied: a later batch of this node's writes reached the log first (a leader changed); it can be sent again"
                    .to_owned(),
            );
            if self.pending.skipped(skipped, &error) {
                tracing::warn!(seq = skipped, "a batch of writes was overtaken: {error}");
            }
        }
        self.acknowledge(seq, index, batch.deadline, caller).await;
    }

    /// The batch is applied here at log `index`: with `cluster.ack =
    /// "all"`, its clients are answered once every voter holds it (the
    /// leader says so), else they learn it is applied but not everywhere.
    async fn acknowledge(
        &self,
        seq: u64,
        index: u64,
        deadline: Instant,
        forwarder: &mut Option<(NodeId, PeerClient)>,
    ) {
        if !self.ack_all {
            return;
        }
        while Instant::now() < deadline {
            let leader = self.raft.metrics().borrow_watched().current_leader;
            let everywhere = match leader {
                None => false,
                Some(leader) if leader == self.me => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    crate::ack::every_voter_holds(&self.raft, self.me, index, left.min(ATTEMPT))
                        .await
                }
                Some(leader) => match self.client_for(leader, forwarder) {
                    Some(client) => matches!(
                        client
                            .call(&Request::EveryVoterHolds(index), ACK_TIMEOUT)
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
            tokio::time::sleep(ACK_PAUSE).await;
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
}

impl Flight {
    /// The route failed: dropped, and everything in flight sent again
    /// after a pause (at once, when a new leader is heard of).
    fn failed(&mut self) {
        self.route = None;
        let retry = Instant::now() + RETRY_PAUSE;
        for in_flight in self.batches.values_mut() {
            in_flight.resend_at = retry;
        }
    }
}

/// Resolves once the leader's connection ends (never for another route).
async fn route_ended(route: &mut Option<Route>) {
    match route {
        Some(Route::Leader(submitter)) => submitter.ended().await,
        _ => std::future::pending().await,
    }
}

fn route_works(route: Option<&Route>) -> bool {
    match route {
        Some(Route::Here) => true,
        Some(Route::Leader(submitter)) => submitter.working(),
        None => false,
    }
}

/// Hands `batch` to the route; false when it could not be.
async fn send(
    raft: &Raft,
    lease: crate::lease::Lease,
    route: Option<&Route>,
    batch: &Batch,
) -> bool {
    match route {
        // Not while openraft would drop it (`lease.rs`).
        Some(Route::Here) if !lease.holds(raft) => false,
        // No responder: a batch this node's Raft refuses (it stepped
        // down meanwhile) is sent again when the new leader is known.
        Some(Route::Here) => match raft.client_write_ff(batch.clone(), None).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("the raft node stopped: {e}");
                false
            }
        },
        Some(Route::Leader(submitter)) => submitter.submit(batch.clone()).await,
        None => false,
    }
}
