"""A conversation written from Python read by the colikv tool, and the reverse."""

import json
import subprocess

import numpy as np

import colikv
from conftest import MODEL_IX, make_turn, assert_bits_equal
from test_coli_kv import records_of


def run(tool, *args):
    return subprocess.run([tool, *args], check=True, capture_output=True, text=True).stdout


def test_written_by_python_read_by_the_cli(tool, location, tmp_path):
    tokens, lc, rc, ic = make_turn(MODEL_IX, 90, seed=7)
    with colikv.Store(location) as s:
        s.append("py-conv", MODEL_IX, tokens, lc, rc, ic)
    listed = json.loads(run(tool, "ls", location, "--json"))["conversations"]
    assert [(c["id"], c["tokens"], c["model"]["weights_id"], c["model"]["n_indexed"]) for c in listed] == \
        [("py-conv", 90, "wix", 2)]
    assert json.loads(run(tool, "verify", location, "--json"))["ok"] is True
    out = tmp_path / "py.coli_kv"
    run(tool, "export", location, "py-conv", str(out))
    data = out.read_bytes()
    header = np.frombuffer(data[8:40], "<i4")
    assert list(header[:7]) == [3, 16, 8, 4, 2, 5000, 90]
    kv = colikv.read_coli_kv(str(out))
    assert data[40:] == records_of(kv)
    np.testing.assert_array_equal(kv.tokens, tokens)
    assert_bits_equal(kv.lc, lc)
    assert_bits_equal(kv.rc, rc)
    assert_bits_equal(kv.ic, ic)


def test_written_by_the_cli_read_by_python(tool, sample, location):
    run(tool, "import", location, sample, "--id", "cli-conv", "--weights-id", "wcli")
    run(tool, "fork", location, "cli-conv", "cli-fork", "--at", "20")
    raw = colikv.read_coli_kv(sample)
    m = colikv.Model(n_layers=5, kv_lora=32, qk_rope=8, vocab=264, weights_id="wcli")
    with colikv.Store(location) as s:
        assert sorted(c.id for c in s.conversations()) == ["cli-conv", "cli-fork"]
        kv = s.load("cli-conv", m)
        np.testing.assert_array_equal(kv.tokens, raw.tokens)
        assert_bits_equal(kv.lc, raw.lc)
        assert_bits_equal(kv.rc, raw.rc)
        fork = s.load("cli-fork", m)
        assert len(fork) == 20 and s.info("cli-fork").parent == "cli-conv"
        assert_bits_equal(fork.lc, raw.lc[:, :20])
