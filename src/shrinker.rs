//! [`IdPool`] without the shrink check on release: the pool shrinks only
//! when memory is reclaimed, the "shrinker" named as future work upstream.
//!
//! # The idea
//!
//! Mainline asks [`IdPool::shrink_request`] after every release, which looks
//! for the highest set bit: O(capacity) per release, O(n^2) for a FIFO
//! teardown. A [`Shrinker`] releases in O(1) and never asks. Memory comes
//! back when the kernel is short of it: [`Shrinker::reclaim`] is the
//! shrinker's `scan_objects` callback, and shrinks the pool as far as
//! [`IdPool`]'s policy allows, one policy step at a time.
//! [`Shrinker::reclaimable`] is `count_objects`.
//!
//! # Ids, outcomes and capacity
//!
//! The ids are mainline's: a pool hands out the smallest free id at or
//! above the start within its capacity and grows when it has none, so the
//! capacity never changes which id is handed out, only when the pool grows.
//! For the same reason the outcomes are mainline's as long as no allocation
//! fails: an insert fails with `ENOMEM` only at the 2^30 ceiling, as in
//! mainline. (With injected failures they differ, because the two make
//! different allocations: mainline allocates on shrinks and re-grows after
//! them, the shrinker does neither.)
//!
//! The capacity has its own rule:
//! - it doubles when an insert finds the pool full (as mainline), and never
//!   changes on release;
//! - after [`Shrinker::reclaim`] with no allocation failure it is
//!   [`Shrinker::policy_fixed_point`] of the capacity and the highest used id:
//!   `shrink_request` is applied until it says `None`, so the result is 64, or
//!   the first capacity (halving from the old one) whose quarter is at or
//!   below the highest used id. A failed allocation stops the reclaim where
//!   it is.
//!
//! # Concurrency
//!
//! `reclaim` runs entirely under the table's lock (a shrinker callback takes
//! the lock and allocates without sleeping, `GFP_NOWAIT` in the kernel), so
//! it has no window: each shrink is requested, allocated and committed in
//! one critical section and can never be stale. Grows keep mainline's
//! unlocked protocol.
//!
//! # What it costs
//!
//! Exactly [`IdPool`]'s memory, but the map stays at its high-water mark
//! until memory is reclaimed: a process that once held 100k handles keeps
//! 16 KiB of map until then.
//!
//! # Invariants
//!
//! Those of [`IdPool`], plus: the capacity only goes down in
//! [`Shrinker::reclaim`].

use crate::alloc::{AllocError, Corruption, Gfp};
use crate::id_pool::{IdPool, PoolResizer, ReallocRequest, MIN_CAPACITY};
use crate::table::{Flavour, RefInfo};
use std::collections::BTreeMap;

/// An [`IdPool`] that shrinks only when asked to [`Shrinker::reclaim`].
///
/// # Examples
///
/// ```
/// use idpool::{Gfp, Shrinker};
///
/// let mut pool = Shrinker::new();
/// for _ in 0..1000 {
///     pool.acquire_next(0)?;
/// }
/// assert_eq!(pool.capacity(), 1024);
/// for id in 0..1000 {
///     pool.release_id(id); // O(1): no shrink check
/// }
/// assert_eq!(pool.capacity(), 1024);
/// assert_eq!(pool.reclaimable(), 1024 - 64);
/// assert_eq!(pool.reclaim(Gfp::Kernel), 1024 - 64);
/// assert_eq!(pool.capacity(), 64);
/// # Ok::<(), idpool::AllocError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shrinker {
    pool: IdPool,
}

impl Shrinker {
    /// An empty pool of 64 ids, like [`IdPool::new`].
    pub fn new() -> Self {
        Shrinker {
            pool: IdPool::new(),
        }
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: IdPool) -> Self {
        Shrinker { pool }
    }

    /// The pool inside.
    pub fn pool(&self) -> &IdPool {
        &self.pool
    }

    /// See [`IdPool::capacity`].
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// See [`IdPool::is_used`].
    pub fn is_used(&self, id: usize) -> bool {
        self.pool.is_used(id)
    }

    /// See [`IdPool::used_ids`].
    pub fn used_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.pool.used_ids()
    }

    /// Acquires the smallest free id `>= offset`, growing (with
    /// [`Gfp::Kernel`]) while the pool is full. Fails at the 2^30 ceiling.
    pub fn acquire_next(&mut self, offset: usize) -> Result<usize, AllocError> {
        loop {
            if let Some(id) = self.pool.find_unused_id(offset) {
                return Ok(id.acquire());
            }
            let request = self.pool.grow_request().ok_or(AllocError)?;
            self.pool.grow(request.realloc(Gfp::Kernel)?);
        }
    }

    /// Releases `id`, with no shrink check: O(1).
    pub fn release_id(&mut self, id: usize) {
        self.pool.release_id(id);
    }

    /// See [`IdPool::grow_request`].
    pub fn grow_request(&self) -> Option<ReallocRequest> {
        self.pool.grow_request()
    }

    /// See [`IdPool::grow`].
    pub fn grow(&mut self, resizer: PoolResizer) {
        self.pool.grow(resizer);
    }

    /// The capacity [`IdPool`]'s policy ends at when applied until it stops:
    /// 64 when nothing is used, else halve (never below 64) while the highest
    /// used id is below a quarter of the capacity.
    pub fn policy_fixed_point(capacity: usize, highest_used: Option<usize>) -> usize {
        let mut cap = capacity;
        loop {
            if cap <= MIN_CAPACITY {
                return cap;
            }
            match highest_used {
                None => return MIN_CAPACITY,
                Some(last) if last >= cap / 4 => return cap,
                Some(_) => cap = (cap / 2).max(MIN_CAPACITY),
            }
        }
    }

    /// How many ids [`Shrinker::reclaim`] would give back (`count_objects`).
    /// O(capacity): it looks for the highest used id.
    pub fn reclaimable(&self) -> usize {
        let last = self.pool.used_ids().last();
        self.capacity() - Self::policy_fixed_point(self.capacity(), last)
    }

    /// Shrinks as far as the policy allows (`scan_objects`), one
    /// `shrink_request` / `realloc` / `shrink` step at a time under the
    /// caller's lock; stops at the first failed allocation. Returns the
    /// number of ids given back.
    pub fn reclaim(&mut self, gfp: Gfp) -> usize {
        let before = self.capacity();
        while let Some(request) = self.pool.shrink_request() {
            let Ok(resizer) = request.realloc(gfp) else {
                break;
            };
            self.pool.shrink(resizer);
            // INVARIANT: nothing ran since the request, so the shrink
            // committed and the capacity went down; the loop ends.
            debug_assert_eq!(self.capacity(), request.num_ids());
        }
        before - self.capacity()
    }
}

/// The shrinker in the handle table: [`IdPool`]'s flavour whose
/// `shrink_request` (asked after every release) is always `None`. The table
/// never shrinks it; [`Shrinker::reclaim`] does, from outside the table's
/// operations.
impl Flavour for Shrinker {
    const NAME: &'static str = "shrinker";
    type Request = ReallocRequest;
    type Resizer = PoolResizer;

    fn new_pool() -> Self {
        Shrinker::new()
    }
    /// [`IdPool`]'s: the bits are the wrapped pool's.
    fn corrupt(&mut self, corruption: Corruption) {
        <IdPool as Flavour>::corrupt(&mut self.pool, corruption);
    }
    fn find_unused(&mut self, start: u32, by_handle: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        <IdPool as Flavour>::find_unused(&mut self.pool, start, by_handle)
    }
    fn acquire(&mut self, id: u32) {
        <IdPool as Flavour>::acquire(&mut self.pool, id);
    }
    // The rest goes through the shrinker's own public methods, as a user
    // of `Shrinker` would, so that they are what the harness checks.
    fn release(&mut self, id: u32) {
        Shrinker::release_id(self, id as usize);
    }
    fn grow_request(&self) -> Option<ReallocRequest> {
        Shrinker::grow_request(self)
    }
    fn realloc(request: &ReallocRequest, gfp: Gfp) -> Result<PoolResizer, AllocError> {
        request.realloc(gfp)
    }
    fn grow(&mut self, resizer: PoolResizer) {
        Shrinker::grow(self, resizer);
    }
    /// Always `None`: no shrink check on release.
    fn shrink_request(&self) -> Option<ReallocRequest> {
        None
    }
    fn shrink(&mut self, resizer: PoolResizer) {
        self.pool.shrink(resizer);
    }
    fn capacity(&self) -> usize {
        Shrinker::capacity(self)
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        Some(Shrinker::used_ids(self).map(|id| id as u32).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_fixed_point_is_shrink_request_iterated() {
        let cases = [
            (64, None, 64),
            (1024, None, 64),
            (1024, Some(0), 64),
            (1024, Some(255), 512),
            (1024, Some(256), 1024),
            (1024, Some(63), 128),
            (1024, Some(64), 256),
            (1024, Some(15), 64),
            (129, Some(31), 64),
            (129, Some(32), 129),
        ];
        for (cap, last, expected) in cases {
            assert_eq!(
                Shrinker::policy_fixed_point(cap, last),
                expected,
                "{cap} {last:?}"
            );
            let mut pool = Shrinker::from_pool(IdPool::with_capacity(cap, Gfp::Kernel).unwrap());
            if let Some(last) = last {
                for _ in 0..=last {
                    pool.acquire_next(0).unwrap();
                }
                for id in 0..last {
                    pool.release_id(id);
                }
            }
            assert_eq!(pool.reclaimable(), cap - expected);
            assert_eq!(pool.reclaim(Gfp::Kernel), cap - expected);
            assert_eq!(pool.capacity(), expected);
            assert_eq!(
                pool.pool().shrink_request(),
                None,
                "reclaim stops where the policy does"
            );
            assert_eq!(
                pool.used_ids().collect::<Vec<_>>(),
                last.into_iter().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn ids_match_idpool_and_capacity_follows_its_own_rule() {
        // The same inserts and releases as mainline (which shrinks after
        // every release): identical ids; the shrinker's capacity only grows
        // until reclaim.
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut rng = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut mainline = IdPool::new();
        let mut shrinker = Shrinker::new();
        let mut high_water = 64;
        for step in 0..20_000 {
            if rng() % 5 < 3 {
                let offset = (rng() % 2) as usize;
                let expected = loop {
                    if let Some(id) = mainline.find_unused_id(offset) {
                        break id.acquire();
                    }
                    let r = mainline.grow_request().unwrap();
                    mainline.grow(r.realloc(Gfp::Kernel).unwrap());
                };
                assert_eq!(shrinker.acquire_next(offset), Ok(expected), "step {step}");
            } else {
                let used: Vec<usize> = mainline.used_ids().collect();
                if used.is_empty() {
                    continue;
                }
                let id = used[(rng() % used.len() as u64) as usize];
                mainline.release_id(id);
                if let Some(r) = mainline.shrink_request() {
                    mainline.shrink(r.realloc(Gfp::Kernel).unwrap());
                }
                shrinker.release_id(id);
            }
            assert!(mainline.used_ids().eq(shrinker.used_ids()), "step {step}");
            // Capacity rule: never below mainline's, only doubles, never shrinks.
            assert!(shrinker.capacity() >= mainline.capacity());
            assert!(shrinker.capacity() == high_water || shrinker.capacity() == high_water * 2);
            high_water = shrinker.capacity();
            if step % 5000 == 4999 {
                let last = shrinker.used_ids().last();
                let target = Shrinker::policy_fixed_point(shrinker.capacity(), last);
                shrinker.reclaim(Gfp::Kernel);
                assert_eq!(shrinker.capacity(), target);
                high_water = target;
            }
        }
    }

    #[test]
    fn a_failed_allocation_stops_reclaim() {
        let mut pool = Shrinker::from_pool(IdPool::with_capacity(1024, Gfp::Kernel).unwrap());
        pool.acquire_next(0).unwrap();
        assert_eq!(pool.reclaim(Gfp::Fail), 0);
        assert_eq!(pool.capacity(), 1024);
        // The last step, to 64 ids, needs no memory: only it succeeds.
        let mut pool = Shrinker::from_pool(IdPool::with_capacity(128, Gfp::Kernel).unwrap());
        assert_eq!(pool.reclaim(Gfp::Fail), 64);
    }
}
