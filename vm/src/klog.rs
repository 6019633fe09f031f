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

use crate::wire::Driver;
use idpool::driver::Log;

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
}

type Make = fn(&[Cap]) -> Option<Class>;

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
    } else {
        Some(Class::Known("undelivered-work"))
    }
}

/// The C driver's lines (`drivers/android/binder.c`, 7.3), by function.
pub const C_TABLE: &[(&str, Make)] = &[
    // binder_thread_write, BC_INCREFS..BC_DECREFS on handle 0
    ("%d:%d context manager tried to acquire desc 0", |_| {
        log(Log::ManagerAcquiresZero)
    }),
    (
        "%d:%d tried to acquire reference to desc %d, got %d instead",
        |c| {
            log(Log::GotOtherHandle {
                wanted: c[2].u32()?,
                got: c[3].u32()?,
            })
        },
    ),
    (
        "%d:%d %s %d refcount change on invalid ref %d ret %d",
        |c| log(Log::InvalidRef(c[4].u32()?)),
    ),
    // binder_inc_ref_olocked
    ("tried to use weak ref as strong ref", |_| {
        log(Log::WeakAsStrong)
    }),
    // binder_dec_ref_olocked
    ("%d invalid dec strong, ref %d desc %d s %d w %d", |_| {
        log(Log::InvalidDecrement { strong: true })
    }),
    ("%d invalid dec weak, ref %d desc %d s %d w %d", |_| {
        log(Log::InvalidDecrement { strong: false })
    }),
    // binder_ioctl_set_ctx_mgr
    ("BINDER_SET_CONTEXT_MGR already set", |_| {
        log(Log::ManagerAlreadySet)
    }),
    ("BINDER_SET_CONTEXT_MGR bad uid %d != %d", |_| {
        log(Log::ManagerBadUid)
    }),
    // binder_transaction
    ("%d:%d got transaction to invalid handle, %u", |c| {
        log(Log::TransactionToInvalidHandle(c[2].u32()?))
    }),
    ("%d:%d cannot find target node", |_| log(Log::NoTargetNode)),
    (
        "%d:%d got transaction to context manager from process owning it",
        |_| log(Log::TransactionToOwnManager),
    ),
    (
        "%d:%d transaction %s to %d:%d failed %d/%d/%d, code %u size %d-%d line %d",
        |_| log(Log::TransactionFailed),
    ),
    ("%d:%d translate handle failed", |_| {
        log(Log::TranslateFailed)
    }),
    ("%d:%d translate binder failed", |_| {
        log(Log::TranslateFailed)
    }),
    ("%d:%d self transactions not allowed", |_| {
        Some(Class::Known("self-transaction"))
    }),
    ("%d:%d %s process or thread", |_| log(Log::DeadProcess)),
    ("%d:%d cannot allocate %*", |_| {
        Some(Class::Known("transaction-alloc-failed"))
    }),
    ("cannot allocate buffer%*", |_| {
        Some(Class::Known("transaction-alloc-failed"))
    }),
    // binder_translate_handle
    ("%d:%d got transaction with invalid handle, %d", |c| {
        log(Log::ObjectInvalidHandle(c[2].u32()?))
    }),
    // binder_translate_binder
    (
        "%d:%d sending u%x node %d, cookie mismatch %x != %x",
        |_| Some(Class::Known("node-cookie-mismatch")),
    ),
    // binder_thread_write, death notifications
    ("%d:%d %s invalid ref %d", |c| match c[2].text() {
        "BC_REQUEST_DEATH_NOTIFICATION" => log(Log::DeathInvalidRef { request: true }),
        "BC_CLEAR_DEATH_NOTIFICATION" => log(Log::DeathInvalidRef { request: false }),
        _ => None,
    }),
    (
        "%d:%d BC_REQUEST_DEATH_NOTIFICATION death notification already set",
        |_| log(Log::DeathAlreadySet),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification not active",
        |_| log(Log::DeathNotActive),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification cookie mismatch %x != %x",
        |_| log(Log::DeathCookieMismatch),
    ),
    ("%d:%d BC_DEAD_BINDER_DONE %x not found", |_| {
        log(Log::DeadBinderDoneNotFound)
    }),
    // binder_inc_node_nilocked
    ("invalid inc strong node for %d", |_| {
        log(Log::InvalidIncStrongNode)
    }),
    // binder_thread_write, BC_INCREFS_DONE / BC_ACQUIRE_DONE
    (
        "%d:%d BC_ACQUIRE_DONE node %d has no pending acquire request",
        |_| log(Log::IncRefDoneUnexpected),
    ),
    (
        "%d:%d BC_INCREFS_DONE node %d has no pending increfs request",
        |_| log(Log::IncRefDoneUnexpected),
    ),
    ("%d:%d %s u%x no match", |_| {
        Some(Class::Known("ref-done-no-node"))
    }),
    ("%d:%d %s u%x node %d cookie mismatch %x != %x", |_| {
        Some(Class::Known("ref-done-cookie-mismatch"))
    }),
    // binder_thread_write, BC_FREE_BUFFER
    ("%d:%d BC_FREE_BUFFER %*", |_| {
        Some(Class::Known("free-buffer-no-match"))
    }),
    // binder_ioctl_get_node_info_for_ref
    (
        "%d BINDER_GET_NODE_INFO_FOR_REF: only handle may be non-zero.",
        |_| log(Log::NodeInfoBadArgs),
    ),
    // binder_ioctl, any failed ioctl (plain pr_info, no rate limit)
    ("%d:%d ioctl %x %x returned %d", |c| {
        log(Log::IoctlFailed(errno(-c[4].num()?)?))
    }),
    // binder_release_work, binder_thread_release (dead transactions)
    ("undelivered %*", |c| undelivered(c[0].text())),
    ("transaction release %d bad handle %d, ret = %d", |_| {
        log(Log::BadBufferObject)
    }),
    ("transaction release %d bad node %x", |_| {
        log(Log::BadBufferObject)
    }),
    ("unexpected work type, %d, not freed", |_| {
        log(Log::UnexpectedWork)
    }),
    ("release %d:%d transaction %d %s, still active", |_| {
        Some(Class::Known("release-active-transaction"))
    }),
    ("send failed reply for transaction %*", |_| {
        Some(Class::Known("failed-reply-sent"))
    }),
    // binder_alloc
    ("%d: binder_alloc_buf%*", |_| {
        Some(Class::Known("alloc-failed"))
    }),
];

/// The Rust driver's lines (`drivers/android/binder/`, 7.3): its
/// `binder_debug!` lines (`pr_info!`, no rate limit) and its `pr_warn!`s.
pub const RUST_TABLE: &[(&str, Make)] = &[
    // Context::set_manager_node
    ("BINDER_SET_CONTEXT_MGR already set", |_| {
        log(Log::ManagerAlreadySet)
    }),
    // Node::update_refcount_locked
    ("Failure: refcount underflow!", |_| {
        log(Log::RefcountUnderflow)
    }),
    // Process::get_ref_for_node (insert into by_handle)
    (
        "Detected mismatch between handle_is_present and by_handle",
        |_| log(Log::PoolMismatch),
    ),
    // Process::update_ref (BC_INCREFS..BC_DECREFS)
    ("%d:%d no such ref %d", |c| {
        log(Log::InvalidRef(c[2].u32()?))
    }),
    ("%d:%d tried to use weak ref as strong ref", |_| {
        log(Log::WeakAsStrong)
    }),
    // Thread::transaction, Process::get_transaction_node
    ("%d:%d got transaction to invalid handle %u", |c| {
        log(Log::TransactionToInvalidHandle(c[2].u32()?))
    }),
    ("%d:%d transaction %s to %d:%d failed %*", |_| {
        log(Log::TransactionFailed)
    }),
    ("%d:%d error while translating object: %*", |_| {
        log(Log::TranslateFailed)
    }),
    ("Failed to allocate buffer. len:%d, is_oneway:%s", |_| {
        log(Log::BufferAllocFailed)
    }),
    ("%d:%d performed invalid %s decrement on ref", |c| {
        log(Log::InvalidDecrement {
            strong: c[2].text() == "strong",
        })
    }),
    ("%d:%d inc_ref_done called when no active inc_refs", |_| {
        log(Log::IncRefDoneUnexpected)
    }),
    // Process::request_death, Process::clear_death
    ("%d:%d %s invalid ref %d", |c| match c[2].text() {
        "BC_REQUEST_DEATH_NOTIFICATION" => log(Log::DeathInvalidRef { request: true }),
        "BC_CLEAR_DEATH_NOTIFICATION" => log(Log::DeathInvalidRef { request: false }),
        _ => None,
    }),
    (
        "%d:%d BC_REQUEST_DEATH_NOTIFICATION death notification already set",
        |_| log(Log::DeathAlreadySet),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification not active",
        |_| log(Log::DeathNotActive),
    ),
    (
        "%d:%d BC_CLEAR_DEATH_NOTIFICATION death notification cookie mismatch%*",
        |_| log(Log::DeathCookieMismatch),
    ),
    // Process::deferred_release and the work it drops
    ("%d: undelivered %*", |c| undelivered(c[1].text())),
    // Thread::write_read
    ("Write failure %s in pid:%d", |c| {
        log(Log::IoctlFailed(rust_errno(c[0].text())?))
    }),
    ("Read failure %s in pid:%d", |c| {
        log(Log::IoctlFailed(rust_errno(c[0].text())?))
    }),
    ("Failure in copy_transaction_data: %*", |_| {
        log(Log::CopyFailed)
    }),
    ("Notification added to `delivered_deaths` twice.", |_| {
        Some(Class::Known("death-delivered-twice"))
    }),
    ("%d:%d reply to %d failed: %*", |_| {
        Some(Class::Known("reply-failed"))
    }),
];

/// The table of a driver.
pub fn table(driver: Driver) -> &'static [(&'static str, Make)] {
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
            .find_map(|(pattern, make)| make(&matches(pattern, message)?))
            .unwrap_or(Class::Unclassified)
    };
    LogLine {
        raw: raw.to_string(),
        level,
        time,
        module,
        message: message.to_string(),
        class,
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
}
