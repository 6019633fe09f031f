//! The C driver (`drivers/android/binder.c` of Linux 7.3) at the command
//! level.
//!
//! Each function here is named after the upstream function it reproduces,
//! and keeps its order of checks, counts and work items; `docs/conformance.md`
//! gives the upstream line of every rule. The handle tables are
//! [`NodeRefs<DBitmap>`] driven through the C protocol of
//! [`Operation`](crate::Operation) (`binder_get_ref_for_node_olocked`'s
//! retry, `try_shrink_dmap`'s own critical sections), so the C versions of
//! the allocator's history apply here too.
//!
//! What is reproduced of the driver's state: the context manager and its
//! uid; per process its references (`refs_by_desc` with strong and weak
//! counts and a death notification), its nodes (`internal_strong_refs`,
//! `local_strong_refs`, `local_weak_refs`, `tmp_refs`, `has_strong_ref`,
//! `has_weak_ref`, the pending requests, the references to them and the
//! one-way queue), the thread's and the process's work lists, the
//! delivered death notifications and the received buffers. Each process
//! has a single thread, a looper, which never blocks.

use super::command::{Command, Object, Pid, RefCmd, Step};
use super::exec::{drive, Held, Tables, Windows};
use super::observe::{
    Br, Errno, Log, NodeName, NodeState, Observed, ProcState, Received, RefState, Ret, Snapshot,
};
use crate::dbitmap::DBitmap;
use crate::table::{Error, Manager, NodeId, NodeRefs, Operation, Request};
use crate::version::{Driver, Version};
use std::collections::{BTreeMap, VecDeque};

type NodeIdx = usize;
type DeathIdx = usize;

/// A work item on a list (`struct binder_work`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// `BINDER_WORK_TRANSACTION`: a one-way transaction, by its buffer.
    Transaction(usize),
    /// `BINDER_WORK_TRANSACTION_COMPLETE`.
    TransactionComplete,
    /// `BINDER_WORK_RETURN_ERROR` with its `BR_*`.
    ReturnError(ReturnError),
    /// `BINDER_WORK_NODE`: the node's own work item.
    Node(NodeIdx),
    /// A death notification's work item; its type is the death's.
    Death(DeathIdx),
}

/// The `BR_*` a failed transaction leaves for its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReturnError {
    Failed,
    Dead,
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

#[derive(Debug)]
struct Ref {
    node: NodeIdx,
    strong: i32,
    weak: i32,
    death: Option<DeathIdx>,
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

/// A transaction buffer: in the receiver's allocator, with the objects as
/// translated for the receiver.
#[derive(Debug)]
struct Buffer {
    target_node: Option<NodeIdx>,
    objects: Vec<Received>,
}

#[derive(Debug)]
struct Proc {
    euid: u32,
    /// The file is still open (no `exit` yet).
    open: bool,
    is_dead: bool,
    refs: NodeRefs<DBitmap>,
    ref_data: BTreeMap<u32, Ref>,
    nodes: BTreeMap<u64, NodeIdx>,
    thread_todo: VecDeque<Work>,
    process_todo: bool,
    return_error_pending: bool,
    todo: VecDeque<Work>,
    delivered_death: Vec<DeathIdx>,
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
    nodes: Vec<Node>,
    deaths: Vec<Death>,
    buffers: Vec<Buffer>,
    serials: BTreeMap<(Pid, u64), u32>,
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

impl CDriver {
    /// The driver after each of `euids.len()` processes opened the device,
    /// for the C `version`.
    ///
    /// # Panics
    ///
    /// If `version` is not a C version.
    pub fn new(euids: &[u32], version: Version) -> Self {
        assert_eq!(version.driver(), Driver::C, "{version} is not a C version");
        let procs = euids
            .iter()
            .map(|&euid| Proc {
                euid,
                open: true,
                is_dead: false,
                refs: NodeRefs::with_version(version),
                ref_data: BTreeMap::new(),
                nodes: BTreeMap::new(),
                thread_todo: VecDeque::new(),
                process_todo: false,
                return_error_pending: false,
                todo: VecDeque::new(),
                delivered_death: Vec::new(),
                buffers: VecDeque::new(),
            })
            .collect();
        CDriver {
            version,
            manager: None,
            manager_uid: None,
            procs,
            nodes: Vec::new(),
            deaths: Vec::new(),
            buffers: Vec::new(),
            serials: BTreeMap::new(),
            log: Vec::new(),
            crashed: false,
            crash: None,
            held: Held::default(),
        }
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
            Command::SetManager | Command::NodeInfo(_) | Command::Exit => true,
            Command::Send { to, .. } => *to == 0,
            Command::Ref(cmd, 0) => cmd.increment(),
            _ => false,
        };
        Held { context_manager }
    }

    /// Runs one step to completion, then lets every process that is not in
    /// the middle of a command drain its work. `busy` are the processes
    /// whose command is paused in a window around this one.
    pub fn exec(&mut self, step: &Step, busy: &[Pid], windows: &mut dyn Windows<Self>) -> Observed {
        let mut observed = Observed::new(self.procs.len());
        // A step run in another's window logs on its own: the outer
        // step's lines so far are put back after it.
        let outer = std::mem::take(&mut self.log);
        let ret = if self.crashed || !self.procs[step.pid.index()].open {
            Ret::Skipped
        } else {
            self.command(step.pid, &step.command, windows)
        };
        if let (Ret::Err(e), false) = (ret, self.crashed) {
            // binder_ioctl's `err:` line.
            self.log.push(Log::IoctlFailed(e));
        }
        observed.ret = Some(ret);
        let mut log = std::mem::take(&mut self.log);
        if !self.crashed {
            for pid in (0..self.procs.len()).map(|i| Pid(i as u8)) {
                if pid != step.pid && busy.contains(&pid) {
                    continue;
                }
                observed.reads[pid.index()] = self.drain(pid);
            }
        }
        log.append(&mut self.log);
        self.log = outer;
        observed.log = log;
        observed.normalise();
        observed
    }

    fn command(&mut self, pid: Pid, command: &Command, windows: &mut dyn Windows<Self>) -> Ret {
        match command {
            Command::SetManager => self.binder_ioctl_set_ctx_mgr(pid),
            Command::Ref(cmd, target) => self.ref_command(pid, *cmd, *target, windows),
            Command::Send { to, objects } => {
                self.binder_transaction(pid, *to, objects, windows);
                Ret::Ok
            }
            Command::Free => match self.procs[pid.index()].buffers.pop_front() {
                Some(buffer) => {
                    self.binder_free_buf(pid, buffer, windows);
                    Ret::Ok
                }
                None => Ret::Skipped,
            },
            Command::RequestDeath { handle, cookie } => {
                self.death_command(pid, true, *handle, *cookie);
                Ret::Ok
            }
            Command::ClearDeath { handle, cookie } => {
                self.death_command(pid, false, *handle, *cookie);
                Ret::Ok
            }
            Command::NodeInfo(handle) => self.binder_ioctl_get_node_info_for_ref(pid, *handle),
            Command::Exit => {
                self.binder_deferred_release(pid);
                Ret::Ok
            }
        }
    }

    fn proc(&mut self, pid: Pid) -> &mut Proc {
        &mut self.procs[pid.index()]
    }

    // ---- work lists ----------------------------------------------------

    /// Whether `work` is on any list of `pid` (`!list_empty(&w->entry)`).
    fn queued(&self, pid: Pid, work: Work) -> bool {
        let p = &self.procs[pid.index()];
        p.thread_todo.contains(&work)
            || p.todo.contains(&work)
            || matches!(work, Work::Death(d) if p.delivered_death.contains(&d))
    }

    /// `binder_dequeue_work_ilocked`: takes `work` off whatever list of
    /// `pid` it is on.
    fn dequeue(&mut self, pid: Pid, work: Work) {
        let p = self.proc(pid);
        p.thread_todo.retain(|w| *w != work);
        p.todo.retain(|w| *w != work);
        if let Work::Death(d) = work {
            p.delivered_death.retain(|x| *x != d);
        }
    }

    /// `binder_enqueue_thread_work_ilocked`: on the thread's list, and the
    /// thread has work to process.
    fn enqueue_thread(&mut self, pid: Pid, work: Work) {
        let p = self.proc(pid);
        p.thread_todo.push_back(work);
        p.process_todo = true;
    }

    /// `binder_enqueue_deferred_thread_work_ilocked`, or
    /// `binder_enqueue_work_ilocked` on the thread's list: queued, but the
    /// thread is not woken for it.
    fn enqueue_thread_deferred(&mut self, pid: Pid, work: Work) {
        self.proc(pid).thread_todo.push_back(work);
    }

    /// `binder_enqueue_work_ilocked(w, &proc->todo)`.
    fn enqueue_proc(&mut self, pid: Pid, work: Work) {
        self.proc(pid).todo.push_back(work);
    }

    // ---- nodes ----------------------------------------------------------

    fn node(&mut self, n: NodeIdx) -> &mut Node {
        &mut self.nodes[n]
    }

    fn is_manager_node(&self, n: NodeIdx) -> bool {
        self.manager == Some(n)
    }

    /// `binder_new_node` / `binder_init_node_ilocked`: the node of `pid` with
    /// `ptr`, created if missing, with a temporary reference taken.
    fn binder_new_node(&mut self, pid: Pid, ptr: u64, cookie: u64) -> NodeIdx {
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
        target: Option<Pid>,
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
        target: Option<Pid>,
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
        target: Option<Pid>,
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

    /// `binder_ioctl_set_ctx_mgr`.
    fn binder_ioctl_set_ctx_mgr(&mut self, pid: Pid) -> Ret {
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
        let n = self.binder_new_node(pid, 0, 0);
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

    /// `BC_REQUEST_DEATH_NOTIFICATION` and `BC_CLEAR_DEATH_NOTIFICATION`.
    fn death_command(&mut self, pid: Pid, request: bool, handle: u32, cookie: u64) {
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
                // The thread is a looper: its own list.
                self.enqueue_thread(pid, Work::Death(d));
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

    /// `BC_DEAD_BINDER_DONE`.
    fn dead_binder_done(&mut self, pid: Pid, cookie: u64) {
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
            self.enqueue_thread(pid, Work::Death(d));
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

    // ---- transactions ----------------------------------------------------

    /// `binder_transaction` for a one-way transaction from `pid` to handle
    /// `to`: the target, the objects translated one by one into a buffer
    /// of the target process, then `binder_proc_transaction`. A failure
    /// queues `BR_FAILED_REPLY` or `BR_DEAD_REPLY` for the sender.
    fn binder_transaction(
        &mut self,
        pid: Pid,
        to: u32,
        objects: &[Object],
        windows: &mut dyn Windows<Self>,
    ) {
        let target = if to != 0 {
            match self.binder_get_ref_olocked(pid, to, true) {
                Some(desc) => {
                    let n = self.procs[pid.index()].ref_data[&desc].node;
                    self.binder_get_node_refs_for_txn(n)
                }
                None => {
                    self.log.push(Log::TransactionToInvalidHandle(to));
                    Err(ReturnError::Failed)
                }
            }
        } else {
            match self.manager {
                Some(m) => {
                    let got = self.binder_get_node_refs_for_txn(m);
                    if let Ok((n, target_proc)) = got {
                        if target_proc == pid {
                            self.log.push(Log::TransactionToOwnManager);
                            // err_invalid_target_handle
                            self.binder_dec_node(n, true, false);
                            self.binder_put_node(n);
                            return self.transaction_failed(pid, ReturnError::Failed);
                        }
                    }
                    got
                }
                None => Err(ReturnError::Dead),
            }
        };
        let (target_node, target_proc) = match target {
            Ok(t) => t,
            Err(e) => {
                self.log.push(Log::NoTargetNode);
                return self.transaction_failed(pid, e);
            }
        };
        let buffer = self.buffers.len();
        self.buffers.push(Buffer {
            target_node: Some(target_node),
            objects: Vec::new(),
        });
        for object in objects.iter().flat_map(Object::expand) {
            let translated = match object {
                Object::Node { ptr, strong } => {
                    self.binder_translate_binder(pid, target_proc, ptr, strong, windows)
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
                Err(()) => {
                    self.log.push(Log::TranslateFailed);
                    // err_translate_failed: the objects translated so far
                    // and the target node's strong ref are released.
                    self.binder_transaction_buffer_release(target_proc, buffer, windows);
                    self.binder_put_node(target_node);
                    return self.transaction_failed(pid, ReturnError::Failed);
                }
            }
        }
        // One-way: the sender's BR_TRANSACTION_COMPLETE first.
        self.enqueue_thread(pid, Work::TransactionComplete);
        if self.binder_proc_transaction(buffer, target_proc).is_err() {
            self.log.push(Log::DeadProcess);
            self.dequeue(pid, Work::TransactionComplete);
            self.binder_transaction_buffer_release(target_proc, buffer, windows);
            self.binder_put_node(target_node);
            return self.transaction_failed(pid, ReturnError::Dead);
        }
        self.binder_put_node(target_node);
    }

    /// The end of `binder_transaction`'s error path: the summary line and
    /// the return error queued for the sender.
    fn transaction_failed(&mut self, pid: Pid, error: ReturnError) {
        self.log.push(Log::TransactionFailed);
        self.proc(pid).return_error_pending = true;
        self.enqueue_thread(pid, Work::ReturnError(error));
    }

    /// `binder_get_node_refs_for_txn`: a strong local and a temporary
    /// reference on the target node, and its process; `BR_DEAD_REPLY` when
    /// its owner died.
    fn binder_get_node_refs_for_txn(&mut self, n: NodeIdx) -> Result<(NodeIdx, Pid), ReturnError> {
        let Some(owner) = self.nodes[n].proc else {
            return Err(ReturnError::Dead);
        };
        self.binder_inc_node(n, true, false, None)
            .expect("a local strong increment cannot fail");
        self.node(n).tmp_refs += 1;
        Ok((n, owner))
    }

    /// `binder_translate_binder`: the sender's node becomes a handle of the
    /// target's.
    fn binder_translate_binder(
        &mut self,
        pid: Pid,
        target: Pid,
        ptr: u64,
        strong: bool,
        windows: &mut dyn Windows<Self>,
    ) -> Result<Received, ()> {
        let n = self.binder_new_node(pid, ptr, ptr);
        // The cookie is the pointer for every node of a program: it matches.
        let ret = self.binder_inc_ref_for_node(target, n, strong, Some(pid), windows);
        self.binder_put_node(n);
        ret.map(|rdata| Received::Handle {
            handle: rdata.desc,
            strong,
        })
        .map_err(|_| ())
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
    ) -> Result<Received, ()> {
        // binder_get_node_from_ref
        let Some(desc) = self.binder_get_ref_olocked(pid, handle, strong) else {
            self.log.push(Log::ObjectInvalidHandle(handle));
            return Err(());
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
                .map_err(|_| ())
        };
        self.binder_put_node(n);
        ret
    }

    /// `binder_proc_transaction` for a one-way transaction.
    fn binder_proc_transaction(&mut self, buffer: usize, target: Pid) -> Result<(), ()> {
        let n = self.buffers[buffer]
            .target_node
            .expect("a one-way buffer has a target");
        let pending_async = self.nodes[n].has_async_transaction;
        if !pending_async {
            self.node(n).has_async_transaction = true;
        }
        if self.procs[target.index()].is_dead {
            return Err(());
        }
        if pending_async {
            self.node(n).async_todo.push_back(Work::Transaction(buffer));
        } else {
            // No thread of ours ever waits: the process's list.
            self.enqueue_proc(target, Work::Transaction(buffer));
        }
        Ok(())
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
        if let Some(n) = self.buffers[buffer].target_node {
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
    }

    // ---- reading ----------------------------------------------------------

    /// Every read `pid` makes until it has nothing left, each followed by
    /// the answers userspace writes (see `docs/commands.md`).
    fn drain(&mut self, pid: Pid) -> Vec<Br> {
        let mut all = Vec::new();
        if !self.procs[pid.index()].open {
            return all;
        }
        // A bound well above anything a program can queue.
        for _ in 0..256 {
            let Some(read) = self.binder_thread_read(pid) else {
                return all;
            };
            for br in &read {
                match *br {
                    Br::IncRefs(ptr) => self.inc_ref_done(pid, ptr, ptr, false),
                    Br::Acquire(ptr) => self.inc_ref_done(pid, ptr, ptr, true),
                    Br::DeadBinder(cookie) => self.dead_binder_done(pid, cookie),
                    _ => {}
                }
            }
            all.extend(read);
        }
        panic!("{pid} still has work after 256 reads");
    }

    /// One non-blocking `binder_thread_read`: `None` for `EAGAIN` (logged
    /// by `binder_ioctl` when it comes after work was announced).
    fn binder_thread_read(&mut self, pid: Pid) -> Option<Vec<Br>> {
        let mut retried = false;
        // `goto retry` while nothing was added: each pass consumes at
        // least one item or finds the work gone, except when the thread is
        // told it has work it cannot find (the bound).
        for _ in 0..64 {
            let p = &self.procs[pid.index()];
            let wait_for_proc_work = p.thread_todo.is_empty();
            let has_work = p.process_todo || (wait_for_proc_work && !p.todo.is_empty());
            if !has_work {
                if retried {
                    self.log.push(Log::IoctlFailed(Errno::Again));
                }
                return None;
            }
            let mut out = Vec::new();
            let consumed = self.read_pass(pid, wait_for_proc_work, &mut out);
            if !out.is_empty() {
                return Some(out);
            }
            if !consumed && retried {
                break;
            }
            retried = true;
        }
        self.log.push(Log::ReadLivelock);
        None
    }

    /// The loop of `binder_thread_read` after its wait: whether it took
    /// any item off a list.
    fn read_pass(&mut self, pid: Pid, wait_for_proc_work: bool, out: &mut Vec<Br>) -> bool {
        let mut consumed = false;
        loop {
            let p = self.proc(pid);
            let w = if let Some(w) = p.thread_todo.pop_front() {
                w
            } else if wait_for_proc_work && !p.todo.is_empty() {
                p.todo.pop_front().expect("not empty")
            } else {
                return consumed;
            };
            consumed = true;
            if p.thread_todo.is_empty() {
                p.process_todo = false;
            }
            match w {
                Work::Transaction(buffer) => {
                    out.push(Br::Transaction(self.buffers[buffer].objects.clone()));
                    self.proc(pid).buffers.push_back(buffer);
                    return true;
                }
                Work::ReturnError(e) => {
                    self.proc(pid).return_error_pending = false;
                    out.push(match e {
                        ReturnError::Failed => Br::FailedReply,
                        ReturnError::Dead => Br::DeadReply,
                    });
                }
                Work::TransactionComplete => out.push(Br::TransactionComplete),
                Work::Node(n) => self.node_work(pid, n, out),
                Work::Death(d) => {
                    let cookie = self.deaths[d].cookie;
                    if self.deaths[d].kind == DeathKind::Clear {
                        out.push(Br::ClearDeathDone(cookie));
                    } else {
                        self.proc(pid).delivered_death.push(d);
                        out.push(Br::DeadBinder(cookie));
                        return true;
                    }
                }
            }
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

    // ---- a process's death -------------------------------------------------

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
        p.refs.mark_dead();
        // binder_thread_release: the thread's list.
        let thread_todo: Vec<Work> = self.proc(pid).thread_todo.drain(..).collect();
        self.proc(pid).process_todo = false;
        self.binder_release_work(thread_todo);
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
        self.proc(pid).buffers.clear();
    }

    /// `binder_release_work`: what each undelivered work item logs.
    fn binder_release_work(&mut self, list: Vec<Work>) {
        for w in list {
            match w {
                Work::Transaction(_) => self.log.push(Log::UndeliveredTransaction),
                Work::ReturnError(_) => self.log.push(Log::UndeliveredError),
                Work::TransactionComplete => self.log.push(Log::UndeliveredComplete),
                Work::Death(d) => match self.deaths[d].kind {
                    DeathKind::DeadBinderAndClear | DeathKind::Clear => {
                        self.log.push(Log::UndeliveredDeath)
                    }
                    DeathKind::DeadBinder | DeathKind::Armed => self.log.push(Log::UnexpectedWork),
                },
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
