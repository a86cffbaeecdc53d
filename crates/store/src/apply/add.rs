//! Adding an entry: a plan that decides every refusal and ends in the
//! claim of the entry's DN, then the writes of its record, its link from
//! its parent and its index keys. Bulk loads, which add many entries in
//! one command, are in [`bulk`].

pub(super) mod bulk;

use heed::RwTxn;
use meridian_model::ModelError;
use meridian_model::dn::Dn;
use meridian_model::entry::{Entry, WrittenBy};
use meridian_proto::ResultCode;

use super::Context;
use super::tree::{self, ROOT_ID};
use crate::command::Effect;
use crate::feed::EntryChange;
use crate::keys::{self, EntryId};
use crate::{Dbs, StoreError};

/// The meta key holding the next entry ID.
pub(crate) const NEXT_ID: &[u8] = b"next_id";

/// An add whose DN is claimed: its `dn2id` key written with the entry's
/// ID, everything else still to write.
pub(super) struct Claimed {
    id: EntryId,
    parent_id: EntryId,
}

/// Every check of an add, ending in its one write: the entry's `dn2id`
/// key, put with NO_OVERWRITE, which is also the existence check. Every
/// refusal (entryAlreadyExists, noSuchObject, a schema violation) comes
/// before that write or is that write's own refusal, so a refused add
/// leaves the transaction as it was. `check`: against the schema (false
/// only for entries the caller checked).
pub(super) fn plan(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    check: bool,
    adds: &mut Adds,
) -> Result<Claimed, StoreError> {
    let dbs = ctx.dbs;
    let key = new_entry_key(entry)?;
    // An existing entry is reported as such before any other refusal
    // (as slapd does); with `check` that needs a lookup, since the schema
    // check comes before the claim. A prechecked entry that exists has a
    // parent, so the parent check passes and the claim reports it.
    if check && dbs.dn2id.get(txn, &key)?.is_some() {
        return Err(already_exists(entry));
    }
    let parent_id = parent_of_new(txn, ctx, entry, &key, adds)?;
    if check {
        entry.check(ctx.schema, WrittenBy::Server)?;
    }
    let id = adds.next_id;
    if dbs
        .dn2id
        .get_or_put(txn, &key, &keys::id_key(id))?
        .is_some()
    {
        return Err(already_exists(entry));
    }
    adds.next_id += 1;
    Ok(Claimed { id, parent_id })
}

/// The writes of an add [`plan`] claimed, and the next ID written back
/// ([`Adds::finish`]): the whole of one add command.
pub(super) fn write(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    claimed: Claimed,
    adds: Adds,
) -> Result<Effect, StoreError> {
    let outcome = write_new_entry(txn, ctx, entry, claimed.id, claimed.parent_id)?;
    adds.finish(txn, ctx.dbs)?;
    Ok(outcome)
}

/// One add of a bulk load: [`plan`], then the writes.
fn add(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    check: bool,
    adds: &mut Adds,
) -> Result<Effect, StoreError> {
    let claimed = plan(txn, ctx, entry, check, adds)?;
    write_new_entry(txn, ctx, entry, claimed.id, claimed.parent_id)
}

pub(super) struct Adds {
    next_id: EntryId,
    first_id: EntryId,
    /// The `dn2id` key of the last parent looked up, and its ID.
    last_parent: Option<(Vec<u8>, EntryId)>,
    /// Of a prechecked bulk add, whose first pass claimed every entry's
    /// DN with the ID `first_id + position` (`bulk::claim_dns`): which
    /// entries are added so far. A parent found with such an ID is a
    /// parent only once its own entry is added.
    claimed: Option<Vec<bool>>,
}

/// The ID the next added entry gets.
fn stored_next_id(txn: &heed::RoTxn<'_>, dbs: &Dbs) -> Result<EntryId, StoreError> {
    match dbs.meta.get(txn, NEXT_ID)? {
        Some(bytes) => keys::id_from(bytes)
            .ok_or_else(|| StoreError::corrupt("the next entry ID is not an ID")),
        None => Ok(1),
    }
}

/// [`stored_next_id`] as of the last commit.
pub(crate) fn next_entry_id(inner: &crate::Inner) -> Result<EntryId, StoreError> {
    let _map = inner.hold_map();
    let txn = inner.env.read_txn()?;
    stored_next_id(&txn, &inner.dbs)
}

impl Adds {
    pub(super) fn start(txn: &RwTxn<'_>, dbs: &Dbs) -> Result<Adds, StoreError> {
        let next_id = stored_next_id(txn, dbs)?;
        Ok(Adds {
            next_id,
            first_id: next_id,
            last_parent: None,
            claimed: None,
        })
    }

    /// Records that the entry at `position` of a prechecked bulk add is
    /// added.
    pub(super) fn mark_added(&mut self, position: usize) {
        if let Some(slot) = self.claimed.as_mut().and_then(|a| a.get_mut(position)) {
            *slot = true;
        }
    }

    /// False for an ID a bulk add's first pass claimed for an entry not
    /// (or not yet) added.
    fn is_live(&self, id: EntryId) -> bool {
        let (Some(added), Some(position)) = (&self.claimed, id.checked_sub(self.first_id)) else {
            return true;
        };
        usize::try_from(position).is_ok_and(|p| added.get(p) == Some(&true))
    }

    /// The ID of the parent whose `dn2id` key is `key`, if it exists.
    fn parent_id(
        &mut self,
        txn: &RwTxn<'_>,
        dbs: &Dbs,
        key: &[u8],
    ) -> Result<Option<EntryId>, StoreError> {
        if let Some((last, id)) = &self.last_parent
            && last.as_slice() == key
        {
            return Ok(Some(*id));
        }
        let found = dbs.dn2id.get(txn, key)?.and_then(keys::id_from);
        let found = found.filter(|&id| self.is_live(id));
        if let Some(id) = found {
            self.last_parent = Some((key.to_vec(), id));
        }
        Ok(found)
    }

    /// Writes back the next ID if any add used one.
    pub(super) fn finish(self, txn: &mut RwTxn<'_>, dbs: &Dbs) -> Result<(), StoreError> {
        if self.next_id != self.first_id {
            dbs.meta.put(txn, NEXT_ID, &self.next_id.to_be_bytes())?;
        }
        Ok(())
    }
}

/// The `dn2id` key of an entry to add, or why it cannot be added.
pub(super) fn new_entry_key(entry: &Entry) -> Result<Vec<u8>, StoreError> {
    if entry.dn.is_root() {
        return Err(ModelError::new(
            ResultCode::UNWILLING_TO_PERFORM,
            "the root DSE cannot be added",
        )
        .into());
    }
    let key = keys::dn_key(&entry.dn);
    tree::check_dn_key_len(key.len(), entry.dn.original())?;
    Ok(key)
}

fn already_exists(entry: &Entry) -> StoreError {
    StoreError::AlreadyExists(entry.dn.original().to_owned())
}

/// The ID of the parent of an entry to add (whose `dn2id` key is `key`),
/// or noSuchObject.
pub(super) fn parent_of_new(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    key: &[u8],
    adds: &mut Adds,
) -> Result<EntryId, StoreError> {
    if ctx.suffixes.iter().any(|s| s.same_entry(&entry.dn)) {
        return Ok(ROOT_ID);
    }
    let parent_key = keys::parent_key(key, &entry.dn);
    if parent_key.is_empty() {
        return Err(StoreError::NoSuchObject {
            dn: entry.dn.original().to_owned(),
            matched: String::new(),
        });
    }
    // Looked up by key: a bulk load adds millions of entries and
    // building each parent's DN would cost more than the lookup.
    match adds.parent_id(txn, ctx.dbs, parent_key)? {
        Some(id) => Ok(id),
        None => {
            let parent = entry.dn.parent().unwrap_or_else(Dn::root);
            Err(tree::no_such(txn, ctx.dbs, &parent))
        }
    }
}

/// Writes a new entry whose `dn2id` key is in place: its record, its
/// link from its parent, its index keys (queued).
pub(super) fn write_new_entry(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    id: EntryId,
    parent_id: EntryId,
) -> Result<Effect, StoreError> {
    let dbs = ctx.dbs;
    // Encoded only now, since it may number (and store) new attribute
    // names: a refused add must leave nothing behind, not even a name,
    // or a store that never saw it (a journal replay) would number the
    // next new name differently. Encoding fails only in the engine.
    let record = ctx.encode(txn, entry)?;
    ctx.touch(id);
    ctx.changed(EntryChange::Added(id));
    // IDs only grow, so the new record goes after every other: APPEND
    // fills pages instead of splitting them in half (half the file for
    // a bulk load), and skips the search for the insertion point.
    dbs.id2entry
        .put_with_flags(txn, heed::PutFlags::APPEND, &keys::id_key(id), &record)?;
    // The new child has the largest ID, so its link goes last among its
    // parent's; and last in the database when the parent is the newest
    // one with children, as in a bulk load of siblings: then APPEND skips
    // the search (LMDB answers KEYEXIST, and nothing is written, when the
    // key is not the last).
    let link = keys::child_key(parent_id, id);
    match dbs
        .children
        .put_with_flags(txn, heed::PutFlags::APPEND, &link, &[])
    {
        Err(heed::Error::Mdb(heed::MdbError::KeyExist)) => dbs.children.put(txn, &link, &[])?,
        other => other?,
    }
    let mut pending_index = ctx.pending_index.borrow_mut();
    ctx.indexes
        .for_each_entry_key(entry, ctx.schema, |prefix| pending_index.push(prefix, id));
    drop(pending_index);
    #[cfg(test)]
    super::test_support::fail_after_writing(entry.dn.original())?;
    Ok(Effect::Added(id))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use meridian_config::StorageConfig;
    use meridian_model::dn::Dn;
    use meridian_model::modify::{ModOp, Modification};

    use crate::apply::test_support::*;
    use crate::{Command, StoreError};

    #[test]
    fn unnested_adds_fail_alone_and_leave_nothing_behind() {
        // Adds and bulk loads go without a nested transaction too. Three
        // ways one can fail among others: refused before it writes (it
        // exists), failing in the engine after its writes (cut out of the
        // batch), and refused in a prechecked bulk load,
        // where the existence check is the first write: its new
        // attribute name must not be numbered, or a journal replay,
        // which never sees it, would number the next name differently.
        let (schema, dir, store) = open_with_suffix("unnested-add", StorageConfig::default());
        let user = |i: usize| {
            entry(
                &schema,
                &format!("uid=add{i},{SUFFIX}"),
                &[("objectClass", "account"), ("uid", &format!("add{i}"))],
            )
        };
        store
            .execute_blocking(Command::Add {
                entry: user(0),
                prechecked: false,
            })
            .unwrap();
        const USERS: usize = 40;
        let failing = 17;
        let injected = failing_after_writing(user(failing).dn.original().to_owned());
        // add0 exists: its add is refused before writing.
        let results = run_together(
            &store,
            (0..USERS)
                .map(|i| Command::Add {
                    entry: user(i),
                    prechecked: false,
                })
                .collect(),
        );
        drop(injected);
        let snap = store.snapshot().unwrap();
        for (i, result) in results.iter().enumerate() {
            let found = snap.get(&user(i).dn).unwrap().is_some();
            match i {
                0 => assert!(
                    matches!(result, Err(StoreError::AlreadyExists(_))),
                    "{result:?}"
                ),
                _ if i == failing => {
                    assert_injected(result);
                    assert!(!found, "the failed add left its entry");
                }
                _ => {
                    assert!(result.is_ok(), "add {i}: {result:?}");
                    assert!(found, "add {i} is lost");
                }
            }
        }
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        // A bulk load of an existing entry, with a name never stored.
        let again = entry(
            &schema,
            &format!("uid=add1,{SUFFIX}"),
            &[
                ("objectClass", "account"),
                ("uid", "add1"),
                ("description", "new name"),
            ],
        );
        let loaded = store
            .execute_blocking(Command::AddMany {
                entries: Arc::new(vec![again, user(USERS)]),
                prechecked: true,
            })
            .unwrap();
        assert!(
            matches!(&loaded, crate::Effect::AddedMany { added: 1, failed }
                if matches!(failed.as_slice(), [(0, StoreError::AlreadyExists(_))])),
            "{loaded:?}"
        );
        assert_eq!(
            store.inner.name_table().number_of("description"),
            None,
            "the refused add numbered its attribute name"
        );
        let snap = store.snapshot().unwrap();
        assert!(snap.get(&user(USERS).dn).unwrap().is_some());
        // Index keys, dn2id and children agree with the entries.
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn index_keys_of_adds_are_written_before_a_later_write_in_the_batch() {
        // The adds' index keys wait for the end of their run of adds.
        // A modify or a delete of an entry added earlier in the same
        // batch must find them written, or it leaves them stale behind.
        let mut storage = StorageConfig::default();
        storage.indexes.insert(
            "description".into(),
            vec![
                meridian_config::IndexKind::Eq,
                meridian_config::IndexKind::Sub,
            ],
        );
        let (schema, dir, store) = open_with_suffix("pending", storage);
        const USERS: usize = 30;
        let dn = |i: usize| format!("uid=mix{i},{SUFFIX}");
        let mut writes = Vec::new();
        for i in 0..USERS {
            let add = Command::Add {
                entry: entry(
                    &schema,
                    &dn(i),
                    &[
                        ("objectClass", "account"),
                        ("uid", &format!("mix{i}")),
                        ("description", &format!("first {i}")),
                    ],
                ),
                prechecked: false,
            };
            let modify = Command::Modify {
                dn: Dn::parse(dn(i).as_bytes(), &schema).unwrap(),
                changes: vec![Modification {
                    op: ModOp::Replace,
                    attr: "description".into(),
                    values: vec![format!("second {i}").into_bytes()],
                }],
                operational: vec![],
                permissive: false,
            };
            writes.extend([add, modify]);
            if i % 3 == 0 {
                writes.push(Command::Delete {
                    dn: Dn::parse(dn(i).as_bytes(), &schema).unwrap(),
                });
            }
        }
        for result in run_together(&store, writes) {
            result.unwrap();
        }
        let snap = store.snapshot().unwrap();
        let problems = snap.check().unwrap();
        assert!(
            problems.is_empty(),
            "{} problems, the first: {:?}",
            problems.len(),
            problems.first()
        );
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
