#!/usr/bin/env bash
# The triage workflow, end to end, for every planted bug that
# ci/mutants/run.sh caught: its fuzzer artifact -> `triage promote` (which
# minimises) -> a regression trace that fails `cargo test` with the bug
# planted and passes without it.
#
#   ci/mutants/triage-check.sh [SPEC...]
#
# Uses the artifacts under $MUTANTS_WORK that run.sh counted as caught
# ($MUTANTS_WORK/caught/<spec>; run ci/mutants/run.sh first).
# Exits 1 when a trace is longer than 12 operations, or does not fail with
# the bug, or does not pass without it. The promoted traces are kept under
# $MUTANTS_WORK/promoted/ for reading; the table is a result page
# (docs/results/<date>-triage-check.md).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

mutant_specs "$@"
need_jq
work=$MUTANTS_WORK
[ -d "$work/artifacts" ] || die "no artifacts under $work: run ci/mutants/run.sh first"
mkdir -p "$work/promoted"
export CARGO_TARGET_DIR="$work/target-triage"

# The faithful build has a target directory of its own: cargo names a
# workspace's artifacts by paths relative to its root, and the planted
# copies keep the tree's timestamps, so a shared one would hand back a
# planted build as up to date.
step "building triage on the tree as it is"
(cd "$ROOT" && CARGO_TARGET_DIR="$work/target-faithful" cargo build --release -q -p triage)
cp "$work/target-faithful/release/triage" "$work/triage-faithful"

rows=()
bad=0
for spec in "${specs[@]}"; do
    name=$(basename "$spec" .mutant)
    # The crash run.sh counted as caught (never a timeout or an oom).
    artifact=$(cat "$work/caught/$name" 2>/dev/null || true)
    if [ -z "$artifact" ]; then
        rows+=("| $name | not caught by run.sh | | |"); bad=$((bad + 1)); continue
    fi
    step "$name: $artifact"
    tree="$work/tree-triage"
    copy_tree "$tree"
    plant "$spec" "$tree" || die "$spec does not apply"
    # The copy of this bug's committed regression goes: the promotion
    # starts from the artifact alone, and the test below runs its trace.
    rm -f "$tree"/corpus/regressions/*/"planted-$name.trace"
    (cd "$tree" && cargo build --release -q -p triage)
    out="$work/promoted/$name.json"
    (cd "$tree" && "$CARGO_TARGET_DIR/release/triage" promote --json "$artifact" --name "planted-$name" \
        --root-cause "$(head -n 1 "$spec")") > "$out" 2> "$work/promoted/$name.log" ||
        { cat "$work/promoted/$name.log" >&2; die "promote failed for $name"; }
    trace="$tree/$(jq -r .path "$out")"
    cp "$trace" "$work/promoted/"
    ops=$(jq -r .operations "$out")
    # Built first, so that a tree that does not build is not taken for a
    # failing trace; then the promoted trace's test alone, by its exact name.
    regressions=(cargo test -q -p idpool-harness --test regressions)
    test_log="$work/promoted/$name.test.log"
    if ! (cd "$tree" && "${regressions[@]}" --no-run) > "$test_log" 2>&1; then
        with="NO (the planted tree does not build: see $test_log)"; bad=$((bad + 1))
    elif (cd "$tree" && "${regressions[@]}" -- --exact "$(jq -r .target "$out")/planted-$name") \
        >> "$test_log" 2>&1; then
        with="NO (its test passed)"; bad=$((bad + 1))
    else
        with="yes"
    fi
    if "$work/triage-faithful" repro "$trace" > "$work/promoted/$name.repro.log" 2>&1; then
        without="yes"
    else
        without="NO (see $work/promoted/$name.repro.log)"; bad=$((bad + 1))
    fi
    [ "${ops:-99}" -le 12 ] || bad=$((bad + 1))
    rows+=("| $name | ${ops:-?} | $with | $without |")
done
page=$(result_page triage-check)
{
    page_head "Planted bugs, from artifact to regression" ci/mutants/triage-check.sh "$@"
    echo "Each artifact ci/mutants/run.sh caught, through \`triage promote\` in a tree with"
    echo "the bug planted: the trace's length, and whether \`cargo test\` fails with the bug"
    echo "and the trace passes without it."
    echo
    echo "| planted bug | minimised ops | fails with the bug | passes without |"
    echo "| --- | ---: | --- | --- |"
    printf '%s\n' "${rows[@]}"
} > "$page"
echo
cat "$page"
echo "result page: $page"
[ "$bad" -eq 0 ] || { echo "$bad problem(s)" >&2; exit 1; }
