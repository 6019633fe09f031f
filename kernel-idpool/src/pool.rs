//! The safe wrapper: mainline's `IdPool` and `BitmapVec` with the API of
//! our [`idpool::IdPool`] and [`idpool::Bitmap`] (names, arguments,
//! results, [`Gfp`] for allocation flags, [`AllocError`] for failures), so
//! that a test or a fuzz target drives ours, mainline's and a model with the
//! same calls and compares every answer.
//!
//! # What is observable, and how
//!
//! Mainline's types keep their fields private, so the wrapper observes them
//! through their own API only:
//!
//! - the capacity ([`KernelIdPool::capacity`]);
//! - whether an id is used: [`KernelIdPool::is_used`] asks
//!   `find_unused_id(id)` and compares (an O(1)-ish question, as the search
//!   starts at `id`); [`KernelIdPool::used_ids`] walks the unused ids;
//! - a request's size, which `ReallocRequest` does not reveal: it is the
//!   `nbits` of the `bitmap_zalloc` that [`KernelReallocRequest::realloc`]
//!   makes (the shim records it), or 64 when it makes none, because a
//!   request of at most 64 ids is always exactly 64 (a grow asks for at
//!   least 128, a shrink for at least 64) and needs no allocation;
//!   [`KernelReallocRequest::num_ids`] reads it before any real allocation,
//!   off a `realloc` made to fail.
//!
//! # Hardened builds
//!
//! With `CONFIG_RUST_BITMAP_HARDENED` (the `hardened` feature, see
//! [`HARDENED`]), mainline panics where ours returns `None` or does
//! nothing. Through this API that happens for exactly two calls, both with
//! an argument at or above the capacity:
//!
//! - [`KernelIdPool::find_unused_id`]`(offset >= capacity)`
//!   (`next_zero_bit`'s `bitmap_assert!`); ours returns `None`;
//! - [`KernelIdPool::release_id`]`(id >= capacity)`
//!   (`clear_bit`'s `bitmap_assert_return!`); ours does nothing.
//!
//! Without it, mainline answers `None` and does nothing too, and
//! `release_id` also logs one `pr_err!` line.
//!
//! The comparison the project makes is therefore: in a hardened build, a
//! panic is the expected answer to an out-of-range argument *and only to
//! one*, it leaves the pool unchanged (the assertion comes before any
//! write), and ours must answer `None` (or change nothing) to the same
//! call; any other panic is a divergence. [`out_of_range`] is the
//! predicate, and [`catch_panic`] runs a call that may panic. A fuzz target
//! built with `panic = "abort"` cannot catch the panic: it must not send an
//! out-of-range call to a hardened pool, and compares the non-hardened
//! build there instead.
//!
//! # Examples
//!
//! ```
//! use kernel_idpool::{Gfp, KernelIdPool};
//!
//! if kernel_idpool::available() {
//!     let mut pool = KernelIdPool::new();
//!     for expected in 0..64 {
//!         assert_eq!(pool.find_unused_id(0).unwrap().acquire(), expected);
//!     }
//!     assert!(pool.find_unused_id(0).is_none());
//!     let resizer = pool.grow_request().unwrap().realloc(Gfp::Kernel)?;
//!     assert_eq!(resizer.len(), 128);
//!     pool.grow(resizer);
//!     assert_eq!(pool.capacity(), 128);
//!     assert_eq!(pool.find_unused_id(1).unwrap().acquire(), 64);
//! }
//! # Ok::<(), idpool::AllocError>(())
//! ```

use crate::alloc::faults;
use crate::alloc::flags::GFP_KERNEL;
use crate::bitmap::BitmapVec;
use crate::id_pool;
pub use idpool::{AllocError, Gfp};

/// Whether mainline was compiled with `CONFIG_RUST_BITMAP_HARDENED` (the
/// `hardened` feature): out-of-range bit indexes panic instead of being
/// logged and ignored.
pub const HARDENED: bool = cfg!(CONFIG_RUST_BITMAP_HARDENED);

/// Whether a call with this id or offset is out of range for a pool of
/// `capacity` ids: the calls that panic in a [`HARDENED`] build.
pub fn out_of_range(id_or_offset: usize, capacity: usize) -> bool {
    id_or_offset >= capacity
}

/// Runs `f`, catching a panic (a hardened assertion) as its message.
///
/// Needs unwinding: under `panic = "abort"` the process aborts instead.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned())
    })
}

fn check() {
    assert!(crate::available(), "{}", crate::provenance());
}

/// Mainline's `kernel::id_pool::IdPool`, with the API of [`idpool::IdPool`].
///
/// # Invariants
///
/// Those of mainline's type: the capacity is at least 64 and at most
/// `i32::MAX`; an acquired id stays acquired until released.
pub struct KernelIdPool {
    pool: id_pool::IdPool,
}

/// Mainline's `ReallocRequest`, from [`KernelIdPool::grow_request`] or
/// [`KernelIdPool::shrink_request`].
#[must_use = "a request does nothing until it is reallocated and committed"]
pub struct KernelReallocRequest {
    request: id_pool::ReallocRequest,
}

/// Mainline's `PoolResizer`, with the length it was allocated for.
#[must_use = "a resizer does nothing until it is committed"]
pub struct KernelPoolResizer {
    resizer: id_pool::PoolResizer,
    len: usize,
}

/// Mainline's `UnusedId`: an id found free, not yet acquired.
#[must_use = "dropping a KernelUnusedId without acquire() leaves the id free"]
pub struct KernelUnusedId<'pool> {
    unused: id_pool::UnusedId<'pool>,
}

impl KernelIdPool {
    /// `IdPool::new()`: 64 ids, inline, no allocation.
    ///
    /// # Panics
    ///
    /// When the mainline source is not [`available`](crate::available).
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        check();
        KernelIdPool {
            pool: id_pool::IdPool::new(),
        }
    }

    /// `IdPool::with_capacity(num_ids, GFP_KERNEL)`; [`Gfp::Fail`] fails
    /// its allocation (there is none for at most 64 ids).
    ///
    /// # Panics
    ///
    /// When the mainline source is not [`available`](crate::available).
    pub fn with_capacity(num_ids: usize, gfp: Gfp) -> Result<Self, AllocError> {
        check();
        faults::with_gfp(gfp, || id_pool::IdPool::with_capacity(num_ids, GFP_KERNEL))
            .map(|pool| KernelIdPool { pool })
            .map_err(|_| AllocError)
    }

    /// `capacity()`.
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// `find_unused_id(offset)`: the smallest unused id at or above
    /// `offset`, not yet acquired.
    ///
    /// # Panics
    ///
    /// In a [`HARDENED`] build, when `offset >= capacity()`.
    pub fn find_unused_id(&mut self, offset: usize) -> Option<KernelUnusedId<'_>> {
        self.pool
            .find_unused_id(offset)
            .map(|unused| KernelUnusedId { unused })
    }

    /// `release_id(id)`. An id at or above the capacity is logged
    /// (`pr_err!`) and ignored.
    ///
    /// # Panics
    ///
    /// In a [`HARDENED`] build, when `id >= capacity()`.
    pub fn release_id(&mut self, id: usize) {
        self.pool.release_id(id);
    }

    /// `grow_request()`.
    pub fn grow_request(&self) -> Option<KernelReallocRequest> {
        self.pool
            .grow_request()
            .map(|request| KernelReallocRequest { request })
    }

    /// `shrink_request()`.
    pub fn shrink_request(&self) -> Option<KernelReallocRequest> {
        self.pool
            .shrink_request()
            .map(|request| KernelReallocRequest { request })
    }

    /// `grow(resizer)`.
    pub fn grow(&mut self, resizer: KernelPoolResizer) {
        self.pool.grow(resizer.resizer);
    }

    /// `shrink(resizer)`.
    pub fn shrink(&mut self, resizer: KernelPoolResizer) {
        self.pool.shrink(resizer.resizer);
    }

    /// Whether `id` is acquired: `find_unused_id(id)` does not answer `id`.
    /// `false` at or above the capacity (never asked, so never a panic).
    pub fn is_used(&mut self, id: usize) -> bool {
        id < self.capacity() && self.find_unused_id(id).map(|u| u.as_usize()) != Some(id)
    }

    /// The acquired ids, in increasing order: the gaps between the unused
    /// ids that `find_unused_id` walks. Costs one search per unused id.
    pub fn used_ids(&mut self) -> Vec<usize> {
        let capacity = self.capacity();
        let mut used = Vec::new();
        let mut next = 0;
        while next < capacity {
            let free = self.find_unused_id(next).map_or(capacity, |u| u.as_usize());
            used.extend(next..free);
            next = free + 1;
        }
        used
    }
}

impl KernelReallocRequest {
    /// The number of ids the request asks for, which mainline's
    /// `ReallocRequest` keeps private: read off a `realloc` whose
    /// allocation is made to fail. The shim records the size of every
    /// `bitmap_zalloc` it is asked for, failing or not, and a failed
    /// `realloc` changes nothing (the request is only read). A request that
    /// makes no allocation is of at most 64 ids, so exactly 64 (a grow asks
    /// for at least 128, a shrink for at least 64).
    ///
    /// # Panics
    ///
    /// When the request is larger than `BitmapVec::MAX_LEN`, which mainline
    /// refuses without asking the allocator (its requests never are).
    pub fn num_ids(&self) -> usize {
        let calls = faults::calls();
        let probe = faults::with_gfp(Gfp::Fail, || self.request.realloc(GFP_KERNEL));
        match (probe, faults::calls() > calls) {
            (Err(_), true) => faults::last_request().map_or(0, |(nbits, _)| nbits),
            (Ok(_), false) => BitmapVec::MAX_INLINE_LEN,
            (probe, called) => panic!(
                "a request whose realloc answered {:?} with{} an allocation",
                probe.map(|_| ()),
                if called { "" } else { "out" }
            ),
        }
    }

    /// `realloc(GFP_KERNEL)`; [`Gfp::Fail`] fails its allocation (there is
    /// none for a request of 64 ids).
    pub fn realloc(&self, gfp: Gfp) -> Result<KernelPoolResizer, AllocError> {
        let calls = faults::calls();
        let resizer =
            faults::with_gfp(gfp, || self.request.realloc(GFP_KERNEL)).map_err(|_| AllocError)?;
        let len = if faults::calls() > calls {
            faults::last_request().map_or(0, |(nbits, _)| nbits)
        } else {
            BitmapVec::MAX_INLINE_LEN
        };
        Ok(KernelPoolResizer { resizer, len })
    }
}

impl KernelPoolResizer {
    /// The capacity the pool would take from it (see the module docs for
    /// how it is known).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true for a pool's resizer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl KernelUnusedId<'_> {
    /// `as_usize()`.
    pub fn as_usize(&self) -> usize {
        self.unused.as_usize()
    }

    /// `as_u32()`.
    pub fn as_u32(&self) -> u32 {
        self.unused.as_u32()
    }

    /// `acquire()`: marks the id used and returns it.
    pub fn acquire(self) -> usize {
        self.unused.acquire()
    }
}

/// Mainline's `kernel::bitmap::BitmapVec`, with the API of
/// [`idpool::Bitmap`].
pub struct KernelBitmapVec {
    map: BitmapVec,
}

impl KernelBitmapVec {
    /// `BitmapVec::new(len, GFP_KERNEL)`; [`Gfp::Fail`] fails its
    /// allocation (there is none for at most 64 bits).
    ///
    /// # Panics
    ///
    /// When the mainline source is not [`available`](crate::available).
    pub fn new(len: usize, gfp: Gfp) -> Result<Self, AllocError> {
        check();
        faults::with_gfp(gfp, || BitmapVec::new(len, GFP_KERNEL))
            .map(|map| KernelBitmapVec { map })
            .map_err(|_| AllocError)
    }

    /// `len()`.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it has no bits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `set_bit(index)`.
    ///
    /// # Panics
    ///
    /// In a [`HARDENED`] build, when `index >= len()`.
    pub fn set_bit(&mut self, index: usize) {
        self.map.set_bit(index);
    }

    /// `clear_bit(index)`.
    ///
    /// # Panics
    ///
    /// In a [`HARDENED`] build, when `index >= len()`.
    pub fn clear_bit(&mut self, index: usize) {
        self.map.clear_bit(index);
    }

    /// Whether bit `index` is set (`next_bit(index) == Some(index)`);
    /// `false` at or above `len()`.
    pub fn test_bit(&self, index: usize) -> bool {
        index < self.len() && self.map.next_bit(index) == Some(index)
    }

    /// `next_zero_bit(start)`.
    ///
    /// # Panics
    ///
    /// In a [`HARDENED`] build, when `start >= len()`.
    pub fn next_zero_bit(&self, start: usize) -> Option<usize> {
        self.map.next_zero_bit(start)
    }

    /// `next_bit(start)`.
    ///
    /// # Panics
    ///
    /// In a [`HARDENED`] build, when `start >= len()`.
    pub fn next_bit(&self, start: usize) -> Option<usize> {
        self.map.next_bit(start)
    }

    /// `last_bit()`.
    pub fn last_bit(&self) -> Option<usize> {
        self.map.last_bit()
    }

    /// `copy_and_extend(src)`.
    pub fn copy_and_extend(&mut self, src: &KernelBitmapVec) {
        self.map.copy_and_extend(&src.map);
    }
}
