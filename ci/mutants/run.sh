#!/usr/bin/env bash
# Does the campaign find anything? Plants each bug (one spec per bug class
# of SPEC.md) in a scratch copy of the tree, fuzzes the targets the spec
# names, from an empty corpus, for a bounded time each, and reports which
# target caught it, how fast, and the first thing the harness said.
#
# Caught means a crash artifact (crash-*) whose failure is one of the
# harness's checks: the panic's message is the check's line ("<target>:
# step ..."). Anything else a target leaves is reported for what it is and
# is not caught: "timeout" (timeout-*), "oom" (oom-*), "leak" (leak-*),
# "crash, not a check" (a crash-* from a panic inside the allocator or a
# signal: the bug broke something, but no oracle said what), "slow unit"
# (slow-unit-* alone);
# the next target is then tried.
#
#   ci/mutants/run.sh [--budget SECONDS] [SPEC...]
#
# libFuzzer runs with -seed=$FUZZ_SEED (default 1), from an empty corpus,
# with inputs of up to 256 bytes from the start (-len_control=0
# -max_len=256): libFuzzer's length control would keep them at a few bytes
# for many seconds, shorter than most programs that show a bug (as in
# ci/history.sh).
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
work=$MUTANTS_WORK
mkdir -p "$work"
# One target directory for every mutant: only the crates a bug is planted in rebuild.
export CARGO_TARGET_DIR="$work/target"

# Whether the log's first panic is one of the harness's checks failing:
# its message (the line after "panicked at") is the check's line,
# "<target>: step ...", and not a panic from no check that the harness
# wrapped ("<target>: step N (capacity C): panic: ...").
failed_a_check() {
    local message
    message=$(grep -a -m1 -A1 "panicked at" "$1" | sed -n 2p || true)
    [[ "$message" == "$2: step "* ]] && ! [[ "$message" =~ ^$2:\ step\ [0-9]+\ \(capacity\ [0-9]+\):\ panic: ]]
}

# What libFuzzer left in an artifact directory, when it is not a catch:
# timeout, oom, leak, crash (not a check), slow unit; nothing when it is
# empty.
# Never fails.
left_behind() {
    local dir=$1 log=$2 target=$3
    if compgen -G "$dir/crash-*" > /dev/null; then
        failed_a_check "$log" "$target" && echo caught || echo "crash, not a check"
    elif compgen -G "$dir/timeout-*" > /dev/null; then echo timeout
    elif compgen -G "$dir/oom-*" > /dev/null; then echo oom
    elif compgen -G "$dir/leak-*" > /dev/null; then echo leak
    elif [ -n "$(ls -A "$dir")" ]; then echo "slow unit"
    fi
}

# What the harness said first: its check line ("<target>: step ..."), or
# else the first panic line (a panic inside the allocator), or else
# libFuzzer's own summary (a timeout or an out-of-memory). Never fails.
first_message() {
    local said
    said=$(grep -a -m1 "^$2: " "$1" || true)
    [ -n "$said" ] || said=$(grep -a -m1 -A1 "panicked at" "$1" | tail -n 1 || true)
    [ -n "$said" ] || said=$(grep -a -m1 "^SUMMARY: \|ERROR: libFuzzer" "$1" || true)
    printf '%s' "${said:-(no message; see $1)}" | cut -c1-160 | sed 's/|/\\|/g'
}

report="$work/report.md"
{
    echo "| planted bug | caught by | seconds | what the harness said |"
    echo "| --- | --- | ---: | --- |"
} > "$report"
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
    copy_tree "$tree"
    if ! plant "$spec" "$tree"; then
        echo "| $name | spec does not apply | | |" >> "$report"; missed=$((missed + 1)); continue
    fi
    log="$work/$name.log"
    if ! (cd "$tree/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}") > "$log" 2>&1; then
        echo "| $name | build failed (see $log) | | |" >> "$report"; missed=$((missed + 1)); continue
    fi

    caught=""
    # What the targets that did not catch it left: "timeout: pool_ops; ..."
    others=""
    said=""
    for target in $targets; do
        # An optional target whose needs are not met here (the kernel's
        # header) would fail every input: leave it out, saying why.
        if ! grep -qx -- "$target" <<<"$available"; then
            echo "   $target: skipped ($(targets 2>&1 >/dev/null | grep -m1 "^skipping $target:" || echo 'not a target'))" >&2
            continue
        fi
        corpus="$work/corpus/$name/$target"
        artifacts="$work/artifacts/$name/$target"
        rm -rf "$corpus" "$artifacts" && mkdir -p "$corpus" "$artifacts"
        start=$(date +%s.%N)
        run_libfuzzer "$tree" "$target" "$artifacts" "$log" "$corpus" -- \
            -max_total_time="$budget" -seed="$seed" -len_control=0 -max_len=256 || true
        end=$(date +%s.%N)
        seconds=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
        outcome=$(left_behind "$artifacts" "$log" "$target")
        if [ "$outcome" = caught ]; then
            said=$(first_message "$log" "$target")
            caught="| $name | $target | $seconds | $said |"
            mkdir -p "$work/caught"
            ls -d "$artifacts"/crash-* | head -n 1 > "$work/caught/$name"
            echo "   caught by $target in ${seconds}s: $said" >&2
            break
        elif [ -n "$outcome" ]; then
            # Not a catch: say what it was, and try the next target.
            said=$(first_message "$log" "$target")
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
    echo "$caught" >> "$report"
done

echo
cat "$report"
echo
echo "artifacts: $work/artifacts/<spec>/<target>/"
[ "$missed" -eq 0 ] || { echo "$missed planted bug(s) not caught" >&2; exit 1; }
