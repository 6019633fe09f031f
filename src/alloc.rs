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
use std::sync::Mutex;

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

/// Where the handle table allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocSite {
    /// The new reference's memory, before an insert picks its id.
    Ref,
    /// A bigger bitmap, when the pool is full.
    Grow,
    /// A smaller bitmap, after a release.
    Shrink,
}

impl AllocSite {
    const ALL: [AllocSite; 3] = [AllocSite::Ref, AllocSite::Grow, AllocSite::Shrink];

    fn index(self) -> usize {
        self as usize
    }
}

/// "The next `n` allocations fail": a per-instance fault plan.
///
/// Failures are planned for any allocation ([`Faults::fail_next`]) or for
/// the next ones at one site ([`Faults::fail_next_at`]). Each call to
/// [`Faults::next`] consumes one planned failure that applies to its site,
/// site-specific ones first, and returns the flags the allocation must use.
/// It is atomic so that a [`SharedHandleTable`](crate::SharedHandleTable)
/// can be shared by threads.
///
/// An allocation that needs no memory (a bitmap of at most 64 bits) still
/// consumes the failure planned for it, and succeeds.
///
/// # Examples
///
/// ```
/// use idpool::{AllocSite, Faults, Gfp};
///
/// let faults = Faults::default();
/// faults.fail_next(1);
/// faults.fail_next_at(AllocSite::Grow, 1);
/// assert_eq!(faults.next(AllocSite::Ref), Gfp::Fail);
/// assert_eq!(faults.next(AllocSite::Ref), Gfp::Kernel);
/// assert_eq!(faults.next(AllocSite::Grow), Gfp::Fail);
/// assert_eq!(faults.next(AllocSite::Grow), Gfp::Kernel);
/// ```
///
/// The plan can also hold [`Corruption`]s of the pool: the table applies
/// them at its next critical section, behind its own back (see
/// [`Faults::corrupt`]).
#[derive(Debug, Default)]
pub struct Faults {
    any: AtomicU32,
    at: [AtomicU32; AllocSite::ALL.len()],
    corruptions: Mutex<Vec<Corruption>>,
}

/// A change to the pool's bits that the handle table does not make itself:
/// memory corruption, or a bug elsewhere in the driver. It is how a test
/// reaches the code that handles a pool/`by_handle` mismatch.
///
/// The id is taken as given, whatever the table holds: `ClearBit` of a live
/// handle's id makes the pool offer that id again (a mismatch); `SetBit` of an
/// id no handle holds makes the pool skip it for good (a leak). A pool with
/// no bits of its own (the linear scan, a disabled dbitmap) ignores both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Corruption {
    /// The pool's bit for this id is cleared.
    ClearBit(u32),
    /// The pool's bit for this id is set.
    SetBit(u32),
}

impl Faults {
    /// Makes the next `n` allocations fail, wherever they are (in addition to
    /// those already planned).
    pub fn fail_next(&self, n: u32) {
        self.any.fetch_add(n, Ordering::SeqCst);
    }

    /// Makes the next `n` allocations at `site` fail.
    pub fn fail_next_at(&self, site: AllocSite, n: u32) {
        self.at[site.index()].fetch_add(n, Ordering::SeqCst);
    }

    /// How many planned failures have not happened yet.
    pub fn pending(&self) -> u32 {
        self.any.load(Ordering::SeqCst)
            + self
                .at
                .iter()
                .map(|a| a.load(Ordering::SeqCst))
                .sum::<u32>()
    }

    /// Plans a corruption of the pool: the table that owns this plan applies
    /// it, in the order planned, at the start of its next critical section
    /// ([`NodeRefs::run`](crate::NodeRefs::run),
    /// [`HandleTable`](crate::HandleTable),
    /// [`SharedHandleTable`](crate::SharedHandleTable)). Whoever runs
    /// [`Operation`](crate::Operation) steps by hand applies them with
    /// [`NodeRefs::apply_corruptions`](crate::NodeRefs::apply_corruptions).
    ///
    /// # Panics
    ///
    /// If a thread panicked while planning or taking corruptions.
    pub fn corrupt(&self, corruption: Corruption) {
        self.corruptions
            .lock()
            .expect("a thread panicked planning a corruption")
            .push(corruption);
    }

    /// Takes the planned corruptions, oldest first, leaving none.
    ///
    /// # Panics
    ///
    /// If a thread panicked while planning or taking corruptions.
    pub fn take_corruptions(&self) -> Vec<Corruption> {
        std::mem::take(
            &mut *self
                .corruptions
                .lock()
                .expect("a thread panicked planning a corruption"),
        )
    }

    /// The flags for the next allocation at `site`, consuming one planned
    /// failure if one applies.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&self, site: AllocSite) -> Gfp {
        let take = |counter: &AtomicU32| {
            counter
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        };
        if take(&self.at[site.index()]) || take(&self.any) {
            Gfp::Fail
        } else {
            Gfp::Kernel
        }
    }
}
