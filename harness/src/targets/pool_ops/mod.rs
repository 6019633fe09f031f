//! `pool_ops`: the Rust driver's `IdPool` against the naive pool model,
//! with the fast pool design driven beside it on the same operations
//! ([`Twin`]). Its op language, model and runner are also those of the
//! targets over other pools (`dbitmap_ops`, `kernel_dbitmap`,
//! `kernel_idpool`): a target over
//! this language brings its pool's adapter ([`PoolApi`]) and a registry
//! entry running [`run`] on it.
//!
//! - [`ops`]: [`PoolOp`], how bytes decode to it, its kinds and trace lines;
//! - [`api`]: [`PoolApi`], the adapter the runner drives, and `IdPool`'s;
//! - [`model`]: [`PoolModel`], the live ids and the capacity formulas;
//! - [`runner`]: [`run`], the steps and what each step's checks read;
//! - [`checks`]: the comparisons after a step;
//! - [`twin`]: [`Twin`], `IdPool` and the fast pool side by side.

pub mod api;
pub mod checks;
pub mod model;
pub mod ops;
pub mod runner;
pub mod twin;

pub use api::{
    Built, PoolApi, Refused, Released, Shape, BULK_CAP_LIMIT, DBITMAP_RESET_LIMIT, MAX_GROWS,
};
pub use model::{CGrowSize, PoolModel, MAX_PENDING};
pub use ops::{PoolOp, Resize};
pub use runner::{run, run_counting};
pub use twin::Twin;

use crate::oracle::Policy;
use crate::registry::OpsTarget;

/// `pool_ops`: the Rust `IdPool` against the model, and `FastPool` beside
/// it on the same operations.
pub static POOL_OPS: OpsTarget<PoolOp> = OpsTarget::new(
    "pool_ops",
    "IdPool and FastPool side by side: acquire, release, prepared grows and shrinks committed later, bulk ops, the ceiling",
    |target, ops| run::<Twin>(target, Policy::Rust, ops),
);
