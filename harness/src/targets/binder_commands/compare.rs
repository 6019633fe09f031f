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
    Br, Command, Errno, Log, Observed, Pid, Received, RefCmd, Ret, Snapshot, Step,
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
        title: "a BINDER_SET_CONTEXT_MGR that fails (EBUSY, EPERM) takes a strong reference on the caller's node 0 in Rust first: its zero-to-one work is left on the thread's deferred list, which holds back the node's later BR_* until the thread gets other work",
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
    /// What one process read.
    Reads {
        /// The process.
        pid: usize,
        /// Read under C only.
        c: Vec<Br>,
        /// Read under Rust only.
        rust: Vec<Br>,
    },
    /// The kernel log.
    Log {
        /// Printed by C only.
        c: Vec<Log>,
        /// Printed by Rust only.
        rust: Vec<Log>,
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

/// The difference between the returns of one step's command, if any.
pub fn ret(c: &Observed, rust: &Observed) -> Option<Diff> {
    (c.ret != rust.ret).then_some(Diff::Ret {
        c: c.ret,
        rust: rust.ret,
    })
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
            } else if held_back_node_work(c, rust) {
                Some(rule("failed-set-manager"))
            } else if c[..] == [Br::DeadReply] && rust[..] == [Br::FailedReply] {
                Some(rule("dying-target-reply"))
            } else {
                None
            }
        }
        Diff::Log { c, rust } => logs_explained(c, rust).then(|| rule("log-lines")),
        Diff::State { .. } => None,
    }
}

/// Finding 0006, C's side, for a group of steps in which a process exited
/// inside a transaction's window: the target died while the objects were
/// being translated, after some of them already were. Its death emptied
/// its reference tree, so the buffer's first handles now name references C
/// made after the death, for other nodes; whether C then finds the process
/// dead or a later object fails, `binder_transaction_buffer_release`
/// decrements those references (binder.c 2109-2115) and prints "invalid
/// dec" where the strength differs (`binder_dec_ref_olocked`, 1275-1293).
/// Only with Rust's failed copy ("Failure in copy_transaction_data": its
/// insert refused the dead process; the lines are a multiset difference, so
/// its failed translation is matched by C's own when a later object
/// failed) and no other line the log-lines rule does not allow.
pub fn released_by_stale_handles(diff: &Diff) -> Option<&'static Rule> {
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

/// Finding 0001: the reads differ only in the handles transactions'
/// objects were given, one of them 0 under C and another under Rust (the
/// handles after it shift with it).
fn manager_handle(c: &[Br], rust: &[Br]) -> bool {
    if c.len() != rust.len() {
        return false;
    }
    let mut zero_against_other = false;
    for (a, b) in c.iter().zip(rust) {
        match (a, b) {
            (Br::Transaction(oc), Br::Transaction(or)) if oc.len() == or.len() => {
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

/// Finding 0004's symptom: C delivers node work for the node with pointer
/// 0 that Rust holds back (its failed `set_as_manager` left that node's
/// work on the thread's deferred list).
fn held_back_node_work(c: &[Br], rust: &[Br]) -> bool {
    rust.is_empty()
        && !c.is_empty()
        && c.iter().all(|b| {
            matches!(
                b,
                Br::IncRefs(0) | Br::Acquire(0) | Br::Release(0) | Br::DecRefs(0)
            )
        })
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
        let found = |d: &Diff| released_by_stale_handles(d).map(|r| r.name);
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
        let c = [Br::Transaction(vec![Received::Handle {
            handle: 0,
            strong: true,
        }])];
        let rust = [Br::Transaction(vec![Received::Handle {
            handle: 1,
            strong: true,
        }])];
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
