//! The repository is self-contained: every relative Markdown link in the
//! README and under `docs/` names a file or directory it holds; and every
//! code block those pages open is closed.

use idpool_harness::files;
use std::path::{Path, PathBuf};

/// The repository's root (this crate is one folder below it).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository's root")
}

/// The README and every Markdown page under `docs/`, with their text.
fn pages(root: &Path) -> Vec<(PathBuf, String)> {
    let docs = files::walk(&root.join("docs"), &|p: &Path| {
        p.is_dir() || p.extension().is_some_and(|e| e == "md")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    std::iter::once(root.join("README.md"))
        .chain(docs)
        .map(|page| {
            let text = std::fs::read_to_string(&page)
                .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
            (page, text)
        })
        .collect()
}

/// The prose of `text`: its lines outside fenced code blocks, each with its
/// `code spans` cut out; and whether a fenced block is left open.
fn prose(text: &str) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            // Every other backtick-delimited stretch is code.
            lines.push(line.split('`').step_by(2).collect::<String>());
        }
    }
    (lines, fenced)
}

/// The paths of the inline Markdown links in `text` that point into the
/// repository: `[text](path)`, `[text](<path>)` or `[text](path "title")`,
/// with neither a scheme (`https://`) nor a bare anchor (`#section`); an
/// anchor or a query after a path is dropped. Links in code (fenced
/// blocks, `code spans`) are not links.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    for line in prose(text).0 {
        for (at, _) in line.match_indices("](") {
            let Some(target) = link_target(&line[at + 2..]) else {
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
    assert!(!prose(text).1, "every block closed");
    assert!(prose("text\n```sh\ncode\n").1, "a block left open");
}

#[test]
fn every_relative_link_names_a_file_the_repository_holds() {
    let root = root();
    let build = root.join("target");
    let pages = pages(&root);
    let mut checked = 0;
    let mut broken = Vec::new();
    for (page, text) in &pages {
        for link in relative_links(text) {
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
    let root = root();
    let unclosed: Vec<String> = pages(&root)
        .iter()
        .filter(|(_, text)| prose(text).1)
        .map(|(page, _)| {
            page.strip_prefix(&root)
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

/// The command table of `docs/commands.md` is the language's vocabulary
/// (`idpool::driver::VOCABULARY`), as the `vocabulary` binary writes it.
#[test]
fn the_command_table_is_the_vocabulary() {
    let path = root().join("docs/commands.md");
    let text = std::fs::read_to_string(&path).expect("docs/commands.md");
    let table = idpool::driver::command::with_table(&text)
        .expect("docs/commands.md has the vocabulary markers");
    assert!(
        table == text,
        "docs/commands.md's command table is not the vocabulary's: run \
         `cargo run -p idpool-harness --bin vocabulary -- docs/commands.md`"
    );
}

/// The uapi table of `docs/commands.md` names every ioctl, `BC_`, `BR_`
/// and object type of 7.3's uapi header once, and each ioctl or `BC_`
/// marked Y is one a command of the vocabulary makes. The header comes
/// from the extracted sources (`ci/kernel-source.sh`); without them the
/// test says it skipped, except in CI, where they must be there.
#[test]
fn the_uapi_table_names_every_name_of_the_header() {
    let header = root().join(".cache/kernel-7.3/include/uapi/linux/android/binder.h");
    let Ok(header) = std::fs::read_to_string(&header) else {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v != "true"),
            "CI needs {} (ci/kernel-source.sh)",
            header.display()
        );
        eprintln!("skipped: no {} (ci/kernel-source.sh)", header.display());
        return;
    };
    // The names the header defines: its ioctls and codes (`NAME = _IO...`
    // or `NAME = _IOR(...`) and object types (`BINDER_TYPE_* = ...`).
    // A value may start on the line after its `=`.
    let mut names = std::collections::BTreeSet::new();
    let lines: Vec<&str> = header.lines().map(str::trim).collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((left, right)) = line.split_once('=') else {
            continue;
        };
        let name = left.trim();
        let right = match right.trim() {
            "" => lines.get(i + 1).copied().unwrap_or(""),
            right => right,
        };
        let code = right.starts_with("_IO") && name.starts_with(['B']);
        if (code || name.starts_with("BINDER_TYPE_"))
            && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        {
            names.insert(name.to_string());
        }
    }
    assert!(
        names.len() > 60,
        "too few names parsed from the header: {names:?}"
    );
    let text = std::fs::read_to_string(root().join("docs/commands.md")).expect("docs/commands.md");
    let table = text
        .split("<!-- uapi -->")
        .nth(1)
        .and_then(|t| t.split("<!-- /uapi -->").next())
        .expect("docs/commands.md has the uapi markers");
    let rows: Vec<(String, String, String)> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let name = cells[0].trim_start_matches("| ").trim_matches('`');
            (name.to_string(), cells[1].to_string(), cells[2].to_string())
        })
        .collect();
    let in_table: std::collections::BTreeSet<String> =
        rows.iter().map(|(n, _, _)| n.clone()).collect();
    assert_eq!(in_table.len(), rows.len(), "a name has two rows");
    let missing: Vec<_> = names.difference(&in_table).collect();
    let extra: Vec<_> = in_table.difference(&names).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the uapi table of docs/commands.md against the header: missing {missing:?}, not in the header {extra:?}"
    );
    // Every Y of an ioctl or a BC_ is made by a command of the vocabulary
    // (BINDER_WRITE_READ by every BC_ row).
    let made: std::collections::BTreeSet<String> = idpool::driver::VOCABULARY
        .iter()
        .map(|r| match r.uapi {
            idpool::driver::Uapi::Ioctl(name) | idpool::driver::Uapi::Bc(name) => name.to_string(),
            idpool::driver::Uapi::Close => String::new(),
        })
        .chain(["BINDER_WRITE_READ".to_string()])
        .collect();
    for (name, kind, y) in &rows {
        if y == "Y" && (kind == "ioctl" || kind == "BC") {
            assert!(
                made.contains(name),
                "docs/commands.md marks {name} Y, but no command of the vocabulary makes it"
            );
        }
    }
}
