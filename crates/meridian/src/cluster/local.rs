//! `meridian cluster local`: a working cluster of `meridian serve`
//! processes on loopback, in one command, for a newcomer to try and for
//! scripts.
//!
//! Node `i` (from 1) serves LDAP on `BASE_PORT + i - 1` and listens for
//! peers on `BASE_PORT + 100 + i - 1`; its data and its generated config
//! are in `DATA_DIR/node<i>/`. The cluster secret is made once and kept
//! in `DATA_DIR/cluster.secret` (0600). The administrator password comes
//! from `MERIDIAN_ADMIN_PASSWORD`, as for `serve`, and each node then
//! keeps its hash. Stopping this command (Ctrl-C, SIGTERM) stops the
//! nodes; a node that dies is reported and the others go on.
//!
//! With `--topology FILE` the nodes are placed at the file's sites and
//! every peer link goes through this process's WAN emulator
//! (`meridian-wan`): node `i` is configured to reach node `j` at the
//! emulator's link `i -> j`, which delays, caps and cuts as the topology
//! and the control commands say (`meridian cluster wan`), and each
//! node's clients get a link of their own, printed at start. The
//! emulator's control address is kept in `DATA_DIR/wan.control`.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use meridian_wan::{Emulator, Topology};

/// Flags of `meridian cluster local`.
#[derive(Debug, Args)]
pub(crate) struct LocalArgs {
    /// Voting nodes to start (3 or 5 tolerate one or two failures);
    /// default 3, or the topology's nodes.
    #[arg(long)]
    nodes: Option<u16>,
    /// Place the nodes at the sites of this topology file and carry
    /// their traffic through the WAN emulator (`contrib/topologies/`).
    #[arg(long)]
    topology: Option<PathBuf>,
    /// Learners to start besides (read replicas that do not vote), with
    /// the IDs and ports after the voters'.
    #[arg(long, default_value_t = 0)]
    learners: u16,
    /// Where the nodes keep their data and configs.
    #[arg(long, default_value = "./meridian-cluster")]
    data_dir: PathBuf,
    /// LDAP port of node 1; node i takes BASE_PORT + i - 1 (peers:
    /// BASE_PORT + 100 + i - 1).
    #[arg(long, default_value_t = 3389)]
    base_port: u16,
    /// `cluster.conflicts` of every node: `last-writer-wins` or
    /// `first-wins`.
    #[arg(long, default_value = "last-writer-wins", value_parser = ["last-writer-wins", "first-wins"])]
    conflicts: String,
    /// The naming context (`directory.suffix`).
    #[arg(long, default_value = "dc=example,dc=com")]
    suffix: String,
    /// `cluster.preferred_leader` of every node: the voter that should
    /// lead (e.g. the site a run's leader should be at); 0: none.
    #[arg(long, default_value_t = 0)]
    preferred_leader: u16,
    /// Another naming context, a partition with its own Raft group, and
    /// the voter that should lead it: `SUFFIX=ID` (e.g.
    /// `ou=Frankfurt,dc=example,dc=com=2`; ID 0: none); repeatable.
    #[arg(long = "partition", value_name = "SUFFIX=ID")]
    partitions: Vec<String>,
    /// Any other `[cluster]` key of every node, as `KEY=VALUE` in TOML
    /// (e.g. `batches_in_flight=1`); repeatable.
    #[arg(long = "cluster-key", value_name = "KEY=VALUE")]
    cluster_keys: Vec<String>,
}

/// Where the nodes listen, and how each reaches the others.
struct Layout {
    voters: u16,
    learners: u16,
    /// Each node's LDAP and peer listeners (node `i` at `i - 1`).
    ldap: Vec<SocketAddr>,
    peer: Vec<SocketAddr>,
    /// The WAN emulator the peer links go through, with `--topology`.
    wan: Option<Arc<Emulator>>,
}

impl Layout {
    fn new(args: &LocalArgs, voters: u16) -> anyhow::Result<Layout> {
        let total = voters + args.learners;
        let port = |offset: u16, i: u16| {
            args.base_port
                .checked_add(offset + i - 1)
                .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--base-port {} leaves no room for {total} nodes",
                        args.base_port
                    )
                })
        };
        Ok(Layout {
            voters,
            learners: args.learners,
            ldap: (1..=total)
                .map(|i| port(0, i))
                .collect::<anyhow::Result<_>>()?,
            peer: (1..=total)
                .map(|i| port(100, i))
                .collect::<anyhow::Result<_>>()?,
            wan: None,
        })
    }

    /// The address node `from` dials to reach node `to`.
    fn route(&self, from: u16, to: u16) -> Option<SocketAddr> {
        match &self.wan {
            Some(wan) if from != to => wan.peer_route(usize::from(from), usize::from(to)),
            _ => self.peer.get(usize::from(to) - 1).copied(),
        }
    }

    /// The config of node `id` (from 1).
    fn node_config(
        &self,
        args: &LocalArgs,
        id: u16,
        secret: &str,
        dir: &Path,
    ) -> anyhow::Result<String> {
        use std::fmt::Write as _;
        let missing = || anyhow::anyhow!("node {id} is outside the layout");
        let mut text = String::new();
        writeln!(
            text,
            "# Made by `meridian cluster local`; node {id} of {}.",
            self.voters + self.learners
        )?;
        let ldap = self.ldap.get(usize::from(id) - 1).ok_or_else(missing)?;
        let peer = self.peer.get(usize::from(id) - 1).ok_or_else(missing)?;
        writeln!(text, "[server]\nlisten = \"{ldap}\"")?;
        writeln!(text, "[directory]\nsuffix = {:?}", args.suffix)?;
        writeln!(text, "admin_dn = {:?}", format!("cn=admin,{}", args.suffix))?;
        writeln!(text, "data_dir = {:?}", dir.display().to_string())?;
        let partitions = partitions(args)?;
        let suffixes: Vec<&str> = partitions.iter().map(|(suffix, _)| *suffix).collect();
        writeln!(text, "additional_suffixes = {suffixes:?}")?;
        writeln!(text, "[cluster]\nnode_id = {id}\nsecret = {secret:?}")?;
        writeln!(text, "peer_listen = \"{peer}\"")?;
        writeln!(text, "conflicts = {:?}", args.conflicts)?;
        writeln!(text, "preferred_leader = {}", args.preferred_leader)?;
        for key in &args.cluster_keys {
            let Some((name, value)) = key.split_once('=') else {
                anyhow::bail!("--cluster-key {key:?} is not KEY=VALUE");
            };
            writeln!(text, "{} = {}", name.trim(), value.trim())?;
        }
        let leaders: Vec<String> = partitions
            .iter()
            .filter(|(_, leader)| *leader != 0)
            .map(|(suffix, leader)| format!("{suffix:?} = {leader}"))
            .collect();
        writeln!(text, "preferred_leaders = {{ {} }}", leaders.join(", "))?;
        let timing = self
            .wan
            .as_ref()
            .map(|wan| wan_timing(wan.topology().longest_rtt_ms()));
        if let Some((heartbeat, election)) = timing {
            writeln!(
                text,
                "heartbeat_ms = {heartbeat}\nelection_timeout_ms = {election}"
            )?;
        }
        for i in 1..=self.voters + self.learners {
            let table = if i > self.voters { "learners" } else { "nodes" };
            let route = self.route(id, i).ok_or_else(missing)?;
            let ldap = self.ldap.get(usize::from(i) - 1).ok_or_else(missing)?;
            writeln!(
                text,
                "[[cluster.{table}]]\nid = {i}\npeer = \"{route}\"\nldap = \"ldap://{ldap}\""
            )?;
        }
        Ok(text)
    }
}

/// `--partition`'s suffixes and preferred leaders. The suffix is what
/// comes before the last `=` (a DN has `=` of its own).
fn partitions(args: &LocalArgs) -> anyhow::Result<Vec<(&str, u16)>> {
    args.partitions
        .iter()
        .map(|given| {
            let parsed = given
                .rsplit_once('=')
                .and_then(|(suffix, id)| Some((suffix.trim(), id.trim().parse().ok()?)));
            parsed.ok_or_else(|| {
                anyhow::anyhow!("--partition {given:?} is not SUFFIX=ID (ID a node, or 0)")
            })
        })
        .collect()
}

/// Heartbeat and election timeout (ms) for a longest round trip of
/// `rtt_ms`. openraft waits for a heartbeat's answer no longer than the
/// heartbeat interval, so the interval must exceed the round trip (by
/// half, for jitter and a busy machine), and the election timeout is
/// three heartbeats (openraft's rule of thumb). Never below the
/// defaults (50 and 300).
fn wan_timing(rtt_ms: f64) -> (u64, u64) {
    let heartbeat = ((rtt_ms * 1.5).ceil().max(0.0) as u64).max(50);
    (heartbeat, (heartbeat * 3).max(300))
}

/// The cluster secret: read, or made and stored.
fn secret(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("cluster.secret");
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().len() >= 16 => return Ok(text.trim().to_owned()),
        Ok(_) => anyhow::bail!(
            "{} holds no usable secret (16 characters or more)",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("no randomness for the secret: {e}"))?;
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = meridian_store::private::create_file(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    file.sync_all()?;
    Ok(secret)
}

/// Kills the nodes when dropped (this command ending in any way).
struct Nodes(Vec<(u16, Child)>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            // SIGTERM first: a clean stop syncs the stores.
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill takes plain integers; `pid` is our child's.
                #[allow(unsafe_code)]
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        for (_, child) in &mut self.0 {
            let _ = child.wait();
        }
    }
}

pub(crate) fn run(args: LocalArgs) -> anyhow::Result<()> {
    let (voters, topology) = voters_and_topology(&args)?;
    meridian_store::private::create_dir(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let root = std::fs::canonicalize(&args.data_dir)?;
    let secret = secret(&root)?;
    // The emulator's links run here, beside the wait for a stop.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut layout = Layout::new(&args, voters)?;
    if let Some(topology) = topology {
        start_wan(&runtime, topology, &mut layout, &root, &args.data_dir)?;
    }
    let mut nodes = start_nodes(&args, &layout, &root, &secret)?;
    let total = voters + args.learners;
    println!(
        "cluster of {voters} voters and {} learners up: ldap://127.0.0.1:{}..{}; logs in {}/node*/serve.log",
        args.learners,
        args.base_port,
        u32::from(args.base_port) + u32::from(total) - 1,
        root.display()
    );
    if let Some(wan) = &layout.wan {
        for node in 1..=usize::from(total) {
            let site = wan
                .topology()
                .site_of(node)
                .and_then(|s| wan.topology().sites.get(s));
            if let (Some(site), Some(route)) = (site, wan.client_route(node)) {
                println!(
                    "node {node} at {}: its site's clients connect to ldap://{route}",
                    site.name
                );
            }
        }
    }
    std::io::stdout().flush()?;
    wait_for_stop(&runtime, &mut nodes)
}

/// The voters to start, and the topology that places them, if any.
fn voters_and_topology(args: &LocalArgs) -> anyhow::Result<(u16, Option<Topology>)> {
    let topology = args
        .topology
        .as_deref()
        .map(|path| -> anyhow::Result<Topology> {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(Topology::parse(&text)?)
        })
        .transpose()?;
    let voters = match (&topology, args.nodes) {
        (None, nodes) => nodes.unwrap_or(3),
        (Some(t), None) => u16::try_from(t.node_count())?,
        (Some(t), Some(nodes)) if usize::from(nodes) == t.node_count() => nodes,
        (Some(t), Some(nodes)) => anyhow::bail!(
            "--nodes {nodes}, but the topology places {} nodes: leave --nodes out",
            t.node_count()
        ),
    };
    // Nine processes fit a laptop; a topology may place up to sixteen.
    let most = if topology.is_some() { 16 } else { 9 };
    if !(1..=most).contains(&voters) || args.learners > 9 {
        anyhow::bail!(
            "--nodes {voters} --learners {}: give 1 to {most} voters and at most 9 learners",
            args.learners
        );
    }
    if topology.is_some() && args.learners > 0 {
        anyhow::bail!("--topology places voters only: leave --learners out");
    }
    Ok((voters, topology))
}

/// Brings `topology` up in front of the layout's nodes, serves its
/// control channel and keeps the address in `DATA_DIR/wan.control`.
fn start_wan(
    runtime: &tokio::runtime::Runtime,
    topology: Topology,
    layout: &mut Layout,
    root: &Path,
    data_dir: &Path,
) -> anyhow::Result<()> {
    let wan = Arc::new(runtime.block_on(Emulator::start(topology, &layout.peer, &layout.ldap))?);
    let control = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let control_addr = control.local_addr()?;
    runtime.spawn(meridian_wan::control::serve(control, Arc::clone(&wan)));
    std::fs::write(root.join("wan.control"), control_addr.to_string())?;
    println!(
        "WAN emulator: control on {control_addr} (meridian cluster wan --data-dir {} status)",
        data_dir.display()
    );
    layout.wan = Some(wan);
    Ok(())
}

/// Writes each node's config, starts it, and waits until every node
/// listens (its stdout, relayed, says so).
fn start_nodes(
    args: &LocalArgs,
    layout: &Layout,
    root: &Path,
    secret: &str,
) -> anyhow::Result<Nodes> {
    let exe = std::env::current_exe().context("finding the meridian executable")?;
    let mut nodes = Nodes(Vec::new());
    let (lines, ready) = std::sync::mpsc::channel::<(u16, String)>();
    let total = layout.voters + layout.learners;
    for id in 1..=total {
        let dir = root.join(format!("node{id}"));
        meridian_store::private::create_dir(&dir)?;
        let config = dir.join("config.toml");
        let mut file = meridian_store::private::create_file(&config)?;
        file.write_all(layout.node_config(args, id, secret, &dir)?.as_bytes())?;
        let log = meridian_store::private::create_file(&dir.join("serve.log"))?;
        let mut child = Command::new(&exe)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting node {id}"))?;
        if let Some(stdout) = child.stdout.take() {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = lines.send((id, line));
                }
            });
        }
        nodes.0.push((id, child));
    }
    drop(lines);
    let mut listening = 0;
    for (id, line) in ready.iter() {
        println!("node {id}: {line}");
        if line.starts_with("meridian listening on ") {
            listening += 1;
            if listening == total {
                break;
            }
        }
    }
    if listening < total {
        anyhow::bail!(
            "a node stopped before it listened: see {}/node*/serve.log",
            root.display()
        );
    }
    Ok(nodes)
}

/// Waits for SIGINT or SIGTERM, reporting nodes that exit meanwhile.
fn wait_for_stop(runtime: &tokio::runtime::Runtime, nodes: &mut Nodes) -> anyhow::Result<()> {
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = tick.tick() => {
                    for (id, child) in &mut nodes.0 {
                        if let Ok(Some(status)) = child.try_wait() {
                            eprintln!("node {id} exited ({status})");
                        }
                    }
                    nodes.0.retain_mut(|(_, child)| !matches!(child.try_wait(), Ok(Some(_))));
                }
            }
        }
        anyhow::Ok(())
    })
}

/// Flags of `meridian cluster wan`.
#[derive(Debug, Args)]
pub(crate) struct WanArgs {
    /// The data directory of `cluster local --topology`, whose
    /// `wan.control` names the control address.
    #[arg(long, default_value = "./meridian-cluster")]
    data_dir: PathBuf,
    /// The control address itself, in place of `--data-dir`.
    #[arg(long)]
    control: Option<SocketAddr>,
    /// The command, e.g. `cut washington frankfurt`.
    #[arg(required = true, trailing_var_arg = true)]
    command: Vec<String>,
}

/// `meridian cluster wan`: one command to the emulator, its answer
/// printed.
pub(crate) fn wan(args: WanArgs) -> anyhow::Result<()> {
    let control = match args.control {
        Some(control) => control,
        None => {
            let path = args.data_dir.join("wan.control");
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "reading {} (is `cluster local --topology` running there?)",
                    path.display()
                )
            })?;
            text.trim()
                .parse()
                .with_context(|| format!("{} holds no address", path.display()))?
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let answer = runtime
        .block_on(meridian_wan::control::send(
            control,
            &args.command.join(" "),
        ))
        .with_context(|| format!("the WAN emulator at {control}"))?;
    print!("{answer}");
    Ok(())
}
