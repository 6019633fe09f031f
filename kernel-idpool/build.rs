//! Finds mainline's `rust/kernel/id_pool.rs` and `rust/kernel/bitmap.rs` and
//! makes them modules of this crate, unchanged.
//!
//! - The files come from `$KERNEL_TREE/rust/kernel/` when `KERNEL_TREE` is
//!   set, else from `.cache/kernel-7.3/` at the workspace root (filled by
//!   `ci/kernel-source.sh --release 7.3` from Debian's `linux-source-7.3`).
//!   They are never copied: `$OUT_DIR/modules.rs` declares
//!   `#[path = "<the file>"] pub mod id_pool;` (and `bitmap`), and `src/lib.rs`
//!   includes that. No rewrite is applied to them.
//! - Their rustdoc examples, which the kernel runs as KUnit tests, become
//!   `#[test]` functions in `$OUT_DIR/doctests.rs`, wrapped the way rustdoc
//!   wraps an example (see [`doctests`]).
//! - cfgs: `kernel_idpool` when the files were found; `CONFIG_64BIT` on
//!   64-bit targets; `CONFIG_RUST_BITMAP_KUNIT_TEST` (the KUnit module of
//!   `bitmap.rs`, compiled under `cfg(test)` by our `kunit_tests`);
//!   `CONFIG_RUST_BITMAP_HARDENED` with the `hardened` feature.
//! - Provenance for the crate (`env!`): the source package version, the
//!   directory and each file's sha256. A file of a Debian package whose
//!   sha256 is not in [`KNOWN`] fails the build with what to do; a
//!   `KERNEL_TREE` of another version only warns.
//!
//! Without the files the crate still builds: `available()` is false and
//! `unavailable_reason()` says why.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The mainline release whose files are read from the cache.
const MAINLINE: &str = "7.3";

/// The files, relative to the kernel tree, and the module each becomes.
const FILES: [(&str, &str); 2] = [
    ("rust/kernel/bitmap.rs", "bitmap"),
    ("rust/kernel/id_pool.rs", "id_pool"),
];

/// A source this crate was checked against: its package version and the
/// sha256 of each of [`FILES`], in order.
struct Known {
    version: &'static str,
    sha256: [&'static str; 2],
}

/// Every source the shim was written and checked against. A later package
/// with other files fails the build until someone has reviewed the change
/// and added a row.
const KNOWN: &[Known] = &[Known {
    version: "linux-source-7.3 7.3.4-1~bpo13+1",
    sha256: [
        "2be16bf1ff87172b5cee1aba8e5ae7d13a7d77f68ab128a257d82e89d0a22605",
        "573e9b4209aaefbd2c25e52714931de9d7bb58b55c31e14feda8958759100afa",
    ],
}];

// `watched_dir`, shared with the other kernel crate's build script.
#[path = "../build-support/watched_dir.rs"]
mod watched_dir;
use watched_dir::watched_dir;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    println!("cargo::rerun-if-env-changed=KERNEL_TREE");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../build-support/watched_dir.rs");

    if env::var("CARGO_CFG_TARGET_POINTER_WIDTH").as_deref() == Ok("64") {
        println!("cargo::rustc-cfg=CONFIG_64BIT");
    }
    println!("cargo::rustc-cfg=CONFIG_RUST_BITMAP_KUNIT_TEST");
    if env::var_os("CARGO_FEATURE_HARDENED").is_some() {
        println!("cargo::rustc-cfg=CONFIG_RUST_BITMAP_HARDENED");
    }

    // Watched, and created empty if missing, so that the script runs again
    // once ci/kernel-source.sh fills it (a watched path that does not exist
    // reruns the script on every build).
    let cache = manifest
        .parent()
        .unwrap()
        .join(format!(".cache/kernel-{MAINLINE}"));
    watched_dir(&cache);
    println!("cargo::rerun-if-changed={}", cache.display());

    let found = locate(&cache);
    let mut modules = String::new();
    let mut tests = String::new();
    let (dir, version, sums) = match &found {
        Ok(source) => {
            for (file, module) in FILES {
                let path = source.dir.join(file);
                println!("cargo::rerun-if-changed={}", path.display());
                // The kernel's own code is not held to this crate's lints
                // beyond what the kernel itself checks.
                writeln!(
                    modules,
                    "#[allow(clippy::all, clippy::undocumented_unsafe_blocks, missing_docs)]\n\
                     #[path = {:?}]\npub mod {module};",
                    path.display().to_string()
                )
                .unwrap();
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                tests.push_str(&doctests(module, &text));
            }
            check_known(source);
            println!("cargo::rustc-cfg=kernel_idpool");
            (
                source.dir.display().to_string(),
                source.version.clone(),
                source.sha256.clone(),
            )
        }
        Err(_) => (String::new(), String::new(), vec![String::new(); 2]),
    };
    std::fs::write(out.join("modules.rs"), modules).unwrap();
    std::fs::write(out.join("doctests.rs"), tests).unwrap();

    println!("cargo::rustc-env=KERNEL_IDPOOL_DIR={dir}");
    println!("cargo::rustc-env=KERNEL_IDPOOL_VERSION={version}");
    println!("cargo::rustc-env=KERNEL_IDPOOL_BITMAP_SHA256={}", sums[0]);
    println!("cargo::rustc-env=KERNEL_IDPOOL_ID_POOL_SHA256={}", sums[1]);
    println!(
        "cargo::rustc-env=KERNEL_IDPOOL_UNAVAILABLE={}",
        found.as_ref().err().map_or("", String::as_str)
    );
}

/// Where the files were found.
struct Source {
    dir: PathBuf,
    /// `linux-source-7.3 <Debian version>`, or `kernel tree X.Y.Z`.
    version: String,
    /// Of each of [`FILES`], in order.
    sha256: Vec<String>,
    /// From `KERNEL_TREE` (else from a Debian package, via the cache).
    tree: bool,
}

fn locate(cache: &Path) -> Result<Source, String> {
    let (dir, version, tree) = match env::var_os("KERNEL_TREE") {
        Some(tree) if !tree.is_empty() => {
            let tree = PathBuf::from(tree);
            let version = kernel_tree_version(&tree).unwrap_or_else(|| "kernel tree".into());
            (tree, version, true)
        }
        _ => {
            let version = std::fs::read_to_string(cache.join("VERSION"))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default();
            (cache.to_owned(), version, false)
        }
    };
    let mut sha256 = Vec::new();
    for (file, _) in FILES {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(if tree {
                format!("KERNEL_TREE={} has no {file}", dir.display())
            } else {
                format!(
                    "no mainline kernel source: run ci/kernel-source.sh --release {MAINLINE} \
                     or set KERNEL_TREE (looked for {})",
                    path.display()
                )
            });
        }
        sha256.push(
            sha256sum(&path).ok_or_else(|| {
                format!("cannot hash {} (is sha256sum installed?)", path.display())
            })?,
        );
    }
    Ok(Source {
        dir,
        version,
        sha256,
        tree,
    })
}

/// Fails the build when a Debian package brings files this crate was not
/// checked against; warns for a `KERNEL_TREE`.
fn check_known(source: &Source) {
    if KNOWN.iter().any(|k| k.sha256[..] == source.sha256[..]) {
        return;
    }
    let listed: Vec<String> = FILES
        .iter()
        .zip(&source.sha256)
        .map(|((file, _), sum)| format!("{file} {sum}"))
        .collect();
    let message = format!(
        "{} ({}) has files this crate was not checked against: {}. Diff them against \
         the last known source ({}), update the shim (src/shim/) if what they import or call \
         changed, then add a row to KNOWN in kernel-idpool/build.rs",
        source.dir.display(),
        source.version,
        listed.join(", "),
        KNOWN
            .iter()
            .map(|k| k.version)
            .collect::<Vec<_>>()
            .join(", ")
    );
    if source.tree {
        println!("cargo::warning=kernel-idpool: {message}");
    } else {
        panic!("kernel-idpool: {message}");
    }
}

fn sha256sum(path: &Path) -> Option<String> {
    let out = Command::new("sha256sum").arg(path).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.split_whitespace().next()?.to_owned())
}

/// "kernel tree 7.3.4" from the tree's top-level Makefile.
fn kernel_tree_version(tree: &Path) -> Option<String> {
    let makefile = std::fs::read_to_string(tree.join("Makefile")).ok()?;
    let field = |name: &str| {
        makefile.lines().find_map(|l| {
            l.strip_prefix(name)?
                .trim()
                .strip_prefix('=')
                .map(str::trim)
        })
    };
    Some(format!(
        "kernel tree {}.{}.{}",
        field("VERSION")?,
        field("PATCHLEVEL")?,
        field("SUBLEVEL")?
    ))
}

/// The rustdoc examples of `text` (the file of `module`) as `#[test]`
/// functions, the way rustdoc builds a doctest and the kernel turns it into
/// a KUnit case:
///
/// - the code blocks of `///` and `//!` comments whose fence is empty,
///   `rust` or `no_run` (`ignore`, `compile_fail`, `text` and other languages
///   are skipped, as rustdoc does);
/// - a line `# code` is hidden code: the `# ` is dropped;
/// - the kernel's doctests see `kernel::prelude::*`;
/// - an example ending in `(())` (`Ok::<(), E>(())`) becomes the body of a
///   function returning `Result<(), impl Debug>` that must return `Ok`;
/// - a `no_run` example is compiled, never run.
///
/// Each test is named after its module and the line of its opening fence.
fn doctests(module: &str, text: &str) -> String {
    let mut out = String::new();
    let mut block: Option<(usize, bool, Vec<String>)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let Some(doc) = trimmed
            .strip_prefix("///")
            .or_else(|| trimmed.strip_prefix("//!"))
        else {
            // A code block ends with its comment.
            block = None;
            continue;
        };
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        if let Some(info) = doc.trim_start().strip_prefix("```") {
            match block.take() {
                Some((start, no_run, lines)) => {
                    out.push_str(&doctest(module, start, no_run, &lines));
                }
                None => {
                    let info: Vec<&str> = info.split(',').map(str::trim).collect();
                    let runnable = info.iter().all(|i| matches!(*i, "" | "rust" | "no_run"));
                    if runnable {
                        block = Some((n + 1, info.contains(&"no_run"), Vec::new()));
                    } else {
                        // Skip to the closing fence.
                        block = Some((0, false, Vec::new()));
                    }
                }
            }
            continue;
        }
        if let Some((_, _, lines)) = &mut block {
            let code = if doc.trim() == "#" {
                String::new()
            } else if let Some(hidden) = doc.trim_start().strip_prefix("# ") {
                hidden.to_owned()
            } else {
                doc.to_owned()
            };
            lines.push(code);
        }
    }
    out
}

fn doctest(module: &str, line: usize, no_run: bool, lines: &[String]) -> String {
    if line == 0 {
        return String::new(); // a skipped block
    }
    let body = lines.join("\n");
    let returns_result = body.trim_end().ends_with("(())");
    let main = if returns_result {
        format!(
            "fn _doctest_main() {{\n\
             fn _inner() -> ::core::result::Result<(), impl ::core::fmt::Debug> {{\n\
             {body}\n}}\n_inner().unwrap()\n}}"
        )
    } else {
        format!("fn _doctest_main() {{\n{body}\n}}")
    };
    let (name, run) = if no_run {
        (format!("{module}_rs_line_{line}_no_run"), "")
    } else {
        (format!("{module}_rs_line_{line}"), "_doctest_main();")
    };
    format!(
        "/// The example at line {line} of `{module}.rs`.\n\
         #[test]\n\
         #[allow(unused, clippy::all)]\n\
         fn {name}() {{\n\
         use kernel::prelude::*;\n\
         {main}\n\
         {run}\n\
         }}\n\n"
    )
}
