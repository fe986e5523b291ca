"""The store's other calls, as a Python user makes them."""

import json

import numpy as np
import pytest

import colikv
from conftest import MODEL, make_turn, assert_bits_equal


def test_conversation_lifecycle(location):
    tokens, lc, rc, _ = make_turn(MODEL, 100)
    with colikv.Store(location, synchronous="normal") as s:
        s.append("a", MODEL, tokens, lc, rc)
        assert "a" in s and s.exists("a") and len(s) == 1 and s.count("nope") == 0
        info = s.info("a")
        assert (info.id, info.tokens, info.model, info.precision, info.parent) == ("a", 100, MODEL, "f32", None)
        assert info.raw_bytes == 100 * MODEL.record_bytes and info.stored_bytes > 0 and not info.evicted
        s.fork("a", "b", at=40)
        s.fork("a", "full")
        b = s.info("b")
        assert b.tokens == 40 and b.parent == "a" and b.forked_at == 40 and s.count("full") == 100
        assert_bits_equal(s.load("b", MODEL).lc, lc[:, :40])
        s.rename("full", "whole")
        assert not s.exists("full") and s.count("whole") == 100
        s.truncate("whole", 10)
        assert s.count("whole") == 10
        s.set_title("whole", "a title")
        s.set_metadata("whole", json.dumps({"user": "u1"}))
        w = s.info("whole")
        assert w.title == "a title" and json.loads(w.metadata) == {"user": "u1"}
        ids = [c.id for c in s.conversations()]
        assert sorted(ids) == ["a", "b", "whole"]
        assert len(s.conversations(limit=2)) == 2 and len(s.conversations(limit=0)) == 0
        assert [c.id for c in s.conversations(offset=1)] == ids[1:]
        s.delete("b")
        with pytest.raises(colikv.NotFound):
            s.delete("b")
        assert sorted(c.id for c in s.conversations()) == ["a", "whole"]
        s.create("empty", MODEL, title="t")
        assert s.count("empty") == 0 and s.info("empty").title == "t"


def test_write_rewrites_a_tail(location):
    tokens, lc, rc, _ = make_turn(MODEL, 60, seed=1)
    t2, lc2, rc2, _ = make_turn(MODEL, 50, seed=2, first_token=1)
    t2[:20] = tokens[:20]
    lc2[:, :20] = lc[:, :20]
    rc2[:, :20] = rc[:, :20]
    with colikv.Store(location) as s:
        s.append("c", MODEL, tokens, lc, rc)
        s.write("c", MODEL, t2, lc2, rc2, start=20)
        kv = s.load("c", MODEL)
        np.testing.assert_array_equal(kv.tokens, t2)
        assert_bits_equal(kv.lc, lc2)
        bad = t2.copy()
        bad[5] += 1
        with pytest.raises(colikv.Diverged) as e:
            s.write("c", MODEL, bad, lc2, rc2, start=20)
        assert e.value.position == 5


def test_tenants_see_and_match_only_their_own(location):
    tokens, lc, rc, _ = make_turn(MODEL, 80)
    with colikv.Store(location, tenant="alice") as a, colikv.Store(location, tenant="bob") as b:
        a.append("chat", MODEL, tokens, lc, rc)
        assert a.match(MODEL, tokens) == ("chat", 80)
        assert b.match(MODEL, tokens) is None and "chat" not in b and len(b) == 0
        b.append("chat", MODEL, tokens[:40], lc, rc)  # the same id, another tenant's
        assert a.count("chat") == 80 and b.count("chat") == 40
        assert_bits_equal(b.load("chat", MODEL).lc, lc[:, :40])
    with colikv.Store(location) as default:
        assert len(default) == 0
    with pytest.raises(colikv.NotFound, match="no such tenant 'carol'"):
        colikv.Store(location, tenant="carol", read_only=True)
    with pytest.raises(colikv.InvalidArgument):
        colikv.Store(location, tenant="bad\x01name")


def test_tenant_quota_evicts_only_its_own(location):
    tokens, lc, rc, _ = make_turn(MODEL, 80)
    other, lc2, rc2, _ = make_turn(MODEL, 80, seed=5, first_token=3)  # nothing shared with tokens
    with colikv.Store(location, tenant="t1") as t1, colikv.Store(location, tenant="t2") as t2:
        assert t1.tenant_limits() == (None, None)
        t1.append("a", MODEL, tokens, lc, rc)
        quota = t1.stats().total.stored_bytes
        t1.set_tenant_limits(max_bytes=quota, max_idle_ms=30 * 86400000)
        t2.set_tenant_limits(max_bytes=quota)
        assert t1.tenant_limits() == (quota, 30 * 86400000)
        with pytest.raises(colikv.InvalidArgument):
            t2.set_tenant_limits(max_bytes=-1)
        assert t2.tenant_limits() == (quota, None)
        t2.append("x", MODEL, tokens, lc, rc)
        t2.append("y", MODEL, other, lc2, rc2)  # past t2's quota: t2's "x" is evicted, never t1's "a"
        assert t2.info("x").evicted and not t2.info("y").evicted
        assert not t1.info("a").evicted
        assert_bits_equal(t1.load("a", MODEL).lc, lc)
        assert t1.expire(max_idle_ms=86400000) == []


def test_match_and_match_loadable(location):
    tokens, lc, rc, _ = make_turn(MODEL, 80)
    with colikv.Store(location) as s:
        assert s.match(MODEL, tokens) is None
        s.append("long", MODEL, tokens, lc, rc)
        s.append("short", MODEL, tokens[:30], lc, rc)
        prompt = np.concatenate([tokens[:50], np.array([1, 2, 3], np.int32)])
        assert s.match(MODEL, prompt) == ("long", 50)
        assert s.match(MODEL, list(int(t) for t in tokens[:10]))[1] == 10
        other = colikv.Model(n_layers=3, kv_lora=16, qk_rope=8, vocab=5000, weights_id="else")
        assert s.match(other, prompt) is None
        s.load("short", MODEL)  # most recently used: gc keeps it
        s.gc(max_bytes=s.info("short").stored_bytes)
        assert s.info("long").evicted and not s.info("short").evicted
        assert s.match(MODEL, prompt) == ("long", 50)
        assert s.match_loadable(MODEL, prompt) == ("short", 30)


def test_stats_verify_vacuum_and_copy(location, new_location):
    tokens, lc, rc, _ = make_turn(MODEL, 70)
    with colikv.Store(location) as s:
        s.append("a", MODEL, tokens, lc, rc)
        s.fork("a", "b", at=35)
        st = s.stats()
        assert st.total.conversations == 2 and st.total.tokens == 105 and len(st.models) == 1
        assert st.models[0].model == MODEL and st.file_bytes > 0
        assert st.total.logical_bytes == 105 * MODEL.record_bytes and st.total.stored_bytes > 0
        r = s.verify()
        assert r.ok and bool(r) and r.conversations == 2 and r.chunks > 0 and r.problems == []
        assert s.verify("b").conversations == 1
        with pytest.raises(colikv.NotFound):
            s.verify("nope")
        v = s.vacuum()
        assert v.file_bytes_before >= 0 and v.file_bytes_after >= 0
        assert v.held_back == "" and v.reclaimable_bytes >= -1
        dst_location = new_location()
        copied = s.copy_to(dst_location)
        assert sorted(c.id for c in copied) == ["a", "b"] and all(len(c.records_sha256) == 64 for c in copied)
        assert all(c.evicted_from == -1 and not c.skipped for c in copied)
        with pytest.raises(colikv.Conflict):
            s.copy_to(dst_location, ids=["a"])
        with colikv.Store(new_location()) as other:
            assert [c.id for c in s.copy_to(other, ids=["b"])] == ["b"]
            assert other.count("b") == 35 and not other.exists("a")
            with pytest.raises(colikv.InvalidArgument):
                s.copy_to(s)
    with colikv.Store(dst_location, create=False) as d:
        assert_bits_equal(d.load("a", MODEL).lc, lc)
        assert d.count("b") == 35


def test_model_value_semantics():
    m = colikv.Model(n_layers=78, kv_lora=512, qk_rope=64, index_hd=0, n_indexed=0, vocab=154880, weights_id="w1")
    assert m == colikv.Model(n_layers=78, kv_lora=512, qk_rope=64, vocab=154880, weights_id="w1")
    assert m != colikv.Model(n_layers=78, kv_lora=512, qk_rope=64, vocab=154880)
    assert hash(m) == hash(colikv.Model(n_layers=78, kv_lora=512, qk_rope=64, vocab=154880, weights_id="w1"))
    assert m.floats_per_token == 78 * 576 and m.record_bytes == 4 + 4 * 78 * 576
    assert str(m) == "n_layers=78 kv_lora=512 qk_rope=64 index_hd=0 n_indexed=0 vocab=154880 weights=w1"
    assert eval(repr(m), {"colikv": colikv}) == m
    assert colikv.is_postgres_location("postgresql://u:secret@h/db") and not colikv.is_postgres_location("a.db")
    assert "secret" not in colikv.shown_store_location("postgresql://u:secret@h/db")


def test_paths_may_be_pathlib_bytes_or_not_utf8(tmp_path, sample):
    import os
    odd = tmp_path / os.fsdecode(b"store\xff.db")  # a file name that is not UTF-8
    with colikv.Store(odd) as s:
        assert s.location == str(odd)
        r = s.import_coli_kv(sample.encode(), id="x")
        s.export_coli_kv("x", tmp_path / "out.coli_kv")
    assert os.path.exists(os.fsencode(str(odd)))
    assert open(tmp_path / "out.coli_kv", "rb").read() == open(sample, "rb").read()
    assert len(colikv.read_coli_kv(tmp_path / "out.coli_kv")) == r.tokens
    with pytest.raises(TypeError):
        colikv.Store(3)
    with pytest.raises(ValueError):
        colikv.read_coli_kv("a\0b")
