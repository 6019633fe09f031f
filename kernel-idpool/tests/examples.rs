//! This crate's own examples (its doctests are off: see Cargo.toml).

mod common;

use kernel_idpool::alloc::{faults, flags::GFP_KERNEL};
use kernel_idpool::bitmap::BitmapVec;
use kernel_idpool::{Gfp, KernelIdPool};

/// `alloc`'s example: a fault plan reaches mainline's `BitmapVec::new`.
#[test]
fn alloc_example() {
    if common::skip_without_source() {
        return;
    }
    faults::clear();
    faults::fail_next(1);
    assert!(BitmapVec::new(64, GFP_KERNEL).is_ok()); // inline: no allocation
    assert_eq!(faults::pending(), 1);
    assert!(BitmapVec::new(65, GFP_KERNEL).is_err()); // the planned failure
    assert!(BitmapVec::new(65, GFP_KERNEL).is_ok());
}

/// `pool`'s example: fill, find it full, grow, carry on.
#[test]
fn pool_example() {
    if common::skip_without_source() {
        return;
    }
    let mut pool = KernelIdPool::new();
    for expected in 0..64 {
        assert_eq!(pool.find_unused_id(0).unwrap().acquire(), expected);
    }
    assert!(pool.find_unused_id(0).is_none());
    let resizer = pool.grow_request().unwrap().realloc(Gfp::Kernel).unwrap();
    assert_eq!(resizer.len(), 128);
    pool.grow(resizer);
    assert_eq!(pool.capacity(), 128);
    assert_eq!(pool.find_unused_id(1).unwrap().acquire(), 64);
}
