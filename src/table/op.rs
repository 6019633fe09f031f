//! Binder's handle operations as explicit step machines.

use super::{Error, Flavour, NodeId, NodeRefs, RefInfo};
use crate::alloc::{AllocSite, Gfp};

/// A handle-table operation, as a caller asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// `insert_or_update_handle`: a reference to `node`, new or existing.
    /// The context manager (`is_manager`) may get id 0; nobody else may.
    Insert {
        /// The node referenced.
        node: NodeId,
        /// Whether the caller is the context manager.
        is_manager: bool,
    },
    /// One more reference through an existing handle.
    Increment(u32),
    /// One reference less; the last one removes the handle, releases its id
    /// and shrinks the pool if the policy says so.
    Decrement(u32),
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
/// An insert goes `Start (locked) -> AllocRef -> Pick (locked)`, with
/// `-> GrowAlloc -> GrowCommit (locked)` repeated while the pool is full.
/// The last decrement goes `Start (locked)`, then `-> ShrinkAlloc ->
/// ShrinkCommit (locked)` when the policy asks for a shrink.
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
}

impl<F: Flavour> Operation<F> {
    /// An operation that has not taken any step yet.
    pub fn new(request: Request) -> Self {
        Operation {
            request,
            state: State::Start,
        }
    }

    /// The request this operation serves.
    pub fn request(&self) -> Request {
        self.request
    }

    /// What the next step needs, or the outcome.
    pub fn next(&self) -> Next {
        match &self.state {
            State::Start | State::Pick | State::GrowCommit(_) | State::ShrinkCommit(_) => {
                Next::Locked
            }
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
    /// `grow-alloc`, `grow-commit`, `shrink-alloc`, `shrink-commit` or `done`.
    pub fn phase(&self) -> &'static str {
        match &self.state {
            State::Start => "start",
            State::AllocRef => "alloc-ref",
            State::Pick => "pick",
            State::GrowAlloc(_) => "grow-alloc",
            State::GrowCommit(_) => "grow-commit",
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
    /// When [`Operation::next`] is not [`Next::Locked`]; in debug builds, when
    /// the pool and `by_handle` disagree (see [`Error::Mismatch`]).
    pub fn step_locked(&mut self, refs: &mut NodeRefs<F>) {
        let state = std::mem::replace(&mut self.state, State::Start);
        self.state = match (self.request, state) {
            (Request::Insert { node, .. }, State::Start) => match refs.absorb(node) {
                Some(handle) => State::Done(Ok(handle)),
                None => State::AllocRef,
            },
            (Request::Insert { node, is_manager }, State::Pick) => pick(refs, node, is_manager),
            (Request::Insert { node, is_manager }, State::GrowCommit(resizer)) => {
                refs.pool.grow(resizer);
                pick(refs, node, is_manager)
            }
            (Request::Increment(handle), State::Start) => match refs.by_handle.get_mut(&handle) {
                Some(info) => {
                    info.count += 1;
                    State::Done(Ok(handle))
                }
                None => State::Done(Err(Error::UnknownHandle(handle))),
            },
            (Request::Decrement(handle), State::Start) => decrement(refs, handle),
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

/// The critical section that picks an id for `node` and inserts it, or asks
/// to grow the pool first.
fn pick<F: Flavour>(refs: &mut NodeRefs<F>, node: NodeId, is_manager: bool) -> State<F> {
    // Id 0 is the context manager's alone.
    let start = if is_manager { 0 } else { 1 };
    let Some(id) = refs.pool.find_unused(start, &refs.by_handle) else {
        return match refs.pool.grow_request() {
            Some(request) => State::GrowAlloc(request),
            None => State::Done(Err(Error::NoMemory)),
        };
    };
    if refs.by_handle.contains_key(&id) {
        // The pool says the id is free, the tree says it is taken. The kernel
        // logs, warns, acquires the id so it is not offered again and fails.
        refs.pool.acquire(id);
        debug_assert!(
            false,
            "handle table corruption: the {} pool offered id {id}, which by_handle already holds",
            F::NAME
        );
        return State::Done(Err(Error::Mismatch { id }));
    }
    // The node may have been inserted while the lock was dropped.
    if let Some(handle) = refs.absorb(node) {
        return State::Done(Ok(handle));
    }
    if refs.dead {
        return State::Done(Err(Error::DeadProcess));
    }
    refs.by_node.insert(node, id);
    refs.by_handle.insert(id, RefInfo { node, count: 1 });
    refs.pool.acquire(id);
    State::Done(Ok(id))
}

/// The critical section of `update_ref` that drops one reference and, on the
/// last one, removes the handle and asks whether to shrink.
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
    match refs.pool.shrink_request() {
        Some(request) => State::ShrinkAlloc(request),
        None => State::Done(Ok(handle)),
    }
}
