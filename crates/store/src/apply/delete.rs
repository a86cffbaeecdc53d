//! Deleting an entry, or a whole subtree: a plan that finds what goes
//! (reads only, decides every refusal), then the removals.

use heed::RwTxn;
use meridian_model::dn::Dn;

use super::Context;
use super::tree::{self, lookup, no_such};
use crate::command::Effect;
use crate::feed::EntryChange;
use crate::keys::{self, EntryId};
use crate::{Dbs, StoreError};

/// The ID of the entry a delete of `dn` removes, or why it may not.
pub(super) fn plan(txn: &heed::RoTxn<'_>, dbs: &Dbs, dn: &Dn) -> Result<EntryId, StoreError> {
    let Some(id) = lookup(txn, dbs, dn)? else {
        return Err(no_such(txn, dbs, dn));
    };
    if tree::has_children(txn, dbs, id)? {
        return Err(StoreError::NotAllowedOnNonLeaf(dn.original().to_owned()));
    }
    Ok(id)
}

/// Removes the entry [`plan`] found.
pub(super) fn write(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    id: EntryId,
) -> Result<Effect, StoreError> {
    remove_leaf(txn, ctx, id)?;
    Ok(Effect::Deleted)
}

/// The IDs of the subtree rooted at `dn`, deepest first, so that each
/// removal is of a leaf and keeps the children links consistent; or
/// noSuchObject.
pub(super) fn plan_subtree(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &Dn,
) -> Result<Vec<EntryId>, StoreError> {
    if lookup(txn, dbs, dn)?.is_none() {
        return Err(no_such(txn, dbs, dn));
    }
    let mut members: Vec<(usize, EntryId)> = Vec::new();
    for item in dbs.dn2id.prefix_iter(txn, &keys::dn_key(dn))? {
        let (key, value) = item?;
        if let Some(id) = keys::id_from(value) {
            // A DN key has one separator per RDN: its depth.
            let depth = key.iter().filter(|b| **b == 0).count();
            members.push((depth, id));
        }
    }
    members.sort_by_key(|(depth, _)| std::cmp::Reverse(*depth));
    Ok(members.into_iter().map(|(_, id)| id).collect())
}

/// Removes the subtree [`plan_subtree`] found, deepest first.
pub(super) fn write_subtree(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    members: Vec<EntryId>,
) -> Result<Effect, StoreError> {
    let count = members.len() as u64;
    for id in members {
        remove_leaf(txn, ctx, id)?;
    }
    Ok(Effect::DeletedSubtree(count))
}

/// Removes the leaf entry `id`: its record, its index keys, its DN key and
/// its parent's link to it (delete, and each entry of a subtree delete).
fn remove_leaf(txn: &mut RwTxn<'_>, ctx: &Context<'_>, id: EntryId) -> Result<(), StoreError> {
    let dbs = ctx.dbs;
    let entry = ctx.load(txn, id, None)?;
    let parent = tree::parent_id_of(txn, ctx, &entry.dn)?;
    tree::write_index(
        txn,
        dbs,
        ctx.indexes.entry_keys(&entry, ctx.schema),
        id,
        false,
    )?;
    dbs.id2entry.delete(txn, &keys::id_key(id))?;
    dbs.dn2id.delete(txn, &keys::dn_key(&entry.dn))?;
    dbs.children.delete(txn, &keys::child_key(parent, id))?;
    super::integrity::deleted(txn, ctx, &entry)?;
    let uuid = ctx
        .schema
        .attribute_id("entryUUID")
        .and_then(|attr| entry.get(attr))
        .and_then(|a| a.values.first())
        .and_then(|v| crate::feed::uuid_octets(v));
    let dn = entry.dn.clone();
    ctx.changed(EntryChange::Deleted {
        dn,
        uuid,
        entry: ctx.followed.then(|| std::sync::Arc::new(entry)),
    });
    Ok(())
}
