#!/usr/bin/env bash
# The allocator benchmark (benches/acquire.rs, divan): the cost of one more
# handle with n live ones for every design, the pool alone, the teardown,
# the creation of n references, then the live heap bytes per reference and
# the cost against n again for the plot. Writes a result page
# (docs/results/<date>-benchmark.md: divan's tables and the report, as
# printed) and, beside it, the CSV files and the SVG plot
# (docs/results/<date>-benchmark/).
#
#   ci/bench.sh [DIVAN ARGS...]    e.g. ci/bench.sh --sample-count 100
#
# The machine should be quiet: divan's medians move with its load, and only
# ratios within one run compare.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

page=$(result_page benchmark)
out="${page%.md}"
mkdir -p "$out"
log="$out/run.txt"
step "cargo bench --bench acquire $* (output: $out)"
(cd "$ROOT" && BENCH_OUT="$out" cargo bench --bench acquire -- "$@") | tee "$log"
{
    page_head "Benchmark: the allocator and the designs" cargo bench --bench acquire -- "$@"
    echo "What it printed (divan's medians, then the report); the plot and the CSV files are"
    echo "in \`$(basename "$out")/\`."
    echo
    echo "![cost of one new handle against n, every design]($(basename "$out")/acquire.svg)"
    echo
    echo '```text'
    cat "$log"
    echo '```'
} > "$page"
echo "result page: $page"
