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

use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use meridian_model::dn::Dn;
use rustc_hash::FxHasher;

use crate::keys::EntryId;

/// Entry IDs by a digest of the normalised DN: the writer's guesses.
/// A digest, not the DN: 16 bytes a DN, and a guess costs one cache
/// miss in the table where a stored DN was a second one. Two DNs with
/// one digest only take each other's slot, since every guess is
/// checked: a collision costs a `dn2id` search, never a wrong entry.
#[derive(Debug, Default)]
pub(crate) struct DnIds {
    table: GuessTable,
}

impl DnIds {
    /// Remembers about `limit` DNs (`storage.dn_cache_entries`; 0
    /// remembers none).
    pub(crate) fn new(limit: usize) -> DnIds {
        DnIds {
            table: GuessTable::new(limit),
        }
    }

    /// The ID last seen for `dn`, if any: a guess to check.
    pub(crate) fn guess(&self, dn: &Dn) -> Option<EntryId> {
        self.table.guess(digest(dn))
    }

    /// Remembers `id` for `dn` (when its bucket is full, in place of
    /// another DN: the memory stays bounded).
    pub(crate) fn remember(&mut self, dn: &Dn, id: EntryId) {
        self.table.remember(digest(dn), id);
    }

    /// Forgets every guess (the database was replaced).
    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }

    /// Forgets a guess that proved wrong.
    pub(crate) fn forget(&mut self, dn: &Dn) {
        self.table.forget(digest(dn));
    }
}

/// The readers' guesses: searches on every worker look DNs up at once,
/// without a lock ([`GuessTable`]). Keyed by the DN as the request
/// spells it, not its normalised form: only spellings that match the
/// stored DN are remembered (no other could pass the check), and a
/// client that spells a DN otherwise must not evict the guess of one
/// that spells it as stored.
#[derive(Debug)]
pub(crate) struct SharedDnIds {
    table: GuessTable,
}

impl SharedDnIds {
    /// Remembers about `limit` DNs (`storage.dn_cache_entries`).
    pub(crate) fn new(limit: usize) -> SharedDnIds {
        SharedDnIds {
            table: GuessTable::new(limit),
        }
    }

    /// The key of `dn` in this table: the digest of its spelling, taken
    /// once per lookup.
    pub(crate) fn key(dn: &Dn) -> u64 {
        digest_of(dn.original().as_bytes())
    }

    /// The ID last seen for `key`, if any: a guess to check.
    pub(crate) fn guess(&self, key: u64) -> Option<EntryId> {
        self.table.guess(key)
    }

    /// Remembers `id` for `key`.
    pub(crate) fn remember(&self, key: u64, id: EntryId) {
        self.table.remember(key, id);
    }

    /// Forgets a guess that proved wrong.
    pub(crate) fn forget(&self, key: u64) {
        self.table.forget(key);
    }
}

/// Slots per bucket: four of 16 bytes fill one 64-byte cache line.
const WAYS: usize = 4;

/// One slot: a digest (0: empty) and the ID last seen for it.
#[derive(Debug)]
struct Slot {
    key: AtomicU64,
    id: AtomicU64,
}

/// The slots a digest may occupy, on one cache line: a lookup costs one
/// miss, where a general hash map's control bytes and slots were two
/// (a tenth of the server's samples under pipelined base searches of a
/// million entries, perf).
#[derive(Debug)]
#[repr(align(64))]
struct Bucket {
    slots: [Slot; WAYS],
}

/// Digests to IDs in a table of fixed size, read and written by any
/// thread without a lock. Its contents are guesses that every reader
/// checks against the record itself, so nothing here needs to be
/// consistent: a lookup racing a write may find a slot's new digest
/// with its old ID, which costs a failed check and a `dn2id` search,
/// never a wrong answer. Relaxed atomics are enough for that, and keep
/// the table free of data races.
#[derive(Debug, Default)]
struct GuessTable {
    /// A power of two of them; none when nothing is to be remembered.
    buckets: Box<[Bucket]>,
}

impl GuessTable {
    /// Room for `limit` digests at half load: buckets overflow rarely,
    /// and an overflow replaces one guess by another. The memory is that
    /// of a general hash map at the same count (32 bytes a DN), taken
    /// from the system zeroed, so pages never written cost nothing.
    fn new(limit: usize) -> GuessTable {
        if limit == 0 {
            return GuessTable::default();
        }
        let buckets = limit.saturating_mul(2).div_ceil(WAYS).next_power_of_two();
        let zeroed = Box::<[Bucket]>::new_zeroed_slice(buckets);
        // SAFETY: a bucket is atomics only, and an atomic integer of zero
        // bytes is the integer 0: every byte pattern of zeros is a valid,
        // empty bucket.
        #[allow(unsafe_code)]
        let buckets = unsafe { zeroed.assume_init() };
        GuessTable { buckets }
    }

    /// The bucket of `key`. Digests are mixed to the last bit, so the low
    /// bits index as well as any.
    fn bucket(&self, key: u64) -> Option<&Bucket> {
        let mask = self.buckets.len().checked_sub(1)?;
        self.buckets.get(key as usize & mask)
    }

    fn guess(&self, key: u64) -> Option<EntryId> {
        let key = stored(key);
        let bucket = self.bucket(key)?;
        bucket
            .slots
            .iter()
            .find(|slot| slot.key.load(Ordering::Relaxed) == key)
            .map(|slot| slot.id.load(Ordering::Relaxed))
    }

    /// Remembers `id` for `key`: in its slot if it has one, else in an
    /// empty slot, else in place of the slot its top bits choose.
    fn remember(&self, key: u64, id: EntryId) {
        let key = stored(key);
        let Some(bucket) = self.bucket(key) else {
            return;
        };
        let slots = &bucket.slots;
        let slot = slots
            .iter()
            .find(|slot| slot.key.load(Ordering::Relaxed) == key)
            .or_else(|| slots.iter().find(|s| s.key.load(Ordering::Relaxed) == 0))
            .or_else(|| slots.get((key >> 62) as usize % WAYS));
        if let Some(slot) = slot {
            slot.key.store(key, Ordering::Relaxed);
            slot.id.store(id, Ordering::Relaxed);
        }
    }

    fn forget(&self, key: u64) {
        let key = stored(key);
        if let Some(bucket) = self.bucket(key) {
            for slot in &bucket.slots {
                // Only this digest's slot: another thread may have put a
                // different one there since the failed guess.
                let _ = slot
                    .key
                    .compare_exchange(key, 0, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
    }

    fn clear(&mut self) {
        for slot in self.buckets.iter().flat_map(|b| &b.slots) {
            slot.key.store(0, Ordering::Relaxed);
        }
    }
}

/// A digest as stored: never 0, which marks an empty slot.
fn stored(key: u64) -> u64 {
    key.max(1)
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
    fn remembers_updates_and_forgets_by_normalised_dn() {
        let schema = Schema::builtin().unwrap();
        let dn = |text: &str| Dn::parse(text.as_bytes(), &schema).unwrap();
        let mut ids = DnIds::new(16);
        ids.remember(&dn("uid=a,dc=example,dc=com"), 1);
        ids.remember(&dn("UID=B,dc=example,dc=com"), 2);
        // By normalised DN: another spelling finds it.
        assert_eq!(ids.guess(&dn("uid=A,DC=Example,dc=com")), Some(1));
        assert_eq!(ids.guess(&dn("uid=b,dc=example,dc=com")), Some(2));
        assert_eq!(ids.guess(&dn("uid=c,dc=example,dc=com")), None);
        ids.remember(&dn("uid=a,dc=example,dc=com"), 7);
        assert_eq!(ids.guess(&dn("uid=a,dc=example,dc=com")), Some(7));
        ids.forget(&dn("uid=a,dc=example,dc=com"));
        assert_eq!(ids.guess(&dn("uid=a,dc=example,dc=com")), None);
        assert_eq!(ids.guess(&dn("uid=b,dc=example,dc=com")), Some(2));
        ids.clear();
        assert_eq!(ids.guess(&dn("uid=b,dc=example,dc=com")), None);
        let mut none = DnIds::new(0);
        none.remember(&dn("uid=a,dc=example,dc=com"), 1);
        assert_eq!(none.guess(&dn("uid=a,dc=example,dc=com")), None);
    }

    #[test]
    fn a_full_bucket_replaces_a_guess_and_the_table_never_grows() {
        let table = GuessTable::new(8);
        let buckets = table.buckets.len();
        assert_eq!(buckets, 4, "room for twice the limit, four to a bucket");
        // Keys of one bucket (same low bits), more than it has slots.
        let keys: Vec<u64> = (1..=10u64).map(|i| i << 40).collect();
        for (id, key) in keys.iter().enumerate() {
            table.remember(*key, id as u64 + 100);
            // The newest is always there, with its own ID.
            assert_eq!(table.guess(*key), Some(id as u64 + 100));
        }
        let held = keys.iter().filter(|k| table.guess(**k).is_some()).count();
        assert_eq!(
            held, WAYS,
            "the bucket holds four, the others were replaced"
        );
        assert_eq!(table.buckets.len(), buckets);
        // A digest of 0 is stored as 1 and found again; forgetting a key
        // that is not there leaves the others alone.
        table.remember(0, 5);
        assert_eq!(table.guess(0), Some(5));
        let before: Vec<_> = keys.iter().map(|k| table.guess(*k)).collect();
        table.forget(3 << 50);
        let after: Vec<_> = keys.iter().map(|k| table.guess(*k)).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn threads_share_the_readers_table() {
        let shared = SharedDnIds::new(10_000);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let shared = &shared;
                scope.spawn(move || {
                    for i in 0..2_000u64 {
                        let key = digest_of(&(thread * 1_000_000 + i).to_be_bytes());
                        shared.remember(key, thread * 1_000_000 + i);
                    }
                });
            }
        });
        // Under half load almost every key keeps its slot; each found ID
        // is the one remembered for that key.
        let mut found = 0;
        for thread in 0..4u64 {
            for i in 0..2_000u64 {
                let key = digest_of(&(thread * 1_000_000 + i).to_be_bytes());
                if let Some(id) = shared.guess(key) {
                    assert_eq!(id, thread * 1_000_000 + i);
                    found += 1;
                }
            }
        }
        assert!(found > 7_900, "{found} of 8000 remembered");
    }
}
