//! Replays every file of every target's corpus, twice: each run must pass,
//! and both runs must agree (a target is deterministic). A missing or empty
//! corpus fails: the suite must not pass by replaying nothing.
//!
//! A run that ends at a known upstream finding on a historical version
//! (`history::Finding`) passes, exactly as it does not crash the fuzz
//! target in a campaign: the corpus holds what campaigns keep, and those
//! findings are proved by the regressions that expect them.

use idpool_harness::{check, history, targets, Events, Target};
use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(target)
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
        panic!(
            "corpus {} is missing ({e}); regenerate seeds with \
             `cargo run -p idpool-harness --bin seed-corpus -- corpus`",
            dir.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Replays `path` twice: both runs must pass (or end at a known upstream
/// finding) and agree.
fn replay_file(target: &dyn Target, path: &Path) {
    let name = target.name();
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let run = || {
        check::catching(|| target.run(&data)).or_else(|failure| -> check::Checked<Events> {
            if history::quiet(&failure) {
                return Ok(Events::default());
            }
            panic!(
                "{name}: corpus file {} fails: {failure}\n\
                 reproduce with `cargo run -p triage -- repro {}`",
                path.display(),
                path.display()
            )
        })
    };
    let (first, second) = (run(), run());
    assert_eq!(
        first,
        second,
        "{name}: {} is not deterministic",
        path.display()
    );
}

/// Replays every file of `target`'s corpus, spread over the machine's
/// cores (a file's two runs stay on one thread).
fn replay(target: &dyn Target) {
    let name = target.name();
    let dir = corpus_dir(name);
    let files = files(&dir);
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = std::time::Instant::now();
    std::thread::scope(|scope| {
        for share in files.chunks(files.len().div_ceil(threads)) {
            scope.spawn(move || share.iter().for_each(|path| replay_file(target, path)));
        }
    });
    eprintln!(
        "{name}: replayed {} corpus files twice in {:.1} s",
        files.len(),
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn every_target_replays_its_corpus() {
    for target in targets::traceable() {
        match target.unavailable() {
            Some(reason) => println!("skipped the {} corpus replay: {reason}", target.name()),
            None => replay(target),
        }
    }
}

#[test]
fn every_committed_corpus_is_within_its_cap() {
    let over: Vec<String> = targets::traceable()
        .filter(|target| target.has_corpus())
        .filter_map(|target| {
            let (files, cap) = (files(&corpus_dir(target.name())).len(), target.corpus_cap());
            (files > cap).then(|| format!("corpus/{}: {files} files, cap {cap}", target.name()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "committed corpora above their cap ({}); minimise them with \
         `ci/campaign.sh --minimise` (edge coverage alone, `-merge=1 -use_counters=0`)",
        over.join("; ")
    );
}
