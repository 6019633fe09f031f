#!/usr/bin/env bash
# Resolves the kernel sources the project compiles or cites.
#
#   ci/kernel-source.sh                 # both releases below
#   ci/kernel-source.sh --release 6.12  # Debian bookworm's linux-source-6.12 only
#   ci/kernel-source.sh --release 7.3   # trixie-backports' linux-source-7.3 only
#   KERNEL_TREE=~/linux ci/kernel-source.sh
#
# 6.12: drivers/android/dbitmap.h, extracted into .cache/kernel/ (ignored
# by git) from /usr/src/linux-source-6.12.tar.xz, which is installed as
# root if missing. The header includes nothing but <linux/bitmap.h>, which
# the kernel-dbitmap shim provides.
#
# 7.3 (mainline): the files listed in MAINLINE_MEMBERS below (dbitmap.h,
# rust/kernel/{id_pool,bitmap}.rs, the C and Rust binder drivers and their
# uapi header), extracted into .cache/kernel-7.3/ from the linux-source-7.3
# package of Debian's trixie-backports suite, downloaded with a private apt
# configuration (ci/lib.sh: backports_deb) and kept, with the extracted
# files, in $KERNEL_CACHE across clones on this machine.
#
# With KERNEL_TREE set, every file is read in place from $KERNEL_TREE
# instead, for both releases.
#
# Prints, per release, the directory, the package version and each file's
# sha256. Running it again is a no-op unless a package version changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

releases=(6.12 "$MAINLINE")
while [ $# -gt 0 ]; do
    case "$1" in
    --release) [ $# -ge 2 ] || die "--release needs 6.12 or $MAINLINE"
        case "$2" in 6.12 | "$MAINLINE") releases=("$2") ;;
        *) die "unknown release '$2' (known: 6.12, $MAINLINE)" ;; esac
        shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

DBITMAP=drivers/android/dbitmap.h
# What the project reads of mainline: the allocator files it compiles
# (kernel-dbitmap, kernel-idpool) and the drivers it cites and models.
MAINLINE_MEMBERS=(
    "$DBITMAP"
    rust/kernel/id_pool.rs
    rust/kernel/bitmap.rs
    drivers/android/binder.c
    drivers/android/binder_internal.h
    drivers/android/binder
    include/uapi/linux/android/binder.h
    Makefile
)

report() { # dir, version, members...
    local dir=$1 version=$2 m f
    shift 2
    printf 'tree:    %s\nversion: %s\n' "$dir" "$version"
    for m in "$@"; do
        if [ -d "$dir/$m" ]; then
            while IFS= read -r f; do
                printf 'sha256:  %s  %s\n' "$(sha256sum "$dir/$f" | cut -d' ' -f1)" "$f"
            done < <(cd "$dir" && find "$m" -type f | LC_ALL=C sort)
        else
            printf 'sha256:  %s  %s\n' "$(sha256sum "$dir/$m" | cut -d' ' -f1)" "$m"
        fi
    done
}

if [[ -n "${KERNEL_TREE:-}" ]]; then
    [[ -f "$KERNEL_TREE/$DBITMAP" ]] || die "KERNEL_TREE=$KERNEL_TREE has no $DBITMAP"
    release="$( (sed -n 's/^VERSION = //p; s/^PATCHLEVEL = //p; s/^SUBLEVEL = //p' \
        "$KERNEL_TREE/Makefile" | head -3 | paste -sd. -) 2>/dev/null || true)"
    report "$KERNEL_TREE" "kernel tree ${release:-of unknown version}" "$DBITMAP"
    exit 0
fi

# Debian bookworm's linux-source-6.12: dbitmap.h into .cache/kernel/.
source_6_12() {
    local package=linux-source-6.12 cache="$ROOT/.cache/kernel"
    local tarball=/usr/src/$package.tar.xz version
    if [[ ! -f "$tarball" ]]; then
        if [[ "$(id -u)" != 0 ]]; then
            die "$tarball is missing: run 'sudo apt-get install --no-install-recommends $package', or set KERNEL_TREE"
        fi
        command -v apt-get >/dev/null || die "$tarball is missing and there is no apt-get: set KERNEL_TREE to a Linux checkout"
        step "apt-get install --no-install-recommends $package"
        apt-get install -y --no-install-recommends "$package" >&2 ||
            { apt-get update >&2 && apt-get install -y --no-install-recommends "$package" >&2; } ||
            die "could not install $package: set KERNEL_TREE to a Linux checkout"
        [[ -f "$tarball" ]] || die "$package is installed but $tarball is missing"
    fi
    version="$package $(dpkg-query -W -f='${Version}' "$package" 2>/dev/null || echo unknown)"
    if [[ ! -f "$cache/$DBITMAP" || "$(cat "$cache/VERSION" 2>/dev/null)" != "$version" ]]; then
        step "extracting $DBITMAP from $tarball"
        rm -rf "$cache" && mkdir -p "$cache"
        tar -xJf "$tarball" -C "$cache" --strip-components=1 "$package/$DBITMAP" ||
            die "$tarball has no $package/$DBITMAP"
        printf '%s\n' "$version" >"$cache/VERSION"
    fi
    report "$cache" "$version" "$DBITMAP"
}

# trixie-backports' linux-source-7.3: MAINLINE_MEMBERS into
# .cache/kernel-7.3/, through an extracted copy kept in $KERNEL_CACHE.
source_mainline() {
    local package=linux-source-$MAINLINE deb version kept cache="$ROOT/.cache/kernel-$MAINLINE"
    deb=$(backports_deb "$package")
    version="$package $(dpkg-deb -f "$deb" Version)"
    kept="$KERNEL_CACHE/src/$package"
    if [[ "$(cat "$kept/VERSION" 2>/dev/null)" != "$version" ]]; then
        step "extracting ${MAINLINE_MEMBERS[*]} from $(basename "$deb")"
        rm -rf "$kept" && mkdir -p "$kept"
        # The .deb holds /usr/src/linux-source-7.3.tar.xz; only the members
        # are taken out of that.
        dpkg-deb --fsys-tarfile "$deb" |
            tar -xOf - "./usr/src/$package.tar.xz" |
            tar -xJf - -C "$kept" --strip-components=1 \
                "${MAINLINE_MEMBERS[@]/#/$package/}" ||
            die "$deb lacks one of ${MAINLINE_MEMBERS[*]}"
        printf '%s\n' "$version" >"$kept/VERSION"
    fi
    if [[ "$(cat "$cache/VERSION" 2>/dev/null)" != "$version" ]]; then
        rm -rf "$cache" && mkdir -p "$cache" && cp -a "$kept/." "$cache/"
    fi
    report "$cache" "$version" "${MAINLINE_MEMBERS[@]}"
}

for r in "${releases[@]}"; do
    case "$r" in
    6.12) source_6_12 ;;
    *) source_mainline ;;
    esac
done
