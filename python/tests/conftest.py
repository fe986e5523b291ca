"""The Python suite's backends and helpers.

Registered twice by python/CMakeLists.txt: on SQLite files, and with
COLIKV_TEST_BACKEND=postgres on the server whose URI is in COLIKV_TEST_PG_URI
(each test a fresh schema of it). Without a server the PostgreSQL run exits 77,
which CTest reports as skipped; with COLIKV_REQUIRE_PG=1 it fails instead.
"""

import glob
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

import colikv

POSTGRES = os.environ.get("COLIKV_TEST_BACKEND") == "postgres"
PG_URI = os.environ.get("COLIKV_TEST_PG_URI", "")


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only: needs a SQLite file (a lock taken by Python's sqlite3, "
                                       "or bytes that PostgreSQL's text refuses)")


def pytest_sessionstart(session):
    if POSTGRES and not PG_URI:
        if os.environ.get("COLIKV_REQUIRE_PG") == "1":
            pytest.exit("COLIKV_REQUIRE_PG=1 but COLIKV_TEST_PG_URI is not set: no PostgreSQL server to test on",
                        returncode=1)
        pytest.exit("skipped: no PostgreSQL server (set COLIKV_TEST_PG_URI, or run tools/dev.sh test)", returncode=77)


def psql():
    found = shutil.which("psql") or sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1:]
    if not found:
        raise RuntimeError("no psql (Debian package postgresql-client) to create test schemas with")
    return found if isinstance(found, str) else found[0]


def pg_sql(sql):
    subprocess.run([psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", PG_URI, "-c", sql], check=True,
                   stdout=subprocess.DEVNULL)


_schemas = []


def fresh_pg_store():
    schema = "py%d_%d_%d" % (os.getpid(), len(_schemas), random.randrange(100000))
    pg_sql("DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s" % (schema, schema))
    _schemas.append(schema)
    sep = "&" if "?" in PG_URI else "?"
    return PG_URI + sep + "options=-csearch_path%3D" + schema


def pytest_sessionfinish(session, exitstatus):
    if _schemas:
        pg_sql("; ".join("DROP SCHEMA IF EXISTS %s CASCADE" % s for s in _schemas))


@pytest.fixture
def new_location(tmp_path):
    """A function returning the location of a new empty store each call."""
    counter = [0]

    def make():
        counter[0] += 1
        if POSTGRES:
            return fresh_pg_store()
        return str(tmp_path / ("store%d.db" % counter[0]))

    return make


@pytest.fixture
def location(new_location):
    return new_location()


@pytest.fixture
def tool():
    path = os.environ.get("COLIKV_TOOL", "")
    if not path:  # ctest always sets it; .ci/wheel.sh builds the module alone
        pytest.skip("COLIKV_TOOL not set: no colikv tool built beside the module")
    assert os.access(path, os.X_OK), "COLIKV_TOOL=%s is not an executable" % path
    return path


@pytest.fixture
def sample():
    d = os.environ.get("COLIKV_SAMPLE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data")
    path = os.path.join(d, "glm_tiny_nodsa_51.coli_kv")
    assert os.path.isfile(path), path
    return path


# A small model, with and without an indexer.
MODEL = colikv.Model(n_layers=3, kv_lora=16, qk_rope=8, vocab=5000, weights_id="wtest")
MODEL_IX = colikv.Model(n_layers=3, kv_lora=16, qk_rope=8, index_hd=4, n_indexed=2, vocab=5000, weights_id="wix")


def make_turn(model, n, seed=0, first_token=0):
    """Tokens and KV arrays of n positions, distinct per seed."""
    rng = np.random.default_rng(seed)
    tokens = ((np.arange(n, dtype=np.int64) * 7 + first_token) % model.vocab).astype(np.int32)
    lc = rng.standard_normal((model.n_layers, n, model.kv_lora), dtype=np.float32)
    rc = rng.standard_normal((model.n_layers, n, model.qk_rope), dtype=np.float32)
    ic = rng.standard_normal((model.n_indexed, n, model.index_hd), dtype=np.float32) if model.n_indexed else None
    return tokens, lc, rc, ic


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def assert_bits_equal(a, b):
    assert a.shape == b.shape
    np.testing.assert_array_equal(bits(a), bits(b))


def store_exec(location, sql):
    """Plain SQL on a store through a connection of its own (the same SQL on both backends)."""
    if POSTGRES:
        subprocess.run([psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", location, "-c", sql], check=True,
                       stdout=subprocess.DEVNULL)
        return
    import sqlite3
    con = sqlite3.connect(location, isolation_level=None)
    try:
        con.execute(sql)
    finally:
        con.close()


class StoreWriteLock:
    """Another connection holding the store against writers (readers go on),
    until release(): on SQLite a BEGIN IMMEDIATE of Python's sqlite3; on
    PostgreSQL a psql session's transaction holding the store's tables in
    EXCLUSIVE mode (which only plain reads pass), taken before this returns:
    pg_locks shows it granted."""

    TABLES = "conversations, conversation_chunks, chunks"

    def __init__(self, location):
        self.location = location
        if not POSTGRES:
            import sqlite3
            self.con = sqlite3.connect(location, isolation_level=None, check_same_thread=False)
            self.con.execute("BEGIN IMMEDIATE")
            return
        self.proc = subprocess.Popen([psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", location], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True)
        self.proc.stdin.write("BEGIN; LOCK TABLE %s IN EXCLUSIVE MODE;\n" % self.TABLES)
        self.proc.stdin.flush()
        import time
        deadline = time.monotonic() + 60  # a guard against a hang, not a timing assertion
        while self._granted() < 3:
            assert self.proc.poll() is None, "psql exited before it held the lock"
            assert time.monotonic() < deadline, "psql did not get the lock"
            time.sleep(0.02)

    def _granted(self):
        sql = ("SELECT count(*) FROM pg_locks WHERE granted AND mode = 'ExclusiveLock' AND relation IN "
               "('conversations'::regclass, 'conversation_chunks'::regclass, 'chunks'::regclass)")
        out = subprocess.run([psql(), "-X", "-q", "-t", "-A", self.location, "-c", sql], check=True,
                             capture_output=True, text=True).stdout
        return int(out.strip())

    def release(self):
        if not POSTGRES:
            self.con.execute("ROLLBACK")
            self.con.close()
            return
        self.proc.stdin.write("ROLLBACK;\n")
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python")


def run_example(name, *args):
    """Runs examples/python/NAME with this interpreter and the module under test."""
    import sys
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True, text=True)
