//! The trace format: print then parse is the identity, bad input gets a
//! clear error, and a trace replays the same run as its bytes.

use idpool_harness::trace::{roundtrip, Trace};
use idpool_harness::{run_target, seeds, TARGETS};

#[test]
fn print_then_parse_is_the_identity() {
    for seed in 0..4000 {
        roundtrip(&seeds::input(seed));
    }
}

#[test]
fn a_trace_replays_like_its_bytes() {
    for target in TARGETS {
        for seed in 0..200 {
            let data = seeds::input(seed);
            let trace = Trace::from_bytes(target, &data).unwrap();
            let text = trace.to_string();
            let parsed = Trace::parse(&text).unwrap();
            assert_eq!(
                parsed.replay(),
                run_target(target, &data).unwrap(),
                "{target} seed {seed}:\n{text}"
            );
        }
    }
}

#[test]
fn a_hand_written_trace_parses() {
    let text = "\
# a comment, then a blank line

idpool-trace v1
target concurrent_resize
pool dbitmap
prefill 63
keep 63
thread insert n1; release #0
thread insert n1 manager; inc #2; release-prefill #5; insert-many 33
schedule t0*3 t1 t0! t1
";
    let trace = Trace::parse(text).unwrap();
    assert_eq!(trace.target(), "concurrent_resize");
    assert_eq!(trace.len(), 7);
    let Trace::Concurrent(_, schedule) = &trace else {
        unreachable!()
    };
    assert_eq!(schedule.len(), 6);
    let canonical = text.lines().skip(2).collect::<Vec<_>>().join("\n") + "\n";
    assert_eq!(trace.to_string(), canonical);
}

#[test]
fn bad_traces_are_refused_with_the_line() {
    let cases: &[(&str, &str)] = &[
        ("", "empty trace"),
        ("hello\n", "not a trace"),
        ("idpool-trace v9\n", "unsupported trace version \"v9\""),
        ("idpool-trace v1\n", "no `target` line"),
        (
            "idpool-trace v1\ntarget nope\n",
            "line 2: unknown target \"nope\"",
        ),
        (
            "idpool-trace v1\ntarget pool_ops\nacquire\n",
            "line 3: `acquire` takes 1 argument(s), found 0",
        ),
        (
            "idpool-trace v1\ntarget pool_ops\nacquire cap/3\n",
            "line 3: bad point \"cap/3\"",
        ),
        (
            "idpool-trace v1\ntarget pool_ops\nprepare grow sometimes\n",
            "line 3: expected `fail`",
        ),
        (
            "idpool-trace v1\ntarget handle_table\ninsert 3\n",
            "line 3: expected a node nK",
        ),
        (
            "idpool-trace v1\ntarget handle_table\nfail-next 2 at disk\n",
            "line 3: expected `fail-next N",
        ),
        (
            "idpool-trace v1\ntarget concurrent_resize\nschedule t0 x1\n",
            "line 3: expected a decision",
        ),
        (
            "idpool-trace v1\ntarget concurrent_resize\nthread jump\n",
            "line 3: unknown thread operation",
        ),
    ];
    for (text, expected) in cases {
        let err = Trace::parse(text).expect_err(text).to_string();
        assert!(
            err.contains(expected),
            "{text:?}: got {err:?}, expected it to contain {expected:?}"
        );
    }
}
