//! The `handle_table` target's entry ([`TableTarget`]) and its program: a
//! header byte that picks the versions ([`Versions::decode`]), then the
//! operations ([`crate::registry::decode`]). Its trace names the versions
//! that are not mainline (`version <name>`, `versus <name>`) before the
//! operations, so a trace without version lines is mainline.

use super::ops::TableOp;
use super::runner::run_versions;
use super::start::StartSet;
use crate::check::Checked;
use crate::events::Events;
use crate::history::{Finding, Versions};
use crate::registry::{decode, Target, MAX_OPS};
use crate::text::{limits, OpText, Text};
use crate::trace::{Line, ParseError, Trace, TraceBody};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::{Driver, Version};
use std::any::Any;

/// The `handle_table` target: its name, and how its programs decode, run
/// and print.
pub struct TableTarget {
    name: &'static str,
}

impl TableTarget {
    /// The target called `name`.
    pub const fn new(name: &'static str) -> Self {
        TableTarget { name }
    }
}

/// A `handle_table` program: the versions and the operations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableProgram {
    /// Which version each table follows.
    pub versions: Versions,
    /// The operations.
    pub ops: Vec<TableOp>,
}

impl TableProgram {
    /// The program raw bytes stand for: the first byte the versions (none:
    /// mainline; its low four bits, [`Versions::decode`]), the rest the
    /// operations. A first byte of 0x10 to 0x1f also asks for a table built
    /// from given handles: the bytes after it draw them ([`StartSet`]) and
    /// the program starts
    /// with [`TableOp::StartFrom`]. (The high four bits meant nothing
    /// before, and the corpus held one such header.)
    pub fn decode(data: &[u8]) -> TableProgram {
        let Some((&b, rest)) = data.split_first() else {
            return TableProgram::default();
        };
        let versions = Versions::decode(b);
        if b >> 4 != 1 {
            return TableProgram {
                versions,
                ops: decode(rest),
            };
        }
        let mut u = Unstructured::new(rest);
        let Ok(start) = StartSet::arbitrary(&mut u) else {
            return TableProgram {
                versions,
                ops: Vec::new(),
            };
        };
        let mut ops = vec![TableOp::StartFrom(start)];
        let mut tail: Vec<TableOp> = decode(u.take_rest());
        tail.truncate(MAX_OPS - 1);
        ops.append(&mut tail);
        TableProgram { versions, ops }
    }

    /// Runs it for target `target`: every table against its version's
    /// model.
    pub fn run(&self, target: &'static str) -> Checked<Events> {
        run_versions(target, &self.versions, &self.ops)
    }
}

impl fmt::Display for TableProgram {
    /// The trace body: the version lines that are not mainline, then one
    /// operation per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.versions;
        if v.c != Version::CMainline {
            writeln!(f, "version {}", v.c)?;
        }
        if v.rust != Version::RustMainline {
            writeln!(f, "version {}", v.rust)?;
        }
        for versus in [v.c_versus, v.rust_versus].into_iter().flatten() {
            writeln!(f, "versus {versus}")?;
        }
        self.ops
            .iter()
            .try_for_each(|op| writeln!(f, "{}", Text(op)))
    }
}

/// A `handle_table` trace: the program, and the entry it runs for.
#[derive(Clone)]
pub struct TableTrace {
    target: &'static TableTarget,
    /// The program.
    pub program: TableProgram,
}

impl fmt::Debug for TableTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple(self.target.name)
            .field(&self.program)
            .finish()
    }
}

impl TableTarget {
    /// The trace of `program` on this target.
    pub fn trace(&'static self, program: TableProgram) -> Trace {
        Trace::new(TableTrace {
            target: self,
            program,
        })
    }
}

impl TraceBody for TableTrace {
    fn target(&self) -> &'static str {
        self.target.name
    }
    fn len(&self) -> usize {
        self.program.ops.len()
    }
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program)
    }
    fn replay(&self) -> Checked<Events> {
        self.program.run(self.target.name)
    }
    fn shrink(&self, outer: &mut dyn FnMut(&Trace) -> bool) -> Trace {
        let versions = self.program.versions;
        let mut fails_with = |versions: Versions, ops: &[TableOp]| {
            let ops = ops.to_vec();
            outer(&self.target.trace(TableProgram { versions, ops }))
        };
        let mut fails = |ops: &[TableOp]| fails_with(versions, ops);
        let mut ops = crate::shrink::shrink_list(self.program.ops.clone(), &mut fails);
        crate::shrink::simplify_each(&mut ops, TableOp::simpler, &mut fails);
        // Then the versions: each back to mainline (or nothing beside) if
        // the trace still fails, so that it names only those it needs.
        let mut versions = versions;
        let candidates: [fn(&mut Versions); 4] = [
            |v| v.c_versus = None,
            |v| v.rust_versus = None,
            |v| v.c = Version::CMainline,
            |v| v.rust = Version::RustMainline,
        ];
        for simplify in candidates {
            let mut v = versions;
            simplify(&mut v);
            if v != versions && fails_with(v, &ops) {
                versions = v;
            }
        }
        self.target.trace(TableProgram { versions, ops })
    }
    fn clone_trace(&self) -> Trace {
        self.target.trace(self.program.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn TraceBody) -> bool {
        other
            .as_any()
            .downcast_ref::<Self>()
            .is_some_and(|o| o.target.name == self.target.name && o.program == self.program)
    }
}

impl Target for TableTarget {
    fn name(&self) -> &'static str {
        self.name
    }
    fn about(&self) -> &'static str {
        "six handle-table flavours side by side (mainline's three and the designs), on any upstream version, with injected failures, corruption and reclaims"
    }
    /// Every finding of the allocator's history: the header picks the
    /// versions that have them. Not the drivers' differences (a program of
    /// commands, `binder_commands`), nor the double free (the kernel's C
    /// freeing a map twice at the process's release, which only
    /// `kernel_dbitmap`'s historical header does for real: the tables'
    /// model `DBitmap` counts it, `DBitmap::double_frees`, but a table is
    /// never released through `dbitmap_free`).
    fn hunts(&self) -> &'static [Finding] {
        &Finding::ALLOCATOR
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        TableProgram::decode(data).run(self.name)
    }
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace> {
        Some(self.trace(TableProgram::decode(data)))
    }
    fn parse_body(
        &'static self,
        lines: &mut dyn Iterator<Item = Line<'_>>,
    ) -> Result<Trace, ParseError> {
        let mut program = TableProgram::default();
        let mut seen_op = false;
        for (n, w) in lines {
            let err = |message: String| ParseError { line: n, message };
            match w[0] {
                "version" | "versus" if seen_op => {
                    return Err(err(format!("`{}` after the first operation", w[0])))
                }
                "version" | "versus" => {
                    let [_, name] = w[..] else {
                        return Err(err(format!("expected `{} <version>`", w[0])));
                    };
                    let version: Version = name.parse().map_err(|e| err(format!("{e}")))?;
                    let v = &mut program.versions;
                    match (w[0], version.driver()) {
                        ("version", Driver::C) => v.c = version,
                        ("version", Driver::Rust) => v.rust = version,
                        ("versus", Driver::C) => v.c_versus = Some(version),
                        ("versus", Driver::Rust) => v.rust_versus = Some(version),
                        _ => unreachable!(),
                    }
                }
                _ if program.ops.len() == limits::OPS => {
                    let max = limits::OPS;
                    return Err(err(format!("too many operations: allowed 0..={max}")));
                }
                "start-from" if seen_op => {
                    return Err(err("`start-from` only as the first operation".to_string()))
                }
                _ => {
                    seen_op = true;
                    program.ops.push(TableOp::parse_text(&w).map_err(err)?);
                }
            }
        }
        Ok(self.trace(program))
    }
    fn arbitrary_trace(&'static self, u: &mut Unstructured<'_>) -> Option<Trace> {
        let rest = u.bytes(u.len()).unwrap_or_default();
        Some(self.trace(TableProgram::decode(rest)))
    }
    fn dictionary(&self) -> Option<String> {
        Some(crate::dict::ops_dictionary::<TableOp>())
    }
}
