//! Which index keys an entry has, given the configured indexes.
//!
//! The same functions produce the keys written for an entry and the keys
//! a filter looks up, from the model's matching-rule keys, so an index can
//! never disagree with filter evaluation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

use meridian_config::IndexKind;
use meridian_model::Schema;
use meridian_model::entry::Entry;
use meridian_model::prep::Part;
use meridian_model::rules::RuleInfo;
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
    /// The rules its kinds make keys with, found once: every indexed
    /// value of every write asks for them.
    rules: KeyRules,
}

/// The matching rules of an indexed type's kinds (`None` for a kind it
/// does not have) and whether it has a presence index.
#[derive(Debug, Clone, Copy)]
struct KeyRules {
    pres: bool,
    eq: Option<&'static RuleInfo>,
    ord: Option<&'static RuleInfo>,
    sub: Option<&'static RuleInfo>,
}

/// The `meta` key of the index record: one `kind OID` line (`eq
/// 0.9.2342.19200300.100.1.1`) for each configured index whose keys the
/// database holds for every entry, sorted.
pub(crate) const BUILT_KEY: &[u8] = b"indexes_built";

/// The configured indexes, resolved against the schema.
#[derive(Debug, Default)]
pub struct Indexes {
    specs: BTreeMap<AttrId, IndexSpec>,
    /// Configured indexes the database does not hold for every entry yet
    /// (added to the config since the database was indexed): writes keep
    /// their keys, searches do not use them, so a search never misses an
    /// entry for want of a key.
    unbuilt: RwLock<BTreeSet<(AttrId, IndexKind)>>,
    /// `unbuilt` is empty: what every search asks, without taking the
    /// lock (a shared counter written by every reader otherwise).
    all_built: AtomicBool,
}

/// An index kind as the config and the index record spell it.
fn kind_name(kind: IndexKind) -> &'static str {
    match kind {
        IndexKind::Eq => "eq",
        IndexKind::Pres => "pres",
        IndexKind::Sub => "sub",
        IndexKind::Ord => "ord",
    }
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
                    rules: KeyRules {
                        pres: kinds.contains(&IndexKind::Pres),
                        eq: at.equality.filter(|_| kinds.contains(&IndexKind::Eq)),
                        ord: at.ordering.filter(|_| kinds.contains(&IndexKind::Ord)),
                        sub: at.substr.filter(|_| kinds.contains(&IndexKind::Sub)),
                    },
                },
            );
        }
        Ok(Indexes {
            specs,
            unbuilt: RwLock::default(),
            all_built: AtomicBool::new(true),
        })
    }

    /// Every configured index: a type and a kind.
    fn pairs(&self) -> impl Iterator<Item = (&IndexSpec, IndexKind)> {
        self.specs
            .values()
            .flat_map(|spec| spec.kinds.iter().map(move |kind| (spec, *kind)))
    }

    fn unbuilt(&self) -> std::sync::RwLockReadGuard<'_, BTreeSet<(AttrId, IndexKind)>> {
        self.unbuilt.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The index record of the configured indexes; with `built_only`,
    /// of those built.
    pub(crate) fn record(&self, built_only: bool) -> Vec<u8> {
        let unbuilt = self.unbuilt();
        let mut lines: Vec<String> = self
            .pairs()
            .filter(|(spec, kind)| !built_only || !unbuilt.contains(&(spec.attr, *kind)))
            .map(|(spec, kind)| format!("{} {}\n", kind_name(kind), spec.oid))
            .collect();
        lines.sort();
        lines.concat().into_bytes()
    }

    /// Learns which configured indexes are built from the record `found`
    /// in the database: those it lists. `None` (a new database, or one
    /// written before the record existed) takes every configured index as
    /// built, as a database kept by this configuration holds them.
    /// Returns the record the database should now hold: the configured
    /// indexes that are built (an index dropped from the config is no
    /// longer kept, so it is not built if it comes back).
    pub(crate) fn settle(&self, found: Option<&[u8]>) -> Vec<u8> {
        let found: Option<BTreeSet<&[u8]>> = found.map(|record| {
            record
                .split(|b| *b == b'\n')
                .filter(|line| !line.is_empty())
                .collect()
        });
        let unbuilt = self
            .pairs()
            .filter(|(spec, kind)| {
                let line = format!("{} {}", kind_name(*kind), spec.oid);
                found
                    .as_ref()
                    .is_some_and(|found| !found.contains(line.as_bytes()))
            })
            .map(|(spec, kind)| (spec.attr, kind))
            .collect();
        let mut slot = self.unbuilt.write().unwrap_or_else(PoisonError::into_inner);
        *slot = unbuilt;
        self.all_built.store(slot.is_empty(), Ordering::Release);
        drop(slot);
        self.record(true)
    }

    /// The configured indexes not built, as `type kind` for a message.
    pub(crate) fn unbuilt_names(&self, schema: &Schema) -> Vec<String> {
        self.unbuilt()
            .iter()
            .map(|(attr, kind)| {
                let name = schema.attr(*attr).map_or("?", |at| at.name());
                format!("{name} {}", kind_name(*kind))
            })
            .collect()
    }

    /// The OIDs of the types with a configured index not built.
    pub(crate) fn unbuilt_oids(&self) -> Vec<String> {
        let unbuilt = self.unbuilt();
        let mut oids: Vec<String> = unbuilt
            .iter()
            .filter_map(|(attr, _)| self.specs.get(attr).map(|spec| spec.oid.clone()))
            .collect();
        oids.dedup();
        oids
    }

    /// Every configured index is built from now on (after a committed
    /// rebuild).
    pub(crate) fn mark_all_built(&self) {
        let mut slot = self.unbuilt.write().unwrap_or_else(PoisonError::into_inner);
        slot.clear();
        self.all_built.store(true, Ordering::Release);
    }

    /// The spec of an attribute type, if indexed.
    pub fn get(&self, attr: AttrId) -> Option<&IndexSpec> {
        self.specs.get(&attr)
    }

    /// True if `attr` has a built index of `kind`: one a search may use.
    pub fn has(&self, attr: AttrId, kind: IndexKind) -> bool {
        self.get(attr).is_some_and(|s| s.kinds.contains(&kind))
            && (self.all_built.load(Ordering::Acquire) || !self.unbuilt().contains(&(attr, kind)))
    }

    /// The key prefix under which the equality index lists the entries
    /// whose `attr` has a value equal to `value`: `None` when `attr` has
    /// no built equality index, or `value` no key.
    pub(crate) fn eq_prefix_of(
        &self,
        attr: AttrId,
        value: &[u8],
        schema: &Schema,
    ) -> Option<Vec<u8>> {
        if !self.has(attr, IndexKind::Eq) {
            return None;
        }
        let spec = self.get(attr)?;
        let key = spec.rules.eq?.key_cow(value, schema)?;
        Some(keys::eq_prefix(&spec.oid, &key))
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

    /// The index key prefixes of `entry`'s attributes of the types
    /// `types` only (a modify's keys change only there).
    pub(crate) fn keys_of_types(
        &self,
        entry: &Entry,
        types: &[AttrId],
        schema: &Schema,
    ) -> BTreeSet<Vec<u8>> {
        let mut out = BTreeSet::new();
        let mut prefix = Vec::with_capacity(keys::MAX_KEY);
        for attr in entry
            .attributes
            .iter()
            .filter(|a| types.contains(&a.desc.attr))
        {
            let values = attr.values.iter().map(Vec::as_slice);
            self.each_key_of(attr.desc.attr, values, schema, &mut prefix, |k| {
                if !out.contains(k) {
                    out.insert(k.to_vec());
                }
            });
        }
        out
    }

    /// The index key prefixes of `values` of type `attr`.
    pub(crate) fn keys_of_values<'v>(
        &self,
        attr: AttrId,
        values: impl Iterator<Item = &'v [u8]>,
        schema: &Schema,
        out: &mut BTreeSet<Vec<u8>>,
    ) {
        let mut prefix = Vec::with_capacity(keys::MAX_KEY);
        self.each_key_of(attr, values, schema, &mut prefix, |k| {
            if !out.contains(k) {
                out.insert(k.to_vec());
            }
        });
    }

    /// Whether `attr`'s only index is equality: each value then has its
    /// own key, which no other value of the attribute shares.
    pub(crate) fn only_equality(&self, attr: AttrId) -> bool {
        self.get(attr)
            .is_some_and(|spec| spec.kinds.len() == 1 && spec.kinds.contains(&IndexKind::Eq))
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
        let rules = spec.rules;
        if rules.pres {
            keys::pres_prefix_into(prefix, &spec.oid);
            f(prefix);
        }
        for value in values {
            if let Some(rule) = rules.eq {
                // Borrowed when the value is its own key (the usual
                // string): no copy of it per indexed value.
                if let Some(k) = rule.key_cow(value, schema) {
                    keys::eq_prefix_into(prefix, &spec.oid, &k);
                    f(prefix);
                }
            }
            if let Some(rule) = rules.ord
                && let Some(k) = rule.key_cow(value, schema)
            {
                keys::ord_prefix_into(prefix, &spec.oid, &rule.sortable_key(&k));
                f(prefix);
            }
            if let Some(rule) = rules.sub {
                let parts = rule.substring_parts(&[(Part::Whole, value)], schema);
                for (_, part) in parts.iter().flatten() {
                    if part.len() > DISTINCT_GRAMS_ABOVE {
                        for_each_distinct_gram(part, |gram| {
                            keys::sub_prefix_into(prefix, &spec.oid, gram);
                            f(prefix);
                        });
                        continue;
                    }
                    for gram in part.windows(GRAM) {
                        keys::sub_prefix_into(prefix, &spec.oid, gram);
                        f(prefix);
                    }
                }
            }
        }
    }
}

/// Values longer than this give each trigram once: a value of 30 MiB
/// gave 30 million keys, most of them repeats, and the writer held them
/// all (2 GB for one add; issue 44). Shorter ones, nearly every value,
/// keep the plain walk, whose repeats the index's puts absorb.
const DISTINCT_GRAMS_ABOVE: usize = 4096;

/// Calls `f` once with each distinct trigram of `part`, in the order of
/// their first appearance; a bit per possible trigram (2 MiB) notes the
/// ones given.
fn for_each_distinct_gram(part: &[u8], mut f: impl FnMut(&[u8])) {
    let mut seen = vec![0u64; (1 << (8 * GRAM)) / 64];
    for gram in part.windows(GRAM) {
        let n = gram.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b));
        let (word, bit) = (n / 64, 1u64 << (n % 64));
        if let Some(w) = seen.get_mut(word)
            && *w & bit == 0
        {
            *w |= bit;
            f(gram);
        }
    }
}

/// Overlapping byte trigrams.
pub fn grams(prepared: &[u8]) -> BTreeSet<Vec<u8>> {
    prepared.windows(GRAM).map(<[u8]>::to_vec).collect()
}

#[cfg(test)]
mod distinct_tests {
    use super::*;

    #[test]
    fn a_long_value_gives_each_trigram_once_and_all_of_them() {
        let value: Vec<u8> = (0..20_000u32)
            .map(|i| b"abcdefgh"[(i * 7 % 13 % 8) as usize])
            .collect();
        let mut given = Vec::new();
        for_each_distinct_gram(&value, |g| given.push(g.to_vec()));
        let distinct: BTreeSet<Vec<u8>> = given.iter().cloned().collect();
        assert_eq!(given.len(), distinct.len(), "each once");
        assert_eq!(distinct, grams(&value), "all of them");
    }
}
