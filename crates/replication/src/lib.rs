//! Meridian's replication: the directory's writes ordered by a Raft log
//! (openraft, pinned exactly) and applied on every node.
//!
//! Nothing outside this crate sees openraft: the server starts a
//! [`ClusterNode`] over a store opened with
//! [`meridian_store::Store::open_replicated`] and reads its [`Status`].
//!
//! The path of a write in a cluster (`docs/design/replication.md`):
//! a client's command, prepared by the directory as on a single server,
//! is submitted to the store, which hands it to this node's proposer
//! (`proposer.rs`); the proposer gathers waiting commands into a batch
//! and has the leader append it to the log (its own Raft, or forwarded);
//! once a majority has the entry durably (`log_store.rs`), every node's
//! state machine (`state_machine.rs`) applies it through the store's
//! writer in one transaction with its log ID; on the node the client is
//! connected to, applying it answers the client (`pending.rs`).

mod ack;
mod admin;
mod hub;
mod lease;
mod log_store;
mod marker;
mod network;
mod peer_server;
mod pending;
mod pipeline;
mod preferred;
mod proposer;
mod raw_bytes;
mod reads;
mod rejoin;
mod removal;
mod snapshot;
mod state_machine;
mod store_io;
mod submitter;
mod tls;
pub mod types;
mod wire;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use meridian_store::Store;
use meridian_store::replicated::Proposals;
use openraft::async_runtime::watch::WatchReceiver as _;
use openraft::{BasicNode, SnapshotPolicy};

pub use admin::{AdminCommand, AdminError};
pub use hub::PeerHub;
pub use log_store::LogStore;
pub use reads::{ReadMode, ReadRefused};
pub use snapshot::SnapshotFile;
pub use state_machine::{AppliedObserver, StateMachine};
pub use tls::PeerCredentials;
pub use wire::ConfigDigest;

use crate::admin::Addresses;
use crate::marker::Marker;
use crate::pending::Pending;
use crate::snapshot::Snapshots;
use crate::types::{NodeId, Raft};
use crate::wire::Link;

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Its files could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The database's replication marker could not be read.
    #[error("reading the database's replication marker: {0}")]
    Marker(#[source] meridian_store::StoreError),
    /// `cluster.node_id` names no node of `cluster.nodes` or
    /// `cluster.learners`.
    #[error(
        "node {0} is not a member: cluster.node_id must be one of cluster.nodes or cluster.learners"
    )]
    NotAMember(NodeId),
    /// The Raft configuration made from `[cluster]` is refused.
    #[error("the raft configuration: {0}")]
    Config(#[source] openraft::ConfigError),
    /// The peer TLS files could not be loaded.
    #[error("peer TLS: {0}")]
    PeerTls(String),
    /// Two groups of one number were started on one hub.
    #[error("raft group {0} was started twice on one peer listener")]
    GroupTwice(u16),
    /// The Raft engine stopped (or would not start).
    #[error("the raft engine: {0}")]
    Raft(#[source] openraft::error::Fatal<types::Meridian>),
}

pub(crate) fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Io { what, source }
}

/// One member of the cluster.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its ID.
    pub id: NodeId,
    /// Where it listens for peers, `IP:PORT`.
    pub peer: String,
    /// Its LDAP URL.
    pub ldap: String,
}

/// How a node runs (from `[cluster]` and `[storage]`).
#[derive(Debug, Clone)]
pub struct Options {
    /// This node.
    pub node_id: NodeId,
    /// Every voter (this node too, unless it is a learner).
    pub members: Vec<Member>,
    /// Every learner: replicas that take the log without voting.
    pub learners: Vec<Member>,
    /// Where this node listens for peers, if not its member `peer`.
    pub peer_listen: Option<String>,
    /// The secret nodes prove to each other.
    pub secret: String,
    /// TLS on peer links (`cluster.tls_*`), when configured.
    pub tls: Option<PeerCredentials>,
    /// What applying depends on in the configuration; a peer whose
    /// digest differs is refused, naming the keys.
    pub config_digest: ConfigDigest,
    /// Followers answer writes with a referral to the leader.
    pub refer_writes: bool,
    /// Writes are answered once every voter holds them (`cluster.ack =
    /// "all"`), not a majority.
    pub ack_all: bool,
    /// `cluster.write_timeout_ms`.
    pub write_timeout: Duration,
    /// `cluster.preferred_leader`: the voter the leader hands the lead to
    /// once it is caught up (`preferred.rs`).
    pub preferred_leader: Option<NodeId>,
    /// `cluster.reads`.
    pub reads: ReadMode,
    /// `cluster.heartbeat_ms`.
    pub heartbeat: Duration,
    /// `cluster.election_timeout_ms`.
    pub election_timeout: Duration,
    /// `cluster.snapshot_every_entries`.
    pub snapshot_every: u64,
    /// `cluster.snapshot_log_bytes`.
    pub snapshot_log_bytes: u64,
    /// `cluster.max_message_bytes`.
    pub max_message: usize,
    /// Most commands in one batch (`storage.max_batch`).
    pub max_batch: usize,
    /// Most batches of this node on their way at once
    /// (`cluster.batches_in_flight`).
    pub batches_in_flight: usize,
    /// Where the log and snapshots live.
    pub dir: PathBuf,
}

/// A running node.
pub struct ClusterNode {
    raft: Raft,
    /// The node's peer listener, shared with its other groups.
    hub: Arc<PeerHub>,
    /// This group's number (its partition's place in the configuration).
    group: u16,
    applied_observer: AppliedObserver,
    peer_bytes: Arc<std::sync::atomic::AtomicU64>,
    me: NodeId,
    addresses: Addresses,
    link: Link,
    patience: Duration,
    reads: ReadMode,
    contacts: Arc<reads::Contacts>,
    /// Whether this node was taken out of the cluster (`removal.rs`).
    removal: Arc<removal::Removal>,
    /// Linearizable reads waiting for their round (`cluster.reads`).
    read_rounds: Option<reads::ReadWaiters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What a read waits for before it is served (see [`ClusterNode::before_read`]).
pub type ReadWait =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ReadRefused>> + Send>>;

/// What a node reports of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// This node's ID.
    pub node_id: NodeId,
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub role: &'static str,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// The leader's LDAP URL, when it is known.
    pub leader_url: Option<String>,
    /// The current term.
    pub term: u64,
    /// The last log index applied here.
    pub applied: u64,
    /// The last log index known committed.
    pub committed: u64,
    /// The last index in this node's log.
    pub last_log: u64,
    /// The last index of the current snapshot.
    pub snapshot: u64,
    /// The last index purged from the log.
    pub purged: u64,
    /// Bytes sent to peers since this node started.
    pub peer_bytes_sent: u64,
    /// On the leader: each follower's last replicated index.
    pub replicated: Vec<(NodeId, u64)>,
}

/// What a node keeps on disk: its log, and the state machine over its
/// store with the snapshots beside them.
pub struct Storage {
    /// The Raft log.
    pub log: LogStore,
    /// The store as openraft's state machine.
    pub state_machine: StateMachine,
    /// Where the directory is shown other nodes' commands.
    pub applied_observer: AppliedObserver,
    pending: Arc<Pending>,
    snapshots: Arc<Snapshots>,
    /// Nothing was here: no log, no vote, nothing applied (a new node,
    /// or one that lost its disk: `rejoin.rs`).
    started_empty: bool,
}

impl Storage {
    /// Opens node `me`'s log and snapshots in `dir` over `store`, and
    /// takes a new session for its batches, above every session of its
    /// earlier lives, even one whose disk was lost ([`session_from_clock`]).
    /// With `hold`, answers wait for every voter (`cluster.ack = "all"`).
    pub fn open(dir: &Path, store: Store, me: NodeId, hold: bool) -> Result<Storage, ClusterError> {
        let log = LogStore::open(dir).map_err(io_error(format!(
            "opening the raft log in {}",
            dir.display()
        )))?;
        let snapshots = Arc::new(
            Snapshots::open(&dir.join("snapshots"))
                .map_err(io_error("opening the snapshot directory"))?,
        );
        let marker_bytes = store.replication_marker().map_err(ClusterError::Marker)?;
        let marker = Marker::decode(marker_bytes.as_deref())
            .map_err(io_error("the database's replication marker"))?;
        let floor = marker.next_session(me).max(session_from_clock());
        let session = next_session(dir, floor).map_err(io_error("the session counter"))?;
        let started_empty = log.is_empty() && marker.applied.is_none();
        let pending = Arc::new(Pending::new(session, hold));
        let applied_observer = AppliedObserver::default();
        let state_machine = StateMachine::new(
            store,
            me,
            marker,
            Arc::clone(&pending),
            Arc::clone(&snapshots),
            Arc::clone(&applied_observer),
        );
        Ok(Storage {
            log,
            state_machine,
            applied_observer,
            pending,
            snapshots,
            started_empty,
        })
    }
}

/// While this node leads: adds each configured learner the membership
/// lacks (non-blocking: it catches up from the log or a snapshot).
async fn add_learners(raft: Raft, me: NodeId, learners: Vec<NodeId>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let missing: Vec<NodeId> = {
            let metrics = raft.metrics().borrow_watched().clone();
            if metrics.current_leader != Some(me) {
                continue;
            }
            let membership = metrics.membership_config.membership();
            learners
                .iter()
                .copied()
                .filter(|id| !membership.nodes().any(|(known, _)| known == id))
                .collect()
        };
        for id in missing {
            match raft
                .add_learner(id, Addresses::configured_node(id), false)
                .await
            {
                Ok(_) => tracing::info!(learner = id, "learner added"),
                Err(e) => tracing::debug!(learner = id, "adding a learner: {e}"),
            }
        }
    }
}

/// Asks for a snapshot whenever the log holds `limit` bytes not yet
/// purged: the log (on disk and in memory) stays near that size whatever
/// the entries hold, and a snapshot, which copies the whole database,
/// is made in proportion to what was written rather than per entry.
///
/// Every node's log grows alike, so at one and the same limit every
/// node would copy its database at the same moment, each time, and a
/// cluster whose majority is busy copying stalls its writes (measured: a
/// second at 15,000 modifies/s). So each snapshot waits for its own
/// share of the limit, between three quarters and five quarters of it,
/// drawn from the node's ID and the snapshot's number
/// ([`snapshot_threshold`]): the nodes' snapshots drift apart, whatever
/// brought them together (a new cluster, a node started from the
/// leader's snapshot).
async fn snapshot_when_log_grows(
    raft: Raft,
    me: NodeId,
    live: Arc<std::sync::atomic::AtomicU64>,
    limit: u64,
) {
    let mut cycle = 0u64;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The live bytes when a snapshot was last asked for: asked again
    // only once the log grew by `limit` more (a purge may lag).
    let mut asked_at: Option<u64> = None;
    loop {
        tick.tick().await;
        let bytes = live.load(std::sync::atomic::Ordering::Relaxed);
        if asked_at.is_some_and(|at| bytes < at) {
            asked_at = None;
        }
        let threshold = snapshot_threshold(me, cycle, limit);
        let due = bytes >= threshold && asked_at.is_none_or(|at| bytes >= at.saturating_add(limit));
        if due {
            cycle += 1;
            tracing::debug!(
                bytes,
                "the log reached cluster.snapshot_log_bytes: snapshot"
            );
            if raft.trigger().snapshot().await.is_err() {
                return;
            }
            asked_at = Some(bytes);
        }
    }
}

/// The live bytes at which node `me` asks for its snapshot number
/// `cycle` (counted from its start): `limit` give or take a quarter, by
/// a draw that differs from node to node and snapshot to snapshot.
fn snapshot_threshold(me: NodeId, cycle: u64, limit: u64) -> u64 {
    // SplitMix64's finaliser: every bit of the node and the cycle moves
    // the draw.
    let mut x = me.rotate_left(32) ^ cycle;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let spread = (limit / 2).max(1);
    limit - limit / 4 + x % spread
}

/// A session no earlier life of this node took: the microseconds since
/// the Unix epoch at its start.
///
/// The counter in `raft/session` and the marker in the database say
/// which sessions this node used, but a node that lost its disk has
/// neither, while the log it catches up on still holds its earlier
/// life's batches. Were it to take session 1 again, a batch of the
/// earlier life under the same session and number would be taken for
/// the one a client here waits for, and that client told its write was
/// applied when another was (issue 44, R1). The clock moves on between
/// two lives of a node, so the new life's sessions are above the old
/// ones', and the batches of both apply, each once.
// Read at start, never while applying: a batch's session travels in the
// log entry, so every node applies the same bytes.
#[allow(clippy::disallowed_methods)]
fn session_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

/// Reads the session counter, raises it above `floor`, stores it durably.
fn next_session(dir: &Path, floor: u64) -> io::Result<u64> {
    let path = dir.join("session");
    let stored = match std::fs::read(&path) {
        Ok(bytes) => <[u8; 8]>::try_from(bytes.as_slice())
            .map(u64::from_le_bytes)
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is damaged", path.display()),
                )
            })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    let session = stored.saturating_add(1).max(floor);
    meridian_store::private::replace_file(&path, &session.to_le_bytes())?;
    Ok(session)
}

/// The Raft engine's configuration from `[cluster]`.
fn raft_config(options: &Options) -> Result<Arc<openraft::Config>, ClusterError> {
    let heartbeat = u64::try_from(options.heartbeat.as_millis()).unwrap_or(u64::MAX);
    let election = u64::try_from(options.election_timeout.as_millis()).unwrap_or(u64::MAX);
    let config = openraft::Config {
        cluster_name: "meridian".into(),
        heartbeat_interval: heartbeat,
        election_timeout_min: election,
        // The leader lease is this long (openraft): a follower votes
        // for no one until it ends, so it bounds failover from below.
        election_timeout_max: election.saturating_add(election / 2),
        snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_every.max(1)),
        // Kept behind a snapshot, so a follower a little behind
        // catches up from the log, not a whole snapshot.
        max_in_snapshot_log_to_keep: options.snapshot_every.clamp(1, 1000),
        max_payload_entries: 64,
        install_snapshot_timeout: 600_000,
        // A node cut off from the others asks before it raises its
        // term, so it does not force an election when it returns.
        enable_pre_vote: Some(true),
        // A follower whose log went back (it lost its disk, or the
        // last appends it reported durable) is streamed the log again
        // from where it now ends. Without it openraft stalls that
        // stream, and its debug builds panic the leader when the
        // follower's answer comes before `rejoin.rs` has asked for
        // the reset. What makes such a follower safe is that it
        // does not vote meanwhile (`rejoin.rs`'s vote guard).
        allow_log_reversion: Some(true),
        ..Default::default()
    };
    Ok(Arc::new(config.validate().map_err(ClusterError::Config)?))
}

/// The peer link: the cluster secret, peer TLS when configured, and the
/// configuration digest every peer must share.
pub(crate) fn peer_link(options: &Options) -> Result<Link, ClusterError> {
    let tls = options
        .tls
        .as_ref()
        .map(tls::PeerTls::new)
        .transpose()
        .map_err(ClusterError::PeerTls)?;
    Ok(Link::new(
        &options.secret,
        options.max_message,
        options.node_id,
        tls,
        options.config_digest.clone(),
    ))
}

/// The tasks that keep a running group in shape: adding the configured
/// learners, handing the lead to the preferred voter, and snapshots as
/// the log grows.
fn spawn_upkeep(
    raft: &Raft,
    me: NodeId,
    options: &Options,
    log_bytes: Arc<std::sync::atomic::AtomicU64>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    if !options.learners.is_empty() {
        tasks.push(tokio::spawn(add_learners(
            raft.clone(),
            me,
            options.learners.iter().map(|m| m.id).collect(),
        )));
    }
    if let Some(preferred) = options.preferred_leader {
        tasks.push(tokio::spawn(preferred::keep_preferred_leader(
            raft.clone(),
            me,
            preferred,
        )));
    }
    tasks.push(tokio::spawn(snapshot_when_log_grows(
        raft.clone(),
        me,
        log_bytes,
        options.snapshot_log_bytes,
    )));
}

/// Forms the cluster on its first start.
async fn initialize_if_new(
    raft: &Raft,
    options: &Options,
    learner: bool,
) -> Result<(), ClusterError> {
    let initialized = raft.is_initialized().await.map_err(ClusterError::Raft)?;
    // A learner waits to be added by the leader.
    if !initialized && !learner {
        // Every node proposes the same membership: safe (the vote
        // picks one leader), and no node has to be started first.
        let nodes: BTreeMap<NodeId, BasicNode> = options
            .members
            .iter()
            .map(|m| (m.id, Addresses::configured_node(m.id)))
            .collect();
        if let Err(e) = raft.initialize(nodes).await {
            tracing::debug!("initializing the cluster: {e}");
        }
    }
    Ok(())
}

impl ClusterNode {
    /// Starts this node of a cluster of one Raft group: binds its peer
    /// address, opens its log, joins (or forms) the cluster of
    /// `options.members`, and takes over the store's writes.
    pub async fn start(
        store: Store,
        proposals: Proposals,
        options: Options,
    ) -> Result<ClusterNode, ClusterError> {
        let hub = PeerHub::bind(&options).await?;
        ClusterNode::start_in(&hub, 0, store, proposals, options).await
    }

    /// [`ClusterNode::start`] on a peer listener the caller bound: one on
    /// port 0, whose port the caller read back (the in-process tests).
    pub async fn start_on(
        listener: tokio::net::TcpListener,
        store: Store,
        proposals: Proposals,
        options: Options,
    ) -> Result<ClusterNode, ClusterError> {
        let hub = PeerHub::on(listener, &options)?;
        ClusterNode::start_in(&hub, 0, store, proposals, options).await
    }

    /// Starts Raft group `group` of this node (one per partition, each
    /// with its own store, log and options) on the node's peer hub.
    pub async fn start_in(
        hub: &Arc<PeerHub>,
        group: u16,
        store: Store,
        proposals: Proposals,
        options: Options,
    ) -> Result<ClusterNode, ClusterError> {
        let me = options.node_id;
        let everyone: Vec<Member> = options
            .members
            .iter()
            .chain(&options.learners)
            .cloned()
            .collect();
        let learner = options.learners.iter().any(|m| m.id == me);
        let Some(this) = everyone.iter().find(|m| m.id == me) else {
            return Err(ClusterError::NotAMember(me));
        };
        let schema = Arc::clone(store.schema());
        let Storage {
            log,
            state_machine,
            applied_observer,
            pending,
            snapshots,
            started_empty,
        } = Storage::open(&options.dir, store, me, options.ack_all)?;
        let session = pending.session;
        let log_bytes = log.live_bytes();

        let config = raft_config(&options)?;
        let incoming = hub.register(group).ok_or(ClusterError::GroupTwice(group))?;
        let link = hub.link(group);
        let peer_bytes = Arc::clone(&link.sent);
        // Peers are reached at the addresses of this node's config (the
        // membership names the config's nodes by ID only, so each node may
        // see the others through its own routes: a proxy in the tests),
        // else at those a node added at run time carries (`admin.rs`).
        let addresses = Addresses::new(everyone.clone());
        let contacts = Arc::new(reads::Contacts::default());
        let network = network::Network {
            link: link.clone(),
            addresses: addresses.clone(),
        };
        let raft = Raft::new(me, config, network, log, state_machine)
            .await
            .map_err(ClusterError::Raft)?;

        let listen = hub
            .local_addr()
            .map_or_else(|| this.peer.clone(), |addr| addr.to_string());
        let mut tasks = Vec::new();
        let peers: Vec<NodeId> = everyone
            .iter()
            .map(|m| m.id)
            .filter(|id| *id != me)
            .collect();
        let removal = Arc::new(removal::Removal::default());
        let votes = rejoin::guard_votes(
            &raft,
            me,
            started_empty && !learner,
            peers,
            addresses.clone(),
            link.clone(),
            &mut tasks,
        );
        let lease = lease::Lease::new(
            options.heartbeat,
            options.election_timeout + options.election_timeout / 2,
        );
        let service = Arc::new(peer_server::PeerService {
            me,
            raft: raft.clone(),
            link: link.clone(),
            snapshots,
            addresses: addresses.clone(),
            patience: options.write_timeout,
            contacts: matches!(options.reads, ReadMode::Local { .. })
                .then(|| Arc::clone(&contacts)),
            votes,
            removal: Arc::clone(&removal),
            lease,
        });
        tasks.push(tokio::spawn(peer_server::serve(incoming, service)));

        initialize_if_new(&raft, &options, learner).await?;

        let proposer = proposer::Proposer {
            me,
            raft: raft.clone(),
            pending,
            schema,
            max_batch: options.max_batch.max(1),
            batches_in_flight: options.batches_in_flight.max(1),
            lease,
            ack_all: options.ack_all,
            write_timeout: options.write_timeout,
            link: link.clone(),
            addresses: addresses.clone(),
            refer_writes: options.refer_writes,
        };
        tasks.push(tokio::spawn(proposer.run(proposals)));
        let read_rounds = (options.reads == ReadMode::Linearizable).then(|| {
            let (waiters, waiting) = tokio::sync::mpsc::unbounded_channel();
            tasks.push(tokio::spawn(reads::read_rounds(
                raft.clone(),
                me,
                addresses.clone(),
                link.clone(),
                options.write_timeout,
                waiting,
            )));
            waiters
        });
        spawn_upkeep(&raft, me, &options, log_bytes, &mut tasks);
        tracing::info!(node = me, group, peer = %listen, session, "cluster node started");
        Ok(ClusterNode {
            raft,
            hub: Arc::clone(hub),
            group,
            applied_observer,
            peer_bytes,
            me,
            addresses,
            link,
            patience: options.write_timeout,
            reads: options.reads,
            contacts,
            removal,
            read_rounds,
            tasks,
        })
    }

    /// Shows `observe` every batch of other nodes' commands before it is
    /// applied here (set once; later calls are ignored).
    pub fn observe_applied(
        &self,
        observe: impl Fn(&[meridian_store::Command]) + Send + Sync + 'static,
    ) {
        let _ = self.applied_observer.set(Box::new(observe));
    }

    /// This node leads now (as far as it knows).
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.me)
    }

    /// Resolves once this node leads and has applied every entry
    /// committed before its term (its term's first entry is committed
    /// and applied here): work that only a leader proposes, and that must
    /// see all earlier writes (the online index build's range), starts
    /// then.
    pub async fn leading_and_current(&self) {
        let mut metrics = self.raft.metrics();
        loop {
            let leading = metrics.borrow_watched().current_leader == Some(self.me);
            if leading
                && self
                    .raft
                    .ensure_linearizable(openraft::ReadPolicy::ReadIndex)
                    .await
                    .is_ok()
            {
                return;
            }
            if metrics.changed().await.is_err() {
                // The raft engine stopped: this node will not lead.
                std::future::pending::<()>().await;
            }
        }
    }

    /// What this node knows of the cluster.
    pub fn status(&self) -> Status {
        // Read in place: asked at every root DSE read.
        let receiver = self.raft.metrics();
        let metrics = receiver.borrow_watched();
        let removed = self.removal.removed(&self.raft, self.me);
        let role = if removed {
            "removed"
        } else {
            admin::role_name(metrics.state)
        };
        // A removed node's last known leader is no longer its business.
        let current_leader = metrics.current_leader.filter(|_| !removed);
        let leader_url = current_leader.and_then(|leader| {
            let node = metrics.membership_config.membership().get_node(&leader);
            self.addresses.ldap(leader, node)
        });
        let replicated = metrics
            .replication
            .as_ref()
            .map(|map| {
                map.iter()
                    .map(|(id, matched)| (*id, matched.as_ref().map_or(0, |m| m.index)))
                    .collect()
            })
            .unwrap_or_default();
        Status {
            node_id: self.me,
            role,
            leader: current_leader,
            leader_url,
            term: metrics.current_term,
            applied: metrics.last_applied.as_ref().map_or(0, |id| id.index),
            committed: metrics.local_committed.as_ref().map_or(0, |id| id.index),
            last_log: metrics.last_log_index.unwrap_or(0),
            snapshot: metrics.snapshot.as_ref().map_or(0, |id| id.index),
            purged: metrics.purged.as_ref().map_or(0, |id| id.index),
            peer_bytes_sent: self.peer_bytes.load(std::sync::atomic::Ordering::Relaxed),
            replicated,
        }
    }

    /// Carries out an administrator's `command`: the status here, a
    /// change at the leader (sent to it when this node does not lead).
    pub async fn administer(&self, command: AdminCommand) -> Result<String, AdminError> {
        if command == AdminCommand::Status || self.raft.is_leader() {
            return admin::execute(
                &self.raft,
                &self.addresses,
                &self.link,
                command,
                self.patience,
            )
            .await;
        }
        let Some(leader) = self.raft.metrics().borrow_watched().current_leader else {
            return Err(AdminError::Unavailable(
                "no leader is known now (an election is under way, or a majority is unreachable); try again".into(),
            ));
        };
        let Some(addr) = self.addresses.peer_of(&self.raft, leader) else {
            return Err(AdminError::Unavailable(format!(
                "the leader, node {leader}, has no peer address known here"
            )));
        };
        let mut client = network::PeerClient::new(leader, addr, self.link.clone());
        let wait = self.patience + Duration::from_secs(5);
        match client.call(&wire::Request::Admin(command), wait).await {
            Ok(wire::Response::Admin(answer)) => answer,
            Ok(_) => Err(AdminError::Unavailable(format!(
                "node {leader} gave an unexpected answer"
            ))),
            Err(e) => Err(AdminError::Unavailable(format!(
                "asking the leader, node {leader}: {e}"
            ))),
        }
    }

    /// What a search or compare must wait for under `cluster.reads`:
    /// `Ok(None)` to read now, a refusal, or a wait that ends when this
    /// node may serve it (a linearizable read's round, then this node's
    /// application up to the index it got).
    pub fn before_read(&self) -> Result<Option<ReadWait>, ReadRefused> {
        if self.removal.removed(&self.raft, self.me) {
            // Its copy stopped at its removal and no entry reaches it
            // any more: whatever `cluster.reads` says, it is stale.
            return Err(ReadRefused::Unavailable(format!(
                "node {} was removed from the cluster: its copy is no longer kept current; read at a member",
                self.me
            )));
        }
        match self.reads {
            ReadMode::Session => Ok(None),
            ReadMode::Local { max_staleness } => {
                reads::check_local(&self.raft, &self.contacts, max_staleness).map(|()| None)
            }
            ReadMode::Linearizable => {
                let Some(rounds) = &self.read_rounds else {
                    return Ok(None);
                };
                let (answer, index) = tokio::sync::oneshot::channel();
                if rounds.send(answer).is_err() {
                    return Err(ReadRefused::Unavailable(
                        "the cluster node is stopping".into(),
                    ));
                }
                let raft = self.raft.clone();
                let patience = self.patience;
                Ok(Some(Box::pin(async move {
                    let index = index.await.map_err(|_| {
                        ReadRefused::Unavailable("the cluster node is stopping".into())
                    })??;
                    reads::applied(&raft, index, patience).await
                })))
            }
        }
    }

    /// Stops the node's tasks and its Raft (and the peer listener, when
    /// this was its last group).
    pub async fn shutdown(&self) {
        self.hub.deregister(self.group);
        for task in &self.tasks {
            task.abort();
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("stopping the raft engine: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::snapshot_threshold;

    #[test]
    fn snapshot_thresholds_differ_by_node_and_stay_near_the_limit() {
        let limit: u64 = 256 << 20;
        for cycle in 0..100 {
            let thresholds: Vec<u64> = (1..=5)
                .map(|me| snapshot_threshold(me, cycle, limit))
                .collect();
            for t in &thresholds {
                assert!((limit - limit / 4..limit + limit / 4).contains(t), "{t}");
            }
        }
        // The first snapshots of a new cluster of three are apart by more
        // than a copy's worth of log (a sixty-fourth of the limit).
        let first: Vec<u64> = (1..=3).map(|me| snapshot_threshold(me, 0, limit)).collect();
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            assert!(first[a].abs_diff(first[b]) > limit / 64, "{first:?}");
        }
        // A tiny limit still gives thresholds (no division by zero).
        assert!(snapshot_threshold(1, 0, 1) <= 1);
    }
}
