//! The binary's side of a cluster: `[cluster]` into a running node, and
//! the `meridian cluster` commands.

pub(crate) mod admin;
mod local;

pub(crate) use admin::NodeAdmin;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use meridian_config::{Ack, Config, FollowerWrites, Reads};
use meridian_model::dn::Dn;
use meridian_replication::{AdminCommand, ClusterNode, Member, Options, PeerHub};
use meridian_store::Store;
use meridian_store::replicated::Proposals;

use crate::setup::Setup;

/// What applying the log depends on in `config`: the naming contexts
/// (each a partition, its Raft group numbered by its place in the list),
/// the indexes (their keys are written by apply), `[groups]` (what apply
/// keeps true between entries), and the schema files (entries are
/// checked by apply). Every node must agree.
fn config_digest(config: &Config) -> anyhow::Result<meridian_replication::ConfigDigest> {
    use sha2::{Digest as _, Sha256};
    let hash = |bytes: &[u8]| -> [u8; 32] { Sha256::digest(bytes).into() };
    let loose = |dn: &str| dn.to_ascii_lowercase().replace(' ', "");
    let suffix = loose(&config.directory.suffix);
    let more: Vec<String> = config
        .directory
        .additional_suffixes
        .iter()
        .map(|s| loose(s))
        .collect();
    let indexes = format!("{:?}", config.storage.indexes);
    let mut schema = Vec::new();
    for file in &config.directory.schema_files {
        schema.extend_from_slice(
            &std::fs::read(file).with_context(|| format!("reading {}", file.display()))?,
        );
        schema.push(0);
    }
    Ok(vec![
        ("directory.suffix".into(), hash(suffix.as_bytes())),
        (
            "directory.additional_suffixes".into(),
            hash(more.join("\0").as_bytes()),
        ),
        ("storage.indexes".into(), hash(indexes.as_bytes())),
        (
            "groups".into(),
            hash(format!("{:?}", config.groups).as_bytes()),
        ),
        ("directory.schema_files".into(), hash(&schema)),
    ])
}

fn member(node: &meridian_config::ClusterNodeConfig) -> Member {
    Member {
        id: node.id,
        peer: node.peer.clone(),
        ldap: node.ldap.clone(),
    }
}

/// The peer TLS material from `cluster.tls_*`, read as the server reads
/// its own certificate files.
fn peer_credentials(
    certificate: &std::path::Path,
    key: &std::path::Path,
    ca: &std::path::Path,
) -> anyhow::Result<meridian_replication::PeerCredentials> {
    Ok(meridian_replication::PeerCredentials {
        chain: meridian_server::read_certificates(certificate)?,
        key: meridian_server::read_private_key(key)?,
        ca: meridian_server::read_certificates(ca)?,
    })
}

/// The replication options `config` gives.
pub(crate) fn options(config: &Config) -> anyhow::Result<Options> {
    let c = &config.cluster;
    Ok(Options {
        config_digest: config_digest(config)?,
        node_id: c.node_id,
        members: c.nodes.iter().map(member).collect(),
        learners: c.learners.iter().map(member).collect(),
        peer_listen: match c.peer_listen.as_str() {
            "" => None,
            listen => Some(listen.to_owned()),
        },
        secret: c.secret.clone(),
        tls: match (&c.tls_certificate_file, &c.tls_key_file, &c.tls_ca_file) {
            (Some(certificate), Some(key), Some(ca)) => {
                Some(peer_credentials(certificate, key, ca)?)
            }
            _ => None,
        },
        refer_writes: c.followers == FollowerWrites::Referral,
        ack_all: c.ack == Ack::All,
        preferred_leader: (c.preferred_leader != 0).then_some(c.preferred_leader),
        write_timeout: Duration::from_millis(c.write_timeout_ms),
        reads: match c.reads {
            Reads::Session => meridian_replication::ReadMode::Session,
            Reads::Linearizable => meridian_replication::ReadMode::Linearizable,
            Reads::Local => meridian_replication::ReadMode::Local {
                max_staleness: Duration::from_millis(c.max_staleness_ms),
            },
        },
        heartbeat: Duration::from_millis(c.heartbeat_ms),
        election_timeout: Duration::from_millis(c.election_timeout_ms),
        snapshot_every: c.snapshot_every_entries,
        snapshot_log_bytes: c.snapshot_log_bytes,
        max_message: c.max_message_bytes,
        max_batch: config.storage.max_batch,
        batches_in_flight: c.batches_in_flight,
        dir: config.directory.data_dir.join("raft"),
    })
}

/// One partition of the cluster on this node: a naming context and the
/// Raft group that orders its writes.
#[derive(Clone)]
pub(crate) struct Partition {
    /// Its suffix, as configured.
    pub(crate) suffix: String,
    pub(crate) dn: Dn,
    pub(crate) node: Arc<ClusterNode>,
}

/// This node's partitions, `directory.suffix`'s first.
pub(crate) type Partitions = Arc<Vec<Partition>>;

/// Starts this node's Raft group of every naming context over its store
/// (`stores` in the order of [`Setup::suffixes`]), all on one peer
/// listener. Each group keeps its own log (`Setup::raft_dir_of`) and may
/// prefer its own leader (`cluster.preferred_leaders`), so each partition
/// is written at its own site. The peer listener is `peer_socket` when
/// systemd passed one, else bound here.
pub(crate) async fn start_partitions(
    setup: &Setup,
    stores: Vec<(Store, Proposals)>,
    peer_socket: Option<std::net::TcpListener>,
) -> anyhow::Result<Partitions> {
    let base = options(&setup.config)?;
    let hub = match peer_socket {
        Some(socket) => PeerHub::on(tokio::net::TcpListener::from_std(socket)?, &base)?,
        None => PeerHub::bind(&base).await?,
    };
    let mut partitions = Vec::new();
    for (group, ((store, proposals), suffix)) in
        stores.into_iter().zip(setup.suffixes()).enumerate()
    {
        let mut options = base.clone();
        options.dir = setup.raft_dir_of(suffix);
        if group > 0 {
            options.preferred_leader = preferred_leader_of(setup, suffix)?;
        }
        let number = u16::try_from(group).context("more than 65,536 naming contexts")?;
        let node = ClusterNode::start_in(&hub, number, store, proposals, options)
            .await
            .with_context(|| format!("starting the partition of {}", suffix.original()))?;
        partitions.push(Partition {
            suffix: suffix.original().to_owned(),
            dn: suffix.clone(),
            node: Arc::new(node),
        });
    }
    Ok(Arc::new(partitions))
}

/// `cluster.preferred_leaders`' voter for the partition of `suffix` (not
/// the first), matched as DNs.
fn preferred_leader_of(setup: &Setup, suffix: &Dn) -> anyhow::Result<Option<u64>> {
    for (text, id) in &setup.config.cluster.preferred_leaders {
        let dn = Dn::parse(text.as_bytes(), &setup.schema).map_err(|e| {
            anyhow::anyhow!("config key `cluster.preferred_leaders`: {text:?}: {e}")
        })?;
        if dn.same_entry(suffix) {
            return Ok(Some(*id));
        }
    }
    Ok(None)
}

/// `meridian cluster`.
#[derive(Debug, clap::Args)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ClusterCommand {
    /// Start a cluster of `meridian serve` processes on loopback.
    Local(local::LocalArgs),
    /// Send a command to the WAN emulator of `cluster local --topology`:
    /// status, cut A B, cut A>B, heal A B, heal all, isolate SITE,
    /// stall A B MS, rtt A B MS, jitter A B MS, bandwidth A B MBIT|none
    /// (A, B: site names, or SITE.clients).
    Wan(local::WanArgs),
    /// Show what a node knows of the cluster: role, leader, term, applied
    /// index, voters, learners and each replica's lag (on the leader).
    Status {
        #[command(flatten)]
        target: admin::Target,
    },
    /// Add a non-voting replica; it catches up from a snapshot and the
    /// log (start it first, its config naming itself in cluster.learners).
    AddLearner {
        #[command(flatten)]
        target: admin::Target,
        /// Its cluster.node_id.
        #[arg(long)]
        id: u64,
        /// Where it listens for peers, IP:PORT.
        #[arg(long)]
        peer: String,
        /// Its LDAP URL.
        #[arg(long)]
        ldap: String,
    },
    /// Make a learner a voter.
    Promote {
        #[command(flatten)]
        target: admin::Target,
        /// The learner's node ID.
        #[arg(long)]
        id: u64,
    },
    /// Remove a voter or a learner from the cluster.
    Remove {
        #[command(flatten)]
        target: admin::Target,
        /// The node's ID.
        #[arg(long)]
        id: u64,
    },
    /// Hand leadership to another voter.
    TransferLeader {
        #[command(flatten)]
        target: admin::Target,
        /// The voter to lead.
        #[arg(long)]
        id: u64,
    },
}

pub(crate) fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let (target, command) = match args.command {
        ClusterCommand::Local(args) => return local::run(args),
        ClusterCommand::Wan(args) => return local::wan(args),
        ClusterCommand::Status { target } => (target, AdminCommand::Status),
        ClusterCommand::AddLearner {
            target,
            id,
            peer,
            ldap,
        } => (target, AdminCommand::AddLearner { id, peer, ldap }),
        ClusterCommand::Promote { target, id } => (target, AdminCommand::Promote { id }),
        ClusterCommand::Remove { target, id } => (target, AdminCommand::Remove { id }),
        ClusterCommand::TransferLeader { target, id } => {
            (target, AdminCommand::TransferLeader { id })
        }
    };
    admin::run(&target, &command)
}

/// A node's status in the root DSE: the first partition's in the
/// single-valued types, and one `meridianClusterPartition` value per
/// partition when there are several.
pub(crate) struct StatusAttributes(pub(crate) Partitions);

impl meridian_server::LiveAttributes for StatusAttributes {
    fn attributes(&self) -> Vec<(&'static str, Vec<String>)> {
        let Some(first) = self.0.first() else {
            return Vec::new();
        };
        let status = first.node.status();
        let mut attrs = vec![
            ("meridianClusterNodeId", vec![status.node_id.to_string()]),
            ("meridianClusterRole", vec![status.role.to_owned()]),
            ("meridianClusterTerm", vec![status.term.to_string()]),
            ("meridianClusterApplied", vec![status.applied.to_string()]),
            (
                "meridianClusterCommitted",
                vec![status.committed.to_string()],
            ),
            ("meridianClusterSnapshot", vec![status.snapshot.to_string()]),
            ("meridianClusterPurged", vec![status.purged.to_string()]),
            (
                "meridianClusterPeerBytesSent",
                vec![status.peer_bytes_sent.to_string()],
            ),
        ];
        if let Some(leader) = status.leader {
            let url = status.leader_url.unwrap_or_default();
            attrs.push(("meridianClusterLeader", vec![format!("{leader} {url}")]));
        }
        let replicas: Vec<String> = status
            .replicated
            .iter()
            .filter(|(id, _)| *id != status.node_id)
            .map(|(id, matched)| {
                format!(
                    "{id} matched={matched} lag={}",
                    status.last_log.saturating_sub(*matched)
                )
            })
            .collect();
        if !replicas.is_empty() {
            attrs.push(("meridianClusterReplica", replicas));
        }
        if self.0.len() > 1 {
            let partitions = self
                .0
                .iter()
                .map(|partition| {
                    let status = partition.node.status();
                    let leader = status
                        .leader
                        .map_or_else(|| "none".to_owned(), |id| id.to_string());
                    format!(
                        "{} role={} leader={leader} term={} applied={}",
                        partition.suffix, status.role, status.term, status.applied
                    )
                })
                .collect();
            attrs.push(("meridianClusterPartition", partitions));
        }
        attrs
    }
}
