/* A store opened from an atexit handler that was registered before the
 * library's first open: the handler runs after the destructors of statics the
 * first open constructed, so the library must not keep any it uses again. The
 * engine adapter closes its store from such a handler, then writes the
 * process's metrics, which must still hold both stores' counts. */
#include <colikv/colikv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_path;

static void reopen_at_exit(void) {
  colikv_store *s = NULL;
  if (colikv_open(g_path, COLIKV_CREATE, &s) != COLIKV_OK) {
    fprintf(stderr, "atexit: open failed: %s\n", colikv_errmsg(s));
    colikv_close(s);
    _exit(1);
  }
  int64_t n = colikv_count(s, "c");
  if (n != 3) {
    fprintf(stderr, "atexit: count %lld, not 3\n", (long long)n);
    colikv_close(s);
    _exit(1);
  }
  colikv_close(s);
  /* The process's totals, after both stores closed: main's append is in them. */
  static char text[1 << 16];
  int64_t need = colikv_metrics_text(NULL, text, sizeof text);
  if (need <= 0 || need > (int64_t)sizeof text || !strstr(text, "colikv_appends_total{tenant=\"\"} 1\n") ||
      !strstr(text, "colikv_append_tokens_total{tenant=\"\"} 3\n")) {
    fprintf(stderr, "atexit: metrics %lld:\n%s\n", (long long)need, need > 0 ? text : "");
    _exit(1);
  }
  fprintf(stderr, "atexit: reopened, 3 tokens\n");
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  g_path = argv[1];
  unlink(g_path);
  atexit(reopen_at_exit); /* before the library's first open */
  colikv_store *s = NULL;
  if (colikv_open(g_path, COLIKV_CREATE, &s) != COLIKV_OK) {
    fprintf(stderr, "open: %s\n", colikv_errmsg(s));
    _exit(1); /* not through the handler, which would print its success */
  }
  colikv_model m = {1, 2, 1, 0, 0, 100, "atexit-test"};
  int32_t tokens[3] = {1, 2, 3};
  float lc[6] = {0}, rc[3] = {0};
  const float *L[1] = {lc}, *R[1] = {rc};
  if (colikv_append(s, "c", &m, tokens, 3, L, R, NULL) < 0) {
    fprintf(stderr, "append: %s\n", colikv_errmsg(s));
    _exit(1);
  }
  colikv_close(s);
  return 0;
}
