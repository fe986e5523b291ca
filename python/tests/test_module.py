"""The package itself: version, docstrings, and a stub that names what the
module has."""

import ast
import inspect
import os
import pydoc

import colikv


def test_version_is_the_library_version():
    assert colikv.__version__ == os.environ.get("COLIKV_VERSION", "?"), "ctest passes the project's version"


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
