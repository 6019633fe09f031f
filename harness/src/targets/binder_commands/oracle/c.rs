//! The C driver (`drivers/android/binder.c`, Linux 7.3.4) as userspace sees
//! it. Line numbers are those of 7.3.4's `binder.c`.
//!
//! # The model
//!
//! A process holds references by descriptor, each with a strong and a weak
//! count and maybe a death notification; it owns nodes by pointer; it holds
//! the buffers of the transactions it read and has not freed, oldest
//! first. A node's counts are not stored: they are counted from what
//! holds the node whenever they are needed (see `COracle::counts`).
//!
//! # When the owner hears about its node
//!
//! Upstream queues a node's work item on its owner whenever its counts may
//! need announcing, and the owner's read compares the counts then with
//! what it told userspace before (`binder_thread_read`, `BINDER_WORK_NODE`,
//! 4870). Whatever queue the item lands on, the drain after the command
//! reads it: the process queue is read once the thread queue is empty, and
//! the one item queued to a thread without marking it readable (the node
//! of a `BINDER_TYPE_BINDER` object, `binder_inc_node_nilocked` 820, on
//! the sender's thread) is always followed, in the same
//! `binder_transaction`, by the transaction's completion or error, queued
//! readable (3766, 3824, 3932). So after every command each live owner is
//! told the difference between its nodes' counts and what it was told
//! before, and a node with nothing left is gone from its owner's tree.
//!
//! # Handles
//!
//! A new reference gets the smallest free descriptor at or above an offset
//! (`get_ref_desc_olocked`, 1065): 0 when the node is the context
//! manager's node at that moment, 1 otherwise (1074), at every insert,
//! whatever asked for it. The versions before "binder: fix descriptor
//! lookup for context manager" give the manager's node 0 without looking
//! and everyone else the first free bit of a map whose bit 0 is reserved;
//! [`Version`]'s rules say how (`COracle::pick_descriptor`).

use super::{lowest_free, FailOnce, Oracle};
use idpool::driver::{
    Br, Command, Errno, Log, NodeName, NodeState, Object, Observed, Pid, ProcState, Received,
    RefCmd, RefState, Ret, Snapshot, Step,
};
use idpool::{AllocSite, Version};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A node, by its index in [`COracle::nodes`] (never reused).
type NodeId = usize;

/// The C driver's naive model.
#[derive(Clone, Debug)]
pub struct COracle {
    version: Version,
    procs: Vec<Proc>,
    /// Every node ever created, alive or not.
    nodes: Vec<Node>,
    /// `context->binder_context_mgr_node`.
    manager: Option<NodeId>,
    /// `context->binder_context_mgr_uid`: set by the first manager, kept
    /// after it dies.
    manager_euid: Option<u32>,
    /// A `BUG()` stopped the kernel.
    crashed: bool,
}

#[derive(Clone, Debug)]
struct Proc {
    euid: u32,
    alive: bool,
    /// `refs_by_desc`.
    refs: BTreeMap<u32, Ref>,
    /// The owner's node tree, by pointer.
    tree: BTreeMap<u64, NodeId>,
    /// How many nodes were created per pointer.
    created: BTreeMap<u64, u32>,
    /// The descriptor bitmap; `None` once disabled.
    dmap: Option<DMap>,
    /// Transactions read and not freed, oldest first.
    buffers: VecDeque<Txn>,
    /// What the next drain reads, besides node updates.
    inbox: Vec<Br>,
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
    /// Its owner was released (`node->proc == NULL`).
    dead: bool,
    /// `has_strong_ref`, `has_weak_ref`: what the owner was told.
    told_strong: bool,
    told_weak: bool,
    /// `has_async_transaction`: a one-way transaction to it was queued and
    /// its buffer not freed yet.
    oneway_busy: bool,
    /// `async_todo`: one-way transactions waiting for that buffer.
    waiting: VecDeque<Txn>,
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

/// `struct dbitmap`: its size and its set bits.
#[derive(Clone, Debug)]
struct DMap {
    nbits: u32,
    bits: BTreeSet<u32>,
}

/// How a command ended when it did not return normally.
enum Stop {
    /// `BUG()` (`binder_get_ref_for_node_olocked`, 1166).
    Bug,
}

/// What `binder_inc_ref_for_node` can fail with.
enum IncError {
    NoMem,
    Bug,
}

impl Oracle for COracle {
    fn new(euids: &[u32], version: Version) -> Self {
        let procs = euids
            .iter()
            .map(|&euid| Proc {
                euid,
                alive: true,
                refs: BTreeMap::new(),
                tree: BTreeMap::new(),
                created: BTreeMap::new(),
                dmap: Some(DMap {
                    nbits: 64,
                    bits: if version.reserves_bit_zero() {
                        BTreeSet::from([0])
                    } else {
                        BTreeSet::new()
                    },
                }),
                buffers: VecDeque::new(),
                inbox: Vec::new(),
            })
            .collect();
        COracle {
            version,
            procs,
            nodes: Vec::new(),
            manager: None,
            manager_euid: None,
            crashed: false,
        }
    }

    fn step(&mut self, step: &Step, fail: Option<AllocSite>) -> Observed {
        let mut obs = Observed::new(self.procs.len());
        let p = step.pid.index();
        if self.crashed || !self.procs[p].alive {
            obs.ret = Some(Ret::Skipped);
            return obs;
        }
        let mut fail = FailOnce::new(fail);
        let log = &mut obs.log;
        let ret = match &step.command {
            Command::SetManager => Ok(self.set_manager(p, log)),
            Command::Ref(cmd, handle) => self.ref_command(p, *cmd, *handle, &mut fail, log),
            Command::Send { to, objects } => {
                self.send(p, *to, objects, &mut fail, log).map(|()| Ret::Ok)
            }
            Command::Free => Ok(self.free(p, &mut fail, log)),
            Command::RequestDeath { handle, cookie } => {
                self.request_death(p, *handle, *cookie, log);
                Ok(Ret::Ok)
            }
            Command::ClearDeath { handle, cookie } => {
                self.clear_death(p, *handle, *cookie, log);
                Ok(Ret::Ok)
            }
            Command::NodeInfo(handle) => Ok(self.node_info(p, *handle, log)),
            Command::Exit => {
                self.exit(p, log);
                Ok(Ret::Ok)
            }
        };
        match ret {
            Ok(ret) => {
                if let Ret::Err(e) = ret {
                    // binder_ioctl logs every failed ioctl (binder.c:6001).
                    obs.log.push(Log::IoctlFailed(e));
                }
                obs.ret = Some(ret);
                self.drain(&mut obs);
            }
            Err(Stop::Bug) => {
                // The kernel stops in the middle of the command: the ioctl
                // never returns, nobody reads anything again.
                obs.log.push(Log::Bug);
                obs.ret = Some(Ret::Err(Errno::Fault));
                self.crashed = true;
            }
        }
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
                    .map(|(&desc, r)| {
                        let state = RefState {
                            node: self.name(r.node),
                            strong: r.strong,
                            weak: r.weak,
                            death: r.death,
                        };
                        (desc, state)
                    })
                    .collect(),
                nodes: proc
                    .tree
                    .iter()
                    .map(|(&ptr, &n)| {
                        let (strong, weak) = self.node_info_counts(n);
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

/// A node's counts, in upstream's terms.
struct Counts {
    /// `local_strong_refs`.
    local_strong: u32,
    /// `local_weak_refs`.
    local_weak: u32,
    /// `internal_strong_refs`: references with a strong count.
    strong_refs: u32,
    /// Whether any reference points at it (`node->refs` not empty).
    any_refs: bool,
}

impl COracle {
    fn name(&self, n: NodeId) -> NodeName {
        let node = &self.nodes[n];
        NodeName {
            owner: Pid(node.owner as u8),
            ptr: node.ptr,
            serial: node.serial,
        }
    }

    /// A node's counts, counted from what holds it:
    ///
    /// - `local_strong_refs` and `local_weak_refs` count one each for the
    ///   context manager's node (`binder_ioctl_set_ctx_mgr`, 5554-5555);
    ///   `local_strong_refs` one per one-way transaction to the node whose
    ///   buffer is not freed, waiting or read (`binder_get_node_refs_for_txn`
    ///   2967, released by `binder_transaction_buffer_release` 2059); and
    ///   one of either per object in those buffers that is the node itself,
    ///   translated back for its owner (`binder_translate_handle` 2324,
    ///   released at 2098). A dead node has none: `binder_node_release`
    ///   zeroes both (6235-6236).
    /// - `internal_strong_refs` is one per reference with a strong count
    ///   (`binder_inc_ref_olocked` 1243, `binder_dec_ref_olocked` 1275).
    fn counts(&self, n: NodeId) -> Counts {
        let node = &self.nodes[n];
        let mut c = Counts {
            local_strong: 0,
            local_weak: 0,
            strong_refs: 0,
            any_refs: false,
        };
        for r in self.procs.iter().flat_map(|p| p.refs.values()) {
            if r.node == n {
                c.any_refs = true;
                c.strong_refs += u32::from(r.strong > 0);
            }
        }
        if node.dead {
            return c;
        }
        if self.manager == Some(n) {
            c.local_strong += 1;
            c.local_weak += 1;
        }
        let owner = &self.procs[node.owner];
        let waiting = self
            .nodes
            .iter()
            .filter(|m| m.owner == node.owner)
            .flat_map(|m| m.waiting.iter());
        for txn in owner.buffers.iter().chain(waiting) {
            c.local_strong += u32::from(txn.target == n);
            for object in &txn.objects {
                if let Carried::Node { node: m, strong } = *object {
                    if m == n && strong {
                        c.local_strong += 1;
                    } else if m == n {
                        c.local_weak += 1;
                    }
                }
            }
        }
        c
    }

    /// What `BINDER_GET_NODE_INFO_FOR_REF` reports for a node
    /// (`binder_ioctl_get_node_info_for_ref`, 5592-5593): the strong count
    /// adds both kinds of strong references; the weak count is the local
    /// one only, references do not count.
    fn node_info_counts(&self, n: NodeId) -> (u32, u32) {
        let c = self.counts(n);
        (c.local_strong + c.strong_refs, c.local_weak)
    }

    /// The node `ptr` of process `p`, created if its tree has none
    /// (`binder_new_node`, 794; `binder_init_node_ilocked` returns the one
    /// already there, 766).
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
            dead: false,
            told_strong: false,
            told_weak: false,
            oneway_busy: false,
            waiting: VecDeque::new(),
        });
        let n = self.nodes.len() - 1;
        self.procs[p].tree.insert(ptr, n);
        n
    }

    /// `binder_get_ref_olocked` (1019): the reference with descriptor
    /// `desc`; when a strong one is needed, a weak-only reference is not
    /// found, and that is logged (1033).
    fn lookup(&self, p: usize, desc: u32, need_strong: bool, log: &mut Vec<Log>) -> Option<Ref> {
        let r = *self.procs[p].refs.get(&desc)?;
        if need_strong && r.strong == 0 {
            log.push(Log::WeakAsStrong);
            return None;
        }
        Some(r)
    }

    /// `get_ref_desc_olocked` (1065) and the descriptor check of
    /// `binder_get_ref_for_node_olocked` (1156-1167): the descriptor a new
    /// reference to `n` in process `p` gets.
    ///
    /// - Mainline: the smallest descriptor at or above the offset that no
    ///   reference of `p` uses, the offset being 0 for the context
    ///   manager's node at this moment and 1 for any other (1074). The
    ///   bitmap gives the same answer as the tree walk, and so does the
    ///   slow walk (`slow_desc_lookup_olocked`, 1043) once a failed grow
    ///   disabled the bitmap: only whether a grow allocation happens
    ///   depends on the bitmap's size.
    /// - [`Version::manager_always_gets_zero`]: the manager's node gets 0
    ///   without looking, and if a reference to another node holds 0 the
    ///   tree insert hits `BUG()` (1166).
    /// - [`Version::reserves_bit_zero`]: everyone else takes the first
    ///   clear bit of the bitmap (bit 0 set at creation, and kept by
    ///   [`Version::clear_bit_spares_zero`]), or with the bitmap disabled
    ///   the smallest free descriptor from 1. Where bit 0 was cleared
    ///   (`c-v3`), a non-manager can get 0, and then `BUG()` if the
    ///   manager's node holds 0.
    ///
    /// A full bitmap doubles (`dbitmap_grow_nbits`); the bigger bitmap is
    /// an allocation, and when it fails the bitmap is disabled for good
    /// (`dbitmap_grow`).
    fn pick_descriptor(&mut self, p: usize, n: NodeId, fail: &mut FailOnce) -> Result<u32, Stop> {
        let v = self.version;
        let is_manager = self.manager == Some(n);
        let proc = &mut self.procs[p];
        let desc = if is_manager && v.manager_always_gets_zero() {
            0
        } else {
            let offset = if v.reserves_bit_zero() || is_manager {
                0
            } else {
                1
            };
            loop {
                let Some(map) = &mut proc.dmap else {
                    let from = if v.reserves_bit_zero() { 1 } else { offset };
                    break lowest_free(&proc.refs, from);
                };
                if let Some(bit) = (offset..map.nbits).find(|b| !map.bits.contains(b)) {
                    map.bits.insert(bit);
                    break bit;
                }
                if fail.alloc(AllocSite::Grow) {
                    map.nbits *= 2;
                } else {
                    proc.dmap = None;
                }
            }
        };
        if proc.refs.contains_key(&desc) {
            return Err(Stop::Bug);
        }
        Ok(desc)
    }

    /// `binder_inc_ref_for_node` (1458): one more reference of `p` to `n`,
    /// on the reference `p` already has to it, or on a new one (whose
    /// memory is allocated first, 1471); returns its descriptor.
    fn inc_ref_for_node(
        &mut self,
        p: usize,
        n: NodeId,
        strong: bool,
        fail: &mut FailOnce,
    ) -> Result<u32, IncError> {
        let refs = &mut self.procs[p].refs;
        if let Some((&desc, r)) = refs.iter_mut().find(|(_, r)| r.node == n) {
            *(if strong { &mut r.strong } else { &mut r.weak }) += 1;
            return Ok(desc);
        }
        if !fail.alloc(AllocSite::Ref) {
            return Err(IncError::NoMem);
        }
        let desc = self
            .pick_descriptor(p, n, fail)
            .map_err(|Stop::Bug| IncError::Bug)?;
        let r = Ref {
            node: n,
            strong: u32::from(strong),
            weak: u32::from(!strong),
            death: None,
        };
        self.procs[p].refs.insert(desc, r);
        Ok(desc)
    }

    /// `binder_update_ref_for_handle` (1393): one more or one less on the
    /// reference with descriptor `desc`, which must be strong for a strong
    /// change; a decrement of a zero count is refused and logged
    /// (`binder_dec_ref_olocked`, 1275) but not an error. The reference
    /// goes when both counts reach 0: its bit is cleared
    /// (`binder_cleanup_ref_olocked`, 1182), its death notification
    /// dropped, and the bitmap may shrink (`try_shrink_dmap`, 1362).
    fn update_ref(
        &mut self,
        p: usize,
        desc: u32,
        increment: bool,
        strong: bool,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<(), ()> {
        self.lookup(p, desc, strong, log).ok_or(())?;
        let r = self.procs[p].refs.get_mut(&desc).expect("looked up");
        let count = if strong { &mut r.strong } else { &mut r.weak };
        if increment {
            *count += 1;
        } else if *count == 0 {
            log.push(Log::InvalidDecrement { strong });
        } else {
            *count -= 1;
            if r.strong == 0 && r.weak == 0 {
                self.remove_ref(p, desc);
                self.try_shrink(p, fail);
            }
        }
        Ok(())
    }

    /// `binder_cleanup_ref_olocked` (1182): the reference leaves the
    /// process; its bit is cleared while the bitmap is enabled, except bit
    /// 0 where [`Version::clear_bit_spares_zero`].
    fn remove_ref(&mut self, p: usize, desc: u32) {
        let spare = desc == 0 && self.version.clear_bit_spares_zero();
        let proc = &mut self.procs[p];
        proc.refs.remove(&desc);
        if let (Some(map), false) = (&mut proc.dmap, spare) {
            map.bits.remove(&desc);
        }
    }

    /// `try_shrink_dmap` (1362) and `dbitmap_shrink_nbits`: a bitmap of
    /// more than 64 bits whose last set bit is below a quarter of it (at
    /// or below, [`Version::shrink_threshold_inclusive`]) halves; an empty
    /// one goes back to 64. The smaller bitmap is an allocation, at any
    /// size; when it fails nothing changes.
    fn try_shrink(&mut self, p: usize, fail: &mut FailOnce) {
        let inclusive = self.version.shrink_threshold_inclusive();
        let Some(map) = &mut self.procs[p].dmap else {
            return;
        };
        if map.nbits <= 64 {
            return;
        }
        let target = match map.bits.last() {
            None => 64,
            Some(&last) if inclusive && 4 * last <= map.nbits => map.nbits / 2,
            Some(&last) if !inclusive && 4 * (last + 1) <= map.nbits => map.nbits / 2,
            Some(_) => return,
        };
        if fail.alloc(AllocSite::Shrink) {
            map.nbits = target;
        }
    }

    /// `BINDER_SET_CONTEXT_MGR` (`binder_ioctl_set_ctx_mgr`, 5522): refused
    /// while a manager is set (`EBUSY`, 5533) or to another euid than the
    /// first manager's (`EPERM`, 5541), both logged. Otherwise the
    /// process's node 0 (created if missing) becomes the manager's node,
    /// its owner counted as told of both kinds of reference (5556-5557):
    /// no `BR_INCREFS`/`BR_ACQUIRE` follows.
    fn set_manager(&mut self, p: usize, log: &mut Vec<Log>) -> Ret {
        if self.manager.is_some() {
            log.push(Log::ManagerAlreadySet);
            return Ret::Err(Errno::Busy);
        }
        let euid = self.procs[p].euid;
        match self.manager_euid {
            Some(first) if first != euid => {
                log.push(Log::ManagerBadUid);
                return Ret::Err(Errno::Perm);
            }
            _ => self.manager_euid = Some(euid),
        }
        let n = self.node_for(p, 0);
        self.nodes[n].told_strong = true;
        self.nodes[n].told_weak = true;
        self.manager = Some(n);
        Ret::Ok
    }

    /// `BC_INCREFS`, `BC_ACQUIRE`, `BC_RELEASE`, `BC_DECREFS`
    /// (`binder_thread_write`, 4155-4222). The ioctl returns 0 whatever
    /// happens, except for an increment of descriptor 0 by the manager
    /// itself (`EINVAL`, logged, 4177).
    ///
    /// An increment of descriptor 0 while a manager is set goes to the
    /// manager's node, wherever the caller's reference to it is (a new one
    /// gets the offset-0 rule), and the driver logs when that reference is
    /// not descriptor 0 (4193). If it fails (out of memory), or with no
    /// manager, or for a decrement, the command applies to whatever
    /// reference has that descriptor ([`COracle::update_ref`]), and a
    /// failure is logged as an invalid ref (4213).
    fn ref_command(
        &mut self,
        p: usize,
        cmd: RefCmd,
        target: u32,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<Ret, Stop> {
        let (strong, increment) = (cmd.strong(), cmd.increment());
        let mut done = None;
        if increment && target == 0 {
            if let Some(m) = self.manager {
                if self.nodes[m].owner == p {
                    log.push(Log::ManagerAcquiresZero);
                    return Ok(Ret::Err(Errno::Inval));
                }
                match self.inc_ref_for_node(p, m, strong, fail) {
                    Ok(desc) => done = Some(desc),
                    Err(IncError::Bug) => return Err(Stop::Bug),
                    Err(IncError::NoMem) => {}
                }
            }
        }
        let result = match done {
            Some(desc) => Ok(desc),
            None => self
                .update_ref(p, target, increment, strong, fail, log)
                .map(|()| target),
        };
        match result {
            Ok(desc) if desc != target => log.push(Log::GotOtherHandle {
                wanted: target,
                got: desc,
            }),
            Ok(_) => {}
            Err(()) => log.push(Log::InvalidRef(target)),
        }
        Ok(Ret::Ok)
    }

    /// A one-way `BC_TRANSACTION` (`binder_transaction`, 3073). Every
    /// failure is read by the sender as `BR_FAILED_REPLY` or
    /// `BR_DEAD_REPLY` and logged with the driver's summary line (3889);
    /// the ioctl returns 0.
    ///
    /// The target: handle 0 is the manager's node (`BR_DEAD_REPLY` without
    /// a manager; `BR_FAILED_REPLY`, logged, when the sender is the
    /// manager, 3240); another handle needs a strong reference (else
    /// logged, 3224, `BR_FAILED_REPLY`) to a node whose owner is alive
    /// (else `BR_DEAD_REPLY`); a missing target is logged once more
    /// (3249).
    ///
    /// The objects, in order, for the target's owner: a node of the
    /// sender's becomes a handle (a reference of the receiver,
    /// `binder_translate_binder`, 2237); a handle of the sender's, which
    /// must exist (strong for a strong object, else logged, 2303), becomes
    /// the node itself when the receiver owns it, else a handle
    /// (`binder_translate_handle`, 2290). At the first object that fails
    /// (logged, 3549/3568) the ones before it are undone as a freed buffer
    /// would undo them (`binder_transaction_buffer_release`, 2044).
    fn send(
        &mut self,
        p: usize,
        to: u32,
        objects: &[Object],
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<(), Stop> {
        let target = if to == 0 {
            match self.manager {
                Some(m) if self.nodes[m].owner == p => {
                    log.push(Log::TransactionToOwnManager);
                    self.fail_send(p, Br::FailedReply, log);
                    return Ok(());
                }
                Some(m) => Ok(m),
                None => Err(Br::DeadReply),
            }
        } else {
            match self.lookup(p, to, true, log) {
                Some(r) if self.nodes[r.node].dead => Err(Br::DeadReply),
                Some(r) => Ok(r.node),
                None => {
                    log.push(Log::TransactionToInvalidHandle(to));
                    Err(Br::FailedReply)
                }
            }
        };
        let target = match target {
            Ok(n) => n,
            Err(br) => {
                log.push(Log::NoTargetNode);
                self.fail_send(p, br, log);
                return Ok(());
            }
        };
        let receiver = self.nodes[target].owner;
        let mut carried = Vec::new();
        for object in objects.iter().flat_map(Object::expand) {
            match self.translate(p, receiver, object, fail, log)? {
                Some(c) => carried.push(c),
                None => {
                    log.push(Log::TranslateFailed);
                    self.release_objects(receiver, &carried, fail, log);
                    self.fail_send(p, Br::FailedReply, log);
                    return Ok(());
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
        Ok(())
    }

    fn fail_send(&mut self, p: usize, br: Br, log: &mut Vec<Log>) {
        log.push(Log::TransactionFailed);
        self.procs[p].inbox.push(br);
    }

    /// One object of [`COracle::send`]; `None` when it fails.
    fn translate(
        &mut self,
        p: usize,
        receiver: usize,
        object: Object,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<Option<Carried>, Stop> {
        let (n, strong) = match object {
            Object::Nodes { .. } => unreachable!("runs are expanded"),
            Object::Node { ptr, strong } => (self.node_for(p, ptr), strong),
            Object::Handle { handle, strong } => match self.lookup(p, handle, strong, log) {
                Some(r) => (r.node, strong),
                None => {
                    log.push(Log::ObjectInvalidHandle(handle));
                    return Ok(None);
                }
            },
        };
        let node = &self.nodes[n];
        if !node.dead && node.owner == receiver {
            return Ok(Some(Carried::Node { node: n, strong }));
        }
        match self.inc_ref_for_node(receiver, n, strong, fail) {
            Ok(handle) => Ok(Some(Carried::Handle { handle, strong })),
            Err(IncError::NoMem) => Ok(None),
            Err(IncError::Bug) => Err(Stop::Bug),
        }
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

    /// What releasing a buffer does to its receiver's references
    /// (`binder_transaction_buffer_release`, 2044): each handle object is
    /// one less on the reference with that descriptor now, logged when
    /// there is none (2113); node objects and the target only held counts
    /// that go with the buffer.
    fn release_objects(
        &mut self,
        receiver: usize,
        objects: &[Carried],
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        for object in objects {
            if let Carried::Handle { handle, strong } = *object {
                if self
                    .update_ref(receiver, handle, false, strong, fail, log)
                    .is_err()
                {
                    log.push(Log::BadBufferObject);
                }
            }
        }
    }

    /// `BC_FREE_BUFFER` on the oldest buffer (`binder_free_buf`, 4097):
    /// the next one-way transaction waiting for that node is queued
    /// (4107-4124), then the buffer's objects are released.
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

    /// `BC_REQUEST_DEATH_NOTIFICATION` (4395-4472): on a reference that
    /// exists (else logged, 4431) and has none yet (else logged, 4455);
    /// when the node is already dead the notification is read at once.
    fn request_death(&mut self, p: usize, desc: u32, cookie: u64, log: &mut Vec<Log>) {
        let Some(r) = self.procs[p].refs.get_mut(&desc) else {
            log.push(Log::DeathInvalidRef { request: true });
            return;
        };
        if r.death.is_some() {
            log.push(Log::DeathAlreadySet);
            return;
        }
        r.death = Some(cookie);
        if self.nodes[r.node].dead {
            self.procs[p].inbox.push(Br::DeadBinder(cookie));
        }
    }

    /// `BC_CLEAR_DEATH_NOTIFICATION` (4473-4514): the reference must exist
    /// and have a notification with this cookie (each failure logged); the
    /// caller then reads `BR_CLEAR_DEATH_NOTIFICATION_DONE`. (A
    /// notification delivered and not yet acknowledged would delay it, but
    /// the drain acknowledges every `BR_DEAD_BINDER` at once.)
    fn clear_death(&mut self, p: usize, desc: u32, cookie: u64, log: &mut Vec<Log>) {
        let proc = &mut self.procs[p];
        let Some(r) = proc.refs.get_mut(&desc) else {
            log.push(Log::DeathInvalidRef { request: false });
            return;
        };
        match r.death {
            None => log.push(Log::DeathNotActive),
            Some(c) if c != cookie => log.push(Log::DeathCookieMismatch),
            Some(_) => {
                r.death = None;
                proc.inbox.push(Br::ClearDeathDone(cookie));
            }
        }
    }

    /// `BINDER_GET_NODE_INFO_FOR_REF` (5564): the manager only (`EPERM`),
    /// on a strong reference (a weak-only one is logged, 1033, and like a
    /// missing one is `EINVAL`).
    fn node_info(&self, p: usize, desc: u32, log: &mut Vec<Log>) -> Ret {
        match self.manager {
            Some(m) if self.nodes[m].owner == p => {}
            _ => return Ret::Err(Errno::Perm),
        }
        match self.lookup(p, desc, true, log) {
            Some(r) => {
                let (strong, weak) = self.node_info_counts(r.node);
                Ret::NodeInfo { strong, weak }
            }
            None => Ret::Err(Errno::Inval),
        }
    }

    /// `close()`, then `binder_deferred_release` (6276): the manager is
    /// unset (6292); each node leaves the tree, its waiting one-way
    /// transactions are dropped, each logged (`binder_release_work` via
    /// `binder_node_release`, 6211; 1775), and if anyone still refers to
    /// it, it is dead and every reference to it with a death notification
    /// reads `BR_DEAD_BINDER`; then every reference of the process goes,
    /// and its buffers with it.
    fn exit(&mut self, p: usize, log: &mut Vec<Log>) {
        if self.manager.is_some_and(|m| self.nodes[m].owner == p) {
            self.manager = None;
        }
        self.procs[p].alive = false;
        let tree = std::mem::take(&mut self.procs[p].tree);
        for &n in tree.values() {
            let waiting = std::mem::take(&mut self.nodes[n].waiting);
            log.extend(waiting.iter().map(|_| Log::UndeliveredTransaction));
            self.nodes[n].dead = true;
            for holder in self.procs.iter_mut() {
                for r in holder.refs.values().filter(|r| r.node == n) {
                    if let Some(cookie) = r.death {
                        holder.inbox.push(Br::DeadBinder(cookie));
                    }
                }
            }
        }
        let proc = &mut self.procs[p];
        proc.refs.clear();
        proc.buffers.clear();
        proc.inbox.clear();
    }

    /// After the command, each live process reads everything queued to it,
    /// and is told of each of its nodes what changed since it was last
    /// told (`binder_thread_read`, 4870-4953): `BR_INCREFS` when the node
    /// is referenced at all and the owner did not know, `BR_ACQUIRE` when
    /// it is strongly referenced and the owner did not know, `BR_RELEASE`
    /// and `BR_DECREFS` for the reverse; a node referenced no more leaves
    /// the tree (4903). The answers (`BC_INCREFS_DONE`, `BC_ACQUIRE_DONE`,
    /// `BC_DEAD_BINDER_DONE`) change nothing that can be seen.
    fn drain(&mut self, obs: &mut Observed) {
        for p in 0..self.procs.len() {
            if !self.procs[p].alive {
                continue;
            }
            let mut reads = std::mem::take(&mut self.procs[p].inbox);
            let tree: Vec<(u64, NodeId)> =
                self.procs[p].tree.iter().map(|(&k, &v)| (k, v)).collect();
            for (ptr, n) in tree {
                let c = self.counts(n);
                let strong = c.local_strong > 0 || c.strong_refs > 0;
                let weak = strong || c.local_weak > 0 || c.any_refs;
                let node = &mut self.nodes[n];
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
    use super::super::testing::{holds, run};
    use super::*;

    /// p2 refers to p1's node 0 at descriptor 1, then p1 becomes the
    /// manager and p2 increments descriptor 0.
    pub(crate) const MANAGER_NODE_REFERENCED_BEFORE: &str = "procs 3
        p0 set-manager
        p1 send 0 node 0
        p2 send 0 node 1
        p0 send 2 handle 1
        p0 exit
        p1 set-manager
        p2 increfs 0";

    fn c(version: Version, program: &str) -> (COracle, Vec<String>) {
        run::<COracle>(version, program)
    }

    /// `get_ref_desc_olocked` (1074): offset 0 for the node that is the
    /// manager's when the reference is made, whoever makes it, and 1 for
    /// every other node, even while 0 is free.
    #[test]
    fn c_get_ref_desc_olocked_offset_zero_only_for_current_manager_node() {
        let (model, got) = c(
            Version::CMainline,
            "procs 3
            p1 set-manager
            p0 send 0 node 1
            p1 send 1 node 0
            p2 send 0 node 2",
        );
        assert_eq!(
            got[1],
            "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]"
        );
        assert_eq!(
            got[2],
            "0 p0[transaction handle 0] p1[transaction-complete]"
        );
        // p2's transaction waits behind p1's first buffer, but p1 has
        // handle 2; both transactions and p0's reference hold p1's node.
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{1: p0:1 1/0, 2: p2:2 1/0} nodes{0: #0 4/1 sw} buffers 1"
        );
        // The old manager's node is no longer the manager's: offset 1.
        let (_, got) = c(
            Version::CMainline,
            "procs 3
            p1 set-manager
            p0 send 0 node 1
            p2 increfs 0
            p2 acquire 0
            p1 exit
            p0 set-manager
            p2 send 0 node 3
            p0 send 1 node 2
            p2 send 1 handle 0",
        );
        assert_eq!(
            got[6],
            "0 p0[transaction handle 1] p2[transaction-complete, increfs 3, acquire 3]"
        );
        assert_eq!(
            got[7],
            "0 p0[transaction-complete, increfs 2, acquire 2] p2[transaction handle 1]"
        );
        assert_eq!(
            got[8],
            "0 p0[transaction handle 2] p2[transaction-complete]"
        );
    }

    /// `binder_thread_write`, `BC_INCREFS`/`BC_ACQUIRE` of descriptor 0
    /// (4170-4196): the manager itself is refused and logged; anyone else
    /// refers to the manager's node, and is told (logged) when that
    /// reference is not descriptor 0.
    #[test]
    fn c_binder_thread_write_increfs_zero_goes_to_the_manager_node() {
        let (_, got) = c(
            Version::CMainline,
            "procs 2
            p1 set-manager
            p1 acquire 0
            p0 send 0 node 1
            p1 send 1 node 0
            p0 increfs 0",
        );
        assert_eq!(
            got[1],
            "EINVAL log[manager-acquires-zero, ioctl-failed EINVAL]"
        );
        assert_eq!(
            got[3],
            "0 p0[transaction handle 0] p1[transaction-complete]"
        );
        assert_eq!(got[4], "0");
        // A reference to a node made before the node was the manager's
        // keeps its descriptor: here 1.
        let (_, got) = c(Version::CMainline, MANAGER_NODE_REFERENCED_BEFORE);
        assert_eq!(
            got[3],
            "0 p0[transaction-complete] p2[transaction handle 1]"
        );
        assert_eq!(got[4], "0 log[undelivered-transaction]");
        assert_eq!(got[6], "0 log[got-other-handle 0 1]");
    }

    /// `binder_thread_write` (4188-4191): when the manager's node cannot
    /// be referenced (the new reference's memory), the command falls back
    /// to descriptor 0 as it is, here a stale reference to an old manager's
    /// node, which gains a count.
    #[test]
    fn c_binder_thread_write_increfs_zero_out_of_memory_falls_back_to_descriptor_0() {
        let (model, got) = c(
            Version::CMainline,
            "procs 3
            p1 set-manager
            p0 increfs 0
            p1 exit
            p2 set-manager
            p0 increfs 0 !ref
            p0 acquire 0 !ref",
        );
        assert_eq!(got[4], "0");
        assert_eq!(got[5], "0 log[weak-as-strong, invalid-ref 0]");
        assert_eq!(
            holds(&model.snapshot(), 0),
            "refs{0: p1:0 0/2} nodes{} buffers 0"
        );
        let (_, got) = c(
            Version::CMainline,
            "procs 2
            p1 set-manager
            p0 increfs 0 !ref",
        );
        assert_eq!(got[1], "0 log[invalid-ref 0]");
    }

    /// `binder_get_ref_olocked` (1032-1034): a strong command on a
    /// weak-only reference does not find it (logged twice, ioctl 0);
    /// `binder_dec_ref_olocked` (1289-1294): a weak decrement of a zero
    /// weak count is logged and changes nothing.
    #[test]
    fn c_binder_get_ref_olocked_weak_only_reference_is_not_strong() {
        let (model, got) = c(
            Version::CMainline,
            "procs 2
            p1 set-manager
            p0 send 0 weak-node 1
            p1 acquire 1
            p1 release 1
            p1 send 1
            p1 increfs 1
            p0 send 0 node 2
            p1 decrefs 2",
        );
        assert_eq!(got[2], "0 log[weak-as-strong, invalid-ref 1]");
        assert_eq!(got[3], "0 log[weak-as-strong, invalid-ref 1]");
        assert_eq!(
            got[4],
            "0 p1[failed-reply] log[weak-as-strong, transaction-to-invalid-handle 1, no-target-node, transaction-failed]"
        );
        assert_eq!(got[7], "0 log[invalid-decrement weak]");
        assert_eq!(
            holds(&model.snapshot(), 1),
            "refs{1: p0:1 0/2, 2: p0:2 1/0} nodes{0: #0 3/1 sw} buffers 1"
        );
    }

    /// `binder_ioctl_get_node_info_for_ref` (5564-5596): the manager only,
    /// a strong reference only, and the weak count is the node's local
    /// weak count: references do not count, a weak node object held by its
    /// owner does.
    #[test]
    fn c_binder_ioctl_get_node_info_for_ref_weak_count_is_local() {
        let (_, got) = c(
            Version::CMainline,
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
        assert_eq!(got[3], "strong 1 weak 0");
        assert_eq!(
            got[4],
            "0 p0[transaction weak-node 1] p1[transaction-complete]"
        );
        assert_eq!(got[5], "strong 2 weak 1");
        assert_eq!(got[7], "strong 1 weak 0");
        assert_eq!(got[8], "EPERM log[ioctl-failed EPERM]");
        assert_eq!(got[9], "EINVAL log[ioctl-failed EINVAL]");
    }

    /// `binder_node_release` (6211): the dying owner's node keeps only the
    /// references of others (its local counts are zeroed, 6235-6236), and
    /// every reference with a death notification reads `BR_DEAD_BINDER`;
    /// its waiting one-way transactions are dropped, logged.
    #[test]
    fn c_binder_node_release_zeroes_local_counts_and_notifies() {
        let (_, got) = c(
            Version::CMainline,
            "procs 3
            p1 set-manager
            p0 send 0 node 1
            p1 send 1 handle 1
            p2 increfs 0
            p1 death 1 5
            p0 exit
            p1 node-info 1
            p1 death 1 6
            p1 clear-death 1 5",
        );
        assert_eq!(got[2], "0 p0[transaction node 1] p1[transaction-complete]");
        assert_eq!(got[5], "0 p1[dead-binder 5]");
        assert_eq!(got[6], "strong 1 weak 0");
        assert_eq!(got[7], "0 log[death-already-set]");
        assert_eq!(got[8], "0 p1[clear-death-done 5]");
    }

    /// `get_ref_desc_olocked` as first merged (`c-2024-06`): the manager's
    /// node gets descriptor 0 without looking, so a process holding a
    /// stale descriptor 0 that receives the new manager's node hits
    /// `BUG()` (1166); the driver is then gone.
    #[test]
    fn c_2024_06_get_ref_desc_olocked_manager_zero_without_looking_is_bug() {
        let program = "procs 3
            p1 set-manager
            p0 increfs 0
            p1 exit
            p2 set-manager
            p0 send 0 node 1
            p2 send 1 node 0
            p0 exit";
        let (model, got) = c(Version::C2024_06, program);
        assert_eq!(
            got[4],
            "0 p0[transaction-complete, increfs 1, acquire 1] p2[transaction handle 1]"
        );
        assert_eq!(got[5], "EFAULT log[bug]");
        assert_eq!(got[6], "skipped");
        assert!(model.snapshot().procs[0].alive);
        let (_, got) = c(Version::CMainline, program);
        assert_eq!(
            got[5],
            "0 p0[transaction handle 1] p2[transaction-complete]"
        );
    }

    /// `dbitmap_clear_bit` in the v3 posting had no guard for bit 0: once
    /// the manager's node's descriptor 0 is dropped, the first clear bit is
    /// 0 and goes to any node; the manager's node, given 0 without looking,
    /// then collides (`BUG()`). As merged (`c-2024-06`) the guard keeps
    /// bit 0, and mainline searches from 1.
    #[test]
    fn c_v3_dbitmap_clear_bit_hands_descriptor_0_to_any_node() {
        let program = "procs 3
            p1 set-manager
            p0 send 0 node 1
            p0 increfs 0
            p0 decrefs 0
            p2 send 0 node 1
            p1 send 1 handle 2
            p0 increfs 0";
        let (_, got) = c(Version::CV3, program);
        assert_eq!(
            got[5],
            "0 p0[transaction handle 0] p1[transaction-complete]"
        );
        assert_eq!(got[6], "EFAULT log[bug]");
        for version in [Version::C2024_06, Version::CMainline] {
            let (_, got) = c(version, program);
            assert_eq!(
                got[5],
                "0 p0[transaction handle 1] p1[transaction-complete]"
            );
        }
        let (_, got) = c(Version::C2024_06, program);
        assert_eq!(got[6], "0");
        let (_, got) = c(Version::CMainline, program);
        assert_eq!(got[6], "0");
    }

    /// A model whose process 0 holds references at descriptors `descs`
    /// (to nodes of process 1) and whose bitmap has `nbits` bits.
    fn with_refs(version: Version, descs: &[u32], nbits: u32) -> COracle {
        let mut model = COracle::new(&[0, 0], version);
        for (i, &desc) in descs.iter().enumerate() {
            let n = model.node_for(1, i as u64);
            let r = Ref {
                node: n,
                strong: 0,
                weak: 1,
                death: None,
            };
            model.procs[0].refs.insert(desc, r);
            if let Some(map) = &mut model.procs[0].dmap {
                map.bits.insert(desc);
            }
        }
        if let Some(map) = &mut model.procs[0].dmap {
            map.nbits = nbits;
        }
        model
    }

    /// `get_ref_desc_olocked` (1085-1096) and `dbitmap_grow`: a full
    /// bitmap doubles; when the bigger one cannot be allocated the bitmap
    /// is disabled for good and the slow walk gives the same descriptor.
    /// (No program reaches 64 references: at most 16 nodes exist at once.)
    #[test]
    fn c_get_ref_desc_olocked_grow_failure_disables_the_bitmap_silently() {
        let descs: Vec<u32> = (1..64).collect();
        for (fail, nbits) in [(None, Some(128)), (Some(AllocSite::Grow), None)] {
            let mut model = with_refs(Version::CMainline, &descs, 64);
            let n = model.node_for(1, 100);
            let mut fail = FailOnce::new(fail);
            assert_eq!(model.pick_descriptor(0, n, &mut fail).ok(), Some(64));
            assert_eq!(model.procs[0].dmap.as_ref().map(|m| m.nbits), nbits);
        }
    }

    /// `try_shrink_dmap` (1362) and `dbitmap_shrink_nbits`: after a
    /// release, a bitmap whose last bit is below a quarter halves (at or
    /// below in `c-v3`); a failed allocation changes nothing.
    #[test]
    fn c_try_shrink_dmap_threshold_by_version() {
        for (version, shrinks) in [(Version::CMainline, false), (Version::CV3, true)] {
            let mut model = with_refs(version, &[1, 32], 128);
            let mut fail = FailOnce::new(None);
            model.procs[0].refs.remove(&1);
            model.procs[0].dmap.as_mut().unwrap().bits.remove(&1);
            model.try_shrink(0, &mut fail);
            let nbits = model.procs[0].dmap.as_ref().unwrap().nbits;
            assert_eq!(nbits, if shrinks { 64 } else { 128 }, "{version}");
        }
        let mut model = with_refs(Version::CMainline, &[1], 256);
        let mut fail = FailOnce::new(Some(AllocSite::Shrink));
        model.try_shrink(0, &mut fail);
        assert_eq!(model.procs[0].dmap.as_ref().unwrap().nbits, 256);
        model.try_shrink(0, &mut fail);
        assert_eq!(model.procs[0].dmap.as_ref().unwrap().nbits, 128);
    }
}
