#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: every libFuzzer target, with its seed
# corpus (<target>_seed_corpus.zip) and dictionary (<target>.dict), into
# $OUT. The base image's cargo wrapper adds the sanitizer flags; extra
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
bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release
while read -r t; do
    cp "$bin_dir/$t" "$OUT/"
    cp "fuzz/dict/$t.dict" "$OUT/$t.dict"
    if [ -d "corpus/$t" ]; then
        zip -jq "$OUT/${t}_seed_corpus.zip" corpus/"$t"/*
    fi
done <<<"$targets"
