#!/usr/bin/env bash
# Does the campaign find anything? Applies each planted bug (one patch per
# bug class of SPEC.md) to a scratch copy of the tree, fuzzes the targets
# the patch names, from an empty corpus, for a bounded time each, and
# reports which target caught it and how fast.
#
#   ci/mutants/run.sh [--budget SECONDS] [PATCH...]
#
# libFuzzer runs with -seed=$FUZZ_SEED (default 1).
#
# A patch is a unified diff after a header: one line saying what the bug is,
# then "Targets: t1 t2", the targets to try in order. Exits 1 when a patch
# is not caught within the budget, 2 on bad usage. The tree is never
# modified: everything happens under $MUTANTS_WORK (default
# ${TMPDIR:-/tmp}/idpool-mutants), where the artifacts stay for triage.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

budget=60
# libFuzzer's random seed: fixed, so that a run can be repeated (its
# timing still varies with the machine's load).
seed=${FUZZ_SEED:-1}
patches=()
while [ $# -gt 0 ]; do
    case "$1" in
    --budget)
        [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || die "--budget needs a number of seconds"
        budget=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) [ -f "$1" ] || die "no such patch: $1"; patches+=("$1"); shift ;;
    esac
done
[ ${#patches[@]} -gt 0 ] || patches=("$ROOT"/ci/mutants/*.patch)

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
work="${MUTANTS_WORK:-${TMPDIR:-/tmp}/idpool-mutants}"
mkdir -p "$work"
# One target directory for every mutant: only the patched crates rebuild.
export CARGO_TARGET_DIR="$work/target"

report="$work/report.md"
{
    echo "| planted bug | caught by | seconds | what the harness said |"
    echo "| --- | --- | ---: | --- |"
} > "$report"
missed=0

for patch in "${patches[@]}"; do
    name=$(basename "$patch" .patch)
    targets=$(sed -n 's/^Targets: //p' "$patch")
    [ -n "$targets" ] || die "$patch has no 'Targets:' line"
    step "$name: $(head -n 1 "$patch")"

    tree="$work/tree"
    copy_tree "$tree"
    if ! patch -d "$tree" -p1 -s < "$patch"; then
        echo "| $name | patch does not apply | | |" >> "$report"; missed=$((missed + 1)); continue
    fi
    log="$work/$name.log"
    if ! (cd "$tree/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}") > "$log" 2>&1; then
        echo "| $name | build failed (see $log) | | |" >> "$report"; missed=$((missed + 1)); continue
    fi

    caught=""
    for target in $targets; do
        corpus="$work/corpus/$name/$target"
        artifacts="$work/artifacts/$name/$target"
        rm -rf "$corpus" "$artifacts" && mkdir -p "$corpus" "$artifacts"
        start=$(date +%s.%N)
        (cd "$tree/fuzz" && fuzz_cargo fuzz run "${FUZZ_BUILD_FLAGS[@]}" "$target" "$corpus" -- \
            -max_total_time="$budget" -seed="$seed" -artifact_prefix="$artifacts/" -print_final_stats=1) \
            > "$log" 2>&1 || true
        end=$(date +%s.%N)
        if [ -n "$(ls -A "$artifacts")" ]; then
            seconds=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
            said=$(grep -m1 -E "^(pool_ops|dbitmap_ops|handle_table|concurrent_resize): " "$log" \
                | cut -c1-160 | sed 's/|/\\|/g')
            caught="| $name | $target | $seconds | $said |"
            echo "   caught by $target in ${seconds}s: $said" >&2
            break
        fi
        echo "   $target: not caught in ${budget}s" >&2
    done
    if [ -z "$caught" ]; then
        caught="| $name | NOT CAUGHT ($targets, ${budget}s each) | | |"
        missed=$((missed + 1))
    fi
    echo "$caught" >> "$report"
done

echo
cat "$report"
echo
echo "artifacts: $work/artifacts/<patch>/<target>/"
[ "$missed" -eq 0 ] || { echo "$missed planted bug(s) not caught" >&2; exit 1; }
