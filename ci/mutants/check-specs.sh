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
mkdir -p "$work"
bad=0
for spec in "${specs[@]}"; do
    name=$(basename "$spec" .mutant)
    tree="$work/tree-check"
    copy_tree "$tree"
    if ! plant "$spec" "$tree"; then
        bad=$((bad + 1)); continue
    fi
    if (cd "$tree" && CARGO_TARGET_DIR="$work/target-check" \
        cargo test -q -p idpool-harness --test regressions -- "planted-$name") > "$work/$name.check.log" 2>&1; then
        echo "$name: its regression passes with the bug planted (see $work/$name.check.log)" >&2
        bad=$((bad + 1))
    elif grep -q "planted-$name ... FAILED" "$work/$name.check.log"; then
        echo "$name: planted, and its regression fails as it should"
    else
        echo "$name: the planted tree does not build or test (see $work/$name.check.log)" >&2
        bad=$((bad + 1))
    fi
done
[ "$bad" -eq 0 ] || { echo "$bad spec(s) no longer plant their bug" >&2; exit 1; }
