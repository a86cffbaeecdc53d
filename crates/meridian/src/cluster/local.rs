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

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context as _;
use clap::Args;

/// Flags of `meridian cluster local`.
#[derive(Debug, Args)]
pub(crate) struct LocalArgs {
    /// Voting nodes to start (3 or 5 tolerate one or two failures).
    #[arg(long, default_value_t = 3)]
    nodes: u16,
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
    /// The naming context (`directory.suffix`).
    #[arg(long, default_value = "dc=example,dc=com")]
    suffix: String,
}

/// The config of node `id` (1-based) of `nodes`.
fn node_config(args: &LocalArgs, id: u16, secret: &str, dir: &Path) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let ldap_port = |i: u16| args.base_port.checked_add(i - 1);
    let peer_port = |i: u16| args.base_port.checked_add(100 + i - 1);
    let port_error = || {
        anyhow::anyhow!(
            "--base-port {} leaves no room for {} nodes",
            args.base_port,
            args.nodes
        )
    };
    let mut text = String::new();
    writeln!(
        text,
        "# Made by `meridian cluster local`; node {id} of {}.",
        args.nodes
    )?;
    writeln!(
        text,
        "[server]\nlisten = \"127.0.0.1:{}\"",
        ldap_port(id).ok_or_else(port_error)?
    )?;
    writeln!(text, "[directory]\nsuffix = {:?}", args.suffix)?;
    writeln!(text, "admin_dn = {:?}", format!("cn=admin,{}", args.suffix))?;
    writeln!(text, "data_dir = {:?}", dir.display().to_string())?;
    writeln!(text, "[cluster]\nnode_id = {id}\nsecret = {secret:?}")?;
    for i in 1..=args.nodes + args.learners {
        let table = if i > args.nodes { "learners" } else { "nodes" };
        writeln!(
            text,
            "[[cluster.{table}]]\nid = {i}\npeer = \"127.0.0.1:{}\"\nldap = \"ldap://127.0.0.1:{}\"",
            peer_port(i).ok_or_else(port_error)?,
            ldap_port(i).ok_or_else(port_error)?
        )?;
    }
    Ok(text)
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
    if !(1..=9).contains(&args.nodes) || args.learners > 9 {
        anyhow::bail!(
            "--nodes {} --learners {}: give 1 to 9 voters and at most 9 learners",
            args.nodes,
            args.learners
        );
    }
    meridian_store::private::create_dir(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let root = std::fs::canonicalize(&args.data_dir)?;
    let secret = secret(&root)?;
    let exe = std::env::current_exe().context("finding the meridian executable")?;
    let mut nodes = Nodes(Vec::new());
    let (lines, ready) = std::sync::mpsc::channel::<(u16, String)>();
    let total = args.nodes + args.learners;
    for id in 1..=total {
        let dir = root.join(format!("node{id}"));
        meridian_store::private::create_dir(&dir)?;
        let config = dir.join("config.toml");
        let mut file = meridian_store::private::create_file(&config)?;
        file.write_all(node_config(&args, id, &secret, &dir)?.as_bytes())?;
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
    println!(
        "cluster of {} voters and {} learners up: ldap://127.0.0.1:{}..{}; logs in {}/node*/serve.log",
        args.nodes,
        args.learners,
        args.base_port,
        u32::from(args.base_port) + u32::from(total) - 1,
        root.display()
    );
    std::io::stdout().flush()?;
    wait_for_stop(&mut nodes)
}

/// Waits for SIGINT or SIGTERM, reporting nodes that exit meanwhile.
fn wait_for_stop(nodes: &mut Nodes) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
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
