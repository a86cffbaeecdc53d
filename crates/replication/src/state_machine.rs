//! The state machine: the directory's store, written only by committed
//! log entries.
//!
//! Each call of `apply` gathers the commands of its entries (those of a
//! batch already applied, a forwarded batch sent twice, are skipped by
//! its origin's session and sequence number) and applies them in one
//! store transaction, which also records the [`Marker`]: the last
//! applied log ID, the membership, and the last batch applied from each
//! origin. A crash leaves the database and the marker in agreement, so
//! openraft replays the log from exactly the marker on.
//!
//! A command a store refuses (a DN that exists, a schema violation) is
//! that command's result, the same on every node, since applying is
//! deterministic. A failure of the transaction itself (a full disk, an
//! I/O error) is not: it stops this node's state machine (openraft turns
//! the error into a fatal stop) rather than be recorded as a result
//! other nodes would not have.

use std::io;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use meridian_model::Schema;
use meridian_store::replicated::decode_commands;
use meridian_store::{Command, Store};
use openraft::EntryPayload;
use openraft::storage::{EntryResponder, RaftStateMachine};

use crate::marker::Marker;
use crate::pending::Pending;
use crate::snapshot::{SnapshotBuilder, SnapshotFile, Snapshots};
use crate::store_io::store_failed;
use crate::types::{LogId, Meridian, NodeId, StoredMembership};

/// Most commands applied in one store transaction when a call brings
/// many entries (a node catching up): bounds the transaction's memory.
const MAX_COMMANDS_PER_TRANSACTION: usize = 8192;

/// Shown the commands of other nodes before they are applied here, so
/// the directory learns what its own prepare would have taught it: the
/// entryCSNs (its clock never goes below them) and whether referral
/// objects, aliases or dynamic entries may now exist. Set once the
/// directory exists.
pub type AppliedObserver = Arc<std::sync::OnceLock<Box<dyn Fn(&[Command]) + Send + Sync>>>;

/// The state machine over a store.
pub struct StateMachine {
    store: Store,
    schema: Arc<Schema>,
    me: NodeId,
    marker: Marker,
    pending: Arc<Pending>,
    snapshots: Arc<Snapshots>,
    observer: AppliedObserver,
}

/// Commands gathered for one transaction, and whom to answer after it.
#[derive(Default)]
struct Gathered {
    commands: Vec<Command>,
    /// Batches of this node: `(session, seq, log index, first command, count)`.
    ours: Vec<(u64, u64, u64, usize, usize)>,
    responders: Vec<openraft::storage::ApplyResponder<Meridian>>,
    entries: usize,
    /// Other nodes' commands, by position in `commands`.
    theirs: Vec<std::ops::Range<usize>>,
}

impl StateMachine {
    pub(crate) fn new(
        store: Store,
        me: NodeId,
        marker: Marker,
        pending: Arc<Pending>,
        snapshots: Arc<Snapshots>,
        observer: AppliedObserver,
    ) -> StateMachine {
        let schema = Arc::clone(store.schema());
        StateMachine {
            store,
            schema,
            me,
            marker,
            pending,
            snapshots,
            observer,
        }
    }

    /// Adds one entry to `gathered`, and notes it in the marker.
    fn gather(&mut self, entry: crate::types::Entry, gathered: &mut Gathered) -> io::Result<()> {
        match entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Membership(membership) => {
                self.marker.membership = StoredMembership::new(Some(entry.log_id), membership);
            }
            EntryPayload::Normal(batch) => {
                let last = self.marker.origins.get(&batch.origin).copied();
                let fresh = last.is_none_or(|last| (batch.session, batch.seq) > last);
                if fresh {
                    // This node's own batch, filed by this life, is
                    // applied from the commands its proposer encoded,
                    // when it still has them, and answered here.
                    let claimed = (batch.origin == self.me)
                        .then(|| self.pending.claim(&batch))
                        .flatten();
                    let ours = claimed.is_some();
                    if batch.origin == self.me && !ours && batch.session > self.pending.session {
                        tracing::error!(
                            %batch,
                            session = self.pending.session,
                            "an earlier life of this node had a higher session than this one (was the clock set back?): this node's writes will be skipped as applied before; restart it to take a new session"
                        );
                    }
                    let commands = match claimed.flatten() {
                        Some(commands) => commands,
                        None => decode_commands(&batch.commands, &self.schema).map_err(|e| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!(
                                    "log entry {} holds commands that do not decode: {e}",
                                    entry.log_id
                                ),
                            )
                        })?,
                    };
                    if ours {
                        gathered.ours.push((
                            batch.session,
                            batch.seq,
                            entry.log_id.index,
                            gathered.commands.len(),
                            commands.len(),
                        ));
                    } else {
                        let first = gathered.commands.len();
                        gathered.theirs.push(first..first + commands.len());
                    }
                    gathered.commands.extend(commands);
                    self.marker
                        .origins
                        .insert(batch.origin, (batch.session, batch.seq));
                } else {
                    tracing::debug!(%batch, "a batch applied before: skipped");
                }
            }
        }
        self.marker.applied = Some(entry.log_id);
        gathered.entries += 1;
        Ok(())
    }

    /// Applies what was gathered with the marker, then answers.
    async fn flush(&mut self, gathered: Gathered) -> io::Result<()> {
        if gathered.entries == 0 {
            return Ok(());
        }
        let Gathered {
            commands,
            ours,
            responders,
            theirs,
            ..
        } = gathered;
        if let Some(observe) = self.observer.get() {
            for range in theirs {
                observe(commands.get(range).unwrap_or_default());
            }
        }
        let marker = self.marker.encode()?;
        let applied = self
            .store
            .apply_replicated(commands, marker)
            .await
            .map_err(|e| {
                tracing::error!(
                    "applying committed log entries failed: {e}; this node stops applying"
                );
                store_failed("applying committed log entries")(e)
            })?;
        // Each command goes back with its result to the client that made
        // it, to be freed there; other nodes' commands are freed here.
        let mut done = applied.results.into_iter().zip(applied.spent);
        let mut at = 0;
        for (session, seq, index, first, count) in ours {
            done.by_ref().take(first.saturating_sub(at)).for_each(drop);
            let batch: Vec<_> = done.by_ref().take(count).collect();
            at = first + count;
            self.pending.applied(session, seq, index, batch.into_iter());
        }
        for responder in responders {
            responder.send(());
        }
        Ok(())
    }
}

impl RaftStateMachine<Meridian> for StateMachine {
    type SnapshotData = SnapshotFile;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        Ok((self.marker.applied, self.marker.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<Meridian>, io::Error>> + Unpin + Send,
    {
        let mut gathered = Gathered::default();
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            self.gather(entry, &mut gathered)?;
            if let Some(responder) = responder {
                gathered.responders.push(responder);
            }
            if gathered.commands.len() >= MAX_COMMANDS_PER_TRANSACTION {
                let full = std::mem::take(&mut gathered);
                self.flush(full).await?;
            }
        }
        self.flush(gathered).await
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder::new(self.store.clone(), Arc::clone(&self.snapshots))
    }

    async fn install_snapshot(
        &mut self,
        meta: &openraft::alias::SnapshotMetaOf<Meridian>,
        snapshot: Self::SnapshotData,
    ) -> Result<(), io::Error> {
        let marker = self.snapshots.install(&self.store, meta, snapshot).await?;
        self.marker = marker;
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::alias::SnapshotOf<Meridian, Self::SnapshotData>>, io::Error> {
        self.snapshots.current()
    }
}
