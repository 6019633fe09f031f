#!/usr/bin/env bash
# The campaign: fuzz every target for a while, keep what it learns, triage
# what it finds, and write a report.
#
#   ci/campaign.sh [--minutes N | --hours N] [--jobs J] [--cores C] [--targets a,b] [--out DIR] [--coverage] [--no-real-kernel]
#   ci/campaign.sh --minimise [--targets a,b] [--out DIR]
#
#   --minutes N   how long each target runs (default 10)
#   --hours N     the same in hours (N * 60 minutes), for a night
#   --jobs J      targets fuzzed at once (default: C, below)
#   --cores C     cores the fuzzing uses (default: the number of cores):
#                 each target starts with its share of them, C divided
#                 evenly among the targets that will run beside it (the
#                 running ones and those left to start, at most J), and
#                 a share above 1 runs libFuzzer with -fork=<share>; so a
#                 target alone on 2 cores (--targets one) gets -fork=2, and
#                 3 targets on 4 cores get 2, 1 and 1. A share is fixed
#                 when its target starts: a list's last target, started
#                 beside another, keeps its one core when that one ends.
#   --targets     a comma-separated subset (default: every target with a
#                 corpus that the registry lists; see the `targets` binary)
#   --out DIR     where the report goes (default campaign-<date>/, not tracked)
#   --coverage    also measure the source coverage of each target's merged
#                 corpus (ci/coverage-report.sh: the nightly toolchain's
#                 llvm-tools component, added first if missing, then `cargo
#                 fuzz coverage` and llvm-cov): in the report, a table per file of src/
#                 and harness/ (lines, regions, functions covered), the
#                 functions of src/ no input reached, and a link to the HTML,
#                 DIR/coverage/<target>/index.html
#   --no-real-kernel  do not replay the new corpus entries on the real C
#                 driver (below)
#   --minimise    fuzz nothing: rebuild corpus/<target> and the pool from
#                 what they hold (libFuzzer -merge=1 into empty directories),
#                 e.g. after the input format changed, or to bring a corpus
#                 or a pool back under its cap; the report names each input
#                 dropped
#
# Installs cargo-fuzz if needed. Every phase says what it does and how far
# along it is (a target at a time, [i/N]); a long step (an install, a
# build, a merge, the states, the replay) prints its time and its log's
# last line every 15 s. While the targets fuzz it prints, every 25 s, each
# target's coverage and exec/s (a finished target once; with -fork, every
# worker's executions over the time so far), and rewrites DIR/report.md,
# so that an interrupted run leaves its report, its new inputs (DIR/new/)
# and its crashes. Afterwards it merges twice, with libFuzzer's -merge=1:
# into the local pool, fuzz/pool/<target> (not tracked, rebuilt from an
# empty directory), every input that adds an edge or an abstract state
# (the state feedback on, hit counts counted), at most the target's
# pool_cap files (`targets --json`: Target::pool_cap, 40 times the corpus
# cap), the smallest kept beyond it (ci/lib.sh: keep_smallest); into the
# committed corpus/<target>, only what adds an edge
# (IDPOOL_STATE_FEEDBACK=0 -use_counters=0), merged into a copy of it, so
# that every committed input stays and a new one is added only when it
# adds an edge they lack (ci/lib.sh: sync_corpus). A committed input is
# removed only when it duplicates another or the target's corpus_cap forces
# it (new inputs are left out first), and the report names each removal
# and why; a run that found nothing new changes no file of corpus/. A run
# reads both the corpus and the pool. --minimise rebuilds the corpus from
# scratch instead (smaller inputs first), and the report names each input
# it dropped. Groups
# any crash with `triage report` (which minimises one input per group), and
# writes DIR/report.md with exec/s per target, the distinct abstract states
# each reached (`triage states`: every input replayed with the state
# recorder, in the order it was written), DIR/coverage.svg and
# DIR/states.svg, their growth over time, and the command-space map of
# each target that has one before and after the run (`triage map`: cells
# reached, newly reached and never reached). The report is also the run's
# result page, docs/results/<date>-campaign.md (the plots beside it; the
# coverage HTML stays in DIR, named by the page, not linked). Its head
# names the tree as the run found it and what the run changed.
#
# The new corpus entries of a target whose inputs run on the real drivers
# (the registry's `real_kernel`) are then replayed on the real C driver,
# Debian's 7.3.4 kernel booted in QEMU, each against our model of it
# (`triage real-kernel --driver c --mainline --sequential`, one boot per 200
# entries, about 0.2 s an entry); a model that disagrees with the real
# driver is reported with the crashes. When QEMU or the kernel cannot be
# had (ci/kernel-vm.sh --prepare installs and fetches them once) the stage
# fails; --no-real-kernel skips it.
#
# Exits 1 when a crash was found or a model disagreed with its real driver;
# else 3 when a stage failed (the coverage, the real-kernel replay, QEMU or
# the kernel not to be had, a merge, the states), each named at the top of
# the report, unless it was skipped as asked (--no-real-kernel, no
# --coverage); 2 on bad usage or when nothing could be built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

minutes=10
jobs=""
cores=$(nproc)
targets=""
out="campaign-$(date +%Y%m%d-%H%M%S)"
coverage=0
minimise=0
real_kernel=1
real_status=() real_divergent=0
while [ $# -gt 0 ]; do
    case "$1" in
    --minutes) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--minutes needs a positive number"; minutes=$2; shift 2 ;;
    --hours) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--hours needs a positive number"; minutes=$(($2 * 60)); shift 2 ;;
    --minimise|--minimize) minimise=1; shift ;;
    --jobs) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"; jobs=$2; shift 2 ;;
    --cores) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--cores needs a positive number"; cores=$2; shift 2 ;;
    --targets) [ -n "${2:-}" ] || die "--targets needs a list"; targets=$2; shift 2 ;;
    --out) [ -n "${2:-}" ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --coverage) coverage=1; shift ;;
    --no-real-kernel) real_kernel=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
jobs=${jobs:-$cores}
# The tree as the run found it, for the report: the merge changes corpus/.
TREE_AT_START=$(tree_state)
[ ! -e "$out" ] || die "$out exists already: pick another --out"
# The tools first: clang, once installed, changes what the harness's
# build scripts compile, which would build the registry twice.
"$ROOT/ci/install-fuzzers.sh" cargo-fuzz || die "cargo-fuzz could not be installed"
step "building the target registry (cargo build --release -p idpool-harness: a few minutes the first time)"
log=$(mktemp)
watch_run "building the target registry" "$log" \
    bash -c 'cd "$1" && cargo build --release -p idpool-harness --bin targets' _ "$ROOT" ||
    { tail -n 20 "$log" >&2; die "the harness does not build"; }
rm -f "$log"
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
mkdir -p "$out"
out=$(cd "$out" && pwd)

read_registry
POOL=$ROOT/fuzz/pool

# Merges corpus/$1, its pool and the inputs in the directories after it.
# The pool keeps every input that adds an edge or an abstract state, at
# most its cap (the smallest kept), rebuilt from scratch each time (it is
# not tracked). The committed corpus keeps what it holds and gains only the
# inputs that add an edge: libFuzzer's -merge=1 into a copy of it (the
# files of the first directory all stay; another input is added when it
# adds an edge they lack), then sync_corpus (ci/lib.sh), which copies in the
# new files alone, and removes a committed file only when it duplicates
# another or the cap forces it, saying so. A run that found nothing new
# changes no file of corpus/. With --minimise (MERGE_FRESH=1) the corpus is
# rebuilt from scratch instead, smaller inputs first, and a committed file
# that adds no edge the kept ones lack is removed, saying so.
# Writes $out/$1.corpus-changes (sync_corpus's lines) and sets
# pool_note[$1] when the pool's cap cut it; returns 1, saying why in
# merge_failed[$1], when a merge fails (corpus/$1 is then left as it was).
declare -A pool_note merge_failed
MERGE_FRESH=0
merge_target() {
    local t=$1 cap n dirs=() gone
    shift
    [ "$t" != regressions ] || die "corpus/regressions holds regression inputs, not a target's corpus"
    [ -z "$(ls -A "$POOL/$t" 2>/dev/null)" ] || dirs+=("$POOL/$t")
    rm -rf "$out/merged/$t" "$out/pool/$t" && mkdir -p "$out/merged/$t" "$out/pool/$t"
    watch_run "$t: merging into the pool (edges and states)" "$out/$t.pool-merge.log" \
        run_libfuzzer "$ROOT" "$t" "$out/merge-artifacts/$t" "$out/$t.pool-merge.log" \
        "$out/pool/$t" "${dirs[@]}" "$ROOT/corpus/$t" "$@" -- -merge=1 ||
        { merge_failed[$t]="the pool merge failed (see $(basename "$out")/$t.pool-merge.log)"; return 1; }
    if [ "$MERGE_FRESH" -eq 1 ]; then
        dirs=("$ROOT/corpus/$t" "${dirs[@]}" "$@")
        gone="adds no edge that the smaller inputs kept lack (--minimise: libFuzzer -merge=1 from scratch, with the current build)"
    else
        cp -p "$ROOT/corpus/$t"/. "$out/merged/$t"/ -r
        dirs=("${dirs[@]}" "$@")
        gone="left out by libFuzzer's merge (see $(basename "$out")/$t.merge.log)"
    fi
    IDPOOL_STATE_FEEDBACK=0 watch_run "$t: merging into corpus/$t (edges)" "$out/$t.merge.log" \
        run_libfuzzer "$ROOT" "$t" "$out/merge-artifacts/$t" "$out/$t.merge.log" \
        "$out/merged/$t" "${dirs[@]}" -- -merge=1 -use_counters=0 ||
        { merge_failed[$t]="the corpus merge failed (see $(basename "$out")/$t.merge.log)"; return 1; }
    [ -n "$(ls -A "$out/merged/$t")" ] ||
        { merge_failed[$t]="the merge kept nothing (see $(basename "$out")/$t.merge.log)"; return 1; }
    # Beyond the pool's cap the smallest files are kept, as libFuzzer
    # prefers the smaller of two inputs that add the same (keep_smallest,
    # ci/lib.sh); the corpus's cap keeps its committed files first
    # (sync_corpus).
    cap=$(target_field "$t" pool_cap)
    n=$(keep_smallest "$out/pool/$t" "$cap")
    if [ -n "$n" ]; then
        pool_note[$t]="$n files add an edge or a state, over the pool's cap of $cap: the $cap smallest kept in fuzz/pool/$t (Target::pool_cap, harness/src/registry.rs)"
        echo "warning: $t: ${pool_note[$t]}" >&2
    fi
    mkdir -p "$POOL/$t"
    find "$POOL/$t" -maxdepth 1 -type f -delete
    cp "$out/pool/$t"/. "$POOL/$t"/ -r
    cap=$(target_field "$t" corpus_cap)
    sync_corpus "$ROOT/corpus/$t" "$out/merged/$t" "$cap" "$gone" > "$out/$t.corpus-changes"
}

# What the run changed in the tree, in a line: the files each merge added
# to corpus/<target> and removed from it (the result page aside).
run_changes() {
    local t f a r parts=()
    for t in "${list[@]}"; do
        f="$out/$t.corpus-changes"
        [ -f "$f" ] || continue
        a=$(grep -c '^added' "$f" || true)
        r=$(grep -c '^removed' "$f" || true)
        [ $((a + r)) -eq 0 ] || parts+=("corpus/$t ($a added, $r removed)")
    done
    if [ ${#parts[@]} -eq 0 ]; then
        echo "nothing in corpus/ (besides this page)"
    else
        local IFS=,
        echo "${parts[*]} (besides this page)" | sed 's/,/, /g'
    fi
}

# What the merge did to corpus/$1, for the report: a line of counts, then
# each removal and why (sync_corpus's lines in $out/$1.corpus-changes).
corpus_changes() {
    local t=$1 f="$out/$1.corpus-changes" added removed skipped
    [ -f "$f" ] || return 0
    added=$(grep -c '^added' "$f" || true)
    removed=$(grep -c '^removed' "$f" || true)
    skipped=$(grep -c '^not-added' "$f" || true)
    printf '\ncorpus/%s: %s added, %s removed' "$t" "$added" "$removed"
    [ "$skipped" -eq 0 ] || printf ', %s more that add an edge left out at the cap of %s (raise corpus_cap in harness/src/registry.rs?)' \
        "$skipped" "$(target_field "$t" corpus_cap)"
    if [ "$removed" -eq 0 ]; then
        echo "."
    else
        echo ":"
        echo
        awk -F'\t' '$1 == "removed" { printf "- `%s`: %s\n", $2, $3 }' "$f"
    fi
}

if [ "$minimise" -eq 1 ]; then
    step "building the fuzz targets (log: $out/build.log)"
    watch_run "building the fuzz targets" "$out/build.log" fuzz_build "$ROOT" "${list[@]}" ||
        die "the build failed (see $out/build.log)"
    step "minimising corpus/ (libFuzzer -merge=1, edges only) and the pool (edges and states)"
    MERGE_FRESH=1
    status=0 i=0
    printf '| target | corpus before → after | pool after | corpus cap | pool cap |\n| --- | --- | ---: | ---: | ---: |\n' > "$out/report.md"
    for t in "${list[@]}"; do
        i=$((i + 1))
        echo "  [$i/${#list[@]}] $t" >&2
        b=$(find "$ROOT/corpus/$t" -maxdepth 1 -type f | wc -l)
        merge_target "$t" || { echo "$t: ${merge_failed[$t]}" >&2; status=3; }
        echo "| $t | $b → $(find "$ROOT/corpus/$t" -maxdepth 1 -type f | wc -l) | $(find "$POOL/$t" -maxdepth 1 -type f | wc -l) | $(target_field "$t" corpus_cap) | $(target_field "$t" pool_cap) |" >> "$out/report.md"
    done
    for t in "${list[@]}"; do
        [ -z "${merge_failed[$t]:-}" ] || printf '\n**%s: %s**; corpus/%s is as it was.\n' "$t" "${merge_failed[$t]}" "$t"
        corpus_changes "$t"
        [ -z "${pool_note[$t]:-}" ] || printf '\n%s: %s.\n' "$t" "${pool_note[$t]}"
    done >> "$out/report.md"
    cat "$out/report.md"
    exit "$status"
fi
step "building the fuzz targets and triage (log: $out/build.log)"
# A target built with other flags (AddressSanitizer for one linking C code)
# is built now too, so that its minutes are spent fuzzing.
watch_run "building the fuzz targets" "$out/build.log" fuzz_build "$ROOT" "${list[@]}" ||
    die "the build failed (see $out/build.log)"
watch_run "building triage" "$out/build.log" triage_bin > /dev/null || die "triage does not build (see $out/build.log)"
triage=$(triage_bin)

# Each target fuzzes into a fresh directory, reading corpus/<target> too;
# every log line gets the seconds elapsed, for the coverage plot.
# `run_target TARGET WORKERS`: with more than one worker, libFuzzer's fork
# mode (-fork=WORKERS): child processes fuzz in turn from subsets of the
# corpus, each writing its crashes as usual, and the parent merges what
# they find into the first corpus directory (DIR/new/<target>). As without
# it, the first crash, timeout or out-of-memory ends the target's run
# (fork mode would ignore timeouts and OOMs by default). The parent checks
# the time only when a child ends, and a child runs for at most 300 s: a
# long run may end a few minutes late.
run_target() {
    local t=$1 workers=$2 fork=()
    mkdir -p "$out/new/$t"
    date +%s > "$out/$t.start"
    local pool=()
    [ -z "$(ls -A "$POOL/$t" 2>/dev/null)" ] || pool=("$POOL/$t")
    [ "$workers" -le 1 ] || fork=(-fork="$workers" -ignore_crashes=0 -ignore_timeouts=0 -ignore_ooms=0)
    { run_libfuzzer "$ROOT" "$t" "$out/crashes/$t" /dev/stdout "$out/new/$t" "$ROOT/corpus/$t" "${pool[@]}" -- \
        -max_total_time=$((minutes * 60)) -print_pcs=0 "${fork[@]}" || true; } | {
        local start=$SECONDS
        while IFS= read -r line; do printf '%s %s\n' "$((SECONDS - start))" "$line"; done
    } > "$out/$t.log"
    touch "$out/$t.done"
}

# libFuzzer's status lines in the log $1 (each after the seconds elapsed).
# In fork mode, the parent's alone (`#RUNS: cov: E ft: F corp: N exec/s:
# ... time: Ss job: J ...`), not those of a crashing child's log, which it
# prints whole.
status_lines() {
    if grep -qa '^[0-9]* #[0-9]*: cov:' "$1" 2>/dev/null; then
        grep -a '^[0-9]* #[0-9]*: cov:' "$1"
    else
        grep -a 'cov:' "$1" 2>/dev/null || true
    fi
}

# The executions per second of a status line $1: libFuzzer's own figure;
# in fork mode (where that is the last child's alone) every child's
# executions over the parent's time.
line_rate() {
    local runs secs
    if [[ "$1" =~ ^[0-9]+\ \#([0-9]+):\ cov:.*\ time:\ ([0-9]+)s ]]; then
        runs=${BASH_REMATCH[1]} secs=${BASH_REMATCH[2]}
        echo $((runs / (secs > 0 ? secs : 1)))
    else
        sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p' <<<"$1"
    fi
}

# A finished target is shown once, marked done.
declare -A shown
status() {
    local t last done_mark
    for t in "${list[@]}"; do
        [ -z "${shown[$t]:-}" ] || continue
        done_mark=""
        [ ! -f "$out/$t.done" ] || { shown[$t]=1; done_mark="  done"; }
        [ -f "$out/$t.log" ] || { printf '  %-18s waiting\n' "$t"; continue; }
        # Nothing yet while the target builds (an ASan target builds at its
        # first run): not a failure.
        last=$(status_lines "$out/$t.log" | tail -1)
        printf '  %-18s %4ss  cov %-6s exec/s %-6s crashes %s%s\n' "$t" "${last%% *}" \
            "$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")" \
            "$(line_rate "$last")" \
            "$(find "$out/crashes/$t" -type f 2>/dev/null | wc -l)" "$done_mark"
    done
}

# The command-space map of target $1 before and after the run, from
# DIR/$1.map-before.json and DIR/$1.map-after.json (`triage map --json`).
map_section() {
    local t=$1 w newly
    echo
    echo "## Command-space map of $t"
    echo
    echo "\`triage map\` of the corpus and pool before the run, and with the run's new inputs (\`docs/design.md\`, The command-space map)."
    echo
    echo "| | inputs | cells reached | never reached | unreachable by construction | reached although unreachable |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    for w in before after; do
        jq -r --arg w "$w" '"| \($w) | \(.inputs) | \(.reached | length) | \(.never | length) | \(.unreachable | length) | \(.reached_unreachable | length) |"' "$out/$t.map-$w.json"
    done
    newly=$(jq -rn --slurpfile b "$out/$t.map-before.json" --slurpfile a "$out/$t.map-after.json" \
        '($b[0].reached | map(.command + " " + .cell)) as $old
         | [$a[0].reached[] | (.command + " " + .cell) | select(. as $c | $old | index($c) | not) | "`\(.)`"]
         | join(", ")')
    echo
    echo "Newly reached: ${newly:-none}."
    echo
    echo "Never reached after the run: $(jq -r '[.never[] | "`\(.command) \(.cell)`"] | join(", ")' "$out/$t.map-after.json")."
}

# The report, DIR/report.md: rewritten while the targets run (what their
# logs say so far) and once more at the end, with states, merge and crashes.
declare -A before after
write_report() {
    local t log first last s0 s1 crashes_now line rate runs
    crashes_now=$(find "$out/crashes" -type f 2>/dev/null | wc -l)
    {
        local asked=()
        [ "$coverage" -eq 0 ] || asked+=(--coverage)
        [ "$real_kernel" -eq 1 ] || asked+=(--no-real-kernel)
        PAGE_NOTE="changed by the run: $(run_changes)" page_head "Campaign: $minutes min per target" \
            ci/campaign.sh --minutes "$minutes" --jobs "$jobs" --cores "$cores" \
            --targets "$(IFS=,; echo "${list[*]}")" "${asked[@]}"
        if [ ${#failed[@]} -gt 0 ]; then
            echo "**${#failed[@]} stage(s) failed** (the campaign exits 3 unless it found a crash or a disagreement, then 1):"
            echo
            for line in "${failed[@]}"; do echo "- $line"; done
            echo
        fi
        [ "$real_kernel" -eq 1 ] || [ "$(jq -r --arg l "${list[*]}" '[.[] | select(.real_kernel and (.name as $n | $l | split(" ") | index($n)))] | length' <<<"$TARGETS_JSON")" -eq 0 ] ||
            { echo "Skipped as asked: the replay of the new corpus entries on the real C driver (--no-real-kernel)."; echo; }
        echo "Output: $(basename "$out")/."
        echo
        echo "$minutes min per target, $jobs at a time, on $cores of $(nproc) cores (a target's share of them in the table: workers, libFuzzer's -fork when above 1)."
        [ "${1:-}" = final ] || printf '\n**In progress** (%s): the figures so far.\n' "$(date -u +%T)"
        echo
        echo "| target | workers | exec/s | runs | coverage (start → end) | abstract states (start → end) | corpus before → after (cap) | pool after (cap) | crashes |"
        echo "| --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: |"
        for t in "${list[@]}"; do
            log="$out/$t.log"
            [ -f "$log" ] || { echo "| $t | | waiting | | | | | | |"; continue; }
            first=$(status_lines "$log" | head -n 1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p' || true)
            last=$(status_lines "$log" | tail -n 1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
            # libFuzzer's final stats, or (running, or in fork mode, where
            # the parent prints none) its last status line.
            line=$(status_lines "$log" | tail -n 1)
            rate="" runs=""
            if [ "$(cat "$out/$t.workers" 2>/dev/null || echo 1)" -le 1 ]; then
                rate=$(sed -n 's/.*stat::average_exec_per_sec: *//p' "$log")
                runs=$(sed -n 's/.*stat::number_of_executed_units: *//p' "$log")
            fi
            [ -n "$rate" ] || rate=$(line_rate "$line")
            [ -n "$runs" ] || runs=$(sed -n 's/^[0-9]* #\([0-9]*\).*/\1/p' <<<"$line")
            s0=$(jq -r '.points[0][1] // empty' "$out/$t.states.json" 2>/dev/null || true)
            s1=$(jq -r '.states // empty' "$out/$t.states.json" 2>/dev/null || true)
            echo "| $t | $(cat "$out/$t.workers" 2>/dev/null || echo ?) | ${rate:-?} | ${runs:-?} | ${first:-?} → ${last:-?} | ${s0:-?} → ${s1:-?} | ${before[$t]:-?} → ${after[$t]:-?} ($(target_field "$t" corpus_cap)) | ${pooled[$t]:-?} ($(target_field "$t" pool_cap)) | $(find "$out/crashes/$t" -type f 2>/dev/null | wc -l) |"
        done
        for t in "${list[@]}"; do
            corpus_changes "$t"
            [ -z "${pool_note[$t]:-}" ] || printf '\n%s: %s.\n' "$t" "${pool_note[$t]}"
        done
        echo
        echo "![coverage over time](coverage.svg) ![abstract states over time](states.svg)"
        echo
        if [ "$crashes_now" -eq 0 ]; then
            echo "No crash."
        elif [ -f "$out/crashes.md" ]; then
            echo "## Crashes"
            echo
            cat "$out/crashes.md"
        else
            echo "$crashes_now crash(es) so far in $(basename "$out")/crashes/, not triaged yet."
        fi
        for t in "${list[@]}"; do
            if [ -s "$out/$t.map-before.json" ] && [ -s "$out/$t.map-after.json" ]; then
                map_section "$t"
            fi
        done
        if [ "$coverage" -eq 1 ] && [ "${1:-}" = final ]; then
            echo
            echo "## Source coverage of the corpus"
            echo
            echo "What each target's merged corpus reaches of src/ and harness/ (\`cargo fuzz coverage\`, \`ci/coverage-report.sh\`)."
            for t in "${list[@]}"; do
                echo
                if [ -f "$out/coverage/$t.md" ]; then
                    cat "$out/coverage/$t.md"
                else
                    printf '### %s\n\nNo coverage report (see the campaign'"'"'s output).\n' "$t"
                fi
            done
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
    } > "$out/report.md.new"
    mv "$out/report.md.new" "$out/report.md"
}

declare -A pooled
# The stages that failed, one line each, for the top of the report and the
# exit status.
failed=()
progress() { sleep 25; echo "[$(date +%T)]"; status; write_report; }
step "fuzzing ${list[*]} for ${minutes} min each, $jobs at a time on $cores cores (output: $out)"
# Each target starts with its share of the cores: they are split evenly
# among the targets that will run beside it (the running ones and those
# left to start, at most --jobs), the first ones taking the remainder.
pids=() left=${#list[@]}
for t in "${list[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do progress; done
    running=$(jobs -rp | wc -l)
    together=$((running + left < jobs ? running + left : jobs))
    workers=$((cores / together + (running < cores % together ? 1 : 0)))
    [ "$workers" -ge 1 ] || workers=1
    echo "$workers" > "$out/$t.workers"
    run_target "$t" "$workers" & pids+=($!)
    left=$((left - 1))
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do progress; done
wait "${pids[@]}" 2>/dev/null || true
echo "[$(date +%T)]"; status

# The distinct abstract states each target reached and when: every input
# replayed through the harness with the state recorder, in the order the
# files were written (exact, whatever the engine; see harness/src/feedback.rs).
step "counting abstract states (triage states: every input replayed, a target at a time)"
count_states() {
    local t=$1 dirs=("$ROOT/corpus/$1")
    [ -z "$(ls -A "$POOL/$t" 2>/dev/null)" ] || dirs+=("$POOL/$t")
    "$triage" states --target "$t" --since "$(cat "$out/$t.start")" \
        "${dirs[@]}" "$out/new/$t" > "$out/$t.states" &&
        "$triage" states --json --target "$t" --since "$(cat "$out/$t.start")" \
            "${dirs[@]}" "$out/new/$t" > "$out/$t.states.json"
}
i=0
for t in "${list[@]}"; do
    i=$((i + 1))
    echo "  [$i/${#list[@]}] $t: $(find "$ROOT/corpus/$t" "$POOL/$t" "$out/new/$t" -maxdepth 1 -type f 2>/dev/null | wc -l) inputs" >&2
    rm -f "$out/$t.states.log"
    watch_run "$t: counting states" "$out/$t.states.log" count_states "$t" ||
        failed+=("counting the abstract states of $t (\`triage states\`): see $(basename "$out")/$t.states.log")
done

# The command-space map of each target that has one (triage map,
# harness/src/targets/binder_commands/map.rs): the cells of the command
# language its corpus and pool reached before the run, and with the run's
# new inputs. A target without a map is skipped (triage says so, exit 2).
step "mapping the command space of the targets that have a map (triage map)"
for t in "${list[@]}"; do
    dirs=("$ROOT/corpus/$t")
    [ -z "$(ls -A "$POOL/$t" 2>/dev/null)" ] || dirs+=("$POOL/$t")
    new=()
    [ ! -d "$out/new/$t" ] || new=("$out/new/$t")
    for w in before after; do
        extra=()
        [ "$w" = before ] || extra=("${new[@]}")
        if ! "$triage" map --target "$t" --json "${dirs[@]}" "${extra[@]}" > "$out/$t.map-$w.json" 2>> "$out/map.log"; then
            rm -f "$out/$t.map-$w.json"
            grep -q "no command-space map for $t" "$out/map.log" ||
                echo "triage map failed for $t's corpus $w the run (see $out/map.log)" >&2
            break
        fi
    done
done

step "merging new inputs into fuzz/pool/ (edges and states) and corpus/ (edges, capped)"
i=0
for t in "${list[@]}"; do
    i=$((i + 1))
    echo "  [$i/${#list[@]}] $t: $(find "$out/new/$t" -maxdepth 1 -type f | wc -l) inputs written by the run" >&2
    before[$t]=$(find "$ROOT/corpus/$t" -maxdepth 1 -type f | wc -l)
    ls "$ROOT/corpus/$t" | LC_ALL=C sort > "$out/$t.corpus-before"
    merge_target "$t" "$out/new/$t" || failed+=("the merge of $t: ${merge_failed[$t]}; corpus/$t is as it was")
    after[$t]=$(find "$ROOT/corpus/$t" -maxdepth 1 -type f | wc -l)
    pooled[$t]=$(find "$POOL/$t" -maxdepth 1 -type f | wc -l)
    [ ! -f "$out/$t.corpus-changes" ] ||
        echo "  $t: corpus/$t: $(grep -c '^added' "$out/$t.corpus-changes" || true) added, $(grep -c '^removed' "$out/$t.corpus-changes" || true) removed" >&2
done

# The new corpus entries of the targets whose inputs run on the real
# drivers, on the real C driver. Sets real_status (a line for the report)
# and real_divergent (how many entries a model disagreed on), declared at
# the top for the report.
# The replay of corpus/$1's new entries (linked in $out/real-kernel/$1) on
# the real C driver, its report in $2.
replay_c() {
    "$triage" real-kernel --driver c --mainline --sequential "$out/real-kernel/$1" > "$2"
}
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
        step "preparing QEMU and the kernel (ci/kernel-vm.sh --prepare; the first time, a download)"
        if ! watch_run "preparing the real-kernel VM" "$out/real-kernel.prepare.log" "$ROOT/ci/kernel-vm.sh" --prepare; then
            real_status+=("$t: $n new corpus entries not replayed on the real C driver: QEMU or the kernel could not be had ($(basename "$out")/real-kernel.prepare.log: $(tail -1 "$out/real-kernel.prepare.log"))")
            failed+=("the replay of $t's new corpus entries on the real C driver: QEMU or the kernel could not be had (see $(basename "$out")/real-kernel.prepare.log; --no-real-kernel skips it)")
            continue
        fi
        log="$out/$t.real-kernel.log"
        step "replaying $n new $t corpus entries on the real C driver (about 0.2 s an entry, a boot per 200)"
        mkdir -p "$out/real-kernel/$t"
        xargs -a "$new" -d '\n' ln -s -t "$out/real-kernel/$t"
        rm -f "$out/$t.real-kernel.err"
        watch_run "$t: replaying on the real C driver" "$out/$t.real-kernel.err" replay_c "$t" "$log" || true
        if ! grep -q '^real-kernel: .* program(s) replayed' "$log"; then
            real_status+=("$t: the replay on the real C driver failed: $(tail -1 "$out/$t.real-kernel.err")")
            failed+=("the replay of $t's new corpus entries on the real C driver: $(tail -1 "$out/$t.real-kernel.err") (see $(basename "$out")/$t.real-kernel.err; --no-real-kernel skips it)")
            continue
        fi
        local d
        d=$(grep -c ': C: [0-9]* difference(s) from the model' "$log" || true)
        real_divergent=$((real_divergent + d))
        real_status+=("$t: $(grep '^real-kernel: .* program(s) replayed' "$log" | sed 's/^real-kernel: //') (of $n new entries); $d where the model and the real C driver differ. $(grep '^real-kernel: C: .* trace(s) in' "$log" | sed 's/^real-kernel: C: //')")
    done
}
real_kernel_replay


crashes=$(find "$out/crashes" -type f | wc -l)
if [ "$crashes" -gt 0 ]; then
    step "triaging $crashes crash(es)"
    "$triage" report "$out/crashes" > "$out/crashes.md" || true
    # crash-*, timeout-* and oom-* artifacts alike
fi

# Source coverage of the merged corpus: each target's section (a table per
# file of src/ and harness/, the functions of src/ no input reached) and
# HTML under DIR/coverage/ (ci/coverage-report.sh). A failure leaves its
# reason in the section and the rest of the report as it is.
if [ "$coverage" -eq 1 ]; then
    step "source coverage (cargo fuzz coverage, ci/coverage-report.sh: a coverage build, then every input run once)"
    i=0
    for t in "${list[@]}"; do
        i=$((i + 1))
        echo "  [$i/${#list[@]}] $t" >&2
        "$ROOT/ci/coverage-report.sh" --build "$t" "$out" ||
            failed+=("the source coverage of $t: $(sed -n 's/^No coverage report: //p' "$out/coverage/$t.md" 2>/dev/null | head -n 1)")
    done
fi

# The coverage plot reads the status lines alone (in fork mode, not a
# crashing child's own).
logs=() states=()
for t in "${list[@]}"; do
    status_lines "$out/$t.log" > "$out/$t.status.log"
    logs+=("$t=$out/$t.status.log")
    [ -s "$out/$t.states" ] && states+=("$t=$out/$t.states")
done
"$triage" plot "${logs[@]}" -o "$out/coverage.svg" > /dev/null
[ ${#states[@]} -eq 0 ] || "$triage" plot --metric states "${states[@]}" -o "$out/states.svg" > /dev/null

write_report final
# The result page: the report, its plots beside it under the page's name.
page=$(result_page campaign)
stem=$(basename "$page" .md)
# Paths into the output directory are written relative to it: the page
# must not name files the repository does not hold.
# The coverage HTML stays in the output directory: named, not linked.
sed -e "s/](coverage.svg)/]($stem-coverage.svg)/; s/](states.svg)/]($stem-states.svg)/" \
    -e "s|\[coverage/\([^]]*\)\](coverage/[^)]*)|\`$(basename "$out")/coverage/\1\`|g" \
    -e "s|$out/|$(basename "$out")/|g" "$out/report.md" > "$page"
cp "$out/coverage.svg" "$RESULTS/$stem-coverage.svg"
[ ! -f "$out/states.svg" ] || cp "$out/states.svg" "$RESULTS/$stem-states.svg"

step "report: $page (and $out/report.md)"
cat "$page"
[ "$crashes" -eq 0 ] && [ "$real_divergent" -eq 0 ] || exit 1
[ ${#failed[@]} -eq 0 ] || { echo "campaign.sh: ${#failed[@]} stage(s) failed (see the top of $page)" >&2; exit 3; }
