#!/usr/bin/env bash
# Does the campaign rediscover upstream's real bugs? Fuzzes each known
# finding (harness/src/history.rs) with each target that hunts it
# (`Target::hunts`), from an empty corpus, with libFuzzer seeds 1, 2 and 3,
# and writes per finding and target: the median seconds to find it, the
# minimised trace's length, its signature and what reported it (a check of
# the harness, or AddressSanitizer for a memory-safety finding), to a
# result page (docs/results/<date>-history.md).
#
#   ci/history.sh [--budget SECONDS] [--warn-goals] [--finding NAME]
#
#   --finding     hunts only that finding (a name of `targets --findings`,
#                 e.g. double-free), with every target that hunts it
#   --warn-goals  a finding found by at least one seed but slower than the
#                 goal, or minimised to more operations, is printed as a
#                 goal missed without failing the run (a finding no seed
#                 finds, or a crash that is not the finding, still fails)
#
# Each run is a hunt (ci/lib.sh `hunt`): inputs up to the target's
# `hunt_max_len` from the start, and IDPOOL_HISTORY set to the one finding
# it looks for: the other known findings end their runs quietly, and
# anything else (mainline diverging from its model, a historical version
# diverging in another way) crashes too, so "mainline stays clean" is
# checked by the same runs. A run counts when `triage minimize` tells its
# minimised failure to be the finding hunted (`--json`: its `finding`), on
# a historical version (a finding of mainline's own drivers, listed with
# `"mainline": true`, on mainline); a memory-safety finding (`--json`:
# `memory_safety`) hunted by a target built with AddressSanitizer counts
# only when ASan reported it in the run's log. Exits 1 when a finding is
# missed, its median is not
# under the goal (60 s), its minimised trace has more than 6 operations,
# or a run ends with a crash that is not the finding; 2 on bad usage.
# Artifacts and logs stay under ${TMPDIR:-/tmp}/idpool-history.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

budget=60
warn_goals=0
only=""
goal_seconds=60
goal_ops=6
while [ $# -gt 0 ]; do
    case "$1" in
    --budget)
        [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || die "--budget needs a number of seconds"
        budget=$2; shift 2 ;;
    --warn-goals) warn_goals=1; shift ;;
    --finding)
        [ $# -ge 2 ] || die "--finding needs a finding's name"
        only=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done

read_registry
hunts=$(targets --findings --json)
[ "$(jq length <<<"$hunts")" -gt 0 ] || die "the targets binary listed no finding to hunt"
if [ -n "$only" ]; then
    hunts=$(jq --arg f "$only" '[.[] | select(.finding == $f)]' <<<"$hunts")
    [ "$(jq length <<<"$hunts")" -gt 0 ] || die "no target hunts '$only' (see targets --findings)"
fi
seeds=(1 2 3)

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
work=${TMPDIR:-/tmp}/idpool-history
rm -rf "$work" && mkdir -p "$work"
step "building the targets and triage"
triage=$(triage_bin)
# shellcheck disable=SC2046 # target names, one word each
fuzz_build "$ROOT" $(jq -r '.[].target' <<<"$hunts" | sort -u) 2>/dev/null

# One seed's hunt for finding $1 with target $2 (`hunt_finding`, which
# builds nothing: fuzz_build above built each target with the flags its
# hunt runs with, AddressSanitizer for one that links C): prints "SECONDS
# OPS BY SIGNATURE" when the seed found it, "inf" when it did not, "notit"
# (reported) for a crash that is not the finding or whose minimising did
# not end.
hunt_seed() {
    local finding=$1 target=$2 seed=$3 mainline=$4 found
    found=$(hunt_finding "$ROOT" "$triage" "$finding" "$target" "$work/$1/$2/seed-$3" "$seed" "$budget" "$mainline")
    case "$found" in
    inf) echo "$finding/$target seed $seed: not found in ${budget} s" >&2 ;;
    notit*) echo "$finding/$target seed $seed: crashed with ${found#notit }, not the finding" >&2; found=notit ;;
    slowmin) echo "$finding/$target seed $seed: crashed, and triage minimize was still running after ${MINIMIZE_TIMEOUT} s" >&2; found=notit ;;
    esac
    echo "$found"
}

failed=0
rows=()
while read -r finding target max_len mainline; do
    times=() ops="" sig="" by=""
    for seed in "${seeds[@]}"; do
        read -r seconds this_ops this_by this_sig <<<"$(hunt_seed "$finding" "$target" "$seed" "$mainline")"
        case "$seconds" in
        inf) times+=(inf); continue ;;
        notit) failed=1; times+=(inf); continue ;;
        esac
        times+=("$seconds")
        if [ -z "$ops" ] || [ "$this_ops" -lt "$ops" ]; then
            ops=$this_ops sig=$this_sig by=$this_by
            cp "$work/$finding/$target/seed-$seed/min.trace" "$work/$finding-$target.trace"
        fi
    done
    med=$(printf '%s\n' "${times[@]}" | sed 's/^inf$/99999/' | median)
    case "$by" in
    asan:*) by="AddressSanitizer: $(tr '_' ' ' <<<"${by#asan:}")" ;;
    check) by="a check" ;;
    esac
    rows+=("$(printf '| %s | %s | %s | %s | %.1f | %s | %s | %s |' "$finding" "$target" "$max_len" \
        "${times[*]}" "$med" "${ops:-?}" "${sig:-}" "${by:-}")")
    if awk -v m="$med" -v g="$goal_seconds" 'BEGIN { exit !(m >= g) }' || [ -z "$ops" ] || [ "$ops" -gt "$goal_ops" ]; then
        echo "$finding/$target: median ${med} s, ${ops:-no} operations: goal missed" >&2
        if [ -z "$ops" ]; then
            echo "$finding/$target: no seed found it" >&2
            failed=1
        elif [ "$warn_goals" -eq 0 ]; then
            failed=1
        fi
    fi
done < <(jq -r '.[] | "\(.finding) \(.target) \(.max_len) \(.mainline)"' <<<"$hunts")

page=$(result_page history)
{
    page_head "Upstream's bugs, rediscovered from an empty corpus" ci/history.sh --budget "$budget" ${only:+--finding "$only"}
    echo "Seconds from starting \`cargo fuzz run\` to the crash, per libFuzzer seed (${seeds[*]})"
    echo "(\`inf\`: not found in ${budget} s), their median, and the shortest minimised trace."
    echo "Goals: median under ${goal_seconds} s, at most ${goal_ops} operations."
    echo
    echo "| finding | target | max_len | seconds, seeds ${seeds[*]} | median s | minimised ops | signature | reported by |"
    echo "| --- | --- | ---: | --- | ---: | ---: | --- | --- |"
    printf '%s\n' "${rows[@]}"
} > "$page"
cat "$page"
echo "result page: $page"
echo "minimised traces: $work/<finding>-<target>.trace"
exit $failed
