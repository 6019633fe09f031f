# Shared by the scripts under ci/ and .clusterfuzzlite/: sourced, not run.

# The repository's root.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Pinned versions: the only place they are written. The nightly toolchain
# (the one rustc 1.97.0-nightly e50aa6fba 2026-05-19 came from) and the
# fuzzing tools ci/install-fuzzers.sh installs; cargo-afl and honggfuzz
# match the afl and honggfuzz crates in fuzz/afl/Cargo.lock and
# fuzz/honggfuzz/Cargo.lock.
NIGHTLY_TOOLCHAIN=nightly-2026-05-20
CARGO_FUZZ_VERSION=0.12.0
CARGO_AFL_VERSION=0.18.2
HONGGFUZZ_VERSION=0.5.62

# Every run of libFuzzer gets these: a hang (no input finishes in
# LIBFUZZER_TIMEOUT seconds) and a memory blow-up (more than
# LIBFUZZER_RSS_MB) are findings too, written as timeout-* and oom-*
# artifacts, which `triage` reads like crash-* ones.
LIBFUZZER_TIMEOUT=${LIBFUZZER_TIMEOUT:-25}
LIBFUZZER_RSS_MB=${LIBFUZZER_RSS_MB:-2560}
# How long a hunt's `triage minimize` may take before the hunt gives up on
# its crash (reported as not the finding, saying so): minimising takes
# well under a second when the minimiser is sound.
MINIMIZE_TIMEOUT=${MINIMIZE_TIMEOUT:-120}

# `triage minimize` (TRIAGE ARGS...) for at most MINIMIZE_TIMEOUT seconds:
# exits 124 when it was stopped. In the foreground, so that Ctrl-C on the
# calling script stops it too (triage starts no processes of its own, which
# --foreground would leave running).
minimize_bounded() {
    local triage=$1
    shift
    timeout -k 5 --foreground "$MINIMIZE_TIMEOUT" "$triage" minimize "$@"
}

# How libFuzzer spends its time among the corpus's inputs, and what it
# counts as new. -entropic=0 turns off the entropic schedule (libFuzzer's
# default), which gives each input energy by how much it reveals of rare
# features; -use_counters=0 makes an edge a feature once, however often an
# input runs it (by default each bucket of its hit count, 1, 2, 3, 4-7, ...,
# is a feature of its own). The checks walk pools and tables id by id, so
# their edges' hit counts follow the capacity and the fill: with counters
# on, an input that only walked a longer pool was new, and with entropic on
# also rare, which likely drew the energy that new abstract states should.
# Both off, the corpora reached more states a minute, every bug stayed
# within the detection goals and the slowest were found sooner
# (docs/results/2026-12-04-schedule.md). An empty LIBFUZZER_SCHEDULE runs
# libFuzzer's defaults; until 2026-12-04 it was
# -entropic_scale_per_exec_time=1 (entropic, energy scaled by speed).
read -ra LIBFUZZER_SCHEDULE <<<"${LIBFUZZER_SCHEDULE--entropic=0 -use_counters=0}"

# The flags every libFuzzer run of the scripts gets, besides its dictionary:
# the limits, then the schedule (a comparison that varies the schedule
# passes LIBFUZZER_LIMITS and its own).
LIBFUZZER_LIMITS=(-timeout="$LIBFUZZER_TIMEOUT" -rss_limit_mb="$LIBFUZZER_RSS_MB")
LIBFUZZER_FLAGS=("${LIBFUZZER_LIMITS[@]}" "${LIBFUZZER_SCHEDULE[@]}")

# Mainline kernels come from Debian's trixie-backports suite, reached
# through the same Debian registry as the machine's own suites but with a
# private apt configuration (its own sources list, lists and archives under
# $KERNEL_CACHE/apt), so that the machine's apt setup is never touched.
# Downloads and extracted sources are kept across clones in KERNEL_CACHE.
KERNEL_CACHE=${KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/binder-idpool}
# linux-source-$MAINLINE holds the source; linux-binary-$MAINLINE_ABI-amd64
# and linux-modules-$MAINLINE_ABI-amd64 the kernel image and binder_linux.ko.
MAINLINE=${MAINLINE:-7.3}
MAINLINE_ABI=${MAINLINE_ABI:-7.3.4+deb13}
# The toolchain ci/kernel-rust.sh builds the Rust binder kernel with:
# Debian bookworm's LLVM ($KERNEL_LLVM is the suffix of clang-19,
# ld.lld-19, ...), rustup's Rust toolchain $KERNEL_RUSTC with its rust-src
# component, and bindgen-cli $KERNEL_BINDGEN from crates.io. 7.3's minimums
# (scripts/min-tool-version.sh): LLVM 17.0.1, rustc 1.85.0, bindgen 0.71.1.
KERNEL_LLVM=19
KERNEL_RUSTC=1.95.0
KERNEL_BINDGEN=0.73.2

# apt-get (or apt-cache, with APT=apt-cache) with the private backports
# configuration.
backports_apt() {
    local dir="$KERNEL_CACHE/apt"
    mkdir -p "$dir/lists/partial" "$dir/archives/partial"
    [ -f "$dir/sources.list" ] || printf '%s\n' \
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main" \
        >"$dir/sources.list"
    "${APT:-apt-get}" -o Dir::Etc::sourcelist="$dir/sources.list" -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache::archives="$dir/archives" \
        -o APT::Sandbox::User=root "$@"
}

# Prints the path of PACKAGE's .deb from trixie-backports, downloading it
# (and the package lists) the first time; later calls, from any clone on
# this machine, reuse the download.
backports_deb() {
    local pkg=$1 dir="$KERNEL_CACHE/debs" found
    mkdir -p "$dir"
    found=$(compgen -G "$dir/${pkg}_*.deb" | head -1 || true)
    if [ -z "$found" ]; then
        command -v apt-get >/dev/null || die "no apt-get to fetch $pkg from Debian trixie-backports"
        step "fetching $pkg from Debian trixie-backports (private apt configuration in $KERNEL_CACHE/apt)"
        [ -n "$(ls -A "$KERNEL_CACHE/apt/lists" 2>/dev/null | grep -v partial)" ] ||
            backports_apt -q update >&2 || die "apt-get update of trixie-backports failed"
        (cd "$dir" && backports_apt -q download "$pkg" >&2) ||
            { backports_apt -q update >&2 && (cd "$dir" && backports_apt -q download "$pkg" >&2); } ||
            die "could not download $pkg from trixie-backports"
        found=$(compgen -G "$dir/${pkg}_*.deb" | head -1 || true)
        [ -n "$found" ] || die "apt-get download $pkg left no .deb in $dir"
    fi
    printf '%s\n' "$found"
}

step() { printf '\n==> %s\n' "$*" >&2; }

# `watch_run LABEL LOG CMD...`: runs CMD with its output appended to LOG
# and, every WATCH_EVERY seconds (default 15) until it ends, prints on
# stderr LABEL, the seconds so far and LOG's last line once CMD wrote one
# (a command that writes its own log, e.g. run_libfuzzer, names that log),
# so that no long phase of a script is silent. Returns CMD's status.
WATCH_EVERY=${WATCH_EVERY:-15}
watch_run() {
    local label=$1 log=$2 pid start=$SECONDS next rc=0 last size
    shift 2
    size=$(stat -c %s "$log" 2>/dev/null || echo 0)
    "$@" >> "$log" 2>&1 &
    pid=$!
    next=$((SECONDS + WATCH_EVERY))
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
            last=""
            # The log's last line, if CMD wrote one (a log shared with an
            # earlier step ends with that step's).
            [ "$(stat -c %s "$log" 2>/dev/null || echo 0)" -le "$size" ] ||
                last=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-100 || true)
            printf '  [%s] %s: %ss%s\n' "$(date +%T)" "$label" "$((SECONDS - start))" "${last:+ ($last)}" >&2
            next=$((SECONDS + WATCH_EVERY))
        fi
    done
    wait "$pid" || rc=$?
    return "$rc"
}
die() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; exit 2; }

# Prints the part of the calling script's header comment that is its help:
# from line 2 up to the first line that is not a comment.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# cargo on a toolchain that accepts cargo-fuzz's unstable flags: the pinned
# nightly if rustup has it, else any nightly it has (with a note), else
# stable with RUSTC_BOOTSTRAP=1. An AddressSanitizer build (`--sanitizer
# address` among the arguments) gets ASAN_RUST_FLAGS in RUSTFLAGS.
fuzz_cargo() {
    local tc
    tc=$(fuzz_toolchain)
    if [[ " $* " == *" --sanitizer address "* ]]; then
        local RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }${ASAN_RUST_FLAGS[*]}"
        export RUSTFLAGS
    fi
    case "$tc" in
    "") RUSTC_BOOTSTRAP=1 cargo "$@" ;;
    nightly)
        echo "note: $NIGHTLY_TOOLCHAIN is not installed; using rustup's nightly" >&2
        cargo +nightly "$@" ;;
    *) cargo "+$tc" "$@" ;;
    esac
}

# The rustup toolchain fuzz_cargo builds with: $NIGHTLY_TOOLCHAIN, else
# `nightly`, else nothing (the default toolchain, with RUSTC_BOOTSTRAP=1).
fuzz_toolchain() {
    local have
    have=$(rustup toolchain list 2>/dev/null || true)
    if grep -q "^$NIGHTLY_TOOLCHAIN" <<<"$have"; then
        echo "$NIGHTLY_TOOLCHAIN"
    elif grep -q '^nightly' <<<"$have"; then
        echo nightly
    fi
}

# The path of the LLVM tool $1 (llvm-cov, llvm-profdata) of the toolchain
# fuzz_cargo builds with, whose LLVM wrote the coverage profiles: from its
# rustup component llvm-tools (llvm-tools-preview on older toolchains),
# added when missing. Says why on stderr and fails when it cannot be had.
llvm_tool() {
    local tc sysroot tool
    tc=$(fuzz_toolchain)
    sysroot=$(rustc ${tc:+"+$tc"} --print sysroot 2>/dev/null) || {
        echo "cannot find the sysroot of the ${tc:-default} toolchain (rustc ${tc:+"+$tc "}--print sysroot)" >&2
        return 1
    }
    tool="$sysroot/lib/rustlib/$TARGET_TRIPLE/bin/$1"
    if [ ! -x "$tool" ]; then
        step "adding the llvm-tools component to the ${tc:-default} toolchain (for $1)"
        rustup component add llvm-tools ${tc:+--toolchain "$tc"} >&2 ||
            rustup component add llvm-tools-preview ${tc:+--toolchain "$tc"} >&2 || true
    fi
    [ -x "$tool" ] || {
        echo "no $1 in the ${tc:-default} toolchain: rustup component add llvm-tools-preview${tc:+ --toolchain $tc} failed or shipped none" >&2
        return 1
    }
    printf '%s\n' "$tool"
}

# The flags every libFuzzer build uses. The crates forbid `unsafe`, so
# AddressSanitizer finds nothing that Rust's own checks miss and costs ~10x
# in executions per second: build without it, with debug assertions (the
# table's mismatch check and overflow checks) on. Without compare tracing:
# it instruments every comparison of the naive models and the checks as
# much as the allocator's, cost the targets 2.3x to 3.9x in executions per
# second, and the planted and upstream bugs were found as fast without it,
# within the spread of three seeds (docs/results/, the compare-tracing
# page).
FUZZ_BUILD_FLAGS=(-O --debug-assertions --sanitizer none --no-trace-compares)

# The cargo-fuzz flags for target $1: FUZZ_BUILD_FLAGS, except for a target
# that links C code (the registry's `sanitizer`, e.g. the kernel's
# dbitmap.h), which runs under AddressSanitizer, built into a target
# directory of its own (fuzz/target/asan) so the two builds do not evict
# each other. Without compare tracing there too, and with ASan's checks
# in the C only (ASAN_RUST_FLAGS).
fuzz_flags_for() {
    if [ "$(target_field "$1" sanitizer)" = address ]; then
        echo -O --debug-assertions --sanitizer address --no-trace-compares --target-dir target/asan
    else
        echo "${FUZZ_BUILD_FLAGS[@]}"
    fi
}

# What an AddressSanitizer build adds to RUSTFLAGS (fuzz_cargo): LLVM's
# ASan pass leaves the Rust code's loads, stores, stack and globals alone.
# The runtime stays (its allocator: the C's double and invalid frees,
# use after free), and the C, compiled by clang with -fsanitize=address
# (kernel-dbitmap/build.rs), keeps every check. The Rust crates forbid
# `unsafe` but for the FFI crate, whose reads of a C map are checked
# against the length the shim allocated (KernelDBitmap::map_len), in
# every build. Instrumented, the Rust code and compare tracing took most
# of kernel_dbitmap's time for nothing Rust's own checks miss
# (docs/results/2026-12-04-asan.md).
ASAN_RUST_FLAGS=(
    -Cllvm-args=-asan-instrument-reads=0
    -Cllvm-args=-asan-instrument-writes=0
    -Cllvm-args=-asan-instrument-atomics=0
    -Cllvm-args=-asan-stack=0
    -Cllvm-args=-asan-use-after-return=never
    -Cllvm-args=-asan-globals=0
)

# Builds the libFuzzer binaries of tree $1 (`fuzz_build TREE [TARGET...]`,
# default every target): those with FUZZ_BUILD_FLAGS together, any target
# with other flags (AddressSanitizer for one linking C code) on its own,
# so that a run spends its time fuzzing, not building. Output to stderr.
fuzz_build() {
    local tree=$1 t plain=() flags
    shift
    [ $# -gt 0 ] || set -- $(targets --engine libfuzzer)
    for t in "$@"; do
        read -ra flags <<<"$(fuzz_flags_for "$t")"
        if [ "${flags[*]}" = "${FUZZ_BUILD_FLAGS[*]}" ]; then
            plain+=("$t")
        else
            (cd "$tree/fuzz" && fuzz_cargo fuzz build "${flags[@]}" "$t") >&2 || return
        fi
    done
    # cargo-fuzz builds one target or all of them: one call per target
    # (they share everything but the last link).
    for t in "${plain[@]}"; do
        (cd "$tree/fuzz" && fuzz_cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}" "$t") >&2 || return
    done
}

# The fuzz targets, from the registry (harness/src/registry.rs), one per
# line; extra arguments go to the `targets` binary (--engine E, --corpus,
# --all). A target whose needs are not met is left out with a one-line
# reason on stderr.
targets() {
    (cd "$ROOT" && cargo run -q --release -p idpool-harness --bin targets -- "$@")
}

# jq, to read the tools' --json output (the `targets` binary, `triage`):
# the scripts read fields, never prose. Installed from Debian when missing
# (as root).
need_jq() {
    command -v jq >/dev/null && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        step "installing jq (the scripts read the tools' --json output)"
        apt-get install -y -qq jq >&2 || { apt-get update -qq && apt-get install -y -qq jq >&2; }
    fi
    command -v jq >/dev/null || die "needs jq (apt-get install jq)"
}

# Reads the registry once (`targets --json --all`) into TARGETS_JSON,
# which target_field then reads (a script calls it before its loops).
read_registry() {
    need_jq
    TARGETS_JSON=$(targets --json --all)
}

# Field $2 of target $1 in the registry, e.g. `target_field
# concurrent_resize hunt_max_len`; empty for an unknown target.
target_field() {
    [ -n "${TARGETS_JSON:-}" ] || read_registry
    jq -r --arg t "$1" --arg f "$2" '.[] | select(.name == $t) | .[$f] // empty' <<<"$TARGETS_JSON"
}

# The triage tool, built in release once per script; prints its path.
triage_bin() {
    [ -n "${TRIAGE_BIN:-}" ] || TRIAGE_BIN=$(tree_triage "$ROOT")
    printf '%s\n' "$TRIAGE_BIN"
}

# The triage tool of the tree $1 (a planted copy, another revision's
# worktree), built in release into CARGO_TARGET_DIR (default TREE/target)
# every time it is asked for; prints its path. Fails, printing nothing,
# when it does not build (a caller's $(...) runs without set -e).
tree_triage() {
    (cd "$1" && cargo build -q --release -p triage) >&2 || return
    printf '%s\n' "${CARGO_TARGET_DIR:-$1/target}/release/triage"
}

# Checks that every name in "$@" is a target the registry lists for the
# engine in $engine_filter (a `targets` argument list, possibly empty).
check_targets() {
    local known t
    known=$(targets "${engine_filter[@]}" 2>/dev/null)
    for t in "$@"; do
        grep -qx -- "$t" <<<"$known" || die "unknown or unavailable target '$t' (known: $(echo $known))"
    done
}

# Runs libFuzzer on one target, the same way everywhere:
#   run_libfuzzer DIR TARGET ARTIFACTS LOG CORPUS... [-- EXTRA LIBFUZZER FLAGS]
# from the cargo-fuzz package in DIR/fuzz, with the target's dictionary,
# LIBFUZZER_FLAGS, final stats, and artifacts (crash-*, timeout-*, oom-*)
# under ARTIFACTS/. Returns libFuzzer's status (nonzero on a finding).
run_libfuzzer() {
    local tree=$1 t=$2 artifacts=$3 log=$4
    shift 4
    local corpora=() extra=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do corpora+=("$1"); shift; done
    [ $# -gt 0 ] && shift && extra=("$@")
    mkdir -p "$artifacts"
    local flags
    read -ra flags <<<"$(fuzz_flags_for "$t")"
    (cd "$tree/fuzz" && fuzz_cargo fuzz run "${flags[@]}" "$t" "${corpora[@]}" -- \
        -dict="$tree/fuzz/dict/$t.dict" "${LIBFUZZER_FLAGS[@]}" \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}") > "$log" 2>&1
}

# Brings a committed corpus up to date with a merge, changing only what
# must change: `sync_corpus CORPUS MERGED CAP GONE` makes the directory
# CORPUS hold the files of the directory MERGED (a scratch copy, changed
# too), at most CAP of them (none cut when CAP is empty). A file CORPUS
# holds already is left alone (name, bytes and time); a file of MERGED that
# CORPUS lacks is copied in; a file of CORPUS that MERGED lacks is removed.
# First MERGED loses its duplicates (a file with the same bytes as another:
# CORPUS's file is kept, else the first by name) and then, beyond CAP, the
# largest of the files CORPUS lacks, and only then the largest of its own.
# Prints one line a change, tab-separated, sorted: `added NAME`, `removed
# NAME WHY` (GONE for a file MERGED lacked, else the duplicate or the cap)
# and `not-added NAME WHY` for a new file the cap left out.
sync_corpus() {
    local corpus=$1 merged=$2 cap=$3 gone=$4 name sum n cut
    local -A why=() seen=() old=()
    while IFS= read -r name; do old[$name]=1; done < <(find "$corpus" -maxdepth 1 -type f -printf '%f\n')
    # Duplicates: CORPUS's own files first, each class by name.
    while IFS=$'\t' read -r _ name sum; do
        if [ -n "${seen[$sum]:-}" ]; then
            why[$name]="duplicate of ${seen[$sum]} (the same bytes)"
            rm -f "$merged/$name"
        else
            seen[$sum]=$name
        fi
    done < <(find "$merged" -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort | while IFS= read -r name; do
        printf '%s\t%s\t%s\n' "$([ -e "$corpus/$name" ] && echo 0 || echo 1)" "$name" \
            "$(sha1sum < "$merged/$name" | cut -d' ' -f1)"
    done | LC_ALL=C sort -t$'\t' -k1,1 -k2,2)
    # The cap: new files go first, the largest first (ties: the last by name).
    n=$(find "$merged" -maxdepth 1 -type f | wc -l)
    if [ -n "$cap" ] && [ "$n" -gt "$cap" ]; then
        cut=$((n - cap))
        while IFS=$'\t' read -r _ _ name && [ "$cut" -gt 0 ]; do
            why[$name]="over the cap of $cap files (the smallest kept)"
            rm -f "$merged/$name"
            cut=$((cut - 1))
        done < <(find "$merged" -maxdepth 1 -type f -printf '%s\t%f\n' | while IFS=$'\t' read -r sum name; do
            printf '%s\t%s\t%s\n' "$([ -e "$corpus/$name" ] && echo 0 || echo 1)" "$sum" "$name"
        done | LC_ALL=C sort -t$'\t' -k1,1r -k2,2nr -k3,3r)
    fi
    {
        for name in "${!old[@]}"; do
            [ ! -e "$merged/$name" ] || continue
            rm -f "$corpus/$name"
            printf 'removed\t%s\t%s\n' "$name" "${why[$name]:-$gone}"
        done
        while IFS= read -r name; do
            [ -z "${old[$name]:-}" ] || continue
            cp -p "$merged/$name" "$corpus/$name"
            printf 'added\t%s\n' "$name"
        done < <(find "$merged" -maxdepth 1 -type f -printf '%f\n')
        for name in "${!why[@]}"; do
            [ -n "${old[$name]:-}" ] || [[ "${why[$name]}" != over* ]] || printf 'not-added\t%s\t%s\n' "$name" "${why[$name]}"
        done
    } | LC_ALL=C sort
}

# Caps a directory of inputs: `keep_smallest DIR CAP` deletes all but the
# CAP smallest files directly in DIR (ties by name), as libFuzzer prefers
# the smaller of two inputs that add the same. Prints how many files DIR
# held before when it cut any, nothing otherwise; an empty CAP cuts none.
keep_smallest() {
    local dir=$1 cap=$2 n
    n=$(find "$dir" -maxdepth 1 -type f | wc -l)
    [ -n "$cap" ] && [ "$n" -gt "$cap" ] || return 0
    find "$dir" -maxdepth 1 -type f -printf '%s %p\n' | LC_ALL=C sort -k1,1n -k2 |
        tail -n +"$((cap + 1))" | cut -d' ' -f2- | xargs -r -d '\n' rm -f
    echo "$n"
}

# The host's target triple, under which cargo-fuzz puts its binaries: a
# tree's libFuzzer binary of target T is $(fuzz_bin TREE)/T (`fuzz_bin TREE
# DIR` for a build made with --target-dir DIR).
TARGET_TRIPLE=${TARGET_TRIPLE:-$(rustc -vV | sed -n 's/^host: //p')}
fuzz_bin() { printf '%s\n' "${2:-$1/fuzz/target}/$TARGET_TRIPLE/release"; }

# The directory of tree $1's libFuzzer binary of target $2 as fuzz_flags_for
# builds it: fuzz_bin, under the target directory its flags name, if any.
fuzz_bin_of() {
    local flags i dir=
    read -ra flags <<<"$(fuzz_flags_for "$2")"
    for i in "${!flags[@]}"; do
        [ "${flags[$i]}" != --target-dir ] || dir=$1/fuzz/${flags[$((i + 1))]:?--target-dir without a directory}
    done
    fuzz_bin "$1" "$dir"
}

# Runs AFL++ on one target, the same way everywhere:
#   run_afl TREE TARGET IN OUT SECONDS
# with its dictionary, starting from the inputs in IN, findings under OUT,
# the log in OUT.log. AFL++ exits 0 after a crash: look in
# OUT/default/crashes/; its stats are in OUT/default/fuzzer_stats.
run_afl() {
    local tree=$1 t=$2 in=$3 out=$4 seconds=$5 dict=()
    [ ! -f "$tree/fuzz/dict/$t.dict" ] || dict=(-x "$tree/fuzz/dict/$t.dict")
    (cd "$tree/fuzz/afl" && AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
        AFL_NO_AFFINITY=1 AFL_FAST_CAL=1 \
        cargo afl fuzz -i "$in" -o "$out" "${dict[@]}" -V "$seconds" -t 5000 \
        "target/release/$t") > "$out.log" 2>&1
}

# Runs honggfuzz on one target, the same way everywhere:
#   run_honggfuzz TREE TARGET IN WORKSPACE SECONDS [EXTRA HFUZZ_RUN_ARGS]
# with its dictionary, from the inputs in IN, its workspace (crashes as
# *.fuzz) in WORKSPACE, the log in WORKSPACE.log. honggfuzz sets
# MALLOC_PERTURB_ unless it is set: glibc then fills every allocation, and
# a 2^30-id pool costs 128 MiB of writes; it is set to 0.
run_honggfuzz() {
    local tree=$1 t=$2 in=$3 ws=$4 seconds=$5 dict=""
    shift 5
    [ ! -f "$tree/fuzz/dict/$t.dict" ] || dict="--dict $tree/fuzz/dict/$t.dict"
    (cd "$tree/fuzz/honggfuzz" && HFUZZ_WORKSPACE="$ws" MALLOC_PERTURB_=0 \
        HFUZZ_RUN_ARGS="--run_time $seconds -n 1 -i $in $dict -v $*" \
        cargo hfuzz run "$t") > "$ws.log" 2>&1
}

# A hunt, as ci/history.sh and ci/mutants/run.sh run one:
#   hunt TREE TARGET DIR SEED BUDGET [EXTRA LIBFUZZER FLAGS]
# libFuzzer on TARGET of TREE, from an empty corpus (DIR/corpus), with
# -seed=SEED for at most BUDGET seconds, artifacts and log (DIR/log) under
# DIR. From an empty corpus libFuzzer's length control would keep inputs at
# a few bytes for minutes, shorter than a header and the operations that
# show a bug, so the hunt allows inputs of up to the registry's
# `hunt_max_len` for the target from the start (-len_control=0): 256
# bytes, or fewer for a target whose long inputs are slow. Returns
# libFuzzer's status (nonzero on a finding).
hunt() {
    local tree=$1 t=$2 dir=$3 seed=$4 budget=$5
    shift 5
    hunt_flags "$t"
    mkdir -p "$dir/corpus"
    run_libfuzzer "$tree" "$t" "$dir" "$dir/log" "$dir/corpus" -- \
        -seed="$seed" -max_total_time="$budget" "${HUNT_FLAGS[@]}" "$@"
}

# Sets HUNT_FLAGS to the length flags of a hunt on target $1, as above:
# -len_control=0 -max_len=N, N its hunt_max_len. Dies on a target the
# registry lacks.
hunt_flags() {
    local max_len
    max_len=$(target_field "$1" hunt_max_len)
    [ -n "$max_len" ] || die "no target '$1' in the registry"
    HUNT_FLAGS=(-len_control=0 -max_len="$max_len")
}

# The seconds since $1 (a `date +%s.%N`), to a tenth.
seconds_since() {
    awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'
}

# The executions libFuzzer made in the run whose log is $1 (its final
# stats, printed at a crash too); empty when it printed none.
hunt_execs() {
    sed -n 's/^stat::number_of_executed_units: *//p' "$1" 2>/dev/null | tail -n 1
}

# A planted bug's hunt, as ci/mutants/run.sh and ci/detect.sh run one:
#   hunt_planted TREE TARGET DIR SEED BUDGET
# `hunt`, with the failure a check raises written as JSON to
# DIR/failure.json; prints "SECONDS OUTCOME", the outcome being what
# libFuzzer left (`left_behind`, its spaces as underscores: caught,
# timeout, crash,_not_a_check, ...; `none` for nothing).
hunt_planted() {
    local tree=$1 t=$2 dir=$3 seed=$4 budget=$5 start outcome
    rm -rf "$dir" && mkdir -p "$dir"
    start=$(date +%s.%N)
    IDPOOL_FAILURE_JSON="$dir/failure.json" hunt "$tree" "$t" "$dir" "$seed" "$budget" || true
    outcome=$(left_behind "$dir")
    printf '%s %s\n' "$(seconds_since "$start")" "$(tr ' ' _ <<<"${outcome:-none}")"
}

# What libFuzzer left in an artifact directory ($1): caught (a crash-* and
# the failure's JSON a check wrote), "crash, not a check", timeout, oom,
# leak, "slow unit"; nothing when it is empty. Never fails.
left_behind() {
    local dir=$1
    if compgen -G "$dir/crash-*" > /dev/null; then
        [ -s "$dir/failure.json" ] && echo caught || echo "crash, not a check"
    elif compgen -G "$dir/timeout-*" > /dev/null; then echo timeout
    elif compgen -G "$dir/oom-*" > /dev/null; then echo oom
    elif compgen -G "$dir/leak-*" > /dev/null; then echo leak
    elif compgen -G "$dir/slow-unit-*" > /dev/null; then echo "slow unit"
    fi
}

# What the harness said first in the artifact directory $1: the first line
# of the failure's message (its JSON), or else the artifact libFuzzer left
# (a timeout, an out-of-memory, a crash from no check), cut to 160
# characters, `|` escaped for a table. Never fails.
first_message() {
    local dir=$1 said=""
    [ ! -s "$dir/failure.json" ] || said=$(jq -r '.message' "$dir/failure.json" | head -n 1)
    [ -n "$said" ] || said="libFuzzer left $(cd "$dir" && ls -d crash-* timeout-* oom-* leak-* slow-unit-* 2>/dev/null | head -n 1)"
    printf '%s' "$said" | cut -c1-160 | sed 's/|/\\|/g'
}

# A historical finding's hunt, as ci/history.sh and ci/detect.sh run one:
#   hunt_finding TREE TRIAGE FINDING TARGET DIR SEED BUDGET [MAINLINE]
# `hunt` on the unplanted TREE with IDPOOL_HISTORY set to FINDING alone
# (the other known findings end their runs quietly; anything else
# crashes). Prints "SECONDS OPS BY SIGNATURE" when the run found it,
# minimised by TRIAGE (TREE's triage tool) into DIR/min.trace, BY being
# `check` (a check of the harness) or `asan:<what AddressSanitizer
# reported>` with `_` for spaces; "inf" when it found nothing, "notit
# SIGNATURE" when it crashed with something that is not the finding,
# "slowmin" when minimising its crash outlasted MINIMIZE_TIMEOUT. A
# memory-safety finding (`--json`: `memory_safety`) of a target built with
# AddressSanitizer counts only when ASan reported it in the run's log. The finding is what `history::Finding::of` tells the
# minimised failure to be (`triage minimize --json`: its `finding`), on a
# historical version: a mainline side's failure names no version (e.g.
# `dbitmap: kernel crash`) and is a finding of its own. A finding of
# mainline itself (a difference between its two drivers, MAINLINE `true`,
# as `targets --findings --json` lists it) names no version by nature.
hunt_finding() {
    local tree=$1 triage=$2 finding=$3 t=$4 dir=$5 seed=$6 budget=$7 mainline=${8:-false} start seconds art min asan by
    rm -rf "$dir" && mkdir -p "$dir"
    start=$(date +%s.%N)
    IDPOOL_HISTORY=$finding hunt "$tree" "$t" "$dir" "$seed" "$budget" || true
    seconds=$(seconds_since "$start")
    art=$(find "$dir" -maxdepth 1 -name 'crash-*' | head -n 1)
    if [ -z "$art" ]; then
        echo inf
        return
    fi
    # A minimiser that never ends must not stall a whole benchmark or CI.
    # IDPOOL_HISTORY as in the hunt: a run that met another known finding
    # first is the hunted one's (binder_commands keeps the one asked for).
    min=$(IDPOOL_HISTORY=$finding minimize_bounded "$triage" --json "$art" -o "$dir/min.trace" 2>"$dir/minimize.log") || {
        [ $? -ne 124 ] || { echo "slowmin"; return; }
        min='{}'
    }
    if [ "$(jq -r '.finding // ""' <<<"$min")" != "$finding" ] ||
        { [ "$mainline" = false ] &&
            ! jq -r '.signature // ""' <<<"$min" | grep -qE -- '(c-2024-06|c-v3|rust-v1)'; }; then
        echo "notit $(jq -r '.signature // "?"' <<<"$min")"
        return
    fi
    # What AddressSanitizer reported, e.g. "attempting double-free".
    asan=$(sed -n 's/.*ERROR: AddressSanitizer: \([a-z-]*\( [a-z-]*\)\{0,1\}\).*/\1/p' "$dir/log" | head -n 1)
    if [ "$(jq -r '.memory_safety // false' <<<"$min")" = true ] &&
        [ "$(target_field "$t" sanitizer)" = address ] && [ -z "$asan" ]; then
        echo "notit $(jq -r '.signature // "?"' <<<"$min") (AddressSanitizer reported nothing)"
        return
    fi
    by=check
    [ -z "$asan" ] || by="asan:${asan// /_}"
    printf '%s %s %s %s\n' "$seconds" "$(jq -r .operations <<<"$min")" "$by" "$(jq -r .signature <<<"$min")"
}

# For scripts that build other trees (a baseline's worktree, planted
# copies): the kernel sources this tree fetched (ci/kernel-source.sh:
# .cache/kernel/ for the 6.12 header, .cache/kernel-<release>/ for
# mainline's header and its Rust `IdPool`) serve them too:
# `share_kernel_cache TREE` links each one TREE lacks into TREE/.cache/.
# (Not through KERNEL_TREE: that names one whole kernel tree, and the 6.12
# cache holds the header alone, so kernel_idpool would be unavailable.)
# A link is made or renewed where TREE has none, a link, or the empty
# directory its build scripts create; a cache TREE filled itself is kept.
# The other tree's build scripts check these files against their own
# pinned hashes: a tree older than a kernel package update this tree
# fetched fails to build with them.
share_kernel_cache() {
    local dir name at
    for dir in "$ROOT"/.cache/kernel "$ROOT"/.cache/kernel-*; do
        [ -d "$dir" ] || continue
        name=$(basename "$dir")
        at="$1/.cache/$name"
        if [ -d "$at" ] && [ ! -L "$at" ]; then
            rmdir "$at" 2>/dev/null || continue
        fi
        mkdir -p "$1/.cache" && ln -sfn "$(readlink -f "$dir")" "$at"
    done
}

# `baseline_worktree REV WORK`: prints the path of a detached worktree of
# revision REV under WORK (baseline-<12 hex>), checked out once and reused,
# with this tree's kernel caches (share_kernel_cache).
baseline_worktree() {
    local rev base
    rev=$(git -C "$ROOT" rev-parse --verify --quiet "$1^{commit}") || die "--baseline: no such revision '$1'"
    base="$2/baseline-${rev:0:12}"
    if [ ! -d "$base" ]; then
        step "checking out $1 (${rev:0:12}) in $base"
        git -C "$ROOT" worktree add --detach -f "$base" "$rev" >/dev/null
    fi
    share_kernel_cache "$base"
    echo "$base"
}

# The median of the numbers on stdin, one a line: the middle one of an odd
# count, the mean of the two middle ones of an even count (rounded to one
# decimal); `?` when there is none.
median() {
    sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "?"; else if (NR % 2) print v[(NR + 1) / 2];
              else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Where the scripts that measure write their result pages: docs/results/
# (RESULTS to write elsewhere), named after the day and what was measured.
# `result_page KIND` prints the path of the day's page of that kind, e.g.
# docs/results/2026-12-07-campaign.md: a second run the same day rewrites
# it (git keeps the first), so that a kind has one page a day.
RESULTS=${RESULTS:-$ROOT/docs/results}
result_page() {
    local page
    mkdir -p "$RESULTS"
    page="$RESULTS/$(date -u +%Y-%m-%d)-$1.md"
    : > "$page"
    results_index
    printf '%s\n' "$page"
}

# Rewrites $RESULTS/README.md: first what holds now, one row per claim of
# $RESULTS/holds.tsv (claim, figure and page, tab-separated; the date is
# read from the page's head), then the pages by kind, the newest first (a
# page is <date>-<kind>[-<n>].md).
results_index() {
    local page name kind kinds claim figure date
    {
        echo "# Results"
        echo
        echo "Every measurement of the project, dated and naming the command that"
        echo "produced it and the tree it ran on. The scripts that measure write"
        echo "them (\`ci/lib.sh\`: \`result_page\`; which script writes which kind:"
        echo "[the campaign page](../campaign.md#the-scripts-that-measure)) and keep"
        echo "this index. A kind has one current page: a script's second run of a"
        echo "day rewrites the day's page, and when a newer page replaces an older"
        echo "one, the older one is removed and its key figure folded into the"
        echo "newer one's table of earlier pages (git keeps each whole)."
        if [ -f "$RESULTS/holds.tsv" ]; then
            echo
            echo "## What holds now"
            echo
            echo "One row per claim the README, the docs or a finding makes, with the"
            echo "figure and the page that measured it (\`holds.tsv\`, the row's date"
            echo "read from the page)."
            echo
            echo "| claim | figure | date | page |"
            echo "| --- | --- | --- | --- |"
            while IFS=$'\t' read -r claim figure page; do
                [ -n "$claim" ] || continue
                date=$(sed -n 's/^- date: //p' "$RESULTS/$page" 2>/dev/null | head -n 1)
                echo "| $claim | $figure | ${date:-missing} | [${page%.md}]($page) |"
            done < "$RESULTS/holds.tsv"
        fi
        echo
        echo "## Pages by kind"
        echo
        echo "| kind | current page | other pages, newest first |"
        echo "| --- | --- | --- |"
        kinds=$(find "$RESULTS" -maxdepth 1 -name '20??-??-??-*.md' -printf '%f\n' |
            sed -E 's/^[0-9-]{11}//; s/(-[0-9]+)?\.md$//' | sort -u)
        for kind in $kinds; do
            printf '| %s |' "$kind"
            # Newest first: by date, then by the day's run (no number is the first).
            find "$RESULTS" -maxdepth 1 -printf '%f\n' | grep -E "^[0-9-]{11}$kind(-[0-9]+)?\.md$" |
                sed -E 's/^(.{10})-.*-([0-9]+)\.md$/\1 \2 &/; t; s/^(.{10}).*$/\1 1 &/' |
                sort -k1,1r -k2,2nr | cut -d' ' -f3 | {
                    n=0
                    while read -r page; do
                        name=${page%.md}
                        printf ' [%s](%s)' "${name%%-"$kind"*}${name##*-"$kind"}" "$page"
                        n=$((n + 1))
                        [ "$n" -ne 1 ] || printf ' |'
                    done
                    [ "$n" -ne 1 ] || printf ' '
                }
            echo " |"
        done
    } > "$RESULTS/README.md"
}

# The tree as it is now: the commit, and "(with uncommitted changes)" when
# it has any (the result pages being written, docs/results/, do not
# count). A script that changes the tree itself (ci/campaign.sh merges
# into corpus/) sets TREE_AT_START to this when it starts, for page_head.
tree_state() {
    local rev dirty=""
    rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
    [ -z "$(git -C "$ROOT" status --porcelain -- . ':!docs/results' 2>/dev/null)" ] ||
        dirty=" (with uncommitted changes)"
    printf '%s%s\n' "$rev" "$dirty"
}

# The head of a result page: `page_head TITLE COMMAND...` prints the
# title, the date, the command that measured (as run, from the root), the
# commit measured (with uncommitted changes, if any), the machine, and
# PAGE_NOTE when set (a line of the script's own).
page_head() {
    local title=$1
    shift
    printf '# %s\n\n' "$title"
    printf -- '- date: %s\n' "$(date -u +%Y-%m-%d)"
    local arg shown=() q="'"
    for arg in "$@"; do # as it would be typed: single-quoted unless plain
        if [[ "$arg" =~ ^[A-Za-z0-9_./,:=+@%-]+$ ]]; then
            shown+=("$arg")
        else
            shown+=("$q${arg//$q/$q\\$q$q}$q")
        fi
    done
    printf -- '- command: `%s`\n' "${shown[*]}"
    printf -- '- tree: %s\n' "${TREE_AT_START:-$(tree_state)}"
    printf -- '- machine: %s cores, %s\n' "$(nproc)" "$(uname -sr)"
    [ -z "${PAGE_NOTE:-}" ] || printf -- '- %s\n' "$PAGE_NOTE"
    echo
}

# Plants a bug: `plant SPEC TREE` applies a ci/mutants/*.mutant spec;
# `plant --targets SPEC` prints its targets (see harness/src/mutant.rs).
plant() {
    (cd "$ROOT" && cargo run -q --release -p idpool-harness --bin plant -- "$@")
}

# Copies the tree FROM (default the repository's root) into DIR and plants
# the bug of SPEC there: `plant_tree SPEC DIR [FROM]`. Fails when the spec
# does not apply.
plant_tree() {
    copy_tree "$2" "${3:-$ROOT}"
    plant "$1" "$2"
}

# The planted-bug scripts' scratch directory (artifacts, trees, reports).
MUTANTS_WORK=${MUTANTS_WORK:-${TMPDIR:-/tmp}/idpool-mutants}

# Sets the array `specs` to the planted-bug specs in "$@", or to every
# ci/mutants/*.mutant when there is none.
mutant_specs() {
    specs=("$@")
    [ ${#specs[@]} -gt 0 ] || specs=("$ROOT"/ci/mutants/*.mutant)
}

# Copies the working tree as it is (committed or not), without build
# output (any `target/`, honggfuzz's `hfuzz_target/` and
# `hfuzz_workspace/`), into the directory $1 (emptied first): `copy_tree
# DIR [FROM]` copies the tree FROM instead (default the repository's root,
# e.g. another revision's worktree).
#
# tar keeps each file's mtime, and cargo decides what to rebuild by
# mtimes: a file the previous copy changed (a planted bug) comes back
# older than the build made with the change, so a target directory shared
# between copies would keep that build for any crate this copy does not
# change itself. Such files, written after the last copy (`.copied`, set a
# second early: a file written in the same clock tick would not be newer)
# and differing from the tree, are touched after the copy; a file touched
# that way is not changed and is not touched again by the next copy.
copy_tree() {
    local changed=() f from=${2:-$ROOT}
    if [ -e "$1/.copied" ]; then
        mapfile -t changed < <(cd "$1" && find . -type f -newer .copied \
            -exec sh -c '! cmp -s "$1" "$2/$1"' _ {} "$from" \; -print)
    fi
    rm -rf "$1" && mkdir -p "$1"
    (cd "$from" && tar --exclude=target --exclude=hfuzz_target --exclude=hfuzz_workspace \
        --exclude=./.git --exclude=./fuzz/artifacts --exclude=./fuzz/corpus -cf - .) |
        tar -xf - -C "$1"
    touch -d '1 second ago' "$1/.copied"
    for f in "${changed[@]}"; do
        if [ -e "$1/$f" ]; then touch "$1/$f"; fi
    done
}
