"""examples/python: inspect_conversation.py, admin.py and plot_conversation.py, run as a user runs them."""

import json
import time

import numpy as np

import colikv
from conftest import MODEL, make_turn, run_example, store_exec


def test_inspect_conversation_norms_and_divergence(location):
    tokens, lc, rc, _ = make_turn(MODEL, 60)
    with colikv.Store(location) as s:
        s.append("base", MODEL, tokens, lc, rc)
        s.fork("base", "fork\x1b[31m", at=25)
        # The fork continues with the same tokens but other values from 40 on.
        lc2 = lc.copy()
        lc2[1, 40:] += 1.0
        s.append("fork\x1b[31m", MODEL, tokens, lc2, rc)
    r = run_example("inspect_conversation.py", location, "fork\x1b[31m", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tokens"] == 60 and out["vs"] == "base"
    norms = [row["lc_norm"] for row in out["layers"]]
    np.testing.assert_allclose(norms, [np.linalg.norm(lc2[i]) for i in range(3)], rtol=1e-6)
    d = out["divergence"]
    assert d["first_token_difference"] == 60 and d["first_value_difference"] == 40
    assert d["lc_max_abs_difference_per_layer"][0] == 0 and d["lc_max_abs_difference_per_layer"][1] > 0.5
    human = run_example("inspect_conversation.py", location, "fork\x1b[31m")
    assert human.returncode == 0 and "values equal up to position 40" in human.stdout
    assert "\x1b" not in human.stdout and "\\x1b" in human.stdout
    missing = run_example("inspect_conversation.py", location, "nope")
    assert missing.returncode == 1 and "'nope'" in missing.stderr


def test_admin_lists_by_idle_time_and_deletes_the_idle(location):
    tokens, lc, rc, _ = make_turn(MODEL, 20)
    now_ms = int(time.time() * 1000)
    with colikv.Store(location) as s:
        for id in ("fresh", "day-old", "week-old"):
            s.append(id, MODEL, tokens, lc, rc)
    store_exec(location, "UPDATE conversations SET last_used_ms = %d WHERE name = 'day-old'" % (now_ms - 86400000))
    store_exec(location, "UPDATE conversations SET last_used_ms = %d WHERE name = 'week-old'" % (now_ms - 7 * 86400000))
    listed = run_example("admin.py", location, "--idle", "2d", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["conversations"]
    assert [r["id"] for r in rows] == ["week-old", "day-old", "fresh"]
    assert [r["idle"] for r in rows] == [True, False, False]
    with colikv.Store(location) as s:
        assert len(s) == 3  # listing changed nothing
    human = run_example("admin.py", location, "--idle", "12h", "--delete")
    assert human.returncode == 0, human.stderr
    assert "2 of 3 conversations deleted" in human.stdout
    with colikv.Store(location) as s:
        assert [c.id for c in s.conversations()] == ["fresh"]
    bad = run_example("admin.py", location, "--idle", "soon")
    assert bad.returncode == 2 and "--idle" in bad.stderr


def png_pixels(path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image
    return matplotlib.image.imread(path)


def test_plot_conversation_draws_the_sample_file(sample, tmp_path):
    out = tmp_path / "sample.png"
    r = run_example("plot_conversation.py", sample, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "51 positions, 5 layers" in r.stdout
    pixels = png_pixels(str(out))
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert pixels[..., :3].var() > 1e-3, "the PNG is blank"


def test_plot_conversation_marks_where_two_forks_diverge(sample, location, tmp_path):
    with colikv.Store(location) as s:
        s.import_coli_kv(sample, id="base")
        kv = s.load("base", s.info("base").model)
        s.fork("base", "fork", at=20)
        lc = kv.lc.copy()
        lc[2, 30:] += 3.0  # the fork goes on with the same tokens but other values from 30 on
        s.append("fork", kv.model, kv.tokens, lc, kv.rc)
    alone = tmp_path / "alone.png"
    assert run_example("plot_conversation.py", location, "base", "-o", str(alone)).returncode == 0
    out = tmp_path / "fork.png"
    r = run_example("plot_conversation.py", location, "fork", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "against base: tokens equal up to position 51, values equal up to position 30" in r.stdout
    with_fork, without = png_pixels(str(out)), png_pixels(str(alone))
    assert with_fork[..., :3].var() > 1e-3
    assert with_fork.shape[0] > without.shape[0], "no panel for the divergence"
    missing = run_example("plot_conversation.py", location, "nope", "-o", str(tmp_path / "x.png"))
    assert missing.returncode == 1 and "'nope'" in missing.stderr and not (tmp_path / "x.png").exists()
