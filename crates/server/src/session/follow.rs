//! Searches that follow the directory's changes: content
//! synchronization (RFC 4533, the Sync Request control) and persistent
//! search (draft-ietf-ldapext-psearch-03), each on its own task.
//!
//! Both begin as the ordinary search they carry, run step by step as a
//! streamed search runs (`search.rs`), its entries relabelled with the
//! controls of the change they report (`meridian_directory::follow`).
//! A synchronization's refresh sends, per the consumer's cookie, either
//! the entries changed since it and the deletes the store's session log
//! holds (the delete phase), or every entry, the unchanged ones as bare
//! DNs in the present state (the present phase). Then a persistent one
//! follows the store's change feed (`meridian_store::feed`): for each
//! entry a commit touched, a base search on it with the request's filter
//! and attributes says what the client may see of it now. A follower
//! that falls `storage.change_feed_batches` commits behind is ended
//! (e-syncRefreshRequired, or adminLimitExceeded for a persistent
//! search), never buffered for.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use meridian_directory::follow::{self, Asked, Found, Label, SyncCookie};
use meridian_directory::{
    Directory, Identity, Outcome, SearchControls, SearchCursor, SearchDone, Step,
};
use meridian_model::dn::Dn;
use meridian_proto::message::IntermediateResponse;
use meridian_proto::sync::{
    PersistentSearch, SyncInfo, SyncMode, SyncState, change_type, encode_entry_change,
    encode_sync_done, encode_sync_state, oid as sync_oid,
};
use meridian_proto::{Control, LdapMessage, ProtocolOp, ResultCode, Scope, SearchRequest, Seq};
use meridian_store::feed::{Committed, DeletedEntry, EntryChange};
use tokio::sync::broadcast::error::RecvError;

use super::reply::{Reply, ldap_result, log_search};
use super::search::{OwnedSearch, SEARCH_ROOM_BYTES, SEARCH_STEP_BYTES};
use super::{Action, Session};
use crate::inflight::{InFlight, Kind, Stop};
use crate::outbound::{Outbound, ResponseBatch};

/// What a following search asked for.
pub(super) enum Wanted {
    /// Content synchronization.
    Sync {
        /// refreshOnly or refreshAndPersist.
        mode: SyncMode,
        /// The consumer's cookie (empty: a first synchronization).
        cookie: SyncCookie,
    },
    /// A persistent search.
    Persistent(PersistentSearch),
}

impl Wanted {
    fn persists(&self) -> bool {
        !matches!(
            self,
            Wanted::Sync {
                mode: SyncMode::RefreshOnly,
                ..
            }
        )
    }
}

/// How often a follower whose client reads nothing looks whether the
/// change feed has left it behind.
const LAG_CHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// Most syncUUIDs in one Sync Info message.
const UUIDS_PER_MESSAGE: usize = 1000;

/// The count of following searches, in all (`server.max_followers`)
/// and per connection; a place is held by the search's task.
pub(crate) struct FollowerSlot {
    total: Arc<AtomicUsize>,
    connection: Arc<AtomicUsize>,
}

impl FollowerSlot {
    fn take(
        total: &Arc<AtomicUsize>,
        connection: &Arc<AtomicUsize>,
        limits: (usize, usize),
    ) -> Result<FollowerSlot, String> {
        let (most, most_here) = limits;
        if connection.fetch_add(1, Ordering::AcqRel) >= most_here {
            connection.fetch_sub(1, Ordering::AcqRel);
            return Err(format!(
                "this connection already has {most_here} searches following changes (server.max_followers_per_connection)"
            ));
        }
        if total.fetch_add(1, Ordering::AcqRel) >= most {
            total.fetch_sub(1, Ordering::AcqRel);
            connection.fetch_sub(1, Ordering::AcqRel);
            return Err(format!(
                "the server already serves {most} searches following changes (server.max_followers)"
            ));
        }
        Ok(FollowerSlot {
            total: Arc::clone(total),
            connection: Arc::clone(connection),
        })
    }
}

impl Drop for FollowerSlot {
    fn drop(&mut self) {
        self.total.fetch_sub(1, Ordering::AcqRel);
        self.connection.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Session {
    /// A search with the Sync Request or Persistent Search control.
    pub(super) fn follow_request(
        &mut self,
        search: &SearchRequest<'_>,
        base: Dn,
        wanted: Wanted,
        manage_dsa_it: bool,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let ctx = reply.ctx;
        let slot = if wanted.persists() {
            let limits = (ctx.followers.most, ctx.followers.most_per_connection);
            match FollowerSlot::take(&ctx.followers.serving, &self.following, limits) {
                Ok(slot) => Some(slot),
                Err(message) => {
                    return reply.result(
                        search.base,
                        ResultCode::ADMIN_LIMIT_EXCEEDED,
                        message.as_bytes(),
                    );
                }
            }
        } else {
            None
        };
        let asked_for: Vec<Vec<u8>> = search.attributes.iter().map(<[u8]>::to_vec).collect();
        let (attributes, asked) = follow::follower_attributes(&asked_for);
        let controls = SearchControls {
            manage_dsa_it,
            ..SearchControls::default()
        };
        let view = ctx
            .directory
            .change_view(&self.identity, search, base.clone());
        let mut request = OwnedSearch::new(search, controls);
        request.attributes = attributes;
        let follower = Follower {
            pipe: Pipe {
                directory: Arc::clone(&ctx.directory),
                identity: self.identity.clone(),
                outbound: Arc::clone(out),
                in_flight: self.running.start(reply.id, Kind::Search),
                id: reply.id,
            },
            request,
            base,
            asked,
            view,
            wanted,
            access_log: ctx.access_log,
            conn: self.conn_id,
            started: reply.started,
            _slot: slot,
        };
        tokio::spawn(follower.run());
        Action::Spawned
    }
}

/// Why a following search stopped before its end.
enum Stopped {
    /// Abandoned, or the connection is gone: nothing more is sent.
    Silently,
    /// It ended with this SearchResultDone, sent.
    Done(SearchDone),
}

/// What a follower sends through, and how it runs a search.
struct Pipe {
    directory: Arc<Directory>,
    identity: Identity,
    outbound: Arc<Outbound>,
    in_flight: Arc<InFlight>,
    id: i32,
}

impl Pipe {
    /// Sends a SearchResultDone with `control`, which ends the operation.
    fn done(&self, outcome: Outcome, control: Option<Control<'_>>, entries: u64) -> SearchDone {
        let mut batch = ResponseBatch::default();
        let urls: Vec<&[u8]> = Vec::new();
        let controls: Vec<Control<'_>> = control.into_iter().collect();
        LdapMessage {
            message_id: self.id,
            op: ProtocolOp::SearchResultDone(ldap_result(&outcome, &urls)),
            controls: Seq::from_items(&controls),
        }
        .encode(&mut batch.bytes);
        batch.completed = 1;
        self.outbound.push(&mut batch);
        let mut done = SearchDone::new(outcome);
        done.entries = entries;
        done
    }

    fn fail(&self, code: ResultCode, message: impl Into<String>, entries: u64) -> Stopped {
        Stopped::Done(self.done(Outcome::new(code, message), None, entries))
    }

    /// Waits for room in the outbound buffer, honouring Abandon and
    /// Cancel.
    async fn ready(&self, entries: u64) -> Result<(), Stopped> {
        if !self.outbound.wait_room(SEARCH_ROOM_BYTES).await {
            return Err(Stopped::Silently);
        }
        match self.in_flight.stop_requested() {
            None => Ok(()),
            Some(stop) => Err(self.stopped(stop, entries)),
        }
    }

    fn stopped(&self, stop: Stop, entries: u64) -> Stopped {
        match stop {
            Stop::Abandon => {
                // No response; the operation's permit comes back.
                let mut batch = ResponseBatch {
                    completed: 1,
                    ..ResponseBatch::default()
                };
                self.outbound.push(&mut batch);
                Stopped::Silently
            }
            Stop::Cancel => self.fail(
                ResultCode::CANCELED,
                "canceled by the client's Cancel request (RFC 3909)",
                entries,
            ),
        }
    }

    /// Runs `request` to its end, each step's entries relabelled by
    /// `decide` and sent; returns its result, not sent.
    async fn search(
        &self,
        request: &OwnedSearch,
        asked: Asked,
        entries: &mut u64,
        mut decide: impl FnMut(&Found<'_>) -> Option<Label>,
    ) -> Result<SearchDone, Stopped> {
        let Some(base) = request
            .with(|req, _| self.directory.parse_dn(req.base).ok())
            .flatten()
        else {
            return Err(self.fail(
                ResultCode::INVALID_DN_SYNTAX,
                "the base DN does not parse",
                0,
            ));
        };
        let mut cursor = SearchCursor::with_base(base);
        let mut scratch = Vec::new();
        loop {
            self.ready(*entries).await?;
            scratch.clear();
            let step = request.with(|req, controls| {
                self.directory.search_step(
                    &self.identity,
                    req,
                    self.id,
                    &mut scratch,
                    controls,
                    &mut cursor,
                    SEARCH_STEP_BYTES,
                )
            });
            let mut batch = ResponseBatch::default();
            *entries += follow::relabel(&scratch, &mut batch.bytes, asked, &mut decide) as u64;
            self.outbound.push(&mut batch);
            match step {
                Some(Step::More) => tokio::task::yield_now().await,
                Some(Step::Done(done)) => return Ok(done),
                None => return Err(self.fail(ResultCode::OTHER, "search state lost", *entries)),
            }
        }
    }

    /// Sends a Sync Info message.
    fn sync_info(&self, info: &SyncInfo<'_>) {
        let mut value = Vec::new();
        info.encode(&mut value);
        let mut batch = ResponseBatch::default();
        LdapMessage {
            message_id: self.id,
            op: ProtocolOp::IntermediateResponse(IntermediateResponse {
                name: Some(sync_oid::SYNC_INFO),
                value: Some(&value),
            }),
            controls: Seq::empty(),
        }
        .encode(&mut batch.bytes);
        self.outbound.push(&mut batch);
    }
}

/// A following search, on its own task.
struct Follower {
    pipe: Pipe,
    /// The search as the client sent it, with entryUUID and entryCSN
    /// among its attributes.
    request: OwnedSearch,
    base: Dn,
    asked: Asked,
    /// What it sends of a changed entry, prepared once.
    view: follow::ChangeView,
    wanted: Wanted,
    access_log: bool,
    conn: u64,
    started: Instant,
    _slot: Option<FollowerSlot>,
}

impl Follower {
    async fn run(mut self) {
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
    async fn serve(&mut self) -> Result<SearchDone, Stopped> {
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
    async fn refresh(
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

    /// The persist stage: each commit's changes, until the client
    /// abandons or cancels the search or goes away.
    async fn persist(
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
    async fn room_or_behind(
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
    fn fall_behind(&self, why: &str, entries: u64) -> Stopped {
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
    fn deliver(
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
        let mut told: Vec<u64> = Vec::new();
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
                    if told.contains(id) {
                        continue;
                    }
                    told.push(*id);
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
                    let dn = old_dn.unwrap_or(&rendered.dn);
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
    fn send_entry(
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

    fn send_sync_delete(&self, out: &mut Vec<u8>, dn: &Dn, uuid: &[u8; 16]) {
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
    fn send_deleted(
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

    fn in_scope(&self, dn: &Dn) -> bool {
        self.view.in_scope(dn)
    }

    fn may_know_of(&self, dn: &Dn) -> bool {
        self.pipe.directory.may_know_of(&self.pipe.identity, dn)
    }
}

fn wants(how: &PersistentSearch, kind: u8) -> bool {
    how.change_types & kind != 0
}

/// Whether the controls a following search carries combine: a Sync
/// Request or a Persistent Search control alone, without paging, sort
/// or virtual list view (slapd refuses those together too).
pub(super) fn refuse_combination(
    sync: bool,
    persistent: bool,
    paged_sorted_or_vlv: bool,
) -> Option<&'static str> {
    if sync && persistent {
        return Some("the Sync Request and Persistent Search controls do not go together");
    }
    if paged_sorted_or_vlv {
        return Some(
            "a search following changes does not take paged results, sort or virtual list view",
        );
    }
    None
}

impl OwnedSearch {
    /// The same search at another base and scope.
    pub(super) fn at(&self, base: &[u8], scope: Scope) -> OwnedSearch {
        OwnedSearch {
            base: base.to_vec(),
            scope,
            deref: self.deref,
            size_limit: self.size_limit,
            time_limit: self.time_limit,
            types_only: self.types_only,
            filter: self.filter.clone(),
            attributes: self.attributes.clone(),
            page: None,
            manage_dsa_it: self.manage_dsa_it,
            matched_values: self.matched_values.clone(),
            sort: None,
            vlv: None,
        }
    }

    /// The same search for the entries whose entryCSN is at least
    /// `since`: `(&(filter)(entryCSN>=since))`, so an index or scan
    /// column on entryCSN can serve it.
    pub(super) fn narrowed_to_changes_since(&self, since: &[u8]) -> OwnedSearch {
        use meridian_ber::{Tag, Writer};
        let mut narrowed = self.at(&self.base, self.scope);
        let mut filter = Vec::with_capacity(self.filter.len() + since.len() + 16);
        let mut w = Writer::new(&mut filter);
        let and = w.start(Tag::context(0, true));
        w.raw(&self.filter);
        let at_least = w.start(Tag::context(5, true));
        w.octets(Tag::OCTET_STRING, b"entryCSN");
        w.octets(Tag::OCTET_STRING, since);
        w.end(at_least);
        w.end(and);
        narrowed.filter = filter;
        narrowed
    }
}
