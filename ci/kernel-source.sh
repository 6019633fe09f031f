#!/usr/bin/env bash
# Resolves the kernel's drivers/android/dbitmap.h for the kernel-dbitmap crate.
#
#   ci/kernel-source.sh            # KERNEL_TREE if set, else Debian's linux-source-6.12
#   KERNEL_TREE=~/linux ci/kernel-source.sh
#
# With KERNEL_TREE set, the header is read in place from $KERNEL_TREE.
# Otherwise the Debian package linux-source-6.12 is installed if
# /usr/src/linux-source-6.12.tar.xz is missing (root only), and only
# drivers/android/dbitmap.h is extracted into .cache/kernel/ (ignored by git):
# the header includes nothing but <linux/bitmap.h>, which our shim provides.
# Prints the header's path, the package version and the header's sha256.
# Running it again is a no-op unless the package version changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PACKAGE=linux-source-6.12
TARBALL=/usr/src/$PACKAGE.tar.xz
MEMBER=drivers/android/dbitmap.h
CACHE="$ROOT/.cache/kernel"

report() { # header, version
    printf 'header:  %s\nversion: %s\nsha256:  %s\n' "$1" "$2" "$(sha256sum "$1" | cut -d' ' -f1)"
}

if [[ -n "${KERNEL_TREE:-}" ]]; then
    header="$KERNEL_TREE/$MEMBER"
    [[ -f "$header" ]] || die "KERNEL_TREE=$KERNEL_TREE has no $MEMBER"
    release="$( (sed -n 's/^VERSION = //p; s/^PATCHLEVEL = //p; s/^SUBLEVEL = //p' \
        "$KERNEL_TREE/Makefile" | head -3 | paste -sd. -) 2>/dev/null || true)"
    version="kernel tree ${release:-of unknown version}"
    report "$header" "$version"
    exit 0
fi

if [[ ! -f "$TARBALL" ]]; then
    if [[ "$(id -u)" != 0 ]]; then
        die "$TARBALL is missing: run 'sudo apt-get install --no-install-recommends $PACKAGE', or set KERNEL_TREE"
    fi
    command -v apt-get >/dev/null || die "$TARBALL is missing and there is no apt-get: set KERNEL_TREE to a Linux checkout"
    step "apt-get install --no-install-recommends $PACKAGE"
    apt-get install -y --no-install-recommends "$PACKAGE" >&2 \
        || { apt-get update >&2 && apt-get install -y --no-install-recommends "$PACKAGE" >&2; } \
        || die "could not install $PACKAGE: set KERNEL_TREE to a Linux checkout"
    [[ -f "$TARBALL" ]] || die "$PACKAGE is installed but $TARBALL is missing"
fi

version="$PACKAGE $(dpkg-query -W -f='${Version}' "$PACKAGE" 2>/dev/null || echo unknown)"
header="$CACHE/$MEMBER"
if [[ ! -f "$header" || "$(cat "$CACHE/VERSION" 2>/dev/null)" != "$version" ]]; then
    step "extracting $MEMBER from $TARBALL"
    rm -rf "$CACHE" && mkdir -p "$CACHE"
    tar -xJf "$TARBALL" -C "$CACHE" --strip-components=1 "$PACKAGE/$MEMBER" \
        || die "$TARBALL has no $PACKAGE/$MEMBER"
    printf '%s\n' "$version" >"$CACHE/VERSION"
fi
report "$header" "$version"
