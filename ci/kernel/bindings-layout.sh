#!/usr/bin/env bash
# Compares a C struct's layout with the Rust kernel's view of it, field by
# field, in a kernel build directory made by ci/kernel-rust.sh (or any
# `make LLVM=... O=...` build with CONFIG_RUST=y).
#
#   ci/kernel/bindings-layout.sh BUILD_DIR [STRUCT]    # STRUCT: task_struct by default
#   EXTRA_BINDGEN='--opaque-type sched_statistics' ci/kernel/bindings-layout.sh BUILD_DIR
#
# The C side: the kernel's own bindgen command for
# rust/bindings/bindings_generated.rs (from the build's .cmd file), run
# again without --no-layout-tests, so that bindgen writes down clang's
# offset of every field. The Rust side: the same command as the kernel
# runs it (plus EXTRA_BINDGEN, to try a fix), compiled as a host program
# that prints offset_of! of every field. Prints one line per field (C
# offset, Rust offset, difference) and marks where the difference
# changes; exits 1 if any field differs. Uses the toolchain pinned in
# ci/lib.sh and installed by ci/kernel-rust.sh. See
# docs/findings/0007-rust-task-struct-layout.md.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

case "${1:-}" in
-h | --help) usage; exit 0 ;;
"") usage >&2; exit 2 ;;
esac
build=$(cd "$1" && pwd) || die "no build directory $1"
st=${2:-task_struct}
cmdfile="$build/rust/bindings/.bindings_generated.rs.cmd"
[ -f "$cmdfile" ] || die "$cmdfile is missing: not a kernel build with CONFIG_RUST=y"
bindgen_bin="$KERNEL_CACHE/tools/bindgen-cli-$KERNEL_BINDGEN/bin"
[ -x "$bindgen_bin/bindgen" ] || die "bindgen-cli $KERNEL_BINDGEN is missing (ci/kernel-rust.sh installs it)"
rustc_bin=$(dirname "$(rustup which --toolchain "$KERNEL_RUSTC" rustc)") ||
    die "Rust $KERNEL_RUSTC is missing (ci/kernel-rust.sh installs it)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The kernel's command, as make ran it: `$(pound)` is make's '#'; the
# objtool-style tail after ';' (a sed on the output) is dropped.
kcmd=$(head -1 "$cmdfile" | sed 's/^savedcmd_[^ ]* := //; s/ *;.*//; s/\$(pound)/#/g')
run_bindgen() { # output file, extra bindgen flags
    local c=${kcmd/ -o rust\/bindings\/bindings_generated.rs / -o $1 }
    (cd "$build" && PATH="$rustc_bin:$bindgen_bin:$PATH" LIBCLANG_PATH="/usr/lib/llvm-$KERNEL_LLVM/lib" \
        eval "${c/ -- / $2 -- }") >>"$work/bindgen.log" 2>&1 ||
        { tail -5 "$work/bindgen.log" >&2; die "bindgen failed (log above)"; }
}
run_bindgen "$work/rust-view.rs" "${EXTRA_BINDGEN:-}"
kcmd=${kcmd/--no-layout-tests/}
run_bindgen "$work/layout.rs" "${EXTRA_BINDGEN:-}"

# clang's offsets, from the layout assertions.
tr -d '\n \t' <"$work/layout.rs" |
    grep -o "\"Offsetoffield:$st::[A-Za-z_0-9]*\"\]\[::core::mem::offset_of!($st,[A-Za-z_0-9]*)-[0-9]*usize" |
    sed "s/.*$st::\([A-Za-z_0-9]*\)\".*-\([0-9]*\)usize/\1 \2/" >"$work/c.txt"
[ -s "$work/c.txt" ] || die "no fields of struct $st in the bindings"

# The Rust view: the bindings without the kernel's derive macro and
# cfi attributes (neither changes a layout), with the kernel's C types.
sed -e 's/, MaybeZeroable//g; s/MaybeZeroable, //g; s/#\[derive(MaybeZeroable)\]//g' \
    -e 's/#\[cfi_encoding = "[^"]*"\]//g' "$work/rust-view.rs" >"$work/bindings.rs"
{
    cat <<'EOF'
#![allow(warnings)]
mod ffi {
    pub type c_char = u8; pub type c_schar = i8; pub type c_uchar = u8;
    pub type c_short = i16; pub type c_ushort = u16; pub type c_int = i32; pub type c_uint = u32;
    pub type c_long = isize; pub type c_ulong = usize; pub type c_longlong = i64; pub type c_ulonglong = u64;
    pub use core::ffi::c_void;
}
mod b {
    use super::ffi;
    type __kernel_size_t = usize; type __kernel_ssize_t = isize; type __kernel_ptrdiff_t = isize;
    include!("bindings.rs");
}
fn main() {
EOF
    while read -r f _; do echo "    println!(\"{}\", core::mem::offset_of!(b::$st, $f));"; done <"$work/c.txt"
    echo "}"
} >"$work/main.rs"
"$rustc_bin/rustc" --edition 2021 -o "$work/offsets" "$work/main.rs" 2>"$work/rustc.log" ||
    { tail -20 "$work/rustc.log" >&2; die "the bindings did not compile as a host program"; }
"$work/offsets" >"$work/rust.txt"

printf '%-32s %8s %8s %6s\n' "$st field" C Rust diff
paste -d' ' "$work/c.txt" "$work/rust.txt" | awk '
    { d = $3 - $2; printf "%-32s %8d %8d %+6d%s\n", $1, $2, $3, d, (d != last ? "   <- changes here" : ""); last = d
      if (d != 0) bad++ }
    END { printf "%d fields, %d at a different offset in Rust\n", NR, bad; exit (bad > 0) }'
