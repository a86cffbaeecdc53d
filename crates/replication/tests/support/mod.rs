//! An in-process cluster: several [`ClusterNode`]s in one test process,
//! each over its own store in a temporary directory, every peer link
//! through a link of the WAN emulator (`meridian-wan`) that can delay,
//! cut one way or both, and sever. Peer listeners are bound on port 0 and
//! read back, so nothing races for ports. Writes are store commands
//! submitted at a node, as the directory submits them; reads are store
//! snapshots. What only processes show (SIGKILL, the binary's config)
//! stays in `crates/meridian/tests/t36`-`t41`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods,
    dead_code,
    unreachable_pub
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use meridian_config::StorageConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::modify::{ModOp, Modification};
use meridian_replication::{ClusterNode, Member, Options, ReadMode, ReadRefused};
use meridian_store::{Command, Store, StoreError, StoreOptions};
use meridian_wan::{Conditions, Link, Way};

pub const SUFFIX: &str = "dc=example,dc=com";
const SECRET: &str = "an in-process cluster's secret";

/// One node while it runs.
pub struct Running {
    pub node: ClusterNode,
    pub store: Store,
}

pub struct Harness {
    root: PathBuf,
    pub schema: Arc<Schema>,
    /// Each node's own peer listener (node `i` at `i - 1`).
    peers: Vec<SocketAddr>,
    /// `(from, to)`: the link `from` dials to reach `to`.
    pub links: BTreeMap<(u64, u64), Link>,
    nodes: Vec<Option<Running>>,
    options: Vec<Options>,
}

/// How the harness's nodes run; tests change what they need.
pub fn options(id: u64, dir: PathBuf) -> Options {
    Options {
        node_id: id,
        members: Vec::new(),
        learners: Vec::new(),
        peer_listen: None,
        secret: SECRET.into(),
        tls: None,
        config_digest: Vec::new(),
        refer_writes: false,
        ack_all: false,
        write_timeout: Duration::from_secs(3),
        preferred_leader: None,
        reads: ReadMode::Session,
        heartbeat: Duration::from_millis(50),
        election_timeout: Duration::from_millis(300),
        snapshot_every: 10_000,
        snapshot_log_bytes: 256 << 20,
        max_message: 64 << 20,
        max_batch: 256,
        batches_in_flight: 8,
        dir,
    }
}

/// A new, empty directory for one test's files.
pub fn temp_root() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "meridian-in-process-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn open_way() -> Way {
    Way::new(Conditions::with_delay(Duration::ZERO))
}

impl Harness {
    /// Starts `n` voters, each with `tune` applied to its options.
    pub async fn start(n: u64, tune: impl Fn(&mut Options)) -> Harness {
        let root = temp_root();
        let schema = Arc::new(Schema::builtin().unwrap());
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let peers: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let mut links = BTreeMap::new();
        for from in 1..=n {
            for to in (1..=n).filter(|to| *to != from) {
                let target = peers[(to - 1) as usize];
                links.insert(
                    (from, to),
                    Link::start(target, open_way(), open_way()).await.unwrap(),
                );
            }
        }
        let mut all_options = Vec::new();
        for id in 1..=n {
            let mut options = options(id, root.join(format!("node{id}")).join("raft"));
            options.members = (1..=n)
                .map(|other| Member {
                    id: other,
                    peer: if other == id {
                        peers[(id - 1) as usize].to_string()
                    } else {
                        links[&(id, other)].addr().to_string()
                    },
                    ldap: format!("ldap://node{other}.invalid"),
                })
                .collect();
            tune(&mut options);
            all_options.push(options);
        }
        let mut harness = Harness {
            root,
            schema,
            peers,
            links,
            nodes: (0..n).map(|_| None).collect(),
            options: all_options,
        };
        for (id, listener) in (1..=n).zip(listeners) {
            harness.start_node_on(id, listener).await;
        }
        harness
    }

    fn store_options(&self, id: u64) -> StoreOptions {
        StoreOptions {
            path: self.root.join(format!("node{id}")).join("db"),
            storage: StorageConfig::default(),
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &self.schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        }
    }

    async fn start_node_on(&mut self, id: u64, listener: tokio::net::TcpListener) {
        let options = self.options[(id - 1) as usize].clone();
        std::fs::create_dir_all(&options.dir).unwrap();
        let (store, proposals) =
            Store::open_replicated(self.store_options(id), Arc::clone(&self.schema)).unwrap();
        let node = ClusterNode::start_on(listener, store.clone(), proposals, options)
            .await
            .unwrap();
        self.nodes[(id - 1) as usize] = Some(Running { node, store });
    }

    pub fn node(&self, id: u64) -> &Running {
        self.nodes[(id - 1) as usize]
            .as_ref()
            .expect("the node runs")
    }

    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        (1..=self.nodes.len() as u64).filter(|id| self.nodes[(*id - 1) as usize].is_some())
    }

    /// The node every running node names leader, once they agree.
    pub async fn leader(&self, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let named: Vec<Option<u64>> = self
                .ids()
                .map(|id| self.node(id).node.status().leader)
                .collect();
            if let Some(Some(leader)) = named.first()
                && named.iter().all(|n| *n == Some(*leader))
                && self.node(*leader).node.is_leader()
            {
                return *leader;
            }
            assert!(Instant::now() < deadline, "no agreed leader: {named:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every running node agrees that `id` leads.
    pub async fn await_leader(&self, id: u64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.leader(within).await != id {
            assert!(Instant::now() < deadline, "node {id} never led");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A leader among `among`, once one of them leads and the others of
    /// them name it.
    pub async fn leader_among(&self, among: &[u64], within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            for id in among {
                let status = self.node(*id).node.status();
                if status.role == "leader"
                    && among
                        .iter()
                        .all(|o| self.node(*o).node.status().leader == Some(*id))
                {
                    return *id;
                }
            }
            assert!(Instant::now() < deadline, "no leader among {among:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Submits `command` at node `id` and waits for its result.
    pub async fn write(&self, id: u64, command: Command) -> Result<(), StoreError> {
        self.node(id)
            .store
            .submit(command)
            .await?
            .wait()
            .await
            .map(|_| ())
    }

    /// The entry `dn` as node `id` holds it now.
    pub fn read(&self, id: u64, dn: &str) -> Option<Entry> {
        let store = &self.node(id).store;
        let snapshot = store.snapshot().unwrap();
        let dn = Dn::parse(dn.as_bytes(), &self.schema).unwrap();
        let entry_id = snapshot.id(&dn).unwrap()?;
        Some(snapshot.entry(entry_id).unwrap())
    }

    /// The entry `dn` as node `id` serves it to a search under
    /// `cluster.reads = "linearizable"`: after the node's read round and
    /// its application up to the index the round got.
    pub async fn read_linearizable(&self, id: u64, dn: &str) -> Result<Option<Entry>, ReadRefused> {
        if let Some(wait) = self.node(id).node.before_read()? {
            wait.await?;
        }
        Ok(self.read(id, dn))
    }

    /// The entryCSN node `id` holds for `dn`, as the directory reads it
    /// when it prepares a first-wins write.
    pub fn entry_csn(&self, id: u64, dn: &str) -> Option<Vec<u8>> {
        let snapshot = self.node(id).store.snapshot().unwrap();
        let dn = Dn::parse(dn.as_bytes(), &self.schema).unwrap();
        let csn = self.schema.attribute_id("entryCSN").unwrap();
        snapshot.first_value(&dn, csn).unwrap()
    }

    /// Waits until every running node's store has the same digests and
    /// has applied the same index.
    pub async fn await_identical(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let digests: Vec<_> = self
                .ids()
                .map(|id| {
                    let store = &self.node(id).store;
                    let snapshot = store.snapshot().unwrap();
                    format!("{:?}", snapshot.digests().unwrap())
                })
                .collect();
            if digests.windows(2).all(|w| w[0] == w[1]) {
                return;
            }
            assert!(Instant::now() < deadline, "the replicas never agreed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Cuts (silently: a partition) or heals every way to and from `id`.
    pub fn partition(&self, id: u64, cut: bool) {
        for ((from, to), link) in &self.links {
            if *from == id || *to == id {
                link.set_cut(cut);
            }
        }
    }

    /// Sets every link's round trip.
    pub fn set_rtt(&self, rtt: Duration) {
        for link in self.links.values() {
            link.change(|c| c.delay = rtt / 2);
        }
    }

    /// Stops node `id` (its tasks and its Raft) and closes its store.
    pub async fn stop(&mut self, id: u64) {
        let running = self.nodes[(id - 1) as usize].take().expect("the node runs");
        running.node.shutdown().await;
        drop(running);
    }

    /// Starts node `id` again on its peer port, over what its directory
    /// holds.
    pub async fn restart(&mut self, id: u64) {
        let addr = self.peers[(id - 1) as usize];
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(listener) => break listener,
                Err(e) => {
                    assert!(Instant::now() < deadline, "rebinding {addr}: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        // The store's environment closes once the stopped Raft has let go
        // of it: opening it again waits for that.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let options = self.options[(id - 1) as usize].clone();
            match Store::open_replicated(self.store_options(id), Arc::clone(&self.schema)) {
                Ok((store, proposals)) => {
                    let node = ClusterNode::start_on(listener, store.clone(), proposals, options)
                        .await
                        .unwrap();
                    self.nodes[(id - 1) as usize] = Some(Running { node, store });
                    return;
                }
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "reopening node {id}'s store: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Removes node `id`'s data (its disk is lost); it must be stopped.
    pub fn wipe(&self, id: u64) {
        std::fs::remove_dir_all(self.root.join(format!("node{id}"))).unwrap();
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The base entries: the suffix and `ou=People`.
pub fn base(schema: &Schema) -> Vec<Command> {
    vec![
        add(
            schema,
            SUFFIX,
            &[
                ("objectClass", &["dcObject", "organization"]),
                ("dc", &["example"]),
                ("o", &["Example"]),
            ],
        ),
        add(
            schema,
            &format!("ou=People,{SUFFIX}"),
            &[
                ("objectClass", &["organizationalUnit"]),
                ("ou", &["People"]),
            ],
        ),
    ]
}

pub fn add(schema: &Schema, dn: &str, attrs: &[(&str, &[&str])]) -> Command {
    let entry = Entry::from_text(dn, attrs, schema).unwrap();
    Command::Add {
        entry,
        prechecked: false,
    }
}

/// An account below `ou=People`.
pub fn account(schema: &Schema, uid: &str) -> Command {
    add(
        schema,
        &format!("uid={uid},ou=People,{SUFFIX}"),
        &[("objectClass", &["account"]), ("uid", &[uid])],
    )
}

/// Replaces `description` of `dn`.
pub fn describe(schema: &Schema, dn: &str, text: &str) -> Command {
    Command::Modify {
        dn: Dn::parse(dn.as_bytes(), schema).unwrap(),
        changes: vec![Modification {
            op: ModOp::Replace,
            attr: "description".into(),
            values: vec![text.as_bytes().to_vec()],
        }],
        operational: vec![],
        permissive: false,
    }
}

/// [`describe`] that also stamps the entry's entryCSN, as the directory
/// does on every write: what first-wins compares.
pub fn describe_stamped(schema: &Schema, dn: &str, text: &str, csn: &str) -> Command {
    let mut command = describe(schema, dn, text);
    if let Command::Modify { operational, .. } = &mut command {
        operational.push(("entryCSN".into(), vec![csn.as_bytes().to_vec()]));
    }
    command
}

/// The `description` of an entry.
pub fn description(schema: &Schema, entry: &Entry) -> Option<String> {
    let attr = schema.attribute_id("description")?;
    entry
        .get(attr)
        .and_then(|a| a.values.first())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}
