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

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("triage-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const PASSING: &str =
    "idpool-trace v1\ntarget pool_ops\nacquire-many 0 64\nprepare grow\ncommit 0\nacquire 1\n";

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let dir = scratch("bad");
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
    let dir = scratch("pass");
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
    let dir = scratch("dedup");
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
