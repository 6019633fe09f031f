//! `concurrent_resize`: 2 to 4 simulated threads whose steps are
//! interleaved in the windows where Binder drops its lock, on any of five
//! pools, on the scheduler engine ([`crate::sched`]).
//!
//! # Input
//!
//! The bytes decode to a [`Program`] (a prefill size and 2 to 4 threads with
//! a few table operations each), then the rest is the schedule. Each
//! schedule byte is one decision: its low two bits, modulo the number of
//! runnable threads, choose the thread; bits 2-3 choose how long it runs
//! (one step; until its current operation is done; until it has no
//! operation left; until its current operation is done, commits
//! included); the two middle ones stop early where the thread holds an
//! allocated resizer and waits to commit it, so that a burst leaves the
//! lock-drop window open for the next decision to fill or close. A byte
//! of `0xf0` or more fails the allocation, if the step is one. Bursts let
//! a short input say "this thread waits in its window while that one does
//! a lot". When the bytes run out, the lowest
//! runnable thread that is not waiting to commit a resize runs, and nothing
//! fails: a thread that holds an allocated resizer commits only when the
//! others are done, so even a schedule of no byte at all opens the widest
//! window. No RNG is involved: the same
//! input is the same execution, and libFuzzer's minimiser shrinks program
//! and schedule together. The schedule as it ran is recorded step by step
//! ([`crate::sched::Decision`]), and that is what a trace stores and replays.
//!
//! # Oracle
//!
//! An operation takes effect at one critical section (its linearisation
//! point): an insert at the section that finishes it, an increment or a
//! decrement at its first. There the naive model applies it and the result
//! is compared: a new handle must be the smallest free id at or above its
//! start *at that moment*, and an insert of a node already present must
//! return that node's handle. After every critical section (every lock
//! release) the table's invariants are checked and `by_handle` must equal
//! the model's. A thread whose operation takes more than [`crate::sched::STEP_BOUND`]
//! steps is reported as a livelock. Every failure prints the schedule so
//! far, which replays exactly.
//!
//! # Corruption
//!
//! [`ThreadOp::Corrupt`] changes a bit of the pool behind the table's back,
//! in one critical section. From the first corruption that changes a bit,
//! the model keeps the pool's bits itself and models each insert's pick
//! sections, so that each version's reaction to a pool/`by_handle`
//! mismatch (Rust mainline: warning and `EINVAL`; Rust's first posting:
//! log and search on; C: `BUG()`) is the expected outcome; the warnings
//! are compared after every critical section, and the capacity reads the
//! highest set bit. See [`corrupt`] for the rules and what is checked.
//!
//! - [`program`]: [`Program`] and [`ThreadOp`], and their decoding;
//! - [`mod@run`]: [`run()`] a program under a chooser's decisions;
//! - [`text`]: the entry ([`ConcurrentTarget`]) and the trace form;
//! - [`sim`]: the simulated process, its setup and its loop; one step's
//!   critical section in [`section`], a single-section operation in
//!   [`single`], the checks at a lock release in [`release`], the abstract
//!   state in [`state`], what a run reached in [`outcome`];
//! - [`capacity`] and [`corrupt`]: the model's capacity and, after a
//!   corruption, its record of the pool's bits;
//! - [`mod@encode`] and [`shrink`]: bytes for hand-written seeds, and the
//!   minimiser's rules.

pub mod capacity;
pub mod corrupt;
pub mod encode;
pub mod outcome;
pub mod program;
pub mod release;
pub mod run;
pub mod section;
pub mod shrink;
pub mod sim;
pub mod single;
pub mod state;
pub mod text;

#[cfg(test)]
mod tests;

pub use encode::encode;
pub use outcome::Outcome;
pub use program::{decode, CorruptBit, Pool, Program, ThreadOp, BULK_COUNTS, SHARED_NODES};
pub use run::{run, run_bytes};
pub use text::{ConcurrentTarget, ConcurrentTrace};

/// `concurrent_resize`: simulated threads interleaved in the lock-drop
/// windows.
pub static CONCURRENT_RESIZE: ConcurrentTarget = ConcurrentTarget::new("concurrent_resize");
