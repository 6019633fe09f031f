//! How a `concurrent_resize` run went ([`Outcome`]): the schedule that ran
//! and the paths it took, as the run's [`Events`].

use crate::events::Events;
use crate::sched::Schedule;

/// How a run went, for the smoke test and the triage tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The steps that ran.
    pub schedule: Schedule,
    /// Grows that raised the capacity.
    pub grows: u32,
    /// Shrinks that lowered it.
    pub shrinks: u32,
    /// Times a thread's lock was dropped while another thread's operation
    /// was between two of its steps: the windows this scheduler is for.
    pub interleaved: u32,
    /// Operations that ended with an injected allocation failure.
    pub failed_allocs: u32,
    /// Reclaims that lowered the capacity.
    pub reclaims: u32,
    /// Grow commits of a context manager's insert (one that found the map
    /// full and dropped the lock) at which handle 0 had changed hands
    /// since the lock drop: released, or taken by another node.
    pub manager_grow_zero_moved: u32,
    /// Grow commits of a context manager's insert at which another
    /// context manager's node had been inserted since the lock drop.
    pub manager_grow_other_manager: u32,
    /// Kills while another thread's insert had dropped the lock (between
    /// its unlock and its relock).
    pub killed_in_window: u32,
    /// Inserts of a new node refused because the process was dead.
    pub dead_refused: u32,
    /// New references inserted into a dead process (the C driver).
    pub dead_inserted: u32,
    /// Lookups run.
    pub lookups: u32,
    /// Corruptions that changed a bit of the pool.
    pub corruptions: u32,
    /// Pool/`by_handle` mismatches met by a pick, as the model expected:
    /// Rust mainline's warning and `EINVAL`.
    pub mismatch_einval: u32,
    /// The same, Rust's first posting: the warning, and the search goes on.
    pub mismatch_search_on: u32,
    /// The same, C: the kernel's `BUG()`.
    pub mismatch_crash: u32,
}

impl Outcome {
    /// The run's paths as [`Events`].
    pub fn events(&self) -> Events {
        Events {
            grow_committed: self.grows,
            shrink_committed: self.shrinks,
            alloc_failed: self.failed_allocs,
            interleaved: self.interleaved,
            reclaimed: self.reclaims,
            manager_grow_zero_moved: self.manager_grow_zero_moved,
            manager_grow_other_manager: self.manager_grow_other_manager,
            killed_in_window: self.killed_in_window,
            dead_refused: self.dead_refused,
            dead_inserted: self.dead_inserted,
            lookups: self.lookups,
            corrupted: self.corruptions,
            mismatch_einval: self.mismatch_einval,
            mismatch_search_on: self.mismatch_search_on,
            mismatch_crash: self.mismatch_crash,
            ..Events::default()
        }
    }
}
