#!/usr/bin/env bash
# Installs what the fuzz engines need, if missing:
#   ci/install-fuzzers.sh [cargo-fuzz] [afl] [honggfuzz]   (default: all three)
# cargo-fuzz and cargo-afl come from crates.io; honggfuzz-rs builds
# honggfuzz from source and needs Debian's binutils-dev, libunwind-dev and
# libblocksruntime-dev.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(cargo-fuzz afl honggfuzz)

have_crate_bin() { cargo install --list | grep -q "^    $1\$"; }

for engine in "${want[@]}"; do
    case "$engine" in
    cargo-fuzz)
        have_crate_bin cargo-fuzz || { step "installing cargo-fuzz"; cargo install cargo-fuzz --locked; }
        ;;
    afl)
        have_crate_bin cargo-afl || { step "installing cargo-afl"; cargo install cargo-afl --locked; }
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
        have_crate_bin cargo-hfuzz || { step "installing honggfuzz (cargo-hfuzz)"; cargo install honggfuzz --locked; }
        ;;
    *) die "unknown engine '$engine' (expected cargo-fuzz, afl or honggfuzz)" ;;
    esac
done
