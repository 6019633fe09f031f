//! One test per rule each driver decides, at the level of the commands
//! userspace sends: each runs a short program on [`CDriver`] or
//! [`RustDriver`] and asserts what userspace observes (the return, what
//! each process reads, the kernel log) and what each process holds.
//!
//! Every test is named after the upstream function that decides the rule
//! and says, in a comment, where in Linux 7.3.4 it is decided
//! (`binder.c:N` is `drivers/android/binder.c`, `process.rs:N` and the
//! other `.rs` files are under `drivers/android/binder/`).
//! `docs/conformance-commands.md` lists the rules, and how each test was
//! run with its rule broken.

use super::*;
use crate::alloc::{AllocSite, Gfp};
use crate::version::Version;

// ---- the harness of these tests ----------------------------------------

/// What the tests need of a driver model.
trait Model: Sized {
    fn build(procs: &Procs, version: Version) -> Self;
    fn run(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed;
    fn state(&self) -> Snapshot;
    /// The locks a command needs that a paused command may keep.
    fn needs(command: &Command) -> Held;
}

impl Model for CDriver {
    fn build(procs: &Procs, version: Version) -> Self {
        CDriver::new(procs, version)
    }
    fn run(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed {
        self.exec(step, busy, windows)
    }
    fn state(&self) -> Snapshot {
        self.snapshot()
    }
    fn needs(command: &Command) -> Held {
        CDriver::needs(command)
    }
}

impl Model for RustDriver {
    fn build(procs: &Procs, version: Version) -> Self {
        RustDriver::new(procs, version)
    }
    fn run(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed {
        self.exec(step, busy, windows)
    }
    fn state(&self) -> Snapshot {
        self.snapshot()
    }
    fn needs(_: &Command) -> Held {
        // The Rust driver keeps no lock but the process's across an
        // allocation (process.rs:966-972 lets the context's go first).
        Held::default()
    }
}

fn parse_step(line: &str) -> Step {
    let words: Vec<&str> = line.split(' ').collect();
    Step::parse_words(&words).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

/// A program run so far on one driver, with what each step made
/// observable.
struct Run<D> {
    driver: D,
    seen: Vec<Observed>,
}

impl<D: Model> Run<D> {
    /// Parses `procs N` (or one euid per process) and runs every `pN
    /// command` line after it.
    fn new(text: &str, version: Version) -> Self {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let head: Vec<&str> = lines.next().expect("a procs line").split(' ').collect();
        assert_eq!(head[0], "procs", "a program starts with its procs line");
        let procs = Procs::parse(&head[1..]).expect("a procs line");
        let mut run = Run {
            driver: D::build(&procs, version),
            seen: Vec::new(),
        };
        for line in lines {
            run.step(line);
        }
        run
    }

    /// Runs one more step with no window and every allocation succeeding.
    fn step(&mut self, line: &str) -> Observed {
        let observed = self.driver.run(&parse_step(line), &[], &mut Sequential);
        self.seen.push(observed.clone());
        observed
    }

    /// Runs one more step with `window` deciding its allocations and what
    /// runs while it is paused.
    fn step_in(&mut self, line: &str, window: &mut Window) -> Observed {
        let step = parse_step(line);
        window.outer = Some(step.pid);
        let observed = self.driver.run(&step, &[], window);
        self.seen.push(observed.clone());
        observed
    }

    fn last(&self) -> &Observed {
        self.seen.last().expect("a step ran")
    }

    /// `pid`'s references as `h<handle> <node> s<strong> w<weak>` (and
    /// `d<cookie>` with a death notification).
    fn refs(&self, pid: usize) -> Vec<String> {
        self.driver.state().procs[pid]
            .refs
            .iter()
            .map(|(h, r)| {
                let death = r.death.map(|c| format!(" d{c}")).unwrap_or_default();
                format!("h{h} {} s{} w{}{death}", r.node, r.strong, r.weak)
            })
            .collect()
    }

    /// `pid`'s nodes as `n<ptr> s<strong> w<weak>` and `hs`/`hw` for
    /// `has_strong_ref`/`has_weak_ref`.
    fn nodes(&self, pid: usize) -> Vec<String> {
        self.driver.state().procs[pid]
            .nodes
            .iter()
            .map(|(ptr, n)| {
                let hs = if n.has_strong { " hs" } else { "" };
                let hw = if n.has_weak { " hw" } else { "" };
                format!("n{ptr} s{} w{}{hs}{hw}", n.strong, n.weak)
            })
            .collect()
    }

    fn buffers(&self, pid: usize) -> usize {
        self.driver.state().procs[pid].buffers
    }

    fn alive(&self, pid: usize) -> bool {
        self.driver.state().procs[pid].alive
    }
}

fn c(text: &str) -> Run<CDriver> {
    Run::new(text, Version::CMainline)
}

fn rust(text: &str) -> Run<RustDriver> {
    Run::new(text, Version::RustMainline)
}

/// The command's return as text: `0`, `EBUSY`, `strong 1 weak 0`,
/// `skipped`.
fn ret(o: &Observed) -> String {
    o.ret.expect("a step has a return").to_string()
}

/// What `pid` read, in the observation's order.
fn reads(o: &Observed, pid: usize) -> Vec<String> {
    o.reads[pid].iter().map(Read::to_string).collect()
}

/// The kernel log lines, in the observation's order.
fn log(o: &Observed) -> Vec<String> {
    o.log.iter().map(Log::to_string).collect()
}

const NONE: [&str; 0] = [];

/// A caller of a command that fails the first allocation at `fail` and,
/// at the first lock-drop window at `at`, runs `steps` of other processes
/// unless the paused command keeps a lock one of them needs.
struct Window {
    fail: FailFirst,
    at: Option<AllocSite>,
    steps: Vec<Step>,
    outer: Option<Pid>,
    /// The locks the paused command kept, once the window opened.
    held: Option<Held>,
    /// Each step's observation, or `None` when it had to wait.
    ran: Vec<Option<Observed>>,
}

impl Window {
    fn failing(site: AllocSite) -> Self {
        Window {
            fail: FailFirst::at(Some(site)),
            at: None,
            steps: Vec::new(),
            outer: None,
            held: None,
            ran: Vec::new(),
        }
    }

    fn at(site: AllocSite, steps: &[&str]) -> Self {
        Window {
            fail: FailFirst::default(),
            at: Some(site),
            steps: steps.iter().map(|l| parse_step(l)).collect(),
            outer: None,
            held: None,
            ran: Vec::new(),
        }
    }

    fn ran(&self, i: usize) -> &Observed {
        self.ran[i].as_ref().expect("the step ran in the window")
    }
}

impl<D: Model> Windows<D> for Window {
    fn gfp(&mut self, site: AllocSite) -> Gfp {
        self.fail.gfp(site)
    }

    fn window(&mut self, driver: &mut D, site: AllocSite, held: Held) {
        if self.at != Some(site) || self.held.is_some() {
            return;
        }
        self.held = Some(held);
        let outer = self.outer.expect("the paused step's process");
        for step in &self.steps {
            let waits = step.pid == outer || held.blocks(D::needs(&step.command));
            self.ran
                .push((!waits).then(|| driver.run(step, &[(outer, Tid(0))], &mut Sequential)));
        }
    }
}

// ---- BINDER_SET_CONTEXT_MGR ---------------------------------------------

#[test]
fn c_binder_ioctl_set_ctx_mgr_ebusy_before_any_node() {
    // binder_ioctl_set_ctx_mgr, binder.c:5532-5535: a manager is set,
    // so EBUSY with a pr_err, before the uid is looked at (5539-5549)
    // and before binder_new_node (5550).
    let run = c("procs 0 1000
                 p0 set-manager
                 p1 set-manager");
    let o = run.last();
    assert_eq!(ret(o), "EBUSY", "a second manager is refused with EBUSY");
    assert_eq!(
        log(o),
        ["manager-already-set", "ioctl-failed EBUSY"],
        "EBUSY is logged, the uid never compared, and binder_ioctl logs the error"
    );
    assert_eq!(run.nodes(1), NONE, "the refused caller gets no node 0");
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w1 hs hw"],
        "the manager keeps its node"
    );
}

#[test]
fn rust_set_as_manager_creates_node_before_ebusy() {
    // Process::set_as_manager, process.rs:762: get_node(ptr 0, strong)
    // comes before Context::set_manager_node (process.rs:764), which
    // finds the manager set: pr_warn and EBUSY (context.rs:112-115);
    // the strong NodeRef is dropped, the node stays in the caller's
    // tree with no count.
    let run = rust(
        "procs 0 1000
                    p0 set-manager
                    p1 set-manager",
    );
    let o = run.last();
    assert_eq!(ret(o), "EBUSY", "a second manager is refused with EBUSY");
    assert_eq!(
        log(o),
        ["manager-already-set"],
        "EBUSY is logged (pr_warn); only BINDER_WRITE_READ logs its failure"
    );
    assert_eq!(
        run.nodes(1),
        ["n0 s0 w0"],
        "the refused caller's node 0 was created first"
    );
    assert_eq!(
        reads(o, 1),
        NONE,
        "its zero-to-one work stays deferred: nothing to read"
    );
}

#[test]
fn c_binder_ioctl_set_ctx_mgr_takes_local_refs_and_has_refs() {
    // binder_ioctl_set_ctx_mgr, binder.c:5554-5557: one local strong
    // and one local weak reference, has_strong_ref and has_weak_ref
    // set: the owner is never asked for BR_INCREFS/BR_ACQUIRE on its
    // manager node.
    let run = c("procs 1
                 p0 set-manager");
    let o = run.last();
    assert_eq!(ret(o), "0");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 0),
        NONE,
        "no BR_INCREFS/BR_ACQUIRE for the manager node"
    );
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w1 hs hw"],
        "one local strong and weak ref, has_*_ref set"
    );
}

#[test]
fn rust_set_as_manager_forces_has_count() {
    // Process::set_as_manager, process.rs:762: one strong NodeRef,
    // which the context keeps (context.rs:126); process.rs:767-769
    // force_has_count: no BR_INCREFS/BR_ACQUIRE, even once the deferred
    // zero-to-one item is processed.
    let mut run = rust(
        "procs 2
                        p0 set-manager",
    );
    let o = run.last();
    assert_eq!(ret(o), "0");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 0),
        NONE,
        "no BR_INCREFS/BR_ACQUIRE for the manager node"
    );
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w0 hs hw"],
        "one strong count, both has_count forced"
    );
    // The manager's thread gets work (a BR_TRANSACTION_COMPLETE): its
    // deferred node item is processed too, and delivers nothing.
    run.step("p1 send 0 node 1");
    run.step("p0 send 1");
    assert_eq!(
        reads(run.last(), 0),
        ["transaction-complete"],
        "the forced counts deliver nothing"
    );
}

#[test]
fn c_binder_ioctl_set_ctx_mgr_eperm_for_another_euid_after_the_manager_died() {
    // binder_ioctl_set_ctx_mgr, binder.c:5539-5549: the first manager's
    // euid is recorded and never cleared (binder_deferred_release
    // clears only the node, 6286-6294); another euid is refused with
    // EPERM and a pr_err, before binder_new_node (5550); the same euid
    // is accepted.
    let mut run = c("procs 0 1000 0
                     p0 set-manager
                     p0 exit
                     p1 set-manager");
    let o = run.last();
    assert_eq!(
        ret(o),
        "EPERM",
        "another euid than the first manager's is refused"
    );
    assert_eq!(
        log(o),
        ["manager-bad-uid", "ioctl-failed EPERM"],
        "EPERM is logged, and so is the failed ioctl"
    );
    assert_eq!(run.nodes(1), NONE, "EPERM comes before binder_new_node");
    let o = &run.step("p2 set-manager");
    assert_eq!(ret(o), "0", "the first manager's euid may register again");
    assert_eq!(run.nodes(2), ["n0 s1 w1 hs hw"]);
}

#[test]
fn rust_set_manager_node_eperm_without_a_log_after_the_manager_died() {
    // Context::set_manager_node, context.rs:118-124: the uid kept in
    // Manager::uid (never cleared: unset_manager_node takes only the
    // node, context.rs:131-134) refuses another euid with EPERM and no
    // log line; the node was made first (process.rs:762).
    let mut run = rust(
        "procs 0 1000 0
                        p0 set-manager
                        p0 exit
                        p1 set-manager",
    );
    let o = run.last();
    assert_eq!(
        ret(o),
        "EPERM",
        "another euid than the first manager's is refused"
    );
    assert_eq!(log(o), NONE, "EPERM is not logged");
    assert_eq!(
        run.nodes(1),
        ["n0 s0 w0"],
        "the refused caller's node 0 was created first"
    );
    let o = &run.step("p2 set-manager");
    assert_eq!(ret(o), "0", "the first manager's euid may register again");
}

#[test]
fn c_binder_deferred_release_clears_the_manager_for_a_new_one() {
    // binder_deferred_release, binder.c:6286-6294: the dying manager's
    // node stops being the context's; a transaction to 0 then finds
    // none (BR_DEAD_REPLY, 3236-3237) until a new manager registers
    // (binder_ioctl_set_ctx_mgr, 5532 finds none set).
    let mut run = c("procs 3
                     p1 set-manager
                     p1 exit
                     p0 send 0");
    assert_eq!(
        reads(run.last(), 0),
        ["dead-reply"],
        "no manager after its death"
    );
    assert_eq!(
        ret(&run.step("p2 set-manager")),
        "0",
        "a new manager registers"
    );
    let o = &run.step("p0 send 0");
    assert_eq!(
        reads(o, 2),
        ["transaction"],
        "handle 0 now reaches the new manager"
    );
    assert_eq!(reads(o, 0), ["transaction-complete"]);
}

#[test]
fn rust_deferred_release_unsets_the_manager_for_a_new_one() {
    // Process::deferred_release, process.rs:1416-1418:
    // unset_manager_node for a dying manager; get_manager_node then
    // fails (context.rs:140-141, BinderError::new_dead: BR_DEAD_REPLY)
    // until a new manager registers.
    let mut run = rust(
        "procs 3
                        p1 set-manager
                        p1 exit
                        p0 send 0",
    );
    assert_eq!(
        reads(run.last(), 0),
        ["dead-reply"],
        "no manager after its death"
    );
    assert_eq!(
        ret(&run.step("p2 set-manager")),
        "0",
        "a new manager registers"
    );
    let o = &run.step("p0 send 0");
    assert_eq!(
        reads(o, 2),
        ["transaction"],
        "handle 0 now reaches the new manager"
    );
    assert_eq!(reads(o, 0), ["transaction-complete"]);
}

// ---- BC_INCREFS, BC_ACQUIRE, BC_RELEASE, BC_DECREFS -------------------------

#[test]
fn c_binder_thread_write_handle_0_without_manager_is_an_invalid_ref() {
    // binder_thread_write, binder.c:4170-4187: no manager node, so ret
    // stays -1 and binder_update_ref_for_handle(0) runs (4188-4191); it
    // finds no descriptor 0 (EINVAL, 1402-1406), logged (4212-4217);
    // the ioctl succeeds.
    let mut run = c("procs 1
                     p0 acquire 0");
    for line in ["p0 increfs 0", "p0 release 0", "p0 decrefs 0"] {
        run.step(line);
    }
    for o in &run.seen {
        assert_eq!(ret(o), "0", "BINDER_WRITE_READ succeeds");
        assert_eq!(
            log(o),
            ["invalid-ref 0"],
            "no manager: handle 0 is an invalid ref"
        );
    }
    assert_eq!(run.refs(0), NONE);
}

#[test]
fn rust_update_ref_handle_0_without_manager_is_no_such_ref() {
    // Process::update_ref, process.rs:967-975: get_manager_node fails,
    // so the by_handle lookup of 0 runs (984); none: "no such ref"
    // (1021-1025), Ok.
    let mut run = rust(
        "procs 1
                        p0 acquire 0",
    );
    for line in ["p0 increfs 0", "p0 release 0", "p0 decrefs 0"] {
        run.step(line);
    }
    for o in &run.seen {
        assert_eq!(ret(o), "0", "BINDER_WRITE_READ succeeds");
        assert_eq!(
            log(o),
            ["invalid-ref 0"],
            "no manager: handle 0 is no such ref"
        );
    }
    assert_eq!(run.refs(0), NONE);
}

#[test]
fn c_binder_thread_write_manager_increments_handle_0_einval() {
    // binder_thread_write, binder.c:4176-4181: the manager's own
    // BC_INCREFS/BC_ACQUIRE 0 is logged and fails the ioctl with
    // EINVAL; its BC_RELEASE/BC_DECREFS 0 are not increments and go to
    // binder_update_ref_for_handle(0) (4188-4191): an invalid ref
    // (4212-4217), the ioctl succeeds.
    let mut run = c("procs 1
                     p0 set-manager");
    for line in ["p0 acquire 0", "p0 increfs 0"] {
        let o = &run.step(line);
        assert_eq!(
            ret(o),
            "EINVAL",
            "the manager may not take a ref on handle 0"
        );
        assert_eq!(log(o), ["manager-acquires-zero", "ioctl-failed EINVAL"]);
    }
    for line in ["p0 release 0", "p0 decrefs 0"] {
        let o = &run.step(line);
        assert_eq!(
            ret(o),
            "0",
            "a decrement of 0 is not the manager's increment"
        );
        assert_eq!(log(o), ["invalid-ref 0"]);
    }
    assert_eq!(run.refs(0), NONE);
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w1 hs hw"],
        "the manager node's counts unchanged"
    );
}

#[test]
fn rust_update_ref_manager_increments_handle_0_einval() {
    // Process::update_ref, process.rs:969-971: the manager's own
    // increment of 0 fails with EINVAL (its NodeRef clone dropped);
    // decrements look 0 up in by_handle: no such ref (1021-1025).
    let mut run = rust(
        "procs 1
                        p0 set-manager",
    );
    for line in ["p0 acquire 0", "p0 increfs 0"] {
        let o = &run.step(line);
        assert_eq!(
            ret(o),
            "EINVAL",
            "the manager may not take a ref on handle 0"
        );
    }
    for line in ["p0 release 0", "p0 decrefs 0"] {
        let o = &run.step(line);
        assert_eq!(
            ret(o),
            "0",
            "a decrement of 0 is not the manager's increment"
        );
        assert_eq!(log(o), ["invalid-ref 0"]);
    }
    assert_eq!(run.refs(0), NONE);
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w0 hs hw"],
        "the manager node's counts unchanged"
    );
}

#[test]
fn c_binder_inc_ref_for_node_handle_0_is_the_managers_node() {
    // binder_thread_write, binder.c:4182-4184: BC_ACQUIRE/BC_INCREFS 0
    // count a reference to the manager's node, found or made by
    // binder_inc_ref_for_node (1458-1500), descriptor 0
    // (get_ref_desc_olocked's offset 0, 1074); the internal strong
    // increment of the manager's node is allowed
    // (binder_inc_node_nilocked, 831-839) and queues no work
    // (has_strong_ref, 843).
    let mut run = c("procs 2
                     p1 set-manager
                     p0 acquire 0");
    let o = run.last();
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "BC_ACQUIRE 0 reaches the manager"
    );
    assert_eq!(reads(o, 1), NONE, "the manager is not asked for BR_ACQUIRE");
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"], "descriptor 0, one strong");
    run.step("p0 increfs 0");
    run.step("p0 acquire 0");
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s2 w1"],
        "the same descriptor counted again"
    );
    assert_eq!(
        run.nodes(1),
        ["n0 s2 w1 hs hw"],
        "one internal strong ref added"
    );
}

#[test]
fn rust_update_ref_handle_0_inserts_the_managers_node_as_manager() {
    // Process::update_ref, process.rs:968-973: the manager's NodeRef
    // cloned (Context::get_manager_node, context.rs:136-144) and
    // inserted with is_manager = true (insert_or_update_handle's start
    // 0, process.rs:858); a second increment absorbs into the same
    // handle (process.rs:840-845).
    let mut run = rust(
        "procs 2
                        p1 set-manager
                        p0 acquire 0",
    );
    let o = run.last();
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "BC_ACQUIRE 0 reaches the manager"
    );
    assert_eq!(reads(o, 1), NONE, "the manager is not asked for BR_ACQUIRE");
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"], "handle 0, one strong");
    run.step("p0 increfs 0");
    run.step("p0 acquire 0");
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s2 w1"],
        "the same handle counted again"
    );
    assert_eq!(
        run.nodes(1),
        ["n0 s2 w1 hs hw"],
        "one NodeRef's strong and weak counts"
    );
}

#[test]
fn c_binder_update_ref_for_handle_release_and_decrefs_on_handle_0() {
    // binder_thread_write, binder.c:4188-4191: decrements of 0 go to
    // binder_update_ref_for_handle(0) even with a manager; the last one
    // cleans the reference up (binder_dec_ref_olocked, 1298-1301;
    // 1416-1419).
    let mut run = c("procs 2
                     p1 set-manager
                     p0 acquire 0
                     p0 increfs 0
                     p0 release 0");
    assert_eq!(log(run.last()), NONE);
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s0 w1"],
        "BC_RELEASE 0 drops the strong count"
    );
    run.step("p0 decrefs 0");
    assert_eq!(log(run.last()), NONE);
    assert_eq!(run.refs(0), NONE, "the last count removes descriptor 0");
    assert_eq!(
        run.nodes(1),
        ["n0 s1 w1 hs hw"],
        "the manager node keeps its own refs"
    );
}

#[test]
fn rust_update_ref_release_and_decrefs_on_handle_0() {
    // Process::update_ref, process.rs:984-1019: decrements of 0 update
    // the NodeRef at handle 0; the last removes it.
    let mut run = rust(
        "procs 2
                        p1 set-manager
                        p0 acquire 0
                        p0 increfs 0
                        p0 release 0",
    );
    assert_eq!(log(run.last()), NONE);
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s0 w1"],
        "BC_RELEASE 0 drops the strong count"
    );
    run.step("p0 decrefs 0");
    assert_eq!(log(run.last()), NONE);
    assert_eq!(run.refs(0), NONE, "the last count removes handle 0");
    assert_eq!(
        run.nodes(1),
        ["n0 s1 w0 hs hw"],
        "the context's NodeRef is left"
    );
}

/// p1 holds descriptor 0 on the first manager's (p0's) node, which died;
/// p2 is the new manager.
const STALE_ZERO: &str = "procs 3
                          p0 set-manager
                          p1 acquire 0
                          p0 exit
                          p2 set-manager";

#[test]
fn c_binder_thread_write_got_other_handle_for_a_stale_descriptor_0() {
    // binder_thread_write, binder.c:4182-4184 inserts the new manager's
    // node; 0 is taken, so get_ref_desc_olocked gives the next free
    // descriptor from offset 0 (1074, 1081-1084), and 4192-4196 logs
    // that 0 was asked for.
    let mut run = c(STALE_ZERO);
    let o = &run.step("p1 acquire 0");
    assert_eq!(ret(o), "0");
    assert_eq!(
        log(o),
        ["got-other-handle 0 1"],
        "asked for 0, got 1: logged"
    );
    assert_eq!(
        run.refs(1),
        ["h0 p0:0 s1 w0", "h1 p2:0 s1 w0"],
        "the new manager's node at 1"
    );
}

#[test]
fn rust_update_ref_stale_handle_0_gives_the_new_manager_another_handle_silently() {
    // Process::update_ref, process.rs:972:
    // insert_or_update_handle(is_manager) finds 0 taken
    // (find_unused_id(0), process.rs:858-860) and the handle it gets is
    // not compared with 0.
    let mut run = rust(STALE_ZERO);
    let o = &run.step("p1 acquire 0");
    assert_eq!(ret(o), "0");
    assert_eq!(log(o), NONE, "no line for the other handle");
    assert_eq!(
        run.refs(1),
        ["h0 p0:0 s1 w0", "h1 p2:0 s1 w0"],
        "the new manager's node at 1"
    );
}

#[test]
fn c_binder_update_ref_for_handle_counts_a_stale_descriptor_0_without_manager() {
    // binder_thread_write, binder.c:4188-4191: no manager, so handle 0
    // is whatever descriptor 0 refers to (the dead manager's node).
    let mut run = c("procs 2
                     p0 set-manager
                     p1 acquire 0
                     p0 exit");
    let o = &run.step("p1 acquire 0");
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "no manager: descriptor 0 is counted"
    );
    assert_eq!(
        run.refs(1),
        ["h0 p0:0 s2 w0"],
        "the stale descriptor 0 is counted"
    );
}

#[test]
fn rust_update_ref_counts_a_stale_handle_0_without_manager() {
    // Process::update_ref, process.rs:967-985: no manager, so handle 0
    // is looked up in by_handle.
    let mut run = rust(
        "procs 2
                        p0 set-manager
                        p1 acquire 0
                        p0 exit",
    );
    let o = &run.step("p1 acquire 0");
    assert_eq!((ret(o), log(o)), ("0".into(), vec![]));
    assert_eq!(
        run.refs(1),
        ["h0 p0:0 s2 w0"],
        "the stale handle 0 is counted"
    );
}

#[test]
fn c_binder_update_ref_for_handle_missing_handle_is_an_invalid_ref() {
    // binder_update_ref_for_handle, binder.c:1402-1406: EINVAL for no
    // such descriptor, logged by binder_thread_write (4212-4217); the
    // ioctl succeeds.
    let mut run = c("procs 2
                     p1 set-manager");
    for line in [
        "p0 increfs 5",
        "p0 acquire 5",
        "p0 release 5",
        "p0 decrefs 5",
    ] {
        let o = &run.step(line);
        assert_eq!(ret(o), "0", "BINDER_WRITE_READ succeeds");
        assert_eq!(log(o), ["invalid-ref 5"], "{line}: no such descriptor");
    }
}

#[test]
fn rust_update_ref_missing_handle_is_no_such_ref() {
    // Process::update_ref, process.rs:1021-1025: "no such ref", Ok.
    let mut run = rust(
        "procs 2
                        p1 set-manager",
    );
    for line in [
        "p0 increfs 5",
        "p0 acquire 5",
        "p0 release 5",
        "p0 decrefs 5",
    ] {
        let o = &run.step(line);
        assert_eq!(ret(o), "0", "BINDER_WRITE_READ succeeds");
        assert_eq!(log(o), ["invalid-ref 5"], "{line}: no such ref");
    }
}

/// p0 (the manager) holds a weak-only reference at 1 to p1's node 1.
const WEAK_ONLY: &str = "procs 2
                         p0 set-manager
                         p1 send 0 weak-node 1";

#[test]
fn c_binder_get_ref_olocked_strong_ops_on_a_weak_only_ref_are_invalid() {
    // binder_get_ref_olocked, binder.c:1032-1034: a strong lookup of a
    // weak-only ref is logged and fails; binder_update_ref_for_handle
    // returns EINVAL (1402-1406), logged as an invalid ref (4212-4217).
    let mut run = c(WEAK_ONLY);
    assert_eq!(run.refs(0), ["h1 p1:1 s0 w1"]);
    for line in ["p0 acquire 1", "p0 release 1"] {
        let o = &run.step(line);
        assert_eq!(ret(o), "0");
        assert_eq!(
            log(o),
            ["weak-as-strong", "invalid-ref 1"],
            "{line} on a weak-only ref"
        );
        assert_eq!(
            run.refs(0),
            ["h1 p1:1 s0 w1"],
            "{line}: the ref is unchanged"
        );
    }
}

#[test]
fn rust_node_ref_update_ignores_strong_ops_on_a_weak_only_ref() {
    // NodeRef::update, node.rs:859-861: with no strong count, a strong
    // increment or decrement does nothing and logs nothing.
    let mut run = rust(WEAK_ONLY);
    assert_eq!(run.refs(0), ["h1 p1:1 s0 w1"]);
    for line in ["p0 acquire 1", "p0 release 1"] {
        let o = &run.step(line);
        assert_eq!(ret(o), "0");
        assert_eq!(log(o), NONE, "{line} on a weak-only ref is silent");
        assert_eq!(
            run.refs(0),
            ["h1 p1:1 s0 w1"],
            "{line}: the ref is unchanged"
        );
    }
}

/// p0 (the manager) holds a strong-only reference at 1 to p1's node 1.
const STRONG_ONLY: &str = "procs 2
                           p0 set-manager
                           p1 send 0 node 1";

#[test]
fn c_binder_dec_ref_olocked_weak_decrement_below_zero_is_logged() {
    // binder_dec_ref_olocked, binder.c:1289-1295: a weak decrement at 0
    // is logged and changes nothing; the command is not an invalid ref
    // (ret 0).
    let mut run = c(STRONG_ONLY);
    let o = &run.step("p0 decrefs 1");
    assert_eq!(ret(o), "0");
    assert_eq!(
        log(o),
        ["invalid-decrement weak"],
        "a weak decrement at 0 is logged"
    );
    assert_eq!(run.refs(0), ["h1 p1:1 s1 w0"], "the ref is unchanged");
}

#[test]
fn rust_node_ref_update_weak_decrement_below_zero_is_logged() {
    // NodeRef::update, node.rs:882-889: a decrement at 0 is logged and
    // changes nothing.
    let mut run = rust(STRONG_ONLY);
    let o = &run.step("p0 decrefs 1");
    assert_eq!(ret(o), "0");
    assert_eq!(
        log(o),
        ["invalid-decrement weak"],
        "a weak decrement at 0 is logged"
    );
    assert_eq!(run.refs(0), ["h1 p1:1 s1 w0"], "the ref is unchanged");
}

#[test]
fn c_binder_dec_ref_olocked_last_count_removes_the_ref_and_releases_the_node() {
    // binder_dec_ref_olocked, binder.c:1285-1287: the strong count's
    // last decrement drops the node's internal strong ref
    // (binder_dec_node), which queues the node's work to its owner
    // (binder_dec_node_nilocked, 895-899); both counts at 0 clean the
    // ref up (1298-1301, binder_cleanup_ref_olocked 1182-1231): the
    // owner reads BR_RELEASE and BR_DECREFS (binder_thread_read,
    // 4870-4950).
    let mut run = c(STRONG_ONLY);
    run.step("p0 acquire 1");
    run.step("p0 free");
    assert_eq!(
        run.refs(0),
        ["h1 p1:1 s1 w0"],
        "the buffer's count released by the free"
    );
    let o = &run.step("p0 release 1");
    assert_eq!(log(o), NONE);
    assert_eq!(run.refs(0), NONE, "the last count removes the ref");
    assert_eq!(reads(o, 1), ["release 1", "decrefs 1"], "the owner is told");
    assert_eq!(run.nodes(1), NONE, "and the node is gone");
}

#[test]
fn rust_node_ref_update_last_count_removes_the_ref_and_releases_the_node() {
    // NodeRef::update, node.rs:890-894: the last strong count drops the
    // node's (Node::update_refcount_locked, node.rs:384-422, pushing
    // the node to its owner); both counts at 0 remove the NodeRefInfo
    // (Process::update_ref, process.rs:985-1019); the owner reads
    // BR_RELEASE and BR_DECREFS (Node::do_work_locked,
    // node.rs:611-661).
    let mut run = rust(STRONG_ONLY);
    run.step("p0 acquire 1");
    run.step("p0 free");
    assert_eq!(
        run.refs(0),
        ["h1 p1:1 s1 w0"],
        "the buffer's count released by the free"
    );
    let o = &run.step("p0 release 1");
    assert_eq!(log(o), NONE);
    assert_eq!(run.refs(0), NONE, "the last count removes the ref");
    assert_eq!(reads(o, 1), ["release 1", "decrefs 1"], "the owner is told");
    assert_eq!(run.nodes(1), NONE, "and the node is gone");
}

// ---- one-way transactions: the target ------------------------------------

#[test]
fn c_binder_transaction_to_handle_0_without_manager_is_dead_reply() {
    // binder_transaction, binder.c:3236-3237: BR_DEAD_REPLY; 3248-3255
    // "cannot find target node", the failure line (3888-3896) and the
    // error queued for the sender (3932-3933).
    let run = c("procs 1
                 p0 send 0");
    let o = run.last();
    assert_eq!(ret(o), "0");
    assert_eq!(reads(o, 0), ["dead-reply"], "no manager: BR_DEAD_REPLY");
    assert_eq!(log(o), ["no-target-node", "transaction-failed"]);
}

#[test]
fn rust_get_transaction_node_handle_0_without_manager_is_dead_reply() {
    // Process::get_transaction_node, process.rs:927: get_manager_node
    // fails with BinderError::new_dead (context.rs:141,
    // error.rs:20-25): BR_DEAD_REPLY, and with no source error nothing
    // is logged (Thread::transaction, thread.rs:1312-1340).
    let run = rust(
        "procs 1
                    p0 send 0",
    );
    let o = run.last();
    assert_eq!(ret(o), "0");
    assert_eq!(reads(o, 0), ["dead-reply"], "no manager: BR_DEAD_REPLY");
    assert_eq!(log(o), NONE, "a dead reply is not logged");
}

#[test]
fn c_binder_transaction_to_its_own_manager_is_failed_reply() {
    // binder_transaction, binder.c:3239-3246: the manager's process
    // sends to 0: logged, BR_FAILED_REPLY, and
    // err_invalid_target_handle gives back the strong and temporary
    // refs taken on the node (3878-3881).
    let run = c("procs 1
                 p0 set-manager
                 p0 send 0");
    let o = run.last();
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "its own manager: BR_FAILED_REPLY"
    );
    assert_eq!(log(o), ["transaction-to-own-manager", "transaction-failed"]);
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w1 hs hw"],
        "the node's refs are given back"
    );
}

#[test]
fn rust_get_transaction_node_to_its_own_manager_is_failed_reply() {
    // Process::get_transaction_node, process.rs:928-930: EINVAL, so
    // BR_FAILED_REPLY with a source error, which is logged
    // (Thread::transaction, thread.rs:1312-1340); the cloned NodeRef
    // dropped.
    let run = rust(
        "procs 1
                    p0 set-manager
                    p0 send 0",
    );
    let o = run.last();
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "its own manager: BR_FAILED_REPLY"
    );
    assert_eq!(log(o), ["transaction-failed"]);
    assert_eq!(run.nodes(0), ["n0 s1 w0 hs hw"], "the clone is dropped");
}

#[test]
fn c_binder_transaction_to_a_missing_handle_is_failed_reply() {
    // binder_transaction, binder.c:3216-3228: no such descriptor:
    // logged, BR_FAILED_REPLY; no target node (3248-3255).
    let run = c("procs 2
                 p1 set-manager
                 p0 send 5");
    let o = run.last();
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "no such handle: BR_FAILED_REPLY"
    );
    assert_eq!(
        log(o),
        [
            "transaction-to-invalid-handle 5",
            "no-target-node",
            "transaction-failed"
        ]
    );
}

#[test]
fn rust_get_transaction_node_missing_handle_is_failed_reply() {
    // Process::get_transaction_node, process.rs:933-939,
    // get_node_from_handle 943-951: ENOENT, logged, BR_FAILED_REPLY.
    let run = rust(
        "procs 2
                    p1 set-manager
                    p0 send 5",
    );
    let o = run.last();
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "no such handle: BR_FAILED_REPLY"
    );
    assert_eq!(
        log(o),
        ["transaction-to-invalid-handle 5", "transaction-failed"]
    );
}

#[test]
fn c_binder_transaction_to_a_weak_only_handle_is_failed_reply() {
    // binder_transaction, binder.c:3217-3218 asks for a strong ref: a
    // weak-only one is logged (binder_get_ref_olocked, 1032-1034) and
    // the handle is invalid (3223-3227).
    let mut run = c(WEAK_ONLY);
    let o = &run.step("p0 send 1");
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "a weak-only handle: BR_FAILED_REPLY"
    );
    assert_eq!(
        log(o),
        [
            "weak-as-strong",
            "transaction-to-invalid-handle 1",
            "no-target-node",
            "transaction-failed"
        ]
    );
    assert_eq!(reads(o, 1), NONE);
}

#[test]
fn rust_get_transaction_node_weak_only_handle_is_failed_reply() {
    // Process::get_transaction_node, process.rs:933:
    // get_node_from_handle(handle, true): the strong clone of a
    // weak-only NodeRef fails (NodeRef::clone, node.rs:840-844),
    // logged, EINVAL.
    let mut run = rust(WEAK_ONLY);
    let o = &run.step("p0 send 1");
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "a weak-only handle: BR_FAILED_REPLY"
    );
    assert_eq!(
        log(o),
        [
            "weak-as-strong",
            "transaction-to-invalid-handle 1",
            "transaction-failed"
        ]
    );
    assert_eq!(reads(o, 1), NONE);
}

/// p0 (the manager) holds a strong reference at 1 to p1's node 1, and p1
/// has exited.
const DEAD_NODE: &str = "procs 2
                         p0 set-manager
                         p1 send 0 node 1
                         p1 exit";

#[test]
fn c_binder_get_node_refs_for_txn_dead_node_is_dead_reply() {
    // binder_get_node_refs_for_txn, binder.c:2975-2982: the node's
    // owner died (node->proc is NULL, binder_node_release 6234):
    // BR_DEAD_REPLY, no target node (binder_transaction, 3248-3255).
    let mut run = c(DEAD_NODE);
    assert_eq!(
        run.refs(0),
        ["h1 p1:1 s1 w0"],
        "the reference outlives the node's owner"
    );
    let o = &run.step("p0 send 1");
    assert_eq!(reads(o, 0), ["dead-reply"], "a dead node: BR_DEAD_REPLY");
    assert_eq!(log(o), ["no-target-node", "transaction-failed"]);
}

#[test]
fn rust_buffer_alloc_dead_target_is_dead_reply() {
    // Process::get_node_from_handle (process.rs:943-951) clones the
    // NodeRef of the dead node, then Process::buffer_alloc finds the
    // mapping gone (process.rs:1069, taken by deferred_release at
    // 1496): BinderError::new_dead, BR_DEAD_REPLY.
    //
    // Not asserted: the log. Thread::copy_transaction_data prints a
    // pr_warn for every failed buffer_alloc (thread.rs:1051-1060),
    // which the model does not print (docs/conformance-commands.md).
    let mut run = rust(DEAD_NODE);
    assert_eq!(
        run.refs(0),
        ["h1 p1:1 s1 w0"],
        "the reference outlives the node's owner"
    );
    let o = &run.step("p0 send 1");
    assert_eq!(reads(o, 0), ["dead-reply"], "a dead node: BR_DEAD_REPLY");
}

#[test]
fn c_binder_transaction_one_way_to_the_manager() {
    // binder_transaction, binder.c:3230-3235: the manager's node;
    // BR_TRANSACTION_COMPLETE for the sender (3824),
    // binder_proc_transaction (2860-2958) queues it to the target
    // (proc->todo, 2899-2900).
    let run = c("procs 2
                 p1 set-manager
                 p0 send 0");
    let o = run.last();
    assert_eq!(
        reads(o, 0),
        ["transaction-complete"],
        "the sender is told it is sent"
    );
    assert_eq!(reads(o, 1), ["transaction"], "the manager reads it");
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "sent without a line"
    );
    assert_eq!(run.buffers(1), 1, "the manager holds the buffer");
    assert_eq!(
        run.nodes(1),
        ["n0 s2 w1 hs hw"],
        "the buffer's local strong ref on its target"
    );
}

#[test]
fn rust_oneway_transaction_inner_to_the_manager() {
    // Thread::oneway_transaction_inner, thread.rs:1457-1484: the
    // manager's NodeRef (Process::get_transaction_node,
    // process.rs:927), the completion, then Transaction::submit
    // (transaction.rs:338-385).
    let run = rust(
        "procs 2
                    p1 set-manager
                    p0 send 0",
    );
    let o = run.last();
    assert_eq!(
        reads(o, 0),
        ["transaction-complete"],
        "the sender is told it is sent"
    );
    assert_eq!(reads(o, 1), ["transaction"], "the manager reads it");
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "sent without a line"
    );
    assert_eq!(run.buffers(1), 1, "the manager holds the buffer");
    assert_eq!(
        run.nodes(1),
        ["n0 s2 w0 hs hw"],
        "the buffer's NodeRef on its target"
    );
}

#[test]
fn c_binder_transaction_one_way_to_a_handle() {
    // binder_transaction, binder.c:3216-3222: a strong descriptor's
    // node is the target.
    let mut run = c(STRONG_ONLY);
    let o = &run.step("p0 send 1");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 1),
        ["transaction"],
        "the handle's node's owner reads it"
    );
    assert_eq!(reads(o, 0), ["transaction-complete"]);
}

#[test]
fn rust_get_transaction_node_one_way_to_a_handle() {
    // Process::get_transaction_node, process.rs:933-934: the handle's
    // NodeRef cloned strong.
    let mut run = rust(STRONG_ONLY);
    let o = &run.step("p0 send 1");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 1),
        ["transaction"],
        "the handle's node's owner reads it"
    );
    assert_eq!(reads(o, 0), ["transaction-complete"]);
}

// ---- one-way transactions: the objects -------------------------------------

#[test]
fn c_binder_translate_binder_node_becomes_a_handle_of_the_receiver() {
    // binder_translate_binder, binder.c:2237-2288: the sender's node
    // (made by binder_new_node, 2247-2252) gets a reference in the
    // target, strong for BINDER_TYPE_BINDER, weak for
    // BINDER_TYPE_WEAK_BINDER (2266-2275); its first reference queues
    // the node's work on the sender's thread (target_list,
    // binder_inc_node_nilocked 843-856): BR_INCREFS, BR_ACQUIRE.
    let run = c("procs 2
                 p1 set-manager
                 p0 send 0 node 3 weak-node 4");
    let o = run.last();
    assert_eq!(
        log(o),
        NONE,
        "the new node's first strong ref is allowed (target_list)"
    );
    assert_eq!(
        reads(o, 1),
        ["transaction handle 1 weak-handle 2"],
        "handles of the receiver's"
    );
    assert_eq!(
        reads(o, 0),
        [
            "transaction-complete",
            "increfs 3",
            "increfs 4",
            "acquire 3"
        ],
        "the sender is asked for its new nodes' references"
    );
    assert_eq!(
        run.refs(1),
        ["h1 p0:3 s1 w0", "h2 p0:4 s0 w1"],
        "a strong and a weak ref"
    );
    assert_eq!(run.nodes(0), ["n3 s1 w0 hs hw", "n4 s0 w0 hw"]);
}

#[test]
fn rust_transfer_binder_object_node_becomes_a_handle_of_the_receiver() {
    // Thread::translate_object, thread.rs:713-726: Process::get_node
    // (process.rs:808-829) with its zero-to-one work deferred to the
    // sender's thread (ProcessInner::new_node_ref_with_thread,
    // process.rs:263-284); AllocationView::transfer_binder_object,
    // allocation.rs:395-414: insert_or_update_handle in the receiver.
    let run = rust(
        "procs 2
                    p1 set-manager
                    p0 send 0 node 3 weak-node 4",
    );
    let o = run.last();
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 1),
        ["transaction handle 1 weak-handle 2"],
        "handles of the receiver's"
    );
    assert_eq!(
        reads(o, 0),
        [
            "transaction-complete",
            "increfs 3",
            "increfs 4",
            "acquire 3"
        ],
        "the sender is asked for its new nodes' references"
    );
    assert_eq!(
        run.refs(1),
        ["h1 p0:3 s1 w0", "h2 p0:4 s0 w1"],
        "a strong and a weak ref"
    );
    assert_eq!(run.nodes(0), ["n3 s1 w0 hs hw", "n4 s0 w1 hw"]);
}

/// p1 is the manager and holds 1 -> p0:3 and 2 -> p2:5.
const TWO_HANDLES: &str = "procs 3
                           p1 set-manager
                           p0 send 0 node 3
                           p2 send 0 node 5";

#[test]
fn c_binder_translate_handle_to_a_handle_of_the_receiver() {
    // binder_translate_handle, binder.c:2337-2356: a node the target
    // does not own gets a reference of the target's, strong or weak as
    // the object.
    let mut run = c(TWO_HANDLES);
    let o = &run.step("p1 send 2 handle 1 weak-handle 1");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 2),
        ["transaction handle 1 weak-handle 1"],
        "a handle of the receiver's"
    );
    assert_eq!(
        run.refs(2),
        ["h1 p0:3 s1 w1"],
        "one strong and one weak count"
    );
}

#[test]
fn rust_transfer_binder_object_handle_to_a_handle_of_the_receiver() {
    // Thread::translate_object, thread.rs:727-734:
    // get_node_from_handle(strong);
    // AllocationView::transfer_binder_object, allocation.rs:395-402.
    let mut run = rust(TWO_HANDLES);
    let o = &run.step("p1 send 2 handle 1 weak-handle 1");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 2),
        ["transaction handle 1 weak-handle 1"],
        "a handle of the receiver's"
    );
    assert_eq!(
        run.refs(2),
        ["h1 p0:3 s1 w1"],
        "one strong and one weak count"
    );
}

#[test]
fn c_binder_translate_handle_back_to_the_receivers_own_node() {
    // binder_translate_handle, binder.c:2313-2336: the target owns the
    // node: a binder object, with a local reference on the node
    // (binder_inc_node_nilocked, internal 0); the buffer's release
    // gives it back (binder_transaction_buffer_release, 2083-2101).
    let mut run = c(TWO_HANDLES);
    let o = &run.step("p1 send 1 handle 1 weak-handle 1");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 0),
        ["transaction node 3 weak-node 3"],
        "its own node back"
    );
    assert_eq!(run.refs(0), NONE, "no reference to its own node");
    // p1's ref (internal), the transaction's target and the strong object
    // (local), the weak object (local).
    assert_eq!(
        run.nodes(0),
        ["n3 s3 w1 hs hw"],
        "one local strong, one local weak more"
    );
    run.step("p0 free");
    assert_eq!(
        run.nodes(0),
        ["n3 s1 w0 hs hw"],
        "given back by BC_FREE_BUFFER"
    );
}

#[test]
fn rust_transfer_binder_object_back_to_the_receivers_own_node() {
    // AllocationView::transfer_binder_object, allocation.rs:377-393:
    // the receiver owns the node: a binder object and one more count on
    // the node (update_refcount, 392); Allocation's drop gives it back
    // (cleanup_object, allocation.rs:427-436; Process::update_node,
    // process.rs:1031-1036).
    let mut run = rust(TWO_HANDLES);
    let o = &run.step("p1 send 1 handle 1 weak-handle 1");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 0),
        ["transaction node 3 weak-node 3"],
        "its own node back"
    );
    assert_eq!(run.refs(0), NONE, "no reference to its own node");
    // p1's NodeRef, the buffer's target NodeRef, the strong object; the
    // weak object.
    assert_eq!(
        run.nodes(0),
        ["n3 s3 w1 hs hw"],
        "one strong, one weak count more"
    );
    run.step("p0 free");
    assert_eq!(
        run.nodes(0),
        ["n3 s1 w0 hs hw"],
        "given back by BC_FREE_BUFFER"
    );
}

/// p1 is the manager and holds 1 -> p2:4.
const MANAGER_SENDS: &str = "procs 3
                             p1 set-manager
                             p2 send 0 node 4";

#[test]
fn c_get_ref_desc_olocked_offset_zero_for_the_manager_node_in_a_transaction() {
    // binder_translate_binder (binder.c:2266-2268) inserts the
    // manager's node in the target: get_ref_desc_olocked gives it
    // offset 0 whoever inserts it (1074), so descriptor 0; a handle
    // object does the same (binder_translate_handle, 2341-2343).
    let mut run = c(MANAGER_SENDS);
    let o = &run.step("p1 send 1 node 0");
    assert_eq!(
        reads(o, 2),
        ["transaction handle 0"],
        "the manager's node at 0"
    );
    assert_eq!(run.refs(2), ["h0 p1:0 s1 w0"]);
    let mut run = c("procs 3
                     p1 set-manager
                     p2 send 0 node 4
                     p0 acquire 0
                     p0 send 0 node 7
                     p1 send 2 handle 1");
    let o = &run.step("p0 send 1 handle 0");
    assert_eq!(
        reads(o, 2),
        ["transaction handle 0"],
        "a handle to it also becomes 0"
    );
}

#[test]
fn rust_transfer_binder_object_inserts_as_non_manager() {
    // AllocationView::transfer_binder_object, allocation.rs:396-400:
    // insert_or_update_handle(node_ref, false): start 1
    // (process.rs:858), whatever the node.
    let mut run = rust(MANAGER_SENDS);
    let o = &run.step("p1 send 1 node 0");
    assert_eq!(
        reads(o, 2),
        ["transaction handle 1"],
        "the manager's node at 1"
    );
    assert_eq!(run.refs(2), ["h1 p1:0 s1 w0"]);
    let mut run = rust(
        "procs 3
                        p1 set-manager
                        p2 send 0 node 4
                        p0 acquire 0
                        p0 send 0 node 7
                     p1 send 2 handle 1",
    );
    let o = &run.step("p0 send 1 handle 0");
    assert_eq!(
        reads(o, 2),
        ["transaction handle 1"],
        "a handle to it also gets 1"
    );
}

#[test]
fn c_binder_translate_handle_invalid_handle_fails_the_transaction() {
    // binder_translate_handle, binder.c:2300-2306: no such descriptor:
    // logged, EINVAL; binder_transaction 3557-3574 "translate handle
    // failed", BR_FAILED_REPLY; the objects translated so far and the
    // target's strong ref are released (3848-3868): the new node p1:7
    // is gone before its owner hears of it.
    let mut run = c(STRONG_ONLY);
    let o = &run.step("p0 send 1 node 7 handle 9");
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "the sender reads the failure, nothing else"
    );
    assert_eq!(reads(o, 1), NONE, "nothing delivered");
    assert_eq!(
        log(o),
        [
            "transaction-failed",
            "object-invalid-handle 9",
            "translate-failed"
        ]
    );
    assert_eq!(
        run.refs(1),
        NONE,
        "the reference made for node 7 is released"
    );
    assert_eq!(run.nodes(0), ["n0 s2 w1 hs hw"], "and node 7 with it");
    assert_eq!(
        run.nodes(1),
        ["n1 s1 w0 hs hw"],
        "the target's strong ref given back"
    );
}

#[test]
fn rust_translate_object_invalid_handle_fails_the_transaction() {
    // Thread::translate_object, thread.rs:731: ENOENT;
    // copy_transaction_data logs it (thread.rs:1118-1122),
    // Transaction::new pr_warns (transaction.rs:176-182); the
    // NewAllocation's drop releases the objects translated so far
    // (allocation.rs:260-266); BR_FAILED_REPLY with its source logged
    // (thread.rs:1312-1340).
    let mut run = rust(STRONG_ONLY);
    let o = &run.step("p0 send 1 node 7 handle 9");
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "the sender reads the failure, nothing else"
    );
    assert_eq!(reads(o, 1), NONE, "nothing delivered");
    assert_eq!(
        log(o),
        ["transaction-failed", "translate-failed", "copy-failed"]
    );
    assert_eq!(
        run.refs(1),
        NONE,
        "the reference made for node 7 is released"
    );
    assert_eq!(run.nodes(0), ["n0 s2 w0 hs hw"], "and node 7 with it");
    assert_eq!(
        run.nodes(1),
        ["n1 s1 w0 hs hw"],
        "the target's NodeRef dropped"
    );
}

// ---- the one-way queue and BC_FREE_BUFFER -----------------------------------

#[test]
fn c_binder_proc_transaction_queues_one_way_behind_an_unfreed_buffer() {
    // binder_proc_transaction, binder.c:2873-2878: a node with a
    // one-way transaction outstanding queues the next on its async_todo
    // (2913); binder_free_buf moves the next to the process's list, or
    // clears has_async_transaction (4107-4124).
    let mut run = c("procs 2
                     p1 set-manager
                     p0 send 0");
    let o = &run.step("p0 send 0");
    assert_eq!(reads(o, 0), ["transaction-complete"], "the sender is done");
    assert_eq!(
        reads(o, 1),
        NONE,
        "the second waits behind the unfreed first"
    );
    let o = &run.step("p1 free");
    assert_eq!(
        reads(o, 1),
        ["transaction"],
        "freeing the first delivers the second"
    );
    assert_eq!(run.buffers(1), 1);
    let o = &run.step("p1 free");
    assert_eq!(ret(o), "0");
    assert_eq!(run.buffers(1), 0);
    let o = &run.step("p0 send 0");
    assert_eq!(
        reads(o, 1),
        ["transaction"],
        "has_async_transaction was cleared"
    );
}

#[test]
fn rust_submit_oneway_queues_behind_an_unfreed_buffer() {
    // Node::submit_oneway, node.rs:531-548: with has_oneway_transaction
    // the next goes to oneway_todo; Allocation's drop calls
    // Node::pending_oneway_finished (allocation.rs:254-256,
    // node.rs:565-591), which pushes the next or clears the flag.
    let mut run = rust(
        "procs 2
                        p1 set-manager
                        p0 send 0",
    );
    let o = &run.step("p0 send 0");
    assert_eq!(reads(o, 0), ["transaction-complete"], "the sender is done");
    assert_eq!(
        reads(o, 1),
        NONE,
        "the second waits behind the unfreed first"
    );
    let o = &run.step("p1 free");
    assert_eq!(
        reads(o, 1),
        ["transaction"],
        "freeing the first delivers the second"
    );
    assert_eq!(run.buffers(1), 1);
    let o = &run.step("p1 free");
    assert_eq!(ret(o), "0");
    assert_eq!(run.buffers(1), 0);
    let o = &run.step("p0 send 0");
    assert_eq!(
        reads(o, 1),
        ["transaction"],
        "has_oneway_transaction was cleared"
    );
}

#[test]
fn c_binder_transaction_buffer_release_drops_the_objects_and_the_target_ref() {
    // binder_transaction_buffer_release, binder.c:2060-2061: the target
    // node's strong ref; 2102-2120 each handle object's count
    // (binder_dec_ref_for_handle), whose last removes the ref and tells
    // the node's owner.
    let mut run = c(STRONG_ONLY);
    assert_eq!(
        run.nodes(0),
        ["n0 s2 w1 hs hw"],
        "the buffer holds its target"
    );
    let o = &run.step("p0 free");
    assert_eq!(log(o), NONE);
    assert_eq!(
        run.refs(0),
        NONE,
        "the handle's only count was the buffer's"
    );
    assert_eq!(reads(o, 1), ["release 1", "decrefs 1"]);
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w1 hs hw"],
        "the target's strong ref released"
    );
    assert_eq!(
        ret(&run.step("p0 free")),
        "skipped",
        "no buffer left: no ioctl"
    );
}

#[test]
fn rust_allocation_drop_releases_the_objects_and_the_target_ref() {
    // Allocation's drop, allocation.rs:258: the target NodeRef dropped;
    // 260-266 each object cleaned up (AllocationView::cleanup_object,
    // allocation.rs:422-461: update_ref on a handle).
    let mut run = rust(STRONG_ONLY);
    assert_eq!(
        run.nodes(0),
        ["n0 s2 w0 hs hw"],
        "the buffer holds its target"
    );
    let o = &run.step("p0 free");
    assert_eq!(log(o), NONE);
    assert_eq!(
        run.refs(0),
        NONE,
        "the handle's only count was the buffer's"
    );
    assert_eq!(reads(o, 1), ["release 1", "decrefs 1"]);
    assert_eq!(
        run.nodes(0),
        ["n0 s1 w0 hs hw"],
        "the target's NodeRef dropped"
    );
    assert_eq!(
        ret(&run.step("p0 free")),
        "skipped",
        "no buffer left: no ioctl"
    );
}

#[test]
fn c_binder_transaction_buffer_release_bad_handle_is_a_pr_err() {
    // binder_transaction_buffer_release, binder.c:2109-2116: the handle
    // the buffer counted is gone (the receiver dropped it itself):
    // pr_err, nothing else.
    let mut run = c(STRONG_ONLY);
    run.step("p0 release 1");
    let o = &run.step("p0 free");
    assert_eq!(log(o), ["bad-buffer-object"], "the gone handle is a pr_err");
}

#[test]
fn rust_cleanup_object_missing_handle_is_no_such_ref() {
    // AllocationView::cleanup_object, allocation.rs:438-447: update_ref
    // on the gone handle: "no such ref" (process.rs:1021-1025);
    // Allocation's drop warns only on an Err, and update_ref returns Ok
    // (allocation.rs:263-265).
    let mut run = rust(STRONG_ONLY);
    run.step("p0 release 1");
    let o = &run.step("p0 free");
    assert_eq!(log(o), ["invalid-ref 1"], "the gone handle is no such ref");
}

// ---- death notifications ------------------------------------------------------

/// p0 holds 0 -> p1:0 (the manager's node) with a death notification,
/// cookie 7.
const DEATH: &str = "procs 2
                     p1 set-manager
                     p0 acquire 0
                     p0 death 0 7";

#[test]
fn c_binder_thread_write_death_commands_on_a_missing_ref() {
    // binder_thread_write, binder.c:4429-4440: no such descriptor (weak
    // or strong): logged.
    let mut run = c("procs 1
                     p0 death 5 1");
    assert_eq!(
        log(run.last()),
        ["death-invalid-ref request"],
        "a request on no ref is logged"
    );
    assert_eq!(
        log(&run.step("p0 clear-death 5 1")),
        ["death-invalid-ref clear"]
    );
}

#[test]
fn rust_request_and_clear_death_on_a_missing_ref() {
    // Process::request_death, process.rs:1280-1286, and
    // Process::clear_death, 1334-1340: no such handle: logged.
    let mut run = rust(
        "procs 1
                        p0 death 5 1",
    );
    assert_eq!(
        log(run.last()),
        ["death-invalid-ref request"],
        "a request on no ref is logged"
    );
    assert_eq!(
        log(&run.step("p0 clear-death 5 1")),
        ["death-invalid-ref clear"]
    );
}

#[test]
fn c_binder_thread_write_death_already_set_not_active_and_cookie_mismatch() {
    // binder_thread_write, binder.c:4454-4461: one notification per
    // ref; 4476-4482 clearing none; 4484-4493 clearing another cookie;
    // 4495-4510 a clear on a live node queues
    // BR_CLEAR_DEATH_NOTIFICATION_DONE on the looper thread.
    let mut run = c(DEATH);
    assert_eq!(log(run.last()), NONE);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0 d7"]);
    assert_eq!(
        log(&run.step("p0 death 0 8")),
        ["death-already-set"],
        "one notification per ref"
    );
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s1 w0 d7"],
        "the first notification kept"
    );
    assert_eq!(
        log(&run.step("p0 clear-death 0 8")),
        ["death-cookie-mismatch"]
    );
    let o = &run.step("p0 clear-death 0 7");
    assert_eq!(log(o), NONE);
    assert_eq!(reads(o, 0), ["clear-death-done 7"]);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"]);
    assert_eq!(log(&run.step("p0 clear-death 0 7")), ["death-not-active"]);
}

#[test]
fn rust_request_and_clear_death_already_set_not_active_and_cookie_mismatch() {
    // Process::request_death, process.rs:1289-1295;
    // Process::clear_death, 1342-1356; NodeDeath::set_cleared on a live
    // node (node.rs:1007-1033) and push_work_if_looper
    // (process.rs:1360-1367).
    let mut run = rust(DEATH);
    assert_eq!(log(run.last()), NONE);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0 d7"]);
    assert_eq!(
        log(&run.step("p0 death 0 8")),
        ["death-already-set"],
        "one notification per ref"
    );
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s1 w0 d7"],
        "the first notification kept"
    );
    assert_eq!(
        log(&run.step("p0 clear-death 0 8")),
        ["death-cookie-mismatch"]
    );
    let o = &run.step("p0 clear-death 0 7");
    assert_eq!(log(o), NONE);
    assert_eq!(reads(o, 0), ["clear-death-done 7"]);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"]);
    assert_eq!(log(&run.step("p0 clear-death 0 7")), ["death-not-active"]);
}

#[test]
fn c_binder_node_release_delivers_the_death_notification() {
    // binder_node_release, binder.c:6252-6263: the dying owner's node
    // queues each ref's death as BR_DEAD_BINDER to the holder; read, it
    // moves to delivered_death (binder_thread_read, 4982-4986),
    // BC_DEAD_BINDER_DONE takes it off (4529-4551); the ref keeps its
    // notification until cleared, and a clear then is done at once
    // (4495-4510).
    let mut run = c(DEATH);
    let o = &run.step("p1 exit");
    assert_eq!(
        reads(o, 0),
        ["dead-binder 7"],
        "the owner's death is delivered"
    );
    assert_eq!(log(o), NONE, "BC_DEAD_BINDER_DONE found it");
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0 d7"]);
    let o = &run.step("p0 clear-death 0 7");
    assert_eq!(reads(o, 0), ["clear-death-done 7"]);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"]);
}

#[test]
fn rust_node_release_sets_the_death_dead() {
    // Node::release, node.rs:558-562, and NodeDeath::set_dead,
    // node.rs:1049-1070: each death on the node is pushed to its
    // process; NodeDeath::do_work (node.rs:1102-1141) delivers
    // BR_DEAD_BINDER and files it as delivered;
    // Process::dead_binder_done (process.rs:1377-1382) marks it done; a
    // clear then queues BR_CLEAR_DEATH_NOTIFICATION_DONE.
    let mut run = rust(DEATH);
    let o = &run.step("p1 exit");
    assert_eq!(
        reads(o, 0),
        ["dead-binder 7"],
        "the owner's death is delivered"
    );
    assert_eq!(log(o), NONE);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0 d7"]);
    let o = &run.step("p0 clear-death 0 7");
    assert_eq!(reads(o, 0), ["clear-death-done 7"]);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"]);
}

#[test]
fn c_binder_thread_write_death_requested_on_a_dead_node_is_delivered_at_once() {
    // binder_thread_write, binder.c:4466-4475: the node's owner is
    // already gone: BR_DEAD_BINDER queued with the request.
    let mut run = c("procs 2
                     p1 set-manager
                     p0 acquire 0
                     p1 exit");
    let o = &run.step("p0 death 0 7");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 0),
        ["dead-binder 7"],
        "a dead node's notification comes at once"
    );
}

#[test]
fn rust_request_death_on_a_dead_node_is_delivered_at_once() {
    // Process::request_death, process.rs:1310-1314: the owner is dead:
    // set_dead at once.
    let mut run = rust(
        "procs 2
                        p1 set-manager
                        p0 acquire 0
                        p1 exit",
    );
    let o = &run.step("p0 death 0 7");
    assert_eq!(log(o), NONE);
    assert_eq!(
        reads(o, 0),
        ["dead-binder 7"],
        "a dead node's notification comes at once"
    );
}

#[test]
fn c_binder_cleanup_ref_olocked_drops_the_death_with_the_ref() {
    // binder_cleanup_ref_olocked, binder.c:1216-1223: the ref's death
    // goes with it; the node no longer lists the ref (1201), so its
    // owner's death tells no one.
    let mut run = c(DEATH);
    run.step("p0 release 0");
    assert_eq!(
        run.refs(0),
        NONE,
        "the last count removes the ref, death and all"
    );
    let o = &run.step("p1 exit");
    assert_eq!(reads(o, 0), NONE, "no notification for a dropped ref");
    assert_eq!(log(o), NONE);
}

#[test]
fn rust_update_ref_aborts_the_death_with_the_ref() {
    // Process::update_ref, process.rs:989-992: set_cleared(abort) takes
    // the death off the node's list (NodeDeath::set_cleared,
    // node.rs:1007-1033); the owner's death tells no one.
    let mut run = rust(DEATH);
    run.step("p0 release 0");
    assert_eq!(run.refs(0), NONE);
    let o = &run.step("p1 exit");
    assert_eq!(reads(o, 0), NONE, "no notification for a dropped ref");
    assert_eq!(log(o), NONE);
}

// ---- a process's death ----------------------------------------------------------

/// p1 (the manager) holds 1 -> p0:3 through a buffer it has not freed.
const HOLDER: &str = "procs 2
                      p1 set-manager
                      p0 send 0 node 3";

#[test]
fn c_binder_deferred_release_releases_the_refs_and_tells_the_owners() {
    // binder_deferred_release, binder.c:6340-6349: each ref of the
    // dying process is cleaned up (binder_cleanup_ref_olocked,
    // 1182-1231), which drops the node's internal refs and queues its
    // work to the owner: BR_RELEASE, BR_DECREFS. The buffers are freed
    // without releasing their objects (the refs are gone already):
    // nothing logged.
    let mut run = c(HOLDER);
    let o = &run.step("p1 exit");
    assert_eq!(ret(o), "0");
    assert_eq!(
        reads(o, 0),
        ["release 3", "decrefs 3"],
        "the owner hears its node lost its users"
    );
    assert_eq!(log(o), NONE);
    assert!(!run.alive(1));
    assert_eq!(run.refs(1), NONE);
    assert_eq!(run.nodes(0), NONE, "the owner's node is freed");
}

#[test]
fn rust_deferred_release_drops_the_refs_and_tells_the_owners() {
    // Process::deferred_release, process.rs:1450-1476: the NodeRefInfos
    // are taken off their nodes and dropped (NodeRef's drop,
    // node.rs:901-916, pushes the node to its owner); the buffers'
    // allocations are dropped last (process.rs:1495-1510), their
    // handles found gone on a dead process, which is not logged
    // (process.rs:1021-1025).
    let mut run = rust(HOLDER);
    let o = &run.step("p1 exit");
    assert_eq!(ret(o), "0");
    assert_eq!(
        reads(o, 0),
        ["release 3", "decrefs 3"],
        "the owner hears its node lost its users"
    );
    assert_eq!(log(o), NONE);
    assert!(!run.alive(1));
    assert_eq!(run.refs(1), NONE);
    assert_eq!(run.nodes(0), NONE, "the owner's node is removed");
}

#[test]
fn c_binder_deferred_release_keeps_the_refs_to_its_dead_nodes() {
    // binder_node_release, binder.c:6226-6236: a node with refs from
    // others outlives its owner (proc NULL, local counts zeroed); the
    // refs stay, and their last count frees it quietly.
    let mut run = c(HOLDER);
    let o = &run.step("p0 exit");
    assert_eq!((reads(o, 1), log(o)), (vec![], vec![]));
    assert_eq!(
        run.refs(1),
        ["h1 p0:3 s1 w0"],
        "the ref to the dead node stays"
    );
    let o = &run.step("p1 free");
    assert_eq!(log(o), NONE);
    assert_eq!(run.refs(1), NONE);
}

#[test]
fn rust_deferred_release_keeps_the_refs_to_its_dead_nodes() {
    // Process::deferred_release, process.rs:1439-1447: Node::release
    // only cancels the one-way queue and sets the deaths
    // (node.rs:550-563); others' NodeRefs keep the node.
    let mut run = rust(HOLDER);
    let o = &run.step("p0 exit");
    assert_eq!((reads(o, 1), log(o)), (vec![], vec![]));
    assert_eq!(
        run.refs(1),
        ["h1 p0:3 s1 w0"],
        "the ref to the dead node stays"
    );
    let o = &run.step("p1 free");
    assert_eq!(log(o), NONE);
    assert_eq!(run.refs(1), NONE);
}

#[test]
fn c_binder_node_release_logs_the_queued_one_way_transactions() {
    // binder_node_release, binder.c:6217: binder_release_work on the
    // node's async_todo: each undelivered one-way transaction logged
    // (binder_cleanup_transaction, 1767-1779).
    let mut run = c("procs 2
                     p1 set-manager
                     p0 send 0
                     p0 send 0");
    let o = &run.step("p1 exit");
    assert_eq!(
        log(o),
        ["undelivered-transaction"],
        "the queued one-way transaction is logged"
    );
    assert_eq!(reads(o, 0), NONE);
}

#[test]
fn rust_node_release_cancels_the_queued_one_way_transactions() {
    // Node::release, node.rs:552-556: each queued one-way transaction
    // is cancelled, logged (Transaction::cancel,
    // transaction.rs:555-572).
    let mut run = rust(
        "procs 2
                        p1 set-manager
                        p0 send 0
                        p0 send 0",
    );
    let o = &run.step("p1 exit");
    assert_eq!(
        log(o),
        ["undelivered-transaction"],
        "the queued one-way transaction is logged"
    );
    assert_eq!(reads(o, 0), NONE);
}

// ---- BINDER_GET_NODE_INFO_FOR_REF ---------------------------------------------

#[test]
fn c_binder_ioctl_get_node_info_for_ref_eperm_unless_manager() {
    // binder_ioctl_get_node_info_for_ref, binder.c:5579-5585: only the
    // process owning the manager node.
    let mut run = c("procs 2
                     p0 node-info 0");
    assert_eq!(ret(run.last()), "EPERM", "no manager at all");
    run.step("p1 set-manager");
    run.step("p0 acquire 0");
    assert_eq!(ret(&run.step("p0 node-info 0")), "EPERM", "not the manager");
}

#[test]
fn rust_get_node_info_from_ref_eperm_unless_manager() {
    // Process::get_node_info_from_ref, process.rs:1235-1238: only a
    // process that is_manager.
    let mut run = rust(
        "procs 2
                        p0 node-info 0",
    );
    assert_eq!(ret(run.last()), "EPERM", "no manager at all");
    run.step("p1 set-manager");
    run.step("p0 acquire 0");
    assert_eq!(ret(&run.step("p0 node-info 0")), "EPERM", "not the manager");
}

#[test]
fn c_binder_ioctl_get_node_info_for_ref_einval_for_a_missing_or_weak_ref() {
    // binder_ioctl_get_node_info_for_ref, binder.c:5587-5589:
    // binder_get_node_from_ref(need_strong_ref): EINVAL for no such
    // descriptor, and for a weak-only one (logged,
    // binder_get_ref_olocked 1032-1034).
    let mut run = c(WEAK_ONLY);
    let o = &run.step("p0 node-info 5");
    assert_eq!(
        (ret(o), log(o)),
        ("EINVAL".into(), vec!["ioctl-failed EINVAL".into()]),
        "no ref: only binder_ioctl's error line (binder.c:5998-6001)"
    );
    let o = &run.step("p0 node-info 1");
    assert_eq!(ret(o), "EINVAL", "a weak-only ref has no node info");
    assert_eq!(log(o), ["weak-as-strong", "ioctl-failed EINVAL"]);
}

#[test]
fn rust_get_node_info_from_ref_enoent_for_a_missing_ref_counts_a_weak_one() {
    // Process::get_node_info_from_ref, process.rs:1242: ENOENT for no
    // such handle; no strong ref needed.
    let mut run = rust(WEAK_ONLY);
    let o = &run.step("p0 node-info 5");
    assert_eq!(
        (ret(o), log(o)),
        ("ENOENT".into(), vec![]),
        "no such handle: ENOENT"
    );
    let o = &run.step("p0 node-info 1");
    assert_eq!(ret(o), "strong 0 weak 1", "a weak-only ref is answered");
    assert_eq!(log(o), NONE);
}

#[test]
fn c_binder_ioctl_get_node_info_for_ref_counts_local_and_internal_strong_local_weak() {
    // binder_ioctl_get_node_info_for_ref, binder.c:5591-5593: strong =
    // local + internal strong refs, weak = local weak refs only (a
    // ref's weak count is no local ref).
    let mut run = c(STRONG_ONLY);
    run.step("p0 increfs 1");
    assert_eq!(run.refs(0), ["h1 p1:1 s1 w1"]);
    assert_eq!(
        ret(&run.step("p0 node-info 1")),
        "strong 1 weak 0",
        "internal and local strong, local weak"
    );
}

#[test]
fn rust_get_node_info_from_ref_counts_the_nodes_counts() {
    // Process::get_node_info_from_ref, process.rs:1245,
    // Node::populate_counts, node.rs:492-500: the node's strong and
    // weak counts (one per NodeRef holding each).
    let mut run = rust(STRONG_ONLY);
    run.step("p0 increfs 1");
    assert_eq!(run.refs(0), ["h1 p1:1 s1 w1"]);
    assert_eq!(
        ret(&run.step("p0 node-info 1")),
        "strong 1 weak 1",
        "the node's strong and weak counts"
    );
}

// ---- node work: BR_INCREFS, BR_ACQUIRE, BR_RELEASE, BR_DECREFS ---------------

/// p1 (the manager) holds 1 -> p0:3 weakly, through a buffer.
const NODE_WORK: &str = "procs 2
                         p1 set-manager
                         p0 send 0 weak-node 3";

#[test]
fn c_binder_thread_read_node_work_follows_the_counts() {
    // binder_thread_read, binder.c:4870-4950: BR_INCREFS when the node
    // gains its first weak user, BR_ACQUIRE its first strong one,
    // BR_RELEASE and BR_DECREFS when they go;
    // BC_INCREFS_DONE/BC_ACQUIRE_DONE (binder_thread_write, 4225-4285)
    // give the local refs of the request back.
    let mut run = c(NODE_WORK);
    assert_eq!(reads(run.last(), 0), ["transaction-complete", "increfs 3"]);
    assert_eq!(run.nodes(0), ["n3 s0 w0 hw"]);
    run.step("p1 increfs 1");
    run.step("p1 free");
    let o = &run.step("p0 send 0 node 3");
    assert_eq!(
        reads(o, 0),
        ["transaction-complete", "acquire 3"],
        "the first strong user"
    );
    assert_eq!(reads(o, 1), ["transaction handle 1"], "the same ref");
    assert_eq!(run.refs(1), ["h1 p0:3 s1 w1"]);
    assert_eq!(run.nodes(0), ["n3 s1 w0 hs hw"]);
    let o = &run.step("p1 decrefs 1");
    assert_eq!(
        (reads(o, 0), log(o)),
        (vec![], vec![]),
        "the last weak count: no work"
    );
    let o = &run.step("p1 free");
    assert_eq!(
        reads(o, 0),
        ["release 3", "decrefs 3"],
        "the last user gone"
    );
    assert_eq!(run.nodes(0), NONE);
}

#[test]
fn rust_do_work_locked_follows_the_counts_and_an_empty_read_is_eagain() {
    // Node::do_work_locked, node.rs:611-661: the same four from the
    // node's counts against its has_count flags;
    // Node::update_refcount_locked (node.rs:384-422) pushes the node
    // when a count reaches 0 with its has_count set, even if the other
    // count keeps it: Thread::read then writes nothing and fails with
    // EAGAIN (thread.rs:1606-1617), logged (Thread::write_read,
    // thread.rs:1660-1667).
    let mut run = rust(NODE_WORK);
    assert_eq!(reads(run.last(), 0), ["transaction-complete", "increfs 3"]);
    assert_eq!(run.nodes(0), ["n3 s0 w1 hw"]);
    run.step("p1 increfs 1");
    run.step("p1 free");
    let o = &run.step("p0 send 0 node 3");
    assert_eq!(
        reads(o, 0),
        ["transaction-complete", "acquire 3"],
        "the first strong user"
    );
    assert_eq!(reads(o, 1), ["transaction handle 1"], "the same ref");
    assert_eq!(run.refs(1), ["h1 p0:3 s1 w1"]);
    assert_eq!(run.nodes(0), ["n3 s1 w1 hs hw"]);
    let o = &run.step("p1 decrefs 1");
    assert_eq!(reads(o, 0), NONE, "the last weak count: nothing to say");
    assert_eq!(
        log(o),
        ["ioctl-failed EAGAIN"],
        "but the node was pushed: an empty read, which Rust's ioctl reports"
    );
    let o = &run.step("p1 free");
    assert_eq!(
        reads(o, 0),
        ["release 3", "decrefs 3"],
        "the last user gone"
    );
    assert_eq!(run.nodes(0), NONE);
}

#[test]
fn c_print_binder_proc_queues_the_work_of_a_node_only_local_refs_hold() {
    // print_binder_proc, binder.c:6654-6666 (debugfs proc/<pid>, which
    // the real drivers' executor reads after every step): each node is
    // printed under a temporary reference (print_next_binder_node_ilocked,
    // 6615) dropped by binder_put_node (binder_dec_node_tmpref,
    // 987-1012), that is binder_dec_node_nilocked(node, 0, 1), which
    // queues the node's work when no ref, local weak or temporary count
    // holds it and it has has_strong_ref (890-898). p0's node 1, held only
    // by the local strong ref of the buffer sent to it
    // (binder_get_node_refs_for_txn, 2967-2982), then reads as "state
    // unchanged" (binder_thread_read, 4946-4952): nothing added, so
    // `goto retry` (4815-4817) and EAGAIN (4784-4786), which binder_ioctl
    // logs (6000-6001). The same happens first without any reading: p1's
    // ref goes (binder_cleanup_ref_olocked, 1197-1201), and its weak
    // binder_dec_node_nilocked queues the node's work although the local
    // strong ref keeps the node as it is.
    let mut run = c("procs 2
                     p1 set-manager
                     p0 send 0 node 1
                     p1 send 1
                     p1 free");
    assert_eq!(run.refs(1), NONE, "p1 gave its ref to p0's node back");
    assert_eq!(run.nodes(0), ["n1 s1 w0 hs hw"], "the buffer's local ref");
    assert_eq!(
        (reads(run.last(), 0), log(run.last())),
        (vec![], vec!["ioctl-failed EAGAIN".to_string()]),
        "the ref's last count queued work that says nothing"
    );
    let o = run.step("p1 node-info 0");
    assert_eq!(
        (reads(&o, 0), log(&o)),
        (vec![], vec!["ioctl-failed EINVAL".to_string()]),
        "nothing queued: nothing to read"
    );
    run.driver.print_binder_proc(Pid(0));
    assert_eq!(run.nodes(0), ["n1 s1 w0 hs hw"], "reading changes no count");
    let o = run.step("p1 node-info 0");
    assert_eq!(
        (reads(&o, 0), log(&o)),
        (
            vec![],
            vec![
                "ioctl-failed EAGAIN".to_string(),
                "ioctl-failed EINVAL".to_string()
            ]
        ),
        "the work the reading queued: a read that adds nothing fails with EAGAIN"
    );
    let o = run.step("p1 node-info 0");
    assert_eq!(log(&o), ["ioctl-failed EINVAL"], "read once, gone");
    run.driver.print_binder_proc(Pid(1));
    let o = run.step("p1 node-info 0");
    assert_eq!(
        log(&o),
        ["ioctl-failed EINVAL"],
        "p1's manager node is held by p0's ref: no work"
    );
}

// ---- the lock a paused command keeps ----------------------------------------------

#[test]
fn c_needs_names_the_commands_that_take_context_mgr_node_lock() {
    // context_mgr_node_lock is taken by binder_ioctl_set_ctx_mgr
    // (binder.c:5531), binder_ioctl_get_node_info_for_ref (5579),
    // binder_deferred_release (6286), binder_transaction to 0 (3230)
    // and binder_thread_write's BC_INCREFS/BC_ACQUIRE 0 (4173); nothing
    // else takes it.
    let needs = |line: &str| CDriver::needs(&parse_step(line).command).context_manager;
    for line in [
        "p0 set-manager",
        "p0 node-info 3",
        "p0 exit",
        "p0 send 0 node 1",
    ] {
        assert!(needs(line), "{line} takes context_mgr_node_lock");
    }
    for line in ["p0 increfs 0", "p0 acquire 0"] {
        assert!(needs(line), "{line} takes context_mgr_node_lock");
    }
    for line in [
        "p0 release 0",
        "p0 decrefs 0",
        "p0 acquire 1",
        "p0 send 1 node 0",
        "p0 free",
        "p0 death 0 1",
        "p0 clear-death 0 1",
    ] {
        assert!(!needs(line), "{line} does not take context_mgr_node_lock");
    }
}

#[test]
fn c_binder_thread_write_keeps_context_mgr_node_lock_across_inc_ref_for_node() {
    // binder_thread_write, binder.c:4173-4186: BC_ACQUIRE 0 holds
    // context_mgr_node_lock while binder_inc_ref_for_node allocates the
    // new ref (1470-1475): the manager's death and a transaction to 0
    // wait for it; a command that does not take the lock runs
    // meanwhile.
    let mut run = c("procs 3
                     p1 set-manager");
    let mut window = Window::at(AllocSite::Ref, &["p2 send 0", "p1 exit", "p2 acquire 5"]);
    let o = &run.step_in("p0 acquire 0", &mut window);
    assert_eq!(
        window.held,
        Some(Held {
            context_manager: true
        }),
        "the lock is kept"
    );
    assert!(
        window.ran[0].is_none(),
        "a transaction to 0 waits for the lock"
    );
    assert!(
        window.ran[1].is_none(),
        "the manager's release waits for the lock"
    );
    assert_eq!(
        log(window.ran(2)),
        ["invalid-ref 5"],
        "a command without the lock runs"
    );
    assert_eq!(log(o), NONE);
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"]);
    assert!(run.alive(1), "the manager is alive when the insert ends");
}

#[test]
fn rust_get_manager_node_releases_the_context_lock_before_the_insert() {
    // Context::get_manager_node, context.rs:136-144, clones the
    // manager's NodeRef under the manager lock and returns;
    // insert_or_update_handle (process.rs:972) allocates holding none
    // of the context's locks: a transaction to 0 and the manager's
    // release run in the window, and the insert completes with the
    // NodeRef it holds.
    let mut run = rust(
        "procs 3
                        p1 set-manager",
    );
    let mut window = Window::at(AllocSite::Ref, &["p2 send 0", "p1 exit", "p2 acquire 5"]);
    let o = &run.step_in("p0 acquire 0", &mut window);
    assert_eq!(window.held, Some(Held::default()), "no context lock kept");
    assert_eq!(
        reads(window.ran(0), 1),
        ["transaction"],
        "a transaction to 0 runs"
    );
    assert_eq!(ret(window.ran(1)), "0", "the manager's release runs");
    assert_eq!(log(window.ran(2)), ["invalid-ref 5"]);
    assert_eq!(log(o), NONE);
    assert!(!run.alive(1));
    assert_eq!(
        run.refs(0),
        ["h0 p1:0 s1 w0"],
        "a reference to the dead manager's node"
    );
}

// ---- who is the manager, at each pick -------------------------------------------

/// p3 is the manager; p2 holds 1 -> p1:0 (p1's node 0, not the manager's)
/// and 2 -> p0:9; p3 holds 4 -> p0:8.
const PICK: &str = "procs 4
                    p3 set-manager
                    p2 send 0 node 2
                    p1 send 0 node 0
                    p0 send 0 node 9 node 8
                    p3 send 1 handle 2 handle 3";

/// The step of PICK whose insert of p1:0 into p0 is paused: while it is,
/// the manager dies and p1 becomes the manager with that very node.
const PICK_STEP: &str = "p2 send 2 handle 1";
const NEW_MANAGER: [&str; 2] = ["p3 exit", "p1 set-manager"];

#[test]
fn c_get_ref_desc_olocked_offset_zero_for_the_current_manager_node_at_each_pick() {
    // get_ref_desc_olocked, binder.c:1074: the offset is decided when
    // it runs, against the context's manager node then: a node that
    // became the manager's while binder_inc_ref_for_node allocated the
    // new ref (1470-1476) gets 0.
    let mut plain = c(PICK);
    assert_eq!(
        reads(&plain.step(PICK_STEP), 0),
        ["transaction handle 1"],
        "not the manager's"
    );
    let mut run = c(PICK);
    let mut window = Window::at(AllocSite::Ref, &NEW_MANAGER);
    let o = &run.step_in(PICK_STEP, &mut window);
    assert_eq!(ret(window.ran(1)), "0", "p1 became the manager meanwhile");
    assert_eq!(
        reads(o, 0),
        ["transaction handle 0"],
        "the manager's node at the pick: 0"
    );
    assert_eq!(run.refs(0), ["h0 p1:0 s1 w0"]);
}

#[test]
fn c_get_ref_desc_olocked_offset_zero_for_the_current_manager_node_at_each_retry() {
    // binder_get_ref_for_node_olocked, binder.c:1145-1146: a grow sends
    // it back to retry:, and get_ref_desc_olocked decides the offset
    // again (1074): p0 holds 1..63, so the first pick finds no room
    // from 1; while the map grows (1089-1094) p1:0 becomes the
    // manager's node, and the retry gives it the free descriptor 0.
    let program = format!("{PICK}\np3 send 4 nodes 100 63");
    let mut plain = c(&program);
    assert_eq!(reads(&plain.step(PICK_STEP), 0), ["transaction handle 64"]);
    let mut run = c(&program);
    let mut window = Window::at(AllocSite::Grow, &NEW_MANAGER);
    let o = &run.step_in(PICK_STEP, &mut window);
    assert_eq!(ret(window.ran(1)), "0", "p1 became the manager meanwhile");
    assert_eq!(
        reads(o, 0),
        ["transaction handle 0"],
        "the manager's node at the retry: 0"
    );
}

#[test]
fn rust_insert_or_update_handle_is_manager_is_the_callers_for_good() {
    // Process::insert_or_update_handle, process.rs:831-835, 858:
    // is_manager is the caller's argument, false from
    // transfer_binder_object (allocation.rs:400), whatever the manager
    // becomes while the insert allocates or grows.
    for (site, extra, handle) in [
        (AllocSite::Ref, "", "transaction handle 1"),
        (
            AllocSite::Grow,
            "\np3 send 4 nodes 100 63",
            "transaction handle 64",
        ),
    ] {
        let mut run = rust(&format!("{PICK}{extra}"));
        let mut window = Window::at(site, &NEW_MANAGER);
        let o = &run.step_in(PICK_STEP, &mut window);
        assert_eq!(ret(window.ran(1)), "0", "p1 became the manager meanwhile");
        assert_eq!(reads(o, 0), [handle], "{site:?}: inserted as a non-manager");
    }
}

// ---- failing allocations ------------------------------------------------------------

#[test]
fn c_binder_inc_ref_for_node_enomem_falls_back_to_update_ref_for_handle() {
    // binder_inc_ref_for_node, binder.c:1472-1474: ENOMEM when the new
    // ref cannot be allocated; binder_thread_write then tries
    // descriptor 0 itself (4188-4191): none, an invalid ref
    // (4212-4217); a stale descriptor 0 is counted.
    let mut run = c("procs 2
                     p1 set-manager");
    let o = &run.step_in("p0 acquire 0", &mut Window::failing(AllocSite::Ref));
    assert_eq!(ret(o), "0");
    assert_eq!(log(o), ["invalid-ref 0"]);
    assert_eq!(run.refs(0), NONE);
    // With a stale descriptor 0, that one is counted instead.
    let mut run = c(STALE_ZERO);
    let o = &run.step_in("p1 increfs 0", &mut Window::failing(AllocSite::Ref));
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "the fallback finds descriptor 0"
    );
    assert_eq!(
        run.refs(1),
        ["h0 p0:0 s1 w1"],
        "the stale descriptor 0 counted"
    );
}

#[test]
fn rust_update_ref_ignores_the_inserts_enomem() {
    // Process::insert_or_update_handle, process.rs:849-851: ENOMEM from
    // the reservations; Process::update_ref drops the result (972) and
    // succeeds: nothing counted, nothing logged.
    let mut run = rust(
        "procs 2
                        p1 set-manager",
    );
    let o = &run.step_in("p0 acquire 0", &mut Window::failing(AllocSite::Ref));
    assert_eq!(
        (ret(o), log(o)),
        ("0".into(), vec![]),
        "the failed insert ignored: Ok, no line"
    );
    assert_eq!(run.refs(0), NONE);
    let mut run = rust(STALE_ZERO);
    let o = &run.step_in("p1 increfs 0", &mut Window::failing(AllocSite::Ref));
    assert_eq!((ret(o), log(o)), ("0".into(), vec![]));
    assert_eq!(
        run.refs(1),
        ["h0 p0:0 s1 w0"],
        "the stale handle 0 untouched"
    );
}

#[test]
fn c_binder_translate_binder_enomem_fails_the_transaction() {
    // binder_translate_binder, binder.c:2266-2270: the ref's ENOMEM;
    // binder_transaction 3537-3555 BR_FAILED_REPLY; the new node goes
    // with its last temporary ref (binder_put_node, 2286), the target's
    // strong ref is given back.
    let mut run = c("procs 2
                     p1 set-manager");
    let o = &run.step_in("p0 send 0 node 3", &mut Window::failing(AllocSite::Ref));
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "ENOMEM fails the transaction"
    );
    assert_eq!(reads(o, 1), NONE);
    assert_eq!(log(o), ["transaction-failed", "translate-failed"]);
    assert_eq!(run.nodes(0), NONE);
    assert_eq!(run.nodes(1), ["n0 s1 w1 hs hw"]);
}

#[test]
fn rust_insert_or_update_handle_enomem_fails_the_transaction() {
    // Process::insert_or_update_handle, process.rs:849-851: ENOMEM (the
    // NodeRef dropped); copy_transaction_data (thread.rs:1118-1122) and
    // Transaction::new (transaction.rs:176-182) log it;
    // BR_FAILED_REPLY.
    let mut run = rust(
        "procs 2
                        p1 set-manager",
    );
    let o = &run.step_in("p0 send 0 node 3", &mut Window::failing(AllocSite::Ref));
    assert_eq!(
        reads(o, 0),
        ["failed-reply"],
        "ENOMEM fails the transaction"
    );
    assert_eq!(reads(o, 1), NONE);
    assert_eq!(
        log(o),
        ["transaction-failed", "translate-failed", "copy-failed"]
    );
    assert_eq!(run.nodes(0), NONE);
    assert_eq!(run.nodes(1), ["n0 s1 w0 hs hw"]);
}

/// p0 holds 1..63 (p1's nodes 100..162); p1 (the manager) holds 1 -> p0:1
/// and 2 -> p0:2.
const FULL: &str = "procs 2
                    p1 set-manager
                    p0 send 0 node 1 node 2
                    p1 send 1 nodes 100 63";

#[test]
fn c_get_ref_desc_olocked_failed_grow_takes_the_slow_path() {
    // get_ref_desc_olocked, binder.c:1089-1097: the bigger map's
    // allocation fails; dbitmap_grow with NULL disables the map, and
    // the retry finds the descriptor by slow_desc_lookup_olocked
    // (1043-1059, 1076-1079).
    let mut run = c(FULL);
    let o = &run.step_in("p1 send 2 node 200", &mut Window::failing(AllocSite::Grow));
    assert_eq!(log(o), NONE, "a failed grow is no error in C");
    assert_eq!(
        reads(o, 0),
        ["transaction handle 64"],
        "the slow path's descriptor"
    );
}

#[test]
fn rust_insert_or_update_handle_failed_grow_is_enomem() {
    // Process::insert_or_update_handle, process.rs:872-880: the
    // realloc's failure is ENOMEM: the translation fails,
    // BR_FAILED_REPLY.
    let mut run = rust(FULL);
    let o = &run.step_in("p1 send 2 node 200", &mut Window::failing(AllocSite::Grow));
    assert_eq!(
        reads(o, 1),
        ["failed-reply"],
        "a failed grow fails the transaction"
    );
    assert_eq!(reads(o, 0), NONE);
    assert_eq!(
        log(o),
        ["transaction-failed", "translate-failed", "copy-failed"]
    );
}

// ---- a target that dies during the transaction --------------------------------------

#[test]
fn c_binder_proc_transaction_dead_target_is_dead_reply() {
    // The C insert never looks at is_dead (binder_inc_ref_for_node,
    // binder.c:1458-1500): the ref goes into the dying target's tree;
    // binder_proc_transaction then finds the process dead (2887-2892):
    // "dead process" (3842-3847), the buffer's objects released,
    // BR_DEAD_REPLY.
    let mut run = c("procs 2
                     p1 set-manager");
    let mut window = Window::at(AllocSite::Ref, &["p1 exit"]);
    let o = &run.step_in("p0 send 0 weak-node 1", &mut window);
    assert!(
        window.ran[0].is_some(),
        "the transaction keeps no context lock"
    );
    assert_eq!(
        reads(o, 0),
        ["dead-reply"],
        "the target died: BR_DEAD_REPLY"
    );
    assert_eq!(log(o), ["transaction-failed", "dead-process"]);
    assert_eq!(run.nodes(0), NONE, "the node and its ref are gone");
}

#[test]
fn rust_insert_or_update_handle_dead_target_is_esrch() {
    // Process::insert_or_update_handle, process.rs:907-912: the target
    // died while the insert allocated: ESRCH fails the translation:
    // BR_FAILED_REPLY.
    let mut run = rust(
        "procs 2
                        p1 set-manager",
    );
    let mut window = Window::at(AllocSite::Ref, &["p1 exit"]);
    let o = &run.step_in("p0 send 0 weak-node 1", &mut window);
    assert!(window.ran[0].is_some());
    assert_eq!(reads(o, 0), ["failed-reply"], "ESRCH fails the translation");
    assert_eq!(
        log(o),
        ["transaction-failed", "translate-failed", "copy-failed"]
    );
    assert_eq!(run.nodes(0), NONE, "the node is gone");
}

// ---- versions ------------------------------------------------------------------------

/// The syzbot collision of July 2024 through commands: p0 holds 0 on the
/// first manager's node, which dies; p2 registers.
const COLLISION: &str = "procs 3
                         p1 set-manager
                         p0 increfs 0
                         p1 exit
                         p2 set-manager";

#[test]
fn c_2024_06_get_ref_desc_olocked_gives_the_manager_0_and_bugs_on_the_stale_descriptor() {
    // As first merged, get_ref_desc_olocked gave the manager's node
    // descriptor 0 without a look at the map: the insert into
    // refs_by_desc met the stale 0 and hit BUG()
    // (binder_get_ref_for_node_olocked, binder.c:1166 in 7.3.4).
    let mut run: Run<CDriver> = Run::new(COLLISION, Version::C2024_06);
    let o = &run.step("p0 increfs 0");
    assert_eq!(
        log(o),
        ["bug"],
        "the new manager's node given the stale 0: BUG()"
    );
    assert!(run.driver.crashed());
    assert_eq!(
        run.driver.crash(),
        Some(Crash {
            desc: 0,
            manager: true
        })
    );
    assert_eq!(
        ret(&run.step("p0 acquire 0")),
        "skipped",
        "nothing runs after BUG()"
    );
    // Mainline looks from offset 0 and gives it 1.
    let mut run = c(COLLISION);
    assert_eq!(log(&run.step("p0 increfs 0")), ["got-other-handle 0 1"]);
}

#[test]
fn c_v3_dbitmap_clear_bit_frees_descriptor_0_for_a_non_manager() {
    // The v3 posting's dbitmap_clear_bit has no guard for bit 0: once
    // the manager's ref at 0 is dropped, the first-zero-bit search
    // hands 0 to any node. As merged, the bit stays set; mainline
    // starts non-managers at 1 (get_ref_desc_olocked, binder.c:1074).
    let program = "procs 2
                   p1 set-manager
                   p0 acquire 0
                   p0 send 0 node 5
                   p0 release 0";
    for (version, handle) in [
        (Version::CV3, "transaction handle 0"),
        (Version::C2024_06, "transaction handle 1"),
        (Version::CMainline, "transaction handle 1"),
    ] {
        let mut run: Run<CDriver> = Run::new(program, version);
        assert_eq!(
            reads(&run.step("p1 send 1 node 7"), 0),
            [handle],
            "{version}: the descriptor a non-manager's node gets once the manager's 0 is dropped"
        );
    }
}

#[test]
fn rust_v1_is_mainline_at_the_command_level() {
    // rust-v1 differs only when the pool and by_handle disagree
    // (Process::insert_or_update_handle, process.rs:861-868), which no
    // command sequence brings about: on the collision's program, with
    // the grow and death paths and the insert into a process that died
    // meanwhile, every observation is mainline's.
    for program in [
        format!("{COLLISION}\np0 increfs 0\np0 release 1\np0 decrefs 0"),
        format!("{FULL}\np1 send 2 node 200\np0 exit"),
    ] {
        let v1: Run<RustDriver> = Run::new(&program, Version::RustV1);
        let mainline = rust(&program);
        assert_eq!(v1.seen, mainline.seen, "{program}");
        assert_eq!(v1.driver.snapshot(), mainline.driver.snapshot());
    }
    // An insert into a process that died meanwhile: ESRCH in both.
    let program = "procs 2\np1 set-manager";
    let mut v1: Run<RustDriver> = Run::new(program, Version::RustV1);
    let mut mainline = rust(program);
    v1.step_in(
        "p0 send 0 weak-node 1",
        &mut Window::at(AllocSite::Ref, &["p1 exit"]),
    );
    mainline.step_in(
        "p0 send 0 weak-node 1",
        &mut Window::at(AllocSite::Ref, &["p1 exit"]),
    );
    assert_eq!(v1.seen, mainline.seen, "the dead target's insert");
}

#[test]
fn c_binder_request_freeze_notification_keeps_a_cookie_per_reference() {
    // binder_request_freeze_notification, binder.c:3938-3988: the only
    // checks are the handle (3950-3957) and a listener already on that
    // reference (3959-3966); the cookie is stored in the reference's own
    // binder_ref_freeze (3970), so two handles may carry the same cookie.
    let run = c("procs 2
                 p1 set-manager
                 p0 send 0 weak-node 0 node 3
                 p1 freeze-notify 1 3
                 p1 freeze-notify 2 3");
    let o = run.last();
    assert_eq!(ret(o), "0", "a cookie another handle uses is accepted");
    assert_eq!(reads(o, 1), ["frozen-binder 3 0"], "and notified at once");
}

#[test]
fn rust_request_freeze_notif_refuses_a_cookie_of_another_node() {
    // Process::request_freeze_notif, freeze.rs:180-273: the process's
    // listeners are keyed by cookie (node_refs.freeze_listeners, 212);
    // an existing listener with the cookie refuses a new one ("duplicate
    // cookie", EINVAL, 214-219) unless allow_duplicate: the same node,
    // already cleared (47-55, "To avoid issues with ambiguity").
    let run = rust(
        "procs 2
         p1 set-manager
         p0 send 0 weak-node 0 node 3
         p1 freeze-notify 1 3
         p1 freeze-notify 2 3",
    );
    let o = run.last();
    assert_eq!(
        ret(o),
        "EINVAL",
        "a cookie another node's listener holds is refused"
    );
    assert_eq!(reads(o, 1), NONE, "and nothing is notified");
}

// ---- several opens by one task ------------------------------------------

/// `p0` and `p2` are two opens by one task: `p1` (the manager) holds a
/// handle on `p2`'s node 5 with a freeze notification, and `p0` owes a
/// reply to a call from `p1`'s thread `t1`, so that freezing the task's
/// pid fails at `p0` and succeeds at `p2`.
const TWO_OPENS_ONE_BUSY: &str = "procs 0 0 p0
     p1 set-manager
     p2 send 0 node 5
     p1 acquire 1
     p0 send 0 node 3
     p1 acquire 2
     p1 free
     p1 free
     p1.t1 call 2
     p1 freeze-notify 1 7
     p1 freeze p0 0";

#[test]
fn c_binder_freeze_goes_through_binder_procs_last_opened_first() {
    // BINDER_FREEZE, binder.c:5897-5954: every process with the pid, in
    // binder_procs order (binder_open adds at the head, 6118), until one
    // fails (5940-5941: `if (ret >= 0)`). p2, opened after p0, is frozen
    // first; p0's pending transaction then fails the ioctl, and p2 stays
    // frozen: p1 is told so.
    let run = c(TWO_OPENS_ONE_BUSY);
    let o = run.last();
    assert_eq!(ret(o), "EAGAIN", "p0's pending call fails the freeze");
    assert_eq!(reads(o, 1), ["frozen-binder 7 1"], "p2 was frozen before");
    let mut run = run;
    let o = run.step("p1 frozen-info p2");
    assert_eq!(ret(&o), "sync 2 async 0", "the pid's processes add up");
}

#[test]
fn rust_ioctl_freeze_goes_through_all_procs_first_opened_first() {
    // ioctl_freeze, process.rs:1634-1653: get_procs_with_pid follows
    // all_procs (register_process pushes at the end, context.rs:86), and
    // the first failure returns (`?`, 1648). p0 fails first; p2 is never
    // frozen, and p1 hears nothing.
    let run = rust(TWO_OPENS_ONE_BUSY);
    let o = run.last();
    assert_eq!(ret(o), "EAGAIN", "p0's pending call fails the freeze");
    assert_eq!(reads(o, 1), NONE, "p2 was not reached");
}

#[test]
fn another_open_of_an_exited_process_task_keeps_its_pid() {
    // Both drivers look the pid up among the processes they hold: p0 has
    // exited, p2 (the same task) has not.
    let program = "procs 0 0 p0
                   p0 exit
                   p1 freeze p0 0";
    assert_eq!(ret(c(program).last()), "0", "C finds p2");
    assert_eq!(ret(rust(program).last()), "0", "Rust finds p2");
    let mut c_run = c(program);
    assert_eq!(ret(&c_run.step("p1 frozen-info p0")), "sync 0 async 0");
    let program = "procs 0 0 p0
                   p0 exit
                   p2 exit
                   p1 freeze p0 0";
    assert_eq!(
        ret(c(program).last()),
        "EINVAL",
        "C: no process has the pid"
    );
    assert_eq!(
        ret(rust(program).last()),
        "0",
        "Rust: nothing to freeze is no error"
    );
}

#[test]
fn c_transaction_to_the_manager_from_another_open_of_its_task_is_refused() {
    // binder_transaction, binder.c:3239-3245: `target_proc->pid ==
    // proc->pid`, the pid of the task, not the process.
    let run = c("procs 0 p0
                 p0 set-manager
                 p1 send 0");
    let o = run.last();
    assert_eq!(reads(o, 1), ["failed-reply"]);
    assert_eq!(log(o), ["transaction-to-own-manager", "transaction-failed"]);
}

#[test]
fn rust_transaction_to_the_manager_from_another_open_of_its_task_is_delivered() {
    // Process::get_transaction_node, process.rs:928: `core::ptr::eq(self,
    // &*node_ref.node.owner)`, the process itself.
    let run = rust(
        "procs 0 p0
         p0 set-manager
         p1 send 0",
    );
    let o = run.last();
    assert_eq!(reads(o, 0), ["transaction"]);
    assert_eq!(reads(o, 1), ["transaction-complete"]);
}

/// Three one-way `+update` transactions to a frozen manager, two from `p0`
/// and one from `p2`, another open by `p0`'s task: each replaces the one
/// waiting from the same pid, so one is left after the thaw.
const UPDATES_FROM_TWO_OPENS: &str = "procs 0 0 p0
     p1 set-manager
     p0 freeze p1 0
     p0 send 0 +update
     p0 send 0 +update
     p2 send 0 +update
     p0 thaw p1
     p1 free
     p1 free
     p1 free";

/// How many transactions process `pid` read over `seen`.
fn transactions_read(seen: &[Observed], pid: usize) -> usize {
    let transaction = |r: &String| r.starts_with("transaction");
    seen.iter()
        .map(|o| reads(o, pid).iter().filter(|r| transaction(r)).count())
        .sum()
}

#[test]
fn c_binder_can_update_transaction_compares_the_senders_pids() {
    // binder_can_update_transaction, binder.c:2803-2804:
    // `t1->buffer->pid == t2->buffer->pid`, each `current->tgid`
    // (binder_alloc.c:689): p2's transaction replaces p0's.
    let run = c(UPDATES_FROM_TWO_OPENS);
    assert_eq!(
        transactions_read(&run.seen, 1),
        2,
        "the first waits for no buffer, the other two are one: {:?}",
        run.seen
    );
}

#[test]
fn rust_can_replace_compares_the_senders_tasks() {
    // Transaction::can_replace, transaction.rs:425:
    // `self.from.process.task.pid() != old.from.process.task.pid()`.
    let run = rust(UPDATES_FROM_TWO_OPENS);
    assert_eq!(
        transactions_read(&run.seen, 1),
        2,
        "the first waits for no buffer, the other two are one: {:?}",
        run.seen
    );
}

/// Finding 0022's program: p2.t2 sends its node 3 weak in a call (the
/// node's first work waits, deferred, on t2, which waits for the reply);
/// p2.t1 sends node 3 strong one-way and reads the node's first work.
const NODE_WORK_ON_A_WAITING_CALLER: &str = "procs 0 0 1000
     p0 set-manager
     p0.t1 enter-looper
     p2.t2 call 0 weak-node 3";

#[test]
fn c_binder_inc_node_nilocked_strong_moves_the_node_work_to_the_incrementing_thread() {
    // binder.c:843-850: a strong increment of a node without
    // has_strong_ref takes node->work off whatever list holds it
    // (binder_dequeue_work_ilocked) and queues it, deferred, on the
    // incrementing thread; so after t1 reads it, it is on no list, and
    // the last reference's binder_dec_node_nilocked queues it to the
    // process (895-899, list_empty(&node->work.entry)).
    let mut run = c(NODE_WORK_ON_A_WAITING_CALLER);
    assert_eq!(reads(run.last(), 2), NONE);
    let o = run.step("p2.t1 send 0 node 3");
    assert_eq!(
        reads(&o, 2),
        ["t1:transaction-complete", "t1:increfs 3", "t1:acquire 3"]
    );
    run.step("p0.t1 free");
    let o = run.step("p0.t1 free");
    assert_eq!(reads(&o, 2), ["release 3", "decrefs 3"]);
    assert_eq!(run.nodes(2), NONE);
    // t2's list has nothing of the node's left for it.
    let o = run.step("p0 reply");
    assert_eq!(reads(&o, 2), ["t2:reply", "t2:transaction-complete"]);
}

#[test]
fn rust_node_wrapper_leaves_the_node_queued_on_the_waiting_caller() {
    // node.rs:451-459: a strong zero2one increment of a node already
    // pushed (has_pushed_node, its weak zero2one on t2's list) cannot push
    // it again: process.rs:821-822 allocates a wrapper and node.rs:466-481
    // pushes it, deferred, to t1 (process.rs:276-278); its do_work
    // (wrapper.rs:52-57) clears the wrapper's flags only, so the Node
    // stays queued on t2, marked pushed. The decrements of the last
    // references then push nothing (update_refcount_locked, node.rs:415,
    // should_normal_push 82-84); t2 reads the node's work with its reply
    // (Node::do_work, node.rs:716-738).
    let mut run = rust(NODE_WORK_ON_A_WAITING_CALLER);
    assert_eq!(reads(run.last(), 2), NONE);
    let o = run.step("p2.t1 send 0 node 3");
    assert_eq!(
        reads(&o, 2),
        ["t1:transaction-complete", "t1:increfs 3", "t1:acquire 3"]
    );
    run.step("p0.t1 free");
    let o = run.step("p0.t1 free");
    assert_eq!(reads(&o, 2), NONE);
    assert_eq!(run.nodes(2), ["n3 s0 w0 hs hw"]);
    let o = run.step("p0 reply");
    assert_eq!(
        reads(&o, 2),
        [
            "t2:reply",
            "t2:transaction-complete",
            "t2:release 3",
            "t2:decrefs 3"
        ]
    );
    assert_eq!(run.nodes(2), NONE);
}
