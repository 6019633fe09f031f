//! `kernel::bindings`: the C bitmap functions that `bitmap.rs` calls,
//! written in Rust for this shim from the documented semantics of the
//! kernel's helpers (not translated from their source). The signatures are
//! those of the kernel's generated bindings, where C's `unsigned long` is
//! `usize` and `unsigned int` (including `gfp_t`) is `u32`.
//!
//! - `_find_next_bit(addr, size, offset)`, `_find_next_zero_bit(...)`: the
//!   smallest set (clear) bit in `[offset, size)`, or `size` when there is
//!   none, in particular when `offset >= size`, without reading `addr`.
//! - `_find_last_bit(addr, size)`: the highest set bit below `size`, or
//!   `size` when none is.
//! - Bits of the last word at or above `size` are never looked at.
//! - `bitmap_copy_and_extend(to, from, count, size)`: the first `count` bits
//!   of `from`, then zeroes up to the end of the last word of `size` bits.
//! - `__set_bit`/`__clear_bit` are plain read-modify-writes; `set_bit` and
//!   `clear_bit` are relaxed atomic ones.
//! - `bitmap_zalloc(nbits, flags)`: zeroed words for `nbits` bits (at least
//!   one word, as `kmalloc(0)` returns a non-NULL pointer), or NULL when the
//!   thread's [fault plan](crate::alloc::faults) says so or memory is
//!   exhausted. Every block is registered until `bitmap_free`.
//! - `bitmap_free(NULL)` does nothing; freeing anything that is not a live
//!   block of `bitmap_zalloc` (a double free, a foreign pointer) panics
//!   before touching memory.
//!
//! [`checked`] has safe versions over slices, for the shim's own tests.

use crate::alloc::faults;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::thread::ThreadId;

/// Bits per word (`BITS_PER_LONG`).
const BITS: usize = usize::BITS as usize;

/// Bits `[0, n)` of a word, `n <= BITS`.
fn low_mask(n: usize) -> usize {
    if n >= BITS {
        !0
    } else {
        (1 << n) - 1
    }
}

/// The smallest 1 of `view(word)` in `[offset, size)`, or `size`.
///
/// # Safety
///
/// `addr` points to initialised words holding at least `size` bits.
unsafe fn find_next(
    addr: *const usize,
    size: usize,
    offset: usize,
    view: fn(usize) -> usize,
) -> usize {
    if offset >= size {
        return size;
    }
    let words = size.div_ceil(BITS);
    let mut idx = offset / BITS;
    // SAFETY: `idx * BITS <= offset < size`, so word `idx` holds bits below
    // `size`, which the caller guarantees are readable.
    let mut word = view(unsafe { addr.add(idx).read() }) & !low_mask(offset % BITS);
    loop {
        if word != 0 {
            return (idx * BITS + word.trailing_zeros() as usize).min(size);
        }
        idx += 1;
        if idx >= words {
            return size;
        }
        // SAFETY: `idx < words`, the words holding bits below `size`.
        word = view(unsafe { addr.add(idx).read() });
    }
}

/// `_find_next_bit`: the smallest set bit in `[offset, size)`, or `size`.
///
/// # Safety
///
/// `addr` points to initialised words holding at least `size` bits
/// (nothing is read when `offset >= size`).
pub unsafe fn _find_next_bit(addr: *const usize, size: usize, offset: usize) -> usize {
    // SAFETY: the caller's guarantee.
    unsafe { find_next(addr, size, offset, |w| w) }
}

/// `_find_next_zero_bit`: the smallest clear bit in `[offset, size)`, or
/// `size`.
///
/// # Safety
///
/// As [`_find_next_bit`].
pub unsafe fn _find_next_zero_bit(addr: *const usize, size: usize, offset: usize) -> usize {
    // SAFETY: the caller's guarantee.
    unsafe { find_next(addr, size, offset, |w| !w) }
}

/// `_find_last_bit`: the highest set bit below `size`, or `size` when none
/// is.
///
/// # Safety
///
/// `addr` points to initialised words holding at least `size` bits
/// (nothing is read when `size == 0`).
pub unsafe fn _find_last_bit(addr: *const usize, size: usize) -> usize {
    if size == 0 {
        return size;
    }
    let mut idx = (size - 1) / BITS;
    // SAFETY: word `idx` holds bit `size - 1`.
    let mut word = unsafe { addr.add(idx).read() } & low_mask(size - idx * BITS);
    loop {
        if word != 0 {
            return idx * BITS + (BITS - 1 - word.leading_zeros() as usize);
        }
        if idx == 0 {
            return size;
        }
        idx -= 1;
        // SAFETY: a word below one that holds bits below `size`.
        word = unsafe { addr.add(idx).read() };
    }
}

/// `bitmap_copy_and_extend`: copies the first `count` bits of `from` into
/// `to` and zeroes the rest of the words of `to` up to `size` bits.
///
/// # Safety
///
/// `count <= size`; `from` holds at least `count` readable bits; `to`
/// holds at least `size` writable bits; the two do not overlap.
pub unsafe fn bitmap_copy_and_extend(to: *mut usize, from: *const usize, count: u32, size: u32) {
    let (count, size) = (count as usize, size as usize);
    let copy = count.div_ceil(BITS);
    let total = size.div_ceil(BITS);
    // SAFETY: `from` holds the `copy` words of `count` bits, `to` the
    // `total >= copy` words of `size` bits, and they do not overlap.
    unsafe { core::ptr::copy_nonoverlapping(from, to, copy) };
    if count % BITS != 0 {
        // SAFETY: `copy >= 1` here, and word `copy - 1` of `to` was written.
        unsafe { *to.add(copy - 1) &= low_mask(count % BITS) };
    }
    for idx in copy..total {
        // SAFETY: `idx < total`, inside `to`.
        unsafe { to.add(idx).write(0) };
    }
}

/// `__set_bit`: sets bit `nr`, non-atomically.
///
/// # Safety
///
/// Bit `nr` of `addr` is writable and nobody else accesses its word.
pub unsafe fn __set_bit(nr: usize, addr: *mut usize) {
    // SAFETY: the caller's guarantee.
    unsafe { *addr.add(nr / BITS) |= 1 << (nr % BITS) };
}

/// `__clear_bit`: clears bit `nr`, non-atomically.
///
/// # Safety
///
/// As [`__set_bit`].
pub unsafe fn __clear_bit(nr: usize, addr: *mut usize) {
    // SAFETY: the caller's guarantee.
    unsafe { *addr.add(nr / BITS) &= !(1 << (nr % BITS)) };
}

/// `set_bit`: sets bit `nr` with a relaxed atomic read-modify-write.
///
/// # Safety
///
/// Bit `nr` of `addr` is writable, its word is aligned, and every
/// concurrent access to that word is atomic.
pub unsafe fn set_bit(nr: usize, addr: *mut usize) {
    // SAFETY: the caller's guarantee; `usize` words are aligned for
    // `AtomicUsize`, which has the same size.
    let word = unsafe { AtomicUsize::from_ptr(addr.add(nr / BITS)) };
    word.fetch_or(1 << (nr % BITS), Ordering::Relaxed);
}

/// `clear_bit`: clears bit `nr` with a relaxed atomic read-modify-write.
///
/// # Safety
///
/// As [`set_bit`].
pub unsafe fn clear_bit(nr: usize, addr: *mut usize) {
    // SAFETY: as in `set_bit`.
    let word = unsafe { AtomicUsize::from_ptr(addr.add(nr / BITS)) };
    word.fetch_and(!(1 << (nr % BITS)), Ordering::Relaxed);
}

/// A live block of `bitmap_zalloc`.
struct Block {
    words: usize,
    thread: ThreadId,
}

/// Every live block, by address.
static LIVE: Mutex<BTreeMap<usize, Block>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<usize, Block>> {
    // A panic while the lock is held (only `bitmap_free`'s own, after the
    // map was updated) leaves the map consistent.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn layout(words: usize) -> Layout {
    Layout::array::<usize>(words).expect("a bitmap of at most u32::MAX bits")
}

/// `bitmap_zalloc`: zeroed words for `nbits` bits, or NULL.
///
/// # Safety
///
/// None beyond C's: the result is NULL or a block to free with
/// [`bitmap_free`] exactly once. (It is `unsafe` as every binding is.)
pub unsafe fn bitmap_zalloc(nbits: u32, flags: u32) -> *mut usize {
    if faults::next_fails(nbits, flags) {
        return core::ptr::null_mut();
    }
    let words = (nbits as usize).div_ceil(BITS).max(1);
    // SAFETY: the layout has a non-zero size (at least one word).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout(words)) }.cast::<usize>();
    if !ptr.is_null() {
        let block = Block {
            words,
            thread: std::thread::current().id(),
        };
        live().insert(ptr as usize, block);
    }
    ptr
}

/// `bitmap_free` (`kfree`): frees a block of [`bitmap_zalloc`].
///
/// # Panics
///
/// When `bitmap` is neither NULL nor a live block: a double free or a
/// foreign pointer, reported before any memory is touched.
///
/// # Safety
///
/// Nobody uses the block afterwards.
pub unsafe fn bitmap_free(bitmap: *const usize) {
    if bitmap.is_null() {
        return;
    }
    let Some(block) = live().remove(&(bitmap as usize)) else {
        panic!("bitmap_free({bitmap:p}): not a live bitmap_zalloc block (double or invalid free)");
    };
    // SAFETY: the block was allocated by `bitmap_zalloc` with this layout
    // and was live until the line above.
    unsafe { std::alloc::dealloc(bitmap.cast_mut().cast(), layout(block.words)) };
}

/// How many blocks of `bitmap_zalloc` allocated by this thread are live.
pub fn live_allocs() -> usize {
    let me = std::thread::current().id();
    live().values().filter(|b| b.thread == me).count()
}

/// Safe versions of the bit functions over slices, for the shim's tests
/// and for callers outside the kernel files.
pub mod checked {
    use super::BITS;

    fn check(words: &[usize], size: usize) {
        assert!(
            size <= words.len() * BITS,
            "{size} bits do not fit in {} words",
            words.len()
        );
    }

    /// `_find_next_bit(words, size, offset)`.
    ///
    /// # Panics
    ///
    /// When `words` holds fewer than `size` bits.
    pub fn find_next_bit(words: &[usize], size: usize, offset: usize) -> usize {
        check(words, size);
        // SAFETY: `words` holds at least `size` initialised bits (checked).
        unsafe { super::_find_next_bit(words.as_ptr(), size, offset) }
    }

    /// `_find_next_zero_bit(words, size, offset)`.
    ///
    /// # Panics
    ///
    /// As [`find_next_bit`].
    pub fn find_next_zero_bit(words: &[usize], size: usize, offset: usize) -> usize {
        check(words, size);
        // SAFETY: as in `find_next_bit`.
        unsafe { super::_find_next_zero_bit(words.as_ptr(), size, offset) }
    }

    /// `_find_last_bit(words, size)`.
    ///
    /// # Panics
    ///
    /// As [`find_next_bit`].
    pub fn find_last_bit(words: &[usize], size: usize) -> usize {
        check(words, size);
        // SAFETY: as in `find_next_bit`.
        unsafe { super::_find_last_bit(words.as_ptr(), size) }
    }

    /// `bitmap_copy_and_extend(to, from, count, size)`.
    ///
    /// # Panics
    ///
    /// When `count > size`, `from` holds fewer than `count` bits, `to`
    /// fewer than `size`, or `size` does not fit in a `u32`.
    pub fn bitmap_copy_and_extend(to: &mut [usize], from: &[usize], count: usize, size: usize) {
        assert!(count <= size, "count {count} > size {size}");
        check(from, count);
        check(to, size);
        let size = u32::try_from(size).expect("size is an unsigned int in C");
        // SAFETY: checked above; `&mut` and `&` slices never overlap.
        unsafe { super::bitmap_copy_and_extend(to.as_mut_ptr(), from.as_ptr(), count as u32, size) }
    }

    fn check_bit(words: &[usize], nr: usize) {
        assert!(nr < words.len() * BITS, "bit {nr} out of bounds");
    }

    /// `__set_bit(nr, words)`.
    ///
    /// # Panics
    ///
    /// When bit `nr` is outside `words`.
    pub fn set_bit(words: &mut [usize], nr: usize) {
        check_bit(words, nr);
        // SAFETY: bit `nr` is inside `words`, borrowed exclusively.
        unsafe { super::__set_bit(nr, words.as_mut_ptr()) }
    }

    /// `__clear_bit(nr, words)`.
    ///
    /// # Panics
    ///
    /// When bit `nr` is outside `words`.
    pub fn clear_bit(words: &mut [usize], nr: usize) {
        check_bit(words, nr);
        // SAFETY: as in `set_bit`.
        unsafe { super::__clear_bit(nr, words.as_mut_ptr()) }
    }

    /// `set_bit(nr, words)` (atomic).
    ///
    /// # Panics
    ///
    /// When bit `nr` is outside `words`.
    pub fn set_bit_atomic(words: &mut [usize], nr: usize) {
        check_bit(words, nr);
        // SAFETY: as in `set_bit`; exclusive, so no non-atomic access races.
        unsafe { super::set_bit(nr, words.as_mut_ptr()) }
    }

    /// `clear_bit(nr, words)` (atomic).
    ///
    /// # Panics
    ///
    /// When bit `nr` is outside `words`.
    pub fn clear_bit_atomic(words: &mut [usize], nr: usize) {
        check_bit(words, nr);
        // SAFETY: as in `set_bit_atomic`.
        unsafe { super::clear_bit(nr, words.as_mut_ptr()) }
    }

    /// `bitmap_zalloc(nbits, flags)` then a copy of its words and
    /// `bitmap_free`: `None` when the allocation failed. For the tests of
    /// the allocator and its fault plan.
    pub fn zalloc_words(nbits: u32, flags: crate::alloc::Flags) -> Option<Vec<usize>> {
        // SAFETY: `bitmap_zalloc` has no precondition.
        let ptr = unsafe { super::bitmap_zalloc(nbits, flags.as_raw()) };
        if ptr.is_null() {
            return None;
        }
        let words = (nbits as usize).div_ceil(BITS).max(1);
        // SAFETY: a live block of `words` zeroed words.
        let copy = unsafe { core::slice::from_raw_parts(ptr, words) }.to_vec();
        // SAFETY: freed once, not used afterwards.
        unsafe { super::bitmap_free(ptr) };
        Some(copy)
    }

    /// Allocates a block, frees it, and frees it again: the shim's guard
    /// against double frees, exercised safely (the second free is refused
    /// before any memory is touched).
    ///
    /// # Panics
    ///
    /// Always, in the second `bitmap_free`.
    pub fn free_twice() {
        // SAFETY: `bitmap_zalloc` has no precondition.
        let ptr = unsafe { super::bitmap_zalloc(100, 0) };
        assert!(!ptr.is_null(), "an allocation failure was planned");
        // SAFETY: a live block, not used afterwards; the second call frees
        // nothing, it panics on finding the block gone.
        unsafe {
            super::bitmap_free(ptr);
            super::bitmap_free(ptr);
        }
    }
}
