//! Allocation flags and per-instance fault injection.
//!
//! The kernel passes GFP flags to every allocation. We do the same, with one
//! extra flag value, [`Gfp::Fail`], that makes the allocation fail as if memory
//! were exhausted. Whoever drives the allocator decides, allocation by
//! allocation, which ones fail: a test, the fuzz harness, or the [`Faults`]
//! counter that a [`HandleTable`](crate::HandleTable) owns. There is no global
//! state, so tests running in parallel cannot disturb one another.

use core::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

/// Allocation flags, after the kernel's `gfp_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gfp {
    /// An ordinary allocation (`GFP_KERNEL`). It succeeds unless the request
    /// itself is impossible (longer than [`Bitmap::MAX_LEN`](crate::Bitmap::MAX_LEN)).
    Kernel,
    /// An injected failure: the allocation fails with [`AllocError`].
    /// Allocations that need no memory (a bitmap of at most 64 bits) still
    /// succeed, exactly as they would in the kernel.
    Fail,
}

/// The allocation failed (`ENOMEM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AllocError;

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("memory allocation failed")
    }
}

impl std::error::Error for AllocError {}

/// "The next `n` allocations fail": a per-instance fault plan.
///
/// Each call to [`Faults::next`] consumes one planned failure, if any, and
/// returns the flags the allocation must use. It is atomic so that a
/// [`SharedHandleTable`](crate::SharedHandleTable) can be shared by threads.
///
/// # Examples
///
/// ```
/// use idpool::{Faults, Gfp};
///
/// let faults = Faults::default();
/// faults.fail_next(2);
/// assert_eq!(faults.next(), Gfp::Fail);
/// assert_eq!(faults.next(), Gfp::Fail);
/// assert_eq!(faults.next(), Gfp::Kernel);
/// ```
#[derive(Debug, Default)]
pub struct Faults {
    pending: AtomicU32,
}

impl Faults {
    /// Makes the next `n` allocations fail (in addition to those already planned).
    pub fn fail_next(&self, n: u32) {
        self.pending.fetch_add(n, Ordering::SeqCst);
    }

    /// How many planned failures have not happened yet.
    pub fn pending(&self) -> u32 {
        self.pending.load(Ordering::SeqCst)
    }

    /// The flags for the next allocation, consuming one planned failure.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&self) -> Gfp {
        let took = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if took.is_ok() {
            Gfp::Fail
        } else {
            Gfp::Kernel
        }
    }
}
