//! Applying one command inside a write transaction.

use heed::RwTxn;
use meridian_model::entry::{Description, Entry, Writer};
use meridian_model::modify::{self, ModOp, Modification};
use meridian_model::{ModelError, Schema};
use meridian_proto::ResultCode;

use crate::command::{Command, Outcome};
use crate::keys::{self, EntryId};
use crate::{Dbs, StoreError, codec, index::Indexes};

/// The meta key holding the next entry ID.
pub(crate) const NEXT_ID: &[u8] = b"next_id";
/// ID 0 is the root: the parent of every suffix entry.
pub(crate) const ROOT_ID: EntryId = 0;

/// Everything apply needs besides the transaction.
pub(crate) struct Context<'a> {
    pub(crate) dbs: &'a Dbs,
    pub(crate) schema: &'a Schema,
    pub(crate) indexes: &'a Indexes,
    pub(crate) suffixes: &'a [meridian_model::dn::Dn],
}

pub(crate) fn apply(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    command: &Command,
) -> Result<Outcome, StoreError> {
    match command {
        Command::Add { entry } => add(txn, ctx, entry),
        Command::Delete { dn } => delete(txn, ctx, dn),
        Command::Modify {
            dn,
            changes,
            operational,
            permissive,
        } => modify(txn, ctx, dn, changes, operational, *permissive),
        Command::RebuildIndexes => rebuild_indexes(txn, ctx),
    }
}

/// Entries read per step of a rebuild: the transaction cannot iterate one
/// database while writing another, so entries are read in chunks.
const REBUILD_CHUNK: usize = 1024;

fn rebuild_indexes(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    dbs.index.clear(txn)?;
    let mut next: EntryId = 0;
    let mut count = 0u64;
    loop {
        let mut chunk: Vec<(EntryId, Vec<u8>)> = Vec::with_capacity(REBUILD_CHUNK);
        let start = keys::id_key(next);
        use std::ops::Bound;
        let from: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(&start[..]), Bound::Unbounded);
        for item in dbs.id2entry.range(txn, &from)? {
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
        for (id, bytes) in &chunk {
            let entry = codec::decode(bytes, ctx.schema)?;
            write_index(
                txn,
                dbs,
                ctx.indexes.entry_keys(&entry, ctx.schema),
                *id,
                true,
            )?;
            count += 1;
        }
        next = last + 1;
    }
    Ok(Outcome::Reindexed(count))
}

/// The ID of `dn`, if it exists.
pub(crate) fn lookup(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &meridian_model::dn::Dn,
) -> Result<Option<EntryId>, StoreError> {
    Ok(dbs
        .dn2id
        .get(txn, &keys::dn_key(dn))?
        .and_then(keys::id_from))
}

/// The deepest existing ancestor of `dn` (its matchedDN when missing).
pub(crate) fn matched(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &meridian_model::dn::Dn,
) -> Result<String, StoreError> {
    let mut cur = dn.parent();
    while let Some(candidate) = cur {
        if candidate.is_root() {
            break;
        }
        if let Some(id) = lookup(txn, dbs, &candidate)? {
            if let Some(bytes) = dbs.id2entry.get(txn, &keys::id_key(id))? {
                return Ok(String::from_utf8_lossy(codec::decode_dn(bytes)?).into_owned());
            }
        }
        cur = candidate.parent();
    }
    Ok(String::new())
}

fn no_such(txn: &heed::RoTxn<'_>, dbs: &Dbs, dn: &meridian_model::dn::Dn) -> StoreError {
    match matched(txn, dbs, dn) {
        Ok(matched) => StoreError::NoSuchObject {
            dn: dn.original().to_owned(),
            matched,
        },
        Err(e) => e,
    }
}

fn write_index(
    txn: &mut RwTxn<'_>,
    dbs: &Dbs,
    prefixes: impl IntoIterator<Item = Vec<u8>>,
    id: EntryId,
    put: bool,
) -> Result<(), StoreError> {
    for prefix in prefixes {
        let key = keys::with_id(prefix, id);
        if put {
            dbs.index.put(txn, &key, &[])?;
        } else {
            dbs.index.delete(txn, &key)?;
        }
    }
    Ok(())
}

fn add(txn: &mut RwTxn<'_>, ctx: &Context<'_>, entry: &Entry) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    if entry.dn.is_root() {
        return Err(ModelError::new(
            ResultCode::UNWILLING_TO_PERFORM,
            "the root DSE cannot be added",
        )
        .into());
    }
    let key = keys::dn_key(&entry.dn);
    if dbs.dn2id.get(txn, &key)?.is_some() {
        return Err(StoreError::AlreadyExists(entry.dn.original().to_owned()));
    }
    let is_suffix = ctx
        .suffixes
        .iter()
        .any(|s| s.normalized() == entry.dn.normalized());
    let parent_id = if is_suffix {
        ROOT_ID
    } else {
        match entry.dn.parent() {
            Some(parent) if !parent.is_root() => match lookup(txn, dbs, &parent)? {
                Some(id) => id,
                None => return Err(no_such(txn, dbs, &parent)),
            },
            _ => {
                return Err(StoreError::NoSuchObject {
                    dn: entry.dn.original().to_owned(),
                    matched: String::new(),
                });
            }
        }
    };
    entry.check(ctx.schema, Writer::Server)?;
    let id = match dbs.meta.get(txn, NEXT_ID)? {
        Some(bytes) => {
            keys::id_from(bytes).ok_or_else(|| StoreError::Engine("corrupt next_id".into()))?
        }
        None => 1,
    };
    dbs.meta.put(txn, NEXT_ID, &(id + 1).to_be_bytes())?;
    dbs.id2entry
        .put(txn, &keys::id_key(id), &codec::encode(entry))?;
    dbs.dn2id.put(txn, &key, &keys::id_key(id))?;
    dbs.children
        .put(txn, &keys::child_key(parent_id, id), &[])?;
    write_index(
        txn,
        dbs,
        ctx.indexes.entry_keys(entry, ctx.schema),
        id,
        true,
    )?;
    Ok(Outcome::Added(id))
}

pub(crate) fn load(
    txn: &heed::RoTxn<'_>,
    ctx_dbs: &Dbs,
    schema: &Schema,
    id: EntryId,
) -> Result<Entry, StoreError> {
    let bytes = ctx_dbs
        .id2entry
        .get(txn, &keys::id_key(id))?
        .ok_or_else(|| StoreError::Engine(format!("dn2id points at missing entry {id}")))?;
    codec::decode(bytes, schema)
}

fn parent_id(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
) -> Result<EntryId, StoreError> {
    let dbs = ctx.dbs;
    if ctx
        .suffixes
        .iter()
        .any(|s| s.normalized() == dn.normalized())
    {
        return Ok(ROOT_ID);
    }
    match dn.parent() {
        Some(parent) if !parent.is_root() => lookup(txn, dbs, &parent)?
            .ok_or_else(|| StoreError::Engine(format!("parent of {} is missing", dn.original()))),
        _ => Ok(ROOT_ID),
    }
}

/// True if the entry has at least one child.
pub(crate) fn has_children(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    id: EntryId,
) -> Result<bool, StoreError> {
    Ok(dbs
        .children
        .prefix_iter(txn, &id.to_be_bytes())?
        .next()
        .transpose()?
        .is_some())
}

fn delete(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    let Some(id) = lookup(txn, dbs, dn)? else {
        return Err(no_such(txn, dbs, dn));
    };
    if has_children(txn, dbs, id)? {
        return Err(StoreError::NotAllowedOnNonLeaf(dn.original().to_owned()));
    }
    let entry = load(txn, dbs, ctx.schema, id)?;
    let parent = parent_id(txn, ctx, dn)?;
    write_index(
        txn,
        dbs,
        ctx.indexes.entry_keys(&entry, ctx.schema),
        id,
        false,
    )?;
    dbs.id2entry.delete(txn, &keys::id_key(id))?;
    dbs.dn2id.delete(txn, &keys::dn_key(dn))?;
    dbs.children.delete(txn, &keys::child_key(parent, id))?;
    Ok(Outcome::Deleted)
}

fn modify(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
    changes: &[Modification],
    operational: &[(String, Vec<Vec<u8>>)],
    permissive: bool,
) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    let Some(id) = lookup(txn, dbs, dn)? else {
        return Err(no_such(txn, dbs, dn));
    };
    let old = load(txn, dbs, ctx.schema, id)?;
    let replacements: Vec<Modification> = operational
        .iter()
        .map(|(attr, values)| Modification {
            op: ModOp::Replace,
            attr: attr.clone(),
            values: values.clone(),
        })
        .collect();
    let new = modify::apply_parts(&old, &[changes, &replacements], ctx.schema, permissive)?;
    new.check(ctx.schema, Writer::Server)?;
    // Index keys can only change if an indexed type was touched.
    let touches_index = changes
        .iter()
        .chain(&replacements)
        .filter_map(|m| Description::parse(m.attr.as_bytes(), ctx.schema).ok())
        .any(|d| ctx.indexes.get(d.attr).is_some());
    if touches_index {
        let old_keys = ctx.indexes.entry_keys(&old, ctx.schema);
        let new_keys = ctx.indexes.entry_keys(&new, ctx.schema);
        write_index(txn, dbs, old_keys.difference(&new_keys).cloned(), id, false)?;
        write_index(txn, dbs, new_keys.difference(&old_keys).cloned(), id, true)?;
    }
    dbs.id2entry
        .put(txn, &keys::id_key(id), &codec::encode(&new))?;
    Ok(Outcome::Modified)
}
