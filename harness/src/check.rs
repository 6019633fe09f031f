//! Failure reporting shared by the runners.
//!
//! Every failure of the harness goes through [`At::fail_check`] (or
//! [`fail`]), so every panic message has the same shape:
//!
//! ```text
//! pool_ops: step 7 `Commit(2)` (capacity 128): capacity: expected 128, got 64
//! ```
//!
//! Before panicking, the failure is also kept, structured, for the triage
//! tool ([`take_last_failure`]), which groups failures by how the oracle
//! failed ([`Failure::signature`]) rather than by stack frames. A runner can
//! also narrate every comparison it makes ([`start_narrating`]), which is
//! how `triage repro` shows a run side by side.

use core::fmt::{self, Debug, Display};
use std::cell::RefCell;

/// A failed check, structured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The target.
    pub target: &'static str,
    /// The step (0-based) at which it failed.
    pub step: usize,
    /// The kind of operation that failed (`Commit`, `Insert`, ...).
    pub op_kind: String,
    /// Which check failed (`capacity`, `idpool: outcome`, `livelock`, ...).
    pub check: String,
    /// The capacity of the pool when it failed.
    pub capacity: usize,
    /// The whole message.
    pub message: String,
}

impl Failure {
    /// How the oracle failed: target, check, op kind, capacity regime. Two
    /// failures with the same signature are taken to be the same bug.
    pub fn signature(&self) -> String {
        let regime = match self.capacity {
            0 => "no-bitmap",
            1..=64 => "inline",
            65..=128 => "two-words",
            129..=4096 => "small",
            4097..=1048576 => "deep",
            _ => "huge",
        };
        format!("{}/{}/{}/{regime}", self.target, self.check, self.op_kind)
    }
}

/// What a runner is doing right now: target, step, op kind, capacity.
type Context = (&'static str, usize, String, usize);

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
    static LAST_FAILURE: RefCell<Option<Failure>> = const { RefCell::new(None) };
    static NARRATION: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Runners call this as each step starts: a panic that does not come from
/// a check (an assertion inside the allocator, say) is then attributed to
/// the step by [`failure_from_panic`], and a narration gets a header line.
pub fn begin_step(target: &'static str, step: usize, op: &impl Debug, capacity: usize) {
    CURRENT.with(|c| *c.borrow_mut() = Some((target, step, kind_of(op), capacity)));
    narrate(|| format!("step {step}: {op:?} (capacity {capacity})"));
}

/// The last failure on this thread, if any, clearing it.
pub fn take_last_failure() -> Option<Failure> {
    LAST_FAILURE.with(|f| f.borrow_mut().take())
}

/// The failure behind a caught panic: the one a check recorded, or else one
/// built from the panic's message and the step that was running.
pub fn failure_from_panic(payload: &(dyn std::any::Any + Send)) -> Failure {
    if let Some(failure) = take_last_failure() {
        return failure;
    }
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into());
    let (target, step, op_kind, capacity) =
        CURRENT
            .with(|c| c.borrow().clone())
            .unwrap_or(("?", 0, "?".into(), 0));
    // The first clause of the message names the check: "handle table
    // corruption", "attempt to subtract with overflow", ...
    let first = message.split([':', '\n']).next().unwrap_or_default();
    Failure {
        target,
        step,
        op_kind,
        check: format!("panic: {}", check_name(first)),
        capacity,
        message: format!("{target}: step {step} (capacity {capacity}): panic: {message}"),
    }
}

/// Records `failure` for [`take_last_failure`] and panics with its message.
#[track_caller]
pub fn fail(failure: Failure) -> ! {
    let message = failure.message.clone();
    LAST_FAILURE.with(|f| *f.borrow_mut() = Some(failure));
    panic!("{message}")
}

/// From now on, on this thread, every comparison is recorded until
/// [`stop_narrating`].
pub fn start_narrating() {
    NARRATION.with(|n| *n.borrow_mut() = Some(Vec::new()));
}

/// Stops recording comparisons.
pub fn stop_narrating() {
    NARRATION.with(|n| *n.borrow_mut() = None);
}

/// Takes the comparisons recorded since the last call.
pub fn take_narration() -> Vec<String> {
    NARRATION.with(|n| {
        n.borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    })
}

/// Records one line of narration, if narrating.
pub fn narrate(line: impl FnOnce() -> String) {
    NARRATION.with(|n| {
        if let Some(lines) = n.borrow_mut().as_mut() {
            lines.push(line());
        }
    });
}

/// The name of an operation's variant: the Debug text up to the first
/// space or parenthesis.
pub fn kind_of(op: &impl Debug) -> String {
    let text = format!("{op:?}");
    text.split([' ', '(', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The check's name from what was compared: the text before any
/// per-request detail, with digits folded so that `#3` and `#7` agree.
fn check_name(what: &str) -> String {
    let head = what.split(" of request").next().unwrap_or(what);
    let head = head.split(" of the bulk").next().unwrap_or(head);
    let head = head.split(": expected").next().unwrap_or(head);
    head.chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}

/// Where a runner is: which target, which step, which operation, and the
/// capacity at that moment.
pub struct At<'a, Op: Debug> {
    /// The target's name.
    pub target: &'static str,
    /// The step's index in the op list (0-based).
    pub step: usize,
    /// The operation being checked.
    pub op: &'a Op,
    /// The pool's capacity when the step started.
    pub capacity: usize,
}

impl<Op: Debug> At<'_, Op> {
    /// Panics with the step, the operation and what went wrong; `check`
    /// names the check for the failure's signature.
    #[track_caller]
    pub fn fail_check(&self, check: &str, what: impl Display) -> ! {
        fail(Failure {
            target: self.target,
            step: self.step,
            op_kind: kind_of(self.op),
            check: check_name(check),
            capacity: self.capacity,
            message: format!(
                "{}: step {} `{:?}` (capacity {}): {what}",
                self.target, self.step, self.op, self.capacity
            ),
        })
    }

    /// Panics unless `expected == actual`, naming `what` was compared
    /// (formatted only on failure or when narrating: pass `format_args!`
    /// rather than a `String`).
    #[track_caller]
    pub fn eq<T: PartialEq + Debug>(&self, what: impl Display, expected: T, actual: T) {
        narrate(|| format!("{what}: model {expected:?} | allocator {actual:?}"));
        if expected != actual {
            let what = what.to_string();
            self.fail_check(
                &what,
                format_args!("{what}: expected {expected:?}, got {actual:?}"),
            );
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
