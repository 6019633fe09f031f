#!/usr/bin/env bash
# Does the campaign find anything? Plants each bug (one spec per bug class
# of docs/spec.md) in a scratch copy of the tree, fuzzes the targets the
# spec names, from an empty corpus, for a bounded time each, and reports
# which target caught it, how fast, and the first thing the harness said,
# on a result page (docs/results/<date>-planted-bugs.md).
#
# Caught means a crash artifact (crash-*) from one of the harness's checks:
# the fuzz target, before it panics, writes the failure as JSON to the file
# IDPOOL_FAILURE_JSON names (harness `Failure::raise`), and a panic from no
# check (inside the allocator, which no oracle named) writes none. Anything
# else a target leaves is reported for what it is and is not caught:
# "timeout" (timeout-*), "oom" (oom-*), "leak" (leak-*), "crash, not a
# check" (a crash-* without the failure's JSON), "slow unit" (slow-unit-*
# alone); the next target is then tried.
#
#   ci/mutants/run.sh [--budget SECONDS] [SPEC...]
#
# Each run is a hunt (ci/lib.sh `hunt`): libFuzzer with -seed=$FUZZ_SEED
# (default 1), from an empty corpus, with inputs up to the target's
# `hunt_max_len` from the start.
#
# A spec (ci/mutants/*.mutant) is a line saying what the bug is, a
# "Targets: t1 t2" line (the targets to try, in order), then search/replace
# changes, applied by the `plant` binary (harness/src/mutant.rs). Exits 1
# when a bug is not caught within the budget, 2 on bad usage. The tree is never
# modified: everything happens under $MUTANTS_WORK (default
# ${TMPDIR:-/tmp}/idpool-mutants), where the artifacts stay for triage.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

budget=60
# libFuzzer's random seed: fixed, so that a run can be repeated (its
# timing still varies with the machine's load).
seed=${FUZZ_SEED:-1}
given=()
while [ $# -gt 0 ]; do
    case "$1" in
    --budget)
        [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || die "--budget needs a number of seconds"
        budget=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) [ -f "$1" ] || die "no such spec: $1"; given+=("$1"); shift ;;
    esac
done
mutant_specs "${given[@]}"

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
read_registry
work=$MUTANTS_WORK
mkdir -p "$work"
# One target directory for every mutant: only the crates a bug is planted in rebuild.
export CARGO_TARGET_DIR="$work/target"

rows=()
missed=0

available=$(targets 2>/dev/null)
for spec in "${specs[@]}"; do
    name=$(basename "$spec" .mutant)
    targets=$(plant --targets "$spec" | tr '\n' ' ')
    [ -n "$targets" ] || die "$spec has no 'Targets:' line"
    step "$name: $(head -n 1 "$spec")"

    # A stale catch of an earlier run must not reach triage-check.sh.
    rm -f "$work/caught/$name"
    tree="$work/tree"
    if ! plant_tree "$spec" "$tree"; then
        rows+=("| $name | spec does not apply | | |"); missed=$((missed + 1)); continue
    fi
    log="$work/$name.log"
    build=()
    for target in $targets; do grep -qx -- "$target" <<<"$available" && build+=("$target"); done
    if [ ${#build[@]} -gt 0 ] && ! fuzz_build "$tree" "${build[@]}" 2> "$log"; then
        rows+=("| $name | build failed (see $log) | | |"); missed=$((missed + 1)); continue
    fi

    caught=""
    # What the targets that did not catch it left: "timeout: pool_ops; ..."
    others=""
    said=""
    for target in $targets; do
        # An optional target whose needs are not met here (the kernel's
        # header) would fail every input: leave it out, saying why.
        if ! grep -qx -- "$target" <<<"$available"; then
            echo "   $target: skipped ($(target_field "$target" unavailable))" >&2
            continue
        fi
        dir="$work/artifacts/$name/$target"
        read -r seconds outcome <<<"$(hunt_planted "$tree" "$target" "$dir" "$seed" "$budget")"
        outcome=${outcome//_/ }
        [ "$outcome" != none ] || outcome=""
        if [ "$outcome" = caught ]; then
            said=$(first_message "$dir")
            caught="| $name | $target | $seconds | $said |"
            mkdir -p "$work/caught"
            ls -d "$dir"/crash-* | head -n 1 > "$work/caught/$name"
            echo "   caught by $target in ${seconds}s: $said" >&2
            break
        elif [ -n "$outcome" ]; then
            # Not a catch: say what it was, and try the next target.
            said=$(first_message "$dir")
            others="${others:+$others; }$outcome: $target after ${seconds}s"
            echo "   $target: $outcome after ${seconds}s, not caught: $said" >&2
        else
            echo "   $target: not caught in ${budget}s" >&2
        fi
    done
    if [ -z "$caught" ] && [ -n "$others" ]; then
        caught="| $name | $others | | $said |"
        missed=$((missed + 1))
    elif [ -z "$caught" ]; then
        caught="| $name | NOT CAUGHT ($targets, ${budget}s each) | | |"
        missed=$((missed + 1))
    fi
    rows+=("$caught")
done

page=$(result_page planted-bugs)
{
    page_head "Planted bugs, caught from an empty corpus" ci/mutants/run.sh --budget "$budget" "${given[@]}"
    echo "libFuzzer seed $seed; seconds from starting \`cargo fuzz run\` to the crash, on each"
    echo "spec's first target that caught it; the first line the harness said."
    echo
    echo "| planted bug | caught by | seconds | what the harness said |"
    echo "| --- | --- | ---: | --- |"
    printf '%s\n' "${rows[@]}"
} > "$page"
echo
cat "$page"
echo
echo "result page: $page"
echo "artifacts: $work/artifacts/<spec>/<target>/"
[ "$missed" -eq 0 ] || { echo "$missed planted bug(s) not caught" >&2; exit 1; }
