//! The scheduler replays exactly, and finds what it is for.

use idpool_harness::sched::{ByteChooser, Decision, Replay};
use idpool_harness::targets::concurrent_resize::{self as sched, Pool, Program, ThreadOp};
use idpool_harness::{history, seeds};

/// The target these runs are for.
const TARGET: &str = "concurrent_resize";

#[test]
fn same_input_same_schedule() {
    for seed in 0..500 {
        let data = seeds::input(seed);
        let first = sched::run_bytes(TARGET, &data);
        let second = sched::run_bytes(TARGET, &data);
        assert_eq!(first, second, "seed {seed}");
        // A failure may only be a known upstream bug of a historical version.
        if let Err(f) = first {
            assert!(history::Finding::of(&f).is_some(), "seed {seed}: {f}");
        }
    }
}

#[test]
fn a_recorded_schedule_replays_to_the_same_run() {
    for seed in 0..500 {
        let data = seeds::input(seed);
        let Some((program, u)) = sched::decode(&data) else {
            continue;
        };
        let recorded = match sched::run(TARGET, &program, &mut ByteChooser::new(u)) {
            Ok(recorded) => recorded,
            Err(f) if history::Finding::of(&f).is_some() => continue,
            Err(f) => panic!("seed {seed}: {f}"),
        };
        let decisions: Vec<Decision> = recorded
            .schedule
            .0
            .iter()
            .map(|s| Decision {
                thread: s.thread,
                fail: s.failed,
            })
            .collect();
        let replayed = sched::run(TARGET, &program, &mut Replay(decisions.iter())).unwrap();
        assert_eq!(recorded, replayed, "seed {seed}: {program:?}");
    }
}

#[test]
fn two_threads_insert_one_node_across_a_grow() {
    // 63 handles fill the pool; both threads miss node 1 in their first
    // lookup, both find the pool full, both grow. The second commit is stale,
    // and the second insert must find the node the first one inserted.
    let program = Program {
        pool: Pool::IdPool,
        version: idpool::Version::RustMainline,
        prefill: 63,
        keep: 63,
        threads: vec![
            vec![ThreadOp::Insert {
                node: 1,
                manager: false
            }];
            2
        ],
    };
    // t0 start, t1 start, t0 alloc-ref, t1 alloc-ref, t0 pick, t1 pick,
    // t0 grow-alloc, t1 grow-alloc, t0 grow-commit, t1 grow-commit.
    let bytes = [0u8, 1, 0, 1, 0, 1, 0, 1, 0, 0];
    let out = sched::run(
        TARGET,
        &program,
        &mut ByteChooser::new(arbitrary::Unstructured::new(&bytes)),
    )
    .unwrap();
    assert_eq!(
        out.schedule.to_string(),
        "t0:start t1:start t0:alloc-ref t1:alloc-ref t0:pick t1:pick \
         t0:grow-alloc t1:grow-alloc t0:grow-commit t1:grow-commit"
    );
    assert_eq!(out.grows, 1, "the second grow is stale and ignored");
}

#[test]
fn a_burst_holds_a_thread_in_its_window() {
    // t1 finds the 64-id pool full and allocates a 128-id map; then one
    // byte lets t0 run all 128 of its inserts (growing to 128, then 256);
    // then t1 commits its stale 128-id map, which must be ignored.
    let program = Program {
        pool: Pool::IdPool,
        version: idpool::Version::RustMainline,
        prefill: 63,
        keep: 63,
        threads: vec![
            vec![ThreadOp::InsertMany(128)],
            vec![ThreadOp::Insert {
                node: 1,
                manager: false,
            }],
        ],
    };
    let bytes = [1u8, 1, 1, 1, 0b1000];
    let out = sched::run(
        TARGET,
        &program,
        &mut ByteChooser::new(arbitrary::Unstructured::new(&bytes)),
    )
    .unwrap();
    assert_eq!(
        out.schedule.to_string(),
        "t1:start t1:alloc-ref t1:pick t1:grow-alloc t0:start…pick (×388) t1:grow-commit"
    );
    assert_eq!(out.grows, 2, "t0 grows twice; t1's stale grow is ignored");
}

/// The process dies while an insert has dropped the lock (after
/// `alloc-ref`): at its relock the Rust driver refuses with `ESRCH`
/// (`insert_or_update_handle` checks `is_dead`), the C driver inserts
/// anyway (`binder_get_ref_for_node_olocked` never reads `proc->is_dead`).
/// The run passes either way: the model knows each version's rule, and the
/// events say which happened. A lookup afterwards finds what the model has.
#[test]
fn a_death_in_an_inserts_window_follows_each_versions_rule() {
    use idpool::Version;
    for (pool, version, refused) in [
        (Pool::IdPool, Version::RustMainline, true),
        (Pool::IdPool, Version::RustV1, true),
        (Pool::DBitmap, Version::CMainline, false),
    ] {
        let program = Program {
            pool,
            version,
            prefill: 0,
            keep: 0,
            threads: vec![
                vec![
                    ThreadOp::Insert {
                        node: 1,
                        manager: false,
                    },
                    ThreadOp::Lookup(1),
                ],
                vec![ThreadOp::Kill],
            ],
        };
        // t0 start, t0 alloc-ref (the lock is dropped), t1 kill, then t0.
        let decisions = [0, 0, 1].map(|thread| Decision {
            thread,
            fail: false,
        });
        let out = sched::run(TARGET, &program, &mut Replay(decisions.iter()))
            .unwrap_or_else(|f| panic!("{version}: {f}"));
        let e = out.events();
        assert_eq!(e.killed_in_window, 1, "{version}: {e:?}");
        assert_eq!(e.dead_refused, u32::from(refused), "{version}: {e:?}");
        assert_eq!(e.dead_inserted, u32::from(!refused), "{version}: {e:?}");
        assert_eq!(e.lookups, 1, "{version}: {e:?}");
    }
}
