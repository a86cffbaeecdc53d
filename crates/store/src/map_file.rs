//! The data file of a writable map (`MDB_WRITEMAP`), kept allocated on
//! disk as far as the map reaches.
//!
//! Without a writable map, LMDB copies every page a transaction changes
//! into memory of its own and `pwrite`s it into the file at commit: under
//! a stream of modifies that copy and the kernel's write path were a
//! quarter of the writer's time (`docs/BENCHMARKS.md`). With one, pages
//! are changed in the map itself and a commit without fsync writes
//! nothing. Used where commits are not synced anyway: journal and relaxed
//! durability, and the memory backend (`docs/design/storage.md`, "Map
//! and file").
//!
//! The danger of a writable map is the file's holes. LMDB makes the file
//! as long as the map (`ftruncate`), so the pages past the data are
//! holes, and when the disk has no block left for a page the process
//! writes into, the kernel answers with SIGBUS: a crash, where a full
//! disk must only refuse writes. So the map never reaches past what is
//! allocated: it starts at the file's size, and it grows only by ranges
//! first allocated with `fallocate`. A full disk then shows as a map that
//! cannot grow, and LMDB's `MDB_MAP_FULL` becomes a refused write.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::StoreError;

/// Map sizes are kept to whole mebibytes.
const ALIGN: u64 = 1 << 20;

/// Smallest step a map grows by; a larger map grows by a quarter of
/// itself, so a growing database remaps a few dozen times, not thousands.
const MIN_STEP: u64 = 16 << 20;

/// Name of the probe file made by [`supported`].
const PROBE: &str = "fallocate-probe";

/// Whether the file system of `dir` can allocate file space ahead
/// (tmpfs, ext4, XFS and Btrfs can; some network file systems cannot).
/// A full disk answers ENOSPC, which means it can.
pub(crate) fn supported(dir: &Path) -> bool {
    let path = dir.join(PROBE);
    let probe = File::create(&path).and_then(|file| match allocate(&file, 0, ALIGN) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&path);
    match probe {
        Ok(()) => true,
        Err(e) => {
            tracing::info!(
                "{} cannot allocate file space ahead ({e}): the database is not mapped writable",
                dir.display()
            );
            false
        }
    }
}

/// The map size to open a writable map with: the file's size, in whole
/// mebibytes, and never less than one step (LMDB raises it to the data's
/// size if that is larger).
pub(crate) fn initial_size(data_file: &Path) -> u64 {
    let len = std::fs::metadata(data_file).map_or(0, |m| m.len());
    round_up(len).max(MIN_STEP)
}

fn round_up(len: u64) -> u64 {
    len.div_ceil(ALIGN).saturating_mul(ALIGN)
}

/// An open handle on `data.mdb`, to allocate its space.
pub(crate) struct MapFile {
    file: File,
}

impl MapFile {
    pub(crate) fn open(data_file: &Path) -> Result<MapFile, StoreError> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(data_file)
            .map_err(|e| StoreError::io("open", data_file.display(), &e))?;
        Ok(MapFile { file })
    }

    /// Allocates the first `size` bytes of the file (those already
    /// allocated cost nothing): called at open for the map LMDB made,
    /// before anything is written through it.
    pub(crate) fn allocate_to(&self, size: u64) -> std::io::Result<()> {
        allocate(&self.file, 0, size)
    }

    /// Allocates room for the map of `current` bytes to grow, and
    /// returns the new size: a quarter more (at least [`MIN_STEP`]), or
    /// less on a disk that has not that much left, down to a mebibyte.
    /// `Err` when not even that is free: the disk is full.
    pub(crate) fn grow_from(&self, current: u64) -> Result<u64, StoreError> {
        let mut step = round_up((current / 4).max(MIN_STEP));
        loop {
            let next = current.saturating_add(step);
            match allocate(&self.file, current, next) {
                Ok(()) => return Ok(next),
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && step > ALIGN => step /= 2,
                // Typed whatever the error: the writer tells a full disk
                // (ENOSPC) from a failing one (EIO) by its number.
                Err(e) => {
                    return Err(StoreError::io(
                        "allocate room for",
                        format_args!("the database to grow past {current} bytes"),
                        &e,
                    ));
                }
            }
        }
    }
}

/// Allocates bytes `from..to` of `file` on disk (extending it if needed).
fn allocate(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    fallocate(file, 0, from, to)
}

/// `fallocate(2)` of bytes `from..to` with `mode` (0, or
/// `FALLOC_FL_KEEP_SIZE` to leave the file's length as it is), retried
/// when a signal interrupts it.
pub(crate) fn fallocate(file: &File, mode: libc::c_int, from: u64, to: u64) -> std::io::Result<()> {
    if to <= from {
        return Ok(());
    }
    let (Ok(offset), Ok(len)) = (
        libc::off_t::try_from(from),
        libc::off_t::try_from(to - from),
    ) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    retry_interrupted(|| {
        // SAFETY: fallocate reads no memory of ours; the descriptor is
        // open for writing for as long as `file` lives.
        #[allow(unsafe_code)]
        unsafe {
            libc::fallocate(file.as_raw_fd(), mode, offset, len)
        }
    })
}

/// Makes a system call that returns 0, or -1 and sets `errno`, again for
/// as long as a signal interrupts it.
pub(crate) fn retry_interrupted(mut call: impl FnMut() -> libc::c_int) -> std::io::Result<()> {
    loop {
        if call() == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Asks the kernel to drop the cached pages of `file` that are clean
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`); dirty ones stay. Advice: the
/// file's contents are not touched.
pub(crate) fn drop_cached_pages(file: &File) -> std::io::Result<()> {
    // SAFETY: posix_fadvise reads no memory of ours; the descriptor is
    // open for as long as `file` lives.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    // It returns the error number rather than setting errno.
    match rc {
        0 => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}
