//! **Test-only.** The Linux kernel's own `drivers/android/dbitmap.h`, compiled
//! against a user-space shim of ours, behind a safe wrapper whose API
//! parallels [`idpool::DBitmap`], so the model can be compared with the code
//! it models.
//!
//! The header is GPL-2.0-only and is compiled into this crate, so the crate is
//! GPL-2.0-only too, `publish = false`, and only tests and fuzz targets may
//! depend on it. No kernel code is kept in this repository: `build.rs` reads
//! the header from `$KERNEL_TREE` or from the cache that
//! `ci/kernel-source.sh` fills from Debian's `linux-source-6.12`, and
//! mainline's from `linux-source-7.3`'s; a third, historical, variant is a
//! patched copy in `OUT_DIR` (see [`Header`]).
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

/// Whether bit `bit` of the C bitmap `words` is set, read in Rust (the
/// shim's `test_bit` reads it in C); `false` past the last word.
pub fn bit_of(words: &[c_ulong], bit: usize) -> bool {
    words
        .get(bit / BITS_PER_LONG)
        .is_some_and(|w| (w >> (bit % BITS_PER_LONG)) & 1 == 1)
}

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

/// Declares C functions named `$prefix` + `$name`, or stubs with the same
/// signatures when the C code was not built (they are never called: every
/// entry point checks availability first).
macro_rules! c_functions {
    (#[cfg($cfg:ident)] #[prefix = $prefix:literal] mod $m:ident { $( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )* }) => {
        #[cfg($cfg)]
        mod $m {
            #[allow(unused_imports)]
            use super::*;
            extern "C" {
                $(
                    #[link_name = concat!($prefix, stringify!($name))]
                    pub fn $name($($arg: $ty),*) $(-> $ret)?;
                )*
            }
        }
        #[cfg(not($cfg))]
        #[allow(unused_variables, dead_code, clippy::missing_safety_doc)]
        mod $m {
            #[allow(unused_imports)]
            use super::*;
            $(
                pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
                    unreachable!(concat!($prefix, stringify!($name), ": the C code was not built"))
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
    #[prefix = "kdb_shim_"]
    mod shim_ffi {
        fn fail_next_allocs(n: c_uint);
        fn pending_failures() -> c_uint;
        fn live_allocs() -> c_long;
        fn block_words(p: *const c_ulong) -> c_long;
        fn record_bad_frees(record: bool);
        fn bad_frees() -> c_long;
        fn pin_freed(p: *const c_ulong) -> bool;
        fn unpin_freed(p: *const c_ulong) -> bool;
        fn under_asan() -> bool;
        fn bitmap_zalloc(nbits: c_uint, flags: c_uint) -> *mut c_ulong;
        fn kfree(p: *const c_ulong);
        fn find_first_zero_bit(addr: *const c_ulong, size: c_ulong) -> c_ulong;
        fn find_next_zero_bit(addr: *const c_ulong, size: c_ulong, offset: c_ulong) -> c_ulong;
        fn find_last_bit(addr: *const c_ulong, size: c_ulong) -> c_ulong;
        fn bitmap_copy(dst: *mut c_ulong, src: *const c_ulong, nbits: c_uint);
        fn set_bit(nr: c_ulong, addr: *mut c_ulong);
        fn clear_bit(nr: c_ulong, addr: *mut c_ulong);
        fn test_bit(nr: c_ulong, addr: *const c_ulong) -> bool;
    }
}

/// Declares one header's symbol set and its [`Ops`] table.
macro_rules! header_functions {
    ($cfg:ident, $prefix:literal, $m:ident, $ops:ident) => {
        c_functions! {
            #[cfg($cfg)]
            #[prefix = $prefix]
            mod $m {
                fn nbits_min() -> c_ulong;
                fn sizeof_dbitmap() -> usize;
                fn alignof_dbitmap() -> usize;
                fn init(dmap: *mut RawDBitmap) -> c_int;
                fn enabled(dmap: *mut RawDBitmap) -> c_int;
                fn free(dmap: *mut RawDBitmap);
                fn shrink_nbits(dmap: *mut RawDBitmap) -> c_uint;
                fn shrink(dmap: *mut RawDBitmap, new: *mut c_ulong, nbits: c_uint);
                fn grow_nbits(dmap: *mut RawDBitmap) -> c_uint;
                fn grow(dmap: *mut RawDBitmap, new: *mut c_ulong, nbits: c_uint);
                fn acquire_next_zero_bit(dmap: *mut RawDBitmap, offset: c_ulong, bit: *mut c_ulong) -> c_int;
                fn clear_bit(dmap: *mut RawDBitmap, bit: c_ulong);
            }
        }
        static $ops: Ops = Ops {
            nbits_min: $m::nbits_min,
            sizeof_dbitmap: $m::sizeof_dbitmap,
            alignof_dbitmap: $m::alignof_dbitmap,
            init: $m::init,
            enabled: $m::enabled,
            free: $m::free,
            shrink_nbits: $m::shrink_nbits,
            shrink: $m::shrink,
            grow_nbits: $m::grow_nbits,
            grow: $m::grow,
            acquire_next_zero_bit: $m::acquire_next_zero_bit,
            clear_bit: $m::clear_bit,
        };
    };
}

/// One header's functions (see `shim/dbitmap_wrap.c`).
struct Ops {
    nbits_min: unsafe extern "C" fn() -> c_ulong,
    sizeof_dbitmap: unsafe extern "C" fn() -> usize,
    alignof_dbitmap: unsafe extern "C" fn() -> usize,
    init: unsafe extern "C" fn(*mut RawDBitmap) -> c_int,
    enabled: unsafe extern "C" fn(*mut RawDBitmap) -> c_int,
    free: unsafe extern "C" fn(*mut RawDBitmap),
    shrink_nbits: unsafe extern "C" fn(*mut RawDBitmap) -> c_uint,
    shrink: unsafe extern "C" fn(*mut RawDBitmap, *mut c_ulong, c_uint),
    grow_nbits: unsafe extern "C" fn(*mut RawDBitmap) -> c_uint,
    grow: unsafe extern "C" fn(*mut RawDBitmap, *mut c_ulong, c_uint),
    acquire_next_zero_bit: unsafe extern "C" fn(*mut RawDBitmap, c_ulong, *mut c_ulong) -> c_int,
    clear_bit: unsafe extern "C" fn(*mut RawDBitmap, c_ulong),
}

header_functions!(kernel_dbitmap, "kdb_", ffi, STABLE_OPS);
header_functions!(kernel_dbitmap_m73, "kdb_m73_", ffi_m73, MAINLINE_OPS);
header_functions!(kernel_dbitmap_hist, "kdb_hist_", ffi_hist, HISTORICAL_OPS);

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
        unsafe { shim_ffi::fail_next_allocs(n) }
    }

    /// How many injected failures are still pending on this thread.
    pub fn pending_failures() -> u32 {
        check();
        // SAFETY: reads a thread-local counter.
        unsafe { shim_ffi::pending_failures() }
    }

    /// Makes this thread's double and invalid `kfree`s counted and skipped
    /// (`true`) instead of aborting the process with a message (`false`,
    /// the default). Under AddressSanitizer neither happens: the shim hands
    /// them to `free()` and ASan reports them.
    pub fn record_bad_frees(record: bool) {
        check();
        // SAFETY: sets a thread-local flag.
        unsafe { shim_ffi::record_bad_frees(record) }
    }

    /// Whether the shim was compiled under AddressSanitizer: its `kfree`
    /// then hands every pointer to `free()`, a second free of a block
    /// included, for ASan to report (and end the process).
    pub fn under_asan() -> bool {
        check();
        // SAFETY: returns a compile-time constant.
        unsafe { shim_ffi::under_asan() }
    }

    /// How many double or invalid `kfree`s this thread made.
    pub fn bad_frees() -> i64 {
        check();
        // SAFETY: reads a thread-local counter.
        let n = unsafe { shim_ffi::bad_frees() };
        #[allow(clippy::useless_conversion)] // c_long is not i64 everywhere
        i64::from(n)
    }

    /// Maps allocated and not yet freed by this thread (`bitmap_zalloc`
    /// minus non-NULL `kfree`).
    pub fn live_allocs() -> i64 {
        check();
        // SAFETY: reads a thread-local counter.
        let live = unsafe { shim_ffi::live_allocs() };
        #[allow(clippy::useless_conversion)] // c_long is not i64 everywhere
        i64::from(live)
    }

    /// The length in words of `p`, a block of [`bitmap_zalloc`] not yet
    /// freed by this thread; `None` when `p` is not one (freed, foreign,
    /// NULL).
    #[allow(clippy::not_unsafe_ptr_arg_deref)] // `p` is compared, never read
    pub fn block_words(p: *const c_ulong) -> Option<usize> {
        check();
        // SAFETY: compares `p` with the thread's live blocks; it is never
        // dereferenced.
        let words = unsafe { shim_ffi::block_words(p) };
        usize::try_from(words).ok()
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
            unsafe { shim_ffi::bitmap_zalloc(c_nbits, 0) }
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
        unsafe { shim_ffi::find_first_zero_bit(words.as_ptr(), size as c_ulong) as usize }
    }

    /// `find_next_zero_bit(words, size, offset)`: the smallest clear bit in
    /// `[offset, size)`, or `size`.
    pub fn find_next_zero_bit(words: &[c_ulong], size: usize, offset: usize) -> usize {
        check();
        check_size(words, size);
        // SAFETY: as for `find_first_zero_bit`; an offset at or past `size`
        // returns `size` without reading.
        unsafe {
            shim_ffi::find_next_zero_bit(words.as_ptr(), size as c_ulong, offset as c_ulong)
                as usize
        }
    }

    /// `find_last_bit(words, size)`: the highest set bit below `size`, or
    /// `size` when none is.
    pub fn find_last_bit(words: &[c_ulong], size: usize) -> usize {
        check();
        check_size(words, size);
        // SAFETY: `words` holds at least `size` bits (checked), and only the
        // words holding bits below `size` are read.
        unsafe { shim_ffi::find_last_bit(words.as_ptr(), size as c_ulong) as usize }
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
        unsafe { shim_ffi::bitmap_copy(dst.as_mut_ptr(), src.as_ptr(), c_nbits) }
    }

    fn check_bit(words: &[c_ulong], nr: usize) {
        assert!(nr < words.len() * BITS_PER_LONG, "bit {nr} out of bounds");
    }

    /// `set_bit(nr, words)`.
    pub fn set_bit(words: &mut [c_ulong], nr: usize) {
        check();
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words` (checked).
        unsafe { shim_ffi::set_bit(nr as c_ulong, words.as_mut_ptr()) }
    }

    /// `clear_bit(nr, words)`.
    pub fn clear_bit(words: &mut [c_ulong], nr: usize) {
        check();
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words` (checked).
        unsafe { shim_ffi::clear_bit(nr as c_ulong, words.as_mut_ptr()) }
    }

    /// `test_bit(nr, words)`.
    pub fn test_bit(words: &[c_ulong], nr: usize) -> bool {
        check();
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words` (checked).
        unsafe { shim_ffi::test_bit(nr as c_ulong, words.as_ptr()) }
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
        unsafe { shim_ffi::kfree(self.ptr.as_ptr()) }
    }
}

/// Which `dbitmap.h` a [`KernelDBitmap`] runs: each is compiled with its
/// own symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Header {
    /// The primary header: `$KERNEL_TREE`'s, else Debian's
    /// `linux-source-6.12` (what [`KernelDBitmap::init`] runs).
    Stable,
    /// Mainline's, from Debian's `linux-source-7.3` (identical to 6.12's
    /// today; `tests/sources.rs` holds both sha256s).
    Mainline,
    /// **Historical, for tests only**: the primary header with upstream's
    /// fix "binder: fix double-free in dbitmap" (commit 3ebcd3460cad,
    /// September 2025) reversed by `patches/dbitmap-free-dangling-2024.patch`,
    /// so that `dbitmap_free` frees the map and leaves the pointer dangling,
    /// as merged in June 2024. A failed grow then a free (the process's
    /// release) frees the map twice: see [`KernelDBitmap`]'s docs for how
    /// the shim catches it.
    Historical2024,
}

impl Header {
    /// Every header, in the order above.
    pub const ALL: [Header; 3] = [Header::Stable, Header::Mainline, Header::Historical2024];

    fn ops(self) -> &'static Ops {
        match self {
            Header::Stable => &STABLE_OPS,
            Header::Mainline => &MAINLINE_OPS,
            Header::Historical2024 => &HISTORICAL_OPS,
        }
    }

    /// Whether this header was found and compiled.
    pub fn available(self) -> bool {
        match self {
            Header::Stable => cfg!(kernel_dbitmap),
            Header::Mainline => cfg!(kernel_dbitmap_m73),
            Header::Historical2024 => cfg!(kernel_dbitmap_hist),
        }
    }

    /// Why this header is not available; `None` when it is.
    pub fn unavailable_reason(self) -> Option<&'static str> {
        match self {
            Header::Stable => unavailable_reason(),
            Header::Mainline => non_empty(env!("KERNEL_DBITMAP_M73_UNAVAILABLE")),
            Header::Historical2024 => non_empty(env!("KERNEL_DBITMAP_HIST_UNAVAILABLE")),
        }
    }

    /// The path of the extracted header it was compiled from (for the
    /// historical variant, the header its patched copy was made from).
    pub fn path(self) -> Option<&'static str> {
        match self {
            Header::Stable | Header::Historical2024 => header_path(),
            Header::Mainline => non_empty(env!("KERNEL_DBITMAP_M73_HEADER")),
        }
    }

    /// The sha256 of that extracted header.
    pub fn sha256(self) -> Option<&'static str> {
        match self {
            Header::Stable | Header::Historical2024 => header_sha256(),
            Header::Mainline => non_empty(env!("KERNEL_DBITMAP_M73_SHA256")),
        }
    }

    /// The package (or kernel tree) it came from.
    pub fn source_version(self) -> Option<&'static str> {
        match self {
            Header::Stable | Header::Historical2024 => source_version(),
            Header::Mainline => non_empty(env!("KERNEL_DBITMAP_M73_VERSION")),
        }
    }

    /// One line: what was compiled, or why not.
    pub fn provenance(self) -> String {
        match (self.unavailable_reason(), self) {
            (Some(reason), _) => format!("kernel dbitmap {self:?} unavailable: {reason}"),
            (None, Header::Historical2024) => format!(
                "kernel dbitmap Historical2024: {} patched with {} ({}), sha256 {} before the patch",
                self.path().unwrap_or("?"),
                env!("KERNEL_DBITMAP_HIST_PATCH"),
                self.source_version().unwrap_or("version unknown"),
                self.sha256().unwrap_or("unknown"),
            ),
            (None, _) => format!(
                "kernel dbitmap {self:?}: {} ({}), sha256 {}",
                self.path().unwrap_or("?"),
                self.source_version().unwrap_or("version unknown"),
                self.sha256().unwrap_or("unknown"),
            ),
        }
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
/// # The historical header's double free
///
/// With [`Header::Historical2024`], a failed grow leaves `map` dangling
/// (`nbits == 0`, `map != NULL`) and the next [`free`](Self::free) (or the
/// drop, as the process's release) frees it again. The wrapper lets the C
/// code do it, and the shim catches it before memory is touched:
///
/// - the wrapper pins the dangling map in the shim's quarantine as soon as
///   a call leaves it (so no later allocation can reuse its address);
/// - the shim's `kfree` then finds it freed, and aborts the process with
///   "double free" on stderr, or counts it without freeing when
///   [`shim::record_bad_frees`] asked for that;
/// - under AddressSanitizer the shim passes the free to `free()` instead
///   and ASan reports the double free.
///
/// # Examples
///
/// ```
/// use kernel_dbitmap::{shim, Gfp, Header, KernelDBitmap};
///
/// if !Header::Historical2024.available() {
///     return; // no kernel header on this machine
/// }
/// shim::record_bad_frees(true);
/// let before = shim::bad_frees();
/// let mut dmap = KernelDBitmap::init_from(Gfp::Kernel, Header::Historical2024);
/// dmap.grow(None, 128); // the grow's allocation failed: dbitmap_free
/// assert!(!dmap.enabled());
/// drop(dmap); // the process's release: dbitmap_free again
/// assert_eq!(shim::bad_frees(), before + 1);
/// shim::record_bad_frees(false);
/// ```
///
/// Not `Send`: the shim tracks allocations per thread.
#[derive(Debug)]
pub struct KernelDBitmap {
    raw: RawDBitmap,
    header: Header,
}

impl KernelDBitmap {
    fn check(header: Header) {
        assert!(header.available(), "{}", header.provenance());
    }

    fn ops(&self) -> &'static Ops {
        self.header.ops()
    }

    /// After a call: a map the header freed but left behind (only the
    /// historical header does) is pinned in the shim's quarantine.
    fn pin_if_dangling(&self) {
        if self.raw.nbits == 0 && !self.raw.map.is_null() {
            // SAFETY: only compares the pointer with the shim's records.
            unsafe { shim_ffi::pin_freed(self.raw.map) };
        }
    }

    /// `dbitmap_init` of the primary header ([`Header::Stable`]): an enabled
    /// map of `NBITS_MIN` (64) bits, or a disabled one when the allocation
    /// fails ([`Gfp::Fail`] makes it fail).
    ///
    /// # Panics
    ///
    /// When the kernel header is not [`available`].
    pub fn init(gfp: Gfp) -> Self {
        Self::init_from(gfp, Header::Stable)
    }

    /// `dbitmap_init` of `header`.
    ///
    /// # Panics
    ///
    /// When `header` is not [available](Header::available).
    pub fn init_from(gfp: Gfp, header: Header) -> Self {
        Self::check(header);
        let ops = header.ops();
        // SAFETY: the layout getters take no arguments.
        let layout = unsafe { ((ops.sizeof_dbitmap)(), (ops.alignof_dbitmap)()) };
        assert_eq!(
            layout,
            (size_of::<RawDBitmap>(), align_of::<RawDBitmap>()),
            "struct dbitmap layout"
        );
        let mut dmap = KernelDBitmap::disabled_from(header);
        let ret = shim::with_gfp(gfp, || {
            // SAFETY: `raw` is a valid, disabled (NULL map) struct dbitmap;
            // dbitmap_init overwrites both fields without reading them.
            unsafe { (ops.init)(&mut dmap.raw) }
        });
        assert_eq!(
            ret == -ENOMEM,
            !dmap.enabled(),
            "dbitmap_init returned {ret}"
        );
        dmap
    }

    /// A disabled map (`nbits == 0`, `map == NULL`) of the primary header.
    ///
    /// # Panics
    ///
    /// When the kernel header is not [`available`].
    pub fn disabled() -> Self {
        Self::disabled_from(Header::Stable)
    }

    /// A disabled map of `header`.
    ///
    /// # Panics
    ///
    /// When `header` is not [available](Header::available).
    pub fn disabled_from(header: Header) -> Self {
        Self::check(header);
        KernelDBitmap {
            raw: RawDBitmap {
                nbits: 0,
                map: ptr::null_mut(),
            },
            header,
        }
    }

    /// The header this map runs.
    pub fn header(&self) -> Header {
        self.header
    }

    /// `NBITS_MIN` as the primary header defines it.
    ///
    /// # Panics
    ///
    /// When the kernel header is not [`available`].
    pub fn nbits_min() -> usize {
        Self::check(Header::Stable);
        // SAFETY: takes no arguments.
        unsafe { (STABLE_OPS.nbits_min)() as usize }
    }

    /// `bitmap_zalloc(nbits, GFP_KERNEL)`, the driver's allocation between
    /// the two critical sections: `None` is a failed allocation (NULL).
    /// [`Gfp::Fail`] makes it fail at any size.
    ///
    /// # Panics
    ///
    /// When the shim is not [available](shim::available).
    pub fn zalloc(nbits: usize, gfp: Gfp) -> Option<KernelBitmap> {
        shim::bitmap_zalloc(nbits, gfp)
    }

    /// `dbitmap_enabled`.
    pub fn enabled(&self) -> bool {
        // SAFETY: dbitmap_enabled only reads `nbits`; the pointer is valid
        // for the call. (It takes a non-const pointer, but does not write.)
        unsafe { (self.ops().enabled)(ptr::from_ref(&self.raw).cast_mut()) != 0 }
    }

    /// The number of bits; 0 when disabled.
    pub fn nbits(&self) -> usize {
        self.raw.nbits as usize
    }

    /// The map's words (`BITS_TO_LONGS(nbits)`, none when disabled, even
    /// if the historical header left a dangling pointer behind).
    ///
    /// # Panics
    ///
    /// When the header broke `struct dbitmap`'s invariant: an enabled map
    /// that is not a live block of `bitmap_zalloc`, or one shorter than
    /// `BITS_TO_LONGS(nbits)` words ([`Self::map_len`]).
    pub fn words(&self) -> &[c_ulong] {
        if self.raw.map.is_null() || self.raw.nbits == 0 {
            return &[];
        }
        let len = self.map_len();
        // SAFETY: `map_len` checked that the map is a live block of
        // bitmap_zalloc of at least `len` words (zeroed, so initialised,
        // then written through the header), and this value owns it while
        // `self` is borrowed.
        unsafe { core::slice::from_raw_parts(self.raw.map, len) }
    }

    /// `BITS_TO_LONGS(nbits)`: the words an enabled map holds by `struct
    /// dbitmap`'s invariant, which every read of the map from Rust relies
    /// on. Checked against the block the shim's `bitmap_zalloc` returned,
    /// so that a header that sets `nbits` past its map fails here with
    /// both lengths, in every build, instead of reading out of bounds (only
    /// the C side runs under AddressSanitizer in a libFuzzer build:
    /// `ci/lib.sh`, `fuzz_flags_for`); so does one that keeps a freed map,
    /// while the freed address has not been allocated again (the shim holds
    /// its last 64 freed blocks back from reuse, ASan its own quarantine).
    ///
    /// # Panics
    ///
    /// When the map is not a live block, or is shorter than that.
    fn map_len(&self) -> usize {
        let needed = self.nbits().div_ceil(BITS_PER_LONG);
        let held = shim::block_words(self.raw.map);
        assert!(
            held.is_some_and(|held| held >= needed),
            "struct dbitmap broken: nbits {} needs {needed} words of map {:p}, which {}",
            self.nbits(),
            self.raw.map,
            held.map_or(
                "is not a live bitmap_zalloc block".to_owned(),
                |held| format!("holds {held}")
            ),
        );
        needed
    }

    /// Whether `bit` is set; `false` when disabled or out of range.
    pub fn test_bit(&self, bit: usize) -> bool {
        bit < self.nbits() && shim::test_bit(self.words(), bit)
    }

    /// Bits `base..base + n` as a word, bit `i` for bit `base + i`: what
    /// [`Self::test_bit`] answers for each, read from the map's words at
    /// once (`false` at or above `nbits`).
    ///
    /// # Panics
    ///
    /// When `n > 64`.
    pub fn bits(&self, base: usize, n: usize) -> u64 {
        assert!(n <= 64, "a word holds 64 bits, not {n}");
        let words = self.words();
        let end = base.saturating_add(n).min(self.nbits());
        (base..end).fold(0, |word, b| {
            word | u64::from(bit_of(words, b)) << (b - base)
        })
    }

    /// The set bits, in increasing order (none when disabled).
    pub fn used_ids(&self) -> Vec<usize> {
        let words = self.words();
        (0..self.nbits()).filter(|&b| bit_of(words, b)).collect()
    }

    /// The smallest zero bit at or above `offset` (the shim's
    /// `find_next_zero_bit`), without setting it; `None` when disabled.
    pub fn next_zero_bit(&self, offset: usize) -> Option<usize> {
        let n = shim::find_next_zero_bit(self.words(), self.nbits(), offset);
        (n < self.nbits()).then_some(n)
    }

    /// `dbitmap_free`: disables the map for good.
    ///
    /// With [`Header::Historical2024`], after a failed grow, this is the
    /// second free of the map: see the type's docs.
    pub fn free(&mut self) {
        // SAFETY: `raw` is a valid struct dbitmap whose map is NULL or owned
        // by it, or (historical header only) a map the header already freed
        // and the wrapper pinned in the shim's quarantine, whose second kfree
        // the shim catches before touching memory (or ASan does).
        unsafe { (self.ops().free)(&mut self.raw) };
        self.pin_if_dangling();
    }

    /// Whether the header left `map` pointing at a map it has freed
    /// (`nbits == 0`, `map != NULL`): only [`Header::Historical2024`] does,
    /// after a failed grow or a free. The next [`free`](Self::free), or the
    /// drop, frees that map again.
    pub fn map_dangles(&self) -> bool {
        self.raw.nbits == 0 && !self.raw.map.is_null()
    }

    /// Forgets a dangling map without handing it to the header again, as
    /// upstream's fix does (`dmap->map = NULL` after the `kfree`): nothing
    /// leaks, since the map was freed when it was left dangling, and the
    /// shim releases its pin on it. Does nothing when the map does not
    /// dangle.
    pub fn forget_dangling(&mut self) {
        if !self.map_dangles() {
            return;
        }
        // SAFETY: only compares the pointer with the shim's records; the
        // block, freed by the header, is handed back to libc only if the
        // shim still held it pinned, and `map` is cleared at once, so
        // nothing can read or free it again.
        unsafe { shim_ffi::unpin_freed(self.raw.map) };
        self.raw.map = ptr::null_mut();
    }

    /// `dbitmap_grow_nbits`: `nbits << 1` in `unsigned int`.
    pub fn grow_nbits(&self) -> usize {
        // SAFETY: only reads `nbits`.
        unsafe { (self.ops().grow_nbits)(ptr::from_ref(&self.raw).cast_mut()) as usize }
    }

    /// `dbitmap_grow_nbits` of a map claiming `nbits` bits, without a map:
    /// the primary header's own arithmetic at sizes no map can have.
    ///
    /// # Panics
    ///
    /// When the kernel header is not [`available`].
    pub fn grow_nbits_for(nbits: u32) -> usize {
        Self::check(Header::Stable);
        let mut raw = RawDBitmap {
            nbits,
            map: ptr::null_mut(),
        };
        // SAFETY: dbitmap_grow_nbits only reads `nbits`; the NULL map is
        // never dereferenced, and `raw` is dropped without dbitmap_free.
        unsafe { (STABLE_OPS.grow_nbits)(&mut raw) as usize }
    }

    /// `dbitmap_shrink_nbits`: the size to shrink to, or 0.
    pub fn shrink_nbits(&self) -> usize {
        // SAFETY: reads `nbits` and, when it is above NBITS_MIN (so the map
        // is enabled and non-NULL), the map's words below `nbits`.
        unsafe { (self.ops().shrink_nbits)(ptr::from_ref(&self.raw).cast_mut()) as usize }
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
        // old `nbits` bits into it, which are fewer). A NULL `new` on an
        // enabled map frees the map (dbitmap_free).
        unsafe { (self.ops().grow)(&mut self.raw, new, nbits) };
        self.pin_if_dangling();
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
        unsafe { (self.ops().shrink)(&mut self.raw, new, nbits) };
        self.pin_if_dangling();
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
        let ret = unsafe {
            (self.ops().acquire_next_zero_bit)(&mut self.raw, offset as c_ulong, &mut bit)
        };
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
        unsafe { (self.ops().clear_bit)(&mut self.raw, bit as c_ulong) }
    }

    /// Sets `bit` with the shim's `set_bit` (the header has no
    /// `dbitmap_set_bit`; this sets up states). Ignored when disabled or out
    /// of range, as in the model.
    pub fn set_bit(&mut self, bit: usize) {
        if bit >= self.nbits() {
            return;
        }
        let len = self.map_len();
        // SAFETY: as in `words` (the map is enabled: nbits > bit >= 0), with
        // `&mut self` for exclusive access.
        let words = unsafe { core::slice::from_raw_parts_mut(self.raw.map, len) };
        shim::set_bit(words, bit);
    }
}

impl Drop for KernelDBitmap {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// A map of the shipped header, or `None` (said on stderr) when it is
    /// not compiled in.
    fn stable_map() -> Option<KernelDBitmap> {
        if !Header::Stable.available() {
            eprintln!("skipped: {}", Header::Stable.provenance());
            return None;
        }
        Some(KernelDBitmap::init(Gfp::Kernel))
    }

    /// The message `dmap.words()` panics with.
    ///
    /// # Panics
    ///
    /// When it reads the map without panicking.
    fn refusal_of(dmap: &KernelDBitmap) -> String {
        let refused =
            catch_unwind(AssertUnwindSafe(|| dmap.words().len())).expect_err("the map was read");
        refused
            .downcast_ref::<String>()
            .expect("a formatted panic message")
            .clone()
    }

    /// A header that sets `nbits` past its map is caught at the first read
    /// from Rust, with both lengths, before anything is read out of bounds
    /// (the check the libFuzzer build relies on: its Rust code is not
    /// instrumented by AddressSanitizer).
    #[test]
    fn a_map_shorter_than_nbits_is_refused() {
        let Some(mut dmap) = stable_map() else {
            return;
        };
        assert_eq!((dmap.nbits(), dmap.words().len()), (64, 1));
        // What a broken replace would leave: 128 bits over a one-word map.
        dmap.raw.nbits = 128;
        let message = refusal_of(&dmap);
        assert!(
            message.contains("nbits 128 needs 2 words of map") && message.contains("holds 1"),
            "{message}"
        );
        dmap.raw.nbits = 64;
    }

    /// `bits` is `test_bit` of each bit, a word at a time, at every base
    /// and length, across word boundaries and past `nbits`.
    #[test]
    fn bits_reads_as_test_bit_does() {
        let Some(mut dmap) = stable_map() else {
            return;
        };
        dmap.grow(KernelDBitmap::zalloc(192, Gfp::Kernel), 192);
        assert_eq!(dmap.nbits(), 192);
        for bit in [0, 1, 5, 63, 64, 65, 100, 127, 128, 150, 190, 191] {
            dmap.set_bit(bit);
        }
        for base in 0..=200 {
            for n in [0, 1, 2, 7, 31, 63, 64] {
                let want = (0..n).fold(0u64, |word, i| {
                    word | u64::from(dmap.test_bit(base + i)) << i
                });
                assert_eq!(dmap.bits(base, n), want, "bits({base}, {n})");
            }
        }
    }

    /// A map freed behind the wrapper's back (a header's use after free)
    /// is caught at the next read, although the same map and `nbits` were
    /// read before.
    #[test]
    fn a_freed_map_is_refused_after_a_sound_read() {
        let Some(mut dmap) = stable_map() else {
            return;
        };
        assert_eq!(dmap.words().len(), 1);
        // SAFETY: frees the live block dbitmap_init allocated; the map is
        // forgotten below, before anything else frees it.
        unsafe { shim_ffi::kfree(dmap.raw.map) };
        let message = refusal_of(&dmap);
        assert!(
            message.contains("is not a live bitmap_zalloc block"),
            "{message}"
        );
        dmap.raw = RawDBitmap {
            nbits: 0,
            map: ptr::null_mut(),
        };
    }
}
