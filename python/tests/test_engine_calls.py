"""Store.load_range and Store.adopt: an engine loading part of a conversation."""

import numpy as np
import pytest

import colikv
from conftest import MODEL, MODEL_IX, assert_bits_equal, make_turn


@pytest.mark.parametrize("model", [MODEL, MODEL_IX], ids=["plain", "indexer"])
def test_load_range_returns_just_those_positions(location, model):
    tokens, lc, rc, ic = make_turn(model, 70, seed=3)
    with colikv.Store(location) as s:
        s.append("c", model, tokens, lc, rc, ic)
        kv = s.load_range("c", model, 20, 55)
        assert len(kv) == 35 and kv.id == "c"
        np.testing.assert_array_equal(kv.tokens, tokens[20:55])
        assert_bits_equal(kv.lc, lc[:, 20:55])
        assert_bits_equal(kv.rc, rc[:, 20:55])
        if model.n_indexed:
            assert_bits_equal(kv.ic, ic[:, 20:55])
        assert len(s.load_range("c", model, 70, 70)) == 0
        for start, stop in ((-1, 5), (10, 5), (0, 71)):
            with pytest.raises(colikv.InvalidArgument):
                s.load_range("c", model, start, stop)
        with pytest.raises(colikv.InvalidArgument, match="past the conversation's 70 committed tokens"):
            s.load_range("c", model, 0, 1 << 60)  # refused before any array is made for it
        with pytest.raises(colikv.ModelMismatch):
            s.load_range("c", MODEL_IX if model is MODEL else MODEL, 0, 10)
        with pytest.raises(colikv.NotFound):
            s.load_range("nope", model, 0, 1)


def test_adopt_loads_the_longest_loadable_prefix_from_start(location):
    tokens, lc, rc, _ = make_turn(MODEL, 64, seed=5)
    with colikv.Store(location) as s:
        s.append("base", MODEL, tokens[:48], lc, rc)
        prompt = np.concatenate([tokens[:48], np.array([1, 2, 3], dtype=np.int32)])
        adopted = s.adopt(MODEL, prompt, start=16)
        assert adopted is not None
        id, length, kv = adopted
        assert (id, length, len(kv)) == ("base", 48, 32)
        np.testing.assert_array_equal(kv.tokens, tokens[16:48])
        assert_bits_equal(kv.lc, lc[:, 16:48])
        assert_bits_equal(kv.rc, rc[:, 16:48])
        # The engine holds more than the match: nothing to load.
        id, length, kv = s.adopt(MODEL, prompt, start=50)
        assert (id, length, len(kv)) == ("base", 48, 0)
        assert s.adopt(MODEL, np.array([4999, 4998], dtype=np.int32)) is None
        assert s.adopt(MODEL, prompt[:10].tolist())[:2] == ("base", 10)
        with pytest.raises(colikv.InvalidArgument, match="start"):
            s.adopt(MODEL, prompt, start=len(prompt) + 1)
        with pytest.raises(TypeError, match="prompt"):
            s.adopt(MODEL, prompt.astype(np.int64))


def test_adopt_skips_an_evicted_match(location):
    tokens, lc, rc, _ = make_turn(MODEL, 40, seed=6)
    with colikv.Store(location) as s:
        s.append("kept", MODEL, tokens[:10], lc, rc)
        s.append("long", MODEL, tokens, lc, rc)
        s.gc(max_bytes=0)  # evicts all: nothing loadable
        assert s.match(MODEL, tokens)[0] == "long"
        assert s.adopt(MODEL, tokens) is None


def test_adopt_sizes_its_arrays_by_the_match_not_the_prompt(location):
    # A long prompt on a large model: arrays for every prompt position would
    # be 1 TiB (MemoryError); those for the 16-token match are small.
    big = colikv.Model(n_layers=64, kv_lora=4096, qk_rope=64, vocab=5000, weights_id="wbig")
    tokens, lc, rc, _ = make_turn(big, 16, seed=7)
    prompt = np.full(1 << 20, 4999, dtype=np.int32)
    prompt[:16] = tokens
    with colikv.Store(location) as s:
        s.append("c", big, tokens, lc, rc)
        id, length, kv = s.adopt(big, prompt, start=4)
        assert (id, length, kv.lc.shape) == ("c", 16, (64, 12, 4096))
        assert_bits_equal(kv.lc, lc[:, 4:16])
        assert s.adopt(big, prompt[16:]) is None
