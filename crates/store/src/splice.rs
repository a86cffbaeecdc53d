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
//! (`apply::plan_changes`) answers: the same record, byte for byte, the
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
    AttrName, Attribute, Description, Values, Writer, check_values, holds_value,
};
use meridian_model::modify::{Change, ModOp};
use meridian_model::schema::AttrSet;

use crate::apply::{Context, IndexChange};
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
        check_values(at, change.values, Writer::Server, schema).ok()?;
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
