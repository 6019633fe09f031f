//! Mainline's `IdPool` against ours, call by call, on random programs (see
//! `common/lockstep.rs`): every answer and the capacity after every call
//! must agree. Run with and without `--features hardened`.

mod common;

use common::lockstep::{run, Stats};
use idpool::{Gfp, IdPool};
use kernel_idpool::bindings::live_allocs;
use kernel_idpool::KernelIdPool;

const SEEDS: u64 = 200;
const STEPS: usize = 600;

#[test]
fn mainline_and_ours_agree_call_by_call() {
    if common::skip_without_source() {
        return;
    }
    let live = live_allocs();
    let mut total = Stats::default();
    for seed in 0..SEEDS {
        let (mut ours, mut kernel) = if seed % 4 == 3 {
            // Some pools start large, as with_capacity makes them.
            let n = 64 << (seed % 5);
            (
                IdPool::with_capacity(n, Gfp::Kernel).unwrap(),
                KernelIdPool::with_capacity(n, Gfp::Kernel).unwrap(),
            )
        } else {
            (IdPool::new(), KernelIdPool::new())
        };
        match run(&mut ours, &mut kernel, seed, STEPS) {
            Ok(stats) => total += stats,
            Err(d) => panic!("ours vs mainline: {d:?}"),
        }
    }
    println!("{total:?}");
    // The programs went deep: big pools, shrinks back, failures, races.
    assert!(total.max_capacity >= 2048, "{total:?}");
    assert!(total.capacity_changes >= 500, "{total:?}");
    assert!(total.failed_reallocs >= 100, "{total:?}");
    assert!(total.out_of_range >= 500, "{total:?}");
    assert_eq!(live_allocs(), live, "mainline leaked or double-freed a map");
}

/// Mainline against itself is trivially equal; the point is the hardened
/// protocol: both sides panic on the same out-of-range calls in a hardened
/// build, and neither changes.
#[test]
fn mainline_against_mainline() {
    if common::skip_without_source() {
        return;
    }
    for seed in 0..20 {
        let (mut a, mut b) = (KernelIdPool::new(), KernelIdPool::new());
        if let Err(d) = run(&mut a, &mut b, seed, STEPS) {
            panic!("mainline vs mainline: {d:?}");
        }
    }
}

#[test]
fn with_capacity_agrees_including_failures() {
    if common::skip_without_source() {
        return;
    }
    for n in [0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20] {
        for gfp in [Gfp::Kernel, Gfp::Fail] {
            let ours = IdPool::with_capacity(n, gfp).map(|p| p.capacity());
            let kernel = KernelIdPool::with_capacity(n, gfp).map(|p| p.capacity());
            assert_eq!(ours, kernel, "with_capacity({n}, {gfp:?})");
        }
    }
    // Beyond MAX_LEN both refuse without allocating.
    let n = i32::MAX as usize + 1;
    assert!(IdPool::with_capacity(n, Gfp::Kernel).is_err());
    assert!(KernelIdPool::with_capacity(n, Gfp::Kernel).is_err());
}

/// A fault plan set on the thread reaches mainline's allocation.
#[test]
fn thread_fault_plan_reaches_mainline() {
    if common::skip_without_source() {
        return;
    }
    use kernel_idpool::alloc::faults;
    let mut pool = KernelIdPool::new();
    let request = pool.grow_request().unwrap();
    faults::clear();
    faults::fail_next(1);
    assert!(request.realloc(Gfp::Kernel).is_err(), "the planned failure");
    let resizer = request.realloc(Gfp::Kernel).unwrap();
    assert_eq!(resizer.len(), 128);
    pool.grow(resizer);
    assert_eq!(pool.capacity(), 128);
    assert_eq!(faults::last_request().map(|(n, _)| n), Some(128));
}

/// A request's size, read off a `realloc` made to fail, is ours, and the
/// probe leaves nothing behind: no planned failure, no allocation, and a
/// real `realloc` afterwards allocates exactly that size.
#[test]
fn request_sizes_read_without_allocating() {
    if common::skip_without_source() {
        return;
    }
    use kernel_idpool::alloc::faults;
    let live = live_allocs();
    for (n, used) in [(64, 0), (128, 0), (128, 40), (256, 10), (1 << 16, 3)] {
        let mut kernel = KernelIdPool::with_capacity(n, Gfp::Kernel).unwrap();
        let mut ours = IdPool::with_capacity(n, Gfp::Kernel).unwrap();
        for _ in 0..used {
            kernel.find_unused_id(0).unwrap().acquire();
            ours.find_unused_id(0).unwrap().acquire();
        }
        let pairs = [
            (kernel.grow_request(), ours.grow_request(), "grow"),
            (kernel.shrink_request(), ours.shrink_request(), "shrink"),
        ];
        for (k, o, what) in pairs {
            let expected = o.map(|r| r.num_ids());
            assert_eq!(k.as_ref().map(|r| r.num_ids()), expected, "{what} at {n}");
            if let Some(k) = k {
                faults::clear();
                let calls = faults::calls();
                let resizer = k.realloc(Gfp::Kernel).unwrap();
                assert_eq!(Some(resizer.len()), expected, "{what} at {n}");
                assert_eq!(faults::pending(), 0);
                assert!(faults::calls() <= calls + 1);
            }
        }
    }
    assert_eq!(live_allocs(), live, "the probes left an allocation behind");
}
