#!/usr/bin/env bash
# The campaign: fuzz every target for a while, keep what it learns, triage
# what it finds, and write a report.
#
#   ci/campaign.sh [--minutes N] [--jobs J] [--targets a,b] [--out DIR] [--coverage] [--no-real-kernel]
#
#   --minutes N   how long each target runs (default 10)
#   --jobs J      targets fuzzed at once (default: the number of cores)
#   --targets     a comma-separated subset (default: every target with a
#                 corpus that the registry lists; see the `targets` binary)
#   --out DIR     where the report goes (default campaign-<date>/, not tracked)
#   --coverage    also run `cargo fuzz coverage` (needs the nightly
#                 llvm-tools-preview component)
#   --no-real-kernel  do not replay the new corpus entries on the real C
#                 driver (below)
#
# Installs cargo-fuzz if needed. While it runs it prints, every 30 s, each
# target's coverage and exec/s. Afterwards it merges the new inputs into
# corpus/<target> (minimised with libFuzzer's -merge=1, i.e. cmin), groups
# any crash with `triage report` (which minimises one input per group), and
# writes DIR/report.md with exec/s per target, the distinct abstract states
# each reached (`triage states`: every input replayed with the state
# recorder, in the order it was written), DIR/coverage.svg and
# DIR/states.svg, their growth over time. The report is also the run's
# result page, docs/results/<date>-campaign.md (the plots beside it).
#
# The new corpus entries of a target whose inputs run on the real drivers
# (the registry's `real_kernel`) are then replayed on the real C driver,
# Debian's 7.3.4 kernel booted in QEMU, each against our model of it
# (`triage real-kernel --driver c --mainline --sequential`, one boot per 200
# entries, about 0.2 s an entry); a model that disagrees with the real
# driver is reported with the crashes. Skipped, with the reason in the
# report, when QEMU or the kernel cannot be had (ci/kernel-vm.sh --prepare
# installs and fetches them once) or with --no-real-kernel.
# Exits 1 when a crash was found or a model disagreed with its real driver.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

minutes=10
jobs=$(nproc)
targets=""
out="campaign-$(date +%Y%m%d-%H%M%S)"
coverage=0
real_kernel=1
while [ $# -gt 0 ]; do
    case "$1" in
    --minutes) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--minutes needs a number"; minutes=$2; shift 2 ;;
    --jobs) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"; jobs=$2; shift 2 ;;
    --targets) [ -n "${2:-}" ] || die "--targets needs a list"; targets=$2; shift 2 ;;
    --out) [ -n "${2:-}" ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --coverage) coverage=1; shift ;;
    --no-real-kernel) real_kernel=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
engine_filter=(--engine libfuzzer --corpus)
if [ -n "$targets" ]; then
    IFS=, read -ra list <<<"$targets"
    check_targets "${list[@]}"
else
    mapfile -t list < <(targets "${engine_filter[@]}")
fi
for t in "${list[@]}"; do
    [ -n "$(ls -A "$ROOT/corpus/$t" 2>/dev/null)" ] || die "corpus/$t is missing or empty"
done
[ -e "$out" ] && die "$out exists already: pick another --out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
read_registry
step "building the fuzz targets and triage"
(cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}")
# A target built with other flags (AddressSanitizer for one linking C code)
# is built now too, so that its minutes are spent fuzzing.
for t in "${list[@]}"; do
    read -ra flags <<<"$(fuzz_flags_for "$t")"
    [ "${flags[*]}" = "${FUZZ_BUILD_FLAGS[*]}" ] || (cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${flags[@]}" "$t")
done
triage=$(triage_bin)

# Each target fuzzes into a fresh directory, reading corpus/<target> too;
# every log line gets the seconds elapsed, for the coverage plot.
run_target() {
    local t=$1
    mkdir -p "$out/new/$t"
    date +%s > "$out/$t.start"
    { run_libfuzzer "$ROOT" "$t" "$out/crashes/$t" /dev/stdout "$out/new/$t" "$ROOT/corpus/$t" -- \
        -max_total_time=$((minutes * 60)) -print_pcs=0 || true; } | {
        local start=$SECONDS
        while IFS= read -r line; do printf '%s %s\n' "$((SECONDS - start))" "$line"; done
    } > "$out/$t.log"
}

status() {
    local t last
    for t in "${list[@]}"; do
        [ -f "$out/$t.log" ] || { printf '  %-18s waiting\n' "$t"; continue; }
        # Nothing yet while the target builds (an ASan target builds at its
        # first run): not a failure.
        last=$(grep -a 'cov:' "$out/$t.log" | tail -1 || true)
        printf '  %-18s %4ss  cov %-6s exec/s %-6s crashes %s\n' "$t" "${last%% *}" \
            "$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")" \
            "$(sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p' <<<"$last")" \
            "$(find "$out/crashes/$t" -type f 2>/dev/null | wc -l)"
    done
}

step "fuzzing ${list[*]} for ${minutes} min each, $jobs at a time (output: $out)"
pids=()
for t in "${list[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 30; echo "[$(date +%T)]"; status; done
    run_target "$t" & pids+=($!)
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do sleep 30; echo "[$(date +%T)]"; status; done
wait "${pids[@]}" 2>/dev/null || true

# The distinct abstract states each target reached and when: every input
# replayed through the harness with the state recorder, in the order the
# files were written (exact, whatever the engine; see harness/src/feedback.rs).
step "counting abstract states (triage states)"
for t in "${list[@]}"; do
    "$triage" states --target "$t" --since "$(cat "$out/$t.start")" \
        "$ROOT/corpus/$t" "$out/new/$t" > "$out/$t.states" 2> "$out/$t.states.log" ||
        echo "triage states failed for $t (see $out/$t.states.log)" >&2
    "$triage" states --json --target "$t" --since "$(cat "$out/$t.start")" \
        "$ROOT/corpus/$t" "$out/new/$t" > "$out/$t.states.json" 2>/dev/null || true
done

step "merging new inputs into corpus/ (libFuzzer -merge=1)"
declare -A before after
for t in "${list[@]}"; do
    before[$t]=$(ls "$ROOT/corpus/$t" | wc -l)
    ls "$ROOT/corpus/$t" | LC_ALL=C sort > "$out/$t.corpus-before"
    merged="$out/merged/$t"; mkdir -p "$merged"
    run_libfuzzer "$ROOT" "$t" "$out/merge-artifacts/$t" "$out/$t.merge.log" \
        "$merged" "$ROOT/corpus/$t" "$out/new/$t" -- -merge=1 || die "merge failed for $t (see $out/$t.merge.log)"
    if [ -n "$(ls -A "$merged")" ]; then
        find "$ROOT/corpus/$t" -type f -delete
        cp "$merged"/* "$ROOT/corpus/$t"/
    fi
    after[$t]=$(ls "$ROOT/corpus/$t" | wc -l)
done

crashes=$(find "$out/crashes" -type f | wc -l)
if [ "$crashes" -gt 0 ]; then
    step "triaging $crashes crash(es)"
    "$triage" report "$out/crashes" > "$out/crashes.md" || true
    # crash-*, timeout-* and oom-* artifacts alike
fi

# The new corpus entries of the targets whose inputs run on the real
# drivers, on the real C driver. Sets real_status (a line for the report)
# and real_divergent (how many entries a model disagreed on).
real_status=() real_divergent=0
real_kernel_replay() {
    local t new n log
    for t in "${list[@]}"; do
        [ "$(target_field "$t" real_kernel)" = true ] || continue
        new="$out/$t.corpus-new"
        LC_ALL=C comm -13 "$out/$t.corpus-before" <(ls "$ROOT/corpus/$t" | LC_ALL=C sort) |
            sed "s|^|$ROOT/corpus/$t/|" > "$new"
        n=$(wc -l < "$new")
        if [ "$n" -eq 0 ]; then
            real_status+=("$t: no new corpus entry to replay on the real C driver.")
            continue
        fi
        if [ "$real_kernel" -eq 0 ]; then
            real_status+=("$t: $n new corpus entries not replayed on the real C driver (--no-real-kernel).")
            continue
        fi
        if ! "$ROOT/ci/kernel-vm.sh" --prepare > "$out/real-kernel.prepare.log" 2>&1; then
            real_status+=("$t: $n new corpus entries not replayed on the real C driver: QEMU or the kernel could not be had ($(basename "$out")/real-kernel.prepare.log: $(tail -1 "$out/real-kernel.prepare.log"))")
            echo "real-kernel replay skipped: ci/kernel-vm.sh --prepare failed (see $out/real-kernel.prepare.log)" >&2
            continue
        fi
        log="$out/$t.real-kernel.log"
        step "replaying $n new $t corpus entries on the real C driver"
        mkdir -p "$out/real-kernel/$t"
        xargs -a "$new" -d '\n' ln -s -t "$out/real-kernel/$t"
        "$triage" real-kernel --driver c --mainline --sequential "$out/real-kernel/$t" \
            > "$log" 2> "$out/$t.real-kernel.err" || true
        if ! grep -q '^real-kernel: .* program(s) replayed' "$log"; then
            real_status+=("$t: the replay on the real C driver failed: $(tail -1 "$out/$t.real-kernel.err")")
            real_divergent=$((real_divergent + 1))
            continue
        fi
        local d
        d=$(grep -c ': C: [0-9]* difference(s) from the model' "$log" || true)
        real_divergent=$((real_divergent + d))
        real_status+=("$t: $(grep '^real-kernel: .* program(s) replayed' "$log" | sed 's/^real-kernel: //') (of $n new entries); $d where the model and the real C driver differ. $(grep '^real-kernel: C: .* trace(s) in' "$log" | sed 's/^real-kernel: C: //')")
    done
}
real_kernel_replay

if [ "$coverage" -eq 1 ]; then
    step "source coverage (cargo fuzz coverage)"
    for t in "${list[@]}"; do
        (cd "$ROOT/fuzz" && fuzz_cargo fuzz coverage "$t" "$ROOT/corpus/$t") > "$out/$t.coverage.log" 2>&1 \
            || echo "coverage for $t failed (needs: rustup component add llvm-tools-preview --toolchain nightly); see $out/$t.coverage.log" >&2
    done
fi

logs=() states=()
for t in "${list[@]}"; do
    logs+=("$t=$out/$t.log")
    [ -s "$out/$t.states" ] && states+=("$t=$out/$t.states")
done
"$triage" plot "${logs[@]}" -o "$out/coverage.svg" > /dev/null
[ ${#states[@]} -eq 0 ] || "$triage" plot --metric states "${states[@]}" -o "$out/states.svg" > /dev/null

page=$(result_page campaign)
stem=$(basename "$page" .md)
{
    page_head "Campaign: $minutes min per target" ci/campaign.sh --minutes "$minutes" --jobs "$jobs" \
        --targets "$(IFS=,; echo "${list[*]}")"
    echo "Output: $(basename "$out")/."
    echo
    echo "$minutes min per target, $jobs at a time, on $(nproc) cores."
    echo
    echo "| target | exec/s | runs | coverage (start → end) | abstract states (start → end) | corpus before → after | crashes |"
    echo "| --- | ---: | ---: | --- | --- | --- | ---: |"
    for t in "${list[@]}"; do
        log="$out/$t.log"
        first=$(grep -a -m1 'cov:' "$log" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
        last=$(grep -a 'cov:' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
        s0=$(jq -r '.points[0][1] // empty' "$out/$t.states.json" 2>/dev/null || true)
        s1=$(jq -r '.states // empty' "$out/$t.states.json" 2>/dev/null || true)
        echo "| $t | $(sed -n 's/.*stat::average_exec_per_sec: *//p' "$log") | $(sed -n 's/.*stat::number_of_executed_units: *//p' "$log") | ${first:-?} → ${last:-?} | ${s0:-?} → ${s1:-?} | ${before[$t]} → ${after[$t]} | $(find "$out/crashes/$t" -type f | wc -l) |"
    done
    echo
    echo "![coverage over time](coverage.svg) ![abstract states over time](states.svg)"
    echo
    if [ "$crashes" -gt 0 ]; then
        echo "## Crashes"
        echo
        cat "$out/crashes.md"
    else
        echo "No crash."
    fi
    if [ ${#real_status[@]} -gt 0 ]; then
        echo
        echo "## The new corpus entries on the real C driver"
        echo
        for line in "${real_status[@]}"; do echo "- $line"; done
        for t in "${list[@]}"; do
            log="$out/$t.real-kernel.log"
            [ -f "$log" ] && grep -q ': C: [0-9]* difference(s) from the model' "$log" || continue
            echo
            echo "Where the model of the C driver and the real driver differ ($t):"
            echo
            echo '```text'
            awk '/: C: [0-9]+ difference\(s\) from the model/ { show = 1; print; next }
                 /^    / && show { print; next } { show = 0 }' "$log"
            echo '```'
        done
    fi
} > "$out/report.md"
# The result page: the report, its plots beside it under the page's name.
sed "s/](coverage.svg)/]($stem-coverage.svg)/; s/](states.svg)/]($stem-states.svg)/" \
    "$out/report.md" > "$page"
cp "$out/coverage.svg" "$RESULTS/$stem-coverage.svg"
[ ! -f "$out/states.svg" ] || cp "$out/states.svg" "$RESULTS/$stem-states.svg"

step "report: $page (and $out/report.md)"
cat "$page"
[ "$crashes" -eq 0 ] && [ "$real_divergent" -eq 0 ] || exit 1
