//! Seeded-random smoke test: no fuzzer needed. Each target runs on many
//! pseudo-random inputs, must not fail, and must reach the paths that make
//! the campaign worth running.

use idpool_harness::{decode, oracle::Policy, pool, seeds, table, Events};

fn run_many(inputs: u64, run: impl Fn(&[u8]) -> Events) -> Events {
    let mut total = Events::default();
    for seed in 0..inputs {
        total.merge(run(&seeds::input(seed)));
    }
    total
}

#[test]
fn pool_ops_reaches_the_interesting_paths() {
    let e = run_many(3000, |d| {
        pool::run::<idpool::IdPool>(Policy::Rust, &decode(d))
    });
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.stale_grow_ignored > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.shrink_refused > 0, "{e:?}");
    assert!(e.shrink_raised_capacity > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.grow_at_ceiling > 0, "{e:?}");
    assert!(e.deep > 0, "{e:?}");
}

#[test]
fn dbitmap_ops_reaches_the_interesting_paths() {
    let e = run_many(3000, |d| {
        pool::run::<idpool::DBitmap>(Policy::C, &decode(d))
    });
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.stale_grow_ignored > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.shrink_refused > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.disabled > 0, "{e:?}");
    assert!(e.deep > 0, "{e:?}");
}

#[test]
fn handle_table_reaches_the_interesting_paths() {
    let e = run_many(3000, |d| table::run(&decode(d)));
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.disabled > 0, "{e:?}");
    assert!(e.scan_fallback > 0, "{e:?}");
    assert!(e.dead_refused > 0, "{e:?}");
}

#[test]
fn concurrent_resize_interleaves_resizes() {
    let e = run_many(3000, idpool_harness::concurrent_resize);
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.interleaved > 0, "{e:?}");
}
