//! One session: a connection that keeps up to `depth` requests
//! outstanding (closed loop) or sends on a schedule (open loop), or, in
//! connection-per-operation mode, a loop of connect, bind, one request,
//! unbind.
//!
//! A persistent session is one task over the two halves of its socket:
//! it renders requests into one buffer (the whole window at once, so a
//! deep pipeline goes out in a few large writes), writes while reading,
//! and scans each response only as far as its message ID and result
//! code. Outstanding requests live in a ring indexed by message ID, so
//! matching an answer costs an array index, not a hash; if the slot the
//! next ID needs is still taken (a very slow request among fast ones),
//! issuing waits for it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use meridian_ber::{Tag, Writer, frame};
use meridian_proto::controls::{QueueLength, oid};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::keys::{KeyStream, Keys};
use crate::ops::Operation;
use crate::rng::Rng;
use crate::stats::{Sample, Stats, client_code};
use crate::template::{Values, unique_value};
use crate::tls::Tls;
use crate::wire::{self, Conn, Response};

/// Everything the sessions of a run share.
#[derive(Debug)]
pub struct Shared {
    /// The operations.
    pub ops: Vec<Operation>,
    /// Cumulative weights, for choosing an operation.
    pub cumulative: Vec<f64>,
    /// The keys.
    pub keys: Keys,
    /// The server.
    pub address: SocketAddr,
    /// TLS, for an `ldaps://` target.
    pub tls: Option<Tls>,
    /// Bind DN and password of every connection.
    pub bind: Option<(String, String)>,
    /// Outstanding requests per session.
    pub depth: usize,
    /// Send the Queue Length control with each bundle.
    pub queue_length: bool,
    /// Connection-per-operation mode.
    pub connection_per_operation: bool,
    /// Open loop: requests per second of each session (0: closed loop).
    pub session_rate: f64,
    /// Sessions of the foreground mix; sessions from this index on run
    /// the background operations, one each.
    pub foreground_sessions: u32,
    /// Background operations: (operation, rate).
    pub background: Vec<(usize, f64)>,
    /// Largest response accepted.
    pub max_pdu: usize,
    /// Client-side time-out of a request (abandoned and recorded as
    /// `timeout` when it passes).
    pub timeout: Option<Duration>,
    /// Seed of the sessions' random numbers.
    pub seed: u64,
    /// `{run}`: tells this run's added entries from an earlier run's.
    pub run_id: u64,
    /// `{seq}` counter of each operation.
    pub seqs: Vec<AtomicU64>,
    /// The clock of the run, set once every session is connected.
    pub clock: OnceLock<Clock>,
    /// Each session says here when it is connected (or failed to be).
    pub ready: mpsc::Sender<()>,
    /// Set to true when the clock is set: sessions start sending.
    pub started: watch::Sender<bool>,
    /// Operations left to send in count mode.
    pub budget: Option<AtomicU64>,
    /// Where samples go.
    pub stats: Stats,
    /// Live counters for the progress line.
    pub completed: AtomicU64,
    /// Live count of non-success answers.
    pub failed: AtomicU64,
    /// Set to stop early (Ctrl-C, a fatal error).
    pub stop: AtomicBool,
    /// Nanoseconds from `measure_from` to the last measured completion.
    pub last_completion_ns: AtomicU64,
}

/// When the run starts measuring, stops sending, gives up waiting.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Start of the warm-up.
    pub start: Instant,
    /// End of the warm-up: operations sent from here on are measured.
    pub measure_from: Instant,
    /// When sending stops (`None`: by count only).
    pub stop_at: Option<Instant>,
    /// How long outstanding requests may take after sending stops.
    pub drain: Duration,
}

impl Clock {
    /// The same phases, moved to begin at `start`.
    pub fn restarted(&self, start: Instant) -> Clock {
        Clock {
            start,
            measure_from: start + self.measure_from.duration_since(self.start),
            stop_at: self.stop_at.map(|t| start + t.duration_since(self.start)),
            drain: self.drain,
        }
    }

    /// A clock starting now with no warm-up (used only if a session ever
    /// ran before the runner set the real one, which it does not).
    fn now() -> Clock {
        let now = Instant::now();
        Clock {
            start: now,
            measure_from: now,
            stop_at: None,
            drain: Duration::ZERO,
        }
    }
}

impl Shared {
    /// The run's clock.
    pub fn clock(&self) -> &Clock {
        self.clock.get_or_init(Clock::now)
    }

    /// Reports this session connected and waits for the start.
    async fn arrive(&self) {
        let _ = self.ready.send(()).await;
        let mut started = self.started.subscribe();
        let _ = started.wait_for(|s| *s).await;
    }

    /// The background operation session `index` runs, if it is one.
    fn background_of(&self, index: u32) -> Option<(usize, f64)> {
        let i = index.checked_sub(self.foreground_sessions)?;
        self.background.get(i as usize).copied()
    }

    /// Requests per second of session `index` (0: closed loop).
    fn rate_of(&self, index: u32) -> f64 {
        self.background_of(index)
            .map_or(self.session_rate, |(_, rate)| rate)
    }

    fn choose(&self, rng: &mut Rng) -> usize {
        if self.cumulative.len() <= 1 {
            return 0;
        }
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let x = rng.unit() * total;
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1)
    }

    /// Takes up to `wanted` operations from the budget.
    /// The count applies to measured operations only: during the
    /// warm-up, requests go out without drawing on it.
    fn take_budget(&self, wanted: usize, now: Instant) -> usize {
        let Some(budget) = self
            .budget
            .as_ref()
            .filter(|_| now >= self.clock().measure_from)
        else {
            return wanted;
        };
        let mut taken = 0;
        let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            taken = (wanted as u64).min(left) as usize;
            Some(left - taken as u64)
        });
        taken
    }

    /// Returns `n` operations taken at `now` but not sent.
    fn give_back(&self, n: usize, now: Instant) {
        if let Some(budget) = self
            .budget
            .as_ref()
            .filter(|_| now >= self.clock().measure_from)
        {
            budget.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    fn sending_over(&self, now: Instant) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.clock().stop_at.is_some_and(|t| now >= t)
            || self
                .budget
                .as_ref()
                .is_some_and(|b| b.load(Ordering::Relaxed) == 0)
    }

    fn note_completion(&self, at: Instant) {
        if let Some(ns) = at.checked_duration_since(self.clock().measure_from) {
            self.last_completion_ns.fetch_max(
                ns.as_nanos().min(u128::from(u64::MAX)) as u64,
                Ordering::Relaxed,
            );
        }
    }
}

/// A request waiting for its answer.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: i32,
    op: u16,
    issued: Issued,
    entries: u32,
}

/// When a request was due and when it is timed from.
#[derive(Debug, Clone, Copy)]
struct Issued {
    /// Its place in the schedule (open loop), or when it went out (closed
    /// loop). This decides whether it belongs to the warm-up or the
    /// measured window, so a window of N intervals holds N requests
    /// whatever the timer's jitter.
    due: Instant,
    /// Where its latency starts.
    sent: Instant,
}

/// What a session draws from and records into.
struct Recorder<'s> {
    shared: &'s Shared,
    samples: Vec<Sample>,
    capacity: usize,
}

impl<'s> Recorder<'s> {
    fn new(shared: &'s Shared) -> Self {
        let capacity = (shared.depth * 2).clamp(64, 4096);
        Recorder {
            shared,
            samples: Vec::with_capacity(capacity),
            capacity,
        }
    }

    fn record(&mut self, op: u16, code: i64, issued: Issued, done: Instant, entries: u32) {
        let shared = self.shared;
        let ok = shared
            .ops
            .get(usize::from(op))
            .is_some_and(|o| u32::try_from(code).is_ok_and(|c| o.succeeded(c)));
        if !ok {
            shared.failed.fetch_add(1, Ordering::Relaxed);
        }
        if issued.due < shared.clock().measure_from {
            return; // warm-up
        }
        shared.note_completion(done);
        let since = done.saturating_duration_since(shared.clock().measure_from);
        self.samples.push(Sample {
            op,
            code,
            second: since.as_secs().min(u64::from(u32::MAX)) as u32,
            latency_ns: done
                .saturating_duration_since(issued.sent)
                .as_nanos()
                .min(u128::from(u64::MAX)) as u64,
            entries,
        });
        if self.samples.len() >= self.capacity {
            shared.stats.absorb(&mut self.samples);
        }
    }
}

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        self.shared.stats.absorb(&mut self.samples);
    }
}

/// Runs session `index` until the run ends. An error ends this session
/// only; its outstanding requests are recorded as lost.
pub async fn run(shared: Arc<Shared>, index: u32) -> anyhow::Result<()> {
    if shared.connection_per_operation {
        shared.arrive().await;
        one_shot_loop(&shared, index).await
    } else {
        // Connect and bind before the clock starts: setting up sessions
        // is not part of what a run measures.
        let conn = open_connection(&shared).await;
        shared.arrive().await;
        // A plain socket splits into owned halves without a lock; TLS
        // state is shared by both directions, so it is split with one.
        match conn? {
            Conn::Plain(stream) => {
                let (rd, wr) = stream.into_split();
                persistent(&shared, index, rd, wr).await
            }
            tls @ Conn::Tls(_) => {
                let (rd, wr) = tokio::io::split(tls);
                persistent(&shared, index, rd, wr).await
            }
        }
    }
}

/// Per-session request state: IDs, keys, random numbers, rendering.
struct Issuer<'s> {
    shared: &'s Shared,
    index: u32,
    /// The one operation of a background session.
    only: Option<usize>,
    rng: Rng,
    keys: KeyStream<'s>,
    requests: u64,
}

impl<'s> Issuer<'s> {
    fn new(shared: &'s Shared, index: u32) -> Self {
        Issuer {
            shared,
            index,
            only: shared.background_of(index).map(|(op, _)| op),
            rng: Rng::new(shared.seed ^ (u64::from(index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            keys: shared.keys.stream(u64::from(index)),
            requests: 0,
        }
    }

    /// Renders one request of a randomly chosen operation; returns it.
    fn render(&mut self, id: i32, controls: &[u8], out: &mut Vec<u8>) -> u16 {
        let shared = self.shared;
        let op_index = match self.only {
            Some(op) => op,
            None => shared.choose(&mut self.rng),
        };
        let Some(op) = shared.ops.get(op_index) else {
            return 0;
        };
        let key = self.keys.draw(&mut self.rng);
        let seq = if op.template.uses_seq() {
            shared
                .seqs
                .get(op_index)
                .map_or(0, |s| s.fetch_add(1, Ordering::Relaxed))
        } else {
            0
        };
        let mut values = Values {
            key,
            seq,
            unique: unique_value(self.index, self.requests),
            run: shared.run_id,
            rng: &mut self.rng,
        };
        self.requests += 1;
        op.template.render(id, &mut values, controls, out);
        op_index as u16
    }
}

/// Appends an AbandonRequest (message `id`) for message `abandoned`.
fn encode_abandon(id: i32, abandoned: i32, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let message = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(id));
    w.integer(
        meridian_proto::message::tags::ABANDON_REQUEST,
        i64::from(abandoned),
    );
    w.end(message);
}

/// Lateness of an open-loop request that is the timer's, not the
/// server's: tokio's timers fire on a 1 ms wheel.
const TIMER_SLACK: Duration = Duration::from_millis(2);

fn next_id(id: i32) -> i32 {
    if id == i32::MAX { 1 } else { id + 1 }
}

/// The encoded `[0] Controls` with one Queue Length control for `count`.
fn queue_length_control(count: usize) -> Vec<u8> {
    let mut value = Vec::new();
    QueueLength {
        count: u32::try_from(count).unwrap_or(u32::MAX),
    }
    .encode(&mut value);
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    let controls = w.start(Tag::context(0, true));
    let control = w.start(Tag::SEQUENCE);
    w.octets(Tag::OCTET_STRING, oid::QUEUE_LENGTH);
    w.octets(Tag::OCTET_STRING, &value);
    w.end(control);
    w.end(controls);
    out
}

async fn open_connection(shared: &Shared) -> anyhow::Result<Conn> {
    connect_bound(
        shared.address,
        shared.tls.as_ref(),
        shared.bind.as_ref(),
        shared.max_pdu,
    )
    .await
}

/// A connection to `address`, bound as `bind` when given.
pub(crate) async fn connect_bound(
    address: std::net::SocketAddr,
    tls: Option<&crate::tls::Tls>,
    bind: Option<&(String, String)>,
    max_pdu: usize,
) -> anyhow::Result<Conn> {
    let mut stream = wire::connect(address, tls, Duration::from_secs(10)).await?;
    if let Some((dn, password)) = bind {
        wire::bind(&mut stream, dn, password, max_pdu).await?;
    }
    Ok(stream)
}

/// One session on an open connection: issue, write, read and record
/// until the run ends.
///
/// One function on purpose (over 150 lines): it is the load generator's
/// inner loop, the one `bench ceiling` measures at millions of
/// operations per client CPU second; the ring of outstanding requests and
/// the read and write buffers stay locals of one loop instead of being
/// handed to helpers on every request.
async fn persistent<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    shared: &Shared,
    index: u32,
    mut rd: R,
    mut wr: W,
) -> anyhow::Result<()> {
    let mut recorder = Recorder::new(shared);
    let mut issuer = Issuer::new(shared, index);

    let ring_len = (shared.depth * 4).next_power_of_two().max(2);
    let mask = ring_len - 1;
    let mut ring: Vec<Option<Slot>> = vec![None; ring_len];
    let mut id: i32 = if shared.bind.is_some() { 2 } else { 1 };
    let mut outstanding = 0usize;

    let rate = shared.rate_of(index);
    let interval = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
    // Sessions start at random phases so an open-loop run is not a
    // series of synchronised bursts.
    let mut next_due =
        shared.clock().start + interval.map_or(Duration::ZERO, |i| i.mul_f64(issuer.rng.unit()));

    let mut wbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut wpos = 0usize;
    let mut rbuf = vec![0u8; 64 * 1024];
    let (mut rstart, mut rend) = (0usize, 0usize);
    let mut drain_deadline: Option<Instant> = None;
    let mut next_timeout_check = Instant::now();
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    let sleep = tokio::time::sleep_until(far.into());
    tokio::pin!(sleep);
    let mut sleeping_until = far;

    let result: anyhow::Result<()> = async {
        loop {
            let now = Instant::now();
            // Open loop: requests due before the end of the run still go
            // out when the timer wakes us a little after it.
            let schedule_now = if interval.is_some() { now.min(next_due) } else { now };
            if drain_deadline.is_none() && shared.sending_over(schedule_now) {
                drain_deadline = Some(now + shared.clock().drain);
            }
            if drain_deadline.is_none() {
                let room = shared.depth - outstanding;
                let wanted = match interval {
                    None => room,
                    Some(step) => {
                        let mut due = 0;
                        let mut t = next_due;
                        let stop_at = shared.clock().stop_at.unwrap_or(far);
                        while t <= now && t < stop_at && due < room {
                            due += 1;
                            t += step;
                        }
                        due
                    }
                };
                let granted = if wanted > 0 { shared.take_budget(wanted, now) } else { 0 };
                let controls = if shared.queue_length && granted > 1 {
                    queue_length_control(granted)
                } else {
                    Vec::new()
                };
                for n in 0..granted {
                    let slot = ring.get_mut(id as usize & mask);
                    let Some(slot) = slot.filter(|s| s.is_none()) else {
                        // The ID's slot is still taken: hand the budget back.
                        shared.give_back(granted - n, now);
                        break;
                    };
                    // Open loop: timed from the schedule when the request
                    // went out late (the window was full: the server held
                    // it back), from now when only the timer's resolution
                    // made it late.
                    let sent = match interval {
                        Some(_) if now.saturating_duration_since(next_due) > TIMER_SLACK => next_due,
                        _ => now,
                    };
                    let op = issuer.render(id, if n == 0 { &controls } else { &[] }, &mut wbuf);
                    let due = if interval.is_some() { next_due } else { now };
                    *slot = Some(Slot { id, op, issued: Issued { due, sent }, entries: 0 });
                    outstanding += 1;
                    id = next_id(id);
                    if let Some(step) = interval {
                        next_due += step;
                    }
                }
            }
            if drain_deadline.is_some() && outstanding == 0 {
                return Ok(());
            }
            if drain_deadline.is_some_and(|d| now >= d) {
                for slot in ring.iter_mut().filter_map(Option::take) {
                    recorder.record(slot.op, client_code::UNANSWERED, slot.issued, now, slot.entries);
                }
                return Ok(());
            }
            if let Some(limit) = shared.timeout.filter(|_| now >= next_timeout_check) {
                // Time out requests older than the limit: record them,
                // abandon them, free their slots. Checked a few times per
                // limit, not per request: a scan of the ring.
                for cell in &mut ring {
                    if let Some(slot) = cell.filter(|s| now.saturating_duration_since(s.issued.sent) >= limit) {
                        *cell = None;
                        outstanding -= 1;
                        recorder.record(slot.op, client_code::TIMEOUT, slot.issued, now, slot.entries);
                        encode_abandon(id, slot.id, &mut wbuf);
                        id = next_id(id);
                    }
                }
                next_timeout_check = now + (limit / 10).max(Duration::from_millis(10));
            }
            let mut wake = match (drain_deadline, interval) {
                (Some(d), _) => d,
                (None, Some(_)) if outstanding < shared.depth => next_due,
                _ => shared.clock().stop_at.unwrap_or(far),
            };
            if shared.timeout.is_some() && outstanding > 0 {
                wake = wake.min(next_timeout_check);
            }
            if wake != sleeping_until {
                sleep.as_mut().reset(wake.into());
                sleeping_until = wake;
            }
            if rend == rbuf.len() {
                // A PDU larger than the buffer: grow (bounded by max_pdu).
                let needed = match frame::pdu_length(rbuf.get(rstart..rend).unwrap_or(&[]), shared.max_pdu) {
                    Err(meridian_ber::Error::Incomplete { needed }) => needed,
                    Err(e) => bail!("malformed response: {e}"),
                    Ok(_) => 0,
                };
                rbuf.resize(rbuf.len() + needed.max(4096), 0);
            }
            tokio::select! {
                biased;
                read = rd.read(rbuf.get_mut(rend..).unwrap_or(&mut [])) => {
                    let n = read.context("reading from the server")?;
                    if n == 0 {
                        bail!("the server closed the connection");
                    }
                    rend += n;
                    let done = Instant::now();
                    let mut completed = 0u64;
                    loop {
                        let window = rbuf.get(rstart..rend).unwrap_or(&[]);
                        let len = match frame::pdu_length(window, shared.max_pdu) {
                            Ok(len) => len,
                            Err(e) if e.is_incomplete() => break,
                            Err(e) => bail!("malformed response: {e}"),
                        };
                        let pdu = window.get(..len).unwrap_or(&[]);
                        rstart += len;
                        let (rid, response) = wire::scan(pdu).map_err(|e| anyhow!("malformed response: {e}"))?;
                        match response {
                            Response::Notice { code, message } => bail!(
                                "the server ended the session: {} {}",
                                crate::stats::code_name(i64::from(code)),
                                String::from_utf8_lossy(message)
                            ),
                            Response::Intermediate => {}
                            Response::Entry | Response::Done { .. } => {
                                let cell = ring.get_mut(rid as usize & mask);
                                let Some(cell) = cell.filter(|c| c.is_some_and(|s| s.id == rid)) else {
                                    if shared.timeout.is_some() {
                                        // A late answer to a request that timed
                                        // out and was abandoned.
                                        continue;
                                    }
                                    bail!("an answer to message {rid}, which is not outstanding");
                                };
                                if let Response::Done { code, .. } = response {
                                    if let Some(slot) = cell.take() {
                                        outstanding -= 1;
                                        completed += 1;
                                        recorder.record(slot.op, i64::from(code), slot.issued, done, slot.entries);
                                    }
                                } else if let Some(slot) = cell.as_mut() {
                                    slot.entries = slot.entries.saturating_add(1);
                                }
                            }
                        }
                    }
                    shared.completed.fetch_add(completed, Ordering::Relaxed);
                    if rstart == rend {
                        (rstart, rend) = (0, 0);
                    } else if rstart > rbuf.len() / 2 {
                        rbuf.copy_within(rstart..rend, 0);
                        (rstart, rend) = (0, rend - rstart);
                    }
                }
                written = wr.write(wbuf.get(wpos..).unwrap_or(&[])), if wpos < wbuf.len() => {
                    wpos += written.context("writing to the server")?;
                    if wpos == wbuf.len() {
                        wbuf.clear();
                        wpos = 0;
                    }
                }
                () = &mut sleep => {}
            }
        }
    }
    .await;
    if result.is_err() {
        let now = Instant::now();
        for slot in ring.iter_mut().filter_map(Option::take) {
            recorder.record(
                slot.op,
                client_code::CONNECTION_LOST,
                slot.issued,
                now,
                slot.entries,
            );
        }
    } else {
        let _ = wr.shutdown().await;
    }
    result
}

/// Connection-per-operation mode (seed 002): each operation is a whole
/// session of its own, and its latency covers all of it.
async fn one_shot_loop(shared: &Shared, index: u32) -> anyhow::Result<()> {
    let mut recorder = Recorder::new(shared);
    let mut issuer = Issuer::new(shared, index);
    let rate = shared.rate_of(index);
    let interval = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
    let mut next_due =
        shared.clock().start + interval.map_or(Duration::ZERO, |i| i.mul_f64(issuer.rng.unit()));
    loop {
        let issued = match interval {
            Some(step) => {
                let scheduled = next_due;
                tokio::time::sleep_until(scheduled.into()).await;
                next_due += step;
                let now = Instant::now();
                let sent = if now.saturating_duration_since(scheduled) > TIMER_SLACK {
                    scheduled
                } else {
                    now
                };
                Issued {
                    due: scheduled,
                    sent,
                }
            }
            None => {
                let now = Instant::now();
                Issued {
                    due: now,
                    sent: now,
                }
            }
        };
        if shared.sending_over(issued.due) || shared.take_budget(1, Instant::now()) == 0 {
            return Ok(());
        }
        let (op, code, entries) = match one_shot(shared, &mut issuer).await {
            Ok(answer) => answer,
            Err((op, code)) => (op, code, 0),
        };
        let done = Instant::now();
        recorder.record(op, code, issued, done, entries);
        shared.completed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connect, bind, one request, unbind: (operation, code, entries), or the
/// client code of what failed.
async fn one_shot(shared: &Shared, issuer: &mut Issuer<'_>) -> Result<(u16, i64, u32), (u16, i64)> {
    let mut request = Vec::new();
    let op = issuer.render(2, &[], &mut request);
    let mut stream =
        match wire::connect(shared.address, shared.tls.as_ref(), Duration::from_secs(10)).await {
            Ok(stream) => stream,
            Err(_) => return Err((op, client_code::CONNECT_FAILED)),
        };
    let lost = |_| (op, client_code::CONNECTION_LOST);
    if let Some((dn, password)) = &shared.bind {
        wire::bind(&mut stream, dn, password, shared.max_pdu)
            .await
            .map_err(lost)?;
    }
    stream
        .write_all(&request)
        .await
        .map_err(|_| (op, client_code::CONNECTION_LOST))?;
    let mut buf = Vec::with_capacity(4096);
    let mut entries = 0u32;
    let answer = async {
        loop {
            let pdu = wire::read_pdu(&mut stream, &mut buf, shared.max_pdu)
                .await
                .map_err(lost)?;
            match wire::scan(&pdu) {
                Ok((_, Response::Entry)) => entries = entries.saturating_add(1),
                Ok((_, Response::Intermediate)) => {}
                Ok((_, Response::Done { code, .. } | Response::Notice { code, .. })) => {
                    return Ok(i64::from(code));
                }
                Err(_) => return Err((op, client_code::CONNECTION_LOST)),
            }
        }
    };
    let code = match shared.timeout {
        Some(limit) => match tokio::time::timeout(limit, answer).await {
            Ok(code) => code?,
            // The connection is dropped: that ends the request too.
            Err(_) => return Err((op, client_code::TIMEOUT)),
        },
        None => answer.await?,
    };
    // UnbindRequest: [APPLICATION 2] NULL, message 3.
    let _ = stream
        .write_all(&[0x30, 0x05, 0x02, 0x01, 0x03, 0x42, 0x00])
        .await;
    let _ = stream.shutdown().await;
    Ok((op, code, entries))
}
