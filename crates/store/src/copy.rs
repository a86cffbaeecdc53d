//! Compacted copies of the database made beside a running server: raft
//! snapshots, journal bases and `meridian backup`.
//!
//! A copy is one read transaction of LMDB's (`mdb_env_copy2` with
//! compaction), then a sync. Made the plain way, it was one of the two
//! stalls of a replicated cluster under a steady 15,000 modifies/s (the
//! other is the kernel's writeback of the state machines): each node
//! copied its 190 MB database at the same log position, the machine was
//! busy for most of a second, and the copies' sync put 570 MB in the disk
//! queue in front of the raft logs' appends (`docs/BENCHMARKS.md`). So a
//! copy here:
//!
//! - holds the map (which keeps the writer from growing it, `writer::grow`)
//!   only while LMDB copies (a tenth of a second for 190 MB here), not
//!   while the copy is synced;
//! - goes to disk a slice at a time (`sync_file_range`), each slice waited
//!   for before the next is started, so that the disk queue never holds
//!   more than one slice of it and a durable append waits behind at most
//!   that.
//!
//! - is preceded, when a store's writer runs, by room made in the map
//!   ([`make_room_for_copy`]; for journal bases too): while the copy's read transaction lasts,
//!   commits cannot reuse the pages they free, so they take new ones
//!   from the end of the map, and a writer that ran out of them waited
//!   for the copy to end before it could grow the map. At 15,000
//!   replicated modifies/s each node's writer did, for about a second,
//!   at every snapshot.
//!
//! It does not lower the copying thread's CPU priority: the thread holds
//! the map, and a writer that must grow it would wait on the slowest
//! thread of the process.

use std::fs::File;
use std::os::fd::AsRawFd as _;
use std::path::Path;

use heed::CompactionOption;

use crate::{Inner, StoreError};

/// Bytes of the copy written back at a time: about 10 ms of this disk.
const SLICE_BYTES: u64 = 4 << 20;

/// The room made in the map before a copy: a quarter of the pages in
/// use, and at least this.
const MIN_ROOM_BYTES: u64 = 16 << 20;
/// How long a copy waits for the room.
const ROOM_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Has the writer grow the map, if need be, so that a quarter of the
/// pages in use (at least [`MIN_ROOM_BYTES`]) are free past the last
/// one, and waits for it. Best effort: a map that cannot grow (a full
/// disk, the largest map) is copied all the same, and the writer meets
/// the limit as it would have. Nothing to do without a running writer
/// (a read-only store, or the base a journal makes before its writer
/// starts). Blocks, as a copy does: not from an async runtime's thread.
fn make_room_for_copy(inner: &Inner) {
    let Some(writer) = inner.writer_queue.get().and_then(|q| q.upgrade()) else {
        return;
    };
    let room = (inner.map_use().used / 4).max(MIN_ROOM_BYTES);
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    let sent = writer.blocking_send(crate::Work::MakeRoom(room, reply));
    // Not held while waiting: a store closing meanwhile must still be
    // able to stop its writer.
    drop(writer);
    // Otherwise made; or the writer stopped (the store is closing), or is
    // slower than the copy is worth waiting for.
    if sent.is_ok()
        && let Ok(Err(e)) = answer.recv_timeout(ROOM_WAIT)
    {
        tracing::warn!("no room made in the map before a copy: {e}");
    }
}

/// Copies the database, compacted, to a new file at `path` (0600), and
/// syncs it: room made in the map first ([`make_room_for_copy`]).
pub(crate) fn copy_database(inner: &Inner, path: &Path) -> Result<(), StoreError> {
    make_room_for_copy(inner);
    let copy = match copy_pages(inner, path) {
        Ok(copy) => copy,
        Err(e) => {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    write_back_in_slices(&copy).map_err(|e| StoreError::io("sync", path.display(), &e))?;
    copy.sync_all()
        .map_err(|e| StoreError::io("sync", path.display(), &e))
}

/// LMDB's copy into a new file, with the map held: the copy is a read
/// transaction, and the map must not move under it.
fn copy_pages(inner: &Inner, path: &Path) -> Result<File, StoreError> {
    let _no_resize = inner.hold_map();
    let mut copy = crate::private::create_file(path)
        .map_err(|e| StoreError::io("create", path.display(), &e))?;
    inner
        .env
        .copy_to_file(&mut copy, CompactionOption::Enabled)?;
    Ok(copy)
}

/// Writes `file`'s dirty pages back one slice at a time, waiting for each.
/// A file system without `sync_file_range` leaves it all to the `fsync`
/// after. Any other error is the copy's: a write-back error reported
/// here is not reported again by that `fsync`.
fn write_back_in_slices(file: &File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let mut offset = 0;
    while offset < len {
        let slice = SLICE_BYTES.min(len - offset);
        match sync_file_range(file, offset, slice) {
            Ok(()) => offset += slice,
            Err(e) if unsupported(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether `e` says the file system has no `sync_file_range`.
fn unsupported(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ESPIPE | libc::EOPNOTSUPP | libc::ENOSYS)
    )
}

/// `sync_file_range(2)` with WAIT_BEFORE | WRITE | WAIT_AFTER: the range
/// is on its way to the disk and written when this returns (not the
/// file's metadata, nor the disk's cache: the `fsync` after does that).
fn sync_file_range(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(offset),
        libc::off64_t::try_from(len),
    ) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    crate::map_file::retry_interrupted(|| {
        // SAFETY: sync_file_range reads no memory of ours; the descriptor
        // is open for as long as `file` lives.
        #[allow(unsafe_code)]
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, flags)
        }
    })
}
