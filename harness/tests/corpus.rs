//! Replays every file of every target's corpus, twice: each run must pass,
//! and both runs must agree (a target is deterministic). A missing or empty
//! corpus fails: the suite must not pass by replaying nothing.

use idpool_harness::{run_target, TARGETS};
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

fn replay(target: &str) {
    let dir = corpus_dir(target);
    let files = files(&dir);
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let run = || {
            std::panic::catch_unwind(|| run_target(target, &data).expect("a known target"))
                .unwrap_or_else(|_| {
                    panic!(
                        "{target}: corpus file {} fails (message above); \
                         reproduce with `cargo fuzz run {target} {}`",
                        path.display(),
                        path.display()
                    )
                })
        };
        let (first, second) = (run(), run());
        assert_eq!(
            first,
            second,
            "{target}: {} is not deterministic",
            path.display()
        );
    }
    eprintln!("{target}: replayed {} corpus files twice", files.len());
}

#[test]
fn every_target_replays_its_corpus() {
    for target in TARGETS {
        replay(target);
    }
}
