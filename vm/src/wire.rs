//! What the host and the executor say to each other: the configuration the
//! host puts in the initramfs, and the JSON lines the executor prints, one
//! [`Record`] a line, on its own serial port.
//!
//! The executor reports what it saw as raw as it can (errno numbers, `BR_*`
//! codes with their decoded payloads, kernel log lines, the driver's debug
//! text); [`crate::replay`] turns that into `idpool::driver`'s types.

// Named here too, where the configuration and the records use it.
pub use crate::driver::Driver;
use crate::klog::Limit;
use serde::{Deserialize, Serialize};

/// The executor's configuration, `/binder-vm.json` in the initramfs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// The driver.
    pub driver: Driver,
    /// The module to load with `finit_module` (C), a path in the initramfs.
    pub module: Option<String>,
    /// The traces, in order: each a path in the initramfs to a program's
    /// text, and the name the host gave it.
    pub traces: Vec<TraceFile>,
    /// Where the JSON lines go (`/dev/ttyS1`); the console if it cannot be
    /// opened.
    pub output: String,
    /// Pacing against the kernel log's rate limit.
    pub pace: Pace,
    /// How long to wait for a closed process's deferred release, in
    /// milliseconds, before reporting that it did not finish.
    pub release_timeout_ms: u64,
}

/// One trace file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceFile {
    /// The host's name for it (a file name, or `#3`).
    pub name: String,
    /// Its path in the initramfs.
    pub path: String,
    /// The steps whose command runs with an allocation failed on purpose:
    /// `/proc/thread-self/fail-nth` set for its ioctl.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_nth: Vec<FailNth>,
}

/// One step's injected fault: the `nth` allocation (slab or page) of the
/// task that runs the step's command, from the write of
/// `/proc/thread-self/fail-nth` to the end of its ioctl, fails (kernels
/// with `CONFIG_FAULT_INJECTION_DEBUG_FS`; the executor turns off the
/// fault attributes' exemption of allocations that may sleep, which are
/// all of the drivers').
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailNth {
    /// The step's index.
    pub step: usize,
    /// Which allocation fails, from 1.
    pub nth: u32,
}

/// What became of a step's [`FailNth`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// The allocation it was to fail.
    pub nth: u32,
    /// Whether it failed one: the command made at least `nth`
    /// allocations (the task's count read 0 after the ioctl).
    pub injected: bool,
}

/// The C driver prints its `binder_user_error` lines and its
/// `binder_debug` lines (failed transactions, undelivered work) through
/// `pr_info_ratelimited`, each function through its own limit: at most
/// `burst` lines per 5 s for each (`crate::klog::Limit`). The executor
/// follows each limit's window by the timestamps of the lines it printed
/// and, before a command, waits out a window that has fewer than
/// `headroom` lines left of its burst (`interval_ms` after the window's
/// first line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pace {
    /// Whether to pace at all.
    pub enabled: bool,
    /// Lines per window (`DEFAULT_RATELIMIT_BURST`, 10).
    pub burst: u32,
    /// The window (`DEFAULT_RATELIMIT_INTERVAL`, 5 s), plus a margin for
    /// the jiffies and the two clocks (the log's and `CLOCK_BOOTTIME`).
    pub interval_ms: u64,
    /// Lines one command may print.
    pub headroom: u32,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            enabled: true,
            burst: 10,
            interval_ms: 5_100,
            headroom: 4,
        }
    }
}

/// What an ioctl returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireRet {
    /// 0.
    Ok,
    /// -1 with this errno.
    Errno(i32),
    /// `BINDER_GET_NODE_INFO_FOR_REF`'s counts.
    NodeInfo {
        /// `strong_count`.
        strong: u32,
        /// `weak_count`.
        weak: u32,
    },
    /// `BINDER_GET_NODE_DEBUG_INFO`'s answer.
    NodeDebug {
        /// `ptr`.
        ptr: u64,
        /// `cookie`.
        cookie: u64,
        /// `has_strong_ref`.
        has_strong: u32,
        /// `has_weak_ref`.
        has_weak: u32,
    },
    /// `BINDER_GET_FROZEN_INFO`'s answer.
    FrozenInfo {
        /// `sync_recv`.
        sync_recv: u32,
        /// `async_recv`.
        async_recv: u32,
    },
    /// `BINDER_GET_EXTENDED_ERROR`'s answer (the command `extended-error`).
    Extended(WireEe),
    /// `BINDER_VERSION`'s answer.
    Version(i32),
    /// No ioctl was made.
    Skipped,
}

/// A raw `struct binder_extended_error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEe {
    /// `id`.
    pub id: u32,
    /// `command`: a `BR_*` code.
    pub command: u32,
    /// `param`: a negative errno, or 0.
    pub param: i32,
}

/// An object found in a received transaction's buffer (through its
/// offsets array).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireObject {
    /// `hdr.type`.
    pub kind: u32,
    /// `flags`.
    pub flags: u32,
    /// `binder` or `handle`.
    pub value: u64,
    /// `cookie`.
    pub cookie: u64,
}

/// One `BR_*` a process read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireBr {
    /// The thread that read it (`t0` ... `t2`; records of executors before
    /// threads have none: `t0`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tid: u8,
    /// The code's name (`BR_TRANSACTION`, ...; `BR_UNKNOWN`).
    pub br: String,
    /// The raw code.
    pub code: u32,
    /// The integers of its payload: the error of `BR_ERROR`, the pointer
    /// and cookie of `BR_INCREFS` & co, the cookie of `BR_DEAD_BINDER`,
    /// `BR_CLEAR_DEATH_NOTIFICATION_DONE` and
    /// `BR_CLEAR_FREEZE_NOTIFICATION_DONE`, the cookie and `is_frozen` of
    /// `BR_FROZEN_BINDER`; for a transaction or a reply: target, cookie,
    /// code, flags, sender euid, data size, offsets size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<u64>,
    /// A transaction's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<WireObject>>,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

/// A process's state after a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireProc {
    /// Its pid in the VM.
    pub pid: i32,
    /// Whether its Binder file is still open.
    pub alive: bool,
    /// The driver's debug text for it (debugfs `proc/<pid>` or binderfs
    /// `binder_logs/proc/<pid>`); `None` when it has exited; `Some("=")`
    /// when unchanged since the previous step of the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// How the executor waited for the driver's deferred release of a closed
/// process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// What it watched (`stats proc active 2`, ...).
    pub signal: String,
    /// How long it took, in microseconds.
    pub us: u64,
    /// Whether the signal came before the timeout.
    pub done: bool,
}

/// One JSON line of the executor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
pub enum Record {
    /// The executor started: the kernel it runs on.
    Boot {
        /// `uname -r`.
        kernel: String,
        /// The driver it was told.
        driver: Driver,
        /// How many traces (and devices).
        traces: usize,
        /// Milliseconds since the kernel booted (`CLOCK_BOOTTIME`).
        uptime_ms: u64,
        /// The kernel log up to here (boot messages and module load).
        log: Vec<String>,
    },
    /// A trace starts: its processes opened the device.
    TraceBegin {
        /// Its index in the configuration.
        trace: usize,
        /// Its name.
        name: String,
        /// The device all its processes opened.
        device: String,
        /// The pids of `p0`, `p1`, ...
        pids: Vec<i32>,
        /// Kernel log lines printed while they opened it.
        log: Vec<String>,
    },
    /// One command and what followed.
    Step {
        /// The trace.
        trace: usize,
        /// The step's index.
        step: usize,
        /// The command's ioctl result.
        ret: WireRet,
        /// What the command's thread's `BINDER_GET_EXTENDED_ERROR` said
        /// right after it (none after `thread-exit`, `exit` or a command
        /// that made no ioctl).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ee: Option<WireEe>,
        /// What each process read while draining, in order (each read
        /// names its thread).
        reads: Vec<Vec<WireBr>>,
        /// The kernel log lines printed during the command and the drains.
        log: Vec<String>,
        /// Each process's state afterwards.
        procs: Vec<WireProc>,
        /// For `exit`: the wait for the deferred release.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        release: Option<Release>,
        /// Milliseconds spent waiting out the log's rate limit before it.
        #[serde(default)]
        paced_ms: u64,
        /// Microseconds from the command to its last snapshot.
        us: u64,
        /// The C driver's rate limits whose window had printed its whole
        /// burst, and was not over, at the end of the step: any of their
        /// lines the step printed after that was dropped.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        full_limits: Vec<Limit>,
        /// Set when the executor saw something off (a drain error, a
        /// malformed read): the text says what.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
        /// The fault injected into the command, if one was asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fault: Option<Fault>,
    },
    /// A trace ended: its remaining processes closed the device.
    TraceEnd {
        /// The trace.
        trace: usize,
        /// Kernel log lines printed after the last step, before the
        /// closes, to make the kernel report what its rate limits dropped
        /// during the steps (the executor's `flush`; empty when no window
        /// printed its whole burst).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flush: Vec<String>,
        /// Kernel log lines printed while they closed it (and what the
        /// closes dropped, reported the same way).
        log: Vec<String>,
        /// Milliseconds the trace took, from the first open.
        ms: u64,
        /// Whether log lines may have been lost to the rate limit during
        /// the trace: a window printed its whole burst, or the kernel
        /// said "callbacks suppressed".
        log_may_be_incomplete: bool,
    },
    /// The executor could not go on with a trace (or at all).
    Error {
        /// The trace, if any.
        trace: Option<usize>,
        /// The step, if any.
        step: Option<usize>,
        /// What failed.
        message: String,
    },
    /// Every trace ran; the VM powers off next.
    Done {
        /// How many traces ran.
        traces: usize,
        /// Milliseconds since the kernel booted.
        uptime_ms: u64,
        /// Milliseconds spent pacing in total.
        paced_ms: u64,
    },
}
