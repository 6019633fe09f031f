//! The shim's bitmap helpers (ours, so they can be wrong too) against naive
//! bit-by-bit implementations, on random words, every size up to four words
//! and every offset.

mod common;

use common::Rng;
use core::ffi::c_ulong;
use kernel_dbitmap::shim;
use kernel_dbitmap::{Gfp, BITS_PER_LONG};

fn bit(words: &[c_ulong], b: usize) -> bool {
    (words[b / BITS_PER_LONG] >> (b % BITS_PER_LONG)) & 1 == 1
}

fn naive_next_zero(words: &[c_ulong], size: usize, offset: usize) -> usize {
    (offset..size).find(|&b| !bit(words, b)).unwrap_or(size)
}

fn naive_last(words: &[c_ulong], size: usize) -> usize {
    (0..size).rev().find(|&b| bit(words, b)).unwrap_or(size)
}

/// Words that are mostly full, mostly empty, or random, so the searches
/// find something at every distance.
fn random_words(rng: &mut Rng, n: usize) -> Vec<c_ulong> {
    (0..n)
        .map(|_| match rng.below(4) {
            0 => !0,
            1 => 0,
            2 => !(1 << rng.below(64)),
            _ => rng.next(),
        } as c_ulong)
        .collect()
}

#[test]
fn searches_match_naive() {
    if common::skip_without_shim() {
        return;
    }
    let mut rng = Rng(1);
    for _ in 0..300 {
        let words = random_words(&mut rng, 4);
        for size in 0..=4 * BITS_PER_LONG {
            assert_eq!(
                shim::find_first_zero_bit(&words, size),
                naive_next_zero(&words, size, 0),
                "find_first_zero_bit({words:x?}, {size})"
            );
            assert_eq!(
                shim::find_last_bit(&words, size),
                naive_last(&words, size),
                "find_last_bit({words:x?}, {size})"
            );
            for offset in (0..size + 3).step_by(1 + rng.below(7) as usize) {
                assert_eq!(
                    shim::find_next_zero_bit(&words, size, offset),
                    naive_next_zero(&words, size, offset),
                    "find_next_zero_bit({words:x?}, {size}, {offset})"
                );
            }
        }
    }
}

#[test]
fn searches_ignore_bits_past_size_and_read_nothing_at_zero() {
    if common::skip_without_shim() {
        return;
    }
    // Bits beyond `size` in the last word are set / clear the wrong way.
    let words: [c_ulong; 2] = [!0, !0 << 10];
    assert_eq!(shim::find_first_zero_bit(&words, 64), 64);
    assert_eq!(shim::find_first_zero_bit(&words, 74), 64);
    assert_eq!(shim::find_last_bit(&[0, !0 << 5], 74), 73);
    assert_eq!(
        shim::find_last_bit(&[0, !0 << 10], 74),
        74,
        "none below size"
    );
    assert_eq!(
        shim::find_last_bit(&[0, !0 << 10], 70),
        70,
        "none below size"
    );
    assert_eq!(shim::find_last_bit(&[1, 0], 128), 0);
    // Zero bits, no words: nothing is read.
    assert_eq!(shim::find_first_zero_bit(&[], 0), 0);
    assert_eq!(shim::find_next_zero_bit(&[], 0, 5), 0);
    assert_eq!(shim::find_last_bit(&[], 0), 0);
}

#[test]
fn set_clear_test_match_naive() {
    if common::skip_without_shim() {
        return;
    }
    let mut rng = Rng(2);
    let mut words = vec![0 as c_ulong; 3];
    let mut naive = [false; 3 * BITS_PER_LONG];
    for _ in 0..20_000 {
        let b = rng.below(naive.len() as u64) as usize;
        match rng.below(3) {
            0 => {
                shim::set_bit(&mut words, b);
                naive[b] = true;
            }
            1 => {
                shim::clear_bit(&mut words, b);
                naive[b] = false;
            }
            _ => {}
        }
        assert_eq!(shim::test_bit(&words, b), naive[b]);
        let b2 = rng.below(naive.len() as u64) as usize;
        assert_eq!(shim::test_bit(&words, b2), naive[b2]);
        assert_eq!(bit(&words, b2), naive[b2], "set/clear touched another bit");
    }
}

#[test]
fn copy_copies_whole_words() {
    if common::skip_without_shim() {
        return;
    }
    let mut rng = Rng(3);
    for nbits in 0..=3 * BITS_PER_LONG {
        let src = random_words(&mut rng, 3);
        let mut dst = vec![0x5a5a as c_ulong; 4];
        shim::bitmap_copy(&mut dst, &src, nbits);
        let words = nbits.div_ceil(BITS_PER_LONG);
        assert_eq!(dst[..words], src[..words], "nbits {nbits}");
        assert!(
            dst[words..].iter().all(|&w| w == 0x5a5a),
            "nbits {nbits}: wrote past"
        );
    }
}

#[test]
fn zalloc_is_zeroed_fails_on_demand_and_is_counted() {
    if common::skip_without_shim() {
        return;
    }
    let live = shim::live_allocs();
    let m = shim::bitmap_zalloc(200, Gfp::Kernel).expect("allocation");
    assert_eq!((m.len(), m.words().len()), (200, 4));
    assert!(m.words().iter().all(|&w| w == 0));
    assert_eq!(shim::live_allocs(), live + 1);
    assert!(shim::bitmap_zalloc(64, Gfp::Fail).is_none());
    assert_eq!(
        shim::pending_failures(),
        0,
        "Gfp::Fail leaves nothing pending"
    );
    shim::fail_next_allocs(2);
    assert!(shim::bitmap_zalloc(64, Gfp::Kernel).is_none());
    assert!(shim::bitmap_zalloc(64, Gfp::Kernel).is_none());
    let zero = shim::bitmap_zalloc(0, Gfp::Kernel).expect("like kmalloc(0): not NULL");
    assert!(zero.is_empty() && zero.words().is_empty());
    let (m_ptr, zero_ptr) = (m.words().as_ptr(), zero.words().as_ptr());
    assert_eq!(shim::block_words(m_ptr), Some(4), "200 bits in 4 words");
    assert_eq!(shim::block_words(zero_ptr), Some(0), "kmalloc(0)'s block");
    assert_eq!(
        shim::block_words(m_ptr.wrapping_add(1)),
        None,
        "inside a block"
    );
    assert_eq!(shim::block_words(core::ptr::null()), None);
    drop((m, zero));
    assert_eq!(shim::live_allocs(), live);
    assert_eq!(shim::block_words(m_ptr), None, "freed");
}
