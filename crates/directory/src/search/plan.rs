//! A search step's plan, before any entry is examined: the filter's
//! size, the base (through aliases; a referral answers at once), the
//! naming contexts walked and who may walk them, the size and time
//! limits, and where a paged search resumes.

use std::time::Duration;

use meridian_model::dn::Dn;
use meridian_model::filter::ValuesFilter;
use meridian_proto::{DerefAliases, ResultCode, Scope, SearchRequest};

use super::contexts::Searched;
use super::cookie::{PagePosition, decode_cookie, fingerprint};
use super::{Early, SearchControls, SearchCursor};
use crate::access::Level;
use crate::presence::Special;
use crate::rights::Memberships;
use crate::sort::{SortPlan, Sorted, decode_page_cookie};
use crate::{Directory, Identity, Outcome};

/// The size and time limits of one search: the client's, capped by the
/// server's for everyone but the administrator.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub(super) size_limit: usize,
    pub(super) time_limit: Duration,
}

/// Where a paged search stands (RFC 2696), from the request's cookie.
#[derive(Debug)]
pub(super) struct Paging {
    /// What the search's cookies are bound to (0 unpaged: only paged
    /// searches make or read cookies).
    pub(super) fingerprint: u64,
    /// Entries per page.
    pub(super) page_size: Option<usize>,
    /// Where an unsorted search resumes: after the cookie's entry.
    pub(super) resume: Option<PagePosition>,
    /// Where a sorted search resumes: the entries sent so far and the
    /// last one's sort keys.
    pub(super) sorted_resume: Option<(u64, Sorted)>,
    /// Entries sent on earlier pages: they count against the size limit.
    pub(super) earlier_pages: usize,
}

impl Directory {
    /// Refuses a filter made of more filters than
    /// `directory.max_filter_items` (the administrator's is not bounded).
    pub(super) fn check_filter_size(
        &self,
        admin: bool,
        req: &SearchRequest<'_>,
    ) -> Result<(), Outcome> {
        let items = req.filter.items();
        let most = self.limits().max_filter_items;
        if admin || items <= most {
            return Ok(());
        }
        Err(Outcome::new(
            ResultCode::ADMIN_LIMIT_EXCEEDED,
            format!(
                "the filter is made of {items} filters, more than the {most} allowed \
                 (directory.max_filter_items)"
            ),
        ))
    }

    /// The entry a search starts from: the request's base (parsed by the
    /// caller already, or now), through aliases when derefAliases asks;
    /// a referral object there answers the search, unless the client
    /// manages the DSA IT.
    pub(super) fn search_base(
        &self,
        req: &SearchRequest<'_>,
        controls: SearchControls<'_>,
        cursor: &mut SearchCursor,
    ) -> Result<Dn, Early> {
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
            && let Some(referral) = self
                .referral_of(&base, Some(req.scope))
                .map_err(Outcome::from)?
        {
            return Err(Early::paged(controls, referral));
        }
        Ok(base)
    }

    /// The naming contexts a search of `base` walks, each with the base
    /// and scope it is searched with there: the base's, and those glued
    /// below the base within the scope; or, for a search of the whole
    /// tree (the root with a wider scope), every one the caller may
    /// search in turn.
    pub(super) fn walked_contexts<'d>(
        &'d self,
        who: &Identity,
        base: &'d Dn,
        scope: Scope,
        groups: &Memberships,
    ) -> Result<Vec<Searched<'d>>, Outcome> {
        let admin = matches!(who, Identity::Admin(_));
        let mut contexts = self.searched_contexts(base, scope);
        // Glue: a context whose top entry is not there yet is passed
        // over when contexts glued below it are searched too, as slapd's
        // glued databases are (OpenLDAP's test005-modrdn searches such a
        // tree); its own entries are none, and the others answer.
        let glued_over = contexts.len() > 1 && self.top_missing(base)?;
        if glued_over {
            contexts.remove(0);
        }
        if !admin && !base.is_root() && !glued_over {
            // As in slapd, the base itself needs search access.
            self.require_visible(who, base, None, Level::Search, groups)?;
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
        Ok(contexts)
    }

    /// The request's size and time limits, capped by the server's for
    /// everyone but the administrator; 0 from the client means "no
    /// client limit".
    pub(super) fn search_bounds(&self, req: &SearchRequest<'_>, admin: bool) -> Bounds {
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
        Bounds {
            size_limit,
            time_limit,
        }
    }

    /// Where a paged search resumes: after the cookie's entry, stopping
    /// after one page. A sorted search's cookie holds the last entry's
    /// sort keys. A page size of 0 ends the paged search (RFC 2696
    /// section 3): answered at once.
    pub(super) fn paging(
        &self,
        req: &SearchRequest<'_>,
        controls: SearchControls<'_>,
        plan: Option<&SortPlan>,
    ) -> Result<Paging, Early> {
        let unpaged = Paging {
            fingerprint: 0,
            page_size: None,
            resume: None,
            sorted_resume: None,
            earlier_pages: 0,
        };
        let Some(page) = controls.page else {
            return Ok(unpaged);
        };
        if page.size <= 0 {
            return Err(Early::paged(controls, Outcome::success()));
        }
        let fingerprint = fingerprint(req, plan.and(controls.sort).and_then(|c| c.value));
        let not_this_search = || {
            Outcome::new(
                ResultCode::UNWILLING_TO_PERFORM,
                "the paged results cookie does not belong to this search",
            )
        };
        let (resume, sorted_resume) = match plan {
            _ if page.cookie.is_empty() => (None, None),
            None => (
                Some(decode_cookie(page.cookie, fingerprint).ok_or_else(not_this_search)?),
                None,
            ),
            Some(plan) => (
                None,
                Some(
                    decode_page_cookie(page.cookie, fingerprint, plan.len())
                        .ok_or_else(not_this_search)?,
                ),
            ),
        };
        let earlier_pages = match (&resume, &sorted_resume) {
            (Some(r), _) => r.total,
            (None, Some((total, _))) => *total,
            (None, None) => 0,
        };
        Ok(Paging {
            fingerprint,
            page_size: Some(usize::try_from(page.size).unwrap_or(usize::MAX)),
            resume,
            sorted_resume,
            earlier_pages: usize::try_from(earlier_pages).unwrap_or(usize::MAX),
        })
    }

    /// The matched values control's filter (RFC 3876), compiled.
    pub(super) fn values_filter(
        &self,
        controls: SearchControls<'_>,
    ) -> Result<Option<ValuesFilter>, Outcome> {
        let Some(value) = controls.matched_values else {
            return Ok(None);
        };
        // Checked against server.max_ber_depth when read.
        let depth = meridian_proto::Depth::new(1024);
        let items = meridian_proto::controls::decode_values_return_filter(Some(value), depth)
            .map_err(|e| {
                Outcome::new(
                    ResultCode::PROTOCOL_ERROR,
                    format!("matched values control: {e}"),
                )
            })?;
        Ok(Some(ValuesFilter::compile(&items, &self.schema)))
    }
}
