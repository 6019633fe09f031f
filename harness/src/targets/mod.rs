//! The list of targets (the top of the harness): every target once, one
//! line each, in a fixed order, and the lookups by name that the engines'
//! entry ([`crate::fuzz`]), the triage tool, the binaries, the tests and
//! (through the `targets` binary) the scripts use.
//!
//! A target is its folder, declared here (`pub mod <name>;`), and one
//! line in [`TARGETS`] naming its registry entry, a `static` in the
//! folder's `mod.rs`. The one target
//! without a folder is `trace_roundtrip`, the trace format over every
//! traceable target of this list, defined here for that reason
//! ([`RoundtripTarget`]).

use crate::check::Checked;
use crate::events::Events;
use crate::registry::{self, Engine, Target};
use crate::trace::{Line, ParseError, Trace};
use arbitrary::Unstructured;

pub mod binder_commands;
pub mod concurrent_resize;
pub mod dbitmap_ops;
pub mod handle_table;
pub mod kernel_dbitmap;
pub mod kernel_idpool;
pub mod pool_ops;

/// Every target, in a fixed order (the `trace_roundtrip` target picks one
/// of the traceable targets by this order).
pub static TARGETS: &[&dyn Target] = &[
    &pool_ops::POOL_OPS,
    &dbitmap_ops::DBITMAP_OPS,
    &handle_table::HANDLE_TABLE,
    &concurrent_resize::CONCURRENT_RESIZE,
    &kernel_dbitmap::KERNEL_DBITMAP,
    &kernel_idpool::KERNEL_IDPOOL,
    &binder_commands::BINDER_COMMANDS,
    &TRACE_ROUNDTRIP,
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static dyn Target> {
    TARGETS.iter().copied().find(|t| t.name() == name)
}

/// The targets that have a corpus and a trace form: those `cargo test`
/// replays and triage knows.
pub fn traceable() -> impl Iterator<Item = &'static dyn Target> {
    registry::traceable(TARGETS)
}

/// The names of [`traceable`] targets, comma-separated, for messages.
pub fn traceable_names() -> String {
    traceable().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

/// Parses a trace of any traceable target; comments and blank lines are
/// ignored.
///
/// # Examples
///
/// ```
/// let trace = idpool_harness::targets::parse_trace(
///     "idpool-trace v1\ntarget pool_ops\nprepare grow\ncommit 0\n",
/// )
/// .unwrap();
/// assert_eq!((trace.target(), trace.len()), ("pool_ops", 2));
/// assert!(trace.check().is_ok());
/// ```
pub fn parse_trace(text: &str) -> Result<Trace, ParseError> {
    registry::parse_trace(text, TARGETS)
}

/// The trace raw fuzzer bytes stand for, for target `name`; `None` for an
/// unknown target or one without a trace form. A concurrent input is run
/// once to record the schedule its bytes choose (up to a failure, if it
/// fails).
pub fn trace_from_bytes(name: &str, data: &[u8]) -> Option<Trace> {
    target(name)?.trace_from_bytes(data)
}

/// `trace_roundtrip`: the trace parser and printer. No corpus, no trace
/// form, libFuzzer only, a hand-written dictionary.
pub static TRACE_ROUNDTRIP: RoundtripTarget = RoundtripTarget;

/// The `trace_roundtrip` target: the round-trip property of the trace
/// format ([`registry::roundtrip`]) over every traceable target of
/// [`TARGETS`].
pub struct RoundtripTarget;

impl Target for RoundtripTarget {
    fn name(&self) -> &'static str {
        "trace_roundtrip"
    }
    fn about(&self) -> &'static str {
        "the trace format: print then parse is the identity, and any text parses without a panic"
    }
    fn engines(&self) -> &'static [Engine] {
        &[Engine::LibFuzzer]
    }
    fn has_corpus(&self) -> bool {
        false
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        registry::roundtrip(data, TARGETS);
        Ok(Events::default())
    }
    fn trace_from_bytes(&'static self, _: &[u8]) -> Option<Trace> {
        None
    }
    fn parse_body(
        &'static self,
        _: &mut dyn Iterator<Item = Line<'_>>,
    ) -> Result<Trace, ParseError> {
        Err(ParseError {
            line: 0,
            message: "trace_roundtrip has no trace form".into(),
        })
    }
    fn arbitrary_trace(&'static self, _: &mut Unstructured<'_>) -> Option<Trace> {
        None
    }
    fn dictionary(&self) -> Option<String> {
        None
    }
}
