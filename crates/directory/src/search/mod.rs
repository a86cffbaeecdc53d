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
use meridian_proto::{Filter, ResultCode, Scope, SearchRequest, Seq};
use meridian_store::{EntryId, SearchFilter};
use output::{Computed, Output};
use sorted::{SendLimits, Sorting};
use walk::{WalkEnd, WalkSpec, Walked};

use crate::encode::Projection;
use crate::presence::Special;
use crate::rights::{Memberships, SeenFilter};
use crate::sort::{Collected, ControlValue, SortRefusal};
use crate::{Directory, Identity, Outcome};

mod contexts;
mod cookie;
pub(crate) mod dynlist;
mod finish;
mod in_chain;
mod output;
mod plan;
mod sorted;
mod walk;

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
        match self.search_inner(who, req, message_id, buf, controls, cursor, byte_budget) {
            Ok(step) => step,
            Err(Early::Done(done)) => Step::Done(*done),
            Err(Early::Failed(outcome)) => {
                Step::Done(Early::paged_done(controls, self.disclose(who, outcome)))
            }
        }
    }

    /// One step: the plan, the walk, and its end. The steps of a search
    /// differ only in where the cursor says to resume.
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
    ) -> Result<Step, Early> {
        // From here on the budget is where `buf` must stop growing.
        let byte_budget = buf.len().saturating_add(byte_budget);
        let admin = matches!(who, Identity::Admin(_));
        self.check_filter_size(admin, req)?;
        // Nested-group matches become the equality matches they stand
        // for (`in_chain.rs`), after the size check of what was sent.
        let expanded = self.expand_in_chain(&req.filter)?;
        let expanded_req: SearchRequest<'_>;
        let req = match &expanded {
            Some(bytes) => {
                let filter =
                    Filter::from_ber(bytes, meridian_proto::Depth::new(1024)).map_err(|e| {
                        Outcome::new(ResultCode::OTHER, format!("a rewritten filter: {e}"))
                    })?;
                expanded_req = SearchRequest { filter, ..*req };
                &expanded_req
            }
            None => req,
        };
        let sorting = self
            .sorting(controls, cursor)
            .map_err(|done| Early::Done(Box::new(done)))?;
        let plan = match &sorting {
            Sorting::Yes(plan, _) => Some(plan),
            Sorting::No | Sorting::Refused(_) => None,
        };
        let base = self.search_base(req, controls, cursor)?;
        let groups = &Memberships::default();
        let contexts = self.walked_contexts(who, &base, req.scope, groups)?;
        let bounds = self.search_bounds(req, admin);
        let paging = self.paging(req, controls, plan)?;
        let started = *cursor.started.get_or_insert_with(|| self.clock.monotonic());
        // Compiled once for this step: the store matches with it, and
        // access control reads it (`may_see`).
        let compiled = CompiledFilter::compile(&req.filter, &self.schema);
        let visible_filter = SeenFilter::new(&compiled);
        let selection = Selection::parse(req.attributes.iter(), &self.schema);
        let values_filter = self.values_filter(controls)?;
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
            dynamic: dynlist::DynamicRead::wanted(self, &selection),
        };
        let limits = SendLimits {
            size_limit: bounds.size_limit,
            earlier_pages: paging.earlier_pages,
            byte_budget,
            fingerprint: paging.fingerprint,
            page_size: paging.page_size,
        };
        // A sorted search whose matches are all gathered sends them.
        if plan.is_some() && matches!(cursor.sorted, Some(SortPhase::Sending(_))) {
            let Some(SortPhase::Sending(sending)) = cursor.sorted.take() else {
                unreachable!("matched above");
            };
            return Ok(self.send_sorted(&output, sending, &contexts, buf, limits, cursor)?);
        }
        // Referral objects in scope become continuation references,
        // whatever the filter says (as in slapd): they are candidates too.
        // A later page of a sorted search sent them with its first.
        let references = !controls.manage_dsa_it
            && req.scope != Scope::Base
            && paging.sorted_resume.is_none()
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
        let spec = WalkSpec {
            req,
            output: &output,
            contexts: &contexts,
            store_filter: SearchFilter {
                written: &filter,
                compiled: compiled_filter,
            },
            references,
            // Matches are encoded from their records, undecoded, when
            // nothing but their encoding and access checks by DN and type
            // read them: no referral to tell apart, no sort keys, no
            // values filtered, nothing computed from the entry.
            reads_records: !references
                && plan.is_none()
                && output.projection.values.is_none()
                && output.computed.none()
                && output.dynamic.is_none(),
            plan,
            limits,
            time_limit: bounds.time_limit,
            started,
            resume: paging.resume,
        };
        let end = match self.walk(&spec, cursor, buf)? {
            Walked::Paused => return Ok(Step::More),
            Walked::SortOverflow(refusal) => {
                return Ok(self.sort_overflow(refusal, &sorting, controls, cursor));
            }
            Walked::Ended(end) => end,
        };
        match (end.gathering, plan) {
            (Some(collected), Some(plan)) => Ok(self.finish_sorted(
                &spec,
                (plan, &sorting),
                &paging,
                collected,
                end.stopped,
                controls.page.is_some(),
                cursor,
                buf,
            )?),
            (gathering, _) => {
                Ok(self.finish_plain(WalkEnd { gathering, ..end }, &paging, &sorting))
            }
        }
    }
}

/// How a search step ends before its walk: answered as it is (a
/// refused sort, a referral, the end of a paged search), or failed (the
/// outcome is disclosed to the caller as far as it may see).
enum Early {
    /// Boxed: the error path of every planning step carries it.
    Done(Box<SearchDone>),
    Failed(Outcome),
}

impl Early {
    /// The answer `outcome`, with an empty page cookie when the search
    /// was paged.
    fn paged(controls: SearchControls<'_>, outcome: Outcome) -> Early {
        Early::Done(Box::new(Early::paged_done(controls, outcome)))
    }

    fn paged_done(controls: SearchControls<'_>, outcome: Outcome) -> SearchDone {
        SearchDone {
            page: controls.page.map(|_| (0, Vec::new())),
            ..SearchDone::new(outcome)
        }
    }
}

impl From<Outcome> for Early {
    fn from(outcome: Outcome) -> Self {
        Early::Failed(outcome)
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
