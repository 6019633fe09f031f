//! Where a runner is ([`At`]), and the comparisons it makes there: each
//! one narrated when narrating, and a [`Failure`] when expected and actual
//! differ.

use super::narrate::narrate;
use super::{Check, Checked, Failure, Flavour, Op};
use core::fmt::{Debug, Display};

/// Where a runner is: which target, which step, which operation, and the
/// capacity at that moment.
pub struct At<'a, O: Op> {
    /// The target's name.
    pub target: &'static str,
    /// The step's index in the op list (0-based).
    pub step: usize,
    /// The operation being checked.
    pub op: &'a O,
    /// The pool's capacity when the step started.
    pub capacity: usize,
}

impl<O: Op> At<'_, O> {
    /// The failure of `check` (about `flavour`, if any) at this step;
    /// `what` says what went wrong.
    pub fn failure(
        &self,
        check: Check,
        flavour: Option<Flavour>,
        what: impl Display,
    ) -> Box<Failure> {
        Box::new(Failure {
            target: self.target,
            step: self.step,
            op: self.op.kind(),
            check,
            flavour,
            phase: None,
            capacity: self.capacity,
            detail: None,
            message: format!(
                "{}: step {} `{:?}` (capacity {}): {what}",
                self.target, self.step, self.op, self.capacity
            ),
        })
    }

    /// Fails `check` unless `expected == actual`; its name is what was
    /// compared.
    pub fn eq<T: PartialEq + Debug>(&self, check: Check, expected: T, actual: T) -> Checked {
        // The name is formatted only when it is printed: a `String` per
        // comparison was a few percent of a run.
        let what = check.clone();
        self.compare(check, None, what, expected, actual)
    }

    /// Fails `check` (about `flavour`) unless `expected == actual`; `what`
    /// names what was compared (formatted only on failure or when
    /// narrating: pass `format_args!` rather than a `String`).
    pub fn compare<T: PartialEq + Debug>(
        &self,
        check: Check,
        flavour: Option<Flavour>,
        what: impl Display,
        expected: T,
        actual: T,
    ) -> Checked {
        narrate(|| format!("{what}: model {expected:?} | allocator {actual:?}"));
        if expected == actual {
            return Ok(());
        }
        Err(self.failure(
            check,
            flavour,
            format_args!("{what}: expected {expected:?}, got {actual:?}"),
        ))
    }
}
