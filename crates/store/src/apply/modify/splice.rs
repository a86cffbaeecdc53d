//! A modify made on the stored record itself.
//!
//! Nearly every modify replaces the values of a few types that neither
//! name the entry nor give its classes: a client's replace of an ordinary
//! attribute, and the server's operational replacements
//! (`modifyTimestamp`, `modifiersName`, `entryCSN`). Decoding the record
//! into an [`Entry`](meridian_model::entry::Entry), applying the changes
//! to it, checking it and encoding it again built and freed every
//! attribute and value of the entry, for a change of one or two of them:
//! most of the writer's work per modify (callgrind). Here the record's
//! attributes are only found, the ones the modify keeps are copied as
//! stored, and the replaced ones are written from the command.
//!
//! This must answer exactly what the entry path
//! (`modify::plan_changes`) answers: the same record, byte for byte, the
//! same index keys, and success exactly when that path succeeds. So it
//! takes only the modifies it can decide in the same way, and leaves
//! every other one to the entry path: any change other than a replace,
//! two changes of one description, a change of `objectClass` or of a type
//! of the RDN, a name not yet numbered, a record of the old format, and
//! every modify that would be refused (the entry path then gives the
//! refusal its result code and message).

use std::collections::BTreeSet;

use meridian_model::dn::Dn;
use meridian_model::entry::{
    AttrName, Attribute, Description, Values, WrittenBy, check_values, holds_value,
};
use meridian_model::modify::{Change, ModOp};
use meridian_model::schema::AttrSet;

use super::IndexChange;
use crate::apply::Context;
use crate::codec::{self, RawAttribute};

/// The most changes (the server's operational ones included) a spliced
/// modify has; the entry path applies longer lists.
const MOST_CHANGES: usize = 16;

/// A modify made on the record.
pub(crate) struct Spliced {
    /// The new record.
    pub(crate) record: Vec<u8>,
    /// The index keys of the changed types before and after, when one of
    /// them is indexed.
    pub(crate) index: Option<IndexChange>,
}

/// One attribute of the old record.
struct Slot<'t> {
    raw: RawAttribute,
    desc: &'t Description,
    /// Replaced by one of the modify's changes.
    replaced: bool,
}

/// The modify of the record `bytes`, of the entry `dn`, by `described`
/// (each change with its description; the first `client` are the
/// client's, the rest the server's operational replacements), or `None`
/// if the entry path must decide it.
pub(crate) fn splice(
    ctx: &Context<'_>,
    bytes: &[u8],
    dn: &Dn,
    described: &[(Description, Change<'_>)],
    client: usize,
) -> Option<Spliced> {
    let schema = ctx.schema;
    let object_class = schema.object_class_attr()?;
    let rdn = dn.rdn_values().first();
    let names_the_entry = |desc: &Description| {
        desc.attr == object_class || rdn.is_some_and(|rdn| rdn.iter().any(|(a, _)| *a == desc.attr))
    };
    // Each change is compared with those before it, and looked for among
    // the record's attributes: a handful, not a client's thousands.
    if described.len() > MOST_CHANGES {
        return None;
    }
    for (i, (desc, change)) in described.iter().enumerate() {
        if change.op != ModOp::Replace || names_the_entry(desc) {
            return None;
        }
        if described.get(..i)?.iter().any(|(d, _)| d == desc) {
            return None;
        }
        schema.attr(desc.attr)?;
    }

    let table = ctx.names.table();
    // Room for the attributes of most entries: a list grown from empty
    // was reallocated three or four times per modify.
    let mut slots = Vec::with_capacity(32);
    let stored_dn = codec::locate(bytes, |raw| {
        let desc = table.get(raw.number)?.desc.as_ref()?;
        slots.push(Slot {
            raw,
            desc,
            replaced: false,
        });
        Some(())
    })?;
    if stored_dn != dn.original().as_bytes() {
        return None;
    }
    // As the entry path's replace does: the first attribute of the
    // description goes, and the new values, if any, come last.
    for (desc, _) in described {
        if let Some(slot) = slots.iter_mut().find(|s| !s.replaced && s.desc == desc) {
            slot.replaced = true;
        }
    }
    let kept = || slots.iter().filter(|s| !s.replaced);
    let added = || described.iter().filter(|(_, c)| !c.values.is_empty());

    // The values the entry path checks: those of the types the client
    // changed. Other values of such a type (another description of it)
    // would be checked there again, as stored: left to it.
    let client = described.get(..client)?;
    for (desc, change) in client.iter().filter(|(_, c)| !c.values.is_empty()) {
        let at = schema.attr(desc.attr)?;
        check_values(at, change.values, WrittenBy::Server, schema).ok()?;
    }
    // The types of the new entry, and its object classes: the first
    // `objectClass` without options, as `Entry::get` finds it.
    let mut present = AttrSet::new();
    let mut classes = None;
    for slot in kept() {
        let attr = slot.desc.attr;
        if client.iter().any(|(d, _)| d.attr == attr) {
            return None;
        }
        present.insert(attr);
        if classes.is_none() && attr == object_class && slot.desc.options.is_empty() {
            classes = Some(slot.raw.values(bytes));
        }
    }
    for (desc, _) in added() {
        present.insert(desc.attr);
    }
    let mut known = ctx.classes.borrow_mut();
    let rules = known.rules_of(classes?, schema).ok()?;
    let types = kept()
        .map(|s| s.desc.attr)
        .chain(added().map(|(d, _)| d.attr));
    rules.check_types(schema, &present, types).ok()?;
    // The RDN's values, unchanged, must still be there.
    for (attr, value) in rdn.into_iter().flat_map(|rdn| rdn.iter()) {
        let first = kept().find(|s| s.desc.attr == *attr && s.desc.options.is_empty())?;
        if !holds_value(first.raw.values(bytes), *attr, value, schema) {
            return None;
        }
    }

    let mut numbers = Vec::with_capacity(described.len());
    for (position, (desc, change)) in (kept().count()..).zip(added()) {
        // Numbered as the entry path numbers the attribute it builds.
        let attribute = Attribute {
            desc: desc.clone(),
            name: AttrName::new(change.attr, desc, schema),
            values: Values::new(),
        };
        numbers.push(ctx.names.known_number_of(position, &attribute, schema)?);
    }
    let record = codec::encode_spliced(
        bytes,
        stored_dn,
        kept().map(|s| s.raw),
        numbers
            .iter()
            .zip(added())
            .map(|(&n, (_, c))| (n, c.values)),
    );
    let index = index_change(ctx, bytes, &slots, described);
    Some(Spliced { record, index })
}

/// The index keys of the indexed types `described` changes, before and
/// after: the keys of other types stay as they are.
fn index_change(
    ctx: &Context<'_>,
    record: &[u8],
    slots: &[Slot<'_>],
    described: &[(Description, Change<'_>)],
) -> Option<IndexChange> {
    let (indexes, schema) = (ctx.indexes, ctx.schema);
    let mut changed = Vec::with_capacity(described.len());
    for (desc, _) in described {
        if indexes.get(desc.attr).is_some() && !changed.contains(&desc.attr) {
            changed.push(desc.attr);
        }
    }
    if changed.is_empty() {
        return None;
    }
    let mut prefix = Vec::with_capacity(crate::keys::MAX_KEY);
    let (mut old, mut new) = (BTreeSet::new(), BTreeSet::new());
    for &attr in &changed {
        for slot in slots.iter().filter(|s| s.desc.attr == attr) {
            let values = slot.raw.values(record);
            indexes.each_key_of(attr, values.clone(), schema, &mut prefix, |k| {
                keep(&mut old, k)
            });
            if !slot.replaced {
                indexes.each_key_of(attr, values, schema, &mut prefix, |k| keep(&mut new, k));
            }
        }
        for (_, change) in described.iter().filter(|(d, _)| d.attr == attr) {
            let values = change.values.iter().map(Vec::as_slice);
            indexes.each_key_of(attr, values, schema, &mut prefix, |k| keep(&mut new, k));
        }
    }
    Some(IndexChange { old, new })
}

/// Adds `key` to `set`, allocating only if it is new.
fn keep(set: &mut BTreeSet<Vec<u8>>, key: &[u8]) {
    if !set.contains(key) {
        set.insert(key.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use meridian_config::StorageConfig;
    use meridian_model::Schema;
    use meridian_model::entry::Entry;
    use meridian_model::modify::{ModOp, Modification};

    use crate::apply::modify::{IndexChange, all_changes, known_record, plan_changes};
    use crate::apply::test_support::*;
    use crate::{Command, Store};

    /// The person `uid=s1` the splice tests modify, with `more`.
    fn person(schema: &Schema, more: &[(&str, &str)]) -> Entry {
        let mut attrs = vec![
            ("objectClass", "inetOrgPerson"),
            ("uid", "s1"),
            ("cn", "S"),
            ("sn", "One"),
            ("description", "old"),
        ];
        attrs.extend_from_slice(more);
        entry(schema, &format!("uid=s1,{SUFFIX}"), &attrs)
    }

    /// A store holding `person` with every name the splice tests use,
    /// so that each has its number (the splice takes no name numbered in
    /// its own batch).
    fn open_for_splices(tag: &str) -> (Arc<Schema>, PathBuf, Store) {
        let (schema, dir, store) = open_with_suffix(tag, StorageConfig::default());
        let every_name = [
            ("description;lang-de", "Eins"),
            ("cn;lang-de", "Es"),
            ("mail", "s@example.com"),
            ("telephoneNumber", "+1 555 0100"),
            ("modifyTimestamp", "20261125000000Z"),
            ("modifiersName", "cn=admin"),
        ];
        store
            .execute_blocking(Command::Add {
                entry: person(&schema, &every_name),
                prechecked: false,
            })
            .unwrap();
        (schema, dir, store)
    }

    fn replace(attr: &str, values: &[&str]) -> Modification {
        Modification {
            op: ModOp::Replace,
            attr: attr.into(),
            values: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        }
    }

    #[test]
    fn a_splice_writes_the_record_and_index_keys_the_entry_path_would() {
        let (schema, dir, store) = open_for_splices("splice-same");
        let record = person(
            &schema,
            &[
                ("mail", "s@example.com"),
                ("mail", "one@example.com"),
                ("telephoneNumber", "+1 555 0100"),
            ],
        );
        let server: Vec<crate::command::OperationalAttribute> = vec![
            ("modifyTimestamp".into(), vec![b"20261125120000Z".to_vec()]),
            (
                "modifiersName".into(),
                vec![b"cn=admin,dc=example,dc=com".to_vec()],
            ),
        ];
        // Of an indexed type the entry keeps another description of:
        // only the server's changes are spliced so (the client's values
        // of such a type would be checked again by the entry path).
        let german: Vec<crate::command::OperationalAttribute> =
            vec![("cn;lang-de".into(), vec![b"Es".to_vec()])];
        // (the client's changes, the server's, whether index keys change)
        let cases = [
            (vec![replace("description", &["new"])], &[][..], false),
            (vec![replace("description", &["new"])], &server[..], false),
            (vec![replace("cn", &["S", "Ess"])], &[], true),
            (vec![replace("mail", &[])], &server, true),
            (
                vec![
                    replace("telephoneNumber", &[]),
                    replace("description", &["a", "b"]),
                ],
                &[],
                false,
            ),
            (
                vec![
                    replace("mail", &["new@example.com"]),
                    replace("description", &[]),
                ],
                &server,
                true,
            ),
            (vec![replace("cn", &["S"])], &[], false),
            (vec![], &german, true),
        ];
        in_writer_transaction(&store, |txn, ctx| {
            let bytes = ctx.encode(txn, &record).unwrap();
            for (changes, operational, keys_change) in &cases {
                let described = ctx.describe(all_changes(changes, operational)).unwrap();
                let n = changes.len();
                let spliced = super::splice(ctx, &bytes, &record.dn, &described, n)
                    .unwrap_or_else(|| panic!("{changes:?}: not spliced"));
                let plan = plan_changes(ctx, record.clone(), &described, n, false, &[]).unwrap();
                let entry_path = known_record(ctx, &plan.new).unwrap();
                assert_eq!(spliced.record, entry_path, "{changes:?}: record");
                let differences = |index: Option<IndexChange>| {
                    index.map_or((vec![], vec![]), |i| {
                        let gone: Vec<_> = i.old.difference(&i.new).cloned().collect();
                        let come: Vec<_> = i.new.difference(&i.old).cloned().collect();
                        (gone, come)
                    })
                };
                let spliced_keys = differences(spliced.index);
                assert_eq!(spliced_keys, differences(plan.index), "{changes:?}: keys");
                let changed = !spliced_keys.0.is_empty() || !spliced_keys.1.is_empty();
                assert_eq!(changed, *keys_change, "{changes:?}: keys changed");
            }
        });
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_splice_leaves_records_against_the_rules_to_the_entry_path() {
        // Records no writer stores (each store checks an entry's RDN and
        // values when it writes them), which a schema changed since
        // could make: the entry path refuses a modify of them, so the
        // splice must leave it to that path, not succeed.
        let (schema, dir, store) = open_for_splices("splice-rules");
        let changes = vec![replace("description", &["new"])];
        let set = |mut e: Entry, name: &str, value: &str| {
            for attr in e.attributes.iter_mut().filter(|a| a.name(&schema) == name) {
                attr.values = [value.as_bytes().to_vec()].into_iter().collect();
            }
            e
        };
        let cases = [
            ("valid", person(&schema, &[]), true),
            (
                "without its RDN's value",
                set(person(&schema, &[]), "uid", "other"),
                false,
            ),
            (
                "with an invalid value of the changed type",
                set(
                    person(&schema, &[("description;lang-de", "Eins")]),
                    "description;lang-de",
                    "",
                ),
                false,
            ),
        ];
        in_writer_transaction(&store, |txn, ctx| {
            let described = ctx.describe(all_changes(&changes, &[])).unwrap();
            for (what, record, valid) in cases {
                let bytes = ctx.encode(txn, &record).unwrap();
                let spliced = super::splice(ctx, &bytes, &record.dn, &described, 1);
                let planned = plan_changes(ctx, record, &described, 1, false, &[]);
                assert_eq!(spliced.is_some(), valid, "{what}: splice");
                assert_eq!(planned.is_ok(), valid, "{what}: entry path");
            }
        });
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }
}
