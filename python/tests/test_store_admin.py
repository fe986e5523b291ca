"""An operator's Store calls: tenants, role grants, staged creation, copies."""

import os

import pytest

import colikv
from conftest import MODEL, POSTGRES, make_turn, pg_sql


def test_tenants_lists_every_tenant_with_its_limits(location):
    tokens, lc, rc, _ = make_turn(MODEL, 30)
    with colikv.Store(location, tenant="alice") as a, colikv.Store(location, tenant="bob") as b:
        a.append("x", MODEL, tokens, lc, rc)
        a.append("y", MODEL, tokens[:10], lc, rc)
        b.set_tenant_limits(max_bytes=1 << 20, max_idle_ms=60000)
        rows = {t.name: t for t in a.tenants()}
        assert {"alice", "bob"} <= set(rows)
        assert rows["alice"].conversations == 2 and rows["alice"].stored_bytes > 0
        assert (rows["alice"].max_bytes, rows["alice"].max_idle_ms) == (None, None)
        assert (rows["bob"].conversations, rows["bob"].max_bytes, rows["bob"].max_idle_ms) == (0, 1 << 20, 60000)
        assert "alice" in repr(rows["alice"])


def test_create_tenant_false_refuses_a_new_tenant(location):
    with colikv.Store(location):
        pass
    with pytest.raises(colikv.NotFound, match="no such tenant 'carol'"):
        colikv.Store(location, tenant="carol", create_tenant=False)
    with colikv.Store(location) as s:
        assert "carol" not in [t.name for t in s.tenants()]


@pytest.mark.skipif(POSTGRES, reason="SQLite's answer; the server's is test_grant_and_revoke_a_tenant_role")
def test_grant_tenant_is_unsupported_on_sqlite(location):
    with colikv.Store(location, tenant="t") as s:
        with pytest.raises(colikv.Unsupported):
            s.grant_tenant("someone")
        with pytest.raises(colikv.Unsupported):
            s.revoke_tenant("someone")


@pytest.mark.skipif(not POSTGRES, reason="roles are PostgreSQL's (the SQLite answer is tested apart)")
def test_grant_and_revoke_a_tenant_role(location):
    role = "colikv_py_role_%d" % os.getpid()
    pg_sql("DROP ROLE IF EXISTS %s; CREATE ROLE %s" % (role, role))
    try:
        with colikv.Store(location, tenant="t") as s:
            with pytest.raises(colikv.NotFound):
                s.grant_tenant("colikv_no_such_role")
            s.grant_tenant(role)
            s.revoke_tenant(role)
            with pytest.raises(colikv.NotFound):
                s.revoke_tenant(role)
    finally:
        pg_sql("DROP OWNED BY %s; DROP ROLE IF EXISTS %s" % (role, role))


@pytest.mark.sqlite_only
def test_staged_store_has_its_name_only_once_published(tmp_path):
    path = tmp_path / "new.db"
    tokens, lc, rc, _ = make_turn(MODEL, 20)
    s = colikv.Store(path, create_staged=True)
    s.append("c", MODEL, tokens, lc, rc)
    assert not path.exists()
    s.publish()
    assert path.exists() and s.closed
    with pytest.raises(colikv.InvalidArgument, match="closed"):
        s.publish()
    with colikv.Store(path, create=False) as again:
        assert again.count("c") == 20
        with pytest.raises(colikv.InvalidArgument):
            again.publish()  # not staged: refused, the Store stays open
        assert not again.closed
    with pytest.raises(colikv.Conflict):
        colikv.Store(path, create_staged=True)
    # Closed without publish: nothing keeps the name or the temporary files.
    other = tmp_path / "dropped.db"
    with colikv.Store(other, create_staged=True) as d:
        d.append("c", MODEL, tokens, lc, rc)
    assert sorted(os.listdir(tmp_path)) == ["new.db"]


def test_copy_to_skip_existing_reports_the_same_conversation_skipped(new_location):
    tokens, lc, rc, _ = make_turn(MODEL, 25)
    src, dst = new_location(), new_location()
    with colikv.Store(src) as a, colikv.Store(dst) as b:
        a.append("c", MODEL, tokens, lc, rc)
        assert [r.skipped for r in a.copy_to(b)] == [False]
        with pytest.raises(colikv.Conflict):
            a.copy_to(b)
        again = a.copy_to(b, skip_existing=True)
        assert [(r.id, r.skipped, r.tokens) for r in again] == [("c", True, 25)]
