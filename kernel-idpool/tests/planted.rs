//! A planted off-by-one in our shrink policy is caught by mainline's code,
//! even when the model is patched the same way.
//!
//! `CopyPool` is our `IdPool`'s policy copied here (over our `Bitmap`)
//! with one knob: `planted` makes `shrink_request` shrink when the highest
//! used id is *at* a quarter of the capacity too (`>` where ours has `>=`),
//! the off-by-one that the C v3 posting had in `dbitmap_shrink_nbits`.
//! Unplanted, the copy agrees with ours and with mainline; planted, it
//! agrees with a second planted copy (a model patched the same way would
//! not notice), and mainline catches it.

mod common;

use common::lockstep::{run, Pool};
use idpool::{AllocError, Bitmap, Gfp, IdPool};
use kernel_idpool::KernelIdPool;

const MIN: usize = Bitmap::MAX_INLINE_LEN;

struct CopyPool {
    map: Bitmap,
    planted: bool,
}

struct CopyRequest(usize);

impl CopyPool {
    fn new(planted: bool) -> Self {
        CopyPool {
            map: Bitmap::new(MIN, Gfp::Kernel).unwrap(),
            planted,
        }
    }

    /// Our rule (`IdPool::shrink_request`), with the knob.
    fn request(&self) -> Option<usize> {
        let cap = self.map.len();
        if cap <= MIN {
            return None;
        }
        let Some(last) = self.map.last_bit() else {
            return Some(MIN);
        };
        let keep = if self.planted {
            last > cap / 4 // planted: also shrinks at exactly a quarter
        } else {
            last >= cap / 4
        };
        if keep {
            return None;
        }
        Some((cap / 2).max(MIN))
    }
}

impl Pool for CopyPool {
    type Request = CopyRequest;
    type Resizer = Bitmap;
    fn capacity(&self) -> usize {
        self.map.len()
    }
    fn find(&mut self, offset: usize) -> Option<usize> {
        self.map.next_zero_bit(offset)
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        let id = self.map.next_zero_bit(offset)?;
        self.map.set_bit(id);
        Some(id)
    }
    fn release(&mut self, id: usize) {
        self.map.clear_bit(id)
    }
    fn grow_request(&self) -> Option<CopyRequest> {
        let n = self.map.len().checked_mul(2)?;
        (n <= Bitmap::MAX_LEN).then_some(CopyRequest(n))
    }
    fn shrink_request(&self) -> Option<CopyRequest> {
        self.request().map(CopyRequest)
    }
    fn realloc(&self, request: &CopyRequest, gfp: Gfp) -> Result<Bitmap, AllocError> {
        Bitmap::new(request.0, gfp)
    }
    fn resizer_len(resizer: &Bitmap) -> usize {
        resizer.len()
    }
    fn grow(&mut self, mut new: Bitmap) {
        if new.len() <= self.map.len() {
            return;
        }
        new.copy_and_extend(&self.map);
        self.map = new;
    }
    fn shrink(&mut self, mut new: Bitmap) {
        let Some(target) = self.request() else { return };
        if target > new.len() {
            return;
        }
        new.copy_and_extend(&self.map);
        self.map = new;
    }
    fn used_ids(&mut self) -> Vec<usize> {
        self.map.iter_ones().collect()
    }
}

const SEEDS: u64 = 100;
const STEPS: usize = 600;

#[test]
fn the_unplanted_copy_agrees_with_ours_and_mainline() {
    if common::skip_without_source() {
        return;
    }
    for seed in 0..SEEDS {
        if let Err(d) = run(&mut CopyPool::new(false), &mut IdPool::new(), seed, STEPS) {
            panic!("copy vs ours: {d:?}");
        }
        if let Err(d) = run(
            &mut CopyPool::new(false),
            &mut KernelIdPool::new(),
            seed,
            STEPS,
        ) {
            panic!("copy vs mainline: {d:?}");
        }
    }
}

#[test]
fn mainline_catches_the_planted_off_by_one_that_a_patched_model_misses() {
    if common::skip_without_source() {
        return;
    }
    let mut caught = Vec::new();
    for seed in 0..SEEDS {
        // A model patched the same way agrees with the planted copy...
        if let Err(d) = run(
            &mut CopyPool::new(true),
            &mut CopyPool::new(true),
            seed,
            STEPS,
        ) {
            panic!("planted vs planted: {d:?}");
        }
        // ...mainline does not.
        if let Err(d) = run(
            &mut CopyPool::new(true),
            &mut KernelIdPool::new(),
            seed,
            STEPS,
        ) {
            caught.push(d);
        }
    }
    let first = caught
        .iter()
        .min_by_key(|d| d.step)
        .expect("mainline caught nothing");
    println!(
        "caught on {} of {SEEDS} seeds; earliest: {first:?}",
        caught.len()
    );
    // The boundary (highest used id exactly at a quarter, asked right then)
    // is a narrow state: 8 of these 100 programs reach it.
    assert!(caught.len() >= 5, "caught on {} seeds only", caught.len());
    // Every catch is the shrink policy: a request one side makes and the
    // other refuses, or the capacity it led to.
    for d in &caught {
        assert!(
            d.call.contains("shrink_request()") || d.detail.starts_with("capacity"),
            "{d:?}"
        );
    }
}

/// The boundary itself, directed: ids 0..=32 used in a pool of 128.
#[test]
fn the_boundary_state_directed() {
    if common::skip_without_source() {
        return;
    }
    let mut kernel = KernelIdPool::with_capacity(128, Gfp::Kernel).unwrap();
    let mut ours = IdPool::with_capacity(128, Gfp::Kernel).unwrap();
    let mut planted = CopyPool::new(true);
    planted.map = Bitmap::new(128, Gfp::Kernel).unwrap();
    for expected in 0..=32 {
        assert_eq!(kernel.find_unused_id(0).unwrap().acquire(), expected);
        assert_eq!(ours.find_unused_id(0).unwrap().acquire(), expected);
        assert_eq!(planted.acquire(0), Some(expected));
    }
    assert!(kernel.shrink_request().is_none(), "mainline keeps 128");
    assert!(ours.shrink_request().is_none(), "ours keeps 128");
    assert_eq!(planted.request(), Some(64), "the plant shrinks");
    // One id fewer and all three shrink to 64.
    kernel.release_id(32);
    ours.release_id(32);
    planted.release(32);
    let resizer = kernel
        .shrink_request()
        .unwrap()
        .realloc(Gfp::Kernel)
        .unwrap();
    assert_eq!(resizer.len(), 64);
    assert_eq!(ours.shrink_request().map(|r| r.num_ids()), Some(64));
    assert_eq!(planted.request(), Some(64));
}
