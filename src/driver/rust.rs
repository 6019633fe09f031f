//! The Rust driver (`drivers/android/binder/` of Linux 7.3) at the command
//! level.
//!
//! Each function here is named after the upstream function it reproduces
//! (`Process::update_ref`, `Process::insert_or_update_handle`,
//! `NodeRef::update`, `Node::do_work_locked`, ...) and keeps its order of
//! checks, counts and work items; `docs/conformance.md` gives the upstream
//! line of every rule. The handle tables are [`NodeRefs<IdPool>`] driven
//! through the Rust protocol of [`Operation`](crate::Operation), so the
//! Rust versions of the allocator's history apply here too.
//!
//! What is reproduced: the context (its manager's `NodeRef` and uid); per
//! process its `NodeRefInfo`s by handle (a `NodeRef` with its four counts,
//! a death notification), its nodes (the strong and weak `CountState`s,
//! the `DeliveryState`, `active_inc_refs`, the one-way queue, the death
//! list), the thread's work list with its `process_work_list` flag, the
//! process's work list, the delivered deaths and the received buffers
//! (each holding the `NodeRef` of its target node). Each process has a
//! single thread, a looper, which never blocks.

use super::command::{Command, Object, Pid, Step};
use super::exec::{drive, Tables, Windows};
use super::observe::{
    Br, Errno, Log, NodeName, NodeState, Observed, ProcState, Received, RefState, Ret, Snapshot,
};
use crate::id_pool::IdPool;
use crate::table::{Error, Manager, NodeId, NodeRefs, Operation, Request, Warning};
use crate::version::{Driver, Version};
use std::collections::{BTreeMap, VecDeque};

type NodeIdx = usize;
type DeathIdx = usize;

/// A work item (`DLArc<dyn DeliverToRead>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// A one-way transaction, by its buffer.
    Transaction(usize),
    /// `DeliverCode`: `BR_TRANSACTION_COMPLETE`, unless skipped.
    Complete {
        /// `DeliverCode::skip`, set when the transaction failed.
        skipped: bool,
    },
    /// The thread's `return_work` with its code.
    ReturnError(Reply),
    /// The node itself.
    Node(NodeIdx),
    /// The node's `CritIncrWrapper`.
    Wrapper(NodeIdx),
    /// A `NodeDeath`.
    Death(DeathIdx),
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
    oneway_todo: VecDeque<usize>,
    has_oneway_transaction: bool,
    death_list: Vec<DeathIdx>,
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

/// An allocation in the receiver's buffer space, with its
/// `AllocationInfo`.
#[derive(Debug)]
struct Buffer {
    to: Pid,
    target_node: Option<NodeRef>,
    oneway_node: Option<NodeIdx>,
    objects: Vec<Received>,
}

#[derive(Debug)]
struct Proc {
    euid: u32,
    open: bool,
    is_dead: bool,
    is_manager: bool,
    refs: NodeRefs<IdPool>,
    infos: BTreeMap<u32, RefInfo>,
    nodes: BTreeMap<u64, NodeIdx>,
    /// The thread's `work_list`.
    thread_work: VecDeque<Work>,
    /// The thread's `process_work_list`.
    process_work_list: bool,
    /// The thread's `return_work` is in a list.
    return_work_queued: bool,
    /// The process's `work` list.
    work: VecDeque<Work>,
    delivered_deaths: Vec<DeathIdx>,
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
    nodes: Vec<Node>,
    deaths: Vec<Death>,
    buffers: Vec<Buffer>,
    serials: BTreeMap<(Pid, u64), u32>,
    log: Vec<Log>,
}

impl Tables<IdPool> for RustDriver {
    fn table(&mut self, pid: Pid) -> &mut NodeRefs<IdPool> {
        &mut self.procs[pid.index()].refs
    }
}

/// The `BR_*` a failed transaction leaves for its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Failed,
    Dead,
}

/// Why a transaction failed (`BinderError`): the `BR_*` for the sender and
/// whether it has a source error (which is logged).
#[derive(Clone, Copy, Debug)]
struct BinderError {
    reply: Reply,
    source: bool,
}

impl BinderError {
    fn dead() -> Self {
        BinderError {
            reply: Reply::Dead,
            source: false,
        }
    }
    fn failed() -> Self {
        BinderError {
            reply: Reply::Failed,
            source: true,
        }
    }
}

impl RustDriver {
    /// The driver after each of `euids.len()` processes opened the device,
    /// for the Rust `version`.
    ///
    /// # Panics
    ///
    /// If `version` is not a Rust version.
    pub fn new(euids: &[u32], version: Version) -> Self {
        assert_eq!(
            version.driver(),
            Driver::Rust,
            "{version} is not a Rust version"
        );
        let procs = euids
            .iter()
            .map(|&euid| Proc {
                euid,
                open: true,
                is_dead: false,
                is_manager: false,
                refs: NodeRefs::with_version(version),
                infos: BTreeMap::new(),
                nodes: BTreeMap::new(),
                thread_work: VecDeque::new(),
                process_work_list: false,
                return_work_queued: false,
                work: VecDeque::new(),
                delivered_deaths: Vec::new(),
                buffers: VecDeque::new(),
                unmapped: false,
            })
            .collect();
        RustDriver {
            version,
            manager: None,
            manager_uid: None,
            procs,
            nodes: Vec::new(),
            deaths: Vec::new(),
            buffers: Vec::new(),
            serials: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    /// The version it follows.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Runs one step to completion, then lets every process that is not in
    /// the middle of a command drain its work (see [`CDriver::exec`]).
    ///
    /// [`CDriver::exec`]: super::CDriver::exec
    pub fn exec(&mut self, step: &Step, busy: &[Pid], windows: &mut dyn Windows<Self>) -> Observed {
        let mut observed = Observed::new(self.procs.len());
        // A step run in another's window logs on its own: the outer
        // step's lines so far are put back after it.
        let outer = std::mem::take(&mut self.log);
        let ret = if !self.procs[step.pid.index()].open {
            Ret::Skipped
        } else {
            self.command(step.pid, &step.command, windows)
        };
        observed.ret = Some(ret);
        let mut log = std::mem::take(&mut self.log);
        for i in 0..self.procs.len() {
            let pid = Pid(i as u8);
            if pid != step.pid && busy.contains(&pid) {
                continue;
            }
            observed.reads[i] = self.drain(pid);
        }
        log.append(&mut self.log);
        self.log = outer;
        observed.log = log;
        observed.normalise();
        observed
    }

    fn command(&mut self, pid: Pid, command: &Command, windows: &mut dyn Windows<Self>) -> Ret {
        match command {
            Command::SetManager => match self.set_as_manager(pid) {
                Ok(()) => Ret::Ok,
                Err(e) => Ret::Err(e),
            },
            Command::Ref(cmd, handle) => {
                match self.update_ref(pid, *handle, cmd.increment(), cmd.strong(), windows) {
                    Ok(()) => Ret::Ok,
                    Err(e) => {
                        // Thread::write_read's "Write failure".
                        self.log.push(Log::IoctlFailed(e));
                        Ret::Err(e)
                    }
                }
            }
            Command::Send { to, objects } => {
                self.transaction(pid, *to, objects, windows);
                Ret::Ok
            }
            Command::Free => match self.procs[pid.index()].buffers.pop_front() {
                Some(buffer) => {
                    self.drop_allocation(buffer, windows);
                    Ret::Ok
                }
                None => Ret::Skipped,
            },
            Command::RequestDeath { handle, cookie } => {
                self.request_death(pid, *handle, *cookie);
                Ret::Ok
            }
            Command::ClearDeath { handle, cookie } => {
                self.clear_death(pid, *handle, *cookie);
                Ret::Ok
            }
            Command::NodeInfo(handle) => self.get_node_info_from_ref(pid, *handle),
            Command::Exit => {
                self.deferred_release(pid, windows);
                Ret::Ok
            }
        }
    }

    fn proc(&mut self, pid: Pid) -> &mut Proc {
        &mut self.procs[pid.index()]
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

    /// `InnerThread::push_work`.
    fn push_thread_work(&mut self, pid: Pid, work: Work) {
        let p = self.proc(pid);
        p.thread_work.push_back(work);
        p.process_work_list = true;
    }

    /// `InnerThread::push_work_deferred`.
    fn push_thread_work_deferred(&mut self, pid: Pid, work: Work) {
        self.proc(pid).thread_work.push_back(work);
    }

    /// `Thread::push_work_if_looper`: our threads are loopers.
    fn push_work_if_looper(&mut self, pid: Pid, work: Work) {
        self.push_thread_work(pid, work);
    }

    fn in_a_list(&self, pid: Pid, work: Work) -> bool {
        let p = &self.procs[pid.index()];
        p.thread_work.contains(&work) || p.work.contains(&work)
    }

    // ---- nodes ----------------------------------------------------------

    /// `Process::get_node`: the node of `pid` with `ptr` (created if
    /// missing), with a new `NodeRef` whose zero-to-one increment is
    /// delivered to `pid`'s thread.
    fn get_node(
        &mut self,
        pid: Pid,
        ptr: u64,
        cookie: u64,
        strong: bool,
    ) -> Result<NodeRef, Errno> {
        let mut wrapper = false;
        for _ in 0..2 {
            let n = match self.procs[pid.index()].nodes.get(&ptr) {
                Some(&n) if self.nodes[n].cookie != cookie => return Err(Errno::Inval),
                Some(&n) => n,
                None => self.new_node(pid, ptr, cookie),
            };
            match self.new_node_ref_with_thread(n, strong, pid, wrapper) {
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
        thread: Pid,
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
        thread: Option<Pid>,
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

    /// `Process::set_as_manager` with `Context::set_manager_node`.
    fn set_as_manager(&mut self, pid: Pid) -> Result<(), Errno> {
        let node_ref = self.get_node(pid, 0, 0, true)?;
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

    /// `Process::clear_death`.
    fn clear_death(&mut self, pid: Pid, handle: u32, cookie: u64) {
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
            self.push_work_if_looper(pid, Work::Death(d));
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

    /// `Process::dead_binder_done` with `NodeDeath::set_notification_done`.
    fn dead_binder_done(&mut self, pid: Pid, cookie: u64) {
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
            self.push_work_if_looper(pid, Work::Death(d));
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

    // ---- transactions ------------------------------------------------------

    /// `Thread::transaction` for a one-way `BC_TRANSACTION`.
    fn transaction(
        &mut self,
        pid: Pid,
        to: u32,
        objects: &[Object],
        windows: &mut dyn Windows<Self>,
    ) {
        if let Err(err) = self.oneway_transaction_inner(pid, to, objects, windows) {
            self.proc(pid).return_work_queued = true;
            self.push_thread_work(pid, Work::ReturnError(err.reply));
            if err.source {
                self.log.push(Log::TransactionFailed);
            }
        }
    }

    /// `Process::get_transaction_node`.
    fn get_transaction_node(&mut self, pid: Pid, handle: u32) -> Result<NodeRef, BinderError> {
        if handle == 0 {
            let node_ref = match self.get_manager_node(true) {
                Err(()) => return Err(BinderError::dead()),
                Ok(Err(_)) => return Err(BinderError::failed()),
                Ok(Ok(node_ref)) => node_ref,
            };
            if self.nodes[node_ref.node].owner == pid {
                self.drop_node_ref(node_ref);
                return Err(BinderError::failed());
            }
            Ok(node_ref)
        } else {
            self.get_node_from_handle(pid, handle, true).map_err(|_| {
                self.log.push(Log::TransactionToInvalidHandle(handle));
                BinderError::failed()
            })
        }
    }

    /// `Thread::oneway_transaction_inner`: the target, `Transaction::new`
    /// (`copy_transaction_data`), the completion, then `submit`.
    fn oneway_transaction_inner(
        &mut self,
        pid: Pid,
        to: u32,
        objects: &[Object],
        windows: &mut dyn Windows<Self>,
    ) -> Result<(), BinderError> {
        let node_ref = self.get_transaction_node(pid, to)?;
        let target = self.nodes[node_ref.node].owner;
        // copy_transaction_data: the buffer first.
        if self.procs[target.index()].unmapped {
            self.log.push(Log::BufferAllocFailed);
            self.drop_node_ref(node_ref);
            return Err(BinderError::dead());
        }
        let buffer = self.buffers.len();
        self.buffers.push(Buffer {
            to: target,
            target_node: None,
            oneway_node: None,
            objects: Vec::new(),
        });
        for object in objects.iter().flat_map(Object::expand) {
            match self.translate_object(pid, target, object, windows) {
                Ok(received) => self.buffers[buffer].objects.push(received),
                Err(_) => {
                    self.log.push(Log::TranslateFailed);
                    self.log.push(Log::CopyFailed);
                    self.drop_allocation(buffer, windows);
                    self.drop_node_ref(node_ref);
                    return Err(BinderError::failed());
                }
            }
        }
        let n = node_ref.node;
        self.buffers[buffer].oneway_node = Some(n);
        self.buffers[buffer].target_node = Some(node_ref);
        // The completion is pushed before the submit, and skipped if it
        // fails.
        self.push_thread_work(pid, Work::Complete { skipped: false });
        if self.submit_oneway(n, buffer).is_err() {
            let p = self.proc(pid);
            let pos = p
                .thread_work
                .iter()
                .rposition(|w| *w == Work::Complete { skipped: false })
                .expect("the completion was pushed");
            p.thread_work[pos] = Work::Complete { skipped: true };
            self.drop_allocation(buffer, windows);
            return Err(BinderError::dead());
        }
        Ok(())
    }

    /// `Node::submit_oneway`.
    fn submit_oneway(&mut self, n: NodeIdx, buffer: usize) -> Result<(), ()> {
        let owner = self.nodes[n].owner;
        if self.procs[owner.index()].is_dead {
            return Err(());
        }
        if self.nodes[n].has_oneway_transaction {
            self.nodes[n].oneway_todo.push_back(buffer);
            Ok(())
        } else {
            self.nodes[n].has_oneway_transaction = true;
            self.push_work(owner, Work::Transaction(buffer))
        }
    }

    /// `Thread::translate_object` with `transfer_binder_object`.
    fn translate_object(
        &mut self,
        pid: Pid,
        target: Pid,
        object: Object,
        windows: &mut dyn Windows<Self>,
    ) -> Result<Received, Errno> {
        let (node_ref, strong) = match object {
            Object::Node { ptr, strong } => (self.get_node(pid, ptr, ptr, strong)?, strong),
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
    /// node's ref, then each object's.
    fn drop_allocation(&mut self, buffer: usize, windows: &mut dyn Windows<Self>) {
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
        if let Some(buffer) = next {
            let _ = self.push_work(owner, Work::Transaction(buffer));
        }
    }

    // ---- reading ------------------------------------------------------------

    /// Every read `pid` makes until it has nothing left, each followed by
    /// the answers userspace writes (see `docs/commands.md`).
    fn drain(&mut self, pid: Pid) -> Vec<Br> {
        let mut all = Vec::new();
        if !self.procs[pid.index()].open {
            return all;
        }
        for _ in 0..256 {
            let Some(read) = self.read(pid) else {
                return all;
            };
            for br in &read {
                match *br {
                    Br::IncRefs(ptr) | Br::Acquire(ptr) => self.inc_ref_done(pid, ptr, ptr),
                    Br::DeadBinder(cookie) => self.dead_binder_done(pid, cookie),
                    _ => {}
                }
            }
            all.extend(read);
        }
        panic!("{pid} still has work after 256 reads");
    }

    /// Whether `poll` says a read would return something.
    fn poll(&self, pid: Pid) -> bool {
        let p = &self.procs[pid.index()];
        p.process_work_list || !p.work.is_empty()
    }

    /// One non-blocking `Thread::read`: `None` for `EAGAIN`.
    fn read(&mut self, pid: Pid) -> Option<Vec<Br>> {
        if !self.poll(pid) {
            return None;
        }
        let use_proc_queue = !self.procs[pid.index()].process_work_list;
        let mut out = Vec::new();
        loop {
            let p = self.proc(pid);
            let work = if p.process_work_list {
                let w = p.thread_work.pop_front();
                p.process_work_list = !p.thread_work.is_empty();
                w
            } else if use_proc_queue {
                p.work.pop_front()
            } else {
                None
            };
            let Some(work) = work else {
                break;
            };
            if !self.do_work(pid, work, &mut out) {
                break;
            }
        }
        if out.is_empty() {
            // Nothing written: EAGAIN, which `Thread::write_read` logs
            // ("Read failure").
            self.log.push(Log::IoctlFailed(Errno::Again));
            return None;
        }
        Some(out)
    }

    /// `DeliverToRead::do_work` of each work item: whether to go on.
    fn do_work(&mut self, pid: Pid, work: Work, out: &mut Vec<Br>) -> bool {
        match work {
            Work::Transaction(buffer) => {
                out.push(Br::Transaction(self.buffers[buffer].objects.clone()));
                self.proc(pid).buffers.push_back(buffer);
                false
            }
            Work::Complete { skipped } => {
                if !skipped {
                    out.push(Br::TransactionComplete);
                }
                true
            }
            Work::ReturnError(reply) => {
                self.proc(pid).return_work_queued = false;
                out.push(match reply {
                    Reply::Failed => Br::FailedReply,
                    Reply::Dead => Br::DeadReply,
                });
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

    // ---- a process's death ---------------------------------------------------

    /// `Process::release` then `Process::deferred_release`.
    fn deferred_release(&mut self, pid: Pid, windows: &mut dyn Windows<Self>) {
        let p = self.proc(pid);
        p.open = false;
        p.is_dead = true;
        p.refs.mark_dead();
        if p.is_manager {
            // Context::unset_manager_node
            if let Some(node_ref) = self.manager.take() {
                self.drop_node_ref(node_ref);
            }
        }
        // Thread::release: cancel every item, deferred or not.
        let thread_work: Vec<Work> = self.proc(pid).thread_work.drain(..).collect();
        self.proc(pid).process_work_list = false;
        for work in thread_work {
            self.cancel(work);
        }
        // Release nodes, by pointer.
        while let Some((&ptr, &n)) = self.procs[pid.index()].nodes.iter().next() {
            self.proc(pid).nodes.remove(&ptr);
            self.node_release(n);
        }
        // Death listeners of our references, then the references.
        let handles: Vec<u32> = self.procs[pid.index()].infos.keys().copied().collect();
        for &handle in &handles {
            let info = &self.procs[pid.index()].infos[&handle];
            let (n, death) = (info.node_ref.node, info.death);
            self.nodes[n].refs.retain(|x| *x != (pid, handle));
            if let Some(d) = death {
                self.set_cleared(d, false);
            }
        }
        for handle in handles {
            let info = self.proc(pid).infos.remove(&handle).expect("an info");
            self.proc(pid).refs.remove_handle(handle);
            self.drop_node_ref(info.node_ref);
        }
        // Cancel the process's work.
        let work: Vec<Work> = self.proc(pid).work.drain(..).collect();
        for w in work {
            self.cancel(w);
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

    /// `DeliverToRead::cancel` of each work item at process exit.
    fn cancel(&mut self, work: Work) {
        match work {
            Work::Transaction(buffer) => {
                self.log.push(Log::UndeliveredTransaction);
                let mut none = super::Sequential;
                self.drop_allocation(buffer, &mut none);
            }
            Work::Complete { skipped } => {
                if !skipped {
                    self.log.push(Log::UndeliveredComplete);
                }
            }
            Work::ReturnError(_) => self.log.push(Log::UndeliveredError),
            Work::Death(_) => self.log.push(Log::UndeliveredDeath),
            Work::Node(_) | Work::Wrapper(_) => {}
        }
    }

    /// `Node::release`: the pending one-way transactions are cancelled,
    /// the death listeners told.
    fn node_release(&mut self, n: NodeIdx) {
        while let Some(buffer) = self.nodes[n].oneway_todo.pop_front() {
            self.cancel(Work::Transaction(buffer));
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
