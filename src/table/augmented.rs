//! No bitmap at all: an ordered tree of the handles in use, augmented so
//! that the smallest free handle at or above a start is found in O(log n).
//! The design proposed upstream in October 2024 ("binder: use augmented
//! rb-tree for faster descriptor lookup") and not merged.
//!
//! # The idea
//!
//! Each node stores the size of its subtree (an order-statistic tree), so
//! the rank of any key (how many keys are smaller) is found on the way down.
//! For sorted distinct keys `k` the gap function `g(k) = k - rank(k)` never
//! decreases, and the keys from `s` upwards are `s, s + 1, ...` exactly as
//! long as `g` stays at `c = s - rank(s)`. So the smallest missing key
//! `>= s` is `c + r`, where `r` is the rank of the first key with `g > c`
//! (or the number of keys when there is none): two descents, no scan. Keys
//! below `s` all have `g <= c`, so the second descent needs no bound.
//!
//! # Where it sits
//!
//! In the kernel the augmentation would live in the by-descriptor tree
//! itself (`refs_by_desc` / `by_handle`), four bytes per reference. Here
//! `by_handle` is a `BTreeMap` the flavour cannot augment, so
//! [`AugmentedTree`] is a second tree of the same keys beside it, kept
//! equal to `by_handle`'s key set by the table (the pool/tree invariant of
//! [`NodeRefs`](crate::NodeRefs)). `find_unused` ignores `by_handle`.
//!
//! # Why our own tree
//!
//! The query needs the augmentation inside the tree's rebalancing, which
//! `std`'s `BTreeMap` does not expose. The crates that offer augmented or
//! order-statistic trees are small, one-author projects with unsafe code or
//! no recent release, and this crate forbids `unsafe` and has no
//! dependencies. A treap over an arena of `u32` indexes is ~150 lines of
//! safe code: split-free insertion, removal by merging children, every
//! update fixing the subtree sizes on the way back up. The priority of a
//! node is a hash of its key, so the shape depends only on the key set
//! (deterministic, no random state) and is balanced in expectation.
//!
//! # Capacity and the ceiling
//!
//! There is no capacity and nothing to resize: [`Flavour::capacity`] is 0,
//! [`Flavour::shrink_request`] is `None`, and [`Flavour::find_unused`]
//! returns `None` only when the smallest free handle is at or above
//! [`ID_LIMIT`] = 2^30, mainline's ceiling (an `IdPool` cannot grow beyond
//! 2^30 ids). Then [`Flavour::grow_request`] says `None` and the insert
//! fails with `ENOMEM`, as in mainline. So the ids and outcomes are
//! mainline's exactly, and an insert needs no allocation beyond the
//! reference's own (no `Grow` or `Shrink` allocation site).
//!
//! # What it costs
//!
//! 16 bytes per handle in the arena (key, two child indexes, subtree size,
//! all `u32`, the same with 32- or 64-bit pointers), plus the arena's slack:
//! it doubles when full and is rebuilt at half size once a quarter or less
//! of it is in use. In the kernel, inside the by-descriptor node: +4 bytes
//! per reference (the subtree size), which upstream found pushed the 32-bit
//! `binder_ref` from 60 to 64 bytes, the edge of its slab.

use super::{Flavour, RefInfo};
use crate::alloc::{AllocError, Gfp};
use std::collections::BTreeMap;

/// The smallest handle the tree refuses to hand out: mainline's 2^30.
pub const ID_LIMIT: u32 = 1 << 30;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    key: u32,
    left: u32,
    right: u32,
    /// Keys in the subtree rooted here; for a free slot, unused.
    size: u32,
}

/// An ordered set of `u32` handles, augmented with subtree sizes, answering
/// "smallest missing key `>= start`" in O(log n) expected.
///
/// # Invariants
///
/// - Binary search tree order on `key`; keys are distinct.
/// - Heap order on `priority(key)`: no child has a higher priority than its
///   parent (ties broken by nothing: any order is valid).
/// - `size` of every node reachable from `root` is 1 + the sizes of its
///   children; `len` is the root's size.
/// - Every slot of `nodes` is either reachable from `root` or on the free
///   list (linked through `left`), never both.
///
/// # Examples
///
/// ```
/// use idpool::AugmentedTree;
///
/// let mut tree = AugmentedTree::new();
/// for key in [0, 1, 2, 4, 5, 9] {
///     tree.insert(key);
/// }
/// assert_eq!(tree.smallest_missing(0), 3);
/// assert_eq!(tree.smallest_missing(4), 6);
/// assert_eq!(tree.smallest_missing(9), 10);
/// tree.remove(1);
/// assert_eq!(tree.smallest_missing(1), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct AugmentedTree {
    nodes: Vec<Node>,
    root: Option<u32>,
    free: Option<u32>,
    len: u32,
}

/// The heap priority of a key (a 64-bit mix, truncated).
fn priority(key: u32) -> u32 {
    let mut x = u64::from(key).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u32
}

impl PartialEq for AugmentedTree {
    /// Two trees are equal when they hold the same keys.
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for AugmentedTree {}

impl AugmentedTree {
    /// The empty tree. Allocates nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the tree holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn link(id: Option<u32>) -> u32 {
        id.unwrap_or(NIL)
    }

    fn size(&self, t: u32) -> u32 {
        if t == NIL {
            0
        } else {
            self.nodes[t as usize].size
        }
    }

    fn fix(&mut self, t: u32) {
        let n = self.nodes[t as usize];
        self.nodes[t as usize].size = 1 + self.size(n.left) + self.size(n.right);
    }

    /// Whether `key` is in the tree. O(log n).
    pub fn contains(&self, key: u32) -> bool {
        let mut t = Self::link(self.root);
        while t != NIL {
            let n = self.nodes[t as usize];
            if key == n.key {
                return true;
            }
            t = if key < n.key { n.left } else { n.right };
        }
        false
    }

    /// Inserts `key`; `false` when it was already there.
    pub fn insert(&mut self, key: u32) -> bool {
        if self.contains(key) {
            return false;
        }
        let node = Node {
            key,
            left: NIL,
            right: NIL,
            size: 1,
        };
        let slot = match self.free {
            Some(slot) => {
                self.free = Some(self.nodes[slot as usize].left).filter(|&s| s != NIL);
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let root = Self::link(self.root);
        self.root = Some(self.insert_at(root, slot));
        self.len += 1;
        true
    }

    fn insert_at(&mut self, t: u32, n: u32) -> u32 {
        if t == NIL {
            return n;
        }
        let key = self.nodes[n as usize].key;
        if priority(key) > priority(self.nodes[t as usize].key) {
            let (l, r) = self.split(t, key);
            let node = &mut self.nodes[n as usize];
            node.left = l;
            node.right = r;
            self.fix(n);
            return n;
        }
        if key < self.nodes[t as usize].key {
            let l = self.insert_at(self.nodes[t as usize].left, n);
            self.nodes[t as usize].left = l;
        } else {
            let r = self.insert_at(self.nodes[t as usize].right, n);
            self.nodes[t as usize].right = r;
        }
        // INVARIANT: one key was added below `t`.
        self.nodes[t as usize].size += 1;
        t
    }

    /// Splits `t` into the keys `< key` and the keys `> key` (`key` is absent).
    fn split(&mut self, t: u32, key: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.nodes[t as usize].key < key {
            let (l, r) = self.split(self.nodes[t as usize].right, key);
            self.nodes[t as usize].right = l;
            self.fix(t);
            (t, r)
        } else {
            let (l, r) = self.split(self.nodes[t as usize].left, key);
            self.nodes[t as usize].left = r;
            self.fix(t);
            (l, t)
        }
    }

    /// Joins `a` and `b`, every key of `a` being smaller than every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if priority(self.nodes[a as usize].key) >= priority(self.nodes[b as usize].key) {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.fix(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.fix(b);
            b
        }
    }

    /// Removes `key`; `false` when it was not there.
    pub fn remove(&mut self, key: u32) -> bool {
        if !self.contains(key) {
            return false;
        }
        let root = Self::link(self.root);
        let root = self.remove_at(root, key);
        self.root = Some(root).filter(|&r| r != NIL);
        self.len -= 1;
        if self.nodes.len() > 64 && (self.len as usize) * 4 <= self.nodes.len() {
            self.rebuild();
        }
        true
    }

    fn remove_at(&mut self, t: u32, key: u32) -> u32 {
        let n = self.nodes[t as usize];
        if key == n.key {
            let m = self.merge(n.left, n.right);
            self.nodes[t as usize].left = Self::link(self.free);
            self.free = Some(t);
            return m;
        }
        if key < n.key {
            let l = self.remove_at(n.left, key);
            self.nodes[t as usize].left = l;
        } else {
            let r = self.remove_at(n.right, key);
            self.nodes[t as usize].right = r;
        }
        // INVARIANT: `key` was below `t` (checked by `contains`) and is gone.
        self.nodes[t as usize].size -= 1;
        t
    }

    /// Rebuilds the arena at twice the live keys, dropping the free slots:
    /// O(n log n), amortised over the n / 2 or more removals since the last
    /// time the arena was this size.
    fn rebuild(&mut self) {
        let keys: Vec<u32> = self.iter().collect();
        let mut fresh = AugmentedTree {
            nodes: Vec::with_capacity(keys.len() * 2),
            ..Self::default()
        };
        for key in keys {
            fresh.insert(key);
        }
        *self = fresh;
    }

    /// The keys in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let mut stack = Vec::new();
        let mut t = Self::link(self.root);
        core::iter::from_fn(move || {
            while t != NIL {
                stack.push(t);
                t = self.nodes[t as usize].left;
            }
            let n = self.nodes[stack.pop()? as usize];
            t = n.right;
            Some(n.key)
        })
    }

    /// The number of keys smaller than `key`.
    pub fn rank(&self, key: u64) -> u64 {
        let (mut t, mut rank) = (Self::link(self.root), 0u64);
        while t != NIL {
            let n = self.nodes[t as usize];
            if u64::from(n.key) < key {
                rank += u64::from(self.size(n.left)) + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        rank
    }

    /// The smallest value `>= start` that is not a key (it may be `2^32`
    /// when every key from `start` up is taken). Two descents: O(log n).
    pub fn smallest_missing(&self, start: u32) -> u64 {
        let start = u64::from(start);
        let c = start - self.rank(start);
        // The first key whose gap `key - rank` exceeds `c`.
        let (mut t, mut acc) = (Self::link(self.root), 0u64);
        let mut first = u64::from(self.len);
        while t != NIL {
            let n = self.nodes[t as usize];
            let rank = acc + u64::from(self.size(n.left));
            if u64::from(n.key) - rank > c {
                first = rank;
                t = n.left;
            } else {
                acc = rank + 1;
                t = n.right;
            }
        }
        c + first
    }

    /// Checks every invariant of the type (O(n)); for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        fn walk(
            tree: &AugmentedTree,
            t: u32,
            lo: u64,
            hi: u64,
            seen: &mut usize,
        ) -> Result<u32, String> {
            if t == NIL {
                return Ok(0);
            }
            let n = tree.nodes[t as usize];
            let key = u64::from(n.key);
            if key < lo || key >= hi {
                return Err(format!("key {key} outside ({lo}, {hi})"));
            }
            for child in [n.left, n.right] {
                if child != NIL && priority(tree.nodes[child as usize].key) > priority(n.key) {
                    return Err(format!("heap order broken below {key}"));
                }
            }
            *seen += 1;
            let size =
                1 + walk(tree, n.left, lo, key, seen)? + walk(tree, n.right, key + 1, hi, seen)?;
            if size != n.size {
                return Err(format!("node {key}: size {} but {size} keys below", n.size));
            }
            Ok(size)
        }
        let mut seen = 0;
        let size = walk(self, Self::link(self.root), 0, 1 << 32, &mut seen)?;
        let mut free = 0;
        let mut f = Self::link(self.free);
        while f != NIL {
            free += 1;
            f = self.nodes[f as usize].left;
        }
        if size != self.len || seen + free != self.nodes.len() {
            return Err(format!(
                "len {} but {size} reachable, {free} free, {} slots",
                self.len,
                self.nodes.len()
            ));
        }
        Ok(())
    }
}

/// The augmented tree as the table's id allocator. No capacity, no resize:
/// `find_unused` fails only at [`ID_LIMIT`], and then there is nothing to
/// grow (`ENOMEM`, like mainline at its ceiling).
impl Flavour for AugmentedTree {
    const NAME: &'static str = "augmented";
    type Request = ();
    type Resizer = ();

    fn new_pool() -> Self {
        AugmentedTree::new()
    }
    fn find_unused(&mut self, start: u32, _: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        let id = self.smallest_missing(start);
        (id < u64::from(ID_LIMIT)).then_some(id as u32)
    }
    fn acquire(&mut self, id: u32) {
        let fresh = self.insert(id);
        debug_assert!(fresh, "acquire of a used id");
    }
    fn release(&mut self, id: u32) {
        self.remove(id);
    }
    /// `None`: reached only when every id below [`ID_LIMIT`] from the start
    /// is taken, where mainline cannot grow either.
    fn grow_request(&self) -> Option<()> {
        None
    }
    fn realloc(_: &(), _: Gfp) -> Result<(), AllocError> {
        Ok(())
    }
    fn grow(&mut self, _: ()) {}
    fn shrink_request(&self) -> Option<()> {
        None
    }
    fn shrink(&mut self, _: ()) {}
    fn capacity(&self) -> usize {
        0
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        Some(self.iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn naive(set: &BTreeSet<u32>, start: u32) -> u64 {
        let mut x = u64::from(start);
        while x <= u64::from(u32::MAX) && set.contains(&(x as u32)) {
            x += 1;
        }
        x
    }

    #[test]
    fn agrees_with_a_naive_set_on_random_sequences() {
        for seed in 1..=40u64 {
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut rng = move |n: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % n
            };
            let mut tree = AugmentedTree::new();
            let mut set = BTreeSet::new();
            let span = [8, 100, 3000][rng(3) as usize];
            for step in 0..3000 {
                let key = rng(span) as u32;
                match rng(4) {
                    0 | 1 => assert_eq!(tree.insert(key), set.insert(key)),
                    2 => assert_eq!(tree.remove(key), set.remove(&key)),
                    _ => {
                        // Binder's insert: the smallest free id from 0 or 1.
                        let start = rng(2) as u32;
                        let id = tree.smallest_missing(start);
                        assert_eq!(id, naive(&set, start), "seed {seed} step {step}");
                        tree.insert(id as u32);
                        set.insert(id as u32);
                    }
                }
                let start = rng(span + 2) as u32;
                assert_eq!(
                    tree.smallest_missing(start),
                    naive(&set, start),
                    "seed {seed} step {step} start {start}"
                );
                assert_eq!(tree.len(), set.len());
                assert!(tree.iter().eq(set.iter().copied()));
                if step % 97 == 0 {
                    tree.check_invariants().unwrap();
                }
            }
            tree.check_invariants().unwrap();
        }
    }

    #[test]
    fn the_top_of_the_key_space() {
        let mut tree = AugmentedTree::new();
        for key in [u32::MAX, u32::MAX - 1, 0] {
            tree.insert(key);
        }
        assert_eq!(tree.smallest_missing(u32::MAX - 1), 1 << 32);
        assert_eq!(tree.smallest_missing(u32::MAX - 2), u64::from(u32::MAX - 2));
        assert_eq!(tree.smallest_missing(0), 1);
        // The flavour stops at mainline's ceiling.
        let mut tree = AugmentedTree::new();
        tree.insert(ID_LIMIT - 1);
        let by_handle = BTreeMap::new();
        assert_eq!(tree.find_unused(ID_LIMIT - 1, &by_handle), None);
        assert_eq!(
            tree.find_unused(ID_LIMIT - 2, &by_handle),
            Some(ID_LIMIT - 2)
        );
        assert_eq!(tree.grow_request(), None);
    }

    #[test]
    fn the_arena_shrinks_after_a_teardown() {
        let mut tree = AugmentedTree::new();
        for key in 0..10_000 {
            tree.insert(key);
        }
        tree.check_invariants().unwrap();
        for key in 0..9_990 {
            tree.remove(key);
        }
        tree.check_invariants().unwrap();
        assert!(
            tree.nodes.len() <= 64,
            "arena of {} slots for 10 keys",
            tree.nodes.len()
        );
        assert_eq!(tree.smallest_missing(0), 0);
        assert_eq!(tree.smallest_missing(9_990), 10_000);
    }
}
