//! Read snapshots: consistent views from any thread.

use std::sync::{Arc, RwLockReadGuard};

use heed::{RoTxn, WithoutTls};
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_proto::{Filter, Scope};

use crate::apply::{self, ROOT_ID};
use crate::codec::StoredPart;
use crate::dn_ids::SharedDnIds;
use crate::keys::{self, EntryId};
use crate::names::{NameSource, NameTable, Resolver};
use crate::plan::{Plan, Planner};

mod column_scan;
mod found;
use crate::{Inner, StoreError, codec};
use column_scan::ColumnWalk;
pub use found::{Found, FoundRecord, StoredAttribute};

/// A read transaction. Field order matters: the transaction ends before
/// the resize guard is released.
pub struct Snapshot<'s> {
    txn: RoTxn<'s, WithoutTls>,
    inner: &'s Inner,
    /// Attribute names as of the snapshot's start (newer ones are read
    /// from `meta` in `txn`).
    names: Arc<NameTable>,
    _resize: RwLockReadGuard<'s, ()>,
}

/// One key and value of one database, for [`Snapshot::raw_dump`].
#[doc(hidden)]
pub type RawItem = (&'static str, Vec<u8>, Vec<u8>);

/// A search's filter as written, and compiled against the store's schema
/// ([`CompiledFilter::compile`] of `written`): the plan reads the first,
/// matching evaluates the second. A caller that also evaluates the filter
/// itself (access control) compiles it once for both.
#[derive(Debug, Clone, Copy)]
pub struct SearchFilter<'f, 'a> {
    /// The filter as the request holds it.
    pub written: &'f Filter<'a>,
    /// `written`, compiled.
    pub compiled: &'f CompiledFilter,
}

/// How a search was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SearchReport {
    /// Entries read and evaluated.
    pub candidates: usize,
    /// Entries that matched.
    pub matched: usize,
    /// True if the indexes narrowed the candidates (false: a scan).
    pub indexed: bool,
    /// True if scan columns narrowed them (`columns.rs`): an unindexed
    /// search that read the columns' rows instead of every entry.
    pub columns: bool,
}

impl<'s> Snapshot<'s> {
    pub(crate) fn new(inner: &'s Inner) -> Result<Snapshot<'s>, StoreError> {
        let guard = inner.hold_map();
        let txn = inner.env.read_txn()?;
        Ok(Snapshot {
            txn,
            inner,
            names: inner.name_table(),
            _resize: guard,
        })
    }

    /// Decodes records read in this snapshot.
    pub(crate) fn resolver(&self) -> Resolver<'_, 's> {
        Resolver {
            table: &self.names,
            txn: &self.txn,
            dbs: &self.inner.dbs,
            schema: &self.inner.schema,
        }
    }

    pub(crate) fn parts(&self) -> (&RoTxn<'s, WithoutTls>, &'s Inner) {
        (&self.txn, self.inner)
    }

    /// Benchmark ceiling: the bytes of the stored entry at `dn`, looked up
    /// through `dn2id` and `id2entry` with no decoding. Raw LMDB cost.
    #[doc(hidden)]
    pub fn raw_get_len(&self, dn: &Dn) -> Result<Option<usize>, StoreError> {
        let Some(id) = self.id(dn)? else {
            return Ok(None);
        };
        Ok(self
            .inner
            .dbs
            .id2entry
            .get(&self.txn, &keys::id_key(id))?
            .map(<[u8]>::len))
    }

    /// Benchmark ceiling: walks every stored entry without decoding and
    /// returns the bytes seen. Raw LMDB cost of a full scan.
    #[doc(hidden)]
    pub fn raw_scan_len(&self) -> Result<usize, StoreError> {
        let mut total = 0;
        for item in self.inner.dbs.id2entry.iter(&self.txn)? {
            total += item?.1.len();
        }
        Ok(total)
    }

    /// Benchmark ceiling: [`Snapshot::raw_scan_len`] reading one byte
    /// of every 64 (every cache line) of every record: the memory cost
    /// of a scan that looks at whole records.
    #[doc(hidden)]
    pub fn raw_scan_touch(&self) -> Result<u64, StoreError> {
        let mut total = 0u64;
        for item in self.inner.dbs.id2entry.iter(&self.txn)? {
            let bytes = item?.1;
            total += bytes.iter().step_by(64).map(|b| u64::from(*b)).sum::<u64>();
        }
        Ok(total)
    }

    /// Every key and value of every database, in order: two stores that
    /// applied the same commands must give the same dump (the
    /// deterministic-writes test).
    #[doc(hidden)]
    pub fn raw_dump(&self) -> Result<Vec<RawItem>, StoreError> {
        let dbs = &self.inner.dbs;
        let mut out = Vec::new();
        for (name, db) in [
            ("meta", dbs.meta),
            ("id2entry", dbs.id2entry),
            ("dn2id", dbs.dn2id),
            ("children", dbs.children),
            ("index", dbs.index),
        ] {
            for item in db.iter(&self.txn)? {
                let (k, v) = item?;
                out.push((name, k.to_vec(), v.to_vec()));
            }
        }
        Ok(out)
    }

    /// The ID of `dn`.
    pub fn id(&self, dn: &Dn) -> Result<Option<EntryId>, StoreError> {
        apply::tree::lookup(&self.txn, &self.inner.dbs, dn)
    }

    /// The entry at `dn`.
    pub fn get(&self, dn: &Dn) -> Result<Option<(EntryId, Entry)>, StoreError> {
        match self.locate(dn)? {
            Some((id, record)) => Ok(Some((
                id,
                codec::decode_as(record, &self.resolver(), Some(dn))?,
            ))),
            None => Ok(None),
        }
    }

    /// The first value of `attr` (without options) of the entry at `dn`;
    /// `None` when there is no such entry or it has no such value. Read
    /// from the stored record in place where it allows, not by decoding
    /// the whole entry ([`apply::tree::record_first_value`]).
    pub fn first_value(
        &self,
        dn: &Dn,
        attr: meridian_model::schema::AttrId,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let Some((_, record)) = self.locate(dn)? else {
            return Ok(None);
        };
        apply::tree::record_first_value(record, &self.resolver(), attr, Some(dn))
    }

    /// The ID and stored record of the entry at `dn`: through the ID
    /// remembered for it, checked against the record's DN
    /// (`dn_ids.rs`), else through `dn2id`. A DN found there is
    /// remembered when the request spells it as it is stored (otherwise
    /// the check could never pass).
    fn locate(&self, dn: &Dn) -> Result<Option<(EntryId, &[u8])>, StoreError> {
        let guesses = &self.inner.read_dn_ids;
        let key = SharedDnIds::key(dn);
        if let Some(id) = guesses.guess(key) {
            if let Some(record) = self.inner.dbs.id2entry.get(&self.txn, &keys::id_key(id))?
                && codec::stored_dn(record) == Some(dn.original().as_bytes())
            {
                return Ok(Some((id, record)));
            }
            guesses.forget(key);
        }
        let Some(id) = self.id(dn)? else {
            return Ok(None);
        };
        let record = self
            .inner
            .dbs
            .id2entry
            .get(&self.txn, &keys::id_key(id))?
            .ok_or_else(|| {
                StoreError::corrupt(format_args!("dn2id points at missing entry {id}"))
            })?;
        if codec::stored_dn(record) == Some(dn.original().as_bytes()) {
            guesses.remember(key, id);
        }
        Ok(Some((id, record)))
    }

    /// The entry with ID `id` (which must exist).
    pub fn entry(&self, id: EntryId) -> Result<Entry, StoreError> {
        apply::tree::load(&self.resolver(), id, None)
    }

    /// The entry `id`, `None` if there is none (an ID learned in an
    /// earlier snapshot may name an entry deleted since).
    pub fn entry_if_present(&self, id: EntryId) -> Result<Option<Entry>, StoreError> {
        apply::tree::load_if_present(&self.resolver(), id)
    }

    /// The deepest existing ancestor of a missing `dn` (matchedDN).
    pub fn matched(&self, dn: &Dn) -> Result<String, StoreError> {
        apply::tree::matched(&self.txn, &self.inner.dbs, dn)
    }

    /// Children of an entry (`None` for the root: the suffix entries).
    pub fn children(&self, id: Option<EntryId>) -> Result<Vec<EntryId>, StoreError> {
        let parent = id.unwrap_or(ROOT_ID);
        let mut out = Vec::new();
        for item in self
            .inner
            .dbs
            .children
            .prefix_iter(&self.txn, &parent.to_be_bytes())?
        {
            let (key, _) = item?;
            if let Some(child) = key.get(8..).and_then(keys::id_from) {
                out.push(child);
            }
        }
        Ok(out)
    }

    /// `Some(description)` if the database holds a bulk load that has not
    /// completed (in progress, stopped or crashed).
    pub fn incomplete_load(&self) -> Result<Option<String>, StoreError> {
        Ok(self
            .inner
            .dbs
            .meta
            .get(&self.txn, apply::LOAD_INCOMPLETE)?
            .map(|v| String::from_utf8_lossy(v).into_owned()))
    }

    /// Every entry ID in DN order: parents before their children, and
    /// siblings in the order of their normalised RDNs, whatever order
    /// they were added in (what an export walks).
    pub fn ids_in_dn_order(&self) -> Result<Vec<EntryId>, StoreError> {
        self.ids_in_dn_order_under(&Dn::root())
    }

    /// [`Snapshot::ids_in_dn_order`] for `base` and its subtree only (a
    /// `dn2id` key prefix).
    pub fn ids_in_dn_order_under(&self, base: &Dn) -> Result<Vec<EntryId>, StoreError> {
        let mut out = Vec::new();
        let prefix = keys::dn_key(base);
        // LMDB refuses an empty key, even as a prefix: the root's subtree
        // is the whole database.
        let mut push = |value: &[u8]| -> Result<(), StoreError> {
            let id = keys::id_from(value)
                .ok_or_else(|| StoreError::corrupt("a dn2id value is not an entry ID"))?;
            out.push(id);
            Ok(())
        };
        if prefix.is_empty() {
            for item in self.inner.dbs.dn2id.iter(&self.txn)? {
                push(item?.1)?;
            }
        } else {
            for item in self.inner.dbs.dn2id.prefix_iter(&self.txn, &prefix)? {
                push(item?.1)?;
            }
        }
        Ok(out)
    }

    /// The DN of the entry with ID `id` (which must exist), without
    /// decoding the rest of it.
    pub fn dn_of(&self, id: EntryId) -> Result<Dn, StoreError> {
        let text = codec::decode_dn(self.record(id)?)?;
        Ok(Dn::parse(text, &self.inner.schema)?)
    }

    /// The stored record of entry `id`, which must exist.
    fn record(&self, id: EntryId) -> Result<&[u8], StoreError> {
        self.inner
            .dbs
            .id2entry
            .get(&self.txn, &keys::id_key(id))?
            .ok_or_else(|| StoreError::corrupt(format_args!("no entry {id}")))
    }

    /// The entry with ID `id` as stored, part by part, without building a
    /// model entry (no DN normalisation, no value copies): its DN, then
    /// each value with its attribute name as written and its type. What
    /// an export writes.
    pub fn visit_stored(
        &self,
        id: EntryId,
        each: &mut dyn FnMut(StoredPart<'_>),
    ) -> Result<(), StoreError> {
        codec::visit(self.record(id)?, &self.resolver(), each)
    }

    /// Calls `each` with the first value of `attr` of every entry that
    /// has one, in ID order.
    pub fn each_first_value(
        &self,
        attr: meridian_model::schema::AttrId,
        each: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        let names = self.resolver();
        for item in self.inner.dbs.id2entry.iter(&self.txn)? {
            let (_, record) = item?;
            if let Some(value) = apply::tree::record_first_value(record, &names, attr, None)? {
                each(&value);
            }
        }
        Ok(())
    }

    /// Number of entries in the store.
    pub fn len(&self) -> Result<u64, StoreError> {
        Ok(self.inner.dbs.id2entry.len(&self.txn)?)
    }

    /// True if the store holds no entry.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }

    /// The entries of an object class (its subclasses too), read from
    /// the objectClass equality index; `None` when objectClass has no
    /// equality index. Referral objects and aliases are found this way:
    /// one index lookup tells a search or an update that there are none.
    pub fn class_members(&self, class: &str) -> Result<Option<Vec<EntryId>>, StoreError> {
        let planner = Planner {
            txn: &self.txn,
            dbs: &self.inner.dbs,
            indexes: &self.inner.indexes,
            schema: &self.inner.schema,
            after: None,
            cap: Default::default(),
            capped: Default::default(),
        };
        let filter = Filter::Equality(meridian_proto::Ava {
            attr: b"objectClass",
            value: class.as_bytes(),
        });
        Ok(match planner.plan(&filter)? {
            Plan::Ids(ids) => Some(ids),
            Plan::All => None,
        })
    }

    /// IDs in scope, in DN order for subtrees.
    fn scope_ids(
        &self,
        base: &Dn,
        base_id: Option<EntryId>,
        scope: Scope,
    ) -> Result<Vec<EntryId>, StoreError> {
        match scope {
            Scope::Base => Ok(base_id.into_iter().collect()),
            Scope::OneLevel => self.children(base_id),
            Scope::Subtree | Scope::Subordinate => {
                let prefix = keys::dn_key(base);
                let mut out = Vec::new();
                // LMDB refuses an empty key: the root's subtree is everything.
                type Items<'t> = Box<dyn Iterator<Item = heed::Result<(&'t [u8], &'t [u8])>> + 't>;
                let iter: Items<'_> = if prefix.is_empty() {
                    Box::new(self.inner.dbs.dn2id.iter(&self.txn)?)
                } else {
                    Box::new(self.inner.dbs.dn2id.prefix_iter(&self.txn, &prefix)?)
                };
                for item in iter {
                    let (key, value) = item?;
                    if scope == Scope::Subordinate && key == prefix.as_slice() {
                        continue;
                    }
                    if let Some(id) = keys::id_from(value) {
                        out.push(id);
                    }
                }
                Ok(out)
            }
        }
    }

    /// Runs a search: every entry in scope that matches `filter` is passed
    /// to `each`, which returns false to stop (size limit, abandon).
    /// The base must exist unless it is the root; a missing base is
    /// noSuchObject with its matchedDN.
    pub fn search(
        &self,
        base: &Dn,
        scope: Scope,
        filter: &Filter<'_>,
        each: impl FnMut(EntryId, &Entry) -> bool,
    ) -> Result<SearchReport, StoreError> {
        self.search_after(base, scope, filter, None, each)
    }

    /// [`Snapshot::search`] for paging: with `after`, entries come in ID
    /// order and only those with a larger ID, so a page can resume where
    /// the previous one stopped without keeping a transaction open.
    pub fn search_after(
        &self,
        base: &Dn,
        scope: Scope,
        filter: &Filter<'_>,
        after: Option<EntryId>,
        each: impl FnMut(EntryId, &Entry) -> bool,
    ) -> Result<SearchReport, StoreError> {
        let compiled = CompiledFilter::compile(filter, &self.inner.schema);
        let filter = SearchFilter {
            written: filter,
            compiled: &compiled,
        };
        self.search_examining(base, scope, filter, after, &mut |_| true, each)
    }

    /// [`Snapshot::search_after`] that asks `examine` before it looks at
    /// each candidate, matching or not: false stops the search there,
    /// that candidate unexamined. This is how a caller bounds the work of
    /// a search that matches nothing (a time limit, a cap on entries
    /// examined, a step that yields to other requests), which `each`
    /// alone cannot, since it only hears of matches.
    pub fn search_examining(
        &self,
        base: &Dn,
        scope: Scope,
        filter: SearchFilter<'_, '_>,
        after: Option<EntryId>,
        examine: &mut dyn FnMut(EntryId) -> bool,
        mut each: impl FnMut(EntryId, &Entry) -> bool,
    ) -> Result<SearchReport, StoreError> {
        self.search_found(base, scope, filter, after, examine, |id, found| {
            Ok(each(id, &found.entry()?))
        })
    }

    /// [`Snapshot::search_examining`] that hands `each` the matching
    /// records undecoded: it decodes what it needs ([`Found::entry`]) or
    /// reads the record in place ([`Found::record`]). An error from
    /// `each` ends the search with it.
    ///
    /// One function on purpose (over 150 lines): it is every search's
    /// inner loop, and its candidate sources (index, scope walk, scan
    /// column) share the per-candidate checks and what is kept across
    /// candidates (the DN parent cache, the filter's relevant slots);
    /// split, each part would take the same dozen borrowed locals as
    /// arguments.
    pub fn search_found(
        &self,
        base: &Dn,
        scope: Scope,
        filter: SearchFilter<'_, '_>,
        after: Option<EntryId>,
        examine: &mut dyn FnMut(EntryId) -> bool,
        mut each: impl FnMut(EntryId, Found<'_>) -> Result<bool, StoreError>,
    ) -> Result<SearchReport, StoreError> {
        let schema = &self.inner.schema;
        // A base search reads the base's record here, once; other scopes
        // need only its ID.
        let (base_id, base_record) = if base.is_root() {
            (None, None)
        } else {
            let found = match scope {
                Scope::Base => self.locate(base)?.map(|(id, record)| (id, Some(record))),
                _ => self.id(base)?.map(|id| (id, None)),
            };
            let Some((id, record)) = found else {
                return Err(StoreError::NoSuchObject {
                    dn: base.original().to_owned(),
                    matched: self.matched(base)?,
                });
            };
            (Some(id), record)
        };
        let names = self.resolver();
        let planner = Planner {
            txn: &self.txn,
            dbs: &self.inner.dbs,
            indexes: &self.inner.indexes,
            schema,
            after,
            cap: Default::default(),
            capped: Default::default(),
        };
        let plan = if scope == Scope::Base {
            Plan::All
        } else {
            planner.plan(filter.written)?
        };
        // A subtree search of the root, or of the only naming context,
        // covers every entry in the store.
        let covers_store = scope == Scope::Subtree
            && (base.is_root()
                || (self.inner.suffixes.len() == 1
                    && self.inner.suffixes.iter().all(|s| s.same_entry(base))));
        let column =
            self.column_to_read(filter.written, &plan, after, base, scope, covers_store)?;
        // A scan column may stand in for walking the scope or reading a
        // long index list (`columns.rs`).
        let compiled = filter.compiled;
        let mut report = SearchReport {
            indexed: matches!(plan, Plan::Ids(_)) && column.is_none(),
            columns: column.is_some(),
            ..SearchReport::default()
        };
        if scope != Scope::Base && after.is_none_or(|a| a == 0) {
            let stats = &self.inner.stats;
            if report.indexed {
                stats.searches_indexed.inc();
            } else if report.columns {
                stats.searches_columns.inc();
            } else {
                stats.searches_scanned.inc();
            }
        }
        // Candidates from an index or a column may lie outside the scope
        // (unless the scope is everything); the ones from walking the
        // scope cannot.
        let check_scope = (matches!(plan, Plan::Ids(_)) || column.is_some()) && !covers_store;
        // Evaluate on the stored bytes; decode only what matches.
        let relevance = codec::Relevance::new(compiled.wanted_slots(), names.known().len());
        // A candidate's DN is made once, for the scope check and the
        // entry: the base's cloned, others reusing the parent of the last
        // one (siblings share it).
        let mut parents = meridian_model::dn::RecentParent::default();
        let mut stored_dn = |text: &[u8]| -> Result<Dn, StoreError> {
            if text == base.original().as_bytes() {
                Ok(base.clone())
            } else if text.is_empty() {
                Ok(Dn::root())
            } else {
                Ok(parents.parse(text, schema)?)
            }
        };
        // Each entry passes `examine` once, read (`Some`) or ruled out
        // without reading it (`None`: by a scan column's row).
        let mut visit = |id: EntryId, bytes: Option<&[u8]>| -> Result<bool, StoreError> {
            if !examine(id) {
                return Ok(false);
            }
            let Some(bytes) = bytes else {
                return Ok(true);
            };
            report.candidates += 1;
            codec::prefetch(bytes);
            codec::prefetch_following(bytes);
            let mut dn = None;
            if check_scope {
                let candidate = stored_dn(codec::decode_dn(bytes)?)?;
                if !dn_in_scope(&candidate, base, scope) {
                    return Ok(true);
                }
                dn = Some(candidate);
            }
            if !compiled.matches(&codec::RawEntry::new(bytes, &names, &relevance), schema) {
                return Ok(true);
            }
            report.matched += 1;
            each(
                id,
                Found {
                    record: bytes,
                    names: &names,
                    dn,
                    make_dn: &mut stored_dn,
                },
            )
        };
        // A scan of everything under the only naming context (or the root)
        // reads id2entry in order instead of looking entries up one by one.
        let whole_store = matches!(plan, Plan::All) && covers_store;
        let mut resume = None;
        if let Some(scan) = column {
            match self.walk_column(scan, after, &names, &mut visit)? {
                ColumnWalk::Done => return Ok(report),
                ColumnWalk::Resume(id) => resume = Some(id),
            }
        }
        // Without a column, or after one that ruled out too few entries.
        let after = resume.or(after);
        if whole_store {
            use std::ops::Bound;
            let start = keys::id_key(after.map_or(0, |a| a.saturating_add(1)));
            let from: (Bound<&[u8]>, Bound<&[u8]>) =
                (Bound::Included(&start[..]), Bound::Unbounded);
            for item in self.inner.dbs.id2entry.range(&self.txn, &from)? {
                let (key, bytes) = item?;
                let Some(id) = keys::id_from(key) else {
                    continue;
                };
                if !visit(id, Some(bytes))? {
                    break;
                }
            }
        } else if let (Some(record), Some(id)) = (base_record, base_id) {
            // A base search: the record `locate` read.
            if after.is_none_or(|a| id > a) {
                visit(id, Some(record))?;
            }
        } else {
            let mut ids = match plan {
                Plan::All => self.scope_ids(base, base_id, scope)?,
                Plan::Ids(ids) => ids,
            };
            let missing = |id: EntryId| {
                StoreError::corrupt(format_args!("entry {id} is indexed but missing"))
            };
            // Candidates that are a good share of the store (a subtree
            // scan of the one big container, a broad index list) are read
            // in one pass over id2entry in key order, picked out by a
            // bitmap of the candidates: a cursor step per entry instead of
            // a B-tree descent (mdb_get was 15 % of an unindexed search's
            // CPU), and no sort of the list (a subtree's IDs come in DN
            // order; sorting 50,000 of them was 7 % of such a search).
            let dense = match after {
                Some(after) if ids.len() as u64 * 4 >= self.len()? => Candidates::new(&ids, after),
                _ => None,
            };
            if let Some(mut candidates) = dense {
                use std::ops::Bound;
                let start = keys::id_key(candidates.first);
                let from: (Bound<&[u8]>, Bound<&[u8]>) =
                    (Bound::Included(&start[..]), Bound::Unbounded);
                for item in self.inner.dbs.id2entry.range(&self.txn, &from)? {
                    if candidates.left == 0 {
                        break;
                    }
                    let (key, bytes) = item?;
                    let Some(id) = keys::id_from(key) else {
                        continue;
                    };
                    if candidates.take(id) && !visit(id, Some(bytes))? {
                        return Ok(report);
                    }
                }
                if let Some(id) = candidates.any_left() {
                    return Err(missing(id));
                }
            } else {
                if let Some(after) = after {
                    ids.sort_unstable();
                    ids.retain(|id| *id > after);
                }
                for id in ids {
                    let Some(bytes) = self.inner.dbs.id2entry.get(&self.txn, &keys::id_key(id))?
                    else {
                        return Err(missing(id));
                    };
                    if !visit(id, Some(bytes))? {
                        break;
                    }
                }
            }
        }
        Ok(report)
    }
}

/// Whether the stored record `bytes` is of an entry in `scope` of `base`.
pub(crate) fn record_in_scope(
    bytes: &[u8],
    base: &Dn,
    scope: Scope,
    schema: &meridian_model::Schema,
) -> Result<bool, StoreError> {
    let dn = codec::parse_stored_dn(codec::decode_dn(bytes)?, schema)?;
    Ok(dn_in_scope(&dn, base, scope))
}

/// Whether `dn` is in `scope` of `base`.
fn dn_in_scope(dn: &Dn, base: &Dn, scope: Scope) -> bool {
    match scope {
        Scope::Base => true,
        Scope::OneLevel => dn.is_child_of(base),
        Scope::Subtree => dn.is_within(base),
        Scope::Subordinate => dn.is_descendant_of(base),
    }
}

/// A dense candidate list as a bitmap over its ID range, for one pass
/// over `id2entry` in key order.
struct Candidates {
    /// The lowest candidate.
    first: EntryId,
    /// Bit `id - first` is set while `id` is a candidate not yet visited.
    bits: Vec<u64>,
    /// Candidates not yet visited.
    left: usize,
}

impl Candidates {
    /// The candidates of `ids` after `after`, or `None` when there are
    /// none or their range is too sparse for a bitmap (more than 64 IDs
    /// of range per candidate: IDs are never reused, so a store that
    /// deleted much has gaps).
    fn new(ids: &[EntryId], after: EntryId) -> Option<Candidates> {
        let wanted = || ids.iter().copied().filter(move |&id| id > after);
        let (first, last) = wanted().fold(None, |range, id| match range {
            None => Some((id, id)),
            Some((lo, hi)) => Some((id.min(lo), id.max(hi))),
        })?;
        let span = usize::try_from(last - first).ok()?.checked_add(1)?;
        if span / 64 > ids.len() {
            return None;
        }
        let mut candidates = Candidates {
            first,
            bits: vec![0; span.div_ceil(64)],
            left: 0,
        };
        for id in wanted() {
            let (word, bit) = candidates.slot(id)?;
            if let Some(w) = candidates.bits.get_mut(word)
                && *w & bit == 0
            {
                *w |= bit;
                candidates.left += 1;
            }
        }
        Some(candidates)
    }

    fn slot(&self, id: EntryId) -> Option<(usize, u64)> {
        let offset = usize::try_from(id.checked_sub(self.first)?).ok()?;
        Some((offset / 64, 1 << (offset % 64)))
    }

    /// Whether `id` is a candidate not yet visited; it is not after this.
    fn take(&mut self, id: EntryId) -> bool {
        let Some((word, bit)) = self.slot(id) else {
            return false;
        };
        match self.bits.get_mut(word) {
            Some(w) if *w & bit != 0 => {
                *w &= !bit;
                self.left -= 1;
                true
            }
            _ => false,
        }
    }

    /// A candidate never visited, if any.
    fn any_left(&self) -> Option<EntryId> {
        let (word, w) = self.bits.iter().enumerate().find(|(_, w)| **w != 0)?;
        Some(self.first + (word as u64) * 64 + u64::from(w.trailing_zeros()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use meridian_config::{Backend, StorageConfig};
    use meridian_model::Schema;
    use meridian_model::dn::Dn;
    use meridian_model::entry::Entry;

    use super::Found;
    use crate::names::{NameSource, NameTable, Resolver};
    use crate::{Command, Store, StoreOptions, apply, keys};

    /// An empty in-memory store under `dc=example,dc=com`.
    fn memory_store() -> (Arc<Schema>, Store) {
        let schema = Arc::new(Schema::builtin().unwrap());
        let store = Store::open(
            StoreOptions {
                path: std::env::temp_dir(),
                storage: StorageConfig {
                    backend: Backend::Memory,
                    ..StorageConfig::default()
                },
                suffixes: vec![Dn::parse(b"dc=example,dc=com", &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
        .unwrap();
        (schema, store)
    }

    /// A memory store holding `dc=example,dc=com` (objectClass, then
    /// dc: two attribute names), that entry and its ID.
    fn store_with_suffix() -> (Arc<Schema>, Store, Entry, super::EntryId) {
        let (schema, store) = memory_store();
        let dn = Dn::parse(b"dc=example,dc=com", &schema).unwrap();
        let entry = Entry::new(
            dn.clone(),
            [
                (&b"objectClass"[..], vec![&b"domain"[..]]),
                (&b"dc"[..], vec![&b"example"[..]]),
            ],
            &schema,
        )
        .unwrap();
        store
            .execute_blocking(Command::Add {
                entry: entry.clone(),
                prechecked: false,
            })
            .unwrap();
        let id = store.snapshot().unwrap().id(&dn).unwrap().unwrap();
        (schema, store, entry, id)
    }

    /// A reader whose name table predates a record (the record's commit
    /// landed between the table's publication and the reader's start)
    /// finds the names in `meta` through its own transaction.
    #[test]
    fn names_newer_than_the_table_are_read_from_meta() {
        let (schema, store, entry, id) = store_with_suffix();
        let snapshot = store.snapshot().unwrap();
        let stale = NameTable::default();
        let names = Resolver {
            table: &stale,
            txn: &snapshot.txn,
            dbs: &snapshot.inner.dbs,
            schema: &schema,
        };
        assert_eq!(apply::tree::load(&names, id, None).unwrap(), entry);
    }

    /// A record naming an attribute the reader's table does not have
    /// cannot be read in place: the walk says so (after handing out the
    /// attributes before it), and the decoded entry is still whole.
    #[test]
    fn records_with_names_newer_than_the_table_are_decoded_instead() {
        let (schema, store, entry, id) = store_with_suffix();
        let snapshot = store.snapshot().unwrap();
        let record = snapshot
            .inner
            .dbs
            .id2entry
            .get(&snapshot.txn, &keys::id_key(id))
            .unwrap()
            .unwrap();
        // The first name only, as a table published before the second.
        let current = snapshot.resolver();
        let first = current.known()[0].text.clone();
        let older = NameTable::of(&[first.as_str()], &schema);
        let names = Resolver {
            table: &older,
            txn: &snapshot.txn,
            dbs: &snapshot.inner.dbs,
            schema: &schema,
        };
        let mut make_dn = |text: &[u8]| Ok(Dn::parse(text, &schema)?);
        let found = Found {
            record,
            names: &names,
            dn: None,
            make_dn: &mut make_dn,
        };
        let in_place = found.record().unwrap();
        assert_eq!(in_place.dn(), b"dc=example,dc=com");
        let mut seen = Vec::new();
        assert!(!in_place.for_each_attribute(|a| seen.push(a.desc.attr)));
        assert_eq!(seen.len(), 1);
        assert_eq!(found.entry().unwrap(), entry);
        // With the whole table, every attribute is read in place.
        let found = Found {
            record,
            names: &current,
            dn: None,
            make_dn: &mut make_dn,
        };
        let mut seen = 0;
        assert!(found.record().unwrap().for_each_attribute(|_| seen += 1));
        assert_eq!(seen, 2);
    }

    /// The bitmap of a dense candidate list: those after `after` only,
    /// each taken once, in any order given; a sparse range is refused.
    #[test]
    fn dense_candidates_are_taken_once_each() {
        let mut c = super::Candidates::new(&[40, 7, 9, 300, 9, 3], 5).unwrap();
        assert_eq!((c.first, c.left), (7, 4));
        assert!(!c.take(3) && !c.take(8) && !c.take(301));
        assert!(c.take(9) && !c.take(9));
        assert!(c.take(7) && c.take(300));
        assert_eq!(c.any_left(), Some(40));
        assert!(c.take(40));
        assert_eq!((c.left, c.any_left()), (0, None));
        assert!(super::Candidates::new(&[1, 2], 2).is_none());
        assert!(super::Candidates::new(&[1, 1_000_000], 0).is_none());
    }

    /// A DN's remembered ID is checked against the record it names: after
    /// the entry is deleted and another added under the same DN (a new
    /// ID), or when the DN is asked for in another spelling, reads find
    /// what `dn2id` says, never the remembered record.
    #[test]
    fn remembered_ids_are_checked_before_use() {
        let (schema, store) = memory_store();
        let dn = |text: &str| Dn::parse(text.as_bytes(), &schema).unwrap();
        let add = |text: &str, description: &str| {
            let mut attrs = vec![
                (&b"objectClass"[..], vec![&b"domain"[..]]),
                (&b"dc"[..], vec![&b"example"[..]]),
            ];
            if text.starts_with("uid") {
                attrs = vec![
                    (&b"objectClass"[..], vec![&b"account"[..]]),
                    (&b"uid"[..], vec![&b"u"[..]]),
                    (&b"description"[..], vec![description.as_bytes()]),
                ];
            }
            let entry = Entry::new(dn(text), attrs, &schema).unwrap();
            store
                .execute_blocking(Command::Add {
                    entry,
                    prechecked: false,
                })
                .unwrap();
        };
        let description = |found: Option<(crate::EntryId, Entry)>| {
            let (id, entry) = found.expect("the entry");
            let values = &entry
                .get(schema.attribute_id("description").unwrap())
                .unwrap()
                .values;
            (id, String::from_utf8(values[0].clone()).unwrap())
        };
        add("dc=example,dc=com", "");
        add("uid=u,dc=example,dc=com", "first");
        let user = dn("uid=u,dc=example,dc=com");
        let (first_id, first) = description(store.snapshot().unwrap().get(&user).unwrap());
        assert_eq!(first, "first");
        // Remembered now: the next read goes through the guess.
        let key = crate::dn_ids::SharedDnIds::key(&user);
        assert_eq!(store.inner.read_dn_ids.guess(key), Some(first_id));
        assert_eq!(
            description(store.snapshot().unwrap().get(&user).unwrap()),
            (first_id, "first".into())
        );

        store
            .execute_blocking(Command::Delete { dn: user.clone() })
            .unwrap();
        assert!(store.snapshot().unwrap().get(&user).unwrap().is_none());
        add("uid=u,dc=example,dc=com", "second");
        let (second_id, second) = description(store.snapshot().unwrap().get(&user).unwrap());
        assert_ne!(second_id, first_id);
        assert_eq!(second, "second");

        // Another spelling is found through dn2id and not remembered (its
        // check against the stored spelling could never pass).
        let other = dn("UID=U, DC=Example, DC=Com");
        assert_eq!(
            description(store.snapshot().unwrap().get(&other).unwrap()),
            (second_id, "second".into())
        );
        assert_eq!(store.inner.read_dn_ids.guess(key), Some(second_id));
        // A wrong guess planted by hand is caught the same way.
        store.inner.read_dn_ids.remember(key, first_id + 1000);
        assert_eq!(
            description(store.snapshot().unwrap().get(&user).unwrap()).0,
            second_id
        );
        // A base search reads the same way.
        let filter = meridian_proto::Filter::Present(b"objectClass");
        let mut seen = Vec::new();
        store
            .snapshot()
            .unwrap()
            .search(&user, meridian_proto::Scope::Base, &filter, |id, _| {
                seen.push(id);
                true
            })
            .unwrap();
        assert_eq!(seen, vec![second_id]);
    }
}
