//! Table-level differential testing: the flavours of the Binder handle
//! table side by side, each against its own model: mainline's three
//! (`IdPool`, `DBitmap`, the legacy scan) and the three designs
//! (`FastPool`, `AugmentedTree`, `Shrinker`; see [`crate::designs`]).
//!
//! Each table runs the upstream version its driver is given
//! ([`run_versions`], see [`crate::history`]) and its model follows that
//! version's rules; the designs support the Rust versions only
//! ([`idpool::Flavour::supports`]) and follow the Rust driver's version. A program
//! may also run a second `dbitmap` or `IdPool` table on the neighbouring
//! version and compare the two ([`Check::VersionsDiffer`]). Corruption of
//! the pools ([`TableOp::Corrupt`]) is tracked by the models, which then
//! predict each version's reaction, its warnings and the pool/`by_handle`
//! disagreement the table must report; the augmented tree has no bits of
//! its own, so corruption does not reach it (its model ignores it, as the
//! linear scan's does).

use crate::bits::{self, Expected, Probe};
use crate::check::{At, Check, Checked, Detail, Op, OpKind};
use crate::designs::{self, Design};
use crate::domain::{Count, Point};
use crate::feedback;
use crate::history::{self, Reaction, Rules, Versions};
use crate::idset::IdSet;
use crate::model::{self, HandleModel, Mismatch};
use crate::oracle::{self, Policy};
use crate::table_start::StartSet;
use crate::text::{
    arity, limits, manager_text, one, parse_in, parse_index, parse_manager, parse_node,
    parse_point, OpText,
};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::{
    AllocSite, AugmentedTree, BuildError, Corruption, DBitmap, Error, FastPool, Faults,
    HandleTable, IdPool, InvariantViolation, LinearScan, NodeId, NodeRefs, RefInfo, Request,
    SharedHandleTable, Shrinker, Version, Warning,
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
    /// Corrupt every table's pool behind its back (memory corruption, or a
    /// bug elsewhere in the driver), at the start of its next critical
    /// section.
    Corrupt(CorruptOp),
    /// The memory-pressure callback: the shrinker's table reclaims (one
    /// allocation site `shrink` for the whole callback); nothing for the
    /// others.
    Reclaim,
    /// Every table is built afresh, holding one reference at each given
    /// handle ([`HandleTable::from_handles`]); its model is built from the
    /// same set on its own. Only as a program's first operation: the
    /// header byte asks for it ([`crate::table_start`]).
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

impl Op for TableOp {
    fn kind(&self) -> OpKind {
        match self {
            TableOp::Insert { .. } => OpKind::Insert,
            TableOp::Increment(_) => OpKind::Increment,
            TableOp::Decrement(_) => OpKind::Decrement,
            TableOp::Lookup(_) => OpKind::Lookup,
            TableOp::Kill => OpKind::Kill,
            TableOp::FailNext { .. } => OpKind::FailNext,
            TableOp::InsertMany(_) => OpKind::InsertMany,
            TableOp::DropFrom(_) => OpKind::DropFrom,
            TableOp::DropAll { .. } => OpKind::DropAll,
            TableOp::Corrupt(_) => OpKind::Corrupt,
            TableOp::Reclaim => OpKind::Reclaim,
            TableOp::StartFrom(_) => OpKind::StartFrom,
        }
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

/// Fresh nodes for bulk inserts start here, above every [`Node`].
const FRESH_NODES: NodeId = 1 << 32;

/// The naive model of one flavour's table: the shared [`HandleModel`], a
/// capacity from the policy formulas, the injected failures still pending,
/// and the version's [`Rules`].
///
/// Besides the handles, the model keeps the pool's set bits as the
/// version's rules and the injected corruptions leave them (`bits`): with
/// no corruption they are exactly the handles (plus bit 0 where the
/// version reserves it), which the model checks against its own gap scan
/// at every insert; a corruption makes them differ, and then the model
/// says what the version does when the pool offers an id that a handle
/// holds ([`Reaction`]) and which pool/`by_handle` disagreement the
/// table's invariant check must report.
#[derive(Clone, Debug)]
pub struct TableModel {
    /// `None` for the linear scan.
    policy: Option<Policy>,
    /// The version it follows, and that version's rules.
    version: Version,
    rules: Rules,
    refs: HandleModel,
    /// 0 for the linear scan and for a disabled dbitmap.
    cap: usize,
    /// The pool's set bits (bitmap flavours, while enabled).
    bits: IdSet,
    /// Corruptions planned, applied at the start of the next request.
    corruptions: Vec<Corruption>,
    /// Whether a corruption changed a bit.
    corrupted: bool,
    /// Warnings the version logs, not yet compared.
    warnings: Vec<Warning>,
    /// Planned failures for any allocation, then per [`AllocSite`].
    pending_any: u32,
    pending_at: BTreeMap<SiteKey, u32>,
    dead: bool,
    /// Whether the last decrement shrinks (not the shrinker's).
    shrinks_on_release: bool,
    /// Whether [`TableOp::Reclaim`] shrinks (the shrinker's only).
    reclaims: bool,
    /// The smallest id never handed out (the augmented tree's 2^30);
    /// `None` where the capacity formulas say when an insert fails.
    id_limit: Option<u32>,
}

/// Where a bulk insert's next searches may start. A bulk insert only adds
/// handles and sets bits (its corruptions land at its first insert, and a
/// map that goes away does not come back), so what one search passed stays
/// taken for the next: no id in `1..gap` is free of a handle, and no id
/// in `0..bits` is clear in the pool's bits (the map search's bound,
/// `bits`, differs from the gap scan's, `gap`, once a corruption set a bit
/// no handle holds: the slow scan that replaces a disabled map finds that
/// id, the map search never does). Both start at 0 for every operation,
/// and again when a corruption lands.
#[derive(Clone, Copy, Debug, Default)]
struct Hint {
    bits: u32,
    gap: u32,
}

/// [`AllocSite`] as a map key.
type SiteKey = u8;

fn key(site: AllocSite) -> SiteKey {
    site as u8
}

impl TableModel {
    fn new(policy: Option<Policy>, version: Version) -> Self {
        let rules = history::rules(version);
        let mut bits = IdSet::new();
        if policy.is_some() && rules.bit_zero_reserved {
            bits.insert(0);
        }
        TableModel {
            policy,
            version,
            rules,
            refs: HandleModel::default(),
            cap: if policy.is_some() { oracle::MIN } else { 0 },
            bits,
            corruptions: Vec::new(),
            corrupted: false,
            warnings: Vec::new(),
            pending_any: 0,
            pending_at: BTreeMap::new(),
            dead: false,
            shrinks_on_release: true,
            reclaims: false,
            id_limit: None,
        }
    }

    /// Whether the pool keeps bits of its own right now.
    fn has_bits(&self) -> bool {
        self.policy.is_some() && self.cap > 0
    }

    /// Applies the planned corruptions, as the table does at the start of
    /// its next critical section: only within the map of a pool that has
    /// one (out-of-range indexes are ignored, like the bitmap's). Whether a
    /// bit changed.
    fn apply_corruptions(&mut self) -> bool {
        let mut changed = false;
        for c in std::mem::take(&mut self.corruptions) {
            if !self.has_bits() {
                continue;
            }
            changed |= match c {
                Corruption::ClearBit(id) => self.bits.remove(id as usize),
                Corruption::SetBit(id) if (id as usize) < self.cap => self.bits.insert(id as usize),
                Corruption::SetBit(_) => false,
            };
        }
        self.corrupted |= changed;
        changed
    }

    /// Whether the pool counts `id` as used, for a new ref of the context
    /// manager's node (`manager`) or another. For a version that reserves
    /// bit 0, descriptor 0 is the context manager's exactly when a handle
    /// holds it (what every version meant: the reserved bit is no handle);
    /// everyone else searches the map from 0, where the reserved bit keeps
    /// them off 0 as long as it is set.
    fn taken(&self, id: u32, manager: bool) -> bool {
        if self.rules.bit_zero_reserved && id == 0 && manager {
            return self.refs.handles.contains_key(&0);
        }
        // Without corruption no version means to offer a live handle's id:
        // where one does (v3's cleared bit 0), it diverges from its model.
        self.bits.contains(id as usize) || (!self.corrupted && self.refs.holds(id))
    }

    /// The smallest id at or above `start` the pool offers: each id asked
    /// of [`TableModel::taken`] in turn (its two set reads are a bit each).
    fn pool_offers(&self, start: u32, manager: bool) -> u32 {
        (start..=u32::MAX)
            .find(|&id| !self.taken(id, manager))
            .expect("fewer than 2^32 ids taken")
    }

    /// The model of a table built from `start` (a process holding one
    /// reference at each of its handles), stated without the allocator's
    /// grow loop: the smallest power of two of at least [`oracle::MIN`] ids
    /// above the highest handle (what doubling from the initial size until
    /// the highest fits gives, as each insert would have grown it), every
    /// handle's bit set, each handle with a count of 1.
    fn started(mut self, start: Option<&StartSet>) -> Self {
        let Some(start) = start else { return self };
        for &(handle, node) in start.pairs() {
            self.refs.add(node, handle);
            if self.policy.is_some() {
                self.bits.insert(handle as usize);
            }
        }
        if self.policy.is_some() {
            let needed = start.highest() as usize + 1;
            self.cap = needed.next_power_of_two().max(oracle::MIN);
        }
        self
    }

    /// The augmented tree's model on `version`: the legacy scan's (no
    /// capacity, no bits), with `ENOMEM` at 2^30.
    fn tree(version: Version) -> Self {
        TableModel {
            id_limit: Some(designs::TREE_ID_LIMIT),
            ..Self::new(None, version)
        }
    }

    /// The shrinker's model on `version`: mainline's grows, no shrink on
    /// release, the reclaim rule of [`designs::reclaimed_capacity`].
    fn shrinker(version: Version) -> Self {
        TableModel {
            shrinks_on_release: false,
            reclaims: true,
            ..Self::new(Some(Policy::Rust), version)
        }
    }

    /// [`TableOp::Reclaim`]: the ids given back, `None` for a table
    /// without the callback. The callback takes one allocation flag, and
    /// is a critical section: planned corruptions land first. The policy
    /// reads the pool's highest set bit.
    fn reclaim(&mut self, events: &mut Events) -> Option<usize> {
        if !self.reclaims {
            return None;
        }
        self.apply_corruptions();
        let fail = self.next_alloc_fails(AllocSite::Shrink);
        let before = self.cap;
        let last = self.bits.last();
        self.cap = designs::reclaimed_capacity(before, last, fail);
        if self.cap < before {
            events.reclaimed += 1;
        }
        Some(before - self.cap)
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

    /// `insert_or_update_handle`. `hint`: where a bulk insert's next
    /// searches may start ([`Hint`]); moved past the id a new handle took,
    /// and to the id a dead process refused (the next search finds it
    /// again).
    fn insert(
        &mut self,
        node: NodeId,
        manager: bool,
        hint: &mut Hint,
        events: &mut Events,
    ) -> Result<u32, Error> {
        if self.apply_corruptions() {
            *hint = Hint::default();
        }
        if let Some(h) = self.refs.reference(node) {
            return Ok(h);
        }
        if self.next_alloc_fails(AllocSite::Ref) {
            events.alloc_failed += 1;
            return Err(Error::NoMemory);
        }
        // Every version means: the smallest free id, 0 allowed for the
        // context manager's node only.
        let start = u32::from(!manager).max(hint.gap);
        // Where the map search starts: from 0 for everyone in a version
        // that reserves bit 0 (the bit keeps them off it).
        let search = if self.rules.bit_zero_reserved {
            hint.bits
        } else {
            u32::from(!manager).max(hint.bits)
        };
        let (id, gap) = loop {
            let gap = self.refs.smallest_free(start);
            if self.id_limit.is_some_and(|limit| gap >= limit) {
                return Err(Error::NoMemory);
            }
            let Some(policy) = self.policy.filter(|_| self.cap > 0) else {
                if self.policy.is_some() {
                    events.scan_fallback += 1;
                }
                break (gap, gap);
            };
            let id = self.pool_offers(search, manager);
            // Without corruption the bits are the handles, apart from a
            // reserved bit 0 that a version cleared (and so offers).
            assert!(
                self.corrupted || id == gap || (self.rules.bit_zero_reserved && id == 0),
                "model: the pool's bits offer {id} where the gap scan finds {gap}"
            );
            if (id as usize) >= self.cap {
                self.grow_for_insert(policy, events)?;
                continue;
            }
            if !self.refs.holds(id) {
                break (id, gap);
            }
            // The pool offers an id a handle holds: only after corruption.
            // Every version takes the bit first.
            self.bits.insert(id as usize);
            match self.rules.on_mismatch {
                Reaction::Crash => return Err(Error::KernelBug { id }),
                Reaction::TakeAndSearchOn => {
                    self.warnings.push(Warning::Mismatch { id, warn_on: false });
                }
                Reaction::TakeWarnEinval => {
                    self.warnings.push(Warning::Mismatch { id, warn_on: true });
                    return Err(Error::Mismatch { id });
                }
            }
        };
        if self.dead && self.rules.dead_refused {
            events.dead_refused += 1;
            *hint = Hint { bits: id, gap };
            return Err(Error::DeadProcess);
        }
        self.refs.add(node, id);
        hint.gap = if id == gap { gap + 1 } else { gap };
        // The map search sets the bit; a version that reserves bit 0 gives
        // the context manager's node 0 without touching the map.
        if self.has_bits() && !(self.rules.bit_zero_reserved && id == 0 && manager) {
            self.bits.insert(id as usize);
            hint.bits = id + 1;
        }
        Ok(id)
    }

    /// The pool is full: grow it, disable it (C) or fail (Rust).
    fn grow_for_insert(&mut self, policy: Policy, events: &mut Events) -> Result<(), Error> {
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
                self.bits.clear();
            }
            (_, Some(t)) => {
                events.grow_committed += 1;
                self.cap = t;
            }
            (Policy::C, None) => unreachable!("C always has a grow target"),
        }
        Ok(())
    }

    fn decrement(&mut self, handle: u32, events: &mut Events) -> Result<u32, Error> {
        self.apply_corruptions();
        if !self.refs.decrement(handle)? {
            return Ok(handle);
        }
        if !(handle == 0 && self.rules.bit_zero_kept_on_release) {
            self.bits.remove(handle as usize);
        }
        let Some(policy) = self
            .policy
            .filter(|_| self.cap != 0 && self.shrinks_on_release)
        else {
            return Ok(handle);
        };
        let last = self.bits.last();
        let at_quarter =
            self.rules.shrink_at_quarter && self.cap > oracle::MIN && last == Some(self.cap / 4);
        let target = oracle::shrink_target(policy, self.cap, last)
            .or_else(|| at_quarter.then_some(self.cap / 2));
        if let Some(target) = target {
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

    fn increment(&mut self, handle: u32) -> Result<u32, Error> {
        self.apply_corruptions();
        self.refs.increment(handle)
    }

    /// The pool's bits that `probe` names against what they should read
    /// ([`crate::bits::compare`]): the model's record of the bits where the
    /// pool keeps them (the reserved bit 0 and the corruptions included, so
    /// a corruption is expected, not a finding); the live handles for the
    /// augmented tree, whose record of its ids is the tree; nothing where
    /// nothing is kept (the linear scan, a disabled dbitmap).
    fn compare_bits<P: bits::PoolBits + ?Sized>(
        &self,
        pool: &P,
        probe: &Probe,
    ) -> Result<(), Vec<bits::BitDiff>> {
        if !self.knows_bits() {
            Ok(())
        } else if self.has_bits() {
            bits::compare(pool, Expected::exactly(&self.bits), probe)
        } else {
            bits::compare(pool, Expected::exactly(&self.refs), probe)
        }
    }

    /// What the shrinker's `count_objects` must say now: the ids a reclaim
    /// whose allocations all succeed would give back, by the model's own
    /// reclaim rule ([`designs::reclaimed_capacity`]); `None` for a table
    /// without the callback.
    fn reclaimable_ids(&self) -> Option<usize> {
        let last = self.bits.last();
        self.reclaims
            .then(|| self.cap - designs::reclaimed_capacity(self.cap, last, false))
    }

    /// Whether [`TableModel::compare_bits`] says anything of any id: the
    /// pool keeps bits, or the tree its ids.
    fn knows_bits(&self) -> bool {
        self.has_bits() || self.id_limit.is_some()
    }

    /// The pool/`by_handle` disagreement the table must report, if any:
    /// (set in the pool only, in `by_handle` only), bit 0 left out where
    /// the version reserves it.
    fn expected_disagreement(&self) -> Option<(Vec<u32>, Vec<u32>)> {
        if !self.has_bits() {
            return None;
        }
        bits::disagreement(&self.bits, &self.refs, self.rules.bit_zero_reserved)
    }

    fn resolve(&self, sel: HandleSel) -> u32 {
        let handles = &self.refs.handles;
        match sel {
            HandleSel::Nth(k) if !handles.is_empty() => {
                *handles.keys().nth(k as usize % handles.len()).unwrap()
            }
            HandleSel::Nth(_) => 1,
            HandleSel::Highest => self.refs.highest().unwrap_or(0),
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
    fn corrupt(&self, corruption: Corruption);
    fn drain_warnings(&mut self) -> Vec<Warning>;
    fn pending_failures(&self) -> u32;
    fn capacity(&self) -> usize;
    /// The table's `by_handle` and `by_node` against the model's
    /// ([`model::compare`], [`model::compare_nodes`]), once `invariants`
    /// (the table's own check, or what the model expects of it) is `Ok`.
    fn compare_maps(
        &self,
        invariants: Result<(), InvariantViolation>,
        model: &HandleModel,
    ) -> Result<(), Mismatch>;
    fn check_invariants(&self) -> Result<(), InvariantViolation>;
    fn reclaim(&mut self) -> Option<usize>;
    fn check_design(&self) -> Result<(), String>;
    /// How the versions the table and its pool report differ from
    /// `built_for` ([`designs::version_mismatch`]).
    fn version_mismatch(&self, built_for: Version) -> Option<String>;
    /// Whether the table says its process has died.
    fn is_dead(&self) -> bool;
    /// The ids its memory-pressure callback would give back now, for a
    /// table that has one ([`Design::reclaimable_ids`]).
    fn reclaimable_ids(&self) -> Option<usize>;
    /// The pool's bits that `probe` names against the model's
    /// expectation, read one id at a time ([`crate::bits`]).
    fn compare_bits(&self, model: &TableModel, probe: &Probe) -> Result<(), Vec<bits::BitDiff>>;
}

/// How a side reaches its table: owned ([`HandleTable`]), or behind the
/// real lock that threads share ([`SharedHandleTable`], one lock per
/// critical section, driven here by one thread). The runner holds both to
/// the same checks, so the wrapper real threads use is part of the
/// campaign too.
trait TableAccess: Sized {
    type F: Design;
    fn build(version: Version, start: Option<&StartSet>) -> Result<Self, BuildError>;
    fn insert_or_update_handle(&mut self, node: NodeId, is_manager: bool) -> Result<u32, Error>;
    fn increment(&mut self, handle: u32) -> Result<u32, Error>;
    fn decrement(&mut self, handle: u32) -> Result<u32, Error>;
    /// A request through the entry point a driver calls for it (each is
    /// the table's `run` of that request).
    fn run(&mut self, request: Request) -> Result<u32, Error> {
        match request {
            Request::Insert { node, is_manager } => self.insert_or_update_handle(node, is_manager),
            Request::Increment(handle) => self.increment(handle),
            Request::Decrement(handle) => self.decrement(handle),
        }
    }
    fn lookup(&self, node: NodeId) -> Option<u32>;
    fn kill(&mut self);
    fn faults(&self) -> &Faults;
    fn drain_warnings(&mut self) -> Vec<Warning>;
    fn capacity(&self) -> usize;
    fn check_invariants(&self) -> Result<(), InvariantViolation>;
    fn reclaim(&mut self) -> Option<usize>;
    /// `f` on the table's state (under the lock, for the shared table).
    fn read<R>(&self, f: impl FnOnce(&NodeRefs<Self::F>) -> R) -> R;
}

/// The constructors and entry points [`HandleTable`] and
/// [`SharedHandleTable`] both have, under the same names and meanings:
/// [`TableAccess`] forwards to them.
macro_rules! forward_entry_points {
    ($table:ident) => {
        fn build(version: Version, start: Option<&StartSet>) -> Result<Self, BuildError> {
            match start {
                None => Ok($table::with_version(version)),
                Some(start) => $table::from_handles(version, start.pairs().iter().copied()),
            }
        }
        fn insert_or_update_handle(
            &mut self,
            node: NodeId,
            is_manager: bool,
        ) -> Result<u32, Error> {
            $table::insert_or_update_handle(self, node, is_manager)
        }
        fn increment(&mut self, handle: u32) -> Result<u32, Error> {
            $table::increment(self, handle)
        }
        fn decrement(&mut self, handle: u32) -> Result<u32, Error> {
            $table::decrement(self, handle)
        }
        fn lookup(&self, node: NodeId) -> Option<u32> {
            $table::lookup(self, node)
        }
        fn kill(&mut self) {
            $table::kill(self)
        }
        fn faults(&self) -> &Faults {
            $table::faults(self)
        }
        fn drain_warnings(&mut self) -> Vec<Warning> {
            $table::drain_warnings(self)
        }
    };
}

impl<F: Design> TableAccess for HandleTable<F> {
    type F = F;
    forward_entry_points!(HandleTable);
    fn capacity(&self) -> usize {
        HandleTable::capacity(self)
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.refs().check_invariants()
    }
    fn reclaim(&mut self) -> Option<usize> {
        F::reclaim_table(self)
    }
    fn read<R>(&self, f: impl FnOnce(&NodeRefs<F>) -> R) -> R {
        f(self.refs())
    }
}

impl<F: Design> TableAccess for SharedHandleTable<F> {
    type F = F;
    forward_entry_points!(SharedHandleTable);
    fn capacity(&self) -> usize {
        self.read(|refs| refs.pool().capacity())
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        SharedHandleTable::check_invariants(self)
    }
    fn reclaim(&mut self) -> Option<usize> {
        F::reclaim_shared(self)
    }
    fn read<R>(&self, f: impl FnOnce(&NodeRefs<F>) -> R) -> R {
        self.with_refs(|refs| f(refs))
    }
}

/// A table built for one version, under its failure name.
struct Versioned<T: TableAccess> {
    table: T,
    name: &'static str,
}

impl<T: TableAccess + 'static> Versioned<T> {
    /// A new process's table, or one built from `start`'s handles: the
    /// error names the table.
    fn boxed(
        version: Version,
        start: Option<&StartSet>,
    ) -> Result<Box<dyn AnyTable>, (&'static str, BuildError)> {
        let name = history::side_name(<T::F as idpool::Flavour>::NAME, version);
        let table = T::build(version, start).map_err(|e| (name, e))?;
        Ok(Box::new(Versioned { table, name }))
    }
}

impl<T: TableAccess> AnyTable for Versioned<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn run(&mut self, request: Request) -> Result<u32, Error> {
        self.table.run(request)
    }
    fn lookup(&self, node: NodeId) -> Option<u32> {
        self.table.lookup(node)
    }
    fn kill(&mut self) {
        self.table.kill()
    }
    fn fail_next(&self, site: Option<AllocSite>, n: u32) {
        match site {
            Some(site) => self.table.faults().fail_next_at(site, n),
            None => self.table.faults().fail_next(n),
        }
    }
    fn corrupt(&self, corruption: Corruption) {
        self.table.faults().corrupt(corruption);
    }
    fn drain_warnings(&mut self) -> Vec<Warning> {
        self.table.drain_warnings()
    }
    fn pending_failures(&self) -> u32 {
        self.table.faults().pending()
    }
    fn capacity(&self) -> usize {
        self.table.capacity()
    }
    fn compare_maps(
        &self,
        invariants: Result<(), InvariantViolation>,
        model: &HandleModel,
    ) -> Result<(), Mismatch> {
        self.table.read(|refs| {
            model::compare(invariants, refs.by_handle(), model)
                .and_then(|()| model::compare_nodes(refs.by_node(), model))
        })
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.table.check_invariants()
    }
    fn reclaim(&mut self) -> Option<usize> {
        self.table.reclaim()
    }
    fn check_design(&self) -> Result<(), String> {
        self.table.read(|refs| refs.pool().check_design())
    }
    fn version_mismatch(&self, built_for: Version) -> Option<String> {
        self.table
            .read(|refs| designs::version_mismatch(refs, built_for))
    }
    fn is_dead(&self) -> bool {
        self.table.read(NodeRefs::is_dead)
    }
    fn reclaimable_ids(&self) -> Option<usize> {
        self.table.read(|refs| refs.pool().reclaimable_ids())
    }
    fn compare_bits(&self, model: &TableModel, probe: &Probe) -> Result<(), Vec<bits::BitDiff>> {
        self.table
            .read(|refs| model.compare_bits(refs.pool(), probe))
    }
}

/// Above this many ids, a pool's every bit is read only at the end of a
/// run and when its capacity changed.
const FULL_READ_LIMIT: usize = 1 << 16;

/// One flavour's table beside its model.
type Side = (Box<dyn AnyTable>, TableModel);

/// How many flavours every run drives (the first sides of [`sides`]); the
/// sides after them are the versions beside, compared in [`pairs`].
const FLAVOURS: usize = 6;

/// The sides of a run: `IdPool` on the Rust version, `DBitmap` on the C
/// version, the linear scan on the Rust version, then the three designs on
/// the Rust version (they run the Rust versions only, see
/// [`idpool::Flavour::supports`]); then, when asked, a second `DBitmap` and a
/// second `IdPool` on the versions beside.
///
/// The first side, the Rust driver's own allocator, runs through
/// [`SharedHandleTable`], the wrapper real threads share (its lock taken
/// once per critical section, as Binder takes it); every other side owns
/// its [`HandleTable`]. Both wrappers are the allocator's, and each is held
/// to its own model, so a slip in either shows on its side.
fn sides(v: &Versions, start: Option<&StartSet>) -> Result<Vec<Side>, (&'static str, BuildError)> {
    let mut sides: Vec<Side> = vec![
        (
            Versioned::<SharedHandleTable<IdPool>>::boxed(v.rust, start)?,
            TableModel::new(Some(Policy::Rust), v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<DBitmap>>::boxed(v.c, start)?,
            TableModel::new(Some(Policy::C), v.c).started(start),
        ),
        (
            Versioned::<HandleTable<LinearScan>>::boxed(v.rust, start)?,
            TableModel::new(None, v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<FastPool>>::boxed(v.rust, start)?,
            TableModel::new(Some(Policy::Rust), v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<AugmentedTree>>::boxed(v.rust, start)?,
            TableModel::tree(v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<Shrinker>>::boxed(v.rust, start)?,
            TableModel::shrinker(v.rust).started(start),
        ),
    ];
    if let Some(c) = v.c_versus {
        sides.push((
            Versioned::<HandleTable<DBitmap>>::boxed(c, start)?,
            TableModel::new(Some(Policy::C), c).started(start),
        ));
    }
    if let Some(rust) = v.rust_versus {
        sides.push((
            Versioned::<HandleTable<IdPool>>::boxed(rust, start)?,
            TableModel::new(Some(Policy::Rust), rust).started(start),
        ));
    }
    Ok(sides)
}

/// The pairs of sides run on two versions of one flavour, with the
/// comparison's name: (index, index, name).
fn pairs(v: &Versions) -> Vec<(usize, usize, &'static str)> {
    let mut pairs = Vec::new();
    let mut next = FLAVOURS;
    if let Some(c) = v.c_versus {
        pairs.push((1, next, history::versus_name(v.c, c)));
        next += 1;
    }
    if let Some(rust) = v.rust_versus {
        pairs.push((0, next, history::versus_name(v.rust, rust)));
    }
    pairs
}

/// Runs `ops` on the six flavours of the table at mainline and on their
/// models; the first divergence or broken invariant is the failure.
pub fn run(ops: &[TableOp]) -> Checked<Events> {
    run_versions(&Versions::MAINLINE, ops)
}

/// Runs `ops` on the six flavours of the table, each on the version
/// `versions` gives its driver (and on the versions beside, when asked),
/// each against its own version's model; then the versions run side by
/// side are compared (see [`crate::history`]).
pub fn run_versions(versions: &Versions, ops: &[TableOp]) -> Checked<Events> {
    let tables = sides(versions, None).expect("a new process's table is always built");
    run_sides(versions, tables, ops)
}

/// [`run_versions`] on the sides given (those of [`sides`]). A known
/// upstream finding on a historical side retires that side, or the
/// comparison it came from, and the rest of the program still runs on
/// every other side ([`history::Retired`]).
fn run_sides(versions: &Versions, mut tables: Vec<Side>, ops: &[TableOp]) -> Checked<Events> {
    let pairs = pairs(versions);
    let mut retired = history::Retired::new(tables.len(), pairs.len());
    // The comparisons side `i` is in.
    let involving = |i: usize| {
        pairs
            .iter()
            .enumerate()
            .filter(move |(_, &(a, b, _))| a == i || b == i)
            .map(|(p, _)| p)
    };
    let mut events = Events::default();
    let mut fresh = FRESH_NODES;
    let mut faults_injected = false;
    // Reused from request to request: a bulk operation runs hundreds.
    let mut outcomes: Vec<Option<Result<u32, Error>>> = Vec::new();
    let mut pair_before: Vec<usize> = Vec::new();
    let mut hints: Vec<Hint> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let at = At {
            target: "handle_table",
            step,
            op,
            capacity: tables[0].1.cap,
        };
        crate::check::begin_step("handle_table", step, op, tables[0].1.cap);
        // Before a rebuild too, so that `start-from` counts as a resize.
        let capacities: Vec<usize> = tables.iter().map(|(table, _)| table.capacity()).collect();
        if let TableOp::StartFrom(start) = op {
            tables = sides(versions, Some(start)).map_err(|(name, e)| {
                at.failure(
                    Check::Outcome,
                    Some(name),
                    format_args!(
                        "{name}: building the table from {start:?} was refused ({e}); \
                         the model holds every handle"
                    ),
                )
            })?;
            faults_injected = false;
            events.started_above_16_bits += u32::from(start.highest() > 65_535);
        }
        let requests = requests(op, &tables[0].1, &mut fresh);
        for (i, (table, model)) in tables.iter_mut().enumerate() {
            if retired.side(i) {
                continue;
            }
            let direct = apply_direct(&at, table.as_mut(), model, &mut events);
            faults_injected |= retired.of_side(i, involving(i), direct)? == Some(true);
        }
        let bulk = requests.len() > 1;
        // The ids this step touched, read back one by one afterwards.
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
        // A bulk insert only adds handles: each model's next search resumes
        // after the id it handed out last.
        hints.clear();
        hints.resize(tables.len(), Hint::default());
        for (i, &request) in requests.iter().enumerate() {
            let of = InBulk(bulk.then_some((i, request)));
            // The capacity each comparison's two sides share before it.
            pair_before.clear();
            pair_before.extend((pairs.iter()).map(|&(a, _, _)| tables[a].0.capacity()));
            // `None` for a retired side.
            outcomes.clear();
            for (s, ((table, model), hint)) in tables.iter_mut().zip(&mut hints).enumerate() {
                if retired.side(s) {
                    outcomes.push(None);
                    continue;
                }
                let outcome = run_request(
                    &at,
                    table.as_mut(),
                    model,
                    request,
                    hint,
                    &of,
                    &mut touched,
                    &mut events,
                );
                outcomes.push(retired.of_side(s, involving(s), outcome)?);
            }
            touched.extend(outcomes.iter().flatten().filter_map(|o| match *o {
                // The ids a corrupted pool offered and the model took.
                Ok(id) | Err(Error::Mismatch { id }) | Err(Error::KernelBug { id }) => Some(id),
                _ => None,
            }));
            // Once the process is dead the drivers differ (C still inserts).
            let dead = tables[0].1.dead;
            let mut live = (0..FLAVOURS).filter(|&s| outcomes[s].is_some());
            let first = live.next();
            let disagree = first.is_some_and(|f| live.any(|s| outcomes[s] != outcomes[f]));
            if !faults_injected && !dead && disagree {
                let each: Vec<String> = (0..FLAVOURS)
                    .filter_map(|s| Some(format!("{} {:?}", tables[s].0.name(), outcomes[s]?)))
                    .collect();
                return Err(at.failure(
                    Check::FlavoursDisagree,
                    None,
                    format_args!("the flavours disagree on {request:?}: {}", each.join(", ")),
                ));
            }
            for (p, &(a, b, name)) in pairs.iter().enumerate() {
                if retired.pair(p) {
                    continue;
                }
                let (Some(oa), Some(ob)) = (outcomes[a], outcomes[b]) else {
                    continue;
                };
                let (ca, cb) = (tables[a].0.capacity(), tables[b].0.capacity());
                // Which allocations each attempted: under planned failures
                // an attempt that failed leaves outcome and capacity alone,
                // and only shows in a later request.
                let (pa, pb) = (
                    tables[a].0.pending_failures(),
                    tables[b].0.pending_failures(),
                );
                if oa != ob || ca != cb || pa != pb {
                    let detail = Detail::Versions {
                        request,
                        versions: [tables[a].1.version, tables[b].1.version],
                        outcomes: [oa, ob],
                        before: pair_before[p],
                        capacities: [ca, cb],
                        pending: [pa, pb],
                    };
                    let failure = at
                        .failure(
                            Check::VersionsDiffer,
                            Some(name),
                            format_args!(
                                "{name}: the versions differ on {request:?}{of}: outcome {oa:?} \
                                 vs {ob:?}, capacity {ca} vs {cb}, planned failures still \
                                 pending {pa} vs {pb}"
                            ),
                        )
                        .with_detail(detail);
                    retired.of_pair(p, failure)?;
                }
            }
        }
        // The whole table (invariants, by_handle, by_node) is compared
        // after a bulk op, a resize (the capacity moved), a start from
        // given handles, a corruption, a reclaim, a kill, and at the end; after any other step, the ids it
        // touched and the boundaries.
        let last = step + 1 == ops.len();
        let boundary = bulk
            || last
            || matches!(
                op,
                TableOp::StartFrom(_) | TableOp::Corrupt(_) | TableOp::Reclaim | TableOp::Kill
            );
        for (i, ((table, model), &before)) in tables.iter().zip(&capacities).enumerate() {
            if retired.side(i) {
                continue;
            }
            let checked =
                check_after_step(&at, table.as_ref(), model, before, boundary, last, &touched);
            retired.of_side(i, involving(i), checked)?;
        }
        observe(versions, &tables, op);
    }
    retired.finish(events)
}

/// The checks of one side after a step: the planned failures it has not
/// consumed, its capacity, then its whole state (at a `boundary` step and
/// whenever the capacity changed from `before`) and the bits: those the
/// step touched and the boundaries, every one at the `last` step and at a
/// resize, and at any whole check of a pool of at most [`FULL_READ_LIMIT`]
/// ids.
fn check_after_step(
    at: &At<'_, TableOp>,
    table: &dyn AnyTable,
    model: &TableModel,
    before: usize,
    boundary: bool,
    last: bool,
    touched: &[u32],
) -> Checked {
    // The planned failures not consumed yet: which allocations a step
    // made, per flavour.
    let pending = u64::from(model.pending_any)
        + model
            .pending_at
            .values()
            .map(|&n| u64::from(n))
            .sum::<u64>();
    at.compare(
        Check::PendingFailures,
        Some(table.name()),
        format_args!("{}: planned failures still pending", table.name()),
        pending,
        u64::from(table.pending_failures()),
    )?;
    at.compare(
        Check::Capacity,
        Some(table.name()),
        format_args!("{}: capacity after the step", table.name()),
        model.cap,
        table.capacity(),
    )?;
    let capacity = table.capacity();
    let whole = boundary || capacity != before;
    if whole {
        check_whole(at, table, model)?;
    }
    // Where the model says nothing of any bit (the linear scan, a disabled
    // dbitmap), no bit is compared ([`crate::bits::compare`]).
    if model.knows_bits() {
        let mut probe = Probe::boundaries(capacity, &model.refs);
        // Every id is read at the end, at a resize, and after any whole
        // check of a pool of at most FULL_READ_LIMIT ids; a bigger one
        // (built by `start-from`) is read at its boundaries and the ids the
        // step touched in between.
        if last || capacity != before || (whole && capacity <= FULL_READ_LIMIT) {
            probe.everything(capacity, &model.refs);
        }
        for &id in touched {
            probe.touch(id);
        }
        check_bits(at, table, model, &probe)?;
    }
    // After the bits: a wrong bit that moves the highest one is reported
    // as the bits' difference, not as the count that follows from it.
    if whole {
        check_reclaimable(at, table, model)?;
    }
    Ok(())
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
fn observe(versions: &Versions, tables: &[Side], op: &TableOp) {
    let version = |v: Version| Version::ALL.iter().position(|&w| w == v).unwrap_or(0) as u64;
    let (rust, c) = (&tables[0].1, &tables[1].1);
    let flag = |b: bool| u64::from(b);
    feedback::observe(
        feedback::AbstractState::new("handle_table")
            .with(version(versions.c), 8)
            .with(version(versions.rust), 8)
            .with(
                flag(versions.c_versus.is_some() || versions.rust_versus.is_some()),
                2,
            )
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
            .with(
                flag(rust.pending_any > 0 || rust.pending_at.values().any(|&n| n > 0)),
                2,
            )
            .with(op.kind() as u64, 64),
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

/// The ops that are no request: lookup, kill, planned failures and
/// corruptions. Returns whether a fault was planned.
fn apply_direct(
    at: &At<'_, TableOp>,
    table: &mut dyn AnyTable,
    model: &mut TableModel,
    events: &mut Events,
) -> Checked<bool> {
    match *at.op {
        TableOp::Lookup(Node(node)) => at.compare(
            Check::Lookup,
            Some(table.name()),
            format_args!("{}: lookup of node {node}", table.name()),
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
        TableOp::Reclaim => {
            let name = table.name();
            let expected = model.reclaim(events);
            at.compare(
                Check::Outcome,
                Some(name),
                format_args!("{name}: ids given back by the reclaim"),
                expected,
                table.reclaim(),
            )?;
            at.compare(
                Check::Capacity,
                Some(name),
                format_args!("{name}: capacity after the reclaim"),
                model.cap,
                table.capacity(),
            )?;
        }
        _ => {}
    }
    Ok(false)
}

/// Runs one request on one flavour and its model, and compares. The ids
/// of the mismatches the model warned of (a corrupted pool offered a live
/// handle's id, and the version took its bit) go to `touched`: their bits
/// are read after the step like those of the handles it gave.
#[allow(clippy::too_many_arguments)]
fn run_request(
    at: &At<'_, TableOp>,
    table: &mut dyn AnyTable,
    model: &mut TableModel,
    request: Request,
    hint: &mut Hint,
    of: &InBulk,
    touched: &mut Vec<u32>,
    events: &mut Events,
) -> Checked<Result<u32, Error>> {
    // Only a *new* handle must avoid 0: an existing node keeps
    // its handle, whoever asks (the context manager can change).
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
    let name = table.name();
    if let (Some(_), Ok(64..)) = (model.id_limit, actual) {
        events.tree_wide += 1;
    }
    // A corrupted pool may offer 0 to anyone, where the version searches
    // from 0; the model says when.
    let predicted = model.corrupted && expected == Ok(0);
    if new_for_non_manager && actual == Ok(0) && !predicted {
        return Err(at.failure(
            Check::HandleZero,
            Some(name),
            format_args!("{name}: new handle 0 given to a non-manager"),
        ));
    }
    if let (Err(Error::KernelBug { id }), true) = (actual, expected != actual) {
        let manager = matches!(
            request,
            Request::Insert {
                is_manager: true,
                ..
            }
        );
        let detail = Detail::Crash {
            version: model.version,
            id,
            manager,
        };
        return Err(at
            .failure(
                Check::KernelCrash,
                Some(name),
                format_args!(
                    "{name}: kernel BUG() in binder_get_ref_for_node_olocked{of}: descriptor \
                     {id} is already in refs_by_desc; the model expected {expected:?}"
                ),
            )
            .with_detail(detail));
    }
    at.compare(
        Check::Outcome,
        Some(name),
        format_args!("{name}: outcome{of}"),
        expected,
        actual,
    )?;
    let warned = std::mem::take(&mut model.warnings);
    touched.extend(warned.iter().map(|w| match *w {
        Warning::Mismatch { id, .. } => id,
    }));
    at.compare(
        Check::Warning,
        Some(name),
        format_args!("{name}: warnings{of}"),
        warned,
        table.drain_warnings(),
    )?;
    at.compare(
        Check::Capacity,
        Some(name),
        format_args!("{name}: capacity{of}"),
        model.cap,
        table.capacity(),
    )?;
    Ok(actual)
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

/// The pool read one id at a time against the model ([`crate::bits`]).
fn check_bits(
    at: &At<'_, TableOp>,
    table: &dyn AnyTable,
    model: &TableModel,
    probe: &Probe,
) -> Checked {
    let name = table.name();
    table.compare_bits(model, probe).map_err(|diff| {
        at.failure(
            Check::PoolBits,
            Some(name),
            format_args!(
                "{name}: the pool's bits differ from the model's (id, expected, actual): {diff:?}"
            ),
        )
    })
}

/// A process's state in a failure message.
pub(crate) fn life(dead: bool) -> &'static str {
    if dead {
        "dead"
    } else {
        "alive"
    }
}

/// The shrinker's `count_objects` against what the model's reclaim rule
/// gives back now; nothing for a table without the callback.
fn check_reclaimable(at: &At<'_, TableOp>, table: &dyn AnyTable, model: &TableModel) -> Checked {
    let (reclaimable, expected) = (table.reclaimable_ids(), model.reclaimable_ids());
    if reclaimable == expected {
        return Ok(());
    }
    let name = table.name();
    Err(at.failure(
        Check::Reclaimable,
        Some(name),
        format_args!(
            "{name}: a reclaim would give back {expected:?} ids by the model, \
             the table counts {reclaimable:?} (count_objects)"
        ),
    ))
}

fn check_whole(at: &At<'_, TableOp>, table: &dyn AnyTable, model: &TableModel) -> Checked {
    let name = table.name();
    if let Some(mismatch) = table.version_mismatch(model.version) {
        return Err(at.failure(
            Check::Version,
            Some(name),
            format_args!("{name}: {mismatch}"),
        ));
    }
    if table.is_dead() != model.dead {
        return Err(at.failure(
            Check::Death,
            Some(name),
            format_args!(
                "{name}: the table says the process is {}, the model {}",
                life(table.is_dead()),
                life(model.dead)
            ),
        ));
    }
    if let Err(e) = table.check_design() {
        return Err(at.failure(
            Check::DesignInvariant,
            Some(name),
            format_args!("{name}: the design's own invariant broken: {e}"),
        ));
    }
    // A pool/by_handle disagreement is expected exactly where the model's
    // bits say so (after corruption).
    let invariants = match (table.check_invariants(), model.expected_disagreement()) {
        (
            Err(InvariantViolation::PoolTreeMismatch {
                only_in_pool,
                only_in_tree,
            }),
            Some(expected),
        ) if (only_in_pool.clone(), only_in_tree.clone()) == expected => Ok(()),
        (Ok(()), Some((pool, tree))) => {
            return Err(at.failure(
                Check::Invariant,
                Some(name),
                format_args!(
                    "{name}: after the corruption the model expects the pool and by_handle \
                     to disagree (set in the pool only {pool:?}, in by_handle only {tree:?}), \
                     the table reports no disagreement"
                ),
            ))
        }
        (result, _) => result,
    };
    let compared = table.compare_maps(invariants, &model.refs);
    match compared {
        Ok(()) => Ok(()),
        Err(Mismatch::Invariant(violation)) => Err(at.failure(
            Check::Invariant,
            Some(name),
            format_args!("{name}: invariant broken: {violation}"),
        )),
        Err(Mismatch::ByHandle(diff)) => Err(at.failure(
            Check::ByHandle,
            Some(name),
            format_args!(
                "{name}: by_handle differs from the model's (handle, expected, actual): {diff:?}"
            ),
        )),
        Err(Mismatch::ByNode(diff)) => Err(at.failure(
            Check::ByNode,
            Some(name),
            format_args!(
                "{name}: by_node differs from the model's (node, expected, actual): {diff:?}"
            ),
        )),
        Err(Mismatch::Unreported(pool, tree)) => Err(at.failure(
            Check::Invariant,
            Some(name),
            format_args!(
                "{name}: the model expects the pool and by_handle to disagree (set in the pool \
                 only {pool:?}, in by_handle only {tree:?}), the table reports no disagreement"
            ),
        )),
        Err(Mismatch::PoolBits(diff)) => Err(at.failure(
            Check::PoolBits,
            Some(name),
            format_args!(
                "{name}: the pool's bits differ from the model's (id, expected, actual): {diff:?}"
            ),
        )),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool read one id at a time after a corruption, on the C driver
    /// as first merged (bit 0 reserved): the table model's record of the
    /// bits expects the corrupted bit and the reserved one, so neither is
    /// a finding; the live handles alone would flag both.
    #[test]
    fn corrupted_and_reserved_bits_are_expected_not_findings() {
        let version = Version::C2024_06;
        let mut table = HandleTable::<DBitmap>::with_version(version);
        let mut model = TableModel::new(Some(Policy::C), version);
        let mut events = Events::default();
        for node in 1..=3 {
            let insert = Request::Insert {
                node,
                is_manager: false,
            };
            let h = table.run(insert).unwrap();
            assert_eq!(
                model.insert(node, false, &mut Hint::default(), &mut events),
                Ok(h)
            );
        }
        table.faults().corrupt(Corruption::SetBit(9));
        table.faults().corrupt(Corruption::ClearBit(2));
        model.corruptions.push(Corruption::SetBit(9));
        model.corruptions.push(Corruption::ClearBit(2));
        // The corruptions land at the start of the next critical section.
        assert_eq!(table.run(Request::Increment(1)), model.increment(1));
        let probe = Probe::everything_of(table.capacity(), &model.refs);
        let pool = table.refs().pool();
        // The model knows the pool's bits, and its record holds the
        // reserved bit and both corruptions: the read finds nothing.
        assert!(model.has_bits() && model.knows_bits());
        assert_eq!(model.compare_bits(pool, &probe), Ok(()));
        let record: Vec<u32> = model.bits.iter().map(|b| b as u32).collect();
        assert_eq!(record, [0, 1, 3, 9], "reserved 0, 2 cleared, 9 set");
        let live_only = Expected::exactly(&model.refs);
        assert_eq!(
            bits::compare(pool, live_only, &probe),
            Err(vec![(0, false, true), (2, true, false), (9, false, true)])
        );
    }

    /// A model holding handles 1 to 20, then `prepare`d, and a bulk insert
    /// of 100 fresh nodes into it, the hint carried from insert to insert
    /// (`carry`) or a fresh search each time: the ids, and what the model
    /// says after (capacity, bits, warnings, events).
    fn bulk_insert(
        policy: Policy,
        version: Version,
        prepare: impl Fn(&mut TableModel),
        carry: bool,
    ) -> (Vec<Result<u32, Error>>, String) {
        let mut model = TableModel::new(Some(policy), version);
        let mut events = Events::default();
        for node in 1..=20 {
            model
                .insert(node, false, &mut Hint::default(), &mut events)
                .unwrap();
        }
        prepare(&mut model);
        let mut hint = Hint::default();
        let ids = (100..200)
            .map(|node| {
                if !carry {
                    hint = Hint::default();
                }
                model.insert(node, false, &mut hint, &mut events)
            })
            .collect();
        let after = format!(
            "cap {} bits {:?} warnings {:?} {events:?}",
            model.cap, model.bits, model.warnings
        );
        (ids, after)
    }

    /// The hint only saves work: a bulk insert hands out the same ids with
    /// a hint carried from insert to insert as with a fresh search each
    /// time, and leaves the model the same.
    /// - A corrupted C pool (a bit set that no handle holds) whose map goes
    ///   away halfway (a failed grow): the slow scan that replaces the map
    ///   finds the id the set bit hid, below where the map search had got.
    /// - Rust's first posting on a pool with a live handle's bit cleared:
    ///   it takes the bit, logs, and searches on.
    /// - Rust mainline after the process died: every insert refused.
    ///
    /// A bulk insert into a corrupted pool once searched from 0 at every
    /// insert, which made corpus inputs of thousands of handles quadratic.
    #[test]
    fn a_bulk_insert_answers_as_fresh_searches_do() {
        let hidden = |m: &mut TableModel| {
            m.corruptions.push(Corruption::SetBit(30));
            m.pending_at.insert(key(AllocSite::Grow), 1);
        };
        let (ids, after) = bulk_insert(Policy::C, Version::CMainline, hidden, true);
        assert_eq!(
            (ids.clone(), after.clone()),
            bulk_insert(Policy::C, Version::CMainline, hidden, false)
        );
        assert!(
            after.starts_with("cap 0 bits {}"),
            "the grow failed: map disabled: {after}"
        );
        assert_eq!(ids[9], Ok(31), "the map search skips the set bit");
        assert_eq!(ids[41], Ok(63), "the map's last id");
        assert_eq!(ids[42], Ok(30), "the slow scan finds what the set bit hid");
        assert_eq!(ids[43], Ok(64));

        let cleared = |m: &mut TableModel| m.corruptions.push(Corruption::ClearBit(5));
        let (ids, after) = bulk_insert(Policy::Rust, Version::RustV1, cleared, true);
        assert_eq!(
            (ids.clone(), after.clone()),
            bulk_insert(Policy::Rust, Version::RustV1, cleared, false)
        );
        assert_eq!(
            ids[0],
            Ok(21),
            "the mismatch at 5 is logged, the search goes on"
        );
        assert!(
            after.contains("Mismatch { id: 5, warn_on: false }"),
            "{after}"
        );

        let dead = |m: &mut TableModel| m.dead = true;
        let (ids, after) = bulk_insert(Policy::Rust, Version::RustMainline, dead, true);
        let fresh = bulk_insert(Policy::Rust, Version::RustMainline, dead, false);
        assert_eq!((ids.clone(), after.clone()), fresh);
        assert!(ids.iter().all(|r| *r == Err(Error::DeadProcess)), "{ids:?}");
    }

    /// A table built from handles across the 16- and 17-bit boundaries
    /// and at the top of the range: every flavour agrees with its model
    /// (by_handle, by_node, capacity, every bit), on every version, and
    /// the inserts and drops on top keep it so.
    #[test]
    fn start_from_high_handles_runs_on_every_version() {
        let start =
            StartSet::parse(&["65535=n1", "65536=n2", "131071=n3", "262144=n4", "0=n5"]).unwrap();
        let ops = [
            TableOp::StartFrom(start),
            TableOp::Insert {
                node: Node(2),
                manager: false,
            },
            TableOp::Insert {
                node: Node(9),
                manager: false,
            },
            TableOp::Lookup(Node(4)),
            TableOp::InsertMany(Count(70)),
            TableOp::Decrement(HandleSel::Highest),
            TableOp::DropFrom(HandleSel::Nth(72)),
            TableOp::DropAll { lifo: true },
        ];
        for b in 0..8 {
            let versions = Versions::decode(b);
            let events = run_versions(&versions, &ops).unwrap_or_else(|f| panic!("{f}"));
            assert_eq!(events.started_above_16_bits, 1);
            assert!(events.shrink_committed > 0, "{events:?}");
        }
    }

    /// The model of a built table says which capacity the build gives
    /// without the allocator's grow loop: one table of cases.
    #[test]
    fn started_capacity_cases() {
        for (highest, cap) in [
            (0, 64),
            (63, 64),
            (64, 128),
            (65_535, 65_536),
            (65_536, 131_072),
        ] {
            let start = StartSet::new(&[(highest, 1)]).unwrap();
            let model =
                TableModel::new(Some(Policy::Rust), Version::RustMainline).started(Some(&start));
            assert_eq!(model.cap, cap, "highest {highest}");
            let scan = TableModel::new(None, Version::RustMainline).started(Some(&start));
            assert_eq!(scan.cap, 0);
        }
    }

    /// The augmented tree's record of its ids is compared with the live
    /// handles; the linear scan has none, so nothing is compared.
    #[test]
    fn the_tree_is_read_and_the_linear_scan_is_not() {
        let version = Version::RustMainline;
        let tree_model = TableModel::tree(version);
        let scan_model = TableModel::new(None, version);
        let mut tree = HandleTable::<AugmentedTree>::with_version(version);
        let insert = Request::Insert {
            node: 1,
            is_manager: false,
        };
        assert_eq!(tree.run(insert), Ok(1));
        let probe = Probe::everything_of(64, &tree_model.refs);
        // The model holds no handle: the tree's id 1 is a difference.
        assert_eq!(
            tree_model.compare_bits(tree.refs().pool(), &probe),
            Err(vec![(1, false, true)])
        );
        // Nothing is known of the scan's bits, so even a pool that has
        // some (the tree's) is not compared against it.
        assert!(!scan_model.knows_bits());
        assert_eq!(scan_model.compare_bits(tree.refs().pool(), &probe), Ok(()));
    }

    /// Where a check outside a run says it failed: step 0, `op`.
    fn first_step(op: &TableOp) -> At<'_, TableOp> {
        At {
            target: "handle_table",
            step: 0,
            op,
            capacity: 64,
        }
    }

    /// Each side's whole check holds it to the version its model follows
    /// (the rule's own cases are `designs`' unit test): a table of
    /// another version fails, naming both.
    #[test]
    fn the_whole_check_holds_a_table_to_its_models_version() {
        let op = TableOp::Kill;
        let at = first_step(&op);
        let (v3, june) = (Version::CV3, Version::C2024_06);
        let table = Versioned::<HandleTable<DBitmap>>::boxed(v3, None).expect("a new table");
        let own = TableModel::new(Some(Policy::C), v3);
        assert_eq!(check_whole(&at, table.as_ref(), &own), Ok(()));
        let other = TableModel::new(Some(Policy::C), june);
        let failure = check_whole(&at, table.as_ref(), &other).expect_err("another version");
        assert_eq!(failure.check, Check::Version);
        assert!(
            failure
                .message
                .contains("built for c-2024-06, the table reports c-v3 and its pool c-v3"),
            "{}",
            failure.message
        );
    }

    /// The whole check reads the table's own `is_dead` against the
    /// model's: a killed table beside a model that saw no kill fails, and
    /// passes once the model has seen it; the shared side (the lock real
    /// threads take) is held to it like the owned ones.
    #[test]
    fn the_whole_check_holds_a_table_to_its_models_death() {
        let op = TableOp::Kill;
        let at = first_step(&op);
        let rust = Version::RustMainline;
        for mut table in [
            Versioned::<SharedHandleTable<IdPool>>::boxed(rust, None).expect("a new table"),
            Versioned::<HandleTable<IdPool>>::boxed(rust, None).expect("a new table"),
        ] {
            let mut model = TableModel::new(Some(Policy::Rust), rust);
            assert_eq!(check_whole(&at, table.as_ref(), &model), Ok(()));
            table.kill();
            let failure = check_whole(&at, table.as_ref(), &model).expect_err("killed, alive");
            assert_eq!(failure.check, Check::Death);
            assert!(
                failure
                    .message
                    .contains("the table says the process is dead, the model alive"),
                "{}",
                failure.message
            );
            model.dead = true;
            assert_eq!(check_whole(&at, table.as_ref(), &model), Ok(()));
        }
    }

    /// The boundary checks read the shrinker's `count_objects` against the
    /// model's reclaim rule: a model whose pool grew to 256 ids with none
    /// used expects 192 back where the fresh table, at 64, counts none.
    #[test]
    fn the_boundary_checks_hold_the_shrinker_to_its_reclaimable_count() {
        let op = TableOp::Reclaim;
        let at = first_step(&op);
        let rust = Version::RustMainline;
        let table = Versioned::<HandleTable<Shrinker>>::boxed(rust, None).expect("a new table");
        let mut model = TableModel::shrinker(rust);
        assert_eq!(check_reclaimable(&at, table.as_ref(), &model), Ok(()));
        model.cap = 256;
        let failure = check_reclaimable(&at, table.as_ref(), &model).expect_err("256 against 64");
        assert_eq!(failure.check, Check::Reclaimable);
        assert!(
            failure.message.contains(
                "a reclaim would give back Some(192) ids by the model, the table counts Some(0)"
            ),
            "{}",
            failure.message
        );
    }

    /// Operations from their trace text, one a line.
    fn ops(text: &str) -> Vec<TableOp> {
        text.lines()
            .map(|l| TableOp::parse_text(&l.split_whitespace().collect::<Vec<_>>()).unwrap())
            .collect()
    }

    /// June 2024 with the collision at step 1, then more work: the
    /// collision is the run's failure, but only at the end, and every
    /// other side ran and was checked to the last step.
    /// `program` run on `versions`, and what the harness narrated.
    fn narrated(versions: &Versions, program: &str) -> (Checked<Events>, Vec<String>) {
        crate::check::start_narrating();
        let result = run_versions(versions, &ops(program));
        let narration = crate::check::take_narration();
        crate::check::stop_narrating();
        (result, narration)
    }

    /// The narration from step `step` on.
    fn from_step(narration: &[String], step: usize) -> Vec<&String> {
        let start = format!("step {step}:");
        narration
            .iter()
            .skip_while(|l| !l.starts_with(&start))
            .collect()
    }

    const COLLISION_THEN_MORE: &str = "insert n1 manager\ninsert n6 manager\n\
                                       insert-many 65\ndrop-all lifo\nlookup n1";

    #[test]
    fn a_known_finding_retires_its_side_and_the_others_run_on() {
        let versions = Versions {
            c: Version::C2024_06,
            ..Versions::MAINLINE
        };
        let (result, narration) = narrated(&versions, COLLISION_THEN_MORE);
        let failure = result.expect_err("the collision");
        assert_eq!(
            history::Finding::of(&failure),
            Some(history::Finding::Collision)
        );
        assert_eq!(failure.step, 1);
        // After the crash the C side is gone and the others are checked.
        let after = from_step(&narration, 2);
        let said = |prefix: &str| after.iter().filter(|l| l.starts_with(prefix)).count();
        assert_eq!(said("dbitmap c-2024-06:"), 0, "{after:#?}");
        for flavour in ["idpool:", "linear:", "fastpool:", "augmented:", "shrinker:"] {
            // 65 inserts and 66 drops at least, each compared.
            assert!(
                said(&format!("{flavour} outcome")) >= 131,
                "{flavour} {after:#?}"
            );
            assert!(
                said(&format!("{flavour} lookup of node 1")) == 1,
                "{flavour}"
            );
        }
    }

    #[test]
    fn a_mainline_divergence_after_a_known_finding_is_reported() {
        let versions = Versions {
            c: Version::C2024_06,
            ..Versions::MAINLINE
        };
        // Planted: the fast pool's model does not shrink on release (as
        // the shrinker's does not), so the fast pool, a mainline side,
        // diverges from its model at the drop-all of step 3, after the
        // collision.
        let mut tables = sides(&versions, None).unwrap();
        tables[3].1.shrinks_on_release = false;
        let failure = run_sides(&versions, tables, &ops(COLLISION_THEN_MORE))
            .expect_err("the planted divergence");
        assert_eq!(history::Finding::of(&failure), None, "{failure}");
        assert_eq!(
            (failure.step, failure.flavour),
            (3, Some("fastpool")),
            "{failure}"
        );
        assert!(!history::quiet(&failure), "{failure}");
        // Unplanted, the same program fails with the collision alone.
        let unplanted = run_versions(&versions, &ops(COLLISION_THEN_MORE)).unwrap_err();
        assert_eq!(
            (history::Finding::of(&unplanted), unplanted.step),
            (Some(history::Finding::Collision), 1)
        );
    }

    /// v3 beside June 2024 differ at step 1 (the `<=` threshold): only
    /// the comparison retires; both tables are still run and checked
    /// against their own models to the end, and so is everyone else.
    #[test]
    fn a_known_difference_retires_only_the_comparison() {
        let versions = Versions {
            c: Version::CV3,
            c_versus: Some(Version::C2024_06),
            ..Versions::MAINLINE
        };
        let program = "insert-many 65\ndrop-all lifo\ninsert-many 3\nlookup n1";
        let (result, narration) = narrated(&versions, program);
        let failure = result.expect_err("the threshold");
        assert_eq!(
            history::Finding::of(&failure),
            Some(history::Finding::V3Threshold)
        );
        assert_eq!(failure.step, 1);
        let after = from_step(&narration, 2);
        let said = |prefix: &str| after.iter().filter(|l| l.starts_with(prefix)).count();
        for side in ["dbitmap c-v3:", "dbitmap c-2024-06:", "idpool:", "linear:"] {
            assert!(said(&format!("{side} outcome")) >= 3, "{side} {after:#?}");
            assert_eq!(said(&format!("{side} lookup of node 1")), 1, "{side}");
        }
    }
}
