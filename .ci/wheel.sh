#!/usr/bin/env bash
# The Python package as a user installs it: builds a wheel with pip (setup.py
# driving the project's CMake, Debian's setuptools and wheel: no network),
# installs it into a fresh venv that sees Debian's numpy and pytest
# (--system-site-packages), and runs the pytest suite there against the
# installed package, from outside the source tree, without PYTHONPATH.
# The build folder build-pip/ is kept between runs (and ccache is used when
# installed), so a second run rebuilds only what changed.
# PYTHON: the interpreter to build for (default Debian's /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
PYTHON=${PYTHON:-/usr/bin/python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/colikv-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv --system-site-packages "$work/venv"
venv_python=$work/venv/bin/python

CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$venv_python" -m pip wheel --no-build-isolation --no-deps --no-index -w "$work/wheels" "$src"
wheel=$(ls "$work"/wheels/colikv-*.whl)
echo "built $(basename "$wheel")"
# Only the wheel just built: --no-index, numpy from Debian's site-packages.
"$venv_python" -m pip install --no-index --find-links "$work/wheels" colikv

cd "$work"
env -u PYTHONPATH -u COLIKV_TOOL -u COLIKV_TEST_BACKEND \
  COLIKV_INSTALLED_PREFIX="$work/venv" COLIKV_SAMPLE_DIR="$src/tests/data" \
  "$venv_python" -B -m pytest -q -rs -p no:cacheprovider "$src/python/tests"
