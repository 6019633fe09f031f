//! The naive model of one flavour's table ([`TableModel`]): the shared
//! handle model, a capacity from the policy formulas, the planned
//! allocation failures, the version's rules, and the pool's bits as those
//! rules and the injected corruptions leave them. It never calls the
//! allocator.

use super::ops::HandleSel;
use super::start::StartSet;
use crate::bits::{self, Expected, Probe};
use crate::designs;
use crate::events::Events;
use crate::history::{self, Reaction, Rules};
use crate::idset::IdSet;
use crate::model::HandleModel;
use crate::oracle::{self, Policy};
use idpool::{AllocSite, Corruption, Error, NodeId, Version, Warning};
use std::collections::BTreeMap;

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
    pub(super) policy: Option<Policy>,
    /// The version it follows, and that version's rules.
    pub(super) version: Version,
    pub(super) rules: Rules,
    pub(super) refs: HandleModel,
    /// 0 for the linear scan and for a disabled dbitmap.
    pub(super) cap: usize,
    /// The pool's set bits (bitmap flavours, while enabled).
    pub(super) bits: IdSet,
    /// Corruptions planned, applied at the start of the next request.
    pub(super) corruptions: Vec<Corruption>,
    /// Whether a corruption changed a bit.
    pub(super) corrupted: bool,
    /// Warnings the version logs, not yet compared.
    pub(super) warnings: Vec<Warning>,
    /// Planned failures for any allocation, then per [`AllocSite`].
    pub(super) pending_any: u32,
    pub(super) pending_at: BTreeMap<SiteKey, u32>,
    pub(super) dead: bool,
    /// Whether the last decrement shrinks (not the shrinker's).
    pub(super) shrinks_on_release: bool,
    /// Whether [`TableOp::Reclaim`] shrinks (the shrinker's only).
    pub(super) reclaims: bool,
    /// The smallest id never handed out (the augmented tree's 2^30);
    /// `None` where the capacity formulas say when an insert fails.
    pub(super) id_limit: Option<u32>,
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
pub(super) struct Hint {
    pub(super) bits: u32,
    pub(super) gap: u32,
}

/// [`AllocSite`] as a map key.
pub(super) type SiteKey = u8;

pub(super) fn key(site: AllocSite) -> SiteKey {
    site as u8
}

impl TableModel {
    pub(super) fn new(policy: Option<Policy>, version: Version) -> Self {
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
    pub(super) fn has_bits(&self) -> bool {
        self.policy.is_some() && self.cap > 0
    }

    /// Applies the planned corruptions, as the table does at the start of
    /// its next critical section: only within the map of a pool that has
    /// one (out-of-range indexes are ignored, like the bitmap's). Whether a
    /// bit changed.
    pub(super) fn apply_corruptions(&mut self) -> bool {
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
    pub(super) fn taken(&self, id: u32, manager: bool) -> bool {
        if self.rules.bit_zero_reserved && id == 0 && manager {
            return self.refs.handles.contains_key(&0);
        }
        // Without corruption no version means to offer a live handle's id:
        // where one does (v3's cleared bit 0), it diverges from its model.
        self.bits.contains(id as usize) || (!self.corrupted && self.refs.holds(id))
    }

    /// The smallest id at or above `start` the pool offers: each id asked
    /// of [`TableModel::taken`] in turn (its two set reads are a bit each).
    pub(super) fn pool_offers(&self, start: u32, manager: bool) -> u32 {
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
    pub(super) fn started(mut self, start: Option<&StartSet>) -> Self {
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
    pub(super) fn tree(version: Version) -> Self {
        TableModel {
            id_limit: Some(designs::TREE_ID_LIMIT),
            ..Self::new(None, version)
        }
    }

    /// The shrinker's model on `version`: mainline's grows, no shrink on
    /// release, the reclaim rule of [`designs::reclaimed_capacity`].
    pub(super) fn shrinker(version: Version) -> Self {
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
    pub(super) fn reclaim(&mut self, events: &mut Events) -> Option<usize> {
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
    pub(super) fn next_alloc_fails(&mut self, site: AllocSite) -> bool {
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
    pub(super) fn insert(
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
        let (id, gap) = self.pick(manager, hint, events)?;
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

    /// The id a new reference of the context manager's node (`manager`) or
    /// another gets, and the gap scan's answer beside it: the smallest free
    /// id, 0 allowed for the manager only, as every version means; growing
    /// a full pool on the way, and meeting, on a corrupted pool, an id a
    /// handle holds with the version's reaction.
    fn pick(
        &mut self,
        manager: bool,
        hint: &Hint,
        events: &mut Events,
    ) -> Result<(u32, u32), Error> {
        let start = u32::from(!manager).max(hint.gap);
        // Where the map search starts: from 0 for everyone in a version
        // that reserves bit 0 (the bit keeps them off it).
        let search = if self.rules.bit_zero_reserved {
            hint.bits
        } else {
            u32::from(!manager).max(hint.bits)
        };
        loop {
            let gap = self.refs.smallest_free(start);
            if self.id_limit.is_some_and(|limit| gap >= limit) {
                return Err(Error::NoMemory);
            }
            let Some(policy) = self.policy.filter(|_| self.cap > 0) else {
                if self.policy.is_some() {
                    events.scan_fallback += 1;
                }
                return Ok((gap, gap));
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
                return Ok((id, gap));
            }
            self.mismatch(id)?;
        }
    }

    /// The pool offers `id`, which a handle holds: only after corruption.
    /// Every version takes the bit first, then reacts as its rules say:
    /// `BUG()`, a log and a search on, or a warning and `EINVAL`.
    fn mismatch(&mut self, id: u32) -> Result<(), Error> {
        self.bits.insert(id as usize);
        match self.rules.on_mismatch {
            Reaction::Crash => Err(Error::KernelBug { id }),
            Reaction::TakeAndSearchOn => {
                self.warnings.push(Warning::Mismatch { id, warn_on: false });
                Ok(())
            }
            Reaction::TakeWarnEinval => {
                self.warnings.push(Warning::Mismatch { id, warn_on: true });
                Err(Error::Mismatch { id })
            }
        }
    }

    /// The pool is full: grow it, disable it (C) or fail (Rust).
    pub(super) fn grow_for_insert(
        &mut self,
        policy: Policy,
        events: &mut Events,
    ) -> Result<(), Error> {
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

    pub(super) fn decrement(&mut self, handle: u32, events: &mut Events) -> Result<u32, Error> {
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

    pub(super) fn increment(&mut self, handle: u32) -> Result<u32, Error> {
        self.apply_corruptions();
        self.refs.increment(handle)
    }

    /// The pool's bits that `probe` names against what they should read
    /// ([`crate::bits::compare`]): the model's record of the bits where the
    /// pool keeps them (the reserved bit 0 and the corruptions included, so
    /// a corruption is expected, not a finding); the live handles for the
    /// augmented tree, whose record of its ids is the tree; nothing where
    /// nothing is kept (the linear scan, a disabled dbitmap).
    pub(super) fn compare_bits<P: bits::PoolBits + ?Sized>(
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
    pub(super) fn reclaimable_ids(&self) -> Option<usize> {
        let last = self.bits.last();
        self.reclaims
            .then(|| self.cap - designs::reclaimed_capacity(self.cap, last, false))
    }

    /// Whether [`TableModel::compare_bits`] says anything of any id: the
    /// pool keeps bits, or the tree its ids.
    pub(super) fn knows_bits(&self) -> bool {
        self.has_bits() || self.id_limit.is_some()
    }

    /// The pool/`by_handle` disagreement the table must report, if any:
    /// (set in the pool only, in `by_handle` only), bit 0 left out where
    /// the version reserves it.
    pub(super) fn expected_disagreement(&self) -> Option<(Vec<u32>, Vec<u32>)> {
        if !self.has_bits() {
            return None;
        }
        bits::disagreement(&self.bits, &self.refs, self.rules.bit_zero_reserved)
    }

    pub(super) fn resolve(&self, sel: HandleSel) -> u32 {
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
