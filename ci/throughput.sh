#!/usr/bin/env bash
# Measures executions per second: each target runs N seconds from the
# committed corpus (read only: new inputs go to a scratch directory), one
# run at a time, R times, and the median exec/s per target and engine is
# printed as a Markdown table.
#
#   ci/throughput.sh [--seconds N] [--runs R] [--engines libfuzzer,afl,honggfuzz]
#                    [--baseline REV [--baseline-schedule FLAGS]] [--from-empty]
#                    [TARGET...]
#
#   --seconds N     how long each run lasts (default 30)
#   --runs R        runs per target and build (default 3; the median is kept)
#   --engines       which engines (default libfuzzer)
#   --baseline REV  also build REV (a commit, branch or tag) in a scratch
#                   worktree and alternate the two builds run by run; the
#                   table then has both medians and their ratio per target
#                   (the machines are noisy: only ratios measured side by
#                   side count)
#   --baseline-schedule FLAGS
#                   libFuzzer's schedule flags for the baseline's runs, in
#                   place of LIBFUZZER_SCHEDULE (ci/lib.sh); '' is
#                   libFuzzer's default, as scripts before it ran. Without
#                   it both builds run with today's flags (like with like:
#                   the ratio is the code's)
#   --from-empty    start every run from an empty corpus instead, run r
#                   with -seed=r (libFuzzer only): the harness's speed on
#                   what the fuzzer generates, whatever the committed
#                   corpus holds (its first pass is what a run from the
#                   corpus measures, and deep inputs weigh on it)
#
# Every run uses the target's dictionary and LIBFUZZER_FLAGS (ci/lib.sh)
# like every other libFuzzer run, and each target is built as its hunts
# build it (ci/lib.sh fuzz_flags_for: kernel_dbitmap under
# AddressSanitizer), a --baseline tree with this tree's flags too; the
# page names the targets built apart. The targets default to those the
# registry lists for each engine; with --baseline, a target the baseline
# does not have is measured on the current tree alone. The table is a
# result page (docs/results/<date>-throughput.md). Scratch files stay under
# $THROUGHPUT_WORK (default ${TMPDIR:-/tmp}/idpool-throughput).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
given_args=("$@")

seconds=30
runs=3
engines=libfuzzer
baseline=""
baseline_schedule=("${LIBFUZZER_SCHEDULE[@]}")
schedule_given=0
from_empty=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--seconds needs a positive number"; seconds=$2; shift 2 ;;
    --runs) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"; runs=$2; shift 2 ;;
    --engines) [ -n "${2:-}" ] || die "--engines needs a list, e.g. libfuzzer,afl"; engines=$2; shift 2 ;;
    --baseline) [ -n "${2:-}" ] || die "--baseline needs a revision"; baseline=$2; shift 2 ;;
    --baseline-schedule) [ $# -ge 2 ] || die "--baseline-schedule needs flags ('' for libFuzzer's default)"
        read -ra baseline_schedule <<<"$2"; schedule_given=1; shift 2 ;;
    --from-empty) from_empty=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) targets+=("$1"); shift ;;
    esac
done
for engine in ${engines//,/ }; do
    case "$engine" in libfuzzer|afl|honggfuzz) ;; *) die "unknown engine '$engine' (expected libfuzzer, afl or honggfuzz)" ;; esac
done
[ "$schedule_given" = 0 ] || [ -n "$baseline" ] || die "--baseline-schedule needs --baseline"
[ "$from_empty" = 0 ] || [ "$engines" = libfuzzer ] ||
    die "--from-empty runs libFuzzer only (AFL++ and honggfuzz need seed inputs): drop --engines $engines"
engine_filter=()
read_registry
[ ${#targets[@]} -eq 0 ] || check_targets "${targets[@]}"

work="${THROUGHPUT_WORK:-${TMPDIR:-/tmp}/idpool-throughput}"
mkdir -p "$work"
trees=("$ROOT")
names=(current)
if [ -n "$baseline" ]; then
    base=$(baseline_worktree "$baseline" "$work")
    rev=$(git -C "$base" rev-parse HEAD)
    trees+=("$base")
    names+=("baseline")
fi

# build ENGINE TREE TARGET...: builds the targets that tree has for the
# engine; libFuzzer's as hunts build them (ci/lib.sh fuzz_build).
build() {
    local engine=$1 tree=$2 t have=()
    shift 2
    case "$engine" in
    libfuzzer)
        for t in "$@"; do
            if has_target libfuzzer "$tree" "$t"; then have+=("$t"); fi
        done
        [ ${#have[@]} -eq 0 ] || fuzz_build "$tree" "${have[@]}"
        ;;
    afl) (cd "$2/fuzz/afl" && cargo afl build --release) ;;
    honggfuzz) (cd "$2/fuzz/honggfuzz" && cargo hfuzz build) ;;
    esac
}

# has_target ENGINE TREE TARGET: whether the tree has the target's glue.
has_target() {
    case "$1" in
    libfuzzer) [ -f "$2/fuzz/fuzz_targets/$3.rs" ] ;;
    afl) [ -f "$2/fuzz/afl/src/bin/$3.rs" ] ;;
    honggfuzz) [ -f "$2/fuzz/honggfuzz/src/bin/$3.rs" ] ;;
    esac
}

# run_once ENGINE TREE TARGET DIR RUN [SCHEDULE...]: one run (the RUN-th),
# libFuzzer with the schedule flags given; prints its exec/s.
run_once() {
    local engine=$1 tree=$2 t=$3 dir=$4 r=$5
    shift 5
    local schedule=("$@")
    rm -rf "$dir" && mkdir -p "$dir/new"
    local corpus="$tree/corpus/$t" seed=()
    [ -d "$corpus" ] || corpus="$dir/new"
    if [ "$from_empty" = 1 ]; then corpus="$dir/new"; seed=(-seed="$r"); fi
    case "$engine" in
    libfuzzer)
        local dict=()
        [ -f "$tree/fuzz/dict/$t.dict" ] && dict=(-dict="$tree/fuzz/dict/$t.dict")
        "$(fuzz_bin_of "$tree" "$t")/$t" "$dir/new" "$corpus" "${dict[@]}" "${seed[@]}" \
            -max_total_time="$seconds" "${LIBFUZZER_LIMITS[@]}" \
            "${schedule[@]}" -artifact_prefix="$dir/" -print_final_stats=1 > "$dir/log" 2>&1 || true
        sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log"
        ;;
    afl)
        run_afl "$tree" "$t" "$corpus" "$dir/out" "$seconds" || true
        sed -n 's/^execs_per_sec *: *//p' "$dir/out/default/fuzzer_stats" 2>/dev/null | cut -d. -f1
        ;;
    honggfuzz)
        run_honggfuzz "$tree" "$t" "$corpus" "$dir/ws" "$seconds" -o "$dir/new" || true
        grep -ao 'speed:[0-9]*' "$dir/ws.log" | tail -1 | cut -d: -f2 || true
        ;;
    esac
}

rows=()
apart=()
for engine in ${engines//,/ }; do
    case "$engine" in
    libfuzzer) "$ROOT/ci/install-fuzzers.sh" cargo-fuzz ;;
    *) "$ROOT/ci/install-fuzzers.sh" "$engine" ;;
    esac
    if [ ${#targets[@]} -gt 0 ]; then list=("${targets[@]}"); else mapfile -t list < <(targets --engine "$engine"); fi
    for i in "${!trees[@]}"; do
        step "$engine: building the ${names[$i]} tree"
        build "$engine" "${trees[$i]}" "${list[@]}"
    done
    if [ "$engine" = libfuzzer ]; then
        for t in "${list[@]}"; do
            flags=$(fuzz_flags_for "$t")
            [ "$flags" = "${FUZZ_BUILD_FLAGS[*]}" ] || apart+=("\`$t\` (\`cargo fuzz build $flags\`)")
        done
    fi
    for t in "${list[@]}"; do
        declare -A rates=()
        for r in $(seq 1 "$runs"); do
            # Alternate the builds run by run, so that a noisy minute
            # weighs on both.
            for i in "${!trees[@]}"; do
                has_target "$engine" "${trees[$i]}" "$t" || continue
                step "$engine: $t, ${names[$i]}, run $r of $runs (${seconds}s)"
                if [ "$i" = 0 ]; then schedule=("${LIBFUZZER_SCHEDULE[@]}"); else schedule=("${baseline_schedule[@]}"); fi
                rate=$(run_once "$engine" "${trees[$i]}" "$t" "$work/$engine/$t/${names[$i]}-$r" "$r" "${schedule[@]}")
                echo "${rate:-?} exec/s" >&2
                rates[$i]="${rates[$i]:-} ${rate}"
            done
        done
        # No rate at all (a target the baseline lacks) is "-", not an exit:
        # grep finding nothing fails the pipeline under pipefail.
        cur=$(tr ' ' '\n' <<<"${rates[0]:-}" | { grep -E '^[0-9]+$' || true; } | median)
        if [ -n "$baseline" ]; then
            old=$(tr ' ' '\n' <<<"${rates[1]:-}" | { grep -E '^[0-9]+$' || true; } | median)
            ratio=$(awk -v a="$cur" -v b="$old" 'BEGIN { if (a ~ /^[0-9]+$/ && b ~ /^[0-9]+$/ && b > 0) printf "%.1fx", a / b; else print "-" }')
            rows+=("| $t | $engine | $cur | $old | $ratio |")
        else
            rows+=("| $t | $engine | $cur |")
        fi
        unset rates
    done
done

start="from the committed corpus"
[ "$from_empty" = 0 ] || start="from an empty corpus, run r with -seed=r"
page=$(result_page throughput)
{
    page_head "Executions per second" ci/throughput.sh "${given_args[@]}"
    if [ -n "$baseline" ]; then
        echo "Median exec/s of $runs runs of ${seconds}s each ($start), alternated with $baseline (${rev:0:12});"
        echo "libFuzzer's schedule flags: '${LIBFUZZER_SCHEDULE[*]}' here, '${baseline_schedule[*]}' for the baseline:"
        echo
        echo "| target | engine | exec/s | baseline exec/s | ratio |"
        echo "| --- | --- | ---: | ---: | ---: |"
    else
        echo "Median exec/s of $runs runs of ${seconds}s each ($start), libFuzzer's schedule flags '${LIBFUZZER_SCHEDULE[*]}':"
        echo
        echo "| target | engine | exec/s |"
        echo "| --- | --- | ---: |"
    fi
    printf '%s\n' "${rows[@]}"
    if [ ${#apart[@]} -gt 0 ]; then
        echo
        echo "libFuzzer's builds: \`cargo fuzz build ${FUZZ_BUILD_FLAGS[*]}\`, as hunts build them; built apart, as their hunts are: ${apart[*]} (fuzz_cargo adds ci/lib.sh's ASAN_RUST_FLAGS to an ASan build's RUSTFLAGS)."
    fi
} > "$page"
echo
cat "$page"
echo "result page: $page"
