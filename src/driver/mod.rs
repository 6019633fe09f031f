//! The two Binder drivers at the level of the commands userspace sends.
//!
//! [`command`] is the language ([`Program`], [`Step`], [`Command`]);
//! [`observe`] is what userspace sees of a driver ([`Observed`],
//! [`Snapshot`]).

mod c;
pub mod command;
mod exec;
pub mod observe;
mod rust;

pub use c::{CDriver, Crash};
pub use exec::{FailFirst, Held, Sequential, Windows};
pub use rust::RustDriver;

pub use command::{Command, Object, Pid, Program, RefCmd, Step, MAX_OBJECTS, MAX_PROCS, NODE_PTRS};
pub use observe::{
    Br, Errno, Log, NodeName, NodeState, Observed, ProcState, Received, RefState, Ret, Snapshot,
};

#[cfg(test)]
mod tests;
