//! The persist stage: each commit's changes, from the store's feed,
//! rendered for the follower.

use std::sync::Arc;

use meridian_directory::SearchDone;
use meridian_directory::follow::{self, Found, Label, SyncCookie};
use meridian_model::dn::Dn;
use meridian_proto::ResultCode;
use meridian_proto::sync::{
    PersistentSearch, SyncState, change_type, encode_entry_change, encode_sync_state,
    oid as sync_oid,
};
use meridian_store::feed::{Committed, EntryChange};
use tokio::sync::broadcast::error::RecvError;

use super::follower::Follower;
use super::pipe::Stopped;
use super::{LAG_CHECK, Wanted};
use crate::outbound::ResponseBatch;
use crate::session::search::SEARCH_ROOM_BYTES;

impl Follower {
    /// The persist stage: each commit's changes, until the client
    /// abandons or cancels the search or goes away.
    pub(super) async fn persist(
        &mut self,
        feed: &mut tokio::sync::broadcast::Receiver<Arc<Committed>>,
        mut cookie: Option<SyncCookie>,
        entries: &mut u64,
    ) -> Result<SearchDone, Stopped> {
        let capacity = self
            .pipe
            .directory
            .store_holding(&self.base)
            .feed_capacity();
        loop {
            self.room_or_behind(feed, capacity, *entries).await?;
            let received = tokio::select! {
                stop = self.pipe.in_flight.stop_asked() => {
                    return Err(self.pipe.stopped(stop, *entries));
                }
                () = self.pipe.outbound.gone() => return Err(Stopped::Silently),
                received = feed.recv() => received,
            };
            let committed = match received {
                Ok(committed) if !committed.reset => committed,
                Ok(_) => {
                    return Err(self.fall_behind(
                        "the directory was replaced by a snapshot from the cluster's leader",
                        *entries,
                    ));
                }
                Err(RecvError::Lagged(missed)) => {
                    let why = format!(
                        "this search fell {missed} commits behind the directory's changes (storage.change_feed_batches)"
                    );
                    return Err(self.fall_behind(&why, *entries));
                }
                Err(RecvError::Closed) => {
                    return Err(self.pipe.fail(
                        ResultCode::UNAVAILABLE,
                        "the server is shutting down",
                        *entries,
                    ));
                }
            };
            self.deliver(&committed, cookie.as_mut(), entries);
        }
    }

    /// Waits for room in the outbound buffer; a client that does not
    /// read for as long as the feed keeps commits is dropped then, not
    /// when it next reads (it may never).
    pub(super) async fn room_or_behind(
        &self,
        feed: &tokio::sync::broadcast::Receiver<Arc<Committed>>,
        capacity: usize,
        entries: u64,
    ) -> Result<(), Stopped> {
        loop {
            tokio::select! {
                room = self.pipe.outbound.wait_room(SEARCH_ROOM_BYTES) => {
                    if !room {
                        return Err(Stopped::Silently);
                    }
                    break;
                }
                stop = self.pipe.in_flight.stop_asked() => {
                    return Err(self.pipe.stopped(stop, entries));
                }
                () = tokio::time::sleep(LAG_CHECK) => {
                    if feed.len() >= capacity {
                        let why = "this search's client read nothing while the directory's changes filled the feed (storage.change_feed_batches)";
                        return Err(self.fall_behind(why, entries));
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends a follower that cannot go on from where it is.
    pub(super) fn fall_behind(&self, why: &str, entries: u64) -> Stopped {
        match self.wanted {
            Wanted::Sync { .. } => self.pipe.fail(
                ResultCode::SYNC_REFRESH_REQUIRED,
                format!("{why}: synchronize again (with your cookie)"),
                entries,
            ),
            Wanted::Persistent(_) => self.pipe.fail(
                ResultCode::ADMIN_LIMIT_EXCEEDED,
                format!("{why}: search again"),
                entries,
            ),
        }
    }

    /// Sends what one commit changed that this search sees.
    pub(super) fn deliver(
        &self,
        committed: &Committed,
        mut cookie: Option<&mut SyncCookie>,
        entries: &mut u64,
    ) {
        let store = self.pipe.directory.store_holding(&self.base);
        // One snapshot for the commit's changes: they are all in it.
        let Ok(snapshot) = store.snapshot() else {
            return;
        };
        let mut batch = ResponseBatch::default();
        for (at, change) in committed.changes.iter().enumerate() {
            match change {
                EntryChange::Deleted { dn, uuid, entry } => {
                    if !(self.in_scope(dn) && self.may_know_of(dn)) {
                        continue;
                    }
                    *entries += match (&self.wanted, uuid) {
                        (Wanted::Sync { .. }, Some(uuid)) => {
                            self.send_sync_delete(&mut batch.bytes, dn, uuid);
                            1
                        }
                        (Wanted::Persistent(how), _) if wants(how, change_type::DELETE) => {
                            self.send_deleted(&mut batch.bytes, dn, entry.as_deref(), how)
                        }
                        _ => 0,
                    };
                }
                EntryChange::Added(id)
                | EntryChange::Modified(id)
                | EntryChange::Renamed { id, .. } => {
                    if committed.repeats(at) {
                        continue;
                    }
                    let old_dn = match change {
                        EntryChange::Renamed { old_dn, .. } => Some(old_dn),
                        _ => None,
                    };
                    // Gone since: its delete comes later in the feed.
                    let Some(rendered) = self.send_entry(
                        follow::ChangeAt {
                            committed,
                            at,
                            id: *id,
                            snapshot: &snapshot,
                        },
                        &mut batch.bytes,
                        change,
                        cookie.as_deref_mut(),
                    ) else {
                        continue;
                    };
                    if rendered.sent {
                        *entries += 1;
                        continue;
                    }
                    // A synchronized entry that left the search (renamed
                    // out of its scope, or no longer matching): deleted,
                    // for the consumer.
                    let dn = old_dn.unwrap_or(rendered.dn());
                    if matches!(self.wanted, Wanted::Sync { .. })
                        && self.in_scope(dn)
                        && let Some(uuid) = rendered.uuid
                        && self.may_know_of(dn)
                    {
                        self.send_sync_delete(&mut batch.bytes, dn, &uuid);
                        *entries += 1;
                    }
                }
            }
        }
        drop(snapshot);
        self.pipe.outbound.push(&mut batch);
    }

    /// Sends the entry of `change_at` as the search sees it, labelled for
    /// `change`: not sent (said in what is returned) if it is out of the
    /// search's scope, does not match, may not be seen, or is of a type
    /// of change a persistent search did not ask for; `None` if gone.
    pub(super) fn send_entry(
        &self,
        change_at: follow::ChangeAt<'_>,
        out: &mut Vec<u8>,
        change: &EntryChange,
        mut cookie: Option<&mut SyncCookie>,
    ) -> Option<follow::Rendered> {
        let (kind, previous) = match change {
            EntryChange::Added(_) => (change_type::ADD, None),
            EntryChange::Renamed { old_dn, .. } => (change_type::MOD_DN, Some(old_dn)),
            _ => (change_type::MODIFY, None),
        };
        let wanted = match &self.wanted {
            Wanted::Persistent(how) => wants(how, kind),
            Wanted::Sync { .. } => true,
        };
        let label = |found: &Found<'_>| match &self.wanted {
            _ if !wanted => None,
            Wanted::Sync { .. } => {
                let uuid = found.uuid?;
                // The message moves the consumer's cookie on only when
                // its CSN is above every one sent for its server ID
                // (slapd's consumer ignores a message whose cookie does
                // not); then its cookie names that CSN alone, as
                // syncprov's do.
                let moved = match (cookie.as_deref_mut(), found.csn) {
                    (Some(cookie), Some(csn)) => cookie.advance(csn).then(|| {
                        let mut one = SyncCookie {
                            rid: cookie.rid.clone(),
                            ..SyncCookie::default()
                        };
                        one.advance(csn);
                        one.encode(&one.csns)
                    }),
                    _ => None,
                };
                let state = if kind == change_type::ADD {
                    SyncState::Add
                } else {
                    SyncState::Modify
                };
                let mut value = Vec::new();
                encode_sync_state(&mut value, state, &uuid, moved.as_deref());
                Some(Label {
                    control: Some((sync_oid::SYNC_STATE, value)),
                    attributes: true,
                })
            }
            Wanted::Persistent(how) => Some(Label {
                control: how.return_ecs.then(|| {
                    let mut value = Vec::new();
                    let previous = previous.map(|p| p.original().as_bytes());
                    encode_entry_change(&mut value, kind, previous);
                    (sync_oid::ENTRY_CHANGE, value)
                }),
                attributes: true,
            }),
        };
        self.pipe
            .directory
            .render_changed(&self.view, change_at, self.pipe.id, out, label)
    }

    pub(super) fn send_sync_delete(&self, out: &mut Vec<u8>, dn: &Dn, uuid: &[u8; 16]) {
        let mut value = Vec::new();
        encode_sync_state(&mut value, SyncState::Delete, uuid, None);
        let label = Label {
            control: Some((sync_oid::SYNC_STATE, value)),
            attributes: false,
        };
        follow::encode_labelled(out, self.pipe.id, dn.original().as_bytes(), &[], &label);
    }

    /// A persistent search's notice of a delete: the entry as it was,
    /// if it matched the search and may be seen (the entry is kept for
    /// followers from the transaction on that found them following);
    /// without it, the DN alone.
    pub(super) fn send_deleted(
        &self,
        out: &mut Vec<u8>,
        dn: &Dn,
        entry: Option<&meridian_model::entry::Entry>,
        how: &PersistentSearch,
    ) -> u64 {
        let label = |attributes| Label {
            control: how.return_ecs.then(|| {
                let mut value = Vec::new();
                encode_entry_change(&mut value, change_type::DELETE, None);
                (sync_oid::ENTRY_CHANGE, value)
            }),
            attributes,
        };
        let Some(entry) = entry else {
            follow::encode_labelled(
                out,
                self.pipe.id,
                dn.original().as_bytes(),
                &[],
                &label(false),
            );
            return 1;
        };
        let mut scratch = Vec::new();
        let directory = &self.pipe.directory;
        let sent = self.request.with(|req, _| {
            directory.encode_gone_entry(&self.pipe.identity, req, entry, self.pipe.id, &mut scratch)
        });
        if sent != Some(true) {
            return 0;
        }
        follow::relabel(&scratch, out, self.asked, |_| Some(label(true))) as u64
    }

    pub(super) fn in_scope(&self, dn: &Dn) -> bool {
        self.view.in_scope(dn)
    }

    pub(super) fn may_know_of(&self, dn: &Dn) -> bool {
        self.pipe.directory.may_know_of(&self.pipe.identity, dn)
    }
}

fn wants(how: &PersistentSearch, kind: u8) -> bool {
    how.change_types & kind != 0
}
