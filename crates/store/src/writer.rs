//! The writer thread: group commit.
//!
//! It takes every job waiting (up to `storage.max_batch`), applies them
//! in one write transaction, commits once and only then answers every
//! job. A refused command fails alone and the others commit: commands
//! decide their refusals before their first write, and one that fails
//! after it is cut out of the batch ([`commit_commands`]). LMDB write
//! transactions must stay on the thread that began them (heed issue
//! 339): this thread is the only one that writes. In journal mode the commit is not synced; the batch's
//! record is appended to the journal and synced before the answers go out
//! (`journal/mod.rs`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use tokio::sync::mpsc;

use crate::apply::{self, Applied, Attempt, Context};
use crate::journal::{self, Journal, record::Batch};
use crate::{Answer, Command, Effect, Inner, Job, ReplicatedJob, StoreError, Work};

/// Largest map the writer grows to: beyond this a full map is a full disk
/// in practice, and writes are refused instead.
const MAX_MAP_BYTES: usize = 1 << 42;

pub(crate) fn run(
    inner: &Arc<Inner>,
    mut receiver: mpsc::Receiver<Work>,
    mut journal: Option<Journal>,
    mut deferred: Option<journal::Deferred>,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(inner.max_batch);
    // A replicated batch met while gathering clients' jobs: the next work.
    let mut held: Option<Work> = None;
    loop {
        let Some(first) = held.take().or_else(|| receiver.blocking_recv()) else {
            break;
        };
        let first = match first {
            Work::Client(job) => job,
            Work::Replicated(job) => {
                apply_replicated(inner, job);
                continue;
            }
            Work::Install(job) => {
                crate::replicated::install(inner, job);
                continue;
            }
            Work::MakeRoom(bytes, reply) => {
                let _ = reply.send(make_room(inner, bytes));
                continue;
            }
        };
        batch.push(first);
        while batch.len() < inner.max_batch {
            match receiver.try_recv() {
                Ok(Work::Client(job)) => batch.push(job),
                Ok(replicated) => {
                    held = Some(replicated);
                    break;
                }
                Err(_) => break,
            }
        }
        // A journal the full disk kept from starting: started now, or
        // this batch is refused (and the next one tries again).
        let results = match deferred.map(|d| d.start(inner)) {
            Some(Err(e)) => {
                if !matches!(e, StoreError::WritesRefused(_)) {
                    refuse(inner, &e);
                }
                all(&batch, &e)
            }
            started => {
                if let Some(Ok(started)) = started {
                    tracing::warn!("the journal started: writes are taken again");
                    journal = Some(started);
                    deferred = None;
                }
                commit_batch(inner, &batch, journal.as_mut())
            }
        };
        let answered = batch.drain(..).zip(results);
        match journal.as_mut() {
            // Answered by the journal thread once the batch is durable.
            Some(journal) => {
                let replies = answered
                    .map(|(job, result)| {
                        let spent = Some(job.command);
                        (job.reply, Answer { result, spent })
                    })
                    .collect();
                journal.hand_over(inner, replies);
            }
            None => {
                for (job, result) in answered {
                    // A caller that went away does not need its answer.
                    let spent = Some(job.command);
                    let _ = job.reply.send(Answer { result, spent });
                }
            }
        }
    }
    if let Some(journal) = journal {
        journal.close();
    }
    if crate::replicated::Running::is_replicated(inner.env.path()) {
        // A clean close of a replicated store: synced, then the marker
        // goes (a machine crash after this loses nothing).
        match inner.env.force_sync() {
            Ok(()) => crate::replicated::Running::end(inner.env.path()),
            Err(e) => tracing::error!("syncing the replica's database at close: {e}"),
        }
    }
    if inner.map_file.is_some() {
        shrink(inner);
    }
    tracing::debug!("writer thread stopped");
}

/// Latches the store read-only after an I/O failure other than a full
/// disk (a failing disk: EIO), logged once.
pub(crate) fn refuse(inner: &Inner, e: &StoreError) -> StoreError {
    let what = if e.errno() == Some(libc::EIO) {
        "an I/O error (EIO)"
    } else {
        "a storage failure"
    };
    let message = format!("{what} stopped writes until restart: {e}");
    tracing::error!("{message}");
    *inner.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(message.clone());
    StoreError::WritesRefused(message)
}

/// A failed transaction's error for its commands: a full disk refuses
/// this batch only (the next one tries again; the log says when writes
/// stop and when they resume), anything else stops writes ([`refuse`]).
pub(crate) fn settle_failure(inner: &Inner, e: StoreError) -> StoreError {
    if !is_disk_full(&e, inner) {
        return match e {
            // Refusals made already (a map that may not grow further).
            StoreError::WritesRefused(_) => e,
            other => refuse(inner, &other),
        };
    }
    let refused = StoreError::disk_full(&e);
    if !inner.disk_full.swap(true, Ordering::Relaxed) {
        tracing::error!("disk full: {refused}");
    }
    refused
}

/// After a commit: if writes were refused for a full disk, they resume.
fn note_commit(inner: &Inner) {
    if inner.disk_full.swap(false, Ordering::Relaxed) {
        tracing::warn!("disk space is available again: writes resume");
    }
}

/// Replays one journal record at open, before the writer thread starts:
/// the same transaction as a live batch, and every command must succeed
/// again (it did when it was journaled; the store is deterministic).
pub(crate) fn replay(inner: &Inner, seq: u64, commands: &[Command]) -> Result<(), StoreError> {
    let commands: Vec<&Command> = commands.iter().collect();
    let results = commit_commands(inner, &commands, Journaling::Replay { seq });
    for result in results {
        if let Err(e) = result {
            return Err(StoreError::Corrupt(format!(
                "journal record {seq} does not replay ({e}): the journal and the database disagree"
            )));
        }
    }
    Ok(())
}

/// Applies the commands of replicated log entries (`replicated.rs`) in
/// one transaction that also records `marker`, the replication layer's
/// note of what is applied: a crash leaves either all of it or none.
/// A command that fails after its first write is left out and the
/// transaction tried again without it (never split, as
/// [`commit_commands`] does, which would record the marker with part of
/// the entries). A failure of the transaction itself (a full disk, an
/// I/O error) is no command's result: it is the caller's, which must
/// not go on applying the log past it.
fn apply_replicated(inner: &Inner, job: ReplicatedJob) {
    let ReplicatedJob {
        commands,
        marker,
        reply,
    } = job;
    let answer =
        commit_replicated(inner, &commands, &marker).map(|results| crate::replicated::Applied {
            results,
            spent: commands,
        });
    // A caller that went away does not need its answer.
    let _ = reply.send(answer);
}

fn commit_replicated(
    inner: &Inner,
    commands: &[Command],
    marker: &[u8],
) -> Result<Vec<Result<Effect, StoreError>>, StoreError> {
    if let Some(message) = refused(inner) {
        return Err(StoreError::WritesRefused(message));
    }
    // Commands that spoiled a transaction, by position, and why.
    let mut left_out: Vec<(usize, StoreError)> = Vec::new();
    loop {
        let kept: Vec<(usize, &Command)> = commands
            .iter()
            .enumerate()
            .filter(|(at, _)| !left_out.iter().any(|(out, _)| out == at))
            .collect();
        let refs: Vec<&Command> = kept.iter().map(|(_, command)| *command).collect();
        match commit_once(inner, &refs, &mut Journaling::Replicated { marker }) {
            Ok(done) => {
                let mut done = done.into_iter();
                let mut results = Vec::with_capacity(commands.len());
                for at in 0..commands.len() {
                    match left_out.iter().position(|(out, _)| *out == at) {
                        Some(i) => results.push(Err(left_out.swap_remove(i).1)),
                        None => results.push(done.next().ok_or_else(|| {
                            StoreError::internal("a replicated batch lost a result")
                        })?),
                    }
                }
                return Ok(results);
            }
            Err(Failure::Spoiled { at, error }) => {
                let original = kept
                    .get(at)
                    .map(|(original, _)| *original)
                    .ok_or_else(|| StoreError::internal("a spoiled command outside its batch"))?;
                left_out.push((original, error));
            }
            Err(Failure::Batch(StoreError::MapFull)) => {
                grow(inner).map_err(|e| settle_failure(inner, e))?
            }
            Err(Failure::Batch(e)) => return Err(settle_failure(inner, e)),
        }
    }
}

/// What a batch's transaction does about the journal.
enum Journaling<'a> {
    Off,
    /// Replicated log entries: the transaction records `marker`.
    Replicated {
        marker: &'a [u8],
    },
    /// A live batch: its applied commands go into `batch`, and the
    /// transaction records `seq` as applied if there are any.
    Live {
        batch: &'a mut Batch,
        seq: u64,
        /// Room in the journal, claimed before the commit (`space.rs`).
        space: &'a journal::Space,
        /// What is claimed for `batch` so far.
        claimed: &'a mut u64,
    },
    /// A replayed record: the transaction records `seq` as applied.
    Replay {
        seq: u64,
    },
}

fn refused(inner: &Inner) -> Option<String> {
    inner
        .refused
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn all(batch: &[Job], error: &StoreError) -> Vec<Result<Effect, StoreError>> {
    batch.iter().map(|_| Err(error.clone())).collect()
}

fn commit_batch(
    inner: &Inner,
    batch: &[Job],
    journal: Option<&mut Journal>,
) -> Vec<Result<Effect, StoreError>> {
    if let Some(message) = refused(inner) {
        return all(batch, &StoreError::WritesRefused(message));
    }
    let commands: Vec<&Command> = batch.iter().map(|job| &job.command).collect();
    let Some(journal) = journal else {
        return commit_commands(inner, &commands, Journaling::Off);
    };
    let seq = journal.next_seq();
    let results = commit_commands(
        inner,
        &commands,
        Journaling::Live {
            batch: &mut journal.batch,
            seq,
            space: &journal.space,
            claimed: &mut journal.claimed,
        },
    );
    // Whatever committed is journaled, even if a later part of the
    // batch failed.
    journal.seal();
    results
}

/// Applies `commands` and commits, growing the map when it is full: in
/// one transaction, unless a command fails after it began to write
/// ([`apply::Applied::Spoiled`]). Then the transaction is given up, the
/// commands before that one are applied again in a new one and
/// committed, it fails alone, and the rest go on in another. Applying is
/// deterministic, so the commands before it answer as they did the first
/// time; each such failure costs one more transaction, and work at most
/// twice the batch's. A failure of a whole transaction fails every
/// command not yet committed.
fn commit_commands(
    inner: &Inner,
    commands: &[&Command],
    mut journaling: Journaling<'_>,
) -> Vec<Result<Effect, StoreError>> {
    let mut results = Vec::with_capacity(commands.len());
    let mut rest = commands;
    // A command of `rest` that spoiled a transaction: its position, why.
    let mut spoiled: Option<(usize, StoreError)> = None;
    while !rest.is_empty() {
        let end = spoiled.as_ref().map_or(rest.len(), |(at, _)| *at);
        let attempt = match rest.get(..end) {
            Some(before) if !before.is_empty() => commit_once(inner, before, &mut journaling),
            _ => Ok(Vec::new()),
        };
        let failure = match attempt {
            Ok(done) => {
                results.extend(done);
                match spoiled.take() {
                    Some((at, e)) => {
                        results.push(Err(e));
                        rest = rest.get(at + 1..).unwrap_or_default();
                    }
                    None => rest = &[],
                }
                continue;
            }
            // An earlier command this time (the engine failing anew):
            // the later one is applied again after it.
            Err(Failure::Spoiled { at, error }) => {
                tracing::debug!(
                    "a command failed after its first write ({error}); the commands before it are committed without it"
                );
                spoiled = Some((at, error));
                continue;
            }
            Err(Failure::Batch(StoreError::MapFull)) => match grow(inner) {
                Ok(()) => continue,
                Err(e) => settle_failure(inner, e),
            },
            Err(Failure::Batch(e)) => settle_failure(inner, e),
        };
        results.extend(rest.iter().map(|_| Err(failure.clone())));
        break;
    }
    results
}

/// One transaction of [`commit_commands`]: `commands` applied, committed.
fn commit_once(
    inner: &Inner,
    commands: &[&Command],
    journaling: &mut Journaling<'_>,
) -> Result<Vec<Result<Effect, StoreError>>, Failure> {
    let attempt = Attempt::new(
        inner,
        std::mem::take(&mut *inner.dn_ids.lock().unwrap_or_else(PoisonError::into_inner)),
    );
    let ctx = attempt.context(inner);
    let mark = match journaling {
        Journaling::Live { batch, .. } => Some(batch.mark()),
        _ => None,
    };
    // A measurement for the metrics, never stored.
    #[allow(clippy::disallowed_methods)]
    let began = std::time::Instant::now();
    let committed = try_commit(inner, &ctx, commands, journaling);
    match (&committed, journaling, mark) {
        (Ok(_), _, _) => {
            inner.commits.fetch_add(1, Ordering::Relaxed);
            #[allow(clippy::disallowed_methods)]
            let took = began.elapsed();
            inner.stats.transaction_seconds.observe_duration(took);
            inner.stats.batch_commands.observe(commands.len() as f64);
            note_commit(inner);
            if let Some(table) = attempt.names.committed(&inner.schema) {
                inner.publish_names(table);
            }
        }
        (Err(_), Journaling::Live { batch, .. }, Some(mark)) => batch.roll_back(mark),
        (Err(_), _, _) => {}
    }
    // Kept whether or not the attempt committed: what it learned are
    // guesses, each checked before it is used.
    *inner.dn_ids.lock().unwrap_or_else(PoisonError::into_inner) = attempt.dn_ids.into_inner();
    committed
}

/// Free space below which a failed write is taken for a full disk.
const DISK_FULL_BYTES: u64 = 16 << 20;

/// ENOSPC, or an EIO on a file system with (almost) no space left: LMDB
/// reports a short write as EIO, which is what a full disk produces.
/// Told by the error's number, never its text.
fn is_disk_full(e: &StoreError, inner: &Inner) -> bool {
    match e.errno() {
        Some(libc::ENOSPC) => true,
        Some(libc::EIO) => {
            crate::private::free_bytes(inner.env.path()).is_some_and(|free| free < DISK_FULL_BYTES)
        }
        _ => false,
    }
}

/// Why a transaction was given up.
enum Failure {
    /// The transaction failed as a whole.
    Batch(StoreError),
    /// The command at `at` failed after it began to write: its part
    /// stays in the transaction, which no other command can commit with.
    Spoiled { at: usize, error: StoreError },
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Batch(e)
    }
}

impl From<heed::Error> for Failure {
    fn from(e: heed::Error) -> Self {
        Failure::Batch(e.into())
    }
}

/// Applies `commands` in one transaction and commits. `Err` for a
/// failure of the whole transaction or a command that spoiled it; each
/// refusal is in the returned list.
fn try_commit(
    inner: &Inner,
    ctx: &Context<'_>,
    commands: &[&Command],
    journaling: &mut Journaling<'_>,
) -> Result<Vec<Result<Effect, StoreError>>, Failure> {
    let mut wtxn = inner.env.write_txn()?;
    let mut results = Vec::with_capacity(commands.len());
    for (at, &command) in commands.iter().enumerate() {
        if !command.is_add() {
            ctx.write_pending_index(&mut wtxn)?;
        }
        match apply::apply(&mut wtxn, ctx, command) {
            Applied::Done(outcome) => {
                if let Journaling::Live { batch, .. } = journaling {
                    batch.push(command, ctx.schema);
                }
                results.push(Ok(outcome));
            }
            Applied::Refused(refusal) => results.push(Err(refusal)),
            // The whole transaction must be tried again in a bigger map.
            Applied::Spoiled(StoreError::MapFull) => return Err(StoreError::MapFull.into()),
            Applied::Spoiled(error) => return Err(Failure::Spoiled { at, error }),
        }
    }
    ctx.write_pending_index(&mut wtxn)?;
    if let Journaling::Live {
        batch,
        space,
        claimed,
        ..
    } = journaling
    {
        // The journal's room for these records, before LMDB has them:
        // if the disk has none, nothing is committed (`space.rs`).
        let bound = batch.framed_bound();
        if bound > **claimed {
            space.claim(bound - **claimed)?;
            **claimed = bound;
        }
    }
    if let Journaling::Replicated { marker } = journaling {
        ctx.dbs
            .meta
            .put(&mut wtxn, crate::replicated::APPLIED_MARKER, marker)?;
    }
    let applied = match journaling {
        Journaling::Off | Journaling::Replicated { .. } => None,
        Journaling::Live { batch, seq, .. } => {
            (!batch.is_empty()).then(|| *seq + batch.records() - 1)
        }
        Journaling::Replay { seq } => Some(*seq),
    };
    if let Some(seq) = applied {
        ctx.dbs
            .meta
            .put(&mut wtxn, journal::APPLIED_SEQ, &seq.to_be_bytes())?;
    }
    // Logged before the commit makes the changes visible: a search that
    // sees them finds them in the log (`columns.rs`).
    if inner.columns.enabled() {
        inner.columns.log(wtxn.id() as u64, ctx.take_touched());
    }
    let changes = ctx.take_changes();
    wtxn.commit()?;
    if !changes.is_empty() {
        let csn_type = ctx.schema.entry_csn_attr();
        let csns: Vec<&[u8]> = commands
            .iter()
            .zip(&results)
            .filter(|(_, result)| result.is_ok())
            .filter_map(|(command, _)| csn_type.and_then(|t| command.entry_csn(t)))
            .collect();
        inner.feed.publish(changes, &csns);
    }
    let builds = |r: &Result<Effect, StoreError>| {
        matches!(
            r,
            Ok(Effect::Reindexed(_) | Effect::IndexesBuilt { complete: true, .. })
        )
    };
    if results.iter().any(builds) {
        inner.indexes.mark_all_built();
    }
    Ok(results)
}

/// At close, gives back the room a writable map allocated beyond the
/// data: LMDB cuts the file to the new map, so a closed database takes
/// its data's size on disk. Only the free tail goes: every page in use
/// is below the data's size, which the map never goes under.
fn shrink(inner: &Inner) {
    let _exclusive = inner.resize.write().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: no transaction of this process is open: the writer's loop
    // has ended, and readers hold the resize lock shared for the lifetime
    // of theirs, which we now hold exclusively. LMDB raises the size to
    // that of the data.
    #[allow(unsafe_code)]
    if let Err(e) = unsafe { inner.env.resize(crate::page_size()) } {
        tracing::warn!("the database file keeps its allocated room: {e}");
    }
}

/// Grows the map until `bytes` are free past its last page (at most a
/// few steps: each is a quarter of the map, or more).
fn make_room(inner: &Inner, bytes: u64) -> Result<(), StoreError> {
    for _ in 0..8 {
        let map = inner.map_use();
        if map.size.saturating_sub(map.used) >= bytes {
            return Ok(());
        }
        grow(inner)?;
    }
    Ok(())
}

/// Grows the map: doubles it, or for a writable map, allocates a step
/// of the file first and grows into that (`map_file.rs`). Waits for
/// readers to finish their snapshots: LMDB allows a resize only with no
/// transaction open in this process.
pub(crate) fn grow(inner: &Inner) -> Result<(), StoreError> {
    let current = inner.env.info().map_size;
    let next = match &inner.map_file {
        Some(file) => usize::try_from(file.grow_from(current as u64)?).unwrap_or(usize::MAX),
        None => current.saturating_mul(2),
    };
    if next > MAX_MAP_BYTES {
        return Err(StoreError::WritesRefused(format!(
            "the database map is full at {current} bytes and may not grow further"
        )));
    }
    let _exclusive = inner.resize.write().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: no transaction of this process is open: the writer holds
    // none between batches, and readers hold the resize lock shared for
    // the lifetime of theirs, which we now hold exclusively.
    #[allow(unsafe_code)]
    unsafe { inner.env.resize(next) }?;
    tracing::info!(from = current, to = next, "database map grown");
    Ok(())
}
