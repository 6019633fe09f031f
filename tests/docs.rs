//! The repository is self-contained: every relative Markdown link in the
//! README and under `docs/` names a file or directory it holds.

use std::path::{Path, PathBuf};

/// The targets of the Markdown links in `text` that point into the
/// repository: `[text](target)` with neither a scheme (`https://`) nor a
/// bare anchor (`#section`); an anchor after a path is dropped.
fn relative_links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')')?];
            let path = target.split('#').next().unwrap_or_default();
            let external = target.contains("://") || target.starts_with("mailto:");
            (!external && !path.is_empty() && !path.contains(char::is_whitespace)).then_some(path)
        })
        .collect()
}

/// Every `.md` file under `dir`, depth first.
fn markdown_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            markdown_under(&path, found);
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
}

#[test]
fn links_are_told_from_urls_and_anchors() {
    let text = "see [a](b.md), [c](https://x.org/y.md), [d](#e), [f](../g/h.md#i), \
                [mail](mailto:a@b), `f(x)` and [j](k l)";
    assert_eq!(relative_links(text), ["b.md", "../g/h.md"]);
}

#[test]
fn every_relative_link_names_a_file_the_repository_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut pages);
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text =
            std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for link in relative_links(&text) {
            checked += 1;
            let target = page.parent().expect("a page's directory").join(link);
            if !target.exists() {
                let page = page.strip_prefix(root).unwrap_or(page);
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found in {} pages",
        pages.len()
    );
    assert!(
        broken.is_empty(),
        "links to files the repository does not hold:\n{}",
        broken.join("\n")
    );
}
