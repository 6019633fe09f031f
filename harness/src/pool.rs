//! Pool-level differential testing: `IdPool` and `DBitmap` against a model.
//!
//! Resizes are split the way the kernel splits them: a resize is *requested*
//! and *allocated* (possibly with an injected failure) by
//! [`PoolOp::Prepare`], and *committed* later by [`PoolOp::Commit`]. Any
//! operation may run in between, so a single thread reaches every state that
//! another thread could create while the lock is dropped.

use crate::bits;
use crate::check::{At, Check, Checked, Op, OpKind};
use crate::domain::{Capacity, Ceiling, Count, Point};
use crate::feedback;
use crate::idset::IdSet;
use crate::oracle::{self, Policy, MAX_LEN, MIN};
use crate::text::{arity, limits, one, parse_in, parse_point, OpText};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::{Bitmap, DBitmap, Gfp, IdPool, PoolResizer, ReallocRequest};

/// One operation on a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// Acquire the smallest free id at or above the offset.
    Acquire(Point),
    /// Find the smallest free id and drop it without acquiring: no change.
    FindThenDrop(Point),
    /// Release an id, live or not, in range or not.
    Release(Point),
    /// Request a resize under the lock and allocate it (or fail to): the
    /// resizer waits in the pending list, oldest first, at most
    /// [`MAX_PENDING`] (a new one pushes the oldest out). Allocation touches
    /// nothing shared, so when it happens between request and commit does
    /// not matter; only the commit's timing does.
    Prepare {
        /// Grow or shrink.
        kind: Resize,
        /// Whether the allocation fails.
        fail: bool,
    },
    /// Commit the k-th pending resizer (k modulo how many are pending).
    Commit(u8),
    /// Acquire `count` ids from the offset up, growing whenever no id is
    /// free from the current one up (from an offset below the capacity
    /// too).
    AcquireMany {
        /// Where the search starts.
        offset: Point,
        /// How many ids.
        count: Count,
    },
    /// Release `count` consecutive ids starting at `from`.
    ReleaseMany {
        /// The first id.
        from: Point,
        /// How many ids.
        count: Count,
    },
    /// Release every live id at or above the point.
    ReleaseFrom(Point),
    /// Start over with a fresh pool of (at least) this capacity.
    Reset(Capacity),
    /// Build a pool of this capacity aside and ask it to grow: the ceiling.
    /// The pool in use is untouched (a map this large makes every later
    /// scan cost milliseconds).
    ProbeCeiling(Ceiling),
    /// Start over with a fresh pool whose allocation fails (the Rust
    /// `IdPool::with_capacity` with failing flags; the C `dbitmap_init`
    /// failing, after which the map stays disabled). Where nothing is
    /// built, the pool in use stays.
    ResetFailing(Capacity),
}

impl<'a> Arbitrary<'a> for PoolOp {
    /// Weighted: resizes and their commits are common; the ceiling probe,
    /// which maps 128 MiB, is rare. The failing reset came last (100..=103),
    /// so the selector bytes below 100 kept their meaning.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=103)? {
            0..=13 => PoolOp::Acquire(Point::arbitrary(u)?),
            14..=18 => PoolOp::FindThenDrop(Point::arbitrary(u)?),
            19..=29 => PoolOp::Release(Point::arbitrary(u)?),
            30..=47 => PoolOp::Prepare {
                kind: Resize::arbitrary(u)?,
                fail: u.ratio(1, 4)?,
            },
            48..=63 => PoolOp::Commit(u8::arbitrary(u)?),
            64..=75 => PoolOp::AcquireMany {
                offset: Point::arbitrary(u)?,
                count: Count::arbitrary(u)?,
            },
            76..=81 => PoolOp::ReleaseMany {
                from: Point::arbitrary(u)?,
                count: Count::arbitrary(u)?,
            },
            82..=89 => PoolOp::ReleaseFrom(Point::arbitrary(u)?),
            90..=97 => PoolOp::Reset(Capacity::arbitrary(u)?),
            98..=99 => PoolOp::ProbeCeiling(Ceiling::arbitrary(u)?),
            _ => PoolOp::ResetFailing(Capacity::arbitrary(u)?),
        })
    }
}

impl Op for PoolOp {
    fn kind(&self) -> OpKind {
        match self {
            PoolOp::Acquire(_) => OpKind::Acquire,
            PoolOp::FindThenDrop(_) => OpKind::FindThenDrop,
            PoolOp::Release(_) => OpKind::Release,
            PoolOp::Prepare { .. } => OpKind::Prepare,
            PoolOp::Commit(_) => OpKind::Commit,
            PoolOp::AcquireMany { .. } => OpKind::AcquireMany,
            PoolOp::ReleaseMany { .. } => OpKind::ReleaseMany,
            PoolOp::ReleaseFrom(_) => OpKind::ReleaseFrom,
            PoolOp::Reset(_) => OpKind::Reset,
            PoolOp::ProbeCeiling(_) => OpKind::ProbeCeiling,
            PoolOp::ResetFailing(_) => OpKind::ResetFailing,
        }
    }
}

/// Grow or shrink.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resize {
    /// A grow request.
    Grow,
    /// A shrink request.
    Shrink,
}

/// The C flavour cannot be built at any size: [`PoolApi::reset`] grows it
/// by doubling, up to this many bits.
pub const DBITMAP_RESET_LIMIT: usize = 1 << 20;

/// A bulk acquire stops growing the pool here: beyond, every scan costs
/// milliseconds. ([`PoolOp::ProbeCeiling`] covers the 2^30 ceiling.)
pub const BULK_CAP_LIMIT: usize = 1 << 20;

/// No pool doubles more than this from 64 ids: a loop that grows stops here
/// even when a broken grow never raises the capacity.
const MAX_GROWS: usize = 32;

/// The pool API the runner drives: a thin adapter over each flavour's own
/// public API, with no logic of its own.
///
/// It is not the allocator's `idpool::Flavour`, which is what the handle
/// table needs of a pool: `Flavour` finds ids with the table's fallback
/// scan and reports a failed allocation as an error, while this runner
/// needs the bare pool: a find without acquire, a reset at any size, and
/// the C driver's failed allocation kept (as NULL) for its commit.
/// Why no pool was built. For a single flavour, nothing more; for a twin
/// ([`crate::designs::Twin`]) whose design disagreed with the flavour about
/// building it, the design's name, the check and what happened, reported
/// like any other difference of the twin.
#[derive(Debug, Default)]
pub struct Refused {
    /// The design's name, the check, and what happened.
    pub divergence: Option<(&'static str, Check, String)>,
}

/// A pool built, or [`Refused`].
pub type Built<P> = Result<P, Refused>;

/// The pool built, `None` when it was refused, or the failure of a twin
/// that disagreed about refusing.
fn built<P>(at: &At<'_, PoolOp>, fresh: Built<P>) -> Checked<Option<P>> {
    match fresh {
        Ok(pool) => Ok(Some(pool)),
        Err(Refused {
            divergence: Some((name, check, what)),
        }) => Err(at.failure(check, Some(name), what)),
        Err(Refused { divergence: None }) => Ok(None),
    }
}

pub trait PoolApi: Sized {
    /// The target's name.
    const TARGET: &'static str;
    /// A pending request.
    type Request;
    /// An allocated resizer.
    type Resizer;

    /// A fresh pool, or [`Refused`] when it cannot be built (the old one
    /// stays).
    fn reset(capacity: usize) -> Built<Self>;
    /// The size a grow of a map of `nbits` bits asks for, computed without
    /// a map, and whether a map of that size can be allocated where that
    /// is known without memory (`None` where it would take memory): the C
    /// flavour's 32-bit arithmetic at sizes no map can have. `None` for a
    /// flavour probed on a real pool instead ([`PoolApi::DIRECT_CAPACITY`]).
    fn grow_target_at(&self, nbits: u32) -> Option<(usize, Option<bool>)>;
    /// A fresh pool of `capacity` ids built with failing allocation flags
    /// ([`Gfp::Fail`]), or [`Refused`] when nothing is built (the old one
    /// stays).
    fn reset_failing(capacity: usize) -> Built<Self>;
    /// Whether the flavour can be built directly at any capacity (the C
    /// one grows by doubling only, so it skips [`PoolOp::ProbeCeiling`]).
    const DIRECT_CAPACITY: bool;
    /// Find and acquire.
    fn acquire(&mut self, offset: usize) -> Option<usize>;
    /// Find without acquiring: the id, and the id as the 32-bit handle
    /// where the flavour has that read (`UnusedId::as_u32`; C has none).
    fn find(&mut self, offset: usize) -> Option<(usize, Option<u32>)>;
    /// Release.
    fn release(&mut self, id: usize);
    /// Ask to grow.
    fn request(&self, kind: Resize) -> Option<Self::Request>;
    /// The size a request asks for.
    fn request_len(request: &Self::Request) -> usize;
    /// Allocate; `None` when the flavour drops a failed allocation on the spot.
    fn realloc(request: &Self::Request, gfp: Gfp) -> Option<Self::Resizer>;
    /// Whether a resizer holds memory (a C resizer may hold NULL).
    fn allocated(resizer: &Self::Resizer) -> bool;
    /// What a resizer's public reads say of the memory it holds, if any:
    /// its length, whether it is empty, and whether its bits are inline
    /// where that can be read (the C resizer's `Bitmap::is_inline`).
    fn shape(resizer: &Self::Resizer) -> Option<Shape>;
    /// Commit.
    fn commit(&mut self, kind: Resize, resizer: Self::Resizer);
    /// Grow at once (request, allocate, commit); `false` when it cannot.
    fn grow_now(&mut self) -> bool;
    /// The capacity (0 when disabled).
    fn capacity(&self) -> usize;
    /// The used ids, ascending.
    fn used(&self) -> Vec<usize>;
    /// Whether [`PoolApi::used`] would be exactly `expected`'s members:
    /// the common case of the comparison, read without collecting. `false`
    /// sends the comparison to [`PoolApi::used`], which says what differs.
    fn used_matches(&self, expected: &IdSet) -> bool {
        let used = self.used();
        used.len() == expected.len() && used.into_iter().eq(expected.iter())
    }
    /// Whether `id` is used, read alone: the narrowest public read, which
    /// shares no scan with [`PoolApi::used`] or the searches.
    fn is_used(&self, id: usize) -> bool;
    /// The ids `base..base + n` (`n <= 64`) read one at a time with
    /// [`PoolApi::is_used`], as a word: bit `i` is id `base + i`. The full
    /// comparison reads the pool this way, so that it compares with the
    /// model a word at a time; each id is still read alone.
    #[inline]
    fn bits(&self, base: usize, n: usize) -> u64 {
        bits::word(base, n, |id| self.is_used(id))
    }
    /// For a flavour that runs a second implementation beside ours (the
    /// kernel's own C, [`crate::kernel::KernelPair`]): where the two first
    /// disagreed, asked after every step. `None` for a single flavour.
    fn diverged(&mut self) -> Option<String> {
        None
    }
    /// The name of a design driven beside the flavour on the same
    /// operations (see [`crate::designs::Twin`]), if any.
    fn twin(&self) -> Option<&'static str> {
        None
    }
    /// The first way the twin differed from the flavour since the last
    /// call and, when `full`, a broken invariant of the twin's own.
    fn take_divergence(&mut self, full: bool) -> Option<(Check, String)> {
        let _ = full;
        None
    }
}

impl PoolApi for IdPool {
    const TARGET: &'static str = "pool_ops";
    const DIRECT_CAPACITY: bool = true;
    type Request = ReallocRequest;
    type Resizer = PoolResizer;

    fn reset(capacity: usize) -> Built<Self> {
        IdPool::with_capacity(capacity, Gfp::Kernel).map_err(|_| Refused::default())
    }
    fn reset_failing(capacity: usize) -> Built<Self> {
        IdPool::with_capacity(capacity, Gfp::Fail).map_err(|_| Refused::default())
    }
    fn grow_target_at(&self, _: u32) -> Option<(usize, Option<bool>)> {
        None
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        Some(self.find_unused_id(offset)?.acquire())
    }
    fn find(&mut self, offset: usize) -> Option<(usize, Option<u32>)> {
        let unused = self.find_unused_id(offset)?;
        Some((unused.as_usize(), Some(unused.as_u32())))
    }
    fn release(&mut self, id: usize) {
        self.release_id(id);
    }
    fn request(&self, kind: Resize) -> Option<ReallocRequest> {
        match kind {
            Resize::Grow => self.grow_request(),
            Resize::Shrink => self.shrink_request(),
        }
    }
    fn request_len(request: &ReallocRequest) -> usize {
        request.num_ids()
    }
    fn realloc(request: &ReallocRequest, gfp: Gfp) -> Option<PoolResizer> {
        request.realloc(gfp).ok()
    }
    /// A `PoolResizer` exists only once its allocation succeeded.
    fn allocated(_: &PoolResizer) -> bool {
        true
    }
    fn shape(resizer: &PoolResizer) -> Option<Shape> {
        Some(Shape {
            len: resizer.len(),
            empty: resizer.is_empty(),
            inline: None,
        })
    }
    fn commit(&mut self, kind: Resize, resizer: PoolResizer) {
        match kind {
            Resize::Grow => self.grow(resizer),
            Resize::Shrink => self.shrink(resizer),
        }
    }
    fn grow_now(&mut self) -> bool {
        let Some(resizer) = self
            .grow_request()
            .and_then(|r| r.realloc(Gfp::Kernel).ok())
        else {
            return false;
        };
        self.grow(resizer);
        true
    }
    fn capacity(&self) -> usize {
        IdPool::capacity(self)
    }
    fn used(&self) -> Vec<usize> {
        self.used_ids().collect()
    }
    fn used_matches(&self, expected: &IdSet) -> bool {
        self.used_ids().eq(expected.iter())
    }
    fn is_used(&self, id: usize) -> bool {
        IdPool::is_used(self, id)
    }
}

impl PoolApi for DBitmap {
    const TARGET: &'static str = "dbitmap_ops";
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

/// What a resizer's public reads say of it ([`PoolApi::shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Its length in ids.
    pub len: usize,
    /// Whether it has no ids at all.
    pub empty: bool,
    /// Whether its bits live inline, where that can be read.
    pub inline: Option<bool>,
}

/// The most resizers pending at once.
pub const MAX_PENDING: usize = 4;

/// A pending resizer as the model sees it: its kind, its length, and
/// whether its allocation succeeded (`false`: a C resizer holding NULL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModelPending {
    kind: Resize,
    len: usize,
    ok: bool,
}

/// The naive oracle: a set of live ids and a capacity computed from
/// SPEC.md's formulas. It never calls the allocator.
#[derive(Clone, Debug)]
pub struct PoolModel {
    policy: Policy,
    live: IdSet,
    /// 0 when a C map is disabled.
    cap: usize,
    pending: Vec<ModelPending>,
    /// What happened so far, for the smoke test.
    pub events: Events,
}

impl PoolModel {
    /// Tells the fuzzer which abstract state `op` led to
    /// ([`crate::feedback`]). The components, and why:
    /// - the capacity class: the grow/shrink boundaries and the inline map;
    /// - the fill class: the thresholds at a quarter, a half and full;
    /// - pending grows and pending shrinks (0, 1, 2 or more each), and
    ///   whether one of them failed to allocate: the commit windows;
    /// - the kind of `op`: the same state reached by a commit and by an
    ///   acquire are different transitions.
    fn observe(&self, target: &str, op: &PoolOp) {
        let pending = |kind: Resize| self.pending.iter().filter(|p| p.kind == kind).count() as u64;
        feedback::observe(
            feedback::AbstractState::new(target)
                .with(
                    feedback::capacity_class(self.cap),
                    feedback::CAPACITY_CLASSES,
                )
                .with(
                    feedback::fill_class(self.live.len(), self.cap),
                    feedback::FILL_CLASSES,
                )
                .with(pending(Resize::Grow), 3)
                .with(pending(Resize::Shrink), 3)
                .with(u64::from(self.pending.iter().any(|p| !p.ok)), 2)
                .with(op.kind() as u64, 64),
        );
    }

    /// A fresh pool of 64 ids.
    pub fn new(policy: Policy) -> Self {
        PoolModel {
            policy,
            live: IdSet::new(),
            cap: MIN,
            pending: Vec::new(),
            events: Events::default(),
        }
    }

    fn enabled(&self) -> bool {
        self.cap != 0
    }

    /// The capacity after `ResetFailing(n)`, or `None` when nothing is
    /// built.
    ///
    /// Rust (upstream `IdPool::with_capacity`): the size is raised to one
    /// word, and a `BitmapVec` of at most one word lives inline and
    /// allocates nothing, so failing flags cannot make it fail: 64 ids for
    /// any `n` up to 64; above, the allocation fails and the caller gets
    /// `AllocError`.
    ///
    /// C (`dbitmap_init`, then `binder_open`, which does not look at its
    /// result): the map's allocation fails, `nbits` is 0 and the process
    /// runs on the slow scan from its first reference: a disabled map,
    /// whatever `n`.
    fn reset_failing_capacity(&self, n: usize) -> Option<usize> {
        match self.policy {
            Policy::Rust if n <= 64 => Some(64),
            Policy::Rust => None,
            Policy::C => Some(0),
        }
    }

    /// The capacity after `Reset(n)`, or `None` when the reset fails.
    fn reset_capacity(&self, n: usize) -> Option<usize> {
        match self.policy {
            Policy::Rust => (n <= MAX_LEN).then(|| n.max(MIN)),
            Policy::C => {
                let mut cap = MIN;
                while cap < n.min(DBITMAP_RESET_LIMIT) {
                    cap *= 2;
                }
                Some(cap)
            }
        }
    }

    /// The smallest id >= offset not in the live set, if below the capacity.
    fn smallest_free(&self, offset: usize) -> Option<usize> {
        self.live.smallest_absent(offset, self.cap)
    }

    fn grow_target(&self) -> Option<usize> {
        oracle::grow_target(self.policy, self.cap)
    }

    fn shrink_target(&self) -> Option<usize> {
        oracle::shrink_target(self.policy, self.cap, self.live.last())
    }

    fn alloc_ok(&self, len: usize, fail: bool) -> bool {
        oracle::alloc_ok(self.policy, len, fail)
    }

    fn disable(&mut self) {
        self.cap = 0;
        self.live.clear();
        self.events.disabled += 1;
    }

    fn commit(&mut self, kind: Resize, len: usize, ok: bool) {
        let before = self.cap;
        match (self.policy, kind) {
            (Policy::Rust, Resize::Grow) => {
                if len > self.cap {
                    self.cap = len;
                }
            }
            (Policy::Rust, Resize::Shrink) => match self.shrink_target() {
                Some(target) if target <= len => self.cap = len,
                _ => {}
            },
            (Policy::C, Resize::Grow) => match oracle::c_grow_commit(self.cap, len, !ok) {
                oracle::CGrow::Keep => {}
                oracle::CGrow::Install => self.cap = len,
                oracle::CGrow::Disable => self.disable(),
            },
            (Policy::C, Resize::Shrink) => {
                if ok && self.shrink_target() == Some(len) {
                    self.cap = len;
                }
            }
        }
        let e = &mut self.events;
        match kind {
            Resize::Grow if self.cap > before => e.grow_committed += 1,
            Resize::Grow => e.stale_grow_ignored += 1,
            Resize::Shrink if self.cap < before => e.shrink_committed += 1,
            Resize::Shrink if self.cap > before => e.shrink_raised_capacity += 1,
            Resize::Shrink => e.shrink_refused += 1,
        }
    }

    /// Grow at once, as `grow_now` does; `false` when it cannot.
    fn grow_now(&mut self) -> bool {
        if !self.enabled() {
            return false;
        }
        match self.grow_target() {
            None => {
                self.events.grow_at_ceiling += 1;
                false
            }
            Some(len) => {
                let ok = self.alloc_ok(len, false);
                match self.policy {
                    Policy::Rust if !ok => return false,
                    _ => self.commit(Resize::Grow, len, ok),
                }
                self.enabled()
            }
        }
    }
}

/// Runs `ops` on a fresh pool of flavour `P` and on the model. After every
/// step the capacity and what the step touched ([`Touched`]) are compared,
/// with the boundary ids read one at a time; after a commit, at the end of
/// the input, and (the used set) after a bulk op or a reset, everything.
/// The first divergence is the [`Failure`](crate::check::Failure).
pub fn run<P: PoolApi>(policy: Policy, ops: &[PoolOp]) -> Checked<Events> {
    let mut pool = P::reset(0).unwrap_or_else(|_| unreachable!("a 64-id pool needs no memory"));
    let mut pending: Vec<(Resize, P::Resizer)> = Vec::new();
    let mut model = PoolModel::new(policy);
    for (step, op) in ops.iter().enumerate() {
        let at = At {
            target: P::TARGET,
            step,
            op,
            capacity: model.cap,
        };
        crate::check::begin_step(P::TARGET, step, op, model.cap);
        let before = model.cap;
        let applied = apply(&at, &mut pool, &mut pending, &mut model);
        if let Some(divergence) = pool.diverged() {
            let applied = applied.map(|t| t.is_everything());
            return Err(kernel_divergence(&at, &applied, &model, &pool, &divergence));
        }
        // Any step that replaced the map (a commit, a bulk acquire that
        // grew, a reset) is compared in full.
        let touched = match applied? {
            _ if model.cap != before => Touched::Everything,
            touched => touched,
        };
        at.eq(Check::Capacity, model.cap, pool.capacity())?;
        model.observe(P::TARGET, op);
        if model.cap >= 4096 {
            model.events.deep += 1;
        }
        let everything = touched.is_everything();
        if touched.used_set() {
            check_used(&at, &model, &pool)?;
        }
        // The bits are read through both sides of a kernel pair: a
        // disagreement there is the kernel's finding, reported first.
        let bits = check_bits(&at, &model, &pool, &touched);
        if let Some(divergence) = pool.diverged() {
            let bits = bits.map(|()| everything);
            return Err(kernel_divergence(&at, &bits, &model, &pool, &divergence));
        }
        bits?;
        check_twin(&at, &mut pool, everything, model.cap, &mut model.events)?;
    }
    if let Some(last) = ops.last() {
        let at = At {
            target: P::TARGET,
            step: ops.len() - 1,
            op: last,
            capacity: model.cap,
        };
        check_used(&at, &model, &pool)?;
        let bits = check_bits(&at, &model, &pool, &Touched::Everything);
        if let Some(divergence) = pool.diverged() {
            let bits = bits.map(|()| true);
            return Err(kernel_divergence(&at, &bits, &model, &pool, &divergence));
        }
        bits?;
        check_twin(&at, &mut pool, true, model.cap, &mut model.events)?;
    }
    Ok(model.events)
}

/// What a step may have changed, and so what is compared after it: the
/// ids it touched are read one at a time (beside the boundaries, always);
/// a bulk op, a reset or a refused commit also compares the whole used set
/// once; a commit that resized (the map replaced) compares everything, id
/// by id.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Touched {
    /// This id, if any, read alone.
    Id(Option<usize>),
    /// Many ids: these, read one at a time, and the whole used set.
    Bulk(Vec<usize>),
    /// The ids of this range (clipped to the capacity) and the whole used set.
    Range(core::ops::Range<usize>),
    /// Every id up to the capacity, the used set, and a twin's invariants.
    Everything,
}

impl Touched {
    fn is_everything(&self) -> bool {
        matches!(self, Touched::Everything)
    }
    /// Whether the whole used set is compared.
    fn used_set(&self) -> bool {
        !matches!(self, Touched::Id(_))
    }
    /// The ids read one at a time besides the boundaries, up to `cap`
    /// (the one past the capacity is a boundary).
    fn ids(&self, cap: usize) -> impl Iterator<Item = usize> + '_ {
        let (listed, range): (&[usize], _) = match self {
            Touched::Id(id) => (id.as_slice(), 0..0),
            Touched::Bulk(ids) => (ids, 0..0),
            Touched::Range(r) => (&[], r.start.min(cap + 1)..r.end.min(cap + 1)),
            Touched::Everything => (&[], 0..cap + 1),
        };
        listed.iter().copied().chain(range)
    }
}

/// The failure when the two implementations inside `pool` disagree, with
/// which side the model stands with: the model agrees with ours when
/// neither the step's own checks nor the capacity failed.
fn kernel_divergence<P: PoolApi>(
    at: &At<'_, PoolOp>,
    applied: &Checked<bool>,
    model: &PoolModel,
    pool: &P,
    divergence: &str,
) -> Box<crate::check::Failure> {
    let model_says = match applied {
        Err(f) => format!("the model disagrees with ours too ({})", f.message),
        Ok(_) if model.cap != pool.capacity() => format!(
            "the model disagrees with ours too (capacity: model {}, ours {})",
            model.cap,
            pool.capacity()
        ),
        Ok(_) => format!(
            "the model agrees with ours (capacity {}): both read upstream the same way",
            model.cap
        ),
    };
    at.failure(
        Check::Kernel,
        None,
        format_args!("kernel and ours disagree: {divergence}; {model_says}"),
    )
}

/// The design driven beside the pool, if any, answered as the pool did
/// (whose answers the model has just checked).
fn check_twin<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    full: bool,
    capacity: usize,
    events: &mut Events,
) -> Checked {
    let Some(name) = pool.twin() else {
        return Ok(());
    };
    if let Some((check, what)) = pool.take_divergence(full) {
        return Err(at.failure(check, Some(name), what));
    }
    if full && capacity >= 4096 {
        events.design_deep += 1;
    }
    Ok(())
}

/// Reads the pool one id at a time ([`PoolApi::is_used`]) and compares
/// each bit with the model's live set: the boundaries (0, 1, the last id
/// of the capacity and the one past it, the highest live id and the one
/// past it) always, and the ids the step touched (every id up to the
/// capacity after a commit and at the end).
fn check_bits<P: PoolApi>(
    at: &At<'_, PoolOp>,
    model: &PoolModel,
    pool: &P,
    touched: &Touched,
) -> Checked {
    let cap = model.cap;
    let last = model.live.last();
    let boundaries = [0, 1, cap.saturating_sub(1), cap]
        .into_iter()
        .chain(last.into_iter().flat_map(|l| [l, l + 1]));
    let diff: Vec<(usize, bool, bool)> = if touched.is_everything() {
        // Every id up to the capacity, a word of ids at a time beside the
        // live set (each id still read alone, `PoolApi::bits`): a call and
        // a step of the walk per id was the runner's hot spot on deep
        // pools; the few boundaries look their ids up.
        let mut diff = Vec::new();
        let mut live = model.live.iter().take_while(|&id| id <= cap).peekable();
        bits::compare_words(
            0..cap + 1,
            &mut live,
            |base, n| pool.bits(base, n),
            &mut diff,
            6,
        );
        let room = 6 - diff.len();
        let boundaries = boundaries.map(|id| (id, model.live.contains(id)));
        diff.extend(differing(pool, boundaries, room));
        diff
    } else {
        let ids = touched.ids(cap).chain(boundaries);
        differing(pool, ids.map(|id| (id, model.live.contains(id))), 6)
    };
    if diff.is_empty() {
        return Ok(());
    }
    Err(at.failure(
        Check::PoolBits,
        None,
        format_args!("bits read one id at a time (id, expected, actual): {diff:?}"),
    ))
}

/// The first `limit` `(id, expected, actual)` where the pool's bit
/// differs. No id is read once `limit` are found: a read is an observable
/// of its own (a kernel pair compares its two sides at every read).
fn differing<P: PoolApi>(
    pool: &P,
    expected: impl Iterator<Item = (usize, bool)>,
    limit: usize,
) -> Vec<(usize, bool, bool)> {
    expected
        .filter_map(|(id, expected)| {
            let actual = pool.is_used(id);
            (expected != actual).then_some((id, expected, actual))
        })
        .take(limit)
        .collect()
}

fn check_used<P: PoolApi>(at: &At<'_, PoolOp>, model: &PoolModel, pool: &P) -> Checked {
    if pool.used_matches(&model.live) {
        return Ok(());
    }
    let used = pool.used();
    if used.len() == model.live.len() && used.iter().copied().eq(model.live.iter()) {
        return Ok(());
    }
    let lost: Vec<_> = model
        .live
        .iter()
        .filter(|id| used.binary_search(id).is_err())
        .take(8)
        .collect();
    let extra: Vec<_> = used
        .iter()
        .filter(|&&id| !model.live.contains(id))
        .take(8)
        .collect();
    Err(at.failure(
        Check::UsedIds,
        None,
        format_args!(
            "used ids: expected {} ids, got {}; lost {lost:?}, unexpected {extra:?} (first 8 of each)",
            model.live.len(),
            used.len()
        ),
    ))
}

/// The runner's state besides the pool: the pending resizers, in step with
/// the model's.
type Pending<P> = Vec<(Resize, <P as PoolApi>::Resizer)>;

/// Applies one op to both sides and checks its direct result. Returns
/// what the op may have touched, for the checks after it.
fn apply<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    pending: &mut Pending<P>,
    model: &mut PoolModel,
) -> Checked<Touched> {
    match *at.op {
        PoolOp::Acquire(offset) => {
            let offset = offset.resolve(model.cap);
            let expected = model.smallest_free(offset);
            match expected {
                Some(id) => {
                    model.live.insert(id);
                }
                None => model.events.pool_full += 1,
            }
            at.eq(Check::AcquiredId, expected, pool.acquire(offset))?;
            Ok(Touched::Id(expected))
        }
        PoolOp::FindThenDrop(offset) => {
            let offset = offset.resolve(model.cap);
            let expected = model.smallest_free(offset);
            let found = pool.find(offset);
            at.eq(Check::FoundId, expected, found.map(|(id, _)| id))?;
            if let Some((_, Some(handle))) = found {
                // Ids are below 2^31, so the 32-bit handle is the id.
                let expected = expected.map(|id| u32::try_from(id).expect("below 2^31"));
                at.eq(Check::FoundId, expected, Some(handle))?;
            }
            Ok(Touched::Id(expected))
        }
        PoolOp::Release(id) => {
            let id = id.resolve(model.cap);
            model.live.remove(id);
            pool.release(id);
            Ok(Touched::Id(Some(id)))
        }
        PoolOp::Prepare { kind, fail } => {
            prepare(at, pool, pending, model, kind, fail).map(|_| Touched::Id(None))
        }
        PoolOp::Commit(k) => {
            if model.pending.is_empty() {
                return Ok(Touched::Id(None));
            }
            let k = k as usize % model.pending.len();
            let ModelPending { kind, len, ok } = model.pending.remove(k);
            let (_, resizer) = pending.remove(k);
            let before = model.cap;
            model.commit(kind, len, ok);
            pool.commit(kind, resizer);
            // A resize (or a disabled map) replaced the bits: every id is
            // read. A commit the model refuses keeps the map, whose used
            // set is still compared whole.
            Ok(if model.cap != before {
                Touched::Everything
            } else {
                Touched::Bulk(Vec::new())
            })
        }
        PoolOp::AcquireMany { offset, count } => {
            acquire_many(at, pool, model, offset, count).map(Touched::Bulk)
        }
        PoolOp::ReleaseMany { from, count } => {
            let from = from.resolve(model.cap);
            let range = from..from.saturating_add(count.0);
            release_all(pool, model, range.clone());
            Ok(Touched::Range(range))
        }
        PoolOp::ReleaseFrom(from) => {
            let from = from.resolve(model.cap);
            let doomed: Vec<usize> = model.live.from(from).collect();
            release_all(pool, model, doomed.iter().copied());
            Ok(Touched::Bulk(doomed))
        }
        PoolOp::ProbeCeiling(Ceiling(n)) => {
            probe_ceiling(at, pool, model, n).map(|_| Touched::Id(None))
        }
        PoolOp::ResetFailing(Capacity(n)) => {
            let expected = model.reset_failing_capacity(n);
            let fresh = built(at, P::reset_failing(n))?;
            at.eq(Check::ResetSucceeds, expected.is_some(), fresh.is_some())?;
            match (expected, fresh) {
                (Some(cap), Some(fresh)) => {
                    model.events.disabled_at_init += u32::from(cap == 0);
                    model.cap = cap;
                    model.live.clear();
                    *pool = fresh;
                }
                _ => model.events.reset_refused += 1,
            }
            Ok(Touched::Bulk(Vec::new()))
        }
        PoolOp::Reset(Capacity(n)) => {
            let expected = model.reset_capacity(n);
            let fresh = built(at, P::reset(n))?;
            at.eq(Check::ResetSucceeds, expected.is_some(), fresh.is_some())?;
            if let (Some(cap), Some(fresh)) = (expected, fresh) {
                model.cap = cap;
                model.live.clear();
                *pool = fresh;
            }
            Ok(Touched::Bulk(Vec::new()))
        }
    }
}

fn release_all<P: PoolApi>(
    pool: &mut P,
    model: &mut PoolModel,
    ids: impl IntoIterator<Item = usize>,
) {
    for id in ids {
        model.live.remove(id);
        pool.release(id);
    }
}

/// [`PoolOp::Prepare`]: request on both sides, compare, allocate, and
/// queue the resizer.
fn prepare<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    pending: &mut Pending<P>,
    model: &mut PoolModel,
    kind: Resize,
    fail: bool,
) -> Checked {
    let expected = match kind {
        Resize::Grow => model.grow_target(),
        Resize::Shrink => model.shrink_target(),
    };
    if kind == Resize::Grow && expected.is_none() {
        model.events.grow_at_ceiling += 1;
    }
    let request = pool.request(kind);
    at.eq(
        Check::RequestedSize,
        expected,
        request.as_ref().map(P::request_len),
    )?;
    let (Some(len), Some(request)) = (expected, request) else {
        return Ok(());
    };
    let ok = model.alloc_ok(len, fail);
    if !ok {
        model.events.alloc_failed += 1;
    }
    let resizer = P::realloc(&request, if fail { Gfp::Fail } else { Gfp::Kernel });
    // Rust drops a failed allocation on the spot (no resizer); C keeps a
    // resizer either way, holding NULL when the allocation failed. So the
    // check reads both whether a resizer exists and whether it holds memory.
    let kept = match model.policy {
        Policy::Rust => ok.then_some(true),
        Policy::C => Some(ok),
    };
    at.eq(
        Check::AllocationKept,
        kept,
        resizer.as_ref().map(P::allocated),
    )?;
    if let Some(shape) = resizer.as_ref().and_then(P::shape) {
        // SPEC.md: a bitmap of 64 bits or fewer lives inline.
        let expected = Shape {
            len,
            empty: len == 0,
            inline: shape.inline.map(|_| len <= MIN),
        };
        at.eq(Check::ResizerShape, expected, shape)?;
    }
    if let Some(resizer) = resizer {
        if pending.len() == MAX_PENDING {
            pending.remove(0);
            model.pending.remove(0);
        }
        pending.push((kind, resizer));
        model.pending.push(ModelPending { kind, len, ok });
    }
    Ok(())
}

/// [`PoolOp::AcquireMany`]: acquire one id after the other, growing both
/// sides whenever the model is full. Returns the ids acquired.
fn acquire_many<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    model: &mut PoolModel,
    offset: Point,
    count: Count,
) -> Checked<Vec<usize>> {
    let mut acquired = Vec::new();
    let mut next = offset.resolve(model.cap);
    for i in 0..count.0 {
        let expected = loop {
            match model.smallest_free(next) {
                Some(id) => break Some(id),
                // Full from `next` up, wherever `next` is (below the
                // capacity too): grow, as a caller that needs an id must.
                None if model.cap >= BULK_CAP_LIMIT || !model.grow_now() => break None,
                None => {}
            }
        };
        // Only grow the pool when the model did: the pool grows to
        // the same size through its own request/realloc/commit.
        let mut actual = None;
        for _ in 0..MAX_GROWS {
            actual = pool.acquire(next);
            if actual.is_some() || pool.capacity() >= model.cap || !pool.grow_now() {
                break;
            }
        }
        if let Some(id) = expected {
            model.live.insert(id);
            acquired.push(id);
        }
        at.compare(
            Check::BulkId,
            None,
            format_args!("id #{i} of the bulk acquire"),
            expected,
            actual,
        )?;
        at.eq(Check::BulkCapacity, model.cap, pool.capacity())?;
        match expected {
            Some(id) => next = id + 1,
            None => {
                model.events.pool_full += 1;
                break;
            }
        }
    }
    Ok(acquired)
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

/// What a C grow of a map of `nbits` bits asks for and leads to, stated
/// from the C types rather than by shifting: `nbits << 1` on a 32-bit
/// `unsigned int` is `2 * nbits` reduced modulo 2^32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CGrowSize {
    /// The size `dbitmap_grow_nbits` asks for.
    pub target: usize,
    /// Whether our `Bitmap` can allocate a map of that size: not above
    /// its `MAX_LEN` (2^31 - 1 bits). That limit is this crate's, not the
    /// kernel's (`bitmap_zalloc` takes an `unsigned int` and kmalloc
    /// refuses far earlier), so this restates our own limit and only pins
    /// it; the size asked (`target`) is what `kernel_dbitmap` checks
    /// against the kernel's own `dbitmap_grow_nbits`. A 0-bit map needs no
    /// memory.
    pub allocatable: bool,
    /// Whether the request is no larger than the map (the shift wrapped):
    /// mainline `dbitmap_grow` then frees the new map and changes nothing,
    /// so the C driver's `-EAGAIN` retry would find the map full again and
    /// spin. No map reaches that size: the grow to 2^31 is refused first
    /// (and the map disabled), which the probe states as `allocatable`.
    pub wraps: bool,
}

impl CGrowSize {
    /// The model's answer for a map of `nbits` bits.
    pub fn of(nbits: u32) -> CGrowSize {
        let target = ((2 * u64::from(nbits)) % (1u64 << 32)) as usize;
        CGrowSize {
            target,
            allocatable: target <= i32::MAX as usize,
            wraps: target <= nbits as usize,
        }
    }
}

/// [`PoolOp::ProbeCeiling`] on the C flavour: no map of `n` bits is built;
/// the grow size asked at `n` and whether it could be allocated are
/// compared with [`CGrowSize`], up to 2^31 where the 32-bit shift wraps to 0.
fn probe_c_grow<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &P,
    model: &mut PoolModel,
    n: usize,
) -> Checked {
    let Ok(nbits) = u32::try_from(n) else {
        return Ok(());
    };
    let Some((target, allocatable)) = pool.grow_target_at(nbits) else {
        return Ok(());
    };
    let expected = CGrowSize::of(nbits);
    if expected.wraps {
        model.events.grow_target_wrapped += 1;
    }
    at.eq(Check::CeilingGrowRequest, expected.target, target)?;
    match allocatable {
        Some(allocatable) => at.eq(Check::CeilingPoolBuilt, expected.allocatable, allocatable),
        None => Ok(()),
    }
}

/// [`PoolOp::ProbeCeiling`]: a pool of `n` ids built aside must refuse to
/// grow past the ceiling exactly where SPEC.md says; for the C flavour,
/// which cannot be built at any size, see [`probe_c_grow`].
fn probe_ceiling<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &P,
    model: &mut PoolModel,
    n: usize,
) -> Checked {
    if !P::DIRECT_CAPACITY {
        return probe_c_grow(at, pool, model, n);
    }
    let mut aside = PoolModel::new(model.policy);
    let expected = aside.reset_capacity(n);
    let fresh = built(at, P::reset(n))?;
    at.eq(Check::CeilingPoolBuilt, expected.is_some(), fresh.is_some())?;
    let (Some(cap), Some(mut fresh)) = (expected, fresh) else {
        return Ok(());
    };
    aside.cap = cap;
    at.eq(Check::CeilingPoolCapacity, cap, fresh.capacity())?;
    let target = aside.grow_target();
    if target.is_none() {
        model.events.grow_at_ceiling += 1;
    }
    at.eq(
        Check::CeilingGrowRequest,
        target,
        fresh.request(Resize::Grow).as_ref().map(P::request_len),
    )?;
    // What the pool built aside's twin noted of its own answers.
    if let (Some(name), Some((check, what))) = (fresh.twin(), fresh.take_divergence(false)) {
        return Err(at.failure(check, Some(name), what));
    }
    Ok(())
}

impl OpText for PoolOp {
    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PoolOp::Acquire(x) => write!(f, "acquire {x:?}"),
            PoolOp::FindThenDrop(x) => write!(f, "find {x:?}"),
            PoolOp::Release(x) => write!(f, "release {x:?}"),
            PoolOp::Prepare { kind, fail } => {
                let kind = match kind {
                    Resize::Grow => "grow",
                    Resize::Shrink => "shrink",
                };
                write!(f, "prepare {kind}{}", if fail { " fail" } else { "" })
            }
            PoolOp::Commit(k) => write!(f, "commit {k}"),
            PoolOp::AcquireMany { offset, count } => write!(f, "acquire-many {offset:?} {count:?}"),
            PoolOp::ReleaseMany { from, count } => write!(f, "release-many {from:?} {count:?}"),
            PoolOp::ReleaseFrom(x) => write!(f, "release-from {x:?}"),
            PoolOp::Reset(c) => write!(f, "reset {c:?}"),
            PoolOp::ProbeCeiling(c) => write!(f, "probe-ceiling {c:?}"),
            PoolOp::ResetFailing(c) => write!(f, "reset {c:?} fail"),
        }
    }

    fn parse_text(w: &[&str]) -> Result<Self, String> {
        Ok(match w[0] {
            "acquire" => PoolOp::Acquire(one(w, parse_point)?),
            "find" => PoolOp::FindThenDrop(one(w, parse_point)?),
            "release" => PoolOp::Release(one(w, parse_point)?),
            "prepare" => {
                arity(w, 2, 3)?;
                let kind = match w[1] {
                    "grow" => Resize::Grow,
                    "shrink" => Resize::Shrink,
                    other => {
                        return Err(format!(
                            "prepare what? expected grow or shrink, found {other:?}"
                        ))
                    }
                };
                let fail = match w.get(2) {
                    None => false,
                    Some(&"fail") => true,
                    Some(other) => {
                        return Err(format!("expected `fail` or nothing, found {other:?}"))
                    }
                };
                PoolOp::Prepare { kind, fail }
            }
            "commit" => PoolOp::Commit(one(w, |w| parse_in(w, limits::INDEX))?),
            "acquire-many" | "release-many" => {
                arity(w, 3, 3)?;
                let (point, count) = (parse_point(w[1])?, Count(parse_in(w[2], limits::COUNT)?));
                match w[0] {
                    "acquire-many" => PoolOp::AcquireMany {
                        offset: point,
                        count,
                    },
                    _ => PoolOp::ReleaseMany { from: point, count },
                }
            }
            "release-from" => PoolOp::ReleaseFrom(one(w, parse_point)?),
            "reset" => {
                arity(w, 2, 3)?;
                let capacity = Capacity(parse_in(w[1], limits::RESET)?);
                match w.get(2) {
                    None => PoolOp::Reset(capacity),
                    Some(&"fail") => PoolOp::ResetFailing(capacity),
                    Some(other) => {
                        return Err(format!("expected `fail` or nothing, found {other:?}"))
                    }
                }
            }
            "probe-ceiling" => {
                PoolOp::ProbeCeiling(Ceiling(one(w, |w| parse_in(w, limits::CEILING))?))
            }
            other => return Err(format!("unknown pool operation {other:?}")),
        })
    }

    fn simpler(&self) -> Option<Self> {
        match *self {
            PoolOp::AcquireMany { offset, count } => count
                .half()
                .map(|count| PoolOp::AcquireMany { offset, count }),
            PoolOp::ReleaseMany { from, count } => count
                .half()
                .map(|count| PoolOp::ReleaseMany { from, count }),
            PoolOp::Prepare { kind, fail: true } => Some(PoolOp::Prepare { kind, fail: false }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod reset_failing_tests {
    use super::*;

    /// A pool built with failing flags, as upstream builds it: the Rust
    /// `IdPool::with_capacity` (raised to `MAX_INLINE_LEN`, and
    /// `BitmapVec::new` allocates nothing up to it) builds 64 ids up to 64
    /// and refuses above; the C `dbitmap_init` leaves the map disabled
    /// (`nbits == 0`), which `binder_open` does not check. One table of
    /// cases, not the formula again.
    #[test]
    /// Upstream `IdPool::with_capacity` (rust/kernel/id_pool.rs: the size
    /// raised to `BitmapVec::MAX_INLINE_LEN`, inline up to one word) and
    /// `dbitmap_init` (drivers/android/dbitmap.h) under failing flags, as
    /// a table of cases; the twin (`IdPool` and the fast pool) must agree.
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
                crate::designs::Twin::reset_failing(n)
                    .ok()
                    .map(|p| p.capacity()),
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
