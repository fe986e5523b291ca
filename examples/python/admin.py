#!/usr/bin/env python3
"""Lists a store's conversations by idle time (longest idle first) and, with
--delete, deletes those idle for longer than --idle. A gateway operator runs
it next to openai_server.py, e.g. from cron:

    admin.py kv.db --idle 7d --delete

usage: admin.py STORE [--idle DURATION] [--delete] [--json]

DURATION is seconds, or a number with s, m, h or d. Without --delete nothing
changes (the conversations that would go are marked). STORE is a SQLite file
or a postgresql:// URI.
"""

import argparse
import json
import sys
import time

import colikv

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def shown(text):
    """Store text for a terminal: control characters escaped, never printed raw."""
    return "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256 else "\\u%04x" % ord(c)
                   for c in text)


def parse_duration(text):
    unit = UNITS.get(text[-1:], None)
    number = text[:-1] if unit else text
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError("--idle: %r is not a duration (seconds, or N with s, m, h or d)" % text)
    if value < 0:
        raise argparse.ArgumentTypeError("--idle: %r is negative" % text)
    return value * (unit or 1)


def idle_text(seconds):
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return "%.1f%s" % (seconds / size, unit)
    return "%.0fs" % seconds


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("--idle", type=parse_duration, help="the idle time past which a conversation goes")
    p.add_argument("--delete", action="store_true", help="delete the conversations idle longer than --idle")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.delete and a.idle is None:
        p.error("--delete needs --idle")
    now_ms = time.time() * 1000
    deleted = []
    try:
        with colikv.Store(a.store, create=False, read_only=not a.delete) as s:
            rows = sorted(s.conversations(), key=lambda c: c.last_used_ms)
            listed = []
            for c in rows:
                idle = max(0.0, (now_ms - c.last_used_ms) / 1000)
                goes = a.idle is not None and idle > a.idle
                listed.append({"id": c.id, "tokens": c.tokens, "stored_bytes": c.stored_bytes,
                               "idle_seconds": round(idle, 3), "idle": goes})
                if goes and a.delete:
                    s.delete(c.id)
                    deleted.append(c.id)
    except colikv.Error as e:
        print("admin: %s" % shown(str(e)), file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"store": colikv.shown_store_location(a.store), "conversations": listed,
                          "deleted": deleted}, indent=2))
        return 0
    if not listed:
        print("no conversations in %s" % shown(colikv.shown_store_location(a.store)))
        return 0
    print("%-32s %10s %12s %10s" % ("conversation", "tokens", "stored", "idle"))
    for r in listed:
        mark = (" deleted" if a.delete else " idle") if r["idle"] else ""
        print("%-32s %10d %12d %10s%s" % (shown(r["id"]), r["tokens"], r["stored_bytes"],
                                          idle_text(r["idle_seconds"]), mark))
    if a.idle is not None:
        verb = "deleted" if a.delete else "idle (run with --delete to delete them)"
        print("%d of %d conversations %s" % (sum(r["idle"] for r in listed), len(listed), verb))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
