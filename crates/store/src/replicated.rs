//! The store's side of replication: what clients submit is handed to
//! the replication layer as [`Proposal`]s instead of the writer; the
//! commands of committed log entries come back through
//! [`Store::apply_replicated`], which applies them in one transaction
//! with the layer's marker of what is applied (its applied log ID), so
//! the database and the marker never disagree after a crash.
//!
//! A log entry carries commands in the journal's record encoding
//! ([`encode_commands`]): the same bytes a journal would hold, so one
//! decoder serves both and every node rebuilds the very commands the
//! leader's node prepared.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, PutFlags, WithoutTls};
use meridian_model::Schema;
use tokio::sync::{mpsc, oneshot};

use crate::journal::record;
use crate::{Answer, Command, Effect, Inner, Job, ReplicatedJob, Store, StoreError, Work};

/// The `meta` key of the replication layer's marker.
pub(crate) const APPLIED_MARKER: &[u8] = b"replication_applied";

/// What clients submitted to a replicated store, in submission order.
pub struct Proposals(mpsc::Receiver<Job>);

impl Proposals {
    pub(crate) fn new(receiver: mpsc::Receiver<Job>) -> Proposals {
        Proposals(receiver)
    }

    /// The next proposal; `None` once the store is closed.
    pub async fn next(&mut self) -> Option<Proposal> {
        self.0.recv().await.map(Proposal)
    }

    /// A proposal already waiting, without waiting for one.
    pub fn try_next(&mut self) -> Option<Proposal> {
        self.0.try_recv().ok().map(Proposal)
    }
}

/// One client's command, waiting for the log to order and apply it.
pub struct Proposal(Job);

impl Proposal {
    /// Answers the client without applying the command (a referral, a
    /// refusal); the command goes back to be freed by the client.
    pub fn answer(self, result: Result<Effect, StoreError>) {
        let (command, reply) = self.into_parts();
        reply.answer(result, Some(command));
    }

    /// The command, to be encoded into the log and applied here without
    /// being decoded back, and the reply its client waits for.
    pub fn into_parts(self) -> (Command, Reply) {
        let Job { command, reply, .. } = self.0;
        (command, Reply(reply))
    }

    /// When its client submitted it.
    pub fn submitted(&self) -> std::time::Instant {
        self.0.submitted
    }
}

/// Where a proposal's result goes once its command was taken from it
/// ([`Proposal::into_parts`]).
pub struct Reply(oneshot::Sender<Answer>);

impl Reply {
    /// Answers the client with the command's result, and the command
    /// when it is given back, to be freed by the client's thread.
    pub fn answer(self, result: Result<Effect, StoreError>, spent: Option<Command>) {
        // A client that went away does not need its answer.
        let _ = self.0.send(Answer { result, spent });
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}

impl std::fmt::Debug for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Proposal").field(&self.0.command).finish()
    }
}

/// Commands as a log entry carries them.
pub fn encode_commands<'c>(
    commands: impl ExactSizeIterator<Item = &'c Command>,
    schema: &Schema,
) -> Vec<u8> {
    record::encode_commands(commands, schema)
}

/// The commands of a log entry; an error for bytes [`encode_commands`]
/// did not make.
pub fn decode_commands(bytes: &[u8], schema: &Schema) -> Result<Vec<Command>, StoreError> {
    record::decode_commands(bytes, schema)
}

/// What [`Store::apply_replicated`] gives back.
#[derive(Debug)]
pub struct Applied {
    /// Each command's result, in order.
    pub results: Vec<Result<Effect, StoreError>>,
    /// The commands, given back to be freed by the caller's thread,
    /// which mostly made them (see [`Answer`]), not the writer's.
    pub spent: Vec<Command>,
}

impl Store {
    /// Applies committed commands in one transaction that also stores
    /// `marker`; each command's result in order. `Err` when the
    /// transaction could not be made at all (a full disk, an I/O error):
    /// no command's result, and nothing of it is applied.
    pub async fn apply_replicated(
        &self,
        commands: Vec<Command>,
        marker: Vec<u8>,
    ) -> Result<Applied, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.writer
            .send(Work::Replicated(ReplicatedJob {
                commands,
                marker,
                reply,
            }))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// The marker the last replicated transaction stored.
    pub fn replication_marker(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let _map = self.inner.hold_map();
        let rtxn = self.inner.env.read_txn()?;
        Ok(self
            .inner
            .dbs
            .meta
            .get(&rtxn, APPLIED_MARKER)?
            .map(<[u8]>::to_vec))
    }
}

/// Replace the database with a copy ([`Store::install_copy`]).
pub(crate) struct InstallJob {
    path: PathBuf,
    pub(crate) reply: oneshot::Sender<Result<Option<Vec<u8>>, StoreError>>,
}

impl Store {
    /// Copies the database, compacted, to a new file at `path` (0600,
    /// synced), from one read transaction: a consistent copy, made beside
    /// a running server too (`meridian backup`). The copy is a
    /// `data.mdb` a store opens as it is. Blocks, like
    /// [`Store::execute_blocking`]: call it from a thread outside an
    /// async runtime (`spawn_blocking`).
    /// How it spares the server: `copy.rs`.
    pub fn copy_to(&self, path: &Path) -> Result<(), StoreError> {
        crate::copy::copy_database(&self.inner, path)
    }

    /// Copies the database, compacted, to a new file at `path` (0600,
    /// synced): a snapshot for a replica. Returns the marker the copy
    /// holds, which says exactly what it contains (the copy is one read
    /// transaction, the marker read from the copy itself).
    pub fn copy_for_snapshot(&self, path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
        self.copy_to(path)?;
        let (env, meta) = open_copy(path)?;
        let rtxn = env.read_txn()?;
        Ok(meta.get(&rtxn, APPLIED_MARKER)?.map(<[u8]>::to_vec))
    }

    /// Replaces every record of the database with those of the copy at
    /// `path` ([`Store::copy_for_snapshot`] made it), in one transaction
    /// of the writer: readers see the old database or the new one.
    /// Returns the marker the copy holds.
    pub async fn install_copy(&self, path: PathBuf) -> Result<Option<Vec<u8>>, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.writer
            .send(Work::Install(InstallJob { path, reply }))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// Opens a database copy read-only: its environment and `meta` table.
fn open_copy(path: &Path) -> Result<(Env<WithoutTls>, Database<Bytes, Bytes>), StoreError> {
    let mut open = EnvOpenOptions::new().read_txn_without_tls();
    open.max_dbs(8).map_size(1 << 40);
    // SAFETY: the copy is a file of our own, written and synced before it
    // is opened, opened once, read-only, and not changed while mapped.
    #[allow(unsafe_code)]
    let env = unsafe {
        open.flags(EnvFlags::NO_SUB_DIR | EnvFlags::READ_ONLY | EnvFlags::NO_LOCK);
        open.open(path)
    }?;
    let meta = {
        let rtxn = env.read_txn()?;
        let meta = env.open_database(&rtxn, Some("meta"))?.ok_or_else(|| {
            StoreError::Config(format!("{} is not a Meridian database", path.display()))
        })?;
        // A table opened in a read transaction stays open for the
        // environment only if that transaction commits.
        rtxn.commit()?;
        meta
    };
    Ok((env, meta))
}

/// The writer's part of [`Store::install_copy`].
pub(crate) fn install(inner: &Inner, job: InstallJob) {
    let InstallJob { path, reply } = job;
    let _ = reply.send(install_from(inner, &path));
}

fn install_from(inner: &Inner, path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    let (env, _) = open_copy(path)?;
    let rtxn = env.read_txn()?;
    let table = |name: &str| -> Result<Database<Bytes, Bytes>, StoreError> {
        env.open_database(&rtxn, Some(name))?
            .ok_or_else(|| StoreError::Config(format!("{} has no `{name}` table", path.display())))
    };
    let pairs = [
        (table("meta")?, inner.dbs.meta),
        (table("id2entry")?, inner.dbs.id2entry),
        (table("dn2id")?, inner.dbs.dn2id),
        (table("children")?, inner.dbs.children),
        (table("index")?, inner.dbs.index),
    ];
    let marker = pairs
        .first()
        .map(|(meta, _)| meta.get(&rtxn, APPLIED_MARKER))
        .transpose()?
        .flatten()
        .map(<[u8]>::to_vec);
    loop {
        let attempt = (|| -> Result<(), StoreError> {
            let mut wtxn = inner.env.write_txn()?;
            for (from, to) in &pairs {
                to.clear(&mut wtxn)?;
                for item in from.iter(&rtxn)? {
                    let (key, value) = item?;
                    // Keys come in order: appended, no page splits searched.
                    to.put_with_flags(&mut wtxn, PutFlags::APPEND, key, value)?;
                }
            }
            inner.columns.replaced(wtxn.id() as u64);
            wtxn.commit()?;
            inner.feed.reset();
            Ok(())
        })();
        match attempt {
            Ok(()) => break,
            Err(StoreError::MapFull) => {
                crate::writer::grow(inner).map_err(|e| crate::writer::settle_failure(inner, e))?
            }
            Err(e) => return Err(crate::writer::settle_failure(inner, e)),
        }
    }
    inner
        .commits
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let names = {
        let live = inner.env.read_txn()?;
        crate::names::NameTable::load(&live, &inner.dbs, &inner.schema)?
    };
    inner.publish_names(Arc::new(names));
    inner
        .dn_ids
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    crate::settle_index_record(inner, true)?;
    Ok(marker)
}

/// The marker of a replicated store open for writing: `replicated.running`
/// beside `data.mdb`, holding the kernel's boot ID, removed once a clean
/// close has synced the database. Found at open with another boot's ID
/// (or unreadable), it means the machine went down while commits were
/// unsynced: the database is discarded and rebuilt by the replication
/// layer (its own snapshot, then the log). A process crash leaves this
/// boot's ID and the database whole.
pub(crate) struct Running {
    path: PathBuf,
}

const RUNNING: &str = "replicated.running";

impl Running {
    /// Before the environment opens: discards a database a machine crash
    /// left untrustworthy.
    pub(crate) fn begin(env: &Path) -> Result<Running, StoreError> {
        let path = env.join(RUNNING);
        match std::fs::read_to_string(&path) {
            Ok(text) if crate::journal::boot_id().is_some_and(|now| now == text.trim()) => {}
            Ok(_) => {
                tracing::warn!(
                    "the machine stopped while this replica's database was written without fsync: it is discarded and rebuilt from the last snapshot and the log"
                );
                for file in ["data.mdb", "lock.mdb"] {
                    let victim = env.join(file);
                    match std::fs::remove_file(&victim) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(StoreError::io("remove", victim.display(), &e)),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("read", path.display(), &e)),
        }
        Ok(Running { path })
    }

    /// Once the environment is open: this boot writes it now.
    pub(crate) fn mark(self) -> Result<(), StoreError> {
        let id = crate::journal::boot_id().unwrap_or_default();
        crate::private::replace_file(&self.path, id.as_bytes())
            .map_err(|e| StoreError::io("write", self.path.display(), &e))
    }

    /// Whether the store at `env` is a replicated one (its marker is there).
    pub(crate) fn is_replicated(env: &Path) -> bool {
        env.join(RUNNING).is_file()
    }

    /// After a clean close synced the database: removes the marker.
    pub(crate) fn end(env: &Path) {
        let path = env.join(RUNNING);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}
