//! The `handle_table` target in the registry: a program is a header byte
//! that picks the versions ([`Versions::decode`]), then the operations
//! ([`crate::decode`]). Its trace names the versions that are not mainline
//! (`version <name>`, `versus <name>`) before the operations, so a trace
//! without version lines is mainline.

use crate::check::Checked;
use crate::history::Versions;
use crate::registry::Target;
use crate::table::TableOp;
use crate::table_start::StartSet;
use crate::text::{limits, OpText, Text};
use crate::trace::{ParseError, Trace, TraceBody};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::{Driver, Version};
use std::any::Any;

/// The `handle_table` target.
pub struct TableTarget;

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
    /// from given handles: the bytes after it draw them
    /// ([`StartSet`](crate::table_start::StartSet)) and the program starts
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
                ops: crate::decode(rest),
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
        let mut tail: Vec<TableOp> = crate::decode(u.take_rest());
        tail.truncate(crate::MAX_OPS - 1);
        ops.append(&mut tail);
        TableProgram { versions, ops }
    }

    /// Runs it: every table against its version's model.
    pub fn run(&self) -> Checked<Events> {
        crate::table::run_versions(&self.versions, &self.ops)
    }

    /// Runs it and panics at the first failure, as a fuzz target must
    /// (see [`crate::registry::settle`]).
    pub fn fuzz(&self) -> Events {
        crate::registry::settle(self.run())
    }

    fn trace(self) -> Trace {
        Trace::new(self)
    }
}

impl<'a> Arbitrary<'a> for TableProgram {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let rest = u.bytes(u.len())?;
        Ok(TableProgram::decode(rest))
    }
    fn arbitrary_take_rest(u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(TableProgram::decode(u.take_rest()))
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

impl TraceBody for TableProgram {
    fn target(&self) -> &'static dyn Target {
        &crate::targets::HANDLE_TABLE
    }
    fn len(&self) -> usize {
        self.ops.len()
    }
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
    fn replay(&self) -> Checked<Events> {
        self.run()
    }
    fn shrink(&self, outer: &mut dyn FnMut(&Trace) -> bool) -> Trace {
        let versions = self.versions;
        let mut fails_with = |versions: Versions, ops: &[TableOp]| {
            outer(
                &TableProgram {
                    versions,
                    ops: ops.to_vec(),
                }
                .trace(),
            )
        };
        let mut fails = |ops: &[TableOp]| fails_with(versions, ops);
        let mut ops = crate::shrink::shrink_list(self.ops.clone(), &mut fails);
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
        TableProgram { versions, ops }.trace()
    }
    fn clone_trace(&self) -> Trace {
        self.clone().trace()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn TraceBody) -> bool {
        other
            .as_any()
            .downcast_ref::<Self>()
            .is_some_and(|o| o == self)
    }
}

impl Target for TableTarget {
    fn name(&self) -> &'static str {
        "handle_table"
    }
    fn about(&self) -> &'static str {
        "six handle-table flavours side by side (mainline's three and the designs), on any upstream version, with injected failures, corruption and reclaims"
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        TableProgram::decode(data).run()
    }
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace> {
        Some(TableProgram::decode(data).trace())
    }
    fn parse_body(
        &'static self,
        lines: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
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
        Ok(program.trace())
    }
    fn arbitrary_trace(&'static self, u: &mut Unstructured<'_>) -> Option<Trace> {
        let rest = u.bytes(u.len()).unwrap_or_default();
        Some(TableProgram::decode(rest).trace())
    }
    fn dictionary(&self) -> Option<String> {
        Some(crate::dict::ops_dictionary::<TableOp>())
    }
}
