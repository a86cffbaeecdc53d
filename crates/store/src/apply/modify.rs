//! Modifying an entry: a plan that finds the record, works out the new
//! one and decides every refusal (reads only), then the writes.
//!
//! The plan and the writes share one cursor on the record, so `id2entry`
//! is searched once, not twice: the B-tree searches were about a third of
//! the writer's time under a stream of modifies (`perf`), each one
//! walking pages mostly not in the CPU's cache. The new record is made
//! from the old one's bytes where it can be ([`splice`]), from the
//! decoded entry otherwise. The record's ID comes from [`dn_ids`] when
//! the DN was modified before, from `dn2id` otherwise.

pub(super) mod splice;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ops::Bound;

use heed::RwTxn;
use meridian_model::dn::Dn;
use meridian_model::entry::{Description, Entry, ValuesCheck, WrittenBy};
use meridian_model::modify::{self, Change, ModOp, Modification};
use meridian_model::schema::AttrId;

use super::tree::{self, lookup, no_such};
use super::{Applied, Context};
use crate::command::{Effect, OperationalAttribute};
use crate::feed::EntryChange;
use crate::keys::{self, EntryId};
use crate::{Dbs, StoreError, codec};

struct EntryPlan {
    new: Entry,
    /// The entry's index keys before and after, when an indexed type
    /// changes (otherwise its keys stay as they are).
    index: Option<IndexChange>,
}

/// The index keys a modify changes: those of `old` not in `new` go, those
/// of `new` not in `old` come.
pub(crate) struct IndexChange {
    pub(crate) old: BTreeSet<Vec<u8>>,
    pub(crate) new: BTreeSet<Vec<u8>>,
}

impl IndexChange {
    fn write(&self, txn: &mut RwTxn<'_>, dbs: &Dbs, id: EntryId) -> Result<(), StoreError> {
        tree::write_index(txn, dbs, self.old.difference(&self.new), id, false)?;
        tree::write_index(txn, dbs, self.new.difference(&self.old), id, true)
    }
}

/// The client's changes, then the server's operational replacements,
/// borrowed from the command (this runs on the writer thread: copies of
/// the values would be made and freed there for every modify).
fn all_changes<'c>(
    changes: &'c [Modification],
    operational: &'c [OperationalAttribute],
) -> impl Iterator<Item = Change<'c>> {
    changes
        .iter()
        .map(Modification::as_change)
        .chain(operational.iter().map(|(attr, values)| Change {
            op: ModOp::Replace,
            attr,
            values,
        }))
}

/// Most values a modify asks the equality index about (see
/// [`absent_values`]).
const MOST_ASKED: usize = 64;

/// The values `changes` add or delete that the entry `id` surely does
/// not hold, told by the built equality index of their (options-less)
/// type: asked before the cursor takes the transaction, so that adding a
/// member to a group of ten thousand works out the keys of the one value
/// added, not of every member (`modify::apply_described_changes`). At
/// most [`MOST_ASKED`] values; a modify with more, or on types without
/// such an index, or while adds' index keys wait, is planned without.
fn absent_values<'c>(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    id: EntryId,
    client: &[(Description, Change<'c>)],
) -> Result<Vec<(AttrId, &'c [u8])>, StoreError> {
    let by_values = |c: &&(Description, Change<'c>)| {
        matches!(c.1.op, ModOp::Add | ModOp::Delete) && c.0.options.is_empty()
    };
    let asked = client
        .iter()
        .filter(by_values)
        .map(|(_, c)| c.values.len())
        .sum::<usize>();
    // While adds' keys wait (`Context::pending_index`: a server's own
    // modify inside a run of adds, memberOf kept for a group just added)
    // the index does not yet speak of every entry: not asked.
    if asked == 0 || asked > MOST_ASKED || !ctx.pending_index.borrow().is_empty() {
        return Ok(Vec::new());
    }
    let mut absent = Vec::new();
    let id_key = keys::id_key(id);
    for (desc, change) in client.iter().filter(by_values) {
        for value in change.values {
            let Some(mut key) = ctx.indexes.eq_prefix_of(desc.attr, value, ctx.schema) else {
                continue;
            };
            key.extend_from_slice(&id_key);
            if ctx.dbs.index.get(txn, &key)?.is_none() {
                absent.push((desc.attr, value.as_slice()));
            }
        }
    }
    Ok(absent)
}

/// The checks and the new entry of a modify of `old` by `described` (the
/// first `client` changes are the client's); reads nothing, so a refusal
/// here has written nothing.
fn plan_changes(
    ctx: &Context<'_>,
    old: Entry,
    described: &[(Description, Change<'_>)],
    client: usize,
    permissive: bool,
    absent: &[(AttrId, &[u8])],
) -> Result<EntryPlan, StoreError> {
    // Index keys can only change if an indexed type was touched, and
    // only that type's; only then are its old keys taken, and the entry
    // itself is changed without a copy.
    let (by_values, by_entry) = touched_indexed_types(ctx, &old, described);
    let touches_index = !by_values.is_empty() || !by_entry.is_empty();
    let old_keys = touches_index.then(|| ctx.indexes.keys_of_types(&old, &by_entry, ctx.schema));
    let pairs = described.iter().map(|(desc, change)| (desc, *change));
    let is_absent = |desc: &Description, value: &[u8]| {
        absent
            .iter()
            .any(|(attr, v)| *attr == desc.attr && *v == value)
    };
    let is_absent: Option<modify::Absent<'_>> = (!absent.is_empty()).then_some(&is_absent);
    let new = modify::apply_described_changes(old, pairs, ctx.schema, permissive, is_absent)?;
    // The values checked are the client's: the operational ones are the
    // server's own (a timestamp, its DN, a CSN), made well-formed by the
    // directory; checking their syntax again (a DN parse, a time parse)
    // was a twentieth of the writer's time at the server.
    let client = described.get(..client).unwrap_or(described);
    // A type the client only added values to or deleted values from
    // held valid, distinct values, and the change refused one equal to
    // one held: only the values added are checked.
    let by_values_only = |attr: AttrId| {
        client.iter().filter(|(d, _)| d.attr == attr).all(|(d, c)| {
            d.options.is_empty()
                && matches!(c.op, ModOp::Add | ModOp::Delete)
                && !c.values.is_empty()
        })
    };
    let check = |attr: AttrId| {
        if !client.iter().any(|(desc, _)| desc.attr == attr) {
            return ValuesCheck::Skip;
        }
        if !by_values_only(attr) {
            return ValuesCheck::All;
        }
        let added = client
            .iter()
            .filter(|(d, c)| d.attr == attr && c.op == ModOp::Add)
            .flat_map(|(_, c)| c.values.iter().map(Vec::as_slice))
            .collect();
        ValuesCheck::Added(added)
    };
    new.check_after_modify_by(
        ctx.schema,
        WrittenBy::Server,
        check,
        &mut ctx.classes.borrow_mut(),
    )?;
    let index = old_keys.map(|mut old| {
        let mut new_keys = ctx.indexes.keys_of_types(&new, &by_entry, ctx.schema);
        for (desc, change) in described
            .iter()
            .filter(|(d, _)| by_values.contains(&d.attr))
        {
            let values = change.values.iter().map(Vec::as_slice);
            let side = match change.op {
                ModOp::Add => &mut new_keys,
                _ => &mut old,
            };
            ctx.indexes
                .keys_of_values(desc.attr, values, ctx.schema, side);
        }
        IndexChange { old, new: new_keys }
    });
    Ok(EntryPlan { new, index })
}

/// The indexed types `described` changes, in two lists: those whose keys
/// change by exactly the values added and deleted (an equality index
/// only, changes that add or delete listed values, no value both added
/// and deleted, one description of the type in the entry), and the
/// others, whose keys are taken from the whole attribute before and
/// after. Adding one member to a group of ten thousand costs one key,
/// not twenty thousand (`scripts/bench-groups.py`).
fn touched_indexed_types(
    ctx: &Context<'_>,
    old: &Entry,
    described: &[(Description, Change<'_>)],
) -> (Vec<AttrId>, Vec<AttrId>) {
    let (mut by_values, mut by_entry) = (Vec::new(), Vec::new());
    for (desc, _) in described {
        let attr = desc.attr;
        if ctx.indexes.get(attr).is_none() || by_values.contains(&attr) || by_entry.contains(&attr)
        {
            continue;
        }
        let changes = || {
            described
                .iter()
                .filter(move |(d, _)| d.attr == attr)
                .map(|(_, c)| c)
        };
        let only_values =
            changes().all(|c| matches!(c.op, ModOp::Add | ModOp::Delete) && !c.values.is_empty());
        let both_ways = changes().any(|added| {
            added.op == ModOp::Add
                && changes().any(|deleted| {
                    deleted.op == ModOp::Delete
                        && deleted.values.iter().any(|v| added.values.contains(v))
                })
        });
        let descriptions = old
            .attributes
            .iter()
            .filter(|a| a.desc.attr == attr)
            .count();
        if ctx.indexes.only_equality(attr) && only_values && !both_ways && descriptions <= 1 {
            by_values.push(attr);
        } else {
            by_entry.push(attr);
        }
    }
    (by_values, by_entry)
}

/// Plans and writes a modify of `dn` by the client's `changes`, then the
/// server's `operational` replacements. The plan and the writes are in
/// one function because they share the cursor on the record; while the
/// cursor holds the transaction, names are read from memory
/// ([`Assigner::source`](crate::names::Assigner::source)), and a record
/// that would need a new name is written, with the index keys, after it
/// is dropped.
pub(super) fn apply(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    changes: &[Modification],
    operational: &[OperationalAttribute],
    permissive: bool,
) -> Applied {
    let dbs = ctx.dbs;
    // The plan: reads only.
    // The ID remembered from an earlier modify, or `dn2id`'s.
    let guess = ctx.dn_ids.borrow().guess(dn);
    let id = match guess {
        Some(id) => id,
        None => match lookup(txn, dbs, dn) {
            Ok(Some(id)) => id,
            Ok(None) => return Applied::refused(no_such(txn, dbs, dn)),
            Err(e) => return Applied::refused(e),
        },
    };
    ctx.touch(id);
    // Each description parsed once, for the index's answers, the types
    // changed and applying the change; an error is reported once the
    // entry is found.
    let described = ctx.describe(all_changes(changes, operational));
    let absent = match &described {
        Ok(described) => {
            let client = described.get(..changes.len()).unwrap_or(described);
            match absent_values(txn, ctx, id, client) {
                Ok(absent) => absent,
                Err(e) => return Applied::refused(e),
            }
        }
        Err(_) => Vec::new(),
    };
    let key = keys::id_key(id);
    let only = (Bound::Included(&key[..]), Bound::Included(&key[..]));
    let mut cursor = match dbs.id2entry.range_mut(txn, &only) {
        Ok(cursor) => cursor,
        Err(e) => return Applied::refused(e.into()),
    };
    let found = match cursor.next() {
        Some(Ok((_, bytes))) => {
            // A record that carries exactly this DN's text is this
            // entry (entries are unique by DN): only that proves a
            // guess, and only such an ID is remembered, so a client that
            // spells a DN otherwise than it was added makes no guesses.
            let proven = codec::stored_dn(bytes) == Some(dn.original().as_bytes());
            if guess.is_some() && !proven {
                None
            } else {
                if guess.is_none() && proven {
                    ctx.dn_ids.borrow_mut().remember(dn, id);
                }
                Some(Ok(bytes))
            }
        }
        Some(Err(e)) => Some(Err(e.into())),
        None if guess.is_some() => None,
        None => Some(Err(StoreError::corrupt(format_args!(
            "dn2id points at missing entry {id}"
        )))),
    };
    let Some(found) = found else {
        // A wrong guess (the entry renamed or deleted since, or its ID
        // given again after a batch that failed): forgotten, and
        // `dn2id` decides.
        drop(cursor);
        ctx.dn_ids.borrow_mut().forget(dn);
        return apply(txn, ctx, dn, changes, operational, permissive);
    };
    let planned = found.and_then(|bytes| {
        let described = described?;
        if let Some(spliced) = splice::splice(ctx, bytes, dn, &described, changes.len()) {
            return Ok(Planned::Spliced(spliced));
        }
        let old = codec::decode_as(bytes, &ctx.names.source(ctx.schema), Some(dn))?;
        plan_changes(ctx, old, &described, changes.len(), permissive, &absent).map(Planned::Entry)
    });
    let planned = match planned {
        Ok(planned) => planned,
        Err(refusal) => return Applied::refused(refusal),
    };

    // The writes.
    let written = match planned.known_record(ctx) {
        #[allow(unsafe_code)]
        Some(record) => {
            // SAFETY: nothing read through the cursor is borrowed any more
            // (the old record was decoded into an owned entry, or spliced
            // into an owned record), so the overwrite invalidates no
            // reference.
            let put = unsafe { cursor.put_current(&key, &record) };
            drop(cursor);
            put.map(|_| ()).map_err(StoreError::from)
        }
        None => {
            drop(cursor);
            planned
                .record(txn, ctx)
                .and_then(|record| Ok(dbs.id2entry.put(txn, &key, &record)?))
        }
    };
    Applied::written(written.and_then(|()| {
        if let Some(index) = planned.index() {
            index.write(txn, dbs, id)?;
        }
        #[cfg(test)]
        super::test_support::fail_after_writing(planned.dn_text(dn))?;
        ctx.changed(EntryChange::Modified(id));
        Ok(Effect::Modified)
    }))
}

/// A modify's new record, planned one way or the other.
enum Planned {
    Spliced(splice::Spliced),
    Entry(EntryPlan),
}

impl Planned {
    /// The new record, if every name it holds has its number already
    /// (a spliced record always: it takes no name without one).
    fn known_record(&self, ctx: &Context<'_>) -> Option<Cow<'_, [u8]>> {
        match self {
            Planned::Spliced(spliced) => Some(Cow::Borrowed(&spliced.record)),
            Planned::Entry(plan) => known_record(ctx, &plan.new).map(Cow::Owned),
        }
    }

    /// The new record, numbering the names that need it.
    fn record(&self, txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<Cow<'_, [u8]>, StoreError> {
        match self {
            Planned::Spliced(spliced) => Ok(Cow::Borrowed(&spliced.record)),
            Planned::Entry(plan) => ctx.encode(txn, &plan.new).map(Cow::Owned),
        }
    }

    /// The index keys the modify changes, if any.
    fn index(&self) -> Option<&IndexChange> {
        match self {
            Planned::Spliced(spliced) => spliced.index.as_ref(),
            Planned::Entry(plan) => plan.index.as_ref(),
        }
    }

    /// The DN text the new record carries (a spliced record carries
    /// exactly `dn`'s).
    #[cfg(test)]
    fn dn_text<'a>(&'a self, dn: &'a Dn) -> &'a str {
        match self {
            Planned::Spliced(_) => dn.original(),
            Planned::Entry(plan) => plan.new.dn.original(),
        }
    }
}

/// The stored form of `new` if every name it holds has its number
/// already; `None` if one would need a new number (which only a write
/// to `meta` can give) or it cannot be encoded (which encoding it again
/// reports).
fn known_record(ctx: &Context<'_>, new: &Entry) -> Option<Vec<u8>> {
    let mut needs_new_name = false;
    let record = codec::encode(new, |position, attr| {
        Ok(ctx
            .names
            .known_number_of(position, attr, ctx.schema)
            .unwrap_or_else(|| {
                needs_new_name = true;
                0
            }))
    });
    record.ok().filter(|_| !needs_new_name)
}

#[cfg(test)]
mod tests {
    use meridian_config::{Durability, StorageConfig};
    use meridian_model::dn::Dn;
    use meridian_model::entry::Entry;
    use meridian_model::modify::{ModOp, Modification};

    use crate::Command;
    use crate::apply::test_support::*;

    #[test]
    fn a_modify_failing_in_its_writes_fails_alone() {
        modifies_failing_in_their_writes_fail_alone("unnested", StorageConfig::default());
    }

    #[test]
    fn a_modify_failing_in_its_writes_fails_alone_in_journal_mode() {
        // Journal mode maps the database writable (MDB_WRITEMAP), where
        // LMDB has no nested transactions at all.
        let storage = StorageConfig {
            durability: Durability::Journal,
            ..StorageConfig::default()
        };
        modifies_failing_in_their_writes_fail_alone("unnested-journal", storage);
    }

    #[test]
    fn member_values_added_and_deleted_keep_the_index_as_a_rebuild_would() {
        // An equality-indexed type changed by added and deleted values
        // has its keys changed by those values only: the index must be
        // what the whole entry gives, whatever the mix (permissive adds
        // of present values, deletes of absent ones, add and delete of
        // one value, a replace beside).
        let (schema, dir, store) = open_with_suffix("member-keys", StorageConfig::default());
        let run = |command: Command| store.execute_blocking(command);
        let member = |i: usize| format!("uid=m{i},{SUFFIX}");
        let group = format!("cn=g,{SUFFIX}");
        run(Command::Add {
            entry: entry(
                &schema,
                &group,
                &[
                    ("objectClass", "groupOfNames"),
                    ("cn", "g"),
                    ("member", &member(0)),
                ],
            ),
            prechecked: false,
        })
        .unwrap();
        let change = |op: ModOp, values: &[usize]| Modification {
            op,
            attr: "member".into(),
            values: values.iter().map(|i| member(*i).into_bytes()).collect(),
        };
        let modify = |changes: Vec<Modification>, permissive: bool| Command::Modify {
            dn: Dn::parse(group.as_bytes(), &schema).unwrap(),
            changes,
            operational: vec![],
            permissive,
        };
        let steps = [
            (vec![change(ModOp::Add, &[1, 2, 3])], false),
            (vec![change(ModOp::Delete, &[2])], false),
            (vec![change(ModOp::Add, &[3, 4])], true),
            (vec![change(ModOp::Delete, &[7, 4])], true),
            (
                vec![change(ModOp::Add, &[5]), change(ModOp::Delete, &[5])],
                false,
            ),
            (
                vec![change(ModOp::Add, &[3]), change(ModOp::Delete, &[3])],
                true,
            ),
            (
                vec![
                    change(ModOp::Add, &[6]),
                    Modification {
                        op: ModOp::Replace,
                        attr: "description".into(),
                        values: vec![b"x".to_vec()],
                    },
                ],
                false,
            ),
            (vec![change(ModOp::Replace, &[1, 6])], false),
        ];
        for (n, (changes, permissive)) in steps.into_iter().enumerate() {
            run(modify(changes, permissive)).unwrap_or_else(|e| panic!("step {n}: {e}"));
            let snap = store.snapshot().unwrap();
            assert_eq!(snap.check().unwrap(), Vec::<String>::new(), "step {n}");
        }
        let snap = store.snapshot().unwrap();
        let (_, stored) = snap
            .get(&Dn::parse(group.as_bytes(), &schema).unwrap())
            .unwrap()
            .unwrap();
        let members = stored.get(schema.attribute_id("member").unwrap()).unwrap();
        assert_eq!(members.values.len(), 2, "{members:?}");
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn modifies_failing_in_their_writes_fail_alone(tag: &str, storage: StorageConfig) {
        // Modifies go without a nested transaction of their own. One that
        // fails after it began to write leaves its part in the batch's
        // transaction: the commands before it must be committed without
        // it, so that the others commit and nothing of it does. Failing
        // ones first, last, and two in a row.
        let (schema, dir, store) = open_with_suffix(tag, storage);
        let add = |e: Entry| {
            store
                .execute_blocking(Command::Add {
                    entry: e,
                    prechecked: false,
                })
                .unwrap()
        };
        const USERS: usize = 40;
        // Each caller its own DNs: the list of failing DNs is shared by
        // the tests running at the same time.
        let uid = |i: usize| format!("u{i}-{tag}");
        let dn = |i: usize| format!("uid={},{SUFFIX}", uid(i));
        for i in 0..USERS {
            add(entry(
                &schema,
                &dn(i),
                &[("objectClass", "account"), ("uid", &uid(i))],
            ));
        }
        let failing = [0, 17, 18, USERS - 1];
        let injected: Vec<_> = failing
            .iter()
            .map(|&i| failing_after_writing(dn(i)))
            .collect();
        let modifies = (0..USERS)
            .map(|i| Command::Modify {
                dn: Dn::parse(dn(i).as_bytes(), &schema).unwrap(),
                changes: vec![Modification {
                    op: ModOp::Replace,
                    attr: "description".into(),
                    values: vec![b"changed".to_vec()],
                }],
                operational: vec![],
                permissive: false,
            })
            .collect();
        let results = run_together(&store, modifies);
        drop(injected);
        let snap = store.snapshot().unwrap();
        for (i, result) in results.iter().enumerate() {
            let (_, stored) = snap
                .get(&Dn::parse(dn(i).as_bytes(), &schema).unwrap())
                .unwrap()
                .unwrap();
            let description = schema.attribute_id("description").unwrap();
            let changed = stored.get(description).is_some();
            if failing.contains(&i) {
                assert_injected(result);
                assert!(!changed, "the failed modify left its change");
            } else {
                assert!(result.is_ok(), "modify {i}: {result:?}");
                assert!(changed, "modify {i} is lost");
            }
        }
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
