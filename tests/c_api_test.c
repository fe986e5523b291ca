/* The C API, compiled as C99: an engine's use of colikv.h.
 *
 * usage: colikv_c_api_test DB_PATH   (the file and its -wal/-shm are removed first)
 * Exits 0 when every check passes; otherwise prints the failing check (and
 * the store's message) and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colikv/colikv.h"

static const char *g_path;

#define FAIL_AT(what, store)                                                                       \
  do {                                                                                             \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, what);                        \
    if (store) fprintf(stderr, "  colikv_errmsg: %s\n", colikv_errmsg(store));                     \
    exit(1);                                                                                       \
  } while (0)

/* CHECK(cond): plain check. CHECK_S(cond, s): also prints s's last message. */
#define CHECK(cond)                                            \
  do {                                                         \
    if (!(cond)) FAIL_AT(#cond, (const colikv_store *)NULL);   \
  } while (0)
#define CHECK_S(cond, s)              \
  do {                                \
    if (!(cond)) FAIL_AT(#cond, (s)); \
  } while (0)
/* A call that must fail with code, leaving a message. */
#define CHECK_ERR(call, code, s)                                                                   \
  do {                                                                                             \
    int64_t rc_ = (int64_t)(call);                                                                 \
    if (rc_ != (code)) {                                                                           \
      fprintf(stderr, "%s:%d: %s returned %lld (%s), expected %s\n", __FILE__, __LINE__, #call,    \
              (long long)rc_, colikv_strerror((int)rc_), #code);                                   \
      fprintf(stderr, "  colikv_errmsg: %s\n", colikv_errmsg(s));                                  \
      exit(1);                                                                                     \
    }                                                                                              \
    if (colikv_errmsg(s) == NULL || colikv_errmsg(s)[0] == '\0') FAIL_AT("empty message after " #call, (s)); \
  } while (0)

/* The engine's buffers for one model: per-layer arrays, Ic NULL for layers
 * without an indexer (the last n_indexed layers have one). */
typedef struct {
  colikv_model m;
  int64_t cap;
  int32_t *tokens;
  float **lc, **rc, **ic;
} bufs;

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

static int indexed(const colikv_model *m, int layer) { return layer >= m->n_layers - m->n_indexed; }

static void bufs_init(bufs *b, const colikv_model *m, int64_t cap) {
  int l;
  b->m = *m;
  b->cap = cap;
  b->tokens = (int32_t *)xcalloc((size_t)cap, sizeof(int32_t));
  b->lc = (float **)xcalloc((size_t)m->n_layers, sizeof(float *));
  b->rc = (float **)xcalloc((size_t)m->n_layers, sizeof(float *));
  b->ic = (float **)xcalloc((size_t)m->n_layers, sizeof(float *));
  for (l = 0; l < m->n_layers; ++l) {
    b->lc[l] = (float *)xcalloc((size_t)(cap * m->kv_lora), sizeof(float));
    b->rc[l] = (float *)xcalloc((size_t)(cap * m->qk_rope), sizeof(float));
    b->ic[l] = indexed(m, l) ? (float *)xcalloc((size_t)(cap * m->index_hd), sizeof(float)) : NULL;
  }
}

static void bufs_free(bufs *b) {
  int l;
  for (l = 0; l < b->m.n_layers; ++l) {
    free(b->lc[l]);
    free(b->rc[l]);
    free(b->ic[l]);
  }
  free(b->lc);
  free(b->rc);
  free(b->ic);
  free(b->tokens);
}

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/* Any bit pattern at all, including NaNs with payloads, -0.0, denormals, infinities. */
static float value(uint32_t seed, int64_t pos, int layer, int kind, int64_t j) {
  static const uint32_t special[] = {0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x80000000u, 0x00000001u,
                                     0x807fffffu, 0x7f800000u, 0xff800000u, 0x00000000u};
  uint32_t h = mix(seed * 0x9e3779b9U ^ mix((uint32_t)pos * 31u + (uint32_t)layer * 7919u + (uint32_t)kind * 104729u +
                                             (uint32_t)j * 15485863u));
  uint32_t bits = (h % 11u == 0) ? special[h % 9u] : h;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Positions [from, to) get the history of seed. */
static void bufs_fill(bufs *b, int64_t from, int64_t to, uint32_t seed) {
  const colikv_model *m = &b->m;
  int64_t p, j;
  int l;
  for (p = from; p < to; ++p) {
    b->tokens[p] = (int32_t)(mix(seed * 2654435761U + (uint32_t)p) % (uint32_t)m->vocab);
    for (l = 0; l < m->n_layers; ++l) {
      for (j = 0; j < m->kv_lora; ++j) b->lc[l][p * m->kv_lora + j] = value(seed, p, l, 0, j);
      for (j = 0; j < m->qk_rope; ++j) b->rc[l][p * m->qk_rope + j] = value(seed, p, l, 1, j);
      if (b->ic[l])
        for (j = 0; j < m->index_hd; ++j) b->ic[l][p * m->index_hd + j] = value(seed, p, l, 2, j);
    }
  }
}

static void bufs_poison(bufs *b) {
  const colikv_model *m = &b->m;
  int l;
  int64_t p;
  for (p = 0; p < b->cap; ++p) b->tokens[p] = -7;
  for (l = 0; l < m->n_layers; ++l) {
    memset(b->lc[l], 0xff, (size_t)(b->cap * m->kv_lora) * 4);
    memset(b->rc[l], 0xff, (size_t)(b->cap * m->qk_rope) * 4);
    if (b->ic[l]) memset(b->ic[l], 0xff, (size_t)(b->cap * m->index_hd) * 4);
  }
}

/* 1 when positions [0, n) of a and b are bit-identical. */
static int same(const bufs *a, const bufs *b, int64_t n) {
  const colikv_model *m = &a->m;
  int l;
  if (n == 0) return 1;
  if (memcmp(a->tokens, b->tokens, (size_t)n * 4) != 0) return 0;
  for (l = 0; l < m->n_layers; ++l) {
    if (memcmp(a->lc[l], b->lc[l], (size_t)(n * m->kv_lora) * 4) != 0) return 0;
    if (memcmp(a->rc[l], b->rc[l], (size_t)(n * m->qk_rope) * 4) != 0) return 0;
    if (a->ic[l] && memcmp(a->ic[l], b->ic[l], (size_t)(n * m->index_hd) * 4) != 0) return 0;
  }
  return 1;
}

/* 1 when positions [from, cap) of b still hold the poison. */
static int untouched_from(const bufs *b, int64_t from) {
  const colikv_model *m = &b->m;
  int64_t p, i;
  int l;
  for (p = from; p < b->cap; ++p)
    if (b->tokens[p] != -7) return 0;
  for (l = 0; l < m->n_layers; ++l) {
    const unsigned char *lc = (const unsigned char *)(b->lc[l] + from * m->kv_lora);
    const unsigned char *rc = (const unsigned char *)(b->rc[l] + from * m->qk_rope);
    for (i = 0; i < (b->cap - from) * m->kv_lora * 4; ++i)
      if (lc[i] != 0xff) return 0;
    for (i = 0; i < (b->cap - from) * m->qk_rope * 4; ++i)
      if (rc[i] != 0xff) return 0;
  }
  return 1;
}

static int append(colikv_store *s, const char *conv, const bufs *b, int64_t len) {
  return colikv_append(s, conv, &b->m, b->tokens, len, (const float *const *)b->lc, (const float *const *)b->rc,
                       b->m.n_indexed ? (const float *const *)b->ic : NULL);
}

static int64_t load(colikv_store *s, const char *conv, bufs *out, int64_t max_tokens) {
  bufs_poison(out);
  return colikv_load(s, conv, &out->m, out->tokens, max_tokens, out->lc, out->rc, out->m.n_indexed ? out->ic : NULL);
}

static int64_t load_prefix(colikv_store *s, const char *conv, bufs *out, int64_t k) {
  bufs_poison(out);
  return colikv_load_prefix(s, conv, &out->m, k, out->tokens, out->lc, out->rc, out->m.n_indexed ? out->ic : NULL);
}

/* Two conversations of one model with the same token ids and other values
 * (another build or backend of the engine): each loads its own values. */
static void check_twins(colikv_store *s, const colikv_model *m, const char *a_id, const char *b_id) {
  bufs a, b, out;
  bufs_init(&a, m, 20);
  bufs_init(&b, m, 20);
  bufs_init(&out, m, 20);
  bufs_fill(&a, 0, 20, 41);
  bufs_fill(&b, 0, 20, 42);
  memcpy(b.tokens, a.tokens, 20 * sizeof(int32_t));
  CHECK_S(append(s, a_id, &a, 20) == COLIKV_OK, s);
  CHECK_S(append(s, b_id, &b, 20) == COLIKV_OK, s);
  bufs_poison(&out);
  CHECK_S(load(s, b_id, &out, 20) == 20, s);
  CHECK(same(&b, &out, 20));
  bufs_poison(&out);
  CHECK_S(load(s, a_id, &out, 20) == 20, s);
  CHECK(same(&a, &out, 20));
  bufs_free(&a);
  bufs_free(&b);
  bufs_free(&out);
}

/* The calls an engine adapter needs: write, info, diverged_at, open_ex, load_range. */
static void remove_with_wal(const char *path) {
  char buf[4200];
  remove(path);
  snprintf(buf, sizeof buf, "%s-wal", path);
  remove(buf);
  snprintf(buf, sizeof buf, "%s-shm", path);
  remove(buf);
}

/* COLIKV_CREATE_STAGED: nothing has the path's name until colikv_publish; an
 * existing file is refused; a handle closed unpublished leaves nothing. */
static int file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fclose(f);
  return 1;
}

static void check_staged_create(const colikv_model *m) {
  char path[4096], other[4200];
  colikv_store *s = NULL;
  colikv_options o;
  bufs a, out;

  snprintf(path, sizeof path, "%s.staged", g_path);
  snprintf(other, sizeof other, "%s.unpublished", g_path);
  remove_with_wal(path);
  remove_with_wal(other);
  bufs_init(&a, m, 30);
  bufs_init(&out, m, 30);
  bufs_fill(&a, 0, 30, 21);

  CHECK(colikv_open(path, COLIKV_CREATE_STAGED, &s) == COLIKV_OK);
  CHECK_S(append(s, "a", &a, 30) == COLIKV_OK, s);
  CHECK(!file_exists(path));
  CHECK_S(colikv_publish(s) == COLIKV_OK, s);
  CHECK(file_exists(path));
  CHECK_ERR(colikv_count(s, "a"), COLIKV_ERR_INVALID, s); /* closed by the publish */
  CHECK_ERR(colikv_publish(s), COLIKV_ERR_INVALID, s);
  colikv_close(s);

  CHECK(colikv_open(path, 0, &s) == COLIKV_OK);
  CHECK_S(load(s, "a", &out, 30) == 30, s);
  CHECK(same(&a, &out, 30));
  CHECK_ERR(colikv_publish(s), COLIKV_ERR_INVALID, s); /* not opened staged */
  CHECK_S(colikv_count(s, "a") == 30, s);
  colikv_close(s);

  /* An existing store is refused, through colikv_open_ex too. */
  memset(&o, 0, sizeof o);
  o.flags = COLIKV_CREATE_STAGED | COLIKV_FILE_MODE;
  o.file_mode = 0640;
  CHECK_ERR(colikv_open_ex(path, &o, &s), COLIKV_ERR_CONFLICT, s);
  colikv_close(s);
  o.flags = COLIKV_CREATE_STAGED | COLIKV_READONLY;
  CHECK_ERR(colikv_open_ex(other, &o, &s), COLIKV_ERR_INVALID, s);
  colikv_close(s);

  /* Closed without publish: no store. */
  o.flags = COLIKV_CREATE_STAGED;
  CHECK(colikv_open_ex(other, &o, &s) == COLIKV_OK);
  CHECK_S(append(s, "a", &a, 30) == COLIKV_OK, s);
  colikv_close(s);
  CHECK(!file_exists(other));

  remove_with_wal(path);
  bufs_free(&a);
  bufs_free(&out);
}

static void check_engine_calls(const colikv_model *m) {
  char path[4096], wid[256];
  colikv_store *s = NULL;
  colikv_options o;
  colikv_info info;
  bufs a, b, out;
  int64_t p;

  snprintf(path, sizeof path, "%s.engine", g_path);
  remove_with_wal(path);
  bufs_init(&a, m, 40);
  bufs_init(&b, m, 40);
  bufs_init(&out, m, 40);
  bufs_fill(&a, 0, 40, 11);
  bufs_fill(&b, 0, 40, 12);
  memcpy(b.tokens, a.tokens, 10 * sizeof(int32_t)); /* b shares a's first 10 token ids */

  /* open_ex: bad options are refused with a message; zeroed options need COLIKV_CREATE. */
  memset(&o, 0, sizeof o);
  o.busy_timeout_ms = -1;
  CHECK(colikv_open_ex(path, &o, &s) == COLIKV_ERR_INVALID && s && colikv_errmsg(s)[0] != '\0');
  colikv_close(s);
  o.busy_timeout_ms = 0;
  CHECK(colikv_open_ex(path, &o, &s) == COLIKV_ERR_NOT_FOUND);
  colikv_close(s);
  o.flags = COLIKV_CREATE | COLIKV_SYNC_NORMAL;
  o.busy_timeout_ms = 100;
  CHECK(colikv_open_ex(path, &o, &s) == COLIKV_OK);

  /* write: creates, then appends (from = committed), then rewrites a tail. */
  CHECK_S(colikv_write(s, "w", m, a.tokens, 0, 20, (const float *const *)a.lc, (const float *const *)a.rc, NULL) == COLIKV_OK, s);
  CHECK_S(colikv_write(s, "w", m, a.tokens, 20, 30, (const float *const *)a.lc, (const float *const *)a.rc, NULL) == COLIKV_OK, s);
  CHECK_S(colikv_diverged_at(s) == -1, s);
  /* b differs from position 10 on: keeping [0, 12) diverges at 10 and changes nothing. */
  CHECK_ERR(colikv_write(s, "w", m, b.tokens, 12, 25, (const float *const *)b.lc, (const float *const *)b.rc, NULL),
            COLIKV_ERR_DIVERGED, s);
  CHECK(colikv_diverged_at(s) == 10);
  CHECK_S(colikv_count(s, "w") == 30, s);
  CHECK(colikv_diverged_at(s) == -1); /* reset by the next call */
  CHECK_S(load(s, "w", &out, 40) == 30, s);
  CHECK(same(&a, &out, 30));
  /* Keeping [0, 10) and writing b's [10, 25): a shorter, different tail, in one call. */
  CHECK_S(colikv_write(s, "w", m, b.tokens, 10, 25, (const float *const *)b.lc, (const float *const *)b.rc, NULL) == COLIKV_OK, s);
  CHECK_S(load(s, "w", &out, 40) == 25, s);
  CHECK(memcmp(out.tokens, b.tokens, 25 * sizeof(int32_t)) == 0);
  CHECK(memcmp(out.lc[0], a.lc[0], (size_t)(10 * m->kv_lora) * 4) == 0); /* kept as stored: a's values */
  CHECK(memcmp(out.lc[2] + 10 * m->kv_lora, b.lc[2] + 10 * m->kv_lora, (size_t)(15 * m->kv_lora) * 4) == 0);
  /* Errors: from past the committed count or past len; another model; an absent conversation from > 0. */
  CHECK_ERR(colikv_write(s, "w", m, b.tokens, 26, 30, (const float *const *)b.lc, (const float *const *)b.rc, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_write(s, "w", m, b.tokens, 20, 10, (const float *const *)b.lc, (const float *const *)b.rc, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_write(s, "new", m, b.tokens, 5, 10, (const float *const *)b.lc, (const float *const *)b.rc, NULL), COLIKV_ERR_INVALID, s);
  {
    colikv_model other = *m;
    other.weights_id = "another-model";
    CHECK_ERR(colikv_write(s, "w", &other, b.tokens, 0, 10, (const float *const *)b.lc, (const float *const *)b.rc, NULL),
              COLIKV_ERR_MODEL_MISMATCH, s);
  }
  CHECK_S(colikv_count(s, "w") == 25, s);

  /* conversation_info: the row, the model with its weights id. */
  memset(&info, 0, sizeof info);
  CHECK_S(colikv_conversation_info(s, "w", &info) == COLIKV_OK, s);
  CHECK(info.tokens == 25 && info.model.n_layers == m->n_layers && info.model.kv_lora == m->kv_lora &&
        info.model.vocab == m->vocab && strcmp(info.model.weights_id, m->weights_id) == 0);
  CHECK(info.raw_bytes == 25 * (4 + 4 * (int64_t)m->n_layers * (m->kv_lora + m->qk_rope)));
  CHECK(info.stored_bytes > 0 && info.last_used_ms > 0 && info.evicted == 0);
  CHECK_ERR(colikv_conversation_info(s, "absent", &info), COLIKV_ERR_NOT_FOUND, s);

  /* load_range: only [from, to) is written. */
  bufs_poison(&out);
  CHECK_S(colikv_load_range(s, "w", m, 12, 20, out.tokens, out.lc, out.rc, NULL) == 8, s);
  for (p = 0; p < 40; ++p) CHECK(out.tokens[p] == ((p >= 12 && p < 20) ? b.tokens[p] : -7));
  CHECK(memcmp(out.rc[1] + 12 * m->qk_rope, b.rc[1] + 12 * m->qk_rope, (size_t)(8 * m->qk_rope) * 4) == 0);
  CHECK(untouched_from(&out, 20));
  CHECK(((unsigned char *)out.lc[0])[11 * m->kv_lora * 4 + 3] == 0xff);
  CHECK_ERR(colikv_load_range(s, "w", m, 20, 26, out.tokens, out.lc, out.rc, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_load_range(s, "w", m, 5, 4, out.tokens, out.lc, out.rc, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_load_range(s, "absent", m, 0, 1, out.tokens, out.lc, out.rc, NULL), COLIKV_ERR_NOT_FOUND, s);
  {
    colikv_model other = *m;
    other.weights_id = "another-model";
    CHECK_ERR(colikv_load_range(s, "w", &other, 0, 1, out.tokens, out.lc, out.rc, NULL), COLIKV_ERR_MODEL_MISMATCH, s);
  }
  colikv_close(s);

  /* max_store_bytes: a budget of one byte evicts the least recently used conversation. */
  memset(&o, 0, sizeof o);
  o.max_store_bytes = 1;
  CHECK(colikv_open_ex(path, &o, &s) == COLIKV_OK);
  CHECK_S(append(s, "z", &a, 5) == COLIKV_OK, s);
  CHECK_S(colikv_conversation_info(s, "w", &info) == COLIKV_OK && info.evicted == 1, s);
  colikv_close(s);

  /* The weights identity: a folder without config.json says so, in out. */
  CHECK(colikv_weights_id_from_dir("/nonexistent-colikv-dir", wid, sizeof wid) == COLIKV_ERR_NOT_FOUND);
  CHECK(strstr(wid, "config.json") != NULL);

  remove_with_wal(path);
  bufs_free(&a);
  bufs_free(&b);
  bufs_free(&out);
}

static int append_async(colikv_store *s, const char *conv, const bufs *b, int64_t len) {
  return colikv_append_async(s, conv, &b->m, b->tokens, len, (const float *const *)b->lc,
                             (const float *const *)b->rc, b->m.n_indexed ? (const float *const *)b->ic : NULL);
}

/* The asynchronous append: turns queued, the engine's buffers reused at once,
 * read back bit-exact; errors before queueing at once; wait with NULL; close
 * commits what is queued. */
static void check_async(const colikv_model *m) {
  char path[4096];
  colikv_store *s = NULL;
  bufs a, scratch, out;
  int64_t len;

  snprintf(path, sizeof path, "%s.async", g_path);
  remove_with_wal(path);
  bufs_init(&a, m, 40);
  bufs_init(&scratch, m, 40);
  bufs_init(&out, m, 40);
  bufs_fill(&a, 0, 40, 21);
  CHECK(colikv_open(path, COLIKV_CREATE, &s) == COLIKV_OK);
  for (len = 7; len <= 28; len += 7) {
    bufs_fill(&scratch, 0, 40, 21);
    CHECK_S(append_async(s, "q", &scratch, len) == COLIKV_OK, s);
    bufs_poison(&scratch); /* the engine overwrites its buffers at once */
  }
  CHECK_S(colikv_wait(s, "q") == COLIKV_OK, s);
  CHECK_S(load(s, "q", &out, 40) == 28, s);
  CHECK(same(&a, &out, 28));
  /* Read your writes: the count sees a turn queued just before. */
  CHECK_S(append_async(s, "q", &a, 35) == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "q") == 35, s);
  /* Errors before queueing come back at once. */
  {
    colikv_model other = *m;
    other.weights_id = "another-model";
    CHECK_ERR(colikv_append_async(s, "q", &other, a.tokens, 36, (const float *const *)a.lc,
                                  (const float *const *)a.rc, NULL),
              COLIKV_ERR_MODEL_MISMATCH, s);
  }
  a.tokens[3] = (a.tokens[3] + 1) % m->vocab;
  CHECK_ERR(append_async(s, "q", &a, 36), COLIKV_ERR_DIVERGED, s);
  CHECK_ERR(colikv_append_async(s, NULL, m, a.tokens, 36, (const float *const *)a.lc, (const float *const *)a.rc, NULL),
            COLIKV_ERR_INVALID, s);
  bufs_fill(&a, 0, 40, 21);
  CHECK_S(append_async(s, "r", &a, 40) == COLIKV_OK, s);
  CHECK_S(colikv_wait(s, NULL) == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "r") == 40, s);
  /* Closing commits the queue. */
  CHECK_S(append_async(s, "q", &a, 40) == COLIKV_OK, s);
  colikv_close(s);
  CHECK(colikv_open(path, 0, &s) == COLIKV_OK);
  CHECK_S(load(s, "q", &out, 40) == 40, s);
  CHECK(same(&a, &out, 40));
  CHECK(colikv_wait(NULL, NULL) == COLIKV_ERR_INVALID);
  colikv_close(s);
  remove_with_wal(path);
  bufs_free(&a);
  bufs_free(&scratch);
  bufs_free(&out);
}

static void remove_store_files(void) {
  char buf[4096];
  remove(g_path);
  snprintf(buf, sizeof buf, "%s-wal", g_path);
  remove(buf);
  snprintf(buf, sizeof buf, "%s-shm", g_path);
  remove(buf);
}

int main(int argc, char **argv) {
  colikv_model m = {3, 16, 8, 0, 0, 1000, "glm-test"};
  colikv_model other = {3, 16, 8, 0, 0, 1000, "other"};
  colikv_model mi = {2, 8, 4, 4, 1, 50, NULL}; /* layer 1 has an indexer */
  colikv_store *s = NULL, *ro = NULL, *bad = NULL;
  bufs h, g, out, hi, outi, ho;
  int64_t n;
  int32_t saved;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DB_PATH\n", argv[0]);
    return 2;
  }
  g_path = argv[1];
  remove_store_files();

  bufs_init(&h, &m, 64);
  bufs_init(&g, &m, 64);
  bufs_init(&out, &m, 64);
  bufs_init(&ho, &other, 64);
  bufs_init(&hi, &mi, 16);
  bufs_init(&outi, &mi, 16);
  bufs_fill(&h, 0, 64, 1);
  bufs_fill(&ho, 0, 64, 1);
  bufs_fill(&hi, 0, 16, 3);

  /* Strings for codes. */
  CHECK(colikv_strerror(COLIKV_ERR_NOT_FOUND) != NULL && colikv_strerror(COLIKV_ERR_NOT_FOUND)[0] != '\0');
  CHECK(strcmp(colikv_strerror(COLIKV_ERR_NOT_FOUND), colikv_strerror(COLIKV_ERR_DIVERGED)) != 0);
  colikv_close(NULL);

  /* Opening a missing file without COLIKV_CREATE fails, with a message. */
  CHECK(colikv_open(g_path, 0, &bad) == COLIKV_ERR_NOT_FOUND);
  CHECK(bad != NULL);
  CHECK(colikv_errmsg(bad)[0] != '\0');
  colikv_close(bad);
  bad = NULL;

  /* An empty path is refused as such (SQLite would open a temporary database). */
  CHECK(colikv_open("", COLIKV_CREATE, &bad) == COLIKV_ERR_INVALID);
  CHECK(strstr(colikv_errmsg(bad), "store path is empty") != NULL);
  colikv_close(bad);
  bad = NULL;

  /* A file that is not a store is refused with a message, not a crash. */
  {
    char junk_path[4096];
    FILE *f;
    int i;
    snprintf(junk_path, sizeof junk_path, "%s.junk", g_path);
    f = fopen(junk_path, "wb");
    CHECK(f != NULL);
    for (i = 0; i < 9000; ++i) fputc((int)(mix((uint32_t)i) & 0xff), f);
    fclose(f);
    CHECK(colikv_open(junk_path, COLIKV_CREATE, &bad) < 0);
    CHECK(bad != NULL);
    CHECK(colikv_errmsg(bad)[0] != '\0');
    colikv_close(bad);
    bad = NULL;
    remove(junk_path);
  }

  /* Create; append turn by turn. */
  CHECK(colikv_open(g_path, COLIKV_CREATE | COLIKV_SYNC_NORMAL, &s) == COLIKV_OK);
  CHECK(s != NULL);
  CHECK_S(colikv_count(s, "chat") == 0, s);
  CHECK_S(append(s, "chat", &h, 5) == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "chat") == 5, s);
  CHECK_S(append(s, "chat", &h, 9) == COLIKV_OK, s);
  CHECK_S(append(s, "chat", &h, 17) == COLIKV_OK, s);
  CHECK_S(append(s, "chat", &h, 30) == COLIKV_OK, s);
  CHECK_S(append(s, "chat", &h, 30) == COLIKV_OK, s); /* nothing new: no-op */
  CHECK_S(colikv_count(s, "chat") == 30, s);

  /* Load, bit-exact, and nothing past the count written. */
  n = load(s, "chat", &out, 64);
  CHECK_S(n == 30, s);
  CHECK(same(&h, &out, 30));
  CHECK(untouched_from(&out, 30));
  n = load(s, "chat", &out, 30); /* exactly the room needed */
  CHECK_S(n == 30, s);
  CHECK(same(&h, &out, 30));

  /* Prefixes. */
  n = load_prefix(s, "chat", &out, 10);
  CHECK_S(n == 10, s);
  CHECK(same(&h, &out, 10));
  CHECK(untouched_from(&out, 10));
  n = load_prefix(s, "chat", &out, 64);
  CHECK_S(n == 30, s);
  CHECK(same(&h, &out, 30));
  n = load_prefix(s, "chat", &out, 0);
  CHECK_S(n == 0, s);
  CHECK(untouched_from(&out, 0));

  /* Too large. */
  CHECK_ERR(load(s, "chat", &out, 29), COLIKV_ERR_TOO_LARGE, s);

  /* Model mismatch, naming both signatures. */
  CHECK_ERR(colikv_load(s, "chat", &other, ho.tokens, 64, ho.lc, ho.rc, NULL), COLIKV_ERR_MODEL_MISMATCH, s);
  CHECK_S(strstr(colikv_errmsg(s), "weights=other") != NULL, s);
  CHECK_S(strstr(colikv_errmsg(s), "weights=glm-test") != NULL, s);
  CHECK_ERR(append(s, "chat", &ho, 35), COLIKV_ERR_MODEL_MISMATCH, s);
  CHECK_S(strstr(colikv_errmsg(s), "weights=other") != NULL, s);
  CHECK_S(strstr(colikv_errmsg(s), "weights=glm-test") != NULL, s);
  CHECK_S(colikv_count(s, "chat") == 30, s);

  /* Diverged tokens: the store is unchanged. */
  bufs_fill(&g, 0, 64, 1);
  g.tokens[7] = (g.tokens[7] + 1) % m.vocab;
  CHECK_ERR(append(s, "chat", &g, 35), COLIKV_ERR_DIVERGED, s);
  CHECK_S(colikv_count(s, "chat") == 30, s);
  n = load(s, "chat", &out, 64);
  CHECK_S(n == 30, s);
  CHECK(same(&h, &out, 30));

  /* Not found. */
  CHECK_S(colikv_count(s, "ghost") == 0, s);
  CHECK_S(load(s, "ghost", &out, 64) == 0, s);
  CHECK_S(load_prefix(s, "ghost", &out, 5) == 0, s);
  CHECK_ERR(colikv_truncate(s, "ghost", 0), COLIKV_ERR_NOT_FOUND, s);
  CHECK_S(strstr(colikv_errmsg(s), "ghost") != NULL, s);
  CHECK_ERR(colikv_fork(s, "ghost", "ghost2", -1), COLIKV_ERR_NOT_FOUND, s);

  /* Invalid arguments. */
  CHECK_ERR(colikv_count(s, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(append(s, NULL, &h, 5), COLIKV_ERR_INVALID, s);
  CHECK_ERR(load(s, NULL, &out, 64), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_truncate(s, NULL, 0), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_delete(s, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_fork(s, NULL, "x", -1), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_fork(s, "chat", NULL, -1), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_append(s, "chat", NULL, h.tokens, 35, (const float *const *)h.lc, (const float *const *)h.rc, NULL),
            COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_load(s, "chat", NULL, out.tokens, 64, out.lc, out.rc, NULL), COLIKV_ERR_INVALID, s);
  CHECK_ERR(append(s, "chat", &h, 20), COLIKV_ERR_INVALID, s); /* below the count */
  saved = h.tokens[32];
  h.tokens[32] = m.vocab; /* out of [0, vocab) */
  CHECK_ERR(append(s, "chat", &h, 35), COLIKV_ERR_INVALID, s);
  h.tokens[32] = -1;
  CHECK_ERR(append(s, "chat", &h, 35), COLIKV_ERR_INVALID, s);
  h.tokens[32] = saved;
  CHECK_ERR(colikv_truncate(s, "chat", 31), COLIKV_ERR_INVALID, s);
  CHECK_ERR(colikv_fork(s, "chat", "toolong", 31), COLIKV_ERR_INVALID, s);
  CHECK_S(colikv_count(s, "chat") == 30, s);
  CHECK_S(colikv_count(s, "toolong") == 0, s);

  /* Truncate, then continue differently. */
  CHECK_S(colikv_truncate(s, "chat", 12) == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "chat") == 12, s);
  n = load(s, "chat", &out, 64);
  CHECK_S(n == 12, s);
  CHECK(same(&h, &out, 12));
  CHECK(untouched_from(&out, 12));
  bufs_fill(&g, 0, 64, 1);
  bufs_fill(&g, 12, 64, 2); /* a different continuation */
  if (g.tokens[12] == h.tokens[12]) g.tokens[12] = (g.tokens[12] + 1) % m.vocab;
  CHECK_S(append(s, "chat", &g, 20) == COLIKV_OK, s);
  n = load(s, "chat", &out, 64);
  CHECK_S(n == 20, s);
  CHECK(same(&g, &out, 20));

  /* Fork. */
  CHECK_S(colikv_fork(s, "chat", "branch", 10) == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "branch") == 10, s);
  n = load(s, "branch", &out, 64);
  CHECK_S(n == 10, s);
  CHECK(same(&g, &out, 10));
  CHECK_ERR(colikv_fork(s, "chat", "branch", -1), COLIKV_ERR_CONFLICT, s);
  CHECK_S(colikv_fork(s, "chat", "whole", -1) == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "whole") == 20, s);
  CHECK_S(append(s, "branch", &g, 14) == COLIKV_OK, s);
  n = load(s, "branch", &out, 64);
  CHECK_S(n == 14, s);
  CHECK(same(&g, &out, 14));

  /* Delete: the fork stays readable. */
  CHECK_S(colikv_delete(s, "chat") == COLIKV_OK, s);
  CHECK_S(colikv_count(s, "chat") == 0, s);
  CHECK_S(load(s, "chat", &out, 64) == 0, s);
  n = load(s, "branch", &out, 64);
  CHECK_S(n == 14, s);
  CHECK(same(&g, &out, 14));
  n = load(s, "whole", &out, 64);
  CHECK_S(n == 20, s);
  CHECK(same(&g, &out, 20));

  /* A model with an indexer on one layer of two: Ic[0] is NULL. */
  CHECK_S(append(s, "indexed", &hi, 7) == COLIKV_OK, s);
  CHECK_S(append(s, "indexed", &hi, 16) == COLIKV_OK, s);
  n = load(s, "indexed", &outi, 16);
  CHECK_S(n == 16, s);
  CHECK(same(&hi, &outi, 16));
  CHECK_ERR(load(s, "branch", &outi, 16), COLIKV_ERR_MODEL_MISMATCH, s);

  /* Read-only: a second handle on the same file. */
  CHECK(colikv_open(g_path, COLIKV_READONLY, &ro) == COLIKV_OK);
  CHECK_S(colikv_count(ro, "branch") == 14, ro);
  n = load(ro, "branch", &out, 64);
  CHECK_S(n == 14, ro);
  CHECK(same(&g, &out, 14));
  CHECK_ERR(append(ro, "branch", &g, 20), COLIKV_ERR_READONLY, ro);
  CHECK_ERR(append(ro, "newconv", &g, 3), COLIKV_ERR_READONLY, ro);
  CHECK_ERR(colikv_truncate(ro, "branch", 2), COLIKV_ERR_READONLY, ro);
  CHECK_ERR(colikv_fork(ro, "branch", "f2", -1), COLIKV_ERR_READONLY, ro);
  CHECK_ERR(colikv_delete(ro, "branch"), COLIKV_ERR_READONLY, ro);
  CHECK_S(colikv_count(s, "branch") == 14, s);
  /* The reader sees what the writer commits. */
  CHECK_S(append(s, "branch", &g, 18) == COLIKV_OK, s);
  CHECK_S(colikv_count(ro, "branch") == 18, ro);
  colikv_close(ro);
  colikv_close(s);

  /* Everything is still there after reopening. */
  CHECK(colikv_open(g_path, 0, &s) == COLIKV_OK);
  CHECK_S(colikv_count(s, "branch") == 18, s);
  CHECK_S(colikv_count(s, "whole") == 20, s);
  CHECK_S(colikv_count(s, "indexed") == 16, s);
  CHECK_S(colikv_count(s, "chat") == 0, s);
  n = load(s, "branch", &out, 64);
  CHECK_S(n == 18, s);
  CHECK(same(&g, &out, 18));

  /* Equal token ids never make conversations share other values, with or
   * without a weights id in the model. */
  {
    colikv_model no_weights = m;
    no_weights.weights_id = NULL;
    check_twins(s, &m, "twin-a", "twin-b");
    check_twins(s, &no_weights, "twin-a-nw", "twin-b-nw");
  }
  colikv_close(s);
  check_engine_calls(&m);
  check_staged_create(&m);
  check_async(&m);

  bufs_free(&h);
  bufs_free(&g);
  bufs_free(&out);
  bufs_free(&ho);
  bufs_free(&hi);
  bufs_free(&outi);
  printf("c_api_test: all checks passed\n");
  return 0;
}
