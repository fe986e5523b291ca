#!/usr/bin/env bash
# The project's one entry point on a fresh Debian bookworm machine (as root):
#   tools/dev.sh demo [STORE]  install what is needed, build, and run the main job
#   tools/dev.sh test          install what is needed, build, and run the whole test suite
#                              (against SQLite and a throwaway PostgreSQL server: tools/postgres.sh)
#   tools/dev.sh build         install and build only
#   tools/dev.sh sanitizers    ASan+UBSan suite, TSan on the threaded tests, a short fuzz run (clang)
# BUILD_DIR (default: build), BUILD_TYPE (default: RelWithDebInfo), CMAKE_ARGS
# (more configure options, e.g. -DBUILD_SHARED_LIBS=ON) and CTEST_ARGS (which
# tests `test` runs, e.g. -R 'c_api_') may be set.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
read -r -a EXTRA_CMAKE_ARGS <<< "${CMAKE_ARGS:-}"
read -r -a EXTRA_CTEST_ARGS <<< "${CTEST_ARGS:-}"
PACKAGES=(cmake g++ make pkg-config libsqlite3-dev libsqlitecpp-dev libzstd-dev catch2 sqlite3 python3
  libpq-dev postgresql pybind11-dev python3-dev python3-numpy python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel python3-mypy python3-matplotlib
  prometheus prometheus-node-exporter util-linux)

SANITIZER_PACKAGES=(clang libclang-rt-14-dev)

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${EXTRA_CMAKE_ARGS[@]}" "$@"
  cmake --build "$BUILD_DIR" -j"$(nproc)"
}

# Runs a command with a throwaway PostgreSQL server (tools/postgres.sh) whose
# URI is in COLIKV_TEST_PG_URI, so that the suite's PostgreSQL variants run;
# the server is stopped and removed when the command ends, however it ends.
with_postgres() {
  PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/colikv-pg.XXXXXX")
  trap 'tools/postgres.sh stop "$PG_DIR" || true' EXIT
  COLIKV_TEST_PG_URI=$(tools/postgres.sh start "$PG_DIR")
  export COLIKV_TEST_PG_URI COLIKV_TEST_PG_DIR=$PG_DIR
  "$@"
}

cmd=${1:-}
case "$cmd" in
  demo)
    install_deps
    build
    "$BUILD_DIR/examples/colikv_demo" "${2:-colikv-demo.db}"
    ;;
  test)
    install_deps
    build
    with_postgres ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "${EXTRA_CTEST_ARGS[@]}"
    ;;
  build)
    install_deps
    build
    ;;
  sanitizers)
    install_deps "${SANITIZER_PACKAGES[@]}"
    .ci/sanitizers.sh build-asan
    .ci/tsan.sh build-tsan
    FUZZ_SECONDS=${FUZZ_SECONDS:-30} .ci/fuzz.sh build-fuzz
    ;;
  *)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
