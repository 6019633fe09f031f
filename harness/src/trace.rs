//! The text format of a reproducer: a trace.
//!
//! Raw fuzzer bytes change meaning whenever an op enum changes; a trace does
//! not. It names the target and lists the operations (and, for
//! `concurrent_resize`, the program and the schedule) in words a person can
//! read and edit. Regression tests are stored as traces.
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
//! table op   := "insert" SP node [SP "manager"] | "inc" SP sel | "dec" SP sel
//!             | "lookup" SP node | "kill" | "fail-next" SP n [SP "at" SP site]
//!             | "insert-many" SP n | "drop-from" SP sel | "drop-all" SP ("fifo" | "lifo")
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
//! Printing then parsing is the identity; so is parsing then printing, for a
//! trace in canonical form (single spaces, no comments).

use crate::domain::{Capacity, Ceiling, Count, Point};
use crate::pool::{PoolOp, Resize};
use crate::sched::{Decision, Pool, Program, ThreadOp};
use crate::table::{HandleSel, Node, TableOp};
use crate::{Events, TARGETS};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::AllocSite;

/// The first line of every trace.
pub const MAGIC: &str = "idpool-trace";
/// The format version this build reads and writes.
pub const VERSION: &str = "v1";

/// A reproducer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Trace {
    /// `pool_ops`: operations on the Rust `IdPool`.
    PoolOps(Vec<PoolOp>),
    /// `dbitmap_ops`: operations on the C `dbitmap`.
    DBitmapOps(Vec<PoolOp>),
    /// `handle_table`: operations on the three table flavours.
    HandleTable(Vec<TableOp>),
    /// `concurrent_resize`: a program and the schedule it ran under.
    Concurrent(Program, Vec<Decision>),
}

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
    /// The target this trace replays on.
    pub fn target(&self) -> &'static str {
        match self {
            Trace::PoolOps(_) => "pool_ops",
            Trace::DBitmapOps(_) => "dbitmap_ops",
            Trace::HandleTable(_) => "handle_table",
            Trace::Concurrent(..) => "concurrent_resize",
        }
    }

    /// The number of operations (for a concurrent trace: every thread's
    /// operations plus one for a nonzero prefill).
    pub fn len(&self) -> usize {
        match self {
            Trace::PoolOps(ops) | Trace::DBitmapOps(ops) => ops.len(),
            Trace::HandleTable(ops) => ops.len(),
            Trace::Concurrent(p, _) => {
                p.threads.iter().map(Vec::len).sum::<usize>() + (p.prefill > 0) as usize
            }
        }
    }

    /// Whether the trace has no operation at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The trace raw fuzzer bytes stand for, for target `target`; `None`
    /// for an unknown target. A concurrent input is run once to record the
    /// schedule its bytes choose (up to a failure, if it fails).
    pub fn from_bytes(target: &str, data: &[u8]) -> Option<Trace> {
        Some(match target {
            "pool_ops" => Trace::PoolOps(crate::decode(data)),
            "dbitmap_ops" => Trace::DBitmapOps(crate::decode(data)),
            "handle_table" => Trace::HandleTable(crate::decode(data)),
            "concurrent_resize" => {
                let Some((program, u)) = crate::sched::decode(data) else {
                    return Some(Trace::Concurrent(
                        Program {
                            pool: Pool::IdPool,
                            prefill: 0,
                            keep: 0,
                            threads: Vec::new(),
                        },
                        Vec::new(),
                    ));
                };
                let mut recorder = crate::sched::Recorder::new(crate::sched::ByteChooser::new(u));
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::sched::run(&program, &mut recorder)
                }));
                Trace::Concurrent(program, recorder.decisions)
            }
            _ => return None,
        })
    }

    /// Replays the trace. Panics, as the fuzz target would, at the first
    /// divergence or broken invariant.
    pub fn replay(&self) -> Events {
        match self {
            Trace::PoolOps(ops) => {
                crate::pool::run::<idpool::IdPool>(crate::oracle::Policy::Rust, ops)
            }
            Trace::DBitmapOps(ops) => {
                crate::pool::run::<idpool::DBitmap>(crate::oracle::Policy::C, ops)
            }
            Trace::HandleTable(ops) => crate::table::run(ops),
            Trace::Concurrent(program, decisions) => {
                let out = crate::sched::run(program, &mut crate::sched::Replay(decisions.iter()));
                crate::sched_events(&out)
            }
        }
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
            Some(("target", t)) if TARGETS.contains(&t) => t,
            Some(("target", t)) => {
                return Err(err(
                    n,
                    format!("unknown target {t:?} (known: {})", TARGETS.join(", ")),
                ))
            }
            _ => {
                return Err(err(
                    n,
                    format!("expected `target <name>`, found {target_line:?}"),
                ))
            }
        };
        let body = lines.map(|(n, l)| (n, l.split(' ').collect::<Vec<_>>()));
        let with_line = |n: usize| move |message: String| err(n, message);
        Ok(match target {
            "pool_ops" | "dbitmap_ops" => {
                let ops = body
                    .map(|(n, w)| parse_pool_op(&w).map_err(with_line(n)))
                    .collect::<Result<_, _>>()?;
                match target {
                    "pool_ops" => Trace::PoolOps(ops),
                    _ => Trace::DBitmapOps(ops),
                }
            }
            "handle_table" => Trace::HandleTable(
                body.map(|(n, w)| parse_table_op(&w).map_err(with_line(n)))
                    .collect::<Result<_, _>>()?,
            ),
            _ => {
                let mut program = Program {
                    pool: Pool::IdPool,
                    prefill: 0,
                    keep: u32::MAX,
                    threads: Vec::new(),
                };
                let mut schedule = Vec::new();
                for (n, w) in body {
                    parse_program_line(&w, &mut program, &mut schedule).map_err(with_line(n))?;
                }
                Trace::Concurrent(program, schedule)
            }
        })
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{MAGIC} {VERSION}")?;
        writeln!(f, "target {}", self.target())?;
        match self {
            Trace::PoolOps(ops) | Trace::DBitmapOps(ops) => ops
                .iter()
                .try_for_each(|op| writeln!(f, "{}", PoolText(op))),
            Trace::HandleTable(ops) => ops
                .iter()
                .try_for_each(|op| writeln!(f, "{}", TableText(op))),
            Trace::Concurrent(program, schedule) => {
                let pool = match program.pool {
                    Pool::IdPool => "idpool",
                    Pool::DBitmap => "dbitmap",
                };
                writeln!(f, "pool {pool}")?;
                writeln!(f, "prefill {}", program.prefill)?;
                writeln!(f, "keep {}", program.keep)?;
                for thread in &program.threads {
                    let ops: Vec<String> =
                        thread.iter().map(|op| ThreadText(op).to_string()).collect();
                    writeln!(f, "thread {}", ops.join("; "))?;
                }
                write!(f, "schedule")?;
                let mut i = 0;
                while i < schedule.len() {
                    let d = schedule[i];
                    let run = schedule[i..].iter().take_while(|&&e| e == d).count();
                    write!(f, " t{}{}", d.thread, if d.fail { "!" } else { "" })?;
                    if run > 1 {
                        write!(f, "*{run}")?;
                    }
                    i += run;
                }
                writeln!(f)
            }
        }
    }
}

struct PointText(Point);

impl fmt::Display for PointText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rel = |f: &mut fmt::Formatter<'_>, base: &str, d: i8| match d {
            0 => write!(f, "{base}"),
            d => write!(f, "{base}{d:+}"),
        };
        match self.0 {
            Point::At(v) => write!(f, "{v}"),
            Point::Quarter(d) => rel(f, "cap/4", d),
            Point::Half(d) => rel(f, "cap/2", d),
            Point::End(d) => rel(f, "cap", d),
        }
    }
}

fn parse_point(w: &str) -> Result<Point, String> {
    let (base, delta) = match w.find(['+', '-']) {
        Some(i) => (&w[..i], &w[i..]),
        None => (w, ""),
    };
    let d: i8 = match delta {
        "" => 0,
        "+1" => 1,
        "-1" => -1,
        other => return Err(format!("bad offset {other:?} in {w:?}: only +1 or -1")),
    };
    Ok(match base {
        "cap/4" => Point::Quarter(d),
        "cap/2" => Point::Half(d),
        "cap" => Point::End(d),
        _ if delta.is_empty() && !base.starts_with("cap") => Point::At(parse_num(w)?),
        _ => {
            return Err(format!(
                "bad point {w:?}: a number, or cap/4, cap/2, cap with +1 or -1"
            ))
        }
    })
}

fn parse_num<T: std::str::FromStr>(w: &str) -> Result<T, String> {
    w.parse()
        .map_err(|_| format!("expected a number, found {w:?}"))
}

fn parse_index(w: &str) -> Result<u8, String> {
    w.strip_prefix('#')
        .ok_or_else(|| format!("expected #k, found {w:?}"))
        .and_then(parse_num)
}

fn parse_node(w: &str) -> Result<Node, String> {
    w.strip_prefix('n')
        .ok_or_else(|| format!("expected a node nK, found {w:?}"))
        .and_then(parse_num)
        .map(Node)
}

fn arity(w: &[&str], min: usize, max: usize) -> Result<(), String> {
    if w.len() < min || w.len() > max {
        let want = if min == max {
            format!("{}", min - 1)
        } else {
            format!("{} to {}", min - 1, max - 1)
        };
        return Err(format!(
            "`{}` takes {want} argument(s), found {}",
            w[0],
            w.len() - 1
        ));
    }
    Ok(())
}

struct PoolText<'a>(&'a PoolOp);

impl fmt::Display for PoolText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = |x: Point| PointText(x);
        match *self.0 {
            PoolOp::Acquire(x) => write!(f, "acquire {}", p(x)),
            PoolOp::FindThenDrop(x) => write!(f, "find {}", p(x)),
            PoolOp::Release(x) => write!(f, "release {}", p(x)),
            PoolOp::Prepare { kind, fail } => {
                let kind = match kind {
                    Resize::Grow => "grow",
                    Resize::Shrink => "shrink",
                };
                write!(f, "prepare {kind}{}", if fail { " fail" } else { "" })
            }
            PoolOp::Commit(k) => write!(f, "commit {k}"),
            PoolOp::AcquireMany { offset, count } => {
                write!(f, "acquire-many {} {}", p(offset), count.0)
            }
            PoolOp::ReleaseMany { from, count } => {
                write!(f, "release-many {} {}", p(from), count.0)
            }
            PoolOp::ReleaseFrom(x) => write!(f, "release-from {}", p(x)),
            PoolOp::Reset(c) => write!(f, "reset {}", c.0),
            PoolOp::ProbeCeiling(c) => write!(f, "probe-ceiling {}", c.0),
        }
    }
}

fn parse_pool_op(w: &[&str]) -> Result<PoolOp, String> {
    Ok(match w[0] {
        "acquire" => (arity(w, 2, 2)?, PoolOp::Acquire(parse_point(w[1])?)).1,
        "find" => (arity(w, 2, 2)?, PoolOp::FindThenDrop(parse_point(w[1])?)).1,
        "release" => (arity(w, 2, 2)?, PoolOp::Release(parse_point(w[1])?)).1,
        "prepare" => {
            arity(w, 2, 3)?;
            let kind = match w[1] {
                "grow" => Resize::Grow,
                "shrink" => Resize::Shrink,
                other => {
                    return Err(format!(
                        "prepare what? expected grow or shrink, found {other:?}"
                    ))
                }
            };
            let fail = match w.get(2) {
                None => false,
                Some(&"fail") => true,
                Some(other) => return Err(format!("expected `fail` or nothing, found {other:?}")),
            };
            PoolOp::Prepare { kind, fail }
        }
        "commit" => (arity(w, 2, 2)?, PoolOp::Commit(parse_num(w[1])?)).1,
        "acquire-many" => {
            arity(w, 3, 3)?;
            PoolOp::AcquireMany {
                offset: parse_point(w[1])?,
                count: Count(parse_num(w[2])?),
            }
        }
        "release-many" => {
            arity(w, 3, 3)?;
            PoolOp::ReleaseMany {
                from: parse_point(w[1])?,
                count: Count(parse_num(w[2])?),
            }
        }
        "release-from" => (arity(w, 2, 2)?, PoolOp::ReleaseFrom(parse_point(w[1])?)).1,
        "reset" => (arity(w, 2, 2)?, PoolOp::Reset(Capacity(parse_num(w[1])?))).1,
        "probe-ceiling" => {
            (
                arity(w, 2, 2)?,
                PoolOp::ProbeCeiling(Ceiling(parse_num(w[1])?)),
            )
                .1
        }
        other => return Err(format!("unknown pool operation {other:?}")),
    })
}

struct SelText(HandleSel);

impl fmt::Display for SelText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            HandleSel::Nth(k) => write!(f, "#{k}"),
            HandleSel::Highest => write!(f, "highest"),
            HandleSel::Value(p) => write!(f, "={}", PointText(p)),
        }
    }
}

fn parse_sel(w: &str) -> Result<HandleSel, String> {
    if w == "highest" {
        return Ok(HandleSel::Highest);
    }
    if let Some(point) = w.strip_prefix('=') {
        return Ok(HandleSel::Value(parse_point(point)?));
    }
    parse_index(w).map(HandleSel::Nth)
}

fn site_name(site: AllocSite) -> &'static str {
    match site {
        AllocSite::Ref => "ref",
        AllocSite::Grow => "grow",
        AllocSite::Shrink => "shrink",
    }
}

struct TableText<'a>(&'a TableOp);

impl fmt::Display for TableText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.0 {
            TableOp::Insert { node, manager } => {
                write!(
                    f,
                    "insert n{}{}",
                    node.0,
                    if manager { " manager" } else { "" }
                )
            }
            TableOp::Increment(s) => write!(f, "inc {}", SelText(s)),
            TableOp::Decrement(s) => write!(f, "dec {}", SelText(s)),
            TableOp::Lookup(node) => write!(f, "lookup n{}", node.0),
            TableOp::Kill => write!(f, "kill"),
            TableOp::FailNext { site: None, n } => write!(f, "fail-next {n}"),
            TableOp::FailNext {
                site: Some(site),
                n,
            } => write!(f, "fail-next {n} at {}", site_name(site)),
            TableOp::InsertMany(c) => write!(f, "insert-many {}", c.0),
            TableOp::DropFrom(s) => write!(f, "drop-from {}", SelText(s)),
            TableOp::DropAll { lifo } => {
                write!(f, "drop-all {}", if lifo { "lifo" } else { "fifo" })
            }
        }
    }
}

fn parse_manager(w: &[&str]) -> Result<bool, String> {
    match w.get(2) {
        None => Ok(false),
        Some(&"manager") => Ok(true),
        Some(other) => Err(format!("expected `manager` or nothing, found {other:?}")),
    }
}

fn parse_table_op(w: &[&str]) -> Result<TableOp, String> {
    Ok(match w[0] {
        "insert" => {
            arity(w, 2, 3)?;
            TableOp::Insert {
                node: parse_node(w[1])?,
                manager: parse_manager(w)?,
            }
        }
        "inc" => (arity(w, 2, 2)?, TableOp::Increment(parse_sel(w[1])?)).1,
        "dec" => (arity(w, 2, 2)?, TableOp::Decrement(parse_sel(w[1])?)).1,
        "lookup" => (arity(w, 2, 2)?, TableOp::Lookup(parse_node(w[1])?)).1,
        "kill" => (arity(w, 1, 1)?, TableOp::Kill).1,
        "fail-next" => {
            let n = parse_num(w.get(1).copied().unwrap_or(""))?;
            let site = match &w[2..] {
                [] => None,
                ["at", "ref"] => Some(AllocSite::Ref),
                ["at", "grow"] => Some(AllocSite::Grow),
                ["at", "shrink"] => Some(AllocSite::Shrink),
                _ => {
                    return Err(format!(
                        "expected `fail-next N [at ref|grow|shrink]`, found {:?}",
                        w.join(" ")
                    ))
                }
            };
            TableOp::FailNext { site, n }
        }
        "insert-many" => {
            (
                arity(w, 2, 2)?,
                TableOp::InsertMany(Count(parse_num(w[1])?)),
            )
                .1
        }
        "drop-from" => (arity(w, 2, 2)?, TableOp::DropFrom(parse_sel(w[1])?)).1,
        "drop-all" => {
            arity(w, 2, 2)?;
            match w[1] {
                "fifo" => TableOp::DropAll { lifo: false },
                "lifo" => TableOp::DropAll { lifo: true },
                other => return Err(format!("expected fifo or lifo, found {other:?}")),
            }
        }
        other => return Err(format!("unknown table operation {other:?}")),
    })
}

struct ThreadText<'a>(&'a ThreadOp);

impl fmt::Display for ThreadText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.0 {
            ThreadOp::Insert { node, manager } => {
                write!(f, "insert n{node}{}", if manager { " manager" } else { "" })
            }
            ThreadOp::Release(k) => write!(f, "release #{k}"),
            ThreadOp::ReleasePrefill(k) => write!(f, "release-prefill #{k}"),
            ThreadOp::Increment(k) => write!(f, "inc #{k}"),
            ThreadOp::InsertMany(n) => write!(f, "insert-many {n}"),
        }
    }
}

fn parse_thread_op(w: &[&str]) -> Result<ThreadOp, String> {
    Ok(match w.first().copied().unwrap_or("") {
        "insert" => {
            arity(w, 2, 3)?;
            ThreadOp::Insert {
                node: parse_node(w[1])?.0,
                manager: parse_manager(w)?,
            }
        }
        "release" => (arity(w, 2, 2)?, ThreadOp::Release(parse_index(w[1])?)).1,
        "release-prefill" => {
            (
                arity(w, 2, 2)?,
                ThreadOp::ReleasePrefill(parse_index(w[1])?),
            )
                .1
        }
        "inc" => (arity(w, 2, 2)?, ThreadOp::Increment(parse_index(w[1])?)).1,
        "insert-many" => (arity(w, 2, 2)?, ThreadOp::InsertMany(parse_num(w[1])?)).1,
        other => return Err(format!("unknown thread operation {other:?}")),
    })
}

fn parse_program_line(
    w: &[&str],
    program: &mut Program,
    schedule: &mut Vec<Decision>,
) -> Result<(), String> {
    match w[0] {
        "pool" => {
            arity(w, 2, 2)?;
            program.pool = match w[1] {
                "idpool" => Pool::IdPool,
                "dbitmap" => Pool::DBitmap,
                other => return Err(format!("unknown pool {other:?}: idpool or dbitmap")),
            };
        }
        "prefill" => {
            arity(w, 2, 2)?;
            program.prefill = parse_num(w[1])?;
        }
        "keep" => {
            arity(w, 2, 2)?;
            program.keep = parse_num(w[1])?;
        }
        "thread" => {
            let rest = w[1..].join(" ");
            let ops = rest
                .split(';')
                .map(|op| parse_thread_op(&op.split_whitespace().collect::<Vec<_>>()))
                .collect::<Result<_, _>>()?;
            program.threads.push(ops);
        }
        "schedule" => {
            for d in &w[1..] {
                let (d, times) = match d.split_once('*') {
                    Some((d, n)) => (d, parse_num::<usize>(n)?),
                    None => (*d, 1),
                };
                let (body, fail) = match d.strip_suffix('!') {
                    Some(body) => (body, true),
                    None => (d, false),
                };
                let thread = body
                    .strip_prefix('t')
                    .ok_or_else(|| format!("expected a decision tN or tN!, found {d:?}"))
                    .and_then(parse_num)?;
                schedule.extend(std::iter::repeat_n(Decision { thread, fail }, times));
            }
        }
        other => return Err(format!("unknown concurrent trace line {other:?}")),
    }
    Ok(())
}

/// For the round-trip fuzz target and test: bytes become a trace of a
/// target chosen by the first byte, which must print and parse back to
/// itself. Concurrent programs come with an arbitrary schedule (no run).
pub fn roundtrip(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let trace = match u8::arbitrary(&mut u).unwrap_or(0) % 4 {
        0 => Trace::PoolOps(crate::decode(u.take_rest())),
        1 => Trace::DBitmapOps(crate::decode(u.take_rest())),
        2 => Trace::HandleTable(crate::decode(u.take_rest())),
        _ => {
            let Ok(program) = Program::arbitrary(&mut u) else {
                return;
            };
            let schedule = (0..u.len().min(64))
                .map(|_| Decision {
                    thread: u8::arbitrary(&mut u).unwrap_or(0) as usize % 4,
                    fail: bool::arbitrary(&mut u).unwrap_or(false),
                })
                .collect();
            Trace::Concurrent(program, schedule)
        }
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
