#!/usr/bin/env bash
# Installs what the fuzz engines need, if missing:
#   ci/install-fuzzers.sh [cargo-fuzz] [afl] [honggfuzz]   (default: all three)
# cargo-fuzz and cargo-afl come from crates.io, at the versions pinned in
# ci/lib.sh; honggfuzz-rs builds honggfuzz from source and needs Debian's
# binutils-dev, libunwind-dev and libblocksruntime-dev. Every engine also
# gets Debian's clang, to instrument kernel-dbitmap's C code.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(cargo-fuzz afl honggfuzz)

# Whether crate $1 is installed at version $2 (`cargo install --list`
# prints "name vX.Y.Z:").
have_crate() { cargo install --list | grep -q "^$1 v$2:"; }

# `cargo install` of crate $1 at version $2, saying every WATCH_EVERY
# seconds what it is compiling (watch_run); its log is printed on a failure.
install_crate() {
    local log
    log=$(mktemp)
    step "installing $1 $2 (cargo install: a few minutes)"
    watch_run "installing $1" "$log" cargo install "$1" --version "=$2" --locked ||
        { tail -n 30 "$log" >&2; rm -f "$log"; return 1; }
    rm -f "$log"
}

# clang: kernel-dbitmap's build instruments the C code (the kernel's
# dbitmap.h and our shim) with the coverage options the Rust side gets only
# when the compiler is clang; with gcc the fuzzers do not see the C branches.
if ! command -v clang >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        step "installing clang (C coverage instrumentation for kernel-dbitmap)"
        apt-get install -y -qq clang || { apt-get update -qq && apt-get install -y -qq clang; }
    else
        echo "note: no clang: the kernel's C code will not be instrumented for the fuzzers (install clang)" >&2
    fi
fi

for engine in "${want[@]}"; do
    case "$engine" in
    cargo-fuzz)
        have_crate cargo-fuzz "$CARGO_FUZZ_VERSION" ||
            install_crate cargo-fuzz "$CARGO_FUZZ_VERSION"
        ;;
    afl)
        have_crate cargo-afl "$CARGO_AFL_VERSION" ||
            install_crate cargo-afl "$CARGO_AFL_VERSION"
        # cargo-afl builds AFL++ itself on first use.
        [ -n "$(ls "${XDG_DATA_HOME:-$HOME/.local/share}"/afl.rs/rustc-*/afl.rs-*/afl/bin/afl-fuzz 2>/dev/null)" ] ||
            { step "building AFL++ (cargo afl config --build)"; cargo afl config --build --force; }
        ;;
    honggfuzz)
        missing=()
        for pkg in binutils-dev libunwind-dev libblocksruntime-dev; do
            dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
        done
        if [ ${#missing[@]} -gt 0 ]; then
            step "installing ${missing[*]}"
            apt-get update -qq && apt-get install -y -qq "${missing[@]}"
        fi
        have_crate honggfuzz "$HONGGFUZZ_VERSION" ||
            install_crate honggfuzz "$HONGGFUZZ_VERSION"
        ;;
    *) die "unknown engine '$engine' (expected cargo-fuzz, afl or honggfuzz)" ;;
    esac
done
