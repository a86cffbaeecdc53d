//! Binds verified recently, so a client that binds for every operation
//! (seed 002 connects, binds, searches and unbinds a thousand times) pays
//! the deliberately slow password hash once, not every time.
//!
//! What is kept is a keyed SHA-256 of the stored hash and the password
//! that matched it, under a random key made when the server starts and
//! never written anywhere; nothing about wrong passwords is kept. A bind
//! whose (stored hash, password) pair is in the cache succeeds without
//! running the hash. A wrong password is never in it, so it always costs
//! the full hash: the cache is no oracle and no shortcut for guessing.
//! Changing a password changes the stored hash, so the old pair no longer
//! matches anything. The trade-off, documented with the config key
//! (`directory.bind_cache_entries`, 0 turns it off): someone who can read
//! the server's memory could test guesses against these digests at
//! SHA-256 speed rather than Argon2 speed.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};

/// The verified (stored hash, password) pairs, as keyed digests.
#[derive(Debug)]
pub(crate) struct BindCache {
    key: [u8; 32],
    capacity: usize,
    verified: Mutex<HashSet<[u8; 32]>>,
}

impl BindCache {
    /// A cache of at most `capacity` pairs (0: none kept).
    pub(crate) fn new(capacity: usize) -> BindCache {
        let mut key = [0u8; 32];
        // Without randomness, keep nothing rather than use a known key.
        let capacity = if getrandom::fill(&mut key).is_ok() {
            capacity
        } else {
            0
        };
        BindCache {
            key,
            capacity,
            verified: Mutex::new(HashSet::new()),
        }
    }

    fn digest(&self, stored: &[u8], password: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.key);
        // Lengths first: no two pairs give the same input.
        h.update((stored.len() as u64).to_be_bytes());
        h.update(stored);
        h.update(password);
        h.finalize().into()
    }

    /// True if `password` was verified against `stored` before.
    pub(crate) fn holds(&self, stored: &[u8], password: &[u8]) -> bool {
        if self.capacity == 0 {
            return false;
        }
        let digest = self.digest(stored, password);
        self.verified
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&digest)
    }

    /// Records that `password` matched `stored`. A full cache starts
    /// over: the pairs in use come back at the cost of one hash each.
    pub(crate) fn record(&self, stored: &[u8], password: &[u8]) {
        if self.capacity == 0 {
            return;
        }
        let digest = self.digest(stored, password);
        let mut verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if verified.len() >= self.capacity {
            verified.clear();
        }
        verified.insert(digest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_verified_pair_is_held() {
        let cache = BindCache::new(2);
        assert!(!cache.holds(b"{ARGON2}a", b"pw"));
        cache.record(b"{ARGON2}a", b"pw");
        assert!(cache.holds(b"{ARGON2}a", b"pw"));
        // Another password, or the same password against a new hash (the
        // password was changed), is not.
        assert!(!cache.holds(b"{ARGON2}a", b"pw2"));
        assert!(!cache.holds(b"{ARGON2}b", b"pw"));
        // The split between hash and password is part of the digest.
        assert!(!cache.holds(b"{ARGON2}ap", b"w"));
    }

    #[test]
    fn a_full_cache_starts_over_and_zero_keeps_nothing() {
        let cache = BindCache::new(2);
        cache.record(b"h1", b"p");
        cache.record(b"h2", b"p");
        cache.record(b"h3", b"p");
        assert!(!cache.holds(b"h1", b"p"));
        assert!(cache.holds(b"h3", b"p"));
        let off = BindCache::new(0);
        off.record(b"h1", b"p");
        assert!(!off.holds(b"h1", b"p"));
    }

    #[test]
    fn each_server_has_its_own_key() {
        let (a, b) = (BindCache::new(1), BindCache::new(1));
        assert_ne!(a.digest(b"h", b"p"), b.digest(b"h", b"p"));
    }
}
