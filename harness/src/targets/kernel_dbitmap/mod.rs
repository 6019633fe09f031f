//! `kernel_dbitmap`: the kernel's own `drivers/android/dbitmap.h` (compiled
//! by the test-only `kernel-dbitmap` crate), our `DBitmap` and the naive
//! pool model, in lockstep on `pool_ops`' operations. What is its own: the
//! pool pair the runner drives ([`KernelPair`], in [`pair`]) and the entry,
//! which needs the header and runs under AddressSanitizer.

pub mod pair;

pub use pair::KernelPair;

use crate::oracle::Policy;
use crate::registry::{Need, OpsTarget};
use crate::targets::pool_ops::{self, PoolOp};

/// `kernel_dbitmap`: the `dbitmap_ops` program on the kernel's C, ours and
/// the model. Needs the kernel's header; its C is compiled with
/// `-fsanitize=address` too (`kernel-dbitmap/build.rs`).
pub static KERNEL_DBITMAP: OpsTarget<PoolOp> = OpsTarget::new(
    "kernel_dbitmap",
    "the kernel's own dbitmap.h, our DBitmap and the model, in lockstep on the dbitmap_ops program",
    |target, ops| pool_ops::run::<KernelPair>(target, Policy::C, ops),
)
.needing(&[Need::Probed {
    missing: pair::unavailable,
}])
.with_provenance(pair::provenance)
.sanitized("address");
