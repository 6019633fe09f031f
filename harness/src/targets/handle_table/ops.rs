//! The `handle_table` op language: what a program's operations are, how
//! bytes decode to them (weighted so that a process rarely dies early) and
//! their trace lines.

use super::node::Node;
use super::start::StartSet;
use crate::check::{Op, OpKind};
use crate::domain::{Count, Point};
use crate::text::{
    arity, limits, manager_text, one, parse_in, parse_index, parse_manager, parse_node,
    parse_point, OpText,
};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::AllocSite;

/// Which handle an operation names.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandleSel {
    /// The k-th live handle in increasing order (k modulo their number).
    Nth(u8),
    /// The highest live handle.
    Highest,
    /// A plain value, live or not (relative to the `IdPool` capacity).
    Value(Point),
}

/// One operation on the handle table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TableOp {
    /// `insert_or_update_handle`.
    Insert {
        /// The node.
        node: Node,
        /// Whether the caller is the context manager.
        manager: bool,
    },
    /// One more reference through a handle.
    Increment(HandleSel),
    /// One reference less through a handle.
    Decrement(HandleSel),
    /// Look a node up.
    Lookup(Node),
    /// The process dies.
    Kill,
    /// The next `n` allocations of each table fail, anywhere or at one site.
    FailNext {
        /// Where; `None` for any allocation.
        site: Option<AllocSite>,
        /// How many.
        n: u32,
    },
    /// Insert this many fresh nodes (at most [`MAX_BULK`], and never past
    /// [`MAX_HANDLES`] live handles).
    InsertMany(Count),
    /// Drop every reference of every handle at or above this one, highest
    /// first.
    DropFrom(HandleSel),
    /// Drop every reference of every handle, lowest or highest first.
    DropAll {
        /// Highest first.
        lifo: bool,
    },
    /// Corrupt every table's pool behind its back (memory corruption, or a
    /// bug elsewhere in the driver), at the start of its next critical
    /// section.
    Corrupt(CorruptOp),
    /// The memory-pressure callback: the shrinker's table reclaims (one
    /// allocation site `shrink` for the whole callback); nothing for the
    /// others.
    Reclaim,
    /// Every table is built afresh, holding one reference at each given
    /// handle ([`idpool::HandleTable::from_handles`]); its model is built from the
    /// same set on its own. Only as a program's first operation: the
    /// header byte asks for it ([`super::start`]).
    StartFrom(StartSet),
}

/// A corruption of the pool, as an operation names it.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CorruptOp {
    /// Clear the bit of a handle (meant live: the pool will offer its id
    /// again).
    Clear(HandleSel),
    /// Set the bit of an id (meant free: the pool will skip it for good).
    Set(Point),
}

/// The kinds of table operations, under their names in signatures and
/// their feedback classes.
impl Op for TableOp {
    fn kind(&self) -> OpKind {
        let (name, class) = match self {
            TableOp::Insert { .. } => ("Insert", 10),
            TableOp::Increment(_) => ("Increment", 11),
            TableOp::Decrement(_) => ("Decrement", 12),
            TableOp::Lookup(_) => ("Lookup", 13),
            TableOp::Kill => ("Kill", 15),
            TableOp::FailNext { .. } => ("FailNext", 16),
            TableOp::InsertMany(_) => ("InsertMany", 17),
            TableOp::DropFrom(_) => ("DropFrom", 18),
            TableOp::DropAll { .. } => ("DropAll", 19),
            TableOp::Corrupt(_) => ("Corrupt", 22),
            TableOp::Reclaim => ("Reclaim", 14),
            TableOp::StartFrom(_) => ("StartFrom", 23),
        };
        OpKind::new(name, class)
    }
}

impl<'a> Arbitrary<'a> for TableOp {
    /// Weighted: a process that dies early makes the rest of the run
    /// uninteresting, so `Kill` is rare; inserts and drops are common.
    ///
    /// The ranges of the selector byte: insert 0..=27, inc 28..=35, dec
    /// 36..=55, lookup 56..=58, corrupt 59..=60, kill 61..=62, fail-next
    /// 63..=72, insert-many 73..=84, drop-from 85..=93, drop-all 94..=99,
    /// reclaim 100..=103 (it came last, so the bytes below 100 kept their
    /// meaning).
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=103)? {
            0..=27 => TableOp::Insert {
                node: Node::arbitrary(u)?,
                manager: u.ratio(1, 8)?,
            },
            28..=35 => TableOp::Increment(HandleSel::arbitrary(u)?),
            36..=55 => TableOp::Decrement(HandleSel::arbitrary(u)?),
            56..=58 => TableOp::Lookup(Node::arbitrary(u)?),
            59..=60 => TableOp::Corrupt(CorruptOp::arbitrary(u)?),
            61..=62 => TableOp::Kill,
            63..=72 => TableOp::FailNext {
                site: [
                    None,
                    Some(AllocSite::Ref),
                    Some(AllocSite::Grow),
                    Some(AllocSite::Shrink),
                ][u.int_in_range(0..=3)?],
                n: u.int_in_range(1..=3)?,
            },
            73..=84 => TableOp::InsertMany(Count::arbitrary(u)?),
            85..=93 => TableOp::DropFrom(HandleSel::arbitrary(u)?),
            94..=99 => TableOp::DropAll {
                lifo: bool::arbitrary(u)?,
            },
            _ => TableOp::Reclaim,
        })
    }
}

/// The most nodes one bulk insert adds: the legacy scan is O(n) per insert.
pub const MAX_BULK: usize = 128;

/// Bulk inserts stop at this many live handles: two of the flavours
/// scan linearly (the legacy one always, the C one once disabled), so a
/// run's cost grows with the square of its handles. Deep capacities are
/// `pool_ops`' business.
pub const MAX_HANDLES: usize = 1024;

impl HandleSel {
    fn parse(w: &str) -> Result<HandleSel, String> {
        if w == "highest" {
            return Ok(HandleSel::Highest);
        }
        if let Some(point) = w.strip_prefix('=') {
            return Ok(HandleSel::Value(parse_point(point)?));
        }
        parse_index(w).map(HandleSel::Nth)
    }
}

impl fmt::Display for HandleSel {
    /// `#k`, `highest` or `=point`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandleSel::Nth(k) => write!(f, "#{k}"),
            HandleSel::Highest => write!(f, "highest"),
            HandleSel::Value(p) => write!(f, "={p:?}"),
        }
    }
}

/// The name of an allocation site in traces.
fn site_name(site: AllocSite) -> &'static str {
    match site {
        AllocSite::Ref => "ref",
        AllocSite::Grow => "grow",
        AllocSite::Shrink => "shrink",
    }
}

impl OpText for TableOp {
    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TableOp::Insert { node, manager } => {
                write!(f, "insert {node:?}{}", manager_text(manager))
            }
            TableOp::Increment(s) => write!(f, "inc {s}"),
            TableOp::Decrement(s) => write!(f, "dec {s}"),
            TableOp::Lookup(node) => write!(f, "lookup {node:?}"),
            TableOp::Kill => write!(f, "kill"),
            TableOp::FailNext { site: None, n } => write!(f, "fail-next {n}"),
            TableOp::FailNext {
                site: Some(site),
                n,
            } => write!(f, "fail-next {n} at {}", site_name(site)),
            TableOp::InsertMany(c) => write!(f, "insert-many {c:?}"),
            TableOp::DropFrom(s) => write!(f, "drop-from {s}"),
            TableOp::DropAll { lifo } => {
                write!(f, "drop-all {}", if lifo { "lifo" } else { "fifo" })
            }
            TableOp::Corrupt(CorruptOp::Clear(s)) => write!(f, "corrupt clear {s}"),
            TableOp::Corrupt(CorruptOp::Set(p)) => write!(f, "corrupt set {p:?}"),
            TableOp::Reclaim => write!(f, "reclaim"),
            TableOp::StartFrom(start) => write!(f, "start-from {start:?}"),
        }
    }

    fn parse_text(w: &[&str]) -> Result<Self, String> {
        Ok(match w[0] {
            "insert" => {
                arity(w, 2, 3)?;
                TableOp::Insert {
                    node: Node(parse_node(w[1])?),
                    manager: parse_manager(w)?,
                }
            }
            "inc" => TableOp::Increment(one(w, HandleSel::parse)?),
            "dec" => TableOp::Decrement(one(w, HandleSel::parse)?),
            "lookup" => TableOp::Lookup(Node(one(w, parse_node)?)),
            "kill" => (arity(w, 1, 1)?, TableOp::Kill).1,
            "reclaim" => (arity(w, 1, 1)?, TableOp::Reclaim).1,
            "fail-next" => {
                let n = parse_in(w.get(1).copied().unwrap_or(""), limits::FAIL_NEXT)?;
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
            "insert-many" => TableOp::InsertMany(Count(one(w, |w| parse_in(w, limits::COUNT))?)),
            "drop-from" => TableOp::DropFrom(one(w, HandleSel::parse)?),
            "drop-all" => match (arity(w, 2, 2)?, w[1]).1 {
                "fifo" => TableOp::DropAll { lifo: false },
                "lifo" => TableOp::DropAll { lifo: true },
                other => return Err(format!("expected fifo or lifo, found {other:?}")),
            },
            "corrupt" => match (arity(w, 3, 3)?, w[1]).1 {
                "clear" => TableOp::Corrupt(CorruptOp::Clear(HandleSel::parse(w[2])?)),
                "set" => TableOp::Corrupt(CorruptOp::Set(parse_point(w[2])?)),
                other => return Err(format!("expected clear or set, found {other:?}")),
            },
            "start-from" => TableOp::StartFrom(StartSet::parse(&w[1..])?),
            other => return Err(format!("unknown table operation {other:?}")),
        })
    }

    fn simpler(&self) -> Option<Self> {
        match *self {
            TableOp::InsertMany(count) => count.half().map(TableOp::InsertMany),
            TableOp::FailNext { site, n } if n > 1 => Some(TableOp::FailNext { site, n: n - 1 }),
            TableOp::StartFrom(start) => start.simpler().map(TableOp::StartFrom),
            _ => None,
        }
    }
}
