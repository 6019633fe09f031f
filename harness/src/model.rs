//! The naive model of a handle table, shared by `handle_table` and
//! `concurrent_resize`: two ordered maps and the plain gap scan, and the
//! comparison of a real table against them.

use crate::bits::{BitDiff, Record};
use crate::check::Check;
use crate::idset::IdSet;
use core::fmt;
use idpool::{Error, InvariantViolation, NodeId, RefInfo};
use std::collections::BTreeMap;

/// `by_handle` and `by_node` as ordered maps.
///
/// # Invariants
///
/// `held` has exactly the keys of `handles`: the gap scan asks it, a bit
/// per id, where walking the map cost a tree step per id.
#[derive(Clone, Debug, Default)]
pub struct HandleModel {
    /// Handle -> node and reference count.
    pub handles: BTreeMap<u32, RefInfo>,
    /// Node -> handle.
    pub nodes: BTreeMap<NodeId, u32>,
    held: IdSet,
}

/// Two models are equal when their maps are.
impl PartialEq for HandleModel {
    fn eq(&self, other: &Self) -> bool {
        self.handles == other.handles && self.nodes == other.nodes
    }
}

impl Eq for HandleModel {}

impl HandleModel {
    /// The smallest id at or above `start` that no handle holds, trying
    /// one id after the other.
    pub fn smallest_free(&self, start: u32) -> u32 {
        let id = (self.held)
            .smallest_absent(start as usize, 1 << 32)
            .expect("fewer than 2^32 handles");
        id as u32
    }

    /// Whether a handle holds `id`.
    pub fn holds(&self, id: u32) -> bool {
        self.held.contains(id as usize)
    }

    /// One more reference to `node` if it has a handle already: that handle.
    pub fn reference(&mut self, node: NodeId) -> Option<u32> {
        let &h = self.nodes.get(&node)?;
        self.handles
            .get_mut(&h)
            .expect("by_node and by_handle agree")
            .count += 1;
        Some(h)
    }

    /// A new handle `id` for `node`, with one reference.
    pub fn add(&mut self, node: NodeId, id: u32) {
        self.nodes.insert(node, id);
        self.handles.insert(id, RefInfo { node, count: 1 });
        // INVARIANT: `held` gains the key `handles` gained.
        self.held.insert(id as usize);
    }

    /// One more reference through `handle`.
    pub fn increment(&mut self, handle: u32) -> Result<u32, Error> {
        let info = self
            .handles
            .get_mut(&handle)
            .ok_or(Error::UnknownHandle(handle))?;
        info.count += 1;
        Ok(handle)
    }

    /// One reference less through `handle`; `Ok(true)` when that was its
    /// last and the handle is gone.
    pub fn decrement(&mut self, handle: u32) -> Result<bool, Error> {
        let info = self
            .handles
            .get_mut(&handle)
            .ok_or(Error::UnknownHandle(handle))?;
        info.count -= 1;
        if info.count > 0 {
            return Ok(false);
        }
        let node = info.node;
        self.handles.remove(&handle);
        self.nodes.remove(&node);
        // INVARIANT: `held` loses the key `handles` lost.
        self.held.remove(handle as usize);
        Ok(true)
    }

    /// The highest live handle.
    pub fn highest(&self) -> Option<u32> {
        self.handles.keys().next_back().copied()
    }
}

/// The live handles, as the record of the ids a pool must have set.
impl Record for HandleModel {
    fn contains(&self, id: usize) -> bool {
        u32::try_from(id).is_ok_and(|id| self.holds(id))
    }
    fn members(&self) -> impl Iterator<Item = usize> + '_ {
        self.handles.keys().map(|&h| h as usize)
    }
    fn members_from(&self, from: usize) -> impl Iterator<Item = usize> + '_ {
        // Above every u32, no handle.
        let from = u32::try_from(from).ok();
        (from.into_iter())
            .flat_map(|from| self.handles.range(from..))
            .map(|(&h, _)| h as usize)
    }
    fn last(&self) -> Option<usize> {
        self.highest().map(|h| h as usize)
    }
}

/// How a table differs from its model. `Display` says what differs, as a
/// failure message does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The table's own invariants are broken.
    Invariant(InvariantViolation),
    /// `by_handle` differs from the model's: up to six
    /// (handle, expected, actual) triples.
    ByHandle(Vec<(u32, Option<RefInfo>, Option<RefInfo>)>),
    /// The pool's bits, read one id at a time, differ from the model's
    /// ([`crate::bits`]): up to six (id, expected, actual) triples.
    PoolBits(Vec<BitDiff>),
    /// `by_node` differs from the model's: up to six (node, expected,
    /// actual) triples. Read directly, not through the table's own
    /// invariant check.
    ByNode(Vec<(NodeId, Option<u32>, Option<u32>)>),
    /// After a corruption the model expects the pool and `by_handle` to
    /// disagree (set in the pool only, in `by_handle` only), and the
    /// table's invariant check reports no disagreement.
    Unreported(Vec<u32>, Vec<u32>),
}

impl Mismatch {
    /// The check it fails.
    pub fn check(&self) -> Check {
        match self {
            Mismatch::Invariant(_) | Mismatch::Unreported(..) => Check::Invariant,
            Mismatch::ByHandle(_) => Check::ByHandle,
            Mismatch::PoolBits(_) => Check::PoolBits,
            Mismatch::ByNode(_) => Check::ByNode,
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Invariant(violation) => write!(f, "invariant broken: {violation}"),
            Mismatch::ByHandle(diff) => write!(
                f,
                "by_handle differs from the model's (handle, expected, actual): {diff:?}"
            ),
            Mismatch::ByNode(diff) => write!(
                f,
                "by_node differs from the model's (node, expected, actual): {diff:?}"
            ),
            Mismatch::Unreported(pool, tree) => write!(
                f,
                "after the corruption the model expects the pool and by_handle to disagree (set \
                 in the pool only {pool:?}, in by_handle only {tree:?}), the table reports no \
                 disagreement"
            ),
            Mismatch::PoolBits(diff) => write!(
                f,
                "the pool's bits differ from the model's (id, expected, actual): {diff:?}"
            ),
        }
    }
}

/// Compares a table's `by_node` with the model's, every live node.
pub fn compare_nodes(by_node: &BTreeMap<NodeId, u32>, model: &HandleModel) -> Result<(), Mismatch> {
    if by_node == &model.nodes {
        return Ok(());
    }
    let diff = model
        .nodes
        .iter()
        .filter(|(n, h)| by_node.get(n) != Some(h))
        .map(|(&n, &h)| (n, Some(h), by_node.get(&n).copied()))
        .chain(
            by_node
                .iter()
                .filter(|(n, _)| !model.nodes.contains_key(n))
                .map(|(&n, &h)| (n, None, Some(h))),
        )
        .take(6)
        .collect();
    Err(Mismatch::ByNode(diff))
}

/// The table's own invariant check (`checked`) against the pool/`by_handle`
/// disagreement the model expects (`expected`, after a corruption: set in
/// the pool only, in `by_handle` only): the disagreement expected passes;
/// one expected but not reported is [`Mismatch::Unreported`]; any other
/// broken invariant is [`Mismatch::Invariant`].
pub fn compare_invariants(
    checked: Result<(), InvariantViolation>,
    expected: Option<(Vec<u32>, Vec<u32>)>,
) -> Result<(), Mismatch> {
    match (checked, expected) {
        (
            Err(InvariantViolation::PoolTreeMismatch {
                only_in_pool,
                only_in_tree,
            }),
            Some(expected),
        ) if (only_in_pool.clone(), only_in_tree.clone()) == expected => Ok(()),
        (Ok(()), Some((pool, tree))) => Err(Mismatch::Unreported(pool, tree)),
        (result, _) => result.map_err(Mismatch::Invariant),
    }
}

/// Compares a table's `by_handle` with the model's.
pub fn compare(by_handle: &BTreeMap<u32, RefInfo>, model: &HandleModel) -> Result<(), Mismatch> {
    if by_handle == &model.handles {
        return Ok(());
    }
    let diff = model
        .handles
        .iter()
        .filter(|(h, info)| by_handle.get(h) != Some(info))
        .map(|(&h, &info)| (h, Some(info), by_handle.get(&h).copied()))
        .chain(
            by_handle
                .iter()
                .filter(|(h, _)| !model.handles.contains_key(h))
                .map(|(&h, &info)| (h, None, Some(info))),
        )
        .take(6)
        .collect();
    Err(Mismatch::ByHandle(diff))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::{compare, disagreement, handles_of, Expected, PoolBits, Probe, Zero};
    use idpool::{Faults, IdPool, LinearScan, NodeRefs, Request, Version};
    use std::collections::BTreeSet;

    /// A pool that is a set of ids, for reading [`compare`] against.
    struct SetPool(BTreeSet<usize>);

    impl PoolBits for SetPool {
        fn bit(&self, id: usize) -> Option<bool> {
            Some(self.0.contains(&id))
        }
    }

    /// The set of handles, as a record.
    struct Handles(BTreeSet<u32>);

    impl Record for Handles {
        fn contains(&self, id: usize) -> bool {
            u32::try_from(id).is_ok_and(|id| self.0.contains(&id))
        }
        fn members(&self) -> impl Iterator<Item = usize> + '_ {
            self.0.iter().map(|&id| id as usize)
        }
        fn last(&self) -> Option<usize> {
            self.0.iter().next_back().map(|&id| id as usize)
        }
    }

    /// The records the runners pass ([`HandleModel`], [`IdSet`]) answer
    /// [`compare`] as the plain set of their members does: handles at word
    /// edges, some dropped again (the handle model's `held` must lose them
    /// as its map does), against pools that differ on each side of a word,
    /// read whole and id by id.
    #[test]
    fn the_runners_records_compare_as_the_set_of_their_members() {
        let kept: BTreeSet<u32> = [0, 1, 63, 64, 127, 128, 300].into();
        let dropped = [2, 65, 129, 299];
        let mut handles = HandleModel::default();
        let mut ids = IdSet::default();
        for (node, &id) in kept.iter().chain(&dropped).enumerate() {
            handles.add(node as u64, id);
            ids.insert(id as usize);
        }
        for id in dropped {
            assert_eq!(handles.decrement(id), Ok(true));
            ids.remove(id as usize);
        }
        let pools: [&[usize]; 3] = [
            &[0, 1, 63, 64, 127, 128, 300],
            &[1, 2, 63, 65, 128, 129, 299, 301],
            &[],
        ];
        for pool in pools {
            let pool = SetPool(pool.iter().copied().collect());
            // Read whole (the records' members walked) or id by id (each
            // asked whether it holds the id).
            let mut whole = Probe::default();
            whole.everything(320, &IdSet::new());
            let mut each = Probe::default();
            (0..=320).for_each(|id| _ = each.touch(id));
            for (probe, zero) in [whole, each]
                .iter()
                .flat_map(|p| [Zero::AsRecorded, Zero::Set, Zero::Unknown].map(|z| (p, z)))
            {
                let kept = Handles(kept.clone());
                let want = compare(&pool, Expected::exactly(&kept).with_zero(zero), probe);
                let got = compare(&pool, Expected::exactly(&handles).with_zero(zero), probe);
                let ids_got = compare(&pool, Expected::exactly(&ids).with_zero(zero), probe);
                let at = format!("pool {:?}, bit 0 {zero:?}", pool.0);
                assert_eq!(got, want, "the handle model, {at}");
                assert_eq!(ids_got, want, "the id set, {at}");
            }
        }
    }

    /// Both sides of a disagreement, bit 0 left out only where reserved.
    #[test]
    fn disagreement_names_each_side() {
        let mut model = HandleModel::default();
        for (node, h) in [(1, 0), (2, 2), (3, 5)] {
            model.add(node, h);
        }
        let set = |ids: &[usize]| {
            let mut bits = IdSet::new();
            ids.iter().for_each(|&id| _ = bits.insert(id));
            bits
        };
        let bits = set(&[0, 2, 3]);
        assert_eq!(disagreement(&bits, &model, false), Some((vec![3], vec![5])));
        let bits = set(&[2, 5]);
        assert_eq!(disagreement(&bits, &model, true), None);
        assert_eq!(disagreement(&bits, &model, false), Some((vec![], vec![0])));
    }

    /// A mainline table's bits against `concurrent_resize`'s model.
    fn compare_refs<F: idpool::Flavour + PoolBits>(
        refs: &NodeRefs<F>,
        model: &HandleModel,
        probe: &Probe,
    ) -> Result<(), Vec<BitDiff>> {
        compare(refs.pool(), handles_of(model, Version::RustMainline), probe)
    }

    #[test]
    fn a_cleared_bit_behind_the_tables_back_is_found() {
        let mut refs = NodeRefs::<IdPool>::new();
        let mut model = HandleModel::default();
        let faults = Faults::default();
        for node in 0..5 {
            let insert = Request::Insert {
                node,
                is_manager: false,
            };
            let h = refs.run(insert, &faults).unwrap();
            model.add(node, h);
        }
        let mut probe = Probe::boundaries(refs.pool().capacity(), &model);
        probe.everything(refs.pool().capacity(), &model);
        assert_eq!(compare_refs(&refs, &model, &probe), Ok(()));
        refs.corrupt(idpool::Corruption::ClearBit(3));
        assert_eq!(
            compare_refs(&refs, &model, &probe),
            Err(vec![(3, true, false)])
        );
        // The boundaries alone do not read id 3; touching it does.
        let mut narrow = Probe::boundaries(refs.pool().capacity(), &model);
        assert_eq!(compare_refs(&refs, &model, &narrow), Ok(()));
        narrow.touch(3);
        assert!(compare_refs(&refs, &model, &narrow).is_err());
    }

    #[test]
    fn the_linear_scan_has_no_bits_to_compare() {
        let refs = NodeRefs::<LinearScan>::new();
        let mut model = HandleModel::default();
        model.add(7, 1);
        let mut probe = Probe::default();
        probe.everything(64, &model);
        assert_eq!(compare_refs(&refs, &model, &probe), Ok(()));
    }
}
