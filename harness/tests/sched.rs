//! The scheduler replays exactly, and finds what it is for.

use idpool_harness::sched::{self, ByteChooser, Decision, Pool, Program, Replay, ThreadOp};
use idpool_harness::seeds;

#[test]
fn same_input_same_schedule() {
    for seed in 0..500 {
        let data = seeds::input(seed);
        let first = sched::concurrent_resize(&data);
        let second = sched::concurrent_resize(&data);
        assert_eq!(first, second, "seed {seed}");
    }
}

#[test]
fn a_recorded_schedule_replays_to_the_same_run() {
    for seed in 0..500 {
        let data = seeds::input(seed);
        let Some((program, u)) = sched::decode(&data) else {
            continue;
        };
        let recorded = sched::run(&program, &mut ByteChooser::new(u));
        let decisions: Vec<Decision> = recorded
            .schedule
            .0
            .iter()
            .map(|s| Decision {
                thread: s.thread,
                fail: s.failed,
            })
            .collect();
        let replayed = sched::run(&program, &mut Replay(decisions.iter()));
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
        &program,
        &mut ByteChooser::new(arbitrary::Unstructured::new(&bytes)),
    );
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
        &program,
        &mut ByteChooser::new(arbitrary::Unstructured::new(&bytes)),
    );
    assert_eq!(
        out.schedule.to_string(),
        "t1:start t1:alloc-ref t1:pick t1:grow-alloc t0:start…pick (×388) t1:grow-commit"
    );
    assert_eq!(out.grows, 2, "t0 grows twice; t1's stale grow is ignored");
}
