//! The triage tool from the outside: bad input of every kind gets a
//! one-line error and exit code 2; a passing trace exits 0; nothing is
//! overwritten.

use std::path::PathBuf;
use std::process::Command;

fn triage(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(args)
        .output()
        .expect("triage runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A scratch directory of its own, removed when the test ends.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("triage-cli-{name}-"))
        .tempdir()
        .expect("a scratch directory")
}

const PASSING: &str =
    "idpool-trace v1\ntarget pool_ops\nacquire-many 0 64\nprepare grow\ncommit 0\nacquire 1\n";

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let tmp = scratch("bad");
    let dir = tmp.path();
    let write = |name: &str, data: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    };
    let empty = write("empty", b"");
    let v9 = write("v9.trace", b"idpool-trace v9\ntarget pool_ops\n");
    let malformed = write(
        "bad.trace",
        b"idpool-trace v1\ntarget pool_ops\nacquire x\n",
    );
    let unknown = write("unknown.trace", b"idpool-trace v1\ntarget nope\n");
    let raw = write("raw.bin", b"\x01\x02\x03");
    let missing = dir.join("missing").to_str().unwrap().to_string();
    let dir_s = dir.to_str().unwrap().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["repro", &missing], "no such file"),
        (vec!["repro", &dir_s], "is a directory"),
        (vec!["repro", &empty], "empty input"),
        (vec!["repro", &v9], "unsupported trace version"),
        (vec!["repro", &malformed], "line 3: expected a number"),
        (vec!["repro", &unknown], "unknown target \"nope\""),
        (vec!["repro", &raw], "pass --target"),
        (
            vec!["repro", &raw, "--target", "nope"],
            "unknown target 'nope'",
        ),
        (vec!["dedup", &missing], "no such directory"),
        (vec!["dedup", &raw], "is a file, expected a directory"),
        (
            vec!["promote", &raw, "--target", "pool_ops", "--name", "a b"],
            "bad name",
        ),
    ];
    for (args, expected) in cases {
        let (code, _, err) = triage(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(
            err.contains(expected),
            "{args:?}: {err:?} lacks {expected:?}"
        );
    }
}

#[test]
fn a_passing_trace_exits_0_and_minimize_refuses_it() {
    let tmp = scratch("pass");
    let dir = tmp.path();
    let trace = dir.join("ok.trace");
    std::fs::write(&trace, PASSING).unwrap();
    let (code, out, _) = triage(&["repro", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASS"), "{out}");
    let (code, _, err) = triage(&["minimize", trace.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("passes on this build"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        PASSING,
        "the input is untouched"
    );
}

#[test]
fn dedup_groups_and_reports_passing_inputs() {
    let tmp = scratch("dedup");
    let dir = tmp.path();
    for i in 0..3 {
        std::fs::write(dir.join(format!("{i}.trace")), PASSING).unwrap();
    }
    std::fs::write(
        dir.join("junk.trace"),
        "idpool-trace v1\ntarget pool_ops\nfly\n",
    )
    .unwrap();
    let (code, out, _) = triage(&["dedup", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("    3  passes"), "{out}");
    assert!(
        out.contains("    1  unreadable: line 3: unknown pool operation"),
        "{out}"
    );
}

#[test]
fn timeout_and_oom_artifacts_are_grouped_without_a_replay() {
    let tmp = scratch("resource");
    let dir = tmp.path();
    let artifacts = dir.join("pool_ops");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("timeout-0123"), b"\x00\x01\x02").unwrap();
    std::fs::write(artifacts.join("oom-4567"), b"\x03\x04").unwrap();
    std::fs::write(artifacts.join("ok.trace"), PASSING).unwrap();
    let (code, out, err) = triage(&["dedup", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pool_ops/timeout"), "{out}");
    assert!(out.contains("pool_ops/oom"), "{out}");
    assert!(out.contains("passes"), "{out}");
}

/// Out-of-range cases of the concurrent target's trace lines: (name,
/// trace, the error it must give).
fn concurrent_cases() -> Vec<(&'static str, String, &'static str)> {
    let many_threads = format!(
        "idpool-trace v1\ntarget concurrent_resize\npool idpool\n{}",
        "thread insert n1\n".repeat(5)
    );
    let long_thread = format!(
        "idpool-trace v1\ntarget concurrent_resize\npool idpool\nthread {}\n",
        vec!["insert n1"; 17].join("; ")
    );
    vec![
        (
            "prefill",
            "idpool-trace v1\ntarget concurrent_resize\npool idpool\nprefill 4000000000\nthread insert n1\n".into(),
            "line 4: 4000000000 is out of range: allowed 0..=4096",
        ),
        (
            "schedule",
            "idpool-trace v1\ntarget concurrent_resize\npool idpool\nthread insert n1\nschedule t0*99999999999\n".into(),
            "line 5: 99999999999 is out of range: allowed 0..=65536",
        ),
        (
            "decision-thread",
            "idpool-trace v1\ntarget concurrent_resize\npool idpool\nthread insert n1\nschedule t9\n".into(),
            "line 5: 9 is out of range: allowed 0..=3",
        ),
        (
            "thread-bulk",
            "idpool-trace v1\ntarget concurrent_resize\npool dbitmap\nthread insert-many 60000\n".into(),
            "line 4: 60000 is out of range: allowed 0..=256",
        ),
        ("threads", many_threads, "line 8: too many threads: allowed 1..=4"),
        ("thread-ops", long_thread, "line 4: 17 operations in one thread: allowed 1..=16"),
    ]
}

/// Out-of-range cases of the pool targets' trace lines.
fn pool_cases() -> Vec<(&'static str, String, &'static str)> {
    let huge_ops = format!(
        "idpool-trace v1\ntarget pool_ops\n{}",
        "acquire 0\n".repeat(257)
    );
    vec![
        (
            "reset",
            "idpool-trace v1\ntarget pool_ops\nreset 2147483647\n".into(),
            "line 3: 2147483647 is out of range: allowed 0..=1048576",
        ),
        (
            "count",
            "idpool-trace v1\ntarget dbitmap_ops\nrelease-many 0 18446744073709551615\n".into(),
            "line 3: 18446744073709551615 is out of range: allowed 0..=65536",
        ),
        (
            "point",
            "idpool-trace v1\ntarget pool_ops\nacquire 4294967296\n".into(),
            "line 3: 4294967296 is out of range: allowed 0..=4294967295",
        ),
        (
            "ceiling",
            "idpool-trace v1\ntarget pool_ops\nprobe-ceiling 4294967296\n".into(),
            "line 3: 4294967296 is out of range: allowed 0..=2147483648",
        ),
        (
            "ops",
            huge_ops,
            "line 259: too many operations: allowed 0..=256",
        ),
        (
            "commit",
            "idpool-trace v1\ntarget dbitmap_ops\ncommit 300\n".into(),
            "line 3: 300 is out of range: allowed 0..=255",
        ),
    ]
}

/// Out-of-range cases of the table target's trace lines.
fn table_cases() -> Vec<(&'static str, String, &'static str)> {
    let table_ops = format!(
        "idpool-trace v1\ntarget handle_table\nversion rust-v1\nversus c-v3\n{}",
        "reclaim\n".repeat(257)
    );
    vec![
        (
            "fail-next",
            "idpool-trace v1\ntarget handle_table\nfail-next 100000 at grow\n".into(),
            "line 3: 100000 is out of range: allowed 0..=65536",
        ),
        (
            "insert-many",
            "idpool-trace v1\ntarget handle_table\ninsert-many 1000000000\n".into(),
            "line 3: 1000000000 is out of range: allowed 0..=65536",
        ),
        (
            "corrupt-set",
            "idpool-trace v1\ntarget handle_table\nversion c-2024-06\ncorrupt set 4294967296\n"
                .into(),
            "line 4: 4294967296 is out of range: allowed 0..=4294967295",
        ),
        (
            "corrupt-clear",
            "idpool-trace v1\ntarget handle_table\ncorrupt clear #256\n".into(),
            "line 3: 256 is out of range: allowed 0..=255",
        ),
        (
            "table-ops",
            table_ops,
            "line 261: too many operations: allowed 0..=256",
        ),
        (
            "start-from",
            "idpool-trace v1\ntarget handle_table\nstart-from 70000=n1 4294967295=n2\n".into(),
            "line 3: start handle 4294967295 is out of range: allowed 0..=262144",
        ),
        (
            "start-from-count",
            "idpool-trace v1\ntarget handle_table\nstart-from 1=n1 2=n2 3=n3 4=n4 5=n5 6=n6 7=n7\n"
                .into(),
            "line 3: `start-from` takes 1 to 6 handles, found 7",
        ),
        (
            "start-from-twice",
            "idpool-trace v1\ntarget handle_table\nstart-from 70000=n1 70000=n2\n".into(),
            "line 3: start handle 70000 is given twice",
        ),
        (
            "start-from-late",
            "idpool-trace v1\ntarget handle_table\ninsert n1\nstart-from 70000=n1\n".into(),
            "line 4: `start-from` only as the first operation",
        ),
    ]
}

/// A trace is text a person may write: every number is checked against its
/// op's documented range before anything runs, so a hand-written trace
/// cannot make `repro` run for minutes or eat memory. Each case fails fast
/// with one line naming the line and the allowed range, exit 2.
#[test]
fn out_of_range_values_are_refused_before_anything_runs() {
    let tmp = scratch("range");
    let dir = tmp.path();
    let cases = [concurrent_cases(), pool_cases(), table_cases()].concat();
    for (name, text, expected) in cases {
        let path = dir.join(format!("{name}.trace"));
        std::fs::write(&path, text).unwrap();
        let started = std::time::Instant::now();
        let (code, _, err) = triage(&["repro", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line, got {err:?}");
        assert!(err.contains(expected), "{name}: {err:?} lacks {expected:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{name}: refused, but only after {:?}",
            started.elapsed()
        );
    }
}

// `triage states`: distinct abstract states of a corpus, in the order its
// files were written.

/// The states counted from the lines `SECS states: N`, checked to grow.
fn counts(stdout: &str) -> Vec<usize> {
    let counts: Vec<usize> = stdout
        .lines()
        .map(|l| {
            l.rsplit_once("states: ")
                .expect("a states line")
                .1
                .parse()
                .unwrap()
        })
        .collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    counts
}

#[test]
fn states_more_inputs_reach_more_states() {
    let tmp = scratch("states");
    let dir = tmp.path();
    // One input: the empty program.
    std::fs::write(dir.join("a"), b"").unwrap();
    let (code, one, _) = triage(&["states", "--target", "pool_ops", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus/pool_ops");
    let (code, all, err) = triage(&[
        "states",
        "--target",
        "pool_ops",
        dir.to_str().unwrap(),
        corpus.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (one, all) = (counts(&one), counts(&all));
    assert!(
        all.last() > one.last(),
        "the corpus reaches more states than an empty input: {all:?} vs {one:?}"
    );
    assert!(err.contains("distinct abstract states"), "{err}");
}

#[test]
fn states_bad_input_gets_one_line_and_exit_2() {
    let (code, _, err) = triage(&["states", "--target", "nope", "."]);
    assert_eq!(code, 2);
    assert!(err.starts_with("triage: unknown target"), "{err}");
    let (code, _, err) = triage(&["states", "--target", "pool_ops", "/nonexistent/dir"]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
}

// `triage sample`: the states uniformly random inputs reach.

/// `triage --json sample ARGS...`'s inputs and states.
fn sampled(args: &[&str]) -> (usize, usize) {
    let mut all = vec!["--json", "sample", "--target", "pool_ops"];
    all.extend_from_slice(args);
    let (code, out, err) = triage(&all);
    assert_eq!(code, 0, "{err}");
    let field = |name: &str| -> usize {
        let at = out.find(&format!("\"{name}\":")).expect(name) + name.len() + 3;
        out[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (field("inputs"), field("states"))
}

#[test]
fn sample_is_repeatable_and_more_inputs_reach_more_states() {
    let (inputs, few) = sampled(&["--inputs", "1"]);
    assert_eq!(inputs, 1);
    let (inputs, many) = sampled(&["--inputs", "2000", "--seed", "7"]);
    assert_eq!(inputs, 2000);
    assert!(
        many > few,
        "2000 random inputs reach more than one: {many} vs {few}"
    );
    assert_eq!(
        sampled(&["--inputs", "2000", "--seed", "7"]).1,
        many,
        "the same seed, the same inputs"
    );
    // One-byte inputs are at most 256 programs of one step each.
    let (_, short) = sampled(&["--inputs", "2000", "--seed", "7", "--max-len", "1"]);
    assert!(
        short < many,
        "{short} states from one-byte inputs, {many} from longer ones"
    );
    let (inputs, _) = sampled(&["--seconds", "0.2"]);
    assert!(inputs > 0);
}

#[test]
fn sample_bad_input_gets_one_line_and_exit_2() {
    for args in [
        &["sample", "--target", "nope"][..],
        &["sample", "--target", "pool_ops", "--seconds", "0"],
        &[
            "sample",
            "--target",
            "pool_ops",
            "--seconds",
            "1",
            "--inputs",
            "5",
        ],
        &["sample", "--target", "pool_ops", "--max-len", "0"],
        &["sample", "--target", "pool_ops", "--max-len", "99999999999"],
        &["sample", "--target", "pool_ops", "--inputs", "0"],
    ] {
        let (code, _, err) = triage(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // clap's own refusal (a seed beyond 32 bits) exits 2 too.
    let (code, _, err) = triage(&["sample", "--target", "pool_ops", "--seed", "4294967296"]);
    assert_eq!(code, 2, "{err}");
}

/// A June 2024 table beside a v3 one: v3 shrinks at a quarter, June 2024
/// does not (the v3 threshold finding).
const FAILING: &str = "idpool-trace v1\ntarget handle_table\nversion c-v3\nversus c-2024-06\n\
                       insert-many 65\ndrop-all lifo\n";

#[test]
fn json_is_one_line_of_what_the_scripts_read() {
    let tmp = scratch("json");
    let dir = tmp.path();
    let trace = dir.join("v3.trace");
    std::fs::write(&trace, FAILING).unwrap();
    let trace = trace.to_str().unwrap();
    let one_line = |out: &str| {
        assert_eq!(out.lines().count(), 1, "one JSON value on one line: {out}");
        assert!(out.starts_with('{') || out.starts_with('['), "{out}");
    };

    let (code, out, err) = triage(&["repro", trace, "--json"]);
    assert_eq!(code, 1, "a failing trace exits 1: {err}");
    one_line(&out);
    for field in [
        r#""target":"handle_table""#,
        r#""passes":false"#,
        r#""signature":"handle_table/"#,
        r#""finding":"v3-threshold""#,
    ] {
        assert!(out.contains(field), "repro --json lacks {field}: {out}");
    }

    let min = dir.join("min.trace");
    let min_s = min.to_str().unwrap();
    let (code, out, err) = triage(&["minimize", trace, "-o", min_s, "--json"]);
    assert_eq!(code, 0, "{err}");
    one_line(&out);
    let path = format!(r#""path":"{min_s}""#);
    for field in [path.as_str(), r#""finding":"v3-threshold""#, r#""from":2"#] {
        assert!(out.contains(field), "minimize --json lacks {field}: {out}");
    }
    assert!(min.exists(), "minimize wrote {min_s}");

    let (code, out, err) = triage(&["dedup", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    one_line(&out);
    assert!(
        out.contains(r#""count":2"#),
        "both traces, one group: {out}"
    );
}

// `triage map`: the cells of the command space a corpus reaches.

/// A program whose steps reach 13 cells (harness/tests/command_map.rs
/// lists them).
const MAPPED: &str = "idpool-trace v1\ntarget binder_commands\nprocs 3\np1 set-manager\n\
                      p0 acquire 0\np0 call 0 node 1 handle 0\np1 reply handle 1\np2 send 0\n\
                      p2 exit\np0 free\np2 free\np0 frozen-info p1\n";

/// The number after `"name":` in a one-line JSON value.
fn json_number(out: &str, name: &str) -> usize {
    let at = out
        .find(&format!("\"{name}\":"))
        .unwrap_or_else(|| panic!("`{name}` in {out}"))
        + name.len()
        + 3;
    out[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("`{name}`: expected a number in {out}"))
}

/// The length of the array after `"name":` (its objects counted by their
/// `"command"` fields).
fn json_len(out: &str, name: &str) -> usize {
    let at = out
        .find(&format!("\"{name}\":["))
        .unwrap_or_else(|| panic!("`{name}` in {out}"));
    let rest = &out[at + name.len() + 3..];
    let end = rest.find(']').expect("the array ends");
    rest[..end].matches("\"command\"").count()
}

#[test]
fn map_counts_the_cells_each_input_reaches() {
    let tmp = scratch("map");
    let dir = tmp.path();
    let (code, out, err) = triage(&["map", "--json", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "an empty corpus: {err}");
    assert_eq!(json_number(&out, "inputs"), 0, "{out}");
    assert_eq!(
        json_len(&out, "reached"),
        0,
        "an empty corpus reaches no cell: {out}"
    );
    let cells = json_number(&out, "cells");
    let unreachable = json_len(&out, "unreachable");
    assert_eq!(json_len(&out, "never"), cells - unreachable, "{out}");

    std::fs::write(dir.join("a.trace"), MAPPED).unwrap();
    std::fs::write(dir.join("b.trace"), MAPPED).unwrap();
    // A raw input: the header byte alone, a program without steps.
    std::fs::write(dir.join("c"), b"\x00").unwrap();
    let (code, out, err) = triage(&["map", "--json", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_number(&out, "inputs"), 3, "{out}");
    assert_eq!(json_len(&out, "reached"), 13, "{out}");
    assert_eq!(json_len(&out, "never"), cells - unreachable - 13, "{out}");
    assert!(
        out.contains(r#"{"command":"reply","cell":"carries handle J>0 receiver's","inputs":2}"#),
        "both traces send p0's node back to it in a reply: {out}"
    );

    let (code, table, err) = triage(&["map", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let first = table.lines().next().unwrap_or_default();
    assert!(
        first.contains("3 inputs") && first.contains("13 reached"),
        "the summary line: {first}"
    );
    assert!(table.contains("| reply | caller third | 2 |"), "{table}");
    assert!(table.contains("unreachable by construction"), "{table}");
}

#[test]
fn map_bad_input_gets_one_line_and_exit_2() {
    let tmp = scratch("map-bad");
    let dir = tmp.path();
    let bad = dir.join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("x.trace"),
        "idpool-trace v1\ntarget binder_commands\np9 exit\n",
    )
    .unwrap();
    let missing = dir.join("missing");
    let file = bad.join("x.trace");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["map", missing.to_str().unwrap()], "no such directory"),
        (
            vec!["map", file.to_str().unwrap()],
            "is a file, expected a directory",
        ),
        (vec!["map", bad.to_str().unwrap()], "x.trace"),
        (
            vec!["map", "--target", "pool_ops", "."],
            "no command-space map for pool_ops",
        ),
        (
            vec!["map", "--target", "nope", "."],
            "unknown target 'nope'",
        ),
    ];
    for (args, expected) in cases {
        let (code, _, err) = triage(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(
            err.contains(expected),
            "{args:?}: {err:?} lacks {expected:?}"
        );
    }
}
