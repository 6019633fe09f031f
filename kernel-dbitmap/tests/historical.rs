//! Upstream's later dbitmap bug, on the real C: with the fix of September
//! 2025 ("binder: fix double-free in dbitmap", 3ebcd3460cad) reversed
//! (`Header::Historical2024`), the minimal sequence init, failed grow,
//! release frees the map twice. The shim catches it (ASan would too, in a
//! sanitizer build); the shipped headers do not double-free; and the model
//! of the June 2024 version counts the same double free.

mod common;

use idpool::{DBitmap, Version};
use kernel_dbitmap::{shim, Gfp, Header, KernelDBitmap};
use std::process::Command;

fn skip(header: Header) -> bool {
    match header.unavailable_reason() {
        Some(reason) => {
            println!("skipped: {reason}");
            true
        }
        None => {
            println!("{}", header.provenance());
            false
        }
    }
}

/// Runs `ops` on a map of `header` with bad frees recorded; returns how
/// many double frees the shim saw (the drop at the end is the release).
fn bad_frees(header: Header, ops: impl FnOnce(&mut KernelDBitmap)) -> i64 {
    shim::record_bad_frees(true);
    let before = shim::bad_frees();
    let mut dmap = KernelDBitmap::init_from(Gfp::Kernel, header);
    ops(&mut dmap);
    drop(dmap); // binder_deferred_release: dbitmap_free
    let n = shim::bad_frees() - before;
    shim::record_bad_frees(false);
    n
}

#[test]
fn init_failed_grow_release_double_frees_on_the_historical_header() {
    if skip(Header::Historical2024) {
        return;
    }
    let live = shim::live_allocs();
    let n = bad_frees(Header::Historical2024, |d| {
        d.grow(None, 128); // the allocation for the grow failed
        assert!(!d.enabled(), "a failed grow disables the map");
    });
    assert_eq!(n, 1, "the release freed the map a second time");
    assert_eq!(shim::live_allocs(), live, "nothing leaked either");
}

#[test]
fn the_shipped_headers_free_once() {
    for header in [Header::Stable, Header::Mainline] {
        if skip(header) {
            continue;
        }
        let n = bad_frees(header, |d| {
            d.grow(None, 128);
            assert!(!d.enabled());
        });
        assert_eq!(n, 0, "{header:?}");
    }
}

/// Each of the three steps is needed: without the failed grow, or with a
/// grow that succeeded, or with a failed grow that was stale (someone else
/// grew first), the historical header frees the map once.
#[test]
fn the_sequence_is_minimal() {
    if skip(Header::Historical2024) {
        return;
    }
    assert_eq!(
        bad_frees(Header::Historical2024, |_| {}),
        0,
        "init, release"
    );
    assert_eq!(
        bad_frees(Header::Historical2024, |d| {
            d.grow(KernelDBitmap::zalloc(128, Gfp::Kernel), 128)
        }),
        0,
        "a grow that succeeded"
    );
    assert_eq!(
        bad_frees(Header::Historical2024, |d| {
            d.grow(KernelDBitmap::zalloc(128, Gfp::Kernel), 128);
            d.grow(None, 128);
            assert!(d.enabled());
        }),
        0,
        "a stale failed grow"
    );
    // A map disabled from init has a NULL pointer: kfree(NULL) is fine.
    shim::record_bad_frees(true);
    let before = shim::bad_frees();
    let mut d = KernelDBitmap::init_from(Gfp::Fail, Header::Historical2024);
    d.free();
    drop(d);
    assert_eq!(shim::bad_frees(), before);
    shim::record_bad_frees(false);
}

/// The wrapper sees the dangling pointer the historical header leaves
/// (and the shipped ones never do), and forgetting it, as the fix clears
/// it, makes the release free nothing twice and leak nothing.
#[test]
fn a_forgotten_dangling_map_is_neither_freed_twice_nor_leaked() {
    if skip(Header::Historical2024) {
        return;
    }
    assert!(!shim::under_asan(), "the tests are not built under ASan");
    for header in Header::ALL.into_iter().filter(|h| h.available()) {
        let live = shim::live_allocs();
        let n = bad_frees(header, |d| {
            assert!(!d.map_dangles(), "{header:?}: an enabled map");
            d.grow(None, 128);
            let dangles = header == Header::Historical2024;
            assert_eq!(d.map_dangles(), dangles, "{header:?}");
            d.forget_dangling();
            assert!(!d.map_dangles(), "{header:?}");
        });
        assert_eq!(n, 0, "{header:?}");
        assert_eq!(shim::live_allocs(), live, "{header:?}");
    }
}

/// The model of the June 2024 version counts the double free at the same
/// step as the historical header, and mainline's model counts none.
#[test]
fn the_model_knows_it_too() {
    if skip(Header::Historical2024) {
        return;
    }
    for version in [Version::C2024_06, Version::CMainline] {
        let mut model = DBitmap::init_with(Gfp::Kernel, version);
        model.grow(None, 128);
        model.free(); // the release
        let header = if version.free_leaves_map_dangling() {
            Header::Historical2024
        } else {
            Header::Stable
        };
        let kernel = bad_frees(header, |d| d.grow(None, 128));
        assert_eq!(i64::from(model.double_frees()), kernel, "{version}");
    }
}

const CHILD: &str = "KDB_DOUBLE_FREE_CHILD";

/// Not recorded: the shim aborts the process with a message, which is
/// what a fuzz target without ASan sees. Run in a child process (this test
/// binary, this one test), since the abort ends the process.
#[test]
fn the_double_free_aborts_the_process() {
    if std::env::var_os(CHILD).is_some() {
        // The child: the minimal sequence with bad frees not recorded.
        let mut d = KernelDBitmap::init_from(Gfp::Kernel, Header::Historical2024);
        d.grow(None, 128);
        drop(d);
        unreachable!("the shim should have aborted");
    }
    if skip(Header::Historical2024) {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_double_free_aborts_the_process",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "SIGABRT; stderr: {stderr}");
    assert!(
        stderr.contains("double free of a freed bitmap_zalloc block"),
        "{stderr}"
    );
}
