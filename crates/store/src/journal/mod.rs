//! The command journal: `storage.durability = "journal"`.
//!
//! LMDB copies a 4 KiB page for every record it rewrites, so a durable
//! commit of 1,000 random modifies writes and syncs about 4 MB; on a
//! disk that writes 450 MB/s that caps durable modifies near 100,000 a
//! second whatever the CPU does. In journal mode LMDB commits without
//! fsync and each batch is acknowledged once its commands, a few hundred
//! bytes each, are appended to a log and fdatasync'd. Pages rewritten by
//! many commits then reach the disk once, when the kernel writes them
//! back.
//!
//! What that costs is the crash story, which this module owns:
//!
//! - **Process crash** (SIGKILL, panic): LMDB without fsync keeps its
//!   atomicity and consistency, and every commit is in the page cache, so
//!   the database is whole and holds every acknowledged batch (a batch is
//!   committed to LMDB before its record is appended).
//! - **Machine crash** (power, kernel): unsynced LMDB pages may be lost
//!   or written in any order, and LMDB may reuse the pages of its last
//!   synced snapshot, so `data.mdb` cannot be trusted at all. Recovery
//!   puts the newest *base* (a compacted copy of the database, made with
//!   a read transaction and fsync'd) in its place and replays every
//!   journal record after the base's sequence number. Commands are
//!   deterministic, so the replayed database is the one that crashed.
//!
//! Which crash happened is told by the `running` marker: written (with
//! the kernel's boot ID) when the store opens, removed after a clean
//! close has synced LMDB. A marker from another boot, or a boot ID that
//! cannot be read, means the machine went down.
//!
//! Files in `<env>/journal/`, names zero-padded so that they sort:
//!
//! ```text
//! running                  the marker
//! base-<S>.mdb             a database copy holding at least records ..=S
//! log-<S>                  records S+1, S+2, ... (frame.rs, record.rs)
//! ```
//!
//! Each LMDB transaction of a journaled batch stores the batch's
//! sequence number in `meta` under `journal_seq`, so a database (live
//! or a base) says exactly which records it holds. A checkpoint starts a
//! new log segment at the last sequence number S, then copies the
//! database to `base-<S>.mdb` on its own thread while writes go on; once
//! the copy is synced and renamed, older bases and segments are removed.

mod append;
pub(crate) mod frame;
pub(crate) mod record;
mod space;

pub(crate) use append::{Deferred, Journal};
pub(crate) use space::Space;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use meridian_model::Schema;

use crate::{Command, Inner, StoreError};

/// The `meta` key with the sequence number of the last journal record
/// the database holds (u64 big-endian).
pub(crate) const APPLIED_SEQ: &[u8] = b"journal_seq";
const DIR: &str = "journal";
const MARKER: &str = "running";
const BASE_PREFIX: &str = "base-";
const BASE_SUFFIX: &str = ".mdb";
const LOG_PREFIX: &str = "log-";

/// How the last run that wrote this database ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Previous {
    /// No journal: the database was last written durably (or never).
    NoJournal,
    /// Closed cleanly: LMDB was synced and holds every record.
    Clean,
    /// The process died; the machine did not: LMDB holds every record.
    ProcessCrash,
    /// The machine went down: `data.mdb` was replaced by the newest base.
    MachineCrash,
}

pub(crate) fn dir_of(env_path: &Path) -> PathBuf {
    env_path.join(DIR)
}

fn io_error(what: &'static str, path: &Path, e: &std::io::Error) -> StoreError {
    StoreError::io(what, format_args!("journal file {}", path.display()), e)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("sync the directory", dir, &e))
}

/// This boot of the kernel (Linux); `None` where it cannot be known.
pub(crate) fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// Files named `<prefix><number><suffix>` in `dir`, by number.
fn numbered(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for item in fs::read_dir(dir).map_err(|e| io_error("list", dir, &e))? {
        let item = item.map_err(|e| io_error("list", dir, &e))?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        let number = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(n) = number {
            found.push((n, item.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Bytes in the log segments of `dir`: the journal written since the
/// newest base (a checkpoint removes the segments before it).
fn log_bytes(dir: &Path) -> Result<u64, StoreError> {
    let mut total = 0;
    for (_, path) in numbered(dir, LOG_PREFIX, "")? {
        total += fs::metadata(&path)
            .map_err(|e| io_error("stat", &path, &e))?
            .len();
    }
    Ok(total)
}

fn base_name(seq: u64) -> String {
    format!("{BASE_PREFIX}{seq:020}{BASE_SUFFIX}")
}

fn log_name(seq: u64) -> String {
    format!("{LOG_PREFIX}{seq:020}")
}

/// Before LMDB opens `env_path`: tells how the last run ended and, after
/// a machine crash, puts the newest base in place of `data.mdb`.
pub(crate) fn prepare(env_path: &Path) -> Result<Previous, StoreError> {
    let dir = dir_of(env_path);
    if !dir.is_dir() {
        return Ok(Previous::NoJournal);
    }
    let marker = dir.join(MARKER);
    let previous = match fs::read_to_string(&marker) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Previous::Clean),
        Err(e) => return Err(io_error("read", &marker, &e)),
        Ok(text) if boot_id().is_some_and(|now| now == text.trim()) => Previous::ProcessCrash,
        Ok(_) => Previous::MachineCrash,
    };
    if previous == Previous::MachineCrash {
        let Some((seq, base)) = numbered(&dir, BASE_PREFIX, BASE_SUFFIX)?.pop() else {
            return Err(StoreError::Corrupt(format!(
                "journal: the machine stopped while {} was written without fsync, and {} holds no base copy to recover from",
                env_path.display(),
                dir.display()
            )));
        };
        let data = env_path.join("data.mdb");
        let staged = env_path.join("data.mdb.recovering");
        fs::copy(&base, &staged)
            .and_then(|_| crate::private::restrict(&staged))
            .map_err(|e| io_error("copy", &base, &e))?;
        File::open(&staged)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_error("sync", &staged, &e))?;
        fs::rename(&staged, &data).map_err(|e| io_error("replace", &data, &e))?;
        // The lock file's reader table belongs to the lost run.
        let _ = fs::remove_file(env_path.join("lock.mdb"));
        sync_dir(env_path)?;
        tracing::warn!(
            base = seq,
            "the machine stopped during the last run: the database was restored from its base copy; the journal is replayed next"
        );
    }
    Ok(previous)
}

/// What [`replay_pending`] found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replayed {
    /// The last record the database holds now.
    pub(crate) last: u64,
    /// Records `..=covered` are in a base or in the journal files, so a
    /// machine crash could rebuild them; `None` when there is no base.
    pub(crate) covered: Option<u64>,
}

/// Hands `replay` every record after `applied`, in order, from the log
/// segments of the journal in `env_path` (if any). A torn record at the
/// end of the last segment is an append that was never acknowledged: it
/// is cut off. Anything else out of place is an error.
///
/// After a clean close nothing is read: the close came after every
/// append had succeeded and LMDB was synced (a failed append keeps the
/// marker), so the database holds every record and the files since the
/// newest base hold every record after it. Reading them anyway made each
/// start cost a pass over the whole journal.
pub(crate) fn replay_pending(
    env_path: &Path,
    applied: u64,
    previous: Previous,
    schema: &Schema,
    mut replay: impl FnMut(u64, Vec<Command>) -> Result<(), StoreError>,
) -> Result<Replayed, StoreError> {
    let dir = dir_of(env_path);
    if !dir.is_dir() {
        return Ok(Replayed {
            last: applied,
            covered: None,
        });
    }
    let newest_base = numbered(&dir, BASE_PREFIX, BASE_SUFFIX)?
        .pop()
        .map(|(n, _)| n);
    if previous == Previous::Clean {
        return Ok(Replayed {
            last: applied,
            covered: newest_base.map(|base| base.max(applied)),
        });
    }
    let segments = numbered(&dir, LOG_PREFIX, "")?;
    let mut journal_last = 0;
    let mut last = applied;
    for (i, (start, path)) in segments.iter().enumerate() {
        let read_error = |e: std::io::Error| io_error("read", path, &e);
        let file = File::open(path).map_err(read_error)?;
        let size = file.metadata().map_err(read_error)?.len();
        let mut frames = frame::Frames::new(std::io::BufReader::new(file), size);
        let mut expected = start + 1;
        loop {
            match frames.next_frame().map_err(read_error)? {
                frame::Frame::End => break,
                frame::Frame::Whole(payload) => {
                    let (seq, commands) = record::decode_payload(&payload, schema)?;
                    if seq != expected {
                        return Err(StoreError::Corrupt(format!(
                            "journal: {} holds record {seq} where {expected} belongs",
                            path.display()
                        )));
                    }
                    if seq > last {
                        if seq != last + 1 {
                            return Err(StoreError::Corrupt(format!(
                                "journal: records {}..{seq} are missing (the database holds up to {last})",
                                last + 1
                            )));
                        }
                        replay(seq, commands)?;
                        last = seq;
                    }
                    journal_last = seq;
                    expected += 1;
                }
                frame::Frame::Torn if i + 1 == segments.len() => {
                    let at = frames.offset();
                    tracing::warn!(
                        segment = %path.display(),
                        offset = at,
                        "journal: cutting off a torn record at the end (never acknowledged)"
                    );
                    OpenOptions::new()
                        .write(true)
                        .open(path)
                        .and_then(|f| {
                            f.set_len(at)?;
                            f.sync_all()
                        })
                        .map_err(|e| io_error("truncate", path, &e))?;
                    break;
                }
                frame::Frame::Torn => {
                    return Err(StoreError::Corrupt(format!(
                        "journal: {} is damaged at byte {}, before later segments",
                        path.display(),
                        frames.offset()
                    )));
                }
            }
        }
    }
    Ok(Replayed {
        last,
        covered: newest_base.map(|base| base.max(journal_last)),
    })
}

/// After a non-journal store has replayed and synced: the journal is
/// no longer needed.
pub(crate) fn remove(env_path: &Path) -> Result<(), StoreError> {
    let dir = dir_of(env_path);
    if dir.is_dir() {
        fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, &e))?;
        sync_dir(env_path)?;
    }
    Ok(())
}

/// Creates the journal directory (durably) if it is missing.
fn create_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    crate::private::create_dir(dir).map_err(|e| io_error("create", dir, &e))?;
    match dir.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Writes the `running` marker with this boot's ID (empty if unknown:
/// then any unclean stop counts as a machine crash).
fn write_marker(dir: &Path) -> Result<(), StoreError> {
    create_dir(dir)?;
    let staged = dir.join("running.tmp");
    crate::private::create_file(&staged)
        .and_then(|mut f| {
            f.write_all(boot_id().unwrap_or_default().as_bytes())?;
            f.sync_all()
        })
        .map_err(|e| io_error("write", &staged, &e))?;
    let marker = dir.join(MARKER);
    fs::rename(&staged, &marker).map_err(|e| io_error("write", &marker, &e))?;
    sync_dir(dir)
}

fn remove_marker(dir: &Path) -> Result<(), StoreError> {
    let marker = dir.join(MARKER);
    fs::remove_file(&marker).map_err(|e| io_error("remove", &marker, &e))?;
    sync_dir(dir)
}

/// A new, empty segment for the records after `after`.
fn open_segment(dir: &Path, after: u64) -> Result<(File, PathBuf), StoreError> {
    let path = dir.join(log_name(after));
    // Truncating is safe: a segment with this name holds no record the
    // database lacks (recovery replayed them all), at most a torn tail.
    let file = crate::private::create_file(&path).map_err(|e| io_error("create", &path, &e))?;
    sync_dir(dir)?;
    Ok((file, path))
}

/// Copies the database to `base-<at>.mdb` (it holds `..=at` and maybe
/// more: its `journal_seq` says how much), syncs it, and removes the
/// bases and segments it makes unnecessary.
fn checkpoint(inner: &Inner, dir: &Path, at: u64) -> Result<(), StoreError> {
    let staged = dir.join("base.tmp");
    // Made 0600, synced, and without stalling the writer (`copy.rs`).
    crate::copy::copy_database(inner, &staged)?;
    let base = dir.join(base_name(at));
    fs::rename(&staged, &base).map_err(|e| io_error("rename", &base, &e))?;
    sync_dir(dir)?;
    for (n, path) in numbered(dir, BASE_PREFIX, BASE_SUFFIX)?
        .into_iter()
        .chain(numbered(dir, LOG_PREFIX, "")?)
    {
        if n < at {
            fs::remove_file(&path).map_err(|e| io_error("remove", &path, &e))?;
        }
    }
    sync_dir(dir)
}
