//! A fast, non-cryptographic hasher for the schema's name indexes (the
//! multiply-rotate hash of rustc's FxHasher). Schema names come from
//! schema files and clients; a client can only make its own lookups
//! slower by choosing colliding names, and the indexes are small, so
//! SipHash's DoS resistance buys nothing here while it costs a visible
//! share of every DN parse and filter evaluation (measured with perf).

use std::hash::{BuildHasherDefault, Hasher};

/// The hasher.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            for (dst, src) in word.iter_mut().zip(rest) {
                *dst = *src;
            }
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` builder using [`FxHasher`].
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
