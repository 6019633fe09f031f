//! `pool_ops`' second pool: mainline's `IdPool` and the fast pool design
//! driven by the same operations ([`Twin`]), every answer of the fast pool
//! compared with mainline's, which the model checks.

use super::api::{Built, PoolApi, Refused, Shape, BULK_CAP_LIMIT};
use super::ops::Resize;
use crate::check::{Check, Flavour, FlavourName};
use crate::idset::IdSet;
use idpool::{FastPool, FastRequest, FastResizer, Gfp, IdPool, PoolResizer, ReallocRequest};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;

/// The fast pool, in failures.
const FAST: Flavour = Flavour::One {
    name: FlavourName::FastPool,
    version: None,
};

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
/// size, and its two answers are kept (`CeilingAnswers`).
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
            .map(|(check, what)| (FAST, check, what)),
    }
}

impl PoolApi for Twin {
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
        if let Some((id, main, fast)) = crate::bits::first_difference(base, main, fast) {
            self.note(Check::PoolBits, format_args!("is_used({id})"), main, fast);
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
    fn twin(&self) -> Option<Flavour> {
        Some(FAST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!((name, check), (FAST, Check::ResetSucceeds));
        assert!(what.contains("pool of 65 ids built"), "{what}");
    }
}
