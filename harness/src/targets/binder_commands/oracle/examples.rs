//! Example programs, each with what both drivers' models observe: one line
//! per step (`testing::describe`: the return value, what each process
//! read, the log; reads and log sorted), and what some processes hold
//! afterwards (`testing::holds`). C is mainline unless said otherwise;
//! `rust-v1` observes the same as `rust-mainline` in every example.

use super::testing::{holds, run};
use super::{COracle, Oracle, RustOracle};
use idpool::Version;

fn check<O: Oracle>(version: Version, program: &str, expected: &[&str]) -> O {
    let (model, got) = run::<O>(version, program);
    assert_eq!(got, expected, "{version} on\n{program}");
    model
}

fn on_c(program: &str, expected: &[&str]) -> COracle {
    check(Version::CMainline, program, expected)
}

fn on_rust(program: &str, expected: &[&str]) -> RustOracle {
    check::<RustOracle>(Version::RustV1, program, expected);
    check(Version::RustMainline, program, expected)
}

#[test]
fn increfs_zero_without_a_manager_names_no_reference() {
    let program = "procs 2
        p0 increfs 0";
    on_c(program, &["0 log[invalid-ref 0]"]);
    on_rust(program, &["0 log[invalid-ref 0]"]);
}

#[test]
fn increfs_zero_with_a_manager_refers_to_its_node_at_handle_0() {
    let program = "procs 2
        p1 set-manager
        p0 increfs 0
        p0 acquire 0";
    let expected = ["0", "0", "0"];
    let c = on_c(program, &expected);
    let rust = on_rust(program, &expected);
    assert_eq!(
        holds(&c.snapshot(), 0),
        "refs{0: p1:0 1/1} nodes{} buffers 0"
    );
    assert_eq!(
        holds(&rust.snapshot(), 0),
        "refs{0: p1:0 1/1} nodes{} buffers 0"
    );
    // Both count the reference's strong count and the manager's own; C's
    // weak count is the manager's own local one, Rust's the reference.
    assert_eq!(
        holds(&c.snapshot(), 1),
        "refs{} nodes{0: #0 2/1 sw} buffers 0"
    );
    assert_eq!(
        holds(&rust.snapshot(), 1),
        "refs{} nodes{0: #0 2/1 sw} buffers 0"
    );
}

#[test]
fn increfs_zero_from_the_manager_itself_is_einval() {
    let program = "procs 2
        p1 set-manager
        p1 increfs 0
        p1 acquire 0";
    on_c(
        program,
        &[
            "0",
            "EINVAL log[manager-acquires-zero, ioctl-failed EINVAL]",
            "EINVAL log[manager-acquires-zero, ioctl-failed EINVAL]",
        ],
    );
    // Only the `pr_warn!` of the failed BINDER_WRITE_READ ("Write failure").
    on_rust(
        program,
        &[
            "0",
            "EINVAL log[ioctl-failed EINVAL]",
            "EINVAL log[ioctl-failed EINVAL]",
        ],
    );
}

#[test]
fn a_new_manager_while_a_stale_descriptor_0_is_held() {
    let program = "procs 3
        p1 set-manager
        p0 increfs 0
        p1 exit
        p2 set-manager
        p0 increfs 0";
    let c = on_c(
        program,
        &["0", "0", "0", "0", "0 log[got-other-handle 0 1]"],
    );
    assert_eq!(
        holds(&c.snapshot(), 0),
        "refs{0: p1:0 0/1, 1: p2:0 0/1} nodes{} buffers 0"
    );
    let rust = on_rust(program, &["0", "0", "0", "0", "0"]);
    assert_eq!(
        holds(&rust.snapshot(), 0),
        "refs{0: p1:0 0/1, 1: p2:0 0/1} nodes{} buffers 0"
    );
    // As first merged: the new manager's node is given 0 without looking.
    let (_, got) = run::<COracle>(Version::C2024_06, &format!("{program}\n p0 acquire 0"));
    assert_eq!(got, ["0", "0", "0", "0", "EFAULT log[bug]", "skipped"]);
}

#[test]
fn a_node_sent_to_the_manager_then_its_buffer_freed() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p1 node-info 1
        p1 free";
    let expected = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "strong 1 weak 0",
        "0 p0[release 1, decrefs 1]",
    ];
    let c = on_c(program, &expected);
    let rust = on_rust(program, &expected);
    assert_eq!(holds(&c.snapshot(), 0), "refs{} nodes{} buffers 0");
    assert_eq!(holds(&rust.snapshot(), 0), "refs{} nodes{} buffers 0");
    // While p1 held the buffer, the transaction held the manager's node.
    let held = "procs 2
        p1 set-manager
        p0 send 0 node 1";
    let (c, _) = run::<COracle>(Version::CMainline, held);
    let (rust, _) = run::<RustOracle>(Version::RustMainline, held);
    assert_eq!(
        holds(&c.snapshot(), 1),
        "refs{1: p0:1 1/0} nodes{0: #0 2/1 sw} buffers 1"
    );
    assert_eq!(
        holds(&rust.snapshot(), 1),
        "refs{1: p0:1 1/0} nodes{0: #0 2/0 sw} buffers 1"
    );
}

#[test]
fn the_managers_node_received_in_a_transaction() {
    // As a node object from the manager.
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p1 send 1 node 0";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
    ];
    let c = on_c(
        program,
        &[
            first[0],
            first[1],
            "0 p0[transaction handle 0] p1[transaction-complete]",
        ],
    );
    assert_eq!(
        holds(&c.snapshot(), 0),
        "refs{0: p1:0 1/0} nodes{1: #0 2/0 sw} buffers 1"
    );
    on_rust(
        program,
        &[
            first[0],
            first[1],
            "0 p0[transaction handle 1] p1[transaction-complete]",
        ],
    );
    // As a handle object from a third process.
    let program = "procs 3
        p1 set-manager
        p0 send 0 node 1
        p2 send 0 node 1
        p1 send 2 handle 1
        p2 acquire 0
        p2 send 1 handle 0";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        // p1 holds the first buffer: this one waits, but p1 already has
        // handle 2 (objects are translated when sent).
        "0 p2[transaction-complete, increfs 1, acquire 1]",
        "0 p1[transaction-complete] p2[transaction handle 1]",
        "0",
    ];
    let last_c = "0 p0[transaction handle 0] p2[transaction-complete]";
    let last_rust = "0 p0[transaction handle 1] p2[transaction-complete]";
    on_c(program, &[first.as_slice(), &[last_c]].concat());
    on_rust(program, &[first.as_slice(), &[last_rust]].concat());
}

#[test]
fn node_info_on_a_weak_only_reference_and_on_a_missing_handle() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 weak-node 1
        p1 node-info 1
        p1 node-info 7
        p0 node-info 0";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1] p1[transaction weak-handle 1]",
    ];
    on_c(
        program,
        &[
            first[0],
            first[1],
            "EINVAL log[weak-as-strong, ioctl-failed EINVAL]",
            "EINVAL log[ioctl-failed EINVAL]",
            "EPERM log[ioctl-failed EPERM]",
        ],
    );
    on_rust(
        program,
        &[first[0], first[1], "strong 0 weak 1", "ENOENT", "EPERM"],
    );
}

#[test]
fn death_notification_on_a_node_whose_owner_exits() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p1 death 1 7
        p0 exit
        p1 node-info 1
        p1 clear-death 1 7
        p1 free
        p0 increfs 0";
    let expected = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0",
        "0 p1[dead-binder 7]",
        "strong 1 weak 0",
        "0 p1[clear-death-done 7]",
        "0",
        "skipped",
    ];
    let c = on_c(program, &expected);
    let rust = on_rust(program, &expected);
    assert_eq!(holds(&c.snapshot(), 0), "dead");
    assert_eq!(holds(&rust.snapshot(), 0), "dead");
    assert_eq!(
        holds(&c.snapshot(), 1),
        "refs{} nodes{0: #0 1/1 sw} buffers 0"
    );
    assert_eq!(
        holds(&rust.snapshot(), 1),
        "refs{} nodes{0: #0 1/0 sw} buffers 0"
    );
}

#[test]
fn acquire_and_release_on_a_weak_only_reference() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 weak-node 1
        p1 acquire 1
        p1 release 1
        p1 decrefs 1";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1] p1[transaction weak-handle 1]",
    ];
    on_c(
        program,
        &[
            first[0],
            first[1],
            "0 log[weak-as-strong, invalid-ref 1]",
            "0 log[weak-as-strong, invalid-ref 1]",
            "0 p0[decrefs 1]",
        ],
    );
    on_rust(program, &[first[0], first[1], "0", "0", "0 p0[decrefs 1]"]);
    // Handle 0 names the manager's node, so an acquire of it makes a
    // weak-only reference strong in both.
    let program = "procs 2
        p1 set-manager
        p0 increfs 0
        p0 acquire 0
        p0 release 0
        p0 release 0";
    let first = ["0", "0", "0", "0"];
    let last_c = "0 log[weak-as-strong, invalid-ref 0]";
    on_c(program, &[first.as_slice(), &[last_c]].concat());
    on_rust(program, &[first.as_slice(), &["0"]].concat());
}

#[test]
fn a_failed_set_manager_leaves_a_node_0_in_rust_only() {
    let program = "procs 3
        p0 set-manager
        p1 send 0 weak-node 0
        p1 set-manager
        p0 free
        p1 send 0";
    let first = [
        "0",
        "0 p0[transaction weak-handle 1] p1[transaction-complete, increfs 0]",
        "EBUSY log[manager-already-set]",
    ];
    let c = on_c(
        program,
        &[
            first[0],
            first[1],
            "EBUSY log[manager-already-set, ioctl-failed EBUSY]",
            "0 p1[decrefs 0]",
            "0 p0[transaction] p1[transaction-complete]",
        ],
    );
    assert_eq!(holds(&c.snapshot(), 1), "refs{} nodes{} buffers 0");
    // Node 0's update waits on p1's thread until p1 sends something.
    let rust = on_rust(
        program,
        &[
            first[0],
            first[1],
            first[2],
            "0",
            "0 p0[transaction] p1[transaction-complete, decrefs 0]",
        ],
    );
    assert_eq!(holds(&rust.snapshot(), 1), "refs{} nodes{} buffers 0");
    let (rust, _) = run::<RustOracle>(
        Version::RustMainline,
        "procs 3
        p0 set-manager
        p1 set-manager",
    );
    assert_eq!(
        holds(&rust.snapshot(), 1),
        "refs{} nodes{0: #0 0/0 -} buffers 0"
    );
}

#[test]
fn a_second_manager_of_another_euid() {
    let program = "procs 0 1000
        p0 set-manager
        p0 exit
        p1 set-manager";
    on_c(
        program,
        &["0", "0", "EPERM log[manager-bad-uid, ioctl-failed EPERM]"],
    );
    on_rust(program, &["0", "0", "EPERM"]);
}

#[test]
fn transactions_that_fail_and_what_each_driver_logs() {
    let program = "procs 3
        p0 send 0
        p1 set-manager
        p1 send 0
        p0 send 5
        p0 send 0 handle 5
        p0 send 0 node 2 weak-node 3 handle 9";
    on_c(
        program,
        &[
            "0 p0[dead-reply] log[no-target-node, transaction-failed]",
            "0",
            "0 p1[failed-reply] log[transaction-to-own-manager, transaction-failed]",
            "0 p0[failed-reply] log[transaction-to-invalid-handle 5, no-target-node, transaction-failed]",
            "0 p0[failed-reply] log[transaction-failed, object-invalid-handle 5, translate-failed]",
            "0 p0[failed-reply] log[transaction-failed, object-invalid-handle 9, translate-failed]",
        ],
    );
    on_rust(
        program,
        &[
            "0 p0[dead-reply]",
            "0",
            "0 p1[failed-reply] log[transaction-failed]",
            "0 p0[failed-reply] log[transaction-to-invalid-handle 5, transaction-failed]",
            "0 p0[failed-reply] log[transaction-failed, translate-failed, copy-failed]",
            "0 p0[failed-reply] log[transaction-failed, translate-failed, copy-failed]",
        ],
    );
}

#[test]
fn one_way_transactions_to_a_node_wait_for_the_previous_buffer() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p0 send 0 weak-node 1
        p1 free
        p1 free
        p1 free";
    let expected = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0 p0[transaction-complete]",
        "0 p0[release 1] p1[transaction weak-handle 1]",
        "0 p0[decrefs 1]",
        "skipped",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

#[test]
fn exit_with_a_one_way_transaction_waiting() {
    let program = "procs 2
        p1 set-manager
        p0 send 0
        p0 send 0 node 2
        p1 exit";
    let expected = [
        "0",
        "0 p0[transaction-complete] p1[transaction]",
        "0 p0[transaction-complete, increfs 2, acquire 2]",
        "0 p0[release 2, decrefs 2] log[undelivered-transaction]",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

#[test]
fn freeing_a_buffer_whose_handle_was_released_meanwhile() {
    // The reference is gone: C's buffer release complains, Rust's decrement
    // names no reference.
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p1 release 1
        p1 free";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0 p0[release 1, decrefs 1]",
    ];
    on_c(
        program,
        &[first.as_slice(), &["0 log[bad-buffer-object]"]].concat(),
    );
    on_rust(
        program,
        &[first.as_slice(), &["0 log[invalid-ref 1]"]].concat(),
    );
    // The reference is weak only: C cannot decrement it strongly, Rust
    // silently does not.
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p1 increfs 1
        p1 release 1
        p1 free";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0",
        "0 p0[release 1]",
    ];
    let c = on_c(
        program,
        &[
            first.as_slice(),
            &["0 log[weak-as-strong, bad-buffer-object]"],
        ]
        .concat(),
    );
    let rust = on_rust(program, &[first.as_slice(), &["0"]].concat());
    for snapshot in [c.snapshot(), rust.snapshot()] {
        assert_eq!(
            holds(&snapshot, 1).split(" nodes").next(),
            Some("refs{1: p0:1 0/1}")
        );
    }
}

/// Arbitrary programs (a fixed pseudo-random sequence) run on every
/// version without panicking, and after every step: no reference has both
/// counts at 0, every reference to a live owner's node names a node in its
/// tree, and (C, until a crash) a node in its owner's tree is referenced or
/// has a count (Rust may keep a node 0 whose update waits).
#[test]
fn arbitrary_programs_keep_the_models_invariants() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for program in 0..300 {
        let procs = 2 + next(3) as usize;
        let euids: Vec<u32> = (0..procs).map(|_| 1000 * (next(5) / 4) as u32).collect();
        let steps: Vec<_> = (0..30).map(|_| random_step(procs, &mut next)).collect();
        for version in Version::ALL {
            let mut c = COracle::new(&euids, version);
            let mut rust = RustOracle::new(&euids, version);
            let mut crashed = false;
            for (i, (step, fail)) in steps.iter().enumerate() {
                let at = format!("program {program}, {version:?}, step {i} ({step:?})");
                let obs = c.step(step, *fail);
                crashed |= obs.log.contains(&idpool::driver::Log::Bug);
                assert_model_invariants(&c.snapshot(), !crashed, &format!("C model, {at}"));
                rust.step(step, *fail);
                assert_model_invariants(&rust.snapshot(), false, &format!("Rust model, {at}"));
            }
        }
    }
}

/// One step of a random program over `procs` processes, and whether its
/// ref allocation fails.
fn random_step(
    procs: usize,
    next: &mut dyn FnMut(u64) -> u64,
) -> (idpool::driver::Step, Option<idpool::AllocSite>) {
    use idpool::driver::{Command, Object, Pid, RefCmd, Step};
    use idpool::AllocSite;
    let handle = |next: &mut dyn FnMut(u64) -> u64| next(4) as u32;
    let command = match next(20) {
        0 | 1 => Command::SetManager,
        2..=6 => Command::Ref(RefCmd::ALL[next(4) as usize], handle(next)),
        7..=11 => Command::Send {
            to: handle(next),
            objects: (0..next(4))
                .map(|_| match next(2) {
                    0 => Object::Node {
                        ptr: next(4),
                        strong: next(2) == 0,
                    },
                    _ => Object::Handle {
                        handle: handle(next),
                        strong: next(2) == 0,
                    },
                })
                .collect(),
        },
        12 | 13 => Command::Free,
        14 => Command::RequestDeath {
            handle: handle(next),
            cookie: next(2),
        },
        15 => Command::ClearDeath {
            handle: handle(next),
            cookie: next(2),
        },
        16 | 17 => Command::NodeInfo(handle(next)),
        _ => Command::Exit,
    };
    let fail = [None, None, None, Some(AllocSite::Ref)][next(4) as usize];
    let step = Step {
        pid: Pid(next(procs as u64) as u8),
        command,
    };
    (step, fail)
}

/// Every ref holds a count and names a node of its living owner; with
/// `strict`, every node is counted or referenced.
fn assert_model_invariants(snapshot: &idpool::driver::Snapshot, strict: bool, at: &str) {
    let refs = || snapshot.procs.iter().flat_map(|p| p.refs.values());
    for r in refs() {
        assert!(
            r.strong > 0 || r.weak > 0,
            "{at}: a ref with no count: {r:?}"
        );
        let owner = &snapshot.procs[r.node.owner.index()];
        if owner.alive {
            assert_eq!(
                owner.nodes[&r.node.ptr].serial, r.node.serial,
                "{at}: a ref to a node its owner no longer has: {r:?}"
            );
        }
    }
    for (p, proc) in snapshot.procs.iter().enumerate() {
        for (&ptr, n) in proc.nodes.iter().filter(|_| strict) {
            let referenced = refs().any(|r| r.node.owner.index() == p && r.node.ptr == ptr);
            assert!(
                n.strong > 0 || n.weak > 0 || referenced,
                "{at}: node {ptr} of process {p} neither counted nor referenced: {n:?}"
            );
        }
    }
}
