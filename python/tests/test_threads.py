"""Threads: appends while another thread loads, the GIL released during a
library call, append_async and wait reporting a queued failure."""

import sqlite3
import threading
import time

import numpy as np
import pytest

import colikv
from conftest import MODEL, StoreWriteLock, make_turn, assert_bits_equal


def test_threads_append_while_another_loads(location):
    n, turns, writers = 64, 6, 3
    data = {w: make_turn(MODEL, n * turns, seed=w, first_token=w) for w in range(writers)}
    errors = []
    done = threading.Event()
    loads = [0]
    with colikv.Store(location) as s:
        for w in range(writers):
            t, lc, rc, _ = data[w]
            s.append("c%d" % w, MODEL, t[:n], lc, rc)

        def writer(w):
            try:
                t, lc, rc, _ = data[w]
                for k in range(2, turns + 1):
                    s.append("c%d" % w, MODEL, t[:k * n], lc, rc)
            except Exception as e:  # reported by the main thread
                errors.append(e)

        def reader():
            try:
                while not done.is_set():
                    for w in range(writers):
                        kv = s.load("c%d" % w, MODEL)
                        t, lc, rc, _ = data[w]
                        # Whatever turn it caught, it is exactly that prefix.
                        k = len(kv)
                        assert k % n == 0 and n <= k <= n * turns
                        np.testing.assert_array_equal(kv.tokens, t[:k])
                        assert_bits_equal(kv.lc, lc[:, :k])
                        assert_bits_equal(kv.rc, rc[:, :k])
                        loads[0] += 1
            except Exception as e:
                errors.append(e)

        r = threading.Thread(target=reader)
        r.start()
        ws = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for x in ws:
            x.start()
        for x in ws:
            x.join()
        done.set()
        r.join()
        assert errors == []
        assert loads[0] >= writers
        for w in range(writers):
            t, lc, rc, _ = data[w]
            assert_bits_equal(s.load("c%d" % w, MODEL).lc, lc)


@pytest.mark.sqlite_only
def test_the_gil_is_released_while_the_library_waits(location):
    # Python's sqlite3 holds the write lock; a Python thread releases it a
    # little later. The append waits for the lock inside the library: only if
    # it released the GIL can that thread run, and the append succeed rather
    # than fail with Busy after its timeout.
    tokens, lc, rc, _ = make_turn(MODEL, 20)
    with colikv.Store(location, busy_timeout_ms=5000) as s:
        s.append("c", MODEL, tokens[:10], lc, rc)
        for call in (lambda: s.append("c", MODEL, tokens, lc, rc),
                     lambda: s.write("c", MODEL, tokens, lc, rc, start=5),
                     lambda: s.truncate("c", 3)):
            lock = sqlite3.connect(location, isolation_level=None, check_same_thread=False)
            lock.execute("BEGIN IMMEDIATE")
            releaser = threading.Thread(target=lambda: (time.sleep(0.2), lock.execute("ROLLBACK")))
            releaser.start()
            call()
            releaser.join()
            lock.close()
        assert s.count("c") == 3


def test_append_async_then_wait(location):
    tokens, lc, rc, _ = make_turn(MODEL, 200, seed=4)
    with colikv.Store(location) as s:
        for end in (50, 100, 150, 200):
            buf_lc, buf_rc = lc.copy(), rc.copy()
            s.append_async("c", MODEL, tokens[:end], buf_lc, buf_rc)
            buf_lc[:] = np.nan  # the caller may reuse its buffers at once
            buf_rc[:] = np.nan
        s.wait("c")
        assert s.count("c") == 200
        kv = s.load("c", MODEL)
        assert_bits_equal(kv.lc, lc)
        assert_bits_equal(kv.rc, rc)
        s.append_async("d", MODEL, tokens[:60], lc, rc)
    # close() committed what was queued.
    with colikv.Store(location) as s:
        assert s.count("d") == 60


def test_wait_reports_a_queued_failure(location):
    # Another connection holds the store against writers (on PostgreSQL a psql
    # session's table locks) for as long as the test says: the background
    # commit waits busy_timeout_ms for them, then fails with Busy. No race:
    # the lock is held before the turn is queued and released after wait.
    tokens, lc, rc, _ = make_turn(MODEL, 40)
    with colikv.Store(location, busy_timeout_ms=100) as s:
        s.append("c", MODEL, tokens[:10], lc, rc)
        lock = StoreWriteLock(location)  # the background commit cannot write
        s.append_async("c", MODEL, tokens[:20], lc, rc)  # validated and queued: no error here
        with pytest.raises(colikv.Busy) as e:
            s.wait("c")
        assert "'c'" in str(e.value)
        lock.release()
        s.wait("c")  # reported once, then forgotten
        assert s.count("c") == 10  # the failed turn is not stored
        s.append_async("c", MODEL, tokens[:30], lc, rc)
        s.wait()
        assert s.count("c") == 30


def test_close_raises_a_queued_failure_and_closes(location):
    tokens, lc, rc, _ = make_turn(MODEL, 40)
    s = colikv.Store(location, busy_timeout_ms=100)
    s.append("c", MODEL, tokens[:10], lc, rc)
    lock = StoreWriteLock(location)
    s.append_async("c", MODEL, tokens[:20], lc, rc)
    with pytest.raises(colikv.Busy):
        s.close()
    assert s.closed
    lock.release()
    with colikv.Store(location) as again:
        assert again.count("c") == 10
