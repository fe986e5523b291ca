#!/usr/bin/env python3
"""Draws one conversation into a PNG: the norm of each layer's latent (lc)
at every position, and, against another conversation (its fork parent by
default), how far the two differ at each position and where they diverge.

usage: plot_conversation.py SOURCE [ID] [--vs OTHER] -o OUT.png

SOURCE is a store (a SQLite file or a postgresql:// URI; ID names the
conversation) or an engine's .coli_kv file (then --vs may name another
.coli_kv file). Needs matplotlib (Debian: python3-matplotlib).
"""

import argparse
import sys

import numpy as np

import colikv
from inspect_conversation import divergence, shown


def load(source, id, vs):
    """The conversation, and the one to compare with (None if none)."""
    if source.endswith(".coli_kv"):
        kv = colikv.read_coli_kv(source)
        return kv, colikv.read_coli_kv(vs) if vs else None
    if id is None:
        raise SystemExit("plot_conversation: a store needs the conversation's ID")
    with colikv.Store(source, create=False, read_only=True) as s:
        info = s.info(id)
        other_id = vs or info.parent
        return s.load(id, info.model), s.load(other_id, info.model) if other_id else None


def position_differences(a, b, n):
    """Per position in [0, n): the largest |difference| over every layer and value of lc and rc."""
    lc = np.abs(a.lc[:, :n].astype(np.float64) - b.lc[:, :n]).max(axis=(0, 2), initial=0.0)
    rc = np.abs(a.rc[:, :n].astype(np.float64) - b.rc[:, :n]).max(axis=(0, 2), initial=0.0)
    return np.maximum(lc, rc)


def plot(kv, other, out_path):
    import matplotlib
    matplotlib.use("Agg")  # a file, no display
    import matplotlib.pyplot as plt

    rows = 2 if other is not None else 1
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3.2 * rows), squeeze=False)
    ax = axes[0][0]
    norms = np.linalg.norm(kv.lc, axis=2)  # (n_layers, n)
    image = ax.imshow(norms, aspect="auto", interpolation="nearest", cmap="viridis",
                      extent=(-0.5, len(kv) - 0.5, kv.model.n_layers - 0.5, -0.5))
    fig.colorbar(image, ax=ax, label="|lc|")
    ax.set_title("%s: per-layer |lc| along %d positions" % (shown(kv.id), len(kv)))
    ax.set_xlabel("position")
    ax.set_ylabel("layer")
    summary = {}
    if other is not None:
        d = divergence(kv, other)
        n = d["common_length"]
        diff = position_differences(kv, other, n)
        ax2 = axes[1][0]
        ax2.plot(np.arange(n), diff, color="tab:red", drawstyle="steps-mid")
        ax2.set_xlim(-0.5, max(len(kv), 1) - 0.5)
        for pos, label, style in ((d["first_value_difference"], "values diverge", "--"),
                                  (d["first_token_difference"], "tokens diverge", ":")):
            if pos < n:
                ax.axvline(pos - 0.5, color="white", linestyle=style)
                ax2.axvline(pos - 0.5, color="black", linestyle=style, label="%s at %d" % (label, pos))
        if n:
            ax2.legend(loc="upper left")
        ax2.set_title("against %s: max |difference| per position" % shown(other.id))
        ax2.set_xlabel("position")
        ax2.set_ylabel("max |lc, rc difference|")
        summary = d
    fig.tight_layout()
    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return summary


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source")
    p.add_argument("id", nargs="?")
    p.add_argument("--vs", help="the conversation (or .coli_kv file) to compare with")
    p.add_argument("-o", "--output", required=True, help="the PNG to write")
    a = p.parse_args(argv)
    try:
        kv, other = load(a.source, a.id, a.vs)
    except colikv.Error as e:
        print("plot_conversation: %s" % shown(str(e)), file=sys.stderr)
        return 1
    d = plot(kv, other, a.output)
    print("wrote %s: %s, %d positions, %d layers" % (shown(a.output), shown(kv.id), len(kv), kv.model.n_layers))
    if d:
        print("against %s: tokens equal up to position %d, values equal up to position %d" %
              (shown(other.id), d["first_token_difference"], d["first_value_difference"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
