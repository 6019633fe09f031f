#!/usr/bin/env bash
# A readable source-coverage report of one fuzz target: what its corpus
# reaches of the project's own code (src/, the allocator crate, and
# harness/), from the profile `cargo fuzz coverage` writes.
#
#   ci/coverage-report.sh [--build] [--profdata FILE] TARGET DIR
#
#   --build       first run `cargo fuzz coverage TARGET corpus/TARGET` (with
#                 the target's build flags; a few minutes), which writes
#                 fuzz/coverage/TARGET/coverage.profdata
#   --profdata F  the profile to read (default
#                 fuzz/coverage/TARGET/coverage.profdata)
#
# Reads the profile with the coverage-instrumented binary cargo fuzz
# coverage built (the newest under fuzz/target/) and the llvm-cov of the
# toolchain that built it (its llvm-tools component, added with rustup when
# missing, before anything is built: cargo fuzz coverage needs its
# llvm-profdata too), and writes, under DIR:
#   coverage/TARGET.md        a markdown section: per file of src/ and
#                             harness/, lines, regions and functions
#                             covered, with totals; the functions under
#                             src/ that no input reached (demangled); a
#                             relative link to the HTML
#   coverage/TARGET/index.html  llvm-cov's HTML pages of those files
#   coverage/TARGET.txt       llvm-cov report's own table
#   coverage/TARGET.profdata  a copy of the profile
# The section names no path outside DIR and the repository. ci/campaign.sh
# --coverage runs it for each target and puts the section in its report.
# On a failure (no llvm-tools, no profile, no binary) the section says
# what failed, and the script exits 1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

build=0
profdata=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=1; shift ;;
    --profdata) [ -n "${2:-}" ] || die "--profdata needs a file"; profdata=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown argument $1 (see --help)" ;;
    *) break ;;
    esac
done
[ $# -eq 2 ] || die "usage: ci/coverage-report.sh [--build] [--profdata FILE] TARGET DIR"
t=$1 dir=$2
mkdir -p "$dir/coverage"
dir=$(cd "$dir" && pwd)
section="$dir/coverage/$t.md"
log="$dir/coverage/$t.log"
: > "$log"

# Writes the section as a failure, names the log, and exits 1.
fail() {
    printf '### %s\n\nNo coverage report: %s (see coverage/%s.log).\n' "$t" "$1" "$t" > "$section"
    echo "coverage-report.sh: $t: $1 (see $log)" >&2
    exit 1
}

# The LLVM tools first: `cargo fuzz coverage` merges the raw profiles with
# the toolchain's llvm-profdata, and llvm-cov reads them (llvm_tool adds
# the llvm-tools component when the toolchain lacks it).
llvm_tool llvm-profdata > /dev/null ||
    fail "no llvm-profdata: rustup component add llvm-tools failed"
cov=$(llvm_tool llvm-cov 2>> "$log") || fail "no llvm-cov: rustup component add llvm-tools failed"

if [ "$build" -eq 1 ]; then
    [ -n "$(ls -A "$ROOT/corpus/$t" 2>/dev/null)" ] || fail "corpus/$t is missing or empty"
    read -ra flags <<<"$(fuzz_flags_for "$t")"
    step "source coverage of $t: cargo fuzz coverage over corpus/$t (a coverage build, then each input once)"
    # (In watch_run's background subshell: the cd stays there.)
    coverage_build() { cd "$ROOT/fuzz" && fuzz_cargo fuzz coverage "$@"; }
    watch_run "$t: cargo fuzz coverage" "$log" coverage_build "${flags[@]}" "$t" "$ROOT/corpus/$t" ||
        fail "cargo fuzz coverage failed"
fi
[ -n "$profdata" ] || profdata="$ROOT/fuzz/coverage/$t/coverage.profdata"
[ -s "$profdata" ] || fail "no profile at ${profdata#"$ROOT"/} (run with --build, or cargo fuzz coverage $t)"

# cargo fuzz coverage builds into <target dir>/<triple>/coverage/: the
# newest such binary of the target is the one that wrote the profile.
bin=$(find "$ROOT/fuzz/target" -type f -name "$t" -path '*/coverage/*' -perm -u+x -printf '%T@ %p\n' 2>/dev/null |
    sort -rn | head -n 1 | cut -d' ' -f2- || true)
[ -n "$bin" ] || fail "no coverage-instrumented binary of $t under fuzz/target/ (run with --build)"
cp "$profdata" "$dir/coverage/$t.profdata"

# Only the project's sources: llvm-cov reads every file under the
# directories named after the binary.
sources=("$ROOT/src" "$ROOT/harness/src")
args=(-instr-profile="$dir/coverage/$t.profdata" "$bin")
"$cov" report "${args[@]}" "${sources[@]}" > "$dir/coverage/$t.txt" 2>> "$log" || fail "llvm-cov report failed"
rm -rf "$dir/coverage/$t"
"$cov" show -format=html -output-dir="$dir/coverage/$t" -show-line-counts-or-regions \
    "${args[@]}" "${sources[@]}" >> "$log" 2>&1 || fail "llvm-cov show failed"
"$cov" export -format=text -summary-only "${args[@]}" "${sources[@]}" > "$dir/coverage/$t.summary.json" 2>> "$log" ||
    fail "llvm-cov export failed"
"$cov" export -format=text -skip-expansions "${args[@]}" "$ROOT/src" > "$dir/coverage/$t.functions.json" 2>> "$log" ||
    fail "llvm-cov export of the functions failed"

# Demangles the names on stdin, one a line: rustfilt if installed, else
# binutils' c++filt (which reads Rust's legacy and v0 manglings), without
# the hash and the crate disambiguators.
demangle() {
    if command -v rustfilt > /dev/null; then rustfilt
    elif command -v c++filt > /dev/null; then c++filt
    else cat
    fi | sed -E 's/::h[0-9a-f]{16}$//; s/\[[0-9a-f]+\]//g'
}

{
    printf '### %s\n\n' "$t"
    echo "| file | lines % | regions % | functions % |"
    echo "| --- | ---: | ---: | ---: |"
    jq -r --arg root "$ROOT/" '
        def pct(s): "\(s.percent * 10 | round / 10) (\(s.covered)/\(s.count))";
        (.data[0].files | sort_by(.filename)[] | select(.summary.regions.covered > 0) |
            "| \(.filename | ltrimstr($root)) | \(pct(.summary.lines)) | \(pct(.summary.regions)) | \(pct(.summary.functions)) |"),
        (.data[0].totals | "| **total** (every file of src/ and harness/ in the binary) | \(pct(.lines)) | \(pct(.regions)) | \(pct(.functions)) |")
    ' "$dir/coverage/$t.summary.json"
    echo
    # The files no input entered (other targets' code, mostly), in a line.
    unentered=$(jq -r --arg root "$ROOT/" '
        [.data[0].files | sort_by(.filename)[] | select(.summary.regions.covered == 0) |
            "\(.filename | ltrimstr($root)) (\(.summary.functions.count))"] | join(", ")
    ' "$dir/coverage/$t.summary.json")
    [ -z "$unentered" ] || printf 'Not entered at all (its functions in brackets): %s.\n\n' "$unentered"
    # The functions of src/ no input reached, in the files some input
    # entered (the others are named above, whole). A function instantiated
    # several times (generics) counts as reached when any instance ran:
    # grouped by where it starts.
    entered=$(jq -r '.data[0].files[] | select(.summary.regions.covered > 0) | .filename' "$dir/coverage/$t.summary.json")
    unreached=$(jq -r --arg root "$ROOT/src/" --arg entered "$entered" '
        ($entered | split("\n")) as $in |
        [.data[0].functions[] | select(.filenames[0] | startswith($root)) |
            select(.filenames[0] as $f | $in | index($f)) |
            {key: "\(.filenames[0] | ltrimstr($root)):\(.regions[0][0])", name, count}] |
        group_by(.key)[] | select(all(.count == 0)) | "\(.[0].key)\t\(.[0].name)"
    ' "$dir/coverage/$t.functions.json" | sort -t: -k1,1 -k2,2n)
    if [ -z "$unreached" ]; then
        echo "Functions of src/ that no input reached, in the files entered: none."
    else
        echo "Functions of src/ that no input reached, in the files entered ($(wc -l <<<"$unreached")):"
        echo
        paste <(cut -f1 <<<"$unreached") <(cut -f2 <<<"$unreached" | demangle) |
            awk -F'\t' '{ printf "- `%s` (src/%s)\n", $2, $1 }'
    fi
    echo
    echo "HTML: [coverage/$t/index.html](coverage/$t/index.html) (llvm-cov show); llvm-cov's own table: [coverage/$t.txt](coverage/$t.txt)."
} > "$section.new"
mv "$section.new" "$section"
rm -f "$dir/coverage/$t.functions.json"
echo "coverage-report.sh: $t: $section" >&2
