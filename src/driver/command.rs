//! The command language: what userspace asks of a Binder driver.
//!
//! A [`Program`] is a handful of processes that opened the same Binder
//! device (one context), each with up to [`MAX_THREADS`] threads, and a
//! list of [`Step`]s, each one [`Command`] issued by one thread. Its text
//! form is one step per line:
//!
//! ```text
//! procs 3
//! p1 set-manager
//! p0 acquire 0
//! p0.t1 call 0 node 1 weak-handle 2
//! p1 reply handle 1
//! p1 free
//! p1 exit
//! ```
//!
//! Every command is one row of [`VOCABULARY`]: its word, its arguments, the
//! ioctl or `BC_` command it becomes, and a line of documentation. Parsing,
//! printing, the fuzzer's decoding and encoding (in the harness), the
//! dictionary and the command table of `docs/commands.md` all read that
//! table; the drivers, their naive models and the VM executor each add the
//! command's rule once. `docs/commands.md` says what userspace does between
//! commands (each thread reads everything the driver has for it and answers
//! as libbinder does) and what is observed.

use core::fmt;
use core::str::FromStr;

/// The most processes a program has.
pub const MAX_PROCS: usize = 4;
/// The most threads a process has: `t0` (the one that opened the device)
/// to `t2`.
pub const MAX_THREADS: usize = 3;
/// The most objects one transaction carries.
pub const MAX_OBJECTS: usize = 4;
/// Node pointers a process sends are `0..NODE_PTRS` (the cookie is the
/// pointer). The context manager's node is pointer 0, as
/// `BINDER_SET_CONTEXT_MGR` creates it.
pub const NODE_PTRS: u64 = 1 << 16;
/// The most nodes one [`Object::Nodes`] sends.
pub const MAX_NODE_RUN: u32 = 256;
/// The longest `freeze` timeout, in milliseconds (the executor's VM
/// sleeps it out).
pub const MAX_FREEZE_TIMEOUT_MS: u32 = 100;

/// A process of a program: `p0` to `p3`, in the order they opened the
/// device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(pub u8);

impl Pid {
    /// Its index in the program's processes.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}

impl FromStr for Pid {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = s
            .strip_prefix('p')
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|&n| usize::from(n) < MAX_PROCS)
            .ok_or_else(|| format!("expected a process p0..p{}, got {s:?}", MAX_PROCS - 1))?;
        Ok(Pid(n))
    }
}

/// A thread of a process: `t0` (the one that opened the device and
/// entered the looper) to `t2`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid(pub u8);

impl Tid {
    /// Its index among its process's threads.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}

impl FromStr for Tid {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = s
            .strip_prefix('t')
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|&n| usize::from(n) < MAX_THREADS)
            .ok_or_else(|| format!("expected a thread t0..t{}, got {s:?}", MAX_THREADS - 1))?;
        Ok(Tid(n))
    }
}

/// The four reference-count commands of `BINDER_WRITE_READ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefCmd {
    /// `BC_INCREFS`: one more weak reference.
    IncRefs,
    /// `BC_ACQUIRE`: one more strong reference.
    Acquire,
    /// `BC_RELEASE`: one strong reference less.
    Release,
    /// `BC_DECREFS`: one weak reference less.
    DecRefs,
}

impl RefCmd {
    /// Every command, in `BC_*` order.
    pub const ALL: [RefCmd; 4] = [
        RefCmd::IncRefs,
        RefCmd::Acquire,
        RefCmd::Release,
        RefCmd::DecRefs,
    ];

    /// Whether it counts strong references.
    pub fn strong(self) -> bool {
        matches!(self, RefCmd::Acquire | RefCmd::Release)
    }

    /// Whether it adds a reference.
    pub fn increment(self) -> bool {
        matches!(self, RefCmd::IncRefs | RefCmd::Acquire)
    }

    /// Its word in traces: `increfs`, `acquire`, `release`, `decrefs`.
    pub fn word(self) -> &'static str {
        match self {
            RefCmd::IncRefs => "increfs",
            RefCmd::Acquire => "acquire",
            RefCmd::Release => "release",
            RefCmd::DecRefs => "decrefs",
        }
    }
}

/// The looper commands of `BINDER_WRITE_READ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LooperCmd {
    /// `BC_REGISTER_LOOPER`: a thread the driver asked for
    /// (`BR_SPAWN_LOOPER`) joins the pool.
    Register,
    /// `BC_ENTER_LOOPER`: a thread of the application's own joins the
    /// pool.
    Enter,
    /// `BC_EXIT_LOOPER`: the thread leaves the pool.
    Exit,
}

/// Commands both drivers refuse: written so that the campaign checks that
/// they do, the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refused {
    /// `BINDER_SET_IDLE_TIMEOUT`.
    IdleTimeout,
    /// `BINDER_SET_IDLE_PRIORITY`.
    IdlePriority,
    /// `BC_ATTEMPT_ACQUIRE` on a handle.
    AttemptAcquire,
    /// `BC_ACQUIRE_RESULT`.
    AcquireResult,
}

/// The flags of a transaction besides `TF_ONE_WAY` (which the command
/// says): written `+accept-fds`, `+clear-buf`, `+update` after its objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnFlags(pub u32);

impl TxnFlags {
    /// `TF_ACCEPT_FDS`: the reply may carry file descriptors.
    pub const ACCEPT_FDS: u32 = 0x10;
    /// `TF_CLEAR_BUF`: the buffer is cleared when it is freed.
    pub const CLEAR_BUF: u32 = 0x20;
    /// `TF_UPDATE_TXN`: a one-way transaction to a frozen process replaces
    /// an outdated one still queued.
    pub const UPDATE_TXN: u32 = 0x40;
    /// The flags and their words.
    pub const WORDS: [(u32, &'static str); 3] = [
        (Self::ACCEPT_FDS, "+accept-fds"),
        (Self::CLEAR_BUF, "+clear-buf"),
        (Self::UPDATE_TXN, "+update"),
    ];

    /// Whether `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

impl fmt::Display for TxnFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (flag, word) in Self::WORDS {
            if self.has(flag) {
                if !first {
                    f.write_str(" ")?;
                }
                f.write_str(word)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// A `flat_binder_object`'s `flags` for a node (`FLAT_BINDER_FLAG_*`):
/// written after the node as `accepts-fds` and `prio=N`.
/// `FLAT_BINDER_FLAG_TXN_SECURITY_CTX` is left out: what a transaction to
/// such a node gets depends on the kernel's security modules, not on the
/// driver (`docs/commands.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeFlags(pub u32);

impl NodeFlags {
    /// `FLAT_BINDER_FLAG_PRIORITY_MASK`.
    pub const PRIORITY_MASK: u32 = 0xff;
    /// `FLAT_BINDER_FLAG_ACCEPTS_FDS`.
    pub const ACCEPTS_FDS: u32 = 0x100;
    fn parse_word(word: &str) -> Option<u32> {
        match word {
            "accepts-fds" => Some(Self::ACCEPTS_FDS),
            _ => word
                .strip_prefix("prio=")?
                .parse::<u8>()
                .ok()
                .map(u32::from),
        }
    }
}

impl fmt::Display for NodeFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = Vec::new();
        if self.0 & Self::ACCEPTS_FDS != 0 {
            words.push("accepts-fds".to_string());
        }
        if self.0 & Self::PRIORITY_MASK != 0 {
            words.push(format!("prio={}", self.0 & Self::PRIORITY_MASK));
        }
        f.write_str(&words.join(" "))
    }
}

/// An object a transaction carries (a `flat_binder_object`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Object {
    /// `BINDER_TYPE_BINDER` (`strong`) or `BINDER_TYPE_WEAK_BINDER`: one of
    /// the sender's own nodes, by pointer (the cookie is the pointer too).
    Node {
        /// The node's pointer, `0..NODE_PTRS`.
        ptr: u64,
        /// Strong or weak.
        strong: bool,
    },
    /// `BINDER_TYPE_HANDLE` (`strong`) or `BINDER_TYPE_WEAK_HANDLE`: a
    /// handle of the sender's.
    Handle {
        /// The sender's handle.
        handle: u32,
        /// Strong or weak.
        strong: bool,
    },
    /// `count` `BINDER_TYPE_BINDER` objects, the sender's nodes with
    /// pointers `first`, `first + 1`, ...: a short way to write the many
    /// references it takes to fill a handle table past a resize.
    Nodes {
        /// The first pointer.
        first: u64,
        /// How many, at most [`MAX_NODE_RUN`].
        count: u32,
    },
}

impl Object {
    /// The single objects it stands for (a [`Object::Nodes`] run expanded).
    pub fn expand(&self) -> impl Iterator<Item = Object> {
        let (single, run) = match *self {
            Object::Nodes { first, count } => (None, first..first + u64::from(count)),
            single => (Some(single), 0..0),
        };
        single
            .into_iter()
            .chain(run.map(|ptr| Object::Node { ptr, strong: true }))
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Object::Node { ptr, strong } => {
                write!(f, "{}node {ptr}", if strong { "" } else { "weak-" })
            }
            Object::Handle { handle, strong } => {
                write!(f, "{}handle {handle}", if strong { "" } else { "weak-" })
            }
            Object::Nodes { first, count } => write!(f, "nodes {first} {count}"),
        }
    }
}

/// What a transaction carries: its objects and its flags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Payload {
    /// The objects, at most [`MAX_OBJECTS`].
    pub objects: Vec<Object>,
    /// The flags besides `TF_ONE_WAY`.
    pub flags: TxnFlags,
}

/// One command of one thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `BINDER_SET_CONTEXT_MGR`: become the context manager (a node with
    /// pointer 0).
    SetManager,
    /// `BINDER_SET_CONTEXT_MGR_EXT`: become the context manager with the
    /// node a `flat_binder_object` describes.
    SetManagerExt {
        /// `binder`: the node's pointer.
        ptr: u64,
        /// `cookie`.
        cookie: u64,
        /// `flags`.
        flags: NodeFlags,
    },
    /// `BC_INCREFS`, `BC_ACQUIRE`, `BC_RELEASE` or `BC_DECREFS` on a handle,
    /// 0 included.
    Ref(RefCmd, u32),
    /// `BC_TRANSACTION` with `TF_ONE_WAY` to a handle (0: the context
    /// manager).
    Send {
        /// The target handle.
        to: u32,
        /// What it carries.
        payload: Payload,
    },
    /// `BC_TRANSACTION` without `TF_ONE_WAY`: a call, answered by the
    /// receiving thread's `reply`.
    Call {
        /// The target handle.
        to: u32,
        /// What it carries.
        payload: Payload,
    },
    /// `BC_REPLY`: the answer to the call the thread received last.
    Reply(Payload),
    /// `BC_FREE_BUFFER` on the oldest transaction or reply buffer the
    /// process has received and not freed; nothing when there is none.
    Free,
    /// `BC_REQUEST_DEATH_NOTIFICATION` on a handle.
    RequestDeath {
        /// The handle.
        handle: u32,
        /// The cookie the notification carries.
        cookie: u64,
    },
    /// `BC_CLEAR_DEATH_NOTIFICATION` on a handle.
    ClearDeath {
        /// The handle.
        handle: u32,
        /// The cookie given when it was requested.
        cookie: u64,
    },
    /// `BC_REQUEST_FREEZE_NOTIFICATION` on a handle.
    RequestFreeze {
        /// The handle.
        handle: u32,
        /// The cookie the notifications carry.
        cookie: u64,
    },
    /// `BC_CLEAR_FREEZE_NOTIFICATION` on a handle.
    ClearFreeze {
        /// The handle.
        handle: u32,
        /// The cookie given when it was requested.
        cookie: u64,
    },
    /// `BINDER_GET_NODE_INFO_FOR_REF` on a handle.
    NodeInfo(u32),
    /// `BINDER_GET_NODE_DEBUG_INFO`: the caller's first node with a
    /// pointer above this one.
    NodeDebug(u64),
    /// `BINDER_VERSION`.
    Version,
    /// `BINDER_GET_EXTENDED_ERROR`.
    ExtendedError,
    /// `BC_REGISTER_LOOPER`, `BC_ENTER_LOOPER`, `BC_EXIT_LOOPER`.
    Looper(LooperCmd),
    /// `BINDER_THREAD_EXIT`: the driver forgets the thread; its next
    /// command brings it back as a new one.
    ThreadExit,
    /// `BINDER_SET_MAX_THREADS`.
    MaxThreads(u32),
    /// `BINDER_FREEZE` with `enable = 1` on a process of the program.
    Freeze {
        /// The process frozen.
        target: Pid,
        /// `timeout_ms`: how long to wait for its transactions to end.
        timeout_ms: u32,
    },
    /// `BINDER_FREEZE` with `enable = 0`.
    Thaw(Pid),
    /// `BINDER_GET_FROZEN_INFO` on a process of the program.
    FrozenInfo(Pid),
    /// `BINDER_ENABLE_ONEWAY_SPAM_DETECTION`.
    OnewaySpam(bool),
    /// An ioctl or `BC_` command both drivers refuse.
    Refused(Refused),
    /// The process closes its Binder file and exits: the driver releases
    /// everything it held. Its later commands do nothing.
    Exit,
}

/// What an argument of a command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A handle, any `u32`.
    Handle,
    /// A cookie, any `u64`.
    Cookie,
    /// A node pointer, below [`NODE_PTRS`].
    Ptr,
    /// A count, any `u32`.
    Count,
    /// A freeze timeout, at most [`MAX_FREEZE_TIMEOUT_MS`].
    Millis,
    /// A process of the program.
    Proc,
    /// `on` or `off`.
    Switch,
    /// A node's flags, as words (none, or `accepts-fds`, `prio=N`): last.
    NodeFlags,
    /// Objects, then transaction flags: last.
    Payload,
}

impl Arg {
    /// How the argument is written in the command table.
    pub fn placeholder(self) -> &'static str {
        match self {
            Arg::Handle => "H",
            Arg::Cookie => "C",
            Arg::Ptr => "K",
            Arg::Count => "N",
            Arg::Millis => "MS",
            Arg::Proc => "pN",
            Arg::Switch => "on|off",
            Arg::NodeFlags => "[FLAG...]",
            Arg::Payload => "[OBJ...] [+FLAG...]",
        }
    }
}

/// The value of one argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// [`Arg::Handle`], [`Arg::Count`], [`Arg::Millis`].
    U32(u32),
    /// [`Arg::Cookie`], [`Arg::Ptr`].
    U64(u64),
    /// [`Arg::Proc`].
    Proc(Pid),
    /// [`Arg::Switch`].
    Switch(bool),
    /// [`Arg::NodeFlags`].
    NodeFlags(NodeFlags),
    /// [`Arg::Payload`].
    Payload(Payload),
}

impl Value {
    fn u32(&self) -> u32 {
        match self {
            Value::U32(v) => *v,
            other => unreachable!("{other:?} is not a u32"),
        }
    }
    fn u64(&self) -> u64 {
        match self {
            Value::U64(v) => *v,
            other => unreachable!("{other:?} is not a u64"),
        }
    }
    fn pid(&self) -> Pid {
        match self {
            Value::Proc(p) => *p,
            other => unreachable!("{other:?} is not a process"),
        }
    }
    fn payload(&self) -> Payload {
        match self {
            Value::Payload(p) => p.clone(),
            other => unreachable!("{other:?} is not a payload"),
        }
    }
}

/// Where a command goes in the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uapi {
    /// An ioctl of its own.
    Ioctl(&'static str),
    /// A `BC_` command written with `BINDER_WRITE_READ`.
    Bc(&'static str),
    /// No ioctl: the process's `munmap()` and `close()`.
    Close,
}

impl fmt::Display for Uapi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uapi::Ioctl(name) => write!(f, "`{name}`"),
            Uapi::Bc(name) => write!(f, "`BINDER_WRITE_READ` writing `{name}`"),
            Uapi::Close => f.write_str("`munmap()`, `close()`"),
        }
    }
}

/// One command of the language: everything about it that is not a rule
/// of a driver.
pub struct Row {
    /// Its word in traces.
    pub word: &'static str,
    /// The kind of operation it is in failure signatures and the state
    /// feedback: the handle table's operation names where a command does
    /// the same (`Increment`, `Decrement`, `Lookup`, `Kill`), one name
    /// for several rows that do one thing.
    pub op: &'static str,
    /// Its arguments, in order.
    pub args: &'static [Arg],
    /// The ioctl or `BC_` command it is.
    pub uapi: Uapi,
    /// What it does, for the command table of `docs/commands.md`.
    pub about: &'static str,
    /// How many of the decoder's 256 command slots it takes: how often a
    /// fuzzer's random byte picks it.
    pub weight: u8,
    /// The command with these argument values (of the kinds of `args`).
    pub make: fn(&[Value]) -> Command,
}

/// Every command of the language: the command table of
/// `docs/commands.md`, in its order.
pub static VOCABULARY: &[Row] = &[
    Row {
        word: "set-manager",
        op: "SetManager",
        args: &[],
        uapi: Uapi::Ioctl("BINDER_SET_CONTEXT_MGR"),
        about: "become the context manager with the node of pointer 0",
        weight: 18,
        make: |_| Command::SetManager,
    },
    Row {
        word: "set-manager-ext",
        op: "SetManager",
        args: &[Arg::Ptr, Arg::Cookie, Arg::NodeFlags],
        uapi: Uapi::Ioctl("BINDER_SET_CONTEXT_MGR_EXT"),
        about: "become the context manager with node `K`, cookie `C` and the flags given (a `flat_binder_object`)",
        weight: 6,
        make: |v| Command::SetManagerExt {
            ptr: v[0].u64(),
            cookie: v[1].u64(),
            flags: match &v[2] {
                Value::NodeFlags(f) => *f,
                other => unreachable!("{other:?} is not node flags"),
            },
        },
    },
    Row {
        word: "increfs",
        op: "Increment",
        args: &[Arg::Handle],
        uapi: Uapi::Bc("BC_INCREFS"),
        about: "one more weak reference on handle `H` (any `u32`, 0 included)",
        weight: 14,
        make: |v| Command::Ref(RefCmd::IncRefs, v[0].u32()),
    },
    Row {
        word: "acquire",
        op: "Increment",
        args: &[Arg::Handle],
        uapi: Uapi::Bc("BC_ACQUIRE"),
        about: "one more strong reference on handle `H`",
        weight: 20,
        make: |v| Command::Ref(RefCmd::Acquire, v[0].u32()),
    },
    Row {
        word: "release",
        op: "Decrement",
        args: &[Arg::Handle],
        uapi: Uapi::Bc("BC_RELEASE"),
        about: "one strong reference less on handle `H`",
        weight: 16,
        make: |v| Command::Ref(RefCmd::Release, v[0].u32()),
    },
    Row {
        word: "decrefs",
        op: "Decrement",
        args: &[Arg::Handle],
        uapi: Uapi::Bc("BC_DECREFS"),
        about: "one weak reference less on handle `H`",
        weight: 10,
        make: |v| Command::Ref(RefCmd::DecRefs, v[0].u32()),
    },
    Row {
        word: "send",
        op: "Transaction",
        args: &[Arg::Handle, Arg::Payload],
        uapi: Uapi::Bc("BC_TRANSACTION"),
        about: "a one-way transaction (`TF_ONE_WAY`) to handle `H`, code 0, carrying up to 4 objects",
        weight: 30,
        make: |v| Command::Send {
            to: v[0].u32(),
            payload: v[1].payload(),
        },
    },
    Row {
        word: "call",
        op: "Call",
        args: &[Arg::Handle, Arg::Payload],
        uapi: Uapi::Bc("BC_TRANSACTION"),
        about: "a two-way transaction to handle `H`: the receiving thread owes it a `reply`",
        weight: 26,
        make: |v| Command::Call {
            to: v[0].u32(),
            payload: v[1].payload(),
        },
    },
    Row {
        word: "reply",
        op: "Reply",
        args: &[Arg::Payload],
        uapi: Uapi::Bc("BC_REPLY"),
        about: "the answer to the last call the thread received, carrying up to 4 objects",
        weight: 20,
        make: |v| Command::Reply(v[0].payload()),
    },
    Row {
        word: "free",
        op: "FreeBuffer",
        args: &[],
        uapi: Uapi::Bc("BC_FREE_BUFFER"),
        about: "free the oldest transaction or reply buffer the process received and has not freed (no ioctl when there is none)",
        weight: 12,
        make: |_| Command::Free,
    },
    Row {
        word: "death",
        op: "Death",
        args: &[Arg::Handle, Arg::Cookie],
        uapi: Uapi::Bc("BC_REQUEST_DEATH_NOTIFICATION"),
        about: "ask to be told with cookie `C` when handle `H`'s node dies",
        weight: 8,
        make: |v| Command::RequestDeath {
            handle: v[0].u32(),
            cookie: v[1].u64(),
        },
    },
    Row {
        word: "clear-death",
        op: "Death",
        args: &[Arg::Handle, Arg::Cookie],
        uapi: Uapi::Bc("BC_CLEAR_DEATH_NOTIFICATION"),
        about: "withdraw the death notification of handle `H`, given with cookie `C`",
        weight: 6,
        make: |v| Command::ClearDeath {
            handle: v[0].u32(),
            cookie: v[1].u64(),
        },
    },
    Row {
        word: "freeze-notify",
        op: "FreezeNotify",
        args: &[Arg::Handle, Arg::Cookie],
        uapi: Uapi::Bc("BC_REQUEST_FREEZE_NOTIFICATION"),
        about: "ask to be told with cookie `C` whenever handle `H`'s owner is frozen or thawed",
        weight: 6,
        make: |v| Command::RequestFreeze {
            handle: v[0].u32(),
            cookie: v[1].u64(),
        },
    },
    Row {
        word: "clear-freeze-notify",
        op: "FreezeNotify",
        args: &[Arg::Handle, Arg::Cookie],
        uapi: Uapi::Bc("BC_CLEAR_FREEZE_NOTIFICATION"),
        about: "withdraw the freeze notification of handle `H`, given with cookie `C`",
        weight: 4,
        make: |v| Command::ClearFreeze {
            handle: v[0].u32(),
            cookie: v[1].u64(),
        },
    },
    Row {
        word: "node-info",
        op: "Lookup",
        args: &[Arg::Handle],
        uapi: Uapi::Ioctl("BINDER_GET_NODE_INFO_FOR_REF"),
        about: "the strong and weak counts of handle `H`'s node, every other field 0",
        weight: 6,
        make: |v| Command::NodeInfo(v[0].u32()),
    },
    Row {
        word: "node-debug",
        op: "NodeDebug",
        args: &[Arg::Ptr],
        uapi: Uapi::Ioctl("BINDER_GET_NODE_DEBUG_INFO"),
        about: "the caller's first node with a pointer above `K`: its pointer, cookie and whether its owner holds a strong and a weak reference",
        weight: 4,
        make: |v| Command::NodeDebug(v[0].u64()),
    },
    Row {
        word: "get-version",
        op: "Version",
        args: &[],
        uapi: Uapi::Ioctl("BINDER_VERSION"),
        about: "the protocol version",
        weight: 1,
        make: |_| Command::Version,
    },
    Row {
        word: "extended-error",
        op: "ExtendedError",
        args: &[],
        uapi: Uapi::Ioctl("BINDER_GET_EXTENDED_ERROR"),
        about: "the thread's extended error (then cleared)",
        weight: 3,
        make: |_| Command::ExtendedError,
    },
    Row {
        word: "register-looper",
        op: "Looper",
        args: &[],
        uapi: Uapi::Bc("BC_REGISTER_LOOPER"),
        about: "the thread joins the pool as one the driver asked for",
        weight: 5,
        make: |_| Command::Looper(LooperCmd::Register),
    },
    Row {
        word: "enter-looper",
        op: "Looper",
        args: &[],
        uapi: Uapi::Bc("BC_ENTER_LOOPER"),
        about: "the thread joins the pool on its own",
        weight: 5,
        make: |_| Command::Looper(LooperCmd::Enter),
    },
    Row {
        word: "exit-looper",
        op: "Looper",
        args: &[],
        uapi: Uapi::Bc("BC_EXIT_LOOPER"),
        about: "the thread leaves the pool",
        weight: 3,
        make: |_| Command::Looper(LooperCmd::Exit),
    },
    Row {
        word: "thread-exit",
        op: "ThreadExit",
        args: &[],
        uapi: Uapi::Ioctl("BINDER_THREAD_EXIT"),
        about: "the driver releases the thread; its next command makes a new one",
        weight: 4,
        make: |_| Command::ThreadExit,
    },
    Row {
        word: "max-threads",
        op: "MaxThreads",
        args: &[Arg::Count],
        uapi: Uapi::Ioctl("BINDER_SET_MAX_THREADS"),
        about: "how many threads the driver may ask for (`BR_SPAWN_LOOPER`)",
        weight: 4,
        make: |v| Command::MaxThreads(v[0].u32()),
    },
    Row {
        word: "freeze",
        op: "Freeze",
        args: &[Arg::Proc, Arg::Millis],
        uapi: Uapi::Ioctl("BINDER_FREEZE"),
        about: "freeze process `pN` (`enable = 1`), waiting up to `MS` milliseconds for its transactions",
        weight: 6,
        make: |v| Command::Freeze {
            target: v[0].pid(),
            timeout_ms: v[1].u32(),
        },
    },
    Row {
        word: "thaw",
        op: "Freeze",
        args: &[Arg::Proc],
        uapi: Uapi::Ioctl("BINDER_FREEZE"),
        about: "thaw process `pN` (`enable = 0`)",
        weight: 4,
        make: |v| Command::Thaw(v[0].pid()),
    },
    Row {
        word: "frozen-info",
        op: "FrozenInfo",
        args: &[Arg::Proc],
        uapi: Uapi::Ioctl("BINDER_GET_FROZEN_INFO"),
        about: "whether process `pN` received transactions while frozen, and has any pending",
        weight: 3,
        make: |v| Command::FrozenInfo(v[0].pid()),
    },
    Row {
        word: "oneway-spam",
        op: "OnewaySpam",
        args: &[Arg::Switch],
        uapi: Uapi::Ioctl("BINDER_ENABLE_ONEWAY_SPAM_DETECTION"),
        about: "turn the process's one-way spam detection on or off",
        weight: 2,
        make: |v| Command::OnewaySpam(matches!(v[0], Value::Switch(true))),
    },
    Row {
        word: "idle-timeout",
        op: "Refused",
        args: &[],
        uapi: Uapi::Ioctl("BINDER_SET_IDLE_TIMEOUT"),
        about: "refused by both drivers (`EINVAL`)",
        weight: 1,
        make: |_| Command::Refused(Refused::IdleTimeout),
    },
    Row {
        word: "idle-priority",
        op: "Refused",
        args: &[],
        uapi: Uapi::Ioctl("BINDER_SET_IDLE_PRIORITY"),
        about: "refused by both drivers (`EINVAL`)",
        weight: 1,
        make: |_| Command::Refused(Refused::IdlePriority),
    },
    Row {
        word: "attempt-acquire",
        op: "Refused",
        args: &[],
        uapi: Uapi::Bc("BC_ATTEMPT_ACQUIRE"),
        about: "refused by both drivers (`EINVAL`)",
        weight: 1,
        make: |_| Command::Refused(Refused::AttemptAcquire),
    },
    Row {
        word: "acquire-result",
        op: "Refused",
        args: &[],
        uapi: Uapi::Bc("BC_ACQUIRE_RESULT"),
        about: "refused by both drivers (`EINVAL`)",
        weight: 1,
        make: |_| Command::Refused(Refused::AcquireResult),
    },
    Row {
        word: "exit",
        op: "Kill",
        args: &[],
        uapi: Uapi::Close,
        about: "the process unmaps and closes the device (the mapping holds a reference to the file: `close()` alone releases nothing) and makes no ioctl after it",
        weight: 6,
        make: |_| Command::Exit,
    },
];

impl Command {
    /// Its word and argument values, in [`VOCABULARY`]'s terms.
    pub fn values(&self) -> (&'static str, Vec<Value>) {
        let pair = |handle: u32, cookie: u64| vec![Value::U32(handle), Value::U64(cookie)];
        match self {
            Command::SetManager => ("set-manager", vec![]),
            Command::SetManagerExt { ptr, cookie, flags } => (
                "set-manager-ext",
                vec![
                    Value::U64(*ptr),
                    Value::U64(*cookie),
                    Value::NodeFlags(*flags),
                ],
            ),
            Command::Ref(cmd, h) => (cmd.word(), vec![Value::U32(*h)]),
            Command::Send { to, payload } => (
                "send",
                vec![Value::U32(*to), Value::Payload(payload.clone())],
            ),
            Command::Call { to, payload } => (
                "call",
                vec![Value::U32(*to), Value::Payload(payload.clone())],
            ),
            Command::Reply(payload) => ("reply", vec![Value::Payload(payload.clone())]),
            Command::Free => ("free", vec![]),
            Command::RequestDeath { handle, cookie } => ("death", pair(*handle, *cookie)),
            Command::ClearDeath { handle, cookie } => ("clear-death", pair(*handle, *cookie)),
            Command::RequestFreeze { handle, cookie } => ("freeze-notify", pair(*handle, *cookie)),
            Command::ClearFreeze { handle, cookie } => {
                ("clear-freeze-notify", pair(*handle, *cookie))
            }
            Command::NodeInfo(h) => ("node-info", vec![Value::U32(*h)]),
            Command::NodeDebug(ptr) => ("node-debug", vec![Value::U64(*ptr)]),
            Command::Version => ("get-version", vec![]),
            Command::ExtendedError => ("extended-error", vec![]),
            Command::Looper(LooperCmd::Register) => ("register-looper", vec![]),
            Command::Looper(LooperCmd::Enter) => ("enter-looper", vec![]),
            Command::Looper(LooperCmd::Exit) => ("exit-looper", vec![]),
            Command::ThreadExit => ("thread-exit", vec![]),
            Command::MaxThreads(n) => ("max-threads", vec![Value::U32(*n)]),
            Command::Freeze { target, timeout_ms } => (
                "freeze",
                vec![Value::Proc(*target), Value::U32(*timeout_ms)],
            ),
            Command::Thaw(target) => ("thaw", vec![Value::Proc(*target)]),
            Command::FrozenInfo(target) => ("frozen-info", vec![Value::Proc(*target)]),
            Command::OnewaySpam(on) => ("oneway-spam", vec![Value::Switch(*on)]),
            Command::Refused(Refused::IdleTimeout) => ("idle-timeout", vec![]),
            Command::Refused(Refused::IdlePriority) => ("idle-priority", vec![]),
            Command::Refused(Refused::AttemptAcquire) => ("attempt-acquire", vec![]),
            Command::Refused(Refused::AcquireResult) => ("acquire-result", vec![]),
            Command::Exit => ("exit", vec![]),
        }
    }

    /// Its row of [`VOCABULARY`].
    pub fn row(&self) -> &'static Row {
        row(self.values().0).expect("every command has a row")
    }

    /// The objects it carries, if it is a transaction.
    pub fn payload(&self) -> Option<&Payload> {
        match self {
            Command::Send { payload, .. } | Command::Call { payload, .. } => Some(payload),
            Command::Reply(payload) => Some(payload),
            _ => None,
        }
    }

    /// Its objects, if it is a transaction (none otherwise).
    pub fn objects(&self) -> &[Object] {
        self.payload().map_or(&[], |p| &p.objects)
    }

    /// Parses the words after the thread (`acquire 0`, `send 0 node 1`).
    pub fn parse_words(words: &[&str]) -> Result<Command, String> {
        let (&head, rest) = words.split_first().ok_or("missing command")?;
        let row = row(head).ok_or_else(|| {
            let known: Vec<&str> = VOCABULARY.iter().map(|r| r.word).collect();
            format!("unknown command {head:?} (known: {})", known.join(", "))
        })?;
        let mut rest = rest;
        let mut values = Vec::new();
        for &arg in row.args {
            let (value, left) = parse_arg(arg, rest, head)?;
            values.push(value);
            rest = left;
        }
        if !rest.is_empty() {
            return Err(format!(
                "`{head}` takes {} argument(s), got {}",
                row.args.len(),
                words.len() - 1
            ));
        }
        Ok((row.make)(&values))
    }
}

/// The command table of `docs/commands.md`, in Markdown: a line per row
/// of [`VOCABULARY`].
pub fn markdown_table() -> String {
    let mut out = String::from("| command | ioctl | what it does |\n| --- | --- | --- |\n");
    for r in VOCABULARY {
        let mut syntax = r.word.to_string();
        for arg in r.args {
            syntax.push(' ');
            syntax.push_str(arg.placeholder());
        }
        out.push_str(&format!("| `{syntax}` | {} | {} |\n", r.uapi, r.about));
    }
    out
}

/// `text` with the part between the vocabulary markers of
/// `docs/commands.md` replaced by [`markdown_table`]; `None` when the
/// markers are missing.
pub fn with_table(text: &str) -> Option<String> {
    const BEGIN: &str = "<!-- vocabulary:";
    const END: &str = "<!-- /vocabulary -->";
    let begin = text.find(BEGIN)?;
    let after_begin = begin + text[begin..].find('\n')? + 1;
    let end = text[after_begin..].find(END)? + after_begin;
    Some(format!(
        "{}{}{}",
        &text[..after_begin],
        markdown_table(),
        &text[end..]
    ))
}

/// The row of the command written `word`.
pub fn row(word: &str) -> Option<&'static Row> {
    VOCABULARY.iter().find(|r| r.word == word)
}

fn number<T: FromStr>(word: Option<&&str>, what: &str) -> Result<T, String> {
    let word = word.ok_or_else(|| format!("missing {what}"))?;
    word.parse()
        .map_err(|_| format!("expected {what}, got {word:?}"))
}

/// Parses one argument at the start of `words`; returns it and the words
/// after it.
fn parse_arg<'w, 's>(
    arg: Arg,
    words: &'w [&'s str],
    head: &str,
) -> Result<(Value, &'w [&'s str]), String> {
    let first = words.first();
    let one = |v: Value| Ok((v, &words[1.min(words.len())..]));
    match arg {
        Arg::Handle => one(Value::U32(number(first, "a handle")?)),
        Arg::Cookie => one(Value::U64(number(first, "a cookie")?)),
        Arg::Count => one(Value::U32(number(first, "a count")?)),
        Arg::Ptr => {
            let ptr: u64 = number(first, "a node pointer")?;
            if ptr >= NODE_PTRS {
                return Err(format!("node pointer {ptr} is not below {NODE_PTRS}"));
            }
            one(Value::U64(ptr))
        }
        Arg::Millis => {
            let ms: u32 = number(first, "a timeout in milliseconds")?;
            if ms > MAX_FREEZE_TIMEOUT_MS {
                return Err(format!(
                    "a freeze timeout is at most {MAX_FREEZE_TIMEOUT_MS} ms, got {ms}"
                ));
            }
            one(Value::U32(ms))
        }
        Arg::Proc => {
            let word = first.ok_or("missing a process")?;
            one(Value::Proc(word.parse()?))
        }
        Arg::Switch => match first.copied() {
            Some("on") => one(Value::Switch(true)),
            Some("off") => one(Value::Switch(false)),
            other => Err(format!("expected on or off, got {other:?}")),
        },
        Arg::NodeFlags => {
            let mut flags = 0;
            for word in words {
                let flag = NodeFlags::parse_word(word).ok_or_else(|| {
                    format!("`{head}`: expected a node flag (accepts-fds, prio=N), got {word:?}")
                })?;
                flags |= flag;
            }
            Ok((Value::NodeFlags(NodeFlags(flags)), &[]))
        }
        Arg::Payload => Ok((Value::Payload(parse_payload(words)?), &[])),
    }
}

fn parse_payload(words: &[&str]) -> Result<Payload, String> {
    let mut payload = Payload::default();
    let mut words = words.iter();
    while let Some(&kind) = words.next() {
        if let Some((flag, _)) = TxnFlags::WORDS.iter().find(|(_, w)| *w == kind) {
            payload.flags.0 |= flag;
            continue;
        }
        if kind.starts_with('+') {
            return Err(format!(
                "unknown transaction flag {kind:?} (known: +accept-fds, +clear-buf, +update)"
            ));
        }
        if payload.flags != TxnFlags::default() {
            return Err(format!("object {kind:?} after the transaction's flags"));
        }
        let (strong, base) = match kind.strip_prefix("weak-") {
            Some(base) => (false, base),
            None => (true, kind),
        };
        let object = match base {
            "node" => {
                let ptr: u64 = number(words.next(), "a node pointer")?;
                if ptr >= NODE_PTRS {
                    return Err(format!("node pointer {ptr} is not below {NODE_PTRS}"));
                }
                Object::Node { ptr, strong }
            }
            "handle" => Object::Handle {
                handle: number(words.next(), "a handle")?,
                strong,
            },
            "nodes" if strong => {
                let first: u64 = number(words.next(), "a node pointer")?;
                let count: u32 = number(words.next(), "a count")?;
                if count == 0 || count > MAX_NODE_RUN {
                    return Err(format!(
                        "a run of nodes has 1 to {MAX_NODE_RUN}, got {count}"
                    ));
                }
                if first + u64::from(count) > NODE_PTRS {
                    return Err(format!("node pointers end below {NODE_PTRS}"));
                }
                Object::Nodes { first, count }
            }
            _ => {
                return Err(format!(
                "expected an object (node K, weak-node K, handle H, weak-handle H), got {kind:?}"
            ))
            }
        };
        if payload.objects.len() == MAX_OBJECTS {
            return Err(format!(
                "a transaction carries at most {MAX_OBJECTS} objects"
            ));
        }
        payload.objects.push(object);
    }
    Ok(payload)
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U32(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::Proc(p) => write!(f, "{p}"),
            Value::Switch(on) => f.write_str(if *on { "on" } else { "off" }),
            Value::NodeFlags(flags) => write!(f, "{flags}"),
            Value::Payload(p) => {
                let mut words: Vec<String> = p.objects.iter().map(ToString::to_string).collect();
                let flags = p.flags.to_string();
                if !flags.is_empty() {
                    words.push(flags);
                }
                f.write_str(&words.join(" "))
            }
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, values) = self.values();
        f.write_str(word)?;
        for v in values {
            let text = v.to_string();
            if !text.is_empty() {
                write!(f, " {text}")?;
            }
        }
        Ok(())
    }
}

/// One line of a program: a thread and its command.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// The process.
    pub pid: Pid,
    /// Its thread that issues the command.
    pub tid: Tid,
    /// What.
    pub command: Command,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.pid)?;
        if self.tid != Tid(0) {
            write!(f, ".{}", self.tid)?;
        }
        write!(f, " {}", self.command)
    }
}

impl Step {
    /// A step of thread 0.
    pub fn main(pid: Pid, command: Command) -> Step {
        Step {
            pid,
            tid: Tid(0),
            command,
        }
    }

    /// Parses `p0 acquire 0` or `p0.t1 call 1`, split at single spaces.
    pub fn parse_words(words: &[&str]) -> Result<Step, String> {
        let (who, rest) = words.split_first().ok_or("empty step")?;
        let (pid, tid) = match who.split_once('.') {
            Some((pid, tid)) => (pid.parse()?, tid.parse()?),
            None => (who.parse()?, Tid(0)),
        };
        Ok(Step {
            pid,
            tid,
            command: Command::parse_words(rest)?,
        })
    }
}

/// Who the processes of a program are: each one's effective uid, and the
/// task that opened it.
///
/// A process is one open of the device, a Binder process in both drivers.
/// Most processes are opened by a task of their own (a forked process of
/// the executor); a process may instead be another open by the task of an
/// earlier one: then both drivers see two Binder processes with one pid
/// (`proc->pid` in C, `Process::task` in Rust), and the opens of one task
/// are made one after the other, in process order, when its first process
/// opens.
///
/// # Invariants
///
/// `1 <= euids.len() <= MAX_PROCS`, `tasks.len() == euids.len()`, and for
/// each process `i`: `tasks[i]` is the first process of its task
/// (`tasks[i] <= i` and `tasks[tasks[i]] == tasks[i]`), whose euid it has
/// (`euids[i] == euids[tasks[i]]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Procs {
    /// Each process's effective uid (0 or another): `BINDER_SET_CONTEXT_MGR`
    /// compares it with the first manager's.
    pub euids: Vec<u32>,
    /// Each process's task, named by the task's first process.
    pub tasks: Vec<Pid>,
}

impl Procs {
    /// Processes with these euids, each opened by a task of its own.
    pub fn new(euids: Vec<u32>) -> Procs {
        let tasks = (0..euids.len() as u8).map(Pid).collect();
        Procs { euids, tasks }
    }

    /// How many processes.
    pub fn len(&self) -> usize {
        self.euids.len()
    }

    /// Whether there are none (never, by the invariants).
    pub fn is_empty(&self) -> bool {
        self.euids.is_empty()
    }

    /// The task of process `pid`, named by its first process.
    pub fn task(&self, pid: Pid) -> Pid {
        self.tasks[pid.index()]
    }

    /// The processes `pid`'s task opened, `pid` among them, in the order it
    /// opened them.
    pub fn of_task(&self, pid: Pid) -> impl Iterator<Item = Pid> + '_ {
        let task = self.task(pid);
        (0..self.len() as u8)
            .map(Pid)
            .filter(move |&p| self.task(p) == task)
    }

    /// Whether `a` and `b` were opened by one task (one pid).
    pub fn same_task(&self, a: Pid, b: Pid) -> bool {
        self.task(a) == self.task(b)
    }

    /// How many of the processes `pid`'s task opened `alive` keeps: the
    /// Binder processes a lookup of the pid finds.
    pub fn opens_alive(&self, pid: Pid, alive: impl Fn(Pid) -> bool) -> usize {
        self.of_task(pid).filter(|&p| alive(p)).count()
    }

    /// Whether some task opened the device more than once.
    pub fn shares_a_task(&self) -> bool {
        self.tasks.iter().enumerate().any(|(i, t)| t.index() != i)
    }

    /// The `procs` line of the text form: `procs 3` when every euid is 0
    /// and every process has a task of its own; otherwise one word per
    /// process, its euid or, for another open by an earlier process's
    /// task, that process (`procs 0 1000 p0`).
    pub fn line(&self) -> String {
        if self.euids.iter().all(|&e| e == 0) && !self.shares_a_task() {
            return format!("procs {}", self.len());
        }
        let words: Vec<String> = (0..self.len())
            .map(|i| match self.tasks[i] {
                task if task.index() != i => task.to_string(),
                _ => self.euids[i].to_string(),
            })
            .collect();
        format!("procs {}", words.join(" "))
    }

    /// Parses the `procs` line's words after `procs`: a count (`procs 3`,
    /// every euid 0, a task each) or one word per process, more than one:
    /// its euid, or `pN` for another open by the task of the earlier
    /// process `pN` (`procs 0 1000 p1`).
    pub fn parse(words: &[&str]) -> Result<Procs, String> {
        if let [n] = words {
            let n: usize = n
                .parse()
                .map_err(|_| format!("expected a number of processes, got {n:?}"))?;
            if n == 0 || n > MAX_PROCS {
                return Err(format!("a program has 1 to {MAX_PROCS} processes, got {n}"));
            }
            return Ok(Procs::new(vec![0; n]));
        }
        if words.len() > MAX_PROCS {
            return Err(format!(
                "a program has 1 to {MAX_PROCS} processes, got {}",
                words.len()
            ));
        }
        let mut procs = Procs {
            euids: Vec::new(),
            tasks: Vec::new(),
        };
        for (i, w) in words.iter().enumerate() {
            if w.starts_with('p') {
                let first: Pid = w.parse()?;
                if first.index() >= i {
                    return Err(format!(
                        "p{i} is another open by {first}'s task, which must come before it"
                    ));
                }
                let task = procs.task(first);
                procs.euids.push(procs.euids[task.index()]);
                procs.tasks.push(task);
            } else {
                let euid = w
                    .parse()
                    .map_err(|_| format!("expected an euid or a process pN, got {w:?}"))?;
                procs.euids.push(euid);
                procs.tasks.push(Pid(i as u8));
            }
        }
        Ok(procs)
    }

    /// Checks the invariants.
    pub fn check(&self) -> Result<(), String> {
        if self.euids.is_empty() || self.euids.len() > MAX_PROCS {
            return Err(format!(
                "a program has 1 to {MAX_PROCS} processes, got {}",
                self.euids.len()
            ));
        }
        if self.tasks.len() != self.euids.len() {
            return Err(format!(
                "{} euids but {} tasks",
                self.euids.len(),
                self.tasks.len()
            ));
        }
        for (i, &task) in self.tasks.iter().enumerate() {
            if task.index() > i || self.tasks[task.index()] != task {
                return Err(format!(
                    "p{i}'s task {task} is not the first process of a task"
                ));
            }
            if self.euids[i] != self.euids[task.index()] {
                return Err(format!("p{i} has another euid than its task {task}"));
            }
        }
        Ok(())
    }
}

/// The processes of a program and what they do, in order.
///
/// # Invariants
///
/// `procs` holds its own invariants, every step's process is below
/// `procs.len()`, and so is every process a command names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// Who the processes are.
    pub procs: Procs,
    /// The steps, in program order.
    pub steps: Vec<Step>,
}

impl Program {
    /// How many processes.
    pub fn procs(&self) -> usize {
        self.procs.len()
    }

    /// The `procs` line of the text form ([`Procs::line`]).
    pub fn procs_line(&self) -> String {
        self.procs.line()
    }

    /// Checks the invariants: the processes', every step names a process
    /// the program has, and so does every command that names one.
    pub fn check(&self) -> Result<(), String> {
        self.procs.check()?;
        let named = |s: &Step| match s.command {
            Command::Freeze { target, .. }
            | Command::Thaw(target)
            | Command::FrozenInfo(target) => Some(target),
            _ => None,
        };
        for step in &self.steps {
            for pid in std::iter::once(step.pid).chain(named(step)) {
                if pid.index() >= self.procs() {
                    return Err(format!(
                        "step `{step}` names {pid}, but the program has {} processes",
                        self.procs()
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) {
        let words: Vec<&str> = line.split(' ').collect();
        let step = Step::parse_words(&words).unwrap();
        assert_eq!(step.to_string(), line);
    }

    #[test]
    fn every_command_round_trips() {
        for line in [
            "p1 set-manager",
            "p1 set-manager-ext 5 7",
            "p1 set-manager-ext 0 0 accepts-fds prio=3",
            "p0 increfs 0",
            "p0 acquire 7",
            "p2 release 1",
            "p3 decrefs 4294967295",
            "p0 send 0",
            "p0 send 0 node 1 weak-node 0 handle 3 weak-handle 2",
            "p0 send 3 nodes 100 64 node 2",
            "p0 send 1 node 1 +clear-buf +update",
            "p0.t1 call 1 handle 2 +accept-fds",
            "p1.t2 reply node 3",
            "p1 reply",
            "p1 free",
            "p1 death 2 9",
            "p1 clear-death 2 9",
            "p1 freeze-notify 2 9",
            "p1 clear-freeze-notify 2 9",
            "p1 node-info 0",
            "p1 node-debug 0",
            "p0 get-version",
            "p0.t1 extended-error",
            "p0.t1 register-looper",
            "p0.t1 enter-looper",
            "p0.t1 exit-looper",
            "p0.t2 thread-exit",
            "p0 max-threads 2",
            "p0 freeze p1 10",
            "p0 thaw p1",
            "p0 frozen-info p1",
            "p0 oneway-spam on",
            "p0 idle-timeout",
            "p0 idle-priority",
            "p0 attempt-acquire",
            "p0 acquire-result",
            "p2 exit",
        ] {
            round_trip(line);
        }
    }

    /// Each row's `make` builds a command whose `values` name the row
    /// again, with the values it was given.
    #[test]
    fn every_row_makes_a_command_that_names_it() {
        for r in VOCABULARY {
            let values: Vec<Value> = r
                .args
                .iter()
                .map(|arg| match arg {
                    Arg::Handle | Arg::Count | Arg::Millis => Value::U32(1),
                    Arg::Cookie | Arg::Ptr => Value::U64(2),
                    Arg::Proc => Value::Proc(Pid(1)),
                    Arg::Switch => Value::Switch(true),
                    Arg::NodeFlags => Value::NodeFlags(NodeFlags(NodeFlags::ACCEPTS_FDS)),
                    Arg::Payload => Value::Payload(Payload {
                        objects: vec![Object::Node {
                            ptr: 1,
                            strong: true,
                        }],
                        flags: TxnFlags(TxnFlags::CLEAR_BUF),
                    }),
                })
                .collect();
            let command = (r.make)(&values);
            assert_eq!(command.values(), (r.word, values), "{}", r.word);
            assert!(std::ptr::eq(command.row(), r));
        }
        let words: std::collections::BTreeSet<&str> = VOCABULARY.iter().map(|r| r.word).collect();
        assert_eq!(words.len(), VOCABULARY.len(), "a word is used twice");
        let slots: u32 = VOCABULARY.iter().map(|r| u32::from(r.weight)).sum();
        assert_eq!(slots, 256, "the weights fill the decoder's 256 slots");
    }

    #[test]
    fn bad_lines_say_why() {
        let err = |line: &str| {
            let words: Vec<&str> = line.split(' ').collect();
            Step::parse_words(&words).unwrap_err()
        };
        assert!(err("p4 exit").contains("p0..p3"));
        assert!(err("p0.t3 exit").contains("t0..t2"));
        assert!(err("p0 fly").contains("unknown command"));
        assert!(err("p0 acquire").contains("missing a handle"));
        assert!(err("p0 acquire x").contains("expected a handle"));
        assert!(err("p0 exit 1").contains("takes 0"));
        assert!(err("p0 send 0 node 65536").contains("below 65536"));
        assert!(err("p0 send 0 nodes 1 0").contains("1 to 256"));
        assert!(err("p0 send 0 weak-nodes 1 2").contains("expected an object"));
        assert!(err("p0 send 0 thing 1").contains("expected an object"));
        assert!(err("p0 send 0 node 1 node 1 node 1 node 1 node 1").contains("at most 4"));
        assert!(err("p0 send 0 +fast").contains("unknown transaction flag"));
        assert!(err("p0 send 0 +clear-buf node 1").contains("after the transaction's flags"));
        assert!(err("p0 freeze p1 1000").contains("at most 100"));
        assert!(err("p0 oneway-spam maybe").contains("on or off"));
        assert!(err("p0 set-manager-ext 1 1 fast").contains("node flag"));
    }

    #[test]
    fn a_command_naming_a_missing_process_is_refused() {
        let p = Program {
            procs: Procs::new(vec![0, 0]),
            steps: vec![Step::main(Pid(0), Command::Thaw(Pid(2)))],
        };
        assert!(p.check().unwrap_err().contains("names p2"));
    }

    #[test]
    fn procs_line() {
        let euids = |words: &[&str]| Procs::parse(words).map(|p| p.euids);
        assert_eq!(euids(&["3"]), Ok(vec![0, 0, 0]));
        assert_eq!(euids(&["0", "1000"]), Ok(vec![0, 1000]));
        assert!(Procs::parse(&["5"]).is_err());
        assert!(Procs::parse(&["0"]).is_err());
        assert_eq!(Procs::new(vec![0, 1000]).line(), "procs 0 1000");
        assert_eq!(Procs::new(vec![0, 0]).line(), "procs 2");
    }

    #[test]
    fn another_open_by_an_earlier_task() {
        let p = Procs::parse(&["1000", "0", "p0", "p2"]).unwrap();
        assert_eq!(p.euids, [1000, 0, 1000, 1000]);
        assert_eq!(p.tasks, [Pid(0), Pid(1), Pid(0), Pid(0)]);
        assert_eq!(
            p.of_task(Pid(3)).collect::<Vec<_>>(),
            [Pid(0), Pid(2), Pid(3)]
        );
        assert_eq!(p.line(), "procs 1000 0 p0 p0");
        assert_eq!(p.check(), Ok(()));
        assert!(Procs::parse(&["0", "p1"])
            .unwrap_err()
            .contains("must come before"));
        assert!(Procs::parse(&["p0", "0"])
            .unwrap_err()
            .contains("must come before"));
        assert!(Procs::parse(&["0", "x"])
            .unwrap_err()
            .contains("euid or a process"));
        let bad = Procs {
            euids: vec![0, 1000],
            tasks: vec![Pid(0), Pid(0)],
        };
        assert!(bad.check().unwrap_err().contains("another euid"));
    }
}
