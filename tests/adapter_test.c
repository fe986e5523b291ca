/* The engine adapter, integrations/colibri/kv_persist.h, around a mock engine,
 * with a fault injected at each of its failure branches: a busy store (another
 * connection holding SQLite's lock), another writer changing the slot between
 * the engine's calls (the conflict case), evicted KV data, and a chunk that
 * fails its checks (an I/O-level read failure). It checks what the store holds
 * afterwards, and that the adapter logged each failure. Scenario metrics_file
 * has the adapter write COLIKV_METRICS_FILE and a real node_exporter (its
 * textfile collector; the path is COLIKV_NODE_EXPORTER, required) serve it.
 *
 * usage: colikv_adapter_test DIR          runs every scenario in DIR (emptied first)
 *        colikv_adapter_test DIR SCENARIO runs one
 * Each engine run is this program again (exec'd, never just forked: SQLite
 * state must not cross a fork): colikv_adapter_test --engine DIR SLOT STEP...
 * Exits 0 when every check passes; otherwise prints the failing check. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The engine's types, as kv_persist.h expects them (as in colibri.c). */
typedef struct { int n_layers, kv_lora, qk_rope, index_hd, vocab; } Cfg;
typedef struct { int disk_nrec; char disk_path[2048]; } KVState;
typedef struct { Cfg c; KVState *kv; int has_dsa, has_mtp; float **Lc, **Rc, **Ic; int *kv_start; } Model;
static double now_s(void) { return 0; }
static int g_draft = 0;
#include "kv_persist.h"

#define NL 2
#define KL 16
#define QR 4
#define VOCAB 5000
#define CTX 1024
#define WID "wadapter"

static const char *g_self;

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stdout, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

/* Conversation `seed`'s token at p: conversations share their first `shared`
 * tokens with seed 0's when shared > 0 (see tok). */
static int tok(int seed, int p) { return (int)((uint32_t)(seed * 7919 + p * 104729 + p * p) % (VOCAB - 10)) + 5; }

/* The rows a token history makes at position p: a hash of the history up to p,
 * so that equal prefixes have equal rows whichever conversation holds them. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static float row_value(uint64_t h, int l, int plane, int j) {
  return (float)(int64_t)(mix(h ^ ((uint64_t)l << 40) ^ ((uint64_t)plane << 32) ^ (uint64_t)j) % 20001) / 7.0f;
}

/* ---------------------------------------------------------------------------
 * The engine side: one run of a mock engine on one slot. */

static Model g_m;
static KVState g_kv;
static int g_hist[CTX];

static void compute_rows(const int *t, int to, int from) {
  uint64_t h = 12345;
  for (int p = 0; p < to; p++) {
    h = mix(h ^ (uint64_t)t[p]);
    if (p < from) continue;
    for (int l = 0; l < NL; l++) {
      for (int j = 0; j < KL; j++) g_m.Lc[l][p * KL + j] = row_value(h, l, 0, j);
      for (int j = 0; j < QR; j++) g_m.Rc[l][p * QR + j] = row_value(h, l, 1, j);
    }
  }
}

/* The first position in [from, to) whose rows are not what the history makes; -1 if none. */
static int wrong_row(const int *t, int from, int to) {
  uint64_t h = 12345;
  for (int p = 0; p < to; p++) {
    h = mix(h ^ (uint64_t)t[p]);
    if (p < from) continue;
    for (int l = 0; l < NL; l++) {
      for (int j = 0; j < KL; j++) if (g_m.Lc[l][p * KL + j] != row_value(h, l, 0, j)) return p;
      for (int j = 0; j < QR; j++) if (g_m.Rc[l][p * QR + j] != row_value(h, l, 1, j)) return p;
    }
  }
  return -1;
}

/* The driver's turn: the engine says it reached point `at`, then waits for
 * the driver to let it go on (files in DIR, so that no pipe or signal is needed). */
static void sync_point(const char *dir, const char *at) {
  char path[4096];
  snprintf(path, sizeof path, "%s/at.%s", dir, at);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  snprintf(path, sizeof path, "%s/go.%s", dir, at);
  while (access(path, F_OK) != 0) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

/* The prompt of a step: "SEED:N" is conversation SEED's first N tokens;
 * "SEED:N:K:SEED2" is SEED's first K then SEED2's tokens up to N. */
static int parse_prompt(const char *spec, int *prompt) {
  int seed = 0, n = 0, k = -1, seed2 = 0;
  int got = sscanf(spec, "%d:%d:%d:%d", &seed, &n, &k, &seed2);
  if (got < 2 || n > CTX) { fprintf(stderr, "bad prompt %s\n", spec); exit(2); }
  for (int p = 0; p < n; p++) prompt[p] = (got == 4 && p >= k) ? tok(seed2, p) : tok(seed, p);
  return n;
}

/* Steps, run in order:
 *   open               kv_disk_open (the engine opens the store at start)
 *   load               kv_disk_load; prints "resumed N"
 *   serve PROMPT       truncates the history to its common prefix with PROMPT, computes the rest, kv_disk_append
 *   adopt PROMPT       kv_disk_adopt of PROMPT; prints "adopted N" and checks the adopted rows and ids
 *   sync NAME          waits for the driver (sync_point) */
static int engine_main(int argc, char **argv) {
  const char *dir = argv[2];
  int slot = atoi(argv[3]);
  if (slot == 0) snprintf(g_kv.disk_path, sizeof g_kv.disk_path, "%s/.coli_kv", dir);
  else snprintf(g_kv.disk_path, sizeof g_kv.disk_path, "%s/.coli_kv.%d", dir, slot);
  g_m.c = (Cfg){NL, KL, QR, 0, VOCAB};
  g_m.kv = &g_kv;
  g_m.Lc = calloc(NL, sizeof(float *));
  g_m.Rc = calloc(NL, sizeof(float *));
  for (int l = 0; l < NL; l++) {
    g_m.Lc[l] = calloc((size_t)KL * CTX, sizeof(float));
    g_m.Rc[l] = calloc((size_t)QR * CTX, sizeof(float));
  }
  static int prompt[CTX];
  int len = 0;
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "open")) {
      if (!kv_disk_open(&g_m)) printf("no store\n");
    } else if (!strcmp(argv[i], "load")) {
      len = kv_disk_load(&g_m, g_hist, CTX);
      printf("resumed %d\n", len);
      int bad = wrong_row(g_hist, 0, len);
      if (bad >= 0) printf("WRONG-ROWS at %d\n", bad);
    } else if (!strcmp(argv[i], "serve") && i + 1 < argc) {
      int n = parse_prompt(argv[++i], prompt);
      int prefix = 0;
      while (prefix < len && prefix < n && g_hist[prefix] == prompt[prefix]) prefix++;
      if (prefix < len) { len = prefix; kv_disk_truncate(&g_m, len); }
      memcpy(g_hist + len, prompt + len, (size_t)(n - len) * sizeof(int));
      compute_rows(g_hist, n, len);
      len = n;
      kv_disk_append(&g_m, g_hist, len);
    } else if (!strcmp(argv[i], "adopt") && i + 1 < argc) {
      int n = parse_prompt(argv[++i], prompt);
      int got = kv_disk_adopt(&g_m, g_hist, len, prompt, n);
      printf("adopted %d\n", got);
      for (int p = len; p < got; p++) if (g_hist[p] != prompt[p]) { printf("ADOPT-WRONG token at %d\n", p); break; }
      int bad = wrong_row(g_hist, len, got);
      if (bad >= 0) printf("ADOPT-WRONG rows at %d\n", bad);
      len = got;
    } else if (!strcmp(argv[i], "sync") && i + 1 < argc) {
      fflush(stdout);
      sync_point(dir, argv[++i]);
    } else {
      fprintf(stderr, "unknown step %s\n", argv[i]);
      return 2;
    }
    fflush(stdout);
  }
  return 0; /* exit(): the adapter's atexit handler waits for the queued turns and closes */
}

/* ---------------------------------------------------------------------------
 * The driver side: starts engine runs, injects faults, checks the store. */

static char g_dir[2048], g_store_path[2200];
static int g_run;  /* engine runs so far: names their output files */
static const char *g_tenant;  /* COLIKV_TENANT of the engine runs; NULL: unset */
static const char *g_metrics_file;  /* COLIKV_METRICS_FILE of the engine runs; NULL: unset */

typedef struct { pid_t pid; char out[2300], err[2300]; } engine_run;

static engine_run start_engine(int slot, const char *const *steps) {
  engine_run r;
  g_run++;
  snprintf(r.out, sizeof r.out, "%s/run%d.out", g_dir, g_run);
  snprintf(r.err, sizeof r.err, "%s/run%d.err", g_dir, g_run);
  char slot_s[16];
  snprintf(slot_s, sizeof slot_s, "%d", slot);
  const char *args[64];
  int n = 0;
  args[n++] = g_self;
  args[n++] = "--engine";
  args[n++] = g_dir;
  args[n++] = slot_s;
  for (int i = 0; steps[i] && n < 63; i++) args[n++] = steps[i];
  args[n] = NULL;
  fflush(NULL);
  r.pid = fork();
  CHECK(r.pid >= 0);
  if (r.pid == 0) {
    int o = open(r.out, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(r.err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    setenv("COLIKV_STORE", g_store_path, 1);
    setenv("COLIKV_WEIGHTS_ID", WID, 1);
    if (g_tenant)
      setenv("COLIKV_TENANT", g_tenant, 1);
    else
      unsetenv("COLIKV_TENANT");
    if (g_metrics_file)
      setenv("COLIKV_METRICS_FILE", g_metrics_file, 1);
    else
      unsetenv("COLIKV_METRICS_FILE");
    execv(g_self, (char *const *)args);
    _exit(127);
  }
  return r;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strdup(buf);
}

/* The engine runs' output finish_engine returns is kept here and freed at
 * exit: a scenario reads several runs into the same variables. */
static char *g_texts[256];
static size_t g_ntexts;

static void free_texts(void) {
  while (g_ntexts > 0) free(g_texts[--g_ntexts]);
}

static char *kept(char *text) {
  if (g_ntexts == 0) atexit(free_texts);
  CHECK(text != NULL && g_ntexts < sizeof g_texts / sizeof g_texts[0]);
  g_texts[g_ntexts++] = text;
  return text;
}

/* Waits for an engine run; its stdout and stderr are returned (kept until exit). */
static void finish_engine(engine_run *r, char **out, char **err) {
  int status = 0;
  CHECK(waitpid(r->pid, &status, 0) == r->pid);
  *out = kept(slurp(r->out));
  *err = kept(slurp(r->err));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("engine run %s: status %d\nstdout:\n%s\nstderr:\n%s\n", r->out, status, *out, *err);
    exit(1);
  }
}

static void run_engine(int slot, const char *const *steps, char **out, char **err) {
  engine_run r = start_engine(slot, steps);
  finish_engine(&r, out, err);
}

/* Waits until the running engine reached sync point `at`, then (after the
 * caller's fault) lets it go on. */
static void wait_at(const char *at) {
  char path[4096];
  snprintf(path, sizeof path, "%s/at.%s", g_dir, at);
  while (access(path, F_OK) != 0) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}
static void go(const char *at) {
  char path[4096];
  snprintf(path, sizeof path, "%s/go.%s", g_dir, at);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fclose(f);
}

static colikv_model model(void) {
  colikv_model m = {NL, KL, QR, 0, 0, VOCAB, WID};
  return m;
}

static colikv_store *open_store(void) {
  colikv_store *s = NULL;
  if (colikv_open(g_store_path, COLIKV_CREATE, &s) != COLIKV_OK) {
    printf("open %s: %s\n", g_store_path, colikv_errmsg(s));
    exit(1);
  }
  return s;
}

/* The token ids conv holds ("" conversations read as 0 tokens); evicted KV data is fine. */
static int64_t stored_tokens(colikv_store *s, const char *conv, int32_t *tokens) {
  colikv_model m = model();
  static float l0[KL * CTX], l1[KL * CTX], r0[QR * CTX], r1[QR * CTX];
  float *Lc[NL] = {l0, l1}, *Rc[NL] = {r0, r1};
  int64_t n = colikv_count(s, conv);
  if (n <= 0) return n;
  int64_t got = colikv_load(s, conv, &m, tokens, CTX, Lc, Rc, NULL);
  return got == COLIKV_ERR_EVICTED ? n : got;
}

/* Does conv hold exactly the tokens of prompt spec? */
static int holds(colikv_store *s, const char *conv, const char *spec) {
  static int32_t got[CTX];
  static int want[CTX];
  int n = parse_prompt(spec, want);
  int64_t have = stored_tokens(s, conv, got);
  if (have != n) {
    printf("  %s holds %lld tokens, not the %d of %s\n", conv, (long long)have, n, spec);
    return 0;
  }
  for (int p = 0; p < n; p++)
    if (got[p] != want[p]) {
      printf("  %s: token %d is %d, not %s's %d\n", conv, p, got[p], spec, want[p]);
      return 0;
    }
  return 1;
}

/* Is some fork "WID/slot<slot>/<n>" holding exactly the tokens of spec? */
static int kept_as_fork(colikv_store *s, int slot, const char *spec) {
  for (int n = 1; n <= 8; n++) {
    char id[128];
    snprintf(id, sizeof id, WID "/slot%d/%d", slot, n);
    if (colikv_count(s, id) > 0 && holds(s, id, spec)) return 1;
  }
  printf("  no fork of slot %d holds %s\n", slot, spec);
  return 0;
}

static int logged(const char *err, const char *what) {
  if (strstr(err, what)) return 1;
  printf("  the adapter did not log \"%s\"; its stderr:\n%s\n", what, err);
  return 0;
}

/* Another connection holding SQLite's write lock (BEGIN IMMEDIATE), or, with
 * exclusive, every lock (locking_mode=EXCLUSIVE: readers are refused too). */
static sqlite3 *lock_store(int exclusive) {
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(g_store_path, &db) == SQLITE_OK);
  if (exclusive) CHECK(sqlite3_exec(db, "PRAGMA locking_mode=EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
  /* A write: with exclusive mode the lock is taken for good at the first write. */
  CHECK(sqlite3_exec(db, "UPDATE conversations SET title = title WHERE 0", NULL, NULL, NULL) == SQLITE_OK);
  if (exclusive) CHECK(sqlite3_exec(db, "SELECT count(*) FROM conversations", NULL, NULL, NULL) == SQLITE_OK);
  return db;
}
static void unlock_store(sqlite3 *db) {
  CHECK(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
  CHECK(sqlite3_close(db) == SQLITE_OK);
}

static void sql(const char *statement) {
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(g_store_path, &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  if (sqlite3_exec(db, statement, NULL, NULL, NULL) != SQLITE_OK) {
    printf("%s: %s\n", statement, sqlite3_errmsg(db));
    exit(1);
  }
  sqlite3_close(db);
}

#define SLOT0 WID "/slot0"
#define SLOT1 WID "/slot1"
#define STEPS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Issue 24.3: a load that fails (evicted KV data) returns 0, and the engine then
 * serves another prompt on the slot: the 300 stored tokens it never loaded
 * are kept as a fork before the slot is rewritten. */
static void load_failed_evicted(void) {
  char *out, *err;
  run_engine(0, STEPS("load", "serve", "1:300"), &out, &err);
  colikv_store *s = open_store();
  CHECK(colikv_gc(s, 0) > 0);  /* evicts the slot's KV data, keeps its token ids */
  colikv_close(s);
  run_engine(0, STEPS("load", "serve", "2:50"), &out, &err);
  CHECK(strstr(out, "resumed 0"));
  s = open_store();
  CHECK(holds(s, SLOT0, "2:50"));
  CHECK(kept_as_fork(s, 0, "1:300"));
  colikv_close(s);
  CHECK(logged(err, "[KV] colikv: ignoring " SLOT0));
  CHECK(logged(err, "[KV] colikv: kept 300 tokens of " SLOT0));
}

/* Issue 24.3 with a load that fails on a damaged chunk (what an I/O error on
 * read looks like to the adapter): the stored tokens it could not load are
 * kept as a fork before the new prompt's save rewrites the slot. */
static void load_failed_corrupt(void) {
  char *out, *err;
  run_engine(0, STEPS("load", "serve", "1:300"), &out, &err);
  sql("UPDATE chunks SET checksum = (checksum + 1) % 4294967296");
  run_engine(0, STEPS("load", "serve", "2:50"), &out, &err);
  CHECK(strstr(out, "resumed 0"));
  colikv_store *s = open_store();
  CHECK(colikv_count(s, SLOT0 "/1") == 300);  /* its chunks are the damaged ones: count only */
  CHECK(holds(s, SLOT0, "2:50"));
  colikv_close(s);
  CHECK(logged(err, "[KV] colikv: ignoring " SLOT0));
  CHECK(logged(err, "[KV] colikv: kept 300 tokens of " SLOT0 " as " SLOT0 "/1"));
}

/* The store is busy (another connection holds every lock) when the engine
 * starts: the adapter runs without persistence and writes nothing; the next
 * start resumes the 300 tokens. */
static void busy_at_start(void) {
  char *out, *err;
  run_engine(0, STEPS("load", "serve", "1:300"), &out, &err);
  sqlite3 *db = lock_store(1);
  run_engine(0, STEPS("open", "load", "serve", "2:50"), &out, &err);
  unlock_store(db);
  CHECK(logged(err, "[KV] colikv: cannot open the store: "));
  CHECK(strstr(out, "no store"));
  colikv_store *s = open_store();
  CHECK(holds(s, SLOT0, "1:300"));
  colikv_close(s);
  run_engine(0, STEPS("load"), &out, &err);
  CHECK(strstr(out, "resumed 300"));
}

/* Issue 25.3 (adapter part): a truncate that fails (busy) is logged and leaves
 * the slot's count unknown: the next save reads the store again and rewrites
 * it, instead of skipping the save (len <= the stale count). */
static void truncate_failed_busy(void) {
  char *out, *err;
  run_engine(0, STEPS("load", "serve", "1:300"), &out, &err);
  engine_run r = start_engine(0, STEPS("load", "sync", "loaded", "serve", "1:150:100:3"));
  wait_at("loaded");
  sqlite3 *db = lock_store(0);  /* writers wait, then fail busy; readers go on */
  go("loaded");
  /* The fork that keeps the 300 tokens fails after the busy timeout, then the
   * truncate: release the lock once the engine logged both failures. */
  for (;;) {
    char *e = slurp(r.err);
    int seen = 0;
    for (const char *p = e; (p = strstr(p, "[KV] colikv: ")) != NULL; p++) seen++;
    free(e);
    if (seen >= 2) break;
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  unlock_store(db);
  finish_engine(&r, &out, &err);
  CHECK(strstr(out, "resumed 300"));
  colikv_store *s = open_store();
  if (!holds(s, SLOT0, "1:150:100:3")) {
    printf("  the adapter's stderr:\n%s\n", err);
    CHECK(0);
  }
  colikv_close(s);
  CHECK(logged(err, "[KV] colikv: not truncated: "));
  run_engine(0, STEPS("load"), &out, &err);
  CHECK(strstr(out, "resumed 150"));
}

/* Another writer appends to the slot between the engine's load and its save
 * (two engines on one slot id: the conflict case): its tokens, which this slot
 * never loaded, are kept as a fork before the engine's diverging turn
 * replaces them. */
static void another_writer(void) {
  char *out, *err;
  run_engine(0, STEPS("load", "serve", "1:300"), &out, &err);
  engine_run r = start_engine(0, STEPS("load", "sync", "loaded", "serve", "1:330:300:4"));
  wait_at("loaded");
  {
    static int prompt[CTX];
    static float l0[KL * CTX], l1[KL * CTX], r0[QR * CTX], r1[QR * CTX];
    const float *Lc[NL] = {l0, l1}, *Rc[NL] = {r0, r1};
    colikv_model m = model();
    int n = parse_prompt("1:320:300:6", prompt);
    colikv_store *s = open_store();
    if (colikv_append(s, SLOT0, &m, (const int32_t *)prompt, n, Lc, Rc, NULL) != COLIKV_OK) {
      printf("append: %s\n", colikv_errmsg(s));
      exit(1);
    }
    colikv_close(s);
  }
  go("loaded");
  finish_engine(&r, &out, &err);
  CHECK(strstr(out, "resumed 300"));
  colikv_store *s = open_store();
  CHECK(holds(s, SLOT0, "1:330:300:4"));
  CHECK(kept_as_fork(s, 0, "1:320:300:6"));
  colikv_close(s);
  CHECK(logged(err, "[KV] colikv: kept 320 tokens of " SLOT0));
}

/* ---------------------------------------------------------------------------
 * Scenarios not needing two engines at once. */

/* Adoption: slot 1 saved conversation 3; slot 0 gets a prompt sharing its
 * first 150 tokens and adopts exactly those rows. */
static void adopt_ok(void) {
  char *out, *err;
  run_engine(1, STEPS("load", "serve", "3:200"), &out, &err);
  run_engine(0, STEPS("load", "adopt", "3:260:150:5"), &out, &err);
  if (!strstr(out, "adopted 150") || strstr(out, "ADOPT-WRONG")) {
    printf("  stdout:\n%s\n  stderr:\n%s\n", out, err);
    CHECK(0);
  }
  CHECK(logged(err, "[KV] adopted 150 tokens [0,150) from " SLOT1));
}

/* Adoption from a chunk that fails its checks (a damaged file: what an I/O
 * error on read looks like to the adapter): logged, nothing adopted. */
static void adopt_corrupt(void) {
  char *out, *err;
  run_engine(1, STEPS("load", "serve", "3:200"), &out, &err);
  sql("UPDATE chunks SET checksum = (checksum + 1) % 4294967296");
  run_engine(0, STEPS("load", "adopt", "3:260:150:5"), &out, &err);
  CHECK(strstr(out, "adopted 0"));
  CHECK(logged(err, "[KV] colikv: no adoption: "));
}

/* Adoption from evicted KV data: the match is not loadable, so nothing is adopted. */
static void adopt_evicted(void) {
  char *out, *err;
  run_engine(1, STEPS("load", "serve", "3:200"), &out, &err);
  colikv_store *s = open_store();
  CHECK(colikv_gc(s, 0) > 0);
  colikv_close(s);
  run_engine(0, STEPS("load", "adopt", "3:260:150:5"), &out, &err);
  CHECK(strstr(out, "adopted 0"));
}

/* Two tenants: engines of tenant "bob" never adopt what an engine of tenant
 * "alice" saved with the same prompt, and share none of its chunks; an engine
 * of "alice" does adopt it (so the prompt would have matched). Two engine
 * processes of the two tenants run at the same time first, each saving the
 * same conversation on slot 1. */
static void tenants_no_adoption(void) {
  char *out, *err;
  g_tenant = "alice";
  engine_run a = start_engine(1, STEPS("load", "serve", "3:200"));
  g_tenant = "bob";
  engine_run b = start_engine(1, STEPS("load", "serve", "7:120"));
  finish_engine(&a, &out, &err);
  finish_engine(&b, &out, &err);
  /* bob's slot 1 holds conversation 7, alice's conversation 3: same id, two tenants. */
  colikv_store *s = NULL;
  colikv_options o = {COLIKV_TENANT, 0, 0, 0, "alice"};
  CHECK(colikv_open_ex(g_store_path, &o, &s) == COLIKV_OK);
  CHECK(holds(s, SLOT1, "3:200"));
  colikv_close(s);
  o.tenant = "bob";
  CHECK(colikv_open_ex(g_store_path, &o, &s) == COLIKV_OK);
  CHECK(holds(s, SLOT1, "7:120"));
  colikv_close(s);
  /* The default tenant holds neither. */
  s = open_store();
  CHECK(colikv_count(s, SLOT1) == 0);
  colikv_close(s);

  g_tenant = "bob";
  run_engine(0, STEPS("load", "adopt", "3:260:150:5"), &out, &err);
  CHECK(strstr(out, "adopted 0"));
  CHECK(!strstr(err, "[KV] adopted"));
  g_tenant = NULL;  /* the default tenant neither */
  run_engine(0, STEPS("load", "adopt", "3:260:150:5"), &out, &err);
  CHECK(strstr(out, "adopted 0"));
  CHECK(!strstr(err, "[KV] adopted"));
  g_tenant = "alice";
  run_engine(0, STEPS("load", "adopt", "3:260:150:5"), &out, &err);
  if (!strstr(out, "adopted 150") || strstr(out, "ADOPT-WRONG")) {
    printf("  stdout:\n%s\n  stderr:\n%s\n", out, err);
    CHECK(0);
  }
  CHECK(logged(err, "[KV] adopted 150 tokens [0,150) from " SLOT1));
  g_tenant = NULL;
}

/* A loopback port nothing listens on now (bound, then let go). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* GET /metrics from 127.0.0.1:port: the response (malloc'd), or NULL when nothing answers. */
static char *http_get_metrics(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return NULL;
  }
  const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  CHECK(write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  CHECK(buf != NULL);
  for (;;) {
    if (n + 4096 > cap) {
      char *b = realloc(buf, cap *= 2);
      CHECK(b != NULL);
      buf = b;
    }
    ssize_t got = read(fd, buf + n, cap - n - 1);
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(fd);
  buf[n] = 0;
  return buf;
}

/* The adapter writes its process's counters to COLIKV_METRICS_FILE (at exit
 * here: a run is shorter than the period); node_exporter's textfile
 * collector, on a free loopback port, serves them; they are read back over HTTP. */
static void metrics_file(void) {
  const char *exporter = COLIKV_NODE_EXPORTER;
  if (!*exporter) {
    printf("no node_exporter found (Debian package prometheus-node-exporter): this test requires it\n");
    exit(1);
  }
  char textdir[2300], prom[2400];
  snprintf(textdir, sizeof textdir, "%s/textfile", g_dir);
  snprintf(prom, sizeof prom, "%s/colikv.prom", textdir);
  CHECK(mkdir(textdir, 0755) == 0);
  g_metrics_file = prom;
  char *out, *err;
  run_engine(0, STEPS("open", "load", "serve", "1:300"), &out, &err);
  run_engine(0, STEPS("load", "serve", "1:400"), &out, &err);
  g_metrics_file = NULL;
  CHECK(strstr(out, "resumed 300"));
  char *file = kept(slurp(prom));
  /* The second run's process: one load of 300 tokens, one append of 100 more. */
  if (!strstr(file, "colikv_appends_total{tenant=\"\"} 1\n") ||
      !strstr(file, "colikv_append_tokens_total{tenant=\"\"} 100\n") ||
      !strstr(file, "colikv_load_tokens_total{tenant=\"\"} 300\n")) {
    printf("  %s:\n%s\n  stderr:\n%s\n", prom, file, err);
    CHECK(0);
  }

  char *page = NULL;
  for (int attempt = 0; attempt < 5 && !page; attempt++) {  /* another process may take the free port first */
    int port = free_port();
    char listen[64], dirflag[2400];
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", port);
    snprintf(dirflag, sizeof dirflag, "--collector.textfile.directory=%s", textdir);
    char log[2400];
    snprintf(log, sizeof log, "%s/node_exporter.%d.log", g_dir, attempt);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      int e = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (e >= 0) { dup2(e, 1); dup2(e, 2); }
      execl(exporter, exporter, listen, "--collector.disable-defaults", "--collector.textfile", dirflag,
            (char *)NULL);
      _exit(127);
    }
    for (int i = 0; i < 200 && !page; i++) {  /* up to 10 s for it to listen */
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) { pid = -1; break; }  /* exited: the port was taken */
      page = http_get_metrics(port);
      if (!page) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
      }
    }
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, NULL, 0);
    }
    if (!page) printf("  node_exporter on port %d did not answer:\n%s\n", port, kept(slurp(log)));
  }
  CHECK(page != NULL);
  kept(page);
  if (!strstr(page, "colikv_appends_total{tenant=\"\"} 1\n") ||
      !strstr(page, "colikv_append_tokens_total{tenant=\"\"} 100\n") ||
      !strstr(page, "colikv_append_seconds_bucket{tenant=\"\",le=\"+Inf\"}") ||
      !strstr(page, "node_textfile_scrape_error 0\n")) {
    printf("  node_exporter served:\n%s\n", page);
    CHECK(0);
  }
}

typedef struct { const char *name; void (*run)(void); } scenario;
static const scenario kScenarios[] = {
    {"load_failed_evicted", load_failed_evicted},
    {"load_failed_corrupt", load_failed_corrupt},
    {"busy_at_start", busy_at_start},
    {"truncate_failed_busy", truncate_failed_busy},
    {"another_writer", another_writer},
    {"adopt_ok", adopt_ok},
    {"adopt_corrupt", adopt_corrupt},
    {"adopt_evicted", adopt_evicted},
    {"tenants_no_adoption", tenants_no_adoption},
    {"metrics_file", metrics_file},
};

static void empty_dir(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
  CHECK(system(cmd) == 0);
}

int main(int argc, char **argv) {
  g_self = argv[0];
  if (argc >= 4 && !strcmp(argv[1], "--engine")) return engine_main(argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [SCENARIO]\n", argv[0]);
    return 2;
  }
  int ran = 0;
  for (size_t i = 0; i < sizeof kScenarios / sizeof kScenarios[0]; i++) {
    if (argc > 2 && strcmp(argv[2], kScenarios[i].name)) continue;
    snprintf(g_dir, sizeof g_dir, "%s/%s", argv[1], kScenarios[i].name);
    snprintf(g_store_path, sizeof g_store_path, "%s/store.db", g_dir);
    empty_dir(g_dir);
    printf("%s\n", kScenarios[i].name);
    fflush(stdout);
    kScenarios[i].run();
    ran++;
  }
  if (!ran) {
    fprintf(stderr, "no scenario named %s\n", argv[2]);
    return 2;
  }
  printf("ok: %d scenarios\n", ran);
  return 0;
}
