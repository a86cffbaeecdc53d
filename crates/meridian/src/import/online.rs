//! `meridian import --online ldap://HOST:PORT` (or `ldaps://`): the same
//! inputs sent as AddRequests to a running server (Meridian or any other)
//! over one connection, with up to `--window` requests outstanding.
//!
//! For `ldaps://` the TLS session is the bench client's (rustls,
//! `meridian_bench::wire::connect`), run by a small thread that copies
//! between it and one end of a local socket pair; the sending and
//! reading threads below use the other end as they use a TCP socket.
//!
//! One thread sends (requests are encoded into one buffer and written
//! when it fills or the window is full), one thread reads responses and
//! matches them to requests by message ID. The server checks schema and
//! access; its result code and message are reported per record with the
//! record's input and line. An add refused with noSuchObject (its parent
//! not there yet: another input, or a server that runs pipelined adds
//! concurrently) is sent again after the others, in rounds, while a
//! round still adds something.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use meridian_ldif::{AttrValue, Limits};
use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp, ResultCode, Seq};

use super::input::{self, Chunk, Origin, Raw, Refused};
use super::progress::Progress;

/// Where and how to connect.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) bind_dn: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) window: usize,
    /// `ldaps://`: the CA file, or any certificate when `tls_insecure`.
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// `ldaps://`: accept any certificate.
    pub(crate) tls_insecure: bool,
}

/// The connection as the sending and reading threads see it.
enum Wire {
    /// `ldap://`: the socket itself.
    Tcp(TcpStream),
    /// `ldaps://`: our end of the pair the TLS thread copies through.
    Local(UnixStream),
}

impl Wire {
    fn try_clone(&self) -> std::io::Result<Wire> {
        Ok(match self {
            Wire::Tcp(s) => Wire::Tcp(s.try_clone()?),
            Wire::Local(s) => Wire::Local(s.try_clone()?),
        })
    }

    /// No more requests: the server (through the TLS thread) sees the end.
    fn shutdown_write(&self) -> std::io::Result<()> {
        match self {
            Wire::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Wire::Local(s) => s.shutdown(std::net::Shutdown::Write),
        }
    }
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Wire::Tcp(s) => s.read(buf),
            Wire::Local(s) => s.read(buf),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Wire::Tcp(s) => s.write(buf),
            Wire::Local(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Wire::Tcp(s) => s.flush(),
            Wire::Local(s) => s.flush(),
        }
    }
}

/// Opens the connection `target` names: a TCP socket for `ldap://`; for
/// `ldaps://`, the handshake (certificate checked) done here, so a
/// refusal is reported before the load starts, then the TLS thread.
fn open(target: &Target) -> anyhow::Result<(Wire, Option<std::thread::JoinHandle<()>>)> {
    let endpoint =
        meridian_bench::wire::resolve(&target.url).map_err(|e| anyhow::anyhow!("--online: {e}"))?;
    let timeout = Duration::from_secs(10);
    if !endpoint.tls {
        let stream = TcpStream::connect_timeout(&endpoint.address, timeout)
            .with_context(|| format!("connecting to {}", endpoint.address))?;
        stream.set_nodelay(true)?;
        return Ok((Wire::Tcp(stream), None));
    }
    if target.tls_ca_file.is_none() && !target.tls_insecure {
        anyhow::bail!(
            "{} is ldaps://: give --tls-ca-file (the CA that signed the server's certificate), or --tls-insecure to accept any",
            target.url
        );
    }
    let tls = meridian_bench::tls::Tls::new(
        &endpoint.host,
        target.tls_ca_file.as_deref(),
        target.tls_insecure,
        None,
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the TLS thread's runtime")?;
    let mut conn = runtime.block_on(meridian_bench::wire::connect(
        endpoint.address,
        Some(&tls),
        timeout,
    ))?;
    let (ours, theirs) = UnixStream::pair().context("a local socket pair for TLS")?;
    theirs.set_nonblocking(true)?;
    let copier = std::thread::Builder::new()
        .name("import-tls".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(mut local) = tokio::net::UnixStream::from_std(theirs) else {
                    return;
                };
                // Ends when both directions have: our shutdown after the
                // unbind, then the server's close.
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut local).await;
            });
        })
        .context("starting the TLS thread")?;
    Ok((Wire::Local(ours), Some(copier)))
}

/// An add ready to send (kept until answered, to send it again after a
/// noSuchObject).
struct Add {
    origin: Origin,
    dn: Vec<u8>,
    attributes: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
}

impl Add {
    fn encode(&self, id: i32, out: &mut Vec<u8>) {
        meridian_proto::message::encode_add(
            out,
            id,
            &self.dn,
            self.attributes
                .iter()
                .map(|(ty, vs)| (ty.as_slice(), vs.iter().map(Vec::as_slice))),
        );
    }
}

/// A server's answer to one add.
struct Answer {
    add: Add,
    code: ResultCode,
    message: String,
}

/// What both threads share: the adds in flight by message ID.
type InFlight = Arc<Mutex<HashMap<i32, Add>>>;

/// Loads `inputs` into the server at `target`; an error means the load
/// did not complete.
pub(crate) fn run(
    target: &Target,
    inputs: &[PathBuf],
    limits: Limits,
    continue_on_error: bool,
) -> anyhow::Result<()> {
    let (mut stream, copier) = open(target)?;
    let mut reader = ResponseReader {
        stream: stream.try_clone()?,
        buf: Vec::with_capacity(1 << 16),
    };
    if let Some(dn) = &target.bind_dn {
        bind(
            &mut stream,
            &mut reader,
            dn,
            target.password.as_deref().unwrap_or(""),
        )?;
    }

    let (chunk_tx, chunk_rx) = sync_channel::<Chunk>(16);
    let window = target.window.max(1);
    // A token per request in flight: the sender blocks when the window
    // is full, the response thread returns a token per answer.
    let (token_tx, token_rx) = sync_channel::<()>(window);
    let (answer_tx, answer_rx) = sync_channel::<Answer>(window * 2);
    let in_flight: InFlight = Arc::new(Mutex::new(HashMap::new()));

    std::thread::scope(|scope| {
        for path in inputs {
            let out = chunk_tx.clone();
            scope.spawn(move || input::read_input(path, limits, &out));
        }
        drop(chunk_tx);
        let responses = {
            let in_flight = Arc::clone(&in_flight);
            scope.spawn(move || reader.run(&in_flight, &token_rx, &answer_tx))
        };
        let mut sender = Sender {
            stream: &mut stream,
            out: Vec::with_capacity(1 << 16),
            next_id: 2,
            tokens: &token_tx,
            in_flight: &in_flight,
            answers: &answer_rx,
            continue_on_error,
            added: 0,
            refused: Vec::new(),
            deferred: Vec::new(),
            progress: Progress::start(),
        };
        let result = sender.run(&chunk_rx, limits);
        drop(chunk_rx);
        let added = sender.added;
        let refused = std::mem::take(&mut sender.refused);
        let progress = std::mem::replace(&mut sender.progress, Progress::start());
        // Ends the session; the response thread sees the close.
        let _ = unbind(&mut stream);
        let _ = responses.join();
        for r in &refused {
            eprintln!("refused: {r}");
        }
        progress.finish(added, refused.len());
        if let Some(copier) = copier {
            let _ = copier.join();
        }
        result?;
        match (refused.len(), continue_on_error) {
            (0, _) => Ok(()),
            (_, false) => anyhow::bail!(
                "the load stopped at the first refused entry; {added} entries were added"
            ),
            // Skipped and listed, and still a failure: a script must not
            // take it for a clean load.
            (n, true) => anyhow::bail!(
                "{n} record(s) refused (listed above); every other record was added ({added})"
            ),
        }
    })
}

fn bind(
    stream: &mut Wire,
    reader: &mut ResponseReader,
    dn: &str,
    password: &str,
) -> anyhow::Result<()> {
    let mut out = Vec::new();
    meridian_proto::message::encode_simple_bind(&mut out, 1, dn.as_bytes(), password.as_bytes());
    stream.write_all(&out)?;
    let pdu = reader
        .next_pdu()?
        .ok_or_else(|| anyhow::anyhow!("the server closed the connection during the bind"))?;
    let message = LdapMessage::decode(&pdu, &DecodeLimits::default())
        .map_err(|e| anyhow::anyhow!("bad bind response: {e}"))?;
    match message.op {
        ProtocolOp::BindResponse(r) if r.result.code == ResultCode::SUCCESS => Ok(()),
        ProtocolOp::BindResponse(r) => {
            let said = String::from_utf8_lossy(r.result.message);
            let said = if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            };
            anyhow::bail!("bind as {dn} refused with {}{said}", r.result.code)
        }
        _ => anyhow::bail!("the server answered the bind with something else"),
    }
}

fn unbind(stream: &mut Wire) -> std::io::Result<()> {
    let mut out = Vec::new();
    LdapMessage {
        message_id: i32::MAX,
        op: ProtocolOp::UnbindRequest,
        controls: Seq::empty(),
    }
    .encode(&mut out);
    stream.write_all(&out)?;
    stream.shutdown_write()
}

struct Sender<'a> {
    stream: &'a mut Wire,
    out: Vec<u8>,
    next_id: i32,
    tokens: &'a SyncSender<()>,
    in_flight: &'a InFlight,
    answers: &'a Receiver<Answer>,
    continue_on_error: bool,
    added: u64,
    refused: Vec<Refused>,
    /// Refused with noSuchObject: sent again after the rest.
    deferred: Vec<Add>,
    progress: Progress,
}

impl Sender<'_> {
    fn stopped(&self) -> bool {
        !self.continue_on_error && !self.refused.is_empty()
    }

    fn run(&mut self, chunks: &Receiver<Chunk>, limits: Limits) -> anyhow::Result<()> {
        while let Ok(chunk) = chunks.recv() {
            let records = match chunk {
                Chunk::Records { input, records } => (input, records),
                Chunk::Failed { origin, message } => {
                    self.refused.push(Refused { origin, message });
                    if self.stopped() {
                        return self.drain();
                    }
                    continue;
                }
            };
            let (input, records) = records;
            for raw in records {
                match to_add(&input, raw, &limits) {
                    Ok(Some(add)) => self.send(add)?,
                    Ok(None) => {}
                    Err(refused) => self.refused.push(refused),
                }
                while self.collect(false) {}
                if self.stopped() {
                    return self.drain();
                }
            }
            self.progress.tick(self.added);
        }
        self.drain()?;
        // Entries whose parent was missing, in rounds while one adds any.
        while !self.deferred.is_empty() && !self.stopped() {
            let round = std::mem::take(&mut self.deferred);
            let before = self.added;
            let count = round.len();
            for add in round {
                self.send(add)?;
                while self.collect(false) {}
            }
            self.drain()?;
            if self.added == before {
                // No progress: their parents are not coming.
                for add in self.deferred.drain(..) {
                    let message = format!(
                        "{}: its parent is neither on the server nor in the load (noSuchObject)",
                        String::from_utf8_lossy(&add.dn)
                    );
                    self.refused.push(Refused {
                        origin: add.origin,
                        message,
                    });
                }
                tracing::debug!(count, "deferred adds made no progress");
            }
        }
        Ok(())
    }

    fn send(&mut self, add: Add) -> anyhow::Result<()> {
        // Wait for room in the window, writing what is buffered first so
        // the server has something to answer.
        if self.tokens.try_send(()).is_err() {
            self.flush()?;
            self.tokens
                .send(())
                .map_err(|_| anyhow::anyhow!("the server closed the connection"))?;
        }
        let id = self.next_id;
        self.next_id = if self.next_id == i32::MAX - 1 {
            2
        } else {
            self.next_id + 1
        };
        add.encode(id, &mut self.out);
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, add);
        if self.out.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if !self.out.is_empty() {
            self.stream
                .write_all(&self.out)
                .context("writing to the server")?;
            self.out.clear();
        }
        Ok(())
    }

    /// Books answers that have arrived; with `wait`, blocks for one.
    fn collect(&mut self, wait: bool) -> bool {
        let answer = if wait {
            match self.answers.recv() {
                Ok(a) => a,
                Err(_) => return false,
            }
        } else {
            match self.answers.try_recv() {
                Ok(a) => a,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return false,
            }
        };
        match answer.code {
            ResultCode::SUCCESS => self.added += 1,
            ResultCode::NO_SUCH_OBJECT => self.deferred.push(answer.add),
            code => {
                let message = format!(
                    "{}: {} ({code})",
                    String::from_utf8_lossy(&answer.add.dn),
                    answer.message
                );
                self.refused.push(Refused {
                    origin: answer.add.origin,
                    message,
                });
            }
        }
        true
    }

    /// Sends what is buffered and waits for every answer.
    fn drain(&mut self) -> anyhow::Result<()> {
        self.flush()?;
        while !self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
        {
            if !self.collect(true) {
                anyhow::bail!("the server closed the connection with adds unanswered");
            }
        }
        while self.collect(false) {}
        Ok(())
    }
}

/// A raw record as an add, values grouped by description in first-seen
/// order; `None` for comments only.
fn to_add(input: &Arc<str>, raw: Raw, limits: &Limits) -> Result<Option<Add>, Refused> {
    let Some(record) = raw.into_add(input, limits)? else {
        return Ok(None);
    };
    let mut attributes: Vec<(Vec<u8>, Vec<Vec<u8>>)> = Vec::new();
    for AttrValue { description, value } in record.values {
        match attributes
            .iter_mut()
            .find(|(d, _)| d.eq_ignore_ascii_case(description.as_bytes()))
        {
            Some((_, values)) => values.push(value),
            None => attributes.push((description.into_string().into_bytes(), vec![value])),
        }
    }
    Ok(Some(Add {
        origin: record.origin,
        dn: record.dn,
        attributes,
    }))
}

struct ResponseReader {
    stream: Wire,
    buf: Vec<u8>,
}

impl ResponseReader {
    /// The next whole PDU; `None` when the server closed the connection.
    fn next_pdu(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            match meridian_ber::frame::pdu_length(&self.buf, DecodeLimits::DEFAULT_MAX_PDU_BYTES) {
                Ok(len) => {
                    let rest = self.buf.split_off(len);
                    return Ok(Some(std::mem::replace(&mut self.buf, rest)));
                }
                Err(meridian_ber::Error::Incomplete { .. }) => {}
                Err(e) => anyhow::bail!("bad response from the server: {e}"),
            }
            let mut chunk = [0u8; 1 << 16];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Ok(None);
            }
            self.buf
                .extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    }

    /// Matches answers to adds until the connection ends.
    fn run(mut self, in_flight: &InFlight, tokens: &Receiver<()>, answers: &SyncSender<Answer>) {
        while let Ok(Some(pdu)) = self.next_pdu() {
            let Ok(message) = LdapMessage::decode(&pdu, &DecodeLimits::default()) else {
                return;
            };
            let ProtocolOp::AddResponse(result) = message.op else {
                // A Notice of Disconnection or anything unexpected ends it.
                return;
            };
            let add = in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&message.message_id);
            let Some(add) = add else { continue };
            let answer = Answer {
                add,
                code: result.code,
                message: String::from_utf8_lossy(result.message).into_owned(),
            };
            if answers.send(answer).is_err() {
                return;
            }
            let _ = tokens.recv();
        }
    }
}
