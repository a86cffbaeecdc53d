//! A following search's task: the refresh of a synchronization (or the
//! initial entries of a persistent search), then the persist stage
//! (`persist.rs`).

use std::sync::Arc;
use std::time::Instant;

use meridian_directory::follow::{self, Asked, Label, SyncCookie};
use meridian_directory::{Outcome, SearchDone};
use meridian_model::dn::Dn;
use meridian_proto::sync::{
    SyncInfo, SyncMode, SyncState, encode_sync_done, encode_sync_state, oid as sync_oid,
};
use meridian_proto::{Control, ResultCode};
use meridian_store::feed::DeletedEntry;

use super::pipe::{Pipe, Stopped};
use super::{FollowerSlot, UUIDS_PER_MESSAGE, Wanted};
use crate::session::reply::log_search;
use crate::session::search::OwnedSearch;

/// A following search, on its own task.
pub(super) struct Follower {
    pub(super) pipe: Pipe,
    /// The search as the client sent it, with entryUUID and entryCSN
    /// among its attributes.
    pub(super) request: OwnedSearch,
    pub(super) base: Dn,
    pub(super) asked: Asked,
    /// What it sends of a changed entry, prepared once.
    pub(super) view: follow::ChangeView,
    pub(super) wanted: Wanted,
    pub(super) access_log: bool,
    pub(super) conn: u64,
    pub(super) started: Instant,
    pub(super) _slot: Option<FollowerSlot>,
}

impl Follower {
    pub(super) async fn run(mut self) {
        let done = match self.serve().await {
            Ok(done) | Err(Stopped::Done(done)) => Some(done),
            Err(Stopped::Silently) => None,
        };
        self.pipe.in_flight.finish();
        let (access_log, conn, id, started) =
            (self.access_log, self.conn, self.pipe.id, self.started);
        self.request.with(|search, _| {
            log_search(access_log, conn, id, search, done.as_ref(), started);
        });
    }

    /// The refresh, then (when asked) the changes until the client stops.
    pub(super) async fn serve(&mut self) -> Result<SearchDone, Stopped> {
        // Following first, then the context CSNs, then the content: a
        // change committed in between is both in the content and told
        // again, never in neither.
        let store = self.pipe.directory.store_holding(&self.base);
        let mut feed = store.follow();
        let directory = Arc::clone(&self.pipe.directory);
        let base = self.base.clone();
        let context =
            tokio::task::spawn_blocking(move || directory.store_holding(&base).context_csns())
                .await;
        let Ok(Ok(context)) = context else {
            return Err(self.pipe.fail(
                ResultCode::OTHER,
                "the directory's change sequence numbers could not be read",
                0,
            ));
        };
        let mut entries = 0;
        match &mut self.wanted {
            Wanted::Sync { mode, cookie } => {
                let mode = *mode;
                let mut cookie = std::mem::take(cookie);
                if let Some(done) = self
                    .refresh(&mut cookie, &context, mode, &mut entries)
                    .await?
                {
                    return Ok(done);
                }
                self.persist(&mut feed, Some(cookie), &mut entries).await
            }
            Wanted::Persistent(how) => {
                if !how.changes_only {
                    let done = self
                        .pipe
                        .search(&self.request, self.asked, &mut entries, |_| {
                            Some(Label {
                                control: None,
                                attributes: true,
                            })
                        })
                        .await?;
                    if done.outcome.code != ResultCode::SUCCESS {
                        let outcome = done.outcome;
                        return Ok(self.pipe.done(outcome, None, entries));
                    }
                }
                self.persist(&mut feed, None, &mut entries).await
            }
        }
    }

    /// A synchronization's refresh (RFC 4533 section 3.3), ended by its
    /// SearchResultDone (refreshOnly: returned) or its Sync Info message
    /// (refreshAndPersist: `None`, the persist stage follows).
    pub(super) async fn refresh(
        &mut self,
        cookie: &mut SyncCookie,
        context: &meridian_store::feed::ContextCsns,
        mode: SyncMode,
        entries: &mut u64,
    ) -> Result<Option<SearchDone>, Stopped> {
        let store = self.pipe.directory.store_holding(&self.base);
        // The delete phase when the session log covers the cookie; else
        // the present phase (and always for a first synchronization).
        let deleted: Option<(Vec<u8>, Vec<DeletedEntry>)> = cookie
            .seen_before()
            .and_then(|since| store.deleted_since(&since).map(|log| (since, log)));
        let request = match &deleted {
            Some((since, _)) => self.request.narrowed_to_changes_since(since),
            None => self.request.at(&self.request.base, self.request.scope),
        };
        let seen = cookie.clone();
        let present_phase = deleted.is_none();
        let done = self
            .pipe
            .search(&request, self.asked, entries, |found| {
                let uuid = found.uuid?;
                let changed = seen.changed_since(found.csn);
                let state = if changed {
                    SyncState::Add
                } else if present_phase {
                    SyncState::Present
                } else {
                    return None;
                };
                let mut value = Vec::new();
                encode_sync_state(&mut value, state, &uuid, None);
                Some(Label {
                    control: Some((sync_oid::SYNC_STATE, value)),
                    attributes: changed,
                })
            })
            .await?;
        if done.outcome.code != ResultCode::SUCCESS {
            return Err(Stopped::Done(self.pipe.done(done.outcome, None, *entries)));
        }
        if let Some((_, log)) = &deleted {
            let uuids: Vec<&[u8]> = log
                .iter()
                .filter(|gone| self.in_scope(&gone.dn) && self.may_know_of(&gone.dn))
                .map(|gone| gone.uuid.as_slice())
                .collect();
            for chunk in uuids.chunks(UUIDS_PER_MESSAGE) {
                self.pipe.ready(*entries).await?;
                self.pipe.sync_info(&SyncInfo::IdSet {
                    cookie: None,
                    refresh_deletes: true,
                    uuids: chunk.to_vec(),
                });
            }
        }
        for csn in context.values() {
            cookie.advance(csn);
        }
        let encoded = cookie.encode(&cookie.csns);
        match mode {
            SyncMode::RefreshOnly => {
                let mut value = Vec::new();
                encode_sync_done(&mut value, Some(&encoded), !present_phase);
                let control = Control {
                    oid: sync_oid::SYNC_DONE,
                    critical: false,
                    value: Some(&value),
                };
                let outcome = Outcome::new(ResultCode::SUCCESS, "");
                Ok(Some(self.pipe.done(outcome, Some(control), *entries)))
            }
            SyncMode::RefreshAndPersist => {
                let cookie = Some(encoded.as_slice());
                self.pipe.sync_info(&if present_phase {
                    SyncInfo::RefreshPresent { cookie, done: true }
                } else {
                    SyncInfo::RefreshDelete { cookie, done: true }
                });
                Ok(None)
            }
        }
    }
}
