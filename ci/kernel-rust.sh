#!/usr/bin/env bash
# Builds a minimal x86_64 Linux kernel with the Rust binder driver built in,
# from Debian trixie-backports' linux-source-7.3 (MAINLINE in ci/lib.sh),
# and prints the path of its bzImage on the last line of stdout (progress
# goes to stderr).
#
#   ci/kernel-rust.sh                   # build unless cached; print the bzImage path
#   ci/kernel-rust.sh --print-path      # print the path without building (exit 1 if not built)
#   ci/kernel-rust.sh --check           # build unless cached, then boot it once under QEMU
#                                       # with the smoke init (ci/kernel/smoke-init.c)
#   ci/kernel-rust.sh --rebuild         # run make in the kept build directory even if cached
#                                       # (after editing the extracted tree)
#   ci/kernel-rust.sh --fragment FILE   # merge FILE after ci/kernel/rust-binder.config
#                                       # (repeatable; a different image, cached apart)
#   ci/kernel-rust.sh --patch FILE      # build with FILE (a labelled patch, -p1, such as
#                                       # ci/kernel/patches/*.patch) applied to the source
#                                       # (repeatable; cached apart; the shared source tree
#                                       # is patched for the build only, under the lock)
#   RUST_KERNEL_IMAGE=/path/to/bzImage ci/kernel-rust.sh   # print that path, build nothing
#                                       # (ignored with --fragment or --patch, which name
#                                       # another image)
#                                       # (--check boots that image)
#
# The configuration: `make tinyconfig`, then the fragment
# ci/kernel/rust-binder.config (and any --fragment) merged with
# scripts/kconfig/merge_config.sh, then `make olddefconfig`; every option
# the fragments name is checked in the final .config, and a missing one
# (Kconfig drops an option whose dependencies are unmet) stops the build,
# named.
#
# Everything is kept in $KERNEL_CACHE (default ~/.cache/binder-idpool),
# shared by every clone on the machine, under rust-kernel/VERSION/ (VERSION:
# the source package's version):
#   linux/          the whole source tree, extracted once
#   HASH/build/     the out-of-tree build (make O=...), so rebuilds are incremental
#   HASH/bzImage    the image; HASH/config its .config; HASH/fragments/ what made it
# HASH hashes the fragments' and patches' contents and the toolchain pins in ci/lib.sh,
# so a second run with the same ones does nothing but print the path.
#
# Toolchain (versions pinned in ci/lib.sh: KERNEL_LLVM, KERNEL_RUSTC,
# KERNEL_BINDGEN), installed when missing, as root: Debian bookworm's
# clang, lld, llvm and libclang-dev of that LLVM version, flex, bison, bc,
# libelf-dev, libssl-dev, cpio (apt-get); rustup's Rust toolchain with
# rust-src (rustup must be there); bindgen-cli from crates.io (cargo
# install --locked, into $KERNEL_CACHE/tools). --check also needs
# qemu-system-x86, gcc and libc6-dev (installed the same way). One kernel
# build at a time on the machine (a lock in $KERNEL_CACHE); make -j$JOBS
# (default 2).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

JOBS=${JOBS:-2}
check=false print_path=false rebuild=false
fragments=("$ROOT/ci/kernel/rust-binder.config")
patches=()
while [ $# -gt 0 ]; do
    case "$1" in
    --check) check=true; shift ;;
    --print-path) print_path=true; shift ;;
    --rebuild) rebuild=true; shift ;;
    --fragment) [ $# -ge 2 ] || die "--fragment needs a config fragment file"
        [ -r "$2" ] || die "config fragment '$2' is not readable"
        fragments+=("$2"); shift 2 ;;
    --patch) [ $# -ge 2 ] || die "--patch needs a patch file"
        [ -r "$2" ] || die "patch '$2' is not readable"
        patches+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# --- the smoke boot -----------------------------------------------------

BOOT_APPEND="console=ttyS0 quiet panic=-1"

# Installs the Debian packages among "$@" that are missing, quietly.
apt_install() {
    local missing=() p log
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "missing Debian packages ${missing[*]} and no apt-get to install them"
    [ "$(id -u)" = 0 ] ||
        die "missing Debian packages: run 'sudo apt-get install --no-install-recommends ${missing[*]}'"
    step "installing ${missing[*]} (apt-get install --no-install-recommends)"
    log=$(mktemp)
    local apt=(apt-get -y -q -o DPkg::Lock::Timeout=600 install --no-install-recommends)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" "${missing[@]}" >"$log" 2>&1; then
        # Stale package lists are the usual cause.
        apt-get -q -o DPkg::Lock::Timeout=600 update >>"$log" 2>&1 &&
            DEBIAN_FRONTEND=noninteractive "${apt[@]}" "${missing[@]}" >>"$log" 2>&1 ||
            { tail -20 "$log" >&2; rm -f "$log"; die "apt-get could not install ${missing[*]}"; }
    fi
    rm -f "$log"
}

# Boots $1 with the smoke init; fails unless the init reports PASS.
smoke_boot() {
    local image=$1 tmp out start secs
    apt_install qemu-system-x86 gcc libc6-dev cpio gzip
    tmp=$(mktemp -d)
    smoke_tmp=$tmp
    trap 'rm -rf "$smoke_tmp"' EXIT
    mkdir "$tmp/root"
    gcc -static -Os -s -Wall -o "$tmp/root/init" "$ROOT/ci/kernel/smoke-init.c" ||
        die "could not build ci/kernel/smoke-init.c"
    (cd "$tmp/root" && echo init | cpio -o -H newc --quiet) | gzip -9 >"$tmp/initrd.gz"
    step "booting $image under QEMU (TCG) with the smoke init"
    out="$tmp/console.log"
    start=$(date +%s.%N)
    timeout 300 qemu-system-x86_64 -accel tcg -cpu max -m 512 -nographic -no-reboot \
        -kernel "$image" -initrd "$tmp/initrd.gz" -append "$BOOT_APPEND" \
        </dev/null >"$out" 2>&1 || true
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    [ -z "${SMOKE_CONSOLE:-}" ] || cp "$out" "$SMOKE_CONSOLE"
    tr -d '\r' <"$out" | grep -o 'smoke:.*' >&2 || true
    if ! tr -d '\r' <"$out" | grep -q 'smoke: result: PASS'; then
        echo "--- the rest of the console (last 40 lines) ---" >&2
        tr -d '\r' <"$out" | grep -v 'smoke:' | tail -40 >&2
        die "smoke boot of $image failed (QEMU ran $(printf '%.1f' "$secs") s)"
    fi
    step "smoke boot passed: $(printf '%.1f' "$secs") s from QEMU's start to its exit"
}

if [[ -n "${RUST_KERNEL_IMAGE:-}" ]] && [ ${#fragments[@]} -eq 1 ] && [ ${#patches[@]} -eq 0 ]; then
    [ -f "$RUST_KERNEL_IMAGE" ] || die "RUST_KERNEL_IMAGE=$RUST_KERNEL_IMAGE is not a file"
    if $check; then smoke_boot "$RUST_KERNEL_IMAGE"; fi
    printf '%s\n' "$RUST_KERNEL_IMAGE"
    exit 0
fi

# --- where the image is kept --------------------------------------------

package=linux-source-$MAINLINE
if $print_path; then
    # Never downloads: no package, no image.
    deb=$(compgen -G "$KERNEL_CACHE/debs/${package}_*.deb" | head -1 || true)
    [ -n "$deb" ] || { echo "$(basename "$0"): not built (no $package in $KERNEL_CACHE/debs)" >&2; exit 1; }
else
    deb=$(backports_deb "$package")
fi
version=$(dpkg-deb -f "$deb" Version)
top="$KERNEL_CACHE/rust-kernel/$(printf '%s' "$version" | tr -c 'A-Za-z0-9._-' _)"
hash=$({
    printf 'llvm %s rustc %s bindgen %s\n' "$KERNEL_LLVM" "$KERNEL_RUSTC" "$KERNEL_BINDGEN"
    for f in "${fragments[@]}"; do printf -- '--- fragment\n'; cat "$f"; done
    for p in "${patches[@]}"; do printf -- '--- patch\n'; cat "$p"; done
} | sha256sum | cut -c1-12)
dir="$top/$hash"
image="$dir/bzImage"
tree="$top/linux"
build="$dir/build"

if $print_path; then
    [ -f "$image" ] || { echo "$(basename "$0"): not built ($image is missing)" >&2; exit 1; }
    printf '%s\n' "$image"
    exit 0
fi

if [ -f "$image" ] && ! $rebuild; then
    if $check; then smoke_boot "$image"; fi
    printf '%s\n' "$image"
    exit 0
fi

# --- building -----------------------------------------------------------

mkdir -p "$top"
exec 9>"$KERNEL_CACHE/rust-kernel/build.lock"
if ! flock -n 9; then
    step "waiting for another kernel build on this machine ($KERNEL_CACHE/rust-kernel/build.lock)"
    flock 9
fi

# The toolchain: Debian packages, rustup's pinned toolchain with rust-src,
# bindgen-cli; sets PATH and LIBCLANG_PATH for the kernel's make.
toolchain() {
    local l=$KERNEL_LLVM rustc_bin bindgen_root log
    apt_install "clang-$l" "lld-$l" "llvm-$l" "libclang-$l-dev" make flex bison bc \
        libelf-dev libssl-dev cpio xz-utils
    command -v rustup >/dev/null ||
        die "rustup is missing: the kernel needs rustc $KERNEL_RUSTC with its rust-src component (install rustup, then run this again)"
    if ! rustup toolchain list | grep -q "^$KERNEL_RUSTC-"; then
        step "installing Rust $KERNEL_RUSTC (rustup toolchain install --profile minimal)"
        rustup -q toolchain install --profile minimal "$KERNEL_RUSTC" >&2 ||
            die "rustup could not install Rust $KERNEL_RUSTC"
    fi
    if ! rustup component list --toolchain "$KERNEL_RUSTC" --installed | grep -q '^rust-src'; then
        step "adding rust-src to Rust $KERNEL_RUSTC (rustup component add)"
        rustup -q component add --toolchain "$KERNEL_RUSTC" rust-src >&2 ||
            die "rustup could not add rust-src to Rust $KERNEL_RUSTC"
    fi
    rustc_bin=$(dirname "$(rustup which --toolchain "$KERNEL_RUSTC" rustc)")
    bindgen_root="$KERNEL_CACHE/tools/bindgen-cli-$KERNEL_BINDGEN"
    export PATH="$rustc_bin:$bindgen_root/bin:$PATH"
    export LIBCLANG_PATH="/usr/lib/llvm-$l/lib"
    if [ ! -x "$bindgen_root/bin/bindgen" ]; then
        step "installing bindgen-cli $KERNEL_BINDGEN (cargo install --locked, into $bindgen_root)"
        log=$(mktemp)
        cargo install -q --locked --root "$bindgen_root" bindgen-cli --version "$KERNEL_BINDGEN" >"$log" 2>&1 ||
            { tail -20 "$log" >&2; rm -f "$log"; die "cargo could not install bindgen-cli $KERNEL_BINDGEN"; }
        rm -f "$log"
        rm -f "$bindgen_root/.crates.toml" "$bindgen_root/.crates2.json"
    fi
}

# The whole source tree, extracted once per package version.
extract_tree() {
    # A build that died with its patches applied (a kill the EXIT trap did
    # not see) left them listed here: take them back, or extract again.
    if [ -f "$tree/.patched" ]; then
        local p ok=true
        while IFS= read -r p; do
            # -f: never ask (a listed patch may not have been applied yet);
            # anything that does not reverse cleanly means a new extraction.
            patch -f -s -R -p1 -d "$tree" <"$p" >/dev/null 2>&1 || ok=false
        done < <(tac "$tree/.patched")
        if $ok; then
            rm -f "$tree/.patched"
            step "took back the patches an earlier build left applied in $tree"
        else
            rm -f "$tree/.extracted"
        fi
    fi
    [ -f "$tree/.extracted" ] && return 0
    step "extracting the whole of $package $version into $tree"
    rm -rf "$tree" "$tree.partial" && mkdir -p "$tree.partial"
    dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "./usr/src/$package.tar.xz" |
        tar -xJf - -C "$tree.partial" --strip-components=1 ||
        die "could not extract /usr/src/$package.tar.xz from $deb"
    touch "$tree.partial/.extracted"
    mv "$tree.partial" "$tree"
}

kmake() { make -C "$tree" O="$build" ARCH=x86_64 LLVM="-$KERNEL_LLVM" "$@"; }

# Checks that every option the fragments set (or unset) holds in $1.
verify_config() {
    local config=$1 f line name want have bad=()
    declare -A wanted=()
    for f in "${fragments[@]}"; do
        while IFS= read -r line; do
            if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
                wanted[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
            elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set ]]; then
                wanted[${BASH_REMATCH[1]}]=n
            fi
        done <"$f"
    done
    for name in $(printf '%s\n' "${!wanted[@]}" | LC_ALL=C sort); do
        want=${wanted[$name]}
        have=$(sed -n "s/^$name=//p" "$config" | head -1)
        [ -n "$have" ] || have=n
        [ "$have" = "$want" ] || bad+=("$name: wanted $want, got $have")
    done
    if [ ${#bad[@]} -gt 0 ]; then
        printf '  %s\n' "${bad[@]}" >&2
        die "the configuration lacks ${#bad[@]} wanted option(s), listed above (unmet Kconfig dependencies; see $config)"
    fi
}

configure() {
    local i=0 f log="$dir/configure.log"
    [ -f "$dir/configured" ] && return 0
    step "configuring in $build: tinyconfig + $(printf '%s ' "${fragments[@]##*/}")"
    rm -rf "$dir/fragments" && mkdir -p "$build" "$dir/fragments"
    for f in "${fragments[@]}"; do
        i=$((i + 1)); cp "$f" "$dir/fragments/$i-$(basename "$f" | tr -c 'A-Za-z0-9._\n-' _)"
    done
    {
        kmake tinyconfig &&
            "$tree/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$dir"/fragments/* &&
            kmake olddefconfig
    } >"$log" 2>&1 || { tail -30 "$log" >&2; die "configuration failed (log: $log)"; }
    if ! grep -q '^CONFIG_RUST=y' "$build/.config"; then
        kmake rustavailable >&2 || true
    fi
    verify_config "$build/.config"
    touch "$dir/configured"
}

# The patches, applied to the shared tree for this build only (the lock
# keeps other builds out meanwhile) and taken back at the exit, whatever
# happens; the files they touch are then newer than every other build's
# objects, which make rebuilds from the unpatched source.
applied=()
unpatch() {
    local i failed=false
    for ((i = ${#applied[@]} - 1; i >= 0; i--)); do
        patch -s -R -p1 -d "$tree" <"${applied[$i]}" || failed=true
    done
    applied=()
    if $failed; then
        # The next build extracts the tree again.
        rm -f "$tree/.extracted"
        die "could not take the patches back from $tree: it will be extracted again"
    fi
    rm -f "$tree/.patched"
}
apply_patches() {
    local p
    [ ${#patches[@]} -gt 0 ] || return 0
    trap unpatch EXIT
    mkdir -p "$dir/patches"
    for p in "${patches[@]}"; do
        patch -s --dry-run -p1 -d "$tree" <"$p" >/dev/null 2>&1 ||
            die "$p does not apply to $tree (patch --dry-run -p1)"
        # Listed before it is applied: a build killed from here on leaves
        # the list for the next one (extract_tree).
        cp "$p" "$dir/patches/"
        printf '%s\n' "$dir/patches/$(basename "$p")" >>"$tree/.patched"
        patch -s -p1 -d "$tree" <"$p"
        applied+=("$p")
        step "applied $(basename "$p"): $(head -1 "$p")"
    done
}

toolchain
start=$SECONDS
extract_tree
configure
verify_config "$build/.config"
apply_patches
step "building bzImage (make -j$JOBS, log in $dir/build.log)"
kmake -j"$JOBS" bzImage >"$dir/build.log" 2>&1 ||
    { tail -40 "$dir/build.log" >&2; die "the kernel build failed (log: $dir/build.log)"; }
unpatch
trap - EXIT
cp "$build/arch/x86/boot/bzImage" "$image.tmp" && mv "$image.tmp" "$image"
cp "$build/.config" "$dir/config"
step "built $image ($(stat -c %s "$image") bytes) in $((SECONDS - start)) s"
exec 9>&-

if $check; then smoke_boot "$image"; fi
printf '%s\n' "$image"
