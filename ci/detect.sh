#!/usr/bin/env bash
# How soon is each bug found? Fuzzes every planted bug (ci/mutants/*.mutant)
# on each target its `Targets:` line names, and every known upstream
# finding with each target that hunts it (`targets --findings`), from an
# empty corpus, one run at a time on one core, with libFuzzer seeds 1, 2
# and 3, and writes a table to a result page
# (docs/results/<date>-detection.md): per bug and target the seconds to the
# first crash of each seed, their median and worst, the executions it took
# (median) and the shortest minimised trace.
#
#   ci/detect.sh [--budget SECONDS] [--seeds 1,2,3] [--baseline REV]
#                [--planted | --history] [--from-runs] [NAME...]
#
#   --budget S      how long a run may last (default 60): a run that finds
#                   nothing in S seconds is a miss
#   --seeds LIST    libFuzzer seeds, comma-separated (default 1,2,3)
#   --baseline REV  also run every hunt on REV (a commit, branch or tag),
#                   checked out in a scratch worktree and built apart; the
#                   two trees' runs alternate, seed by seed, and the table
#                   has both side by side with the ratio of their medians
#                   (the machine's load weighs on both alike: only ratios
#                   measured side by side count)
#   --planted       the planted bugs only
#   --history       the upstream findings only
#   --from-runs     run nothing: write the table of the runs an earlier
#                   (e.g. interrupted) run left in $DETECT_WORK/runs.tsv,
#                   with the same --seeds, --budget and --baseline
#   NAME...         only these planted bugs (spec names, e.g. c3 or
#                   c3-stale-shrink-committed) and findings (e.g.
#                   collision), each also by its prefix before the first
#                   dash (v3: v3-threshold and v3-zero); NAME/TARGET for
#                   one of its targets (e.g. 01/handle_table,
#                   collision/handle_table). A NAME that selects nothing
#                   is refused.
#
# The goals: a median under 10 s and a worst seed under 60 s for every bug
# on every target named for it. The runs are the hunts of
# ci/mutants/run.sh and ci/history.sh (ci/lib.sh `hunt_planted` and
# `hunt_finding`): inputs up to the target's `hunt_max_len` from the
# start; a planted bug counts when a check failed (a crash-* and the
# failure's JSON), a finding when `triage minimize` tells the crash to be
# that finding. Seconds run from starting `cargo fuzz run` to libFuzzer's
# exit at the crash. Each bug is planted in a scratch copy of each tree;
# the baseline plants its own spec of that name if it has one. A finding
# or target the baseline lacks is `n/a` there. Scratch files (trees,
# builds, artifacts, every run's figures in runs.tsv) stay under
# $DETECT_WORK (default ${TMPDIR:-/tmp}/idpool-detect); the builds are
# kept between runs. Interrupted (Ctrl-C, SIGTERM), it writes the table of
# the runs so far, marked as interrupted, and exits 130. Exits 0 when the
# table is written, whatever it says; 2 on bad usage.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
given_args=("$@")

budget=60
seeds=1,2,3
baseline=""
kinds="planted history"
from_runs=0
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --budget) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--budget needs a positive number of seconds"; budget=$2; shift 2 ;;
    --seeds) [[ "${2:-}" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds needs a comma-separated list of numbers"; seeds=$2; shift 2 ;;
    --baseline) [ -n "${2:-}" ] || die "--baseline needs a revision"; baseline=$2; shift 2 ;;
    --planted) kinds=planted; shift ;;
    --history) kinds=history; shift ;;
    --from-runs) from_runs=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) names+=("$1"); shift ;;
    esac
done
IFS=, read -ra seed_list <<<"$seeds"

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
need_jq
work=${DETECT_WORK:-${TMPDIR:-/tmp}/idpool-detect}
mkdir -p "$work"
runs="$work/runs.tsv"
if [ "$from_runs" -eq 0 ]; then
    rm -rf "$work/runs"
    : > "$runs"
fi

# The trees: this one, and the baseline's worktree.
trees=(current)
declare -A src=([current]=$ROOT)
if [ -n "$baseline" ]; then
    base=$(baseline_worktree "$baseline" "$work")
    rev=$(git -C "$base" rev-parse HEAD)
    trees+=(baseline)
    src[baseline]=$base
fi
# The table (`write_table [interrupted]`). Per item and tree: the seeds' seconds, their median and worst
# (a miss counts as longer than any time), the median executions, the
# fewest minimised operations.
stats() { # kind bug target tree -> "SECONDS MEDIAN WORST EXECS OPS" (- for none)
    awk -F'\t' -v k="$1" -v b="$2" -v t="$3" -v tr="$4" -v seeds="${#seed_list[@]}" '
        $1 == k && $2 == b && $3 == t && $4 == tr {
            n++; secs = secs (secs == "" ? "" : " ") $6
            if ($6 ~ /^[0-9.]+$/) v[n] = $6 + 0; else if ($6 == "n/a") na++; else v[n] = 1e9
            if ($7 != "" && $6 ~ /^[0-9.]+$/) { ne++; e[ne] = $7 + 0 }
            if ($8 != "" && (ops == "" || $8 + 0 < ops)) ops = $8 + 0
        }
        function show(x) { return x >= 1e9 ? "miss" : sprintf("%.1f", x) }
        function sortv(a, m,   i, j, x) { for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } }
        END {
            if (n == 0 || na == n) { print "n/a - - - -"; exit }
            # An interrupted item: "-" for the seeds that did not run.
            for (i = n + 1; i <= seeds; i++) secs = secs " -"
            sortv(v, n); med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            sortv(e, ne); em = ne == 0 ? "-" : (ne % 2 ? e[(ne + 1) / 2] : int((e[ne / 2] + e[ne / 2 + 1]) / 2))
            printf "%s %s %s %s %s\n", secs, show(med), show(v[n]), em, ops == "" ? "-" : ops
        }' "$runs"
}
write_table() {
    local kind bug target cur old n cs cm cw ce co bs bm bw be bo goal row ratio page
    rows=() met=0 total=0 base_met=0
    for item in "${items[@]}"; do
        read -r kind bug target <<<"$item"
        total=$((total + 1))
        IFS=' ' read -r -a cur <<<"$(stats "$kind" "$bug" "$target" current)"
        n=${#seed_list[@]}
        # Nothing ran here (the spec does not apply, the tree does not build).
        [ "${cur[0]}" != n/a ] || cur=($(printf 'n/a %.0s' "${seed_list[@]}") n/a n/a - -)
        cs="${cur[*]:0:n}" cm=${cur[n]} cw=${cur[n+1]} ce=${cur[n+2]} co=${cur[n+3]}
        goal=no
        awk -v m="$cm" -v w="$cw" 'BEGIN { exit !(m ~ /^[0-9.]+$/ && w ~ /^[0-9.]+$/ && m < 10 && w < 60) }' && goal=yes && met=$((met + 1))
        row="| $kind | $bug | $target | $cs | $cm | $cw | $ce | $co | $goal |"
        if [ -n "$baseline" ]; then
            IFS=' ' read -r -a old <<<"$(stats "$kind" "$bug" "$target" baseline)"
            if [ "${old[0]}" = n/a ]; then
                row="$row n/a | | | | | |"
            else
                bs="${old[*]:0:n}" bm=${old[n]} bw=${old[n+1]} be=${old[n+2]} bo=${old[n+3]}
                awk -v m="$bm" -v w="$bw" 'BEGIN { exit !(m ~ /^[0-9.]+$/ && w ~ /^[0-9.]+$/ && m < 10 && w < 60) }' &&
                    base_met=$((base_met + 1))
                ratio=$(awk -v a="$cm" -v b="$bm" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && a > 0) printf "%.1fx", b / a; else print "-" }')
                row="$row $bs | $bm | $bw | $be | $bo | $ratio |"
            fi
        fi
        rows+=("$row")
    done

    page=$(result_page detection)
    {
        page_head "Detection: seconds to each bug from an empty corpus" ci/detect.sh "${given_args[@]}"
        echo "libFuzzer seeds $seeds, one run at a time on one core, at most ${budget} s each"
        echo "(\`miss\`: nothing found in ${budget} s; \`timeout\`, \`oom\`, ...: what ended a run"
        echo "that no check failed). Seconds from starting \`cargo fuzz run\` to the crash;"
        echo "executions to it (libFuzzer's count, the median of the seeds that found it);"
        echo "the fewest operations a seed's crash minimised to (\`triage minimize\`)."
        echo "Goals: median under 10 s, worst seed under 60 s."
        if [ -n "$baseline" ]; then
            echo "Beside each, the same runs on $baseline (${rev:0:12}), alternated seed by seed;"
            echo "the ratio is the baseline's median over this tree's (above 1: found sooner here)."
        fi
        echo
        [ "${1:-}" != interrupted ] ||
            printf '**Interrupted** at %s UTC: the bugs whose runs had started, with the seeds that ended.\n\n' "$(date -u +%T)"
        echo "Within the goals: $met of $total here${baseline:+, $base_met of $total on the baseline}."
        echo
        if [ -n "$baseline" ]; then
            echo "| kind | bug | target | seconds, seeds ${seed_list[*]} | median | worst | execs | ops | goals | baseline seconds | median | worst | execs | ops | ratio |"
            echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"
        else
            echo "| kind | bug | target | seconds, seeds ${seed_list[*]} | median | worst | execs | ops | goals |"
            echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |"
        fi
        printf '%s\n' "${rows[@]}"
    } > "$page"
    echo
    cat "$page"
    echo "result page: $page"
    echo "every run: $runs; artifacts: $work/runs/<bug>/<target>/<tree>-<seed>/"
}

if [ "$from_runs" -eq 1 ]; then
    # The items in the order their first run was recorded.
    mapfile -t items < <(awk -F'\t' '!seen[$1 FS $2 FS $3]++ { print $1, $2, $3 }' "$runs")
    [ ${#items[@]} -gt 0 ] || die "no runs recorded in $runs"
    write_table
    exit 0
fi

# Each tree's registry (its targets' hunt_max_len, sanitizer, hunts),
# read by `hunt` through TARGETS_JSON.
declare -A registry hunts_of available
for tree in "${trees[@]}"; do
    step "reading the $tree tree's registry"
    registry[$tree]=$(cd "${src[$tree]}" && cargo run -q --release -p idpool-harness --bin targets -- --json --all) ||
        die "the $tree tree (${src[$tree]}) did not list its targets as JSON (\`targets --json --all\`): it does not build (the lines above say why), or it predates that flag (older than a3f41e4)"
    hunts_of[$tree]=$(cd "${src[$tree]}" && cargo run -q --release -p idpool-harness --bin targets -- --findings --json)
    available[$tree]=$(cd "${src[$tree]}" && cargo run -q --release -p idpool-harness --bin targets 2>/dev/null)
done
TARGETS_JSON=${registry[current]}

# Whether the bug part of a NAME ($1) names planted bug or finding $2:
# the whole name, or its prefix before the first dash (`v3` is
# v3-threshold and v3-zero).
names_bug() { [ "$1" = "$2" ] || [ "$1" = "${2%%-*}" ]; }

# Whether NAME... selects planted bug or finding $1 on target $2, or on
# any target when $2 is not given.
selected() {
    [ ${#names[@]} -eq 0 ] && return 0
    local n bug
    for n in "${names[@]}"; do
        bug=${n%%/*}
        names_bug "$bug" "$1" || continue
        [ "$n" = "$bug" ] || [ -z "${2:-}" ] || [ "${n#*/}" = "$2" ] && return 0
    done
    return 1
}

# Every NAME must select something: a planted bug or a finding.
known=$( { for spec in "$ROOT"/ci/mutants/*.mutant; do basename "$spec" .mutant; done
    jq -r '.[].finding' <<<"${hunts_of[current]}"; } | sort -u)
for n in "${names[@]}"; do
    while read -r k; do
        names_bug "${n%%/*}" "$k" && continue 2
    done <<<"$known"
    die "no planted bug or finding called '${n%%/*}' (planted: ci/mutants/*.mutant; findings: \`targets --findings\`)"
done

# One run's line in runs.tsv: kind, bug, target, tree, seed, seconds (or
# miss, or what ended the run), executions, minimised operations.
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$runs"; }

# The seeds in the order the trees take turns: the first tree alternates.
tree_order() {
    if [ $(( $1 % 2 )) -eq 1 ] || [ ${#trees[@]} -eq 1 ]; then echo "${trees[@]}"; else printf '%s\n' "${trees[@]}" | tac | tr '\n' ' '; fi
}

items=()
trap 'echo; echo "interrupted: writing the table of the runs so far" >&2; write_table interrupted; exit 130' INT TERM

if [[ " $kinds " == *" history "* ]]; then
    declare -A triage_of
    for tree in "${trees[@]}"; do
        step "building the $tree tree's targets and triage"
        export CARGO_TARGET_DIR="$work/$tree-target"
        # shellcheck disable=SC2046 # target names, one word each
        TARGETS_JSON=${registry[$tree]} fuzz_build "${src[$tree]}" \
            $(jq -r '.[].target' <<<"${hunts_of[$tree]}" | sort -u) 2> "$work/$tree-build.log" ||
            die "the $tree tree's targets do not build (see $work/$tree-build.log)"
        triage_of[$tree]=$(tree_triage "${src[$tree]}")
        unset CARGO_TARGET_DIR
    done
    while read -r finding target mainline; do
        selected "$finding" "$target" || continue
        items+=("history $finding $target")
        step "$finding on $target"
        for seed in "${seed_list[@]}"; do
            for tree in $(tree_order "$seed"); do
                if ! jq -e --arg f "$finding" --arg t "$target" \
                    'any(.[]; .finding == $f and .target == $t)' <<<"${hunts_of[$tree]}" >/dev/null; then
                    record history "$finding" "$target" "$tree" "$seed" n/a "" ""
                    continue
                fi
                dir="$work/runs/$finding/$target/$tree-$seed"
                found=$(CARGO_TARGET_DIR="$work/$tree-target" TARGETS_JSON=${registry[$tree]} \
                    hunt_finding "${src[$tree]}" "${triage_of[$tree]}" "$finding" "$target" "$dir" "$seed" "$budget" "$mainline")
                read -r seconds ops _ <<<"$found"
                case "$seconds" in
                inf) seconds=miss ops="" ;;
                notit) seconds="not-it" ops="" ;;
                slowmin) seconds="minimize-timeout" ops="" ;;
                esac
                record history "$finding" "$target" "$tree" "$seed" "$seconds" "$(hunt_execs "$dir/log")" "$ops"
                echo "   $tree seed $seed: $seconds s${ops:+, $ops ops}" >&2
            done
        done
    done < <(jq -r '.[] | "\(.finding) \(.target) \(.mainline // false)"' <<<"${hunts_of[current]}")
fi

if [[ " $kinds " == *" planted "* ]]; then
    for spec in "$ROOT"/ci/mutants/*.mutant; do
        name=$(basename "$spec" .mutant)
        selected "$name" || continue
        step "$name: $(head -n 1 "$spec")"
        targets=""
        all=$(plant --targets "$spec") || die "$spec: cannot read its targets"
        for target in $all; do
            selected "$name" "$target" && targets+="$target "
        done
        [ -n "$targets" ] || continue
        declare -A ready=() triage_of=()
        for tree in "${trees[@]}"; do
            planted="$work/$tree-planted"
            own="${src[$tree]}/ci/mutants/$name.mutant"
            [ -f "$own" ] || own=$spec
            export CARGO_TARGET_DIR="$work/$tree-planted-target"
            build=()
            for target in $targets; do
                grep -qx -- "$target" <<<"${available[$tree]}" && build+=("$target")
            done
            if ! plant_tree "$own" "$planted" "${src[$tree]}" > "$work/$tree-build.log" 2>&1; then
                echo "   $tree: the spec does not apply" >&2
            elif [ ${#build[@]} -gt 0 ] && ! TARGETS_JSON=${registry[$tree]} fuzz_build "$planted" "${build[@]}" 2>> "$work/$tree-build.log"; then
                echo "   $tree: the planted tree does not build (see $work/$tree-build.log)" >&2
            else
                ready[$tree]=1
                triage_of[$tree]=$(tree_triage "$planted")
            fi
            unset CARGO_TARGET_DIR
        done
        for target in $targets; do
            grep -qx -- "$target" <<<"${available[current]}" ||
                { echo "   $target: skipped ($(target_field "$target" unavailable))" >&2; continue; }
            items+=("planted $name $target")
            for seed in "${seed_list[@]}"; do
                for tree in $(tree_order "$seed"); do
                    if [ -z "${ready[$tree]:-}" ] || ! grep -qx -- "$target" <<<"${available[$tree]}"; then
                        record planted "$name" "$target" "$tree" "$seed" n/a "" ""
                        continue
                    fi
                    dir="$work/runs/$name/$target/$tree-$seed"
                    read -r seconds outcome <<<"$(CARGO_TARGET_DIR="$work/$tree-planted-target" \
                        TARGETS_JSON=${registry[$tree]} hunt_planted "$work/$tree-planted" "$target" "$dir" "$seed" "$budget")"
                    ops=""
                    case "$outcome" in
                    caught)
                        art=$(find "$dir" -maxdepth 1 -name 'crash-*' | head -n 1)
                        ops=$(minimize_bounded "${triage_of[$tree]}" --json "$art" -o "$dir/min.trace" 2>/dev/null |
                            jq -r '.operations // empty' || true) ;;
                    none) seconds=miss ;;
                    *) seconds=$outcome ;;
                    esac
                    record planted "$name" "$target" "$tree" "$seed" "$seconds" "$(hunt_execs "$dir/log")" "$ops"
                    echo "   $target, $tree seed $seed: $seconds${ops:+ s, $ops ops}" >&2
                done
            done
        done
        unset ready triage_of
    done
fi


write_table
