#!/usr/bin/env bash
# The README's test command: the whole stable suite, formatting and lints.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

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
