//! The runners fill in what the known upstream findings are told by
//! (`history::Finding::of` reads the check, the flavour and what the check
//! saw): each regression program of a finding, run, fails as that finding.

use idpool::Request;
use idpool_harness::check::Detail;
use idpool_harness::history::Finding;
use idpool_harness::targets::parse_trace;

#[test]
fn the_runners_fill_in_what_the_findings_are_told_by() {
    // The regressions' programs, run: each failure is its finding.
    let cases = [
        (
            "version c-2024-06\ninsert n1 manager\ninsert n6 manager\n",
            Finding::Collision,
        ),
        (
            "version c-v3\nversus c-2024-06\ninsert-many 65\ndrop-all lifo\n",
            Finding::V3Threshold,
        ),
        (
            "version c-2024-06\nversus c-v3\ninsert-many 128\ninsert-many 128\n\
             insert-many 44\nfail-next 1 at shrink\ndrop-from =129\n",
            Finding::V3Threshold,
        ),
        (
            "version rust-v1\nversus rust-mainline\ninsert-many 64\ncorrupt clear =cap/4\ninsert-many 1\n",
            Finding::RustMismatch,
        ),
        (
            "version c-v3\ninsert n0 manager\ndrop-all lifo\ninsert n6 manager\ninsert n17\n",
            Finding::V3Zero,
        ),
        (
            "version c-v3\ninsert n0 manager\ndrop-all lifo\ninsert n17\n",
            Finding::V3Zero,
        ),
        (
            "version c-v3\nversus c-2024-06\ncorrupt clear highest\ninsert n16\n\
             dec highest\ndec highest\ninsert-many 1\n",
            Finding::V3Zero,
        ),
        (
            "target concurrent_resize\npool dbitmap\nversion c-2024-06\nprefill 0\nkeep 1\n\
             thread insert n0 manager; insert n4 manager\nschedule\n",
            Finding::Collision,
        ),
    ];
    for (body, finding) in cases {
        let text = if body.starts_with("target") {
            format!("idpool-trace v1\n{body}")
        } else {
            format!("idpool-trace v1\ntarget handle_table\n{body}")
        };
        let trace = parse_trace(&text).expect("a trace");
        let failure = trace.check().expect_err("the finding");
        assert_eq!(Finding::of(&failure), Some(finding), "{failure}");
    }
}

#[test]
fn the_v3_threshold_under_a_planned_failure_is_met_at_the_release_itself() {
    // The extra shrink's allocation fails: the capacities stay equal,
    // and the difference is the planned failure v3 consumed, seen at
    // the release (not at the later allocation that fails on June 2024
    // alone).
    let text = "idpool-trace v1\ntarget handle_table\nversion c-2024-06\nversus c-v3\n\
                insert-many 128\ninsert-many 128\ninsert-many 44\nfail-next 1 at shrink\n\
                drop-from =129\ninsert-many 1\n";
    let trace = parse_trace(text).expect("a trace");
    let failure = trace.check().expect_err("the finding");
    assert_eq!(failure.step, 4, "{failure}");
    let Some(Detail::Versions {
        request,
        capacities,
        pending,
        ..
    }) = failure.detail
    else {
        panic!("not a difference of versions: {failure}");
    };
    assert_eq!(request, Request::Decrement(129), "{failure}");
    assert_eq!(capacities, [512, 512], "{failure}");
    assert_eq!(pending, [1, 0], "{failure}");
    assert_eq!(Finding::of(&failure), Some(Finding::V3Threshold));
}

/// v3's emptied map, as run: a process started from descriptors 0 and
/// 1000 (the rule's own cases are `history`'s unit test
/// `v3s_map_emptied_without_bit_0_is_its_bit_0_not_the_threshold`).
#[test]
fn v3s_map_emptied_without_bit_0_as_run() {
    let text = "idpool-trace v1\ntarget handle_table\nversion c-v3\nversus c-2024-06\n\
                start-from 0=n0 1000=n1\ndec =1000\ndec =0\n";
    let trace = parse_trace(text).expect("a trace");
    let failure = trace.check().expect_err("the finding");
    assert_eq!(Finding::of(&failure), Some(Finding::V3Zero), "{failure}");
}
