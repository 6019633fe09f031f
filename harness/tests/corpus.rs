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

/// The local pool (`fuzz/pool/<target>`, untracked: what a campaign keeps
/// for its edges or its abstract states) is capped too, at
/// `Target::pool_cap`: checked when this machine has one.
#[test]
fn every_local_pool_is_within_its_cap() {
    let pool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/pool");
    let over: Vec<String> = targets::traceable()
        .filter_map(|target| {
            let dir = pool.join(target.name());
            let cap = target.pool_cap();
            assert!(
                cap >= target.corpus_cap(),
                "{}: the pool holds the corpus's inputs and more",
                target.name()
            );
            let files = dir.is_dir().then(|| files(&dir).len())?;
            (files > cap).then(|| format!("fuzz/pool/{}: {files} files, cap {cap}", target.name()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "local pools above their cap ({}); cap them with `ci/campaign.sh --minimise`",
        over.join("; ")
    );
}

/// ci/campaign.sh cuts both the corpus and the pool at their caps with
/// `keep_smallest` (ci/lib.sh), which keeps the smallest files (libFuzzer
/// prefers the smaller of two inputs that add the same).
#[test]
fn the_campaign_caps_the_corpus_and_the_pool_keeping_the_smallest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let campaign = std::fs::read_to_string(root.join("ci/campaign.sh")).unwrap();
    for (field, dir) in [("corpus_cap", "merged"), ("pool_cap", "pool")] {
        let cap = format!("cap=$(target_field \"$t\" {field})");
        let cut = format!("keep_smallest \"$out/{dir}/$t\" \"$cap\"");
        let at = campaign
            .find(&cap)
            .unwrap_or_else(|| panic!("ci/campaign.sh reads {field}"))
            + cap.len();
        assert!(
            campaign[at..]
                .find(&cut)
                .is_some_and(|i| !campaign[at..at + i].contains("cap=$(")),
            "ci/campaign.sh cuts $out/{dir}/$t at {field}: `{cut}` after `{cap}`"
        );
    }

    let dir = std::env::temp_dir().join(format!("idpool-keep-smallest-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    // Sizes 7, 1, 5, 3, 9, 2 and a tie at 3: the four smallest are 1, 2, 3, 3.
    for (name, size) in [
        ("a", 7),
        ("b", 1),
        ("c", 5),
        ("d", 3),
        ("e", 9),
        ("f", 2),
        ("g h", 3),
    ] {
        std::fs::write(dir.join(name), vec![0u8; size]).unwrap();
    }
    std::fs::write(dir.join("sub/x"), [0u8]).unwrap();
    let run = |cap: &str| {
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                "set -euo pipefail; source \"$1/ci/lib.sh\"; keep_smallest \"$2\" \"$3\"",
            ])
            .arg("keep-smallest-test")
            .arg(&root)
            .arg(&dir)
            .arg(cap)
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "keep_smallest: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run("10"), "", "under its cap: nothing cut, nothing said");
    assert_eq!(run(""), "", "no cap: nothing cut");
    assert_eq!(run("4"), "7\n", "it says how many files there were");
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    left.sort();
    let kept_sub = dir.join("sub/x").is_file();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(left, ["b", "d", "f", "g h"]);
    assert!(kept_sub, "only the files directly in the directory count");
}
