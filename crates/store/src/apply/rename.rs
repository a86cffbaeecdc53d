//! Renaming an entry (ModifyDN): a plan that decides every refusal and
//! works out the new entry, its index keys and the subtree's new names
//! (reads only), then the writes.

use std::collections::BTreeSet;

use heed::RwTxn;
use meridian_model::ModelError;
use meridian_model::dn::Dn;
use meridian_model::entry::{Entry, WrittenBy};
use meridian_model::modify::{self, ModOp, Modification};
use meridian_proto::ResultCode;

use super::Context;
use super::tree::{self, lookup, no_such, unwilling};
use crate::StoreError;
use crate::command::{Effect, OperationalAttribute};
use crate::feed::EntryChange;
use crate::keys::{self, EntryId};

/// A rename worked out and checked, nothing written yet.
pub(super) struct Plan {
    id: EntryId,
    parent_id: EntryId,
    old_parent_id: EntryId,
    new_dn: Dn,
    new: Entry,
    /// The entry's index key prefixes before and after.
    old_keys: BTreeSet<Vec<u8>>,
    new_keys: BTreeSet<Vec<u8>>,
    /// The `dn2id` keys of the entry and its subtree, with their IDs.
    moved: Vec<(Vec<u8>, EntryId)>,
}

/// Every check of a rename, and what it will write; reads only, so a
/// refusal here has written nothing and fails alone in its batch.
pub(super) fn plan(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    new_rdn: &str,
    delete_old_rdn: bool,
    new_superior: Option<&Dn>,
    operational: &[OperationalAttribute],
) -> Result<Plan, StoreError> {
    let dbs = ctx.dbs;
    let schema = ctx.schema;
    let Some(id) = lookup(txn, dbs, dn)? else {
        return Err(no_such(txn, dbs, dn));
    };
    if ctx.suffixes.iter().any(|s| s.same_entry(dn)) {
        return Err(unwilling(format!(
            "{} is a naming context and cannot be renamed",
            dn.original()
        )));
    }
    let rdn = Dn::parse(new_rdn.as_bytes(), schema)?;
    if rdn.rdn_count() != 1 {
        return Err(ModelError::new(
            ResultCode::INVALID_DN_SYNTAX,
            format!("newrdn {new_rdn:?} must be exactly one RDN"),
        )
        .into());
    }
    let old_parent = dn.parent().unwrap_or_else(Dn::root);
    let parent = new_superior.cloned().unwrap_or_else(|| old_parent.clone());
    if parent.is_within(dn) {
        return Err(unwilling(format!(
            "cannot move {} below itself",
            dn.original()
        )));
    }
    let parent_id = if parent.is_root() {
        return Err(unwilling("an entry cannot be moved to the root".into()));
    } else {
        match lookup(txn, dbs, &parent)? {
            Some(pid) => pid,
            None => return Err(no_such(txn, dbs, &parent)),
        }
    };
    let new_text = format!("{new_rdn},{}", parent.original());
    let new_dn = Dn::parse(new_text.as_bytes(), schema)?;
    let renamed_in_place = new_dn.same_entry(dn);
    if !renamed_in_place && lookup(txn, dbs, &new_dn)?.is_some() {
        return Err(StoreError::AlreadyExists(new_dn.original().to_owned()));
    }
    let old = ctx.load(txn, id, Some(dn))?;
    // New RDN values are added; old ones removed when asked (unless they
    // are also in the new RDN); then the operational attributes.
    let mut changes: Vec<Modification> = Vec::new();
    let new_values = new_dn.rdn_values().first().cloned().unwrap_or_default();
    let old_values = dn.rdn_values().first().cloned().unwrap_or_default();
    let name_of = |attr| {
        schema
            .attr(attr)
            .map_or(String::new(), |a| a.name().to_owned())
    };
    if delete_old_rdn {
        for (attr, value) in old_values.iter() {
            let rule = schema.attr(*attr).and_then(|a| a.equality);
            let key = |v: &[u8]| rule.map_or_else(|| Some(v.to_vec()), |r| r.key(v, schema));
            let kept = new_values
                .iter()
                .any(|(a, v)| a == attr && key(v) == key(value));
            if !kept {
                changes.push(Modification {
                    op: ModOp::Delete,
                    attr: name_of(*attr),
                    values: vec![value.clone()],
                });
            }
        }
    }
    // The new RDN's values first, so removing the old ones never leaves
    // the (new) RDN without its values.
    let staged = Entry {
        dn: new_dn.clone(),
        ..old.clone()
    }
    .with_rdn_values(schema);
    let staged = modify::apply(&staged, &changes, schema, true)?;
    let replacements: Vec<Modification> = operational
        .iter()
        .map(|(attr, values)| Modification {
            op: ModOp::Replace,
            attr: attr.clone().into_owned(),
            values: values.clone(),
        })
        .collect();
    let new = modify::apply(&staged, &replacements, schema, false)?;
    new.check(schema, WrittenBy::Server)?;

    // The subtree's names must all fit under the new one.
    let old_prefix = keys::dn_key(dn);
    let new_prefix = keys::dn_key(&new_dn);
    let mut moved: Vec<(Vec<u8>, EntryId)> = Vec::new();
    for item in dbs.dn2id.prefix_iter(txn, &old_prefix)? {
        let (key, value) = item?;
        if let Some(child) = keys::id_from(value) {
            moved.push((key.to_vec(), child));
        }
    }
    let deepest = moved.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    tree::check_dn_key_len(
        (new_prefix.len() + deepest).saturating_sub(old_prefix.len()),
        new_dn.original(),
    )?;
    let old_parent_id = tree::parent_id_of(txn, ctx, dn)?;
    let old_keys = ctx.indexes.entry_keys(&old, schema);
    let new_keys = ctx.indexes.entry_keys(&new, schema);
    Ok(Plan {
        id,
        parent_id,
        old_parent_id,
        old_keys,
        new_keys,
        new_dn,
        new,
        moved,
    })
}

/// Writes a planned rename: the entry, its index keys and parent link,
/// and the subtree's DNs. A failure here comes after a write.
pub(super) fn write(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    plan: Plan,
) -> Result<Effect, StoreError> {
    let dbs = ctx.dbs;
    let Plan {
        id,
        parent_id,
        old_parent_id,
        new_dn,
        new,
        old_keys,
        new_keys,
        moved,
    } = plan;
    tree::write_index(txn, dbs, old_keys.difference(&new_keys), id, false)?;
    tree::write_index(txn, dbs, new_keys.difference(&old_keys), id, true)?;
    let record = ctx.encode(txn, &new)?;
    // Its RDN's values may have changed; the descendants' values have
    // not (only their DNs, which scan columns do not hold).
    ctx.touch(id);
    ctx.changed(EntryChange::Renamed {
        id,
        old_dn: dn.clone(),
    });
    dbs.id2entry.put(txn, &keys::id_key(id), &record)?;
    #[cfg(test)]
    super::test_support::fail_after_writing(new.dn.original())?;
    dbs.children
        .delete(txn, &keys::child_key(old_parent_id, id))?;
    dbs.children
        .put(txn, &keys::child_key(parent_id, id), &[])?;

    // Move the subtree: descendants keep their IDs and children links;
    // their dn2id keys and stored DNs follow.
    let old_prefix = keys::dn_key(dn);
    let new_prefix = keys::dn_key(&new_dn);
    let depth = dn.rdn_count();
    let mut descendants = 0u64;
    // Each moved entry's old and new DN, for what follows it
    // (`integrity.rs`).
    let mut moves = vec![(dn.clone(), new_dn.clone())];
    for (key, child) in moved {
        dbs.dn2id.delete(txn, &key)?;
        let mut new_key = new_prefix.clone();
        new_key.extend_from_slice(key.get(old_prefix.len()..).unwrap_or_default());
        dbs.dn2id.put(txn, &new_key, &keys::id_key(child))?;
        if child == id {
            continue;
        }
        let mut entry = ctx.load(txn, child, None)?;
        let syntactic =
            meridian_proto::dn::SyntacticDn::parse(entry.dn.original()).map_err(|e| {
                StoreError::corrupt(format_args!("the stored DN of entry {child}: {e}"))
            })?;
        let relative = meridian_proto::dn::SyntacticDn {
            rdns: syntactic
                .rdns
                .iter()
                .take(syntactic.rdns.len().saturating_sub(depth))
                .cloned()
                .collect(),
        };
        let text = format!("{relative},{}", new_dn.original());
        let old_dn = std::mem::replace(&mut entry.dn, Dn::parse(text.as_bytes(), ctx.schema)?);
        moves.push((old_dn, entry.dn.clone()));
        let record = ctx.encode(txn, &entry)?;
        dbs.id2entry.put(txn, &keys::id_key(child), &record)?;
        descendants += 1;
    }
    super::integrity::renamed(txn, ctx, &moves)?;
    Ok(Effect::Renamed(descendants))
}

#[cfg(test)]
mod tests {
    use meridian_config::{Durability, StorageConfig};
    use meridian_model::dn::Dn;

    use crate::apply::test_support::*;
    use crate::apply::{Applied, apply};
    use crate::{Command, Effect};

    #[test]
    fn a_rename_failing_in_its_writes_fails_alone() {
        // A rename failing after its first write (an engine failure)
        // spoils the transaction; it is cut out of the batch, and the
        // renames around it commit.
        let storage = StorageConfig {
            durability: Durability::Journal,
            ..StorageConfig::default()
        };
        let (schema, dir, store) = open_with_suffix("rename-spoiled", storage);
        const USERS: usize = 12;
        let old = |i: usize| format!("uid=mv{i},{SUFFIX}");
        let new = |i: usize| format!("uid=moved{i},{SUFFIX}");
        for i in 0..USERS {
            let add = Command::Add {
                entry: entry(
                    &schema,
                    &old(i),
                    &[("objectClass", "account"), ("uid", &format!("mv{i}"))],
                ),
                prechecked: false,
            };
            store.execute_blocking(add).unwrap();
        }
        let failing = 5;
        let injected = failing_after_writing(new(failing));
        let renames = (0..USERS)
            .map(|i| Command::ModifyDn {
                dn: Dn::parse(old(i).as_bytes(), &schema).unwrap(),
                new_rdn: format!("uid=moved{i}"),
                delete_old_rdn: true,
                new_superior: None,
                operational: vec![],
            })
            .collect();
        let results = run_together(&store, renames);
        drop(injected);
        let snap = store.snapshot().unwrap();
        let exists = |dn: String| {
            snap.get(&Dn::parse(dn.as_bytes(), &schema).unwrap())
                .unwrap()
                .is_some()
        };
        for (i, result) in results.iter().enumerate() {
            if i == failing {
                assert_injected(result);
                assert!(
                    exists(old(i)) && !exists(new(i)),
                    "the failed rename left a trace"
                );
            } else {
                assert!(result.is_ok(), "rename {i}: {result:?}");
                assert!(!exists(old(i)) && exists(new(i)), "rename {i} is lost");
            }
        }
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_refused_rename_writes_nothing_before_it_is_refused() {
        // Every refusal of a rename comes before its first write, so it
        // fails alone in its batch without costing the others a second
        // transaction (`apply::apply`): the transaction it ran in holds
        // nothing of it.
        let (schema, dir, store) = open_with_suffix("rename-refused", StorageConfig::default());
        let long = "l".repeat(240);
        let ou = |name: &str| {
            entry(
                &schema,
                &format!("ou={name},{SUFFIX}"),
                &[("objectClass", "organizationalUnit"), ("ou", name)],
            )
        };
        for e in [
            ou("a"),
            ou("b"),
            ou(&long),
            entry(
                &schema,
                &format!("uid=c,ou=a,{SUFFIX}"),
                &[("objectClass", "account"), ("uid", "c")],
            ),
            entry(
                &schema,
                &format!("uid={long},uid=c,ou=a,{SUFFIX}"),
                &[("objectClass", "account"), ("uid", &long)],
            ),
        ] {
            store
                .execute_blocking(Command::Add {
                    entry: e,
                    prechecked: false,
                })
                .unwrap();
        }
        let dn = |text: &str| Dn::parse(format!("{text}{SUFFIX}").as_bytes(), &schema).unwrap();
        let rename = |from: &str, new_rdn: &str, under: Option<&str>| Command::ModifyDn {
            dn: dn(from),
            new_rdn: new_rdn.into(),
            delete_old_rdn: true,
            new_superior: under.map(|u| Box::new(dn(u))),
            operational: vec![],
        };
        use meridian_proto::ResultCode as Code;
        let refused = [
            (
                rename("uid=nobody,ou=a,", "uid=x", None),
                Code::NO_SUCH_OBJECT,
            ),
            (rename("ou=a,", "ou=b", None), Code::ENTRY_ALREADY_EXISTS),
            (
                rename("ou=a,", "ou=a", Some("ou=nowhere,")),
                Code::NO_SUCH_OBJECT,
            ),
            (
                rename("ou=a,", "ou=a", Some("uid=c,ou=a,")),
                Code::UNWILLING_TO_PERFORM,
            ),
            (rename("", "dc=other", None), Code::UNWILLING_TO_PERFORM),
            (
                rename("ou=a,", "ou=x+ou=y,ou=z", None),
                Code::INVALID_DN_SYNTAX,
            ),
            (
                rename("uid=c,ou=a,", "cn=c", None),
                Code::OBJECT_CLASS_VIOLATION,
            ),
            // Its subtree's deepest name would be too long to store.
            (
                rename("uid=c,ou=a,", "uid=c", Some(&format!("ou={long},"))),
                Code::UNWILLING_TO_PERFORM,
            ),
        ];
        let before = store.snapshot().unwrap().raw_dump().unwrap();
        in_writer_transaction(&store, |txn, ctx| {
            for (command, code) in &refused {
                match apply(txn, ctx, command) {
                    Applied::Refused(e) => assert_eq!(e.code(), *code, "{command:?}: {e}"),
                    Applied::Done(_) => panic!("{command:?} was applied"),
                    Applied::Spoiled(e) => panic!("{command:?} failed after writing: {e}"),
                }
            }
        });
        let after = store.snapshot().unwrap().raw_dump().unwrap();
        assert!(before == after, "a refused rename wrote to the transaction");
        // The same move one level up fits, and goes through.
        let fits = rename("uid=c,ou=a,", "uid=c", Some("ou=b,"));
        assert_eq!(store.execute_blocking(fits).unwrap(), Effect::Renamed(1));
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
