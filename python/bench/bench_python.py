#!/usr/bin/env python3
"""Store.load into numpy and Store.append from numpy against the C++
Store::load and Store::append of the same conversation, alternating in one
run, and the peak RSS of each side's load (no second copy of a loaded
conversation: the Python side's RSS grows by the conversation's size once).

usage: bench_python.py --cpp BUILD/python/colikv_py_bench [--store DIR_OR_URI] [--rounds 5]
                       [--tokens 2048] [--layers 78] [--kv-lora 512] [--qk-rope 64]

Each measurement runs in a fresh process (the C++ program, or this script
with --child), which opens the store, times the one call, and reports its RSS
before the call and its peak after; the page cache is warm for both sides
alike. Prints one JSON document: per round both times, and the medians of
the ratios C++ time / Python time (>= 1 means Python is as fast).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(args):
    import numpy as np
    import colikv
    with colikv.Store(args.store) as s:
        info = s.info(args.id)
        m = info.model
        if args.child == "load":
            before = rss_bytes()
            t0 = time.perf_counter()
            kv = s.load(args.id, m)
            seconds = time.perf_counter() - t0
            out = {"seconds": seconds, "tokens": len(kv), "rss_before": before,
                   "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        else:
            kv = s.load(args.id, m)
            tokens = kv.tokens.copy()
            tokens[0] = args.first_token  # other chain hashes: nothing is shared
            t0 = time.perf_counter()
            s.append(args.new_id, m, tokens, kv.lc, kv.rc)
            seconds = time.perf_counter() - t0
            s.delete(args.new_id)
            out = {"seconds": seconds, "tokens": len(kv)}
    print(json.dumps(out))


def run_json(cmd):
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cpp", help="the C++ timing program (colikv_py_bench)")
    p.add_argument("--store", help="a directory for the SQLite store, or a postgresql:// URI")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--layers", type=int, default=78)
    p.add_argument("--kv-lora", type=int, default=512)
    p.add_argument("--qk-rope", type=int, default=64)
    p.add_argument("--child", choices=["load", "append"], help=argparse.SUPPRESS)
    p.add_argument("--id", default="bench", help=argparse.SUPPRESS)
    p.add_argument("--new-id", help=argparse.SUPPRESS)
    p.add_argument("--first-token", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if not args.cpp:
        p.error("--cpp is required")

    import numpy as np
    import colikv
    tmp = None
    if args.store and colikv.is_postgres_location(args.store):
        location = args.store
    else:
        tmp = tempfile.mkdtemp(dir=args.store)
        location = os.path.join(tmp, "bench.db")
    m = colikv.Model(n_layers=args.layers, kv_lora=args.kv_lora, qk_rope=args.qk_rope, vocab=154880,
                     weights_id="bench")
    n = args.tokens
    rng = np.random.default_rng(1)
    # Activation-like values: normal floats, whose mantissas do not compress.
    tokens = rng.integers(0, m.vocab, n, dtype=np.int32)
    lc = rng.standard_normal((m.n_layers, n, m.kv_lora), dtype=np.float32)
    rc = rng.standard_normal((m.n_layers, n, m.qk_rope), dtype=np.float32)
    with colikv.Store(location) as s:
        if "bench" in s:
            s.delete("bench")
        s.append("bench", m, tokens, lc, rc)
    del lc, rc
    me = [sys.executable, os.path.abspath(__file__), "--store", location]
    rounds = []
    for r in range(args.rounds):
        # Alternating, and which side goes first alternates too.
        order = ["cpp", "py"] if r % 2 == 0 else ["py", "cpp"]
        row = {}
        for side in order:
            if side == "cpp":
                row["cpp_load"] = run_json([args.cpp, location, "bench", "load"])
                row["cpp_append"] = run_json([args.cpp, location, "bench", "append", "cpp-append",
                                              str(2 * r + 1)])
            else:
                row["py_load"] = run_json(me + ["--child", "load"])
                row["py_append"] = run_json(me + ["--child", "append", "--new-id", "py-append",
                                                  "--first-token", str(2 * r + 2)])
        rounds.append(row)
        print("round %d: load C++ %.3fs Python %.3fs, append C++ %.3fs Python %.3fs" % (
            r, row["cpp_load"]["seconds"], row["py_load"]["seconds"], row["cpp_append"]["seconds"],
            row["py_append"]["seconds"]), file=sys.stderr)
    conv_bytes = n * m.floats_per_token * 4 + n * 4

    def med(key_cpp, key_py):
        return statistics.median(r[key_cpp]["seconds"] / r[key_py]["seconds"] for r in rounds)

    def growth(side):
        return statistics.median((r[side]["rss_peak"] - r[side]["rss_before"]) / conv_bytes for r in rounds)

    result = {
        "shape": {"n_layers": m.n_layers, "kv_lora": m.kv_lora, "qk_rope": m.qk_rope, "tokens": n,
                  "conversation_bytes": conv_bytes},
        "store": colikv.shown_store_location(location),
        "rounds": rounds,
        "load_speed_python_vs_cpp": med("cpp_load", "py_load"),
        "append_speed_python_vs_cpp": med("cpp_append", "py_append"),
        "load_rss_growth_per_conversation_byte": {"python": growth("py_load"), "cpp": growth("cpp_load")},
        # A second copy of the loaded conversation would add about 1.0 to
        # Python's growth over the C++ program's.
        "python_load_holds_a_second_copy": growth("py_load") - growth("cpp_load") > 0.5,
        "median_seconds": {k: statistics.median(r[k]["seconds"] for r in rounds)
                           for k in ("cpp_load", "py_load", "cpp_append", "py_append")},
    }
    print(json.dumps(result, indent=2))
    if tmp:
        import shutil
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
