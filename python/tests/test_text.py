"""Ids, titles, weights ids and names that are not UTF-8: the library stores
bytes, and they cross into Python as paths do (os.fsdecode's rule: UTF-8,
surrogateescape), and back from such a str, so an id written by the CLI or
by Python round-trips exactly. SQLite only: PostgreSQL's text refuses bytes
that are not UTF-8."""

import os
import subprocess

import numpy as np
import pytest

import colikv
from conftest import MODEL, make_turn, assert_bits_equal

pytestmark = pytest.mark.sqlite_only

RAW = b"caf\xe9-\xff\xfe"           # Latin-1 and bytes no UTF-8 text holds
NAME = RAW.decode("utf-8", "surrogateescape")  # 'caf\udce9-\udcff\udcfe'


def run(tool, *args):
    return subprocess.run([tool, *args], check=True, capture_output=True)


def test_an_id_the_cli_wrote_lists_loads_and_round_trips(tool, sample, location):
    run(tool, "import", location, sample, "--id", RAW, "--weights-id", b"w\xff")
    run(tool, "fork", location, RAW, RAW + b"-fork", "--at", "20")
    raw = colikv.read_coli_kv(sample)
    with colikv.Store(location) as s:
        ids = sorted(c.id for c in s.conversations())  # was UnicodeDecodeError
        assert ids == [NAME, NAME + "-fork"]
        assert os.fsencode(ids[0]) == RAW  # the same rule as paths
        info = s.info(NAME)
        assert info.id == NAME and info.model.weights_id == "w\udcff"
        assert s.info(NAME + "-fork").parent == NAME
        m = info.model
        assert "w\\udcff" in repr(m) and "w\udcff" in str(m)
        kv = s.load(NAME, m)
        assert kv.id == NAME and "caf\\udce9" in repr(kv)
        np.testing.assert_array_equal(kv.tokens, raw.tokens)
        assert_bits_equal(kv.lc, raw.lc)
        assert s.match(m, raw.tokens) == (NAME, 51)
        assert s.count(NAME) == 51 and NAME in s
        assert s.verify().ok
        s.set_title(NAME, "t\udcff")
        assert s.info(NAME).title == "t\udcff"
        s.rename(NAME, NAME + "2")
        s.truncate(NAME + "2", 10)
        report = s.gc(max_bytes=0)
        assert NAME + "2" in report.conversations
    # The CLI finds the bytes Python wrote back.
    run(tool, "info", location, RAW + b"2")
    run(tool, "info", location, RAW + b"-fork")


def test_an_id_python_wrote_reaches_the_cli_as_those_bytes(tool, location, tmp_path):
    tokens, lc, rc, _ = make_turn(MODEL, 30, seed=3)
    with colikv.Store(location) as s:
        s.append(NAME, MODEL, tokens, lc, rc)
        s.append_async(b"\xc3", MODEL, tokens, lc, rc)  # bytes are taken as they are
        s.wait(b"\xc3")
        assert sorted(c.id for c in s.conversations()) == sorted([NAME, "\udcc3"])
        assert s.load("\udcc3", MODEL).id == "\udcc3"
        result = s.copy_to(str(tmp_path / "copy.db"), ids=[NAME])
        assert [r.id for r in result] == [NAME]
        out = tmp_path / "out.coli_kv"
        s.export_coli_kv(NAME, out)
        assert s.import_coli_kv(out, id=NAME + "-again").id == NAME + "-again"
    run(tool, "info", location, RAW)
    run(tool, "info", location, RAW + b"-again")
    run(tool, "info", str(tmp_path / "copy.db"), RAW)
    with colikv.Store(tmp_path / "copy.db") as c:
        assert_bits_equal(c.load(NAME, MODEL).lc, lc)


def test_a_str_that_no_bytes_spell_is_refused_naming_the_problem(location):
    tokens, lc, rc, _ = make_turn(MODEL, 5)
    with colikv.Store(location) as s:
        with pytest.raises(UnicodeEncodeError):
            s.append("\ud800", MODEL, tokens, lc, rc)  # a surrogate surrogateescape never makes
        with pytest.raises(TypeError):
            s.count(5)
        assert len(s) == 0
