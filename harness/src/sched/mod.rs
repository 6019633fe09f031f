//! The scheduler engine: simulated threads whose steps are interleaved in
//! the windows where Binder drops its lock, as the fuzz input decides.
//! Which thread's next step runs, and whether its allocation fails, is a
//! [`Decision`]; decisions come from the input's bytes ([`ByteChooser`]),
//! from a trace ([`Replay`]), or either with a [`Recorder`] around it, and
//! the steps that ran are the [`Schedule`]. A target over step machines
//! (`concurrent_resize`) builds its simulated process on this engine.
//!
//! # Why step granularity is enough
//!
//! Every handle-table operation is an [`idpool::Operation`] step machine whose steps
//! are either one critical section (run with the table's mutex held) or one
//! allocation (run with the lock dropped, touching no shared state). The
//! mutex serialises critical sections, and an unlocked step neither reads
//! nor writes what other threads can see. So every real execution of the
//! protocol, on any number of cores, is equivalent to some sequence of whole
//! steps of the threads involved: the only thing a real scheduler decides
//! is *which thread's next step runs next*, plus whether each allocation
//! succeeds. That is what this scheduler reads from the fuzz input, and all
//! it decides. It re-implements no part of the protocol: it calls
//! [`idpool::Operation::step_locked`] and [`idpool::Operation::step_unlocked`], the very
//! functions `SharedHandleTable` runs on real threads.
//!

mod schedule;

pub use schedule::{
    ByteChooser, Chooser, Decision, DecisionsText, Recorder, Replay, Schedule, Step, ThreadView,
};

/// The most steps one operation may take before it counts as a livelock.
pub const STEP_BOUND: usize = 256;
/// A schedule byte at or above this fails the allocation it schedules.
pub const FAIL_BYTE: u8 = 0xf0;
