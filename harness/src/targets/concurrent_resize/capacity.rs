//! The capacity the pool must have after every critical section of the
//! concurrent target, computed from the state at that moment: the model's
//! handles, the policy formulas of `docs/spec.md` ([`crate::oracle`]), the version's
//! rules ([`crate::history`]) and, at a commit, the size the committing
//! thread asked for when it dropped the lock and whether its allocation
//! failed. Nothing here reads the allocator.
//!
//! A grow is asked for at the critical section that found the pool full,
//! from the capacity then; a shrink at the section that released the last
//! reference (C: at its own `shrink-request` section), from the capacity
//! and the highest set bit then. The commit, later, takes the size it was
//! given if the pool still wants it (the commit rules of `docs/spec.md`, as
//! `pool_ops`' `PoolModel` states them), and any other
//! critical section leaves the capacity as it is.

use super::program::Pool;
use crate::check::Phase;
use crate::history::{self, Rules};
use crate::model::HandleModel;
use crate::oracle::{self, CGrow, Policy};
use idpool::{AllocSite, Version};

/// The modelled capacity of one concurrent run.
pub(super) struct CapacityModel {
    /// `None` for the augmented tree, which has no capacity.
    policy: Option<Policy>,
    rules: Rules,
    /// Whether the last release asks for a shrink (not the shrinker's).
    shrinks_on_release: bool,
    /// 0 for the augmented tree and for a disabled dbitmap.
    pub(super) cap: usize,
    /// Whether the version's reserved bit 0 is still set.
    bit_zero: bool,
    /// Per thread: the size asked for at its last lock drop, if a resize.
    asked: Vec<Option<usize>>,
    /// Per thread: whether its last allocation was made to fail.
    failed: Vec<bool>,
}

impl CapacityModel {
    pub(super) fn new(pool: Pool, version: Version, threads: usize) -> Self {
        let rules = history::rules(version);
        let policy = match pool {
            Pool::AugmentedTree => None,
            Pool::DBitmap => Some(Policy::C),
            Pool::IdPool | Pool::FastPool | Pool::Shrinker => Some(Policy::Rust),
        };
        CapacityModel {
            policy,
            rules,
            shrinks_on_release: pool != Pool::Shrinker,
            cap: if policy.is_some() { oracle::MIN } else { 0 },
            bit_zero: policy.is_some() && rules.bit_zero_reserved,
            asked: vec![None; threads],
            failed: vec![false; threads],
        }
    }

    /// The highest set bit of the pool: the highest handle, or the
    /// reserved bit 0; after a corruption, the highest bit of the model's
    /// record of the bits (`record`, see `corrupt.rs`), whatever holds it.
    fn last_bit(&self, model: &HandleModel, record: Option<Option<usize>>) -> Option<usize> {
        if let Some(last) = record {
            return last;
        }
        let zero = self.bit_zero.then_some(0);
        model.highest().map(|h| h as usize).max(zero)
    }

    /// `shrink_nbits` of the version, or `None`: the target of `docs/spec.md`, plus
    /// v3's shrink with the last bit exactly at a quarter.
    fn shrink_target(&self, model: &HandleModel, record: Option<Option<usize>>) -> Option<usize> {
        let policy = self.policy?;
        if self.cap == 0 || !self.shrinks_on_release {
            return None;
        }
        let last = self.last_bit(model, record);
        let at_quarter =
            self.rules.shrink_at_quarter && self.cap > oracle::MIN && last == Some(self.cap / 4);
        oracle::shrink_target(policy, self.cap, last).or_else(|| at_quarter.then_some(self.cap / 2))
    }

    /// A setup insert (no failure, no other thread) got `handle`: the pool
    /// grew until it had room.
    pub(super) fn setup_insert(&mut self, handle: u32) {
        if let Some(policy) = self.policy {
            while self.cap <= handle as usize {
                self.cap = oracle::grow_target(policy, self.cap).expect("setup stays small");
            }
        }
    }

    /// A setup release of a last reference: one shrink, if asked for.
    pub(super) fn setup_release(&mut self, model: &HandleModel) {
        if let Some(target) = self.shrink_target(model, None) {
            self.cap = target;
        }
    }

    /// Thread `t`'s next allocation fails or not.
    pub(super) fn allocating(&mut self, t: usize, fail: bool) {
        self.failed[t] = fail;
    }

    /// A handle was released for good: the reserved bit 0 goes with
    /// handle 0 where the version clears it.
    pub(super) fn released(&mut self, handle: u32) {
        if handle == 0 && !self.rules.bit_zero_kept_on_release {
            self.bit_zero = false;
        }
    }

    /// Thread `t` ran a critical section of phase `phase` (the model
    /// already updated to it); `next` is where its operation allocates
    /// next, if it does; `record` is the highest bit of the corruption
    /// record once there is one. Returns the capacity the pool must have
    /// now.
    pub(super) fn section(
        &mut self,
        t: usize,
        phase: Phase,
        next: Option<AllocSite>,
        model: &HandleModel,
        record: Option<Option<usize>>,
    ) -> usize {
        let asked = self.asked[t].take();
        // What `shrink_nbits` says now, which a shrink commit re-reads.
        let target = self.shrink_target(model, record);
        match (self.policy, phase, asked) {
            // `IdPool::grow`: a larger map replaces the pool, a stale one is
            // dropped. A failed allocation never commits (stated here too,
            // not left to the allocator's type: a `realloc` that wrongly
            // succeeded must not move the model).
            (Some(Policy::Rust), Phase::GrowCommit, Some(len))
                if oracle::alloc_ok(Policy::Rust, len, self.failed[t]) =>
            {
                self.cap = self.cap.max(len)
            }
            (Some(Policy::C), Phase::GrowCommit, Some(len)) => {
                let ok = oracle::alloc_ok(Policy::C, len, self.failed[t]);
                match oracle::c_grow_commit(self.cap, len, !ok) {
                    CGrow::Keep => {}
                    CGrow::Install => self.cap = len,
                    CGrow::Disable => {
                        self.cap = 0;
                        self.bit_zero = false;
                    }
                }
            }
            // `IdPool::shrink` recomputes the target and takes any map at
            // least that large (even one larger than the pool).
            (Some(Policy::Rust), Phase::ShrinkCommit, Some(len))
                if oracle::alloc_ok(Policy::Rust, len, self.failed[t])
                    && target.is_some_and(|target| target <= len) =>
            {
                self.cap = len
            }
            // `dbitmap_shrink`: returns at once on a NULL map (a failed
            // `bitmap_zalloc`, which C reaches the commit with), else
            // installs only a map of exactly the size
            // `dbitmap_shrink_nbits` says now.
            (Some(Policy::C), Phase::ShrinkCommit, Some(len))
                if oracle::alloc_ok(Policy::C, len, self.failed[t]) && target == Some(len) =>
            {
                self.cap = len
            }
            _ => {}
        }
        self.asked[t] = match (self.policy, next) {
            (Some(policy), Some(AllocSite::Grow)) => oracle::grow_target(policy, self.cap),
            (Some(_), Some(AllocSite::Shrink)) => self.shrink_target(model, record),
            _ => None,
        };
        self.cap
    }

    /// Whether the version's reserved bit 0 is set now (without
    /// corruption).
    pub(super) fn bit_zero(&self) -> bool {
        self.bit_zero
    }

    /// A reclaim set the capacity to `cap` (checked by the caller).
    pub(super) fn reclaimed(&mut self, cap: usize) {
        self.cap = cap;
    }
}
