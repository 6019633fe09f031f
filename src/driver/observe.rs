//! What userspace observes of a driver: per command, the return code, what
//! each process reads afterwards and the kernel log lines; at any point,
//! the references and nodes each process holds.
//!
//! Both driver models, their naive oracles and the real kernels (through
//! the VM executor) are reduced to these types, so that any two of them can
//! be compared observable by observable.

use super::command::{Pid, Tid};
use core::fmt;
use std::collections::BTreeMap;

/// An error number an ioctl returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Errno {
    /// `EPERM` (1).
    Perm,
    /// `ENOENT` (2).
    NoEnt,
    /// `ESRCH` (3).
    Srch,
    /// `EAGAIN` (11).
    Again,
    /// `ENOMEM` (12).
    NoMem,
    /// `EFAULT` (14).
    Fault,
    /// `EBUSY` (16).
    Busy,
    /// `EINVAL` (22).
    Inval,
    /// `ENOSPC` (28).
    NoSpc,
    /// `EPROTO` (71).
    Proto,
}

impl Errno {
    /// Every errno this crate names.
    pub const ALL: [Errno; 10] = [
        Errno::Perm,
        Errno::NoEnt,
        Errno::Srch,
        Errno::Again,
        Errno::NoMem,
        Errno::Fault,
        Errno::Busy,
        Errno::Inval,
        Errno::NoSpc,
        Errno::Proto,
    ];

    /// Its number on Linux x86-64.
    pub fn code(self) -> i32 {
        match self {
            Errno::Perm => 1,
            Errno::NoEnt => 2,
            Errno::Srch => 3,
            Errno::Again => 11,
            Errno::NoMem => 12,
            Errno::Fault => 14,
            Errno::Busy => 16,
            Errno::Inval => 22,
            Errno::NoSpc => 28,
            Errno::Proto => 71,
        }
    }

    /// Its name: `EPERM`, `ENOENT`, ...
    pub fn name(self) -> &'static str {
        match self {
            Errno::Perm => "EPERM",
            Errno::NoEnt => "ENOENT",
            Errno::Srch => "ESRCH",
            Errno::Again => "EAGAIN",
            Errno::NoMem => "ENOMEM",
            Errno::Fault => "EFAULT",
            Errno::Busy => "EBUSY",
            Errno::Inval => "EINVAL",
            Errno::NoSpc => "ENOSPC",
            Errno::Proto => "EPROTO",
        }
    }

    /// The errno with this number.
    pub fn from_code(code: i32) -> Option<Errno> {
        Errno::ALL.into_iter().find(|e| e.code() == code)
    }

    /// The errno with this name.
    pub fn from_name(name: &str) -> Option<Errno> {
        Errno::ALL.into_iter().find(|e| e.name() == name)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the command's ioctl returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ret {
    /// 0.
    Ok,
    /// -1 with this errno.
    Err(Errno),
    /// `BINDER_GET_NODE_INFO_FOR_REF` succeeded with these counts.
    NodeInfo {
        /// `strong_count`.
        strong: u32,
        /// `weak_count`.
        weak: u32,
    },
    /// `BINDER_GET_NODE_DEBUG_INFO` succeeded: the first node of the
    /// caller's with a pointer above the one asked for (all 0: none).
    NodeDebug {
        /// Its pointer.
        ptr: u64,
        /// Its cookie.
        cookie: u64,
        /// `has_strong_ref`.
        has_strong: bool,
        /// `has_weak_ref`.
        has_weak: bool,
    },
    /// `BINDER_GET_FROZEN_INFO` succeeded.
    FrozenInfo {
        /// `sync_recv`: bit 0, a two-way transaction reached the process
        /// while it was frozen; bit 1, transactions are pending.
        sync_recv: u32,
        /// `async_recv`: a one-way transaction reached it while frozen.
        async_recv: u32,
    },
    /// `BINDER_GET_EXTENDED_ERROR` succeeded.
    Extended(ExtendedError),
    /// `BINDER_VERSION` succeeded with this protocol version.
    Version(i32),
    /// No ioctl was made: the process (or the thread) had exited, or
    /// `free` found no buffer to free.
    Skipped,
}

impl fmt::Display for Ret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ret::Ok => f.write_str("0"),
            Ret::Err(e) => write!(f, "{e}"),
            Ret::NodeInfo { strong, weak } => write!(f, "strong {strong} weak {weak}"),
            Ret::NodeDebug {
                ptr,
                cookie,
                has_strong,
                has_weak,
            } => write!(
                f,
                "node {ptr} cookie {cookie} strong {} weak {}",
                u8::from(*has_strong),
                u8::from(*has_weak)
            ),
            Ret::FrozenInfo {
                sync_recv,
                async_recv,
            } => write!(f, "sync {sync_recv} async {async_recv}"),
            Ret::Extended(ee) => write!(f, "{ee}"),
            Ret::Version(v) => write!(f, "version {v}"),
            Ret::Skipped => f.write_str("skipped"),
        }
    }
}

/// An object as the receiver of a transaction finds it, translated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Received {
    /// `BINDER_TYPE_HANDLE` (`strong`) or `BINDER_TYPE_WEAK_HANDLE`: a
    /// handle of the receiver's.
    Handle {
        /// The receiver's handle.
        handle: u32,
        /// Strong or weak.
        strong: bool,
    },
    /// `BINDER_TYPE_BINDER` (`strong`) or `BINDER_TYPE_WEAK_BINDER`: one of
    /// the receiver's own nodes.
    Node {
        /// The node's pointer.
        ptr: u64,
        /// Strong or weak.
        strong: bool,
    },
}

impl fmt::Display for Received {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let weak = |strong: bool| if strong { "" } else { "weak-" };
        match *self {
            Received::Handle { handle, strong } => write!(f, "{}handle {handle}", weak(strong)),
            Received::Node { ptr, strong } => write!(f, "{}node {ptr}", weak(strong)),
        }
    }
}

/// The value of a `BR_*` return code (`enum binder_driver_return_protocol`,
/// `include/uapi/linux/android/binder.h`), as the extended error's
/// `command` carries it.
pub mod br_code {
    /// `_IO('r', nr)`, or `_IOR('r', nr, size)`.
    const fn io(nr: u32, size: u32) -> u32 {
        (if size > 0 { 2 << 30 } else { 0 }) | size << 16 | (b'r' as u32) << 8 | nr
    }
    /// `BR_OK`.
    pub const OK: u32 = io(1, 0);
    /// `BR_DEAD_REPLY`.
    pub const DEAD_REPLY: u32 = io(5, 0);
    /// `BR_TRANSACTION_COMPLETE`.
    pub const TRANSACTION_COMPLETE: u32 = io(6, 0);
    /// `BR_FAILED_REPLY`.
    pub const FAILED_REPLY: u32 = io(17, 0);
    /// `BR_FROZEN_REPLY`.
    pub const FROZEN_REPLY: u32 = io(18, 0);
    /// `BR_TRANSACTION_PENDING_FROZEN`.
    pub const TRANSACTION_PENDING_FROZEN: u32 = io(20, 0);
    /// `BR_ONEWAY_SPAM_SUSPECT`.
    pub const ONEWAY_SPAM_SUSPECT: u32 = io(19, 0);

    /// The name of the codes an extended error carries, else the number.
    pub fn name(code: u32) -> String {
        match code {
            OK => "BR_OK".into(),
            DEAD_REPLY => "BR_DEAD_REPLY".into(),
            TRANSACTION_COMPLETE => "BR_TRANSACTION_COMPLETE".into(),
            FAILED_REPLY => "BR_FAILED_REPLY".into(),
            FROZEN_REPLY => "BR_FROZEN_REPLY".into(),
            TRANSACTION_PENDING_FROZEN => "BR_TRANSACTION_PENDING_FROZEN".into(),
            ONEWAY_SPAM_SUSPECT => "BR_ONEWAY_SPAM_SUSPECT".into(),
            other => format!("{other:#x}"),
        }
    }

    /// The code with this name.
    pub fn from_name(name: &str) -> Option<u32> {
        [
            OK,
            DEAD_REPLY,
            TRANSACTION_COMPLETE,
            FAILED_REPLY,
            FROZEN_REPLY,
            TRANSACTION_PENDING_FROZEN,
            ONEWAY_SPAM_SUSPECT,
        ]
        .into_iter()
        .find(|&c| self::name(c) == name)
        .or_else(|| u32::from_str_radix(name.strip_prefix("0x")?, 16).ok())
    }
}

/// What `BINDER_GET_EXTENDED_ERROR` reports (`struct binder_extended_error`)
/// as this campaign compares it: the command and its errno, and whether
/// the id is set. The id's value is each driver's own debug counter; with
/// `BR_OK` it is whatever the thread's last transaction (or, in the Rust
/// driver, the thread's creation: `thread.rs:296-310`) left, so it is
/// compared only when the command is not `BR_OK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExtendedError {
    /// Whether `id` is not 0 (`false` whenever `command` is `BR_OK`).
    pub id_set: bool,
    /// A `BR_*` code ([`br_code`]).
    pub command: u32,
    /// A negative errno, or 0.
    pub param: i32,
}

impl ExtendedError {
    /// Nothing to report: `BR_OK`.
    pub const NONE: ExtendedError = ExtendedError {
        id_set: false,
        command: br_code::OK,
        param: 0,
    };

    /// The observation of a raw `binder_extended_error`.
    pub fn observe(id: u32, command: u32, param: i32) -> ExtendedError {
        ExtendedError {
            id_set: command != br_code::OK && id != 0,
            command,
            param,
        }
    }
}

impl fmt::Display for ExtendedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ee {}", br_code::name(self.command))?;
        if self.param != 0 {
            write!(f, " {}", self.param)?;
        }
        if self.command != br_code::OK && !self.id_set {
            f.write_str(" id 0")?;
        }
        Ok(())
    }
}

/// One `BR_*` return a thread reads.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Br {
    /// `BR_TRANSACTION` of a one-way transaction and its objects.
    Transaction(Vec<Received>),
    /// `BR_TRANSACTION` of a two-way transaction (a call the reader now
    /// owes a reply) and its objects.
    Call(Vec<Received>),
    /// `BR_REPLY` and its objects.
    Reply(Vec<Received>),
    /// `BR_TRANSACTION_COMPLETE`.
    TransactionComplete,
    /// `BR_DEAD_REPLY`.
    DeadReply,
    /// `BR_FAILED_REPLY`.
    FailedReply,
    /// `BR_FROZEN_REPLY`.
    FrozenReply,
    /// `BR_TRANSACTION_PENDING_FROZEN`.
    PendingFrozen,
    /// `BR_ONEWAY_SPAM_SUSPECT`.
    OnewaySpamSuspect,
    /// `BR_ERROR` with its code.
    Error(i32),
    /// `BR_INCREFS` for the node with this pointer.
    IncRefs(u64),
    /// `BR_ACQUIRE`.
    Acquire(u64),
    /// `BR_RELEASE`.
    Release(u64),
    /// `BR_DECREFS`.
    DecRefs(u64),
    /// `BR_DEAD_BINDER` with the death notification's cookie.
    DeadBinder(u64),
    /// `BR_CLEAR_DEATH_NOTIFICATION_DONE` with its cookie.
    ClearDeathDone(u64),
    /// `BR_FROZEN_BINDER`: the freeze notification's cookie and whether
    /// the node's owner is frozen.
    FrozenBinder {
        /// The cookie given with the request.
        cookie: u64,
        /// `is_frozen`.
        frozen: bool,
    },
    /// `BR_CLEAR_FREEZE_NOTIFICATION_DONE` with its cookie.
    ClearFreezeDone(u64),
    /// `BR_SPAWN_LOOPER`: the driver asks for another looper thread.
    SpawnLooper,
}

impl fmt::Display for Br {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let objects = |f: &mut fmt::Formatter<'_>, word: &str, objects: &[Received]| {
            f.write_str(word)?;
            objects.iter().try_for_each(|o| write!(f, " {o}"))
        };
        match self {
            Br::Transaction(o) => objects(f, "transaction", o),
            Br::Call(o) => objects(f, "call", o),
            Br::Reply(o) => objects(f, "reply", o),
            Br::TransactionComplete => f.write_str("transaction-complete"),
            Br::DeadReply => f.write_str("dead-reply"),
            Br::FailedReply => f.write_str("failed-reply"),
            Br::FrozenReply => f.write_str("frozen-reply"),
            Br::PendingFrozen => f.write_str("pending-frozen"),
            Br::OnewaySpamSuspect => f.write_str("oneway-spam-suspect"),
            Br::Error(code) => write!(f, "error {code}"),
            Br::IncRefs(ptr) => write!(f, "increfs {ptr}"),
            Br::Acquire(ptr) => write!(f, "acquire {ptr}"),
            Br::Release(ptr) => write!(f, "release {ptr}"),
            Br::DecRefs(ptr) => write!(f, "decrefs {ptr}"),
            Br::DeadBinder(cookie) => write!(f, "dead-binder {cookie}"),
            Br::ClearDeathDone(cookie) => write!(f, "clear-death-done {cookie}"),
            Br::FrozenBinder { cookie, frozen } => {
                write!(f, "frozen-binder {cookie} {}", u8::from(*frozen))
            }
            Br::ClearFreezeDone(cookie) => write!(f, "clear-freeze-done {cookie}"),
            Br::SpawnLooper => f.write_str("spawn-looper"),
        }
    }
}

/// One return as a process reads it: which of its threads read it, and
/// what.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Read {
    /// The reading thread.
    pub tid: Tid,
    /// The return.
    pub br: Br,
}

/// The threads of process `pid` that drain their work after `step`, in
/// order: every thread the driver knows, but those paused in a window
/// (`busy`) other than the step's own thread. What userspace does between
/// commands, the same for both drivers (`docs/commands.md`).
pub(crate) fn draining_threads(
    threads: &BTreeMap<Tid, usize>,
    pid: Pid,
    step: (Pid, Tid),
    busy: &[(Pid, Tid)],
) -> Vec<(Tid, usize)> {
    threads
        .iter()
        .filter(|&(&tid, _)| !busy.contains(&(pid, tid)) || step == (pid, tid))
        .map(|(&tid, &t)| (tid, t))
        .collect()
}

impl Read {
    /// `br` read by thread 0.
    pub fn main(br: Br) -> Read {
        Read { tid: Tid(0), br }
    }
}

impl fmt::Display for Read {
    /// `br` as it prints, after `tN:` for a thread other than 0.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tid.0 != 0 {
            write!(f, "{}:", self.tid)?;
        }
        write!(f, "{}", self.br)
    }
}

/// A kernel log line, by what it reports. Each driver prints its own text
/// (or nothing) for each; `docs/conformance.md` lists the lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Log {
    /// The context manager asked for a reference to handle 0, its own node.
    ManagerAcquiresZero,
    /// A reference asked for on handle 0 got another handle.
    GotOtherHandle {
        /// The handle asked for.
        wanted: u32,
        /// The handle given.
        got: u32,
    },
    /// A weak-only reference was used where a strong one is needed.
    WeakAsStrong,
    /// A reference-count command named a handle the process does not hold.
    InvalidRef(u32),
    /// A decrement found its count already at 0.
    InvalidDecrement {
        /// The strong count (or the weak one).
        strong: bool,
    },
    /// `BINDER_SET_CONTEXT_MGR` while a manager is set.
    ManagerAlreadySet,
    /// `BINDER_SET_CONTEXT_MGR` from another euid than the first manager's.
    ManagerBadUid,
    /// A transaction to a handle the process does not hold (strongly).
    TransactionToInvalidHandle(u32),
    /// A transaction whose target node could not be found (no manager, or
    /// an invalid handle).
    NoTargetNode,
    /// A transaction to handle 0 from the context manager itself.
    TransactionToOwnManager,
    /// A transaction failed (the driver's summary line).
    TransactionFailed,
    /// A transaction carried a handle the sender does not hold.
    ObjectInvalidHandle(u32),
    /// A death notification command named a handle the process does not
    /// hold.
    DeathInvalidRef {
        /// Request (or clear).
        request: bool,
    },
    /// A death notification is already set on the reference.
    DeathAlreadySet,
    /// A death notification to clear is not set.
    DeathNotActive,
    /// A death notification to clear has another cookie.
    DeathCookieMismatch,
    /// `BC_DEAD_BINDER_DONE` for a cookie not delivered.
    DeadBinderDoneNotFound,
    /// A strong increment of a node with no strong reference left.
    InvalidIncStrongNode,
    /// A node's count went below 0.
    RefcountUnderflow,
    /// `BC_INCREFS_DONE`/`BC_ACQUIRE_DONE` without a pending request.
    IncRefDoneUnexpected,
    /// `BINDER_GET_NODE_INFO_FOR_REF` with a field other than the handle set.
    NodeInfoBadArgs,
    /// The pool offered an id `by_handle` holds (`pr_err!`, `WARN_ON`).
    PoolMismatch,
    /// `BUG()`: the kernel crashed.
    Bug,
    /// A `WARN_ON` fired.
    WarnOn,
    /// Translating a transaction's object failed.
    TranslateFailed,
    /// Copying a transaction's data into the target's buffer failed (the
    /// Rust driver's second line for a failed translation).
    CopyFailed,
    /// A transaction's target process is dead.
    DeadProcess,
    /// Releasing a buffer met an object that no longer resolves.
    BadBufferObject,
    /// A dying process had a transaction not yet delivered to it.
    UndeliveredTransaction,
    /// A dying process had a `BR_TRANSACTION_COMPLETE` not yet read.
    UndeliveredComplete,
    /// A dying process had a return error not yet read.
    UndeliveredError,
    /// A dying process had a death notification's clearing not yet read.
    UndeliveredDeath,
    /// A dying process had a work item of a type its release does not
    /// expect.
    UnexpectedWork,
    /// A non-blocking read found work to do and did none, and would retry
    /// forever.
    ReadLivelock,
    /// The ioctl failed with this errno and the driver logged it: C's
    /// `binder_ioctl` logs every failure but `EINTR`; Rust logs a failed
    /// `BINDER_WRITE_READ` ("Write failure", "Read failure"). A read that
    /// `poll` announced but whose work produced nothing to return fails
    /// with `EAGAIN` in both.
    IoctlFailed(Errno),
    /// The Rust driver could not allocate the target's buffer (its process
    /// is gone): "Failed to allocate buffer".
    BufferAllocFailed,
    /// `BC_REPLY` from a thread with no transaction to answer: "got reply
    /// transaction with no transaction stack".
    ReplyNoStack,
    /// `BC_REPLY` from a thread whose last transaction is not one it
    /// received: "got reply transaction with bad transaction stack".
    ReplyBadStack,
    /// The thread a reply is for has gone: C's "reply target not found".
    ReplyTargetGone,
    /// A reply that could not be built or delivered: Rust's "reply to N
    /// failed".
    ReplyFailed,
    /// A call from a thread whose last transaction is one it sent: "got
    /// new transaction with bad transaction stack".
    CallBadStack,
    /// A call from a thread with a transaction at the head of its work:
    /// C's "new transaction not allowed when there is a transaction on
    /// thread todo".
    CallWithTodo,
    /// A transaction's target process is frozen: C's "frozen process or
    /// thread".
    FrozenProcess,
    /// `BC_REGISTER_LOOPER` or `BC_ENTER_LOOPER` in the wrong state: C's
    /// "ERROR: BC_..._LOOPER called ..." lines.
    LooperMisuse,
    /// A thread that is not a looper reads the process's work: C's
    /// "Thread waiting for process work before calling BC_REGISTER_LOOPER
    /// or BC_ENTER_LOOPER".
    NotALooper,
    /// A freeze notification command named a handle the process does not
    /// hold.
    FreezeInvalidRef {
        /// Request (or clear).
        request: bool,
    },
    /// A freeze notification is already set on the reference.
    FreezeAlreadySet,
    /// Rust's "BC_REQUEST_FREEZE_NOTIFICATION duplicate cookie".
    FreezeDuplicateCookie,
    /// A freeze notification to clear is not set.
    FreezeNotActive,
    /// A freeze notification to clear has another cookie.
    FreezeCookieMismatch,
    /// `BC_FREEZE_NOTIFICATION_DONE` for a cookie not delivered.
    FreezeDoneNotFound,
    /// `BC_ATTEMPT_ACQUIRE` or `BC_ACQUIRE_RESULT`: C's "... not
    /// supported".
    UnsupportedCommand,
    /// A dying process had a freeze notification's clearing not yet read.
    UndeliveredFreeze,
}

impl fmt::Display for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Log::GotOtherHandle { wanted, got } => write!(f, "got-other-handle {wanted} {got}"),
            Log::InvalidRef(h) => write!(f, "invalid-ref {h}"),
            Log::InvalidDecrement { strong } => {
                write!(
                    f,
                    "invalid-decrement {}",
                    if *strong { "strong" } else { "weak" }
                )
            }
            Log::TransactionToInvalidHandle(h) => write!(f, "transaction-to-invalid-handle {h}"),
            Log::IoctlFailed(e) => write!(f, "ioctl-failed {e}"),
            Log::ObjectInvalidHandle(h) => write!(f, "object-invalid-handle {h}"),
            Log::DeathInvalidRef { request } => write!(
                f,
                "death-invalid-ref {}",
                if *request { "request" } else { "clear" }
            ),
            Log::FreezeInvalidRef { request } => write!(
                f,
                "freeze-invalid-ref {}",
                if *request { "request" } else { "clear" }
            ),
            other => f.write_str(other.word()),
        }
    }
}

impl Log {
    /// The first word of its text form.
    pub fn word(&self) -> &'static str {
        match self {
            Log::ManagerAcquiresZero => "manager-acquires-zero",
            Log::GotOtherHandle { .. } => "got-other-handle",
            Log::WeakAsStrong => "weak-as-strong",
            Log::InvalidRef(_) => "invalid-ref",
            Log::InvalidDecrement { .. } => "invalid-decrement",
            Log::ManagerAlreadySet => "manager-already-set",
            Log::ManagerBadUid => "manager-bad-uid",
            Log::TransactionToInvalidHandle(_) => "transaction-to-invalid-handle",
            Log::NoTargetNode => "no-target-node",
            Log::TransactionToOwnManager => "transaction-to-own-manager",
            Log::TransactionFailed => "transaction-failed",
            Log::ObjectInvalidHandle(_) => "object-invalid-handle",
            Log::DeathInvalidRef { .. } => "death-invalid-ref",
            Log::DeathAlreadySet => "death-already-set",
            Log::DeathNotActive => "death-not-active",
            Log::DeathCookieMismatch => "death-cookie-mismatch",
            Log::DeadBinderDoneNotFound => "dead-binder-done-not-found",
            Log::InvalidIncStrongNode => "invalid-inc-strong-node",
            Log::RefcountUnderflow => "refcount-underflow",
            Log::IncRefDoneUnexpected => "inc-ref-done-unexpected",
            Log::NodeInfoBadArgs => "node-info-bad-args",
            Log::PoolMismatch => "pool-mismatch",
            Log::Bug => "bug",
            Log::WarnOn => "warn-on",
            Log::TranslateFailed => "translate-failed",
            Log::CopyFailed => "copy-failed",
            Log::DeadProcess => "dead-process",
            Log::BadBufferObject => "bad-buffer-object",
            Log::UndeliveredTransaction => "undelivered-transaction",
            Log::UndeliveredComplete => "undelivered-complete",
            Log::UndeliveredError => "undelivered-error",
            Log::UndeliveredDeath => "undelivered-death",
            Log::UnexpectedWork => "unexpected-work",
            Log::ReadLivelock => "read-livelock",
            Log::IoctlFailed(_) => "ioctl-failed",
            Log::BufferAllocFailed => "buffer-alloc-failed",
            Log::ReplyNoStack => "reply-no-stack",
            Log::ReplyBadStack => "reply-bad-stack",
            Log::ReplyTargetGone => "reply-target-gone",
            Log::ReplyFailed => "reply-failed",
            Log::CallBadStack => "call-bad-stack",
            Log::CallWithTodo => "call-with-todo",
            Log::FrozenProcess => "frozen-process",
            Log::LooperMisuse => "looper-misuse",
            Log::NotALooper => "not-a-looper",
            Log::FreezeInvalidRef { .. } => "freeze-invalid-ref",
            Log::FreezeAlreadySet => "freeze-already-set",
            Log::FreezeDuplicateCookie => "freeze-duplicate-cookie",
            Log::FreezeNotActive => "freeze-not-active",
            Log::FreezeCookieMismatch => "freeze-cookie-mismatch",
            Log::FreezeDoneNotFound => "freeze-done-not-found",
            Log::UnsupportedCommand => "unsupported-command",
            Log::UndeliveredFreeze => "undelivered-freeze",
        }
    }
}

/// A node, named the same way in every driver: its owner, its pointer,
/// and how many nodes that owner had created with that pointer before it
/// (a node is created again after the last reference to the previous one
/// went away).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeName {
    /// The process that owns (or owned) it.
    pub owner: Pid,
    /// Its pointer.
    pub ptr: u64,
    /// 0 for the first node with this owner and pointer, then 1, ...
    pub serial: u32,
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.owner, self.ptr)?;
        if self.serial > 0 {
            write!(f, "#{}", self.serial)?;
        }
        Ok(())
    }
}

/// A reference a process holds, by handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RefState {
    /// The node it refers to.
    pub node: NodeName,
    /// Its strong count.
    pub strong: u32,
    /// Its weak count.
    pub weak: u32,
    /// The cookie of its death notification, if one is set.
    pub death: Option<u64>,
}

/// A node a process owns, by pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeState {
    /// Its serial (see [`NodeName`]).
    pub serial: u32,
    /// What `BINDER_GET_NODE_INFO_FOR_REF` would report as `strong_count`.
    pub strong: u32,
    /// ... and as `weak_count`.
    pub weak: u32,
    /// Whether the owner holds a strong reference on it (`has_strong_ref`
    /// of `BINDER_GET_NODE_DEBUG_INFO`).
    pub has_strong: bool,
    /// Whether it holds a weak one.
    pub has_weak: bool,
}

/// What one process holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProcState {
    /// Whether it still has its Binder file open.
    pub alive: bool,
    /// Its references, by handle.
    pub refs: BTreeMap<u32, RefState>,
    /// Its nodes, by pointer.
    pub nodes: BTreeMap<u64, NodeState>,
    /// How many transaction buffers it has received and not freed.
    pub buffers: usize,
    /// Whether it is frozen (`BINDER_FREEZE`). Neither driver's debug text
    /// says so: the models are compared on it with their oracles and with
    /// each other, not with the real drivers.
    pub frozen: bool,
}

/// Every process's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// By process.
    pub procs: Vec<ProcState>,
}

/// What one command made observable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Observed {
    /// The ioctl's result (the process's last one, for a command that
    /// makes several).
    pub ret: Option<Ret>,
    /// What the command's thread's `BINDER_GET_EXTENDED_ERROR` reported
    /// right after the command (before the drain), when the thread is
    /// still in the driver (`docs/commands.md`).
    pub ee: Option<ExtendedError>,
    /// What each process read afterwards, by process (as a sorted list:
    /// the order in which a driver queues its work is not compared).
    pub reads: Vec<Vec<Read>>,
    /// The kernel log lines, sorted.
    pub log: Vec<Log>,
}

impl Observed {
    /// An observation for `procs` processes with nothing in it yet.
    pub fn new(procs: usize) -> Self {
        Observed {
            ret: None,
            ee: None,
            reads: vec![Vec::new(); procs],
            log: Vec::new(),
        }
    }

    /// Sorts the reads and the log lines, so that two drivers that queue
    /// the same work in another order compare equal.
    pub fn normalise(&mut self) {
        self.reads.iter_mut().for_each(|r| r.sort());
        self.log.sort();
    }
}
