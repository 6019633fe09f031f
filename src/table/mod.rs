//! The Binder handle table: a process's references to remote nodes.

mod flavour;
mod op;

pub use flavour::{slow_desc_lookup, Flavour, LinearScan};
pub use op::{Next, Operation, Request};

use crate::alloc::Faults;
use core::fmt;
use std::collections::BTreeMap;

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// A remote node, identified by its global id.
pub type NodeId = u64;

/// One handle's entry in `by_handle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefInfo {
    /// The node the handle refers to.
    pub node: NodeId,
    /// How many references the handle stands for; always at least 1.
    pub count: u32,
}

/// Why a handle-table operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// `ENOMEM`: an allocation failed, or the pool cannot grow any more.
    NoMemory,
    /// `EINVAL`: the pool offered an id that `by_handle` already holds. The
    /// two structures disagree: the table is corrupt. Debug builds assert.
    Mismatch {
        /// The id both claim.
        id: u32,
    },
    /// `ESRCH`: the process is dead; no new reference may be inserted.
    DeadProcess,
    /// `EINVAL`: no such handle.
    UnknownHandle(u32),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoMemory => f.write_str("out of memory (ENOMEM)"),
            Error::Mismatch { id } => write!(
                f,
                "pool/tree mismatch: the pool offered id {id}, which by_handle already holds (EINVAL)"
            ),
            Error::DeadProcess => f.write_str("the process is dead (ESRCH)"),
            Error::UnknownHandle(h) => write!(f, "unknown handle {h} (EINVAL)"),
        }
    }
}

impl std::error::Error for Error {}

/// A broken [`NodeRefs`] invariant, found by [`NodeRefs::check_invariants`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvariantViolation {
    /// The pool's used ids are not exactly the keys of `by_handle`.
    PoolTreeMismatch {
        /// Ids the pool has set that no handle holds (leaked).
        only_in_pool: Vec<u32>,
        /// Handles whose id the pool has free (could be issued twice).
        only_in_tree: Vec<u32>,
    },
    /// `by_node` and `by_handle` are not inverse bijections.
    NotInverse {
        /// A handle or node on which they disagree, in words.
        detail: String,
    },
    /// A handle with a reference count of 0 is still in the table.
    ZeroCount {
        /// The handle.
        handle: u32,
    },
}

impl fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvariantViolation::PoolTreeMismatch {
                only_in_pool,
                only_in_tree,
            } => write!(
                f,
                "pool and by_handle disagree: set in the pool only {only_in_pool:?}, \
                 in by_handle only {only_in_tree:?}"
            ),
            InvariantViolation::NotInverse { detail } => {
                write!(f, "by_node and by_handle are not inverse: {detail}")
            }
            InvariantViolation::ZeroCount { handle } => {
                write!(
                    f,
                    "handle {handle} has no reference left but is still in the table"
                )
            }
        }
    }
}

impl std::error::Error for InvariantViolation {}

/// The state Binder keeps under one lock per process (`ProcessNodeRefs`).
///
/// # Invariants
///
/// Whenever the lock is released:
/// - the pool's used ids are exactly the keys of `by_handle` (for the
///   flavours that keep such a record);
/// - `by_node` and `by_handle` are inverse bijections, so no two live
///   references share an id;
/// - every entry of `by_handle` has a count of at least 1.
///
/// [`NodeRefs::check_invariants`] checks all of them.
#[derive(Debug)]
pub struct NodeRefs<F: Flavour> {
    by_handle: BTreeMap<u32, RefInfo>,
    by_node: BTreeMap<NodeId, u32>,
    pool: F,
    dead: bool,
}

impl<F: Flavour> Default for NodeRefs<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Flavour> NodeRefs<F> {
    /// The empty state of a new process.
    pub fn new() -> Self {
        NodeRefs {
            by_handle: BTreeMap::new(),
            by_node: BTreeMap::new(),
            pool: F::new_pool(),
            dead: false,
        }
    }

    /// The handles and what they refer to, ordered by handle.
    pub fn by_handle(&self) -> &BTreeMap<u32, RefInfo> {
        &self.by_handle
    }

    /// The handle of each referenced node.
    pub fn by_node(&self) -> &BTreeMap<NodeId, u32> {
        &self.by_node
    }

    /// The id allocator.
    pub fn pool(&self) -> &F {
        &self.pool
    }

    /// The handle of `node`, if the process holds a reference to it.
    pub fn lookup(&self, node: NodeId) -> Option<u32> {
        self.by_node.get(&node).copied()
    }

    /// Whether the process has died.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Marks the process as dead: inserts fail with [`Error::DeadProcess`]
    /// from now on. Existing references stay until they are dropped.
    pub fn mark_dead(&mut self) {
        self.dead = true;
    }

    /// If `node` has a handle, takes one more reference on it.
    fn absorb(&mut self, node: NodeId) -> Option<u32> {
        let handle = *self.by_node.get(&node)?;
        let info = self
            .by_handle
            .get_mut(&handle)
            .expect("by_node names a handle that by_handle lacks");
        info.count += 1;
        Some(handle)
    }

    /// Runs one operation to completion with no other thread around: its
    /// steps back to back, allocations with the flags `faults` hands out.
    pub fn run(&mut self, request: Request, faults: &Faults) -> Result<u32, Error> {
        drive(Operation::new(request), faults, |op| op.step_locked(self))
    }

    /// Checks every invariant of the type.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        for (&handle, info) in &self.by_handle {
            if info.count == 0 {
                return Err(InvariantViolation::ZeroCount { handle });
            }
            match self.by_node.get(&info.node) {
                Some(&h) if h == handle => {}
                other => {
                    return Err(InvariantViolation::NotInverse {
                        detail: format!(
                            "by_handle[{handle}] is node {}, but by_node[{}] is {other:?}",
                            info.node, info.node
                        ),
                    })
                }
            }
        }
        if self.by_node.len() != self.by_handle.len() {
            return Err(InvariantViolation::NotInverse {
                detail: format!(
                    "{} nodes but {} handles",
                    self.by_node.len(),
                    self.by_handle.len()
                ),
            });
        }
        if let Some(used) = self.pool.used_ids() {
            let only_in_pool: Vec<u32> = used
                .iter()
                .copied()
                .filter(|id| !self.by_handle.contains_key(id))
                .collect();
            let only_in_tree: Vec<u32> = self
                .by_handle
                .keys()
                .copied()
                .filter(|id| used.binary_search(id).is_err())
                .collect();
            if !only_in_pool.is_empty() || !only_in_tree.is_empty() {
                return Err(InvariantViolation::PoolTreeMismatch {
                    only_in_pool,
                    only_in_tree,
                });
            }
        }
        Ok(())
    }
}

/// Runs `op` to completion: locked steps through `locked`, unlocked ones with
/// the flags `faults` hands out.
fn drive<F: Flavour>(
    mut op: Operation<F>,
    faults: &Faults,
    mut locked: impl FnMut(&mut Operation<F>),
) -> Result<u32, Error> {
    loop {
        match op.next() {
            Next::Locked => locked(&mut op),
            Next::Unlocked => {
                let site = op.alloc_site().expect("an unlocked step allocates");
                op.step_unlocked(faults.next(site));
            }
            Next::Done(outcome) => return outcome,
        }
    }
}

/// A process's handle table, driven from one thread: each operation runs its
/// steps back to back.
///
/// # Examples
///
/// ```
/// use idpool::{Error, HandleTable, IdPool};
///
/// let mut table = HandleTable::<IdPool>::new();
/// assert_eq!(table.insert_or_update_handle(100, true), Ok(0)); // the context manager
/// assert_eq!(table.insert_or_update_handle(200, false), Ok(1));
/// assert_eq!(table.insert_or_update_handle(200, false), Ok(1)); // same node, same handle
///
/// table.faults().fail_next(1);
/// assert_eq!(table.insert_or_update_handle(300, false), Err(Error::NoMemory));
/// assert_eq!(table.insert_or_update_handle(300, false), Ok(2));
///
/// table.decrement(1)?;
/// table.decrement(1)?; // the last reference: handle 1 is free again
/// assert_eq!(table.insert_or_update_handle(400, false), Ok(1));
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Default)]
pub struct HandleTable<F: Flavour> {
    refs: NodeRefs<F>,
    faults: Faults,
}

impl<F: Flavour> HandleTable<F> {
    /// The empty table of a new process.
    pub fn new() -> Self {
        HandleTable {
            refs: NodeRefs::new(),
            faults: Faults::default(),
        }
    }

    /// The state, to observe it.
    pub fn refs(&self) -> &NodeRefs<F> {
        &self.refs
    }

    /// The fault plan: `faults().fail_next(n)` makes the next `n`
    /// allocations of this table fail; `fail_next_at` picks a site.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Runs one operation to completion.
    pub fn run(&mut self, request: Request) -> Result<u32, Error> {
        self.refs.run(request, &self.faults)
    }

    /// A handle for `node`: its existing one (with one more reference), or
    /// the smallest free id `>= 1` (`>= 0` for the context manager).
    pub fn insert_or_update_handle(
        &mut self,
        node: NodeId,
        is_manager: bool,
    ) -> Result<u32, Error> {
        self.run(Request::Insert { node, is_manager })
    }

    /// One more reference through `handle`.
    pub fn increment(&mut self, handle: u32) -> Result<u32, Error> {
        self.run(Request::Increment(handle))
    }

    /// One reference less through `handle`; the last one frees the handle.
    pub fn decrement(&mut self, handle: u32) -> Result<u32, Error> {
        self.run(Request::Decrement(handle))
    }

    /// The handle of `node`, if any.
    pub fn lookup(&self, node: NodeId) -> Option<u32> {
        self.refs.lookup(node)
    }

    /// Marks the process as dead.
    pub fn kill(&mut self) {
        self.refs.mark_dead();
    }

    /// The pool's capacity (0 for the linear scan or a disabled dbitmap).
    pub fn capacity(&self) -> usize {
        self.refs.pool.capacity()
    }
}

/// A process's handle table shared by threads, behind a real
/// [`std::sync::Mutex`] (loom's, under `--cfg loom`).
///
/// Every operation runs the same [`Operation`] steps as [`HandleTable`]: the
/// lock is taken for each critical section and released for each
/// allocation, exactly where Binder drops it, so other threads can insert,
/// release, grow or shrink in between.
///
/// # Panics
///
/// A method panics if another thread panicked while holding the lock.
#[derive(Debug)]
pub struct SharedHandleTable<F: Flavour> {
    refs: Mutex<NodeRefs<F>>,
    faults: Faults,
}

impl<F: Flavour> Default for SharedHandleTable<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Flavour> SharedHandleTable<F> {
    /// The empty table of a new process.
    pub fn new() -> Self {
        SharedHandleTable {
            refs: Mutex::new(NodeRefs::new()),
            faults: Faults::default(),
        }
    }

    /// The fault plan shared by every thread.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Runs `f` on the state with the lock held.
    pub fn with_refs<R>(&self, f: impl FnOnce(&mut NodeRefs<F>) -> R) -> R {
        f(&mut self
            .refs
            .lock()
            .expect("a thread panicked holding the lock"))
    }

    /// Runs one operation to completion, taking the lock once per critical
    /// section.
    pub fn run(&self, request: Request) -> Result<u32, Error> {
        drive(Operation::new(request), &self.faults, |op| {
            self.with_refs(|refs| op.step_locked(refs))
        })
    }

    /// See [`HandleTable::insert_or_update_handle`].
    pub fn insert_or_update_handle(&self, node: NodeId, is_manager: bool) -> Result<u32, Error> {
        self.run(Request::Insert { node, is_manager })
    }

    /// See [`HandleTable::increment`].
    pub fn increment(&self, handle: u32) -> Result<u32, Error> {
        self.run(Request::Increment(handle))
    }

    /// See [`HandleTable::decrement`].
    pub fn decrement(&self, handle: u32) -> Result<u32, Error> {
        self.run(Request::Decrement(handle))
    }

    /// The handle of `node`, if any.
    pub fn lookup(&self, node: NodeId) -> Option<u32> {
        self.with_refs(|refs| refs.lookup(node))
    }

    /// Marks the process as dead.
    pub fn kill(&self) {
        self.with_refs(NodeRefs::mark_dead);
    }

    /// Checks the invariants under the lock.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.with_refs(|refs| refs.check_invariants())
    }
}

#[cfg(test)]
mod tests;
