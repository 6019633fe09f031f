//! The `handle_table` runner: every side's table and model driven by the
//! same requests, step by step, each side compared with its own model, the
//! flavours with each other and the pairs of versions with each other; a
//! known upstream finding retires the side (or pair) it is about and the
//! rest of the program runs on.

use super::checks::check_after_step;
use super::model::{key, Hint, TableModel};
use super::node::Node;
use super::ops::{CorruptOp, TableOp, MAX_BULK, MAX_HANDLES};
use super::sides::{pairs, sides, AnyTable, Pair, Side, FLAVOURS};
use super::start::StartSet;
use crate::check::{self, At, Check, Checked, Detail, Flavour, Op};
use crate::domain::Count;
use crate::events::Events;
use crate::feedback;
use crate::history::{self, Versions};
use core::fmt;
use idpool::{Corruption, Error, NodeId, RefInfo, Request, Version, Warning};

/// Fresh nodes for bulk inserts start here, above every [`Node`].
const FRESH_NODES: NodeId = 1 << 32;

/// Runs `ops` on the six flavours of the table at mainline and on their
/// models, for target `target`; the first divergence or broken invariant
/// is the failure.
pub fn run(target: &'static str, ops: &[TableOp]) -> Checked<Events> {
    run_versions(target, &Versions::MAINLINE, ops)
}

/// Runs `ops` on the six flavours of the table, each on the version
/// `versions` gives its driver (and on the versions beside, when asked),
/// each against its own version's model; then the versions run side by
/// side are compared (see [`crate::history`]).
pub fn run_versions(target: &'static str, versions: &Versions, ops: &[TableOp]) -> Checked<Events> {
    let tables = sides(versions, None).expect("a new process's table is always built");
    run_sides(target, versions, tables, ops)
}

/// [`run_versions`] on the sides given (those of [`sides`]). A known
/// upstream finding on a historical side retires that side, or the
/// comparison it came from, and the rest of the program still runs on
/// every other side ([`history::Retired`]).
pub(super) fn run_sides(
    target: &'static str,
    versions: &Versions,
    tables: Vec<Side>,
    ops: &[TableOp],
) -> Checked<Events> {
    let mut run = Run::new(target, versions, tables);
    for (step, op) in ops.iter().enumerate() {
        run.step(step, op, step + 1 == ops.len())?;
    }
    run.retired.finish(run.events)
}

/// A run in progress: the sides, the comparisons of versions, what is
/// retired, and what happened.
struct Run<'v> {
    target: &'static str,
    versions: &'v Versions,
    tables: Vec<Side>,
    pairs: Vec<Pair>,
    retired: history::Retired,
    events: Events,
    /// The last fresh node a bulk insert took.
    fresh: NodeId,
    /// Whether a fault was planned since the tables were built: the
    /// flavours may then hand out different results.
    faults_injected: bool,
    /// The outcome of the request on each side, `None` for a retired one
    /// (reused from request to request: a bulk operation runs hundreds).
    outcomes: Vec<Option<Result<u32, Error>>>,
    /// The capacity each comparison's two sides share before the request.
    pair_before: Vec<usize>,
    /// Where each side's model resumes its searches in a bulk insert.
    hints: Vec<Hint>,
}

impl<'v> Run<'v> {
    fn new(target: &'static str, versions: &'v Versions, tables: Vec<Side>) -> Self {
        let pairs = pairs(versions);
        Run {
            target,
            versions,
            retired: history::Retired::new(tables.len(), pairs.len()),
            tables,
            pairs,
            events: Events::default(),
            fresh: FRESH_NODES,
            faults_injected: false,
            outcomes: Vec::new(),
            pair_before: Vec::new(),
            hints: Vec::new(),
        }
    }

    /// Runs step `step`, operation `op` (the program's `last` one or not),
    /// on every side still running, and checks every side after it.
    fn step(&mut self, step: usize, op: &TableOp, last: bool) -> Checked {
        let at = At {
            target: self.target,
            step,
            op,
            capacity: self.tables[0].1.cap,
        };
        check::begin_step(self.target, step, op, at.capacity);
        // Before a rebuild too, so that `start-from` counts as a resize.
        let capacities: Vec<usize> = self.tables.iter().map(|(t, _)| t.capacity()).collect();
        if let TableOp::StartFrom(start) = op {
            self.rebuild(&at, start)?;
        }
        let requests = requests(op, &self.tables[0].1, &mut self.fresh);
        self.apply_direct(&at)?;
        // The ids this step touched, read back one by one afterwards.
        let mut touched = touched_by(op, &requests);
        let bulk = requests.len() > 1;
        // A bulk insert only adds handles: each model's next search
        // resumes after the id it handed out last.
        self.hints.clear();
        self.hints.resize(self.tables.len(), Hint::default());
        for (i, &request) in requests.iter().enumerate() {
            let of = InBulk(bulk.then_some((i, request)));
            self.request(&at, request, &of, &mut touched)?;
        }
        // The whole table (invariants, by_handle, by_node) is compared after
        // a bulk op, a resize (the capacity moved), a start from given
        // handles, a corruption, a reclaim, a kill, and at the end; after any
        // other step, the ids it touched and the boundaries.
        let boundary = bulk
            || last
            || matches!(
                op,
                TableOp::StartFrom(_) | TableOp::Corrupt(_) | TableOp::Reclaim | TableOp::Kill
            );
        self.check_sides(&at, &capacities, boundary, last, &touched)?;
        observe(self.target, self.versions, &self.tables, op);
        Ok(())
    }

    /// `start-from`: every side built afresh from `start`'s handles.
    fn rebuild(&mut self, at: &At<'_, TableOp>, start: &StartSet) -> Checked {
        self.tables = sides(self.versions, Some(start)).map_err(|(flavour, e)| {
            at.failure(
                Check::Outcome,
                Some(flavour),
                format_args!(
                    "{flavour}: building the table from {start:?} was refused ({e}); \
                     the model holds every handle"
                ),
            )
        })?;
        self.faults_injected = false;
        self.events.started_above_16_bits += u32::from(start.highest() > 65_535);
        Ok(())
    }

    /// The operation, if it is no request, on every side still running.
    fn apply_direct(&mut self, at: &At<'_, TableOp>) -> Checked {
        for (i, (table, model)) in self.tables.iter_mut().enumerate() {
            if self.retired.side(i) {
                continue;
            }
            let direct = apply_direct(at, table.as_mut(), model, &mut self.events);
            let planned = self.retired.of_side(i, involving(&self.pairs, i), direct)?;
            self.faults_injected |= planned == Some(true);
        }
        Ok(())
    }

    /// Runs `request` on every side still running (each against its own
    /// model), then compares the flavours' outcomes and each pair's.
    fn request(
        &mut self,
        at: &At<'_, TableOp>,
        request: Request,
        of: &InBulk,
        touched: &mut Vec<u32>,
    ) -> Checked {
        self.pair_before.clear();
        (self.pair_before).extend(self.pairs.iter().map(|p| self.tables[p.a].0.capacity()));
        self.outcomes.clear();
        let sides = self.tables.iter_mut().zip(&mut self.hints).enumerate();
        for (s, ((table, model), hint)) in sides {
            if self.retired.side(s) {
                self.outcomes.push(None);
                continue;
            }
            let ran = Ran { request, of };
            let outcome = ran.on(at, table.as_mut(), model, hint, touched, &mut self.events);
            let outcome = self
                .retired
                .of_side(s, involving(&self.pairs, s), outcome)?;
            self.outcomes.push(outcome);
        }
        touched.extend(self.outcomes.iter().flatten().filter_map(|o| match *o {
            // The ids a corrupted pool offered and the model took.
            Ok(id) | Err(Error::Mismatch { id }) | Err(Error::KernelBug { id }) => Some(id),
            _ => None,
        }));
        self.flavours_agree(at, request)?;
        self.compare_pairs(at, request, of)
    }

    /// While no fault is planned and the process lives, every flavour
    /// hands out the same outcome. (Once the process is dead the drivers
    /// differ: C still inserts.)
    fn flavours_agree(&self, at: &At<'_, TableOp>, request: Request) -> Checked {
        let outcomes = &self.outcomes;
        let mut live = (0..FLAVOURS).filter(|&s| outcomes[s].is_some());
        let first = live.next();
        let disagree = first.is_some_and(|f| live.any(|s| outcomes[s] != outcomes[f]));
        if self.faults_injected || self.tables[0].1.dead || !disagree {
            return Ok(());
        }
        let each: Vec<String> = (0..FLAVOURS)
            .filter_map(|s| Some(format!("{} {:?}", self.tables[s].0.flavour(), outcomes[s]?)))
            .collect();
        Err(at.failure(
            Check::FlavoursDisagree,
            None,
            format_args!("the flavours disagree on {request:?}: {}", each.join(", ")),
        ))
    }

    /// Each pair of versions still compared: the same outcome, capacity
    /// and planned failures left after `request` (under planned failures an
    /// attempt that failed leaves outcome and capacity alone, and only
    /// shows in which allocations each side attempted).
    fn compare_pairs(&mut self, at: &At<'_, TableOp>, request: Request, of: &InBulk) -> Checked {
        for (p, &Pair { a, b, flavour }) in self.pairs.iter().enumerate() {
            if self.retired.pair(p) {
                continue;
            }
            let (Some(oa), Some(ob)) = (self.outcomes[a], self.outcomes[b]) else {
                continue;
            };
            let (ta, tb) = (&self.tables[a].0, &self.tables[b].0);
            let (ca, cb) = (ta.capacity(), tb.capacity());
            let (pa, pb) = (ta.pending_failures(), tb.pending_failures());
            if oa == ob && ca == cb && pa == pb {
                continue;
            }
            let detail = Detail::Versions {
                request,
                versions: [self.tables[a].1.version, self.tables[b].1.version],
                outcomes: [oa, ob],
                before: self.pair_before[p],
                capacities: [ca, cb],
                pending: [pa, pb],
            };
            let failure = at
                .failure(
                    Check::VersionsDiffer,
                    Some(flavour),
                    format_args!(
                        "{flavour}: the versions differ on {request:?}{of}: outcome {oa:?} vs \
                         {ob:?}, capacity {ca} vs {cb}, planned failures still pending {pa} \
                         vs {pb}"
                    ),
                )
                .with_detail(detail);
            self.retired.of_pair(p, failure)?;
        }
        Ok(())
    }

    /// The checks of every side still running after the step
    /// ([`check_after_step`]).
    fn check_sides(
        &mut self,
        at: &At<'_, TableOp>,
        capacities: &[usize],
        boundary: bool,
        last: bool,
        touched: &[u32],
    ) -> Checked {
        for (i, ((table, model), &before)) in self.tables.iter().zip(capacities).enumerate() {
            if self.retired.side(i) {
                continue;
            }
            let checked =
                check_after_step(at, table.as_ref(), model, before, boundary, last, touched);
            self.retired
                .of_side(i, involving(&self.pairs, i), checked)?;
        }
        Ok(())
    }
}

/// The comparisons side `i` is in.
fn involving(pairs: &[Pair], i: usize) -> impl Iterator<Item = usize> + '_ {
    (pairs.iter().enumerate())
        .filter(move |(_, p)| p.a == i || p.b == i)
        .map(|(p, _)| p)
}

/// Tells the fuzzer which abstract state `op` led to ([`crate::feedback`]).
/// The components, and why:
/// - the versions of both drivers and whether a neighbour runs beside: a
///   state of June 2024 is not a state of mainline;
/// - the `IdPool` model's capacity and fill classes, and the `dbitmap`
///   model's capacity class (0 once disabled): the resize boundaries of
///   both policies;
/// - whether handle 0 is live, the process dead, a pool corrupted, a
///   failure still planned: the paths of the real bugs (the context
///   manager's descriptor, ESRCH, the mismatch reactions, ENOMEM);
/// - the kind of `op`: the transition, not only the state.
fn observe(target: &str, versions: &Versions, tables: &[Side], op: &TableOp) {
    let version = |v: Version| Version::ALL.iter().position(|&w| w == v).unwrap_or(0) as u64;
    let (rust, c) = (&tables[0].1, &tables[1].1);
    let flag = |b: bool| u64::from(b);
    let beside = versions.c_versus.is_some() || versions.rust_versus.is_some();
    let planned = rust.pending_any > 0 || rust.pending_at.values().any(|&n| n > 0);
    feedback::observe(
        feedback::AbstractState::new(target)
            .with(version(versions.c), 8)
            .with(version(versions.rust), 8)
            .with(flag(beside), 2)
            .with(
                feedback::capacity_class(rust.cap),
                feedback::CAPACITY_CLASSES,
            )
            .with(
                feedback::fill_class(rust.refs.handles.len(), rust.cap),
                feedback::FILL_CLASSES,
            )
            .with(feedback::capacity_class(c.cap), feedback::CAPACITY_CLASSES)
            .with(flag(rust.refs.handles.contains_key(&0)), 2)
            .with(flag(rust.dead), 2)
            .with(flag(rust.corrupted || c.corrupted), 2)
            .with(flag(planned), 2)
            .with(op.kind().class(), 64),
    );
}

/// The requests `op` stands for, chosen on `model` (the first flavour's),
/// so that every table sees the same ones.
fn requests(op: &TableOp, model: &TableModel, fresh: &mut NodeId) -> Vec<Request> {
    match *op {
        TableOp::Insert { node, manager } => vec![Request::Insert {
            node: node.0,
            is_manager: manager,
        }],
        TableOp::Increment(sel) => vec![Request::Increment(model.resolve(sel))],
        TableOp::Decrement(sel) => vec![Request::Decrement(model.resolve(sel))],
        TableOp::InsertMany(Count(n)) => (0..n
            .min(MAX_BULK)
            .min(MAX_HANDLES.saturating_sub(model.refs.handles.len())))
            .map(|_| {
                *fresh += 1;
                Request::Insert {
                    node: *fresh,
                    is_manager: false,
                }
            })
            .collect(),
        TableOp::DropFrom(sel) => {
            let from = model.resolve(sel);
            drops(model.refs.handles.range(from..).rev())
        }
        TableOp::DropAll { lifo: false } => drops(model.refs.handles.iter()),
        TableOp::DropAll { lifo: true } => drops(model.refs.handles.iter().rev()),
        TableOp::Lookup(_)
        | TableOp::Kill
        | TableOp::FailNext { .. }
        | TableOp::Corrupt(_)
        | TableOp::Reclaim
        | TableOp::StartFrom(_) => Vec::new(),
    }
}

/// Every reference of each of `handles`, dropped one at a time.
fn drops<'a>(handles: impl Iterator<Item = (&'a u32, &'a RefInfo)>) -> Vec<Request> {
    handles
        .flat_map(|(&h, info)| (0..info.count).map(move |_| Request::Decrement(h)))
        .collect()
}

/// The handles `op`'s requests name (an increment's or a decrement's), and
/// those a table built from given handles starts with.
fn touched_by(op: &TableOp, requests: &[Request]) -> Vec<u32> {
    let mut touched: Vec<u32> = requests
        .iter()
        .filter_map(|r| match *r {
            Request::Increment(h) | Request::Decrement(h) => Some(h),
            Request::Insert { .. } => None,
        })
        .collect();
    if let TableOp::StartFrom(start) = op {
        touched.extend(start.pairs().iter().map(|&(h, _)| h));
    }
    touched
}

/// The ops that are no request: lookup, kill, planned failures and
/// corruptions. Returns whether a fault was planned.
fn apply_direct(
    at: &At<'_, TableOp>,
    table: &mut dyn AnyTable,
    model: &mut TableModel,
    events: &mut Events,
) -> Checked<bool> {
    let flavour = table.flavour();
    match *at.op {
        TableOp::Lookup(Node(node)) => at.compare(
            Check::Lookup,
            Some(flavour),
            format_args!("{flavour}: lookup of node {node}"),
            model.refs.nodes.get(&node).copied(),
            table.lookup(node),
        )?,
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
            return Ok(true);
        }
        TableOp::Corrupt(c) => {
            // Resolved on each side's own model: the handle it holds, the
            // point of its own capacity.
            let corruption = match c {
                CorruptOp::Clear(sel) => Corruption::ClearBit(model.resolve(sel)),
                CorruptOp::Set(p) => Corruption::SetBit(p.resolve(model.cap) as u32),
            };
            model.corruptions.push(corruption);
            table.corrupt(corruption);
            return Ok(true);
        }
        TableOp::Reclaim => reclaim(at, table, model, events)?,
        _ => {}
    }
    Ok(false)
}

/// [`TableOp::Reclaim`]: the ids the memory-pressure callback gives back,
/// and the capacity after it, against the model's reclaim.
fn reclaim(
    at: &At<'_, TableOp>,
    table: &mut dyn AnyTable,
    model: &mut TableModel,
    events: &mut Events,
) -> Checked {
    let flavour = table.flavour();
    let expected = model.reclaim(events);
    at.compare(
        Check::Outcome,
        Some(flavour),
        format_args!("{flavour}: ids given back by the reclaim"),
        expected,
        table.reclaim(),
    )?;
    at.compare(
        Check::Capacity,
        Some(flavour),
        format_args!("{flavour}: capacity after the reclaim"),
        model.cap,
        table.capacity(),
    )
}

/// One request, as one side runs it: the request, and where in a bulk
/// operation it stands.
struct Ran<'a> {
    request: Request,
    of: &'a InBulk,
}

impl Ran<'_> {
    /// Runs the request on one flavour and its model, and compares. The
    /// ids of the mismatches the model warned of (a corrupted pool offered
    /// a live handle's id, and the version took its bit) go to `touched`:
    /// their bits are read after the step like those of the handles it
    /// gave.
    fn on(
        &self,
        at: &At<'_, TableOp>,
        table: &mut dyn AnyTable,
        model: &mut TableModel,
        hint: &mut Hint,
        touched: &mut Vec<u32>,
        events: &mut Events,
    ) -> Checked<Result<u32, Error>> {
        let request = self.request;
        // Only a *new* handle must avoid 0: an existing node keeps its
        // handle, whoever asks (the context manager can change).
        let new_for_non_manager = match request {
            Request::Insert { node, is_manager } => {
                !is_manager && !model.refs.nodes.contains_key(&node)
            }
            _ => false,
        };
        let expected = match request {
            Request::Insert { node, is_manager } => model.insert(node, is_manager, hint, events),
            Request::Increment(h) => model.increment(h),
            Request::Decrement(h) => model.decrement(h, events),
        };
        let actual = table.run(request);
        if let (Some(_), Ok(64..)) = (model.id_limit, actual) {
            events.tree_wide += 1;
        }
        // A corrupted pool may offer 0 to anyone, where the version
        // searches from 0; the model says when.
        let predicted = model.corrupted && expected == Ok(0);
        if new_for_non_manager && actual == Ok(0) && !predicted {
            let flavour = table.flavour();
            return Err(at.failure(
                Check::HandleZero,
                Some(flavour),
                format_args!("{flavour}: new handle 0 given to a non-manager"),
            ));
        }
        self.crash(at, table.flavour(), model.version, expected, actual)?;
        self.compare(at, table, model, expected, actual, touched)?;
        Ok(actual)
    }

    /// A `BUG()` the model did not expect: the C driver gave a descriptor
    /// `refs_by_desc` already holds.
    fn crash(
        &self,
        at: &At<'_, TableOp>,
        flavour: Flavour,
        version: Version,
        expected: Result<u32, Error>,
        actual: Result<u32, Error>,
    ) -> Checked {
        let Err(Error::KernelBug { id }) = actual else {
            return Ok(());
        };
        if expected == actual {
            return Ok(());
        }
        let manager = matches!(
            self.request,
            Request::Insert {
                is_manager: true,
                ..
            }
        );
        let detail = Detail::Crash {
            version,
            id,
            manager,
        };
        let of = self.of;
        Err(at
            .failure(
                Check::KernelCrash,
                Some(flavour),
                format_args!(
                    "{flavour}: kernel BUG() in binder_get_ref_for_node_olocked{of}: descriptor \
                     {id} is already in refs_by_desc; the model expected {expected:?}"
                ),
            )
            .with_detail(detail))
    }

    /// The outcome, the warnings the table logged and its capacity, each
    /// against the model's.
    fn compare(
        &self,
        at: &At<'_, TableOp>,
        table: &mut dyn AnyTable,
        model: &mut TableModel,
        expected: Result<u32, Error>,
        actual: Result<u32, Error>,
        touched: &mut Vec<u32>,
    ) -> Checked {
        let (flavour, of) = (table.flavour(), self.of);
        let name = Some(flavour);
        at.compare(
            Check::Outcome,
            name,
            format_args!("{flavour}: outcome{of}"),
            expected,
            actual,
        )?;
        let warned = std::mem::take(&mut model.warnings);
        touched.extend(warned.iter().map(|w| match *w {
            Warning::Mismatch { id, .. } => id,
        }));
        let warnings = format_args!("{flavour}: warnings{of}");
        at.compare(
            Check::Warning,
            name,
            warnings,
            warned,
            table.drain_warnings(),
        )?;
        let capacity = format_args!("{flavour}: capacity{of}");
        at.compare(Check::Capacity, name, capacity, model.cap, table.capacity())
    }
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
