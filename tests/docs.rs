//! The repository is self-contained: every relative Markdown link in the
//! README and under `docs/` names a file or directory it holds; and every
//! code block those pages open is closed.

use std::path::{Path, PathBuf};

/// The paths of the inline Markdown links in `text` that point into the
/// repository: `[text](path)`, `[text](<path>)` or `[text](path "title")`,
/// with neither a scheme (`https://`) nor a bare anchor (`#section`); an
/// anchor or a query after a path is dropped. Links in code (fenced
/// blocks, `code spans`) are not links.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Every other backtick-delimited stretch is code.
        let prose: String = line
            .split('`')
            .enumerate()
            .map(|(i, part)| if i % 2 == 0 { part } else { "" })
            .collect();
        for (at, _) in prose.match_indices("](") {
            let Some(target) = link_target(&prose[at + 2..]) else {
                continue;
            };
            let target = match target.strip_prefix('<') {
                Some(bracketed) => bracketed.split('>').next().unwrap_or_default(),
                None => target.split_whitespace().next().unwrap_or_default(),
            };
            let external = target.contains("://") || target.starts_with("mailto:");
            let path = target.split(['#', '?']).next().unwrap_or_default();
            if !external && !path.is_empty() {
                links.push(path.replace("%20", " "));
            }
        }
    }
    links
}

/// What follows `](` up to its closing parenthesis (parentheses inside it
/// balanced), or `None` when it is not closed on the line.
fn link_target(rest: &str) -> Option<&str> {
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(&rest[..i]),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
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
fn links_are_told_from_urls_anchors_and_code() {
    let text = "see [a](b.md), [c](https://x.org/y.md), [d](#e), [f](../g/h.md#i), \
                [mail](mailto:a@b), `[k](in-code.md)`, [t](titled.md \"A title\"), \
                [p](<with space.md>), [q](page.md?x=1), [r](notes_(2).md) and f(x)\n\
                ```\n[fenced](no.md)\n```\n[after](yes.md)";
    assert_eq!(
        relative_links(text),
        [
            "b.md",
            "../g/h.md",
            "titled.md",
            "with space.md",
            "page.md",
            "notes_(2).md",
            "yes.md"
        ]
    );
}

#[test]
fn every_relative_link_names_a_file_the_repository_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .expect("the repository's root");
    let build = root.join("target");
    let mut pages = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut pages);
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text =
            std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for link in relative_links(&text) {
            checked += 1;
            let base = if link.starts_with('/') {
                root.clone()
            } else {
                page.parent().expect("a page's directory").to_path_buf()
            };
            let held = base
                .join(link.trim_start_matches('/'))
                .canonicalize()
                .is_ok_and(|target| target.starts_with(&root) && !target.starts_with(&build));
            if !held {
                let page = page.strip_prefix(&root).unwrap_or(page);
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

#[test]
fn every_code_block_is_closed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut pages);
    let unclosed: Vec<String> = pages
        .iter()
        .filter(|page| {
            let text = std::fs::read_to_string(page).expect("a page");
            let fences = text
                .lines()
                .filter(|line| line.trim_start().starts_with("```"))
                .count();
            fences % 2 == 1
        })
        .map(|page| {
            page.strip_prefix(root)
                .unwrap_or(page)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        unclosed.is_empty(),
        "a code block left open (the rest of the page reads as code): {unclosed:?}"
    );
}
