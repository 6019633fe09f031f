//! Binder's handle operations as explicit step machines, in the Rust
//! driver's protocol and in the C driver's.

use super::{Error, Flavour, NodeId, NodeRefs, RefInfo, Warning};
use crate::alloc::{AllocSite, Gfp};
use crate::version::{Driver, MismatchReaction};

/// A handle-table operation, as a caller asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// `insert_or_update_handle` (Rust) / `binder_inc_ref_for_node` (C): a
    /// reference to `node`, new or existing. The context manager's node
    /// (`is_manager`) may get id 0; nobody else may.
    ///
    /// `is_manager` is asked per insert, so the context manager can change:
    /// insert the old manager's node with `is_manager`, keep its refs, then
    /// insert a different node with `is_manager` (what happens when the
    /// manager dies and another process takes its place). A node that
    /// already has a handle keeps it, whatever `is_manager` says.
    Insert {
        /// The node referenced.
        node: NodeId,
        /// Whether the node is the context manager's (C compares it with
        /// `context->binder_context_mgr_node`).
        is_manager: bool,
    },
    /// One more reference through an existing handle.
    Increment(u32),
    /// One reference less; the last one removes the handle, releases its id
    /// and shrinks the pool if the policy says so.
    Decrement(u32),
}

/// How an insert decides whether its node is the context manager's, which
/// lets it take id 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Manager {
    /// The caller decided once, when it asked (the Rust driver:
    /// `insert_or_update_handle(node_ref, is_manager)`).
    Is(bool),
    /// Asked again at every pick, of the context as it is then
    /// ([`NodeRefs::context_manager`]): the C driver's
    /// `get_ref_desc_olocked` compares the node with
    /// `proc->context->binder_context_mgr_node` each time it runs, so a
    /// manager that changed while the lock was dropped changes the answer.
    Current,
}

/// What the next step of an [`Operation`] needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// One critical section: call [`Operation::step_locked`] with the lock held.
    Locked,
    /// One allocation, without the lock: call [`Operation::step_unlocked`].
    Unlocked,
    /// The operation has finished with this outcome.
    Done(Result<u32, Error>),
}

#[derive(Debug)]
enum State<F: Flavour> {
    /// Locked: look the node up, or the handle.
    Start,
    /// Unlocked: allocate the new reference's memory.
    AllocRef,
    /// Locked: pick the id and insert (or find the pool full).
    Pick,
    /// Unlocked: allocate a bigger map.
    GrowAlloc(F::Request),
    /// Locked: commit the grow, then pick again.
    GrowCommit(F::Resizer),
    /// Locked, C only: `try_shrink_dmap`'s own critical section, which asks
    /// `dbitmap_shrink_nbits`.
    ShrinkRequest,
    /// Unlocked: allocate a smaller map.
    ShrinkAlloc(F::Request),
    /// Locked: commit the shrink.
    ShrinkCommit(F::Resizer),
    Done(Result<u32, Error>),
}

/// One handle-table operation, run one step at a time.
///
/// Each step is either one critical section ([`Next::Locked`]) or one
/// allocation made without the lock ([`Next::Unlocked`]). The protocol of
/// `insert_or_update_handle` and of the last `update_ref` lives here and only
/// here: [`HandleTable`](crate::HandleTable) runs the steps back to back,
/// [`SharedHandleTable`](crate::SharedHandleTable) runs them on real threads
/// with a real mutex, and a scheduler may interleave the steps of several
/// operations in any order it likes.
///
/// The protocol is the driver's of the [`Version`](crate::Version) the
/// [`NodeRefs`] were built for, read at each step. Both drivers share the
/// step names ([`Operation::phase`]) and the allocation sites, so a
/// scheduler interleaves either the same way.
///
/// # The Rust driver (`drivers/android/binder/process.rs`)
///
/// An insert goes `start` (locked: `by_node` lookup) `-> alloc-ref`
/// (unlocked: the new ref's memory) `-> pick` (locked: `find_unused_id`;
/// on a pool/`by_handle` mismatch, the version's [`MismatchReaction`];
/// then `by_node` again, the dead-process check, insert and `acquire`), with
/// `-> grow-alloc -> grow-commit` (locked, then picks again) while the pool
/// is full. The last decrement goes `start` (locked: remove, `release_id`,
/// `shrink_request`), then `-> shrink-alloc -> shrink-commit` when a shrink
/// is asked for.
///
/// # The C driver (`drivers/android/binder.c`, mainline and its history)
///
/// The steps have the same names, and what they do is C's:
///
/// - `start`: `binder_inc_ref_for_node` takes the proc lock and calls
///   `binder_get_ref_for_node_olocked(proc, node, NULL)`, which only looks
///   the node up in `refs_by_node`: found, take a ref, done.
/// - `alloc-ref`: not found, so it unlocks and `kzalloc`s the new ref
///   (failure: `-ENOMEM`, nothing changed).
/// - `pick`: it locks again and calls `binder_get_ref_for_node_olocked`
///   with the new ref. That function starts (`retry:`) with the
///   `refs_by_node` lookup, **before** any descriptor is chosen: another
///   thread may have inserted the node meanwhile (the caller then frees the
///   unused new ref). Then `get_ref_desc_olocked`: offset 0 for the context
///   manager's node, 1 otherwise (as first merged: descriptor 0 for the
///   manager's node outright, the first zero bit for everyone else); a
///   disabled map means `slow_desc_lookup_olocked` from the offset; else
///   `dbitmap_acquire_next_zero_bit`, which **sets** the bit at once. The
///   descriptor is then inserted in both trees; finding it already in
///   `refs_by_desc` is a `BUG()`: [`Error::KernelBug`]. There is no
///   dead-process check on this path (nothing in it reads
///   `proc->is_dead`): a dead process's table still takes new refs.
/// - `grow-alloc`: the map was full (`-ENOSPC`): `dbitmap_grow_nbits` was
///   computed under the lock, which is dropped to `bitmap_zalloc` it; a
///   failed allocation is not an error here, it reaches the commit as NULL.
/// - `grow-commit`: lock, `dbitmap_grow`, `-EAGAIN`, and the same critical
///   section goes back to `retry:` (the `refs_by_node` lookup, then a new
///   descriptor).
///
/// The last decrement (`binder_update_ref_for_handle`) has three critical
/// sections: `start` drops the ref and, on the last one,
/// `binder_cleanup_ref_olocked` clears the bit (`dbitmap_clear_bit`) and
/// erases the ref from both trees; the lock is dropped and the ref freed
/// (`binder_free_ref`); `shrink-request` is `try_shrink_dmap` taking the
/// lock again to ask `dbitmap_shrink_nbits`, so the shrink decision sees
/// whatever other threads did in between; then `shrink-alloc` (unlocked)
/// and `shrink-commit` (`dbitmap_shrink`, in a third critical section).
///
/// When `BUG()` fires, the operation ends with [`Error::KernelBug`] and the
/// table is left as the C code left it: the bit that
/// `dbitmap_acquire_next_zero_bit` set stays set, and the new ref is in
/// neither tree here (C had already linked it into `refs_by_node`; the
/// machine is gone either way).
///
/// # Invariants
///
/// Every locked step leaves the [`NodeRefs`] invariants intact (see
/// [`NodeRefs::check_invariants`]); an unlocked step touches no shared state.
///
/// # Examples
///
/// ```
/// use idpool::{IdPool, Gfp, Next, NodeRefs, Operation, Request};
///
/// let mut refs = NodeRefs::<IdPool>::new();
/// let mut op = Operation::new(Request::Insert { node: 7, is_manager: false });
/// assert_eq!(op.next(), Next::Locked);
/// op.step_locked(&mut refs); // node 7 unknown: allocate a reference
/// assert_eq!(op.next(), Next::Unlocked);
/// op.step_unlocked(Gfp::Kernel);
/// op.step_locked(&mut refs); // pick the id and insert
/// assert_eq!(op.next(), Next::Done(Ok(1)));
/// ```
#[derive(Debug)]
pub struct Operation<F: Flavour> {
    request: Request,
    state: State<F>,
    /// Whether an insert that finds its node takes one more reference on
    /// it (the table counts references), or only returns its handle (the
    /// caller counts them: see [`Operation::attach`]).
    counting: bool,
    /// How an insert decides whether its node is the manager's.
    manager: Manager,
}

impl<F: Flavour> Operation<F> {
    /// An operation that has not taken any step yet.
    pub fn new(request: Request) -> Self {
        let manager = match request {
            Request::Insert { is_manager, .. } => Manager::Is(is_manager),
            _ => Manager::Is(false),
        };
        Operation {
            request,
            state: State::Start,
            counting: true,
            manager,
        }
    }

    /// An insert that finds or creates `node`'s handle without counting
    /// references: a handle it creates has a count of 1 and one it finds
    /// keeps its count. For a caller that keeps the strong and weak counts
    /// itself (the command-level drivers of [`crate::driver`]); a
    /// [`Request::Decrement`] then removes the handle. `manager` says how
    /// the context manager's node is recognised. [`Operation::request`]
    /// reports it as a [`Request::Insert`] with the manager answer the
    /// insert starts with.
    pub fn attach(node: NodeId, manager: Manager) -> Self {
        let is_manager = matches!(manager, Manager::Is(true));
        Operation {
            request: Request::Insert { node, is_manager },
            state: State::Start,
            counting: false,
            manager,
        }
    }

    /// The request this operation serves.
    pub fn request(&self) -> Request {
        self.request
    }

    /// What the next step needs, or the outcome.
    pub fn next(&self) -> Next {
        match &self.state {
            State::Start
            | State::Pick
            | State::GrowCommit(_)
            | State::ShrinkRequest
            | State::ShrinkCommit(_) => Next::Locked,
            State::AllocRef | State::GrowAlloc(_) | State::ShrinkAlloc(_) => Next::Unlocked,
            State::Done(outcome) => Next::Done(*outcome),
        }
    }

    /// Where the next step allocates, if it is an unlocked step.
    pub fn alloc_site(&self) -> Option<AllocSite> {
        match &self.state {
            State::AllocRef => Some(AllocSite::Ref),
            State::GrowAlloc(_) => Some(AllocSite::Grow),
            State::ShrinkAlloc(_) => Some(AllocSite::Shrink),
            _ => None,
        }
    }

    /// The name of the next step, for traces: `start`, `alloc-ref`, `pick`,
    /// `grow-alloc`, `grow-commit`, `shrink-request` (C only),
    /// `shrink-alloc`, `shrink-commit` or `done`.
    pub fn phase(&self) -> &'static str {
        match &self.state {
            State::Start => "start",
            State::AllocRef => "alloc-ref",
            State::Pick => "pick",
            State::GrowAlloc(_) => "grow-alloc",
            State::GrowCommit(_) => "grow-commit",
            State::ShrinkRequest => "shrink-request",
            State::ShrinkAlloc(_) => "shrink-alloc",
            State::ShrinkCommit(_) => "shrink-commit",
            State::Done(_) => "done",
        }
    }

    /// Runs the next step, which must be a critical section: the caller holds
    /// the lock that guards `refs`.
    ///
    /// # Panics
    ///
    /// When [`Operation::next`] is not [`Next::Locked`]. A pool/`by_handle`
    /// mismatch does not panic: it is a [`Warning`] on `refs` and the
    /// version's outcome.
    pub fn step_locked(&mut self, refs: &mut NodeRefs<F>) {
        let state = std::mem::replace(&mut self.state, State::Start);
        self.state = match (self.request, state) {
            (Request::Insert { node, .. }, State::Start) => {
                match refs.absorb(node, self.counting) {
                    Some(handle) => State::Done(Ok(handle)),
                    None => State::AllocRef,
                }
            }
            (Request::Insert { node, .. }, State::Pick) => self.pick(refs, node),
            (Request::Insert { node, .. }, State::GrowCommit(resizer)) => {
                refs.pool.grow(resizer);
                self.pick(refs, node)
            }
            (Request::Increment(handle), State::Start) => match refs.by_handle.get_mut(&handle) {
                Some(info) => {
                    info.count += 1;
                    State::Done(Ok(handle))
                }
                None => State::Done(Err(Error::UnknownHandle(handle))),
            },
            (Request::Decrement(handle), State::Start) => decrement(refs, handle),
            (Request::Decrement(handle), State::ShrinkRequest) => {
                match refs.pool.shrink_request() {
                    Some(request) => State::ShrinkAlloc(request),
                    None => State::Done(Ok(handle)),
                }
            }
            (Request::Decrement(handle), State::ShrinkCommit(resizer)) => {
                refs.pool.shrink(resizer);
                State::Done(Ok(handle))
            }
            (request, state) => {
                panic!("step_locked in the unlocked phase {state:?} of {request:?}")
            }
        };
    }

    /// Runs the next step, which must be an allocation made without the lock,
    /// with the given flags.
    ///
    /// # Panics
    ///
    /// When [`Operation::next`] is not [`Next::Unlocked`].
    pub fn step_unlocked(&mut self, gfp: Gfp) {
        let state = std::mem::replace(&mut self.state, State::Start);
        self.state = match state {
            State::AllocRef => match gfp {
                Gfp::Kernel => State::Pick,
                Gfp::Fail => State::Done(Err(Error::NoMemory)),
            },
            State::GrowAlloc(request) => match F::realloc(&request, gfp) {
                Ok(resizer) => State::GrowCommit(resizer),
                Err(_) => State::Done(Err(Error::NoMemory)),
            },
            // A failed shrink allocation is ignored: the pool keeps its size.
            State::ShrinkAlloc(request) => match F::realloc(&request, gfp) {
                Ok(resizer) => State::ShrinkCommit(resizer),
                Err(_) => State::Done(Ok(self.handle_of_decrement())),
            },
            state => panic!(
                "step_unlocked in the locked phase {state:?} of {:?}",
                self.request
            ),
        };
    }

    fn handle_of_decrement(&self) -> u32 {
        match self.request {
            Request::Decrement(handle) => handle,
            other => unreachable!("only a decrement shrinks, not {other:?}"),
        }
    }
}

impl<F: Flavour> Operation<F> {
    /// The critical section that picks an id for `node` and inserts it, or
    /// asks to grow the pool first, in the protocol of the table's driver.
    fn pick(&self, refs: &mut NodeRefs<F>, node: NodeId) -> State<F> {
        let is_manager = match self.manager {
            Manager::Is(is_manager) => is_manager,
            Manager::Current => refs.context_manager == Some(node),
        };
        match refs.version.driver() {
            Driver::Rust => pick_rust(refs, node, is_manager, self.counting),
            Driver::C => pick_c(refs, node, is_manager, self.counting),
        }
    }
}

/// `insert_or_update_handle` after relocking: the pool first, `by_node`
/// after.
fn pick_rust<F: Flavour>(
    refs: &mut NodeRefs<F>,
    node: NodeId,
    is_manager: bool,
    counting: bool,
) -> State<F> {
    // Id 0 is the context manager's alone.
    let start = if is_manager { 0 } else { 1 };
    let id = loop {
        let Some(id) = refs.pool.find_unused(start, &refs.by_handle) else {
            return grow_or_enomem(refs);
        };
        if !refs.by_handle.contains_key(&id) {
            break id;
        }
        // The pool says the id is free, the tree says it is taken. Both
        // versions log and acquire the id so that it is not offered again.
        refs.pool.acquire(id);
        match refs.version.on_mismatch() {
            MismatchReaction::AcquireAndContinue => {
                refs.warn(Warning::Mismatch { id, warn_on: false });
            }
            MismatchReaction::WarnEinval => {
                refs.warn(Warning::Mismatch { id, warn_on: true });
                return State::Done(Err(Error::Mismatch { id }));
            }
            // Not a Rust reaction; kept total for a version table that
            // might pair them one day.
            MismatchReaction::Bug => return State::Done(Err(Error::KernelBug { id })),
        }
    };
    // The node may have been inserted while the lock was dropped.
    if let Some(handle) = refs.absorb(node, counting) {
        return State::Done(Ok(handle));
    }
    if refs.dead && refs.version.insert_checks_dead() {
        return State::Done(Err(Error::DeadProcess));
    }
    refs.by_node.insert(node, id);
    refs.by_handle.insert(id, RefInfo { node, count: 1 });
    refs.pool.acquire(id);
    State::Done(Ok(id))
}

/// `binder_get_ref_for_node_olocked` with a new ref, from `retry:`:
/// `refs_by_node` first, then `get_ref_desc_olocked`, then both trees.
fn pick_c<F: Flavour>(
    refs: &mut NodeRefs<F>,
    node: NodeId,
    is_manager: bool,
    counting: bool,
) -> State<F> {
    if let Some(handle) = refs.absorb(node, counting) {
        return State::Done(Ok(handle));
    }
    let version = refs.version;
    let id = if is_manager && version.manager_always_gets_zero() {
        // As first merged: "0 is reserved for the context manager", given
        // without looking at the map or the tree.
        0
    } else {
        let offset = if version.reserves_bit_zero() {
            // `dbitmap_acquire_first_zero_bit` searches the map from 0 (bit 0
            // is set at init); `slow_desc_lookup_olocked` starts at 1.
            let bitmap_in_use = refs.pool.capacity() > 0;
            if bitmap_in_use {
                0
            } else {
                1
            }
        } else if is_manager {
            0
        } else {
            1
        };
        let Some(id) = refs.pool.find_unused(offset, &refs.by_handle) else {
            // -ENOSPC: grow, then -EAGAIN back to `retry:`.
            return grow_or_enomem(refs);
        };
        // `dbitmap_acquire_next_zero_bit` sets the bit as it finds it (a no-op
        // on the slow path).
        refs.pool.acquire(id);
        id
    };
    if refs.by_handle.contains_key(&id) {
        // The walk of `refs_by_desc` meets the descriptor: BUG().
        return State::Done(Err(Error::KernelBug { id }));
    }
    refs.by_node.insert(node, id);
    refs.by_handle.insert(id, RefInfo { node, count: 1 });
    State::Done(Ok(id))
}

/// The pool is full: a grow request to allocate without the lock, or
/// `ENOMEM` when the pool cannot grow.
fn grow_or_enomem<F: Flavour>(refs: &NodeRefs<F>) -> State<F> {
    match refs.pool.grow_request() {
        Some(request) => State::GrowAlloc(request),
        None => State::Done(Err(Error::NoMemory)),
    }
}

/// The critical section of `update_ref` (Rust) or
/// `binder_update_ref_for_handle` (C) that drops one reference and, on the
/// last one, removes the handle and releases its id (C:
/// `binder_cleanup_ref_olocked`). Rust asks whether to shrink in the same
/// section; C asks in a section of its own (`try_shrink_dmap`).
fn decrement<F: Flavour>(refs: &mut NodeRefs<F>, handle: u32) -> State<F> {
    let Some(info) = refs.by_handle.get_mut(&handle) else {
        return State::Done(Err(Error::UnknownHandle(handle)));
    };
    info.count -= 1;
    if info.count > 0 {
        return State::Done(Ok(handle));
    }
    let node = info.node;
    refs.by_handle.remove(&handle);
    refs.by_node.remove(&node);
    refs.pool.release(handle);
    match refs.version.driver() {
        Driver::C => State::ShrinkRequest,
        Driver::Rust => match refs.pool.shrink_request() {
            Some(request) => State::ShrinkAlloc(request),
            None => State::Done(Ok(handle)),
        },
    }
}
