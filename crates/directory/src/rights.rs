//! Rights: group memberships, the access level the rules give, and the
//! checks that refuse (`require`) or hide (`disclose`, `may_see`).

use std::sync::Arc;

use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_model::schema::AttrId;
use meridian_model::selection::Selection;
use meridian_proto::ResultCode;
use meridian_store::StoreError;

use crate::access::{FilterAttrs, Level};
use crate::encode::{Projection, encode_entry_op};
use crate::{Directory, Identity, Outcome};

/// What one request's access checks share: the caller's group
/// memberships, looked up once (the group's normalised DN and whether the
/// caller is in it), and the access rules as the request's first check
/// found them (one load of the reloadable rules per request, not one per
/// entry and attribute: 3 % of a pipelined search, measured).
#[derive(Debug, Default)]
pub(crate) struct Memberships(
    pub(crate) std::cell::RefCell<Vec<(String, bool)>>,
    std::cell::OnceCell<Arc<crate::access::AccessRules>>,
);

pub(crate) fn insufficient(message: &str) -> Outcome {
    Outcome::new(ResultCode::INSUFFICIENT_ACCESS_RIGHTS, message)
}

impl Directory {
    /// Whether `who` is in the group entry at `group` (its member or
    /// uniqueMember values name `who`).
    pub(crate) fn is_member(&self, group: &Dn, who: &Dn) -> bool {
        let Ok(snapshot) = self.store_for(group).snapshot() else {
            return false;
        };
        let Ok(Some((_, entry))) = snapshot.get(group) else {
            return false;
        };
        entry.attributes.iter().any(|a| {
            self.schema.attr(a.desc.attr).is_some_and(|t| {
                t.name().eq_ignore_ascii_case("member")
                    || t.name().eq_ignore_ascii_case("uniqueMember")
            }) && a
                .values
                .iter()
                .any(|v| Dn::parse(v, &self.schema).is_ok_and(|m| m.same_entry(who)))
        })
    }

    /// The access `who` has to `attr` (`None`: the entry itself) of the
    /// entry at `dn`; group memberships are looked up once per `groups`.
    pub(crate) fn access_level(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        groups: &Memberships,
    ) -> Level {
        self.access_decision(who, dn, attr, groups).level
    }

    /// [`Directory::access_level`], with whether an operator's rule
    /// naming `attr` decided it.
    pub(crate) fn access_decision(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        groups: &Memberships,
    ) -> crate::access::Decision {
        groups.1.get_or_init(|| self.access.load_full()).decide(
            who,
            dn,
            attr,
            &self.schema,
            &|group, member| {
                let mut known = groups.0.borrow_mut();
                if let Some((_, is)) = known.iter().find(|(g, _)| g == group.normalized()) {
                    return *is;
                }
                let is = self.is_member(group, member);
                known.push((group.normalized().to_owned(), is));
                is
            },
        )
    }

    /// Refuses with insufficientAccessRights, saying what was missing,
    /// unless `who` has `need` on `attr` of `dn`.
    pub(crate) fn require(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        need: Level,
        groups: &Memberships,
    ) -> Result<(), Outcome> {
        if self.access_level(who, dn, attr, groups) >= need {
            return Ok(());
        }
        let whom = match who {
            Identity::Anonymous => "anonymous clients".to_owned(),
            Identity::Admin(d) | Identity::User(d) => d.original().to_owned(),
        };
        let what = match attr.and_then(|a| self.schema.attr(a)) {
            Some(at) => format!("attribute {} of ", at.name()),
            None => String::new(),
        };
        Err(insufficient(&format!(
            "the access rules do not give {whom} {} access to {what}\"{}\"",
            need.name(),
            dn.original()
        )))
    }

    /// Like [`Self::require`] for an operation on an existing entry, but
    /// where `who` may not even search the entry, the answer is
    /// noSuchObject, as if it were not there: a refusal would reveal
    /// that it exists (slapd's "disclose" rule).
    pub(crate) fn require_visible(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        need: Level,
        groups: &Memberships,
    ) -> Result<(), Outcome> {
        let refused = match self.require(who, dn, attr, need, groups) {
            Ok(()) => return Ok(()),
            Err(refused) => refused,
        };
        if self.access_level(who, dn, None, groups) >= Level::Search {
            return Err(refused);
        }
        // The same matchedDN a missing entry would get: its nearest
        // existing ancestor (that the caller may see).
        let matched = match self.store_for(dn).snapshot() {
            Ok(snapshot) => snapshot.matched(dn).unwrap_or_default(),
            Err(_) => String::new(),
        };
        let missing = StoreError::NoSuchObject {
            dn: dn.original().to_owned(),
            matched,
        };
        Err(self.disclose(who, missing.into()))
    }

    /// A noSuchObject's matchedDN names the nearest existing ancestor;
    /// for anyone but the administrator it is moved up to the nearest
    /// one the caller may search, so it never gives away an entry the
    /// rules hide. Every other outcome is returned as it is.
    pub fn disclose(&self, who: &Identity, mut outcome: Outcome) -> Outcome {
        if matches!(who, Identity::Admin(_))
            || outcome.code != ResultCode::NO_SUCH_OBJECT
            || outcome.matched.is_empty()
        {
            return outcome;
        }
        let groups = Memberships::default();
        let mut candidate = Dn::parse(outcome.matched.as_bytes(), &self.schema).ok();
        while let Some(dn) = candidate {
            if dn.is_root() {
                break;
            }
            if self.access_level(who, &dn, None, &groups) >= Level::Search {
                outcome.matched = dn.original().to_owned();
                return outcome;
            }
            candidate = dn.parent();
        }
        outcome.matched = String::new();
        outcome
    }

    /// Whether `who` (not the administrator) may read `attr` of the entry
    /// at `dn`, as the rules say; userPassword only where an operator's
    /// `[[access]]` rule naming it grants read (for migration tools and
    /// sync agents): never by the built-in rules (which give a user write
    /// on its own), nor by a rule without `attrs`.
    pub(crate) fn may_read_attribute(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: AttrId,
        groups: &Memberships,
    ) -> bool {
        let decision = self.access_decision(who, dn, Some(attr), groups);
        decision.level >= Level::Read && (Some(attr) != self.user_password || decision.named)
    }

    /// Whether `who` may read the server's own subtree at `dn`
    /// (cn=Monitor): the administrator, and whom a rule naming that
    /// subtree grants `read` (a catch-all `to = "*"` does not count: what
    /// the server shows of itself stays the administrator's unless an
    /// operator opens it).
    pub fn may_read_named(&self, who: &Identity, dn: &Dn) -> bool {
        if matches!(who, Identity::Admin(_)) {
            return true;
        }
        self.access
            .load()
            .decide_named(who, dn, &self.schema, &|group, member| {
                self.is_member(group, member)
            })
            .level
            >= Level::Read
    }

    /// Whether `who` may read the entry at `dn` at all: what the
    /// pre-read and post-read controls (RFC 4527) ask before the update.
    pub fn may_read(&self, who: &Identity, dn: &[u8]) -> bool {
        if matches!(who, Identity::Admin(_)) {
            return true;
        }
        match self.parse_dn(dn) {
            Ok(dn) => self.access_level(who, &dn, None, &Memberships::default()) >= Level::Read,
            Err(_) => false,
        }
    }

    /// The value of a pre-read or post-read response control (RFC 4527):
    /// `entry` as a SearchResultEntry with the attributes `attributes`
    /// selects (as a search's attribute list would) that `who` may read.
    pub fn read_entry_value<'a>(
        &self,
        who: &Identity,
        entry: &Entry,
        attributes: impl Iterator<Item = &'a [u8]>,
    ) -> Vec<u8> {
        let selection = Selection::parse(attributes, &self.schema);
        let projection = Projection {
            values: None,
            selection: &selection,
            types_only: false,
            schema: &self.schema,
        };
        let admin = matches!(who, Identity::Admin(_));
        let groups = Memberships::default();
        let visible = |a: &meridian_model::entry::Attribute| {
            admin || self.may_read_attribute(who, &entry.dn, a.desc.attr, &groups)
        };
        let mut value = Vec::new();
        encode_entry_op(
            &mut meridian_ber::Writer::new(&mut value),
            entry,
            projection,
            visible,
            &[],
        );
        value
    }

    /// Whether a search by `who` may return `entry`, which the filter
    /// matched: read access to the entry, and a match through attributes
    /// it may search. When every attribute the filter tests is
    /// searchable, the match stands; otherwise the filter is evaluated
    /// again with the others Undefined (and skipped by a match over every
    /// attribute), as slapd does: an attribute the caller may not search
    /// is simply not matched.
    pub(crate) fn may_see(
        &self,
        who: &Identity,
        entry: &Entry,
        seen: &SeenFilter<'_>,
        groups: &Memberships,
    ) -> bool {
        let dn = &entry.dn;
        if self.access_level(who, dn, None, groups) < Level::Read {
            return false;
        }
        let searchable =
            |attr: AttrId| self.access_level(who, dn, Some(attr), groups) >= Level::Search;
        let tested = seen.tested();
        let all_searchable = tested.attrs.iter().all(|a| searchable(*a))
            && (!tested.every || entry.attributes.iter().all(|a| searchable(a.desc.attr)));
        all_searchable
            || seen
                .compiled
                .evaluate_visible(entry, &self.schema, &searchable)
                == meridian_model::filter::Ternary::True
    }
}

/// A search's filter as [`Directory::may_see`] reads it: compiled once
/// per search step (the store matches with the same), and the types it
/// tests gathered when an entry is first checked, so a search that
/// checks none (the administrator's) never gathers them.
pub(crate) struct SeenFilter<'f> {
    compiled: &'f CompiledFilter,
    tested: std::cell::OnceCell<FilterAttrs>,
}

impl<'f> SeenFilter<'f> {
    pub(crate) fn new(compiled: &'f CompiledFilter) -> Self {
        SeenFilter {
            compiled,
            tested: std::cell::OnceCell::new(),
        }
    }

    /// The types the filter tests.
    pub(crate) fn tested(&self) -> &FilterAttrs {
        self.tested.get_or_init(|| FilterAttrs::of(self.compiled))
    }
}

/// The diagnostic of an assertion control whose filter is not TRUE.
pub(crate) const ASSERTION_FAILED: &str =
    "the assertion control's filter is not TRUE for the entry";

impl Directory {
    /// Whether `who` may attach an assertion control with `filter` to a
    /// write on `dn` (the filter is evaluated inside the write).
    pub fn check_assertion_access(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<(), Outcome> {
        self.assertion_dn(who, dn, filter)
            .map(drop)
            .map_err(|e| self.disclose(who, e))
    }

    /// The entry an assertion control's `filter` is tested on, once
    /// `who` may test it there (reads and writes alike).
    pub(crate) fn assertion_dn(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<Dn, Outcome> {
        let dn = self.parse_dn(dn)?;
        self.require_filter_access(who, &dn, filter, &Memberships::default())?;
        Ok(dn)
    }

    /// The assertion control's filter, like a search's, needs read
    /// access to the entry, and is true only through attributes the
    /// caller may search: when one it tests is not searchable (or it
    /// matches over every attribute), it is evaluated here with those
    /// Undefined, as slapd does, and anything but TRUE is assertionFailed.
    /// (A filter TRUE with some items Undefined stays TRUE whatever they
    /// hold: the write's own evaluation, which sees every attribute,
    /// then agrees.)
    pub(crate) fn require_filter_access(
        &self,
        who: &Identity,
        dn: &Dn,
        filter: &meridian_proto::Filter<'_>,
        groups: &Memberships,
    ) -> Result<(), Outcome> {
        self.require_visible(who, dn, None, Level::Read, groups)?;
        if matches!(who, Identity::Admin(_)) {
            return Ok(());
        }
        let searchable =
            |attr: AttrId| self.access_level(who, dn, Some(attr), groups) >= Level::Search;
        let compiled = CompiledFilter::compile(filter, &self.schema);
        let attrs = FilterAttrs::of(&compiled);
        if !attrs.every && attrs.attrs.iter().all(|a| searchable(*a)) {
            return Ok(());
        }
        let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(dn).map_err(Outcome::from)? else {
            return Err(StoreError::NoSuchObject {
                dn: dn.original().to_owned(),
                matched: snapshot.matched(dn).unwrap_or_default(),
            }
            .into());
        };
        if compiled.evaluate_visible(&entry, &self.schema, &searchable)
            == meridian_model::filter::Ternary::True
        {
            Ok(())
        } else {
            Err(Outcome::new(ResultCode::ASSERTION_FAILED, ASSERTION_FAILED))
        }
    }
}
