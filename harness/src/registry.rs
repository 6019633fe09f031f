//! What a target is: the [`Target`] trait every registry entry implements,
//! what it needs ([`Need`]), the engines with glue for it ([`Engine`]), and
//! [`OpsTarget`], the entry of a target whose input is a list of
//! operations. The list of entries is `crate::targets::TARGETS`; this
//! module names no target.
//!
//! An op-list target is an `OpsTarget` over an op type implementing
//! [`OpLang`]: its decoding ([`decode`]), text form ([`OpText`]),
//! dictionary and shrink rules come with the op type, and its runner gets
//! the entry's name, which it puts on every failure. A target with a
//! richer input (a program and a schedule) implements [`Target`] itself.

use crate::check::{Checked, Op};
use crate::events::Events;
use crate::history::{self, Finding};
use crate::text::{OpText, Text};
use crate::trace::{ParseError, Trace, TraceBody};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use std::any::Any;

/// The most operations one input runs.
pub const MAX_OPS: usize = 64;

/// Decodes up to [`MAX_OPS`] operations; trailing bytes that do not make a
/// whole operation are ignored.
pub fn decode<'a, O: Arbitrary<'a>>(data: &'a [u8]) -> Vec<O> {
    let mut u = Unstructured::new(data);
    let mut ops = Vec::new();
    while ops.len() < MAX_OPS && !u.is_empty() {
        match O::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    ops
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

    /// Where its glue files are, from the repository's root.
    pub fn glue_dir(self) -> &'static str {
        match self {
            Engine::LibFuzzer => "fuzz/fuzz_targets",
            Engine::Afl => "fuzz/afl/src/bin",
            Engine::Honggfuzz => "fuzz/honggfuzz/src/bin",
        }
    }

    /// The glue file of `target`, in full: the same for every target but
    /// the name, a call of `idpool_harness::fuzz` and nothing else; the
    /// libFuzzer glue has the custom mutator too, a call of
    /// [`crate::mutate::mutate`] and nothing else. The closure's body is a
    /// block, the one form every engine's macro takes (honggfuzz's takes
    /// no other).
    pub fn glue(self, target: &dyn Target) -> String {
        let name = target.name();
        let body = format!("idpool_harness::fuzz(\"{name}\", data);");
        match self {
            Engine::LibFuzzer => format!(
                "#![no_main]\n\nlibfuzzer_sys::fuzz_target!(|data: &[u8]| {{\n    {body}\n}});\n\n\
                 libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {{\n    \
                 idpool_harness::mutate::mutate(\"{name}\", data, size, max_size, seed, libfuzzer_sys::fuzzer_mutate)\n}});\n"
            ),
            Engine::Afl => {
                format!(
                    "fn main() {{\n    afl::fuzz!(|data: &[u8]| {{\n        {body}\n    }});\n}}\n"
                )
            }
            Engine::Honggfuzz => format!(
                "fn main() {{\n    loop {{\n        honggfuzz::fuzz!(|data: &[u8]| {{\n            \
                 {body}\n        }});\n    }}\n}}\n"
            ),
        }
    }
}

/// Something a target needs beyond this repository.
#[derive(Clone, Copy, Debug)]
pub enum Need {
    /// An environment variable naming an existing directory (e.g. the
    /// kernel's source tree).
    Dir {
        /// The variable.
        var: &'static str,
        /// What the directory holds, for the skip message.
        what: &'static str,
    },
    /// Something only the target can tell is there (code compiled in from
    /// outside the repository): `missing` says why it is not, in one line.
    Probed {
        /// Why it is missing; `None` when it is there.
        missing: fn() -> Option<String>,
    },
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
            Need::Probed { missing } => missing(),
        }
    }
}

/// The committed corpus cap ([`Target::corpus_cap`]). Edge coverage
/// alone (`-merge=1 -use_counters=0`, no state feedback) kept 67 to 423
/// files per target on 2026-12-03 (binder_commands the most, 423 of its
/// 2,386); a campaign that needs more than this says so in its report.
pub const CORPUS_CAP: usize = 500;

/// How many times its corpus cap a target's local pool may hold
/// ([`Target::pool_cap`]): 20,000 inputs, which libFuzzer reads in a few
/// seconds at the start of a run. Ten times filled in the first minute of
/// a `pool_ops` campaign (each new abstract state keeps an input), and the
/// cap keeps the smallest, so it would drop the long inputs that reach the
/// deepest states first.
pub const POOL_CAP_FACTOR: usize = 40;

/// A fuzz target: one entry of the registry.
pub trait Target: Sync {
    /// Its name: the fuzz binary, `corpus/<name>`, `fuzz/dict/<name>.dict`,
    /// and the target of every failure it reports.
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
    /// the smoke run, the first input a fuzz binary runs); `None` when it
    /// runs only this repository's code.
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
    /// The most files its committed corpus (`corpus/<name>`) may hold:
    /// `ci/campaign.sh` merges into it by edge coverage alone and keeps no
    /// more, and the corpus test fails beyond it, so that `cargo test`'s
    /// replay stays quick after any campaign. [`CORPUS_CAP`] for every
    /// target so far.
    fn corpus_cap(&self) -> usize {
        CORPUS_CAP
    }
    /// The most files its local pool (`fuzz/pool/<name>`, not tracked:
    /// every input that adds an edge or an abstract state) may hold:
    /// `ci/campaign.sh` keeps the smallest beyond it, with a warning in its
    /// report, so that the pool, which every run reads whole at its start,
    /// does not grow without end over the nights. [`POOL_CAP_FACTOR`] times
    /// the corpus cap.
    fn pool_cap(&self) -> usize {
        POOL_CAP_FACTOR * self.corpus_cap()
    }
    /// The longest input a hunt from an empty corpus tries
    /// (`ci/history.sh`, `ci/mutants/run.sh`: libFuzzer's `-max_len`):
    /// long enough for a header and the few operations that show a bug.
    /// Also the longest random tail ([`crate::mutate`]) and the default
    /// length of `triage sample`'s random inputs.
    fn hunt_max_len(&self) -> usize {
        256
    }
    /// The known upstream findings it is expected to rediscover from an
    /// empty corpus (`ci/history.sh` hunts each with it).
    fn hunts(&self) -> &'static [Finding] {
        &[]
    }
    /// Whether its inputs also run on the real drivers booted in QEMU
    /// (`triage real-kernel`): the campaign then replays each new corpus
    /// entry there after its merge.
    fn real_kernel(&self) -> bool {
        false
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
    /// Inputs written by hand: interleavings the pseudo-random inputs
    /// rarely reach. The seed corpus holds them and the smoke test runs
    /// them beside the seeded ones.
    fn crafted(&self) -> Vec<Vec<u8>> {
        Vec::new()
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

/// A runner of an op list: the target's name (for its failures) and the
/// operations.
pub type OpsRunner<L> = fn(&'static str, &[L]) -> Checked<Events>;

/// A target whose input is a list of operations ([`decode`]).
///
/// # Examples
///
/// ```
/// use idpool_harness::oracle::Policy;
/// use idpool_harness::registry::{OpsTarget, Target};
/// use idpool_harness::targets::pool_ops::{self, PoolOp};
///
/// // IdPool alone, without the fast pool beside it.
/// static MINE: OpsTarget<PoolOp> = OpsTarget::new("mine", "IdPool alone", |target, ops| {
///     pool_ops::run::<idpool::IdPool>(target, Policy::Rust, ops)
/// });
/// assert_eq!(MINE.name(), "mine");
/// assert!(MINE.run(&[0, 5, 0, 9]).is_ok());
/// ```
pub struct OpsTarget<L: 'static> {
    name: &'static str,
    about: &'static str,
    run: OpsRunner<L>,
    needs: &'static [Need],
    provenance: Option<fn() -> String>,
    sanitizer: &'static str,
    hunts: &'static [Finding],
}

impl<L: 'static> OpsTarget<L> {
    /// The target `name`, which drives `about`, running `run` on the
    /// decoded operations.
    pub const fn new(name: &'static str, about: &'static str, run: OpsRunner<L>) -> Self {
        OpsTarget {
            name,
            about,
            run,
            needs: &[],
            provenance: None,
            sanitizer: "none",
            hunts: &[],
        }
    }

    /// The same target, needing `needs` ([`Target::needs`]).
    pub const fn needing(mut self, needs: &'static [Need]) -> Self {
        self.needs = needs;
        self
    }

    /// The same target, saying what outside code it runs
    /// ([`Target::provenance`]).
    pub const fn with_provenance(mut self, provenance: fn() -> String) -> Self {
        self.provenance = Some(provenance);
        self
    }

    /// The same target, its libFuzzer builds under `sanitizer`
    /// ([`Target::sanitizer`]).
    pub const fn sanitized(mut self, sanitizer: &'static str) -> Self {
        self.sanitizer = sanitizer;
        self
    }

    /// The same target, expected to rediscover `findings` from an empty
    /// corpus ([`Target::hunts`]).
    pub const fn hunting(mut self, findings: &'static [Finding]) -> Self {
        self.hunts = findings;
        self
    }
}

impl<L: OpLang> Target for OpsTarget<L> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn about(&self) -> &'static str {
        self.about
    }
    fn needs(&self) -> &'static [Need] {
        self.needs
    }
    fn provenance(&self) -> Option<String> {
        self.provenance.map(|line| line())
    }
    fn sanitizer(&self) -> &'static str {
        self.sanitizer
    }
    fn hunts(&self) -> &'static [Finding] {
        self.hunts
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        (self.run)(self.name, &decode::<L>(data))
    }
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace> {
        Some(self.trace(decode(data)))
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
        Some(self.trace(decode(rest)))
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

    /// Runs `ops` on this target.
    pub fn run_ops(&self, ops: &[L]) -> Checked<Events> {
        (self.run)(self.name, ops)
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
    fn target(&self) -> &'static str {
        self.target.name
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
        self.target.run_ops(&self.ops)
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

/// The targets among `targets` that have a corpus and a trace form.
pub fn traceable(
    targets: &'static [&'static dyn Target],
) -> impl Iterator<Item = &'static dyn Target> {
    targets.iter().copied().filter(|t| t.has_corpus())
}

/// Parses a trace of one of the traceable `targets`; comments and blank
/// lines are ignored.
pub fn parse_trace(
    text: &str,
    targets: &'static [&'static dyn Target],
) -> Result<Trace, ParseError> {
    let (n, name, mut body) = crate::trace::header(text)?;
    let target = traceable(targets)
        .find(|t| t.name() == name)
        .ok_or_else(|| {
            let known: Vec<_> = traceable(targets).map(|t| t.name()).collect();
            ParseError {
                line: n,
                message: format!("unknown target {name:?} (known: {})", known.join(", ")),
            }
        })?;
    target.parse_body(&mut body)
}

/// The round-trip property of the trace format, over the traceable
/// `targets`: bytes become a trace of the target the first byte picks,
/// which must print and parse back to itself; and whatever text the bytes
/// are, the parser answers without panicking. Concurrent programs come
/// with an arbitrary schedule (no run).
///
/// # Panics
///
/// When print then parse, or parse then print, is not the identity.
pub fn roundtrip(data: &[u8], targets: &'static [&'static dyn Target]) {
    let mut u = Unstructured::new(data);
    let among: Vec<_> = traceable(targets).collect();
    let pick = u8::arbitrary(&mut u).unwrap_or(0) as usize % among.len();
    let Some(trace) = among[pick].arbitrary_trace(&mut u) else {
        return;
    };
    let text = trace.to_string();
    let parsed = parse_trace(&text, targets)
        .unwrap_or_else(|e| panic!("printed trace does not parse: {e}\n{text}"));
    assert_eq!(parsed, trace, "parse(print(trace)) differs:\n{text}");
    assert_eq!(parsed.to_string(), text, "print(parse(text)) differs");
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_trace(text, targets);
    }
}

/// Runs a target on raw bytes and panics at the first failure, as a fuzz
/// target must (a known upstream finding ends the run quietly unless
/// `IDPOOL_HISTORY` asks for it: see [`history::settle`]).
pub fn fuzz(target: &dyn Target, data: &[u8]) -> Events {
    history::settle(target.run(data))
}
