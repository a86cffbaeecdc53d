//! The Raft log on disk: the durability point of a cluster's writes.
//!
//! Two files in `<data_dir>/raft/`:
//!
//! ```text
//! log     entries, one frame each: length (u32 LE), CRC-32C (u32 LE), postcard
//! state   vote, committed and purged log IDs: one frame, replaced atomically
//! ```
//!
//! An append writes its entries' frames and fdatasyncs once before
//! openraft is told they are durable: one sync per batch of entries,
//! whatever their number. A torn frame at the end (a crash mid-write) is
//! cut off at open; it was never reported durable.
//!
//! Appends overwrite zeros written ahead of them. An append that grew
//! the file would change its size and allocate blocks, so its
//! fdatasync would also write the inode (and on a journaled file system
//! commit the journal, which in ext4's `data=ordered` first writes every
//! other file's newly allocated data); an append into blocks already
//! written and synced needs only its own data and a cache flush. So a thread of its own keeps [`PREPARE_CHUNK`] or so of
//! zeros, written and synced, past the last frame ([`prepare_ahead`]),
//! while the disk has room to spare ([`PREPARE_MIN_FREE`]).
//! A frame is never empty, so the first zero length read ends the log.
//!
//! Every entry not yet purged is also kept in memory, in order, for the
//! leader's replication streams: the log is purged behind each snapshot
//! (`state_machine.rs`), which bounds it. A purge that leaves most of the
//! file dead rewrites the file with the live entries (written beside it,
//! synced, renamed over it).

use std::collections::VecDeque;
use std::fmt::Debug;
use std::fs::{self, File};
use std::io::{self, Read};
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use openraft::storage::IOFlushed;
use openraft::storage::RaftLogStorage;
use openraft::{LogState, RaftLogReader};
use serde::{Deserialize, Serialize};

use crate::types::{Entry, LogId, Meridian, Vote};

/// Bytes of a frame's header: length and checksum.
const FRAME_HEADER: usize = 8;
/// The largest entry a frame may hold (a batch of commands; bounded by
/// `storage.max_batch` commands well below this).
const MAX_FRAME: usize = 1 << 30;
/// Dead bytes at the front of the log file above which a purge rewrites it.
const REWRITE_DEAD_BYTES: u64 = 64 << 20;
/// Zeros written ahead of the appends at a time: at 100,000 modifies a
/// second (about 30 MB/s of log) one preparation a quarter second.
const PREPARE_CHUNK: u64 = 8 << 20;
/// Zeros left ahead of the appends below which the next chunk is
/// prepared: the preparation has this much appending to finish in
/// before an append waits for it.
const PREPARE_LOW_WATER: u64 = PREPARE_CHUNK / 2;
/// Free bytes the file system must have for a chunk of zeros to be
/// prepared: zeros may not take the last room on the disk, where the
/// vote (`state`, replaced whole) and the database must still be
/// written. Below it appends grow the file, as without zeros.
const PREPARE_MIN_FREE: u64 = 4 * PREPARE_CHUNK;
/// What zeros are written from.
static ZEROS: [u8; 1 << 16] = [0; 1 << 16];

/// The log store; clones share it.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

struct Shared {
    dir: PathBuf,
    /// Bytes of live (unpurged) entries in the file, for the snapshot
    /// trigger (`lib.rs`).
    live_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The file, held while it is written (appends, truncations, rewrites).
    file: Mutex<LogFile>,
    /// Signalled when a preparation of zeros ends.
    prepared: Condvar,
    /// What readers see: held briefly, never across I/O.
    memory: Mutex<Memory>,
}

struct LogFile {
    file: File,
    /// Where the next frame goes: the end of the last whole one.
    len: u64,
    /// Bytes before the first live entry (purged ones).
    dead: u64,
    /// The end of the zeros after `len`, written and synced (`len` when
    /// there are none). Beyond it the file may hold zeros a preparation
    /// is writing, or that a failed one left: never a frame.
    zeroed: u64,
    /// The generation of the file a preparation is writing zeros to,
    /// from `zeroed` on: appends to that file do not go past `zeroed`
    /// until it ends.
    preparing: Option<u64>,
    /// No preparation is started before `len` reaches this (after one
    /// failed: a full disk is not filled with zeros again per append).
    prepare_after: u64,
    /// Counts rewrites of the file: zeros prepared in an older file do
    /// not count.
    generation: u64,
}

#[derive(Default)]
struct Memory {
    /// Live entries in index order, each with the file offset where its
    /// frame ends.
    entries: VecDeque<(Entry, u64)>,
    state: State,
}

/// What `state` holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

impl Shared {
    fn note_live(&self, file: &LogFile) {
        self.live_bytes.store(
            file.len.saturating_sub(file.dead),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn corrupt(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Runs file work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("the log's I/O task failed: {e}")))?
}

/// One frame around `payload`.
fn put_frame(out: &mut Vec<u8>, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|len| (*len as usize) <= MAX_FRAME)
        .ok_or_else(|| corrupt(format!("a log entry of {} bytes", payload.len())))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// The frames of `bytes` from the start: each payload and the offset
/// where its frame ends, and the length of the whole frames read (a
/// torn or damaged tail is left out; the caller tells which).
fn read_frames(bytes: &[u8]) -> (Vec<(&[u8], u64)>, usize) {
    let mut frames = Vec::new();
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at + FRAME_HEADER) {
        let word = |i: usize| {
            header
                .get(i..i + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes)
        };
        let (Some(len), Some(crc)) = (word(0), word(4)) else {
            break;
        };
        if len == 0 {
            // Zeros: the end (no frame is empty).
            break;
        }
        let start = at + FRAME_HEADER;
        let Some(payload) = bytes.get(start..start + len as usize) else {
            break;
        };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        at = start + len as usize;
        frames.push((payload, at as u64));
    }
    (frames, at)
}

/// The offset in `tail` (bytes after a damaged or torn frame) of the
/// first whole frame that holds a log entry, if any.
///
/// An interrupted append leaves part of its frames and then zeros (or
/// what the file held before, past its end); a whole frame with a valid
/// checksum and an entry inside after the damage means the damage is in
/// the middle of the log. Every offset is tried, since the damage may
/// have changed a frame's length.
fn whole_frame_in(tail: &[u8]) -> Option<usize> {
    (1..tail.len()).find(|&at| {
        let Some(rest) = tail.get(at..) else {
            return false;
        };
        let (frames, _) = read_frames(rest);
        frames
            .first()
            .is_some_and(|(payload, _)| postcard::from_bytes::<Entry>(payload).is_ok())
    })
}

fn encode_entry(entry: &Entry, out: &mut Vec<u8>) -> io::Result<()> {
    let payload =
        postcard::to_stdvec(entry).map_err(|e| corrupt(format!("encoding a log entry: {e}")))?;
    put_frame(out, &payload)
}

impl LogFile {
    /// No zeros prepared before another chunk of log is appended (the
    /// disk had too little room, or a preparation failed): appends grow
    /// the file meanwhile.
    fn postpone_preparation(&mut self) {
        self.prepare_after = self.len + PREPARE_CHUNK;
    }
}

/// Writes zeros over `from..to` of `file`.
fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZEROS.len() as u64);
        file.write_all_at(ZEROS.get(..n as usize).unwrap_or_default(), at)?;
        at += n;
    }
    Ok(())
}

/// Starts writing the next [`PREPARE_CHUNK`] of zeros past the last
/// frame, on a thread of its own, when fewer than [`PREPARE_LOW_WATER`]
/// are left and no preparation runs. The zeros are synced before
/// appends may use them.
fn prepare_ahead(shared: &Arc<Shared>, file: &mut LogFile) {
    if file.preparing.is_some()
        || file.len < file.prepare_after
        || file.zeroed - file.len >= PREPARE_LOW_WATER
    {
        return;
    }
    if meridian_store::private::free_bytes(&shared.dir).is_some_and(|free| free < PREPARE_MIN_FREE)
    {
        tracing::debug!(
            "little room on the raft log's disk: no zeros prepared; looked at again after {PREPARE_CHUNK} bytes of log"
        );
        file.postpone_preparation();
        return;
    }
    let target = match file.file.try_clone() {
        Ok(target) => target,
        Err(e) => {
            tracing::warn!("cannot prepare the raft log's next zeros: {e}");
            return;
        }
    };
    let from = file.zeroed;
    let generation = file.generation;
    file.preparing = Some(generation);
    let owner = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("meridian-raft-log-zeros".into())
        .spawn(move || {
            let to = from + PREPARE_CHUNK;
            let written = write_zeros(&target, from, to).and_then(|()| target.sync_data());
            let mut file = lock(&owner.file);
            file.preparing = None;
            match written {
                // Zeros written to a file since replaced are not this one's.
                Ok(()) if file.generation == generation => file.zeroed = file.zeroed.max(to),
                Ok(()) => {}
                Err(e) => {
                    // Appends grow the file instead, as without zeros.
                    tracing::warn!(
                        "cannot prepare the raft log's next zeros: {e}; tried again after {PREPARE_CHUNK} bytes of log"
                    );
                    file.postpone_preparation();
                }
            }
            owner.prepared.notify_all();
        });
    if let Err(e) = spawned {
        file.preparing = None;
        tracing::warn!("cannot start the raft log's preparation of zeros: {e}");
    }
}

impl LogStore {
    /// Opens (creating) the log in `dir`.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        meridian_store::private::create_dir(dir)?;
        let state = read_state(&dir.join("state"))?;
        let path = dir.join("log");
        let mut file = meridian_store::private::open_read_write(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (frames, whole) = read_frames(&bytes);
        let tail = bytes.get(whole..).unwrap_or_default();
        let zeroed = if tail.iter().all(|b| *b == 0) {
            bytes.len()
        } else {
            // Damage with whole entries after it is not an interrupted
            // append: those entries were reported durable, and cutting
            // the log there would drop them without a word.
            if let Some(after) = whole_frame_in(tail) {
                return Err(corrupt(format!(
                    "the raft log {} is damaged at byte {whole}, and a whole entry follows at byte {}: entries acknowledged to clients may be among those after the damage, so this node does not start. Rebuild it from the others: stop it, move its data directory aside, `meridian cluster remove` it, then start it empty and `add-learner` and `promote` it (docs/design/replication.md)",
                    path.display(),
                    whole + after
                )));
            }
            // A crash in the middle of an append: that append was never
            // reported durable.
            tracing::warn!(
                bytes = tail.len(),
                "the raft log ends in a partial entry (an interrupted append): cut off"
            );
            file.set_len(whole as u64)?;
            file.sync_data()?;
            whole
        };
        let purged = state.purged.as_ref().map(|id| id.index);
        let mut entries: VecDeque<(Entry, u64)> = VecDeque::with_capacity(frames.len());
        let mut dead = 0;
        for (payload, end) in frames {
            let entry: Entry = postcard::from_bytes(payload)
                .map_err(|e| corrupt(format!("a raft log entry does not decode: {e}")))?;
            if purged.is_some_and(|purged| entry.log_id.index <= purged) {
                dead = end;
                continue;
            }
            if let Some((last, _)) = entries.back()
                && entry.log_id.index != last.log_id.index + 1
            {
                return Err(corrupt(format!(
                    "the raft log skips from index {} to {}",
                    last.log_id.index, entry.log_id.index
                )));
            }
            entries.push_back((entry, end));
        }
        Ok(LogStore {
            shared: Arc::new(Shared {
                live_bytes: Arc::new(std::sync::atomic::AtomicU64::new(whole as u64 - dead)),
                dir: dir.to_path_buf(),
                file: Mutex::new(LogFile {
                    file,
                    len: whole as u64,
                    dead,
                    zeroed: zeroed as u64,
                    preparing: None,
                    prepare_after: 0,
                    generation: 0,
                }),
                prepared: Condvar::new(),
                memory: Mutex::new(Memory { entries, state }),
            }),
        })
    }

    /// Nothing is here: no entry, none purged, no vote.
    pub fn is_empty(&self) -> bool {
        let memory = lock(&self.shared.memory);
        memory.entries.is_empty() && memory.state.purged.is_none() && memory.state.vote.is_none()
    }

    /// Bytes of the entries not yet purged, kept current.
    pub fn live_bytes(&self) -> Arc<std::sync::atomic::AtomicU64> {
        Arc::clone(&self.shared.live_bytes)
    }

    fn entries_in(&self, range: impl RangeBounds<u64>) -> Vec<Entry> {
        let memory = lock(&self.shared.memory);
        let Some(first) = memory.entries.front().map(|(e, _)| e.log_id.index) else {
            return Vec::new();
        };
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => first,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        let skip = usize::try_from(start.saturating_sub(first)).unwrap_or(usize::MAX);
        let take = usize::try_from(end.saturating_sub(start.max(first))).unwrap_or(usize::MAX);
        memory
            .entries
            .iter()
            .skip(skip)
            .take(take)
            .map(|(entry, _)| entry.clone())
            .collect()
    }

    /// Saves the state file with `change` made to it.
    async fn save_state(&self, change: impl FnOnce(&mut State)) -> io::Result<()> {
        let state = {
            let mut memory = lock(&self.shared.memory);
            change(&mut memory.state);
            memory.state.clone()
        };
        let path = self.shared.dir.join("state");
        let shared = Arc::clone(&self.shared);
        blocking(move || {
            // One writer of the file at a time, in call order.
            let _file = lock(&shared.file);
            write_state(&path, &state)
        })
        .await
    }
}

fn read_state(path: &Path) -> io::Result<State> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
        Err(e) => return Err(e),
    };
    let (frames, whole) = read_frames(&bytes);
    match frames.as_slice() {
        [(payload, _)] if whole == bytes.len() => postcard::from_bytes(payload)
            .map_err(|e| corrupt(format!("{} does not decode: {e}", path.display()))),
        _ => Err(corrupt(format!("{} is damaged", path.display()))),
    }
}

fn write_state(path: &Path, state: &State) -> io::Result<()> {
    let payload =
        postcard::to_stdvec(state).map_err(|e| corrupt(format!("encoding the raft state: {e}")))?;
    let mut bytes = Vec::with_capacity(payload.len() + FRAME_HEADER);
    put_frame(&mut bytes, &payload)?;
    meridian_store::private::replace_file(path, &bytes)
}

impl RaftLogReader<Meridian> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        Ok(self.entries_in(range))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(lock(&self.shared.memory).state.vote)
    }
}

impl RaftLogStorage<Meridian> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<Meridian>, io::Error> {
        let memory = lock(&self.shared.memory);
        let purged = memory.state.purged;
        let last = memory
            .entries
            .back()
            .map(|(entry, _)| entry.log_id)
            .or(purged);
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let vote = *vote;
        self.save_state(|state| state.vote = Some(vote)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        // Not synced on its own: a committed index lost in a crash is
        // learned again from the leader, and applied state carries its own.
        lock(&self.shared.memory).state.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(lock(&self.shared.memory).state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<Meridian>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(entries.len());
        for entry in &entries {
            encode_entry(entry, &mut bytes)?;
            ends.push(bytes.len() as u64);
        }
        let shared = Arc::clone(&self.shared);
        let result = blocking(move || {
            let mut file = lock(&shared.file);
            let base = file.len;
            let end = base + bytes.len() as u64;
            // Zeros are being written past `zeroed`: not over this
            // append's frames (only when appends outran the preparation).
            while file.preparing == Some(file.generation) && end > file.zeroed {
                file = shared
                    .prepared
                    .wait(file)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            {
                // In memory first: openraft may read entries it submitted
                // before they are flushed (to replicate them meanwhile).
                let mut memory = lock(&shared.memory);
                for (entry, end) in entries.into_iter().zip(ends) {
                    memory.entries.push_back((entry, base + end));
                }
            }
            file.file.write_all_at(&bytes, base)?;
            file.file.sync_data()?;
            file.len = end;
            file.zeroed = file.zeroed.max(end);
            shared.note_live(&file);
            prepare_ahead(&shared, &mut file);
            Ok(())
        })
        .await;
        match result {
            Ok(()) => {
                callback.io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                tracing::error!("appending to the raft log failed: {e}");
                callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(e)
            }
        }
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let keep_through = last_log_id.map(|id| id.index);
        let shared = Arc::clone(&self.shared);
        blocking(move || {
            let mut file = lock(&shared.file);
            let cut = {
                let mut memory = lock(&shared.memory);
                let mut cut = None;
                while let Some((entry, _)) = memory.entries.back() {
                    if keep_through.is_some_and(|keep| entry.log_id.index <= keep) {
                        break;
                    }
                    memory.entries.pop_back();
                    cut = Some(memory.entries.back().map_or(file.dead, |(_, end)| *end));
                }
                cut
            };
            if let Some(cut) = cut {
                // Zeros over the frames cut, as ahead of every append.
                write_zeros(&file.file, cut, file.len)?;
                file.file.sync_data()?;
                file.len = cut;
                shared.note_live(&file);
            }
            Ok(())
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        tracing::debug!(%log_id, "purging the raft log");
        let index = log_id.index;
        self.save_state(|state| state.purged = Some(log_id)).await?;
        let shared = Arc::clone(&self.shared);
        blocking(move || {
            let mut file = lock(&shared.file);
            let live = {
                let mut memory = lock(&shared.memory);
                while memory
                    .entries
                    .front()
                    .is_some_and(|(entry, _)| entry.log_id.index <= index)
                {
                    if let Some((_, end)) = memory.entries.pop_front() {
                        file.dead = end;
                    }
                }
                let live = file.len - file.dead;
                shared.note_live(&file);
                if file.dead < REWRITE_DEAD_BYTES || file.dead < live {
                    return Ok(());
                }
                // Rewritten under both locks: offsets change.
                let mut bytes = Vec::with_capacity(usize::try_from(live).unwrap_or(0));
                for (entry, end) in memory.entries.iter_mut() {
                    encode_entry(entry, &mut bytes)?;
                    *end = bytes.len() as u64;
                }
                bytes
            };
            let path = shared.dir.join("log");
            meridian_store::private::replace_file(&path, &live)?;
            file.file = meridian_store::private::open_read_write(&path)?;
            file.len = live.len() as u64;
            file.dead = 0;
            file.zeroed = file.len;
            file.prepare_after = 0;
            file.generation += 1;
            shared.note_live(&file);
            prepare_ahead(&shared, &mut file);
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

    use super::*;
    use openraft::testing::blank_ent;
    use std::fs::OpenOptions;

    fn dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("meridian-log-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn entries(range: std::ops::Range<u64>) -> Vec<Entry> {
        range.map(|i| blank_ent::<Meridian>(1, 1, i)).collect()
    }

    async fn append(log: &mut LogStore, entries: Vec<Entry>) {
        use openraft::type_config::TypeConfigExt;
        let (tx, rx) = Meridian::oneshot();
        log.append(entries, IOFlushed::signal(tx)).await.unwrap();
        rx.await.unwrap().unwrap();
    }

    async fn indexes(log: &mut LogStore) -> Vec<u64> {
        log.try_get_log_entries(..)
            .await
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect()
    }

    impl LogStore {
        /// Waits for the preparation of zeros running, if one is; then
        /// the end of the frames and of the zeros after them.
        fn settled(&self) -> (u64, u64) {
            let mut file = lock(&self.shared.file);
            while file.preparing.is_some() {
                file = self.shared.prepared.wait(file).unwrap();
            }
            (file.len, file.zeroed)
        }
    }

    /// A crash in the middle of an append at `at`: the first half of a
    /// frame written there.
    fn tear_at(dir: &Path, at: u64) {
        let mut frame = Vec::new();
        encode_entry(&blank_ent::<Meridian>(1, 1, 6), &mut frame).unwrap();
        let file = OpenOptions::new()
            .write(true)
            .open(dir.join("log"))
            .unwrap();
        file.write_all_at(&frame[..frame.len() / 2], at).unwrap();
    }

    #[tokio::test]
    async fn entries_survive_a_reopen_and_a_torn_tail_is_cut() {
        let dir = dir("torn");
        let mut log = LogStore::open(&dir).unwrap();
        append(&mut log, entries(1..6)).await;
        let (frames_end, zeroed) = log.settled();
        drop(log);
        assert!(zeroed >= frames_end + PREPARE_CHUNK, "zeros prepared ahead");
        // Torn among the zeros prepared for it, and torn past them.
        for at in [frames_end, zeroed] {
            tear_at(&dir, at);
            let mut log = LogStore::open(&dir).unwrap();
            assert_eq!(indexes(&mut log).await, vec![1, 2, 3, 4, 5]);
            drop(log);
            let len = std::fs::metadata(dir.join("log")).unwrap().len();
            assert_eq!(len, frames_end, "cut at the last whole frame");
        }
        // And appends go on after the cut.
        let mut log = LogStore::open(&dir).unwrap();
        append(&mut log, entries(6..8)).await;
        drop(log);
        let mut log = LogStore::open(&dir).unwrap();
        assert_eq!(indexes(&mut log).await, (1..8).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Issue 44, R3: damage with whole entries after it used to be cut
    /// off as a torn tail, dropping entries reported durable.
    #[tokio::test]
    async fn a_damaged_entry_with_entries_after_it_is_refused_not_cut() {
        let dir = dir("damaged");
        let mut log = LogStore::open(&dir).unwrap();
        append(&mut log, entries(1..6)).await;
        // The zeros being prepared ahead are written by a thread of their
        // own: the file is read only once they are, or they would land
        // after the read (seen on a machine with room for them).
        log.settled();
        drop(log);
        let mut bytes = std::fs::read(dir.join("log")).unwrap();
        let ends: Vec<usize> = read_frames(&bytes)
            .0
            .iter()
            .map(|(_, end)| *end as usize)
            .collect();
        // One byte of entry 3's payload flipped: entries 4 and 5 follow.
        let third_end = ends[2];
        bytes[third_end - 1] ^= 0xff;
        std::fs::write(dir.join("log"), &bytes).unwrap();
        let error = LogStore::open(&dir).err().expect("a damaged log refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let said = error.to_string();
        assert!(said.contains("damaged at byte"), "{said}");
        assert!(said.contains("cluster remove"), "{said}");
        // The file is left as it was, for the operator to look at.
        assert_eq!(std::fs::read(dir.join("log")).unwrap(), bytes);
        // The same damage in the last entry is a torn tail: cut off.
        bytes[third_end - 1] ^= 0xff;
        let last_end = ends[4];
        bytes[last_end - 1] ^= 0xff;
        std::fs::write(dir.join("log"), &bytes).unwrap();
        let mut log = LogStore::open(&dir).unwrap();
        assert_eq!(indexes(&mut log).await, vec![1, 2, 3, 4]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn appends_overwrite_the_zeros_prepared_ahead_and_cuts_leave_zeros() {
        let dir = dir("zeros");
        let mut log = LogStore::open(&dir).unwrap();
        let mut appended = 0;
        // Enough entries of about 1 KiB to use up more than one chunk,
        // so appends reach zeros prepared while they went on.
        for round in 0..40u64 {
            let batch: Vec<Entry> = (0..256)
                .map(|i| {
                    let index = round * 256 + i + 1;
                    let mut entry = blank_ent::<Meridian>(1, 1, index);
                    entry.payload = openraft::EntryPayload::Normal(crate::types::Batch {
                        origin: 1,
                        session: 1,
                        seq: index,
                        commands: vec![7; 1024],
                    });
                    entry
                })
                .collect();
            append(&mut log, batch).await;
            appended += 256;
        }
        let (frames_end, zeroed) = log.settled();
        assert!(frames_end > PREPARE_CHUNK, "more than a chunk appended");
        assert!(zeroed - frames_end >= PREPARE_LOW_WATER, "zeros kept ahead");
        let file_len = std::fs::metadata(dir.join("log")).unwrap().len();
        assert_eq!(file_len, zeroed, "the file ends with the zeros");
        log.truncate_after(Some(openraft::testing::log_id::<Meridian>(1, 1, 100)))
            .await
            .unwrap();
        let (cut, _) = log.settled();
        drop(log);
        let bytes = std::fs::read(dir.join("log")).unwrap();
        assert!(
            bytes[cut as usize..].iter().all(|b| *b == 0),
            "zeros after the cut"
        );
        let mut log = LogStore::open(&dir).unwrap();
        assert_eq!(indexes(&mut log).await, (1..=100).collect::<Vec<_>>());
        assert!(appended > 100);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn truncation_purge_and_vote_are_durable() {
        let dir = dir("cut");
        let mut log = LogStore::open(&dir).unwrap();
        append(&mut log, entries(1..11)).await;
        log.truncate_after(Some(openraft::testing::log_id::<Meridian>(1, 1, 7)))
            .await
            .unwrap();
        log.purge(openraft::testing::log_id::<Meridian>(1, 1, 3))
            .await
            .unwrap();
        let vote = Vote::new(2, 1);
        log.save_vote(&vote).await.unwrap();
        drop(log);
        let mut log = LogStore::open(&dir).unwrap();
        assert_eq!(indexes(&mut log).await, vec![4, 5, 6, 7]);
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|id| id.index), Some(3));
        assert_eq!(state.last_log_id.map(|id| id.index), Some(7));
        assert_eq!(log.read_vote().await.unwrap(), Some(vote));
        // Everything purged: the log is empty and says where it ended.
        log.purge(openraft::testing::log_id::<Meridian>(1, 1, 7))
            .await
            .unwrap();
        drop(log);
        let mut log = LogStore::open(&dir).unwrap();
        assert!(indexes(&mut log).await.is_empty());
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|id| id.index), Some(7));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn zeros_end_the_frames() {
        let mut bytes = Vec::new();
        put_frame(&mut bytes, b"first").unwrap();
        let whole = bytes.len();
        bytes.extend_from_slice(&[0; 64]);
        // A zero header would pass as an empty frame (the CRC-32C of
        // nothing is zero): a length of zero is the end.
        assert_eq!(crc32c::crc32c(b""), 0);
        let (frames, read) = read_frames(&bytes);
        assert_eq!(frames.len(), 1);
        assert_eq!(read, whole);
    }

    #[test]
    fn a_damaged_frame_is_not_read_past() {
        let mut bytes = Vec::new();
        put_frame(&mut bytes, b"first").unwrap();
        put_frame(&mut bytes, b"second").unwrap();
        let (frames, whole) = read_frames(&bytes);
        assert_eq!(frames.len(), 2);
        assert_eq!(whole, bytes.len());
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let (frames, whole) = read_frames(&bytes);
        assert_eq!(frames.len(), 1, "the damaged frame is not taken");
        assert!(whole < bytes.len());
    }
}
