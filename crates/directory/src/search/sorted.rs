//! How a search is sorted (server-side sort, virtual list view) and
//! how a sorted search sends its matches (`crate::sort` holds the
//! keys, the order and the windows).

use meridian_proto::ResultCode;

use super::contexts::Searched;
use super::output::Output;
use super::{
    SearchControls, SearchCursor, SearchDone, Sending, SortPhase, Step, VlvAnswer,
    size_limit_reached,
};
use crate::sort::{SortPlan, SortRefusal, encode_page_cookie};
use crate::{Directory, Outcome};

/// How a search is sorted.
pub(super) enum Sorting<'a> {
    /// Not asked to be.
    No,
    /// Asked, but not possible under a non-critical control: unsorted,
    /// and the sort response says why.
    Refused(SortRefusal),
    /// Sorted by the plan, the whole list or a VLV window of it.
    Yes(SortPlan, Option<meridian_proto::sorting::VlvRequest<'a>>),
}

/// What bounds the sending of a sorted search's matches, and what its
/// page cookie needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct SendLimits {
    pub(super) size_limit: usize,
    /// Entries sent on earlier pages (they count against the size limit).
    pub(super) earlier_pages: usize,
    pub(super) byte_budget: usize,
    pub(super) fingerprint: u64,
    pub(super) page_size: Option<usize>,
}

/// A critical sort that cannot be done: unavailableCriticalExtension
/// and no entries, the sort response saying why (RFC 2891 section 2).
pub(super) fn sort_unavailable(refusal: SortRefusal) -> SearchDone {
    SearchDone {
        sort: Some((refusal.code, refusal.attr)),
        ..SearchDone::new(Outcome::new(
            ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
            format!(
                "the critical sort control cannot be honoured: {}",
                refusal.message
            ),
        ))
    }
}

impl Directory {
    /// How the search's controls ask it to be sorted; `Err`: the search's
    /// answer without searching (a malformed control, a VLV request that
    /// cannot be served, a critical sort that cannot be done).
    #[allow(
        clippy::result_large_err,
        reason = "once per search step, and the answer is moved on whole"
    )]
    pub(super) fn sorting<'c>(
        &self,
        controls: SearchControls<'c>,
        cursor: &SearchCursor,
    ) -> Result<Sorting<'c>, SearchDone> {
        let vlv = match controls.vlv {
            None => None,
            Some(control) => Some(
                meridian_proto::sorting::VlvRequest::decode(control.value).map_err(|e| {
                    SearchDone::new(Outcome::new(
                        ResultCode::PROTOCOL_ERROR,
                        format!("virtual list view control: {e}"),
                    ))
                })?,
            ),
        };
        let vlv_error = |result: ResultCode, message: String| SearchDone {
            vlv: Some(VlvAnswer {
                target_position: 0,
                content_count: 0,
                result,
            }),
            ..SearchDone::new(Outcome::new(ResultCode::VIRTUAL_LIST_VIEW_ERROR, message))
        };
        if vlv.is_some() && controls.page.is_some() {
            return Err(SearchDone::new(Outcome::new(
                ResultCode::UNWILLING_TO_PERFORM,
                "the virtual list view and paged results controls cannot be used together",
            )));
        }
        let Some(sort) = controls.sort else {
            return match vlv {
                None => Ok(Sorting::No),
                Some(_) => Err(vlv_error(
                    ResultCode::SORT_CONTROL_MISSING,
                    "a virtual list view needs the server-side sort control (RFC 2891) too"
                        .to_owned(),
                )),
            };
        };
        if let Some(refusal) = &cursor.unsorted {
            return Ok(Sorting::Refused(refusal.clone()));
        }
        match SortPlan::resolve(sort.value, &self.schema, self.limits().sort_max_keys) {
            Ok(plan) => Ok(Sorting::Yes(plan, vlv)),
            Err(None) => Err(SearchDone::new(Outcome::new(
                ResultCode::PROTOCOL_ERROR,
                "the server-side sort control's value is not a SortKeyList (RFC 2891)",
            ))),
            Err(Some(refusal)) if vlv.is_some() => Err(SearchDone {
                sort: Some((refusal.code, refusal.attr.clone())),
                ..vlv_error(refusal.code, refusal.message)
            }),
            Err(Some(refusal)) if sort.critical => Err(sort_unavailable(refusal)),
            Err(Some(refusal)) => Ok(Sorting::Refused(refusal)),
        }
    }

    /// The sort budget ran out while gathering: a critical sort or a
    /// VLV request ends there; a non-critical sort starts the search
    /// again unsorted (RFC 2891 section 2).
    pub(super) fn sort_overflow(
        &self,
        refusal: SortRefusal,
        sorting: &Sorting<'_>,
        controls: SearchControls<'_>,
        cursor: &mut SearchCursor,
    ) -> Step {
        let critical = controls.sort.is_some_and(|c| c.critical);
        if let Sorting::Yes(_, Some(_)) = sorting {
            return Step::Done(SearchDone {
                sort: Some((refusal.code, None)),
                vlv: Some(VlvAnswer {
                    target_position: 0,
                    content_count: 0,
                    result: refusal.code,
                }),
                ..SearchDone::new(Outcome::new(
                    ResultCode::VIRTUAL_LIST_VIEW_ERROR,
                    refusal.message,
                ))
            });
        }
        if critical {
            return Step::Done(SearchDone {
                page: controls.page.map(|_| (0, Vec::new())),
                ..sort_unavailable(refusal)
            });
        }
        *cursor = SearchCursor {
            started: cursor.started,
            examined: cursor.examined,
            unsorted: Some(refusal),
            ..SearchCursor::new()
        };
        Step::More
    }

    /// Sends the gathered matches from `sending.next` to `sending.end`, in
    /// order, each read again (one deleted since is passed over), until
    /// the byte budget is spent ([`Step::More`]) or they are all sent.
    pub(super) fn send_sorted(
        &self,
        output: &Output<'_>,
        mut sending: Sending,
        contexts: &[Searched<'_>],
        buf: &mut Vec<u8>,
        limits: SendLimits,
        cursor: &mut SearchCursor,
    ) -> Result<Step, Outcome> {
        let mut snapshots: Vec<Option<meridian_store::Snapshot<'_>>> =
            contexts.iter().map(|_| None).collect();
        let mut stopped = None;
        while sending.next < sending.end {
            if buf.len() >= limits.byte_budget {
                cursor.sorted = Some(SortPhase::Sending(sending));
                return Ok(Step::More);
            }
            if limits.earlier_pages.saturating_add(sending.sent) >= limits.size_limit {
                stopped = Some(size_limit_reached(limits.size_limit));
                break;
            }
            let Some(item) = sending.collected.items.get(sending.next) else {
                break;
            };
            let context = item.context as usize;
            let (Some(searched), Some(slot)) = (contexts.get(context), snapshots.get_mut(context))
            else {
                break;
            };
            if slot.is_none() {
                *slot = Some(searched.store.snapshot().map_err(Outcome::from)?);
            }
            if let Some(snapshot) = slot.as_ref()
                && let Some(entry) = snapshot.entry_if_present(item.id).map_err(Outcome::from)?
                && self.may_output(output, &entry)
            {
                self.encode_match(output, snapshot, item.id, &entry, buf);
                sending.sent += 1;
            }
            sending.next += 1;
        }
        let count = sending.collected.items.len();
        let page = limits.page_size.map(|_| {
            let last = sending
                .next
                .checked_sub(1)
                .and_then(|i| sending.collected.items.get(i));
            match last {
                Some(last) if sending.next < count && stopped.is_none() => {
                    let total = limits.earlier_pages.saturating_add(sending.sent);
                    let cookie = encode_page_cookie(
                        limits.fingerprint,
                        u64::try_from(total).unwrap_or(u64::MAX),
                        last,
                    );
                    // The estimate slapd gives: the entries still to come.
                    (
                        i32::try_from(count - sending.next).unwrap_or(i32::MAX),
                        cookie,
                    )
                }
                _ => (0, Vec::new()),
            }
        });
        Ok(Step::Done(SearchDone {
            outcome: stopped.unwrap_or_else(Outcome::success),
            page,
            sort: Some((ResultCode::SUCCESS, None)),
            vlv: sending.vlv,
            entries: u64::try_from(sending.sent).unwrap_or(u64::MAX),
        }))
    }
}
