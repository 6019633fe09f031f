//! Every interleaving of two threads on a `SharedHandleTable`, explored by
//! loom. Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release --test loom
//! ```
#![cfg(loom)]

use idpool::{DBitmap, Flavour, IdPool, SharedHandleTable};
use loom::sync::Arc;
use loom::thread;

/// Explores with a preemption bound: the protocol has at most four lock
/// releases per operation, so three preemptions cover every window.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// A table holding handles `1..=n`.
fn table_with<F: Flavour>(n: u64) -> Arc<SharedHandleTable<F>> {
    let table = Arc::new(SharedHandleTable::new());
    for node in 1..=n {
        table.insert_or_update_handle(1000 + node, false).unwrap();
    }
    table
}

fn one_node_from_two_threads_across_a_grow<F: Flavour>() {
    model(|| {
        // 63 handles fill the 64-id pool: both inserts must grow.
        let table = table_with::<F>(63);
        let other = {
            let table = Arc::clone(&table);
            thread::spawn(move || table.insert_or_update_handle(7, false).unwrap())
        };
        let mine = table.insert_or_update_handle(7, false).unwrap();
        let theirs = other.join().unwrap();
        assert_eq!(mine, theirs, "one node, one handle");
        assert_eq!(mine, 64);
        table.check_invariants().unwrap();
        table.with_refs(|refs| {
            assert_eq!(refs.by_handle()[&64].count, 2);
            assert_eq!(refs.pool().capacity(), 128);
        });
    });
}

#[test]
fn one_node_from_two_threads_across_a_grow_idpool() {
    one_node_from_two_threads_across_a_grow::<IdPool>();
}

#[test]
fn one_node_from_two_threads_across_a_grow_dbitmap() {
    one_node_from_two_threads_across_a_grow::<DBitmap>();
}

#[test]
fn a_shrink_allocated_before_inserts_is_revalidated_idpool() {
    a_shrink_allocated_before_inserts_is_revalidated::<IdPool>();
}

/// The C release path decides in a critical section of its own
/// (`try_shrink_dmap`) and commits in a third: the inserts may land before
/// the decision or between it and the commit.
#[test]
fn a_shrink_allocated_before_inserts_is_revalidated_dbitmap() {
    a_shrink_allocated_before_inserts_is_revalidated::<DBitmap>();
}

fn a_shrink_allocated_before_inserts_is_revalidated<F: Flavour>() {
    model(|| {
        // Handles 1..=32 live in a 128-id pool (last bit 32 = 128/4: no
        // shrink). Dropping 32 asks to shrink to 64; meanwhile the other
        // thread inserts 33 nodes, taking ids 32..=64. A shrink committed
        // without re-validation would cut id 64 off.
        let table = table_with::<F>(64);
        for handle in (33..=64).rev() {
            table.decrement(handle).unwrap();
        }
        table.with_refs(|refs| assert_eq!(refs.pool().capacity(), 128));
        let inserter = {
            let table = Arc::clone(&table);
            thread::spawn(move || {
                (0..33)
                    .map(|i| table.insert_or_update_handle(i, false).unwrap())
                    .max()
                    .unwrap()
            })
        };
        table.decrement(32).unwrap();
        let highest = inserter.join().unwrap();
        assert!(
            highest >= 64,
            "33 inserts over ids 1..=31 reach 64, got {highest}"
        );
        table.check_invariants().unwrap();
        table.with_refs(|refs| assert!(refs.pool().capacity() > highest as usize));
    });
}
