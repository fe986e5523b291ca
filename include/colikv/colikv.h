/* colikv/colikv.h: the C API, for engines written in C (C99).
 *
 * Every call that fails returns a negative COLIKV_ERR_* code and leaves the
 * store unchanged; colikv_errmsg(store) then says what failed, naming the
 * conversation and what is wrong. No C++ exception ever escapes. A store
 * handle may be used from several threads; calls on it are serialized.
 *
 * KV buffers are the engine's own: Lc[layer] + pos*kv_lora, Rc[layer] +
 * pos*qk_rope, and Ic[layer] + pos*index_hd for the layers with an indexer.
 * Lc, Rc and Ic have n_layers entries; exactly n_indexed entries of Ic are
 * non-NULL (Ic itself may be NULL when n_indexed is 0).
 */
#ifndef COLIKV_C_H
#define COLIKV_C_H

#include <stddef.h>
#include <stdint.h>

#include "colikv/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colikv_store colikv_store;

/* The model signature: the six .coli_kv header fields, plus an optional
 * weights identity (NULL or "" for none). */
typedef struct colikv_model {
  int32_t n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab;
  const char *weights_id;
} colikv_model;

/* open flags */
#define COLIKV_CREATE 1      /* create the file if it does not exist */
#define COLIKV_READONLY 2    /* open read-only; every write fails with COLIKV_ERR_READONLY */
#define COLIKV_SYNC_NORMAL 4 /* synchronous=NORMAL: commits survive a process crash, not
                                necessarily a power loss (default: FULL, they survive both) */
#define COLIKV_PRECISION_BF16 8 /* conversations this handle creates store bf16 (lossy: relative
                                   error <= 2^-8, see colikv::Precision::kBf16); default: f32, exact */

/* error codes: the same values as colikv::ErrorCode */
#define COLIKV_OK 0
#define COLIKV_ERR_NOT_FOUND (-1)
#define COLIKV_ERR_MODEL_MISMATCH (-2)
#define COLIKV_ERR_DIVERGED (-3)
#define COLIKV_ERR_CONFLICT (-4)
#define COLIKV_ERR_CORRUPT (-5)
#define COLIKV_ERR_BUSY (-6)
#define COLIKV_ERR_DISK_FULL (-7)
#define COLIKV_ERR_INVALID (-8)
#define COLIKV_ERR_IO (-9)
#define COLIKV_ERR_READONLY (-10)
#define COLIKV_ERR_TOO_LARGE (-11)
#define COLIKV_ERR_VERSION (-12)
#define COLIKV_ERR_INTERNAL (-13)
#define COLIKV_ERR_EVICTED (-14) /* KV data evicted under the byte budget; token ids kept */

/* Opens or creates a store. On success returns COLIKV_OK and sets *out. On
 * failure returns a negative code and sets *out to a handle that only carries
 * the message (read it with colikv_errmsg, then colikv_close it), or to NULL
 * when even that could not be allocated. */
COLIKV_API int colikv_open(const char *path, int flags, colikv_store **out);

/* Closes the store; NULL is allowed. */
COLIKV_API void colikv_close(colikv_store *s);

/* The message of the last failed call on s ("" if none); valid until the next
 * call on s. Never NULL. */
COLIKV_API const char *colikv_errmsg(const colikv_store *s);

/* Committed tokens of conv; 0 if absent; negative on error. */
COLIKV_API int64_t colikv_count(colikv_store *s, const char *conv);

/* Persists positions [committed, len) of conv in one transaction, creating it
 * if absent. tokens[0, committed) must equal the stored tokens
 * (COLIKV_ERR_DIVERGED otherwise: truncate first); the model must equal the
 * conversation's (COLIKV_ERR_MODEL_MISMATCH). COLIKV_ERR_CONFLICT when another
 * writer committed to conv meanwhile. Returns COLIKV_OK. */
COLIKV_API int colikv_append(colikv_store *s, const char *conv, const colikv_model *m, const int32_t *tokens,
                  int64_t len, const float *const *Lc, const float *const *Rc,
                  const float *const *Ic);

/* Fills tokens[0, n) and the KV buffers for positions [0, n) with the whole
 * committed conversation and returns n; 0 if conv is absent. Fails with
 * COLIKV_ERR_TOO_LARGE when n > max_tokens, COLIKV_ERR_MODEL_MISMATCH when the
 * signatures differ, COLIKV_ERR_CORRUPT when a stored chunk fails its checks,
 * COLIKV_ERR_EVICTED when KV data of those positions was evicted under the
 * store's byte budget: then tokens[0, n) are filled (the KV buffers are not
 * touched) so the engine can re-prefill them and colikv_append them back. */
COLIKV_API int64_t colikv_load(colikv_store *s, const char *conv, const colikv_model *m, int32_t *tokens,
                    int64_t max_tokens, float *const *Lc, float *const *Rc, float *const *Ic);

/* Like colikv_load, but loads only the first min(k, committed) tokens. */
COLIKV_API int64_t colikv_load_prefix(colikv_store *s, const char *conv, const colikv_model *m, int64_t k,
                           int32_t *tokens, float *const *Lc, float *const *Rc, float *const *Ic);

/* Keeps the first len tokens of conv. */
COLIKV_API int colikv_truncate(colikv_store *s, const char *conv, int64_t len);

/* Deletes conv; chunks no other conversation uses are freed. */
COLIKV_API int colikv_delete(colikv_store *s, const char *conv);

/* Creates dst from the first len tokens of src (len < 0: all), sharing chunks. */
COLIKV_API int colikv_fork(colikv_store *s, const char *src, const char *dst, int64_t len);

/* Longest-prefix lookup: which conversation of model m holds the longest
 * prefix of tokens[0, len)? Returns the number of leading tokens it holds
 * (0 when no conversation of m shares even the first token) and writes its
 * NUL-terminated id to conv_out (or "" when 0 is returned). Ties go to the most
 * recently used conversation. Never crosses models; only token ids that are
 * equal are counted: the conversation found may hold other values for them
 * than this engine computes (another build, a non-deterministic kernel), and
 * loading it returns its own values. The conversation may have been evicted (see
 * COLIKV_ERR_EVICTED): colikv_load_prefix then says so and returns the token
 * ids. COLIKV_ERR_TOO_LARGE when the id and its NUL do not fit conv_cap bytes.
 * Time grows with len, not with the number of conversations. */
COLIKV_API int64_t colikv_match(colikv_store *s, const colikv_model *m, const int32_t *tokens, int64_t len,
                     char *conv_out, size_t conv_cap);

/* Evicts the KV data of the least recently used conversations until the
 * chunk payloads of the store take at most max_bytes (0: evict everything),
 * keeping every conversation's row, metadata and token ids; chunks still used
 * by a kept conversation stay. One transaction. Returns the payload bytes
 * freed (>= 0). */
COLIKV_API int64_t colikv_gc(colikv_store *s, int64_t max_bytes);

/* Stable name of an error code, e.g. "model mismatch". */
COLIKV_API const char *colikv_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* COLIKV_C_H */
