//! Appending to the journal, on a thread of its own.
//!
//! The writer commits batch N to LMDB and hands its record and its
//! answers to the journal thread, then goes on with batch N+1 while the
//! thread appends and fdatasyncs N: the sync no longer adds to the
//! writer's time per batch. The thread answers a batch only after its
//! record is durable, and answers batches in the order they were
//! committed, also those with nothing to journal (a refusal can depend
//! on an earlier batch that is not durable yet).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::space::Space;
use super::{checkpoint, io_error, log_bytes, open_segment, record, remove_marker, write_marker};
use crate::{Answer, Inner, StoreError};

/// One answer to send once the batch is durable.
type Reply = (oneshot::Sender<Answer>, Answer);

/// A committed batch on its way to the journal thread.
struct Committed {
    /// The batch's commands and the sequence number of its first record
    /// (`None` when no command of the batch applied). Framed by the
    /// journal thread: the CRCs and the copy into frames were a twentieth
    /// of the writer's time under a stream of modifies at the server,
    /// and the writer is the thread every write waits for.
    records: Option<(record::Batch, u64)>,
    /// The journal bytes the writer claimed for them (`space.rs`).
    claimed: u64,
    replies: Vec<Reply>,
}

/// Batches the writer may commit ahead of the journal. The journal
/// thread writes every batch waiting and syncs them once, so a slow sync
/// makes the next one larger instead of stopping the writer; the bound
/// keeps the memory of answers waiting for a sync in check.
const AHEAD: usize = 8;

/// The writer's side: numbers batches and hands them over.
pub(crate) struct Journal {
    next_seq: u64,
    /// The commands of the batch being committed.
    pub(crate) batch: record::Batch,
    /// Journal bytes claimed for `batch` before its commits.
    pub(crate) claimed: u64,
    /// The room in the journal, claimed before each commit.
    pub(crate) space: Arc<Space>,
    /// The batch committed last, its first sequence number and the bytes
    /// claimed for it, until it is handed over.
    sealed: Option<(record::Batch, u64, u64)>,
    sender: Option<SyncSender<Committed>>,
    thread: Option<JoinHandle<()>>,
}

impl Journal {
    /// Starts journaling a database that holds every record up to
    /// `last_seq`: writes the marker, opens a new log segment (a torn
    /// tail of the old one is never appended to), makes a base of the
    /// database as it is if `base_needed` (a machine crash from now on
    /// needs one to start from) and starts the journal thread.
    pub(crate) fn start(
        inner: &Arc<Inner>,
        last_seq: u64,
        checkpoint_bytes: u64,
        base_needed: bool,
    ) -> Result<Journal, StoreError> {
        let dir = super::dir_of(inner.env.path());
        if base_needed {
            // Synced first: should the machine stop before the marker
            // is written, the next open trusts data.mdb as it is.
            inner.env.force_sync()?;
            super::create_dir(&dir)?;
            checkpoint(inner, &dir, last_seq)?;
        }
        // From here on LMDB commits are not synced: a stop without a
        // clean close must be recovered.
        write_marker(&dir)?;
        // What earlier runs journaled since the newest base counts toward
        // the next checkpoint: counting the new segment alone let a server
        // restarted more often than every `checkpoint_bytes` of writes
        // keep every segment, and replay them all after a crash.
        let (segment, segment_path) = open_segment(&dir, last_seq)?;
        let space = Arc::new(Space::new(&segment, segment_path.clone())?);
        let since_base = log_bytes(&dir)?;
        let appender = Appender {
            inner: Arc::clone(inner),
            space: Arc::clone(&space),
            dir,
            segment,
            segment_path,
            since_base,
            last_seq,
            checkpoint_bytes,
            checkpoint: None,
            failed: None,
        };
        let (sender, receiver) = sync_channel(AHEAD);
        let thread = std::thread::Builder::new()
            .name("meridian-journal".into())
            .spawn(move || appender.run(receiver))
            .map_err(|e| StoreError::io("start", "the journal thread", &e))?;
        Ok(Journal {
            next_seq: last_seq + 1,
            batch: record::Batch::new(),
            claimed: 0,
            space,
            sealed: None,
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// The sequence number the batch being committed will have.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// After the batch's LMDB commit: numbers its records (if it has
    /// commands) from the next sequence number.
    pub(crate) fn seal(&mut self) {
        let claimed = std::mem::take(&mut self.claimed);
        if self.batch.is_empty() {
            // Claimed for commands whose transaction then failed.
            self.space.unclaim(claimed);
        } else {
            let records = self.batch.records();
            let empty = self.batch.emptied();
            let batch = std::mem::replace(&mut self.batch, empty);
            self.sealed = Some((batch, self.next_seq, claimed));
            self.next_seq += records;
        }
    }

    /// Hands the sealed batch and its answers to the journal thread.
    pub(crate) fn hand_over(&mut self, inner: &Inner, replies: Vec<Reply>) {
        let (records, claimed) = match self.sealed.take() {
            Some((batch, seq, claimed)) => (Some((batch, seq)), claimed),
            None => (None, 0),
        };
        let committed = Committed {
            records,
            claimed,
            replies,
        };
        let Some(sender) = &self.sender else { return };
        if let Err(lost) = sender.send(committed) {
            // The thread is gone (it panicked): nothing more is durable.
            let e = crate::writer::refuse(
                inner,
                &StoreError::Engine("the journal thread stopped".into()),
            );
            for (reply, mut answer) in lost.0.replies {
                answer.result = Err(e.clone());
                let _ = reply.send(answer);
            }
        }
    }

    /// A clean close: the thread answers what it holds, finishes the
    /// checkpoint, syncs LMDB and removes the marker.
    pub(crate) fn close(mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A journal that could not start for want of room (a store opened on a
/// full disk): the writer starts it before each batch, refusing the
/// batch while it still cannot, so the store opens, serves reads, and
/// takes writes once there is room, as in durable mode. Nothing is
/// committed meanwhile, so the database still holds exactly `last_seq`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deferred {
    last_seq: u64,
    checkpoint_bytes: u64,
    base_needed: bool,
}

impl Deferred {
    /// [`Journal::start`], and a [`Deferred`] in its place when the disk
    /// had no room for it.
    pub(crate) fn start_or_defer(
        inner: &Arc<Inner>,
        last_seq: u64,
        checkpoint_bytes: u64,
        base_needed: bool,
    ) -> Result<Result<Journal, Deferred>, StoreError> {
        let deferred = Deferred {
            last_seq,
            checkpoint_bytes,
            base_needed,
        };
        match Journal::start(inner, last_seq, checkpoint_bytes, base_needed) {
            Ok(journal) => Ok(Ok(journal)),
            Err(e) if is_full(&e) => {
                tracing::error!(
                    "the journal cannot start ({e}): writes are refused until space is freed, reads go on"
                );
                Ok(Err(deferred))
            }
            Err(e) => Err(e),
        }
    }

    /// Tries to start the journal now; a full disk's refusal if it
    /// still cannot, any other failure as it is.
    pub(crate) fn start(&self, inner: &Arc<Inner>) -> Result<Journal, StoreError> {
        Journal::start(
            inner,
            self.last_seq,
            self.checkpoint_bytes,
            self.base_needed,
        )
        .map_err(|e| {
            if is_full(&e) {
                StoreError::disk_full(&e)
            } else {
                e
            }
        })
    }
}

fn is_full(e: &StoreError) -> bool {
    matches!(e.errno(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// The journal thread's state.
struct Appender {
    inner: Arc<Inner>,
    space: Arc<Space>,
    dir: PathBuf,
    segment: File,
    segment_path: PathBuf,
    /// Journal bytes since the newest base (or the one being copied).
    since_base: u64,
    last_seq: u64,
    checkpoint_bytes: u64,
    checkpoint: Option<JoinHandle<Result<(), StoreError>>>,
    /// Set by the first failed append: later records would leave a hole,
    /// so nothing more is appended or acknowledged.
    failed: Option<StoreError>,
}

impl Appender {
    fn run(mut self, receiver: Receiver<Committed>) {
        let mut group: Vec<Committed> = Vec::with_capacity(AHEAD + 1);
        while let Ok(first) = receiver.recv() {
            // Every batch waiting goes out with one sync: while one sync
            // runs, the writer commits the next batches, and syncing them
            // one by one left it blocked on a full channel.
            group.push(first);
            group.extend(receiver.try_iter().take(AHEAD));
            let durable = match &self.failed {
                Some(e) => Err(e.clone()),
                None => self.append(&group),
            };
            for committed in group.drain(..) {
                for (reply, mut answer) in committed.replies {
                    if let Err(e) = &durable {
                        answer.result = Err(e.clone());
                    }
                    let _ = reply.send(answer);
                }
            }
            if self.failed.is_none() {
                // A checkpoint that cannot start (no room for a new
                // segment) loses nothing: the journal stays on its
                // segment, whose room covers every claim, and the next
                // group tries again.
                if let Err(e) = self.maybe_checkpoint() {
                    tracing::debug!("journal checkpoint postponed: {e}");
                }
            }
        }
        if let Err(e) = self.close() {
            tracing::error!("the journal was not closed cleanly (the next start recovers): {e}");
        }
    }

    /// Appends the records of `group`, in order, and syncs them once.
    fn append(&mut self, group: &[Committed]) -> Result<(), StoreError> {
        let mut records = 0;
        let mut written = Ok(0);
        let claimed: u64 = group.iter().map(|c| c.claimed).sum();
        for (batch, first_seq) in group.iter().filter_map(|c| c.records.as_ref()) {
            records += batch.records();
            written = written.and_then(|bytes| {
                let frames = batch.seal(*first_seq)?;
                self.segment
                    .write_all(&frames)
                    .map(|()| bytes + frames.len())
                    .map_err(|e| io_error("append to", &self.segment_path, &e))
            });
        }
        let written = written.and_then(|bytes| {
            if bytes > 0 {
                self.segment
                    .sync_data()
                    .map_err(|e| io_error("sync", &self.segment_path, &e))?;
            }
            Ok(bytes)
        });
        match written {
            Ok(bytes) => {
                self.since_base += bytes as u64;
                self.last_seq += records;
                self.space.appended(bytes as u64, claimed);
                Ok(())
            }
            Err(e) => {
                // Committed to LMDB but not durable (or, for a command
                // too large for a frame, not journaled): not acknowledged,
                // and no further write is taken (the journal would have a
                // hole).
                let e = crate::writer::refuse(&self.inner, &e);
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Starts a checkpoint when the journal has grown past its limit and
    /// the last one has finished: a new segment after the last record,
    /// and a copy of the database (which holds at least that record:
    /// LMDB commits before the journal appends) on a thread of its own.
    fn maybe_checkpoint(&mut self) -> Result<(), StoreError> {
        if self.since_base < self.checkpoint_bytes {
            return Ok(());
        }
        if self.checkpoint.as_ref().is_some_and(|c| !c.is_finished()) {
            return Ok(());
        }
        self.finish_checkpoint();
        let (segment, path) = open_segment(&self.dir, self.last_seq)?;
        if let Err(e) = self.space.move_to(&segment, path.clone()) {
            // An empty segment named after the last record would sort
            // before the records still to come in the old one.
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        self.segment = segment;
        self.segment_path = path;
        self.since_base = 0;
        let (inner, dir, at) = (Arc::clone(&self.inner), self.dir.clone(), self.last_seq);
        let handle = std::thread::Builder::new()
            .name("meridian-checkpoint".into())
            .spawn(move || checkpoint(&inner, &dir, at))
            .map_err(|e| StoreError::io("start", "a checkpoint thread", &e))?;
        self.checkpoint = Some(handle);
        Ok(())
    }

    /// Waits for the checkpoint under way. One that failed (a full disk,
    /// say) costs no data and stops no write: it removed nothing, so the
    /// older base and every segment since still cover the database, and
    /// the next checkpoint tries again.
    fn finish_checkpoint(&mut self) {
        let failure = match self.checkpoint.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => return,
            Some(Ok(Err(e))) => e.to_string(),
            Some(Err(_)) => "the checkpoint thread panicked".to_owned(),
        };
        tracing::error!(
            "journal checkpoint failed ({failure}); the journal grows until one succeeds"
        );
    }

    /// After the writer stopped: LMDB is synced, then the marker goes,
    /// so the next open trusts the database as it is. After a failed
    /// append the marker stays: the next open recovers.
    fn close(mut self) -> Result<(), StoreError> {
        self.finish_checkpoint();
        if let Some(e) = self.failed {
            return Err(e);
        }
        self.inner.env.force_sync()?;
        remove_marker(&self.dir)
    }
}
