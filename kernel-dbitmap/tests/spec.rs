//! The kernel's dbitmap, through the wrapper, against `docs/spec.md`'s "dbitmap ...
//! as in mainline today"; and no map leaks (the shim counts allocations).

mod common;

use kernel_dbitmap::{shim, Gfp, KernelDBitmap, NoSpace};

/// An enabled map of `nbits` bits (grown from 64) with `bits` set.
fn dmap_with(nbits: usize, bits: &[usize]) -> KernelDBitmap {
    let mut d = KernelDBitmap::init(Gfp::Kernel);
    while d.nbits() < nbits {
        let n = d.grow_nbits();
        d.grow(KernelDBitmap::zalloc(n, Gfp::Kernel), n);
    }
    assert_eq!(d.nbits(), nbits);
    bits.iter().for_each(|&b| d.set_bit(b));
    d
}

#[test]
fn init_and_its_failure() {
    if common::skip_without_header() {
        return;
    }
    let live = shim::live_allocs();
    assert_eq!(KernelDBitmap::nbits_min(), 64);
    let d = KernelDBitmap::init(Gfp::Kernel);
    assert!(d.enabled());
    assert_eq!(
        (d.nbits(), d.words(), d.grow_nbits(), d.shrink_nbits()),
        (64, &[0][..], 128, 0)
    );
    assert_eq!(shim::live_allocs(), live + 1);
    let f = KernelDBitmap::init(Gfp::Fail);
    assert!(!f.enabled());
    assert_eq!((f.nbits(), f.grow_nbits(), f.shrink_nbits()), (0, 0, 0));
    drop((d, f));
    assert_eq!(shim::live_allocs(), live, "drop frees the map");
}

#[test]
fn acquire_sets_at_once_from_the_offset_and_reports_enospc() {
    if common::skip_without_header() {
        return;
    }
    let mut d = KernelDBitmap::init(Gfp::Kernel);
    assert_eq!(d.acquire_next_zero_bit(1), Ok(1));
    assert_eq!(d.acquire_next_zero_bit(0), Ok(0));
    assert_eq!(d.acquire_next_zero_bit(0), Ok(2));
    assert!(d.test_bit(2) && !d.test_bit(3));
    assert_eq!(d.acquire_next_zero_bit(63), Ok(63));
    assert_eq!(d.acquire_next_zero_bit(63), Err(NoSpace));
    assert_eq!(d.acquire_next_zero_bit(64), Err(NoSpace));
    assert_eq!(d.acquire_next_zero_bit(1 << 40), Err(NoSpace));
    for expected in 3..63 {
        assert_eq!(d.acquire_next_zero_bit(0), Ok(expected));
    }
    assert_eq!(d.acquire_next_zero_bit(0), Err(NoSpace));
    d.clear_bit(17);
    assert!(!d.test_bit(17));
    assert_eq!(d.acquire_next_zero_bit(0), Ok(17));
    // Out of range: ignored, never written.
    d.clear_bit(64);
    d.clear_bit(usize::MAX);
    assert!(!d.test_bit(64));
    assert_eq!(d.used_ids(), (0..64).collect::<Vec<_>>());
}

#[test]
fn grow_target_is_an_unsigned_int_shift() {
    if common::skip_without_header() {
        return;
    }
    assert_eq!(dmap_with(256, &[]).grow_nbits(), 512);
    assert_eq!(KernelDBitmap::disabled().grow_nbits(), 0);
}

#[test]
fn grow_commit_checks_stale_or_disabled_before_null() {
    if common::skip_without_header() {
        return;
    }
    let live = shim::live_allocs();
    let mut d = dmap_with(64, &[0, 63]);
    d.grow(KernelDBitmap::zalloc(128, Gfp::Kernel), 128);
    assert_eq!((d.nbits(), d.used_ids()), (128, vec![0, 63]));
    // Stale (not larger): the new map is freed, nothing changes.
    d.grow(KernelDBitmap::zalloc(128, Gfp::Kernel), 128);
    d.grow(KernelDBitmap::zalloc(64, Gfp::Kernel), 64);
    assert_eq!((d.nbits(), d.used_ids()), (128, vec![0, 63]));
    // A failed allocation for a grow that is no longer needed does not
    // disable the map (docs/spec.md: stale check first, then NULL).
    d.grow(None, 128);
    assert!(d.enabled());
    assert_eq!(d.nbits(), 128);
    // A failed allocation for a needed grow disables it for good.
    d.grow(None, 256);
    assert!(!d.enabled());
    assert_eq!((d.nbits(), d.words()), (0, &[][..]));
    d.grow(KernelDBitmap::zalloc(512, Gfp::Kernel), 512);
    assert!(!d.enabled(), "a disabled map never comes back");
    drop(d);
    assert_eq!(shim::live_allocs(), live, "every handed-over map was freed");
}

#[test]
fn shrink_policy_and_exact_size_commit() {
    if common::skip_without_header() {
        return;
    }
    let live = shim::live_allocs();
    assert_eq!(dmap_with(64, &[]).shrink_nbits(), 0);
    assert_eq!(dmap_with(128, &[]).shrink_nbits(), 64);
    assert_eq!(dmap_with(128, &[31]).shrink_nbits(), 64);
    assert_eq!(dmap_with(128, &[32]).shrink_nbits(), 0);
    assert_eq!(dmap_with(1024, &[255]).shrink_nbits(), 512);
    assert_eq!(dmap_with(1024, &[256]).shrink_nbits(), 0);
    assert_eq!(dmap_with(1024, &[]).shrink_nbits(), 64);
    assert_eq!(KernelDBitmap::disabled().shrink_nbits(), 0);

    // Prepared 512, but meanwhile the map emptied: the target is now 64,
    // not exactly 512, so the commit is refused.
    let mut d = dmap_with(1024, &[3]);
    let nbits = d.shrink_nbits();
    assert_eq!(nbits, 512);
    d.clear_bit(3);
    d.shrink(KernelDBitmap::zalloc(nbits, Gfp::Kernel), nbits);
    assert_eq!(d.nbits(), 1024);
    // The recomputed target matches: commit, keeping the bits.
    d.set_bit(7);
    d.shrink(KernelDBitmap::zalloc(512, Gfp::Kernel), 512);
    assert_eq!((d.nbits(), d.used_ids()), (512, vec![7]));
    // A failed shrink allocation changes nothing.
    d.shrink(None, 256);
    assert_eq!((d.nbits(), d.used_ids()), (512, vec![7]));
    // Disabled: refused.
    let mut off = KernelDBitmap::disabled();
    off.shrink(KernelDBitmap::zalloc(64, Gfp::Kernel), 64);
    assert!(!off.enabled());
    drop((d, off));
    assert_eq!(shim::live_allocs(), live);
}

#[test]
fn acquire_on_a_disabled_map_is_enospc_in_c() {
    if common::skip_without_header() {
        return;
    }
    // The model panics here; the C code finds nothing in 0 bits.
    assert_eq!(
        KernelDBitmap::disabled().acquire_next_zero_bit(0),
        Err(NoSpace)
    );
}

#[test]
fn handing_over_a_short_map_panics_instead_of_overrunning() {
    if common::skip_without_header() {
        return;
    }
    let live = shim::live_allocs();
    let mut d = KernelDBitmap::init(Gfp::Kernel);
    let short = KernelDBitmap::zalloc(64, Gfp::Kernel);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.grow(short, 128)))
        .expect_err("a 64-bit map handed over as 128 bits");
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    assert!(message.contains("handed over as 128 bits"), "{message}");
    assert_eq!(d.nbits(), 64);
    drop(d);
    assert_eq!(shim::live_allocs(), live, "the short map was freed");
}

#[test]
fn provenance_names_the_header() {
    if common::skip_without_header() {
        return;
    }
    let sha = kernel_dbitmap::header_sha256().expect("sha256");
    assert_eq!(sha.len(), 64);
    assert!(kernel_dbitmap::provenance().contains(sha));
}
