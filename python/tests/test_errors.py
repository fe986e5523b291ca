"""Bad input raises the named exception, naming the argument, its dtype and
shape, and leaves the store as it was; the exception class tree."""

import numpy as np
import pytest

import colikv
from conftest import MODEL, MODEL_IX, make_turn, assert_bits_equal

CODES = {"NotFound": -1, "ModelMismatch": -2, "Diverged": -3, "Conflict": -4, "Corrupt": -5, "Busy": -6,
         "DiskFull": -7, "InvalidArgument": -8, "IO": -9, "ReadOnly": -10, "TooLarge": -11, "Version": -12,
         "Internal": -13, "Evicted": -14, "Unsupported": -15}


def test_class_tree():
    assert issubclass(colikv.Error, Exception)
    for name in CODES:
        assert issubclass(getattr(colikv, name), colikv.Error), name
    assert issubclass(colikv.InvalidArgument, ValueError)
    assert issubclass(colikv.IO, OSError) and issubclass(colikv.DiskFull, OSError)
    assert not issubclass(colikv.NotFound, (ValueError, OSError))
    assert colikv.Error.__module__ == "colikv"


def snapshot(s, id):
    info = s.info(id)
    kv = s.load(id, MODEL)
    return (info.tokens, info.updated_ms, s.stats().total.stored_bytes, kv)


def assert_unchanged(s, id, before):
    after = snapshot(s, id)
    assert after[:3] == before[:3]
    np.testing.assert_array_equal(after[3].tokens, before[3].tokens)
    assert_bits_equal(after[3].lc, before[3].lc)
    assert_bits_equal(after[3].rc, before[3].rc)


@pytest.fixture
def store(location):
    tokens, lc, rc, _ = make_turn(MODEL, 30)
    with colikv.Store(location) as s:
        s.append("c", MODEL, tokens[:20], lc, rc)
        yield s


def test_bad_arrays_raise_before_anything_is_written(store):
    tokens, lc, rc, _ = make_turn(MODEL, 30)
    before = snapshot(store, "c")
    cases = [
        # (tokens, lc, rc, exception, words the message must hold)
        (tokens, lc.astype(np.float64), rc, TypeError, ["lc", "float64", "(3, 30, 16)"]),
        (tokens, lc, rc.astype(np.float16), TypeError, ["rc", "float16", "(3, 30, 8)"]),
        (tokens.astype(np.int64), lc, rc, TypeError, ["tokens", "int64", "(30,)"]),
        (tokens.astype(np.float32), lc, rc, TypeError, ["tokens", "float32"]),
        (tokens, lc[:, :29], rc, colikv.InvalidArgument, ["lc", "(3, 29, 16)", "n >= 30"]),
        (tokens, lc[:2], rc, colikv.InvalidArgument, ["lc", "(2, 30, 16)"]),
        (tokens, lc.reshape(3, 30, 4, 4), rc, colikv.InvalidArgument, ["lc", "(3, 30, 4, 4)"]),
        (tokens, rc, rc, colikv.InvalidArgument, ["lc", "(3, 30, 8)"]),
        (tokens.reshape(5, 6), lc, rc, colikv.InvalidArgument, ["tokens", "(5, 6)"]),
        # the right shape, not C-contiguous
        (tokens, np.asfortranarray(lc), rc, colikv.InvalidArgument, ["lc", "non-contiguous", "(3, 30, 16)"]),
        (tokens, lc, np.empty((3, 8, 30), np.float32).transpose(0, 2, 1), colikv.InvalidArgument,
         ["rc", "non-contiguous"]),
        (np.repeat(tokens, 2)[::2], lc, rc, colikv.InvalidArgument, ["tokens", "non-contiguous"]),
        ("abc", lc, rc, TypeError, ["tokens", "str"]),
        (tokens, 3.0, rc, TypeError, ["lc", "float"]),
        ([1, 2.5], lc, rc, TypeError, ["tokens[1]", "float"]),
        ([1, 2**40], lc, rc, colikv.InvalidArgument, ["tokens[1]", "int32"]),
    ]
    for t, l, r, exc, words in cases:
        for call in (store.append, store.append_async):
            with pytest.raises(exc) as e:
                call("c", MODEL, t, l, r)
            for w in words:
                assert w in str(e.value), (w, str(e.value))
    with pytest.raises(colikv.InvalidArgument, match="ic must be None"):
        store.append("c", MODEL, tokens, lc, rc, np.zeros((1, 30, 4), np.float32))
    store.wait()
    assert_unchanged(store, "c", before)


def test_indexer_arrays_are_checked(location):
    tokens, lc, rc, ic = make_turn(MODEL_IX, 10)
    with colikv.Store(location) as s:
        with pytest.raises(colikv.InvalidArgument, match="ic is None"):
            s.append("x", MODEL_IX, tokens, lc, rc)
        with pytest.raises(colikv.InvalidArgument, match=r"ic must be .*\(2, n, 4\).*got float32 of shape \(3, 10, 4\)"):
            s.append("x", MODEL_IX, tokens, lc, rc, np.zeros((3, 10, 4), np.float32))
        assert not s.exists("x") and len(s) == 0


def test_library_errors_carry_code_message_and_position(store):
    tokens, lc, rc, _ = make_turn(MODEL, 30)
    before = snapshot(store, "c")
    other = colikv.Model(n_layers=3, kv_lora=16, qk_rope=8, vocab=5000, weights_id="other")
    with pytest.raises(colikv.ModelMismatch) as e:
        store.append("c", other, tokens, lc, rc)
    assert "other" in str(e.value) and "wtest" in str(e.value) and e.value.code == CODES["ModelMismatch"]
    with pytest.raises(colikv.ModelMismatch):
        store.load("c", other)
    bad = tokens.copy()
    bad[7] += 1
    with pytest.raises(colikv.Diverged) as e:
        store.append("c", MODEL, bad, lc, rc)
    assert e.value.position == 7 and e.value.code_name == "diverged tokens" and "'c'" in str(e.value)
    with pytest.raises(colikv.Diverged) as e:
        store.append_async("c", MODEL, bad, lc, rc)
    assert e.value.position == 7
    huge = tokens.copy()
    huge[25] = MODEL.vocab
    with pytest.raises(colikv.InvalidArgument, match="5000"):
        store.append("c", MODEL, huge, lc, rc)
    with pytest.raises(colikv.NotFound) as e:
        store.load("nope", MODEL)
    assert "'nope'" in str(e.value) and e.value.position is None
    with pytest.raises(colikv.NotFound):
        store.info("nope")
    with pytest.raises(colikv.Conflict):
        store.fork("c", "c")
    with pytest.raises(colikv.InvalidArgument):
        store.truncate("c", 21)
    with pytest.raises(colikv.InvalidArgument):
        store.set_metadata("c", "{not json")
    with pytest.raises(colikv.InvalidArgument, match="synchronous"):
        colikv.Store(store.location, synchronous="sometimes")
    with pytest.raises(colikv.InvalidArgument, match="kv_lora"):
        colikv.Model(n_layers=3, kv_lora=0, qk_rope=8, vocab=10)
    assert_unchanged(store, "c", before)


def test_read_only_store_refuses_writes(location):
    tokens, lc, rc, _ = make_turn(MODEL, 20)
    with colikv.Store(location) as s:
        s.append("c", MODEL, tokens[:10], lc, rc)
    with colikv.Store(location, read_only=True) as s:
        with pytest.raises(colikv.ReadOnly):
            s.append("c", MODEL, tokens, lc, rc)
        with pytest.raises(colikv.ReadOnly):
            s.delete("c")
        assert s.count("c") == 10


def test_closed_store_raises_and_close_is_idempotent(location):
    tokens, lc, rc, _ = make_turn(MODEL, 10)
    s = colikv.Store(location)
    s.append("c", MODEL, tokens, lc, rc)
    s.close()
    assert s.closed
    s.close()
    for call in (lambda: s.load("c", MODEL), lambda: s.append("c", MODEL, tokens, lc, rc), lambda: s.count("c"),
                 lambda: s.conversations(), lambda: s.wait(), lambda: s.__enter__()):
        with pytest.raises(colikv.InvalidArgument, match="closed"):
            call()
    with colikv.Store(location) as again:
        assert again.count("c") == 10


def test_evicted_conversation_raises_with_position(location):
    tokens, lc, rc, _ = make_turn(MODEL, 40)
    with colikv.Store(location) as s:
        s.append("c", MODEL, tokens, lc, rc)
        report = s.gc(max_bytes=0)
        assert report.conversations == ["c"] and report.freed_bytes > 0
        with pytest.raises(colikv.Evicted) as e:
            s.load("c", MODEL)
        assert e.value.position == 0
        assert s.info("c").evicted and s.count("c") == 40
        np.testing.assert_array_equal(s.tokens("c"), tokens)


def test_a_message_quoting_bytes_that_are_not_utf8_is_escaped(location, tmp_path):
    # The library names the file it could not read; a file name that is not
    # UTF-8 reaches the message as \\x escapes, not as a UnicodeDecodeError.
    import os
    name = os.fsencode(str(tmp_path)) + b"/bad\xff.coli_kv"
    with open(name, "wb") as f:
        f.write(b"short")
    with pytest.raises(colikv.InvalidArgument) as e:
        colikv.read_coli_kv(os.fsdecode(name))
    assert "\\xff" in str(e.value)


def test_a_stored_count_the_chunks_do_not_hold_is_corrupt_not_an_allocation(location):
    from conftest import store_exec
    tokens, lc, rc, _ = make_turn(MODEL, 30)
    with colikv.Store(location) as s:
        s.append("c", MODEL, tokens, lc, rc)
    store_exec(location, "UPDATE conversations SET token_count = 10000000000 WHERE name = 'c'")
    with colikv.Store(location) as s:
        # Arrays sized by that count would take 2.9 TB: the load must fail on
        # the store's data (Corrupt), not try to allocate (MemoryError).
        with pytest.raises(colikv.Corrupt, match="'c'"):
            s.load("c", MODEL)
