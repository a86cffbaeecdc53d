//! Query planning: which entry IDs can match a filter, from the indexes.
//!
//! A plan is `All` (no index helps: scan the scope) or a sorted list of
//! candidate IDs, a superset of the matches: AND intersects, OR unites,
//! NOT and unindexed items give `All`. Every candidate is then checked
//! with the model's filter evaluation, so a plan can only cost time,
//! never change a result.
//!
//! An AND reads its items' lists under a cap once it has a short list
//! ([`AND_READ_FACTOR`]): `(&(objectClass=person)(memberOf=G))` over a
//! million people reads G's ten thousand, not a million objectClass keys
//! to intersect with them, at every step of the search.

use heed::RoTxn;
use meridian_config::IndexKind;
use meridian_model::Schema;
use meridian_model::entry::Description;
use meridian_model::prep::Part;
use meridian_model::schema::AttrId;
use meridian_proto::{Filter, Substring};

use crate::index::{Indexes, grams};
use crate::keys::{self, EntryId};
use crate::{Dbs, StoreError};

/// Candidate entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Every entry in scope.
    All,
    /// These IDs, sorted and unique.
    Ids(Vec<EntryId>),
}

pub(crate) struct Planner<'a> {
    pub(crate) txn: &'a RoTxn<'a>,
    pub(crate) dbs: &'a Dbs,
    pub(crate) indexes: &'a Indexes,
    pub(crate) schema: &'a Schema,
    /// Only IDs above this are wanted (a search resuming after the
    /// entry it last sent: each step of a streamed or paged search reads
    /// only the rest of every index list, not all of it again).
    pub(crate) after: Option<EntryId>,
    /// While an AND reads an item under a cap: the most index keys that
    /// item may read, and whether it went past them.
    pub(crate) cap: std::cell::Cell<Option<usize>>,
    pub(crate) capped: std::cell::Cell<bool>,
}

/// Once an AND has a list of N candidates, each further item is read
/// only while it holds at most `AND_READ_FACTOR * N` (and
/// [`AND_READ_FLOOR`]) IDs: reading an index key costs a small part of
/// checking a candidate against the filter, but a list much longer than
/// the candidates cannot shorten them by more than it costs to read.
const AND_READ_FACTOR: usize = 8;
const AND_READ_FLOOR: usize = 4096;

fn intersect(a: &[EntryId], b: &[EntryId]) -> Vec<EntryId> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
        match x.cmp(&y) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(x);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

fn union(mut a: Vec<EntryId>, b: &[EntryId]) -> Vec<EntryId> {
    a.extend_from_slice(b);
    a.sort_unstable();
    a.dedup();
    a
}

/// Which side of an ordering assertion a filter wants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    AtLeast,
    AtMost,
}

impl Planner<'_> {
    /// IDs under one index prefix (every key is the prefix and an ID),
    /// from the first ID above `after`.
    fn ids(&self, prefix: &[u8]) -> Result<Vec<EntryId>, StoreError> {
        let mut start = prefix.to_vec();
        if let Some(after) = self.after {
            start.extend_from_slice(&keys::id_key(after.saturating_add(1)));
        }
        self.ids_between(prefix, &start, None)
    }

    /// IDs of the index keys from `start` on that begin with `within`
    /// and are at most `last` (if given), above `after`, sorted.
    fn ids_between(
        &self,
        within: &[u8],
        start: &[u8],
        last: Option<&[u8]>,
    ) -> Result<Vec<EntryId>, StoreError> {
        let mut out = Vec::new();
        let range = (std::ops::Bound::Included(start), std::ops::Bound::Unbounded);
        let cap = self.cap.get();
        for item in self.dbs.index.range(self.txn, &range)? {
            let (key, _) = item?;
            if !key.starts_with(within) || last.is_some_and(|last| key > last) {
                break;
            }
            if cap.is_some_and(|cap| out.len() >= cap) {
                // Past the AND's cap: the list is dropped unread.
                self.capped.set(true);
                return Ok(Vec::new());
            }
            let tail = key.get(key.len().saturating_sub(8)..).unwrap_or_default();
            if let Some(id) = keys::id_from(tail)
                && self.after.is_none_or(|after| id > after)
            {
                out.push(id);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The OID an indexed type's keys are made with (every type of an
    /// `indexed_family` has one).
    fn oid_of(&self, attr: AttrId) -> Result<&str, StoreError> {
        self.indexes
            .get(attr)
            .map(|spec| spec.oid.as_str())
            .ok_or_else(|| {
                StoreError::internal(format_args!("no index spec for indexed type {attr:?}"))
            })
    }

    /// The attribute and its subtypes, if every one has an index of
    /// `kind` (a filter on `name` also matches `cn` and `sn`).
    fn indexed_family(&self, attr: AttrId, kind: IndexKind) -> Option<Vec<AttrId>> {
        let family: Vec<AttrId> = self
            .schema
            .attributes()
            .filter(|(id, _)| self.schema.is_subtype(*id, attr))
            .map(|(id, _)| id)
            .collect();
        family
            .iter()
            .all(|a| self.indexes.has(*a, kind))
            .then_some(family)
    }

    /// An AND's candidates: the intersection of its items' lists, read
    /// in rounds under a cap that grows by [`AND_READ_FACTOR`] from
    /// [`AND_READ_FLOOR`] until one item's list fits; from then on each
    /// item is read only while its list is at most `AND_READ_FACTOR`
    /// times the candidates so far. An item left out, as too long, is
    /// still checked on every candidate by the filter. The work is
    /// bounded by a few times the shortest list, not by the longest.
    fn and<'f>(&self, children: &[Filter<'f>]) -> Result<Plan, StoreError> {
        let mut acc: Option<Vec<EntryId>> = None;
        let mut pending: Vec<&Filter<'f>> = children.iter().collect();
        let mut cap = AND_READ_FLOOR;
        loop {
            let mut long = Vec::new();
            for child in pending {
                let cap = acc.as_ref().map_or(cap, |acc| {
                    acc.len()
                        .saturating_mul(AND_READ_FACTOR)
                        .max(AND_READ_FLOOR)
                });
                match self.plan_capped(child, cap)? {
                    None => long.push(child),
                    Some(Plan::All) => {}
                    Some(Plan::Ids(ids)) => {
                        let ids = match acc.take() {
                            Some(prev) => intersect(&prev, &ids),
                            None => ids,
                        };
                        if ids.is_empty() {
                            return Ok(Plan::Ids(ids));
                        }
                        acc = Some(ids);
                    }
                }
            }
            if acc.is_some() || long.is_empty() {
                return Ok(acc.map_or(Plan::All, Plan::Ids));
            }
            pending = long;
            cap = cap.saturating_mul(AND_READ_FACTOR);
        }
    }

    /// [`Planner::plan`] reading at most `cap` keys per list; `Ok(None)`
    /// when a list was longer.
    fn plan_capped(&self, filter: &Filter<'_>, cap: usize) -> Result<Option<Plan>, StoreError> {
        let (outer_cap, outer_capped) = (self.cap.replace(Some(cap)), self.capped.replace(false));
        let planned = self.plan(filter);
        let capped = self.capped.replace(outer_capped);
        self.cap.set(outer_cap);
        Ok((!capped).then_some(planned?))
    }

    pub(crate) fn plan(&self, filter: &Filter<'_>) -> Result<Plan, StoreError> {
        match filter {
            Filter::And(children) => {
                let children: Vec<Filter<'_>> = children.iter().collect();
                self.and(&children)
            }
            Filter::Or(children) => {
                let mut acc = Vec::new();
                for child in children.iter() {
                    match self.plan(&child)? {
                        Plan::All => return Ok(Plan::All),
                        Plan::Ids(ids) => acc = union(acc, &ids),
                    }
                }
                Ok(Plan::Ids(acc))
            }
            Filter::Equality(ava) => self.equality(ava.attr, ava.value),
            Filter::Present(attr) => {
                let Ok(desc) = Description::parse_selector(attr, self.schema) else {
                    // present on an unknown type is FALSE for every entry.
                    return Ok(Plan::Ids(Vec::new()));
                };
                let Some(family) = self.indexed_family(desc.attr, IndexKind::Pres) else {
                    return Ok(Plan::All);
                };
                let mut acc = Vec::new();
                for a in family {
                    let oid = self.oid_of(a)?;
                    acc = union(acc, &self.ids(&keys::pres_prefix(oid))?);
                }
                Ok(Plan::Ids(acc))
            }
            Filter::Substrings(s) => {
                let Ok(desc) = Description::parse_selector(s.attr, self.schema) else {
                    return Ok(Plan::All);
                };
                let Some(family) = self.indexed_family(desc.attr, IndexKind::Sub) else {
                    return Ok(Plan::All);
                };
                let mut acc = Vec::new();
                for a in family {
                    let Some(rule) = self.schema.attr(a).and_then(|t| t.substr) else {
                        return Ok(Plan::All);
                    };
                    let parts: Vec<(Part, &[u8])> = s
                        .parts
                        .iter()
                        .map(|p| match p {
                            Substring::Initial(v) => (Part::Initial, v),
                            Substring::Any(v) => (Part::Any, v),
                            Substring::Final(v) => (Part::Final, v),
                        })
                        .collect();
                    let Some(prepared) = rule.substring_parts(&parts, self.schema) else {
                        // The assertion is invalid: Undefined everywhere.
                        continue;
                    };
                    let wanted: std::collections::BTreeSet<Vec<u8>> =
                        prepared.iter().flat_map(|(_, p)| grams(p)).collect();
                    if wanted.is_empty() {
                        // Every part is shorter than a gram.
                        return Ok(Plan::All);
                    }
                    let oid = self.oid_of(a)?;
                    let mut ids: Option<Vec<EntryId>> = None;
                    for gram in &wanted {
                        let found = self.ids(&keys::sub_prefix(oid, gram))?;
                        ids = Some(match ids {
                            Some(prev) => intersect(&prev, &found),
                            None => found,
                        });
                    }
                    acc = union(acc, &ids.unwrap_or_default());
                }
                Ok(Plan::Ids(acc))
            }
            Filter::GreaterOrEqual(ava) => self.ordering(ava.attr, ava.value, Side::AtLeast),
            Filter::LessOrEqual(ava) => self.ordering(ava.attr, ava.value, Side::AtMost),
            Filter::Not(_) | Filter::Approx(_) | Filter::Extensible(_) => Ok(Plan::All),
        }
    }

    /// A `>=` or `<=` item: one range of ordering keys per type of the
    /// family. The filter compares every value of the family with the
    /// asserted type's rule, so the index serves only when each type of
    /// the family orders by that same rule.
    fn ordering(&self, attr: &[u8], value: &[u8], side: Side) -> Result<Plan, StoreError> {
        let Ok(desc) = Description::parse_selector(attr, self.schema) else {
            // Undefined for every entry.
            return Ok(Plan::Ids(Vec::new()));
        };
        let Some(rule) = self.schema.attr(desc.attr).and_then(|t| t.ordering) else {
            // No ordering rule: Undefined for every entry.
            return Ok(Plan::Ids(Vec::new()));
        };
        let Some(family) = self.indexed_family(desc.attr, IndexKind::Ord) else {
            return Ok(Plan::All);
        };
        let same_rule = |a: &AttrId| {
            self.schema
                .attr(*a)
                .and_then(|t| t.ordering)
                .is_some_and(|r| r.oid == rule.oid)
        };
        if !family.iter().all(same_rule) {
            return Ok(Plan::All);
        }
        let Some(key) = rule.key(value, self.schema) else {
            // An assertion the rule cannot take: Undefined everywhere.
            return Ok(Plan::Ids(Vec::new()));
        };
        let sortable = rule.sortable_key(&key);
        let mut acc = Vec::new();
        for a in family {
            let oid = self.oid_of(a)?;
            // Framed and cut as the stored keys are, no stored key of a
            // value on the wanted side lies outside this range; a value
            // of the other side comes in only when its key and the
            // bound were cut alike, and the filter then drops it
            // (`keys::ord_prefix_into`).
            let within = keys::ord_attr_prefix(oid);
            let bound = keys::ord_prefix(oid, &sortable);
            let ids = match side {
                Side::AtLeast => self.ids_between(&within, &bound, None)?,
                Side::AtMost => {
                    let last = keys::with_id(bound, EntryId::MAX);
                    self.ids_between(&within, &within, Some(&last))?
                }
            };
            acc = union(acc, &ids);
        }
        Ok(Plan::Ids(acc))
    }

    fn equality(&self, attr: &[u8], value: &[u8]) -> Result<Plan, StoreError> {
        let Ok(desc) = Description::parse_selector(attr, self.schema) else {
            // Undefined for every entry.
            return Ok(Plan::Ids(Vec::new()));
        };
        let Some(family) = self.indexed_family(desc.attr, IndexKind::Eq) else {
            return Ok(Plan::All);
        };
        // objectClass matches subclasses: look up every class that
        // inherits from the asserted one.
        let keys_for = |a: AttrId| -> Vec<Vec<u8>> {
            let is_oc = self.schema.object_class_attr() == Some(a);
            let Some(rule) = self.schema.attr(a).and_then(|t| t.equality) else {
                return Vec::new();
            };
            if is_oc {
                let Some(class) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|n| self.schema.class_id(n.trim()))
                else {
                    return Vec::new();
                };
                return self
                    .schema
                    .classes()
                    .filter(|(id, _)| self.schema.class_inherits(*id, class))
                    .map(|(_, c)| c.oid.clone().into_bytes())
                    .collect();
            }
            rule.key(value, self.schema).into_iter().collect()
        };
        let mut acc = Vec::new();
        for a in family {
            let oid = self.oid_of(a)?;
            for key in keys_for(a) {
                acc = union(acc, &self.ids(&keys::eq_prefix(oid, &key))?);
            }
        }
        Ok(Plan::Ids(acc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        assert_eq!(intersect(&[1, 3, 5, 7], &[2, 3, 7, 9]), [3, 7]);
        assert_eq!(union(vec![1, 5], &[2, 5, 9]), [1, 2, 5, 9]);
        assert!(intersect(&[], &[1]).is_empty());
    }
}
