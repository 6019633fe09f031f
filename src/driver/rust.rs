//! The Rust driver (`drivers/android/binder/` of Linux 7.3) at the command
//! level.
//!
//! Each function here is named after the upstream function it reproduces
//! (`Process::update_ref`, `Process::insert_or_update_handle`,
//! `NodeRef::update`, `Node::do_work_locked`, `Thread::reply_inner`, ...)
//! and keeps its order of checks, counts and work items;
//! `docs/conformance.md` and `docs/conformance-commands.md` give the
//! upstream line of every rule. The handle tables are [`NodeRefs<IdPool>`]
//! driven through the Rust protocol of [`Operation`](crate::Operation), so
//! the Rust versions of the allocator's history apply here too.
//!
//! What is reproduced: the context (its manager's `NodeRef` and uid); per
//! process its `NodeRefInfo`s by handle (a `NodeRef` with its four counts,
//! a death notification, a freeze cookie), its freeze listeners, its nodes
//! (the strong and weak `CountState`s, the `DeliveryState`,
//! `active_inc_refs`, the one-way queue, the death list, the freeze list),
//! its threads (looper flags, the work list with its `process_work_list`
//! flag, `current_transaction`, the reply and return work, the extended
//! error), the process's work list, the thread pool's counts, the
//! freezer's state, the delivered deaths and the received buffers (each
//! holding the `NodeRef` of its target node); the transactions with their
//! `from`, `from_parent` and target. No thread ever blocks: a read is
//! non-blocking, so no thread is ever in `ready_threads`.

use super::c::MAP_SIZE;
use super::command::{
    Command, LooperCmd, NodeFlags, Object, Payload, Pid, Procs, Refused, Step, Tid, TxnFlags,
};
use super::exec::{drive, Tables, Windows};
use super::observe::{
    br_code, draining_threads, Br, Errno, ExtendedError, Log, NodeName, NodeState, Observed,
    ProcState, Read, Received, RefState, Ret, Snapshot,
};
use crate::id_pool::IdPool;
use crate::table::{Error, Manager, NodeId, NodeRefs, Operation, Request, Warning};
use crate::version::{Driver, Version};
use std::collections::{BTreeMap, VecDeque};

type NodeIdx = usize;
type DeathIdx = usize;
type ThreadIdx = usize;
type TxnIdx = usize;

/// `LooperFlag`.
mod looper {
    pub const REGISTERED: u32 = 1 << 0;
    pub const ENTERED: u32 = 1 << 1;
    pub const EXITED: u32 = 1 << 2;
    pub const INVALID: u32 = 1 << 3;
    pub const POLL: u32 = 1 << 6;
}

/// A work item (`DLArc<dyn DeliverToRead>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// A transaction or a reply.
    Transaction(TxnIdx),
    /// `DeliverCode`, by its own number: `BR_TRANSACTION_COMPLETE` (or
    /// `BR_ONEWAY_SPAM_SUSPECT`), unless skipped.
    Complete {
        /// Which one.
        id: usize,
        /// `DeliverCode::skip`, set when the transaction failed.
        skipped: bool,
        /// Its code is `BR_ONEWAY_SPAM_SUSPECT`.
        spam: bool,
    },
    /// The thread's `return_work`.
    ReturnError(ThreadIdx),
    /// The thread's `reply_work`.
    ReplyError(ThreadIdx),
    /// The node itself.
    Node(NodeIdx),
    /// The node's `CritIncrWrapper`.
    Wrapper(NodeIdx),
    /// A `NodeDeath`.
    Death(DeathIdx),
    /// A `FreezeMessage`, by its own number, for the listener with this
    /// cookie.
    Freeze {
        /// Which one.
        id: usize,
        /// The listener's cookie.
        cookie: u64,
    },
}

/// `CountState`.
#[derive(Clone, Copy, Debug, Default)]
struct CountState {
    count: usize,
    has_count: bool,
}

/// `DeliveryState`.
#[derive(Clone, Copy, Debug, Default)]
struct DeliveryState {
    has_pushed_node: bool,
    has_pushed_wrapper: bool,
    has_weak_zero2one: bool,
    has_strong_zero2one: bool,
}

impl DeliveryState {
    fn should_normal_push(&self) -> bool {
        !self.has_pushed_node && !self.has_pushed_wrapper
    }
    fn should_push_weak_zero2one(&self) -> bool {
        !self.has_weak_zero2one && !self.has_strong_zero2one
    }
    fn can_push_weak_zero2one_normally(&self) -> bool {
        !self.has_pushed_node
    }
    fn should_push_strong_zero2one(&self) -> bool {
        !self.has_strong_zero2one
    }
    fn can_push_strong_zero2one_normally(&self) -> bool {
        !self.has_pushed_node
    }
}

#[derive(Debug)]
struct Node {
    name: NodeName,
    ptr: u64,
    cookie: u64,
    owner: Pid,
    strong: CountState,
    weak: CountState,
    delivery: DeliveryState,
    active_inc_refs: u8,
    oneway_todo: VecDeque<TxnIdx>,
    has_oneway_transaction: bool,
    death_list: Vec<DeathIdx>,
    /// `freeze_list`: the processes listening for its owner's freezes.
    freeze_list: Vec<Pid>,
    /// The `NodeRefInfo`s referring to it, as (process, handle).
    refs: Vec<(Pid, u32)>,
}

/// `NodeRef`: counts held on a node.
#[derive(Debug)]
struct NodeRef {
    node: NodeIdx,
    strong_node_count: usize,
    weak_node_count: usize,
    strong_count: usize,
    weak_count: usize,
}

#[derive(Debug)]
struct RefInfo {
    node_ref: NodeRef,
    death: Option<DeathIdx>,
    /// `freeze`: the cookie of its freeze listener.
    freeze: Option<u64>,
}

/// `NodeDeath`.
#[derive(Debug)]
struct Death {
    node: NodeIdx,
    process: Pid,
    cookie: u64,
    dead: bool,
    cleared: bool,
    notification_done: bool,
    aborted: bool,
}

/// `FreezeListener`.
#[derive(Debug)]
struct FreezeListener {
    node: NodeIdx,
    last_is_frozen: Option<bool>,
    is_pending: bool,
    is_clearing: bool,
    num_pending_duplicates: u64,
    num_cleared_duplicates: u64,
}

/// An allocation in the receiver's buffer space, with its
/// `AllocationInfo`.
#[derive(Debug)]
struct Buffer {
    to: Pid,
    target_node: Option<NodeRef>,
    oneway_node: Option<NodeIdx>,
    objects: Vec<Received>,
    /// Its range in the receiver's space: size, one-way or not, the
    /// sending process, and whether it is still reserved.
    size: usize,
    is_oneway: bool,
    sender: Pid,
    reserved: bool,
}

/// `Transaction`.
#[derive(Debug)]
struct Txn {
    /// `from`: the sending thread, for ever.
    from: ThreadIdx,
    from_parent: Option<TxnIdx>,
    /// `to`: the target process.
    to: Pid,
    /// `target_node`: `None` for a reply.
    target_node: Option<NodeIdx>,
    /// `allocation`, until it is delivered or dropped.
    allocation: Option<usize>,
    is_outstanding: bool,
    oneway: bool,
    flags: TxnFlags,
    /// The sending process (`from.process`).
    sender: Pid,
    dropped: bool,
}

/// `ExtendedError`.
#[derive(Clone, Copy, Debug)]
struct Ee {
    id: u32,
    command: u32,
    param: i32,
}

/// `Thread` with its `InnerThread`.
#[derive(Debug)]
struct Thread {
    pid: Pid,
    tid: Tid,
    looper_flags: u32,
    looper_need_return: bool,
    is_dead: bool,
    /// `reply_work`'s error code while it is in use.
    reply_work: Option<u32>,
    /// `return_work`'s error code while it is in use.
    return_work: Option<u32>,
    process_work_list: bool,
    work_list: VecDeque<Work>,
    current_transaction: Option<TxnIdx>,
    extended_error: Ee,
}

impl Thread {
    fn is_looper(&self) -> bool {
        self.looper_flags & (looper::ENTERED | looper::REGISTERED) != 0
    }

    /// `InnerThread::should_use_process_work_queue`.
    fn should_use_process_work_queue(&self) -> bool {
        self.current_transaction.is_none() && !self.process_work_list && self.is_looper()
    }
}

/// `IsFrozen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IsFrozen {
    No,
    InProgress,
    Yes,
}

impl IsFrozen {
    fn is_frozen(self) -> bool {
        self != IsFrozen::No
    }
    fn is_fully_frozen(self) -> bool {
        self == IsFrozen::Yes
    }
}

#[derive(Debug)]
struct Proc {
    /// `Process::task`: the task that opened it (`group_leader()`,
    /// process.rs:532), named by the task's first process. Two opens by
    /// one task share it.
    task: Pid,
    euid: u32,
    /// The file is still open (no `exit` yet): the process is on its
    /// context's `all_procs`.
    open: bool,
    is_dead: bool,
    is_manager: bool,
    refs: NodeRefs<IdPool>,
    infos: BTreeMap<u32, RefInfo>,
    /// `freeze_listeners`, by cookie.
    freeze_listeners: BTreeMap<u64, FreezeListener>,
    nodes: BTreeMap<u64, NodeIdx>,
    /// `threads`: the threads the driver knows.
    threads: BTreeMap<Tid, ThreadIdx>,
    /// The process's `work` list.
    work: VecDeque<Work>,
    delivered_deaths: Vec<DeathIdx>,
    requested_thread_count: u32,
    max_threads: u32,
    started_thread_count: u32,
    outstanding_txns: u32,
    is_frozen: IsFrozen,
    sync_recv: bool,
    async_recv: bool,
    oneway_spam_detection_enabled: bool,
    /// The range allocator's `free_oneway_space`.
    free_oneway_space: usize,
    buffers: VecDeque<usize>,
    /// The mapping is gone (`deferred_release` took it).
    unmapped: bool,
}

/// The Rust driver's state for one context (one Binder device) and its
/// processes.
#[derive(Debug)]
pub struct RustDriver {
    version: Version,
    /// `Manager::node`: the context's `NodeRef` on the manager's node.
    manager: Option<NodeRef>,
    /// `Manager::uid`.
    manager_uid: Option<u32>,
    procs: Vec<Proc>,
    threads: Vec<Thread>,
    nodes: Vec<Node>,
    deaths: Vec<Death>,
    buffers: Vec<Buffer>,
    txns: Vec<Txn>,
    serials: BTreeMap<(Pid, u64), u32>,
    /// `next_debug_id`'s counter.
    debug_ids: u32,
    /// `next_err_id`'s counter.
    err_ids: u32,
    /// The number of the next `DeliverCode` or `FreezeMessage`.
    items: usize,
    log: Vec<Log>,
}

impl Tables<IdPool> for RustDriver {
    fn table(&mut self, pid: Pid) -> &mut NodeRefs<IdPool> {
        &mut self.procs[pid.index()].refs
    }
}

/// `BinderError`: the `BR_*` for the sender and, for a failure with a
/// source, its errno (which the extended error and a log line report).
#[derive(Clone, Copy, Debug)]
struct BinderError {
    reply: u32,
    source: Option<Errno>,
}

impl BinderError {
    fn dead() -> Self {
        BinderError {
            reply: br_code::DEAD_REPLY,
            source: None,
        }
    }
    fn frozen() -> Self {
        BinderError {
            reply: br_code::FROZEN_REPLY,
            source: None,
        }
    }
    fn frozen_oneway() -> Self {
        BinderError {
            reply: br_code::TRANSACTION_PENDING_FROZEN,
            source: None,
        }
    }
    fn from(e: Errno) -> Self {
        BinderError {
            reply: br_code::FAILED_REPLY,
            source: Some(e),
        }
    }
}

/// The `BR_*` of a thread's error work.
fn br_of(code: u32) -> Br {
    match code {
        br_code::FAILED_REPLY => Br::FailedReply,
        br_code::DEAD_REPLY => Br::DeadReply,
        br_code::FROZEN_REPLY => Br::FrozenReply,
        br_code::TRANSACTION_PENDING_FROZEN => Br::PendingFrozen,
        br_code::TRANSACTION_COMPLETE => Br::TransactionComplete,
        other => Br::Error(other as i32),
    }
}

impl RustDriver {
    /// The driver after each of `procs.len()` processes opened the device,
    /// for the Rust `version`: each one's thread `t0` has written
    /// `BC_ENTER_LOOPER` (`BINDER_VERSION` makes no thread in this driver).
    ///
    /// # Panics
    ///
    /// If `version` is not a Rust version.
    pub fn new(procs: &Procs, version: Version) -> Self {
        assert_eq!(
            version.driver(),
            Driver::Rust,
            "{version} is not a Rust version"
        );
        let procs = procs
            .euids
            .iter()
            .zip(&procs.tasks)
            .map(|(&euid, &task)| Proc {
                task,
                euid,
                open: true,
                is_dead: false,
                is_manager: false,
                refs: NodeRefs::with_version(version),
                infos: BTreeMap::new(),
                freeze_listeners: BTreeMap::new(),
                nodes: BTreeMap::new(),
                threads: BTreeMap::new(),
                work: VecDeque::new(),
                delivered_deaths: Vec::new(),
                requested_thread_count: 0,
                max_threads: 0,
                started_thread_count: 0,
                outstanding_txns: 0,
                is_frozen: IsFrozen::No,
                sync_recv: false,
                async_recv: false,
                oneway_spam_detection_enabled: false,
                free_oneway_space: MAP_SIZE / 2,
                buffers: VecDeque::new(),
                unmapped: false,
            })
            .collect();
        let mut driver = RustDriver {
            version,
            manager: None,
            manager_uid: None,
            procs,
            threads: Vec::new(),
            nodes: Vec::new(),
            deaths: Vec::new(),
            buffers: Vec::new(),
            txns: Vec::new(),
            serials: BTreeMap::new(),
            debug_ids: 0,
            err_ids: 0,
            items: 0,
            log: Vec::new(),
        };
        for i in 0..driver.procs.len() {
            let t = driver.get_current_thread(Pid(i as u8), Tid(0));
            driver.threads[t].looper_flags |= looper::ENTERED;
        }
        driver
    }

    /// The version it follows.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Runs one step to completion, then lets every thread that is not in
    /// the middle of a command drain its work (see [`CDriver::exec`]).
    ///
    /// [`CDriver::exec`]: super::CDriver::exec
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
        let ret = if !self.procs[step.pid.index()].open {
            Ret::Skipped
        } else {
            self.command(step, windows)
        };
        observed.ret = Some(ret);
        if ret != Ret::Skipped && !matches!(step.command, Command::ThreadExit | Command::Exit) {
            let t = self.get_current_thread(step.pid, step.tid);
            observed.ee = Some(self.get_extended_error(t));
        }
        let mut log = std::mem::take(&mut self.log);
        for i in 0..self.procs.len() {
            let pid = Pid(i as u8);
            observed.reads[i] = self.drain(pid, step, busy);
        }
        log.append(&mut self.log);
        self.log = outer;
        observed.log = log;
        observed.normalise();
        observed
    }

    /// The step's command, as `Process::ioctl` dispatches it.
    fn command(&mut self, step: &Step, windows: &mut dyn Windows<Self>) -> Ret {
        let (pid, tid) = (step.pid, step.tid);
        let result = match &step.command {
            Command::Exit => {
                self.deferred_release(pid, windows);
                return Ret::Ok;
            }
            Command::Free if self.procs[pid.index()].buffers.is_empty() => return Ret::Skipped,
            // Ioctls that make no thread.
            Command::Freeze { target, .. } | Command::Thaw(target) => {
                let enable = matches!(step.command, Command::Freeze { .. });
                self.ioctl_freeze(*target, enable)
            }
            Command::FrozenInfo(target) => return self.get_frozen_status(*target),
            Command::NodeDebug(ptr) => return self.get_node_debug_info(pid, *ptr),
            Command::NodeInfo(handle) => return self.get_node_info_from_ref(pid, *handle),
            Command::Version => return Ret::Version(super::c::PROTOCOL_VERSION),
            command => {
                let t = self.get_current_thread(pid, tid);
                self.thread_ioctl(t, command, windows)
            }
        };
        match result {
            Ok(ret) => ret,
            Err(e) => Ret::Err(e),
        }
    }

    /// The ioctls that find or make the calling thread first.
    fn thread_ioctl(
        &mut self,
        t: ThreadIdx,
        command: &Command,
        windows: &mut dyn Windows<Self>,
    ) -> Result<Ret, Errno> {
        let pid = self.threads[t].pid;
        match command {
            Command::SetManager => self.set_as_manager(pid, t, None).map(|()| Ret::Ok),
            Command::SetManagerExt { ptr, cookie, flags } => self
                .set_as_manager(pid, t, Some((*ptr, *cookie, *flags)))
                .map(|()| Ret::Ok),
            Command::ExtendedError => Ok(Ret::Extended(self.get_extended_error(t))),
            Command::ThreadExit => {
                self.remove_thread(pid, t, windows);
                Ok(Ret::Ok)
            }
            Command::MaxThreads(n) => {
                self.proc(pid).max_threads = *n;
                Ok(Ret::Ok)
            }
            Command::OnewaySpam(on) => {
                self.proc(pid).oneway_spam_detection_enabled = *on;
                Ok(Ret::Ok)
            }
            Command::Refused(Refused::IdleTimeout | Refused::IdlePriority) => Err(Errno::Inval),
            _ => {
                // Thread::write_read: a failed write is logged.
                let ret = self.write(t, command, windows);
                if let Err(e) = ret {
                    self.log.push(Log::IoctlFailed(e));
                }
                ret.map(|()| Ret::Ok)
            }
        }
    }

    /// `Thread::write`: one `BC_` command, unless the thread's
    /// `return_work` is in use (nothing is consumed then).
    fn write(
        &mut self,
        t: ThreadIdx,
        command: &Command,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(), Errno> {
        if self.threads[t].return_work.is_some() {
            return Ok(());
        }
        let pid = self.threads[t].pid;
        match command {
            Command::Ref(cmd, handle) => {
                self.update_ref(pid, *handle, cmd.increment(), cmd.strong(), windows)
            }
            Command::Send { to, payload } | Command::Call { to, payload } => {
                let oneway = matches!(command, Command::Send { .. });
                self.transaction(t, Some(*to), oneway, payload, windows);
                Ok(())
            }
            Command::Reply(payload) => {
                self.transaction(t, None, false, payload, windows);
                Ok(())
            }
            Command::Free => {
                let buffer = self.proc(pid).buffers.pop_front().expect("not skipped");
                self.drop_allocation(buffer, windows);
                Ok(())
            }
            Command::RequestDeath { handle, cookie } => {
                self.request_death(pid, *handle, *cookie);
                Ok(())
            }
            Command::ClearDeath { handle, cookie } => {
                self.clear_death(t, *handle, *cookie);
                Ok(())
            }
            Command::RequestFreeze { handle, cookie } => {
                self.request_freeze_notif(pid, *handle, *cookie)
            }
            Command::ClearFreeze { handle, cookie } => {
                self.clear_freeze_notif(pid, *handle, *cookie)
            }
            Command::Looper(LooperCmd::Register) => {
                let valid = self.register_thread(pid);
                let thread = &mut self.threads[t];
                thread.looper_flags |= looper::REGISTERED;
                if !valid || thread.looper_flags & looper::ENTERED != 0 {
                    thread.looper_flags |= looper::INVALID;
                }
                Ok(())
            }
            Command::Looper(LooperCmd::Enter) => {
                let thread = &mut self.threads[t];
                thread.looper_flags |= looper::ENTERED;
                if thread.looper_flags & looper::REGISTERED != 0 {
                    thread.looper_flags |= looper::INVALID;
                }
                Ok(())
            }
            Command::Looper(LooperCmd::Exit) => {
                self.threads[t].looper_flags |= looper::EXITED;
                Ok(())
            }
            // BC_ATTEMPT_ACQUIRE, BC_ACQUIRE_RESULT: unknown commands.
            Command::Refused(Refused::AttemptAcquire | Refused::AcquireResult) => Err(Errno::Inval),
            other => unreachable!("`{other}` is not a BC_ command"),
        }
    }

    fn proc(&mut self, pid: Pid) -> &mut Proc {
        &mut self.procs[pid.index()]
    }

    /// `Process::get_current_thread`: the thread `tid` of `pid`, made if
    /// the driver does not know it.
    fn get_current_thread(&mut self, pid: Pid, tid: Tid) -> ThreadIdx {
        if let Some(&t) = self.procs[pid.index()].threads.get(&tid) {
            return t;
        }
        let t = self.threads.len();
        // InnerThread::new: the extended error's id is next_err_id().
        let id = self.err_ids;
        self.err_ids += 1;
        self.threads.push(Thread {
            pid,
            tid,
            looper_flags: 0,
            looper_need_return: false,
            is_dead: false,
            reply_work: None,
            return_work: None,
            process_work_list: false,
            work_list: VecDeque::new(),
            current_transaction: None,
            extended_error: Ee {
                id,
                command: br_code::OK,
                param: 0,
            },
        });
        self.proc(pid).threads.insert(tid, t);
        t
    }

    /// `next_debug_id`. Its first value in a boot is 0; the executor's
    /// boot has used it before any trace runs, so a program's first
    /// transaction is never 0.
    fn next_debug_id(&mut self) -> u32 {
        self.debug_ids += 1;
        self.debug_ids
    }

    /// `Thread::get_extended_error`: reported, then cleared.
    fn get_extended_error(&mut self, t: ThreadIdx) -> ExtendedError {
        let ee = std::mem::replace(
            &mut self.threads[t].extended_error,
            Ee {
                id: 0,
                command: br_code::OK,
                param: 0,
            },
        );
        ExtendedError::observe(ee.id, ee.command, ee.param)
    }

    /// `ProcessInner::register_thread`.
    fn register_thread(&mut self, pid: Pid) -> bool {
        let p = self.proc(pid);
        if p.requested_thread_count == 0 {
            return false;
        }
        p.requested_thread_count -= 1;
        p.started_thread_count += 1;
        true
    }

    // ---- work lists ----------------------------------------------------

    /// `ProcessInner::push_work`: to the process's list (no thread of ours
    /// is ever ready), or refused when the process is dead.
    fn push_work(&mut self, pid: Pid, work: Work) -> Result<(), ()> {
        let p = self.proc(pid);
        if p.is_dead {
            return Err(());
        }
        p.work.push_back(work);
        Ok(())
    }

    /// `InnerThread::push_work`: refused when the thread is dead.
    fn push_thread_work(&mut self, t: ThreadIdx, work: Work) -> Result<(), ()> {
        let thread = &mut self.threads[t];
        if thread.is_dead {
            return Err(());
        }
        thread.work_list.push_back(work);
        thread.process_work_list = true;
        Ok(())
    }

    /// `InnerThread::push_work_deferred`.
    fn push_thread_work_deferred(&mut self, t: ThreadIdx, work: Work) {
        self.threads[t].work_list.push_back(work);
    }

    /// `Thread::push_work_if_looper`.
    fn push_work_if_looper(&mut self, t: ThreadIdx, work: Work) {
        let thread = &self.threads[t];
        if thread.is_looper() && !thread.is_dead {
            let _ = self.push_thread_work(t, work);
        } else {
            let _ = self.push_work(thread.pid, work);
        }
    }

    /// `InnerThread::push_return_work`.
    fn push_return_work(&mut self, t: ThreadIdx, code: u32) {
        if self.threads[t].return_work.is_none() {
            self.threads[t].return_work = Some(code);
            let _ = self.push_thread_work(t, Work::ReturnError(t));
        }
    }

    fn in_a_list(&self, pid: Pid, work: Work) -> bool {
        let p = &self.procs[pid.index()];
        p.work.contains(&work)
            || self
                .threads
                .iter()
                .any(|t| t.pid == pid && t.work_list.contains(&work))
    }

    /// A new `DeliverCode` for `BR_TRANSACTION_COMPLETE` (or
    /// `BR_ONEWAY_SPAM_SUSPECT`).
    fn completion(&mut self, spam: bool) -> Work {
        self.items += 1;
        Work::Complete {
            id: self.items,
            skipped: false,
            spam,
        }
    }

    /// `DeliverCode::skip` on a queued completion.
    fn skip(&mut self, t: ThreadIdx, completion: Work) {
        let Work::Complete { id, spam, .. } = completion else {
            unreachable!("only completions are skipped")
        };
        for w in self.threads[t].work_list.iter_mut() {
            if *w == completion {
                *w = Work::Complete {
                    id,
                    skipped: true,
                    spam,
                };
            }
        }
    }

    // ---- nodes ----------------------------------------------------------

    /// `Process::get_node`: the node of `pid` with `ptr` (created if
    /// missing), with a new `NodeRef` whose zero-to-one increment is
    /// delivered to thread `t`. A node there with another cookie is
    /// `EINVAL` (`get_existing_node`).
    fn get_node(
        &mut self,
        t: ThreadIdx,
        ptr: u64,
        cookie: u64,
        strong: bool,
    ) -> Result<NodeRef, Errno> {
        let pid = self.threads[t].pid;
        let mut wrapper = false;
        for _ in 0..2 {
            let n = match self.procs[pid.index()].nodes.get(&ptr) {
                Some(&n) if self.nodes[n].cookie != cookie => return Err(Errno::Inval),
                Some(&n) => n,
                None => self.new_node(pid, ptr, cookie),
            };
            match self.new_node_ref_with_thread(n, strong, t, wrapper) {
                Ok(node_ref) => return Ok(node_ref),
                Err(()) => wrapper = true,
            }
        }
        unreachable!("with a wrapper the increment is always delivered")
    }

    fn new_node(&mut self, pid: Pid, ptr: u64, cookie: u64) -> NodeIdx {
        let serial = self.serials.entry((pid, ptr)).or_insert(0);
        let name = NodeName {
            owner: pid,
            ptr,
            serial: *serial,
        };
        *serial += 1;
        let n = self.nodes.len();
        self.nodes.push(Node {
            name,
            ptr,
            cookie,
            owner: pid,
            strong: CountState::default(),
            weak: CountState::default(),
            delivery: DeliveryState::default(),
            active_inc_refs: 0,
            oneway_todo: VecDeque::new(),
            has_oneway_transaction: false,
            death_list: Vec::new(),
            freeze_list: Vec::new(),
            refs: Vec::new(),
        });
        self.proc(pid).nodes.insert(ptr, n);
        n
    }

    /// `ProcessInner::new_node_ref_with_thread` with
    /// `Node::incr_refcount_allow_zero2one`: `Err` is
    /// `CouldNotDeliverCriticalIncrement`.
    fn new_node_ref_with_thread(
        &mut self,
        n: NodeIdx,
        strong: bool,
        thread: ThreadIdx,
        wrapper: bool,
    ) -> Result<NodeRef, ()> {
        let is_dead = self.procs[self.nodes[n].owner.index()].is_dead;
        let node = &mut self.nodes[n];
        let state = if strong {
            &mut node.strong
        } else {
            &mut node.weak
        };
        state.count += 1;
        let push = if is_dead || state.has_count {
            None
        } else if !strong && node.delivery.should_push_weak_zero2one() {
            assert!(node.delivery.can_push_weak_zero2one_normally());
            node.delivery.has_pushed_node = true;
            node.delivery.has_weak_zero2one = true;
            Some(Work::Node(n))
        } else if strong && node.delivery.should_push_strong_zero2one() {
            if node.delivery.can_push_strong_zero2one_normally() {
                node.delivery.has_pushed_node = true;
                node.delivery.has_strong_zero2one = true;
                Some(Work::Node(n))
            } else if wrapper {
                // incr_refcount_allow_zero2one_with_wrapper
                assert!(node.delivery.should_push_strong_zero2one());
                node.delivery.has_pushed_wrapper = true;
                node.delivery.has_strong_zero2one = true;
                Some(Work::Wrapper(n))
            } else {
                node.strong.count -= 1;
                return Err(());
            }
        } else {
            None
        };
        if let Some(work) = push {
            self.push_thread_work_deferred(thread, work);
        }
        let s = usize::from(strong);
        Ok(NodeRef {
            node: n,
            strong_node_count: s,
            weak_node_count: 1 - s,
            strong_count: s,
            weak_count: 1 - s,
        })
    }

    /// `Node::update_refcount_locked` then `update_node_refcount`'s push
    /// (to `thread` deferred, or to the owner).
    fn update_node_refcount(
        &mut self,
        n: NodeIdx,
        inc: bool,
        strong: bool,
        count: usize,
        thread: Option<ThreadIdx>,
    ) {
        let owner = self.nodes[n].owner;
        let is_dead = self.procs[owner.index()].is_dead;
        let node = &mut self.nodes[n];
        let state = if strong {
            &mut node.strong
        } else {
            &mut node.weak
        };
        let need_push = if inc {
            state.count += count;
            !is_dead && !state.has_count
        } else {
            if state.count < count {
                self.log.push(Log::RefcountUnderflow);
                return;
            }
            state.count -= count;
            !is_dead && state.count == 0 && state.has_count
        };
        if need_push && node.delivery.should_normal_push() {
            node.delivery.has_pushed_node = true;
            match thread {
                Some(t) => self.push_thread_work_deferred(t, Work::Node(n)),
                None => {
                    // Refused when the owner is dead: it no longer cares.
                    let _ = self.push_work(owner, Work::Node(n));
                }
            }
        }
    }

    /// `ProcessInner::new_node_ref`.
    fn new_node_ref(&mut self, n: NodeIdx, strong: bool) -> NodeRef {
        self.update_node_refcount(n, true, strong, 1, None);
        let s = usize::from(strong);
        NodeRef {
            node: n,
            strong_node_count: s,
            weak_node_count: 1 - s,
            strong_count: s,
            weak_count: 1 - s,
        }
    }

    /// `impl Drop for NodeRef`.
    fn drop_node_ref(&mut self, r: NodeRef) {
        if r.strong_node_count > 0 {
            self.update_node_refcount(r.node, false, true, r.strong_node_count, None);
        }
        if r.weak_node_count > 0 {
            self.update_node_refcount(r.node, false, false, r.weak_node_count, None);
        }
    }

    /// `NodeRef::clone`.
    fn clone_node_ref(&mut self, r: &NodeRef, strong: bool) -> Result<NodeRef, Errno> {
        if strong && r.strong_count == 0 {
            self.log.push(Log::WeakAsStrong);
            return Err(Errno::Inval);
        }
        Ok(self.new_node_ref(r.node, strong))
    }

    /// `NodeRef::absorb`.
    fn absorb(&mut self, pid: Pid, handle: u32, other: NodeRef) {
        let info = self.procs[pid.index()]
            .infos
            .get_mut(&handle)
            .expect("the handle has an info");
        let me = &mut info.node_ref;
        assert_eq!(me.node, other.node, "absorb called with differing nodes");
        me.strong_node_count += other.strong_node_count;
        me.weak_node_count += other.weak_node_count;
        me.strong_count += other.strong_count;
        me.weak_count += other.weak_count;
        let n = me.node;
        let (s, w) = (me.strong_node_count, me.weak_node_count);
        if s >= 2 {
            me.strong_node_count = 1;
            self.nodes[n].strong.count -= s - 1;
            assert_ne!(self.nodes[n].strong.count, 0);
        }
        if w >= 2 {
            let me = &mut self.procs[pid.index()]
                .infos
                .get_mut(&handle)
                .unwrap()
                .node_ref;
            me.weak_node_count = 1;
            self.nodes[n].weak.count -= w - 1;
            assert_ne!(self.nodes[n].weak.count, 0);
        }
    }

    /// `NodeRef::update` on `pid`'s handle: whether it is to be removed.
    fn node_ref_update(&mut self, pid: Pid, handle: u32, inc: bool, strong: bool) -> bool {
        let r = &mut self.procs[pid.index()]
            .infos
            .get_mut(&handle)
            .expect("the handle has an info")
            .node_ref;
        if strong && r.strong_count == 0 {
            return false;
        }
        let n = r.node;
        let (count, node_count, other) = if strong {
            (&mut r.strong_count, &mut r.strong_node_count, r.weak_count)
        } else {
            (&mut r.weak_count, &mut r.weak_node_count, r.strong_count)
        };
        if inc {
            let zero = *count == 0;
            if zero {
                *node_count = 1;
            }
            *count += 1;
            if zero {
                self.update_node_refcount(n, true, strong, 1, None);
            }
            false
        } else {
            if *count == 0 {
                self.log.push(Log::InvalidDecrement { strong });
                return false;
            }
            *count -= 1;
            if *count == 0 {
                let dropped = *node_count;
                *node_count = 0;
                self.update_node_refcount(n, false, strong, dropped, None);
                return other == 0;
            }
            false
        }
    }

    // ---- the context manager ---------------------------------------------

    /// `Process::set_as_manager` with `Context::set_manager_node`: the
    /// node (pointer 0, or the `flat_binder_object`'s) is found or made
    /// with a strong `NodeRef` first, delivered to thread `t`.
    fn set_as_manager(
        &mut self,
        pid: Pid,
        t: ThreadIdx,
        fbo: Option<(u64, u64, NodeFlags)>,
    ) -> Result<(), Errno> {
        let (ptr, cookie, _flags) = fbo.unwrap_or((0, 0, NodeFlags::default()));
        let node_ref = self.get_node(t, ptr, cookie, true)?;
        if self.manager.is_some() {
            self.log.push(Log::ManagerAlreadySet);
            self.drop_node_ref(node_ref);
            return Err(Errno::Busy);
        }
        let euid = self.procs[pid.index()].euid;
        if let Some(uid) = self.manager_uid {
            if uid != euid {
                self.drop_node_ref(node_ref);
                return Err(Errno::Perm);
            }
        }
        let n = node_ref.node;
        self.manager = Some(node_ref);
        self.manager_uid = Some(euid);
        self.proc(pid).is_manager = true;
        // force_has_count
        self.nodes[n].strong.has_count = true;
        self.nodes[n].weak.has_count = true;
        Ok(())
    }

    /// `Context::get_manager_node`: `Err` is `BR_DEAD_REPLY` (no manager).
    fn get_manager_node(&mut self, strong: bool) -> Result<Result<NodeRef, Errno>, ()> {
        let Some(manager) = self.manager.as_ref() else {
            return Err(());
        };
        let (node, strong_count) = (manager.node, manager.strong_count);
        let probe = NodeRef {
            node,
            strong_node_count: 0,
            weak_node_count: 0,
            strong_count,
            weak_count: 0,
        };
        Ok(self.clone_node_ref(&probe, strong))
    }

    // ---- handles ---------------------------------------------------------

    /// `Process::insert_or_update_handle`.
    fn insert_or_update_handle(
        &mut self,
        pid: Pid,
        node_ref: NodeRef,
        is_manager: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<u32, Errno> {
        let op = Operation::attach(node_ref.node as NodeId, Manager::Is(is_manager));
        let outcome = drive(self, pid, op, windows);
        for warning in self.proc(pid).refs.drain_warnings() {
            match warning {
                Warning::Mismatch { warn_on, .. } => {
                    self.log.push(Log::PoolMismatch);
                    if warn_on {
                        self.log.push(Log::WarnOn);
                    }
                }
            }
        }
        let handle = match outcome {
            Ok(handle) => handle,
            Err(e) => {
                self.drop_node_ref(node_ref);
                return Err(match e {
                    Error::NoMemory => Errno::NoMem,
                    Error::DeadProcess => Errno::Srch,
                    Error::Mismatch { .. } => Errno::Inval,
                    other => unreachable!("the Rust insert does not fail with {other}"),
                });
            }
        };
        if self.procs[pid.index()].infos.contains_key(&handle) {
            self.absorb(pid, handle, node_ref);
        } else {
            let n = node_ref.node;
            self.proc(pid).infos.insert(
                handle,
                RefInfo {
                    node_ref,
                    death: None,
                    freeze: None,
                },
            );
            // insert_node_info
            self.nodes[n].refs.insert(0, (pid, handle));
        }
        Ok(handle)
    }

    /// `Process::get_node_from_handle`.
    fn get_node_from_handle(
        &mut self,
        pid: Pid,
        handle: u32,
        strong: bool,
    ) -> Result<NodeRef, Errno> {
        let Some(info) = self.procs[pid.index()].infos.get(&handle) else {
            return Err(Errno::NoEnt);
        };
        let probe = NodeRef {
            node: info.node_ref.node,
            strong_node_count: 0,
            weak_node_count: 0,
            strong_count: info.node_ref.strong_count,
            weak_count: info.node_ref.weak_count,
        };
        self.clone_node_ref(&probe, strong)
    }

    /// `Process::update_ref` (`BC_INCREFS`, `BC_ACQUIRE`, `BC_RELEASE`,
    /// `BC_DECREFS`).
    fn update_ref(
        &mut self,
        pid: Pid,
        handle: u32,
        inc: bool,
        strong: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(), Errno> {
        if inc && handle == 0 {
            if let Ok(Ok(node_ref)) = self.get_manager_node(strong) {
                if self.nodes[node_ref.node].owner == pid {
                    self.drop_node_ref(node_ref);
                    return Err(Errno::Inval);
                }
                let _ = self.insert_or_update_handle(pid, node_ref, true, windows);
                return Ok(());
            }
        }
        if !self.procs[pid.index()].infos.contains_key(&handle) {
            if !self.procs[pid.index()].is_dead {
                self.log.push(Log::InvalidRef(handle));
            }
            return Ok(());
        }
        if self.node_ref_update(pid, handle, inc, strong) {
            self.remove_info(pid, handle, windows);
        }
        Ok(())
    }

    /// The removal of a `NodeRefInfo` whose counts both reached 0, in
    /// `update_ref`: its death notification aborted, the node's list, both
    /// maps, the id and a shrink.
    fn remove_info(&mut self, pid: Pid, handle: u32, windows: &mut dyn Windows<Self>) {
        let info = self.proc(pid).infos.remove(&handle).expect("an info");
        if let Some(d) = info.death {
            self.set_cleared(d, true);
            self.proc(pid).delivered_deaths.retain(|x| *x != d);
        }
        self.nodes[info.node_ref.node]
            .refs
            .retain(|x| *x != (pid, handle));
        if let Some(cookie) = info.freeze {
            if let Some(listener) = self.proc(pid).freeze_listeners.remove(&cookie) {
                self.on_process_cleanup(pid, &listener);
            }
        }
        // The NodeRef's node counts are already 0: dropping it does nothing.
        self.drop_node_ref(info.node_ref);
        match drive(
            self,
            pid,
            Operation::new(Request::Decrement(handle)),
            windows,
        ) {
            Ok(_) => {}
            Err(e) => unreachable!("the table holds handle {handle}: {e}"),
        }
    }

    // ---- death notifications ----------------------------------------------

    /// `Process::request_death`.
    fn request_death(&mut self, pid: Pid, handle: u32, cookie: u64) {
        let Some(info) = self.procs[pid.index()].infos.get(&handle) else {
            self.log.push(Log::DeathInvalidRef { request: true });
            return;
        };
        if info.death.is_some() {
            self.log.push(Log::DeathAlreadySet);
            return;
        }
        let n = info.node_ref.node;
        let d = self.deaths.len();
        self.deaths.push(Death {
            node: n,
            process: pid,
            cookie,
            dead: false,
            cleared: false,
            notification_done: false,
            aborted: false,
        });
        self.proc(pid).infos.get_mut(&handle).unwrap().death = Some(d);
        let owner = self.nodes[n].owner;
        if self.procs[owner.index()].is_dead {
            self.set_dead(d);
        } else {
            self.nodes[n].death_list.push(d);
        }
    }

    /// `Process::clear_death` from thread `t`.
    fn clear_death(&mut self, t: ThreadIdx, handle: u32, cookie: u64) {
        let pid = self.threads[t].pid;
        let Some(info) = self.procs[pid.index()].infos.get_mut(&handle) else {
            self.log.push(Log::DeathInvalidRef { request: false });
            return;
        };
        let Some(d) = info.death.take() else {
            self.log.push(Log::DeathNotActive);
            return;
        };
        if self.deaths[d].cookie != cookie {
            self.proc(pid).infos.get_mut(&handle).unwrap().death = Some(d);
            self.log.push(Log::DeathCookieMismatch);
            return;
        }
        if self.set_cleared(d, false) && !self.in_a_list(pid, Work::Death(d)) {
            self.push_work_if_looper(t, Work::Death(d));
        }
    }

    /// `NodeDeath::set_cleared`: whether it needs to be queued.
    fn set_cleared(&mut self, d: DeathIdx, abort: bool) -> bool {
        let death = &mut self.deaths[d];
        if abort {
            death.aborted = true;
        }
        if death.cleared {
            return false;
        }
        death.cleared = true;
        let (needs_removal, needs_queueing) = (!death.dead, !death.dead || death.notification_done);
        if needs_removal {
            let n = death.node;
            self.nodes[n].death_list.retain(|x| *x != d);
        }
        needs_queueing
    }

    /// `NodeDeath::set_dead`.
    fn set_dead(&mut self, d: DeathIdx) {
        let death = &mut self.deaths[d];
        if death.cleared {
            return;
        }
        death.dead = true;
        let process = death.process;
        if !self.in_a_list(process, Work::Death(d)) {
            let _ = self.push_work(process, Work::Death(d));
        }
    }

    /// `Process::dead_binder_done` with `NodeDeath::set_notification_done`,
    /// from thread `t`.
    fn dead_binder_done(&mut self, t: ThreadIdx, cookie: u64) {
        let pid = self.threads[t].pid;
        let p = &self.procs[pid.index()];
        let Some(pos) = p
            .delivered_deaths
            .iter()
            .position(|&d| self.deaths[d].cookie == cookie)
        else {
            return;
        };
        let d = self.proc(pid).delivered_deaths.remove(pos);
        self.deaths[d].notification_done = true;
        if self.deaths[d].cleared && !self.in_a_list(pid, Work::Death(d)) {
            self.push_work_if_looper(t, Work::Death(d));
        }
    }

    // ---- node info ---------------------------------------------------------

    /// `Process::get_node_info_from_ref`.
    fn get_node_info_from_ref(&mut self, pid: Pid, handle: u32) -> Ret {
        if !self.procs[pid.index()].is_manager {
            return Ret::Err(Errno::Perm);
        }
        let Some(info) = self.procs[pid.index()].infos.get(&handle) else {
            return Ret::Err(Errno::NoEnt);
        };
        let node = &self.nodes[info.node_ref.node];
        Ret::NodeInfo {
            strong: node.strong.count as u32,
            weak: node.weak.count as u32,
        }
    }

    /// `Process::inc_ref_done` with `Node::inc_ref_done_locked`.
    fn inc_ref_done(&mut self, pid: Pid, ptr: u64, cookie: u64) {
        let Some(&n) = self.procs[pid.index()].nodes.get(&ptr) else {
            return;
        };
        if self.nodes[n].cookie != cookie {
            return;
        }
        let node = &mut self.nodes[n];
        if node.active_inc_refs == 0 {
            self.log.push(Log::IncRefDoneUnexpected);
            return;
        }
        node.active_inc_refs -= 1;
        if node.active_inc_refs == 0 {
            let strong = node.strong.count > 0;
            let weak = strong || node.weak.count > 0;
            let drop_weak = !weak && node.weak.has_count;
            let drop_strong = !strong && node.strong.has_count;
            if (drop_weak || drop_strong) && node.delivery.should_normal_push() {
                node.delivery.has_pushed_node = true;
                // "This only fails if the process is dead."
                let _ = self.push_work(pid, Work::Node(n));
            }
        }
    }

    /// `Process::get_node_debug_info`: the first node of the caller's with
    /// a pointer above `ptr` (all 0 when none).
    fn get_node_debug_info(&mut self, pid: Pid, ptr: u64) -> Ret {
        let next = self.procs[pid.index()]
            .nodes
            .iter()
            .find(|(&node_ptr, _)| node_ptr > ptr);
        match next {
            Some((_, &n)) => {
                let node = &self.nodes[n];
                Ret::NodeDebug {
                    ptr: node.ptr,
                    cookie: node.cookie,
                    has_strong: node.strong.has_count,
                    has_weak: node.weak.has_count,
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

    // ---- freezing ----------------------------------------------------------

    /// A new `FreezeMessage` for the listener `cookie`.
    fn freeze_message(&mut self, cookie: u64) -> Work {
        self.items += 1;
        Work::Freeze {
            id: self.items,
            cookie,
        }
    }

    /// `Process::request_freeze_notif` (freeze.rs:177-268).
    fn request_freeze_notif(&mut self, pid: Pid, handle: u32, cookie: u64) -> Result<(), Errno> {
        let Some(info) = self.procs[pid.index()].infos.get(&handle) else {
            self.log.push(Log::FreezeInvalidRef { request: true });
            return Err(Errno::Inval);
        };
        if info.freeze.is_some() {
            self.log.push(Log::FreezeAlreadySet);
            return Err(Errno::Inval);
        }
        let n = info.node_ref.node;
        let p = self.proc(pid);
        if let Some(dupe) = p.freeze_listeners.get(&cookie) {
            // allow_duplicate: the same node, and already cleared.
            if !(dupe.node == n && dupe.is_clearing) {
                self.log.push(Log::FreezeDuplicateCookie);
                return Err(Errno::Inval);
            }
        }
        // Node::add_freeze_listener.
        self.nodes[n].freeze_list.push(pid);
        let p = self.proc(pid);
        match p.freeze_listeners.get_mut(&cookie) {
            None => {
                p.freeze_listeners.insert(
                    cookie,
                    FreezeListener {
                        node: n,
                        last_is_frozen: None,
                        is_pending: false,
                        is_clearing: false,
                        num_pending_duplicates: 0,
                        num_cleared_duplicates: 0,
                    },
                );
            }
            Some(dupe) => {
                if dupe.is_pending {
                    dupe.num_pending_duplicates += 1;
                } else {
                    dupe.num_cleared_duplicates += 1;
                }
                dupe.last_is_frozen = None;
                dupe.is_pending = false;
                dupe.is_clearing = false;
            }
        }
        p.infos.get_mut(&handle).expect("looked up").freeze = Some(cookie);
        let msg = self.freeze_message(cookie);
        let _ = self.push_work(pid, msg);
        Ok(())
    }

    /// `Process::freeze_notif_done` (freeze.rs:270-311).
    fn freeze_notif_done(&mut self, pid: Pid, cookie: u64) -> Result<(), Errno> {
        let Some(freeze) = self.procs[pid.index()].freeze_listeners.get(&cookie) else {
            self.log.push(Log::FreezeDoneNotFound);
            return Err(Errno::Inval);
        };
        let owner = self.nodes[freeze.node].owner;
        let is_frozen = self.procs[owner.index()].is_frozen.is_fully_frozen();
        let freeze = self
            .proc(pid)
            .freeze_listeners
            .get_mut(&cookie)
            .expect("looked up");
        let mut resend = false;
        if freeze.num_pending_duplicates > 0 {
            resend = true;
            freeze.num_pending_duplicates -= 1;
            freeze.num_cleared_duplicates += 1;
        } else {
            if !freeze.is_pending {
                // "BC_FREEZE_NOTIFICATION_DONE ... not pending"
                self.log.push(Log::FreezeDoneNotFound);
                return Err(Errno::Inval);
            }
            if freeze.is_clearing || freeze.last_is_frozen != Some(is_frozen) {
                resend = true;
            }
            freeze.is_pending = false;
        }
        if resend {
            let msg = self.freeze_message(cookie);
            let _ = self.push_work(pid, msg);
        }
        Ok(())
    }

    /// `Process::clear_freeze_notif` (freeze.rs:313-368).
    fn clear_freeze_notif(&mut self, pid: Pid, handle: u32, cookie: u64) -> Result<(), Errno> {
        let Some(info) = self.procs[pid.index()].infos.get(&handle) else {
            self.log.push(Log::FreezeInvalidRef { request: false });
            return Err(Errno::Inval);
        };
        let Some(info_cookie) = info.freeze else {
            self.log.push(Log::FreezeNotActive);
            return Err(Errno::Inval);
        };
        if info_cookie != cookie {
            self.log.push(Log::FreezeCookieMismatch);
            return Err(Errno::Inval);
        }
        let Some(listener) = self.proc(pid).freeze_listeners.get_mut(&cookie) else {
            // "BC_CLEAR_FREEZE_NOTIFICATION invalid cookie": the listener
            // goes with the info.
            return Err(Errno::Inval);
        };
        listener.is_clearing = true;
        let (n, pending) = (listener.node, listener.is_pending);
        self.remove_freeze_listener(n, pid);
        self.proc(pid)
            .infos
            .get_mut(&handle)
            .expect("looked up")
            .freeze = None;
        if !pending {
            let msg = self.freeze_message(cookie);
            let _ = self.push_work(pid, msg);
        }
        Ok(())
    }

    /// `Node::remove_freeze_listener`.
    fn remove_freeze_listener(&mut self, n: NodeIdx, pid: Pid) {
        self.nodes[n].freeze_list.retain(|p| *p != pid);
    }

    /// `FreezeListener::on_process_cleanup`.
    fn on_process_cleanup(&mut self, pid: Pid, listener: &FreezeListener) {
        if !listener.is_clearing {
            self.remove_freeze_listener(listener.node, pid);
        }
    }

    /// `FreezeMessage::do_work` (freeze.rs:84-140): whether to go on.
    fn freeze_message_work(&mut self, pid: Pid, cookie: u64, out: &mut Vec<Br>) -> bool {
        let Some(freeze) = self.procs[pid.index()].freeze_listeners.get(&cookie) else {
            return true;
        };
        let owner = self.nodes[freeze.node].owner;
        let is_frozen = self.procs[owner.index()].is_frozen.is_fully_frozen();
        let p = self.proc(pid);
        let freeze = p.freeze_listeners.get_mut(&cookie).expect("looked up");
        if freeze.num_cleared_duplicates > 0 {
            freeze.num_cleared_duplicates -= 1;
            out.push(Br::ClearFreezeDone(cookie));
            return true;
        }
        if freeze.is_pending {
            return true;
        }
        if freeze.is_clearing {
            if freeze.num_pending_duplicates > 0 {
                freeze.num_pending_duplicates -= 1;
                freeze.is_pending = true;
                freeze.is_clearing = true;
            } else {
                p.freeze_listeners.remove(&cookie);
            }
            out.push(Br::ClearFreezeDone(cookie));
            true
        } else {
            if freeze.last_is_frozen == Some(is_frozen) {
                return true;
            }
            freeze.is_pending = true;
            freeze.last_is_frozen = Some(is_frozen);
            out.push(Br::FrozenBinder {
                cookie,
                frozen: is_frozen,
            });
            false
        }
    }

    /// `prepare_freeze_messages` then `send_messages`: a message for every
    /// process listening on a node of `pid`'s, by node.
    fn send_freeze_messages(&mut self, pid: Pid) {
        let nodes: Vec<NodeIdx> = self.procs[pid.index()].nodes.values().copied().collect();
        let mut batch = Vec::new();
        for n in nodes {
            for &listener in &self.nodes[n].freeze_list {
                // get_freeze_cookie: the listener's reference to the node.
                let cookie = self.procs[listener.index()]
                    .infos
                    .values()
                    .find(|info| info.node_ref.node == n)
                    .and_then(|info| info.freeze);
                if let Some(cookie) = cookie {
                    batch.push((listener, cookie));
                }
            }
        }
        for (listener, cookie) in batch {
            let msg = self.freeze_message(cookie);
            let _ = self.push_work(listener, msg);
        }
    }

    /// `ProcessInner::txns_pending_locked`.
    fn txns_pending(&self, pid: Pid) -> bool {
        let p = &self.procs[pid.index()];
        p.outstanding_txns > 0
            || p.threads
                .values()
                .any(|&t| self.threads[t].current_transaction.is_some())
    }

    /// The processes of the context whose task has `target`'s task's pid
    /// (`Context::get_procs_with_pid`, context.rs:165-174), in the order
    /// of `all_procs`: `register_process` pushes each new process at the
    /// end (context.rs:86), so the first opened comes first. `target`
    /// itself may have exited while another open of its task lives.
    fn procs_with_pid_of(&self, target: Pid) -> Vec<Pid> {
        let task = self.procs[target.index()].task;
        (0..self.procs.len() as u8)
            .map(Pid)
            .filter(|&p| self.procs[p.index()].open && self.procs[p.index()].task == task)
            .collect()
    }

    /// `BINDER_FREEZE` (`ioctl_freeze`, process.rs:1634-1653): every
    /// process with the pid, none at all being no error, each one frozen
    /// in turn until one fails (`proc.ioctl_freeze(&info)?`, 1648): the
    /// ones before it stay frozen or thawed, the ones after it are not
    /// touched.
    fn ioctl_freeze(&mut self, target: Pid, enable: bool) -> Result<Ret, Errno> {
        for p in self.procs_with_pid_of(target) {
            self.process_ioctl_freeze(p, enable)?;
        }
        Ok(Ret::Ok)
    }

    /// `Process::ioctl_freeze` (process.rs:1534-1593). No transaction ends
    /// while the caller waits.
    fn process_ioctl_freeze(&mut self, target: Pid, enable: bool) -> Result<(), Errno> {
        let p = self.proc(target);
        p.sync_recv = false;
        p.async_recv = false;
        if !enable {
            p.is_frozen = IsFrozen::No;
            self.send_freeze_messages(target);
            return Ok(());
        }
        p.is_frozen = IsFrozen::InProgress;
        if self.txns_pending(target) {
            self.proc(target).is_frozen = IsFrozen::No;
            return Err(Errno::Again);
        }
        self.proc(target).is_frozen = IsFrozen::Yes;
        self.send_freeze_messages(target);
        Ok(())
    }

    /// `BINDER_GET_FROZEN_INFO` (`get_frozen_status`, process.rs:1605-1632):
    /// every process with the pid adds its bits; none is `EINVAL`.
    fn get_frozen_status(&self, target: Pid) -> Ret {
        let procs = self.procs_with_pid_of(target);
        if procs.is_empty() {
            return Ret::Err(Errno::Inval);
        }
        let (mut sync_recv, mut async_recv) = (0, 0);
        for p in procs {
            let pending = u32::from(self.txns_pending(p));
            async_recv |= u32::from(self.procs[p.index()].async_recv);
            sync_recv |= u32::from(self.procs[p.index()].sync_recv) | pending << 1;
        }
        Ret::FrozenInfo {
            sync_recv,
            async_recv,
        }
    }

    // ---- transactions ------------------------------------------------------

    /// `Thread::transaction` from thread `t`: a transaction to handle `to`
    /// (one-way or a call) or a reply (`to` is `None`); a failure queues
    /// the thread's return work and, when it has a source, sets the
    /// extended error and prints the failed-transaction line.
    fn transaction(
        &mut self,
        t: ThreadIdx,
        to: Option<u32>,
        oneway: bool,
        payload: &Payload,
        windows: &mut dyn Windows<Self>,
    ) {
        let debug_id = self.next_debug_id();
        // clear_extended_error
        self.threads[t].extended_error = Ee {
            id: debug_id,
            command: br_code::OK,
            param: 0,
        };
        let ret = match to {
            None => self.reply_inner(t, debug_id, payload, windows),
            Some(to) if oneway => self.oneway_transaction_inner(t, to, payload, windows),
            Some(to) => self.transaction_inner(t, to, payload, windows),
        };
        if let Err(err) = ret {
            self.push_return_work(t, err.reply);
            if err.reply != br_code::TRANSACTION_COMPLETE {
                if let Some(source) = err.source {
                    self.threads[t].extended_error = Ee {
                        id: debug_id,
                        command: err.reply,
                        param: -source.code(),
                    };
                    self.log.push(Log::TransactionFailed);
                }
            }
        }
    }

    /// `Process::get_transaction_node`.
    fn get_transaction_node(&mut self, pid: Pid, handle: u32) -> Result<NodeRef, BinderError> {
        if handle == 0 {
            let node_ref = match self.get_manager_node(true) {
                Err(()) => return Err(BinderError::dead()),
                Ok(Err(e)) => return Err(BinderError::from(e)),
                Ok(Ok(node_ref)) => node_ref,
            };
            // `core::ptr::eq(self, &*node_ref.node.owner)` (process.rs:928):
            // the manager's own process only, not another open by its task.
            if self.nodes[node_ref.node].owner == pid {
                self.drop_node_ref(node_ref);
                return Err(BinderError::from(Errno::Inval));
            }
            Ok(node_ref)
        } else {
            self.get_node_from_handle(pid, handle, true).map_err(|e| {
                self.log.push(Log::TransactionToInvalidHandle(handle));
                BinderError::from(e)
            })
        }
    }

    /// `Thread::copy_transaction_data` into a new allocation of process
    /// `to`: the buffer first (none once its mapping is gone), then every
    /// object translated by thread `t`. On a failure the allocation is
    /// dropped (releasing what was translated).
    fn copy_transaction_data(
        &mut self,
        t: ThreadIdx,
        to: Pid,
        payload: &Payload,
        is_oneway: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(usize, bool), BinderError> {
        let sender = self.threads[t].pid;
        let size = super::c::buffer_size(payload);
        let spam = match self.buffer_alloc(to, size, is_oneway, sender) {
            Ok(spam) => spam,
            Err(e) => {
                self.log.push(Log::BufferAllocFailed);
                return Err(e);
            }
        };
        let buffer = self.buffers.len();
        self.buffers.push(Buffer {
            to,
            target_node: None,
            oneway_node: None,
            objects: Vec::new(),
            size,
            is_oneway,
            sender,
            reserved: true,
        });
        for object in payload.objects.iter().flat_map(Object::expand) {
            match self.translate_object(t, to, object, windows) {
                Ok(received) => self.buffers[buffer].objects.push(received),
                Err(e) => {
                    self.log.push(Log::TranslateFailed);
                    self.drop_allocation(buffer, windows);
                    return Err(BinderError::from(e));
                }
            }
        }
        Ok((buffer, spam))
    }

    /// `Process::buffer_alloc` with the range allocator's `reserve_new`
    /// (range_alloc/array.rs:114-158, tree.rs the same): no mapping is a
    /// dead target; a one-way buffer must fit in what is left of the
    /// one-way half (`ENOSPC`); whether its sender looks like a one-way
    /// spammer: less than a tenth of the space left, and the sender holding
    /// more than 50 one-way buffers or a quarter of the space
    /// (`low_oneway_space`), every time. The whole space is never short
    /// here: the language's transactions are too few and small to fill it.
    fn buffer_alloc(
        &mut self,
        to: Pid,
        size: usize,
        is_oneway: bool,
        sender: Pid,
    ) -> Result<bool, BinderError> {
        if self.procs[to.index()].unmapped {
            return Err(BinderError::dead());
        }
        if !is_oneway {
            return Ok(false);
        }
        let Some(free) = self.procs[to.index()].free_oneway_space.checked_sub(size) else {
            return Err(BinderError::from(Errno::NoSpc));
        };
        self.proc(to).free_oneway_space = free;
        if free >= MAP_SIZE / 10 {
            return Ok(false);
        }
        let held: Vec<usize> = self
            .buffers
            .iter()
            // The range's `pid`, `info.from_pid = self.process.task.pid()`
            // (thread.rs:1280; range_alloc/array.rs:175): every open of
            // the sender's task counts.
            .filter(|b| {
                b.reserved
                    && b.to == to
                    && b.is_oneway
                    && self.procs[b.sender.index()].task == self.procs[sender.index()].task
            })
            .map(|b| b.size)
            .collect();
        // The new range is in the allocator already.
        let (count, total) = (held.len() + 1, held.iter().sum::<usize>() + size);
        Ok(count > 50 || total > MAP_SIZE / 4)
    }

    /// `Transaction::new`: the allocation, with the target node's
    /// `NodeRef` (and, for one-way, the node) in its info.
    fn new_transaction(
        &mut self,
        t: ThreadIdx,
        node_ref: NodeRef,
        from_parent: Option<TxnIdx>,
        payload: &Payload,
        oneway: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(TxnIdx, bool), BinderError> {
        let n = node_ref.node;
        let to = self.nodes[n].owner;
        let (buffer, spam) = match self.copy_transaction_data(t, to, payload, oneway, windows) {
            Ok(allocated) => allocated,
            Err(err) => {
                if err.reply != br_code::DEAD_REPLY {
                    self.log.push(Log::CopyFailed);
                }
                self.drop_node_ref(node_ref);
                return Err(err);
            }
        };
        if oneway {
            self.buffers[buffer].oneway_node = Some(n);
        }
        self.buffers[buffer].target_node = Some(node_ref);
        let sender = self.threads[t].pid;
        self.txns.push(Txn {
            from: t,
            from_parent,
            to,
            target_node: Some(n),
            allocation: Some(buffer),
            is_outstanding: false,
            oneway,
            flags: payload.flags,
            sender,
            dropped: false,
        });
        Ok((self.txns.len() - 1, spam))
    }

    /// `Thread::oneway_transaction_inner`.
    fn oneway_transaction_inner(
        &mut self,
        t: ThreadIdx,
        to: u32,
        payload: &Payload,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(), BinderError> {
        let pid = self.threads[t].pid;
        let node_ref = self.get_transaction_node(pid, to)?;
        let (txn, spam) = self.new_transaction(t, node_ref, None, payload, true, windows)?;
        // The completion is pushed before the submit, and skipped if it
        // fails.
        let spam = spam && self.procs[pid.index()].oneway_spam_detection_enabled;
        let completion = self.completion(spam);
        let _ = self.push_thread_work(t, completion);
        match self.submit(txn) {
            Ok(()) => Ok(()),
            Err(err) => {
                self.skip(t, completion);
                Err(err)
            }
        }
    }

    /// `Thread::top_of_transaction_stack`: `Err` when the thread waits for
    /// the reply to its own transaction.
    fn top_of_transaction_stack(&mut self, t: ThreadIdx) -> Result<Option<TxnIdx>, Errno> {
        match self.threads[t].current_transaction {
            Some(cur) if self.txns[cur].from == t => {
                self.log.push(Log::CallBadStack);
                Err(Errno::Inval)
            }
            cur => Ok(cur),
        }
    }

    /// `Thread::transaction_inner`: a call.
    fn transaction_inner(
        &mut self,
        t: ThreadIdx,
        to: u32,
        payload: &Payload,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(), BinderError> {
        let pid = self.threads[t].pid;
        let node_ref = self.get_transaction_node(pid, to)?;
        let top = match self.top_of_transaction_stack(t) {
            Ok(top) => top,
            Err(e) => {
                self.drop_node_ref(node_ref);
                return Err(BinderError::from(e));
            }
        };
        let completion = self.completion(false);
        let (txn, _) = self.new_transaction(t, node_ref, top, payload, false, windows)?;
        // is_stacked_on holds: nothing else ran since.
        self.threads[t].current_transaction = Some(txn);
        self.push_thread_work_deferred(t, completion);
        if let Err(e) = self.submit(txn) {
            self.skip(t, completion);
            self.threads[t].current_transaction = self.txns[txn].from_parent;
            self.drop_transaction(txn, windows);
            return Err(e);
        }
        Ok(())
    }

    /// `Transaction::submit` (transaction.rs:337-418), not for replies: the
    /// transaction counts as outstanding in its target; a one-way one goes
    /// to its node, a call to the thread of the target process in the
    /// caller's stack, or to the process.
    fn submit(&mut self, txn: TxnIdx) -> Result<(), BinderError> {
        let to = self.txns[txn].to;
        self.set_outstanding(txn, to);
        let frozen = self.procs[to.index()].is_frozen.is_frozen();
        if self.txns[txn].oneway {
            let n = self.txns[txn]
                .target_node
                .expect("a one-way transaction has a node");
            if frozen {
                self.proc(to).async_recv = true;
                if self.txns[txn].flags.has(TxnFlags::UPDATE_TXN) {
                    if let Some(old) = self.take_outdated_transaction(n, txn) {
                        // Its allocation forgets the one-way node: no
                        // pending_oneway_finished for it.
                        if let Some(b) = self.txns[old].allocation {
                            self.buffers[b].oneway_node = None;
                        }
                        let mut none = super::Sequential;
                        self.drop_transaction(old, &mut none);
                    }
                }
            }
            if self.submit_oneway(n, txn).is_err() {
                let mut none = super::Sequential;
                self.drop_transaction(txn, &mut none);
                return Err(BinderError::dead());
            }
            if self.procs[to.index()].is_frozen.is_frozen() {
                return Err(BinderError::frozen_oneway());
            }
            return Ok(());
        }
        if frozen {
            self.proc(to).sync_recv = true;
            let mut none = super::Sequential;
            self.drop_transaction(txn, &mut none);
            return Err(BinderError::frozen());
        }
        let pushed = match self.find_target_thread(txn) {
            Some(thread) => self.push_thread_work(thread, Work::Transaction(txn)),
            None => self.push_work(to, Work::Transaction(txn)),
        };
        if pushed.is_err() {
            let mut none = super::Sequential;
            self.drop_transaction(txn, &mut none);
            return Err(BinderError::dead());
        }
        Ok(())
    }

    /// `Transaction::find_target_thread`: the sender of a transaction down
    /// the stack that belongs to the target process.
    fn find_target_thread(&self, txn: TxnIdx) -> Option<ThreadIdx> {
        let to = self.txns[txn].to;
        let mut it = self.txns[txn].from_parent;
        while let Some(x) = it {
            let from = self.txns[x].from;
            if self.threads[from].pid == to {
                return Some(from);
            }
            it = self.txns[x].from_parent;
        }
        None
    }

    /// `Node::take_outdated_transaction` with `Transaction::can_replace`:
    /// a one-way transaction waiting on node `n` that `txn` supersedes.
    fn take_outdated_transaction(&mut self, n: NodeIdx, txn: TxnIdx) -> Option<TxnIdx> {
        let new = &self.txns[txn];
        // `self.from.process.task.pid() != old.from.process.task.pid()`
        // (transaction.rs:425): any open of the sender's task.
        let task = |t: &Txn| self.procs[t.sender.index()].task;
        let pos = self.nodes[n].oneway_todo.iter().position(|&old| {
            let old = &self.txns[old];
            task(old) == task(new)
                && old.flags.has(TxnFlags::UPDATE_TXN)
                && new.flags.has(TxnFlags::UPDATE_TXN)
                && old.flags == new.flags
        })?;
        self.nodes[n].oneway_todo.remove(pos)
    }

    /// `Transaction::set_outstanding`.
    fn set_outstanding(&mut self, txn: TxnIdx, to: Pid) {
        if !self.txns[txn].is_outstanding {
            self.txns[txn].is_outstanding = true;
            self.proc(to).outstanding_txns += 1;
        }
    }

    /// `Transaction::drop_outstanding_txn`.
    fn drop_outstanding_txn(&mut self, txn: TxnIdx) {
        if self.txns[txn].is_outstanding {
            self.txns[txn].is_outstanding = false;
            let to = self.txns[txn].to;
            let p = self.proc(to);
            if p.outstanding_txns == 0 {
                // "outstanding_txns underflow": not compared.
                return;
            }
            p.outstanding_txns -= 1;
        }
    }

    /// The last reference to a transaction goes: `drop_outstanding_txn`
    /// and its allocation, if it still has one, dropped.
    fn drop_transaction(&mut self, txn: TxnIdx, windows: &mut dyn Windows<Self>) {
        if self.txns[txn].dropped {
            return;
        }
        self.txns[txn].dropped = true;
        self.drop_outstanding_txn(txn);
        if let Some(b) = self.txns[txn].allocation.take() {
            self.drop_allocation(b, windows);
        }
    }

    /// `Node::submit_oneway`: `Err` when the owner is dead.
    fn submit_oneway(&mut self, n: NodeIdx, txn: TxnIdx) -> Result<(), ()> {
        let owner = self.nodes[n].owner;
        if self.procs[owner.index()].is_dead {
            return Err(());
        }
        if self.nodes[n].has_oneway_transaction {
            self.nodes[n].oneway_todo.push_back(txn);
            Ok(())
        } else {
            self.nodes[n].has_oneway_transaction = true;
            self.push_work(owner, Work::Transaction(txn))
        }
    }

    /// `InnerThread::pop_transaction_to_reply`: the transaction thread `t`
    /// received last; its current transaction becomes the one it sent
    /// below it, if any.
    fn pop_transaction_to_reply(&mut self, t: ThreadIdx) -> Result<TxnIdx, Errno> {
        let txn = self.threads[t].current_transaction.ok_or(Errno::Inval)?;
        if self.txns[txn].from == t {
            return Err(Errno::Inval);
        }
        self.threads[t].current_transaction = self.find_from(txn, t);
        Ok(txn)
    }

    /// `Transaction::find_from`.
    fn find_from(&self, txn: TxnIdx, t: ThreadIdx) -> Option<TxnIdx> {
        let mut it = self.txns[txn].from_parent;
        while let Some(x) = it {
            if self.txns[x].from == t {
                return Some(x);
            }
            it = self.txns[x].from_parent;
        }
        None
    }

    /// `Thread::reply_inner` (thread.rs:1399-1455).
    fn reply_inner(
        &mut self,
        t: ThreadIdx,
        debug_id: u32,
        payload: &Payload,
        windows: &mut dyn Windows<Self>,
    ) -> Result<(), BinderError> {
        let orig = match self.pop_transaction_to_reply(t) {
            Ok(orig) => orig,
            Err(e) => {
                self.log.push(Log::ReplyNoStack);
                return Err(BinderError::from(e));
            }
        };
        let caller = self.txns[orig].from;
        if self.threads[caller].current_transaction != Some(orig) {
            self.log.push(Log::ReplyBadStack);
            // orig is dropped.
            self.drop_transaction(orig, windows);
            return Err(BinderError::from(Errno::Inval));
        }
        let caller_proc = self.threads[caller].pid;
        let built = self.copy_transaction_data(t, caller_proc, payload, false, windows);
        match built {
            Ok((buffer, _)) => {
                let completion = self.completion(false);
                let _ = self.push_thread_work(t, completion);
                let sender = self.threads[t].pid;
                self.txns.push(Txn {
                    from: t,
                    from_parent: None,
                    to: caller_proc,
                    target_node: None,
                    allocation: Some(buffer),
                    is_outstanding: false,
                    oneway: false,
                    flags: payload.flags,
                    sender,
                    dropped: false,
                });
                let reply = self.txns.len() - 1;
                self.deliver_reply(caller, Ok(reply), orig, None, windows);
                self.drop_transaction(orig, windows);
                Ok(())
            }
            Err(mut err) => {
                // Transaction::new_reply prints every failed copy.
                self.log.push(Log::CopyFailed);
                self.log.push(Log::ReplyFailed);
                let param = err.source.map_or(0, |e| -e.code());
                let ee = Ee {
                    id: debug_id,
                    command: err.reply,
                    param,
                };
                self.deliver_reply(caller, Err(br_code::FAILED_REPLY), orig, Some(ee), windows);
                self.drop_transaction(orig, windows);
                err.reply = br_code::TRANSACTION_COMPLETE;
                Err(err)
            }
        }
    }

    /// `Thread::deliver_reply`: to the caller, then, if it is dead, down
    /// its stack.
    fn deliver_reply(
        &mut self,
        caller: ThreadIdx,
        reply: Result<TxnIdx, u32>,
        orig: TxnIdx,
        ee: Option<Ee>,
        windows: &mut dyn Windows<Self>,
    ) {
        if self.deliver_single_reply(caller, reply, orig, ee, windows) {
            self.unwind_transaction_stack(caller, windows);
        }
    }

    /// `Thread::deliver_single_reply` (thread.rs:1193-1233): whether the
    /// caller is dead (the reply is then dropped).
    fn deliver_single_reply(
        &mut self,
        caller: ThreadIdx,
        reply: Result<TxnIdx, u32>,
        orig: TxnIdx,
        ee: Option<Ee>,
        windows: &mut dyn Windows<Self>,
    ) -> bool {
        if let Ok(r) = reply {
            let to = self.threads[caller].pid;
            self.set_outstanding(r, to);
        }
        // pop_transaction_replied
        if self.threads[caller].current_transaction != Some(orig) {
            if let Ok(r) = reply {
                self.drop_transaction(r, windows);
            }
            return false;
        }
        self.threads[caller].current_transaction = self.txns[orig].from_parent;
        if self.threads[caller].is_dead {
            if let Ok(r) = reply {
                self.drop_transaction(r, windows);
            }
            return true;
        }
        if let Some(ee) = ee {
            if self.threads[caller].extended_error.command == br_code::OK {
                self.threads[caller].extended_error = ee;
            }
        }
        match reply {
            Ok(r) => {
                let _ = self.push_thread_work(caller, Work::Transaction(r));
            }
            Err(code) => {
                if self.threads[caller].reply_work.is_none() {
                    self.threads[caller].reply_work = Some(code);
                    let _ = self.push_thread_work(caller, Work::ReplyError(caller));
                }
            }
        }
        false
    }

    /// `Thread::unwind_transaction_stack`: a dead thread's received
    /// transactions are answered `BR_DEAD_REPLY`, down to a living caller.
    fn unwind_transaction_stack(&mut self, t: ThreadIdx, windows: &mut dyn Windows<Self>) {
        let mut thread = t;
        while let Ok(txn) = self.pop_transaction_to_reply(thread) {
            // "release transaction ... in, still active": not compared.
            let from = self.txns[txn].from;
            let dead =
                self.deliver_single_reply(from, Err(br_code::DEAD_REPLY), txn, None, windows);
            self.drop_transaction(txn, windows);
            if !dead {
                break;
            }
            thread = from;
        }
    }

    /// `Thread::translate_object` with `transfer_binder_object`, by thread
    /// `t` for process `target`.
    fn translate_object(
        &mut self,
        t: ThreadIdx,
        target: Pid,
        object: Object,
        windows: &mut dyn Windows<Self>,
    ) -> Result<Received, Errno> {
        let pid = self.threads[t].pid;
        let (node_ref, strong) = match object {
            Object::Node { ptr, strong } => (self.get_node(t, ptr, ptr, strong)?, strong),
            Object::Handle { handle, strong } => {
                (self.get_node_from_handle(pid, handle, strong)?, strong)
            }
            Object::Nodes { .. } => unreachable!("runs are expanded"),
        };
        let n = node_ref.node;
        if self.nodes[n].owner == target {
            self.update_node_refcount(n, true, strong, 1, None);
            self.drop_node_ref(node_ref);
            Ok(Received::Node {
                ptr: self.nodes[n].ptr,
                strong,
            })
        } else {
            let handle = self.insert_or_update_handle(target, node_ref, false, windows)?;
            Ok(Received::Handle { handle, strong })
        }
    }

    /// `impl Drop for Allocation`: the next one-way transaction, the target
    /// node's ref, then each object's; the range is freed.
    fn drop_allocation(&mut self, buffer: usize, windows: &mut dyn Windows<Self>) {
        let b = &mut self.buffers[buffer];
        if std::mem::take(&mut b.reserved) && b.is_oneway {
            let (to, size) = (b.to, b.size);
            self.proc(to).free_oneway_space += size;
        }
        if let Some(n) = self.buffers[buffer].oneway_node.take() {
            self.pending_oneway_finished(n);
        }
        if let Some(node_ref) = self.buffers[buffer].target_node.take() {
            self.drop_node_ref(node_ref);
        }
        let to = self.buffers[buffer].to;
        let objects = std::mem::take(&mut self.buffers[buffer].objects);
        for object in objects {
            match object {
                Received::Node { ptr, strong } => {
                    // Process::update_node
                    if let Some(&n) = self.procs[to.index()].nodes.get(&ptr) {
                        self.update_node_refcount(n, false, strong, 1, None);
                    }
                }
                Received::Handle { handle, strong } => {
                    let _ = self.update_ref(to, handle, false, strong, windows);
                }
            }
        }
    }

    /// `Node::pending_oneway_finished`.
    fn pending_oneway_finished(&mut self, n: NodeIdx) {
        let owner = self.nodes[n].owner;
        if self.procs[owner.index()].is_dead {
            return;
        }
        let next = self.nodes[n].oneway_todo.pop_front();
        self.nodes[n].has_oneway_transaction = next.is_some();
        if let Some(txn) = next {
            let _ = self.push_work(owner, Work::Transaction(txn));
        }
    }

    // ---- reading ------------------------------------------------------------

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
        for _ in 0..256 {
            if !self.poll(t) {
                return all;
            }
            let Some(read) = self.read(t) else {
                return all;
            };
            for br in &read {
                match *br {
                    Br::IncRefs(ptr) | Br::Acquire(ptr) => self.inc_ref_done(pid, ptr, ptr),
                    Br::DeadBinder(cookie) => self.dead_binder_done(t, cookie),
                    Br::FrozenBinder { cookie, .. } => {
                        // A failed answer fails its write, which nothing
                        // reads; "Write failure" is logged.
                        if let Err(e) = self.freeze_notif_done(pid, cookie) {
                            self.log.push(Log::IoctlFailed(e));
                        }
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

    /// `Process::poll` from thread `t` (`Thread::poll`): whether a read
    /// would return something.
    fn poll(&mut self, t: ThreadIdx) -> bool {
        let thread = &mut self.threads[t];
        let from_proc = thread.should_use_process_work_queue();
        thread.looper_flags |= looper::POLL;
        let mask = thread.process_work_list || thread.looper_need_return;
        let pid = thread.pid;
        mask || (from_proc && !self.procs[pid.index()].work.is_empty())
    }

    /// `InnerThread::pop_work`.
    fn pop_work(&mut self, t: ThreadIdx) -> Option<Work> {
        let thread = &mut self.threads[t];
        if !thread.process_work_list {
            return None;
        }
        let w = thread.work_list.pop_front();
        thread.process_work_list = !thread.work_list.is_empty();
        w
    }

    /// One non-blocking `Thread::read` of thread `t`: `None` for `EAGAIN`
    /// ("Read failure", logged by `Thread::write_read`).
    fn read(&mut self, t: ThreadIdx) -> Option<Vec<Br>> {
        let (in_pool, use_proc_queue) = {
            let thread = &self.threads[t];
            (thread.is_looper(), thread.should_use_process_work_queue())
        };
        let pid = self.threads[t].pid;
        let mut out = Vec::new();
        loop {
            // get_work or get_work_local, without waiting: EAGAIN once
            // the lists are empty.
            let work = match self.pop_work(t) {
                Some(w) => Some(w),
                None if use_proc_queue => self.proc(pid).work.pop_front(),
                None => None,
            };
            let Some(work) = work else {
                break;
            };
            if !self.do_work(t, work, &mut out) {
                break;
            }
        }
        if out.is_empty() {
            // Nothing written: the getter's EAGAIN comes back.
            self.log.push(Log::IoctlFailed(Errno::Again));
            return None;
        }
        if in_pool && self.needs_thread(pid) {
            out.insert(0, Br::SpawnLooper);
        }
        Some(out)
    }

    /// `Process::needs_thread`: no thread requested, none ready (ours
    /// never wait) and fewer than `max_threads` started.
    fn needs_thread(&mut self, pid: Pid) -> bool {
        let p = self.proc(pid);
        let ret = p.requested_thread_count == 0 && p.started_thread_count < p.max_threads;
        if ret {
            p.requested_thread_count += 1;
        }
        ret
    }

    /// `DeliverToRead::do_work` of each work item: whether to go on.
    fn do_work(&mut self, t: ThreadIdx, work: Work, out: &mut Vec<Br>) -> bool {
        let pid = self.threads[t].pid;
        match work {
            Work::Transaction(txn) => {
                self.deliver_transaction(t, txn, out);
                false
            }
            Work::Complete { skipped, spam, .. } => {
                if !skipped {
                    out.push(if spam {
                        Br::OnewaySpamSuspect
                    } else {
                        Br::TransactionComplete
                    });
                }
                true
            }
            Work::ReturnError(x) => {
                let code = self.threads[x].return_work.take().expect("in use");
                out.push(br_of(code));
                true
            }
            Work::ReplyError(x) => {
                let code = self.threads[x].reply_work.take().expect("in use");
                out.push(br_of(code));
                true
            }
            Work::Node(n) => {
                let d = &mut self.nodes[n].delivery;
                assert!(d.has_pushed_node);
                if d.has_pushed_wrapper {
                    assert!(d.has_strong_zero2one);
                    d.has_pushed_node = false;
                    d.has_weak_zero2one = false;
                    return true;
                }
                d.has_pushed_node = false;
                d.has_weak_zero2one = false;
                d.has_strong_zero2one = false;
                self.do_work_locked(n, out);
                true
            }
            Work::Wrapper(n) => {
                let d = &mut self.nodes[n].delivery;
                assert!(d.has_pushed_wrapper && d.has_strong_zero2one);
                d.has_pushed_wrapper = false;
                d.has_strong_zero2one = false;
                self.do_work_locked(n, out);
                true
            }
            Work::Death(d) => {
                let death = &self.deaths[d];
                if death.aborted {
                    return true;
                }
                let done = death.cleared && (!death.dead || death.notification_done);
                let cookie = death.cookie;
                if done {
                    out.push(Br::ClearDeathDone(cookie));
                    true
                } else {
                    self.proc(pid).delivered_deaths.push(d);
                    out.push(Br::DeadBinder(cookie));
                    false
                }
            }
            Work::Freeze { cookie, .. } => self.freeze_message_work(pid, cookie, out),
        }
    }

    /// `Transaction::do_work` (transaction.rs:456-542): `BR_TRANSACTION`
    /// or `BR_REPLY`; the allocation becomes the reader's buffer; a call
    /// becomes the reader's current transaction.
    fn deliver_transaction(&mut self, t: ThreadIdx, txn: TxnIdx, out: &mut Vec<Br>) {
        let pid = self.threads[t].pid;
        let Some(buffer) = self.txns[txn].allocation.take() else {
            // ESRCH: the allocation went first; the caller of a call is
            // answered BR_FAILED_REPLY.
            return;
        };
        let objects = self.buffers[buffer].objects.clone();
        let call = self.txns[txn].target_node.is_some() && !self.txns[txn].oneway;
        out.push(match (self.txns[txn].target_node.is_some(), call) {
            (false, _) => Br::Reply(objects),
            (true, false) => Br::Transaction(objects),
            (true, true) => Br::Call(objects),
        });
        self.proc(pid).buffers.push_back(buffer);
        self.drop_outstanding_txn(txn);
        if call {
            self.threads[t].current_transaction = Some(txn);
        } else {
            self.txns[txn].dropped = true;
        }
    }

    /// `Node::do_work_locked`.
    fn do_work_locked(&mut self, n: NodeIdx, out: &mut Vec<Br>) {
        let node = &mut self.nodes[n];
        let strong = node.strong.count > 0;
        let has_strong = node.strong.has_count;
        let weak = strong || node.weak.count > 0;
        let has_weak = node.weak.has_count;
        if weak && !has_weak {
            node.weak.has_count = true;
            node.active_inc_refs += 1;
        }
        if strong && !has_strong {
            node.strong.has_count = true;
            node.active_inc_refs += 1;
        }
        let no_active = node.active_inc_refs == 0;
        let drop_weak = no_active && !weak && has_weak;
        let drop_strong = no_active && !strong && has_strong;
        if drop_weak {
            node.weak.has_count = false;
        }
        if drop_strong {
            node.strong.has_count = false;
        }
        let (owner, ptr) = (node.owner, node.ptr);
        if no_active && !weak {
            self.proc(owner).nodes.remove(&ptr);
        }
        if weak && !has_weak {
            out.push(Br::IncRefs(ptr));
        }
        if strong && !has_strong {
            out.push(Br::Acquire(ptr));
        }
        if drop_strong {
            out.push(Br::Release(ptr));
        }
        if drop_weak {
            out.push(Br::DecRefs(ptr));
        }
    }

    // ---- a thread's and a process's end ----------------------------------------

    /// `Process::remove_thread` (`BINDER_THREAD_EXIT`).
    fn remove_thread(&mut self, pid: Pid, t: ThreadIdx, windows: &mut dyn Windows<Self>) {
        let tid = self.threads[t].tid;
        self.proc(pid).threads.remove(&tid);
        self.release_thread(t, windows);
    }

    /// `Thread::release`: dead; its received transactions answered
    /// `BR_DEAD_REPLY` (`unwind_transaction_stack`); every item of its list
    /// cancelled, deferred or not.
    fn release_thread(&mut self, t: ThreadIdx, windows: &mut dyn Windows<Self>) {
        self.threads[t].is_dead = true;
        self.unwind_transaction_stack(t, windows);
        self.threads[t].process_work_list = true;
        while let Some(work) = self.pop_work(t) {
            self.threads[t].process_work_list = true;
            self.cancel(work, windows);
        }
        self.threads[t].process_work_list = false;
    }

    /// `Process::release` then `Process::deferred_release`.
    fn deferred_release(&mut self, pid: Pid, windows: &mut dyn Windows<Self>) {
        let p = self.proc(pid);
        p.open = false;
        p.is_dead = true;
        p.is_frozen = IsFrozen::No;
        p.sync_recv = false;
        p.async_recv = false;
        p.refs.mark_dead();
        if p.is_manager {
            // Context::unset_manager_node
            if let Some(node_ref) = self.manager.take() {
                self.drop_node_ref(node_ref);
            }
        }
        // Release threads.
        let threads: Vec<ThreadIdx> = std::mem::take(&mut self.proc(pid).threads)
            .into_values()
            .collect();
        for t in threads {
            self.release_thread(t, windows);
        }
        // Release nodes, by pointer.
        while let Some((&ptr, &n)) = self.procs[pid.index()].nodes.iter().next() {
            self.proc(pid).nodes.remove(&ptr);
            self.node_release(n, windows);
        }
        // Death listeners of our references, then the freeze listeners,
        // then the references.
        let handles: Vec<u32> = self.procs[pid.index()].infos.keys().copied().collect();
        for &handle in &handles {
            let info = &self.procs[pid.index()].infos[&handle];
            let (n, death) = (info.node_ref.node, info.death);
            self.nodes[n].refs.retain(|x| *x != (pid, handle));
            if let Some(d) = death {
                self.set_cleared(d, false);
            }
        }
        let listeners = std::mem::take(&mut self.proc(pid).freeze_listeners);
        for listener in listeners.values() {
            self.on_process_cleanup(pid, listener);
        }
        for handle in handles {
            let info = self.proc(pid).infos.remove(&handle).expect("an info");
            self.proc(pid).refs.remove_handle(handle);
            self.drop_node_ref(info.node_ref);
        }
        // Cancel the process's work.
        while let Some(w) = self.proc(pid).work.pop_front() {
            self.cancel(w, windows);
        }
        self.proc(pid).delivered_deaths.clear();
        // Free the buffers: Allocation's drop.
        let p = self.proc(pid);
        p.unmapped = true;
        let buffers: Vec<usize> = p.buffers.drain(..).collect();
        for buffer in buffers {
            self.drop_allocation(buffer, windows);
        }
    }

    /// `DeliverToRead::cancel` of each work item of a released thread or
    /// process.
    fn cancel(&mut self, work: Work, windows: &mut dyn Windows<Self>) {
        match work {
            Work::Transaction(txn) => {
                // Transaction::cancel: its allocation is dropped first.
                let allocation = self.txns[txn].allocation.take();
                if let Some(b) = allocation {
                    self.drop_allocation(b, windows);
                }
                if self.txns[txn].target_node.is_some() && !self.txns[txn].oneway {
                    let from = self.txns[txn].from;
                    self.deliver_reply(from, Err(br_code::DEAD_REPLY), txn, None, windows);
                } else {
                    self.log.push(Log::UndeliveredTransaction);
                }
                self.drop_transaction(txn, windows);
            }
            Work::Complete { skipped, .. } => {
                if !skipped {
                    self.log.push(Log::UndeliveredComplete);
                }
            }
            Work::ReturnError(x) => {
                if self.threads[x].return_work.take().is_some() {
                    self.log.push(Log::UndeliveredError);
                }
            }
            Work::ReplyError(x) => {
                if self.threads[x].reply_work.take().is_some() {
                    self.log.push(Log::UndeliveredError);
                }
            }
            Work::Death(_) => self.log.push(Log::UndeliveredDeath),
            Work::Freeze { .. } => self.log.push(Log::UndeliveredFreeze),
            Work::Node(n) => {
                // Node::cancel: on BINDER_THREAD_EXIT only, the update goes
                // to the owner's list.
                let owner = self.nodes[n].owner;
                if !self.procs[owner.index()].is_dead {
                    let _ = self.push_work(owner, Work::Node(n));
                }
            }
            Work::Wrapper(n) => {
                // CritIncrWrapper::cancel: the node takes the strong
                // zero-to-one update over.
                let owner = self.nodes[n].owner;
                if self.procs[owner.index()].is_dead {
                    return;
                }
                let d = &mut self.nodes[n].delivery;
                assert!(d.has_pushed_wrapper && d.has_strong_zero2one);
                d.has_pushed_wrapper = false;
                d.has_weak_zero2one = false;
                if !d.has_pushed_node {
                    d.has_pushed_node = true;
                    let _ = self.push_work(owner, Work::Node(n));
                }
            }
        }
    }

    /// `Node::release`: the pending one-way transactions are cancelled,
    /// the death listeners told.
    fn node_release(&mut self, n: NodeIdx, windows: &mut dyn Windows<Self>) {
        while let Some(txn) = self.nodes[n].oneway_todo.pop_front() {
            self.cancel(Work::Transaction(txn), windows);
        }
        let deaths: Vec<DeathIdx> = self.nodes[n].death_list.drain(..).collect();
        for d in deaths {
            self.set_dead(d);
        }
    }

    // ---- observing ------------------------------------------------------------

    /// What each process holds now.
    pub fn snapshot(&self) -> Snapshot {
        let procs = self
            .procs
            .iter()
            .map(|p| ProcState {
                alive: p.open,
                frozen: p.open && p.is_frozen == IsFrozen::Yes,
                refs: p
                    .infos
                    .iter()
                    .map(|(&handle, info)| {
                        let r = &info.node_ref;
                        let state = RefState {
                            node: self.nodes[r.node].name,
                            strong: r.strong_count as u32,
                            weak: r.weak_count as u32,
                            death: info.death.map(|d| self.deaths[d].cookie),
                        };
                        (handle, state)
                    })
                    .collect(),
                nodes: p
                    .nodes
                    .iter()
                    .map(|(&ptr, &n)| {
                        let node = &self.nodes[n];
                        let state = NodeState {
                            serial: node.name.serial,
                            strong: node.strong.count as u32,
                            weak: node.weak.count as u32,
                            has_strong: node.strong.has_count,
                            has_weak: node.weak.has_count,
                        };
                        (ptr, state)
                    })
                    .collect(),
                buffers: p.buffers.len(),
            })
            .collect();
        Snapshot { procs }
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
                .infos
                .iter()
                .map(|(&h, r)| (h, r.node_ref.node as NodeId))
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
