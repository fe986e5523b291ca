#!/usr/bin/env bash
# What a user of an installed or embedded colikv does, checked from outside the
# build (registered as ctests by tests/CMakeLists.txt):
#   packaging_test.sh pkgconfig BUILD_DIR SOURCE_DIR   install to a prefix other than the
#       configured one; compile tests/c_api_test.c as a plain C program with that prefix's
#       `pkg-config --cflags --libs [--static] colikv` and run it; a shared libcolikv must
#       export only the public API and carry its SONAME; the Python module (when built)
#       imports from PREFIX/lib/python3/dist-packages and works
#   packaging_test.sh find_package BUILD_DIR SOURCE_DIR   the same prefix through
#       find_package(colikv) from a CMake project
#   packaging_test.sh subproject BUILD_DIR SOURCE_DIR   add_subdirectory(colikv) from an
#       outer project: no tests, tools, examples or fuzzers by default, build type not forced
# Environment (set by the ctest; defaults below): CC, CXX, SHARED (ON/OFF), PKG_CONFIG, NM, READELF,
# PYTHON_MODULE (ON/OFF) and PYTHON (the interpreter the module was built for).
set -euo pipefail
PYTHON_MODULE=${PYTHON_MODULE:-OFF} PYTHON=${PYTHON:-python3}
NM=${NM:-nm} READELF=${READELF:-readelf} PKG_CONFIG=${PKG_CONFIG:-pkg-config} CC=${CC:-cc} CXX=${CXX:-c++} SHARED=${SHARED:-OFF}
mode=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Installs the build into a fresh prefix (not the configured one) and prints it.
install_elsewhere() {
  local prefix=$tmp/somewhere/else
  cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
  echo "$prefix"
}

libdir_of() { dirname "$(find "$1" -name colikv.pc -path '*/pkgconfig/*')" | xargs dirname; }

check_pkgconfig() {
  local prefix libdir static=""
  prefix=$(install_elsewhere)
  libdir=$(libdir_of "$prefix")
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  [ "$(cd "$($PKG_CONFIG --variable=prefix colikv)" && pwd -P)" = "$(cd "$prefix" && pwd -P)" ] ||
    fail "colikv.pc's prefix is $($PKG_CONFIG --variable=prefix colikv), not the install prefix $prefix"
  [ "$SHARED" = ON ] || static=--static
  local cflags libs
  cflags=$($PKG_CONFIG --cflags colikv)
  libs=$($PKG_CONFIG --libs $static colikv)
  echo "pkg-config --cflags --libs $static colikv: $cflags $libs"
  # shellcheck disable=SC2086  # the flags are words
  "$CC" -std=c99 -Wall -Werror $cflags "$src/tests/c_api_test.c" -o "$tmp/c_program" $libs ||
    fail "a C program does not compile and link with pkg-config's flags"
  if [ "$SHARED" = ON ]; then
    # ldd's output is read whole before it is searched: `ldd | grep -q` under pipefail
    # fails whenever grep's early exit makes ldd die of SIGPIPE, whatever ldd found.
    local linked
    linked=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/c_program") || fail "ldd $tmp/c_program failed: $linked"
    grep -qF "$libdir/libcolikv.so" <<<"$linked" ||
      fail "the C program does not use $libdir/libcolikv.so; ldd says:"$'\n'"$linked"
    check_exports "$libdir"
  fi
  LD_LIBRARY_PATH=$libdir "$tmp/c_program" "$tmp/c.db" || fail "the C program linked through pkg-config failed"
  echo "ok: installed to $prefix, C program linked with pkg-config $static and ran"
  [ "$PYTHON_MODULE" = ON ] && check_python_module "$prefix" "$libdir"
  return 0
}

# The Python package installed under PREFIX/lib/python3/dist-packages/colikv
# imports from there with nothing but PYTHONPATH, and a shared build's module
# finds the prefix's libcolikv.so by itself.
check_python_module() {
  local prefix=$1 libdir=$2 pkg=$1/lib/python3/dist-packages
  [ -f "$pkg/colikv/__init__.py" ] && [ -f "$pkg/colikv/__init__.pyi" ] ||
    fail "no colikv package (with its stub) under $pkg"
  local so
  so=$(ls "$pkg"/colikv/_colikv*.so) || fail "no extension module in $pkg/colikv"
  if [ "$SHARED" = ON ]; then
    local found
    found=$(ldd "$so" | awk '/libcolikv\.so/ { print $3 }')
    [ -n "$found" ] && [ "$(dirname "$(readlink -f "$found")")" = "$(readlink -f "$libdir")" ] ||
      fail "$so does not find $libdir/libcolikv.so by itself: $(ldd "$so" | grep colikv)"
  fi
  (cd "$tmp" && PYTHONPATH=$pkg "$PYTHON" -c '
import sys, colikv, numpy as np
assert colikv.__file__.startswith(sys.argv[1]), colikv.__file__
m = colikv.Model(n_layers=2, kv_lora=4, qk_rope=2, vocab=10)
with colikv.Store(sys.argv[2]) as s:
    s.append("c", m, np.arange(3, dtype=np.int32), np.ones((2, 3, 4), np.float32), np.ones((2, 3, 2), np.float32))
    assert s.load("c", m).lc.sum() == 24
' "$pkg" "$tmp/py.db") || fail "the installed Python module does not import or work with PYTHONPATH=$pkg"
  echo "ok: the Python module imports from $pkg and works"
}

# The shared library exports the public API and nothing else: C functions
# colikv_*, and colikv:: C++ names outside colikv::detail and Store::Impl.
check_exports() {
  local so bad dynamic
  so=$(readlink -f "$1/libcolikv.so")
  dynamic=$("$READELF" -d "$so") || fail "$READELF -d $so failed"
  grep -q "SONAME.*libcolikv\.so\.[0-9]" <<<"$dynamic" || fail "$so has no versioned SONAME"
  "$NM" -D --defined-only -C "$so" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' > "$tmp/exports"
  [ -s "$tmp/exports" ] || fail "$so exports nothing"
  bad=$(grep -Ev '^colikv_[a-z_]+$|^((typeinfo|typeinfo name|vtable) for )?colikv::' "$tmp/exports" |
        grep -v '^$' || true)
  bad+=$(grep -E 'colikv::detail|Store::Impl|sqlite3_|SQLite::|ZSTD_' "$tmp/exports" || true)
  [ -z "$bad" ] || fail "$so exports symbols outside the public API:
$bad"
  echo "ok: $so exports $(wc -l < "$tmp/exports") public symbols and nothing else"
}

check_find_package() {
  local prefix
  prefix=$(install_elsewhere)
  mkdir -p "$tmp/consumer"
  cat > "$tmp/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.21)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(colikv 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE colikv::colikv)
EOF
  cat > "$tmp/consumer/main.cpp" <<'EOF'
#include <colikv/store.h>
#include <cstdio>
#include <vector>
int main(int, char** argv) {
  colikv::ModelSignature m{2, 4, 2, 0, 0, 100, ""};
  std::vector<float> l0(4), l1(4), r0(2), r1(2);
  const float* lc[] = {l0.data(), l1.data()};
  const float* rc[] = {r0.data(), r1.data()};
  const int32_t token = 7;
  colikv::Store s(argv[1]);
  s.append("c", m, &token, 1, {lc, rc, nullptr});
  try {
    s.truncate("missing", 0);
  } catch (const colikv::Error& e) {  // the exception type crosses the library boundary
    if (e.code() == colikv::ErrorCode::kNotFound && s.info("c").tokens == 1) return 0;
  }
  std::fprintf(stderr, "unexpected result\n");
  return 1;
}
EOF
  cmake -S "$tmp/consumer" -B "$tmp/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_COMPILER="$CXX" >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "find_package(colikv) from $prefix"; }
  cmake --build "$tmp/consumer-build" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "building against colikv::colikv"; }
  LD_LIBRARY_PATH=$(libdir_of "$prefix") "$tmp/consumer-build/consumer" "$tmp/cpp.db" ||
    fail "the find_package consumer failed"
  echo "ok: find_package(colikv) from $prefix builds and runs a C++ program"
}

check_subproject() {
  mkdir -p "$tmp/outer"
  cat > "$tmp/outer/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.21)
project(outer C CXX)
add_subdirectory("$src" colikv)
add_executable(app app.c)
target_link_libraries(app PRIVATE colikv::colikv)
EOF
  echo 'int main(void) { return 0; }' > "$tmp/outer/app.c"
  cmake -S "$tmp/outer" -B "$tmp/outer-build" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
    >"$tmp/outer.log" 2>&1 || { cat "$tmp/outer.log"; fail "configuring an outer project that embeds colikv"; }
  local cache=$tmp/outer-build/CMakeCache.txt opt
  for opt in COLIKV_BUILD_TESTS COLIKV_BUILD_TOOLS COLIKV_BUILD_EXAMPLES COLIKV_BUILD_FUZZERS; do
    grep -q "^$opt:BOOL=OFF$" "$cache" || fail "$opt is not OFF in a subproject: $(grep "^$opt:" "$cache")"
  done
  grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$cache" ||
    fail "the embedded colikv set the parent's build type: $(grep '^CMAKE_BUILD_TYPE:' "$cache")"
  local n
  n=$(ctest --test-dir "$tmp/outer-build" -N | sed -n 's/^Total Tests: //p')
  [ "$n" = 0 ] || fail "the embedded colikv registered $n tests"
  echo "ok: embedded with add_subdirectory: only the library, build type left alone"
}

case "$mode" in
  pkgconfig) check_pkgconfig ;;
  find_package) check_find_package ;;
  subproject) check_subproject ;;
  *) fail "unknown mode $mode" ;;
esac
