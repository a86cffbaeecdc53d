//! Search: scopes, limits, paging and streaming, and the two kinds of
//! entries a search treats specially: referral objects (RFC 3296), sent
//! as continuation references unless the client manages the DSA IT, and
//! aliases, followed as the request's derefAliases asks.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_model::selection::Selection;
use meridian_proto::{DerefAliases, Filter, ResultCode, Scope, SearchRequest, Seq};
use meridian_store::{EntryId, FoundRecord, SearchFilter};

use crate::access::Level;
use crate::encode::{Projection, encode_entry, encode_record};
use crate::presence::Special;
use crate::referral::{encode_reference, is_referral};
use crate::rights::SeenFilter;
use crate::sort::{
    Collected, ControlValue, SortPlan, SortRefusal, Sorted, Window, decode_page_cookie,
    encode_page_cookie,
};
use crate::{Directory, Identity, Memberships, Outcome};

mod contexts;
mod cookie;
mod output;
mod sorted;

use contexts::Searched;
use cookie::{PagePosition, decode_cookie, encode_cookie, fingerprint};
use output::{Computed, Output};
use sorted::{SendLimits, Sorting};

/// Where a streamed search stands between steps.
#[derive(Debug)]
pub struct SearchCursor {
    /// Which of the searched naming contexts (a position in their list).
    context: Option<usize>,
    after: Option<meridian_store::EntryId>,
    sent: usize,
    /// Entries examined by earlier steps, matching or not.
    examined: u64,
    /// When the first step began (the time limit counts from there).
    started: Option<Instant>,
    /// A sorted search's matches: being gathered, then being sent.
    sorted: Option<SortPhase>,
    /// A sort that could not be done (the budget ran out while gathering)
    /// under a non-critical control: the search runs again unsorted and
    /// its result says why.
    unsorted: Option<SortRefusal>,
    /// The request's base, already parsed by the caller
    /// ([`SearchCursor::with_base`]); the first step takes it.
    base: Option<Dn>,
}

/// Where a sorted search stands between steps.
#[derive(Debug)]
enum SortPhase {
    /// The matches' keys found so far.
    Gathering(Collected),
    /// The matches in order; those from `next` to `end` are still to be
    /// sent.
    Sending(Sending),
}

#[derive(Debug)]
struct Sending {
    collected: Collected,
    next: usize,
    end: usize,
    /// Entries sent by this request (not counting earlier pages).
    sent: usize,
    /// The VLV response, for a VLV request.
    vlv: Option<VlvAnswer>,
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
            sorted: None,
            unsorted: None,
            base: None,
        }
    }

    /// A search not started yet, whose request's base the caller has
    /// parsed already ([`Directory::parse_dn`]): the first step uses
    /// `base` instead of parsing it again.
    pub fn with_base(base: Dn) -> Self {
        SearchCursor {
            base: Some(base),
            ..SearchCursor::new()
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
    /// The search is over: what its SearchResultDone says.
    Done(SearchDone),
    /// The byte budget is spent; call again with the same cursor.
    More,
}

/// The SearchResultDone of a search: its result and response controls.
#[derive(Debug)]
pub struct SearchDone {
    /// The result.
    pub outcome: Outcome,
    /// The paged results response (RFC 2696): the estimated number of
    /// entries still to come (0: no estimate) and the cookie (empty
    /// after the last page).
    pub page: Option<(i32, Vec<u8>)>,
    /// The sort response (RFC 2891): sortResult, and the attribute it is
    /// about.
    pub sort: Option<(ResultCode, Option<Vec<u8>>)>,
    /// The virtual list view response.
    pub vlv: Option<VlvAnswer>,
    /// Entries this request sent (for the access log).
    pub entries: u64,
}

impl SearchDone {
    /// A result without response controls.
    pub fn new(outcome: Outcome) -> Self {
        SearchDone {
            outcome,
            page: None,
            sort: None,
            vlv: None,
            entries: 0,
        }
    }
}

/// The values of a virtual list view response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlvAnswer {
    /// The target's position (1 is the first entry).
    pub target_position: u32,
    /// The number of entries in the list.
    pub content_count: u32,
    /// virtualListViewResult.
    pub result: ResultCode,
}

/// The paged results control of a search request (RFC 2696).
#[derive(Debug, Clone, Copy)]
pub struct PageRequest<'a> {
    /// Entries per page; 0 ends the paged search.
    pub size: i32,
    /// Empty for the first page, else the cookie of the previous one.
    pub cookie: &'a [u8],
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
    /// Server-side sort (RFC 2891).
    pub sort: Option<ControlValue<'a>>,
    /// Virtual list view (draft-ietf-ldapext-ldapv3-vlv-09).
    pub vlv: Option<ControlValue<'a>>,
}

fn size_limit_reached(size_limit: usize) -> Outcome {
    Outcome::new(
        ResultCode::SIZE_LIMIT_EXCEEDED,
        format!("size limit of {size_limit} entries reached"),
    )
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

/// A match as a search step's output takes it.
#[derive(Clone, Copy)]
enum Match<'m> {
    Entry(&'m Entry),
    /// Undecoded, where only its encoding and access checks by its DN
    /// read it; the DN for a caller whose access is checked.
    Record(&'m FoundRecord<'m>, Option<&'m Dn>),
}

impl Directory {
    /// Search below the root DSE, one step at a time: entries are
    /// appended to `buf` as SearchResultEntry messages until this step has
    /// added `byte_budget` bytes (what `buf` held before, say the answers
    /// to earlier requests, does not count), then [`Step::More`] says to
    /// call again with the
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
                Step::Done(SearchDone {
                    page: controls.page.map(|_| (0, Vec::new())),
                    ..SearchDone::new(self.disclose(who, e))
                })
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
        // From here on the budget is where `buf` must stop growing.
        let byte_budget = buf.len().saturating_add(byte_budget);
        let page = controls.page;
        let done_paged = |outcome: Outcome| {
            Ok(Step::Done(SearchDone {
                page: page.map(|_| (0, Vec::new())),
                ..SearchDone::new(outcome)
            }))
        };
        let admin = matches!(who, Identity::Admin(_));
        if !admin {
            let items = req.filter.items();
            let most = self.limits().max_filter_items;
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
        let sorting = match self.sorting(controls, cursor) {
            Ok(sorting) => sorting,
            Err(done) => return Ok(Step::Done(done)),
        };
        let mut base = match cursor.base.take() {
            Some(base) => base,
            None => self.parse_dn(req.base)?,
        };
        if matches!(req.deref, DerefAliases::FindingBase | DerefAliases::Always)
            && self.presence.may_hold(Special::Alias)
        {
            let home = self.store_for(&base).snapshot().map_err(Outcome::from)?;
            base = self.find_through_aliases(&home, base)?;
        }
        if !controls.manage_dsa_it
            && let Some(referral) = self.referral_of(&base, Some(req.scope))?
        {
            return done_paged(referral);
        }
        // The naming contexts searched, each with the base and scope it
        // is searched with: the base's, and those glued below the base
        // within the scope; or, for a search of the whole tree (the root
        // with a wider scope), every one in turn.
        let mut contexts = self.searched_contexts(&base, req.scope);
        let groups = &Memberships::default();
        // Glue: a context whose top entry is not there yet is passed
        // over when contexts glued below it are searched too, as slapd's
        // glued databases are (OpenLDAP's test005-modrdn searches such a
        // tree); its own entries are none, and the others answer.
        let glued_over = contexts.len() > 1 && self.top_missing(&base)?;
        if glued_over {
            contexts.remove(0);
        }
        if !admin && !base.is_root() && !glued_over {
            // As in slapd, the base itself needs search access.
            self.require_visible(who, &base, None, Level::Search, groups)?;
        }
        if !admin && base.is_root() {
            // A search of the whole tree walks only the contexts whose top
            // the caller may search, as a search based there would: an
            // anonymous filter of thousands of substrings was otherwise
            // evaluated on every entry of contexts it may not read.
            contexts.retain(|searched| {
                searched.store.suffixes().iter().any(|suffix| {
                    self.require(who, suffix, None, Level::Search, groups)
                        .is_ok()
                })
            });
        }
        // Compiled once for this step: the store matches with it, and
        // access control reads it (`may_see`).
        let compiled = CompiledFilter::compile(&req.filter, &self.schema);
        let visible_filter = SeenFilter::new(&compiled);
        // The client's limits, capped by the server's for everyone but the
        // administrator; 0 from the client means "no client limit".
        let client_size = usize::try_from(req.size_limit).unwrap_or(usize::MAX);
        let size_limit = match (client_size, admin) {
            (0, true) => usize::MAX,
            (0, false) => self.limits().size_limit,
            (n, true) => n,
            (n, false) => n.min(self.limits().size_limit),
        };
        let client_time = Duration::from_secs(u64::try_from(req.time_limit).unwrap_or(0));
        let time_limit = match (client_time.is_zero(), admin) {
            (true, true) => Duration::MAX,
            (true, false) => self.limits().time_limit,
            (false, true) => client_time,
            (false, false) => client_time.min(self.limits().time_limit),
        };
        // Paging: resume after the cookie's entry, stop after one page. A
        // sorted search's cookie holds the last entry's sort keys.
        let plan = match &sorting {
            Sorting::Yes(plan, _) => Some(plan),
            Sorting::No | Sorting::Refused(_) => None,
        };
        // Only paged searches make or read cookies.
        let fingerprint = match page {
            Some(_) => fingerprint(req, plan.and(controls.sort).and_then(|c| c.value)),
            None => 0,
        };
        let not_this_search = || {
            Outcome::new(
                ResultCode::UNWILLING_TO_PERFORM,
                "the paged results cookie does not belong to this search",
            )
        };
        let (resume, sorted_resume, page_size) = match page {
            None => (None, None, None),
            Some(p) if p.size <= 0 => {
                // Size 0 ends a paged search (RFC 2696 section 3).
                return done_paged(Outcome::success());
            }
            Some(p) => {
                let size = Some(usize::try_from(p.size).unwrap_or(usize::MAX));
                match plan {
                    _ if p.cookie.is_empty() => (None, None, size),
                    None => (
                        Some(decode_cookie(p.cookie, fingerprint).ok_or_else(not_this_search)?),
                        None,
                        size,
                    ),
                    Some(plan) => (
                        None,
                        Some(
                            decode_page_cookie(p.cookie, fingerprint, plan.len())
                                .ok_or_else(not_this_search)?,
                        ),
                        size,
                    ),
                }
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
        let earlier_pages = match (&resume, &sorted_resume) {
            (Some(r), _) => usize::try_from(r.total).unwrap_or(usize::MAX),
            (None, Some((total, _))) => usize::try_from(*total).unwrap_or(usize::MAX),
            (None, None) => 0,
        };
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
        let output = Output {
            who,
            admin,
            groups,
            message_id,
            projection: Projection {
                selection: &selection,
                types_only: req.types_only,
                schema: &self.schema,
                values: values_filter.as_ref(),
            },
            computed: Computed::wanted(&selection, &self.schema),
            visible_filter: &visible_filter,
        };
        let limits = SendLimits {
            size_limit,
            earlier_pages,
            byte_budget,
            fingerprint,
            page_size,
        };
        // A sorted search whose matches are all gathered sends them.
        if let (Some(_), Some(SortPhase::Sending(_))) = (plan, &cursor.sorted) {
            let Some(SortPhase::Sending(sending)) = cursor.sorted.take() else {
                unreachable!("matched above");
            };
            return self.send_sorted(&output, sending, &contexts, buf, limits, cursor);
        }
        let mut gathering: Option<Collected> = match (plan, cursor.sorted.take()) {
            (Some(_), Some(SortPhase::Gathering(collected))) => Some(collected),
            (Some(_), _) => Some(Collected::new(&self.sort_budget)),
            (None, _) => None,
        };
        let mut sort_stop: Option<SortRefusal> = None;
        // Referral objects in scope become continuation references,
        // whatever the filter says (as in slapd): they are candidates too.
        // A later page of a sorted search sent them with its first.
        let references = !controls.manage_dsa_it
            && req.scope != Scope::Base
            && sorted_resume.is_none()
            && self.presence.may_hold(Special::Referral);
        let either: [Filter<'_>; 2];
        let with_referrals: CompiledFilter;
        let (filter, compiled_filter) = if references {
            let referral = Filter::Equality(meridian_proto::Ava {
                attr: b"objectClass",
                value: b"referral",
            });
            either = [referral, req.filter];
            let filter = Filter::Or(Seq::from_items(&either));
            with_referrals = CompiledFilter::compile(&filter, &self.schema);
            (filter, &with_referrals)
        } else {
            (req.filter, &compiled)
        };
        let store_filter = SearchFilter {
            written: &filter,
            compiled: compiled_filter,
        };
        // Matches are encoded from their records, undecoded, when
        // nothing but their encoding and access checks by DN and type
        // read them: no referral to tell apart, no sort keys, no values
        // filtered, nothing computed from the entry.
        let reads_records = !references
            && plan.is_none()
            && output.projection.values.is_none()
            && output.computed.none();
        let mut sent = cursor.sent;
        let mut stopped: Option<Outcome> = None;
        // The work of the search, matching or not: entries examined
        // against `directory.lookthrough_limit`, the time limit, and this
        // step's share of time ([`STEP_TIME`]).
        let lookthrough = if admin {
            u64::MAX
        } else {
            self.limits().lookthrough_limit
        };
        let step_started = self.clock.monotonic();
        let mut examined = cursor.examined;
        let mut examined_here = 0u64;
        let mut work_stop: Option<Outcome> = None;
        let mut step_over = false;
        let mut last_examined: Option<EntryId> = None;
        while let Some(searched) = contexts.get(position) {
            let (store, context_base, scope) = (searched.store, searched.base, searched.scope);
            let snapshot = store.snapshot().map_err(Outcome::from)?;
            let roots = match req.deref {
                DerefAliases::InSearching | DerefAliases::Always => {
                    self.alias_roots(&snapshot, context_base, scope)?
                }
                DerefAliases::Never | DerefAliases::FindingBase => None,
            };
            let context = u32::try_from(position).unwrap_or(u32::MAX);
            // Sends a match (or passes over one the caller may not
            // see): whether the search goes on. None for a record that
            // cannot be read in place, with nothing done: the caller
            // hands the entry decoded instead.
            let mut emit = |id: EntryId, found: Match<'_>| -> Option<bool> {
                if let Match::Record(_, Some(dn)) = found {
                    // `may_output` for a record: read access to the entry,
                    // and a match through searchable types only. Otherwise
                    // the decoded entry decides (`may_see` evaluates the
                    // filter again with the hidden types Undefined).
                    if self.access_level(who, dn, None, groups) < Level::Read {
                        return Some(true);
                    }
                    let tested = output.visible_filter.tested();
                    let searchable = |attr: &meridian_model::schema::AttrId| {
                        self.access_level(who, dn, Some(*attr), groups) >= Level::Search
                    };
                    if tested.every || !tested.attrs.iter().all(searchable) {
                        return None;
                    }
                }
                // A record read in place needs none of these checks
                // (`reads_records`).
                if let Match::Entry(entry) = found {
                    if references && is_referral(entry, &self.schema) {
                        if !admin && self.access_level(who, &entry.dn, None, groups) < Level::Read {
                            return Some(true);
                        }
                        if buf.len() >= byte_budget {
                            out_of_budget = true;
                            return Some(false);
                        }
                        encode_reference(buf, message_id, &self.continuation(entry, req.scope));
                        last_sent = Some(id);
                        return Some(true);
                    }
                    // An entry the caller may not read, or that matches only
                    // through attributes the caller may not search, is passed
                    // over as if it did not match: nothing about it is
                    // revealed.
                    if !self.may_output(&output, entry) {
                        return Some(true);
                    }
                    if let (Some(collected), Some(plan)) = (gathering.as_mut(), plan) {
                        let keys = plan.keys_of(entry, &self.schema, |attr| {
                            admin || self.may_read_attribute(who, &entry.dn, attr, groups)
                        });
                        if let Err(refusal) = collected.push(Sorted { keys, context, id }) {
                            sort_stop = Some(refusal);
                            return Some(false);
                        }
                        last_sent = Some(id);
                        return Some(true);
                    }
                }
                if buf.len() >= byte_budget {
                    out_of_budget = true;
                    return Some(false);
                }
                if page_size.is_some_and(|p| sent >= p) {
                    more = true;
                    return Some(false);
                }
                if earlier_pages.saturating_add(sent) >= size_limit {
                    stopped = Some(size_limit_reached(size_limit));
                    return Some(false);
                }
                if elapsed(started) > time_limit {
                    stopped = Some(Outcome::new(
                        ResultCode::TIME_LIMIT_EXCEEDED,
                        "time limit reached",
                    ));
                    return Some(false);
                }
                match found {
                    Match::Entry(entry) => self.encode_match(&output, &snapshot, id, entry, buf),
                    Match::Record(record, dn) => {
                        let visible = |attr| {
                            dn.is_none_or(|dn| self.may_read_attribute(who, dn, attr, groups))
                        };
                        if !encode_record(
                            buf,
                            message_id,
                            record,
                            &selection,
                            req.types_only,
                            &self.schema,
                            visible,
                        ) {
                            // Not readable in place: nothing was changed,
                            // and the caller hands the entry decoded.
                            return None;
                        }
                    }
                }
                sent += 1;
                last_sent = Some(id);
                Some(true)
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
                    if steps && elapsed(step_started) >= self.limits().search_step_time {
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
                    snapshot.search_found(
                        context_base,
                        scope,
                        store_filter,
                        Some(after),
                        &mut examine,
                        |id, mut found| {
                            if let Some(record) = reads_records.then(|| found.record()).flatten() {
                                // The administrator's access is not checked.
                                let dn = if admin { None } else { Some(found.dn()?) };
                                if let Some(go_on) = emit(id, Match::Record(&record, dn)) {
                                    return Ok(go_on);
                                }
                            }
                            // Only a record answers None.
                            Ok(emit(id, Match::Entry(&found.entry()?)).unwrap_or(true))
                        },
                    )?;
                }
                Some(roots) => {
                    self.search_merged(
                        &snapshot,
                        roots,
                        store_filter,
                        after,
                        &mut examine,
                        // Only a record answers None.
                        &mut |id, entry| emit(id, Match::Entry(entry)).unwrap_or(true),
                    )?;
                }
            }
            if let Some(refusal) = sort_stop.take() {
                return Ok(self.sort_overflow(refusal, &sorting, controls, cursor));
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
                cursor.sorted = gathering.map(SortPhase::Gathering);
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
            cursor.sorted = gathering.map(SortPhase::Gathering);
            return Ok(Step::More);
        }
        if let (Some(mut collected), Some(plan)) = (gathering, plan) {
            if let Some(outcome) = stopped {
                // A limit cut the gathering short (RFC 2891: the sort
                // result says so too).
                let code = outcome.code;
                return Ok(Step::Done(SearchDone {
                    page: page.map(|_| (0, Vec::new())),
                    sort: Some((code, None)),
                    vlv: match &sorting {
                        Sorting::Yes(_, Some(_)) => Some(VlvAnswer {
                            target_position: 0,
                            content_count: 0,
                            result: code,
                        }),
                        _ => None,
                    },
                    ..SearchDone::new(outcome)
                }));
            }
            collected.sort(plan);
            let count = collected.items.len();
            let (start, end, vlv) = match &sorting {
                Sorting::Yes(_, Some(vlv)) => {
                    let window = Window::of(plan, &collected.items, vlv, &self.schema);
                    let answer = VlvAnswer {
                        target_position: window.target_position,
                        content_count: window.content_count,
                        result: window.result,
                    };
                    if window.result != ResultCode::SUCCESS {
                        return Ok(Step::Done(SearchDone {
                            sort: Some((ResultCode::SUCCESS, None)),
                            vlv: Some(answer),
                            ..SearchDone::new(Outcome::new(
                                ResultCode::VIRTUAL_LIST_VIEW_ERROR,
                                match window.result {
                                    ResultCode::OFFSET_RANGE_ERROR => format!(
                                        "the virtual list view's offset is outside the list of {count} entries"
                                    ),
                                    _ => "the virtual list view's target value is not one the first sort key's matching rule can read".to_owned(),
                                },
                            ))
                        }));
                    }
                    (window.start, window.end, Some(answer))
                }
                _ => {
                    let start = match &sorted_resume {
                        Some((_, last)) => collected.after(plan, last),
                        None => 0,
                    };
                    let end = match page_size {
                        Some(p) => start.saturating_add(p).min(count),
                        None => count,
                    };
                    (start, end, None)
                }
            };
            let sending = Sending {
                collected,
                next: start,
                end,
                sent: 0,
                vlv,
            };
            return self.send_sorted(&output, sending, &contexts, buf, limits, cursor);
        }
        let page = page_size.map(|_| {
            if more {
                let cookie = encode_cookie(
                    PagePosition {
                        context: u32::try_from(position).unwrap_or(u32::MAX),
                        last,
                        total: u64::try_from(earlier_pages.saturating_add(sent))
                            .unwrap_or(u64::MAX),
                    },
                    fingerprint,
                );
                (0, cookie)
            } else {
                (0, Vec::new())
            }
        });
        Ok(Step::Done(SearchDone {
            page,
            entries: u64::try_from(sent).unwrap_or(u64::MAX),
            sort: match sorting {
                Sorting::Refused(refusal) => Some((refusal.code, refusal.attr)),
                Sorting::No | Sorting::Yes(..) => None,
            },
            ..SearchDone::new(stopped.unwrap_or_else(Outcome::success))
        }))
    }
}

impl Directory {
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
        filter: SearchFilter<'_, '_>,
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
