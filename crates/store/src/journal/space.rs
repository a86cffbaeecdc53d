//! Room in the journal, allocated before a batch commits.
//!
//! In journal mode LMDB commits a batch before its record is appended.
//! Were the append to fail for want of space, LMDB would hold a write
//! its client was told had failed, and it would be there after a
//! restart. So the writer claims the bytes of a batch's records before it
//! commits: claims come out of room allocated on disk ahead of the
//! segment's end (`fallocate` with `FALLOC_FL_KEEP_SIZE`, so the file's
//! length stays that of its records), and a claim that cannot be met is a
//! full disk: the batch is not committed, its writes are refused, and the
//! next batch asks again, so writes resume when space returns. An append
//! into allocated room cannot fail for space; only an I/O error remains.
//!
//! Shared by the writer (claims) and the journal thread (appends, moves
//! to a new segment at a checkpoint), under one small lock taken once
//! per batch.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use crate::StoreError;

/// Room allocated at a time beyond what is claimed: a few batches.
const STEP: u64 = 8 << 20;

/// The segment being appended to and the room reserved in it.
#[derive(Debug)]
struct Segment {
    file: File,
    path: PathBuf,
    /// Bytes appended so far.
    written: u64,
    /// Bytes appended plus those claimed by batches not yet appended.
    claimed: u64,
    /// Bytes allocated on disk from the segment's start.
    allocated: u64,
    /// The file system cannot allocate ahead (EOPNOTSUPP): claims are
    /// only counted, and a full disk fails the append instead.
    unsupported: bool,
}

/// The journal's room, shared by the writer and the journal thread.
#[derive(Debug)]
pub(crate) struct Space {
    segment: Mutex<Segment>,
}

impl Space {
    /// Room in `file`, a new segment of `written` bytes.
    pub(crate) fn new(file: &File, path: PathBuf) -> Result<Space, StoreError> {
        Ok(Space {
            segment: Mutex::new(Segment {
                file: clone(file, &path)?,
                path,
                written: 0,
                claimed: 0,
                allocated: 0,
                unsupported: false,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Segment> {
        self.segment.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `bytes` for records about to be committed, allocating more
    /// room if needed (a step ahead when the disk has it, else just
    /// enough). `Err` when the disk cannot give them: a full disk, or the
    /// error the file system gave.
    pub(crate) fn claim(&self, bytes: u64) -> Result<(), StoreError> {
        self.claim_io(bytes)
            .map_err(|e| super::io_error("allocate room in", &self.lock().path, &e))
    }

    fn claim_io(&self, bytes: u64) -> Result<(), std::io::Error> {
        let mut s = self.lock();
        let need = s.claimed + bytes;
        if need > s.allocated && !s.unsupported {
            let want = need + STEP;
            match allocate(&s.file, s.allocated, want)
                .map(|()| want)
                .or_else(|_| allocate(&s.file, s.allocated, need).map(|()| need))
            {
                Ok(allocated) => s.allocated = allocated,
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    tracing::warn!(
                        path = %s.path.display(),
                        "the journal's file system cannot allocate ahead: a full disk will stop writes until restart"
                    );
                    s.unsupported = true;
                }
                Err(e) => return Err(e),
            }
        }
        s.claimed = need;
        Ok(())
    }

    /// Gives back claimed bytes a batch turned out not to need.
    pub(crate) fn unclaim(&self, bytes: u64) {
        let mut s = self.lock();
        s.claimed = s.claimed.saturating_sub(bytes).max(s.written);
    }

    /// The journal thread appended `bytes` of records for which the
    /// writer had claimed `claimed` (at least as many).
    pub(crate) fn appended(&self, bytes: u64, claimed: u64) {
        let mut s = self.lock();
        s.written += bytes;
        s.claimed = s.claimed.saturating_sub(claimed.saturating_sub(bytes));
        s.claimed = s.claimed.max(s.written);
    }

    /// Moves on to a new, empty segment `file`: allocates in it the room
    /// claimed but not yet appended (those records go there) and a step
    /// more. `Err` (and nothing changed) if the disk cannot: the journal
    /// stays on the old segment, whose room still covers every claim.
    pub(crate) fn move_to(&self, file: &File, path: PathBuf) -> Result<(), StoreError> {
        let mut s = self.lock();
        let pending = s.claimed - s.written;
        let want = pending + STEP;
        // The room recorded is the room the disk gave: recording `want`
        // when only `pending` could be had let later claims skip
        // `fallocate`, and their appends then failed after LMDB had
        // committed their batches (issue 44).
        let allocated = if s.unsupported {
            want
        } else {
            allocate(file, 0, want)
                .map(|()| want)
                .or_else(|_| allocate(file, 0, pending).map(|()| pending))
                .map_err(|e| super::io_error("allocate room in", &path, &e))?
        };
        s.file = clone(file, &path)?;
        s.path = path;
        s.written = 0;
        s.claimed = pending;
        s.allocated = allocated;
        Ok(())
    }
}

fn clone(file: &File, path: &std::path::Path) -> Result<File, StoreError> {
    file.try_clone()
        .map_err(|e| super::io_error("share", path, &e))
}

/// Allocates bytes `from..to` of `file` on disk without changing its
/// length (`FALLOC_FL_KEEP_SIZE`).
fn allocate(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    crate::map_file::fallocate(file, libc::FALLOC_FL_KEEP_SIZE, from, to)
}
