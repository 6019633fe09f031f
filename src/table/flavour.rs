//! The three ways Binder finds a free handle, behind one trait.

use super::RefInfo;
use crate::alloc::{AllocError, Corruption, Gfp};
use crate::dbitmap::DBitmap;
use crate::id_pool::{IdPool, PoolResizer, ReallocRequest};
use crate::version::{Driver, Version};
use std::collections::BTreeMap;

/// What the handle table needs from an id allocator.
///
/// Implemented by [`IdPool`] (the Rust driver), [`DBitmap`] (the C driver,
/// with its fallback to the linear scan once disabled) and [`LinearScan`]
/// (both drivers before the bitmap). All methods but [`Flavour::realloc`] run
/// under the table's lock.
pub trait Flavour: Sized + Send + core::fmt::Debug + 'static {
    /// A short name for messages and traces: `idpool`, `dbitmap`, `linear`.
    const NAME: &'static str;
    /// A resize request, made under the lock.
    type Request: Copy + core::fmt::Debug + Send;
    /// A resize allocated without the lock, waiting for its commit.
    type Resizer: core::fmt::Debug + Send;

    /// The version a table of this flavour gets when none is asked for: the
    /// mainline of the driver the allocator belongs to.
    const DEFAULT_VERSION: Version = Version::RustMainline;

    /// The allocator of a new process.
    fn new_pool() -> Self;

    /// Whether a table of this flavour can run `version` (see the
    /// [version module](crate::Version) for the pairs). By default, the Rust
    /// versions only.
    fn supports(version: Version) -> bool {
        version.driver() == Driver::Rust
    }

    /// The allocator of a new process, as `version` built it. By default
    /// [`Flavour::new_pool`]: only a pool with version-dependent rules
    /// overrides it.
    fn new_pool_for(version: Version) -> Self {
        let _ = version;
        Self::new_pool()
    }

    /// Applies a corruption to the allocator's own record of used ids. By
    /// default nothing happens (an allocator without such a record).
    fn corrupt(&mut self, corruption: Corruption) {
        let _ = corruption;
    }

    /// The smallest id `>= start` this allocator considers free, without
    /// taking it; `None` when it is full and must grow.
    fn find_unused(&mut self, start: u32, by_handle: &BTreeMap<u32, RefInfo>) -> Option<u32>;

    /// Marks `id` (just returned by [`Flavour::find_unused`]) as used.
    fn acquire(&mut self, id: u32);

    /// Marks `id` as free again.
    fn release(&mut self, id: u32);

    /// A request to grow, or `None` when the allocator cannot grow (`ENOMEM`).
    fn grow_request(&self) -> Option<Self::Request>;

    /// Allocates for a grow or a shrink, without the lock. An `Err` ends the
    /// operation with `ENOMEM` (grow) or silently (shrink); a flavour that
    /// wants to see its failures at commit time returns them inside `Ok`.
    fn realloc(request: &Self::Request, gfp: Gfp) -> Result<Self::Resizer, AllocError>;

    /// Commits a grow, re-checking the current state.
    fn grow(&mut self, resizer: Self::Resizer);

    /// A request to shrink, or `None`. Asked after every release.
    fn shrink_request(&self) -> Option<Self::Request>;

    /// Commits a shrink, re-checking the current state.
    fn shrink(&mut self, resizer: Self::Resizer);

    /// The bitmap's length; 0 for a flavour without one (or a disabled one).
    fn capacity(&self) -> usize;

    /// The ids the allocator believes are used, or `None` when it keeps no
    /// record of its own (the linear scan, a disabled dbitmap).
    fn used_ids(&self) -> Option<Vec<u32>>;
}

/// The smallest id `>= start` that is not a key of `by_handle`, found the way
/// both drivers did before the bitmap: walk the handles in order from the
/// first until a gap appears. O(n) in the number of handles.
pub fn slow_desc_lookup(by_handle: &BTreeMap<u32, RefInfo>, start: u32) -> u32 {
    let mut desc = start;
    for &handle in by_handle.keys() {
        if handle > desc {
            break;
        }
        desc = handle + 1;
    }
    desc
}

/// The legacy allocator: no bitmap, every id found by [`slow_desc_lookup`].
/// This is what the C driver falls back to once its dbitmap is disabled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearScan;

impl Flavour for LinearScan {
    const NAME: &'static str = "linear";
    type Request = ();
    type Resizer = ();

    fn new_pool() -> Self {
        LinearScan
    }
    /// Every version: the slow walk is what both drivers had before the
    /// bitmap, and what a C dbitmap falls back to once disabled.
    fn supports(_: Version) -> bool {
        true
    }
    fn find_unused(&mut self, start: u32, by_handle: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        Some(slow_desc_lookup(by_handle, start))
    }
    fn acquire(&mut self, _: u32) {}
    fn release(&mut self, _: u32) {}
    fn grow_request(&self) -> Option<()> {
        None
    }
    fn realloc(_: &(), _: Gfp) -> Result<(), AllocError> {
        Ok(())
    }
    fn grow(&mut self, _: ()) {}
    fn shrink_request(&self) -> Option<()> {
        None
    }
    fn shrink(&mut self, _: ()) {}
    fn capacity(&self) -> usize {
        0
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        None
    }
}

impl Flavour for IdPool {
    const NAME: &'static str = "idpool";
    type Request = ReallocRequest;
    type Resizer = PoolResizer;

    fn new_pool() -> Self {
        IdPool::new()
    }
    fn corrupt(&mut self, corruption: Corruption) {
        match corruption {
            Corruption::ClearBit(id) => self.release_id(id as usize),
            Corruption::SetBit(id) => {
                if let Some(unused) = self.find_unused_id(id as usize) {
                    if unused.as_u32() == id {
                        unused.acquire();
                    }
                }
            }
        }
    }
    fn find_unused(&mut self, start: u32, _: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        // Dropping the `UnusedId` changes nothing; `acquire` below finds it
        // again within the same critical section.
        self.find_unused_id(start as usize).map(|id| id.as_u32())
    }
    fn acquire(&mut self, id: u32) {
        let unused = self.find_unused_id(id as usize);
        let got = unused.map(|u| u.acquire());
        debug_assert_eq!(got, Some(id as usize), "acquire of an id that was not free");
    }
    fn release(&mut self, id: u32) {
        self.release_id(id as usize);
    }
    fn grow_request(&self) -> Option<ReallocRequest> {
        IdPool::grow_request(self)
    }
    fn realloc(request: &ReallocRequest, gfp: Gfp) -> Result<PoolResizer, AllocError> {
        request.realloc(gfp)
    }
    fn grow(&mut self, resizer: PoolResizer) {
        IdPool::grow(self, resizer);
    }
    fn shrink_request(&self) -> Option<ReallocRequest> {
        IdPool::shrink_request(self)
    }
    fn shrink(&mut self, resizer: PoolResizer) {
        IdPool::shrink(self, resizer);
    }
    fn capacity(&self) -> usize {
        IdPool::capacity(self)
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        Some(IdPool::used_ids(self).map(|id| id as u32).collect())
    }
}

/// The C driver's flavour. Its allocations fail *into* the commit: a failed
/// grow allocation reaches [`DBitmap::grow`] as NULL and, when the grow is
/// still needed, disables the map,
/// after which ids come from [`slow_desc_lookup`] for good.
///
/// The C driver finds and sets a bit in one call
/// ([`DBitmap::acquire_next_zero_bit`]); the C protocol of
/// [`Operation`](crate::Operation) calls [`Flavour::find_unused`] then
/// [`Flavour::acquire`] back to back in one critical section, before it
/// looks at `by_handle`, so the bit is set exactly when C sets it.
impl Flavour for DBitmap {
    const NAME: &'static str = "dbitmap";
    /// The `nbits` to allocate.
    type Request = usize;
    /// The allocated map (`None` when `bitmap_zalloc` failed) and its `nbits`.
    type Resizer = (Option<crate::Bitmap>, usize);

    const DEFAULT_VERSION: Version = Version::CMainline;

    fn new_pool() -> Self {
        DBitmap::init(Gfp::Kernel)
    }
    /// The C versions only.
    fn supports(version: Version) -> bool {
        version.driver() == Driver::C
    }
    fn new_pool_for(version: Version) -> Self {
        DBitmap::init_with(Gfp::Kernel, version)
    }
    fn corrupt(&mut self, corruption: Corruption) {
        if let Some(map) = self.map_mut() {
            match corruption {
                Corruption::ClearBit(id) => map.clear_bit(id as usize),
                Corruption::SetBit(id) => map.set_bit(id as usize),
            }
        }
    }
    fn find_unused(&mut self, start: u32, by_handle: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        if !self.enabled() {
            return Some(slow_desc_lookup(by_handle, start));
        }
        self.next_zero_bit(start as usize).map(|id| id as u32)
    }
    fn acquire(&mut self, id: u32) {
        self.set_bit(id as usize);
    }
    fn release(&mut self, id: u32) {
        self.clear_bit(id as usize);
    }
    fn grow_request(&self) -> Option<usize> {
        Some(self.grow_nbits())
    }
    fn realloc(&nbits: &usize, gfp: Gfp) -> Result<Self::Resizer, AllocError> {
        Ok((DBitmap::zalloc(nbits, gfp), nbits))
    }
    fn grow(&mut self, (new, nbits): Self::Resizer) {
        DBitmap::grow(self, new, nbits);
    }
    fn shrink_request(&self) -> Option<usize> {
        Some(self.shrink_nbits()).filter(|&n| n != 0)
    }
    fn shrink(&mut self, (new, nbits): Self::Resizer) {
        DBitmap::shrink(self, new, nbits);
    }
    fn capacity(&self) -> usize {
        self.nbits()
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        self.enabled()
            .then(|| DBitmap::used_ids(self).map(|id| id as u32).collect())
    }
}
