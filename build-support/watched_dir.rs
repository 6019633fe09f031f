//! What the build scripts of `kernel-dbitmap` and `kernel-idpool` share
//! (each includes this file with `#[path]`).

use std::path::Path;

/// Creates the watched cache directory `dir` when it is missing, dated at
/// the epoch: made while this script runs, it would be newer than the run,
/// and cargo would run the script (and rebuild every crate above it) once
/// more at the next build, a second build of the harness on a fresh clone.
/// Filling it later (ci/kernel-source.sh) changes its time, and the script
/// runs again.
pub fn watched_dir(dir: &Path) {
    if dir.is_dir() {
        return;
    }
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1);
    if let Err(e) = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::File::open(dir))
        .and_then(|f| f.set_modified(old))
    {
        println!("cargo::warning=cannot create {}: {e}", dir.display());
    }
}
