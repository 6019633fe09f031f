//! libFuzzer's mutation, and now and then a random tail after it.
//!
//! Every target reads its input as a sequence of steps. From an empty
//! corpus, libFuzzer grows inputs a few bytes per mutation, and keeps only
//! those that add coverage or a state: for a long while its inputs are a
//! handful of steps. A bug that needs three particular steps among many
//! (a manager, a transaction to it, one back) is then found more slowly
//! than by random programs of the target's `hunt_max_len` bytes.
//! [`mutate`] gives some of libFuzzer's mutants a random tail: the steps
//! of an input that reached something new, then fresh random steps.
//!
//! A target opts in with [`crate::registry::Target::random_tail`]; its
//! libFuzzer glue (`registry::Engine::glue`) then has, beside
//! `fuzz_target!`:
//!
//! ```ignore
//! libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
//!     idpool_harness::mutate::mutate("binder_commands", data, size, max_size, seed, libfuzzer_sys::fuzzer_mutate)
//! });
//! ```
//!
//! AFL++ and honggfuzz do not call it.

use crate::targets;

/// One mutant in this many gets a random tail.
pub const TAIL_ONE_IN: u32 = 4;

/// Mutates `data[..size]` with `default` (libFuzzer's own mutation), then,
/// for one `seed` in [`TAIL_ONE_IN`], appends random bytes: between one
/// and the target's `hunt_max_len`, within `max_size`. Returns the new
/// size, as libFuzzer's custom mutator does.
///
/// # Panics
///
/// When no target is called `name`.
pub fn mutate(
    name: &str,
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    default: fn(&mut [u8], usize, usize) -> usize,
) -> usize {
    let size = default(data, size, max_size);
    if seed % TAIL_ONE_IN != 0 || size >= max_size {
        return size;
    }
    let target = targets::target(name)
        .unwrap_or_else(|| panic!("idpool_harness::mutate: no target {name:?}"));
    let room = (max_size - size).min(target.hunt_max_len());
    let tail = crate::seeds::bytes(u64::from(seed), room + 1);
    let len = 1 + usize::from(tail[0]) * room / 256;
    data[size..size + len].copy_from_slice(&tail[1..=len]);
    size + len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(_: &mut [u8], size: usize, _: usize) -> usize {
        size
    }

    #[test]
    fn a_tail_follows_the_mutant_within_the_limits() {
        let mut tails = 0;
        for seed in 0..400u32 {
            let mut data = vec![7u8; 100];
            let size = mutate("binder_commands", &mut data, 10, 50, seed, keep);
            assert!((10..=50).contains(&size), "seed {seed}: size {size}");
            assert!(data[..10].iter().all(|&b| b == 7), "the mutant is kept");
            if size > 10 {
                tails += 1;
                assert_eq!(seed % TAIL_ONE_IN, 0);
            }
            let mut data = vec![0u8; 64];
            assert_eq!(mutate("binder_commands", &mut data, 64, 64, seed, keep), 64);
        }
        assert_eq!(tails, 100);
    }
}
