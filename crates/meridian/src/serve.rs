//! `meridian serve`: load the config, apply flags, set up the
//! administrator, and run the server until SIGINT or SIGTERM.

use std::io::Write as _;

use anyhow::Context as _;
use clap::Args;
use meridian_server::{AdminCredentials, Bound, PASSWORD_ENV, PasswordSource, Server};

use std::sync::Arc;

use meridian_directory::Directory;
use meridian_directory::access::{AccessRules, RuleText};
use meridian_directory::clock::SystemClock;

use crate::setup::CommonArgs;

/// Flags of `meridian serve`. Each one overrides the config key it names,
/// so a throwaway server needs no file at all.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on, e.g. 127.0.0.1:3389 (`server.listen`).
    #[arg(long)]
    listen: Option<String>,
    /// Address to listen on for LDAP over TLS, e.g. 127.0.0.1:3636
    /// (`server.listen_tls`).
    #[arg(long, value_name = "ADDR:PORT")]
    listen_tls: Option<String>,
    /// The server's certificate chain, PEM (`security.tls_certificate_file`).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key, PEM (`security.tls_key_file`).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<std::path::PathBuf>,
    /// Administrator DN (`directory.admin_dn`).
    #[arg(long)]
    admin_dn: Option<String>,
    /// Address of the HTTP endpoint of metrics, /healthz and /readyz,
    /// e.g. 127.0.0.1:9389 (`server.metrics_listen`).
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<String>,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        common,
        listen,
        listen_tls,
        tls_cert,
        tls_key,
        admin_dn,
        metrics,
    } = args;
    // The flags override the file, at start and at each SIGHUP's reread.
    let overrides = move |config: &mut meridian_config::Config| {
        if let Some(listen) = &listen {
            config.server.listen.clone_from(listen);
        }
        if let Some(listen_tls) = &listen_tls {
            config.server.listen_tls.clone_from(listen_tls);
        }
        if let Some(cert) = &tls_cert {
            config.security.tls_certificate_file = Some(cert.clone());
        }
        if let Some(key) = &tls_key {
            config.security.tls_key_file = Some(key.clone());
        }
        if let Some(admin_dn) = &admin_dn {
            config.directory.admin_dn.clone_from(admin_dn);
        }
        if let Some(metrics) = &metrics {
            config.server.metrics_listen.clone_from(metrics);
        }
    };
    let setup = common.load(&overrides)?;
    let config = &setup.config;
    let schema = &setup.schema;
    let log_filter = crate::logging::init(&config.log)?;
    crate::no_huge_pages();

    // What may need privileges first: the sockets (ports below 1024, or
    // systemd's), the TLS key; then, if asked, become server.user,
    // before anything in the data directory is opened or made.
    let mut bound = Bound::new(config)?;
    if !config.server.user.is_empty() {
        crate::privileges::become_user(&config.server.user)?;
    }

    // Before anything is written to the data directory: one writer.
    let _data_dir_lock = setup.lock_data_dir()?;
    let admin_dn = setup.admin_dn()?;
    let access = if config.access.is_empty() {
        None
    } else {
        Some(access_rules(config, schema)?)
    };
    let admin = admin_credentials(&setup, &admin_dn)?;

    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if config.server.worker_threads > 0 {
        runtime.worker_threads(config.server.worker_threads);
    }
    let runtime = runtime.build().context("cannot start the async runtime")?;
    let served = runtime.block_on(async {
        let peer_socket = bound.take_peer_listener();
        let (directory, cluster) = open_directory(&setup, &admin_dn, access, peer_socket).await?;
        let directory_for_reload = Arc::clone(&directory);
        tokio::spawn(sweep_dynamic_entries(
            Arc::clone(&directory),
            std::time::Duration::from_secs(config.directory.dynamic_sweep_secs),
            cluster.clone(),
        ));
        let mut server = Server::start(bound, config, admin, directory)?;
        if let Some(partitions) = &cluster {
            server.set_live_attributes(Arc::new(crate::cluster::StatusAttributes(Arc::clone(
                partitions,
            ))));
            server.set_cluster_hooks(Arc::new(crate::cluster::NodeAdmin {
                partitions: Arc::clone(partitions),
                schema: Arc::clone(&setup.schema),
                first_wins: config.cluster.conflicts == meridian_config::Conflicts::FirstWins,
            }));
        }
        let addr = server.local_addr()?;
        tracing::info!(%addr, suffix = %config.directory.suffix, "meridian listening");
        // Stable lines on stdout for scripts and tests started on port 0.
        if let Some(tls_addr) = server.local_tls_addr() {
            let tls_addr = tls_addr?;
            tracing::info!(%tls_addr, "meridian listening for LDAP over TLS");
            println!("meridian listening for ldaps on {tls_addr}");
        }
        if let Some(metrics_addr) = server.local_metrics_addr() {
            let metrics_addr = metrics_addr?;
            tracing::info!(%metrics_addr, "metrics, /healthz and /readyz over HTTP");
            println!("meridian metrics on http://{metrics_addr}/metrics");
        }
        println!("meridian listening on {addr}");
        std::io::stdout().flush()?;
        crate::notify::notify("READY=1");
        let rereads = Rereads {
            common: common.clone(),
            overrides: Box::new(overrides),
            started: config.clone(),
            applied_level: config.log.level.clone(),
            log_filter,
            directory: Arc::clone(&directory_for_reload),
        };
        tokio::spawn(reload_on_sighup(server.reloader(), rereads));
        server.run(shutdown_signal()).await;
        for partition in cluster.iter().flat_map(|partitions| partitions.iter()) {
            partition.node.shutdown().await;
        }
        anyhow::Ok(())
    });
    // The log's last lines (the shutdown's) are written before the exit.
    crate::logging::finish();
    served
}

/// The administrator's credentials (from the environment, a systemd
/// credential, the configured hash, or the stored or generated one),
/// with a start line saying where they came from; a generated password
/// is printed once. Also logs every key in effect, at debug.
fn admin_credentials(
    setup: &crate::setup::Setup,
    admin_dn: &meridian_model::dn::Dn,
) -> anyhow::Result<AdminCredentials> {
    let config = &setup.config;
    let env_password = std::env::var(PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .or_else(credential_password);
    let (admin, source) = AdminCredentials::load(
        admin_dn,
        &config.directory.admin_dn,
        env_password,
        Some(config.directory.admin_password_hash.as_str()),
        &config.directory.data_dir,
        setup.password_hash_cost(),
        setup.password_bounds(),
    )?;
    // What this server runs with, every key (the cluster secret only
    // by its length), one line each under `meridian::config`, at debug:
    // a start is one line at info, not a hundred.
    tracing::info!(
        data_dir = %config.directory.data_dir.display(),
        "starting (log.level = \"info,meridian::config=debug\" shows every key in effect)"
    );
    for line in config
        .effective_toml()
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        tracing::debug!(target: "meridian::config", "{line}");
    }
    match &source {
        PasswordSource::Environment => {
            tracing::info!("administrator password taken from {PASSWORD_ENV}");
        }
        PasswordSource::Configured => {
            tracing::info!("administrator password hash taken from directory.admin_password_hash");
        }
        PasswordSource::Stored(path) => {
            tracing::info!(path = %path.display(), "administrator password hash loaded");
        }
        PasswordSource::Generated { password, path } => {
            // Printed once: later starts find the stored hash.
            println!(
                "Generated a password for {}: {password}\n\
                 It is shown only this once; its hash is in {}.\n\
                 Set {PASSWORD_ENV} to choose your own.",
                config.directory.admin_dn,
                path.display()
            );
        }
    }

    Ok(admin)
}

/// Opens the naming contexts' stores (in a cluster, replicated, each a
/// partition with this node's Raft group of it) and the directory over
/// them. `peer_socket` is the peer listener systemd passed, if it did.
async fn open_directory(
    setup: &crate::setup::Setup,
    admin_dn: &meridian_model::dn::Dn,
    access: Option<AccessRules>,
    peer_socket: Option<std::net::TcpListener>,
) -> anyhow::Result<(Arc<Directory>, Option<crate::cluster::Partitions>)> {
    let config = &setup.config;
    let (stores, cluster) = if config.cluster.enabled() {
        let opened = setup.open_replicated_stores()?;
        let stores: Vec<meridian_store::Store> =
            opened.iter().map(|(store, _)| store.clone()).collect();
        let partitions = crate::cluster::start_partitions(setup, opened, peer_socket).await?;
        for (store, partition) in stores.iter().zip(partitions.iter()) {
            tokio::spawn(build_indexes_when_leading(
                store.clone(),
                Arc::clone(&partition.node),
            ));
        }
        (stores, Some(partitions))
    } else {
        anyhow::ensure!(
            peer_socket.is_none(),
            "systemd passed a socket named `peer`, but this server is not in a cluster ([cluster] has no node_id)"
        );
        let stores = setup.open_all_stores()?;
        // Indexes added to the config since the data was indexed are
        // built while the server serves (searches scan until then).
        // The build threads end with the stores. (In a cluster the
        // leader builds, through the log: `build_indexes_when_leading`.)
        for store in &stores {
            drop(store.build_indexes_online());
        }
        (stores, None)
    };
    // In a cluster, a node's entryCSNs carry its node ID.
    let server_id = if config.cluster.enabled() {
        u16::try_from(config.cluster.node_id).unwrap_or(0)
    } else {
        config.directory.server_id
    };
    let mut stores = stores.into_iter();
    let first = stores
        .next()
        .ok_or_else(|| anyhow::anyhow!("no naming context to serve"))?;
    let mut directory = Directory::new(
        first,
        admin_dn.clone(),
        Arc::new(SystemClock),
        setup.directory_limits(),
    )
    .with_more_contexts(stores.collect())
    .with_server_id(server_id);
    if let Some(access) = access {
        directory = directory.with_access(access);
    }
    let directory = directory
        .with_proxy_authorizers(&config.directory.proxy_authorizers)
        .map_err(anyhow::Error::msg)?;
    let directory = Arc::new(directory);
    for partition in cluster.iter().flat_map(|partitions| partitions.iter()) {
        let observer = Arc::downgrade(&directory);
        partition.node.observe_applied(move |commands| {
            if let Some(directory) = observer.upgrade() {
                directory.observe_applied(commands);
            }
        });
    }
    Ok((directory, cluster))
}

/// In a cluster: indexes added to the config (the same on every node,
/// as the config digest makes sure) are built by the leader, its steps
/// proposed like writes and applied on every node in log order. The
/// build starts once this node leads and has applied every entry of
/// earlier terms, so its range covers every entry any node applied
/// under the old config; entries added later get their keys as they
/// are applied. A build cut short (this node stopped leading and the
/// steps it forwarded timed out) starts again at the next leadership;
/// steps applied twice write the same keys.
async fn build_indexes_when_leading(
    store: meridian_store::Store,
    node: Arc<meridian_replication::ClusterNode>,
) {
    loop {
        node.leading_and_current().await;
        let Some(build) = store.build_indexes_online() else {
            return;
        };
        // Built (the next round finds nothing to build and ends), or cut
        // short, which the build thread logged: tried again after a pause.
        let finished = tokio::task::spawn_blocking(move || build.join()).await;
        if !matches!(finished, Ok(Ok(Ok(())))) {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        }
    }
}

/// Deletes expired dynamic entries (RFC 2589) every `every`; in a
/// cluster, only while this node leads the first partition (its deletes
/// go through the logs: each to its partition's leader), so that one node
/// sweeps.
async fn sweep_dynamic_entries(
    directory: Arc<Directory>,
    every: std::time::Duration,
    cluster: Option<crate::cluster::Partitions>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let leads_first = |partitions: &crate::cluster::Partitions| {
            partitions.first().is_some_and(|p| p.node.is_leader())
        };
        if cluster
            .as_ref()
            .is_some_and(|partitions| !leads_first(partitions))
        {
            continue;
        }
        match directory.sweep_expired().await {
            Ok(0) => {}
            Ok(n) => {
                meridian_server::metrics::swept(u64::try_from(n).unwrap_or(u64::MAX));
                tracing::info!(deleted = n, "expired dynamic entries deleted");
            }
            Err(e) => tracing::warn!(error = %e.message, "sweeping dynamic entries failed"),
        }
    }
}

/// What a SIGHUP rereads the configuration with, and what it compares
/// the new one to.
struct Rereads {
    common: CommonArgs,
    overrides: Box<dyn Fn(&mut meridian_config::Config) + Send>,
    /// The configuration the server started with.
    started: meridian_config::Config,
    /// The log level in force (the started one until a SIGHUP changes it).
    applied_level: String,
    log_filter: crate::logging::LogFilter,
    directory: Arc<Directory>,
}

/// Keys a SIGHUP applies at once besides `log.level`: the access rules
/// and what [`Setup::directory_limits`] builds the directory's limits
/// from. (`directory.sort_memory_bytes` is not among them: the budget
/// keeps its size.)
const RELOADED: &[&str] = &[
    "access",
    "directory.size_limit",
    "directory.time_limit_secs",
    "directory.lookthrough_limit",
    "directory.max_filter_items",
    "directory.max_modify_changes",
    "directory.max_dn_rdns",
    "directory.sort_max_keys",
    "directory.dynamic_default_ttl_secs",
    "directory.dynamic_min_ttl_secs",
    "directory.dynamic_max_ttl_secs",
    "directory.password_hash_memory_kib",
    "directory.password_hash_iterations",
    "directory.rehash_on_bind",
    "security.password_max_",
    "security.max_password_values",
    "password_policy.",
];

fn reloaded(key: &str) -> bool {
    RELOADED.iter().any(|r| {
        key == *r
            || (r.ends_with(['.', '_']) && key.starts_with(r))
            || key.starts_with(&format!("{r}."))
    })
}

impl Rereads {
    /// Rereads the file: sets the new log level, access rules and
    /// limits, and logs which other keys changed (they take effect at the
    /// next start). The TLS certificate and key are reloaded by the
    /// caller.
    fn reread(&mut self) {
        let setup = match self.common.load(&*self.overrides) {
            Ok(setup) => setup,
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP: the configuration no longer loads; nothing but the certificates reloaded");
                return;
            }
        };
        let new = &setup.config;
        // Compared with the configuration the server started with: a key
        // that differs and is not reloaded is named at every SIGHUP until
        // a restart.
        let mut changed = changed_keys(&self.started, new);
        changed.retain(|k| k != "log.level");
        if new.log.level != self.applied_level {
            match (&self.log_filter, crate::logging::filter(&new.log.level)) {
                (Some(handle), Ok(filter)) => match handle.reload(filter) {
                    Ok(()) => {
                        tracing::info!(level = %new.log.level, "SIGHUP: log.level reloaded");
                        self.applied_level.clone_from(&new.log.level);
                    }
                    Err(e) => tracing::warn!(error = %e, "SIGHUP: log.level not reloaded"),
                },
                (None, _) => {
                    tracing::info!("SIGHUP: log.level changed, but RUST_LOG sets the filter")
                }
                (_, Err(e)) => tracing::warn!(error = %e, "SIGHUP: log.level not reloaded"),
            }
        }
        // The rules and limits are replaced whole at every SIGHUP (cheap):
        // what the file says now is what runs.
        let access = if new.access.is_empty() {
            Ok(None)
        } else {
            access_rules(new, self.directory.schema()).map(Some)
        };
        match access {
            Ok(access) => {
                self.directory.reload(setup.directory_limits(), access);
                let keys: Vec<&String> = changed.iter().filter(|k| reloaded(k)).collect();
                tracing::info!(changed = ?keys, "SIGHUP: access rules and limits reloaded");
                changed.retain(|k| !reloaded(k));
            }
            Err(e) => {
                // Not "at the next start": a start with this file fails.
                changed.retain(|k| !reloaded(k));
                tracing::warn!(
                    error = %e,
                    "SIGHUP: the access rules are refused; the rules and limits in force are kept. Fix the file: a start with it would fail"
                );
            }
        }
        if changed.is_empty() {
            tracing::info!("SIGHUP: no other key changed");
        } else {
            tracing::warn!(
                keys = %changed.join(", "),
                "SIGHUP: these keys changed and take effect at the next start (reloaded: log.level, access rules and limits, the TLS certificate and key)"
            );
        }
    }
}

/// The keys (`section.key`) whose values differ between two
/// configurations, as their effective TOML shows them.
fn changed_keys(old: &meridian_config::Config, new: &meridian_config::Config) -> Vec<String> {
    fn lines(config: &meridian_config::Config) -> Vec<(String, String)> {
        let mut section = String::new();
        let mut out = Vec::new();
        for line in config.effective_toml().lines() {
            if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = header.trim_matches(['[', ']']).to_owned();
            } else if let Some((key, value)) = line.split_once(" = ") {
                let name = if section.is_empty() {
                    key.to_owned()
                } else {
                    format!("{section}.{key}")
                };
                out.push((name, value.to_owned()));
            }
        }
        out
    }
    let (old, new) = (lines(old), lines(new));
    let mut changed: Vec<String> = new
        .iter()
        .filter(|(k, v)| !old.iter().any(|(ok, ov)| ok == k && ov == v))
        .map(|(k, _)| k.clone())
        .chain(
            old.iter()
                .filter(|(k, _)| !new.iter().any(|(nk, _)| nk == k))
                .map(|(k, _)| k.clone()),
        )
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

/// On SIGHUP: reloads the TLS certificate and key and the log level, and
/// says which other changed keys need a restart.
async fn reload_on_sighup(reloader: meridian_server::Reloader, mut rereads: Rereads) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGHUP; certificates are reloaded when their files change");
            return;
        }
    };
    while hangup.recv().await.is_some() {
        tracing::info!("SIGHUP received: reloading");
        crate::notify::notify("RELOADING=1");
        // A log file moved away (logrotate) is written anew.
        crate::logging::reopen();
        reloader.reload();
        rereads.reread();
        crate::notify::notify("READY=1");
    }
}

/// The administrator's password from systemd's credential
/// `admin-password` (`LoadCredential=`, read from
/// `$CREDENTIALS_DIRECTORY`): unlike `Environment=`, no other local user
/// can read it. One trailing newline is not part of it.
fn credential_password() -> Option<String> {
    let dir = std::env::var_os("CREDENTIALS_DIRECTORY")?;
    let path = std::path::Path::new(&dir).join("admin-password");
    let text = std::fs::read_to_string(&path).ok()?;
    let password = text.strip_suffix('\n').unwrap_or(&text).to_owned();
    tracing::info!(path = %path.display(), "administrator password taken from systemd's credential");
    (!password.is_empty()).then_some(password)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM; stop with SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
        _ = term.recv() => tracing::info!("SIGTERM received"),
    }
    crate::notify::notify("STOPPING=1");
}

/// The configured `[[access]]` rules, checked against the schema.
fn access_rules(
    config: &meridian_config::Config,
    schema: &meridian_model::Schema,
) -> anyhow::Result<AccessRules> {
    let texts: Vec<RuleText<'_>> = config
        .access
        .iter()
        .map(|rule| RuleText {
            to: &rule.to,
            attrs: &rule.attrs,
            by: rule
                .by
                .iter()
                .map(|b| (b.who.as_str(), b.grant.as_str()))
                .collect(),
        })
        .collect();
    AccessRules::parse(&texts, schema).map_err(anyhow::Error::msg)
}
