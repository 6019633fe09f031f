//! The target registry: every fuzz target, what it needs, how its bytes
//! decode, how it runs, and its trace form. `lib.rs`, `trace`, the triage
//! tool, `fuzz-dict`, `seed-corpus`, the tests and (through the `targets`
//! binary) the scripts all iterate [`TARGETS`].
//!
//! A target whose input is a list of operations is an [`OpsTarget`] over
//! an op type implementing [`OpLang`]: its decoding ([`crate::decode`]),
//! text form ([`OpText`]) and shrink rules come with the op type. A target
//! with a richer input (a program and a schedule) implements [`Target`]
//! itself.

use crate::check::{Checked, Op};
use crate::text::{OpText, Text};
use crate::trace::{ParseError, Trace, TraceBody};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use std::any::Any;

/// Every target, in a fixed order (the `trace_roundtrip` target picks one
/// of the traceable targets by this order).
pub static TARGETS: &[&dyn Target] = &[
    &crate::targets::POOL_OPS,
    &crate::targets::DBITMAP_OPS,
    &crate::targets::HANDLE_TABLE,
    &crate::targets::CONCURRENT_RESIZE,
    &crate::targets::TRACE_ROUNDTRIP,
    &crate::targets::KERNEL_DBITMAP,
    &crate::targets::BINDER_COMMANDS,
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static dyn Target> {
    TARGETS.iter().copied().find(|t| t.name() == name)
}

/// The targets that have a corpus and a trace form: those `cargo test`
/// replays and triage knows.
pub fn traceable() -> impl Iterator<Item = &'static dyn Target> {
    TARGETS.iter().copied().filter(|t| t.has_corpus())
}

/// The names of [`traceable`] targets, comma-separated, for messages.
pub fn traceable_names() -> String {
    traceable().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

/// A fuzz engine with glue for a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// libFuzzer through cargo-fuzz (`fuzz/fuzz_targets/`).
    LibFuzzer,
    /// AFL++ through afl.rs (`fuzz/afl/src/bin/`).
    Afl,
    /// honggfuzz-rs (`fuzz/honggfuzz/src/bin/`).
    Honggfuzz,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 3] = [Engine::LibFuzzer, Engine::Afl, Engine::Honggfuzz];

    /// The name scripts use: `libfuzzer`, `afl`, `honggfuzz`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::LibFuzzer => "libfuzzer",
            Engine::Afl => "afl",
            Engine::Honggfuzz => "honggfuzz",
        }
    }
}

/// Something a target needs beyond this repository.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// An environment variable naming an existing directory (e.g. the
    /// kernel's source tree).
    Dir {
        /// The variable.
        var: &'static str,
        /// What the directory holds, for the skip message.
        what: &'static str,
    },
    /// The kernel's `drivers/android/dbitmap.h`, compiled into the
    /// `kernel-dbitmap` crate when it was built (`ci/kernel-source.sh`, or
    /// `KERNEL_TREE` naming a kernel checkout).
    KernelHeader,
}

impl Need {
    /// Why the need is not met, in one line; `None` when it is.
    pub fn missing(&self) -> Option<String> {
        match *self {
            Need::Dir { var, what } => match std::env::var_os(var) {
                Some(dir) if std::path::Path::new(&dir).is_dir() => None,
                Some(dir) => Some(format!(
                    "{var}={} is not a directory ({what})",
                    dir.to_string_lossy()
                )),
                None => Some(format!("needs {what}: set {var}")),
            },
            Need::KernelHeader => crate::kernel::unavailable(),
        }
    }
}

/// A fuzz target.
pub trait Target: Sync {
    /// Its name: the fuzz binary, `corpus/<name>`, `fuzz/dict/<name>.dict`.
    fn name(&self) -> &'static str;
    /// What it drives, in one line.
    fn about(&self) -> &'static str;
    /// What it needs beyond the repository; scripts skip it when missing.
    fn needs(&self) -> &'static [Need] {
        &[]
    }
    /// Why it cannot run here, if it cannot.
    fn unavailable(&self) -> Option<String> {
        self.needs().iter().find_map(Need::missing)
    }
    /// One line on what outside code it runs, for logs (`triage repro`,
    /// the smoke run); `None` when it runs only this repository's code.
    fn provenance(&self) -> Option<String> {
        None
    }
    /// The sanitizer its libFuzzer builds use (cargo-fuzz's `--sanitizer`):
    /// `none` for pure safe Rust, where AddressSanitizer finds nothing the
    /// language does not and costs ~10x; `address` for a target that links
    /// C code.
    fn sanitizer(&self) -> &'static str {
        "none"
    }
    /// The longest input a hunt from an empty corpus tries
    /// (`ci/history.sh`, libFuzzer's `-max_len`): long enough for a header
    /// and the few operations that show a bug.
    fn hunt_max_len(&self) -> usize {
        256
    }
    /// The engines that have glue for it.
    fn engines(&self) -> &'static [Engine] {
        &Engine::ALL
    }
    /// Whether it has a corpus (`corpus/<name>`, replayed by `cargo test`,
    /// seeded by `seed-corpus`) and a trace form.
    fn has_corpus(&self) -> bool {
        true
    }
    /// Runs the target on raw bytes.
    fn run(&self, data: &[u8]) -> Checked<Events>;
    /// The trace raw bytes stand for; `None` without a trace form.
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace>;
    /// Parses a trace's body (the lines after `target <name>`), each with
    /// its line number, split at single spaces.
    fn parse_body(
        &'static self,
        lines: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
    ) -> Result<Trace, ParseError>;
    /// An arbitrary trace, for the round-trip target; `None` without a
    /// trace form or when the bytes run out.
    fn arbitrary_trace(&'static self, u: &mut Unstructured<'_>) -> Option<Trace>;
    /// Its libFuzzer/AFL dictionary; `None` when it is written by hand.
    fn dictionary(&self) -> Option<String>;
}

/// An op type a list-of-operations target runs on.
pub trait OpLang:
    Op + OpText + for<'a> Arbitrary<'a> + Clone + PartialEq + Send + Sync + 'static
{
}

impl<T: Op + OpText + for<'a> Arbitrary<'a> + Clone + PartialEq + Send + Sync + 'static> OpLang
    for T
{
}

/// A target whose input is a list of operations ([`crate::decode`]).
pub struct OpsTarget<L: 'static> {
    /// The name.
    pub name: &'static str,
    /// What it drives.
    pub about: &'static str,
    /// The runner.
    pub run: fn(&[L]) -> Checked<Events>,
}

impl<L: OpLang> Target for OpsTarget<L> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn about(&self) -> &'static str {
        self.about
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        (self.run)(&crate::decode::<L>(data))
    }
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace> {
        Some(self.trace(crate::decode(data)))
    }
    fn parse_body(
        &'static self,
        lines: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
    ) -> Result<Trace, ParseError> {
        let mut ops = Vec::new();
        for (line, w) in lines {
            if ops.len() == crate::text::limits::OPS {
                let message = format!(
                    "too many operations: allowed 0..={}",
                    crate::text::limits::OPS
                );
                return Err(ParseError { line, message });
            }
            ops.push(L::parse_text(&w).map_err(|message| ParseError { line, message })?);
        }
        Ok(self.trace(ops))
    }
    fn arbitrary_trace(&'static self, u: &mut Unstructured<'_>) -> Option<Trace> {
        let rest = u.bytes(u.len()).unwrap_or_default();
        Some(self.trace(crate::decode(rest)))
    }
    fn dictionary(&self) -> Option<String> {
        Some(crate::dict::ops_dictionary::<L>())
    }
}

impl<L: OpLang> OpsTarget<L> {
    /// The trace of `ops` on this target.
    pub fn trace(&'static self, ops: Vec<L>) -> Trace {
        Trace::new(OpsTrace { target: self, ops })
    }
}

/// The trace of an [`OpsTarget`]: its operations.
pub struct OpsTrace<L: 'static> {
    target: &'static OpsTarget<L>,
    /// The operations.
    pub ops: Vec<L>,
}

impl<L: OpLang> fmt::Debug for OpsTrace<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple(self.target.name).field(&self.ops).finish()
    }
}

impl<L: OpLang> TraceBody for OpsTrace<L> {
    fn target(&self) -> &'static dyn Target {
        self.target
    }
    fn len(&self) -> usize {
        self.ops.len()
    }
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.ops
            .iter()
            .try_for_each(|op| writeln!(f, "{}", Text(op)))
    }
    fn replay(&self) -> Checked<Events> {
        (self.target.run)(&self.ops)
    }
    fn shrink(&self, fails: &mut dyn FnMut(&Trace) -> bool) -> Trace {
        let mut fails = |ops: &[L]| fails(&self.target.trace(ops.to_vec()));
        let mut ops = crate::shrink::shrink_list(self.ops.clone(), &mut fails);
        crate::shrink::simplify_each(&mut ops, L::simpler, &mut fails);
        self.target.trace(ops)
    }
    fn clone_trace(&self) -> Trace {
        self.target.trace(self.ops.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn TraceBody) -> bool {
        other
            .as_any()
            .downcast_ref::<Self>()
            .is_some_and(|o| o.target.name == self.target.name && o.ops == self.ops)
    }
}

/// Runs a target on raw bytes and panics at the first failure, as a fuzz
/// target must (a known upstream finding ends the run quietly unless
/// `IDPOOL_HISTORY` asks for it: see [`crate::history`]).
pub fn fuzz(target: &dyn Target, data: &[u8]) -> Events {
    settle(target.run(data))
}

/// A fuzz target's verdict on a run: its events, or a panic with the
/// failure's message, unless the failure is a known upstream finding not
/// asked for ([`crate::history::quiet`]).
pub fn settle(result: Checked<Events>) -> Events {
    match result {
        Ok(events) => events,
        Err(f) if crate::history::quiet(&f) => Events::default(),
        Err(f) => f.raise(),
    }
}
