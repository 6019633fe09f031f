//! `kernel_idpool`: mainline's own `rust/kernel/id_pool.rs` and
//! `rust/kernel/bitmap.rs` (compiled unchanged by the test-only
//! `kernel-idpool` crate), our `IdPool` and the naive pool model, in
//! lockstep on `pool_ops`' operations. What is its own: the pool pair the
//! runner drives ([`IdPoolPair`], in [`pair`]: every call, answer, request,
//! allocation, capacity, bit and log line compared; calls past the
//! capacity compared as the non-hardened build answers them) and the
//! entry, which needs mainline's source.

pub mod pair;

pub use pair::IdPoolPair;

use crate::oracle::Policy;
use crate::registry::{Need, OpsTarget};
use crate::targets::pool_ops::{self, PoolOp};

/// `kernel_idpool`: the `pool_ops` program on mainline's `IdPool`, ours
/// and the model. Needs mainline's source (`ci/kernel-source.sh --release
/// 7.3` or `KERNEL_TREE`). No AddressSanitizer: it links no C; its
/// `unsafe` is mainline's calls into the shim's bindings and the shim
/// itself, which refuses a bad free before touching memory and whose bit
/// functions are tested against naive ones (`kernel-idpool/tests/shim.rs`).
pub static KERNEL_IDPOOL: OpsTarget<PoolOp> = OpsTarget::new(
    "kernel_idpool",
    "mainline's own IdPool (rust/kernel/id_pool.rs), our IdPool and the model, in lockstep on the pool_ops program",
    |target, ops| pool_ops::run::<IdPoolPair>(target, Policy::Rust, ops),
)
.needing(&[Need::Probed {
    missing: pair::unavailable,
}])
.with_provenance(pair::provenance);
