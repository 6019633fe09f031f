//! Every planted bug (`ci/mutants/*.mutant`) still applies to the current
//! tree, names known targets, and has a promoted regression that replays
//! it. (That the bug still changes behaviour, i.e. that its regression
//! fails with it planted, is `ci/mutants/check-specs.sh`: it rebuilds the
//! tree once per bug.)

use idpool_harness::mutant::Mutant;
use idpool_harness::targets;
use std::path::Path;

#[test]
fn every_planted_bug_applies_to_the_current_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut specs: Vec<_> = std::fs::read_dir(root.join("ci/mutants"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mutant"))
        .collect();
    specs.sort();
    assert!(!specs.is_empty(), "no ci/mutants/*.mutant");
    let mut problems = Vec::new();
    for spec in &specs {
        let name = spec.file_stem().unwrap().to_string_lossy();
        let result = Mutant::parse(&std::fs::read_to_string(spec).unwrap()).and_then(|m| {
            m.apply(&root, false)?;
            if let Some(t) = m.targets.iter().find(|t| targets::target(t).is_none()) {
                return Err(format!("unknown target {t}"));
            }
            Ok(m)
        });
        match result {
            Err(e) => problems.push(format!("{name}: {e}")),
            Ok(_) => {
                let file = format!("planted-{name}.trace");
                let promoted = targets::TARGETS.iter().any(|t| {
                    let dir = root.join("corpus/regressions").join(t.name());
                    dir.join(&file).is_file()
                });
                if !promoted {
                    problems.push(format!("{name}: no corpus/regressions/<target>/{file}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `copy_tree` (ci/lib.sh) gives each planted bug a fresh copy of the tree,
/// built in a target directory the copies share. A file the previous copy
/// planted comes back with its old mtime, older than the planted build:
/// cargo, which compares mtimes, would keep that build for a crate the
/// next bug does not touch, and fuzz the next bug beside the last one. The
/// copy touches such files, and only those: not the unplanted ones, and
/// not, one copy later, the ones it touched itself.
#[test]
fn a_fresh_copy_rebuilds_what_the_last_copy_planted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("idpool-copy-tree-{}", std::process::id()));
    let bash = |script: &str| {
        let status = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("set -euo pipefail; source \"$1/ci/lib.sh\"; {script}"),
            ])
            .arg("copy-tree-test")
            .arg(&root)
            .arg(&dir)
            .status()
            .expect("bash runs");
        assert!(status.success(), "{script}: {status}");
    };
    // In whole seconds: tar keeps no more.
    let mtime = |base: &Path, file: &str| {
        let t = std::fs::metadata(base.join(file))
            .unwrap()
            .modified()
            .unwrap();
        t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
    };
    let (planted, untouched) = ("src/lib.rs", "src/bitmap.rs");
    bash(&format!(
        "copy_tree \"$2\"; echo '// planted' >> \"$2/{planted}\"; copy_tree \"$2\""
    ));
    let same_text =
        std::fs::read(dir.join(planted)).unwrap() == std::fs::read(root.join(planted)).unwrap();
    let planted_newer = mtime(&dir, planted) > mtime(&root, planted);
    let untouched_kept = mtime(&dir, untouched) == mtime(&root, untouched);
    bash("copy_tree \"$2\"");
    let touched_once = mtime(&dir, planted) == mtime(&root, planted);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        same_text,
        "the second copy of {planted} still holds the plant"
    );
    assert!(
        planted_newer,
        "{planted}, planted in the last copy, came back with the tree's mtime: a shared target directory would keep the planted build"
    );
    assert!(
        untouched_kept,
        "{untouched} was not planted but its mtime changed: every copy would rebuild everything"
    );
    assert!(
        touched_once,
        "{planted} was touched again by a third copy, though the second did not plant it: every file ever planted would be rebuilt by every copy"
    );
}
