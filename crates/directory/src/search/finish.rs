//! The end of a search's walk: a sorted search orders what it gathered
//! and sends the page or the virtual list view's window of it; an
//! unsorted one answers with its result and the page cookie.

use meridian_proto::ResultCode;

use super::cookie::{PagePosition, encode_cookie};
use super::plan::Paging;
use super::sorted::Sorting;
use super::walk::{WalkEnd, WalkSpec};
use super::{SearchCursor, SearchDone, Sending, Step, VlvAnswer};
use crate::sort::{Collected, SortPlan, Window};
use crate::{Directory, Outcome};

impl Directory {
    /// Orders the gathered matches and sends the page, or the window a
    /// virtual list view asks for; a limit that cut the gathering short
    /// ends the search there (RFC 2891: the sort result says so too).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_sorted(
        &self,
        spec: &WalkSpec<'_>,
        (plan, sorting): (&SortPlan, &Sorting<'_>),
        paging: &Paging,
        mut collected: Collected,
        stopped: Option<Outcome>,
        paged: bool,
        cursor: &mut SearchCursor,
        buf: &mut Vec<u8>,
    ) -> Result<Step, Outcome> {
        let vlv = match sorting {
            Sorting::Yes(_, vlv) => vlv.as_ref(),
            Sorting::No | Sorting::Refused(_) => None,
        };
        if let Some(outcome) = stopped {
            let code = outcome.code;
            return Ok(Step::Done(SearchDone {
                page: paged.then(|| (0, Vec::new())),
                sort: Some((code, None)),
                vlv: vlv.map(|_| VlvAnswer {
                    target_position: 0,
                    content_count: 0,
                    result: code,
                }),
                ..SearchDone::new(outcome)
            }));
        }
        collected.sort(plan);
        let count = collected.items.len();
        let (start, end, vlv) = match vlv {
            Some(vlv) => {
                let window = Window::of(plan, &collected.items, vlv, &self.schema);
                let answer = VlvAnswer {
                    target_position: window.target_position,
                    content_count: window.content_count,
                    result: window.result,
                };
                if window.result != ResultCode::SUCCESS {
                    return Ok(Step::Done(vlv_refused(answer, count)));
                }
                (window.start, window.end, Some(answer))
            }
            None => {
                let start = match &paging.sorted_resume {
                    Some((_, last)) => collected.after(plan, last),
                    None => 0,
                };
                let end = match paging.page_size {
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
        self.send_sorted(
            spec.output,
            sending,
            spec.contexts,
            buf,
            spec.limits,
            cursor,
        )
    }

    /// The answer of an unsorted search whose walk ended: its result,
    /// the page cookie (empty after the last page), and why a sort that
    /// was asked for was not done.
    pub(super) fn finish_plain(
        &self,
        end: WalkEnd,
        paging: &Paging,
        sorting: &Sorting<'_>,
    ) -> Step {
        let page = paging.page_size.map(|_| {
            if !end.more {
                return (0, Vec::new());
            }
            let position = PagePosition {
                context: u32::try_from(end.position).unwrap_or(u32::MAX),
                last: end.last,
                total: u64::try_from(paging.earlier_pages.saturating_add(end.sent))
                    .unwrap_or(u64::MAX),
            };
            (0, encode_cookie(position, paging.fingerprint))
        });
        Step::Done(SearchDone {
            page,
            entries: u64::try_from(end.sent).unwrap_or(u64::MAX),
            sort: match sorting {
                Sorting::Refused(refusal) => Some((refusal.code, refusal.attr.clone())),
                Sorting::No | Sorting::Yes(..) => None,
            },
            ..SearchDone::new(end.stopped.unwrap_or_else(Outcome::success))
        })
    }
}

/// A virtual list view whose window cannot be given: its response says
/// why (offsetRangeError, or a target value the sort cannot read).
fn vlv_refused(answer: VlvAnswer, count: usize) -> SearchDone {
    let message = match answer.result {
        ResultCode::OFFSET_RANGE_ERROR => {
            format!("the virtual list view's offset is outside the list of {count} entries")
        }
        _ => "the virtual list view's target value is not one the first sort key's matching rule can read".to_owned(),
    };
    SearchDone {
        sort: Some((ResultCode::SUCCESS, None)),
        vlv: Some(answer),
        ..SearchDone::new(Outcome::new(ResultCode::VIRTUAL_LIST_VIEW_ERROR, message))
    }
}
