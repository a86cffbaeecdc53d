//! One directed link: a TCP proxy on loopback that carries each
//! connection made to it on to its target, through the conditions of
//! each way (the requests' and the answers').
//!
//! Bytes are read as they come and each chunk is delivered when the
//! path would have delivered it: after its turn at the bottleneck (the
//! bandwidth cap), then the one-way delay with its jitter, never before
//! the chunk ahead of it (TCP keeps order) nor before a stall ends.
//! While a way is cut its bytes wait, as TCP's retransmissions wait
//! through a partition, and flow again when it heals; a sender that
//! keeps writing meanwhile fills the proxy's bounded queue, then its
//! own socket buffer, and blocks, as it would on a real network.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::conditions::{Conditions, Jitter, Way, transmission};

/// Most connections open through one link at once; more are refused
/// (closed at once), so a peer that reconnects in a loop through a cut
/// cannot pile up tasks without end.
pub const MAX_CONNECTIONS: usize = 256;

/// Most chunks one way of a connection holds in flight (each at most
/// [`CHUNK`] bytes): 4 MiB, more than a 1 Gbit/s path holds in 30 ms.
const QUEUE_CHUNKS: usize = 64;

/// How late tokio's timer wakes, on average: it fires at the first
/// millisecond tick after a deadline and the poller's own timeout rounds
/// up again (measured 1.5 ms late per sleep on loopback). Each chunk's
/// sleep ends this much before its due time, so a path's round trip is
/// its configured time within a millisecond or two, not three late.
const TIMER_LATENESS: std::time::Duration = std::time::Duration::from_millis(1);

/// The largest read, and so the largest chunk.
const CHUNK: usize = 64 * 1024;

/// A running link. Dropping it closes its listener and every connection
/// through it.
#[derive(Debug)]
pub struct Link {
    addr: SocketAddr,
    target: SocketAddr,
    forward: Way,
    backward: Way,
    severed: watch::Sender<Severing>,
    counts: Arc<Counts>,
    accepting: JoinHandle<()>,
}

/// Whether a link refuses connections now, and how many times it was
/// severed: a connection ends when the count moves past the one it
/// started under, so a sever followed at once by a restore still ends
/// every connection.
#[derive(Debug, Clone, Copy, Default)]
struct Severing {
    refusing: bool,
    count: u64,
}

/// What a link carried.
#[derive(Debug, Default)]
struct Counts {
    /// Bytes delivered, both ways.
    delivered: AtomicU64,
    /// Connections open now.
    open: AtomicUsize,
}

impl Link {
    /// Starts a link on a port of 127.0.0.1 the system picks, to
    /// `target`: bytes from the connecting side go through `forward`,
    /// the answers through `backward`.
    pub async fn start(target: SocketAddr, forward: Way, backward: Way) -> io::Result<Link> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let severed = watch::Sender::new(Severing::default());
        let counts = Arc::new(Counts::default());
        let accepting = tokio::spawn(accept(
            listener,
            target,
            Paths {
                forward: forward.clone(),
                backward: backward.clone(),
            },
            severed.clone(),
            Arc::clone(&counts),
        ));
        Ok(Link {
            addr,
            target,
            forward,
            backward,
            severed,
            counts,
            accepting,
        })
    }

    /// Where to connect to go through the link.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the link leads.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The way of the connecting side's bytes.
    pub fn forward(&self) -> &Way {
        &self.forward
    }

    /// The way of the answers.
    pub fn backward(&self) -> &Way {
        &self.backward
    }

    /// Changes both ways alike (a symmetric path).
    pub fn change(&self, change: impl Fn(&mut Conditions)) {
        self.forward.change(&change);
        self.backward.change(&change);
    }

    /// Cuts both ways, silently as a partition does (`true`), or heals
    /// them.
    pub fn set_cut(&self, cut: bool) {
        self.change(|c| c.cut = cut);
    }

    /// Closes every connection through the link at once and refuses new
    /// ones until [`Link::restore`]: a host that answers with resets
    /// (a firewall's reject), as opposed to a cut, which stays silent.
    pub fn sever(&self) {
        self.severed.send_modify(|s| {
            s.refusing = true;
            s.count += 1;
        });
    }

    /// Lets connections through again after [`Link::sever`].
    pub fn restore(&self) {
        self.severed.send_modify(|s| s.refusing = false);
    }

    /// Bytes delivered through the link, both ways, since it started.
    pub fn delivered(&self) -> u64 {
        self.counts.delivered.load(Ordering::Relaxed)
    }

    /// Connections open through the link now.
    pub fn open_connections(&self) -> usize {
        self.counts.open.load(Ordering::Relaxed)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accepting.abort();
        self.sever();
    }
}

#[derive(Debug, Clone)]
struct Paths {
    forward: Way,
    backward: Way,
}

async fn accept(
    listener: TcpListener,
    target: SocketAddr,
    paths: Paths,
    severed: watch::Sender<Severing>,
    counts: Arc<Counts>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(e) => {
                // Out of descriptors, most likely: wait, do not spin.
                tracing::debug!("a link's accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let now = *severed.borrow();
        if now.refusing || counts.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            drop(client);
            continue;
        }
        counts.open.fetch_add(1, Ordering::Relaxed);
        let open = Open(Arc::clone(&counts));
        let mut ended = severed.subscribe();
        let paths = paths.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = carry(client, target, paths, &open.0) => {}
                _ = ended.wait_for(|s| s.count != now.count) => {}
            }
            drop(open);
        });
    }
}

/// Counts a connection open until dropped.
struct Open(Arc<Counts>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Carries one connection until both sides have closed their way.
async fn carry(client: TcpStream, target: SocketAddr, paths: Paths, counts: &Counts) {
    // The connection's first packets would be lost while either way is
    // cut: it is made once both are open.
    let mut forward = paths.forward.watch();
    let mut backward = paths.backward.watch();
    if forward.wait_for(|c| !c.cut).await.is_err() || backward.wait_for(|c| !c.cut).await.is_err() {
        return;
    }
    let server = match TcpStream::connect(target).await {
        Ok(server) => server,
        Err(e) => {
            tracing::debug!(%target, "a link could not reach its target: {e}");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(client_read, server_write, forward, counts),
        pump(server_read, client_write, backward, counts),
    );
}

/// Carries one way of a connection: reads chunks as they come and
/// delivers each when the path would.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut way: watch::Receiver<Conditions>,
    counts: &Counts,
) {
    let (queue, mut arrivals) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE_CHUNKS);
    let read = async move {
        let mut buffer = vec![0u8; CHUNK];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = buffer.get(..n).unwrap_or_default().to_vec();
                    if queue.send((Instant::now(), chunk)).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping the queue's sender ends the delivery once it is empty;
        // until then this side waits for it.
        std::future::pending::<()>().await;
    };
    let deliver = async move {
        let mut jitter = Jitter::seeded();
        let mut bottleneck_free = Instant::now();
        let mut last_due = Instant::now();
        while let Some((mut arrived, chunk)) = arrivals.recv().await {
            if way.borrow().cut {
                if way.wait_for(|c| !c.cut).await.is_err() {
                    return;
                }
                // Retransmitted once the path is back.
                arrived = arrived.max(Instant::now());
            }
            let conditions = way.borrow().clone();
            let start = arrived.max(bottleneck_free);
            bottleneck_free = start + transmission(chunk.len(), conditions.bandwidth);
            let mut due = bottleneck_free + jitter.apply(conditions.delay, conditions.jitter);
            due = due.max(last_due);
            if let Some(stall) = conditions.stalled_until {
                due = due.max(stall);
            }
            last_due = due;
            tokio::time::sleep_until(due.checked_sub(TIMER_LATENESS).unwrap_or(due)).await;
            // A cut made while the chunk was on its way holds it too.
            if way.borrow().cut && way.wait_for(|c| !c.cut).await.is_err() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
            counts.delivered.fetch_add(
                u64::try_from(chunk.len()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
        }
        let _ = to.shutdown().await;
    };
    // The delivery ends when the reader has ended and every chunk is
    // out, or when the far side is gone: either way the reader stops.
    tokio::select! {
        () = read => {}
        () = deliver => {}
    }
}
