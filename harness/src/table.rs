//! Table-level differential testing: the three flavours of the Binder handle
//! table side by side, each against its own model.

use crate::check::At;
use crate::domain::{Count, Point};
use crate::oracle::{self, Policy};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::{
    AllocSite, DBitmap, Error, Flavour, HandleTable, IdPool, InvariantViolation, LinearScan,
    NodeId, RefInfo, Request,
};
use std::collections::BTreeMap;

/// A node among a few, so that the same node comes back often.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Node(pub NodeId);

/// How many distinct nodes [`Node`] draws from.
pub const NODES: u64 = 24;

impl<'a> Arbitrary<'a> for Node {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Node(u.int_in_range(0..=NODES - 1)?))
    }
    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(1))
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

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
}

impl<'a> Arbitrary<'a> for TableOp {
    /// Weighted: a process that dies early makes the rest of the run
    /// uninteresting, so `Kill` is rare; inserts and drops are common.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=99)? {
            0..=27 => TableOp::Insert {
                node: Node::arbitrary(u)?,
                manager: u.ratio(1, 8)?,
            },
            28..=35 => TableOp::Increment(HandleSel::arbitrary(u)?),
            36..=55 => TableOp::Decrement(HandleSel::arbitrary(u)?),
            56..=60 => TableOp::Lookup(Node::arbitrary(u)?),
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
            _ => TableOp::DropAll {
                lifo: bool::arbitrary(u)?,
            },
        })
    }
}

/// The most nodes one bulk insert adds: the legacy scan is O(n) per insert.
pub const MAX_BULK: usize = 128;

/// Bulk inserts stop at this many live handles: two of the three flavours
/// scan linearly (the legacy one always, the C one once disabled), so a
/// run's cost grows with the square of its handles. Deep capacities are
/// `pool_ops`' business.
pub const MAX_HANDLES: usize = 1024;

/// Fresh nodes for bulk inserts start here, above every [`Node`].
const FRESH_NODES: NodeId = 1 << 32;

/// The naive model of one flavour's table: two ordered maps, a capacity
/// from the policy formulas, and the injected failures still pending.
#[derive(Clone, Debug)]
pub struct TableModel {
    /// `None` for the linear scan.
    policy: Option<Policy>,
    handles: BTreeMap<u32, RefInfo>,
    nodes: BTreeMap<NodeId, u32>,
    /// 0 for the linear scan and for a disabled dbitmap.
    cap: usize,
    /// Planned failures for any allocation, then per [`AllocSite`].
    pending_any: u32,
    pending_at: BTreeMap<SiteKey, u32>,
    dead: bool,
}

/// [`AllocSite`] as a map key.
type SiteKey = u8;

fn key(site: AllocSite) -> SiteKey {
    site as u8
}

impl TableModel {
    fn new(policy: Option<Policy>) -> Self {
        TableModel {
            policy,
            handles: BTreeMap::new(),
            nodes: BTreeMap::new(),
            cap: if policy.is_some() { oracle::MIN } else { 0 },
            pending_any: 0,
            pending_at: BTreeMap::new(),
            dead: false,
        }
    }

    /// Whether the next allocation at `site` fails, consuming one planned
    /// failure: one for that site first, else one for any site.
    fn next_alloc_fails(&mut self, site: AllocSite) -> bool {
        let at = self.pending_at.entry(key(site)).or_default();
        if *at > 0 {
            *at -= 1;
            return true;
        }
        let fails = self.pending_any > 0;
        self.pending_any -= fails as u32;
        fails
    }

    /// The smallest id >= start that no handle holds, knowing that none is
    /// free below `hint`.
    fn smallest_free(&self, start: u32, hint: u32) -> u32 {
        let start = start.max(hint);
        let mut id = start;
        for &h in self.handles.range(start..).map(|(h, _)| h) {
            if h != id {
                break;
            }
            id += 1;
        }
        id
    }

    /// `insert_or_update_handle`. `hint`: no id below it is free (a bulk
    /// insert only adds handles, so each search resumes where the last ended).
    fn insert(
        &mut self,
        node: NodeId,
        manager: bool,
        hint: u32,
        events: &mut Events,
    ) -> Result<u32, Error> {
        if let Some(&h) = self.nodes.get(&node) {
            self.handles.get_mut(&h).unwrap().count += 1;
            return Ok(h);
        }
        if self.next_alloc_fails(AllocSite::Ref) {
            events.alloc_failed += 1;
            return Err(Error::NoMemory);
        }
        let id = loop {
            let id = self.smallest_free(if manager { 0 } else { 1 }, hint);
            let Some(policy) = self.policy else { break id };
            if (id as usize) < self.cap {
                break id;
            }
            if self.cap == 0 {
                events.scan_fallback += 1;
                break id;
            }
            events.pool_full += 1;
            let target = oracle::grow_target(policy, self.cap);
            let fails = self.next_alloc_fails(AllocSite::Grow);
            match (policy, target) {
                (Policy::Rust, None) => return Err(Error::NoMemory),
                (Policy::Rust, Some(_)) if fails => {
                    events.alloc_failed += 1;
                    return Err(Error::NoMemory);
                }
                (Policy::C, Some(t)) if fails || !oracle::alloc_ok(policy, t, false) => {
                    events.alloc_failed += 1;
                    events.disabled += 1;
                    self.cap = 0;
                }
                (_, Some(t)) => {
                    events.grow_committed += 1;
                    self.cap = t;
                }
                (Policy::C, None) => unreachable!("C always has a grow target"),
            }
        };
        if self.dead {
            events.dead_refused += 1;
            return Err(Error::DeadProcess);
        }
        self.nodes.insert(node, id);
        self.handles.insert(id, RefInfo { node, count: 1 });
        Ok(id)
    }

    fn increment(&mut self, handle: u32) -> Result<u32, Error> {
        let info = self
            .handles
            .get_mut(&handle)
            .ok_or(Error::UnknownHandle(handle))?;
        info.count += 1;
        Ok(handle)
    }

    fn decrement(&mut self, handle: u32, events: &mut Events) -> Result<u32, Error> {
        let info = self
            .handles
            .get_mut(&handle)
            .ok_or(Error::UnknownHandle(handle))?;
        info.count -= 1;
        if info.count > 0 {
            return Ok(handle);
        }
        let node = info.node;
        self.handles.remove(&handle);
        self.nodes.remove(&node);
        let Some(policy) = self.policy.filter(|_| self.cap != 0) else {
            return Ok(handle);
        };
        let last = self.handles.keys().next_back().map(|&h| h as usize);
        if let Some(target) = oracle::shrink_target(policy, self.cap, last) {
            let fail = self.next_alloc_fails(AllocSite::Shrink);
            if oracle::alloc_ok(policy, target, fail) {
                events.shrink_committed += 1;
                self.cap = target;
            } else {
                events.alloc_failed += 1;
            }
        }
        Ok(handle)
    }

    fn resolve(&self, sel: HandleSel) -> u32 {
        match sel {
            HandleSel::Nth(k) if !self.handles.is_empty() => *self
                .handles
                .keys()
                .nth(k as usize % self.handles.len())
                .unwrap(),
            HandleSel::Nth(_) => 1,
            HandleSel::Highest => self.handles.keys().next_back().copied().unwrap_or(0),
            HandleSel::Value(p) => p.resolve(self.cap) as u32,
        }
    }
}

/// One flavour's table, as the runner sees it.
trait AnyTable {
    fn name(&self) -> &'static str;
    fn run(&mut self, request: Request) -> Result<u32, Error>;
    fn lookup(&self, node: NodeId) -> Option<u32>;
    fn kill(&mut self);
    fn fail_next(&self, site: Option<AllocSite>, n: u32);
    fn capacity(&self) -> usize;
    fn by_handle(&self) -> &BTreeMap<u32, RefInfo>;
    fn check_invariants(&self) -> Result<(), InvariantViolation>;
}

impl<F: Flavour> AnyTable for HandleTable<F> {
    fn name(&self) -> &'static str {
        F::NAME
    }
    fn run(&mut self, request: Request) -> Result<u32, Error> {
        HandleTable::run(self, request)
    }
    fn lookup(&self, node: NodeId) -> Option<u32> {
        HandleTable::lookup(self, node)
    }
    fn kill(&mut self) {
        HandleTable::kill(self)
    }
    fn fail_next(&self, site: Option<AllocSite>, n: u32) {
        match site {
            Some(site) => self.faults().fail_next_at(site, n),
            None => self.faults().fail_next(n),
        }
    }
    fn capacity(&self) -> usize {
        HandleTable::capacity(self)
    }
    fn by_handle(&self) -> &BTreeMap<u32, RefInfo> {
        self.refs().by_handle()
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.refs().check_invariants()
    }
}

/// Above this many handles, the whole-table comparison runs only after bulk
/// operations and at the end, not after every step.
const FULL_CHECK_LIMIT: usize = 256;

/// Runs `ops` on the three flavours of the table and on their models.
/// Panics at the first divergence or broken invariant.
pub fn run(ops: &[TableOp]) -> Events {
    let mut tables: [(Box<dyn AnyTable>, TableModel); 3] = [
        (
            Box::new(HandleTable::<IdPool>::new()),
            TableModel::new(Some(Policy::Rust)),
        ),
        (
            Box::new(HandleTable::<DBitmap>::new()),
            TableModel::new(Some(Policy::C)),
        ),
        (
            Box::new(HandleTable::<LinearScan>::new()),
            TableModel::new(None),
        ),
    ];
    let mut events = Events::default();
    let mut fresh = FRESH_NODES;
    let mut faults_injected = false;
    for (step, op) in ops.iter().enumerate() {
        let at = At {
            target: "handle_table",
            step,
            op,
            capacity: tables[0].1.cap,
        };
        crate::check::begin_step("handle_table", step, op, tables[0].1.cap);
        // Handles are chosen on the first model, so all three tables see the
        // same request.
        let requests: Vec<Request> = match *op {
            TableOp::Insert { node, manager } => vec![Request::Insert {
                node: node.0,
                is_manager: manager,
            }],
            TableOp::Increment(sel) => vec![Request::Increment(tables[0].1.resolve(sel))],
            TableOp::Decrement(sel) => vec![Request::Decrement(tables[0].1.resolve(sel))],
            TableOp::InsertMany(Count(n)) => (0..n
                .min(MAX_BULK)
                .min(MAX_HANDLES.saturating_sub(tables[0].1.handles.len())))
                .map(|_| {
                    fresh += 1;
                    Request::Insert {
                        node: fresh,
                        is_manager: false,
                    }
                })
                .collect(),
            TableOp::DropFrom(sel) => {
                let from = tables[0].1.resolve(sel);
                drops(tables[0].1.handles.range(from..).rev())
            }
            TableOp::DropAll { lifo: false } => drops(tables[0].1.handles.iter()),
            TableOp::DropAll { lifo: true } => drops(tables[0].1.handles.iter().rev()),
            TableOp::Lookup(_) | TableOp::Kill | TableOp::FailNext { .. } => Vec::new(),
        };
        let bulk = requests.len() > 1;
        for (table, model) in tables.iter_mut() {
            match *op {
                TableOp::Lookup(Node(node)) => at.eq(
                    format_args!("{}: lookup of node {node}", table.name()),
                    model.nodes.get(&node).copied(),
                    table.lookup(node),
                ),
                TableOp::Kill => {
                    model.dead = true;
                    table.kill();
                }
                TableOp::FailNext { site, n } => {
                    match site {
                        Some(site) => *model.pending_at.entry(key(site)).or_default() += n,
                        None => model.pending_any += n,
                    }
                    table.fail_next(site, n);
                    faults_injected = true;
                }
                _ => {}
            }
        }
        // A bulk insert only adds handles: each model's next search resumes
        // after the id it handed out last.
        let mut hints = [0u32; 3];
        for (i, &request) in requests.iter().enumerate() {
            let mut outcomes = Vec::with_capacity(3);
            for ((table, model), hint) in tables.iter_mut().zip(&mut hints) {
                // Only a *new* handle must avoid 0: an existing node keeps
                // its handle, whoever asks (the context manager can change).
                let new_for_non_manager = match request {
                    Request::Insert { node, is_manager } => {
                        !is_manager && !model.nodes.contains_key(&node)
                    }
                    _ => false,
                };
                let expected = match request {
                    Request::Insert { node, is_manager } => {
                        let outcome = model.insert(node, is_manager, *hint, &mut events);
                        if let (true, Ok(id)) = (bulk, outcome) {
                            *hint = id + 1;
                        }
                        outcome
                    }
                    Request::Increment(h) => model.increment(h),
                    Request::Decrement(h) => model.decrement(h, &mut events),
                };
                let actual = table.run(request);
                let name = table.name();
                let of = InBulk(bulk.then_some((i, request)));
                if new_for_non_manager && actual == Ok(0) {
                    at.fail_check(
                        "handle 0 to a non-manager",
                        format_args!("{}: new handle 0 given to a non-manager", table.name()),
                    );
                }
                at.eq(format_args!("{name}: outcome{of}"), expected, actual);
                at.eq(
                    format_args!("{name}: capacity{of}"),
                    model.cap,
                    table.capacity(),
                );
                outcomes.push(actual);
            }
            if !faults_injected && outcomes.iter().any(|o| *o != outcomes[0]) {
                at.fail_check(
                    "flavours disagree",
                    format_args!(
                    "the flavours disagree on {request:?}: idpool {:?}, dbitmap {:?}, linear {:?}",
                    outcomes[0], outcomes[1], outcomes[2]
                ),
                );
            }
        }
        for (table, model) in tables.iter() {
            if bulk || model.handles.len() <= FULL_CHECK_LIMIT || step + 1 == ops.len() {
                check_whole(&at, table.as_ref(), model);
            }
        }
    }
    events
}

/// " of request #i {request}" inside a bulk operation, nothing outside.
struct InBulk(Option<(usize, Request)>);

impl fmt::Display for InBulk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((i, request)) => write!(f, " of request #{i} {request:?}"),
            None => Ok(()),
        }
    }
}

fn drops<'a>(handles: impl Iterator<Item = (&'a u32, &'a RefInfo)>) -> Vec<Request> {
    handles
        .flat_map(|(&h, info)| (0..info.count).map(move |_| Request::Decrement(h)))
        .collect()
}

fn check_whole(at: &At<'_, TableOp>, table: &dyn AnyTable, model: &TableModel) {
    if let Err(violation) = table.check_invariants() {
        at.fail_check(
            &format!("{}: invariant", table.name()),
            format_args!("{}: invariant broken: {violation}", table.name()),
        );
    }
    if table.by_handle() != &model.handles {
        let diff: Vec<_> = model
            .handles
            .iter()
            .filter(|(h, info)| table.by_handle().get(h) != Some(info))
            .map(|(h, info)| (h, Some(info), table.by_handle().get(h)))
            .chain(
                table
                    .by_handle()
                    .iter()
                    .filter(|(h, _)| !model.handles.contains_key(h))
                    .map(|(h, info)| (h, None, Some(info))),
            )
            .take(6)
            .collect();
        at.fail_check(
            &format!("{}: by_handle", table.name()),
            format_args!(
                "{}: by_handle differs from the model's (handle, expected, actual): {diff:?}",
                table.name()
            ),
        );
    }
}
