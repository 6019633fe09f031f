//! The text format of a reproducer: a trace.
//!
//! Raw fuzzer bytes change meaning whenever an op enum changes; a trace does
//! not. It names the target and lists the operations (and, for
//! `concurrent_resize`, the program and the schedule) in words a person can
//! read and edit. Regression tests are stored as traces.
//!
//! This module keeps the header and the version; which target a header
//! names is the list's business (`crate::targets::parse_trace`, through
//! [`crate::registry::parse_trace`]), and each target parses its own body,
//! each op type its own line ([`crate::text::OpText`]).
//!
//! The grammar, every line a trace may hold and the range of every number,
//! is `docs/trace-format.md`; a test parses every example there.
//!
//! Every number is checked against the documented range of its op
//! ([`crate::text::limits`]) before anything runs: a trace is text a person
//! may write, and any accepted trace replays in seconds.
//!
//! Printing then parsing is the identity; so is parsing then printing, for a
//! trace in canonical form (single spaces, no comments).

use crate::check::Checked;
use crate::events::Events;
use core::fmt;
use std::any::Any;

/// The first line of every trace.
pub const MAGIC: &str = "idpool-trace";
/// The format version this build reads and writes.
pub const VERSION: &str = "v1";

/// What a trace holds: one target's input, in its own form. Each target's
/// trace form implements it (see [`crate::registry::OpsTrace`]).
pub trait TraceBody: fmt::Debug + Send + Sync {
    /// The name of the target it replays on.
    fn target(&self) -> &'static str;
    /// The number of operations.
    fn len(&self) -> usize;
    /// Whether there is no operation at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Writes the lines after the header, each ending in a newline.
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Replays it; the first failure is the error.
    fn replay(&self) -> Checked<Events>;
    /// One pass of the minimiser: a smaller trace for which `fails` still
    /// holds (the same one when none is found).
    fn shrink(&self, fails: &mut dyn FnMut(&Trace) -> bool) -> Trace;
    /// A copy.
    fn clone_trace(&self) -> Trace;
    /// For [`TraceBody::same`] and for tests that look inside.
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is the same trace.
    fn same(&self, other: &dyn TraceBody) -> bool;
}

/// A reproducer: a target and its input.
pub struct Trace(Box<dyn TraceBody>);

/// Why a trace could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The 1-based line, 0 for the input as a whole.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.message),
            n => write!(f, "line {n}: {}", self.message),
        }
    }
}

impl std::error::Error for ParseError {}

impl Trace {
    /// Wraps a target's trace form.
    pub fn new(body: impl TraceBody + 'static) -> Trace {
        Trace(Box::new(body))
    }

    /// The body, to look inside (`trace.body().downcast_ref::<T>()`).
    pub fn body(&self) -> &dyn Any {
        self.0.as_any()
    }

    /// The name of the target this trace replays on.
    pub fn target(&self) -> &'static str {
        self.0.target()
    }

    /// The number of operations (for a concurrent trace: every thread's
    /// operations plus one for a nonzero prefill).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the trace has no operation at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replays the trace; the first divergence or broken invariant is the
    /// error. A panic inside the allocator is not caught here (see
    /// [`crate::check::catching`]).
    pub fn check(&self) -> Checked<Events> {
        self.0.replay()
    }

    /// Replays the trace and panics, as the fuzz target would, at the
    /// first failure (a known upstream finding only when `IDPOOL_HISTORY`
    /// asks for it: see [`crate::history::settle`]).
    pub fn replay(&self) -> Events {
        crate::history::settle(self.check())
    }

    /// One pass of the minimiser (see [`TraceBody::shrink`]).
    pub fn shrink(&self, fails: &mut dyn FnMut(&Trace) -> bool) -> Trace {
        self.0.shrink(fails)
    }
}

/// A body line: its number and its words, split at single spaces.
pub type Line<'t> = (usize, Vec<&'t str>);

/// Reads a trace's header: the line of its `target` line, the target's
/// name, and the body's lines (comments and blank lines left out).
///
/// # Examples
///
/// ```
/// let text = "# found by a campaign\nidpool-trace v1\ntarget pool_ops\nacquire 3\n";
/// let (line, target, mut body) = idpool_harness::trace::header(text).unwrap();
/// assert_eq!((line, target), (3, "pool_ops"));
/// assert_eq!(body.next(), Some((4, vec!["acquire", "3"])));
/// ```
pub fn header(text: &str) -> Result<(usize, &str, impl Iterator<Item = Line<'_>>), ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let err = |line, message: String| ParseError { line, message };
    let Some((n, first)) = lines.next() else {
        return Err(err(0, "empty trace".into()));
    };
    match first.split_once(' ') {
        Some((MAGIC, VERSION)) => {}
        Some((MAGIC, v)) => {
            return Err(err(
                n,
                format!("unsupported trace version {v:?} (this build reads {VERSION})"),
            ))
        }
        _ => {
            return Err(err(
                n,
                format!("not a trace: expected `{MAGIC} {VERSION}`, found {first:?}"),
            ))
        }
    }
    let Some((n, target_line)) = lines.next() else {
        return Err(err(0, "truncated trace: no `target` line".into()));
    };
    let Some(("target", name)) = target_line.split_once(' ') else {
        return Err(err(
            n,
            format!("expected `target <name>`, found {target_line:?}"),
        ));
    };
    Ok((n, name, lines.map(|(n, l)| (n, l.split(' ').collect()))))
}

impl Clone for Trace {
    fn clone(&self) -> Self {
        self.0.clone_trace()
    }
}

impl PartialEq for Trace {
    fn eq(&self, other: &Self) -> bool {
        self.0.same(other.0.as_ref())
    }
}

impl Eq for Trace {}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{MAGIC} {VERSION}")?;
        writeln!(f, "target {}", self.target())?;
        self.0.write_body(f)
    }
}
