//! What the server counts, and the HTTP endpoint that shows it
//! (`server.metrics_listen`, off by default): `GET /metrics` in the
//! Prometheus text format, `GET /healthz` (200 while every naming
//! context accepts writes, 503 with the reason otherwise) and `GET
//! /readyz` (200 once serving).
//!
//! The counts are process-wide atomics, always recorded (a few relaxed
//! additions per operation, BENCHMARKS.md), read by this endpoint and by
//! `cn=Monitor` (`monitor.rs`). Tests that run several servers in one
//! process share them. Every operation is recorded where its access log
//! line is written (`session/reply.rs`), so the two always agree.

use std::sync::Arc;
use std::time::Duration;

use meridian_metrics::{Counter, Exposition, Gauge, Histogram, SECONDS};
use meridian_proto::ResultCode;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::ServerContext;

/// The operations counted, as the access log names them.
const OPS: [&str; 11] = [
    "BIND", "UNBIND", "SRCH", "MOD", "ADD", "DEL", "MODRDN", "CMP", "ABANDON", "EXT", "RESPONSE",
];

/// Result codes counted one by one (0..=127: every code of RFC 4511 and
/// its extensions); any other is counted as 128.
const CODES: usize = 129;

struct OpMetrics {
    by_code: [Counter; CODES],
    /// Operations without a response (abandoned, unbind).
    unanswered: Counter,
    seconds: Histogram,
}

impl OpMetrics {
    const fn new() -> Self {
        OpMetrics {
            by_code: [const { Counter::new() }; CODES],
            unanswered: Counter::new(),
            seconds: Histogram::new(SECONDS),
        }
    }
}

struct ServerMetrics {
    ops: [OpMetrics; OPS.len()],
    connections_open: Gauge,
    outstanding: Gauge,
    connections: Counter,
    bytes_received: Counter,
    bytes_sent: Counter,
    search_entries: Counter,
    failed_binds: Counter,
    swept: Counter,
}

static METRICS: ServerMetrics = ServerMetrics {
    ops: [const { OpMetrics::new() }; OPS.len()],
    connections_open: Gauge::new(),
    outstanding: Gauge::new(),
    connections: Counter::new(),
    bytes_received: Counter::new(),
    bytes_sent: Counter::new(),
    search_entries: Counter::new(),
    failed_binds: Counter::new(),
    swept: Counter::new(),
};

/// When the server started (for cn=Monitor's cn=Start,cn=Time).
static STARTED: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Notes the server's start time (the first call wins).
pub(crate) fn started() -> std::time::SystemTime {
    // The start time shown in cn=Monitor, a wall-clock fact.
    #[allow(clippy::disallowed_methods)]
    *STARTED.get_or_init(std::time::SystemTime::now)
}

/// An operation's counts: answered, and without a response.
pub(crate) struct OpCounts {
    pub(crate) name: &'static str,
    pub(crate) answered: u64,
    pub(crate) unanswered: u64,
}

/// What cn=Monitor shows.
pub(crate) struct Figures {
    pub(crate) ops: Vec<OpCounts>,
    pub(crate) connections_open: i64,
    pub(crate) connections: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) search_entries: u64,
}

/// The counts as they are now.
pub(crate) fn figures() -> Figures {
    Figures {
        ops: OPS
            .iter()
            .zip(&METRICS.ops)
            .map(|(name, m)| OpCounts {
                name,
                answered: m.by_code.iter().map(Counter::get).sum(),
                unanswered: m.unanswered.get(),
            })
            .collect(),
        connections_open: METRICS.connections_open.get(),
        connections: METRICS.connections.get(),
        bytes_sent: METRICS.bytes_sent.get(),
        search_entries: METRICS.search_entries.get(),
    }
}

/// One operation answered with `code` (`None`: no response) after
/// `took`.
pub(crate) fn operation(op: &str, code: Option<ResultCode>, took: Duration) {
    let Some(m) = OPS
        .iter()
        .position(|o| *o == op)
        .and_then(|i| METRICS.ops.get(i))
    else {
        return;
    };
    match code {
        Some(code) => {
            let slot = usize::try_from(code.0).unwrap_or(CODES - 1).min(CODES - 1);
            if let Some(counter) = m.by_code.get(slot) {
                counter.inc();
            }
        }
        None => m.unanswered.inc(),
    }
    m.seconds.observe_duration(took);
}

/// Entries a search returned.
pub(crate) fn search_entries(n: u64) {
    METRICS.search_entries.add(n);
}

/// Expired dynamic entries the sweeper deleted.
pub fn swept(n: u64) {
    METRICS.swept.add(n);
}

/// A simple bind refused for its credentials.
pub(crate) fn failed_bind() {
    METRICS.failed_binds.inc();
}

/// A connection opened (`true`) or closed.
pub(crate) fn connection(opened: bool) {
    if opened {
        METRICS.connections.inc();
        METRICS.connections_open.add(1);
    } else {
        METRICS.connections_open.add(-1);
    }
}

/// Operations begun (`n` > 0) or ended (`n` < 0): read and not yet
/// answered on the wire.
pub(crate) fn outstanding(n: i64) {
    METRICS.outstanding.add(n);
}

/// Bytes read from clients.
pub(crate) fn received(n: usize) {
    METRICS.bytes_received.add(n as u64);
}

/// Bytes written to clients.
pub(crate) fn sent(n: usize) {
    METRICS.bytes_sent.add(n as u64);
}

/// The `/metrics` page.
///
/// One function on purpose (over 150 lines): it is the list of the
/// series in the order the page shows them, read top to bottom like the
/// page itself; each series is a few lines.
fn page(ctx: &ServerContext) -> String {
    let mut page = Exposition::new();
    for (name, m) in OPS.iter().zip(&METRICS.ops) {
        for (code, counter) in m.by_code.iter().enumerate() {
            let n = counter.get();
            if n > 0 {
                let code = if code == CODES - 1 {
                    "other".to_owned()
                } else {
                    code.to_string()
                };
                page.counter(
                    "meridian_operations_total",
                    "LDAP operations answered, by operation and result code",
                    &[("op", *name), ("result", code.as_str())],
                    n,
                );
            }
        }
        let n = m.unanswered.get();
        if n > 0 {
            page.counter(
                "meridian_operations_total",
                "LDAP operations answered, by operation and result code",
                &[("op", *name), ("result", "none")],
                n,
            );
        }
    }
    for (name, m) in OPS.iter().zip(&METRICS.ops) {
        if m.seconds.count() > 0 {
            page.histogram(
                "meridian_operation_duration_seconds",
                "Time from a request's arrival to its response, by operation",
                &[("op", *name)],
                &m.seconds,
            );
        }
    }
    page.gauge(
        "meridian_connections_open",
        "Client connections open",
        &[],
        METRICS.connections_open.get() as f64,
    );
    page.gauge(
        "meridian_operations_outstanding",
        "Operations read and not yet answered on the wire",
        &[],
        METRICS.outstanding.get() as f64,
    );
    page.counter(
        "meridian_connections_total",
        "Client connections accepted",
        &[],
        METRICS.connections.get(),
    );
    page.counter(
        "meridian_received_bytes_total",
        "Bytes read from clients",
        &[],
        METRICS.bytes_received.get(),
    );
    page.counter(
        "meridian_sent_bytes_total",
        "Bytes written to clients",
        &[],
        METRICS.bytes_sent.get(),
    );
    page.counter(
        "meridian_search_entries_total",
        "Entries returned by searches",
        &[],
        METRICS.search_entries.get(),
    );
    page.counter(
        "meridian_swept_entries_total",
        "Expired dynamic entries (RFC 2589) the sweeper deleted",
        &[],
        METRICS.swept.get(),
    );
    page.counter(
        "meridian_failed_binds_total",
        "Simple binds refused for their credentials",
        &[],
        METRICS.failed_binds.get(),
    );
    page.gauge(
        "meridian_build_info",
        "The running build: its version, in the label",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    crate::process::expose(&mut page, started());
    // Per naming context, one family at a time (the text format wants a
    // family's samples together).
    let stores: Vec<(&str, &meridian_store::Store)> = ctx
        .directory
        .stores()
        .map(|store| (store.suffixes().first().map_or("", |s| s.original()), store))
        .collect();
    for (suffix, store) in &stores {
        page.histogram(
            "meridian_write_batch_commands",
            "Commands committed in one write transaction (group commit)",
            &[("suffix", suffix)],
            &store.stats().batch_commands,
        );
    }
    for (suffix, store) in &stores {
        page.histogram(
            "meridian_write_transaction_duration_seconds",
            "Write transactions, from the first command applied to the commit made durable",
            &[("suffix", suffix)],
            &store.stats().transaction_seconds,
        );
    }
    for (suffix, store) in &stores {
        page.counter(
            "meridian_write_transactions_total",
            "Write transactions committed",
            &[("suffix", suffix)],
            store.commits(),
        );
    }
    for (suffix, store) in &stores {
        for (plan, counter) in [
            ("index", &store.stats().searches_indexed),
            ("columns", &store.stats().searches_columns),
            ("scan", &store.stats().searches_scanned),
        ] {
            page.counter(
                "meridian_searches_total",
                "One-level and subtree searches by how their candidates were found",
                &[("suffix", suffix), ("plan", plan)],
                counter.get(),
            );
        }
    }
    // Gauges of a naming context, each read from its store.
    type Read = fn(&meridian_store::Store) -> f64;
    let gauges: [(&str, &str, Read); 7] = [
        (
            "meridian_database_map_bytes",
            "The LMDB map's size (address space reserved for the database)",
            |s| s.map_size() as f64,
        ),
        (
            "meridian_database_map_used_bytes",
            "Bytes of the LMDB map in use (up to the last page written)",
            |s| s.map_used_bytes() as f64,
        ),
        (
            "meridian_database_file_bytes",
            "Bytes of the database file on disk",
            |s| s.disk_bytes().0 as f64,
        ),
        (
            "meridian_journal_bytes",
            "Bytes of the journal's files (durability = \"journal\"; else 0)",
            |s| s.disk_bytes().1 as f64,
        ),
        (
            "meridian_writes_refused",
            "1 while the naming context refuses writes (disk full, I/O failure)",
            |s| f64::from(u8::from(s.refuses_writes())),
        ),
        (
            "meridian_scan_columns_bytes",
            "Memory held by scan columns (storage.scan_columns_bytes)",
            |s| s.scan_columns_bytes() as f64,
        ),
        ("meridian_entries", "Entries held", |s| {
            s.snapshot().ok().and_then(|s| s.len().ok()).unwrap_or(0) as f64
        }),
    ];
    for (name, help, read) in gauges {
        for (suffix, store) in &stores {
            page.gauge(name, help, &[("suffix", suffix)], read(store));
        }
    }
    page.finish()
}

/// Largest request the endpoint reads; longest it waits for one.
const MAX_REQUEST_BYTES: usize = 8192;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests served at once; more wait in the listen backlog.
const MAX_CONCURRENT: usize = 16;

/// Serves the endpoint on `listener` until the process ends.
pub(crate) async fn serve(listener: TcpListener, ctx: Arc<ServerContext>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &ctx)).await;
            drop(permit);
        });
    }
}

/// Reads one HTTP/1.x request (its head, bounded) and answers it.
async fn answer(mut stream: TcpStream, ctx: &ServerContext) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() >= MAX_REQUEST_BYTES {
            return respond(&mut stream, "431 Request Header Fields Too Large", "").await;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|b| *b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    if method != b"GET" {
        return respond(&mut stream, "405 Method Not Allowed", "only GET\n").await;
    }
    match path {
        b"/metrics" => respond(&mut stream, "200 OK", &page(ctx)).await,
        b"/healthz" => {
            let refusing: Vec<&str> = ctx
                .directory
                .stores()
                .filter(|s| s.refuses_writes())
                .map(|s| s.suffixes().first().map_or("", |d| d.original()))
                .collect();
            if refusing.is_empty() {
                respond(&mut stream, "200 OK", "ok\n").await
            } else {
                let body = format!("writes refused in {}\n", refusing.join(", "));
                respond(&mut stream, "503 Service Unavailable", &body).await
            }
        }
        b"/readyz" => respond(&mut stream, "200 OK", "ready\n").await,
        _ => {
            respond(
                &mut stream,
                "404 Not Found",
                "see /metrics, /healthz, /readyz\n",
            )
            .await
        }
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
