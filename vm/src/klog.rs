//! Kernel log lines, as `syslog(2)` hands them out (`<6>[   12.345678]
//! binder_linux: ...`), classified by what they report: an
//! `idpool::driver::Log` when the command language compares it, a named
//! line of the driver that it does not compare, a rate limit's "callbacks
//! suppressed" notice, a line of another part of the kernel, or a line of
//! the driver that no table entry matches (kept, and reported as
//! unclassified: a new line, or a table to extend).
//!
//! Each driver has its table of format patterns, written after the format
//! strings of mainline 7.3 (`drivers/android/binder.c` for C, cited by
//! function; `drivers/android/binder/*.rs` for Rust). A pattern is literal
//! text with placeholders: `%d` a signed decimal, `%u` an unsigned one, `%x`
//! hexadecimal digits, `%s` one word, `%*` the rest of the line.

use crate::driver::Driver;
use idpool::driver::Log;
use serde::{Deserialize, Serialize};

/// One of the C driver's two rate limits. In 7.3, `binder_debug` (with
/// `binder_txn_error`, its failed-transaction form) and
/// `binder_user_error` are functions (binder.c:142-171), each printing
/// through its one `pr_info_ratelimited`: the whole driver, every device
/// and process, shares two limits of `DEFAULT_RATELIMIT_BURST` (10) lines
/// per `DEFAULT_RATELIMIT_INTERVAL` (5 s) each. Its `pr_err` and
/// `pr_info` lines are not limited; neither are the Rust driver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// `binder_user_error`.
    UserError,
    /// `binder_debug` and `binder_txn_error`.
    Debug,
}

impl Limit {
    /// Both.
    pub const ALL: [Limit; 2] = [Limit::UserError, Limit::Debug];

    /// The function `___ratelimit` names in its "N callbacks suppressed"
    /// line (the function around the `pr_info_ratelimited`).
    pub fn function(self) -> &'static str {
        match self {
            Limit::UserError => "binder_user_error",
            Limit::Debug => "binder_debug",
        }
    }

    /// The limit a "callbacks suppressed" line names.
    pub fn from_function(function: &str) -> Option<Limit> {
        Limit::ALL.into_iter().find(|l| l.function() == function)
    }

    fn index(self) -> usize {
        match self {
            Limit::UserError => 0,
            Limit::Debug => 1,
        }
    }
}

/// The rate limit through which the C driver prints the line our models
/// call `log` (`None`: not limited, or a line the C driver never prints);
/// the same as the table's entries for the lines that report it.
pub fn c_limit(log: &Log) -> Option<Limit> {
    match log {
        Log::ManagerAcquiresZero
        | Log::GotOtherHandle { .. }
        | Log::WeakAsStrong
        | Log::InvalidRef(_)
        | Log::InvalidDecrement { .. }
        | Log::TransactionToInvalidHandle(_)
        | Log::TransactionToOwnManager
        | Log::ObjectInvalidHandle(_)
        | Log::DeathInvalidRef { .. }
        | Log::DeathAlreadySet
        | Log::DeathNotActive
        | Log::DeathCookieMismatch
        | Log::DeadBinderDoneNotFound
        | Log::IncRefDoneUnexpected
        | Log::NodeInfoBadArgs
        | Log::ReplyNoStack
        | Log::ReplyBadStack
        | Log::CallBadStack
        | Log::CallWithTodo
        | Log::LooperMisuse
        | Log::NotALooper
        | Log::FreezeInvalidRef { .. }
        | Log::FreezeAlreadySet
        | Log::FreezeNotActive
        | Log::FreezeCookieMismatch
        | Log::FreezeDoneNotFound => Some(Limit::UserError),
        Log::NoTargetNode
        | Log::TransactionFailed
        | Log::TranslateFailed
        | Log::DeadProcess
        | Log::FrozenProcess
        | Log::ReplyTargetGone
        | Log::UndeliveredFreeze
        | Log::UndeliveredTransaction
        | Log::UndeliveredComplete
        | Log::UndeliveredError
        | Log::UndeliveredDeath => Some(Limit::Debug),
        Log::ManagerAlreadySet
        | Log::ManagerBadUid
        | Log::InvalidIncStrongNode
        | Log::IoctlFailed(_)
        | Log::BadBufferObject
        | Log::UnexpectedWork
        | Log::Bug
        | Log::WarnOn
        | Log::ReadLivelock
        | Log::RefcountUnderflow
        | Log::PoolMismatch
        | Log::CopyFailed
        | Log::BufferAllocFailed
        | Log::ReplyFailed
        | Log::FreezeDuplicateCookie
        | Log::UnsupportedCommand => None,
    }
}

/// A rate limit's current window, as the lines it printed show it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// When its first line was printed (the kernel's timestamp, seconds).
    pub start: f64,
    /// How many lines it printed.
    pub printed: u32,
}

/// The C driver's two rate limits, followed through the lines they let
/// through (`___ratelimit`, lib/ratelimit.c:27-110): a window begins with
/// the first call after the previous window's interval has passed, and that
/// call is always printed; at most `BURST` calls of a window are printed,
/// the others dropped and counted, and the count is printed as
/// "<function>: N callbacks suppressed" just before the first line of the
/// next window. So a window's start is the timestamp of its first printed
/// line, and once it printed `BURST` lines every later call in it is
/// dropped.
#[derive(Clone, Debug, Default)]
pub struct RateLimits {
    windows: [Option<Window>; 2],
    /// Per limit: a window printed its whole burst and no later line of
    /// the limit has been printed yet, so the kernel has yet to say
    /// whether it dropped anything.
    owed: [bool; 2],
}

impl RateLimits {
    /// `DEFAULT_RATELIMIT_BURST`.
    pub const BURST: u32 = 10;
    /// `DEFAULT_RATELIMIT_INTERVAL` (`5 * HZ`), in seconds.
    pub const INTERVAL: f64 = 5.0;

    /// Takes a line the C driver printed into account.
    pub fn observe(&mut self, line: &LogLine) {
        let limits: Vec<Limit> = match (&line.class, line.limit) {
            (Class::Suppressed { site, .. }, _) => {
                // The next line of that limit begins a window.
                if let Some(l) = Limit::from_function(site) {
                    self.windows[l.index()] = None;
                    self.owed[l.index()] = false;
                }
                return;
            }
            (_, Some(l)) => vec![l],
            // A line of the driver no entry names: either limit, as far
            // as we know.
            (Class::Unclassified, None) => Limit::ALL.to_vec(),
            _ => return,
        };
        let Some(t) = line.time else { return };
        for l in limits {
            let w = &mut self.windows[l.index()];
            match w {
                Some(w) if t - w.start <= Self::INTERVAL => w.printed += 1,
                _ => {
                    // A new window; had the last one dropped anything, the
                    // kernel would have said so just before this line.
                    *w = Some(Window {
                        start: t,
                        printed: 1,
                    });
                    self.owed[l.index()] = false;
                }
            }
            if self.full(l) {
                self.owed[l.index()] = true;
            }
        }
    }

    /// Whether `limit`'s last window printed its whole burst and no line of
    /// the limit came after it: if it dropped lines, the kernel reports
    /// them only with the limit's next line.
    pub fn owes(&self, limit: Limit) -> bool {
        self.owed[limit.index()]
    }

    /// `limit`'s current window, if it printed anything.
    pub fn window(&self, limit: Limit) -> Option<Window> {
        self.windows[limit.index()]
    }

    /// Whether `limit`'s current window printed its burst: every later
    /// call within it is dropped (until the window is over).
    pub fn full(&self, limit: Limit) -> bool {
        self.window(limit).is_some_and(|w| w.printed >= Self::BURST)
    }

    /// Forgets `limit`'s window (its interval is known to be over).
    pub fn expire(&mut self, limit: Limit) {
        self.windows[limit.index()] = None;
    }
}

/// What a log line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// A line the command language compares.
    Log(Log),
    /// A line of the driver that is known but not compared (the failed
    /// ioctl lines, the failed-transaction summaries of another cause, ...),
    /// by a short name.
    Known(&'static str),
    /// `<site>: N callbacks suppressed`: the rate limit of `site`
    /// (`binder_user_error` or `binder_debug`) dropped N lines.
    Suppressed {
        /// The rate-limited function.
        site: String,
        /// How many lines it dropped.
        count: u32,
    },
    /// A warning or crash report of the kernel (`WARNING:`, `kernel BUG`,
    /// `Oops`, a stack trace line).
    Splat,
    /// A line from another part of the kernel.
    Foreign,
    /// A line of the driver that matched no pattern.
    Unclassified,
}

/// A parsed log line.
#[derive(Clone, Debug, PartialEq)]
pub struct LogLine {
    /// The line as read.
    pub raw: String,
    /// Its `<N>` level.
    pub level: Option<u8>,
    /// Its timestamp in seconds.
    pub time: Option<f64>,
    /// The prefix `pr_fmt` gave it (`binder_linux`, `rust_binder`).
    pub module: Option<String>,
    /// The text after the prefix.
    pub message: String,
    /// What it reports.
    pub class: Class,
    /// The rate limit it went through (C), if any.
    pub limit: Option<Limit>,
}

type Make = fn(&[Cap]) -> Option<Class>;

/// A table entry: the pattern, the rate limit its lines go through, and
/// what a match reports.
pub type Entry = (&'static str, Option<Limit>, Make);

/// A value a placeholder captured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cap {
    /// `%d`, `%u` or `%x`.
    Num(i128),
    /// `%s` or `%*`.
    Text(String),
}

impl Cap {
    fn num(&self) -> Option<i128> {
        match self {
            Cap::Num(n) => Some(*n),
            Cap::Text(_) => None,
        }
    }
    /// A `u32` the kernel may have printed with `%d` (a handle of
    /// 4294967295 prints as -1).
    fn u32(&self) -> Option<u32> {
        let n = self.num()?;
        u32::try_from(n)
            .ok()
            .or_else(|| i32::try_from(n).ok().map(|n| n as u32))
    }
    fn text(&self) -> &str {
        match self {
            Cap::Text(t) => t,
            Cap::Num(_) => "",
        }
    }
}

fn log(l: Log) -> Option<Class> {
    Some(Class::Log(l))
}

/// The errno numbered `n`, when it is one the models name.
fn errno(n: i128) -> Option<idpool::driver::Errno> {
    idpool::driver::Errno::from_code(i32::try_from(n).ok()?)
}

/// A kernel `Error`'s debug text: `EINVAL`, or `Error(22)` for one the
/// kernel crate does not name.
fn rust_errno(text: &str) -> Option<idpool::driver::Errno> {
    // A `Result`'s debug text wraps it: `Err(Error(11))`.
    let text = text
        .strip_prefix("Err(")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(text);
    match text
        .strip_prefix("Error(")
        .and_then(|t| t.strip_suffix(')'))
    {
        Some(n) => errno(n.parse().ok()?),
        None => idpool::driver::Errno::from_name(text),
    }
}

/// What an "undelivered ..." line of either driver reports, by its words.
fn undelivered(rest: &str) -> Option<Class> {
    if rest.starts_with("transaction ") {
        log(Log::UndeliveredTransaction)
    } else if rest.starts_with("TRANSACTION_COMPLETE") {
        log(Log::UndeliveredComplete)
    } else if rest.starts_with("TRANSACTION_ERROR") {
        log(Log::UndeliveredError)
    } else if rest.starts_with("death notification") {
        log(Log::UndeliveredDeath)
    } else if rest.starts_with("freeze notification") {
        log(Log::UndeliveredFreeze)
    } else {
        Some(Class::Known("undelivered-work"))
    }
}

/// What a "<command> invalid ref N" line of either driver reports.
fn invalid_ref(command: &str) -> Option<Class> {
    match command {
        "BC_REQUEST_DEATH_NOTIFICATION" => log(Log::DeathInvalidRef { request: true }),
        "BC_CLEAR_DEATH_NOTIFICATION" => log(Log::DeathInvalidRef { request: false }),
        "BC_REQUEST_FREEZE_NOTIFICATION" => log(Log::FreezeInvalidRef { request: true }),
        "BC_CLEAR_FREEZE_NOTIFICATION" => log(Log::FreezeInvalidRef { request: false }),
        _ => None,
    }
}

/// The C driver's lines (`drivers/android/binder.c`, 7.3), by function.
pub const C_TABLE: &[Entry] = &[
    // binder_thread_write, BC_INCREFS..BC_DECREFS on handle 0
    (
        "%d:%d context manager tried to acquire desc 0",
        Some(Limit::UserError),
        |_| log(Log::ManagerAcquiresZero),
    ),
    (
        "%d:%d tried to acquire reference to desc %d, got %d instead",
        Some(Limit::UserError),
        |c| {
            log(Log::GotOtherHandle {
                wanted: c[2].u32()?,
                got: c[3].u32()?,
            })
        },
    ),
    (
        "%d:%d %s %d refcount change on invalid ref %d ret %d",
        Some(Limit::UserError),
        |c| log(Log::InvalidRef(c[4].u32()?)),
    ),
    // binder_inc_ref_olocked
    (
        "tried to use weak ref as strong ref",
        Some(Limit::UserError),
        |_| log(Log::WeakAsStrong),
    ),
    // binder_dec_ref_olocked
    (
        "%d invalid dec strong, ref %d desc %d s %d w %d",
        Some(Limit::UserError),
        |_| log(Log::InvalidDecrement { strong: true }),
    ),
    (
        "%d invalid dec weak, ref %d desc %d s %d w %d",
        Some(Limit::UserError),
        |_| log(Log::InvalidDecrement { strong: false }),
    ),
    // binder_ioctl_set_ctx_mgr
    ("BINDER_SET_CONTEXT_MGR already set", None, |_| {
        log(Log::ManagerAlreadySet)
    }),
    ("BINDER_SET_CONTEXT_MGR bad uid %d != %d", None, |_| {
        log(Log::ManagerBadUid)
    }),
    // binder_transaction
    (
        "%d:%d got transaction to invalid handle, %u",
        Some(Limit::UserError),
        |c| log(Log::TransactionToInvalidHandle(c[2].u32()?)),
    ),
    ("%d:%d cannot find target node", Some(Limit::Debug), |_| {
        log(Log::NoTargetNode)
    }),
    (
        "%d:%d got transaction to context manager from process owning it",
        Some(Limit::UserError),
        |_| log(Log::TransactionToOwnManager),
    ),
    (
        "%d:%d transaction %s to %d:%d failed %d/%d/%d, code %u size %d-%d line %d",
        Some(Limit::Debug),
        |_| log(Log::TransactionFailed),
    ),
    ("%d:%d translate handle failed", Some(Limit::Debug), |_| {
        log(Log::TranslateFailed)
    }),
    ("%d:%d translate binder failed", Some(Limit::Debug), |_| {
        log(Log::TranslateFailed)
    }),
    (
        "%d:%d self transactions not allowed",
        Some(Limit::Debug),
        |_| Some(Class::Known("self-transaction")),
    ),
    ("%d:%d %s process or thread", Some(Limit::Debug), |c| {
        match c[2].text() {
            "dead" => log(Log::DeadProcess),
            "frozen" => log(Log::FrozenProcess),
            _ => None,
        }
    }),
    ("%d:%d cannot allocate %*", Some(Limit::Debug), |_| {
        Some(Class::Known("transaction-alloc-failed"))
    }),
    ("cannot allocate buffer%*", Some(Limit::Debug), |_| {
        Some(Class::Known("transaction-alloc-failed"))
    }),
    // binder_translate_handle
    (
        "%d:%d got transaction with invalid handle, %d",
        Some(Limit::UserError),
        |c| log(Log::ObjectInvalidHandle(c[2].u32()?)),
    ),
    // binder_translate_binder
    (
        "%d:%d sending u%x node %d, cookie mismatch %x != %x",
        Some(Limit::UserError),
        |_| Some(Class::Known("node-cookie-mismatch")),
    ),
    // binder_thread_write (death notifications),
    // binder_request_freeze_notification, binder_clear_freeze_notification
    ("%d:%d %s invalid ref %d", Some(Limit::UserError), |c| {
        invalid_ref(c[2].text())
    }),
    (
        "%d:%d BC_REQUEST_DEATH_NOTIFICATION death notification already set",
        Some(Limit::UserError),
        |_| log(Log::DeathAlreadySet),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification not active",
        Some(Limit::UserError),
        |_| log(Log::DeathNotActive),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification cookie mismatch %x != %x",
        Some(Limit::UserError),
        |_| log(Log::DeathCookieMismatch),
    ),
    (
        "%d:%d BC_DEAD_BINDER_DONE %x not found",
        Some(Limit::UserError),
        |_| log(Log::DeadBinderDoneNotFound),
    ),
    // binder_request_freeze_notification, binder_clear_freeze_notification,
    // binder_freeze_notification_done
    (
        "%d:%d BC_REQUEST_FREEZE_NOTIFICATION already set",
        Some(Limit::UserError),
        |_| log(Log::FreezeAlreadySet),
    ),
    (
        "%d:%d BC_CLEAR_FREEZE_NOTIFICATION freeze notification not active",
        Some(Limit::UserError),
        |_| log(Log::FreezeNotActive),
    ),
    (
        "%d:%d BC_CLEAR_FREEZE_NOTIFICATION freeze notification cookie mismatch %x != %x",
        Some(Limit::UserError),
        |_| log(Log::FreezeCookieMismatch),
    ),
    (
        "%d:%d BC_FREEZE_NOTIFICATION_DONE %x not found",
        Some(Limit::UserError),
        |_| log(Log::FreezeDoneNotFound),
    ),
    // binder_transaction, BC_REPLY
    (
        "%d:%d got reply transaction with no transaction stack",
        Some(Limit::UserError),
        |_| log(Log::ReplyNoStack),
    ),
    (
        "%d:%d got reply transaction with bad transaction stack, transaction %d has target %d:%d",
        Some(Limit::UserError),
        |_| log(Log::ReplyBadStack),
    ),
    ("%d:%d reply target not found", Some(Limit::Debug), |_| {
        log(Log::ReplyTargetGone)
    }),
    // The caller's stack no longer has the transaction on top: not
    // reachable with one outstanding call per thread; not compared.
    (
        "%d:%d got reply transaction with bad target transaction stack %d, expected %d",
        Some(Limit::UserError),
        |_| Some(Class::Known("reply-bad-target-stack")),
    ),
    // binder_transaction, two-way BC_TRANSACTION
    (
        "%d:%d got new transaction with bad transaction stack, transaction %d has target %d:%d",
        Some(Limit::UserError),
        |_| log(Log::CallBadStack),
    ),
    (
        "%d:%d new transaction not allowed when there is a transaction on thread todo",
        Some(Limit::UserError),
        |_| log(Log::CallWithTodo),
    ),
    // binder_send_failed_reply: a second error for a thread that has one
    // (plain pr_warn)
    ("Unexpected reply error: %u", None, |_| {
        Some(Class::Known("unexpected-reply-error"))
    }),
    // binder_thread_write, BC_REGISTER_LOOPER / BC_ENTER_LOOPER
    (
        "%d:%d ERROR: BC_REGISTER_LOOPER called after BC_ENTER_LOOPER",
        Some(Limit::UserError),
        |_| log(Log::LooperMisuse),
    ),
    (
        "%d:%d ERROR: BC_REGISTER_LOOPER called without request",
        Some(Limit::UserError),
        |_| log(Log::LooperMisuse),
    ),
    (
        "%d:%d ERROR: BC_ENTER_LOOPER called after BC_REGISTER_LOOPER",
        Some(Limit::UserError),
        |_| log(Log::LooperMisuse),
    ),
    // binder_thread_read
    (
        "%d:%d ERROR: Thread waiting for process work before calling BC_REGISTER_LOOPER or BC_ENTER_LOOPER (state %x)",
        Some(Limit::UserError),
        |_| log(Log::NotALooper),
    ),
    // binder_thread_write: BC_ATTEMPT_ACQUIRE, BC_ACQUIRE_RESULT (pr_err),
    // and any code it does not know
    ("BC_ATTEMPT_ACQUIRE not supported", None, |_| {
        log(Log::UnsupportedCommand)
    }),
    ("BC_ACQUIRE_RESULT not supported", None, |_| {
        log(Log::UnsupportedCommand)
    }),
    ("%d:%d unknown command %u", None, |_| {
        Some(Class::Known("unknown-command"))
    }),
    // binder_inc_node_nilocked
    ("invalid inc strong node for %d", None, |_| {
        log(Log::InvalidIncStrongNode)
    }),
    // binder_thread_write, BC_INCREFS_DONE / BC_ACQUIRE_DONE
    (
        "%d:%d BC_ACQUIRE_DONE node %d has no pending acquire request",
        Some(Limit::UserError),
        |_| log(Log::IncRefDoneUnexpected),
    ),
    (
        "%d:%d BC_INCREFS_DONE node %d has no pending increfs request",
        Some(Limit::UserError),
        |_| log(Log::IncRefDoneUnexpected),
    ),
    ("%d:%d %s u%x no match", Some(Limit::UserError), |_| {
        Some(Class::Known("ref-done-no-node"))
    }),
    (
        "%d:%d %s u%x node %d cookie mismatch %x != %x",
        Some(Limit::UserError),
        |_| Some(Class::Known("ref-done-cookie-mismatch")),
    ),
    // binder_thread_write, BC_FREE_BUFFER
    ("%d:%d BC_FREE_BUFFER %*", Some(Limit::UserError), |_| {
        Some(Class::Known("free-buffer-no-match"))
    }),
    // binder_ioctl_get_node_info_for_ref
    (
        "%d BINDER_GET_NODE_INFO_FOR_REF: only handle may be non-zero.",
        Some(Limit::UserError),
        |_| log(Log::NodeInfoBadArgs),
    ),
    // binder_ioctl, any failed ioctl (plain pr_info, no rate limit)
    ("%d:%d ioctl %x %x returned %d", None, |c| {
        log(Log::IoctlFailed(errno(-c[4].num()?)?))
    }),
    // binder_release_work, binder_thread_release (dead transactions)
    ("undelivered %*", Some(Limit::Debug), |c| {
        undelivered(c[0].text())
    }),
    (
        "transaction release %d bad handle %d, ret = %d",
        None,
        |_| log(Log::BadBufferObject),
    ),
    ("transaction release %d bad node %x", None, |_| {
        log(Log::BadBufferObject)
    }),
    ("unexpected work type, %d, not freed", None, |_| {
        log(Log::UnexpectedWork)
    }),
    (
        "release %d:%d transaction %d %s, still active",
        Some(Limit::Debug),
        |_| Some(Class::Known("release-active-transaction")),
    ),
    (
        "send failed reply for transaction %*",
        Some(Limit::Debug),
        |_| Some(Class::Known("failed-reply-sent")),
    ),
    // binder_set_nice, from binder_thread_read before each wait for the
    // process's work: a process whose euid may not set the nice value
    // binder asks for (no CAP_SYS_NICE, RLIMIT_NICE 0)
    ("%d RLIMIT_NICE not set", Some(Limit::UserError), |_| {
        Some(Class::Known("rlimit-nice"))
    }),
    // binder_alloc.c, debug_low_async_space_locked: a one-way sender
    // holds much of a nearly full async space (its own pr_info_ratelimited,
    // not one of the two limits followed)
    (
        "%d: pid %d spamming oneway? %d buffers allocated for a total size of %d",
        None,
        |_| Some(Class::Known("oneway-spam-warning")),
    ),
    // binder_alloc
    ("%d: binder_alloc_buf%*", None, |_| {
        Some(Class::Known("alloc-failed"))
    }),
];

/// The Rust driver's lines (`drivers/android/binder/`, 7.3): its
/// `binder_debug!` lines (`pr_info!`, no rate limit) and its `pr_warn!`s.
pub const RUST_TABLE: &[Entry] = &[
    // Context::set_manager_node
    ("BINDER_SET_CONTEXT_MGR already set", None, |_| {
        log(Log::ManagerAlreadySet)
    }),
    // Node::update_refcount_locked
    ("Failure: refcount underflow!", None, |_| {
        log(Log::RefcountUnderflow)
    }),
    // Process::get_ref_for_node (insert into by_handle)
    (
        "Detected mismatch between handle_is_present and by_handle",
        None,
        |_| log(Log::PoolMismatch),
    ),
    // Process::update_ref (BC_INCREFS..BC_DECREFS)
    ("%d:%d no such ref %d", None, |c| {
        log(Log::InvalidRef(c[2].u32()?))
    }),
    ("%d:%d tried to use weak ref as strong ref", None, |_| {
        log(Log::WeakAsStrong)
    }),
    // Thread::transaction, Process::get_transaction_node
    ("%d:%d got transaction to invalid handle %u", None, |c| {
        log(Log::TransactionToInvalidHandle(c[2].u32()?))
    }),
    ("%d:%d transaction %s to %d:%d failed %*", None, |_| {
        log(Log::TransactionFailed)
    }),
    ("%d:%d error while translating object: %*", None, |_| {
        log(Log::TranslateFailed)
    }),
    (
        "Failed to allocate buffer. len:%d, is_oneway:%s",
        None,
        |_| log(Log::BufferAllocFailed),
    ),
    ("%d:%d performed invalid %s decrement on ref", None, |c| {
        log(Log::InvalidDecrement {
            strong: c[2].text() == "strong",
        })
    }),
    (
        "%d:%d inc_ref_done called when no active inc_refs",
        None,
        |_| log(Log::IncRefDoneUnexpected),
    ),
    // Process::request_death, Process::clear_death,
    // Process::request_freeze_notif, Process::clear_freeze_notif
    ("%d:%d %s invalid ref %d", None, |c| {
        invalid_ref(c[2].text())
    }),
    (
        "%d:%d BC_REQUEST_DEATH_NOTIFICATION death notification already set",
        None,
        |_| log(Log::DeathAlreadySet),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification not active",
        None,
        |_| log(Log::DeathNotActive),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification cookie mismatch%*",
        None,
        |_| log(Log::DeathCookieMismatch),
    ),
    // Process::deferred_release and the work it drops
    ("%d: undelivered %*", None, |c| undelivered(c[1].text())),
    // Thread::write_read
    ("Write failure %s in pid:%d", None, |c| {
        log(Log::IoctlFailed(rust_errno(c[0].text())?))
    }),
    ("Read failure %s in pid:%d", None, |c| {
        log(Log::IoctlFailed(rust_errno(c[0].text())?))
    }),
    ("Failure in copy_transaction_data: %*", None, |_| {
        log(Log::CopyFailed)
    }),
    (
        "Notification added to `delivered_deaths` twice.",
        None,
        |_| Some(Class::Known("death-delivered-twice")),
    ),
    // Thread::reply_inner (pr_warn!, the pid and thread of the replier)
    ("%d:%d reply to %d failed: %*", None, |_| {
        log(Log::ReplyFailed)
    }),
    (
        "%d:%d got reply transaction with no transaction stack",
        None,
        |_| log(Log::ReplyNoStack),
    ),
    (
        "%d:%d got reply transaction with bad transaction stack",
        None,
        |_| log(Log::ReplyBadStack),
    ),
    // Thread::top_of_transaction_stack (pr_warn!, no pid) and
    // Thread::transaction_inner
    (
        "got new transaction with bad transaction stack",
        None,
        |_| log(Log::CallBadStack),
    ),
    (
        "%d:%d got new transaction with bad transaction stack",
        None,
        |_| log(Log::CallBadStack),
    ),
    // Thread::unwind_transaction_stack (a thread released with a call to
    // answer)
    (
        "%d:%d release transaction %d in, still active",
        None,
        |_| Some(Class::Known("release-active-transaction")),
    ),
    // freeze.rs: Process::request_freeze_notif, freeze_notif_done,
    // clear_freeze_notif
    (
        "%d:%d BC_REQUEST_FREEZE_NOTIFICATION already set",
        None,
        |_| log(Log::FreezeAlreadySet),
    ),
    (
        "%d:%d BC_REQUEST_FREEZE_NOTIFICATION duplicate cookie",
        None,
        |_| log(Log::FreezeDuplicateCookie),
    ),
    (
        "%d:%d BC_FREEZE_NOTIFICATION_DONE %x not found",
        None,
        |_| log(Log::FreezeDoneNotFound),
    ),
    // The cookie names a listener that has no notification out: for
    // userspace the same as one never delivered.
    (
        "%d:%d BC_FREEZE_NOTIFICATION_DONE %x not pending",
        None,
        |_| log(Log::FreezeDoneNotFound),
    ),
    (
        "%d:%d BC_CLEAR_FREEZE_NOTIFICATION freeze notification not active",
        None,
        |_| log(Log::FreezeNotActive),
    ),
    (
        "%d:%d BC_CLEAR_FREEZE_NOTIFICATION freeze notification cookie mismatch",
        None,
        |_| log(Log::FreezeCookieMismatch),
    ),
    // The ref's cookie names no listener of the process (an invariant
    // broken); not compared.
    (
        "%d:%d BC_CLEAR_FREEZE_NOTIFICATION invalid cookie %d",
        None,
        |_| Some(Class::Known("freeze-invalid-cookie")),
    ),
    // Thread::push_reply_work, push_return_work: a second error for a
    // thread that has one
    ("Thread %s work is already in use.", None, |_| {
        Some(Class::Known("thread-work-in-use"))
    }),
    // Node::remove_freeze_listener
    ("Could not remove freeze listener for %d", None, |_| {
        Some(Class::Known("freeze-listener-not-removed"))
    }),
    // Transaction::new: a one-way transaction with a stack
    (
        "Oneway transaction should not be in a transaction stack.",
        None,
        |_| Some(Class::Known("oneway-with-stack")),
    ),
    // Thread::read: a work getter's error other than EINTR or EAGAIN
    ("Failure in work getter: %*", None, |_| {
        Some(Class::Known("work-getter-failed"))
    }),
    // Allocation::drop with TF_CLEAR_BUF
    ("Failed to clear data on free: %*", None, |_| {
        Some(Class::Known("clear-buf-failed"))
    }),
];

/// The table of a driver.
pub fn table(driver: Driver) -> &'static [Entry] {
    match driver {
        Driver::C => C_TABLE,
        Driver::Rust => RUST_TABLE,
    }
}

/// The `pr_fmt` prefixes of each driver's lines.
pub fn modules(driver: Driver) -> &'static [&'static str] {
    match driver {
        Driver::C => &["binder_linux", "binder", "binder_alloc"],
        Driver::Rust => &["rust_binder", "binder"],
    }
}

/// Matches `text` against a pattern; the captures on success.
pub fn matches(pattern: &str, text: &str) -> Option<Vec<Cap>> {
    let mut caps = Vec::new();
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < p.len() {
        if p[i] == b'%' && i + 1 < p.len() {
            let kind = p[i + 1];
            i += 2;
            let start = j;
            match kind {
                b'd' | b'u' => {
                    if kind == b'd' && j < t.len() && t[j] == b'-' {
                        j += 1;
                    }
                    while j < t.len() && t[j].is_ascii_digit() {
                        j += 1;
                    }
                    let s = std::str::from_utf8(&t[start..j]).ok()?;
                    caps.push(Cap::Num(s.parse().ok()?));
                }
                b'x' => {
                    while j < t.len() && t[j].is_ascii_hexdigit() {
                        j += 1;
                    }
                    let s = std::str::from_utf8(&t[start..j]).ok()?;
                    caps.push(Cap::Num(i128::from_str_radix(s, 16).ok()?));
                }
                b's' => {
                    // A word: up to the pattern's next literal byte (or a
                    // space).
                    let stop = p.get(i).copied();
                    while j < t.len() && t[j] != b' ' && Some(t[j]) != stop {
                        j += 1;
                    }
                    if j == start {
                        return None;
                    }
                    caps.push(Cap::Text(
                        String::from_utf8_lossy(&t[start..j]).into_owned(),
                    ));
                }
                b'*' => {
                    caps.push(Cap::Text(String::from_utf8_lossy(&t[j..]).into_owned()));
                    return Some(caps);
                }
                _ => return None,
            }
        } else {
            if j >= t.len() || p[i] != t[j] {
                return None;
            }
            i += 1;
            j += 1;
        }
    }
    (j == t.len()).then_some(caps)
}

/// Splits `<6>[   12.345678] prefix: message` into its parts.
fn split(raw: &str) -> (Option<u8>, Option<f64>, &str) {
    let mut rest = raw.trim_end_matches(['\r', '\n']);
    let mut level = None;
    if let Some(r) = rest.strip_prefix('<') {
        if let Some((n, r)) = r.split_once('>') {
            level = n.parse::<u16>().ok().map(|n| (n & 7) as u8);
            rest = r;
        }
    }
    let mut time = None;
    if let Some(r) = rest.strip_prefix('[') {
        if let Some((t, r)) = r.split_once(']') {
            time = t.trim().parse().ok();
            rest = r.strip_prefix(' ').unwrap_or(r);
        }
    }
    (level, time, rest)
}

/// Classifies one raw line for `driver`.
pub fn classify(raw: &str, driver: Driver) -> LogLine {
    let (level, time, body) = split(raw);
    let (module, message) = match body.split_once(": ") {
        Some((m, msg)) if modules(driver).contains(&m) => (Some(m.to_string()), msg),
        _ => (None, body),
    };
    let message = message.trim_end();
    let mut limit = None;
    let class = if let Some(c) = matches("%s: %d callbacks suppressed", message) {
        Class::Suppressed {
            site: c[0].text().to_string(),
            count: c[1].u32().unwrap_or(0),
        }
    } else if module.is_none() {
        let splat = [
            "WARNING:",
            "kernel BUG",
            "BUG:",
            "Oops",
            "------------[ cut here ]",
            // The soft-lockup and hung-task detectors.
            "watchdog: BUG:",
            "INFO: task ",
        ];
        if message.starts_with("kernel BUG at drivers/android/") {
            Class::Log(Log::Bug)
        } else if splat.iter().any(|s| message.starts_with(s)) {
            Class::Splat
        } else {
            Class::Foreign
        }
    } else {
        table(driver)
            .iter()
            .find_map(|(pattern, l, make)| {
                let class = make(&matches(pattern, message)?)?;
                limit = *l;
                Some(class)
            })
            .unwrap_or(Class::Unclassified)
    };
    LogLine {
        raw: raw.to_string(),
        level,
        time,
        module,
        message: message.to_string(),
        class,
        limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matcher() {
        assert_eq!(
            matches(
                "%d:%d %s invalid ref %d",
                "12:12 BC_CLEAR_DEATH_NOTIFICATION invalid ref 3"
            ),
            Some(vec![
                Cap::Num(12),
                Cap::Num(12),
                Cap::Text("BC_CLEAR_DEATH_NOTIFICATION".into()),
                Cap::Num(3)
            ])
        );
        assert_eq!(matches("a %d", "a 1 b"), None);
        assert_eq!(matches("x %x", "x 00ff"), Some(vec![Cap::Num(255)]));
        assert_eq!(matches("r %d", "r -22"), Some(vec![Cap::Num(-22)]));
    }

    #[test]
    fn rate_limit_windows_follow_the_printed_lines() {
        // ___ratelimit, lib/ratelimit.c: a window begins with the first
        // call after the last one's interval, and prints 10 lines.
        let debug = |t: f64| {
            classify(
                &format!("<6>[{t:12.6}] binder_linux: 1:1 cannot find target node"),
                Driver::C,
            )
        };
        let user = |t: f64| {
            classify(
                &format!(
                    "<6>[{t:12.6}] binder_linux: 1:1 BC_CLEAR_DEATH_NOTIFICATION invalid ref 3"
                ),
                Driver::C,
            )
        };
        assert_eq!(debug(1.0).limit, Some(Limit::Debug));
        assert_eq!(user(1.0).limit, Some(Limit::UserError));
        let pr_info = classify(
            "<6>[ 1.0] binder_linux: 1:1 ioctl 1 2 returned -22",
            Driver::C,
        );
        assert_eq!(
            pr_info.limit, None,
            "binder_ioctl's line is a plain pr_info"
        );
        let mut r = RateLimits::default();
        for i in 0..9 {
            r.observe(&debug(10.0 + f64::from(i) * 0.1));
        }
        r.observe(&user(10.0));
        assert!(!r.full(Limit::Debug) && !r.owes(Limit::Debug), "9 of 10");
        r.observe(&debug(14.9));
        assert!(r.full(Limit::Debug) && r.owes(Limit::Debug), "the burst");
        assert!(!r.full(Limit::UserError), "each limit its own window");
        assert_eq!(r.window(Limit::Debug).map(|w| w.start), Some(10.0));
        r.observe(&debug(15.1));
        assert_eq!(
            r.window(Limit::Debug),
            Some(Window {
                start: 15.1,
                printed: 1
            }),
            "5 s after the window began, a line begins the next"
        );
        assert!(
            !r.owes(Limit::Debug),
            "no report came first: nothing was dropped"
        );
        for i in 0..9 {
            r.observe(&debug(15.2 + f64::from(i) * 0.01));
        }
        assert!(r.owes(Limit::Debug));
        r.observe(&classify(
            "<4>[   21.0] binder_debug: 3 callbacks suppressed",
            Driver::C,
        ));
        assert!(
            !r.owes(Limit::Debug) && r.window(Limit::Debug).is_none(),
            "reported"
        );
    }
}
