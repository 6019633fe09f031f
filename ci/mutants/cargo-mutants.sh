#!/usr/bin/env bash
# Scores the harness with cargo-mutants: every mutant of the allocator
# (src/, package idpool) is built and run against the campaign's tests only
# (package idpool-harness: corpus and regression replay, the smoke test,
# the seeded exploration test), never against the allocator's own unit
# tests nor the harness's (those test the harness's logic, not what the
# campaign catches; building them also doubled each mutant's build). A
# mutant the campaign does not catch is a blind spot; ci/mutants/survivors.md
# lists them.
#
#   ci/mutants/cargo-mutants.sh [--list] [CARGO-MUTANTS ARGS...]
#
# --list prints the mutants without running them; --shuffle tests them in
# random order (a run stopped early is then a uniform sample). Other arguments go to
# cargo-mutants, e.g. `--shard 0/8`, `--file src/bitmap.rs`, `--jobs 2`.
# Results go to $MUTANTS_WORK/cargo-mutants/mutants.out (outcomes.json,
# caught.txt, missed.txt, timeout.txt, unviable.txt), and the score to a
# result page (docs/results/<date>-cargo-mutants.md, from outcomes.json). A
# full run takes hours on 2 cores: run it in the background, it is not part
# of .ci/run.
#
# The test step runs under cargo-nextest, profile `mutants` of
# .config/nextest.toml: every test in a process of its own, two at a time,
# the fast ones first, and the step stops at the first failure, killing
# the tests still running (cargo test would run the corpus replay and the
# seeded exploration, over a minute, before the regressions that catch a
# mutant in a second). A test that runs far past its usual time (a grow
# that never ends) is killed by nextest's slow-timeout and fails: the fuzz
# targets report the same hang as a `timeout-` artifact.
#
# MUTANT_TEST_TIMEOUT (default 300) bounds one mutant's whole test step,
# in seconds: a survivor's takes about 40 s on 2 free cores, up to two
# minutes when they are loaded.
#
# Mutants are built without debug info (CARGO_PROFILE_TEST_DEBUG=0): a
# mutant's build is mostly the harness's codegen, and the line tables
# added about a third to it; a failing test still names its step.
#
# Mutants of Debug and Display formatting are excluded (--exclude-re
# below): no target compares a message's wording with a model.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

CARGO_MUTANTS_VERSION=27.1.0
# The nextest the scoring was measured with (.config/nextest.toml needs
# 0.9.91 or later for its test order).
CARGO_NEXTEST_VERSION=0.9.143

list=0
# Source order by default (a run's files and lines come in the order of
# the tree); --shuffle tests them in random order, so a run stopped early
# is a uniform sample of its scope.
order=--no-shuffle
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    -h|--help) usage; exit 0 ;;
    --list) list=1; shift ;;
    --shuffle) order=--shuffle; shift ;;
    *) args+=("$1"); shift ;;
    esac
done

if ! cargo mutants --version 2>/dev/null | grep -q "$CARGO_MUTANTS_VERSION"; then
    step "installing cargo-mutants $CARGO_MUTANTS_VERSION"
    cargo install --locked --version "$CARGO_MUTANTS_VERSION" cargo-mutants
fi
nextest_version=$(cargo nextest --version 2>/dev/null | awk '{print $2}')
if [ -z "$nextest_version" ] || [ "$(printf '%s\n%s\n' "$CARGO_NEXTEST_VERSION" "$nextest_version" | sort -V | head -1)" != "$CARGO_NEXTEST_VERSION" ]; then
    step "installing cargo-nextest $CARGO_NEXTEST_VERSION (found: ${nextest_version:-none})"
    cargo install --locked --version "$CARGO_NEXTEST_VERSION" cargo-nextest
fi
export NEXTEST_PROFILE=mutants

# The campaign's test step: the corpus and regression replay, the smoke
# test and the seeded exploration test; not the allocator's own tests, nor
# the harness's unit tests, nor the slower planted-bug and script checks.
tests=(--test=corpus --test=regressions --test=smoke --test=explore)
common=(
    --dir "$ROOT"
    --package idpool
    --test-package idpool-harness
    --test-tool nextest
    --exclude-re '<impl (core::|std::)?(fmt::)?(Debug|Display) for '
    --exclude-re '<impl std::error::Error for '
)
# --cargo-arg, not --cargo-test-arg: cargo-mutants builds each mutant with
# `cargo nextest run --no-run` first, which without them would also build
# every other test binary of the harness, its unit tests' above all.
for t in "${tests[@]}"; do common+=("--cargo-arg=$t"); done
if [ "$list" = 1 ]; then
    exec cargo mutants --list "${common[@]}" "${args[@]}"
fi
out=$MUTANTS_WORK/cargo-mutants
mkdir -p "$out"
# cargo-mutants' own baseline runs the tests of the mutated package (the
# allocator's), not --test-package's: so the baseline is this step, the
# harness's test step on the unmutated tree, and cargo-mutants skips its
# own, with a fixed test timeout (a surviving mutant runs the whole step,
# about 40 s on 2 cores).
step "baseline: the harness's test step on the unmutated tree"
(cd "$ROOT" && cargo nextest run -p idpool-harness "${tests[@]}")
step "cargo-mutants over src/, tested by idpool-harness only; results in $out/mutants.out"
status=0
CARGO_PROFILE_TEST_DEBUG=0 cargo mutants "${common[@]}" --baseline skip --timeout "${MUTANT_TEST_TIMEOUT:-300}" \
    --output "$out" "$order" "${args[@]}" || status=$?

# The score, from cargo-mutants' own record of the run.
need_jq
results="$out/mutants.out"
count() { jq -r --arg k "$1" '.[$k] // 0' "$results/outcomes.json"; }
page=$(result_page cargo-mutants)
{
    page_head "The harness scored with cargo-mutants" ci/mutants/cargo-mutants.sh "${args[@]}"
    caught=$(count caught) missed=$(count missed) timeout=$(count timeout) unviable=$(count unviable)
    viable=$((caught + missed + timeout))
    echo "Mutants of src/ (package idpool), tested by the campaign's tests only (idpool-harness:"
    echo "corpus, regressions, smoke, explore)."
    echo
    echo "| mutants | viable | caught | missed | timeout | unviable | caught of viable |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    echo "| $(count total_mutants) | $viable | $caught | $missed | $timeout | $unviable |" \
        "$(awk -v c="$caught" -v v="$viable" 'BEGIN { if (v) printf "%.1f%%", 100 * c / v; else print "-" }') |"
    echo
    echo "Missed (argue each in ci/mutants/survivors.md, or catch it):"
    echo
    sed 's/^/- /' "$results/missed.txt" 2>/dev/null || true
} > "$page"
echo "result page: $page"
exit "$status"
