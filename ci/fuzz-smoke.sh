#!/usr/bin/env bash
# Runs every target for a few seconds under each engine, from a copy of
# corpus/<target> (libFuzzer: all of it; AFL++ and honggfuzz: its first
# $START_INPUTS files, default 64, since they run each starting input
# several times first; the repository's corpus is not modified), and fails when
# any run leaves a crash. AFL++ and honggfuzz exit 0 after a crash, so this
# looks for their crash files rather than trusting the exit code.
#
#   ci/fuzz-smoke.sh [--seconds N] [--engines libfuzzer,afl,honggfuzz] [TARGET...]
#
# Installs what each engine needs (ci/install-fuzzers.sh). Prints exec/s per
# run. Output stays under $FUZZ_SMOKE_WORK (default ${TMPDIR:-/tmp}/idpool-fuzz-smoke).
# The targets come from the registry (the `targets` binary); a target whose
# needs are not met is skipped with a one-line reason. A target that links
# C code (the kernel's dbitmap.h) runs under AddressSanitizer under
# libFuzzer (see fuzz_flags_for in ci/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

seconds=10
engines="libfuzzer,afl,honggfuzz"
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds)
        [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || die "--seconds needs a number"
        seconds=$2; shift 2 ;;
    --engines)
        [ $# -ge 2 ] || die "--engines needs a list, e.g. libfuzzer,afl"
        engines=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) targets+=("$1"); shift ;;
    esac
done
engine_filter=()
[ ${#targets[@]} -eq 0 ] || check_targets "${targets[@]}"
read_registry
# The targets of one engine: those named on the command line, or all the
# registry lists for it.
engine_targets() {
    if [ ${#targets[@]} -gt 0 ]; then printf '%s\n' "${targets[@]}"; else targets --engine "$1"; fi
}

work="${FUZZ_SMOKE_WORK:-${TMPDIR:-/tmp}/idpool-fuzz-smoke}"
rm -rf "$work" && mkdir -p "$work"
crashes=0
summary=()

# A scratch copy of corpus/$1 (empty for a target without a corpus).
# With a third argument N, only the first N files (in name order): AFL++
# and honggfuzz run every starting input several times before they fuzz,
# which for a whole corpus takes minutes; `cargo test` replays all of it.
fresh_corpus() {
    rm -rf "$2" && mkdir -p "$2"
    [ -d "$ROOT/corpus/$1" ] || return 0
    if [ -n "${3:-}" ]; then
        # (No `| head` under pipefail: the early close would fail the script.)
        local files
        mapfile -t files < <(find "$ROOT/corpus/$1" -maxdepth 1 -type f | sort)
        [ ${#files[@]} -eq 0 ] || cp -t "$2" "${files[@]:0:$3}"
    else
        cp "$ROOT/corpus/$1"/* "$2"/
    fi
}

# How many corpus files AFL++ and honggfuzz start from.
START_INPUTS=${START_INPUTS:-64}

for engine in ${engines//,/ }; do
    case "$engine" in
    libfuzzer)
        "$ROOT/ci/install-fuzzers.sh" cargo-fuzz
        step "libFuzzer: building"
        (cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}")
        mapfile -t list < <(engine_targets libfuzzer)
        [ ${#list[@]} -gt 0 ] || die "no libfuzzer target to run (see the targets binary)"
        for t in "${list[@]}"; do
            corpus="$work/libfuzzer/$t/corpus"; artifacts="$work/libfuzzer/$t/artifacts"
            fresh_corpus "$t" "$corpus"
            step "libFuzzer: $t for ${seconds}s"
            run_libfuzzer "$ROOT" "$t" "$artifacts" "$work/libfuzzer/$t/log" "$corpus" -- \
                -max_total_time="$seconds" || true
            rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/libfuzzer/$t/log")
            found=$(find "$artifacts" -type f | head -1)
            # A run that never fuzzed (a failed build, a bad flag) leaves no
            # artifact either: it fails the smoke run too.
            if [ -z "$found" ] && ! grep -q '^stat::number_of_executed_units' "$work/libfuzzer/$t/log"; then
                tail -20 "$work/libfuzzer/$t/log" >&2
                die "libFuzzer did not run $t (log: $work/libfuzzer/$t/log)"
            fi
            summary+=("libfuzzer $t (--sanitizer $(target_field "$t" sanitizer)): ${rate:-?} exec/s${found:+, FINDING $found}")
            # A target running outside code says what it runs (the kernel's
            # header: package version and sha256).
            prov=$(target_field "$t" provenance)
            [ -z "$prov" ] || summary+=("  $prov")
            [ -z "$found" ] || { crashes=$((crashes + 1)); grep -m3 -A2 "panicked" "$work/libfuzzer/$t/log" >&2 || true; }
        done
        ;;
    afl)
        "$ROOT/ci/install-fuzzers.sh" afl
        step "AFL++: building"
        (cd "$ROOT/fuzz/afl" && cargo afl build --release)
        mapfile -t list < <(engine_targets afl)
        [ ${#list[@]} -gt 0 ] || die "no afl target to run (see the targets binary)"
        for t in "${list[@]}"; do
            out="$work/afl/$t"; fresh_corpus "$t" "$out/in" "$START_INPUTS"
            step "AFL++: $t for ${seconds}s"
            run_afl "$ROOT" "$t" "$out/in" "$out/out" "$seconds" ||
                { tail -20 "$out/out.log" >&2; die "afl-fuzz failed on $t (log: $out/out.log)"; }
            rate=$(sed -n 's/^execs_per_sec *: *//p' "$out/out/default/fuzzer_stats" 2>/dev/null)
            found=$(find "$out/out/default/crashes" -type f -name 'id:*' 2>/dev/null | head -1)
            summary+=("afl $t: ${rate:-?} exec/s${found:+, CRASH $found}")
            [ -z "$found" ] || crashes=$((crashes + 1))
        done
        ;;
    honggfuzz)
        "$ROOT/ci/install-fuzzers.sh" honggfuzz
        mapfile -t list < <(engine_targets honggfuzz)
        [ ${#list[@]} -gt 0 ] || die "no honggfuzz target to run (see the targets binary)"
        for t in "${list[@]}"; do
            out="$work/honggfuzz/$t"; fresh_corpus "$t" "$out/in" "$START_INPUTS"
            step "honggfuzz: $t for ${seconds}s"
            run_honggfuzz "$ROOT" "$t" "$out/in" "$out/ws" "$seconds" --exit_upon_crash ||
                { tail -20 "$out/ws.log" >&2; die "honggfuzz failed on $t (log: $out/ws.log)"; }
            rate=$(grep -ao 'speed:[0-9]*' "$out/ws.log" | tail -1 | cut -d: -f2 || true)
            found=$(find "$out/ws" -type f -name '*.fuzz' 2>/dev/null | head -1)
            summary+=("honggfuzz $t: ${rate:-?} exec/s${found:+, CRASH $found}")
            [ -z "$found" ] || crashes=$((crashes + 1))
        done
        ;;
    *) die "unknown engine '$engine' (expected libfuzzer, afl or honggfuzz)" ;;
    esac
done

echo
printf '%s\n' "${summary[@]}"
[ "$crashes" -eq 0 ] || { echo "$crashes run(s) left a crash" >&2; exit 1; }
echo "fuzz smoke: no crash"
