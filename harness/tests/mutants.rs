//! Every planted bug (`ci/mutants/*.mutant`) still applies to the current
//! tree, names known targets, and has a promoted regression that replays
//! it. (That the bug still changes behaviour, i.e. that its regression
//! fails with it planted, is `ci/mutants/check-specs.sh`: it rebuilds the
//! tree once per bug.)

use idpool_harness::mutant::Mutant;
use idpool_harness::registry;
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
            if let Some(t) = m.targets.iter().find(|t| registry::target(t).is_none()) {
                return Err(format!("unknown target {t}"));
            }
            Ok(m)
        });
        match result {
            Err(e) => problems.push(format!("{name}: {e}")),
            Ok(_) => {
                let file = format!("planted-{name}.trace");
                let promoted = registry::TARGETS.iter().any(|t| {
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
