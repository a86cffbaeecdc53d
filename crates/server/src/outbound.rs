//! The outbound side of a connection: responses waiting to be written.
//!
//! Operations append encoded responses to one shared buffer; a single writer
//! task swaps it out and writes everything that is ready with one
//! `write_all`, so many responses share a syscall. The same structure keeps
//! the two promises about memory:
//!
//! * **Backpressure.** Every request takes a permit from `permits` before it
//!   is dispatched and gives it back only when its final response has been
//!   *written to the socket*. At `max_outstanding_per_connection` the reader
//!   stops reading, so a client that never reads its answers pins at most
//!   that many responses.
//! * **Queue Length bundles.** When a client announces a bundle of N
//!   requests (see `docs/queue-length.md`), the writer holds the buffer
//!   until N operations have completed or `queue_length_flush_ms` has
//!   passed, so the bundle's answers leave together and a wrong count can
//!   never stall the client. Bundles are held one by one, oldest first:
//!   completions count towards the oldest open bundle, and each bundle's
//!   deadline runs from its own announcement.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

/// Shared between a connection's reader (and operations) and its writer.
#[derive(Debug)]
pub(crate) struct Outbound {
    state: Mutex<State>,
    wake: Notify,
    /// Signalled after every write: producers of large results wait on it.
    room: Notify,
    permits: Semaphore,
    max_outstanding: u64,
    hold_for: Duration,
    /// Permits taken and not yet given back: this connection's share of
    /// the metrics' outstanding operations, taken back from them when
    /// the connection goes (whatever its operations became).
    outstanding: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    buf: Vec<u8>,
    /// Operations whose final response is in `buf`.
    completed: usize,
    /// Open Queue Length bundles, oldest first (deadlines ascending).
    holds: VecDeque<Hold>,
    /// A bundle completed or ran out of time since the buffer was last
    /// taken: what is ready goes out, whatever newer bundles are open.
    release: bool,
    /// No more responses will come: write what is left, then shut down.
    closing: bool,
    /// With `closing`: write what is left, then hand the socket back
    /// instead of shutting it down (StartTLS).
    hand_over: bool,
}

#[derive(Debug, Clone, Copy)]
struct Hold {
    remaining: u64,
    deadline: Instant,
}

impl State {
    /// A bundle of `count` operations announced now.
    fn open_bundle(&mut self, count: u64, max_outstanding: u64, hold_for: Duration) {
        // A bundle larger than the outstanding limit could never complete
        // (the reader stops at the limit): cap it.
        let remaining = count.min(max_outstanding);
        // Each announcement rides on a request, so there are at most
        // that many open bundles; past it (counts that never complete,
        // faster than they expire) the newest takes the rest.
        if self.holds.len() as u64 >= max_outstanding {
            if let Some(newest) = self.holds.back_mut() {
                newest.remaining = (newest.remaining + remaining).min(max_outstanding);
            }
            return;
        }
        self.holds.push_back(Hold {
            remaining,
            deadline: Instant::now() + hold_for,
        });
    }

    /// `completed` operations finished: they count towards the oldest
    /// open bundles. Responses are not matched to bundles one by one,
    /// so a count the client got wrong releases a bundle early or late
    /// (never later than its deadline).
    fn settle(&mut self, mut completed: u64) {
        while completed > 0 {
            let Some(oldest) = self.holds.front_mut() else {
                return;
            };
            let taken = completed.min(oldest.remaining);
            oldest.remaining -= taken;
            completed -= taken;
            if oldest.remaining == 0 {
                self.holds.pop_front();
                self.release = true;
            }
        }
    }

    /// Until when the buffer is held (`None`: it may be written now).
    /// Bundles past their deadline are dropped, which releases it.
    fn held_until(&mut self, now: Instant) -> Option<Instant> {
        while self.holds.front().is_some_and(|h| now >= h.deadline) {
            self.holds.pop_front();
            self.release = true;
        }
        if self.buf.is_empty() && self.completed == 0 {
            // Released with nothing to write: newer bundles hold what
            // comes next.
            self.release = false;
        }
        if self.release || self.closing {
            return None;
        }
        self.holds.front().map(|h| h.deadline)
    }
}

/// An answer buffer this large is kept for reuse (by the writer between
/// writes, by the reader while it waits); a larger one is let go, so a
/// large result does not stay allocated (a streamed search's steps fill
/// up to about 1 MiB).
pub(crate) const KEEP_BUFFER_BYTES: usize = 256 * 1024;

/// A batch of responses produced by the reader for one pass over its input.
#[derive(Debug, Default)]
pub(crate) struct ResponseBatch {
    pub(crate) bytes: Vec<u8>,
    /// Operations completed by these bytes (each returns one permit).
    pub(crate) completed: usize,
    /// Operations announced by Queue Length controls in this batch.
    pub(crate) bundle: u64,
}

impl ResponseBatch {
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.completed == 0 && self.bundle == 0
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        // Operations the connection took with it leave the count.
        let left = *self.outstanding.get_mut();
        crate::metrics::outstanding(-(left as i64));
    }
}

impl Outbound {
    pub(crate) fn new(max_outstanding: usize, hold_for: Duration) -> Self {
        Outbound {
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            room: Notify::new(),
            permits: Semaphore::new(max_outstanding),
            max_outstanding: max_outstanding as u64,
            hold_for,
            outstanding: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Counts `n` operations begun (`true`) or ended.
    fn count(&self, begun: bool, n: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let n = n as u64;
        if begun {
            self.outstanding.fetch_add(n, Relaxed);
            crate::metrics::outstanding(n as i64);
        } else {
            // Never below zero: a response without a permit (the Notice
            // of Disconnection) counts nothing.
            let ended = self
                .outstanding
                .fetch_update(Relaxed, Relaxed, |o| Some(o.saturating_sub(n)))
                .map_or(0, |before| before.min(n));
            crate::metrics::outstanding(-(ended as i64));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is plain data that is consistent after every statement;
        // a panic elsewhere cannot leave it half-updated.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a permit for one more request without waiting.
    pub(crate) fn try_reserve(&self) -> bool {
        match self.permits.try_acquire() {
            Ok(permit) => {
                permit.forget();
                self.count(true, 1);
                true
            }
            Err(_) => false,
        }
    }

    /// Waits for a permit; false once the writer has failed.
    pub(crate) async fn reserve(&self) -> bool {
        match self.permits.acquire().await {
            Ok(permit) => {
                permit.forget();
                self.count(true, 1);
                true
            }
            Err(_) => false,
        }
    }

    /// Waits until `all` permits (the configured maximum) are free again:
    /// no request of the connection is in flight or unwritten. Returns at
    /// once if the writer has stopped.
    pub(crate) async fn wait_idle(&self, all: u32) {
        if let Ok(permits) = self.permits.acquire_many(all).await {
            drop(permits);
        }
    }

    /// Waits until fewer than `limit` bytes wait to be written, so a large
    /// search produces its entries only as fast as the client reads them.
    /// Returns false if the connection is gone.
    pub(crate) async fn wait_room(&self, limit: usize) -> bool {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.permits.is_closed() {
                return false;
            }
            if self.lock().buf.len() < limit {
                return true;
            }
            notified.await;
        }
    }

    /// Resolves once the connection is gone (its writer has stopped).
    pub(crate) async fn gone(&self) {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.permits.is_closed() {
                return;
            }
            notified.await;
        }
    }

    /// Gives back permits for requests that turned out to need no response
    /// (abandon, unbind).
    pub(crate) fn release(&self, n: usize) {
        self.count(false, n);
        self.permits.add_permits(n);
    }

    /// Hands a batch to the writer. The batch is left empty for reuse.
    /// Returns the bytes now waiting to be written (0 if the batch was
    /// empty: then nothing was looked at).
    pub(crate) fn push(&self, batch: &mut ResponseBatch) -> usize {
        if batch.is_empty() {
            return 0;
        }
        let waiting = {
            let mut st = self.lock();
            if batch.bundle > 0 {
                st.open_bundle(batch.bundle, self.max_outstanding, self.hold_for);
            }
            st.settle(batch.completed as u64);
            if st.buf.is_empty() {
                // Hand over the batch's allocation instead of copying it.
                std::mem::swap(&mut st.buf, &mut batch.bytes);
            } else {
                st.buf.extend_from_slice(&batch.bytes);
            }
            st.completed += batch.completed;
            st.buf.len()
        };
        batch.bytes.clear();
        batch.completed = 0;
        batch.bundle = 0;
        self.wake.notify_one();
        waiting
    }

    /// No more responses: the writer flushes what is left and shuts the
    /// socket down.
    pub(crate) fn close(&self) {
        self.lock().closing = true;
        self.wake.notify_one();
    }

    /// No more responses on this socket as it is: the writer flushes
    /// what is left and hands the socket back ([`Outbound::write_loop`]'s
    /// result), to go on under TLS.
    pub(crate) fn hand_over(&self) {
        let mut st = self.lock();
        st.closing = true;
        st.hand_over = true;
        drop(st);
        self.wake.notify_one();
    }

    /// The writer task: runs until closed or the socket fails. Returns
    /// the socket when it was asked to hand it over
    /// ([`Outbound::hand_over`]) and everything was written.
    pub(crate) async fn write_loop<W: AsyncWrite + Unpin>(&self, mut socket: W) -> Option<W> {
        let mut chunk = Vec::new();
        loop {
            let (completed, closing) = match self.next_chunk(&mut chunk).await {
                Some(taken) => taken,
                None => {
                    // Woken by the first of what is often many responses
                    // made ready at once (a group commit answers every
                    // write of its batch): let the other ready tasks add
                    // theirs before the buffer is taken, so they share
                    // one send instead of a few each.
                    tokio::task::yield_now().await;
                    continue;
                }
            };
            let written = async {
                if !chunk.is_empty() {
                    socket.write_all(&chunk).await?;
                    crate::metrics::sent(chunk.len());
                    // A TLS stream holds records until flushed.
                    socket.flush().await?;
                }
                std::io::Result::Ok(())
            };
            if written.await.is_err() {
                // The peer is gone: wake a reader waiting for permits and
                // producers waiting for room.
                self.permits.close();
                self.room.notify_waiters();
                return None;
            }
            if chunk.capacity() > KEEP_BUFFER_BYTES {
                // A large result passed through: do not keep its buffer.
                chunk = Vec::new();
            } else {
                chunk.clear();
            }
            self.count(false, completed);
            self.permits.add_permits(completed);
            self.room.notify_waiters();
            if closing {
                self.permits.close();
                self.room.notify_waiters();
                if self.lock().hand_over {
                    return Some(socket);
                }
                let _ = socket.shutdown().await;
                return None;
            }
        }
    }

    /// Waits until there is something to write (honouring a bundle hold)
    /// and swaps it into `chunk`. Returns the completed-operation count and
    /// whether the connection is closing.
    async fn next_chunk(&self, chunk: &mut Vec<u8>) -> Option<(usize, bool)> {
        let wait_until = {
            let mut st = self.lock();
            let held = st.held_until(Instant::now());
            match held {
                None if !st.buf.is_empty() || st.completed > 0 || st.closing => {
                    std::mem::swap(chunk, &mut st.buf);
                    st.release = false;
                    let completed = std::mem::take(&mut st.completed);
                    return Some((completed, st.closing));
                }
                other => other,
            }
        };
        match wait_until {
            Some(deadline) => {
                let _ = tokio::time::timeout_at(deadline, self.wake.notified()).await;
            }
            None => self.wake.notified().await,
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_bound_outstanding_requests() {
        let out = Outbound::new(2, Duration::from_millis(5));
        assert!(out.try_reserve());
        assert!(out.try_reserve());
        assert!(!out.try_reserve());
        out.release(1);
        assert!(out.try_reserve());
    }

    #[tokio::test]
    async fn a_bundle_is_held_until_complete() {
        let out = Outbound::new(16, Duration::from_secs(60));
        let mut chunk = Vec::new();
        let mut batch = ResponseBatch {
            bytes: b"a".to_vec(),
            completed: 1,
            bundle: 3,
        };
        out.push(&mut batch);
        // Two of three done: nothing may be taken yet.
        let taken =
            tokio::time::timeout(Duration::from_millis(20), out.next_chunk(&mut chunk)).await;
        assert!(matches!(taken, Ok(None) | Err(_)));
        assert!(chunk.is_empty());
        out.push(&mut ResponseBatch {
            bytes: b"bc".to_vec(),
            completed: 2,
            bundle: 0,
        });
        assert_eq!(out.next_chunk(&mut chunk).await, Some((3, false)));
        assert_eq!(chunk, b"abc");
    }

    fn answers(bytes: &[u8], completed: usize, bundle: u64) -> ResponseBatch {
        ResponseBatch {
            bytes: bytes.to_vec(),
            completed,
            bundle,
        }
    }

    /// An open-loop client announces a small bundle every few
    /// milliseconds, each before the last one's answers are ready: every
    /// bundle is released when its own operations are done, or at its
    /// own deadline, never later because newer bundles are open.
    #[tokio::test(start_paused = true)]
    async fn each_bundle_is_held_on_its_own() {
        let out = Outbound::new(64, Duration::from_millis(10));
        let mut chunk = Vec::new();
        let step = |ms| tokio::time::advance(Duration::from_millis(ms));
        // t = 0: bundle A of two.
        out.push(&mut answers(b"", 0, 2));
        step(3).await;
        // t = 3: bundle B of two; one of A done. A is held.
        out.push(&mut answers(b"a", 1, 2));
        assert_eq!(out.next_chunk(&mut chunk).await, None);
        step(3).await;
        // t = 6: bundle C of two; A is done, so everything ready goes.
        out.push(&mut answers(b"b", 1, 2));
        assert_eq!(out.next_chunk(&mut chunk).await, Some((2, false)));
        assert_eq!(chunk, b"ab");
        chunk.clear();
        // One of B done: B holds it until its deadline, t = 13 (not
        // C's, t = 16).
        out.push(&mut answers(b"c", 1, 0));
        assert_eq!(out.next_chunk(&mut chunk).await, None);
        step(6).await;
        assert_eq!(out.next_chunk(&mut chunk).await, None);
        step(1).await;
        assert_eq!(out.next_chunk(&mut chunk).await, Some((1, false)));
        assert_eq!(chunk, b"c");
        chunk.clear();
        // C is still open and counts the next answers.
        out.push(&mut answers(b"d", 1, 0));
        assert_eq!(out.next_chunk(&mut chunk).await, None);
        out.push(&mut answers(b"e", 1, 0));
        assert_eq!(out.next_chunk(&mut chunk).await, Some((2, false)));
        assert_eq!(chunk, b"de");
    }

    #[tokio::test]
    #[allow(clippy::disallowed_methods)]
    async fn a_wrong_count_is_released_by_the_timer() {
        let out = Outbound::new(16, Duration::from_millis(10));
        out.push(&mut ResponseBatch {
            bytes: b"x".to_vec(),
            completed: 1,
            bundle: 1000,
        });
        let mut chunk = Vec::new();
        let started = std::time::Instant::now();
        loop {
            if let Some(taken) = out.next_chunk(&mut chunk).await {
                assert_eq!(taken, (1, false));
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "hold never released"
            );
        }
        assert_eq!(chunk, b"x");
    }
}
