//! `kernel_dbitmap`: the kernel's own `drivers/android/dbitmap.h` (compiled
//! by the test-only `kernel-dbitmap` crate), our `DBitmap` and the naive
//! pool model, in lockstep on `pool_ops`' operations, with the historical
//! header (upstream's double-free fix reversed) beside the kernel's. What
//! is its own: the pool pair the runner drives ([`KernelPair`], in
//! [`pair`]) and the entry, which needs the header, runs under
//! AddressSanitizer and hunts the historical header's double free.

pub mod pair;

pub use pair::KernelPair;

use crate::check::{Checked, Failure};
use crate::events::Events;
use crate::history::Finding;
use crate::oracle::Policy;
use crate::registry::{Need, OpsTarget, Target};
use crate::targets::pool_ops::{self, PoolOp};

/// `kernel_dbitmap`: the `dbitmap_ops` program on the kernel's C, ours and
/// the model, and on the historical header beside the kernel's. Needs the
/// kernel's header; its C is compiled with `-fsanitize=address` too
/// (`kernel-dbitmap/build.rs`), under which the historical header's double
/// free is ASan's to report ([`Finding::DoubleFree`]).
pub static KERNEL_DBITMAP: OpsTarget<PoolOp> = OpsTarget::new(
    "kernel_dbitmap",
    "the kernel's own dbitmap.h, our DBitmap and the model, in lockstep on the dbitmap_ops program; the historical header (its double-free fix reversed) beside",
    |target, ops| pool_ops::run::<KernelPair>(target, Policy::C, ops),
)
.needing(&[Need::Probed {
    missing: pair::unavailable,
}])
.with_provenance(pair::provenance)
.sanitized("address")
.hunting(&[Finding::DoubleFree]);

/// Runs `ops` as the target does, with the known finding met at a release
/// (the historical header's double free) kept apart: the run's events, and
/// that finding if it was met ([`pool_ops::run_counting`]).
pub fn run_counting(ops: &[PoolOp]) -> Checked<(Events, Option<Box<Failure>>)> {
    pool_ops::run_counting::<KernelPair>(KERNEL_DBITMAP.name(), Policy::C, ops)
}
