//! `meridian console`: a web console served by the binary. It runs load
//! jobs as SLAMD's did (seed 001) and keeps every result, compares runs
//! and fits the capacity model (seed 003), and watches a server or a
//! cluster: health, roles, lag, rates, latency, disk, with an entry
//! browser that works through LDAP as the signed-in identity.
//!
//! * [`auth`]: sign-in by an LDAP bind, sessions, CSRF tokens;
//! * [`scenarios`]: the scenarios offered, and uploads;
//! * [`jobs`]: load jobs run in this process, watched live (SSE);
//! * [`runs`]: every result kept as JSON, listed, compared, exported;
//! * [`watch`]: the directory's metrics sampled over the last hour;
//! * [`directory`]: health, the cluster's status, the last hour;
//! * [`entries`]: the entry browser, as the signed-in identity;
//! * [`schema`]: what the entry browser's forms know of the schema;
//! * [`http`]: the listener (plain or TLS), its limits, the pages.
//!
//! Everything the pages do goes through the JSON API under `/api/`
//! (docs/console.md), so it can be scripted; the pages are static
//! files embedded in the binary, with no build step.

mod auth;
mod directory;
mod entries;
mod http;
mod jobs;
mod runs;
mod scenarios;
mod schema;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

/// `meridian console`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    /// Address the console listens on.
    #[arg(long, default_value = "127.0.0.1:8389")]
    listen: SocketAddr,
    /// The directory users sign in against and the console watches
    /// (ldap://HOST:PORT or ldaps://HOST:PORT).
    #[arg(long, default_value = "ldap://127.0.0.1:3389")]
    url: String,
    /// With an ldaps:// URL: the CA certificates (PEM) its certificate
    /// must be signed by.
    #[arg(long, value_name = "FILE")]
    tls_ca_file: Option<PathBuf>,
    /// A node's metrics endpoint (`metrics_listen`), as
    /// http://HOST:PORT; repeat for each node of a cluster.
    #[arg(long = "metrics-url", value_name = "URL")]
    metrics_urls: Vec<String>,
    /// Where runs and uploaded scenarios are kept.
    #[arg(long, default_value = "meridian-console")]
    data: PathBuf,
    /// The scenarios offered for jobs (the bench's TOML files).
    #[arg(long, default_value = "bench/scenarios")]
    scenarios: PathBuf,
    /// Serve HTTPS with this certificate chain (PEM; the server's
    /// `security.tls_certificate_file` will do).
    #[arg(long, value_name = "FILE", requires = "tls_key_file")]
    tls_certificate_file: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_certificate_file")]
    tls_key_file: Option<PathBuf>,
    /// Minutes a session lasts without a request.
    #[arg(long, default_value_t = 30)]
    session_idle_minutes: u64,
    /// Sessions held at once (sign-ins past it are refused).
    #[arg(long, default_value_t = 1000)]
    max_sessions: usize,
    /// HTTP connections served at once.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
}

/// What every handler shares.
pub(crate) struct Console {
    /// The directory signed in against and watched.
    pub(crate) url: String,
    pub(crate) tls_ca_file: Option<PathBuf>,
    pub(crate) sessions: auth::Sessions,
    pub(crate) jobs: jobs::Jobs,
    pub(crate) runs: runs::Runs,
    pub(crate) scenarios: scenarios::ScenarioShelf,
    pub(crate) watch: Arc<watch::Watch>,
    /// Whether the console is served over TLS (its cookie is `Secure`).
    pub(crate) https: bool,
}

impl Console {
    /// The directory as `dn` with `password`, for the tools' client.
    pub(crate) fn endpoint(&self, dn: &str, password: &str) -> crate::ldap_client::Endpoint {
        crate::ldap_client::Endpoint {
            url: self.url.clone(),
            bind_dn: dn.to_owned(),
            password: password.to_owned(),
            tls_ca_file: self.tls_ca_file.clone(),
        }
    }
}

/// Whether `name` may name a file in one of the console's folders: 1 to
/// `max` ASCII letters, digits, `-`, `_` or bytes of `more`, not starting
/// with `.`; never a path.
pub(crate) fn plain_file_name(name: &str, max: usize, more: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= max
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || more.contains(&b))
}

pub(crate) fn run(args: ConsoleArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the console's runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: ConsoleArgs) -> anyhow::Result<()> {
    let tls = match (&args.tls_certificate_file, &args.tls_key_file) {
        (Some(certificate), Some(key)) => Some(http::tls_acceptor(certificate, key)?),
        _ => None,
    };
    let runs = runs::Runs::open(&args.data.join("runs"))?;
    let scenarios = scenarios::ScenarioShelf::open(&args.scenarios, &args.data.join("scenarios"))?;
    let watch = Arc::new(watch::Watch::new(args.metrics_urls.clone())?);
    tokio::spawn(watch::sample_forever(Arc::clone(&watch)));
    let console = Arc::new(Console {
        url: args.url.clone(),
        tls_ca_file: args.tls_ca_file.clone(),
        sessions: auth::Sessions::new(
            Duration::from_secs(args.session_idle_minutes.max(1) * 60),
            args.max_sessions,
        ),
        jobs: jobs::Jobs::default(),
        runs,
        scenarios,
        watch,
        https: tls.is_some(),
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    eprintln!(
        "meridian console on {scheme}://{}/ signing in against {} ({} run(s) kept in {})",
        listener.local_addr()?,
        args.url,
        console.runs.len(),
        args.data.display()
    );
    http::serve(listener, tls, http::router(console), args.max_connections).await
}
