#!/usr/bin/env bash
# The triage workflow, end to end, for every planted bug that
# ci/mutants/run.sh caught: its fuzzer artifact -> `triage promote` (which
# minimises) -> a regression trace that fails `cargo test` with the bug
# patched in and passes without it.
#
#   ci/mutants/triage-check.sh [PATCH...]
#
# Uses the artifacts under $MUTANTS_WORK (run ci/mutants/run.sh first).
# Exits 1 when a trace is longer than 12 operations, or does not fail with
# the bug, or does not pass without it. The promoted traces are kept under
# $MUTANTS_WORK/promoted/ for reading.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

patches=("$@")
[ ${#patches[@]} -gt 0 ] || patches=("$ROOT"/ci/mutants/*.patch)
work="${MUTANTS_WORK:-${TMPDIR:-/tmp}/idpool-mutants}"
[ -d "$work/artifacts" ] || die "no artifacts under $work: run ci/mutants/run.sh first"
mkdir -p "$work/promoted"
export CARGO_TARGET_DIR="$work/target-triage"

step "building triage on the unpatched tree"
(cd "$ROOT" && cargo build --release -q -p triage)
cp "$CARGO_TARGET_DIR/release/triage" "$work/triage-faithful"

report="$work/triage-report.md"
{
    echo "| planted bug | minimised ops | fails with the bug | passes without |"
    echo "| --- | ---: | --- | --- |"
} > "$report"
bad=0
for patch in "${patches[@]}"; do
    name=$(basename "$patch" .patch)
    artifact=$(find "$work/artifacts/$name" -type f 2>/dev/null | sort | head -1)
    if [ -z "$artifact" ]; then
        echo "| $name | no artifact | | |" >> "$report"; bad=$((bad + 1)); continue
    fi
    step "$name: $artifact"
    tree="$work/tree-triage"
    copy_tree "$tree"
    patch -d "$tree" -p1 -s < "$patch"
    (cd "$tree" && cargo build --release -q -p triage)
    out="$work/promoted/$name.log"
    (cd "$tree" && "$CARGO_TARGET_DIR/release/triage" promote "$artifact" --name "planted-$name" \
        --root-cause "$(head -n 1 "$patch")") > "$out" 2>&1 || { cat "$out" >&2; die "promote failed for $name"; }
    trace=$(find "$tree/corpus/regressions" -name "planted-$name.trace")
    cp "$trace" "$work/promoted/"
    ops=$(sed -n 's/.*(\([0-9]*\) operations)$/\1/p' "$out" | tail -1)
    if (cd "$tree" && cargo test -q -p idpool-harness --test regressions) > "$work/promoted/$name.test.log" 2>&1; then
        with="NO (cargo test passed)"; bad=$((bad + 1))
    else
        with="yes"
    fi
    if "$work/triage-faithful" repro "$trace" > "$work/promoted/$name.repro.log" 2>&1; then
        without="yes"
    else
        without="NO (see $work/promoted/$name.repro.log)"; bad=$((bad + 1))
    fi
    [ "${ops:-99}" -le 12 ] || bad=$((bad + 1))
    echo "| $name | ${ops:-?} | $with | $without |" >> "$report"
done
echo
cat "$report"
[ "$bad" -eq 0 ] || { echo "$bad problem(s)" >&2; exit 1; }
