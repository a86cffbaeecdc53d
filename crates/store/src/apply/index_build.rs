//! Building index keys: a whole rebuild (offline reindex) and the steps
//! of an online build. Neither refuses anything: they only write.

use std::ops::Bound;

use heed::RwTxn;
use meridian_model::schema::AttrId;

use std::collections::{BTreeSet, HashMap};

use meridian_model::dn::Dn;
use meridian_model::modify::{Change, ModOp};

use super::Context;
use crate::StoreError;
use crate::command::Effect;
use crate::integrity::dn_of;
use crate::keys::{self, EntryId};
use crate::sorted_puts::SortedPuts;

/// Entries read per step of a rebuild: the transaction cannot iterate one
/// database while writing another, so entries are read in chunks.
const REBUILD_CHUNK: usize = 1024;

/// Every index key of every entry, written again from scratch, after
/// memberOf is made what the groups say.
pub(super) fn rebuild(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<Effect, StoreError> {
    let fixed = recompute_member_of(txn, ctx)?;
    if fixed > 0 {
        tracing::info!(entries = fixed, "memberOf recomputed from the groups");
    }
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
/// `only` names (all when `None`); the number of entries.
fn index_entries(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    ids: std::ops::Range<EntryId>,
    only: Option<&[AttrId]>,
) -> Result<u64, StoreError> {
    let mut prefix = Vec::with_capacity(keys::MAX_KEY);
    each_chunk(txn, ctx, ids, |txn, chunk| {
        let mut index_keys = SortedPuts::default();
        for (id, bytes) in chunk {
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
        index_keys.write(txn, ctx.dbs.index)
    })
}

/// Calls `each` with the stored records of the entries with IDs in
/// `ids`, [`REBUILD_CHUNK`] at a time, each chunk read before `each`
/// writes (a transaction cannot iterate one database while it writes
/// another); the number of entries.
fn each_chunk(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    ids: std::ops::Range<EntryId>,
    mut each: impl FnMut(&mut RwTxn<'_>, &[(EntryId, Vec<u8>)]) -> Result<(), StoreError>,
) -> Result<u64, StoreError> {
    let dbs = ctx.dbs;
    let mut count = 0u64;
    let mut next = ids.start;
    let end = keys::id_key(ids.end);
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
        each(txn, &chunk)?;
        count += chunk.len() as u64;
        next = last.saturating_add(1);
    }
    Ok(count)
}

/// Makes every entry's memberOf what the groups say (`[groups]
/// memberof`): a database loaded from elsewhere, or one whose groups
/// were written with memberOf off, gets it whole. Two passes: the
/// groups' members, then each entry whose memberOf differs rewritten
/// (the indexes are rebuilt after). The number of entries changed.
fn recompute_member_of(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<u64, StoreError> {
    let Some(rules) = &ctx.integrity.memberof else {
        return Ok(0);
    };
    let Some(member_of) = ctx.schema.attribute_id(&rules.attr_name) else {
        return Ok(0);
    };
    // Member (normalized DN) to its groups.
    let mut groups_of: HashMap<String, Vec<Dn>> = HashMap::new();
    each_chunk(txn, ctx, 0..EntryId::MAX, |txn, chunk| {
        for (_, bytes) in chunk {
            let entry = ctx.decode(txn, bytes)?;
            if rules.is_group(&entry, ctx.schema) {
                for member in rules.members(&entry, ctx.schema) {
                    groups_of
                        .entry(member.normalized().to_owned())
                        .or_default()
                        .push(entry.dn.clone());
                }
            }
        }
        Ok(())
    })?;
    let mut changed = 0u64;
    each_chunk(txn, ctx, 0..EntryId::MAX, |txn, chunk| {
        for (id, bytes) in chunk {
            let entry = ctx.decode(txn, bytes)?;
            let wanted = groups_of
                .get(entry.dn.normalized())
                .map_or(&[][..], Vec::as_slice);
            let stored: BTreeSet<String> = entry
                .get(member_of)
                .into_iter()
                .flat_map(|a| a.values.iter())
                .filter_map(|v| dn_of(v, ctx.schema))
                .map(|dn| dn.normalized().to_owned())
                .collect();
            let should: BTreeSet<String> =
                wanted.iter().map(|dn| dn.normalized().to_owned()).collect();
            if stored == should {
                continue;
            }
            let values: Vec<Vec<u8>> = wanted
                .iter()
                .map(|group| group.original().as_bytes().to_vec())
                .collect();
            let replace = Change {
                op: ModOp::Replace,
                attr: &rules.attr_name,
                values: &values,
            };
            let entry = meridian_model::modify::apply_changes(entry, [replace], ctx.schema, false)?;
            let record = ctx.encode(txn, &entry)?;
            ctx.dbs.id2entry.put(txn, &keys::id_key(*id), &record)?;
            ctx.touch(*id);
            changed += 1;
        }
        Ok(())
    })?;
    Ok(changed)
}

/// Records every configured index as built, in the transaction that
/// completes them; the writer tells the planner once it commits.
fn record_indexes_built(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<(), StoreError> {
    ctx.dbs
        .meta
        .put(txn, crate::index::BUILT_KEY, &ctx.indexes.record(false))?;
    Ok(())
}
