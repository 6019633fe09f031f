//! The naive model of a pool ([`PoolModel`]): a set of live ids and a
//! capacity from the formulas of `docs/spec.md`, per driver ([`Policy`]);
//! and what a C grow of any size asks for ([`CGrowSize`]).

use super::api::DBITMAP_RESET_LIMIT;
use super::ops::{PoolOp, Resize};
use crate::check::Op;
use crate::events::Events;
use crate::feedback;
use crate::idset::IdSet;
use crate::oracle::{self, Policy, MAX_LEN, MIN};

/// The most resizers pending at once.
pub const MAX_PENDING: usize = 4;

/// A pending resizer as the model sees it: its kind, its length, and
/// whether its allocation succeeded (`false`: a C resizer holding NULL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ModelPending {
    pub(super) kind: Resize,
    pub(super) len: usize,
    pub(super) ok: bool,
}

/// The naive oracle: a set of live ids and a capacity computed from the
/// formulas of `docs/spec.md` ([`crate::oracle`]). It never calls the
/// allocator.
#[derive(Clone, Debug)]
pub struct PoolModel {
    pub(super) policy: Policy,
    pub(super) live: IdSet,
    /// 0 when a C map is disabled.
    pub(super) cap: usize,
    pub(super) pending: Vec<ModelPending>,
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
    pub(super) fn observe(&self, target: &str, op: &PoolOp) {
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
                .with(op.kind().class(), 64),
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

    pub(super) fn enabled(&self) -> bool {
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
    pub fn reset_failing_capacity(&self, n: usize) -> Option<usize> {
        match self.policy {
            Policy::Rust if n <= 64 => Some(64),
            Policy::Rust => None,
            Policy::C => Some(0),
        }
    }

    /// The capacity after `Reset(n)`, or `None` when the reset fails.
    pub(super) fn reset_capacity(&self, n: usize) -> Option<usize> {
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
    pub(super) fn smallest_free(&self, offset: usize) -> Option<usize> {
        self.live.smallest_absent(offset, self.cap)
    }

    pub(super) fn grow_target(&self) -> Option<usize> {
        oracle::grow_target(self.policy, self.cap)
    }

    pub(super) fn shrink_target(&self) -> Option<usize> {
        oracle::shrink_target(self.policy, self.cap, self.live.last())
    }

    pub(super) fn alloc_ok(&self, len: usize, fail: bool) -> bool {
        oracle::alloc_ok(self.policy, len, fail)
    }

    pub(super) fn disable(&mut self) {
        self.cap = 0;
        self.live.clear();
        self.events.disabled += 1;
    }

    pub(super) fn commit(&mut self, kind: Resize, len: usize, ok: bool) {
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
    pub(super) fn grow_now(&mut self) -> bool {
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
