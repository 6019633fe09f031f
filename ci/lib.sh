# Shared by the scripts under ci/: sourced, not run.

# The repository's root.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; exit 2; }

# cargo on a toolchain that accepts cargo-fuzz's unstable flags: nightly if
# rustup has it, else stable with RUSTC_BOOTSTRAP=1.
fuzz_cargo() {
    if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        cargo +nightly "$@"
    else
        RUSTC_BOOTSTRAP=1 cargo "$@"
    fi
}

# The flags every libFuzzer build uses. The crates forbid `unsafe`, so
# AddressSanitizer finds nothing that Rust's own checks miss and costs ~10x
# in executions per second: build without it, with debug assertions (the
# table's mismatch check and overflow checks) on.
FUZZ_BUILD_FLAGS=(-O --debug-assertions --sanitizer none)

# Copies the working tree as it is (committed or not), without build
# output, into the empty directory $1.
copy_tree() {
    rm -rf "$1" && mkdir -p "$1"
    (cd "$ROOT" && tar --exclude=./target --exclude=./fuzz/target --exclude=./.git \
        --exclude=./fuzz/artifacts --exclude=./fuzz/corpus -cf - .) | tar -xf - -C "$1"
}
