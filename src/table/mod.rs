//! The Binder handle table: a process's references to remote nodes.

mod augmented;
mod flavour;
mod op;
mod reclaim;

pub use augmented::{AugmentedTree, ID_LIMIT};
pub use flavour::{slow_desc_lookup, Flavour, LinearScan};
pub use op::{Manager, Next, Operation, Request};

use crate::alloc::{Corruption, Faults, Gfp};
use crate::version::Version;
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
    /// two structures disagree: the table is corrupt. The Rust driver's
    /// answer since its merged version, which also leaves a
    /// [`Warning::Mismatch`] (`warn_on!`).
    Mismatch {
        /// The id both claim.
        id: u32,
    },
    /// `ESRCH`: the process is dead; no new reference may be inserted.
    DeadProcess,
    /// `EINVAL`: no such handle.
    UnknownHandle(u32),
    /// `BUG()`: the C driver found the descriptor it was about to insert
    /// already in `refs_by_desc` (`binder_get_ref_for_node_olocked`) and
    /// crashed the kernel. Not an error code any caller would see: the
    /// machine is gone. The table is left as C left it at that point (see
    /// [`Operation`]); nothing after it is meaningful.
    KernelBug {
        /// The descriptor found twice.
        id: u32,
    },
}

/// Something the kernel would log loudly (`pr_err!`, `WARN_ON`) without
/// failing in a way the caller sees as a crash. Collected on [`NodeRefs`]
/// in the order they happen; drain them with [`NodeRefs::drain_warnings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Warning {
    /// The pool offered `id` although `by_handle` holds it (the Rust
    /// driver's "Detected mismatch between handle_is_present and
    /// by_handle"). `warn_on` is whether a `WARN_ON` fired too: in Rust
    /// mainline it does, in the first posting only `pr_err!` logged.
    Mismatch {
        /// The id both claim.
        id: u32,
        /// Whether `warn_on!` fired (Rust mainline) or only `pr_err!` (v1).
        warn_on: bool,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Mismatch { id, warn_on } => write!(
                f,
                "{}: mismatch between handle_is_present and by_handle at id {id}",
                if *warn_on { "WARN_ON" } else { "pr_err" }
            ),
        }
    }
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
            Error::KernelBug { id } => write!(
                f,
                "kernel BUG(): descriptor {id} is already in refs_by_desc"
            ),
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

/// Why [`NodeRefs::from_handles`] could not build a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The handle is given twice.
    DuplicateHandle(u32),
    /// The node is given twice.
    DuplicateNode(NodeId),
    /// The pool cannot grow to hold the handle.
    NoRoom(u32),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::DuplicateHandle(h) => write!(f, "handle {h} is given twice"),
            BuildError::DuplicateNode(n) => write!(f, "node {n} is given twice"),
            BuildError::NoRoom(h) => write!(f, "the pool cannot grow to hold handle {h}"),
        }
    }
}

impl std::error::Error for BuildError {}

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
/// [`NodeRefs::check_invariants`] checks all of them. For a version that
/// [reserves bit 0](Version::reserves_bit_zero), id 0 is left out of the
/// pool/`by_handle` comparison: the pool holds it whether or not the
/// context manager's ref does.
///
/// # Versions
///
/// The state carries the [`Version`] it was built for, which picks the
/// protocol every [`Operation`] on it follows.
#[derive(Debug)]
pub struct NodeRefs<F: Flavour> {
    by_handle: BTreeMap<u32, RefInfo>,
    by_node: BTreeMap<NodeId, u32>,
    pool: F,
    dead: bool,
    version: Version,
    warnings: Vec<Warning>,
    context_manager: Option<NodeId>,
}

impl<F: Flavour> Default for NodeRefs<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Flavour> NodeRefs<F> {
    /// The empty state of a new process, for the flavour's
    /// [default version](Flavour::DEFAULT_VERSION).
    pub fn new() -> Self {
        NodeRefs {
            by_handle: BTreeMap::new(),
            by_node: BTreeMap::new(),
            pool: F::new_pool(),
            dead: false,
            version: F::DEFAULT_VERSION,
            warnings: Vec::new(),
            context_manager: None,
        }
    }

    /// The empty state of a new process, for `version`.
    ///
    /// # Panics
    ///
    /// If the flavour cannot run that version ([`Flavour::supports`]).
    pub fn with_version(version: Version) -> Self {
        assert!(
            F::supports(version),
            "the {} pool cannot run version {version}",
            F::NAME
        );
        NodeRefs {
            pool: F::new_pool_for(version),
            version,
            ..Self::new()
        }
    }

    /// The state of a process that already holds one reference to each
    /// `(handle, node)` pair, for `version`: the pool grown as inserts would
    /// have grown it (doubling from its initial size until the highest
    /// handle fits) and every handle's id acquired. This reaches handles far
    /// above what the smallest-free-id rule hands out cheaply (above 65,535,
    /// say) without inserting every id below them.
    ///
    /// # Errors
    ///
    /// [`BuildError`] when a handle or a node appears twice, or when the
    /// pool cannot grow to hold a handle.
    ///
    /// # Panics
    ///
    /// If the flavour cannot run that version ([`Flavour::supports`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use idpool::{IdPool, NodeRefs, Version};
    ///
    /// let refs = NodeRefs::<IdPool>::from_handles(Version::RustMainline, [(70_000, 1), (3, 2)])
    ///     .unwrap();
    /// assert_eq!(refs.pool().capacity(), 131_072);
    /// assert_eq!(refs.lookup(1), Some(70_000));
    /// assert!(refs.check_invariants().is_ok());
    /// ```
    pub fn from_handles(
        version: Version,
        handles: impl IntoIterator<Item = (u32, NodeId)>,
    ) -> Result<Self, BuildError> {
        let mut refs = Self::with_version(version);
        for (handle, node) in handles {
            if refs.by_handle.contains_key(&handle) {
                return Err(BuildError::DuplicateHandle(handle));
            }
            if refs.by_node.contains_key(&node) {
                return Err(BuildError::DuplicateNode(node));
            }
            // A capacity of 0 means no bitmap (the linear scan, the
            // augmented tree): nothing to grow.
            while refs.pool.capacity() != 0 && refs.pool.capacity() <= handle as usize {
                let grown = refs
                    .pool
                    .grow_request()
                    .and_then(|request| F::realloc(&request, Gfp::Kernel).ok())
                    .ok_or(BuildError::NoRoom(handle))?;
                refs.pool.grow(grown);
            }
            refs.by_handle.insert(handle, RefInfo { node, count: 1 });
            refs.by_node.insert(node, handle);
            refs.pool.acquire(handle);
        }
        Ok(refs)
    }

    /// The version this state follows.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Takes the warnings logged so far, oldest first, leaving none.
    pub fn drain_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    fn warn(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    /// Corrupts the pool behind the table's back: `by_handle` and `by_node`
    /// do not change. See [`Corruption`].
    pub fn corrupt(&mut self, corruption: Corruption) {
        self.pool.corrupt(corruption);
    }

    /// Applies the corruptions planned in `faults` ([`Faults::corrupt`]),
    /// oldest first. The tables call it at the start of every critical
    /// section; call it with the lock held.
    pub fn apply_corruptions(&mut self, faults: &Faults) {
        for corruption in faults.take_corruptions() {
            self.corrupt(corruption);
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

    /// If `node` has a handle, returns it, and takes one more reference on
    /// it when the table counts references (`counting`).
    fn absorb(&mut self, node: NodeId, counting: bool) -> Option<u32> {
        let handle = *self.by_node.get(&node)?;
        let info = self
            .by_handle
            .get_mut(&handle)
            .expect("by_node names a handle that by_handle lacks");
        if counting {
            info.count += 1;
        }
        Some(handle)
    }

    /// Removes `handle` from both maps and releases its id, without asking
    /// the pool to shrink: what the C driver's `binder_cleanup_ref_olocked`
    /// does to the trees and the map where no `try_shrink_dmap` follows
    /// (a new reference whose first count failed, a dying process's
    /// references). `None` when the handle is not in the table.
    pub fn remove_handle(&mut self, handle: u32) -> Option<RefInfo> {
        let info = self.by_handle.remove(&handle)?;
        self.by_node.remove(&info.node);
        self.pool.release(handle);
        Some(info)
    }

    /// The context manager's node as this process's context has it now,
    /// which an insert of [`Manager::Current`] compares its node with.
    pub fn context_manager(&self) -> Option<NodeId> {
        self.context_manager
    }

    /// Records that the context's manager is now `node` (or none).
    pub fn set_context_manager(&mut self, node: Option<NodeId>) {
        self.context_manager = node;
    }

    /// Runs one operation to completion with no other thread around: its
    /// steps back to back, allocations with the flags `faults` hands out.
    /// Planned corruptions are applied at the start of each critical section.
    pub fn run(&mut self, request: Request, faults: &Faults) -> Result<u32, Error> {
        drive(Operation::new(request), faults, |op| {
            self.apply_corruptions(faults);
            op.step_locked(self)
        })
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
            // Bit 0 is the context manager's whether or not its ref is held.
            let skip_zero = self.version.reserves_bit_zero();
            let compared = |id: &u32| !(skip_zero && *id == 0);
            let only_in_pool: Vec<u32> = used
                .iter()
                .copied()
                .filter(compared)
                .filter(|id| !self.by_handle.contains_key(id))
                .collect();
            let only_in_tree: Vec<u32> = self
                .by_handle
                .keys()
                .copied()
                .filter(compared)
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
    /// The empty table of a new process, for the flavour's
    /// [default version](Flavour::DEFAULT_VERSION).
    pub fn new() -> Self {
        HandleTable {
            refs: NodeRefs::new(),
            faults: Faults::default(),
        }
    }

    /// The empty table of a new process, for `version`.
    ///
    /// # Panics
    ///
    /// If the flavour cannot run that version ([`Flavour::supports`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use idpool::{DBitmap, HandleTable, Version};
    ///
    /// let mut june = HandleTable::<DBitmap>::with_version(Version::C2024_06);
    /// assert_eq!(june.insert_or_update_handle(5, false), Ok(1));
    /// assert_eq!(june.refs().version(), Version::C2024_06);
    /// ```
    pub fn with_version(version: Version) -> Self {
        HandleTable {
            refs: NodeRefs::with_version(version),
            faults: Faults::default(),
        }
    }

    /// The table of a process that already holds one reference to each
    /// `(handle, node)` pair (see [`NodeRefs::from_handles`]).
    ///
    /// # Errors
    ///
    /// As [`NodeRefs::from_handles`].
    pub fn from_handles(
        version: Version,
        handles: impl IntoIterator<Item = (u32, NodeId)>,
    ) -> Result<Self, BuildError> {
        Ok(HandleTable {
            refs: NodeRefs::from_handles(version, handles)?,
            faults: Faults::default(),
        })
    }

    /// Takes the warnings logged so far (see [`NodeRefs::drain_warnings`]).
    pub fn drain_warnings(&mut self) -> Vec<Warning> {
        self.refs.drain_warnings()
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
    /// The empty table of a new process, for the flavour's
    /// [default version](Flavour::DEFAULT_VERSION).
    pub fn new() -> Self {
        SharedHandleTable {
            refs: Mutex::new(NodeRefs::new()),
            faults: Faults::default(),
        }
    }

    /// The empty table of a new process, for `version`.
    ///
    /// # Panics
    ///
    /// If the flavour cannot run that version ([`Flavour::supports`]).
    pub fn with_version(version: Version) -> Self {
        SharedHandleTable {
            refs: Mutex::new(NodeRefs::with_version(version)),
            faults: Faults::default(),
        }
    }

    /// The shared table of a process that already holds one reference to
    /// each `(handle, node)` pair (see [`NodeRefs::from_handles`]).
    ///
    /// # Errors
    ///
    /// As [`NodeRefs::from_handles`].
    pub fn from_handles(
        version: Version,
        handles: impl IntoIterator<Item = (u32, NodeId)>,
    ) -> Result<Self, BuildError> {
        Ok(SharedHandleTable {
            refs: Mutex::new(NodeRefs::from_handles(version, handles)?),
            faults: Faults::default(),
        })
    }

    /// Takes the warnings logged so far, under the lock.
    pub fn drain_warnings(&self) -> Vec<Warning> {
        self.with_refs(NodeRefs::drain_warnings)
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
    /// Planned corruptions are applied at the start of each critical section.
    pub fn run(&self, request: Request) -> Result<u32, Error> {
        drive(Operation::new(request), &self.faults, |op| {
            self.with_refs(|refs| {
                refs.apply_corruptions(&self.faults);
                op.step_locked(refs)
            })
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
