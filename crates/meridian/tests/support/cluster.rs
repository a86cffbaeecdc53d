//! A cluster of real `meridian serve` processes on loopback, each link
//! between two nodes through a TCP proxy of our own that can delay, cut
//! (one direction of connection, or both) and heal it. Our kernels have
//! no `tc netem`, and a proxy needs no root.
//!
//! Node `i` reaches node `j` at the proxy of link `i -> j` (a link of
//! the WAN emulator, `meridian-wan`), which
//! forwards to `j`'s peer listener; cutting `i -> j` breaks every
//! connection `i` opened to `j` and refuses new ones, so `i`'s requests
//! (appends, votes, forwarded writes) to `j` fail while `j`'s to `i` go on.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use meridian_ber::{Tag, Writer};
use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp};

use super::{ADMIN_DN, ADMIN_PASSWORD, Client, temp_dir, tool_at};

/// A node's listening sockets, bound here on port 0 (the kernel picks
/// the port) and passed to every run of the node as systemd passes
/// them (`LISTEN_FDS`): no port is released between a node's runs, so
/// none can be taken by another program meanwhile. While the node is
/// down its sockets stay open, as under systemd socket activation: a
/// connection is queued, not refused, until the next run accepts it.
struct Sockets {
    ldap: TcpListener,
    peer: TcpListener,
}

impl Sockets {
    fn bind() -> Sockets {
        Sockets {
            ldap: TcpListener::bind("127.0.0.1:0").unwrap(),
            peer: TcpListener::bind("127.0.0.1:0").unwrap(),
        }
    }

    fn ldap_addr(&self) -> SocketAddr {
        self.ldap.local_addr().unwrap()
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer.local_addr().unwrap()
    }

    /// `command` run on this node's sockets ([`super::activated`]).
    fn activate(&self, command: &Command) -> Command {
        super::activated(command, &[("ldap", &self.ldap), ("peer", &self.peer)])
    }
}

/// One directed link: a link of the WAN emulator (`meridian-wan`), run
/// on this test process's own runtime.
pub struct Proxy {
    pub addr: SocketAddr,
    link: meridian_wan::Link,
}

/// The runtime every test link runs on.
fn link_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

impl Proxy {
    pub fn start(target: SocketAddr) -> Proxy {
        let way = || meridian_wan::Way::new(meridian_wan::Conditions::with_delay(Duration::ZERO));
        let link = link_runtime()
            .block_on(meridian_wan::Link::start(target, way(), way()))
            .unwrap();
        Proxy {
            addr: link.addr(),
            link,
        }
    }

    /// Breaks every connection through the link and refuses new ones.
    pub fn cut(&self) {
        self.link.sever();
    }

    pub fn heal(&self) {
        self.link.restore();
    }

    /// Cuts both ways (`true`) as a partition does, silently: bytes wait
    /// and connections stay open, unlike [`Proxy::cut`]; or heals them.
    pub fn partition(&self, cut: bool) {
        self.link.set_cut(cut);
    }

    /// A path of this round trip: half of it each way, with 1 ms jitter.
    pub fn set_rtt(&self, ms: u64) {
        self.link.change(|c| {
            c.delay = Duration::from_micros(ms * 500);
            c.jitter = Duration::from_millis(1);
        });
    }

    /// Delays each way by `ms`.
    pub fn delay(&self, ms: u64) {
        self.link.change(|c| c.delay = Duration::from_millis(ms));
    }
}

/// One node: its config, process and addresses.
pub struct Node {
    pub id: usize,
    pub ldap: SocketAddr,
    pub dir: PathBuf,
    pub config: PathBuf,
    sockets: Sockets,
    child: Option<Child>,
}

impl Node {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("node running").id()
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

/// A cluster and the proxies of its links.
pub struct Cluster {
    pub nodes: Vec<Node>,
    /// `(from, to)` (1-based IDs) to the proxy of that link.
    pub links: BTreeMap<(usize, usize), Proxy>,
    pub root: PathBuf,
    /// Each node's real peer address, by ID - 1.
    peer_ports: Vec<SocketAddr>,
}

/// Extra `[cluster]` keys every node gets (e.g. a short write timeout).
pub const SECRET: &str = "a-test-cluster-secret";

impl Cluster {
    /// Starts `n` nodes; `extra` is appended to each node's `[cluster]`.
    pub fn start(n: usize, extra: &str) -> Cluster {
        Cluster::start_each(n, |_, _| extra.to_owned())
    }

    /// Starts `n` nodes; `extra(id, dir)` is appended to node `id`'s
    /// `[cluster]` (`dir` is its directory, made already).
    pub fn start_each(n: usize, extra: impl Fn(usize, &std::path::Path) -> String) -> Cluster {
        Cluster::start_with_learners(n, 0, extra)
    }

    /// Starts `voters` voting nodes (IDs 1..=voters) and `learners`
    /// learners after them.
    pub fn start_with_learners(
        voters: usize,
        learners: usize,
        extra: impl Fn(usize, &std::path::Path) -> String,
    ) -> Cluster {
        Cluster::start_layout(voters, learners, 0, "", extra)
    }

    /// Starts `n` voters whose `[directory]` gets `directory` (more
    /// naming contexts: partitions) and whose `[cluster]` gets `extra`.
    pub fn start_partitioned(n: usize, directory: &str, extra: &str) -> Cluster {
        Cluster::start_layout(n, 0, 0, directory, |_, _| extra.to_owned())
    }

    /// Starts `voters` voting nodes and `spares` nodes after them that
    /// the voters' configs do not name: each spare's config names the
    /// voters and itself as a learner, so it waits to be added while
    /// the cluster runs (`meridian cluster add-learner`). The voters
    /// reach a spare at its real peer address (`peer_address`).
    pub fn start_with_spares(voters: usize, spares: usize) -> Cluster {
        Cluster::start_layout(voters, 0, spares, "", |_, _| String::new())
    }

    /// Where node `id` listens for peers (its real address, no proxy).
    pub fn peer_address(&self, id: usize) -> String {
        self.peer_ports[id - 1].to_string()
    }

    fn start_layout(
        voters: usize,
        learners: usize,
        spares: usize,
        directory: &str,
        extra: impl Fn(usize, &std::path::Path) -> String,
    ) -> Cluster {
        let n = voters + learners + spares;
        let spare = |id: usize| id > voters + learners;
        let root = temp_dir("cluster");
        let mut sockets: Vec<Sockets> = (0..n).map(|_| Sockets::bind()).collect();
        let ldap: Vec<u16> = sockets.iter().map(|s| s.ldap_addr().port()).collect();
        let peer: Vec<u16> = sockets.iter().map(|s| s.peer_addr().port()).collect();
        let mut links = BTreeMap::new();
        for from in 1..=n {
            for to in 1..=n {
                if from != to {
                    let target: SocketAddr = format!("127.0.0.1:{}", peer[to - 1]).parse().unwrap();
                    links.insert((from, to), Proxy::start(target));
                }
            }
        }
        let mut nodes = Vec::new();
        for (id, sockets) in (1..=n).zip(sockets.drain(..)) {
            let dir = root.join(format!("node{id}"));
            std::fs::create_dir_all(&dir).unwrap();
            let extra = extra(id, &dir);
            let mut config = format!(
                "[server]\nlisten = \"127.0.0.1:{}\"\n[directory]\ndata_dir = {:?}\n{directory}\n[cluster]\nnode_id = {id}\nsecret = {SECRET:?}\npeer_listen = \"127.0.0.1:{}\"\n{extra}\n",
                ldap[id - 1],
                dir.display().to_string(),
                peer[id - 1]
            );
            for other in 1..=n {
                if spare(other) && other != id {
                    continue;
                }
                // This node sees the others through its links' proxies;
                // its own entry is its real address.
                let reach = if other == id {
                    format!("127.0.0.1:{}", peer[id - 1])
                } else {
                    links[&(id, other)].addr.to_string()
                };
                let table = if other > voters { "learners" } else { "nodes" };
                config.push_str(&format!(
                    "[[cluster.{table}]]\nid = {other}\npeer = \"{reach}\"\nldap = \"ldap://127.0.0.1:{}\"\n",
                    ldap[other - 1]
                ));
            }
            let path = dir.join("config.toml");
            std::fs::write(&path, config).unwrap();
            nodes.push(Node {
                id,
                ldap: format!("127.0.0.1:{}", ldap[id - 1]).parse().unwrap(),
                dir,
                config: path,
                sockets,
                child: None,
            });
        }
        let peer_ports = peer
            .iter()
            .map(|port| format!("127.0.0.1:{port}").parse().unwrap())
            .collect();
        let mut cluster = Cluster {
            nodes,
            links,
            root,
            peer_ports,
        };
        for id in 1..=n {
            cluster.start_node(id);
        }
        cluster
    }

    /// Three nodes with `extra` in their `[cluster]`, the leader elected
    /// and the base entries added there: the cluster and its leader.
    pub fn with_base(extra: &str) -> (Cluster, usize) {
        let mut cluster = Cluster::start(3, extra);
        let leader = cluster.leader(Duration::from_secs(20));
        setup_base(&cluster, leader);
        (cluster, leader)
    }

    pub fn node(&self, id: usize) -> &Node {
        &self.nodes[id - 1]
    }

    /// Starts (or restarts) node `id` on its sockets and waits until it
    /// serves (its "listening" line: a connect alone proves nothing, the
    /// socket accepts into its queue while no run of the node does).
    pub fn start_node(&mut self, id: usize) {
        let node = &mut self.nodes[id - 1];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("serve.log"))
            .unwrap();
        let mut serve = Command::new(env!("CARGO_BIN_EXE_meridian"));
        serve
            .args(["serve", "--config"])
            .arg(&node.config)
            .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env(
                "RUST_LOG",
                "warn,meridian_replication=info,meridian_store=info",
            );
        let mut child = node
            .sockets
            .activate(&serve)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        node.child = Some(child);
        let (listening, said) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
            let up =
                lines.any(|line| line.is_ok_and(|line| line.starts_with("meridian listening on ")));
            let _ = listening.send(up);
            // Keep draining, so the node never blocks on its stdout.
            for _ in lines {}
        });
        let up = said.recv_timeout(Duration::from_secs(60));
        assert_eq!(
            up,
            Ok(true),
            "node {id} did not start serving (see {})",
            node.dir.join("serve.log").display()
        );
    }

    /// `meridian check` of node `id`'s database (stop the node first):
    /// whether it passed, and what it said.
    pub fn check(&self, id: usize) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["check", "--config"])
            .arg(&self.node(id).config)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    }

    /// SIGKILL to node `id`.
    pub fn kill(&mut self, id: usize) {
        if let Some(mut child) = self.nodes[id - 1].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Cuts every link to and from `id`.
    pub fn isolate(&self, id: usize) {
        for ((from, to), proxy) in &self.links {
            if *from == id || *to == id {
                proxy.cut();
            }
        }
    }

    pub fn heal_all(&self) {
        for proxy in self.links.values() {
            proxy.heal();
        }
    }

    /// The node that leads, asked over LDAP (the root DSE), once exactly
    /// one running node says it does and another names it leader in the
    /// same term. A node's word alone is not enough: a node restarted
    /// from a term it led resumes as leader of that term until it hears
    /// of the newer one its peers moved to meanwhile.
    pub fn leader(&mut self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let views: Vec<(usize, ClusterView)> = self
                .running()
                .into_iter()
                .filter_map(|id| Some((id, ClusterView::of(self.nodes[id - 1].ldap)?)))
                .collect();
            let claims: Vec<&(usize, ClusterView)> = views
                .iter()
                .filter(|(_, view)| view.role == "leader")
                .collect();
            if let [(leader, claim)] = claims.as_slice() {
                let confirmed = views.iter().any(|(id, view)| {
                    id != leader && view.term == claim.term && view.leader == Some(*leader)
                });
                if confirmed {
                    return *leader;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no single leader within {within:?}: {views:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The IDs of the nodes running now.
    pub fn running(&mut self) -> Vec<usize> {
        self.nodes
            .iter_mut()
            .filter_map(|node| node.is_running().then_some(node.id))
            .collect()
    }

    /// Every running node's entries, as sorted LDIF text of every
    /// attribute (user and operational): equal text, equal replicas.
    pub fn dumps(&mut self) -> Vec<(usize, String)> {
        self.running()
            .into_iter()
            .map(|id| (id, dump(self.nodes[id - 1].ldap)))
            .collect()
    }

    /// Waits until every running node holds the same entries.
    pub fn await_identical(&mut self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let dumps = self.dumps();
            if dumps.windows(2).all(|w| w[0].1 == w[1].1) {
                return dumps.into_iter().next().map(|(_, d)| d).unwrap_or_default();
            }
            if Instant::now() >= deadline {
                for (id, d) in &dumps {
                    eprintln!("--- node {id}: {} lines", d.lines().count());
                }
                panic!("replicas differ after {within:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for id in 1..=self.nodes.len() {
            self.kill(id);
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        } else {
            eprintln!("cluster files kept in {}", self.root.display());
        }
    }
}

/// The root DSE's `meridianClusterRole`, if the node answers.
pub fn cluster_role(addr: SocketAddr) -> Option<String> {
    root_dse_value(addr, "meridianClusterRole")
}

/// One value of the root DSE, if the node answers and has it.
pub fn root_dse_value(addr: SocketAddr, attribute: &str) -> Option<String> {
    root_dse_values(addr, &[attribute])?
        .into_iter()
        .find_map(|(name, value)| (name == attribute).then_some(value))
}

/// The values of `attributes` in the root DSE, as (name, value) pairs;
/// `None` if the node does not answer.
pub fn root_dse_values(addr: SocketAddr, attributes: &[&str]) -> Option<Vec<(String, String)>> {
    // A paused node accepts the connection and never answers: the
    // whole search is bounded, not only the connect.
    let out = Command::new("timeout")
        .args(["3", "ldapsearch", "-x", "-LLL", "-o", "nettimeout=2"])
        .args(["-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://{addr}"))
        .args(["-b", "", "-s", "base"])
        .args(attributes)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let pairs = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    Some(pairs)
}

/// What one node says of the cluster in its root DSE.
#[derive(Debug)]
struct ClusterView {
    role: String,
    term: String,
    /// The node ID it names leader, if it knows one.
    leader: Option<usize>,
}

impl ClusterView {
    fn of(addr: SocketAddr) -> Option<ClusterView> {
        let values = root_dse_values(
            addr,
            &[
                "meridianClusterRole",
                "meridianClusterTerm",
                "meridianClusterLeader",
            ],
        )?;
        let value = |attribute: &str| {
            values
                .iter()
                .find_map(|(name, value)| (name == attribute).then_some(value.as_str()))
        };
        Some(ClusterView {
            role: value("meridianClusterRole")?.to_owned(),
            term: value("meridianClusterTerm")?.to_owned(),
            // "ID URL"
            leader: value("meridianClusterLeader")
                .and_then(|named| named.split(' ').next()?.parse().ok()),
        })
    }
}

/// Every entry under the suffix with all attributes, sorted.
pub fn dump(addr: SocketAddr) -> String {
    let out = Command::new("timeout")
        .args(["30", "ldapsearch", "-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://{addr}"))
        .args([
            "-D",
            ADMIN_DN,
            "-w",
            ADMIN_PASSWORD,
            "-b",
            "dc=example,dc=com",
            "-z",
            "0",
        ])
        .args(["*", "+"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut entries: Vec<String> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut lines: Vec<&str> = e.lines().collect();
            lines.sort_unstable();
            lines.join("\n")
        })
        .collect();
    entries.sort_unstable();
    entries.join("\n\n")
}

/// The outcome of one write as a client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A result code other than success.
    Refused(i64, String),
    /// No answer: the connection broke or timed out.
    Unknown,
}

/// A client connection that sends one write at a time and waits.
pub struct Writer1 {
    client: Option<Client>,
    addr: SocketAddr,
    next_id: i32,
}

impl Writer1 {
    pub fn new(addr: SocketAddr) -> Writer1 {
        Writer1 {
            client: None,
            addr,
            next_id: 2,
        }
    }

    fn connected(&mut self) -> Option<&mut Client> {
        if self.client.is_none() {
            let stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).ok()?;
            stream
                .set_read_timeout(Some(Duration::from_secs(30)))
                .ok()?;
            let mut client = Client::from_stream(stream);
            let mut bytes = Vec::new();
            meridian_proto::message::encode_simple_bind(
                &mut bytes,
                1,
                ADMIN_DN.as_bytes(),
                ADMIN_PASSWORD.as_bytes(),
            );
            client.stream.write_all(&bytes).ok()?;
            let pdu = client.read_pdu()?;
            let ok = matches!(
                LdapMessage::decode(&pdu, &DecodeLimits::default()).ok()?.op,
                ProtocolOp::BindResponse(r) if r.result.code.0 == 0
            );
            if !ok {
                return None;
            }
            self.client = Some(client);
            self.next_id = 2;
        }
        self.client.as_mut()
    }

    /// Sends one request (made by `encode` with the message ID) and
    /// waits for its result.
    fn call(&mut self, encode: impl FnOnce(&mut Vec<u8>, i32)) -> Outcome {
        let id = self.next_id;
        self.next_id += 1;
        let Some(client) = self.connected() else {
            return Outcome::Unknown;
        };
        let mut bytes = Vec::new();
        encode(&mut bytes, id);
        if client.stream.write_all(&bytes).is_err() {
            self.client = None;
            return Outcome::Unknown;
        }
        let pdu = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| client.read_pdu()))
            .ok()
            .flatten();
        let Some(pdu) = pdu else {
            self.client = None;
            return Outcome::Unknown;
        };
        let Ok(message) = LdapMessage::decode(&pdu, &DecodeLimits::default()) else {
            self.client = None;
            return Outcome::Unknown;
        };
        let result = match &message.op {
            ProtocolOp::ModifyResponse(r)
            | ProtocolOp::AddResponse(r)
            | ProtocolOp::DelResponse(r)
            | ProtocolOp::CompareResponse(r) => r,
            _ => {
                self.client = None;
                return Outcome::Unknown;
            }
        };
        match result.code.0 {
            0 => Outcome::Ok,
            code => Outcome::Refused(
                i64::from(code),
                String::from_utf8_lossy(result.message).into_owned(),
            ),
        }
    }

    /// Sends a replace of `attribute` of `dn` for each of `values`, all
    /// at once (pipelined), and returns their outcomes in that order.
    pub fn replace_pipelined(
        &mut self,
        dn: &str,
        attribute: &str,
        values: &[&str],
    ) -> Vec<Outcome> {
        let first = self.next_id;
        self.next_id += values.len() as i32;
        let Some(client) = self.connected() else {
            return vec![Outcome::Unknown; values.len()];
        };
        let mut bytes = Vec::new();
        for (i, value) in values.iter().enumerate() {
            encode_replace(&mut bytes, first + i as i32, dn, attribute, value);
        }
        if client.stream.write_all(&bytes).is_err() {
            self.client = None;
            return vec![Outcome::Unknown; values.len()];
        }
        let mut outcomes = vec![Outcome::Unknown; values.len()];
        for _ in values {
            let Some(pdu) = client.read_pdu() else { break };
            let Ok(message) = LdapMessage::decode(&pdu, &DecodeLimits::default()) else {
                break;
            };
            if let ProtocolOp::ModifyResponse(r) = &message.op {
                let slot = (message.message_id - first) as usize;
                outcomes[slot] = match r.code.0 {
                    0 => Outcome::Ok,
                    code => Outcome::Refused(
                        i64::from(code),
                        String::from_utf8_lossy(r.message).into_owned(),
                    ),
                };
            }
        }
        outcomes
    }

    /// Replaces `attribute` of `dn` with `value`.
    pub fn replace(&mut self, dn: &str, attribute: &str, value: &str) -> Outcome {
        self.call(|bytes, id| encode_replace(bytes, id, dn, attribute, value))
    }

    /// Adds (`op` 0) or deletes (1) one value of `attribute` of `dn`.
    pub fn change_value(&mut self, dn: &str, op: i64, attribute: &str, value: &str) -> Outcome {
        self.call(|bytes, id| encode_modify(bytes, id, dn, op, attribute, value))
    }

    /// Deletes `dn`.
    pub fn delete(&mut self, dn: &str) -> Outcome {
        self.call(|bytes, id| {
            LdapMessage {
                message_id: id,
                op: ProtocolOp::DelRequest(dn.as_bytes()),
                controls: meridian_proto::Seq::empty(),
            }
            .encode(bytes);
        })
    }

    /// Compares `attribute` of `dn` with `value`: `Refused(6, _)` is
    /// compareTrue, `Refused(5, _)` compareFalse.
    pub fn compare(&mut self, dn: &str, attribute: &str, value: &str) -> Outcome {
        self.call(|bytes, id| {
            LdapMessage {
                message_id: id,
                op: ProtocolOp::CompareRequest(meridian_proto::CompareRequest {
                    dn: dn.as_bytes(),
                    ava: meridian_proto::Ava {
                        attr: attribute.as_bytes(),
                        value: value.as_bytes(),
                    },
                }),
                controls: meridian_proto::Seq::empty(),
            }
            .encode(bytes);
        })
    }

    /// Reads `attribute` of `dn` (a base search): its first value, `None`
    /// when it has none; `Err` with the outcome when the search failed.
    pub fn read(&mut self, dn: &str, attribute: &str) -> Result<Option<String>, Outcome> {
        self.read_many(dn, &[attribute])
            .map(|mut values| values.swap_remove(0))
    }

    /// Reads `attributes` of `dn` in one base search: the first value of
    /// each, in order, `None` where it has none.
    pub fn read_many(
        &mut self,
        dn: &str,
        attributes: &[&str],
    ) -> Result<Vec<Option<String>>, Outcome> {
        let id = self.next_id;
        self.next_id += 1;
        let Some(client) = self.connected() else {
            return Err(Outcome::Unknown);
        };
        let mut bytes = Vec::new();
        encode_base_search(&mut bytes, id, dn, attributes);
        if client.stream.write_all(&bytes).is_err() {
            self.client = None;
            return Err(Outcome::Unknown);
        }
        let mut values = vec![None; attributes.len()];
        loop {
            let pdu = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| client.read_pdu()))
                .ok()
                .flatten();
            let message = pdu
                .as_deref()
                .and_then(|pdu| LdapMessage::decode(pdu, &DecodeLimits::default()).ok());
            let Some(message) = message else {
                self.client = None;
                return Err(Outcome::Unknown);
            };
            match &message.op {
                ProtocolOp::SearchResultEntry(entry) => {
                    for (value, wanted) in values.iter_mut().zip(attributes) {
                        *value = entry
                            .attributes
                            .iter()
                            .find(|a| a.ty.eq_ignore_ascii_case(wanted.as_bytes()))
                            .and_then(|a| a.values.iter().next())
                            .map(|v| String::from_utf8_lossy(v).into_owned());
                    }
                }
                ProtocolOp::SearchResultDone(done) => {
                    return match done.code.0 {
                        0 => Ok(values),
                        code => Err(Outcome::Refused(
                            i64::from(code),
                            String::from_utf8_lossy(done.message).into_owned(),
                        )),
                    };
                }
                _ => {}
            }
        }
    }

    /// Adds `dn` with `attributes`.
    pub fn add(&mut self, dn: &str, attributes: &[(&str, &[&str])]) -> Outcome {
        self.call(|bytes, id| meridian_testing::slapd::encode_add(bytes, id, dn, attributes))
    }

    /// Adds an `account` entry `uid=<uid>,<parent>`.
    pub fn add_account(&mut self, parent: &str, uid: &str) -> Outcome {
        self.call(|bytes, id| {
            meridian_testing::slapd::encode_add(
                bytes,
                id,
                &format!("uid={uid},{parent}"),
                &[("objectClass", &["account"]), ("uid", &[uid])],
            );
        })
    }
}

/// A base-scope SearchRequest for `attributes` of `dn`, filter
/// `(objectClass=*)`.
pub fn encode_base_search(bytes: &mut Vec<u8>, id: i32, dn: &str, attributes: &[&str]) {
    let mut w = Writer::new(bytes);
    let message = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(id));
    let request = w.start(Tag::application(3, true));
    w.octets(Tag::OCTET_STRING, dn.as_bytes());
    w.integer(Tag::ENUMERATED, 0);
    w.integer(Tag::ENUMERATED, 0);
    w.integer(Tag::INTEGER, 0);
    w.integer(Tag::INTEGER, 0);
    w.boolean(Tag::BOOLEAN, false);
    w.octets(Tag::context(7, false), b"objectClass");
    let list = w.start(Tag::SEQUENCE);
    for attribute in attributes {
        w.octets(Tag::OCTET_STRING, attribute.as_bytes());
    }
    w.end(list);
    w.end(request);
    w.end(message);
}

/// A ModifyRequest replacing one attribute with one value.
pub fn encode_replace(bytes: &mut Vec<u8>, id: i32, dn: &str, attribute: &str, value: &str) {
    encode_modify(bytes, id, dn, 2, attribute, value);
}

/// A ModifyRequest of one change (`op`: 0 add, 1 delete, 2 replace) of
/// one attribute with one value.
pub fn encode_modify(
    bytes: &mut Vec<u8>,
    id: i32,
    dn: &str,
    op: i64,
    attribute: &str,
    value: &str,
) {
    let mut w = Writer::new(bytes);
    let message = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(id));
    let request = w.start(Tag::application(6, true));
    w.octets(Tag::OCTET_STRING, dn.as_bytes());
    let changes = w.start(Tag::SEQUENCE);
    let change = w.start(Tag::SEQUENCE);
    w.integer(Tag::ENUMERATED, op);
    let modification = w.start(Tag::SEQUENCE);
    w.octets(Tag::OCTET_STRING, attribute.as_bytes());
    let values = w.start(Tag::SET);
    w.octets(Tag::OCTET_STRING, value.as_bytes());
    w.end(values);
    w.end(modification);
    w.end(change);
    w.end(changes);
    w.end(request);
    w.end(message);
}

pub const BASE: &str = "dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=people,dc=example,dc=com
objectClass: organizationalUnit
ou: people
";

pub const PEOPLE: &str = "ou=people,dc=example,dc=com";

pub fn admin_at(url: &str, tool: &str, extra: &[&str], stdin: Option<&str>) -> (i32, String) {
    tool_at(
        url,
        tool,
        &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
        extra,
        stdin,
    )
}

pub fn url(cluster: &Cluster, id: usize) -> String {
    format!("ldap://{}", cluster.node(id).ldap)
}

/// Adds the base entries and one `uid=own<n>` per node at node `at`.
pub fn setup_base(cluster: &Cluster, at: usize) {
    let url = url(cluster, at);
    let (code, out) = admin_at(&url, "ldapadd", &[], Some(BASE));
    assert_eq!(code, 0, "{out}");
    let own: String = (1..=cluster.nodes.len())
        .map(|n| format!("dn: uid=own{n},{PEOPLE}\nobjectClass: account\nuid: own{n}\n\n"))
        .collect();
    let (code, out) = admin_at(&url, "ldapadd", &[], Some(&own));
    assert_eq!(code, 0, "{out}");
}
