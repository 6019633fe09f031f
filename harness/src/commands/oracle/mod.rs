//! Naive models of what each driver shows userspace, written from the
//! upstream sources independently of `idpool::driver`'s transliterations:
//! processes hold references (handle, node, strong and weak counts), nodes
//! have owners and counts, and each rule is stated as the driver's user
//! sees it. They never call into `idpool::driver`'s drivers.

use idpool::driver::{Observed, Snapshot, Step};
use idpool::{AllocSite, Version};

/// A naive model of one driver.
pub trait Oracle {
    /// The model after each of `euids.len()` processes opened the device,
    /// for `version` (of the model's driver).
    fn new(euids: &[u32], version: Version) -> Self
    where
        Self: Sized;
    /// Runs one step to completion, then every live process drains its
    /// work (`docs/commands.md`); `fail` makes the command's first
    /// allocation at that site fail.
    fn step(&mut self, step: &Step, fail: Option<AllocSite>) -> Observed;
    /// What each process holds now.
    fn snapshot(&self) -> Snapshot;
    /// Whether the model is checked at all (a driver without a model yet
    /// says no).
    fn enabled() -> bool
    where
        Self: Sized,
    {
        true
    }
}

/// No model: nothing is checked against it.
pub struct Unmodelled;

impl Oracle for Unmodelled {
    fn new(_: &[u32], _: Version) -> Self {
        Unmodelled
    }
    fn step(&mut self, _: &Step, _: Option<AllocSite>) -> Observed {
        Observed::default()
    }
    fn snapshot(&self) -> Snapshot {
        Snapshot::default()
    }
    fn enabled() -> bool {
        false
    }
}
