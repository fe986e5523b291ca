#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan), writes the seed corpora
# and runs each target for FUZZ_SECONDS (default 60).
# Usage: FUZZ_SECONDS=60 .ci/fuzz.sh [BUILD_DIR]
# A long run: FUZZ_SECONDS=3600 .ci/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-fuzz}
SECS=${FUZZ_SECONDS:-60}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fsanitize=fuzzer-no-link"
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLIKV_BUILD_FUZZERS=ON -DCOLIKV_PYTHON=OFF \
  -DCOLIKV_BUILD_TESTS=OFF -DCOLIKV_BUILD_TOOLS=OFF -DCOLIKV_BUILD_EXAMPLES=OFF \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target colikv_fuzz_coli_kv colikv_fuzz_chunk_decode colikv_fuzz_store colikv_fuzz_seeds
CORPUS="$BUILD_DIR/corpus"
"$BUILD_DIR"/fuzz/colikv_fuzz_seeds "$CORPUS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in coli_kv chunk_decode store; do
  dir=$t
  limits="-rss_limit_mb=2048"
  [ "$t" = chunk_decode ] && dir=chunk
  # A store file may claim anything: no single allocation past 64 MiB.
  [ "$t" = store ] && limits="-rss_limit_mb=2048 -malloc_limit_mb=64"
  echo "fuzz_$t: ${SECS}s"
  rc=0
  # shellcheck disable=SC2086
  "$BUILD_DIR"/fuzz/colikv_fuzz_$t -max_total_time="$SECS" -max_len=65536 $limits \
    -print_final_stats=1 "$CORPUS/$dir" > "$BUILD_DIR/fuzz_$t.log" 2>&1 || rc=$?
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY" "$BUILD_DIR/fuzz_$t.log" || true
  if [ "$rc" -ne 0 ]; then tail -50 "$BUILD_DIR/fuzz_$t.log"; echo "fuzz_$t found a crash (exit $rc)"; exit 1; fi
done
