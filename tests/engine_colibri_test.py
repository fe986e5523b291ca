#!/usr/bin/env python3
"""The real colibri engine with integrations/colibri/kv_persist.h swapped in,
checked against the unmodified engine built from the same source; and a third
build with integrations/colibri/store-adopt.patch, whose prefix adoption from
the store is checked against the full prefill and the engine's own live copy.

usage: engine_colibri_test.py SOURCE_DIR BUILD_DIR
The engine's sources are looked for in SOURCE_DIR/../shared/engine (the one
place the repository refers to outside itself, tests/self_contained_test.sh);
when that folder is absent the test exits 77, which CTest reports as skipped,
unless COLIKV_REQUIRE_ENGINE=1 (.ci/run sets it): then it fails.
Environment: PKG_CONFIG, SHARED (ON/OFF), CC, as the packaging tests get them.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
FAILURES = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r.stdout


class Env:
    def __init__(self, source, build, engine_dir, tmp, engines=("file", "colikv", "adopt"), models=("dsa", "nodsa")):
        self.tmp = tmp
        self.tool = os.path.join(build, "tools", "colikv")
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        pc = [os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs if f == "colikv.pc"][0]
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc))
        pkg = os.environ.get("PKG_CONFIG", "pkg-config")
        static = [] if os.environ.get("SHARED") == "ON" else ["--static"]
        cflags = run([pkg, "--cflags", "colikv"], env=env).strip()
        libs = run([pkg, "--libs"] + static + ["colikv"], env=env).strip()
        self.libdir = os.path.join(os.path.dirname(pc), "..")
        # Both engines from the same source, built at once (one core each).
        jobs = []
        # "adopt" is the colikv one with store-adopt.patch applied as the README says.
        for name in engines:
            d = os.path.join(tmp, name)
            os.makedirs(d)
            run(["tar", "xzf", os.path.join(engine_dir, "colibri.tar.gz"), "-C", d])
            make = ["make", "-C", os.path.join(d, "colibri", "c"), "colibri"]
            if name != "file":
                shutil.copy(os.path.join(source, "integrations", "colibri", "kv_persist.h"),
                            os.path.join(d, "colibri", "c", "kv_persist.h"))
                make += ["EXTRA_CFLAGS=" + cflags, "EXTRA_LDFLAGS=" + libs]
            if name == "adopt":
                with open(os.path.join(source, "integrations", "colibri", "store-adopt.patch"), "rb") as patch:
                    subprocess.run(["patch", "-p1", "--quiet", "-d", os.path.join(d, "colibri")], stdin=patch,
                                   check=True)
            jobs.append(subprocess.Popen(make, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for j in jobs:
            out = j.communicate()[0]
            if j.returncode != 0:
                sys.exit("building the engine failed:\n" + out[-4000:])
        self.engine = {n: os.path.join(tmp, n, "colibri", "c", "colibri") for n in engines}
        gen = os.path.join(engine_dir, "make_tiny_glm.py")
        self.models = {}
        for model, flags in (("dsa", []), ("nodsa", ["--no-dsa"])):
            if model not in models:
                continue
            base = os.path.join(tmp, "model-" + model)
            run([sys.executable, gen, base] + flags)
            self.models[model] = base

    def snap(self, backend, model, tag):
        """A private copy of a model folder for one backend and scenario."""
        d = os.path.join(self.tmp, "%s-%s-%s" % (backend, model, tag))
        if not os.path.exists(d):
            shutil.copytree(self.models[model], d)
        return d

    def turn(self, backend, snap, stdin, ctx=256, ngen=8, extra=None):
        env = dict(os.environ, SERVE="1", SNAP=snap, NGEN=str(ngen), CTX=str(ctx), COLI_TEMP="0", RAM_GB="4",
                   SEED="1", LD_LIBRARY_PATH=self.libdir)
        env.update(extra or {})
        r = subprocess.run([self.engine[backend], "8", "16", "16"], input=stdin, capture_output=True, env=env)
        if r.returncode != 0:
            sys.exit("%s engine failed (%d):\n%s" % (backend, r.returncode, r.stderr.decode(errors="replace")))
        return text_of(r.stdout), kv_lines(r.stderr.decode(errors="replace")), r.stderr.decode(errors="replace")

    def colikv(self, *args):
        return run([self.tool] + list(args))

    def exported(self, store, conv):
        out = os.path.join(self.tmp, "exported.coli_kv")
        self.colikv("export", store, conv, out, "--force", "--quiet")
        return open(out, "rb").read()


def text_of(out):
    """The generated bytes: stdout without the timing lines."""
    keep = [l for l in out.split(b"\n") if not re.match(rb"^(STAT|loaded in|==|HWINFO|EMAP|PROF) ", l)]
    return re.sub(rb"(?m)^(DONE \d+) STAT .*$", rb"\1", b"\n".join(keep))


def kv_lines(err):
    """The [KV] and [API] lines the engine prints, without their timings."""
    lines = [re.sub(r" in [0-9.]+s", "", l) for l in err.splitlines()
             if l.startswith("[KV] resumed") or l.startswith("[KV] saved") or l.startswith("[API]")]
    return lines


def slot_file_content(path):
    """The engine's slot file up to its count: bytes after it are left over, not content."""
    data = open(path, "rb").read()
    nrec = int.from_bytes(data[32:36], "little")
    n_layers, kv_lora, qk_rope, index_hd, n_indexed = (int.from_bytes(data[8 + 4 * i:12 + 4 * i], "little")
                                                       for i in range(5))
    rec = 4 + 4 * (n_layers * (kv_lora + qk_rope) + n_indexed * index_hd)
    return data[:40 + nrec * rec], nrec


def export_matches(env, store, conv, slot_file, what):
    content, nrec = slot_file_content(slot_file)
    check(env.exported(store, conv) == content, "%s: colikv export is byte-identical to the engine's slot file (%d records)"
          % (what, nrec))
    mode = os.stat(os.path.join(env.tmp, "exported.coli_kv")).st_mode & 0o7777
    check(mode == os.stat(slot_file).st_mode & 0o7777, "%s: colikv export has the slot file's mode (%o)" % (what, mode))


def resumed_turns(env, model):
    """Several turns, one engine process each: same text, same [KV] lines, export == file."""
    turns = [b"hello\n", b"world\n", b"tell me more\n", b"and again\n"]
    snaps = {b: env.snap(b, model, "turns") for b in ("file", "colikv")}
    wid = weights_id_of(env, snaps["colikv"])
    for i, t in enumerate(turns):
        a = env.turn("file", snaps["file"], t)
        b = env.turn("colikv", snaps["colikv"], t)
        check(a[0] == b[0] and a[0].strip() != b"", "%s turn %d: the same generated text" % (model, i))
        check(a[1] == b[1], "%s turn %d: the same [KV] lines %s" % (model, i, a[1]))
        if i > 0:
            check(any(l.startswith("[KV] resumed") for l in b[1]), "%s turn %d: resumed from the store" % (model, i))
        export_matches(env, os.path.join(snaps["colikv"], "colikv.db"), wid + "/slot0",
                       os.path.join(snaps["file"], ".coli_kv"), "%s turn %d" % (model, i))
    # Migration: the file engine's slot file, imported with the README's one
    # command, resumes warm in the colikv engine.
    migrated = os.path.join(env.tmp, "migrated-" + model)
    shutil.copytree(snaps["file"], migrated)
    env.colikv("import", os.path.join(migrated, "colikv.db"), os.path.join(migrated, ".coli_kv"),
               "--weights-id-from", migrated)
    a = env.turn("file", snaps["file"], b"after the switch\n")
    b = env.turn("colikv", migrated, b"after the switch\n")
    check(a[0] == b[0] and a[1] == b[1] and b[1][:1] and b[1][0].startswith("[KV] resumed"),
          "%s migration: an imported slot file resumes warm with the same text: %s" % (model, b[1]))


def raw_prompt(text):
    body = text.encode()
    return b"\x02PROMPT %d 8 0 1 0\n" % len(body) + body + b"\n"


def divergence(env, model):
    """A prompt sharing only a prefix: both truncate to it and save the new tail."""
    snaps = {b: env.snap(b, model, "diverge") for b in ("file", "colikv")}
    wid = weights_id_of(env, snaps["colikv"])
    for i, p in enumerate(["the quick brown fox jumps over the lazy dog", "the quick brown cat sleeps",
                           "the quick brown cat sleeps all day long"]):
        a = env.turn("file", snaps["file"], raw_prompt(p))
        b = env.turn("colikv", snaps["colikv"], raw_prompt(p))
        check(a[0] == b[0], "%s divergence %d: the same generated text" % (model, i))
        check(a[1] == b[1], "%s divergence %d: the same [KV]/[API] lines %s" % (model, i, a[1]))
        export_matches(env, os.path.join(snaps["colikv"], "colikv.db"), wid + "/slot0",
                       os.path.join(snaps["file"], ".coli_kv"), "%s divergence %d" % (model, i))


def context_overflow(env, model):
    """A conversation saved with a larger context is dropped and rewritten from record 0."""
    snaps = {b: env.snap(b, model, "overflow") for b in ("file", "colikv")}
    wid = weights_id_of(env, snaps["colikv"])
    store = os.path.join(snaps["colikv"], "colikv.db")
    for i, (t, ctx) in enumerate([(b"hello there\n", 256), (b"more words here\n", 256),
                                  (b"short\n", 40), (b"again\n", 40)]):
        a = env.turn("file", snaps["file"], t, ctx=ctx)
        b = env.turn("colikv", snaps["colikv"], t, ctx=ctx)
        check(a[0] == b[0], "%s overflow turn %d: the same generated text" % (model, i))
        check(a[1] == b[1], "%s overflow turn %d: the same [KV] lines %s" % (model, i, a[1]))
        if i == 2:
            check(any("exceeds the context" in l for l in b[1]), "%s overflow: the saved conversation is dropped" % model)
        export_matches(env, store, wid + "/slot0", os.path.join(snaps["file"], ".coli_kv"),
                       "%s overflow turn %d" % (model, i))
    check("ok" in env.colikv("verify", store).lower(), "%s overflow: the store verifies" % model)
    check(re.search(r'"id": "%s/slot0/\d+"' % re.escape(wid), env.colikv("ls", store, "--json")),
          "%s overflow: the conversation started over is kept as a fork" % model)


def model_switch(env):
    """Two models on one store: each resumes its own; one identity for both is refused, never overwritten."""
    store = os.path.join(env.tmp, "shared-store.db")
    snaps = {m: env.snap("colikv", m, "switch") for m in ("dsa", "nodsa")}
    ref = {m: env.snap("file", m, "switch") for m in ("dsa", "nodsa")}
    for i, t in enumerate([b"hello\n", b"world\n"]):
        for m in ("dsa", "nodsa"):
            a = env.turn("file", ref[m], t)
            b = env.turn("colikv", snaps[m], t, extra={"COLIKV_STORE": store})
            check(a[0] == b[0] and a[1] == b[1], "switch turn %d, model %s: same text and [KV] lines" % (i, m))
    ls = env.colikv("ls", store)
    check(ls.count("/slot0") == 2, "switch: one conversation per model in the store")
    # The same identity forced on both: the other model's conversation is refused, not overwritten.
    forced = os.path.join(env.tmp, "forced-store.db")
    env.turn("colikv", snaps["dsa"], b"hello\n", extra={"COLIKV_STORE": forced, "COLIKV_WEIGHTS_ID": "same"})
    before = env.exported(forced, "same/slot0")
    _, lines, err = env.turn("colikv", snaps["nodsa"], b"hello\n",
                             extra={"COLIKV_STORE": forced, "COLIKV_WEIGHTS_ID": "same"})
    check("model" in err and "[KV] colikv" in err and not any(l.startswith("[KV] resumed") for l in lines),
          "switch: a forced shared identity is refused, saying why")
    check(env.exported(forced, "same/slot0") == before, "switch: the other model's conversation is intact")


def kill_mid_turn(env, model):
    """kill -9 while a turn generates: the next start resumes the last committed turn."""
    snap = env.snap("colikv", model, "kill")
    wid = weights_id_of(env, snap)
    store = os.path.join(snap, "colikv.db")
    env.turn("colikv", snap, b"hello\n")
    committed = int(re.search(r"^\S+\s+(\d+)", [l for l in env.colikv("ls", store).splitlines() if "/slot0" in l][0]
                              ).group(1))
    e = dict(os.environ, SERVE="1", SNAP=snap, NGEN="200", CTX="512", COLI_TEMP="0", RAM_GB="4", SEED="1",
             LD_LIBRARY_PATH=env.libdir)
    p = subprocess.Popen([env.engine["colikv"], "8", "16", "16"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=e)
    p.stdin.write(b"a long answer please\n")
    p.stdin.flush()
    seen = b""
    while b"TIERS" not in seen:  # the turn has started generating
        chunk = p.stdout.read1(4096)
        if not chunk:
            break
        seen += chunk
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    # Killed, the engine left the store's -wal and -shm behind: all three are
    # the owner's only (main() runs under umask 022, which would allow 0644).
    modes = [os.stat(store + s).st_mode & 0o7777 if os.path.exists(store + s) else None for s in ("", "-wal", "-shm")]
    check(modes == [0o600] * 3, "%s: the adapter's store, -wal and -shm are 0600: %s"
          % (model, [oct(m) if m is not None else "missing" for m in modes]))
    _, lines, _ = env.turn("colikv", snap, b"world\n")
    check(lines[:1] == ["[KV] resumed conversation from disk: %d tokens (no re-prefill)" % committed],
          "%s kill -9 mid-turn: resumed the last committed turn (%d tokens): %s" % (model, committed, lines))
    check("ok" in env.colikv("verify", store).lower(), "%s kill -9: the store verifies" % model)


def submit(req_id, slot, prompt, ngen=8):
    body = prompt.encode()
    return b"SUBMIT %d %d %d %d 0 1\n" % (req_id, slot, len(body), ngen) + body + b"\n"


def two_slots(env, model):
    """The multiplexed server, two slots: each slot is its own conversation, resumed and truncated like its file."""
    snaps = {b: env.snap(b, model, "mux") for b in ("file", "colikv")}
    wid = weights_id_of(env, snaps["colikv"])
    mux = {"SERVE_BATCH": "1", "KV_SLOTS": "2"}
    rounds = [("hello", "world"), ("hello", "world and more"), ("hello again", "something else")]
    for i, (p0, p1) in enumerate(rounds):
        stdin = submit(1, 0, p0) + submit(2, 1, p1)
        a = env.turn("file", snaps["file"], stdin, extra=mux)
        b = env.turn("colikv", snaps["colikv"], stdin, extra=mux)
        check(a[0] == b[0], "%s two slots round %d: the same output" % (model, i))
        check(a[1] == b[1], "%s two slots round %d: the same [KV]/[API] lines %s" % (model, i, a[1]))
        for slot, name in ((0, ".coli_kv"), (1, ".coli_kv.1")):
            export_matches(env, os.path.join(snaps["colikv"], "colikv.db"), "%s/slot%d" % (wid, slot),
                           os.path.join(snaps["file"], name), "%s two slots round %d slot %d" % (model, i, slot))


SYSTEM = "you are a helpful assistant; answer briefly.\n"
TOPICS = ["apples", "rivers", "engines", "castles", "storms", "violins"]
# Six conversations over two slots, one engine process per round: conversation c's
# turn t is SYSTEM and its first t+1 user lines; each returns three times, half of
# the time on the other slot.
ROTATION = [(0, 1), (2, 3), (4, 5), (1, 0), (3, 2), (5, 4), (0, 1), (2, 3), (4, 5)]


def conversation_prompt(c, turn):
    return SYSTEM + "".join("user %d asks about %s, part %d of the story\n" % (c, TOPICS[c], i)
                            for i in range(turn + 1))


def api_slot_lines(err):
    """Per submitted slot, in order: (slot, prefix, prompt tokens, prefill, adopted (from, to) or None)."""
    out, adopted = [], None
    for line in err.splitlines():
        a = re.match(r"\[KV\] adopted \d+ tokens \[(\d+),(\d+)\) from ", line)
        if a:
            adopted = (int(a.group(1)), int(a.group(2)))
        p = re.match(r"\[API\] KV slot (\d+) prefix (\d+)/(\d+) token, prefill (\d+)", line)
        if p:
            out.append(tuple(int(g) for g in p.groups()) + (adopted,))
            adopted = None
    return out


def generated(out):
    """Request id -> the bytes of its DATA frames (docs/serve_protocol.md)."""
    texts, pos = {}, 0
    for m in re.finditer(rb"(?m)^DATA (\d+) (\d+)\n", out):
        if m.start() < pos:
            continue
        n = int(m.group(2))
        texts[int(m.group(1))] = texts.get(int(m.group(1)), b"") + out[m.end():m.end() + n]
        pos = m.end() + n
    return texts


def adoption_is_exact(env, model):
    """Adoption from the store gives the slot the very rows the engine's own cross-slot copy
    (COLI_KV_SHARE=1) gives it from a live slot: the same text and, stored, the same bits."""
    first, again = conversation_prompt(1, 0), conversation_prompt(1, 1)
    mux = {"SERVE_BATCH": "1", "KV_SLOTS": "2"}
    live = env.snap("colikv", model, "exact-live")
    ref = env.turn("colikv", live, submit(1, 1, first, ngen=1) + submit(2, 0, again), extra=dict(mux, COLI_KV_SHARE="1"))
    check(any("cross-slot adopt: slot 0 took rows [0," in l for l in ref[1]), "%s exact: the live copy happened" % model)
    stored = env.snap("adopt", model, "exact-store")
    env.turn("adopt", stored, submit(1, 1, first, ngen=1), extra=mux)
    got = env.turn("adopt", stored, submit(2, 0, again), extra=mux)
    adopted = [l for l in got[2].splitlines() if l.startswith("[KV] adopted")]
    check(len(adopted) == 1 and " [0," in adopted[0], "%s exact: adopted from the store after a restart: %s" % (model, adopted))
    check(generated(ref[0])[2] == generated(got[0])[2] != b"", "%s exact: the same text as the live copy" % model)
    wid = weights_id_of(env, live)
    conv = wid + "/slot0"
    check(env.exported(os.path.join(live, "colikv.db"), conv) == env.exported(os.path.join(stored, "colikv.db"), conv),
          "%s exact: the slot stores the same bits as after the live copy" % model)


def adoption(env, model):
    """store-adopt.patch: a conversation returning to any slot after a restart adopts its stored
    prefix instead of prefilling it, and generates the same text as with the full prefill."""
    snaps = {b: env.snap(b, model, "adopt") for b in ("colikv", "adopt")}
    wid = weights_id_of(env, snaps["colikv"])
    mux = {"SERVE_BATCH": "1", "KV_SLOTS": "2"}
    prompt_tokens = {}  # conversation -> tokens of its last prompt
    saved = prefilled = 0
    rows_differ, same, changed, outputs = [], [], [], []
    for r, convs in enumerate(ROTATION):
        turn = r // 3
        stdin = b"".join(submit(slot + 1, slot, conversation_prompt(c, turn)) for slot, c in enumerate(convs))
        full = env.turn("colikv", snaps["colikv"], stdin, extra=mux)
        outputs.append(full[0])
        adopt = env.turn("adopt", snaps["adopt"], stdin, extra=mux)
        if turn == 0:
            check(full[0] == adopt[0] and full[0].strip() != b"", "%s adoption round %d: the same output" % (model, r))
        else:
            for req in (1, 2):
                (same if generated(full[0]).get(req) == generated(adopt[0]).get(req) else changed).append((r, req - 1))
        for f, a, (slot, c) in zip(api_slot_lines(full[2]), api_slot_lines(adopt[2]), enumerate(convs)):
            check(f[0] == a[0] == slot and f[2] == a[2], "%s adoption round %d slot %d: the same prompt" % (model, r, slot))
            saved += f[3] - a[3]
            prefilled += a[3]
            if turn > 0:
                check(a[4] is not None and a[4][1] >= prompt_tokens[c] and a[1] == a[4][1],
                      "%s adoption round %d: conversation %d returning on slot %d adopts its stored prompt "
                      "(%d tokens): %s" % (model, r, c, slot, prompt_tokens[c], a))
            prompt_tokens[c] = f[2]
        for slot in (0, 1):
            conv = "%s/slot%d" % (wid, slot)
            if env.exported(os.path.join(snaps["colikv"], "colikv.db"), conv) != \
                    env.exported(os.path.join(snaps["adopt"], "colikv.db"), conv):
                rows_differ.append((r, slot))
    store = os.path.join(snaps["adopt"], "colikv.db")
    ls = env.colikv("ls", store, "--json")
    check(re.search(r'"id": "%s/slot0/\d+"' % re.escape(wid), ls) and re.search(r'"id": "%s/slot1/\d+"' % re.escape(wid), ls),
          "%s adoption: the histories slots moved on from are kept as <slot>/<n> forks" % model)
    check("ok" in env.colikv("verify", store).lower(), "%s adoption: the store verifies" % model)
    # The unmodified engine's prefill rows differ in their last bits with how the prompt
    # is split into batches (the same tokens prefilled in one batch or after a prefix
    # already held); adopted rows are those of an earlier batch, so against a full
    # prefill the text may change: reported here, never hidden. adoption_is_exact holds
    # the loaded rows to the engine's own cross-slot copy, bit for bit.
    print("%s adoption: %d prefill tokens saved of %d (%d prefilled with adoption); returning requests with the "
          "same text as the full prefill: %d, changed: %d %s; stored rows differ from the full prefill's after "
          "(round, slot) %s" % (model, saved, saved + prefilled, prefilled, len(same), len(changed), changed,
                                rows_differ or "none"))
    check(saved > 0, "%s adoption: prefill tokens saved" % model)
    adoption_under_budget(env, model, outputs)


def adoption_under_budget(env, model, outputs):
    """COLIKV_MAX_BYTES bounds a store the kept histories would grow: the least recently used
    lose their KV data (then a returning one is prefilled again) and the text stays the same."""
    snap = env.snap("adopt", model, "budget")
    store = os.path.join(snap, "colikv.db")
    budget = 400000
    extra = {"SERVE_BATCH": "1", "KV_SLOTS": "2", "COLIKV_MAX_BYTES": str(budget)}
    stored, adopted = [], 0
    for r, convs in enumerate(ROTATION):
        stdin = b"".join(submit(slot + 1, slot, conversation_prompt(c, r // 3)) for slot, c in enumerate(convs))
        out = env.turn("adopt", snap, stdin, extra=extra)
        check(generated(out[0]) == generated(outputs[r]), "%s budget round %d: the same text" % (model, r))
        adopted += sum(1 for line in out[2].splitlines() if line.startswith("[KV] adopted"))
        stored.append(int(re.search(r'"total": \{[^}]*"stored_bytes": (\d+)', env.colikv("stats", store, "--json"), re.S)
                          .group(1)))
    check(max(stored) <= budget, "%s budget: the store's KV data stays within COLIKV_MAX_BYTES=%d: %s"
          % (model, budget, stored))
    print("%s budget: %d of 12 returning requests adopted a prefix; stored bytes after each round %s" % (model, adopted, stored))


def store_error(env, model):
    """A store that cannot be opened: the engine says so and runs on, as without a slot file."""
    a = env.turn("file", env.snap("file", model, "error"), b"hello\n")
    b = env.turn("colikv", env.snap("colikv", model, "error"), b"hello\n",
                 extra={"COLIKV_STORE": os.path.join(env.tmp, "no-such-dir", "s.db")})
    check(a[0] == b[0], "%s store error: the engine runs on with the same text" % model)
    check("[KV] colikv: cannot open" in b[2] and "running without persistence" in b[2],
          "%s store error: logged as [KV]" % model)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, build = (os.path.abspath(a) for a in sys.argv[1:])
    engine_dir = os.path.normpath(os.path.join(source, "..", "shared", "engine"))
    if not os.path.isfile(os.path.join(engine_dir, "colibri.tar.gz")):
        if os.environ.get("COLIKV_REQUIRE_ENGINE") == "1":
            sys.exit("FAIL engine_colibri: %s is absent and COLIKV_REQUIRE_ENGINE=1" % engine_dir)
        print("SKIPPED engine_colibri: %s is absent (the engine's sources beside the clone)" % engine_dir)
        return SKIP
    t0 = time.time()
    os.umask(0o022)  # the usual umask, under which a store must still be 0600
    with tempfile.TemporaryDirectory(prefix="colikv-engine-") as tmp:
        env = Env(source, build, engine_dir, tmp)
        print("built both engines and the models in %.1f s" % (time.time() - t0), flush=True)
        for model in ("dsa", "nodsa"):
            resumed_turns(env, model)
            divergence(env, model)
            context_overflow(env, model)
            kill_mid_turn(env, model)
            two_slots(env, model)
            if model == "nodsa":  # the unmodified engine's COLI_KV_SHARE=1 crashes (SIGSEGV) on a DSA model
                adoption_is_exact(env, model)
            adoption(env, model)
            store_error(env, model)
        model_switch(env)
    print("%d failures in %.1f s" % (len(FAILURES), time.time() - t0))
    return 1 if FAILURES else 0


def weights_id_of(env, snap):
    """The identity the adapter uses: the CLI computes it the same way (import --weights-id-from)."""
    probe = os.path.join(env.tmp, "probe-%d.db" % time.monotonic_ns())
    sample = os.path.join(env.tmp, "probe.coli_kv")
    if not os.path.exists(sample):
        with open(sample, "wb") as f:  # an empty conversation of a tiny shape
            f.write(b"COLIKV1\0" + b"".join(v.to_bytes(4, "little") for v in (1, 1, 1, 0, 0, 2, 0, 0)))
    env.colikv("import", probe, sample, "--id", "probe", "--weights-id-from", snap, "--quiet")
    info = env.colikv("info", probe, "probe", "--json")
    return re.search(r'"weights_id": "([^"]*)"', info).group(1)


if __name__ == "__main__":
    sys.exit(main())
