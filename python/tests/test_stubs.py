"""colikv/__init__.pyi against the module: mypy's stubtest, clean but for
stubtest_allowlist.txt (what pybind11 cannot express, each entry saying why)."""

import os
import subprocess
import sys

import colikv

ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubtest_allowlist.txt")


def test_stubtest_finds_the_stub_true(tmp_path):
    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:
        raise AssertionError("stubtest needs mypy (Debian: python3-mypy, which tools/dev.sh installs)")
    # Run apart from the source tree (mypy's cache goes to tmp_path), on the
    # package this suite imports: the built or the installed one.
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(colikv.__file__)))
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "colikv", "--allowlist", ALLOWLIST,
                        "--mypy-config-file", os.devnull], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
