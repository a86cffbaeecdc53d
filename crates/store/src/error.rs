use meridian_model::ModelError;
use meridian_proto::ResultCode;

/// Why a command or a read failed. Every variant maps to one LDAP result
/// code ([`StoreError::code`]) and carries a message for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The target (or a parent) does not exist; `matched` is the deepest
    /// existing ancestor (the matchedDN of the result).
    #[error("no such object: {dn}")]
    NoSuchObject {
        /// The DN asked for.
        dn: String,
        /// Its deepest existing ancestor.
        matched: String,
    },
    /// An entry with this DN exists.
    #[error("entry {0} already exists")]
    AlreadyExists(String),
    /// The entry has children.
    #[error("entry {0} has subordinates")]
    NotAllowedOnNonLeaf(String),
    /// The result would break the schema, or a value is invalid.
    #[error("{0}")]
    Model(#[from] ModelError),
    /// Writes are refused (disk full, or an earlier I/O failure); reads
    /// go on.
    #[error("{0}")]
    WritesRefused(String),
    /// The store is closed.
    #[error("the store is shut down")]
    Closed,
    /// In a cluster: the write cannot be ordered now (no leader within
    /// the write timeout, or its outcome is unknown after a failover);
    /// the message says which.
    #[error("{0}")]
    Unavailable(String),
    /// In a cluster whose followers refer writes: the leader's LDAP URL.
    #[error("writes go to the leader at {0}")]
    Referral(String),
    /// The LMDB map is full; the writer grows it and retries, so callers
    /// only see this if growing failed.
    #[error("the database map is full")]
    MapFull,
    /// A failure of the storage engine itself (LMDB's own error codes,
    /// other than the OS errors kept as [`StoreError::Io`]).
    #[error("storage engine: {0}")]
    Engine(String),
    /// The database or the journal holds what no Meridian store writes:
    /// the message says what was found, and where.
    #[error("the database is corrupt: {0}")]
    Corrupt(String),
    /// The store cannot be opened as configured: no database where one
    /// must be, a path that cannot be made, another program's files.
    #[error("{0}")]
    Config(String),
    /// A rule of the store's own code broke: a bug in Meridian, never
    /// the client's doing ([`StoreError::internal`]).
    #[error("internal error ({0}): this is a bug in Meridian")]
    Internal(String),
    /// A file operation failed; `errno` is the OS error number when
    /// there is one, so callers tell a full disk (ENOSPC) from a failing
    /// one (EIO) by number, never by the text.
    #[error("cannot {op} {path}: {message}")]
    Io {
        /// What was being done (`open`, `write`, `sync`).
        op: &'static str,
        /// The file.
        path: String,
        /// The OS error number.
        errno: Option<i32>,
        /// The OS's words.
        message: String,
    },
    /// An update of a transaction ([`crate::Command::Transaction`]) failed,
    /// and with it the whole: `at` is its position in the transaction.
    #[error("update {} of the transaction: {error}", at + 1)]
    InTransaction {
        /// The failed update's position, from 0.
        at: usize,
        /// Why it failed.
        error: Box<StoreError>,
    },
    /// Another process holds the writer lock (`lock.rs`).
    #[error(
        "{what} {path} is open for writing by {}; stop it first (read-only tools such as `meridian export` and `meridian check` may run beside it)",
        holder.map_or_else(|| "another process".to_owned(), |pid| format!("process {pid}"))
    )]
    Locked {
        /// The directory whose lock is held.
        path: String,
        /// What it is ("the data directory", "the database").
        what: String,
        /// The holder's PID, as it wrote it in the lock file.
        holder: Option<u32>,
    },
}

impl StoreError {
    /// Writes refused for a full disk: not latched, so the next batch
    /// tries again once space is freed. `cause` says what failed. The
    /// writer logs the change of state, not each refusal.
    pub(crate) fn disk_full(cause: impl std::fmt::Display) -> StoreError {
        StoreError::WritesRefused(format!(
            "the disk is full ({cause}); writes are refused until space is freed, reads go on"
        ))
    }

    /// A failed file operation, keeping the OS error number.
    pub(crate) fn io(op: &'static str, path: impl std::fmt::Display, e: &std::io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.to_string(),
            errno: e.raw_os_error(),
            message: e.to_string(),
        }
    }

    /// A record or file that is not what the store writes.
    pub(crate) fn corrupt(what: impl std::fmt::Display) -> Self {
        StoreError::Corrupt(what.to_string())
    }

    /// A path the store cannot take for a rule of its own broken: debug
    /// builds (the tests, the fuzzers) stop at once; release builds log
    /// `context` at error level and fail the one command.
    #[track_caller]
    pub(crate) fn internal(context: impl std::fmt::Display) -> Self {
        let at = std::panic::Location::caller();
        debug_assert!(false, "internal error at {at}: {context}");
        tracing::error!(%at, "internal error: {context}");
        StoreError::Internal(context.to_string())
    }

    /// The OS error number of an I/O failure.
    pub(crate) fn errno(&self) -> Option<i32> {
        match self {
            StoreError::Io { errno, .. } => *errno,
            _ => None,
        }
    }

    /// The LDAP result code a client gets for this error.
    pub fn code(&self) -> ResultCode {
        match self {
            StoreError::NoSuchObject { .. } => ResultCode::NO_SUCH_OBJECT,
            StoreError::AlreadyExists(_) => ResultCode::ENTRY_ALREADY_EXISTS,
            StoreError::NotAllowedOnNonLeaf(_) => ResultCode::NOT_ALLOWED_ON_NON_LEAF,
            StoreError::Model(e) => e.code,
            StoreError::WritesRefused(_) | StoreError::Closed | StoreError::MapFull => {
                ResultCode::UNWILLING_TO_PERFORM
            }
            StoreError::Unavailable(_) => ResultCode::UNAVAILABLE,
            StoreError::Referral(_) => ResultCode::REFERRAL,
            StoreError::InTransaction { error, .. } => error.code(),
            StoreError::Engine(_)
            | StoreError::Io { .. }
            | StoreError::Locked { .. }
            | StoreError::Corrupt(_)
            | StoreError::Config(_)
            | StoreError::Internal(_) => ResultCode::OTHER,
        }
    }

    /// True for a failure of the engine (or of the disk under it), as
    /// opposed to a refusal of the command: it may come in the middle of
    /// a command's writes, so the command's transaction cannot commit.
    pub(crate) fn is_engine_failure(&self) -> bool {
        if let StoreError::InTransaction { error, .. } = self {
            return error.is_engine_failure();
        }
        matches!(
            self,
            StoreError::MapFull
                | StoreError::Engine(_)
                | StoreError::Io { .. }
                | StoreError::WritesRefused(_)
                | StoreError::Corrupt(_)
                | StoreError::Internal(_)
        )
    }

    /// True when trying again cannot help and the store should stop
    /// taking writes until someone looks: corruption found, a rule of
    /// our code broken, a configuration refused, another process's lock,
    /// an engine or disk failure other than a full disk. A full disk or
    /// map, a closed store, writes already refused and every refusal of
    /// a command are not fatal.
    pub fn is_fatal(&self) -> bool {
        match self {
            StoreError::Corrupt(_)
            | StoreError::Internal(_)
            | StoreError::Config(_)
            | StoreError::Locked { .. }
            | StoreError::Engine(_) => true,
            StoreError::Io { errno, .. } => !matches!(*errno, Some(libc::ENOSPC | libc::EDQUOT)),
            StoreError::InTransaction { error, .. } => error.is_fatal(),
            StoreError::NoSuchObject { .. }
            | StoreError::AlreadyExists(_)
            | StoreError::NotAllowedOnNonLeaf(_)
            | StoreError::Model(_)
            | StoreError::WritesRefused(_)
            | StoreError::Closed
            | StoreError::Unavailable(_)
            | StoreError::Referral(_)
            | StoreError::MapFull => false,
        }
    }
}

impl From<heed::Error> for StoreError {
    fn from(e: heed::Error) -> Self {
        match e {
            heed::Error::Mdb(heed::MdbError::MapFull) => StoreError::MapFull,
            // heed turns LMDB's OS error codes (ENOSPC, EIO from a
            // commit's write or sync) into `Io`: kept with their number.
            heed::Error::Io(io) => StoreError::io("write", "the database", &io),
            heed::Error::Mdb(heed::MdbError::Corrupted | heed::MdbError::PageNotFound) => {
                StoreError::Corrupt(e.to_string())
            }
            other => StoreError::Engine(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StoreError;

    #[test]
    fn engine_errors_keep_their_kind_and_say_whether_they_are_fatal() {
        let corrupt = StoreError::from(heed::Error::Mdb(heed::MdbError::Corrupted));
        assert!(matches!(corrupt, StoreError::Corrupt(_)), "{corrupt:?}");
        assert!(corrupt.is_fatal() && corrupt.is_engine_failure());

        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let full = StoreError::from(heed::Error::Io(full));
        assert_eq!(full.errno(), Some(libc::ENOSPC));
        assert!(!full.is_fatal(), "a full disk passes once space is freed");
        assert!(full.is_engine_failure());

        let failing = StoreError::from(heed::Error::Io(std::io::Error::from_raw_os_error(
            libc::EIO,
        )));
        assert!(failing.is_fatal());

        assert!(!StoreError::MapFull.is_fatal());
        let refusal = StoreError::AlreadyExists("uid=a,dc=example".into());
        assert!(!refusal.is_fatal() && !refusal.is_engine_failure());
        let config = StoreError::Config("no database in /nowhere".into());
        assert!(config.is_fatal() && !config.is_engine_failure());
    }
}
