//! The `concurrent_resize` runner's unit tests: each version's reaction to
//! a corrupted pool as its model expects it, and the findings a table
//! that goes wrong behind the model's back must be.

use super::program::{CorruptBit, Pool, Program, ThreadOp};
use super::run::run;
use super::sim::Sim;
use super::CONCURRENT_RESIZE;
use crate::check::Check;
use crate::events::Events;
use crate::registry::{parse_trace, Target};
use crate::sched::Replay;
use crate::trace::Trace;
use idpool::{Corruption, IdPool, Version};

/// The target these tests run as.
const TARGET: &str = "concurrent_resize";

/// A trace of this target.
fn parse(text: &str) -> Result<Trace, crate::trace::ParseError> {
    static HERE: [&dyn Target; 1] = [&CONCURRENT_RESIZE];
    parse_trace(text, &HERE)
}

/// Handles 1 to 3, then one thread: the bit of handle 1 is cleared,
/// and two inserts follow (the pool offers 1 again).
fn cleared_then_inserts(pool: &str, version: &str) -> Events {
    let text = format!(
        "idpool-trace v1\ntarget concurrent_resize\npool {pool}\nversion {version}\n\
         prefill 3\nkeep 3\nthread corrupt clear #0; insert n0; insert n1\nschedule\n"
    );
    let trace = parse(&text).expect("a valid trace");
    trace
        .check()
        .unwrap_or_else(|f| panic!("{version}: {}", f.message))
}

#[test]
fn rust_mainline_warns_and_refuses_as_its_model_expects() {
    let e = cleared_then_inserts("idpool", "rust-mainline");
    assert_eq!(e.corrupted, 1, "{e:?}");
    assert_eq!(e.mismatch_einval, 1, "{e:?}");
    assert_eq!((e.mismatch_search_on, e.mismatch_crash), (0, 0), "{e:?}");
}

#[test]
fn rust_first_posting_logs_and_searches_on_as_its_model_expects() {
    let e = cleared_then_inserts("fastpool", "rust-v1");
    assert_eq!(e.mismatch_search_on, 1, "{e:?}");
    assert_eq!((e.mismatch_einval, e.mismatch_crash), (0, 0), "{e:?}");
}

#[test]
fn c_crashes_as_its_model_expects_after_the_corruption() {
    let e = cleared_then_inserts("dbitmap", "c-mainline");
    assert_eq!(e.mismatch_crash, 1, "{e:?}");
    assert_eq!((e.mismatch_einval, e.mismatch_search_on), (0, 0), "{e:?}");
}

/// A set bit with no handle keeps the pool from shrinking below it:
/// handles 1 to 32 in 128 ids, then the release of 32 shrinks to 64,
/// unless the highest free id's bit was set first (the capacity model
/// reads the highest set bit, not the highest handle).
#[test]
fn a_set_bit_holds_the_capacity() {
    for (pool, version) in [("idpool", "rust-mainline"), ("dbitmap", "c-mainline")] {
        let run = |ops: &str| {
            let text = format!(
                "idpool-trace v1\ntarget concurrent_resize\npool {pool}\nversion {version}\n\
                 prefill 126\nkeep 32\nthread {ops}release-prefill #0\nschedule\n"
            );
            let e = parse(&text).unwrap().check();
            e.unwrap_or_else(|f| panic!("{pool}: {}", f.message))
        };
        let plain = run("");
        assert_eq!((plain.corrupted, plain.shrink_committed), (0, 1), "{pool}");
        let held = run("corrupt set-high #0; ");
        assert_eq!((held.corrupted, held.shrink_committed), (1, 0), "{pool}");
    }
}

#[test]
fn the_text_form_round_trips_and_refuses_what_it_cannot_say() {
    use crate::text::{OpText, Text};
    for op in [
        ThreadOp::Corrupt(CorruptBit::Clear(3)),
        ThreadOp::Corrupt(CorruptBit::Set(0)),
        ThreadOp::Corrupt(CorruptBit::SetHigh(255)),
    ] {
        let text = Text(&op).to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(ThreadOp::parse_text(&words), Ok(op), "{text}");
    }
    for bad in [
        "corrupt",
        "corrupt clear",
        "corrupt flip #1",
        "corrupt set #256",
    ] {
        let words: Vec<&str> = bad.split_whitespace().collect();
        let err = ThreadOp::parse_text(&words).expect_err(bad);
        assert!(!err.contains('\n'), "{bad}: {err}");
    }
}

/// A corruption the model did not make is a finding: the same program,
/// once with the bit of handle 1 cleared behind the model's back.
#[test]
fn a_corruption_the_model_did_not_make_is_a_finding() {
    let program = one_insert_after(vec![]);
    assert!(run(TARGET, &program, &mut Replay([].iter())).is_ok());
    let mut sim = Sim::<IdPool>::new(TARGET, &program).unwrap();
    sim.corrupt_behind_the_models_back(Corruption::ClearBit(1));
    let failure = sim.run(&mut Replay([].iter())).expect_err("found");
    assert_eq!(failure.check, Check::PoolBits, "{failure:?}");
}

/// The end of a run reads the table's own `is_dead` against the
/// model's: a table that thinks its process died, where no thread
/// killed it, is a finding (and a killed one, beside a model that saw
/// the kill, is not).
#[test]
fn the_end_of_a_run_holds_the_table_to_its_models_death() {
    let lookups = |ops: Vec<ThreadOp>| Program {
        threads: vec![ops],
        ..one_insert_after(vec![])
    };
    let program = lookups(vec![ThreadOp::Lookup(0)]);
    assert!(run(TARGET, &program, &mut Replay([].iter())).is_ok());
    let mut sim = Sim::<IdPool>::new(TARGET, &program).unwrap();
    sim.kill_behind_the_models_back();
    let failure = sim.run(&mut Replay([].iter())).expect_err("found");
    assert_eq!(failure.check, Check::Death, "{failure:?}");
    assert!(
        failure
            .message
            .contains("at the end: the table says the process is dead, the model alive"),
        "{}",
        failure.message
    );
    let killed = lookups(vec![ThreadOp::Kill, ThreadOp::Lookup(0)]);
    assert!(run(TARGET, &killed, &mut Replay([].iter())).is_ok());
}

/// A warning the model does not expect is a finding: Rust mainline's
/// table, modelled with the first posting's reaction (which logs
/// without `WARN_ON` and searches on).
#[test]
fn a_reaction_the_model_does_not_expect_is_a_finding() {
    let program = one_insert_after(vec![ThreadOp::Corrupt(CorruptBit::Clear(0))]);
    assert!(run(TARGET, &program, &mut Replay([].iter())).is_ok());
    let mut sim = Sim::<IdPool>::new(TARGET, &program).unwrap();
    sim.corruption_rules(crate::history::rules(Version::RustV1));
    let failure = sim.run(&mut Replay([].iter())).expect_err("found");
    assert_eq!(failure.check, Check::Warning, "{failure:?}");
    assert!(
        failure.message.contains("warn_on: true"),
        "{}",
        failure.message
    );
}

/// A table whose pick met a mismatch and left the mismatch id's bit
/// clear is caught at that pick's lock release, not only at the next
/// full check: the release of that handle that follows would clear
/// the bit in the record too and leave no trace. Handles 1 to 6, the
/// bit of 3 cleared, an insert (the pool offers 3: a mismatch, the
/// bit is taken, `EINVAL`), then the release of handle 3 and an
/// insert. Mismatch id 3 is no boundary and no id the insert returned.
#[test]
fn a_mismatch_bit_the_table_left_clear_is_caught_at_its_pick() {
    let program = Program {
        pool: Pool::IdPool,
        version: Version::RustMainline,
        prefill: 6,
        keep: 6,
        threads: vec![vec![
            ThreadOp::Corrupt(CorruptBit::Clear(2)),
            ThreadOp::Insert {
                node: 0,
                manager: false,
            },
            ThreadOp::ReleasePrefill(3),
            ThreadOp::Insert {
                node: 1,
                manager: false,
            },
        ]],
    };
    let e = run(TARGET, &program, &mut Replay([].iter())).expect("mainline passes");
    assert_eq!((e.corruptions, e.mismatch_einval), (1, 1), "{e:?}");
    // Steps: the corruption, then the insert's start, its allocation
    // and its pick (step 3).
    let mut sim = Sim::<IdPool>::new(TARGET, &program).unwrap();
    sim.wrong_bit_after_step(3, Corruption::ClearBit(3));
    let failure = sim.run(&mut Replay([].iter())).expect_err("found");
    assert_eq!(
        (&failure.check, failure.step),
        (&Check::PoolBits, 4),
        "{failure:?}"
    );
    assert!(
        failure.message.contains("(3, true, false)"),
        "{}",
        failure.message
    );
}

/// Handles 1 to 3 on Rust mainline's `IdPool`, one thread: `before`,
/// then an insert.
fn one_insert_after(mut before: Vec<ThreadOp>) -> Program {
    before.push(ThreadOp::Insert {
        node: 0,
        manager: false,
    });
    Program {
        pool: Pool::IdPool,
        version: Version::RustMainline,
        prefill: 3,
        keep: 3,
        threads: vec![before],
    }
}
