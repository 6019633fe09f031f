//! What the pool runner drives ([`PoolApi`]): a thin adapter over each
//! flavour's own public API, with no logic of its own, and its adapter for
//! the Rust driver's `IdPool`. The other flavours' adapters live with the
//! targets that run them (`dbitmap_ops`, `kernel_dbitmap`, `kernel_idpool`)
//! and this one's twin with it ([`super::Twin`]).

use super::Resize;
use crate::bits;
use crate::check::{Check, Flavour};
use crate::events::Events;
use crate::idset::IdSet;
use idpool::{Gfp, IdPool, PoolResizer, ReallocRequest};

/// The C flavour cannot be built at any size: [`PoolApi::reset`] grows it
/// by doubling, up to this many bits.
pub const DBITMAP_RESET_LIMIT: usize = 1 << 20;

/// A bulk acquire stops growing the pool here: beyond, every scan costs
/// milliseconds. ([`super::PoolOp::ProbeCeiling`] covers the 2^30 ceiling.)
pub const BULK_CAP_LIMIT: usize = 1 << 20;

/// No pool doubles more than this from 64 ids: a loop that grows stops here
/// even when a broken grow never raises the capacity.
pub const MAX_GROWS: usize = 32;

/// Why no pool was built. For a single flavour, nothing more; for a twin
/// ([`super::Twin`]) whose design disagreed with the flavour about
/// building it, the design's flavour, the check and what happened,
/// reported like any other difference of the twin.
#[derive(Debug, Default)]
pub struct Refused {
    /// The design, the check, and what happened.
    pub divergence: Option<(Flavour, Check, String)>,
}

/// A pool built, or [`Refused`].
pub type Built<P> = Result<P, Refused>;

/// The pool API the runner drives: a thin adapter over each flavour's own
/// public API, with no logic of its own.
///
/// It is not the allocator's `idpool::Flavour`, which is what the handle
/// table needs of a pool: `Flavour` finds ids with the table's fallback
/// scan and reports a failed allocation as an error, while this runner
/// needs the bare pool: a find without acquire, a reset at any size, and
/// the C driver's failed allocation kept (as NULL) for its commit.
pub trait PoolApi: Sized {
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
    /// one grows by doubling only, so it skips [`super::PoolOp::ProbeCeiling`]).
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
    /// kernel's own code: `kernel_dbitmap`'s `KernelPair`, `kernel_idpool`'s
    /// `IdPoolPair`): where the two first
    /// disagreed, asked after every step. `None` for a single flavour.
    fn diverged(&mut self) -> Option<String> {
        None
    }
    /// The design driven beside the flavour on the same operations (see
    /// [`super::Twin`]), if any.
    fn twin(&self) -> Option<Flavour> {
        None
    }
    /// The first way the twin differed from the flavour since the last
    /// call and, when `full`, a broken invariant of the twin's own.
    fn take_divergence(&mut self, full: bool) -> Option<(Check, String)> {
        let _ = full;
        None
    }
    /// The process's release of the pool (`binder_deferred_release` frees
    /// the map), which the runner makes when a reset replaces the pool and
    /// after the last step: what the flavour saw over its life that the
    /// model does not count, and, for a flavour whose release can go wrong
    /// (a kernel header that frees a map twice), the check that failed.
    /// Nothing by default: dropping the pool is its release.
    fn deferred_release(&mut self) -> Released {
        Released::default()
    }
}

/// What a pool's release ([`PoolApi::deferred_release`]) reports.
#[derive(Debug, Default)]
pub struct Released {
    /// What the flavour saw over its life, added to the run's events.
    pub events: Events,
    /// The check the release failed, the flavour it is about, and what
    /// happened.
    pub failure: Option<(Check, Flavour, String)>,
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

impl PoolApi for IdPool {
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
