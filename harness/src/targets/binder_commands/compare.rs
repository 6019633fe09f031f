//! The C driver against the Rust driver, observable by observable, and
//! what each difference between them is.
//!
//! After each step both drivers' observations ([`Observed`]) and, after
//! each top-level step, the references, buffers and lives of their
//! processes ([`Snapshot`]) are compared. Nodes are not compared between
//! the drivers: they count differently by construction (C's
//! `local_weak_refs` against Rust's per-`NodeRef` weak count) and keep a
//! node in their owner's tree for different lengths of time, and userspace
//! sees a node only through what its owner reads (`BR_INCREFS`, ...) and
//! through `BINDER_GET_NODE_INFO_FOR_REF`, both compared. Each driver's
//! nodes are checked against its own naive model.
//!
//! Every difference is explained by a [`Rule`] or it is new. A rule is an
//! upstream-intended difference (with the upstream line that shows the
//! intent) or a finding (with its write-up under `docs/findings/`); the
//! list is [`RULES`], and `docs/conformance.md` lists them too.

use super::program::Plan;
use idpool::driver::{
    Br, Command, Errno, ExtendedError, Log, Observed, Pid, Procs, Read, Received, RefCmd, Ret,
    Snapshot, Step,
};
use idpool::AllocSite;

/// What a rule says about the difference it explains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Upstream means it: the line that shows it.
    Intended(&'static str),
    /// A finding, written up in `docs/findings/<doc>.md`.
    Finding(&'static str),
}

/// One explained difference between the drivers.
#[derive(Debug)]
pub struct Rule {
    /// A short name, used in failures, traces and `IDPOOL_HISTORY`.
    pub name: &'static str,
    /// What differs, in one line.
    pub title: &'static str,
    /// Intended or a finding.
    pub kind: Kind,
    /// Whether the drivers' states diverge from then on (their handles or
    /// their references no longer match), so that comparing them further
    /// tells nothing new.
    pub diverges: bool,
}

/// Every known difference.
pub static RULES: &[Rule] = &[
    Rule {
        name: "manager-handle",
        title: "a reference to the context manager's node made by a transaction is given descriptor 0 by C, 1 or more by Rust",
        kind: Kind::Finding("0001-manager-node-handle-from-transaction"),
        diverges: true,
    },
    Rule {
        name: "node-info",
        title: "BINDER_GET_NODE_INFO_FOR_REF: different counts, error codes and weak-reference handling",
        kind: Kind::Finding("0002-node-info-for-ref"),
        diverges: false,
    },
    Rule {
        name: "failed-set-manager",
        title: "a BINDER_SET_CONTEXT_MGR(_EXT) that both drivers refuse (EBUSY, EPERM) takes a strong reference on the node it names in Rust first: the node's work can park on the calling thread's deferred list, so its later BR_* come late, or to that thread instead of the one C gives them to",
        kind: Kind::Finding("0004-failed-set-context-mgr"),
        diverges: true,
    },
    Rule {
        name: "manager-zero-fallback",
        title: "BC_INCREFS/BC_ACQUIRE 0 whose reference to the manager's node cannot be allocated: C counts whatever reference holds descriptor 0 instead, Rust counts nothing and reports success",
        kind: Kind::Finding("0005-handle-zero-increment-fallback"),
        diverges: true,
    },
    Rule {
        name: "lock-order",
        title: "steps run in another's lock-drop window finish in another order: C keeps context_mgr_node_lock across BC_INCREFS/BC_ACQUIRE 0's insert (binder.c:4173-4188), so a manager's death, a new manager, a transaction to 0 wait for it; Rust lets the context's lock go first (process.rs:968-972)",
        kind: Kind::Intended("binder.c:4173 mutex_lock(&context->context_mgr_node_lock) held across binder_inc_ref_for_node; process.rs:968 get_manager_node() clones the NodeRef under the manager lock and returns before insert_or_update_handle"),
        diverges: true,
    },
    Rule {
        name: "dying-target-reply",
        title: "a one-way transaction whose target dies while an object is being translated: C reports BR_DEAD_REPLY (binder_proc_transaction finds the process dead), Rust BR_FAILED_REPLY (insert_or_update_handle's ESRCH fails the translation)",
        kind: Kind::Finding("0006-dying-target-reply"),
        diverges: false,
    },
    Rule {
        name: "grow-failure",
        title: "a handle map that cannot grow (its allocation fails): C disables its dbitmap and finds the descriptor by the slow scan, Rust fails the insert with ENOMEM",
        kind: Kind::Intended("dbitmap.h:118-120 \"Once the dbitmap is disabled, binder will fallback to slow_desc_lookup_olocked()\"; process.rs:874 grow_request.realloc(GFP_KERNEL)? returns ENOMEM"),
        diverges: true,
    },
    Rule {
        name: "log-lines",
        title: "kernel log lines one driver prints and the other does not",
        kind: Kind::Finding("0003-kernel-log-lines"),
        diverges: false,
    },
    Rule {
        name: "extended-error",
        title: "BINDER_GET_EXTENDED_ERROR after a failed transaction: C's param is -EPROTO where Rust's is -EINVAL (a reply or a call against the thread's transaction stack) and -EINVAL where Rust's is -ENOENT (a handle the sender lacks); a transaction that fails with BR_DEAD_REPLY or BR_FROZEN_REPLY is recorded by C and not by Rust (BR_OK)",
        kind: Kind::Finding("0008-extended-error"),
        diverges: false,
    },
    Rule {
        name: "non-looper-work",
        title: "a thread that is not a looper (no BC_ENTER_LOOPER or BC_REGISTER_LOOPER) takes the process's work in C, with a user error, and never in Rust: which thread reads a transaction, or whether one is read at all, differs",
        kind: Kind::Finding("0009-non-looper-thread"),
        diverges: true,
    },
    Rule {
        name: "register-after-enter",
        title: "BC_REGISTER_LOOPER from a thread that entered the looper: C does not count it as a started thread, Rust does; the drivers then ask for threads (BR_SPAWN_LOOPER) at different times",
        kind: Kind::Finding("0012-register-after-enter"),
        diverges: true,
    },
    Rule {
        name: "freeze-notify-dead-node",
        title: "BC_REQUEST_FREEZE_NOTIFICATION on a handle whose node's owner has died: C queues nothing, Rust sends BR_FROZEN_BINDER (not frozen) at once",
        kind: Kind::Finding("0013-freeze-notify-dead-node"),
        diverges: false,
    },
    Rule {
        name: "node-debug",
        title: "BINDER_GET_NODE_DEBUG_INFO lists the nodes each driver still keeps in the owner's tree, which it drops at different times (a node nothing refers to any more, or a refused manager's)",
        kind: Kind::Finding("0014-node-debug-info"),
        diverges: false,
    },
    Rule {
        name: "oneway-spam",
        title: "a sender of one-way transactions that fill the receiver's one-way space, with spam detection on: C answers BR_ONEWAY_SPAM_SUSPECT once until the space recovers, Rust every time",
        kind: Kind::Finding("0015-oneway-spam-suspect"),
        diverges: false,
    },
    Rule {
        name: "freeze-notify-repeated",
        title: "BINDER_FREEZE that leaves a process's frozen state as it was (a thaw of a process that is not frozen, a freeze of a frozen one): C sends every freeze notification on its nodes again, with the same state, Rust only those whose state changed",
        kind: Kind::Finding("0016-freeze-notification-repeated"),
        diverges: false,
    },
    Rule {
        name: "thread-exit-node-work",
        title: "BINDER_THREAD_EXIT from a thread that has not yet read a node's first BR_INCREFS/BR_ACQUIRE (deferred on it when it sent the node): C drops the update, so the node's owner is never told of the reference; Rust moves it to the process, which reads it",
        kind: Kind::Finding("0017-thread-exit-node-work"),
        diverges: true,
    },
    Rule {
        name: "freeze-cookie",
        title: "BC_REQUEST_FREEZE_NOTIFICATION with a cookie the process already gave a listener on another node: C accepts it (a cookie per reference), Rust refuses it with EINVAL (listeners keyed by cookie)",
        kind: Kind::Intended("freeze.rs:47-55 allow_duplicate: \"To avoid issues with ambiguity, we allow this only if the new listener is for the same node\"; freeze.rs:214-219 returns EINVAL on a duplicate cookie; binder.c:3970 stores the cookie in the reference's own binder_ref_freeze"),
        diverges: true,
    },
    Rule {
        name: "call-to-exited-caller",
        title: "a call into a process whose thread that called the caller left (BINDER_THREAD_EXIT) before its reply: C delivers it to the process (the stack search skips the gone thread), Rust to the gone thread, and the caller reads BR_DEAD_REPLY",
        kind: Kind::Finding("0018-call-to-exited-caller"),
        diverges: true,
    },
    Rule {
        name: "dead-target-bad-stack",
        title: "a call to a node whose owner died, from a thread whose transaction stack forbids a new call (its top transaction is one it sent and is waiting on): C looks the target up first and answers BR_DEAD_REPLY, Rust checks the stack first and answers BR_FAILED_REPLY",
        kind: Kind::Finding("0019-dead-target-bad-stack"),
        diverges: false,
    },
    Rule {
        name: "freeze-without-process",
        title: "BINDER_FREEZE on a pid with no Binder process: EINVAL in C, 0 in Rust",
        kind: Kind::Finding("0010-freeze-without-process"),
        diverges: false,
    },
    Rule {
        name: "freeze-pid-order",
        title: "BINDER_FREEZE on a pid with two Binder processes (two opens by one task) that fails at one of them: C goes through them last opened first, Rust first opened first, and each stops at the failure, so a process one driver froze the other never reached",
        kind: Kind::Finding("0020-freeze-pid-order"),
        diverges: true,
    },
    Rule {
        name: "manager-task",
        title: "a transaction to handle 0 from another open by the context manager's task: C refuses it as a transaction to the manager from its own process (it compares pids since 49ed96943a8e, 2019), Rust delivers it (it compares processes, as C did before that fix)",
        kind: Kind::Finding("0021-manager-task"),
        diverges: true,
    },
    Rule {
        name: "stale-node-work",
        title: "a node's first BR_INCREFS deferred on a thread that waits for the reply to its call, then read by another thread of the process that sent the node strong: C moved the node's work to that thread, Rust delivered it with a wrapper and left the node queued on the waiting thread, so the node's later BR_DECREFS/BR_RELEASE waits for that thread to read (after its reply) in Rust, where C queues it to the process at once",
        kind: Kind::Finding("0022-stale-node-work"),
        diverges: true,
    },
    Rule {
        name: "manager-ext-cookie",
        title: "BINDER_SET_CONTEXT_MGR(_EXT) naming a node the caller has with another cookie (one BINDER_SET_CONTEXT_MGR_EXT made): C makes that node the manager's (or answers EBUSY/EPERM first), Rust refuses it with EINVAL before any other check",
        kind: Kind::Finding("0011-manager-ext-cookie"),
        diverges: true,
    },
];

/// The rule called `name`.
pub fn rule(name: &str) -> &'static Rule {
    RULES
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no rule {name}"))
}

/// A difference between the drivers at one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diff {
    /// The command's return.
    Ret {
        /// C's.
        c: Option<Ret>,
        /// Rust's.
        rust: Option<Ret>,
    },
    /// The extended error the step's thread read after it.
    Ee {
        /// C's.
        c: Option<ExtendedError>,
        /// Rust's.
        rust: Option<ExtendedError>,
    },
    /// What one process read.
    Reads {
        /// The process.
        pid: usize,
        /// Read under C only.
        c: Vec<Read>,
        /// Read under Rust only.
        rust: Vec<Read>,
    },
    /// The kernel log.
    Log {
        /// Printed by C only.
        c: Vec<Log>,
        /// Printed by Rust only.
        rust: Vec<Log>,
    },
    /// Whether a process is frozen: no userspace read says it at once, a
    /// transaction to it later does (`BR_FROZEN_REPLY`,
    /// `BR_TRANSACTION_PENDING_FROZEN`).
    Frozen {
        /// The process.
        pid: usize,
        /// Under C.
        c: bool,
        /// Under Rust.
        rust: bool,
    },
    /// A process's references, buffers or life.
    State {
        /// The process.
        pid: usize,
        /// What differs, in words.
        what: String,
        /// The references under C and under Rust.
        refs: Box<(RefMap, RefMap)>,
    },
}

/// The elements of `a` not matched one for one in `b`, and those of `b`
/// not in `a` (both sorted).
fn multiset_diff<T: Ord + Clone>(a: &[T], b: &[T]) -> (Vec<T>, Vec<T>) {
    let (mut i, mut j) = (0, 0);
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort();
    b.sort();
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => {
                only_a.push(x.clone());
                i += 1;
            }
            (Some(_), Some(y)) => {
                only_b.push(y.clone());
                j += 1;
            }
            (Some(x), None) => {
                only_a.push(x.clone());
                i += 1;
            }
            (None, Some(y)) => {
                only_b.push(y.clone());
                j += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    (only_a, only_b)
}

/// The differences between the returns of one step's command and the
/// extended errors its thread read after it.
pub fn ret(c: &Observed, rust: &Observed) -> impl Iterator<Item = Diff> {
    let ret = (c.ret != rust.ret).then_some(Diff::Ret {
        c: c.ret,
        rust: rust.ret,
    });
    let ee = (c.ee != rust.ee).then_some(Diff::Ee {
        c: c.ee,
        rust: rust.ee,
    });
    ret.into_iter().chain(ee)
}

/// The differences between what the processes read and what the kernel
/// logged over a group of steps (a step and those run in its windows):
/// a driver may run a step in a window that the other makes wait for a
/// lock, so the same work can fall in another step of the group.
pub fn reads_and_logs<'a>(
    c: impl IntoIterator<Item = &'a Observed>,
    rust: impl IntoIterator<Item = &'a Observed>,
) -> Vec<Diff> {
    let total = |all: Vec<&'a Observed>| {
        let procs = all.iter().map(|o| o.reads.len()).max().unwrap_or(0);
        let mut reads = vec![Vec::new(); procs];
        let mut log = Vec::new();
        for o in all {
            for (p, r) in o.reads.iter().enumerate() {
                reads[p].extend(r.iter().cloned());
            }
            log.extend(o.log.iter().copied());
        }
        (reads, log)
    };
    let (rc, lc) = total(c.into_iter().collect());
    let (rr, lr) = total(rust.into_iter().collect());
    let mut diffs = Vec::new();
    for (pid, (a, b)) in rc.iter().zip(&rr).enumerate() {
        let (c, rust) = multiset_diff(a, b);
        if !c.is_empty() || !rust.is_empty() {
            diffs.push(Diff::Reads { pid, c, rust });
        }
    }
    let (c, rust) = multiset_diff(&lc, &lr);
    if !c.is_empty() || !rust.is_empty() {
        diffs.push(Diff::Log { c, rust });
    }
    diffs
}

/// A process's references by handle.
pub type RefMap = std::collections::BTreeMap<u32, idpool::driver::RefState>;

/// A node by owner and pointer, its serial left out.
type NodeKey = (Pid, u64);
/// A reference's strong and weak counts and death cookie.
type RefCounts = (u32, u32, Option<u64>);

/// Every difference between the drivers' states, nodes left out.
pub fn states(c: &Snapshot, rust: &Snapshot) -> Vec<Diff> {
    let mut diffs = Vec::new();
    for (pid, (pc, pr)) in c.procs.iter().zip(&rust.procs).enumerate() {
        let mut what = Vec::new();
        if pc.alive != pr.alive {
            what.push(format!("alive: C {} | Rust {}", pc.alive, pr.alive));
        }
        // A node's serial is each driver's own: userspace cannot tell one
        // incarnation from the next but by what it reads.
        let unserialed = |p: &idpool::driver::ProcState| -> Vec<(u32, NodeKey, RefCounts)> {
            p.refs
                .iter()
                .map(|(&h, r)| (h, (r.node.owner, r.node.ptr), (r.strong, r.weak, r.death)))
                .collect()
        };
        if unserialed(pc) != unserialed(pr) {
            what.push(format!("refs: C {:?} | Rust {:?}", pc.refs, pr.refs));
        }
        if pc.buffers != pr.buffers {
            what.push(format!("buffers: C {} | Rust {}", pc.buffers, pr.buffers));
        }
        if pc.frozen != pr.frozen {
            diffs.push(Diff::Frozen {
                pid,
                c: pc.frozen,
                rust: pr.frozen,
            });
        }
        if !what.is_empty() {
            diffs.push(Diff::State {
                pid,
                what: what.join("; "),
                refs: Box::new((pc.refs.clone(), pr.refs.clone())),
            });
        }
    }
    diffs
}

/// What explains a difference at `step` (with its plan): the rule, or
/// nothing (a new difference).
pub fn explain(step: &Step, plan: Plan, diff: &Diff) -> Option<&'static Rule> {
    match diff {
        Diff::Ret { c, rust } => ret_rule(step, *c, *rust),
        Diff::State { .. } if manager_fallback(step, plan) => Some(rule("manager-zero-fallback")),
        Diff::State { refs, .. } if manager_handle_held(&refs.0, &refs.1) => {
            Some(rule("manager-handle"))
        }
        _ if plan.fail == Some(AllocSite::Grow) => Some(rule("grow-failure")),
        Diff::Reads { c, rust, .. } => {
            if manager_handle(c, rust) {
                Some(rule("manager-handle"))
            } else if dead_node_freeze_notification(step, c, rust) {
                Some(rule("freeze-notify-dead-node"))
            } else if freeze_notification_repeated(step, c, rust) {
                Some(rule("freeze-notify-repeated"))
            } else if spam_reported_again(c, rust) {
                Some(rule("oneway-spam"))
            } else if spawn_requests_only(c, rust) {
                Some(rule("register-after-enter"))
            } else {
                None
            }
        }
        Diff::Log { c, .. } if c.contains(&Log::NotALooper) => Some(rule("non-looper-work")),
        Diff::Log { c, rust } => logs_explained(c, rust).then(|| rule("log-lines")),
        Diff::Ee {
            c: Some(c),
            rust: Some(rust),
        } => extended_error_explained(*c, *rust).then(|| rule("extended-error")),
        Diff::State { .. } | Diff::Ee { .. } | Diff::Frozen { .. } => None,
    }
}

/// Finding 0008: the extended error each driver records for the same
/// failed transaction. C records every failure with its
/// `return_error_param` (binder.c:3927-3930): `-EPROTO` for a reply or a
/// call against the transaction stack (3154, 3170, 3278, 3300), `-EINVAL`
/// for a target or an object it cannot find (3253, 2304). Rust records
/// only a failure with a source errno (thread.rs:1316-1323): `EINVAL` from
/// `pop_transaction_to_reply` and `top_of_transaction_stack`
/// (thread.rs:368-377, 1246-1260), `ENOENT` from `get_node_from_handle`
/// (process.rs:943-951); a dead or frozen target has none
/// (`BinderError::new_dead`, `new_frozen`, error.rs).
fn extended_error_explained(c: ExtendedError, rust: ExtendedError) -> bool {
    use idpool::driver::br_code::{DEAD_REPLY, FAILED_REPLY, FROZEN_REPLY, OK};
    let errno = |e: Errno| -e.code();
    let same_failure =
        c.command == FAILED_REPLY && rust.command == FAILED_REPLY && c.id_set == rust.id_set;
    let stack = (c.param, rust.param) == (errno(Errno::Proto), errno(Errno::Inval));
    let missing = (c.param, rust.param) == (errno(Errno::Inval), errno(Errno::NoEnt));
    let unrecorded = matches!(c.command, DEAD_REPLY | FROZEN_REPLY) && rust == ExtendedError::NONE;
    (same_failure && (stack || missing)) || (unrecorded && rust.command == OK)
}

/// Finding 0006, for a group of steps in which a process exited inside a
/// transaction's window: the target died while the objects were being
/// translated. The sender reads `BR_DEAD_REPLY` in C
/// (`binder_proc_transaction` finds the process dead) and
/// `BR_FAILED_REPLY` in Rust (`insert_or_update_handle`'s `ESRCH` fails
/// the translation). On C's side, the death came after some objects
/// already were translated. Its death emptied
/// its reference tree, so the buffer's first handles now name references C
/// made after the death, for other nodes; whether C then finds the process
/// dead or a later object fails, `binder_transaction_buffer_release`
/// decrements those references (binder.c 2109-2115) and prints "invalid
/// dec" where the strength differs (`binder_dec_ref_olocked`, 1275-1293).
/// Only with Rust's failed copy ("Failure in copy_transaction_data": its
/// insert refused the dead process; the lines are a multiset difference, so
/// its failed translation is matched by C's own when a later object
/// failed) and no other line the log-lines rule does not allow.
pub fn target_died_in_window(diff: &Diff) -> Option<&'static Rule> {
    if let Diff::Reads { c, rust, .. } = diff {
        let dead_against_failed = brs(c) == [Br::DeadReply] && brs(rust) == [Br::FailedReply];
        return dead_against_failed.then(|| rule("dying-target-reply"));
    }
    if let Diff::Ee {
        rust: Some(rust), ..
    } = diff
    {
        // Rust's insert refused the dead process (`ESRCH`) where C went on.
        let srch = rust.command == idpool::driver::br_code::FAILED_REPLY
            && rust.param == -Errno::Srch.code();
        return srch.then(|| rule("dying-target-reply"));
    }
    let Diff::Log { c, rust } = diff else {
        return None;
    };
    let rest: Vec<Log> = c
        .iter()
        .filter(|l| !matches!(l, Log::InvalidDecrement { .. }))
        .copied()
        .collect();
    let explained =
        rest.len() < c.len() && rust.contains(&Log::CopyFailed) && logs_explained(&rest, rust);
    explained.then(|| rule("dying-target-reply"))
}

/// Finding 0004 seen in the nodes: a `BINDER_SET_CONTEXT_MGR` or
/// `BINDER_SET_CONTEXT_MGR_EXT` refused by both drivers made the node it
/// names in Rust first (`Process::set_as_manager`, process.rs:746-771,
/// takes a `NodeRef` before `Context::set_manager_node` refuses), with the
/// call's cookie; C refuses before `binder_new_node` (binder.c:5532-5550).
/// From then on `BINDER_GET_NODE_DEBUG_INFO` lists a node in Rust only, and
/// a node object with that pointer and another cookie (objects carry the
/// pointer as the cookie) is refused by Rust (`get_existing_node`,
/// EINVAL): the drivers' states have diverged.
pub fn refused_manager_node(
    step: &Step,
    c: Option<Ret>,
    rust: Option<Ret>,
    c_state: &Snapshot,
    rust_state: &Snapshot,
) -> bool {
    let Some(ptr) = manager_call_ptr(step) else {
        return false;
    };
    let refused = |r: Option<Ret>| matches!(r, Some(Ret::Err(_)));
    let has = |s: &Snapshot| {
        s.procs
            .get(step.pid.index())
            .is_some_and(|p| p.nodes.contains_key(&ptr))
    };
    refused(c) && refused(rust) && has(rust_state) && !has(c_state)
}

/// The pointer of the node a `BINDER_SET_CONTEXT_MGR(_EXT)` names.
fn manager_call_ptr(step: &Step) -> Option<u64> {
    match step.command {
        Command::SetManager => Some(0),
        Command::SetManagerExt { ptr, .. } => Some(ptr),
        _ => None,
    }
}

/// What earlier steps left behind that explains a difference steps later:
/// the known differences whose symptom can surface after their cause.
#[derive(Clone, Debug, Default)]
pub struct Aftermath {
    /// The program's processes (`None`: each its own task).
    procs: Option<Procs>,
    /// The processes that have exited.
    gone: Vec<Pid>,
    /// The process whose node C took as the context manager's last (its
    /// `BINDER_SET_CONTEXT_MGR(_EXT)` returned 0), while it lives.
    manager: Option<Pid>,
    /// Finding 0020: the steps, by index, of a `BINDER_FREEZE` both drivers
    /// refused with the same error, on a pid that more than one process
    /// has (two opens by one task). C freezes the pid's processes in
    /// `binder_procs` order, the last opened first (`hlist_add_head`,
    /// binder.c:6118; the loop stops at the first failure, 5940-5941), Rust
    /// in `all_procs` order, the first opened first (context.rs:86; `?`,
    /// process.rs:1648), so what each froze before the failure differs.
    refused_freezes: Vec<usize>,
    /// Finding 0021: the steps, by index, of a transaction to handle 0 that
    /// C refused as one to the manager from its own process ("got
    /// transaction to context manager from process owning it",
    /// `target_proc->pid == proc->pid`, binder.c:3239) and Rust did not
    /// refuse (`core::ptr::eq(self, owner)`, process.rs:928): the sender is
    /// another open by the manager's task.
    manager_task_sends: Vec<usize>,
    /// Finding 0004: the nodes, by owner and pointer, that a
    /// `BINDER_SET_CONTEXT_MGR(_EXT)` refused by both drivers named. Rust's
    /// refused call took a strong reference on the node first, and taking
    /// it can park the node's work on the calling thread's deferred list
    /// (`Process::set_as_manager`, process.rs:746-771; C refuses before it
    /// touches a node, binder.c:5532-5550). From then on the node's
    /// `BR_INCREFS`, `BR_ACQUIRE`, `BR_RELEASE` and `BR_DECREFS` may come
    /// later than C's, or to the calling thread instead of the one C gives
    /// them to.
    refused: Vec<NodeKey>,
    /// The nodes, by owner and pointer, each process sent in a transaction.
    sent: Vec<NodeKey>,
    /// Finding 0017: the processes a thread of which left
    /// (`BINDER_THREAD_EXIT`) after the process sent a node. A node's first
    /// `BR_INCREFS`/`BR_ACQUIRE` waits on the sending thread's list; on
    /// the thread's exit C's `binder_release_work` drops it (`case
    /// BINDER_WORK_NODE: break;`, binder.c:5243-5244) and Rust's
    /// `Node::cancel` moves it to the process (node.rs:741-756, "we should
    /// move ourselves to ensure the refcount update is still delivered"),
    /// where any thread reads it then or later.
    exited: Vec<Pid>,
    /// The threads with a call out: every thread that made one (the
    /// model does not say when it was answered; an over-approximation the
    /// rule below narrows by what each driver reads).
    calling: Vec<(Pid, idpool::driver::Tid)>,
    /// Finding 0018: the processes a thread of which left
    /// (`BINDER_THREAD_EXIT`) after making a call. C's
    /// `binder_thread_release` clears the thread from the calls it made
    /// (`t->from = NULL`, binder.c:5407-5409), so a call back into its
    /// process is not routed to it (the stack search skips it,
    /// 3316-3329) and goes to the process; Rust's `find_target_thread`
    /// returns the transaction's `from` whatever became of it
    /// (transaction.rs:290-299), and the delivery to the gone thread
    /// fails with `BR_DEAD_REPLY`.
    exited_callers: Vec<Pid>,
    /// Whether a process has exited so far.
    anyone_exited: bool,
    /// Finding 0022: the nodes, by owner and pointer, sent by a call from
    /// a thread that then read no `BR_INCREFS` of the node in either driver
    /// (the node's first-reference work waits on that thread's list,
    /// deferred: binder.c:854-855, thread.rs:359-361), with the thread.
    deferred_on_caller: Vec<(NodeKey, idpool::driver::Tid)>,
    /// Finding 0022: those nodes that another thread of the owner then sent
    /// strong and read the node's `BR_INCREFS` in both drivers: C moved
    /// the node's work to that thread (`binder_dequeue_work_ilocked`,
    /// binder.c:843-850), Rust delivered a `NodeWrapper` there
    /// (node.rs:451-459, 466-481) and left the `Node` itself queued, marked
    /// pushed, on the caller's list (wrapper.rs:52-57), so that its later
    /// decrements push nothing (`should_normal_push`, node.rs:415, 82-84)
    /// until the caller reads its list.
    stale_node_work: Vec<NodeKey>,
    /// Finding 0019: the steps, by index, at which each driver refused a
    /// call for its own reason: C's caller read `BR_DEAD_REPLY` (C looks
    /// the target up first; `binder_get_node_refs_for_txn` finds no
    /// `node->proc`, binder.c:2975-2982, and the call fails at 3248-3254
    /// with `-EINVAL`, before the stack check at 3298-3314), and Rust
    /// logged its bad-stack line (it checks the stack first,
    /// `top_of_transaction_stack`, thread.rs:1364 and 1246-1251, `EINVAL`,
    /// and would find the target dead only in `Transaction::new`'s buffer
    /// allocation, process.rs:1069). Each driver's own statement of the
    /// check that refused, so that nothing else is taken for it.
    refused_two_ways: Vec<usize>,
    /// Finding 0013, read later: the freeze notifications, by process and
    /// cookie, asked for after a process exited (their node's owner may be
    /// the dead one). Rust queues a "not frozen" message at once
    /// (freeze.rs:269-271), which a process without a thread that takes
    /// its work reads steps later; C queues nothing without `node->proc`
    /// (binder.c:3974-3983).
    freeze_after_death: Vec<(Pid, u64)>,
    /// The freeze-notification cookies, by process, that Rust accepted:
    /// Rust keys a process's listeners by cookie and refuses the cookie
    /// for another node (`freeze-cookie`).
    freeze_cookies: Vec<(Pid, u64)>,
}

impl Aftermath {
    /// Nothing seen yet, for a program of these processes.
    pub fn new(procs: &Procs) -> Aftermath {
        Aftermath {
            procs: Some(procs.clone()),
            ..Aftermath::default()
        }
    }

    fn same_task(&self, a: Pid, b: Pid) -> bool {
        self.procs.as_ref().map_or(a == b, |p| p.same_task(a, b))
    }

    /// How many living processes have `pid`'s task (its pid).
    fn live_opens(&self, pid: Pid) -> usize {
        let alive = |q: Pid| !self.gone.contains(&q);
        self.procs.as_ref().map_or(1, |p| p.opens_alive(pid, alive))
    }

    /// Notes what step `i`, `step`, with what each driver showed, leaves
    /// for later (and for the explanation of its own differences).
    pub fn follow(&mut self, i: usize, step: &Step, c_obs: &Observed, rust_obs: &Observed) {
        let (c, rust) = (c_obs.ret, rust_obs.ret);
        let refused = |r: Option<Ret>| matches!(r, Some(Ret::Err(_)));
        if let Command::Freeze { target, .. } = step.command {
            if refused(c) && c == rust && self.live_opens(target) > 1 {
                self.refused_freezes.push(i);
            }
        }
        // Rust refuses the manager's own process with EINVAL
        // (process.rs:929), as its extended error records; any other
        // outcome (delivered, or failed later for another reason, such as
        // an allocation) means it did not take the sender for the manager.
        let rust_refused_as_manager = rust_obs.ee.is_some_and(|ee| {
            ee.command == idpool::driver::br_code::FAILED_REPLY && ee.param == -Errno::Inval.code()
        });
        // The sender is another open by the manager's task, not the
        // manager's own process.
        let manager_sibling = self
            .manager
            .is_some_and(|m| m != step.pid && self.same_task(m, step.pid));
        if matches!(
            step.command,
            Command::Send { to: 0, .. } | Command::Call { to: 0, .. }
        ) && manager_sibling
            && c_obs.log.contains(&Log::TransactionToOwnManager)
            && !rust_refused_as_manager
        {
            self.manager_task_sends.push(i);
        }
        if manager_call_ptr(step).is_some() && c == Some(Ret::Ok) {
            self.manager = Some(step.pid);
        }
        if matches!(step.command, Command::Call { .. })
            && rust_obs.log.contains(&Log::CallBadStack)
            && c_obs
                .reads
                .get(step.pid.index())
                .and_then(|r| r.last())
                .is_some_and(|r| r.br == Br::DeadReply)
        {
            self.refused_two_ways.push(i);
        }
        self.follow_node_work(step, c_obs, rust_obs);
        if let Some(ptr) = manager_call_ptr(step) {
            if refused(c) && refused(rust) && !self.refused.contains(&(step.pid, ptr)) {
                self.refused.push((step.pid, ptr));
            }
        }
        match &step.command {
            Command::Send { payload, .. }
            | Command::Call { payload, .. }
            | Command::Reply(payload) => {
                if matches!(step.command, Command::Call { .. }) {
                    self.calling.push((step.pid, step.tid));
                }
                for object in payload.objects.iter().flat_map(|o| o.expand()) {
                    if let idpool::driver::Object::Node { ptr, .. } = object {
                        if !self.sent.contains(&(step.pid, ptr)) {
                            self.sent.push((step.pid, ptr));
                        }
                    }
                }
            }
            Command::ThreadExit => {
                if self.sent.iter().any(|&(pid, _)| pid == step.pid) {
                    self.exited.push(step.pid);
                }
                if self.calling.contains(&(step.pid, step.tid)) {
                    self.exited_callers.push(step.pid);
                }
            }
            Command::RequestFreeze { cookie, .. } if rust == Some(Ret::Ok) => {
                self.freeze_cookies.push((step.pid, *cookie));
                if self.anyone_exited {
                    self.freeze_after_death.push((step.pid, *cookie));
                }
            }
            Command::Exit => {
                self.anyone_exited = true;
                self.gone.push(step.pid);
                if self.manager == Some(step.pid) {
                    self.manager = None;
                }
            }
            _ => {}
        }
    }

    /// Finding 0022's two steps, each keyed on what both drivers showed:
    /// a call sending a node whose sender read no `BR_INCREFS` of it, then
    /// another thread of the owner sending it strong and reading its
    /// `BR_INCREFS` in both drivers.
    fn follow_node_work(&mut self, step: &Step, c_obs: &Observed, rust_obs: &Observed) {
        let (payload, call) = match &step.command {
            Command::Call { payload, .. } => (payload, true),
            Command::Send { payload, .. } | Command::Reply(payload) => (payload, false),
            _ => return,
        };
        let read_incref = |o: &Observed, ptr: u64| {
            o.reads.get(step.pid.index()).is_some_and(|r| {
                r.iter()
                    .any(|r| r.tid == step.tid && r.br == Br::IncRefs(ptr))
            })
        };
        let both_read = |ptr| read_incref(c_obs, ptr) && read_incref(rust_obs, ptr);
        let neither_read = |ptr| !read_incref(c_obs, ptr) && !read_incref(rust_obs, ptr);
        for object in payload.objects.iter().flat_map(|o| o.expand()) {
            let idpool::driver::Object::Node { ptr, strong } = object else {
                continue;
            };
            let key = (step.pid, ptr);
            let waiting_elsewhere = self
                .deferred_on_caller
                .iter()
                .any(|&(k, t)| k == key && t != step.tid);
            if strong && waiting_elsewhere && both_read(ptr) {
                if !self.stale_node_work.contains(&key) {
                    self.stale_node_work.push(key);
                }
            } else if call && neither_read(ptr) && !self.sent.contains(&key) {
                self.deferred_on_caller.push((key, step.tid));
            }
        }
    }

    /// Finding 0022's symptom, in the owner of a node whose work Rust left
    /// on a waiting caller's list: one driver reads what the other reads
    /// and more, the more being only `BR_DECREFS`/`BR_RELEASE` of such a
    /// node (C at the decrement, Rust when the caller reads its list).
    fn stale_node_decrement(&self, pid: Pid, c: &[Read], rust: &[Read]) -> bool {
        let stale = |br: &Br| matches!(br, Br::DecRefs(p) | Br::Release(p) if self.stale_node_work.contains(&(pid, *p)));
        only_more(rust, c, stale) || only_more(c, rust, stale)
    }

    /// The rule a difference at step `i`, `step`, follows from, if an
    /// earlier step (or what [`Aftermath::follow`] saw of this one)
    /// explains it.
    pub fn explain(&self, i: usize, step: &Step, diff: &Diff) -> Option<&'static Rule> {
        let refused_two_ways = self.refused_two_ways.contains(&i);
        match diff {
            Diff::Ret { c, rust } => self.freeze_cookie_taken(step, *c, *rust),
            Diff::Ee {
                c: Some(c),
                rust: Some(rust),
            } if refused_two_ways => {
                use idpool::driver::br_code::{DEAD_REPLY, FAILED_REPLY};
                let einval = -Errno::Inval.code();
                let dead_against_failed = (c.command, rust.command) == (DEAD_REPLY, FAILED_REPLY)
                    && c.param == einval
                    && rust.param == einval
                    && c.id_set == rust.id_set;
                dead_against_failed.then(|| rule("dead-target-bad-stack"))
            }
            // Each driver names the check that refused the call: C's
            // "cannot find target node" (binder.c:3249), Rust's "got new
            // transaction with bad transaction stack" (thread.rs:1250).
            Diff::Log { c, rust }
                if refused_two_ways
                    && c[..] == [Log::NoTargetNode]
                    && rust[..] == [Log::CallBadStack] =>
            {
                Some(rule("dead-target-bad-stack"))
            }
            Diff::Reads { pid, c, rust } => {
                let pid = Pid(*pid as u8);
                if pid == step.pid
                    && refused_two_ways
                    && brs(c) == [Br::DeadReply]
                    && brs(rust) == [Br::FailedReply]
                {
                    Some(rule("dead-target-bad-stack"))
                } else if self.refused_nodes_only(pid, c, rust) {
                    Some(rule("failed-set-manager"))
                } else if self.moved_node_work(pid, c, rust) {
                    Some(rule("thread-exit-node-work"))
                } else if self.stale_node_decrement(pid, c, rust) {
                    Some(rule("stale-node-work"))
                } else if self.dead_node_notification_read_later(step, pid, c, rust) {
                    Some(rule("freeze-notify-dead-node"))
                } else if self.call_to_exited_caller(step, pid, c, rust) {
                    Some(rule("call-to-exited-caller"))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The rule of a difference at step `i` that each driver's own
    /// statement at that step names, before any rule that reads only the
    /// symptoms: findings 0020 and 0021, which need two opens by one task.
    /// A freeze that both refused sends no notification in either driver
    /// unless it froze another process of the pid first, so finding 0016's
    /// rule (a notification repeated) does not apply to it.
    pub fn explain_first(&self, i: usize, diff: &Diff) -> Option<&'static Rule> {
        if self.manager_task_sends.contains(&i) {
            return Some(rule("manager-task"));
        }
        if !self.refused_freezes.contains(&i) {
            return None;
        }
        // A process one driver froze and the other did not reach, and only
        // the freeze notifications of its nodes (and the BR_SPAWN_LOOPER
        // they may ask for).
        let notification = |r: &Read| matches!(r.br, Br::FrozenBinder { .. } | Br::SpawnLooper);
        let explained = match diff {
            Diff::Frozen { .. } => true,
            Diff::Reads { c, rust, .. } => c.iter().chain(rust).all(notification),
            _ => false,
        };
        explained.then(|| rule("freeze-pid-order"))
    }

    /// Finding 0004's symptom: what one process read differs only by the
    /// work of nodes a refused manager call of its own named (and the
    /// `BR_SPAWN_LOOPER` that reading such work may ask for).
    fn refused_nodes_only(&self, pid: Pid, c: &[Read], rust: &[Read]) -> bool {
        let named = |r: &Read| match r.br {
            Br::IncRefs(p) | Br::Acquire(p) | Br::Release(p) | Br::DecRefs(p) => {
                self.refused.contains(&(pid, p))
            }
            _ => false,
        };
        let reads = || c.iter().chain(rust);
        reads().any(named) && reads().all(|r| named(r) || r.br == Br::SpawnLooper)
    }

    /// Finding 0017's symptom, at the exit or later, in a process a thread
    /// of which exited: one driver reads what the other reads and more, the
    /// more being only `BR_INCREFS` and `BR_ACQUIRE` of nodes the process
    /// sent (and the `BR_SPAWN_LOOPER` reading that work may ask for).
    /// Rust reads the update it moved to the process, at the exit or when
    /// a thread of the process next reads; C, which dropped it, reads it
    /// when the node is sent again and its first-reference work is queued
    /// anew (binder.c:843-850).
    fn moved_node_work(&self, pid: Pid, c: &[Read], rust: &[Read]) -> bool {
        self.exited.contains(&pid)
            && (self.only_more_node_work(pid, c, rust) || self.only_more_node_work(pid, rust, c))
    }

    /// Whether `more` is `fewer` with only first-reference node work of
    /// nodes `pid` sent (and `BR_SPAWN_LOOPER`s) in between, at least one.
    fn only_more_node_work(&self, pid: Pid, fewer: &[Read], more: &[Read]) -> bool {
        only_more(
            fewer,
            more,
            |br| matches!(br, Br::IncRefs(p) | Br::Acquire(p) if self.sent.contains(&(pid, *p))),
        )
    }

    /// Finding 0013's symptom at a later step than the request: Rust reads
    /// what C reads and more, the more being only "not frozen"
    /// notifications asked for after a process died (and the
    /// `BR_SPAWN_LOOPER` reading them may ask for). A freeze or a thaw is
    /// left to finding 0016's rule.
    fn dead_node_notification_read_later(
        &self,
        step: &Step,
        pid: Pid,
        c: &[Read],
        rust: &[Read],
    ) -> bool {
        if matches!(step.command, Command::Freeze { .. } | Command::Thaw(_)) {
            return false;
        }
        only_more(c, rust, |br| {
            matches!(br, Br::FrozenBinder { cookie, frozen: false }
                if self.freeze_after_death.contains(&(pid, *cookie)))
        })
    }

    /// Finding 0018's symptom at a call, once a thread that made a call
    /// left: the caller reads `BR_DEAD_REPLY` in Rust only (after what
    /// both read), or a process whose calling thread left reads the call
    /// in C only (with the `BR_SPAWN_LOOPER` its arrival may ask for).
    fn call_to_exited_caller(&self, step: &Step, pid: Pid, c: &[Read], rust: &[Read]) -> bool {
        if !matches!(step.command, Command::Call { .. }) || self.exited_callers.is_empty() {
            return false;
        }
        let (c, rust) = (brs(c), brs(rust));
        let dead_reply_in_rust_only = pid == step.pid
            && rust.last() == Some(&Br::DeadReply)
            && rust[..rust.len() - 1] == c[..];
        let call_in_c_only = pid != step.pid
            && self.exited_callers.contains(&pid)
            && rust.is_empty()
            && c.iter().any(|b| matches!(b, Br::Call(_)))
            && c.iter().all(|b| matches!(b, Br::Call(_) | Br::SpawnLooper));
        dead_reply_in_rust_only || call_in_c_only
    }

    /// `BC_REQUEST_FREEZE_NOTIFICATION` with a cookie the process already
    /// gave a listener: C keeps a cookie per reference and accepts it
    /// (binder.c:3959-3970), Rust keys the process's listeners by cookie and
    /// refuses it with `EINVAL` for another node (freeze.rs:212-219).
    fn freeze_cookie_taken(
        &self,
        step: &Step,
        c: Option<Ret>,
        rust: Option<Ret>,
    ) -> Option<&'static Rule> {
        let Command::RequestFreeze { cookie, .. } = step.command else {
            return None;
        };
        (c == Some(Ret::Ok)
            && rust == Some(Ret::Err(Errno::Inval))
            && self.freeze_cookies.contains(&(step.pid, cookie)))
        .then(|| rule("freeze-cookie"))
    }
}

/// Whether `more` is `fewer` with reads in between that are only `extra`
/// ones (at least one) or `BR_SPAWN_LOOPER`s, which reading more work may
/// ask for.
fn only_more(fewer: &[Read], more: &[Read], extra: impl Fn(&Br) -> bool) -> bool {
    let mut fewer = fewer.iter().peekable();
    let mut extras = 0;
    for r in more {
        if fewer.peek() == Some(&r) {
            fewer.next();
        } else if extra(&r.br) {
            extras += 1;
        } else if r.br != Br::SpawnLooper {
            return false;
        }
    }
    fewer.next().is_none() && extras > 0
}

/// Finding 0005: `BC_INCREFS`/`BC_ACQUIRE` on handle 0 whose reference to
/// the manager's node cannot be made (its allocation fails): C counts the
/// reference at descriptor 0 instead, Rust counts nothing.
fn manager_fallback(step: &Step, plan: Plan) -> bool {
    matches!(
        step.command,
        Command::Ref(RefCmd::IncRefs | RefCmd::Acquire, 0)
    ) && plan.fail == Some(AllocSite::Ref)
}

/// `BINDER_GET_NODE_INFO_FOR_REF`'s differences (finding 0002): C fails
/// with `EINVAL` where Rust fails with `ENOENT` (no such handle) or
/// answers (a weak-only reference), and the counts differ.
fn ret_rule(step: &Step, c: Option<Ret>, rust: Option<Ret>) -> Option<&'static Rule> {
    use idpool::driver::Command;
    match step.command {
        Command::Freeze { .. } | Command::Thaw(_)
            if c == Some(Ret::Err(Errno::Inval)) && rust == Some(Ret::Ok) =>
        {
            return Some(rule("freeze-without-process"));
        }
        Command::NodeDebug(_) if rust_lists_more(c, rust) => return Some(rule("node-debug")),
        Command::ExtendedError => {
            if let (Some(Ret::Extended(c)), Some(Ret::Extended(rust))) = (c, rust) {
                return extended_error_explained(c, rust).then(|| rule("extended-error"));
            }
        }
        Command::SetManager | Command::SetManagerExt { .. }
            if rust == Some(Ret::Err(Errno::Inval))
                && matches!(
                    c,
                    Some(Ret::Ok | Ret::Err(Errno::Busy) | Ret::Err(Errno::Perm))
                ) =>
        {
            return Some(rule("manager-ext-cookie"));
        }
        _ => {}
    }
    if !matches!(step.command, Command::NodeInfo(_)) {
        return None;
    }
    let node_info = matches!(
        (c, rust),
        (
            Some(Ret::Err(Errno::Inval)),
            Some(Ret::Err(Errno::NoEnt) | Ret::NodeInfo { .. })
        ) | (Some(Ret::NodeInfo { .. }), Some(Ret::NodeInfo { .. }))
    );
    node_info.then(|| rule("node-info"))
}

/// Finding 0014: `BINDER_GET_NODE_DEBUG_INFO` finds in Rust a node C no
/// longer (or never) has: Rust's answer is a node below C's (C's is the
/// next one, or none: pointer 0, as no node the walk returns has pointer
/// 0). A node C lists and Rust does not, or the same node told otherwise,
/// is new.
fn rust_lists_more(c: Option<Ret>, rust: Option<Ret>) -> bool {
    match (c, rust) {
        (Some(Ret::NodeDebug { ptr: c, .. }), Some(Ret::NodeDebug { ptr: rust, .. })) => {
            rust != 0 && (c == 0 || c > rust)
        }
        _ => false,
    }
}

/// Finding 0013: a freeze notification asked for on a node whose owner
/// died: Rust's first message reads the dead owner as not frozen
/// (`FreezeMessage::do_work`, freeze.rs:123-139); C queues no work
/// without `node->proc` (binder.c:3974-3983).
fn dead_node_freeze_notification(step: &Step, c: &[Read], rust: &[Read]) -> bool {
    let Command::RequestFreeze { cookie, .. } = step.command else {
        return false;
    };
    // The notification is work for the process: with a thread to ask for,
    // Rust's queueing it may ask for one more (`BR_SPAWN_LOOPER`).
    let notification = Br::FrozenBinder {
        cookie,
        frozen: false,
    };
    let brs = brs(rust);
    c.is_empty() && (brs == [notification.clone()] || brs == [notification, Br::SpawnLooper])
}

/// Finding 0016: a `BINDER_FREEZE` that changes nothing: C's
/// `binder_add_freeze_work` queues a `BR_FROZEN_BINDER` with the new
/// state to every listener on the target's nodes, whatever it last told
/// (binder.c:5669-5674); Rust's `FreezeMessage::do_work` drops a message
/// whose state is the one it last sent (`last_is_frozen`,
/// freeze.rs:125-128). What C reads more is only those notifications,
/// each with the state the command asked for.
fn freeze_notification_repeated(step: &Step, c: &[Read], rust: &[Read]) -> bool {
    let state = match step.command {
        Command::Freeze { .. } => true,
        Command::Thaw(_) => false,
        _ => return false,
    };
    let notification =
        |r: &Read| matches!(r.br, Br::FrozenBinder { frozen, .. } if frozen == state);
    // With a thread to ask for, C's queueing the notifications may ask for
    // one more (`BR_SPAWN_LOOPER`).
    rust.is_empty()
        && c.iter().any(notification)
        && c.iter().all(|r| notification(r) || r.br == Br::SpawnLooper)
}

/// Finding 0015's symptom: where Rust reads `BR_ONEWAY_SPAM_SUSPECT`, C
/// reads `BR_TRANSACTION_COMPLETE` (it reported the spammer once,
/// `debug_low_async_space_locked`'s `oneway_spam_detected`,
/// binder_alloc.c:505-509; Rust's `low_oneway_space` has no such flag).
fn spam_reported_again(c: &[Read], rust: &[Read]) -> bool {
    !c.is_empty()
        && c.len() == rust.len()
        && c.iter().zip(rust).all(|(a, b)| {
            a.tid == b.tid && a.br == Br::TransactionComplete && b.br == Br::OnewaySpamSuspect
        })
}

/// Finding 0012's symptom: the reads differ only in `BR_SPAWN_LOOPER`s.
fn spawn_requests_only(c: &[Read], rust: &[Read]) -> bool {
    let spawn = |r: &Read| r.br == Br::SpawnLooper;
    !(c.is_empty() && rust.is_empty()) && c.iter().chain(rust).all(spawn)
}

/// The returns of `reads`, whichever thread read them.
fn brs(reads: &[Read]) -> Vec<Br> {
    reads.iter().map(|r| r.br.clone()).collect()
}

/// The objects a read carries, with its kind: a one-way transaction, a
/// call or a reply.
fn carried(br: &Br) -> Option<(u8, &[Received])> {
    match br {
        Br::Transaction(o) => Some((0, o)),
        Br::Call(o) => Some((1, o)),
        Br::Reply(o) => Some((2, o)),
        _ => None,
    }
}

/// Finding 0001: the reads differ only in the handles transactions'
/// objects were given, one of them 0 under C and another under Rust (the
/// handles after it shift with it), each read by the same thread.
fn manager_handle(c: &[Read], rust: &[Read]) -> bool {
    if c.len() != rust.len() {
        return false;
    }
    let mut zero_against_other = false;
    for (a, b) in c.iter().zip(rust) {
        if a.tid != b.tid {
            return false;
        }
        let (a, b) = (&a.br, &b.br);
        match (carried(a), carried(b)) {
            (Some((ka, oc)), Some((kb, or))) if ka == kb && oc.len() == or.len() => {
                for (x, y) in oc.iter().zip(or) {
                    match (x, y) {
                        (
                            Received::Handle {
                                handle: hc,
                                strong: s1,
                            },
                            Received::Handle {
                                handle: hr,
                                strong: s2,
                            },
                        ) if s1 == s2 => zero_against_other |= *hc == 0 && *hr != 0,
                        _ if x == y => {}
                        _ => return false,
                    }
                }
            }
            _ if a == b => {}
            _ => return false,
        }
    }
    zero_against_other
}

/// Finding 0001 in the references held (the transaction that made them
/// may still wait in a node's one-way queue): C holds a node at handle 0
/// that Rust holds at another handle.
fn manager_handle_held(c: &RefMap, rust: &RefMap) -> bool {
    let Some(zero) = c.get(&0) else {
        return false;
    };
    let same_node = |r: &idpool::driver::RefState| {
        (r.node.owner, r.node.ptr) == (zero.node.owner, zero.node.ptr)
    };
    !rust.get(&0).is_some_and(same_node) && rust.iter().any(|(&h, r)| h != 0 && same_node(r))
}

/// The log lines each driver prints where the other prints nothing (or
/// another kind of line), finding 0003: whether every line printed by one
/// driver only is one `docs/findings/0003-kernel-log-lines.md` lists.
fn logs_explained(c: &[Log], rust: &[Log]) -> bool {
    // C's pr_err for a buffer object that no longer resolves, and Rust's
    // "no such ref" for the same release, say one thing in two ways.
    let bad_buffer = c.iter().filter(|l| **l == Log::BadBufferObject).count();
    let no_such_ref = rust
        .iter()
        .filter(|l| matches!(l, Log::InvalidRef(_)))
        .count();
    let paired = bad_buffer.min(no_such_ref);
    let mut rust_left: Vec<&Log> = Vec::new();
    let mut skip = paired;
    for l in rust {
        if skip > 0 && matches!(l, Log::InvalidRef(_)) {
            skip -= 1;
            continue;
        }
        rust_left.push(l);
    }
    let mut skip = paired;
    let c_left = c.iter().filter(|l| {
        if skip > 0 && **l == Log::BadBufferObject {
            skip -= 1;
            false
        } else {
            true
        }
    });
    let c_only_ok = |l: &Log| {
        matches!(
            l,
            Log::ManagerAcquiresZero
                | Log::GotOtherHandle { .. }
                | Log::WeakAsStrong
                | Log::InvalidRef(_)
                | Log::ManagerBadUid
                | Log::NoTargetNode
                | Log::TransactionToOwnManager
                | Log::TransactionFailed
                | Log::ObjectInvalidHandle(_)
                | Log::DeadProcess
                | Log::UnexpectedWork
                | Log::IoctlFailed(_)
                | Log::BadBufferObject
                | Log::UnsupportedCommand
                | Log::LooperMisuse
                | Log::NotALooper
                | Log::ReplyTargetGone
                | Log::ReplyBadStack
                | Log::FrozenProcess
                | Log::UndeliveredFreeze
        )
    };
    let rust_only_ok = |l: &Log| {
        matches!(
            l,
            Log::CopyFailed
                | Log::InvalidDecrement { .. }
                | Log::TranslateFailed
                | Log::RefcountUnderflow
                | Log::IoctlFailed(Errno::Again)
                | Log::BufferAllocFailed
                | Log::ReplyFailed
                | Log::ReplyNoStack
                | Log::FreezeDuplicateCookie
                | Log::FreezeDoneNotFound
                // A reply to a gone caller carrying a strong handle to a
                // weak-only reference: Rust translates the objects before
                // it finds the caller gone (Thread::reply_inner builds the
                // reply, thread.rs:1426, before deliver_reply, 1432), C
                // looks at the caller first and never translates.
                | Log::WeakAsStrong
                // A freeze message left at the process's release:
                // FreezeMessage::cancel's debug line (freeze.rs:144-151);
                // C logs its "undelivered freeze notification" only for a
                // clear (binder.c:5245-5254), and queues no message at all
                // for a dead node (finding 0013).
                | Log::UndeliveredFreeze
        )
    };
    c_left.into_iter().all(c_only_ok) && rust_left.into_iter().all(rust_only_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_invalid_decrements_belong_to_the_dying_target_only_beside_its_lines() {
        let log = |c: &[Log], rust: &[Log]| Diff::Log {
            c: c.to_vec(),
            rust: rust.to_vec(),
        };
        let weak = Log::InvalidDecrement { strong: false };
        let rust = [Log::TranslateFailed, Log::CopyFailed];
        let found = |d: &Diff| target_died_in_window(d).map(|r| r.name);
        // C finds the process dead, or a later object fails.
        let dead = [weak, Log::DeadProcess, Log::BadBufferObject];
        assert_eq!(found(&log(&dead, &rust)), Some("dying-target-reply"));
        // (Both failed a translation then: only Rust's copy line differs.)
        let later = [weak, Log::ObjectInvalidHandle(2), Log::BadBufferObject];
        assert_eq!(
            found(&log(&later, &[Log::CopyFailed])),
            Some("dying-target-reply")
        );
        // Without Rust's failed copy, or without an invalid decrement, or
        // beside a line no rule allows: not this.
        assert_eq!(found(&log(&dead, &[Log::TranslateFailed])), None);
        assert_eq!(found(&log(&dead[1..], &rust)), None);
        assert_eq!(found(&log(&[weak, Log::Bug], &rust)), None);
    }

    /// The signature of the first difference `program` (a trace's body)
    /// stops at, or `None` when it runs through.
    fn stops_at(program: &str) -> Option<String> {
        let text = format!("idpool-trace v1\ntarget binder_commands\n{program}\n");
        let trace = crate::targets::parse_trace(&text).expect("a trace");
        let body = trace
            .body()
            .downcast_ref::<super::super::CmdProgram>()
            .expect("a binder_commands program");
        super::super::run(body)
            .err()
            .map(|f| f.signature().to_string())
    }

    /// Finding 0019 is named only where both refusals meet: without the
    /// outstanding call (a dead target alone) and without the death (the
    /// stack alone) the drivers answer alike and only finding 0008's
    /// extended errors differ; a dead target from a thread that made a
    /// call that was answered is not 0019 either.
    #[test]
    fn dead_target_bad_stack_needs_both_refusals() {
        let rule = |p: &str| {
            let s = stops_at(p).expect("a difference");
            s.split(':').next().unwrap_or_default().to_string()
        };
        let both = "procs 3\np0 set-manager\np1 send 0 node 1\np2 send 0 node 1\np2 exit\np0 call 1\np0 call 2";
        assert_eq!(rule(both), "binder_commands/dead-target-bad-stack");
        let dead_only =
            "procs 3\np0 set-manager\np1 send 0 node 1\np2 send 0 node 1\np2 exit\np0 call 2";
        assert_eq!(rule(dead_only), "binder_commands/extended-error");
        let stack_only =
            "procs 3\np0 set-manager\np1 send 0 node 1\np2 send 0 node 1\np0 call 1\np0 call 2";
        assert_eq!(rule(stack_only), "binder_commands/extended-error");
        let answered = "procs 3\np0 set-manager\np1 send 0 node 1\np2 send 0 node 1\np0 call 1\np1 reply\np2 exit\np0 call 2";
        assert_eq!(rule(answered), "binder_commands/extended-error");
    }

    /// Findings 0020 and 0021 are named only where two living opens of one
    /// task meet: not after the other open exited, not for the manager's
    /// own process, not for a sender of another task.
    #[test]
    fn several_opens_rules_need_two_living_opens() {
        let rule = |p: &str| {
            stops_at(p)
                .map(|s| s.split(':').next().unwrap_or_default().to_string())
                .unwrap_or_default()
        };
        let freeze = "procs 0 0 p0\np1 set-manager\np2 send 0 node 5\np1 acquire 1\np0 send 0 node 3\np1 acquire 2\np1 free\np1 free\np1.t1 call 2\np1 freeze-notify 1 7\np1 freeze p0 0";
        assert_eq!(rule(freeze), "binder_commands/freeze-pid-order");
        let step = |line: &str| {
            let words: Vec<&str> = line.split(' ').collect();
            Step::parse_words(&words).unwrap()
        };
        let refused = Observed {
            ret: Some(Ret::Err(Errno::Again)),
            ..Observed::default()
        };
        let nothing = Observed::default();
        let mut follow = Aftermath::new(&Procs::parse(&["0", "0", "p0"]).unwrap());
        follow.follow(0, &step("p2 exit"), &nothing, &nothing);
        follow.follow(1, &step("p1 freeze p0 0"), &refused, &refused);
        let frozen = Diff::Frozen {
            pid: 2,
            c: true,
            rust: false,
        };
        assert_eq!(follow.explain_first(1, &frozen).map(|r| r.name), None);
        let manager = "procs 0 p0\np0 set-manager\np1 send 0";
        assert_eq!(rule(manager), "binder_commands/manager-task");
        // Another task's sender: both deliver alike.
        assert_eq!(rule("procs 0 p0 0\np0 set-manager\np2 send 0"), "");
        let ok = Observed {
            ret: Some(Ret::Ok),
            ..Observed::default()
        };
        let own = Observed {
            log: vec![Log::TransactionToOwnManager],
            ..Observed::default()
        };
        let mut follow = Aftermath::new(&Procs::parse(&["0", "p0", "0"]).unwrap());
        follow.follow(0, &step("p0 set-manager"), &ok, &ok);
        follow.follow(1, &step("p2 send 0"), &own, &nothing);
        follow.follow(2, &step("p0 send 0"), &own, &nothing);
        follow.follow(3, &step("p1 send 0"), &own, &nothing);
        let any = Diff::Log {
            c: vec![Log::TransactionToOwnManager],
            rust: vec![],
        };
        let named = |i| follow.explain_first(i, &any).map(|r| r.name);
        assert_eq!(
            (named(1), named(2), named(3)),
            (None, None, Some("manager-task"))
        );
    }

    /// Finding 0022 is named only where a node's first-reference work
    /// waits on a calling thread and another thread of the owner then
    /// sends the node strong and reads that work: with the first send
    /// one-way (its sender reads the `BR_INCREFS` at once), or with both
    /// sends from the waiting thread, both drivers read `BR_RELEASE` and
    /// `BR_DECREFS` at the last free; a `BR_DECREFS` read by one driver
    /// only is not this rule unless both drivers showed those two steps.
    /// The campaign's trace stops first at finding 0008's extended error
    /// (its second call fails), and runs through to the end with its
    /// missing `BR_DECREFS` explained.
    #[test]
    fn stale_node_work_needs_the_work_read_by_another_thread() {
        let program = |first: &str, second: &str| {
            format!(
                "procs 0 0 1000\np0 set-manager\np0.t1 enter-looper\n{first}\n{second}\np0.t1 free\np0.t1 free"
            )
        };
        let s = stops_at(&program("p2.t2 call 0 weak-node 3", "p2.t1 send 0 node 3"));
        assert!(
            s.as_deref()
                .is_some_and(|s| s.starts_with("binder_commands/stale-node-work:")),
            "{s:?}"
        );
        let one_way = program("p2.t2 send 0 weak-node 3", "p2.t1 send 0 node 3");
        let same_thread = program("p2.t2 call 0 weak-node 3", "p2.t2 send 0 node 3");
        let campaign_one_way = "procs 0 0 1000\np0 set-manager\np2.t2 send 0 weak-node 3\np2.t1 call 0 node 3 handle 2\np0.t1 free";
        let campaign_same = "procs 0 0 1000\np0 set-manager\np2.t2 call 0 weak-node 3\np2.t2 call 0 node 3 handle 2\np0.t1 free";
        for control in [
            one_way.as_str(),
            &same_thread,
            campaign_one_way,
            campaign_same,
        ] {
            let s = stops_at(control);
            assert!(
                s.as_deref().is_none_or(|s| !s.contains("stale-node-work")),
                "{control}: {s:?}"
            );
        }
        let campaign = "procs 0 0 1000\np0 set-manager\np2.t2 call 0 weak-node 3\np2.t1 call 0 node 3 handle 2\np0.t1 free";
        let s = stops_at(campaign).expect("a difference");
        assert!(s.starts_with("binder_commands/extended-error:"), "{s}");
        // The symptom alone, without the two steps: not explained.
        let after = Aftermath::new(&Procs::parse(&["0", "0", "1000"]).expect("procs"));
        let c = [Read::main(Br::Release(3)), Read::main(Br::DecRefs(3))];
        assert!(!after.stale_node_decrement(Pid(2), &c, &[]));
    }

    #[test]
    fn multisets() {
        assert_eq!(
            multiset_diff(&[1, 2, 2, 3], &[2, 3, 4]),
            (vec![1, 2], vec![4])
        );
        assert_eq!(multiset_diff::<u8>(&[], &[]), (vec![], vec![]));
    }

    #[test]
    fn a_handle_zero_against_one_is_the_manager_finding() {
        let c = [Read::main(Br::Transaction(vec![Received::Handle {
            handle: 0,
            strong: true,
        }]))];
        let rust = [Read::main(Br::Transaction(vec![Received::Handle {
            handle: 1,
            strong: true,
        }]))];
        assert!(manager_handle(&c, &rust));
        assert!(!manager_handle(&rust, &c));
        assert!(!manager_handle(&c, &[]));
    }

    #[test]
    fn only_listed_log_lines_are_explained() {
        assert!(logs_explained(&[Log::ManagerAcquiresZero], &[]));
        assert!(logs_explained(
            &[Log::BadBufferObject],
            &[Log::InvalidRef(3)]
        ));
        assert!(!logs_explained(&[], &[Log::ManagerAcquiresZero]));
        assert!(!logs_explained(&[Log::Bug], &[]));
    }
}
