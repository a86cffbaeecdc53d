//! One writer per database: an exclusive `flock` on a lock file, taken by
//! every process that opens a store (or a data directory) for writing, in
//! every durability, and held until it exits.
//!
//! LMDB itself lets several processes write one environment, and each
//! would then keep its own view of what it wrote: the writer thread's
//! remembered entry IDs, the journal's segment, the index record. Two
//! servers on one data directory, or an import beside a server, lost
//! acknowledged writes and left indexes that `meridian check` refused.
//! Read-only tools (`export`, `check`) take no lock and run beside a
//! writer; LMDB's own lock file keeps their reads consistent.
//!
//! The holder writes its PID into the file after locking, so the refusal
//! can say who holds it. The kernel drops the lock when the process dies
//! (even by SIGKILL), so a stale file never blocks a restart.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use crate::StoreError;

/// The lock file's name inside a store's or a data directory's folder.
pub(crate) const LOCK_FILE: &str = "writer.lock";

/// An exclusive writer lock, held while this value lives.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
    path: PathBuf,
}

impl WriterLock {
    /// Takes the lock of `dir` without waiting. `what` names the
    /// directory in the refusal ("the data directory", "the database").
    pub fn acquire(dir: &Path, what: &str) -> Result<WriterLock, StoreError> {
        let path = dir.join(LOCK_FILE);
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).read(true).write(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, crate::private::FILE_MODE);
        let mut file = options
            .open(&path)
            .map_err(|e| StoreError::io("open", path.display(), &e))?;
        // SAFETY: flock on a descriptor we own and keep open; no memory
        // is passed.
        #[allow(unsafe_code)]
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if !locked {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = text.trim().parse::<u32>().ok();
            return Err(StoreError::Locked {
                path: dir.display().to_string(),
                what: what.to_owned(),
                holder,
            });
        }
        // Best effort: the PID only makes the refusal clearer.
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        Ok(WriterLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_and_named_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("meridian-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = WriterLock::acquire(&dir, "the database").unwrap();
        // flock locks belong to the open file description: a second open
        // in the same process conflicts like another process would.
        let refused = WriterLock::acquire(&dir, "the database").unwrap_err();
        match &refused {
            StoreError::Locked { holder, .. } => assert_eq!(*holder, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        let message = refused.to_string();
        assert!(
            message.contains(&std::process::id().to_string()),
            "{message}"
        );
        assert!(message.contains("the database"), "{message}");
        drop(first);
        let again = WriterLock::acquire(&dir, "the database").unwrap();
        assert_eq!(again.path(), dir.join(LOCK_FILE));
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
