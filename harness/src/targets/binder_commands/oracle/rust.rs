//! The Rust driver (`drivers/android/binder/`, Linux 7.3.4) as userspace
//! sees it. Line numbers are those of 7.3.4's files.
//!
//! # The model
//!
//! As for the C driver: processes hold references by handle (strong count,
//! weak count, death notification, freeze cookie), own nodes by pointer and
//! hold the buffers they read; a node's counts are counted from what holds
//! it (`RustOracle::counts`), here as the `NodeRef`s that hold it: each
//! reference contributes at most one strong and one weak count
//! (`NodeRef::absorb`, node.rs:805; `NodeRef::update`, 858), and every
//! allocation (read or on its way) holds its target and the node objects
//! translated back for their owner.
//!
//! Work waits where the driver queues it: on the process's work list, on a
//! thread's work list, readable (`push_work`, thread.rs:324) or deferred
//! (`push_work_deferred`, 359: not read until something readable is
//! queued), or on a node's `oneway_todo`. A thread of the driver has its
//! looper flags, its `current_transaction` (calls, `RustOracle::calls`,
//! linked by `from_parent` as `Transaction` links them) and its extended
//! error.
//!
//! # When the owner hears about its node
//!
//! A node has at most one work item of its own queued (`has_pushed_node`)
//! and one wrapper (`has_pushed_wrapper`), as `DeliveryState`
//! (node.rs:60) tracks them. A count's zero-to-one increment through
//! `Process::get_node` (a node object of the sender's, the manager's node)
//! queues the node deferred on the calling thread
//! (`incr_refcount_allow_zero2one`, node.rs:424); any other change that
//! the owner must hear of queues it on the process (`update_refcount_locked`,
//! 384). The reader compares the counts with what it told userspace
//! (`Node::do_work_locked`, 611), and holds back decrements while a
//! `BR_INCREFS`/`BR_ACQUIRE` is unanswered (`active_inc_refs`).
//!
//! # Reading
//!
//! Only a looper with no current transaction and nothing readable of its
//! own reads the process's work (`should_use_process_work_queue`,
//! thread.rs:421); a read stops after a transaction or reply, a
//! `BR_DEAD_BINDER` or a `BR_FROZEN_BINDER`, and one that wrote anything
//! ends with `BR_SPAWN_LOOPER` when the process needs a thread
//! (`Process::needs_thread`, process.rs:1252).
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
    br_code, Br, Command, Errno, ExtendedError, Log, LooperCmd, NodeName, NodeState, Object,
    Observed, Payload, Pid, ProcState, Procs, Read, Received, RefCmd, RefState, Ret, Snapshot,
    Step, Tid, TxnFlags, MAX_THREADS,
};
use idpool::{AllocSite, Version};
use std::collections::{BTreeMap, VecDeque};

/// A node, by its index in [`RustOracle::nodes`] (never reused).
type NodeId = usize;
/// A thread of the driver, by its index in [`RustOracle::threads`].
type ThreadId = usize;
/// A two-way transaction, by its index in [`RustOracle::calls`].
type CallId = usize;
/// A death notification (`NodeDeath`), by its index in
/// [`RustOracle::deaths`].
type DeathId = usize;

/// The handle pool's size before it grows (`IdPool::new`, an inline
/// bitmap of one word).
const INLINE_HANDLES: u32 = 64;
/// `BINDER_CURRENT_PROTOCOL_VERSION` (`BinderVersion::current`, defs.rs:149).
const PROTOCOL_VERSION: i32 = 8;
/// `TF_ONE_WAY`.
const TF_ONE_WAY: u32 = 0x01;

/// The Rust driver's naive model.
#[derive(Clone, Debug)]
pub struct RustOracle {
    procs: Vec<Proc>,
    /// Every node ever created.
    nodes: Vec<Node>,
    /// Every thread the driver ever had.
    threads: Vec<Thread>,
    /// Every two-way transaction ever sent.
    calls: Vec<Call>,
    /// Every death notification ever registered.
    deaths: Vec<Death>,
    /// The context's manager node (`Manager::node`, context.rs).
    manager: Option<NodeId>,
    /// `Manager::uid`: set by each manager, kept after it dies.
    manager_euid: Option<u32>,
    /// `Manager::all_procs`: the context's processes, first opened first
    /// (`register_process` pushes at the end).
    all_procs: Vec<usize>,
    /// Each process's `task`, kept after it exits.
    tasks: Vec<Pid>,
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
    buffers: VecDeque<Buffer>,
    /// `ProcessInner::work`.
    todo: VecDeque<Work>,
    /// `delivered_deaths`.
    delivered_deaths: Vec<DeathId>,
    /// `freeze_listeners`, by cookie.
    listeners: BTreeMap<u64, Listener>,
    /// The driver's thread behind each of the program's threads.
    threads: [Option<ThreadId>; MAX_THREADS],
    /// `max_threads`, `requested_thread_count`, `started_thread_count`.
    max_threads: u32,
    requested: u32,
    started: u32,
    /// `is_frozen` (`IsFrozen::Yes`), `sync_recv`, `async_recv`.
    frozen: bool,
    sync_recv: bool,
    async_recv: bool,
    /// `oneway_spam_detection_enabled`.
    spam_detection: bool,
    /// The mapping's `RangeAllocator`.
    alloc: Alloc,
}

/// The size of every process's mapping (`docs/commands.md`; the driver
/// takes at most 4 MiB, process.rs:1164).
const MAPPING: usize = 1 << 20;
/// `TREE_THRESHOLD` (range_alloc/mod.rs:79): the ranges an array holds.
const TREE_THRESHOLD: usize = 8;

/// How the `RangeAllocator` (range_alloc/mod.rs) keeps its ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AllocMode {
    /// `Impl::Empty`, or an array (`ArrayRangeAllocator`): a new range at
    /// the end when it fits there, else in the first gap that fits
    /// (`find_empty_range`, range_alloc/array.rs:90).
    Array,
    /// `TreeRangeAllocator`, from the ninth range on until it is empty
    /// again: the smallest gap that fits, the lowest of equal ones
    /// (`find_best_match`, range_alloc/tree.rs:142).
    Tree,
}

/// The mapping's allocations, by offset, and the one-way space left (half
/// the mapping at first).
#[derive(Clone, Debug)]
struct Alloc {
    ranges: BTreeMap<usize, AllocRange>,
    free_oneway: usize,
    mode: AllocMode,
}

#[derive(Clone, Copy, Debug)]
struct AllocRange {
    size: usize,
    oneway: bool,
    /// The sending process.
    pid: usize,
}

impl Alloc {
    fn new() -> Self {
        Alloc {
            ranges: BTreeMap::new(),
            free_oneway: MAPPING / 2,
            mode: AllocMode::Array,
        }
    }

    /// `RangeAllocator::reserve_new` (range_alloc/mod.rs:153) and the
    /// array's or tree's (array.rs:115, tree.rs:149): a one-way range needs
    /// that much one-way space left (`ENOSPC`), then a gap (`ENOSPC`). A
    /// one-way range is a spam suspect whenever less than a tenth of the
    /// mapping is left for one-way ranges and its sender holds more than 50
    /// of them or more than a quarter of the mapping
    /// (`low_oneway_space`, array.rs:167).
    /// `pid` is the sender's task's (`from_pid`), whichever open sends.
    fn reserve(&mut self, size: usize, oneway: bool, pid: usize) -> Result<(usize, bool), Errno> {
        if self.mode == AllocMode::Array && self.ranges.len() == TREE_THRESHOLD {
            self.mode = AllocMode::Tree;
        }
        if oneway && self.free_oneway < size {
            return Err(Errno::NoSpc);
        }
        let mut gaps = Vec::new();
        let mut at = 0;
        for (&offset, range) in &self.ranges {
            gaps.push((offset - at, at));
            at = offset + range.size;
        }
        let end = (MAPPING - at, at);
        let offset = match self.mode {
            AllocMode::Array if end.0 >= size => Some(end.1),
            AllocMode::Array => gaps.iter().find(|g| g.0 >= size).map(|g| g.1),
            AllocMode::Tree => {
                gaps.push(end);
                gaps.into_iter().filter(|g| g.0 >= size).min().map(|g| g.1)
            }
        }
        .ok_or(Errno::NoSpc)?;
        self.ranges.insert(offset, AllocRange { size, oneway, pid });
        if !oneway {
            return Ok((offset, false));
        }
        self.free_oneway -= size;
        let mine = self.ranges.values().filter(|r| r.oneway && r.pid == pid);
        let (count, total) = mine.fold((0, 0), |(n, t), r| (n + 1, t + r.size));
        let spam = self.free_oneway < MAPPING / 10 && (count > 50 || total > MAPPING / 4);
        Ok((offset, spam))
    }

    /// `reservation_abort` (array.rs:183, tree.rs:209): the one-way space
    /// comes back; an emptied tree is gone (range_alloc/mod.rs:233-235).
    fn free(&mut self, offset: usize) {
        if let Some(range) = self.ranges.remove(&offset) {
            if range.oneway {
                self.free_oneway += range.size;
            }
        }
        if self.mode == AllocMode::Tree && self.ranges.is_empty() {
            self.mode = AllocMode::Array;
        }
    }
}

/// The length of a transaction's allocation (`copy_transaction_data`,
/// thread.rs:1042-1049): its objects (24 bytes each) and their offsets (8
/// bytes each), at least 8 bytes.
fn buffer_size(payload: &Payload) -> usize {
    let objects = payload.objects.iter().flat_map(Object::expand).count();
    (32 * objects).max(8)
}

#[derive(Clone, Copy, Debug)]
struct Ref {
    node: NodeId,
    strong: u32,
    weak: u32,
    death: Option<DeathId>,
    /// The cookie of its freeze listener.
    freeze: Option<u64>,
}

#[derive(Clone, Debug)]
struct Node {
    owner: usize,
    ptr: u64,
    cookie: u64,
    serial: u32,
    /// `strong.has_count`, `weak.has_count`: what the owner was told.
    told_strong: bool,
    told_weak: bool,
    /// `active_inc_refs`.
    active_inc_refs: u8,
    /// `DeliveryState`: `has_pushed_node`, `has_pushed_wrapper`,
    /// `has_weak_zero2one`, `has_strong_zero2one`.
    pushed_node: bool,
    pushed_wrapper: bool,
    weak_z2o: bool,
    strong_z2o: bool,
    /// `has_oneway_transaction`.
    oneway_busy: bool,
    /// `oneway_todo`.
    waiting: VecDeque<Txn>,
    /// `freeze_list`: the processes listening.
    freeze_list: Vec<usize>,
    /// Counts its dead owner never gave back (see [`RustOracle::exit`]).
    leaked_strong: u32,
    leaked_weak: u32,
}

#[derive(Clone, Debug)]
struct Thread {
    pid: usize,
    tid: Tid,
    /// `LooperFlag::Registered`, `LooperFlag::Entered`.
    registered: bool,
    entered: bool,
    /// `work_list` and `process_work_list`.
    todo: VecDeque<Work>,
    readable: bool,
    /// `current_transaction`.
    current: Option<CallId>,
    /// `is_dead`.
    dead: bool,
    /// `extended_error`.
    ee: ExtendedError,
}

/// A two-way transaction (`Transaction` with a target node, not one-way).
#[derive(Clone, Copy, Debug)]
struct Call {
    /// `from`: the calling thread (kept when it dies).
    from: ThreadId,
    /// `from_parent`.
    from_parent: Option<CallId>,
}

/// `NodeDeath` (node.rs:949).
#[derive(Clone, Copy, Debug)]
struct Death {
    cookie: u64,
    dead: bool,
    cleared: bool,
    notification_done: bool,
    aborted: bool,
}

/// `FreezeListener` (freeze.rs:25).
#[derive(Clone, Copy, Debug)]
struct Listener {
    node: NodeId,
    last_is_frozen: Option<bool>,
    is_pending: bool,
    is_clearing: bool,
    pending_dups: u64,
    cleared_dups: u64,
}

/// An allocation as its receiver holds it.
#[derive(Clone, Debug)]
struct Buffer {
    /// `target_node`: the node a transaction is for (none for a reply).
    target: Option<NodeId>,
    objects: Vec<Carried>,
    /// Its `oneway_node` (a one-way transaction's buffer).
    oneway: bool,
    /// Its offset in its receiver's mapping (none for the objects of a
    /// transaction being undone).
    offset: Option<usize>,
}

/// A transaction or reply on its way (`Transaction`).
#[derive(Clone, Debug)]
struct Txn {
    buffer: Buffer,
    call: Option<CallId>,
    reply: bool,
    /// The sending process and the flags, for `can_replace`.
    sender: usize,
    flags: u32,
}

/// An object of a transaction, translated for its receiver.
#[derive(Clone, Copy, Debug)]
enum Carried {
    Handle { handle: u32, strong: bool },
    Node { node: NodeId, strong: bool },
}

/// A work item (`DeliverToRead`).
#[derive(Clone, Debug)]
enum Work {
    /// `Transaction`.
    Txn(Txn),
    /// `DeliverCode` with `BR_TRANSACTION_COMPLETE`.
    Complete,
    /// `DeliverCode` with `BR_ONEWAY_SPAM_SUSPECT`.
    SpamSuspect,
    /// `ThreadError` (a thread's `reply_work` or `return_work`).
    Error(Br),
    /// `Node`.
    Node(NodeId),
    /// `NodeWrapper` (node/wrapper.rs).
    Wrapper(NodeId),
    /// `NodeDeath`.
    Death(DeathId),
    /// `FreezeMessage` with its cookie.
    Freeze(u64),
}

/// What a reader writes back after a read (`docs/commands.md`).
#[derive(Clone, Copy, Debug)]
enum Done {
    IncRefs(u64, u64),
    Acquire(u64, u64),
    DeadBinder(u64),
    Freeze(u64),
}

/// An extended error as a failed transaction leaves it.
fn extended(command: u32, errno: Option<Errno>) -> ExtendedError {
    ExtendedError {
        id_set: true,
        command,
        param: errno.map_or(0, |e| -e.code()),
    }
}

/// The code a `BinderError` carries.
fn br_of(br: &Br) -> u32 {
    match br {
        Br::DeadReply => br_code::DEAD_REPLY,
        Br::FailedReply => br_code::FAILED_REPLY,
        Br::FrozenReply => br_code::FROZEN_REPLY,
        other => unreachable!("{other:?} is not a transaction's error"),
    }
}

/// How a transaction failed (`BinderError`, error.rs:14): the code the
/// sender reads and, for `BR_FAILED_REPLY`, the errno it came from.
struct Failure {
    br: Br,
    errno: Option<Errno>,
}

impl Failure {
    fn dead() -> Self {
        Failure {
            br: Br::DeadReply,
            errno: None,
        }
    }
    fn errno(errno: Errno) -> Self {
        Failure {
            br: Br::FailedReply,
            errno: Some(errno),
        }
    }
}

impl Oracle for RustOracle {
    fn new(procs: &Procs, _version: Version) -> Self {
        let euids = &procs.euids;
        let mut model = RustOracle {
            all_procs: Vec::new(),
            tasks: procs.tasks.clone(),
            procs: Vec::new(),
            nodes: Vec::new(),
            threads: Vec::new(),
            calls: Vec::new(),
            deaths: Vec::new(),
            manager: None,
            manager_euid: None,
        };
        for (p, &euid) in euids.iter().enumerate() {
            model.procs.push(Proc {
                euid,
                alive: true,
                is_manager: false,
                refs: BTreeMap::new(),
                tree: BTreeMap::new(),
                created: BTreeMap::new(),
                pool: INLINE_HANDLES,
                buffers: VecDeque::new(),
                todo: VecDeque::new(),
                delivered_deaths: Vec::new(),
                listeners: BTreeMap::new(),
                threads: [None; MAX_THREADS],
                max_threads: 0,
                requested: 0,
                started: 0,
                frozen: false,
                sync_recv: false,
                async_recv: false,
                spam_detection: false,
                alloc: Alloc::new(),
            });
            // The opening thread writes BC_ENTER_LOOPER (docs/commands.md).
            let t0 = model.thread(p, Tid(0));
            model.threads[t0].entered = true;
            model.all_procs.push(p);
        }
        model
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
        match &step.command {
            Command::Exit => {
                self.exit(p, &mut fail, log);
                obs.ret = Some(Ret::Ok);
                self.drain(&mut obs);
                obs.normalise();
                return obs;
            }
            Command::Free if self.procs[p].buffers.is_empty() => {
                obs.ret = Some(Ret::Skipped);
                self.drain(&mut obs);
                obs.normalise();
                return obs;
            }
            _ => {}
        }
        // The command's thread (`Process::get_current_thread`,
        // process.rs:700; the extended error read after the command makes
        // it for the ioctls that do not).
        let th = self.thread(p, step.tid);
        let ret = match &step.command {
            Command::SetManager => self.set_manager(p, th, 0, 0, log),
            Command::SetManagerExt { ptr, cookie, .. } => {
                self.set_manager(p, th, *ptr, *cookie, log)
            }
            Command::Ref(cmd, handle) => self.ref_command(p, *cmd, *handle, &mut fail, log),
            Command::Send { to, payload } => {
                self.transaction(p, th, *to, payload, true, &mut fail, log);
                Ret::Ok
            }
            Command::Call { to, payload } => {
                self.transaction(p, th, *to, payload, false, &mut fail, log);
                Ret::Ok
            }
            Command::Reply(payload) => {
                self.reply(p, th, payload, &mut fail, log);
                Ret::Ok
            }
            Command::Free => self.free(p, &mut fail, log),
            Command::RequestDeath { handle, cookie } => {
                self.request_death(p, *handle, *cookie, log);
                Ret::Ok
            }
            Command::ClearDeath { handle, cookie } => {
                self.clear_death(p, th, *handle, *cookie, log);
                Ret::Ok
            }
            Command::RequestFreeze { handle, cookie } => {
                self.request_freeze(p, *handle, *cookie, log)
            }
            Command::ClearFreeze { handle, cookie } => self.clear_freeze(p, *handle, *cookie, log),
            Command::NodeInfo(handle) => self.node_info(p, *handle),
            Command::NodeDebug(ptr) => self.node_debug(p, *ptr),
            Command::Version => Ret::Version(PROTOCOL_VERSION),
            Command::ExtendedError => {
                // Thread::get_extended_error (thread.rs:521): read, cleared.
                let ee = std::mem::replace(&mut self.threads[th].ee, ExtendedError::NONE);
                Ret::Extended(ee)
            }
            Command::Looper(cmd) => {
                self.looper(p, th, *cmd);
                Ret::Ok
            }
            Command::ThreadExit => {
                // Process::remove_thread (process.rs:1185).
                self.thread_release(p, th, &mut fail, log);
                Ret::Ok
            }
            Command::MaxThreads(n) => {
                self.procs[p].max_threads = *n;
                Ret::Ok
            }
            Command::Freeze { target, .. } => self.freeze(target.index(), true),
            Command::Thaw(target) => self.freeze(target.index(), false),
            Command::FrozenInfo(target) => self.frozen_info(target.index()),
            Command::OnewaySpam(on) => {
                // set_oneway_spam_detection_enabled (process.rs:1194).
                self.procs[p].spam_detection = *on;
                Ret::Ok
            }
            // Thread::write's default arm (thread.rs:1548) and the ioctl
            // dispatch's (process.rs:1680).
            Command::Refused(_) => Ret::Err(Errno::Inval),
            Command::Exit => unreachable!("handled above"),
        };
        if let Ret::Err(e) = ret {
            // A failed BINDER_WRITE_READ is logged ("Write failure",
            // thread.rs:1646); the other ioctls fail silently.
            let write_read = matches!(
                step.command,
                Command::Ref(..)
                    | Command::RequestFreeze { .. }
                    | Command::ClearFreeze { .. }
                    | Command::Refused(
                        idpool::driver::Refused::AttemptAcquire
                            | idpool::driver::Refused::AcquireResult
                    )
            );
            if write_read {
                obs.log.push(Log::IoctlFailed(e));
            }
        }
        obs.ret = Some(ret);
        if !matches!(step.command, Command::ThreadExit) {
            let ee = std::mem::replace(&mut self.threads[th].ee, ExtendedError::NONE);
            obs.ee = Some(ee);
        }
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
                frozen: proc.alive && proc.frozen,
                refs: proc
                    .refs
                    .iter()
                    .map(|(&handle, r)| {
                        let state = RefState {
                            node: self.name(r.node),
                            strong: r.strong,
                            weak: r.weak,
                            death: r.death.map(|d| self.deaths[d].cookie),
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

    /// The driver's thread for thread `tid` of process `p`, made when the
    /// driver does not know it (`Thread::new`, thread.rs:466: no looper
    /// flags, nothing to do, `extended_error` `BR_OK`).
    fn thread(&mut self, p: usize, tid: Tid) -> ThreadId {
        if let Some(th) = self.procs[p].threads[tid.index()] {
            return th;
        }
        self.threads.push(Thread {
            pid: p,
            tid,
            registered: false,
            entered: false,
            todo: VecDeque::new(),
            readable: false,
            current: None,
            dead: false,
            ee: ExtendedError::NONE,
        });
        let th = self.threads.len() - 1;
        self.procs[p].threads[tid.index()] = Some(th);
        th
    }

    /// `InnerThread::push_work` (thread.rs:324): queued and readable;
    /// refused by a dead thread.
    fn push_thread(&mut self, th: ThreadId, work: Work) -> bool {
        let thread = &mut self.threads[th];
        if thread.dead {
            return false;
        }
        thread.todo.push_back(work);
        thread.readable = true;
        true
    }

    /// `InnerThread::push_work_deferred` (thread.rs:359).
    fn push_deferred(&mut self, th: ThreadId, work: Work) {
        self.threads[th].todo.push_back(work);
    }

    /// `Thread::push_work_if_looper` (thread.rs:669): on the thread when it
    /// is a live looper, else on its process.
    fn push_if_looper(&mut self, th: ThreadId, work: Work) {
        let thread = &self.threads[th];
        if (thread.registered || thread.entered) && !thread.dead {
            self.push_thread(th, work);
        } else {
            let p = thread.pid;
            self.push_proc(p, work);
        }
    }

    /// `ProcessInner::push_work` (process.rs:184): no thread ever waits
    /// here, so on the process's list; refused by a dead process.
    fn push_proc(&mut self, p: usize, work: Work) -> bool {
        if !self.procs[p].alive {
            return false;
        }
        self.procs[p].todo.push_back(work);
        true
    }

    /// Every allocation of process `p`'s: read, or on its way to it.
    fn buffers_to(&self, p: usize) -> Vec<&Buffer> {
        fn queued(w: &Work) -> Option<&Buffer> {
            match w {
                Work::Txn(t) => Some(&t.buffer),
                _ => None,
            }
        }
        let proc = &self.procs[p];
        let threads = proc
            .threads
            .iter()
            .flatten()
            .flat_map(|&th| self.threads[th].todo.iter());
        let waiting = self
            .nodes
            .iter()
            .filter(|m| m.owner == p)
            .flat_map(|m| m.waiting.iter().map(|t| &t.buffer));
        proc.buffers
            .iter()
            .chain(proc.todo.iter().filter_map(queued))
            .chain(threads.filter_map(queued))
            .chain(waiting)
            .collect()
    }

    /// A node's strong and weak counts, which `BINDER_GET_NODE_INFO_FOR_REF`
    /// reports as they are (`Node::populate_counts`, node.rs:492), counted
    /// from what holds them:
    ///
    /// - one strong count when it is the context's manager node (the
    ///   context keeps a strong `NodeRef`, `Context::set_manager_node`);
    /// - per reference: one strong count if its strong count is not 0, one
    ///   weak count if its weak count is not 0;
    /// - while the owner lives, one strong count per transaction to the
    ///   node whose allocation is not freed, on its way or read (the
    ///   allocation keeps the target's `NodeRef`, `Transaction::new`), and
    ///   one of either per object of those allocations that is the node
    ///   itself, translated back for its owner (`transfer_binder_object`,
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
            for buffer in self.buffers_to(node.owner) {
                strong += u32::from(buffer.target == Some(n));
                for object in &buffer.objects {
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

    /// The node `ptr` of process `p`, created with `cookie` if its tree has
    /// none (`Process::get_node_inner`, process.rs:773); one with another
    /// cookie is `EINVAL` (`get_existing_node`, 286).
    fn get_node(&mut self, p: usize, ptr: u64, cookie: u64) -> Result<NodeId, Errno> {
        if let Some(&n) = self.procs[p].tree.get(&ptr) {
            if self.nodes[n].cookie != cookie {
                return Err(Errno::Inval);
            }
            return Ok(n);
        }
        let created = self.procs[p].created.entry(ptr).or_insert(0);
        let serial = *created;
        *created += 1;
        self.nodes.push(Node {
            owner: p,
            ptr,
            cookie,
            serial,
            told_strong: false,
            told_weak: false,
            active_inc_refs: 0,
            pushed_node: false,
            pushed_wrapper: false,
            weak_z2o: false,
            strong_z2o: false,
            oneway_busy: false,
            waiting: VecDeque::new(),
            freeze_list: Vec::new(),
            leaked_strong: 0,
            leaked_weak: 0,
        });
        let n = self.nodes.len() - 1;
        self.procs[p].tree.insert(ptr, n);
        Ok(n)
    }

    /// `Node::incr_refcount_allow_zero2one` (node.rs:424) and its wrapper
    /// (466), after a `NodeRef` from `Process::get_node` took a count of
    /// that kind: when the owner was not told of one, the node is queued
    /// deferred on the calling thread as the kind's zero-to-one increment,
    /// unless one is queued; a strong one while the node is queued for
    /// another reason goes in a wrapper.
    fn incr_zero2one(&mut self, n: NodeId, strong: bool, th: ThreadId) {
        if !self.owner_alive(n) {
            return;
        }
        let node = &mut self.nodes[n];
        if (strong && node.told_strong) || (!strong && node.told_weak) {
            return;
        }
        if !strong {
            // `can_push_weak_zero2one_normally` is asserted (node.rs:97):
            // no program reaches a normal push pending on a node its owner
            // was never told of.
            if !node.weak_z2o && !node.strong_z2o && !node.pushed_node {
                node.pushed_node = true;
                node.weak_z2o = true;
                self.push_deferred(th, Work::Node(n));
            }
        } else if !node.strong_z2o {
            node.strong_z2o = true;
            if !node.pushed_node {
                node.pushed_node = true;
                self.push_deferred(th, Work::Node(n));
            } else {
                node.pushed_wrapper = true;
                self.push_deferred(th, Work::Wrapper(n));
            }
        }
    }

    /// `Node::update_refcount_locked` (node.rs:384) after a count of that
    /// kind changed: the owner must hear of an increment it was not told
    /// of, or of the last count of a kind it was told of going; the node is
    /// then queued (on the process, or deferred on `thread`) unless it or
    /// its wrapper is queued already. Nothing for a dead owner.
    fn update_count(&mut self, n: NodeId, inc: bool, strong: bool, thread: Option<ThreadId>) {
        if !self.owner_alive(n) {
            return;
        }
        let (s, w) = self.counts(n);
        let node = &self.nodes[n];
        let (count, has) = if strong {
            (s, node.told_strong)
        } else {
            (w, node.told_weak)
        };
        let need_push = if inc { !has } else { count == 0 && has };
        if need_push && !node.pushed_node && !node.pushed_wrapper {
            let owner = node.owner;
            self.nodes[n].pushed_node = true;
            match thread {
                Some(th) => self.push_deferred(th, Work::Node(n)),
                None => {
                    self.push_proc(owner, Work::Node(n));
                }
            }
        }
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
            freeze: None,
        };
        proc.refs.insert(handle, r);
        Ok(handle)
    }

    /// `Process::update_ref` (process.rs:961) for any handle but the
    /// manager case of handle 0, and `NodeRef::update` (node.rs:858): a
    /// strong change of a reference with no strong count does nothing,
    /// silently; a decrement of a zero weak count is logged (885). A
    /// missing handle is logged (1024), unless the process is dead. A count
    /// going from or to 0 changes the node's ([`RustOracle::update_count`]).
    /// The reference goes when both counts reach 0: its death notification
    /// is aborted, its freeze listener dropped (989-1006), and the pool may
    /// shrink: a pool of more than 64 handles whose last handle is below a
    /// quarter of it halves, an empty one goes back to 64
    /// (`IdPool::shrink_request`); the smaller pool is an allocation only
    /// above 64 handles, and when it fails nothing changes.
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
        let node = r.node;
        let count = if strong { &mut r.strong } else { &mut r.weak };
        if increment {
            *count += 1;
            if *count == 1 {
                self.update_count(node, true, strong, None);
            }
            return;
        }
        if *count == 0 {
            log.push(Log::InvalidDecrement { strong });
            return;
        }
        *count -= 1;
        let (now, gone) = (*count, r.strong == 0 && r.weak == 0);
        if !gone {
            if now == 0 {
                self.update_count(node, false, strong, None);
            }
            return;
        }
        let r = proc.refs.remove(&handle).expect("found");
        self.update_count(node, false, strong, None);
        if let Some(d) = r.death {
            let death = &mut self.deaths[d];
            death.aborted = true;
            death.cleared = true;
            self.procs[p].delivered_deaths.retain(|&x| x != d);
        }
        if let Some(cookie) = r.freeze {
            if let Some(listener) = self.procs[p].listeners.remove(&cookie) {
                if !listener.is_clearing {
                    self.nodes[listener.node].freeze_list.retain(|&q| q != p);
                }
            }
        }
        let proc = &mut self.procs[p];
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

    /// `BINDER_SET_CONTEXT_MGR` and `..._EXT` (`Process::set_as_manager`,
    /// process.rs:746): first a strong `NodeRef` on the node the object
    /// names (pointer 0 and cookie 0 without one) through
    /// `Process::get_node`, so created if missing (a zero-to-one increment
    /// deferred on the thread) and `EINVAL` for an existing one with
    /// another cookie; then `Context::set_manager_node` (context.rs:110)
    /// refuses a second manager (`EBUSY`, logged) or another euid than the
    /// previous manager's (`EPERM`, silently), the `NodeRef` dropped; on
    /// success the node counts as told of both kinds of reference
    /// (`Node::force_has_count`).
    fn set_manager(
        &mut self,
        p: usize,
        th: ThreadId,
        ptr: u64,
        cookie: u64,
        log: &mut Vec<Log>,
    ) -> Ret {
        let n = match self.get_node(p, ptr, cookie) {
            Ok(n) => n,
            Err(e) => return Ret::Err(e),
        };
        self.incr_zero2one(n, true, th);
        let refused = if self.manager.is_some() {
            log.push(Log::ManagerAlreadySet);
            Some(Errno::Busy)
        } else if self
            .manager_euid
            .is_some_and(|first| first != self.procs[p].euid)
        {
            Some(Errno::Perm)
        } else {
            None
        };
        if let Some(e) = refused {
            self.update_count(n, false, true, None);
            return Ret::Err(e);
        }
        self.manager = Some(n);
        self.manager_euid = Some(self.procs[p].euid);
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

    /// A transaction that failed as `Thread::transaction` (thread.rs:1298)
    /// reports it: the code queued for the thread (`push_return_work`);
    /// with an errno, the extended error and the summary line too (1315-1345).
    fn fail_transaction(&mut self, th: ThreadId, failure: Failure, log: &mut Vec<Log>) {
        if let Some(errno) = failure.errno {
            self.threads[th].ee = extended(br_of(&failure.br), Some(errno));
            log.push(Log::TransactionFailed);
        }
        self.push_thread(th, Work::Error(failure.br));
    }

    /// `BC_TRANSACTION`, one-way (`oneway_transaction_inner`,
    /// thread.rs:1457) or two-way (`transaction_inner`, 1358). The ioctl
    /// returns 0; a failure is queued for the sender
    /// ([`RustOracle::fail_transaction`]).
    ///
    /// The target (`Process::get_transaction_node`, process.rs:924):
    /// handle 0 is the manager's node (`BR_DEAD_REPLY` without one,
    /// `EINVAL` when the sender is the manager); another handle needs a
    /// reference (else logged, `ENOENT`) with a strong count (else logged
    /// twice, `EINVAL`). A call from a thread whose current transaction is
    /// one it sent is refused (`pr_warn!`, `EINVAL`,
    /// `top_of_transaction_stack` 1246). The target's owner must still have
    /// its mapping (`Process::buffer_alloc`: else logged, `BR_DEAD_REPLY`).
    /// Then the objects ([`RustOracle::translate`]; a failure is logged
    /// twice, thread.rs:1120, transaction.rs:179).
    ///
    /// Submitting (`Transaction::submit`, transaction.rs:338): a one-way
    /// transaction to a frozen process is queued all the same and read
    /// `BR_TRANSACTION_PENDING_FROZEN` (with `+update` replacing a waiting
    /// one it `can_replace`, 424); it waits behind the node's unfreed
    /// one-way buffer. A call to a frozen process is `BR_FROZEN_REPLY`; it
    /// goes to the thread of the target process found down its stack
    /// (`find_target_thread`, 290: dead or not, a dead one is
    /// `BR_DEAD_REPLY`), else to the process; its completion waits,
    /// deferred, for the reply. Neither `BR_DEAD_REPLY` nor a frozen reply
    /// carries an errno: no extended error, no line.
    #[allow(clippy::too_many_arguments)]
    fn transaction(
        &mut self,
        p: usize,
        th: ThreadId,
        to: u32,
        payload: &Payload,
        oneway: bool,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        self.threads[th].ee = ExtendedError::NONE;
        let target = if to == 0 {
            match self.manager {
                None => Err(Failure::dead()),
                Some(m) if self.nodes[m].owner == p => Err(Failure::errno(Errno::Inval)),
                Some(m) => Ok(m),
            }
        } else {
            match self.procs[p].refs.get(&to).copied() {
                Some(r) if r.strong > 0 => Ok(r.node),
                found => {
                    let errno = if found.is_some() {
                        log.push(Log::WeakAsStrong);
                        Errno::Inval
                    } else {
                        Errno::NoEnt
                    };
                    log.push(Log::TransactionToInvalidHandle(to));
                    Err(Failure::errno(errno))
                }
            }
        };
        let target = match target {
            Ok(n) => n,
            Err(failure) => return self.fail_transaction(th, failure, log),
        };
        // NodeRef::clone of the target (node.rs:850).
        self.update_count(target, true, true, None);
        let top = self.threads[th].current;
        if !oneway && top.is_some_and(|c| self.calls[c].from == th) {
            log.push(Log::CallBadStack);
            return self.fail_transaction(th, Failure::errno(Errno::Inval), log);
        }
        let receiver = self.nodes[target].owner;
        if !self.procs[receiver].alive {
            log.push(Log::BufferAllocFailed);
            return self.fail_transaction(th, Failure::dead(), log);
        }
        let size = buffer_size(payload);
        let (offset, suspect) =
            match self.procs[receiver]
                .alloc
                .reserve(size, oneway, self.tasks[p].index())
            {
                Ok(found) => found,
                Err(errno) => {
                    // Process::buffer_alloc's ENOSPC: "Failed to allocate
                    // buffer" (thread.rs:1055), then transaction.rs:179.
                    log.extend([Log::BufferAllocFailed, Log::CopyFailed]);
                    return self.fail_transaction(th, Failure::errno(errno), log);
                }
            };
        let objects = match self.translate(p, th, receiver, &payload.objects, fail, log) {
            Ok(objects) => objects,
            Err(errno) => {
                log.extend([Log::TranslateFailed, Log::CopyFailed]);
                self.procs[receiver].alloc.free(offset);
                return self.fail_transaction(th, Failure::errno(errno), log);
            }
        };
        let flags = payload.flags.0 | if oneway { TF_ONE_WAY } else { 0 };
        let txn = Txn {
            buffer: Buffer {
                target: Some(target),
                objects,
                oneway,
                offset: Some(offset),
            },
            call: None,
            reply: false,
            sender: p,
            flags,
        };
        let frozen = self.procs[receiver].frozen;
        if oneway {
            if frozen {
                self.procs[receiver].async_recv = true;
                if payload.flags.has(TxnFlags::UPDATE_TXN) {
                    // The same sending task (`can_replace` compares pids).
                    let tasks = &self.tasks;
                    let same = |t: &Txn| tasks[t.sender] == tasks[p] && t.flags == flags;
                    let waiting = &mut self.nodes[target].waiting;
                    if let Some(i) = waiting.iter().position(same) {
                        let old = waiting.remove(i).expect("found");
                        let mut buffer = old.buffer;
                        // take_oneway_node: no pending_oneway_finished.
                        buffer.oneway = false;
                        self.drop_buffer(receiver, buffer, fail, log);
                    }
                }
            }
            let node = &mut self.nodes[target];
            if node.oneway_busy {
                node.waiting.push_back(txn);
            } else {
                node.oneway_busy = true;
                self.push_proc(receiver, Work::Txn(txn));
            }
            if frozen {
                self.push_thread(th, Work::Error(Br::PendingFrozen));
            } else if suspect && self.procs[p].spam_detection {
                // oneway_transaction_inner (thread.rs:1462-1466).
                self.push_thread(th, Work::SpamSuspect);
            } else {
                self.push_thread(th, Work::Complete);
            }
            return;
        }
        if frozen {
            self.procs[receiver].sync_recv = true;
            self.drop_buffer(receiver, txn.buffer, fail, log);
            return self.fail_transaction(
                th,
                Failure {
                    br: Br::FrozenReply,
                    errno: None,
                },
                log,
            );
        }
        self.calls.push(Call {
            from: th,
            from_parent: top,
        });
        let call = self.calls.len() - 1;
        let txn = Txn {
            call: Some(call),
            ..txn
        };
        let mut below = top;
        let mut target_thread = None;
        while let Some(c) = below {
            let from = self.calls[c].from;
            if self.threads[from].pid == receiver {
                target_thread = Some(from);
                break;
            }
            below = self.calls[c].from_parent;
        }
        let delivered = match target_thread {
            Some(t) => self.push_thread(t, Work::Txn(txn.clone())),
            None => self.push_proc(receiver, Work::Txn(txn.clone())),
        };
        if !delivered {
            self.drop_buffer(receiver, txn.buffer, fail, log);
            return self.fail_transaction(th, Failure::dead(), log);
        }
        self.threads[th].current = Some(call);
        self.push_deferred(th, Work::Complete);
    }

    /// `BC_REPLY` (`Thread::reply_inner`, thread.rs:1399). The call to
    /// answer is the thread's current transaction, unless there is none or
    /// it is one the thread sent ("no transaction stack", logged, `EINVAL`,
    /// `pop_transaction_to_reply` 368); it is taken off (the thread's next
    /// current one is the first down its chain that the thread sent), and
    /// must be its caller's current one (else logged, `EINVAL`). The reply
    /// is then built for the caller's process: when that fails (its mapping
    /// gone: two lines; the objects: two lines), "reply to N failed" is
    /// logged, the caller has the error in its extended error when it held
    /// `BR_OK`, reads `BR_FAILED_REPLY`, and the replier reads
    /// `BR_TRANSACTION_COMPLETE`. Otherwise the replier reads its
    /// completion and the caller the reply ([`RustOracle::deliver_reply`]).
    fn reply(
        &mut self,
        p: usize,
        th: ThreadId,
        payload: &Payload,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        self.threads[th].ee = ExtendedError::NONE;
        let call = match self.threads[th].current {
            Some(c) if self.calls[c].from != th => c,
            _ => {
                log.push(Log::ReplyNoStack);
                return self.fail_transaction(th, Failure::errno(Errno::Inval), log);
            }
        };
        self.threads[th].current = self.find_from(call, th);
        let caller = self.calls[call].from;
        if self.threads[caller].current != Some(call) {
            log.push(Log::ReplyBadStack);
            return self.fail_transaction(th, Failure::errno(Errno::Inval), log);
        }
        let receiver = self.threads[caller].pid;
        let built = if !self.procs[receiver].alive {
            log.extend([Log::BufferAllocFailed, Log::CopyFailed]);
            Err(Failure::dead())
        } else {
            match self.procs[receiver].alloc.reserve(
                buffer_size(payload),
                false,
                self.tasks[p].index(),
            ) {
                Err(errno) => {
                    log.extend([Log::BufferAllocFailed, Log::CopyFailed]);
                    Err(Failure::errno(errno))
                }
                Ok((offset, _)) => self
                    .translate(p, th, receiver, &payload.objects, fail, log)
                    .map(|objects| (objects, offset))
                    .map_err(|errno| {
                        log.extend([Log::TranslateFailed, Log::CopyFailed]);
                        self.procs[receiver].alloc.free(offset);
                        Failure::errno(errno)
                    }),
            }
        };
        match built {
            Ok((objects, offset)) => {
                self.push_thread(th, Work::Complete);
                let txn = Txn {
                    buffer: Buffer {
                        target: None,
                        objects,
                        oneway: false,
                        offset: Some(offset),
                    },
                    call: None,
                    reply: true,
                    sender: p,
                    flags: payload.flags.0,
                };
                self.deliver_reply(call, Ok(txn), None, fail, log);
            }
            Err(failure) => {
                log.push(Log::ReplyFailed);
                let ee = extended(br_of(&failure.br), failure.errno);
                self.deliver_reply(call, Err(Br::FailedReply), Some(ee), fail, log);
                self.push_thread(th, Work::Error(Br::TransactionComplete));
            }
        }
    }

    /// `Transaction::find_from` (transaction.rs:302): the first call down
    /// `call`'s chain (below it) that thread `th` sent.
    fn find_from(&self, call: CallId, th: ThreadId) -> Option<CallId> {
        let mut below = self.calls[call].from_parent;
        while let Some(c) = below {
            if self.calls[c].from == th {
                return Some(c);
            }
            below = self.calls[c].from_parent;
        }
        None
    }

    /// `Thread::deliver_reply` (thread.rs:1177): the call's caller, when
    /// `call` is its current transaction, has it taken off (its next
    /// current one the call's parent); a live caller has `ee` set when it
    /// held `BR_OK` and reads the reply or the error; a dead one drops the
    /// reply and has its own stack unwound ([`RustOracle::unwind`]).
    fn deliver_reply(
        &mut self,
        call: CallId,
        reply: Result<Txn, Br>,
        ee: Option<ExtendedError>,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        let caller = self.calls[call].from;
        if self.threads[caller].current != Some(call) {
            if let Ok(txn) = reply {
                self.drop_buffer(self.threads[caller].pid, txn.buffer, fail, log);
            }
            return;
        }
        self.threads[caller].current = self.calls[call].from_parent;
        if self.threads[caller].dead {
            if let Ok(txn) = reply {
                self.drop_buffer(self.threads[caller].pid, txn.buffer, fail, log);
            }
            return self.unwind(caller, fail, log);
        }
        if let Some(ee) = ee {
            if self.threads[caller].ee.command == br_code::OK {
                self.threads[caller].ee = ee;
            }
        }
        let work = match reply {
            Ok(txn) => Work::Txn(txn),
            Err(br) => Work::Error(br),
        };
        self.push_thread(caller, work);
    }

    /// `Thread::unwind_transaction_stack` (thread.rs:1153): the thread's
    /// current transaction, when it did not send it, is answered
    /// `BR_DEAD_REPLY`; when that caller is dead too, its own is, and so on.
    fn unwind(&mut self, th: ThreadId, fail: &mut FailOnce, log: &mut Vec<Log>) {
        let call = match self.threads[th].current {
            Some(c) if self.calls[c].from != th => c,
            _ => return,
        };
        self.threads[th].current = self.find_from(call, th);
        self.deliver_reply(call, Err(Br::DeadReply), None, fail, log);
    }

    /// The objects of a transaction, in order, for process `receiver`
    /// (`Thread::translate_object`, thread.rs:703): a node of the
    /// sender's, through `Process::get_node` (created if missing, a
    /// zero-to-one increment deferred on the thread; another cookie is
    /// `EINVAL`), or a handle of the sender's (which must exist, `ENOENT`,
    /// and be strong for a strong object, logged, `EINVAL`), becomes the
    /// node itself for its owner, else a handle ([`RustOracle::insert`] from
    /// 1, `ENOMEM`). At the first failure the objects before it are undone
    /// as a dropped allocation undoes them.
    fn translate(
        &mut self,
        p: usize,
        th: ThreadId,
        receiver: usize,
        objects: &[Object],
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<Vec<Carried>, Errno> {
        let mut carried = Vec::new();
        for object in objects.iter().flat_map(Object::expand) {
            match self.translate_one(p, th, receiver, object, fail, log) {
                Ok(c) => carried.push(c),
                Err(errno) => {
                    let undone = Buffer {
                        target: None,
                        objects: carried,
                        oneway: false,
                        offset: None,
                    };
                    self.drop_buffer(receiver, undone, fail, log);
                    return Err(errno);
                }
            }
        }
        Ok(carried)
    }

    fn translate_one(
        &mut self,
        p: usize,
        th: ThreadId,
        receiver: usize,
        object: Object,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<Carried, Errno> {
        let (n, strong) = match object {
            Object::Nodes { .. } => unreachable!("runs are expanded"),
            Object::Node { ptr, strong } => {
                let n = self.get_node(p, ptr, ptr)?;
                self.incr_zero2one(n, strong, th);
                (n, strong)
            }
            Object::Handle { handle, strong } => {
                let r = *self.procs[p].refs.get(&handle).ok_or(Errno::NoEnt)?;
                if strong && r.strong == 0 {
                    log.push(Log::WeakAsStrong);
                    return Err(Errno::Inval);
                }
                // NodeRef::clone: a new count (node.rs:850).
                self.update_count(r.node, true, strong, None);
                (r.node, strong)
            }
        };
        if self.nodes[n].owner == receiver {
            return Ok(Carried::Node { node: n, strong });
        }
        match self.insert(receiver, n, strong, 1, fail) {
            Ok(handle) => Ok(Carried::Handle { handle, strong }),
            Err(errno) => {
                // The NodeRef is dropped (node.rs:905).
                self.update_count(n, false, strong, None);
                Err(errno)
            }
        }
    }

    /// `Allocation::drop` (allocation.rs:248) of an allocation of process
    /// `p`'s that no list holds any more: a one-way buffer lets the next
    /// one-way transaction waiting for its node be queued
    /// (`Node::pending_oneway_finished`, node.rs:565); its target loses
    /// its count; each handle object is a decrement of that handle now
    /// ([`RustOracle::update_ref`]); each node object gives its count back
    /// through the owner's tree (`Process::update_node`, process.rs:1031),
    /// or leaks it when the node is no longer there.
    fn drop_buffer(&mut self, p: usize, buffer: Buffer, fail: &mut FailOnce, log: &mut Vec<Log>) {
        if let Some(offset) = buffer.offset {
            self.procs[p].alloc.free(offset);
        }
        if let (true, Some(target)) = (buffer.oneway, buffer.target) {
            if self.procs[p].alive {
                let node = &mut self.nodes[target];
                match node.waiting.pop_front() {
                    Some(next) => {
                        self.push_proc(p, Work::Txn(next));
                    }
                    None => node.oneway_busy = false,
                }
            }
        }
        if let Some(target) = buffer.target {
            self.update_count(target, false, true, None);
        }
        for object in buffer.objects {
            match object {
                Carried::Handle { handle, strong } => {
                    self.update_ref(p, handle, false, strong, fail, log);
                }
                Carried::Node { node, strong } => {
                    let ptr = self.nodes[node].ptr;
                    if self.procs[p].tree.get(&ptr) == Some(&node) {
                        self.update_count(node, false, strong, None);
                    } else {
                        self.leak(node, strong);
                    }
                }
            }
        }
    }

    fn leak(&mut self, n: NodeId, strong: bool) {
        let node = &mut self.nodes[n];
        *(if strong {
            &mut node.leaked_strong
        } else {
            &mut node.leaked_weak
        }) += 1;
    }

    /// The transaction is read: its objects as the reader finds them.
    fn received(&self, buffer: &Buffer) -> Vec<Received> {
        buffer
            .objects
            .iter()
            .map(|c| match *c {
                Carried::Handle { handle, strong } => Received::Handle { handle, strong },
                Carried::Node { node, strong } => Received::Node {
                    ptr: self.nodes[node].ptr,
                    strong,
                },
            })
            .collect()
    }

    /// `BC_FREE_BUFFER` on the oldest buffer: the allocation is dropped
    /// ([`RustOracle::drop_buffer`]).
    fn free(&mut self, p: usize, fail: &mut FailOnce, log: &mut Vec<Log>) -> Ret {
        let buffer = self.procs[p].buffers.pop_front().expect("checked");
        self.drop_buffer(p, buffer, fail, log);
        Ret::Ok
    }

    /// `Process::request_death` (process.rs:1263): on a reference that
    /// exists (else logged) and has none yet (else logged); when the
    /// node's owner is already dead the notification is queued on the
    /// process at once (`NodeDeath::set_dead`, node.rs:1049).
    fn request_death(&mut self, p: usize, handle: u32, cookie: u64, log: &mut Vec<Log>) {
        let Some(r) = self.procs[p].refs.get(&handle).copied() else {
            log.push(Log::DeathInvalidRef { request: true });
            return;
        };
        if r.death.is_some() {
            log.push(Log::DeathAlreadySet);
            return;
        }
        self.deaths.push(Death {
            cookie,
            dead: false,
            cleared: false,
            notification_done: false,
            aborted: false,
        });
        let d = self.deaths.len() - 1;
        self.procs[p].refs.get_mut(&handle).expect("found").death = Some(d);
        if !self.owner_alive(r.node) {
            self.deaths[d].dead = true;
            self.push_proc(p, Work::Death(d));
        }
    }

    /// `Process::clear_death` (process.rs:1329): the reference must exist
    /// and have a notification with this cookie (each failure logged).
    /// `NodeDeath::set_cleared` (node.rs:1007): a notification whose node
    /// is alive, or whose `BR_DEAD_BINDER` was done, has its
    /// `BR_CLEAR_DEATH_NOTIFICATION_DONE` queued on the thread when it is
    /// a looper, else on the process; one whose `BR_DEAD_BINDER` is pending
    /// waits for its done.
    fn clear_death(
        &mut self,
        p: usize,
        th: ThreadId,
        handle: u32,
        cookie: u64,
        log: &mut Vec<Log>,
    ) {
        let Some(r) = self.procs[p].refs.get_mut(&handle) else {
            log.push(Log::DeathInvalidRef { request: false });
            return;
        };
        let Some(d) = r.death else {
            log.push(Log::DeathNotActive);
            return;
        };
        if self.deaths[d].cookie != cookie {
            log.push(Log::DeathCookieMismatch);
            return;
        }
        r.death = None;
        let death = &mut self.deaths[d];
        if death.cleared {
            return;
        }
        death.cleared = true;
        if !death.dead || death.notification_done {
            self.push_if_looper(th, Work::Death(d));
        }
    }

    /// `Process::request_freeze_notif` (freeze.rs:180): on a reference that
    /// exists (else logged, `EINVAL`) without a listener (else logged,
    /// `EINVAL`), with a cookie no other listener of the process has
    /// (logged "duplicate cookie", `EINVAL`), unless that one is being
    /// cleared on the same node, in which case it is counted as a
    /// duplicate. The process joins the node's listeners and a message is
    /// queued on it ([`RustOracle::read`] says what it reports).
    fn request_freeze(&mut self, p: usize, handle: u32, cookie: u64, log: &mut Vec<Log>) -> Ret {
        let Some(r) = self.procs[p].refs.get(&handle).copied() else {
            log.push(Log::FreezeInvalidRef { request: true });
            return Ret::Err(Errno::Inval);
        };
        if r.freeze.is_some() {
            log.push(Log::FreezeAlreadySet);
            return Ret::Err(Errno::Inval);
        }
        let proc = &mut self.procs[p];
        if let Some(dupe) = proc.listeners.get_mut(&cookie) {
            if !(dupe.node == r.node && dupe.is_clearing) {
                log.push(Log::FreezeDuplicateCookie);
                return Ret::Err(Errno::Inval);
            }
            if dupe.is_pending {
                dupe.pending_dups += 1;
            } else {
                dupe.cleared_dups += 1;
            }
            dupe.last_is_frozen = None;
            dupe.is_pending = false;
            dupe.is_clearing = false;
        } else {
            proc.listeners.insert(
                cookie,
                Listener {
                    node: r.node,
                    last_is_frozen: None,
                    is_pending: false,
                    is_clearing: false,
                    pending_dups: 0,
                    cleared_dups: 0,
                },
            );
        }
        self.nodes[r.node].freeze_list.push(p);
        self.procs[p].refs.get_mut(&handle).expect("found").freeze = Some(cookie);
        self.push_proc(p, Work::Freeze(cookie));
        Ret::Ok
    }

    /// `Process::clear_freeze_notif` (freeze.rs:316): the reference must
    /// exist, have a listener, with this cookie (each failure logged,
    /// `EINVAL`). The listener is clearing, leaves the node's list, and
    /// unless a `BR_FROZEN_BINDER` awaits its done, a message is queued.
    fn clear_freeze(&mut self, p: usize, handle: u32, cookie: u64, log: &mut Vec<Log>) -> Ret {
        let Some(r) = self.procs[p].refs.get_mut(&handle) else {
            log.push(Log::FreezeInvalidRef { request: false });
            return Ret::Err(Errno::Inval);
        };
        let Some(c) = r.freeze else {
            log.push(Log::FreezeNotActive);
            return Ret::Err(Errno::Inval);
        };
        if c != cookie {
            log.push(Log::FreezeCookieMismatch);
            return Ret::Err(Errno::Inval);
        }
        r.freeze = None;
        let Some(listener) = self.procs[p].listeners.get_mut(&cookie) else {
            unreachable!("a reference's freeze cookie has its listener");
        };
        listener.is_clearing = true;
        let (node, pending) = (listener.node, listener.is_pending);
        self.nodes[node].freeze_list.retain(|&q| q != p);
        if !pending {
            self.push_proc(p, Work::Freeze(cookie));
        }
        Ret::Ok
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

    /// `Process::get_node_debug_info` (process.rs:1202) and
    /// `Node::populate_debug_info` (node.rs:502): the first node of the
    /// caller's above the pointer, with its cookie and `has_count`s.
    fn node_debug(&self, p: usize, above: u64) -> Ret {
        match self.procs[p].tree.iter().find(|(&ptr, _)| ptr > above) {
            Some((_, &n)) => {
                let node = &self.nodes[n];
                Ret::NodeDebug {
                    ptr: node.ptr,
                    cookie: node.cookie,
                    has_strong: node.told_strong,
                    has_weak: node.told_weak,
                }
            }
            None => Ret::NodeDebug {
                ptr: 0,
                cookie: 0,
                has_strong: false,
                has_weak: false,
            },
        }
    }

    /// `BC_REGISTER_LOOPER` (`Process::register_thread`, process.rs:300,
    /// then `looper_register`, thread.rs:400): a requested thread, if any,
    /// is counted started, entered or not; `BC_ENTER_LOOPER`,
    /// `BC_EXIT_LOOPER` set their flag. No line for any misuse.
    fn looper(&mut self, p: usize, th: ThreadId, cmd: LooperCmd) {
        match cmd {
            LooperCmd::Register => {
                let proc = &mut self.procs[p];
                if proc.requested > 0 {
                    proc.requested -= 1;
                    proc.started += 1;
                }
                self.threads[th].registered = true;
            }
            LooperCmd::Enter => self.threads[th].entered = true,
            LooperCmd::Exit => {}
        }
    }

    /// `Thread::release` (thread.rs:1697): the thread is dead, its stack
    /// unwound ([`RustOracle::unwind`]), and every work item on it, deferred
    /// or not, cancelled ([`RustOracle::cancel`]).
    fn thread_release(&mut self, p: usize, th: ThreadId, fail: &mut FailOnce, log: &mut Vec<Log>) {
        let thread = &mut self.threads[th];
        thread.dead = true;
        self.procs[p].threads[thread.tid.index()] = None;
        self.unwind(th, fail, log);
        let thread = &mut self.threads[th];
        thread.readable = false;
        let todo = std::mem::take(&mut thread.todo);
        for work in todo {
            self.cancel(p, work, fail, log);
        }
    }

    /// `DeliverToRead::cancel` of a work item of process `p`'s: a call is
    /// answered `BR_DEAD_REPLY` (`Transaction::cancel`, transaction.rs:555),
    /// any other transaction logged undelivered, its allocation dropped; a
    /// completion, an error, a death notification, a freeze message each
    /// logged undelivered; a node (or its wrapper) queued again on its
    /// live owner (`Node::cancel`, node.rs:741).
    fn cancel(&mut self, p: usize, work: Work, fail: &mut FailOnce, log: &mut Vec<Log>) {
        match work {
            Work::Txn(txn) => {
                self.drop_buffer(p, txn.buffer, fail, log);
                match txn.call {
                    Some(call) => self.deliver_reply(call, Err(Br::DeadReply), None, fail, log),
                    None => log.push(Log::UndeliveredTransaction),
                }
            }
            Work::Complete | Work::SpamSuspect => log.push(Log::UndeliveredComplete),
            Work::Error(_) => log.push(Log::UndeliveredError),
            Work::Death(_) => log.push(Log::UndeliveredDeath),
            Work::Freeze(_) => log.push(Log::UndeliveredFreeze),
            Work::Node(n) => {
                if self.owner_alive(n) {
                    self.push_proc(p, Work::Node(n));
                }
            }
            Work::Wrapper(n) => {
                if self.owner_alive(n) {
                    let node = &mut self.nodes[n];
                    node.pushed_wrapper = false;
                    node.weak_z2o = false;
                    if !node.pushed_node {
                        node.pushed_node = true;
                        self.push_proc(p, Work::Node(n));
                    }
                }
            }
        }
    }

    /// `txns_pending_locked` (process.rs:335): a transaction on its way to
    /// the process (`outstanding_txns`) or a thread with a current one.
    fn txns_pending(&self, p: usize) -> bool {
        let proc = &self.procs[p];
        let on_way = self.buffers_to(p).len() > proc.buffers.len();
        let current = proc
            .threads
            .iter()
            .flatten()
            .any(|&th| self.threads[th].current.is_some());
        on_way || current
    }

    /// The processes of `all_procs` whose task is `target`'s
    /// (`get_procs_with_pid`, context.rs:165), first opened first.
    /// `target` may have left it.
    fn with_pid_of(&self, target: usize) -> Vec<usize> {
        let task = self.tasks[target];
        self.all_procs
            .iter()
            .copied()
            .filter(|&q| self.tasks[q] == task)
            .collect()
    }

    /// `BINDER_FREEZE` (`ioctl_freeze`, process.rs:1634): 0 with nothing
    /// done when no process has the pid (an exited one was deregistered,
    /// `deferred_release` 1420); otherwise the processes with the pid in
    /// `all_procs` order, none after the first that fails (`?`, 1648),
    /// whose error is the ioctl's. Freezing one (`Process::ioctl_freeze`,
    /// 1534) clears `sync_recv`/`async_recv` and fails with `EAGAIN`,
    /// thawed, while transactions are pending (nothing else runs while it
    /// waits); thawing always succeeds. Both then queue a message for every
    /// process listening on one of its nodes (`prepare_freeze_messages`,
    /// freeze.rs:428).
    fn freeze(&mut self, target: usize, enable: bool) -> Ret {
        for p in self.with_pid_of(target) {
            let proc = &mut self.procs[p];
            proc.sync_recv = false;
            proc.async_recv = false;
            if enable && self.txns_pending(p) {
                self.procs[p].frozen = false;
                return Ret::Err(Errno::Again);
            }
            self.procs[p].frozen = enable;
            let nodes: Vec<NodeId> = self.procs[p].tree.values().copied().collect();
            for n in nodes {
                for q in self.nodes[n].freeze_list.clone() {
                    let cookie = self.procs[q]
                        .refs
                        .values()
                        .find(|r| r.node == n)
                        .and_then(|r| r.freeze);
                    if let Some(cookie) = cookie {
                        self.push_proc(q, Work::Freeze(cookie));
                    }
                }
            }
        }
        Ret::Ok
    }

    /// `BINDER_GET_FROZEN_INFO` (`get_frozen_status`, process.rs:1605):
    /// `EINVAL` without a process with the pid; else, or-ed over them,
    /// `sync_recv` with bit 1 set while transactions are pending, and
    /// `async_recv`.
    fn frozen_info(&self, target: usize) -> Ret {
        let procs = self.with_pid_of(target);
        if procs.is_empty() {
            return Ret::Err(Errno::Inval);
        }
        let (mut sync_recv, mut async_recv) = (0, 0);
        for p in procs {
            sync_recv |= u32::from(self.procs[p].sync_recv) | u32::from(self.txns_pending(p)) << 1;
            async_recv |= u32::from(self.procs[p].async_recv);
        }
        Ret::FrozenInfo {
            sync_recv,
            async_recv,
        }
    }

    /// `close()`, then `Process::deferred_release` (process.rs:1404), in
    /// its order:
    ///
    /// 1. The process is dead and thawed; the manager's node is unset if it
    ///    was the manager.
    /// 2. Its threads are released ([`RustOracle::thread_release`]).
    /// 3. Its nodes leave the tree one by one, lowest pointer first
    ///    (`Node::release`, node.rs:550): the one-way transactions waiting
    ///    on each are cancelled, their allocations dropped: a node object
    ///    of the dying process gives its count back only while that node
    ///    is still in the tree, so an object of a node at or below the one
    ///    being released leaks its count. Every death notification on the
    ///    node not cleared is then queued on its holder.
    /// 4. Its death notifications are cleared, its freeze listeners leave
    ///    their nodes, its references go (their nodes' owners may hear of
    ///    it).
    /// 5. Its queued work is cancelled ([`RustOracle::cancel`]): the tree
    ///    is empty, so node objects leak.
    /// 6. Its buffers go (their mapping is released last): their handle
    ///    objects find no reference, and their node objects find no tree,
    ///    so those counts leak too.
    fn exit(&mut self, p: usize, fail: &mut FailOnce, log: &mut Vec<Log>) {
        self.all_procs.retain(|&q| q != p);
        let proc = &mut self.procs[p];
        proc.alive = false;
        proc.frozen = false;
        proc.sync_recv = false;
        proc.async_recv = false;
        if proc.is_manager {
            self.manager = None;
        }
        for th in self.procs[p].threads.into_iter().flatten() {
            self.thread_release(p, th, fail, log);
        }
        while let Some((&ptr, &n)) = self.procs[p].tree.iter().next() {
            self.procs[p].tree.remove(&ptr);
            for txn in std::mem::take(&mut self.nodes[n].waiting) {
                log.push(Log::UndeliveredTransaction);
                let mut buffer = txn.buffer;
                buffer.oneway = false;
                self.drop_buffer(p, buffer, fail, log);
            }
            let mut dead = Vec::new();
            for (q, holder) in self.procs.iter().enumerate() {
                for r in holder.refs.values().filter(|r| r.node == n) {
                    if let Some(d) = r.death {
                        dead.push((q, d));
                    }
                }
            }
            for (q, d) in dead {
                let death = &mut self.deaths[d];
                if !death.cleared {
                    death.dead = true;
                    self.push_proc(q, Work::Death(d));
                }
            }
        }
        let refs = std::mem::take(&mut self.procs[p].refs);
        for r in refs.values() {
            if let Some(d) = r.death {
                self.deaths[d].cleared = true;
            }
        }
        for (_, listener) in std::mem::take(&mut self.procs[p].listeners) {
            if !listener.is_clearing {
                self.nodes[listener.node].freeze_list.retain(|&q| q != p);
            }
        }
        for r in refs.values() {
            if r.strong > 0 {
                self.update_count(r.node, false, true, None);
            }
            if r.weak > 0 {
                self.update_count(r.node, false, false, None);
            }
        }
        for work in std::mem::take(&mut self.procs[p].todo) {
            self.cancel(p, work, fail, log);
        }
        self.procs[p].delivered_deaths.clear();
        for buffer in std::mem::take(&mut self.procs[p].buffers) {
            self.drop_buffer(p, buffer, fail, log);
        }
    }

    /// `InnerThread::should_use_process_work_queue` (thread.rs:421): a
    /// looper with no current transaction and nothing readable of its own.
    fn uses_proc_queue(&self, th: ThreadId) -> bool {
        let thread = &self.threads[th];
        thread.current.is_none() && !thread.readable && (thread.registered || thread.entered)
    }

    /// `Process::poll` (process.rs:1794): readable work of its own, or the
    /// process's when the thread may take it.
    fn pollable(&self, th: ThreadId) -> bool {
        let thread = &self.threads[th];
        thread.readable || (self.uses_proc_queue(th) && !self.procs[thread.pid].todo.is_empty())
    }

    /// After the command, every live process, `p0` first, and within it
    /// every thread the driver knows, `t0` first, drains as
    /// `docs/commands.md` says: while `poll` finds work for it or answers
    /// are left, one `BINDER_WRITE_READ` writing the answers and, when
    /// `poll` found work, reading.
    fn drain(&mut self, obs: &mut Observed) {
        for p in 0..self.procs.len() {
            for tid in 0..MAX_THREADS {
                if !self.procs[p].alive {
                    break;
                }
                let Some(th) = self.procs[p].threads[tid] else {
                    continue;
                };
                let mut answers = Vec::new();
                loop {
                    let readable = self.pollable(th);
                    if !readable && answers.is_empty() {
                        break;
                    }
                    // Answers with nothing readable go in a write-only call
                    // (vm/src/exec/drain.rs); a failed write reads nothing
                    // (`Thread::write_read`, thread.rs:1642-1654).
                    let answers_now = std::mem::take(&mut answers);
                    if !self.answer(p, th, answers_now, &mut obs.log) {
                        continue;
                    }
                    if readable {
                        self.read(p, th, obs, &mut answers);
                    }
                }
            }
        }
    }

    /// The answers of a read, written in order (`Thread::write`):
    /// `BC_INCREFS_DONE`/`BC_ACQUIRE_DONE` (`Node::inc_ref_done_locked`,
    /// node.rs:345) end an increment being delivered, and when none is left
    /// a decrement held back meanwhile queues the node on the process;
    /// `BC_DEAD_BINDER_DONE` (`NodeDeath::set_notification_done`, 1035)
    /// lets a cleared notification's done follow;
    /// `BC_FREEZE_NOTIFICATION_DONE` (`Process::freeze_notif_done`,
    /// freeze.rs:275) queues the next message when the state changed or the
    /// listener is clearing, and fails the write (logged) for a cookie with
    /// no listener or none pending. Returns whether the read part runs.
    fn answer(&mut self, p: usize, th: ThreadId, answers: Vec<Done>, log: &mut Vec<Log>) -> bool {
        for answer in answers {
            match answer {
                Done::IncRefs(ptr, cookie) | Done::Acquire(ptr, cookie) => {
                    let Some(&n) = self.procs[p].tree.get(&ptr) else {
                        continue;
                    };
                    if self.nodes[n].cookie != cookie {
                        continue;
                    }
                    if self.nodes[n].active_inc_refs == 0 {
                        log.push(Log::IncRefDoneUnexpected);
                        continue;
                    }
                    self.nodes[n].active_inc_refs -= 1;
                    if self.nodes[n].active_inc_refs > 0 {
                        continue;
                    }
                    let (s, w) = self.counts(n);
                    let node = &mut self.nodes[n];
                    let (strong, weak) = (s > 0, s > 0 || w > 0);
                    let drop = (!weak && node.told_weak) || (!strong && node.told_strong);
                    if drop && !node.pushed_node && !node.pushed_wrapper {
                        node.pushed_node = true;
                        self.push_proc(p, Work::Node(n));
                    }
                }
                Done::DeadBinder(cookie) => {
                    let delivered = &mut self.procs[p].delivered_deaths;
                    let Some(i) = delivered
                        .iter()
                        .position(|&d| self.deaths[d].cookie == cookie)
                    else {
                        continue;
                    };
                    let d = delivered.remove(i);
                    self.deaths[d].notification_done = true;
                    if self.deaths[d].cleared {
                        self.push_if_looper(th, Work::Death(d));
                    }
                }
                Done::Freeze(cookie) => {
                    let owner_frozen = |s: &Self, l: &Listener| {
                        let owner = s.nodes[l.node].owner;
                        s.procs[owner].alive && s.procs[owner].frozen
                    };
                    let Some(listener) = self.procs[p].listeners.get(&cookie).copied() else {
                        log.extend([Log::FreezeDoneNotFound, Log::IoctlFailed(Errno::Inval)]);
                        return false;
                    };
                    let frozen = owner_frozen(self, &listener);
                    let listener = self.procs[p].listeners.get_mut(&cookie).expect("found");
                    let again;
                    if listener.pending_dups > 0 {
                        again = true;
                        listener.pending_dups -= 1;
                        listener.cleared_dups += 1;
                    } else {
                        if !listener.is_pending {
                            log.extend([Log::FreezeDoneNotFound, Log::IoctlFailed(Errno::Inval)]);
                            return false;
                        }
                        again = listener.is_clearing || listener.last_is_frozen != Some(frozen);
                        listener.is_pending = false;
                    }
                    if again {
                        self.push_proc(p, Work::Freeze(cookie));
                    }
                }
            }
        }
        true
    }

    /// `Node::do_work_locked` (node.rs:611): `BR_INCREFS`/`BR_ACQUIRE` for a
    /// kind counted that the owner was not told of (each an increment being
    /// delivered until its done); `BR_RELEASE`/`BR_DECREFS` for a kind told
    /// of and no longer counted, held back while an increment is being
    /// delivered; a node with no count left and none being delivered leaves
    /// the tree.
    fn node_work(&mut self, p: usize, n: NodeId, out: &mut Vec<Br>, answers: &mut Vec<Done>) {
        let (s, w) = self.counts(n);
        let (strong, weak) = (s > 0, s > 0 || w > 0);
        let node = &mut self.nodes[n];
        let (ptr, cookie) = (node.ptr, node.cookie);
        let (had_strong, had_weak) = (node.told_strong, node.told_weak);
        if weak && !had_weak {
            node.told_weak = true;
            node.active_inc_refs += 1;
        }
        if strong && !had_strong {
            node.told_strong = true;
            node.active_inc_refs += 1;
        }
        let idle = node.active_inc_refs == 0;
        let drop_weak = idle && !weak && had_weak;
        let drop_strong = idle && !strong && had_strong;
        if drop_weak {
            node.told_weak = false;
        }
        if drop_strong {
            node.told_strong = false;
        }
        if idle && !weak {
            self.procs[p].tree.remove(&ptr);
        }
        if weak && !had_weak {
            out.push(Br::IncRefs(ptr));
            answers.push(Done::IncRefs(ptr, cookie));
        }
        if strong && !had_strong {
            out.push(Br::Acquire(ptr));
            answers.push(Done::Acquire(ptr, cookie));
        }
        if drop_strong {
            out.push(Br::Release(ptr));
        }
        if drop_weak {
            out.push(Br::DecRefs(ptr));
        }
    }

    /// One non-blocking read (`Thread::read`, thread.rs:1557): the thread's
    /// readable work, then, when it used the process queue at the start,
    /// the process's (`get_work`, 586; else `get_work_local`, 545); a read
    /// that wrote nothing fails with `EAGAIN`. It stops after a transaction
    /// or reply, a `BR_DEAD_BINDER` or a `BR_FROZEN_BINDER`; one that wrote
    /// anything ends with `BR_SPAWN_LOOPER` when the reader was a looper and
    /// the process has no thread requested and fewer started than its
    /// maximum (1623-1631).
    fn read(&mut self, p: usize, th: ThreadId, obs: &mut Observed, answers: &mut Vec<Done>) {
        let tid = self.threads[th].tid;
        let in_pool = self.threads[th].registered || self.threads[th].entered;
        let use_proc = self.uses_proc_queue(th);
        let mut wrote = false;
        loop {
            let thread = &mut self.threads[th];
            let work = if thread.readable {
                let work = thread.todo.pop_front();
                thread.readable = !thread.todo.is_empty();
                work
            } else if use_proc {
                self.procs[p].todo.pop_front()
            } else {
                None
            };
            let Some(work) = work else {
                if !wrote {
                    // EAGAIN: not in the naive models (mod.rs).
                    return;
                }
                break;
            };
            let mut out = Vec::new();
            let mut stop = false;
            match work {
                Work::Txn(txn) => {
                    let objects = self.received(&txn.buffer);
                    out.push(if txn.reply {
                        Br::Reply(objects)
                    } else if txn.call.is_some() {
                        Br::Call(objects)
                    } else {
                        Br::Transaction(objects)
                    });
                    if let Some(c) = txn.call {
                        self.threads[th].current = Some(c);
                    }
                    self.procs[p].buffers.push_back(txn.buffer);
                    stop = true;
                }
                Work::Complete => out.push(Br::TransactionComplete),
                Work::SpamSuspect => out.push(Br::OnewaySpamSuspect),
                Work::Error(br) => out.push(br),
                Work::Node(n) => {
                    let node = &mut self.nodes[n];
                    if node.pushed_wrapper {
                        node.pushed_node = false;
                        node.weak_z2o = false;
                    } else {
                        node.pushed_node = false;
                        node.weak_z2o = false;
                        node.strong_z2o = false;
                        self.node_work(p, n, &mut out, answers);
                    }
                }
                Work::Wrapper(n) => {
                    let node = &mut self.nodes[n];
                    node.pushed_wrapper = false;
                    node.strong_z2o = false;
                    self.node_work(p, n, &mut out, answers);
                }
                Work::Death(d) => {
                    let death = self.deaths[d];
                    if death.aborted {
                    } else if death.cleared && (!death.dead || death.notification_done) {
                        out.push(Br::ClearDeathDone(death.cookie));
                    } else {
                        self.procs[p].delivered_deaths.push(d);
                        out.push(Br::DeadBinder(death.cookie));
                        answers.push(Done::DeadBinder(death.cookie));
                        stop = true;
                    }
                }
                Work::Freeze(cookie) => {
                    if self.freeze_message(p, cookie, &mut out, answers) {
                        stop = true;
                    }
                }
            }
            wrote |= !out.is_empty();
            obs.reads[p].extend(out.into_iter().map(|br| Read { tid, br }));
            if stop {
                break;
            }
        }
        let proc = &mut self.procs[p];
        if in_pool && proc.requested == 0 && proc.started < proc.max_threads {
            proc.requested += 1;
            obs.reads[p].push(Read {
                tid,
                br: Br::SpawnLooper,
            });
        }
    }

    /// `FreezeMessage::do_work` (freeze.rs:87): nothing when the listener
    /// is gone or a `BR_FROZEN_BINDER` awaits its done; a cleared duplicate
    /// or a clearing listener reads `BR_CLEAR_FREEZE_NOTIFICATION_DONE` (the
    /// listener then gone, or a pending duplicate taking its place); else
    /// `BR_FROZEN_BINDER` with whether the node's owner is frozen now,
    /// unless that is what the listener last reported. Returns whether the
    /// read stops.
    fn freeze_message(
        &mut self,
        p: usize,
        cookie: u64,
        out: &mut Vec<Br>,
        answers: &mut Vec<Done>,
    ) -> bool {
        let Some(l) = self.procs[p].listeners.get(&cookie).copied() else {
            return false;
        };
        let owner = self.nodes[l.node].owner;
        let frozen = self.procs[owner].alive && self.procs[owner].frozen;
        let listeners = &mut self.procs[p].listeners;
        let listener = listeners.get_mut(&cookie).expect("found");
        if listener.cleared_dups > 0 {
            listener.cleared_dups -= 1;
            out.push(Br::ClearFreezeDone(cookie));
            return false;
        }
        if listener.is_pending {
            return false;
        }
        if listener.is_clearing {
            if listener.pending_dups > 0 {
                listener.pending_dups -= 1;
                listener.is_pending = true;
            } else {
                listeners.remove(&cookie);
            }
            out.push(Br::ClearFreezeDone(cookie));
            return false;
        }
        if listener.last_is_frozen == Some(frozen) {
            return false;
        }
        listener.is_pending = true;
        listener.last_is_frozen = Some(frozen);
        out.push(Br::FrozenBinder { cookie, frozen });
        answers.push(Done::Freeze(cookie));
        true
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
            "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[weak-as-strong, transaction-to-invalid-handle 1, transaction-failed]"
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
            "0 ee BR_DEAD_REPLY -22 p1[dead-reply] log[no-target-node, transaction-failed]"
        );
    }

    /// A model whose process 0 holds references at `handles` (to nodes of
    /// process 1) and whose pool has `pool` handles.
    fn with_refs(handles: &[u32], pool: u32) -> RustOracle {
        let mut model = RustOracle::new(&Procs::new(vec![0, 0]), Version::RustMainline);
        for (i, &handle) in handles.iter().enumerate() {
            let n = model.get_node(1, i as u64, i as u64).unwrap();
            let r = Ref {
                node: n,
                strong: 0,
                weak: 1,
                death: None,
                freeze: None,
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
        let n = model.get_node(1, 100, 100).unwrap();
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
