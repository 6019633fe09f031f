//! `kernel::alloc` as the kernel files import it (`AllocError`, `Flags` and
//! the GFP flags), and the shim's allocator behind `bitmap_zalloc` and
//! `bitmap_free`: every allocation is registered, so a free of anything
//! else fails loudly, and failures are injected per thread by a fault plan.
//!
//! # Fault plans
//!
//! Each thread has a queue of decisions, one per `bitmap_zalloc` call: the
//! call at the front fails (returns NULL) when its decision is `true`. An
//! empty queue lets every call succeed. [`faults::fail_next`] and
//! [`faults::plan`] append to it; [`faults::with_gfp`] runs a closure with
//! a plan of its own. The plan reaches the kernel code unchanged:
//! `BitmapVec::new` calls `bitmap_zalloc` for more than 64 bits and turns
//! its NULL into `AllocError`, exactly as in the kernel; a bitmap of at most
//! 64 bits is inline, calls nothing, and cannot fail.
//!
//! # Examples
//!
//! ```
//! use kernel_idpool::alloc::{faults, flags::GFP_KERNEL};
//!
//! if !kernel_idpool::available() {
//!     return; // no mainline source on this machine
//! }
//! use kernel_idpool::bitmap::BitmapVec;
//! faults::fail_next(1);
//! assert!(BitmapVec::new(64, GFP_KERNEL).is_ok()); // inline: no allocation
//! assert_eq!(faults::pending(), 1);
//! assert!(BitmapVec::new(65, GFP_KERNEL).is_err()); // the planned failure
//! assert!(BitmapVec::new(65, GFP_KERNEL).is_ok());
//! ```

use core::fmt;

/// The allocation failed (the kernel's `kernel::alloc::AllocError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AllocError;

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("memory allocation failed")
    }
}

impl std::error::Error for AllocError {}

/// Allocation flags (the kernel's `gfp_t` wrapper). The shim's allocator
/// records them with each request and otherwise ignores them; the values
/// are ours, one bit each, not the kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flags(u32);

impl Flags {
    /// The raw `gfp_t`.
    pub fn as_raw(self) -> u32 {
        self.0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Flags(self.0 | rhs.0)
    }
}

/// The GFP flags of `kernel::alloc::flags`.
pub mod flags {
    use super::Flags;

    /// `GFP_ATOMIC`.
    pub const GFP_ATOMIC: Flags = Flags(1 << 0);
    /// `GFP_KERNEL`.
    pub const GFP_KERNEL: Flags = Flags(1 << 1);
    /// `GFP_KERNEL_ACCOUNT`.
    pub const GFP_KERNEL_ACCOUNT: Flags = Flags(1 << 2);
    /// `GFP_NOWAIT`.
    pub const GFP_NOWAIT: Flags = Flags(1 << 3);
    /// `__GFP_ZERO`.
    pub const __GFP_ZERO: Flags = Flags(1 << 4);
    /// `__GFP_HIGHMEM`.
    pub const __GFP_HIGHMEM: Flags = Flags(1 << 5);
    /// `__GFP_NOWARN`.
    pub const __GFP_NOWARN: Flags = Flags(1 << 6);
}

/// Per-thread failure injection for `bitmap_zalloc`, and what it was asked.
pub mod faults {
    use super::Flags;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;

    thread_local! {
        static PLAN: RefCell<VecDeque<bool>> = const { RefCell::new(VecDeque::new()) };
        static CALLS: Cell<u64> = const { Cell::new(0) };
        static LAST: Cell<Option<(u32, u32)>> = const { Cell::new(None) };
    }

    /// Makes the next `n` `bitmap_zalloc` calls of this thread fail (after
    /// the decisions already planned).
    pub fn fail_next(n: usize) {
        PLAN.with_borrow_mut(|p| p.extend(core::iter::repeat_n(true, n)));
    }

    /// Appends one decision per future call: `true` fails it.
    pub fn plan(decisions: &[bool]) {
        PLAN.with_borrow_mut(|p| p.extend(decisions));
    }

    /// Forgets every planned decision.
    pub fn clear() {
        PLAN.with_borrow_mut(VecDeque::clear);
    }

    /// How many planned failures have not happened yet.
    pub fn pending() -> usize {
        PLAN.with_borrow(|p| p.iter().filter(|&&fail| fail).count())
    }

    /// How many times this thread called `bitmap_zalloc`.
    pub fn calls() -> u64 {
        CALLS.get()
    }

    /// The `(nbits, flags)` of this thread's last `bitmap_zalloc` call.
    pub fn last_request() -> Option<(usize, Flags)> {
        LAST.get().map(|(n, f)| (n as usize, Flags(f)))
    }

    /// Runs `f` with [`idpool::Gfp`]'s meaning: with [`idpool::Gfp::Fail`]
    /// the first `bitmap_zalloc` of `f` fails, whatever the plan says, and
    /// if `f` allocates nothing the failure is dropped, not left pending;
    /// with [`idpool::Gfp::Kernel`] the thread's plan decides as usual.
    pub fn with_gfp<T>(gfp: idpool::Gfp, f: impl FnOnce() -> T) -> T {
        if gfp == idpool::Gfp::Kernel {
            return f();
        }
        PLAN.with_borrow_mut(|p| p.push_front(true));
        let before = calls();
        struct Unplan(u64);
        impl Drop for Unplan {
            fn drop(&mut self) {
                if calls() == self.0 {
                    PLAN.with_borrow_mut(|p| p.pop_front());
                }
            }
        }
        let _unplan = Unplan(before);
        f()
    }

    /// Called by `bitmap_zalloc`: records the request and says whether it
    /// fails.
    pub(crate) fn next_fails(nbits: u32, flags: u32) -> bool {
        CALLS.set(CALLS.get() + 1);
        LAST.set(Some((nbits, flags)));
        PLAN.with_borrow_mut(|p| p.pop_front().unwrap_or(false))
    }
}
