//! The naive model of a handle table, shared by `handle_table` and
//! `concurrent_resize`: two ordered maps and the plain gap scan, and the
//! comparison of a real table against them.

use crate::idset::IdSet;
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

/// How a table differs from its model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The table's own invariants are broken.
    Invariant(InvariantViolation),
    /// `by_handle` differs from the model's: up to six
    /// (handle, expected, actual) triples.
    ByHandle(Vec<(u32, Option<RefInfo>, Option<RefInfo>)>),
    /// The pool's bits, read one id at a time, differ from the model's
    /// ([`crate::bits`]): up to six (id, expected, actual) triples.
    PoolBits(Vec<crate::bits::BitDiff>),
    /// `by_node` differs from the model's: up to six (node, expected,
    /// actual) triples. Read directly, not through the table's own
    /// invariant check.
    ByNode(Vec<(NodeId, Option<u32>, Option<u32>)>),
    /// After a corruption the model expects the pool and `by_handle` to
    /// disagree (set in the pool only, in `by_handle` only), and the
    /// table's invariant check reports no disagreement.
    Unreported(Vec<u32>, Vec<u32>),
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

/// Compares a table (its invariant check and its `by_handle`) with the
/// model.
pub fn compare(
    invariants: Result<(), InvariantViolation>,
    by_handle: &BTreeMap<u32, RefInfo>,
    model: &HandleModel,
) -> Result<(), Mismatch> {
    invariants.map_err(Mismatch::Invariant)?;
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
