//! [`ThreadOp::Corrupt`](super::program::ThreadOp::Corrupt) in the concurrent
//! target: the model's record of the pool's bits once a corruption has
//! made them differ from the handles, and what each version's pick does
//! with such a pool.
//!
//! Until the first corruption that changes a bit, the pool's bits are the
//! live handles (plus the reserved bit 0 where the version keeps one) and
//! the runner's usual model says everything. From that corruption on, the
//! bits are kept here as a set, updated at every critical section as the
//! version's rules say ([`crate::history::Rules`]), and the model follows
//! the same rules the `handle_table` model states for a corrupted pool
//! (`TableModel::insert`, `TableModel::taken`, `TableModel::compare_bits`,
//! `TableModel::expected_disagreement` in `handle_table`):
//!
//! - the pool offers the smallest id at or above the search start whose
//!   bit is clear; a version that reserves bit 0 offers 0 to the context
//!   manager's node exactly when no handle holds it (what every version
//!   meant, so the July 2024 collision stays a finding) and searches from
//!   0 for everyone else, so a cleared bit 0 is offered to anyone;
//! - an offered id that a handle holds is a mismatch: the bit is taken,
//!   then C crashes (`BUG()`, [`idpool::Error::KernelBug`]), Rust's first
//!   posting logs and searches on, Rust mainline logs, warns and returns
//!   `EINVAL`. Rust picks before it looks the node up again, C after;
//! - a pool with no bits (the augmented tree, a disabled dbitmap) ignores
//!   corruptions, and its slow scan reads the handles;
//! - the resize decisions read the highest *set bit* (a set bit with no
//!   handle keeps the pool from shrinking below it; a live handle whose
//!   bit was cleared does not), which [`super::capacity`] takes from here.
//!
//! What is checked after a corruption is what is checked before it: every
//! outcome, every capacity, every bit (against this record), `by_handle`,
//! `by_node`, and the table's invariants, where the pool/`by_handle`
//! disagreement must be exactly the one this record predicts.

use super::program::CorruptBit;
use crate::bits;
use crate::history::{Reaction, Rules};
use crate::idset::IdSet;
use crate::model::HandleModel;
use idpool::{Corruption, Error, NodeId, Warning};

/// The pool's bits after a corruption, and the warnings the model expects.
#[derive(Debug)]
pub(super) struct CorruptBits {
    rules: Rules,
    /// Whether the flavour keeps bits at all (not the augmented tree).
    has_map: bool,
    /// `None` while the bits are the handles (and the reserved bit 0).
    bits: Option<IdSet>,
    /// Warnings the version logs, not yet compared.
    pub(super) warnings: Vec<Warning>,
    /// The ids whose bit a pick set in the record since the runner last
    /// took them ([`CorruptBits::take_picked`]): a mismatch id the pool
    /// offered, or the id an insert took.
    picked: Vec<u32>,
    /// Corruptions that changed a bit.
    pub(super) applied: u32,
}

/// What the model says a pick section does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pick {
    /// The operation ends with this outcome.
    Done(Result<u32, Error>),
    /// The pool offers no id below its capacity: a grow request.
    Grow,
}

impl CorruptBits {
    pub(super) fn new(rules: Rules, has_map: bool) -> Self {
        CorruptBits {
            rules,
            has_map,
            bits: None,
            warnings: Vec::new(),
            picked: Vec::new(),
            applied: 0,
        }
    }

    /// Whether a corruption has made the bits a record of their own.
    pub(super) fn active(&self) -> bool {
        self.bits.is_some()
    }

    /// The bits as they are now: the record, or the handles, where a
    /// version that reserves bit 0 has bit 0 as the capacity model keeps
    /// it (`bit_zero`: set at creation, given to the context manager's
    /// node without a change to the map, cleared with descriptor 0 where
    /// the version clears it).
    fn current(&self, model: &HandleModel, bit_zero: bool) -> IdSet {
        match &self.bits {
            Some(bits) => bits.clone(),
            None => {
                let mut bits = IdSet::new();
                for &h in model.handles.keys() {
                    bits.insert(h as usize);
                }
                if self.rules.bit_zero_reserved {
                    bits.remove(0);
                    if bit_zero {
                        bits.insert(0);
                    }
                }
                bits
            }
        }
    }

    /// The id `what` names, for a pool of `cap` ids (0: no bits): the k-th
    /// live handle whose bit is set, or the k-th id below the capacity with
    /// no handle and no bit (lowest or highest first). `None` when there
    /// is none, or the pool keeps no bits.
    pub(super) fn resolve(
        &self,
        what: CorruptBit,
        model: &HandleModel,
        cap: usize,
        bit_zero: bool,
    ) -> Option<Corruption> {
        if !self.has_map || cap == 0 {
            return None;
        }
        let bits = self.current(model, bit_zero);
        let nth = |v: Vec<u32>, k: u8| (!v.is_empty()).then(|| v[k as usize % v.len()]);
        let cap = u32::try_from(cap).unwrap_or(u32::MAX);
        match what {
            CorruptBit::Clear(k) => {
                let live: Vec<u32> = (model.handles.keys().copied())
                    .filter(|&h| bits.contains(h as usize))
                    .collect();
                nth(live, k).map(Corruption::ClearBit)
            }
            CorruptBit::Set(k) | CorruptBit::SetHigh(k) => {
                let free = (0..cap).filter(|&id| !bits.contains(id as usize) && !model.holds(id));
                let free: Vec<u32> = match what {
                    CorruptBit::SetHigh(_) => free.rev().take(256).collect(),
                    _ => free.take(256).collect(),
                };
                nth(free, k).map(Corruption::SetBit)
            }
        }
    }

    /// Applies `c` (resolved by [`CorruptBits::resolve`], so it changes a
    /// bit) to the record.
    pub(super) fn apply(&mut self, c: Corruption, model: &HandleModel, bit_zero: bool) {
        let mut bits = self.current(model, bit_zero);
        let changed = match c {
            Corruption::ClearBit(id) => bits.remove(id as usize),
            Corruption::SetBit(id) => bits.insert(id as usize),
        };
        assert!(changed, "model: {c:?} was resolved to change a bit");
        self.applied += 1;
        self.bits = Some(bits);
    }

    /// The highest set bit, once the record is active.
    pub(super) fn last(&self) -> Option<Option<usize>> {
        (self.bits.as_ref()).map(IdSet::last)
    }

    /// The bits the model expects, once active, on a pool of `cap` ids:
    /// `None` when the pool keeps none (0 ids, or a disabled map), and
    /// nothing is compared.
    pub(super) fn expected_bits(&self, cap: usize) -> Option<bits::Expected<'_, IdSet>> {
        match &self.bits {
            Some(_) if cap == 0 || !self.has_map => None,
            Some(bits) => Some(bits::Expected::exactly(bits)),
            None => unreachable!("asked only while active"),
        }
    }

    /// The ids whose bit a pick set since the last call: the lock release
    /// reads them, so that a table that skipped one is caught at the
    /// section that skipped it, before a release of its handle can clear
    /// the bit again and leave no trace.
    pub(super) fn take_picked(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.picked)
    }

    /// The last reference of `handle` was dropped: its bit is cleared
    /// (a version that keeps bit 0 keeps it).
    pub(super) fn released(&mut self, handle: u32) {
        if let Some(bits) = &mut self.bits {
            if !(handle == 0 && self.rules.bit_zero_kept_on_release) {
                bits.remove(handle as usize);
            }
        }
    }

    /// The dbitmap was disabled: no bits from now on.
    pub(super) fn disabled(&mut self) {
        if let Some(bits) = &mut self.bits {
            bits.clear();
        }
    }

    /// Whether the pool offers `id` (version's rules for bit 0, see the
    /// module's list).
    fn offered(bits: &IdSet, rules: Rules, model: &HandleModel, id: u32, manager: bool) -> bool {
        if rules.bit_zero_reserved && id == 0 && manager {
            return !model.holds(0);
        }
        !bits.contains(id as usize)
    }

    /// The pick critical section of an insert of `node` (`manager`: the
    /// context manager's), on a pool of `cap` ids, with the record active:
    /// the model's handles, bits and warnings are updated as the version
    /// does. `dead_refused`: the process is dead and the version refuses.
    pub(super) fn pick(
        &mut self,
        model: &mut HandleModel,
        node: NodeId,
        manager: bool,
        cap: usize,
        dead_refused: bool,
    ) -> Pick {
        let rules = self.rules;
        let bits = self.bits.as_mut().expect("asked only while active");
        if rules.c {
            if let Some(h) = model.reference(node) {
                return Pick::Done(Ok(h));
            }
        }
        let start = u32::from(!manager);
        let id = loop {
            if !self.has_map || cap == 0 {
                // The slow scan reads the handles (C as first merged: from
                // 1 for everyone but the manager's node, which gets 0 if free).
                break model.smallest_free(start);
            }
            let search = if rules.bit_zero_reserved { 0 } else { start };
            let mut id = search;
            while !Self::offered(bits, rules, model, id, manager) {
                id += 1;
            }
            if id as usize >= cap {
                return Pick::Grow;
            }
            // C's map search takes the bit as it finds it (a version that
            // reserves bit 0 gives the context manager's node 0 without
            // touching the map); Rust takes it on a mismatch, or when it
            // inserts.
            let manager_zero = rules.bit_zero_reserved && id == 0 && manager;
            if rules.c && !manager_zero {
                bits.insert(id as usize);
                self.picked.push(id);
            }
            if !model.holds(id) {
                break id;
            }
            bits.insert(id as usize);
            self.picked.push(id);
            match rules.on_mismatch {
                Reaction::Crash => return Pick::Done(Err(Error::KernelBug { id })),
                Reaction::TakeAndSearchOn => {
                    self.warnings.push(Warning::Mismatch { id, warn_on: false });
                }
                Reaction::TakeWarnEinval => {
                    self.warnings.push(Warning::Mismatch { id, warn_on: true });
                    return Pick::Done(Err(Error::Mismatch { id }));
                }
            }
        };
        if !rules.c {
            // The node may have been inserted while the lock was dropped.
            if let Some(h) = model.reference(node) {
                return Pick::Done(Ok(h));
            }
            if dead_refused {
                return Pick::Done(Err(Error::DeadProcess));
            }
            if self.has_map && cap > 0 {
                bits.insert(id as usize);
                self.picked.push(id);
            }
        }
        model.add(node, id);
        Pick::Done(Ok(id))
    }

    /// The pool/`by_handle` disagreement the table must report now, on a
    /// pool of `cap` ids: (set in the pool only, in `by_handle` only), bit
    /// 0 left out where the version reserves it.
    pub(super) fn expected_disagreement(
        &self,
        model: &HandleModel,
        cap: usize,
    ) -> Option<(Vec<u32>, Vec<u32>)> {
        let bits = self.bits.as_ref()?;
        if !self.has_map || cap == 0 {
            return None;
        }
        bits::disagreement(bits, model, self.rules.bit_zero_reserved)
    }
}
