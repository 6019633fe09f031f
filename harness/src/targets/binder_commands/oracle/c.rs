//! The C driver (`drivers/android/binder.c`, Linux 7.3.4) as userspace sees
//! it. Line numbers are those of 7.3.4's `binder.c`.
//!
//! # The model
//!
//! A process holds references by descriptor, each with a strong and a weak
//! count and maybe a death and a freeze notification; it owns nodes by
//! pointer; it holds the buffers of the transactions it read and has not
//! freed, oldest first. A node's counts are not stored: they are counted
//! from what holds the node whenever they are needed (see
//! `COracle::counts`), in-flight transactions included.
//!
//! Work waits where upstream queues it: on the process's `todo`, on a
//! thread's `todo` (readable, or *deferred*: queued without
//! `process_todo`, `binder_enqueue_deferred_thread_work_ilocked` 462), or
//! on a node's `async_todo`. A thread of the driver has its looper state,
//! its transaction stack (calls, `COracle::calls`, linked by `from_parent`
//! and `to_parent` as upstream links them) and its extended error.
//!
//! # When the owner hears about its node
//!
//! A node's work item (`BINDER_WORK_NODE`) is queued in two places only:
//! on the sending thread's `todo`, deferred, when a transaction carries one
//! of the sender's nodes to a reference whose count of that kind was 0
//! (`binder_translate_binder` 2237 → `binder_inc_node_nilocked` 820), and
//! on the process's `todo` when a node its owner was told about loses its
//! last count of a kind (`binder_dec_node_nilocked` 872), which also frees
//! a node nobody was told about and nothing holds. Dropping a temporary
//! reference (`binder_put_node` 1014) runs the weak half of that check,
//! which does not look at strong counts: a node that only local strong
//! counts hold has its work queued then, for nothing (`COracle::put_node`).
//! The reader compares the counts then with what it told userspace before
//! (`binder_thread_read`, 4870). A node whose work sits deferred on a
//! thread that has nothing readable (a call's sender, until the reply) is
//! not read.
//!
//! # Reading
//!
//! A thread reads its own `todo` first, then the process's when it has no
//! transaction stack and an empty `todo` (`binder_available_for_proc_work_ilocked`
//! 575), looper or not: a thread that is neither registered nor entered
//! logs "Thread waiting for process work before calling
//! BC_REGISTER_LOOPER" at every such read (4776). A read stops after a
//! transaction or reply, a `BR_DEAD_BINDER` or a `BR_FROZEN_BINDER`;
//! a read that wrote anything may end with `BR_SPAWN_LOOPER` (5173).
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
    br_code, Br, Command, Errno, ExtendedError, Log, LooperCmd, NodeFlags, NodeName, NodeState,
    Object, Observed, Payload, Pid, ProcState, Procs, Read, Received, RefCmd, RefState, Ret,
    Snapshot, Step, Tid, TxnFlags, MAX_THREADS,
};
use idpool::{AllocSite, Version};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A node, by its index in [`COracle::nodes`] (never reused).
type NodeId = usize;
/// A thread of the driver, by its index in [`COracle::threads`] (never
/// reused: a thread that exited and comes back is a new one).
type ThreadId = usize;
/// A two-way transaction, by its index in [`COracle::calls`].
type CallId = usize;
/// A death notification, by its index in [`COracle::deaths`].
type DeathId = usize;
/// A freeze notification, by its index in [`COracle::freezes`].
type FreezeId = usize;

/// `BINDER_CURRENT_PROTOCOL_VERSION` (include/uapi/linux/android/binder.h:195).
const PROTOCOL_VERSION: i32 = 8;
/// `TF_ONE_WAY`.
const TF_ONE_WAY: u32 = 0x01;

/// The C driver's naive model.
#[derive(Clone, Debug)]
pub struct COracle {
    version: Version,
    procs: Vec<Proc>,
    /// Every node ever created, alive or not.
    nodes: Vec<Node>,
    /// Every thread the driver ever had.
    threads: Vec<Thread>,
    /// Every two-way transaction ever sent.
    calls: Vec<Call>,
    /// Every death notification ever requested.
    deaths: Vec<Death>,
    /// Every freeze notification ever requested.
    freezes: Vec<Freeze>,
    /// `context->binder_context_mgr_node`.
    manager: Option<NodeId>,
    /// `context->binder_context_mgr_uid`: set by the first manager, kept
    /// after it dies.
    manager_euid: Option<u32>,
    /// A `BUG()` stopped the kernel.
    crashed: bool,
    /// `binder_procs`: every process the driver holds, the last opened
    /// first (`binder_open` adds at the head).
    binder_procs: Vec<usize>,
    /// Each process's `proc->pid`, its task's (kept after it exits).
    pids: Vec<u32>,
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
    buffers: VecDeque<Buffer>,
    /// `proc->todo`.
    todo: VecDeque<Work>,
    /// `proc->delivered_death`: `BR_DEAD_BINDER`s read, not yet done.
    delivered_death: Vec<DeathId>,
    /// `proc->delivered_freeze`: `BR_FROZEN_BINDER`s read, not yet done.
    delivered_freeze: Vec<FreezeId>,
    /// The driver's thread behind each of the program's threads.
    threads: [Option<ThreadId>; MAX_THREADS],
    /// `max_threads`, `requested_threads`, `requested_threads_started`.
    max_threads: u32,
    requested: u32,
    started: u32,
    /// `is_frozen`, `sync_recv`, `async_recv`.
    frozen: bool,
    sync_recv: bool,
    async_recv: bool,
    /// `oneway_spam_detection_enabled`.
    spam_detection: bool,
    /// `proc->alloc`.
    alloc: Alloc,
}

/// The size of every process's mapping (`docs/commands.md`; the driver
/// takes at most 4 MiB, binder_alloc.c:913).
const MAPPING: usize = 1 << 20;

/// `struct binder_alloc` as userspace can tell it: the buffers allocated in
/// the mapping, by offset, the async space left (half the mapping at
/// first, binder_alloc.c:938) and whether one-way spam was reported.
/// Free buffers are the gaps between allocated ones: a freed buffer
/// merges with its free neighbours (`binder_free_buf_locked`).
#[derive(Clone, Debug)]
struct Alloc {
    buffers: BTreeMap<usize, AllocBuffer>,
    free_async: usize,
    spam_detected: bool,
}

#[derive(Clone, Copy, Debug)]
struct AllocBuffer {
    size: usize,
    oneway: bool,
    /// `buffer->pid`: the sending process.
    pid: usize,
}

impl Alloc {
    fn new() -> Self {
        Alloc {
            buffers: BTreeMap::new(),
            free_async: MAPPING / 2,
            spam_detected: false,
        }
    }

    /// `binder_alloc_new_buf_locked` (binder_alloc.c:518): a one-way buffer
    /// needs that much async space left (`ENOSPC`, 528); then the smallest
    /// free buffer that fits (`ENOSPC` when none, 551), split at its start.
    /// Among free buffers of one size the driver takes whichever its
    /// rb-tree walk meets first; the model takes the lowest. A one-way
    /// buffer then takes its async space and may be a spam suspect
    /// (`debug_low_async_space_locked`, 462): below a tenth of the mapping
    /// left, a sender holding more than 50 one-way buffers or more than a
    /// quarter of the mapping is reported, once until the space recovers.
    /// `pid` is the sender's (`current->tgid`): its task's, whichever open
    /// sends.
    fn new_buf(&mut self, size: usize, oneway: bool, pid: usize) -> Result<(usize, bool), Errno> {
        if oneway && self.free_async < size {
            return Err(Errno::NoSpc);
        }
        let mut gaps = Vec::new();
        let mut at = 0;
        for (&offset, buffer) in &self.buffers {
            gaps.push((offset - at, at));
            at = offset + buffer.size;
        }
        gaps.push((MAPPING - at, at));
        let (_, offset) = gaps
            .into_iter()
            .filter(|&(len, _)| len >= size)
            .min()
            .ok_or(Errno::NoSpc)?;
        self.buffers
            .insert(offset, AllocBuffer { size, oneway, pid });
        if !oneway {
            return Ok((offset, false));
        }
        self.free_async -= size;
        if self.free_async >= MAPPING / 10 {
            self.spam_detected = false;
            return Ok((offset, false));
        }
        let mine = self.buffers.values().filter(|b| b.oneway && b.pid == pid);
        let (count, total) = mine.fold((0, 0), |(n, t), b| (n + 1, t + b.size));
        if (count > 50 || total > MAPPING / 4) && !self.spam_detected {
            self.spam_detected = true;
            return Ok((offset, true));
        }
        Ok((offset, false))
    }

    /// `binder_alloc_free_buf` (binder_alloc.c:757-761): a one-way
    /// buffer's async space comes back.
    fn free(&mut self, offset: usize) {
        if let Some(buffer) = self.buffers.remove(&offset) {
            if buffer.oneway {
                self.free_async += buffer.size;
            }
        }
    }
}

/// The size of a transaction's buffer (`sanitized_size`,
/// binder_alloc.c:611): its objects (`flat_binder_object`, 24 bytes) and
/// their offsets (8 bytes each), at least a pointer.
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
    freeze: Option<FreezeId>,
}

#[derive(Clone, Debug)]
struct Node {
    owner: usize,
    ptr: u64,
    cookie: u64,
    serial: u32,
    /// Its owner was released (`node->proc == NULL`).
    dead: bool,
    /// `has_strong_ref`, `has_weak_ref`: what the owner was told.
    told_strong: bool,
    told_weak: bool,
    /// `pending_strong_ref`, `pending_weak_ref`: a `BR_ACQUIRE` or
    /// `BR_INCREFS` read and not yet answered.
    pending_strong: bool,
    pending_weak: bool,
    /// `has_async_transaction`: a one-way transaction to it was queued and
    /// its buffer not freed yet.
    oneway_busy: bool,
    /// `async_todo`: one-way transactions waiting for that buffer.
    waiting: VecDeque<Txn>,
}

#[derive(Clone, Debug)]
struct Thread {
    pid: usize,
    tid: Tid,
    /// `BINDER_LOOPER_STATE_REGISTERED`, `BINDER_LOOPER_STATE_ENTERED`.
    registered: bool,
    entered: bool,
    /// `thread->todo` and `process_todo`.
    todo: VecDeque<Work>,
    readable: bool,
    /// `transaction_stack`.
    stack: Option<CallId>,
    /// `thread->ee`.
    ee: ExtendedError,
}

/// A two-way transaction while someone may still answer it.
#[derive(Clone, Copy, Debug)]
struct Call {
    /// `t->from`: the calling thread, `None` once it was released.
    from: Option<ThreadId>,
    /// `t->to_thread`: the thread that read it, until it is released.
    to_thread: Option<ThreadId>,
    /// `from_parent`, `to_parent`.
    from_parent: Option<CallId>,
    to_parent: Option<CallId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeathKind {
    DeadBinder,
    DeadBinderAndClear,
    Clear,
}

#[derive(Clone, Copy, Debug)]
struct Death {
    cookie: u64,
    kind: DeathKind,
}

#[derive(Clone, Copy, Debug)]
struct Freeze {
    cookie: u64,
    /// `BINDER_WORK_CLEAR_FREEZE_NOTIFICATION` (else `BINDER_WORK_FROZEN_BINDER`).
    clear: bool,
    is_frozen: bool,
    sent: bool,
    resend: bool,
}

/// A buffer as its receiver holds it.
#[derive(Clone, Debug)]
struct Buffer {
    /// `buffer->target_node`: the node a transaction is for (none for a
    /// reply); it holds a local strong count until freed.
    target: Option<NodeId>,
    objects: Vec<Carried>,
    /// `async_transaction`.
    oneway: bool,
    /// Where it lies in its receiver's mapping (none for the objects of a
    /// transaction being undone).
    offset: Option<usize>,
}

/// A transaction or reply on its way.
#[derive(Clone, Debug)]
struct Txn {
    buffer: Buffer,
    /// Its call when two-way.
    call: Option<CallId>,
    /// Whether it is a reply.
    reply: bool,
    /// The sending process (`buffer->pid`) and the flags, for `TF_UPDATE_TXN`.
    sender: usize,
    flags: u32,
}

/// An object of a transaction, translated for its receiver.
#[derive(Clone, Copy, Debug)]
enum Carried {
    Handle { handle: u32, strong: bool },
    Node { node: NodeId, strong: bool },
}

/// A work item (`struct binder_work`).
#[derive(Clone, Debug)]
enum Work {
    /// `BINDER_WORK_TRANSACTION`.
    Txn(Txn),
    /// `BINDER_WORK_TRANSACTION_COMPLETE`, `..._PENDING`.
    Complete,
    PendingFrozen,
    /// `BINDER_WORK_TRANSACTION_ONEWAY_SPAM_SUSPECT`.
    SpamSuspect,
    /// `BINDER_WORK_RETURN_ERROR`: a thread's `return_error` or
    /// `reply_error`.
    Error(Br),
    /// `BINDER_WORK_NODE`.
    Node(NodeId),
    /// `BINDER_WORK_DEAD_BINDER`, `..._AND_CLEAR`, `BINDER_WORK_CLEAR_DEATH_NOTIFICATION`.
    Death(DeathId),
    /// `BINDER_WORK_FROZEN_BINDER`, `BINDER_WORK_CLEAR_FREEZE_NOTIFICATION`.
    Freeze(FreezeId),
}

/// What a reader writes back after a read (`docs/commands.md`).
#[derive(Clone, Copy, Debug)]
enum Done {
    IncRefs(u64),
    Acquire(u64),
    DeadBinder(u64),
    Freeze(u64),
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

/// An extended error as a failed transaction leaves it: its id is set.
fn extended(command: u32, errno: Option<Errno>) -> ExtendedError {
    ExtendedError {
        id_set: true,
        command,
        param: errno.map_or(0, |e| -e.code()),
    }
}

/// The code of a `BR_*` an error work item carries.
fn br_of(br: &Br) -> u32 {
    match br {
        Br::DeadReply => br_code::DEAD_REPLY,
        Br::FailedReply => br_code::FAILED_REPLY,
        Br::FrozenReply => br_code::FROZEN_REPLY,
        Br::TransactionComplete => br_code::TRANSACTION_COMPLETE,
        other => unreachable!("{other:?} is not an error a transaction returns"),
    }
}

impl Oracle for COracle {
    fn new(procs: &Procs, version: Version) -> Self {
        let euids = &procs.euids;
        let mut model = COracle {
            binder_procs: Vec::new(),
            pids: Vec::new(),
            version,
            procs: Vec::new(),
            nodes: Vec::new(),
            threads: Vec::new(),
            calls: Vec::new(),
            deaths: Vec::new(),
            freezes: Vec::new(),
            manager: None,
            manager_euid: None,
            crashed: false,
        };
        for (p, &euid) in euids.iter().enumerate() {
            model.procs.push(Proc {
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
                todo: VecDeque::new(),
                delivered_death: Vec::new(),
                delivered_freeze: Vec::new(),
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
            // The opening thread checks BINDER_VERSION and writes
            // BC_ENTER_LOOPER (docs/commands.md).
            let t0 = model.thread(p, Tid(0));
            model.threads[t0].entered = true;
            // proc->pid: the opening task's; a task's first process stands
            // for it.
            model
                .pids
                .push(100 + procs.task(Pid(p as u8)).index() as u32);
            model.binder_procs.insert(0, p);
        }
        model
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
        // No ioctl: the process's munmap() and close(), or `free` with
        // nothing to free.
        match &step.command {
            Command::Exit => {
                self.exit(p, log);
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
        // Every ioctl finds or makes the calling thread first
        // (`binder_ioctl` → `binder_get_thread`, 5802).
        let th = self.thread(p, step.tid);
        let ret = match &step.command {
            Command::SetManager => Ok(self.set_manager(p, None, log)),
            Command::SetManagerExt { ptr, cookie, flags } => {
                Ok(self.set_manager(p, Some((*ptr, *cookie, *flags)), log))
            }
            Command::Ref(cmd, handle) => self.ref_command(p, *cmd, *handle, &mut fail, log),
            Command::Send { to, payload } => self
                .transaction(p, th, *to, payload, true, &mut fail, log)
                .map(|()| Ret::Ok),
            Command::Call { to, payload } => self
                .transaction(p, th, *to, payload, false, &mut fail, log)
                .map(|()| Ret::Ok),
            Command::Reply(payload) => self.reply(p, th, payload, &mut fail, log).map(|()| Ret::Ok),
            Command::Free => Ok(self.free(p, &mut fail, log)),
            Command::RequestDeath { handle, cookie } => {
                self.request_death(p, *handle, *cookie, log);
                Ok(Ret::Ok)
            }
            Command::ClearDeath { handle, cookie } => {
                self.clear_death(p, th, *handle, *cookie, log);
                Ok(Ret::Ok)
            }
            Command::RequestFreeze { handle, cookie } => {
                Ok(self.request_freeze(p, *handle, *cookie, log))
            }
            Command::ClearFreeze { handle, cookie } => {
                Ok(self.clear_freeze(p, *handle, *cookie, log))
            }
            Command::NodeInfo(handle) => Ok(self.node_info(p, *handle, log)),
            Command::NodeDebug(ptr) => Ok(self.node_debug(p, *ptr)),
            Command::Version => Ok(Ret::Version(PROTOCOL_VERSION)),
            Command::ExtendedError => {
                // binder_ioctl_get_extended_error (5773): read, then cleared.
                let ee = std::mem::replace(&mut self.threads[th].ee, ExtendedError::NONE);
                Ok(Ret::Extended(ee))
            }
            Command::Looper(cmd) => {
                self.looper(p, th, *cmd, log);
                Ok(Ret::Ok)
            }
            Command::ThreadExit => {
                // BINDER_THREAD_EXIT (5844): binder_thread_release.
                self.thread_release(p, th, log);
                Ok(Ret::Ok)
            }
            Command::MaxThreads(n) => {
                // BINDER_SET_MAX_THREADS (5814).
                self.procs[p].max_threads = *n;
                Ok(Ret::Ok)
            }
            Command::Freeze { target, .. } => Ok(self.freeze(target.index(), true)),
            Command::Thaw(target) => Ok(self.freeze(target.index(), false)),
            Command::FrozenInfo(target) => Ok(self.frozen_info(target.index())),
            Command::OnewaySpam(on) => {
                // BINDER_ENABLE_ONEWAY_SPAM_DETECTION (5974).
                self.procs[p].spam_detection = *on;
                Ok(Ret::Ok)
            }
            Command::Refused(refused) => {
                use idpool::driver::Refused;
                match refused {
                    // binder_thread_write (4293-4298): pr_err, -EINVAL.
                    Refused::AttemptAcquire | Refused::AcquireResult => {
                        log.push(Log::UnsupportedCommand)
                    }
                    // binder_ioctl's default case (5991).
                    Refused::IdleTimeout | Refused::IdlePriority => {}
                }
                Ok(Ret::Err(Errno::Inval))
            }
            Command::Exit => unreachable!("handled above"),
        };
        match ret {
            Ok(ret) => {
                if let Ret::Err(e) = ret {
                    // binder_ioctl logs every failed ioctl (binder.c:6001).
                    obs.log.push(Log::IoctlFailed(e));
                }
                obs.ret = Some(ret);
                if !matches!(step.command, Command::ThreadExit) {
                    // The thread's BINDER_GET_EXTENDED_ERROR (docs/commands.md).
                    let ee = std::mem::replace(&mut self.threads[th].ee, ExtendedError::NONE);
                    obs.ee = Some(ee);
                }
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
                frozen: proc.alive && proc.frozen,
                refs: proc
                    .refs
                    .iter()
                    .map(|(&desc, r)| {
                        let state = RefState {
                            node: self.name(r.node),
                            strong: r.strong,
                            weak: r.weak,
                            death: r.death.map(|d| self.deaths[d].cookie),
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

    /// The driver's thread for thread `tid` of process `p`, made when the
    /// driver does not know it (`binder_get_thread_ilocked`, 5264: not a
    /// looper, nothing to do, `ee` `BR_OK`).
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
            stack: None,
            ee: ExtendedError::NONE,
        });
        let th = self.threads.len() - 1;
        self.procs[p].threads[tid.index()] = Some(th);
        th
    }

    /// `binder_enqueue_thread_work_ilocked` (480): queued, and the thread
    /// has something to read.
    fn push_thread(&mut self, th: ThreadId, work: Work) {
        let thread = &mut self.threads[th];
        thread.todo.push_back(work);
        thread.readable = true;
    }

    /// `binder_enqueue_deferred_thread_work_ilocked` (462): queued without
    /// `process_todo`.
    fn push_deferred(&mut self, th: ThreadId, work: Work) {
        self.threads[th].todo.push_back(work);
    }

    /// Every buffer that holds counts for process `p`'s nodes: the ones it
    /// read and not freed, and those on their way to it (queued, or waiting
    /// behind one of its nodes' one-way buffers).
    fn buffers_to(&self, p: usize) -> Vec<&Buffer> {
        let proc = &self.procs[p];
        fn queued(w: &Work) -> Option<&Buffer> {
            match w {
                Work::Txn(t) => Some(&t.buffer),
                _ => None,
            }
        }
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

    /// A node's counts, counted from what holds it:
    ///
    /// - `local_strong_refs` and `local_weak_refs` count one each for the
    ///   context manager's node (`binder_ioctl_set_ctx_mgr`, 5554-5555);
    ///   `local_strong_refs` one per transaction to the node whose buffer
    ///   is not freed, on its way or read (`binder_get_node_refs_for_txn`
    ///   2967, released by `binder_transaction_buffer_release` 2060); and
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
        for buffer in self.buffers_to(node.owner) {
            c.local_strong += u32::from(buffer.target == Some(n));
            for object in &buffer.objects {
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

    /// The node `ptr` of process `p`, created with `cookie` if its tree has
    /// none (`binder_new_node`, 794; `binder_init_node_ilocked` returns the
    /// one already there whatever its cookie, 766).
    fn node_for(&mut self, p: usize, ptr: u64, cookie: u64) -> NodeId {
        if let Some(&n) = self.procs[p].tree.get(&ptr) {
            return n;
        }
        let created = self.procs[p].created.entry(ptr).or_insert(0);
        let serial = *created;
        *created += 1;
        self.nodes.push(Node {
            owner: p,
            ptr,
            cookie,
            serial,
            dead: false,
            told_strong: false,
            told_weak: false,
            pending_strong: false,
            pending_weak: false,
            oneway_busy: false,
            waiting: VecDeque::new(),
        });
        let n = self.nodes.len() - 1;
        self.procs[p].tree.insert(ptr, n);
        n
    }

    /// Whether node `n`'s work item is on a list (`node->work.entry`).
    fn node_queued(&self, n: NodeId) -> bool {
        let owner = &self.procs[self.nodes[n].owner];
        let is = |w: &Work| matches!(w, Work::Node(m) if *m == n);
        owner.todo.iter().any(is)
            || owner
                .threads
                .iter()
                .flatten()
                .any(|&th| self.threads[th].todo.iter().any(is))
    }

    /// `binder_dequeue_work_ilocked` on node `n`'s work item, wherever it is.
    fn dequeue_node(&mut self, n: NodeId) {
        let owner = self.nodes[n].owner;
        let not = |w: &Work| !matches!(w, Work::Node(m) if *m == n);
        self.procs[owner].todo.retain(not);
        for th in self.procs[owner].threads.into_iter().flatten() {
            let thread = &mut self.threads[th];
            thread.todo.retain(not);
            thread.readable &= !thread.todo.is_empty();
        }
    }

    /// `binder_inc_node_nilocked` (820) with the sender's `todo` as the
    /// target list, when a reference's count of that kind goes from 0
    /// (`binder_inc_ref_olocked` 1250, 1257): a node whose owner was not
    /// told of a strong reference has its work moved, deferred, to that
    /// thread (843-849); one not told of a weak reference has it queued
    /// there unless it is queued already (853-854).
    fn inc_node_on_thread(&mut self, n: NodeId, strong: bool, th: ThreadId) {
        if strong {
            if !self.nodes[n].told_strong {
                self.dequeue_node(n);
                self.push_deferred(th, Work::Node(n));
            }
        } else if !self.nodes[n].told_weak && !self.node_queued(n) {
            self.push_deferred(th, Work::Node(n));
        }
    }

    /// `binder_dec_node_nilocked` (872), called after a count of node `n`
    /// went: nothing while a count of that kind is left (a weak one: local
    /// weak counts or references); then, when the owner was told of
    /// anything, its work is queued on the owner's `todo` (unless queued
    /// already, 896); when it was told nothing and nothing holds it, it
    /// leaves its owner's tree (901-910).
    fn dec_node(&mut self, n: NodeId, strong: bool) {
        if self.nodes[n].dead {
            return;
        }
        let c = self.counts(n);
        let left = if strong {
            c.local_strong > 0 || c.strong_refs > 0
        } else {
            c.local_weak > 0 || c.any_refs
        };
        if left {
            return;
        }
        let node = &self.nodes[n];
        if node.told_strong || node.told_weak {
            if !self.node_queued(n) {
                self.procs[node.owner].todo.push_back(Work::Node(n));
            }
        } else if !c.any_refs && c.local_strong == 0 && c.local_weak == 0 {
            let (owner, ptr) = (node.owner, node.ptr);
            self.dequeue_node(n);
            self.procs[owner].tree.remove(&ptr);
        }
    }

    /// `binder_put_node` (1014) → `binder_dec_node_tmpref` (987): a
    /// command that looked node `n` up (`binder_get_node` 726,
    /// `binder_get_node_from_ref` 1316, the freeze walk 5652) held a
    /// temporary reference on it, and dropping that reference is
    /// `binder_dec_node_nilocked(node, 0, 1)`, a weak check that takes no
    /// count away. That check (888-892) returns early only for a local
    /// weak count, a temporary reference or a reference, not for strong
    /// counts: a node whose owner was told of it and that only local
    /// strong counts hold (a transaction to it, the node itself carried
    /// back to its owner in a buffer) has its work queued on the owner's
    /// `todo` (895-899) although reading it reports nothing, since its
    /// counts still match what the owner was told (4881-4902). The read
    /// that takes it wrote nothing and starts over (4816-4817), so a thread
    /// that is no looper and free for process work logs "Thread waiting
    /// for process work" (4776) on both passes. The model holds no
    /// temporary references: the drop is [`COracle::dec_node`] of a weak
    /// count already gone.
    fn put_node(&mut self, n: NodeId) {
        self.dec_node(n, false);
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

    /// `binder_inc_ref_for_node` (1458): one more reference of `p` to `n`,
    /// on the reference `p` already has to it, or on a new one (whose
    /// memory is allocated first, 1471); returns its descriptor. With the
    /// sender's thread (`binder_translate_binder` passes its `todo`), a
    /// count of that kind going from 0 queues the node's work there
    /// ([`COracle::inc_node_on_thread`]).
    fn inc_ref_for_node(
        &mut self,
        p: usize,
        n: NodeId,
        strong: bool,
        fail: &mut FailOnce,
        sender: Option<ThreadId>,
    ) -> Result<u32, IncError> {
        let found = self.procs[p]
            .refs
            .iter()
            .find(|(_, r)| r.node == n)
            .map(|(&d, r)| (d, if strong { r.strong } else { r.weak }));
        let (desc, was) = match found {
            Some(found) => found,
            None => {
                if !fail.alloc(AllocSite::Ref) {
                    return Err(IncError::NoMem);
                }
                let desc = self
                    .pick_descriptor(p, n, fail)
                    .map_err(|Stop::Bug| IncError::Bug)?;
                let r = Ref {
                    node: n,
                    strong: 0,
                    weak: 0,
                    death: None,
                    freeze: None,
                };
                self.procs[p].refs.insert(desc, r);
                (desc, 0)
            }
        };
        if let (0, Some(th)) = (was, sender) {
            self.inc_node_on_thread(n, strong, th);
        }
        let r = self.procs[p].refs.get_mut(&desc).expect("just found");
        *(if strong { &mut r.strong } else { &mut r.weak }) += 1;
        Ok(desc)
    }

    /// `binder_update_ref_for_handle` (1393): one more or one less on the
    /// reference with descriptor `desc`, which must be strong for a strong
    /// change; a decrement of a zero count is refused and logged
    /// (`binder_dec_ref_olocked`, 1275) but not an error. A strong count
    /// reaching 0 releases the node's strong reference (1286-1287); the
    /// reference goes when both counts reach 0
    /// ([`COracle::remove_ref`]), and the bitmap may shrink
    /// (`try_shrink_dmap`, 1362).
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
        let node = r.node;
        let count = if strong { &mut r.strong } else { &mut r.weak };
        if increment {
            *count += 1;
        } else if *count == 0 {
            log.push(Log::InvalidDecrement { strong });
        } else {
            *count -= 1;
            let (now, gone) = (*count, r.strong == 0 && r.weak == 0);
            if strong && now == 0 {
                self.dec_node(node, true);
            }
            if gone {
                self.remove_ref(p, desc);
                self.try_shrink(p, fail);
            }
        }
        Ok(())
    }

    /// `binder_cleanup_ref_olocked` (1182): the reference leaves the
    /// process; its bit is cleared while the bitmap is enabled, except bit
    /// 0 where [`Version::clear_bit_spares_zero`]; its node loses a strong
    /// reference if it still had a strong count (1198) and a weak one
    /// (1202); its death and freeze notifications leave whatever list they
    /// are on, unread (1216-1229).
    fn remove_ref(&mut self, p: usize, desc: u32) {
        let spare = desc == 0 && self.version.clear_bit_spares_zero();
        let proc = &mut self.procs[p];
        let r = proc.refs.remove(&desc).expect("a reference to remove");
        if let (Some(map), false) = (&mut proc.dmap, spare) {
            map.bits.remove(&desc);
        }
        if r.strong > 0 {
            self.dec_node(r.node, true);
        }
        self.dec_node(r.node, false);
        if let Some(d) = r.death {
            self.unqueue(p, |w| matches!(w, Work::Death(x) if *x == d));
        }
        if let Some(f) = r.freeze {
            self.unqueue(p, |w| matches!(w, Work::Freeze(x) if *x == f));
        }
    }

    /// Takes every work item `which` picks off process `p`'s lists (its
    /// `todo`, its threads', its delivered notifications).
    fn unqueue(&mut self, p: usize, which: impl Fn(&Work) -> bool) {
        let proc = &mut self.procs[p];
        proc.todo.retain(|w| !which(w));
        proc.delivered_death.retain(|&d| !which(&Work::Death(d)));
        proc.delivered_freeze.retain(|&f| !which(&Work::Freeze(f)));
        for th in proc.threads.into_iter().flatten() {
            let thread = &mut self.threads[th];
            thread.todo.retain(|w| !which(w));
            thread.readable &= !thread.todo.is_empty();
        }
    }

    /// `BINDER_SET_CONTEXT_MGR` and `BINDER_SET_CONTEXT_MGR_EXT`
    /// (`binder_ioctl_set_ctx_mgr`, 5522): refused while a manager is set
    /// (`EBUSY`, 5533) or to another euid than the first manager's
    /// (`EPERM`, 5541), both logged. Otherwise the node the object names
    /// (pointer 0, cookie 0 without one), created if missing and taken as
    /// it is when present (`binder_init_node_ilocked` 766, whatever its
    /// cookie), becomes the manager's node, its owner counted as told of
    /// both kinds of reference (5556-5557): no `BR_INCREFS`/`BR_ACQUIRE`
    /// follows.
    fn set_manager(
        &mut self,
        p: usize,
        object: Option<(u64, u64, NodeFlags)>,
        log: &mut Vec<Log>,
    ) -> Ret {
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
        let (ptr, cookie, _) = object.unwrap_or((0, 0, NodeFlags(0)));
        let n = self.node_for(p, ptr, cookie);
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
                match self.inc_ref_for_node(p, m, strong, fail, None) {
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

    /// A transaction's failure as its sender reads it (the end of
    /// `binder_transaction`, 3927-3933, with no call being replied to):
    /// the driver's summary line (3889), the thread's extended error set to
    /// the error and its errno, and the error queued for the thread.
    fn fail_transaction(&mut self, th: ThreadId, br: Br, errno: Option<Errno>, log: &mut Vec<Log>) {
        log.push(Log::TransactionFailed);
        self.threads[th].ee = extended(br_of(&br), errno);
        self.push_thread(th, Work::Error(br));
    }

    /// `BC_TRANSACTION` (`binder_transaction`, 3073), one-way (`send`) or
    /// two-way (`call`). The ioctl returns 0; every failure is read by the
    /// sender as `BR_FAILED_REPLY`, `BR_DEAD_REPLY` or `BR_FROZEN_REPLY`,
    /// logged with the driver's summary line, and left in its extended
    /// error with its errno ([`COracle::fail_transaction`]); the extended
    /// error is `BR_OK` otherwise (3118).
    ///
    /// The target: handle 0 is the manager's node (`BR_DEAD_REPLY` without
    /// a manager; `BR_FAILED_REPLY`, logged, when the sender is the
    /// manager, 3240, `EINVAL`); another handle needs a strong reference
    /// (else logged, 3224, `BR_FAILED_REPLY`) to a node whose owner is
    /// alive (else `BR_DEAD_REPLY`, 2978); a missing target is logged once
    /// more (3249) and its errno is `EINVAL`.
    ///
    /// A call is refused (`EPROTO`, logged) from a thread with a
    /// transaction at the head of its `todo` (3289) or whose last
    /// transaction is one it sent (3304); it goes to the thread of the
    /// target process found down the caller's stack (3315-3330), if any.
    ///
    /// Then the objects ([`COracle::translate`]). A call to a frozen process
    /// is refused after them (`binder_proc_transaction` 2886-2892,
    /// `BR_FROZEN_REPLY`, logged "frozen process", errno 0), the objects
    /// undone. A call waits on the caller's stack, its completion deferred
    /// until the reply (3784-3792). A one-way transaction waits behind the
    /// node's unfreed one-way buffer (`has_async_transaction`); to a
    /// frozen process it is queued all the same and the sender reads
    /// `BR_TRANSACTION_PENDING_FROZEN` (3813-3822), and with `+update` it
    /// replaces a waiting one of the same sender and flags
    /// (`binder_can_update_transaction` 2797), whose buffer is released.
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
    ) -> Result<(), Stop> {
        self.threads[th].ee = ExtendedError::NONE;
        let target = if to == 0 {
            match self.manager {
                // `target_proc->pid == proc->pid` (3239): the manager's
                // process, or any other open by its task.
                Some(m) if self.pids[self.nodes[m].owner] == self.pids[p] => {
                    log.push(Log::TransactionToOwnManager);
                    self.dec_node(m, true);
                    self.fail_transaction(th, Br::FailedReply, Some(Errno::Inval), log);
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
                self.fail_transaction(th, br, Some(Errno::Inval), log);
                return Ok(());
            }
        };
        let receiver = self.nodes[target].owner;
        let mut target_thread = None;
        if !oneway {
            let refused = if matches!(self.threads[th].todo.front(), Some(Work::Txn(_))) {
                Some(Log::CallWithTodo)
            } else {
                match self.threads[th].stack {
                    Some(top) if self.calls[top].to_thread != Some(th) => Some(Log::CallBadStack),
                    _ => None,
                }
            };
            if let Some(line) = refused {
                log.push(line);
                self.dec_node(target, true);
                self.fail_transaction(th, Br::FailedReply, Some(Errno::Proto), log);
                return Ok(());
            }
            let mut below = self.threads[th].stack;
            while let Some(c) = below {
                if let Some(from) = self.calls[c].from {
                    if self.threads[from].pid == receiver {
                        target_thread = Some(from);
                        break;
                    }
                }
                below = self.calls[c].from_parent;
            }
        }
        // binder_alloc_new_buf (3393): "cannot allocate buffer", a line of
        // no kind (mod.rs).
        let size = buffer_size(payload);
        let (offset, suspect) =
            match self.procs[receiver]
                .alloc
                .new_buf(size, oneway, self.pids[p] as usize)
            {
                Ok(found) => found,
                Err(errno) => {
                    self.dec_node(target, true);
                    self.fail_transaction(th, Br::FailedReply, Some(errno), log);
                    return Ok(());
                }
            };
        let objects = match self.translate(p, th, receiver, &payload.objects, fail, log)? {
            Ok(objects) => objects,
            Err(errno) => {
                log.push(Log::TranslateFailed);
                self.procs[receiver].alloc.free(offset);
                self.dec_node(target, true);
                self.fail_transaction(th, Br::FailedReply, Some(errno), log);
                return Ok(());
            }
        };
        let buffer = Buffer {
            target: Some(target),
            objects,
            oneway,
            offset: Some(offset),
        };
        let flags = payload.flags.0 | if oneway { TF_ONE_WAY } else { 0 };
        let frozen = self.procs[receiver].frozen;
        if oneway {
            let txn = Txn {
                buffer,
                call: None,
                reply: false,
                sender: p,
                flags,
            };
            self.procs[receiver].async_recv |= frozen;
            let node = &mut self.nodes[target];
            if node.oneway_busy {
                let mut outdated = None;
                if payload.flags.has(TxnFlags::UPDATE_TXN) && frozen {
                    // The same sending pid (`buffer->pid`, the task's).
                    let pids = &self.pids;
                    let same = |t: &Txn| pids[t.sender] == pids[txn.sender] && t.flags == txn.flags;
                    if let Some(i) = node.waiting.iter().position(same) {
                        outdated = node.waiting.remove(i);
                    }
                }
                node.waiting.push_back(txn);
                if let Some(old) = outdated {
                    self.release_buffer(receiver, old.buffer, fail, log);
                }
            } else {
                node.oneway_busy = true;
                self.procs[receiver].todo.push_back(Work::Txn(txn));
            }
            let complete = if frozen {
                Work::PendingFrozen
            } else if suspect {
                Work::SpamSuspect
            } else {
                Work::Complete
            };
            self.push_thread(th, complete);
            return Ok(());
        }
        if frozen {
            self.procs[receiver].sync_recv = true;
            log.push(Log::FrozenProcess);
            self.release_buffer(receiver, buffer, fail, log);
            self.fail_transaction(th, Br::FrozenReply, None, log);
            return Ok(());
        }
        self.calls.push(Call {
            from: Some(th),
            to_thread: None,
            from_parent: self.threads[th].stack,
            to_parent: None,
        });
        let call = self.calls.len() - 1;
        self.threads[th].stack = Some(call);
        self.push_deferred(th, Work::Complete);
        let txn = Work::Txn(Txn {
            buffer,
            call: Some(call),
            reply: false,
            sender: p,
            flags,
        });
        match target_thread {
            Some(t) => self.push_thread(t, txn),
            None => self.procs[receiver].todo.push_back(txn),
        }
        Ok(())
    }

    /// `BC_REPLY` (`binder_transaction` with `reply`, 3146-3205). Refused
    /// (`BR_FAILED_REPLY`, `EPROTO`, logged, the replier's extended error)
    /// with no transaction stack (3152) or when the last transaction is not
    /// one this thread received (3161). The call is then taken off the
    /// replier's stack; when its caller is gone ("reply target not found",
    /// 3182, `BR_DEAD_REPLY`) or the objects fail, the replier reads
    /// `BR_TRANSACTION_COMPLETE` (3921-3926), the caller (if still there)
    /// has the error in its extended error when it held `BR_OK`
    /// (`binder_set_txn_from_error` 2988) and reads it
    /// ([`COracle::send_failed_reply`]). Otherwise the replier reads its
    /// completion and the caller, taken off its stack, the reply
    /// (3767-3777), frozen or not.
    fn reply(
        &mut self,
        p: usize,
        th: ThreadId,
        payload: &Payload,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<(), Stop> {
        self.threads[th].ee = ExtendedError::NONE;
        let Some(call) = self.threads[th].stack else {
            log.push(Log::ReplyNoStack);
            self.fail_transaction(th, Br::FailedReply, Some(Errno::Proto), log);
            return Ok(());
        };
        if self.calls[call].to_thread != Some(th) {
            log.push(Log::ReplyBadStack);
            self.fail_transaction(th, Br::FailedReply, Some(Errno::Proto), log);
            return Ok(());
        }
        self.threads[th].stack = self.calls[call].to_parent;
        let Some(caller) = self.calls[call].from else {
            log.push(Log::ReplyTargetGone);
            self.reply_failed(th, call, Br::DeadReply, None, log);
            return Ok(());
        };
        if self.threads[caller].stack != Some(call) {
            // "got reply transaction with bad target transaction stack"
            // (3189): the call is dropped from the replier's stack only.
            log.push(Log::ReplyBadStack);
            self.fail_transaction(th, Br::FailedReply, Some(Errno::Proto), log);
            return Ok(());
        }
        let receiver = self.threads[caller].pid;
        let size = buffer_size(payload);
        let offset = match self.procs[receiver]
            .alloc
            .new_buf(size, false, self.pids[p] as usize)
        {
            Ok((offset, _)) => offset,
            Err(errno) => {
                self.reply_failed(th, call, Br::FailedReply, Some(errno), log);
                return Ok(());
            }
        };
        let objects = match self.translate(p, th, receiver, &payload.objects, fail, log)? {
            Ok(objects) => objects,
            Err(errno) => {
                log.push(Log::TranslateFailed);
                self.procs[receiver].alloc.free(offset);
                self.reply_failed(th, call, Br::FailedReply, Some(errno), log);
                return Ok(());
            }
        };
        self.push_thread(th, Work::Complete);
        self.threads[caller].stack = self.calls[call].from_parent;
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
        self.push_thread(caller, Work::Txn(txn));
        Ok(())
    }

    /// A reply that failed after its call left the replier's stack
    /// (3921-3926).
    fn reply_failed(
        &mut self,
        th: ThreadId,
        call: CallId,
        br: Br,
        errno: Option<Errno>,
        log: &mut Vec<Log>,
    ) {
        log.push(Log::TransactionFailed);
        if let Some(caller) = self.calls[call].from {
            let ee = &mut self.threads[caller].ee;
            if ee.command == br_code::OK {
                *ee = extended(br_of(&br), errno);
            }
        }
        self.push_thread(th, Work::Error(Br::TransactionComplete));
        self.send_failed_reply(call, br);
    }

    /// `binder_send_failed_reply` (1703): the call's caller, if still
    /// there, has it taken off its stack and reads the error; else the
    /// error goes down the stack to the call the caller was answering, and
    /// so on.
    fn send_failed_reply(&mut self, mut call: CallId, br: Br) {
        loop {
            if let Some(caller) = self.calls[call].from {
                self.threads[caller].stack = self.calls[call].from_parent;
                self.push_thread(caller, Work::Error(br));
                return;
            }
            match self.calls[call].from_parent {
                Some(next) => call = next,
                None => return,
            }
        }
    }

    /// The objects of a transaction, in order, for process `receiver`
    /// (3537-3571): a node of the sender's (created if missing; one with
    /// another cookie is refused, `EINVAL`, 2253) becomes a reference of the
    /// receiver's, whose new count queues the node's work on the sender's
    /// thread (`binder_translate_binder`, 2237); a handle of the sender's,
    /// which must exist (strong for a strong object, else logged, 2303,
    /// `EINVAL`), becomes the node itself when the receiver owns it, else
    /// a reference (`binder_translate_handle`, 2290); a new reference's
    /// memory can fail (`ENOMEM`). At the first object that fails the ones
    /// before it are undone as a freed buffer would undo them.
    fn translate(
        &mut self,
        p: usize,
        th: ThreadId,
        receiver: usize,
        objects: &[Object],
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) -> Result<Result<Vec<Carried>, Errno>, Stop> {
        let mut carried = Vec::new();
        for object in objects.iter().flat_map(Object::expand) {
            let one = match object {
                Object::Nodes { .. } => unreachable!("runs are expanded"),
                Object::Node { ptr, strong } => {
                    let n = self.node_for(p, ptr, ptr);
                    let one = if self.nodes[n].cookie != ptr {
                        Err(Errno::Inval)
                    } else {
                        match self.inc_ref_for_node(receiver, n, strong, fail, Some(th)) {
                            Ok(handle) => Ok(Carried::Handle { handle, strong }),
                            Err(IncError::NoMem) => Err(Errno::NoMem),
                            Err(IncError::Bug) => return Err(Stop::Bug),
                        }
                    };
                    // binder_put_node (2286).
                    self.put_node(n);
                    one
                }
                Object::Handle { handle, strong } => match self.lookup(p, handle, strong, log) {
                    None => {
                        log.push(Log::ObjectInvalidHandle(handle));
                        Err(Errno::Inval)
                    }
                    Some(r) if !self.nodes[r.node].dead && self.nodes[r.node].owner == receiver => {
                        Ok(Carried::Node {
                            node: r.node,
                            strong,
                        })
                    }
                    Some(r) => match self.inc_ref_for_node(receiver, r.node, strong, fail, None) {
                        Ok(handle) => Ok(Carried::Handle { handle, strong }),
                        Err(IncError::NoMem) => Err(Errno::NoMem),
                        Err(IncError::Bug) => return Err(Stop::Bug),
                    },
                },
            };
            match one {
                Ok(c) => carried.push(c),
                Err(errno) => {
                    let undone = Buffer {
                        target: None,
                        objects: carried,
                        oneway: false,
                        offset: None,
                    };
                    self.release_buffer(receiver, undone, fail, log);
                    return Ok(Err(errno));
                }
            }
        }
        Ok(Ok(carried))
    }

    /// The transaction is read: its buffer is kept for a later `free`.
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

    /// `binder_transaction_buffer_release` (2044) on a buffer no list holds
    /// any more: its target and its node objects lose their counts (2060,
    /// 2098), each node object's lookup then put ([`COracle::put_node`],
    /// 2100), each handle object is one less on the reference with that
    /// descriptor now, logged when there is none (2113).
    fn release_buffer(
        &mut self,
        receiver: usize,
        buffer: Buffer,
        fail: &mut FailOnce,
        log: &mut Vec<Log>,
    ) {
        if let Some(offset) = buffer.offset {
            self.procs[receiver].alloc.free(offset);
        }
        if let Some(target) = buffer.target {
            self.dec_node(target, true);
        }
        for object in buffer.objects {
            match object {
                Carried::Handle { handle, strong } => {
                    if self
                        .update_ref(receiver, handle, false, strong, fail, log)
                        .is_err()
                    {
                        log.push(Log::BadBufferObject);
                    }
                }
                Carried::Node { node, strong } => {
                    self.dec_node(node, strong);
                    // binder_put_node (2100) of binder_get_node (2089).
                    self.put_node(node);
                }
            }
        }
    }

    /// `BC_FREE_BUFFER` on the oldest buffer (`binder_free_buf`, 4097):
    /// for a one-way buffer the next one-way transaction waiting for that
    /// node is queued on the process (4111-4124), then the buffer is
    /// released.
    fn free(&mut self, p: usize, fail: &mut FailOnce, log: &mut Vec<Log>) -> Ret {
        let buffer = self.procs[p].buffers.pop_front().expect("checked");
        if let (true, Some(target)) = (buffer.oneway, buffer.target) {
            let node = &mut self.nodes[target];
            match node.waiting.pop_front() {
                Some(next) => self.procs[p].todo.push_back(Work::Txn(next)),
                None => node.oneway_busy = false,
            }
        }
        self.release_buffer(p, buffer, fail, log);
        Ret::Ok
    }

    /// `BC_REQUEST_DEATH_NOTIFICATION` (4395-4472): on a reference that
    /// exists (else logged, 4432) and has none yet (else logged, 4455);
    /// when the node is already dead `BR_DEAD_BINDER` is queued on the
    /// process at once (4466-4474).
    fn request_death(&mut self, p: usize, desc: u32, cookie: u64, log: &mut Vec<Log>) {
        let Some(r) = self.procs[p].refs.get(&desc).copied() else {
            log.push(Log::DeathInvalidRef { request: true });
            return;
        };
        if r.death.is_some() {
            log.push(Log::DeathAlreadySet);
            return;
        }
        self.deaths.push(Death {
            cookie,
            kind: DeathKind::DeadBinder,
        });
        let d = self.deaths.len() - 1;
        self.procs[p].refs.get_mut(&desc).expect("found").death = Some(d);
        if self.nodes[r.node].dead {
            self.procs[p].todo.push_back(Work::Death(d));
        }
    }

    /// Whether death notification `d` is on a list of process `p`
    /// (`death->work.entry`).
    fn death_queued(&self, p: usize, d: DeathId) -> bool {
        let proc = &self.procs[p];
        let is = |w: &Work| matches!(w, Work::Death(x) if *x == d);
        proc.todo.iter().any(is)
            || proc.delivered_death.contains(&d)
            || proc
                .threads
                .iter()
                .flatten()
                .any(|&th| self.threads[th].todo.iter().any(is))
    }

    /// Queues a death or freeze work item on thread `th` when it is a
    /// looper, else on its process (4500-4509, 4543-4553).
    fn push_if_looper(&mut self, p: usize, th: ThreadId, work: Work) {
        let thread = &self.threads[th];
        if thread.registered || thread.entered {
            self.push_thread(th, work);
        } else {
            self.procs[p].todo.push_back(work);
        }
    }

    /// `BC_CLEAR_DEATH_NOTIFICATION` (4473-4514): the reference must exist
    /// and have a notification with this cookie (each failure logged). A
    /// notification not queued becomes its `BR_CLEAR_DEATH_NOTIFICATION_DONE`,
    /// queued on the thread when it is a looper, else on the process; one
    /// queued (its `BR_DEAD_BINDER` not read, or read and not done) is
    /// marked to be followed by it (4512).
    fn clear_death(&mut self, p: usize, th: ThreadId, desc: u32, cookie: u64, log: &mut Vec<Log>) {
        let Some(r) = self.procs[p].refs.get_mut(&desc) else {
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
        if self.death_queued(p, d) {
            self.deaths[d].kind = DeathKind::DeadBinderAndClear;
        } else {
            self.deaths[d].kind = DeathKind::Clear;
            self.push_if_looper(p, th, Work::Death(d));
        }
    }

    /// Whether freeze notification `f` is on a list of process `p`.
    fn freeze_queued(&self, p: usize, f: FreezeId) -> bool {
        let proc = &self.procs[p];
        proc.todo
            .iter()
            .any(|w| matches!(w, Work::Freeze(x) if *x == f))
            || proc.delivered_freeze.contains(&f)
    }

    /// `BC_REQUEST_FREEZE_NOTIFICATION` (`binder_request_freeze_notification`,
    /// 3938): on a reference that exists (else logged, `EINVAL`, 3951) and
    /// has none yet (else logged, `EINVAL`, 3960); when the node's owner is
    /// alive, a `BR_FROZEN_BINDER` with its frozen state now is queued on
    /// the process (3974-3982). The failed write fails the ioctl.
    fn request_freeze(&mut self, p: usize, desc: u32, cookie: u64, log: &mut Vec<Log>) -> Ret {
        let Some(r) = self.procs[p].refs.get(&desc).copied() else {
            log.push(Log::FreezeInvalidRef { request: true });
            return Ret::Err(Errno::Inval);
        };
        if r.freeze.is_some() {
            log.push(Log::FreezeAlreadySet);
            return Ret::Err(Errno::Inval);
        }
        let node = &self.nodes[r.node];
        self.freezes.push(Freeze {
            cookie,
            clear: false,
            is_frozen: !node.dead && self.procs[node.owner].frozen,
            sent: false,
            resend: false,
        });
        let f = self.freezes.len() - 1;
        self.procs[p].refs.get_mut(&desc).expect("found").freeze = Some(f);
        if !node.dead {
            self.procs[p].todo.push_back(Work::Freeze(f));
        }
        Ret::Ok
    }

    /// `BC_CLEAR_FREEZE_NOTIFICATION` (`binder_clear_freeze_notification`,
    /// 3990): the reference must exist, have a notification, with this
    /// cookie (each failure logged, `EINVAL`). The notification becomes its
    /// `BR_CLEAR_FREEZE_NOTIFICATION_DONE`: queued on the process when it
    /// is on no list, sent again after the done when read and not done
    /// (4036-4042), read as such when still queued.
    fn clear_freeze(&mut self, p: usize, desc: u32, cookie: u64, log: &mut Vec<Log>) -> Ret {
        let Some(r) = self.procs[p].refs.get_mut(&desc) else {
            log.push(Log::FreezeInvalidRef { request: false });
            return Ret::Err(Errno::Inval);
        };
        let Some(f) = r.freeze else {
            log.push(Log::FreezeNotActive);
            return Ret::Err(Errno::Inval);
        };
        if self.freezes[f].cookie != cookie {
            log.push(Log::FreezeCookieMismatch);
            return Ret::Err(Errno::Inval);
        }
        r.freeze = None;
        self.freezes[f].clear = true;
        if !self.freeze_queued(p, f) {
            self.procs[p].todo.push_back(Work::Freeze(f));
        } else if self.freezes[f].sent {
            self.freezes[f].resend = true;
        }
        Ret::Ok
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

    /// `BINDER_GET_NODE_DEBUG_INFO` (`binder_ioctl_get_node_debug_info`,
    /// 5600): the first node of the caller's tree above the pointer, with
    /// its cookie and what its owner was told; all 0 when there is none.
    fn node_debug(&self, p: usize, above: u64) -> Ret {
        let first = self.procs[p].tree.iter().find(|(&ptr, _)| ptr > above);
        match first {
            Some((_, &n)) => {
                let node = &self.nodes[n];
                Ret::NodeDebug {
                    ptr: node.ptr,
                    cookie: node.cookie,
                    has_strong: node.told_strong,
                    has_weak: node.told_weak,
                }
            }
            _ => Ret::NodeDebug {
                ptr: 0,
                cookie: 0,
                has_strong: false,
                has_weak: false,
            },
        }
    }

    /// `BC_REGISTER_LOOPER`, `BC_ENTER_LOOPER`, `BC_EXIT_LOOPER`
    /// (4358-4397). Registering after entering, or with no thread
    /// requested, is logged and counts no started thread; otherwise it
    /// takes one requested thread as started. Entering after registering is
    /// logged. The thread is a looper either way; exiting changes nothing
    /// a later command sees.
    fn looper(&mut self, p: usize, th: ThreadId, cmd: LooperCmd, log: &mut Vec<Log>) {
        let proc = &mut self.procs[p];
        let thread = &mut self.threads[th];
        match cmd {
            LooperCmd::Register => {
                if thread.entered || proc.requested == 0 {
                    log.push(Log::LooperMisuse);
                } else {
                    proc.requested -= 1;
                    proc.started += 1;
                }
                thread.registered = true;
            }
            LooperCmd::Enter => {
                if thread.registered {
                    log.push(Log::LooperMisuse);
                }
                thread.entered = true;
            }
            LooperCmd::Exit => {}
        }
    }

    /// `binder_thread_release` (5355): the thread leaves the driver. Down
    /// its stack, the calls it received lose their thread and the calls it
    /// sent their caller (5394-5413); the call it was last given, if any,
    /// is answered `BR_DEAD_REPLY` (5438); then its `todo` is released
    /// ([`COracle::release_work`]), where a node's work is dropped.
    fn thread_release(&mut self, p: usize, th: ThreadId, log: &mut Vec<Log>) {
        let top = self.threads[th].stack;
        let send_reply = top.filter(|&c| self.calls[c].to_thread == Some(th));
        let mut at = top;
        while let Some(c) = at {
            if self.calls[c].to_thread == Some(th) {
                self.calls[c].to_thread = None;
                at = self.calls[c].to_parent;
            } else if self.calls[c].from == Some(th) {
                self.calls[c].from = None;
                at = self.calls[c].from_parent;
            } else {
                break;
            }
        }
        let thread = &mut self.threads[th];
        thread.stack = None;
        thread.readable = false;
        let todo = std::mem::take(&mut thread.todo);
        self.procs[p].threads[thread.tid.index()] = None;
        if let Some(c) = send_reply {
            self.send_failed_reply(c, Br::DeadReply);
        }
        self.release_work(todo, log);
    }

    /// `binder_release_work` (5193) on a dying thread's or process's list:
    /// a call is answered `BR_DEAD_REPLY` (`binder_cleanup_transaction`,
    /// 1767), anything else undelivered is logged by kind; a node's work
    /// is dropped.
    fn release_work(&mut self, list: VecDeque<Work>, log: &mut Vec<Log>) {
        for work in list {
            match work {
                Work::Txn(Txn {
                    call: Some(call), ..
                }) => self.send_failed_reply(call, Br::DeadReply),
                Work::Txn(_) => log.push(Log::UndeliveredTransaction),
                Work::Error(_) => log.push(Log::UndeliveredError),
                Work::Complete | Work::PendingFrozen | Work::SpamSuspect => {
                    log.push(Log::UndeliveredComplete)
                }
                Work::Node(_) => {}
                Work::Death(d) => match self.deaths[d].kind {
                    DeathKind::DeadBinder => log.push(Log::UnexpectedWork),
                    _ => log.push(Log::UndeliveredDeath),
                },
                Work::Freeze(f) => {
                    if self.freezes[f].clear {
                        log.push(Log::UndeliveredFreeze);
                    } else {
                        log.push(Log::UnexpectedWork);
                    }
                }
            }
        }
    }

    /// Whether process `p` has transactions pending
    /// (`binder_txns_pending_ilocked`, 5625): one on its way to it
    /// (`outstanding_txns`) or a thread with a transaction stack.
    fn txns_pending(&self, p: usize) -> bool {
        let proc = &self.procs[p];
        let on_way = self.buffers_to(p).len() > proc.buffers.len();
        let stacked = proc
            .threads
            .iter()
            .flatten()
            .any(|&th| self.threads[th].stack.is_some());
        on_way || stacked
    }

    /// The processes on `binder_procs` whose pid is `target`'s, in the
    /// list's order (the last opened first). `target` may have left it.
    fn with_pid_of(&self, target: usize) -> Vec<usize> {
        let pid = self.pids[target];
        self.binder_procs
            .iter()
            .copied()
            .filter(|&q| self.pids[q] == pid)
            .collect()
    }

    /// `BINDER_FREEZE` (5897): `EINVAL` when no process has the pid (an
    /// exited one left `binder_procs`, 6283); otherwise the processes with
    /// the pid one by one, in `binder_procs` order, none after the first
    /// that fails, whose error is the ioctl's (5940). Freezing one
    /// (`binder_ioctl_freeze`, 5692) clears `sync_recv`/`async_recv` and
    /// fails with `EAGAIN`, thawed again, while transactions are pending
    /// (5719-5734; nothing else runs while it waits, so the timeout
    /// changes nothing); thawing always succeeds. Both then tell every
    /// freeze notification on the process's nodes ([`COracle::freeze_work`]).
    fn freeze(&mut self, target: usize, enable: bool) -> Ret {
        let procs = self.with_pid_of(target);
        if procs.is_empty() {
            return Ret::Err(Errno::Inval);
        }
        for p in procs {
            let proc = &mut self.procs[p];
            proc.sync_recv = false;
            proc.async_recv = false;
            proc.frozen = enable;
            if enable && self.txns_pending(p) {
                self.procs[p].frozen = false;
                return Ret::Err(Errno::Again);
            }
            self.freeze_work(p, enable);
        }
        Ret::Ok
    }

    /// `binder_add_freeze_work` (5641): for each node of the process, each
    /// reference to it with a freeze notification: one on no list is
    /// queued on its holder with the new state; one read and not done is
    /// sent again when the state changed (5675); a queued one reports the
    /// new state. Each node's temporary reference is then put, which may
    /// queue its work ([`COracle::dec_node`]).
    fn freeze_work(&mut self, p: usize, is_frozen: bool) {
        let nodes: Vec<NodeId> = self.procs[p].tree.values().copied().collect();
        for n in nodes {
            let holders: Vec<(usize, FreezeId)> = self
                .procs
                .iter()
                .enumerate()
                .flat_map(|(q, proc)| {
                    proc.refs
                        .values()
                        .filter(move |r| r.node == n)
                        .filter_map(move |r| r.freeze.map(|f| (q, f)))
                })
                .collect();
            for (q, f) in holders {
                self.freezes[f].clear = false;
                if !self.freeze_queued(q, f) {
                    self.freezes[f].is_frozen = is_frozen;
                    self.procs[q].todo.push_back(Work::Freeze(f));
                } else {
                    let freeze = &mut self.freezes[f];
                    if freeze.sent && freeze.is_frozen != is_frozen {
                        freeze.resend = true;
                    }
                    freeze.is_frozen = is_frozen;
                }
            }
            // binder_put_node (5655, 5689).
            self.put_node(n);
        }
    }

    /// `BINDER_GET_FROZEN_INFO` (`binder_ioctl_get_freezer_info`, 5743):
    /// `EINVAL` without a process with the pid; else, or-ed over them,
    /// `sync_recv` with bit 1 set while transactions are pending, and
    /// `async_recv`.
    fn frozen_info(&self, target: usize) -> Ret {
        let procs = self.with_pid_of(target);
        if procs.is_empty() {
            return Ret::Err(Errno::Inval);
        }
        let sync_recv = procs.iter().fold(0, |bits, &p| {
            bits | u32::from(self.procs[p].sync_recv) | u32::from(self.txns_pending(p)) << 1
        });
        let async_recv = procs
            .iter()
            .fold(0, |bits, &p| bits | u32::from(self.procs[p].async_recv));
        Ret::FrozenInfo {
            sync_recv,
            async_recv,
        }
    }

    /// `close()`, then `binder_deferred_release` (6276), in its order:
    ///
    /// 1. The process leaves `binder_procs`; the manager is unset (6292);
    ///    it is dead and thawed.
    /// 2. Its threads are released ([`COracle::thread_release`]).
    /// 3. Each node leaves the tree, its waiting one-way transactions are
    ///    dropped, each logged, and if anyone still refers to it, it is
    ///    dead and every reference to it with a death notification has its
    ///    `BR_DEAD_BINDER` queued (`binder_node_release`, 6211).
    /// 4. Every reference of the process goes ([`COracle::remove_ref`]).
    /// 5. Its `todo` is released ([`COracle::release_work`]); its buffers
    ///    are freed with the process, their objects not released.
    fn exit(&mut self, p: usize, log: &mut Vec<Log>) {
        self.binder_procs.retain(|&q| q != p);
        if self.manager.is_some_and(|m| self.nodes[m].owner == p) {
            self.manager = None;
        }
        let proc = &mut self.procs[p];
        proc.alive = false;
        proc.frozen = false;
        proc.sync_recv = false;
        proc.async_recv = false;
        for th in self.procs[p].threads.into_iter().flatten() {
            self.thread_release(p, th, log);
        }
        let tree = std::mem::take(&mut self.procs[p].tree);
        for &n in tree.values() {
            let waiting = std::mem::take(&mut self.nodes[n].waiting);
            log.extend(waiting.iter().map(|_| Log::UndeliveredTransaction));
            self.procs[p]
                .todo
                .retain(|w| !matches!(w, Work::Node(m) if *m == n));
            self.nodes[n].dead = true;
            let mut dead = Vec::new();
            for (q, holder) in self.procs.iter().enumerate() {
                for r in holder.refs.values().filter(|r| r.node == n) {
                    if let Some(d) = r.death {
                        dead.push((q, d));
                    }
                }
            }
            for (q, d) in dead {
                self.deaths[d].kind = DeathKind::DeadBinder;
                self.procs[q].todo.push_back(Work::Death(d));
            }
        }
        let descs: Vec<u32> = self.procs[p].refs.keys().copied().collect();
        for desc in descs {
            self.remove_ref(p, desc);
        }
        let todo = std::mem::take(&mut self.procs[p].todo);
        self.release_work(todo, log);
        let proc = &mut self.procs[p];
        proc.buffers.clear();
        proc.delivered_death.clear();
        proc.delivered_freeze.clear();
    }

    /// `binder_has_work_ilocked` (555): the thread has readable work, or
    /// may take the process's and the process has some.
    fn has_work(&self, th: ThreadId, proc_work: bool) -> bool {
        let thread = &self.threads[th];
        thread.readable || (proc_work && !self.procs[thread.pid].todo.is_empty())
    }

    /// `binder_available_for_proc_work_ilocked` (575): no transaction
    /// stack and nothing queued on the thread.
    fn available(&self, th: ThreadId) -> bool {
        let thread = &self.threads[th];
        thread.stack.is_none() && thread.todo.is_empty()
    }

    /// After the command, every live process, `p0` first, and within it
    /// every thread the driver knows, `t0` first, drains as
    /// `docs/commands.md` says: while `poll` (`binder_poll`, 5445) finds
    /// work for it or answers are left, one `BINDER_WRITE_READ` writing the
    /// answers and, when `poll` found work, reading.
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
                    let readable = self.has_work(th, self.available(th));
                    if !readable && answers.is_empty() {
                        break;
                    }
                    // Answers with nothing readable go in a write-only call
                    // (vm/src/exec/drain.rs); a failed write reads nothing
                    // (`binder_ioctl_write_read`, 5493-5496).
                    if !self.answer(p, th, std::mem::take(&mut answers), &mut obs.log) {
                        continue;
                    }
                    if readable {
                        self.read(p, th, obs, &mut answers);
                    }
                }
            }
        }
    }

    /// The answers of a read, written in order (`binder_thread_write`):
    /// `BC_INCREFS_DONE` and `BC_ACQUIRE_DONE` take back the count the
    /// read gave (4262-4288, the node's work queued when it was the last,
    /// [`COracle::dec_node`]), then put the node they looked up (4290,
    /// [`COracle::put_node`]); `BC_DEAD_BINDER_DONE` (4520) lets a cleared
    /// notification's done follow; `BC_FREEZE_NOTIFICATION_DONE`
    /// (`binder_freeze_notification_done`, 4049) sends a notification
    /// marked to be sent again, and fails the ioctl for a cookie not read.
    /// Returns whether the read part runs.
    fn answer(&mut self, p: usize, th: ThreadId, answers: Vec<Done>, log: &mut Vec<Log>) -> bool {
        for answer in answers {
            match answer {
                Done::IncRefs(ptr) | Done::Acquire(ptr) => {
                    let strong = matches!(answer, Done::Acquire(_));
                    let Some(&n) = self.procs[p].tree.get(&ptr) else {
                        continue;
                    };
                    let node = &mut self.nodes[n];
                    let pending = if strong {
                        &mut node.pending_strong
                    } else {
                        &mut node.pending_weak
                    };
                    if !*pending {
                        log.push(Log::IncRefDoneUnexpected);
                        // binder_put_node (4265, 4275).
                        self.put_node(n);
                        continue;
                    }
                    *pending = false;
                    self.dec_node(n, strong);
                    // binder_put_node (4290) of binder_get_node (4238).
                    self.put_node(n);
                }
                Done::DeadBinder(cookie) => {
                    let delivered = &mut self.procs[p].delivered_death;
                    let Some(i) = delivered
                        .iter()
                        .position(|&d| self.deaths[d].cookie == cookie)
                    else {
                        log.push(Log::DeadBinderDoneNotFound);
                        continue;
                    };
                    let d = delivered.remove(i);
                    if self.deaths[d].kind == DeathKind::DeadBinderAndClear {
                        self.deaths[d].kind = DeathKind::Clear;
                        self.push_if_looper(p, th, Work::Death(d));
                    }
                }
                Done::Freeze(cookie) => {
                    let delivered = &mut self.procs[p].delivered_freeze;
                    let Some(i) = delivered
                        .iter()
                        .position(|&f| self.freezes[f].cookie == cookie)
                    else {
                        log.extend([Log::FreezeDoneNotFound, Log::IoctlFailed(Errno::Inval)]);
                        return false;
                    };
                    let f = delivered.remove(i);
                    let freeze = &mut self.freezes[f];
                    freeze.sent = false;
                    if std::mem::take(&mut freeze.resend) {
                        self.procs[p].todo.push_back(Work::Freeze(f));
                    }
                }
            }
        }
        true
    }

    /// One non-blocking read (`binder_thread_read`, 4745): the thread's
    /// `todo`, then the process's when it is available for it; one that
    /// is no looper logs each time it would wait for the process's work
    /// (4776); a pass that wrote nothing starts over, and fails with
    /// `EAGAIN` when there is nothing left (4784-4787, 4817). The read
    /// stops after a transaction or reply (5168), a `BR_DEAD_BINDER`
    /// (4996) or a `BR_FROZEN_BINDER` (5018); one that wrote anything ends
    /// with `BR_SPAWN_LOOPER` when the process has no thread requested,
    /// fewer started than its maximum, and the reader is a looper
    /// (5173-5188).
    fn read(&mut self, p: usize, th: ThreadId, obs: &mut Observed, answers: &mut Vec<Done>) {
        let tid = self.threads[th].tid;
        let mut wrote = false;
        'retry: loop {
            let proc_work = self.available(th);
            let thread = &self.threads[th];
            if proc_work && !(thread.registered || thread.entered) {
                obs.log.push(Log::NotALooper);
            }
            if !self.has_work(th, proc_work) {
                // EAGAIN: not in the naive models (mod.rs).
                return;
            }
            loop {
                let thread = &mut self.threads[th];
                let work = if !thread.todo.is_empty() {
                    thread.todo.pop_front()
                } else if proc_work {
                    self.procs[p].todo.pop_front()
                } else {
                    None
                };
                let thread = &mut self.threads[th];
                thread.readable &= !thread.todo.is_empty();
                let Some(work) = work else {
                    break;
                };
                let mut push = |br: Br| obs.reads[p].push(Read { tid, br });
                match work {
                    Work::Txn(txn) => {
                        let objects = self.received(&txn.buffer);
                        push(if txn.reply {
                            Br::Reply(objects)
                        } else if txn.call.is_some() {
                            Br::Call(objects)
                        } else {
                            Br::Transaction(objects)
                        });
                        if let Some(c) = txn.call {
                            self.calls[c].to_thread = Some(th);
                            self.calls[c].to_parent = self.threads[th].stack;
                            self.threads[th].stack = Some(c);
                        }
                        self.procs[p].buffers.push_back(txn.buffer);
                        break 'retry;
                    }
                    Work::Error(br) => {
                        push(br);
                        wrote = true;
                    }
                    Work::Complete => {
                        push(Br::TransactionComplete);
                        wrote = true;
                    }
                    Work::PendingFrozen => {
                        push(Br::PendingFrozen);
                        wrote = true;
                    }
                    Work::SpamSuspect => {
                        // binder_thread_read (4848-4853): the reader's
                        // process decides.
                        push(if self.procs[p].spam_detection {
                            Br::OnewaySpamSuspect
                        } else {
                            Br::TransactionComplete
                        });
                        wrote = true;
                    }
                    Work::Node(n) => {
                        let c = self.counts(n);
                        let strong = c.local_strong > 0 || c.strong_refs > 0;
                        let weak = strong || c.local_weak > 0 || c.any_refs;
                        let node = &mut self.nodes[n];
                        let ptr = node.ptr;
                        if weak && !node.told_weak {
                            node.told_weak = true;
                            node.pending_weak = true;
                            push(Br::IncRefs(ptr));
                            answers.push(Done::IncRefs(ptr));
                            wrote = true;
                        }
                        if strong && !node.told_strong {
                            node.told_strong = true;
                            node.pending_strong = true;
                            push(Br::Acquire(ptr));
                            answers.push(Done::Acquire(ptr));
                            wrote = true;
                        }
                        if !strong && node.told_strong {
                            node.told_strong = false;
                            push(Br::Release(ptr));
                            wrote = true;
                        }
                        if !weak && node.told_weak {
                            node.told_weak = false;
                            push(Br::DecRefs(ptr));
                            wrote = true;
                        }
                        if !weak {
                            self.procs[p].tree.remove(&ptr);
                        }
                    }
                    Work::Death(d) => {
                        let death = self.deaths[d];
                        if death.kind == DeathKind::Clear {
                            push(Br::ClearDeathDone(death.cookie));
                            wrote = true;
                        } else {
                            push(Br::DeadBinder(death.cookie));
                            self.procs[p].delivered_death.push(d);
                            answers.push(Done::DeadBinder(death.cookie));
                            break 'retry;
                        }
                    }
                    Work::Freeze(f) => {
                        let freeze = &mut self.freezes[f];
                        if freeze.clear {
                            push(Br::ClearFreezeDone(freeze.cookie));
                            wrote = true;
                        } else {
                            freeze.sent = true;
                            push(Br::FrozenBinder {
                                cookie: freeze.cookie,
                                frozen: freeze.is_frozen,
                            });
                            self.procs[p].delivered_freeze.push(f);
                            answers.push(Done::Freeze(freeze.cookie));
                            break 'retry;
                        }
                    }
                }
            }
            if wrote {
                break;
            }
        }
        let proc = &mut self.procs[p];
        let thread = &self.threads[th];
        if proc.requested == 0
            && proc.started < proc.max_threads
            && (thread.registered || thread.entered)
        {
            proc.requested += 1;
            obs.reads[p].push(Read {
                tid,
                br: Br::SpawnLooper,
            });
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
            "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[weak-as-strong, transaction-to-invalid-handle 1, no-target-node, transaction-failed]"
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
        let mut model = COracle::new(&Procs::new(vec![0, 0]), version);
        for (i, &desc) in descs.iter().enumerate() {
            let n = model.node_for(1, i as u64, i as u64);
            let r = Ref {
                node: n,
                strong: 0,
                weak: 1,
                death: None,
                freeze: None,
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
            let n = model.node_for(1, 100, 100);
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
