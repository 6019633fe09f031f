//! The text format of a reproducer: a trace.
//!
//! Raw fuzzer bytes change meaning whenever an op enum changes; a trace does
//! not. It names the target and lists the operations (and, for
//! `concurrent_resize`, the program and the schedule) in words a person can
//! read and edit. Regression tests are stored as traces.
//!
//! This module keeps the header, the version and the dispatch to the
//! target's trace form (see [`crate::registry`]); each op type prints and
//! parses its own line ([`crate::text::OpText`]).
//!
//! # Grammar
//!
//! ```text
//! trace      := "idpool-trace v1" NL "target" SP target NL { line NL }
//! line       := comment | op | program-line
//! comment    := "#" text                       (ignored; so are blank lines)
//! target     := "pool_ops" | "dbitmap_ops" | "handle_table" | "concurrent_resize"
//!
//! pool op    := "acquire" SP point | "find" SP point | "release" SP point
//!             | "prepare" SP ("grow" | "shrink") [SP "fail"] | "commit" SP n
//!             | "acquire-many" SP point SP n | "release-many" SP point SP n
//!             | "release-from" SP point | "reset" SP n | "probe-ceiling" SP n
//! table      := { "version" SP version NL } { "versus" SP version NL } { table op NL }
//! table op   := "insert" SP node [SP "manager"] | "inc" SP sel | "dec" SP sel
//!             | "lookup" SP node | "kill" | "fail-next" SP n [SP "at" SP site]
//!             | "insert-many" SP n | "drop-from" SP sel | "drop-all" SP ("fifo" | "lifo")
//!             | "corrupt" SP "clear" SP sel | "corrupt" SP "set" SP point
//! version    := "c-2024-06" | "c-v3" | "c-mainline" | "rust-v1" | "rust-mainline"
//! program    := "pool" SP ("idpool" | "dbitmap") | "prefill" SP n | "keep" SP n
//!             | "thread" SP thread-op { ";" SP thread-op }
//!             | "schedule" { SP decision }
//! thread-op  := "insert" SP node [SP "manager"] | "release" SP "#" n
//!             | "release-prefill" SP "#" n | "inc" SP "#" n | "insert-many" SP n
//! decision   := "t" n ["!"] ["*" n]   (thread n runs; "!" fails its allocation; "*k": k times)
//! point      := n | ("cap/4" | "cap/2" | "cap") [("+1" | "-1")]
//! sel        := "#" n | "highest" | "=" point
//! node       := "n" n
//! site       := "ref" | "grow" | "shrink"
//! ```
//!
//! Every number is checked against the documented range of its op
//! ([`crate::text::limits`]) before anything runs: a trace is text a person
//! may write, and any accepted trace replays in seconds.
//!
//! Printing then parsing is the identity; so is parsing then printing, for a
//! trace in canonical form (single spaces, no comments).

use crate::check::Checked;
use crate::registry::{self, Target};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use std::any::Any;

/// The first line of every trace.
pub const MAGIC: &str = "idpool-trace";
/// The format version this build reads and writes.
pub const VERSION: &str = "v1";

/// What a trace holds: one target's input, in its own form. Each target's
/// trace form implements it (see [`crate::registry::OpsTrace`]).
pub trait TraceBody: fmt::Debug + Send + Sync {
    /// The target it replays on.
    fn target(&self) -> &'static dyn Target;
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
        self.0.target().name()
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

    /// The trace raw fuzzer bytes stand for, for target `target`; `None`
    /// for an unknown target or one without a trace form. A concurrent
    /// input is run once to record the schedule its bytes choose (up to a
    /// failure, if it fails).
    pub fn from_bytes(target: &str, data: &[u8]) -> Option<Trace> {
        registry::target(target)?.trace_from_bytes(data)
    }

    /// Replays the trace; the first divergence or broken invariant is the
    /// error. A panic inside the allocator is not caught here (see
    /// [`crate::check::catching`]).
    pub fn check(&self) -> Checked<Events> {
        self.0.replay()
    }

    /// Replays the trace and panics, as the fuzz target would, at the
    /// first failure (a known upstream finding only when `IDPOOL_HISTORY`
    /// asks for it: see [`crate::registry::settle`]).
    pub fn replay(&self) -> Events {
        crate::registry::settle(self.check())
    }

    /// One pass of the minimiser (see [`TraceBody::shrink`]).
    pub fn shrink(&self, fails: &mut dyn FnMut(&Trace) -> bool) -> Trace {
        self.0.shrink(fails)
    }

    /// Parses a trace; comments and blank lines are ignored.
    pub fn parse(text: &str) -> Result<Trace, ParseError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let err = |line, message: String| ParseError { line, message };
        let Some((n, header)) = lines.next() else {
            return Err(err(0, "empty trace".into()));
        };
        match header.split_once(' ') {
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
                    format!("not a trace: expected `{MAGIC} {VERSION}`, found {header:?}"),
                ))
            }
        }
        let Some((n, target_line)) = lines.next() else {
            return Err(err(0, "truncated trace: no `target` line".into()));
        };
        let target = match target_line.split_once(' ') {
            Some(("target", t)) => {
                registry::traceable()
                    .find(|k| k.name() == t)
                    .ok_or_else(|| {
                        let known = registry::traceable_names();
                        err(n, format!("unknown target {t:?} (known: {known})"))
                    })?
            }
            _ => {
                return Err(err(
                    n,
                    format!("expected `target <name>`, found {target_line:?}"),
                ))
            }
        };
        let mut body = lines.map(|(n, l)| (n, l.split(' ').collect::<Vec<_>>()));
        target.parse_body(&mut body)
    }
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

/// For the round-trip fuzz target and test: bytes become a trace of a
/// traceable target chosen by the first byte, which must print and parse
/// back to itself. Concurrent programs come with an arbitrary schedule (no
/// run).
pub fn roundtrip(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let targets: Vec<_> = registry::traceable().collect();
    let pick = u8::arbitrary(&mut u).unwrap_or(0) as usize % targets.len();
    let Some(trace) = targets[pick].arbitrary_trace(&mut u) else {
        return;
    };
    let text = trace.to_string();
    let parsed =
        Trace::parse(&text).unwrap_or_else(|e| panic!("printed trace does not parse: {e}\n{text}"));
    assert_eq!(parsed, trace, "parse(print(trace)) differs:\n{text}");
    assert_eq!(parsed.to_string(), text, "print(parse(text)) differs");
    // Whatever text the parser faces, it answers without panicking.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Trace::parse(text);
    }
}
