//! A deterministic random source for tests, so a failing seeded input
//! reproduces from its seed.

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits. (Not `Iterator::next`: it never ends, and
    /// its callers read it as a source, not a sequence.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
