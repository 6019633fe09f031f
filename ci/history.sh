#!/usr/bin/env bash
# Does the campaign rediscover upstream's real bugs? Fuzzes each known
# finding (harness/src/history.rs) with the target that should find it,
# from an empty corpus, with libFuzzer seeds 1, 2 and 3, and prints per
# finding: the target, the median seconds to find it, the minimised
# trace's length and its signature.
#
#   ci/history.sh [--budget SECONDS] [--warn-goals]
#
#   --warn-goals  a finding found by at least one seed but slower than the
#                 goal, or minimised to more operations, is printed as a
#                 goal missed without failing the run (a finding no seed
#                 finds, or a crash that is not the finding, still fails)
#
# Each hunt starts from an empty corpus. libFuzzer's length control would
# then keep its inputs under about 20 bytes for minutes, while a program
# with a header and two operations needs more, so the hunts allow inputs
# of up to 256 bytes from the start (-len_control=0 -max_len=256).
# A target may ask for shorter ones (`Target::hunt_max_len`, the third
# column of `targets --findings`): the concurrent target takes 96 bytes,
# because its long inputs are slow and a seed that meets them early stays
# slow.
#
# Each run sets IDPOOL_HISTORY to the one finding it looks for: the other
# known findings end their runs quietly, and anything else (mainline
# diverging from its model, a historical version diverging in another
# way) crashes too, so "mainline stays clean" is checked by the same runs.
# Exits 1 when a finding is missed, its median is not under the goal
# (60 s), its minimised trace has more than 6 operations, or a run ends
# with a crash that is not the finding; 2 on bad usage. Artifacts and
# logs stay under ${TMPDIR:-/tmp}/idpool-history.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

budget=60
warn_goals=0
goal_seconds=60
goal_ops=6
while [ $# -gt 0 ]; do
    case "$1" in
    --budget)
        [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || die "--budget needs a number of seconds"
        budget=$2; shift 2 ;;
    --warn-goals) warn_goals=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done

# finding and target: from the harness.
mapfile -t runs < <(targets --findings)
[ ${#runs[@]} -gt 0 ] || die "the targets binary listed no finding to hunt"
seeds=(1 2 3)

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
work=${TMPDIR:-/tmp}/idpool-history
rm -rf "$work" && mkdir -p "$work"
step "building the targets and triage"
(cd "$ROOT" && cargo build -q --release -p triage)
triage="$ROOT/target/release/triage"
for t in $(printf '%s\n' "${runs[@]}" | awk '{ print $2 }' | sort -u); do
    (cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}" "$t") >/dev/null 2>&1
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

failed=0
table="$work/report.md"
{
    echo "| finding | target | median s (seeds ${seeds[*]}) | minimised ops | signature |"
    echo "| --- | --- | ---: | ---: | --- |"
} > "$table"
for run in "${runs[@]}"; do
    read -r finding target max_len <<<"$run"
    times=() ops="" sig=""
    for seed in "${seeds[@]}"; do
        dir="$work/$finding/$target/seed-$seed"
        mkdir -p "$dir/corpus"
        start=$(date +%s.%N)
        IDPOOL_HISTORY=$finding run_libfuzzer "$ROOT" "$target" "$dir" "$dir/log" "$dir/corpus" -- \
            -seed="$seed" -max_total_time="$budget" -len_control=0 -max_len="$max_len" || true
        end=$(date +%s.%N)
        art=$(find "$dir" -maxdepth 1 -name 'crash-*' | head -n 1)
        if [ -z "$art" ]; then
            echo "$finding/$target seed $seed: not found in ${budget} s" >&2
            times+=(inf); continue
        fi
        times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
        out=$("$triage" minimize "$art" -o "$dir/min.trace" 2>&1 || true)
        this_sig=$(grep -m1 '^# signature:' "$dir/min.trace" | sed 's/^# signature: //' || true)
        this_ops=$(grep -o -- '-> [0-9]* operations' <<<"$out" | tail -n 1 | grep -o '[0-9]*' || true)
        # The finding is what `history::Finding::of` tells the minimised
        # failure to be (triage writes it in the trace's header), and a
        # historical version's: a mainline side's failure names no version
        # (e.g. `dbitmap: kernel crash`) and is a finding of its own.
        if ! grep -qx -- "# finding: $finding" "$dir/min.trace" || ! grep -qE -- '(c-2024-06|c-v3|rust-v1)' <<<"$this_sig"; then
            echo "$finding/$target seed $seed: crashed with $this_sig, not the finding" >&2
            failed=1
        fi
        if [ -z "$ops" ] || [ "${this_ops:-999}" -lt "$ops" ]; then
            ops=${this_ops:-?} sig=$this_sig
            cp "$dir/min.trace" "$work/$finding-$target.trace"
        fi
    done
    med=$(printf '%s\n' "${times[@]}" | sed 's/^inf$/99999/' | median)
    printf '| %s | %s | %.1f | %s | %s |\n' "$finding" "$target" "$med" "$ops" "$sig" >> "$table"
    if awk -v m="$med" -v g="$goal_seconds" 'BEGIN { exit !(m >= g) }' || [ "${ops:-99}" = "?" ] || [ "${ops:-99}" -gt "$goal_ops" ]; then
        echo "$finding/$target: median ${med} s, ${ops} operations: goal missed" >&2
        if [ "${ops:-?}" = "?" ] || [ -z "$ops" ]; then
            echo "$finding/$target: no seed found it" >&2
            failed=1
        elif [ "$warn_goals" -eq 0 ]; then
            failed=1
        fi
    fi
done
cat "$table"
echo "minimised traces: $work/<finding>-<target>.trace"
exit $failed
