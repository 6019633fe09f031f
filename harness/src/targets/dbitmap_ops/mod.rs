//! `dbitmap_ops`: the C driver's `dbitmap` against the naive pool model
//! with the C policy and the disabled state, on `pool_ops`' operations. What
//! is its own: the adapter the pool runner drives ([`PoolApi`] for
//! `DBitmap`) and the registry entry.

use crate::idset::IdSet;
use crate::oracle::Policy;
use crate::registry::OpsTarget;
use crate::targets::pool_ops::{
    self, Built, PoolApi, Refused, Resize, Shape, DBITMAP_RESET_LIMIT, MAX_GROWS,
};
use idpool::{Bitmap, DBitmap, Gfp};

/// `dbitmap_ops`: the C `dbitmap` against the model.
pub static DBITMAP_OPS: OpsTarget<pool_ops::PoolOp> = OpsTarget::new(
    "dbitmap_ops",
    "DBitmap: the same ops, with the C policy and the disabled state",
    |target, ops| pool_ops::run::<DBitmap>(target, Policy::C, ops),
);

impl PoolApi for DBitmap {
    const DIRECT_CAPACITY: bool = false;
    type Request = usize;
    type Resizer = (Option<Bitmap>, usize);

    /// `None` when a grow on the way fails (disables the map) or the
    /// doubling never reaches the size.
    fn reset(capacity: usize) -> Built<Self> {
        let mut dmap = DBitmap::init(Gfp::Kernel);
        for _ in 0..MAX_GROWS {
            if dmap.nbits() >= capacity.min(DBITMAP_RESET_LIMIT) {
                return Ok(dmap);
            }
            if !dmap.grow_now() {
                return Err(Refused::default());
            }
        }
        Err(Refused::default())
    }
    /// `dbitmap_init` with its allocation failing: the map is disabled
    /// from the start, whatever the size asked (a disabled map never grows).
    fn reset_failing(_: usize) -> Built<Self> {
        Ok(DBitmap::init(Gfp::Fail))
    }
    fn grow_target_at(&self, nbits: u32) -> Option<(usize, Option<bool>)> {
        Some(dbitmap_grow_target_at(nbits))
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        if !self.enabled() {
            return None;
        }
        self.acquire_next_zero_bit(offset).ok()
    }
    fn find(&mut self, offset: usize) -> Option<(usize, Option<u32>)> {
        Some((self.next_zero_bit(offset)?, None))
    }
    fn release(&mut self, id: usize) {
        self.clear_bit(id);
    }
    fn request(&self, kind: Resize) -> Option<usize> {
        match kind {
            Resize::Grow => Some(self.grow_nbits()),
            Resize::Shrink => Some(self.shrink_nbits()).filter(|&n| n != 0),
        }
    }
    fn request_len(&nbits: &usize) -> usize {
        nbits
    }
    fn realloc(&nbits: &usize, gfp: Gfp) -> Option<Self::Resizer> {
        Some((DBitmap::zalloc(nbits, gfp), nbits))
    }
    fn allocated((new, _): &Self::Resizer) -> bool {
        new.is_some()
    }
    fn shape((new, _): &Self::Resizer) -> Option<Shape> {
        new.as_ref().map(|map| Shape {
            len: map.len(),
            empty: map.is_empty(),
            inline: Some(map.is_inline()),
        })
    }
    fn commit(&mut self, kind: Resize, (new, nbits): Self::Resizer) {
        match kind {
            Resize::Grow => self.grow(new, nbits),
            Resize::Shrink => self.shrink(new, nbits),
        }
    }
    fn grow_now(&mut self) -> bool {
        if !self.enabled() {
            return false;
        }
        let nbits = self.grow_nbits();
        self.grow(DBitmap::zalloc(nbits, Gfp::Kernel), nbits);
        self.enabled()
    }
    fn capacity(&self) -> usize {
        self.nbits()
    }
    fn used(&self) -> Vec<usize> {
        self.used_ids().collect()
    }
    fn used_matches(&self, expected: &IdSet) -> bool {
        self.used_ids().eq(expected.iter())
    }
    fn is_used(&self, id: usize) -> bool {
        self.test_bit(id)
    }
}

/// [`PoolApi::grow_target_at`] for our `DBitmap`: the size asked, and
/// whether it can be allocated where no memory is needed to know (above
/// `Bitmap::MAX_LEN` the allocation is refused before any memory is asked
/// for; up to one word it is inline).
pub fn dbitmap_grow_target_at(nbits: u32) -> (usize, Option<bool>) {
    let target = DBitmap::grow_nbits_for(nbits);
    let known = target > Bitmap::MAX_LEN || target <= Bitmap::MAX_INLINE_LEN;
    (
        target,
        known.then(|| DBitmap::zalloc(target, Gfp::Kernel).is_some()),
    )
}

#[cfg(test)]
mod reset_failing_tests {
    use super::*;
    use crate::oracle::Policy;
    use crate::targets::pool_ops::{PoolModel, Twin};
    use idpool::IdPool;

    /// A pool built with failing flags, as upstream builds it: the Rust
    /// `IdPool::with_capacity` (raised to `MAX_INLINE_LEN`, and
    /// `BitmapVec::new` allocates nothing up to it) builds 64 ids up to 64
    /// and refuses above; the C `dbitmap_init` leaves the map disabled
    /// (`nbits == 0`), which `binder_open` does not check. One table of
    /// cases, not the formula again.
    ///
    /// Upstream `IdPool::with_capacity` (rust/kernel/id_pool.rs: the size
    /// raised to `BitmapVec::MAX_INLINE_LEN`, inline up to one word) and
    /// `dbitmap_init` (drivers/android/dbitmap.h) under failing flags, as
    /// a table of cases; the twin (`IdPool` and the fast pool) must agree.
    #[test]
    fn upstream_with_capacity_and_dbitmap_init_under_failing_flags() {
        let rust = PoolModel::new(Policy::Rust);
        let c = PoolModel::new(Policy::C);
        for (n, expected) in [
            (0, Some(64)),
            (1, Some(64)),
            (64, Some(64)),
            (65, None),
            (4096, None),
        ] {
            assert_eq!(rust.reset_failing_capacity(n), expected, "rust {n}");
            assert_eq!(
                IdPool::reset_failing(n).ok().map(|p| p.capacity()),
                expected,
                "IdPool {n}"
            );
            assert_eq!(
                Twin::reset_failing(n).ok().map(|p| p.capacity()),
                expected,
                "Twin {n}"
            );
            assert_eq!(c.reset_failing_capacity(n), Some(0), "c {n}");
            assert_eq!(
                DBitmap::reset_failing(n).ok().map(|d| d.nbits()),
                Some(0),
                "DBitmap {n}"
            );
        }
    }
}

#[cfg(test)]
mod c_grow_tests {
    use super::*;
    use crate::targets::pool_ops::CGrowSize;

    /// The C grow size near 2^31, one table of cases (upstream
    /// `dbitmap_grow_nbits`: `nbits << 1`, `nbits` an `unsigned int`):
    /// 2^30 asks for 2^31, which no map can have (refused: the map is
    /// disabled); 2^31 - 1 asks for 2^32 - 2; 2^31 wraps to 0, and past it
    /// the size asked is below the map's. Our `DBitmap` answers the same
    /// without allocating.
    #[test]
    fn c_grow_cases_near_the_wrap() {
        let cases: [(u32, usize, bool, bool); 7] = [
            (64, 128, true, false),
            (1 << 29, 1 << 30, true, false),
            (1 << 30, 1 << 31, false, false),
            ((1 << 31) - 1, (1 << 32) - 2, false, false),
            (1 << 31, 0, true, true),
            ((1 << 31) + 5, 10, true, true),
            (u32::MAX, (1 << 32) - 2, false, true),
        ];
        for (nbits, target, allocatable, wraps) in cases {
            let expected = CGrowSize {
                target,
                allocatable,
                wraps,
            };
            assert_eq!(CGrowSize::of(nbits), expected, "nbits {nbits}");
            let (ours, alloc) = dbitmap_grow_target_at(nbits);
            assert_eq!(ours, target, "DBitmap at {nbits}");
            if let Some(alloc) = alloc {
                assert_eq!(alloc, allocatable, "DBitmap allocation at {nbits}");
            }
        }
    }
}
