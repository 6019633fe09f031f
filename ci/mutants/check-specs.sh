#!/usr/bin/env bash
# Every planted bug still changes behaviour: plants each spec
# (ci/mutants/*.mutant) in a scratch copy of the tree and checks that its
# promoted regression (corpus/regressions/<target>/planted-<name>.trace)
# fails there, while it passes on the tree as it is (`cargo test` checks
# that part, and that every spec still applies).
#
#   ci/mutants/check-specs.sh [SPEC...]
#
# Rebuilds the harness once per spec (incrementally, in one target
# directory under $MUTANTS_WORK). Exits 1 when a spec does not apply or its
# regression passes with the bug planted.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

mutant_specs "$@"
work=$MUTANTS_WORK

# The name of spec $1's regression test, `<target>/planted-<spec>`: the
# trace's directory names the target that caught it.
regression_test() {
    local trace
    trace=$(find "$ROOT/corpus/regressions" -name "planted-$1.trace" | head -n 1)
    [ -n "$trace" ] || die "no corpus/regressions/*/planted-$1.trace"
    printf '%s/planted-%s\n' "$(basename "$(dirname "$trace")")" "$1"
}
mkdir -p "$work"
bad=0
for spec in "${specs[@]}"; do
    name=$(basename "$spec" .mutant)
    tree="$work/tree-check"
    copy_tree "$tree"
    if ! plant "$spec" "$tree"; then
        bad=$((bad + 1)); continue
    fi
    log="$work/$name.check.log"
    # Built first, so that a tree that does not build is not taken for a
    # regression that fails; then the regression alone, by its exact name.
    regressions=(cargo test -q -p idpool-harness --test regressions)
    if ! (cd "$tree" && CARGO_TARGET_DIR="$work/target-check" "${regressions[@]}" --no-run) > "$log" 2>&1; then
        echo "$name: the planted tree does not build (see $log)" >&2
        bad=$((bad + 1))
    elif (cd "$tree" && CARGO_TARGET_DIR="$work/target-check" "${regressions[@]}" -- \
        --exact "$(regression_test "$name")") >> "$log" 2>&1; then
        echo "$name: its regression passes with the bug planted (see $log)" >&2
        bad=$((bad + 1))
    else
        echo "$name: planted, and its regression fails as it should"
    fi
done
[ "$bad" -eq 0 ] || { echo "$bad spec(s) no longer plant their bug" >&2; exit 1; }
