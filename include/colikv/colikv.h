/* colikv/colikv.h: the C API, for engines written in C (C99).
 *
 * Every call that fails returns a negative COLIKV_ERR_* code and leaves the
 * store unchanged; colikv_errmsg(store) then says what failed, naming the
 * conversation and what is wrong. No C++ exception ever escapes.
 *
 * Threads: a store handle may be used from several threads at once; calls on
 * it are serialized. The error state is per thread: colikv_errmsg and
 * colikv_diverged_at return what the calling thread's own last call on the
 * handle left, never another thread's. colikv_close must be called once, by
 * one thread, and no call may start after it returned (see colikv_close).
 *
 * fork(): a handle belongs to the process that opened it. In a child forked
 * from that process every call on an inherited handle fails with
 * COLIKV_ERR_INVALID ("... cannot be used in its forked child ..."), without
 * touching the store, and colikv_close frees it without waiting for anything
 * (the parent's threads and connections are left to the parent, as SQLite
 * requires for a connection carried across fork). Open the store again in
 * the child, or exec: a child may open a store only when the parent had no
 * colikv handle open at the fork (a parent's thread may hold a lock of
 * SQLite's or colikv's forever in the child, and SQLite's per-file lock
 * records would be the parent's).
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
#include "colikv/version.h" /* COLIKV_VERSION_NUMBER, COLIKV_VERSION_STRING */

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
#define COLIKV_FILE_MODE 16 /* colikv_open_ex only: colikv_options.file_mode is set (a store is
                               otherwise created 0600, and so are its -wal and -shm) */
#define COLIKV_CREATE_STAGED 32 /* build a new store under a temporary name; nothing has the
                                   path's name until colikv_publish (colikv::Options::create_staged):
                                   the open fails with COLIKV_ERR_CONFLICT when the path's file
                                   exists, COLIKV_ERR_INVALID with COLIKV_READONLY or for a
                                   postgresql:// location; COLIKV_CREATE is not read */
#define COLIKV_TENANT 64    /* colikv_open_ex only: colikv_options.tenant is set (otherwise the
                               handle is the default tenant's, "") */
#define COLIKV_PREFAULT_STAGING 128 /* an engine's handle: on open the background writer faults
                                       in a staging buffer for colikv_append_async (held while the
                                       handle is open), so that the first turn after a restart does
                                       not page-fault on the engine's thread
                                       (colikv::Options::prefault_async_staging) */

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
#define COLIKV_ERR_UNSUPPORTED (-15) /* the store's backend does not offer the call */

/* Opens or creates a store. On success returns COLIKV_OK and sets *out. On
 * failure returns a negative code and sets *out to a handle that only carries
 * the message (read it with colikv_errmsg, then colikv_close it), or to NULL
 * when even that could not be allocated. */
COLIKV_API int colikv_open(const char *path, int flags, colikv_store **out);

/* Open options beyond the flags; a zeroed struct means the defaults.
 * Fields added after the first three are read only when a flag says the caller
 * set them (COLIKV_FILE_MODE for file_mode, COLIKV_TENANT for tenant): a
 * caller built against an older header passes a shorter struct and never sets
 * such a flag, so nothing past its struct is read. */
typedef struct colikv_options {
  int flags;               /* COLIKV_CREATE, COLIKV_READONLY, ... as for colikv_open */
  int busy_timeout_ms;     /* how long a write waits for another writer's lock; 0: 5000 */
  int64_t max_store_bytes; /* byte budget of the KV data, evicting the least recently used
                              conversations (colikv::Options::max_store_bytes); 0: unlimited */
  int file_mode;           /* read with COLIKV_FILE_MODE in flags: permission bits of a store
                              this call creates, and of its -wal and -shm (masked by the umask;
                              colikv::Options::file_mode); without the flag: 0600 */
  const char *tenant;      /* read with COLIKV_TENANT in flags: the tenant (sharing domain) the
                              handle sees and writes, as colikv::Options::tenant; NULL or "" is
                              the default tenant. A name holding a control character or longer
                              than 255 bytes fails with COLIKV_ERR_INVALID. A tenant the store
                              does not hold is created by a writable handle; with
                              COLIKV_READONLY it fails with COLIKV_ERR_NOT_FOUND ("no such
                              tenant 'X'"). Copied: need not outlive the call. */
} colikv_options;

/* colikv_open with options; o == NULL means { COLIKV_CREATE, 0, 0 }. A negative
 * busy_timeout_ms or max_store_bytes, or a file_mode (with COLIKV_FILE_MODE)
 * outside 0..0777, fails with COLIKV_ERR_INVALID. *out as for colikv_open. */
COLIKV_API int colikv_open_ex(const char *path, const colikv_options *o, colikv_store **out);

/* Closes the store; NULL is allowed. Calls other threads have in flight on s
 * are waited for (one blocked in colikv_append_async at the queue bound
 * finishes queueing its turn); a call that starts while colikv_close runs
 * fails with COLIKV_ERR_INVALID; one that starts after it returned uses freed
 * memory. Then every queued append is committed before the handle is freed.
 * A queued append that fails then is not reported anywhere: call
 * colikv_wait(s, NULL) first to learn whether everything was saved. */
COLIKV_API void colikv_close(colikv_store *s);

/* For a handle opened with COLIKV_CREATE_STAGED: commits every queued append,
 * closes the store and gives its file the path's name, never replacing a
 * file (colikv::Store::publish). Returns COLIKV_OK; COLIKV_ERR_CONFLICT when a
 * file of that name appeared meanwhile (left as it is), COLIKV_ERR_DISK_FULL
 * when the store's WAL could not be folded into its file, a queued append's
 * error, COLIKV_ERR_IO; COLIKV_ERR_INVALID, changing nothing, for a handle
 * not opened so or published already. On failure the new store is discarded
 * and nothing has the path's name. Afterwards, either way, every call on s
 * but colikv_errmsg and colikv_close fails with COLIKV_ERR_INVALID: close s
 * and open the path again to use the store. */
COLIKV_API int colikv_publish(colikv_store *s);

/* The message of the calling thread's last call on s if it failed ("" if it
 * succeeded, or if this thread made none); valid until this thread's next
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

/* Copies positions [committed, len) of conv out of the engine's buffers and
 * returns; the store encodes and commits them in the background, in order per
 * conversation, one transaction per call as colikv_append. The engine may
 * overwrite its buffers as soon as this returns. committed counts what is
 * stored and what is queued. Errors found before queueing (model mismatch,
 * divergence from what is stored or queued, invalid arguments, a read-only
 * store) are returned here and queue nothing; so is the error of an earlier
 * queued append of conv that colikv_wait has not reported yet. Blocks while
 * the queued appends would hold more than the queue bound (1 GiB of staged
 * rows; colikv::Options::max_queued_bytes). Every other call on conv first
 * waits for its queued appends (a caller reads its own writes); colikv_close
 * commits everything queued. A crash loses the queued appends not yet
 * committed, never part of one. */
COLIKV_API int colikv_append_async(colikv_store *s, const char *conv, const colikv_model *m, const int32_t *tokens,
                                   int64_t len, const float *const *Lc, const float *const *Rc,
                                   const float *const *Ic);

/* Waits until every queued append of conv (NULL: of every conversation) is
 * committed. Returns COLIKV_OK, or the first error a queued append of it met
 * since the last wait (COLIKV_ERR_DISK_FULL, COLIKV_ERR_CONFLICT when another
 * writer changed conv meanwhile, ...): the appends queued after the failed one
 * are dropped and the store holds the last good turn. After COLIKV_OK every
 * append queued before the call is committed, as durable as the store's
 * synchronous mode makes a commit. */
COLIKV_API int colikv_wait(colikv_store *s, const char *conv);

/* Rewrites conv from position `from` on, in one transaction: keeps [0, from),
 * which must equal tokens[0, from) (else COLIKV_ERR_DIVERGED, see
 * colikv_diverged_at, and nothing changes), and replaces everything after it
 * with positions [from, len); [0, from) keeps its stored values exactly, even
 * where the engine recomputed a row meanwhile (colikv_append re-encodes the
 * rows of a tail it re-packs into a full chunk from the buffers). A stored conversation
 * longer than len is cut.
 * colikv_append is colikv_write with from = the committed count. Creates conv
 * when absent (from must then be 0). COLIKV_ERR_INVALID when from < 0,
 * from > len or from > the committed count; otherwise the errors of
 * colikv_append. */
COLIKV_API int colikv_write(colikv_store *s, const char *conv, const colikv_model *m, const int32_t *tokens,
                            int64_t from, int64_t len, const float *const *Lc, const float *const *Rc,
                            const float *const *Ic);

/* The first differing position of the calling thread's last call on s when
 * it failed with COLIKV_ERR_DIVERGED; -1 otherwise. */
COLIKV_API int64_t colikv_diverged_at(const colikv_store *s);

/* A conversation's row. */
typedef struct colikv_info {
  int64_t tokens;       /* committed tokens */
  colikv_model model;   /* model.weights_id: valid until this thread's next colikv_conversation_info
                           on s ("" for none) */
  int64_t raw_bytes;    /* its .coli_kv record bytes */
  int64_t stored_bytes; /* bytes of the chunks it references (shared ones counted fully) */
  int64_t last_used_ms; /* Unix time in milliseconds of its last load, append or fork */
  int evicted;          /* 1 when some of its KV data was evicted under the byte budget */
} colikv_info;

/* Fills *out with conv's row; COLIKV_ERR_NOT_FOUND when conv is absent. Does
 * not count as a use of conv for the LRU eviction. */
COLIKV_API int colikv_conversation_info(colikv_store *s, const char *conv, colikv_info *out);

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

/* Fills positions [from, to) of conv: tokens[from, to) and the rows from..to-1
 * of the KV buffers (addressed as colikv_load addresses them); nothing before
 * `from` is written (but on COLIKV_ERR_EVICTED tokens[0, to) are). Returns
 * to - from. The errors of colikv_load, COLIKV_ERR_NOT_FOUND when conv is
 * absent, and COLIKV_ERR_INVALID unless 0 <= from <= to <= the committed count. */
COLIKV_API int64_t colikv_load_range(colikv_store *s, const char *conv, const colikv_model *m, int64_t from,
                                     int64_t to, int32_t *tokens, float *const *Lc, float *const *Rc,
                                     float *const *Ic);

/* Keeps the first len tokens of conv and frees the chunks no other
 * conversation uses. Returns COLIKV_OK; COLIKV_ERR_NOT_FOUND (conv absent),
 * COLIKV_ERR_INVALID (len < 0 or len > the committed count), COLIKV_ERR_CONFLICT
 * (another writer changed conv meanwhile), COLIKV_ERR_READONLY, COLIKV_ERR_BUSY,
 * COLIKV_ERR_CORRUPT, COLIKV_ERR_DISK_FULL, COLIKV_ERR_IO; nothing changes then. */
COLIKV_API int colikv_truncate(colikv_store *s, const char *conv, int64_t len);

/* Deletes conv; chunks no other conversation uses are freed. Returns
 * COLIKV_OK; COLIKV_ERR_NOT_FOUND (conv absent), COLIKV_ERR_READONLY,
 * COLIKV_ERR_BUSY, COLIKV_ERR_CORRUPT, COLIKV_ERR_DISK_FULL, COLIKV_ERR_IO;
 * nothing changes then. On a SQLite store, once it returns none of the bytes
 * it deleted is left in the store's files (database, -wal), unless another
 * connection still reads an older snapshot: then they go at the next delete or
 * at colikv_close after it ends (colikv::Store::remove). */
COLIKV_API int colikv_delete(colikv_store *s, const char *conv);

/* Creates dst from the first len tokens of src (len < 0: all), sharing chunks.
 * Returns COLIKV_OK; COLIKV_ERR_NOT_FOUND (src absent), COLIKV_ERR_CONFLICT (dst
 * exists, or another writer changed src meanwhile), COLIKV_ERR_INVALID (dst
 * empty, len > the committed count), COLIKV_ERR_READONLY, COLIKV_ERR_BUSY,
 * COLIKV_ERR_CORRUPT, COLIKV_ERR_DISK_FULL, COLIKV_ERR_IO; nothing changes then. */
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

/* colikv_match among what can be loaded: the longest prefix some conversation
 * holds with all of its KV data (colikv::Store::match_loadable), so that
 * colikv_load_range(conv_out, ..., returned) does not fail with
 * COLIKV_ERR_EVICTED. For prefix adoption: after an eviction the longest match
 * may have lost its data while another conversation keeps a shorter prefix. */
COLIKV_API int64_t colikv_match_loadable(colikv_store *s, const colikv_model *m, const int32_t *tokens, int64_t len,
                                         char *conv_out, size_t conv_cap);

/* Prefix adoption in one read snapshot (colikv::Store::adopt): finds, as
 * colikv_match_loadable does, the conversation of m holding the longest
 * prefix of prompt[0, len) with all of its KV data, and when it holds more
 * than `from` tokens fills tokens[from, got) and rows from..got-1 of the KV
 * buffers (addressed as colikv_load_range addresses them; nothing before
 * `from` is written) from the same snapshot: another writer cannot change the
 * conversation between the match and the load. The loaded token ids are
 * compared with prompt[from, got) before it returns. Returns got, the prefix
 * length the conversation holds (got <= from: nothing was loaded), and writes
 * its NUL-terminated id to conv_out ("" when 0 is returned). Fails with
 * COLIKV_ERR_INVALID unless 0 <= from <= len, COLIKV_ERR_CORRUPT when a loaded
 * token id is not the prompt's (the store's prefix index disagrees with its
 * chunks: run colikv verify), COLIKV_ERR_TOO_LARGE when the id and its NUL do
 * not fit conv_cap bytes (then the buffers from `from` on may have been
 * written), and the errors of colikv_load_range. */
COLIKV_API int64_t colikv_adopt(colikv_store *s, const colikv_model *m, const int32_t *prompt, int64_t len,
                                int64_t from, char *conv_out, size_t conv_cap, int32_t *tokens, float *const *Lc,
                                float *const *Rc, float *const *Ic);

/* Evicts the KV data of the least recently used conversations until the
 * chunk payloads of the store take at most max_bytes (0: evict everything),
 * keeping every conversation's row, metadata and token ids; chunks still used
 * by a kept conversation stay. One transaction. Returns the payload bytes
 * freed (>= 0). */
COLIKV_API int64_t colikv_gc(colikv_store *s, int64_t max_bytes);

/* Tenant limits (colikv::TenantLimits): each tenant's byte quota and
 * retention, kept in the store. New functions, no struct changed: a caller
 * built against an older header is unaffected. COLIKV_NO_LIMIT stands for
 * "none" in both. */
#define COLIKV_NO_LIMIT (-1)

/* The limits of the handle's tenant: its byte quota into *max_bytes, its
 * retention in milliseconds into *max_idle_ms, COLIKV_NO_LIMIT for none
 * (either pointer may be NULL). Returns COLIKV_OK; COLIKV_ERR_CORRUPT (a
 * stored limit colikv does not write), COLIKV_ERR_IO. */
COLIKV_API int colikv_tenant_limits(colikv_store *s, int64_t *max_bytes, int64_t *max_idle_ms);

/* Replaces both limits of the handle's tenant (colikv::Store::set_tenant_limits):
 * after each append into the tenant, its conversations other than the one
 * written that were not used for longer than max_idle_ms are deleted whole
 * (erased as colikv_delete erases), then its least recently used ones are
 * evicted until the chunk payloads it links take at most max_bytes; another
 * tenant's conversations are never touched. COLIKV_NO_LIMIT: none. Returns
 * COLIKV_OK; COLIKV_ERR_INVALID for any other negative value,
 * COLIKV_ERR_READONLY, COLIKV_ERR_BUSY, COLIKV_ERR_IO; nothing changes then. */
COLIKV_API int colikv_set_tenant_limits(colikv_store *s, int64_t max_bytes, int64_t max_idle_ms);

/* Deletes whole every conversation of the handle's tenant not used for
 * longer than max_idle_ms, in one transaction, erasing their bytes as
 * colikv_delete does (colikv::Store::expire). Returns the number of
 * conversations deleted (>= 0); COLIKV_ERR_INVALID (max_idle_ms < 0),
 * COLIKV_ERR_READONLY, COLIKV_ERR_BUSY, COLIKV_ERR_IO. */
COLIKV_API int64_t colikv_expire(colikv_store *s, int64_t max_idle_ms);

/* The weights identity of a model folder, for colikv_model.weights_id when
 * the engine has none of its own: "w" and 16 hex digits of a SHA-256 over the
 * bytes of model_dir/config.json and the names and sizes of the folder's
 * *.safetensors files (sorted by name). It changes when the configuration or a
 * weights file's size or name changes, not when the folder is moved or
 * copied; the contents of the weights files are not read (that would take
 * minutes on real weights), so re-trained weights of the same shapes keep the
 * identity: an engine that swaps such weights sets its own identity instead.
 * The colikv CLI computes the same one (colikv import --weights-id-from DIR).
 * Writes the NUL-terminated identity to out and returns COLIKV_OK; on failure
 * returns a negative code (COLIKV_ERR_NOT_FOUND: no config.json;
 * COLIKV_ERR_TOO_LARGE: out_size too small; COLIKV_ERR_IO, COLIKV_ERR_INVALID)
 * and writes the message, cut to fit, to out. */
COLIKV_API int colikv_weights_id_from_dir(const char *model_dir, char *out, size_t out_size);

/* What the handle's store counted since it opened (s NULL: this process's
 * totals, every store it opened, closed ones included), in Prometheus's text
 * exposition format: appends, loads, matches, evictions, lock waits, errors
 * by code, latency histograms; the names are in the README's operators'
 * section. The return convention is zstd's: the result is the buffer size
 * the text needs, its terminating NUL included, whether or not it fitted;
 * when len is at least that, buf holds the text and its NUL, otherwise buf is
 * left unchanged. Call with buf NULL and len 0 to size it, then again with a
 * buffer that large; counters move meanwhile, so repeat while the result
 * exceeds len. A negative result is an error code (COLIKV_ERR_INVALID for a
 * handle closed meanwhile or used in a forked child; COLIKV_ERR_INTERNAL out
 * of memory) and buf is left unchanged. */
COLIKV_API int64_t colikv_metrics_text(colikv_store *s, char *buf, size_t len);

/* Stable name of an error code, e.g. "model mismatch". */
COLIKV_API const char *colikv_strerror(int code);

/* The linked library's version, "MAJOR.MINOR.PATCH" (static, never NULL), and
 * MAJOR * 10000 + MINOR * 100 + PATCH: compare with COLIKV_VERSION_STRING and
 * COLIKV_VERSION_NUMBER of colikv/version.h (included here), the header built against. */
COLIKV_API const char *colikv_version(void);
COLIKV_API int colikv_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* COLIKV_C_H */
