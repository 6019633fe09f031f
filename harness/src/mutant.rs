//! Planted bugs as search/replace specs (`ci/mutants/*.mutant`), so that
//! they keep applying while the code around them changes.
//!
//! ```text
//! <one line saying what the bug is>
//! Targets: <target> [<target>...]
//!
//! @ src/id_pool.rs
//! <<<
//! <the exact lines to find, once, in that file>
//! ===
//! <the lines to put in their place>
//! >>>
//! ```
//!
//! A spec may hold several `@ file` blocks and several `<<< === >>>`
//! changes per file; lines outside them are ignored. Each search text must
//! occur exactly once in its file, or the spec does not apply.

use std::collections::btree_map::{BTreeMap, Entry};
use std::path::Path;

/// One search/replace change in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The file, relative to the tree's root.
    pub file: String,
    /// The lines to find (each ending in a newline).
    pub search: String,
    /// The lines to put in their place.
    pub replace: String,
}

/// A planted bug.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutant {
    /// What the bug is, in one line.
    pub about: String,
    /// The targets to try, in order.
    pub targets: Vec<String>,
    /// The changes.
    pub changes: Vec<Change>,
}

impl Mutant {
    /// Parses a spec.
    pub fn parse(text: &str) -> Result<Mutant, String> {
        let mut lines = text.lines();
        let about = lines.next().unwrap_or_default().trim().to_string();
        let mut targets = Vec::new();
        let mut changes = Vec::new();
        let mut file: Option<String> = None;
        while let Some(line) = lines.next() {
            if let Some(t) = line.strip_prefix("Targets:") {
                targets.extend(t.split_whitespace().map(str::to_string));
            } else if let Some(f) = line.strip_prefix("@ ") {
                file = Some(f.trim().to_string());
            } else if line == "<<<" {
                let file = file
                    .clone()
                    .ok_or("a `<<<` block before any `@ file` line")?;
                let search = block(&mut lines, "===")?;
                let replace = block(&mut lines, ">>>")?;
                changes.push(Change {
                    file,
                    search,
                    replace,
                });
            }
        }
        if about.is_empty() || targets.is_empty() || changes.is_empty() {
            return Err("a spec needs a first line, a `Targets:` line and a change".into());
        }
        Ok(Mutant {
            about,
            targets,
            changes,
        })
    }

    /// Applies the changes, in order, to the tree at `root` (with `write`
    /// false, only checks that they apply): each search text must stand
    /// exactly once in its file as the earlier changes left it, and each
    /// replacement must change it.
    pub fn apply(&self, root: &Path, write: bool) -> Result<(), String> {
        let mut files: BTreeMap<&str, String> = BTreeMap::new();
        for change in &self.changes {
            let text = match files.entry(&change.file) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let path = root.join(&change.file);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|err| format!("{}: {err}", path.display()))?;
                    e.insert(text)
                }
            };
            let found = text.matches(change.search.as_str()).count();
            if found != 1 {
                let first = change.search.lines().next().unwrap_or_default().trim();
                return Err(format!(
                    "{}: the search text (starting `{first}`) stands {found} times, not once",
                    change.file
                ));
            }
            if change.search == change.replace {
                return Err(format!("{}: the replacement changes nothing", change.file));
            }
            *text = text.replacen(change.search.as_str(), &change.replace, 1);
        }
        if write {
            for (file, text) in files {
                let path = root.join(file);
                std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        Ok(())
    }
}

/// The lines up to (not including) the line `end`, each with its newline.
fn block<'a>(lines: &mut impl Iterator<Item = &'a str>, end: &str) -> Result<String, String> {
    let mut out = String::new();
    for line in lines.by_ref() {
        if line == end {
            return Ok(out);
        }
        out.push_str(line);
        out.push('\n');
    }
    Err(format!("a block without its closing `{end}`"))
}
