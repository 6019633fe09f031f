//! The `kernel_dbitmap` target's pool: `pool_ops`' op language driven
//! through three sides at once: the kernel's own C dbitmap
//! ([`KernelDBitmap`], compiled from `drivers/android/dbitmap.h` by the
//! test-only `kernel-dbitmap` crate), our [`DBitmap`], and the naive model
//! (`pool_ops`' `PoolModel` with the C policy).
//!
//! [`KernelPair`] is a [`PoolApi`] flavour that runs every call on both
//! implementations and compares them on the spot: the acquired bit or
//! `-ENOSPC`, the found bit, the grow and shrink sizes, whether each
//! allocation came back NULL (at every site: a prepared resize, a reset's
//! grows, a bulk acquire's grows); and after every step (and every commit
//! inside a step) the whole state: enabled, nbits, the set bits,
//! `grow_nbits` and `shrink_nbits`; and every read the pool runner makes
//! of one side through [`PoolApi`]: `test_bit` of each id it reads
//! ([`PoolApi::is_used`], and [`PoolApi::bits`], which reads ours one id at
//! a time and the kernel's map a word at a time), and whether a prepared resizer holds
//! memory and its length ([`PoolApi::allocated`], [`PoolApi::shape`]). The first disagreement is reported by
//! [`PoolApi::diverged`], before the pool runner compares the pair with
//! the model, so a failure says which side stood alone.
//!
//! Bounds (see the crate's README): no side calls acquire on a disabled
//! map (the driver takes the slow scan; ours panics there), and an
//! allocation above [`MAX_ALLOC_BITS`] fails on both sides without asking
//! the C (ours refuses above `i32::MAX` bits, where the C would allocate
//! 256 MiB).
//!
//! # The historical header, and its double free
//!
//! A third side runs beside the two: the kernel's header with upstream's
//! fix "binder: fix double-free in dbitmap" (3ebcd3460cad, September 2025)
//! reversed ([`Header::Historical2024`], built by `kernel-dbitmap`), whose
//! `dbitmap_free` frees the map and leaves the pointer behind, as merged in
//! June 2024 (`c-2024-06`). Every call runs on it too, with its own maps,
//! and its state is compared with the shipped header's after every call:
//! the patch changes nothing else. The difference comes at the process's
//! release ([`PoolApi::deferred_release`]: when a reset replaces the pool,
//! and after the last step), `binder_deferred_release`'s `dbitmap_free`:
//! after a failed grow (which freed the map through `dbitmap_free`) the
//! historical header frees the map a second time. That is upstream's
//! double free, a memory-safety finding ([`Check::DoubleFree`], the known
//! finding [`Finding::DoubleFree`]), and it is made for real:
//!
//! - without AddressSanitizer (the triage tool, the tests, the other
//!   engines), the shim records the second `kfree` instead of aborting,
//!   and the release reports it;
//! - under AddressSanitizer (libFuzzer), when `IDPOOL_HISTORY` asks for
//!   `double-free` (`ci/history.sh`), the second `kfree` reaches `free()`
//!   and ASan reports the double free and ends the process;
//! - under AddressSanitizer otherwise (a campaign, for which the finding
//!   is known and quiet), the dangling pointer is forgotten, as the fix
//!   clears it, without the second free, and the release reports the
//!   finding from the pointer the header left behind.
//!
//! Either way the map was freed once and nothing leaks, and the pair's own
//! drop never frees a dangling map again.

use crate::check::{Check, Flavour, FlavourName};
use crate::history::{self, Finding};
use crate::targets::dbitmap_ops::dbitmap_grow_target_at;
use crate::targets::pool_ops::{
    Built, PoolApi, Refused, Released, Resize, Shape, DBITMAP_RESET_LIMIT,
};
use idpool::{Bitmap, DBitmap, Gfp, Version};
use kernel_dbitmap::{bit_of, shim, Header, KernelBitmap, KernelDBitmap};
use std::cell::RefCell;
use std::rc::Rc;

/// The largest map either side allocates: `i32::MAX` bits, where our
/// [`DBitmap::zalloc`] stops. Above it both allocations fail.
pub const MAX_ALLOC_BITS: usize = i32::MAX as usize;

/// The `kernel_dbitmap` line for logs: what was compiled in (package
/// version and header sha256), or why nothing was.
pub fn provenance() -> String {
    kernel_dbitmap::provenance()
}

/// Why the kernel's header is not compiled in; `None` when it is.
pub fn unavailable() -> Option<String> {
    kernel_dbitmap::unavailable_reason().map(str::to_owned)
}

/// Ours and the kernel's, driven in lockstep, with the historical header
/// beside the kernel's.
#[derive(Debug)]
pub struct KernelPair {
    ours: DBitmap,
    kernel: KernelDBitmap,
    /// The historical header ([`Header::Historical2024`]), when built.
    historical: Option<KernelDBitmap>,
    /// The first disagreement, kept until [`PoolApi::diverged`] takes it
    /// (shared with the requests and resizers, which compare too).
    divergence: Slot,
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

/// A resize request: the size both sides asked for, and where the
/// allocation reports a difference.
#[derive(Debug)]
pub struct PairRequest {
    nbits: usize,
    /// Whether the historical header's map is allocated too.
    historical: bool,
    divergence: Slot,
}

/// A resize allocated on both sides: ours, the kernel's (either `None` for
/// NULL), the historical header's (`None` without that side), and the size
/// all were asked for.
#[derive(Debug)]
pub struct PairResizer {
    ours: Option<Bitmap>,
    kernel: Option<KernelBitmap>,
    historical: Option<Option<KernelBitmap>>,
    nbits: usize,
    divergence: Slot,
}

/// The historical header's `dbitmap_init`, when it was built.
fn historical_init(gfp: Gfp) -> Option<KernelDBitmap> {
    let header = Header::Historical2024;
    header
        .available()
        .then(|| KernelDBitmap::init_from(gfp, header))
}

/// The flavour of the historical header's findings: the kernel's code with
/// `dbitmap_free` as merged in June 2024.
pub const HISTORICAL: Flavour = Flavour::One {
    name: FlavourName::Kernel,
    version: Some(Version::C2024_06),
};

impl KernelPair {
    fn fresh() -> Self {
        KernelPair {
            ours: DBitmap::init(Gfp::Kernel),
            kernel: KernelDBitmap::init(Gfp::Kernel),
            historical: historical_init(Gfp::Kernel),
            divergence: Slot::default(),
        }
    }

    /// Records the first disagreement.
    fn record(&self, what: impl FnOnce() -> String) {
        record(&self.divergence, what);
    }

    /// Compares one value of both sides.
    fn same<T: PartialEq + core::fmt::Debug>(&self, what: &str, kernel: T, ours: T) {
        if kernel != ours {
            self.record(|| format!("{what}: kernel {kernel:?}, ours {ours:?}"));
        }
    }

    /// Compares one value of the shipped header and the historical one.
    fn beside<T: PartialEq + core::fmt::Debug>(&self, what: &str, kernel: T, historical: T) {
        if kernel != historical {
            self.record(|| {
                format!("{what}: kernel {kernel:?}, the historical header {historical:?}")
            });
        }
    }

    /// Compares every observable of the two maps: enabled, nbits, the set
    /// bits, `grow_nbits`, `shrink_nbits`; and the historical header's with
    /// the kernel's, its words included.
    fn compare_state(&self, when: &str) {
        let (k, o) = (&self.kernel, &self.ours);
        let state = |enabled, nbits, grow, shrink| {
            format!("enabled {enabled}, nbits {nbits}, grow_nbits {grow}, shrink_nbits {shrink}")
        };
        let kernel = state(k.enabled(), k.nbits(), k.grow_nbits(), k.shrink_nbits());
        if let Some(h) = &self.historical {
            let historical = state(h.enabled(), h.nbits(), h.grow_nbits(), h.shrink_nbits());
            self.beside(&format!("{when}: state"), &kernel, &historical);
            self.beside(&format!("{when}: words"), k.words(), h.words());
        }
        let ours = state(o.enabled(), o.nbits(), o.grow_nbits(), o.shrink_nbits());
        if kernel != ours {
            self.record(|| format!("{when}: kernel ({kernel}), ours ({ours})"));
            return;
        }
        // The same set bits: as many, and each of ours set in the kernel's.
        let words = k.words();
        let kernel_count: u32 = words.iter().map(|w| w.count_ones()).sum();
        let mut ours_count = 0usize;
        let mut missing = None;
        for bit in o.used_ids() {
            ours_count += 1;
            if missing.is_none() && !bit_of(words, bit) {
                missing = Some(bit);
            }
        }
        if kernel_count as usize != ours_count || missing.is_some() {
            self.record(|| {
                let kernel_bits = k.used_ids();
                let ours_bits: Vec<usize> = o.used_ids().collect();
                let only = |a: &[usize], b: &[usize]| -> Vec<usize> {
                    a.iter()
                        .filter(|x| b.binary_search(x).is_err())
                        .take(8)
                        .copied()
                        .collect()
                };
                format!(
                    "{when}: set bits: kernel {kernel_count}, ours {ours_count}; \
                     set in the kernel only {:?}, in ours only {:?} (first 8 of each)",
                    only(&kernel_bits, &ours_bits),
                    only(&ours_bits, &kernel_bits)
                )
            });
        }
    }

    /// `bitmap_zalloc(nbits)` on every side (the historical header's when
    /// `historical`); above [`MAX_ALLOC_BITS`] all fail without asking the
    /// C.
    fn zalloc(nbits: usize, gfp: Gfp, historical: bool, divergence: &Slot) -> PairResizer {
        let gfp = if nbits > MAX_ALLOC_BITS {
            Gfp::Fail
        } else {
            gfp
        };
        PairResizer {
            ours: DBitmap::zalloc(nbits, gfp),
            kernel: KernelDBitmap::zalloc(nbits, gfp),
            historical: historical.then(|| KernelDBitmap::zalloc(nbits, gfp)),
            nbits,
            divergence: divergence.clone(),
        }
    }

    /// Commits on both sides, then compares them.
    fn commit_pair(&mut self, kind: Resize, resizer: PairResizer) {
        let PairResizer {
            ours,
            kernel,
            historical,
            nbits,
            ..
        } = resizer;
        let what = match kind {
            Resize::Grow => {
                self.ours.grow(ours, nbits);
                self.kernel.grow(kernel, nbits);
                if let (Some(h), Some(new)) = (&mut self.historical, historical) {
                    h.grow(new, nbits);
                }
                "dbitmap_grow"
            }
            Resize::Shrink => {
                self.ours.shrink(ours, nbits);
                self.kernel.shrink(kernel, nbits);
                if let (Some(h), Some(new)) = (&mut self.historical, historical) {
                    h.shrink(new, nbits);
                }
                "dbitmap_shrink"
            }
        };
        self.compare_state(&format!("after {what}(nbits {nbits})"));
    }
}

impl KernelPair {
    /// A pair that could not be built as asked: whatever the two sides
    /// disagreed on meanwhile goes with the refusal.
    fn refused(mut self) -> Refused {
        Refused {
            divergence: self.diverged().map(|d| {
                (
                    Flavour::plain(FlavourName::Kernel),
                    Check::Kernel,
                    format!("kernel and ours disagree while building: {d}"),
                )
            }),
        }
    }
}

impl PoolApi for KernelPair {
    const DIRECT_CAPACITY: bool = false;
    type Request = PairRequest;
    type Resizer = PairResizer;

    /// Both `dbitmap_init`, then grown by doubling (each grow allocated and
    /// committed on both sides and compared) to at least `capacity`, at
    /// most [`DBITMAP_RESET_LIMIT`] bits, as the `dbitmap_ops` flavour does;
    /// `None` when a grow on the way fails or the doubling never reaches
    /// the size.
    fn reset(capacity: usize) -> Built<Self> {
        let mut pair = KernelPair::fresh();
        pair.compare_state("after dbitmap_init");
        for _ in 0..32 {
            if pair.ours.nbits() >= capacity.min(DBITMAP_RESET_LIMIT) {
                return Ok(pair);
            }
            if !pair.grow_now() {
                return Err(pair.refused());
            }
        }
        Err(pair.refused())
    }
    /// Ours (compared with the model by the runner), and the kernel's own
    /// `dbitmap_grow_nbits` of a map claiming `nbits` bits compared with
    /// ours (a difference is recorded like any other).
    fn grow_target_at(&self, nbits: u32) -> Option<(usize, Option<bool>)> {
        let (ours, allocatable) = dbitmap_grow_target_at(nbits);
        let kernel = KernelDBitmap::grow_nbits_for(nbits);
        self.same(&format!("grow size asked at {nbits} bits"), kernel, ours);
        Some((ours, allocatable))
    }
    /// Both `dbitmap_init` with the allocation failing: both maps
    /// disabled from the start, compared.
    fn reset_failing(_: usize) -> Built<Self> {
        let pair = KernelPair {
            ours: DBitmap::init(Gfp::Fail),
            kernel: KernelDBitmap::init(Gfp::Fail),
            historical: historical_init(Gfp::Fail),
            divergence: Slot::default(),
        };
        pair.compare_state("after a failed dbitmap_init");
        Ok(pair)
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        self.same(
            "enabled before acquire",
            self.kernel.enabled(),
            self.ours.enabled(),
        );
        if !self.ours.enabled() || !self.kernel.enabled() {
            return None;
        }
        let kernel = self.kernel.acquire_next_zero_bit(offset);
        if let Some(h) = &mut self.historical {
            let historical = h.acquire_next_zero_bit(offset);
            self.beside("dbitmap_acquire_next_zero_bit", kernel, historical);
        }
        let ours = self.ours.acquire_next_zero_bit(offset);
        self.same(
            &format!("dbitmap_acquire_next_zero_bit(offset {offset})"),
            kernel,
            ours,
        );
        ours.ok()
    }
    /// The C has no 32-bit read of a found id.
    fn find(&mut self, offset: usize) -> Option<(usize, Option<u32>)> {
        let kernel = self.kernel.next_zero_bit(offset);
        if let Some(h) = &self.historical {
            self.beside("next zero bit", kernel, h.next_zero_bit(offset));
        }
        let ours = self.ours.next_zero_bit(offset);
        self.same(&format!("next zero bit from {offset}"), kernel, ours);
        Some((ours?, None))
    }
    fn release(&mut self, id: usize) {
        self.kernel.clear_bit(id);
        if let Some(h) = &mut self.historical {
            h.clear_bit(id);
        }
        self.ours.clear_bit(id);
    }
    fn request(&self, kind: Resize) -> Option<PairRequest> {
        let (what, kernel, ours) = match kind {
            Resize::Grow => (
                "dbitmap_grow_nbits",
                self.kernel.grow_nbits(),
                self.ours.grow_nbits(),
            ),
            Resize::Shrink => (
                "dbitmap_shrink_nbits",
                self.kernel.shrink_nbits(),
                self.ours.shrink_nbits(),
            ),
        };
        self.same(what, kernel, ours);
        let nbits = match kind {
            Resize::Grow => Some(ours),
            Resize::Shrink => Some(ours).filter(|&n| n != 0),
        }?;
        Some(PairRequest {
            nbits,
            historical: self.historical.is_some(),
            divergence: self.divergence.clone(),
        })
    }
    fn request_len(request: &PairRequest) -> usize {
        request.nbits
    }
    /// Both allocations; whether each came back NULL is compared at once
    /// by the runner ([`PoolApi::allocated`]) and again at the commit.
    fn realloc(request: &PairRequest, gfp: Gfp) -> Option<PairResizer> {
        let historical = request.historical;
        let divergence = &request.divergence;
        Some(KernelPair::zalloc(
            request.nbits,
            gfp,
            historical,
            divergence,
        ))
    }
    /// Ours holds memory; the kernel's must too, or neither.
    fn allocated(resizer: &PairResizer) -> bool {
        let (kernel, ours) = (resizer.kernel.is_some(), resizer.ours.is_some());
        if let Some(historical) = &resizer.historical {
            if historical.is_some() != kernel {
                record(&resizer.divergence, || {
                    format!(
                        "bitmap_zalloc({}) holds memory: kernel {kernel}, the historical header {}",
                        resizer.nbits,
                        historical.is_some()
                    )
                });
            }
        }
        if kernel != ours {
            record(&resizer.divergence, || {
                format!(
                    "bitmap_zalloc({}) holds memory: kernel {kernel}, ours {ours}",
                    resizer.nbits
                )
            });
        }
        ours
    }
    /// Ours' length, emptiness and inline switch; the kernel's map must
    /// have the same length and emptiness (the C has no inline bits).
    fn shape(resizer: &PairResizer) -> Option<Shape> {
        let ours = resizer.ours.as_ref().map(|map| Shape {
            len: map.len(),
            empty: map.is_empty(),
            inline: Some(map.is_inline()),
        });
        if let (Some(k), Some(o)) = (&resizer.kernel, &ours) {
            let (kernel, ours) = ((k.len(), k.is_empty()), (o.len, o.empty));
            if kernel != ours {
                record(&resizer.divergence, || {
                    format!(
                        "bitmap_zalloc({}) (len, is_empty): kernel {kernel:?}, ours {ours:?}",
                        resizer.nbits
                    )
                });
            }
        }
        ours
    }
    fn commit(&mut self, kind: Resize, resizer: PairResizer) {
        self.same(
            "allocation returned NULL",
            resizer.kernel.is_none(),
            resizer.ours.is_none(),
        );
        self.commit_pair(kind, resizer);
    }
    fn grow_now(&mut self) -> bool {
        self.same(
            "enabled before a grow",
            self.kernel.enabled(),
            self.ours.enabled(),
        );
        if !self.ours.enabled() {
            return false;
        }
        let nbits = self.request(Resize::Grow).map_or(0, |r| r.nbits);
        let historical = self.historical.is_some();
        let resizer = KernelPair::zalloc(nbits, Gfp::Kernel, historical, &self.divergence);
        self.commit(Resize::Grow, resizer);
        self.ours.enabled()
    }
    fn capacity(&self) -> usize {
        self.ours.nbits()
    }
    fn used(&self) -> Vec<usize> {
        self.ours.used_ids().collect()
    }
    fn used_matches(&self, expected: &crate::idset::IdSet) -> bool {
        self.ours.used_ids().eq(expected.iter())
    }
    /// Ours' `test_bit`; the kernel's `test_bit` must agree.
    fn is_used(&self, id: usize) -> bool {
        let (kernel, ours) = (self.kernel.test_bit(id), self.ours.test_bit(id));
        if kernel != ours {
            self.record(|| format!("test_bit({id}): kernel {kernel}, ours {ours}"));
        }
        ours
    }
    /// Ours' `test_bit` of each id, as a word; the kernel's map must hold
    /// the same bits ([`KernelDBitmap::bits`]: the shim's `test_bit` of
    /// each, which is not the header's code, read from its words at once).
    fn bits(&self, base: usize, n: usize) -> u64 {
        let ours = crate::bits::word(base, n, |id| self.ours.test_bit(id));
        let kernel = self.kernel.bits(base, n);
        if let Some((id, kernel, ours)) = crate::bits::first_difference(base, kernel, ours) {
            self.record(|| format!("test_bit({id}): kernel {kernel}, ours {ours}"));
        }
        ours
    }
    fn diverged(&mut self) -> Option<String> {
        self.compare_state("after the step");
        self.divergence.borrow_mut().take()
    }
    /// `binder_deferred_release`'s `dbitmap_free` on every side: ours and
    /// the shipped header free the map once; the historical header frees it
    /// a second time when a failed grow left it dangling (see the module's
    /// docs for how that free is made).
    fn deferred_release(&mut self) -> Released {
        self.ours.free();
        self.kernel.free();
        let failure = self.historical.as_mut().and_then(release_historical);
        Released {
            failure: failure.map(|what| (Check::DoubleFree, HISTORICAL, what)),
            ..Released::default()
        }
    }
}

/// The historical header's `dbitmap_free` at the process's release: what
/// went wrong, if anything. After it the map is forgotten, never freed
/// again.
fn release_historical(h: &mut KernelDBitmap) -> Option<String> {
    if !h.map_dangles() {
        // The first free of the map: it is left dangling, and forgotten.
        h.free();
        h.forget_dangling();
        return None;
    }
    let what = "the release's dbitmap_free frees the map a second time: a failed grow \
                freed it through dbitmap_free and left the pointer behind (dbitmap_free as \
                merged in June 2024, before 3ebcd3460cad)";
    let said = if !shim::under_asan() || history::asked(Finding::DoubleFree) {
        // Without ASan the shim records the second kfree; under ASan this
        // is the hunt, and ASan reports it and ends the process here.
        shim::record_bad_frees(true);
        let before = shim::bad_frees();
        h.free();
        let freed = shim::bad_frees() - before;
        shim::record_bad_frees(false);
        format!("{what}; the shim caught {freed} kfree of a freed block")
    } else {
        format!("{what}; not handed to the C: under AddressSanitizer only a hunt for it does")
    };
    h.forget_dangling();
    Some(said)
}

impl Drop for KernelPair {
    /// A dangling map is never freed again (the release reported it, or
    /// the run ended before its release).
    fn drop(&mut self) {
        if let Some(h) = &mut self.historical {
            h.forget_dangling();
        }
    }
}
