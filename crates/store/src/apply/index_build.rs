//! Building index keys: a whole rebuild (offline reindex) and the steps
//! of an online build. Neither refuses anything: they only write.

use std::ops::Bound;

use heed::RwTxn;
use meridian_model::schema::AttrId;

use super::Context;
use crate::StoreError;
use crate::command::Effect;
use crate::keys::{self, EntryId};
use crate::sorted_puts::SortedPuts;

/// Entries read per step of a rebuild: the transaction cannot iterate one
/// database while writing another, so entries are read in chunks.
const REBUILD_CHUNK: usize = 1024;

/// Every index key of every entry, written again from scratch.
pub(super) fn rebuild(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<Effect, StoreError> {
    ctx.dbs.index.clear(txn)?;
    let count = index_entries(txn, ctx, 0..EntryId::MAX, None)?;
    record_indexes_built(txn, ctx)?;
    Ok(Effect::Reindexed(count))
}

/// One step of an online build ([`Command::BuildIndexes`](crate::Command::BuildIndexes)).
pub(super) fn build_step(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    ids: std::ops::Range<EntryId>,
    types: &[String],
    complete: bool,
) -> Result<Effect, StoreError> {
    let wanted: Vec<AttrId> = types
        .iter()
        .filter_map(|oid| ctx.schema.attribute_id(oid))
        .collect();
    let entries = index_entries(txn, ctx, ids, Some(&wanted))?;
    if complete {
        record_indexes_built(txn, ctx)?;
    }
    Ok(Effect::IndexesBuilt { entries, complete })
}

/// Writes the index keys of the entries with IDs in `ids`, of the types
/// `only` names (all when `None`); the number of entries. Entries are
/// read [`REBUILD_CHUNK`] at a time, each chunk before its keys are
/// written: a transaction cannot iterate one database while it writes
/// another.
fn index_entries(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    ids: std::ops::Range<EntryId>,
    only: Option<&[AttrId]>,
) -> Result<u64, StoreError> {
    let dbs = ctx.dbs;
    let mut count = 0u64;
    let mut next = ids.start;
    let end = keys::id_key(ids.end);
    let mut prefix = Vec::with_capacity(keys::MAX_KEY);
    while next < ids.end {
        let start = keys::id_key(next);
        let range: (Bound<&[u8]>, Bound<&[u8]>) =
            (Bound::Included(&start[..]), Bound::Excluded(&end[..]));
        let mut chunk: Vec<(EntryId, Vec<u8>)> = Vec::with_capacity(REBUILD_CHUNK);
        for item in dbs.id2entry.range(txn, &range)? {
            let (key, value) = item?;
            let Some(id) = keys::id_from(key) else {
                continue;
            };
            chunk.push((id, value.to_vec()));
            if chunk.len() == REBUILD_CHUNK {
                break;
            }
        }
        let Some(&(last, _)) = chunk.last() else {
            break;
        };
        let mut index_keys = SortedPuts::default();
        for (id, bytes) in &chunk {
            let entry = ctx.decode(txn, bytes)?;
            for attr in &entry.attributes {
                if only.is_some_and(|only| !only.contains(&attr.desc.attr)) {
                    continue;
                }
                let values = attr.values.iter().map(Vec::as_slice);
                ctx.indexes
                    .each_key_of(attr.desc.attr, values, ctx.schema, &mut prefix, |key| {
                        index_keys.push(key, *id)
                    });
            }
        }
        index_keys.write(txn, dbs.index)?;
        count += chunk.len() as u64;
        next = last.saturating_add(1);
    }
    Ok(count)
}

/// Records every configured index as built, in the transaction that
/// completes them; the writer tells the planner once it commits.
fn record_indexes_built(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<(), StoreError> {
    ctx.dbs
        .meta
        .put(txn, crate::index::BUILT_KEY, &ctx.indexes.record(false))?;
    Ok(())
}
