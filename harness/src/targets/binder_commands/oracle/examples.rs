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
    // C leaves every failure in the extended error, with EINVAL for a
    // missing target (binder.c:3251) and a missing handle object (2305).
    on_c(
        program,
        &[
            "0 ee BR_DEAD_REPLY -22 p0[dead-reply] log[no-target-node, transaction-failed]",
            "0",
            "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[transaction-to-own-manager, transaction-failed]",
            "0 ee BR_FAILED_REPLY -22 p0[failed-reply] log[transaction-to-invalid-handle 5, no-target-node, transaction-failed]",
            "0 ee BR_FAILED_REPLY -22 p0[failed-reply] log[transaction-failed, object-invalid-handle 5, translate-failed]",
            "0 ee BR_FAILED_REPLY -22 p0[failed-reply] log[transaction-failed, object-invalid-handle 9, translate-failed]",
        ],
    );
    // Rust: BR_DEAD_REPLY carries no errno (error.rs:20), so no extended
    // error; a missing handle is ENOENT (process.rs:947).
    on_rust(
        program,
        &[
            "0 p0[dead-reply]",
            "0",
            "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[transaction-failed]",
            "0 ee BR_FAILED_REPLY -2 p0[failed-reply] log[transaction-to-invalid-handle 5, transaction-failed]",
            "0 ee BR_FAILED_REPLY -2 p0[failed-reply] log[transaction-failed, translate-failed, copy-failed]",
            "0 ee BR_FAILED_REPLY -2 p0[failed-reply] log[transaction-failed, translate-failed, copy-failed]",
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

/// A call waits on the caller's stack with its completion deferred
/// (binder.c:3784-3792; thread.rs:1380-1383), so the caller reads nothing
/// until the reply, then the deferred node update, the completion and the
/// reply together (binder.c:3774-3775; `deliver_single_reply`,
/// thread.rs:1193). A handle sent back to its owner is its node.
#[test]
fn a_call_and_its_reply() {
    let program = "procs 2
        p1 set-manager
        p0 call 0 node 1
        p1 reply
        p0 free
        p1 free";
    let expected = [
        "0",
        "0 p1[call handle 1]",
        "0 p0[reply, transaction-complete, increfs 1, acquire 1] p1[transaction-complete]",
        "0",
        "0 p0[release 1, decrefs 1]",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
    // From a thread that is no looper: its answers go in a write-only call
    // (nothing is readable), so C's read never finds it waiting for the
    // process's work.
    let program = "procs 2
        p1 set-manager
        p0.t1 call 0 node 1
        p1 reply handle 1
        p0 free";
    let expected = [
        "0",
        "0 p1[call handle 1]",
        "0 p0[t1:reply node 1, t1:transaction-complete, t1:increfs 1, t1:acquire 1] p1[transaction-complete]",
        "0",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

/// A reply with nothing to answer, and a second call while the first is
/// unanswered: C refuses both with `EPROTO` (binder.c:3152, 3304), Rust with
/// `EINVAL` (thread.rs:1400-1406, 1246-1251); the error makes the caller's
/// deferred completion of its first call readable too.
#[test]
fn replies_and_calls_the_stack_refuses() {
    let program = "procs 2
        p1 set-manager
        p1 reply
        p0.t1 call 0
        p0.t1 call 0
        p1 reply
        p1.t1 reply";
    on_c(
        program,
        &[
            "0",
            "0 ee BR_FAILED_REPLY -71 p1[failed-reply] log[transaction-failed, reply-no-stack]",
            "0 p1[call]",
            "0 ee BR_FAILED_REPLY -71 p0[t1:transaction-complete, t1:failed-reply] log[transaction-failed, call-bad-stack]",
            "0 p0[t1:reply] p1[transaction-complete]",
            "0 ee BR_FAILED_REPLY -71 p1[t1:failed-reply] log[transaction-failed, reply-no-stack]",
        ],
    );
    on_rust(
        program,
        &[
            "0",
            "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[transaction-failed, reply-no-stack]",
            "0 p1[call]",
            "0 ee BR_FAILED_REPLY -22 p0[t1:transaction-complete, t1:failed-reply] log[transaction-failed, call-bad-stack]",
            "0 p0[t1:reply] p1[transaction-complete]",
            "0 ee BR_FAILED_REPLY -22 p1[t1:failed-reply] log[transaction-failed, reply-no-stack]",
        ],
    );
}

/// A call back into the calling process goes to the calling thread
/// (binder.c:3315-3330; `find_target_thread`, transaction.rs:290), which
/// answers it before its own call is answered.
#[test]
fn a_nested_call_goes_to_the_calling_thread() {
    let program = "procs 3
        p1 set-manager
        p0.t1 call 0 node 1
        p1 call 1
        p0.t1 reply
        p1 reply
        p0 free
        p1 free
        p1 free";
    let expected = [
        "0",
        "0 p1[call handle 1]",
        "0 p0[t1:call, t1:transaction-complete, t1:increfs 1, t1:acquire 1]",
        "0 p0[t1:transaction-complete] p1[reply, transaction-complete]",
        "0 p0[t1:reply] p1[transaction-complete]",
        "0",
        "0 p0[release 1, decrefs 1]",
        "0",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

/// The caller's thread leaves (or its process exits) before the reply: its
/// deferred completion is undelivered in both (binder.c:5224-5231;
/// `DeliverCode::cancel`). C then finds no caller for the reply ("reply
/// target not found", binder.c:3182) and the replier reads
/// `BR_TRANSACTION_COMPLETE` (3924); Rust builds the reply, which the dead
/// thread drops silently (thread.rs:1210-1212), or, the process gone, fails
/// to allocate it: three lines (thread.rs:1055, transaction.rs:227,
/// thread.rs:1440).
#[test]
fn a_reply_to_a_caller_that_left() {
    for exit in ["p0.t1 thread-exit", "p0 exit"] {
        let program = format!(
            "procs 2
            p1 set-manager
            p0.t1 call 0
            {exit}
            p1 reply"
        );
        let first = ["0", "0 p1[call]", "0 log[undelivered-complete]"];
        on_c(
            &program,
            &[
                first[0],
                first[1],
                first[2],
                "0 p1[transaction-complete] log[transaction-failed, reply-target-gone]",
            ],
        );
        let last = if exit == "p0 exit" {
            "0 p1[transaction-complete] log[copy-failed, buffer-alloc-failed, reply-failed]"
        } else {
            "0 p1[transaction-complete]"
        };
        on_rust(&program, &[first[0], first[1], first[2], last]);
    }
}

/// The thread that received a call leaves: its caller reads `BR_DEAD_REPLY`
/// (binder.c:5438; `unwind_transaction_stack`, thread.rs:1153) after the
/// deferred completion; `extended-error` reads the thread's extended error
/// and clears it (binder.c:5773; thread.rs:521).
#[test]
fn a_receiver_that_leaves_answers_dead_reply() {
    let program = "procs 2
        p1 set-manager
        p0.t1 call 0
        p1 thread-exit
        p0.t1 extended-error";
    let expected = [
        "0",
        "0 p1[call]",
        "0 p0[t1:transaction-complete, t1:dead-reply]",
        "ee BR_OK",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

/// A reply whose object fails: the caller reads `BR_FAILED_REPLY`, and the
/// error stays in the caller's extended error (it held `BR_OK`:
/// `binder_set_txn_from_error`, binder.c:2988; thread.rs:1214-1218) until
/// the caller's next command that is not a transaction reads it; the
/// replier reads `BR_TRANSACTION_COMPLETE`. C's errno is `EINVAL`
/// (binder.c:2305), Rust's `ENOENT` (process.rs:948).
#[test]
fn a_failed_reply_is_left_in_the_callers_extended_error() {
    let program = "procs 3
        p1 set-manager
        p0.t1 call 0
        p1 reply handle 7
        p0.t1 get-version
        p0.t1 extended-error";
    let read = "0 p0[t1:transaction-complete, t1:failed-reply] p1[transaction-complete]";
    on_c(
        program,
        &[
            "0",
            "0 p1[call]",
            &format!("{read} log[transaction-failed, object-invalid-handle 7, translate-failed]"),
            "version 8 ee BR_FAILED_REPLY -22",
            "ee BR_OK",
        ],
    );
    on_rust(
        program,
        &[
            "0",
            "0 p1[call]",
            &format!("{read} log[translate-failed, copy-failed, reply-failed]"),
            "version 8 ee BR_FAILED_REPLY -2",
            "ee BR_OK",
        ],
    );
}

/// The caller's thread leaves with its node's first references waiting,
/// deferred, on it: C drops the node's work (`binder_release_work`,
/// binder.c:5243-5244), so the owner is never told of the reference the
/// receiver holds; Rust moves it to the process (`Node::cancel`,
/// node.rs:741-755), where `t0` reads it.
#[test]
fn a_thread_that_leaves_with_a_node_update_pending() {
    let program = "procs 2
        p1 set-manager
        p0.t1 call 0 node 1
        p0.t1 thread-exit
        p0 node-debug 0";
    let c = on_c(
        program,
        &[
            "0",
            "0 p1[call handle 1]",
            "0 log[undelivered-complete]",
            "node 1 cookie 1 strong 0 weak 0",
        ],
    );
    assert_eq!(
        holds(&c.snapshot(), 0),
        "refs{} nodes{1: #0 1/0 -} buffers 0"
    );
    let rust = on_rust(
        program,
        &[
            "0",
            "0 p1[call handle 1]",
            "0 p0[increfs 1, acquire 1] log[undelivered-complete]",
            "node 1 cookie 1 strong 1 weak 1",
        ],
    );
    assert_eq!(
        holds(&rust.snapshot(), 0),
        "refs{} nodes{1: #0 1/0 sw} buffers 0"
    );
}

/// A call back into a process whose calling thread left: C skips the
/// released caller down the stack (`t->from` is NULL, binder.c:5406,
/// 3320-3321) and queues the call on the process; Rust finds the dead
/// thread (`find_target_thread`, transaction.rs:290) and fails with
/// `BR_DEAD_REPLY` (thread.rs:325-327). What follows differs with it.
#[test]
fn a_call_back_to_a_caller_thread_that_left() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p0.t1 call 0
        p0.t1 thread-exit
        p1 call 1
        p1 reply
        p0 reply";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0 p1[call]",
        "0 log[undelivered-complete]",
    ];
    on_c(
        program,
        &[
            first.as_slice(),
            &[
                "0 p0[call]",
                "0 ee BR_FAILED_REPLY -71 p1[transaction-complete, failed-reply] log[transaction-failed, reply-bad-stack]",
                "0 p0[transaction-complete] p1[reply]",
            ],
        ]
        .concat(),
    );
    on_rust(
        program,
        &[
            first.as_slice(),
            &[
                "0 p1[dead-reply]",
                "0 p1[transaction-complete]",
                "0 ee BR_FAILED_REPLY -22 p0[failed-reply] log[transaction-failed, reply-no-stack]",
            ],
        ]
        .concat(),
    );
}

/// `BR_SPAWN_LOOPER` ends a read of a looper that wrote anything while the
/// process has no thread requested and fewer started than its maximum
/// (binder.c:5173-5188; thread.rs:1623-1631, process.rs:1252).
/// `register-looper` takes the request as a started thread. After
/// `enter-looper` C refuses to count it (binder.c:4362-4365), Rust counts
/// it (`register_thread`, process.rs:300, called before `looper_register`,
/// thread.rs:1532-1535), so Rust asks again.
#[test]
fn spawn_looper_and_the_threads_that_answer_it() {
    let program = "procs 2
        p1 set-manager
        p1 max-threads 1
        p0 send 0
        p1.t1 register-looper
        p1 free
        p0 send 0
        p1.t1 enter-looper
        p1.t2 register-looper";
    let first = [
        "0",
        "0",
        "0 p0[transaction-complete] p1[transaction, spawn-looper]",
        "0",
        "0",
        "0 p0[transaction-complete] p1[transaction]",
    ];
    on_c(
        program,
        &[
            first.as_slice(),
            &["0 log[looper-misuse]", "0 log[looper-misuse]"],
        ]
        .concat(),
    );
    on_rust(program, &[first.as_slice(), &["0", "0"]].concat());
    let program = "procs 2
        p1 set-manager
        p1 max-threads 2
        p0 send 0
        p1.t1 enter-looper
        p1.t1 register-looper
        p1 free
        p0 send 0";
    let first = [
        "0",
        "0",
        "0 p0[transaction-complete] p1[transaction, spawn-looper]",
        "0",
    ];
    on_c(
        program,
        &[
            first.as_slice(),
            &[
                "0 log[looper-misuse]",
                "0",
                "0 p0[transaction-complete] p1[transaction]",
            ],
        ]
        .concat(),
    );
    on_rust(
        program,
        &[
            first.as_slice(),
            &[
                "0",
                "0",
                "0 p0[transaction-complete] p1[transaction, spawn-looper]",
            ],
        ]
        .concat(),
    );
}

/// The process's work waits while its looper owes a reply
/// (`binder_available_for_proc_work_ilocked`, binder.c:575; Rust's
/// `should_use_process_work_queue`, thread.rs:421). A thread that is no
/// looper takes it in C, logged (binder.c:4774-4777); never in Rust.
#[test]
fn the_processs_work_waits_for_a_free_looper() {
    let program = "procs 3
        p1 set-manager
        p0.t1 call 0
        p2 call 0
        p1.t1 get-version
        p1 reply
        p1 free";
    let first = ["0", "0 p1[call]", "0"];
    on_c(
        program,
        &[
            first.as_slice(),
            &[
                "version 8 p1[t1:call] log[not-a-looper]",
                "0 p0[t1:reply, t1:transaction-complete] p1[transaction-complete]",
                "0",
            ],
        ]
        .concat(),
    );
    on_rust(
        program,
        &[
            first.as_slice(),
            &[
                "version 8",
                "0 p0[t1:reply, t1:transaction-complete] p1[call, transaction-complete]",
                "0",
            ],
        ]
        .concat(),
    );
}

/// A thread that is no looper and sends a node answers the node's
/// `BR_INCREFS`/`BR_ACQUIRE` in a write-only call, `poll` having found
/// nothing (vm/src/exec/drain.rs): no read, so none of C's "waiting for
/// process work" lines (binder.c:4774-4777), which only a read logs.
#[test]
fn a_thread_that_is_no_looper_answers_without_reading() {
    let program = "procs 2
        p1 set-manager
        p0.t1 send 0 node 1
        p0.t1 send 0 node 2";
    let expected = [
        "0",
        "0 p0[t1:transaction-complete, t1:increfs 1, t1:acquire 1] p1[transaction handle 1]",
        "0 p0[t1:transaction-complete, t1:increfs 2, t1:acquire 2]",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

/// C puts the temporary reference it took on a node object of a freed
/// buffer (`binder_get_node`/`binder_put_node`, binder.c:2089-2100), and
/// dropping it is a weak check that ignores strong counts
/// (`binder_dec_node_tmpref` 987 → `binder_dec_node_nilocked` 888-899):
/// p1's node 1, which its owner was told of and which now only the call's
/// buffer holds (p0's reference went with p0's buffer), has its work
/// queued although reading it reports nothing. p1's looper owes the call
/// a reply, so the thread that is no looper reads it and logs "Thread
/// waiting for process work" (4776) twice, the second pass finding nothing
/// (4816-4817); the step before shows the same after the reference went
/// (`binder_cleanup_ref_olocked`, 1202). Rust counts no temporary references
/// and never gives a thread that is no looper the process's work.
#[test]
fn a_freed_node_object_queues_work_that_reads_as_nothing() {
    let program = "procs 2
        p0 set-manager
        p1.t1 send 0 node 1
        p0 send 1 handle 1
        p0 call 1
        p0 free
        p1 free";
    let first = [
        "0",
        "0 p0[transaction handle 1] p1[t1:transaction-complete, t1:increfs 1, t1:acquire 1]",
        "0 p0[transaction-complete] p1[transaction node 1]",
        "0 p1[call]",
    ];
    let c = on_c(
        program,
        &[
            first.as_slice(),
            &[
                "0 log[not-a-looper, not-a-looper]",
                "0 log[not-a-looper, not-a-looper]",
            ],
        ]
        .concat(),
    );
    assert_eq!(
        holds(&c.snapshot(), 1),
        "refs{} nodes{1: #0 1/0 sw} buffers 1"
    );
    on_rust(program, &[first.as_slice(), &["0", "0"]].concat());
    // Both transliterations agree with their models on every step, and the
    // run meets no difference between the drivers.
    let text = format!(
        "idpool-trace v1\ntarget binder_commands\n{}\n",
        program.replace("        ", "")
    );
    let trace = crate::targets::parse_trace(&text).expect("a trace");
    let body = trace
        .body()
        .downcast_ref::<crate::targets::binder_commands::CmdProgram>()
        .expect("a binder_commands program");
    if let Err(failure) = crate::targets::binder_commands::run(body) {
        panic!("{failure:?}");
    }
}

/// `BINDER_VERSION` is 8 in both (binder.c:5850; defs.rs:149). The refused
/// commands are `EINVAL` in both: C logs every failed ioctl (binder.c:6000)
/// and "not supported" for the two `BC_` commands (4293-4298); Rust logs
/// only the failed write (thread.rs:1646).
#[test]
fn the_refused_commands_and_the_version() {
    let program = "procs 2
        p0 get-version
        p0 idle-timeout
        p0 idle-priority
        p0 attempt-acquire
        p0 acquire-result
        p0 oneway-spam on
        p0 max-threads 4";
    on_c(
        program,
        &[
            "version 8",
            "EINVAL log[ioctl-failed EINVAL]",
            "EINVAL log[ioctl-failed EINVAL]",
            "EINVAL log[ioctl-failed EINVAL, unsupported-command]",
            "EINVAL log[ioctl-failed EINVAL, unsupported-command]",
            "0",
            "0",
        ],
    );
    on_rust(
        program,
        &[
            "version 8",
            "EINVAL",
            "EINVAL",
            "EINVAL log[ioctl-failed EINVAL]",
            "EINVAL log[ioctl-failed EINVAL]",
            "0",
            "0",
        ],
    );
}

/// `set-manager-ext` makes the node it names with its cookie
/// (binder.c:5827; process.rs:746-760); `node-debug` reports the first node
/// above a pointer (binder.c:5600; process.rs:1202). A node object whose
/// cookie differs from the node's fails in both (binder.c:2253;
/// process.rs:294). A second `set-manager-ext` on that node: C refuses it
/// `EBUSY` first (binder.c:5533); Rust looks the node up first and refuses
/// the cookie, `EINVAL`, silently (process.rs:762). Rust also leaves the
/// node a refused `set-manager-ext` made, never told.
#[test]
fn the_ext_manager_object_and_node_debug() {
    let program = "procs 2
        p1 set-manager-ext 7 9
        p1 node-debug 0
        p1 node-debug 7
        p0 send 0 node 3
        p0 node-debug 2
        p1 send 1 node 7
        p1 set-manager-ext 7 7";
    let first = [
        "0",
        "node 7 cookie 9 strong 1 weak 1",
        "node 0 cookie 0 strong 0 weak 0",
        "0 p0[transaction-complete, increfs 3, acquire 3] p1[transaction handle 1]",
        "node 3 cookie 3 strong 1 weak 1",
    ];
    on_c(
        program,
        &[
            first.as_slice(),
            &[
                "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[transaction-failed, translate-failed]",
                "EBUSY log[manager-already-set, ioctl-failed EBUSY]",
            ],
        ]
        .concat(),
    );
    on_rust(
        program,
        &[
            first.as_slice(),
            &[
                "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[transaction-failed, translate-failed, copy-failed]",
                "EINVAL",
            ],
        ]
        .concat(),
    );
    let program = "procs 2
        p1 set-manager-ext 7 9
        p0 set-manager-ext 3 3
        p0 node-debug 0";
    on_c(
        program,
        &[
            "0",
            "EBUSY log[manager-already-set, ioctl-failed EBUSY]",
            "node 0 cookie 0 strong 0 weak 0",
        ],
    );
    let rust = on_rust(
        program,
        &[
            "0",
            "EBUSY log[manager-already-set]",
            "node 3 cookie 3 strong 0 weak 0",
        ],
    );
    assert_eq!(
        holds(&rust.snapshot(), 0),
        "refs{} nodes{3: #0 0/0 -} buffers 0"
    );
}

/// Freezing (binder.c:5692; process.rs:1534): one-way transactions still
/// arrive, read `BR_TRANSACTION_PENDING_FROZEN` by the sender
/// (binder.c:3820; transaction.rs:382); a call is `BR_FROZEN_REPLY`, which
/// C logs and leaves in the extended error (binder.c:3843-3845, 3929) and Rust
/// does not (no errno, error.rs:27). `frozen-info` reports what arrived and,
/// in bit 1, transactions pending; freezing a process with a transaction
/// pending is `EAGAIN` and thaws it (binder.c:5727-5734; process.rs:1575-1578).
#[test]
fn freezing_a_process() {
    let program = "procs 3
        p1 set-manager
        p0 freeze p1 0
        p0 frozen-info p1
        p0 send 0
        p0 call 0
        p0 frozen-info p1
        p0 thaw p1
        p0 frozen-info p1
        p0 call 0
        p0 freeze p1 10
        p0 frozen-info p1
        p1 reply
        p0 freeze p1 10";
    let head = [
        "0",
        "0",
        "sync 0 async 0",
        "0 p0[pending-frozen] p1[transaction]",
    ];
    let tail = |frozen_reply: &str, again: &str| {
        vec![
            frozen_reply.to_string(),
            "sync 1 async 1".into(),
            "0".into(),
            "sync 0 async 0".into(),
            "0 p1[call]".into(),
            again.into(),
            "sync 2 async 0".into(),
            "0 p0[reply, transaction-complete] p1[transaction-complete]".into(),
            "0".into(),
        ]
    };
    let c = tail(
        "0 ee BR_FROZEN_REPLY p0[frozen-reply] log[transaction-failed, frozen-process]",
        "EAGAIN log[ioctl-failed EAGAIN]",
    );
    let rust = tail("0 p0[frozen-reply]", "EAGAIN");
    let expected = |tail: &[String]| -> Vec<String> {
        head.iter()
            .map(|s| s.to_string())
            .chain(tail.iter().cloned())
            .collect()
    };
    let c = expected(&c);
    let rust = expected(&rust);
    on_c(program, &c.iter().map(String::as_str).collect::<Vec<_>>());
    on_rust(
        program,
        &rust.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

/// Freeze notifications (binder.c:3938-4093; freeze.rs): the state now,
/// then each freeze and thaw of the node's owner. Thawing a process that is
/// not frozen: C tells every listener again (`binder_add_freeze_work`,
/// binder.c:5703), Rust only what changed since it last told
/// (freeze.rs:126-128).
#[test]
fn freeze_notifications_follow_the_nodes_owner() {
    let program = "procs 3
        p1 set-manager
        p0 send 0 node 1
        p1 freeze-notify 1 5
        p0 freeze p0 0
        p0 thaw p0
        p0 thaw p0
        p1 clear-freeze-notify 1 5
        p1 clear-freeze-notify 1 5";
    let head = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0 p1[frozen-binder 5 0]",
        "0 p1[frozen-binder 5 1]",
        "0 p1[frozen-binder 5 0]",
    ];
    let tail = [
        "0 p1[clear-freeze-done 5]",
        "EINVAL log[ioctl-failed EINVAL, freeze-not-active]",
    ];
    on_c(
        program,
        &[head.as_slice(), &["0 p1[frozen-binder 5 0]"], &tail].concat(),
    );
    on_rust(program, &[head.as_slice(), &["0"], &tail].concat());
}

/// A freeze notification's errors; the owner's death tells nothing; an
/// exited process has no pid for `freeze` (C: `EINVAL`, binder.c:5915;
/// Rust: 0, process.rs:1643-1651) nor for `frozen-info` (`EINVAL` in both,
/// binder.c:5767; process.rs:1626-1631).
#[test]
fn freeze_notifications_refused_and_a_process_without_pid() {
    let program = "procs 3
        p1 set-manager
        p0 send 0 node 1
        p2 freeze p0 0
        p1 freeze-notify 1 5
        p1 freeze-notify 1 6
        p1 freeze-notify 2 5
        p2 thaw p0
        p0 exit
        p2 freeze p0 0
        p2 frozen-info p0";
    let head = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0",
        "0 p1[frozen-binder 5 1]",
        "EINVAL log[ioctl-failed EINVAL, freeze-already-set]",
        "EINVAL log[ioctl-failed EINVAL, freeze-invalid-ref request]",
        "0 p1[frozen-binder 5 0]",
        "0",
    ];
    on_c(
        program,
        &[
            head.as_slice(),
            &[
                "EINVAL log[ioctl-failed EINVAL]",
                "EINVAL log[ioctl-failed EINVAL]",
            ],
        ]
        .concat(),
    );
    on_rust(program, &[head.as_slice(), &["0", "EINVAL"]].concat());
}

/// One cookie on two handles: C's notifications are per reference
/// (binder.c:3959), Rust's per cookie in the process, refused as a
/// duplicate (freeze.rs:213-218); once cleared, the cookie is free again.
#[test]
fn one_freeze_cookie_on_two_handles() {
    let program = "procs 2
        p1 set-manager
        p0 send 0 node 1
        p0 send 0 node 2
        p1 freeze-notify 1 5
        p1 freeze-notify 2 5
        p1 clear-freeze-notify 1 5
        p1 freeze-notify 1 5
        p1 release 1";
    let head = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0 p0[transaction-complete, increfs 2, acquire 2]",
        "0 p1[frozen-binder 5 0]",
    ];
    let tail = [
        "0 p1[clear-freeze-done 5]",
        "0 p1[frozen-binder 5 0]",
        "0 p0[release 1, decrefs 1]",
    ];
    on_c(
        program,
        &[head.as_slice(), &["0 p1[frozen-binder 5 0]"], &tail].concat(),
    );
    on_rust(
        program,
        &[
            head.as_slice(),
            &["EINVAL log[ioctl-failed EINVAL, freeze-duplicate-cookie]"],
            &tail,
        ]
        .concat(),
    );
}

/// `+update`: a one-way transaction to a frozen process replaces the one of
/// the same sender and flags still waiting behind the node's unfreed
/// buffer, whose objects are released (binder.c:2797-2820, 2901-2912;
/// transaction.rs:353-369, 424-441).
#[test]
fn update_replaces_a_waiting_one_way_transaction() {
    let program = "procs 2
        p1 set-manager
        p1 freeze p1 0
        p0 send 0 node 1 +update
        p0 send 0 node 2 +update
        p0 send 0 node 3 +update
        p0 send 0 +update
        p1 free
        p1 free";
    let expected = [
        "0",
        "0",
        "0 p0[pending-frozen, increfs 1, acquire 1] p1[transaction handle 1]",
        "0 p0[pending-frozen, increfs 2, acquire 2]",
        "0 p0[pending-frozen, increfs 3, acquire 3, release 2, decrefs 2]",
        "0 p0[pending-frozen, release 3, decrefs 3]",
        "0 p0[release 1, decrefs 1] p1[transaction]",
        "0",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

/// A cleared death notification's done goes to the clearing thread when it
/// is a looper, else to the process (binder.c:4500-4509; thread.rs:669);
/// one cleared while its `BR_DEAD_BINDER` waits unread (the only looper
/// waits for a reply) follows it once read and done (binder.c:4512,
/// 4552-4563; node.rs:1007-1047).
#[test]
fn death_notifications_cleared_from_other_threads() {
    let program = "procs 3
        p1 set-manager
        p2 send 0 node 4
        p1 death 1 9
        p1.t1 clear-death 1 9
        p1 death 1 8
        p2 exit
        p1.t2 clear-death 1 8";
    let expected = [
        "0",
        "0 p1[transaction handle 1] p2[transaction-complete, increfs 4, acquire 4]",
        "0",
        "0 p1[clear-death-done 9]",
        "0",
        "0 p1[dead-binder 8]",
        "0 p1[clear-death-done 8]",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
    let program = "procs 3
        p1 set-manager
        p2 send 0 node 4
        p0 send 0 node 1
        p1 death 1 9
        p1 call 2
        p2 exit
        p1 clear-death 1 9
        p0 reply
        p1 free";
    let expected = [
        "0",
        "0 p1[transaction handle 1] p2[transaction-complete, increfs 4, acquire 4]",
        "0 p0[transaction-complete, increfs 1, acquire 1]",
        "0",
        "0 p0[call]",
        "0",
        "0",
        "0 p0[transaction-complete] p1[reply, transaction-complete, dead-binder 9, clear-death-done 9]",
        "0 p1[transaction handle 2]",
    ];
    on_c(program, &expected);
    on_rust(program, &expected);
}

/// One-way buffers a receiver does not free take its async space, half of
/// its 1 MiB mapping (binder_alloc.c:938; range_alloc/array.rs:44), 8 KiB
/// for 256 nodes (32 bytes an object, binder_alloc.c:611;
/// thread.rs:1042-1049). Once less than a tenth of the mapping is left and
/// the sender holds more than 50 of them, its completion is
/// `BR_ONEWAY_SPAM_SUSPECT` (it turned detection on): once until the space
/// recovers in C (`debug_low_async_space_locked`, binder_alloc.c:502-508),
/// at every send in Rust (`low_oneway_space`, array.rs:155-156). With no
/// async space left the send fails, `ENOSPC`: C's "cannot allocate
/// buffer" is a line of no kind, Rust's is `buffer-alloc-failed`
/// (thread.rs:1055) with `copy-failed` (transaction.rs:179).
#[test]
fn one_way_spam_and_a_full_async_space() {
    let mut program = "procs 2\np0 set-manager\np1 oneway-spam on".to_string();
    for _ in 0..65 {
        program += "\np1 send 0 nodes 0 256";
    }
    let (_, c) = run::<COracle>(Version::CMainline, &program);
    let (_, rust) = run::<RustOracle>(Version::RustMainline, &program);
    // Step 2 + k is the k-th send (from 1).
    let spam = |got: &[String]| -> Vec<usize> {
        (1..=65)
            .filter(|k| got[1 + k].contains("oneway-spam-suspect"))
            .collect()
    };
    assert_eq!(spam(&c), [52]);
    assert_eq!(spam(&rust), (52..=64).collect::<Vec<_>>());
    assert_eq!(c[2 + 63], "0 p1[transaction-complete]");
    assert_eq!(
        c[2 + 64],
        "0 ee BR_FAILED_REPLY -28 p1[failed-reply] log[transaction-failed]"
    );
    assert_eq!(
        rust[2 + 64],
        "0 ee BR_FAILED_REPLY -28 p1[failed-reply] log[transaction-failed, copy-failed, buffer-alloc-failed]"
    );
    // Without detection the suspect reads as a completion in both.
    let quiet = program.replace("p1 oneway-spam on", "p1 oneway-spam off");
    for got in [
        run::<COracle>(Version::CMainline, &quiet).1,
        run::<RustOracle>(Version::RustMainline, &quiet).1,
    ] {
        assert!(spam(&got).is_empty());
    }
}

/// Arbitrary programs (a fixed pseudo-random sequence) over the whole
/// language run on every version without panicking, and after every step:
/// no reference has both counts at 0, every reference to a live owner's
/// node names a node in its tree, and (C, until a crash) a node in its
/// owner's tree that nothing counts or refers to is one its owner was told
/// of, its work queued (`binder_dec_node_nilocked` frees one it was told
/// nothing of at once; Rust may keep a node whose zero-to-one work waits
/// deferred).
#[test]
fn arbitrary_programs_keep_the_models_invariants() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for program in 0..400 {
        let procs = 2 + next(3) as usize;
        let mut euids =
            idpool::driver::Procs::new((0..procs).map(|_| 1000 * (next(5) / 4) as u32).collect());
        // A quarter of the programs: the last process is another open by
        // p0's task.
        if next(4) == 0 {
            euids.tasks[procs - 1] = idpool::driver::Pid(0);
            euids.euids[procs - 1] = euids.euids[0];
        }
        let steps: Vec<_> = (0..40).map(|_| random_step(procs, &mut next)).collect();
        for version in Version::ALL {
            let mut c = COracle::new(&euids, version);
            let mut rust = RustOracle::new(&euids, version);
            let mut crashed = false;
            for (i, (step, fail)) in steps.iter().enumerate() {
                let at = format!("program {program}, {version:?}, step {i} ({step})");
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
    use idpool::driver::{
        Command, LooperCmd, NodeFlags, Object, Payload, Pid, RefCmd, Refused, Step, Tid, TxnFlags,
    };
    use idpool::AllocSite;
    let handle = |next: &mut dyn FnMut(u64) -> u64| next(4) as u32;
    let payload = |next: &mut dyn FnMut(u64) -> u64| Payload {
        flags: TxnFlags([0, 0, TxnFlags::UPDATE_TXN, TxnFlags::CLEAR_BUF][next(4) as usize]),
        objects: (0..next(4))
            .map(|_| match next(2) {
                0 => Object::Node {
                    ptr: next(4),
                    strong: next(2) == 0,
                },
                _ => Object::Handle {
                    handle: next(4) as u32,
                    strong: next(2) == 0,
                },
            })
            .collect(),
    };
    let pid = |next: &mut dyn FnMut(u64) -> u64| Pid(next(procs as u64) as u8);
    let command = match next(48) {
        0 | 1 => Command::SetManager,
        2 => Command::SetManagerExt {
            ptr: next(4),
            cookie: next(5),
            flags: NodeFlags(0),
        },
        3..=8 => Command::Ref(RefCmd::ALL[next(4) as usize], handle(next)),
        9..=12 => Command::Send {
            to: handle(next),
            payload: payload(next),
        },
        13..=17 => Command::Call {
            to: handle(next),
            payload: payload(next),
        },
        18..=21 => Command::Reply(payload(next)),
        22 | 23 => Command::Free,
        24 => Command::RequestDeath {
            handle: handle(next),
            cookie: next(2),
        },
        25 => Command::ClearDeath {
            handle: handle(next),
            cookie: next(2),
        },
        26 => Command::RequestFreeze {
            handle: handle(next),
            cookie: next(2),
        },
        27 => Command::ClearFreeze {
            handle: handle(next),
            cookie: next(2),
        },
        28 => Command::NodeInfo(handle(next)),
        29 => Command::NodeDebug(next(4)),
        30 => Command::ExtendedError,
        31 => Command::Looper(
            [LooperCmd::Register, LooperCmd::Enter, LooperCmd::Exit][next(3) as usize],
        ),
        32 => Command::ThreadExit,
        33 => Command::MaxThreads(next(3) as u32),
        34 | 35 => Command::Freeze {
            target: pid(next),
            timeout_ms: 0,
        },
        36 => Command::Thaw(pid(next)),
        37 => Command::FrozenInfo(pid(next)),
        38 => Command::Version,
        39 => Command::OnewaySpam(next(2) == 0),
        40 => Command::Refused(
            [
                Refused::IdleTimeout,
                Refused::IdlePriority,
                Refused::AttemptAcquire,
                Refused::AcquireResult,
            ][next(4) as usize],
        ),
        _ => Command::Exit,
    };
    let fail = [None, None, None, None, None, Some(AllocSite::Ref)][next(6) as usize];
    let step = Step {
        pid: pid(next),
        tid: Tid(next(3) as u8),
        command,
    };
    (step, fail)
}

/// Every ref holds a count and names a node of its living owner; with
/// `strict`, a node nothing counts or refers to is one its owner was told
/// of.
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
                owner.nodes.get(&r.node.ptr).map(|n| n.serial),
                Some(r.node.serial),
                "{at}: a ref to a node its owner no longer has: {r:?}"
            );
        }
    }
    for (p, proc) in snapshot.procs.iter().enumerate() {
        for (&ptr, n) in proc.nodes.iter().filter(|_| strict) {
            let referenced = refs().any(|r| r.node.owner.index() == p && r.node.ptr == ptr);
            assert!(
                n.strong > 0 || n.weak > 0 || referenced || n.has_strong || n.has_weak,
                "{at}: node {ptr} of process {p} neither counted, referenced nor told: {n:?}"
            );
        }
    }
}

/// A freeze notification on a handle whose node's owner is gone: C queues
/// nothing (`binder_request_freeze_notification`, binder.c:3974-3982, only
/// while `ref->node->proc` is set); Rust queues its message all the same
/// (freeze.rs:271), which reports the owner not frozen (`is_fully_frozen`
/// of a released process, process.rs:1410; freeze.rs:125).
#[test]
fn a_freeze_notification_on_a_dead_node() {
    let program = "procs 3
        p1 set-manager
        p0 send 0 node 1
        p0 exit
        p1 freeze-notify 1 5
        p1 clear-freeze-notify 1 5";
    let first = [
        "0",
        "0 p0[transaction-complete, increfs 1, acquire 1] p1[transaction handle 1]",
        "0",
    ];
    on_c(
        program,
        &[first.as_slice(), &["0", "0 p1[clear-freeze-done 5]"]].concat(),
    );
    on_rust(
        program,
        &[
            first.as_slice(),
            &["0 p1[frozen-binder 5 0]", "0 p1[clear-freeze-done 5]"],
        ]
        .concat(),
    );
}

/// Two opens by one task (`procs 0 0 p0`: `p2` is another open by `p0`'s
/// task) are two Binder processes with one pid. Freezing the pid goes
/// through them one by one and stops at the first that fails: C in
/// `binder_procs` order, the last opened first (`hlist_add_head`,
/// binder.c:6118; 5940-5941), Rust in `all_procs` order, the first opened
/// first (context.rs:86; process.rs:1648). `p0` owes a reply, so C has
/// frozen `p2` (and `p1`, listening on `p2`'s node, is told) before `p0`
/// fails; Rust fails at `p0` and never reaches `p2`. `frozen-info` or-s
/// the pid's processes.
#[test]
fn freezing_a_task_with_two_opens() {
    let program = "procs 0 0 p0
        p1 set-manager
        p2 send 0 node 5
        p1 acquire 1
        p0 send 0 node 3
        p1 acquire 2
        p1 free
        p1 free
        p1.t1 call 2
        p1 freeze-notify 1 7
        p1 freeze p0 0
        p1 frozen-info p2";
    // The second one-way transaction to p1's node waits until the first
    // buffer is freed; the call's transaction-complete comes with its reply.
    let head = [
        "0",
        "0 p1[transaction handle 1] p2[transaction-complete, increfs 5, acquire 5]",
        "0",
        "0 p0[transaction-complete, increfs 3, acquire 3]",
        "0",
        "0 p1[transaction handle 2]",
        "0",
        "0 p0[call]",
        "0 p1[frozen-binder 7 0]",
    ];
    let with = |freeze: &str, info: &str| {
        let mut lines: Vec<String> = head.iter().map(|l| l.to_string()).collect();
        lines.push(freeze.into());
        lines.push(info.into());
        lines
    };
    let c = with(
        "EAGAIN p1[frozen-binder 7 1] log[ioctl-failed EAGAIN]",
        "sync 2 async 0",
    );
    let rust = with("EAGAIN", "sync 2 async 0");
    let c: Vec<&str> = c.iter().map(String::as_str).collect();
    let rust: Vec<&str> = rust.iter().map(String::as_str).collect();
    on_c(program, &c);
    on_rust(program, &rust);
}

/// C refuses a transaction to handle 0 from the manager's own pid
/// (`target_proc->pid == proc->pid`, binder.c:3239), so from another open
/// by the manager's task too; Rust refuses it from the manager's process
/// only (`core::ptr::eq(self, owner)`, process.rs:928) and delivers it.
/// Both find the pid of an exited open through another open of its task.
#[test]
fn the_manager_task_s_other_open() {
    let program = "procs 0 p0
        p0 set-manager
        p1 send 0
        p0 exit
        p1 frozen-info p0";
    on_c(
        program,
        &[
            "0",
            "0 ee BR_FAILED_REPLY -22 p1[failed-reply] log[transaction-to-own-manager, transaction-failed]",
            "0",
            "sync 0 async 0",
        ],
    );
    on_rust(
        program,
        &[
            "0",
            "0 p0[transaction] p1[transaction-complete]",
            "0",
            "sync 0 async 0",
        ],
    );
}
