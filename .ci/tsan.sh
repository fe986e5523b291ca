#!/usr/bin/env bash
# ThreadSanitizer build; runs the tests that use threads: the concurrency
# test ([concurrency]), the asynchronous append ([async]), the store's racing-writer tests, objects first ([objects]: writers between a turn's chunks and its link) and the codec's
# thread-safety test, and one C handle shared by threads (colikv_c_handles_test). Usage: .ci/tsan.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-tsan}
SAN="-fsanitize=thread -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLIKV_BUILD_FUZZERS=OFF -DCOLIKV_PYTHON=OFF \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="$SAN" -DCMAKE_SHARED_LINKER_FLAGS="$SAN" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target colikv_tests colikv_c_handles_test
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
"$BUILD_DIR"/tests/colikv_tests "[concurrency],[codec],[async],[objects]" --durations yes
"$BUILD_DIR"/tests/colikv_c_handles_test threads "$BUILD_DIR"/tests/c_handles_tsan.db
