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

/// ci/campaign.sh cuts the pool at its cap with `keep_smallest` (ci/lib.sh),
/// which keeps the smallest files (libFuzzer prefers the smaller of two
/// inputs that add the same), and brings the committed corpus up to date
/// with `sync_corpus` at the corpus's cap (tested below).
#[test]
fn the_campaign_caps_the_corpus_and_the_pool_keeping_the_smallest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let campaign = std::fs::read_to_string(root.join("ci/campaign.sh")).unwrap();
    for (field, cut) in [
        (
            "corpus_cap",
            "sync_corpus \"$ROOT/corpus/$t\" \"$out/merged/$t\" \"$cap\"",
        ),
        ("pool_cap", "keep_smallest \"$out/pool/$t\" \"$cap\""),
    ] {
        let cap = format!("cap=$(target_field \"$t\" {field})");
        let at = campaign
            .find(&cap)
            .unwrap_or_else(|| panic!("ci/campaign.sh reads {field}"))
            + cap.len();
        assert!(
            campaign[at..]
                .find(cut)
                .is_some_and(|i| !campaign[at..at + i].contains("cap=$(")),
            "ci/campaign.sh caps at {field}: `{cut}` after `{cap}`"
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

/// A scratch directory for the script tests, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idpool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `sync_corpus CORPUS MERGED CAP GONE` (ci/lib.sh); returns its lines.
fn sync_corpus(corpus: &Path, merged: &Path, cap: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("bash")
        .args([
            "-c",
            "set -euo pipefail; source \"$1/ci/lib.sh\"; sync_corpus \"$2\" \"$3\" \"$4\" gone",
        ])
        .arg("sync-corpus-test")
        .arg(&root)
        .arg(corpus)
        .arg(merged)
        .arg(cap)
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "sync_corpus: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every file directly in `dir`: its name, bytes and modification time.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_file())
        .map(|e| {
            let modified = e.metadata().unwrap().modified().unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            (e.file_name().into_string().unwrap(), bytes, modified)
        })
        .collect();
    files.sort();
    files
}

/// Copies the files directly in `from` into `to` (created), keeping their
/// times, as the campaign copies the committed corpus before its merge.
fn copy_corpus(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .args(["-p", "-r"])
        .arg(from.join("."))
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(status.success());
}

/// The campaign's merge into the committed corpus starts from a copy of
/// it (libFuzzer's -merge=1 keeps every file of its first directory), so
/// that a merge keeps what is committed; and a merge that brought nothing
/// new changes no file: not a name, a byte or a modification time.
#[test]
fn a_merge_that_found_nothing_new_changes_no_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let campaign = std::fs::read_to_string(root.join("ci/campaign.sh")).unwrap();
    let copy = campaign
        .find("cp -p \"$ROOT/corpus/$t\"/. \"$out/merged/$t\"/ -r")
        .expect("ci/campaign.sh merges into a copy of corpus/<target>");
    let merge = campaign
        .find("\"$out/merged/$t\" \"${dirs[@]}\" -- -merge=1 -use_counters=0")
        .expect("ci/campaign.sh's corpus merge writes into $out/merged/$t first");
    assert!(copy < merge, "the copy comes before the merge");

    let dir = scratch("sync-corpus-nothing-new");
    let (corpus, merged) = (dir.join("corpus"), dir.join("merged"));
    std::fs::create_dir_all(&corpus).unwrap();
    for (name, bytes) in [("0a1b", &b"one"[..]), ("2c3d", b"two"), ("4e5f", b"three")] {
        std::fs::write(corpus.join(name), bytes).unwrap();
    }
    // Times in the past, so that a rewrite would show.
    let status = std::process::Command::new("touch")
        .args(["-d", "2020-01-01"])
        .args(["0a1b", "2c3d", "4e5f"].map(|n| corpus.join(n)))
        .status()
        .unwrap();
    assert!(status.success());
    let before = snapshot(&corpus);
    copy_corpus(&corpus, &merged);
    let lines = sync_corpus(&corpus, &merged, "10");
    let after = snapshot(&corpus);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(lines.is_empty(), "nothing new, nothing said: {lines:?}");
    assert_eq!(before, after, "nothing new, no file changed");
}

/// A merge that found something adds it and keeps every committed file;
/// a committed file goes only as a duplicate (the same bytes as another)
/// or when the cap forces it, after every new file was left out; each
/// change is one line that says why.
#[test]
fn a_merge_adds_new_inputs_and_removes_only_what_it_explains() {
    let dir = scratch("sync-corpus-changes");
    let (corpus, merged) = (dir.join("corpus"), dir.join("merged"));
    std::fs::create_dir_all(&corpus).unwrap();
    for (name, size) in [("a", 3), ("b", 5), ("c", 7)] {
        std::fs::write(corpus.join(name), vec![b'x' + size as u8; size]).unwrap();
    }
    std::fs::write(corpus.join("d"), vec![b'x' + 3; 3]).unwrap(); // a's bytes
    let kept = snapshot(&corpus);
    copy_corpus(&corpus, &merged);
    std::fs::write(merged.join("n1"), [1u8]).unwrap();
    std::fs::write(merged.join("n2"), [2u8; 9]).unwrap();
    assert_eq!(
        sync_corpus(&corpus, &merged, "5"),
        [
            "added\tn1",
            "added\tn2",
            "removed\td\tduplicate of a (the same bytes)"
        ]
    );
    let after = snapshot(&corpus);
    assert_eq!(
        after.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "n1", "n2"]
    );
    assert_eq!(after[..3], kept[..3], "the committed files are untouched");

    // At a cap of 3, the new files go first (the largest first), and then
    // the largest committed one.
    std::fs::remove_dir_all(&merged).unwrap();
    copy_corpus(&corpus, &merged);
    std::fs::write(merged.join("n3"), [3u8; 2]).unwrap();
    let lines = sync_corpus(&corpus, &merged, "3");
    let left = snapshot(&corpus);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        lines,
        [
            "not-added\tn3\tover the cap of 3 files (the smallest kept)",
            "removed\tc\tover the cap of 3 files (the smallest kept)",
            "removed\tn2\tover the cap of 3 files (the smallest kept)",
        ]
    );
    assert_eq!(
        left.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["a", "b", "n1"]
    );
}
