//! The Rust Binder driver's id allocator, after the kernel's `IdPool`.

use crate::alloc::{AllocError, Gfp};
use crate::bitmap::Bitmap;

/// The smallest capacity a pool ever has: one machine word of ids.
pub const MIN_CAPACITY: usize = Bitmap::MAX_INLINE_LEN;

/// A growable pool of ids backed by a [`Bitmap`], resized in three steps.
///
/// Resizing needs an allocation, and the caller may have to drop its lock to
/// allocate. So a resize is *requested* under the lock
/// ([`IdPool::grow_request`], [`IdPool::shrink_request`]), *allocated* without
/// it ([`ReallocRequest::realloc`]), and *committed* under the lock again
/// ([`IdPool::grow`], [`IdPool::shrink`]). Anything may happen to the pool
/// between the request and the commit, so every commit re-checks the current
/// state.
///
/// # Invariants
///
/// - `capacity() >= MIN_CAPACITY` and `capacity() <= Bitmap::MAX_LEN`.
/// - A set bit is an acquired id. No commit ever clears a set bit.
/// - The capacity only changes in [`IdPool::grow`] and [`IdPool::shrink`].
///
/// # Examples
///
/// The kernel's own example: fill the first word, release and reacquire one
/// id, find the pool full, grow it and carry on.
///
/// ```
/// use idpool::{Gfp, IdPool};
///
/// let mut pool = IdPool::new();
/// for expected in 0..64 {
///     let id = pool.find_unused_id(0).expect("room left").acquire();
///     assert_eq!(id, expected);
/// }
/// pool.release_id(23);
/// assert_eq!(pool.find_unused_id(0).unwrap().acquire(), 23);
///
/// assert!(pool.find_unused_id(0).is_none()); // full
/// let request = pool.grow_request().expect("below the ceiling");
/// let resizer = request.realloc(Gfp::Kernel)?; // the caller's lock is dropped here
/// pool.grow(resizer);
/// assert_eq!(pool.capacity(), 128);
/// assert_eq!(pool.find_unused_id(0).unwrap().acquire(), 64);
/// # Ok::<(), idpool::AllocError>(())
/// ```
///
/// And an empty pool of 1024 ids shrinks straight down to 64:
///
/// ```
/// use idpool::{Gfp, IdPool};
///
/// let mut pool = IdPool::with_capacity(1024, Gfp::Kernel)?;
/// let request = pool.shrink_request().expect("nothing set");
/// assert_eq!(request.num_ids(), 64);
/// pool.shrink(request.realloc(Gfp::Kernel)?);
/// assert_eq!(pool.capacity(), 64);
/// # Ok::<(), idpool::AllocError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdPool {
    map: Bitmap,
}

/// A request for a bitmap of `num_ids` bits, made under the lock and served
/// without it by [`ReallocRequest::realloc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a request does nothing until it is reallocated and committed"]
pub struct ReallocRequest {
    num_ids: usize,
}

/// A zeroed bitmap allocated for a resize, waiting to be committed by
/// [`IdPool::grow`] or [`IdPool::shrink`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a resizer does nothing until it is committed"]
pub struct PoolResizer {
    new: Bitmap,
}

/// An unused id, found by [`IdPool::find_unused_id`].
///
/// It borrows the pool mutably, so the lock that protects the pool stays held
/// until the id is acquired or dropped. Dropping it without
/// [`UnusedId::acquire`] changes nothing.
#[must_use = "dropping an UnusedId without acquire() leaves the id free"]
pub struct UnusedId<'pool> {
    id: usize,
    pool: &'pool mut IdPool,
}

impl ReallocRequest {
    /// The length of the bitmap this request asks for.
    pub fn num_ids(&self) -> usize {
        self.num_ids
    }

    /// Allocates the zeroed bitmap. Runs without the caller's lock.
    ///
    /// Fails with [`AllocError`] when the allocation fails (see [`Bitmap::new`]).
    pub fn realloc(&self, gfp: Gfp) -> Result<PoolResizer, AllocError> {
        Ok(PoolResizer {
            new: Bitmap::new(self.num_ids, gfp)?,
        })
    }
}

impl PoolResizer {
    /// The capacity the pool would take from this resizer.
    pub fn len(&self) -> usize {
        self.new.len()
    }

    /// Whether the resizer holds no bits (never true for a pool's resizer).
    pub fn is_empty(&self) -> bool {
        self.new.is_empty()
    }
}

impl UnusedId<'_> {
    /// The id, as the 32-bit handle Binder hands to userspace.
    pub fn as_u32(&self) -> u32 {
        // INVARIANT: ids are below `Bitmap::MAX_LEN == i32::MAX`, so they fit.
        self.id as u32
    }

    /// The id as an index.
    pub fn as_usize(&self) -> usize {
        self.id
    }

    /// Marks the id as used and returns it.
    pub fn acquire(self) -> usize {
        self.pool.map.set_bit(self.id);
        self.id
    }
}

impl Default for IdPool {
    fn default() -> Self {
        Self::new()
    }
}

impl IdPool {
    /// An empty pool of [`MIN_CAPACITY`] ids. Needs no allocation.
    pub fn new() -> Self {
        IdPool {
            map: Bitmap::new(MIN_CAPACITY, Gfp::Kernel).expect("an inline bitmap needs no memory"),
        }
    }

    /// An empty pool of `max(num_ids, MIN_CAPACITY)` ids.
    ///
    /// Fails when the bitmap cannot be allocated, including when
    /// `num_ids > Bitmap::MAX_LEN`.
    pub fn with_capacity(num_ids: usize, gfp: Gfp) -> Result<Self, AllocError> {
        Ok(IdPool {
            map: Bitmap::new(num_ids.max(MIN_CAPACITY), gfp)?,
        })
    }

    /// The number of ids the pool can hold without growing.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.map.len()
    }

    /// Whether `id` is acquired.
    #[inline]
    pub fn is_used(&self, id: usize) -> bool {
        self.map.test_bit(id)
    }

    /// The acquired ids, in increasing order.
    pub fn used_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.map.iter_ones()
    }

    /// The smallest unused id in `[offset, capacity)`, or `None` when the pool
    /// has no unused id there (including when `offset >= capacity`).
    /// Changes nothing until [`UnusedId::acquire`].
    pub fn find_unused_id(&mut self, offset: usize) -> Option<UnusedId<'_>> {
        let id = self.map.next_zero_bit(offset)?;
        Some(UnusedId { id, pool: self })
    }

    /// Releases `id`. It does not check that the id was acquired; an id
    /// outside the capacity is ignored, as [`Bitmap::clear_bit`] documents.
    #[inline]
    pub fn release_id(&mut self, id: usize) {
        self.map.clear_bit(id);
    }

    /// A request to double the capacity, or `None` when that would exceed
    /// [`Bitmap::MAX_LEN`] (so from 64 ids the ceiling is 2^30).
    ///
    /// It does not check whether the pool is full.
    pub fn grow_request(&self) -> Option<ReallocRequest> {
        let num_ids = self.capacity().checked_mul(2)?;
        (num_ids <= Bitmap::MAX_LEN).then_some(ReallocRequest { num_ids })
    }

    /// Commits a grow: takes the resizer's capacity, keeping every set bit.
    ///
    /// If the resizer is not larger than the current capacity (another thread
    /// grew the pool while the lock was dropped), it is dropped and nothing
    /// changes. The new capacity may be more than twice the old one when the
    /// pool shrank meanwhile.
    pub fn grow(&mut self, mut resizer: PoolResizer) {
        if resizer.new.len() <= self.capacity() {
            return;
        }
        resizer.new.copy_and_extend(&self.map);
        // INVARIANT: the new map is longer, so every set bit was copied.
        self.map = resizer.new;
    }

    /// A request to shrink, or `None` when the pool should keep its capacity.
    ///
    /// - capacity <= 64: `None`;
    /// - no id acquired: 64;
    /// - the highest acquired id is >= capacity / 4: `None`;
    /// - otherwise `max(64, capacity / 2)`.
    ///
    /// It looks for the highest set bit, so it costs O(capacity).
    #[inline]
    pub fn shrink_request(&self) -> Option<ReallocRequest> {
        let cap = self.capacity();
        if cap <= MIN_CAPACITY {
            return None;
        }
        let Some(last) = self.map.last_bit() else {
            return Some(ReallocRequest {
                num_ids: MIN_CAPACITY,
            });
        };
        if last >= cap / 4 {
            return None;
        }
        Some(ReallocRequest {
            num_ids: (cap / 2).max(MIN_CAPACITY),
        })
    }

    /// Commits a shrink, after re-validating it against the current state.
    ///
    /// [`IdPool::shrink_request`] is recomputed now. If it is `None`, or asks
    /// for more ids than the resizer holds, nothing changes. Otherwise the map
    /// becomes the resizer's, with every set bit copied over: the recomputed
    /// request guarantees that the highest set bit fits.
    ///
    /// # Quirk: a shrink can raise the capacity
    ///
    /// Like the kernel, this compares the resizer with the *recomputed*
    /// target, not with the current capacity. If another thread shrank the
    /// pool further while this resizer was being allocated, the commit
    /// installs the (larger) resizer and the capacity goes *up*. No id is lost
    /// and the next release shrinks it again. We keep this behaviour because
    /// the kernel has it; the oracle models it.
    pub fn shrink(&mut self, mut resizer: PoolResizer) {
        let Some(target) = self.shrink_request() else {
            return;
        };
        if target.num_ids > resizer.new.len() {
            return;
        }
        resizer.new.copy_and_extend(&self.map);
        // INVARIANT: `target <= resizer.len()` and the highest set bit is below
        // `capacity / 4 <= target`, so no set bit was dropped.
        self.map = resizer.new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool_with(capacity: usize, ids: &[usize]) -> IdPool {
        let mut pool = IdPool::with_capacity(capacity, Gfp::Kernel).unwrap();
        for &id in ids {
            pool.map.set_bit(id);
        }
        pool
    }

    fn grown(pool: &mut IdPool) {
        let resizer = pool.grow_request().unwrap().realloc(Gfp::Kernel).unwrap();
        pool.grow(resizer);
    }

    #[test]
    fn new_is_64_inline_and_with_capacity_rounds_up() {
        let pool = IdPool::new();
        assert_eq!(pool.capacity(), 64);
        assert!(pool.map.is_inline());
        assert_eq!(
            IdPool::with_capacity(0, Gfp::Kernel).unwrap().capacity(),
            64
        );
        assert_eq!(
            IdPool::with_capacity(65, Gfp::Kernel).unwrap().capacity(),
            65
        );
        // Up to 64 ids nothing is allocated, so an injected failure cannot bite.
        assert_eq!(IdPool::with_capacity(64, Gfp::Fail).unwrap().capacity(), 64);
        assert_eq!(IdPool::with_capacity(65, Gfp::Fail), Err(AllocError));
        assert_eq!(
            IdPool::with_capacity(Bitmap::MAX_LEN + 1, Gfp::Kernel),
            Err(AllocError)
        );
    }

    #[test]
    fn find_unused_id_respects_offset_and_changes_nothing() {
        let mut pool = pool_with(128, &[0, 1, 2, 64]);
        let before = pool.clone();
        assert_eq!(pool.find_unused_id(0).map(|u| u.as_usize()), Some(3));
        assert_eq!(pool.find_unused_id(64).map(|u| u.as_u32()), Some(65));
        assert_eq!(pool.find_unused_id(127).map(|u| u.as_u32()), Some(127));
        assert_eq!(pool, before, "dropping an UnusedId must change nothing");
        assert!(pool.find_unused_id(128).is_none(), "offset == capacity");
        assert!(pool.find_unused_id(usize::MAX).is_none());
    }

    #[test]
    fn release_of_unset_or_out_of_range_id_is_a_no_op() {
        let mut pool = pool_with(64, &[5]);
        let before = pool.clone();
        pool.release_id(6);
        pool.release_id(64);
        pool.release_id(usize::MAX);
        assert_eq!(pool, before);
        pool.release_id(5);
        assert_eq!(pool.used_ids().count(), 0);
    }

    #[test]
    fn grow_doubles_and_keeps_bits_across_the_inline_heap_switch() {
        let mut pool = pool_with(64, &(0..64).collect::<Vec<_>>());
        assert!(pool.find_unused_id(0).is_none());
        assert_eq!(pool.grow_request().map(|r| r.num_ids()), Some(128));
        grown(&mut pool);
        assert_eq!(pool.capacity(), 128);
        assert!(!pool.map.is_inline());
        assert_eq!(
            pool.used_ids().collect::<Vec<_>>(),
            (0..64).collect::<Vec<_>>()
        );
        assert_eq!(pool.find_unused_id(1).unwrap().acquire(), 64);
    }

    #[test]
    fn grow_request_stops_at_2_pow_30_without_allocating() {
        // A pool at the ceiling is built without allocating 2^31 bits: the
        // request is computed from the capacity alone.
        let pool = IdPool::with_capacity(1 << 30, Gfp::Kernel).unwrap();
        assert_eq!(pool.grow_request(), None);
        let pool = IdPool::with_capacity(1 << 29, Gfp::Kernel).unwrap();
        assert_eq!(pool.grow_request().map(|r| r.num_ids()), Some(1 << 30));
    }

    #[test]
    fn stale_grow_is_ignored() {
        let mut pool = IdPool::new();
        let request = pool.grow_request().unwrap();
        grown(&mut pool); // another thread grew to 128 meanwhile
        pool.map.set_bit(100);
        let before = pool.clone();
        pool.grow(request.realloc(Gfp::Kernel).unwrap()); // 128 is not larger
        assert_eq!(pool, before);
    }

    #[test]
    fn grow_after_a_concurrent_shrink_more_than_doubles() {
        let mut pool = pool_with(256, &[3]);
        let request = pool.grow_request().unwrap(); // 512
        let shrink = pool.shrink_request().unwrap();
        assert_eq!(shrink.num_ids(), 128);
        pool.shrink(shrink.realloc(Gfp::Kernel).unwrap());
        assert_eq!(pool.capacity(), 128);
        pool.grow(request.realloc(Gfp::Kernel).unwrap());
        assert_eq!(pool.capacity(), 512);
        assert_eq!(pool.used_ids().collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn shrink_request_policy_and_its_boundaries() {
        assert_eq!(IdPool::new().shrink_request(), None, "capacity 64");
        let req = |cap, ids: &[usize]| pool_with(cap, ids).shrink_request().map(|r| r.num_ids());
        assert_eq!(req(65, &[]), Some(64));
        assert_eq!(req(128, &[]), Some(64));
        assert_eq!(req(1024, &[]), Some(64));
        // last bit just below capacity / 4 shrinks to half, at it does not.
        assert_eq!(req(128, &[31]), Some(64));
        assert_eq!(req(128, &[32]), None);
        assert_eq!(req(1024, &[255]), Some(512));
        assert_eq!(req(1024, &[256]), None);
        assert_eq!(req(129, &[31]), Some(64), "129 / 4 == 32");
        assert_eq!(req(129, &[32]), None);
        assert_eq!(req(127, &[30]), Some(64), "max(64, 63)");
        assert_eq!(req(127, &[31]), None, "127 / 4 == 31");
    }

    #[test]
    fn shrink_back_to_inline_keeps_bits() {
        let mut pool = pool_with(128, &[0, 31]);
        pool.shrink(pool.shrink_request().unwrap().realloc(Gfp::Kernel).unwrap());
        assert_eq!(pool.capacity(), 64);
        assert!(pool.map.is_inline());
        assert_eq!(pool.used_ids().collect::<Vec<_>>(), [0, 31]);
    }

    #[test]
    fn stale_shrink_is_revalidated() {
        // The shrink was requested when the pool was nearly empty; meanwhile
        // an id high in the map was acquired. Committing would lose it.
        let mut pool = pool_with(1024, &[1]);
        let resizer = pool.shrink_request().unwrap().realloc(Gfp::Kernel).unwrap();
        assert_eq!(resizer.len(), 512);
        pool.map.set_bit(700);
        let before = pool.clone();
        pool.shrink(resizer);
        assert_eq!(
            pool, before,
            "a shrink that would drop id 700 must not commit"
        );

        // Meanwhile the pool emptied further: the target is now 64, smaller
        // than the resizer, which is still safe to install.
        let mut pool = pool_with(1024, &[200]);
        let resizer = pool.shrink_request().unwrap().realloc(Gfp::Kernel).unwrap();
        pool.release_id(200);
        pool.map.set_bit(2);
        pool.shrink(resizer);
        assert_eq!(pool.capacity(), 512);
        assert_eq!(pool.used_ids().collect::<Vec<_>>(), [2]);

        // Meanwhile the pool grew: the target is larger than the resizer.
        let mut pool = pool_with(256, &[10]);
        let resizer = pool.shrink_request().unwrap().realloc(Gfp::Kernel).unwrap();
        assert_eq!(resizer.len(), 128);
        pool.map.set_bit(100); // last bit 100 >= 64: no shrink at all now
        let before = pool.clone();
        pool.shrink(resizer);
        assert_eq!(pool, before);
    }

    #[test]
    fn shrink_can_raise_the_capacity_like_the_kernel() {
        let mut pool = pool_with(1024, &[3]);
        let stale = pool.shrink_request().unwrap().realloc(Gfp::Kernel).unwrap(); // 512
        for _ in 0..2 {
            let r = pool.shrink_request().unwrap().realloc(Gfp::Kernel).unwrap();
            pool.shrink(r);
        }
        assert_eq!(pool.capacity(), 256);
        pool.shrink(stale);
        assert_eq!(pool.capacity(), 512);
        assert_eq!(pool.used_ids().collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn failed_realloc_leaves_the_pool_unchanged() {
        let pool = pool_with(64, &[0, 1]);
        let before = pool.clone();
        assert_eq!(
            pool.grow_request().unwrap().realloc(Gfp::Fail),
            Err(AllocError)
        );
        assert_eq!(pool, before);
    }
}
