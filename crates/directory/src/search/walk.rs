//! The walk of a search step over its naming contexts: each candidate
//! examined against the work limits ([`Examiner`]), each match sent,
//! passed over, or gathered for sorting ([`Emitter`]), until the
//! contexts are done, a limit or the page stops it, or the step's byte
//! budget or share of time is spent and it hands back.

use std::time::{Duration, Instant};

use meridian_model::entry::Entry;
use meridian_proto::{DerefAliases, ResultCode, SearchRequest};
use meridian_store::{EntryId, FoundRecord, SearchFilter, Snapshot};

use super::contexts::Searched;
use super::cookie::PagePosition;
use super::output::Output;
use super::sorted::SendLimits;
use super::{CLOCK_EVERY, SearchCursor, SortPhase, size_limit_reached};
use crate::access::Level;
use crate::encode::encode_record;
use crate::referral::{encode_reference, is_referral};
use crate::sort::{Collected, SortPlan, SortRefusal, Sorted};
use crate::{Directory, Outcome};

/// What stays fixed while a step walks.
pub(super) struct WalkSpec<'s> {
    pub(super) req: &'s SearchRequest<'s>,
    pub(super) output: &'s Output<'s>,
    pub(super) contexts: &'s [Searched<'s>],
    /// The filter the store matches: the request's, or it or
    /// `(objectClass=referral)` when referral objects are sent as
    /// continuation references.
    pub(super) store_filter: SearchFilter<'s, 's>,
    /// Referral objects in scope become continuation references.
    pub(super) references: bool,
    /// Matches are encoded from their records, undecoded.
    pub(super) reads_records: bool,
    /// The sort plan, when the matches are gathered for sorting.
    pub(super) plan: Option<&'s SortPlan>,
    pub(super) limits: SendLimits,
    pub(super) time_limit: Duration,
    /// When the search's first step began.
    pub(super) started: Instant,
    /// Where an unsorted paged search resumes.
    pub(super) resume: Option<PagePosition>,
}

/// How a walk ended.
pub(super) enum Walked {
    /// The step's budget or share of time is spent: the cursor says
    /// where the next step resumes.
    Paused,
    /// The sort budget ran out while gathering.
    SortOverflow(SortRefusal),
    /// The contexts are done, or a limit or the page stopped the walk.
    Ended(WalkEnd),
}

/// Where an ended walk stopped.
pub(super) struct WalkEnd {
    /// The context it was in.
    pub(super) position: usize,
    /// The last entry sent in that context, 0 if none.
    pub(super) last: EntryId,
    /// Entries sent by this request.
    pub(super) sent: usize,
    /// A page is full and more entries match.
    pub(super) more: bool,
    /// A limit stopped it: the search's result.
    pub(super) stopped: Option<Outcome>,
    /// A sorted search's matches, gathered.
    pub(super) gathering: Option<Collected>,
}

/// A match as the emitter takes it.
#[derive(Clone, Copy)]
enum Match<'m> {
    Entry(&'m Entry),
    /// Undecoded, where only its encoding and access checks by its DN
    /// read it; the DN for a caller whose access is checked.
    Record(&'m FoundRecord<'m>, Option<&'m meridian_model::dn::Dn>),
}

/// What the walk has sent, and why it stopped.
struct Emitter {
    sent: usize,
    last_sent: Option<EntryId>,
    more: bool,
    out_of_budget: bool,
    stopped: Option<Outcome>,
    gathering: Option<Collected>,
    sort_stop: Option<SortRefusal>,
}

/// The work of the search, matching or not: entries examined against
/// `directory.lookthrough_limit`, the time limit, and this step's share
/// of time ([`super::STEP_TIME`]).
struct Examiner {
    lookthrough: u64,
    examined: u64,
    examined_here: u64,
    time_limit: Duration,
    started: Instant,
    step_started: Instant,
    /// The step may hand back between candidates (not while merging the
    /// scopes of aliases, which reads ahead of what it emits).
    steps: bool,
    stop: Option<Outcome>,
    step_over: bool,
    last_examined: Option<EntryId>,
}

impl Directory {
    /// Walks the step's contexts from where the cursor (or the page
    /// cookie) left off.
    pub(super) fn walk(
        &self,
        spec: &WalkSpec<'_>,
        cursor: &mut SearchCursor,
        buf: &mut Vec<u8>,
    ) -> Result<Walked, Outcome> {
        // A continuation resumes after the last entry it sent; entry-ID
        // order throughout each context (ID 0 is the root, never an entry).
        let resume = spec.resume;
        let mut position = cursor
            .context
            .or(resume.map(|r| usize::try_from(r.context).unwrap_or(usize::MAX)))
            .unwrap_or(0);
        let mut after = cursor.after.or(resume.map(|r| r.last)).unwrap_or(0);
        let mut emitter = Emitter {
            sent: cursor.sent,
            last_sent: None,
            more: false,
            out_of_budget: false,
            stopped: None,
            gathering: match (spec.plan, cursor.sorted.take()) {
                (Some(_), Some(SortPhase::Gathering(collected))) => Some(collected),
                (Some(_), _) => Some(Collected::new(&self.sort_budget)),
                (None, _) => None,
            },
            sort_stop: None,
        };
        let mut examiner = Examiner {
            lookthrough: match spec.output.admin {
                true => u64::MAX,
                false => self.limits().lookthrough_limit,
            },
            examined: cursor.examined,
            examined_here: 0,
            time_limit: spec.time_limit,
            started: spec.started,
            step_started: self.clock.monotonic(),
            steps: true,
            stop: None,
            step_over: false,
            last_examined: None,
        };
        while let Some(searched) = spec.contexts.get(position) {
            let snapshot = searched.store.snapshot().map_err(Outcome::from)?;
            let context = u32::try_from(position).unwrap_or(u32::MAX);
            self.walk_context(
                spec,
                searched,
                &snapshot,
                (context, after),
                &mut emitter,
                &mut examiner,
                buf,
            )?;
            if let Some(refusal) = emitter.sort_stop.take() {
                return Ok(Walked::SortOverflow(refusal));
            }
            if let Some(outcome) = examiner.stop.take() {
                emitter.stopped.get_or_insert(outcome);
            }
            let ended = emitter.out_of_budget || emitter.more || emitter.stopped.is_some();
            if examiner.step_over && !ended {
                // Every candidate up to the last one examined was sent or
                // passed over: the next step resumes after it.
                cursor.context = Some(position);
                cursor.after = examiner.last_examined.or(Some(after));
                cursor.sent = emitter.sent;
                cursor.examined = examiner.examined;
                cursor.sorted = emitter.gathering.map(SortPhase::Gathering);
                return Ok(Walked::Paused);
            }
            if ended {
                break;
            }
            // This context is done: the next from its start.
            position += 1;
            after = 0;
            emitter.last_sent = None;
            examiner.last_examined = None;
        }
        // The last entry sent in the current context (by this call or
        // an earlier step), 0 if none yet.
        let last = emitter.last_sent.unwrap_or(after);
        cursor.examined = examiner.examined;
        if emitter.out_of_budget {
            cursor.context = Some(position);
            cursor.after = Some(last);
            cursor.sent = emitter.sent;
            cursor.sorted = emitter.gathering.map(SortPhase::Gathering);
            return Ok(Walked::Paused);
        }
        Ok(Walked::Ended(WalkEnd {
            position,
            last,
            sent: emitter.sent,
            more: emitter.more,
            stopped: emitter.stopped,
            gathering: emitter.gathering,
        }))
    }

    /// Walks one context from after the entry `from.1` (`from.0` is the
    /// context's position).
    #[allow(clippy::too_many_arguments)]
    fn walk_context(
        &self,
        spec: &WalkSpec<'_>,
        searched: &Searched<'_>,
        snapshot: &Snapshot<'_>,
        (context, after): (u32, EntryId),
        emitter: &mut Emitter,
        examiner: &mut Examiner,
        buf: &mut Vec<u8>,
    ) -> Result<(), Outcome> {
        let roots = match spec.req.deref {
            DerefAliases::InSearching | DerefAliases::Always => {
                self.alias_roots(snapshot, searched.base, searched.scope)?
            }
            DerefAliases::Never | DerefAliases::FindingBase => None,
        };
        // Merging scopes reads ahead of what it emits, so it cannot stop
        // between two candidates and resume there: it runs as one step,
        // bounded by the time and lookthrough limits.
        examiner.steps = roots.is_none();
        let mut examine = |id: EntryId| examiner.examine(self, id);
        let mut emit = |id: EntryId, found: Match<'_>| {
            emitter.emit(self, spec, snapshot, context, id, found, buf)
        };
        match &roots {
            None => {
                snapshot.search_found(
                    searched.base,
                    searched.scope,
                    spec.store_filter,
                    Some(after),
                    &mut examine,
                    |id, mut found| {
                        if let Some(record) = spec.reads_records.then(|| found.record()).flatten() {
                            // The administrator's access is not checked.
                            let dn = match spec.output.admin {
                                true => None,
                                false => Some(found.dn()?),
                            };
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
                    snapshot,
                    roots,
                    spec.store_filter,
                    after,
                    &mut examine,
                    // Only a record answers None.
                    &mut |id, entry| emit(id, Match::Entry(entry)).unwrap_or(true),
                )?;
            }
        }
        Ok(())
    }
}

impl Examiner {
    /// Counts a candidate; false when a limit or the step's share of
    /// time stops the walk before it.
    fn examine(&mut self, directory: &Directory, id: EntryId) -> bool {
        if self.examined >= self.lookthrough {
            self.stop = Some(Outcome::new(
                ResultCode::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "the search examined {} entries, the most one may \
                     (directory.lookthrough_limit); narrow it or index what it filters on",
                    self.examined
                ),
            ));
            return false;
        }
        self.examined_here += 1;
        if self.examined_here.is_multiple_of(CLOCK_EVERY) {
            let now = directory.clock.monotonic();
            if now.saturating_duration_since(self.started) > self.time_limit {
                self.stop = Some(time_limit_reached());
                return false;
            }
            let step_time = directory.limits().search_step_time;
            if self.steps && now.saturating_duration_since(self.step_started) >= step_time {
                self.step_over = true;
                return false;
            }
        }
        self.examined += 1;
        self.last_examined = Some(id);
        true
    }
}

impl Emitter {
    /// Sends a match (or passes over one the caller may not see):
    /// whether the walk goes on. `None` for a record that cannot be read
    /// in place, with nothing done: the caller hands the entry decoded.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        directory: &Directory,
        spec: &WalkSpec<'_>,
        snapshot: &Snapshot<'_>,
        context: u32,
        id: EntryId,
        found: Match<'_>,
        buf: &mut Vec<u8>,
    ) -> Option<bool> {
        let output = spec.output;
        if let Match::Record(_, Some(dn)) = found
            && !directory.may_output_record(output, dn)?
        {
            return Some(true);
        }
        // A record read in place needs none of these checks
        // (`reads_records`).
        if let Match::Entry(entry) = found
            && let Some(go_on) = self.take_specially(directory, spec, context, id, entry, buf)
        {
            return Some(go_on);
        }
        if let Some(stop) = self.limit_reached(directory, spec, buf) {
            return Some(stop);
        }
        match found {
            Match::Entry(entry) => directory.encode_match(output, snapshot, id, entry, buf),
            Match::Record(record, dn) => {
                let visible = |attr| {
                    dn.is_none_or(|dn| {
                        directory.may_read_attribute(output.who, dn, attr, output.groups)
                    })
                };
                let projection = &output.projection;
                if !encode_record(
                    buf,
                    output.message_id,
                    record,
                    projection.selection,
                    projection.types_only,
                    projection.schema,
                    visible,
                ) {
                    // Not readable in place: nothing was changed, and the
                    // caller hands the entry decoded.
                    return None;
                }
            }
        }
        self.sent += 1;
        self.last_sent = Some(id);
        Some(true)
    }

    /// A decoded match that is not simply sent: a referral object (sent
    /// as a continuation reference), one the caller may not see (passed
    /// over as if it did not match: nothing about it is revealed), or a
    /// match gathered for sorting. `None` for a match to send.
    fn take_specially(
        &mut self,
        directory: &Directory,
        spec: &WalkSpec<'_>,
        context: u32,
        id: EntryId,
        entry: &Entry,
        buf: &mut Vec<u8>,
    ) -> Option<bool> {
        let output = spec.output;
        let (who, admin, groups) = (output.who, output.admin, output.groups);
        if spec.references && is_referral(entry, &directory.schema) {
            if !admin && directory.access_level(who, &entry.dn, None, groups) < Level::Read {
                return Some(true);
            }
            if buf.len() >= spec.limits.byte_budget {
                self.out_of_budget = true;
                return Some(false);
            }
            let urls = directory.continuation(entry, spec.req.scope);
            encode_reference(buf, output.message_id, &urls);
            self.last_sent = Some(id);
            return Some(true);
        }
        if !directory.may_output(output, entry) {
            return Some(true);
        }
        let (Some(collected), Some(plan)) = (self.gathering.as_mut(), spec.plan) else {
            return None;
        };
        let keys = plan.keys_of(entry, &directory.schema, |attr| {
            admin || directory.may_read_attribute(who, &entry.dn, attr, groups)
        });
        if let Err(refusal) = collected.push(Sorted { keys, context, id }) {
            self.sort_stop = Some(refusal);
            return Some(false);
        }
        self.last_sent = Some(id);
        Some(true)
    }

    /// Before a match is sent: `Some(false)` (with the reason noted)
    /// when the byte budget, the page, the size limit or the time limit
    /// stops the walk.
    fn limit_reached(
        &mut self,
        directory: &Directory,
        spec: &WalkSpec<'_>,
        buf: &[u8],
    ) -> Option<bool> {
        let limits = &spec.limits;
        if buf.len() >= limits.byte_budget {
            self.out_of_budget = true;
        } else if limits.page_size.is_some_and(|p| self.sent >= p) {
            self.more = true;
        } else if limits.earlier_pages.saturating_add(self.sent) >= limits.size_limit {
            self.stopped = Some(size_limit_reached(limits.size_limit));
        } else if directory
            .clock
            .monotonic()
            .saturating_duration_since(spec.started)
            > spec.time_limit
        {
            self.stopped = Some(time_limit_reached());
        } else {
            return None;
        }
        Some(false)
    }
}

fn time_limit_reached() -> Outcome {
    Outcome::new(ResultCode::TIME_LIMIT_EXCEEDED, "time limit reached")
}
