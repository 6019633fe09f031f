//! The two behaviours of `CONFIG_RUST_BITMAP_HARDENED` through the wrapper:
//! run with and without `--features hardened`. Out of range, a hardened
//! build panics with the bitmap's assertion and changes nothing; the other
//! build changes nothing, answers `None`, and logs one `pr_err!` line for a
//! write (`set_bit`, `clear_bit`, so `release_id`) and none for a search.
//! (The kernel's own KUnit module has the hardened case commented out,
//! waiting for `#[should_panic]` support; this is it.)

mod common;

use kernel_idpool::print::{take_log, Level};
use kernel_idpool::{catch_panic, Gfp, KernelBitmapVec, KernelIdPool, HARDENED};

/// Runs `f`; in a hardened build it must panic with the assertion, else
/// return normally, logging `lines` lines at `pr_err`.
fn expect_out_of_range<T: std::fmt::Debug>(
    what: &str,
    lines: usize,
    f: impl FnOnce() -> T,
) -> Option<T> {
    take_log();
    let result = catch_panic(f);
    let log = take_log();
    if HARDENED {
        let msg = result.expect_err(what);
        assert!(msg.contains("must be <"), "{what}: {msg}");
        assert!(log.is_empty(), "{what}: {log:?}");
        None
    } else {
        let value = result.unwrap_or_else(|msg| panic!("{what} panicked: {msg}"));
        assert_eq!(log.len(), lines, "{what}: {log:?}");
        assert!(log.iter().all(|(level, _)| *level == Level::Err), "{log:?}");
        Some(value)
    }
}

#[test]
fn bitmap_vec_out_of_range() {
    if common::skip_without_source() {
        return;
    }
    let mut b = KernelBitmapVec::new(128, Gfp::Kernel).unwrap();
    b.set_bit(5);
    expect_out_of_range("set_bit(2048)", 1, || b.set_bit(2048));
    expect_out_of_range("clear_bit(128)", 1, || b.clear_bit(128));
    let next = expect_out_of_range("next_bit(128)", 0, || b.next_bit(128));
    let zero = expect_out_of_range("next_zero_bit(2048)", 0, || b.next_zero_bit(2048));
    if !HARDENED {
        assert_eq!((next, zero), (Some(None), Some(None)));
    }
    // Nothing changed either way.
    assert_eq!(b.last_bit(), Some(5));
    assert_eq!(b.next_bit(0), Some(5));
    assert_eq!(b.next_zero_bit(5), Some(6));
    assert!(b.test_bit(5) && !b.test_bit(6) && !b.test_bit(128));
}

#[test]
fn id_pool_out_of_range_and_the_message() {
    if common::skip_without_source() {
        return;
    }
    let mut pool = KernelIdPool::new();
    assert_eq!(pool.find_unused_id(0).unwrap().acquire(), 0);
    let found = expect_out_of_range("find_unused_id(64)", 0, || {
        pool.find_unused_id(64).map(|u| u.as_usize())
    });
    if !HARDENED {
        assert_eq!(found, Some(None));
    }
    take_log();
    let released = catch_panic(|| pool.release_id(64));
    let log = take_log();
    if HARDENED {
        assert!(released
            .unwrap_err()
            .contains("Bit `index` must be < 64, was 64"));
    } else {
        assert!(released.is_ok());
        assert_eq!(
            log,
            [(Level::Err, "Bit `index` must be < 64, was 64".to_owned())]
        );
    }
    assert_eq!(pool.used_ids(), [0]);
    assert_eq!(pool.capacity(), 64);
}

/// In range, both builds behave the same and log nothing.
#[test]
fn in_range_calls_never_log() {
    if common::skip_without_source() {
        return;
    }
    take_log();
    let mut pool = KernelIdPool::with_capacity(200, Gfp::Kernel).unwrap();
    for id in 0..200 {
        assert_eq!(pool.find_unused_id(id).unwrap().acquire(), id);
    }
    assert!(pool.find_unused_id(199).is_none());
    for id in (0..200).rev() {
        pool.release_id(id);
    }
    assert_eq!(pool.used_ids(), Vec::<usize>::new());
    assert_eq!(take_log(), []);
}

/// The feature reaches the kernel code as its cfg.
#[test]
fn the_feature_sets_the_cfg() {
    assert_eq!(HARDENED, cfg!(feature = "hardened"));
}
