#!/usr/bin/env bash
# Exercises .clusterfuzzlite/build.sh outside its Docker image, with SRC and
# OUT in temporary directories, and checks that every fuzzer binary, seed
# corpus archive, dictionary and options file comes out, and that each
# binary runs a few inputs with its dictionary.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

"$ROOT/ci/install-fuzzers.sh" cargo-fuzz
SRC=$(mktemp -d) OUT=$(mktemp -d)
trap 'rm -rf "$SRC" "$OUT"' EXIT
ln -s "$ROOT" "$SRC/idpool"
step "building with .clusterfuzzlite/build.sh (SRC=$SRC OUT=$OUT)"
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then export RUSTUP_TOOLCHAIN=nightly; fi
SRC="$SRC" OUT="$OUT" CARGO_FUZZ_ARGS="--sanitizer none" bash "$ROOT/.clusterfuzzlite/build.sh"

missing=0
mapfile -t all < <(targets --engine libfuzzer)
[ ${#all[@]} -gt 0 ] || die "the targets binary listed no target"
mapfile -t seeded < <(targets --engine libfuzzer --corpus 2>/dev/null)
for t in "${all[@]}"; do
    [ -x "$OUT/$t" ] || { echo "missing fuzzer binary $OUT/$t" >&2; missing=$((missing + 1)); continue; }
    [ -s "$OUT/$t.dict" ] || { echo "missing dictionary $OUT/$t.dict" >&2; missing=$((missing + 1)); }
    # The options file carries the scripts' schedule flags, each as ClusterFuzz reads it.
    for f in "${LIBFUZZER_SCHEDULE[@]}"; do
        f=${f#-}
        grep -qx -- "${f%%=*} = ${f#*=}" "$OUT/$t.options" 2>/dev/null ||
            { echo "$OUT/$t.options lacks ${f%%=*} = ${f#*=}" >&2; missing=$((missing + 1)); }
    done
    if printf '%s\n' "${seeded[@]}" | grep -qx -- "$t"; then
        n=$(unzip -Z1 "$OUT/${t}_seed_corpus.zip" 2>/dev/null | wc -l)
        [ "$n" -gt 0 ] || { echo "missing or empty $OUT/${t}_seed_corpus.zip" >&2; missing=$((missing + 1)); }
    fi
    "$OUT/$t" -dict="$OUT/$t.dict" -runs=200 > "$OUT/$t.run.log" 2>&1 \
        || { tail -5 "$OUT/$t.run.log" >&2; echo "$t does not run with its dictionary" >&2; missing=$((missing + 1)); }
    echo "$t: binary, dictionary, ${n:-no} seeds ok"; n=
done
[ "$missing" -eq 0 ] || exit 1
echo "oss-fuzz build: every target, seed corpus and dictionary came out"
