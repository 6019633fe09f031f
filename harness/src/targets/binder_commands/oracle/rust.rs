//! The Rust driver (`drivers/android/binder/`, Linux 7.3.4) as userspace
//! sees it. Line numbers are those of 7.3.4's files.
//!
//! # The model
//!
//! As for the C driver: processes hold references by handle (strong count,
//! weak count, death notification), own nodes by pointer and hold the
//! buffers they read; a node's counts are counted from what holds it
//! (`RustOracle::counts`), here as the `NodeRef`s that hold it: each
//! reference contributes at most one strong and one weak count
//! (`NodeRef::absorb`, node.rs:805; `NodeRef::update`, 858).
//!
//! # When the owner hears about its node
//!
//! As in C, the owner's read compares the node's counts with what it told
//! userspace before (`Node::do_work_locked`, node.rs:611), and every work
//! item is read by the drain, with one exception.
//! `BINDER_SET_CONTEXT_MGR` takes a strong reference on the caller's node
//! 0 through `Process::get_node` (process.rs:746), which, when the owner
//! was never told of a strong reference, queues node 0's update on the
//! caller's own thread as *deferred* work (`new_node_ref_with_thread`,
//! process.rs:277): a read skips the thread's queue until something else
//! is queued on it (`InnerThread::pop_work`, thread.rs:314), which only a
//! transaction sent by that process (its completion or error) or a
//! cleared death notification (its done) does. Until then node 0's update
//! is pending, so no other update of node 0 is queued
//! (`DeliveryState::should_normal_push`): the owner is told nothing about
//! node 0, and node 0 stays in its tree even with nothing left. When the
//! call fails (`EBUSY`, `EPERM`), node 0 was created all the same.
//!
//! # Handles
//!
//! A new reference gets the smallest free handle at or above a start, 0
//! only for `BC_INCREFS`/`BC_ACQUIRE` of handle 0 (which name the
//! manager's node, `Process::update_ref`, process.rs:972) and 1 for every
//! other insert, a handle or node carried by a transaction included, the
//! manager's node or not (`transfer_binder_object`, allocation.rs:400,
//! asks with `is_manager = false`). The handle pool holds 64 handles and
//! doubles when no handle at or above the start is free below its size;
//! the bigger pool is an allocation, and when it fails the insert fails
//! with `ENOMEM` (`Process::insert_or_update_handle`, process.rs:831).
//!
//! `rust-v1` and `rust-mainline` differ only in what an insert does when
//! the pool and the handle tree disagree, which they never do here: the
//! model is the same for both.

use super::{lowest_free, FailOnce, Oracle};
use idpool::driver::{
    Br, Command, Errno, Log, NodeName, NodeState, Object, Observed, Pid, ProcState, Received,
    RefCmd, RefState, Ret, Snapshot, Step,
};
use idpool::{AllocSite, Version};
use std::collections::{BTreeMap, VecDeque};

/// A node, by its index in [`RustOracle::nodes`] (never reused).
type NodeId = usize;

/// The handle pool's size before it grows (`IdPool::new`, an inline
/// bitmap of one word).
const INLINE_HANDLES: u32 = 64;

/// The Rust driver's naive model.
#[derive(Clone, Debug)]
pub struct RustOracle {
    procs: Vec<Proc>,
    /// Every node ever created.
    nodes: Vec<Node>,
    /// The context's manager node (`Manager::node`, context.rs).
    manager: Option<NodeId>,
    /// `Manager::uid`: set by each manager, kept after it dies.
    manager_euid: Option<u32>,
}

#[derive(Clone, Debug)]
struct Proc {
    euid: u32,
    alive: bool,
    /// `ProcessInner::is_manager`: this process became the manager.
    is_manager: bool,
    /// `by_handle`.
    refs: BTreeMap<u32, Ref>,
    /// The process's nodes, by pointer.
    tree: BTreeMap<u64, NodeId>,
    /// How many nodes were created per pointer.
    created: BTreeMap<u64, u32>,
    /// The handle pool's size (`handle_is_present`).
    pool: u32,
    /// Transactions read and not freed, oldest first.
    buffers: VecDeque<Txn>,
    /// What the next drain reads, besides node updates.
    inbox: Vec<Br>,
    /// Something was queued on the thread during the command, so the
    /// drain reads its deferred work too.
    thread_woken: bool,
}

#[derive(Clone, Copy, Debug)]
struct Ref {
    node: NodeId,
    strong: u32,
    weak: u32,
    death: Option<u64>,
}

#[derive(Clone, Debug)]
struct Node {
    owner: usize,
    ptr: u64,
    serial: u32,
    /// `strong.has_count`, `weak.has_count`: what the owner was told.
    told_strong: bool,
    told_weak: bool,
    /// Its update waits, deferred, on its owner's thread (see the module
    /// documentation).
    deferred: bool,
    /// `has_oneway_transaction`.
    oneway_busy: bool,
    /// `oneway_todo`.
    waiting: VecDeque<Txn>,
    /// Counts its dead owner never gave back (see [`RustOracle::exit`]).
    leaked_strong: u32,
    leaked_weak: u32,
}

/// A one-way transaction as its receiver holds it.
#[derive(Clone, Debug)]
struct Txn {
    target: NodeId,
    objects: Vec<Carried>,
}

/// An object of a transaction, translated for its receiver.
#[derive(Clone, Copy, Debug)]
enum Carried {
    Handle { handle: u32, strong: bool },
    Node { node: NodeId, strong: bool },
}

impl Oracle for RustOracle {
    fn new(euids: &[u32], _version: Version) -> Self {
        let procs = euids
            .iter()
            .map(|&euid| Proc {
                euid,
                alive: true,
                is_manager: false,
                refs: BTreeMap::new(),
                tree: BTreeMap::new(),
                created: BTreeMap::new(),
                pool: INLINE_HANDLES,
                buffers: VecDeque::new(),
                inbox: Vec::new(),
                thread_woken: false,
            })
            .collect();
        RustOracle {
            procs,
            nodes: Vec::new(),
            manager: None,
            manager_euid: None,
        }
    }

    fn step(&mut self, step: &Step, fail: Option<AllocSite>) -> Observed {
        let mut obs = Observed::new(self.procs.len());
        let p = step.pid.index();
        if !self.procs[p].alive {
            obs.ret = Some(Ret::Skipped);
            return obs;
        }
        let mut fail = FailOnce::new(fail);
        let log = &mut obs.log;
        let ret = match &step.command {
            Command::SetManager => self.set_manager(p, log),
            Command::Ref(cmd, handle) => self.ref_command(p, *cmd, *handle, &mut fail, log),
            Command::Send { to, objects } => {
                self.send(p, *to, objects, &mut fail, log);
                Ret::Ok
            }
            Command::Free => self.free(p, &mut fail, log),
            Command::RequestDeath { handle, cookie } => {
                self.request_death(p, *handle, *cookie, log);
                Ret::Ok
            }
            Command::ClearDeath { handle, cookie } => {
                self.clear_death(p, *handle, *cookie, log);
                Ret::Ok
            }
            Command::NodeInfo(handle) => self.node_info(p, *handle),
            Command::Exit => {
                self.exit(p, &mut fail, log);
                Ret::Ok
            }
        };
        if let (Command::Ref(..), Ret::Err(e)) = (&step.command, ret) {
            // A failed BINDER_WRITE_READ is logged ("Write failure",
            // thread.rs:1646); the other ioctls fail silently.
            obs.log.push(Log::IoctlFailed(e));
        }
        obs.ret = Some(ret);
        self.drain(&mut obs);
        obs.normalise();
        obs
    }

    fn snapshot(&self) -> Snapshot {
        let procs = self
            .procs
            .iter()
            .map(|proc| ProcState {
                alive: proc.alive,
                refs: proc
                    .refs
                    .iter()
                    .map(|(&handle, r)| {
                        let state = RefState {
                            node: self.name(r.node),
                            strong: r.strong,
                            weak: r.weak,
                            death: r.death,
                        };
                        (handle, state)
                    })
                    .collect(),
                nodes: proc
                    .tree
                    .iter()
                    .map(|(&ptr, &n)| {
                        let (strong, weak) = self.counts(n);
                        let node = &self.nodes[n];
                        let state = NodeState {
                            serial: node.serial,
                            strong,
                            weak,
                            has_strong: node.told_strong,
                            has_weak: node.told_weak,
                        };
                        (ptr, state)
                    })
                    .collect(),
                buffers: proc.buffers.len(),
            })
            .collect();
        Snapshot { procs }
    }
}

impl RustOracle {
    fn name(&self, n: NodeId) -> NodeName {
        let node = &self.nodes[n];
        NodeName {
            owner: Pid(node.owner as u8),
            ptr: node.ptr,
            serial: node.serial,
        }
    }

    fn owner_alive(&self, n: NodeId) -> bool {
        self.procs[self.nodes[n].owner].alive
    }

    /// A node's strong and weak counts, which `BINDER_GET_NODE_INFO_FOR_REF`
    /// reports as they are (`Node::populate_counts`, node.rs:492), counted
    /// from what holds them:
    ///
    /// - one strong count when it is the context's manager node (the
    ///   context keeps a strong `NodeRef`, `Context::set_manager_node`);
    /// - per reference: one strong count if its strong count is not 0, one
    ///   weak count if its weak count is not 0;
    /// - while the owner lives, one strong count per one-way transaction to
    ///   the node whose buffer is not freed, waiting or read (the
    ///   allocation keeps the target's `NodeRef`, `Transaction::new`), and
    ///   one of either per object of those buffers that is the node itself,
    ///   translated back for its owner (`transfer_binder_object`,
    ///   allocation.rs:392, undone by `Process::update_node` on free);
    /// - what its owner's death leaked ([`RustOracle::exit`]).
    fn counts(&self, n: NodeId) -> (u32, u32) {
        let node = &self.nodes[n];
        let mut strong = u32::from(self.manager == Some(n)) + node.leaked_strong;
        let mut weak = node.leaked_weak;
        for r in self.procs.iter().flat_map(|p| p.refs.values()) {
            if r.node == n {
                strong += u32::from(r.strong > 0);
                weak += u32::from(r.weak > 0);
            }
        }
        if self.owner_alive(n) {
            let waiting = self
                .nodes
                .iter()
                .filter(|m| m.owner == node.owner)
                .flat_map(|m| m.waiting.iter());
            for txn in self.procs[node.owner].buffers.iter().chain(waiting) {
                strong += u32::from(txn.target == n);
                for object in &txn.objects {
                    match *object {
                        Carried::Node {
                            node: m,
                            strong: true,
                        } if m == n => strong += 1,
                        Carried::Node {
                            node: m,
                            strong: false,
                        } if m == n => weak += 1,
                        _ => {}
                    }
                }
            }
        }
        (strong, weak)
    }

    /// The node `ptr` of process `p`, created if its tree has none
    /// (`Process::get_node_inner`, process.rs:773).
    fn node_for(&mut self, p: usize, ptr: u64) -> NodeId {
        if let Some(&n) = self.procs[p].tree.get(&ptr) {
            return n;
        }
        let created = self.procs[p].created.entry(ptr).or_insert(0);
        let serial = *created;
        *created += 1;
        self.nodes.push(Node {
            owner: p,
            ptr,
            serial,
            told_strong: false,
            told_weak: false,
            deferred: false,
            oneway_busy: false,
            waiting: VecDeque::new(),
            leaked_strong: 0,
            leaked_weak: 0,
        });
        let n = self.nodes.len() - 1;
        self.procs[p].tree.insert(ptr, n);
        n
    }

    /// `Process::insert_or_update_handle` (process.rs:831): one more on
    /// `p`'s reference to `n` if it has one; else a new reference, whose
    /// memory is allocated first (`ENOMEM`), at the smallest free handle at
    /// or above `start`, growing the pool (`ENOMEM` when that fails) while
    /// no such handle is below its size; a dead process takes no new
    /// reference (`ESRCH`).
    fn insert(
        &mut self,
        p: usize,
        n: NodeId,
        strong: bool,
        start: u32,
        fail: &mut FailOnce,
    ) -> Result<u32, Errno> {
        let proc = &mut self.procs[p];
        if let Some((&handle, r)) = proc.refs.iter_mut().find(|(_, r)| r.node == n) {
            *(if strong { &mut r.strong } else { &mut r.weak }) += 1;
            return Ok(handle);
        }
        if !fail.alloc(AllocSite::Ref) {
            return Err(Errno::NoMem);
        }
        let handle = loop {
            let handle = lowest_free(&proc.refs, start);
            if handle < proc.pool {
                break handle;
            }
            if !fail.alloc(AllocSite::Grow) {
                return Err(Errno::NoMem);
            }
            proc.pool *= 2;
        };
        if !proc.alive {
            return Err(Errno::Srch);
        }
        let r = Ref {
            node: n,
            strong: u32::from(strong),
            weak: u32::from(!strong),
            death: None,
        };
        proc.refs.insert(handle, r);
        Ok(handle)
    }

    /// `Process::update_ref` (process.rs:961) for any handle but the
    /// manager case of handle 0, and `NodeRef::update` (node.rs:858): a
    /// strong change of a reference with no strong count does nothing,
    /// silently; a decrement of a zero weak count is logged (885). A
    /// missing handle is logged (1024), unless the process is dead. The
    /// reference goes when both counts reach 0, and the pool may shrink:
    /// a pool of more than 64 handles whose last handle is below a quarter
    /// of it halves, an empty one goes back to 64 (`IdPool::shrink_request`);
    /// the smaller pool is an allocation only above 64 handles, and when it
    /// fails nothing changes.
    fn update_ref(
        &mut self,
        p: usize,
        handle: u32,
        increment: bool,
        strong: bool,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        let proc = &mut self.procs[p];
        let Some(r) = proc.refs.get_mut(&handle) else {
            if proc.alive {
                log.push(Log::InvalidRef(handle));
            }
            return;
        };
        if strong && r.strong == 0 {
            return;
        }
        let count = if strong { &mut r.strong } else { &mut r.weak };
        if increment {
            *count += 1;
            return;
        }
        if *count == 0 {
            log.push(Log::InvalidDecrement { strong });
            return;
        }
        *count -= 1;
        if r.strong > 0 || r.weak > 0 {
            return;
        }
        proc.refs.remove(&handle);
        if proc.pool <= INLINE_HANDLES {
            return;
        }
        let target = match proc.refs.keys().next_back() {
            None => INLINE_HANDLES,
            Some(&last) if 4 * (last + 1) <= proc.pool => (proc.pool / 2).max(INLINE_HANDLES),
            Some(_) => return,
        };
        if target <= INLINE_HANDLES || fail.alloc(AllocSite::Shrink) {
            proc.pool = target;
        }
    }

    /// `BINDER_SET_CONTEXT_MGR` (`Process::set_as_manager`, process.rs:746):
    /// first a strong reference on node 0, created if missing, whose
    /// update waits deferred when the owner was never told of a strong
    /// reference (module documentation); then
    /// `Context::set_manager_node` (context.rs:110) refuses a second
    /// manager (`EBUSY`, logged) or another euid than the previous
    /// manager's (`EPERM`, silently); on success node 0 counts as told of
    /// both kinds of reference (`Node::force_has_count`).
    fn set_manager(&mut self, p: usize, log: &mut Vec<Log>) -> Ret {
        let n = self.node_for(p, 0);
        if !self.nodes[n].told_strong {
            self.nodes[n].deferred = true;
        }
        if self.manager.is_some() {
            log.push(Log::ManagerAlreadySet);
            return Ret::Err(Errno::Busy);
        }
        let euid = self.procs[p].euid;
        if self.manager_euid.is_some_and(|first| first != euid) {
            return Ret::Err(Errno::Perm);
        }
        self.manager = Some(n);
        self.manager_euid = Some(euid);
        self.procs[p].is_manager = true;
        self.nodes[n].told_strong = true;
        self.nodes[n].told_weak = true;
        Ret::Ok
    }

    /// `BC_INCREFS`, `BC_ACQUIRE`, `BC_RELEASE`, `BC_DECREFS`
    /// (`Thread::write`, `Process::update_ref`). An increment of handle 0
    /// while a manager is set goes to the manager's node: `EINVAL` from the
    /// manager itself (silent); for anyone else an insert from handle 0
    /// whose failure is ignored, so the command returns 0 either way. An
    /// increment of handle 0 with no manager, and every other command, is
    /// [`RustOracle::update_ref`] on that handle, and returns 0.
    fn ref_command(
        &mut self,
        p: usize,
        cmd: RefCmd,
        handle: u32,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Ret {
        let (strong, increment) = (cmd.strong(), cmd.increment());
        if increment && handle == 0 {
            if let Some(m) = self.manager {
                if self.nodes[m].owner == p {
                    return Ret::Err(Errno::Inval);
                }
                let _ = self.insert(p, m, strong, 0, fail);
                return Ret::Ok;
            }
        }
        self.update_ref(p, handle, increment, strong, fail, log);
        Ret::Ok
    }

    /// A one-way `BC_TRANSACTION` (`Thread::transaction`, thread.rs:1298;
    /// `oneway_transaction_inner`, 1457). Every failure is read by the
    /// sender as `BR_FAILED_REPLY` (logged with the driver's summary line,
    /// 1326) or `BR_DEAD_REPLY` (no summary: it carries no errno); the
    /// ioctl returns 0, and the sender's thread has work either way.
    ///
    /// The target (`Process::get_transaction_node`, process.rs:924):
    /// handle 0 is the manager's node (`BR_DEAD_REPLY` without one,
    /// `BR_FAILED_REPLY` when the sender is the manager); another handle
    /// needs a strong reference (else logged, `BR_FAILED_REPLY`). A target
    /// whose owner is dead has no buffer to receive into
    /// (`Process::buffer_alloc`): logged (`pr_warn!`, thread.rs:1055),
    /// `BR_DEAD_REPLY`.
    ///
    /// The objects, in order (`Thread::translate_object`, thread.rs:703):
    /// a node of the sender's, created if missing, or a handle of the
    /// sender's (which must exist, strong for a strong object: only a
    /// weak-only one is logged) becomes the node itself for its owner, else
    /// a handle ([`RustOracle::insert`] from 1). At the first failure,
    /// logged twice (thread.rs:1120, transaction.rs:179), the objects
    /// before it are undone as a freed buffer would (`Allocation::drop`).
    fn send(
        &mut self,
        p: usize,
        to: u32,
        objects: &[Object],
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        self.procs[p].thread_woken = true;
        let target = if to == 0 {
            match self.manager {
                None => return self.procs[p].inbox.push(Br::DeadReply),
                Some(m) if self.nodes[m].owner == p => return self.fail_send(p, log),
                Some(m) => m,
            }
        } else {
            match self.procs[p].refs.get(&to).copied() {
                Some(r) if r.strong > 0 => r.node,
                found => {
                    if found.is_some() {
                        log.push(Log::WeakAsStrong);
                    }
                    log.push(Log::TransactionToInvalidHandle(to));
                    return self.fail_send(p, log);
                }
            }
        };
        let receiver = self.nodes[target].owner;
        if !self.procs[receiver].alive {
            log.push(Log::BufferAllocFailed);
            return self.procs[p].inbox.push(Br::DeadReply);
        }
        let mut carried = Vec::new();
        for object in objects.iter().flat_map(Object::expand) {
            match self.translate(p, receiver, object, fail, log) {
                Some(c) => carried.push(c),
                None => {
                    log.extend([Log::TranslateFailed, Log::CopyFailed]);
                    self.release_objects(receiver, &carried, fail, log);
                    return self.fail_send(p, log);
                }
            }
        }
        let txn = Txn {
            target,
            objects: carried,
        };
        let node = &mut self.nodes[target];
        if node.oneway_busy {
            node.waiting.push_back(txn);
        } else {
            node.oneway_busy = true;
            self.deliver(receiver, txn);
        }
        self.procs[p].inbox.push(Br::TransactionComplete);
    }

    fn fail_send(&mut self, p: usize, log: &mut Vec<Log>) {
        log.push(Log::TransactionFailed);
        self.procs[p].inbox.push(Br::FailedReply);
    }

    /// One object of [`RustOracle::send`]; `None` when it fails.
    fn translate(
        &mut self,
        p: usize,
        receiver: usize,
        object: Object,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Option<Carried> {
        let (n, strong) = match object {
            Object::Nodes { .. } => unreachable!("runs are expanded"),
            Object::Node { ptr, strong } => (self.node_for(p, ptr), strong),
            Object::Handle { handle, strong } => {
                let r = *self.procs[p].refs.get(&handle)?;
                if strong && r.strong == 0 {
                    log.push(Log::WeakAsStrong);
                    return None;
                }
                (r.node, strong)
            }
        };
        if self.nodes[n].owner == receiver {
            return Some(Carried::Node { node: n, strong });
        }
        let handle = self.insert(receiver, n, strong, 1, fail).ok()?;
        Some(Carried::Handle { handle, strong })
    }

    /// The transaction is queued to its receiver: the next drain reads it.
    fn deliver(&mut self, receiver: usize, txn: Txn) {
        let objects = txn
            .objects
            .iter()
            .map(|c| match *c {
                Carried::Handle { handle, strong } => Received::Handle { handle, strong },
                Carried::Node { node, strong } => Received::Node {
                    ptr: self.nodes[node].ptr,
                    strong,
                },
            })
            .collect();
        let proc = &mut self.procs[receiver];
        proc.inbox.push(Br::Transaction(objects));
        proc.buffers.push_back(txn);
    }

    /// What dropping a buffer does to its receiver's references
    /// (`AllocationView::cleanup_object`, allocation.rs:422): each handle
    /// object is a decrement of that handle now ([`RustOracle::update_ref`]);
    /// node objects and the target only held counts that go with the
    /// buffer.
    fn release_objects(
        &mut self,
        receiver: usize,
        objects: &[Carried],
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        for object in objects {
            if let Carried::Handle { handle, strong } = *object {
                self.update_ref(receiver, handle, false, strong, fail, log);
            }
        }
    }

    /// `BC_FREE_BUFFER` on the oldest buffer (`Allocation::drop`,
    /// allocation.rs:248): the next one-way transaction waiting for that
    /// node is queued (`Node::pending_oneway_finished`), then the buffer's
    /// objects are released.
    fn free(&mut self, p: usize, fail: &mut FailOnce, log: &mut Vec<Log>) -> Ret {
        let Some(txn) = self.procs[p].buffers.pop_front() else {
            return Ret::Skipped;
        };
        let node = &mut self.nodes[txn.target];
        match node.waiting.pop_front() {
            Some(next) => self.deliver(p, next),
            None => node.oneway_busy = false,
        }
        self.release_objects(p, &txn.objects, fail, log);
        Ret::Ok
    }

    /// `Process::request_death` (process.rs:1263): on a reference that
    /// exists (else logged) and has none yet (else logged); when the
    /// node's owner is already dead the notification is read at once.
    fn request_death(&mut self, p: usize, handle: u32, cookie: u64, log: &mut Vec<Log>) {
        let Some(r) = self.procs[p].refs.get_mut(&handle) else {
            log.push(Log::DeathInvalidRef { request: true });
            return;
        };
        if r.death.is_some() {
            log.push(Log::DeathAlreadySet);
            return;
        }
        r.death = Some(cookie);
        let node = r.node;
        if !self.owner_alive(node) {
            self.procs[p].inbox.push(Br::DeadBinder(cookie));
        }
    }

    /// `Process::clear_death` (process.rs:1329): the reference must exist
    /// and have a notification with this cookie (each failure logged); the
    /// done is then queued on the caller's thread.
    fn clear_death(&mut self, p: usize, handle: u32, cookie: u64, log: &mut Vec<Log>) {
        let proc = &mut self.procs[p];
        let Some(r) = proc.refs.get_mut(&handle) else {
            log.push(Log::DeathInvalidRef { request: false });
            return;
        };
        match r.death {
            None => log.push(Log::DeathNotActive),
            Some(c) if c != cookie => log.push(Log::DeathCookieMismatch),
            Some(_) => {
                r.death = None;
                proc.inbox.push(Br::ClearDeathDone(cookie));
                proc.thread_woken = true;
            }
        }
    }

    /// `Process::get_node_info_from_ref` (process.rs:1222): only a process
    /// that became the manager (`EPERM`); a missing handle is `ENOENT`; a
    /// weak-only reference reports its node's counts like any other.
    fn node_info(&self, p: usize, handle: u32) -> Ret {
        if !self.procs[p].is_manager {
            return Ret::Err(Errno::Perm);
        }
        match self.procs[p].refs.get(&handle) {
            Some(r) => {
                let (strong, weak) = self.counts(r.node);
                Ret::NodeInfo { strong, weak }
            }
            None => Ret::Err(Errno::NoEnt),
        }
    }

    /// `close()`, then `Process::deferred_release` (process.rs:1404), in
    /// its order:
    ///
    /// 1. The process is dead; the manager's node is unset if it was the
    ///    manager.
    /// 2. Its nodes leave the tree one by one, lowest pointer first
    ///    (`Node::release`, node.rs:550): the one-way transactions waiting
    ///    on each are dropped, each logged, their buffers releasing their
    ///    objects; a node object of the dying process gives its count back
    ///    only while that node is still in the tree, so an object of a
    ///    node at or below the one being released leaks its count. Every
    ///    death notification on the node is then read by its holder.
    /// 3. Its references go.
    /// 4. Its buffers go (their mapping is released last): their handle
    ///    objects find no reference, and their node objects find no tree,
    ///    so those counts leak too.
    fn exit(&mut self, p: usize, fail: &mut FailOnce, log: &mut Vec<Log>) {
        self.procs[p].alive = false;
        if self.procs[p].is_manager {
            self.manager = None;
        }
        let tree = std::mem::take(&mut self.procs[p].tree);
        for (&ptr, &n) in &tree {
            for txn in std::mem::take(&mut self.nodes[n].waiting) {
                log.push(Log::UndeliveredTransaction);
                for object in &txn.objects {
                    match *object {
                        Carried::Handle { handle, strong } => {
                            self.update_ref(p, handle, false, strong, fail, log);
                        }
                        Carried::Node { node, strong } if self.nodes[node].ptr <= ptr => {
                            self.leak(node, strong);
                        }
                        Carried::Node { .. } => {}
                    }
                }
            }
            for holder in self.procs.iter_mut() {
                for r in holder.refs.values().filter(|r| r.node == n) {
                    if let Some(cookie) = r.death {
                        holder.inbox.push(Br::DeadBinder(cookie));
                    }
                }
            }
        }
        self.procs[p].refs.clear();
        for txn in std::mem::take(&mut self.procs[p].buffers) {
            for object in &txn.objects {
                if let Carried::Node { node, strong } = *object {
                    self.leak(node, strong);
                }
            }
        }
        self.procs[p].inbox.clear();
    }

    fn leak(&mut self, n: NodeId, strong: bool) {
        let node = &mut self.nodes[n];
        *(if strong {
            &mut node.leaked_strong
        } else {
            &mut node.leaked_weak
        }) += 1;
    }

    /// After the command, each live process reads everything queued to it,
    /// and is told of each of its nodes what changed since it was last
    /// told (`Node::do_work_locked`, node.rs:611): `BR_INCREFS` when the
    /// node has any count and the owner did not know, `BR_ACQUIRE` when it
    /// has a strong count and the owner did not know, `BR_RELEASE` and
    /// `BR_DECREFS` for the reverse; a node with no count left leaves the
    /// tree (643). A node whose update waits deferred on a thread that had
    /// no other work is skipped. The answers (`BC_INCREFS_DONE`,
    /// `BC_ACQUIRE_DONE`, `BC_DEAD_BINDER_DONE`) change nothing that can
    /// be seen.
    fn drain(&mut self, obs: &mut Observed) {
        for p in 0..self.procs.len() {
            if !self.procs[p].alive {
                continue;
            }
            let mut reads = std::mem::take(&mut self.procs[p].inbox);
            let woken = std::mem::take(&mut self.procs[p].thread_woken);
            let tree: Vec<(u64, NodeId)> =
                self.procs[p].tree.iter().map(|(&k, &v)| (k, v)).collect();
            for (ptr, n) in tree {
                if self.nodes[n].deferred && !woken {
                    continue;
                }
                let (strong_count, weak_count) = self.counts(n);
                let strong = strong_count > 0;
                let weak = strong || weak_count > 0;
                let node = &mut self.nodes[n];
                node.deferred = false;
                if weak && !node.told_weak {
                    reads.push(Br::IncRefs(ptr));
                }
                if strong && !node.told_strong {
                    reads.push(Br::Acquire(ptr));
                }
                if !strong && node.told_strong {
                    reads.push(Br::Release(ptr));
                }
                if !weak && node.told_weak {
                    reads.push(Br::DecRefs(ptr));
                }
                node.told_strong = strong;
                node.told_weak = weak;
                if !weak {
                    self.procs[p].tree.remove(&ptr);
                }
            }
            obs.reads[p] = reads;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::c::COracle;
    use super::super::testing::{holds, run};
    use super::*;

    fn rust(program: &str) -> (RustOracle, Vec<String>) {
        run::<RustOracle>(Version::RustMainline, program)
    }

    /// `Process::insert_or_update_handle` (process.rs:858) starts at 0
    /// only when `Process::update_ref` asks for the manager's node on
    /// handle 0 (972); `transfer_binder_object` (allocation.rs:400) always
    /// starts at 1, for the manager's node too, so a received manager's
    /// node is never handle 0, and a later increment of handle 0 lands on
    /// that reference, silently.
    #[test]
    fn rust_insert_or_update_handle_starts_at_0_only_for_handle_0() {
        let (model, got) = rust(
            "procs 3
            p1 set-manager
            p0 send 0 node 1
            p1 send 1 node 0
            p0 increfs 0
            p2 increfs 0",
        );
        assert_eq!(
            got[2],
            "0 p0[transaction handle 1] p1[transaction-complete]"
        );
        assert_eq!(got[3], "0");
        assert_eq!(got[4], "0");
        assert_eq!(
            holds(&model.snapshot(), 0),
            "refs{1: p1:0 1/1} nodes{1: #0 2/0 sw} buffers 1"
        );
        assert_eq!(
            holds(&model.snapshot(), 2),
            "refs{0: p1:0 0/1} nodes{} buffers 0"
        );
    }

    /// `Process::update_ref` (process.rs:967-975): an increment of handle 0
    /// by the manager is `EINVAL` without a log line of the driver's own;
    /// anyone else's insert result is dropped, so a failed one (the new
    /// reference's memory) returns 0 and changes nothing, where C falls
    /// back to descriptor 0.
    #[test]
    fn rust_update_ref_handle_0_ignores_the_inserts_failure() {
        let program = "procs 3
            p1 set-manager
            p0 increfs 0
            p1 exit
            p2 set-manager
            p0 increfs 0 !ref
            p1 increfs 0
            p2 increfs 0";
        let (model, got) = rust(program);
        assert_eq!(
            got[4..],
            ["0", "skipped", "EINVAL log[ioctl-failed EINVAL]"]
        );
        assert_eq!(
            holds(&model.snapshot(), 0),
            "refs{0: p1:0 0/1} nodes{} buffers 0"
        );
        let (model, got) = run::<COracle>(Version::CMainline, program);
        assert_eq!(
            got[4..],
            [
                "0",
                "skipped",
                "EINVAL log[manager-acquires-zero, ioctl-failed EINVAL]"
            ]
        );
        assert_eq!(
            holds(&model.snapshot(), 0),
            "refs{0: p1:0 0/2} nodes{} buffers 0"
        );
    }

    /// `NodeRef::update` (node.rs:858-897): a strong increment or decrement
    /// of a reference without a strong count does nothing and logs
    /// nothing; a weak decrement of a zero weak count is logged. Only the
    /// lookups that need a strong reference (`NodeRef::clone`, 840) log.
    #[test]
    fn rust_noderef_update_strong_change_of_weak_only_reference_is_silent() {
        let (model, got) = rust(
            "procs 2
            p1 set-manager
            p0 send 0 weak-node 1
            p1 acquire 1
            p1 release 1
            p1 send 1
            p1 increfs 1
            p0 send 0 node 2
            p1 decrefs 2
            p1 release 9",
        );
        assert_eq!(got[2..4], ["0", "0"]);
        assert_eq!(
            got[4],
            "0 p1[failed-reply] log[weak-as-strong, transaction-to-invalid-handle 1, transaction-failed]"
        );
        assert_eq!(got[7], "0 log[invalid-decrement weak]");
        assert_eq!(got[8], "0 log[invalid-ref 9]");
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{1: p0:1 0/2, 2: p0:2 1/0} nodes{0: #0 3/0 sw} buffers 1"
        );
    }

    /// `Process::get_node_info_from_ref` (process.rs:1222) and
    /// `Node::populate_counts` (node.rs:492): the counts are the node's
    /// holders, a weak-only reference is answered like any other, and a
    /// missing handle is `ENOENT`.
    #[test]
    fn rust_get_node_info_from_ref_counts_holders() {
        let (_, got) = rust(
            "procs 2
            p1 set-manager
            p0 send 0 node 1
            p1 increfs 1
            p1 node-info 1
            p1 send 1 weak-handle 1
            p1 node-info 1
            p0 free
            p1 node-info 1
            p0 node-info 0
            p1 node-info 2",
        );
        assert_eq!(got[3], "strong 1 weak 1");
        assert_eq!(
            got[4],
            "0 p0[transaction weak-node 1] p1[transaction-complete]"
        );
        assert_eq!(got[5], "strong 2 weak 2");
        assert_eq!(got[7], "strong 1 weak 1");
        assert_eq!(got[8], "EPERM");
        assert_eq!(got[9], "ENOENT");
    }

    /// `Process::set_as_manager` (process.rs:746) takes node 0 before
    /// `Context::set_manager_node` refuses: node 0 exists after an `EBUSY`,
    /// and its update waits on the caller's thread (`push_work_deferred`,
    /// thread.rs:359) until a cleared death notification queues work there
    /// (`Thread::push_work_if_looper`); a death notification's request does
    /// not (it queues nothing on the thread).
    #[test]
    fn rust_set_as_manager_defers_node_0_until_the_thread_has_work() {
        let program = "procs 3
            p0 set-manager
            p1 set-manager
            p1 increfs 0
            p1 death 0 9
            p1 clear-death 0 9";
        let (model, got) = rust(program);
        assert_eq!(got[1], "EBUSY log[manager-already-set]");
        assert_eq!(got[4], "0 p1[clear-death-done 9]");
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{0: p0:0 0/1} nodes{} buffers 0"
        );
        let (model, _) = rust(&program.replace("p1 clear-death 0 9", ""));
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{0: p0:0 0/1 death 9} nodes{0: #0 0/0 -} buffers 0"
        );
        // Node 0 was removed: the next one is a new node.
        let (model, _) = rust(&format!("{program}\n p1 send 0 node 0"));
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{0: p0:0 0/1} nodes{0: #1 1/0 sw} buffers 0"
        );
        let (model, _) =
            run::<COracle>(Version::CMainline, &format!("{program}\n p1 send 0 node 0"));
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{0: p0:0 0/1} nodes{0: #0 1/0 sw} buffers 0"
        );
    }

    /// `Process::deferred_release` (process.rs:1404): the dying owner's
    /// nodes leave its tree lowest pointer first, and a node object in one
    /// of its buffers gives its count back through that tree
    /// (`Process::update_node`, 1031): objects of nodes already gone, and
    /// every object of a buffer it read (released last, 1496), leak their
    /// count into the dead node, which node info then reports. C zeroes a
    /// dead node's local counts (`binder_node_release`, binder.c:6235-6236).
    #[test]
    fn rust_deferred_release_leaks_counts_of_node_objects() {
        let read = "procs 2
            p1 set-manager
            p0 send 0 node 1
            p1 send 1 handle 1
            p0 exit
            p1 node-info 1";
        let (_, got) = rust(read);
        assert_eq!(got[2], "0 p0[transaction node 1] p1[transaction-complete]");
        assert_eq!(got[4], "strong 2 weak 0");
        let (_, got) = run::<COracle>(Version::CMainline, read);
        assert_eq!(got[4], "strong 1 weak 0");
        let waiting = |target: u32, object: u32| {
            format!(
                "procs 2
                p1 set-manager
                p0 send 0 node 1
                p0 send 0 node 3
                p1 send {target}
                p1 send {target} handle {object}
                p0 exit
                p1 node-info {object}"
            )
        };
        // An object of node 3 waiting on node 1: node 3 is still there.
        let (_, got) = rust(&waiting(1, 2));
        assert_eq!(got[5], "0 log[undelivered-transaction]");
        assert_eq!(got[6], "strong 1 weak 0");
        // An object of node 1 waiting on node 3: node 1 is gone.
        let (_, got) = rust(&waiting(2, 1));
        assert_eq!(got[6], "strong 2 weak 0");
    }

    /// `Thread::oneway_transaction_inner` through `Process::buffer_alloc`
    /// (process.rs:1069): a target whose owner died has no mapping left,
    /// `BR_DEAD_REPLY` with the `pr_warn!` of `copy_transaction_data`
    /// (thread.rs:1055) and no summary line (no errno). C fails earlier,
    /// finding no live target node.
    #[test]
    fn rust_transaction_to_a_dead_node_is_dead_reply() {
        let program = "procs 2
            p1 set-manager
            p0 send 0 node 1
            p0 exit
            p1 send 1";
        let (_, got) = rust(program);
        assert_eq!(got[3], "0 p1[dead-reply] log[buffer-alloc-failed]");
        let (_, got) = run::<COracle>(Version::CMainline, program);
        assert_eq!(
            got[3],
            "0 p1[dead-reply] log[no-target-node, transaction-failed]"
        );
    }

    /// A model whose process 0 holds references at `handles` (to nodes of
    /// process 1) and whose pool has `pool` handles.
    fn with_refs(handles: &[u32], pool: u32) -> RustOracle {
        let mut model = RustOracle::new(&[0, 0], Version::RustMainline);
        for (i, &handle) in handles.iter().enumerate() {
            let n = model.node_for(1, i as u64);
            let r = Ref {
                node: n,
                strong: 0,
                weak: 1,
                death: None,
            };
            model.procs[0].refs.insert(handle, r);
        }
        model.procs[0].pool = pool;
        model
    }

    /// `Process::insert_or_update_handle` (process.rs:857-880): no free
    /// handle from the start below the pool's size grows the pool, and a
    /// failed grow fails the insert with `ENOMEM`; a free handle below the
    /// start does not count. (No program reaches 64 references: at most 16
    /// nodes exist at once.)
    #[test]
    fn rust_insert_or_update_handle_failed_grow_is_enomem() {
        let handles: Vec<u32> = (1..64).collect();
        let mut model = with_refs(&handles, 64);
        let n = model.node_for(1, 100);
        let mut fail = FailOnce::new(Some(AllocSite::Grow));
        assert_eq!(model.insert(0, n, true, 1, &mut fail), Err(Errno::NoMem));
        assert_eq!(model.insert(0, n, true, 0, &mut fail), Ok(0));
        let mut model = with_refs(&handles, 64);
        assert_eq!(model.insert(0, n, true, 1, &mut fail), Ok(64));
        assert_eq!(model.procs[0].pool, 128);
    }

    /// `IdPool::shrink_request` and `Process::update_ref` (process.rs:1012):
    /// the pool halves after a release when its last handle is below a
    /// quarter of it, and a smaller pool of 64 handles is inline: not an
    /// allocation, so it cannot fail.
    #[test]
    fn rust_update_ref_shrink_to_64_cannot_fail() {
        for (pool, shrunk) in [(128, 64), (256, 256)] {
            let mut model = with_refs(&[1, 2], pool);
            let mut fail = FailOnce::new(Some(AllocSite::Shrink));
            model.update_ref(0, 2, false, false, &mut fail, &mut Vec::new());
            assert_eq!(model.procs[0].pool, shrunk);
        }
        let mut model = with_refs(&[1, 40], 128);
        model.update_ref(
            0,
            1,
            false,
            false,
            &mut FailOnce::new(None),
            &mut Vec::new(),
        );
        assert_eq!(model.procs[0].pool, 128);
    }
}
