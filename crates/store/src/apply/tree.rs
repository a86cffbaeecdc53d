//! The tree of entries: a DN's ID, an entry's parent and children, and
//! the reads and small writes every command shares.

use heed::RwTxn;
use meridian_model::ModelError;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_proto::ResultCode;

use crate::keys::{self, EntryId};
use crate::names::Resolver;
use crate::{Dbs, StoreError, codec};

use super::Context;

/// ID 0 is the root: the parent of every suffix entry.
pub(crate) const ROOT_ID: EntryId = 0;

pub(crate) fn lookup(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &Dn,
) -> Result<Option<EntryId>, StoreError> {
    let key = keys::dn_key(dn);
    if key.len() > keys::MAX_KEY {
        // Could never have been stored (`check_dn_key_len`).
        return Ok(None);
    }
    Ok(dbs.dn2id.get(txn, &key)?.and_then(keys::id_from))
}

/// Refuses a `dn2id` key of `len` bytes that an add or a rename is about
/// to write for `dn` (or below it) when LMDB cannot store it: it would
/// answer `MDB_BAD_VALSIZE`, which tells a client nothing.
pub(super) fn check_dn_key_len(len: usize, dn: &str) -> Result<(), StoreError> {
    if len <= keys::MAX_KEY {
        return Ok(());
    }
    Err(unwilling(format!(
        "the DN is too long to store: {dn:?} (or its deepest entry) takes {len} bytes in normalised form, one byte added per RDN, and at most {} fit",
        keys::MAX_KEY
    )))
}

/// The deepest existing ancestor of `dn` (its matchedDN when missing).
pub(crate) fn matched(txn: &heed::RoTxn<'_>, dbs: &Dbs, dn: &Dn) -> Result<String, StoreError> {
    let mut cur = dn.parent();
    while let Some(candidate) = cur {
        if candidate.is_root() {
            break;
        }
        if let Some(id) = lookup(txn, dbs, &candidate)?
            && let Some(bytes) = dbs.id2entry.get(txn, &keys::id_key(id))?
        {
            return Ok(String::from_utf8_lossy(codec::decode_dn(bytes)?).into_owned());
        }
        cur = candidate.parent();
    }
    Ok(String::new())
}

/// noSuchObject for `dn`, with its deepest existing ancestor.
pub(super) fn no_such(txn: &heed::RoTxn<'_>, dbs: &Dbs, dn: &Dn) -> StoreError {
    match matched(txn, dbs, dn) {
        Ok(matched) => StoreError::NoSuchObject {
            dn: dn.original().to_owned(),
            matched,
        },
        Err(e) => e,
    }
}

/// Puts (`put`) or deletes the index keys `prefixes` ‖ `id`.
pub(super) fn write_index<P: AsRef<[u8]>>(
    txn: &mut RwTxn<'_>,
    dbs: &Dbs,
    prefixes: impl IntoIterator<Item = P>,
    id: EntryId,
    put: bool,
) -> Result<(), StoreError> {
    let mut key = Vec::new();
    for prefix in prefixes {
        keys::with_id_into(&mut key, prefix.as_ref(), id);
        if put {
            dbs.index.put(txn, &key, &[])?;
        } else {
            dbs.index.delete(txn, &key)?;
        }
    }
    Ok(())
}

/// The stored record of the entry with ID `id`, which must exist.
fn record_of<'t>(names: &Resolver<'t, '_>, id: EntryId) -> Result<&'t [u8], StoreError> {
    names
        .dbs
        .id2entry
        .get(names.txn, &keys::id_key(id))?
        .ok_or_else(|| StoreError::corrupt(format_args!("dn2id points at missing entry {id}")))
}

/// The entry with ID `id` (which must exist), found by `found_by` if
/// given ([`codec::decode_as`]).
pub(crate) fn load(
    names: &Resolver<'_, '_>,
    id: EntryId,
    found_by: Option<&Dn>,
) -> Result<Entry, StoreError> {
    let bytes = record_of(names, id)?;
    codec::decode_as(bytes, names, found_by)
}

/// The first value of `attr` (without options) of the entry with ID `id`
/// (which must exist), read from its record in place where the record
/// allows ([`codec::first_value`]), else from the decoded entry: a guard
/// that needs one value does not decode the entry the write decodes
/// again.
pub(crate) fn first_value(
    names: &Resolver<'_, '_>,
    id: EntryId,
    attr: meridian_model::schema::AttrId,
) -> Result<Option<Vec<u8>>, StoreError> {
    let bytes = record_of(names, id)?;
    record_first_value(bytes, names, attr, None)
}

/// Every value of `attr` (without options) of the entry with ID `id`
/// (which must exist), read from its record in place where the record
/// allows, else from the decoded entry: a look at a group's classes
/// does not decode its ten thousand members.
pub(crate) fn values_of(
    names: &Resolver<'_, '_>,
    id: EntryId,
    attr: meridian_model::schema::AttrId,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let bytes = record_of(names, id)?;
    let mut found = Vec::new();
    let read = codec::walk(bytes, |number, values| {
        let desc = names.table.get(number)?.desc.as_ref()?;
        if desc.attr == attr && desc.options.is_empty() {
            found.extend(values.map(<[u8]>::to_vec));
        }
        Some(())
    });
    match read {
        Some(()) => Ok(found),
        None => Ok(codec::decode_as(bytes, names, None)?
            .get(attr)
            .map(|a| a.values.to_vec())
            .unwrap_or_default()),
    }
}

/// [`first_value`] of a stored record in hand (`found_by`: as for
/// [`codec::decode_as`], when it has to be decoded).
pub(crate) fn record_first_value(
    record: &[u8],
    names: &Resolver<'_, '_>,
    attr: meridian_model::schema::AttrId,
    found_by: Option<&Dn>,
) -> Result<Option<Vec<u8>>, StoreError> {
    match codec::first_value(record, names.table, attr) {
        Some(found) => Ok(found.map(<[u8]>::to_vec)),
        None => Ok(codec::decode_as(record, names, found_by)?
            .get(attr)
            .and_then(|a| a.values.first())
            .cloned()),
    }
}

/// The entry `id`, `None` if there is none: an ID learned in an earlier
/// snapshot may name an entry deleted since.
pub(crate) fn load_if_present(
    names: &Resolver<'_, '_>,
    id: EntryId,
) -> Result<Option<Entry>, StoreError> {
    match names.dbs.id2entry.get(names.txn, &keys::id_key(id))? {
        Some(bytes) => codec::decode_as(bytes, names, None).map(Some),
        None => Ok(None),
    }
}

/// The ID of the parent of the existing entry `dn` (the root for a
/// suffix entry).
pub(super) fn parent_id_of(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
) -> Result<EntryId, StoreError> {
    let dbs = ctx.dbs;
    if ctx.suffixes.iter().any(|s| s.same_entry(dn)) {
        return Ok(ROOT_ID);
    }
    match dn.parent() {
        Some(parent) if !parent.is_root() => lookup(txn, dbs, &parent)?.ok_or_else(|| {
            StoreError::corrupt(format_args!("the parent of {} is missing", dn.original()))
        }),
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

/// unwillingToPerform, with `message` for the client.
pub(super) fn unwilling(message: String) -> StoreError {
    ModelError::new(ResultCode::UNWILLING_TO_PERFORM, message).into()
}
