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

use meridian_directory::SearchControls;
use meridian_directory::follow::{self, SyncCookie};
use meridian_model::dn::Dn;
use meridian_proto::sync::{PersistentSearch, SyncMode};
use meridian_proto::{ResultCode, Scope, SearchRequest};

use super::controls::RequestControls;
use super::reply::Reply;
use super::search::OwnedSearch;
use super::{Action, Session};
use crate::inflight::Kind;
use crate::outbound::Outbound;

use follower::Follower;
use pipe::Pipe;

mod follower;
mod persist;
mod pipe;

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

/// Why the controls a following search carries do not combine: a Sync
/// Request or a Persistent Search control alone, without paging, sort
/// or virtual list view (slapd refuses those together too).
fn refuse_combination(controls: &RequestControls<'_>) -> Option<&'static str> {
    if controls.sync.is_some() && controls.persistent.is_some() {
        return Some("the Sync Request and Persistent Search controls do not go together");
    }
    if controls.page.is_some() || controls.sort.is_some() || controls.vlv.is_some() {
        return Some(
            "a search following changes does not take paged results, sort or virtual list view",
        );
    }
    None
}

impl Session {
    /// A search with the Sync Request or Persistent Search control: its
    /// controls checked, then followed ([`Session::follow_request`]).
    pub(super) fn follow_search(
        &mut self,
        search: &SearchRequest<'_>,
        base: Dn,
        controls: &RequestControls<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        if let Some(why) = refuse_combination(controls) {
            return reply.result(
                search.base,
                ResultCode::UNWILLING_TO_PERFORM,
                why.as_bytes(),
            );
        }
        let wanted = match (controls.sync, controls.persistent) {
            (Some(sync), _) => match sync.cookie.map(SyncCookie::parse).transpose() {
                Ok(cookie) => Wanted::Sync {
                    mode: sync.mode,
                    cookie: cookie.unwrap_or_default(),
                },
                Err(why) => {
                    return reply.result(search.base, ResultCode::PROTOCOL_ERROR, why.as_bytes());
                }
            },
            (None, Some(persistent)) => Wanted::Persistent(persistent),
            (None, None) => return Action::NoResponse,
        };
        self.follow_request(search, base, wanted, controls.manage_dsa_it, reply, out)
    }
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
