//! The trace format: print then parse is the identity, bad input gets a
//! clear error, and a trace replays the same run as its bytes.

use idpool_harness::targets::concurrent_resize::ConcurrentTrace;
use idpool_harness::targets::{self, parse_trace};
use idpool_harness::{registry, seeds, TARGETS};

#[test]
fn print_then_parse_is_the_identity() {
    for seed in 0..4000 {
        registry::roundtrip(&seeds::input(seed), TARGETS);
    }
}

#[test]
fn a_trace_replays_like_its_bytes() {
    for target in targets::traceable() {
        if let Some(reason) = target.unavailable() {
            println!("skipped {}: {reason}", target.name());
            continue;
        }
        let target = target.name();
        for seed in 0..200 {
            let data = seeds::input(seed);
            let trace = targets::trace_from_bytes(target, &data).unwrap();
            let text = trace.to_string();
            let parsed = parse_trace(&text).unwrap();
            assert_eq!(
                parsed.replay(),
                registry::fuzz(targets::target(target).unwrap(), &data),
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
    let trace = parse_trace(text).unwrap();
    assert_eq!(trace.target(), "concurrent_resize");
    assert_eq!(trace.len(), 7);
    let concurrent = trace.body().downcast_ref::<ConcurrentTrace>().unwrap();
    assert_eq!(concurrent.schedule.len(), 6);
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
        let err = parse_trace(text).expect_err(text).to_string();
        assert!(
            err.contains(expected),
            "{text:?}: got {err:?}, expected it to contain {expected:?}"
        );
    }
}

/// A trace shows what its bytes decode to: an op-list target's operations
/// as `registry::decode` reads them, `handle_table`'s program (the
/// versions its header picks, then its operations), which runs as the
/// bytes do.
#[test]
fn a_trace_shows_what_its_bytes_decode_to() {
    use idpool_harness::registry::decode;
    use idpool_harness::targets::handle_table::TableProgram;
    use idpool_harness::targets::pool_ops::PoolOp;
    use idpool_harness::text::Text;
    let table = targets::target("handle_table").unwrap();
    for seed in 0..300 {
        let data = seeds::input(seed);
        let ops: String = (decode::<PoolOp>(&data).iter())
            .map(|op| format!("{}\n", Text(op)))
            .collect();
        for name in ["pool_ops", "dbitmap_ops"] {
            let trace = targets::trace_from_bytes(name, &data).unwrap().to_string();
            assert!(trace.ends_with(&ops), "{name} seed {seed}:\n{trace}");
        }
        let program = TableProgram::decode(&data);
        let trace = targets::trace_from_bytes("handle_table", &data).unwrap();
        assert!(
            trace.to_string().ends_with(&program.to_string()),
            "seed {seed}"
        );
        assert_eq!(program.run("handle_table"), table.run(&data), "seed {seed}");
    }
}

/// A table built from given handles above 65,535 (`start-from`), with
/// inserts and drops on top: parses, prints back the same, and passes.
#[test]
fn a_start_from_trace_parses_and_passes() {
    let text = "\
idpool-trace v1
target handle_table
version c-2024-06
start-from 65535=n1 65536=n2 262144=n3 0=n4
insert n3
insert n7
insert-many 40
dec highest
drop-all fifo
";
    let trace = parse_trace(text).unwrap();
    assert_eq!(trace.len(), 6);
    let canonical = text.to_string();
    assert_eq!(trace.to_string(), canonical);
    let events = trace.replay();
    assert_eq!(events.started_above_16_bits, 1);
}
