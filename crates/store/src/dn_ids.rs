//! The entry IDs of DNs modified or read before, kept in memory.
//!
//! A modify looks its DN up in `dn2id` before it reads the record: a
//! second B-tree descent beside the one into `id2entry`, about a sixth of
//! the writer's time under a stream of modifies at the server (perf),
//! mostly cache misses on pages no other work touches. A base search or
//! a read by DN does the same: the two descents were a third of the
//! server's CPU under pipelined base searches of a million entries. So
//! the writer ([`DnIds`]) and the readers ([`SharedDnIds`]) remember each
//! DN's ID.
//!
//! A remembered ID is a guess, never trusted: the record at that ID is
//! read anyway, and used only if it carries exactly the DN text asked
//! for (`codec::stored_dn`). Entries are unique by DN, so such a record
//! is the entry in that transaction; any other case (the entry deleted
//! or renamed since, an ID given again after a batch that failed, a DN
//! spelled otherwise than stored) falls back to `dn2id`. Nothing has to
//! be told when names change, so no command can leave a wrong guess
//! that is acted on.

use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::{Mutex, MutexGuard, PoisonError};

use meridian_model::dn::Dn;
use rustc_hash::{FxBuildHasher, FxHasher};

use crate::keys::EntryId;

/// Entry IDs by a digest of the normalised DN, at most `limit` of them.
/// A digest, not the DN: 16 bytes a DN, and a guess costs one cache
/// miss in the table where a stored DN was a second one. Two DNs with
/// one digest only take each other's slot, since every guess is
/// checked: a collision costs a `dn2id` search, never a wrong entry.
#[derive(Debug, Default)]
pub(crate) struct DnIds {
    ids: HashMap<u64, EntryId, FxBuildHasher>,
    limit: usize,
}

impl DnIds {
    /// Remembers at most `limit` DNs (`storage.dn_cache_entries`; 0
    /// remembers none).
    pub(crate) fn new(limit: usize) -> DnIds {
        DnIds {
            ids: HashMap::default(),
            limit,
        }
    }

    /// The ID last seen for `dn`, if any: a guess to check.
    pub(crate) fn guess(&self, dn: &Dn) -> Option<EntryId> {
        self.ids.get(&digest(dn)).copied()
    }

    /// Remembers `id` for `dn`. When full, DNs not yet remembered are
    /// not: those already there keep serving, and the memory stays
    /// bounded.
    pub(crate) fn remember(&mut self, dn: &Dn, id: EntryId) {
        self.remember_key(digest(dn), id);
    }

    fn remember_key(&mut self, key: u64, id: EntryId) {
        if let Some(known) = self.ids.get_mut(&key) {
            *known = id;
        } else if self.ids.len() < self.limit {
            self.ids.insert(key, id);
        }
    }

    /// Forgets every guess (the database was replaced).
    pub(crate) fn clear(&mut self) {
        self.ids.clear();
    }

    /// Forgets a guess that proved wrong.
    pub(crate) fn forget(&mut self, dn: &Dn) {
        self.ids.remove(&digest(dn));
    }
}

/// Shards of the readers' table: searches on every worker look DNs up
/// at once, and a shard's lock is held for one hash probe.
const SHARDS: usize = 16;

/// [`DnIds`] for readers: split by digest into shards, each behind its
/// own lock, each holding its share of the limit. Keyed by the DN as the
/// request spells it, not its normalised form: only spellings that match
/// the stored DN are remembered (no other could pass the check), and a
/// client that spells a DN otherwise must not evict the guess of one that
/// spells it as stored.
#[derive(Debug)]
pub(crate) struct SharedDnIds {
    shards: [Mutex<DnIds>; SHARDS],
}

impl SharedDnIds {
    /// Remembers at most about `limit` DNs (`storage.dn_cache_entries`).
    pub(crate) fn new(limit: usize) -> SharedDnIds {
        let each = limit.div_ceil(SHARDS);
        SharedDnIds {
            shards: std::array::from_fn(|_| Mutex::new(DnIds::new(each))),
        }
    }

    #[allow(clippy::indexing_slicing)] // `% SHARDS`: always in bounds
    fn shard(&self, key: u64) -> MutexGuard<'_, DnIds> {
        // The top bits: the maps inside hash the key's low ones.
        let index = (key >> 60) as usize % SHARDS;
        // A guess table is consistent after every statement: a panic
        // elsewhere cannot leave it half-updated.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The key of `dn` in this table: the digest of its spelling, taken
    /// once per lookup.
    pub(crate) fn key(dn: &Dn) -> u64 {
        digest_of(dn.original().as_bytes())
    }

    /// The ID last seen for `key`, if any: a guess to check.
    pub(crate) fn guess(&self, key: u64) -> Option<EntryId> {
        self.shard(key).ids.get(&key).copied()
    }

    /// Remembers `id` for `key` (when full, as [`DnIds::remember`]).
    pub(crate) fn remember(&self, key: u64, id: EntryId) {
        self.shard(key).remember_key(key, id);
    }

    /// Forgets a guess that proved wrong.
    pub(crate) fn forget(&self, key: u64) {
        self.shard(key).ids.remove(&key);
    }
}

/// The writer's key for `dn`: the digest of its normalised form.
fn digest(dn: &Dn) -> u64 {
    digest_of(dn.normalized().as_bytes())
}

/// FxHash of `bytes` (fast, but not every bit of it depends on every
/// byte), finished with MurmurHash3's 64-bit mixer.
fn digest_of(bytes: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(bytes);
    let mut x = hasher.finish();
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[cfg(test)]
mod tests {
    use meridian_model::Schema;

    use super::*;

    #[test]
    fn remembers_up_to_its_limit_and_updates_what_it_holds() {
        let schema = Schema::builtin().unwrap();
        let dn = |text: &str| Dn::parse(text.as_bytes(), &schema).unwrap();
        let mut ids = DnIds::new(2);
        ids.remember(&dn("uid=a,dc=example,dc=com"), 1);
        ids.remember(&dn("UID=B,dc=example,dc=com"), 2);
        ids.remember(&dn("uid=c,dc=example,dc=com"), 3);
        // By normalised DN: another spelling finds it.
        assert_eq!(ids.guess(&dn("uid=A,DC=Example,dc=com")), Some(1));
        assert_eq!(ids.guess(&dn("uid=b,dc=example,dc=com")), Some(2));
        assert_eq!(ids.guess(&dn("uid=c,dc=example,dc=com")), None, "full");
        ids.remember(&dn("uid=a,dc=example,dc=com"), 7);
        assert_eq!(ids.guess(&dn("uid=a,dc=example,dc=com")), Some(7));
        ids.forget(&dn("uid=a,dc=example,dc=com"));
        assert_eq!(ids.guess(&dn("uid=a,dc=example,dc=com")), None);
        ids.remember(&dn("uid=c,dc=example,dc=com"), 3);
        assert_eq!(ids.guess(&dn("uid=c,dc=example,dc=com")), Some(3));
        let mut none = DnIds::new(0);
        none.remember(&dn("uid=a,dc=example,dc=com"), 1);
        assert_eq!(none.guess(&dn("uid=a,dc=example,dc=com")), None);
    }
}
