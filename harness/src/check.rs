//! Failure reporting shared by the runners.

use core::fmt::Debug;

/// Where a runner is: which target, which step, which operation.
///
/// Every failure of the harness goes through [`At::fail`], so every panic
/// message has the same shape:
///
/// ```text
/// pool_ops: step 7 `Commit(#2)`: capacity: expected 128, got 64
/// ```
pub struct At<'a, Op: Debug> {
    /// The target's name.
    pub target: &'static str,
    /// The step's index in the op list (0-based).
    pub step: usize,
    /// The operation being checked.
    pub op: &'a Op,
}

impl<Op: Debug> At<'_, Op> {
    /// Panics with the step, the operation and `what` went wrong.
    #[track_caller]
    pub fn fail(&self, what: impl core::fmt::Display) -> ! {
        panic!(
            "{}: step {} `{:?}`: {what}",
            self.target, self.step, self.op
        )
    }

    /// Panics unless `expected == actual`, naming `what` was compared
    /// (formatted only on failure: pass `format_args!` rather than a `String`).
    #[track_caller]
    pub fn eq<T: PartialEq + Debug>(&self, what: impl core::fmt::Display, expected: T, actual: T) {
        if expected != actual {
            self.fail(format_args!(
                "{what}: expected {expected:?}, got {actual:?}"
            ));
        }
    }
}
