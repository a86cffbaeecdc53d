//! Searches that read a scan column (`columns.rs`) instead of walking
//! their scope or a long index list: which column, whether the scope is
//! large enough for it, and the walk of its rows.

use std::sync::Arc;

use meridian_model::dn::Dn;
use meridian_model::entry::Description;
use meridian_model::filter::CompiledFilter;
use meridian_proto::{Filter, Scope};

use super::{Snapshot, record_in_scope};
use crate::columns::{Column, Found, necessary_items};
use crate::keys::{self, EntryId};
use crate::names::NameSource;
use crate::plan::Plan;
use crate::{StoreError, codec};

/// What a search reads instead of records when a scan column stands in
/// ([`Snapshot::column_for`]).
pub(super) struct ColumnScan<'f> {
    column: Arc<Column>,
    /// IDs touched since the column was made, above the search's
    /// `after`, sorted and unique.
    touched: Vec<EntryId>,
    /// The part of the filter the rows are tested with.
    item: Filter<'f>,
}

/// Index lists shorter than this are read as they are: a column is
/// only worth its rows against a long list.
const SHORT_LIST: usize = 1024;

/// A column read whose item, after this many rows, has let through more
/// than one entry in `UNSELECTIVE_SHARE` goes on without the column: an
/// entry read by ID costs several rows' walk, and a record walked in
/// order not much more than a row.
const UNSELECTIVE_AFTER: usize = 4096;
const UNSELECTIVE_SHARE: usize = 8;

/// Rows of a column [`Snapshot::mostly_in_scope`] looks at.
const SCOPE_SAMPLES: usize = 16;

impl Snapshot<'_> {
    /// The scan column a search of `scope` under `base` reads instead of
    /// what `plan` would ([`Snapshot::column_for`]), if any. A column's
    /// rows cover the whole store: against a walk of a smaller scope, it
    /// is read only when most of them lie in it.
    pub(super) fn column_to_read<'f>(
        &self,
        filter: &Filter<'f>,
        plan: &Plan,
        after: Option<EntryId>,
        base: &Dn,
        scope: Scope,
        covers_store: bool,
    ) -> Result<Option<ColumnScan<'f>>, StoreError> {
        if scope == Scope::Base {
            return Ok(None);
        }
        Ok(match self.column_for(filter, plan, after) {
            Some(scan)
                if covers_store
                    || matches!(plan, Plan::Ids(_))
                    || self.mostly_in_scope(&scan.column, base, scope)? =>
            {
                Some(scan)
            }
            _ => None,
        })
    }

    /// Whether at least a quarter of `column`'s rows are of entries in
    /// the scope, by a sample of rows spread over it: a search walks
    /// every row, so a search of a small part of the store walks its
    /// scope instead (a row outside it costs as much as one inside, and
    /// counts against the search's limits as much).
    fn mostly_in_scope(
        &self,
        column: &Column,
        base: &Dn,
        scope: Scope,
    ) -> Result<bool, StoreError> {
        let mut sampled = 0usize;
        let mut inside = 0usize;
        for id in column.sample(SCOPE_SAMPLES) {
            let Some(bytes) = self.inner.dbs.id2entry.get(&self.txn, &keys::id_key(id))? else {
                continue;
            };
            sampled += 1;
            if record_in_scope(bytes, base, scope, &self.inner.schema)? {
                inside += 1;
            }
        }
        Ok(inside.saturating_mul(4) >= sampled)
    }

    /// A scan column to read for `filter` instead of what `plan` would
    /// read: one of a type the filter requires, when the plan walks the
    /// scope, or reads an index list at least a quarter as long as the
    /// column's rows (a row costs a fraction of a record). Asks for the
    /// columns of the types it finds none of (`Columns::find`).
    fn column_for<'f>(
        &self,
        filter: &Filter<'f>,
        plan: &Plan,
        after: Option<EntryId>,
    ) -> Option<ColumnScan<'f>> {
        let columns = &self.inner.columns;
        if !columns.enabled() {
            return None;
        }
        let listed = match plan {
            Plan::All => None,
            Plan::Ids(ids) => Some(ids.len()),
        };
        if listed.is_some_and(|n| n < SHORT_LIST) {
            return None;
        }
        let snapshot = self.txn.id() as u64;
        let mut asked = Vec::new();
        for (attr, item) in necessary_items(filter, &self.inner.schema) {
            if asked.contains(&attr) {
                continue;
            }
            asked.push(attr);
            let Found::Column(column, mut touched) = columns.find(attr, snapshot) else {
                continue;
            };
            if listed.is_some_and(|n| column.rows_after_count(after) > n.saturating_mul(4)) {
                continue;
            }
            touched.retain(|id| after.is_none_or(|a| *id > a));
            touched.sort_unstable();
            touched.dedup();
            return Some(ColumnScan {
                column,
                touched,
                item,
            });
        }
        None
    }
}

/// What a search does with an entry: `examine` it, and check the record
/// when given one (`None`: its row ruled it out); false stops.
pub(super) type Visit<'v> = dyn FnMut(EntryId, Option<&[u8]>) -> Result<bool, StoreError> + 'v;

/// How a column walk ended ([`Snapshot::walk_column`]).
pub(super) enum ColumnWalk {
    /// Every row and touched entry was walked, or `visit` said stop.
    Done,
    /// The item ruled out too few entries: the search goes on without
    /// the column after this entry, every entry up to it handled.
    Resume(EntryId),
}

impl Snapshot<'_> {
    /// Walks `scan`'s rows above `after` and the entries touched since
    /// the column was made, merged in ID order, handing each entry to
    /// `visit`: with its record when its row passes the item (or it was
    /// touched, or is read anyway), without when the row rules it out.
    /// Stops where `visit` says, or hands the rest back to the records
    /// when the item lets too many through.
    pub(super) fn walk_column(
        &self,
        scan: ColumnScan<'_>,
        after: Option<EntryId>,
        names: &dyn NameSource,
        visit: &mut Visit<'_>,
    ) -> Result<ColumnWalk, StoreError> {
        let schema = &self.inner.schema;
        let ColumnScan {
            column,
            touched,
            item,
        } = scan;
        // An equality item on the column's type (no options asked): its
        // key against the rows' keys.
        let item_key = match item {
            Filter::Equality(ava) if column.has_keys() => {
                Description::parse_selector(ava.attr, schema)
                    .ok()
                    .filter(|desc| desc.options.is_empty())
                    .and_then(|desc| schema.attr(desc.attr)?.equality)
                    .and_then(|rule| rule.key(ava.value, schema))
            }
            _ => None,
        };
        let item = CompiledFilter::compile(&item, schema);
        let relevance = codec::Relevance::new(item.wanted_slots(), names.known().len());
        let mut rows = column.rows_after(after).peekable();
        let mut touched = touched.into_iter().peekable();
        // Rows walked and entries read: when the item rules out too few,
        // reading each entry by ID costs more than walking the records in
        // order.
        let (mut walked, mut read) = (0usize, 0usize);
        loop {
            let next_row = rows.peek().map(|(_, id, _)| *id);
            let (id, candidate) = match (next_row, touched.peek().copied()) {
                (None, None) => return Ok(ColumnWalk::Done),
                (Some(row_id), next) if next.is_none_or(|t| row_id < t) => {
                    let matches = match rows.next() {
                        Some((i, _, _)) if let Some(key) = &item_key => column.row_has_key(i, key),
                        Some((_, _, row)) => {
                            item.matches(&codec::RawEntry::new(row, names, &relevance), schema)
                        }
                        None => false,
                    };
                    (row_id, matches)
                }
                (row_id, next) => {
                    let id = next.unwrap_or_default();
                    if row_id == Some(id) {
                        rows.next();
                    }
                    touched.next();
                    (id, true)
                }
            };
            // A touched entry may be gone: passed over, not missing.
            let bytes = if candidate {
                read += 1;
                self.inner.dbs.id2entry.get(&self.txn, &keys::id_key(id))?
            } else {
                None
            };
            if !visit(id, bytes)? {
                return Ok(ColumnWalk::Done);
            }
            walked += 1;
            if walked >= UNSELECTIVE_AFTER && read.saturating_mul(UNSELECTIVE_SHARE) > walked {
                return Ok(ColumnWalk::Resume(id));
            }
        }
    }
}
