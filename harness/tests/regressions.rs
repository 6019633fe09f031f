//! Replays every promoted regression, `corpus/regressions/<target>/*.trace`,
//! as a test of its own named `<target>/<name>`, so that
//! `cargo test -p idpool-harness --test regressions <name>` runs one and a
//! failure names it. Each trace is the minimised history of a bug the
//! campaign once found; it must pass on a correct allocator forever. An
//! empty regressions directory fails: the suite must not pass by replaying
//! nothing.
//!
//! A trace of a known upstream bug names the historical version it needs
//! (`version c-2024-06`) and the failure it must show there, in its header:
//! `# expect: <signature>`. Its test passes only when the replay fails with
//! exactly that signature; a second test, `<target>/<name>@mainline`, runs
//! the same operations with the version lines removed (mainline) and must
//! pass.

use idpool_harness::targets::{self, parse_trace};
use idpool_harness::{check, files};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};

/// Every `*.trace` under `root`, recursively, sorted.
fn traces(root: &Path) -> Vec<PathBuf> {
    let keep = |p: &Path| p.is_dir() || p.extension().is_some_and(|e| e == "trace");
    files::walk(root, &keep).unwrap_or_else(|e| panic!("{e}"))
}

/// The trace's text with its version lines removed: the same operations
/// on mainline.
fn on_mainline(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("version ") && !l.starts_with("versus "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Whether the trace expects a failure (`# expect:`).
fn expects_failure(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .is_ok_and(|t| t.lines().any(|l| l.trim().starts_with("# expect:")))
}

/// Replays an expecting trace's operations on mainline: they must pass.
fn replay_on_mainline(path: &Path) -> Result<(), Failed> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let trace = parse_trace(&on_mainline(&text)).map_err(|e| format!("{}: {e}", path.display()))?;
    match check::catching(|| trace.check()) {
        Ok(_) => Ok(()),
        Err(failure) => Err(format!(
            "{} on mainline: {}",
            path.display(),
            failure.message.lines().next().unwrap_or_default()
        )
        .into()),
    }
}

/// Parses and replays one trace; the error names the triage command.
fn replay(path: &Path) -> Result<(), Failed> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let trace = parse_trace(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str());
    if dir != Some(trace.target()) {
        return Err(format!("{}: stored under the wrong target", path.display()).into());
    }
    let expect = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("# expect:"))
        .map(str::trim);
    match (check::catching(|| trace.check()), expect) {
        (Err(failure), Some(sig)) if failure.signature().to_string() == sig => Ok(()),
        (Err(failure), Some(sig)) => Err(format!(
            "{}: expected the failure {sig}, got {}: {}",
            path.display(),
            failure.signature(),
            failure.message.lines().next().unwrap_or_default()
        )
        .into()),
        (Ok(_), Some(sig)) => Err(format!(
            "{}: expected the failure {sig} on the version the trace names, but it passes",
            path.display()
        )
        .into()),
        (Ok(_), None) => Ok(()),
        (Err(failure), None) => Err(format!(
            "{}: {}\n    replay it with: cargo run -p triage -- repro {}",
            path.display(),
            failure.message.lines().next().unwrap_or_default(),
            path.display()
        )
        .into()),
    }
}

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness sits in the repository")
        .join("corpus/regressions");
    let all = traces(&root);
    let mut trials: Vec<Trial> = all
        .iter()
        .map(|path| {
            let name = test_name(&root, path);
            // A target that cannot run here (the kernel's header missing)
            // is listed as ignored, with the reason printed once below.
            let target = name.split('/').next().unwrap_or_default().to_owned();
            let skip = targets::target(&target).and_then(|t| t.unavailable());
            let path = path.clone();
            Trial::test(name, move || replay(&path)).with_ignored_flag(skip.is_some())
        })
        .collect();
    // A known finding of mainline itself (the drivers' differences) has no
    // other version to run on, nor has one of a historical side that runs
    // beside mainline in every program (kernel_dbitmap's historical
    // header): neither names a version.
    let names_versions = |p: &PathBuf| {
        std::fs::read_to_string(p).is_ok_and(|t| {
            t.lines()
                .any(|l| l.starts_with("version ") || l.starts_with("versus "))
        })
    };
    trials.extend(
        all.iter()
            .filter(|p| expects_failure(p) && names_versions(p))
            .map(|path| {
                let name = test_name(&root, path);
                let path = path.clone();
                Trial::test(format!("{name}@mainline"), move || {
                    replay_on_mainline(&path)
                })
            }),
    );
    // On stderr: stdout is the test list that a runner (nextest) reads.
    for target in targets::traceable() {
        if let Some(reason) = target.unavailable() {
            eprintln!("skipped the {} regressions: {reason}", target.name());
        }
    }
    let count = all.len();
    trials.push(Trial::test(
        "regressions_are_present",
        move || match count {
            0 => Err("corpus/regressions holds no trace".into()),
            _ => Ok(()),
        },
    ));
    libtest_mimic::run(&args, trials).exit();
}

/// A regression's test name: its path under the regressions directory,
/// without the extension (`concurrent_resize/planted-c1-no-second-lookup`).
fn test_name(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .with_extension("")
        .to_string_lossy()
        .into_owned()
}
