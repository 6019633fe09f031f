#!/usr/bin/env bash
# Distinct abstract states per CPU-minute: fuzzes each target from an empty
# corpus with libFuzzer on one core, as a hunt does (inputs of up to the
# target's hunt_max_len from the start, -len_control=0; ci/lib.sh: hunt),
# with the same seeds, in two variants,
# counts the distinct abstract states each run's corpus reached (`triage
# states`, exact and engine-independent) and prints a table.
#
#   ci/state-feedback.sh [--seconds N] [--seeds 1,2,3] [--baseline REV]
#                        [--baseline-schedule FLAGS] [--baseline-build FLAGS]
#                        [--yardstick] [TARGET...]
#
#   --seconds N     how long each run lasts (default 60)
#   --seeds LIST    libFuzzer seeds, comma-separated (default 1,2,3)
#   --baseline REV  compare this tree with REV (a commit, branch or tag,
#                   checked out in a scratch worktree and built apart) instead
#                   of with this tree built without the state feedback
#                   (`--no-default-features`); the two variants' runs
#                   alternate, seed by seed, so that the machine's load
#                   weighs on both alike
#   --baseline-schedule FLAGS
#                   libFuzzer's schedule flags for the baseline's runs, in
#                   place of LIBFUZZER_SCHEDULE (ci/lib.sh): the flags REV's
#                   own ci/lib.sh gave, to compare the two trees as each
#                   fuzzes; '' is libFuzzer's default. Without it both run
#                   with this tree's flags (the ratio is the code's)
#   --baseline-build FLAGS
#                   cargo-fuzz's build flags for the baseline's targets that
#                   this tree builds apart (those under AddressSanitizer:
#                   ci/lib.sh fuzz_flags_for), in place of this tree's
#                   flags and its ASAN_RUST_FLAGS: the flags REV's own
#                   ci/lib.sh gave, e.g. '-O --debug-assertions --sanitizer
#                   address' before 2026-12-04
#   --yardstick     also run `triage sample --explore` for as long, with
#                   each seed, on one core: the states an exploration
#                   reaches in the same CPU time, a third column
#
# Each target is built as its hunts build it (ci/lib.sh fuzz_flags_for):
# one under AddressSanitizer apart, with its flags.
#
# Targets default to those the registry lists for libFuzzer with a corpus
# (with --baseline, those the baseline has too; a target it lacks is
# `n/a`). Both variants run with this tree's hunt_max_len (each with its
# own dictionary), so a change to a target's length is compared by hand
# (docs/results/2026-12-04-feedback-experiments.md); every corpus is
# counted by this tree's `triage states`, one yardstick for both variants.
# That count is right for the baseline only while both trees decode an
# input into the same program: with --baseline, each baseline corpus is
# also counted by the baseline's own `triage states`, and the page lists
# every run whose two counts differ (the trees decode inputs, or define
# states, differently; docs/results/2026-12-04-feedback-experiments-2.md).
# The states per CPU-minute are the distinct states at the end of a run
# divided by its minutes (each run has one core). The table is a result
# page (docs/results/<date>-state-feedback.md).
# Scratch files stay under $STATE_FEEDBACK_WORK (default
# ${TMPDIR:-/tmp}/idpool-state-feedback); the builds are kept between runs.
# Two runs at once need a directory each (they share builds and corpora).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
given_args=("$@")

seconds=60
seeds=1,2,3
baseline=""
baseline_schedule=("${LIBFUZZER_SCHEDULE[@]}")
schedule_given=0
baseline_build=()
build_given=0
yardstick=0
targets_given=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--seconds needs a positive number"; seconds=$2; shift 2 ;;
    --seeds) [[ "${2:-}" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds needs a comma-separated list of numbers"; seeds=$2; shift 2 ;;
    --baseline) [ -n "${2:-}" ] || die "--baseline needs a revision"; baseline=$2; shift 2 ;;
    --baseline-schedule)
        [ $# -ge 2 ] || die "--baseline-schedule needs the flags (or '' for libFuzzer's default)"
        read -ra baseline_schedule <<<"$2"; schedule_given=1; shift 2 ;;
    --baseline-build)
        [ -n "${2:-}" ] || die "--baseline-build needs cargo-fuzz's build flags"
        read -ra baseline_build <<<"$2"; build_given=1; shift 2 ;;
    --yardstick) yardstick=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) targets_given+=("$1"); shift ;;
    esac
done
[ "$schedule_given" = 0 ] || [ -n "$baseline" ] || die "--baseline-schedule needs --baseline"
[ "$build_given" = 0 ] || [ -n "$baseline" ] || die "--baseline-build needs --baseline"
IFS=, read -ra seed_list <<<"$seeds"
engine_filter=(--engine libfuzzer --corpus)
if [ ${#targets_given[@]} -gt 0 ]; then
    check_targets "${targets_given[@]}"
    list=("${targets_given[@]}")
else
    mapfile -t list < <(targets "${engine_filter[@]}")
fi

work="${STATE_FEEDBACK_WORK:-${TMPDIR:-/tmp}/idpool-state-feedback}"
mkdir -p "$work"
rm -rf "$work/runs"
"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
triage=$(triage_bin)
read_registry

# The variants: a name, the tree it is built from, and its build flags.
declare -A tree_of flags_of available
if [ -n "$baseline" ]; then
    base=$(baseline_worktree "$baseline" "$work")
    base_rev=$(git -C "$base" rev-parse --short=12 HEAD)
    variants=(current baseline)
    tree_of=([current]=$ROOT [baseline]=$base)
    flags_of=([current]="" [baseline]="")
    labels=("this tree" "$baseline ($base_rev)")
else
    variants=(with without)
    tree_of=([with]=$ROOT [without]=$ROOT)
    flags_of=([with]="" [without]=--no-default-features)
    labels=("with the feedback" "without")
fi
for v in "${variants[@]}"; do
    step "building the $v variant (${tree_of[$v]})"
    # shellcheck disable=SC2086 # no flag, or one
    (cd "${tree_of[$v]}/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}" ${flags_of[$v]} \
        --target-dir "$work/build-$v") > "$work/build-$v.log" 2>&1 ||
        die "the $v variant does not build (see $work/build-$v.log)"
    available[$v]=" $(ls "$(fuzz_bin "${tree_of[$v]}" "$work/build-$v")" | tr '\n' ' ') "
done
base_triage=""
if [ -n "$baseline" ]; then
    step "building the baseline's triage, to count its corpora its own way too"
    base_triage=$(CARGO_TARGET_DIR="$work/triage-$base_rev" tree_triage "$base" 2> "$work/triage-$base_rev.log") ||
        { base_triage=""; echo "   it does not build (see $work/triage-$base_rev.log): counted by this tree's only" >&2; }
fi

# A target built apart by its hunts (under AddressSanitizer) is built apart
# here too, each variant into its own directory: bin_of[VARIANT,TARGET].
declare -A bin_of
for t in "${list[@]}"; do
    read -ra own <<<"$(fuzz_flags_for "$t")"
    [ "${own[*]}" != "${FUZZ_BUILD_FLAGS[*]}" ] || continue
    for v in "${variants[@]}"; do
        [[ "${available[$v]}" == *" $t "* ]] || continue
        given=("${own[@]}") rust=("${ASAN_RUST_FLAGS[@]}")
        if [ "$v" = baseline ] && [ "$build_given" = 1 ]; then
            given=("${baseline_build[@]}") rust=()
        fi
        flags=()
        for ((i = 0; i < ${#given[@]}; i++)); do # less the target directory: its own below
            if [ "${given[i]}" = --target-dir ]; then i=$((i + 1)); else flags+=("${given[i]}"); fi
        done
        step "building $t apart for the $v variant (${flags[*]})"
        # shellcheck disable=SC2030,SC2031,SC2086 # ASAN_RUST_FLAGS for this build only; no flag, or one
        (ASAN_RUST_FLAGS=(${rust[@]+"${rust[@]}"}) && cd "${tree_of[$v]}/fuzz" &&
            fuzz_cargo fuzz build "${flags[@]}" ${flags_of[$v]} --target-dir "$work/build-$v-$t" "$t") \
            > "$work/build-$v-$t.log" 2>&1 || die "$t does not build for the $v variant (see $work/build-$v-$t.log)"
        bin_of[$v,$t]=$(fuzz_bin "${tree_of[$v]}" "$work/build-$v-$t")
    done
done

# One run: prints its states, edges and executions, and for the baseline
# its states as the baseline's own triage counts them (its prose form, which
# every revision prints: the last line, `SECS states: N`), `?` when that
# triage counted nothing.
run() {
    local v=$1 t=$2 seed=$3 dir=$4 tree=${tree_of[$1]} dict=() schedule=("${LIBFUZZER_SCHEDULE[@]}")
    [ "$v" != baseline ] || schedule=("${baseline_schedule[@]}")
    mkdir -p "$dir/corpus"
    [ ! -f "$tree/fuzz/dict/$t.dict" ] || dict=(-dict="$tree/fuzz/dict/$t.dict")
    "${bin_of[$v,$t]:-$(fuzz_bin "$tree" "$work/build-$v")}/$t" "$dir/corpus" "${dict[@]}" -seed="$seed" \
        -max_total_time="$seconds" "${HUNT_FLAGS[@]}" "${LIBFUZZER_LIMITS[@]}" \
        ${schedule[@]+"${schedule[@]}"} \
        -artifact_prefix="$dir/" -print_final_stats=1 > "$dir/log" 2>&1 || true
    printf '%s %s %s\n' \
        "$("$triage" states --json --target "$t" "$dir/corpus" 2>/dev/null | jq -r .states)" \
        "$(grep -a 'cov:' "$dir/log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')" \
        "$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")"
    if [ "$v" = baseline ] && [ -n "$base_triage" ]; then
        local own
        own=$("$base_triage" states --target "$t" "$dir/corpus" 2>/dev/null | tail -n 1 | sed -n 's/.* states: //p')
        echo "${own:-?}"
    fi
}

per_minute() { awk -v s="$1" -v t="$seconds" 'BEGIN { if (s ~ /^[0-9]+$/) printf "%.0f", s * 60 / t; else print "?" }'; }

rows=() summary=() apart=() uncounted=() compared=0
declare -A explored_seeds=()
for t in "${list[@]}"; do
    hunt_flags "$t" # this tree's lengths, for both variants
    declare -A rates=()
    for seed in "${seed_list[@]}"; do
        declare -A states=() cov=() execs=()
        order=("${variants[@]}")
        [ $((seed % 2)) -eq 1 ] || order=("${variants[1]}" "${variants[0]}")
        for v in "${order[@]}"; do
            if [[ "${available[$v]}" != *" $t "* ]]; then
                states[$v]=n/a
                continue
            fi
            step "$t, seed $seed, $v (${seconds}s)"
            { read -r states[$v] cov[$v] execs[$v] && read -r base_count || base_count=""; } \
                <<<"$(run "$v" "$t" "$seed" "$work/runs/$t/$v-$seed")"
            if [ "$v" = baseline ] && [ -n "$base_triage" ]; then
                if [ "$base_count" = "?" ] || [ -z "$base_count" ]; then
                    uncounted+=("$t seed $seed")
                else
                    compared=$((compared + 1))
                    [ "$base_count" = "${states[$v]}" ] ||
                        apart+=("| $t | $seed | ${states[$v]} | $base_count |")
                fi
            fi
            rates[$v]+="$(per_minute "${states[$v]}") "
            echo "   ${states[$v]} states, cov ${cov[$v]:-?}, ${execs[$v]:-?} runs" >&2
        done
        if [ "$yardstick" = 1 ]; then
            step "$t, seed $seed, exploration (${seconds}s)"
            explored=$("$triage" --json sample --target "$t" --seconds "$seconds" --explore --seed "$seed" | jq -r .states)
            rates[explored]+="$(per_minute "$explored") "
            explored_seeds[$t]+="${explored_seeds[$t]:+, }$explored"
            echo "   $explored states" >&2
        fi
        a=${variants[0]} b=${variants[1]}
        rows+=("| $t | $seed | ${states[$a]:-?} | ${states[$b]:-?} | ${cov[$a]:-?} | ${cov[$b]:-?} | ${execs[$a]:-?} | ${execs[$b]:-?} |")
        unset states cov execs
    done
    ma=$(tr ' ' '\n' <<<"${rates[${variants[0]}]:-}" | grep . | median)
    mb=$(tr ' ' '\n' <<<"${rates[${variants[1]}]:-}" | grep . | median)
    ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2fx", a / b; else print "n/a" }')
    if [ "$yardstick" = 1 ]; then
        mx=$(tr ' ' '\n' <<<"${rates[explored]}" | grep . | median)
        summary+=("| $t | ${ma} | ${mb/\?/n/a} | $ratio | $mx |")
    else
        summary+=("| $t | ${ma} | ${mb/\?/n/a} | $ratio |")
    fi
    unset rates
done

page=$(result_page state-feedback)
{
    page_head "Distinct abstract states per CPU-minute" ci/state-feedback.sh "${given_args[@]}"
    echo "Each run: one core, ${seconds} s from an empty corpus, libFuzzer seeds ${seeds}"
    echo "(\`LIBFUZZER_FLAGS\` of ci/lib.sh, the target's dictionary, and inputs of up to"
    echo "its \`hunt_max_len\` from the start, -len_control=0, as a hunt runs); the states"
    echo "its corpus reached, counted by this tree's \`triage states\`. Per CPU-minute:"
    echo "the median over the seeds of states x 60 / ${seconds}."
    if [ -n "$baseline" ]; then
        echo "libFuzzer's schedule flags: '${LIBFUZZER_SCHEDULE[*]}' for this tree, '${baseline_schedule[*]}' for the baseline."
        [ "$build_given" = 0 ] ||
            echo "The baseline's targets built apart: \`cargo fuzz build ${baseline_build[*]}\` (this tree's: ci/lib.sh \`fuzz_flags_for\`, with ASAN_RUST_FLAGS)."
    fi
    [ "$yardstick" = 0 ] ||
        echo "The exploration: \`triage sample --explore --seconds ${seconds}\` with each seed, on one core, its median per CPU-minute (a yardstick: docs/design.md)."
    echo
    if [ "$yardstick" = 1 ]; then
        echo "| target | ${labels[0]}, states per CPU-minute | ${labels[1]} | ratio | exploration |"
        echo "| --- | ---: | ---: | ---: | ---: |"
    else
        echo "| target | ${labels[0]}, states per CPU-minute | ${labels[1]} | ratio |"
        echo "| --- | ---: | ---: | ---: |"
    fi
    printf '%s\n' "${summary[@]}"
    echo
    echo "Every run (states, libFuzzer's edges, executions):"
    echo
    echo "| target | seed | states, ${labels[0]} | states, ${labels[1]} | cov | cov | runs | runs |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    if [ ${#apart[@]} -gt 0 ]; then
        echo "**Counted apart**: the baseline's own \`triage states\` counts these of its"
        echo "corpora differently, so the two trees decode inputs into programs, or define"
        echo "the states, differently. If they decode inputs differently, this tree's"
        echo "count of the baseline's corpora is wrong (its inputs replay as other"
        echo "programs): use the baseline's. If they only define the states differently,"
        echo "the table's count stands: one yardstick for both."
        echo
        echo "| target | seed | states, by this tree's triage | by the baseline's |"
        echo "| --- | ---: | ---: | ---: |"
        printf '%s\n' "${apart[@]}"
        echo
    elif [ "$compared" -gt 0 ] && [ ${#uncounted[@]} -eq 0 ]; then
        echo "The baseline's own \`triage states\` counts its corpora as this tree's does ($compared of $compared)."
        echo
    fi
    if [ ${#uncounted[@]} -gt 0 ]; then
        echo "The baseline's own \`triage states\` counted nothing for: $(IFS=,; echo "${uncounted[*]}" | sed 's/,/, /g')."
        echo
    elif [ -n "$baseline" ] && [ -z "$base_triage" ]; then
        echo "The baseline's own \`triage\` did not build: its corpora are counted by this tree's only."
        echo
    fi
    echo "(libFuzzer's edges count the feedback's own slots too: compare states, not cov, across"
    echo "builds whose feedback differs.)"
    if [ "$yardstick" = 1 ]; then
        echo
        echo "The exploration's states, seed by seed ($seeds):"
        echo
        for t in "${list[@]}"; do echo "- $t: ${explored_seeds[$t]:-?}"; done
    fi
} > "$page"
echo
cat "$page"
echo "result page: $page"
