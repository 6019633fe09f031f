//! Finds the kernel's `drivers/android/dbitmap.h` and compiles it with our
//! shim.
//!
//! - The shim (`shim/shim.c`, ours) is always compiled if a C compiler
//!   works: `cfg(kernel_dbitmap_shim)`.
//! - The header comes from `$KERNEL_TREE/drivers/android/dbitmap.h` when
//!   `KERNEL_TREE` is set, else from `.cache/kernel/` at the workspace root
//!   (filled by `ci/kernel-source.sh`). When it is found and compiles:
//!   `cfg(kernel_dbitmap)`. When not, the crate still builds and
//!   `available()` is false with the reason.
//! - Under cargo-fuzz (`--cfg fuzzing` or sanitizer-coverage in the rustflags)
//!   the C gets the same coverage instrumentation as the Rust code (clang
//!   only); under `-Zsanitizer=address` it gets `-fsanitize=address`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const MEMBER: &str = "drivers/android/dbitmap.h";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo::rustc-check-cfg=cfg(kernel_dbitmap, kernel_dbitmap_shim)");
    println!("cargo::rerun-if-env-changed=KERNEL_TREE");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rerun-if-changed=shim");
    println!("cargo::rerun-if-changed=build.rs");

    // The cache directory is watched, created empty if missing, so that
    // the script runs again once ci/kernel-source.sh fills it. (A watched
    // path that does not exist made the script, and so this crate and the
    // harness, rebuild on every cargo invocation on a machine without the
    // header: ~100 s inside every timed `cargo fuzz run` of the scripts.)
    let cache = manifest.parent().unwrap().join(".cache/kernel");
    if let Err(e) = std::fs::create_dir_all(&cache) {
        println!("cargo::warning=cannot create {}: {e}", cache.display());
    }
    println!("cargo::rerun-if-changed={}", cache.display());

    let (header, version) = match env::var_os("KERNEL_TREE") {
        Some(tree) if !tree.is_empty() => {
            let tree = PathBuf::from(tree);
            let header = tree.join(MEMBER);
            println!("cargo::rerun-if-changed={}", header.display());
            if header.is_file() {
                (Ok(header), kernel_tree_version(&tree))
            } else {
                let reason = format!("KERNEL_TREE={} has no {MEMBER}", tree.display());
                (Err(reason), None)
            }
        }
        _ => {
            let header = cache.join(MEMBER);
            if header.is_file() {
                let version = std::fs::read_to_string(cache.join("VERSION"))
                    .ok()
                    .map(|v| v.trim().to_owned());
                (Ok(header), version)
            } else {
                let reason = format!(
                    "no kernel header: run ci/kernel-source.sh or set KERNEL_TREE (looked for {})",
                    header.display()
                );
                (Err(reason), None)
            }
        }
    };

    let shim = compile_shim(&manifest);
    let status: Result<PathBuf, String> = match (shim, header) {
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(header)) => compile_header(&manifest, &header).map(|()| header),
    };

    let (sha256, version) = match &status {
        Ok(header) => (sha256(header), version),
        Err(_) => (None, None),
    };
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_HEADER={}",
        status
            .as_ref()
            .map_or(String::new(), |h| h.display().to_string())
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_SHA256={}",
        sha256.unwrap_or_default()
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_VERSION={}",
        version.unwrap_or_default()
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_UNAVAILABLE={}",
        status.as_ref().err().map_or("", String::as_str)
    );
    if status.is_ok() {
        println!("cargo::rustc-cfg=kernel_dbitmap");
    }
}

/// A `cc::Build` with the instrumentation the Rust side is built with.
fn build() -> cc::Build {
    let mut build = cc::Build::new();
    build.warnings(true).flag_if_supported("-std=gnu11");
    let rustflags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let sanitize = env::var("CARGO_CFG_SANITIZE").unwrap_or_default();
    let asan = sanitize.split(',').any(|s| s == "address");
    let coverage = coverage_flags(&rustflags);
    // libFuzzer's inline 8-bit counters are clang's; prefer clang when
    // instrumenting and CC was not chosen by the user.
    if (asan || !coverage.is_empty()) && env::var_os("CC").is_none() && has_clang() {
        build.compiler("clang");
    }
    if !coverage.is_empty() {
        if build.get_compiler().is_like_clang() {
            build.flag(format!("-fsanitize-coverage={}", coverage.join(",")));
        } else {
            println!(
                "cargo::warning=kernel-dbitmap: the C compiler is not clang, \
                 so the fuzzer does not see the C code's branches (install clang)"
            );
        }
    } else if env::var_os("CARGO_CFG_FUZZING").is_some() {
        println!(
            "cargo::warning=kernel-dbitmap: --cfg fuzzing without sanitizer-coverage \
             flags: the C code is not instrumented"
        );
    }
    if asan {
        build
            .flag("-fsanitize=address")
            .flag("-fno-omit-frame-pointer");
    }
    build
}

/// The clang `-fsanitize-coverage=` options matching the Rust side's
/// (libFuzzer: inline 8-bit counters, PC table, compares; AFL++ and
/// honggfuzz: PC guards), so the C talks to the same runtime.
fn coverage_flags(rustflags: &str) -> Vec<&'static str> {
    const MAP: [(&str, &str); 6] = [
        (
            "sanitizer-coverage-inline-8bit-counters",
            "inline-8bit-counters",
        ),
        ("sanitizer-coverage-pc-table", "pc-table"),
        ("sanitizer-coverage-trace-pc-guard", "trace-pc-guard"),
        ("sanitizer-coverage-trace-compares", "trace-cmp"),
        ("sanitizer-coverage-trace-divs", "trace-div"),
        ("sanitizer-coverage-trace-geps", "trace-gep"),
    ];
    MAP.iter()
        .filter(|(rust, _)| rustflags.contains(rust))
        .map(|&(_, c)| c)
        .collect()
}

fn has_clang() -> bool {
    Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn compile_shim(manifest: &Path) -> Result<(), String> {
    build()
        .include(manifest.join("shim/include"))
        .file(manifest.join("shim/shim.c"))
        .try_compile("kdb_shim")
        .map_err(|e| format!("the C shim did not compile: {e}"))?;
    println!("cargo::rustc-cfg=kernel_dbitmap_shim");
    Ok(())
}

fn compile_header(manifest: &Path, header: &Path) -> Result<(), String> {
    // Only our shim directory and the header's own directory are on the
    // include path: <linux/bitmap.h> must resolve to the shim.
    build()
        .include(manifest.join("shim/include"))
        .include(header.parent().unwrap())
        .file(manifest.join("shim/dbitmap_wrap.c"))
        .try_compile("kdb_dbitmap")
        .map_err(|e| format!("{} did not compile with the shim: {e}", header.display()))
}

fn sha256(path: &Path) -> Option<String> {
    let out = Command::new("sha256sum").arg(path).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.split_whitespace().next()?.to_owned())
}

/// "kernel tree 6.12.117" from the tree's top-level Makefile.
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
