//! Search: scopes, limits, paging and streaming, and the two kinds of
//! entries a search treats specially: referral objects (RFC 3296), sent
//! as continuation references unless the client manages the DSA IT, and
//! aliases, followed as the request's derefAliases asks.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use meridian_model::entry::Entry;
use meridian_model::selection::Selection;
use meridian_proto::{DerefAliases, Filter, ResultCode, Scope, SearchRequest, Seq};
use meridian_store::EntryId;

use crate::access::{FilterAttrs, Level};
use crate::encode::{Projection, encode_entry};
use crate::presence::Special;
use crate::referral::{encode_reference, is_referral};
use crate::rights::SeenFilter;
use crate::{Directory, Identity, Memberships, Outcome};

/// Where a streamed search stands between steps.
#[derive(Debug, Clone)]
pub struct SearchCursor {
    /// Which of the searched naming contexts (a position in their list).
    context: Option<usize>,
    after: Option<meridian_store::EntryId>,
    sent: usize,
    /// Entries examined by earlier steps, matching or not.
    examined: u64,
    /// When the first step began (the time limit counts from there).
    started: Option<Instant>,
}

impl SearchCursor {
    /// A search not started yet.
    pub fn new() -> Self {
        SearchCursor {
            context: None,
            after: None,
            sent: 0,
            examined: 0,
            started: None,
        }
    }
}

impl Default for SearchCursor {
    fn default() -> Self {
        Self::new()
    }
}

/// What one [`Directory::search_step`] did.
#[derive(Debug)]
pub enum Step {
    /// The search is over: the SearchResultDone's result and, for a paged
    /// search, the cookie to return.
    Done(Outcome, Option<Vec<u8>>),
    /// The byte budget is spent; call again with the same cursor.
    More,
}

/// The paged results control of a search request (RFC 2696).
#[derive(Debug, Clone, Copy)]
pub struct PageRequest<'a> {
    /// Entries per page; 0 ends the paged search.
    pub size: i32,
    /// Empty for the first page, else the cookie of the previous one.
    pub cookie: &'a [u8],
}

/// Where a paged search stands between pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PagePosition {
    /// The naming context (a position in the searched ones' list).
    context: u32,
    /// The last entry ID sent there (0: none yet).
    last: meridian_store::EntryId,
    /// Entries sent on all pages so far: the size limit bounds the whole
    /// paged search, not each page (RFC 2696 section 3; slapd does the
    /// same).
    total: u64,
}

/// A cookie: version 3, the position, a fingerprint of the search it
/// belongs to, and the naming context. No server state: nothing is held
/// between pages. (Version 2, before several naming contexts, had no
/// context: it is read as the first.)
fn encode_cookie(position: PagePosition, fingerprint: u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(29);
    c.push(3);
    c.extend_from_slice(&position.last.to_be_bytes());
    c.extend_from_slice(&position.total.to_be_bytes());
    c.extend_from_slice(&fingerprint.to_be_bytes());
    c.extend_from_slice(&position.context.to_be_bytes());
    c
}

fn decode_cookie(cookie: &[u8], fingerprint: u64) -> Option<PagePosition> {
    let (&version, rest) = cookie.split_first()?;
    let context = match (version, rest.len()) {
        (2, 24) => 0,
        (3, 28) => u32::from_be_bytes(rest.get(24..28)?.try_into().ok()?),
        _ => return None,
    };
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_be_bytes(
            rest.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let position = PagePosition {
        context,
        last: word(0)?,
        total: word(1)?,
    };
    (word(2)? == fingerprint).then_some(position)
}

/// FNV-1a over what defines a search (base, scope, filter, attributes),
/// so a cookie cannot be replayed against a different one.
fn fingerprint(req: &SearchRequest<'_>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
    };
    eat(req.base);
    eat(&[req.scope as u8, u8::from(req.types_only)]);
    let mut filter = Vec::new();
    req.filter.to_ber(&mut filter);
    eat(&filter);
    for a in req.attributes.iter() {
        eat(a);
    }
    h
}

/// What a search request's controls change in it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchControls<'a> {
    /// Paged results (RFC 2696).
    pub page: Option<PageRequest<'a>>,
    /// ManageDsaIT (RFC 3296): referral objects are plain entries.
    pub manage_dsa_it: bool,
    /// Matched values (RFC 3876): the control's value, decoded and
    /// checked when the request was read.
    pub matched_values: Option<&'a [u8]>,
}

/// Entries read per scope and round when a search that follows aliases
/// merges several scopes in entry-ID order.
const MERGE_CHUNK: usize = 1024;

/// The longest one step examines entries before it hands back
/// ([`Step::More`]) so its caller can yield: a search that matches
/// nothing, or whose filter is costly, runs as a series of short steps
/// (each with its own snapshot) instead of holding a worker thread, a
/// read transaction and the map's resize lock for its whole length.
pub(crate) const STEP_TIME: Duration = Duration::from_millis(10);

/// How many entries are examined between looks at the clock.
const CLOCK_EVERY: u64 = 64;

impl Directory {
    /// Search below the root DSE, one step at a time: entries are
    /// appended to `buf` as SearchResultEntry messages until it holds
    /// `byte_budget` bytes, then [`Step::More`] says to call again with the
    /// same `cursor` (after the client has read some: large results stream
    /// without a read transaction held across network waits, and without
    /// buffering them whole). Entries come in entry-ID order.
    #[allow(clippy::too_many_arguments)]
    pub fn search_step(
        &self,
        who: &Identity,
        req: &SearchRequest<'_>,
        message_id: i32,
        buf: &mut Vec<u8>,
        controls: SearchControls<'_>,
        cursor: &mut SearchCursor,
        byte_budget: usize,
    ) -> Step {
        self.search_inner(who, req, message_id, buf, controls, cursor, byte_budget)
            .unwrap_or_else(|e| {
                Step::Done(self.disclose(who, e), controls.page.map(|_| Vec::new()))
            })
    }

    #[allow(clippy::too_many_arguments)]
    fn search_inner(
        &self,
        who: &Identity,
        req: &SearchRequest<'_>,
        message_id: i32,
        buf: &mut Vec<u8>,
        controls: SearchControls<'_>,
        cursor: &mut SearchCursor,
        byte_budget: usize,
    ) -> Result<Step, Outcome> {
        let page = controls.page;
        let admin = matches!(who, Identity::Admin(_));
        if !admin {
            let items = req.filter.items();
            let most = self.limits.max_filter_items;
            if items > most {
                return Err(Outcome::new(
                    ResultCode::ADMIN_LIMIT_EXCEEDED,
                    format!(
                        "the filter is made of {items} filters, more than the {most} allowed \
                         (directory.max_filter_items)"
                    ),
                ));
            }
        }
        let mut base = self.dn(req.base)?;
        if matches!(req.deref, DerefAliases::FindingBase | DerefAliases::Always)
            && self.presence.may_hold(Special::Alias)
        {
            let home = self.store_for(&base).snapshot().map_err(Outcome::from)?;
            base = self.find_through_aliases(&home, base)?;
        }
        if !controls.manage_dsa_it {
            let home = self.store_for(&base).snapshot().map_err(Outcome::from)?;
            if let Some(referral) = self.referral_at(&home, &base, Some(req.scope))? {
                return Ok(Step::Done(referral, page.map(|_| Vec::new())));
            }
        }
        // The naming contexts searched: the base's, or every one in turn
        // for a search of the whole tree (the root with a wider scope).
        let contexts: Vec<&meridian_store::Store> = if base.is_root() && req.scope != Scope::Base {
            self.stores().collect()
        } else {
            vec![self.store_for(&base)]
        };
        let groups = &Memberships::default();
        if !admin && !base.is_root() {
            // As in slapd, the base itself needs search access.
            self.require_visible(who, &base, None, Level::Search, groups)?;
        }
        let filter_attrs = FilterAttrs::of(&req.filter, &self.schema);
        // Compiled again only if an entry hides a type the filter tests
        // (`may_see`).
        let visible_filter = SeenFilter::new(&req.filter);
        // The client's limits, capped by the server's for everyone but the
        // administrator; 0 from the client means "no client limit".
        let client_size = usize::try_from(req.size_limit).unwrap_or(usize::MAX);
        let size_limit = match (client_size, admin) {
            (0, true) => usize::MAX,
            (0, false) => self.limits.size_limit,
            (n, true) => n,
            (n, false) => n.min(self.limits.size_limit),
        };
        let client_time = Duration::from_secs(u64::try_from(req.time_limit).unwrap_or(0));
        let time_limit = match (client_time.is_zero(), admin) {
            (true, true) => Duration::MAX,
            (true, false) => self.limits.time_limit,
            (false, true) => client_time,
            (false, false) => client_time.min(self.limits.time_limit),
        };
        // Paging: resume after the cookie's entry, stop after one page.
        let fingerprint = fingerprint(req);
        let (resume, page_size) = match page {
            None => (None, None),
            Some(p) if p.size <= 0 => {
                // Size 0 ends a paged search (RFC 2696 section 3).
                return Ok(Step::Done(Outcome::success(), Some(Vec::new())));
            }
            Some(p) => {
                let resume = if p.cookie.is_empty() {
                    None
                } else {
                    Some(decode_cookie(p.cookie, fingerprint).ok_or_else(|| {
                        Outcome::new(
                            ResultCode::UNWILLING_TO_PERFORM,
                            "the paged results cookie does not belong to this search",
                        )
                    })?)
                };
                (resume, Some(usize::try_from(p.size).unwrap_or(usize::MAX)))
            }
        };
        // A continuation resumes after the last entry it sent; entry-ID
        // order throughout each context (ID 0 is the root, never an entry).
        let mut position = cursor
            .context
            .or(resume.map(|r| usize::try_from(r.context).unwrap_or(usize::MAX)))
            .unwrap_or(0);
        let mut after = cursor.after.or(resume.map(|r| r.last)).unwrap_or(0);
        // Entries sent on earlier pages count against the size limit.
        let earlier_pages = resume.map_or(0, |r| usize::try_from(r.total).unwrap_or(usize::MAX));
        let mut last_sent: Option<meridian_store::EntryId> = None;
        let mut more = false;
        let mut out_of_budget = false;
        let started = *cursor.started.get_or_insert_with(|| self.clock.monotonic());
        let elapsed = |since: Instant| self.clock.monotonic().saturating_duration_since(since);
        let selection = Selection::parse(req.attributes.iter(), &self.schema);
        let values_filter = match controls.matched_values {
            None => None,
            Some(value) => {
                // Checked against server.max_ber_depth when read.
                let depth = meridian_proto::Depth::new(1024);
                let items =
                    meridian_proto::controls::decode_values_return_filter(Some(value), depth)
                        .map_err(|e| {
                            Outcome::new(
                                ResultCode::PROTOCOL_ERROR,
                                format!("matched values control: {e}"),
                            )
                        })?;
                Some(meridian_model::filter::ValuesFilter::compile(
                    &items,
                    &self.schema,
                ))
            }
        };
        let projection = Projection {
            selection: &selection,
            types_only: req.types_only,
            schema: &self.schema,
            values: values_filter.as_ref(),
        };
        let computed_wanted = |name: &str| {
            self.schema
                .attribute_id(name)
                .is_some_and(|id| selection.names(id, &self.schema))
        };
        let want_entry_dn = computed_wanted("entryDN");
        let want_has = computed_wanted("hasSubordinates");
        let want_num = computed_wanted("numSubordinates");
        let want_subschema = computed_wanted("subschemaSubentry");
        // Referral objects in scope become continuation references,
        // whatever the filter says (as in slapd): they are candidates too.
        let references = !controls.manage_dsa_it
            && req.scope != Scope::Base
            && self.presence.may_hold(Special::Referral);
        let either: [Filter<'_>; 2];
        let filter = if references {
            let referral = Filter::Equality(meridian_proto::Ava {
                attr: b"objectClass",
                value: b"referral",
            });
            either = [referral, req.filter];
            Filter::Or(Seq::from_items(&either))
        } else {
            req.filter
        };
        let mut sent = cursor.sent;
        let mut stopped: Option<Outcome> = None;
        // The work of the search, matching or not: entries examined
        // against `directory.lookthrough_limit`, the time limit, and this
        // step's share of time ([`STEP_TIME`]).
        let lookthrough = if admin {
            u64::MAX
        } else {
            self.limits.lookthrough_limit
        };
        let step_started = self.clock.monotonic();
        let mut examined = cursor.examined;
        let mut examined_here = 0u64;
        let mut work_stop: Option<Outcome> = None;
        let mut step_over = false;
        let mut last_examined: Option<EntryId> = None;
        while let Some(store) = contexts.get(position) {
            let snapshot = store.snapshot().map_err(Outcome::from)?;
            let roots = match req.deref {
                DerefAliases::InSearching | DerefAliases::Always => {
                    self.alias_roots(&snapshot, &base, req.scope)?
                }
                DerefAliases::Never | DerefAliases::FindingBase => None,
            };
            let mut emit = |id: EntryId, entry: &Entry| -> bool {
                if references && is_referral(entry, &self.schema) {
                    if !admin && self.access_level(who, &entry.dn, None, groups) < Level::Read {
                        return true;
                    }
                    if buf.len() >= byte_budget {
                        out_of_budget = true;
                        return false;
                    }
                    encode_reference(buf, message_id, &self.continuation(entry, req.scope));
                    last_sent = Some(id);
                    return true;
                }
                // An entry the caller may not read, or that matches only
                // through attributes the caller may not search, is passed
                // over as if it did not match: nothing about it is
                // revealed.
                if !admin && !self.may_see(who, entry, &filter_attrs, &visible_filter, groups) {
                    return true;
                }
                if buf.len() >= byte_budget {
                    out_of_budget = true;
                    return false;
                }
                if page_size.is_some_and(|p| sent >= p) {
                    more = true;
                    return false;
                }
                if earlier_pages.saturating_add(sent) >= size_limit {
                    stopped = Some(Outcome::new(
                        ResultCode::SIZE_LIMIT_EXCEEDED,
                        format!("size limit of {size_limit} entries reached"),
                    ));
                    return false;
                }
                if elapsed(started) > time_limit {
                    stopped = Some(Outcome::new(
                        ResultCode::TIME_LIMIT_EXCEEDED,
                        "time limit reached",
                    ));
                    return false;
                }
                let mut computed: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();
                if want_entry_dn {
                    computed.push(("entryDN", vec![entry.dn.original().as_bytes().to_vec()]));
                }
                if want_has || want_num {
                    // Only the children the caller could find: counting
                    // the others would reveal that they exist.
                    let ids = snapshot.children(Some(id)).unwrap_or_default();
                    let visible = |child: &meridian_store::EntryId| {
                        admin
                            || snapshot.dn_of(*child).is_ok_and(|dn| {
                                self.access_level(who, &dn, None, groups) >= Level::Read
                            })
                    };
                    let children = if want_num {
                        ids.iter().filter(|c| visible(c)).count()
                    } else {
                        usize::from(ids.iter().any(visible))
                    };
                    if want_has {
                        let v: &[u8] = if children > 0 { b"TRUE" } else { b"FALSE" };
                        computed.push(("hasSubordinates", vec![v.to_vec()]));
                    }
                    if want_num {
                        computed.push(("numSubordinates", vec![children.to_string().into_bytes()]));
                    }
                }
                if want_subschema {
                    computed.push((
                        "subschemaSubentry",
                        vec![meridian_model::subschema::SUBSCHEMA_DN.as_bytes().to_vec()],
                    ));
                }
                let visible = |a: &meridian_model::entry::Attribute| {
                    admin || self.may_read_attribute(who, &entry.dn, a.desc.attr, groups)
                };
                encode_entry(buf, message_id, entry, projection, visible, &computed);
                sent += 1;
                last_sent = Some(id);
                true
            };
            // Merging scopes reads ahead of what it emits, so it cannot
            // stop between two candidates and resume there: it runs as
            // one step, bounded by the time and lookthrough limits.
            let steps = roots.is_none();
            let mut examine = |id: EntryId| -> bool {
                if examined >= lookthrough {
                    work_stop = Some(Outcome::new(
                        ResultCode::ADMIN_LIMIT_EXCEEDED,
                        format!(
                            "the search examined {examined} entries, the most one may \
                             (directory.lookthrough_limit); narrow it or index what it filters on"
                        ),
                    ));
                    return false;
                }
                examined_here += 1;
                if examined_here.is_multiple_of(CLOCK_EVERY) {
                    if elapsed(started) > time_limit {
                        work_stop = Some(Outcome::new(
                            ResultCode::TIME_LIMIT_EXCEEDED,
                            "time limit reached",
                        ));
                        return false;
                    }
                    if steps && elapsed(step_started) >= self.limits.search_step_time {
                        step_over = true;
                        return false;
                    }
                }
                examined += 1;
                last_examined = Some(id);
                true
            };
            match &roots {
                None => {
                    snapshot.search_examining(
                        &base,
                        req.scope,
                        &filter,
                        Some(after),
                        &mut examine,
                        &mut emit,
                    )?;
                }
                Some(roots) => {
                    self.search_merged(&snapshot, roots, &filter, after, &mut examine, &mut emit)?;
                }
            }
            if let Some(outcome) = work_stop.take() {
                stopped.get_or_insert(outcome);
            }
            if step_over && !out_of_budget && !more && stopped.is_none() {
                // Every candidate up to the last one examined was sent or
                // passed over: the next step resumes after it.
                cursor.context = Some(position);
                cursor.after = last_examined.or(Some(after));
                cursor.sent = sent;
                cursor.examined = examined;
                return Ok(Step::More);
            }
            if out_of_budget || more || stopped.is_some() {
                break;
            }
            // This context is done: the next from its start.
            position += 1;
            after = 0;
            last_sent = None;
            last_examined = None;
        }
        // The last entry sent in the current context (by this call or
        // an earlier step), 0 if none yet.
        let last = last_sent.unwrap_or(after);
        cursor.examined = examined;
        if out_of_budget {
            cursor.context = Some(position);
            cursor.after = Some(last);
            cursor.sent = sent;
            return Ok(Step::More);
        }
        let cookie = page_size.map(|_| {
            if more {
                encode_cookie(
                    PagePosition {
                        context: u32::try_from(position).unwrap_or(u32::MAX),
                        last,
                        total: u64::try_from(earlier_pages.saturating_add(sent))
                            .unwrap_or(u64::MAX),
                    },
                    fingerprint,
                )
            } else {
                Vec::new()
            }
        });
        Ok(Step::Done(stopped.unwrap_or_else(Outcome::success), cookie))
    }

    /// Runs a search over several scopes (the base's and those of the
    /// aliases it follows), passing each matching entry to `emit` once and
    /// in entry-ID order, as a plain search does, so paging and streaming
    /// resume the same way. Each round reads at most [`MERGE_CHUNK`]
    /// matches per scope and hands on those up to the lowest ID where a
    /// scope stopped early.
    ///
    /// `examine` is asked before each candidate, as in a plain search; when
    /// it says stop (a limit), the matches found so far are emitted and
    /// the merge ends.
    fn search_merged(
        &self,
        snapshot: &meridian_store::Snapshot<'_>,
        roots: &crate::alias::Roots,
        filter: &Filter<'_>,
        after: EntryId,
        examine: &mut dyn FnMut(EntryId) -> bool,
        emit: &mut dyn FnMut(EntryId, &Entry) -> bool,
    ) -> Result<(), Outcome> {
        let mut after = after;
        loop {
            let mut round = BTreeSet::new();
            // Every match up to `complete` is in `round`.
            let mut complete = EntryId::MAX;
            for (root, scope) in &roots.roots {
                let mut taken = 0;
                let mut last = after;
                let mut stopped = false;
                let mut examine_or_stop = |id: EntryId| {
                    stopped = !examine(id);
                    !stopped
                };
                snapshot.search_examining(
                    root,
                    *scope,
                    filter,
                    Some(after),
                    &mut examine_or_stop,
                    |id, _| {
                        round.insert(id);
                        taken += 1;
                        last = id;
                        taken < MERGE_CHUNK
                    },
                )?;
                if stopped {
                    // A limit: what was found so far is the whole round.
                    complete = EntryId::MAX;
                    break;
                }
                if taken >= MERGE_CHUNK {
                    complete = complete.min(last);
                }
            }
            for id in round.range(..=complete) {
                if roots.aliases.contains(id) {
                    continue;
                }
                let entry = snapshot.entry(*id)?;
                if !emit(*id, &entry) {
                    return Ok(());
                }
            }
            if complete == EntryId::MAX {
                return Ok(());
            }
            after = complete;
        }
    }
}
