//! `handle_table`: the flavours of the Binder handle table side by side,
//! each against its own model: mainline's three (`IdPool`, `DBitmap`, the
//! legacy scan) and the three designs (`FastPool`, `AugmentedTree`,
//! `Shrinker`; see [`crate::designs`]).
//!
//! Each table runs the upstream version its driver is given (see
//! [`crate::history`]) and its model follows that version's rules; the
//! designs support the Rust versions only ([`idpool::Flavour::supports`])
//! and follow the Rust driver's version. A program may also run a second
//! `dbitmap` or `IdPool` table on the neighbouring version and compare the
//! two ([`crate::check::Check::VersionsDiffer`]). Corruption of the pools
//! ([`TableOp::Corrupt`]) is tracked by the models, which then predict
//! each version's reaction, its warnings and the pool/`by_handle`
//! disagreement the table must report; the augmented tree has no bits of
//! its own, so corruption does not reach it (its model ignores it, as the
//! linear scan's does).
//!
//! - [`ops`] and [`node`]: [`TableOp`], its decoding and its trace lines;
//! - [`start`]: [`StartSet`], a process that starts from given handles;
//! - [`program`]: the entry ([`TableTarget`]), the versions header and the
//!   trace form;
//! - [`model`]: [`TableModel`], one flavour's model;
//! - [`sides`]: the tables as the runner sees them, and the pairs of
//!   versions;
//! - [`runner`]: [`run`] and [`run_versions`], step by step;
//! - [`checks`]: one side's checks after a step.

pub mod checks;
pub mod model;
pub mod node;
pub mod ops;
pub mod program;
pub mod runner;
pub mod sides;
pub mod start;

#[cfg(test)]
mod tests;

pub use model::TableModel;
pub use node::{Node, NODES};
pub use ops::{CorruptOp, HandleSel, TableOp, MAX_BULK, MAX_HANDLES};
pub use program::{TableProgram, TableTarget, TableTrace};
pub use runner::{run, run_versions};
pub use start::StartSet;

/// `handle_table`: mainline's three table flavours and the three designs
/// side by side, on the versions the program's header picks.
pub static HANDLE_TABLE: TableTarget = TableTarget::new("handle_table");
