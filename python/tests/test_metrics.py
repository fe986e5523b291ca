"""What a Store counted (Store.metrics, colikv.process_metrics), what a store
holds (Store.gauges), and the Prometheus text (Store.metrics_text)."""

import pytest

import colikv
from conftest import MODEL, make_turn


def test_store_metrics_count_its_appends_loads_and_matches(location):
    tokens, lc, rc, _ = make_turn(MODEL, 40)
    with colikv.Store(location, tenant="acme") as s:
        s.append("a", MODEL, tokens, lc, rc)
        s.load("a", MODEL)
        assert s.match(MODEL, tokens[:30]) == ("a", 30)
        with pytest.raises(colikv.NotFound):
            s.load("missing", MODEL)
        m = s.metrics()
        assert m["tenant"] == "acme"
        assert (m["appends"], m["append_turns"], m["append_tokens"]) == (1, 1, 40)
        assert m["append_stored_bytes"] > 0 and m["append_raw_bytes"] > 0
        assert (m["loads"], m["load_tokens"]) == (1, 40)
        assert (m["match_queries"], m["match_answers"], m["match_tokens"]) == (1, 1, 30)
        assert m["errors"] == {"not found": 1}
        h = m["append_seconds"]
        assert h["count"] == 1 and sum(h["counts"]) == 1
        assert len(h["counts"]) == len(h["upper_bounds"]) + 1
    # The process keeps a closed Store's counts.
    acme = [p for p in colikv.process_metrics() if p["tenant"] == "acme"]
    assert len(acme) == 1 and acme[0]["append_tokens"] >= 40


def test_store_gauges_and_metrics_text(location):
    tokens, lc, rc, _ = make_turn(MODEL, 25)
    with colikv.Store(location, tenant="g") as s:
        s.append("x", MODEL, tokens, lc, rc)
        g = s.gauges()
        rows = [r for r in g["rows"] if r["tenant"] == "g"]
        assert len(rows) == 1
        assert (rows[0]["conversations"], rows[0]["tokens"]) == (1, 25)
        assert rows[0]["stored_bytes"] > 0 and g["file_bytes"] > 0
        text = s.metrics_text()
        assert "# TYPE colikv_append_tokens_total counter" in text
        assert 'colikv_append_tokens_total{tenant="g"} 25' in text
