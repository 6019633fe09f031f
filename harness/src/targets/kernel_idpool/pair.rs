//! The `kernel_idpool` target's pool: `pool_ops`' op language driven
//! through two sides at once, mainline's own `IdPool` ([`KernelIdPool`]:
//! `rust/kernel/id_pool.rs` and `rust/kernel/bitmap.rs`, compiled unchanged
//! by the test-only `kernel-idpool` crate) and our [`IdPool`]; the pool
//! runner checks ours against the naive model (`pool_ops`' `PoolModel`
//! with the Rust policy) as it does for `pool_ops`.
//!
//! [`IdPoolPair`] is a [`PoolApi`] flavour that runs every call on both
//! pools and compares them on the spot: the id each `find_unused_id`
//! offers (`as_usize` and `as_u32`) and acquires, whether each grow and
//! shrink request is made and how many ids it asks for, whether each
//! `realloc` succeeds and the length of its resizer, whether a pool is
//! built (`with_capacity`, with or without failing flags), the capacity
//! after every call, each id the runner reads alone ([`PoolApi::is_used`],
//! [`PoolApi::bits`]) and the whole used set whenever the runner reads it;
//! and the kernel's log: mainline logs one `pr_err!` line for each
//! `release_id` at or past the capacity, exactly
//! `` Bit `index` must be < {capacity}, was {id} ``, and nothing else.
//! The first disagreement is reported by [`PoolApi::diverged`] before the
//! runner compares ours with the model, so a failure says which side
//! stood alone.
//!
//! Mainline's fields are private: every read of it goes through its own
//! API ([`KernelIdPool::is_used`] and [`KernelIdPool::used_ids`] ask
//! `find_unused_id`; a request's size is read off a `realloc` made to
//! fail, [`KernelReallocRequest::num_ids`]).
//!
//! # Calls past the capacity
//!
//! `pool_ops` releases ids and searches from offsets at or past the
//! capacity. Ours answers `None` and changes nothing; mainline without
//! `CONFIG_RUST_BITMAP_HARDENED` does the same and logs each such release;
//! mainline with it panics in the bitmap's assertion (`must be <`) before
//! any write. The comparison expects the build it runs: every engine, the
//! triage tool and the tests link the harness's `kernel-idpool` without
//! the `hardened` feature, so the non-hardened answer and its log line
//! are compared call by call. In a hardened build (the feature turned on
//! by a workspace build that unifies it) the pair sends no such call to
//! mainline, since a fuzz target cannot catch the panic, and takes
//! mainline's answer to be the assertion's: nothing changed, nothing
//! logged, which ours must match. `kernel-idpool`'s own tests
//! (`tests/hardened.rs`, and `tests/lockstep.rs` run with `--features
//! hardened`) check that the hardened build does panic there, with the
//! assertion, and changes nothing.

use crate::check::{Check, Flavour, FlavourName};
use crate::events::Events;
use crate::idset::IdSet;
use crate::targets::pool_ops::{Built, PoolApi, Refused, Released, Resize, Shape};
use core::fmt;
use idpool::{Gfp, IdPool, PoolResizer, ReallocRequest};
use kernel_idpool::print::{take_log, Level};
use kernel_idpool::{KernelIdPool, KernelPoolResizer, KernelReallocRequest, HARDENED};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The `kernel_idpool` line for logs: what was compiled in (package
/// version and both files' sha256), or why nothing was.
pub fn provenance() -> String {
    kernel_idpool::provenance()
}

/// Why mainline's files are not compiled in; `None` when they are.
pub fn unavailable() -> Option<String> {
    kernel_idpool::unavailable_reason().map(str::to_owned)
}

/// Where the first disagreement is kept.
type Slot = Rc<RefCell<Option<String>>>;

/// Records the first disagreement in `slot`.
fn record(slot: &Slot, what: impl FnOnce() -> String) {
    let mut slot = slot.borrow_mut();
    if slot.is_none() {
        *slot = Some(what());
    }
}

/// Records in `slot` that mainline answered `kernel` where ours answered
/// `ours`, unless they are equal; `what` is formatted only then.
fn same<T: PartialEq + fmt::Debug>(slot: &Slot, what: impl fmt::Display, kernel: T, ours: T) {
    if kernel != ours {
        record(slot, || format!("{what}: kernel {kernel:?}, ours {ours:?}"));
    }
}

/// Mainline's `IdPool` and ours, driven in lockstep.
pub struct IdPoolPair {
    ours: IdPool,
    /// Mainline's: its reads (`find_unused_id`) take `&mut`, the runner's
    /// reads `&self`.
    kernel: RefCell<KernelIdPool>,
    /// The first disagreement, kept until [`PoolApi::diverged`] takes it
    /// (shared with the requests and resizers, which compare too).
    divergence: Slot,
    /// Calls at or past the capacity compared so far.
    out_of_range: Cell<u32>,
}

impl fmt::Debug for IdPoolPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdPoolPair")
            .field("ours", &self.ours)
            .field("kernel capacity", &self.kernel.borrow().capacity())
            .finish()
    }
}

/// A request made on both sides: ours, mainline's (`None` when mainline
/// made none: a disagreement already recorded), and where to record one.
pub struct PairRequest {
    ours: ReallocRequest,
    kernel: Option<KernelReallocRequest>,
    divergence: Slot,
}

/// A resizer allocated on both sides: ours, mainline's (`None` when its
/// request or its allocation did not happen: a disagreement already
/// recorded).
pub struct PairResizer {
    ours: PoolResizer,
    kernel: Option<KernelPoolResizer>,
}

impl IdPoolPair {
    /// Both pools built with `with_capacity(capacity, gfp)`, compared:
    /// whether each was built and its capacity. When only mainline refuses,
    /// a fresh one stands in and the difference stays recorded; when ours
    /// refuses, the difference goes with the refusal.
    fn built(capacity: usize, gfp: Gfp) -> Built<Self> {
        let divergence = Slot::default();
        let ours = IdPool::with_capacity(capacity, gfp);
        let kernel = KernelIdPool::with_capacity(capacity, gfp);
        same(
            &divergence,
            format_args!("with_capacity({capacity}, {gfp:?}) builds a pool"),
            kernel.is_ok(),
            ours.is_ok(),
        );
        let Ok(ours) = ours else {
            return Err(refused(&divergence));
        };
        let pair = IdPoolPair {
            ours,
            kernel: RefCell::new(kernel.unwrap_or_else(|_| KernelIdPool::new())),
            divergence,
            out_of_range: Cell::new(0),
        };
        pair.compare_capacity(format_args!("after with_capacity({capacity}, {gfp:?})"));
        Ok(pair)
    }

    /// Records a capacity that differs, `when`.
    fn compare_capacity(&self, when: impl fmt::Display) {
        let kernel = self.kernel.borrow().capacity();
        same(
            &self.divergence,
            format_args!("capacity {when}"),
            kernel,
            self.ours.capacity(),
        );
    }

    /// Runs `call` on mainline, whose argument `arg` (an id, or the offset
    /// of a search) may be past the capacity, and checks the log it leaves:
    /// for a `write` (a release) past the capacity, exactly the bitmap's
    /// `pr_err!` line, else nothing. In a hardened build a call past the
    /// capacity is not made (it would panic in the bitmap's assertion,
    /// before any write): its answer is `None`.
    fn on_kernel<T>(
        &self,
        name: &str,
        arg: usize,
        write: bool,
        call: impl FnOnce(&mut KernelIdPool) -> Option<T>,
    ) -> Option<T> {
        let mut kernel = self.kernel.borrow_mut();
        let capacity = kernel.capacity();
        let out = kernel_idpool::out_of_range(arg, capacity);
        if out {
            self.out_of_range.set(self.out_of_range.get() + 1);
            if HARDENED {
                return None;
            }
        }
        self.log_is(format_args!("before {name}({arg})"), None);
        let answer = call(&mut kernel);
        let expected =
            (out && write).then(|| format!("Bit `index` must be < {capacity}, was {arg}"));
        self.log_is(
            format_args!("{name}({arg}) (capacity {capacity})"),
            expected,
        );
        answer
    }

    /// Takes mainline's log and records a difference from `expected` (one
    /// `pr_err!` line, or none).
    fn log_is(&self, when: impl fmt::Display, expected: Option<String>) {
        let log = take_log();
        let expected: Vec<(Level, String)> =
            expected.map(|l| (Level::Err, l)).into_iter().collect();
        if log != expected {
            record(&self.divergence, || {
                format!("kernel log {when}: logged {log:?}, expected {expected:?}")
            });
        }
    }

    /// Mainline's bits `base..base + n` (`n <= 64`) as a word, read off
    /// the unused ids that `find_unused_id` walks from `base` (each search
    /// in range).
    fn kernel_word(&self, base: usize, n: usize) -> u64 {
        let mut kernel = self.kernel.borrow_mut();
        let end = (base + n).min(kernel.capacity());
        let mut word = 0;
        let mut next = base;
        while next < end {
            let free = kernel.find_unused_id(next).map_or(end, |u| u.as_usize());
            for id in next..free.min(end) {
                word |= 1 << (id - base);
            }
            next = free + 1;
        }
        word
    }
}

/// Ours refused to build: whatever mainline answered differently goes
/// with the refusal.
fn refused(divergence: &Slot) -> Refused {
    Refused {
        divergence: divergence.borrow_mut().take().map(|d| {
            (
                Flavour::plain(FlavourName::Kernel),
                Check::Kernel,
                format!("kernel and ours disagree while building: {d}"),
            )
        }),
    }
}

impl PoolApi for IdPoolPair {
    const DIRECT_CAPACITY: bool = true;
    type Request = PairRequest;
    type Resizer = PairResizer;

    fn reset(capacity: usize) -> Built<Self> {
        IdPoolPair::built(capacity, Gfp::Kernel)
    }
    fn reset_failing(capacity: usize) -> Built<Self> {
        IdPoolPair::built(capacity, Gfp::Fail)
    }
    fn grow_target_at(&self, _: u32) -> Option<(usize, Option<bool>)> {
        None
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        let kernel = self.on_kernel("find_unused_id", offset, false, |k| {
            k.find_unused_id(offset).map(|u| u.acquire())
        });
        let ours = self.ours.find_unused_id(offset).map(|u| u.acquire());
        let what = format_args!("find_unused_id({offset}).acquire()");
        same(&self.divergence, what, kernel, ours);
        ours
    }
    fn find(&mut self, offset: usize) -> Option<(usize, Option<u32>)> {
        let read = |id: usize, handle: u32| (id, Some(handle));
        let kernel = self.on_kernel("find_unused_id", offset, false, |k| {
            k.find_unused_id(offset)
                .map(|u| read(u.as_usize(), u.as_u32()))
        });
        let ours = self
            .ours
            .find_unused_id(offset)
            .map(|u| read(u.as_usize(), u.as_u32()));
        let what = format_args!("find_unused_id({offset}) (as_usize, as_u32)");
        same(&self.divergence, what, kernel, ours);
        ours
    }
    fn release(&mut self, id: usize) {
        self.on_kernel("release_id", id, true, |k| {
            k.release_id(id);
            Some(())
        });
        self.ours.release_id(id);
    }
    /// Both requests, compared: whether each is made and its size.
    fn request(&self, kind: Resize) -> Option<PairRequest> {
        let kernel = self.kernel.borrow();
        let (ours, theirs) = match kind {
            Resize::Grow => (self.ours.grow_request(), kernel.grow_request()),
            Resize::Shrink => (self.ours.shrink_request(), kernel.shrink_request()),
        };
        same(
            &self.divergence,
            format_args!("{kind:?} request (ids asked for)"),
            theirs.as_ref().map(KernelReallocRequest::num_ids),
            ours.as_ref().map(ReallocRequest::num_ids),
        );
        Some(PairRequest {
            ours: ours?,
            kernel: theirs,
            divergence: self.divergence.clone(),
        })
    }
    fn request_len(request: &PairRequest) -> usize {
        request.ours.num_ids()
    }
    /// Both `realloc(gfp)`, compared: whether each succeeded and its
    /// resizer's length. Like ours, mainline drops a failed allocation.
    fn realloc(request: &PairRequest, gfp: Gfp) -> Option<PairResizer> {
        let ours = request.ours.realloc(gfp).ok();
        let kernel = request.kernel.as_ref().and_then(|k| {
            let kernel = k.realloc(gfp).ok();
            let what = format_args!("realloc({gfp:?}) of {} ids: resizer", k.num_ids());
            same(
                &request.divergence,
                what,
                kernel.as_ref().map(KernelPoolResizer::len),
                ours.as_ref().map(PoolResizer::len),
            );
            kernel
        });
        Some(PairResizer {
            ours: ours?,
            kernel,
        })
    }
    /// A resizer exists only once ours' allocation succeeded.
    fn allocated(_: &PairResizer) -> bool {
        true
    }
    /// Ours' length and emptiness (mainline's length was compared when it
    /// was allocated).
    fn shape(resizer: &PairResizer) -> Option<Shape> {
        Some(Shape {
            len: resizer.ours.len(),
            empty: resizer.ours.is_empty(),
            inline: None,
        })
    }
    fn commit(&mut self, kind: Resize, resizer: PairResizer) {
        let before = self.ours.capacity();
        let PairResizer { ours, kernel } = resizer;
        let mut k = self.kernel.borrow_mut();
        match kind {
            Resize::Grow => {
                self.ours.grow(ours);
                if let Some(kernel) = kernel {
                    k.grow(kernel);
                }
            }
            Resize::Shrink => {
                self.ours.shrink(ours);
                if let Some(kernel) = kernel {
                    k.shrink(kernel);
                }
            }
        }
        drop(k);
        self.compare_capacity(format_args!("after the {kind:?} commit from {before}"));
    }
    /// Request, `realloc` and commit at once on both sides, compared.
    fn grow_now(&mut self) -> bool {
        let ours = <IdPool as PoolApi>::grow_now(&mut self.ours);
        let kernel = {
            let mut k = self.kernel.borrow_mut();
            match k.grow_request().map(|r| r.realloc(Gfp::Kernel)) {
                Some(Ok(resizer)) => {
                    k.grow(resizer);
                    true
                }
                _ => false,
            }
        };
        same(&self.divergence, "grown at once", kernel, ours);
        self.compare_capacity("after a grow at once");
        ours
    }
    fn capacity(&self) -> usize {
        self.compare_capacity("read");
        self.ours.capacity()
    }
    fn used(&self) -> Vec<usize> {
        let ours: Vec<usize> = self.ours.used_ids().collect();
        let kernel = self.kernel.borrow_mut().used_ids();
        if kernel != ours {
            let only = |a: &[usize], b: &[usize]| -> Vec<usize> {
                a.iter()
                    .filter(|x| b.binary_search(x).is_err())
                    .take(8)
                    .copied()
                    .collect()
            };
            let (k, o) = (only(&kernel, &ours), only(&ours, &kernel));
            record(&self.divergence, || {
                format!(
                    "used ids: kernel {}, ours {}; used in the kernel only {k:?}, in ours only {o:?} (first 8 of each)",
                    kernel.len(),
                    ours.len()
                )
            });
        }
        ours
    }
    /// Both pools' used ids are `expected`'s members; a difference goes to
    /// [`IdPoolPair::used`], which records it.
    fn used_matches(&self, expected: &IdSet) -> bool {
        self.ours.used_ids().eq(expected.iter())
            && self
                .kernel
                .borrow_mut()
                .used_ids()
                .into_iter()
                .eq(expected.iter())
    }
    /// Ours' `is_used`; mainline's must agree.
    fn is_used(&self, id: usize) -> bool {
        let ours = self.ours.is_used(id);
        let kernel = self.kernel.borrow_mut().is_used(id);
        same(
            &self.divergence,
            format_args!("is_used({id})"),
            kernel,
            ours,
        );
        ours
    }
    /// Ours read id by id, mainline's off its unused ids; the first id
    /// whose bits differ is recorded as [`IdPoolPair::is_used`] records it.
    fn bits(&self, base: usize, n: usize) -> u64 {
        let ours = crate::bits::word(base, n, |id| self.ours.is_used(id));
        let kernel = self.kernel_word(base, n);
        if let Some((id, kernel, ours)) = crate::bits::first_difference(base, kernel, ours) {
            same(
                &self.divergence,
                format_args!("is_used({id})"),
                kernel,
                ours,
            );
        }
        ours
    }
    fn diverged(&mut self) -> Option<String> {
        self.log_is("between calls", None);
        self.compare_capacity("after the step");
        self.divergence.borrow_mut().take()
    }
    /// What the pair saw over its life: the calls past the capacity it
    /// compared. Dropping the pools is their release.
    fn deferred_release(&mut self) -> Released {
        Released {
            events: Events {
                out_of_range: self.out_of_range.replace(0),
                ..Events::default()
            },
            failure: None,
        }
    }
}
