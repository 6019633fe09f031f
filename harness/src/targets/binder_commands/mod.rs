//! `binder_commands`: both Binder drivers at the level of the
//! commands userspace sends (`idpool::driver`), each against its naive
//! model ([`oracle`]), and against each other ([`compare`]).
//!
//! - [`program`]: the program (versions, processes, steps and their plans),
//!   its decoding from bytes and its trace text;
//! - [`mod@run`]: both drivers step by step, each step's windows and failing
//!   allocation, every check;
//! - [`compare`]: the drivers against each other, and every known
//!   difference between them;
//! - [`map`]: the command-space map (the cells of the language a run
//!   reaches, for `triage map`);
//! - [`oracle`]: the naive models;
//! - [`target`]: the registry entry's trait, the trace and the minimiser.

pub mod compare;
pub mod map;
pub mod oracle;
pub mod program;
pub mod run;
pub mod target;

pub use program::{CmdProgram, Plan};
pub use target::CommandsTarget;

/// `binder_commands`: the C and the Rust driver at the command level.
pub static BINDER_COMMANDS: CommandsTarget = CommandsTarget;

use crate::check::Checked;
use crate::Events;

/// Runs `program` on both drivers with every check.
pub fn run(program: &CmdProgram) -> Checked<Events> {
    run::run_with::<oracle::c::COracle, oracle::rust::RustOracle>(program)
}

/// Runs `program` with every check; a known difference between the
/// drivers comes back beside the run's events (for the smoke test and the
/// seed corpus, which count what every run reached).
pub fn run_counting(program: &CmdProgram) -> Checked<(Events, Option<Box<crate::check::Failure>>)> {
    run::run_counting::<oracle::c::COracle, oracle::rust::RustOracle>(program)
}
