use super::*;
use crate::{AllocSite, DBitmap, Faults, Gfp, IdPool};

fn snapshot<F: Flavour>(t: &HandleTable<F>) -> (BTreeMap<u32, RefInfo>, Option<Vec<u32>>, usize) {
    let refs = t.refs();
    (
        refs.by_handle().clone(),
        refs.pool().used_ids(),
        t.capacity(),
    )
}

/// Runs the same checks on every flavour.
macro_rules! for_each_flavour {
    ($($name:ident => $body:ident;)*) => {
        $(mod $name {
            use super::*;
            #[test] fn idpool() { super::$body::<IdPool>() }
            #[test] fn dbitmap() { super::$body::<DBitmap>() }
            #[test] fn linear() { super::$body::<LinearScan>() }
        })*
    };
}

fn manager_gets_zero_and_nobody_else_does<F: Flavour>() {
    let mut t = HandleTable::<F>::new();
    assert_eq!(t.insert_or_update_handle(1, false), Ok(1));
    assert_eq!(t.insert_or_update_handle(2, true), Ok(0));
    t.decrement(0).unwrap();
    for node in 10..200 {
        assert_ne!(t.insert_or_update_handle(node, false), Ok(0), "node {node}");
    }
    assert_eq!(t.insert_or_update_handle(3, true), Ok(0));
    t.refs().check_invariants().unwrap();
}

fn same_node_same_handle<F: Flavour>() {
    let mut t = HandleTable::<F>::new();
    assert_eq!(t.insert_or_update_handle(9, false), Ok(1));
    assert_eq!(t.insert_or_update_handle(9, false), Ok(1));
    assert_eq!(t.increment(1), Ok(1));
    assert_eq!(t.refs().by_handle()[&1].count, 3);
    for _ in 0..3 {
        assert_eq!(t.lookup(9), Some(1));
        t.decrement(1).unwrap();
    }
    assert_eq!(t.lookup(9), None);
    assert_eq!(t.decrement(1), Err(Error::UnknownHandle(1)));
    assert_eq!(t.increment(1), Err(Error::UnknownHandle(1)));
    t.refs().check_invariants().unwrap();
}

fn failed_ref_allocation_changes_nothing<F: Flavour>() {
    let mut t = HandleTable::<F>::new();
    for node in 0..10 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    let before = snapshot(&t);
    t.faults().fail_next(1);
    assert_eq!(t.insert_or_update_handle(99, false), Err(Error::NoMemory));
    assert_eq!(snapshot(&t), before);
    assert_eq!(t.insert_or_update_handle(99, false), Ok(11));
}

fn dead_process_refuses_inserts<F: Flavour>() {
    let mut t = HandleTable::<F>::new();
    t.insert_or_update_handle(1, false).unwrap();
    t.kill();
    let before = snapshot(&t);
    assert_eq!(t.insert_or_update_handle(2, false), Err(Error::DeadProcess));
    assert_eq!(snapshot(&t), before);
    // An existing node still gets its handle, and references can still drop.
    assert_eq!(t.insert_or_update_handle(1, false), Ok(1));
    t.decrement(1).unwrap();
    t.decrement(1).unwrap();
    t.refs().check_invariants().unwrap();
}

fn grows_past_64_and_shrinks_back<F: Flavour>() {
    let mut t = HandleTable::<F>::new();
    for node in 1..=200u64 {
        assert_eq!(t.insert_or_update_handle(node, false), Ok(node as u32));
        t.refs().check_invariants().unwrap();
    }
    for handle in (1..=200u32).rev() {
        t.decrement(handle).unwrap();
        t.refs().check_invariants().unwrap();
    }
    assert!(t.refs().by_handle().is_empty());
}

for_each_flavour! {
    manager => manager_gets_zero_and_nobody_else_does;
    same_node => same_node_same_handle;
    failed_alloc => failed_ref_allocation_changes_nothing;
    dead => dead_process_refuses_inserts;
    grow_shrink => grows_past_64_and_shrinks_back;
}

#[test]
fn idpool_capacity_follows_the_policy_through_the_table() {
    let mut t = HandleTable::<IdPool>::new();
    for node in 1..=63 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    assert_eq!(t.capacity(), 64, "ids 1..=63 fit; 0 is the manager's");
    assert_eq!(t.insert_or_update_handle(64, false), Ok(64));
    assert_eq!(t.capacity(), 128);
    // Release down to the last bit 31 < 128/4: shrink to 64.
    for handle in (33..=64).rev() {
        t.decrement(handle).unwrap();
    }
    assert_eq!(t.capacity(), 128, "last bit 32 is not below 128 / 4");
    t.decrement(32).unwrap();
    assert_eq!(t.capacity(), 64);
}

#[test]
fn idpool_failed_grow_is_enomem_and_changes_nothing() {
    let mut t = HandleTable::<IdPool>::new();
    for node in 1..=63 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    let before = snapshot(&t);
    // The reference's allocation succeeds, the bitmap's fails.
    t.faults().fail_next_at(AllocSite::Grow, 1);
    assert_eq!(t.insert_or_update_handle(64, false), Err(Error::NoMemory));
    assert_eq!(t.faults().pending(), 0);
    assert_eq!(snapshot(&t), before);
}

#[test]
fn dbitmap_failed_grow_falls_back_to_the_linear_scan() {
    let mut t = HandleTable::<DBitmap>::new();
    for node in 1..=63 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    t.faults().fail_next_at(AllocSite::Grow, 1);
    let outcome = t.insert_or_update_handle(64, false);
    assert_eq!(outcome, Ok(64), "the scan still finds the smallest free id");
    assert!(!t.refs().pool().enabled());
    assert_eq!(t.capacity(), 0);
    t.decrement(5).unwrap();
    assert_eq!(t.insert_or_update_handle(100, false), Ok(5));
    assert!(!t.refs().pool().enabled(), "disabled for good");
    t.refs().check_invariants().unwrap();
}

#[test]
fn failed_shrink_allocation_is_ignored() {
    let mut t = HandleTable::<IdPool>::new();
    for node in 1..=128 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    for handle in (65..=128).rev() {
        t.decrement(handle).unwrap();
    }
    assert_eq!(t.capacity(), 256);
    // Releasing 64 leaves last bit 63 < 256 / 4: a shrink to 128 is
    // requested, and its allocation fails. The release still happens.
    t.faults().fail_next(1);
    assert_eq!(t.decrement(64), Ok(64));
    assert_eq!(t.faults().pending(), 0, "the shrink did allocate");
    assert_eq!(t.capacity(), 256);
    assert_eq!(t.lookup(64), None);
    t.refs().check_invariants().unwrap();
    t.decrement(63).unwrap();
    assert_eq!(t.capacity(), 128);
}

#[test]
fn shrink_to_64_needs_no_memory_so_cannot_fail() {
    let mut t = HandleTable::<IdPool>::new();
    for node in 1..=64 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    for handle in (33..=64).rev() {
        t.decrement(handle).unwrap();
    }
    t.faults().fail_next(1);
    t.decrement(32).unwrap();
    assert_eq!(t.capacity(), 64, "an inline bitmap is not an allocation");
}

#[test]
fn two_inserts_of_one_node_interleaved_share_a_handle() {
    // Both threads miss the node in their first lookup, both allocate, then
    // the first inserts; the second must find the node in its second lookup.
    let mut refs = NodeRefs::<IdPool>::new();
    let req = Request::Insert {
        node: 5,
        is_manager: false,
    };
    let (mut a, mut b) = (Operation::new(req), Operation::new(req));
    a.step_locked(&mut refs);
    b.step_locked(&mut refs);
    a.step_unlocked(Gfp::Kernel);
    b.step_unlocked(Gfp::Kernel);
    a.step_locked(&mut refs);
    b.step_locked(&mut refs);
    assert_eq!((a.next(), b.next()), (Next::Done(Ok(1)), Next::Done(Ok(1))));
    assert_eq!(refs.by_handle()[&1].count, 2);
    refs.check_invariants().unwrap();
}

#[test]
fn concurrent_grows_commit_once() {
    let mut refs = NodeRefs::<IdPool>::new();
    for node in 1..=63 {
        let request = Request::Insert {
            node,
            is_manager: false,
        };
        refs.run(request, &Faults::default()).unwrap();
    }
    let mut a = Operation::new(Request::Insert {
        node: 100,
        is_manager: false,
    });
    let mut b = Operation::new(Request::Insert {
        node: 200,
        is_manager: false,
    });
    for op in [&mut a, &mut b] {
        op.step_locked(&mut refs);
        op.step_unlocked(Gfp::Kernel);
        op.step_locked(&mut refs); // full: asks to grow
        assert_eq!(op.phase(), "grow-alloc");
        op.step_unlocked(Gfp::Kernel);
    }
    a.step_locked(&mut refs); // grows to 128, takes 64
    assert_eq!(refs.pool().capacity(), 128);
    b.step_locked(&mut refs); // its 128-bit resizer is stale: ignored
    assert_eq!(refs.pool().capacity(), 128);
    assert_eq!(
        (a.next(), b.next()),
        (Next::Done(Ok(64)), Next::Done(Ok(65)))
    );
    refs.check_invariants().unwrap();
}

#[test]
#[cfg_attr(debug_assertions, should_panic(expected = "handle table corruption"))]
fn pool_tree_mismatch_is_reported() {
    let mut t = HandleTable::<IdPool>::new();
    t.insert_or_update_handle(1, false).unwrap();
    // Corrupt the pool behind the table's back: id 1 looks free.
    t.refs.pool.release_id(1);
    assert!(matches!(
        t.refs().check_invariants(),
        Err(InvariantViolation::PoolTreeMismatch { .. })
    ));
    assert_eq!(
        t.insert_or_update_handle(2, false),
        Err(Error::Mismatch { id: 1 })
    );
}

#[test]
fn flavours_hand_out_identical_ids() {
    let mut a = HandleTable::<IdPool>::new();
    let mut b = HandleTable::<DBitmap>::new();
    let mut c = HandleTable::<LinearScan>::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for step in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let request = match state % 8 {
            0..=3 => Request::Insert {
                node: (state >> 8) % 600,
                is_manager: (state >> 20) % 50 == 0,
            },
            4 => Request::Increment(((state >> 8) % 600) as u32),
            _ => Request::Decrement(((state >> 8) % 600) as u32),
        };
        let ra = a.run(request);
        assert_eq!(ra, b.run(request), "step {step}: {request:?}");
        assert_eq!(ra, c.run(request), "step {step}: {request:?}");
        assert_eq!(a.refs().by_handle(), c.refs().by_handle(), "step {step}");
        if step % 97 == 0 {
            a.refs().check_invariants().unwrap();
            b.refs().check_invariants().unwrap();
        }
    }
    assert!(
        a.refs().by_handle().len() > 100,
        "the history should build up"
    );
}

#[test]
fn shared_table_survives_real_threads() {
    use std::sync::Arc;
    const THREADS: u64 = 4;
    const OPS: u64 = 2_000;
    let table = Arc::new(SharedHandleTable::<IdPool>::new());
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let table = Arc::clone(&table);
            std::thread::spawn(move || {
                let mut held: Vec<u32> = Vec::new();
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                for _ in 0..OPS {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if state % 3 != 0 || held.is_empty() {
                        // Nodes 0..50 are shared between threads; the rest are private.
                        let node = if state % 5 == 0 {
                            (state >> 8) % 50
                        } else {
                            1000 * (t + 1) + (state >> 8) % 300
                        };
                        if state % 41 == 0 {
                            table.faults().fail_next(1);
                        }
                        if let Ok(handle) = table.insert_or_update_handle(node, false) {
                            assert_ne!(handle, 0);
                            held.push(handle);
                        }
                    } else {
                        let handle = held.swap_remove((state >> 8) as usize % held.len());
                        table.decrement(handle).expect("a handle this thread holds");
                    }
                }
                held
            })
        })
        .collect();
    let held: Vec<Vec<u32>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    table.check_invariants().unwrap();
    // Every reference still held is accounted for in the table's counts.
    let mut expected: BTreeMap<u32, u32> = BTreeMap::new();
    held.iter()
        .flatten()
        .for_each(|&h| *expected.entry(h).or_default() += 1);
    let counts: BTreeMap<u32, u32> = table.with_refs(|r| {
        r.by_handle()
            .iter()
            .map(|(&h, info)| (h, info.count))
            .collect()
    });
    assert_eq!(counts, expected);
    // Drop everything: the table empties and the pool shrinks back to 64.
    for h in held.into_iter().flatten() {
        table.decrement(h).unwrap();
    }
    table.with_refs(|r| {
        assert!(r.by_handle().is_empty());
        assert_eq!(r.pool().capacity(), 64);
    });
}
