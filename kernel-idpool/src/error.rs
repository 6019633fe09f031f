//! `kernel::error`, as far as the kernel files' examples use it: `Error`,
//! the error codes they return and `Result`.

use core::fmt;

/// A negative errno (the kernel's `kernel::error::Error`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error(i32);

impl Error {
    /// The negative errno.
    pub fn to_errno(self) -> i32 {
        self.0
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match -self.0 {
            12 => "ENOMEM",
            22 => "EINVAL",
            28 => "ENOSPC",
            _ => return write!(f, "Error({})", self.0),
        };
        f.write_str(name)
    }
}

impl From<crate::alloc::AllocError> for Error {
    fn from(_: crate::alloc::AllocError) -> Self {
        code::ENOMEM
    }
}

/// The error codes.
pub mod code {
    use super::Error;

    /// `-ENOMEM`.
    pub const ENOMEM: Error = Error(-12);
    /// `-EINVAL`.
    pub const EINVAL: Error = Error(-22);
    /// `-ENOSPC`.
    pub const ENOSPC: Error = Error(-28);
}

/// The kernel's `Result`, with `Error` as the default error.
pub type Result<T = (), E = Error> = core::result::Result<T, E>;
