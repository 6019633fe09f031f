//! The parsing of what the executor printed on the real kernels, on lines
//! captured from mainline 7.3.4 (Debian's kernel and `binder_linux.ko` for
//! C, the project's minimal kernel for Rust) running `vm/examples/`; and,
//! with `BINDER_VM=1`, a live replay of the examples that must answer what
//! the captured run answered.

use binder_vm::debugfs;
use binder_vm::klog::{self, Class};
use binder_vm::replay::{parse_boot, replay_with, Kernel, Options, TraceRun};
use binder_vm::{program, Driver};
use idpool::driver::{
    br_code, Br, Command, Errno, ExtendedError, Log, NodeName, Pid, Program, Read, Ret,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/fixtures").join(name)).unwrap()
}

/// The examples a fixture captured, in its order (its `trace-begin`
/// records name them), read from `vm/examples/`: a fixture holds the
/// examples of its capture, and examples added since are not in it.
fn examples_of(file: &str) -> Vec<(String, Program)> {
    fixture(file)
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["t"] == "trace-begin").then(|| v["name"].as_str().unwrap().to_string())
        })
        .map(|name| {
            let text = std::fs::read_to_string(root().join("examples").join(&name)).unwrap();
            let p = program::parse(&text).unwrap();
            (name, p)
        })
        .collect()
}

fn runs(driver: Driver, file: &str) -> Vec<TraceRun> {
    let (runs, stats) = parse_boot(
        driver,
        &examples_of(file),
        &fixture(file),
        "",
        Duration::ZERO,
    )
    .unwrap();
    assert_eq!(stats.traces, runs.len());
    assert!(stats.done_ms > stats.executor_start_ms);
    runs
}

fn trace<'a>(runs: &'a [TraceRun], prefix: &str) -> &'a TraceRun {
    runs.iter().find(|r| r.name.starts_with(prefix)).unwrap()
}

fn reads(run: &TraceRun, step: usize, pid: usize) -> Vec<String> {
    run.steps[step].observed.reads[pid]
        .iter()
        .map(|b| b.to_string())
        .collect()
}

/// Every trace ran to its end, every line was classified, every debug line
/// parsed, every node named; the only notes are reads that `poll` announced
/// and that found nothing (`EAGAIN`: a work item with nothing left to say,
/// which both drivers also log).
fn complete_but_empty_reads(runs: &[TraceRun]) {
    for r in runs {
        assert_eq!(r.error, None, "{}", r.name);
        assert_eq!(r.steps.len(), r.program.steps.len(), "{}", r.name);
        for (i, s) in r.steps.iter().enumerate() {
            for n in &s.notes {
                assert!(
                    n.contains("drain: t") && n.ends_with("(os error 11)"),
                    "{} step {i}: {n}",
                    r.name
                );
            }
            assert!(s.observed.ret.is_some(), "{} step {i}", r.name);
        }
    }
}

/// Every trace ran to its end, every line was classified, every debug line
/// parsed, every node named.
fn complete(runs: &[TraceRun]) {
    assert!(!runs.is_empty());
    for r in runs {
        assert_eq!(r.error, None, "{}", r.name);
        assert_eq!(r.steps.len(), r.program.steps.len(), "{}", r.name);
        assert!(!r.log_may_be_incomplete, "{}", r.name);
        for (i, s) in r.steps.iter().enumerate() {
            assert!(s.notes.is_empty(), "{} step {i}: {:?}", r.name, s.notes);
            assert!(s.observed.ret.is_some(), "{} step {i}", r.name);
        }
    }
}

#[test]
fn c_examples_parse_completely() {
    complete(&runs(Driver::C, "c-7.3.4-examples.jsonl"));
}

#[test]
fn rust_examples_parse_completely() {
    complete(&runs(Driver::Rust, "rust-7.3.4-examples.jsonl"));
}

#[test]
fn c_observations_of_the_manager_traces() {
    let runs = runs(Driver::C, "c-7.3.4-examples.jsonl");
    let t = trace(&runs, "01-");
    assert_eq!(t.steps[1].observed.ret, Some(Ret::Err(Errno::Busy)));
    assert_eq!(
        t.steps[1].observed.log,
        [Log::ManagerAlreadySet, Log::IoctlFailed(Errno::Busy)]
    );
    assert_eq!(t.steps[2].observed.ret, Some(Ret::Err(Errno::Inval)));
    assert_eq!(
        t.steps[2].observed.log,
        [Log::ManagerAcquiresZero, Log::IoctlFailed(Errno::Inval)]
    );
    // A one-way send: the sender reads BR_TRANSACTION_COMPLETE and the
    // driver's BR_INCREFS/BR_ACQUIRE for its new node; the manager the
    // transaction with its new handle.
    assert_eq!(reads(t, 4, 0), ["transaction handle 1"]);
    assert_eq!(
        reads(t, 4, 1),
        ["transaction-complete", "increfs 1", "acquire 1"]
    );
    let manager = &t.steps[0].snapshot.procs[0].nodes[&0];
    assert_eq!(
        (
            manager.strong,
            manager.weak,
            manager.has_strong,
            manager.has_weak
        ),
        (1, 1, true, true)
    );

    let t = trace(&runs, "02-");
    assert_eq!(t.steps[2].observed.ret, Some(Ret::Err(Errno::Perm)));
    assert_eq!(
        t.steps[2].observed.log,
        [Log::ManagerBadUid, Log::IoctlFailed(Errno::Perm)]
    );
    assert_eq!(t.steps[3].observed.ret, Some(Ret::Ok));

    let t = trace(&runs, "07-");
    assert_eq!(
        t.steps[4].observed.log,
        [Log::GotOtherHandle { wanted: 0, got: 1 }]
    );
    let p1 = &t.steps[4].snapshot.procs[1];
    let node = |owner: u8| NodeName {
        owner: Pid(owner),
        ptr: 0,
        serial: 0,
    };
    assert_eq!(p1.refs[&0].node, node(0));
    assert_eq!(p1.refs[&1].node, node(2));
}

#[test]
fn c_observations_of_deaths_node_info_and_queues() {
    let runs = runs(Driver::C, "c-7.3.4-examples.jsonl");
    let t = trace(&runs, "05-");
    assert_eq!(t.steps[4].snapshot.procs[0].refs[&1].death, Some(7));
    assert_eq!(reads(t, 5, 0), ["dead-binder 7"]);
    assert_eq!(reads(t, 6, 0), ["clear-death-done 7"]);
    assert_eq!(t.steps[6].snapshot.procs[0].refs[&1].death, None);

    let t = trace(&runs, "06-");
    assert_eq!(
        t.steps[2].observed.ret,
        Some(Ret::NodeInfo { strong: 1, weak: 0 })
    );
    assert_eq!(t.steps[5].observed.ret, Some(Ret::Err(Errno::Perm)));
    assert_eq!(t.steps[6].observed.ret, Some(Ret::Err(Errno::Inval)));
    assert_eq!(
        t.steps.last().unwrap().observed.log,
        [Log::WeakAsStrong, Log::IoctlFailed(Errno::Inval)]
    );

    let t = trace(&runs, "11-");
    assert_eq!(t.steps[0].observed.reads[1], [Read::main(Br::DeadReply)]);
    assert_eq!(
        t.steps[0].observed.log,
        [Log::NoTargetNode, Log::TransactionFailed]
    );

    // The second and third one-way sends wait on the node: not delivered,
    // their buffers allocated but not counted as received.
    let t = trace(&runs, "14-");
    assert!(t.steps[2].observed.reads[0].is_empty());
    assert_eq!(t.steps[2].snapshot.procs[0].buffers, 1);
    assert_eq!(t.steps[2].procs[0].as_ref().unwrap().buffers_pending, 1);
    assert_eq!(reads(t, 4, 0), ["transaction handle 2"]);
}

#[test]
fn rust_differs_where_it_does() {
    let runs = runs(Driver::Rust, "rust-7.3.4-examples.jsonl");
    let t = trace(&runs, "01-");
    assert_eq!(t.steps[1].observed.ret, Some(Ret::Err(Errno::Busy)));
    assert_eq!(t.steps[1].observed.log, [Log::ManagerAlreadySet]);
    // Only the failed BINDER_WRITE_READ's line ("Write failure") for the
    // manager's BC_INCREFS 0, and the manager's node has no weak count.
    assert_eq!(t.steps[2].observed.ret, Some(Ret::Err(Errno::Inval)));
    assert_eq!(t.steps[2].observed.log, [Log::IoctlFailed(Errno::Inval)]);
    assert_eq!(t.steps[0].snapshot.procs[0].nodes[&0].weak, 0);
    // The refused set-manager left a node with pointer 0 in p1.
    assert!(t.steps[1].snapshot.procs[1].nodes.contains_key(&0));
    // node-info of a handle the manager does not hold.
    assert_eq!(
        trace(&runs, "02-").steps[4].observed.ret,
        Some(Ret::Err(Errno::NoEnt))
    );
    // The same answers to the death trace, but no death in the debug text.
    let t = trace(&runs, "05-");
    assert_eq!(reads(t, 5, 0), ["dead-binder 7"]);
    assert_eq!(t.steps[4].snapshot.procs[0].refs[&1].death, None);
}

#[test]
fn an_executor_that_stops_early_is_an_error() {
    let lines = fixture("c-7.3.4-examples.jsonl");
    let cut: Vec<&str> = lines.lines().take(20).collect();
    let console = "[    3.0] random line\nthread 'main' panicked at vm/src/exec.rs:1:1:\nboom\n";
    let err = parse_boot(
        Driver::C,
        &examples_of("c-7.3.4-examples.jsonl"),
        &cut.join("\n"),
        console,
        Duration::ZERO,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("did not finish") && err.contains("panicked at"),
        "{err}"
    );
    let bad = parse_boot(
        Driver::C,
        &examples_of("c-7.3.4-examples.jsonl"),
        "{\"t\":\"nonsense\"}",
        "",
        Duration::ZERO,
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("does not parse"), "{bad}");
}

#[test]
fn debug_text_of_the_c_driver() {
    let p = debugfs::parse(&fixture("c-proc-oneway-queue.txt"), Driver::C);
    assert_eq!(p.pid, Some(124));
    assert_eq!(p.nodes.len(), 1);
    let n = &p.nodes[0];
    assert_eq!(
        (n.ptr, n.strong, n.weak, n.has_strong, n.has_weak),
        (0, 4, 1, true, true)
    );
    assert_eq!(
        p.refs.iter().map(|r| r.handle).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(p
        .refs
        .iter()
        .all(|r| r.death == Some(false) && r.strong == 1 && !r.dead_node));
    assert_eq!((p.buffers, p.buffers_pending), (1, 2));
    assert_eq!(p.pending.len(), 2, "{:?}", p.pending);
    assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);

    let p = debugfs::parse(&fixture("c-proc-death.txt"), Driver::C);
    assert_eq!(p.refs[0].death, Some(true));
}

#[test]
fn debug_text_of_the_rust_driver() {
    // Refs printed without newlines, the last one followed by a buffer.
    let p = debugfs::parse(&fixture("rust-proc-refs.txt"), Driver::Rust);
    assert_eq!(
        p.refs.iter().map(|r| r.handle).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(p.refs.iter().all(|r| r.death.is_none()));
    let n = &p.nodes[0];
    assert_eq!(
        (n.strong, n.weak, n.has_strong, n.has_weak),
        (4, 0, true, true)
    );
    assert_eq!((p.buffers, p.buffers_pending), (1, 2));
    assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);
}

/// The log lines (by word) the examples make each driver print: those of
/// the first capture, or those of the new commands.
fn expected_log_words(driver: Driver, new_commands: bool) -> &'static [&'static str] {
    match (driver, new_commands) {
        (Driver::C, true) => &[
            "call-bad-stack",
            "freeze-already-set",
            "freeze-cookie-mismatch",
            "freeze-invalid-ref",
            "freeze-not-active",
            "frozen-process",
            "ioctl-failed",
            "looper-misuse",
            "manager-already-set",
            "no-target-node",
            "not-a-looper",
            "object-invalid-handle",
            "reply-bad-stack",
            "reply-no-stack",
            "reply-target-gone",
            "transaction-failed",
            "transaction-to-invalid-handle",
            "translate-failed",
            "undelivered-complete",
            "unsupported-command",
        ],
        (Driver::Rust, true) => &[
            "buffer-alloc-failed",
            "call-bad-stack",
            "copy-failed",
            "freeze-already-set",
            "freeze-cookie-mismatch",
            "freeze-invalid-ref",
            "freeze-not-active",
            "ioctl-failed",
            "manager-already-set",
            "reply-failed",
            "reply-no-stack",
            "transaction-failed",
            "transaction-to-invalid-handle",
            "translate-failed",
            "undelivered-complete",
            "undelivered-error",
            "undelivered-freeze",
        ],
        (Driver::C, false) => &[
            "death-already-set",
            "death-cookie-mismatch",
            "death-invalid-ref",
            "death-not-active",
            "got-other-handle",
            "invalid-ref",
            "ioctl-failed",
            "manager-acquires-zero",
            "manager-already-set",
            "manager-bad-uid",
            "no-target-node",
            "object-invalid-handle",
            "transaction-failed",
            "transaction-to-invalid-handle",
            "transaction-to-own-manager",
            "translate-failed",
            "undelivered-transaction",
            "weak-as-strong",
        ],
        (Driver::Rust, false) => &[
            "copy-failed",
            "death-already-set",
            "death-cookie-mismatch",
            "death-invalid-ref",
            "death-not-active",
            "invalid-ref",
            "ioctl-failed",
            "manager-already-set",
            "transaction-failed",
            "transaction-to-invalid-handle",
            "translate-failed",
            "undelivered-transaction",
            "weak-as-strong",
        ],
    }
}

#[test]
fn every_captured_log_line_is_classified() {
    for (driver, file) in [
        (Driver::C, "c-7.3.4-examples.jsonl"),
        (Driver::Rust, "rust-7.3.4-examples.jsonl"),
        (Driver::C, "c-7.3.4-new-commands.jsonl"),
        (Driver::Rust, "rust-7.3.4-new-commands.jsonl"),
    ] {
        let mut seen = std::collections::BTreeSet::new();
        for r in runs(driver, file) {
            for l in r.steps.iter().flat_map(|s| &s.log).chain(&r.end_log) {
                assert_ne!(l.class, Class::Unclassified, "{driver:?}: {}", l.raw);
                if let Class::Log(x) = l.class {
                    seen.insert(x.word());
                    if driver == Driver::C {
                        assert_eq!(l.limit, klog::c_limit(&x), "{}", l.raw);
                    }
                }
            }
        }
        let expected = expected_log_words(driver, file.contains("new-commands"));
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), expected, "{driver:?}");
    }
}

#[test]
fn log_lines_of_each_table() {
    let c = |line: &str| klog::classify(line, Driver::C).class;
    assert_eq!(
        c("<6>[    2.980477] binder_linux: 90:90 context manager tried to acquire desc 0"),
        Class::Log(Log::ManagerAcquiresZero)
    );
    assert_eq!(
        c("<6>[    1.0] binder_linux: 91:91 tried to acquire reference to desc 0, got 1 instead"),
        Class::Log(Log::GotOtherHandle { wanted: 0, got: 1 })
    );
    assert_eq!(
        c("<6>[    1.0] binder_linux: 91:91 BC_RELEASE 1 refcount change on invalid ref -1 ret -22"),
        c("<6>[    1.0] binder_linux: 91:91 Release 1 refcount change on invalid ref -1 ret -22")
    );
    assert_eq!(
        klog::classify(
            "<4>[    1.0] rust_binder: Read failure Err(Error(11)) in pid:20",
            Driver::Rust
        )
        .class,
        Class::Log(Log::IoctlFailed(Errno::Again))
    );
    assert_eq!(
        c("<6>[    1.0] binder_linux: 91:91 Release 1 refcount change on invalid ref -1 ret -22"),
        Class::Log(Log::InvalidRef(u32::MAX))
    );
    assert_eq!(
        c("<6>[    1.0] binder_linux: 91:91 ioctl 40046207 7ffd63d4b830 returned -16"),
        Class::Log(Log::IoctlFailed(Errno::Busy))
    );
    assert_eq!(
        c("<4>[    9.1] binder_user_error: 4 callbacks suppressed"),
        Class::Suppressed {
            site: "binder_user_error".into(),
            count: 4
        }
    );
    assert_eq!(
        c("<6>[   16.639896] binder_linux: 96 RLIMIT_NICE not set"),
        Class::Known("rlimit-nice")
    );
    assert_eq!(
        c("<6>[    1.0] binder_linux: 1:1 something new"),
        Class::Unclassified
    );
    assert_eq!(
        c("<6>[    1.0] clocksource: Switched to clocksource tsc"),
        Class::Foreign
    );
    assert_eq!(
        c("<4>[    1.0] kernel BUG at drivers/android/binder.c:1166!"),
        Class::Log(Log::Bug)
    );
    let r = |line: &str| klog::classify(line, Driver::Rust).class;
    assert_eq!(
        r("<6>[ 1.0] rust_binder: 40:40 no such ref 5"),
        Class::Log(Log::InvalidRef(5))
    );
}

#[test]
fn log_lines_of_the_new_commands_the_examples_do_not_print() {
    let c = |line: &str| klog::classify(line, Driver::C).class;
    // Lines of the new commands' paths the examples do not print (format
    // strings of binder.c and binder_alloc.c, 7.3).
    assert_eq!(
        c("<6>[ 1.0] binder_linux: 9:9 got reply transaction with bad target transaction stack 4, expected 3"),
        Class::Known("reply-bad-target-stack")
    );
    assert_eq!(
        c("<6>[ 1.0] binder_linux: 9:9 new transaction not allowed when there is a transaction on thread todo"),
        Class::Log(Log::CallWithTodo)
    );
    assert_eq!(
        c("<6>[ 1.0] binder_linux: 9:9 BC_FREEZE_NOTIFICATION_DONE 0000000000000007 not found"),
        Class::Log(Log::FreezeDoneNotFound)
    );
    assert_eq!(
        c("<6>[ 1.0] binder_linux: undelivered freeze notification, 0000000000000007"),
        Class::Log(Log::UndeliveredFreeze)
    );
    assert_eq!(
        c("<6>[ 1.0] binder_linux: 9:9 dead process or thread"),
        Class::Log(Log::DeadProcess)
    );
    assert_eq!(
        c("<3>[ 1.0] binder_linux: 9:9 unknown command 1234"),
        Class::Known("unknown-command")
    );
    assert_eq!(
        c("<6>[ 1.0] binder_linux: 80: pid 81 spamming oneway? 51 buffers allocated for a total size of 417792"),
        Class::Known("oneway-spam-warning")
    );
    let r = |line: &str| klog::classify(line, Driver::Rust).class;
    // The Rust driver's lines of the new commands' paths the examples do
    // not print (drivers/android/binder/, 7.3).
    for (line, class) in [
        (
            "40:40 got new transaction with bad transaction stack",
            Class::Log(Log::CallBadStack),
        ),
        (
            "40:40 got reply transaction with bad transaction stack",
            Class::Log(Log::ReplyBadStack),
        ),
        (
            "40:40 BC_REQUEST_FREEZE_NOTIFICATION duplicate cookie",
            Class::Log(Log::FreezeDuplicateCookie),
        ),
        (
            "40:40 BC_FREEZE_NOTIFICATION_DONE 0000000000000007 not found",
            Class::Log(Log::FreezeDoneNotFound),
        ),
        (
            "40:40 BC_FREEZE_NOTIFICATION_DONE 0000000000000007 not pending",
            Class::Log(Log::FreezeDoneNotFound),
        ),
        (
            "40:40 BC_CLEAR_FREEZE_NOTIFICATION invalid cookie 3",
            Class::Known("freeze-invalid-cookie"),
        ),
        (
            "Thread reply work is already in use.",
            Class::Known("thread-work-in-use"),
        ),
    ] {
        assert_eq!(
            r(&format!("<6>[ 1.0] rust_binder: {line}")),
            class,
            "{line}"
        );
    }
    assert_eq!(
        r("<3>[ 1.0] rust_binder: Detected mismatch between handle_is_present and by_handle"),
        Class::Log(Log::PoolMismatch)
    );
}

/// Replays the examples on the real kernels (QEMU) when `BINDER_VM=1`, and
/// checks that they answer what the captured fixtures say, step by step.
/// The kernel and executor come from where `ci/kernel-vm.sh` leaves them,
/// or `BINDER_VM_KERNEL`, `BINDER_VM_MODULE`, `BINDER_VM_EXECUTOR`; the
/// Rust driver's kernel from `RUST_KERNEL_IMAGE` (skipped without it).
#[test]
fn live_replay_matches_the_fixtures() {
    if std::env::var_os("BINDER_VM").is_none_or(|v| v != "1") {
        eprintln!("skipped: set BINDER_VM=1 to boot QEMU (run ci/kernel-vm.sh once first)");
        return;
    }
    let workspace = root().join("..");
    let env_or =
        |var: &str, default: PathBuf| std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    let executor = env_or("BINDER_VM_EXECUTOR", Kernel::static_executor(&workspace));
    let c = match std::env::var_os("BINDER_VM_KERNEL") {
        Some(image) => Kernel {
            driver: Driver::C,
            image: image.into(),
            module: std::env::var_os("BINDER_VM_MODULE").map(PathBuf::from),
            executor: executor.clone(),
        },
        None => Kernel::c_from_cache(&workspace).unwrap_or_else(|e| panic!("{e}")),
    };
    let mut kernels = vec![
        (c.clone(), "c-7.3.4-examples.jsonl"),
        (c, "c-7.3.4-new-commands.jsonl"),
    ];
    if let Some(image) = std::env::var_os("RUST_KERNEL_IMAGE") {
        let rust = Kernel {
            driver: Driver::Rust,
            image: image.into(),
            module: None,
            executor,
        };
        kernels.push((rust.clone(), "rust-7.3.4-examples.jsonl"));
        kernels.push((rust, "rust-7.3.4-new-commands.jsonl"));
    }
    for (kernel, fixture_file) in kernels {
        let live = replay_with(&kernel, &examples_of(fixture_file), &Options::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .traces;
        complete_but_empty_reads(&live);
        let recorded = runs(kernel.driver, fixture_file);
        for (l, r) in live.iter().zip(&recorded) {
            for (i, (ls, rs)) in l.steps.iter().zip(&r.steps).enumerate() {
                assert_eq!(
                    ls.observed, rs.observed,
                    "{} step {i} `{}`",
                    l.name, ls.step
                );
                assert_eq!(
                    ls.snapshot, rs.snapshot,
                    "{} step {i} `{}`",
                    l.name, ls.step
                );
            }
        }
    }
}

#[test]
fn the_captured_examples_agree_with_the_models() {
    for (driver, file) in [
        (Driver::C, "c-7.3.4-examples.jsonl"),
        (Driver::Rust, "rust-7.3.4-examples.jsonl"),
    ] {
        for run in runs(driver, file) {
            let m = binder_vm::compare::against_model(&run, driver);
            assert!(m.is_empty(), "{driver:?} {}: {m:?}", run.name);
        }
    }
}

/// The captured run of `fixtures/<name>` on the C driver.
fn c_fixture_run(name: &str, results: &str) -> TraceRun {
    let program = program::parse(&fixture(name)).unwrap();
    let (mut runs, _) = parse_boot(
        Driver::C,
        &[(name.to_string(), program)],
        &fixture(results),
        "",
        Duration::ZERO,
    )
    .unwrap();
    runs.remove(0)
}

#[test]
fn a_line_the_rate_limit_dropped_is_no_difference_when_the_kernel_counts_it() {
    // p1's eleven one-way transactions queued behind the first, unfreed,
    // die with the manager: eleven "undelivered transaction" lines through
    // binder_debug (binder_cleanup_transaction, binder.c:1774-1776), ten
    // printed, the eleventh dropped; the executor's flush then makes the
    // kernel say "binder_debug: 1 callbacks suppressed".
    let run = c_fixture_run("rate-limit.trace", "c-7.3.4-rate-limit.jsonl");
    let exit = run.steps.last().unwrap();
    let undelivered = |log: &[Log]| {
        log.iter()
            .filter(|l| **l == Log::UndeliveredTransaction)
            .count()
    };
    assert_eq!(undelivered(&exit.observed.log), 10, "the burst");
    assert_eq!(exit.full_limits, [klog::Limit::Debug]);
    let reported: Vec<&Class> = run.flush_log.iter().map(|l| &l.class).collect();
    assert!(
        reported.contains(&&Class::Suppressed {
            site: "binder_debug".into(),
            count: 1
        }),
        "{reported:?}"
    );
    assert_eq!(
        binder_vm::compare::against_model(&run, Driver::C),
        [],
        "the model's eleventh line is the one the kernel dropped"
    );

    let mut unreported = run.clone();
    unreported
        .flush_log
        .retain(|l| !matches!(l.class, Class::Suppressed { .. }));
    let m = binder_vm::compare::against_model(&unreported, Driver::C);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].what.contains("the kernel reported 0 suppressed"),
        "a drop the kernel never reports: {m:?}"
    );

    let mut room_left = run.clone();
    room_left.steps.last_mut().unwrap().full_limits.clear();
    let m = binder_vm::compare::against_model(&room_left, Driver::C);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].what
            .contains("binder_debug had not printed its 10 lines"),
        "a missing line while the window had room: {m:?}"
    );
}

#[test]
fn reading_the_c_drivers_debug_text_queues_node_work_and_the_model_knows() {
    // p0's node 1 is held only by the local strong ref of the buffer p1
    // sent to it: each reading of p0's debugfs text after a step queues
    // its work again (print_binder_proc, binder.c:6654-6666), and p0's
    // next drain finds it empty and fails with EAGAIN.
    let run = &c_fixture_run("debugfs-read.trace", "c-7.3.4-debugfs-read.jsonl");
    for step in 3..run.steps.len() {
        assert!(
            run.steps[step]
                .observed
                .log
                .contains(&Log::IoctlFailed(Errno::Again)),
            "step {step}: p0's drain fails with EAGAIN"
        );
    }
    let m = binder_vm::compare::against_model(run, Driver::C);
    assert!(m.is_empty(), "{m:?}");
}

/// `triage real-kernel --from-raw`: a trace's saved records give the same
/// run without a boot, whatever its index in the boot was.
#[test]
fn a_trace_parsed_again_from_its_records_is_the_same_run() {
    for (driver, file) in [
        (Driver::C, "c-7.3.4-examples.jsonl"),
        (Driver::Rust, "rust-7.3.4-examples.jsonl"),
    ] {
        let all = runs(driver, file);
        assert!(all.len() > 1);
        for run in &all {
            let again =
                binder_vm::replay::reparse(driver, &run.name, &run.program, &run.raw).unwrap();
            assert_eq!(
                format!("{:?}", (&again.steps, &again.begin_log, &again.flush_log)),
                format!("{:?}", (&run.steps, &run.begin_log, &run.flush_log)),
                "{driver:?} {}",
                run.name
            );
            assert_eq!(
                format!("{:?}", (&again.end_log, again.ms, &again.error)),
                format!("{:?}", (&run.end_log, run.ms, &run.error))
            );
        }
    }
}

/// The extended error `command` `param`, with its id set.
fn ee(command: u32, param: i32) -> Option<ExtendedError> {
    Some(ExtendedError {
        id_set: true,
        command,
        param,
    })
}

#[test]
fn new_command_examples_parse_completely() {
    for (driver, file) in [
        (Driver::C, "c-7.3.4-new-commands.jsonl"),
        (Driver::Rust, "rust-7.3.4-new-commands.jsonl"),
    ] {
        let runs = runs(driver, file);
        complete_but_empty_reads(&runs);
        for r in &runs {
            assert!(!r.log_may_be_incomplete, "{driver:?} {}", r.name);
            for (i, s) in r.steps.iter().enumerate() {
                // Every command that made an ioctl but thread-exit and exit
                // has its thread's extended error; the others have none.
                let made_ioctl = s.observed.ret != Some(Ret::Skipped)
                    && !matches!(s.step.command, Command::ThreadExit | Command::Exit);
                assert_eq!(s.observed.ee.is_some(), made_ioctl, "{} step {i}", r.name);
            }
        }
    }
}

/// Two-way calls, replies, threads and loopers on the C driver (7.3.4).
#[test]
fn c_observations_of_calls_and_threads() {
    let runs = runs(Driver::C, "c-7.3.4-new-commands.jsonl");
    // The caller reads nothing until the reply: BR_TRANSACTION_COMPLETE is
    // deferred (binder_enqueue_deferred_thread_work_ilocked).
    let t = trace(&runs, "18-");
    assert_eq!(reads(t, 1, 0), ["call handle 1"]);
    assert!(reads(t, 1, 1).is_empty());
    assert_eq!(
        reads(t, 2, 1),
        [
            "reply handle 1",
            "transaction-complete",
            "increfs 1",
            "acquire 1"
        ]
    );
    assert_eq!(
        t.steps[2].snapshot.procs[1].buffers, 1,
        "the reply's buffer"
    );
    // The nested call goes to the waiting caller thread itself.
    assert_eq!(
        reads(trace(&runs, "19-"), 2, 1),
        ["call", "transaction-complete", "increfs 1", "acquire 1"]
    );
    // A reply with no transaction, then from a thread whose last
    // transaction is its own call: EPROTO in the extended error.
    let t = trace(&runs, "20-");
    assert_eq!(t.steps[0].observed.ee, ee(br_code::FAILED_REPLY, -71));
    assert_eq!(
        t.steps[0].observed.log,
        [Log::TransactionFailed, Log::ReplyNoStack]
    );
    assert_eq!(t.steps[3].observed.ee, ee(br_code::FAILED_REPLY, -71));
    assert_eq!(
        t.steps[3].observed.log,
        [Log::TransactionFailed, Log::ReplyBadStack]
    );
    // The caller's thread exited: the reply has no target.
    let t = trace(&runs, "21-");
    assert_eq!(t.steps[2].observed.ee, None, "no ee after thread-exit");
    assert_eq!(
        t.steps[3].observed.log,
        [Log::TransactionFailed, Log::ReplyTargetGone]
    );
    assert_eq!(reads(t, 3, 0), ["transaction-complete"]);
    // A call from a thread that waits for its reply.
    let t = trace(&runs, "22-");
    assert_eq!(t.steps[2].observed.ee, ee(br_code::FAILED_REPLY, -71));
    assert_eq!(
        t.steps[2].observed.log,
        [Log::TransactionFailed, Log::CallBadStack]
    );
    assert_eq!(reads(t, 5, 1), ["t1:reply", "t1:transaction-complete"]);
    // BR_SPAWN_LOOPER once max-threads allows one.
    assert_eq!(
        reads(trace(&runs, "23-"), 2, 0),
        ["transaction", "spawn-looper"]
    );
    let t = trace(&runs, "24-");
    for step in 0..3 {
        assert_eq!(t.steps[step].observed.log, [Log::LooperMisuse], "{step}");
    }
    // A thread that is not a looper takes the process's work (and the
    // driver says so).
    let t = trace(&runs, "25-");
    assert_eq!(reads(t, 3, 0), ["t1:transaction"]);
    assert_eq!(t.steps[3].observed.log, [Log::NotALooper]);
    let t = trace(&runs, "26-");
    assert_eq!(reads(t, 2, 1), ["transaction-complete", "dead-reply"]);
    assert_eq!(reads(t, 4, 0), ["call"]);
    assert_eq!(t.steps[4].observed.log, [Log::NotALooper]);
    let t = trace(&runs, "36-");
    assert_eq!(reads(t, 3, 0), ["t1:transaction"]);
    assert_eq!(reads(t, 5, 0), ["transaction"]);
    assert_eq!(
        reads(trace(&runs, "38-"), 3, 1),
        ["t1:reply", "t1:transaction-complete"]
    );
}

/// Freezing, node debug info, the extended error and refused commands on
/// the C driver (7.3.4).
#[test]
fn c_observations_of_freezing_and_the_new_ioctls() {
    let runs = runs(Driver::C, "c-7.3.4-new-commands.jsonl");
    let t = trace(&runs, "27-");
    assert_eq!(t.steps[2].observed.ret, Some(Ret::Err(Errno::Again)));
    assert_eq!(t.steps[3].observed.ret, Some(Ret::Err(Errno::Again)));
    assert_eq!(t.steps[5].observed.ret, Some(Ret::Ok));
    assert_eq!(t.steps[7].observed.ee, ee(br_code::FROZEN_REPLY, 0));
    assert_eq!(reads(t, 7, 1), ["frozen-reply"]);
    assert_eq!(
        t.steps[7].observed.log,
        [Log::TransactionFailed, Log::FrozenProcess]
    );
    let frozen = |sync_recv, async_recv| {
        Some(Ret::FrozenInfo {
            sync_recv,
            async_recv,
        })
    };
    assert_eq!(t.steps[8].observed.ret, frozen(1, 0));
    assert_eq!(t.steps[10].observed.ret, frozen(0, 0));
    // An exited process has no pid in the driver.
    assert_eq!(t.steps[15].observed.ret, Some(Ret::Err(Errno::Inval)));
    assert_eq!(t.steps[16].observed.ret, Some(Ret::Err(Errno::Inval)));
    let t = trace(&runs, "28-");
    assert_eq!(reads(t, 2, 1), ["frozen-binder 7 0"]);
    assert_eq!(reads(t, 3, 1), ["frozen-binder 7 1"]);
    assert_eq!(reads(t, 4, 1), ["frozen-binder 7 0"]);
    assert_eq!(reads(t, 7, 1), ["clear-freeze-done 7"]);
    assert!(t.steps[9]
        .observed
        .log
        .contains(&Log::FreezeInvalidRef { request: true }));
    let t = trace(&runs, "29-");
    assert!(reads(t, 2, 1).contains(&"pending-frozen".to_string()));
    assert_eq!(t.steps[5].observed.ret, frozen(2, 1));
    assert_eq!(reads(t, 7, 0), ["transaction handle 3"], "the update");
    let t = trace(&runs, "30-");
    assert_eq!(
        t.steps[1].observed.ret,
        Some(Ret::NodeDebug {
            ptr: 5,
            cookie: 9,
            has_strong: true,
            has_weak: true
        })
    );
    let t = trace(&runs, "32-");
    assert_eq!(t.steps[0].observed.ret, Some(Ret::Version(8)));
    assert_eq!(
        t.steps[2].observed.ret,
        Some(Ret::Extended(ExtendedError::NONE))
    );
    assert_eq!(t.steps[3].observed.ee, ee(br_code::FAILED_REPLY, -22));
    // A failed reply is the caller's extended error.
    let t = trace(&runs, "33-");
    assert_eq!(
        t.steps[3].observed.ret,
        Some(Ret::Extended(ee(br_code::FAILED_REPLY, -22).unwrap()))
    );
    let t = trace(&runs, "35-");
    for step in 0..4 {
        assert_eq!(t.steps[step].observed.ret, Some(Ret::Err(Errno::Inval)));
    }
    assert!(t.steps[2].observed.log.contains(&Log::UnsupportedCommand));
    let t = trace(&runs, "39-");
    assert_eq!(reads(t, 3, 1), ["t1:frozen-binder 7 0"]);
}

/// Where the Rust driver answers the new commands otherwise (7.3.4).
#[test]
fn rust_differs_on_the_new_commands() {
    let runs = runs(Driver::Rust, "rust-7.3.4-new-commands.jsonl");
    // EINVAL where C says EPROTO; a reply from a thread whose last
    // transaction is its own call is "no transaction stack".
    let t = trace(&runs, "20-");
    assert_eq!(t.steps[0].observed.ee, ee(br_code::FAILED_REPLY, -22));
    assert_eq!(t.steps[3].observed.ee, ee(br_code::FAILED_REPLY, -22));
    assert_eq!(
        t.steps[3].observed.log,
        [Log::TransactionFailed, Log::ReplyNoStack]
    );
    assert_eq!(
        trace(&runs, "22-").steps[2].observed.ee,
        ee(br_code::FAILED_REPLY, -22)
    );
    // A reply to a thread that exited: no line.
    assert!(trace(&runs, "21-").steps[3].observed.log.is_empty());
    assert!(trace(&runs, "24-")
        .steps
        .iter()
        .all(|s| s.observed.log.is_empty()));
    // A thread that is not a looper does not take the process's work.
    let t = trace(&runs, "25-");
    assert!(reads(t, 3, 0).is_empty());
    assert_eq!(reads(t, 4, 0), ["transaction", "transaction-complete"]);
    let t = trace(&runs, "26-");
    assert!(reads(t, 4, 0).is_empty());
    assert_eq!(t.steps[5].observed.ee, ee(br_code::FAILED_REPLY, -22));
    // A call to a frozen process: no extended error, no line.
    let t = trace(&runs, "27-");
    assert_eq!(t.steps[7].observed.ee, Some(ExtendedError::NONE));
    assert!(t.steps[7].observed.log.is_empty());
    // Freezing a pid no process has.
    assert_eq!(t.steps[15].observed.ret, Some(Ret::Ok));
    assert_eq!(t.steps[16].observed.ret, Some(Ret::Err(Errno::Inval)));
    // ENOENT where C says EINVAL.
    assert_eq!(
        trace(&runs, "32-").steps[3].observed.ee,
        ee(br_code::FAILED_REPLY, -2)
    );
    assert_eq!(
        trace(&runs, "33-").steps[3].observed.ret,
        Some(Ret::Extended(ee(br_code::FAILED_REPLY, -2).unwrap()))
    );
    // The manager's node work left on the thread that set it is moved to
    // the process at thread-exit, and reads as nothing.
    let t = trace(&runs, "36-");
    assert_eq!(t.steps[2].observed.log, [Log::IoctlFailed(Errno::Again)]);
    assert_eq!(reads(t, 5, 0), ["t1:transaction"]);
    let t = trace(&runs, "39-");
    assert!(reads(t, 3, 1).is_empty());
    assert_eq!(
        t.steps[5].observed.log,
        [Log::UndeliveredFreeze, Log::UndeliveredFreeze]
    );
}
