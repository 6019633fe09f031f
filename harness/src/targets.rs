//! The targets' definitions, listed in [`crate::registry::TARGETS`].

use crate::check::Checked;
use crate::oracle::Policy;
use crate::pool::PoolOp;
use crate::registry::{Engine, Need, OpsTarget, Target};
use crate::sched::ConcurrentTarget;
use crate::table_target::TableTarget;
use crate::trace::{ParseError, Trace};
use crate::Events;
use arbitrary::Unstructured;

/// `pool_ops`: the Rust `IdPool` against the model, and `FastPool` beside
/// it on the same operations.
pub static POOL_OPS: OpsTarget<PoolOp> = OpsTarget {
    name: "pool_ops",
    about: "IdPool and FastPool side by side: acquire, release, prepared grows and shrinks committed later, bulk ops, the ceiling",
    run: |ops| crate::pool::run::<crate::designs::Twin>(Policy::Rust, ops),
};

/// `dbitmap_ops`: the C `dbitmap` against the model.
pub static DBITMAP_OPS: OpsTarget<PoolOp> = OpsTarget {
    name: "dbitmap_ops",
    about: "DBitmap: the same ops, with the C policy and the disabled state",
    run: |ops| crate::pool::run::<idpool::DBitmap>(Policy::C, ops),
};

/// `handle_table`: mainline's three table flavours and the three designs
/// side by side, on the versions the program's header picks (see
/// [`crate::table_target`]).
pub static HANDLE_TABLE: TableTarget = TableTarget;

/// `concurrent_resize`: simulated threads interleaved in the lock-drop
/// windows (see [`crate::sched`]).
pub static CONCURRENT_RESIZE: ConcurrentTarget = ConcurrentTarget;

/// `binder_commands`: both drivers at the command level (see
/// [`crate::commands`]).
pub static BINDER_COMMANDS: crate::commands::CommandsTarget = crate::commands::CommandsTarget;

/// `trace_roundtrip`: the trace parser and printer (see
/// [`crate::trace::roundtrip`]). No corpus, no trace form, libFuzzer only,
/// a hand-written dictionary.
pub static TRACE_ROUNDTRIP: RoundtripTarget = RoundtripTarget;

/// The `trace_roundtrip` target.
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
        crate::trace::roundtrip(data);
        Ok(Events::default())
    }
    fn trace_from_bytes(&'static self, _: &[u8]) -> Option<Trace> {
        None
    }
    fn parse_body(
        &'static self,
        _: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
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

/// The op list behind [`KERNEL_DBITMAP`]: the `dbitmap_ops` program on the
/// kernel's C, ours and the model ([`crate::kernel::KernelPair`]).
pub static KERNEL_DBITMAP_OPS: OpsTarget<PoolOp> = OpsTarget {
    name: "kernel_dbitmap",
    about: "the kernel's own dbitmap.h, our DBitmap and the model, in lockstep on the dbitmap_ops program",
    run: |ops| crate::pool::run::<crate::kernel::KernelPair>(Policy::C, ops),
};

/// `kernel_dbitmap`: [`KERNEL_DBITMAP_OPS`], needing the kernel's header.
pub static KERNEL_DBITMAP: KernelTarget = KernelTarget(&KERNEL_DBITMAP_OPS);

/// An op-list target that needs the kernel's `dbitmap.h` and names it in
/// its logs; everything else is its op list's.
pub struct KernelTarget(&'static OpsTarget<PoolOp>);

impl Target for KernelTarget {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn about(&self) -> &'static str {
        self.0.about()
    }
    fn needs(&self) -> &'static [Need] {
        &[Need::KernelHeader]
    }
    fn provenance(&self) -> Option<String> {
        Some(crate::kernel::provenance())
    }
    /// The kernel's C is compiled with `-fsanitize=address` too
    /// (`kernel-dbitmap/build.rs`).
    fn sanitizer(&self) -> &'static str {
        "address"
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        self.0.run(data)
    }
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace> {
        self.0.trace_from_bytes(data)
    }
    fn parse_body(
        &'static self,
        lines: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
    ) -> Result<Trace, ParseError> {
        self.0.parse_body(lines)
    }
    fn arbitrary_trace(&'static self, u: &mut Unstructured<'_>) -> Option<Trace> {
        self.0.arbitrary_trace(u)
    }
    fn dictionary(&self) -> Option<String> {
        self.0.dictionary()
    }
}
