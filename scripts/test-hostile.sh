#!/usr/bin/env bash
# Hostile input: the whole test suite under AddressSanitizer + UBSan, and the libFuzzer targets
# replayed over their committed corpora (or one target fuzzed for a while, to grow its corpus).
#
# usage: scripts/test-hostile.sh [all]          sanitizer suite, then fuzz replay (CI)
#        scripts/test-hostile.sh asan           the sanitizer suite only
#        scripts/test-hostile.sh replay         the fuzz replay only
#        scripts/test-hostile.sh fuzz NAME SECONDS
#            fuzz one target (tests/fuzz/NAME_fuzzer.cpp) under nice, then merge what it found
#            into tests/fuzz/NAME/corpus and copy crashing inputs to tests/fuzz/NAME/crashes
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-$(nproc)}
mode=${1:-all}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The encode and decode targets load the Qwen tokenizer from here.
export FORNACE_TOKENIZER_DIR=${FORNACE_TOKENIZER_DIR:-$root/models}

# ccache, when installed, with paths hashed relative to the clone (a fresh clone hits the cache).
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
launchers=()
if command -v ccache >/dev/null; then
  launchers=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

fuzz_targets() {
  for source in tests/fuzz/*_fuzzer.cpp; do
    basename "$source" _fuzzer.cpp
  done
}

# One clang build (build-hostile) serves both: the suite under the sanitizers, and the fuzz
# targets, whose coverage instrumentation covers the parsers only.
configure_hostile() {
  cmake -S . -B build-hostile -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DFORNACE_FUZZ=ON -DFORNACE_SANITIZE=ON -DFORNACE_MICROBENCH=OFF "${launchers[@]}" >/dev/null
}

build_asan() {
  configure_hostile
  cmake --build build-hostile -j "$jobs"
}

run_asan_suite() {
  build_asan
  bash scripts/get-test-packages.sh
  # The soak test under the sanitizers: shorter, and without its resident-memory check
  # (AddressSanitizer's quarantine keeps freed memory resident by design).
  (cd build-hostile && FORNACE_SANITIZED=1 FORNACE_SOAK_SECONDS=${FORNACE_SOAK_SECONDS:-30} \
    ctest --output-on-failure -j "$jobs")
}

build_fuzzers() {
  configure_hostile
  cmake --build build-hostile --target fuzzers -j "$jobs"
}

# Runs every committed input (corpus and past crashes) through its target once.
replay_corpora() {
  build_fuzzers
  [ -f "$FORNACE_TOKENIZER_DIR/tokenizer.json" ] || bash scripts/get-tokenizer.sh
  for name in $(fuzz_targets); do
    directories=()
    for kind in corpus crashes; do
      [ -d "tests/fuzz/$name/$kind" ] && directories+=("tests/fuzz/$name/$kind")
    done
    if [ ${#directories[@]} -eq 0 ]; then
      echo "replay: fuzz_$name has no corpus yet" >&2
      exit 1
    fi
    count=$(find "${directories[@]}" -type f | wc -l)
    echo "replay: fuzz_$name over $count inputs"
    # -runs=0 executes the given inputs and nothing else; a crash fails this script.
    "build-hostile/bin/fuzz_$name" "${directories[@]}" -runs=0 2>"build-hostile/replay-$name.log" || {
      tail -n 40 "build-hostile/replay-$name.log"
      echo "replay: fuzz_$name failed (log: build-hostile/replay-$name.log)" >&2
      exit 1
    }
  done
  echo "replay: all fuzz corpora pass"
}

# Fuzzes one target for `seconds`, one job, under nice; new inputs are merged (minimized) into
# the committed corpus and inputs that crashed are kept under crashes/.
fuzz_one() {
  local name=$1 seconds=$2
  build_fuzzers
  local work="build-hostile/work/$name"
  mkdir -p "$work/corpus" "$work/artifacts" "tests/fuzz/$name/corpus" "tests/fuzz/$name/crashes"
  local dictionary=()
  [ -f "tests/fuzz/$name.dict" ] && dictionary=("-dict=$root/tests/fuzz/$name.dict")
  # Fork mode keeps fuzzing past a crash; its per-job logs go to the work directory.
  (cd "$work" && nice -n 10 "$root/build-hostile/bin/fuzz_$name" corpus "$root/tests/fuzz/$name/corpus" \
    "${dictionary[@]}" -max_total_time="$seconds" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 \
    -ignore_ooms=1 -timeout=20 -artifact_prefix=artifacts/ >fuzz.log 2>&1) || true
  grep -E "^#[0-9]+: cov" "$work/fuzz.log" | tail -n 1 || true
  local merged="$work/merged"
  # A minimized merge on coverage features; when that keeps more than 300 files, a merge on edge
  # coverage only (no hit counters), so the committed corpus stays at a few hundred files.
  for counters in 1 0; do
    rm -rf "$merged" && mkdir -p "$merged"
    nice -n 10 "build-hostile/bin/fuzz_$name" -merge=1 -use_counters=$counters "$merged" \
      "tests/fuzz/$name/corpus" "$work/corpus" >"$work/merge.log" 2>&1
    [ "$(ls "$merged" | wc -l)" -le 300 ] && break
  done
  rm -rf "tests/fuzz/$name/corpus" && mv "$merged" "tests/fuzz/$name/corpus"
  # Crashes, leaks, timeouts and out-of-memory inputs; not "slow-unit" reports.
  find "$work/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) -exec cp {} "tests/fuzz/$name/crashes/" \;
  echo "fuzz: $name corpus $(ls "tests/fuzz/$name/corpus" | wc -l) files," \
    "$(du -sh "tests/fuzz/$name/corpus" | cut -f1); crashes $(ls "tests/fuzz/$name/crashes" | wc -l)"
}

case "$mode" in
  all)
    run_asan_suite
    replay_corpora
    ;;
  asan) run_asan_suite ;;
  replay) replay_corpora ;;
  fuzz) fuzz_one "${2:?target name}" "${3:?seconds}" ;;
  *)
    echo "usage: $0 [all|asan|replay|fuzz NAME SECONDS]" >&2
    exit 2
    ;;
esac
