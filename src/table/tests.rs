use super::*;
use crate::{AllocSite, Corruption, DBitmap, Faults, Gfp, IdPool, Version};

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

/// The Rust driver refuses a new ref once the process is dead; the C insert
/// path has no such check (see `c_binder_inc_ref_for_node_has_no_dead_check`).
fn dead_process_refuses_inserts<F: Flavour>() {
    let mut t = HandleTable::<F>::new();
    t.insert_or_update_handle(1, false).unwrap();
    t.kill();
    let before = snapshot(&t);
    if t.refs().version().insert_checks_dead() {
        assert_eq!(t.insert_or_update_handle(2, false), Err(Error::DeadProcess));
        assert_eq!(snapshot(&t), before);
    } else {
        assert_eq!(t.insert_or_update_handle(2, false), Ok(2));
        t.decrement(2).unwrap();
    }
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
fn shared_table_survives_real_threads_idpool() {
    shared_table_survives_real_threads::<IdPool>(Version::RustMainline);
}

/// The C protocol on real threads: the insert's retry after a grow and the
/// release's three critical sections under a real mutex.
#[test]
fn shared_table_survives_real_threads_dbitmap() {
    shared_table_survives_real_threads::<DBitmap>(Version::CMainline);
}

fn shared_table_survives_real_threads<F: Flavour>(version: Version) {
    use std::sync::Arc;
    const THREADS: u64 = 4;
    const OPS: u64 = 2_000;
    let table = Arc::new(SharedHandleTable::<F>::with_version(version));
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
    // A failure planned before an insert that needed no allocation is still
    // pending: it would fail whichever shrink comes next, and a C pool whose
    // last shrink fails rightly stays big (`dbitmap_shrink` returns on NULL).
    // Nothing here is about that, so the plan is emptied first.
    while table.faults().next(AllocSite::Shrink) == Gfp::Fail {}
    assert_eq!(
        table.faults().pending(),
        0,
        "only failures anywhere were planned"
    );
    // Drop everything: the table empties and the pool shrinks back to 64
    // (or stays disabled, for a dbitmap whose grow allocation failed).
    for h in held.into_iter().flatten() {
        table.decrement(h).unwrap();
    }
    table.with_refs(|r| {
        assert!(r.by_handle().is_empty());
        let disabled = r.pool().used_ids().is_none();
        assert_eq!(r.pool().capacity(), if disabled { 0 } else { 64 });
        assert!(r.drain_warnings().is_empty());
    });
}

// ---------------------------------------------------------------------------
// Upstream fidelity: each rule pinned to the upstream function it comes from.
// ---------------------------------------------------------------------------

fn insert(node: NodeId, is_manager: bool) -> Request {
    Request::Insert { node, is_manager }
}

/// The phases an operation goes through when run alone.
fn phases<F: Flavour>(refs: &mut NodeRefs<F>, request: Request) -> Vec<&'static str> {
    let mut op = Operation::new(request);
    let mut seen = Vec::new();
    loop {
        seen.push(op.phase());
        match op.next() {
            Next::Locked => op.step_locked(refs),
            Next::Unlocked => op.step_unlocked(Gfp::Kernel),
            Next::Done(_) => return seen,
        }
    }
}

/// A table of `version` holding handles `1..=n` (nodes `1000 + i`).
fn table_with<F: Flavour>(version: Version, n: u64) -> HandleTable<F> {
    let mut t = HandleTable::<F>::with_version(version);
    for i in 1..=n {
        assert_eq!(t.insert_or_update_handle(1000 + i, false), Ok(i as u32));
    }
    t
}

#[test]
fn each_flavour_defaults_to_its_drivers_mainline() {
    assert_eq!(NodeRefs::<IdPool>::new().version(), Version::RustMainline);
    assert_eq!(NodeRefs::<DBitmap>::new().version(), Version::CMainline);
    assert_eq!(
        NodeRefs::<LinearScan>::new().version(),
        Version::RustMainline
    );
    for v in Version::ALL {
        assert_eq!(IdPool::supports(v), v.driver() == crate::Driver::Rust);
        assert_eq!(DBitmap::supports(v), v.driver() == crate::Driver::C);
        assert!(LinearScan::supports(v));
        assert_eq!(NodeRefs::<LinearScan>::with_version(v).version(), v);
    }
}

#[test]
#[should_panic(expected = "the idpool pool cannot run version c-mainline")]
fn a_c_version_needs_a_c_style_pool() {
    let _ = HandleTable::<IdPool>::with_version(Version::CMainline);
}

/// `binder_inc_ref_for_node` looks the node up without a new ref, allocates
/// one unlocked, then `binder_get_ref_for_node_olocked` looks the node up
/// again *before* `get_ref_desc_olocked` picks a descriptor. Two inserts of
/// one node that both missed it: the second finds the first's ref and takes
/// no bit.
#[test]
fn c_get_ref_for_node_olocked_looks_up_node_first() {
    let mut refs = NodeRefs::<DBitmap>::new();
    let (mut a, mut b) = (
        Operation::new(insert(5, false)),
        Operation::new(insert(5, false)),
    );
    for op in [&mut a, &mut b] {
        assert_eq!(op.phase(), "start");
        op.step_locked(&mut refs);
        assert_eq!(
            (op.phase(), op.alloc_site()),
            ("alloc-ref", Some(AllocSite::Ref))
        );
        op.step_unlocked(Gfp::Kernel);
    }
    a.step_locked(&mut refs);
    b.step_locked(&mut refs);
    assert_eq!((a.next(), b.next()), (Next::Done(Ok(1)), Next::Done(Ok(1))));
    assert_eq!(refs.pool().used_ids().collect::<Vec<_>>(), [1]);
    refs.check_invariants().unwrap();

    // The order shows once the pool is corrupt: the bit of handle 1 is
    // cleared, and both drivers retry the insert of node 5 after another
    // thread inserted it. C finds the node first and never looks at the
    // map; Rust asks the pool first, meets the mismatch and fails.
    fn race<F: Flavour>(version: Version) -> (Next, Vec<Warning>) {
        let mut refs = NodeRefs::<F>::with_version(version);
        refs.run(insert(5, false), &Faults::default()).unwrap();
        let mut late = Operation::new(insert(6, false));
        late.step_locked(&mut refs);
        late.step_unlocked(Gfp::Kernel);
        refs.run(insert(6, false), &Faults::default()).unwrap();
        refs.corrupt(Corruption::ClearBit(2));
        late.step_locked(&mut refs);
        (late.next(), refs.drain_warnings())
    }
    assert_eq!(
        race::<DBitmap>(Version::CMainline),
        (Next::Done(Ok(2)), vec![])
    );
    assert_eq!(
        race::<DBitmap>(Version::C2024_06),
        (Next::Done(Ok(2)), vec![])
    );
    assert_eq!(
        race::<IdPool>(Version::RustMainline),
        (
            Next::Done(Err(Error::Mismatch { id: 2 })),
            vec![Warning::Mismatch {
                id: 2,
                warn_on: true
            }]
        )
    );
}

/// `binder_inc_ref_for_node`: a failed `kzalloc` of the new ref is `-ENOMEM`
/// before any descriptor is chosen.
#[test]
fn c_inc_ref_for_node_failed_ref_allocation_takes_no_descriptor() {
    let mut t = table_with::<DBitmap>(Version::CMainline, 3);
    t.faults().fail_next_at(AllocSite::Ref, 1);
    assert_eq!(t.insert_or_update_handle(7, false), Err(Error::NoMemory));
    assert_eq!(t.refs().pool().used_ids().collect::<Vec<_>>(), [1, 2, 3]);
    t.refs().check_invariants().unwrap();
}

/// Nothing on the C insert path (`binder_inc_ref_for_node`,
/// `binder_get_ref_for_node_olocked`, `get_ref_desc_olocked`) reads
/// `proc->is_dead`: a dead process's table still takes a new ref. The Rust
/// driver refuses with `ESRCH`.
#[test]
fn c_binder_inc_ref_for_node_has_no_dead_check() {
    for version in [Version::C2024_06, Version::CV3, Version::CMainline] {
        let mut t = HandleTable::<DBitmap>::with_version(version);
        t.kill();
        assert_eq!(t.insert_or_update_handle(1, false), Ok(1), "{version}");
        t.refs().check_invariants().unwrap();
    }
    let mut rust = HandleTable::<IdPool>::new();
    rust.kill();
    assert_eq!(
        rust.insert_or_update_handle(1, false),
        Err(Error::DeadProcess)
    );
}

/// `get_ref_desc_olocked` on a full map: `dbitmap_grow_nbits` under the
/// lock, unlock, `bitmap_zalloc`, lock, `dbitmap_grow`, `-EAGAIN`, and
/// `binder_get_ref_for_node_olocked` goes back to `retry:`, the
/// `refs_by_node` lookup. Here another thread inserts the same node (and
/// grows the map) while this one holds its allocation: the retry finds the
/// node, and the stale grow is dropped.
#[test]
fn c_get_ref_desc_olocked_retries_from_the_node_lookup_after_grow() {
    let mut t = table_with::<DBitmap>(Version::CMainline, 63);
    let refs = &mut t.refs;
    let mut op = Operation::new(insert(7, false));
    op.step_locked(refs);
    op.step_unlocked(Gfp::Kernel);
    op.step_locked(refs); // -ENOSPC
    assert_eq!(
        (op.phase(), op.alloc_site()),
        ("grow-alloc", Some(AllocSite::Grow))
    );
    op.step_unlocked(Gfp::Kernel);
    assert_eq!(op.phase(), "grow-commit");
    assert_eq!(refs.run(insert(7, false), &Faults::default()), Ok(64));
    assert_eq!(refs.pool().capacity(), 128);
    op.step_locked(refs); // stale grow ignored, retry: node 7 found
    assert_eq!(op.next(), Next::Done(Ok(64)));
    assert_eq!(refs.by_handle()[&64].count, 2);
    assert_eq!(refs.pool().capacity(), 128);
    refs.check_invariants().unwrap();

    // Run alone, the same insert goes through every C insert phase once.
    let mut t = table_with::<DBitmap>(Version::CMainline, 63);
    assert_eq!(
        phases(&mut t.refs, insert(8, false)),
        [
            "start",
            "alloc-ref",
            "pick",
            "grow-alloc",
            "grow-commit",
            "done"
        ]
    );
    assert_eq!(t.lookup(8), Some(64));
}

/// A failed `bitmap_zalloc` for the grow reaches `dbitmap_grow` as NULL,
/// which disables the map; the retry then takes `slow_desc_lookup_olocked`.
#[test]
fn c_get_ref_desc_olocked_failed_grow_retries_on_the_slow_path() {
    let mut t = table_with::<DBitmap>(Version::CMainline, 63);
    t.faults().fail_next_at(AllocSite::Grow, 1);
    assert_eq!(t.insert_or_update_handle(7, false), Ok(64));
    assert!(!t.refs().pool().enabled());
    assert_eq!(t.faults().pending(), 0);
}

/// `binder_update_ref_for_handle` -> `binder_cleanup_ref_olocked` clears the
/// bit in the first critical section; `try_shrink_dmap` then takes the lock
/// again (critical section 2) for `dbitmap_shrink_nbits`, allocates without
/// it, and commits with `dbitmap_shrink` in critical section 3. The Rust
/// driver asks for the shrink in the same section as the release.
#[test]
fn c_update_ref_for_handle_then_try_shrink_dmap_takes_three_critical_sections() {
    // Handles 1..=32 in a 128-bit map; dropping 32 leaves last bit 31 < 32.
    let shrinkable = |version| {
        let mut t = table_with::<DBitmap>(version, 64);
        for h in (33..=64).rev() {
            t.decrement(h).unwrap();
        }
        assert_eq!(t.capacity(), 128);
        t
    };
    let mut t = shrinkable(Version::CMainline);
    assert_eq!(
        phases(&mut t.refs, Request::Decrement(32)),
        [
            "start",
            "shrink-request",
            "shrink-alloc",
            "shrink-commit",
            "done"
        ]
    );
    assert_eq!(t.capacity(), 64);
    let mut rust = HandleTable::<IdPool>::new();
    for i in 1..=64 {
        rust.insert_or_update_handle(i, false).unwrap();
    }
    for h in (33..=64).rev() {
        rust.decrement(h).unwrap();
    }
    assert_eq!(
        phases(&mut rust.refs, Request::Decrement(32)),
        ["start", "shrink-alloc", "shrink-commit", "done"]
    );

    // Section 1 clears the bit and drops the lock before anyone decides.
    let mut t = shrinkable(Version::CMainline);
    let mut op = Operation::new(Request::Decrement(32));
    op.step_locked(&mut t.refs);
    assert_eq!((op.phase(), op.next()), ("shrink-request", Next::Locked));
    assert!(!t.refs().pool().test_bit(32), "cleared in section 1");
    t.refs().check_invariants().unwrap();
    // Another thread inserts in the window: id 32 again, so the decision
    // made in section 2 is "no shrink", and nothing is allocated.
    assert_eq!(t.insert_or_update_handle(77, false), Ok(32));
    op.step_locked(&mut t.refs);
    assert_eq!(op.next(), Next::Done(Ok(32)));
    assert_eq!(t.capacity(), 128);

    // Between section 2 and section 3 another thread inserts: the target
    // recomputed by `dbitmap_shrink` is no longer the prepared one.
    let mut t = shrinkable(Version::CMainline);
    let mut op = Operation::new(Request::Decrement(32));
    op.step_locked(&mut t.refs);
    op.step_locked(&mut t.refs);
    assert_eq!(op.alloc_site(), Some(AllocSite::Shrink));
    op.step_unlocked(Gfp::Kernel);
    assert_eq!(t.insert_or_update_handle(77, false), Ok(32));
    op.step_locked(&mut t.refs);
    assert_eq!(op.next(), Next::Done(Ok(32)));
    assert_eq!(t.capacity(), 128, "dbitmap_shrink refused a stale size");
    t.refs().check_invariants().unwrap();
}

/// The syzbot crash of July 2024 on C as first merged (15d9da3f818c):
/// `get_ref_desc_olocked` gives the context manager's node descriptor 0
/// without looking. The manager dies and another node becomes the context
/// manager while a ref to the old manager's node still holds 0: the new
/// manager's node is given 0 too, and `binder_get_ref_for_node_olocked`
/// hits `BUG()`. Mainline ("binder: fix descriptor lookup for context
/// manager") searches from offset 0 and hands out the next free one.
#[test]
fn c_2024_06_manager_always_gets_0_collides_after_manager_change() {
    let history = |t: &mut HandleTable<DBitmap>| {
        assert_eq!(t.insert_or_update_handle(1, true), Ok(0), "old manager");
        assert_eq!(t.insert_or_update_handle(2, false), Ok(1));
        // The old manager's ref is still held; a new manager appears.
        t.insert_or_update_handle(3, true)
    };
    let mut june = HandleTable::<DBitmap>::with_version(Version::C2024_06);
    assert_eq!(history(&mut june), Err(Error::KernelBug { id: 0 }));
    let mut v3 = HandleTable::<DBitmap>::with_version(Version::CV3);
    assert_eq!(history(&mut v3), Err(Error::KernelBug { id: 0 }));
    let mut mainline = HandleTable::<DBitmap>::with_version(Version::CMainline);
    assert_eq!(history(&mut mainline), Ok(2));
    mainline.refs().check_invariants().unwrap();
    // The Rust driver always searched from 0 for the manager.
    let mut rust = HandleTable::<IdPool>::new();
    assert_eq!(rust.insert_or_update_handle(1, true), Ok(0));
    assert_eq!(rust.insert_or_update_handle(2, false), Ok(1));
    assert_eq!(rust.insert_or_update_handle(3, true), Ok(2));
    // The same crash on a map disabled by a failed grow (the slow path of
    // June 2024 never sees the manager either).
    let mut june = table_with::<DBitmap>(Version::C2024_06, 63);
    june.faults().fail_next_at(AllocSite::Grow, 1);
    assert_eq!(june.insert_or_update_handle(10, false), Ok(64));
    assert!(!june.refs().pool().enabled());
    assert_eq!(june.insert_or_update_handle(11, true), Ok(0));
    assert_eq!(
        june.insert_or_update_handle(12, true),
        Err(Error::KernelBug { id: 0 })
    );
}

/// As first merged, `dbitmap_init` set bit 0 and `dbitmap_clear_bit` never
/// cleared it: descriptor 0 is never handed to a non-manager, and the
/// manager gets it without the map.
#[test]
fn c_2024_06_dbitmap_init_reserves_bit_0_for_good() {
    let mut t = HandleTable::<DBitmap>::with_version(Version::C2024_06);
    assert!(t.refs().pool().test_bit(0));
    t.refs().check_invariants().unwrap(); // bit 0 is not a leak
    assert_eq!(t.insert_or_update_handle(1, false), Ok(1));
    assert_eq!(t.insert_or_update_handle(2, true), Ok(0));
    t.decrement(0).unwrap();
    assert!(t.refs().pool().test_bit(0), "BIT(0) always set");
    assert_eq!(t.insert_or_update_handle(3, false), Ok(2));
    t.refs().check_invariants().unwrap();
    // 63 non-manager handles fill a 64-bit map: it grows at the 64th.
    let t = table_with::<DBitmap>(Version::C2024_06, 64);
    assert_eq!(t.capacity(), 128);
}

/// The v3 posting set bit 0 in `dbitmap_init` but its `dbitmap_clear_bit`
/// had no guard for it: dropping the manager's ref at descriptor 0 clears
/// the reserved bit, and `dbitmap_acquire_first_zero_bit` then gives 0 to a
/// non-manager. (Merged as June 2024 with the guard.)
#[test]
fn c_v3_dbitmap_clear_bit_frees_descriptor_0_for_a_non_manager() {
    let mut v3 = HandleTable::<DBitmap>::with_version(Version::CV3);
    assert_eq!(v3.insert_or_update_handle(1, true), Ok(0));
    v3.decrement(0).unwrap();
    assert_eq!(v3.insert_or_update_handle(2, false), Ok(0));
    let mut june = HandleTable::<DBitmap>::with_version(Version::C2024_06);
    assert_eq!(june.insert_or_update_handle(1, true), Ok(0));
    june.decrement(0).unwrap();
    assert_eq!(june.insert_or_update_handle(2, false), Ok(1));
}

/// `dbitmap_shrink_nbits` with `<=` (v3), through `try_shrink_dmap`: the
/// last bit exactly at a quarter shrinks the map, where the merged `<` keeps
/// it.
#[test]
fn dbitmap_shrink_nbits_v3_off_by_one_through_the_table() {
    for (version, capacity) in [(Version::CV3, 64), (Version::C2024_06, 128)] {
        let mut t = table_with::<DBitmap>(version, 64);
        for h in (33..=64).rev() {
            t.decrement(h).unwrap();
        }
        assert_eq!(t.capacity(), capacity, "{version}: last bit 32 of 128");
        t.refs().check_invariants().unwrap();
    }
}

/// Rust, first posting: the loop in `insert_or_update_handle` meets an id
/// the pool offers but `by_handle` holds, logs (`pr_err!`), acquires it and
/// searches on.
#[test]
fn rust_v1_mismatch_acquires_and_continues() {
    let mut t = table_with::<IdPool>(Version::RustV1, 3);
    t.faults().corrupt(Corruption::ClearBit(2));
    assert_eq!(t.insert_or_update_handle(9, false), Ok(4));
    assert_eq!(
        t.drain_warnings(),
        [Warning::Mismatch {
            id: 2,
            warn_on: false
        }]
    );
    assert!(t.drain_warnings().is_empty());
    t.refs().check_invariants().unwrap(); // the acquire repaired the pool
}

/// Rust mainline: the same mismatch is `pr_err!` + `warn_on!` + `EINVAL`,
/// after acquiring the id so that it is not offered again.
#[test]
fn rust_mainline_mismatch_warns_einval() {
    let mut t = table_with::<IdPool>(Version::RustMainline, 3);
    t.faults().corrupt(Corruption::ClearBit(2));
    assert!(matches!(
        t.refs().check_invariants(),
        Ok(()) // not applied yet: corruption waits for a critical section
    ));
    assert_eq!(
        t.insert_or_update_handle(9, false),
        Err(Error::Mismatch { id: 2 })
    );
    assert_eq!(
        t.drain_warnings(),
        [Warning::Mismatch {
            id: 2,
            warn_on: true
        }]
    );
    t.refs().check_invariants().unwrap();
    assert_eq!(t.insert_or_update_handle(9, false), Ok(4));
}

/// C: the descriptor `dbitmap_acquire_next_zero_bit` found is in
/// `refs_by_desc` already: `BUG()` in `binder_get_ref_for_node_olocked`.
#[test]
fn c_get_ref_for_node_olocked_duplicate_descriptor_is_bug() {
    for version in [Version::C2024_06, Version::CV3, Version::CMainline] {
        let mut t = table_with::<DBitmap>(version, 3);
        t.faults().corrupt(Corruption::ClearBit(2));
        assert_eq!(
            t.insert_or_update_handle(9, false),
            Err(Error::KernelBug { id: 2 }),
            "{version}"
        );
        assert!(t.drain_warnings().is_empty(), "BUG() is not a warning");
        assert_eq!(t.lookup(9), None);
    }
}

/// A bit set behind the table's back is skipped for good by every pool that
/// keeps bits (a leak the invariant check reports); the linear scan has no
/// bits to corrupt.
#[test]
fn corruption_set_bit_leaks_the_id() {
    fn leak<F: Flavour>() -> (Result<u32, Error>, Result<(), InvariantViolation>) {
        let mut t = HandleTable::<F>::new();
        t.faults().corrupt(Corruption::SetBit(1));
        let got = t.insert_or_update_handle(5, false);
        (got, t.refs().check_invariants())
    }
    let leaked = Err(InvariantViolation::PoolTreeMismatch {
        only_in_pool: vec![1],
        only_in_tree: vec![],
    });
    assert_eq!(leak::<IdPool>(), (Ok(2), leaked.clone()));
    assert_eq!(leak::<DBitmap>(), (Ok(2), leaked));
    assert_eq!(leak::<LinearScan>(), (Ok(1), Ok(())));
}

/// The shared table applies planned corruptions under its real lock and
/// keeps the warnings for the caller.
#[test]
fn shared_table_applies_corruptions_and_keeps_warnings() {
    let t = SharedHandleTable::<IdPool>::with_version(Version::RustMainline);
    for node in 1..=3 {
        t.insert_or_update_handle(node, false).unwrap();
    }
    t.faults().corrupt(Corruption::ClearBit(3));
    assert_eq!(
        t.insert_or_update_handle(9, false),
        Err(Error::Mismatch { id: 3 })
    );
    assert_eq!(t.drain_warnings().len(), 1);
    let june = SharedHandleTable::<DBitmap>::with_version(Version::C2024_06);
    assert_eq!(june.insert_or_update_handle(1, true), Ok(0));
    assert_eq!(
        june.insert_or_update_handle(2, true),
        Err(Error::KernelBug { id: 0 })
    );
}

/// A table built from handles above 65,535 (through every u32/usize cast
/// of the pool) behaves as if each had been inserted: the pool grew to
/// hold the highest, every id is taken, and new references still get the
/// smallest free id.
fn built_from_handles_above_65535<F: Flavour>(version: Version, capacity: usize) {
    let handles = [(0, 10), (3, 13), (65_535, 20), (65_536, 21), (70_000, 22)];
    let mut t = HandleTable::<F>::from_handles(version, handles).expect("distinct handles");
    assert_eq!(t.refs().check_invariants(), Ok(()));
    assert_eq!(t.refs().pool().capacity(), capacity);
    for (handle, node) in handles {
        assert_eq!(t.lookup(node), Some(handle));
    }
    assert_eq!(t.insert_or_update_handle(30, false), Ok(1));
    assert_eq!(t.insert_or_update_handle(22, false), Ok(70_000));
    assert_eq!(t.decrement(70_000), Ok(70_000));
    assert_eq!(t.decrement(70_000), Ok(70_000));
    assert_eq!(t.lookup(22), None);
    assert_eq!(t.refs().check_invariants(), Ok(()));
    // 65,536 is still above a quarter of 131,072: no shrink.
    assert_eq!(t.refs().pool().capacity(), capacity);
}

#[test]
fn from_handles_above_65535() {
    built_from_handles_above_65535::<IdPool>(Version::RustMainline, 131_072);
    built_from_handles_above_65535::<DBitmap>(Version::CMainline, 131_072);
    built_from_handles_above_65535::<LinearScan>(Version::RustMainline, 0);
    built_from_handles_above_65535::<crate::FastPool>(Version::RustMainline, 131_072);
    built_from_handles_above_65535::<crate::Shrinker>(Version::RustMainline, 131_072);
    built_from_handles_above_65535::<crate::AugmentedTree>(Version::RustMainline, 0);
}

#[test]
fn from_handles_refuses_duplicates_and_the_ceiling() {
    let table = |handles: &[(u32, NodeId)]| {
        HandleTable::<IdPool>::from_handles(Version::RustMainline, handles.iter().copied())
            .map(|_| ())
    };
    assert_eq!(
        table(&[(5, 1), (5, 2)]),
        Err(BuildError::DuplicateHandle(5))
    );
    assert_eq!(table(&[(5, 1), (6, 1)]), Err(BuildError::DuplicateNode(1)));
    assert_eq!(table(&[(1 << 30, 1)]), Err(BuildError::NoRoom(1 << 30)));
}

/// The flavours without a bitmap take any u32 as given, up to
/// `u32::MAX`: the handles are held, found and released like any other,
/// and new references still get the smallest free id. (The bitmap
/// flavours cannot hold them: the Rust pools stop at the 2^30 ceiling,
/// the C map is given up when its grow to 2^31 bits cannot be allocated.)
fn built_at_the_top_of_u32<F: Flavour>() {
    let handles = [(u32::MAX, 1), (1 << 31, 2), ((1 << 31) - 1, 3), (1, 4)];
    let mut t = HandleTable::<F>::from_handles(Version::RustMainline, handles).expect("distinct");
    assert_eq!(t.refs().check_invariants(), Ok(()));
    for (handle, node) in handles {
        assert_eq!(t.lookup(node), Some(handle));
    }
    assert_eq!(t.insert_or_update_handle(9, false), Ok(2));
    assert_eq!(t.decrement(u32::MAX), Ok(u32::MAX));
    assert_eq!(t.lookup(1), None);
    assert_eq!(t.refs().check_invariants(), Ok(()));
}

#[test]
fn from_handles_at_the_top_of_u32() {
    built_at_the_top_of_u32::<LinearScan>();
    built_at_the_top_of_u32::<crate::AugmentedTree>();
}
