//! **Test-only.** The Linux kernel's own `drivers/android/dbitmap.h`, compiled
//! against a user-space shim of ours, behind a safe wrapper whose API
//! parallels [`idpool::DBitmap`], so the model can be compared with the code
//! it models.
//!
//! The header is GPL-2.0-only and is compiled into this crate, so the crate is
//! GPL-2.0-only too, `publish = false`, and only tests and fuzz targets may
//! depend on it. No kernel code is kept in this repository: `build.rs` reads
//! the header from `$KERNEL_TREE` or from the cache that
//! `ci/kernel-source.sh` fills from Debian's `linux-source-6.12`.
//!
//! Without the header the crate still builds: [`available`] is false,
//! [`unavailable_reason`] says why, and constructing a [`KernelDBitmap`]
//! panics with that reason. Check [`available`] first.
//!
//! All `unsafe` code of the campaign lives here (the allocator crate forbids
//! it); every block says why it is sound.
//!
//! ```
//! use kernel_dbitmap::{KernelDBitmap, Gfp};
//!
//! if !kernel_dbitmap::available() {
//!     return; // no kernel header on this machine
//! }
//! let mut dmap = KernelDBitmap::init(Gfp::Kernel);
//! assert_eq!(dmap.nbits(), 64);
//! assert_eq!(dmap.acquire_next_zero_bit(1), Ok(1));
//! ```

use core::ffi::{c_int, c_long, c_uint, c_ulong};
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

pub use idpool::{Gfp, NoSpace};

/// Bits per word of the C bitmaps (`BITS_PER_LONG`).
pub const BITS_PER_LONG: usize = c_ulong::BITS as usize;

const ENOSPC: c_int = 28;
const ENOMEM: c_int = 12;

/// Whether the kernel's header was found and compiled (`cfg(kernel_dbitmap)`).
pub fn available() -> bool {
    cfg!(kernel_dbitmap)
}

/// Why the kernel's header is not available, e.g. "no kernel header: run
/// ci/kernel-source.sh or set KERNEL_TREE (...)"; `None` when it is.
pub fn unavailable_reason() -> Option<&'static str> {
    non_empty(env!("KERNEL_DBITMAP_UNAVAILABLE"))
}

/// The path of the `dbitmap.h` that was compiled in.
pub fn header_path() -> Option<&'static str> {
    non_empty(env!("KERNEL_DBITMAP_HEADER"))
}

/// The sha256 of the compiled `dbitmap.h`, in hex.
pub fn header_sha256() -> Option<&'static str> {
    non_empty(env!("KERNEL_DBITMAP_SHA256"))
}

/// Where the header came from: `linux-source-6.12 <Debian version>`, or
/// `kernel tree <VERSION.PATCHLEVEL.SUBLEVEL>` for `KERNEL_TREE`.
pub fn source_version() -> Option<&'static str> {
    non_empty(env!("KERNEL_DBITMAP_VERSION"))
}

/// One line for a target's or a test's output: what was compiled, or why not.
pub fn provenance() -> String {
    match unavailable_reason() {
        Some(reason) => format!("kernel dbitmap unavailable: {reason}"),
        None => format!(
            "kernel dbitmap: {} ({}), sha256 {}",
            header_path().unwrap_or("?"),
            source_version().unwrap_or("version unknown"),
            header_sha256().unwrap_or("unknown"),
        ),
    }
}

fn non_empty(s: &'static str) -> Option<&'static str> {
    (!s.is_empty()).then_some(s)
}

/// Declares C functions, or stubs with the same signatures when the C code
/// was not built (they are never called: every entry point checks
/// availability first).
macro_rules! c_functions {
    (#[cfg($cfg:ident)] mod $m:ident { $( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )* }) => {
        #[cfg($cfg)]
        mod $m {
            #[allow(unused_imports)]
            use super::*;
            extern "C" {
                $( pub fn $name($($arg: $ty),*) $(-> $ret)?; )*
            }
        }
        #[cfg(not($cfg))]
        #[allow(unused_variables, dead_code, clippy::missing_safety_doc)]
        mod $m {
            #[allow(unused_imports)]
            use super::*;
            $(
                pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                    unreachable!(concat!(stringify!($name), ": the C code was not built"))
                }
            )*
        }
    };
}

/// `struct dbitmap` (checked against the C layout on every [`KernelDBitmap::init`]).
#[repr(C)]
#[derive(Debug)]
struct RawDBitmap {
    nbits: c_uint,
    map: *mut c_ulong,
}

c_functions! {
    #[cfg(kernel_dbitmap_shim)]
    mod shim_ffi {
        fn kdb_shim_fail_next_allocs(n: c_uint);
        fn kdb_shim_pending_failures() -> c_uint;
        fn kdb_shim_live_allocs() -> c_long;
        fn kdb_shim_bitmap_zalloc(nbits: c_uint, flags: c_uint) -> *mut c_ulong;
        fn kdb_shim_kfree(p: *const c_ulong);
        fn kdb_shim_find_first_zero_bit(addr: *const c_ulong, size: c_ulong) -> c_ulong;
        fn kdb_shim_find_next_zero_bit(addr: *const c_ulong, size: c_ulong, offset: c_ulong) -> c_ulong;
        fn kdb_shim_find_last_bit(addr: *const c_ulong, size: c_ulong) -> c_ulong;
        fn kdb_shim_bitmap_copy(dst: *mut c_ulong, src: *const c_ulong, nbits: c_uint);
        fn kdb_shim_set_bit(nr: c_ulong, addr: *mut c_ulong);
        fn kdb_shim_clear_bit(nr: c_ulong, addr: *mut c_ulong);
        fn kdb_shim_test_bit(nr: c_ulong, addr: *const c_ulong) -> bool;
    }
}

c_functions! {
    #[cfg(kernel_dbitmap)]
    mod ffi {
        fn kdb_nbits_min() -> c_ulong;
        fn kdb_sizeof_dbitmap() -> usize;
        fn kdb_alignof_dbitmap() -> usize;
        fn kdb_init(dmap: *mut RawDBitmap) -> c_int;
        fn kdb_enabled(dmap: *mut RawDBitmap) -> c_int;
        fn kdb_free(dmap: *mut RawDBitmap);
        fn kdb_shrink_nbits(dmap: *mut RawDBitmap) -> c_uint;
        fn kdb_shrink(dmap: *mut RawDBitmap, new: *mut c_ulong, nbits: c_uint);
        fn kdb_grow_nbits(dmap: *mut RawDBitmap) -> c_uint;
        fn kdb_grow(dmap: *mut RawDBitmap, new: *mut c_ulong, nbits: c_uint);
        fn kdb_acquire_next_zero_bit(dmap: *mut RawDBitmap, offset: c_ulong, bit: *mut c_ulong) -> c_int;
        fn kdb_clear_bit(dmap: *mut RawDBitmap, bit: c_ulong);
    }
}

/// The shim's bitmap helpers (ours, in `shim/shim.c`), over Rust-owned words,
/// for their own tests; and its allocation controls.
pub mod shim {
    use super::*;

    /// Whether the shim compiled (`cfg(kernel_dbitmap_shim)`).
    pub fn available() -> bool {
        cfg!(kernel_dbitmap_shim)
    }

    fn check() {
        assert!(
            available(),
            "the C shim was not built: {}",
            super::provenance()
        );
    }

    fn check_size(words: &[c_ulong], size: usize) {
        assert!(
            size <= words.len() * BITS_PER_LONG,
            "{size} bits do not fit in {} words",
            words.len()
        );
    }

    /// Makes the next `n` `bitmap_zalloc` calls of this thread fail.
    pub fn fail_next_allocs(n: u32) {
        check();
        // SAFETY: sets a thread-local counter; no pointer is involved.
        unsafe { shim_ffi::kdb_shim_fail_next_allocs(n) }
    }

    /// How many injected failures are still pending on this thread.
    pub fn pending_failures() -> u32 {
        check();
        // SAFETY: reads a thread-local counter.
        unsafe { shim_ffi::kdb_shim_pending_failures() }
    }

    /// Maps allocated and not yet freed by this thread (`bitmap_zalloc`
    /// minus non-NULL `kfree`).
    pub fn live_allocs() -> i64 {
        check();
        // SAFETY: reads a thread-local counter.
        let live = unsafe { shim_ffi::kdb_shim_live_allocs() };
        #[allow(clippy::useless_conversion)] // c_long is not i64 everywhere
        i64::from(live)
    }

    /// `bitmap_zalloc(nbits, GFP_KERNEL)`: `None` is the NULL of a failed
    /// allocation. [`Gfp::Fail`] fails this allocation, at any size.
    ///
    /// # Panics
    ///
    /// When `nbits` does not fit in a C `unsigned int`.
    pub fn bitmap_zalloc(nbits: usize, gfp: Gfp) -> Option<KernelBitmap> {
        check();
        let c_nbits = c_uint::try_from(nbits).expect("nbits is an unsigned int in C");
        let ptr = with_gfp(gfp, || {
            // SAFETY: allocates (or fails) and returns an owned pointer or NULL.
            unsafe { shim_ffi::kdb_shim_bitmap_zalloc(c_nbits, 0) }
        });
        NonNull::new(ptr).map(|ptr| KernelBitmap { ptr, nbits })
    }

    /// Runs `f` with one injected failure pending if `gfp` is [`Gfp::Fail`],
    /// and none pending afterwards.
    pub(crate) fn with_gfp<T>(gfp: Gfp, f: impl FnOnce() -> T) -> T {
        if gfp == Gfp::Fail {
            fail_next_allocs(1);
        }
        let out = f();
        if gfp == Gfp::Fail {
            fail_next_allocs(0);
        }
        out
    }

    /// `find_first_zero_bit(words, size)`: the smallest clear bit below
    /// `size`, or `size`.
    pub fn find_first_zero_bit(words: &[c_ulong], size: usize) -> usize {
        check();
        check_size(words, size);
        // SAFETY: `words` holds at least `size` bits (checked), and the
        // function reads only the words holding bits below `size`.
        unsafe { shim_ffi::kdb_shim_find_first_zero_bit(words.as_ptr(), size as c_ulong) as usize }
    }

    /// `find_next_zero_bit(words, size, offset)`: the smallest clear bit in
    /// `[offset, size)`, or `size`.
    pub fn find_next_zero_bit(words: &[c_ulong], size: usize, offset: usize) -> usize {
        check();
        check_size(words, size);
        // SAFETY: as for `find_first_zero_bit`; an offset at or past `size`
        // returns `size` without reading.
        unsafe {
            shim_ffi::kdb_shim_find_next_zero_bit(
                words.as_ptr(),
                size as c_ulong,
                offset as c_ulong,
            ) as usize
        }
    }

    /// `find_last_bit(words, size)`: the highest set bit below `size`, or
    /// `size` when none is.
    pub fn find_last_bit(words: &[c_ulong], size: usize) -> usize {
        check();
        check_size(words, size);
        // SAFETY: `words` holds at least `size` bits (checked), and only the
        // words holding bits below `size` are read.
        unsafe { shim_ffi::kdb_shim_find_last_bit(words.as_ptr(), size as c_ulong) as usize }
    }

    /// `bitmap_copy(dst, src, nbits)`: copies the whole words holding the
    /// first `nbits` bits.
    ///
    /// # Panics
    ///
    /// When either slice is shorter than those words, or `nbits` does not
    /// fit in an `unsigned int`.
    pub fn bitmap_copy(dst: &mut [c_ulong], src: &[c_ulong], nbits: usize) {
        check();
        let c_nbits = c_uint::try_from(nbits).expect("nbits is an unsigned int in C");
        let words = nbits.div_ceil(BITS_PER_LONG);
        assert!(
            dst.len() >= words && src.len() >= words,
            "bitmap_copy out of bounds"
        );
        // SAFETY: both slices hold `words` words (checked), and two slices
        // borrowed `&mut` and `&` cannot overlap.
        unsafe { shim_ffi::kdb_shim_bitmap_copy(dst.as_mut_ptr(), src.as_ptr(), c_nbits) }
    }

    fn check_bit(words: &[c_ulong], nr: usize) {
        assert!(nr < words.len() * BITS_PER_LONG, "bit {nr} out of bounds");
    }

    /// `set_bit(nr, words)`.
    pub fn set_bit(words: &mut [c_ulong], nr: usize) {
        check();
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words` (checked).
        unsafe { shim_ffi::kdb_shim_set_bit(nr as c_ulong, words.as_mut_ptr()) }
    }

    /// `clear_bit(nr, words)`.
    pub fn clear_bit(words: &mut [c_ulong], nr: usize) {
        check();
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words` (checked).
        unsafe { shim_ffi::kdb_shim_clear_bit(nr as c_ulong, words.as_mut_ptr()) }
    }

    /// `test_bit(nr, words)`.
    pub fn test_bit(words: &[c_ulong], nr: usize) -> bool {
        check();
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words` (checked).
        unsafe { shim_ffi::kdb_shim_test_bit(nr as c_ulong, words.as_ptr()) }
    }
}

/// A map from `bitmap_zalloc`, owned until it is handed to
/// [`KernelDBitmap::grow`] or [`KernelDBitmap::shrink`] (or freed on drop).
#[derive(Debug)]
pub struct KernelBitmap {
    ptr: NonNull<c_ulong>,
    nbits: usize,
}

impl KernelBitmap {
    /// The number of bits it was allocated for.
    pub fn len(&self) -> usize {
        self.nbits
    }

    /// Whether it holds no bit.
    pub fn is_empty(&self) -> bool {
        self.nbits == 0
    }

    /// Its words (`BITS_TO_LONGS(len)` of them).
    pub fn words(&self) -> &[c_ulong] {
        // SAFETY: `bitmap_zalloc` returned at least `BITS_TO_LONGS(nbits)`
        // zeroed (so initialised) words that this value owns.
        unsafe {
            core::slice::from_raw_parts(self.ptr.as_ptr(), self.nbits.div_ceil(BITS_PER_LONG))
        }
    }

    fn into_raw(self) -> *mut c_ulong {
        ManuallyDrop::new(self).ptr.as_ptr()
    }
}

impl Drop for KernelBitmap {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `bitmap_zalloc` and is owned by us
        // (ownership leaves only through `into_raw`, which skips this drop).
        unsafe { shim_ffi::kdb_shim_kfree(self.ptr.as_ptr()) }
    }
}

/// The kernel's `struct dbitmap`, driven through the header's own functions.
///
/// The methods mirror [`idpool::DBitmap`] (names, argument order, results),
/// so a differential test calls both the same way. Where the C code would
/// touch memory it does not own, the wrapper does not call it:
///
/// - [`clear_bit`](Self::clear_bit) of a bit at or above `nbits`, or on a
///   disabled map, does nothing (the model ignores it too; the C driver
///   guards it with `dbitmap_enabled`).
/// - [`grow`](Self::grow) and [`shrink`](Self::shrink) panic when handed a
///   map shorter than `nbits` (the C code would overrun it).
///
/// [`acquire_next_zero_bit`](Self::acquire_next_zero_bit) on a disabled map
/// calls the C code, which returns `-ENOSPC` (`find_next_zero_bit` of 0 bits
/// reads nothing); the model panics there instead. The driver never does it.
///
/// Not `Send`: the shim counts allocations per thread.
#[derive(Debug)]
pub struct KernelDBitmap {
    raw: RawDBitmap,
}

impl KernelDBitmap {
    fn check() {
        assert!(available(), "{}", provenance());
    }

    /// `dbitmap_init`: an enabled map of `NBITS_MIN` (64) bits, or a disabled
    /// one when the allocation fails ([`Gfp::Fail`] makes it fail).
    ///
    /// # Panics
    ///
    /// When the kernel header is not [`available`].
    pub fn init(gfp: Gfp) -> Self {
        Self::check();
        // SAFETY: the layout getters take no arguments.
        let layout = unsafe { (ffi::kdb_sizeof_dbitmap(), ffi::kdb_alignof_dbitmap()) };
        assert_eq!(
            layout,
            (size_of::<RawDBitmap>(), align_of::<RawDBitmap>()),
            "struct dbitmap layout"
        );
        let mut dmap = KernelDBitmap::disabled();
        let ret = shim::with_gfp(gfp, || {
            // SAFETY: `raw` is a valid, disabled (NULL map) struct dbitmap;
            // dbitmap_init overwrites both fields without reading them.
            unsafe { ffi::kdb_init(&mut dmap.raw) }
        });
        assert_eq!(
            ret == -ENOMEM,
            !dmap.enabled(),
            "dbitmap_init returned {ret}"
        );
        dmap
    }

    /// A disabled map (`nbits == 0`, `map == NULL`).
    pub fn disabled() -> Self {
        Self::check();
        KernelDBitmap {
            raw: RawDBitmap {
                nbits: 0,
                map: ptr::null_mut(),
            },
        }
    }

    /// `NBITS_MIN` as the header defines it.
    pub fn nbits_min() -> usize {
        Self::check();
        // SAFETY: takes no arguments.
        unsafe { ffi::kdb_nbits_min() as usize }
    }

    /// `bitmap_zalloc(nbits, GFP_KERNEL)`, the driver's allocation between
    /// the two critical sections: `None` is a failed allocation (NULL).
    /// [`Gfp::Fail`] makes it fail at any size.
    pub fn zalloc(nbits: usize, gfp: Gfp) -> Option<KernelBitmap> {
        Self::check();
        shim::bitmap_zalloc(nbits, gfp)
    }

    /// `dbitmap_enabled`.
    pub fn enabled(&self) -> bool {
        // SAFETY: dbitmap_enabled only reads `nbits`; the pointer is valid
        // for the call. (It takes a non-const pointer, but does not write.)
        unsafe { ffi::kdb_enabled(ptr::from_ref(&self.raw).cast_mut()) != 0 }
    }

    /// The number of bits; 0 when disabled.
    pub fn nbits(&self) -> usize {
        self.raw.nbits as usize
    }

    /// The map's words (`BITS_TO_LONGS(nbits)`, none when disabled).
    pub fn words(&self) -> &[c_ulong] {
        if self.raw.map.is_null() {
            return &[];
        }
        // SAFETY: invariant of struct dbitmap as the header maintains it: a
        // non-NULL map holds at least BITS_TO_LONGS(nbits) initialised words
        // (zeroed by bitmap_zalloc, then written through the header), and
        // this value owns it while `self` is borrowed.
        unsafe { core::slice::from_raw_parts(self.raw.map, self.nbits().div_ceil(BITS_PER_LONG)) }
    }

    /// Whether `bit` is set; `false` when disabled or out of range.
    pub fn test_bit(&self, bit: usize) -> bool {
        bit < self.nbits() && shim::test_bit(self.words(), bit)
    }

    /// The set bits, in increasing order (none when disabled).
    pub fn used_ids(&self) -> Vec<usize> {
        let words = self.words();
        (0..self.nbits())
            .filter(|&b| (words[b / BITS_PER_LONG] >> (b % BITS_PER_LONG)) & 1 == 1)
            .collect()
    }

    /// The smallest zero bit at or above `offset` (the shim's
    /// `find_next_zero_bit`), without setting it; `None` when disabled.
    pub fn next_zero_bit(&self, offset: usize) -> Option<usize> {
        let n = shim::find_next_zero_bit(self.words(), self.nbits(), offset);
        (n < self.nbits()).then_some(n)
    }

    /// `dbitmap_free`: disables the map for good.
    pub fn free(&mut self) {
        // SAFETY: `raw` is a valid struct dbitmap whose map is NULL or owned
        // by it; dbitmap_free kfrees it and leaves it NULL with nbits 0.
        unsafe { ffi::kdb_free(&mut self.raw) }
    }

    /// `dbitmap_grow_nbits`: `nbits << 1` in `unsigned int`.
    pub fn grow_nbits(&self) -> usize {
        // SAFETY: only reads `nbits`.
        unsafe { ffi::kdb_grow_nbits(ptr::from_ref(&self.raw).cast_mut()) as usize }
    }

    /// `dbitmap_grow_nbits` of a map claiming `nbits` bits, without a map:
    /// the kernel's own arithmetic at sizes no map can have.
    ///
    /// # Panics
    ///
    /// When the kernel header is not [`available`].
    pub fn grow_nbits_for(nbits: u32) -> usize {
        Self::check();
        let mut raw = RawDBitmap {
            nbits,
            map: ptr::null_mut(),
        };
        // SAFETY: dbitmap_grow_nbits only reads `nbits`; the NULL map is
        // never dereferenced, and `raw` is dropped without dbitmap_free.
        unsafe { ffi::kdb_grow_nbits(&mut raw) as usize }
    }

    /// `dbitmap_shrink_nbits`: the size to shrink to, or 0.
    pub fn shrink_nbits(&self) -> usize {
        // SAFETY: reads `nbits` and, when it is above NBITS_MIN (so the map
        // is enabled and non-NULL), the map's words below `nbits`.
        unsafe { ffi::kdb_shrink_nbits(ptr::from_ref(&self.raw).cast_mut()) as usize }
    }

    /// `dbitmap_grow(dmap, new, nbits)`: `new` is the driver's
    /// `bitmap_zalloc(nbits)` result, `None` for NULL. The header takes
    /// ownership of `new` (installs or frees it).
    ///
    /// # Panics
    ///
    /// When `new` holds fewer than `nbits` bits, or `nbits` does not fit in
    /// an `unsigned int`.
    pub fn grow(&mut self, new: Option<KernelBitmap>, nbits: usize) {
        let (new, nbits) = Self::handover(new, nbits);
        // SAFETY: `raw` is valid; `new` is NULL or an owned bitmap_zalloc map
        // of at least `nbits` bits, whose ownership passes to the header
        // (kfreed, or installed as the map of `nbits` bits after copying the
        // old `nbits` bits into it, which are fewer).
        unsafe { ffi::kdb_grow(&mut self.raw, new, nbits) }
    }

    /// `dbitmap_shrink(dmap, new, nbits)`, with `new` as for [`grow`](Self::grow).
    ///
    /// # Panics
    ///
    /// As [`grow`](Self::grow).
    pub fn shrink(&mut self, new: Option<KernelBitmap>, nbits: usize) {
        let (new, nbits) = Self::handover(new, nbits);
        // SAFETY: as for `grow`; a shrink copies `nbits` bits, which the old
        // map holds (the header commits only when nbits == shrink_nbits(),
        // at most half the old size) and `new` holds (checked).
        unsafe { ffi::kdb_shrink(&mut self.raw, new, nbits) }
    }

    fn handover(new: Option<KernelBitmap>, nbits: usize) -> (*mut c_ulong, c_uint) {
        let c_nbits = c_uint::try_from(nbits).expect("nbits is an unsigned int in C");
        let new = new.map_or(ptr::null_mut(), |m| {
            assert!(
                m.len() >= nbits,
                "a map of {} bits handed over as {nbits} bits",
                m.len()
            );
            m.into_raw()
        });
        (new, c_nbits)
    }

    /// `dbitmap_acquire_next_zero_bit`: sets and returns the smallest zero
    /// bit at or above `offset`, or `-ENOSPC` ([`NoSpace`]).
    pub fn acquire_next_zero_bit(&mut self, offset: usize) -> Result<usize, NoSpace> {
        let mut bit: c_ulong = 0;
        // SAFETY: `raw` is valid; find_next_zero_bit reads only words below
        // `nbits` (none when disabled) and set_bit writes a bit it returned,
        // which is below `nbits`; `bit` is a valid out-pointer.
        let ret =
            unsafe { ffi::kdb_acquire_next_zero_bit(&mut self.raw, offset as c_ulong, &mut bit) };
        match ret {
            0 => Ok(bit as usize),
            r if r == -ENOSPC => Err(NoSpace),
            r => unreachable!("dbitmap_acquire_next_zero_bit returned {r}"),
        }
    }

    /// `dbitmap_clear_bit`; a bit at or above `nbits` (or any bit of a
    /// disabled map) is ignored instead of written out of bounds.
    pub fn clear_bit(&mut self, bit: usize) {
        if bit >= self.nbits() {
            return;
        }
        // SAFETY: the map is enabled (nbits > bit >= 0) so non-NULL, and
        // `bit` is inside it.
        unsafe { ffi::kdb_clear_bit(&mut self.raw, bit as c_ulong) }
    }

    /// Sets `bit` with the shim's `set_bit` (the header has no
    /// `dbitmap_set_bit`; this sets up states). Ignored when disabled or out
    /// of range, as in the model.
    pub fn set_bit(&mut self, bit: usize) {
        if bit >= self.nbits() {
            return;
        }
        let words = self.nbits().div_ceil(BITS_PER_LONG);
        // SAFETY: as in `words`, with `&mut self` for exclusive access.
        let words = unsafe { core::slice::from_raw_parts_mut(self.raw.map, words) };
        shim::set_bit(words, bit);
    }
}

impl Drop for KernelDBitmap {
    fn drop(&mut self) {
        self.free();
    }
}
