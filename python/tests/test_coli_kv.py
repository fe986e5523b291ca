"""read_coli_kv against the engine-written sample and the CLI's export of
its import; import_coli_kv / export_coli_kv; malformed files."""

import os
import subprocess

import numpy as np
import pytest

import colikv
from conftest import assert_bits_equal

HEADER = 40


def records_of(kv):
    """The .coli_kv records of a KV, rebuilt in numpy: per token the id, then
    per layer kv_lora and qk_rope floats, then the indexer's floats."""
    m = kv.model
    n = len(kv)
    parts = [kv.tokens.view(np.uint32).reshape(n, 1)]
    for layer in range(m.n_layers):
        parts.append(kv.lc[layer].view(np.uint32))
        parts.append(kv.rc[layer].view(np.uint32))
    for layer in range(m.n_indexed):
        parts.append(kv.ic[layer].view(np.uint32))
    return np.concatenate(parts, axis=1).astype("<u4").tobytes()


def test_read_coli_kv_matches_the_cli_export_of_its_import(tool, sample, location, tmp_path):
    kv = colikv.read_coli_kv(sample)
    m = kv.model
    assert (m.n_layers, m.kv_lora, m.qk_rope, m.index_hd, m.n_indexed, m.vocab) == (5, 32, 8, 0, 0, 264)
    assert kv.id == "glm_tiny_nodsa_51" and len(kv) == 51
    assert kv.lc.shape == (5, 51, 32) and kv.rc.shape == (5, 51, 8) and kv.tokens.dtype == np.int32
    assert list(kv.tokens[:4]) == [257, 258, 259, 112]
    out = tmp_path / "exported.coli_kv"
    subprocess.run([tool, "import", location, sample, "--id", "s"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([tool, "export", location, "s", str(out)], check=True, stdout=subprocess.DEVNULL)
    exported = out.read_bytes()
    assert exported[HEADER:] == records_of(kv)
    assert exported == open(sample, "rb").read()[:len(exported)]
    again = colikv.read_coli_kv(str(out))
    assert_bits_equal(again.lc, kv.lc)
    part = colikv.read_coli_kv(sample, limit=10)
    assert len(part) == 10 and part.lc.shape == (5, 10, 32)
    assert_bits_equal(part.lc, kv.lc[:, :10])


def test_import_then_load_equals_read_and_export_is_byte_exact(sample, location, tmp_path):
    kv = colikv.read_coli_kv(sample)
    with colikv.Store(location) as s:
        r = s.import_coli_kv(sample, id="x", weights_id="wsample")
        assert r.id == "x" and r.tokens == 51 and r.model.weights_id == "wsample"
        loaded = s.load("x", r.model)
        np.testing.assert_array_equal(loaded.tokens, kv.tokens)
        assert_bits_equal(loaded.lc, kv.lc)
        assert_bits_equal(loaded.rc, kv.rc)
        out = str(tmp_path / "out.coli_kv")
        assert s.export_coli_kv("x", out) == os.path.getsize(sample)
        assert open(out, "rb").read() == open(sample, "rb").read()
        with pytest.raises(colikv.Conflict):
            s.export_coli_kv("x", out)
        assert s.export_coli_kv("x", out, force=True) == os.path.getsize(sample)
        with pytest.raises(colikv.Conflict):
            s.import_coli_kv(sample, id="x")
        assert s.import_coli_kv(sample).id == "glm_tiny_nodsa_51"


def test_malformed_files_raise_naming_the_file(sample, location, tmp_path):
    data = open(sample, "rb").read()
    short = tmp_path / "short.coli_kv"
    short.write_bytes(data[:HEADER + 804 * 10 + 5])  # the header counts 51 records
    with pytest.raises(colikv.InvalidArgument) as e:
        colikv.read_coli_kv(str(short))
    assert "short.coli_kv" in str(e.value)
    magic = tmp_path / "magic.coli_kv"
    magic.write_bytes(b"NOTCOLI\0" + data[8:])
    with pytest.raises(colikv.InvalidArgument, match="magic.coli_kv"):
        colikv.read_coli_kv(str(magic))
    with pytest.raises(colikv.NotFound):
        colikv.read_coli_kv(str(tmp_path / "absent.coli_kv"))
    with pytest.raises(colikv.InvalidArgument):
        colikv.read_coli_kv(str(tmp_path))
    with colikv.Store(location) as s:
        with pytest.raises(colikv.InvalidArgument, match="short.coli_kv"):
            s.import_coli_kv(str(short), id="y")
        assert len(s) == 0
