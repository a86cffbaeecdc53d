//! Which index keys an entry has, given the configured indexes.
//!
//! The same functions produce the keys written for an entry and the keys
//! a filter looks up, from the model's matching-rule keys, so an index can
//! never disagree with filter evaluation.

use std::collections::{BTreeMap, BTreeSet};

use meridian_config::IndexKind;
use meridian_model::Schema;
use meridian_model::entry::Entry;
use meridian_model::prep::Part;
use meridian_model::schema::AttrId;

use crate::keys;

/// Length of the substring index grams, in bytes of the prepared value.
pub const GRAM: usize = 3;

/// One indexed attribute type.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    /// The type.
    pub attr: AttrId,
    /// Its OID (index keys use OIDs, stable across schema names).
    pub oid: String,
    /// Its kinds.
    pub kinds: BTreeSet<IndexKind>,
}

/// The configured indexes, resolved against the schema.
#[derive(Debug, Clone, Default)]
pub struct Indexes {
    specs: BTreeMap<AttrId, IndexSpec>,
}

impl Indexes {
    /// Resolves `config` (attribute name → kinds); unknown attributes or
    /// kinds the attribute cannot support are errors naming them.
    pub fn new(
        config: &BTreeMap<String, Vec<IndexKind>>,
        schema: &Schema,
    ) -> Result<Indexes, String> {
        let mut specs = BTreeMap::new();
        for (name, kinds) in config {
            let attr = schema.attribute_id(name).ok_or_else(|| {
                format!("storage.indexes: attribute type {name:?} is not defined in the schema")
            })?;
            let at = schema.attr(attr).ok_or("dangling attribute")?;
            for kind in kinds {
                let rule = match kind {
                    IndexKind::Eq => Some(("equality", at.equality.is_some())),
                    IndexKind::Sub => Some(("substrings", at.substr.is_some())),
                    IndexKind::Ord => Some(("ordering", at.ordering.is_some())),
                    IndexKind::Pres => None,
                };
                if let Some((rule, false)) = rule {
                    return Err(format!(
                        "storage.indexes: {name} has no {rule} matching rule, so it cannot have a {:?} index",
                        format!("{kind:?}").to_lowercase()
                    ));
                }
            }
            specs.insert(
                attr,
                IndexSpec {
                    attr,
                    oid: at.oid.clone(),
                    kinds: kinds.iter().copied().collect(),
                },
            );
        }
        Ok(Indexes { specs })
    }

    /// The spec of an attribute type, if indexed.
    pub fn get(&self, attr: AttrId) -> Option<&IndexSpec> {
        self.specs.get(&attr)
    }

    /// True if `attr` has an index of `kind`.
    pub fn has(&self, attr: AttrId, kind: IndexKind) -> bool {
        self.get(attr).is_some_and(|s| s.kinds.contains(&kind))
    }

    /// All index key prefixes of `entry` (IDs not yet appended).
    pub fn entry_keys(&self, entry: &Entry, schema: &Schema) -> BTreeSet<Vec<u8>> {
        let mut out = BTreeSet::new();
        self.for_each_entry_key(entry, schema, |prefix| {
            if !out.contains(prefix) {
                out.insert(prefix.to_vec());
            }
        });
        out
    }

    /// Calls `f` with each index key prefix of `entry` (IDs not yet
    /// appended), some perhaps more than once (a gram repeated in a
    /// value), each built in one reused buffer. An add writes its keys
    /// straight from here: a set of them first cost the writer an
    /// allocation and a tree insertion per key, with about thirty keys
    /// an entry under the default substring indexes.
    pub fn for_each_entry_key(&self, entry: &Entry, schema: &Schema, mut f: impl FnMut(&[u8])) {
        // Every prefix fits: one allocation per entry, never a growth.
        let mut prefix = Vec::with_capacity(keys::MAX_KEY);
        for attr in &entry.attributes {
            let values = attr.values.iter().map(Vec::as_slice);
            self.each_key_of(attr.desc.attr, values, schema, &mut prefix, &mut f);
        }
    }

    /// Calls `f` with each index key prefix of one attribute's `values`,
    /// of type `attr` (none if it is not indexed), as
    /// [`Indexes::for_each_entry_key`] does for a whole entry; `prefix`
    /// is the buffer they are built in.
    pub(crate) fn each_key_of<'v>(
        &self,
        attr: AttrId,
        values: impl Iterator<Item = &'v [u8]>,
        schema: &Schema,
        prefix: &mut Vec<u8>,
        mut f: impl FnMut(&[u8]),
    ) {
        let Some(spec) = self.specs.get(&attr) else {
            return;
        };
        let Some(at) = schema.attr(spec.attr) else {
            return;
        };
        if spec.kinds.contains(&IndexKind::Pres) {
            keys::pres_prefix_into(prefix, &spec.oid);
            f(prefix);
        }
        for value in values {
            if let (true, Some(rule)) = (spec.kinds.contains(&IndexKind::Eq), at.equality) {
                // Borrowed when the value is its own key (the usual
                // string): no copy of it per indexed value.
                if let Some(k) = rule.key_cow(value, schema) {
                    keys::eq_prefix_into(prefix, &spec.oid, &k);
                    f(prefix);
                }
            }
            if let (true, Some(rule)) = (spec.kinds.contains(&IndexKind::Ord), at.ordering) {
                if let Some(k) = rule.key_cow(value, schema) {
                    keys::ord_prefix_into(prefix, &spec.oid, &rule.sortable_key(&k));
                    f(prefix);
                }
            }
            if let (true, Some(rule)) = (spec.kinds.contains(&IndexKind::Sub), at.substr) {
                let parts = rule.substring_parts(&[(Part::Whole, value)], schema);
                for (_, part) in parts.iter().flatten() {
                    for gram in part.windows(GRAM) {
                        keys::sub_prefix_into(prefix, &spec.oid, gram);
                        f(prefix);
                    }
                }
            }
        }
    }
}

/// Overlapping byte trigrams.
pub fn grams(prepared: &[u8]) -> BTreeSet<Vec<u8>> {
    prepared.windows(GRAM).map(<[u8]>::to_vec).collect()
}
