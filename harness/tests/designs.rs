//! The designs in the targets, on hand-written traces: each reaches what it
//! is there for, and the trace forms name them.

use idpool_harness::targets::parse_trace;

fn replay(text: &str) -> idpool_harness::Events {
    let trace = parse_trace(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
    assert_eq!(trace.to_string(), text, "print then parse is the identity");
    match trace.check() {
        Ok(events) => events,
        Err(failure) => panic!("{failure}"),
    }
}

/// 600 handles, all dropped highest first: mainline shrinks on the way
/// down, the shrinker stays at 1024 ids until the reclaim takes it to 64;
/// a second reclaim with a failing allocation has nothing to do.
#[test]
fn handle_table_reclaim_after_a_teardown() {
    let e = replay(
        "idpool-trace v1\ntarget handle_table\ninsert-many 128\ninsert-many 128\n\
         insert-many 128\ninsert-many 128\ninsert-many 88\ndrop-all lifo\nreclaim\n\
         fail-next 1 at shrink\nreclaim\n",
    );
    assert!(e.reclaimed == 1, "{e:?}");
    assert!(e.tree_wide > 0, "{e:?}");
}

/// A reclaim that must stop above the highest live handle: 200 handles
/// (256 ids), those from 40 up dropped (mainline shrinks to 128 on the way
/// down, the shrinker stays at 256), then the reclaim: 256 -> 128 (39 is
/// below 64), and no further (39 is not below 32).
#[test]
fn handle_table_reclaim_keeps_the_highest_handle() {
    let e = replay(
        "idpool-trace v1\ntarget handle_table\ninsert-many 128\ninsert-many 72\n\
         drop-from =40\nreclaim\ninsert n3\nreclaim\n",
    );
    assert!(e.reclaimed > 0, "{e:?}");
}

/// Every pool of the concurrent target by name, with a reclaiming thread
/// beside two inserting ones.
#[test]
fn concurrent_resize_runs_every_design() {
    for pool in ["idpool", "dbitmap", "fastpool", "augmented", "shrinker"] {
        let e = replay(&format!(
            "idpool-trace v1\ntarget concurrent_resize\npool {pool}\nprefill 255\nkeep 16\n\
             thread insert n1; release #0; reclaim\nthread reclaim; insert-many 65\n\
             thread insert n1; release-prefill #0\nschedule t1*3 t0*2 t2*4 t1*20\n"
        ));
        if pool == "shrinker" {
            assert!(e.reclaimed > 0, "{pool}: {e:?}");
        } else {
            assert_eq!(e.reclaimed, 0, "{pool}: {e:?}");
        }
    }
}
