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

pub use command::{
    Arg, Command, LooperCmd, NodeFlags, Object, Payload, Pid, Procs, Program, RefCmd, Refused, Row,
    Step, Tid, TxnFlags, Uapi, Value, MAX_OBJECTS, MAX_PROCS, MAX_THREADS, NODE_PTRS, VOCABULARY,
};
pub use observe::{
    br_code, Br, Errno, ExtendedError, Log, NodeName, NodeState, Observed, ProcState, Read,
    Received, RefState, Ret, Snapshot,
};

#[cfg(test)]
mod tests;
