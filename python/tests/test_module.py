"""The package itself: version, docstrings, and a stub that names what the
module has."""

import ast
import importlib.metadata
import inspect
import os
import pydoc
import re

import pytest

import colikv

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def header_version():
    """MAJOR.MINOR.PATCH as include/colikv/version.h, the one place it is written, says."""
    text = open(os.path.join(SOURCE, "include", "colikv", "version.h")).read()
    return ".".join(re.search(r"^#define COLIKV_VERSION_%s (\d+)$" % p, text, re.M).group(1)
                    for p in ("MAJOR", "MINOR", "PATCH"))


def test_version_is_the_library_version():
    assert colikv.__version__ == header_version()
    if "COLIKV_VERSION" in os.environ:  # ctest passes CMake's project version
        assert colikv.__version__ == os.environ["COLIKV_VERSION"]


def test_installed_package_is_the_one_imported():
    """Run by .ci/wheel.sh on the wheel installed into a venv: the import is
    the installed package, with its metadata, stub and py.typed."""
    prefix = os.environ.get("COLIKV_INSTALLED_PREFIX")
    if not prefix:
        pytest.skip("COLIKV_INSTALLED_PREFIX not set: not an installed package (.ci/wheel.sh sets it)")
    here = os.path.dirname(os.path.realpath(colikv.__file__))
    assert here.startswith(os.path.realpath(prefix) + os.sep), here
    assert importlib.metadata.version("colikv") == colikv.__version__ == header_version()
    for name in ("__init__.pyi", "py.typed"):
        assert os.path.isfile(os.path.join(here, name)), name


def test_help_shows_docstrings():
    text = pydoc.render_doc(colikv.Store, renderer=pydoc.plaintext)
    for words in ("postgresql:// URI", "append_async", "Diverged", "releases the GIL", "Loads the committed"):
        assert words in text, words
    for name in ("append", "load", "wait", "match", "verify", "copy_to", "import_coli_kv", "export_coli_kv",
                 "conversations", "fork", "gc"):
        assert (getattr(colikv.Store, name).__doc__ or "").count("\n") >= 1, name
    assert "numpy" in (colikv.read_coli_kv.__doc__ or "")
    assert colikv.Store.__module__ == "colikv" and colikv.NotFound.__doc__


def test_stub_names_every_public_name_and_method():
    stub_path = os.path.join(os.path.dirname(colikv.__file__), "__init__.pyi")
    tree = ast.parse(open(stub_path).read())
    top = set()
    members = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | \
                {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    assert set(colikv.__all__) == top
    for name in colikv.__all__:
        obj = getattr(colikv, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            public = {m for m in vars(obj) if not m.startswith("_")}
            assert public == members[name] - {"__init__"} - {m for m in members[name] if m.startswith("__")}, name
