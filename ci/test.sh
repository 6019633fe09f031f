#!/usr/bin/env bash
# The README's test command: the whole stable suite, formatting and lints.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2p' "$0" | sed 's/^# //'; exit 0 ;; esac

step() { printf '\n==> %s\n' "$*"; }

# The kernel sources the tests compile: 6.12's and 7.3's dbitmap.h, so that
# cargo test compares our DBitmap with them and replays corpus/kernel_dbitmap,
# and 7.3's rust/kernel/{id_pool,bitmap}.rs, which kernel-idpool compiles and
# runs beside our IdPool. Installs Debian's linux-source-6.12 as root and
# fetches linux-source-7.3 from trixie-backports; elsewhere (no root, no apt)
# the kernel tests say they skipped, except in CI, where the sources must be
# there (the tests check CI=true too).
step "the kernel sources (ci/kernel-source.sh)"
if ! ci/kernel-source.sh; then
    [ "${CI:-}" != true ] || { echo "ci/test.sh: CI needs the kernel sources" >&2; exit 1; }
    echo "note: no kernel sources: the kernel_dbitmap corpus replay and the kernel comparisons are skipped"
fi

step "cargo test --workspace (stable)"
cargo test --workspace

# Mainline's bitmap.rs has two behaviours for out-of-range bits:
# CONFIG_RUST_BITMAP_HARDENED panics, the default logs and ignores. The
# workspace run above is the default; this is the hardened build (its KUnit
# tests and examples, and the comparison with our IdPool).
step "cargo test -p kernel-idpool --features hardened (CONFIG_RUST_BITMAP_HARDENED)"
cargo test -p kernel-idpool --features hardened

step "loom: every interleaving of two threads on SharedHandleTable"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p kernel-idpool --all-targets --features hardened -- -D warnings

echo
echo "ci/test.sh: all checks passed"
