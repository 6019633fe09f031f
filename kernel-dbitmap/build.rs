//! Finds the kernel's `drivers/android/dbitmap.h` and compiles it with our
//! shim.
//!
//! - The shim (`shim/shim.c`, ours) is always compiled if a C compiler
//!   works: `cfg(kernel_dbitmap_shim)`.
//! - The primary header (symbols `kdb_*`) comes from
//!   `$KERNEL_TREE/drivers/android/dbitmap.h` when `KERNEL_TREE` is set,
//!   else from `.cache/kernel/` at the workspace root (Debian's
//!   `linux-source-6.12`, filled by `ci/kernel-source.sh`). When it is found
//!   and compiles: `cfg(kernel_dbitmap)`. When not, the crate still builds
//!   and `available()` is false with the reason.
//! - Mainline's header (symbols `kdb_m73_*`) comes from `.cache/kernel-7.3/`
//!   (`linux-source-7.3`): `cfg(kernel_dbitmap_m73)`.
//! - A header read from a cache must have the sha256 pinned for its release
//!   in [`PINNED`], or the build fails with what to do.
//! - The historical variant (symbols `kdb_hist_*`): a copy of the primary
//!   header in `OUT_DIR` with `patches/dbitmap-free-dangling-2024.patch`
//!   applied by exact string replacement (a patch that no longer applies
//!   fails the build): `cfg(kernel_dbitmap_hist)`.
//! - Under cargo-fuzz (`--cfg fuzzing` or sanitizer-coverage in the rustflags)
//!   the C gets the same coverage instrumentation as the Rust code (clang
//!   only); under `-Zsanitizer=address` it gets `-fsanitize=address`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const MEMBER: &str = "drivers/android/dbitmap.h";

/// The header of each Debian package the cache is filled from, as this
/// crate was checked against it: (release, cache directory under
/// `.cache/`, sha256). The two are identical today. A later package whose
/// header differs fails the build (see [`check_pinned`]).
const PINNED: [(&str, &str, &str); 2] = [
    (
        "6.12",
        "kernel",
        "70082ae99bc0a5604b0e569d54cb0866ce7a90f18e7f05711915c0e05ac1c845",
    ),
    (
        "7.3",
        "kernel-7.3",
        "70082ae99bc0a5604b0e569d54cb0866ce7a90f18e7f05711915c0e05ac1c845",
    ),
];

/// The patch that makes the historical variant (see the patch's header).
const HISTORICAL_PATCH: &str = "patches/dbitmap-free-dangling-2024.patch";

/// A header found for one of the symbol sets.
struct Found {
    header: PathBuf,
    version: Option<String>,
    sha256: Option<String>,
}

// `watched_dir`, shared with the other kernel crate's build script.
#[path = "../build-support/watched_dir.rs"]
mod watched_dir;
use watched_dir::watched_dir;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    println!(
        "cargo::rustc-check-cfg=cfg(kernel_dbitmap, kernel_dbitmap_shim, kernel_dbitmap_m73, kernel_dbitmap_hist)"
    );
    println!("cargo::rerun-if-env-changed=KERNEL_TREE");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rerun-if-changed=shim");
    println!("cargo::rerun-if-changed=patches");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../build-support/watched_dir.rs");

    // The cache directories are watched, created empty if missing, so that
    // the script runs again once ci/kernel-source.sh fills them. (A watched
    // path that does not exist made the script, and so this crate and the
    // harness, rebuild on every cargo invocation on a machine without the
    // header: ~100 s inside every timed `cargo fuzz run` of the scripts.)
    let root = manifest.parent().unwrap().join(".cache");
    for (_, dir, _) in PINNED {
        let cache = root.join(dir);
        watched_dir(&cache);
        println!("cargo::rerun-if-changed={}", cache.display());
    }

    // The primary header (the `kdb_` symbols): KERNEL_TREE's, else 6.12's.
    let primary: Result<Found, String> = match env::var_os("KERNEL_TREE") {
        Some(tree) if !tree.is_empty() => {
            let tree = PathBuf::from(tree);
            let header = tree.join(MEMBER);
            println!("cargo::rerun-if-changed={}", header.display());
            if header.is_file() {
                Ok(Found {
                    sha256: sha256(&header),
                    version: kernel_tree_version(&tree),
                    header,
                })
            } else {
                Err(format!("KERNEL_TREE={} has no {MEMBER}", tree.display()))
            }
        }
        _ => cached(&root, PINNED[0]),
    };
    // Mainline's (the `kdb_m73_` symbols), from its cache only.
    let mainline = cached(&root, PINNED[1]);

    let shim = compile_shim(&manifest);
    let compiled =
        |found: &Result<Found, String>, prefix: &str, dir: Option<&Path>| match (&shim, found) {
            (Err(e), _) | (Ok(()), Err(e)) => Err(e.clone()),
            (Ok(()), Ok(f)) => {
                let include = dir.unwrap_or_else(|| f.header.parent().unwrap());
                compile_header(&manifest, include, prefix).map_err(|e| {
                    format!("{} did not compile with the shim: {e}", f.header.display())
                })
            }
        };

    let primary_status = compiled(&primary, "kdb_", None);
    let mainline_status = compiled(&mainline, "kdb_m73_", None);
    // The historical variant: the primary header, patched, in OUT_DIR.
    let historical_status = primary_status.clone().and_then(|()| {
        let header = &primary.as_ref().unwrap().header;
        let dir = out.join("historical");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let text = std::fs::read_to_string(header).map_err(|e| e.to_string())?;
        let patch = std::fs::read_to_string(manifest.join(HISTORICAL_PATCH))
            .map_err(|e| format!("{HISTORICAL_PATCH}: {e}"))?;
        let patched = apply_patch(&text, &patch).unwrap_or_else(|e| {
            panic!(
                "kernel-dbitmap: {HISTORICAL_PATCH} no longer applies to {}: {e}. \
                 Rewrite the patch for the new header (it must still leave \
                 dbitmap_free's pointer dangling), or drop the historical variant",
                header.display()
            )
        });
        std::fs::write(dir.join("dbitmap.h"), patched).map_err(|e| e.to_string())?;
        compiled(&primary, "kdb_hist_", Some(&dir))
    });

    emit("", &primary, &primary_status);
    emit("M73_", &mainline, &mainline_status);
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_HIST_UNAVAILABLE={}",
        historical_status.as_ref().err().map_or("", String::as_str)
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_HIST_PATCH={}",
        manifest.join(HISTORICAL_PATCH).display()
    );
    if primary_status.is_ok() {
        println!("cargo::rustc-cfg=kernel_dbitmap");
    }
    if mainline_status.is_ok() {
        println!("cargo::rustc-cfg=kernel_dbitmap_m73");
    }
    if historical_status.is_ok() {
        println!("cargo::rustc-cfg=kernel_dbitmap_hist");
    }
}

/// The header of a release's cache, checked against its pinned sha256.
fn cached(root: &Path, (release, dir, pinned): (&str, &str, &str)) -> Result<Found, String> {
    let cache = root.join(dir);
    let header = cache.join(MEMBER);
    if !header.is_file() {
        return Err(format!(
            "no kernel header: run ci/kernel-source.sh --release {release} or set KERNEL_TREE \
             (looked for {})",
            header.display()
        ));
    }
    let version = std::fs::read_to_string(cache.join("VERSION"))
        .ok()
        .map(|v| v.trim().to_owned());
    let sha256 = sha256(&header);
    check_pinned(
        &header,
        version.as_deref(),
        sha256.as_deref(),
        release,
        pinned,
    );
    Ok(Found {
        header,
        version,
        sha256,
    })
}

/// Fails the build, loudly, when a package's header is not the one this
/// crate (and the model, and the historical patch) was checked against.
fn check_pinned(
    header: &Path,
    version: Option<&str>,
    sha256: Option<&str>,
    release: &str,
    pinned: &str,
) {
    let Some(sha256) = sha256 else {
        panic!(
            "kernel-dbitmap: cannot hash {} (is sha256sum installed?)",
            header.display()
        );
    };
    if sha256 != pinned {
        panic!(
            "kernel-dbitmap: {} ({}) has sha256 {sha256}, not the {pinned} pinned for \
             release {release}: the package changed drivers/android/dbitmap.h. Read the \
             change; carry it into the model (src/dbitmap.rs, src/version.rs) and the \
             wrapper (kernel-dbitmap/src/lib.rs) if behaviour changed; check that \
             {HISTORICAL_PATCH} still applies; then pin the new sha256 in PINNED in \
             kernel-dbitmap/build.rs (and in kernel-dbitmap/tests/sources.rs)",
            header.display(),
            version.unwrap_or("version unknown"),
        );
    }
}

/// The crate's view of one header: `KERNEL_DBITMAP_{prefix}HEADER`,
/// `..SHA256`, `..VERSION`, `..UNAVAILABLE`.
fn emit(prefix: &str, found: &Result<Found, String>, status: &Result<(), String>) {
    let ok = status.is_ok();
    let found = found.as_ref().ok().filter(|_| ok);
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_{prefix}HEADER={}",
        found.map_or(String::new(), |f| f.header.display().to_string())
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_{prefix}SHA256={}",
        found.and_then(|f| f.sha256.clone()).unwrap_or_default()
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_{prefix}VERSION={}",
        found.and_then(|f| f.version.clone()).unwrap_or_default()
    );
    println!(
        "cargo::rustc-env=KERNEL_DBITMAP_{prefix}UNAVAILABLE={}",
        status.as_ref().err().map_or("", String::as_str)
    );
}

/// Applies a unified diff's hunks to `text` by exact string replacement:
/// each hunk's old lines (context and `-`) must occur exactly once, and are
/// replaced by its new lines (context and `+`). Lines before the first
/// `@@`, and the `---`/`+++`/`@@` lines, are not hunk lines.
fn apply_patch(text: &str, patch: &str) -> Result<String, String> {
    let mut out = text.to_owned();
    let mut hunks: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for line in patch.lines() {
        if line.starts_with("@@") {
            hunks.push((Vec::new(), Vec::new()));
            continue;
        }
        let Some((old, new)) = hunks.last_mut() else {
            continue; // the description
        };
        if line.starts_with("---") || line.starts_with("+++") {
            continue;
        }
        match line.split_at_checked(1) {
            Some((" ", rest)) => {
                old.push(rest);
                new.push(rest);
            }
            Some(("-", rest)) => old.push(rest),
            Some(("+", rest)) => new.push(rest),
            _ if line.is_empty() => {
                old.push("");
                new.push("");
            }
            _ => return Err(format!("not a hunk line: {line:?}")),
        }
    }
    if hunks.is_empty() {
        return Err("no hunk".into());
    }
    for (i, (old, new)) in hunks.iter().enumerate() {
        let (old, new) = (old.join("\n") + "\n", new.join("\n") + "\n");
        match out.matches(&old).count() {
            1 => out = out.replacen(&old, &new, 1),
            n => return Err(format!("hunk {} matches {n} times, not once", i + 1)),
        }
    }
    Ok(out)
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

fn compile_header(manifest: &Path, header_dir: &Path, prefix: &str) -> Result<(), String> {
    // Only our shim directory and the header's own directory are on the
    // include path: <linux/bitmap.h> must resolve to the shim.
    build()
        .include(manifest.join("shim/include"))
        .include(header_dir)
        .define("KDB_PREFIX", prefix)
        .file(manifest.join("shim/dbitmap_wrap.c"))
        .try_compile(&format!("{prefix}dbitmap"))
        .map_err(|e| e.to_string())
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
