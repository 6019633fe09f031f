//! Shared by the tests: the skip rule and a small PRNG.
#![allow(dead_code)]

pub mod lockstep;

/// True (after printing "skipped: <reason>") when mainline's source is
/// absent.
pub fn skip_without_source() -> bool {
    match kernel_idpool::unavailable_reason() {
        Some(reason) => {
            println!("skipped: {reason}");
            true
        }
        None => {
            println!("{}", kernel_idpool::provenance());
            false
        }
    }
}

/// splitmix64: deterministic, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `0..n` as a usize (n > 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}
