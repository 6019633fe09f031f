#!/usr/bin/env bash
# Replays command-level traces (docs/commands.md) on a real Binder driver:
# boots a kernel in QEMU (TCG) with the binder-vm executor as its init and
# prints, per trace and step, what the driver answered (ioctl result, the
# BR_* each process read, the kernel log lines, each process's refs and
# nodes). Every trace gets a fresh device; one boot replays up to 200.
#
#   ci/kernel-vm.sh vm/examples                    # a folder of *.trace
#   ci/kernel-vm.sh a.trace b.trace --raw          # raw log lines and debug text too
#   ci/kernel-vm.sh --driver rust vm/examples      # the Rust driver's kernel
#   ci/kernel-vm.sh vm/examples --json out.jsonl   # the executor's lines, per trace
#   ci/kernel-vm.sh --prepare                      # fetch and build only; print the paths
#
# C driver (default): mainline's kernel from Debian trixie-backports,
# linux-binary-$MAINLINE_ABI-amd64 (vmlinuz) and linux-modules-$MAINLINE_ABI-amd64
# (binder_linux.ko), fetched once with ci/lib.sh's private apt configuration
# and kept in $KERNEL_CACHE. VM_KERNEL=IMAGE and VM_MODULE=KO (.ko or .ko.xz)
# replace them with a kernel of your own.
#
# Rust driver (--driver rust): the bzImage ci/kernel-rust.sh builds (its last
# line of output is the image's path); RUST_KERNEL_IMAGE=IMAGE skips the
# build. The driver is built in; its devices come from binderfs.
#
# QEMU (Debian's qemu-system-x86) is installed with apt-get when missing.
# The executor is built statically (-C target-feature=+crt-static) into a
# target directory of its own, target/vm-static, so the flag never reaches
# the workspace's other builds. Every other argument goes to the binder-vm
# binary (see `cargo run -p binder-vm --bin binder-vm -- --help`): --raw,
# --json FILE, --per-boot N, --no-pace, --no-icount, --work DIR, -q.
#
# Progress goes to stderr, results to stdout. Exit status: 0 when every
# trace ran to its end, 1 when one did not, 2 on a setup error.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

driver=c
prepare=
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --driver) [ $# -ge 2 ] || die "--driver needs c or rust"
        case "$2" in c | rust) driver=$2 ;; *) die "unknown driver '$2' (c or rust)" ;; esac
        shift 2 ;;
    --prepare) prepare=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) args+=("$1"); shift ;;
    esac
done
have_input=
for a in "${args[@]}"; do
    case "$a" in -*) ;; *) have_input=1 ;; esac
done
[ -n "$have_input" ] || [ -n "$prepare" ] || die "no trace or folder of traces given (see --help)"

if ! command -v qemu-system-x86_64 >/dev/null; then
    [ "$(id -u)" = 0 ] || die "qemu-system-x86_64 is missing: run 'sudo apt-get install qemu-system-x86'"
    step "apt-get install qemu-system-x86"
    apt-get install -y --no-install-recommends qemu-system-x86 >&2 ||
        { apt-get update >&2 && apt-get install -y --no-install-recommends qemu-system-x86 >&2; } ||
        die "could not install qemu-system-x86"
fi

# Extracts member $2 of .deb $1 into $3 (a file path), once.
deb_member() {
    local deb=$1 member=$2 out=$3
    if [ ! -s "$out" ]; then
        mkdir -p "$(dirname "$out")"
        dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "$member" >"$out.part" ||
            die "$(basename "$deb") has no $member"
        mv "$out.part" "$out"
    fi
}

kernel_args=()
case "$driver" in
c)
    cache="$KERNEL_CACHE/vm/$MAINLINE_ABI"
    if [ -n "${VM_KERNEL:-}" ]; then
        [ -f "$VM_KERNEL" ] || die "VM_KERNEL=$VM_KERNEL does not exist"
        image=$VM_KERNEL
    else
        image="$cache/vmlinuz"
        if [ ! -s "$image" ]; then
            deb=$(backports_deb "linux-binary-$MAINLINE_ABI-amd64")
            step "extracting vmlinuz from $(basename "$deb")"
            deb_member "$deb" "./usr/lib/modules/$MAINLINE_ABI-amd64/vmlinuz" "$image"
        fi
    fi
    if [ -n "${VM_MODULE:-}" ]; then
        [ -f "$VM_MODULE" ] || die "VM_MODULE=$VM_MODULE does not exist"
        module=$VM_MODULE
    else
        module="$cache/binder_linux.ko"
        if [ ! -s "$module" ]; then
            deb=$(backports_deb "linux-modules-$MAINLINE_ABI-amd64")
            step "extracting binder_linux.ko from $(basename "$deb")"
            deb_member "$deb" "./usr/lib/modules/$MAINLINE_ABI-amd64/kernel/drivers/android/binder_linux.ko.xz" "$module.xz"
            command -v xz >/dev/null || die "xz is missing: apt-get install xz-utils"
            xz -dc "$module.xz" >"$module.part" && mv "$module.part" "$module"
        fi
    fi
    kernel_args=(--driver c --kernel "$image" --module "$module")
    ;;
rust)
    if [ -n "${RUST_KERNEL_IMAGE:-}" ]; then
        image=$RUST_KERNEL_IMAGE
    else
        [ -x "$ROOT/ci/kernel-rust.sh" ] ||
            die "ci/kernel-rust.sh is missing: set RUST_KERNEL_IMAGE to a bzImage with CONFIG_ANDROID_BINDER_IPC_RUST=y"
        step "ci/kernel-rust.sh (the Rust driver's kernel)"
        image=$("$ROOT/ci/kernel-rust.sh" | tail -1)
    fi
    [ -f "$image" ] || die "the Rust driver's kernel image '$image' does not exist"
    kernel_args=(--driver rust --kernel "$image")
    ;;
esac

step "building binder-exec (static) and binder-vm"
(cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" cargo build -q --release \
    -p binder-vm --bin binder-exec --target x86_64-unknown-linux-gnu \
    --target-dir "$ROOT/target/vm-static") >&2 || die "building binder-exec failed"
executor="$ROOT/target/vm-static/x86_64-unknown-linux-gnu/release/binder-exec"
(cd "$ROOT" && cargo build -q --release -p binder-vm --bin binder-vm) >&2 ||
    die "building binder-vm failed"

if [ -n "$prepare" ]; then
    # KEY=path lines, for scripts (binder_vm::Kernel::c_from_cache finds the
    # same files).
    printf 'DRIVER=%s\nKERNEL=%s\n' "$driver" "$image"
    [ "$driver" = c ] && printf 'MODULE=%s\n' "$module"
    printf 'EXECUTOR=%s\n' "$executor"
    exit 0
fi

step "replaying on $(basename "$image") ($driver driver)"
status=0
"$ROOT/target/release/binder-vm" "${kernel_args[@]}" --executor "$executor" "${args[@]}" || status=$?
exit "$status"
