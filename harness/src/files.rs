//! The one recursive directory walk (corpus, regressions, findings).

use std::path::{Path, PathBuf};

/// Every file under `dir`, recursively, sorted; an entry (file or
/// directory) for which `keep` is false is skipped. Errors are one line
/// naming the directory.
pub fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("{}: cannot list: {e}", d.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", d.display()))?.path();
            if !keep(&path) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
