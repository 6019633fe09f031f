//! The shim's bitmap functions and allocator (ours, so they can be wrong
//! too) against naive bit-by-bit versions and against their contract: on
//! random words, every size up to four words and many offsets.

mod common;

use common::Rng;
use kernel_idpool::alloc::{faults, flags};
use kernel_idpool::bindings::{checked, live_allocs};

const BITS: usize = usize::BITS as usize;

fn bit(words: &[usize], b: usize) -> bool {
    (words[b / BITS] >> (b % BITS)) & 1 == 1
}

fn naive_next(words: &[usize], size: usize, offset: usize, set: bool) -> usize {
    (offset..size)
        .find(|&b| bit(words, b) == set)
        .unwrap_or(size)
}

fn naive_last(words: &[usize], size: usize) -> usize {
    (0..size).rev().find(|&b| bit(words, b)).unwrap_or(size)
}

/// Words that are mostly full, mostly empty, or random, so the searches
/// find something at every distance.
fn random_words(rng: &mut Rng, n: usize) -> Vec<usize> {
    (0..n)
        .map(|_| match rng.below(4) {
            0 => !0,
            1 => 0,
            2 => !(1 << rng.below(64)),
            _ => rng.next() as usize,
        })
        .collect()
}

#[test]
fn searches_match_naive() {
    let mut rng = Rng(1);
    for _ in 0..300 {
        let words = random_words(&mut rng, 4);
        for size in 0..=4 * BITS {
            assert_eq!(
                checked::find_last_bit(&words, size),
                naive_last(&words, size),
                "_find_last_bit({words:x?}, {size})"
            );
            for offset in (0..size + 3).step_by(1 + rng.index(7)) {
                assert_eq!(
                    checked::find_next_zero_bit(&words, size, offset),
                    naive_next(&words, size, offset, false),
                    "_find_next_zero_bit({words:x?}, {size}, {offset})"
                );
                assert_eq!(
                    checked::find_next_bit(&words, size, offset),
                    naive_next(&words, size, offset, true),
                    "_find_next_bit({words:x?}, {size}, {offset})"
                );
            }
        }
    }
}

/// An offset at or past the size answers the size without reading: the
/// kernel's `next_zero_bit(start >= len)` relies on it in non-hardened
/// builds. An empty slice proves nothing is read.
#[test]
fn searches_past_the_end_read_nothing() {
    assert_eq!(checked::find_next_zero_bit(&[], 0, 0), 0);
    assert_eq!(checked::find_next_bit(&[], 0, usize::MAX), 0);
    assert_eq!(checked::find_last_bit(&[], 0), 0);
    let words = [0usize; 2];
    assert_eq!(checked::find_next_zero_bit(&words, 100, 100), 100);
    assert_eq!(checked::find_next_zero_bit(&words, 100, usize::MAX), 100);
}

/// Bits at or above the size, in the last word, are never reported.
#[test]
fn padding_bits_are_ignored() {
    let words = [!0usize, !0 >> 4];
    // Bits 64..124 set, 124..128 clear: past size 100, the clear ones are
    // padding.
    assert_eq!(checked::find_next_zero_bit(&words, 100, 0), 100);
    let words = [0usize, 1 << 63];
    assert_eq!(
        checked::find_last_bit(&words, 127),
        127,
        "bit 127 is padding"
    );
    assert_eq!(checked::find_next_bit(&words, 127, 0), 127);
    assert_eq!(checked::find_last_bit(&words, 128), 127);
}

#[test]
fn copy_and_extend_matches_naive() {
    let mut rng = Rng(2);
    for _ in 0..200 {
        let from = random_words(&mut rng, 4);
        for size in 0..=4 * BITS {
            let count = rng.index(size + 1);
            let mut to = random_words(&mut rng, 4);
            let before = to.clone();
            checked::bitmap_copy_and_extend(&mut to, &from, count, size);
            for b in 0..4 * BITS {
                let expected = if b < count {
                    bit(&from, b)
                } else if b < size.div_ceil(BITS) * BITS {
                    false
                } else {
                    bit(&before, b) // words past `size` are left alone
                };
                assert_eq!(bit(&to, b), expected, "bit {b}, count {count}, size {size}");
            }
        }
    }
}

#[test]
fn bit_operations_touch_one_bit() {
    let mut rng = Rng(3);
    for _ in 0..200 {
        let mut words = random_words(&mut rng, 3);
        let nr = rng.index(3 * BITS);
        let before = words.clone();
        let (op, expected): (fn(&mut [usize], usize), bool) = match rng.below(4) {
            0 => (checked::set_bit, true),
            1 => (checked::clear_bit, false),
            2 => (checked::set_bit_atomic, true),
            _ => (checked::clear_bit_atomic, false),
        };
        op(&mut words, nr);
        for b in 0..3 * BITS {
            let want = if b == nr { expected } else { bit(&before, b) };
            assert_eq!(bit(&words, b), want, "bit {b} after an operation on {nr}");
        }
    }
}

#[test]
fn zalloc_is_zeroed_and_counted() {
    let live = live_allocs();
    for nbits in [0u32, 1, 63, 64, 65, 1000] {
        let words = checked::zalloc_words(nbits, flags::GFP_KERNEL).expect("no failure planned");
        assert_eq!(words.len(), (nbits as usize).div_ceil(BITS).max(1));
        assert!(words.iter().all(|&w| w == 0));
        assert_eq!(
            faults::last_request(),
            Some((nbits as usize, flags::GFP_KERNEL))
        );
    }
    assert_eq!(live_allocs(), live, "every block was freed");
}

#[test]
fn fault_plans_fail_the_planned_calls_in_order() {
    faults::clear();
    let calls = faults::calls();
    faults::plan(&[false, true]);
    faults::fail_next(1);
    assert_eq!(faults::pending(), 2);
    let results: Vec<bool> = (0..4)
        .map(|_| checked::zalloc_words(100, flags::GFP_NOWAIT).is_some())
        .collect();
    assert_eq!(results, [true, false, false, true]);
    assert_eq!(faults::calls(), calls + 4);
    assert_eq!(faults::pending(), 0);
}

#[test]
fn with_gfp_fails_the_first_allocation_only_and_never_lingers() {
    faults::clear();
    let ok = faults::with_gfp(idpool::Gfp::Fail, || {
        [
            checked::zalloc_words(100, flags::GFP_KERNEL).is_some(),
            checked::zalloc_words(100, flags::GFP_KERNEL).is_some(),
        ]
    });
    assert_eq!(ok, [false, true]);
    // Nothing allocated: the failure is dropped, not left for later.
    faults::with_gfp(idpool::Gfp::Fail, || ());
    assert_eq!(faults::pending(), 0);
    // Gfp::Kernel leaves the thread's plan in force.
    faults::fail_next(1);
    let ok = faults::with_gfp(idpool::Gfp::Kernel, || {
        checked::zalloc_words(100, flags::GFP_KERNEL).is_some()
    });
    assert!(!ok);
}

#[test]
fn fault_plans_are_per_thread() {
    faults::clear();
    faults::fail_next(1);
    let other = std::thread::spawn(|| checked::zalloc_words(100, flags::GFP_KERNEL).is_some())
        .join()
        .unwrap();
    assert!(other, "another thread's plan is empty");
    assert_eq!(faults::pending(), 1);
    faults::clear();
}

/// A double free is caught before memory is touched.
#[test]
#[should_panic(expected = "not a live bitmap_zalloc block")]
fn double_free_panics() {
    faults::clear();
    checked::free_twice();
}
