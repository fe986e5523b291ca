#!/usr/bin/env bash
# ASan + UBSan build of the library, the tools and the tests, then the whole
# test suite under it (clang), its postgres: variants on a throwaway server
# (tools/postgres.sh) too. Usage: .ci/sanitizers.sh [BUILD_DIR]
# Needs: clang (Debian: clang, libclang-rt-14-dev). About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-asan}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# No Python module (-DCOLIKV_PYTHON=OFF): an instrumented extension would need
# the sanitizer runtime preloaded into an uninstrumented interpreter; the
# plain and shared builds run the Python suite.
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLIKV_BUILD_FUZZERS=OFF -DCOLIKV_PYTHON=OFF \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="$SAN" -DCMAKE_SHARED_LINKER_FLAGS="$SAN" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The server the postgres: tests run on (they must run, not be skipped),
# stopped and removed however the suite ends.
PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/colikv-pg.XXXXXX")
trap 'tools/postgres.sh stop "$PG_DIR" || true' EXIT
COLIKV_TEST_PG_URI=$(tools/postgres.sh start "$PG_DIR")
export COLIKV_TEST_PG_URI COLIKV_TEST_PG_DIR=$PG_DIR COLIKV_REQUIRE_PG=1
# CI runs as root: the root: cases (mounts, namespaces) must run, not be skipped.
export COLIKV_REQUIRE_ROOT=1
# The install/link tests build programs as a user would, without the
# sanitizer runtime an instrumented libcolikv needs (the engine test builds the
# engine so too); the plain builds run them.
ctest --test-dir "$BUILD_DIR" -j"$(nproc)" --output-on-failure --timeout 900 -E '^(packaging_(pkgconfig|find_package)|engine_colibri|engine_colibri_gateway)$'
