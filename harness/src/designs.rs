//! The three alternative designs beside mainline: what each must share with
//! it, and the rules each has of its own.
//!
//! - [`FastPool`] must agree with [`IdPool`] on every observable. In
//!   `pool_ops` both are driven by the same operations (its `Twin`): the
//!   model checks mainline, and every answer of the fast pool is compared
//!   with mainline's (ids, requests, allocation outcomes, capacities, used
//!   ids), plus the fast pool's own invariants. In the table targets it has
//!   mainline's model, capacity included (it makes the same allocations).
//! - [`AugmentedTree`] hands out mainline's ids and outcomes, has no
//!   capacity (0, never a resize) and refuses an id only at 2^30
//!   ([`TREE_ID_LIMIT`]).
//! - [`Shrinker`] hands out mainline's ids; its capacity doubles when an
//!   insert finds it full, never changes on release, and after a reclaim
//!   is [`reclaimed_capacity`], a formula of this module.
//!
//! [`Design`] is what the table runners need of a flavour beyond
//! [`Flavour`]: the memory-pressure callback (the shrinker's only) and a
//! design's own invariant check.

use crate::bits::PoolBits;
use crate::check::FlavourName;
use crate::oracle::MIN;
use idpool::{
    AugmentedTree, DBitmap, FastPool, Flavour, Gfp, HandleTable, IdPool, LinearScan, NodeRefs,
    SharedHandleTable, Shrinker, Version,
};

/// The smallest handle the augmented tree refuses: mainline's ceiling of
/// 2^30 ids (an `IdPool` of 2^30 ids cannot grow, `i32::MAX` being the
/// longest bitmap), restated here rather than read from the tree.
pub const TREE_ID_LIMIT: u32 = 1 << 30;

/// The shrinker's capacity after a reclaim of a pool of `cap` ids whose
/// highest used id is `last`, when every allocation fails (`fail`) or none
/// does.
///
/// Stated as a choice rather than as a loop: of the halving chain `cap,
/// cap / 2, cap / 4, ...` (the capacities above 64), the reclaim ends at
/// the *largest* one whose quarter is at or below the highest used id
/// (every shrink step needs the highest id below the quarter); at 64 when
/// no capacity of the chain qualifies or nothing is used. A pool of 64 ids
/// or fewer is never shrunk. With failing allocations only a map of 64
/// ids, which is inline and needs no memory, can be installed, so the
/// reclaim either reaches 64 in its first step or changes nothing.
pub fn reclaimed_capacity(cap: usize, last: Option<usize>, fail: bool) -> usize {
    if cap <= MIN {
        return cap;
    }
    let chain = (0..usize::BITS).map(|k| cap >> k).take_while(|&c| c > MIN);
    let end = match last {
        None => MIN,
        Some(last) => chain.filter(|&c| c / 4 <= last).max().unwrap_or(MIN),
    };
    if !fail {
        return end;
    }
    // The first step asks for half the capacity (64 when nothing is used).
    let first = match last {
        None => MIN,
        Some(last) if last < cap / 4 => (cap / 2).max(MIN),
        Some(_) => cap,
    };
    if first == MIN {
        MIN
    } else {
        cap
    }
}

/// What the table runners need of a flavour beyond [`Flavour`]. Every
/// flavour a table target runs implements it, and the narrowest read of
/// its pool ([`PoolBits`]), which the runners compare with the model one
/// id at a time.
pub trait Design: Flavour + PoolBits {
    /// Its name in failures.
    const FLAVOUR: FlavourName;

    /// The memory-pressure callback on a table, if the flavour has one:
    /// the ids given back.
    fn reclaim_table(table: &mut HandleTable<Self>) -> Option<usize> {
        let _ = table;
        None
    }

    /// The callback on a table behind the real lock
    /// ([`SharedHandleTable`]), if the flavour has one.
    fn reclaim_shared(table: &SharedHandleTable<Self>) -> Option<usize> {
        let _ = table;
        None
    }

    /// The callback in one critical section of the shared state, with the
    /// flags of its allocations.
    fn reclaim_refs(refs: &mut NodeRefs<Self>, gfp: Gfp) -> Option<usize> {
        let _ = (refs, gfp);
        None
    }

    /// The design's own invariants (its summaries, counters, tree shape).
    fn check_design(&self) -> Result<(), String> {
        Ok(())
    }

    /// How many ids the memory-pressure callback would give back now (a
    /// kernel shrinker's `count_objects`), for a flavour that has the
    /// callback.
    fn reclaimable_ids(&self) -> Option<usize> {
        None
    }

    /// The version the pool itself says it follows, for a pool whose
    /// rules depend on one (the dbitmap: bit 0, the shrink threshold).
    fn pool_version(&self) -> Option<Version> {
        None
    }

    /// The design's capacity rule for one critical section of a table
    /// operation (not a reclaim) that took the capacity from `before` to
    /// `after`; for a runner with no capacity model of its own.
    fn capacity_rule(before: usize, after: usize) -> Result<(), String> {
        let _ = (before, after);
        Ok(())
    }
}

/// How the versions `refs` reports (its own, and its pool's where the pool
/// keeps one) differ from `built_for`, or `None`: the check of
/// [`crate::check::Check::Version`] for every table runner.
pub fn version_mismatch<F: Design>(refs: &NodeRefs<F>, built_for: Version) -> Option<String> {
    reported_versions(built_for, refs.version(), refs.pool().pool_version())
}

/// [`version_mismatch`] on the versions read.
fn reported_versions(built_for: Version, table: Version, pool: Option<Version>) -> Option<String> {
    (table != built_for || pool.is_some_and(|v| v != built_for)).then(|| {
        let pool = pool.map_or(String::new(), |v| format!(" and its pool {v}"));
        format!("built for {built_for}, the table reports {table}{pool}")
    })
}

/// How the table's word on its process's death differs from the model's,
/// or `None`: the check of [`crate::check::Check::Death`] for every table
/// runner.
pub fn death_mismatch(table_dead: bool, model_dead: bool) -> Option<String> {
    let life = |dead: bool| if dead { "dead" } else { "alive" };
    (table_dead != model_dead).then(|| {
        format!(
            "the table says the process is {}, the model {}",
            life(table_dead),
            life(model_dead)
        )
    })
}

impl Design for IdPool {
    const FLAVOUR: FlavourName = FlavourName::IdPool;
}
impl Design for DBitmap {
    const FLAVOUR: FlavourName = FlavourName::DBitmap;
    fn pool_version(&self) -> Option<Version> {
        Some(self.version())
    }
}
impl Design for LinearScan {
    const FLAVOUR: FlavourName = FlavourName::Linear;
}

impl Design for FastPool {
    const FLAVOUR: FlavourName = FlavourName::FastPool;
    fn check_design(&self) -> Result<(), String> {
        self.check_invariants()
    }
}

impl Design for AugmentedTree {
    const FLAVOUR: FlavourName = FlavourName::Augmented;
    fn check_design(&self) -> Result<(), String> {
        self.check_invariants()
    }
    /// No capacity, ever.
    fn capacity_rule(before: usize, after: usize) -> Result<(), String> {
        match (before, after) {
            (0, 0) => Ok(()),
            _ => Err(format!(
                "the augmented tree has a capacity: {before} -> {after}"
            )),
        }
    }
}

impl Design for Shrinker {
    const FLAVOUR: FlavourName = FlavourName::Shrinker;
    fn reclaim_table(table: &mut HandleTable<Self>) -> Option<usize> {
        Some(table.reclaim())
    }
    fn reclaim_shared(table: &SharedHandleTable<Self>) -> Option<usize> {
        Some(table.reclaim())
    }
    fn reclaim_refs(refs: &mut NodeRefs<Self>, gfp: Gfp) -> Option<usize> {
        Some(refs.reclaim(gfp))
    }
    fn reclaimable_ids(&self) -> Option<usize> {
        Some(self.reclaimable())
    }
    /// Only a grow changes it, by doubling (or more: a stale grow prepared
    /// before a reclaim installs a larger map); only a reclaim lowers it.
    fn capacity_rule(before: usize, after: usize) -> Result<(), String> {
        if after < before {
            return Err(format!(
                "the shrinker shrank outside a reclaim: {before} -> {after}"
            ));
        }
        if after != before && after < 2 * before {
            return Err(format!(
                "the shrinker grew by less than double: {before} -> {after}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::{shrink_target, Policy};

    /// Either the table or its pool reporting another version is a
    /// mismatch, and the message names all three.
    #[test]
    fn a_version_reported_by_the_table_or_its_pool_is_checked() {
        let (v3, june) = (Version::CV3, Version::C2024_06);
        assert_eq!(reported_versions(v3, v3, Some(v3)), None);
        assert_eq!(reported_versions(v3, v3, None), None);
        let said = |table, pool| reported_versions(v3, table, pool);
        assert_eq!(
            said(june, None).as_deref(),
            Some("built for c-v3, the table reports c-2024-06")
        );
        assert_eq!(
            said(v3, Some(june)).as_deref(),
            Some("built for c-v3, the table reports c-v3 and its pool c-2024-06")
        );
        assert!(said(june, Some(v3)).is_some());
        // As built: every table of every version it supports reports it.
        for v in Version::ALL {
            let refs = match v.driver() {
                idpool::Driver::C => version_mismatch(&NodeRefs::<DBitmap>::with_version(v), v),
                idpool::Driver::Rust => version_mismatch(&NodeRefs::<IdPool>::with_version(v), v),
            };
            assert_eq!(refs, None, "{v}");
        }
    }

    /// The reclaim rule against mainline's shrink policy applied step by
    /// step (`IdPool::shrink_request`, as [`shrink_target`] restates it),
    /// for every capacity and highest id of a few pools.
    #[test]
    fn reclaimed_capacity_is_id_pool_shrink_request_until_none() {
        for cap in [1, 64, 65, 100, 128, 129, 256, 1000, 1024, 4096, 1 << 20] {
            for last in (0..cap.min(5000)).map(Some).chain([None]) {
                let mut c = cap;
                while let Some(next) = shrink_target(Policy::Rust, c, last) {
                    c = next;
                }
                assert_eq!(reclaimed_capacity(cap, last, false), c, "{cap} {last:?}");
                let first = shrink_target(Policy::Rust, cap, last);
                let with_failures = if first == Some(MIN) { MIN } else { cap };
                assert_eq!(
                    reclaimed_capacity(cap, last, true),
                    with_failures,
                    "{cap} {last:?} failing"
                );
            }
        }
    }
}
