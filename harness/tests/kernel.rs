//! The oracle's C grow rule against the kernel's own `dbitmap_grow`
//! (`drivers/android/dbitmap.h`, compiled by `kernel-dbitmap`), row by row
//! of [`oracle::c_grow_commit`]'s decision table; ours is held to the same
//! rows. Skipped, with the reason, when the header is not compiled in.

use idpool::{DBitmap, Gfp};
use idpool_harness::oracle::{self, CGrow};
use kernel_dbitmap::KernelDBitmap;

/// What a grow commit did, read off the map before and after.
fn outcome(before: (bool, usize), after: (bool, usize)) -> CGrow {
    match (before, after) {
        (_, (false, _)) if before.0 => CGrow::Disable,
        (b, a) if a.1 > b.1 => CGrow::Install,
        (b, a) if a == b => CGrow::Keep,
        (b, a) => panic!("a grow commit went from {b:?} to {a:?}"),
    }
}

#[test]
fn upstream_dbitmap_grow_decision_table() {
    if let Some(reason) = kernel_dbitmap::unavailable_reason() {
        println!("skipped: {reason}");
        return;
    }
    println!("{}", kernel_dbitmap::provenance());
    for disabled in [false, true] {
        for stale in [false, true] {
            for failed in [false, true] {
                // The map: disabled, or enabled at 128 bits (grown from 64).
                let mut kernel = KernelDBitmap::init(Gfp::Kernel);
                let mut ours = DBitmap::init(Gfp::Kernel);
                kernel.grow(KernelDBitmap::zalloc(128, Gfp::Kernel), 128);
                ours.grow(DBitmap::zalloc(128, Gfp::Kernel), 128);
                if disabled {
                    kernel.free();
                    ours.free();
                }
                let cap = kernel.nbits();
                // A stale grow asks for no more than the map has.
                let len = match (disabled, stale) {
                    (true, true) => 0,
                    (true, false) => 128,
                    (false, true) => 128,
                    (false, false) => 256,
                };
                let gfp = if failed { Gfp::Fail } else { Gfp::Kernel };
                let before = (kernel.enabled(), kernel.nbits());
                kernel.grow(KernelDBitmap::zalloc(len, gfp), len);
                ours.grow(DBitmap::zalloc(len, gfp), len);
                let row = format!("disabled {disabled}, stale {stale}, allocation failed {failed}");
                let upstream = outcome(before, (kernel.enabled(), kernel.nbits()));
                assert_eq!(
                    oracle::c_grow_commit(cap, len, failed),
                    upstream,
                    "the oracle's row ({row}) is not what the kernel's dbitmap_grow does"
                );
                assert_eq!(
                    outcome(before, (ours.enabled(), ours.nbits())),
                    upstream,
                    "DBitmap::grow ({row}) is not what the kernel's dbitmap_grow does"
                );
            }
        }
    }
}

/// The kernel's own `dbitmap_grow_nbits` at sizes no map can have (read
/// from a struct claiming them, no map): ours and the model agree with it
/// up to and past 2^31, where the 32-bit shift wraps.
#[test]
fn upstream_grow_size_wraps_at_2_pow_31() {
    if let Some(reason) = kernel_dbitmap::unavailable_reason() {
        println!("skipped: {reason}");
        return;
    }
    for nbits in [64, 1 << 30, (1 << 31) - 1, 1 << 31, (1 << 31) + 5, u32::MAX] {
        let kernel = KernelDBitmap::grow_nbits_for(nbits);
        assert_eq!(DBitmap::grow_nbits_for(nbits), kernel, "ours at {nbits}");
        assert_eq!(
            idpool_harness::targets::pool_ops::CGrowSize::of(nbits).target,
            kernel,
            "model at {nbits}"
        );
    }
    assert_eq!(KernelDBitmap::grow_nbits_for(1 << 31), 0);
}
