#!/usr/bin/env python3
"""Loads a stored conversation and prints its per-layer norms and, against
another conversation (its fork parent by default), where the two diverge:
the first position whose token differs, and the first whose values differ.

usage: inspect_conversation.py STORE ID [--vs OTHER] [--json]

STORE is a SQLite file or a postgresql:// URI. With the module installed:
PYTHONPATH=PREFIX/lib/python3/dist-packages python3 inspect_conversation.py kv.db slot-3
"""

import argparse
import json
import sys

import numpy as np

import colikv


def shown(text):
    """Store text for a terminal: control characters escaped, never printed raw."""
    return "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256 else "\\u%04x" % ord(c)
                   for c in text)


def layer_norms(kv):
    """Per layer: the L2 norm over all positions of the latent and of the rotary key."""
    return [{"layer": layer,
             "lc_norm": float(np.linalg.norm(kv.lc[layer])),
             "rc_norm": float(np.linalg.norm(kv.rc[layer]))} for layer in range(kv.model.n_layers)]


def divergence(a, b):
    """Where two conversations of one model part: by token id, then by value."""
    n = min(len(a), len(b))
    differ = np.nonzero(a.tokens[:n] != b.tokens[:n])[0]
    token_pos = int(differ[0]) if differ.size else n
    # Positions whose values differ in any layer (bitwise, so NaN == NaN and -0.0 != 0.0).
    lc_diff = (a.lc[:, :n].view(np.uint32) != b.lc[:, :n].view(np.uint32)).any(axis=(0, 2))
    rc_diff = (a.rc[:, :n].view(np.uint32) != b.rc[:, :n].view(np.uint32)).any(axis=(0, 2))
    value_differ = np.nonzero(lc_diff | rc_diff)[0]
    value_pos = int(value_differ[0]) if value_differ.size else n
    per_layer = []
    if value_pos < n:
        d = np.abs(a.lc[:, value_pos:n].astype(np.float64) - b.lc[:, value_pos:n])
        per_layer = [float(x) for x in np.nanmax(d, axis=(1, 2))]
    return {"common_length": n, "first_token_difference": token_pos, "first_value_difference": value_pos,
            "lengths": [len(a), len(b)], "lc_max_abs_difference_per_layer": per_layer}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("id")
    p.add_argument("--vs", help="the conversation to compare with (default: the fork parent, if any)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        with colikv.Store(a.store, create=False, read_only=True) as s:
            info = s.info(a.id)
            kv = s.load(a.id, info.model)
            other_id = a.vs or info.parent
            other = s.load(other_id, info.model) if other_id else None
    except colikv.Error as e:
        print("inspect_conversation: %s" % shown(str(e)), file=sys.stderr)
        return 1
    out = {"id": a.id, "model": str(info.model), "tokens": len(kv), "layers": layer_norms(kv)}
    if other is not None:
        out["vs"] = other_id
        out["divergence"] = divergence(kv, other)
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print("conversation %s: %d tokens, model %s" % (shown(a.id), len(kv), shown(out["model"])))
    print("%6s %14s %14s" % ("layer", "|lc|", "|rc|"))
    for row in out["layers"]:
        print("%6d %14.6g %14.6g" % (row["layer"], row["lc_norm"], row["rc_norm"]))
    if other is not None:
        d = out["divergence"]
        print("against %s (%d tokens): tokens equal up to position %d, values equal up to position %d" %
              (shown(other_id), len(other), d["first_token_difference"], d["first_value_difference"]))
        if d["lc_max_abs_difference_per_layer"]:
            print("  max |lc difference| per layer from there: " +
                  " ".join("%.3g" % x for x in d["lc_max_abs_difference_per_layer"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
