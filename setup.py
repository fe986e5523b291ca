"""Builds the Python module colikv with the project's own CMake (the backend
pyproject.toml names: setuptools, which Debian's python3-setuptools provides).

The package's Python files come from python/colikv; the extension
colikv._colikv is the CMake target colikv_python, built for the interpreter
running this script (a venv's included) against a static libcolikv, so the
installed package needs no library beside it. CMAKE_ARGS (space-separated)
adds configure options; a ccache on PATH is used; CMAKE_BUILD_PARALLEL_LEVEL
sets the jobs (default: the CPU count).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
# setuptools' own build folder, apart from the CMake build/ a developer uses.
BUILD_BASE = "build-pip"


def project_version():
    """MAJOR.MINOR.PATCH from include/colikv/version.h, the one place the version is written."""
    with open(os.path.join(HERE, "include", "colikv", "version.h")) as f:
        text = f.read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define COLIKV_VERSION_%s (\d+)$" % part, text, re.M)
        if not m:
            raise RuntimeError("include/colikv/version.h has no COLIKV_VERSION_%s line" % part)
        parts.append(m.group(1))
    return ".".join(parts)


class CMakeExtension(Extension):
    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if not cmake:
            raise RuntimeError("colikv needs cmake >= 3.21 to build (Debian: apt-get install cmake)")
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        args = [
            "-DCMAKE_BUILD_TYPE=Release",
            "-DPython3_EXECUTABLE=" + sys.executable,
            "-DCOLIKV_PYTHON=ON",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DCOLIKV_BUILD_TESTS=OFF",
            "-DCOLIKV_BUILD_TOOLS=OFF",
            "-DCOLIKV_BUILD_EXAMPLES=OFF",
            "-DCOLIKV_BUILD_FUZZERS=OFF",
            "-DCOLIKV_TEST_SYNC_POINTS=OFF",  # the tests' callbacks: none in a release build
        ]
        try:  # pybind11 from PyPI (an isolated build); Debian's pybind11-dev is found by CMake itself
            import pybind11
            args.append("-Dpybind11_DIR=" + pybind11.get_cmake_dir())
        except ImportError:
            pass
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run([cmake, "-S", HERE, "-B", build_dir] + args, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run([cmake, "--build", build_dir, "--target", ext.target, "-j", jobs], check=True)
        built = os.path.join(build_dir, "python", "colikv")
        names = [n for n in os.listdir(built) if n.startswith("_colikv") and n.endswith(".so")]
        if len(names) != 1:
            raise RuntimeError("the CMake build made %r in %s, not one _colikv module" % (names, built))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(built, names[0]), dest)


os.makedirs(os.path.join(HERE, BUILD_BASE), exist_ok=True)
setup(
    version=project_version(),
    packages=["colikv"],
    package_dir={"": "python"},
    package_data={"colikv": ["__init__.pyi", "py.typed"]},
    ext_modules=[CMakeExtension("colikv._colikv", target="colikv_python")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
    zip_safe=False,
)
