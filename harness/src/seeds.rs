//! Deterministic inputs without a fuzzer: for the smoke test and for the
//! seed corpus.

use crate::events::Events;

/// `len` pseudo-random bytes from `seed` (xorshift64*): the same bytes on
/// every machine, with no RNG dependency.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// The input of seed `seed`: 64 to 352 bytes.
pub fn input(seed: u64) -> Vec<u8> {
    bytes(seed, 64 + (seed as usize % 7) * 48)
}

/// Which counters of `events` are nonzero: two inputs of the same shape
/// reach the same interesting paths.
pub fn shape(events: &Events) -> Vec<&'static str> {
    events
        .counts()
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(name, _)| name)
        .collect()
}
