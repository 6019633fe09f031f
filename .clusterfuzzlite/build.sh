#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: every libFuzzer target, with its seed
# corpus (<target>_seed_corpus.zip), dictionary (<target>.dict) and
# libFuzzer options (<target>.options: the scripts' schedule), into $OUT. The base image's cargo wrapper adds the sanitizer flags; extra
# cargo-fuzz flags can come from $CARGO_FUZZ_ARGS (ci/oss-fuzz-check.sh
# passes `--sanitizer none` to exercise this script outside the image).
cd "$SRC/idpool"
# The target list comes from the registry (harness/src/registry.rs), built
# as a plain host tool: without the image's fuzzing RUSTFLAGS. A target whose
# needs are not met (kernel_dbitmap without the kernel's dbitmap.h, see the
# Dockerfile) is left out, with its reason on stderr.
targets=$(env -u RUSTFLAGS -u CARGO_BUILD_TARGET cargo run -q --release \
    --target-dir target/tools -p idpool-harness --bin targets -- --engine libfuzzer)
# shellcheck disable=SC2086
(cd fuzz && cargo fuzz build -O --debug-assertions ${CARGO_FUZZ_ARGS:-})
# libFuzzer's schedule flags, as every script runs them (ci/lib.sh), as
# the <target>.options file ClusterFuzz reads: "-name=value" as
# "name = value"; and where cargo-fuzz put the binaries.
# shellcheck source=../ci/lib.sh
source ci/lib.sh
bin_dir=$(fuzz_bin .)
options=$(printf '[libfuzzer]\n'; for f in "${LIBFUZZER_SCHEDULE[@]}"; do
    f=${f#-}; printf '%s = %s\n' "${f%%=*}" "${f#*=}"; done)
while read -r t; do
    cp "$bin_dir/$t" "$OUT/"
    cp "fuzz/dict/$t.dict" "$OUT/$t.dict"
    printf '%s\n' "$options" > "$OUT/$t.options"
    if [ -d "corpus/$t" ]; then
        zip -jq "$OUT/${t}_seed_corpus.zip" corpus/"$t"/*
    fi
done <<<"$targets"
