//! Meridian's LDAP front end.
//!
//! [`Server::bind`] opens the listening socket; [`Server::run`] accepts
//! connections until told to shut down. Each connection is one task
//! ([`connection`]) plus a writer task ([`outbound`]); requests are
//! dispatched by [`session`]. See `ARCHITECTURE.md` for the whole path.

pub mod access_log;
mod admin;
mod admission;
mod bind_cache;
mod bind_guard;
mod bound;
mod cluster_hooks;
mod connection;
mod inflight;
pub mod ldapi;
pub mod metrics;
mod monitor;
mod outbound;
mod password_pool;
mod process;
mod root_dse;
mod session;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use meridian_config::Config;
use meridian_directory::certificate::CertificateMap;
use meridian_directory::{Directory, password};
use meridian_model::Schema;
use meridian_proto::DecodeLimits;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use admin::{AdminCredentials, AdminError, PASSWORD_ENV, PasswordSource, SECRET_FILE};
pub use bind_guard::BindGuardSettings;
pub use bound::Bound;
pub use cluster_hooks::{ClusterAnswer, ClusterHooks, ReadWait};
pub use root_dse::LiveAttributes;
pub use tls::{TlsError, read_certificates, read_private_key};

/// Everything a connection needs to know about the server, shared by all.
#[derive(Debug)]
pub(crate) struct ServerContext {
    pub(crate) limits: DecodeLimits,
    pub(crate) published: root_dse::PublishedEntries,
    pub(crate) schema: Arc<Schema>,
    pub(crate) directory: Arc<Directory>,
    pub(crate) admin: AdminCredentials,
    pub(crate) access_log: bool,
    pub(crate) idle_timeout: Option<Duration>,
    /// `server.first_request_timeout_secs` (None: never).
    pub(crate) first_request_timeout: Option<Duration>,
    /// `server.pdu_timeout_secs` (None: never).
    pub(crate) pdu_timeout: Option<Duration>,
    /// Largest PDU before a bind (`server.max_pdu_bytes_anonymous`, at
    /// most `server.max_pdu_bytes`).
    pub(crate) max_pdu_anonymous: usize,
    /// Bytes of responses a connection may have waiting for its client
    /// before the server stops reading its requests
    /// (`server.max_buffered_bytes`).
    pub(crate) max_buffered: usize,
    /// Bytes of unfinished requests over every connection
    /// (`server.max_partial_pdu_bytes`).
    pub(crate) partial_pdus: connection::PartialBudget,
    pub(crate) max_outstanding: usize,
    /// Where every password check and hash runs (one job per CPU).
    pub(crate) password_pool: password_pool::PasswordPool,
    /// Clear-text userPassword values are accepted at bind.
    pub(crate) allow_cleartext: bool,
    /// Binds verified recently (`directory.bind_cache_entries`).
    pub(crate) bind_cache: bind_cache::BindCache,
    /// Failed binds counted per DN and address (`security.bind_*`).
    pub(crate) bind_guard: bind_guard::BindGuard,
    /// How long a closing connection waits for its in-flight operations.
    pub(crate) shutdown_grace: Duration,
    pub(crate) queue_flush: Duration,
    /// The certificate and key, when TLS is configured (StartTLS and
    /// `server.listen_tls`).
    pub(crate) tls: Option<Arc<tls::Tls>>,
    /// `security.require_tls`.
    pub(crate) require_tls: bool,
    /// `server.ldapi_root_is_admin`.
    pub(crate) ldapi_root_is_admin: bool,
    /// How a client certificate names its entry for SASL EXTERNAL; `None`
    /// when client certificates are not asked for.
    pub(crate) certificate_map: Option<CertificateMap>,
    /// Cluster administration, when this server is a cluster node.
    pub(crate) cluster_hooks: Option<cluster_hooks::ClusterHook>,
    /// `cn=Monitor`, parsed once.
    pub(crate) monitor_root: Option<meridian_model::dn::Dn>,
    /// LDAP transactions' bounds (`server.max_transaction_*`).
    pub(crate) transactions: session::TransactionLimits,
    /// Searches following changes, and their bounds
    /// (`server.max_followers*`).
    pub(crate) followers: Followers,
}

/// The searches that follow changes, counted over every connection.
#[derive(Debug)]
pub(crate) struct Followers {
    pub(crate) serving: Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) most: usize,
    pub(crate) most_per_connection: usize,
}

impl ServerContext {
    /// Checks `password` against a user's stored userPassword values:
    /// digests and clear text at once, the slow schemes
    /// ([`password::is_slow`]) in the password pool unless the pair was
    /// verified recently (the bind cache). A stored hash over `security.password_max_*` is not
    /// computed: the bind fails and the log says why. A match in a
    /// scheme other than `{ARGON2}` is rehashed under
    /// `directory.rehash_on_bind` ([`ServerContext::rehash`]).
    pub(crate) async fn verify_password(
        &self,
        user: &meridian_model::dn::Dn,
        stored: Vec<Vec<u8>>,
        password: Vec<u8>,
    ) -> bool {
        if stored.is_empty() {
            return false;
        }
        let cleartext = self.allow_cleartext;
        let bounds = self.directory.password_bounds();
        // A salted digest costs about a microsecond, less than a hop to
        // the pool and back (futex wake-ups: 18 % of a bind's time, perf)
        // or a look in the cache: checked here, and never cached.
        if !stored.iter().any(|v| password::is_slow(v)) {
            let (matched, refused) = check_stored(stored, password, cleartext, &bounds);
            return self.bind_checked(user, matched, refused, false);
        }
        if let Some(value) = stored.iter().find(|v| self.bind_cache.holds(v, &password)) {
            self.rehash(user, value, &password);
            return true;
        }
        let checked = self
            .password_pool
            .run(move || check_stored(stored, password, cleartext, &bounds))
            .await;
        let Some((matched, refused)) = checked else {
            return false;
        };
        self.bind_checked(user, matched, refused, true)
    }

    /// What follows a password check: the values not checked logged, the
    /// match cached (when `cache`) and rehashed if asked.
    fn bind_checked(
        &self,
        user: &meridian_model::dn::Dn,
        matched: Option<(Vec<u8>, Vec<u8>)>,
        refused: Vec<String>,
        cache: bool,
    ) -> bool {
        for why in refused {
            tracing::warn!(dn = user.original(), reason = %why, "a stored password was not checked");
        }
        match matched {
            Some((value, password)) => {
                if cache {
                    self.bind_cache.record(&value, &password);
                }
                self.rehash(user, &value, &password);
                true
            }
            None => false,
        }
    }

    /// Under `directory.rehash_on_bind`, after a bind of `user` matched
    /// `stored` with `password`: replaces `stored` by its `{ARGON2}` hash
    /// when it is in another scheme, on a task of its own (the bind is
    /// answered meanwhile; the hash runs in the password pool, the
    /// modify goes through the store like any write).
    fn rehash(&self, user: &meridian_model::dn::Dn, stored: &[u8], password: &[u8]) {
        if !self.directory.rehashes(stored) {
            return;
        }
        let (directory, pool) = (Arc::clone(&self.directory), self.password_pool.clone());
        let (user, stored, password) = (Arc::new(user.clone()), stored.to_vec(), password.to_vec());
        tokio::spawn(async move {
            let hashing = Arc::clone(&directory);
            let dn = Arc::clone(&user);
            let command = pool
                .run(move || hashing.rehash_on_bind(&dn, &stored, &password))
                .await
                .flatten();
            if let Some(command) = command {
                let outcome = directory.execute(command).await;
                if outcome.code == meridian_proto::ResultCode::SUCCESS {
                    tracing::info!(dn = %user.original(), "password rehashed to {{ARGON2}} at bind");
                } else {
                    tracing::debug!(dn = %user.original(), code = outcome.code.0, message = %outcome.message, "password not rehashed");
                }
            }
        });
    }

    /// Checks the administrator's password (the bind cache first).
    pub(crate) async fn verify_admin(&self, password: Vec<u8>) -> bool {
        let hash = self.admin.hash().as_bytes();
        if self.bind_cache.holds(hash, &password) {
            return true;
        }
        let admin = self.admin.clone();
        let checked = self
            .password_pool
            .run(move || admin.verify(&password).then_some(password))
            .await
            .flatten();
        match checked {
            Some(password) => {
                self.bind_cache.record(hash, &password);
                true
            }
            None => false,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The published entries could not be built from the schema.
    #[error("schema: {0}")]
    Schema(String),
    /// The listen address is not valid.
    #[error("server.listen: {0}")]
    Address(String),
    /// The certificate or key could not be used.
    #[error("{0}")]
    Tls(#[from] TlsError),
    /// Keys that only make sense together do not.
    #[error("{0}")]
    Config(String),
    /// The socket could not be bound.
    // The OS error follows as the source: a caller printing the chain
    // (anyhow's `{:#}`) would otherwise show it twice.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// A bound, not yet running, server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    /// `server.listen_tls`: every connection starts with a handshake.
    tls_listener: Option<TcpListener>,
    /// `server.metrics_listen`: the HTTP endpoint of metrics.
    metrics_listener: Option<TcpListener>,
    /// `server.listen_ldapi`: LDAP on a Unix domain socket.
    ldapi_listener: Option<tokio::net::UnixListener>,
    ctx: Arc<ServerContext>,
    max_connections: usize,
    max_connections_per_ip: usize,
    shutdown_grace: Duration,
}

impl Server {
    /// Binds the listening sockets and starts: [`Bound::new`], then
    /// [`Server::start`]. Must be called inside a tokio runtime.
    pub async fn bind(
        config: &Config,
        admin: AdminCredentials,
        directory: Arc<Directory>,
    ) -> Result<Server, StartError> {
        Server::start(Bound::new(config)?, config, admin, directory)
    }

    /// A server on sockets and a certificate taken before (perhaps with
    /// privileges since given up, [`Bound`]). Must be called inside a
    /// tokio runtime.
    pub fn start(
        bound: Bound,
        config: &Config,
        admin: AdminCredentials,
        directory: Arc<Directory>,
    ) -> Result<Server, StartError> {
        let schema = Arc::clone(directory.schema());
        let monitor_root = monitor::root(&schema);
        let s = &config.server;
        let sec = &config.security;
        let Bound {
            listener,
            tls_listener,
            metrics_listener,
            ldapi_listener,
            tls,
            certificate_map,
            // Taken by the cluster before the server starts.
            peer_listener: _,
        } = bound;
        let tokio_listener = |std: std::net::TcpListener| {
            let addr = std.local_addr().map_err(|source| StartError::Bind {
                addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                source,
            })?;
            TcpListener::from_std(std).map_err(|source| StartError::Bind { addr, source })
        };
        let listener = tokio_listener(listener)?;
        let tls_listener = tls_listener.map(tokio_listener).transpose()?;
        let metrics_listener = metrics_listener.map(tokio_listener).transpose()?;
        let ldapi_listener = ldapi_listener
            .map(tokio::net::UnixListener::from_std)
            .transpose()
            .map_err(|e| StartError::Config(format!("server.listen_ldapi: {e}")))?;
        if let Ok(addr) = listener.local_addr()
            && !addr.ip().is_loopback()
            && !sec.require_tls
        {
            tracing::warn!(
                %addr,
                "the plain listener is not on loopback and security.require_tls is off: passwords may cross the network in clear text"
            );
        }
        let admin_key = admin.dn_key().to_owned();
        let ctx = ServerContext {
            limits: DecodeLimits {
                max_pdu_bytes: s.max_pdu_bytes,
                max_depth: s.max_ber_depth,
            },
            published: root_dse::PublishedEntries::new(
                &naming_contexts(&directory),
                &schema,
                tls.is_some(),
                // SASL EXTERNAL: by client certificate, or by the
                // peer's credentials on ldapi://.
                certificate_map.is_some() || ldapi_listener.is_some(),
            )
            .map_err(|e| StartError::Schema(e.to_string()))?,
            schema,
            directory,
            admin,
            access_log: config.log.access,
            idle_timeout: seconds(s.idle_timeout_secs),
            first_request_timeout: seconds(s.first_request_timeout_secs),
            pdu_timeout: seconds(s.pdu_timeout_secs),
            max_pdu_anonymous: s.max_pdu_bytes_anonymous.min(s.max_pdu_bytes),
            max_buffered: s.max_buffered_bytes,
            partial_pdus: connection::PartialBudget::new(s.max_partial_pdu_bytes),
            max_outstanding: s.max_outstanding_per_connection,
            shutdown_grace: Duration::from_secs(s.shutdown_grace_secs),
            password_pool: password_pool::PasswordPool::per_cpu(),
            allow_cleartext: config.directory.allow_cleartext_passwords,
            bind_cache: bind_cache::BindCache::new(config.directory.bind_cache_entries),
            bind_guard: bind_guard::BindGuard::new(
                bind_guard_settings(&config.security),
                &admin_key,
            ),
            queue_flush: Duration::from_millis(s.queue_length_flush_ms),
            tls,
            require_tls: sec.require_tls,
            ldapi_root_is_admin: s.ldapi_root_is_admin,
            certificate_map,
            cluster_hooks: None,
            monitor_root,
            transactions: session::TransactionLimits {
                max_updates: s.max_transaction_updates,
                max_bytes: s.max_transaction_bytes,
                timeout: Duration::from_secs(s.transaction_timeout_secs),
            },
            followers: Followers {
                serving: Arc::default(),
                most: s.max_followers,
                most_per_connection: s.max_followers_per_connection,
            },
        };
        Ok(Server {
            listener,
            tls_listener,
            metrics_listener,
            ldapi_listener,
            ctx: Arc::new(ctx),
            max_connections: s.max_connections,
            max_connections_per_ip: s.max_connections_per_ip,
            shutdown_grace: Duration::from_secs(s.shutdown_grace_secs),
        })
    }

    /// Adds attributes that change while the server runs to the root
    /// DSE (a cluster node's status). Call before [`Server::run`]; `false`
    /// if the server was already shared (nothing is changed then).
    pub fn set_live_attributes(&mut self, live: Arc<dyn LiveAttributes>) -> bool {
        match Arc::get_mut(&mut self.ctx) {
            Some(ctx) => {
                ctx.published.set_live(live);
                true
            }
            None => false,
        }
    }

    /// Fronts the cluster node `hooks`: its reads wait as
    /// `cluster.reads` says, and the cluster administration extended
    /// operation is served (to the administrator only) and listed in the
    /// root DSE. Call before [`Server::run`]; `false` if the server was
    /// already shared (nothing is changed then).
    pub fn set_cluster_hooks(&mut self, hooks: Arc<dyn ClusterHooks>) -> bool {
        match Arc::get_mut(&mut self.ctx) {
            Some(ctx) => {
                ctx.cluster_hooks = Some(cluster_hooks::ClusterHook(hooks));
                ctx.published
                    .add_extension(meridian_proto::extended::oid::CLUSTER_ADMIN, &ctx.schema);
                true
            }
            None => false,
        }
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The address of the `ldaps://` listener, if there is one.
    pub fn local_tls_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.tls_listener.as_ref().map(TcpListener::local_addr)
    }

    /// The metrics endpoint's address (`server.metrics_listen`), if any.
    pub fn local_metrics_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.metrics_listener.as_ref().map(TcpListener::local_addr)
    }

    /// What reloads the certificate and key while the server runs.
    pub fn reloader(&self) -> Reloader {
        Reloader(self.ctx.tls.clone())
    }

    /// Accepts connections until `shutdown` resolves, then stops accepting,
    /// lets every connection finish its in-flight operations and flush its
    /// responses (up to `server.shutdown_grace_secs`), and returns.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        // cn=Monitor's cn=Start,cn=Time and process_start_time_seconds:
        // when the server began serving, not when they were first read.
        metrics::started();
        let (stop_tx, stop_rx) = watch::channel(false);
        let admission = Arc::new(admission::Admission::new(
            self.max_connections,
            self.max_connections_per_ip,
        ));
        let next_id = AtomicU64::new(1);
        let mut connections = JoinSet::new();
        let watcher = self.reloader().watch_files();
        let metrics = self
            .metrics_listener
            .take()
            .map(|listener| tokio::spawn(metrics::serve(listener, Arc::clone(&self.ctx))));
        tokio::pin!(shutdown);
        loop {
            let accept_tls = async {
                match &self.tls_listener {
                    Some(listener) => listener.accept().await,
                    None => std::future::pending().await,
                }
            };
            let accept_ldapi = async {
                match &self.ldapi_listener {
                    Some(listener) => listener.accept().await.map(|(stream, _)| stream),
                    None => std::future::pending().await,
                }
            };
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    accepted.map(|(stream, peer)| (connection::Socket::Tcp(stream), peer))
                }
                accepted = accept_tls => {
                    accepted.map(|(stream, peer)| (connection::Socket::TcpTls(stream), peer))
                }
                accepted = accept_ldapi => accepted.and_then(connection::Socket::local),
                // Reap finished connections so the set stays small.
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let (stream, peer) = match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let slot = match admission.admit(peer) {
                Ok(slot) => slot,
                Err(why) => {
                    let admission = Arc::clone(&admission);
                    connections.spawn(async move {
                        admission.refuse(stream, peer, why).await;
                    });
                    continue;
                }
            };
            let conn_id = next_id.fetch_add(1, Ordering::Relaxed);
            let ctx = Arc::clone(&self.ctx);
            let stop = stop_rx.clone();
            connections.spawn(async move {
                connection::serve_connection(stream, peer, conn_id, ctx, stop).await;
                drop(slot);
            });
        }
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        tracing::info!(
            open = connections.len(),
            "shutting down: no longer accepting connections"
        );
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(self.shutdown_grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = connections.len(),
                "shutdown grace period over; closing remaining connections"
            );
            connections.abort_all();
        }
        tracing::info!("server stopped");
    }
}

/// Reloads the certificate and key of a running server ([`Server::reloader`]).
#[derive(Debug, Clone)]
pub struct Reloader(Option<Arc<tls::Tls>>);

/// How often the certificate and key files are looked at for changes.
const TLS_FILE_CHECK: Duration = Duration::from_secs(2);

impl Reloader {
    /// Reads the certificate and key again (SIGHUP), logging what was
    /// done; a bad pair keeps the last good one. New handshakes use the
    /// new pair; connections already under TLS keep theirs.
    pub fn reload(&self) {
        match &self.0 {
            None => tracing::info!("reload: no TLS certificate is configured; nothing to reload"),
            Some(tls) => log_reload(tls.reload()),
        }
    }

    /// Reloads whenever either file changes, until the task is aborted.
    fn watch_files(&self) -> Option<tokio::task::JoinHandle<()>> {
        let tls = self.0.clone()?;
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(TLS_FILE_CHECK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Some(result) = tls.reload_if_changed() {
                    log_reload(result);
                }
            }
        }))
    }
}

fn log_reload(result: Result<(), TlsError>) {
    match result {
        Ok(()) => tracing::info!("TLS certificate and key reloaded: new handshakes use them"),
        Err(e) => {
            tracing::error!(error = %e, "TLS reload failed: the previous certificate stays in use")
        }
    }
}

/// The bind protection thresholds of `[security]`.
fn bind_guard_settings(s: &meridian_config::SecurityConfig) -> BindGuardSettings {
    BindGuardSettings {
        delay_after: s.bind_delay_after_failures,
        max_delay: Duration::from_millis(s.bind_max_delay_ms),
        lockout_after: s.bind_lockout_failures,
        lockout_per_ip_after: s.bind_lockout_failures_per_ip,
        window: Duration::from_secs(s.bind_failure_window_secs),
        lockout: Duration::from_secs(s.bind_lockout_secs),
    }
}

/// A time-out in seconds from the config, where 0 means never.
fn seconds(secs: u64) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// Checks `password` against each stored value: the value it matched
/// (with the password, for the cache and rehashing) and why any value
/// could not be checked.
#[allow(
    clippy::type_complexity,
    reason = "a pair handed from the pool to the caller once"
)]
fn check_stored(
    stored: Vec<Vec<u8>>,
    password: Vec<u8>,
    cleartext: bool,
    bounds: &password::HashBounds,
) -> (Option<(Vec<u8>, Vec<u8>)>, Vec<String>) {
    let mut refused = Vec::new();
    let held = stored.len();
    if held > bounds.max_values {
        refused.push(format!(
            "the entry holds {held} userPassword values: only the first {} were tried (security.max_password_values)",
            bounds.max_values
        ));
    }
    for value in stored.into_iter().take(bounds.max_values) {
        match password::verify(&value, &password, cleartext, bounds) {
            password::Verdict::Matched => return (Some((value, password)), refused),
            password::Verdict::OverBounds(why) => refused.push(why),
            password::Verdict::Mismatched => {}
        }
    }
    (None, refused)
}

/// The root DSE's namingContexts: every context's suffix but those glued
/// inside another's tree (as slapd leaves its subordinate databases out).
fn naming_contexts(directory: &Directory) -> Vec<String> {
    directory
        .stores()
        .flat_map(|store| store.suffixes())
        .filter(|suffix| !directory.is_subordinate(suffix))
        .map(|suffix| suffix.original().to_owned())
        .collect()
}
