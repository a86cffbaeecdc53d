//! Consistency checking: every entry has its DN, parent link and index
//! keys, and every key points at an entry that produces it. The core of
//! `meridian check`, and what the crash test runs after every kill.

use std::collections::BTreeSet;

use crate::apply::ROOT_ID;
use crate::keys::{self, EntryId};
use crate::read::Snapshot;
use crate::{StoreError, codec};

impl Snapshot<'_> {
    /// Scans the whole store; returns one line per inconsistency (empty
    /// when consistent).
    pub fn check(&self) -> Result<Vec<String>, StoreError> {
        let (txn, inner) = self.parts();
        let dbs = &inner.dbs;
        let schema = &inner.schema;
        let names = self.resolver();
        let mut problems = Vec::new();
        let mut expected_index: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut ids: BTreeSet<EntryId> = BTreeSet::new();
        for item in dbs.id2entry.iter(txn)? {
            let (key, value) = item?;
            let Some(id) = keys::id_from(key) else {
                problems.push(format!("id2entry: malformed key {key:02x?}"));
                continue;
            };
            ids.insert(id);
            let entry = match codec::decode(value, &names) {
                Ok(e) => e,
                Err(e) => {
                    problems.push(format!("entry {id}: cannot decode: {e}"));
                    continue;
                }
            };
            let dn_key = keys::dn_key(&entry.dn);
            match dbs.dn2id.get(txn, &dn_key)?.and_then(keys::id_from) {
                Some(found) if found == id => {}
                Some(other) => problems.push(format!(
                    "entry {id} ({}): dn2id points at {other}",
                    entry.dn.original()
                )),
                None => problems.push(format!(
                    "entry {id} ({}): missing from dn2id",
                    entry.dn.original()
                )),
            }
            let is_suffix = inner.suffixes.iter().any(|s| s.same_entry(&entry.dn));
            let parent = match entry.dn.parent() {
                _ if is_suffix => Some(ROOT_ID),
                Some(p) if !p.is_root() => dbs
                    .dn2id
                    .get(txn, &keys::dn_key(&p))?
                    .and_then(keys::id_from),
                _ => Some(ROOT_ID),
            };
            match parent {
                Some(pid) => {
                    if dbs.children.get(txn, &keys::child_key(pid, id))?.is_none() {
                        problems.push(format!(
                            "entry {id} ({}): missing from its parent's children",
                            entry.dn.original()
                        ));
                    }
                }
                None => problems.push(format!(
                    "entry {id} ({}): parent does not exist",
                    entry.dn.original()
                )),
            }
            for prefix in inner.indexes.entry_keys(&entry, schema) {
                let key = keys::with_id(prefix, id);
                if dbs.index.get(txn, &key)?.is_none() {
                    problems.push(format!(
                        "entry {id} ({}): index key {key:02x?} missing",
                        entry.dn.original()
                    ));
                }
                expected_index.insert(key);
            }
        }
        for item in dbs.dn2id.iter(txn)? {
            let (key, value) = item?;
            if !keys::id_from(value).is_some_and(|id| ids.contains(&id)) {
                problems.push(format!(
                    "dn2id {:?}: points at no entry",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        for item in dbs.children.iter(txn)? {
            let (key, _) = item?;
            let parent = key.get(..8).and_then(keys::id_from);
            let child = key.get(8..).and_then(keys::id_from);
            let ok = matches!((parent, child), (Some(p), Some(c)) if (p == ROOT_ID || ids.contains(&p)) && ids.contains(&c));
            if !ok {
                problems.push(format!("children {key:02x?}: dangling link"));
            }
        }
        for item in dbs.index.iter(txn)? {
            let (key, _) = item?;
            if !expected_index.contains(key) {
                problems.push(format!("index key {key:02x?}: no entry produces it"));
            }
        }
        Ok(problems)
    }
}
