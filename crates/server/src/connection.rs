//! One client connection: the read-decode-dispatch loop.
//!
//! The reader owns the socket's read half and an input buffer. Each pass
//! decodes every complete PDU in the buffer (borrowing from it; nothing is
//! copied), dispatches it, and collects the responses in a [`ResponseBatch`] that
//! is handed to the writer once per pass. The writer task
//! ([`Outbound::write_loop`]) owns the write half.
//!
//! Memory per connection is bounded: the input buffer never holds more than
//! one incomplete PDU (at most `max_pdu_bytes`, and
//! `max_pdu_bytes_anonymous` before a bind) plus one read, and the
//! outbound side holds the responses of at most
//! `max_outstanding_per_connection` requests. A connection takes an input
//! buffer (64 KiB) when its first bytes come, keeps it while it is that
//! size, and lets go of one grown for a large PDU once it is empty; a
//! connection that never sends holds none.
//!
//! Time is bounded too: a connection that sends no first request within
//! `first_request_timeout_secs`, none for `idle_timeout_secs`, or takes
//! longer than `pdu_timeout_secs` to send one PDU (a client trickling a
//! byte at a time) is closed.
//!
//! TLS: a connection of `server.listen_tls` starts with the handshake
//! (bounded by the first-request time-out). On the plain listener,
//! StartTLS is answered once nothing else is outstanding; the writer then
//! flushes the answer and hands its half of the socket back, and the
//! connection goes on over TLS with a new outbound side and the same
//! session.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use meridian_ber::{Error as BerError, frame};
use meridian_directory::policy::Admission;
use meridian_proto::controls::{PolicyError, PolicyResponse};
use meridian_proto::message::encode_notice_of_disconnection;
use meridian_proto::{LdapMessage, ResultCode};
use tokio::io::{AsyncReadExt, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixStream, unix};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::outbound::{KEEP_BUFFER_BYTES, Outbound, ResponseBatch};
use crate::session::{Action, BindAnswer, Session};
use crate::{ServerContext, bind_guard};

/// Bytes asked of the kernel per read: big enough for hundreds of small
/// pipelined requests per syscall.
const READ_CHUNK: usize = 64 * 1024;

/// Why the session ended.
#[derive(Debug)]
enum End {
    /// The client closed its side.
    Eof,
    /// UnbindRequest.
    Unbind,
    /// No request within the idle time-out.
    Idle,
    /// A request too slow to arrive (which time-out, for the log).
    Slow(&'static str),
    /// The server is shutting down.
    Shutdown,
    /// Undecodable or forbidden input.
    Protocol(String),
    /// Over a server-wide bound (`server.max_partial_pdu_bytes`): the
    /// notice says busy.
    Busy(&'static str),
    /// The socket failed.
    Io(std::io::Error),
    /// The writer stopped (the peer stopped accepting data).
    WriterGone,
    /// StartTLS was answered with success: the handshake comes next (not
    /// an end: the connection goes on under TLS).
    StartTls,
    /// The TLS handshake after StartTLS failed.
    HandshakeFailed,
}

/// A TCP connection under TLS.
type TlsTcp = tokio_rustls::server::TlsStream<TcpStream>;

/// An accepted connection.
pub(crate) enum Socket {
    /// From the plain listener.
    Tcp(TcpStream),
    /// From the `ldaps://` listener: TLS from its first byte.
    TcpTls(TcpStream),
    /// From the `ldapi://` listener, with who the kernel says is there.
    Local(UnixStream, crate::ldapi::PeerCredentials),
}

/// The address an `ldapi://` connection counts as, for admission, bind
/// protection and the logs: the host itself.
pub(crate) const LOCAL_PEER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    0,
));

impl Socket {
    /// An `ldapi://` connection, with its peer's credentials.
    pub(crate) fn local(stream: UnixStream) -> std::io::Result<(Socket, SocketAddr)> {
        let credentials = stream.peer_cred()?;
        let peer = crate::ldapi::PeerCredentials {
            uid: credentials.uid(),
            gid: credentials.gid(),
        };
        Ok((Socket::Local(stream, peer), LOCAL_PEER))
    }

    /// Writes `bytes` (a Notice of Disconnection) and closes, within a
    /// second.
    pub(crate) async fn say_and_close(self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        async fn write_then_close(mut stream: impl tokio::io::AsyncWrite + Unpin, bytes: &[u8]) {
            let _ = stream.write_all(bytes).await;
            let _ = stream.shutdown().await;
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
            match self {
                Socket::Tcp(stream) | Socket::TcpTls(stream) => {
                    write_then_close(stream, bytes).await
                }
                Socket::Local(stream, _) => write_then_close(stream, bytes).await,
            }
        })
        .await;
    }
}

/// The socket's read side.
enum ReadSide {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<TlsTcp>),
    Local(unix::OwnedReadHalf),
    /// Between StartTLS's hand-over and the handshake.
    Detached,
}

/// A connection's writer task, by the kind of socket it writes.
enum WriterTask {
    Plain(JoinHandle<Option<OwnedWriteHalf>>),
    Tls(JoinHandle<Option<WriteHalf<TlsTcp>>>),
    Local(JoinHandle<Option<unix::OwnedWriteHalf>>),
}

impl WriterTask {
    /// Waits for the writer to end.
    async fn finish(self) {
        match self {
            WriterTask::Plain(task) => drop(task.await),
            WriterTask::Tls(task) => drop(task.await),
            WriterTask::Local(task) => drop(task.await),
        }
    }
}

/// The two sides of a plain connection: its reader's, and a new
/// outbound side with its writer task.
fn plain_io(stream: TcpStream, ctx: &ServerContext) -> (ReadSide, Arc<Outbound>, WriterTask) {
    let (read_half, write_half) = stream.into_split();
    let (out, writer) = outbound(write_half, ctx);
    (ReadSide::Plain(read_half), out, WriterTask::Plain(writer))
}

/// [`plain_io`] for an `ldapi://` connection.
fn local_io(stream: UnixStream, ctx: &ServerContext) -> (ReadSide, Arc<Outbound>, WriterTask) {
    let (read_half, write_half) = stream.into_split();
    let (out, writer) = outbound(write_half, ctx);
    (ReadSide::Local(read_half), out, WriterTask::Local(writer))
}

/// [`plain_io`] for a connection under TLS.
fn tls_io(stream: TlsTcp, ctx: &ServerContext) -> (ReadSide, Arc<Outbound>, WriterTask) {
    let (read_half, write_half) = tokio::io::split(stream);
    let (out, writer) = outbound(write_half, ctx);
    (ReadSide::Tls(read_half), out, WriterTask::Tls(writer))
}

/// A new outbound side, and the task writing it to `write_half`.
fn outbound<W>(write_half: W, ctx: &ServerContext) -> (Arc<Outbound>, JoinHandle<Option<W>>)
where
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let out = Arc::new(Outbound::new(ctx.max_outstanding, ctx.queue_flush));
    let writer = {
        let out = Arc::clone(&out);
        tokio::spawn(async move { out.write_loop(write_half).await })
    };
    (out, writer)
}

/// The client certificate the handshake verified, read for SASL
/// EXTERNAL (one that cannot be read is logged and left out).
fn client_certificate(
    tls: &TlsTcp,
    conn_id: u64,
) -> Option<meridian_directory::certificate::ClientCertificate> {
    let der = tls.get_ref().1.peer_certificates()?.first()?;
    match meridian_directory::certificate::ClientCertificate::from_der(der) {
        Ok(certificate) => Some(certificate),
        Err(e) => {
            tracing::warn!(conn = conn_id, error = %e, "a verified client certificate could not be read");
            None
        }
    }
}

/// The server side of a TLS handshake, bounded by the first-request
/// time-out; `None` (logged) when it fails.
async fn handshake(
    ctx: &ServerContext,
    stream: TcpStream,
    peer: SocketAddr,
    conn_id: u64,
) -> Option<TlsTcp> {
    let acceptor = ctx.tls.as_ref()?.acceptor();
    let limit = ctx
        .first_request_timeout
        .unwrap_or(std::time::Duration::from_secs(30));
    let outcome = tokio::time::timeout(limit, acceptor.accept(stream)).await;
    if ctx.access_log {
        // What a TLS line of slapd's shows: the version and cipher, or
        // why the handshake failed.
        crate::access_log::write(|line| {
            line.number("conn", conn_id).word("op", "TLS");
            match &outcome {
                Ok(Ok(tls)) => {
                    let session = tls.get_ref().1;
                    let version = session
                        .protocol_version()
                        .map(|v| format!("{v:?}"))
                        .unwrap_or_default();
                    let cipher = session
                        .negotiated_cipher_suite()
                        .map(|c| format!("{:?}", c.suite()))
                        .unwrap_or_default();
                    line.word("tls_version", &version)
                        .word("tls_cipher", &cipher);
                }
                Ok(Err(e)) => {
                    line.word("error", &e.to_string());
                }
                Err(_) => {
                    line.word("error", "not done within server.first_request_timeout_secs");
                }
            }
        });
    }
    match outcome {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::info!(conn = conn_id, %peer, error = %e, "closing: TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::info!(conn = conn_id, %peer, "closing: TLS handshake not done within server.first_request_timeout_secs");
            None
        }
    }
}

pub(crate) async fn serve_connection(
    stream: Socket,
    peer: SocketAddr,
    conn_id: u64,
    ctx: Arc<ServerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut session = Session::new(conn_id);
    let over_tls = matches!(stream, Socket::TcpTls(_));
    let (socket, out, writer) = match stream {
        Socket::TcpTls(stream) => {
            let _ = stream.set_nodelay(true);
            let Some(tls) = handshake(&ctx, stream, peer, conn_id).await else {
                return;
            };
            session.tls = true;
            session.client_certificate = client_certificate(&tls, conn_id);
            tls_io(tls, &ctx)
        }
        Socket::Tcp(stream) => {
            let _ = stream.set_nodelay(true);
            plain_io(stream, &ctx)
        }
        Socket::Local(stream, credentials) => {
            session.peer_credentials = Some(credentials);
            local_io(stream, &ctx)
        }
    };
    tracing::debug!(conn = conn_id, %peer, tls = over_tls, "connection opened");
    crate::metrics::connection(true);
    if ctx.access_log {
        // The client's address is on this line only; the operations'
        // lines name the connection.
        crate::access_log::write(|line| {
            line.number("conn", conn_id)
                .word("op", "CONNECT")
                .address("from", &peer)
                .flag("tls", over_tls);
        });
    }
    // Timeouts of the network layer, never stored (likewise below).
    #[allow(clippy::disallowed_methods)]
    let opened = Instant::now();
    let mut reader = RequestReader {
        socket,
        buf: BytesMut::new(),
        batch: ResponseBatch::default(),
        session,
        ctx: &ctx,
        out,
        writer: Some(writer),
        last_request: opened,
        requests: 0,
        partial_since: None,
        partial_counted: 0,
        peer,
    };
    let end = loop {
        match reader.run(&mut shutdown).await {
            End::StartTls => {
                if let Err(end) = reader.start_tls().await {
                    break end;
                }
            }
            end => break end,
        }
    };
    let notice = match &end {
        End::Protocol(reason) => Some((ResultCode::PROTOCOL_ERROR, reason.as_str())),
        End::Busy(reason) => Some((ResultCode::BUSY, *reason)),
        End::Shutdown => Some((ResultCode::UNAVAILABLE, "the server is shutting down")),
        _ => None,
    };
    let out = Arc::clone(&reader.out);
    out.push(&mut reader.batch);
    reader.session.abandon_searches();
    // Writes still running on their own tasks answer through `out`; every
    // answer written returns its permit, so holding all permits means
    // every in-flight operation has finished and been flushed.
    if !matches!(end, End::WriterGone | End::Io(_)) {
        let all = u32::try_from(ctx.max_outstanding).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(ctx.shutdown_grace, out.wait_idle(all)).await;
    }
    if let Some((code, message)) = notice {
        let mut goodbye = ResponseBatch::default();
        encode_notice_of_disconnection(&mut goodbye.bytes, code, message.as_bytes());
        out.push(&mut goodbye);
    }
    out.close();
    match &end {
        End::Protocol(reason) => {
            tracing::info!(conn = conn_id, %peer, reason = %reason, "closing: protocol error");
        }
        End::Io(e) => tracing::debug!(conn = conn_id, %peer, error = %e, "closing: read failed"),
        End::Slow(why) => tracing::info!(conn = conn_id, %peer, reason = why, "closing: too slow"),
        End::Busy(why) => tracing::warn!(conn = conn_id, %peer, reason = why, "closing: busy"),
        other => tracing::debug!(conn = conn_id, %peer, reason = ?other, "connection closed"),
    }
    // Responses already produced are flushed before the socket closes.
    if let Some(writer) = reader.writer.take() {
        writer.finish().await;
    }
    crate::metrics::connection(false);
    if ctx.access_log {
        let reason = match &end {
            End::Eof => "client closed",
            End::Unbind => "unbind",
            End::Idle => "idle",
            End::Slow(_) => "too slow",
            End::Shutdown => "shutdown",
            End::Protocol(_) => "protocol error",
            End::Busy(_) => "busy",
            End::Io(_) => "read failed",
            End::WriterGone => "write failed",
            End::StartTls | End::HandshakeFailed => "TLS handshake failed",
        };
        crate::access_log::write(|line| {
            line.number("conn", conn_id)
                .word("op", "CLOSE")
                .address("from", &peer)
                .word("reason", reason);
        });
    }
}

struct RequestReader<'c> {
    socket: ReadSide,
    buf: BytesMut,
    batch: ResponseBatch,
    session: Session,
    ctx: &'c ServerContext,
    /// Where responses go; replaced when StartTLS upgrades the socket.
    out: Arc<Outbound>,
    /// The task writing `out` to the socket.
    writer: Option<WriterTask>,
    /// When the last complete request was read (at first: the connect).
    last_request: Instant,
    /// Complete requests read so far.
    requests: u64,
    /// When the first bytes of the PDU now partly buffered came.
    partial_since: Option<Instant>,
    /// Bytes of this connection's unfinished request counted in the
    /// server's [`PartialBudget`].
    partial_counted: usize,
    /// The client's address.
    peer: SocketAddr,
}

/// What a connection may hold of an unfinished request whatever the
/// others hold: small requests arriving in pieces are never refused.
const PARTIAL_FREE_BYTES: usize = 64 << 10;

/// Bytes of requests begun and not yet whole, over every connection
/// (`server.max_partial_pdu_bytes`): each PDU is bounded by its size
/// limit, but a thousand clients each sending most of a 256 KiB request
/// and stalling held 300 MB (issue 44).
#[derive(Debug)]
pub(crate) struct PartialBudget {
    held: std::sync::atomic::AtomicUsize,
    max: usize,
}

impl PartialBudget {
    pub(crate) fn new(max: usize) -> PartialBudget {
        PartialBudget {
            held: std::sync::atomic::AtomicUsize::new(0),
            max,
        }
    }

    /// Moves a connection's count from `before` to `now` bytes: whether
    /// the server's total stays within the budget.
    fn hold(&self, before: usize, now: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let total = if now >= before {
            self.held.fetch_add(now - before, Relaxed) + (now - before)
        } else {
            self.held.fetch_sub(before - now, Relaxed) - (before - now)
        };
        total <= self.max
    }
}

impl Drop for RequestReader<'_> {
    fn drop(&mut self) {
        // A closed connection holds nothing any more.
        self.ctx.partial_pdus.hold(self.partial_counted, 0);
    }
}

impl RequestReader<'_> {
    /// Why StartTLS may not go ahead now (RFC 4511 section 4.14.1: the
    /// client must have no operation outstanding and send nothing more
    /// until the answer), or `None`. Operations answered but not yet
    /// written are waited for briefly.
    async fn start_tls_refusal(&mut self) -> Option<&'static str> {
        if self.session.peer_credentials.is_some() {
            return Some("StartTLS is not offered on ldapi://: the socket does not leave the host");
        }
        if !self.buf.is_empty() {
            return Some("requests followed the StartTLS request before its response");
        }
        self.out.push(&mut self.batch);
        // Every permit but StartTLS's own.
        let others = u32::try_from(self.ctx.max_outstanding.saturating_sub(1)).unwrap_or(u32::MAX);
        let idle = self.out.wait_idle(others);
        match tokio::time::timeout(std::time::Duration::from_secs(1), idle).await {
            Ok(()) => None,
            Err(_) => Some("other operations are outstanding; StartTLS must wait for them"),
        }
    }

    /// After a successful StartTLS response: the writer flushes it and
    /// hands its half back, the socket goes under TLS, and a new outbound
    /// side and writer serve it. The session stays as it was.
    async fn start_tls(&mut self) -> Result<(), End> {
        self.out.push(&mut self.batch);
        self.out.hand_over();
        let write = match self.writer.take() {
            Some(WriterTask::Plain(task)) => task.await.ok().flatten(),
            Some(other) => {
                other.finish().await;
                None
            }
            None => None,
        };
        let read = std::mem::replace(&mut self.socket, ReadSide::Detached);
        let (ReadSide::Plain(read), Some(write)) = (read, write) else {
            return Err(End::WriterGone);
        };
        let stream = read.reunite(write).map_err(|_| End::WriterGone)?;
        let tls = handshake(self.ctx, stream, self.peer, self.session.conn_id)
            .await
            .ok_or(End::HandshakeFailed)?;
        self.session.client_certificate = client_certificate(&tls, self.session.conn_id);
        let (socket, out, writer) = tls_io(tls, self.ctx);
        self.socket = socket;
        self.out = out;
        self.writer = Some(writer);
        Ok(())
    }

    async fn run(&mut self, shutdown: &mut watch::Receiver<bool>) -> End {
        loop {
            if *shutdown.borrow() {
                return End::Shutdown;
            }
            if let Some(end) = self.process_buffered(shutdown).await {
                return end;
            }
            let waiting = self.out.push(&mut self.batch);
            if let Some(end) = self.wait_for_client_to_read(waiting, shutdown).await {
                return end;
            }
            if let Some(end) = self.fill(shutdown).await {
                return end;
            }
        }
    }

    /// Runs a bind's password `check` under bind protection
    /// (`bind_guard.rs`): refused unchecked while the DN or the address is
    /// locked out; a failure is logged with the client's address (never
    /// the password), counted, and answered late once there were several.
    /// Failures count against the DN only when `guessable`: an entry
    /// with a password (or the administrator).
    async fn guarded_bind(
        &self,
        dn_key: &str,
        dn_shown: &str,
        guessable: bool,
        check: impl std::future::Future<Output = bool>,
    ) -> bool {
        let (conn, peer, guard) = (self.session.conn_id, self.peer, &self.ctx.bind_guard);
        if let Some(locked) = guard.locked(dn_key, peer.ip()) {
            tracing::debug!(target: "meridian::auth", conn, %peer, dn = dn_shown, ?locked, "bind refused unchecked: locked out");
            return false;
        }
        if check.await {
            guard.succeeded(dn_key);
            return true;
        }
        let (delay, locked) = guard.failed(guessable.then_some(dn_key), peer.ip());
        tracing::warn!(target: "meridian::auth", conn, %peer, dn = dn_shown, "bind failed: invalid credentials");
        crate::metrics::failed_bind();
        match locked {
            Some(bind_guard::Locked::Dn) => tracing::warn!(
                target: "meridian::auth",
                %peer,
                dn = dn_shown,
                "binds to this DN are refused for security.bind_lockout_secs (security.bind_lockout_failures reached)"
            ),
            Some(bind_guard::Locked::Address) => tracing::warn!(
                target: "meridian::auth",
                %peer,
                "binds from this address are refused for security.bind_lockout_secs (security.bind_lockout_failures_per_ip reached)"
            ),
            None => {}
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        false
    }

    /// Keeps the password policy's state of a user bind in the entry
    /// (failures counted, the lock; cleared by a success), durably,
    /// before the bind is answered.
    async fn record_bind(
        &self,
        dn: &meridian_model::dn::Dn,
        target: &meridian_directory::policy::BindTarget,
        verified: bool,
    ) {
        let directory = &self.ctx.directory;
        let write = match verified {
            true => directory.bind_succeeded(dn, target),
            false => directory.bind_failed(dn, target),
        };
        if let Some(command) = write {
            let outcome = directory.execute(command).await;
            if outcome.code != ResultCode::SUCCESS {
                tracing::warn!(target: "meridian::auth", dn = dn.original(), error = %outcome.message, "the password policy's state was not recorded");
            }
        }
    }

    /// While more than `server.max_buffered_bytes` of responses wait for
    /// a client that does not read them (`waiting`: as `Outbound::push`
    /// last counted them), reads nothing more from it: its
    /// requests stay in the kernel's buffers, not in ours. A client that
    /// reads nothing for `idle_timeout_secs` is closed.
    async fn wait_for_client_to_read(
        &mut self,
        waiting: usize,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<End> {
        let limit = self.ctx.max_buffered;
        // The usual case, without a timer or a wake-up registered.
        if waiting < limit {
            return None;
        }
        let room = self.out.wait_room(limit);
        let waited = tokio::select! {
            waited = async {
                match self.ctx.idle_timeout {
                    Some(idle) => tokio::time::timeout(idle, room).await.ok(),
                    None => Some(room.await),
                }
            } => waited,
            _ = shutdown.changed() => return Some(End::Shutdown),
        };
        match waited {
            Some(true) => None,
            Some(false) => Some(End::WriterGone),
            None => Some(End::Slow(
                "the client read none of its responses for server.idle_timeout_secs",
            )),
        }
    }

    /// Decodes and dispatches every complete PDU in the buffer.
    ///
    /// One function on purpose (over 150 lines): it is the reader's loop,
    /// and each `Action` a request leaves (a bind's password check, a
    /// StartTLS, a disconnection) must be finished in request order
    /// before the next PDU is looked at, with the batch and the permits
    /// of this pass at hand.
    async fn process_buffered(&mut self, shutdown: &mut watch::Receiver<bool>) -> Option<End> {
        loop {
            // Before a bind, a much smaller PDU: an anonymous client
            // must not make the server buffer megabytes per connection.
            let (max_pdu, which) = if self.session.is_bound() {
                (self.ctx.limits.max_pdu_bytes, "server.max_pdu_bytes")
            } else {
                (self.ctx.max_pdu_anonymous, "server.max_pdu_bytes_anonymous")
            };
            let len = match frame::pdu_length(&self.buf, max_pdu) {
                Ok(len) => len,
                Err(BerError::Incomplete { needed }) => {
                    if !self.buf.is_empty() {
                        #[allow(clippy::disallowed_methods)]
                        self.partial_since.get_or_insert_with(Instant::now);
                    }
                    // Counted in the server's budget of unfinished requests;
                    // past it, a connection holding a large part of one
                    // is let go.
                    let held = self.buf.len();
                    let within = self.ctx.partial_pdus.hold(self.partial_counted, held);
                    self.partial_counted = held;
                    if !within && held > PARTIAL_FREE_BYTES {
                        return Some(End::Busy(
                            "the server holds as many unfinished requests as server.max_partial_pdu_bytes allows; send the request again later",
                        ));
                    }
                    // Reserve for the rest of this PDU (bounded by the size
                    // limit checked above) or one more read.
                    self.buf.reserve(needed.max(READ_CHUNK));
                    return None;
                }
                Err(BerError::TooLarge { length, max }) => {
                    return Some(End::Protocol(format!(
                        "a PDU of {length} bytes is over the {max} allowed ({which}{})",
                        if self.session.is_bound() {
                            ""
                        } else {
                            "; bind first"
                        }
                    )));
                }
                Err(e) => return Some(End::Protocol(e.to_string())),
            };
            self.partial_since = None;
            if self.partial_counted > 0 {
                self.ctx.partial_pdus.hold(self.partial_counted, 0);
                self.partial_counted = 0;
            }
            self.requests += 1;
            if !self.out.try_reserve() {
                // At the outstanding limit: let the writer drain, and read
                // nothing more until it has.
                self.out.push(&mut self.batch);
                tokio::select! {
                    ok = self.out.reserve() => if !ok { return Some(End::WriterGone) },
                    _ = shutdown.changed() => return Some(End::Shutdown),
                }
            }
            #[allow(clippy::disallowed_methods)]
            let started = Instant::now();
            self.last_request = started;
            let pdu = self.buf.get(..len).unwrap_or_default();
            let action = match LdapMessage::decode(pdu, &self.ctx.limits) {
                Ok(msg) => self
                    .session
                    .handle(self.ctx, &self.out, &msg, &mut self.batch, started),
                Err(e) => {
                    // No response will return this request's permit: give
                    // it back, or the close would wait for it (RFC 4511
                    // 4.1.1: terminate at once).
                    self.out.release(1);
                    return Some(End::Protocol(e.to_string()));
                }
            };
            self.buf.advance(len);
            // A pass over many small requests with large answers (say a
            // thousand searches of big entries) must not build them all up
            // before the client has read any.
            if self.batch.bytes.len() >= self.ctx.max_buffered / 2 {
                let waiting = self.out.push(&mut self.batch);
                if let Some(end) = self.wait_for_client_to_read(waiting, shutdown).await {
                    return Some(end);
                }
            }
            match action {
                Action::Responded | Action::Spawned => {}
                Action::NoResponse => self.out.release(1),
                Action::Unbind => {
                    self.out.release(1);
                    return Some(End::Unbind);
                }
                Action::StartTls {
                    message_id,
                    started,
                } => {
                    let refusal = self.start_tls_refusal().await;
                    self.session.finish_start_tls(
                        self.ctx,
                        message_id,
                        refusal,
                        &mut self.batch,
                        started,
                    );
                    if refusal.is_none() {
                        return Some(End::StartTls);
                    }
                }
                Action::Disconnect(reason) => {
                    // As for an undecodable PDU: no response returns the
                    // permit, and the close must not wait for it.
                    self.out.release(1);
                    return Some(End::Protocol(reason.to_owned()));
                }
                Action::VerifyUser {
                    message_id,
                    dn,
                    mut target,
                    password,
                    started,
                    wants_policy,
                } => {
                    self.out.push(&mut self.batch);
                    let stored = target.take_passwords();
                    let guessable = !stored.is_empty();
                    let check = self.ctx.verify_password(&dn, stored, password);
                    let verified = self
                        .guarded_bind(dn.normalized(), dn.original(), guessable, check)
                        .await;
                    self.record_bind(&dn, &target, verified).await;
                    // The right password of an expired one binds no one
                    // once its grace logins are used. The lock a failure
                    // may just have set shows in the next bind's answer.
                    let admission = target.admission();
                    let expired = verified && admission == Admission::Expired;
                    if expired {
                        tracing::warn!(target: "meridian::auth", conn = self.session.conn_id, peer = %self.peer, dn = dn.original(), "bind refused: the password has expired and no grace login is left (password policy max_age, grace_logins)");
                        crate::metrics::failed_bind();
                    }
                    let (warning, must_change) = match admission {
                        Admission::Bound {
                            warning,
                            must_change,
                        } if verified => (warning, must_change),
                        _ => (None, false),
                    };
                    let error = if expired {
                        Some(PolicyError::PasswordExpired)
                    } else {
                        must_change.then_some(PolicyError::ChangeAfterReset)
                    };
                    let answer = BindAnswer {
                        verified: verified && !expired,
                        must_change,
                        policy: wants_policy.then_some(PolicyResponse { warning, error }),
                    };
                    self.session.finish_user_bind(
                        self.ctx,
                        message_id,
                        dn,
                        answer,
                        &mut self.batch,
                        started,
                    );
                }
                Action::VerifyAdmin {
                    message_id,
                    password,
                    started,
                } => {
                    // RFC 4511 section 4.2.1: nothing else is processed
                    // while a bind is in progress. Flush what is ready
                    // first so earlier answers are not held up.
                    self.out.push(&mut self.batch);
                    let check = self.ctx.verify_admin(password);
                    let (key, shown) = (self.ctx.admin.dn_key(), self.ctx.admin.dn());
                    let verified = self.guarded_bind(key, shown, true, check).await;
                    self.session.finish_admin_bind(
                        self.ctx,
                        message_id,
                        verified,
                        &mut self.batch,
                        started,
                    );
                }
            }
        }
    }

    /// Reads more input, honouring the time-outs and shutdown. A connection
    /// holds no input buffer until its first bytes come, and lets go of one
    /// grown past the usual size once it is empty again.
    async fn fill(&mut self, shutdown: &mut watch::Receiver<bool>) -> Option<End> {
        let (deadline, expired) = self.deadline();
        let read = async {
            if self.buf.is_empty() {
                // A buffer grown for a large PDU (or a large answer) is
                // let go; one of the usual size is kept, so a connection
                // that sends one small request after another allocates
                // nothing per request.
                if self.buf.capacity() > READ_CHUNK {
                    self.buf = BytesMut::new();
                }
                if self.batch.bytes.capacity() > KEEP_BUFFER_BYTES {
                    self.batch.bytes = Vec::new();
                }
            }
            match &mut self.socket {
                ReadSide::Plain(socket) => {
                    if self.buf.capacity() == 0 {
                        // Nothing held (a new connection, or one that let
                        // its buffer go): wait for data before taking a
                        // buffer, so an idle connection costs none.
                        loop {
                            socket.readable().await?;
                            self.buf.reserve(READ_CHUNK);
                            match socket.try_read_buf(&mut self.buf) {
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                other => return other,
                            }
                        }
                    }
                    socket.read_buf(&mut self.buf).await
                }
                // rustls keeps its own buffers: a TLS connection reads
                // into one of ours straight away; so does a local one
                // (a few of them, on the host itself).
                ReadSide::Tls(socket) => {
                    self.buf.reserve(READ_CHUNK);
                    socket.read_buf(&mut self.buf).await
                }
                ReadSide::Local(socket) => {
                    self.buf.reserve(READ_CHUNK);
                    socket.read_buf(&mut self.buf).await
                }
                ReadSide::Detached => Ok(0),
            }
        };
        let result = tokio::select! {
            r = async {
                match deadline {
                    Some(at) => tokio::time::timeout_at(at.into(), read).await.ok(),
                    None => Some(read.await),
                }
            } => r,
            _ = shutdown.changed() => return Some(End::Shutdown),
        };
        match result {
            None => Some(expired),
            Some(Ok(0)) => Some(End::Eof),
            Some(Ok(n)) => {
                crate::metrics::received(n);
                None
            }
            Some(Err(e)) => Some(End::Io(e)),
        }
    }

    /// The earliest time-out that applies now, and what ends the
    /// connection when it passes.
    fn deadline(&self) -> (Option<Instant>, End) {
        let ctx = self.ctx;
        let mut earliest: Option<(Instant, End)> = None;
        let mut consider = |at: Option<Instant>, end: End| {
            if let Some(at) = at
                && earliest.as_ref().is_none_or(|(e, _)| at < *e)
            {
                earliest = Some((at, end));
            }
        };
        if !self.session.is_following() {
            consider(ctx.idle_timeout.map(|t| self.last_request + t), End::Idle);
        }
        if self.requests == 0 {
            consider(
                ctx.first_request_timeout.map(|t| self.last_request + t),
                End::Slow("no first request within server.first_request_timeout_secs"),
            );
        }
        consider(
            self.partial_since
                .zip(ctx.pdu_timeout)
                .map(|(since, t)| since + t),
            End::Slow("a PDU took longer than server.pdu_timeout_secs to arrive"),
        );
        match earliest {
            Some((at, end)) => (Some(at), end),
            None => (None, End::Idle),
        }
    }
}
