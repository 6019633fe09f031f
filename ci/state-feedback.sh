#!/usr/bin/env bash
# What the state feedback (harness/src/feedback.rs) brings: fuzzes each
# target from an empty corpus with libFuzzer, once built with the feedback
# and once without (`--no-default-features`), with the same seeds, then
# counts the distinct abstract states each run's corpus reached
# (`triage states`, exact and engine-independent) and prints a table.
#
#   ci/state-feedback.sh [--seconds N] [--seeds 1,2,3] [TARGET...]
#
#   --seconds N   how long each run lasts (default 60)
#   --seeds LIST  libFuzzer seeds, comma-separated (default 1,2,3)
#
# Targets default to those the registry lists for libFuzzer with a corpus.
# The table is a result page (docs/results/<date>-state-feedback.md).
# Scratch files stay under $STATE_FEEDBACK_WORK (default
# ${TMPDIR:-/tmp}/idpool-state-feedback).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

seconds=60
seeds=1,2,3
targets_given=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--seconds needs a positive number"; seconds=$2; shift 2 ;;
    --seeds) [[ "${2:-}" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds needs a comma-separated list of numbers"; seeds=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) targets_given+=("$1"); shift ;;
    esac
done
engine_filter=(--engine libfuzzer --corpus)
if [ ${#targets_given[@]} -gt 0 ]; then
    check_targets "${targets_given[@]}"
    list=("${targets_given[@]}")
else
    mapfile -t list < <(targets "${engine_filter[@]}")
fi

work="${STATE_FEEDBACK_WORK:-${TMPDIR:-/tmp}/idpool-state-feedback}"
rm -rf "$work" && mkdir -p "$work"
"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
step "building with and without the state feedback"
(cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}" --target-dir "$work/build-with")
(cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}" --no-default-features --target-dir "$work/build-without")
triage=$(triage_bin)
need_jq

rows=()
for t in "${list[@]}"; do
    for seed in ${seeds//,/ }; do
        declare -A states=() cov=()
        for variant in with without; do
            dir="$work/$t/$variant-$seed"
            mkdir -p "$dir/corpus"
            step "$t, seed $seed, $variant the feedback (${seconds}s)"
            "$(fuzz_bin "$ROOT" "$work/build-$variant")/$t" "$dir/corpus" \
                -dict="$ROOT/fuzz/dict/$t.dict" -seed="$seed" -max_total_time="$seconds" \
                "${LIBFUZZER_FLAGS[@]}" \
                -artifact_prefix="$dir/" -print_final_stats=1 > "$dir/log" 2>&1 || true
            states[$variant]=$("$triage" states --json --target "$t" "$dir/corpus" 2>/dev/null | jq -r .states)
            cov[$variant]=$(grep -a 'cov:' "$dir/log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
        done
        rows+=("| $t | $seed | ${states[with]:-?} | ${states[without]:-?} | ${cov[with]:-?} | ${cov[without]:-?} |")
        unset states cov
    done
done

page=$(result_page state-feedback)
{
    page_head "What the state feedback brings" ci/state-feedback.sh --seconds "$seconds" --seeds "$seeds" "${targets_given[@]}"
    echo "Distinct abstract states and libFuzzer edges after ${seconds}s from an empty corpus:"
    echo
    echo "| target | seed | states with | states without | cov with | cov without |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "(\"cov with\" counts the feedback's own edges too: compare states, not cov, across the two.)"
} > "$page"
echo
cat "$page"
echo "result page: $page"
