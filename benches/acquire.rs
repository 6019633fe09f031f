//! What the bitmap buys: the cost of one more handle with `n` live ones, for
//! the legacy linear scan, the Rust `IdPool` and the C `dbitmap`, measured in
//! one run; and the cost of tearing a large pool down, where every release
//! asks `shrink_request`, which looks for the last set bit.
//!
//! Run with `cargo bench --bench acquire`.

use divan::{black_box, Bencher};
use idpool::{DBitmap, Flavour, Gfp, HandleTable, IdPool, LinearScan};

fn main() {
    divan::main();
}

const LIVE: &[u64] = &[10, 100, 1_000, 10_000, 100_000];
const TEARDOWN: usize = 100_000;

/// A table holding handles `1..=n`.
fn table_with<F: Flavour>(n: u64) -> HandleTable<F> {
    let mut table = HandleTable::new();
    for node in 1..=n {
        table.insert_or_update_handle(node, false).unwrap();
    }
    table
}

/// One `insert_or_update_handle` of a new node with `n` live handles (it gets
/// handle `n + 1`), then the decrement that removes it again so that every
/// iteration starts from the same state.
#[divan::bench(types = [LinearScan, IdPool, DBitmap], args = LIVE)]
fn new_handle<F: Flavour>(bencher: Bencher, n: u64) {
    let mut table = table_with::<F>(n);
    let node = u64::MAX;
    bencher.bench_local(|| {
        let handle = table
            .insert_or_update_handle(black_box(node), false)
            .unwrap();
        debug_assert_eq!(handle as u64, n + 1);
        table.decrement(handle).unwrap()
    });
}

/// The pool alone: find and acquire the smallest free id with ids `1..=n`
/// taken, then release it.
#[divan::bench(args = LIVE)]
fn idpool_find_acquire_release(bencher: Bencher, n: u64) {
    let mut pool =
        IdPool::with_capacity((n as usize + 1).next_power_of_two(), Gfp::Kernel).unwrap();
    for _ in 1..=n {
        pool.find_unused_id(1).unwrap().acquire();
    }
    bencher.bench_local(|| {
        let id = pool.find_unused_id(black_box(1)).unwrap().acquire();
        pool.release_id(id);
        id
    });
}

fn full_idpool() -> IdPool {
    let mut pool = IdPool::with_capacity(TEARDOWN.next_power_of_two(), Gfp::Kernel).unwrap();
    for _ in 0..TEARDOWN {
        pool.find_unused_id(0).unwrap().acquire();
    }
    pool
}

fn full_dbitmap() -> DBitmap {
    let mut dmap = DBitmap::init(Gfp::Kernel);
    while dmap.nbits() < TEARDOWN {
        let nbits = dmap.grow_nbits();
        dmap.grow(DBitmap::zalloc(nbits, Gfp::Kernel), nbits);
    }
    for _ in 0..TEARDOWN {
        dmap.acquire_next_zero_bit(0).unwrap();
    }
    dmap
}

fn order(lifo: bool) -> Box<dyn Iterator<Item = usize>> {
    if lifo {
        Box::new((0..TEARDOWN).rev())
    } else {
        Box::new(0..TEARDOWN)
    }
}

/// Releases every id in `order`, each followed by `shrink_request` and, when
/// it says so, the shrink (as Binder does on every last reference drop).
fn teardown<P>(
    bencher: Bencher,
    order_name: &str,
    full: fn() -> P,
    release_and_shrink: fn(&mut P, usize),
) {
    let lifo = order_name == "lifo";
    bencher.with_inputs(full).bench_local_values(|mut pool| {
        for id in order(lifo) {
            release_and_shrink(&mut pool, id);
        }
        pool
    });
}

/// Release 100k ids one by one, each followed by `shrink_request` and, when
/// it says so, the shrink.
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn idpool_teardown(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_idpool, |pool, id| {
        pool.release_id(id);
        if let Some(request) = pool.shrink_request() {
            pool.shrink(request.realloc(Gfp::Kernel).unwrap());
        }
    });
}

/// The same teardown for the C flavour.
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn dbitmap_teardown(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_dbitmap, |dmap, id| {
        dmap.clear_bit(id);
        let nbits = dmap.shrink_nbits();
        if nbits != 0 {
            dmap.shrink(DBitmap::zalloc(nbits, Gfp::Kernel), nbits);
        }
    });
}

/// The baseline for the two above: the releases alone, never asking to shrink.
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn idpool_teardown_without_shrink(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_idpool, |pool, id| {
        pool.release_id(id)
    });
}
