//! Pool-level differential testing: `IdPool` and `DBitmap` against a model.
//!
//! Resizes are split the way the kernel splits them: a resize is *requested*
//! and *allocated* (possibly with an injected failure) by
//! [`PoolOp::Prepare`], and *committed* later by [`PoolOp::Commit`]. Any
//! operation may run in between, so a single thread reaches every state that
//! another thread could create while the lock is dropped.

use crate::check::At;
use crate::domain::{Capacity, Ceiling, Count, Point};
use crate::oracle::{self, Policy, MAX_LEN, MIN};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use idpool::{Bitmap, DBitmap, Gfp, IdPool, PoolResizer, ReallocRequest};
use std::collections::BTreeSet;

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
    /// Acquire `count` ids from the offset up, growing whenever full.
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
}

impl<'a> Arbitrary<'a> for PoolOp {
    /// Weighted: resizes and their commits are common; the ceiling probe,
    /// which maps 128 MiB, is rare.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=99)? {
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
            _ => PoolOp::ProbeCeiling(Ceiling::arbitrary(u)?),
        })
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
pub trait PoolApi: Sized {
    /// The target's name.
    const TARGET: &'static str;
    /// A pending request.
    type Request;
    /// An allocated resizer.
    type Resizer;

    /// A fresh pool, or `None` when it cannot be built (the old one stays).
    fn reset(capacity: usize) -> Option<Self>;
    /// Whether the flavour can be built directly at any capacity (the C
    /// one grows by doubling only, so it skips [`PoolOp::ProbeCeiling`]).
    const DIRECT_CAPACITY: bool;
    /// Find and acquire.
    fn acquire(&mut self, offset: usize) -> Option<usize>;
    /// Find without acquiring.
    fn find(&mut self, offset: usize) -> Option<usize>;
    /// Release.
    fn release(&mut self, id: usize);
    /// Ask to grow.
    fn request(&self, kind: Resize) -> Option<Self::Request>;
    /// The size a request asks for.
    fn request_len(request: &Self::Request) -> usize;
    /// Allocate; `None` when the flavour drops a failed allocation on the spot.
    fn realloc(request: &Self::Request, gfp: Gfp) -> Option<Self::Resizer>;
    /// Commit.
    fn commit(&mut self, kind: Resize, resizer: Self::Resizer);
    /// Grow at once (request, allocate, commit); `false` when it cannot.
    fn grow_now(&mut self) -> bool;
    /// The capacity (0 when disabled).
    fn capacity(&self) -> usize;
    /// The used ids, ascending.
    fn used(&self) -> Vec<usize>;
}

impl PoolApi for IdPool {
    const TARGET: &'static str = "pool_ops";
    const DIRECT_CAPACITY: bool = true;
    type Request = ReallocRequest;
    type Resizer = PoolResizer;

    fn reset(capacity: usize) -> Option<Self> {
        IdPool::with_capacity(capacity, Gfp::Kernel).ok()
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        Some(self.find_unused_id(offset)?.acquire())
    }
    fn find(&mut self, offset: usize) -> Option<usize> {
        Some(self.find_unused_id(offset)?.as_usize())
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
}

impl PoolApi for DBitmap {
    const TARGET: &'static str = "dbitmap_ops";
    const DIRECT_CAPACITY: bool = false;
    type Request = usize;
    type Resizer = (Option<Bitmap>, usize);

    fn reset(capacity: usize) -> Option<Self> {
        let mut dmap = DBitmap::init(Gfp::Kernel);
        for _ in 0..MAX_GROWS {
            if dmap.nbits() >= capacity.min(DBITMAP_RESET_LIMIT) || !dmap.grow_now() {
                break;
            }
        }
        Some(dmap)
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        if !self.enabled() {
            return None;
        }
        self.acquire_next_zero_bit(offset).ok()
    }
    fn find(&mut self, offset: usize) -> Option<usize> {
        self.next_zero_bit(offset)
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
    live: BTreeSet<usize>,
    /// 0 when a C map is disabled.
    cap: usize,
    pending: Vec<ModelPending>,
    /// What happened so far, for the smoke test.
    pub events: Events,
}

impl PoolModel {
    /// A fresh pool of 64 ids.
    pub fn new(policy: Policy) -> Self {
        PoolModel {
            policy,
            live: BTreeSet::new(),
            cap: MIN,
            pending: Vec::new(),
            events: Events::default(),
        }
    }

    fn enabled(&self) -> bool {
        self.cap != 0
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
        let mut id = offset;
        for &used in self.live.range(offset..) {
            if used != id {
                break;
            }
            id += 1;
        }
        (id < self.cap).then_some(id)
    }

    fn grow_target(&self) -> Option<usize> {
        oracle::grow_target(self.policy, self.cap)
    }

    fn shrink_target(&self) -> Option<usize> {
        oracle::shrink_target(self.policy, self.cap, self.live.last().copied())
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
            (Policy::C, Resize::Grow) if !ok => self.disable(),
            (Policy::C, Resize::Grow) => {
                if self.enabled() && len > self.cap {
                    self.cap = len;
                }
            }
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

/// Runs `ops` on a fresh pool of flavour `P` and on the model, checking
/// every observable after every step. Panics at the first divergence.
pub fn run<P: PoolApi>(policy: Policy, ops: &[PoolOp]) -> Events {
    let mut pool = P::reset(0).expect("a 64-id pool needs no memory");
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
        let full_check = apply(&at, &mut pool, &mut pending, &mut model);
        at.eq("capacity", model.cap, pool.capacity());
        if model.cap >= 4096 {
            model.events.deep += 1;
        }
        if full_check || model.cap <= 1024 {
            check_used(&at, &model, &pool);
        }
    }
    if let Some(last) = ops.last() {
        let at = At {
            target: P::TARGET,
            step: ops.len() - 1,
            op: last,
            capacity: model.cap,
        };
        check_used(&at, &model, &pool);
    }
    model.events
}

fn check_used<P: PoolApi>(at: &At<'_, PoolOp>, model: &PoolModel, pool: &P) {
    let used = pool.used();
    if used.len() != model.live.len() || !used.iter().eq(model.live.iter()) {
        let lost: Vec<_> = model
            .live
            .iter()
            .filter(|id| used.binary_search(id).is_err())
            .take(8)
            .collect();
        let extra: Vec<_> = used
            .iter()
            .filter(|id| !model.live.contains(id))
            .take(8)
            .collect();
        at.fail_check("used ids", format_args!(
            "used ids: expected {} ids, got {}; lost {lost:?}, unexpected {extra:?} (first 8 of each)",
            model.live.len(),
            used.len()
        ));
    }
}

/// Applies one op to both sides and checks its direct result. Returns
/// whether the op may have touched many bits (so the caller compares the
/// whole used set).
fn apply<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    pending: &mut Vec<(Resize, P::Resizer)>,
    model: &mut PoolModel,
) -> bool {
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
            at.eq("acquired id", expected, pool.acquire(offset));
            false
        }
        PoolOp::FindThenDrop(offset) => {
            let offset = offset.resolve(model.cap);
            at.eq("found id", model.smallest_free(offset), pool.find(offset));
            false
        }
        PoolOp::Release(id) => {
            let id = id.resolve(model.cap);
            model.live.remove(&id);
            pool.release(id);
            false
        }
        PoolOp::Prepare { kind, fail } => {
            let expected = match kind {
                Resize::Grow => model.grow_target(),
                Resize::Shrink => model.shrink_target(),
            };
            if kind == Resize::Grow && expected.is_none() {
                model.events.grow_at_ceiling += 1;
            }
            let request = pool.request(kind);
            at.eq(
                "requested size",
                expected,
                request.as_ref().map(P::request_len),
            );
            let (Some(len), Some(request)) = (expected, request) else {
                return false;
            };
            let ok = model.alloc_ok(len, fail);
            if !ok {
                model.events.alloc_failed += 1;
            }
            let resizer = P::realloc(&request, if fail { Gfp::Fail } else { Gfp::Kernel });
            // Rust drops a failed allocation on the spot; C commits NULL.
            let kept = ok || model.policy == Policy::C;
            at.eq("allocation kept for commit", kept, resizer.is_some());
            if let Some(resizer) = resizer {
                if pending.len() == MAX_PENDING {
                    pending.remove(0);
                    model.pending.remove(0);
                }
                pending.push((kind, resizer));
                model.pending.push(ModelPending { kind, len, ok });
            }
            false
        }
        PoolOp::Commit(k) => {
            if model.pending.is_empty() {
                return false;
            }
            let k = k as usize % model.pending.len();
            let ModelPending { kind, len, ok } = model.pending.remove(k);
            let (_, resizer) = pending.remove(k);
            model.commit(kind, len, ok);
            pool.commit(kind, resizer);
            true
        }
        PoolOp::AcquireMany { offset, count } => {
            let mut next = offset.resolve(model.cap);
            for i in 0..count.0 {
                let expected = loop {
                    match model.smallest_free(next) {
                        Some(id) => break Some(id),
                        None if next < model.cap
                            || model.cap >= BULK_CAP_LIMIT
                            || !model.grow_now() =>
                        {
                            break None
                        }
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
                }
                at.eq(
                    format_args!("id #{i} of the bulk acquire"),
                    expected,
                    actual,
                );
                at.eq(
                    "capacity during the bulk acquire",
                    model.cap,
                    pool.capacity(),
                );
                match expected {
                    Some(id) => next = id + 1,
                    None => {
                        model.events.pool_full += 1;
                        break;
                    }
                }
            }
            true
        }
        PoolOp::ReleaseMany { from, count } => {
            let from = from.resolve(model.cap);
            for id in from..from.saturating_add(count.0) {
                model.live.remove(&id);
                pool.release(id);
            }
            true
        }
        PoolOp::ReleaseFrom(from) => {
            let from = from.resolve(model.cap);
            let doomed: Vec<usize> = model.live.range(from..).copied().collect();
            for id in doomed {
                model.live.remove(&id);
                pool.release(id);
            }
            true
        }
        PoolOp::ProbeCeiling(Ceiling(n)) => {
            if !P::DIRECT_CAPACITY {
                return false;
            }
            let mut aside = PoolModel::new(model.policy);
            let expected = aside.reset_capacity(n);
            let fresh = P::reset(n);
            at.eq("ceiling pool built", expected.is_some(), fresh.is_some());
            if let (Some(cap), Some(fresh)) = (expected, fresh) {
                aside.cap = cap;
                at.eq("ceiling pool capacity", cap, fresh.capacity());
                let target = aside.grow_target();
                if target.is_none() {
                    model.events.grow_at_ceiling += 1;
                }
                at.eq(
                    "grow request at the ceiling",
                    target,
                    fresh.request(Resize::Grow).as_ref().map(P::request_len),
                );
            }
            false
        }
        PoolOp::Reset(Capacity(n)) => {
            let expected = model.reset_capacity(n);
            let fresh = P::reset(n);
            at.eq("reset succeeds", expected.is_some(), fresh.is_some());
            if let (Some(cap), Some(fresh)) = (expected, fresh) {
                model.cap = cap;
                model.live.clear();
                *pool = fresh;
            }
            true
        }
    }
}
