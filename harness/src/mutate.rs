//! libFuzzer's mutation, and now and then a random tail after it.
//!
//! Every target but `trace_roundtrip` (a text format's round trip, which
//! has the tail too, unmeasured) reads its input as a sequence of steps.
//! From an empty corpus, libFuzzer grows inputs a few bytes per mutation,
//! and keeps only those that add coverage or a state: for a long while its
//! inputs are a handful of steps. A bug that needs three particular steps among many
//! (a manager, a transaction to it, one back) is then found more slowly
//! than by random programs of the target's `hunt_max_len` bytes.
//! [`mutate`] gives some of libFuzzer's mutations a random tail: the steps
//! of an input that reached something new, then fresh random steps.
//! libFuzzer stacks several mutations on an input before running it, so
//! more than one input run in four carries a tail, and tails pile up to
//! the length limit.
//!
//! Every target's libFuzzer glue (`registry::Engine::glue`) has, beside
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

/// One mutation in this many adds a random tail.
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
    if room == 0 {
        return size;
    }
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

    /// The buffer libFuzzer hands over: `max(size, max_size)` bytes.
    fn mutated(size: usize, max_size: usize, seed: u32) -> (usize, Vec<u8>) {
        let mut data = vec![7u8; size.max(max_size)];
        let new = mutate("binder_commands", &mut data, size, max_size, seed, keep);
        (new, data)
    }

    #[test]
    fn a_tail_follows_the_mutant_within_the_limits() {
        let hunt_max_len = targets::target("binder_commands").unwrap().hunt_max_len();
        let (mut tails, mut longest) = (0, 0);
        for seed in 0..400u32 {
            let (size, data) = mutated(10, 50, seed);
            assert!((10..=50).contains(&size), "seed {seed}: size {size}");
            assert!(data[..10].iter().all(|&b| b == 7), "the mutant is kept");
            assert!(
                data[size..].iter().all(|&b| b == 7),
                "nothing past the size"
            );
            if size > 10 {
                tails += 1;
                assert_eq!(seed % TAIL_ONE_IN, 0);
            }
            // Far from the limit, a tail is at most the target's hunt_max_len.
            let (size, _) = mutated(10, 4096, seed);
            assert!(size <= 10 + hunt_max_len, "seed {seed}: size {size}");
            longest = longest.max(size - 10);
            // At the limit, nothing is added.
            assert_eq!(mutated(64, 64, seed).0, 64);
        }
        assert_eq!(tails, 100);
        assert!(longest > hunt_max_len / 2, "the longest tail: {longest}");
    }
}
