"""Round trips through a store: bit-exact for f32 (NaN payloads, -0.0,
infinities, subnormals), within bf16's rounding for a bf16 store, with and
without an indexer, in several turns, from any float32 buffer."""

import numpy as np
import pytest

import colikv
from conftest import MODEL, MODEL_IX, make_turn, bits, assert_bits_equal


def special_values(shape, seed):
    """float32 arrays full of the values a lossy or sloppy path would change."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x80000000,  # -0.0
                         0x00000000, 0x7F800000, 0xFF800000,  # +0, +inf, -inf
                         0x7FC00000, 0x7F800001, 0xFFC12345, 0x7FBFFFFF,  # quiet and signalling NaNs with payloads
                         0x00000001, 0x807FFFFF,  # subnormals
                         0x7F7FFFFF, 0x3F800001], dtype=np.uint32)
    flat = u.reshape(-1)
    flat[: specials.size * 8] = np.tile(specials, 8)
    return u.view(np.float32)


@pytest.mark.parametrize("model", [MODEL, MODEL_IX], ids=["plain", "indexer"])
def test_round_trip_is_bit_exact(location, model):
    n = 300
    tokens, _, _, _ = make_turn(model, n)
    lc = special_values((model.n_layers, n, model.kv_lora), 1)
    rc = special_values((model.n_layers, n, model.qk_rope), 2)
    ic = special_values((model.n_indexed, n, model.index_hd), 3) if model.n_indexed else None
    with colikv.Store(location) as s:
        s.append("c", model, tokens, lc, rc, ic)
        kv = s.load("c", model)
    assert len(kv) == n and kv.id == "c" and kv.model == model
    np.testing.assert_array_equal(kv.tokens, tokens)
    assert kv.tokens.dtype == np.int32
    assert_bits_equal(kv.lc, lc)
    assert_bits_equal(kv.rc, rc)
    if model.n_indexed:
        assert_bits_equal(kv.ic, ic)
    assert kv.ic.shape == (model.n_indexed, n, model.index_hd)
    # Reopened: the same bits again.
    with colikv.Store(location, create=False) as s:
        again = s.load("c", model)
    assert_bits_equal(again.lc, lc)
    assert_bits_equal(again.rc, rc)


def test_load_fills_its_own_arrays_without_a_second_copy(location):
    tokens, lc, rc, _ = make_turn(MODEL, 50)
    with colikv.Store(location) as s:
        s.append("c", MODEL, tokens, lc, rc)
        kv = s.load("c", MODEL)
    for a in (kv.tokens, kv.lc, kv.rc):
        # The array the library wrote into: it owns its memory (no view of a
        # temporary) and is C-contiguous in the documented shape.
        assert a.flags["OWNDATA"] and a.flags["C_CONTIGUOUS"] and a.flags["WRITEABLE"]
    assert kv.lc.shape == (3, 50, 16) and kv.rc.shape == (3, 50, 8) and kv.lc.dtype == np.float32


def bf16_round(x):
    """float32 rounded to bfloat16 (nearest, ties to even) and widened back."""
    u = bits(x).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return r.view(np.float32)


def test_bf16_store_rounds_to_nearest_even(location):
    n = 200
    tokens, lc, rc, _ = make_turn(MODEL, n, seed=5)
    lc[0, 0, :4] = [-0.0, np.inf, -np.inf, np.nan]
    rc[0, 0, :3] = [1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.0]  # ties: to even (down, up); exact
    with colikv.Store(location, precision="bf16") as s:
        s.append("c", MODEL, tokens, lc, rc)
        assert s.info("c").precision == "bf16"
        kv = s.load("c", MODEL)
    finite = np.isfinite(lc)
    assert_bits_equal(kv.lc[finite], bf16_round(lc)[finite])
    assert np.isnan(kv.lc[0, 0, 3]) and kv.lc[0, 0, 1] == np.inf and kv.lc[0, 0, 2] == -np.inf
    assert bits(kv.lc[0, 0, 0]) == 0x80000000  # -0.0 stays negative zero
    assert_bits_equal(kv.rc, bf16_round(rc))
    assert list(kv.rc[0, 0, :3]) == [1.0, 1.0 + 4 * 2**-8, 3.0]


def test_turns_append_only_the_new_positions(location):
    tokens, lc, rc, _ = make_turn(MODEL, 120, seed=9)
    with colikv.Store(location) as s:
        for end in (10, 10, 64, 65, 120):
            # As an engine does: its whole history each turn, as views of a
            # preallocated buffer (rows past `end` are not read).
            s.append("c", MODEL, tokens[:end], lc, rc)
            assert s.count("c") == end
        kv = s.load("c", MODEL)
        assert_bits_equal(kv.lc, lc)
        part = s.load("c", MODEL, limit=33)
        assert len(part) == 33 and part.lc.shape == (3, 33, 16)
        assert_bits_equal(part.rc, rc[:, :33])
        np.testing.assert_array_equal(s.tokens("c"), tokens)


def test_any_c_contiguous_float32_buffer_is_accepted(location):
    tokens, lc, rc, _ = make_turn(MODEL, 40, seed=3)
    with colikv.Store(location) as s:
        # memoryviews (what a CPU tensor's buffer looks like without numpy),
        # and token ids given as a list.
        s.append("c", MODEL, list(int(t) for t in tokens), memoryview(lc), memoryview(rc))
        kv = s.load("c", MODEL)
    assert_bits_equal(kv.lc, lc)
    assert_bits_equal(kv.rc, rc)


def test_empty_conversation_loads_as_empty_arrays(location):
    with colikv.Store(location) as s:
        s.create("e", MODEL_IX)
        kv = s.load("e", MODEL_IX)
    assert len(kv) == 0 and kv.tokens.shape == (0,)
    assert kv.lc.shape == (3, 0, 16) and kv.rc.shape == (3, 0, 8) and kv.ic.shape == (2, 0, 4)
