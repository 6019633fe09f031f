#!/usr/bin/env bash
# Runs every target for a few seconds under each engine, from a copy of
# corpus/<target> (the repository's corpus is not modified), and fails when
# any run leaves a crash. AFL++ and honggfuzz exit 0 after a crash, so this
# looks for their crash files rather than trusting the exit code.
#
#   ci/fuzz-smoke.sh [--seconds N] [--engines libfuzzer,afl,honggfuzz] [TARGET...]
#
# Installs what each engine needs (ci/install-fuzzers.sh). Prints exec/s per
# run. Output stays under $FUZZ_SMOKE_WORK (default ${TMPDIR:-/tmp}/idpool-fuzz-smoke).
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
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) targets+=("$1"); shift ;;
    esac
done
all_targets=(pool_ops dbitmap_ops handle_table concurrent_resize)
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
    [[ " ${all_targets[*]} " == *" $t "* ]] || die "unknown target '$t' (known: ${all_targets[*]})"
    [ -n "$(ls -A "$ROOT/corpus/$t" 2>/dev/null)" ] || die "corpus/$t is missing or empty"
done

work="${FUZZ_SMOKE_WORK:-${TMPDIR:-/tmp}/idpool-fuzz-smoke}"
rm -rf "$work" && mkdir -p "$work"
crashes=0
summary=()

fresh_corpus() { rm -rf "$2" && mkdir -p "$2" && cp "$ROOT/corpus/$1"/* "$2"/; }

for engine in ${engines//,/ }; do
    case "$engine" in
    libfuzzer)
        "$ROOT/ci/install-fuzzers.sh" cargo-fuzz
        step "libFuzzer: building"
        (cd "$ROOT/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}")
        for t in "${targets[@]}"; do
            corpus="$work/libfuzzer/$t/corpus"; artifacts="$work/libfuzzer/$t/artifacts"
            fresh_corpus "$t" "$corpus"; mkdir -p "$artifacts"
            step "libFuzzer: $t for ${seconds}s"
            (cd "$ROOT/fuzz" && fuzz_cargo fuzz run "${FUZZ_BUILD_FLAGS[@]}" "$t" "$corpus" -- \
                -max_total_time="$seconds" -artifact_prefix="$artifacts/" -print_final_stats=1) \
                > "$work/libfuzzer/$t/log" 2>&1 || true
            rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/libfuzzer/$t/log")
            found=$(find "$artifacts" -type f | head -1)
            summary+=("libfuzzer $t: ${rate:-?} exec/s${found:+, CRASH $found}")
            [ -z "$found" ] || { crashes=$((crashes + 1)); grep -m3 -A2 "panicked" "$work/libfuzzer/$t/log" >&2 || true; }
        done
        # The trace parser faces user input: fuzz it too (no corpus needed).
        t=trace_roundtrip; mkdir -p "$work/libfuzzer/$t/corpus" "$work/libfuzzer/$t/artifacts"
        step "libFuzzer: $t for ${seconds}s"
        (cd "$ROOT/fuzz" && fuzz_cargo fuzz run "${FUZZ_BUILD_FLAGS[@]}" "$t" "$work/libfuzzer/$t/corpus" -- \
            -max_total_time="$seconds" -dict="$ROOT/fuzz/dict/$t.dict" \
            -artifact_prefix="$work/libfuzzer/$t/artifacts/" -print_final_stats=1) > "$work/libfuzzer/$t/log" 2>&1 || true
        found=$(find "$work/libfuzzer/$t/artifacts" -type f | head -1)
        summary+=("libfuzzer $t: $(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/libfuzzer/$t/log") exec/s${found:+, CRASH $found}")
        [ -z "$found" ] || crashes=$((crashes + 1))
        ;;
    afl)
        "$ROOT/ci/install-fuzzers.sh" afl
        step "AFL++: building"
        (cd "$ROOT/fuzz/afl" && cargo afl build --release)
        for t in "${targets[@]}"; do
            out="$work/afl/$t"; fresh_corpus "$t" "$out/in"
            step "AFL++: $t for ${seconds}s"
            (cd "$ROOT/fuzz/afl" && AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
                AFL_NO_AFFINITY=1 \
                cargo afl fuzz -i "$out/in" -o "$out/out" -V "$seconds" -t 5000 "target/release/$t") \
                > "$out/log" 2>&1 || { tail -20 "$out/log" >&2; die "afl-fuzz failed on $t (log: $out/log)"; }
            rate=$(sed -n 's/^execs_per_sec *: *//p' "$out/out/default/fuzzer_stats" 2>/dev/null)
            found=$(find "$out/out/default/crashes" -type f -name 'id:*' 2>/dev/null | head -1)
            summary+=("afl $t: ${rate:-?} exec/s${found:+, CRASH $found}")
            [ -z "$found" ] || crashes=$((crashes + 1))
        done
        ;;
    honggfuzz)
        "$ROOT/ci/install-fuzzers.sh" honggfuzz
        for t in "${targets[@]}"; do
            out="$work/honggfuzz/$t"; fresh_corpus "$t" "$out/in"
            step "honggfuzz: $t for ${seconds}s"
            # honggfuzz sets MALLOC_PERTURB_ unless it is set: glibc then fills
            # every allocation, and a 2^30-id pool costs 128 MiB of writes.
            (cd "$ROOT/fuzz/honggfuzz" && HFUZZ_WORKSPACE="$out/ws" MALLOC_PERTURB_=0 \
                HFUZZ_RUN_ARGS="--run_time $seconds -n 1 --exit_upon_crash -i $out/in -v" \
                cargo hfuzz run "$t") > "$out/log" 2>&1 || { tail -20 "$out/log" >&2; die "honggfuzz failed on $t (log: $out/log)"; }
            rate=$(grep -ao 'speed:[0-9]*' "$out/log" | tail -1 | cut -d: -f2 || true)
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
