//! Command-level traces (`docs/commands.md`) replayed on the real Binder
//! drivers, booted in QEMU.
//!
//! - [`exec`] is the in-VM executor, `binder-exec`, PID 1 of the VM;
//! - [`initramfs`] packs it with the module and the traces, [`qemu`] boots
//!   a kernel on that;
//! - [`wire`] is what the executor prints (JSON lines), and [`replay`]
//!   turns it into `idpool::driver`'s [`Observed`](idpool::driver::Observed)
//!   and [`Snapshot`](idpool::driver::Snapshot), per trace and step, with
//!   [`debugfs`] (the drivers' per-process debug text) and [`klog`] (the
//!   kernel log lines, classified per driver).
//!
//! [`driver`] names which of the two drivers a kernel has.
//!
//! [`replay()`] is the whole: traces in, observations out; [`compare`]
//! holds them against our models of the drivers.

pub mod abi;
pub mod compare;
pub mod debugfs;
pub mod driver;
pub mod exec;
pub mod initramfs;
pub mod klog;
pub mod program;
pub mod qemu;
pub mod replay;
pub mod sys;
pub mod wire;

pub use driver::Driver;
pub use replay::{replay, replay_with, Kernel, Options, StepRun, TraceRun};
