//! The memory-pressure callback of the [`Shrinker`] flavour, on the table.
//!
//! It lives in the `table` module because it reaches the pool inside
//! [`NodeRefs`], which the table keeps private.

use super::{HandleTable, NodeRefs, SharedHandleTable};
use crate::alloc::{AllocSite, Gfp};
use crate::shrinker::Shrinker;

impl NodeRefs<Shrinker> {
    /// Shrinks the pool as far as the policy allows, under the lock the
    /// caller holds; see [`Shrinker::reclaim`]. Returns the ids given back.
    pub fn reclaim(&mut self, gfp: Gfp) -> usize {
        self.pool.reclaim(gfp)
    }
}

impl HandleTable<Shrinker> {
    /// The shrinker's callback: [`NodeRefs::reclaim`] with the flags the
    /// table's fault plan hands out for one [`AllocSite::Shrink`] allocation
    /// (a failure stops the reclaim at once). It is a critical section:
    /// planned corruptions are applied first.
    pub fn reclaim(&mut self) -> usize {
        self.refs.apply_corruptions(&self.faults);
        let gfp = self.faults.next(AllocSite::Shrink);
        self.refs.reclaim(gfp)
    }
}

impl SharedHandleTable<Shrinker> {
    /// [`HandleTable::reclaim`] under the lock.
    pub fn reclaim(&self) -> usize {
        let gfp = self.faults().next(AllocSite::Shrink);
        self.with_refs(|refs| {
            refs.apply_corruptions(self.faults());
            refs.reclaim(gfp)
        })
    }
}
