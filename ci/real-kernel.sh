#!/usr/bin/env bash
# Replays every binder_commands regression and finding trace, and the
# examples of vm/examples, on the real drivers of mainline booted in QEMU,
# each against our model of that driver (`triage real-kernel`); fails when
# a model disagrees with its real driver.
#
#   ci/real-kernel.sh                 # the C driver (Debian's 7.3.4 kernel and module)
#   ci/real-kernel.sh --driver both   # and the Rust driver (ci/kernel-rust.sh builds its kernel)
#   ci/real-kernel.sh PATH...         # other traces or raw inputs instead
#
# A trace naming a historical version runs on mainline; one with a lock-drop
# window or a failing allocation cannot be reproduced on a real kernel and
# is listed as skipped. The kernels and the executor are fetched and built
# by ci/kernel-vm.sh --prepare (and ci/kernel-rust.sh for --driver rust or
# both) and kept in KERNEL_CACHE.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

driver=c
paths=()
while [ $# -gt 0 ]; do
    case "$1" in
    --driver) [ $# -ge 2 ] || die "--driver needs c, rust or both"
        case "$2" in c | rust | both) driver=$2 ;; *) die "unknown driver '$2' (c, rust or both)" ;; esac
        shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) paths+=("$1"); shift ;;
    esac
done
[ ${#paths[@]} -gt 0 ] ||
    paths=("$ROOT/corpus/regressions/binder_commands" "$ROOT/docs/findings/traces" "$ROOT/vm/examples")

step "the kernels and the executor (ci/kernel-vm.sh --prepare)"
"$ROOT/ci/kernel-vm.sh" --prepare >&2
if [ "$driver" != c ] && [ -z "${RUST_KERNEL_IMAGE:-}" ]; then
    step "the Rust driver's kernel (ci/kernel-rust.sh)"
    RUST_KERNEL_IMAGE=$("$ROOT/ci/kernel-rust.sh" | tail -1)
    export RUST_KERNEL_IMAGE
fi
step "building triage"
(cd "$ROOT" && cargo build -q --release -p triage)
step "replaying on the real drivers ($driver)"
"$ROOT/target/release/triage" real-kernel --mainline --driver "$driver" "${paths[@]}"
