/* colikv.h alone, compiled as C99: what a C program that includes only the
 * C API's header needs to compare the linked library's version with the one
 * it was built against (colikv_version, colikv_version_number).
 *
 * usage: colikv_c_version_test
 * Exits 0 when they agree; otherwise says what is missing or differs and exits 1. */
#include <stdio.h>
#include <string.h>

#include "colikv/colikv.h"

int main(void) {
#if !defined(COLIKV_VERSION_NUMBER) || !defined(COLIKV_VERSION_STRING)
  fprintf(stderr, "colikv/colikv.h defines no COLIKV_VERSION_NUMBER or COLIKV_VERSION_STRING "
                  "(it does not include colikv/version.h)\n");
  return 1;
#else
  if (colikv_version_number() != COLIKV_VERSION_NUMBER) {
    fprintf(stderr, "colikv_version_number() is %d, COLIKV_VERSION_NUMBER %d\n", colikv_version_number(),
            (int)COLIKV_VERSION_NUMBER);
    return 1;
  }
  if (strcmp(colikv_version(), COLIKV_VERSION_STRING) != 0) {
    fprintf(stderr, "colikv_version() is \"%s\", COLIKV_VERSION_STRING \"%s\"\n", colikv_version(),
            COLIKV_VERSION_STRING);
    return 1;
  }
  printf("colikv %s (%d): the header's version macros match the linked library\n", colikv_version(),
         colikv_version_number());
  return 0;
#endif
}
