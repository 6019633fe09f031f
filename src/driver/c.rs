//! The C driver (`drivers/android/binder.c` of Linux 7.3) at the command
//! level.
//!
//! Each function here is named after the upstream function it reproduces,
//! and keeps its order of checks, counts and work items; `docs/conformance.md`
//! and `docs/conformance-commands.md` give the upstream line of every rule.
//! The handle tables are [`NodeRefs<DBitmap>`] driven through the C
//! protocol of [`Operation`](crate::Operation)
//! (`binder_get_ref_for_node_olocked`'s retry, `try_shrink_dmap`'s own
//! critical sections), so the C versions of the allocator's history apply
//! here too.
//!
//! What is reproduced of the driver's state: the context manager and its
//! uid; per process its references (`refs_by_desc` with strong and weak
//! counts, a death and a freeze notification), its nodes
//! (`internal_strong_refs`, `local_strong_refs`, `local_weak_refs`,
//! `tmp_refs`, `has_strong_ref`, `has_weak_ref`, the pending requests, the
//! references to them and the one-way queue), its threads (looper state,
//! `todo` and `process_todo`, `transaction_stack`, `return_error`,
//! `reply_error`, the extended error), the process's work list, the
//! thread pool's counts, the freezer's state, the delivered death and
//! freeze notifications and the received buffers; the transactions with
//! their `from`, `to_thread`, `from_parent` and `to_parent` links. No
//! thread ever blocks: a read is non-blocking, so no thread ever waits on
//! `waiting_threads`.

use super::command::{
    Command, LooperCmd, NodeFlags, Object, Payload, Pid, Procs, RefCmd, Refused, Step, Tid,
    TxnFlags,
};
use super::exec::{drive, Held, Tables, Windows};
use super::observe::{
    br_code, draining_threads, Br, Errno, ExtendedError, Log, NodeName, NodeState, Observed,
    ProcState, Read, Received, RefState, Ret, Snapshot,
};
use crate::dbitmap::DBitmap;
use crate::table::{Error, Manager, NodeId, NodeRefs, Operation, Request};
use crate::version::{Driver, Version};
use std::collections::{BTreeMap, VecDeque};

type NodeIdx = usize;
type DeathIdx = usize;
type FreezeIdx = usize;
type ThreadIdx = usize;
type TxnIdx = usize;

/// `BINDER_CURRENT_PROTOCOL_VERSION` on 64-bit kernels.
pub(crate) const PROTOCOL_VERSION: i32 = 8;

/// Every process maps 1 MiB (`docs/commands.md`): its buffer space.
pub(crate) const MAP_SIZE: usize = 1 << 20;

/// A transaction's buffer size (`sanitized_size`, binder_alloc.c; the Rust
/// driver's `copy_transaction_data` computes the same): each object is a
/// `flat_binder_object` (24 bytes) and an offset (8 bytes), and an empty
/// buffer still takes 8.
pub(crate) fn buffer_size(payload: &Payload) -> usize {
    let objects: usize = payload.objects.iter().map(|o| o.expand().count()).sum();
    (objects * (24 + 8)).max(8)
}

/// `BINDER_LOOPER_STATE_*`.
mod looper {
    pub const REGISTERED: u32 = 0x01;
    pub const ENTERED: u32 = 0x02;
    pub const EXITED: u32 = 0x04;
    pub const INVALID: u32 = 0x08;
    pub const POLL: u32 = 0x20;
}

/// A work item on a list (`struct binder_work`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// `BINDER_WORK_TRANSACTION`: a transaction (a reply too).
    Transaction(TxnIdx),
    /// `BINDER_WORK_TRANSACTION_COMPLETE`, `..._PENDING` or
    /// `..._ONEWAY_SPAM_SUSPECT`: a `tcomplete`, by its own number.
    Complete(usize, Complete),
    /// `BINDER_WORK_RETURN_ERROR`: the thread's `return_error`.
    ReturnError(ThreadIdx),
    /// `BINDER_WORK_RETURN_ERROR`: the thread's `reply_error`.
    ReplyError(ThreadIdx),
    /// `BINDER_WORK_NODE`: the node's own work item.
    Node(NodeIdx),
    /// A death notification's work item; its type is the death's.
    Death(DeathIdx),
    /// A freeze notification's work item; its type is the freeze's.
    Freeze(FreezeIdx),
}

/// The type of a `tcomplete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Complete {
    /// `BINDER_WORK_TRANSACTION_COMPLETE`.
    Done,
    /// `BINDER_WORK_TRANSACTION_PENDING`: a one-way transaction queued
    /// to a frozen process.
    Pending,
    /// `BINDER_WORK_TRANSACTION_ONEWAY_SPAM_SUSPECT`: its buffer was
    /// allocated when its sender looked like a one-way spammer.
    Spam,
}

/// `BINDER_WORK_DEAD_BINDER`, `..._AND_CLEAR`, `BINDER_WORK_CLEAR_DEATH_NOTIFICATION`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeathKind {
    /// Not queued yet (a request on a live node).
    Armed,
    DeadBinder,
    DeadBinderAndClear,
    Clear,
}

#[derive(Debug)]
struct Death {
    cookie: u64,
    kind: DeathKind,
}

/// `struct binder_ref_freeze`.
#[derive(Debug)]
struct Freeze {
    cookie: u64,
    /// `BINDER_WORK_FROZEN_BINDER` (`false`) or
    /// `BINDER_WORK_CLEAR_FREEZE_NOTIFICATION` (`true`).
    clear: bool,
    is_frozen: bool,
    sent: bool,
    resend: bool,
}

#[derive(Debug)]
struct Ref {
    node: NodeIdx,
    strong: i32,
    weak: i32,
    death: Option<DeathIdx>,
    freeze: Option<FreezeIdx>,
}

#[derive(Debug)]
struct Node {
    name: NodeName,
    ptr: u64,
    cookie: u64,
    /// `node->proc`: `None` once the owner died.
    proc: Option<Pid>,
    internal_strong_refs: i32,
    local_strong_refs: i32,
    local_weak_refs: i32,
    tmp_refs: i32,
    has_strong_ref: bool,
    has_weak_ref: bool,
    pending_strong_ref: bool,
    pending_weak_ref: bool,
    /// `node->refs`: the references to it, as (process, descriptor).
    refs: Vec<(Pid, u32)>,
    has_async_transaction: bool,
    async_todo: VecDeque<Work>,
    freed: bool,
}

/// A transaction buffer, in its receiver's allocator, with the objects as
/// translated for the receiver.
#[derive(Debug)]
struct Buffer {
    /// `buffer->target_node`: `None` for a reply.
    target_node: Option<NodeIdx>,
    /// `buffer->async_transaction`.
    async_transaction: bool,
    /// `buffer->transaction`, cleared when the transaction or the buffer
    /// goes first.
    transaction: Option<TxnIdx>,
    objects: Vec<Received>,
    /// Its size in the receiver's allocator (`sanitized_size`).
    size: usize,
    /// `buffer->pid`: the sending process.
    sender: Pid,
    /// Still allocated (not yet given back by `binder_alloc_free_buf`).
    allocated: bool,
}

/// `struct binder_transaction`.
#[derive(Debug)]
struct Txn {
    /// `from`: the sending thread of a call, until it is popped or dies.
    from: Option<ThreadIdx>,
    from_parent: Option<TxnIdx>,
    to_parent: Option<TxnIdx>,
    to_proc: Option<Pid>,
    to_thread: Option<ThreadIdx>,
    buffer: Option<usize>,
    flags: TxnFlags,
    oneway: bool,
    /// The sending process (`buffer->pid`).
    sender: Pid,
    freed: bool,
}

/// `struct binder_extended_error`.
#[derive(Clone, Copy, Debug)]
struct Ee {
    id: u32,
    command: u32,
    param: i32,
}

impl Ee {
    const OK: Ee = Ee {
        id: 0,
        command: br_code::OK,
        param: 0,
    };
}

/// `struct binder_thread`.
#[derive(Debug)]
struct Thread {
    pid: Pid,
    tid: Tid,
    looper: u32,
    looper_need_return: bool,
    todo: VecDeque<Work>,
    process_todo: bool,
    transaction_stack: Option<TxnIdx>,
    /// `return_error.cmd` when not `BR_OK`.
    return_error: Option<u32>,
    /// `reply_error.cmd` when not `BR_OK`.
    reply_error: Option<u32>,
    ee: Ee,
    is_dead: bool,
}

#[derive(Debug)]
struct Proc {
    /// `proc->pid`: the pid of the task that opened it (`current->tgid`,
    /// binder.c:6087), named by the task's first process. Two opens by one
    /// task have one pid.
    pid: Pid,
    euid: u32,
    /// The file is still open (no `exit` yet): the process is on the
    /// global `binder_procs` list.
    open: bool,
    is_dead: bool,
    refs: NodeRefs<DBitmap>,
    ref_data: BTreeMap<u32, Ref>,
    nodes: BTreeMap<u64, NodeIdx>,
    /// `proc->threads`: the threads the driver knows, by thread.
    threads: BTreeMap<Tid, ThreadIdx>,
    todo: VecDeque<Work>,
    delivered_death: Vec<DeathIdx>,
    delivered_freeze: Vec<FreezeIdx>,
    max_threads: u32,
    requested_threads: u32,
    requested_threads_started: u32,
    is_frozen: bool,
    sync_recv: bool,
    async_recv: bool,
    outstanding_txns: i32,
    oneway_spam_detection_enabled: bool,
    /// `alloc->free_async_space`.
    free_async_space: usize,
    /// `alloc->oneway_spam_detected`.
    oneway_spam_detected: bool,
    /// Delivered buffers userspace has not freed, oldest first.
    buffers: VecDeque<usize>,
}

/// The C driver's state for one context (one Binder device) and its
/// processes.
#[derive(Debug)]
pub struct CDriver {
    version: Version,
    /// `context->binder_context_mgr_node`.
    manager: Option<NodeIdx>,
    /// `context->binder_context_mgr_uid`.
    manager_uid: Option<u32>,
    procs: Vec<Proc>,
    threads: Vec<Thread>,
    nodes: Vec<Node>,
    deaths: Vec<Death>,
    freezes: Vec<Freeze>,
    buffers: Vec<Buffer>,
    txns: Vec<Txn>,
    serials: BTreeMap<(Pid, u64), u32>,
    /// `binder_last_id`.
    last_id: u32,
    /// The number of the next `tcomplete`.
    completes: usize,
    log: Vec<Log>,
    crashed: bool,
    crash: Option<Crash>,
    /// The locks the running command keeps across its allocations.
    held: Held,
}

/// What a `BUG()` in `binder_get_ref_for_node_olocked` was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash {
    /// The descriptor found twice in `refs_by_desc`.
    pub desc: u32,
    /// Whether the node inserted was the context manager's.
    pub manager: bool,
}

impl Tables<DBitmap> for CDriver {
    fn table(&mut self, pid: Pid) -> &mut NodeRefs<DBitmap> {
        &mut self.procs[pid.index()].refs
    }
    fn held(&self) -> Held {
        self.held
    }
}

/// What a reference-count change reports back (`struct binder_ref_data`).
#[derive(Clone, Copy, Debug)]
struct RefData {
    desc: u32,
}

/// Why `binder_transaction` failed: the `BR_*` for the sender and the
/// errno for its extended error.
#[derive(Clone, Copy, Debug)]
struct TxnError {
    cmd: u32,
    param: i32,
}

impl TxnError {
    fn failed(param: Errno) -> Self {
        TxnError {
            cmd: br_code::FAILED_REPLY,
            param: -param.code(),
        }
    }
    fn dead() -> Self {
        TxnError {
            cmd: br_code::DEAD_REPLY,
            param: 0,
        }
    }
}

/// The `BR_*` for a return error's code.
fn br_of(cmd: u32) -> Br {
    match cmd {
        br_code::FAILED_REPLY => Br::FailedReply,
        br_code::DEAD_REPLY => Br::DeadReply,
        br_code::FROZEN_REPLY => Br::FrozenReply,
        br_code::TRANSACTION_COMPLETE => Br::TransactionComplete,
        other => Br::Error(other as i32),
    }
}

impl CDriver {
    /// The driver after each of `procs.len()` processes opened the device,
    /// for the C `version`: each one's thread `t0` has made its first
    /// ioctls (`BINDER_VERSION`, then `BC_ENTER_LOOPER`).
    ///
    /// # Panics
    ///
    /// If `version` is not a C version.
    pub fn new(procs: &Procs, version: Version) -> Self {
        assert_eq!(version.driver(), Driver::C, "{version} is not a C version");
        let procs = procs
            .euids
            .iter()
            .zip(&procs.tasks)
            .map(|(&euid, &task)| Proc {
                pid: task,
                euid,
                open: true,
                is_dead: false,
                refs: NodeRefs::with_version(version),
                ref_data: BTreeMap::new(),
                nodes: BTreeMap::new(),
                threads: BTreeMap::new(),
                todo: VecDeque::new(),
                delivered_death: Vec::new(),
                delivered_freeze: Vec::new(),
                max_threads: 0,
                requested_threads: 0,
                requested_threads_started: 0,
                is_frozen: false,
                sync_recv: false,
                async_recv: false,
                outstanding_txns: 0,
                oneway_spam_detection_enabled: false,
                free_async_space: MAP_SIZE / 2,
                oneway_spam_detected: false,
                buffers: VecDeque::new(),
            })
            .collect();
        let mut driver = CDriver {
            version,
            manager: None,
            manager_uid: None,
            procs,
            threads: Vec::new(),
            nodes: Vec::new(),
            deaths: Vec::new(),
            freezes: Vec::new(),
            buffers: Vec::new(),
            txns: Vec::new(),
            serials: BTreeMap::new(),
            last_id: 0,
            completes: 0,
            log: Vec::new(),
            crashed: false,
            crash: None,
            held: Held::default(),
        };
        for i in 0..driver.procs.len() {
            let t = driver.binder_get_thread(Pid(i as u8), Tid(0));
            let thread = &mut driver.threads[t];
            thread.looper |= looper::ENTERED;
            thread.looper_need_return = false;
        }
        driver
    }

    /// The version it follows.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Whether a `BUG()` fired: the machine is gone and nothing after it
    /// means anything.
    pub fn crashed(&self) -> bool {
        self.crashed
    }

    /// What the `BUG()` was about, once one fired.
    pub fn crash(&self) -> Option<Crash> {
        self.crash
    }

    /// The locks `command` takes that another command may keep across an
    /// allocation: it cannot run in such a command's window.
    pub fn needs(command: &Command) -> Held {
        let context_manager = match command {
            Command::SetManager
            | Command::SetManagerExt { .. }
            | Command::NodeInfo(_)
            | Command::Exit => true,
            Command::Send { to, .. } | Command::Call { to, .. } => *to == 0,
            Command::Ref(cmd, 0) => cmd.increment(),
            _ => false,
        };
        Held { context_manager }
    }

    /// Runs one step to completion, then lets every thread that is not in
    /// the middle of a command drain its work. `busy` are the threads
    /// whose command is paused in a window around this one.
    pub fn exec(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed {
        let mut observed = Observed::new(self.procs.len());
        // A step run in another's window logs on its own: the outer
        // step's lines so far are put back after it.
        let outer = std::mem::take(&mut self.log);
        let ret = if self.crashed || !self.procs[step.pid.index()].open {
            Ret::Skipped
        } else {
            self.command(step, windows)
        };
        if let (Ret::Err(e), false) = (ret, self.crashed) {
            // binder_ioctl's `err:` line.
            self.log.push(Log::IoctlFailed(e));
        }
        observed.ret = Some(ret);
        let ioctl = ret != Ret::Skipped && !self.crashed;
        if ioctl && !matches!(step.command, Command::ThreadExit | Command::Exit) {
            observed.ee = Some(self.extended_error(step.pid, step.tid));
        }
        let mut log = std::mem::take(&mut self.log);
        if !self.crashed {
            for pid in (0..self.procs.len()).map(|i| Pid(i as u8)) {
                observed.reads[pid.index()] = self.drain(pid, step, busy);
            }
        }
        log.append(&mut self.log);
        self.log = outer;
        observed.log = log;
        observed.normalise();
        observed
    }

    /// The step's command; the thread is found or made first, as every
    /// ioctl does (`binder_ioctl`'s `binder_get_thread`, binder.c:5803).
    fn command(&mut self, step: &Step, windows: &mut dyn Windows<Self>) -> Ret {
        let pid = step.pid;
        let skip = match step.command {
            Command::Exit => true,
            Command::Free => self.procs[pid.index()].buffers.is_empty(),
            _ => false,
        };
        if skip {
            return match step.command {
                Command::Exit => {
                    self.binder_deferred_release(pid);
                    Ret::Ok
                }
                _ => Ret::Skipped,
            };
        }
        let t = self.binder_get_thread(pid, step.tid);
        let ret = self.ioctl(pid, t, &step.command, windows);
        // binder_ioctl's end: the thread's first ioctl is over.
        if !self.threads[t].is_dead {
            self.threads[t].looper_need_return = false;
        }
        ret
    }

    /// `binder_ioctl` and `binder_thread_write`'s commands, for thread `t`.
    fn ioctl(
        &mut self,
        pid: Pid,
        t: ThreadIdx,
        command: &Command,
        windows: &mut dyn Windows<Self>,
    ) -> Ret {
        match command {
            Command::SetManager => self.binder_ioctl_set_ctx_mgr(pid, None),
            Command::SetManagerExt { ptr, cookie, flags } => {
                self.binder_ioctl_set_ctx_mgr(pid, Some((*ptr, *cookie, *flags)))
            }
            Command::Ref(cmd, target) => self.ref_command(pid, *cmd, *target, windows),
            Command::Send { to, payload } | Command::Call { to, payload } => {
                let oneway = matches!(command, Command::Send { .. });
                self.write(t, |d| {
                    d.binder_transaction(t, Some(*to), oneway, payload, windows)
                })
            }
            Command::Reply(payload) => self.write(t, |d| {
                d.binder_transaction(t, None, false, payload, windows)
            }),
            Command::Free => {
                let buffer = self.proc(pid).buffers.pop_front().expect("not skipped");
                self.write(t, |d| d.binder_free_buf(pid, buffer, windows))
            }
            Command::RequestDeath { handle, cookie } => {
                self.write(t, |d| d.death_command(t, true, *handle, *cookie))
            }
            Command::ClearDeath { handle, cookie } => {
                self.write(t, |d| d.death_command(t, false, *handle, *cookie))
            }
            Command::RequestFreeze { handle, cookie } => {
                match self.binder_request_freeze_notification(pid, *handle, *cookie) {
                    Ok(()) => Ret::Ok,
                    Err(e) => Ret::Err(e),
                }
            }
            Command::ClearFreeze { handle, cookie } => {
                match self.binder_clear_freeze_notification(pid, t, *handle, *cookie) {
                    Ok(()) => Ret::Ok,
                    Err(e) => Ret::Err(e),
                }
            }
            Command::NodeInfo(handle) => self.binder_ioctl_get_node_info_for_ref(pid, *handle),
            Command::NodeDebug(ptr) => self.binder_ioctl_get_node_debug_info(pid, *ptr),
            Command::Version => Ret::Version(PROTOCOL_VERSION),
            Command::ExtendedError => Ret::Extended(self.binder_ioctl_get_extended_error(t)),
            Command::Looper(cmd) => self.write(t, |d| d.looper_command(t, *cmd)),
            Command::ThreadExit => {
                self.binder_thread_release(pid, t);
                Ret::Ok
            }
            Command::MaxThreads(n) => {
                self.proc(pid).max_threads = *n;
                Ret::Ok
            }
            Command::Freeze { target, timeout_ms } => self.freeze_ioctl(*target, true, *timeout_ms),
            Command::Thaw(target) => self.freeze_ioctl(*target, false, 0),
            Command::FrozenInfo(target) => self.binder_ioctl_get_freezer_info(*target),
            Command::OnewaySpam(on) => {
                self.proc(pid).oneway_spam_detection_enabled = *on;
                Ret::Ok
            }
            Command::Refused(Refused::IdleTimeout | Refused::IdlePriority) => {
                Ret::Err(Errno::Inval)
            }
            Command::Refused(Refused::AttemptAcquire | Refused::AcquireResult) => {
                // binder_thread_write: pr_err, return -EINVAL.
                self.log.push(Log::UnsupportedCommand);
                Ret::Err(Errno::Inval)
            }
            Command::Exit => unreachable!("exit makes no ioctl"),
        }
    }

    /// A `BC_` command in `BINDER_WRITE_READ`'s write buffer: nothing is
    /// consumed while the thread's `return_error` is pending
    /// (`binder_thread_write`, binder.c:4143).
    fn write(&mut self, t: ThreadIdx, bc: impl FnOnce(&mut Self)) -> Ret {
        if self.threads[t].return_error.is_none() {
            bc(self);
        }
        Ret::Ok
    }

    fn proc(&mut self, pid: Pid) -> &mut Proc {
        &mut self.procs[pid.index()]
    }

    /// `binder_get_thread`: the thread `tid` of `pid`, made if the driver
    /// does not know it (with `looper_need_return`, binder.c:5286).
    fn binder_get_thread(&mut self, pid: Pid, tid: Tid) -> ThreadIdx {
        if let Some(&t) = self.procs[pid.index()].threads.get(&tid) {
            return t;
        }
        let t = self.threads.len();
        self.threads.push(Thread {
            pid,
            tid,
            looper: 0,
            looper_need_return: true,
            todo: VecDeque::new(),
            process_todo: false,
            transaction_stack: None,
            return_error: None,
            reply_error: None,
            ee: Ee::OK,
            is_dead: false,
        });
        self.proc(pid).threads.insert(tid, t);
        t
    }

    /// `binder_last_id`'s next value (nodes, references and transactions
    /// share it).
    fn next_id(&mut self) -> u32 {
        self.last_id += 1;
        self.last_id
    }

    // ---- work lists ----------------------------------------------------

    /// The threads of `pid`, alive or released.
    fn threads_of(&self, pid: Pid) -> impl Iterator<Item = ThreadIdx> + '_ {
        (0..self.threads.len()).filter(move |&t| self.threads[t].pid == pid)
    }

    /// Whether `work` is on any list of `pid` (`!list_empty(&w->entry)`).
    fn queued(&self, pid: Pid, work: Work) -> bool {
        let p = &self.procs[pid.index()];
        p.todo.contains(&work)
            || self
                .threads_of(pid)
                .any(|t| self.threads[t].todo.contains(&work))
            || matches!(work, Work::Death(d) if p.delivered_death.contains(&d))
            || matches!(work, Work::Freeze(f) if p.delivered_freeze.contains(&f))
    }

    /// `binder_dequeue_work_ilocked`: takes `work` off whatever list of
    /// `pid` it is on.
    fn dequeue(&mut self, pid: Pid, work: Work) {
        let threads: Vec<ThreadIdx> = self.threads_of(pid).collect();
        for t in threads {
            // process_todo stays as it is (binder.c:485-488).
            self.threads[t].todo.retain(|w| *w != work);
        }
        let p = self.proc(pid);
        p.todo.retain(|w| *w != work);
        if let Work::Death(d) = work {
            p.delivered_death.retain(|x| *x != d);
        }
        if let Work::Freeze(f) = work {
            p.delivered_freeze.retain(|x| *x != f);
        }
    }

    /// `binder_enqueue_thread_work_ilocked`: on the thread's list, and the
    /// thread has work to process.
    fn enqueue_thread(&mut self, t: ThreadIdx, work: Work) {
        let thread = &mut self.threads[t];
        thread.todo.push_back(work);
        thread.process_todo = true;
    }

    /// `binder_enqueue_deferred_thread_work_ilocked`, or
    /// `binder_enqueue_work_ilocked` on the thread's list: queued, but the
    /// thread is not woken for it.
    fn enqueue_thread_deferred(&mut self, t: ThreadIdx, work: Work) {
        self.threads[t].todo.push_back(work);
    }

    /// `binder_enqueue_work_ilocked(w, &proc->todo)`.
    fn enqueue_proc(&mut self, pid: Pid, work: Work) {
        self.proc(pid).todo.push_back(work);
    }

    /// A new `tcomplete` of type `kind`.
    fn tcomplete(&mut self, kind: Complete) -> Work {
        self.completes += 1;
        Work::Complete(self.completes, kind)
    }

    /// `binder_set_extended_error`.
    fn set_ee(&mut self, t: ThreadIdx, id: u32, command: u32, param: i32) {
        self.threads[t].ee = Ee { id, command, param };
    }

    // ---- nodes ----------------------------------------------------------

    fn node(&mut self, n: NodeIdx) -> &mut Node {
        &mut self.nodes[n]
    }

    fn is_manager_node(&self, n: NodeIdx) -> bool {
        self.manager == Some(n)
    }

    /// `binder_new_node` / `binder_init_node_ilocked`: the node of `pid` with
    /// `ptr`, created if missing (with `cookie` and `flags`), with a
    /// temporary reference taken. A node already there is returned
    /// whatever its cookie (binder.c:757-766).
    fn binder_new_node(&mut self, pid: Pid, ptr: u64, cookie: u64, _flags: NodeFlags) -> NodeIdx {
        if let Some(n) = self.binder_get_node(pid, ptr) {
            return n;
        }
        let serial = self.serials.entry((pid, ptr)).or_insert(0);
        let name = NodeName {
            owner: pid,
            ptr,
            serial: *serial,
        };
        *serial += 1;
        let n = self.nodes.len();
        let _ = self.next_id();
        self.nodes.push(Node {
            name,
            ptr,
            cookie,
            proc: Some(pid),
            internal_strong_refs: 0,
            local_strong_refs: 0,
            local_weak_refs: 0,
            tmp_refs: 1,
            has_strong_ref: false,
            has_weak_ref: false,
            pending_strong_ref: false,
            pending_weak_ref: false,
            refs: Vec::new(),
            has_async_transaction: false,
            async_todo: VecDeque::new(),
            freed: false,
        });
        self.proc(pid).nodes.insert(ptr, n);
        n
    }

    /// `binder_get_node`: the node, with a temporary reference taken.
    fn binder_get_node(&mut self, pid: Pid, ptr: u64) -> Option<NodeIdx> {
        let n = *self.procs[pid.index()].nodes.get(&ptr)?;
        self.node(n).tmp_refs += 1;
        Some(n)
    }

    /// `binder_inc_node_nilocked`. `target` is the thread whose list takes
    /// the node's work (`target_list`), if any.
    fn binder_inc_node(
        &mut self,
        n: NodeIdx,
        strong: bool,
        internal: bool,
        target: Option<ThreadIdx>,
    ) -> Result<(), Errno> {
        let is_manager = self.is_manager_node(n);
        let node = &mut self.nodes[n];
        if strong {
            if internal {
                if target.is_none()
                    && node.internal_strong_refs == 0
                    && !(node.proc.is_some() && is_manager && node.has_strong_ref)
                {
                    self.log.push(Log::InvalidIncStrongNode);
                    return Err(Errno::Inval);
                }
                node.internal_strong_refs += 1;
            } else {
                node.local_strong_refs += 1;
            }
            if !node.has_strong_ref {
                if let Some(thread) = target {
                    let owner = node.proc.expect("a node with work has an owner");
                    self.dequeue(owner, Work::Node(n));
                    self.enqueue_thread_deferred(thread, Work::Node(n));
                }
            }
        } else {
            if !internal {
                node.local_weak_refs += 1;
            }
            if !node.has_weak_ref {
                if let Some(thread) = target {
                    let owner = node.proc.expect("a node with work has an owner");
                    if !self.queued(owner, Work::Node(n)) {
                        self.enqueue_thread_deferred(thread, Work::Node(n));
                    }
                }
            }
        }
        Ok(())
    }

    /// `binder_dec_node_nilocked`: whether the node is to be freed.
    fn binder_dec_node_nilocked(&mut self, n: NodeIdx, strong: bool, internal: bool) -> bool {
        let node = &mut self.nodes[n];
        if strong {
            if internal {
                node.internal_strong_refs -= 1;
            } else {
                node.local_strong_refs -= 1;
            }
            if node.local_strong_refs != 0 || node.internal_strong_refs != 0 {
                return false;
            }
        } else {
            if !internal {
                node.local_weak_refs -= 1;
            }
            if node.local_weak_refs != 0 || node.tmp_refs != 0 || !node.refs.is_empty() {
                return false;
            }
        }
        let node = &self.nodes[n];
        match node.proc {
            Some(owner) if node.has_strong_ref || node.has_weak_ref => {
                if !self.queued(owner, Work::Node(n)) {
                    self.enqueue_proc(owner, Work::Node(n));
                }
                false
            }
            owner => {
                if node.refs.is_empty()
                    && node.local_strong_refs == 0
                    && node.local_weak_refs == 0
                    && node.tmp_refs == 0
                {
                    if let Some(owner) = owner {
                        let ptr = node.ptr;
                        self.dequeue(owner, Work::Node(n));
                        self.proc(owner).nodes.remove(&ptr);
                    }
                    true
                } else {
                    false
                }
            }
        }
    }

    /// `binder_dec_node`.
    fn binder_dec_node(&mut self, n: NodeIdx, strong: bool, internal: bool) {
        if self.binder_dec_node_nilocked(n, strong, internal) {
            self.node(n).freed = true;
        }
    }

    /// `binder_put_node` (`binder_dec_node_tmpref`).
    fn binder_put_node(&mut self, n: NodeIdx) {
        self.node(n).tmp_refs -= 1;
        assert!(self.nodes[n].tmp_refs >= 0, "BUG_ON(node->tmp_refs < 0)");
        self.binder_dec_node(n, false, true);
    }

    // ---- references -------------------------------------------------------

    /// `binder_get_ref_olocked`.
    fn binder_get_ref_olocked(&mut self, pid: Pid, desc: u32, need_strong: bool) -> Option<u32> {
        let r = self.procs[pid.index()].ref_data.get(&desc)?;
        if need_strong && r.strong == 0 {
            self.log.push(Log::WeakAsStrong);
            return None;
        }
        Some(desc)
    }

    fn ref_mut(&mut self, pid: Pid, desc: u32) -> &mut Ref {
        self.procs[pid.index()]
            .ref_data
            .get_mut(&desc)
            .expect("the descriptor names a reference")
    }

    /// `binder_inc_ref_olocked`.
    fn binder_inc_ref_olocked(
        &mut self,
        pid: Pid,
        desc: u32,
        strong: bool,
        target: Option<ThreadIdx>,
    ) -> Result<(), Errno> {
        let r = self.ref_mut(pid, desc);
        let node = r.node;
        if strong {
            if r.strong == 0 {
                self.binder_inc_node(node, true, true, target)?;
            }
            self.ref_mut(pid, desc).strong += 1;
        } else {
            if r.weak == 0 {
                self.binder_inc_node(node, false, true, target)?;
            }
            self.ref_mut(pid, desc).weak += 1;
        }
        Ok(())
    }

    /// `binder_dec_ref_olocked`: whether the reference was cleaned up (its
    /// last count went), in which case the caller removes it from the
    /// table (see [`CDriver::cleanup_ref`]).
    fn binder_dec_ref_olocked(&mut self, pid: Pid, desc: u32, strong: bool) -> bool {
        let r = self.ref_mut(pid, desc);
        let node = r.node;
        if strong {
            if r.strong == 0 {
                self.log.push(Log::InvalidDecrement { strong: true });
                return false;
            }
            r.strong -= 1;
            if r.strong == 0 {
                self.binder_dec_node(node, true, true);
            }
        } else {
            if r.weak == 0 {
                self.log.push(Log::InvalidDecrement { strong: false });
                return false;
            }
            r.weak -= 1;
        }
        let r = self.ref_mut(pid, desc);
        r.strong == 0 && r.weak == 0
    }

    /// `binder_cleanup_ref_olocked`, but for the trees and the map: the
    /// node's counts and the death notification. The caller takes the
    /// handle out of the table in the same critical section.
    fn cleanup_ref(&mut self, pid: Pid, desc: u32) {
        let r = self.proc(pid).ref_data.remove(&desc).expect("a reference");
        if r.strong != 0 {
            self.binder_dec_node_nilocked(r.node, true, true);
        }
        self.node(r.node).refs.retain(|x| *x != (pid, desc));
        if self.binder_dec_node_nilocked(r.node, false, true) {
            // binder_free_ref frees the node the caller still points at.
            self.node(r.node).freed = true;
        }
        if let Some(d) = r.death {
            self.dequeue(pid, Work::Death(d));
        }
        if let Some(f) = r.freeze {
            self.dequeue(pid, Work::Freeze(f));
        }
    }

    /// `binder_update_ref_for_handle`.
    fn binder_update_ref_for_handle(
        &mut self,
        pid: Pid,
        desc: u32,
        increment: bool,
        strong: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<RefData, Errno> {
        let Some(desc) = self.binder_get_ref_olocked(pid, desc, strong) else {
            return Err(Errno::Inval);
        };
        if increment {
            self.binder_inc_ref_olocked(pid, desc, strong, None)?;
        } else if self.binder_dec_ref_olocked(pid, desc, strong) {
            self.cleanup_ref(pid, desc);
            // The lock is dropped, the ref freed, then try_shrink_dmap: the
            // C protocol of the table's last decrement.
            match drive(self, pid, Operation::new(Request::Decrement(desc)), windows) {
                Ok(_) => {}
                Err(e) => unreachable!("the table holds descriptor {desc}: {e}"),
            }
        }
        Ok(RefData { desc })
    }

    /// `binder_inc_ref_for_node`: a reference of `pid` to `n`, found or made
    /// (`binder_get_ref_for_node_olocked`), then counted.
    fn binder_inc_ref_for_node(
        &mut self,
        pid: Pid,
        n: NodeIdx,
        strong: bool,
        target: Option<ThreadIdx>,
        windows: &mut dyn Windows<Self>,
    ) -> Result<RefData, Errno> {
        let op = Operation::attach(n as NodeId, Manager::Current);
        let desc = match drive(self, pid, op, windows) {
            Ok(desc) => desc,
            Err(Error::NoMemory) => return Err(Errno::NoMem),
            Err(Error::KernelBug { id }) => {
                self.log.push(Log::Bug);
                self.crashed = true;
                self.crash = Some(Crash {
                    desc: id,
                    manager: self.manager == Some(n),
                });
                return Err(Errno::Fault);
            }
            Err(e) => unreachable!("the C insert does not fail with {e}"),
        };
        let new = !self.procs[pid.index()].ref_data.contains_key(&desc);
        if new {
            self.proc(pid).ref_data.insert(
                desc,
                Ref {
                    node: n,
                    strong: 0,
                    weak: 0,
                    death: None,
                    freeze: None,
                },
            );
            self.node(n).refs.push((pid, desc));
        }
        let ret = self.binder_inc_ref_olocked(pid, desc, strong, target);
        if ret.is_err() && new {
            self.cleanup_ref(pid, desc);
            self.proc(pid).refs.remove_handle(desc);
        }
        ret.map(|()| RefData { desc })
    }

    // ---- commands --------------------------------------------------------

    /// `binder_ioctl_set_ctx_mgr`, with the `flat_binder_object` of
    /// `BINDER_SET_CONTEXT_MGR_EXT` (pointer, cookie, flags) or none.
    fn binder_ioctl_set_ctx_mgr(&mut self, pid: Pid, fbo: Option<(u64, u64, NodeFlags)>) -> Ret {
        if self.manager.is_some() {
            self.log.push(Log::ManagerAlreadySet);
            return Ret::Err(Errno::Busy);
        }
        let euid = self.procs[pid.index()].euid;
        match self.manager_uid {
            Some(uid) if uid != euid => {
                self.log.push(Log::ManagerBadUid);
                return Ret::Err(Errno::Perm);
            }
            Some(_) => {}
            None => self.manager_uid = Some(euid),
        }
        let (ptr, cookie, flags) = fbo.unwrap_or((0, 0, NodeFlags::default()));
        let n = self.binder_new_node(pid, ptr, cookie, flags);
        let node = self.node(n);
        node.local_weak_refs += 1;
        node.local_strong_refs += 1;
        node.has_strong_ref = true;
        node.has_weak_ref = true;
        self.set_manager(Some(n));
        self.binder_put_node(n);
        Ret::Ok
    }

    fn set_manager(&mut self, manager: Option<NodeIdx>) {
        self.manager = manager;
        for p in &mut self.procs {
            p.refs.set_context_manager(manager.map(|n| n as NodeId));
        }
    }

    /// `binder_thread_write`'s `BC_INCREFS`, `BC_ACQUIRE`, `BC_RELEASE`,
    /// `BC_DECREFS`.
    fn ref_command(
        &mut self,
        pid: Pid,
        cmd: RefCmd,
        target: u32,
        windows: &mut dyn Windows<Self>,
    ) -> Ret {
        let (strong, increment) = (cmd.strong(), cmd.increment());
        let mut ret: Result<RefData, Errno> = Err(Errno::Inval);
        if increment && target == 0 {
            if let Some(m) = self.manager {
                if self.nodes[m].proc == Some(pid) {
                    self.log.push(Log::ManagerAcquiresZero);
                    return Ret::Err(Errno::Inval);
                }
                // Under context->context_mgr_node_lock.
                let outer = self.held;
                self.held.context_manager = true;
                ret = self.binder_inc_ref_for_node(pid, m, strong, None, windows);
                self.held = outer;
                if self.crashed {
                    return Ret::Err(Errno::Fault);
                }
            }
        }
        if ret.is_err() {
            ret = self.binder_update_ref_for_handle(pid, target, increment, strong, windows);
        }
        match ret {
            Ok(rdata) if rdata.desc != target => self.log.push(Log::GotOtherHandle {
                wanted: target,
                got: rdata.desc,
            }),
            Ok(_) => {}
            Err(_) => self.log.push(Log::InvalidRef(target)),
        }
        Ret::Ok
    }

    /// `BC_REQUEST_DEATH_NOTIFICATION` and `BC_CLEAR_DEATH_NOTIFICATION`
    /// from thread `t`.
    fn death_command(&mut self, t: ThreadIdx, request: bool, handle: u32, cookie: u64) {
        let pid = self.threads[t].pid;
        let Some(desc) = self.binder_get_ref_olocked(pid, handle, false) else {
            self.log.push(Log::DeathInvalidRef { request });
            return;
        };
        let r = self.ref_mut(pid, desc);
        let node = r.node;
        if request {
            if r.death.is_some() {
                self.log.push(Log::DeathAlreadySet);
                return;
            }
            let d = self.deaths.len();
            self.deaths.push(Death {
                cookie,
                kind: DeathKind::Armed,
            });
            self.ref_mut(pid, desc).death = Some(d);
            if self.nodes[node].proc.is_none() {
                self.deaths[d].kind = DeathKind::DeadBinder;
                self.enqueue_proc(pid, Work::Death(d));
            }
        } else {
            let Some(d) = r.death else {
                self.log.push(Log::DeathNotActive);
                return;
            };
            if self.deaths[d].cookie != cookie {
                self.log.push(Log::DeathCookieMismatch);
                return;
            }
            self.ref_mut(pid, desc).death = None;
            if !self.queued(pid, Work::Death(d)) {
                self.deaths[d].kind = DeathKind::Clear;
                self.enqueue_to_looper(t, Work::Death(d));
            } else {
                assert_eq!(
                    self.deaths[d].kind,
                    DeathKind::DeadBinder,
                    "BUG_ON(death->work.type != BINDER_WORK_DEAD_BINDER)"
                );
                self.deaths[d].kind = DeathKind::DeadBinderAndClear;
            }
        }
    }

    /// The thread's list when it is a looper, else the process's
    /// (`BC_CLEAR_DEATH_NOTIFICATION`, `BC_DEAD_BINDER_DONE`,
    /// binder.c:4497-4507, 4554-4564).
    fn enqueue_to_looper(&mut self, t: ThreadIdx, work: Work) {
        if self.threads[t].looper & (looper::REGISTERED | looper::ENTERED) != 0 {
            self.enqueue_thread(t, work);
        } else {
            let pid = self.threads[t].pid;
            self.enqueue_proc(pid, work);
        }
    }

    /// `BC_DEAD_BINDER_DONE` from thread `t`.
    fn dead_binder_done(&mut self, t: ThreadIdx, cookie: u64) {
        let pid = self.threads[t].pid;
        let found = self.procs[pid.index()]
            .delivered_death
            .iter()
            .copied()
            .find(|&d| self.deaths[d].cookie == cookie);
        let Some(d) = found else {
            self.log.push(Log::DeadBinderDoneNotFound);
            return;
        };
        self.dequeue(pid, Work::Death(d));
        if self.deaths[d].kind == DeathKind::DeadBinderAndClear {
            self.deaths[d].kind = DeathKind::Clear;
            self.enqueue_to_looper(t, Work::Death(d));
        }
    }

    /// `BC_INCREFS_DONE` and `BC_ACQUIRE_DONE`.
    fn inc_ref_done(&mut self, pid: Pid, ptr: u64, cookie: u64, strong: bool) {
        let Some(n) = self.binder_get_node(pid, ptr) else {
            self.log.push(Log::IncRefDoneUnexpected);
            return;
        };
        if cookie != self.nodes[n].cookie {
            self.log.push(Log::IncRefDoneUnexpected);
            self.binder_put_node(n);
            return;
        }
        let node = self.node(n);
        let pending = if strong {
            &mut node.pending_strong_ref
        } else {
            &mut node.pending_weak_ref
        };
        if !*pending {
            self.log.push(Log::IncRefDoneUnexpected);
            self.binder_put_node(n);
            return;
        }
        *pending = false;
        if self.binder_dec_node_nilocked(n, strong, false) {
            self.log.push(Log::WarnOn);
        }
        self.binder_put_node(n);
    }

    /// `binder_ioctl_get_node_info_for_ref`.
    fn binder_ioctl_get_node_info_for_ref(&mut self, pid: Pid, handle: u32) -> Ret {
        match self.manager {
            Some(m) if self.nodes[m].proc == Some(pid) => {}
            _ => return Ret::Err(Errno::Perm),
        }
        // binder_get_node_from_ref(proc, handle, true, NULL)
        let Some(desc) = self.binder_get_ref_olocked(pid, handle, true) else {
            return Ret::Err(Errno::Inval);
        };
        let node = &self.nodes[self.procs[pid.index()].ref_data[&desc].node];
        Ret::NodeInfo {
            strong: (node.local_strong_refs + node.internal_strong_refs) as u32,
            weak: node.local_weak_refs as u32,
        }
    }

    /// `binder_ioctl_get_node_debug_info`: the first node of the caller's
    /// tree with a pointer above `ptr` (binder.c:5600-5623).
    fn binder_ioctl_get_node_debug_info(&mut self, pid: Pid, ptr: u64) -> Ret {
        let next = self.procs[pid.index()]
            .nodes
            .range(ptr.saturating_add(1)..)
            .next()
            .filter(|_| ptr < u64::MAX);
        match next {
            Some((_, &n)) => {
                let node = &self.nodes[n];
                Ret::NodeDebug {
                    ptr: node.ptr,
                    cookie: node.cookie,
                    has_strong: node.has_strong_ref,
                    has_weak: node.has_weak_ref,
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

    /// `binder_ioctl_get_extended_error`: the thread's extended error,
    /// cleared.
    fn binder_ioctl_get_extended_error(&mut self, t: ThreadIdx) -> ExtendedError {
        let ee = std::mem::replace(&mut self.threads[t].ee, Ee::OK);
        ExtendedError::observe(ee.id, ee.command, ee.param)
    }

    /// What the step's thread's `BINDER_GET_EXTENDED_ERROR` reports after
    /// its command (`docs/commands.md`): the ioctl makes the thread if the
    /// command released it... which the caller rules out.
    fn extended_error(&mut self, pid: Pid, tid: Tid) -> ExtendedError {
        let t = self.binder_get_thread(pid, tid);
        let ee = self.binder_ioctl_get_extended_error(t);
        self.threads[t].looper_need_return = false;
        ee
    }

    /// `BC_REGISTER_LOOPER`, `BC_ENTER_LOOPER`, `BC_EXIT_LOOPER`
    /// (binder.c:4337-4377).
    fn looper_command(&mut self, t: ThreadIdx, cmd: LooperCmd) {
        let pid = self.threads[t].pid;
        match cmd {
            LooperCmd::Register => {
                // "called after BC_ENTER_LOOPER", "called without
                // request": two lines, one kind.
                let entered = self.threads[t].looper & looper::ENTERED != 0;
                if entered || self.procs[pid.index()].requested_threads == 0 {
                    self.threads[t].looper |= looper::INVALID;
                    self.log.push(Log::LooperMisuse);
                } else {
                    let p = self.proc(pid);
                    p.requested_threads -= 1;
                    p.requested_threads_started += 1;
                }
                self.threads[t].looper |= looper::REGISTERED;
            }
            LooperCmd::Enter => {
                if self.threads[t].looper & looper::REGISTERED != 0 {
                    self.threads[t].looper |= looper::INVALID;
                    self.log.push(Log::LooperMisuse);
                }
                self.threads[t].looper |= looper::ENTERED;
            }
            LooperCmd::Exit => self.threads[t].looper |= looper::EXITED,
        }
    }

    // ---- freezing ----------------------------------------------------------

    /// `binder_request_freeze_notification` (binder.c:3973-4024): an
    /// error fails the whole `BINDER_WRITE_READ`.
    fn binder_request_freeze_notification(
        &mut self,
        pid: Pid,
        handle: u32,
        cookie: u64,
    ) -> Result<(), Errno> {
        let Some(desc) = self.binder_get_ref_olocked(pid, handle, false) else {
            self.log.push(Log::FreezeInvalidRef { request: true });
            return Err(Errno::Inval);
        };
        if self.ref_mut(pid, desc).freeze.is_some() {
            self.log.push(Log::FreezeAlreadySet);
            return Err(Errno::Inval);
        }
        let f = self.freezes.len();
        self.freezes.push(Freeze {
            cookie,
            clear: false,
            is_frozen: false,
            sent: false,
            resend: false,
        });
        let r = self.ref_mut(pid, desc);
        r.freeze = Some(f);
        let node = r.node;
        if let Some(owner) = self.nodes[node].proc {
            self.freezes[f].is_frozen = self.procs[owner.index()].is_frozen;
            self.enqueue_proc(pid, Work::Freeze(f));
        }
        Ok(())
    }

    /// `binder_clear_freeze_notification` (binder.c:4026-4079).
    fn binder_clear_freeze_notification(
        &mut self,
        pid: Pid,
        _t: ThreadIdx,
        handle: u32,
        cookie: u64,
    ) -> Result<(), Errno> {
        let Some(desc) = self.binder_get_ref_olocked(pid, handle, false) else {
            self.log.push(Log::FreezeInvalidRef { request: false });
            return Err(Errno::Inval);
        };
        let Some(f) = self.ref_mut(pid, desc).freeze else {
            self.log.push(Log::FreezeNotActive);
            return Err(Errno::Inval);
        };
        if self.freezes[f].cookie != cookie {
            self.log.push(Log::FreezeCookieMismatch);
            return Err(Errno::Inval);
        }
        self.ref_mut(pid, desc).freeze = None;
        self.freezes[f].clear = true;
        if !self.queued(pid, Work::Freeze(f)) {
            self.enqueue_proc(pid, Work::Freeze(f));
        } else if self.freezes[f].sent {
            self.freezes[f].resend = true;
        }
        Ok(())
    }

    /// `binder_freeze_notification_done` (binder.c:4081-4111).
    fn binder_freeze_notification_done(&mut self, pid: Pid, cookie: u64) -> Result<(), Errno> {
        let found = self.procs[pid.index()]
            .delivered_freeze
            .iter()
            .copied()
            .find(|&f| self.freezes[f].cookie == cookie);
        let Some(f) = found else {
            self.log.push(Log::FreezeDoneNotFound);
            return Err(Errno::Inval);
        };
        self.dequeue(pid, Work::Freeze(f));
        self.freezes[f].sent = false;
        if self.freezes[f].resend {
            self.freezes[f].resend = false;
            self.enqueue_proc(pid, Work::Freeze(f));
        }
        Ok(())
    }

    /// `binder_txns_pending_ilocked`: transactions outstanding, or a
    /// thread in a transaction.
    fn binder_txns_pending(&self, pid: Pid) -> bool {
        let p = &self.procs[pid.index()];
        p.outstanding_txns > 0
            || p.threads
                .values()
                .any(|&t| self.threads[t].transaction_stack.is_some())
    }

    /// The processes on `binder_procs` with the pid of `target`'s task, in
    /// the list's order: `binder_open` adds each new process at the head
    /// (`hlist_add_head`, binder.c:6118), so the last opened comes first.
    /// `target` itself may have exited while another open of its task
    /// lives.
    fn procs_with_pid_of(&self, target: Pid) -> Vec<Pid> {
        let pid = self.procs[target.index()].pid;
        (0..self.procs.len() as u8)
            .rev()
            .map(Pid)
            .filter(|&p| self.procs[p.index()].open && self.procs[p.index()].pid == pid)
            .collect()
    }

    /// `BINDER_FREEZE` for the pid of `target`'s task (binder.c:5897-5954):
    /// no Binder process with the pid is `EINVAL`; otherwise each one, in
    /// `binder_procs` order, until one fails (`if (ret >= 0) ret =
    /// binder_ioctl_freeze(...)`, 5940-5941): the ones before it stay as
    /// they were made, the ones after it are not touched, and the failure
    /// is the ioctl's.
    fn freeze_ioctl(&mut self, target: Pid, enable: bool, timeout_ms: u32) -> Ret {
        let procs = self.procs_with_pid_of(target);
        if procs.is_empty() {
            return Ret::Err(Errno::Inval);
        }
        for p in procs {
            if let Err(e) = self.binder_ioctl_freeze(p, enable, timeout_ms) {
                return Ret::Err(e);
            }
        }
        Ret::Ok
    }

    /// `binder_ioctl_freeze` (binder.c:5692-5741). No transaction ends
    /// while the caller waits: nothing else runs until the command is
    /// done.
    fn binder_ioctl_freeze(
        &mut self,
        pid: Pid,
        enable: bool,
        _timeout_ms: u32,
    ) -> Result<(), Errno> {
        let p = self.proc(pid);
        p.sync_recv = false;
        p.async_recv = false;
        if !enable {
            p.is_frozen = false;
            self.binder_add_freeze_work(pid, false);
            return Ok(());
        }
        p.is_frozen = true;
        if self.binder_txns_pending(pid) {
            self.proc(pid).is_frozen = false;
            return Err(Errno::Again);
        }
        self.binder_add_freeze_work(pid, true);
        Ok(())
    }

    /// `binder_add_freeze_work` (binder.c:5641-5690): every reference to
    /// a node of `pid` with a freeze notification is told.
    /// Each node is held by a temporary reference while its references
    /// are looked at, and dropped with `binder_put_node`, which may queue
    /// the node's work as reading its debug text does
    /// ([`CDriver::print_binder_proc`]).
    fn binder_add_freeze_work(&mut self, pid: Pid, is_frozen: bool) {
        let nodes: Vec<NodeIdx> = self.procs[pid.index()].nodes.values().copied().collect();
        for n in nodes {
            self.node(n).tmp_refs += 1;
            for (holder, desc) in self.nodes[n].refs.clone() {
                let Some(f) = self.procs[holder.index()].ref_data[&desc].freeze else {
                    continue;
                };
                self.freezes[f].clear = false;
                if !self.queued(holder, Work::Freeze(f)) {
                    self.freezes[f].is_frozen = is_frozen;
                    self.enqueue_proc(holder, Work::Freeze(f));
                } else {
                    let freeze = &mut self.freezes[f];
                    if freeze.sent && freeze.is_frozen != is_frozen {
                        freeze.resend = true;
                    }
                    freeze.is_frozen = is_frozen;
                }
            }
            self.binder_put_node(n);
        }
    }

    /// `BINDER_GET_FROZEN_INFO` (`binder_ioctl_get_freezer_info`,
    /// binder.c:5743-5771): every process with the pid of `target`'s task
    /// adds its bits; none is `EINVAL`.
    fn binder_ioctl_get_freezer_info(&mut self, target: Pid) -> Ret {
        let procs = self.procs_with_pid_of(target);
        if procs.is_empty() {
            return Ret::Err(Errno::Inval);
        }
        let (mut sync_recv, mut async_recv) = (0, 0);
        for p in procs {
            let pending = u32::from(self.binder_txns_pending(p));
            sync_recv |= u32::from(self.procs[p.index()].sync_recv) | pending << 1;
            async_recv |= u32::from(self.procs[p.index()].async_recv);
        }
        Ret::FrozenInfo {
            sync_recv,
            async_recv,
        }
    }

    // ---- transactions ----------------------------------------------------

    /// `binder_transaction` from thread `t`: a transaction to handle `to`
    /// (`send` when `oneway`, else `call`), or a reply (`to` is `None`).
    /// The target is found, the objects are translated one by one into a
    /// buffer of the target process, then the transaction is queued. A
    /// failure queues the thread's `return_error` (or, for a reply, tells
    /// the caller), and sets the extended error.
    fn binder_transaction(
        &mut self,
        t: ThreadIdx,
        to: Option<u32>,
        oneway: bool,
        payload: &Payload,
        windows: &mut dyn Windows<Self>,
    ) {
        let pid = self.threads[t].pid;
        let reply = to.is_none();
        let debug_id = self.next_id();
        self.set_ee(t, debug_id, br_code::OK, 0);
        let mut in_reply_to = None;
        let mut target_thread = None;
        let found = match to {
            None => self.reply_target(t, &mut in_reply_to, &mut target_thread),
            Some(to) => self.call_target(t, to, oneway, &mut target_thread),
        };
        let (target_node, target_proc) = match found {
            Ok(found) => found,
            Err(e) => return self.transaction_failed(t, debug_id, in_reply_to, e),
        };
        let txn = self.txns.len();
        self.txns.push(Txn {
            from: (!reply && !oneway).then_some(t),
            from_parent: None,
            to_parent: None,
            to_proc: Some(target_proc),
            to_thread: target_thread,
            buffer: None,
            flags: payload.flags,
            oneway: !reply && oneway,
            sender: pid,
            freed: false,
        });
        let size = buffer_size(payload);
        let spam = match self.binder_alloc_new_buf(target_proc, size, !reply && oneway, pid) {
            Ok(spam) => spam,
            Err(e) => {
                // err_binder_alloc_buf_failed: "cannot allocate buffer: no
                // space left", a line this campaign does not compare.
                self.txns[txn].freed = true;
                if let Some(n) = target_node {
                    self.binder_dec_node(n, true, false);
                    self.binder_put_node(n);
                }
                return self.transaction_failed(t, debug_id, in_reply_to, TxnError::failed(e));
            }
        };
        let tcomplete = self.tcomplete(if spam { Complete::Spam } else { Complete::Done });
        let buffer = self.buffers.len();
        self.buffers.push(Buffer {
            target_node,
            async_transaction: !reply && oneway,
            transaction: Some(txn),
            objects: Vec::new(),
            size,
            sender: pid,
            allocated: true,
        });
        self.txns[txn].buffer = Some(buffer);
        for object in payload.objects.iter().flat_map(Object::expand) {
            let translated = match object {
                Object::Node { ptr, strong } => {
                    self.binder_translate_binder(t, target_proc, ptr, strong, windows)
                }
                Object::Handle { handle, strong } => {
                    self.binder_translate_handle(pid, target_proc, handle, strong, windows)
                }
                Object::Nodes { .. } => unreachable!("runs are expanded"),
            };
            if self.crashed {
                return;
            }
            match translated {
                Ok(received) => self.buffers[buffer].objects.push(received),
                Err(e) => {
                    self.log.push(Log::TranslateFailed);
                    self.release_failed(target_proc, buffer, target_node, windows);
                    return self.transaction_failed(t, debug_id, in_reply_to, TxnError::failed(e));
                }
            }
        }
        let queued = if let Some(irt) = in_reply_to {
            let tt = target_thread.expect("a reply has a target thread");
            self.enqueue_thread(t, tcomplete);
            if self.threads[tt].is_dead {
                Err(TxnError::dead())
            } else {
                self.binder_pop_transaction(tt, irt);
                self.enqueue_thread(tt, Work::Transaction(txn));
                self.proc(target_proc).outstanding_txns += 1;
                self.binder_free_transaction(irt);
                Ok(())
            }
        } else if !oneway {
            self.enqueue_thread_deferred(t, tcomplete);
            self.txns[txn].from_parent = self.threads[t].transaction_stack;
            self.threads[t].transaction_stack = Some(txn);
            let r = self.binder_proc_transaction(txn, target_proc, target_thread);
            if r.is_err() {
                self.binder_pop_transaction(t, txn);
            }
            r.map(|_| ())
        } else {
            let r = self.binder_proc_transaction(txn, target_proc, None);
            let tcomplete = match r {
                Ok(true) => {
                    // BINDER_WORK_TRANSACTION_PENDING in the same place,
                    // whatever the type was.
                    let Work::Complete(n, _) = tcomplete else {
                        unreachable!()
                    };
                    Work::Complete(n, Complete::Pending)
                }
                _ => tcomplete,
            };
            self.enqueue_thread(t, tcomplete);
            if r.is_err() {
                self.dequeue(pid, tcomplete);
            }
            r.map(|_| ())
        };
        match queued {
            Ok(()) => {
                if let Some(n) = target_node {
                    self.binder_put_node(n);
                }
            }
            Err(e) => {
                // err_dead_proc_or_thread
                self.log.push(if e.cmd == br_code::FROZEN_REPLY {
                    Log::FrozenProcess
                } else {
                    Log::DeadProcess
                });
                self.dequeue(pid, tcomplete);
                self.txns[txn].freed = true;
                self.release_failed(target_proc, buffer, target_node, windows);
                self.transaction_failed(t, debug_id, in_reply_to, e);
            }
        }
    }

    /// A reply's checks (binder.c:3147-3203): the transaction it answers
    /// (`in_reply_to`, popped from the thread's stack) and the thread that
    /// waits for it. The target process is the caller's; a reply has no
    /// target node.
    fn reply_target(
        &mut self,
        t: ThreadIdx,
        in_reply_to: &mut Option<TxnIdx>,
        target_thread: &mut Option<ThreadIdx>,
    ) -> Result<(Option<NodeIdx>, Pid), TxnError> {
        let Some(irt) = self.threads[t].transaction_stack else {
            self.log.push(Log::ReplyNoStack);
            return Err(TxnError::failed(Errno::Proto));
        };
        if self.txns[irt].to_thread != Some(t) {
            self.log.push(Log::ReplyBadStack);
            return Err(TxnError::failed(Errno::Proto));
        }
        self.threads[t].transaction_stack = self.txns[irt].to_parent;
        *in_reply_to = Some(irt);
        let Some(tt) = self.txns[irt].from else {
            self.log.push(Log::ReplyTargetGone);
            return Err(TxnError::dead());
        };
        if self.threads[tt].transaction_stack != Some(irt) {
            self.log.push(Log::ReplyBadStack);
            *in_reply_to = None;
            return Err(TxnError::failed(Errno::Proto));
        }
        *target_thread = Some(tt);
        Ok((None, self.threads[tt].pid))
    }

    /// A transaction's target (binder.c:3205-3312): the node behind handle
    /// `to` (0: the context manager's) with a strong local and a temporary
    /// reference on it, and its process; for a call, the checks of the
    /// caller's transaction stack and the thread of the target process
    /// already in it, if any.
    fn call_target(
        &mut self,
        t: ThreadIdx,
        to: u32,
        oneway: bool,
        target_thread: &mut Option<ThreadIdx>,
    ) -> Result<(Option<NodeIdx>, Pid), TxnError> {
        let pid = self.threads[t].pid;
        let target = if to != 0 {
            match self.binder_get_ref_olocked(pid, to, true) {
                Some(desc) => {
                    let n = self.procs[pid.index()].ref_data[&desc].node;
                    self.binder_get_node_refs_for_txn(n)
                }
                None => {
                    self.log.push(Log::TransactionToInvalidHandle(to));
                    Err(TxnError::failed(Errno::Inval))
                }
            }
        } else {
            match self.manager {
                Some(m) => {
                    let got = self.binder_get_node_refs_for_txn(m);
                    if let Ok((n, target_proc)) = got {
                        // `target_proc->pid == proc->pid` (3239): the
                        // manager's own process, or another open by its
                        // task.
                        if self.procs[target_proc.index()].pid == self.procs[pid.index()].pid {
                            self.log.push(Log::TransactionToOwnManager);
                            // err_invalid_target_handle
                            self.binder_dec_node(n, true, false);
                            self.binder_put_node(n);
                            return Err(TxnError::failed(Errno::Inval));
                        }
                    }
                    got
                }
                None => Err(TxnError::dead()),
            }
        };
        let (target_node, target_proc) = match target {
            Ok(found) => found,
            Err(e) => {
                self.log.push(Log::NoTargetNode);
                return Err(TxnError {
                    param: -Errno::Inval.code(),
                    ..e
                });
            }
        };
        let refuse = |d: &mut Self, log: Log| {
            d.log.push(log);
            // err_bad_todo_list, err_bad_call_stack
            d.binder_dec_node(target_node, true, false);
            d.binder_put_node(target_node);
            Err(TxnError::failed(Errno::Proto))
        };
        if !oneway && matches!(self.threads[t].todo.front(), Some(Work::Transaction(_))) {
            return refuse(self, Log::CallWithTodo);
        }
        if let (false, Some(top)) = (oneway, self.threads[t].transaction_stack) {
            if self.txns[top].to_thread != Some(t) {
                return refuse(self, Log::CallBadStack);
            }
            let mut tmp = Some(top);
            while let Some(x) = tmp {
                if let Some(from) = self.txns[x].from {
                    if self.threads[from].pid == target_proc {
                        *target_thread = Some(from);
                        break;
                    }
                }
                tmp = self.txns[x].from_parent;
            }
        }
        Ok((Some(target_node), target_proc))
    }

    /// The end of `binder_transaction`'s error path (binder.c:3887-3936):
    /// the summary line, then the `BR_*` for the sender (and its extended
    /// error), or, for a reply that answered a transaction, the failed
    /// reply sent to the caller and `BR_TRANSACTION_COMPLETE` for the
    /// replying thread.
    fn transaction_failed(
        &mut self,
        t: ThreadIdx,
        debug_id: u32,
        in_reply_to: Option<TxnIdx>,
        e: TxnError,
    ) {
        self.log.push(Log::TransactionFailed);
        match in_reply_to {
            Some(irt) => {
                if let Some(from) = self.txns[irt].from {
                    // binder_set_txn_from_error: existing errors stay.
                    if self.threads[from].ee.command == br_code::OK {
                        self.set_ee(from, debug_id, e.cmd, e.param);
                    }
                }
                self.threads[t].return_error = Some(br_code::TRANSACTION_COMPLETE);
                self.enqueue_thread(t, Work::ReturnError(t));
                self.binder_send_failed_reply(irt, e.cmd);
            }
            None => {
                self.set_ee(t, debug_id, e.cmd, e.param);
                self.threads[t].return_error = Some(e.cmd);
                self.enqueue_thread(t, Work::ReturnError(t));
            }
        }
    }

    /// The buffer of a transaction that failed after its allocation:
    /// `binder_transaction_buffer_release` of what was translated, the
    /// target node's temporary reference dropped.
    fn release_failed(
        &mut self,
        target_proc: Pid,
        buffer: usize,
        target_node: Option<NodeIdx>,
        windows: &mut dyn Windows<Self>,
    ) {
        self.buffers[buffer].transaction = None;
        self.binder_transaction_buffer_release(target_proc, buffer, windows);
        if let Some(n) = target_node {
            self.binder_put_node(n);
        }
        self.binder_alloc_free_buf(target_proc, buffer);
    }

    /// `binder_alloc_new_buf` of `size` bytes in `pid`'s space: a one-way
    /// buffer must fit in what is left of the one-way half (`ENOSPC`,
    /// binder_alloc.c:518-523); whether its sender looks like a one-way
    /// spammer (`debug_low_async_space_locked`, binder_alloc.c:462-512):
    /// less than a tenth of the space left, and the sender holding more
    /// than 50 one-way buffers or a quarter of the space, told once until
    /// the space recovers. The whole space is never short here: the
    /// language's transactions are too few and small to fill it.
    fn binder_alloc_new_buf(
        &mut self,
        pid: Pid,
        size: usize,
        is_async: bool,
        sender: Pid,
    ) -> Result<bool, Errno> {
        if !is_async {
            return Ok(false);
        }
        if self.procs[pid.index()].free_async_space < size {
            return Err(Errno::NoSpc);
        }
        self.proc(pid).free_async_space -= size;
        if self.procs[pid.index()].free_async_space >= MAP_SIZE / 10 {
            self.proc(pid).oneway_spam_detected = false;
            return Ok(false);
        }
        let held: Vec<usize> = self
            .buffers
            .iter()
            // `buffer->pid != pid`, both `current->tgid` (binder_alloc.c:473,
            // 489, 689): every open of the sender's task counts.
            .filter(|b| {
                b.allocated
                    && b.async_transaction
                    && self.procs[b.sender.index()].pid == self.procs[sender.index()].pid
            })
            .map(|b| b.size)
            .collect();
        // The new buffer is allocated already.
        let (count, total) = (held.len() + 1, held.iter().sum::<usize>() + size);
        if count > 50 || total > MAP_SIZE / 4 {
            // "pid N spamming oneway?": a line this campaign does not compare.
            if !self.procs[pid.index()].oneway_spam_detected {
                self.proc(pid).oneway_spam_detected = true;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `binder_alloc_free_buf`: a one-way buffer's space comes back.
    fn binder_alloc_free_buf(&mut self, pid: Pid, buffer: usize) {
        let b = &mut self.buffers[buffer];
        if std::mem::take(&mut b.allocated) && b.async_transaction {
            let size = b.size;
            self.proc(pid).free_async_space += size;
        }
    }

    /// `binder_get_node_refs_for_txn`: a strong local and a temporary
    /// reference on the target node, and its process; `BR_DEAD_REPLY` when
    /// its owner died.
    fn binder_get_node_refs_for_txn(&mut self, n: NodeIdx) -> Result<(NodeIdx, Pid), TxnError> {
        let Some(owner) = self.nodes[n].proc else {
            return Err(TxnError::dead());
        };
        self.binder_inc_node(n, true, false, None)
            .expect("a local strong increment cannot fail");
        self.node(n).tmp_refs += 1;
        Ok((n, owner))
    }

    /// `binder_pop_transaction_ilocked`.
    fn binder_pop_transaction(&mut self, thread: ThreadIdx, txn: TxnIdx) {
        assert_eq!(
            self.threads[thread].transaction_stack,
            Some(txn),
            "BUG_ON(target_thread->transaction_stack != t)"
        );
        assert_eq!(
            self.txns[txn].from,
            Some(thread),
            "BUG_ON(target_thread->transaction_stack->from != target_thread)"
        );
        self.threads[thread].transaction_stack = self.txns[txn].from_parent;
        self.txns[txn].from = None;
    }

    /// `binder_free_transaction`: the target process counts one
    /// outstanding transaction less; its buffer forgets it.
    fn binder_free_transaction(&mut self, txn: TxnIdx) {
        if let Some(to) = self.txns[txn].to_proc {
            self.proc(to).outstanding_txns -= 1;
        }
        if let Some(b) = self.txns[txn].buffer {
            self.buffers[b].transaction = None;
        }
        self.txns[txn].freed = true;
    }

    /// `binder_send_failed_reply` (binder.c:1703-1765): the caller waiting
    /// for `txn` reads `error`; a caller that is gone passes it down the
    /// stack to the transaction it was answering.
    fn binder_send_failed_reply(&mut self, mut txn: TxnIdx, error: u32) {
        assert!(!self.txns[txn].oneway, "BUG_ON(t->flags & TF_ONE_WAY)");
        loop {
            if let Some(from) = self.txns[txn].from {
                self.binder_pop_transaction(from, txn);
                if self.threads[from].reply_error.is_none() {
                    self.threads[from].reply_error = Some(error);
                    self.enqueue_thread(from, Work::ReplyError(from));
                }
                self.binder_free_transaction(txn);
                return;
            }
            let next = self.txns[txn].from_parent;
            self.binder_free_transaction(txn);
            match next {
                Some(n) => txn = n,
                None => return,
            }
        }
    }

    /// `binder_cleanup_transaction`: an undelivered transaction of a dying
    /// process or thread; its caller is told `BR_DEAD_REPLY`.
    fn binder_cleanup_transaction(&mut self, txn: TxnIdx) {
        let buffer = self.txns[txn]
            .buffer
            .expect("an undelivered transaction has a buffer");
        if self.buffers[buffer].target_node.is_some() && !self.txns[txn].oneway {
            self.binder_send_failed_reply(txn, br_code::DEAD_REPLY);
        } else {
            self.log.push(Log::UndeliveredTransaction);
            self.binder_free_transaction(txn);
        }
    }

    /// `binder_translate_binder` from thread `t`: the sender's node becomes
    /// a handle of the target's; its node work goes on the sender's
    /// thread's list.
    fn binder_translate_binder(
        &mut self,
        t: ThreadIdx,
        target: Pid,
        ptr: u64,
        strong: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<Received, Errno> {
        let pid = self.threads[t].pid;
        // The cookie is the pointer for every node object of a program.
        let n = match self.binder_get_node(pid, ptr) {
            Some(n) => n,
            None => self.binder_new_node(pid, ptr, ptr, NodeFlags::default()),
        };
        if self.nodes[n].cookie != ptr {
            // "cookie mismatch", a user error this campaign does not
            // compare.
            self.binder_put_node(n);
            return Err(Errno::Inval);
        }
        let ret = self.binder_inc_ref_for_node(target, n, strong, Some(t), windows);
        self.binder_put_node(n);
        ret.map(|rdata| Received::Handle {
            handle: rdata.desc,
            strong,
        })
    }

    /// `binder_translate_handle`: the sender's handle becomes the target's
    /// own node, or a handle of the target's.
    fn binder_translate_handle(
        &mut self,
        pid: Pid,
        target: Pid,
        handle: u32,
        strong: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<Received, Errno> {
        // binder_get_node_from_ref
        let Some(desc) = self.binder_get_ref_olocked(pid, handle, strong) else {
            self.log.push(Log::ObjectInvalidHandle(handle));
            return Err(Errno::Inval);
        };
        let n = self.procs[pid.index()].ref_data[&desc].node;
        self.node(n).tmp_refs += 1;
        let ret = if self.nodes[n].proc == Some(target) {
            self.binder_inc_node(n, strong, false, None)
                .expect("a local increment cannot fail");
            Ok(Received::Node {
                ptr: self.nodes[n].ptr,
                strong,
            })
        } else {
            self.binder_inc_ref_for_node(target, n, strong, None, windows)
                .map(|rdata| Received::Handle {
                    handle: rdata.desc,
                    strong,
                })
        };
        self.binder_put_node(n);
        ret
    }

    /// `binder_proc_transaction` (binder.c:2860-2965): the transaction on
    /// `thread`'s list, or the process's, or behind the node's outstanding
    /// one-way transaction. `Ok(true)`: a one-way transaction queued to a
    /// frozen process (`BR_TRANSACTION_PENDING_FROZEN`).
    fn binder_proc_transaction(
        &mut self,
        txn: TxnIdx,
        target: Pid,
        thread: Option<ThreadIdx>,
    ) -> Result<bool, TxnError> {
        let buffer = self.txns[txn]
            .buffer
            .expect("a new transaction has its buffer");
        let n = self.buffers[buffer].target_node.expect("BUG_ON(!node)");
        let oneway = self.txns[txn].oneway;
        let mut pending_async = false;
        if oneway {
            if self.nodes[n].has_async_transaction {
                pending_async = true;
            } else {
                self.node(n).has_async_transaction = true;
            }
        }
        let p = self.proc(target);
        let frozen = p.is_frozen;
        if frozen {
            p.sync_recv |= !oneway;
            p.async_recv |= oneway;
        }
        let thread_dead = thread.is_some_and(|t| self.threads[t].is_dead);
        if (frozen && !oneway) || self.procs[target.index()].is_dead || thread_dead {
            return Err(if frozen {
                TxnError {
                    cmd: br_code::FROZEN_REPLY,
                    param: 0,
                }
            } else {
                TxnError::dead()
            });
        }
        // No thread ever waits in binder_select_thread_ilocked's list.
        if let Some(t) = thread {
            self.enqueue_thread(t, Work::Transaction(txn));
        } else if !pending_async {
            self.enqueue_proc(target, Work::Transaction(txn));
        } else {
            if self.txns[txn].flags.has(TxnFlags::UPDATE_TXN) && frozen {
                if let Some(old) = self.outdated(n, txn) {
                    self.node(n)
                        .async_todo
                        .retain(|w| *w != Work::Transaction(old));
                    self.proc(target).outstanding_txns -= 1;
                    let old_buffer = self.txns[old]
                        .buffer
                        .take()
                        .expect("queued with its buffer");
                    self.buffers[old_buffer].transaction = None;
                    self.txns[old].freed = true;
                    let mut none = super::Sequential;
                    self.binder_transaction_buffer_release(target, old_buffer, &mut none);
                    self.binder_alloc_free_buf(target, old_buffer);
                }
            }
            self.node(n).async_todo.push_back(Work::Transaction(txn));
        }
        self.proc(target).outstanding_txns += 1;
        Ok(oneway && frozen)
    }

    /// `binder_find_outdated_transaction_ilocked` with
    /// `binder_can_update_transaction`: a one-way transaction queued on
    /// node `n` that `txn` supersedes: both with `TF_UPDATE_TXN`, the same
    /// flags and the same sending pid (`t1->buffer->pid == t2->buffer->pid`,
    /// binder.c:2804, each `current->tgid`: any open of the sender's task;
    /// the code and the target are the same for every transaction of a
    /// program's node).
    fn outdated(&self, n: NodeIdx, txn: TxnIdx) -> Option<TxnIdx> {
        self.nodes[n].async_todo.iter().find_map(|w| match *w {
            Work::Transaction(old)
                if self.txns[old].flags == self.txns[txn].flags
                    && self.txns[old].flags.has(TxnFlags::UPDATE_TXN)
                    && self.procs[self.txns[old].sender.index()].pid
                        == self.procs[self.txns[txn].sender.index()].pid =>
            {
                Some(old)
            }
            _ => None,
        })
    }

    /// `binder_transaction_buffer_release` of a buffer of `pid`: the target
    /// node's strong ref, then every object in it.
    fn binder_transaction_buffer_release(
        &mut self,
        pid: Pid,
        buffer: usize,
        windows: &mut dyn Windows<Self>,
    ) {
        if let Some(n) = self.buffers[buffer].target_node {
            self.binder_dec_node(n, true, false);
        }
        let objects = self.buffers[buffer].objects.clone();
        for object in objects {
            match object {
                Received::Node { ptr, strong } => match self.binder_get_node(pid, ptr) {
                    Some(n) => {
                        self.binder_dec_node(n, strong, false);
                        self.binder_put_node(n);
                    }
                    None => self.log.push(Log::BadBufferObject),
                },
                Received::Handle { handle, strong } => {
                    if self
                        .binder_update_ref_for_handle(pid, handle, false, strong, windows)
                        .is_err()
                    {
                        self.log.push(Log::BadBufferObject);
                    }
                }
            }
            if self.crashed {
                return;
            }
        }
    }

    /// `binder_free_buf` (`BC_FREE_BUFFER`).
    fn binder_free_buf(&mut self, pid: Pid, buffer: usize, windows: &mut dyn Windows<Self>) {
        if let Some(txn) = self.buffers[buffer].transaction.take() {
            self.txns[txn].buffer = None;
        }
        if let (true, Some(n)) = (
            self.buffers[buffer].async_transaction,
            self.buffers[buffer].target_node,
        ) {
            assert!(
                self.nodes[n].has_async_transaction,
                "BUG_ON(!buf_node->has_async_transaction)"
            );
            assert_eq!(
                self.nodes[n].proc,
                Some(pid),
                "BUG_ON(buf_node->proc != proc)"
            );
            match self.node(n).async_todo.pop_front() {
                None => self.node(n).has_async_transaction = false,
                Some(w) => self.enqueue_proc(pid, w),
            }
        }
        self.binder_transaction_buffer_release(pid, buffer, windows);
        self.binder_alloc_free_buf(pid, buffer);
    }

    // ---- reading ----------------------------------------------------------

    /// The drain of `pid` after a step (`docs/commands.md`): each thread
    /// the driver knows, in order, reads until it has nothing left, each
    /// read followed by the answers userspace writes; a thread paused in a
    /// window (`busy`) does not.
    fn drain(&mut self, pid: Pid, step: &Step, busy: &[(Pid, Tid)]) -> Vec<Read> {
        let mut all = Vec::new();
        if !self.procs[pid.index()].open {
            return all;
        }
        let threads = &self.procs[pid.index()].threads;
        for (tid, t) in draining_threads(threads, pid, (step.pid, step.tid), busy) {
            // A thread gone while an earlier one drained reads nothing.
            if self.procs[pid.index()].threads.get(&tid) != Some(&t) {
                continue;
            }
            let reads = self.drain_thread(t);
            all.extend(reads.into_iter().map(|br| Read { tid, br }));
        }
        all
    }

    /// Every read thread `t` makes until `poll` says there is nothing.
    fn drain_thread(&mut self, t: ThreadIdx) -> Vec<Br> {
        let pid = self.threads[t].pid;
        let mut all = Vec::new();
        // A bound well above anything a program can queue.
        for _ in 0..256 {
            if !self.binder_poll(t) {
                return all;
            }
            let Some(read) = self.binder_thread_read(t) else {
                return all;
            };
            for br in &read {
                match *br {
                    Br::IncRefs(ptr) => self.inc_ref_done(pid, ptr, ptr, false),
                    Br::Acquire(ptr) => self.inc_ref_done(pid, ptr, ptr, true),
                    Br::DeadBinder(cookie) => self.dead_binder_done(t, cookie),
                    Br::FrozenBinder { cookie, .. } => {
                        // An error fails the answer's write; nothing reads it.
                        let _ = self.binder_freeze_notification_done(pid, cookie);
                    }
                    _ => {}
                }
            }
            all.extend(read);
        }
        panic!(
            "{pid}.{} still has work after 256 reads",
            self.threads[t].tid
        );
    }

    /// `binder_available_for_proc_work_ilocked`: no transaction and
    /// nothing on its own list (the looper state is not looked at).
    fn available_for_proc_work(&self, t: ThreadIdx) -> bool {
        let thread = &self.threads[t];
        thread.transaction_stack.is_none() && thread.todo.is_empty()
    }

    /// `binder_has_work_ilocked`.
    fn has_work(&self, t: ThreadIdx, do_proc_work: bool) -> bool {
        let thread = &self.threads[t];
        thread.process_todo
            || thread.looper_need_return
            || (do_proc_work && !self.procs[thread.pid.index()].todo.is_empty())
    }

    /// `binder_poll` from thread `t`: whether a read would find work.
    fn binder_poll(&mut self, t: ThreadIdx) -> bool {
        self.threads[t].looper |= looper::POLL;
        let available = self.available_for_proc_work(t);
        self.has_work(t, available)
    }

    /// One non-blocking `binder_thread_read` of thread `t`, made because
    /// `poll` announced work: `None` for `EAGAIN`, which `binder_ioctl`
    /// logs.
    fn binder_thread_read(&mut self, t: ThreadIdx) -> Option<Vec<Br>> {
        let pid = self.threads[t].pid;
        // `goto retry` while nothing was added: each pass consumes at
        // least one item or finds the work gone, except when the thread is
        // told it has work it cannot find (the bound).
        for _ in 0..64 {
            let wait_for_proc_work = self.available_for_proc_work(t);
            if wait_for_proc_work
                && self.threads[t].looper & (looper::REGISTERED | looper::ENTERED) == 0
            {
                self.log.push(Log::NotALooper);
            }
            if !self.has_work(t, wait_for_proc_work) {
                self.log.push(Log::IoctlFailed(Errno::Again));
                return None;
            }
            let mut out = Vec::new();
            self.read_pass(t, wait_for_proc_work, &mut out);
            if !out.is_empty() || self.threads[t].looper_need_return {
                self.spawn_looper(t, &mut out);
                return Some(out);
            }
        }
        self.log.push(Log::ReadLivelock);
        let _ = pid;
        None
    }

    /// `binder_thread_read`'s end (`done:`, binder.c:5164-5180): the
    /// driver asks a looper for another thread (`BR_SPAWN_LOOPER` in
    /// place of the first `BR_NOOP`) when none is requested and fewer than
    /// `max_threads` were started (no thread ever waits for work here).
    fn spawn_looper(&mut self, t: ThreadIdx, out: &mut Vec<Br>) {
        let is_looper = self.threads[t].looper & (looper::REGISTERED | looper::ENTERED) != 0;
        let p = self.proc(self.threads[t].pid);
        if p.requested_threads == 0 && p.requested_threads_started < p.max_threads && is_looper {
            p.requested_threads += 1;
            out.insert(0, Br::SpawnLooper);
        }
    }

    /// The loop of `binder_thread_read` after its wait: each item of the
    /// thread's list, then (when it waits for the process's work) of the
    /// process's, until a transaction or a notification that may cause one
    /// is written.
    fn read_pass(&mut self, t: ThreadIdx, wait_for_proc_work: bool, out: &mut Vec<Br>) {
        let pid = self.threads[t].pid;
        loop {
            let w = if let Some(w) = self.threads[t].todo.pop_front() {
                w
            } else if wait_for_proc_work && !self.procs[pid.index()].todo.is_empty() {
                self.proc(pid).todo.pop_front().expect("not empty")
            } else {
                return;
            };
            if self.threads[t].todo.is_empty() {
                self.threads[t].process_todo = false;
            }
            match w {
                Work::Transaction(txn) => {
                    self.read_transaction(t, txn, out);
                    return;
                }
                Work::ReturnError(x) => {
                    let cmd = self.threads[x]
                        .return_error
                        .take()
                        .expect("WARN_ON(e->cmd == BR_OK)");
                    out.push(br_of(cmd));
                }
                Work::ReplyError(x) => {
                    let cmd = self.threads[x]
                        .reply_error
                        .take()
                        .expect("WARN_ON(e->cmd == BR_OK)");
                    out.push(br_of(cmd));
                }
                Work::Complete(_, Complete::Pending) => out.push(Br::PendingFrozen),
                Work::Complete(_, Complete::Spam)
                    if self.procs[pid.index()].oneway_spam_detection_enabled =>
                {
                    out.push(Br::OnewaySpamSuspect)
                }
                Work::Complete(_, Complete::Done | Complete::Spam) => {
                    out.push(Br::TransactionComplete)
                }
                Work::Node(n) => self.node_work(pid, n, out),
                Work::Death(d) => {
                    let cookie = self.deaths[d].cookie;
                    if self.deaths[d].kind == DeathKind::Clear {
                        out.push(Br::ClearDeathDone(cookie));
                    } else {
                        self.proc(pid).delivered_death.push(d);
                        out.push(Br::DeadBinder(cookie));
                        return;
                    }
                }
                Work::Freeze(f) => {
                    let freeze = &mut self.freezes[f];
                    let cookie = freeze.cookie;
                    if freeze.clear {
                        out.push(Br::ClearFreezeDone(cookie));
                    } else {
                        freeze.sent = true;
                        let frozen = freeze.is_frozen;
                        self.proc(pid).delivered_freeze.push(f);
                        out.push(Br::FrozenBinder { cookie, frozen });
                        return;
                    }
                }
            }
        }
    }

    /// `binder_thread_read`'s `BINDER_WORK_TRANSACTION`: `BR_TRANSACTION`
    /// or `BR_REPLY`; a call goes on the reader's stack, anything else is
    /// done with (`binder_free_transaction`).
    fn read_transaction(&mut self, t: ThreadIdx, txn: TxnIdx, out: &mut Vec<Br>) {
        let pid = self.threads[t].pid;
        assert!(!self.txns[txn].freed, "a freed transaction is read");
        let buffer = self.txns[txn].buffer.expect("BUG_ON(t->buffer == NULL)");
        let objects = self.buffers[buffer].objects.clone();
        let to_node = self.buffers[buffer].target_node.is_some();
        let call = to_node && !self.txns[txn].oneway;
        out.push(match (to_node, call) {
            (false, _) => Br::Reply(objects),
            (true, false) => Br::Transaction(objects),
            (true, true) => Br::Call(objects),
        });
        self.proc(pid).buffers.push_back(buffer);
        if call {
            self.txns[txn].to_parent = self.threads[t].transaction_stack;
            self.txns[txn].to_thread = Some(t);
            self.threads[t].transaction_stack = Some(txn);
        } else {
            self.binder_free_transaction(txn);
        }
    }

    /// `binder_thread_read`'s `BINDER_WORK_NODE`.
    fn node_work(&mut self, pid: Pid, n: NodeIdx, out: &mut Vec<Br>) {
        let node = self.node(n);
        assert_eq!(node.proc, Some(pid), "BUG_ON(proc != node->proc)");
        let strong = node.internal_strong_refs != 0 || node.local_strong_refs != 0;
        let weak =
            !node.refs.is_empty() || node.local_weak_refs != 0 || node.tmp_refs != 0 || strong;
        let (has_strong, has_weak) = (node.has_strong_ref, node.has_weak_ref);
        if weak && !has_weak {
            node.has_weak_ref = true;
            node.pending_weak_ref = true;
            node.local_weak_refs += 1;
        }
        if strong && !has_strong {
            node.has_strong_ref = true;
            node.pending_strong_ref = true;
            node.local_strong_refs += 1;
        }
        if !strong && has_strong {
            node.has_strong_ref = false;
        }
        if !weak && has_weak {
            node.has_weak_ref = false;
        }
        let ptr = node.ptr;
        if !weak && !strong {
            node.freed = true;
            self.proc(pid).nodes.remove(&ptr);
        }
        if weak && !has_weak {
            out.push(Br::IncRefs(ptr));
        }
        if strong && !has_strong {
            out.push(Br::Acquire(ptr));
        }
        if !strong && has_strong {
            out.push(Br::Release(ptr));
        }
        if !weak && has_weak {
            out.push(Br::DecRefs(ptr));
        }
    }

    // ---- a thread's and a process's end --------------------------------------

    /// `binder_thread_release` (binder.c:5355-5443): the driver forgets the
    /// thread; each transaction of its stack loses it (an incoming one its
    /// target, an outgoing one its sender); the caller of the one it owed a
    /// reply to reads `BR_DEAD_REPLY`; its list's work is released.
    fn binder_thread_release(&mut self, pid: Pid, t: ThreadIdx) {
        let tid = self.threads[t].tid;
        self.proc(pid).threads.remove(&tid);
        let mut tr = self.threads[t].transaction_stack;
        let send_reply = tr.filter(|&x| self.txns[x].to_thread == Some(t));
        self.threads[t].is_dead = true;
        while let Some(x) = tr {
            // "release ... transaction ... still active": not compared.
            if self.txns[x].to_thread == Some(t) {
                self.proc(pid).outstanding_txns -= 1;
                let txn = &mut self.txns[x];
                txn.to_proc = None;
                txn.to_thread = None;
                if let Some(b) = txn.buffer.take() {
                    self.buffers[b].transaction = None;
                }
                tr = self.txns[x].to_parent;
            } else if self.txns[x].from == Some(t) {
                self.txns[x].from = None;
                tr = self.txns[x].from_parent;
            } else {
                panic!("BUG() in binder_thread_release: a transaction of neither side");
            }
        }
        if let Some(x) = send_reply {
            self.binder_send_failed_reply(x, br_code::DEAD_REPLY);
        }
        let todo: Vec<Work> = self.threads[t].todo.drain(..).collect();
        self.threads[t].process_todo = false;
        self.binder_release_work(todo);
    }

    /// `binder_release` then `binder_deferred_release`.
    fn binder_deferred_release(&mut self, pid: Pid) {
        self.proc(pid).open = false;
        if let Some(m) = self.manager {
            if self.nodes[m].proc == Some(pid) {
                self.set_manager(None);
            }
        }
        let p = self.proc(pid);
        p.is_dead = true;
        p.is_frozen = false;
        p.sync_recv = false;
        p.async_recv = false;
        p.refs.mark_dead();
        // The threads, by pid: ours were made in order.
        while let Some((_, &t)) = self.procs[pid.index()].threads.iter().next() {
            self.binder_thread_release(pid, t);
        }
        // The nodes, by pointer.
        while let Some((&ptr, &n)) = self.procs[pid.index()].nodes.iter().next() {
            self.node(n).tmp_refs += 1;
            self.proc(pid).nodes.remove(&ptr);
            self.binder_node_release(pid, n);
        }
        // The references, by descriptor: no try_shrink_dmap.
        while let Some(&desc) = self.procs[pid.index()].ref_data.keys().next() {
            self.cleanup_ref(pid, desc);
            self.proc(pid).refs.remove_handle(desc);
        }
        let todo: Vec<Work> = self.proc(pid).todo.drain(..).collect();
        self.binder_release_work(todo);
        let delivered: Vec<Work> = self
            .proc(pid)
            .delivered_death
            .drain(..)
            .map(Work::Death)
            .collect();
        self.binder_release_work(delivered);
        let delivered: Vec<Work> = self
            .proc(pid)
            .delivered_freeze
            .drain(..)
            .map(Work::Freeze)
            .collect();
        self.binder_release_work(delivered);
        self.proc(pid).buffers.clear();
    }

    /// `binder_release_work`: what each undelivered work item logs.
    fn binder_release_work(&mut self, list: Vec<Work>) {
        for w in list {
            match w {
                Work::Transaction(txn) => self.binder_cleanup_transaction(txn),
                Work::ReturnError(x) => {
                    self.threads[x].return_error = None;
                    self.log.push(Log::UndeliveredError);
                }
                Work::ReplyError(x) => {
                    self.threads[x].reply_error = None;
                    self.log.push(Log::UndeliveredError);
                }
                Work::Complete(..) => self.log.push(Log::UndeliveredComplete),
                Work::Death(d) => match self.deaths[d].kind {
                    DeathKind::DeadBinderAndClear | DeathKind::Clear => {
                        self.log.push(Log::UndeliveredDeath)
                    }
                    DeathKind::DeadBinder | DeathKind::Armed => self.log.push(Log::UnexpectedWork),
                },
                Work::Freeze(f) => {
                    if self.freezes[f].clear {
                        self.log.push(Log::UndeliveredFreeze);
                    } else {
                        self.log.push(Log::UnexpectedWork);
                    }
                }
                Work::Node(_) => {}
            }
        }
    }

    /// `binder_node_release`: the node of a dying process dies; the
    /// processes that asked are told.
    fn binder_node_release(&mut self, pid: Pid, n: NodeIdx) {
        let async_todo: Vec<Work> = self.node(n).async_todo.drain(..).collect();
        self.binder_release_work(async_todo);
        self.dequeue(pid, Work::Node(n));
        if self.nodes[n].refs.is_empty() && self.nodes[n].tmp_refs == 1 {
            self.node(n).freed = true;
            return;
        }
        let node = self.node(n);
        node.proc = None;
        node.local_strong_refs = 0;
        node.local_weak_refs = 0;
        for (holder, desc) in self.nodes[n].refs.clone() {
            let Some(d) = self.procs[holder.index()].ref_data[&desc].death else {
                continue;
            };
            assert!(
                !self.queued(holder, Work::Death(d)),
                "BUG_ON(!list_empty(&ref->death->work.entry))"
            );
            self.deaths[d].kind = DeathKind::DeadBinder;
            self.enqueue_proc(holder, Work::Death(d));
        }
        self.binder_put_node(n);
    }

    // ---- observing ----------------------------------------------------------

    /// What reading debugfs `binder/proc/<pid>` does to the driver
    /// (`proc_show`, `print_binder_proc`): every node of `pid` is printed
    /// under a temporary reference (`print_next_binder_node_ilocked`),
    /// dropped with `binder_put_node`. That drop is
    /// `binder_dec_node_nilocked(node, 0, 1)`, which queues the node's work
    /// on the process's list when no reference, local weak count or other
    /// temporary reference holds the node and it has `has_strong_ref` or
    /// `has_weak_ref`, even when local strong counts keep its state as it
    /// is: the next read then finds work that says nothing. The real
    /// drivers' executor reads this file after every step; no command does.
    pub fn print_binder_proc(&mut self, pid: Pid) {
        if !self.procs[pid.index()].open || self.crashed {
            return;
        }
        let nodes: Vec<NodeIdx> = self.procs[pid.index()].nodes.values().copied().collect();
        for n in nodes {
            self.node(n).tmp_refs += 1;
            self.binder_put_node(n);
        }
    }

    /// What each process holds now.
    pub fn snapshot(&self) -> Snapshot {
        let procs = self
            .procs
            .iter()
            .map(|p| ProcState {
                alive: p.open,
                frozen: p.open && p.is_frozen,
                refs: p
                    .ref_data
                    .iter()
                    .map(|(&desc, r)| {
                        let death = r.death.map(|d| self.deaths[d].cookie);
                        let state = RefState {
                            node: self.nodes[r.node].name,
                            strong: r.strong as u32,
                            weak: r.weak as u32,
                            death,
                        };
                        (desc, state)
                    })
                    .collect(),
                nodes: p
                    .nodes
                    .iter()
                    .map(|(&ptr, &n)| {
                        let node = &self.nodes[n];
                        let state = NodeState {
                            serial: node.name.serial,
                            strong: (node.local_strong_refs + node.internal_strong_refs) as u32,
                            weak: node.local_weak_refs as u32,
                            has_strong: node.has_strong_ref,
                            has_weak: node.has_weak_ref,
                        };
                        (ptr, state)
                    })
                    .collect(),
                buffers: p.buffers.len(),
            })
            .collect();
        Snapshot { procs }
    }

    /// The handle tables, to check their invariants.
    pub fn tables(&self) -> impl Iterator<Item = &NodeRefs<DBitmap>> {
        self.procs.iter().map(|p| &p.refs)
    }

    /// Checks that each process's table holds exactly the references the
    /// driver counts, each for its node.
    pub fn check_tables(&self) -> Result<(), String> {
        for (i, p) in self.procs.iter().enumerate() {
            p.refs
                .check_invariants()
                .map_err(|e| format!("p{i}'s table: {e}"))?;
            let table: Vec<(u32, NodeId)> = p
                .refs
                .by_handle()
                .iter()
                .map(|(&h, r)| (h, r.node))
                .collect();
            let counted: Vec<(u32, NodeId)> = p
                .ref_data
                .iter()
                .map(|(&h, r)| (h, r.node as NodeId))
                .collect();
            if table != counted {
                return Err(format!(
                    "p{i}: the table holds {table:?} but the driver counts {counted:?}"
                ));
            }
        }
        Ok(())
    }
}
