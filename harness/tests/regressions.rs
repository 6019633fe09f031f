//! Replays every promoted regression: `corpus/regressions/<target>/*.trace`.
//! Each is the minimised history of a bug the campaign once found; it must
//! pass on a correct allocator forever.

use idpool_harness::trace::Trace;
use std::path::{Path, PathBuf};

fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(traces(&path));
        } else if path.extension().is_some_and(|e| e == "trace") {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn every_promoted_regression_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness sits in the repository")
        .join("corpus/regressions");
    let mut failures = Vec::new();
    let all = traces(&root);
    for path in &all {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let trace = Trace::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let dir = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        assert_eq!(
            dir,
            Some(trace.target()),
            "{}: stored under the wrong target",
            path.display()
        );
        if let Err(payload) = std::panic::catch_unwind(|| trace.replay()) {
            let failure = idpool_harness::check::failure_from_panic(payload.as_ref());
            failures.push(format!(
                "{}: {}\n    replay it with: cargo run -p triage -- repro {}",
                path.display(),
                failure.message.lines().next().unwrap_or_default(),
                path.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} regressions fail:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
    eprintln!("replayed {} regressions", all.len());
}
