#!/usr/bin/env bash
# The README's test command: the whole stable suite, formatting and lints.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2p' "$0" | sed 's/^# //'; exit 0 ;; esac

step() { printf '\n==> %s\n' "$*"; }

# The kernel's dbitmap.h, so that cargo test compares our DBitmap with it
# and replays corpus/kernel_dbitmap. Installs Debian's linux-source-6.12 as
# root; elsewhere (no root, no apt) the kernel tests say they skipped, except
# in CI, where the header must be there.
step "the kernel's dbitmap.h (ci/kernel-source.sh)"
if ! ci/kernel-source.sh; then
    [ "${CI:-}" != true ] || { echo "ci/test.sh: CI needs the kernel header" >&2; exit 1; }
    echo "note: no kernel header: the kernel_dbitmap corpus replay and the kernel comparisons are skipped"
fi

step "cargo test --workspace (stable)"
cargo test --workspace

step "loom: every interleaving of two threads on SharedHandleTable"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo
echo "ci/test.sh: all checks passed"
