/* One C handle shared by threads, and a handle inherited by a forked child
 * (colikv.h: "Threads" and "fork()"). Compiled as C99 against the public
 * library; run by CTest (c_api_handles_threads, c_api_handles_fork) and by the
 * ThreadSanitizer stage (.ci/tsan.sh).
 *
 * usage: colikv_c_handles_test threads|fork DB_PATH
 *   threads: two threads fail calls on one handle at once (the error state was
 *            written without a lock: heap corruption), then four threads each
 *            check that the message they read names their own call;
 *   fork:    a child of a process with an append queued calls count and close
 *            on the inherited handle: both return at once (count fails with
 *            COLIKV_ERR_INVALID naming the fork), and the parent's queued turn
 *            still commits.
 * Exits 0 when every check passes; otherwise prints the failing check and
 * exits 1. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "colikv/colikv.h"

#define CHECK(cond, s)                                                                           \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                   \
      if (s) fprintf(stderr, "  colikv_errmsg: %s\n", colikv_errmsg(s));                         \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

#define THREADS 4
#define ITERS 20000

static colikv_store *g_store;
static int g_wrong[THREADS], g_empty[THREADS], g_rc[THREADS];

/* Thread 0 fails truncates (kNotFound, a long message); thread 1 fails with a
 * NULL id (kInvalid, a short one): messages of different lengths rewritten
 * at once is what corrupted the heap. */
static void *crash_run(void *arg) {
  long t = (long)arg;
  for (int i = 0; i < ITERS; i++) {
    if (t == 0) colikv_truncate(g_store, "a-conversation-id-that-does-not-exist-anywhere-in-this-store", 1);
    else colikv_count(g_store, NULL);
    (void)strlen(colikv_errmsg(g_store));
  }
  return NULL;
}

static void *own_message_run(void *arg) {
  long t = (long)arg;
  char id[64];
  snprintf(id, sizeof id, "no-such-conversation-of-thread-%ld", t);
  for (int i = 0; i < ITERS; i++) {
    int rc = colikv_truncate(g_store, id, 1);
    if (rc != COLIKV_ERR_NOT_FOUND) { g_rc[t]++; continue; }
    const char *m = colikv_errmsg(g_store);
    if (!m[0]) g_empty[t]++;
    else if (!strstr(m, id)) g_wrong[t]++;
    /* A successful call clears this thread's message, not the others'. */
    if (colikv_count(g_store, id) != 0 || colikv_errmsg(g_store)[0] != '\0') g_rc[t]++;
  }
  return NULL;
}

/* At exit, after the main thread's thread-local objects are destroyed (an
 * engine closes its store in an atexit handler): a failing call still keeps
 * and returns its message. */
static const char *g_path;
static void at_exit(void) {
  colikv_store *s;
  if (colikv_open(g_path, 0, &s) != COLIKV_OK) {
    fprintf(stderr, "at exit: open: %s\n", colikv_errmsg(s));
    _exit(10);
  }
  if (colikv_truncate(s, "absent-at-exit", 1) != COLIKV_ERR_NOT_FOUND || !strstr(colikv_errmsg(s), "absent-at-exit")) {
    fprintf(stderr, "at exit: %s\n", colikv_errmsg(s));
    _exit(11);
  }
  if (colikv_wait(s, NULL) != COLIKV_OK) _exit(12);
  colikv_close(s);
}

static int threads_mode(const char *path) {
  g_path = path;
  CHECK(colikv_open(path, COLIKV_CREATE, &g_store) == COLIKV_OK, g_store);
  atexit(at_exit);  /* after the first open, as the adapter registers its own */
  pthread_t th[THREADS];
  for (long t = 0; t < 2; t++) CHECK(pthread_create(&th[t], NULL, crash_run, (void *)t) == 0, NULL);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  for (long t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, own_message_run, (void *)t) == 0, NULL);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; t++) {
    if (g_wrong[t] || g_empty[t] || g_rc[t])
      fprintf(stderr, "thread %d: %d messages of another thread's call, %d empty, %d other results (of %d)\n", t,
              g_wrong[t], g_empty[t], g_rc[t], ITERS);
    CHECK(g_wrong[t] == 0 && g_empty[t] == 0 && g_rc[t] == 0, NULL);
  }
  /* The main thread made no call since the open: its state is empty. */
  CHECK(colikv_errmsg(g_store)[0] == '\0' && colikv_diverged_at(g_store) == -1, g_store);
  colikv_close(g_store);
  printf("threads: ok\n");
  return 0;
}

/* Waits for child c; false (and why on stderr) unless it exited with 0. */
static int child_succeeded(pid_t c) {
  int status = 0;
  if (waitpid(c, &status, 0) != c) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  fprintf(stderr, "child: exit status %d, signal %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return 0;
}

#define NL 2
#define KV 16
#define QR 4
static int fork_mode(const char *path) {
  colikv_model m = {NL, KV, QR, 0, 0, 1000, "fork-test"};
  const int64_t len = 40000;
  int32_t *tok = malloc(sizeof(int32_t) * (size_t)len);
  float *L[NL], *R[NL];
  CHECK(tok != NULL, NULL);
  for (int l = 0; l < NL; l++) {
    L[l] = malloc(sizeof(float) * KV * (size_t)len);
    R[l] = malloc(sizeof(float) * QR * (size_t)len);
    CHECK(L[l] && R[l], NULL);
  }
  for (int64_t i = 0; i < len; i++) {
    tok[i] = (int32_t)(i % 1000);
    for (int l = 0; l < NL; l++) {
      for (int k = 0; k < KV; k++) L[l][i * KV + k] = (float)(i * k + l);
      for (int k = 0; k < QR; k++) R[l][i * QR + k] = (float)(i - k - l);
    }
  }
  colikv_store *s;
  CHECK(colikv_open(path, COLIKV_CREATE, &s) == COLIKV_OK, s);
  /* The writer thread exists (in the parent only) and is likely busy. */
  CHECK(colikv_append_async(s, "forked", &m, tok, len, (const float *const *)L, (const float *const *)R, NULL) ==
            COLIKV_OK, s);
  fflush(NULL);
  pid_t c = fork();
  CHECK(c >= 0, NULL);
  if (c == 0) {
    alarm(60); /* a hang (joining a thread the child does not have) ends as SIGALRM */
    int64_t n = colikv_count(s, "forked");
    const char *msg = colikv_errmsg(s);
    if (n != COLIKV_ERR_INVALID || !strstr(msg, "forked child")) {
      fprintf(stderr, "child: count returned %lld: %s\n", (long long)n, msg);
      _exit(3);
    }
    if (colikv_wait(s, NULL) != COLIKV_ERR_INVALID) _exit(4);
    colikv_close(s);
    _exit(0);
  }
  CHECK(child_succeeded(c), NULL);
  CHECK(colikv_wait(s, NULL) == COLIKV_OK, s);
  CHECK(colikv_count(s, "forked") == len, s);
  colikv_close(s);
  /* A child opens the store afresh. Only after the parent closed its handle:
   * a child forked while a parent's thread is inside SQLite or colikv may find
   * one of their locks held forever (POSIX allows a multithreaded process's
   * child only async-signal-safe calls), and SQLite's per-file lock records
   * would be the parent's. */
  fflush(NULL);
  c = fork();
  CHECK(c >= 0, NULL);
  if (c == 0) {
    alarm(60);
    colikv_store *again;
    if (colikv_open(path, 0, &again) != COLIKV_OK) _exit(5);
    if (colikv_count(again, "forked") != len) _exit(6);
    /* A grandchild: the child's handle refuses there too, and a handle the
     * grandchild opens works; the child's keeps working after it. */
    fflush(NULL);
    pid_t g = fork();
    if (g < 0) _exit(7);
    if (g == 0) {
      colikv_store *own;
      if (colikv_count(again, "forked") != COLIKV_ERR_INVALID || !strstr(colikv_errmsg(again), "forked child")) _exit(8);
      if (colikv_open(path, 0, &own) != COLIKV_OK) _exit(9);
      if (colikv_count(own, "forked") != len) _exit(10);
      if (colikv_count(again, "forked") != COLIKV_ERR_INVALID) _exit(11);
      colikv_close(own);
      _exit(0);
    }
    if (!child_succeeded(g)) _exit(12);
    if (colikv_count(again, "forked") != len) _exit(13);
    colikv_close(again);
    _exit(0);
  }
  CHECK(child_succeeded(c), NULL);
  for (int l = 0; l < NL; l++) { free(L[l]); free(R[l]); }
  free(tok);
  printf("fork: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s threads|fork DB_PATH\n", argv[0]);
    return 2;
  }
  char wal[4096], shm[4096];
  snprintf(wal, sizeof wal, "%s-wal", argv[2]);
  snprintf(shm, sizeof shm, "%s-shm", argv[2]);
  remove(argv[2]); remove(wal); remove(shm);
  if (!strcmp(argv[1], "threads")) return threads_mode(argv[2]);
  if (!strcmp(argv[1], "fork")) return fork_mode(argv[2]);
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
