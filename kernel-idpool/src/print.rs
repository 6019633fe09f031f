//! `pr_err!` and `pr_info!`: the kernel's log, kept per thread so that a
//! test can check what was logged. With `KERNEL_IDPOOL_PRINTK=1` in the
//! environment each line is also written to standard error.

use std::cell::RefCell;
use std::collections::VecDeque;

/// A log level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// `pr_err!`.
    Err,
    /// `pr_info!`.
    Info,
}

/// The most lines kept per thread; older ones are dropped.
pub const LOG_CAPACITY: usize = 1024;

thread_local! {
    static LOG: RefCell<VecDeque<(Level, String)>> = const { RefCell::new(VecDeque::new()) };
}

/// Logs one line (what the macros call).
pub fn printk(level: Level, args: core::fmt::Arguments<'_>) {
    let line = args.to_string();
    if std::env::var_os("KERNEL_IDPOOL_PRINTK").is_some_and(|v| v == "1") {
        eprintln!("[{level:?}] {line}");
    }
    LOG.with_borrow_mut(|log| {
        if log.len() == LOG_CAPACITY {
            log.pop_front();
        }
        log.push_back((level, line));
    });
}

/// Takes this thread's log, oldest line first, leaving it empty.
pub fn take_log() -> Vec<(Level, String)> {
    LOG.with_borrow_mut(|log| log.drain(..).collect())
}

/// `pr_err!(fmt, args...)`: logs at [`Level::Err`].
#[macro_export]
macro_rules! pr_err {
    ($($arg:tt)*) => {
        $crate::print::printk($crate::print::Level::Err, ::core::format_args!($($arg)*))
    };
}

/// `pr_info!(fmt, args...)`: logs at [`Level::Info`].
#[macro_export]
macro_rules! pr_info {
    ($($arg:tt)*) => {
        $crate::print::printk($crate::print::Level::Info, ::core::format_args!($($arg)*))
    };
}
