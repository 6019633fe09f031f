//! The three alternative designs beside mainline: what each must share with
//! it, and the rules each has of its own.
//!
//! - [`FastPool`] must agree with [`IdPool`] on every observable. In
//!   `pool_ops` both are driven by the same operations ([`Twin`]): the
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
use crate::check::Check;
use crate::idset::IdSet;
use crate::oracle::MIN;
use crate::pool::{Built, PoolApi, Refused, Resize, Shape, BULK_CAP_LIMIT};
use idpool::{
    AugmentedTree, DBitmap, FastPool, FastRequest, FastResizer, Flavour, Gfp, HandleTable, IdPool,
    LinearScan, NodeRefs, PoolResizer, ReallocRequest, SharedHandleTable, Shrinker, Version,
};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;

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
/// [`Check::Version`] for every table runner.
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

impl Design for IdPool {}
impl Design for DBitmap {
    fn pool_version(&self) -> Option<Version> {
        Some(self.version())
    }
}
impl Design for LinearScan {}

impl Design for FastPool {
    fn check_design(&self) -> Result<(), String> {
        self.check_invariants()
    }
}

impl Design for AugmentedTree {
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

/// The first way the fast pool differed from mainline.
type Divergence = Rc<RefCell<Option<(Check, String)>>>;

/// Mainline and the fast pool driven by the same operations, for
/// `pool_ops`. Every answer is mainline's (which the model checks); every
/// answer of the fast pool is compared with it, and the first difference is
/// kept for the runner ([`PoolApi::take_divergence`]).
///
/// A pool larger than [`BULK_CAP_LIMIT`] is only ever built aside by the
/// ceiling probe, which asks it for its capacity and its grow request and
/// drops it. Building a fast pool reads its whole map (to build the
/// summaries): 256 MiB at the top of the range, tens of milliseconds. So
/// for those sizes the fast pool is really built once per process and
/// size, and its two answers are kept ([`CeilingAnswers`]).
#[derive(Debug)]
pub struct Twin {
    main: IdPool,
    fast: FastPool,
    /// The fast pool's answers, for a pool built at the ceiling.
    ceiling: Option<CeilingAnswers>,
    diverged: Divergence,
}

/// What a fresh fast pool of one size answers: whether it was built, its
/// capacity, its grow request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CeilingAnswers {
    built: bool,
    capacity: usize,
    grow: Option<usize>,
}

impl CeilingAnswers {
    /// A fresh fast pool of `capacity` ids, built once per process and
    /// size: building one of 2^30 ids reads its 128 MiB map to fill the
    /// summaries, so the corpus replay's threads share the answers.
    fn of(capacity: usize) -> CeilingAnswers {
        static SEEN: Mutex<Vec<(usize, CeilingAnswers)>> = Mutex::new(Vec::new());
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(_, a)) = seen.iter().find(|(c, _)| *c == capacity) {
            return a;
        }
        let pool = FastPool::with_capacity(capacity, Gfp::Kernel).ok();
        let a = CeilingAnswers {
            built: pool.is_some(),
            capacity: pool.as_ref().map_or(0, FastPool::capacity),
            grow: pool.and_then(|p| p.grow_request()).map(|r| r.num_ids()),
        };
        seen.push((capacity, a));
        a
    }
}

impl Twin {
    fn note<T: PartialEq + std::fmt::Debug>(
        &self,
        check: Check,
        what: impl std::fmt::Display,
        main: T,
        fast: T,
    ) {
        note(&self.diverged, check, what, main, fast);
    }
}

/// Records the first difference between the two pools' answers; `what`
/// is formatted only then.
fn note<T: PartialEq + std::fmt::Debug>(
    diverged: &Divergence,
    check: Check,
    what: impl std::fmt::Display,
    main: T,
    fast: T,
) {
    let mut slot = diverged.borrow_mut();
    if main != fast && slot.is_none() {
        *slot = Some((
            check,
            format!("fastpool differs from idpool: {what}: idpool {main:?}, fastpool {fast:?}"),
        ));
    }
}

/// A twin resizer: mainline's, the fast pool's (`None` when it made no
/// request, `Some(None)` when its allocation failed), and where to report a
/// difference in what they hold.
#[derive(Debug)]
pub struct TwinResizer {
    main: PoolResizer,
    fast: Option<Option<FastResizer>>,
    diverged: Divergence,
}

/// A twin request: mainline's, the fast pool's (if it made one), and where
/// to report a difference in their allocations.
#[derive(Debug)]
pub struct TwinRequest {
    main: ReallocRequest,
    fast: Option<FastRequest>,
    diverged: Divergence,
}

impl Twin {
    /// Both pools built with `with_capacity(capacity, gfp)`: the fast pool
    /// must build (and refuse) exactly as `IdPool` does, at the same
    /// capacity. When only the fast pool refuses, a fresh one stands in and
    /// the difference stays reported; when `IdPool` refuses, the difference
    /// goes with the refusal. `how` ends the notes' text.
    fn built_alike(capacity: usize, gfp: Gfp, how: &str) -> Built<Twin> {
        let main = IdPool::with_capacity(capacity, gfp);
        let fast = FastPool::with_capacity(capacity, gfp);
        let diverged = Divergence::default();
        note(
            &diverged,
            Check::ResetSucceeds,
            format_args!("pool of {capacity} ids built{how}"),
            main.is_ok(),
            fast.is_ok(),
        );
        let Ok(main) = main else {
            return Err(refused(diverged));
        };
        let twin = Twin {
            main,
            fast: fast.unwrap_or_else(|_| FastPool::new()),
            ceiling: None,
            diverged,
        };
        twin.note(
            Check::Capacity,
            format_args!("capacity after a reset{how}"),
            twin.main.capacity(),
            twin.fast.capacity(),
        );
        Ok(twin)
    }
}

/// `IdPool` refused to build: whatever the fast pool answered differently
/// goes with the refusal.
fn refused(diverged: Divergence) -> Refused {
    Refused {
        divergence: diverged
            .borrow_mut()
            .take()
            .map(|(check, what)| (<FastPool as Flavour>::NAME, check, what)),
    }
}

impl PoolApi for Twin {
    const TARGET: &'static str = "pool_ops";
    const DIRECT_CAPACITY: bool = true;
    type Request = TwinRequest;
    type Resizer = TwinResizer;

    fn reset(capacity: usize) -> Built<Self> {
        if capacity > BULK_CAP_LIMIT {
            let fast = CeilingAnswers::of(capacity);
            let main = IdPool::with_capacity(capacity, Gfp::Kernel);
            let diverged = Divergence::default();
            let what = format!("pool of {capacity} ids built");
            note(
                &diverged,
                Check::CeilingPoolBuilt,
                &what,
                main.is_ok(),
                fast.built,
            );
            let Ok(main) = main else {
                return Err(refused(diverged));
            };
            return Ok(Twin {
                main,
                fast: FastPool::new(),
                ceiling: Some(fast),
                diverged,
            });
        }
        Twin::built_alike(capacity, Gfp::Kernel, "")
    }
    fn grow_target_at(&self, _: u32) -> Option<(usize, Option<bool>)> {
        None
    }
    /// Both built with failing flags: the fast pool must build (and
    /// refuse) exactly as `IdPool` does.
    fn reset_failing(capacity: usize) -> Built<Self> {
        Twin::built_alike(capacity, Gfp::Fail, " with failing flags")
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        let main = self.main.find_unused_id(offset).map(|id| id.acquire());
        let fast = self.fast.find_unused_id(offset).map(|id| id.acquire());
        self.note(Check::AcquiredId, "acquired id", main, fast);
        main
    }
    fn find(&mut self, offset: usize) -> Option<(usize, Option<u32>)> {
        let main = self
            .main
            .find_unused_id(offset)
            .map(|id| (id.as_usize(), Some(id.as_u32())));
        let fast = self
            .fast
            .find_unused_id(offset)
            .map(|id| (id.as_usize(), Some(id.as_u32())));
        self.note(Check::FoundId, "found id (as_usize, as_u32)", main, fast);
        main
    }
    fn release(&mut self, id: usize) {
        self.main.release_id(id);
        self.fast.release_id(id);
    }
    fn request(&self, kind: Resize) -> Option<TwinRequest> {
        let (main, fast) = match kind {
            Resize::Grow => (self.main.grow_request(), self.fast.grow_request()),
            Resize::Shrink => (self.main.shrink_request(), self.fast.shrink_request()),
        };
        let fast_len = match (self.ceiling, kind) {
            (Some(answers), Resize::Grow) => answers.grow,
            _ => fast.map(|r| r.num_ids()),
        };
        self.note(
            Check::RequestedSize,
            format_args!("{kind:?} request"),
            main.map(|r| r.num_ids()),
            fast_len,
        );
        Some(TwinRequest {
            main: main?,
            fast,
            diverged: self.diverged.clone(),
        })
    }
    fn request_len(request: &TwinRequest) -> usize {
        request.main.num_ids()
    }
    fn realloc(request: &TwinRequest, gfp: Gfp) -> Option<Self::Resizer> {
        let main = request.main.realloc(gfp).ok();
        let fast = request.fast.map(|r| r.realloc(gfp).ok());
        if let Some(fast) = &fast {
            note(
                &request.diverged,
                Check::AllocationKept,
                format_args!("allocation of {} ids with {gfp:?}", request.main.num_ids()),
                main.is_some(),
                fast.is_some(),
            );
        }
        Some(TwinResizer {
            main: main?,
            fast,
            diverged: request.diverged.clone(),
        })
    }
    /// Mainline's resizer exists only once its allocation succeeded; the
    /// fast pool's, when it made a request, is asked too.
    fn allocated(resizer: &TwinResizer) -> bool {
        let main = <IdPool as PoolApi>::allocated(&resizer.main);
        if let Some(fast) = &resizer.fast {
            note(
                &resizer.diverged,
                Check::AllocationKept,
                "resizer holds memory",
                main,
                fast.is_some(),
            );
        }
        main
    }
    /// Mainline's shape; the fast pool's resizer, if any, must have the
    /// same length and emptiness.
    fn shape(resizer: &TwinResizer) -> Option<Shape> {
        let main = <IdPool as PoolApi>::shape(&resizer.main);
        if let Some(Some(fast)) = &resizer.fast {
            note(
                &resizer.diverged,
                Check::ResizerShape,
                "resizer (len, is_empty)",
                main.map(|s| (s.len, s.empty)),
                Some((fast.len(), fast.is_empty())),
            );
        }
        main
    }
    fn commit(&mut self, kind: Resize, resizer: Self::Resizer) {
        let TwinResizer { main, fast, .. } = resizer;
        let fast = fast.flatten();
        let before = (self.main.capacity(), self.fast.capacity());
        match kind {
            Resize::Grow => self.main.grow(main),
            Resize::Shrink => self.main.shrink(main),
        }
        if let Some(fast) = fast {
            match kind {
                Resize::Grow => self.fast.grow(fast),
                Resize::Shrink => self.fast.shrink(fast),
            }
        }
        self.note(
            Check::Capacity,
            format_args!("{kind:?} commit from {before:?}"),
            self.main.capacity(),
            self.fast.capacity(),
        );
    }
    fn grow_now(&mut self) -> bool {
        let main = <IdPool as PoolApi>::grow_now(&mut self.main);
        let fast = match self
            .fast
            .grow_request()
            .and_then(|r| r.realloc(Gfp::Kernel).ok())
        {
            Some(resizer) => {
                self.fast.grow(resizer);
                true
            }
            None => false,
        };
        self.note(Check::BulkCapacity, "grown", main, fast);
        self.note(
            Check::BulkCapacity,
            "capacity after a grow",
            self.main.capacity(),
            self.fast.capacity(),
        );
        main
    }
    fn capacity(&self) -> usize {
        let fast = match self.ceiling {
            Some(answers) => answers.capacity,
            None => self.fast.capacity(),
        };
        self.note(Check::Capacity, "capacity", self.main.capacity(), fast);
        self.main.capacity()
    }
    fn used(&self) -> Vec<usize> {
        let main: Vec<usize> = self.main.used_ids().collect();
        let fast: Vec<usize> = self.fast.used_ids().collect();
        if main != fast {
            let diff = |a: &[usize], b: &[usize]| -> Vec<usize> {
                a.iter()
                    .filter(|id| b.binary_search(id).is_err())
                    .take(8)
                    .copied()
                    .collect()
            };
            self.note(
                Check::UsedIds,
                "used ids (first 8 only in each)",
                diff(&main, &fast),
                diff(&fast, &main),
            );
        }
        // `FastPool::count` is kept by every acquire, release and resize
        // (IdPool has no such counter): it must be the number of ids used.
        if self.fast.count() != main.len() {
            self.note(
                Check::UsedIds,
                "count() against the used ids",
                main.len(),
                self.fast.count(),
            );
        }
        main
    }
    /// Both pools' used ids and the fast pool's count, as
    /// [`Twin::used`] reads them; a difference goes to [`Twin::used`],
    /// which notes it.
    fn used_matches(&self, expected: &IdSet) -> bool {
        self.main.used_ids().eq(expected.iter())
            && self.fast.used_ids().eq(expected.iter())
            && self.fast.count() == expected.len()
    }
    fn is_used(&self, id: usize) -> bool {
        let (main, fast) = (self.main.is_used(id), self.fast.is_used(id));
        if main != fast {
            self.note(Check::PoolBits, format_args!("is_used({id})"), main, fast);
        }
        main
    }
    /// Both pools read id by id, a word at a time; the first id whose
    /// bits differ is noted as [`Twin::is_used`] notes it.
    #[inline]
    fn bits(&self, base: usize, n: usize) -> u64 {
        let main = crate::bits::word(base, n, |id| self.main.is_used(id));
        let fast = crate::bits::word(base, n, |id| self.fast.is_used(id));
        if main != fast {
            let i = (main ^ fast).trailing_zeros();
            let bit = |word: u64| word >> i & 1 == 1;
            let id = base + i as usize;
            self.note(
                Check::PoolBits,
                format_args!("is_used({id})"),
                bit(main),
                bit(fast),
            );
        }
        main
    }
    fn take_divergence(&mut self, full: bool) -> Option<(Check, String)> {
        if full {
            if let Err(e) = self.fast.check_invariants() {
                return Some((Check::DesignInvariant, format!("fastpool: {e}")));
            }
        }
        self.diverged.borrow_mut().take()
    }
    fn twin(&self) -> Option<&'static str> {
        Some(<FastPool as Flavour>::NAME)
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

    /// A twin refused by `IdPool` still reports what the fast pool
    /// answered differently: built with failing flags above one word,
    /// both refuse and nothing is reported; a difference noted before the
    /// refusal goes with it, named after the fast pool.
    #[test]
    fn a_refused_twin_keeps_the_fast_pools_difference() {
        let Err(refused_alike) = Twin::reset_failing(65) else {
            panic!("built above 64 ids with failing flags");
        };
        assert!(
            refused_alike.divergence.is_none(),
            "{:?}",
            refused_alike.divergence
        );
        assert_eq!(Twin::reset_failing(64).ok().map(|t| t.capacity()), Some(64));
        let diverged = Divergence::default();
        note(
            &diverged,
            Check::ResetSucceeds,
            "pool of 65 ids built",
            false,
            true,
        );
        let (name, check, what) = refused(diverged).divergence.expect("reported");
        assert_eq!(
            (name, check),
            (<FastPool as Flavour>::NAME, Check::ResetSucceeds)
        );
        assert!(what.contains("pool of 65 ids built"), "{what}");
    }
}
