//! Helpers shared by the parser tests.

/// A small deterministic generator for damaging files (no dependency needed for this).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next 31 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}
