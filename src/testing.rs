//! Helpers shared by the unit tests.

/// Marsaglia's xorshift64, enough to spread test sizes and pixels without a crate.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// A value in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
